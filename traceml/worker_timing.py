"""Per-batch production times, measured inside DataLoader workers.

The main process sees when a batch *arrives*; it cannot see when the batch
was *made*.  A fetch that waits 3 ms for a batch made 20 ms earlier is
hand-over (the worker's queue, unpickling, the shared-memory round trip),
not a worker falling behind; a fetch that waits 3 ms for a batch finished
3 ms later is production.  Only the worker can tell the two apart.

How: for each iter() of a wrapped DataLoader whose workers are forked,
:func:`before_iter` sets the loader's ``worker_init_fn`` to a
:class:`WorkerHook` (calling the user's own after it) for the duration of
``iter()``; in each worker the hook replaces ``_DatasetKind.create_fetcher``
(torch's private factory of the per-worker fetcher, called once at worker
start and again at each epoch of persistent workers) with one that times
every ``fetcher.fetch(index)``: its wall begin and end on the same
monotonic clock as the steps, and the worker process's CPU time (every
thread's: work a dataset hands to its own threads counts).  Records go
to a :class:`traceml._core.BatchLog`, a shared anonymous mapping the
forked workers inherit.  Nothing is pickled, nothing crosses the data
queue, the batch is untouched, and the main process pays nothing per step.

Torch internals relied on (as in torch 2.13; each is checked before use
and the timing reported unavailable without it): ``DataLoader.
worker_init_fn`` read when ``iter()`` starts the workers;
``torch.utils.data._DatasetKind.create_fetcher`` called in the worker after
``worker_init_fn``; each worker making its batches in the order its tasks
were sent (so its k-th batch of an epoch is the k-th batch the main process
receives from it; ``in_order=False`` changes only the order across
workers).  Workers started with ``spawn`` or ``forkserver`` do not inherit
the log: the report says so and falls back to the sampler's per-worker CPU.
"""

from __future__ import annotations

import gc
import multiprocessing
import weakref
from typing import Any, Optional

import numpy as np

from . import _core, stacks, torch_private

# Why worker timing is off for an epoch (the report's "unavailable").
NOT_A_LOADER = "not a multiprocessing DataLoader"
NOT_FORK = "its workers are not forked (start method {method!r})"
STARTED_BEFORE = "its persistent workers were started before traceml wrapped the loader"
NO_HOOK = "this torch has no _DatasetKind.create_fetcher to time the workers' fetches"
# The item records a source keeps in memory (48 bytes each: 48 MiB); past
# it, the oldest go (the report says how many).
ITEMS_KEPT = 1 << 20


class WorkerHook:
    """The ``worker_init_fn`` of a wrapped DataLoader's workers: installs
    the fetch timing in the worker, then calls the loader's own
    ``worker_init_fn`` (if any) with the same worker id."""

    def __init__(self, log: "_core.BatchLog", user_fn: Any, epoch: int,
                 stack_log: Any = None):
        self.log = log
        self.user_fn = user_fn
        self.epoch = epoch
        self.stack_log = stack_log

    def __call__(self, worker_id: int) -> None:
        _time_fetches(self.log, worker_id, self.epoch)
        _time_gc(self.log, worker_id)
        if self.user_fn is not None:
            # Timed (an ITEM_INIT record: wall and this thread's CPU): the
            # loader's own worker_init_fn runs before the worker's first
            # batch, inside each epoch start that starts workers.
            _core.TimedCall(self.log, self.user_fn, self.epoch, worker_id,
                            _core.ITEM_INIT)(worker_id)
        # After the user's own: a SIGPROF handler or timer it set is left
        # alone (the log counts the refusal for the report).
        if self.stack_log is not None:
            stacks.start_in_worker(self.stack_log, worker_id)


def _time_gc(log: "_core.BatchLog", worker_id: int) -> None:
    """In a worker: time each garbage collection into ``log``'s items ring
    (an ITEM_GC record: its clocks and generation) through
    ``gc.callbacks``, so a sample that a collection ran inside is not read
    as slow for it (traceml.sample_timing.gc_inside).  Two C calls a
    collection; the callback never raises (its arguments are gc's own)."""
    begin, end = log.gc_begin, log.gc_end

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            begin()
        else:
            end(worker_id, info.get("generation", -1))

    gc.callbacks.append(on_gc)


