"""GPU-visible input waits (traceml.gpu) on CPU: a clock-driven fake of
torch.cuda's event interface drives the wrap iterator and the probes.

The fake holds one stream: an event recorded at host time t completes at
max(t, the end of the work queued before it), and the host's clock is the
test's.  The expected waits come from a separate closed form over the
same schedule (expected_gpu below), not from the fake's events."""

import math
import time

import numpy as np
import pytest

import traceml
from traceml import gpu, render
from traceml.findings import gpu_wait, input_bound

MS = 1_000_000
T0 = 10**12


class FakeCuda:
    """torch.cuda's event interface on a test clock: ``now`` is the host's
    time (ns), ``busy_until`` the end of the work queued on the stream."""

    def __init__(self, now=T0):
        self.now = now
        self.busy_until = now
        self.synchronize_calls = 0
        self.queries = 0
        self.records = 0
        self.stream = object()
        fake = self

        class Event:
            def __init__(self, enable_timing=False):
                assert enable_timing, "elapsed_time needs enable_timing=True"
                self.t = None

            def record(self, stream=None):
                assert stream is fake.stream
                fake.records += 1
                self.t = max(fake.now, fake.busy_until)
                fake.busy_until = self.t

            def query(self):
                fake.queries += 1
                return self.t is not None and fake.now >= self.t

            def elapsed_time(self, end):
                if not (self.t is not None and end.t is not None
                        and fake.now >= max(self.t, end.t)):
                    raise RuntimeError("elapsed_time on an event not complete")
                return (end.t - self.t) / 1e6

            def synchronize(self):
                fake.synchronize_calls += 1
                fake.now = max(fake.now, self.t)

        self.Event = Event

    def current_stream(self):
        return self.stream

    def is_available(self):
        return True

    def synchronize(self):
        self.synchronize_calls += 1
        self.now = max(self.now, self.busy_until)

    def launch(self, ns):
        """Queue ns of kernels on the stream (returns at once, as CUDA)."""
        self.busy_until = max(self.now, self.busy_until) + ns


def schedule(fetch, compute, kernel, ahead=None, t0=T0):
    """The host's times of a loop: (call_ns, done_ns) per step and the
    final call, when each fetch takes fetch[i], the body launches kernel[i]
    and works compute[i] on the host, then (``ahead``) blocks until the GPU
    is at most ``ahead`` ns behind (as a launch queue or a
    .item() of the previous step's loss does)."""
    now, busy = t0, t0
    call, done = [], []
    for f, c, k in zip(fetch, compute, kernel):
        call.append(now)
        now += f
        done.append(now)
        busy = max(now, busy) + k
        now += c
        if ahead is not None:
            now = max(now, busy - ahead)
    return np.array(call), np.array(done), now


def expected_gpu(call, done, kernel, t0=T0):
    """Closed form: the GPU reaches step i's begin at max(call_i, end of
    step i-1's kernels); its wait is how much later the batch came."""
    n = len(call)
    begin = np.empty(n, np.int64)
    end_prev = t0
    for i in range(n):
        begin[i] = max(call[i], end_prev)
        end_prev = max(done[i], begin[i]) + kernel[i]
    wait = np.maximum(done - begin, 0)
    return begin, wait


class Batches:
    """A loader whose every fetch moves the fake's host clock by fetch[i]."""

    def __init__(self, fake, fetch):
        self.fake, self.fetch = fake, fetch

    def __iter__(self):
        for f in self.fetch:
            self.fake.now += f
            yield f


