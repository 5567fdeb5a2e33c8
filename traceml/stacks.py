"""Sampled Python stacks of the processes that make the batches, measured.

:class:`traceml._core.StackLog` samples the stack of each DataLoader
worker's main thread every ``INTERVAL_US`` of the worker's CPU time (a
``SIGPROF`` timer; csrc/stacks.c says how, and why it is safe), and,
while the worker makes a batch, every ``INTERVAL_US`` of wall time that
thread spends off CPU (``KIND_OFF``: where a batch sleeps, reads or
waits).  This
module holds a source's log and what was drained from it, ties each sample
to the batch its worker was making (the worker's BatchLog record whose
``[begin_ns, end_ns]`` holds the sample's time), and counts, per function,
the samples of the slow and of the fast batches whose stack holds it.
Numbers only: :mod:`traceml.findings.slow_code` judges them.

``TRACEML_STACKS=0`` in the environment turns the sampler off (the one
switch); workers not started by ``fork`` are not sampled (the log is a
shared mapping they would not inherit).
"""

from __future__ import annotations

import atexit
import os
import sysconfig
import types
import weakref
from typing import Any, NamedTuple, Optional

import numpy as np

from . import _core

STACKS_ENV = "TRACEML_STACKS"
NOT_HOOKED = ("only forked workers that traceml hooked are sampled "
              "(see the worker batch timing line)")
# 5 ms of CPU a sample: 200 samples per CPU-second, the top of the
# 100-200 the sampler is meant for (enough samples in a 16-step run of
# 50 ms batches: 160), at a cost benchmarks/bench_stacks.py measures.
INTERVAL_US = 5000
# The samples a source keeps in memory, the latest (at most 48 B a row
# and 8 B a frame: about 50 MB at full depth); older ones are counted.
SAMPLES_KEPT = 1 << 17
# The columns of StackLog.drain()'s samples.
T_NS, PID, WORKER, WEIGHT, KIND, DEPTH = range(6)
# KIND_STACK: a CPU tick of the thread that makes the batch, with its
# stack; KIND_OTHER: a CPU tick in another thread, no stack; KIND_OFF:
# wall-clock ticks (INTERVAL_US each) the batch's thread spent off CPU
# while a worker made a batch (asleep, reading, on a lock, or waiting for
# a core), with its stack.
KIND_STACK, KIND_OTHER, KIND_OFF = 0, 1, 2
# traceml's own frames (the wrapper's, the hook's) are left out of every
# stack: they say nothing of the dataset.  The demo's dataset and loop
# (traceml/_lerobot.py, traceml/demo.py) are the user's code of its story.
_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_NOT_OWN = tuple(_OWN_DIR + name for name in ("_lerobot.py", "demo.py"))


def _is_own(file: str) -> bool:
    return file.startswith(_OWN_DIR) and not file.startswith(_NOT_OWN)


# Where installed packages and the standard library live: their
# functions are where the user's code spends its CPU, not code to change.
_LIBRARY_DIRS = tuple(sorted({os.path.normpath(p) + os.sep for p in (
    sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib"),
    sysconfig.get_paths().get("purelib"), sysconfig.get_paths().get("platlib")) if p}))


def is_library(file: str) -> bool:
    """Whether ``file`` (a code object's co_filename) belongs to an
    installed package or the standard library (site-packages,
    dist-packages, this interpreter's stdlib), not to the user's code; the
    demo's dataset, installed with traceml, is the story's own code."""
    if file.startswith(_NOT_OWN):
        return False
    norm = file.replace("\\", "/")
    return ("/site-packages/" in norm or "/dist-packages/" in norm
            or os.path.normpath(file).startswith(_LIBRARY_DIRS))


def enabled() -> bool:
    """Whether the sampler may run: ``TRACEML_STACKS`` is not ``0``
    (nor, in any case, ``false``, ``off`` or ``no``)."""
    return os.environ.get(STACKS_ENV, "1").strip().lower() not in ("0", "false", "off", "no")