def _time_fetches(log: "_core.BatchLog", worker_id: int, first_epoch: int) -> None:
    """In a worker: make every fetcher created from now on time its fetches
    into ``log``, tagged with its epoch and the batch's number in that
    epoch.  The first fetcher's epoch is the one the worker was started
    for (two live iterators of one loader start their workers at once, so
    the shared word may already name the other's); a persistent worker's
    later fetchers are made when it resumes, inside the main process's
    ``iter()``, after the main process announced the new epoch in the log."""
    first = [True]
    kind = torch_private.dataset_kind()
    if kind is None:
        return
    make = kind.create_fetcher

    def create_fetcher(*args: Any, **kwargs: Any) -> Any:
        fetcher = make(*args, **kwargs)
        epoch = first_epoch if first[0] else log.epoch
        first[0] = False
        # A C callable: it adds no frame to the traceback of an error in
        # the dataset, which the main process re-raises.
        fetcher.fetch = _core.TimedFetch(log, fetcher.fetch, epoch, worker_id)
        _time_items(fetcher, log, epoch, worker_id)
        return fetcher

    kind.create_fetcher = staticmethod(create_fetcher)


def _time_items(fetcher: Any, log: "_core.BatchLog", epoch: int, worker_id: int) -> None:
    """In a worker: time each item of the fetcher's batches into ``log``'s
    items ring (csrc/itemlog.c): a map-style fetcher's ``dataset`` becomes
    a :class:`traceml._core.TimedDataset` (its ``dataset[i]`` timed, every
    attribute the real dataset's, ``__getitems__`` timed as one call), an
    iterable fetcher's ``dataset_iter`` a ``TimedIter``, and
    ``collate_fn`` a ``TimedCall``.  All three are C: an error in the
    dataset reaches the main process with its traceback unchanged.  A
    fetcher without these attributes (another torch) is left as it is."""
    if hasattr(fetcher, "dataset_iter"):
        it = fetcher.dataset_iter
        if hasattr(type(it), "__next__") and not isinstance(it, _core.TimedIter):
            fetcher.dataset_iter = _core.TimedIter(log, it, epoch, worker_id)
    elif hasattr(fetcher, "dataset") and not isinstance(fetcher.dataset, _core.TimedDataset) \
            and hasattr(type(fetcher.dataset), "__getitem__"):
        fetcher.dataset = _core.TimedDataset(log, fetcher.dataset, epoch, worker_id)
    fn = getattr(fetcher, "collate_fn", None)
    if callable(fn) and not isinstance(fn, _core.TimedCall):
        fetcher.collate_fn = _core.TimedCall(log, fn, epoch, worker_id, _core.ITEM_COLLATE)


# The sampler's calls a source keeps in its log between drains (each
# epoch's start drains it): one a batch.
SAMPLER_ITEMS = 1 << 16
# The worker field of the sampler's records (their own log: nothing else
# shares it, and the field must be a worker id, >= 0).
SAMPLER_WORKER = 0


def time_sampler(inner: Any, timing: "Timing", epoch: int) -> bool:
    """Time each ``next()`` of the DataLoader iterator ``inner``'s sampler
    (its indices for one batch, drawn in this process inside the fetch at
    any num_workers) into ``timing``'s log, item records of kind
    ITEM_NEXT tagged ``epoch`` and SAMPLER_WORKER: the wall clock and the
    thread's CPU of each call made inside a fetch whose clocks wrap reads
    (csrc/itemlog.c's TimedIter, ``clocked_only``: the split reads only
    those fetches).  False where
    the iterator exposes no sampler iterator (torch_private.time_sampler)."""
    if timing.log is None:
        timing.log = _core.BatchLog(capacity=1, items=SAMPLER_ITEMS)
    timing.drain()
    log = timing.log

    def timed(it: Any) -> Any:
        # Already timed (the same iterator handed back): time it once.
        if isinstance(it, _core.TimedIter):
            return it
        t = _core.TimedIter(log, it, int(epoch), SAMPLER_WORKER)
        # Each record's count is its index list's length: the batch's
        # size, which num_workers=0 has no worker timing to give.
        t.count_lists = 1
        # Only the calls inside the fetches wrap clocks (the split reads no
        # other): two clock pairs a call cost about 0.5-2 us, past the
        # per-step budget of a cheap loader (benchmarks/bench_loader.py).
        t.clocked_only = 1
        return t
    return torch_private.time_sampler(inner, timed)