def run_wrap(fetch, compute, kernel, ahead=None, ring=gpu.DEFAULT_RING, ready=0,
             epochs=1, marker="wrapped"):
    """``epochs`` wrapped epochs over the schedule (repeated); returns
    (fake, recorder, call, done, end) with the host times of every step."""
    n = len(fetch)
    call, done, end = schedule(list(fetch) * epochs, list(compute) * epochs,
                               list(kernel) * epochs, ahead)
    fake = FakeCuda()
    rec = traceml.Recorder()
    clock = []
    for e in range(epochs):
        clock.append(int(call[e * n]))     # iter(): the epoch's begin
        for c, d in zip(call[e * n:(e + 1) * n], done[e * n:(e + 1) * n]):
            clock += [int(c), int(d)]
        last = int(call[(e + 1) * n]) if e + 1 < epochs else int(end)
        clock += [last, last]              # the call that ends the epoch
    rec._set_test_clock(clock)
    wrapped = rec.wrap(Batches(fake, fetch), cuda=fake, cuda_ring=ring)
    for _ in range(epochs):
        for i, _ in enumerate(wrapped):
            if ready:
                fake.launch(ready)           # the host-to-device copy
                (wrapped.input_ready if marker == "wrapped" else traceml.input_ready)()
            fake.launch(kernel[i])
            fake.now += compute[i]
            if ahead is not None:
                fake.now = max(fake.now, fake.busy_until - ahead)
    assert fake.synchronize_calls == 0
    return fake, rec, call, done, end


def test_gpu_busy_longer_than_the_fetch_reads_host_wait_but_no_gpu_wait():
    n = 40
    fetch, compute, kernel = [10 * MS] * n, [1 * MS] * n, [30 * MS] * n
    fake, rec, call, done, end = run_wrap(fetch, compute, kernel, ahead=30 * MS)
    fake.now = fake.busy_until           # the run's end: the GPU has finished
    rep = rec.report()
    g = rep["gpu"]
    begin, want = expected_gpu(call, done, kernel)
    steady = slice(1, None)              # step 0 is the epoch's start-up
    host_wait = done - call
    assert np.all(host_wait[steady] == 10 * MS)
    assert np.all(want[2:] == 0)         # the GPU was busy when each batch came
    assert np.array_equal(rep.gpu_wait_ns, want)
    assert g["steps_read"] == n - 1 and g["coverage"] == 1.0
    assert g["host_wait_s"]["median"] == pytest.approx(0.010)
    assert g["gpu_wait_s"]["p95"] == pytest.approx(np.percentile(want[steady], 95) * 1e-9)
    assert g["gpu_wait_s"]["median"] == 0.0
    gpu_step = np.diff(np.append(begin, max(end, begin[-1] + 0)))
    assert np.array_equal(rep.gpu_step_ns[:-1], gpu_step[:-1])
    assert g["gpu_step_s"]["median"] == pytest.approx(np.median(gpu_step[1:]) * 1e-9)
    # The host reads input-bound; the GPU never waited: it decides.
    assert g["host_diagnosis"] == input_bound.INPUT_BOUND
    assert g["rule"] == gpu_wait.GPU_DID_NOT_WAIT
    assert rep["diagnosis"] == input_bound.COMPUTE_BOUND
    assert "GPU waited only" in rep["diagnosis_rule"]
    assert any("The GPU waits for input 0%" in line for line in rep["next"])


def test_fetch_longer_than_the_gpu_step_reads_both_waits_large():
    n = 30
    fetch, compute, kernel = [30 * MS] * n, [1 * MS] * n, [5 * MS] * n
    fake, rec, call, done, end = run_wrap(fetch, compute, kernel)
    fake.now = fake.busy_until
    rep = rec.report()
    g = rep["gpu"]
    begin, want = expected_gpu(call, done, kernel)
    # The GPU idles from the end of step i-1's kernels (4 ms after the
    # fetch began) to the batch: 26 ms of each 30 ms fetch.
    assert np.all(want[1:] == 26 * MS)
    assert np.array_equal(rep.gpu_wait_ns, want)
    assert g["gpu_wait_s"]["mean"] == pytest.approx(want[1:].mean() * 1e-9)
    assert g["host_wait_s"]["mean"] == pytest.approx(0.030)
    assert g["gpu_share"] == pytest.approx(26 / 31)
    assert g["host_share"] == pytest.approx(30 / 31)
    assert g["rule"] == gpu_wait.GPU_AGREES and rep["diagnosis"] == input_bound.INPUT_BOUND


