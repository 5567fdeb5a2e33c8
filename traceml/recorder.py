"""traceml.Recorder: one recording, owned by one object.

A Recorder owns its step store (in C), its probes' open step, its sources
(the wrapped iterables and their per-epoch facts) and, while its loops run,
their watch entries in the process-wide /proc sampler.  Two recorders never
see each other's steps, names or stuck fetches.  The module-level
``traceml.wrap``, probes, ``report`` and ``reset`` use the default recorder.

This module gathers a recording's inputs and hands them to
:func:`traceml.build.build`; it holds no rule and no sentence.
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Iterable, Optional, Union

import numpy as np

from . import _core, stacks, worker_timing
from .build import Report, _check_threshold, build
from .gpu import DEFAULT_RING
from .wrapping import SourceRegistry, Wrapped, wrap_into


class Recorder(_core.Recorder):
    """A recording of its own: a step store, the probes, the wrapped sources.

    ::

        rec = traceml.Recorder()
        for batch in rec.wrap(loader):
            train_step(batch)
        print(rec.report())

    ``with traceml.Recorder() as rec:`` also makes ``rec`` the default
    recorder inside the block, so that ``traceml.wrap``, the module-level
    probes, ``traceml.report`` and ``traceml.reset`` use it; the previous
    default is restored on leaving.  The default is process-wide (like the
    probes, use it from one thread).

    Methods ``step_begin()``, ``fetch_done()``, ``step_end()`` are the
    probes of this recorder (see :func:`traceml.step_begin`);
    ``clock_ns()`` its clock; ``snapshot()`` (a copy),
    ``snapshot_view()`` (a read-only view, no copy),
    ``snapshot_delivery()`` and ``store_info()`` its raw record.

    Attributes:
        sources: its :class:`traceml.wrapping.SourceRegistry` (``by_id``,
            ``by_name``).
        id: unique in the process; the sampler's stuck events carry it.
    """

    def __init__(self) -> None:
        # Weakly: a cycle through the registry would leave this recorder to
        # the cyclic collector, which at shutdown may free the module first.
        method = weakref.WeakMethod(self._recorded_sources)
        self.sources = SourceRegistry(recorded=lambda: (method() or set)())
        self._outer: list = []
        # source id -> traceml.gpu.GpuTimeline, for the sources timed on CUDA.
        self._gpu: dict = {}

    def _recorded_sources(self) -> set:
        """Ids of the sources with steps in the store or a stuck fetch in
        the sampler: their ids must not be recycled."""
        ids = set(np.unique(self.snapshot_view()["source"]).tolist())
        return ids | {ev["source"] for ev in _core.sampler_stuck() if ev["recorder"] == self.id}

    def wrap(self, iterable: Iterable, *, name: Optional[str] = None, live: Any = None,
             tensorboard: Any = None, tensorboard_every: int = 100, cuda: Any = False,
             cuda_ring: int = DEFAULT_RING) -> Wrapped:
        """:func:`traceml.wrap` into this recorder (same arguments, same
        errors)."""
        return wrap_into(self, iterable, name, live, tensorboard, tensorboard_every, cuda,
                         cuda_ring)

    def reset(self) -> None:
        """Start a new recording in this recorder: discard every recorded
        step, the drop and misuse counts and this recorder's stuck fetches
        (per-epoch facts of wrapped loaders are kept for the latest epoch
        only).  A step open now (its fetch in progress included) is not
        recorded; a wrapped loop goes on
        recording from its next step, so calling it inside the loop skips a
        warm-up.  Sources of gone objects are released (see
        :func:`traceml.wrap`).  Other recorders are untouched.  Safe to call
        from a signal handler: one that lands inside this recorder's reset
        or wrap bookkeeping clears the store at once and leaves the
        sources' pruning to the end of that call."""
        self._note_reset_in_worker_timing()
        self._reset_store()
        for timeline in list(self._gpu.values()):
            timeline.reset()
        self.sources.prune_after_reset()

    def _note_reset_in_worker_timing(self) -> None:
        """Before the store is emptied: tell each source whose workers time
        their batches how many of each worker's batches the reset discards,
        and drop the batches of epochs that ended, so that steps recorded
        after the reset still meet their batches (worker_timing.match)."""
        for src in list(self.sources.by_id.values()):
            # The sampler's calls of ended epochs meet no fetch again.
            if src.sampler.log is not None and src.epochs:
                src.sampler.drain()
                calls = src.sampler.items()
                src.sampler.item_chunks = [calls[calls["epoch"] == src.epochs - 1]]
        timed = [s for s in list(self.sources.by_id.values()) if s.timing.log is not None]
        if not timed:
            return
        records = self.snapshot()
        delivery = self.snapshot_delivery()
        worker = (delivery[1][:len(records)] if delivery is not None
                  else np.full(len(records), -1, dtype=np.int32))
        for src in timed:
            mine = records["source"] == src.id
            worker_timing.note_reset(src.timing, records["epoch"][mine], worker[mine])
            batches = src.timing.drain()
            if src.epochs:
                latest = src.epochs - 1
                src.timing.chunks = [batches[batches["epoch"] == latest]]
                items = src.timing.items()
                src.timing.item_chunks = [items[items["epoch"] == latest]]
                src.timing.offsets = {k: v for k, v in src.timing.offsets.items()
                                      if k[0] == latest}

    def report(
        self,
        stall_threshold_s: Optional[float] = None,
        *,
        source: Union[None, str, int] = None,
        ranks: Optional[str] = None,
    ) -> Optional[Report]:
        """:func:`traceml.report` of this recorder (same arguments, same
        errors)."""
        if ranks is not None:
            return _ranks_report(self, stall_threshold_s, source, ranks)
        threshold = _check_threshold(stall_threshold_s)
        info = self.store_info()
        # A read-only view of the store, no copy: it keeps these records
        # whatever the loop does meanwhile (see snapshot_view).
        records = self.snapshot_view()
        if info["out_of_memory"] and len(records) == 0:
            raise MemoryError(
                "traceml could not allocate its step store: "
                f"{info['dropped_steps']} steps were dropped and none recorded"
            )
        # Read after the records: a loop in another thread may have added
        # steps since (keep the first len(records)), or reset (drop it).
        delivery = self.snapshot_delivery()
        batch_bytes = batch_tensors = None
        if delivery is not None:
            n = len(records)
            if len(delivery[0]) >= n:
                rank, worker, batch_bytes, batch_tensors = (a[:n] for a in delivery)
                delivery = (rank, worker)
            else:
                delivery = None
        clocks = self.snapshot_fetch_clocks()
        kept = clocks[0] < len(records)    # steps added since the records were read
        clocks = tuple(a[kept] for a in clocks)
        stuck = [ev for ev in _core.sampler_stuck() if ev["recorder"] == self.id]
        # A copy: a reset() in a signal handler may release sources meanwhile.
        sources = dict(self.sources.by_id)
        sid = self._pick_source(records, source, stuck, sources)
        src = sources.get(sid)
        timing = src.timing if src is not None else None
        worker_batches = (timing.drain(), dict(timing.offsets)) if timing is not None else None
        worker_items = (timing.items(), timing.items_lost()) if timing is not None else None
        sampler_items = None
        if src is not None and src.sampler.log is not None:
            src.sampler.drain()
            sampler_items = src.sampler.items()
        timeline = self._gpu.get(sid)
        return build(records, info, sid, threshold, sources=sources,
                     delivery=delivery, samples=_core.sampler_samples(),
                     sampler_info=_core.sampler_info(), stuck_events=stuck,
                     main_pid=os.getpid(), batch_bytes=batch_bytes,
                     batch_tensors=batch_tensors,
                     worker_batches=worker_batches, worker_items=worker_items,
                     stack_input=stacks.input_for(src), fetch_clocks=clocks,
                     sampler_items=sampler_items,
                     gpu=timeline.readings() if timeline is not None else None)

    def _pick_source(self, records: np.ndarray, source: Any, stuck: list,
                     known: dict) -> int:
        column = records["source"]
        if len(column) and (column == column[0]).all():
            ids, counts = column[:1].copy(), np.array([len(column)])  # one source
        else:
            ids, counts = np.unique(column, return_counts=True)
        if source is not None and (isinstance(source, bool)
                                   or not isinstance(source, (str, int))):
            raise TypeError("report(): source must be a source name (str) or id (int), "
                            f"got {type(source).__name__}")
        if source is None:
            if len(ids) == 0:
                # Nothing recorded: a loader stuck on its very first fetch is
                # what there is to show, if the stuck watch has seen one ...
                stuck = [ev for ev in stuck if ev["source"] in known]
                if stuck:
                    return int(max(stuck, key=lambda ev: ev["since_ns"])["source"])
                # ... or a loop whose first fetch raised: the exception is.
                raised = [i for i, src in known.items()
                          if any(f.get("raised") for f in (src.epoch_facts or {}).values())]
                return max(raised) if raised else 0
            if (len(ids) > 1 and 0 not in ids
                    and int(np.count_nonzero(column[1:] != column[:-1])) == len(ids) - 1):
                # Wrapped sources that ran one after another (each one
                # block of steps; the hand-placed probes are no loop of
                # their own): the latest run, what a notebook's second
                # loop and report() mean.  A regressed loader's 16 steps, then
                # the fixed one's 16, reported the regressed one again
                # and compare read them EQUIVALENT (helper 29D, 6 of 6).
                return int(column[-1])
            # Interleaved (a training and a validation loader): the one with
            # the most steps; the earliest wrapped on ties.
            return int(ids[np.argmax(counts)])
        named = self.sources.by_name.get(source) if isinstance(source, str) else None
        if named is not None:
            return named.id
        if isinstance(source, int) and source in known:
            return source
        recorded = [known[int(i)].name for i in ids if int(i) in known and i != 0]
        names = ", ".join(repr(n) for n in recorded) or "none"
        raise ValueError(f"report(): unknown source {source!r}; sources with steps: {names} "
                         "(and 'probes', the hand-placed probes)")

    def __enter__(self) -> "Recorder":
        self._outer.append(_core._set_default_recorder(self))
        return self

    def __exit__(self, *exc: Any) -> None:
        """Gives the default back to the recorder that held it at the
        matching ``with``.  Raises RuntimeError where this recorder is not
        the default (recorders left in another order than entered, or
        ``__exit__`` without ``__enter__``), leaving the default as it is:
        restoring then would hand steps to the wrong recorder."""
        if not self._outer:
            raise RuntimeError(f"{self!r}.__exit__() without a matching __enter__()")
        if _core.default_recorder() is not self:
            raise RuntimeError(
                f"{self!r} left while another recorder is the default: leave recorders "
                "in the reverse order of entering them (nested with blocks do)")
        _core._set_default_recorder(self._outer.pop())

    def __repr__(self) -> str:
        steps = self.store_info()["steps"]
        return f"<traceml.Recorder id={self.id} steps={steps}>"


