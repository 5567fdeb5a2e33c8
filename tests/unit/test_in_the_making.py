"""Which batch a stalled step's worker was making during the wait: the one
it received, or, when that was made before the wait, the next one (the
worker burning its next batch holds the GIL its feeder needs to send the
made one).  Checked on hand-made worker records."""

import numpy as np

from traceml import _core, worker_timing

MS = 1_000_000


def _records(spans, worker=0, epoch=0):
    """Batch records of one worker: spans [(begin_ms, end_ms)] in seq order."""
    rec = np.zeros(len(spans), dtype=_core.BATCH_RECORD_DTYPE)
    rec["begin_ns"] = [a * MS for a, _ in spans]
    rec["end_ns"] = [b * MS for _, b in spans]
    rec["seq"] = np.arange(len(spans))
    rec["worker"], rec["epoch"] = worker, epoch
    return rec


def test_a_wait_for_a_made_batch_points_at_the_batch_in_the_making():
    # Batch 1 is made by 10 ms, batch 2 (slow) from 10 to 90 ms.  The step
    # that receives batch 1 waits 15-85 ms: its worker was making batch 2.
    rec = _records([(0, 5), (5, 10), (10, 90), (90, 95)])
    idx = np.array([0, 1, 2, 3])
    begin = np.array([6, 15, 86, 96]) * MS
    done = np.array([6, 85, 91, 97]) * MS
    got = worker_timing.in_the_making(rec, idx, begin, done, np.array([1, 2]))
    np.testing.assert_array_equal(got, [2, 2])


def test_a_batch_still_in_the_making_is_its_own_and_unknowns_stay_unknown():
    rec = _records([(0, 40), (40, 80)])
    idx = np.array([0, -1])
    begin = np.array([10, 45]) * MS
    done = np.array([40, 80]) * MS
    got = worker_timing.in_the_making(rec, idx, begin, done, np.array([0, 1]))
    np.testing.assert_array_equal(got, [0, -1])


def test_another_workers_batch_is_never_the_one_in_the_making():
    # Worker 0's batch was made before the wait; only worker 1 was busy.
    rec = np.concatenate([_records([(0, 5)], worker=0), _records([(0, 50)], worker=1)])
    got = worker_timing.in_the_making(rec, np.array([0]), np.array([10 * MS]),
                                      np.array([40 * MS]), np.array([0]))
    np.testing.assert_array_equal(got, [-1])


def test_a_batch_own_make_time_leaves_out_its_wait_for_a_core():
    # Two batches of 40 ms of work; the second queued 30 ms for a core on
    # a busy host (70 ms to make): both cost 40 ms of their own.  Unknown
    # run-queue waits (-1) leave the make time as it is.
    rec = _records([(0, 40), (40, 110), (110, 150)])
    rec["runq_ns"] = [0, 30 * MS, -1]
    idx = np.array([0, 1, 2, -1])
    np.testing.assert_array_equal(worker_timing.made_ns(rec, idx),
                                  [40 * MS, 70 * MS, 40 * MS, -1])
    np.testing.assert_array_equal(worker_timing.own_made_ns(rec, idx),
                                  [40 * MS, 40 * MS, 40 * MS, -1])
