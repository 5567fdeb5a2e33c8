"""Each epoch's start-up: which steps are its, what they cost, and
which measured part (iter(), the sampler's first draw, worker_init_fn,
the workers' first batches) holds it.
"""

from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from .. import _core, stacks, worker_timing
from ..findings import stall_timing, wait_parts
from . import common
from .common import NS


def with_sampler_code(largest: Optional[dict], src) -> Optional[dict]:
    """``largest`` (wait_parts.next_for) with ``sampler_code``, where the
    sampler's next() is the largest part: the sampler's ``__iter__`` as
    the latest epoch's facts name it (wrapping.sampler_code)."""
    if not largest or largest["part"] != wait_parts.SAMPLER:
        return largest
    code = common.latest_fact(src, "sampler_code")
    return {**largest, "sampler_code": code} if code else largest


def start_mask(steps: np.ndarray, src, source_id: int, epochs: np.ndarray) -> np.ndarray:
    """True for the start-up steps of each epoch (none for the probes)."""
    if source_id == 0:
        return np.zeros(len(steps), dtype=bool)
    position = steps["flags"] >> _core.FLAG_POS_SHIFT
    return stall_timing.epoch_start_mask(position,
                                         common.startup_steps(src, steps["epoch"], epochs))


def start_making(making_ns: Optional[np.ndarray], first: np.ndarray,
                 first_wait_ns: np.ndarray) -> dict:
    """{making_share}: of the start-up fetches' wait, the share during
    which the awaited worker was making batches (worker_timing's per-step
    overlap, ``making_ns`` over all steps, -1 unknown); {} where any
    start-up fetch's is unknown or none waited.  A worker still making the
    epoch's first batches is the dataset's work at the epoch's first
    indices; the rest is starting (iter(), the workers' processes, their
    worker_init_fn) and handing over."""
    if making_ns is None or not first.any():
        return {}
    making = np.asarray(making_ns)[first]
    total = int(first_wait_ns.sum())
    if (making < 0).any() or total <= 0:
        return {}
    return {"making_share": float(np.minimum(making, first_wait_ns).sum()) / total}


def start_cost(met: Optional[tuple], first: np.ndarray, steady: np.ndarray) -> dict:
    """{first_cpu_ratio, first_work_ratio}: the median worker CPU of the
    batches the start-up fetches received over that of the steady
    fetches' batches (BatchLog: every thread of the worker), and the same
    ratio of their own time (make time less the wait for a core,
    ``runq_ns``, where read: CPU and time asleep, not the cores the
    workers starting at once shared); a ratio is left out where either
    side has no batch with it known.  Both at most
    attribution.BUSIER_RATIO: the epoch's first batches cost what later
    ones do, and a worker still making them at the start is the pipeline
    filling, not the dataset's work at those indices."""
    if met is None or not first.any():
        return {}
    records, idx = met
    own = ((records["end_ns"] - records["begin_ns"])
           - np.where(records["runq_ns"] > 0, records["runq_ns"], 0))
    out = {}
    for key, value in (("first_cpu_ratio", records["cpu_ns"]), ("first_work_ratio", own)):
        med = []
        for mask in (first, steady):
            j = idx[mask]
            v = value[j[j >= 0]]
            v = v[v >= 0]
            if not len(v):
                break
            med.append(float(np.median(v)))
        if len(med) == 2 and med[1] > 0:
            out[key] = med[0] / med[1]
    return out


def init_by_epoch(worker_items: Optional[tuple]) -> dict:
    """{epoch: (wall s, CPU s)} of the longest worker_init_fn call among
    the workers started for each epoch (ITEM_INIT item records: the
    loader's own worker_init_fn, timed in each worker before its first
    batch); {} where none was timed."""
    items = worker_items[0] if worker_items is not None else None
    if items is None or not len(items):
        return {}
    init = items[items["kind"] == _core.ITEM_INIT]
    out: dict = {}
    for r in init:
        wall = max(0, int(r["end_ns"]) - int(r["begin_ns"])) * NS
        e = int(r["epoch"])
        if e not in out or wall > out[e][0]:
            out[e] = (wall, max(0, int(r["cpu_ns"])) * NS)
    return out


def start_init(by_epoch: list[dict], code: Optional[dict] = None) -> dict:
    """{init_share, worker_init_code}: of the start-up fetches' wait, the
    share the longest worker_init_fn of each epoch's new workers took
    (they run at once, each before its worker's first batch), with the
    function's place (``code``, where known); {} where none was timed."""
    share = start_share(by_epoch, "init_s")
    if share is None:
        return {}
    return {"init_share": share, **({"worker_init_code": code} if code else {})}


