"""Building a Report: the recorded steps of one source reduced to numbers
and verdicts.

``build()`` is a pipeline of stages (STAGES) over explicit inputs
(records, store info, the sources mapping, sampler readings): the C
reducers and the measuring modules give the numbers, the findings
families (:mod:`traceml.findings`) the verdicts and their words.
``build`` never reads a recorder or the live process:
:meth:`traceml.Recorder.report` gathers its inputs.  The :class:`Report`
itself is in :mod:`traceml.result`.

This module holds the pipeline, its stages and what they hand on
(:class:`_Run`); the numbers the stages gather live beside it, one
module a part of the run: :mod:`.common` (duration statistics, the
steady steps), :mod:`.startup` (each epoch's start-up),
:mod:`.clock_split` (the clocked fetches and steps taken apart),
:mod:`.stall_steps` (the waits, the stall rule's steps and gaps) and
:mod:`.worker_code` (production, samples, the sampled code, attribution).
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Mapping, Optional

import numpy as np

from .. import _core, evidence, memory, predict, stacks, wait_split
from .. import findings
from ..findings import (advice, attribution, bottom_line, gpu_wait, input_bound, stall_threshold,
                        wait_parts, wait_trend, worker_evidence, worker_memory)
from ..result import Report
from . import common, clock_split, stall_steps, startup, worker_code
from .common import NS, QUANTILES, STAT_KEYS, duration_stats_s

__all__ = ["build", "Report", "STAGES", "NS", "QUANTILES", "STAT_KEYS", "duration_stats_s"]


def _check_threshold(stall_threshold_s: Any) -> Optional[float]:
    if stall_threshold_s is None:
        return None
    if isinstance(stall_threshold_s, bool) or not isinstance(
        stall_threshold_s, numbers.Real
    ):
        raise TypeError(
            "report(): stall_threshold_s must be a number of seconds or None, "
            f"got {type(stall_threshold_s).__name__}"
        )
    value = float(stall_threshold_s)
    if not math.isfinite(value) or value < 0:
        raise ValueError(
            "report(): stall_threshold_s must be finite and >= 0 seconds, "
            f"got {stall_threshold_s!r}"
        )
    if value > stall_threshold.MAX_THRESHOLD_S:
        raise ValueError(
            f"report(): stall_threshold_s must be at most {stall_threshold.MAX_THRESHOLD_S:g} s "
            f"(int64 nanoseconds), got {stall_threshold_s!r}"
        )
    return value


def build(
    records: np.ndarray,
    info: dict,
    source_id: int,
    stall_threshold_s: Optional[float],
    *,
    sources: Mapping[int, Any],
    delivery: Optional[tuple] = None,
    samples: Optional[np.ndarray] = None,
    sampler_info: Optional[dict] = None,
    stuck_events: Optional[list] = None,
    main_pid: Optional[int] = None,
    batch_bytes: Optional[np.ndarray] = None,
    worker_batches: Optional[tuple] = None,
    gpu: Optional[dict] = None,
    worker_items: Optional[tuple] = None,
    stack_input: Optional["stacks.StackInput"] = None,
    fetch_clocks: Optional[tuple] = None,
    sampler_items: Optional[np.ndarray] = None,
    batch_tensors: Optional[np.ndarray] = None,
    thread_pools: Optional[list] = None,
) -> Report:
    """The Report of one source from a snapshot of the store (pure).

    ``records`` is the store's structured array (every source), ``info``
    its ``store_info()``; ``sources`` maps source ids to objects with
    ``name``, ``kind``, ``loader``, ``epochs``, ``epoch_facts`` and
    ``loader_of(epoch)`` (see ``traceml.wrapping.Source``); an id it lacks
    is reported by number, without loader facts.  ``delivery`` is
    ``(rank, worker)`` parallel to ``records`` (or None); ``samples``,
    ``sampler_info`` and ``stuck_events`` come from the sampler (None: no
    worker evidence); ``main_pid`` is the training process (default: the
    main process the sampler read); ``batch_bytes`` is each record's batch
    bytes (int64, -1 where not measured; parallel to ``records``, or
    None) and ``batch_tensors`` the count of tensors and arrays holding
    them (int32, -1 where not counted; parallel, or None); ``thread_pools``
    the native thread pools the workers run too (wrapping.thread_pools;
    None: the latest epoch's facts' reading, taken as its workers started,
    or unknown); ``gpu`` the source's CUDA-event readings
    (``traceml.gpu.GpuTimeline.readings()``, with NVML's under
    ``utilisation``; or None: no ``gpu`` block); ``stack_input`` the
    source's sampled stacks (``traceml.stacks.input_for``; None: no
    ``slow_code`` block); ``fetch_clocks`` the store's sampled step
    clocks, (step, cpu_ns, runq_ns, body_cpu_ns, body_runq_ns[,
    others_cpu_ns]) as ``Recorder.snapshot_fetch_clocks`` gives them (None: no ``wait_parts``
    block); ``sampler_items`` the source's sampler calls in this process
    (ITEM_RECORD_DTYPE, worker_timing.time_sampler; None: not timed), whose
    time inside the clocked fetches is the split's ``sampler`` part.

    A pipeline: the source's records are gathered once (:class:`_Run`),
    then each of STAGES runs once, in order (counts, durations and the
    diagnosis, stalls, temporal, evidence, findings, advice), each adding
    the summary sections it owns and reading the earlier ones; a stage
    that would rewrite another's section is a bug (AssertionError)."""
    run = _Run(records, info, source_id, stall_threshold_s, sources, delivery, samples,
               sampler_info, stuck_events, main_pid, batch_bytes, worker_batches, gpu,
               worker_items, stack_input, fetch_clocks, sampler_items, batch_tensors,
               thread_pools)
    summary: dict = {"version": 1}
    for stage in STAGES:
        added = stage(run, summary)
        owned = added.keys() & summary.keys()
        if owned:   # each section belongs to one stage
            raise AssertionError(f"{stage.__name__} rewrites {sorted(owned)}")
        summary = {**summary, **added}
    return run.report(summary)


