"""Memory of the main process and the workers (traceml.memory and the
sampler's RSS, PSS and USS readings): the spans and jumps on made-up
readings, what /proc says against the sampler, and copy-on-read on real
forked workers (a list of Python strings against a NumPy array)."""

import os
import random
import time
import warnings

import numpy as np
import pytest

import traceml
from traceml import _core, memory
from traceml.findings import worker_memory

MIB = 2**20


def _samples(rows):
    """SAMPLE_DTYPE readings from (t_ns, pid, rss, uss) rows (uss -1: not a
    deep reading)."""
    out = np.zeros(len(rows), dtype=_core.SAMPLE_DTYPE)
    for i, (t, pid, rss, uss) in enumerate(rows):
        out[i]["t_ns"], out[i]["pid"] = t, pid
        out[i]["rss_bytes"], out[i]["uss_bytes"] = rss, uss
        out[i]["pss_bytes"] = -1 if uss < 0 else uss
    return out


def _steps(epochs):
    """Steps over [a, b) per epoch."""
    steps = np.zeros(len(epochs), dtype=_core.RECORD_DTYPE)
    for i, (e, a, b) in enumerate(epochs):
        steps[i]["epoch"], steps[i]["begin_ns"] = e, a
        steps[i]["fetch_done_ns"] = steps[i]["end_ns"] = b
    return steps


def test_spans_growth_and_jumps_from_made_up_readings():
    main, w0, w1, w2 = 100, 201, 202, 301
    rows = [
        # epoch 0 in [0, 100]: main 500 -> 520 MiB; workers 201, 202.
        (10, main, 500 * MIB, -1), (90, main, 520 * MIB, 40 * MIB),
        (10, w0, 300 * MIB, 10 * MIB), (50, w0, 300 * MIB, 60 * MIB),
        (90, w0, 300 * MIB, 110 * MIB),
        (10, w1, 300 * MIB, 12 * MIB), (90, w1, 300 * MIB, 72 * MIB),
        # epoch 1 in [200, 300]: main starts 800 MiB (a 280 MiB jump); a
        # new worker 301 with one deep reading only.
        (210, main, 800 * MIB, -1), (290, main, 810 * MIB, -1),
        (210, w2, 300 * MIB, 9 * MIB), (290, w2, 300 * MIB, -1),
        (150, w0, 999 * MIB, 999 * MIB),  # between epochs: not counted
    ]
    facts = {0: {"worker_pids": [w0, w1]}, 1: {"worker_pids": [w2]}}
    m = memory.summarise(_samples(rows), _steps([(0, 0, 100), (1, 200, 300)]), facts, main)
    assert m["available"]
    assert m["main"]["rss"] == {"first": 500 * MIB, "last": 810 * MIB, "max": 810 * MIB,
                                "growth": 310 * MIB, "readings": 4}
    e0, e1 = m["epochs"]
    assert e0["workers"][0]["uss"]["growth"] == 100 * MIB
    assert e0["workers"][0]["uss"]["readings"] == 3
    assert e0["workers"][1]["uss"]["growth"] == 60 * MIB
    assert e1["workers"][0]["pid"] == w2 and e1["workers"][0]["uss"]["readings"] == 1
    # Median of the per-worker growths with two deep readings or more.
    assert m["worker_uss_growth"] == float(np.median([100 * MIB, 60 * MIB]))
    assert m["epoch_jumps"] == [{"epoch": 1, "rss_bytes": 280 * MIB}]
    found = worker_memory.memory_findings(m, 2, "fork")
    assert [c for c, _ in found] == ["copy_on_read", "epoch_jump"]
    # Spawned workers copy nothing from the parent: no copy-on-read.
    assert [c for c, _ in worker_memory.memory_findings(m, 2, "spawn")] == ["epoch_jump"]


def test_no_readings_say_so():
    m = memory.summarise(None, _steps([(0, 0, 1)]), {}, 1)
    assert not m["available"] and m["unavailable"] == "no sampler readings"
    assert worker_memory.memory_findings(m, 2, "fork") == []


