"""trace: the workers' item records as slices on their tracks."""

from types import SimpleNamespace

import numpy as np

from traceml import _core, trace


def test_samples_collate_and_garbage_collections_are_named_on_their_worker():
    items = np.zeros(3, dtype=_core.ITEM_RECORD_DTYPE)
    items["kind"] = [_core.ITEM_GETITEM, _core.ITEM_GC, _core.ITEM_COLLATE]
    items["index"] = [7, -1, -1]
    items["count"] = [1, 2, 4]
    items["worker"] = [0, 1, 1]
    items["begin_ns"] = [1_000, 2_000, 5_000]
    items["end_ns"] = [1_500, 4_000, 6_000]
    items["cpu_ns"] = [400, 1_900, -1]
    events = trace._item_events(SimpleNamespace(worker_items=items), 0, 10_000, pid=1)
    assert [e["name"] for e in events] == ["sample 7", "gc generation 2", "collate_fn"]
    assert [e["tid"] - trace.WORKER_TID0 for e in events] == [0, 1, 1]
    assert events[1]["dur"] == 2.0 and events[1]["args"]["cpu_ms"] == 0.0019
    assert events[2]["args"]["cpu_ms"] is None