class _Run:
    """One source's records and what the stages hand on, gathered once.

    Built from build()'s arguments: ``steps`` (the source's records, the
    store's own array when it holds one source), ``delivery``,
    ``batch_bytes`` and ``clocks`` selected to them, the epochs' runs, the
    start-up mask and the steady steps (:class:`common.Steady`).  Each stage
    reads these and the summary's earlier sections, returns its own
    sections, and leaves here what a later stage reads (the stall mask,
    the workers' production, the delivery ranks, ...)."""

    def __init__(self, records, info, source_id, stall_threshold_s, sources, delivery,
                 samples, sampler_info, stuck_events, main_pid, batch_bytes, worker_batches,
                 gpu, worker_items, stack_input, fetch_clocks, sampler_items=None,
                 batch_tensors=None, thread_pools=None):
        self.info, self.source_id, self.sources = info, source_id, sources
        self.stall_threshold_s = stall_threshold_s
        self.samples, self.sampler_info = samples, sampler_info
        self.stuck_events, self.main_pid = stuck_events, main_pid
        self.worker_batches, self.gpu, self.worker_items = worker_batches, gpu, worker_items
        self.stack_input = stack_input
        self.sampler_items = sampler_items
        self.src = src = sources.get(source_id)
        selected = records["source"] == source_id
        whole = bool(selected.all())
        # One source (the usual case): the records themselves, no copy.
        self.steps = steps = records if whole else records[selected]
        if delivery is not None and not whole:
            delivery = (delivery[0][selected], delivery[1][selected])
        self.delivery = delivery
        if batch_bytes is not None:
            batch_bytes = np.asarray(batch_bytes)
            if not whole:
                batch_bytes = batch_bytes[selected]
        if batch_tensors is not None:
            batch_tensors = np.asarray(batch_tensors)
            if not whole:
                batch_tensors = batch_tensors[selected]
        self.batch_bytes, self.batch_tensors = batch_bytes, batch_tensors
        # As the latest epoch's workers started with them, where not given.
        self.thread_pools = (thread_pools if thread_pools is not None
                             else common.latest_fact(self.src, "thread_pools"))
        self.clocks = None
        self.own_wait: Optional[np.ndarray] = None
        if fetch_clocks is not None and len(fetch_clocks[0]):
            pos = wait_split.clocked_positions(fetch_clocks[0], None if whole else selected,
                                               len(records))
            self.clocks = (pos, *(np.asarray(a) for a in fetch_clocks[1:]))
        del selected
        self.epoch = steps["epoch"]
        # Each epoch's run of steps, found once: the epoch column is strided
        # in the records (48 B a step), so each pass over it costs.
        self.runs = evidence.epoch_runs(self.epoch)
        self.epochs = self.runs[0]
        self.first = startup.start_mask(steps, src, source_id, self.epochs)
        self.w = common.Steady(steps, self.first)
        self.loader = src.loader if src is not None else None
        self.num_workers = self.loader.get("num_workers") if self.loader else None
        self.recorded = ([{"name": src.name if src is not None else str(source_id),
                           "steps": len(steps)}] if whole and len(steps)
                         else _recorded(records, sources))
        # Handed on by the stages (see each).
        self.unmarked = self.marked = None
        self.making_ns = self.met = self.clocked_making = self.per_batch = None
        self.clocked_sampler = self.others_queued = None
        self.host_share = self.host_in_waits = self.parts_all = self.body = None
        self.mask = self.gaps = self.stall_wait = None
        self.gpu_steps = None
        self.ranks_workers = self.bytes_seen = self.batch_top = None
        self.memory_found: list = []

    def report(self, summary: dict) -> Report:
        """The Report of ``summary`` with the per-step arrays it keeps."""
        rw = self.ranks_workers
        rep = Report(summary, self.steps, delivery=(
            {"ranks": np.maximum(rw[0], -1, dtype=np.int64),
             "workers": np.maximum(rw[1], -1, dtype=np.int64)}
            if summary["delivery"] is not None and rw is not None else None))
        if self.worker_batches is not None:
            rep.worker_batches, rep.worker_offsets = self.worker_batches
        if self.worker_items is not None:
            rep.worker_items = self.worker_items[0]
        rep.batch_top = self.batch_top
        rep.samples = _run_samples(self.samples, self.steps, summary, self.main_pid)
        if self.gpu_steps is not None:
            rep.gpu_wait_ns, rep.gpu_step_ns = self.gpu_steps[0], self.gpu_steps[1]
        return rep


