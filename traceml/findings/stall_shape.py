"""The shape of the input wait: FAST, UNIFORMLY-SLOW or HEAVY-TAILED, and how
much of it the stalls hold.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from .. import _core
from ..fmt import fmt_s, pct
from . import _numbers, _words, stall_threshold
from ._types import Finding, Words


# Shape tells "uniformly slow input" from "mostly fast input with large
# stalls"; two runs with the same mean wait can differ here and call for
# different experiments.
FAST = "FAST"
UNIFORMLY_SLOW = "UNIFORMLY-SLOW"
HEAVY_TAILED = "HEAVY-TAILED"


# The shape rule's codes (second item of shape()'s answer).
SHAPE_NO_STALLS = "no_stalls"          # FAST
SHAPE_EVERY_SLOW = "every_slow"        # UNIFORMLY-SLOW: p10 wait past the threshold
SHAPE_MOST_STALL = "most_stall"        # UNIFORMLY-SLOW: over half the fetches stall
SHAPE_SLOW_BETWEEN = "slow_between"    # UNIFORMLY-SLOW: calm fetches slow too
SHAPE_HEAVY_TAIL = "heavy_tail"        # HEAVY-TAILED
SHAPE_SLOW_MEDIAN = "slow_median"      # UNIFORMLY-SLOW: the median fetch is slow


def shape(stall_count: int, steady_steps: int, every_fetch_slow: bool,
          calm_wait_ns: Optional[float] = None,
          floor_ns: Optional[float] = None,
          median_wait_ns: Optional[float] = None,
          threshold_ns: Optional[float] = None,
          trending: bool = False,
          least_ns: Optional[float] = None) -> Optional[tuple[str, str]]:
    """(label, SHAPE_* code) from the stall rule's outcome; None without
    steps.

    FAST: no fetch is a stall.  UNIFORMLY-SLOW: every fetch is slow (the
    p10 wait clears the stall threshold), more than
    HEAVY_TAIL_MAX_STALL_SHARE of the fetches are stalls, or the fetches
    between stalls are themselves slow (their median wait,
    ``calm_wait_ns``, above the material floor ``floor_ns``).
    HEAVY-TAILED: stalls, but at most that share of the fetches, the rest
    fast: "mostly fast input with large stalls".  The median steady wait
    ``median_wait_ns`` (the lower median) makes UNIFORMLY-SLOW
    (SHAPE_SLOW_MEDIAN) when it is itself past the stall threshold
    ``threshold_ns``, or, with stalls that are not the most and calm
    fetches that are fast by their own median, past the material floor
    (a label that says "mostly fast" never stands beside a median fetch
    that is itself slow: a user trial's 2 workers of 80 ms batches read
    HEAVY-TAILED with a median fetch of 98 ms against a 99 ms threshold
    and a 111 ms median step, and UNIFORMLY-SLOW in the next run), or, without stalls, past the least a
    stall adds to its step ``least_ns`` (half the median step: the typical
    fetch waits about as long as the step computes), or past the floor
    while the wait trends (``trending``: a wait that rises to tens of ms
    is never FAST).  Otherwise, without stalls, a median past the floor
    stays FAST: a steady per-batch cost spread over every fetch (the
    hand-over from the workers measured 2.6-2.8 ms of an 11-13 ms step on
    healthy loaders beside a CPU hog, benchmarks/bench_truth.py), which
    the next step names.
    """
    if steady_steps == 0:
        return None
    if every_fetch_slow:
        return UNIFORMLY_SLOW, SHAPE_EVERY_SLOW
    if median_wait_ns is not None:
        bars = ([threshold_ns] if stall_count
                else [least_ns] + ([floor_ns] if trending else []))
        if any(b is not None and median_wait_ns > b for b in bars):
            return UNIFORMLY_SLOW, SHAPE_SLOW_MEDIAN
    if stall_count == 0:
        return FAST, SHAPE_NO_STALLS
    if stall_count > stall_threshold.HEAVY_TAIL_MAX_STALL_SHARE * steady_steps:
        return UNIFORMLY_SLOW, SHAPE_MOST_STALL
    if calm_wait_ns is not None and floor_ns is not None and calm_wait_ns > floor_ns:
        return UNIFORMLY_SLOW, SHAPE_SLOW_BETWEEN
    if median_wait_ns is not None and floor_ns is not None and median_wait_ns > floor_ns:
        return UNIFORMLY_SLOW, SHAPE_SLOW_MEDIAN
    return HEAVY_TAILED, SHAPE_HEAVY_TAIL


class Classified(NamedTuple):
    """What the stall rule and the shape make of steady waits: the rule
    (stall_threshold.StallRule), whether the waits above it matter
    (StallsMatter), the stall mask, the outlier mask (same shape as the
    waits), the calm and the stall median waits (ns, None without such
    fetches), the lower median wait, and the shape as (label, SHAPE_*
    code) or None."""

    rule: "stall_threshold.StallRule"
    matter: "stall_threshold.StallsMatter"
    stalls: np.ndarray
    outliers: np.ndarray
    calm_median_ns: Optional[float]
    stall_median_ns: Optional[float]
    median_wait_ns: Optional[float]
    shape: Optional[tuple]


def classify(wait_ns: np.ndarray, step_ns: np.ndarray, given_s: Optional[float],
             trending=None, position: bool = True,
             known: Optional[stall_threshold.KnownStats] = None) -> Classified:
    """The stall rule over the steady waits and steps (ns, shape
    (steps,)), whether the waits above it matter, and the shape; ``given_s``
    the caller's threshold (s) or None; ``trending(rule) -> bool``: whether
    the wait trends, given the rule (its floor; see :func:`shape`; None:
    it does not); ``position``: whether the stall rule may use its
    position test (stall_threshold.stall_threshold_ns); ``known``: order
    statistics of these waits and steps already selected."""
    rule = stall_threshold.stall_threshold_ns(wait_ns, step_ns, given_s, position, known)
    trends = bool(trending(rule)) if trending is not None else False
    above = _core.stall_mask(wait_ns, rule.threshold_ns)
    matter = stall_threshold.stalls_matter(wait_ns, step_ns, above, rule.code,
                                          rule.threshold_ns)
    if (matter.code != stall_threshold.STALLS_KEPT and rule.all_slow
            and rule.code != stall_threshold.RULE_ALL_SLOW):
        # Every fetch slow, and the group on top does not matter by itself:
        # the fetches are still all slow, every one a stall (RULE_ALL_SLOW),
        # never "no stalls" (a loop 96% input-bound read FAST).
        rule = rule._replace(threshold_ns=int(rule.floor_ns),
                             code=stall_threshold.RULE_ALL_SLOW, every_fetch_slow=True,
                             basis=None, position=None)
        above = _core.stall_mask(wait_ns, rule.threshold_ns)
        matter = stall_threshold.stalls_matter(wait_ns, step_ns, above, rule.code,
                                          rule.threshold_ns)
    if matter.code != stall_threshold.STALLS_KEPT:
        outliers, stalls = above, np.zeros_like(above)
    else:
        outliers, stalls = np.zeros_like(above), above
    del above
    count, n = int(np.count_nonzero(stalls)), len(wait_ns)
    # The lower median: a fetch that at least half the fetches do not
    # exceed (an interpolated median of half-stalled waits is neither).
    median_wait = calm = stalled = None
    if n:
        # The stalls are the waits above the threshold: the last `count` in
        # order (one selection for them and the whole).  Kept, the calm
        # ones are those stalls_matter took the median of.
        middles = _numbers.span_middles(wait_ns, [(0, n)] + ([(n - count, n)] if count else []))
        median_wait = float(middles[0][0])
        if count < n:
            calm = matter.calm_median_ns if count else _numbers.mid(middles[0])
        stalled = _numbers.mid(middles[-1]) if count else None
    found = shape(count, len(wait_ns), rule.every_fetch_slow, calm, rule.floor_ns,
                  median_wait, rule.threshold_ns, trends, rule.least_ns)
    return Classified(rule, matter, stalls, outliers, calm, stalled, median_wait, found)


def concentration(wait_ns: np.ndarray, stall_mask: np.ndarray) -> dict:
    """{stall_step_share, stall_wait_share}: the share of steady-state steps
    that are stalls, and the share of their total input wait those stalls
    hold ("4% of steps hold 93% of the input wait").  None when empty."""
    n = len(wait_ns)
    total = int(_core.totals(wait_ns)["sum"]) if n else 0
    # Summed in place (no gathered copy): int64 holds 292 years of ns.
    stalled = int(np.sum(wait_ns, where=stall_mask)) if n else 0
    return {
        "stall_step_share": float(stall_mask.sum()) / n if n else None,
        "stall_wait_share": stalled / total if total > 0 else None,
    }


def _most() -> str:
    return _words._part(stall_threshold.HEAVY_TAIL_MAX_STALL_SHARE)


def _floor() -> str:
    return stall_threshold._floor("the ")


# The words of the rule behind each shape, by rule code ("shape_" + the
# shape code of :func:`shape`); the rules quote constants only.
WORDS: dict[str, Words] = {
    "shape_" + SHAPE_NO_STALLS: lambda p: "no fetch waited past the stall threshold",
    "shape_" + SHAPE_EVERY_SLOW: lambda p: (
        f"at least {pct(1 - stall_threshold.ALL_SLOW_PERCENTILE / 100)} of fetches wait past "
        "the stall threshold"),
    "shape_" + SHAPE_MOST_STALL: lambda p: f"more than {_most()} of the fetches are stalls",
    "shape_" + SHAPE_SLOW_BETWEEN: lambda p: (
        f"the fetches between stalls are slow too (median wait above {_floor()}), stalls on "
        "top"),
    "shape_" + SHAPE_HEAVY_TAIL: lambda p: (
        f"at most {_most()} of the fetches are stalls; the rest are fast"),
    "shape_" + SHAPE_SLOW_MEDIAN: lambda p: (
        f"the median fetch is itself slow (a stall, or past {_floor()} beside stalls; without "
        f"stalls, past max({fmt_s(stall_threshold.STALL_FLOOR_S)}, "
        f"{_words._of_the(stall_threshold.STALL_MIN_STEP_SHARE)} median step), or past "
        f"{_floor()} in a wait that trends): not mostly fast"),
}


def shape_finding(code: str) -> Finding:
    """The rule behind a shape as a Finding (:func:`shape`'s code, no
    numbers)."""
    return Finding("shape_" + code, {})
