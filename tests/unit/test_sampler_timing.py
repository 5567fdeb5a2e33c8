"""The main process's sampler timing: the C TimedIter set to time only
inside clocked fetches, and each call's overlap with the fetch windows."""

import numpy as np
import pytest

import traceml
from traceml import _core, worker_timing


def _calls(spans, cpu=None):
    items = np.zeros(len(spans), dtype=_core.ITEM_RECORD_DTYPE)
    items["begin_ns"] = [a for a, _ in spans]
    items["end_ns"] = [b for _, b in spans]
    items["cpu_ns"] = cpu if cpu is not None else -1
    return items


def test_each_call_counts_by_its_overlap_with_each_window():
    # Windows [0, 10), [20, 30), [40, 50); calls inside, across a window's
    # end, between windows, and one spanning two windows.
    begin, end = np.array([0, 20, 40]), np.array([10, 30, 50])
    items = _calls([(2, 6), (8, 14), (15, 18), (25, 45)], cpu=[4, 6, 3, -1])
    wall, cpu = worker_timing.sampler_in_waits(items, begin, end)
    assert wall.tolist() == [4 + 2, 5, 5]
    # CPU in the overlap's share of each call (-1 reads 0).
    assert cpu.tolist() == [4 + 6 * 2 // 6, 0, 0]
    # Brute force over every ns.
    for j, (a, b) in enumerate(zip(begin, end)):
        inside = sum(len(set(range(c0, c1)) & set(range(a, b))) for c0, c1 in
                     zip(items["begin_ns"], items["end_ns"]))
        assert wall[j] == inside
    assert worker_timing.sampler_in_waits(items[:0], begin, end)[0].tolist() == [0, 0, 0]
    # Windows in any order: the answer follows them.
    back = worker_timing.sampler_in_waits(items, begin[::-1], end[::-1])
    assert back[0].tolist() == wall[::-1].tolist() and back[1].tolist() == cpu[::-1].tolist()


def test_clocked_only_times_the_calls_inside_clocked_fetches_alone():
    log = _core.BatchLog(capacity=1, items=64)
    timed = _core.TimedIter(log, iter(range(100)), 3, 0)
    timed.clocked_only = 1
    next(timed)                       # outside any fetch: counted, not timed
    assert timed.position == 1 and len(log.drain_items()) == 0

    def batches():
        while True:
            yield next(timed)         # inside each fetch of the wrapped loop

    rec = traceml.Recorder()
    got = []
    for x in rec.wrap(batches()):
        got.append(x)
        if len(got) == 5:
            break
    calls = log.drain_items()
    # The first fetches of an epoch are clocked: each one's call is timed,
    # in order, tagged with the epoch given, within its fetch.
    assert got == [1, 2, 3, 4, 5] and timed.position == 6
    assert calls["index"].tolist() == [1, 2, 3, 4, 5]
    assert (calls["epoch"] == 3).all() and (calls["kind"] == _core.ITEM_NEXT).all()
    steps = rec.snapshot()
    assert (calls["begin_ns"] >= steps["begin_ns"][:5]).all()
    assert (calls["end_ns"] <= steps["fetch_done_ns"][:5]).all()
    timed.clocked_only = 0
    next(timed)
    assert len(log.drain_items()) == 1


def test_count_lists_counts_each_index_lists_length():
    # The sampler's index lists carry the batch's size (num_workers=0 has
    # no worker timing to give it); other items, and every item without
    # count_lists, count one.
    log = _core.BatchLog(capacity=1, items=64)
    lists = [[1, 2, 3], [4], (5, 6), list(range(32)), 7]
    timed = _core.TimedIter(log, iter(lists), 0, 0)
    assert timed.count_lists == 0
    timed.count_lists = 1
    assert list(timed) == lists
    assert log.drain_items()["count"].tolist() == [3, 1, 1, 32, 1]
    plain = _core.TimedIter(log, iter(lists), 0, 0)
    assert list(plain) == lists and log.drain_items()["count"].tolist() == [1] * 5


def test_batch_sizes_at_no_workers_are_the_index_lists_in_each_fetch():
    from traceml import build

    steps = np.zeros(4, dtype=[("begin_ns", "<i8"), ("fetch_done_ns", "<i8")])
    steps["begin_ns"] = [0, 100, 200, 300]
    steps["fetch_done_ns"] = [50, 150, 250, 350]
    items = np.zeros(3, dtype=_core.ITEM_RECORD_DTYPE)
    items["kind"] = _core.ITEM_NEXT
    items["begin_ns"], items["end_ns"] = [10, 110, 260], [20, 120, 270]
    items["count"] = [4, 32, 4]      # the third falls after its fetch's end
    assert build.worker_code.sizes_at_no_workers(steps, items).tolist() == [4, 32, -1, -1]
    items["count"] = 1               # single indices, or a build that counts one
    assert build.worker_code.sizes_at_no_workers(steps, items) is None


def test_the_sampler_of_a_non_loader_is_left_alone():
    timing = worker_timing.Timing()
    assert worker_timing.time_sampler(iter([1, 2]), timing, 0) is False
    with pytest.raises(ValueError):
        _core.TimedIter(_core.BatchLog(capacity=1, items=4), iter([]), -1, 0)
