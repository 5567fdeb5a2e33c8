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
