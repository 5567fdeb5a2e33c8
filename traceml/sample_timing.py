"""Per-sample and collate times inside DataLoader workers, joined to the
batches they were made in (numbers only: no codes, no words).

Each worker times every ``dataset[i]`` (map-style), every ``next()`` of
its dataset iterator (iterable), a dataset's ``__getitems__`` and every
``collate_fn`` call (``traceml.worker_timing._time_items``, C wrappers in
``csrc/itemlog.c``) into the items ring of its source's
:class:`traceml._core.BatchLog`, on the same clock as the batches.  A
worker makes one batch at a time in one thread, so an item belongs to the
batch record of the same epoch and worker whose [begin, end] holds it
(:func:`join`); a batch that raised wrote no record, and its items join
none.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from . import _core

# Rows of the per-sample table to_dict() carries; past it, the slowest.
TABLE_MAX = 4096
# The slowest samples the summary names one by one.
SLOWEST_SHOWN = 10

SAMPLE_KINDS = (_core.ITEM_GETITEM, _core.ITEM_NEXT)
KIND_NAMES = {_core.ITEM_GETITEM: "map", _core.ITEM_NEXT: "iterable",
              _core.ITEM_GETITEMS: "getitems"}


def gc_inside(gc: np.ndarray, worker: np.ndarray, begin_ns: np.ndarray,
              end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(wall ns, CPU ns) of the garbage collections ``gc`` (item records of
    kind ITEM_GC, shape (g,)) that ran inside each item [begin_ns, end_ns]
    of ``worker`` (shapes (n,)): a collection runs in the thread whose
    allocation set it off, so one that began inside an item and ended by
    its end was that item's.  Both int64, 0 where none ran."""
    wall = np.zeros(len(begin_ns), dtype=np.int64)
    cpu = np.zeros(len(begin_ns), dtype=np.int64)
    for w in np.unique(gc["worker"]).tolist() if len(gc) else []:
        g = gc[gc["worker"] == w]
        g = g[np.argsort(g["begin_ns"], kind="stable")]
        cum_wall = np.r_[0, np.cumsum(np.maximum(g["end_ns"] - g["begin_ns"], 0))]
        cum_cpu = np.r_[0, np.cumsum(np.maximum(g["cpu_ns"], 0))]
        mine = np.flatnonzero(worker == w)
        lo = np.searchsorted(g["begin_ns"], begin_ns[mine], side="left")
        hi = np.minimum(np.searchsorted(g["begin_ns"], end_ns[mine], side="left"),
                        np.searchsorted(g["end_ns"], end_ns[mine], side="right"))
        hi = np.maximum(hi, lo)
        wall[mine] = cum_wall[hi] - cum_wall[lo]
        cpu[mine] = cum_cpu[hi] - cum_cpu[lo]
    return wall, cpu


def _gc_cpu_by_record(gc: np.ndarray, records: np.ndarray) -> np.ndarray:
    """Per batch record (int64 ns, shape (records,)): the CPU of the
    garbage collections (item records of kind ITEM_GC) that ran inside it,
    in whichever of its worker's threads (a collection runs in the thread
    whose allocation set it off: the dataset's, or the queue's feeder
    pickling the last batch)."""
    at = join(gc, records)
    ok = at >= 0
    return np.bincount(at[ok], weights=np.maximum(gc["cpu_ns"][ok], 0),
                       minlength=len(records)).astype(np.int64)