# --- the stages, in order: each returns the sections it adds ----------------------


def _stage_counts(run: _Run, s: dict) -> dict:
    """Which source, its steps and epochs, the store's health."""
    return _counts(run.steps, run.w, run.epochs, run.info, run.source_id, run.src,
                   run.recorded)


def _stage_durations(run: _Run, s: dict) -> dict:
    """The workers' production, the measured parts of the wait, the
    duration statistics and the diagnosis with its support."""
    steps, w = run.steps, run.w
    batches = run.worker_batches
    if batches is not None:
        # Each batch's wait for a core from every thread of its worker (the
        # record keeps the fetching thread's; the Report keeps the record).
        batches = (evidence.every_thread_runq(batches[0], run.samples,
                                              getattr(run.src, "epoch_facts", None) or {}),
                   batches[1])
    production, run.making_ns, run.met, run.per_batch = worker_code.production(
        steps, w.steady, run.src, run.delivery, batches, run.loader, run.epochs,
        _stuck_after_s(run.sampler_info), run.worker_items)
    if run.source_id == 0 and len(steps):
        no_fetch = (steps["flags"] & _core.FLAG_NO_FETCH) != 0
        run.unmarked = (int(np.count_nonzero(no_fetch[w.steady])),
                        int(np.count_nonzero(w.steady)))
        if run.unmarked[0]:
            # The steady steps whose fetch was marked: the only ones whose
            # wait was measured (the trend reads these).
            run.marked = ~no_fetch[w.steady]
        del no_fetch
    decided = input_bound.production_share(production) is not None
    run.clocked_making = clock_split.clocked_making(steps, run.clocks,
                                                     run.making_ns if decided else None, run.met,
                                                     run.delivery, run.samples,
                                                     getattr(run.src, "epoch_facts", None))
    host_in_waits = clock_split.others_in_clocked(steps, w.steady, run.clocks, run.samples,
                                                   run.src, run.sampler_info, run.main_pid)
    run.host_share = host_in_waits["host_share"] if host_in_waits else None
    cpus = common.latest_fact(run.src, "usable_cpus")
    if host_in_waits is not None and cpus:
        # What the others' cores are a share of, for every source: a
        # generator's summary has no loader's host facts (compare).
        host_in_waits["usable_cpus"] = int(cpus)
    run.host_in_waits = host_in_waits
    run.clocked_sampler = clock_split.clocked_sampler(steps, run.clocks, run.sampler_items)
    run.others_queued = clock_split.clocked_others_queued(steps, run.clocks, run.samples, run.src,
                                                           run.sampler_info, run.main_pid)
    run.parts_all = clock_split.split_wait(steps, w.steady, run.clocks, run.clocked_making,
                                            run.host_share, run.clocked_sampler, run.others_queued)
    run.body = clock_split.body_split(steps, w.steady, run.clocks)
    if run.body is not None:
        host = clock_split.others_in_clocked(steps, w.steady, run.clocks, run.samples, run.src,
                                              run.sampler_info, run.main_pid, bodies=True)
        if host is not None and host["host_share"] is not None:
            run.body["host_share"] = host["host_share"]
    totals = stall_steps.input_share(w)
    leads = wait_parts.host_leads(run.parts_all)
    explains = leads and wait_parts.host_explains(run.parts_all, totals[0], run.body)
    aside = leads and not explains
    split = (wait_parts.production_fraction(run.parts_all),
             wait_parts.other_largest_fraction(run.parts_all, host_aside=aside),
             explains, wait_parts.main_work_leads(run.parts_all, host_aside=aside))
    if (split[2] or (split[0] is not None and split[1] is not None)) and (
            wait_parts.workers_outrun_cores(production, run.body, cpus)):
        # The workers need more cores than the host has for them with no
        # other program: every part of the wait (the cores' waits and the
        # hand-over stretched by them included) is the loader's production
        # running short, so the diagnosis reads it as wholly that.
        split = (1.0, None, False, False)
    out = stall_steps.duration_block(w, production, run.unmarked, *split, totals=totals)
    out["diagnosis_support"] = stall_steps.diagnosis_support(w, out["diagnosis"], production,
                                                             run.making_ns, run.loader, *split)
    out["production"] = production
    return out


