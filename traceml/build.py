"""Building a Report: the recorded steps of one source reduced to numbers
and verdicts.

``build()`` is a pipeline of stages (STAGES) over explicit inputs
(records, store info, the sources mapping, sampler readings): the C
reducers and the measuring modules give the numbers, the findings
families (:mod:`traceml.findings`) the verdicts and their words.  ``build`` never reads a recorder or the live process:
:meth:`traceml.Recorder.report` gathers its inputs.  The :class:`Report`
itself is in :mod:`traceml.result`.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Mapping, Optional

import numpy as np

from . import _core, evidence, memory, predict, sample_timing, stacks, torch_private, wait_split, worker_timing
from . import findings
from .findings import advice, attribution, bottom_line, gpu_wait, hand_over, input_bound, label_support, stall_shape, stall_threshold, slow_code, slow_samples, stall_timing, wait_parts, wait_trend, worker_evidence, worker_memory
from .result import Report

NS = 1e-9
QUANTILES = (50.0, 90.0, 95.0, 99.0)
STAT_KEYS = ("mean", "median", "p90", "p95", "p99", "max", "total")


def duration_stats_s(x_ns: np.ndarray) -> dict:
    """{mean, median, p90, p95, p99, max, total} in seconds (None if empty).

    mean/total/max come from the C ``totals`` (one pass), the rest from one
    call of the C ``percentiles`` (numpy.percentile's "linear" rule).
    """
    return _stats_and(x_ns)[0]


def _stats_and(x_ns: np.ndarray, extra_q: tuple = ()) -> tuple[dict, tuple]:
    """(:func:`duration_stats_s` of ``x_ns``, its percentiles ``extra_q``
    in ns, or Nones where empty): one selection for both."""
    if len(x_ns) == 0:
        return {k: None for k in STAT_KEYS}, (None,) * len(extra_q)
    s = _core.totals(x_ns)
    got = _core.percentiles(x_ns, QUANTILES + tuple(extra_q)).tolist()
    p50, p90, p95, p99 = got[:len(QUANTILES)]
    return {
        "mean": s["mean"] * NS,
        "median": p50 * NS,
        "p90": p90 * NS,
        "p95": p95 * NS,
        "p99": p99 * NS,
        "max": s["max"] * NS,
        "total": s["sum"] * NS,
    }, tuple(got[len(QUANTILES):])


def _worded(key: str, finding: Optional[findings.Finding]) -> dict:
    """``{key: its words, key + "_item": [code, numbers]}`` for one
    finding (both None without one): the sentence for today's views, the
    item a run file keeps and Report.load words again (result.RULE_WORDS)."""
    if finding is None:
        return {key: None, key + "_item": None}
    return {key: findings.sentences([finding])[0], key + "_item": findings.stored([finding])[0]}


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


def _startup_steps(src, epoch: np.ndarray, epochs: np.ndarray):
    """How many leading steps of each step's epoch are start-up
    (max(1, num_workers) for a DataLoader, else 1): one number when every
    epoch in ``epochs`` (the distinct values of ``epoch``) has the same,
    else an array of shape (steps,)."""
    if src is None:
        return 1
    per_epoch = [stall_timing.effective_workers((src.loader_of(e) or {}).get("num_workers")) or 1
                 for e in epochs]
    if len(set(per_epoch)) <= 1:
        return per_epoch[0] if per_epoch else 1
    table = np.asarray(per_epoch, dtype=np.int64)
    return table[np.searchsorted(epochs, epoch)]


# Past this many start-up steps the steady differences are gathered by a
# mask; below it, run by run between them (a long run's few start-up
# steps: no full-length temporary, which costs its page faults).
_STEADY_RUNS_MAX = 4096


def _steady_difference(a: np.ndarray, b: np.ndarray, at_first: np.ndarray) -> np.ndarray:
    """``(a - b)`` less the entries at ``at_first`` (ascending indices):
    int64, shape (len(a) - len(at_first),), written once."""
    if len(at_first) > _STEADY_RUNS_MAX:
        keep = np.ones(len(a), dtype=bool)
        keep[at_first] = False
        return a[keep] - b[keep]
    out = np.empty(len(a) - len(at_first), dtype=np.int64)
    edges = np.r_[-1, at_first, len(a)]
    done = 0
    for lo, hi in zip(edges[:-1] + 1, edges[1:]):
        if hi > lo:
            np.subtract(a[lo:hi], b[lo:hi], out=out[done:done + hi - lo])
            done += hi - lo
    return out


class _Steady:
    """The steady-state steps of one source, gathered once.

    ``wait`` and ``step`` are the steady steps' input wait and step time
    (int64 ns, contiguous, shape (steady steps,)); ``first_wait`` the
    start-up steps' waits; ``steady`` and ``first`` the masks over all the
    source's steps.  When no step is start-up (the probes), ``wait`` is
    the whole wait array, not a copy.  A report of 10M steps holds two
    int64 arrays here (16 B a step), and ``step`` is dropped once the stall
    rule has used it."""

    def __init__(self, steps: np.ndarray, first: np.ndarray):
        self.first = first
        self.steady = ~first
        at_first = np.flatnonzero(first)
        self.all = not len(at_first)
        begin = steps["begin_ns"]
        if self.all:
            self.wait = steps["fetch_done_ns"] - begin
            self.step = steps["end_ns"] - begin
            self.first_wait = self.wait[:0]
        else:
            self.first_wait = steps["fetch_done_ns"][at_first] - begin[at_first]
            self.wait = _steady_difference(steps["fetch_done_ns"], begin, at_first)
            self.step = _steady_difference(steps["end_ns"], begin, at_first)
        tops = [int(a.max()) for a in (self.wait, self.first_wait) if len(a)]
        # Order statistics the durations selected, for the stall rule.
        self.known = stall_threshold.KnownStats()
        self.max_wait = max(tops) if tops else None

    def full(self, steady_mask: np.ndarray) -> np.ndarray:
        """A mask over the steady steps as a mask over all steps."""
        if self.all:
            return steady_mask
        out = np.zeros(len(self.steady), dtype=bool)
        out[self.steady] = steady_mask
        return out


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
    start-up mask and the steady steps (:class:`_Steady`).  Each stage
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
                             else _latest_fact(self.src, "thread_pools"))
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
        self.first = _epoch_start(steps, src, source_id, self.epochs)
        self.w = _Steady(steps, self.first)
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
    production, run.making_ns, run.met, run.per_batch = _production(
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
    run.clocked_making = _clocked_making(steps, run.clocks,
                                         run.making_ns if decided else None, run.met,
                                         run.delivery, run.samples,
                                         getattr(run.src, "epoch_facts", None))
    host_in_waits = _others_in_clocked(steps, w.steady, run.clocks, run.samples,
                                       run.src, run.sampler_info, run.main_pid)
    run.host_share = host_in_waits["host_share"] if host_in_waits else None
    run.host_in_waits = host_in_waits
    run.clocked_sampler = _clocked_sampler(steps, run.clocks, run.sampler_items)
    run.others_queued = _clocked_others_queued(steps, run.clocks, run.samples, run.src,
                                               run.sampler_info, run.main_pid)
    run.parts_all = _wait_split(steps, w.steady, run.clocks, run.clocked_making,
                                run.host_share, run.clocked_sampler, run.others_queued)
    run.body = _body_split(steps, w.steady, run.clocks)
    if run.body is not None:
        host = _others_in_clocked(steps, w.steady, run.clocks, run.samples, run.src,
                                  run.sampler_info, run.main_pid, bodies=True)
        if host is not None and host["host_share"] is not None:
            run.body["host_share"] = host["host_share"]
    cpus = _latest_fact(run.src, "usable_cpus")
    totals = _input_share(w)
    leads = wait_parts.host_leads(run.parts_all)
    explains = leads and wait_parts.host_explains(run.parts_all, totals[0])
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
    out = _durations(w, production, run.unmarked, *split, totals=totals)
    out["diagnosis_support"] = _diagnosis_support(w, out["diagnosis"], production,
                                                  run.making_ns, run.loader, *split)
    out["production"] = production
    return out


def _stage_stalls(run: _Run, s: dict) -> dict:
    """The stall rule over the loader's waits (a clocked fetch's wait less
    its waits for a core, the loop thread's and the awaited worker's in the
    batch's transit: the cores' part), the
    measured parts of the stalls, and the GPU block where cuda was on."""
    steps, w, clocks = run.steps, run.w, run.clocks
    real_wait, queued = w.wait, _queued_in_fetch(steps, w, clocks, run.clocked_making,
                                                 run.clocked_sampler, run.others_queued)
    if queued is not None:
        w.wait = np.maximum(real_wait - queued, 0)
        # The waits changed: of the selections made, the steps' alone hold.
        w.known = stall_threshold.KnownStats(median_step_ns=w.known.median_step_ns)
    run.mask, run.gaps, out = _stalls(w, run.epoch, run.stall_threshold_s,
                                      max(1, int(run.num_workers or 0)), run.marked)
    out["stalls"]["host_waits"] = _host_waits(real_wait, queued, out["stalls"]["threshold_s"],
                                              w)
    # Each stall's own wait, in step order (the stalls are steady steps):
    # gathered from the contiguous steady waits, not the strided records.
    run.stall_wait = real_wait[run.mask if w.all else run.mask[w.steady]]
    del real_wait, queued
    if out["trend"] is not None:
        sides = _trend_host(steps, w, out["trend"], run)
        if sides is not None:
            out["trend"]["host_cores"] = sides
    out["wait_parts"] = (None if run.parts_all is None else {
        "all": run.parts_all,
        "stalls": _wait_split(steps, run.mask, clocks, run.clocked_making, run.host_share,
                              run.clocked_sampler, run.others_queued),
        "largest": _with_sampler_code(wait_parts.next_for(run.parts_all, s.get("input_share")),
                                      run.src),
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
    positions = _positions(steps, w, mask, stalls, run.runs)
    predicted = _predicted_cadence(positions, run.num_workers)
    out = _temporal(mask, run.gaps, run.epoch, w.wait, run.num_workers,
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
    # the sizes' test reads (_attribution_and_bytes); else 8 B a step freed.
    run.own_wait = w.wait if run.num_workers == 0 and run.sampler_items is not None else None
    w.wait = None    # the statistics are taken
    first = run.first
    out["epoch_start"] = {
        "count": int(first.sum()),
        "steps": np.flatnonzero(first).tolist(),
        "input_wait_s": duration_stats_s(w.first_wait),
        "by_epoch": (by_epoch := _start_by_epoch(
            run.epoch[first], w.first_wait, getattr(run.src, "epoch_facts", None) or {},
            _init_by_epoch(run.worker_items),
            _sampler_in_first(run.steps, first, run.epoch, run.sampler_items)
            if run.num_workers == 0 else None)),
        **_start_iter(by_epoch, _latest_fact(run.src, "sampler_code")),
        **_start_init(by_epoch, _latest_fact(run.src, "worker_init_code")),
        **_start_making(run.making_ns, first, w.first_wait),
        **_start_cost(run.met, first, w.steady),
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
    out.update(_attribution_and_bytes({**s, **out}, run.mask, w.steady, run.bytes_seen,
                                      run.ranks_workers, run.met, steps, run.per_batch,
                                      run.sampler_items, run.own_wait))
    run.own_wait = None
    out["slow_code"], run.batch_top = _slow_code(run.stack_input, run.met, steps, run.mask,
                                                 w.steady,
                                                 (s.get("wait_parts") or {}).get("stalls"),
                                                 run.per_batch, run.clocks)
    if run.num_workers == 0 and out["attribution"] is not None:
        # No worker times collate_fn apart at num_workers=0: the stack
        # samples of the stalled fetches do.
        share = _collate_sampled(out["slow_code"], src)
        if share is not None:
            out["attribution"] = attribution.with_collate_share(out["attribution"], share,
                                                                sampled=True)
    run.met = None
    return out


def _longest_wait_s(w: _Steady) -> Optional[float]:
    """The longest recorded fetch's wait (s), or None without one."""
    return float(w.max_wait) * NS if w.max_wait is not None else None


