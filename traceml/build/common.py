"""Shared by the build stages: the duration statistics, the steady
steps (:class:`Steady`), and the source's latest epoch facts.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import _core
from .. import findings
from ..findings import stall_threshold, stall_timing


NS = 1e-9
QUANTILES = (50.0, 90.0, 95.0, 99.0)
STAT_KEYS = ("mean", "median", "p90", "p95", "p99", "max", "total")


def duration_stats_s(x_ns: np.ndarray) -> dict:
    """{mean, median, p90, p95, p99, max, total} in seconds (None if empty).

    mean/total/max come from the C ``totals`` (one pass), the rest from one
    call of the C ``percentiles`` (numpy.percentile's "linear" rule).
    """
    return stats_and(x_ns)[0]


def stats_and(x_ns: np.ndarray, extra_q: tuple = ()) -> tuple[dict, tuple]:
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


def worded(key: str, finding: Optional[findings.Finding]) -> dict:
    """``{key: its words, key + "_item": [code, numbers]}`` for one
    finding (both None without one): the sentence for today's views, the
    item a run file keeps and Report.load words again (result.RULE_WORDS)."""
    if finding is None:
        return {key: None, key + "_item": None}
    return {key: findings.sentences([finding])[0], key + "_item": findings.stored([finding])[0]}


# Past this many start-up steps the steady differences are gathered by a
# mask; below it, run by run between them (a long run's few start-up
# steps: no full-length temporary, which costs its page faults).
STEADY_RUNS_MAX = 4096


def steady_difference(a: np.ndarray, b: np.ndarray, at_first: np.ndarray) -> np.ndarray:
    """``(a - b)`` less the entries at ``at_first`` (ascending indices):
    int64, shape (len(a) - len(at_first),), written once."""
    if len(at_first) > STEADY_RUNS_MAX:
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


class Steady:
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
            self.wait = steady_difference(steps["fetch_done_ns"], begin, at_first)
            self.step = steady_difference(steps["end_ns"], begin, at_first)
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


def latest_fact(src, key: str) -> Any:
    """``key`` of the source's latest epoch's facts (None: no such fact,
    or no epoch known)."""
    facts = getattr(src, "epoch_facts", None) or {}
    return facts[max(facts)].get(key) if facts else None


def startup_steps(src, epoch: np.ndarray, epochs: np.ndarray):
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