def _off_because() -> str:
    return f"{STACKS_ENV}={os.environ.get(STACKS_ENV, '').strip()} in the environment"


class Drained(NamedTuple):
    """A source's samples: ``samples`` int64 (n, 6) (columns T_NS ...
    DEPTH), ``frames`` int32 (sum of depths, 2) (code, line; each sample's
    frames innermost first, in sample order), ``codes`` the code table
    [(file, qualified name, first line) or None], ``info`` the log's
    counters (StackLog.info())."""

    samples: np.ndarray
    frames: np.ndarray
    codes: list
    info: dict


class Stacks:
    """A source's stack log and the samples drained from it."""

    def __init__(self) -> None:
        self.log: Optional[Any] = None
        self._samples: list = []
        self._frames: list = []
        self._codes: list = []
        self.dropped = 0

    def ensure_log(self) -> Any:
        """The log, made on first use (before the workers fork)."""
        if self.log is None:
            self.log = _core.StackLog()
        return self.log

    def drained(self) -> Optional[Drained]:
        """Every sample so far (None: no log was made)."""
        if self.log is None:
            return None
        s, f, codes = self.log.drain()
        if len(s):
            self._samples.append(s)
            self._frames.append(f)
        self._codes = codes
        if len(self._samples) > 1:
            self._samples = [np.concatenate(self._samples)]
            self._frames = [np.concatenate(self._frames)]
        if self._samples and len(self._samples[0]) > SAMPLES_KEPT:
            # The latest SAMPLES_KEPT, with their frames; the rest counted.
            cut = len(self._samples[0]) - SAMPLES_KEPT
            frames_cut = int(self._samples[0][:cut, DEPTH].sum())
            self._samples = [self._samples[0][cut:]]
            self._frames = [self._frames[0][frames_cut:]]
            self.dropped += cut
        samples = self._samples[0] if self._samples else np.zeros((0, 6), np.int64)
        frames = self._frames[0] if self._frames else np.zeros((0, 2), np.int32)
        return Drained(samples, frames, list(self._codes), self.log.info())


class _MainSampler:
    """The main process's own sampling, for loaders with num_workers=0
    (which make their batches inside the fetch): one log for the process
    (SIGPROF is the process's), shared by every source, sampling while at
    least one such epoch's iterator lives.  Each report keeps the samples
    inside its own steps' fetches, so sources never take each other's."""

    def __init__(self) -> None:
        self.stacks = Stacks()
        self.live = 0
        self.why: Optional[str] = None
        self._at_exit = False

    def epoch_begins(self, iterator: Any, wall: bool = True) -> None:
        """Sample from now until ``iterator`` (the loader's iterator for
        the epoch) is collected, as it is when the loop over it ends;
        ``wall``: also the time off CPU inside each fetch, where this call
        starts the sampling (it arms a timer each fetch).  Never raises:
        why it could not start is kept in ``why``."""
        if not enabled():
            self.why = _off_because()
            return
        try:
            log = self.stacks.ensure_log()
            if not log.info()["running"]:
                self.why = log.start(worker=-1, interval_us=INTERVAL_US, wall=wall)
                if self.why is None and not self._at_exit:
                    # Once: CPython's atexit keeps a slot for every
                    # register() that unregister() empties but never
                    # frees, so a register each epoch grew the process by
                    # a pointer an epoch.  stop() on an idle sampler does
                    # nothing.
                    atexit.register(self.stop)
                    self._at_exit = True
            if self.why is not None:
                return
            weakref.finalize(iterator, self._epoch_ends)
        except (OSError, ValueError, TypeError) as e:
            # TypeError: an iterator without weak references; sampling
            # then runs until the process ends.
            self.why = self.why or (str(e) if not isinstance(e, TypeError) else None)
            return
        self.live += 1

    def begins_for_generator(self, iterator: Any) -> bool:
        """Sample while ``iterator``, a wrapped generator (not a
        DataLoader's), lives, as :meth:`epoch_begins`: its frames make each
        item in this process, as a DataLoader's at num_workers=0.  CPU
        only: the wall timer armed around each fetch costs about 2.5 us a
        fetch (a thread CPU clock, a schedstat read, two timer_settime
        calls), 18x a 150 ns wrapped generator item.  Not other
        iterators: a list's or a range's are C, with nothing of the
        user's to name, and a class's may hold items made elsewhere.
        Whether sampling runs for it; never raises."""
        if not isinstance(iterator, types.GeneratorType):
            return False
        self.epoch_begins(iterator, wall=False)
        return self.why is None and self.live > 0

    def _epoch_ends(self) -> None:
        self.live -= 1
        if self.live <= 0:
            self.stop()

    def stop(self) -> None:
        """Stop sampling now (at exit: the interpreter's finalization puts
        SIG_DFL back for SIGPROF, and a tick after that would end the
        process).  The timer stops in any thread; the Python-level handler
        goes back only in the main thread (elsewhere signal.signal()
        refuses, and the handler left is ours, idle, which the next
        start takes for its own)."""
        if self.stacks.log is not None:
            try:
                self.stacks.log.stop()
            except ValueError:
                pass
        self.live = 0