def _stage_stalls(run: _Run, s: dict) -> dict:
    """The stall rule over the loader's waits (a clocked fetch's wait less
    its waits for a core, the loop thread's and the awaited worker's in the
    batch's transit: the cores' part), the
    measured parts of the stalls, and the GPU block where cuda was on."""
    steps, w, clocks = run.steps, run.w, run.clocks
    real_wait, queued = w.wait, clock_split.queued_in_fetch(steps, w, clocks, run.clocked_making,
                                                             run.clocked_sampler, run.others_queued)
    if queued is not None:
        w.wait = np.maximum(real_wait - queued, 0)
        # The step loses the same part: a stall matters against the step the
        # loop would take with those waits gone, not one the host stretched
        # (at num_workers=0 beside 4 CPU hogs, 100 ms batches over 600 ms
        # waits read "no stalls" against half a 617 ms step, 4 of 4 runs).
        w.step = w.step - queued
        w.known = stall_threshold.KnownStats()
    run.mask, run.gaps, out = stall_steps.stall_block(w, run.epoch, run.stall_threshold_s,
                                                      max(1, int(run.num_workers or 0)), run.marked)
    out["stalls"]["host_waits"] = clock_split.host_waits(
        real_wait, queued, out["stalls"]["threshold_s"], w)
    out["stalls"]["less_core_waits"] = queued is not None
    for key in ("trend", "trend_not_yet"):
        if queued is not None and out[key] is not None:
            # Read from the same waits as the stall rule: say so in its words.
            out[key]["less_core_waits"] = True
    # Each stall's own wait, in step order (the stalls are steady steps):
    # gathered from the contiguous steady waits, not the strided records.
    run.stall_wait = real_wait[run.mask if w.all else run.mask[w.steady]]
    del real_wait, queued
    if out["trend"] is not None:
        sides = clock_split.trend_host(steps, w, out["trend"], run)
        if sides is not None:
            out["trend"]["host_cores"] = sides
    out["wait_parts"] = (None if run.parts_all is None else {
        "all": run.parts_all,
        "stalls": clock_split.split_wait(steps, run.mask, clocks, run.clocked_making,
                                          run.host_share, run.clocked_sampler, run.others_queued),
        "largest": startup.with_sampler_code(
            wait_parts.next_for(run.parts_all, s.get("input_share"), run.body), run.src),
        "compute": run.body,
        "host": run.host_in_waits})
    if run.gpu is not None:     # cuda off: no gpu key
        run.gpu_steps = gpu_per_step(steps, run.gpu)
        block = gpu_block(s, steps, w.steady, run.gpu, run.gpu_steps)
        # NVML's utilisation in the input waits against the rest.
        block["utilisation"] = evidence.gpu_utilisation(steps, run.mask, w.steady,
                                                        run.gpu.get("utilisation"))
        out["gpu"] = block
    return out


