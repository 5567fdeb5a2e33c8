"""Sampled Python stacks of the processes that make the batches, measured.

:class:`traceml._core.StackLog` samples the stack of each DataLoader
worker's main thread every ``INTERVAL_US`` of the worker's CPU time (a
``SIGPROF`` timer; csrc/stacks.c says how, and why it is safe).  This
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

import os
from typing import Any, NamedTuple, Optional

import numpy as np

from . import _core

STACKS_ENV = "TRACEML_STACKS"
# 5 ms of CPU a sample: 200 samples per CPU-second, the top of the
# 100-200 the sampler is meant for (enough samples in a 16-step run of
# 50 ms batches: 160), at a cost benchmarks/bench_stacks.py measures.
INTERVAL_US = 5000
# The columns of StackLog.drain()'s samples.
T_NS, PID, WORKER, WEIGHT, KIND, DEPTH = range(6)
KIND_STACK, KIND_OTHER = 0, 1
# traceml's own frames (the wrapper's, the hook's) are left out of every
# stack: they say nothing of the dataset.
_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def enabled() -> bool:
    """Whether the sampler may run: ``TRACEML_STACKS`` is not ``0``."""
    return os.environ.get(STACKS_ENV, "1").strip() not in ("0", "false", "off", "no")


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
        samples = self._samples[0] if self._samples else np.zeros((0, 6), np.int64)
        frames = self._frames[0] if self._frames else np.zeros((0, 2), np.int32)
        return Drained(samples, frames, list(self._codes), self.log.info())


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


def function_counts(d: Drained, group: np.ndarray, groups: int = 2) -> FunctionCounts:
    """Count the stack samples of ``d`` by function and ``group`` (per
    sample, 0 .. groups-1, or -1 to leave it out; shape (n,)).  A function
    is counted once per sample however often it recurs in the stack;
    traceml's own frames and code the table could not hold are left
    out."""
    samples, frames, codes = d.samples, d.frames, d.codes
    keys: list = []
    func_of_code = np.full(len(codes) + 1, -1, dtype=np.int64)
    index: dict = {}
    for i, c in enumerate(codes):
        if c is None or c[0].startswith(_OWN_DIR):
            continue
        k = (c[0], c[1], int(c[2]))
        if k not in index:
            index[k] = len(keys)
            keys.append(k)
        func_of_code[i] = index[k]
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
    keep = (func >= 0) & (g >= 0) & (samples[sample_of, KIND] == KIND_STACK)
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
             steady: np.ndarray) -> np.ndarray:
    """Per sample (shape (n, 6)): 1 where its time lies inside the wait
    ([begin_ns, fetch_done_ns]) of a ``stalled`` step, 0 elsewhere inside
    a ``steady`` step ([begin_ns, end_ns]), -1 outside the steady steps
    (``stalled``, ``steady``: bool per step; steps one source's, in
    order, not overlapping)."""
    out = np.full(len(samples), -1, dtype=np.int64)
    if not len(samples) or not len(steps):
        return out
    order = np.argsort(steps["begin_ns"], kind="stable")
    begin, end = steps["begin_ns"][order], steps["end_ns"][order]
    t = samples[:, T_NS]
    j = np.searchsorted(begin, t, side="right") - 1
    jj = np.maximum(j, 0)
    inside = (j >= 0) & (t <= end[jj]) & steady[order][jj]
    waiting = inside & stalled[order][jj] & (t <= steps["fetch_done_ns"][order][jj])
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