@pytest.mark.parametrize("marker", ["wrapped", "module"])
def test_input_ready_counts_the_copy_in_the_gpu_visible_wait(marker):
    n = 20
    fetch, compute, kernel = [30 * MS] * n, [1 * MS] * n, [5 * MS] * n
    fake, rec, call, done, _ = run_wrap(fetch, compute, kernel, ready=3 * MS, marker=marker)
    fake.now = fake.busy_until
    rep = rec.report()
    _, plain = expected_gpu(call, done, [k + 3 * MS for k in kernel])
    # The copy runs on the stream after the batch came: 3 ms more wait.
    assert np.array_equal(rep.gpu_wait_ns, plain + 3 * MS)
    assert rep["gpu"]["ready_marked"] == n - 1


def test_epochs_are_read_apart():
    n = 10
    fetch, compute, kernel = [2 * MS + 7 * i for i in range(n)], [1 * MS] * n, [3 * MS] * n
    fake, rec, call, done, end = run_wrap(fetch, compute, kernel, epochs=2)
    fake.now = fake.busy_until
    rep = rec.report()
    begin, want = expected_gpu(call, done, kernel * 2)
    assert np.array_equal(rep.gpu_wait_ns, want)
    step = rep.gpu_step_ns
    assert np.array_equal(step[:n - 1], np.diff(begin[:n]))
    assert np.array_equal(step[n:-1], np.diff(begin[n:]))
    # Each epoch's last GPU step ends at the event of the call that ended
    # the epoch (reached once the step's kernels were done), not at the
    # next epoch's first begin.
    for last, final_call in ((n - 1, call[n]), (2 * n - 1, end)):
        kernels_done = max(done[last], begin[last]) + kernel[-1]
        assert step[last] == max(final_call, kernels_done) - begin[last]
    assert rep["gpu"]["steps_read"] == 2 * (n - 1) and rep["epochs"] == 2


def test_events_are_read_lazily_never_synchronised_and_only_once_passed():
    n = 12
    fetch, compute, kernel = [1 * MS] * n, [1 * MS] * n, [20 * MS] * n
    fake, rec, call, done, end = run_wrap(fetch, compute, kernel)
    # The host ran 24 ms; the GPU is 240 ms of kernels in: few steps read.
    tl = rec._gpu[1]
    r = tl.readings()
    assert fake.synchronize_calls == 0
    assert len(r["key_ns"]) < 3 and r["pending"] == n - len(r["key_ns"])
    before = rep_wait = rec.report()["gpu"]
    assert before["pending"] > 0 and before["coverage"] < gpu_wait.GPU_MIN_COVERAGE
    assert before["rule"] == gpu_wait.GPU_NOT_USED
    fake.now = fake.busy_until           # the GPU catches up
    rep_wait = rec.report()
    assert rep_wait["gpu"]["pending"] == 0 and rep_wait["gpu"]["steps_read"] == n - 1
    _, want = expected_gpu(call, done, kernel)
    assert np.array_equal(rep_wait.gpu_wait_ns, want)
    assert fake.synchronize_calls == 0


def test_a_full_ring_skips_steps_and_counts_them_never_blocks():
    n, ring = 20, 4
    fetch, compute, kernel = [1 * MS] * n, [1 * MS] * n, [10 * MS] * n
    fake, rec, call, done, end = run_wrap(fetch, compute, kernel, ring=ring)
    # The host was never held back: its clock ran as scheduled.
    assert fake.now == end
    fake.now = fake.busy_until
    rep = rec.report()
    g = rep["gpu"]
    assert g["skipped"] > 0
    assert g["recorded"] + g["skipped"] == n
    assert g["steps_read"] < n - 1 and g["ring"] == ring
    # Steps read hold the right waits; skipped ones read missing (-1).
    _, want = expected_gpu(call, done, kernel)
    got = rep.gpu_wait_ns
    read = got >= 0
    assert read.sum() == g["recorded"]
    assert np.array_equal(got[read], want[read])
    assert "not recorded (ring of 4 full)" in str(rep)