def _stage_temporal(run: _Run, s: dict) -> dict:
    """When the stalls fall (the predicted cadence first), the epochs'
    start-up, the loader's facts."""
    steps, w, mask = run.steps, run.w, run.mask
    stalls = s["stalls"]
    positions = stall_steps.positions(steps, w, mask, stalls, run.runs)
    predicted = stall_steps.predicted_cadence(positions, run.num_workers)
    out = stall_steps.temporal_block(mask, run.gaps, run.epoch, w.wait, run.num_workers,
                                     stalls["every_fetch_slow"], predicted,
                                     run.stall_wait, positions)
    run.stall_wait = None
    item = stalls.get("rule_item")
    tmp = out.get("temporal")
    if (item and item[0] == "threshold_" + stall_threshold.RULE_POSITION and tmp
            and tmp.get("period") == item[1]["period"] and tmp.get("p_value") is not None):
        # Stalls chosen by their position: their placement's own p-value
        # says nothing; the position rule's test is the evidence.
        tmp["p_value"] = max(tmp["p_value"], item[1]["p_value"])
    # At num_workers=0 a fetch's own wait is its batch's make time, which
    # the sizes' test reads (worker_code.attribution_and_bytes); else 8 B a step freed.
    run.own_wait = w.wait if run.num_workers == 0 and run.sampler_items is not None else None
    w.wait = None    # the statistics are taken
    first = run.first
    out["epoch_start"] = {
        "count": int(first.sum()),
        "steps": np.flatnonzero(first).tolist(),
        "input_wait_s": common.duration_stats_s(w.first_wait),
        "by_epoch": (by_epoch := startup.start_by_epoch(
            run.epoch[first], w.first_wait, getattr(run.src, "epoch_facts", None) or {},
            startup.init_by_epoch(run.worker_items),
            startup.sampler_in_first(run.steps, first, run.epoch, run.sampler_items)
            if run.num_workers == 0 else None)),
        **startup.start_iter(by_epoch, common.latest_fact(run.src, "sampler_code")),
        **startup.start_init(by_epoch, common.latest_fact(run.src, "worker_init_code")),
        **startup.start_making(run.making_ns, first, w.first_wait),
        **startup.start_cost(run.met, first, w.steady),
    }
    out["loader"] = dict(run.loader) if run.loader is not None else None
    return out


def _stage_evidence(run: _Run, s: dict) -> dict:
    """Host, delivery, workers and stuck fetches; the attribution and the
    batches' bytes; the code that makes the slow batches."""
    steps, w, src = run.steps, run.w, run.src
    run.bytes_seen = evidence.batch_bytes(run.batch_bytes, w.steady, run.batch_tensors)
    # Each step's batch rank and worker as arrays, for the delivery
    # evidence and the attribution both.
    run.ranks_workers = (
        evidence.delivery_ranks(steps, *(run.delivery or (None, None)), src, run.runs)
        if run.source_id != 0 and getattr(src, "loader", None) is not None else None)
    trend = s.get("trend")
    if (trend is not None and trend.get("changed_at_step") is not None
            and run.ranks_workers is not None):
        # Which workers still made batches past a change inside the run.
        workers = run.ranks_workers[1] if w.all else run.ranks_workers[1][w.steady]
        gone = wait_trend.workers_at_change(workers, int(trend["changed_at_step"]))
        if gone is not None:
            trend.update(gone)
    out = _evidence(steps, run.mask, w.steady, src, run.source_id, run.delivery, run.samples,
                    run.sampler_info, run.stuck_events, run.main_pid,
                    run.bytes_seen["median"] if run.bytes_seen else None, run.ranks_workers,
                    run.making_ns, run.runs,
                    wait_parts.next_for((s.get("wait_parts") or {}).get("stalls")),
                    run.thread_pools)
    run.making_ns = None
    outside = (worker_evidence.thread_pool({**s, **out})
               + worker_evidence.outside_batches({**s, **out}))
    if outside and out["workers"] is not None:
        # Measured beside the stalls' readings: the workers' own CPU that
        # no batch took.
        out["workers"]["evidence_items"] = (findings.stored(outside)
                                            + out["workers"]["evidence_items"])
        out["workers"]["evidence"] = findings.sentences(out["workers"]["evidence_items"])
    out.update(worker_code.attribution_and_bytes({**s, **out}, run.mask, w.steady, run.bytes_seen,
                                                 run.ranks_workers, run.met, steps, run.per_batch,
                                                 run.sampler_items, run.own_wait))
    run.own_wait = None
    out["slow_code"], run.batch_top = worker_code.slow_code_block(
        run.stack_input, run.met, steps, run.mask, w.steady,
        (s.get("wait_parts") or {}).get("stalls"), run.per_batch, run.clocks)
    if run.num_workers == 0 and out["attribution"] is not None:
        # No worker times collate_fn apart at num_workers=0: the stack
        # samples of the stalled fetches do.
        share = worker_code.collate_sampled(out["slow_code"], src)
        if share is not None:
            out["attribution"] = attribution.with_collate_share(out["attribution"], share,
                                                                sampled=True)
    run.met = None
    return out


def _longest_wait_s(w: common.Steady) -> Optional[float]:
    """The longest recorded fetch's wait (s), or None without one."""
    return float(w.max_wait) * NS if w.max_wait is not None else None


def _interrupt_bar_s(w: common.Steady) -> float:
    """How long a fetch interrupted by Ctrl-C must have waited to be the
    run's bottom line (evidence.raised): longer than any delivered fetch
    and than the stall floor (STALL_FLOOR_S), a hang, not a loop stopped
    between normal fetches."""
    return max(_longest_wait_s(w) or 0.0, stall_threshold.STALL_FLOOR_S)


