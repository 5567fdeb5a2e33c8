"""The workers' side: production, per-sample timing, the sampled code
of slow and fast batches, attribution, batch sizes and collate.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .. import _core, sample_timing, stacks, torch_private, wait_split, worker_timing
from ..findings import (attribution, hand_over, input_bound, slow_code, slow_samples, stall_timing,
                        wait_parts, worker_evidence)
from . import common


def production(steps: np.ndarray, steady: np.ndarray, src, delivery: Optional[tuple],
                worker_batches: Optional[tuple], loader: Optional[dict],
                epochs: np.ndarray, stuck_after_s: Optional[float] = None,
                worker_items: Optional[tuple] = None
                ) -> tuple[Optional[dict], Optional[np.ndarray], Optional[tuple],
                           Optional[np.ndarray]]:
    """(the worker-side batch timing block, None: not a multiprocessing
    DataLoader; per step, the ns of its input wait during which its worker
    was making batches, -1 unknown, or None: worker_timing.summarise; the
    workers' records and each step's index into them, worker_timing.match,
    or None without records or delivering workers); ``epochs``: the
    distinct epochs of ``steps``;
    ``stuck_after_s``: the stuck watch's line (the prediction's inputs
    leave out the batches past it)."""
    if not loader or not (loader.get("num_workers") or 0) > 0:
        return None, None, None, None
    facts = getattr(src, "epoch_facts", None) or {}
    present = set(epochs.tolist())    # once: a unique() per fact cost 0.1 s each at 10M
    why = [f.get("worker_timing") for e, f in sorted(facts.items()) if int(e) in present]
    unavailable = None if "on" in why else next((w for w in why if w), None)
    records, offsets = worker_batches if worker_batches is not None else (
        np.zeros(0, _core.BATCH_RECORD_DTYPE), {})
    worker = delivery[1] if delivery is not None else None
    idx = None
    if worker is not None and len(records) and len(steps):
        idx = worker_timing.match(records, steps["epoch"], worker, offsets)
    block, busy = worker_timing.summarise(
        records, steps, worker, steady, offsets, loader.get("num_workers"), unavailable,
        None if stuck_after_s is None else int(round(stuck_after_s * 1e9)), idx)
    block["samples"], per_batch = worker_samples(worker_items, records, idx, block)
    return block, busy, (records, idx) if idx is not None else None, per_batch


def worker_samples(worker_items: Optional[tuple], records: np.ndarray, idx: Optional[np.ndarray],
                   production: dict) -> tuple[dict, Optional[dict]]:
    """The ``production.samples`` block: per-sample and collate times in
    the workers (sample_timing.summarise), its slow-sample test and
    findings (findings.slow_samples); and per batch record (shape
    (records,) each), {sizes: its count of timed samples, collate_ns: its
    collate_fn time}, None where no sample was timed."""
    items, lost = worker_items if worker_items is not None else (
        np.zeros(0, _core.ITEM_RECORD_DTYPE), 0)
    items = items[items["kind"] != _core.ITEM_INIT]     # worker_init_fn: no sample
    why = None if production.get("available") else production.get("unavailable")
    block, arrays = sample_timing.summarise(items, records, idx, lost, why)
    block["slow"] = slow_samples.slow_of(arrays)
    block["findings"] = [[code, numbers] for code, numbers in slow_samples.rule(block)]
    per_batch = None
    if arrays is not None and block.get("kind") in ("map", "iterable"):
        per_batch = {"sizes": np.bincount(arrays["batch"], minlength=len(records)),
                     "collate_ns": arrays["collate_ns"],
                     "thread_cpu_ns": arrays["thread_cpu_ns"],
                     "gc_cpu_ns": arrays["gc_cpu_ns"]}
    return block, per_batch


def other_threads_cpu_share(records: np.ndarray, which: np.ndarray,
                             per_batch: Optional[dict]) -> Optional[float]:
    """Of the CPU of the batch records ``which`` (a mask), the part outside
    their timed calls on the dataset's thread (``per_batch["thread_cpu_ns"]``,
    sample_timing): their worker's other threads; None where any of them
    has no timed call or an unknown CPU, or none burned CPU."""
    if per_batch is None or "thread_cpu_ns" not in per_batch or not which.any():
        return None
    cpu = records["cpu_ns"][which]
    if (cpu < 0).any() or (per_batch["sizes"][which] == 0).any() or cpu.sum() <= 0:
        return None
    on_thread = np.minimum(per_batch["thread_cpu_ns"][which], cpu)
    return float((cpu - on_thread).sum() / cpu.sum())


def gc_cpu_share(records: np.ndarray, which: np.ndarray,
                 per_batch: Optional[dict]) -> Optional[float]:
    """Of the CPU of the batch records ``which`` (a mask), the part their
    worker's garbage collections took inside them (``per_batch["gc_cpu_ns"]``,
    sample_timing); None where the collections were not timed, a CPU is
    unknown, or none burned CPU."""
    if per_batch is None or "gc_cpu_ns" not in per_batch or not which.any():
        return None
    cpu = records["cpu_ns"][which]
    if (cpu < 0).any() or cpu.sum() <= 0:
        return None
    return float(min(per_batch["gc_cpu_ns"][which].sum(), cpu.sum()) / cpu.sum())


def cpu_apart(slow_cpu_ns: np.ndarray, fast_cpu_ns: np.ndarray,
              slow_time_ns: np.ndarray) -> dict:
    """{slow_cpu_ratio (the slow batches' median CPU over the fast ones'),
    slow_extra_cpu_share (that extra CPU over the slow batches' median
    time: how much of a slow batch it explains)}, None where a median is
    0.  A batch that sleeps 30 ms and burns 0.7 ms against 0.3 ms is 2x
    the CPU, and 1 % of its time."""
    slow_cpu, fast_cpu = float(np.median(slow_cpu_ns)), float(np.median(fast_cpu_ns))
    slow_time = float(np.median(slow_time_ns))
    return {"slow_cpu_ratio": slow_cpu / fast_cpu if fast_cpu > 0 else None,
            "slow_extra_cpu_share": ((slow_cpu - fast_cpu) / slow_time
                                     if slow_time > 0 else None)}


def main_cpu_ratio(clocks: Optional[tuple], wait: np.ndarray, slow: np.ndarray,
                   fast: np.ndarray) -> dict:
    """At num_workers=0, from the clocked fetches (``clocks``: positions
    into the steps, the loop thread's CPU ns in each fetch, ...[, the
    process's other threads' CPU ns]) of the ``slow`` (stalled) and
    ``fast`` steps (masks): {slow_cpu_ratio (the slow fetches' median CPU
    over the fast ones'), slow_extra_cpu_share (that extra CPU over the
    slow fetches' median wait ``wait``), slow_other_threads_cpu_share (of
    the slow fetches' CPU, every thread, the other threads' part)}, each
    left out where fewer than two fetches of a side were clocked.  The
    sampled stacks' CPU share cannot say this beside a busy host: a
    dataset whose every 8th index ran expensive_augment (921 slow samples
    against 0) read "waited for a CPU ... not more work of their own" in
    6 of 8 runs beside two CPU hogs (helper 39B), and a timer tick that
    lands in another thread read "a helper thread" (1 of 4)."""
    if clocks is None or not len(clocks[0]):
        return {}
    pos, cpu = clocks[0], clocks[1]
    ok = cpu >= 0
    on_slow, on_fast = ok & slow[pos], ok & fast[pos]
    out: dict = {}
    if np.count_nonzero(on_slow) >= 2 and np.count_nonzero(on_fast) >= 2:
        out.update(cpu_apart(cpu[on_slow], cpu[on_fast], wait[pos[on_slow]]))
    if len(clocks) > 5 and np.count_nonzero(on_slow) >= 2:
        others = np.maximum(clocks[5][on_slow], 0).astype(np.float64)
        total = float(cpu[on_slow].sum() + others.sum())
        if total > 0:
            out["slow_other_threads_cpu_share"] = float(others.sum()) / total
    return out


def slow_code_block(given: Optional["stacks.StackInput"], met: Optional[tuple], steps: np.ndarray,
                    mask: np.ndarray, steady: np.ndarray,
                    stall_split: Optional[dict] = None,
                    per_batch: Optional[dict] = None,
                    clocks: Optional[tuple] = None) -> tuple[Optional[dict], Optional[dict]]:
    """(the ``slow_code`` block, findings.slow_code judges it; per worker
    batch record index its samples' commonest innermost function, for the
    trace, or None).  ``given``: the source's stack samples
    (traceml.stacks.input_for; None: not a DataLoader).  The samples are
    split into those of *slow* and *fast* batches: with workers, by the
    batch each was taken in (traceml.stacks.batch_of) and that batch's
    make time against the two-group split of the make times of the
    batches the steady steps received (others: left out); at
    num_workers=0, stalled fetches against the other steady ones
    (traceml.stacks.in_steps).  Per function, the sample weight of each
    group holding it.  ``stalls``: the stalled steady fetches (none: no
    finding).  ``slow_cpu_share``: the slow batches' CPU over their make
    time (BatchLog; at num_workers=0 the main thread's sampled CPU over
    the stalled waits; None unknown), ``fast_cpu_share`` the same of the
    others; ``slow_runq_share`` the slow batches' wait for a core over
    their make time (BatchLog; at num_workers=0 the clocked stalls' waits
    for a core, ``stall_split``: wait_split.split over them, the loop's
    and the host's part); ``slow_other_threads_cpu_share``: of the slow
    batches' CPU (every thread of their worker, BatchLog), the part their
    timed calls did not take on the dataset's own thread (``per_batch``'s
    ``thread_cpu_ns``: each batch's samples and collate_fn, measured on
    the thread that ran them; None where any slow batch has none timed):
    the other threads' CPU, measured; ``slow_gc_cpu_share``: of it, the
    part the worker's garbage collections took (``per_batch``'s
    ``gc_cpu_ns``; None: not timed); ``slow_batches_in_making``: batches in the
    making during the stalls.  At num_workers=0 the clocked fetches
    (``clocks``, as _Run holds them: the loop thread's CPU in each, and
    the process's other threads') give ``slow_cpu_ratio`` and
    ``slow_extra_cpu_share`` (:func:`main_cpu_ratio`) and
    ``slow_other_threads_cpu_share``, as the workers' batch records do.
    ``status``
    "on", or why the stacks were not sampled; the block is None where
    there is nothing to say (not a DataLoader, or workers that were never
    hooked)."""
    if given is None:
        return None, None
    in_main, d = given.in_main, given.drained
    if d is None:
        # No log was made: switched off, refused, or no forked worker hooked.
        if given.why_off is None:
            return None, None
        return {"status": given.why_off, "in_main": in_main,
                "samples": {"slow": 0, "fast": 0}}, None
    info = d.info
    if not info["started"]:
        return {"status": info["refused_why"] or given.why_off or "not started in any worker",
                "in_main": in_main, "workers_refused": int(info["refused"]),
                "samples": {"slow": 0, "fast": 0}}, None
    if info.get("taken_over"):
        return {"status": "another SIGPROF handler (a profiler?) replaced traceml's while "
                          "it sampled", "in_main": in_main,
                "samples": {"slow": 0, "fast": 0}}, None
    block: dict = {"status": "on", "in_main": in_main, "interval_us": stacks.INTERVAL_US,
                   "workers_sampled": int(info["started"]),
                   "workers_refused": int(info["refused"]),
                   "lost": int(info["lost"]) + given.dropped}
    stalled = mask & steady
    records = met[0] if met is not None else None
    kind, weight = d.samples[:, stacks.KIND], d.samples[:, stacks.WEIGHT]
    block["stalls"] = int(np.count_nonzero(stalled))
    batch_at = None     # each sample's batch record (workers only)
    block["slow_cpu_share"] = block["fast_cpu_share"] = None
    slow_ns = 0.0       # the slow batches' time (make time, or stalled waits)
    if in_main:
        # num_workers=0: each fetch makes its batch in this process, so a
        # stalled fetch is a slow batch; only samples inside fetches count.
        group = stacks.in_steps(d.samples, steps, stalled, steady, fetch_only=True)
        group[d.samples[:, stacks.WORKER] >= 0] = -1
        block["slow_batches"] = block["stalls"]
        # The fetches that did not stall made their batches too, if too
        # fast to draw samples: "every fetch stalled" only where none did.
        block["fast_batches"] = int(np.count_nonzero(steady & ~mask))
        # The part of it the sampler's next() holds: that runs here at any
        # num_workers.
        block["sampler_share"] = stacks.under_frame_share(d, group, torch_private.SAMPLER_FRAME)
    else:
        # Workers: each sample belongs to the batch its worker was making;
        # the batches split in two by their own make time where those form
        # two groups (slow_code.slow_make_threshold_ns), else they are one
        # group, all "slow" (none fast to compare).  A stalled fetch often meets
        # a cheap batch queued behind a slow one, so the stalls themselves
        # do not say which batches were slow to make.
        group = np.full(len(d.samples), -1, dtype=np.int64)
        block["slow_batches"] = 0
        idx = met[1] if met is not None else None
        if records is not None and len(records) and idx is not None:
            # The batches the steady steps received (each epoch's start-up
            # batches, imports and caches filling, are the epoch start's).
            steady_rec = np.zeros(len(records), dtype=bool)
            steady_rec[idx[steady & (idx >= 0)]] = True
            make = (records["end_ns"] - records["begin_ns"]).astype(np.int64)
            # Split on each batch's own cost, its make time less its wait
            # for a core, as attribution.batch_cost splits: the run queue
            # stretches batches at random on a busy host, and the two
            # tests of one question read one set of times (helper 28C:
            # "no function tells the slow batches from the fast ones"
            # beside batch_cost's 74 slow at 3.7x).
            own = worker_timing.own_made_ns(records, np.arange(len(records)))
            threshold = (slow_code.slow_make_threshold_ns(own[steady_rec])
                         if steady_rec.any() else None)
            # One group of make times: every batch is alike, none is slow.
            slow_rec = steady_rec if threshold is None else (own > threshold) & steady_rec
            block["one_group"] = threshold is None
            fast_rec = steady_rec & ~slow_rec
            group_of = np.where(slow_rec, 1, np.where(fast_rec, 0, -1))
            batch_at = stacks.batch_of(d.samples, records)
            group = np.where(batch_at >= 0, group_of[np.maximum(batch_at, 0)], -1)
            block["slow_batches"] = int(np.count_nonzero(slow_rec))
            block["fast_batches"] = int(np.count_nonzero(fast_rec))
            slow_ns = float(make[slow_rec].sum())
            cpu, runq = records["cpu_ns"], records["runq_ns"]
            for key, which in (("slow_cpu_share", slow_rec), ("fast_cpu_share", fast_rec)):
                if which.any() and (cpu[which] >= 0).all() and make[which].sum() > 0:
                    block[key] = float(cpu[which].sum() / make[which].sum())
            # The slow batches' median CPU over the fast ones': whether
            # their own code cost more, whatever stretched them.
            if (slow_rec.any() and fast_rec.any() and (cpu[slow_rec] >= 0).all()
                    and (cpu[fast_rec] >= 0).all()):
                block.update(cpu_apart(cpu[slow_rec], cpu[fast_rec], make[slow_rec]))
            # Of the slow batches' make time, the part their worker waited
            # for a CPU (its thread's schedstat run-queue delay).
            block["slow_runq_share"] = (
                float(runq[slow_rec].sum() / make[slow_rec].sum())
                if slow_rec.any() and (runq[slow_rec] >= 0).all() and make[slow_rec].sum() > 0
                else None)
            block["slow_other_threads_cpu_share"] = other_threads_cpu_share(
                records, slow_rec, per_batch)
            block["slow_gc_cpu_share"] = gc_cpu_share(records, slow_rec, per_batch)
            if stalled.any():
                during = stacks.overlapping(records, steps["begin_ns"][stalled],
                                            steps["fetch_done_ns"][stalled])
                block["slow_batches_in_making"] = int(len(during))

    def weigh(g: int, k: int) -> float:
        return float(weight[(group == g) & (kind == k)].sum())

    block["samples"] = {"slow": weigh(1, stacks.KIND_STACK), "fast": weigh(0, stacks.KIND_STACK),
                        "slow_other_thread": weigh(1, stacks.KIND_OTHER),
                        "fast_other_thread": weigh(0, stacks.KIND_OTHER),
                        "outside_batches": float(
                            weight[(group < 0) & (kind != stacks.KIND_OFF)].sum()),
                        "slow_off_cpu": weigh(1, stacks.KIND_OFF),
                        "fast_off_cpu": weigh(0, stacks.KIND_OFF)}
    # Where the slow batches' time off CPU went (asleep, reading, on a
    # lock): the wall-clock samples' path, the slow group's alone.
    block["off_path"] = (stacks.hot_path(d, np.where(group == 1, 1, -1), stacks.KIND_OFF)
                         if block["samples"]["slow_off_cpu"] > 0 else [])
    # Each sample stands for interval_us of the process's CPU.
    sample_ns = stacks.INTERVAL_US * 1e3
    if in_main and stalled.any():
        # The sampled thread's CPU in the fetches, from its samples.
        wait = steps["fetch_done_ns"] - steps["begin_ns"]
        for key, which, n in (("slow_cpu_share", stalled, block["samples"]["slow"]),
                              ("fast_cpu_share", steady & ~stalled, block["samples"]["fast"])):
            wait_ns = float(wait[which].sum())
            if wait_ns > 0:
                block[key] = min(1.0, n * sample_ns / wait_ns)
        slow_ns = float(wait[stalled].sum())
        block.update(main_cpu_ratio(clocks, wait, stalled, steady & ~stalled))
        if stall_split and stall_split.get("runq_known") and stall_split.get("wait_s"):
            # Waiting for a core is not blocked: a dataset squeezed off the
            # cores by other programs read "not on CPU ... look for
            # sleeps, I/O or locks" beside "other programs holding the
            # cores 73%" (helper 28A, num_workers=0).
            parts = stall_split["parts_s"]
            block["slow_runq_share"] = min(1.0, sum(
                parts.get(k, 0.0) for k in ("cpu_wait", wait_split.HOST_PART))
                / stall_split["wait_s"])
    # The other threads' sampled CPU over the slow batches' time (their
    # make time; the stalls' waits in the main process): whether work outside the
    # sampled thread could have made them slow.
    block["slow_other_cpu_share"] = (
        min(1.0, block["samples"]["slow_other_thread"] * sample_ns / slow_ns)
        if slow_ns > 0 else None)
    block["hot_path"] = stacks.hot_path(d, group)
    counts = stacks.function_counts(d, group)
    gap = np.zeros(len(counts.keys))
    n1, n0 = block["samples"]["slow"], block["samples"]["fast"]
    if len(counts.keys):
        gap = counts.held[:, 1] / max(n1, 1) - counts.held[:, 0] / max(n0, 1)
    # The table: the largest gaps, then the largest shares of all the
    # samples (where the CPU goes in every batch alike), each function once.
    order = list(np.argsort(-gap, kind="stable")[:slow_code.TABLE_ROWS])
    held_all = counts.held.sum(axis=1) if len(counts.keys) else np.zeros(0)
    order += [i for i in np.argsort(-held_all, kind="stable")[:slow_code.TABLE_ROWS]
              if i not in order]
    total = n1 + n0
    block["functions"] = [{
        "file": counts.keys[i][0], "function": counts.keys[i][1],
        "first_line": counts.keys[i][2], "hot_line": int(counts.hot_line[i]),
        "slow": float(counts.held[i, 1]), "fast": float(counts.held[i, 0]),
        "share": float(held_all[i] / total) if total else None,
        "own_slow": float(counts.own[i, 1]), "own_fast": float(counts.own[i, 0]),
        "root_distance": (None if np.isnan(counts.root_distance[i])
                          else float(counts.root_distance[i])),
        "library": stacks.is_library(counts.keys[i][0])}
        for i in order if counts.held[i].sum() > 0]
    top = None
    if batch_at is not None:
        named = slow_code.judge(block)
        key = ((named.numbers["file"], named.numbers["function"], named.numbers["first_line"])
               if named is not None and named.code == "slow_code_named" else None)
        top = stacks.top_of_batches(d, batch_at, key)
    return block, top


def sizes_at_no_workers(steps: np.ndarray, items: Optional[np.ndarray]) -> Optional[np.ndarray]:
    """Each step's batch size from the sampler's index lists drawn inside
    its fetch (ITEM_NEXT records whose count is the list's length, timed
    in the clocked fetches: worker_timing.time_sampler), -1 where none was
    drawn there; None where no list was counted past one index (a sampler
    of single indices, or a build that counts every item as one)."""
    if items is None or not len(items):
        return None
    items = items[items["kind"] == _core.ITEM_NEXT]
    if not len(items) or not (items["count"] > 1).any():
        return None
    order = np.argsort(steps["begin_ns"], kind="stable")
    begin = steps["begin_ns"][order]
    at = np.searchsorted(begin, items["begin_ns"], side="right") - 1
    ok = at >= 0
    ok[ok] = items["end_ns"][ok] <= steps["fetch_done_ns"][order][at[ok]]
    sizes = np.full(len(steps), -1, dtype=np.int64)
    sizes[order[at[ok]]] = items["count"][ok]
    return sizes


def attribution_and_bytes(s: dict, mask: np.ndarray, steady: np.ndarray,
                          bytes_seen: Optional[dict],
                          ranks_workers: Optional[tuple] = None,
                          met: Optional[tuple] = None,
                          steps: Optional[np.ndarray] = None,
                          per_batch: Optional[dict] = None,
                          sampler_items: Optional[np.ndarray] = None,
                          steady_wait_ns: Optional[np.ndarray] = None) -> dict:
    """The ``attribution`` (attribution.attribution: which worker held the
    stalled batches, the workers' round, or the samples), ``batch_cost``
    (attribution.batch_cost of the steady batches' make times, taken with
    the attribution; None otherwise) and ``batch_bytes`` ({median, max,
    measured, handover}) sections, from the
    delivery record, the per-worker CPU ticks and the measured batch
    bytes (``bytes_seen``: evidence.batch_bytes); ``ranks_workers`` are
    the per-step arrays the delivery record was made from (no attribution
    without them); ``met`` the workers' batch records and each step's
    index into them (see production; None: not measured), whose make
    times (worker_timing.own_made_ns, taken only when the stalls are enough
    for an attribution) give the slow batches' rank period
    (attribution.made_period), which names the samples' period before the
    stalls do; ``per_batch`` each batch record's timed samples (``sizes``,
    against which made_period weighs the slow batches) and collate_fn
    time (``collate_ns``: the stalled batches' share of their make time
    in collate_fn is the attribution's ``collate_share``, where timed);
    None: no per-sample timing.  At num_workers=0, where no worker times a
    batch, each steady fetch's own wait (``steady_wait_ns``: the steady
    steps' waits less the loop thread's waits for a core where clocked, as
    the stall rule reads them; None: the raw waits) is its batch's make
    time and the sampler's index lists (``sampler_items``, their counts)
    its size: the stalls' sizes are tested the same way
    (:func:`sizes_at_no_workers`).  The wait for a core is the host's, not
    the batch's: beside a CPU hog a 16-sample fetch is preempted where a
    2-sample one is not, and its raw wait read 2.6x the others' a sample
    (SLOW-SAMPLE in 4 of 5 runs, helper 38C)."""
    out: dict = {"attribution": None, "batch_bytes": bytes_seen, "batch_cost": None}
    workers_busy, main_busy = busy_in_stalls(s)
    dlv = s.get("delivery")
    if dlv is not None and dlv["known"] and ranks_workers is not None:
        ranks, workers = ranks_workers
        tmp = s.get("temporal") or {}
        ticks = (s.get("workers") or {}).get("cpu_ticks_by_worker")
        # Every negative value is unknown, as -1.
        def known(a: np.ndarray) -> np.ndarray:
            return np.maximum(a, -1, dtype=np.int64)

        nw = (s.get("loader") or {}).get("num_workers")
        samples = (s.get("production") or {}).get("samples") or {}
        period_of_made = making_ranks = made_alike = by_size = None
        # Only where the stalls are enough for an attribution at all.
        if met is not None and np.count_nonzero(mask) >= attribution.ATTR_MIN_STALLS:
            # Each batch's own cost: its make time less its wait for a core
            # (a busy host stretches some batches, not their work).
            made = worker_timing.own_made_ns(*met)
            sizes = None
            if per_batch is not None:
                at = met[1]
                sizes = np.where(at >= 0, per_batch["sizes"][np.maximum(at, 0)], -1)[steady]
            period_of_made = attribution.made_period(known(ranks[steady]), made[steady], nw,
                                                     sizes)
            by_size = (known(ranks[steady]), made[steady], sizes)
            timed = made[steady]
            timed = timed[timed >= 0]
            if len(timed) >= attribution.ATTR_MIN_STALLS:
                out["batch_cost"] = attribution.batch_cost(timed)
                made_alike = out["batch_cost"]["alike"]
            if steps is not None:
                making_ranks = ranks_in_making(steps, mask, known(ranks), *met)
        elif (nw == 0 and steps is not None
              and np.count_nonzero(mask) >= attribution.ATTR_MIN_STALLS):
            sizes = sizes_at_no_workers(steps, sampler_items)
            if sizes is not None:
                own = steady_wait_ns
                if own is None or len(own) != np.count_nonzero(steady):
                    own = (steps["fetch_done_ns"] - steps["begin_ns"]).astype(np.int64)[steady]
                by_size = (known(ranks[steady]), own, sizes[steady])
        out["attribution"] = attribution.attribution(
            known(ranks[mask]), known(workers[mask]), known(workers[steady]), nw,
            tmp.get("period") if tmp.get("label") == stall_timing.PERIODIC else None, ticks,
            (s.get("production") or {}).get("workers"), period_of_made,
            making_in_stalls(s, workers_busy), making_ranks, made_alike,
            samples.get("by_worker"),
            # A shuffled loader sends each index to any worker: its slow
            # samples cannot be pinned to one by the order.
            samples.get("slow") if samples.get("kind") == "map"
            and not (s.get("loader") or {}).get("shuffle") else None, by_size)
        if (out["attribution"] is not None and per_batch is not None and met is not None
                and steps is not None):
            out["attribution"] = attribution.with_collate_share(
                out["attribution"], collate_share(steps, mask, per_batch, *met))
        out["attribution"] = attribution.unless_sampler(
            out["attribution"], (s.get("wait_parts") or {}).get("stalls"))
    bb = out["batch_bytes"]
    if bb is not None:
        samples = (s.get("production") or {}).get("samples") or {}
        bb["handover"] = hand_over.handover(
            bb["median"], s["diagnosis"], workers_busy, main_busy,
            (s.get("loader") or {}).get("num_workers"),
            samples.get("sample_share") if samples.get("available") else None,
            (s.get("wait_parts") or {}).get("all"))
    return out


def collate_sampled(slow_code: Optional[dict], src) -> Optional[float]:
    """At num_workers=0: the share of the stalled fetches' stack samples
    taken under the loader's collate_fn (the latest epoch's
    ``collate_code``, matched by file and first line), or None where the
    stacks or the collate_fn's code are unknown."""
    code = common.latest_fact(src, "collate_code")
    if not code or not slow_code or not slow_code.get("functions"):
        return None
    slow = (slow_code.get("samples") or {}).get("slow") or 0.0
    if slow <= 0:
        return None
    hit = [f for f in slow_code["functions"]
           if f["file"] == code["file"] and f["first_line"] == code["line"]]
    return min(1.0, hit[0]["slow"] / slow) if hit else 0.0


