"""compare(): which measures moved between two runs, and the verdict.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np
from scipy.stats import binomtest, t as student_t, ttest_ind


from ..fmt import fmt_s, pct
from . import input_bound, wait_parts


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
    (``missing`` then says "both", "baseline" or "run"); ``noise_p`` the
    two runs' noise test of the difference (:func:`noise_p_value`; None
    where not made)."""

    label: str
    base_s: Optional[float] = None
    run_s: Optional[float] = None
    tolerance_s: Optional[float] = None
    missing: Optional[str] = None
    noise_p: Optional[float] = None


# Noise.  Two runs of the same loop differ by chance: each mean comes from
# steps that are serially dependent (prefetch, bursts, a busy host's
# spells).  The null hypothesis: both runs' steady steps have the same
# mean.  Each run's mean gets its standard error by the method of batch
# means (the steps cut into round(n ** (1/3)) contiguous batches, at least
# NOISE_MIN_BATCHES; the batch means' spread over sqrt(batches): Law &
# Kelton, Simulation Modeling and Analysis, ch. 9), and the difference is
# tested by Welch's t with Satterthwaite's degrees of freedom, two-sided.
# Few, long batches keep neighbouring batch means nearly independent:
# over 300 pairs of 150-step runs of one AR(1) loop, floor(sqrt(n))
# batches rejected 3.3%, 5% and 20% of pairs at phi 0, 0.8 and 0.95, the
# cube root 1.7%, 1.7% and 4.3% (a 4% shift of the mean, phi 0.8: found
# in 27% and 13% of pairs).  A measure moves only where the difference
# exceeds its tolerance and this test rejects at NOISE_ALPHA (the 1 in
# 100 of the report's other tests): identical runs on a shared 2-core
# host differed by 3% of the step, past the tolerance, in 2 of 5 pairs of
# a helper's trial.
NOISE_ALPHA = 0.01
NOISE_MIN_BATCHES = 2