def join(items: np.ndarray, records: np.ndarray) -> np.ndarray:
    """For each item (ITEM_RECORD_DTYPE), the index into ``records``
    (BATCH_RECORD_DTYPE) of the batch that holds it: same epoch and worker,
    ``begin_ns <= item.begin_ns`` and ``item.end_ns <= end_ns``; -1 for
    none."""
    out = np.full(len(items), -1, dtype=np.int64)
    if len(items) == 0 or len(records) == 0:
        return out
    rkey = (records["epoch"].astype(np.int64) << 32) | records["worker"].astype(np.int64)
    ikey = (items["epoch"].astype(np.int64) << 32) | items["worker"].astype(np.int64)
    order = np.lexsort((records["begin_ns"], rkey))
    sk, sb = rkey[order], records["begin_ns"][order]
    starts = np.r_[0, np.flatnonzero(sk[1:] != sk[:-1]) + 1]
    ends = np.r_[starts[1:], len(sk)]
    keys = sk[starts]
    g = np.minimum(np.searchsorted(keys, ikey), len(keys) - 1)
    has = keys[g] == ikey
    for j in np.unique(g[has]):
        sel = np.flatnonzero(has & (g == j))
        a, b = starts[j], ends[j]
        pos = a + np.searchsorted(sb[a:b], items["begin_ns"][sel], side="right") - 1
        ok = pos >= a
        cand = order[np.maximum(pos, a)]
        ok &= items["end_ns"][sel] <= records["end_ns"][cand]
        out[sel[ok]] = cand[ok]
    return out


def _stats_s(x_ns: np.ndarray) -> Optional[dict]:
    if len(x_ns) == 0:
        return None
    p50, p95 = _core.percentiles(x_ns, [50.0, 95.0])
    return {"median": p50 * 1e-9, "p95": p95 * 1e-9, "mean": float(np.mean(x_ns)) * 1e-9}


def _call_block(dur: np.ndarray, make_total: int) -> Optional[dict]:
    """{calls, median_s, mean_s, share of the batches' make time} of one
    kind of per-batch call (collate_fn, __getitems__)."""
    if len(dur) == 0:
        return None
    return {"calls": int(len(dur)), "median_s": _core.percentiles(dur, 50.0) * 1e-9,
            "mean_s": float(dur.mean()) * 1e-9,
            "share": float(dur.sum()) / make_total if make_total > 0 else None}


def _first_of_worker(epoch: np.ndarray, worker: np.ndarray, begin_ns: np.ndarray
                     ) -> np.ndarray:
    """Whether each sample (shape (n,), bool) is the first its worker made
    in its epoch (the earliest ``begin_ns`` of its (epoch, worker))."""
    order = np.lexsort((begin_ns, worker, epoch))
    first = np.zeros(len(order), dtype=bool)
    if len(order):
        e, w = epoch[order], worker[order]
        first[order] = np.concatenate(([True], (e[1:] != e[:-1]) | (w[1:] != w[:-1])))
    return first


def _in_startup(epoch: np.ndarray, first: np.ndarray, begin_ns: np.ndarray,
                batch_end_ns: np.ndarray) -> np.ndarray:
    """Whether each sample (shape (n,), bool) began in its epoch's
    start-up: before every worker that made a sample of that epoch had
    ended its first batch of it (``first``: :func:`_first_of_worker`'s
    mask; ``batch_end_ns``: each sample's batch's end).  Until then
    workers are still forking and importing beside it, which stretches
    its wall time by work no clock of its own counts."""
    out = np.zeros(len(begin_ns), dtype=bool)
    for e in np.unique(epoch).tolist():
        mine = epoch == e
        out[mine] = begin_ns[mine] < batch_end_ns[mine & first].max()
    return out