def _stage_findings(run: _Run, s: dict) -> dict:
    """The prediction, the workers' memory, the bottom line and the notes
    (codes and numbers, and today's words beside them)."""
    out = {"prediction": predict.predict(s)}
    memory_ = (memory.summarise(run.samples, run.steps,
                                getattr(run.src, "epoch_facts", {}) or {}, run.main_pid)
               if run.loader is not None and run.samples is not None else None)
    run.memory_found = worker_memory.memory_findings(
        memory_, run.num_workers, (s.get("host") or {}).get("start_method"),
        _sample_bytes(s))
    if memory_ is not None:
        memory_["findings"] = [code for code, _ in run.memory_found]
    out["memory"] = memory_
    out["headline"] = _headline(run.w, run.epoch, run.epochs, {**s, **out}, run.sampler_info,
                                evidence.raised(getattr(run.src, "epoch_facts", None) or {},
                                                run.steps, _interrupt_bar_s(run.w)))
    so_far = {**s, **out}
    out["note_items"] = findings.stored(
        _notes(run.info, so_far, run.src, run.source_id, run.recorded, run.stuck_events or [],
               run.sources, run.unmarked)
        + findings.family_notes(so_far))
    out["notes"] = findings.sentences(out["note_items"])
    return out


def _sample_bytes(s: dict) -> Optional[float]:
    """The median batch's bytes over the loader's batch_size; None where
    either is unknown."""
    median = (s.get("batch_bytes") or {}).get("median")
    size = (s.get("loader") or {}).get("batch_size")
    return float(median) / size if median and size else None


def _stage_advice(run: _Run, s: dict) -> dict:
    """The next steps, arranged (advice.arrange): codes and numbers, their
    words and roles."""
    arranged, roles = advice.arrange(advice.evidence_next_steps(s, advice.next_steps(s)))
    # The workers' memory after the input wait's lines: a finding about
    # memory, not about the wait (copy-on-read led a HAND-OVER report whose
    # own next step came below it, helper 28B).
    arranged = arranged + list(run.memory_found)
    roles = roles + ["why"] * len(run.memory_found)
    items = findings.stored(arranged)
    return {"next_items": items, "next": findings.sentences(items), "next_roles": roles}


# build()'s pipeline: each stage once, in this order.
STAGES = (_stage_counts, _stage_durations, _stage_stalls, _stage_temporal, _stage_evidence,
          _stage_findings, _stage_advice)


def _run_samples(samples: Optional[np.ndarray], steps: np.ndarray, s: dict,
                 main_pid: Optional[int]) -> Optional[np.ndarray]:
    """The sampler's readings of this run's processes (the main process and
    the workers of its epochs) and of the host (pid 0) within its steps' span, for the timeline's
    counter tracks; None without readings."""
    if samples is None or len(samples) == 0 or len(steps) == 0:
        return None
    pids = {main_pid, evidence.HOST_PID} if main_pid else {evidence.HOST_PID}
    for e in (s.get("workers") or {}).get("pids_by_epoch") or []:
        pids.update(p for p in e.get("pids") or [] if p)
    t0, t1 = steps["begin_ns"].min(), steps["end_ns"].max()
    keep = (np.isin(samples["pid"], list(pids)) & (samples["t_ns"] >= t0)
            & (samples["t_ns"] <= t1))
    return samples[keep] if keep.any() else None


def _recorded(records: np.ndarray, sources: Mapping[int, Any]) -> list[dict]:
    """{name, steps} of every source in ``records``."""
    ids, counts = np.unique(records["source"], return_counts=True)
    return [{"name": sources[int(i)].name if int(i) in sources else str(int(i)),
             "steps": int(c)} for i, c in zip(ids, counts)]


def _counts(steps: np.ndarray, w: common.Steady, epochs: np.ndarray, info: dict, source_id: int,
            src, recorded: list[dict]) -> dict:
    """Which source, how many steps and epochs, and the store's health."""
    n = len(steps)
    return {
        "source": (src.name if src is not None
                   else "probes" if source_id == 0 else str(source_id)),
        "sources": recorded,
        "steps": n,
        "steady_steps": len(w.wait),
        "epochs": int(len(epochs)),
        "wall_s": float(steps["end_ns"].max() - steps["begin_ns"].min()) * NS if n else 0.0,
        "dropped_steps": int(info["dropped_steps"]),
        "out_of_memory": bool(info["out_of_memory"]),
        "misuse": dict(info["misuse"]) if source_id == 0 else {},
    }


def _stuck_after_s(sampler_info: Optional[dict]) -> float:
    """The stuck watch's line (s): the sampler's setting, or for hand-made
    inputs, which carry no sampler settings, the default's value (a
    constant of the C core, not the live process's setting)."""
    if sampler_info is not None and sampler_info.get("stuck_after_s") is not None:
        return sampler_info["stuck_after_s"]
    return _core.DEFAULT_STUCK_AFTER_S


