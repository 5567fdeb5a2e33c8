"""NVML GPU utilisation (csrc/nvml.c, traceml.gpu, evidence.gpu_utilisation)
without a GPU: a fake libnvidia-ml built from tests/fake_nvml.c into the
test's tmp directory, whose samples the test pushes itself, so the truth
is known; the slow/fast split is recomputed here with NumPy from the same
step records."""

import ctypes
import os
import shutil
import subprocess
import time
import types
from pathlib import Path

import numpy as np
import pytest

import traceml
from traceml import _core, evidence, gpu, render
from traceml.findings import gpu_wait

HERE = Path(__file__).resolve().parent.parent
MS = 1_000_000
# The bound on the conversion of a driver timestamp to clock_ns() (csrc/
# nvml.h): the bracket of the clock reads plus NTP's slew over one read
# period, well under 1 ms; the timestamps are whole microseconds.
CONVERSION_NS = 1 * MS


def _build(out: Path, *defines: str) -> Path:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (gcc or cc) to build the fake libnvidia-ml")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", *defines, "-o", str(out),
                    str(HERE / "fake_nvml.c"), "-lpthread"], check=True)
    return out


@pytest.fixture(scope="module")
def fake_path(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("nvml") / "libfake-nvml.so")


@pytest.fixture(scope="module")
def fake_lib(fake_path):
    lib = ctypes.CDLL(str(fake_path))
    lib.fake_nvml_push.restype = ctypes.c_ulonglong
    lib.fake_nvml_push.argtypes = [ctypes.c_uint]
    lib.fake_nvml_fail.argtypes = [ctypes.c_char_p, ctypes.c_int]
    lib.fake_nvml_set_uuid.argtypes = [ctypes.c_char_p]
    lib.fake_nvml_count.argtypes = [ctypes.c_char_p]
    return lib


_serial = [0]


@pytest.fixture
def fake(fake_lib, fake_path, monkeypatch):
    """The fake, reset, with a UUID of its own for this test (so that the
    C ring holds only this test's readings), as traceml's NVML library."""
    fake_lib.fake_nvml_reset()
    _serial[0] += 1
    uuid = f"GPU-{_serial[0]:08x}-fake-4000-8000-000000000000"
    fake_lib.fake_nvml_set_uuid(uuid.encode())
    monkeypatch.setattr(gpu, "_NVML_LIBRARY", str(fake_path))
    monkeypatch.setattr(gpu, "NVML_PERIOD_S", 0.05)
    _core._nvml_stop()
    yield types.SimpleNamespace(lib=fake_lib, uuid=uuid, path=fake_path)
    _core._nvml_stop()


class RealClockCuda:
    """torch.cuda's event interface on the real clock (events complete at
    once), with a device that has a UUID (``props`` for the test to set)."""

    def __init__(self, uuid):
        self.props = types.SimpleNamespace(uuid=uuid)
        self.stream = object()

        class Event:
            def __init__(self, enable_timing=False):
                self.t = None

            def record(self, stream=None):
                self.t = time.monotonic_ns()

            def query(self):
                return True

            def elapsed_time(self, end):
                return (end.t - self.t) / 1e6

        self.Event = Event

    def current_stream(self):
        return self.stream

    def current_device(self):
        return 0

    def get_device_properties(self, i):
        assert i == 0
        return self.props


def run_loop(fake, n=30, stall_every=5, stall_s=0.04, compute_s=0.01):
    """A wrapped loop on the real clock: every stall_every-th fetch sleeps
    stall_s with a sample of 5% pushed in its middle; every step's body
    sleeps compute_s with a sample of 95% in its middle.  Returns (report,
    the pushes as (clock before, stamp, clock after, value), the stall
    steps by construction)."""
    pushes = []

    def push(value):
        m0 = traceml.clock_ns()
        stamp = fake.lib.fake_nvml_push(value)
        pushes.append((m0, stamp, traceml.clock_ns(), value))

    def batches():
        for i in range(n):
            if i % stall_every == stall_every - 1:
                time.sleep(stall_s / 2)
                push(5)
                time.sleep(stall_s / 2)
            yield i

    rec = traceml.Recorder()
    for _ in rec.wrap(batches(), cuda=RealClockCuda(fake.uuid)):
        time.sleep(compute_s / 2)
        push(95)
        time.sleep(compute_s / 2)
    stalls = [i for i in range(n) if i % stall_every == stall_every - 1]
    return rec.report(stall_threshold_s=stall_s / 2), pushes, stalls


