"""The stall threshold: which input waits are stalls, and whether they matter
against the step time.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np
from scipy.stats import norm, rankdata

from .. import _core
from ..fmt import fmt_s, nth, pct
from . import _numbers, _words, input_bound
from ._types import Finding, Words


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
# on this project's CPU-burning DataLoader runs (tests/integration/test_dataloader.py):
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


def bimodal_split(wait_ns: np.ndarray, min_ratio: float = BIMODAL_MIN_RATIO) -> Optional[dict]:
    """:func:`traceml._core.log_otsu`'s split of log(wait) when the waits
    form two well-separated groups (eta >= BIMODAL_MIN_ETA and geometric
    means at least ``min_ratio`` apart), else None."""
    split = _core.log_otsu(wait_ns)
    eta = split["eta"]
    if not math.isfinite(eta) or eta < BIMODAL_MIN_ETA:
        return None
    if split["upper_mean_ns"] < min_ratio * split["lower_mean_ns"]:
        return None
    return split


# Two groups closer than BIMODAL_MIN_RATIO need eta beyond what one group
# gives at the run's own size.  Under the null the log waits are one
# Gaussian group, whose eta is free of its mean and spread and depends on
# the count n alone; a short run's eta scatters high (measured over 4000
# draws: 0.886 at the 99th percentile for n = 12, 0.786 at 32, 0.743 at
# 64), so a fixed 0.8 would read two groups in 14% of 12-fetch healthy
# runs.  The test: eta above the (1 - BIMODAL_ALPHA) quantile of
# ETA_NULL_DRAWS seeded draws of n Gaussian values; past ETA_NULL_MAX_N
# fetches the quantile at that n (it only falls with n), and never under
# BIMODAL_MIN_ETA.
BIMODAL_ALPHA = 0.01
ETA_NULL_DRAWS = 4000
ETA_NULL_MAX_N = 64


def eta_critical(n: int) -> float:
    """The eta that one Gaussian group of ``n`` values exceeds with chance
    BIMODAL_ALPHA, at least BIMODAL_MIN_ETA; n counts the waits (>= 2).
    Read from ETA_CRITICAL, which :func:`eta_critical_simulated` computes
    (tests/unit/test_stall_threshold.py checks the two agree)."""
    return ETA_CRITICAL[max(2, min(int(n), ETA_NULL_MAX_N)) - 2]


def eta_critical_simulated(n: int) -> float:
    """eta_critical by its seeded simulation (see above): ETA_NULL_DRAWS
    groups of ``n`` lognormal waits, the (1 - BIMODAL_ALPHA) quantile of
    their eta, at least BIMODAL_MIN_ETA.  About 25 ms a size here."""
    n = max(2, min(int(n), ETA_NULL_MAX_N))
    rng = np.random.default_rng(n)
    draws = (np.exp(rng.standard_normal((ETA_NULL_DRAWS, n))) * 1e6).astype(np.int64)
    eta = np.array([_core.log_otsu(row)["eta"] for row in draws])
    eta = np.nan_to_num(eta, nan=0.0)
    return max(BIMODAL_MIN_ETA, float(np.quantile(eta, 1.0 - BIMODAL_ALPHA)))


# eta_critical_simulated(n) for n = 2..ETA_NULL_MAX_N, computed once: the
# simulation costs 4000 Otsu splits a size, and a report (or each of a
# label support's resamples) would pay it again in every new process.
ETA_CRITICAL = (
    1.0, 0.9999716792704143, 0.9972790297169813, 0.9864469743478661,
    0.9718124130421815, 0.9500220599785328, 0.9370504325542395, 0.9247613718023048,
    0.907265622527855, 0.8985229329039526, 0.8870661092599039, 0.875583998853688,
    0.8676047743415511, 0.8628541139646819, 0.8545413279314533, 0.8458945133232944,
    0.8421783015885654, 0.8418111654625816, 0.8237624371880421, 0.8287173053291536,
    0.825408744761683, 0.81317127584609, 0.816743658636059, 0.809322769955688,
    0.8049875044192303, 0.8012034990312041, 0.8, 0.8014188653238777,
    0.8, 0.8, 0.8, 0.8,
    0.8, 0.8, 0.8, 0.8,
    0.8, 0.8, 0.8, 0.8,
    0.8, 0.8, 0.8, 0.8,
    0.8, 0.8, 0.8, 0.8,
    0.8, 0.8, 0.8, 0.8,
    0.8, 0.8, 0.8, 0.8,
    0.8, 0.8, 0.8, 0.8,
    0.8, 0.8, 0.8,
)


def bimodal_split_ns(wait_ns: np.ndarray) -> Optional[float]:
    """The threshold (ns) of :func:`bimodal_split`, or None."""
    split = bimodal_split(wait_ns)
    return None if split is None else split["threshold_ns"]


# Two groups against the compute step.  When the waits form two separate
# groups (bimodal_split: the structure itself is the evidence, which a
# lone wait under a scheduler tick lacks) and the upper one is at most
# HEAVY_TAIL_MAX_STALL_SHARE of the fetches, the upper group is the stalls
# wherever each of them delays its step by at least this share of the
# median compute past the lower group's typical wait: the same 20% of a
# step that makes a run input-bound (TensorFlow's input-pipeline
# analyzer).  Neither the 1 ms floor nor half the median step applies
# then: both are guards against single waits that stand out of one noisy
# group, and a probe loop whose every 4th fetch waits 1.1 ms against
# 0.18 ms (input 18% of a 2.4 ms step) lost its whole slow group under
# half a step.  Nor does BIMODAL_MIN_RATIO: what makes the upper group
# stalls is what each adds to its step, which this share of the compute
# judges; a fixed 4x between the groups lost the same loop at 1.1 against
# 0.3 ms (3.65x, eta 0.99: time.sleep's own 0.1 ms on every fetch), whose
# slow group adds 27% of the compute.  Groups closer than 4x must show
# eta beyond one group's at the run's size instead (eta_critical).
# Whether the group matters as a whole is stalls_matter's.
STALL_MIN_COMPUTE_SHARE = STALL_FLOOR_STEP_SHARE


# The stall rule's codes (StallRule.code); this family's WORDS word them.
RULE_GIVEN = "given"            # the caller's threshold, absolute
RULE_NO_STEPS = "no_steps"      # no steady-state steps: STALL_FLOOR_S
RULE_FLOOR = "floor"            # the floor (below)
RULE_P95 = "p95"                # STALL_P95_SHARE of the p95 wait
RULE_OTSU = "otsu"              # the Otsu split of log(wait)
RULE_ALL_SLOW = "all_slow"      # every fetch slow, one group: the floor
RULE_ALL_SLOW_SPLIT = "all_slow_split"  # every fetch slow, large waits on top
RULE_STEP = "step"              # STALL_MIN_STEP_SHARE of the median step
RULE_RATIO = "ratio"            # STALL_MIN_RATIO times the median wait
RULE_COMPUTE = "compute"        # two groups: the lower's wait + STALL_MIN_COMPUTE_SHARE of compute
RULE_POSITION = "position"      # the waits at one phase of a period rank above the rest


class StallRule(NamedTuple):
    """What the stall threshold rule decided.

    ``code`` is one of the RULE_* codes; for RULE_ALL_SLOW_SPLIT, ``basis``
    names the candidate that set the threshold (RULE_STEP, RULE_P95 or
    RULE_OTSU).  ``floor_ns`` is max(STALL_FLOOR_S, STALL_FLOOR_STEP_SHARE
    of the median step) in ns, below which a wait is not material;
    ``all_slow`` says that even the p10 wait clears it (every fetch is slow, whether or not larger stalls stand out
    on top); ``given_s`` is the caller's threshold (s) for RULE_GIVEN;
    ``least_ns`` the least a stall adds to its step, max(floor,
    STALL_MIN_STEP_SHARE of the median step) (automatic rules only);
    ``position`` the position rule's test (RULE_POSITION only)."""

    threshold_ns: int
    code: str
    every_fetch_slow: bool
    floor_ns: float
    all_slow: bool = False
    given_s: Optional[float] = None
    basis: Optional[str] = None
    least_ns: Optional[float] = None
    position: Optional["PositionTest"] = None