def _headline(w: common.Steady, epoch: np.ndarray, epochs: np.ndarray, s: dict,
              sampler_info: Optional[dict], raised: Optional[dict] = None) -> dict:
    """What holds the run's wall time (bottom_line.headline): the epoch starts'
    cost per epoch and share of the wall time, stuck fetches, a worker that
    died and an exception that ended the loop (``raised``, evidence.raised)."""
    per_epoch: list = []
    if not w.all:
        index = np.searchsorted(epochs, epoch[w.first])
        sums = np.bincount(index, weights=w.first_wait.astype(np.float64),
                           minlength=len(epochs))
        per_epoch = [float(x) * NS for x in sums]
    stuck_after = _stuck_after_s(sampler_info)
    stuck = s.get("stuck") or []
    longest = _longest_wait_s(w)
    exited = (s.get("workers") or {}).get("exited") or []
    rule = bottom_line.headline(
        s["wall_s"], sum(per_epoch), s["input_wait_s"]["total"] or 0.0,
        any(ev["still_waiting"] for ev in stuck), longest, stuck_after, bool(exited),
        raised is not None and raised["ended"], fetches=s.get("steps"))
    return {"label": rule.label, "code": rule.code,
            "epoch_start_share": rule.epoch_start_share,
            "epoch_start_s_per_epoch": per_epoch,
            "stuck_after_s": stuck_after,
            "longest_wait_s": longest,
            # The first worker that died: the event that ended the run.
            "exited": exited[0] if exited else None,
            "raised": raised}


def _evidence(steps: np.ndarray, mask: np.ndarray, steady: np.ndarray, src, source_id: int,
              delivery: Optional[tuple], samples: Optional[np.ndarray],
              sampler_info: Optional[dict], stuck_events: Optional[list],
              main_pid: Optional[int], median_batch_bytes: Optional[float] = None,
              ranks_workers: Optional[tuple] = None,
              making_ns: Optional[np.ndarray] = None,
              runs: Optional[tuple] = None,
              stall_largest: Optional[dict] = None,
              thread_pools: Optional[list] = None) -> dict:
    """Host, delivery, worker and stuck-fetch evidence (DataLoader sources);
    ``ranks_workers``: evidence.delivery_ranks of the steps, if known;
    ``making_ns``: per step, the wait during which its worker was making
    batches (see worker_code.production), if known; ``runs``: evidence.epoch_runs of
    the steps' epochs; ``stall_largest``: the stalls' largest measured
    part (wait_parts.next_for), if measured; ``thread_pools`` the native
    thread pools the workers run too (wrapping.thread_pools), if known."""
    loader_src = src is not None and source_id != 0
    workers = None
    if loader_src and samples is not None and sampler_info is not None:
        workers = evidence.workers(src, steps, mask, steady, samples, sampler_info, main_pid,
                                   delivery[1] if delivery is not None else None,
                                   median_batch_bytes, making_ns, runs, stall_largest)
        if workers is not None:
            workers["evidence_items"] = findings.stored(workers.pop("findings"))
            workers["evidence"] = findings.sentences(workers["evidence_items"])
    return {
        "host": evidence.host(src, thread_pools) if loader_src else None,
        "delivery": (evidence.delivery(steps, *(delivery or (None, None)), src,
                                       ranks_workers=ranks_workers, runs=runs)
                     if loader_src else None),
        "workers": workers,
        "stuck": evidence.stuck(stuck_events or [], source_id, steps),
    }