def expected_split(steps, stall, steady, t, v):
    """The readings' values in slow and fast intervals, by brute force:
    each reading against every interval."""
    calm = steady & ~stall
    slow = (t[:, None] >= steps["begin_ns"][stall]) & (t[:, None] < steps["fetch_done_ns"][stall])
    fast = np.concatenate([
        (t[:, None] >= steps["begin_ns"][calm]) & (t[:, None] < steps["end_ns"][calm]),
        (t[:, None] >= steps["fetch_done_ns"][stall]) & (t[:, None] < steps["end_ns"][stall]),
    ], axis=1)
    return v[slow.any(axis=1)], v[fast.any(axis=1)]


@pytest.mark.slow
def test_readings_match_the_script_and_split_into_waits_and_the_rest(fake):
    rep, pushes, stalls = run_loop(fake)
    info = _core.gpu_util_info()
    assert info["state"] == "on" and info["uuid"] == fake.uuid and info["error"] is None
    assert info["reads"] >= 2          # read at its period, and at the loop's end
    got = _core.gpu_util_samples()
    # Every pushed sample read once, in order, with its value and stamp.
    m0, stamp, m1, value = (np.array(c, dtype=np.int64) for c in zip(*pushes))
    np.testing.assert_array_equal(got["driver_us"], stamp)
    np.testing.assert_array_equal(got["util_pct"], value.astype(float))
    # ... its stamp moved to clock_ns()'s clock within the stated bound.
    assert np.all(got["t_ns"] >= m0 - CONVERSION_NS) and np.all(got["t_ns"] <= m1 + CONVERSION_NS)

    assert rep["stalls"]["steps"] == stalls
    steps = rep.steps
    stall = np.zeros(len(steps), bool)
    stall[stalls] = True
    steady = np.ones(len(steps), bool)
    steady[rep["epoch_start"]["steps"]] = False
    slow_v, fast_v = expected_split(steps, stall, steady, got["t_ns"], got["util_pct"])
    u = rep["gpu"]["utilisation"]
    assert u["available"] and u["why"] is None and u["uuid"] == fake.uuid
    assert u["readings"] == len(got)
    assert u["slow"] == {"readings": len(slow_v), "mean_pct": pytest.approx(slow_v.mean()),
                         "median_pct": pytest.approx(np.median(slow_v))}
    assert u["fast"] == {"readings": len(fast_v), "mean_pct": pytest.approx(fast_v.mean()),
                         "median_pct": pytest.approx(np.median(fast_v))}
    # By construction: the 5% samples lie in the waits, the 95% in the rest.
    assert sorted(slow_v) == [5.0] * len(stalls)
    assert set(fast_v) == {95.0}
    gaps = np.diff(stamp)
    assert u["window_s"] == pytest.approx(np.median(gaps[gaps > 0]) * 1e-6)
    assert u["rule"] == gpu_wait.GPU_UTIL_IDLE_IN_WAITS
    text = str(rep)
    assert "GPU utilisation (NVML" in text and "the GPU idles while the loop waits for input" in text
    assert "GPU utilisation (NVML" in render.report_html(rep.summary)


@pytest.mark.slow
def test_the_block_round_trips_through_save_and_load(fake, tmp_path):
    rep, pushes, stalls = run_loop(fake, n=10)
    back = traceml.load(rep.save(tmp_path / "run.traceml"))
    assert back["gpu"]["utilisation"] == rep["gpu"]["utilisation"]
    flat = back.flat()
    u = rep["gpu"]["utilisation"]
    assert flat["traceml/gpu_util_wait_pct"] == pytest.approx(u["slow"]["mean_pct"])
    assert flat["traceml/gpu_util_rest_pct"] == pytest.approx(u["fast"]["mean_pct"])