def sampler_in_waits(items: np.ndarray, begin_ns: np.ndarray,
                     end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(wall ns, CPU ns) of the sampler's calls ``items`` (ITEM_RECORD_DTYPE,
    the main process's) inside each window [begin_ns, end_ns) (shape (m),
    not overlapping, in any order: the fetches' waits): each call's
    overlap with the window, and its CPU in the same proportion (-1 CPU
    read as 0).  Both int64, shape (m,), in the windows' order."""
    windows = np.argsort(np.asarray(begin_ns, dtype=np.int64), kind="stable")
    begin = np.asarray(begin_ns, dtype=np.int64)[windows]
    end = np.asarray(end_ns, dtype=np.int64)[windows]
    wall = np.zeros(len(begin), dtype=np.int64)
    cpu = np.zeros(len(begin), dtype=np.int64)
    if not len(items) or not len(begin):
        return wall, cpu
    order = np.argsort(items["begin_ns"], kind="stable")
    a, b = items["begin_ns"][order], items["end_ns"][order]
    c = np.maximum(items["cpu_ns"][order], 0)
    # The windows each call can touch: those begun before it ended and
    # ending after it began (calls are short beside a fetch: one window).
    first = np.searchsorted(end, a, side="right")
    last = np.searchsorted(begin, b, side="left")
    for k in np.flatnonzero(last > first):
        for j in range(first[k], last[k]):
            lap = min(b[k], end[j]) - max(a[k], begin[j])
            if lap > 0:
                wall[j] += lap
                span = b[k] - a[k]
                cpu[j] += int(c[k] * lap // span) if span > 0 else 0
    out_wall, out_cpu = np.empty_like(wall), np.empty_like(cpu)
    out_wall[windows], out_cpu[windows] = wall, cpu
    return out_wall, out_cpu


def start_method_of(loader: Any) -> Optional[str]:
    """The multiprocessing start method a DataLoader's workers use (None:
    not known).  Never fixes the process's start method:
    ``multiprocessing.get_start_method()`` and ``get_context()`` without
    a method would, and a later ``set_start_method()`` of the user's would
    then raise "context has already been set"."""
    ctx = getattr(loader, "multiprocessing_context", None)
    if ctx is None:
        # "the first of which is the default" (multiprocessing's docs).
        return (multiprocessing.get_start_method(allow_none=True)
                or multiprocessing.get_all_start_methods()[0])
    if isinstance(ctx, str):
        return ctx
    get = getattr(ctx, "get_start_method", None)
    return get() if callable(get) else None


class Timing:
    """What a source knows of its workers' batches: the shared log, the
    records drained from it, and per (epoch, worker) how many delivered
    batches a reset discarded (so that the k-th step still meets the k-th
    batch)."""

    def __init__(self) -> None:
        self.log: Optional[_core.BatchLog] = None
        # Persistent workers started with the hook: a weak reference to
        # their iterator, which must not outlive its loader's shutdown.
        self.hooked_iterator: Any = None
        self.chunks: list = []
        self.offsets: dict = {}
        # The workers' sampled stacks (traceml.stacks).
        self.stacks = stacks.Stacks()
        # The workers' item records (ITEM_RECORD_DTYPE), the latest
        # ITEMS_KEPT of them, and how many older ones were let go.
        self.item_chunks: list = []
        self.items_dropped = 0

    def _drain_items(self) -> None:
        got = self.log.drain_items()
        if len(got):
            self.item_chunks.append(got)
        if len(self.item_chunks) > 1:
            every = np.concatenate(self.item_chunks)
            if len(every) > ITEMS_KEPT:
                self.items_dropped += len(every) - ITEMS_KEPT
                every = every[-ITEMS_KEPT:]
            self.item_chunks = [every]

    def items(self) -> np.ndarray:
        """The item records drained so far (ITEM_RECORD_DTYPE: each
        sample's, __getitems__'s and collate_fn's time in the workers), in
        claim order; call after :meth:`drain`."""
        if self.item_chunks:
            return self.item_chunks[0] if len(self.item_chunks) == 1 else np.concatenate(self.item_chunks)
        return np.zeros(0, _core.ITEM_RECORD_DTYPE)

    def items_lost(self) -> int:
        """Item records lost: overwritten in the shared ring before a
        drain, or let go past ITEMS_KEPT."""
        return self.items_dropped + (int(self.log.items_lost) if self.log is not None else 0)

    def drain(self) -> np.ndarray:
        """Every record drained so far (BATCH_RECORD_DTYPE); the items
        ring is drained too (see :meth:`items`)."""
        if self.log is not None:
            got = self.log.drain()
            if len(got):
                self.chunks.append(got)
            self._drain_items()
        if len(self.chunks) > 1:
            self.chunks = [np.concatenate(self.chunks)]
        return self.chunks[0] if self.chunks else np.zeros(0, _core.BATCH_RECORD_DTYPE)


def before_iter(loader: Any, timing: Timing, epoch: int) -> tuple[Optional[str], Any]:
    """Before ``iter(loader)`` of epoch ``epoch``: returns (why timing is
    off or None, the token :func:`after_iter` takes)."""
    workers = getattr(loader, "num_workers", 0) or 0
    if workers <= 0 or not hasattr(loader, "worker_init_fn"):
        return NOT_A_LOADER, None
    method = start_method_of(loader)
    if method != "fork":
        return NOT_FORK.format(method=method), None
    if torch_private.dataset_kind() is None:
        return NO_HOOK, None
    if timing.log is None:
        timing.log = _core.BatchLog()
    timing.drain()  # before the workers of this epoch can lap the log
    timing.stacks.drained()  # likewise the stack samples
    timing.log.epoch = epoch
    live = (torch_private.live_iterator(loader) if getattr(loader, "persistent_workers", False)
            else None)
    if live is not None:
        # Persistent workers resume: they time this epoch only if they
        # were started with the hook.
        hooked = timing.hooked_iterator() if timing.hooked_iterator is not None else None
        return (None if live is hooked else STARTED_BEFORE), None
    user_fn = loader.worker_init_fn
    loader.worker_init_fn = WorkerHook(
        timing.log, user_fn, epoch,
        timing.stacks.ensure_log() if stacks.enabled() else None)
    return None, user_fn


def after_iter(loader: Any, timing: Timing, why: Optional[str], user_fn: Any) -> None:
    """After ``iter(loader)`` (also when it raised): the loader gets its own
    ``worker_init_fn`` back (the workers have theirs already)."""
    if isinstance(getattr(loader, "worker_init_fn", None), WorkerHook):
        loader.worker_init_fn = user_fn
        it = torch_private.live_iterator(loader)
        if why is None and getattr(loader, "persistent_workers", False) and it is not None:
            try:
                timing.hooked_iterator = weakref.ref(it)
            except TypeError:
                timing.hooked_iterator = None


def note_reset(timing: Timing, epoch: np.ndarray, worker: np.ndarray) -> None:
    """Before a reset discards steps with these epochs and delivering
    workers (-1: unknown): count them, so that later steps of the same
    epochs still meet their batches."""
    known = worker >= 0
    if not known.any():
        return
    pairs, counts = np.unique(np.stack([epoch[known], worker[known]]), axis=1,
                              return_counts=True)
    for (e, w), c in zip(pairs.T.tolist(), counts.tolist()):
        timing.offsets[(e, w)] = timing.offsets.get((e, w), 0) + c


def _record_keys(records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the records' (epoch, worker, seq) keys as a (3, n) int64 array, the
    order that sorts the records by them)."""
    keys = np.stack([records["epoch"].astype(np.int64), records["worker"].astype(np.int64),
                     records["seq"]])
    return keys, np.lexsort(keys[::-1])


def match(records: np.ndarray, epoch: np.ndarray, worker: np.ndarray,
          offsets: dict) -> np.ndarray:
    """For each step (``epoch`` and delivering ``worker``, -1 unknown, in
    step order), the index into ``records`` of the batch it received, or
    -1: a step from worker w in epoch e meets the record (e, w, k) where k
    counts the earlier steps from w in e (plus those a reset discarded)."""
    n = len(epoch)
    out = np.full(n, -1, dtype=np.int64)
    if n == 0 or len(records) == 0:
        return out
    known = np.flatnonzero(worker >= 0)
    if len(known) == 0:
        return out
    e, w = epoch[known].astype(np.int64), worker[known].astype(np.int64)
    # k: the running count of each (epoch, worker) pair in step order.
    key = (e << 32) | w
    order = np.argsort(key, kind="stable")
    sk = key[order]
    starts = np.r_[0, np.flatnonzero(sk[1:] != sk[:-1]) + 1]
    run = np.arange(len(sk)) - np.repeat(starts, np.diff(np.r_[starts, len(sk)]))
    k = np.empty_like(run)
    k[order] = run
    if offsets:
        k += np.array([offsets.get((int(a), int(b)), 0) for a, b in zip(e, w)], dtype=np.int64)
    # Look each (epoch, worker, k) up among the records.
    rkey, rorder = _record_keys(records)
    sorted_keys = rkey[:, rorder]
    want = np.stack([e, w, k])
    # Encode the triples as one sortable int where they fit (epochs and
    # workers below 2**20, seq below 2**23), else fall back to a dict.
    if max(int(sorted_keys.max(initial=0)), int(want.max(initial=0))) < (1 << 20) \
            and int(sorted_keys[2].max(initial=0)) < (1 << 23) and int(k.max(initial=0)) < (1 << 23):
        enc = (sorted_keys[0] << 43) | (sorted_keys[1] << 23) | sorted_keys[2]
        q = (e << 43) | (w << 23) | k
        pos = np.searchsorted(enc, q)
        hit = (pos < len(enc)) & (enc[np.minimum(pos, len(enc) - 1)] == q)
        out[known[hit]] = rorder[pos[hit]]
        return out
    index = {t: i for i, t in zip(rorder.tolist(), map(tuple, sorted_keys.T.tolist()))}
    for j, t in enumerate(zip(e.tolist(), w.tolist(), k.tolist())):
        out[known[j]] = index.get(t, -1)
    return out


def busy_during(records: np.ndarray, epoch: np.ndarray, worker: np.ndarray,
                begin_ns: np.ndarray, end_ns: np.ndarray,
                rate: Optional[np.ndarray] = None) -> np.ndarray:
    """For each step, how many ns of [begin_ns, end_ns) its delivering
    worker (``worker``, -1 unknown) spent making batches of the same epoch
    (any of them: a worker that holds the GIL making its next batch also
    delays sending the last one, so its busy time counts as production).
    -1 where the worker is unknown or made no batch that epoch.  A worker
    makes one batch at a time, so its intervals do not overlap and their
    running sum is exact.  ``rate`` (shape (records,), in [0, 1]; None:
    1) weighs each record's interval: the ns counted are rate x overlap
    (:func:`queued_during`)."""
    out = np.full(len(epoch), -1, dtype=np.int64)
    if len(records) == 0 or len(epoch) == 0:
        return out
    rk = (records["epoch"].astype(np.int64) << 32) | records["worker"].astype(np.int64)
    ro = np.lexsort((records["begin_ns"], rk))
    rk, recs = rk[ro], records[ro]
    starts = recs["begin_ns"]
    ends = np.maximum(recs["end_ns"], starts)
    weight = np.ones(len(recs)) if rate is None else np.asarray(rate, dtype=np.float64)[ro]
    # Running busy time before each interval, restarting per (epoch, worker).
    dur = (ends - starts) * weight
    csum = np.cumsum(dur) - dur
    group_first = np.r_[0, np.flatnonzero(rk[1:] != rk[:-1]) + 1]
    group_of = np.repeat(np.arange(len(group_first)), np.diff(np.r_[group_first, len(rk)]))
    before = csum - csum[group_first][group_of]
    keys = rk[group_first]
    sk = (epoch.astype(np.int64) << 32) | worker.astype(np.int64)
    g = np.searchsorted(keys, sk)
    g = np.minimum(g, len(keys) - 1)
    has = (worker >= 0) & (keys[g] == sk)
    if not has.any():
        return out
    lo = group_first[g]
    hi = np.r_[group_first[1:], len(rk)][g]

    # Steps grouped by their worker's interval group, one slice per group.
    todo = np.flatnonzero(has)
    todo = todo[np.argsort(lo[todo], kind="stable")]
    cuts = np.r_[0, np.flatnonzero(np.diff(lo[todo])) + 1, len(todo)]

    def busy_until(t: np.ndarray) -> np.ndarray:
        got = np.zeros(len(t), dtype=np.int64)
        for c0, c1 in zip(cuts[:-1], cuts[1:]):
            sel = todo[c0:c1]
            a, b = lo[sel[0]], hi[sel[0]]
            # The last interval of the group starting at or before t.
            j = a + np.searchsorted(starts[a:b], t[sel], side="right") - 1
            jj = np.maximum(j, a)
            part = np.clip(t[sel] - starts[jj], 0, ends[jj] - starts[jj]) * weight[jj]
            got[sel] = np.where(j >= a, np.rint(before[jj] + part), 0)
        return got

    busy = busy_until(end_ns) - busy_until(begin_ns)
    out[has] = busy[has]
    return out


def queued_during(records: np.ndarray, epoch: np.ndarray, worker: np.ndarray,
                  begin_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """For each step, how many ns of [begin_ns, end_ns) its delivering
    worker spent waiting for a core while making batches (int64; -1 where
    :func:`busy_during` is -1): each batch's run-queue wait (its thread's
    schedstat, ``runq_ns``; unknown reads 0) spread evenly over its make
    time, so an overlap of x ns with a batch that waited r of its m ns
    counts x r / m.  The spread is the model: schedstat gives a batch's
    total, not when in the batch it waited."""
    make = (records["end_ns"] - records["begin_ns"]).astype(np.float64)
    runq = np.maximum(records["runq_ns"], 0).astype(np.float64)
    rate = np.divide(runq, make, out=np.zeros(len(records)), where=make > 0)
    return busy_during(records, epoch, worker, begin_ns, end_ns, np.clip(rate, 0.0, 1.0))


# A batch whose worker's CPU time (every thread's) is at least this share
# of its make time was made on a CPU: a worker running Python holds its
# GIL for all but the switch interval (sys.getswitchinterval, 5 ms).  Half:
# a batch made mostly asleep (a read, a sleep, a lock) lets its worker's
# other threads run.
ON_CPU_SHARE = 0.5


def others_on_cpu_during(records: np.ndarray, epoch: np.ndarray, worker: np.ndarray,
                         begin_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """For each interval [begin_ns, end_ns) (shape (m,), int64 ns), how many
    ns of it some worker other than ``worker`` (its epoch's, ``epoch``)
    spent making a batch on a CPU (a record whose ``cpu_ns`` is at least
    ON_CPU_SHARE of its make time): the union of those workers' intervals,
    so two at once count once.  -1 where ``worker`` is unknown (-1) or no
    other worker made a batch that epoch; 0 for an empty interval.

    Why: the workers share one result queue, sent under one write lock by
    each worker's feeder thread, which needs its own process's GIL to
    send; a worker's Python making a batch holds that GIL, so its feeder,
    holding the lock, keeps every other worker's made batch from being
    sent (measured here: a slow pure-Python sample every 13th index, 2
    workers, read 35-41 % of the wait in transit; with the workers'
    switch interval at 0.2 ms, 0 %).  The overlap is measured; that it
    delayed the batch is the model."""
    epoch = np.asarray(epoch, dtype=np.int64)
    worker = np.asarray(worker, dtype=np.int64)
    a = np.asarray(begin_ns, dtype=np.int64)
    b = np.maximum(np.asarray(end_ns, dtype=np.int64), a)
    out = np.full(len(epoch), -1, dtype=np.int64)
    if len(records) == 0 or len(epoch) == 0:
        return out
    make = records["end_ns"] - records["begin_ns"]
    on_cpu = (make > 0) & (records["cpu_ns"] >= ON_CPU_SHARE * make)
    for e, w in set(zip(epoch.tolist(), worker.tolist())):
        if w < 0:
            continue
        others = (records["epoch"] == e) & (records["worker"] != w)
        if not others.any():
            continue
        mine = others & on_cpu
        at = np.flatnonzero((epoch == e) & (worker == w))
        out[at] = _covered(records["begin_ns"][mine], records["end_ns"][mine], a[at], b[at])
    return out


def _covered(starts: np.ndarray, ends: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many ns of each [a, b) the union of the intervals [starts, ends)
    covers (int64, shape of ``a``)."""
    if len(starts) == 0:
        return np.zeros(len(a), dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], np.maximum(ends[order], starts[order])
    # Merge: a new run starts where an interval begins past every end before it.
    reach = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > reach[:-1]]
    run = np.cumsum(new) - 1
    rs = s[new]
    re = np.zeros(len(rs), dtype=np.int64)
    np.maximum.at(re, run, e)
    before = np.cumsum(re - rs) - (re - rs)

    def upto(t: np.ndarray) -> np.ndarray:
        j = np.searchsorted(rs, t, side="right") - 1
        jj = np.maximum(j, 0)
        got = before[jj] + np.clip(t - rs[jj], 0, re[jj] - rs[jj])
        return np.where(j >= 0, got, 0)

    return upto(b) - upto(a)


def _stats_s(x_ns: np.ndarray) -> Optional[dict]:
    """{median, p95, mean} in seconds, None when empty (the C reducers)."""
    if len(x_ns) == 0:
        return None
    p50, p95 = _core.percentiles(x_ns, [50.0, 95.0])
    return {"median": p50 * 1e-9, "p95": p95 * 1e-9, "mean": _core.summary(x_ns)["mean"] * 1e-9}


def made_ns(records: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Each step's batch make time in its worker (int64 ns, end - begin of
    the record it met; shape of ``idx``, the steps' :func:`match`), -1
    where it met none."""
    out = np.full(len(idx), -1, dtype=np.int64)
    hit = idx >= 0
    if hit.any():
        mine = records[idx[hit]]
        out[hit] = np.maximum(mine["end_ns"] - mine["begin_ns"], 0)
    return out


def own_made_ns(records: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """:func:`made_ns` less each batch's wait for a core (its record's
    ``runq_ns``, where measured): the batch's own cost, on CPU or blocked,
    which a busy host's run queue does not stretch; -1 where the step met
    no record."""
    out = made_ns(records, idx)
    hit = idx >= 0
    if hit.any():
        runq = records["runq_ns"][idx[hit]]
        out[hit] = np.where(runq >= 0, np.maximum(out[hit] - runq, 0), out[hit])
    return out


# How many batches past the one a step received its worker may be making
# during the wait: prefetch_factor batches in flight per worker (torch's
# default 2), and the one it is making.
MAKING_AHEAD = 3


def in_the_making(records: np.ndarray, idx: np.ndarray, begin_ns: np.ndarray,
                  fetch_done_ns: np.ndarray, which: np.ndarray) -> np.ndarray:
    """For the steps ``which`` (indices), the index into ``records`` of the
    batch the delivering worker spent most of the step's wait
    [begin_ns, fetch_done_ns) making: the received batch itself, or, when
    that one was made before the wait, one of the next MAKING_AHEAD of the
    same worker and epoch (a worker burning its next batch holds the GIL
    its queue's feeder thread needs to send the one made: the loop waits
    on the made batch for the next one's making); -1 where the step met no
    record or the worker made nothing during the wait.  ``idx`` is the
    steps' :func:`match`; the result has the shape of ``which``."""
    which = np.asarray(which, dtype=np.int64)
    out = np.full(len(which), -1, dtype=np.int64)
    j = idx[which]
    hit = j >= 0
    if not hit.any() or len(records) == 0:
        return out
    order = _record_keys(records)[1]
    pos_of = np.empty(len(records), dtype=np.int64)
    pos_of[order] = np.arange(len(records))
    a = begin_ns[which[hit]].astype(np.int64)
    b = fetch_done_ns[which[hit]].astype(np.int64)
    p = pos_of[j[hit]]
    best = np.full(len(p), -1, dtype=np.int64)
    best_overlap = np.zeros(len(p), dtype=np.int64)
    first = records[j[hit]]
    for ahead in range(MAKING_AHEAD + 1):
        q = p + ahead
        ok = q < len(order)
        cand = np.where(ok, order[np.minimum(q, len(order) - 1)], -1)
        r = records[np.maximum(cand, 0)]
        same = ok & (r["epoch"] == first["epoch"]) & (r["worker"] == first["worker"])
        overlap = np.minimum(r["end_ns"], b) - np.maximum(r["begin_ns"], a)
        better = same & (overlap > best_overlap)
        best = np.where(better, cand, best)
        best_overlap = np.where(better, overlap, best_overlap)
    out[hit] = best
    return out


def summarise(records: np.ndarray, steps: np.ndarray, worker: Optional[np.ndarray],
              steady: np.ndarray, offsets: dict, num_workers: Optional[int],
              unavailable: Optional[str],
              stuck_after_ns: Optional[int] = None,
              idx: Optional[np.ndarray] = None) -> tuple[dict, Optional[np.ndarray]]:
    """The report's ``production`` block and, per step, the ns of its input
    wait during which its worker was making batches (-1 unknown).

    ``records`` are the source's worker records (BATCH_RECORD_DTYPE),
    ``steps`` its steps (RECORD_DTYPE), ``worker`` each step's delivering
    worker (-1 unknown; None: delivery not tracked), ``steady`` the
    steady-state mask, ``offsets`` what reset discarded (see
    :func:`note_reset`), ``unavailable`` why timing was off (None: it was
    on for some epoch); ``idx`` the steps' :func:`match` when the caller
    has it (else matched here).

    Numbers (seconds; shares of the matched steady steps' total step time):
    ``make_s`` wall per batch in the worker (production time, including
    waits for a core, I/O, sleeps), ``cpu_s`` the worker process's CPU per
    batch (every thread), ``runq_s`` the fetching thread's wait for a core (schedstat; None when the
    kernel keeps none) (each {median, p95, mean}), ``handover_s`` per step the input
    wait outside production (same), ``workers`` per worker id {batches, make_median_s, make_mean_s,
    make_sd_s (the make times' sample standard deviation, None under 2 batches),
    cpu_median_s}, ``busy_share`` the workers' time making batches over
    num_workers times the epochs' span, ``production_share`` the input wait
    during which the awaited worker was making batches, ``handover_share``
    the rest of the input wait (the batch was made; it was in the queue,
    being unpickled, or its worker's process was not scheduled),
    ``ready_before_fetch`` the share of steps whose batch was made before
    their fetch began, ``coverage`` matched / steady steps.

    ``model`` holds the means :mod:`traceml.predict` rests on, over the
    matched steps less the stuck ones (a batch made, or a fetch waited,
    for ``stuck_after_ns`` or more: the stuck watch's line; a stuck fetch
    is an event the headline reports, not the steady state, and one 10 s
    batch among 120 would add 83 ms to a mean of 0.3 ms): {left_out (steps
    left out), make_s, cpu_s, runq_s (None: unknown), handover_s, wait_s
    (the measured input wait), step_s}; None when every matched step is
    stuck."""
    block: dict = {"available": False, "unavailable": unavailable, "batches": 0,
                   "coverage": 0.0}
    if worker is None or len(records) == 0 or len(steps) == 0:
        if unavailable is None:
            block["unavailable"] = ("the workers recorded no batch" if worker is not None
                                    else "the delivering worker of each batch is not known")
        return block, None
    if idx is None:
        idx = match(records, steps["epoch"], worker, offsets)
    matched = (idx >= 0) & steady
    n_steady = int(steady.sum())
    block["batches"] = int(matched.sum())
    block["coverage"] = block["batches"] / n_steady if n_steady else 0.0
    if not matched.any():
        block["unavailable"] = unavailable or "no step met a batch its worker recorded"
        return block, None
    busy = busy_during(records, steps["epoch"], worker, steps["begin_ns"], steps["fetch_done_ns"])
    mine = records[idx[matched]]
    make = mine["end_ns"] - mine["begin_ns"]
    cpu = mine["cpu_ns"][mine["cpu_ns"] >= 0]
    runq = mine["runq_ns"][mine["runq_ns"] >= 0]
    wait = (steps["fetch_done_ns"] - steps["begin_ns"])[matched]
    step = (steps["end_ns"] - steps["begin_ns"])[matched]
    total = int(step.sum())
    prod = np.clip(busy[matched], 0, wait)
    per_worker = {}
    for w in np.unique(mine["worker"]):
        sel = mine["worker"] == w
        c = mine["cpu_ns"][sel]
        c = c[c >= 0]
        per_worker[int(w)] = {
            "batches": int(sel.sum()),
            "make_median_s": _core.percentiles(make[sel], 50.0) * 1e-9,
            "make_mean_s": float(make[sel].mean()) * 1e-9,
            "make_sd_s": (float(make[sel].std(ddof=1)) * 1e-9 if sel.sum() >= 2 else None),
            "cpu_median_s": _core.percentiles(c, 50.0) * 1e-9 if len(c) else None,
        }
    # The workers' busy share over the epochs the matched steps belong to.
    epochs = np.unique(steps["epoch"][matched])
    in_epochs = np.isin(records["epoch"], epochs)
    span = 0
    for e in epochs:
        sel = steps["epoch"] == e
        span += int(steps["end_ns"][sel].max() - steps["begin_ns"][sel].min())
    made = int((records["end_ns"] - records["begin_ns"])[in_epochs].sum())
    block.update({
        "available": True,
        "unavailable": None,
        "make_s": _stats_s(make),
        "cpu_s": _stats_s(cpu),
        "runq_s": _stats_s(runq),
        "handover_s": _stats_s(wait - prod),
        "workers": per_worker,
        "busy_share": (made / (num_workers * span)) if num_workers and span > 0 else None,
        "production_share": float(prod.sum()) / total if total > 0 else None,
        "handover_share": float((wait - prod).sum()) / total if total > 0 else None,
        "ready_before_fetch": float(np.mean(mine["end_ns"] <= steps["begin_ns"][matched])),
        "model": _model_means(mine, make, wait, step, prod, stuck_after_ns),
    })
    return block, busy


def _model_means(mine: np.ndarray, make: np.ndarray, wait: np.ndarray, step: np.ndarray,
                 prod: np.ndarray, stuck_after_ns: Optional[int]) -> Optional[dict]:
    """summarise()'s ``model`` block: means (s) over the matched steps
    whose batch took, and whose fetch waited, under ``stuck_after_ns``
    (all of them when None or <= 0)."""
    keep = np.ones(len(make), dtype=bool)
    if stuck_after_ns is not None and stuck_after_ns > 0:
        keep = (make < stuck_after_ns) & (wait < stuck_after_ns)
    if not keep.any():
        return None

    def mean_s(x: np.ndarray) -> Optional[float]:
        return float(np.mean(x)) * 1e-9 if len(x) else None

    cpu, runq = mine["cpu_ns"][keep], mine["runq_ns"][keep]
    return {"left_out": int((~keep).sum()), "make_s": mean_s(make[keep]),
            "cpu_s": mean_s(cpu[cpu >= 0]), "runq_s": mean_s(runq[runq >= 0]),
            "handover_s": mean_s((wait - prod)[keep]), "wait_s": mean_s(wait[keep]),
            "step_s": mean_s(step[keep])}