MAIN = _MainSampler()


class StackInput(NamedTuple):
    """What a report's build takes of a source's stacks (:func:`input_for`):
    the samples (None: no log was made), why the sampler was off where
    known, the samples let go past SAMPLES_KEPT, and whether they are the
    main process's (num_workers=0)."""

    drained: Optional[Drained]
    why_off: Optional[str]
    dropped: int
    in_main: bool


def input_for(src: Any) -> Optional[StackInput]:
    """The stack samples for a report of source ``src`` (a wrapped
    DataLoader's: its workers' log, or at num_workers=0 the main process's
    shared one; a wrapped generator's: that shared log too); None for
    other sources."""
    timing = getattr(src, "timing", None)
    loader = getattr(src, "loader", None)
    if not loader and getattr(src, "main_sampled", False):
        # A generator's items, made in this process.
        why = MAIN.why if enabled() else _off_because()
        return StackInput(MAIN.stacks.drained(), why, MAIN.stacks.dropped, True)
    if timing is None or not loader:
        return None
    in_main = not (loader.get("num_workers") or 0) > 0
    holder = MAIN.stacks if in_main else timing.stacks
    why = MAIN.why if in_main else None
    if not in_main and holder.log is None:
        # Workers traceml could not hook (spawn or forkserver, persistent
        # workers started before the wrap): the batch timing says which.
        why = NOT_HOOKED
    if not enabled():
        why = _off_because()
    return StackInput(holder.drained(), why, holder.dropped, in_main)


def start_in_worker(log: Any, worker_id: int) -> Optional[str]:
    """In a worker, after the user's ``worker_init_fn``: start sampling
    (None) or say why not.  Never raises into the worker."""
    try:
        return log.start(worker=worker_id, interval_us=INTERVAL_US)
    except (OSError, ValueError) as e:
        return str(e)


def batch_of(samples: np.ndarray, records: np.ndarray) -> np.ndarray:
    """For each sample (shape (n, 6)), the index into the BatchLog
    ``records`` of the batch its worker was making at the sample's time
    (the record of that worker whose [begin_ns, end_ns] holds it), or -1
    (between batches, or the main process)."""
    out = np.full(len(samples), -1, dtype=np.int64)
    if not len(samples) or not len(records):
        return out
    for w in np.unique(samples[:, WORKER]):
        if w < 0:
            continue
        mine = np.flatnonzero(records["worker"] == w)
        if not len(mine):
            continue
        mine = mine[np.argsort(records["begin_ns"][mine], kind="stable")]
        begin, end = records["begin_ns"][mine], records["end_ns"][mine]
        at = np.flatnonzero(samples[:, WORKER] == w)
        t = samples[at, T_NS]
        j = np.searchsorted(begin, t, side="right") - 1
        ok = (j >= 0) & (t <= end[np.maximum(j, 0)])
        out[at[ok]] = mine[j[ok]]
    return out