def test_probes_with_cuda_events():
    fake = FakeCuda()
    rec = traceml.Recorder()
    n = 16
    fetch, compute, kernel = [2 * MS] * n, [1 * MS] * n, [10 * MS] * n
    call, done, _ = schedule(fetch, compute, kernel, ahead=10 * MS)
    clock = []
    for c, d in zip(call, done):
        clock += [int(c), int(d), int(d)]   # step_begin, fetch_done, step_end
    rec._set_test_clock(clock)
    tl = traceml.cuda_events(fake, ring=64, recorder=rec)
    for i in range(n):
        rec.step_begin()
        fake.now += fetch[i]
        rec.fetch_done()
        rec.step_end()
        fake.launch(kernel[i])
        fake.now += compute[i]
        fake.now = max(fake.now, fake.busy_until - 10 * MS)
    fake.now = fake.busy_until
    rep = rec.report()
    _, want = expected_gpu(call, done, kernel)
    # The last step has no later step_begin: its reading waits for one.
    assert np.array_equal(rep.gpu_wait_ns[:-1], want[:-1])
    assert rep.gpu_wait_ns[-1] == -1
    assert rep["gpu"]["steps_read"] == n - 1 and tl.recorded == n
    assert fake.synchronize_calls == 0
    assert traceml.cuda_events(False, recorder=rec) is None
    records = fake.records
    rec.step_begin()
    rec.fetch_done()
    assert fake.records == records       # off: no event


def test_report_block_round_trips_through_save_and_load(tmp_path):
    n = 24
    fetch, compute, kernel = [10 * MS] * n, [1 * MS] * n, [30 * MS] * n
    fake, rec, *_ = run_wrap(fetch, compute, kernel, ahead=30 * MS)
    fake.now = fake.busy_until
    rep = rec.report()
    path = rep.save(tmp_path / "run.traceml")
    back = traceml.load(path)
    assert back["gpu"] == rep["gpu"]
    assert back["diagnosis"] == rep["diagnosis"] == input_bound.COMPUTE_BOUND
    # The per-step readings travel too (int64, -1 where not read).
    # (every step was read; steps_read counts the steady ones)
    assert (rep.gpu_wait_ns >= 0).all() and rep["gpu"]["steps_read"] == n - 1
    np.testing.assert_array_equal(back.gpu_wait_ns, rep.gpu_wait_ns)
    np.testing.assert_array_equal(back.gpu_step_ns, rep.gpu_step_ns)
    # The timeline has the GPU-visible wait as a counter, one per step read.
    from traceml.trace import trace_events

    gpu_counts = [e for e in trace_events(rep)["traceEvents"]
                  if e["name"] == "GPU-visible input wait"]
    assert [e["args"]["ms"] for e in gpu_counts] == (rep.gpu_wait_ns / 1e6).tolist()
    assert [e["ts"] for e in gpu_counts] == (rep.steps["begin_ns"] / 1e3).tolist()
    # Without a gpu block, no GPU member is read (nor written).
    plain = traceml.load(traceml.Recorder().report().save(tmp_path / "plain.traceml"))
    assert plain.gpu_wait_ns is None and plain.gpu_step_ns is None
    for text in (str(rep), str(back)):
        assert "GPU-visible wait" in text and "GPU step" in text
    assert "GPU-visible wait" in render.report_html(rep.summary)   # no plot: fast
    flat = rep.flat()
    assert flat["traceml/gpu_wait_p95_s"] == pytest.approx(rep["gpu"]["gpu_wait_s"]["p95"])
    assert flat["traceml/gpu_coverage"] == 1.0


def test_reset_forgets_the_readings():
    n = 10
    fake, rec, *_ = run_wrap([5 * MS] * n, [1 * MS] * n, [2 * MS] * n)
    fake.now = fake.busy_until
    assert rec.report()["gpu"]["steps_read"] == n - 1
    rec.reset()
    tl = rec._gpu[1]
    assert tl.recorded == 0 and len(tl.readings()["key_ns"]) == 0