class KnownStats(NamedTuple):
    """Order statistics of the same waits and steps that a caller has
    already selected (ns; None: not known), so that the rule does not
    select them again over a long run: ``wait_p10_ns`` and ``wait_p95_ns``
    (the waits' ALL_SLOW_PERCENTILE and STALL_PERCENTILE),
    ``median_step_ns``, ``median_compute_ns`` (of step - wait); each as
    ``_core.percentiles`` gives it."""

    wait_p10_ns: Optional[float] = None
    wait_p95_ns: Optional[float] = None
    median_step_ns: Optional[float] = None
    median_compute_ns: Optional[float] = None


def stall_threshold_ns(
    wait_ns: np.ndarray, step_ns: np.ndarray, given_s: Optional[float],
    position: bool = True, known: Optional[KnownStats] = None
) -> StallRule:
    """The stall threshold (see :func:`_by_size`), and (``position``) where the sizes
    alone show no group of stalls (one slow group, or fewer than
    MIN_GROUP_ON_TOP waits past the bar) in a short run, the position rule
    (:func:`position_test`): larger waits at one phase of a period are the
    stalls, past the geometric mean of the two sides' medians
    (RULE_POSITION, its test in ``position``), where they are at least
    MIN_GROUP_ON_TOP and at most HEAVY_TAIL_MAX_STALL_SHARE of the fetches.
    "No group": one slow group (RULE_ALL_SLOW), or a size rule other than
    the two-group ones (_BY_GROUPS) whose bar leaves fewer than
    MIN_GROUP_ON_TOP waits, or waits that do not matter (stalls_matter).
    The phase's median wait must also pass the others' by
    STALL_MIN_COMPUTE_SHARE of the median compute, as two groups' must."""
    rule = _by_size(wait_ns, step_ns, given_s, known)
    if not position or given_s is not None or len(wait_ns) > POSITION_MAX_STEPS:
        return rule
    if rule.code in _BY_GROUPS:
        return rule
    if rule.code != RULE_ALL_SLOW:
        above = wait_ns > rule.threshold_ns
        if (np.count_nonzero(above) >= MIN_GROUP_ON_TOP and stalls_matter(
                wait_ns, step_ns, above, rule.code, rule.threshold_ns).code == STALLS_KEPT):
            return rule     # the sizes found stalls that matter
    pos = position_test(wait_ns)
    if pos is None:
        return rule
    # Each stall by position must delay its step as a stall of two groups
    # does (STALL_MIN_COMPUTE_SHARE of the median compute past the other
    # fetches' median): a phase whose waits rank above the rest by 0.47 ms
    # on a 10.7 ms step (the round's own order among 6 healthy workers)
    # read "120 stalls ... PERIODIC every 3 steps" (helper 28B).
    compute = (known.median_compute_ns if known is not None
               and known.median_compute_ns is not None
               else _core.percentiles(step_ns - wait_ns, 50.0))
    if pos.on_median_ns - pos.off_median_ns < STALL_MIN_COMPUTE_SHARE * max(compute, 0.0):
        return rule
    bar = math.sqrt(max(pos.on_median_ns, 1.0) * max(pos.off_median_ns, 1.0))
    above = int(np.count_nonzero(wait_ns > bar))
    if above < MIN_GROUP_ON_TOP or not _is_minority(wait_ns, bar):
        # The larger waits are most fetches (the typical fetch), or too
        # few past the bar: no stalls by position either.
        return rule
    return StallRule(int(bar), RULE_POSITION, False, rule.floor_ns, rule.all_slow,
                     least_ns=rule.least_ns, position=pos)