class FunctionCounts(NamedTuple):
    """Per function (``keys``: (file, qualified name, first line)), the
    sample weight (ticks) of each group whose stack holds it (``held``,
    shape (functions, groups)), the weight in which it was the innermost
    Python frame (``own``, same shape), its commonest line in group 1
    (``hot_line``), and its mean distance from the stack's root in group 1
    (``root_distance``, frames; NaN where absent)."""

    keys: list
    held: np.ndarray
    own: np.ndarray
    hot_line: np.ndarray
    root_distance: np.ndarray


def _functions(codes: list, own: bool = False) -> tuple[list, np.ndarray]:
    """(the distinct functions of the code table, (file, qualified name,
    first line); per code index, plus one for "unknown", the function's
    index or -1 for unknown code and, unless ``own``, traceml's own).
    Each process has its own entries for the same function: this merges
    them."""
    keys: list = []
    func_of_code = np.full(len(codes) + 1, -1, dtype=np.int64)
    index: dict = {}
    for i, c in enumerate(codes):
        if c is None or (not own and _is_own(c[0])):
            continue
        k = (c[0], c[1], int(c[2]))
        if k not in index:
            index[k] = len(keys)
            keys.append(k)
        func_of_code[i] = index[k]
    return keys, func_of_code


def _machinery_mask(codes: list) -> np.ndarray:
    """Per code index (plus one for "unknown"): is it the loader's own
    machinery (torch.utils.data, multiprocessing, threading)?"""
    return np.array([c is not None and any(m in c[0] for m in _MACHINERY) for c in codes]
                    + [False])


def under_frame_share(d: Drained, group: np.ndarray, frame: tuple) -> Optional[float]:
    """The share of the sampled CPU (sample weight) of the stack samples
    with ``group >= 0`` whose stack passes through ``frame`` ((file
    suffix, function name suffix), e.g. torch_private.SAMPLER_FRAME: what
    runs under it, a user's Sampler included); None without such
    samples."""
    samples, frames, codes = d.samples, d.frames, d.codes
    keep = (group >= 0) & (samples[:, KIND] == KIND_STACK) if len(samples) else np.zeros(0, bool)
    if not keep.any() or not len(frames):
        return None
    target = np.array([c is not None and c[0].replace("\\", "/").endswith(frame[0])
                       and c[1].endswith(frame[1]) for c in codes] + [False])
    depth = samples[:, DEPTH]
    sample_of = np.repeat(np.arange(len(samples)), depth)
    c = frames[:, 0].astype(np.int64)
    on = target[np.where((c >= 0) & (c < len(codes)), c, len(codes))]
    through = np.zeros(len(samples), dtype=bool)
    through[sample_of[on]] = True
    weight = samples[:, WEIGHT].astype(np.float64)
    total = float(weight[keep].sum())
    return float(weight[keep & through].sum()) / total if total > 0 else None