def test_a_failing_event_source_turns_itself_off_and_says_why():
    fake = FakeCuda()

    def broken(stream):
        raise RuntimeError("CUDA error: an illegal memory access")

    rec = traceml.Recorder()
    wrapped = rec.wrap(range(20), cuda=fake)
    fake.Event.record = lambda self, stream=None: broken(stream)
    got = []
    for x in wrapped:                           # the loop itself never breaks
        got.append(x)
        time.sleep(1e-4)    # a step long enough for a diagnosis (input_bound.MIN_MEAN_STEP_NS)
    assert got == list(range(20))
    g = rec.report()["gpu"]
    assert g["recorded"] == 0 and "illegal memory access" in g["error"]
    assert "turned off" in str(rec.report())


def test_off_adds_no_timeline_and_no_block():
    rec = traceml.Recorder()
    wrapped = rec.wrap(range(10))
    assert wrapped.gpu is None
    list(wrapped)
    rep = rec.report()
    assert "gpu" not in rep.to_dict() and rep.gpu_wait_ns is None
    assert "GPU-visible" not in str(rep)
    assert not any(k.startswith("traceml/gpu") for k in rep.flat())


def test_cuda_argument_errors_name_the_argument(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"cuda=True needs a CUDA device"):
        traceml.wrap(range(3), cuda=True)
    with pytest.raises(RuntimeError, match=r"cuda=True"):
        traceml.cuda_events(True)
    assert traceml.wrap(range(3), cuda="auto").gpu is None   # documented fallback
    with pytest.raises(ValueError, match="cuda must be"):
        traceml.wrap(range(3), cuda="yes")
    with pytest.raises(TypeError, match="cuda must be"):
        traceml.wrap(range(3), cuda=3)
    with pytest.raises(TypeError, match="cuda_ring must be an int"):
        traceml.wrap(range(3), cuda=FakeCuda(), cuda_ring=2.5)
    with pytest.raises(ValueError, match="cuda_ring must be between"):
        traceml.wrap(range(3), cuda=FakeCuda(), cuda_ring=1)
    # cuda_events() names its own argument, ring, and itself.
    with pytest.raises(ValueError, match=r"^traceml\.cuda_events\(\): ring must be between"):
        traceml.cuda_events(FakeCuda(), ring=1)
    with pytest.raises(TypeError, match=r"^traceml\.cuda_events\(\): ring must be an int"):
        traceml.cuda_events(FakeCuda(), ring="8")


def test_gpu_diagnosis_rule_thresholds():
    host = input_bound.Diagnosis(input_bound.INPUT_BOUND, 0.5)
    few = input_bound.MIN_STEADY_STEPS
    assert gpu_wait.gpu_diagnosis(host, 0.01, 1.0, few) == (
        input_bound.Diagnosis(input_bound.COMPUTE_BOUND, 0.01), gpu_wait.GPU_DID_NOT_WAIT)
    assert gpu_wait.gpu_diagnosis(host, 0.10, 1.0, few)[0].label == input_bound.BALANCED
    assert gpu_wait.gpu_diagnosis(host, 0.30, 1.0, few) == (host, gpu_wait.GPU_AGREES)
    # Too little coverage or too few steps: the host's diagnosis stands.
    below = math.nextafter(gpu_wait.GPU_MIN_COVERAGE, 0)
    assert gpu_wait.gpu_diagnosis(host, 0.01, below, few) == (host, gpu_wait.GPU_NOT_USED)
    assert gpu_wait.gpu_diagnosis(host, 0.01, 1.0, few - 1) == (host, gpu_wait.GPU_NOT_USED)
    hand = input_bound.Diagnosis(input_bound.HAND_OVER, 0.5)
    assert gpu_wait.gpu_diagnosis(hand, 0.4, 1.0, few) == (hand, gpu_wait.GPU_AGREES)
    calm = input_bound.Diagnosis(input_bound.COMPUTE_BOUND, 0.01)
    assert gpu_wait.gpu_diagnosis(calm, 0.3, 1.0, few)[1] == gpu_wait.GPU_DIFFERS