def collate_share(steps: np.ndarray, mask: np.ndarray, per_batch: dict,
                  records: np.ndarray, idx: np.ndarray) -> Optional[float]:
    """The collate_fn time of the batches the stalls waited on over their
    make time (None where no stall met a batch record, or no collate_fn
    call was timed).  The batch waited on is the one in the making during
    the wait (worker_timing.in_the_making: a worker burning its next batch
    holds the GIL its feeder needs to send the made one), else the one
    received."""
    which = np.flatnonzero(mask)
    making = worker_timing.in_the_making(records, idx, steps["begin_ns"],
                                         steps["fetch_done_ns"], which)
    at = np.where(making >= 0, making, idx[which])
    at = at[at >= 0]
    collate = per_batch["collate_ns"][at]
    make = np.maximum(records["end_ns"][at] - records["begin_ns"][at], 0)
    if not len(at) or not collate.any() or int(make.sum()) <= 0:
        return None
    return min(1.0, float(collate.sum()) / float(make.sum()))


def ranks_in_making(steps: np.ndarray, mask: np.ndarray, ranks: np.ndarray,
                 records: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Per stall (``mask``'s steps, in order), the delivery rank of the
    batch its worker was making during the wait
    (worker_timing.in_the_making), -1 unknown."""
    making = worker_timing.in_the_making(records, idx, steps["begin_ns"],
                                         steps["fetch_done_ns"], np.flatnonzero(mask))
    step_of = np.full(len(records), -1, dtype=np.int64)
    met = idx >= 0
    step_of[idx[met]] = np.flatnonzero(met)
    got = making >= 0
    out = np.full(len(making), -1, dtype=np.int64)
    at = step_of[making[got]]
    out[np.flatnonzero(got)[at >= 0]] = ranks[at[at >= 0]]
    return out


def busy_in_stalls(s: dict) -> tuple[Optional[bool], Optional[bool]]:
    """(workers busy, main process busy) in the stall intervals by the
    sampler's readings (worker_evidence.BUSY_SHARE of the CPUs the workers
    could use, runnable counted); None where not read."""
    iv = (s.get("workers") or {}).get("intervals")
    nw = (s.get("loader") or {}).get("num_workers")
    workers_busy = main_busy = None
    if iv and iv["slow"]["count"]:
        slow = iv["slow"]
        cap = min(nw or 0, (s.get("host") or {}).get("usable_cpus") or 0)
        run = slow.get("worker_cores_runnable") or slow.get("worker_cores_busy")
        if run is not None and cap:
            workers_busy = run >= worker_evidence.BUSY_SHARE * cap
        if slow.get("main_cores_runnable") is not None:
            main_busy = slow["main_cores_runnable"] >= worker_evidence.BUSY_SHARE
    return workers_busy, main_busy


def making_in_stalls(s: dict, workers_busy: Optional[bool]) -> Optional[bool]:
    """Whether the workers were making the awaited batches during the
    stalls.  Where the clocked stalls were split (wait_parts' ``stalls``,
    with worker timing), that decides: the awaited worker making the
    batch (on a core or waiting for one: wait_parts.making_fraction) for at least
    worker_evidence.BUSY_SHARE of the stalls' wait (beside three CPU hogs
    a healthy loader's stalls were 1% in the making, 53% in transit, while
    the sampler found the workers busy prefetching).  Otherwise busy by
    the sampler (``workers_busy``), or by their own batch timing, the loop
    waiting on a batch still being made for at least BUSY_SHARE of its
    input wait; None where neither was measured."""
    stall_split = (s.get("wait_parts") or {}).get("stalls")
    made = wait_parts.making_fraction(stall_split)
    if made is not None:
        return made >= worker_evidence.BUSY_SHARE
    share = input_bound.production_share(s.get("production"))
    making = (None if share is None or not s.get("input_share")
              else share >= worker_evidence.BUSY_SHARE * s["input_share"])
    if workers_busy is None:
        return making
    return workers_busy or bool(making)


# --- GPU-visible input wait (traceml.gpu) --------------------------------------------