def function_counts(d: Drained, group: np.ndarray, groups: int = 2,
                    kind: int = KIND_STACK) -> FunctionCounts:
    """Count the stack samples of ``d`` of ``kind`` (KIND_STACK: CPU;
    KIND_OFF: off CPU) by function and ``group`` (per
    sample, 0 .. groups-1, or -1 to leave it out; shape (n,)).  A function
    is counted once per sample however often it recurs in the stack; only
    frames below the stack's innermost frame of the loader's machinery
    count (the batch's own work); traceml's own frames and code the table
    could not hold are left out."""
    samples, frames, codes = d.samples, d.frames, d.codes
    keys, func_of_code = _functions(codes)
    nf = len(keys)
    held = np.zeros((nf, groups))
    own = np.zeros((nf, groups))
    hot = np.full(nf, -1, dtype=np.int64)
    dist = np.full(nf, np.nan)
    depth = samples[:, DEPTH] if len(samples) else np.zeros(0, np.int64)
    if nf == 0 or not len(frames):
        return FunctionCounts(keys, held, own, hot, dist)
    sample_of = np.repeat(np.arange(len(samples)), depth)
    start = np.concatenate(([0], np.cumsum(depth)[:-1])) if len(depth) else depth
    pos = np.arange(len(frames)) - np.repeat(start, depth)      # 0: innermost
    from_root = np.repeat(depth, depth) - 1 - pos
    code = frames[:, 0].astype(np.int64)
    code = np.where((code >= 0) & (code < len(codes)), code, len(codes))
    func = func_of_code[code]
    g = group[sample_of]
    # Only the frames below each stack's innermost frame of the loader's
    # machinery: above it run the training loop and, in a forked worker,
    # the parent's stack at fork(), which no batch's work is.
    machinery = _machinery_mask(codes)[code]
    first_machinery = np.full(len(samples), np.iinfo(np.int64).max)
    np.minimum.at(first_machinery, sample_of[machinery], pos[machinery])
    below = pos < first_machinery[sample_of]
    keep = (func >= 0) & (g >= 0) & (samples[sample_of, KIND] == kind) & below
    sample_of, func, g, pos, from_root = (sample_of[keep], func[keep], g[keep], pos[keep],
                                          from_root[keep])
    lines = frames[keep, 1]
    weight = samples[:, WEIGHT].astype(np.float64)
    # Once per (sample, function): the outermost occurrence.
    order = np.lexsort((from_root, func, sample_of))
    first = np.ones(len(order), dtype=bool)
    first[1:] = ((sample_of[order][1:] != sample_of[order][:-1])
                 | (func[order][1:] != func[order][:-1]))
    once = order[first]
    np.add.at(held, (func[once], g[once]), weight[sample_of[once]])
    # The innermost kept frame of each sample.
    inner = np.lexsort((pos, sample_of))
    lead = np.ones(len(inner), dtype=bool)
    lead[1:] = sample_of[inner][1:] != sample_of[inner][:-1]
    leaf = inner[lead]
    np.add.at(own, (func[leaf], g[leaf]), weight[sample_of[leaf]])
    in1 = once[g[once] == groups - 1]
    if len(in1):
        w1 = weight[sample_of[in1]]
        tot = np.bincount(func[in1], weights=w1, minlength=nf)
        sum_d = np.bincount(func[in1], weights=w1 * from_root[in1], minlength=nf)
        with np.errstate(invalid="ignore", divide="ignore"):
            dist = np.where(tot > 0, sum_d / tot, np.nan)
        # The commonest line of each function in group 1.
        pairs = np.stack([func[in1], lines[in1]], axis=1)
        uniq, at = np.unique(pairs, axis=0, return_inverse=True)
        cnt = np.bincount(at.ravel(), weights=w1)
        best = np.lexsort((-cnt, uniq[:, 0]))
        take = np.ones(len(best), dtype=bool)
        take[1:] = uniq[best][1:, 0] != uniq[best][:-1, 0]
        hot[uniq[best][take, 0]] = uniq[best][take, 1]
    return FunctionCounts(keys, held, own, hot, dist)