def test_many_samples_in_one_read_and_a_full_ring(fake):
    """More samples than one call asks for (256) are read in several calls,
    none dropped; past the ring's size the oldest are overwritten and
    counted."""
    ring = _core.gpu_util_info()["ring"]
    extra = 100
    push_at = fake.lib.fake_nvml_push_at
    push_at.restype = ctypes.c_ulonglong
    push_at.argtypes = [ctypes.c_ulonglong, ctypes.c_uint]
    rec = traceml.Recorder()
    wrapped = rec.wrap(range(3), cuda=RealClockCuda(fake.uuid))   # NVML starts here
    time.sleep(0.04)
    # 1 us apart, all after NVML started and before the first read (the
    # sampler reads only while the loop runs).
    now = time.time_ns() // 1000
    stamps = np.arange(now - (ring + extra) - 1000, now - 1000, dtype=np.int64)
    values = np.arange(len(stamps)) % 101
    for t, v in zip(stamps.tolist(), values.tolist()):
        push_at(t, v)
    list(wrapped)
    info = _core.gpu_util_info()
    got = _core.gpu_util_samples()
    assert info["dropped"] == 0 and info["error"] is None
    assert info["overwritten"] == extra and len(got) == ring
    np.testing.assert_array_equal(got["driver_us"], stamps[-ring:])
    np.testing.assert_array_equal(got["util_pct"], values[-ring:].astype(float))


def _quick_loop(cuda, n=12):
    rec = traceml.Recorder()
    seen = [i for i in rec.wrap(range(n), cuda=cuda)]
    return rec, seen


@pytest.mark.parametrize("case", ["no library", "no symbol", "init error", "no device",
                                  "samples error", "no uuid", "sampler off"])
def test_unavailable_says_why_and_the_timing_goes_on(fake, tmp_path, monkeypatch, case):
    cuda = RealClockCuda(fake.uuid)
    if case == "no library":
        monkeypatch.setattr(gpu, "_NVML_LIBRARY", str(tmp_path / "absent.so"))
        want = f"{tmp_path / 'absent.so'} could not be loaded"
    elif case == "no symbol":
        lib = _build(tmp_path / "nosamples.so", "-DFAKE_NVML_NO_SAMPLES")
        monkeypatch.setattr(gpu, "_NVML_LIBRARY", str(lib))
        want = f"nvmlDeviceGetSamples not found in {lib}"
    elif case == "init error":
        fake.lib.fake_nvml_fail(b"nvmlInit_v2", 9)
        want = "nvmlInit_v2: Driver Not Loaded (NVML error 9)"
    elif case == "no device":
        cuda.props.uuid = "GPU-ffffffff-none-4000-8000-000000000000"
        want = ("nvmlDeviceGetHandleByUUID(GPU-ffffffff-none-4000-8000-000000000000): "
                "Not Found (NVML error 6)")
    elif case == "samples error":
        fake.lib.fake_nvml_fail(b"nvmlDeviceGetSamples", 3)
        want = "nvmlDeviceGetSamples: Not Supported (NVML error 3)"
    elif case == "no uuid":
        cuda.get_device_properties = None    # an event source without devices
        want = "the event source names no device"
    else:
        before = traceml.configure()["sampler"]
        traceml.configure(sampler=False)
        want = "the sampler thread, which reads NVML, is off"
    try:
        rec, seen = _quick_loop(cuda)
        rep = rec.report()
    finally:
        if case == "sampler off":
            traceml.configure(sampler=before)
    assert seen == list(range(12))
    assert rep["steps"] == 12 and rep["dropped_steps"] == 0
    assert (rep.steps["fetch_done_ns"] >= rep.steps["begin_ns"]).all()
    u = rep["gpu"]["utilisation"]
    assert not u["available"] and want in u["why"]
    assert f"GPU utilisation (NVML): unavailable: {u['why']}" in str(rep)
    if case in ("init error", "no device"):
        # nvmlInit_v2 succeeded before the device lookup failed: shut down again.
        calls = (fake.lib.fake_nvml_count(b"nvmlInit_v2"),
                 fake.lib.fake_nvml_count(b"nvmlShutdown"))
        assert calls == ((1, 0) if case == "init error" else (1, 1))