def report(
    stall_threshold_s: Optional[float] = None,
    *,
    source: Union[None, str, int] = None,
    ranks: Optional[str] = None,
) -> Optional[Report]:
    """Reduce what the default recorder has recorded so far into a
    :class:`Report` (:meth:`Recorder.report` for another recorder).

    Args:
        stall_threshold_s: a fetch whose input wait exceeds this many
            seconds is a stall (``5`` reproduces the common "> 5 s stall"
            convention).  None (default): the automatic rule of
            :func:`traceml.findings.stall_threshold.stall_threshold_ns`.
        source: which wrapped iterable to report, by name or id; None picks
            the latest where wrapped sources ran one after another (a loop over
            one loader, then a loop over another), else the one with the
            most steps (the probes are ``"probes"``).
        ranks: None (default): this process's report.  ``"all"``: every
            rank of the torch.distributed default group gathers its steps
            to rank 0 (:func:`traceml.gather` with its defaults; call it on
            every rank): rank 0 gets the job's report (straggler, cadence,
            all-reduce echo under ``to_dict()["ranks"]``), the other ranks
            None; without a process group, this process's report.

    Statistics (input_wait_s, compute_s, step_s, input_share, stalls,
    cadence) cover steady-state steps.  The first max(1, num_workers)
    steps of each epoch of a DataLoader (the first step for other
    iterables) hold start-up, each worker's first batch carrying its process
    start, and are reported on their own under ``epoch_start``.

    Returns:
        A Report; with nothing recorded, one whose diagnosis is NO-DATA and
        whose text says so.  When the recorder recorded one source only,
        ``Report.steps`` is a read-only view of the recorder's store (no
        copy; see ``Recorder.snapshot_view``), else a copy of that source's
        records.

    Raises:
        TypeError: stall_threshold_s is not a real number, or source is
            neither a str nor an int.
        ValueError: stall_threshold_s is negative, NaN, infinite or over 9e9 s;
            source names no known source; or ranks is neither None nor "all".
        MemoryError: the step store could not grow and nothing was recorded
            (or memory ran out while reducing).
    """
    return _core.default_recorder().report(stall_threshold_s, source=source, ranks=ranks)


def _ranks_report(rec: "Recorder", stall_threshold_s: Optional[float], source: Any,
                  ranks: Any) -> Optional[Report]:
    """report(ranks="all"): traceml.ranks.gather with its defaults."""
    if ranks != "all":
        raise ValueError(f"report(): ranks must be None or 'all', got {ranks!r}")
    from .ranks import gather

    return gather(stall_threshold_s, source=source, recorder=rec)


def reset() -> None:
    """Start a new recording in the default recorder: discard every
    recorded step, the drop count and the misuse counts (per-epoch facts of
    wrapped loaders are kept for the latest epoch only).  A step open at
    this moment (in a wrapped loop, its fetch in progress included, or
    between probes) is not recorded; a
    wrapped loop goes on recording from its next step, so ``reset()``
    inside the loop skips a warm-up.  Sources of gone objects are released
    (see :func:`traceml.wrap`).  Other recorders are untouched.  Safe to
    call from a signal handler (see :meth:`Recorder.reset`)."""
    _core.default_recorder().reset()
