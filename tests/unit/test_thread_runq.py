"""evidence.every_thread_runq: each batch's wait for a core from every
thread of its worker, against a hand-computed interpolation."""

import numpy as np
import pytest

from traceml import _core, evidence

MS = 1_000_000


def _readings(pid, t_ms, runq_ms):
    rows = np.zeros(len(t_ms), dtype=_core.SAMPLE_DTYPE)
    rows["t_ns"] = np.asarray(t_ms, dtype=np.int64) * MS
    rows["pid"] = pid
    rows["runq_ns"] = np.asarray(runq_ms, dtype=np.int64) * MS
    return rows


def _batches(rows):
    out = np.zeros(len(rows), dtype=_core.BATCH_RECORD_DTYPE)
    for i, (b, e, cpu, runq, w) in enumerate(rows):
        out[i] = (b * MS, e * MS, cpu * MS, runq * MS, i, 0, w)
    return out


def test_a_helper_threads_wait_for_a_core_counts_as_the_batchs():
    # Worker 0 (pid 11): its threads waited 10 ms a 20 ms reading between
    # 0 and 60 ms (a helper thread queued for a core); worker 1 (pid 12)
    # has no readings and keeps its own.
    samples = np.concatenate([_readings(11, [0, 20, 40, 60], [0, 10, 20, 30]),
                              _readings(99, [0, 60], [0, 0])])
    rec = _batches([(10, 40, 12, 1, 0),     # grew 15 ms; room 30 - 12 = 18
                    (40, 50, 8, 0, 0),      # grew 5 ms; room 2: capped
                    (0, 30, 5, 2, 1)])      # no readings of worker 1
    got = evidence.every_thread_runq(rec, samples, {0: {"worker_pids": [11, 12]}})
    assert got["runq_ns"].tolist() == [15 * MS, 2 * MS, 2 * MS]
    assert rec["runq_ns"].tolist() == [1 * MS, 0, 2 * MS]       # the record is kept
    # The fetching thread's own wait is the least: never lowered.
    rec2 = _batches([(10, 40, 12, 17, 0)])
    assert evidence.every_thread_runq(rec2, samples, {0: {"worker_pids": [11]}})[
        "runq_ns"].tolist() == [17 * MS]
    # No readings at all: the records themselves.
    assert evidence.every_thread_runq(rec, None, {0: {"worker_pids": [11]}}) is rec


def test_cpu_unknown_keeps_the_records_own():
    samples = _readings(11, [0, 100], [0, 50])
    rec = _batches([(0, 100, -1, 3, 0)])
    rec["cpu_ns"] = -1
    got = evidence.every_thread_runq(rec, samples, {0: {"worker_pids": [11]}})
    assert got["runq_ns"].tolist() == [3 * MS]
    assert got["runq_ns"][0] == pytest.approx(rec["runq_ns"][0])


def test_a_workers_wait_for_a_core_outside_making_goes_to_its_batches_transit():
    # Worker 0 (pid 11), readings at 0, 20, 40 ms; its threads waited 4 ms
    # for a core in the first interval and 2 ms in the second.  It made
    # batch 0 over [0, 10] and batch 1 over [21, 25] ms: half and a fifth
    # of the intervals, whose waits are the batches' (every_thread_runq),
    # leaving 2 ms and 1.6 ms outside making.  Step A fetched [8, 14]:
    # batch 0 in transit over [10, 14], the interval's only transit, so
    # all 2 ms; step B fetched [22, 30]: batch 1 in transit over [25, 30],
    # 1.6 ms; step C met no batch: 0.
    samples = _readings(11, [0, 20, 40], [0, 4, 6])
    rec = _batches([(0, 10, 1, 0, 0), (21, 25, 1, 0, 0)])
    idx = np.array([0, 1, -1])
    begin = np.array([8, 22, 31], dtype=np.int64) * MS
    done = np.array([14, 30, 33], dtype=np.int64) * MS
    got = evidence.transit_queued(samples, {0: {"worker_pids": [11]}}, rec, idx, begin, done)
    assert got == pytest.approx([2 * MS, 1.6 * MS, 0.0])
    # Two transits in the second interval share its wait by their length:
    # B's [25, 30] and D's [35, 38] (batch 2 made over [32, 35], also
    # making, so the idle wait is 2 x (1 - 7/20) = 1.3 ms over 8 ms).
    rec3 = _batches([(0, 10, 1, 0, 0), (21, 25, 1, 0, 0), (32, 35, 1, 0, 0)])
    got = evidence.transit_queued(samples, {0: {"worker_pids": [11]}}, rec3,
                                  np.array([0, 1, 2]), np.array([8, 22, 33]) * MS,
                                  np.array([14, 30, 38]) * MS)
    assert got == pytest.approx([2 * MS, 1.3 * MS * 5 / 8, 1.3 * MS * 3 / 8])
    # No readings, no figure.
    assert evidence.transit_queued(None, {0: {"worker_pids": [11]}}, rec, idx, begin,
                                   done) is None