def test_off_unless_cuda_events_are_on(fake):
    rec = traceml.Recorder()
    list(rec.wrap(range(5)))
    assert fake.lib.fake_nvml_count(b"nvmlInit_v2") == 0
    assert _core.gpu_util_info()["state"] == "off"
    assert "gpu" not in rec.report().summary
    _quick_loop(RealClockCuda(fake.uuid), n=5)
    assert fake.lib.fake_nvml_count(b"nvmlInit_v2") == 1
    assert _core.gpu_util_info()["state"] == "on"
    # A second timeline on the same device loads nothing again.
    _quick_loop(RealClockCuda(fake.uuid), n=5)
    assert fake.lib.fake_nvml_count(b"nvmlInit_v2") == 1
    _core._nvml_stop()
    assert fake.lib.fake_nvml_count(b"nvmlShutdown") == 1
    assert _core.gpu_util_info()["state"] == "off"


def test_a_forked_child_starts_with_nvml_off(fake):
    """A DataLoader worker (a forked child) neither reads nor shuts down the
    parent's NVML: its sampler starts over with NVML off."""
    _quick_loop(RealClockCuda(fake.uuid), n=3)
    assert _core.gpu_util_info()["state"] == "on"
    reads = fake.lib.fake_nvml_count(b"nvmlDeviceGetSamples")
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            info = _core.gpu_util_info()
            list(traceml.wrap(range(3)))     # the child's own sampler runs
            ok = (info["state"] == "off" and info["readings"] == 0
                  and fake.lib.fake_nvml_count(b"nvmlShutdown") == 0
                  and fake.lib.fake_nvml_count(b"nvmlDeviceGetSamples") == reads)
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _core.gpu_util_info()["state"] == "on"     # the parent's is untouched


def test_a_run_file_without_the_block_still_loads(fake, tmp_path):
    rec, _ = _quick_loop(RealClockCuda(fake.uuid))
    rep = rec.report()
    del rep.summary["gpu"]["utilisation"]       # as saved before NVML was read
    back = traceml.load(rep.save(tmp_path / "old.traceml"))
    assert "utilisation" not in back["gpu"]
    assert "GPU utilisation" not in str(back) and "GPU-visible wait" in str(back)
    assert not any(k.startswith("traceml/gpu_util") for k in back.flat())
    assert gpu_wait.gpu_util_lines(None) == []


def test_nvml_start_arguments_are_checked():
    with pytest.raises(TypeError, match="library"):
        _core._nvml_start(b"lib", "GPU-x", 10 * MS)
    with pytest.raises(TypeError, match="uuid"):
        _core._nvml_start("lib", 3, 10 * MS)
    with pytest.raises(ValueError, match="uuid"):
        _core._nvml_start("lib", "GPU\0x", 10 * MS)
    with pytest.raises(ValueError, match="library"):
        _core._nvml_start("x" * 300, "GPU-x", 10 * MS)
    with pytest.raises(ValueError, match="period_ns"):
        _core._nvml_start("lib", "GPU-x", 10)


def test_device_uuid_as_nvml_spells_it():
    b = bytes(range(16))
    want = "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"
    assert gpu._uuid_text(b) == want
    assert gpu._uuid_text(types.SimpleNamespace(bytes=b)) == want
    assert gpu._uuid_text(types.SimpleNamespace(bytes=list(b))) == want   # torch's _CUuuid
    assert gpu._uuid_text(want[4:]) == want
    assert gpu._uuid_text(want) == want
    assert gpu._uuid_text("MIG-" + want[4:]) == "MIG-" + want[4:]
    with pytest.raises(ValueError):
        gpu._uuid_text(b"short")


# --- the pure parts ---------------------------------------------------------------


def _steps(durations_fetch, durations_body, gaps=None, t0=10**12):
    """Step records with these durations, ``gaps`` ns between a step's end
    and the next begin (none by default)."""
    n = len(durations_fetch)
    steps = np.zeros(n, dtype=_core.RECORD_DTYPE)
    t = t0
    for i in range(n):
        steps["begin_ns"][i] = t
        steps["fetch_done_ns"][i] = t + durations_fetch[i]
        steps["end_ns"][i] = t + durations_fetch[i] + durations_body[i]
        t = steps["end_ns"][i] + (gaps[i] if gaps is not None else 0)
    return steps