def _interrupt_bar_s(w: _Steady) -> float:
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


def _latest_fact(src, key: str) -> Any:
    """``key`` of the source's latest epoch's facts (None: no such fact,
    or no epoch known)."""
    facts = getattr(src, "epoch_facts", None) or {}
    return facts[max(facts)].get(key) if facts else None


def _with_sampler_code(largest: Optional[dict], src) -> Optional[dict]:
    """``largest`` (wait_parts.next_for) with ``sampler_code``, where the
    sampler's next() is the largest part: the sampler's ``__iter__`` as
    the latest epoch's facts name it (wrapping.sampler_code)."""
    if not largest or largest["part"] != wait_parts.SAMPLER:
        return largest
    code = _latest_fact(src, "sampler_code")
    return {**largest, "sampler_code": code} if code else largest


def _epoch_start(steps: np.ndarray, src, source_id: int, epochs: np.ndarray) -> np.ndarray:
    """True for the start-up steps of each epoch (none for the probes)."""
    if source_id == 0:
        return np.zeros(len(steps), dtype=bool)
    position = steps["flags"] >> _core.FLAG_POS_SHIFT
    return stall_timing.epoch_start_mask(position, _startup_steps(src, steps["epoch"], epochs))


def _start_making(making_ns: Optional[np.ndarray], first: np.ndarray,
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


def _start_cost(met: Optional[tuple], first: np.ndarray, steady: np.ndarray) -> dict:
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


def _init_by_epoch(worker_items: Optional[tuple]) -> dict:
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


def _start_init(by_epoch: list[dict], code: Optional[dict] = None) -> dict:
    """{init_share, worker_init_code}: of the start-up fetches' wait, the
    share the longest worker_init_fn of each epoch's new workers took
    (they run at once, each before its worker's first batch), with the
    function's place (``code``, where known); {} where none was timed."""
    share = _start_share(by_epoch, "init_s")
    if share is None:
        return {}
    return {"init_share": share, **({"worker_init_code": code} if code else {})}


def _start_share(by_epoch: list[dict], key: str) -> Optional[float]:
    """Of every epoch's start-up wait, the share the part ``key`` (s, in
    the epochs that hold it) took, each epoch's part at most its wait;
    None where no epoch holds it or none waited."""
    held = [e for e in by_epoch if e.get(key) is not None]
    total = sum(e["input_wait_s"] for e in by_epoch)
    if not held or total <= 0:
        return None
    return sum(min(e[key], e["input_wait_s"]) for e in held) / total


def _sampler_in_first(steps: np.ndarray, first: np.ndarray, epoch: np.ndarray,
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


def _start_by_epoch(epoch: np.ndarray, wait_ns: np.ndarray,
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
    ``init`` (:func:`_init_by_epoch`) holds the epoch.  At num_workers=0
    ``sampler`` (:func:`_sampler_in_first`) adds the sampler's draws in
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


def _start_iter(by_epoch: list[dict], sampler_code: Optional[dict] = None) -> dict:
    """{iter_share, iter_cpu_share, sampler_code}: of the start-up
    fetches' wait, the share iter() itself took (wall), and of that, the
    share the main thread spent on a CPU (the sampler's __iter__ and first
    index lists, a dataset's set-up), with where the sampler's code is
    (``sampler_code``, wrapping.sampler_code, where known); {} where an
    epoch lacks iter()'s time or none waited."""
    if any(e.get("iter_s") is None for e in by_epoch):
        return {}
    share = _start_share(by_epoch, "iter_s")
    if share is None:
        return {}
    cpu = [e.get("iter_cpu_s") for e in by_epoch]
    whole = sum(e["iter_s"] for e in by_epoch)
    return {"iter_share": share,
            **({"iter_cpu_share": min(1.0, sum(cpu) / whole)}
               if whole > 0 and all(c is not None for c in cpu) else {}),
            **({"sampler_code": sampler_code} if sampler_code else {})}


def _recorded(records: np.ndarray, sources: Mapping[int, Any]) -> list[dict]:
    """{name, steps} of every source in ``records``."""
    ids, counts = np.unique(records["source"], return_counts=True)
    return [{"name": sources[int(i)].name if int(i) in sources else str(int(i)),
             "steps": int(c)} for i, c in zip(ids, counts)]


def _counts(steps: np.ndarray, w: _Steady, epochs: np.ndarray, info: dict, source_id: int,
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


def _production(steps: np.ndarray, steady: np.ndarray, src, delivery: Optional[tuple],
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
    block["samples"], per_batch = _samples(worker_items, records, idx, block)
    return block, busy, (records, idx) if idx is not None else None, per_batch


def _samples(worker_items: Optional[tuple], records: np.ndarray, idx: Optional[np.ndarray],
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


def _clocked_in(pos: np.ndarray, mask: np.ndarray, read: np.ndarray) -> np.ndarray:
    """Which clock readings (shape (m,), bool) are of a step in ``mask`` (a
    mask over the source's steps; ``pos`` the readings' positions there,
    -1 another source's) and pass ``read`` (a mask over the readings)."""
    ok = (pos >= 0) & read
    ok[ok] = mask[pos[ok]]
    return ok


def _clocked_making(steps: np.ndarray, clocks: Optional[tuple],
                    making_ns: Optional[np.ndarray], met: Optional[tuple],
                    delivery: Optional[tuple], samples: Optional[np.ndarray] = None,
                    facts: Optional[dict] = None) -> Optional[tuple]:
    """Per clock reading (parallel to ``clocks``' arrays), the ns of its
    fetch's wait during which the awaited worker was making batches
    (``making_ns`` at that step), the ns of those it waited for a core
    (worker_timing.queued_during), -1 unknown, and the ns its threads
    waited for a core while its made batch was in transit
    (evidence.transit_queued over the sampler's ``samples``; 0 unknown),
    and the ns of its made batch's transit (from the record's ``end_ns``
    to the fetch's end, inside the fetch) during which another worker made
    a batch on a CPU (worker_timing.others_on_cpu_during; -1 unknown);
    None without clocks or without ``making_ns``.  Only the clocked steps
    are weighed: the split reads no other."""
    if clocks is None or making_ns is None:
        return None
    pos = clocks[0]
    ok = pos >= 0
    at = pos[ok]
    making = np.full(len(pos), -1, dtype=np.int64)
    making[ok] = np.asarray(making_ns)[at]
    queued = np.full(len(pos), -1, dtype=np.int64)
    transit = np.zeros(len(pos), dtype=np.int64)
    behind = np.full(len(pos), -1, dtype=np.int64)
    if met is not None and delivery is not None and ok.any():
        worker = np.asarray(delivery[1])[at]
        queued[ok] = worker_timing.queued_during(
            met[0], steps["epoch"][at], worker, steps["begin_ns"][at],
            steps["fetch_done_ns"][at])
        per_step = evidence.transit_queued(samples, facts or {}, met[0], met[1],
                                           steps["begin_ns"], steps["fetch_done_ns"])
        if per_step is not None:
            transit[ok] = np.round(per_step[at]).astype(np.int64)
        j = met[1][at]
        made = np.where(j >= 0, met[0]["end_ns"][np.maximum(j, 0)], steps["fetch_done_ns"][at])
        behind[ok] = worker_timing.others_on_cpu_during(
            met[0], steps["epoch"][at], np.where(j >= 0, worker, -1),
            np.maximum(steps["begin_ns"][at], made), steps["fetch_done_ns"][at])
    return making, queued, transit, behind


def _trend_host(steps: np.ndarray, w: _Steady, trend: dict, run) -> Optional[list]:
    """[before, after]: other programs' CPU (cores, evidence.others_in_waits
    over one window each) on the two sides a trend compares: before and
    after a STEP's change, or its first and last tenths of the steady
    steps; None where the host was not read or the sides are not steps'."""
    if run.samples is None or run.sampler_info is None:
        return None
    idx = np.arange(len(steps)) if w.all else np.flatnonzero(w.steady)
    n = len(idx)
    k = trend.get("changed_at_step")
    if trend["label"] == wait_trend.STEP:
        if k is None or not 0 < k < n:
            return None
        sides = ((0, k), (k, n))
    else:
        tenth = max(1, n // 10)
        sides = ((0, tenth), (n - tenth, n))
    main, workers = evidence.job_pids(run.src, run.sampler_info, run.main_pid)
    host_t = run.samples["t_ns"][run.samples["pid"] == evidence.HOST_PID]
    if not len(host_t):
        return None
    cores = []
    for a, b in sides:
        start, end = steps["begin_ns"][idx[a]], steps["end_ns"][idx[b - 1]]
        # Only where the host's readings cover the side (CLOCKED_COVER of
        # it: the first reading comes a few ms after the first step, the
        # last before report()); steps recorded outside them (hand-made
        # records, a sampler started late) have no host figure.
        lo, hi = max(start, int(host_t.min())), min(end, int(host_t.max()))
        if end <= start or hi - lo < evidence.CLOCKED_COVER * (end - start):
            return None
        got = evidence.others_in_waits(run.samples, np.array([lo]), np.array([hi]),
                                       main, workers)
        if got is None or not got["wall_s"]:
            return None
        cores.append(got["others_cpu_s"] / got["wall_s"])
    return cores


def _clocked_others_queued(steps: np.ndarray, clocks: Optional[tuple],
                           samples: Optional[np.ndarray], src,
                           sampler_info: Optional[dict],
                           main_pid: Optional[int]) -> Optional[np.ndarray]:
    """Per clock reading (parallel to ``clocks``' arrays, int64 ns; 0 for
    another source's), the main process's other threads' wait for a core
    inside its fetch (evidence.main_others_queued); None without clocks
    or readings of the main process."""
    if clocks is None or samples is None or sampler_info is None:
        return None
    main, _ = evidence.job_pids(src, sampler_info, main_pid)
    pos = clocks[0]
    ok = pos >= 0
    if main is None or not ok.any():
        return None
    at = pos[ok]
    begin, done, end = (steps[k][at] for k in ("begin_ns", "fetch_done_ns", "end_ns"))
    got = evidence.main_others_queued(samples, main, (begin, done, clocks[2][ok]),
                                      (done, end, clocks[4][ok]))
    if got is None:
        return None
    out = np.zeros(len(pos), dtype=np.int64)
    out[ok] = np.round(got).astype(np.int64)
    return out


def _clocked_sampler(steps: np.ndarray, clocks: Optional[tuple],
                     sampler_items: Optional[np.ndarray]) -> Optional[tuple]:
    """Per clock reading (parallel to ``clocks``' arrays), the ns and the
    CPU ns the sampler's calls ``sampler_items`` spent inside its fetch's
    wait (worker_timing.sampler_in_waits; 0 for another source's
    readings); None without clocks or without timed calls.  Computed once
    for every split that reads it."""
    if clocks is None or sampler_items is None or not len(sampler_items):
        return None
    pos = clocks[0]
    ok = pos >= 0
    wall = np.zeros(len(pos), dtype=np.int64)
    cpu = np.zeros(len(pos), dtype=np.int64)
    at = pos[ok]
    wall[ok], cpu[ok] = worker_timing.sampler_in_waits(
        sampler_items, steps["begin_ns"][at], steps["fetch_done_ns"][at])
    return wall, cpu


def _others_in_clocked(steps: np.ndarray, steady: np.ndarray,
                       clocks: Optional[tuple], samples: Optional[np.ndarray], src,
                       sampler_info: Optional[dict], main_pid: Optional[int],
                       bodies: bool = False) -> Optional[dict]:
    """evidence.others_in_waits, for the main process and the source's
    workers, over the clocked steady fetches' waits (the fetches the split
    reads), or with ``bodies`` over the steps' bodies whose clocks were
    read (from the batch in hand to the step's end: the compute the body
    split reads); None without clocks, readings or such steps."""
    if clocks is None or samples is None or sampler_info is None:
        return None
    ok = _clocked_in(clocks[0], steady, clocks[3] >= 0 if bodies else True)
    if not ok.any():
        return None
    at = clocks[0][ok]
    main, workers = evidence.job_pids(src, sampler_info, main_pid)
    start, end = ("fetch_done_ns", "end_ns") if bodies else ("begin_ns", "fetch_done_ns")
    return evidence.others_in_waits(samples, steps[start][at], steps[end][at], main, workers)


def _wait_split(steps: np.ndarray, mask: np.ndarray, clocks: Optional[tuple],
                clocked_making: Optional[tuple],
                host_share: Optional[float] = None,
                clocked_sampler: Optional[tuple] = None,
                others_queued: Optional[np.ndarray] = None) -> Optional[dict]:
    """wait_split.split over the clocked steps in ``mask`` (a mask over
    the source's steps); None without clocks or without such steps.
    ``clocked_making``: :func:`_clocked_making`'s (None: no worker
    timing); ``host_share``: the share of the waits for a core that is
    other programs' (:func:`_others_in_clocked`; None: not read);
    ``clocked_sampler``: :func:`_clocked_sampler`'s (None: the sampler
    not timed), each fetch's ``sampler`` part; ``others_queued``:
    :func:`_clocked_others_queued`'s (None: not read)."""
    if clocks is None:
        return None
    pos, cpu, runq = clocks[:3]
    ok = _clocked_in(pos, mask, True)
    if not ok.any():
        return None
    at = pos[ok]
    wait = steps["fetch_done_ns"][at] - steps["begin_ns"][at]
    # The process's clock beside the thread's (others_cpu_ns), where read.
    others = clocks[5][ok] if len(clocks) > 5 else None
    sampler = (None if clocked_sampler is None
               else (clocked_sampler[0][ok], clocked_sampler[1][ok]))
    queued = None if others_queued is None else others_queued[ok]
    if clocked_making is None:
        return wait_split.split(wait, cpu[ok], runq[ok], host_share=host_share,
                                others_cpu_ns=others, sampler=sampler,
                                others_queued_ns=queued)
    return wait_split.split(wait, cpu[ok], runq[ok], clocked_making[0][ok],
                            clocked_making[1][ok], host_share, others, sampler=sampler,
                            transit_queued_ns=clocked_making[2][ok],
                            behind_ns=clocked_making[3][ok], others_queued_ns=queued)


def _queued_in_fetch(steps: np.ndarray, w: _Steady, clocks: Optional[tuple],
                     clocked_making: Optional[tuple] = None,
                     clocked_sampler: Optional[tuple] = None,
                     others_queued: Optional[np.ndarray] = None) -> Optional[np.ndarray]:
    """Per steady step (shape (steady steps,), int64 ns), where the fetch
    was clocked, its waits for a core: wait_split.fetch_parts' ``cpu_wait``
    (the loop thread's run-queue wait inside it), TRANSIT_QUEUED_PART
    (the awaited worker's threads' while its made batch was in transit)
    and OTHERS_QUEUED_PART (the main process's other threads'), the same
    numbers the split sums; else 0.  An unread CPU time or making
    reads 0 here (the run-queue wait is still the fetch's).  None when no
    clocked steady fetch waited for a core."""
    if clocks is None:
        return None
    pos, cpu, runq = clocks[:3]
    read = runq > 0
    if clocked_making is not None:
        read |= clocked_making[2] > 0
    if others_queued is not None:
        read |= others_queued > 0
    ok = _clocked_in(pos, w.steady, read)
    if not ok.any():
        return None
    at_steady = pos[ok] if w.all else np.cumsum(w.steady)[pos[ok]] - 1
    making = (None if clocked_making is None else
              (np.maximum(clocked_making[0][ok], 0), clocked_making[1][ok],
               clocked_making[2][ok]))
    _, parts = wait_split.fetch_parts(
        w.wait[at_steady], np.maximum(cpu[ok], 0), runq[ok],
        *(making[:2] if making else (None, None)),
        others_cpu_ns=clocks[5][ok] if len(clocks) > 5 else None,
        sampler=(None if clocked_sampler is None
                 else (clocked_sampler[0][ok], clocked_sampler[1][ok])),
        transit_queued_ns=making[2] if making else None,
        others_queued_ns=None if others_queued is None else others_queued[ok])
    queued = np.zeros(len(w.wait), dtype=np.int64)
    queued[at_steady] = (parts["cpu_wait"] + parts.get(wait_split.TRANSIT_QUEUED_PART, 0)
                         + parts.get(wait_split.OTHERS_QUEUED_PART, 0))
    return queued


def _host_waits(real_wait: np.ndarray, queued: Optional[np.ndarray],
                threshold_s: float, w: _Steady) -> Optional[dict]:
    """{count, queued_s (their mean wait for a core), steps (their indices
    among all the source's steps)} of the steady fetches that waited past
    the stall line only through the loop thread's wait for a core inside
    them (not stalls: the host's); None without clocks or without such
    fetches."""
    if queued is None:
        return None
    line = threshold_s / NS
    host = (real_wait > line) & (real_wait - queued <= line)
    count = int(np.count_nonzero(host))
    if not count:
        return None
    return {"count": count, "queued_s": float(queued[host].mean()) * NS,
            "steps": np.flatnonzero(w.full(host)).tolist()}


def _body_split(steps: np.ndarray, mask: np.ndarray, clocks: Optional[tuple]
                ) -> Optional[dict]:
    """wait_split.body_split over the clocked steps in ``mask`` whose
    body was clocked; None without any."""
    if clocks is None:
        return None
    pos, _, _, cpu, runq = clocks[:5]
    ok = _clocked_in(pos, mask, cpu >= 0)
    if not ok.any():
        return None
    at = pos[ok]
    return wait_split.body_split(steps["end_ns"][at] - steps["fetch_done_ns"][at], cpu[ok],
                                 runq[ok])


def _input_share(w: _Steady) -> tuple[Optional[float], int]:
    """(the steady steps' total input wait over their total step time,
    None without step time; the total step time, ns)."""
    total_step = int(w.step.sum())
    return (float(w.wait.sum()) / total_step if total_step > 0 else None), total_step


def _durations(w: _Steady, production: Optional[dict] = None,
               unmarked: Optional[tuple] = None,
               production_fraction: Optional[float] = None,
               other_largest_fraction: Optional[float] = None,
               host_leads: bool = False, main_leads: bool = False, *,
               totals: tuple) -> dict:
    """Input wait, compute and step statistics of the steady-state steps,
    the input share and the diagnosis (with the workers' own timing when
    it covers the steady steps, the clocked split of the wait, as
    fractions of it (wait_parts.production_fraction and
    other_largest_fraction) and whether its largest part is the host's
    (wait_parts.host_leads), and the probe steps without a fetch mark:
    input_bound.diagnose).  ``totals``: :func:`_input_share` of ``w``,
    which the caller's host test reads too."""
    share, total_step = totals
    mean_step_ns = total_step / len(w.step) if len(w.step) else None
    produced = input_bound.production_share(production)
    if produced is not None and production_fraction is not None and share is not None:
        produced = share * production_fraction
    diagnosis = input_bound.diagnose(share, produced, unmarked, mean_step_ns,
                                     other_largest_fraction, host_leads, main_leads)
    # The stall rule's order statistics of the same waits and steps, from
    # the same selections (stall_threshold.KnownStats).
    wait_s, (p10, p95) = _stats_and(w.wait, (stall_threshold.ALL_SLOW_PERCENTILE,
                                             stall_threshold.STALL_PERCENTILE))
    compute_s, (compute_median,) = _stats_and(w.step - w.wait, (50.0,))
    step_s, (step_median,) = _stats_and(w.step, (50.0,))
    w.known = stall_threshold.KnownStats(p10, p95, step_median, compute_median)
    return {
        "input_wait_s": wait_s,
        "compute_s": compute_s,
        "step_s": step_s,
        "input_share": share,
        "diagnosis": diagnosis.label,
        **_worded("diagnosis_rule", input_bound.diagnosis_finding(*diagnosis)),
    }


def _diagnosis_support(w: _Steady, label: str, production: Optional[dict],
                       making_ns: Optional[np.ndarray], loader: Optional[dict],
                       production_fraction: Optional[float] = None,
                       other_largest_fraction: Optional[float] = None,
                       host_leads: bool = False,
                       main_leads: bool = False) -> Optional[dict]:
    """label_support.support of the diagnosis over the steady steps, with
    the workers' production per step where it decided the label (or its
    clocked fraction of the wait, held fixed)."""
    making = None
    decided = making_ns is not None and input_bound.production_share(production) is not None
    if decided and production_fraction is None:
        making = making_ns if w.all else making_ns[w.steady]
    if not decided:
        production_fraction = None
    nw = (loader or {}).get("num_workers") or 0
    mean_step = float(w.step.mean()) if len(w.step) else None
    return label_support.support(w.wait, w.step, label, making, max(1, int(nw)), mean_step,
                                 other_largest_fraction, production_fraction, host_leads,
                                 main_leads)


def _stalls(w: _Steady, epoch: np.ndarray, threshold_s: Optional[float],
            round_steps: int = 1, marked: Optional[np.ndarray] = None
            ) -> tuple[np.ndarray, np.ndarray, dict]:
    """(stall mask over all steps, gaps between stalls, the shape,
    concentration, trend and stalls sections) under
    stall_threshold.stall_threshold_ns.  ``marked``: the steady probe
    steps whose fetch was marked (None: all): the trend reads only their
    waits, since a step without fetch_done() has no measured wait (5
    unmarked steps at a run's end read "wait STEP 8 ms -> 2 ms", helper
    36B)."""
    trends, not_yet = [], []

    def trending(rule) -> bool:
        wait, ep = w.wait, epoch if w.all else epoch[w.steady]
        if marked is not None:
            wait, ep = wait[marked], ep[marked]
        if trends:
            found = wait_trend.trend(wait, ep, rule.floor_ns, round_steps)
        else:
            found, first_not_yet = wait_trend.read(wait, ep, rule.floor_ns, round_steps)
            not_yet.append(first_not_yet)
        if found is not None and marked is not None and found.get("changed_at_step") is not None:
            # Back to the index among all steady steps.
            found["changed_at_step"] = int(np.flatnonzero(marked)[found["changed_at_step"]])
        trends.append(found)
        return trends[0] is not None

    found = stall_shape.classify(w.wait, w.step, threshold_s, trending, known=w.known)
    trend = trends[0]
    shape_support = (label_support.shape_support(
        w.wait, w.step, found.shape[0], threshold_s, round_steps,
        position=found.rule.code == stall_threshold.RULE_POSITION)
                     if found.shape else None)
    w.step = None    # not needed past the stall rule: 8 B a step
    rule, matter, mask_s, outliers_s = found.rule, found.matter, found.stalls, found.outliers
    mask, outliers = w.full(mask_s), w.full(outliers_s)
    gaps = _core.stall_gaps(mask, epoch)
    values, counts = _core.gap_histogram(gaps)
    stall_count = int(np.count_nonzero(mask_s))
    calm_median, stall_median = found.calm_median_ns, found.stall_median_ns
    shape = found.shape
    outlier_count = int(np.count_nonzero(outliers_s))
    return mask, gaps, {
        "shape": shape[0] if shape else None,
        **_worded("shape_rule", stall_shape.shape_finding(shape[1]) if shape else None),
        "shape_support": shape_support,
        "concentration": stall_shape.concentration(w.wait, mask_s),
        "trend": trend,
        "trend_not_yet": not_yet[0] if not_yet else None,
        "stalls": {
            "threshold_s": rule.threshold_ns * NS,
            **_worded("rule", stall_threshold.stall_finding(rule)),
            "rule_code": rule.code,
            "all_slow": rule.all_slow,
            "count": stall_count,
            "steps": np.flatnonzero(mask).tolist(),
            "outliers": outlier_count,
            "outlier_steps": np.flatnonzero(outliers).tolist(),
            "outlier_max_s": float(w.wait[outliers_s].max()) * NS if outlier_count else None,
            "matter": matter.code,
            "cost_share": matter.cost_share,
            "floor_s": rule.floor_ns * NS,
            "slow_count": int(np.count_nonzero(w.wait > rule.floor_ns)),
            "calm_median_s": calm_median * NS if calm_median is not None else None,
            "stall_median_s": stall_median * NS if stall_median is not None else None,
            "every_fetch_slow": rule.every_fetch_slow,
            "gaps": gaps.tolist(),
            "median_gap": _core.percentiles(gaps, 50.0) if len(gaps) else None,
            "modal_gap": _core.modal_gap(gaps),
            "gap_histogram": np.stack([values, counts], axis=1).tolist(),
        },
    }


def _positions(steps: np.ndarray, w: _Steady, mask: np.ndarray, stalls: dict,
               runs: Optional[tuple] = None) -> Optional[stall_timing.Positions]:
    """Each step's place for the residue tests (stall_timing.Positions):
    the phase counted from each epoch's start, the steady fetches whose
    position is known, and the loader waits (``w.wait``) of the first
    steps; None without stalls that matter."""
    if not stalls["count"]:
        return None
    position = _epoch_position(steps, runs)
    # The rank tests read at most RANK_MAX_FETCHES tested fetches: the
    # waits of twice as many first steps, not a copy of every step's.
    m = min(len(steps), 2 * stall_timing.RANK_MAX_FETCHES)
    if w.all:
        wait = w.wait[:m]
    else:
        wait = np.zeros(m, dtype=np.int64)
        head = w.steady[:m]
        wait[head] = w.wait[:int(np.count_nonzero(head))]
    return stall_timing.Positions(mask, position, w.steady & (position >= 0), wait)


def _predicted_cadence(positions: Optional[stall_timing.Positions],
                       num_workers: Optional[int]) -> Optional[dict]:
    """The pre-stated cadence test (stall_timing.predicted_cadence) for
    the loader's own period max(1, num_workers); None without a loader,
    with one loader in flight or without ``positions`` (no stalls that
    matter)."""
    period = stall_timing.effective_workers(num_workers)
    if period is None or period < 2 or positions is None:
        return None
    return stall_timing.predicted_cadence(positions.stalled, positions.position, period,
                                          positions.tested, positions.wait_ns)


def _epoch_position(steps: np.ndarray, runs: Optional[tuple] = None) -> np.ndarray:
    """Each step's 0-based position in its epoch (int64, shape (steps,)),
    -1 where unknown.  The wrap iterator records it up to FLAG_POS_MAX; past
    that, it is counted on from the first recorded step of the epoch's run
    (a reset() mid-epoch leaves that first step's own position).  ``runs``
    (evidence.epoch_runs of the steps' epochs) gives the runs' starts where
    each epoch is one run."""
    starts = runs[1] if runs is not None else None
    if starts is None:
        epoch = steps["epoch"]
        starts = np.flatnonzero(np.r_[True, epoch[1:] != epoch[:-1]])
    if len(steps) == 0:
        return np.zeros(0, dtype=np.int64)
    first = (steps["flags"][starts] >> _core.FLAG_POS_SHIFT).astype(np.int64)
    known = first < _core.FLAG_POS_MAX
    # Within each run: the first step's position plus the distance from it.
    position = np.arange(len(steps), dtype=np.int64)
    shift = np.where(known, first - starts, -1 - len(steps))
    if len(starts) <= _STEADY_RUNS_MAX:
        # Run by run, in place: no full-length array of shifts.
        for lo, hi, by in zip(starts.tolist(), np.r_[starts[1:], len(steps)].tolist(),
                              shift.tolist()):
            position[lo:hi] += by
    else:
        position += np.repeat(shift, np.diff(np.r_[starts, len(steps)]))
    return np.maximum(position, -1, out=position)


def _temporal(mask: np.ndarray, gaps: np.ndarray, epoch: np.ndarray,
              steady_wait: np.ndarray, num_workers: Optional[int],
              every_fetch: bool, predicted: Optional[dict] = None,
              stall_wait: Optional[np.ndarray] = None,
              positions: Optional[stall_timing.Positions] = None) -> dict:
    """The temporal structure of the stalls and their cadence;
    ``stall_wait``: each stall's wait (ns, in step order); ``positions``:
    for the residue tests."""
    temporal = stall_timing.temporal_of(mask, epoch, steady_wait, len(steady_wait), every_fetch,
                                        predicted, stall_wait, positions, gaps)
    period = temporal["period"] if temporal else None
    if temporal and temporal["counted"] == "bursts":
        # The cadence of a period counted per burst is that of the bursts.
        gaps = _core.stall_gaps(stall_timing.burst_anchors(mask, epoch, stall_wait), epoch)
    return {"temporal": temporal, "cadence": stall_timing.cadence(gaps, period, num_workers)}


def _stuck_after_s(sampler_info: Optional[dict]) -> float:
    """The stuck watch's line (s): the sampler's setting, or for hand-made
    inputs, which carry no sampler settings, the default's value (a
    constant of the C core, not the live process's setting)."""
    if sampler_info is not None and sampler_info.get("stuck_after_s") is not None:
        return sampler_info["stuck_after_s"]
    return _core.DEFAULT_STUCK_AFTER_S


def _headline(w: _Steady, epoch: np.ndarray, epochs: np.ndarray, s: dict,
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
        raised is not None and raised["ended"])
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
    batches (see _production), if known; ``runs``: evidence.epoch_runs of
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


def _other_threads_cpu_share(records: np.ndarray, which: np.ndarray,
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


def _gc_cpu_share(records: np.ndarray, which: np.ndarray,
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


def _cpu_apart(slow_cpu_ns: np.ndarray, fast_cpu_ns: np.ndarray,
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


def _main_cpu_ratio(clocks: Optional[tuple], wait: np.ndarray, slow: np.ndarray,
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
        out.update(_cpu_apart(cpu[on_slow], cpu[on_fast], wait[pos[on_slow]]))
    if len(clocks) > 5 and np.count_nonzero(on_slow) >= 2:
        others = np.maximum(clocks[5][on_slow], 0).astype(np.float64)
        total = float(cpu[on_slow].sum() + others.sum())
        if total > 0:
            out["slow_other_threads_cpu_share"] = float(others.sum()) / total
    return out


def _slow_code(given: Optional["stacks.StackInput"], met: Optional[tuple], steps: np.ndarray,
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
    ``slow_extra_cpu_share`` (:func:`_main_cpu_ratio`) and
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
                block.update(_cpu_apart(cpu[slow_rec], cpu[fast_rec], make[slow_rec]))
            # Of the slow batches' make time, the part their worker waited
            # for a CPU (its thread's schedstat run-queue delay).
            block["slow_runq_share"] = (
                float(runq[slow_rec].sum() / make[slow_rec].sum())
                if slow_rec.any() and (runq[slow_rec] >= 0).all() and make[slow_rec].sum() > 0
                else None)
            block["slow_other_threads_cpu_share"] = _other_threads_cpu_share(
                records, slow_rec, per_batch)
            block["slow_gc_cpu_share"] = _gc_cpu_share(records, slow_rec, per_batch)
            if stalled.any():
                during = stacks.overlapping(records, steps["begin_ns"][stalled],
                                            steps["fetch_done_ns"][stalled])
                block["slow_batches_in_making"] = int(len(during))

    def weigh(g: int, k: int) -> float:
        return float(weight[(group == g) & (kind == k)].sum())

    block["samples"] = {"slow": weigh(1, stacks.KIND_STACK), "fast": weigh(0, stacks.KIND_STACK),
                        "slow_other_thread": weigh(1, stacks.KIND_OTHER),
                        "fast_other_thread": weigh(0, stacks.KIND_OTHER),
                        "outside_batches": float(weight[(group < 0) & (kind != stacks.KIND_OFF)].sum()),
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
        block.update(_main_cpu_ratio(clocks, wait, stalled, steady & ~stalled))
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


def _sizes_at_no_workers(steps: np.ndarray, items: Optional[np.ndarray]) -> Optional[np.ndarray]:
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


def _attribution_and_bytes(s: dict, mask: np.ndarray, steady: np.ndarray,
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
    index into them (see _production; None: not measured), whose make
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
    (:func:`_sizes_at_no_workers`).  The wait for a core is the host's, not
    the batch's: beside a CPU hog a 16-sample fetch is preempted where a
    2-sample one is not, and its raw wait read 2.6x the others' a sample
    (SLOW-SAMPLE in 4 of 5 runs, helper 38C)."""
    out: dict = {"attribution": None, "batch_bytes": bytes_seen, "batch_cost": None}
    workers_busy, main_busy = _busy_in_stalls(s)
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
                making_ranks = _making_ranks(steps, mask, known(ranks), *met)
        elif (nw == 0 and steps is not None
              and np.count_nonzero(mask) >= attribution.ATTR_MIN_STALLS):
            sizes = _sizes_at_no_workers(steps, sampler_items)
            if sizes is not None:
                own = steady_wait_ns
                if own is None or len(own) != np.count_nonzero(steady):
                    own = (steps["fetch_done_ns"] - steps["begin_ns"]).astype(np.int64)[steady]
                by_size = (known(ranks[steady]), own, sizes[steady])
        out["attribution"] = attribution.attribution(
            known(ranks[mask]), known(workers[mask]), known(workers[steady]), nw,
            tmp.get("period") if tmp.get("label") == stall_timing.PERIODIC else None, ticks,
            (s.get("production") or {}).get("workers"), period_of_made,
            _making_in_stalls(s, workers_busy), making_ranks, made_alike,
            samples.get("by_worker"),
            # A shuffled loader sends each index to any worker: its slow
            # samples cannot be pinned to one by the order.
            samples.get("slow") if samples.get("kind") == "map"
            and not (s.get("loader") or {}).get("shuffle") else None, by_size)
        if (out["attribution"] is not None and per_batch is not None and met is not None
                and steps is not None):
            out["attribution"] = attribution.with_collate_share(
                out["attribution"], _collate_share(steps, mask, per_batch, *met))
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


def _collate_sampled(slow_code: Optional[dict], src) -> Optional[float]:
    """At num_workers=0: the share of the stalled fetches' stack samples
    taken under the loader's collate_fn (the latest epoch's
    ``collate_code``, matched by file and first line), or None where the
    stacks or the collate_fn's code are unknown."""
    code = _latest_fact(src, "collate_code")
    if not code or not slow_code or not slow_code.get("functions"):
        return None
    slow = (slow_code.get("samples") or {}).get("slow") or 0.0
    if slow <= 0:
        return None
    hit = [f for f in slow_code["functions"]
           if f["file"] == code["file"] and f["first_line"] == code["line"]]
    return min(1.0, hit[0]["slow"] / slow) if hit else 0.0


def _collate_share(steps: np.ndarray, mask: np.ndarray, per_batch: dict,
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


def _making_ranks(steps: np.ndarray, mask: np.ndarray, ranks: np.ndarray,
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


def _busy_in_stalls(s: dict) -> tuple[Optional[bool], Optional[bool]]:
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


def _making_in_stalls(s: dict, workers_busy: Optional[bool]) -> Optional[bool]:
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
        "host_wait_s": duration_stats_s(host_wait[read]),
        "gpu_wait_s": duration_stats_s(wait_g[read]),
        "gpu_step_s": duration_stats_s(step_g[steady & (step_g >= 0)]),
        "host_share": host_share,
        "gpu_share": gpu_share,
        "host_diagnosis": host.label,
        "rule": code,
    }
    rule = gpu_wait.gpu_finding(code, block)
    block.update(_worded("rule_text", rule))
    if diagnosis.label != host.label:
        summary["diagnosis"] = diagnosis.label
        summary.update(_worded("diagnosis_rule", rule))
    return block
