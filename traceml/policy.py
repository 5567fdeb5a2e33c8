"""Every threshold and rule traceml applies, each with where it comes from.

Pure functions over NumPy arrays of nanoseconds and plain numbers: the
same inputs in, the same codes and numbers out, so every rule is tested on
hand-made inputs.  No sentence is built here (:mod:`traceml.wording` words
the codes) and nothing is measured or drawn.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np

from . import _core

# --- diagnosis -------------------------------------------------------------
# Share of step time spent waiting for input.  TensorFlow's input-pipeline
# analyzer (TensorBoard profiler, "Input-pipeline analysis") calls a step
# "highly input-bound" above 20% and "not input-bound" below 5%; traceml-ai
# uses 10% and 20%.  We take TensorFlow's pair: 5% and 20%.
INPUT_BOUND_SHARE = 0.20
COMPUTE_BOUND_SHARE = 0.05

INPUT_BOUND = "INPUT-BOUND"
COMPUTE_BOUND = "COMPUTE-BOUND"
BALANCED = "BALANCED"
NO_DATA = "NO-DATA"
# The loop waits INPUT_BOUND_SHARE or more, but not for the workers: each
# awaited batch was made, and its worker idle, for most of the wait.
HAND_OVER = "HAND-OVER"

# Worker-side timing (traceml.worker_timing) decides INPUT-BOUND only when
# it met at least this share of the steady steps (the rest: a reset that
# cut into an epoch, a log that overflowed, steps without a known worker).
PRODUCTION_MIN_COVERAGE = 0.9


class Diagnosis(NamedTuple):
    """The diagnosis label and the input share (total input wait / total
    step time, None without steps) it was read from; for NO-DATA over
    recorded steps, ``unmarked`` = (steps without fetch_done(), steady
    steps), or ``mean_step_ns`` when the steps were too short to read a
    share from (MIN_MEAN_STEP_NS)."""

    label: str
    share: Optional[float]
    unmarked: Optional[tuple] = None
    mean_step_ns: Optional[float] = None


# A probe step closed without fetch_done() is recorded with a zero input
# wait (it cannot be told from a batch that was ready).  When more than this
# share of the steady steps lack the mark, the input share would be read
# mostly from those made-up zeros (a user trial: a loop waiting 80% of its
# step read "COMPUTE-BOUND: 0.0%" with fetch_done() forgotten), so there is
# no diagnosis: NO-DATA, saying why.  Under it the misuse note stands.
PROBE_UNMARKED_MAX_SHARE = 0.5

# traceml's own timing cost per step, the upper end of what this project
# measured on its 2-core host (benchmarks/README.md): wrap adds 50-207 ns a
# step over a DataLoader, the probe triple about 80 ns.
TIMING_OWN_COST_NS = 200
# Under this mean step, that cost alone could move the input share across
# COMPUTE_BOUND_SHARE (200 ns / 5% = 4 us), so no share is read: NO-DATA,
# saying why.  A user trial: five empty probe steps (0.3 us each) read
# "INPUT-BOUND: input wait is 58% of step time".  Real training steps
# (tens of us and up) are far above it.
MIN_MEAN_STEP_NS = TIMING_OWN_COST_NS / COMPUTE_BOUND_SHARE


def unmarked_past_share(unmarked: Optional[tuple]) -> bool:
    """True when more than PROBE_UNMARKED_MAX_SHARE of the steady steps
    lack fetch_done() (``unmarked`` = (those steps, steady steps), or
    None): the input wait was not measured."""
    return bool(unmarked is not None and unmarked[1]
                and unmarked[0] > PROBE_UNMARKED_MAX_SHARE * unmarked[1])


def production_share(production: Optional[dict]) -> Optional[float]:
    """The share of step time the loop waited while the awaited worker was
    making batches, when the workers' own timing is available and met
    PRODUCTION_MIN_COVERAGE of the steady steps; else None."""
    if not production or not production.get("available"):
        return None
    if production.get("coverage", 0.0) < PRODUCTION_MIN_COVERAGE:
        return None
    return production.get("production_share")


def diagnose(input_share: Optional[float],
             production_share: Optional[float] = None,
             unmarked: Optional[tuple] = None,
             mean_step_ns: Optional[float] = None) -> Diagnosis:
    """(label, share) for the share of step time spent waiting for input:
    INPUT-BOUND at >= INPUT_BOUND_SHARE, COMPUTE-BOUND under
    COMPUTE_BOUND_SHARE, BALANCED between.

    ``input_share`` is total input wait / total step time over steady-state
    steps; None (no steps) gives NO-DATA.  ``production_share`` (see
    :func:`production_share`; None: unknown) is the part of it during
    which the awaited worker was making batches.  When it is known and
    under INPUT_BOUND_SHARE while the input share is not, the loop waits
    for batches already made (the data queue, unpickling, the shared-memory
    round trip, a main process waiting for a core): HAND-OVER, whose next
    step is not more workers.  Measured on this project's 2-core host
    under load: healthy in-memory loaders (benchmarks/bench_truth.py's two)
    waited 9-28% of an 8-10 ms step with 0-12% of it in production, while
    2 workers that could not keep up (20 ms batches against a 5 ms step)
    put 26-78% of the step in production; over bench_truth's 40 healthy
    runs beside a CPU hog, 1 read INPUT-BOUND with this rule (20 without).

    ``unmarked`` (probes only: (steady steps closed without fetch_done(),
    steady steps)) past PROBE_UNMARKED_MAX_SHARE gives NO-DATA: the input
    wait was not measured.  ``mean_step_ns`` (the steady steps' mean;
    None: not checked) under MIN_MEAN_STEP_NS gives NO-DATA too: the
    timing's own cost is a material part of such a step.
    """
    if input_share is None or not math.isfinite(input_share):
        return Diagnosis(NO_DATA, None)
    if unmarked_past_share(unmarked):
        return Diagnosis(NO_DATA, None, (int(unmarked[0]), int(unmarked[1])))
    if mean_step_ns is not None and mean_step_ns < MIN_MEAN_STEP_NS:
        return Diagnosis(NO_DATA, None, None, float(mean_step_ns))
    if input_share >= INPUT_BOUND_SHARE:
        if production_share is not None and production_share < INPUT_BOUND_SHARE:
            return Diagnosis(HAND_OVER, input_share)
        return Diagnosis(INPUT_BOUND, input_share)
    if input_share < COMPUTE_BOUND_SHARE:
        return Diagnosis(COMPUTE_BOUND, input_share)
    return Diagnosis(BALANCED, input_share)


# --- stall threshold ---------------------------------------------------------
# A stall must be material next to the step it delays: at least 20% of the
# median step (the same 20% that makes a run input-bound above) and at
# least 1 ms, about one scheduler tick (Linux HZ=1000; 4 ms at HZ=250), below
# which a wait cannot be told from the thread being descheduled.
STALL_FLOOR_S = 1e-3
STALL_FLOOR_STEP_SHARE = 0.20
# Every fetch is slow when even the 10th-percentile wait clears the floor.
ALL_SLOW_PERCENTILE = 10.0
# The large-wait percentile the threshold is a share of (below).
STALL_PERCENTILE = 95.0
# Otherwise a stall is a *large* wait: above 40% of the p95 wait.  Measured
# on this project's CPU-burning DataLoader runs (tests/test_dataloader.py):
# on a 2-core host with 4 workers, workers share the cores and finish in
# pairs, so waits inside a burst reach 20-30% of the burst's stall; 40% of
# p95 keeps those out with a margin, and keeps in the second stall of a
# pair, which reaches 45-60% of the first (the corpus's lock-step pairs,
# tests/corpus.py; half of p95 lost one in ten of them).
STALL_P95_SHARE = 0.4
# Otsu's separability eta (between-class share of the variance of
# log wait).  One Gaussian reaches at most 2/pi = 0.64 however it is split,
# so 0.8 asks for two clearly separate groups: "mostly fast, some stalled".
BIMODAL_MIN_ETA = 0.80
# eta is scale-free: a tight cluster of 20.1 ms fetches with a few 20.4 ms
# ones also splits cleanly.  Two groups only count as "fast" and "stalled"
# when their typical (geometric mean) waits differ at least 4-fold.
BIMODAL_MIN_RATIO = 4.0
# Without two such groups, a stall must stand apart from the typical
# steady fetch on its own: at least the same 4-fold, against the median
# wait.  (The floor alone sat at 1.7x the median wait of healthy loops.)
# The median is the lower median (lower_median): with 2 workers in
# lock-step half the fetches stall, and an interpolated median sits between
# the groups (measured: ~90 ms between 0.2-20 ms fetches and 130-280 ms
# stalls, whose Otsu eta of 0.76-0.79 misses the 0.8 above).
STALL_MIN_RATIO = BIMODAL_MIN_RATIO

# A stall must also matter to the step it delays: at least half a median
# step added to it.  On this VM healthy loops show scheduling blips of
# 2-10 ms under load against a 10 ms step (TRAPS.md: the first allocating
# call after a sleep, and run-queue waits), and a 4-worker loader of cheap
# items on 2 cores a 2-4 ms wait on a round's batches while a worker holds
# a core; 20% of the step (the floor) counted those as stalls in 9 and in
# 10 of 10 runs ("Diagnostic truth").  Half a step keeps most of them out;
# the ratio above and stalls_matter() below keep out the rest, so that no
# single constant has to.
STALL_MIN_STEP_SHARE = 0.5


def lower_median(x: np.ndarray) -> float:
    """The lower median of ``x`` (non-empty, integers): a value of ``x``
    that at least half its values do not exceed (never between two
    groups).  Integers by selection in C, without copying ``x``."""
    k = (len(x) - 1) // 2
    if not _is_int(x):
        return float(np.partition(x, k)[k])
    return float(_core.order_stats(x, np.array([k]))[0])


def _is_int(x) -> bool:
    return np.issubdtype(np.asarray(x).dtype, np.integer)


def int_median(x: np.ndarray) -> float:
    """``numpy.median`` of the integers ``x`` (non-empty), by selection in
    C without copying ``x``: the middle value, or the mean of the two
    middle values as float64 (as numpy.median computes it).  Also the
    median of ``x.astype(float64)``: the cast keeps the order.  Other
    dtypes: numpy.median itself."""
    if not _is_int(x):
        return float(np.median(x))
    n = len(x)
    if n % 2:
        return float(_core.order_stats(x, np.array([n // 2]))[0])
    a, b = _core.order_stats(x, np.array([n // 2 - 1, n // 2]))
    return (float(a) + float(b)) / 2.0


def bimodal_split_ns(wait_ns: np.ndarray) -> Optional[float]:
    """The Otsu split of log(wait) when the waits form two well-separated
    groups (eta >= 0.8 and geometric means >= 4x apart), else None."""
    split = _core.log_otsu(wait_ns)
    eta = split["eta"]
    if not math.isfinite(eta) or eta < BIMODAL_MIN_ETA:
        return None
    if split["upper_mean_ns"] < BIMODAL_MIN_RATIO * split["lower_mean_ns"]:
        return None
    return split["threshold_ns"]


# The stall rule's codes (StallRule.code); :mod:`traceml.wording` words them.
RULE_GIVEN = "given"            # the caller's threshold, absolute
RULE_NO_STEPS = "no_steps"      # no steady-state steps: STALL_FLOOR_S
RULE_FLOOR = "floor"            # the floor (below)
RULE_P95 = "p95"                # STALL_P95_SHARE of the p95 wait
RULE_OTSU = "otsu"              # the Otsu split of log(wait)
RULE_ALL_SLOW = "all_slow"      # every fetch slow, one group: the floor
RULE_ALL_SLOW_SPLIT = "all_slow_split"  # every fetch slow, large waits on top
RULE_STEP = "step"              # STALL_MIN_STEP_SHARE of the median step
RULE_RATIO = "ratio"            # STALL_MIN_RATIO times the median wait


class StallRule(NamedTuple):
    """What the stall threshold rule decided.

    ``code`` is one of the RULE_* codes; for RULE_ALL_SLOW_SPLIT, ``basis``
    names the candidate that set the threshold (RULE_STEP, RULE_P95 or
    RULE_OTSU).  ``floor_ns`` is max(STALL_FLOOR_S, STALL_FLOOR_STEP_SHARE
    of the median step) in ns, below which a wait is not material;
    ``all_slow`` says that even the p10 wait clears it (every fetch is slow, whether or not larger stalls stand out
    on top); ``given_s`` is the caller's threshold (s) for RULE_GIVEN;
    ``least_ns`` the least a stall adds to its step, max(floor,
    STALL_MIN_STEP_SHARE of the median step) (automatic rules only)."""

    threshold_ns: int
    code: str
    every_fetch_slow: bool
    floor_ns: float
    all_slow: bool = False
    given_s: Optional[float] = None
    basis: Optional[str] = None
    least_ns: Optional[float] = None


def stall_threshold_ns(
    wait_ns: np.ndarray, step_ns: np.ndarray, given_s: Optional[float]
) -> StallRule:
    """The stall threshold: a steady-state fetch is a stall when its input
    wait (ns, shape (steps,)) exceeds it.

    Given ``given_s`` (seconds), the threshold is that, absolute
    (``5`` reproduces the common "> 5 s stall" convention).  Otherwise:

    * floor = max(STALL_FLOOR_S, STALL_FLOOR_STEP_SHARE of the median step);
    * every fetch slow (p10 wait > floor) in one group: the floor, so every
      slow fetch is a stall;
    * else the largest of max(floor, STALL_MIN_STEP_SHARE of the median
      step), STALL_P95_SHARE of the p95 wait, and the Otsu split of
      log(wait) when the waits form two separate groups, or, when they do
      not, STALL_MIN_RATIO times the median wait (a stall stands apart
      from the typical fetch): this keeps the recurring large stalls of
      "mostly fast input with stalls" and leaves out both noise and the
      small waits inside a burst.  Whether the waits above it matter is
      :func:`stalls_matter`'s question.  The same holds when every fetch
      is slow but a separate group of large waits (at most half the
      fetches) stands out: those are the stalls.

    ``every_fetch_slow`` reports the second case (also when a given
    threshold is used: p10 wait above the threshold).
    """
    if len(wait_ns) == 0:
        floor = STALL_FLOOR_S * 1e9
        if given_s is not None:
            return StallRule(int(round(given_s * 1e9)), RULE_GIVEN, False, floor, given_s=given_s)
        return StallRule(int(floor), RULE_NO_STEPS, False, floor)
    p10, p95 = _core.percentiles(wait_ns, [ALL_SLOW_PERCENTILE, STALL_PERCENTILE])
    median_step = _core.percentiles(step_ns, 50.0)
    floor = max(STALL_FLOOR_S * 1e9, STALL_FLOOR_STEP_SHARE * median_step)
    if given_s is not None:
        threshold = int(round(given_s * 1e9))
        return StallRule(threshold, RULE_GIVEN, bool(p10 > threshold), floor,
                         bool(p10 > floor), given_s=given_s)
    every_slow = bool(p10 > floor)
    # A stall adds at least STALL_MIN_STEP_SHARE of a median step to the
    # step it delays (see there); this replaces the floor as a candidate.
    least = max(floor, STALL_MIN_STEP_SHARE * median_step)
    candidates = {RULE_STEP: least, RULE_P95: STALL_P95_SHARE * p95}
    if every_slow:
        # Every fetch is slow, yet a separate group of much larger waits on
        # top is still a set of stalls with a cadence of its own: one slow
        # sample every 10 batches must not read as "a stall every step".
        # The split looks at the slow fetches only: the few under the floor
        # (a batch already prefetched, microseconds) would form a third
        # group in log(wait) and hide the other two.
        split = bimodal_split_ns(wait_ns[wait_ns > floor])
    else:
        split = bimodal_split_ns(wait_ns)
    if split is not None:
        candidates[RULE_OTSU] = split
    elif not every_slow and not _stands_out(wait_ns, max(candidates.values())):
        # No two groups, and the waits past the other candidates do not
        # form a group of their own (at least MIN_GROUP_ON_TOP, at most
        # half the fetches, typically BIMODAL_MIN_RATIO times the rest): a
        # stall must stand apart from the typical fetch by itself,
        # STALL_MIN_RATIO times the (lower) median wait.
        candidates[RULE_RATIO] = STALL_MIN_RATIO * lower_median(wait_ns)
    basis = max(candidates, key=candidates.get)
    threshold = int(candidates[basis])
    if not every_slow:
        return StallRule(threshold, basis, False, floor, least_ns=least)
    if not _stands_out(wait_ns, threshold):
        return StallRule(int(floor), RULE_ALL_SLOW, True, floor, True, least_ns=least)
    return StallRule(threshold, RULE_ALL_SLOW_SPLIT, False, floor, True, basis=basis,
                     least_ns=least)


# A group of large waits on top of slow fetches needs at least two members:
# one long wait in a slow run is a hiccup (a preempted process, a GC
# pause), not a pattern.
MIN_GROUP_ON_TOP = 2


_LOG_CHUNK = 1 << 16


def _mean_log(x: np.ndarray) -> float:
    """The mean of log(max(x, 1)) as float64, numpy's own mean of that
    array, computed in ``x``'s memory (``x``: a fresh array, overwritten)
    so that 10M waits need no second 80 MB array.  max(float64(x), 1) is
    float64(max(x, 1)): the cast keeps the order and 1 is exact."""
    if not _is_int(x):
        return float(np.log(np.maximum(x, 1).astype(np.float64)).mean())
    x = np.ascontiguousarray(x, dtype=np.int64)
    f = x.view(np.float64)
    # In chunks: NumPy copies an overlapping operand, a chunk at a time here.
    for i in range(0, len(x), _LOG_CHUNK):
        np.maximum(x[i:i + _LOG_CHUNK], 1, out=f[i:i + _LOG_CHUNK], dtype=np.float64)
    np.log(f, out=f)
    return f.mean()


def _stands_out(wait_ns: np.ndarray, threshold: float) -> bool:
    """Whether the waits above ``threshold`` form a group of their own over
    fetches that are all slow: at least MIN_GROUP_ON_TOP of them, at most
    half the fetches, and their geometric mean at least BIMODAL_MIN_RATIO
    times that of the rest.  Otsu's eta is not required here: the slow
    fetches of a prefetching loader spread over decades (0.7-36 ms measured
    with one worker), which pulls eta under 0.8 although 200 ms stalls are
    20x the median."""
    above = wait_ns > threshold
    k = int(np.count_nonzero(above))
    if k < MIN_GROUP_ON_TOP or k > HEAVY_TAIL_MAX_STALL_SHARE * len(wait_ns):
        return False
    gap = _mean_log(wait_ns[above]) - _mean_log(wait_ns[~above])
    return bool(gap >= math.log(BIMODAL_MIN_RATIO))


# --- stalls that matter ---------------------------------------------------------
# Waits above the threshold are stalls only when they matter as a group:
# at least MIN_GROUP_ON_TOP of them (one long wait is a hiccup: a
# preempted process, a GC pause, never a pattern), and together costing
# at least STALL_MIN_COST_SHARE of the steady step time, their excess over
# the typical (median) fetch between them.  5% is the line below which
# TensorFlow's input-pipeline analyzer calls a step "not input-bound"
# (COMPUTE_BOUND_SHARE): input waits smaller than that are not worth an
# experiment.  Waits that stand apart but fail this are outliers: counted
# and shown, never a shape or a pattern.  A given threshold is the
# caller's, absolute; the all-slow rule (every fetch slow, each past the
# floor of 20% of the median step) matters by construction.
STALL_MIN_COST_SHARE = COMPUTE_BOUND_SHARE

STALLS_KEPT = "kept"            # the waits above the threshold are stalls
STALLS_LONE = "lone"            # fewer than MIN_GROUP_ON_TOP: outliers
STALLS_SMALL = "small"          # under STALL_MIN_COST_SHARE: outliers


class StallsMatter(NamedTuple):
    """Whether the waits above the threshold are stalls (``code`` one of
    STALLS_KEPT, STALLS_LONE, STALLS_SMALL) and their cost: the sum of their
    excess over the median calm wait, as a share of the steady step time
    (None without steps)."""

    code: str
    cost_share: Optional[float]


def stalls_matter(wait_ns: np.ndarray, step_ns: np.ndarray, above: np.ndarray,
                  rule_code: str) -> StallsMatter:
    """Whether the steady-state waits ``wait_ns`` flagged by ``above`` (the
    stall threshold's mask, same shape) are stalls or outliers, by the rule
    above.  ``step_ns`` are the steps' durations; ``rule_code`` the stall
    rule's code (RULE_GIVEN and RULE_ALL_SLOW keep every flagged wait)."""
    k = int(np.count_nonzero(above))
    total = float(np.sum(step_ns, dtype=np.float64))
    calm = wait_ns[~above]
    typical = int_median(calm) if len(calm) else 0.0
    del calm
    excess = np.maximum(wait_ns[above].astype(np.float64) - typical, 0.0)
    cost = float(excess.sum()) / total if total > 0 else None
    if k == 0 or rule_code in (RULE_GIVEN, RULE_ALL_SLOW):
        return StallsMatter(STALLS_KEPT, cost)
    if k < MIN_GROUP_ON_TOP:
        return StallsMatter(STALLS_LONE, cost)
    if cost is None or cost < STALL_MIN_COST_SHARE:
        return StallsMatter(STALLS_SMALL, cost)
    return StallsMatter(STALLS_KEPT, cost)


# --- shape ---------------------------------------------------------------------
# Shape tells "uniformly slow input" from "mostly fast input with large
# stalls"; two runs with the same mean wait can differ here and call for
# different experiments.
FAST = "FAST"
UNIFORMLY_SLOW = "UNIFORMLY-SLOW"
HEAVY_TAILED = "HEAVY-TAILED"


# More than this share of steps stalling is no longer "mostly fast".
HEAVY_TAIL_MAX_STALL_SHARE = 0.5


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
    if stall_count > HEAVY_TAIL_MAX_STALL_SHARE * steady_steps:
        return UNIFORMLY_SLOW, SHAPE_MOST_STALL
    if calm_wait_ns is not None and floor_ns is not None and calm_wait_ns > floor_ns:
        return UNIFORMLY_SLOW, SHAPE_SLOW_BETWEEN
    if median_wait_ns is not None and floor_ns is not None and median_wait_ns > floor_ns:
        return UNIFORMLY_SLOW, SHAPE_SLOW_MEDIAN
    return HEAVY_TAILED, SHAPE_HEAVY_TAIL


def concentration(wait_ns: np.ndarray, stall_mask: np.ndarray) -> dict:
    """{stall_step_share, stall_wait_share}: the share of steady-state steps
    that are stalls, and the share of their total input wait those stalls
    hold ("4% of steps hold 93% of the input wait").  None when empty."""
    n = len(wait_ns)
    total = int(_core.totals(wait_ns)["sum"]) if n else 0
    stalled = int(_core.totals(wait_ns[stall_mask])["sum"]) if n else 0
    return {
        "stall_step_share": float(stall_mask.sum()) / n if n else None,
        "stall_wait_share": stalled / total if total > 0 else None,
    }


# --- temporal structure -------------------------------------------------------
# PERIODIC needs evidence.  The modal gap between stalls must hold at least
# half of the gaps, be seen at least twice, be more common than any other
# gap and be more than 1 step (a gap of 1 is back-to-back stalls, never a
# period); and it must be unlikely under the null of random stalls at the
# same rate: with k stalls in n steady steps (p = k/n) the gaps are
# geometric, q_g = p (1 - p)^(g - 1), and the chance that some gap value
# g >= 2 occurs at least c times among the m gaps by luck is at most
# sum_g P(Binomial(m, q_g) >= c) (a union bound).  PERIODIC only when that
# p-value is below PERIOD_ALPHA.  Before this, three stalls with two equal
# gaps made a period, and random stalls (each step a stall with
# probability 0.25, 24 steps) were PERIODIC in 8 of 20 seeds.
# Fewer than PERIOD_MIN_GAPS gaps (3 stalls) are TOO-FEW; every steady
# fetch a stall is EVERY-FETCH, never "a period of 1".  As evidence the
# report adds the autocorrelation of steady-state input wait at the period.
PERIODIC = "PERIODIC"
IRREGULAR = "IRREGULAR"
EVERY_FETCH = "EVERY-FETCH"
TOO_FEW = "TOO-FEW"
PERIOD_MIN_GAPS = 2
PERIOD_MIN_SHARE = 0.5
PERIOD_MIN_REPEATS = 2
# The false-alarm rate a period is tested at: 1 in 100 runs of random
# stalls may read PERIODIC, at most (the union bound is conservative).
PERIOD_ALPHA = 0.01
# Gap values are summed one by one up to this; past it, in blocks growing
# by PERIOD_BLOCK_GROWTH, each bounded by its length times its first term
# (the null's gap probabilities only fall there), so that 10M-step runs stay
# fast and the p-value stays an upper bound.
PERIOD_EXACT_GAPS = 4096
PERIOD_BLOCK_GROWTH = 1.05


def burst_onsets(stall_mask: np.ndarray, epoch: np.ndarray) -> np.ndarray:
    """The first stall of each run of back-to-back stalls (same epoch)."""
    prev = np.r_[False, stall_mask[:-1]] & np.r_[False, epoch[1:] == epoch[:-1]]
    return stall_mask & ~prev


def _null_gap_prob(g, rate: float, bursts: bool) -> np.ndarray:
    """The chance that a gap is ``g`` steps under random stalls at ``rate``:
    between stalls, geometric; between the onsets of runs of back-to-back
    stalls, a run's length (geometric in 1 - rate) plus the calm run after
    it (geometric in rate)."""
    p = min(max(rate, 1e-12), 1 - 1e-12)
    g = np.asarray(g, dtype=np.float64)
    if not bursts:
        return p * (1 - p) ** (g - 1)
    a, b = p, 1 - p
    if abs(a - b) < 1e-9:
        return (g - 1) * a * b * a ** np.maximum(g - 2, 0)
    return a * b * (b ** (g - 1) - a ** (g - 1)) / (b - a)


def period_p_value(gaps: np.ndarray, stalls: int, steps: int, bursts: bool = False) -> float:
    """The chance, under random stalls at the rate ``stalls / steps``, that
    some gap value of at least 2 occurs among ``len(gaps)`` gaps at least
    as often as the modal gap does here (the union bound above; 1.0
    without gaps).  ``bursts``: the gaps are between onsets of runs of
    back-to-back stalls."""
    from scipy.stats import binom

    m = int(len(gaps))
    if m == 0 or steps <= 1:
        return 1.0
    c = int(np.max(np.unique(gaps, return_counts=True)[1]))
    rate = stalls / steps
    top = min(int(steps), PERIOD_EXACT_GAPS)
    g = np.arange(2, top + 1)
    total = float(binom.sf(c - 1, m, _null_gap_prob(g, rate, bursts)).sum())
    start = top + 1
    while start <= steps and total < 1.0:
        stop = min(int(steps), max(start, int(start * PERIOD_BLOCK_GROWTH)))
        first = float(binom.sf(c - 1, m, _null_gap_prob(start, rate, bursts)))
        total += (stop - start + 1) * first
        if (steps - stop) * first < 1e-12:
            break
        start = stop + 1
    return float(min(1.0, total))


def temporal_of(stall_mask: np.ndarray, epoch: np.ndarray,
                steady_wait_ns: np.ndarray, steady_steps: Optional[int] = None,
                every_fetch: bool = False) -> Optional[dict]:
    """Temporal structure of the stalls (see :func:`temporal`), counted per
    stall, or per burst when that alone shows a period; None without
    stalls.

    ``steady_steps`` is how many steady-state steps the stalls fell among
    (default: the length of ``steady_wait_ns``); ``every_fetch`` says the
    stall rule found every fetch slow.  Every steady fetch a stall (or
    ``every_fetch``) is EVERY-FETCH; fewer than PERIOD_MIN_GAPS gaps
    TOO-FEW.  On a crowded host the workers of one round can finish in
    pairs, so that one stall becomes two back-to-back ones and the gaps
    read 1, 3, 1, 3 instead of 4, 4.  When the per-stall gaps show no
    period but runs of back-to-back stalls exist, the gaps between the
    first stalls of each run are tried, under the same null test;
    ``counted`` says which was used.
    """
    n = len(steady_wait_ns) if steady_steps is None else int(steady_steps)
    k = int(np.count_nonzero(stall_mask))
    if k == 0:
        return None
    gaps = _core.stall_gaps(stall_mask, epoch)
    if every_fetch or k >= n:
        return {**_label_only(EVERY_FETCH, gaps), "counted": "stalls"}
    per_stall = temporal(gaps, steady_wait_ns, stalls=k, steps=n)
    if per_stall["label"] == PERIODIC:
        return {**per_stall, "counted": "stalls"}
    onsets = burst_onsets(stall_mask, epoch)
    if per_stall["label"] != TOO_FEW and onsets.sum() < k:
        per_burst = temporal(_core.stall_gaps(onsets, epoch), steady_wait_ns,
                             stalls=k, steps=n, bursts=True)
        if per_burst["label"] == PERIODIC:
            return {**per_burst, "counted": "bursts"}
    return {**per_stall, "counted": "stalls"}


def _label_only(label: str, gaps: np.ndarray) -> dict:
    """A temporal answer with no period tested (EVERY-FETCH, TOO-FEW)."""
    modal = _core.modal_gap(gaps) if len(gaps) else None
    return {"label": label, "period": None, "p_value": None,
            "modal_gap": None if modal is None else int(modal), "modal_share": None,
            "multiple_fraction": None, "autocorrelation": None, "gaps": int(len(gaps))}


def temporal(gaps: np.ndarray, steady_wait_ns: np.ndarray, stalls: Optional[int] = None,
             steps: Optional[int] = None, bursts: bool = False) -> dict:
    """{label, period, p_value, modal_gap, modal_share, multiple_fraction,
    autocorrelation, gaps}: PERIODIC, IRREGULAR or, with fewer than
    PERIOD_MIN_GAPS gaps, TOO-FEW.  ``period`` is the modal gap in steps
    (None unless PERIODIC); ``p_value`` the null test's
    (:func:`period_p_value`; None for TOO-FEW) over ``stalls`` stalls in
    ``steps`` steady steps (default: len(gaps) + 1 stalls among
    len(steady_wait_ns) steps); ``multiple_fraction`` the share of gaps
    that are multiples of the modal gap (a missed stall doubles a gap)."""
    if len(gaps) < PERIOD_MIN_GAPS:
        return _label_only(TOO_FEW, gaps)
    values, counts = _core.gap_histogram(gaps)
    modal = int(_core.modal_gap(gaps))
    modal_count = int(counts[values == modal][0])
    share = float(modal_count) / len(gaps)
    match = _core.cadence_match(gaps, modal)
    runner_up = int(np.sort(counts)[-2]) if len(counts) > 1 else 0
    k = len(gaps) + 1 if stalls is None else int(stalls)
    n = len(steady_wait_ns) if steps is None else int(steps)
    p_value = period_p_value(gaps, k, n, bursts)
    periodic = (modal > 1 and share >= PERIOD_MIN_SHARE
                and modal_count >= PERIOD_MIN_REPEATS and modal_count > runner_up
                and p_value < PERIOD_ALPHA)
    ac = _core.autocorr(steady_wait_ns, modal) if modal < len(steady_wait_ns) else float("nan")
    return {
        "label": PERIODIC if periodic else IRREGULAR,
        "period": modal if periodic else None,
        "p_value": p_value,
        "modal_gap": modal,
        "modal_share": share,
        "multiple_fraction": match["multiple_fraction"],
        "autocorrelation": None if math.isnan(ac) else ac,
        "gaps": int(len(gaps)),
    }


# --- epoch start ------------------------------------------------------------
# Each DataLoader worker's first batch of an epoch carries that worker's
# start-up (process start, dataset copy, worker_init_fn): the first
# max(1, num_workers) fetches of an epoch are start-up, not steady state.
# For other iterables only the first fetch (which holds iter()) is.


def epoch_start_mask(position: np.ndarray, workers_per_step: np.ndarray) -> np.ndarray:
    """True where a step's position in its epoch (0-based; recorded by the
    wrap iterator, so a reset() mid-epoch does not shift it) is below
    ``workers_per_step`` (shapes (steps,)); see the rule above."""
    return np.asarray(position) < np.asarray(workers_per_step)


# --- trend ---------------------------------------------------------------------
# A wait that grows (or shrinks) steadily over the run is state that
# changes per step (a cache or list kept in the dataset, a leak,
# fragmentation), which more workers would only hide.  RISING / FALLING
# when both hold:
# * Kendall's rank test of the steady waits against step index, over block
#   medians (at most TREND_BLOCKS blocks, so 10M steps stay fast and one
#   stall cannot drive it), is significant at TREND_ALPHA (the same 1 in
#   100 false-alarm rate as a period), with Theil-Sen's robust slope;
# * the change is material: the median of the last tenth of the steady
#   waits and that of the first tenth are at least TREND_MIN_RATIO apart,
#   and they differ by more than the floor (max(1 ms, 20% of the median
#   step)), below which a wait does not matter to the step, and by at
#   least TREND_MIN_WAIT_SHARE of the mean steady wait: a drift that
#   moves the wait by less than half its mean is not what the loop waits
#   on (a user trial's loader with one slow sample in 5 and a constant
#   cost per item read "FALLING 4.15 ms -> 1.03 ms ... a warm-up" beside
#   stalls that made a 30.7 ms mean wait).
# With at least TREND_MIN_EPOCHS epochs whose median steady waits move
# monotonically, the Theil-Sen slope over epochs is given too.
RISING = "RISING"
FALLING = "FALLING"
TREND_BLOCKS = 200
TREND_ALPHA = 0.01
TREND_MIN_RATIO = 2.0
TREND_TENTH = 0.1
TREND_MIN_EPOCHS = 3
TREND_MIN_WAIT_SHARE = 0.5


def _block_medians(x: np.ndarray, blocks: int) -> tuple[np.ndarray, np.ndarray]:
    """(centre index, median) of ``blocks`` contiguous blocks of n // blocks
    steps of the integers ``x``, the last one holding the remainder too
    (numpy.median's values, by selection in C: no copy of ``x``)."""
    n = len(x)
    size = n // blocks
    if size == 1 and n == blocks:
        return np.arange(n, dtype=np.float64), x.astype(np.float64)
    head = (blocks - 1) * size
    med = np.empty(blocks)
    for b in range(blocks - 1):
        med[b] = int_median(x[b * size:(b + 1) * size])
    med[-1] = int_median(x[head:])
    centre = np.r_[np.arange(blocks - 1) * size + (size - 1) / 2.0, (head + n - 1) / 2.0]
    return centre, med


def trend(wait_ns: np.ndarray, epoch: np.ndarray, floor_ns: float) -> Optional[dict]:
    """{label, slope_ms_per_step, slope_ms_per_epoch, first_tenth_median_s,
    last_tenth_median_s, tau, p_value} of the steady-state waits ``wait_ns``
    (in step order, with their ``epoch``) by the rule above, or None (no
    trend, or fewer than MIN_STEADY_STEPS steps).  ``floor_ns`` is the
    stall rule's floor (ns)."""
    n = len(wait_ns)
    if n < MIN_STEADY_STEPS:
        return None
    from scipy.stats import kendalltau, theilslopes

    # Medians by selection over the integer waits: the same values as over
    # wait_ns.astype(float64) (the cast keeps the order), without a copy.
    x = np.ascontiguousarray(wait_ns) if _is_int(wait_ns) else wait_ns.astype(np.float64)
    centre, med = _block_medians(x, min(TREND_BLOCKS, n))
    if np.ptp(med) == 0:
        return None
    tau, p_value = kendalltau(centre, med)
    if not math.isfinite(p_value) or p_value >= TREND_ALPHA:
        return None
    tenth = max(1, int(round(TREND_TENTH * n)))
    first, last = int_median(x[:tenth]), int_median(x[-tenth:])
    lo, hi = sorted((first, last))
    if hi < TREND_MIN_RATIO * max(lo, 1.0) or hi - lo <= floor_ns:
        return None
    if hi - lo < TREND_MIN_WAIT_SHARE * float(np.mean(x)):
        return None
    label = RISING if last > first else FALLING
    slope = float(theilslopes(med, centre)[0])
    if (slope > 0) != (label == RISING):
        return None
    per_epoch = None
    epochs = np.unique(epoch)
    if len(epochs) >= TREND_MIN_EPOCHS:
        order = np.argsort(epoch, kind="stable")
        bounds = np.searchsorted(epoch[order], epochs[1:])
        meds = np.array([np.median(part) for part in
                         np.split(x.astype(np.float64)[order], bounds)])
        step = np.diff(meds)
        if (step > 0).all() or (step < 0).all():
            per_epoch = float(theilslopes(meds, np.arange(len(meds)))[0]) * 1e-6
    return {"label": label, "slope_ms_per_step": slope * 1e-6,
            "slope_ms_per_epoch": per_epoch,
            "first_tenth_median_s": first * 1e-9, "last_tenth_median_s": last * 1e-9,
            "tau": float(tau), "p_value": float(p_value)}


# --- headline -----------------------------------------------------------------
# What holds the run's wall time, over the whole run rather than steady
# state alone.  STUCK: a fetch is stuck now, or one waited at least the
# stuck watch's stuck_after_s (configure(); its default lives in
# csrc/sampler.c).  EPOCH-START: the epoch starts (the first
# max(1, num_workers) fetches of each epoch: iter(), worker start-up) hold
# more than EPOCH_START_MAX_SHARE of the wall time, or at least
# INPUT_BOUND_SHARE of it (TensorFlow's "highly input-bound" line, taken
# for the wall time) while costing more than the steady input wait.
# STEADY otherwise: the diagnosis of the steady state speaks for the run.
EPOCH_START = "EPOCH-START"
STUCK = "STUCK"
STEADY = "STEADY"
EPOCH_START_MAX_SHARE = 0.5

HEADLINE_STUCK_NOW = "stuck_now"          # a stuck event still waiting
HEADLINE_STUCK_WAITED = "stuck_waited"    # a recorded fetch waited past stuck_after_s
HEADLINE_MOST_WALL = "most_wall"          # epoch starts > EPOCH_START_MAX_SHARE of wall
HEADLINE_OVER_STEADY = "over_steady"      # >= INPUT_BOUND_SHARE and > steady input wait
HEADLINE_STEADY = "steady"


class Headline(NamedTuple):
    """The headline label, the rule's code (HEADLINE_*) and the epoch
    starts' share of the wall time (None without wall time)."""

    label: str
    code: str
    epoch_start_share: Optional[float]


def headline(wall_s: float, epoch_start_s: float, steady_wait_s: float,
             stuck_now: bool, longest_wait_s: Optional[float],
             stuck_after_s: Optional[float]) -> Headline:
    """The headline by the rule above: ``epoch_start_s`` is the input wait
    of every epoch's start-up fetches, ``steady_wait_s`` that of the
    steady-state ones, ``longest_wait_s`` the longest recorded fetch."""
    share = epoch_start_s / wall_s if wall_s > 0 else None
    if stuck_now:
        return Headline(STUCK, HEADLINE_STUCK_NOW, share)
    if (longest_wait_s is not None and stuck_after_s is not None and stuck_after_s > 0
            and longest_wait_s >= stuck_after_s):
        return Headline(STUCK, HEADLINE_STUCK_WAITED, share)
    if share is not None and share > EPOCH_START_MAX_SHARE:
        return Headline(EPOCH_START, HEADLINE_MOST_WALL, share)
    if share is not None and share >= INPUT_BOUND_SHARE and epoch_start_s > steady_wait_s:
        return Headline(EPOCH_START, HEADLINE_OVER_STEADY, share)
    return Headline(STEADY, HEADLINE_STEADY, share)


# --- cadence -----------------------------------------------------------------
# A DataLoader with num_workers = k hands batches out round-robin, k in
# flight at once; when input-bound the k workers finish together and the
# loop stalls once per k steps.  num_workers = 0 loads in the main process,
# which behaves as one worker.


def effective_workers(num_workers: Optional[int]) -> Optional[int]:
    """Loaders in flight: num_workers, or 1 for num_workers = 0."""
    if num_workers is None:
        return None
    return max(int(num_workers), 1)


def cadence(gaps: np.ndarray, period: Optional[int], num_workers: Optional[int]) -> dict:
    """period (from :func:`temporal`), num_workers, matches_num_workers
    (period == max(1, num_workers)) and multiple_fraction (share of gaps
    that are multiples of max(1, num_workers)); None where unknown."""
    k = effective_workers(num_workers)
    out = {
        "period": period,
        "num_workers": num_workers,
        "matches_num_workers": None,
        "multiple_fraction": None,
    }
    if k is not None and len(gaps):
        out["multiple_fraction"] = _core.cadence_match(gaps, k)["multiple_fraction"]
        out["matches_num_workers"] = period is not None and period == k
    return out


# --- what next -------------------------------------------------------------------


# Below this many steady-state steps no shape or next step is claimed.
MIN_STEADY_STEPS = 8


# The workers keep the usable CPUs saturated during stalls when their own
# CPU time covers at least this share of every usable CPU: no core is left
# for more workers, so "add workers" cannot help there.
CPU_SATURATED_SHARE = 0.9


def next_steps(s: dict) -> list[tuple[str, dict]]:
    """What the evidence of a report summary ``s`` says and which cheap
    experiment discriminates next, as (code, numbers) items, following
    headline (stuck fetch, epoch starts) -> INPUT-BOUND -> trend -> shape
    -> temporal structure -> vary num_workers -> compare in_order ->
    worker CPU versus storage reads.  An item is only given when the
    numbers it quotes are present, and advice is only given where it can
    work (no in_order with fewer than 2 workers, no "more workers" when
    the workers already saturate the CPUs, none while the wait trends);
    :func:`traceml.wording.next_steps` words them (durations in seconds,
    shares as fractions)."""
    diag = s["diagnosis"]
    if diag == NO_DATA:
        return [("no_data", {})]
    lead = _headline_steps(s)
    if s["steady_steps"] < MIN_STEADY_STEPS:
        return lead + [("too_few_steps", {"steps": s["steady_steps"],
                                          "least": MIN_STEADY_STEPS})]
    return lead + _steady_steps(s, bool(lead))


def _headline_steps(s: dict) -> list[tuple[str, dict]]:
    """The first next step when something other than the steady state holds
    the run's wall time: a stuck fetch, or the epoch starts."""
    head = s.get("headline")
    if not head or head["label"] == STEADY:
        return []
    if head["label"] == STUCK:
        return [("stuck", {"now": head["code"] == HEADLINE_STUCK_NOW,
                           "waited_s": head["longest_wait_s"],
                           "stuck_after_s": head["stuck_after_s"]})]
    loader = s.get("loader") or {}
    nw = loader.get("num_workers")
    per_epoch = head["epoch_start_s_per_epoch"]
    return [("epoch_start", {
        "share": head["epoch_start_share"], "epochs": len(per_epoch),
        "mean_s": sum(per_epoch) / len(per_epoch) if per_epoch else None,
        "num_workers": nw,
        "recreated": (None if not nw else not loader.get("persistent_workers")),
    })]


def _workers_saturate_cpus(s: dict) -> Optional[dict]:
    """{cores, cpus} when the worker counters show the workers' CPU time
    covering CPU_SATURATED_SHARE of every usable CPU during stalls (or
    during the rest, without stalls); None otherwise or unknown."""
    host = s.get("host") or {}
    cpus = host.get("usable_cpus")
    iv = ((s.get("workers") or {}).get("intervals")) or {}
    if not cpus:
        return None
    for kind in ("slow", "fast"):
        part = iv.get(kind) or {}
        cores = part.get("worker_cores_busy")
        if part.get("count") and cores is not None:
            return ({"cores": cores, "cpus": cpus}
                    if cores >= CPU_SATURATED_SHARE * cpus else None)
    return None


def _more_workers(s: dict, nw: Optional[int]) -> tuple[str, dict]:
    """The "vary num_workers" experiment, where it can work."""
    if nw == 0:
        return ("try_workers", {})
    if nw is None:
        return ("wrap_and_sweep", {})
    saturated = _workers_saturate_cpus(s)
    if saturated is not None:
        return ("cpus_saturated", {**saturated, "num_workers": nw})
    return ("vary_workers_around", {"num_workers": nw})


def _steady_steps(s: dict, after_headline: bool) -> list[tuple[str, dict]]:
    """The next steps of the steady state (see :func:`next_steps`)."""
    out: list[tuple[str, dict]] = []
    diag = s["diagnosis"]
    share = s["input_share"]
    shp = s["shape"]
    conc = s["concentration"]
    tmp = s["temporal"]
    loader = s["loader"]
    nw = loader.get("num_workers") if loader else None
    wait = s["input_wait_s"]
    st = s["stalls"]
    if diag == COMPUTE_BOUND:
        gpu_said = (s.get("gpu") or {}).get("rule") in (GPU_DID_NOT_WAIT, GPU_DIFFERS)
        out.append(("compute_bound", {"share": s["gpu"]["gpu_share"] if gpu_said else share,
                                      "steady_only": after_headline, "gpu": gpu_said}))
        if shp == HEAVY_TAILED and conc["stall_wait_share"] is not None:
            out.append(("compute_bound_stalls", {"step_share": conc["stall_step_share"],
                                                 "wait_share": conc["stall_wait_share"]}))
        return out
    trend_ = s.get("trend")
    if trend_ is not None:
        out.append(("trend", {k: trend_[k] for k in (
            "label", "slope_ms_per_step", "slope_ms_per_epoch", "first_tenth_median_s",
            "last_tenth_median_s")}))
        out.append(("trend_next", {"label": trend_["label"]}))
        return out
    if diag == HAND_OVER:
        prod = s.get("production") or {}
        out.append(("hand_over", {
            "share": share, "production_share": prod.get("production_share"),
            "busy_share": prod.get("busy_share"),
            "ready_before_fetch": prod.get("ready_before_fetch"),
            "median_s": wait["median"], "num_workers": nw}))
        return out
    stuck = (s.get("headline") or {}).get("label") == STUCK
    if st.get("outliers") and not st["count"] and not stuck:
        out.append(("outliers", {"count": st["outliers"], "max_s": st["outlier_max_s"],
                                 "cost_share": st["cost_share"], "median_s": wait["median"]}))
    if shp == UNIFORMLY_SLOW:
        count = st["count"]
        on_top = (0 < count <= HEAVY_TAIL_MAX_STALL_SHARE * s["steady_steps"]
                  and count < st.get("slow_count", s["steady_steps"]))
        step_median = s["step_s"]["median"]
        out.append(("uniformly_slow", {
            "every": st.get("all_slow", True),
            "median_s": wait["median"],
            "step_share": wait["median"] / step_median if step_median else None,
            "on_top": on_top,
        }))
        periodic = tmp is not None and tmp["label"] == PERIODIC
        if on_top and periodic:
            out.append(("periodic_on_top", {"period": tmp["period"], "num_workers": nw}))
        elif on_top:
            out.append(("stalls_on_top", {"count": count,
                                          "pattern_known": tmp is not None
                                          and tmp["label"] != TOO_FEW}))
        elif periodic:
            out.append(("periodic_slow", {"period": tmp["period"], "num_workers": nw}))
        out.append(_more_workers(s, nw))
        return out
    if shp == FAST:
        if st.get("outliers"):
            return out
        out.append(("spread_wait", {"share": share, "median_s": wait["median"]}))
        out.append(("vary_workers_or_prefetch", {}))
        return out
    # HEAVY-TAILED: mostly fast input with large stalls.
    out.append(("heavy_tailed", {"step_share": conc["stall_step_share"],
                                 "wait_share": conc["stall_wait_share"],
                                 "calm_median_s": st.get("calm_median_s"),
                                 "stall_median_s": st.get("stall_median_s")}))
    if tmp is None or tmp["label"] == TOO_FEW:
        out.append(("too_few_stalls", {"count": st["count"]}))
        return out
    dlv = s.get("delivery")
    if loader and loader.get("in_order") is False and dlv and dlv["known"]:
        if (dlv["overtaking"] and tmp["label"] == PERIODIC
                and tmp["period"] == effective_workers(nw)):
            out.append(("overtaking_round", {"overtaking": dlv["overtaking"],
                                             "period": tmp["period"]}))
            return out
        if dlv["overtaking"]:
            out.append(("overtaking", {"overtaking": dlv["overtaking"]}))
    if tmp["label"] == PERIODIC:
        p = tmp["period"]
        k = effective_workers(nw)
        if k is not None and p == k:
            out.append(("lockstep", {"period": p, "num_workers": nw}))
            out.append(("vary_workers_then_in_order", {"grid": sweep_grid(nw)}))
        elif k is not None:
            out.append(("period_not_workers", {"period": p, "num_workers": nw}))
            out.append(("confirm_period", {"period": p}))
        else:
            out.append(("period", {"period": p}))
            out.append(("wrap_to_compare_period", {"period": p}))
        return out
    out.append(("irregular", {"modal_gap": tmp["modal_gap"], "modal_share": tmp["modal_share"]}))
    if nw is not None and effective_workers(nw) < 2:
        # One loader in flight: no batch can overtake another, and torch
        # ignores in_order at num_workers=0.
        out.append(("slow_samples_one_loader", {"num_workers": nw}))
    else:
        out.append(("compare_in_order", {}))
    return out


# --- worker evidence -----------------------------------------------------------------
# During a stall, workers count as busy when they are runnable -- on a CPU
# or waiting in the run queue for one -- for at least half of the CPUs
# they could use (min(num_workers, usable CPUs)).  Counting run-queue wait
# keeps CPU-bound workers on an oversubscribed host from looking idle.
BUSY_SHARE = 0.5
# Run-queue wait counts as contention when, on average, at least half a
# worker was runnable but not running during stalls.
CONTENTION_RUNQ_PER_WALL = 0.5
# Reads below these rates during stalls are a trace (a page of a module, a
# log line, one fault), not a storage bottleneck: a loader held up by storage
# moves tens of MB/s or more.  1 MB/s is 256 pages of 4 KiB a second.
MIN_STALL_READ_BYTES_PER_S = 1e6
MIN_STALL_MAJOR_FAULTS_PER_S = 10.0
# Sampler readings kept around a report's steps: two sampler periods on
# either side, so that the counters at the first and last step's edges
# can be interpolated.
SAMPLE_MARGIN_PERIODS = 2

# --- sampler defaults ------------------------------------------------------------------
# traceml.configure()'s defaults live in csrc/sampler.c (tm_sampler_init),
# with their reasons: the sampler holds them before any Python runs, and one
# copy cannot drift from another.

# --- stall threshold argument ------------------------------------------------------------
# Thresholds are compared in int64 nanoseconds, which end near 9.2e9 s.
MAX_THRESHOLD_S = 9e9

# --- compare ---------------------------------------------------------------------------
# A change in mean input wait per step counts only when it exceeds both:
# 10% of the baseline's mean input wait (mean fetch time moves by several
# percent between identical runs on a shared machine), and 2% of the
# baseline's mean step (below that, input wait cannot move training
# throughput by more than 2%).
REL_TOL = 0.10
STEP_TOL = 0.02

IMPROVEMENT = "IMPROVEMENT"
REGRESSION = "REGRESSION"
EQUIVALENT = "EQUIVALENT"
# The baseline or the run has no steady-state step (nothing recorded, or
# only epoch-start fetches), so there is no mean wait to compare: NO_DATA,
# neither better, worse nor equal.


class Verdict(NamedTuple):
    """A run's mean fetch (s) against the baseline's: IMPROVEMENT,
    REGRESSION, EQUIVALENT, or NO_DATA where either mean is None
    (``missing`` then says "both", "baseline" or "run")."""

    label: str
    base_s: Optional[float] = None
    run_s: Optional[float] = None
    tolerance_s: Optional[float] = None
    missing: Optional[str] = None


def compare_means(base_s: Optional[float], run_s: Optional[float],
                  base_step_s: Optional[float]) -> Verdict:
    """The verdict on mean input wait per steady-state step: a difference
    counts beyond max(REL_TOL of the baseline's mean wait, STEP_TOL of its
    mean step ``base_step_s``)."""
    if base_s is None or run_s is None:
        missing = ("both" if base_s is None and run_s is None
                   else "baseline" if base_s is None else "run")
        return Verdict(NO_DATA, base_s, run_s, missing=missing)
    tol = max(REL_TOL * base_s, STEP_TOL * (base_step_s or 0.0))
    delta = run_s - base_s
    if abs(delta) <= tol:
        return Verdict(EQUIVALENT, base_s, run_s, tol)
    return Verdict(IMPROVEMENT if delta < 0 else REGRESSION, base_s, run_s, tol)


# --- sweep -------------------------------------------------------------------------------
# A condition's median stall gap counts as its observed cadence only with
# at least 3 stalls (2 gaps), the least PERIODIC needs (PERIOD_MIN_GAPS).
MIN_STALLS_FOR_CADENCE = PERIOD_MIN_GAPS + 1
# "The period follows num_workers" (period == max(1, num_workers) in every
# row with a period) needs rows with a period at 3 or more distinct
# num_workers: any two points lie on a line (Pearson r = +-1 by
# construction), so two values cannot contradict the rule; a third is the
# least that can.  Below that the sweep says it is too few to tell, and
# prints no r.  Rows without a period (too few stalls, IRREGULAR, or a
# stall on every fetch, EVERY-FETCH, which any input-bound loader shows at
# num_workers 0 or 1) are left out and named.
SWEEP_MIN_DISTINCT_WORKERS = 3


def sweep_grid(num_workers: Optional[int]) -> tuple[int, ...]:
    """The num_workers a next step suggests sweeping to see whether a stall
    period follows them: the run's own, 4, 3, 2 and 1, descending.  Rows
    at 2 or more workers can show a period, so the grid holds at least
    SWEEP_MIN_DISTINCT_WORKERS of them; 1 shows EVERY-FETCH when the
    workers are the limit, and 0 (loading in the loop's process) says
    nothing about the workers' cadence."""
    return tuple(sorted({int(num_workers or 0), 4, 3, 2, 1} - {0}, reverse=True))

SWEEP_KEEP_FEWEST = "keep_fewest"      # fewer workers wait within REL_TOL of the best
SWEEP_KEEP_BEST = "keep_best"          # the best leads beyond REL_TOL and the order effect
SWEEP_UNDECIDED = "undecided"          # its lead is within the order effect
SWEEP_MORE_WORKERS = "more_workers"    # still input-bound, and best at the most workers
SWEEP_STILL_INPUT = "still_input"      # still input-bound at the best condition


def sweep_next(conds: list[dict], order_spread_s: Optional[float]) -> list[tuple[str, dict]]:
    """The next step a sweep's numbers support, as (code, numbers) items.

    ``conds``: one dict per condition, {name, workers (the loader's
    num_workers, None unknown), mean_s (mean input wait per step over its
    rows), input_share (mean over its rows)}; ``order_spread_s``: the
    largest |forward - backward| mean wait among the conditions whose
    order effect differs beyond compare's tolerance (None: none differs).

    Rules: the conditions within REL_TOL (compare's tolerance) of the
    lowest mean wait do not differ; among them the one with the fewest
    workers is kept (workers cost memory and cores), "more workers did not
    help" (SWEEP_KEEP_FEWEST).  Otherwise the best is kept when its lead
    over the runner-up exceeds the order effect (SWEEP_KEEP_BEST), else
    the sweep is repeated (SWEEP_UNDECIDED: passes=2).  When the kept
    condition's input share is still at least INPUT_BOUND_SHARE: if it has
    the most workers of the sweep and led beyond tolerance, more workers
    may help further (SWEEP_MORE_WORKERS), else no condition of the sweep
    removes the wait (SWEEP_STILL_INPUT).  [] with fewer than 2
    conditions."""
    conds = [c for c in conds if c.get("mean_s") is not None]
    if len(conds) < 2:
        return []
    ranked = sorted(conds, key=lambda c: c["mean_s"])
    best = ranked[0]
    close = [c for c in ranked if c["mean_s"] <= best["mean_s"] * (1 + REL_TOL)]
    with_workers = [c for c in close if c.get("workers") is not None]
    fewest = (min(with_workers, key=lambda c: (c["workers"], c["mean_s"]))
              if with_workers else best)
    out: list[tuple[str, dict]] = []
    led = False
    runner = next((c for c in ranked[1:] if c not in close), None)
    if fewest is not best or runner is None:
        # No real difference among ``close``: keep the fewest workers.
        keep = fewest
        others = [c for c in close if c is not keep]
        out.append((SWEEP_KEEP_FEWEST, {
            "keep": keep["name"], "keep_mean_s": keep["mean_s"],
            "best": best["name"], "best_mean_s": best["mean_s"],
            "others": [c["name"] for c in others], "tolerance": REL_TOL,
            "fewer_workers": bool(others) and keep.get("workers") is not None and all(
                c.get("workers") is not None and c["workers"] > keep["workers"]
                for c in others)}))
    else:
        keep = best
        lead = runner["mean_s"] - best["mean_s"]
        params = {"best": best["name"], "best_mean_s": best["mean_s"],
                  "runner": runner["name"], "runner_mean_s": runner["mean_s"],
                  "lead_s": lead, "order_spread_s": order_spread_s}
        if order_spread_s is not None and lead <= order_spread_s:
            out.append((SWEEP_UNDECIDED, params))
            return out
        out.append((SWEEP_KEEP_BEST, params))
        led = True
    share = keep.get("input_share")
    if share is not None and share >= INPUT_BOUND_SHARE:
        most = max((c["workers"] for c in conds if c.get("workers") is not None), default=None)
        if led and keep.get("workers") is not None and keep["workers"] == most:
            out.append((SWEEP_MORE_WORKERS, {"keep": keep["name"], "share": share,
                                             "workers": keep["workers"]}))
        else:
            out.append((SWEEP_STILL_INPUT, {"keep": keep["name"], "share": share}))
    return out


# --- attribution: which worker, the round, or the sample -------------------------------
# From the delivery record (the worker that produced each stalled batch, its
# rank in the sampler order) and the per-worker CPU ticks of the sampler
# (utime + stime of /proc/PID/stat: every thread of the worker).
ONE_WORKER = "ONE-WORKER"
LOCK_STEP = "LOCK-STEP"
SLOW_SAMPLE = "SLOW-SAMPLE"
# An attribution rests on at least as many stalls as a period does.
ATTR_MIN_STALLS = PERIOD_MIN_GAPS + 1
# "Nearly all" known stalls on one worker, or on one rank residue: 90%.
# Measured: a slow IterableDataset shard put 26 of 26, 35 of 35 and 29 of 29
# stalls on its worker (4 workers burning 60 ms against 10 ms; 3 workers, one
# sleeping 60 ms); a slow sample every 3rd index put 17 of 17 on rank % 3 == 1.
ATTR_SHARE = 0.90
# "Most" of that worker's batches stall: more than half.  Measured 67%, 90%
# and 74% in the three slow-shard runs above (the threshold at half the p95
# misses a few); a slow sample every 2 * num_workers indices stalls exactly
# half of one worker's batches, which must not read as a slow worker.
ONE_WORKER_OWN_SHARE = 0.5
# "Few" of the other workers' batches stall: at most 10% (0% measured).
ONE_WORKER_OTHERS_SHARE = 0.10
# Worker k counts as busier when its CPU ticks over the run reach 1.5x the
# other workers' median (measured: 248 against 46 for a shard burning 6x the
# CPU; 104-105 for all four workers of a lock-step run), and as less busy
# below 1/1.5 of it (6 against 26 for a shard that sleeps).
BUSIER_RATIO = 1.5
# Below 10 clock ticks (0.1 s at 100 Hz) one tick of jitter is 10% or more:
# the readings cannot tell busier from not.
CPU_MIN_TICKS = 10
# In lock-step with in-order round-robin delivery the stall lands on the first
# batch of each round: rank % num_workers == 0, worker 0 (measured: 9 of 9
# stalls on worker 0 with 4 workers started together).  Free-running
# lock-step workers drift, though: 8 of 8 stalls landed on worker 3 in a run
# with equal CPU (83-84 ticks each), so position alone never names a worker
# when the readings show the workers equally busy or are missing.
ROUND_OPENER = 0


def cpu_ratio(ticks: Optional[dict], worker: int) -> Optional[float]:
    """Worker ``worker``'s CPU ticks over the other workers' median; None
    without readings of it and at least one other, or when both sides stay
    under CPU_MIN_TICKS."""
    if not ticks or worker not in ticks or len(ticks) < 2:
        return None
    others = [v for w, v in ticks.items() if w != worker]
    median = float(np.median(others))
    if max(ticks[worker], median) < CPU_MIN_TICKS:
        return None
    return float("inf") if median <= 0 else ticks[worker] / median


# Without a period in the stall gaps (stalls missed under the threshold make
# the gaps 3, 6, 3, 9: IRREGULAR), the ranks themselves can still keep one:
# the largest p in 2..RANK_PERIOD_MAX with ATTR_SHARE of the stalled ranks on
# one residue of rank % p, from at least RANK_PERIOD_MIN_STALLS stalls.
# Stalls at random ranks put all but a tenth of 8 on one residue of some
# p <= 16 with a chance under 1% (about p * (1/p)**7 summed over p).
RANK_PERIOD_MAX = 16
RANK_PERIOD_MIN_STALLS = 8


def rank_period(ranks: np.ndarray, workers: Optional[int]) -> Optional[int]:
    """The largest p in 2..RANK_PERIOD_MAX, other than ``workers`` (max(1,
    num_workers)), on one residue of which ATTR_SHARE of the known stalled
    ``ranks`` fall; None with under RANK_PERIOD_MIN_STALLS known ranks or
    no such p."""
    known = np.asarray(ranks, dtype=np.int64)
    known = known[known >= 0]
    if len(known) < RANK_PERIOD_MIN_STALLS:
        return None
    # The largest such p: ranks on 0 mod 4 are on 0 mod 2 as well.
    for p in range(RANK_PERIOD_MAX, 1, -1):
        if p == workers:
            continue
        counts = np.bincount(known % p, minlength=p)
        if counts.max() >= ATTR_SHARE * len(known):
            return p
    return None


# --- the slow samples' period from the workers' own make times --------------------
# The stalls are what the loop felt; prefetch hides some slow samples (a
# worker started one early enough), so their ranks can keep a multiple of
# the data's period: every 5th sample slow at num_workers=4 and
# prefetch_factor=2 stalls on every other one (measured: stalls every 10
# ranks in 2 of 3 runs, "Diagnostic truth" user trial; in 24 of 40 runs of
# tests/test_attribution.py's loader; the corpus's simulated loader gives
# the same).  The workers' make times (traceml.worker_timing) see every
# slow sample, hidden or not.
#
# A batch is *made slow* above the Otsu split of log(make time) when the
# batches above it form a group of their own (:func:`_stands_out`, the
# stall rule's test for large waits on top: at least MIN_GROUP_ON_TOP, at
# most HEAVY_TAIL_MAX_STALL_SHARE of the batches, geometric mean
# BIMODAL_MIN_RATIO times the rest's).  Otsu's eta is not required, for
# the reason given there: measured beside a CPU hog, 0.1 ms items took
# 0.3-40 ms to make (waiting for a core) against 80 ms slow samples, and
# eta fell to 0.76-0.80 in 7 of 10 runs.  At least RANK_PERIOD_MIN_STALLS
# batches must be made slow, as for a period of stalled ranks.
#
# Their period is the smallest p in 2..RANK_PERIOD_MAX with one residue r
# such that ATTR_SHARE of all the batches at r mod p are made slow (a slow
# sample is slow whenever it is made: no prefetch hides a make time) and
# more than half of the slow-made ranks are r mod p.  Not ATTR_SHARE of
# them: the same hog made 1-5 fast batches slow per run beside 12 true
# slow samples.  More than half keeps out any other residue of the same
# p, and the smallest p is taken: a multiple m*p of the true period holds
# about 1/m of the slow ranks on each residue (one more than half on an
# odd count at m = 2), so it comes after p.  The first condition keeps out
# a slow worker's divisors (at num_workers=4 worker 1's batches are all
# odd ranks, but only half the odd ranks are slow).  By chance it cannot
# hold: more than half of at least 8 slow ranks is at least 5 on one
# residue, 90% of whose batches must be slow, so a random slow set would
# have to fill one residue class almost entirely (random make times in
# 20 seeds and heavy-tailed ones in 20 more gave none:
# tests/test_attribution.py).  p = max(1, num_workers) is one worker's
# batches in round-robin order: the ONE-WORKER rule's to read, not a
# period of the data (None).
MADE_MIN_RESIDUE_SHARE = 0.5
# The made-slow period names the stalls' samples only when the stalls sit
# on its residue for the most part: more than half of the stalled ranks.
# Not all: a stall can fall on the fast batch a worker starts late behind
# a slow one.  Below that, the slow samples are a fact about the data that
# does not explain the loop's waits, and the stalls' own reading stands.
MADE_STALL_SHARE = 0.5


def made_period(ranks: np.ndarray, make_ns: np.ndarray,
                num_workers: Optional[int]) -> Optional[dict]:
    """The rank period of the batches made slow in the workers, by the rule
    above; None when the make times form no slow group of their own, too
    few are slow, no residue holds them, or the period is the workers' own
    count.

    ``ranks`` (int, shape (batches,)): each steady-state batch's rank in
    the epoch's sampler order (-1 unknown); ``make_ns`` (int64, same
    shape): its make time in its worker, ns (worker_timing; -1 unknown);
    ``num_workers`` the loader's.  Returns {period, residue, slow (batches
    made slow), batches (with rank and make time known), split_ns (the
    make time above which a batch is slow), slow_on_residue (share of the
    slow-made on the residue), residue_slow (share of the residue's batches
    made slow)}."""
    r = np.asarray(ranks, dtype=np.int64)
    m = np.asarray(make_ns, dtype=np.int64)
    known = (r >= 0) & (m >= 0)
    r, m = r[known], m[known]
    if len(m) < 2 * RANK_PERIOD_MIN_STALLS:
        return None
    split = _core.log_otsu(m)["threshold_ns"]
    if not math.isfinite(split) or not _stands_out(m, split):
        return None
    slow = m > split
    count = int(slow.sum())
    if count < RANK_PERIOD_MIN_STALLS:
        return None
    slow_ranks = r[slow]
    for p in range(2, RANK_PERIOD_MAX + 1):
        on = np.bincount(slow_ranks % p, minlength=p)
        residue = int(np.argmax(on))
        if on[residue] <= MADE_MIN_RESIDUE_SHARE * count:
            continue
        at_residue = int(np.count_nonzero(r % p == residue))
        if on[residue] < ATTR_SHARE * at_residue:
            continue
        if p == effective_workers(num_workers):
            return None
        return {"period": p, "residue": residue, "slow": count, "batches": int(len(m)),
                "split_ns": float(split), "slow_on_residue": float(on[residue]) / count,
                "residue_slow": float(on[residue]) / at_residue}
    return None


def make_ratio(per_worker: Optional[dict], worker: int) -> Optional[float]:
    """Worker ``worker``'s median time to make a batch (measured in the
    worker: traceml.worker_timing) over the other workers' median of
    theirs; None without it and at least one other."""
    if not per_worker or worker not in per_worker or len(per_worker) < 2:
        return None
    others = [v["make_median_s"] for w, v in per_worker.items() if w != worker]
    median = float(np.median(others))
    mine = per_worker[worker]["make_median_s"]
    return float("inf") if median <= 0 else mine / median


# Where a SLOW-SAMPLE period comes from (the attribution's ``period_from``).
PERIOD_FROM_MAKE_TIMES = "make_times"   # the workers' make times (made_period)
PERIOD_FROM_STALLS = "stalls"           # the stalled ranks or their gaps


def attribution(stall_ranks: np.ndarray, stall_workers: np.ndarray,
                batch_workers: np.ndarray, num_workers: Optional[int],
                period: Optional[int], ticks: Optional[dict],
                per_worker: Optional[dict] = None,
                made: Optional[dict] = None) -> Optional[dict]:
    """Which worker held the stalls, the workers' round, or the samples.

    ``stall_ranks``/``stall_workers``: rank and worker (-1 unknown) of each
    steady-state stall; ``batch_workers``: the worker of every steady-state
    batch; ``period``: the report's period (None unless PERIODIC);
    ``ticks``: CPU ticks per worker id over the run (None: no readings);
    ``per_worker``: the workers' own batch timing (the report's
    ``production.workers``; None: not measured); ``made``: the period of
    the batches made slow in the workers (:func:`made_period`; None: no
    such period, or no worker timing).

    SLOW-SAMPLE from the make times comes first: with ``made`` and more
    than MADE_STALL_SHARE of the known stalled ranks on its residue, the
    period is the data's (``period_from`` PERIOD_FROM_MAKE_TIMES), whatever
    the stalls' own cadence (``stall_period``: the report's period, or
    without one :func:`rank_period` of the stalled ranks; prefetch can hide
    every other slow sample and double it).  A made period other than the
    workers' count is never one slow worker's batches (see made_period), so
    it is read before ONE-WORKER.  Otherwise, from the stalls alone:

    ONE-WORKER k: at least ATTR_SHARE of the known stalls are worker k's,
    more than ONE_WORKER_OWN_SHARE of k's batches stall and at most
    ONE_WORKER_OTHERS_SHARE of the others' do, and either k takes
    BUSIER_RATIO times the others' median time to make a batch (make_ratio,
    measured in the workers: this holds whether k burns CPU or sleeps), or
    k is busier (cpu_ratio >= BUSIER_RATIO) or less busy (<= 1/BUSIER_RATIO:
    it waits on something) and not the round opener.  SLOW-SAMPLE: a period
    p != max(1, num_workers) (the report's, or without one
    :func:`rank_period`'s) with ATTR_SHARE of the stalled ranks on one
    residue of rank % p, over at least two workers (when workers are known).
    LOCK-STEP: period == num_workers >= 2, and not ONE-WORKER
    (``ambiguous`` when the stalls sit on one worker but neither CPU
    readings nor batch timing tell it from the others).  None when too few stalls or no rule holds:
    {label, worker (ONE-WORKER's k, else None), top_worker (the worker
    holding most known stalls), stall_workers ({worker id: stalls}), known
    (stalls whose worker is known), share (top_worker's share of them),
    own_share, others_share, cpu_ratio, make_ratio, period, residue,
    residue_share (the share of the known stalled ranks on the residue),
    ambiguous, period_from (SLOW-SAMPLE: PERIOD_FROM_MAKE_TIMES or
    PERIOD_FROM_STALLS; else None), stall_period (the stalls' period, as
    above; None when they keep none), made (from the make times: {slow,
    batches, split_s, slow_on_residue, residue_slow}; else None)}."""
    ranks = np.asarray(stall_ranks, dtype=np.int64)
    wk = np.asarray(stall_workers, dtype=np.int64)
    batches = np.asarray(batch_workers, dtype=np.int64)
    known = wk >= 0
    ids, counts = np.unique(wk[known], return_counts=True)
    by_worker = {int(i): int(c) for i, c in zip(ids, counts)}
    out = {"label": None, "worker": None, "top_worker": None, "stall_workers": by_worker,
           "known": int(known.sum()), "share": None, "own_share": None,
           "others_share": None, "cpu_ratio": None, "make_ratio": None, "period": period,
           "residue": None, "residue_share": None, "ambiguous": False,
           "period_from": None, "stall_period": period, "made": None}
    if len(ranks) < ATTR_MIN_STALLS:
        return None
    nw = num_workers or 0
    k = effective_workers(num_workers)
    one_worker = False
    if nw >= 2 and out["known"] >= ATTR_MIN_STALLS:
        top = int(ids[np.argmax(counts)])
        share = by_worker[top] / out["known"]
        own = int((batches == top).sum())
        others = int(((batches >= 0) & (batches != top)).sum())
        own_share = by_worker[top] / own if own else 0.0
        others_share = (out["known"] - by_worker[top]) / others if others else 0.0
        ratio = cpu_ratio(ticks, top)
        slower = make_ratio(per_worker, top)
        out.update(worker=top, top_worker=top, share=share, own_share=own_share,
                   others_share=others_share, cpu_ratio=ratio, make_ratio=slower)
        concentrated = (share >= ATTR_SHARE and own_share > ONE_WORKER_OWN_SHARE
                        and others_share <= ONE_WORKER_OTHERS_SHARE)
        one_worker = concentrated and (
            (slower is not None and slower >= BUSIER_RATIO)
            or (slower is None and ratio is not None and (
                ratio >= BUSIER_RATIO
                or (ratio <= 1 / BUSIER_RATIO and top != ROUND_OPENER))))
    known_ranks = ranks[ranks >= 0]
    if made is not None and made["period"] != k and len(known_ranks) >= ATTR_MIN_STALLS:
        on = float(np.mean(known_ranks % made["period"] == made["residue"]))
        if on > MADE_STALL_SHARE:
            stall_period = period if period is not None else rank_period(ranks, k)
            return {**out, "label": SLOW_SAMPLE, "worker": None, "period": made["period"],
                    "residue": made["residue"], "residue_share": on,
                    "period_from": PERIOD_FROM_MAKE_TIMES, "stall_period": stall_period,
                    "made": {"slow": made["slow"], "batches": made["batches"],
                             "split_s": made["split_ns"] * 1e-9,
                             "slow_on_residue": made["slow_on_residue"],
                             "residue_slow": made["residue_slow"]}}
    if one_worker:
        return {**out, "label": ONE_WORKER}
    if period is None:
        period = rank_period(ranks, k)
        out["period"] = out["stall_period"] = period
        if period is None:
            return None
    if period > 1 and period != k:
        sel = ranks >= 0
        if sel.sum() >= ATTR_MIN_STALLS:
            res, rc = np.unique(ranks[sel] % period, return_counts=True)
            residue = int(res[np.argmax(rc)])
            rshare = float(rc.max()) / int(sel.sum())
            out.update(residue=residue, residue_share=rshare)
            spread = nw < 2 or len(by_worker) >= 2
            if rshare >= ATTR_SHARE and spread:
                return {**out, "label": SLOW_SAMPLE, "worker": None,
                        "period_from": PERIOD_FROM_STALLS}
        return None
    if nw >= 2 and period == k:
        # Stalls on one worker with no CPU readings to tell it from the
        # rest: a slow worker and drifted lock-step look alike here.
        ambiguous = bool(out["share"] is not None and out["share"] >= ATTR_SHARE
                         and out["cpu_ratio"] is None and out["make_ratio"] is None)
        return {**out, "label": LOCK_STEP, "worker": None, "ambiguous": ambiguous}
    return None


# --- the state of the worker holding the awaited batch ------------------------------
# /proc/PID/stat state codes of a process asleep: S (interruptible sleep: a
# sleep, a socket or pipe read, a lock) and D (uninterruptible: disk I/O).
BLOCKED_STATES = ("S", "D")
# Blocked when at least half of the readings in the stalls' windows find it
# asleep and it keeps under BUSY_SHARE of a core busy meanwhile (a worker
# computing in threads reads R or shows CPU; a sleeping one neither).
BLOCKED_MIN_SHARE = 0.5


# A worker asleep during a stall is blocked only if it was making the
# awaited batch then: where the workers' own batch timing says it was
# making batches for under this share of the stalls' wait, the batch was
# made already and the worker slept because it had nothing to do (a user
# trial: a healthy in-memory loader whose hand-over blips read "the worker
# ... was blocked during stalls: sleeping or waiting on I/O" while its
# production line said busy 2%, hand-over 16% of step time).  Half: the
# same bar as BLOCKED_MIN_SHARE.
AWAITED_MAKING_MIN_SHARE = 0.5


def awaited_blocked(readings: int, asleep: int, cores: Optional[float],
                    making_share: Optional[float] = None) -> Optional[bool]:
    """Whether the worker holding the awaited batch was blocked during the
    stalls: ``asleep`` of ``readings`` readings in BLOCKED_STATES and
    ``cores`` (CPU-s per wall-s, all threads) under BUSY_SHARE, and, where
    the workers' batch timing is known, ``making_share`` (the stalls' wait
    during which it was making batches) at least AWAITED_MAKING_MIN_SHARE.
    None without readings."""
    if readings <= 0 or cores is None:
        return None
    if making_share is not None and making_share < AWAITED_MAKING_MIN_SHARE:
        return False
    return asleep / readings >= BLOCKED_MIN_SHARE and cores < BUSY_SHARE


# --- bytes per batch ------------------------------------------------------------------
# A batch this large costs its hand-over by itself.  Measured on the 2-core
# build machine: 16 images of 3x480x640 float32 (59 MB a batch) from a
# __getitem__ returning a ready tensor cost the workers 32-47 ms of CPU per
# batch (collate's copy into shared memory: 0.5-0.8 ms per MB, quiet and
# loaded host) and the main process about 50 ms per step outside the fetch
# on the loaded host (mapping and freeing the shared memory).  At 8 MB that
# is 4-6 ms a batch, past the 1 ms stall floor and a material share of a
# 10-100 ms training step.
HANDOVER_MIN_BYTES = 8e6


def handover(median_bytes: Optional[float], diagnosis: str, workers_busy: Optional[bool],
             main_busy: Optional[bool]) -> Optional[str]:
    """Whether large batches may be the wait, as a code: None when the
    median batch is under HANDOVER_MIN_BYTES or input is not a concern
    (COMPUTE-BOUND, NO-DATA); "handover_main" when the workers idle while
    the main process is busy (the hand-over's receiving end is the cost);
    else "handover_bytes" (the workers' CPU may be collate's copy rather
    than the samples' processing)."""
    if median_bytes is None or median_bytes < HANDOVER_MIN_BYTES:
        return None
    if diagnosis in (COMPUTE_BOUND, NO_DATA):
        return None
    if workers_busy is False and main_busy:
        return "handover_main"
    return "handover_bytes"


# Next-step codes that point at the workers' round or at varying num_workers:
# an attribution to one worker replaces them.
_ROUND_CODES = frozenset(("lockstep", "vary_workers_then_in_order", "period_not_workers",
                          "confirm_period", "period", "wrap_to_compare_period", "irregular",
                          "compare_in_order", "vary_workers_around", "overtaking_round"))


_HANDOVER_REPLACES = frozenset(("irregular", "compare_in_order", "vary_workers_or_prefetch",
                                "vary_workers_then_in_order", "confirm_period"))


def evidence_next_steps(s: dict, items: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """:func:`next_steps`'s items with what the attribution and the batch
    bytes add (nothing for COMPUTE-BOUND, NO-DATA or under MIN_STEADY_STEPS
    steady-state steps): ONE-WORKER replaces the round and num_workers items with that
    worker's shard; SLOW-SAMPLE replaces the "confirm the period" item with
    the samples' residue (and, when the workers' make times give the
    samples a period other than the stalls' cadence, the items that read a
    period off the stalls as well); large batches add the hand-over
    reading and its next step; a trusted prediction that no num_workers
    keeps up replaces the "vary num_workers" items
    (:func:`prediction_next_steps`)."""
    attr = s.get("attribution")
    out = list(items)
    if (s.get("diagnosis") in (COMPUTE_BOUND, NO_DATA)
            or s.get("steady_steps", 0) < MIN_STEADY_STEPS):
        # Input is not the bottleneck, or too few steps to say: nothing to add.
        return out
    if attr and attr["label"] == ONE_WORKER:
        out = [it for it in out if it[0] not in _ROUND_CODES]
        out.append(("one_worker", {"worker": attr["worker"], "stalls": attr["stall_workers"]
                                   .get(attr["worker"], 0), "known": attr["known"],
                                   "own_share": attr["own_share"],
                                   "cpu_ratio": attr["cpu_ratio"]}))
        out.append(("split_shards", {"worker": attr["worker"]}))
    elif attr and attr["label"] == SLOW_SAMPLE:
        drop = {"confirm_period", "compare_in_order"}
        made = attr.get("made")
        if made is not None and attr.get("stall_period") != attr["period"]:
            # The stalls' cadence is not the samples' period: the items
            # that read a period off the stalls would name the wrong one.
            drop |= {"period_not_workers", "period", "wrap_to_compare_period"}
        out = [it for it in out if it[0] not in drop]
        params = {"period": attr["period"], "residue": attr["residue"],
                  "share": attr["residue_share"], "workers": len(attr["stall_workers"])}
        if made is not None:
            params.update(period_from=attr["period_from"], stall_period=attr["stall_period"],
                          slow=made["slow"], batches=made["batches"],
                          slow_on_residue=made["slow_on_residue"])
        out.append(("slow_sample", params))
    code = (s.get("batch_bytes") or {}).get("handover")
    if code:
        # The bytes come first: the slow-sample and num_workers experiments
        # would vary everything but what each batch carries.
        out = [it for it in out if it[0] not in _HANDOVER_REPLACES]
        out.append((code, {"bytes": s["batch_bytes"]["median"]}))
        out.append(("fewer_bytes", {}))
    return prediction_next_steps(s, out)


# --- compare: mean wait, input share, stall rate -----------------------------------------
# compare() judges three measures, each against its own tolerance, and says
# which moved: a faster model can lower the mean fetch while the share of
# time spent waiting rises, and runs of 20 and 80 steps cannot compare raw
# stall counts.
# Input share: a change counts beyond 2 percentage points of step time, the
# same materiality as STEP_TOL (below it, input wait moves training
# throughput by under 2%).
SHARE_TOL = 0.02
# Stalls per 100 steady-state steps, counted at the baseline's threshold: a
# count of independent stalls varies like a Poisson count, so a change
# counts beyond 2 standard deviations of the baseline's count (2 * sqrt(n)
# stalls, scaled to 100 steps; about 95% of repeats stay inside), and never
# under 1 stall per 100 steps.
STALL_RATE_SIGMAS = 2.0
STALL_RATE_MIN_TOL = 1.0
MIXED = "MIXED"
BETTER, WORSE, SAME = "better", "worse", "same"


class Moved(NamedTuple):
    """One measure of a run against the baseline: BETTER, WORSE or SAME
    (None: not measured in one of them), both values and the tolerance."""

    measure: str
    direction: Optional[str]
    base: Optional[float]
    run: Optional[float]
    tolerance: Optional[float]


def _moved(measure: str, base: Optional[float], run: Optional[float],
           tol: Optional[float]) -> Moved:
    if base is None or run is None or tol is None:
        return Moved(measure, None, base, run, tol)
    delta = run - base
    return Moved(measure, SAME if abs(delta) <= tol else (BETTER if delta < 0 else WORSE),
                 base, run, tol)


def compare_measures(mean: Verdict, base_share: Optional[float], run_share: Optional[float],
                     base_stalls: Optional[tuple], run_stalls: Optional[tuple]) -> list[Moved]:
    """The three measures: mean wait (``mean``, policy.compare_means), input
    share (tolerance SHARE_TOL), stalls per 100 steady-state steps
    (``*_stalls`` = (stall count, steady steps) or None; tolerance
    max(STALL_RATE_MIN_TOL, STALL_RATE_SIGMAS * sqrt(base count) per 100
    baseline steps))."""
    out = [Moved("mean_wait", None if mean.label == NO_DATA else
                 {IMPROVEMENT: BETTER, REGRESSION: WORSE, EQUIVALENT: SAME}[mean.label],
                 mean.base_s, mean.run_s, mean.tolerance_s)]
    out.append(_moved("input_share", base_share, run_share, SHARE_TOL))
    rate = [None, None]
    tol = None
    for i, st in enumerate((base_stalls, run_stalls)):
        if st is not None and st[1]:
            rate[i] = 100.0 * st[0] / st[1]
    if rate[0] is not None:
        tol = max(STALL_RATE_MIN_TOL,
                  100.0 * STALL_RATE_SIGMAS * math.sqrt(base_stalls[0]) / base_stalls[1])
    out.append(_moved("stall_rate", rate[0], rate[1], tol))
    return out


def overall(mean: Verdict, moved: list[Moved]) -> str:
    """NO_DATA when the mean wait cannot be compared; IMPROVEMENT when some
    measure got better and none worse, REGRESSION the reverse, MIXED when
    both, EQUIVALENT when none moved."""
    if mean.label == NO_DATA:
        return NO_DATA
    dirs = {m.direction for m in moved}
    if BETTER in dirs and WORSE in dirs:
        return MIXED
    if BETTER in dirs:
        return IMPROVEMENT
    if WORSE in dirs:
        return REGRESSION
    return EQUIVALENT


# --- worker memory -------------------------------------------------------------------
# Copy-on-read: forked workers' unshared memory (USS) grows within an epoch
# by at least this much (median over workers and epochs).  Measured here
# (tests/test_memory.py, benchmarks/README.md): 3 million short strings in
# a list, read at random by 2 workers, grew each worker's USS by 233 MiB in
# one epoch; the same numbers in a NumPy array by 1.4 MiB.  A worker's own
# buffers (batches in flight) come and go, so they do not add up to a
# growth over an epoch.
MEM_COW_GROWTH_BYTES = 32 * 2**20
# A step of the main process's RSS from one epoch's last reading to the
# next epoch's first, worth naming: at least this much.
MEM_EPOCH_JUMP_BYTES = 256 * 2**20

COPY_ON_READ = "COPY-ON-READ"


def memory_findings(mem: Optional[dict], num_workers: Optional[int],
                    start_method: Optional[str]) -> list[tuple[str, dict]]:
    """What the memory block (traceml.memory.summarise) shows, as (code,
    numbers): "copy_on_read" when forked workers' unshared memory grew by
    MEM_COW_GROWTH_BYTES or more within an epoch (median), "epoch_jump"
    for each epoch whose start the main process's RSS reached
    MEM_EPOCH_JUMP_BYTES above the previous epoch's end."""
    out: list[tuple[str, dict]] = []
    if not mem or not mem.get("available"):
        return out
    growth = mem.get("worker_uss_growth")
    if (growth is not None and growth >= MEM_COW_GROWTH_BYTES and (num_workers or 0) > 0
            and start_method in (None, "fork")):
        out.append(("copy_on_read", {"growth_bytes": growth, "num_workers": num_workers}))
    for jump in mem.get("epoch_jumps") or []:
        if jump["rss_bytes"] >= MEM_EPOCH_JUMP_BYTES:
            out.append(("epoch_jump", dict(jump)))
    return out


# --- GPU-visible input wait (traceml.gpu) -------------------------------------
# The GPU-visible input share (GPU-visible wait / GPU step, over the steady
# steps with both readings) takes over the diagnosis only when it speaks for
# most of the run: at least GPU_MIN_COVERAGE of the steady steps read, and
# at least MIN_STEADY_STEPS of them.  A half is a choice, not a measurement:
# below it the readings may describe another part of the run than the host
# share does (steps skipped while the ring was full are the GPU's slowest
# stretch).  The bounds are the host's own (INPUT_BOUND_SHARE,
# COMPUTE_BOUND_SHARE): both are shares of the step lost to waiting for
# input, one as the host saw it, the other as the GPU did.
GPU_MIN_COVERAGE = 0.5

GPU_NOT_USED = "gpu_not_used"        # too few readings: the host diagnosis stands
GPU_AGREES = "gpu_agrees"            # the GPU-visible share gives the same label
GPU_DID_NOT_WAIT = "gpu_did_not_wait"  # host input-bound, the GPU under the bound
GPU_DIFFERS = "gpu_differs"          # another label, from the GPU-visible share


# --- GPU utilisation in input waits (NVML, traceml.gpu) ---------------------
# NVML's utilisation sample is the percent of the driver's window (1/6 s to
# 1 s) in which a kernel ran; a window that straddles the edge of an input
# wait mixes the wait with compute.  With GPU_UTIL_MIN_READINGS readings in
# each kind of interval, one such straddling reading moves a kind's mean by
# at most 100 / 5 = 20 points; under it there are "too few readings to
# tell".  The rule needs a drop larger than that: at least
# GPU_UTIL_MIN_DROP_PCT points (20 from one straddler, plus a margin of
# half as much again) and the waits' mean at most GPU_UTIL_MAX_RATIO of the
# rest's (a GPU at 65% in waits against 95% elsewhere is not idle).  Both
# are choices from that arithmetic, not measurements.
GPU_UTIL_MIN_READINGS = 5
GPU_UTIL_MIN_DROP_PCT = 30.0
GPU_UTIL_MAX_RATIO = 0.5

GPU_UTIL_TOO_FEW = "too_few"              # under GPU_UTIL_MIN_READINGS in a kind
GPU_UTIL_IDLE_IN_WAITS = "gpu_idle_in_waits"  # the GPU idles while the loop waits


def gpu_util_rule(slow_readings: int, fast_readings: int, slow_mean: Optional[float],
                  fast_mean: Optional[float]) -> Optional[str]:
    """What NVML's utilisation in input waits (slow) against the rest of
    the steps (fast) says: GPU_UTIL_TOO_FEW with under
    GPU_UTIL_MIN_READINGS readings in either; GPU_UTIL_IDLE_IN_WAITS when
    the waits' mean is at least GPU_UTIL_MIN_DROP_PCT points below the
    rest's and at most GPU_UTIL_MAX_RATIO of it (it confirms that the GPU
    idles while the loop waits for input); None otherwise (nothing is
    said beyond the numbers)."""
    if (slow_readings < GPU_UTIL_MIN_READINGS or fast_readings < GPU_UTIL_MIN_READINGS
            or slow_mean is None or fast_mean is None):
        return GPU_UTIL_TOO_FEW
    if (fast_mean - slow_mean >= GPU_UTIL_MIN_DROP_PCT
            and slow_mean <= GPU_UTIL_MAX_RATIO * fast_mean):
        return GPU_UTIL_IDLE_IN_WAITS
    return None


def gpu_diagnosis(host: Diagnosis, gpu_share: Optional[float], coverage: Optional[float],
                  steps_read: int) -> tuple[Diagnosis, str]:
    """(the diagnosis, the rule's code) once the GPU-visible input share
    is known.

    With under GPU_MIN_COVERAGE of the steady steps read, or fewer than
    MIN_STEADY_STEPS readings, the host's diagnosis stands
    (GPU_NOT_USED).  Otherwise the GPU-visible share is diagnosed with the
    host's bounds (:func:`diagnose`): when the host reads INPUT-BOUND or
    HAND-OVER but the GPU waited under INPUT_BOUND_SHARE of its step, the
    host waited while the GPU worked (GPU_DID_NOT_WAIT: the GPU-visible
    label); when both are input-bound the host's label stays (HAND-OVER
    says more); any other difference takes the GPU-visible label
    (GPU_DIFFERS: e.g. a host-to-device copy marked with input_ready()
    that the host wait does not hold).
    """
    if (gpu_share is None or not math.isfinite(gpu_share) or coverage is None
            or coverage < GPU_MIN_COVERAGE or steps_read < MIN_STEADY_STEPS
            or host.label == NO_DATA):
        return host, GPU_NOT_USED
    gpu = diagnose(gpu_share)
    host_input = host.label in (INPUT_BOUND, HAND_OVER)
    if host_input and gpu.label == INPUT_BOUND:
        return host, GPU_AGREES
    if host_input:
        return gpu, GPU_DID_NOT_WAIT
    if gpu.label == host.label:
        return host, GPU_AGREES
    return gpu, GPU_DIFFERS


# --- many ranks (traceml.ranks) ----------------------------------------------------
# With DistributedDataParallel the gradient all-reduce makes every rank wait
# for the slowest one at each step, so the job waits, at step i, for the
# largest input wait across the ranks (torch DDP docs, "Internal Design":
# backward's all-reduce is a synchronisation point).  Steps are aligned by
# index: step i of every rank is the same optimizer step.
#
# The straggler's cost is the part of a step's wait that only it had: the
# largest wait minus the second largest ("unique wait"); the job would have
# waited the second largest anyway.  A rank is a straggler when it holds
# at least STRAGGLER_MIN_SHARE of the job's unique wait (a majority: no
# other rank can hold as much), when that unique wait is at least
# STRAGGLER_MIN_COST_SHARE of the job's step time (the 5% line below which
# TensorFlow's input-pipeline analyzer calls a step "not input-bound", the
# same materiality line as STALL_MIN_COST_SHARE), and when its own
# single-rank report finds its input wait matters (stalls kept by
# stalls_matter, or INPUT-BOUND / HAND-OVER): scheduling blips of a few ms
# (TRAPS: 2-10 ms under load) then never name a healthy rank.
STRAGGLER_MIN_SHARE = 0.5
STRAGGLER_MIN_COST_SHARE = STALL_MIN_COST_SHARE
# The all-reduce echo: on the straggler's stall steps, another rank that
# waits for it inside the all-reduce sees its compute (fetch_done ->
# step end) grow by about the stall.  Echo when the median compute on
# those steps exceeds the median on the straggler's other steady steps by
# at least ECHO_MIN_ABSORBED of the straggler's median stall excess (its
# median stalled wait over its median calm wait): a majority of the stall
# reached that rank.  At least ECHO_MIN_STALLS stall steps (as for
# attribution: ATTR_MIN_STALLS), else unknown.
ECHO_MIN_ABSORBED = 0.5
ECHO_MIN_STALLS = ATTR_MIN_STALLS


def max_across_ranks(waits, n: Optional[int] = None) -> tuple[np.ndarray, np.ndarray,
                                                               np.ndarray]:
    """(largest wait, the rank holding it, second largest wait) per
    aligned step, over ``waits`` (one int64 ns array per rank, in rank
    order; lengths may differ: a step counts the ranks that have it).

    Shapes (n,) with n the longest array (give ``n`` to read ``waits``,
    any iterable, once: one rank's array at a time); the holder is int32
    (the position in ``waits``), the lowest rank on ties; the second
    largest is 0 where one rank has the step.  One pass per rank, O(n)
    memory (no (ranks, n) matrix)."""
    if n is None:
        waits = list(waits)
        n = max((len(w) for w in waits), default=0)
    top = np.full(n, -1, dtype=np.int64)
    second = np.zeros(n, dtype=np.int64)
    holder = np.full(n, -1, dtype=np.int32)
    for r, w in enumerate(waits):
        w = np.asarray(w, dtype=np.int64)
        m = len(w)
        head = top[:m]
        # The second largest takes the smaller of the new wait and the old top.
        np.maximum(second[:m], np.minimum(w, head), out=second[:m])
        wins = w > head
        head[wins] = w[wins]
        holder[:m][wins] = r
    np.maximum(second, 0, out=second)
    return top, holder, second


def stragglers(top: np.ndarray, holder: np.ndarray, second: np.ndarray,
               job_step_ns: float, ranks: list, input_matters: dict) -> list[dict]:
    """Per rank of ``ranks`` (the rank numbers, positions in ``holder``):
    {rank, held_steps (steps where it held the largest wait), held_share
    (of the aligned steps), unique_wait_s (its summed unique wait),
    unique_share (of the job's unique wait; None when the job has none),
    cost_share (of ``job_step_ns``, the job's summed step time), straggler
    (the rule above, with ``input_matters[rank]`` its own report's
    verdict)}."""
    n = len(top)
    unique = (top - second).astype(np.float64)
    unique[holder < 0] = 0.0
    total_unique = float(unique.sum())
    held = np.bincount(holder[holder >= 0], minlength=len(ranks))
    held_unique = np.bincount(holder[holder >= 0], weights=unique[holder >= 0],
                              minlength=len(ranks))
    out = []
    for i, r in enumerate(ranks):
        share = float(held_unique[i]) / total_unique if total_unique > 0 else None
        cost = float(held_unique[i]) / job_step_ns if job_step_ns > 0 else None
        out.append({
            "rank": int(r),
            "held_steps": int(held[i]),
            "held_share": float(held[i]) / n if n else None,
            "unique_wait_s": float(held_unique[i]) * 1e-9,
            "unique_share": share,
            "cost_share": cost,
            "straggler": bool(share is not None and share >= STRAGGLER_MIN_SHARE
                              and cost is not None and cost >= STRAGGLER_MIN_COST_SHARE
                              and input_matters.get(r, False)),
        })
    return out


def input_matters(summary: dict) -> bool:
    """Whether a single-rank report finds its input wait worth an
    experiment: stalls kept by stalls_matter, or INPUT-BOUND / HAND-OVER."""
    st = summary.get("stalls") or {}
    kept = bool(st.get("count")) and st.get("matter") == STALLS_KEPT
    return kept or summary.get("diagnosis") in (INPUT_BOUND, HAND_OVER)


def echo(stall_mask: np.ndarray, straggler_wait_ns: np.ndarray,
         straggler_steady: np.ndarray, compute_ns: np.ndarray,
         steady: np.ndarray) -> Optional[dict]:
    """The all-reduce echo on one other rank of a straggler's stalls (rule
    above).  ``stall_mask``, ``straggler_wait_ns`` and ``straggler_steady``
    are the straggler's per-step stall mask, input wait (ns) and
    steady-state mask; ``compute_ns`` and ``steady`` the other rank's
    per-step compute (ns) and steady mask; aligned by index, lengths may
    differ (the common prefix counts).

    Returns {stall_steps, compute_on_stalls_s, compute_other_s, growth_s,
    stall_excess_s, absorbed (growth / stall excess), echo (bool)}, or
    None with fewer than ECHO_MIN_STALLS shared stall steps or no other
    steady step."""
    m = min(len(stall_mask), len(compute_ns))
    stall = stall_mask[:m] & steady[:m]
    other = ~stall_mask[:m] & steady[:m] & straggler_steady[:m]
    k = int(np.count_nonzero(stall))
    if k < ECHO_MIN_STALLS or not other.any():
        return None
    on = float(int_median(compute_ns[:m][stall]))
    off = float(int_median(compute_ns[:m][other]))
    calm = straggler_wait_ns[~stall_mask & straggler_steady]
    stalled = straggler_wait_ns[stall_mask & straggler_steady]
    excess = (float(int_median(stalled)) - (float(int_median(calm)) if len(calm) else 0.0)
              if len(stalled) else 0.0)
    growth = on - off
    absorbed = growth / excess if excess > 0 else None
    return {
        "stall_steps": k,
        "compute_on_stalls_s": on * 1e-9,
        "compute_other_s": off * 1e-9,
        "growth_s": growth * 1e-9,
        "stall_excess_s": excess * 1e-9,
        "absorbed": absorbed,
        "echo": bool(absorbed is not None and absorbed >= ECHO_MIN_ABSORBED),
    }


# --- the prediction's trust (traceml.predict) ---------------------------------------------
# The model (traceml.predict) is checked on the one setting a run measured:
# its wait at the run's num_workers beside the measured mean wait.  The
# miss is taken as a share of the measured mean step, not of the wait (a
# wait near 0 makes any relative error huge; bench_predict.py scores the
# model the same way).  Measured on the user-trial runs of 2026-11-30 (2
# CPUs, 38 runs): where the model's assumptions hold (uniform batches,
# lock-step, a growing cost, healthy loaders, 50 MB batches at 2 workers,
# the demo) the check missed by at most 11% of the step (25 runs, median
# 2%); where they do not (a slow sample every k, one slow shard, 7 workers
# on 2 cores with 50 MB batches, a 10 s stuck fetch averaged in) by 20% to
# 58% (13 runs).  15% of the step lies between the two groups.
PREDICT_FIT_TOL = 0.15

PREDICT_TRUSTED = "trusted"          # the check within PREDICT_FIT_TOL: advice given
PREDICT_MISFIT = "misfit"            # the check misses by more: no num_workers advice
PREDICT_UNCHECKED = "unchecked"      # no measured wait or step to check against
PREDICT_ONE_WORKER = "one_worker"    # the stalls are one worker's: the model assumes equal ones
PREDICT_SLOW_SAMPLE = "slow_sample"  # the stalls follow sample ranks: not a mean throughput


def prediction_trust(predicted_s: Optional[float], measured_s: Optional[float],
                     step_s: Optional[float], attribution_label: Optional[str]
                     ) -> tuple[str, Optional[float]]:
    """(code, miss) for a prediction: ``miss`` is |predicted - measured|
    wait at the run's num_workers over the measured mean step ``step_s``
    (None where either is unknown).  An attribution that names one worker
    (ONE-WORKER) or slow samples (SLOW-SAMPLE) withholds the num_workers
    advice whatever the check (the model averages the workers and the
    samples: round robin over equal workers); otherwise the check decides:
    PREDICT_TRUSTED within PREDICT_FIT_TOL, PREDICT_MISFIT beyond it,
    PREDICT_UNCHECKED without the numbers."""
    miss = (abs(predicted_s - measured_s) / step_s
            if predicted_s is not None and measured_s is not None and step_s else None)
    if attribution_label == ONE_WORKER:
        return PREDICT_ONE_WORKER, miss
    if attribution_label == SLOW_SAMPLE:
        return PREDICT_SLOW_SAMPLE, miss
    if miss is None:
        return PREDICT_UNCHECKED, miss
    return (PREDICT_TRUSTED if miss <= PREDICT_FIT_TOL else PREDICT_MISFIT), miss


# Next-step codes that propose varying num_workers: where a trusted
# prediction finds that no num_workers keeps up on this host, they are
# replaced by the prediction's own next step (a cheaper batch or more cores).
_VARY_WORKERS_CODES = frozenset(("try_workers", "wrap_and_sweep", "vary_workers_around",
                                 "vary_workers_or_prefetch", "vary_workers_then_in_order"))


def prediction_next_steps(s: dict, items: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """``items`` made consistent with a trusted prediction (``s``'s
    ``prediction`` block with ``trust`` PREDICT_TRUSTED) that no
    num_workers keeps up on this host: the items proposing to vary
    num_workers are replaced by one ``predicted_no_workers`` item
    (cores needed, usable CPUs, wait floor, how much cheaper a batch must
    get).  Unchanged otherwise."""
    p = s.get("prediction")
    if not p or p.get("trust") != PREDICT_TRUSTED or p.get("keeps_up_with") is not None:
        return items
    if not any(code in _VARY_WORKERS_CODES for code, _ in items):
        return items
    out = [it for it in items if it[0] not in _VARY_WORKERS_CODES]
    out.append(("predicted_no_workers", {
        "cores_needed": p["worker_cores_needed"], "cpus": p["usable_cpus"],
        "floor_s": p["wait_floor_s"], "cheaper_by": p["cheaper_by"],
        "num_workers": p["num_workers"]}))
    return out