def _own_readings(steps: int, memory_period_s: float) -> np.ndarray:
    """The sampler's readings of this process during a wrapped loop of
    ``steps`` 2 ms sleeps, read every 2 ms (the ring is the process's:
    readings of earlier loops stay in it, so only this loop's are kept)."""
    traceml.configure(sampler_period_s=0.002, memory_period_s=memory_period_s)
    try:
        assert traceml.configure()["memory_period_s"] == memory_period_s
        rec = traceml.Recorder()
        for _ in rec.wrap(range(steps)):
            time.sleep(0.002)
        samples = _core.sampler_samples()
        since = rec.snapshot()["begin_ns"].min()
    finally:
        traceml.configure(sampler_period_s=0.02, memory_period_s=10.0)
    return samples[(samples["pid"] == os.getpid()) & (samples["t_ns"] >= since)]


def test_the_sampler_reads_rss_every_round_and_uss_every_memory_period():
    mine = _own_readings(150, 0.05)
    assert len(mine) and (mine["rss_bytes"] > 0).all()
    deep = mine[mine["uss_bytes"] >= 0]
    assert len(deep) >= 1
    # Deep readings come a memory period apart (at least; a slow round,
    # under a sanitizer say, spaces them more).
    assert (np.diff(deep["t_ns"]) >= 0.05e9 * 0.99).all()
    assert (deep["pss_bytes"] >= deep["uss_bytes"]).all()
    # Against /proc itself, now: the process's RSS is within 25% of the
    # last reading (it keeps running meanwhile).
    with open("/proc/self/statm") as f:
        rss_now = int(f.read().split()[1]) * os.sysconf("SC_PAGESIZE")
    assert mine["rss_bytes"][-1] == pytest.approx(rss_now, rel=0.25)


torch = pytest.importorskip("torch")


class _Lookups(torch.utils.data.Dataset):
    """160 items, each reading 8000 entries of ``data`` at random."""

    def __init__(self, data):
        self.data = data
        self.n = len(data)

    def __len__(self):
        return 160

    def __getitem__(self, i):
        rng = random.Random(i)
        return sum(len(str(self.data[rng.randrange(self.n)])) for _ in range(8000))


@pytest.mark.slow
@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="AddressSanitizer's shadow memory grows every process's own pages")
@pytest.mark.parametrize("as_numpy", [False, True])
def test_python_objects_are_copied_into_forked_workers_and_numpy_is_not(as_numpy):
    # 2M strings (about 130 MB of objects): each worker's 640,000 random
    # reads touch nearly every page of them (1M gave 30-83 MiB, too near
    # the 32 MiB line on a quiet host).
    n = 2_000_000
    data = np.arange(n, dtype=np.int64) if as_numpy else [str(i) * 3 for i in range(n)]
    warnings.filterwarnings("ignore", message=".*worker processes in total.*")
    traceml.configure(sampler_period_s=0.004, memory_period_s=0.2)
    try:
        rec = traceml.Recorder()
        loader = torch.utils.data.DataLoader(_Lookups(data), batch_size=8, num_workers=2,
                                             multiprocessing_context="fork")
        for _batch in rec.wrap(loader):
            time.sleep(0.001)
        r = rec.report()
    finally:
        traceml.configure(sampler_period_s=0.02, memory_period_s=10.0)
    m = r["memory"]
    assert m["available"] and m["worker_uss_growth"] is not None
    if as_numpy:
        assert m["worker_uss_growth"] < worker_memory.MEM_COW_GROWTH_BYTES
        assert "copy_on_read" not in m["findings"]
    else:
        assert m["worker_uss_growth"] >= worker_memory.MEM_COW_GROWTH_BYTES
        assert m["findings"] == ["copy_on_read"]
        assert any("copy-on-read" in line for line in r["next"])
    assert "memory: main RSS" in str(r)


def test_memory_readings_can_be_turned_off():
    mine = _own_readings(60, 0.0)
    assert len(mine) and (mine["uss_bytes"] == -1).all() and (mine["rss_bytes"] > 0).all()


def test_the_memory_line_says_shrank_for_a_negative_growth():
    from traceml.fmt import fmt_bytes

    assert fmt_bytes(-1_050_624) == "-1.1 MB" and fmt_bytes(-500) == "-500 B"
    line = worker_memory.memory_line({"memory": {"available": True, "main": None,
                                           "worker_uss_growth": -1_050_624}})
    assert line == "memory: workers' unshared memory shrank 1.1 MB within an epoch (median)"
    line = worker_memory.memory_line({"memory": {"available": True, "main": None,
                                           "worker_uss_growth": 2_000_000}})
    assert "grew 2.0 MB" in line