def summarise(items: np.ndarray, records: np.ndarray, step_idx: Optional[np.ndarray],
              lost: int = 0, unavailable: Optional[str] = None
              ) -> tuple[dict, Optional[dict]]:
    """The report's ``production.samples`` block and the per-sample arrays
    its slow-sample test reads (None when no sample was timed).

    ``items`` are the workers' item records, ``records`` their batch
    records, ``step_idx`` each step's index into ``records``
    (worker_timing.match; None: not known, every batch counts); ``lost``
    item records lost before the drain; ``unavailable`` why worker timing
    was off.  Counted: the items of batches a step met.

    Numbers: ``kind`` (map, iterable, getitems: the dataset made each
    batch at once, no per-sample time), ``batches`` and ``samples`` timed,
    ``sample_s`` and ``sample_cpu_s`` ({median, p95, mean}, s),
    ``sample_share`` (the samples' wall over their batches' make time),
    ``collate`` and ``getitems`` ({calls, median_s, share} or None),
    ``slowest`` (up to SLOWEST_SHOWN: index, s, cpu_s, batch_share,
    worker, epoch, step), ``table`` (columns of up to TABLE_MAX samples:
    all in claim order, or the slowest), ``by_worker`` ({worker id:
    {samples, median_s, p25_s}}: each worker's sample wall times; a slow
    worker makes even its cheaper samples slower, where particular slow
    samples landing on its turn leave them as cheap as the others'),
    ``lost``.  The arrays (shape
    (samples,) each): ``wall_ns``, ``cpu_ns`` (the sampling thread's; -1
    unknown), ``index``, ``batch_share``, ``first`` (the first sample its
    worker made in its epoch), ``batch_runq_ns`` (its batch's wait for a
    core, every thread of the worker where the build measured it; -1
    unknown), ``batch`` (its batch's row in ``records``), ``worker`` (the
    worker that made it), ``startup`` (it began before every worker had
    made its first batch of the epoch: :func:`_in_startup`), and ``kind``; and, shape
    (records,) each: ``collate_ns``, each batch record's collate_fn time,
    0 where none was timed; ``thread_cpu_ns``, the CPU its samples and
    collate_fn took on the thread that ran them; ``gc_cpu_ns``, the CPU
    of the garbage collections inside it (:func:`_gc_cpu_by_record`);
    ``wall_ns``, ``cpu_ns`` and ``batch_share`` leave out the garbage
    collections that ran inside the sample (:func:`gc_inside`), which
    ``gc`` counts: {collections (all the workers timed), s (their wall
    time), samples (those a collection ran inside), in_samples_s,
    longest_in_a_sample_s, sample_share (of the samples' wall time)}."""
    block: dict = {"available": False, "unavailable": unavailable, "lost": int(lost)}
    is_gc = items["kind"] == _core.ITEM_GC
    gc, items = items[is_gc], items[~is_gc]
    if len(items) == 0:
        if unavailable is None:
            block["unavailable"] = "the workers timed no sample"
        return block, None
    where = join(items, records)
    if step_idx is not None:
        met = step_idx[step_idx >= 0]
        step_of = np.full(len(records), -1, dtype=np.int64)
        step_of[met] = np.flatnonzero(step_idx >= 0)
        keep = (where >= 0) & (step_of[np.maximum(where, 0)] >= 0)
    else:
        step_of = np.full(len(records), -1, dtype=np.int64)
        keep = where >= 0
    if not keep.any():
        block["unavailable"] = unavailable or "no timed sample fell in a batch a step met"
        return block, None
    it, at = items[keep], where[keep]
    dur = np.maximum(it["end_ns"] - it["begin_ns"], 0)
    make = np.maximum(records["end_ns"] - records["begin_ns"], 0)
    batches = np.unique(at)
    make_total = int(make[batches].sum())
    is_sample = np.isin(it["kind"], SAMPLE_KINDS)
    is_collate = it["kind"] == _core.ITEM_COLLATE
    kinds = np.unique(it["kind"][~np.isin(it["kind"], [_core.ITEM_COLLATE])])
    kind = (KIND_NAMES.get(int(kinds[0])) if len(kinds) == 1
            else "mixed" if len(kinds) else None)
    s_dur, s_at = dur[is_sample], at[is_sample]
    s_cpu = it["cpu_ns"][is_sample]
    s_batches = np.unique(s_at)
    share = s_dur / np.maximum(make[s_at], 1)
    block.update({
        "available": True, "unavailable": None, "kind": kind,
        "batches": int(len(batches)), "samples": int(is_sample.sum()),
        "sample_s": _stats_s(s_dur),
        "sample_cpu_s": _stats_s(s_cpu[s_cpu >= 0]) if (s_cpu >= 0).any() else None,
        "sample_share": (float(s_dur.sum()) / int(make[s_batches].sum())
                         if len(s_batches) and int(make[s_batches].sum()) > 0 else None),
        "collate": _call_block(dur[it["kind"] == _core.ITEM_COLLATE], make_total),
        "getitems": _call_block(dur[it["kind"] == _core.ITEM_GETITEMS], make_total),
    })
    if not is_sample.any():
        block.update({"slowest": [], "table": None})
        return block, None
    index = it["index"][is_sample]
    worker, epoch = it["worker"][is_sample], it["epoch"][is_sample]
    step = step_of[s_at]
    gc_wall, gc_cpu = gc_inside(gc, worker, it["begin_ns"][is_sample], it["end_ns"][is_sample])
    block["gc"] = {
        "collections": int(len(gc)),
        "s": float(np.maximum(gc["end_ns"] - gc["begin_ns"], 0).sum()) * 1e-9,
        "samples": int(np.count_nonzero(gc_wall)),
        "in_samples_s": float(gc_wall.sum()) * 1e-9,
        "longest_in_a_sample_s": float(gc_wall.max()) * 1e-9,
        "sample_share": float(gc_wall.sum()) / max(int(s_dur.sum()), 1),
    }

    def row(j: int) -> dict:
        return {"index": int(index[j]), "s": float(s_dur[j]) * 1e-9,
                "cpu_s": float(s_cpu[j]) * 1e-9 if s_cpu[j] >= 0 else None,
                "batch_share": float(share[j]), "worker": int(worker[j]),
                "epoch": int(epoch[j]), "step": int(step[j])}

    block["by_worker"] = {}
    for w in np.unique(worker).tolist():
        mine = s_dur[worker == w]
        p25, p50 = np.percentile(mine, [25, 50])
        block["by_worker"][int(w)] = {"samples": int(len(mine)), "median_s": float(p50) * 1e-9,
                                      "p25_s": float(p25) * 1e-9}
    by_time = np.argsort(-s_dur, kind="stable")
    block["slowest"] = [row(int(j)) for j in by_time[:SLOWEST_SHOWN]]
    rows = by_time[:TABLE_MAX] if len(s_dur) > TABLE_MAX else np.arange(len(s_dur))
    block["table"] = {
        "order": "slowest" if len(s_dur) > TABLE_MAX else "claim",
        "rows": int(len(rows)), "of": int(len(s_dur)),
        "index": index[rows].tolist(), "s": (s_dur[rows] * 1e-9).tolist(),
        "cpu_s": [None if c < 0 else c * 1e-9 for c in s_cpu[rows].tolist()],
        "batch_share": share[rows].tolist(), "worker": worker[rows].tolist(),
        "epoch": epoch[rows].tolist(), "step": step[rows].tolist(),
    }
    # The slow-sample test reads each sample's own time: the garbage
    # collections that ran inside it are the process's (set off by
    # whatever allocated past the threshold), not the sample's cost.
    own_cpu = np.where(s_cpu >= 0, np.maximum(s_cpu - gc_cpu, 0), s_cpu)
    s_begin = it["begin_ns"][is_sample]
    first = _first_of_worker(epoch, worker, s_begin)
    # Per record, the CPU its calls measured on the thread that ran them
    # (samples, with the collections inside them, and collate_fn): the
    # dataset's own thread, against the record's CPU of every thread.
    on_thread = is_sample | is_collate
    arrays = {"wall_ns": s_dur - gc_wall, "cpu_ns": own_cpu, "index": index,
              "collate_ns": np.bincount(at[is_collate], weights=dur[is_collate],
                                        minlength=len(records)).astype(np.int64),
              "thread_cpu_ns": np.bincount(
                  at[on_thread], weights=np.maximum(it["cpu_ns"][on_thread], 0),
                  minlength=len(records)).astype(np.int64),
              "gc_cpu_ns": _gc_cpu_by_record(gc, records),
              "batch_share": (s_dur - gc_wall) / np.maximum(make[s_at], 1),
              "batch_runq_ns": records["runq_ns"][s_at], "batch": s_at, "kind": kind,
              "worker": worker,
              "first": first,
              "startup": _in_startup(epoch, first, s_begin, records["end_ns"][s_at])}
    return block, arrays