def batch_means(x: np.ndarray, round_steps: int = 1) -> Optional[tuple[float, float, int]]:
    """(mean, standard error, batches) of the series ``x`` (shape (n,)) by
    batch means (round(n ** (1/3)) batches, at least NOISE_MIN_BATCHES, of
    n // batches values, cut down to whole rounds of ``round_steps``
    values, at least one round; the remainder left out of the error, not
    of the mean); None where fewer than 2 values a batch or fewer than
    NOISE_MIN_BATCHES batches.

    Whole rounds: a loader of w workers in lock-step stalls once a round
    of w fetches, so a batch of whole rounds holds as many stalls as the
    next, and the batch means vary by the rounds' noise alone.  Batches
    across the rounds' grain hold one stall or two: 16 steps of 4
    lock-step workers (mean step 90 ms) against the fixed loader's 10.7 ms
    read p = 0.23 in batches of 5, "not yet" for an 8x faster step (helper
    28A, 3 of 4 pairs)."""
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    b = max(NOISE_MIN_BATCHES, int(round(n ** (1.0 / 3.0))))
    if n < 2 * b:
        return None
    size = n // b
    r = max(1, int(round_steps))
    if r > 1:
        size = max(r, size // r * r)
        b = n // size
        if b < NOISE_MIN_BATCHES:
            return None
    means = x[:b * size].reshape(b, size).mean(axis=1)
    return float(x.mean()), float(means.std(ddof=1) / math.sqrt(b)), b


def noise_p_value(base: Optional[np.ndarray], run: Optional[np.ndarray],
                  base_round: int = 1, run_round: int = 1) -> Optional[float]:
    """Welch's two-sided p-value that the two series (one value a steady
    step each) share a mean, from their batch means (``*_round``: each
    run's round of steps, max(1, num_workers): :func:`batch_means`); None
    where either has under NOISE_MIN_BATCHES batches, or both errors are
    0."""

    if base is None or run is None:
        return None
    a, b = batch_means(base, base_round), batch_means(run, run_round)
    if a is None or b is None:
        return None
    va, vb = a[1] ** 2, b[1] ** 2
    if va + vb <= 0.0:
        return None if a[0] == b[0] else 0.0
    stat = (b[0] - a[0]) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / ((va ** 2 / (a[2] - 1) if va else 0.0)
                           + (vb ** 2 / (b[2] - 1) if vb else 0.0))
    return float(2.0 * student_t.sf(abs(stat), df))


def compare_means(base_s: Optional[float], run_s: Optional[float],
                  base_step_s: Optional[float], noise_p: Optional[float] = None) -> Verdict:
    """The verdict on mean input wait per steady-state step: a difference
    counts beyond max(REL_TOL of the baseline's mean wait, STEP_TOL of its
    mean step ``base_step_s``) and, where ``noise_p`` (:func:`noise_p_value`
    of the two runs' waits) is given, beyond their noise (p < NOISE_ALPHA)."""
    if base_s is None or run_s is None:
        missing = ("both" if base_s is None and run_s is None
                   else "baseline" if base_s is None else "run")
        return Verdict(input_bound.NO_DATA, base_s, run_s, missing=missing)
    tol = max(REL_TOL * base_s, STEP_TOL * (base_step_s or 0.0))
    delta = run_s - base_s
    if abs(delta) <= tol or (noise_p is not None and noise_p >= NOISE_ALPHA):
        return Verdict(EQUIVALENT, base_s, run_s, tol, noise_p=noise_p)
    return Verdict(IMPROVEMENT if delta < 0 else REGRESSION, base_s, run_s, tol,
                   noise_p=noise_p)


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
# A stall is a large wait among mostly fast ones: where more than this
# many of either run's fetches in 100 pass the line (most of them), the
# line sits in the bulk and the count follows the waits' location, which
# the mean wait judges.  Identical loaders, the line at 3.59 ms under a
# 5.71 ms median fetch: 38.5 -> 60.8 stalls per 100, "worse", REGRESSION
# on that alone (helper 34B, 1 of 9 pairs), where fetches near the line
# stayed under the rate's tolerance.
STALL_RATE_BULK = 50.0


def stall_rate_p_value(base: Optional[tuple], run: Optional[tuple]) -> Optional[float]:
    """The two runs' stall counts against one rate: ``base`` and ``run``
    are (stalls, steady steps).  Conditional on the k stalls of both, the
    run's count is Binomial(k, its share of the steps) when the two rates
    are one (the exact conditional test of two Poisson rates); the
    two-sided binomial p-value (scipy.stats.binomtest), None where either
    is missing or no stall was counted.  Identical runs beside a busy host
    read 10 and 1 stall in 196 steps each, and "stalls per 100 steps 5.1
    -> 0.5: better" made 11 of 60 such pairs IMPROVEMENT or REGRESSION on
    the stall rate alone; here p = 0.012."""
    if base is None or run is None or not base[1] > 0 or not run[1] > 0:
        return None
    if base[0] < 0 or run[0] < 0:
        return None
    k = int(base[0]) + int(run[0])
    if k == 0:
        return None

    return float(binomtest(int(run[0]), k, run[1] / (base[1] + run[1])).pvalue)
MIXED = "MIXED"
# Not yet: a measure moved past its tolerance, but not past the two runs'
# own noise, and none moved past both (the three answers: yes, no, not
# yet).
UNSETTLED = "UNSETTLED"
BETTER, WORSE, SAME = "better", "worse", "same"


class Moved(NamedTuple):
    """One measure of a run against the baseline: BETTER, WORSE or SAME
    (None: not measured in one of them), both values, the tolerance and
    the noise test's p-value (None where not made)."""

    measure: str
    direction: Optional[str]
    base: Optional[float]
    run: Optional[float]
    tolerance: Optional[float]
    noise_p: Optional[float] = None


def near_line_rate(wait_ns: Optional[np.ndarray], line_s: Optional[float]) -> Optional[float]:
    """Per 100 steps, the waits (``wait_ns``, ns, one per steady step)
    within REL_TOL of the stall line ``line_s`` (s) either side: the
    fetches a shift of every wait by REL_TOL would carry across it.  None
    without waits or line."""
    if wait_ns is None or line_s is None or not len(wait_ns):
        return None
    line = line_s * 1e9
    w = np.asarray(wait_ns, dtype=np.float64)
    near = np.count_nonzero((w > line / (1 + REL_TOL)) & (w <= line * (1 + REL_TOL)))
    return 100.0 * near / len(w)


def _moved(measure: str, base: Optional[float], run: Optional[float],
           tol: Optional[float], noise_p: Optional[float] = None) -> Moved:
    if base is None or run is None or tol is None:
        return Moved(measure, None, base, run, tol)
    delta = run - base
    same = abs(delta) <= tol or (noise_p is not None and noise_p >= NOISE_ALPHA)
    return Moved(measure, SAME if same else (BETTER if delta < 0 else WORSE),
                 base, run, tol, noise_p)


# The mean step is judged beside the input measures: workers that take the
# model's cores shorten the wait and lengthen the step (a user trial: 2
# workers on 2 cores took compute from 40 to 60 ms a step, and a run with
# the longer wall time read IMPROVEMENT).  Its tolerance is the mean
# wait's, in seconds (max(REL_TOL of the baseline's mean wait, STEP_TOL of
# its mean step)): a step that moved more than a counted change of the
# wait moved the throughput as much.  At REL_TOL of the step, a step 2.2 ms
# longer (28.7 -> 30.9 ms, the wall time 2.89 -> 3.34 s) read "same" and
# the run IMPROVEMENT in 3 of 5 helper trials.


def compare_measures(mean: Verdict, base_share: Optional[float], run_share: Optional[float],
                     base_stalls: Optional[tuple], run_stalls: Optional[tuple],
                     base_step_s: Optional[float] = None,
                     run_step_s: Optional[float] = None,
                     step_noise_p: Optional[float] = None,
                     share_noise_p: Optional[float] = None,
                     near_line: Optional[tuple] = None) -> list[Moved]:
    """The measures: mean wait (``mean``, compare_means), input share
    (tolerance SHARE_TOL; beyond the noise where ``share_noise_p`` is
    given), stalls per 100 steady-state steps (``*_stalls``
    = (stall count, steady steps) or None; tolerance max(STALL_RATE_MIN_TOL,
    STALL_RATE_SIGMAS * sqrt(base count) per 100 baseline steps; beyond
    the two counts' noise, :func:`stall_rate_p_value`) and the
    mean step (s; tolerance the mean wait's, ``mean.tolerance_s``, and
    beyond the runs' noise where ``step_noise_p`` is given; not judged
    where either is None).  The stall rate is not judged (direction None,
    both rates kept) where either run's fetches within REL_TOL of the
    stall line, per 100 steps (``near_line``, from :func:`near_line_rate`;
    None: not known), exceed its tolerance, or where either run's rate is
    over STALL_RATE_BULK (most fetches past the line)."""
    out = [Moved("mean_wait", None if mean.label == input_bound.NO_DATA else
                 {IMPROVEMENT: BETTER, REGRESSION: WORSE, EQUIVALENT: SAME}[mean.label],
                 mean.base_s, mean.run_s, mean.tolerance_s, mean.noise_p)]
    out.append(_moved("input_share", base_share, run_share, SHARE_TOL, share_noise_p))
    rate = [None, None]
    tol = None
    for i, st in enumerate((base_stalls, run_stalls)):
        if st is not None and st[1]:
            rate[i] = 100.0 * st[0] / st[1]
    if rate[0] is not None:
        tol = max(STALL_RATE_MIN_TOL,
                  100.0 * STALL_RATE_SIGMAS * math.sqrt(base_stalls[0]) / base_stalls[1])
    in_bulk = any(r is not None and r > STALL_RATE_BULK for r in rate)
    if tol is not None and (in_bulk or (near_line is not None and max(near_line) > tol)):
        # The line sits among the fetches' bulk, not in a gap above it:
        # a shift of every wait by REL_TOL (what identical runs show)
        # moves more fetches across it than the rate's tolerance, so the
        # count follows the waits' location, which the mean wait judges.
        # Identical runs whose line fell at 9.6 ms under a 10.5 ms median
        # read 49.2 -> 29.9 stalls per 100 steps, "better", and
        # IMPROVEMENT on that alone (helper 29B, 2 of 15 pairs).
        out.append(Moved("stall_rate", None, rate[0], rate[1], None))
    else:
        out.append(_moved("stall_rate", rate[0], rate[1], tol,
                          stall_rate_p_value(base_stalls, run_stalls)))
    out.append(_moved("step_time", base_step_s, run_step_s,
                      None if base_step_s is None else mean.tolerance_s, step_noise_p))
    return out


# The epoch starts: each run's start-up wait an epoch (its first fetches,
# iter() and the workers' start included; epoch_start.by_epoch), judged
# apart from the steady steps, since a report's next step can be "record
# a few epochs with persistent_workers=True and compare": a worker_init_fn
# burning 0.4 s each epoch, 3 epochs, wall time 2.31 -> 1.06 s, read
# "UNSETTLED ... within the runs' own noise" on the steady steps alone,
# and `--fail-on regression` passed a 4.2x slower start the other way
# (helper 37B).  The model: an epoch's start-up cost is lognormal, its
# level the run's; the two levels differ where Welch's t-test on the logs
# of each run's epochs (at least EPOCH_START_MIN_EPOCHS each) is under
# NOISE_ALPHA and the means differ by more than REL_TOL of the
# baseline's wall time an epoch (a start that moves less leaves each epoch
# within what identical runs show) and of its own start.  Persistent
# workers pay in the first epoch only, so a few epochs of each may not yet
# tell (3 against 3 with one paying epoch: p about 0.2); the words say so.
EPOCH_START_MIN_EPOCHS = 2


def epoch_start_moved(base: dict, run: dict) -> Moved:
    """The measure ``epoch_start`` (s, the mean start-up wait an epoch) of
    ``run`` against ``base`` (report summaries) by the model above;
    direction None where either run has fewer than EPOCH_START_MIN_EPOCHS
    epochs with a start-up wait (its values kept where known)."""
    waits = []
    for s in (base, run):
        by = (s.get("epoch_start") or {}).get("by_epoch") or []
        waits.append(np.array([e["input_wait_s"] for e in by if e["input_wait_s"] > 0]))
    means = [float(w.mean()) if len(w) else None for w in waits]
    if means[0] is None or means[1] is None:
        return Moved("epoch_start", None, means[0], means[1], None)
    per_epoch = (base.get("wall_s") or 0.0) / max(1, base.get("epochs") or 1)
    tol = REL_TOL * max(means[0], per_epoch)
    if min(len(w) for w in waits) < EPOCH_START_MIN_EPOCHS:
        return Moved("epoch_start", None, means[0], means[1], tol)
    logs = [np.log(w) for w in waits]
    if all(np.ptp(x) == 0 for x in logs):
        p = 1.0 if logs[0][0] == logs[1][0] else 0.0
    else:
        p = float(ttest_ind(logs[0], logs[1], equal_var=False).pvalue)
    return _moved("epoch_start", means[0], means[1], tol, p)


def weigh_epoch_starts(label: str, moved: list[Moved],
                       steps_per_epoch: Optional[float]) -> tuple[str, Optional[str]]:
    """(the verdict, and why it changed or None) with the epoch starts
    weighed against the steps, each as wall time an epoch: the start's
    change against the mean step's times the steps an epoch.  A start
    judged to move (epoch_start_moved) decides where the step was not
    judged to move, or moved the other way by less an epoch; a start
    within the noise that outweighs a judged step the other way leaves the
    verdict UNSETTLED.  The steps' verdict holds otherwise (and MIXED,
    NO-DATA always).  A sampler whose __iter__ sleeps 0.25 s each epoch,
    the starts 69.7 -> 303 ms an epoch past tolerance and noise, read
    UNSETTLED from a 0.13 ms step within the noise (6 of 8 runs), and a
    step 0.9 ms shorter read IMPROVEMENT beside starts 231 ms an epoch
    longer (helper 38C)."""
    es, step = _measure(moved, "epoch_start"), _measure(moved, "step_time")
    if es is None or es.direction is None or None in (es.base, es.run):
        return label, None
    if label in (MIXED, input_bound.NO_DATA) or label == REGRESSION and es.direction == WORSE \
            or label == IMPROVEMENT and es.direction == BETTER:
        return label, None
    start = es.run - es.base
    steps = (0.0 if step is None or None in (step.base, step.run) or not steps_per_epoch
             else (step.run - step.base) * steps_per_epoch)
    if abs(start) <= abs(steps) and step is not None and step.direction in (BETTER, WORSE):
        return label, None
    why = (f"the epoch starts outweigh the steps: {_signed_s(start)} an epoch against "
           f"{_signed_s(steps)} of steps an epoch")
    if es.direction in (BETTER, WORSE):
        return (REGRESSION if es.direction == WORSE else IMPROVEMENT), why
    if held_by_noise(es) and label in (IMPROVEMENT, REGRESSION):
        return UNSETTLED, why + " (the starts within the noise: not yet)"
    return label, None


# A step longer by more than REL_TOL of the baseline's (the relative
# change identical runs stay within, as for the mean wait) is a slower
# training loop whatever the input measures say: REGRESSION, not MIXED.
# (A helper's trial: 3 workers whose threads took the model's cores cut
# the wait 30.6 -> 14 ms while each step went 60.8 -> 236 ms; MIXED let
# `--fail-on regression` pass it.)  A longer step inside that, past the
# wait's tolerance, leaves the verdict MIXED: too small to tell from
# another run of the same code on a shared host.  The same holds the
# other way: a step shorter by more than that share is a faster training
# loop, IMPROVEMENT, whatever the input measures say (a helper's trial:
# the mean step 14.8 -> 8.9 ms read MIXED because the input share rose
# with the shorter step, while the mirror run read REGRESSION).
STEP_REGRESSION_TOL = REL_TOL


def overall(mean: Verdict, moved: list[Moved]) -> str:
    """NO_DATA when the mean wait cannot be compared; REGRESSION when the
    mean step grew by more than STEP_REGRESSION_TOL of the baseline's,
    whatever else moved, IMPROVEMENT when it fell by more than that (past
    its tolerance and the runs' noise, both ways); MIXED where the wait got
    better and the step did not, its compute risen past the step's
    tolerance (:func:`_saving_lost`); UNSETTLED where the step fell past its
    tolerance within the runs' noise as the compute rose past it
    (:func:`_saving_shared`); else IMPROVEMENT when some measure got better and
    none worse, REGRESSION the reverse, MIXED when both, EQUIVALENT when
    none moved, but UNSETTLED where the mean wait passed its tolerance
    within the runs' noise; UNSETTLED where a measure passed its tolerance within the
    runs' own noise (:func:`held_by_noise`) and none moved, or it went the
    other way from those that moved (an IMPROVEMENT needs none worse)."""
    if mean.label == input_bound.NO_DATA:
        return input_bound.NO_DATA
    step = _measure(moved, "step_time")
    if step is not None and step.direction in (WORSE, BETTER) and (
            abs(step.run - step.base) > STEP_REGRESSION_TOL * step.base):
        return REGRESSION if step.direction == WORSE else IMPROVEMENT
    if _saving_lost(moved):
        return MIXED
    if _saving_shared(moved) and held_by_noise(step):
        # The step fell, within the runs' noise, while the compute rose:
        # how much of the saving reached the step is not yet known.
        return UNSETTLED
    dirs = {m.direction for m in moved}
    held = [m for m in moved if held_by_noise(m)]
    # Every measure reads higher as worse.  "None worse" (or "none
    # better") is not shown while a measure went that way past its
    # tolerance within the noise: not yet.
    held_worse = any(m.run > m.base for m in held)
    held_better = any(m.run < m.base for m in held)
    wait = _measure(moved, "mean_wait")
    if wait is not None and held_by_noise(wait) and (BETTER in dirs or WORSE in dirs):
        # The mean wait moved past its tolerance within the runs' noise:
        # the input is not shown to have changed, so the input share (the
        # wait over the step) moving alone claims nothing; the step's own
        # rule (above) speaks for throughput.  Identical loaders read
        # IMPROVEMENT on the share alone beside "mean fetch and mean step
        # within the noise: not yet a change" (helper 41A, 2 of 11 pairs).
        return UNSETTLED
    if BETTER in dirs and WORSE in dirs:
        return MIXED
    if BETTER in dirs:
        return UNSETTLED if held_worse else IMPROVEMENT
    if WORSE in dirs:
        return UNSETTLED if held_better else REGRESSION
    if held:
        return UNSETTLED
    return EQUIVALENT


def _measure(moved: list[Moved], name: str) -> Optional[Moved]:
    """The measure ``name`` of ``moved``, or None."""
    return next((m for m in moved if m.measure == name), None)


def _compute_rise(moved: list[Moved]) -> Optional[tuple[float, float]]:
    """(base, run) mean compute, the mean step less the mean wait (s),
    where both were measured; else None."""
    step, wait = _measure(moved, "step_time"), _measure(moved, "mean_wait")
    if step is None or wait is None or None in (step.base, step.run, wait.base, wait.run):
        return None
    return step.base - wait.base, step.run - wait.run


def _saving_lost(moved: list[Moved]) -> bool:
    """Whether an input measure got better but the step did not, the compute
    having risen past the step's tolerance: the time the input saved went
    into the step (workers taking the model's cores).  2 workers on 2
    cores cut the wait 20.4 -> 3.1 ms while the compute rose 13.2 ->
    32.5 ms and the step 33.6 -> 35.6 ms, inside its tolerance: that read
    IMPROVEMENT (helper 29B)."""
    step = _measure(moved, "step_time")
    rise = _compute_rise(moved)
    if rise is None or step.tolerance is None:
        return False
    # Any input measure: the stall rate alone falling 36 -> 0 per 100
    # steps, the wait and the step within the noise, and the compute up
    # 19 -> 30 ms read IMPROVEMENT (helper 30B, num_workers 1 -> 3).
    # A step that fell past its tolerance kept some of the saving, judged
    # or within the noise (2 workers on 2 cores: step 18.8 -> 13.5 ms at
    # p = 0.017, "the step did not fall with the wait", MIXED; helper 36B).
    return (_input_better(moved) and step.direction != BETTER
            and step.run - step.base > -step.tolerance and rise[1] - rise[0] > step.tolerance)


def _input_better(moved: list[Moved]) -> bool:
    """Whether the mean wait or the stall rate got better (the input share
    is left out: it falls when the compute grows)."""
    return any(m.direction == BETTER for m in moved if m.measure in ("mean_wait", "stall_rate"))


def _saving_shared(moved: list[Moved]) -> bool:
    """Whether an input measure got better and the step fell past its
    tolerance, but the compute rose past it: part of the time the input
    saved went into the step."""
    step, rise = _measure(moved, "step_time"), _compute_rise(moved)
    if rise is None or step is None or step.tolerance is None or None in (step.base, step.run):
        return False
    return (_input_better(moved) and step.run - step.base <= -step.tolerance
            and rise[1] - rise[0] > step.tolerance)


def held_by_noise(m: Moved) -> bool:
    """Whether measure ``m`` passed its tolerance but not the noise test."""
    return (m.direction == SAME and m.noise_p is not None and m.noise_p >= NOISE_ALPHA
            and abs(m.run - m.base) > m.tolerance)


def verdict_why(v: Verdict) -> str:
    """Why compare() gave its verdict (compare_means)."""
    if v.label == input_bound.NO_DATA:
        which = {"both": "either run", "baseline": "the baseline", "run": "this run"}[v.missing]
        return f"no steady-state steps in {which}: no mean fetch to compare"
    return (f"mean fetch {fmt_s(v.base_s)} -> {fmt_s(v.run_s)} ({_signed_s(v.run_s - v.base_s)}; "
            f"tolerance {fmt_s(v.tolerance_s)})")


BASELINE_WHY = "the baseline"


def compare_threshold(threshold_s: Optional[float]) -> str:
    """The line on which threshold compare() counted stalls at."""
    if threshold_s is None:
        return ("no stalls counted: the baseline has no steady-state steps to set "
                "the threshold")
    return f"stalls and stall gaps counted at the baseline's threshold, {fmt_s(threshold_s)}"


def _signed_s(d: float) -> str:
    """A change in seconds with its sign: "+2 ms", "-233 ms"."""
    return ("+" if d >= 0 else "-") + fmt_s(abs(d))


_MEASURE = {
    "mean_wait": ("mean fetch", fmt_s, _signed_s, fmt_s),
    "input_share": ("input share", lambda x: pct(x, 1),
                    lambda d: f"{d * 100:+.1f} points", lambda t: f"{t * 100:.1f} points"),
    "stall_rate": ("stalls per 100 steps", lambda x: f"{x:.1f}",
                   lambda d: f"{d:+.1f}", lambda t: f"{t:.1f}"),
    "step_time": ("mean step", fmt_s, _signed_s, fmt_s),
    "epoch_start": ("epoch start an epoch", fmt_s, _signed_s, fmt_s),
}


# Two runs whose other programs took CPU differing by more than this share
# of the host's usable CPUs met different hosts: the job's own share of
# the machine moved by as much as REL_TOL, the tolerance a mean wait is
# judged by, so a difference the host made is in their numbers too.
HOST_LOAD_TOL = REL_TOL


def host_load_cores(s: dict) -> Optional[float]:
    """Other programs' CPU over a run's steady intervals, in cores (the
    sampler's /proc/stat busy time less the job's own, summed over the
    slow and fast intervals, over their wall time; without a loader's
    intervals, over the clocked fetches' waits); None where unread."""
    iv = (s.get("workers") or {}).get("intervals") or {}
    cpu = wall = 0.0
    for kind in ("slow", "fast"):
        part = iv.get(kind) or {}
        if part.get("others_cpu_s") is None or not part.get("wall_s"):
            continue
        cpu += part["others_cpu_s"]
        wall += part["wall_s"]
    if wall <= 0:
        # No loader's intervals (a wrapped generator, the probes): the
        # clocked fetches' own reading (wait_parts.host), where the
        # sampler read the host.  Two runs of one generator, the second
        # beside a CPU hog, read REGRESSION with no word of the host
        # (helper 42, 5 of 5).
        host = (s.get("wait_parts") or {}).get("host") or {}
        if host.get("others_cpu_s") is not None and host.get("wall_s"):
            cpu, wall = host["others_cpu_s"], host["wall_s"]
    return cpu / wall if wall > 0 else None


def usable_cpus(s: dict) -> Optional[int]:
    """The CPUs the run could use: its loader's host facts, else the
    clocked fetches' host reading's (any source); None where unknown."""
    return ((s.get("host") or {}).get("usable_cpus")
            or ((s.get("wait_parts") or {}).get("host") or {}).get("usable_cpus"))


def host_went_with(label: str, base: dict, run: dict, base_steps: Optional[dict] = None,
                   run_steps: Optional[dict] = None) -> bool:
    """Whether the host's load moved the way the verdict ``label`` did,
    past HOST_LOAD_TOL of the usable CPUs, by enough to explain it:
    quieter in this run beside an IMPROVEMENT, busier beside a REGRESSION.
    Then the change may be the host's, and the verdict is not yet the
    code's (UNSETTLED): a sample made 2x slower read IMPROVEMENT in 3 of 4
    pairs whose baseline ran beside 0.96 cores of other programs and the
    run beside 0.04.  A change against the host's move stands, and so does
    one larger than the move can explain beyond the runs' noise
    (:func:`host_can_explain`; ``*_steps``: each run's steady series,
    {"wait": ns, "step": ns}, where known)."""
    a, b = host_load_cores(base), host_load_cores(run)
    cpus = usable_cpus(run) or usable_cpus(base)
    if a is None or b is None or not cpus or abs(b - a) <= HOST_LOAD_TOL * cpus:
        return False
    if not ((label == IMPROVEMENT and b < a) or (label == REGRESSION and b > a)):
        return False
    return host_can_explain(base, run, a, b, cpus, base_steps, run_steps)


def core_waits_per_step_s(s: dict) -> Optional[float]:
    """The host's measured part of a mean step (s): the waits for a core
    inside the clocked fetches (the awaited worker's, ``worker_cpu_wait``,
    and the loop's and its sender's, wait_parts.CORE_WAIT_PARTS) over the
    fetches clocked, plus the loop's wait for a core in the clocked
    compute (``cpu_wait``) over the steps clocked; None where the kernel
    gave no run-queue times or no fetch was clocked."""
    wp = s.get("wait_parts") or {}
    fetch, body = wp.get("all"), wp.get("compute")
    if not fetch or not fetch.get("runq_known") or not fetch.get("fetches"):
        return None
    parts = fetch["parts_s"]
    out = sum(parts.get(k, 0.0) for k in ("worker_cpu_wait", *wait_parts.CORE_WAIT_PARTS))
    out /= fetch["fetches"]
    per_step = _per_step_body(body) if body and body.get("runq_known") else None
    if per_step is not None:
        out += per_step[1]
    return out


def _past_the_host(base: dict, run: dict, busier: bool) -> bool:
    """Whether the mean step less its measured waits for a core
    (:func:`core_waits_per_step_s`) moved past STEP_REGRESSION_TOL the
    way the host did (up where the run's host was ``busier``): a change
    the host's measured part cannot hold.  Measured where the model has no
    bound (the busier run's others holding every core) as well as where
    it has one.  The subtraction takes out at least the host's part: the
    same code beside 1 to 4 CPU hogs, against a quiet baseline, kept 0.74
    to 0.96 of the baseline's net step (12 pairs on this 2-core host),
    while twice and four times the batch cost kept 1.24 to 2.46."""
    got = [core_waits_per_step_s(x) for x in (base, run)]
    steps = [_mean(x, "step_s") for x in (base, run)]
    if None in got or not all(steps):
        return False
    net = [max(0.0, m - w) for m, w in zip(steps, got)]
    if not net[0] or not net[1]:
        return False
    ratio = net[1] / net[0] if busier else net[0] / net[1]
    return ratio > 1.0 + STEP_REGRESSION_TOL


def _mean(s: dict, key: str) -> Optional[float]:
    return (s.get(key) or {}).get("mean")


# The summary's means and the steady series compare() tests them on.
_SERIES_OF = {"input_wait_s": "wait", "step_s": "step"}


def host_can_explain(base: dict, run: dict, a: float, b: float, cpus: int,
                     base_steps: Optional[dict] = None,
                     run_steps: Optional[dict] = None) -> bool:
    """Whether other programs' CPU moving from ``a`` to ``b`` cores (of
    ``cpus``) can explain the two runs' change of mean wait and mean step.
    The model: other programs take cores from the job one for one, so the
    job's work stretches by at most (cpus - lo) / (cpus - hi), lo and hi
    the two loads; a mean that moved by a larger ratio moved for more than
    the host (a 33x shorter wait beside a host 1 core quieter of 2 is the
    code's).  Where the steady series are given, a mean past the bound
    must also be past it beyond the two runs' noise: the baseline's series
    stretched (or shrunk) by the bound against the run's, Welch's test on
    batch means (:func:`noise_p_value`) at NOISE_ALPHA; the same code
    beside one more hog read REGRESSION in 3 of 4 pairs on means alone,
    its step 1.64x against a bound of 1.57x.  First, whatever the bound,
    a mean step that moved past STEP_REGRESSION_TOL with each run's
    measured waits for a core taken out is the code's
    (:func:`_past_the_host`).  Else, where the busier run's others held
    every CPU (hi >= cpus), or neither mean is known, nothing bounds the
    host's part: True."""
    lo, hi = min(a, b), max(a, b)
    if _past_the_host(base, run, b > a):
        return False
    if hi >= cpus:
        return True
    bound = (cpus - lo) / (cpus - hi)
    scale = bound if b > a else 1.0 / bound
    for key, series in _SERIES_OF.items():
        x, y = _mean(base, key), _mean(run, key)
        if not (x and y and x > 0 and y > 0):
            continue
        if (y / x if b > a else x / y) <= bound:
            continue
        if base_steps is not None and run_steps is not None:
            p = noise_p_value(np.asarray(base_steps[series], dtype=np.float64) * scale,
                              np.asarray(run_steps[series], dtype=np.float64))
            if p is None or p >= NOISE_ALPHA:
                continue
        return False
    return True


def host_note(base: dict, run: dict) -> Optional[str]:
    """Where the two runs' other programs took CPU differing by more than
    HOST_LOAD_TOL of the usable CPUs: a sentence saying so, with both
    figures; None where they did not, or either was unread."""
    a, b = host_load_cores(base), host_load_cores(run)
    cpus = usable_cpus(run) or usable_cpus(base)
    if a is None or b is None or not cpus or abs(b - a) <= HOST_LOAD_TOL * cpus:
        return None
    return (f"the host differed: other programs ran {a:.2f} cores during the baseline and "
            f"{b:.2f} during this run (of {cpus} CPUs), so the host's share is in these "
            "differences too; rerun both on a quiet host, or alternate them, before "
            "acting on it")


def _per_step_body(body: Optional[dict]) -> Optional[tuple[float, float]]:
    """(on a CPU, waiting for a core) per clocked step (s) of a report's
    compute split (wait_parts.compute); None without one."""
    if not body or not body.get("steps"):
        return None
    parts = body["parts_s"]
    return (parts.get("main_cpu", 0.0) / body["steps"],
            parts.get("cpu_wait", 0.0) / body["steps"])


def _compute_rise_cause(bodies: Optional[tuple]) -> str:
    """Why the compute rose, from both runs' compute splits: the model's
    wait for a core, or its own CPU, whichever rose more per step; the
    report's line to read where neither was measured."""
    got = None if bodies is None else [_per_step_body(b) for b in bodies]
    if not got or None in got:
        return "the report's compute by part says whether it waited for a core"
    (cpu0, wait0), (cpu1, wait1) = got
    if wait1 - wait0 >= cpu1 - cpu0:
        return (f"workers or other programs taking the model's cores: its wait for a core "
                f"{fmt_s(wait0)} -> {fmt_s(wait1)} a step")
    # A rise on a CPU is the step's own work (16 ms of compute on a CPU
    # against 8 was told "workers taking the model's cores", helper 33B).
    return (f"the step's own work: on a CPU {fmt_s(cpu0)} -> {fmt_s(cpu1)} a step, its wait "
            f"for a core {fmt_s(wait0)} -> {fmt_s(wait1)}")


def compare_why(v: Verdict, moved: list, bodies: Optional[tuple] = None) -> str:
    """Why compare() gave its verdict: each measure (compare_measures)
    with both values, the change, its tolerance and whether it moved."""
    parts = []
    for m in moved:
        name, val, change, tol = _MEASURE[m.measure]
        if m.direction is None and m.measure == "stall_rate" and None not in (m.base, m.run):
            parts.append(f"{name} {val(m.base)} -> {val(m.run)} not judged (the stall line "
                         "falls among the fetches' bulk: a shift of every wait by "
                         f"{pct(REL_TOL)} would carry more fetches across it than the rate's "
                         "tolerance, so the count follows the waits' level, which the mean "
                         "wait judges)")
            continue
        if m.direction is None and m.measure == "epoch_start":
            if (None not in (m.base, m.run, m.tolerance)
                    and abs(m.run - m.base) > m.tolerance):
                parts.append(f"{name} {val(m.base)} -> {val(m.run)} not judged (fewer than "
                             f"{EPOCH_START_MIN_EPOCHS} epochs in a run: record more epochs "
                             "of each to compare the starts)")
            continue
        if m.direction is None:
            parts.append(f"{name} not compared (not measured in both)")
            continue
        noise, said = "", m.direction
        if held_by_noise(m):
            # Past its tolerance, within the noise: not yet, never "same".
            noise = f", within the runs' own noise: p = {m.noise_p:.2g}, not under {NOISE_ALPHA:g}"
            said = "not yet"
        parts.append(f"{name} {val(m.base)} -> {val(m.run)} ({change(m.run - m.base)}; "
                     f"tolerance {tol(m.tolerance)}{noise}): {said}")
    held = [_MEASURE[m.measure][0] for m in moved if held_by_noise(m)]
    if held:
        # Named: "within the noise" after a measure judged better read as
        # that measure's (helper 36B: the step 37.1 -> 9.67 ms "better",
        # then "within the noise is not yet a change", of the input share).
        starts = any(m.measure == "epoch_start" for m in moved if held_by_noise(m))
        parts.append(f"{' and '.join(held)} within the noise: not yet a change; more "
                     "steps, or the runs alternated, would settle it"
                     + ("; more epochs of each would settle the starts" if starts else ""))
    lost = _saving_lost(moved)
    if lost or _saving_shared(moved):
        base, run = _compute_rise(moved)
        how = ("the step did not fall with the wait" if lost
               else "the step fell less than the wait")
        parts.append(f"{how}: its compute rose {fmt_s(base)} -> {fmt_s(run)} "
                     f"({_compute_rise_cause(bodies)})")
    return "; ".join(parts)