@pytest.mark.parametrize("seed", range(5))
def test_split_against_brute_force_on_random_runs(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 80))
    steps = _steps(rng.integers(1, 50, n) * MS, rng.integers(1, 50, n) * MS,
                   rng.integers(0, 3, n) * MS)
    stall = rng.random(n) < 0.3
    steady = rng.random(n) < 0.9
    span = (int(steps["begin_ns"][0]) - 20 * MS, int(steps["end_ns"][-1]) + 20 * MS)
    m = int(rng.integers(0, 200))
    t = np.sort(rng.integers(*span, m))
    # Some readings exactly on interval edges.
    for k, edge in enumerate(("begin_ns", "fetch_done_ns", "end_ns")):
        at = slice(5 * k, min(m, 5 * k + 5))
        t[at] = steps[edge][rng.integers(0, n, len(t[at]))]
    t.sort()
    samples = np.zeros(m, dtype=_core.GPU_UTIL_DTYPE)
    samples["t_ns"] = t
    samples["driver_us"] = np.sort(rng.integers(1, 10**6, m))
    samples["util_pct"] = rng.integers(0, 101, m)
    nvml = {"uuid": "GPU-x", "why": None, "samples": samples,
            "info": {"state": "on", "uuid": "GPU-x", "error": None, "period_s": 0.5,
                     "overwritten": 0, "dropped": 0}}
    u = evidence.gpu_utilisation(steps, stall, steady, nvml)
    lo, hi = steps["begin_ns"].min(), steps["end_ns"].max()
    inside = samples[(t >= lo) & (t < hi)]
    slow_v, fast_v = expected_split(steps, stall, steady, inside["t_ns"], inside["util_pct"])
    assert u["readings"] == len(inside)
    for kind, v in (("slow", slow_v), ("fast", fast_v)):
        assert u[kind]["readings"] == len(v)
        assert u[kind]["mean_pct"] == (pytest.approx(v.mean()) if len(v) else None)
        assert u[kind]["median_pct"] == (pytest.approx(np.median(v)) if len(v) else None)
    assert u["rule"] == gpu_wait.gpu_util_rule(len(slow_v), len(fast_v), u["slow"]["mean_pct"],
                                             u["fast"]["mean_pct"])


def test_another_device_or_no_device_is_unavailable():
    steps = _steps([MS] * 3, [MS] * 3)
    no = np.zeros(3, bool)
    base = {"samples": np.zeros(0, _core.GPU_UTIL_DTYPE),
            "info": {"state": "on", "uuid": "GPU-b", "error": None}}
    u = evidence.gpu_utilisation(steps, no, ~no, {**base, "uuid": "GPU-a", "why": None})
    assert not u["available"] and "another GPU" in u["why"] and "GPU-b" in u["why"]
    u = evidence.gpu_utilisation(steps, no, ~no, {**base, "uuid": None, "why": "because"})
    assert not u["available"] and u["why"] == "because"


def test_util_rule_thresholds():
    k = gpu_wait.GPU_UTIL_MIN_READINGS
    drop, ratio = gpu_wait.GPU_UTIL_MIN_DROP_PCT, gpu_wait.GPU_UTIL_MAX_RATIO
    assert gpu_wait.gpu_util_rule(k - 1, k, 0.0, 100.0) == gpu_wait.GPU_UTIL_TOO_FEW
    assert gpu_wait.gpu_util_rule(k, k - 1, 0.0, 100.0) == gpu_wait.GPU_UTIL_TOO_FEW
    assert gpu_wait.gpu_util_rule(k, k, 0.0, 100.0) == gpu_wait.GPU_UTIL_IDLE_IN_WAITS
    # The drop alone: exactly at the bound fires, just under does not.
    fast = drop / (1 - ratio)            # where both bounds meet
    assert gpu_wait.gpu_util_rule(k, k, fast - drop, fast) == gpu_wait.GPU_UTIL_IDLE_IN_WAITS
    assert gpu_wait.gpu_util_rule(k, k, fast - drop + 0.5, fast + 0.4) is None
    # A large drop that leaves the GPU busy in the waits says nothing.
    assert gpu_wait.gpu_util_rule(k, k, 60.0, 60.0 + drop + 5) is None
    assert gpu_wait.gpu_util_rule(k, k, 90.0, 20.0) is None