def _notes(info: dict, s: dict, src, source_id: int, recorded: list[dict],
           stuck_events: list, sources: Mapping[int, Any],
           unmarked: Optional[tuple] = None) -> list[tuple[str, dict]]:
    """The report's notes as (code, numbers) items, worded by findings.sentences.
    ``unmarked``: (steady probe steps without fetch_done(), steady steps)."""
    out: list[tuple[str, dict]] = []
    if info["dropped_steps"]:
        out.append(("dropped", {"count": info["dropped_steps"]}))
    if source_id == 0:
        # Steps without a fetch mark skew the numbers above them; past the
        # policy's share the diagnosis itself says so (NO-DATA).
        if unmarked and unmarked[0] and not input_bound.unmarked_past_share(unmarked):
            out.append(("unmarked", {"steps": unmarked[0], "steady": unmarked[1]}))
        for key, count in info["misuse"].items():
            if count:
                probe = key.split("_without_")[0].split("_while_")[0].split("_repeated")[0]
                out.append(("misuse", {"key": key, "count": count, "probe": probe}))
        if info["probe_step_open"]:
            out.append(("probe_open", {}))
    if s["steps"] == 0:
        out.append(("no_fetch_yet", {}) if source_id != 0 else ("no_steps", {}))
    elif s["steady_steps"] < input_bound.MIN_STEADY_STEPS:
        out.append(("few_steps", {"steps": s["steady_steps"]}))
    if src is not None and source_id != 0:
        out.extend(("unwatched", u) for u in evidence.unwatched(src))
    host = s["host"]
    if host and host["oversubscribed"]:
        out.append(("oversubscribed", {"num_workers": host["num_workers"],
                                       "cpus": host["usable_cpus"]}))
    for sid in sorted({ev["source"] for ev in stuck_events
                       if ev["source"] != source_id and not ev["ended_ns"]}):
        out.append(("stuck_elsewhere", {"name": sources[sid].name if sid in sources
                                        else str(sid)}))
    others = [(o["name"], o["steps"]) for o in recorded
              if o["name"] != (src.name if src else None)]
    if others:
        out.append(("also_recorded", {"others": others}))
    return out


def gpu_per_step(steps: np.ndarray, gpu: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each step's GPU-visible input wait and GPU step (int64 ns, -1 where
    there is no reading) and whether its wait ends at input_ready() (bool),
    all of shape (steps,): the readings of ``gpu`` (GpuTimeline.readings())
    matched to the steps by the step's host ``begin_ns``, their key."""
    n = len(steps)
    wait = np.full(n, -1, np.int64)
    step = np.full(n, -1, np.int64)
    ready = np.zeros(n, bool)
    keys = np.asarray(gpu["key_ns"], np.int64)
    if n and len(keys):
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        begin = steps["begin_ns"]
        at = np.minimum(np.searchsorted(sorted_keys, begin), len(keys) - 1)
        hit = sorted_keys[at] == begin
        which = order[at[hit]]
        wait[hit] = np.asarray(gpu["wait_ns"], np.int64)[which]
        step[hit] = np.asarray(gpu["step_ns"], np.int64)[which]
        ready[hit] = np.asarray(gpu["ready"], bool)[which]
    return wait, step, ready


def gpu_block(summary: dict, steps: np.ndarray, steady: np.ndarray, gpu: Optional[dict],
              per_step: Optional[tuple]) -> Optional[dict]:
    """The ``gpu`` section: host wait and GPU-visible wait side by side
    over the steady steps with a reading, the GPU step, coverage, and the
    diagnosis by gpu_wait.gpu_diagnosis (which may replace ``summary``'s
    diagnosis and its rule, in place).  None without readings
    (``gpu`` None: cuda was off)."""
    if gpu is None or per_step is None:
        return None
    wait_g, step_g, ready = per_step
    read = steady & (wait_g >= 0)
    both = read & (step_g >= 0)
    n_steady = int(np.count_nonzero(steady))
    n_read = int(np.count_nonzero(read))
    host_wait = steps["fetch_done_ns"] - steps["begin_ns"]
    host_step = steps["end_ns"] - steps["begin_ns"]
    host_total = int(host_step[both].sum())
    gpu_total = int(step_g[both].sum())
    host_share = float(host_wait[both].sum()) / host_total if host_total > 0 else None
    gpu_share = float(wait_g[both].sum()) / gpu_total if gpu_total > 0 else None
    coverage = n_read / n_steady if n_steady else None
    host = input_bound.Diagnosis(summary["diagnosis"], summary["input_share"])
    diagnosis, code = gpu_wait.gpu_diagnosis(host, gpu_share, coverage, n_read)
    block = {
        "backend": gpu.get("backend"),
        "ring": int(gpu["ring"]),
        "recorded": int(gpu["recorded"]),
        "skipped": int(gpu["skipped"]),
        "pending": int(gpu["pending"]),
        "error": gpu.get("error"),
        "steady_steps": n_steady,
        "steps_read": n_read,
        "coverage": coverage,
        "ready_marked": int(np.count_nonzero(read & ready)),
        "host_wait_s": common.duration_stats_s(host_wait[read]),
        "gpu_wait_s": common.duration_stats_s(wait_g[read]),
        "gpu_step_s": common.duration_stats_s(step_g[steady & (step_g >= 0)]),
        "host_share": host_share,
        "gpu_share": gpu_share,
        "host_diagnosis": host.label,
        "rule": code,
    }
    rule = gpu_wait.gpu_finding(code, block)
    block.update(common.worded("rule_text", rule))
    if diagnosis.label != host.label:
        summary["diagnosis"] = diagnosis.label
        summary.update(common.worded("diagnosis_rule", rule))
    return block