def in_steps(samples: np.ndarray, steps: np.ndarray, stalled: np.ndarray,
             steady: np.ndarray, fetch_only: bool = False) -> np.ndarray:
    """Per sample (shape (n, 6)): 1 where its time lies inside the wait
    ([begin_ns, fetch_done_ns]) of a ``stalled`` step, 0 elsewhere inside
    a ``steady`` step ([begin_ns, end_ns]; with ``fetch_only``, inside its
    wait only), -1 elsewhere (``stalled``, ``steady``: bool per step;
    steps one source's, in order, not overlapping)."""
    out = np.full(len(samples), -1, dtype=np.int64)
    if not len(samples) or not len(steps):
        return out
    order = np.argsort(steps["begin_ns"], kind="stable")
    begin, end = steps["begin_ns"][order], steps["end_ns"][order]
    t = samples[:, T_NS]
    j = np.searchsorted(begin, t, side="right") - 1
    jj = np.maximum(j, 0)
    inside = (j >= 0) & (t <= end[jj]) & steady[order][jj]
    in_fetch = t <= steps["fetch_done_ns"][order][jj]
    if fetch_only:
        inside &= in_fetch
    waiting = inside & stalled[order][jj] & in_fetch
    out[inside] = 0
    out[waiting] = 1
    return out


