"""traceml.worker_timing's overlaps of each input wait with the awaited
worker's batches: the time it was making them (busy_during) and the part
of that it waited for a core (queued_during), each against a brute-force
sum over random batches and waits."""

import numpy as np

from traceml import _core, worker_timing


def _random_case(rng, runq: bool):
    """Batch records of 2 epochs x 3 workers (one batch at a time each,
    runq_ns -1 or random within the make time) and 30 waits (epoch,
    worker -1 unknown, begin, end)."""
    rows = []
    for e in range(2):
        for w in range(3):
            t = int(rng.integers(0, 50))
            for k in range(int(rng.integers(0, 6))):
                t += int(rng.integers(0, 20))
                d = int(rng.integers(0, 30))
                rows.append((t, t + d, 5, int(rng.integers(-1, d + 1)) if runq else -1, k, e, w))
                t += d
    recs = (np.array(rows, dtype=_core.BATCH_RECORD_DTYPE) if rows
            else np.zeros(0, _core.BATCH_RECORD_DTYPE))
    n = 30
    epoch = rng.integers(0, 3, n).astype(np.int32)
    worker = rng.integers(-1, 4, n).astype(np.int32)
    begin = rng.integers(0, 200, n)
    end = begin + rng.integers(0, 60, n)
    return recs, epoch, worker, begin, end


def _overlap(r, begin, end):
    return max(0, min(r["end_ns"], end) - max(r["begin_ns"], begin))


def test_busy_during_is_the_overlap_with_the_workers_own_batches():
    rng = np.random.default_rng(1)
    for _ in range(200):
        recs, epoch, worker, begin, end = _random_case(rng, runq=False)
        got = worker_timing.busy_during(recs, epoch, worker, begin, end)
        for i in range(len(epoch)):
            mine = recs[(recs["epoch"] == epoch[i]) & (recs["worker"] == worker[i])]
            want = -1 if worker[i] < 0 or len(mine) == 0 else sum(
                _overlap(r, begin[i], end[i]) for r in mine)
            assert got[i] == want


def test_a_workers_wait_for_a_core_is_spread_over_its_batch():
    # From queued_during's definition: for each wait, the sum over its
    # worker's batches (same epoch) of overlap x runq / make, runq -1 read 0.
    rng = np.random.default_rng(3)
    for _ in range(200):
        recs, epoch, worker, begin, end = _random_case(rng, runq=True)
        got = worker_timing.queued_during(recs, epoch, worker, begin, end)
        for i in range(len(epoch)):
            mine = recs[(recs["epoch"] == epoch[i]) & (recs["worker"] == worker[i])]
            if worker[i] < 0 or len(mine) == 0:
                assert got[i] == -1
                continue
            want = sum(_overlap(r, begin[i], end[i]) * max(r["runq_ns"], 0)
                       / (r["end_ns"] - r["begin_ns"])
                       for r in mine if r["end_ns"] > r["begin_ns"])
            assert abs(got[i] - want) <= 1, (got[i], want)


def test_the_other_workers_time_on_a_cpu_is_their_union_inside_each_interval():
    # Against a brute-force count of the covered nanoseconds: a unit of
    # time [t, t + 1) counts when some other worker of the interval's epoch
    # made a batch over it with cpu_ns >= ON_CPU_SHARE x its make time.
    rng = np.random.default_rng(5)
    for _ in range(60):
        recs, epoch, worker, begin, end = _random_case(rng, runq=False)
        recs["cpu_ns"] = rng.integers(0, 31, len(recs))
        got = worker_timing.others_on_cpu_during(recs, epoch, worker, begin, end)
        for i in range(len(epoch)):
            others = recs[(recs["epoch"] == epoch[i]) & (recs["worker"] != worker[i])]
            if worker[i] < 0 or len(others) == 0:
                assert got[i] == -1
                continue
            make = others["end_ns"] - others["begin_ns"]
            hot = others[(make > 0) & (others["cpu_ns"] >= worker_timing.ON_CPU_SHARE * make)]
            want = sum(any(r["begin_ns"] <= t < r["end_ns"] for r in hot)
                       for t in range(begin[i], end[i]))
            assert got[i] == want
