"""A trend of the input wait over the run (RISING / FALLING), or one change
of level after the first epoch (STEP).
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
from scipy.signal import lfilter
from scipy.special import ndtri
from scipy.stats import kendalltau, rankdata, theilslopes

from ..fmt import fmt_s
from ._types import Finding, Words
from . import _numbers, input_bound


# A wait that grows (or shrinks) steadily over the run is state that
# changes per step (a cache or list kept in the dataset, a leak,
# fragmentation), which more workers would only hide.
#
# The model: the steady waits are a level, perhaps a trend, and noise that
# is stationary but not independent (prefetch and bursts make neighbouring
# waits alike).  The null hypothesis: no trend, the waits stationary.  It
# is tested over block medians (at most TREND_BLOCKS contiguous blocks, so
# 10M steps stay fast and one stall cannot drive it; one step a block up
# to TREND_BLOCKS steps):
# * the statistic is Mann-Kendall's S, the sum of sign(m_j - m_i) over the
#   pairs i < j of block medians in step order;
# * its null distribution comes from an AR-sieve bootstrap under the null
#   (Buhlmann 1997, "Sieve bootstrap for time series", Bernoulli 3(2); for
#   Mann-Kendall's S under serial dependence, Cabilio et al. 2013,
#   "Bootstrap rank tests for trend in time series"): an
#   autoregression fitted by Yule-Walker to the normal scores of the block
#   medians (their ranks through the inverse normal: S does not change
#   under a monotone map of the waits, and a stall then weighs no more
#   than any high wait), its order chosen by AIC up to min(m - 1,
#   10 log10 m) (R's ar() default), driven by its own innovations drawn
#   with replacement, after a burn-in of TREND_BURN_IN + m draws:
#   TREND_RESAMPLES stationary series with the run's own dependence, from
#   a Generator seeded with TREND_SEED, so the same run gives the same
#   answer.  The autoregression is fitted to the series as it is, not to
#   the series less its trend: the bootstrap draws from a model of the
#   null.  (Fitted to the detrended residuals, the dependence of a short
#   run is underestimated.  Measured at a nominal 1% on AR(1) noise, phi
#   0.8, log sd 0.5, the same 200 seeds each: a moving-block bootstrap
#   (Kunsch 1989) of the residuals with Politis & White's (2004) block
#   length claimed a trend in 15% of 60-80-step runs and 4% of 180-200-step
#   ones; a moving-block bootstrap of the series itself (Onoz & Bayazit
#   2012) in 4.5% and 1%; this sieve in 1% and 1.5%; Kendall's own p-value,
#   which assumes independent waits, in 35.5% and 31.5%.)
# * the Theil-Sen slope (the median pairwise slope of the block medians
#   against their centre step) with Sen's (1968) interval: the pairwise
#   slopes of ranks (N - C)/2 and (N + C)/2 among the N, C the
#   bootstrap's critical |S| at TREND_ALPHA (the same 1 in 100 false-alarm
#   rate as a period).  A trend is claimed only when that interval excludes
#   0 (then the bootstrap p-value (1 + #{|S*| >= |S|}) / (TREND_RESAMPLES +
#   1) is under TREND_ALPHA); a slope whose interval holds 0 is "not yet"
#   and tells no trend.
# The trend must also be material, checked first (cheap): the median of
# the last tenth of the steady waits and that of the first tenth are at
# least TREND_MIN_RATIO apart, and they differ by more than the floor
# (max(1 ms, 20% of the median step)), below which a wait does not matter
# to the step, and by at least TREND_MIN_WAIT_SHARE of the mean steady
# wait: a drift that moves the wait by less than half its mean is not what
# the loop waits on (a user trial's loader with one slow sample in 5 and a
# constant cost per item read "FALLING 4.15 ms -> 1.03 ms ... a warm-up"
# beside stalls that made a 30.7 ms mean wait).
# With at least TREND_MIN_EPOCHS epochs whose median steady waits move
# monotonically, the Theil-Sen slope over epochs is given too.
#
# STEP: the first recorded epoch's waits differ in level from the later
# epochs', and within the later epochs the rule above answers no: a
# one-off change after the first epoch (a cache filled in epoch 0,
# workers started once with persistent_workers), never a slope per step.
# The two medians (epoch 0's steady waits, the later epochs') must be
# material by the same three checks, and the change must be
# significant: the statistic is S between the two sides (the sum of
# sign(m_j - m_i) over block medians i of epoch 0 and j after it,
# Mann-Whitney's U in Kendall's form), against the same sieve bootstrap
# under the null of no change, at TREND_ALPHA.  Each side needs
# MIN_STEADY_STEPS steps (read by rounds, that many steps' rounds, at
# least STEP_MIN_SIDE_POINTS of them: a first epoch of 16 fetches at 2
# workers is 7 steady rounds, and a cache filled in it read "UNSETTLED
# ... look at what recurs every 2 steps" in 3 of 5 runs, helper 36A),
# and epoch 0 must not come back later in step order.  Where the two
# medians differ materially, a slope is tested within the later epochs
# alone (the rule above over their waits):
# RISING / FALLING when they trend by themselves; the rule over the whole
# run when at least TREND_MIN_EPOCHS epochs' medians move one way and the
# later epochs' own tenths differ materially (a rise carried on epoch
# after epoch); else STEP when the change is significant, else nothing
# (not yet).  A slope fitted across the change
# read a 2.9 -> 1.7 ms drop after epoch 0 as "FALLING ... -12.9 us per
# step, a warm-up" in 3 of 12 runs of a user's trial.
#
# A trend the rule finds may still be one change of level inside the run
# (an IterableDataset whose faster worker's shard runs out at step 100:
# the wait 1 ms, then 10 ms).  Two models of the block medians, each with
# its fit: a line, and two levels split at the change point that fits
# best (least squares over the block medians).  The run reads as one
# change (STEP, at ``changed_at_step``) where the two levels fit better
# than the line and neither side trends by itself (the slope test above
# on each side's block medians, moving that side by at least
# SIDE_TREND_SHARE of the change); a steady rise fits the line better,
# and each half of it still rises by about the change.
RISING = "RISING"
FALLING = "FALLING"
STEP = "STEP"
TREND_BLOCKS = 200
TREND_ALPHA = 0.01
# (TREND_RESAMPLES + 1) * TREND_ALPHA is a whole number, 5: the Monte Carlo
# test is exact at TREND_ALPHA (Davison & Hinkley 1997, Bootstrap Methods
# and their Application, ch. 4); 499 rather than 999 keeps a 200-block test
# to 15-30 ms here.
TREND_RESAMPLES = 499
# Any fixed seed: the same run gives the same answer.
TREND_SEED = 20_011
# Innovations drawn before a series is kept, beside its own length: the
# burn-in of R's nortsTest sieve.bootstrap (h = 100), so the series start
# from the autoregression's stationary state.
TREND_BURN_IN = 100
TREND_MIN_RATIO = 2.0
TREND_TENTH = 0.1
TREND_MIN_EPOCHS = 3
TREND_MIN_WAIT_SHARE = 0.5
# The two change tests (Pettitt's over every cut, and epoch 0 against the
# later epochs) draw their null from the sieve fitted to the block
# medians' scores less each side's mean: fitted to the series as it is, a
# shift reads as persistence, the null widens with the shift, and the
# clearer the change the less it is found (Vogelsang 1999, "Sources of
# nonmonotonic power when testing for a shift in mean of a dynamic time
# series", J. Econometrics 88).  Measured over 40 seeds a setting, a level
# that triples at 25% or 75% of 200 steps of independent noise (log sd
# 0.3) was found in 2 and 1 of 40 that way, and in 40 of 40 from the
# residuals.  Where the residuals stay persistent (lag-1 autocorrelation
# at least CHANGE_RESIDUAL_MAX_LAG1), one shift does not explain the
# series' persistence (a level that wanders, not one that changes once):
# the residuals' null then claims too often (stationary AR(1) of 200
# steps, log sd 0.8, at nominal 1%: STEP at phi 0.9, 0.95, 0.98 in 6%,
# 14%, 22% of 200 seeds), and the series' own null serves (0.5%, 2%, 4%,
# as before).  With the fallback at 0.65: no more claims than before on that
# noise (phi 0.8-0.98, 200 and 400 steps, 200 seeds each), and a tripled
# level at 25%, 50% or 75% of the run found in 38-40 of 40 at phi 0 and
# 0.5.
CHANGE_RESIDUAL_MAX_LAG1 = 0.65
# A side of a change of level trends by itself where its own significant
# slope moves it by at least this share of the change: a quarter, under
# which a drift is the change's noise, not a second story (a ramp split
# in two moves each side by about the whole change).
SIDE_TREND_SHARE = 0.25


def _block_medians(x: np.ndarray, blocks: int) -> tuple[np.ndarray, np.ndarray]:
    """(centre index, median) of ``blocks`` contiguous blocks of the
    integers ``x``, block b holding steps [b n // blocks, (b + 1) n //
    blocks): sizes differ by at most one step, so each median weighs
    alike (numpy.median's values, by selection in C: no copy of ``x``)."""
    n = len(x)
    if n == blocks:
        return np.arange(n, dtype=np.float64), x.astype(np.float64)
    edge = np.arange(blocks + 1, dtype=np.int64) * n // blocks
    med = np.empty(blocks)
    for b in range(blocks):
        med[b] = _numbers.int_median(x[edge[b]:edge[b + 1]])
    centre = (edge[:-1] + edge[1:] - 1) / 2.0
    return centre, med


def _null_series(med: np.ndarray, cut: Optional[int] = None) -> np.ndarray:
    """TREND_RESAMPLES stationary series as long as ``med`` (rows) from the
    AR sieve of its normal scores (see above).  With ``cut`` (a change
    test's split before index ``cut``), the sieve is fitted to the scores
    less each side's mean, unless those residuals stay persistent (lag-1
    autocorrelation at least CHANGE_RESIDUAL_MAX_LAG1): see
    CHANGE_RESIDUAL_MAX_LAG1."""

    m = len(med)
    z = ndtri((rankdata(med) - 0.5) / m)
    z -= z.mean()
    if cut is not None and 0 < cut < m:
        resid = z.copy()
        resid[:cut] -= resid[:cut].mean()
        resid[cut:] -= resid[cut:].mean()
        power = float(resid @ resid)
        if power > 0.0 and float(resid[1:] @ resid[:-1]) / power < CHANGE_RESIDUAL_MAX_LAG1:
            z = resid
    order_max = min(m - 1, int(10 * math.log10(m)))
    r = np.array([z[k:] @ z[:m - k] for k in range(order_max + 1)]) / m
    # Levinson-Durbin: the Yule-Walker fit of every order, kept by AIC.
    phi = best = np.zeros(0)
    var = r[0]
    best_aic = m * math.log(var)
    for p in range(1, order_max + 1):
        k = (r[p] - phi @ r[p - 1:0:-1]) / var
        if not var * (1.0 - k * k) > 0.0:   # a perfect fit (or rounding past it)
            break
        phi = np.r_[phi - k * phi[::-1], k]
        var *= 1.0 - k * k
        aic = m * math.log(var) + 2 * p
        if aic < best_aic:
            best_aic, best = aic, phi
    ar = np.r_[1.0, -best]
    innov = lfilter(ar, [1.0], z)[len(best):]
    innov -= innov.mean()
    rng = np.random.default_rng(TREND_SEED)
    burn = TREND_BURN_IN + m
    if not len(best):   # order 0: the draws themselves
        return innov[rng.integers(0, len(innov), size=(TREND_RESAMPLES, m))]
    draws = innov[rng.integers(0, len(innov), size=(TREND_RESAMPLES, burn + m))]
    return lfilter([1.0], ar, draws, axis=1)[:, burn:]


def _s_rows(series: np.ndarray) -> np.ndarray:
    """Mann-Kendall's S of each row (continuous values: no ties), over the
    rows' ranks as bytes, one column against those before it (a third
    faster than over the float64 values)."""
    rows, m = series.shape
    ranks = series.argsort(axis=1).argsort(axis=1).astype(np.uint8 if m <= 256 else np.int32).T
    ranks = np.ascontiguousarray(ranks)
    above = np.zeros(rows, dtype=np.int64)
    for j in range(1, m):
        above += np.count_nonzero(ranks[:j] < ranks[j], axis=0)
    return 2 * above - m * (m - 1) // 2


def _step_s_rows(series: np.ndarray, cut: int) -> np.ndarray:
    """S between the first ``cut`` values of each row and the rest, from
    the ranks (continuous values: no ties)."""
    ranks = series.argsort(axis=1).argsort(axis=1)
    before, after = cut, series.shape[1] - cut
    higher_after = ranks[:, cut:].sum(axis=1) - after * (after - 1) // 2
    return 2 * higher_after - before * after


def _critical(null_s: np.ndarray) -> float:
    """The bootstrap's critical |S|: an |S| above it is exceeded by at most
    j of the null series, j the most that keeps (1 + j) /
    (TREND_RESAMPLES + 1) under TREND_ALPHA; inf when none may."""
    j = math.ceil(TREND_ALPHA * (TREND_RESAMPLES + 1) - 1) - 1
    if j < 0:
        return math.inf
    return float(np.sort(np.abs(null_s))[len(null_s) - 1 - j])


def _p_value(s: float, null_s: np.ndarray) -> float:
    return (1 + int(np.count_nonzero(np.abs(null_s) >= abs(s)))) / (len(null_s) + 1)


def _slope_test(centre: np.ndarray, med: np.ndarray) -> dict:
    """{slope, low, high, p_value, s} of the block medians ``med`` at their
    ``centre`` steps: the Theil-Sen slope (ns per step), Sen's interval at
    1 - TREND_ALPHA (None, None where it is unbounded) and the bootstrap
    p-value of S."""
    i, j = np.triu_indices(len(med), 1)
    dy = med[j] - med[i]
    slopes = np.sort(dy / (centre[j] - centre[i]))
    s = float(np.sign(dy).sum())
    null_s = _s_rows(_null_series(med))
    pairs = len(slopes)
    rank = math.ceil((pairs - _critical(null_s)) / 2)
    low, high = (float(slopes[rank - 1]), float(slopes[pairs - rank])) if rank >= 1 else (None, None)
    return {"slope": float(np.median(slopes)), "low": low, "high": high,
            "p_value": _p_value(s, null_s), "s": s}


def _material(a: float, b: float, floor_ns: float, x: np.ndarray) -> bool:
    """Medians ``a`` and ``b`` far enough apart to matter (see above)."""
    lo, hi = sorted((a, b))
    if hi < TREND_MIN_RATIO * max(lo, 1.0) or hi - lo <= floor_ns:
        return False
    return hi - lo >= TREND_MIN_WAIT_SHARE * float(np.mean(x))


def _tenths(x: np.ndarray) -> tuple[float, float]:
    tenth = max(1, int(round(TREND_TENTH * len(x))))
    return _numbers.int_median(x[:tenth]), _numbers.int_median(x[-tenth:])


def _round_sums(x: np.ndarray, epoch: np.ndarray, round_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """(summed wait of each whole round of ``round_steps`` consecutive
    steps within an epoch, its epoch): the remainder of each epoch is left
    out.  Integer waits sum exactly (int64): the rules read the rounds by
    ranks, medians and ratios, the same on sums as on means."""
    starts = np.r_[0, np.flatnonzero(np.diff(epoch)) + 1, len(x)]
    sums, epochs = [], []
    for a, b in zip(starts[:-1], starts[1:]):
        whole = (b - a) // round_steps * round_steps
        if whole:
            # Column by column: a strided add a column runs several times
            # faster than a reduce along rows of a few fetches.
            rounds = x[a:a + whole].reshape(-1, round_steps)
            total = rounds[:, 0].copy()
            for k in range(1, round_steps):
                total += rounds[:, k]
            sums.append(total)
            epochs.append(np.full(whole // round_steps, epoch[a]))
    if not sums:
        return np.zeros(0, dtype=x.dtype), np.zeros(0, dtype=np.int64)
    return np.concatenate(sums), np.concatenate(epochs)


# The keys of a trend that hold a wait (s) or a wait per step or epoch
# (ms): read over rounds' sums, each is round_steps times the rounds'
# mean wait.
_WAIT_KEYS = ("first_tenth_median_s", "last_tenth_median_s", "before_median_s",
              "after_median_s", "first_epoch_median_s", "later_epochs_median_s",
              "slope_ms_per_epoch")


def _per_round_mean(found: dict, round_steps: int) -> dict:
    """``found``, a trend read over rounds' summed waits, in the rounds'
    mean wait, with its change and slopes per step (not per round)."""
    out = dict(found)
    for k in _WAIT_KEYS:
        if out.get(k) is not None:
            out[k] /= round_steps
    if out.get("changed_at_step") is not None:
        out["changed_at_step"] *= round_steps
    if out.get("slope_ms_per_step") is not None:
        # Per round of sums: round_steps for the mean, round_steps per step.
        out["slope_ms_per_step"] /= round_steps * round_steps
        out["slope_interval_ms_per_step"] = [
            v / (round_steps * round_steps) for v in out["slope_interval_ms_per_step"]]
    return {**out, "round_steps": round_steps}


def trend(wait_ns: np.ndarray, epoch: np.ndarray, floor_ns: float,
          round_steps: int = 1) -> Optional[dict]:
    """The trend of the steady-state waits ``wait_ns`` (in step order, with
    their ``epoch``) by the rules above, or None (no trend, not yet one, or
    fewer than MIN_STEADY_STEPS steps, or rounds).  ``floor_ns`` is the
    stall rule's floor (ns).

    ``round_steps`` (the loader's round, max(1, num_workers) fetches: each
    worker's batch once) > 1: the rule reads each round's mean wait rather
    than each fetch's.  In a round only the fetch whose batch is not yet
    made waits, so a cost per sample that grows shows in the stalled
    fetches alone, beside waits near zero; the fetch-by-fetch series
    alternates between the two, and its block medians and tenths' medians
    fall between them (on a simulated lock-step loop of 2 workers whose
    stall grows 1% a step, 200 steps: 1 of 4 seeds RISING fetch by fetch,
    4 of 4 by round).  A round's mean wait is stationary where the waits
    are, so the null model stands; slopes are given per step.  The rounds
    are read as integer sums (:func:`_round_sums`, the floor scaled
    alike), and the waits and slopes given in the rounds' mean.

    RISING / FALLING: {label, slope_ms_per_step, slope_interval_ms_per_step
    ([low, high], Sen's at 1 - TREND_ALPHA), slope_ms_per_epoch,
    first_tenth_median_s, last_tenth_median_s, tau (Kendall's tau-b of the
    block medians), p_value (the bootstrap's)}.  STEP: the same keys, the
    slopes and tau None, p_value the change's, with first_epoch,
    first_epoch_median_s and later_epochs_median_s.  ``round_steps`` > 1
    adds the key round_steps."""
    series = _series(wait_ns, epoch, floor_ns, round_steps)
    return None if series is None else _trend_of(series, round_steps)


def read(wait_ns: np.ndarray, epoch: np.ndarray, floor_ns: float,
         round_steps: int = 1) -> tuple[Optional[dict], Optional[dict]]:
    """(:func:`trend`, and where it is None :func:`not_yet`) of the same
    arguments, over one series: the rounds' sums are made once."""
    series = _series(wait_ns, epoch, floor_ns, round_steps)
    if series is None:
        return None, None
    found = _trend_of(series, round_steps)
    return found, (_not_yet_of(series, round_steps) if found is None else None)


def _trend_of(series: tuple, round_steps: int) -> Optional[dict]:
    found = _trend_or_step(*series, round_steps)
    return found if found is None or round_steps <= 1 else _per_round_mean(found, round_steps)


def _series(wait_ns: np.ndarray, epoch: np.ndarray, floor_ns: float,
            round_steps: int) -> Optional[tuple]:
    """(the series the rules read, its epochs, the floor for it): the
    waits, or with ``round_steps`` > 1 the rounds' summed waits and the
    floor scaled alike; None under MIN_STEADY_STEPS points."""
    if len(wait_ns) < input_bound.MIN_STEADY_STEPS:
        return None
    # Medians by selection over the integer waits: the same values as over
    # wait_ns.astype(float64) (the cast keeps the order), without a copy.
    x = np.ascontiguousarray(wait_ns) if _numbers._is_int(wait_ns) else wait_ns.astype(np.float64)
    if round_steps > 1:
        x, epoch = _round_sums(x, epoch, round_steps)
        if len(x) < input_bound.MIN_STEADY_STEPS:
            return None
        return x, epoch, floor_ns * round_steps
    return x, epoch, floor_ns


def not_yet(wait_ns: np.ndarray, epoch: np.ndarray, floor_ns: float,
            round_steps: int = 1) -> Optional[dict]:
    """Where :func:`trend` found nothing: {label (RISING / FALLING, the
    direction), first_tenth_median_s, last_tenth_median_s, round_steps}
    when the first and last tenths' medians (of the rounds' mean waits,
    as :func:`trend` reads them) differ materially (the three checks
    above) though no slope or change passed its test: the answer "not
    yet", since a run this short cannot tell a rise from the waits' own
    slow swings at TREND_ALPHA.  None otherwise.  A wait flat for 35 steps
    then climbing 13x over the last 25 (a leak a prefetching loader hides
    at first) printed nothing in 5 of 9 runs (helper 39A)."""
    series = _series(wait_ns, epoch, floor_ns, round_steps)
    return None if series is None else _not_yet_of(series, round_steps)


def _not_yet_of(series: tuple, round_steps: int) -> Optional[dict]:
    x, _, floor = series
    first, last = _tenths(x)
    if not _material(first, last, floor, x):
        return None
    k = max(1, round_steps)
    return {"label": RISING if last > first else FALLING,
            "first_tenth_median_s": first / k * 1e-9, "last_tenth_median_s": last / k * 1e-9,
            "round_steps": k}


# The fewest points (steps, or rounds' means) a side of the change after
# the first epoch is tested on.
STEP_MIN_SIDE_POINTS = 4


def _trend_or_step(x: np.ndarray, epoch: np.ndarray, floor_ns: float,
                   round_steps: int = 1) -> Optional[dict]:
    """:func:`trend` over the series ``x`` as given (each point a round of
    ``round_steps`` fetches)."""
    least = max(STEP_MIN_SIDE_POINTS, -(-input_bound.MIN_STEADY_STEPS // max(1, round_steps)))
    cut = _level_change_at(x, epoch, floor_ns, least)
    if cut is None:
        found = _trend(x, epoch, floor_ns, least)
        return found if found is not None else _change_point(x, epoch, floor_ns, least)
    # The level changed after the first epoch: a slope is tested within
    # the later epochs alone, never across that change.
    if _epoch_medians_move(x, epoch) and _material(*_tenths(x[cut:]), floor_ns, x[cut:]):
        # The later epochs carry the move on, epoch after epoch: a rise or
        # fall across the epochs, not one change after the first.
        return _trend(x, epoch, floor_ns, least)
    within = _trend(x[cut:], epoch[cut:], floor_ns, least)
    if within is not None:
        return {**within, "after_first_epoch": int(epoch[0])}
    return _step_after_first_epoch(x, epoch, cut)


def _epoch_medians_move(x: np.ndarray, epoch: np.ndarray) -> bool:
    """Whether at least TREND_MIN_EPOCHS epochs' median waits move one way
    (each epoch's above, or each below, the one before)."""
    epochs = np.unique(epoch)
    if len(epochs) < TREND_MIN_EPOCHS:
        return False
    meds = np.array([np.median(x[epoch == e]) for e in epochs])
    step = np.diff(meds)
    return bool((step > 0).all() or (step < 0).all())


def _trend(x: np.ndarray, epoch: np.ndarray, floor_ns: float,
           least: int = input_bound.MIN_STEADY_STEPS) -> Optional[dict]:
    """RISING / FALLING over the waits ``x`` (see :func:`trend`), or None;
    ``least``: the fewest points a side of a change of level holds."""
    n = len(x)
    first, last = _tenths(x)
    if not _material(first, last, floor_ns, x):
        return None
    centre, med = _block_medians(x, min(TREND_BLOCKS, n))
    if np.ptp(med) == 0:
        return None
    test = _slope_test(centre, med)
    label = RISING if last > first else FALLING
    low, high = test["low"], test["high"]
    if low is None or not (low > 0 if label == RISING else high < 0):
        return None

    tau = float(kendalltau(centre, med)[0])
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
    shift = _one_shift(x, centre, med, floor_ns, least)
    if shift is _EITHER:
        return None     # not yet: not_yet() gives the two tenths
    if shift is not None:
        return {**shift, "p_value": test["p_value"],
                "at_epoch_start": _epoch_started_at(epoch, shift["changed_at_step"])}
    return {"label": label, "slope_ms_per_step": test["slope"] * 1e-6,
            "slope_interval_ms_per_step": [low * 1e-6, high * 1e-6],
            "slope_ms_per_epoch": per_epoch,
            "first_tenth_median_s": first * 1e-9, "last_tenth_median_s": last * 1e-9,
            "tau": tau, "p_value": test["p_value"]}


def _one_shift(x: np.ndarray, centre: np.ndarray, med: np.ndarray,
               floor_ns: float, least: int = input_bound.MIN_STEADY_STEPS) -> Optional[dict]:
    """STEP at the change point inside the run where two levels explain
    the block medians ``med`` (at their ``centre`` steps of ``x``) better
    than a line and neither side trends (see above); None otherwise."""
    y = med.astype(np.float64)
    cut = _least_squares_cut(centre, y, len(x), least)
    if cut is None or not _two_levels_fit(centre, y, cut):
        return None
    if not _levels_beat_hinge(centre, y, cut):
        return _EITHER
    return _step_at(x, centre, cut, floor_ns)


# _one_shift's answer where two levels beat the line but a hinge beats
# them: a change of level or a ramp from a bend, not yet told apart.
_EITHER = {"label": None}


def _least_squares_cut(centre: np.ndarray, y: np.ndarray, n: int,
                       least: int = input_bound.MIN_STEADY_STEPS) -> Optional[int]:
    """The block index c (1 <= c < len(y)) before which two levels, least
    squares, fit the block medians ``y`` best, among the cuts leaving each
    side ``least`` of the ``n`` points (MIN_STEADY_STEPS steps, or that
    many steps' rounds); None where none does.  By
    the sizes of the waits, not their ranks: a drift of 1-2% on the long
    side of a 4x change moved the rank statistic's best cut into the
    drift (Pettitt's K at step 269 of a change at 80; helper 27C)."""
    m = len(y)
    csum, csq = np.cumsum(y), np.cumsum(y * y)
    c = np.arange(1, m)
    left = csq[c - 1] - csum[c - 1] ** 2 / c
    right = (csq[-1] - csq[c - 1]) - (csum[-1] - csum[c - 1]) ** 2 / (m - c)
    ok = (centre[c] >= least) & (n - centre[c] >= least)
    if not ok.any():
        return None
    return int(c[np.argmin(np.where(ok, left + right, np.inf))])


def _hinge_sse(centre: np.ndarray, y: np.ndarray) -> float:
    """The least-squares error of the best hinge through the block medians
    ``y`` (at their ``centre`` steps): a level, then a line from a bend
    on (flat then rising or falling), or a line up to a bend and a level
    after it, over every bend at a block centre strictly inside; inf
    under 3 points.  A hinge has as many parameters as two levels (two
    numbers and where they change), so the two fit the same data on equal
    terms."""
    m = len(y)
    if m < 3:
        return math.inf
    t = centre.astype(np.float64)
    bends = t[1:-1]
    best = math.inf
    for h in (np.maximum(0.0, t[None, :] - bends[:, None]),
              np.minimum(0.0, t[None, :] - bends[:, None])):
        # Simple regression of y on h for each bend: SSE = Syy - Shy^2 / Shh.
        hc = h - h.mean(axis=1, keepdims=True)
        yc = y - y.mean()
        shh = (hc * hc).sum(axis=1)
        shy = hc @ yc
        sse = float((yc * yc).sum()) - np.divide(shy * shy, shh, out=np.zeros_like(shh),
                                                 where=shh > 0)
        best = min(best, float(sse.min()))
    return best


def _levels_beat_hinge(centre: np.ndarray, y: np.ndarray, cut: int) -> bool:
    """Whether two levels split before block ``cut`` fit the block medians
    ``y`` (at their ``centre`` steps) better than any hinge
    (:func:`_hinge_sse`: a level, then a ramp), least squares.  A wait flat
    for half the run and then climbing (a leak a prefetching loader hides
    at first) splits into two levels better than a line, and its rising
    side, a dozen rounds long, is too short for the side's own slope test:
    "STEP ... not a cost per step" in 2 of 9 runs (helper 39A).  A hinge
    fits it better; a change of level fits two levels better.  Where the
    hinge wins, the run is either, and the answer is not yet."""
    left, right = y[:cut], y[cut:]
    sse = float(((left - left.mean()) ** 2).sum() + ((right - right.mean()) ** 2).sum())
    return sse < _hinge_sse(centre, y)


def _two_levels_fit(centre: np.ndarray, y: np.ndarray, cut: int) -> bool:
    """Whether two levels split before block ``cut`` fit the block medians
    ``y`` (at their ``centre`` steps) better than a line, least squares,
    and neither side trends by itself: a slope the
    slope test finds on that side's block medians whose move over the
    side (Theil-Sen slope times its span) is at least SIDE_TREND_SHARE of
    the change between the two levels (medians).  A 1-2% drift on one
    side of a 4x change is no trend of its own, and read as one it turned
    the change into "FALLING ... a warm-up" (helper 27C); a ramp cut in
    two moves on each side by about the change itself.  One change of
    level, not a ramp (the material checks are the callers')."""
    m = len(y)
    left, right = y[:cut], y[cut:]
    sse = float(((left - left.mean()) ** 2).sum() + ((right - right.mean()) ** 2).sum())
    slope, icpt = np.polyfit(centre, y, 1)
    if not sse < float(((y - (slope * centre + icpt)) ** 2).sum()):
        return False
    change = abs(float(np.median(right)) - float(np.median(left)))
    for part in (slice(0, cut), slice(cut, m)):
        side = y[part]
        if np.ptp(side) > 0 and len(side) >= 3:
            t = _slope_test(centre[part], side)
            if t["low"] is None or not (t["low"] > 0 or t["high"] < 0):
                continue
            # The side's own move over its length, by its Theil-Sen slope.
            moved = abs(t["slope"]) * float(centre[part][-1] - centre[part][0])
            if moved >= SIDE_TREND_SHARE * change:
                return False
    return True


def _step_at(x: np.ndarray, centre: np.ndarray, cut: int, floor_ns: float
             ) -> Optional[dict]:
    """STEP at the change between block ``cut - 1`` and block ``cut`` (of
    block centres ``centre`` over the waits ``x``), with the two medians
    either side, where they differ materially (see above); else None."""
    at = int(round((centre[cut - 1] + centre[cut]) / 2.0 + 0.5))
    before, after = _numbers.int_median(x[:at]), _numbers.int_median(x[at:])
    if not _material(before, after, floor_ns, x):
        return None
    first, last = _tenths(x)
    return {"label": STEP, "slope_ms_per_step": None, "slope_interval_ms_per_step": None,
            "slope_ms_per_epoch": None,
            "first_tenth_median_s": first * 1e-9, "last_tenth_median_s": last * 1e-9,
            "tau": None, "changed_at_step": at,
            "before_median_s": before * 1e-9, "after_median_s": after * 1e-9}


def _cut_s(ranks: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """S between the values before each cut and those after (shape (rows,
    cuts)), from each row's 0-based ranks (ties: their average rank):
    twice the pairs where the later value is higher (a tie half), less
    the pairs."""
    m = ranks.shape[-1]
    after = m - cuts
    tail = ranks.sum(axis=-1, keepdims=True) - np.cumsum(ranks, axis=-1)[..., cuts - 1]
    return 2 * (tail - after * (after - 1) // 2) - cuts * after


def _change_point(x: np.ndarray, epoch: np.ndarray, floor_ns: float,
                  least: int = input_bound.MIN_STEADY_STEPS) -> Optional[dict]:
    """STEP at one change of level inside the run, tested by itself where
    no slope was found: Pettitt's (1979, "A non-parametric approach to the
    change-point problem", Applied Statistics 28(2)) statistic K, the
    largest |S| between the block medians before a cut and after it over
    every cut leaving each side ``least`` points (as above), against the same
    sieve bootstrap under the null of no change (each null series' own
    largest |S| over the same cuts; the sieve fitted to the residuals of
    the two levels split at the least-squares cut, which also places the
    change), at TREND_ALPHA; the medians either side of the cut must be
    material (see above).  A level that jumps
    3x at step 58 of 120 in a noisy lock-step loop was read in only 2 of
    10 runs while it waited on Mann-Kendall's slope test, which a step
    half-way through the run feeds weakly.  None otherwise."""
    n = len(x)
    centre, med = _block_medians(x, min(TREND_BLOCKS, n))
    m = len(med)
    if m < 2 * 3 or np.ptp(med) == 0:
        return None
    cuts = np.arange(1, m)
    cuts = cuts[(centre[cuts] >= least) & (n - centre[cuts] >= least)]
    if not len(cuts):
        return None

    # Average ranks: a tie between the two sides counts 0, as in S; ranks
    # by position would make a series of equal waits trend.
    s = _cut_s(rankdata(med) - 1.0, cuts)
    k = float(np.abs(s).max())
    # The change placed by least squares (the ranks' best cut drifts with
    # a small drift beside the change), its null fitted to the residuals
    # of that split; K over every cut tests whether there is a change.
    y = med.astype(np.float64)
    cut = _least_squares_cut(centre, y, n, least)
    if cut is None:
        return None
    # Material first (cheap): a healthy run's report pays no bootstrap.
    step = _step_at(x, centre, cut, floor_ns)
    if step is None:
        return None
    null = _null_series(med, cut)
    null_k = np.abs(_cut_s(null.argsort(axis=1).argsort(axis=1), cuts)).max(axis=1)
    if k <= _critical(null_k):
        return None
    # The residuals' sieve narrows its null where the split explains
    # noise: independent waits of two levels (stalls at random, 1 ms
    # against 20 ms) read STEP in 7-8.5 % of 24-30-step runs (helper 32A).
    # Under independence the permutations of the block medians' own ranks
    # are the exact null; the change must pass both (the larger p-value).
    perm = np.random.default_rng(TREND_SEED).permuted(
        np.tile(rankdata(med) - 1.0, (TREND_RESAMPLES, 1)), axis=1)
    perm_k = np.abs(_cut_s(perm, cuts)).max(axis=1)
    if k <= _critical(perm_k):
        return None
    if not _two_levels_fit(centre, y, cut) or not _levels_beat_hinge(centre, y, cut):
        # A change, but not one of level: a ramp, or a trend on a side,
        # or a bend into one (not yet).
        return None
    return {**step, "p_value": max(_p_value(k, null_k), _p_value(k, perm_k)),
            "at_epoch_start": _epoch_started_at(epoch, step["changed_at_step"]),
            "change_point": True}


# How near an epoch's first step (in steps of the series) a change of
# level is said to come with that epoch: the change point is fitted over
# block medians, each up to n // TREND_BLOCKS steps, and the rounds' means
# group round_steps fetches, so the fit places it within a block or two.
EPOCH_START_NEAR = 2


def _epoch_started_at(epoch: np.ndarray, at: int) -> Optional[int]:
    """The epoch whose first step lies within EPOCH_START_NEAR blocks of
    step ``at`` (a change that came with that epoch: the data changed, a
    file grew, a cache was dropped), else None."""
    n = len(epoch)
    starts = np.r_[0, np.flatnonzero(np.diff(epoch)) + 1]
    near = EPOCH_START_NEAR * max(1, n // TREND_BLOCKS)
    hit = starts[(starts > 0) & (np.abs(starts - at) <= near)]
    return int(epoch[hit[0]]) if len(hit) else None


def _level_change_at(x: np.ndarray, epoch: np.ndarray, floor_ns: float,
                     least: int = input_bound.MIN_STEADY_STEPS) -> Optional[int]:
    """The index of the first step after the first epoch when the waits
    ``x`` change level materially there (see above), each side at least
    ``least`` points, else None."""
    n = len(x)
    if epoch[-1] == epoch[0]:   # one epoch, or epoch 0 comes back: no step after it
        return None
    later = epoch != epoch[0]
    cut = int(np.argmax(later))
    if cut < least or n - cut < least:
        return None
    if np.count_nonzero(later[cut:]) != n - cut:
        return None
    before, after = _numbers.int_median(x[:cut]), _numbers.int_median(x[cut:])
    return cut if _material(before, after, floor_ns, x) else None


def _step_after_first_epoch(x: np.ndarray, epoch: np.ndarray, cut: int) -> Optional[dict]:
    """STEP over the waits ``x`` that change level at ``cut`` (see
    :func:`trend`), or None where the change is not significant."""
    n = len(x)
    before, after = _numbers.int_median(x[:cut]), _numbers.int_median(x[cut:])
    centre, med = _block_medians(x, min(TREND_BLOCKS, n))
    side = int(np.searchsorted(centre, cut - 0.5))
    if side == 0 or side == len(med) or np.ptp(med) == 0:
        return None
    s = float(np.sign(med[side:, None] - med[None, :side]).sum())
    null_s = _step_s_rows(_null_series(med, side), side)
    if abs(s) <= _critical(null_s):
        return None
    first, last = _tenths(x)
    return {"label": STEP, "slope_ms_per_step": None, "slope_interval_ms_per_step": None,
            "slope_ms_per_epoch": None,
            "first_tenth_median_s": first * 1e-9, "last_tenth_median_s": last * 1e-9,
            "tau": None, "p_value": _p_value(s, null_s),
            "first_epoch": int(epoch[0]), "first_epoch_median_s": before * 1e-9,
            "later_epochs_median_s": after * 1e-9}


def notes(s: dict) -> list[Finding]:
    """``trend_step`` (the two medians) when the wait stepped once after
    the first epoch; ``trend_not_yet`` where the tenths moved materially
    and no trend was found (:func:`not_yet`); else nothing."""
    t = s.get("trend")
    maybe = s.get("trend_not_yet")
    if not t and maybe:
        return [Finding("trend_not_yet", dict(maybe))]
    if not t or t.get("label") != STEP:
        return []
    if t.get("changed_at_step") is not None:
        return [Finding("trend_shift", {
            **{k: t[k] for k in ("changed_at_step", "before_median_s", "after_median_s")},
            "at_epoch_start": t.get("at_epoch_start"),
            "change_point": t.get("change_point"), "p_value": t.get("p_value"),
            "round_steps": t.get("round_steps"),
            **({"less_core_waits": True} if t.get("less_core_waits") else {})})]
    return [Finding("trend_step", {k: t[k] for k in (
        "first_epoch", "first_epoch_median_s", "later_epochs_median_s")})]


def _step_words(p: dict) -> str:
    e = p["first_epoch"]
    fell = p["later_epochs_median_s"] < p["first_epoch_median_s"]
    return (f"epoch {e}'s waits were {fmt_s(p['first_epoch_median_s'])} (median), later "
            f"epochs' {fmt_s(p['later_epochs_median_s'])}, with no trend within them: a one-off "
            "change after the first epoch"
            + (f" (e.g. a cache filled in epoch {e}, workers started once with "
               "persistent_workers), not a steady slope" if fell else
               ", not a cost that keeps growing"))


def _levels(p: dict) -> str:
    """"the waits were X (median) before" or, read by rounds of the
    loader's workers (``round_steps``), what the two levels are: the
    median over the rounds of each round's mean wait (a round of 3 holding
    one 70 ms stall and two waits near 0 is 23 ms, not a median wait)."""
    k = p.get("round_steps")
    less = _less(p)
    if k and k > 1:
        return (f"the mean wait{less} per round of {k} fetches (one batch from each worker) "
                f"was {fmt_s(p['before_median_s'])} (median over the rounds) before")
    return f"the waits{_less(p, 'their')} were {fmt_s(p['before_median_s'])} (median) before"


def _less(p: dict, whose: str = "its") -> str:
    """", less their waits for a core," where the trend read the clocked
    waits so (``less_core_waits``): the levels then sit under the raw
    waits (21.1 ms quoted where every later fetch slept 25 ms beside a
    CPU hog, helper 41A); else ""."""
    return f", less {whose} waits for a core," if p.get("less_core_waits") else ""


def _shift_words(p: dict) -> str:
    at = (f"steady step {p['changed_at_step']}" if p.get("at_epoch_start") is None else
          f"steady step {p['changed_at_step']}, where epoch {p['at_epoch_start']} began")
    if p.get("change_point") and p.get("p_value") is not None:
        return (f"{_levels(p)} {at} and "
                f"{fmt_s(p['after_median_s'])} from it on: one change of level inside the run "
                f"(Pettitt's change-point test, p = {p['p_value']:.2g}; no slope was "
                "found), not a cost that grows per step")
    return (f"{_levels(p)} {at} and "
            f"{fmt_s(p['after_median_s'])} from it on, with no "
            "trend on either side: one change of level inside the run (two levels fit the "
            "waits better than a line), not a cost that grows per step")


def _not_yet_words(p: dict) -> str:
    went = "rose" if p["label"] == RISING else "fell"
    each = " (each round's mean)" if (p.get("round_steps") or 1) > 1 else ""
    return (f"the wait{_less(p)} {went} from {fmt_s(p['first_tenth_median_s'])} to "
            f"{fmt_s(p['last_tenth_median_s'])} between the first and the last tenth of the "
            f"steps{each}, but no trend is told yet from the waits' own slow swings (the test "
            f"at {TREND_ALPHA:g} does not reject a steady wait at this length): record longer "
            f"to see whether it keeps {'rising' if went == 'rose' else 'falling'} (a cost that "
            "grows with the samples seen, a leak) or settles.")


WORDS: dict[str, Words] = {
    "trend_step": _step_words,
    "trend_not_yet": _not_yet_words,
    "trend_shift": _shift_words,
}


def _trend_next_line(p: dict) -> str:
    if p["label"] == STEP and p.get("changed_at_step") is not None:
        return (f"The input wait changed once, at steady step {p['changed_at_step']}, and "
                "held on both sides: a change of level (the note gives both), not a cost per "
                "step.")
    if p["label"] == STEP:
        return ("The input wait changed once, after the first epoch, and shows no trend in "
                "the later epochs: a change of level (the note gives both), not a cost per "
                "step.")
    grows = p["label"] == RISING
    per_step = abs(p["slope_ms_per_step"]) * 1e-3
    steps = ("the steps" if p.get("after_first_epoch") is None
             else f"the steps after epoch {p['after_first_epoch']}")
    rounds = p.get("round_steps") or 1
    median = "median" if rounds == 1 else f"median over rounds of {rounds} fetches"
    text = (f"The input wait{_less(p)} {'grows' if grows else 'shrinks'} steadily, "
            f"{'+' if grows else '-'}{fmt_s(per_step)} per step ({median} "
            f"{fmt_s(p['first_tenth_median_s'])} a fetch in the first tenth of {steps}, "
            f"{fmt_s(p['last_tenth_median_s'])} in the last)")
    if p.get("slope_ms_per_epoch") is not None:
        text += (f", {'+' if p['slope_ms_per_epoch'] > 0 else '-'}"
                 f"{fmt_s(abs(p['slope_ms_per_epoch']) * 1e-3)} per epoch")
    if grows:
        return text + (": state that grows per step, such as a cache or list kept in the "
                       "dataset, a leak or memory fragmentation; more workers would only "
                       "hide a cost that keeps growing.")
    return text + (": a warm-up (caches filling, files coming into the page cache) "
                   "rather than a steady cost.")


# Other programs' CPU moving this many cores between the two sides of a
# trend, the same way as the wait, is a host that changed: half a core,
# a quarter of the 2-core hosts this tool is built on.  3 CPU hogs started
# at step 120 of an unchanged loader read "wait STEP 991 µs -> 3.36 ms ...
# look at what changed at steady step 128 (a worker's shard ...)", its own
# readings holding other programs at 38% of the wait (helper 33B).
HOST_CHANGE_CORES = 0.5


def host_moved(p: dict) -> bool:
    """Whether other programs' CPU (``host_cores``, [before, after]) moved
    by HOST_CHANGE_CORES or more the way the wait did (``wait_rose``)."""
    cores = p.get("host_cores")
    if not cores:
        return False
    delta = cores[1] - cores[0]
    return abs(delta) >= HOST_CHANGE_CORES and (delta > 0) == bool(p.get("wait_rose"))


def host_moved_words(p: dict) -> Optional[str]:
    """The trend's next step where the host moved with it (:func:`host_moved`);
    None otherwise."""
    if not host_moved(p):
        return None
    before, after = p["host_cores"]
    where = (f"at steady step {p['changed_at_step']}" if p.get("changed_at_step") is not None
             else "between the first and the last tenth of the run")
    return (f"Next: other programs' CPU went from {before:.1f} to {after:.1f} cores {where}, "
            f"as the wait {'rose' if p.get('wait_rose') else 'fell'}: a host that changed "
            "under the run, before any change of the data; run it again with the host as it "
            "was throughout and compare (traceml.compare).")


def trend_part(trend: Optional[dict]) -> Optional[str]:
    """"wait RISING 1.2 ms -> 38 ms (+0.49 ms per step)" for the shape line
    ("wait STEP 5 ms -> 1 ms (epoch 0 to the later epochs)" for a step);
    None without a trend."""
    if not trend:
        return None
    if trend["label"] == STEP and trend.get("changed_at_step") is not None:
        k = trend.get("round_steps")
        return (f"wait {STEP} {fmt_s(trend['before_median_s'])} -> "
                f"{fmt_s(trend['after_median_s'])} "
                + (f"a round of {k} fetches " if k and k > 1 else "")
                + f"(at steady step {trend['changed_at_step']}, "
                + ("a change point" if trend.get("change_point") else "no trend on either side")
                + ")")
    if trend["label"] == STEP:
        return (f"wait {STEP} {fmt_s(trend['first_epoch_median_s'])} -> "
                f"{fmt_s(trend['later_epochs_median_s'])} (epoch {trend['first_epoch']} to "
                "the later epochs, no trend within them)")
    slope = trend["slope_ms_per_step"] * 1e-3
    after = trend.get("after_first_epoch")
    return (f"wait {trend['label']} {fmt_s(trend['first_tenth_median_s'])} -> "
            f"{fmt_s(trend['last_tenth_median_s'])} (first to last tenth"
            + ("" if after is None else f" after epoch {after}") + ", "
            f"{'+' if slope > 0 else '-'}{fmt_s(abs(slope))} per step)")


def workers_at_change(workers: np.ndarray, at: int) -> Optional[dict]:
    """{workers_before, workers_after}: the workers that made the steady
    batches before a STEP's change at steady step ``at`` and after it,
    where fewer made any after (``workers``: each steady batch's worker,
    shape (steady steps,), -1 unknown); None otherwise.  Measured, not
    guessed: an IterableDataset whose shards are uneven leaves the loop
    to the workers with data left, and the wait rises with it (3 workers,
    worker 0's shard twice the others': from step 72 worker 0 alone, the
    wait 3.85 -> 11.5 ms a round; the next step listed that among four
    guesses, helper 64)."""
    w = np.asarray(workers, dtype=np.int64)
    if not 0 < at < len(w):
        return None
    before = sorted(set(w[:at][w[:at] >= 0].tolist()))
    after = sorted(set(w[at:][w[at:] >= 0].tolist()))
    if not after or not set(after) < set(before):
        return None
    return {"workers_before": before, "workers_after": after}