def start_share(by_epoch: list[dict], key: str) -> Optional[float]:
    """Of every epoch's start-up wait, the share the part ``key`` (s, in
    the epochs that hold it) took, each epoch's part at most its wait;
    None where no epoch holds it or none waited."""
    held = [e for e in by_epoch if e.get(key) is not None]
    total = sum(e["input_wait_s"] for e in by_epoch)
    if not held or total <= 0:
        return None
    return sum(min(e[key], e["input_wait_s"]) for e in held) / total


def sampler_in_first(steps: np.ndarray, first: np.ndarray, epoch: np.ndarray,
                     items: Optional[np.ndarray]) -> Optional[dict]:
    """At num_workers=0: {epoch: (wall s, CPU s)} of the sampler's next()
    calls inside each epoch's start-up fetches (worker_timing.time_sampler's
    records), where a sampler whose __iter__ is a generator runs it: iter()
    made only the generator (a Sampler.__iter__ sorting its indices for
    0.4 s read "a short run ... record more steps" at num_workers=0 and
    was named at 2, helper 40C, 4 of 4).  None without records."""
    if items is None or not len(items) or not first.any():
        return None
    items = items[items["kind"] == _core.ITEM_NEXT]
    at = np.flatnonzero(first)
    wall, cpu = worker_timing.sampler_in_waits(items, steps["begin_ns"][at],
                                               steps["fetch_done_ns"][at])
    out: dict = {}
    for e, a, c in zip(epoch[at], wall, cpu):
        w0, c0 = out.get(int(e), (0.0, 0.0))
        out[int(e)] = (w0 + float(a) * NS, c0 + float(c) * NS)
    return out


def start_by_epoch(epoch: np.ndarray, wait_ns: np.ndarray,
                   facts: Optional[Mapping[int, dict]] = None,
                   init: Optional[Mapping[int, tuple]] = None,
                   sampler: Optional[Mapping[int, tuple]] = None) -> list[dict]:
    """{epoch, fetches, input_wait_s (their total)[, iter_s, iter_cpu_s]
    [, init_s, init_cpu_s]} of each epoch's start-up fetches, in epoch
    order (``epoch`` and ``wait_ns`` of the start-up steps, shape
    (start-up steps,)); iter_s and iter_cpu_s (the wall and main-thread
    CPU seconds of iter() itself, inside the first fetch's wait) where the
    epoch's ``facts`` hold them; init_s and init_cpu_s (the longest
    worker_init_fn call of the workers started for it, and its CPU) where
    ``init`` (:func:`init_by_epoch`) holds the epoch.  At num_workers=0
    ``sampler`` (:func:`sampler_in_first`) adds the sampler's draws in
    the epoch's first fetch to iter_s and iter_cpu_s."""
    if not len(epoch):
        return []
    ids, at = np.unique(epoch, return_inverse=True)
    total = np.bincount(at, weights=wait_ns.astype(np.float64))
    count = np.bincount(at)
    out = []
    for e, c, t in zip(ids, count, total, strict=True):
        row = {"epoch": int(e), "fetches": int(c), "input_wait_s": float(t) * NS}
        known = (facts or {}).get(int(e)) or {}
        if known.get("iter_s") is not None:
            row["iter_s"], row["iter_cpu_s"] = known["iter_s"], known.get("iter_cpu_s")
            if int(e) in (sampler or {}):
                wall, cpu = sampler[int(e)]
                row["iter_s"] += wall
                if row["iter_cpu_s"] is not None:
                    row["iter_cpu_s"] += cpu
        if int(e) in (init or {}):
            row["init_s"], row["init_cpu_s"] = init[int(e)]
        out.append(row)
    return out


def start_iter(by_epoch: list[dict], sampler_code: Optional[dict] = None) -> dict:
    """{iter_share, iter_cpu_share, sampler_code}: of the start-up
    fetches' wait, the share iter() itself took (wall), and of that, the
    share the main thread spent on a CPU (the sampler's __iter__ and first
    index lists, a dataset's set-up), with where the sampler's code is
    (``sampler_code``, wrapping.sampler_code, where known, and
    ``sampler_library``, whether that is library code); {} where an
    epoch lacks iter()'s time or none waited."""
    if any(e.get("iter_s") is None for e in by_epoch):
        return {}
    share = start_share(by_epoch, "iter_s")
    if share is None:
        return {}
    cpu = [e.get("iter_cpu_s") for e in by_epoch]
    whole = sum(e["iter_s"] for e in by_epoch)
    return {"iter_share": share,
            **({"iter_cpu_share": min(1.0, sum(cpu) / whole)}
               if whole > 0 and all(c is not None for c in cpu) else {}),
            **({"sampler_code": sampler_code,
                "sampler_library": stacks.is_library(sampler_code["file"])}
               if sampler_code else {})}