def overlapping(records: np.ndarray, begin_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """Indices of the BatchLog ``records`` whose [begin_ns, end_ns]
    overlaps any of the intervals [begin_ns[i], end_ns[i]] (sorted by
    time, not overlapping)."""
    if not len(records) or not len(begin_ns):
        return np.zeros(0, dtype=np.int64)
    j = np.searchsorted(begin_ns, records["end_ns"], side="right") - 1
    ok = (j >= 0) & (end_ns[np.maximum(j, 0)] >= records["begin_ns"])
    return np.flatnonzero(ok)


# The hot path follows the heaviest callee while it holds at least this
# share of the samples: "most of the CPU" (a majority).
HOT_PATH_SHARE = 0.5
# Frames of the loader's own machinery (torch's DataLoader, the process
# and thread start-up): the path is shown from the first frame below them.
_MACHINERY = (os.sep + os.path.join("torch", "utils", "data") + os.sep,
              os.sep + "multiprocessing" + os.sep, os.sep + "threading.py")


def hot_path(d: Drained, group: np.ndarray, kind: int = KIND_STACK) -> list[dict]:
    """The call path most of the sampled CPU (``kind`` KIND_STACK; KIND_OFF:
    the time off CPU) went down: from the root of
    the stacks of the samples of ``kind`` with ``group >= 0`` (the sampled thread's),
    at each depth the function held by the most of the samples that
    followed the path so far, while it holds at least HOT_PATH_SHARE of
    all of them.  Returns [{file, function, first_line, line (its
    commonest line on the path), share, library (:func:`is_library`)}],
    outermost first, from below each
    stack's innermost frame of the loader's machinery (torch.utils.data,
    multiprocessing, threading: above it, the training script and, in a
    forked worker, the parent's stack at fork()), without traceml's own
    frames; [] without samples."""
    samples, frames, codes = d.samples, d.frames, d.codes
    keep = (group >= 0) & (samples[:, KIND] == kind) if len(samples) else np.zeros(0, bool)
    if not keep.any() or not len(frames):
        return []
    depth = samples[:, DEPTH]
    start = np.concatenate(([0], np.cumsum(depth)[:-1]))
    rows = np.flatnonzero(keep)
    width = int(depth[rows].max())
    # A stack is kept from its innermost frame out (TM_STACK_DEPTH), so
    # deep callers (a test runner's frames, copied into a forked worker)
    # are cut at different places: the stacks are aligned at their
    # innermost frame of the loader's machinery, and the path runs from
    # just below it.  (samples, depth) code and line, outermost first; -1
    # past a stack's end.
    machinery = _machinery_mask(codes)
    code = np.full((len(rows), width), -1, dtype=np.int64)
    line = np.full((len(rows), width), -1, dtype=np.int64)
    for k, r in enumerate(rows):
        n = int(depth[r])
        fr = frames[start[r]:start[r] + n]
        c = fr[:, 0].astype(np.int64)
        inside = machinery[np.where((c >= 0) & (c < len(codes)), c, len(codes))]
        below = int(np.argmax(inside)) if inside.any() else n
        code[k, :below] = c[:below][::-1]
        line[k, :below] = fr[:below, 1][::-1]
    keys, func_of_code = _functions(codes, own=True)
    known = code >= 0
    code[known] = func_of_code[np.where(code[known] < len(codes), code[known], len(codes))]
    weight = samples[rows, WEIGHT].astype(np.float64)
    total = weight.sum()
    on = np.ones(len(rows), dtype=bool)
    out: list[dict] = []
    for level in range(width):
        c = code[on, level]
        w = weight[on]
        valid = c >= 0
        if not valid.any():
            break
        sums = np.bincount(c[valid], weights=w[valid])
        best = int(np.argmax(sums))
        if sums[best] < HOT_PATH_SHARE * total:
            break
        on &= code[:, level] == best
        file, name, first = keys[best]
        if _is_own(file):
            continue
        lines = line[on, level]
        vals, cnt = np.unique(lines, return_counts=True)
        out.append({"file": file, "function": name, "first_line": int(first),
                    "line": int(vals[np.argmax(cnt)]), "share": float(sums[best] / total),
                    "library": is_library(file)})
    return out


def top_of_batches(d: Drained, at: np.ndarray, named: Optional[tuple] = None) -> dict:
    """Per batch record index (``at``: each sample's, from
    :func:`batch_of`; -1 none), the commonest innermost function of its
    samples in the sampled thread: {index: ("function (file:line)", its
    samples, the batch's samples, the samples holding ``named`` (a
    function key (file, qualified name, first line), the report's named
    function) or None)}, for the trace's batch slices."""
    samples, frames, codes = d.samples, d.frames, d.codes
    out: dict = {}
    if not len(samples) or not len(frames):
        return out
    keys, func_of_code = _functions(codes)
    depth = samples[:, DEPTH]
    start = np.concatenate(([0], np.cumsum(depth)[:-1]))
    leaf_func = np.full(len(samples), -1, dtype=np.int64)
    leaf_line = np.full(len(samples), -1, dtype=np.int64)
    for i in np.flatnonzero((at >= 0) & (samples[:, KIND] == KIND_STACK) & (depth > 0)):
        for k in range(int(start[i]), int(start[i] + depth[i])):   # innermost first
            c = int(frames[k, 0])
            f = func_of_code[c] if 0 <= c < len(codes) else -1
            if f >= 0:
                leaf_func[i], leaf_line[i] = f, int(frames[k, 1])
                break
    weight = samples[:, WEIGHT]
    holds = None
    if named is not None and tuple(named) in keys:
        target = keys.index(tuple(named))
        sample_of = np.repeat(np.arange(len(samples)), depth)
        code = frames[:, 0].astype(np.int64)
        code = np.where((code >= 0) & (code < len(codes)), code, len(codes))
        hit = np.zeros(len(samples), dtype=bool)
        hit[sample_of[func_of_code[code] == target]] = True
        holds = hit
    for b in np.unique(at[at >= 0]).tolist():
        mine = np.flatnonzero(at == b)
        known = mine[leaf_func[mine] >= 0]
        if not len(known):
            continue
        funcs, inv = np.unique(leaf_func[known], return_inverse=True)
        tot = np.bincount(inv.ravel(), weights=weight[known])
        j = int(np.argmax(tot))
        # Lines may be -1 (unknown to the frame API): not bincount.
        vals, cnt = np.unique(leaf_line[known][inv.ravel() == j], return_counts=True)
        line = int(vals[np.argmax(cnt)])
        file, name, _ = keys[int(funcs[j])]
        out[int(b)] = (f"{name} ({os.path.basename(file)}:{line})", int(tot[j]),
                       int(weight[mine].sum()),
                       None if holds is None else int(weight[mine][holds[mine]].sum()))
    return out