# The size rules that found two groups of waits; the others (one group,
# or a bar set by the floor, half a step, the p95 or the median alone)
# leave the position rule its say.
_BY_GROUPS = frozenset((RULE_OTSU, RULE_COMPUTE, RULE_ALL_SLOW_SPLIT))


def _by_size(
    wait_ns: np.ndarray, step_ns: np.ndarray, given_s: Optional[float],
    known: Optional[KnownStats] = None
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
    threshold is used: p10 wait above the threshold).  ``known``: the
    order statistics already selected (:class:`KnownStats`).
    """
    if len(wait_ns) == 0:
        floor = STALL_FLOOR_S * 1e9
        if given_s is not None:
            return StallRule(int(round(given_s * 1e9)), RULE_GIVEN, False, floor, given_s=given_s)
        return StallRule(int(floor), RULE_NO_STEPS, False, floor)
    known = known or KnownStats()
    if known.wait_p10_ns is None or known.wait_p95_ns is None:
        p10, p95 = _core.percentiles(wait_ns, [ALL_SLOW_PERCENTILE, STALL_PERCENTILE])
    else:
        p10, p95 = known.wait_p10_ns, known.wait_p95_ns
    median_step = known.median_step_ns
    if median_step is None:
        median_step = _core.percentiles(step_ns, 50.0)
    floor = max(STALL_FLOOR_S * 1e9, STALL_FLOOR_STEP_SHARE * median_step)
    if given_s is not None:
        threshold = int(round(given_s * 1e9))
        return StallRule(threshold, RULE_GIVEN, bool(p10 > threshold), floor,
                         bool(p10 > floor), given_s=given_s)
    every_slow = bool(p10 > floor)
    tested = False      # the all-slow split passed eta's test at the run's size
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
        # Groups closer than BIMODAL_MIN_RATIO need eta beyond one group's
        # at this size, as below: every 3rd fetch waiting 35 ms over 10 ms
        # (3.5x, eta 0.98) is a group on top, not uniformly slow input.
        slow = wait_ns[wait_ns > floor]
        groups = bimodal_split(slow, min_ratio=1.0)
        if (groups is not None
                and groups["upper_mean_ns"] < BIMODAL_MIN_RATIO * groups["lower_mean_ns"]):
            tested = groups["eta"] > eta_critical(len(slow))
            groups = groups if tested else None
        del slow
        if tested and _is_minority(wait_ns, groups["threshold_ns"]) and int(
                np.count_nonzero(wait_ns > groups["threshold_ns"])) >= MIN_GROUP_ON_TOP:
            # Two groups shown at this size: the upper one against the
            # compute, as for fetches that are not all slow (_two_groups);
            # half a median step does not bar it either.
            r = _two_groups(wait_ns, step_ns, groups, candidates[RULE_P95], floor, least,
                               known.median_compute_ns)
            if int(np.count_nonzero(wait_ns > r.threshold_ns)) >= MIN_GROUP_ON_TOP:
                return StallRule(r.threshold_ns, RULE_ALL_SLOW_SPLIT, False, floor, True,
                                 basis=r.code, least_ns=least)
            # The upper group does not stand past the compute's share: one
            # slow group.  Sixteen 101 ms waits within 0.5 ms of each other
            # at num_workers=0 split "by eta" and, the line raised past all
            # of them, read "no stalls" in 2 of 20 quiet runs (bench_truth
            # seed-16-0w).
            groups = None
        split = None if groups is None else groups["threshold_ns"]
    else:
        # Two groups, the upper a minority: the stalls against the compute
        # (STALL_MIN_COMPUTE_SHARE), at any ratio between the groups where
        # eta shows two groups at this size (eta_critical).
        groups = bimodal_split(wait_ns, min_ratio=1.0)
        close = (groups is not None
                 and groups["upper_mean_ns"] < BIMODAL_MIN_RATIO * groups["lower_mean_ns"])
        if close and groups["eta"] <= eta_critical(len(wait_ns)):
            groups = None
        if groups is not None and _is_minority(wait_ns, groups["threshold_ns"]):
            return _two_groups(wait_ns, step_ns, groups, candidates[RULE_P95], floor, least,
                               known.median_compute_ns)
        # Otherwise an Otsu candidate only from groups BIMODAL_MIN_RATIO apart.
        split = None if groups is None or close else groups["threshold_ns"]
    if split is not None:
        candidates[RULE_OTSU] = split
    elif not every_slow and not _stands_out(wait_ns, max(candidates.values())):
        # No two groups, and the waits past the other candidates do not
        # form a group of their own (at least MIN_GROUP_ON_TOP, at most
        # half the fetches, typically BIMODAL_MIN_RATIO times the rest): a
        # stall must stand apart from the typical fetch by itself,
        # STALL_MIN_RATIO times the (lower) median wait.
        candidates[RULE_RATIO] = STALL_MIN_RATIO * _numbers.lower_median(wait_ns)
    basis = max(candidates, key=candidates.get)
    threshold = int(candidates[basis])
    if not every_slow:
        return StallRule(threshold, basis, False, floor, least_ns=least)
    if not _stands_out(wait_ns, threshold):
        return StallRule(int(floor), RULE_ALL_SLOW, True, floor, True, least_ns=least)
    return StallRule(threshold, RULE_ALL_SLOW_SPLIT, False, floor, True, basis=basis,
                     least_ns=least)


# Larger waits that recur at one phase of a period, where no group shows
# by size alone.  Two groups 3x apart with 30% jitter on each, a quarter of
# 40 fetches on top, give Otsu's eta about 0.72, under the one-group line at
# that size (eta_critical: 0.77), although every 4th wait ranks above every
# other: the position shows what the sizes cannot.  The test: for each
# period 2..POSITION_MAX_PERIOD (at most a quarter of the fetches) and each
# phase, the one-sided Mann-Whitney test of the
# waits at that phase against the rest, Bonferroni over every (period,
# phase) pair tried, at POSITION_ALPHA (a period's false-alarm rate,
# stall_timing's PERIOD_ALPHA).  Runs up to
# POSITION_MAX_STEPS steady fetches (the short runs where sizes alone lack
# power; a long run's eta test has it).  The stalls are then the waits past
# the geometric mean of the two sides' medians, and the cadence the rule
# found is the evidence: the temporal test's own p-value, over stalls
# chosen by position, is not.
POSITION_MAX_PERIOD = 16
POSITION_MAX_STEPS = 4096
POSITION_MIN_STEPS = 16
POSITION_ALPHA = 0.01


class PositionTest(NamedTuple):
    """The position rule's answer: ``period`` and ``phase`` (index % period
    among the steady fetches), ``p_value`` (Bonferroni-adjusted over
    ``tests`` pairs), and the medians (ns) at that phase and elsewhere."""

    period: int
    phase: int
    p_value: float
    tests: int
    on_median_ns: float
    off_median_ns: float


def position_test(wait_ns: np.ndarray) -> Optional[PositionTest]:
    """The (period, phase) whose waits rank most above the rest's, where
    that passes POSITION_ALPHA after Bonferroni (see above); else None.
    ``wait_ns``: the steady waits in step order (shape (n,)).  Each test is
    Mann-Whitney's U in its normal form with the tie correction and a
    continuity correction (scipy.stats.mannwhitneyu's asymptotic method),
    from one ranking of the waits: a run of 4096 fetches costs about a
    millisecond."""

    n = len(wait_ns)
    if n < POSITION_MIN_STEPS or n > POSITION_MAX_STEPS:
        return None
    x = np.asarray(wait_ns, dtype=np.float64)
    ranks = rankdata(x)
    _, ties = np.unique(x, return_counts=True)
    tie_term = float((ties ** 3 - ties).sum()) / (n * (n - 1))
    at = np.arange(n)
    best, tests = None, 0
    for period in range(2, min(POSITION_MAX_PERIOD, n // 4) + 1):
        phase = at % period
        k = np.bincount(phase, minlength=period).astype(np.float64)
        u = np.bincount(phase, weights=ranks, minlength=period) - k * (k + 1) / 2
        m = n - k
        sd = np.sqrt(k * m / 12.0 * ((n + 1) - tie_term))
        z = np.where(sd > 0, (u - k * m / 2.0 - 0.5) / np.where(sd > 0, sd, 1.0), -np.inf)
        tests += period
        j = int(np.argmax(z))
        if best is None or z[j] > best[0]:
            best = (float(z[j]), period, j)
    if best is None:
        return None
    p = float(norm.sf(best[0]))
    if p * tests >= POSITION_ALPHA:
        return None
    _, period, phase = best
    on = at % period == phase
    return PositionTest(period, phase, min(1.0, p * tests), tests,
                        float(np.median(x[on])), float(np.median(x[~on])))


def _is_minority(wait_ns: np.ndarray, threshold_ns: float) -> bool:
    """Whether the waits above ``threshold_ns`` are at most
    HEAVY_TAIL_MAX_STALL_SHARE of them: stalls are the exception; an upper
    group that holds most fetches is the typical fetch (a per-batch cost
    or uniformly slow input), never "mostly fast with stalls"."""
    above = int(np.count_nonzero(wait_ns > threshold_ns))
    return above <= HEAVY_TAIL_MAX_STALL_SHARE * len(wait_ns)


def _two_groups(wait_ns: np.ndarray, step_ns: np.ndarray, groups: dict, p95_bar: float,
                floor: float, least: float, median_compute_ns: Optional[float] = None
                ) -> StallRule:
    """The threshold over two separate groups of waits (see
    STALL_MIN_COMPUTE_SHARE): the largest of the Otsu split, the lower
    group's median wait plus that share of the median compute, and
    STALL_P95_SHARE of the p95 wait ``p95_bar`` (a third group of small
    waits under a round's large stalls, the workers finishing in pairs,
    stays out of the stalls)."""
    # The lower group is the first `low` waits in order.
    low = int(np.count_nonzero(wait_ns <= groups["threshold_ns"]))
    typical = float(_numbers.span_middles(wait_ns, [(0, low)])[0][0]) if low else 0.0
    compute = (median_compute_ns if median_compute_ns is not None
               else _core.percentiles(step_ns - wait_ns, 50.0))
    bars = {RULE_OTSU: groups["threshold_ns"], RULE_P95: p95_bar,
            RULE_COMPUTE: typical + STALL_MIN_COMPUTE_SHARE * max(compute, 0.0)}
    code = max(bars, key=bars.get)
    return StallRule(int(bars[code]), code, False, floor, least_ns=least)


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
    if not _numbers._is_int(x):
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
    20x the median.  (Closer groups stand out by eta's test at the run's
    size instead: stall_threshold_ns.)"""
    above = wait_ns > threshold
    k = int(np.count_nonzero(above))
    if k < MIN_GROUP_ON_TOP or k > HEAVY_TAIL_MAX_STALL_SHARE * len(wait_ns):
        return False
    gap = _mean_log(wait_ns[above]) - _mean_log(wait_ns[~above])
    return bool(gap >= math.log(BIMODAL_MIN_RATIO))


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
STALL_MIN_COST_SHARE = input_bound.COMPUTE_BOUND_SHARE

STALLS_KEPT = "kept"            # the waits above the threshold are stalls
STALLS_LONE = "lone"            # fewer than MIN_GROUP_ON_TOP: outliers
STALLS_SMALL = "small"          # under STALL_MIN_COST_SHARE: outliers


class StallsMatter(NamedTuple):
    """Whether the waits above the threshold are stalls (``code`` one of
    STALLS_KEPT, STALLS_LONE, STALLS_SMALL) and their cost: the sum of their
    excess over the median calm wait, as a share of the steady step time
    (None without steps); ``calm_median_ns``, that median (numpy.median
    of the waits not flagged; 0.0 where every wait is)."""

    code: str
    cost_share: Optional[float]
    calm_median_ns: float


def stalls_matter(wait_ns: np.ndarray, step_ns: np.ndarray, above: np.ndarray,
                  rule_code: str, threshold_ns: Optional[int] = None) -> StallsMatter:
    """Whether the steady-state waits ``wait_ns`` flagged by ``above`` (a
    mask, same shape) are stalls or outliers, by the rule above.
    ``step_ns`` are the steps' durations; ``rule_code`` the stall rule's
    code (RULE_GIVEN and RULE_ALL_SLOW keep every flagged wait);
    ``threshold_ns``, where ``above`` is exactly ``wait_ns >
    threshold_ns``, lets the calm waits be read by rank, not gathered."""
    k, n = int(np.count_nonzero(above)), len(wait_ns)
    total = float(np.sum(step_ns, dtype=np.float64))
    if threshold_ns is not None:
        # The flagged waits are the last k in order, the calm ones the
        # first n - k, each at most every flagged one: each flagged wait's
        # excess over the calm median is its difference from it.
        typical = (_numbers.mid(_numbers.span_middles(wait_ns, [(0, n - k)])[0])
                   if k < n else 0.0)
        excess = max(float(np.sum(wait_ns, where=above, dtype=np.float64)) - k * typical, 0.0)
    else:
        calm = wait_ns[~above]
        typical = _numbers.int_median(calm) if len(calm) else 0.0
        del calm
        excess = float(np.maximum(wait_ns[above].astype(np.float64) - typical, 0.0).sum())
    cost = excess / total if total > 0 else None
    if k == 0 or rule_code in (RULE_GIVEN, RULE_ALL_SLOW):
        return StallsMatter(STALLS_KEPT, cost, typical)
    if k < MIN_GROUP_ON_TOP:
        return StallsMatter(STALLS_LONE, cost, typical)
    if cost is None or cost < STALL_MIN_COST_SHARE:
        return StallsMatter(STALLS_SMALL, cost, typical)
    return StallsMatter(STALLS_KEPT, cost, typical)


# More than this share of steps stalling is no longer "mostly fast".
HEAVY_TAIL_MAX_STALL_SHARE = 0.5


# traceml.configure()'s defaults live in csrc/sampler.c (tm_sampler_init),
# with their reasons: the sampler holds them before any Python runs, and one
# copy cannot drift from another.

# Thresholds are compared in int64 nanoseconds, which end near 9.2e9 s.
MAX_THRESHOLD_S = 9e9


def _floor(the: str = "") -> str:
    """The stall floor: "max(1 ms, 20% of median step)"."""
    return (f"max({fmt_s(STALL_FLOOR_S)}, {pct(STALL_FLOOR_STEP_SHARE)} "
            f"of {the}median step)")


def _threshold_basis(code: str, all_slow: bool) -> str:
    if code == RULE_FLOOR:
        return f"floor {_floor()}"
    if code == RULE_STEP:
        return (f"max({fmt_s(STALL_FLOOR_S)}, {_words._of_the(STALL_MIN_STEP_SHARE)} "
                "median step)")
    if code == RULE_COMPUTE:
        return (f"two groups: the fast group's median wait + {_words._of_the(STALL_MIN_COMPUTE_SHARE)} "
                "median compute")
    if code == RULE_RATIO:
        return f"{STALL_MIN_RATIO:g}x the median wait (no two separate groups)"
    if code == RULE_P95:
        return f"{_words._of_the(STALL_P95_SHARE)} {_words._p(STALL_PERCENTILE)} wait"
    return ("Otsu split between slow and stalled fetches" if all_slow
            else "Otsu split between fast and slow fetches")


def _slow() -> str:
    return f"every fetch is slow ({_words._p(ALL_SLOW_PERCENTILE)} wait > floor)"


def _auto(code: str) -> Words:
    return lambda p: "auto: " + _threshold_basis(code, False)


# The words of the stall threshold rule that applied, by rule code
# ("threshold_" + StallRule.code).
WORDS: dict[str, Words] = {
    "threshold_" + RULE_GIVEN: lambda p: f"given: wait > {p['given_s']:g} s",
    "threshold_" + RULE_NO_STEPS: lambda p: "auto: no steady-state steps",
    "threshold_" + RULE_ALL_SLOW: lambda p: f"auto: {_slow()}; floor {_floor()}",
    "threshold_" + RULE_POSITION: lambda p: (
        f"auto: the waits at every {nth(p['period'])} fetch (phase {p['phase']}) rank above the "
        f"rest (Mann-Whitney, p = {p['p_value']:.2g} over {p['tests']} periods and phases "
        f"tried, < {POSITION_ALPHA:g}), where their sizes show no group of their own; past "
        "the geometric mean of the two medians"),
    "threshold_" + RULE_ALL_SLOW_SPLIT: lambda p: (
        f"auto: {_slow()} and a separate group of large waits stands out (at least "
        f"{MIN_GROUP_ON_TOP}, at most {_words._of_the(HEAVY_TAIL_MAX_STALL_SHARE)} "
        f"fetches, {BIMODAL_MIN_RATIO:g}x the rest or two groups by Otsu's eta at this "
        "many fetches); "
        + _threshold_basis(p["basis"], True)),
    **{"threshold_" + code: _auto(code)
       for code in (RULE_FLOOR, RULE_OTSU, RULE_STEP, RULE_RATIO, RULE_COMPUTE, RULE_P95)},
}


def stall_finding(rule: StallRule) -> Finding:
    """The stall threshold rule that applied (:func:`stall_threshold_ns`'s
    StallRule) as a Finding: its code, the caller's threshold (s) for
    RULE_GIVEN, the candidate that set it for RULE_ALL_SLOW_SPLIT."""
    numbers: dict = {}
    if rule.code == RULE_GIVEN:
        numbers["given_s"] = float(rule.given_s)
    if rule.code == RULE_ALL_SLOW_SPLIT:
        numbers["basis"] = rule.basis
    if rule.code == RULE_POSITION:
        numbers.update(period=rule.position.period, phase=rule.position.phase,
                       p_value=rule.position.p_value, tests=rule.position.tests)
    return Finding("threshold_" + rule.code, numbers)
