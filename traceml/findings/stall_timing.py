"""The stalls in time: PERIODIC, IRREGULAR, EVERY-FETCH or TOO-FEW, the
cadence against num_workers, and the epoch-start fetches kept apart.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple, Optional

import numpy as np
from scipy.stats import binom, hypergeom, mannwhitneyu

from .. import _core
from ..fmt import fmt_s, pct, plural
from . import input_bound, stall_threshold, wait_trend


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


def even_spacing(steps: list, n: int) -> Optional[tuple[int, float]]:
    """(gap, p) where the ``steps`` (sorted positions among ``n`` steps, at
    least 3) are evenly spaced, one gap between every two: p is the exact
    chance that as many positions drawn at random from the n are evenly
    spaced at some gap (the arithmetic progressions of that length over
    C(n, k)); None where they are not evenly spaced.  Four outliers every
    5 steps among 40: 247 progressions in 91,390 draws, p = 0.0027."""
    k = len(steps)
    if k < 3 or n < k:
        return None
    gaps = np.diff(np.asarray(steps, dtype=np.int64))
    if len(gaps) == 0 or gaps[0] < 1 or not (gaps == gaps[0]).all():
        return None
    progressions = sum(n - (k - 1) * g for g in range(1, (n - 1) // (k - 1) + 1))
    return int(gaps[0]), progressions / math.comb(n, k)


def recurring(steps: list, n: int) -> Optional[dict]:
    """Whether waits at ``steps`` (sorted step indices among ``n`` steps:
    the outliers) recur: {every (steps), p_value, bursts (True where runs of
    back-to-back ones recur, counted at each run's first)}, or None.
    Evenly spaced ones by :func:`even_spacing` (exact); otherwise the
    residue test (:func:`searched_cadence`: most on one residue, paying for
    every period it could have searched) over the commonest gaps between
    them, then between the runs' first steps.  Every 5th fetch slow but
    one, set aside as a wait for a core, read "Record longer to see whether
    it recurs" (59 of 60 on the residue), and so did every burst of 4
    every 40 steps (helper 31B)."""
    even = even_spacing(steps, n)
    if even is not None and even[1] < PERIOD_ALPHA:
        return {"every": even[0], "p_value": even[1]}
    if len(steps) < PREDICTED_MIN_STALLS or n < 2 * PREDICTED_MIN_STALLS:
        return None
    mask = np.zeros(n, dtype=bool)
    mask[np.asarray(steps, dtype=np.int64)] = True
    onsets = mask & ~np.r_[False, mask[:-1]]
    position, tested = np.arange(n), np.ones(n, dtype=bool)
    for bursts, m in ((False, mask), (True, onsets)):
        if bursts and onsets.sum() in (mask.sum(), 0):
            break
        gaps = np.diff(np.flatnonzero(m))
        gaps = gaps[(gaps >= 2) & (gaps <= n // PREDICTED_MIN_STALLS)]
        if not len(gaps):
            continue
        values, counts = np.unique(gaps, return_counts=True)
        candidates = values[np.argsort(-counts, kind="stable")][:3]
        t = searched_cadence(m, position, tested, None, candidates)
        if t is not None and t["periodic"]:
            return {"every": int(t["period"]), "p_value": float(t["p_value"]),
                    **({"bursts": True} if bursts else {})}
    return None


def burst_onsets(stall_mask: np.ndarray, epoch: np.ndarray) -> np.ndarray:
    """The first stall of each run of back-to-back stalls (same epoch)."""
    prev = np.r_[False, stall_mask[:-1]] & np.r_[False, epoch[1:] == epoch[:-1]]
    return stall_mask & ~prev


# A run of back-to-back stalls is placed at its longest wait when that wait
# holds at least this share of the run's wait, twice the rest of the run
# together (one stall is the run's cause), else at its first stall.  Half
# would not do: of two stalls the longer always holds half, so two equal
# slow fetches every 8 steps were placed by noise and their gaps of 8
# read 7, 8, 9.
BURST_DOMINANT_SHARE = 2 / 3


def burst_anchors(stall_mask: np.ndarray, epoch: np.ndarray,
                  stall_wait_ns: Optional[np.ndarray] = None) -> np.ndarray:
    """The stall that stands for each run of back-to-back stalls (same
    epoch): its longest wait where that holds BURST_DOMINANT_SHARE of the
    run's wait, else (and where the waits, ``stall_wait_ns``, one per stall
    in step order, are not given) its first stall.  One worker burning a
    slow batch makes the loop wait on the batch before it too (the worker
    holds the GIL its queue's feeder needs: 47-63 ms before 146-171 ms
    measured), so anchoring at the first stall moved that run by one step
    whenever the wait before crossed the threshold, and gaps of 10 read
    9, 11, 9; a round whose workers finish in pairs stalls longest on its
    first batch; a burst of equal slow samples has no dominant wait and
    keeps its first."""
    onsets = burst_onsets(stall_mask, epoch)
    if stall_wait_ns is None:
        return onsets
    idx = np.flatnonzero(stall_mask)
    first = np.flatnonzero(onsets[idx])             # each run's first stall, in run order
    if len(first) == len(idx):
        return onsets                               # every run one stall long
    wait = np.asarray(stall_wait_ns, dtype=np.int64)
    run = np.cumsum(onsets[idx]) - 1
    # Each run's longest wait, the first stall that has it, and its total:
    # segment reductions over the runs, no sort.
    longest = np.maximum.reduceat(wait, first)
    at = np.flatnonzero(wait == longest[run])
    peak = at[np.r_[True, run[at][1:] != run[at][:-1]]]
    total = np.add.reduceat(wait.astype(np.float64), first)
    dominant = wait[peak] >= BURST_DOMINANT_SHARE * total
    out = onsets.copy()
    out[idx[first[dominant]]] = False
    out[idx[peak[dominant]]] = True
    return out


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
    m = int(len(gaps))
    if m == 0 or steps <= 1:
        return 1.0
    c = int(np.max(np.unique(gaps, return_counts=True)[1]))
    return _modal_count_p(c, m, stalls, steps, bursts)


def _modal_count_p(c: int, m: int, stalls: int, steps: int, bursts: bool) -> float:
    """:func:`period_p_value` for a modal gap seen ``c`` times among ``m``
    gaps."""

    if m == 0 or steps <= 1:
        return 1.0
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


# Not yet: the stalls fit one period, but this run is too small to tell
# it from random stalls at PERIOD_ALPHA; the answer says which period they
# fit and about how many more steps would settle it.
UNSETTLED = "UNSETTLED"

# The hypothesis the loader's configuration predicts is tested first, on
# its own (one pre-stated test, no search penalty): with num_workers = k
# >= 2 and the workers finishing in lock-step, the loop stalls on the
# first fetch of each round, at positions 0, k, 2k, ... of every epoch.
# The epoch's start-up fetches (its first k) anchor the phase but are held
# out of the test: they carry the workers' start-up or were made during
# it, so they are not exchangeable with the steady fetches, and a null
# that placed stalls on them would favour the residue.  Among the n
# steady fetches, N of them on the predicted residue, the null places the
# run's K steady stalls at random: the chance that J or more land on the
# residue is the hypergeometric tail P(X >= J), X ~ Hypergeom(n, N, K),
# exact at the run's size.  The seed's 4-worker run (16 steps, stalls at
# 0, 4, 8, 12) has 3 of 3 steady stalls on the 3 residue fetches among
# 12: p = 1/220.
#
# The same hypothesis is also tested on the waits themselves, which a
# stall line cuts into two: under the null the steady waits are
# exchangeable across positions, so the Mann-Whitney U of the residue's
# waits against the others' is the exact permutation test that the
# residue waits longer (scipy.stats.mannwhitneyu, exact up to
# RANK_EXACT_MAX fetches, its normal approximation past them).  Two
# locked-step workers sharing one core leave every other wait 40-330 ms
# and the rest 0.2-85 ms: a stall line puts 4-5 of the 7 long ones above
# it (hypergeometric p = 0.01-0.03, not yet), while their ranks alone give
# p = 1/3432.  The answer's p-value is the smaller of the two, doubled
# (Bonferroni: two tests of one hypothesis).  A period is claimed when p < PERIOD_ALPHA over at least
# PREDICTED_MIN_STALLS stalls, at least PERIOD_MIN_REPEATS of them on the
# residue, at least PERIOD_MIN_SHARE of the stalls on it, more than
# PERIOD_MIN_SHARE of its fetches stalled, and the period the least one
# that holds (see predicted_cadence).
PREDICTED_MIN_STALLS = PERIOD_MIN_GAPS + 1
# The rank test is exact (its full permutation distribution) up to this
# many fetches (0.02 s at 200 here), the normal approximation past it.
RANK_EXACT_MAX = 200
# ... and reads at most the first this many tested fetches: any fixed
# subset keeps the waits exchangeable under the null, 65,536 fetches give
# the test all the power a period needs, and ranking 10M waits would cost
# about a second of report() (whose budget at 10M steps is 1.5 s).
RANK_MAX_FETCHES = 65536
# Lock-step puts every stall on the residue; one stall off it (a host
# blip) still fits the prediction, more do not: the answer is then
# searched like any other run's.
PREDICTED_OFF_RESIDUE = 1
# "About M more steps" is searched up to this many times the run's length.
SETTLE_MAX_GROWTH = 64


# Up to this many fetches the tail is summed in exact integers (Python's
# int division rounds the quotient correctly), 2-10 us here against 85 for
# scipy.stats.hypergeom.sf, at the short runs a search tries hundreds of
# residues of; past it, SciPy's.
HYPERGEOM_EXACT_MAX = 128


def _hypergeom_tail(j: int, n: int, slots: int, k: int) -> float:
    """P(X >= j) for X ~ Hypergeom(n, slots, k): k stalls placed at random
    among n fetches, slots of them on the predicted residue."""
    if j <= 0:
        return 1.0
    if n <= HYPERGEOM_EXACT_MAX:
        lo, top = max(0, k - (n - slots)), min(k, slots)
        if j > top:
            return 0.0
        if j <= lo:
            return 1.0
        total = math.comb(n, k)
        if top - j < j - lo:      # the shorter side of the sum, either way exact
            ways = sum(math.comb(slots, x) * math.comb(n - slots, k - x)
                       for x in range(j, top + 1))
        else:
            ways = total - sum(math.comb(slots, x) * math.comb(n - slots, k - x)
                               for x in range(lo, j))
        return ways / total

    return float(hypergeom.sf(j - 1, n, slots, k))


def _rank_tail(on_wait: np.ndarray, off_wait: np.ndarray) -> float:
    """P(U >= u): the one-sided Mann-Whitney test that the waits
    ``on_wait`` (the residue's) are longer than ``off_wait``; 1.0 when
    either is empty."""

    if not len(on_wait) or not len(off_wait):
        return 1.0
    method = "exact" if len(on_wait) + len(off_wait) <= RANK_EXACT_MAX else "asymptotic"
    return float(mannwhitneyu(on_wait, off_wait, alternative="greater", method=method).pvalue)


def _first_true(mask: np.ndarray, k: int) -> np.ndarray:
    """The indices of ``mask``'s first ``k`` True values (int64, at most k),
    read from a prefix that doubles until it holds k of them, so a long
    run's rank test does not copy every fetch to keep RANK_MAX_FETCHES."""
    length = min(len(mask), 2 * k)
    while True:
        at = np.flatnonzero(mask[:length])
        if len(at) >= k or length == len(mask):
            return at[:k]
        length = min(len(mask), 2 * length)


def predicted_cadence(stalled: np.ndarray, position: np.ndarray, period: int,
                      tested: np.ndarray, wait_ns: Optional[np.ndarray] = None) -> dict:
    """The pre-stated test above for a stall every ``period`` fetches from
    each epoch's start.

    ``stalled`` (bool), ``position`` (the fetch's 0-based position in its
    epoch, int), ``tested`` (bool: the steady fetches whose position is
    known) have shape (steps,); ``wait_ns`` (ns; None: the rank test is
    left out) the waits of the first m <= steps fetches, shape (m,): the
    rank test reads the first RANK_MAX_FETCHES tested fetches among them.  Returns {period,
    phase (0), fetches (n), slots (N), stalls (K), on_residue (J), tests
    (1: one pre-stated test), p_value (the hypergeometric and rank tests'
    smaller p, doubled; without waits the hypergeometric p alone; times
    ``tests``), single_p_value (before that product),
    hypergeom_p_value, rank_p_value (None without waits), best_p_value
    (the p-value had every stall, up to N, been on the residue: whether
    this run could show the period at all), periodic (bool), consistent
    (at least PERIOD_MIN_REPEATS stalls on the residue, at most
    PREDICTED_OFF_RESIDUE off it, more than PERIOD_MIN_SHARE of its
    fetches stalled), every (most of the residue's fetches stall and no
    smaller period's do: the least period), and for ``period`` >= 2 the
    same period at any phase (:func:`any_phase`): any_phase_phase,
    any_phase_p_value, any_phase_fits}."""
    t = _residue_test(stalled, position, int(period), tested, wait_ns, phase=0, tests=1)
    if period >= 2:
        t.update(any_phase(stalled, position, int(period), tested))
    return t


def any_phase(stalled: np.ndarray, position: np.ndarray, period: int,
              tested: np.ndarray) -> dict:
    """"A stall every ``period`` fetches" at whichever residue holds the
    most stalls: the hypergeometric test at that residue, Bonferroni over
    the ``period`` residues it could have been (one period, every phase:
    no other period is searched).  Phase 0 is the loader's own prediction
    where its workers start together; on fewer cores than workers they
    do not, and the first round's batches come out in pairs, so the
    cadence keeps its period at another phase (4 workers on 2 cores, 16
    fetches: stalls at 5, 9 and 13 in 1 of 3 runs, helper 41A).  Returns
    {any_phase_phase, any_phase_p_value, any_phase_fits (periodic at that
    phase as :func:`predicted_cadence` reads it, or consistent with no
    stall off its residue)}.  The phase-0 prediction may leave
    PREDICTED_OFF_RESIDUE stall off (a host blip); a residue chosen for
    its stalls may not: 3 random stalls among 12 fetches put 2 on some
    residue mod 4 and 1 off in about 6 of 10 placements, and a CPU-bound
    4-worker row of a quiet seed sweep, stalls 2 and 3 fetches apart,
    "fitted" period 4 so and let the sweep read "the period follows
    num_workers" on its 2-worker rows alone (helper 63); all 3 on one
    residue happen in 4 of 220."""
    t = _residue_test(stalled, position, period, tested, None, phase=None, tests=period)
    on_it = t["consistent"] and t["on_residue"] == t["stalls"]
    return {"any_phase_phase": t["phase"], "any_phase_p_value": t["p_value"],
            "any_phase_fits": bool(t["periodic"] or on_it)}


def _residue_test(stalled: np.ndarray, position: np.ndarray, period: int,
                  tested: np.ndarray, wait_ns: Optional[np.ndarray],
                  phase: Optional[int], tests: int) -> dict:
    """:func:`predicted_cadence` at residue ``phase`` mod ``period`` (None:
    the residue holding the most stalls), its p-value multiplied by
    ``tests`` (Bonferroni: the (period, phase) pairs a search tried)."""
    tested = np.asarray(tested, dtype=bool)
    position = np.asarray(position)
    # Every count below is a sum over residues mod `period`: the fetches
    # tested and the stalls among them, per residue (a divisor d of the
    # period sees residue r at 0 mod d exactly when r is).
    fetches_at, stalls_at, last = _core.residue_counts(
        position, period, tested, np.asarray(stalled, dtype=bool))
    if phase is None:
        # The residue with the most stalls, ties to the larger share of
        # its fetches stalled.
        phase = int(np.lexsort((stalls_at / np.maximum(fetches_at, 1), stalls_at))[-1])
    n, slots = int(fetches_at.sum()), int(fetches_at[phase])
    k, j = int(stalls_at.sum()), int(stalls_at[phase])
    p_hyper = _hypergeom_tail(j, n, slots, k) if k else 1.0
    best = _hypergeom_tail(min(k, slots), n, slots, k) if k else 1.0
    p_rank = None
    p = p_hyper
    if wait_ns is not None:
        at = _first_true(tested[:len(wait_ns)], RANK_MAX_FETCHES)
        wait = np.asarray(wait_ns)[at].astype(np.float64)
        first = (position[at] % period) == phase
        p_rank = _rank_tail(wait[first], wait[~first])
        p, best = min(1.0, 2 * min(p_hyper, p_rank)), min(1.0, 2 * best)
    single = p
    p, best = min(1.0, tests * p), min(1.0, tests * best)
    # "A stall every `period` fetches": most of the residue's fetches
    # stall (stalls every other round sit on it too, at twice the period),
    # and `period` is the least such period: for each proper divisor d, the
    # fetches at the phase mod d off the residue do not (stalls every 2
    # fetches fill the residue mod 4 as well).
    every = j > PERIOD_MIN_SHARE * slots
    for d in range(1, period):
        if period % d == 0:
            between = (phase + np.arange(d, period, d)) % period
            if stalls_at[between].sum() > PERIOD_MIN_SHARE * fetches_at[between].sum():
                every = False
    # Under PREDICTED_MIN_STALLS stalls (fewer than a claim needs), only
    # where every fetch of the residue stalled: the most a run that short
    # can show (lock-step at 4 workers over 12 steps: 2 of 2).  Two random
    # stalls on 2 of the residue's 3 fetches read "consistent with a stall
    # every 4 fetches ... about 6 more steps would settle it", and more
    # steps did not (helper 30A), where the gap test said TOO-FEW.
    consistent = (every and j >= PERIOD_MIN_REPEATS and k - j <= PREDICTED_OFF_RESIDUE
                  and (k >= PREDICTED_MIN_STALLS or j == slots))
    periodic = (every and p < PERIOD_ALPHA and k >= PREDICTED_MIN_STALLS
                and j >= max(PERIOD_MIN_REPEATS, PERIOD_MIN_SHARE * k))
    return {"period": period, "phase": int(phase), "fetches": n, "slots": slots, "stalls": k,
            "on_residue": j, "tests": int(tests), "p_value": p, "single_p_value": single,
            "hypergeom_p_value": p_hyper,
            "rank_p_value": p_rank, "best_p_value": best, "every": bool(every),
            "periodic": bool(periodic), "consistent": bool(consistent),
            # Where the run would go on: the next fetch's position.
            "last_position": last if last >= 0 else None}


# Several stalls a period.  A slow sample at two places of every P
# (indices 0 and 3 of every 7, 0 and 2 of every 6) makes two stalls a
# cycle: its gaps alternate (3, 4, 3, 4), no gap is the commonest, and one
# residue holds half the stalls; and where the two places share a residue
# of a smaller period (0 and 2 of every 6: both even) that period's
# residue fills two thirds of its fetches, enough for "a stall every 2
# fetches", though the fetches at 4 of every 6 never stall (helper 32A:
# "PERIODIC every 2" in 7 of 7 runs, "IRREGULAR" for 0 and 3 of every 7
# in 4 of 4).  The model: the stalls sit on a set S of residues mod P,
# 2 <= |S| <= SLOTS_MAX, each of them stalling most of its fetches (more
# than PERIOD_MIN_SHARE, at least PERIOD_MIN_REPEATS stalls), and S is
# not the same set shifted by a proper divisor of P (then the divisor is
# the period).  The test: the hypergeometric tail of the stalls on S's
# fetches, as the one-residue test's, Bonferroni over every (P, S) pair
# a search of the run's size could try (multi_search_tests), at
# PERIOD_ALPHA as a family of its own beside the one-residue search.
SLOTS_MAX = 3
# ... over cycles of at most this many fetches: the several-stalls model
# is a short cycle of slow places (a sample pattern, a round split in
# two), and its price stays bounded at any run length (sum over P of
# C(P, 2) + C(P, 3) is 46,376 at 32; over every P to n / 3 it would grow
# as n^4 and no long run could ever show one).
SLOTS_MAX_PERIOD = 32


def residue_sets_tried(top_period: int, most: int = SLOTS_MAX) -> int:
    """How many (period, residue set) pairs a search over periods
    2..``top_period`` and sets of 2..``most`` residues tries: sum over P of
    C(P, s) (the several-stalls search's Bonferroni factor, and the slow
    samples' stride sets')."""
    return sum(math.comb(p, k) for p in range(2, top_period + 1) for k in range(2, most + 1))


def shifted_by_a_divisor(residues, period: int) -> bool:
    """Whether the set ``residues`` mod ``period`` is itself shifted by a
    proper divisor d of ``period``: the same set every d, so d is its
    period, not ``period``."""
    held = set(int(r) for r in residues)
    return any(period % d == 0 and {(r + d) % period for r in held} == held
               for d in range(1, period))


@functools.lru_cache(maxsize=256)
def multi_search_tests(fetches: int) -> int:
    """How many (period, residue set) pairs the several-stalls search pays
    for among ``fetches`` tested fetches: :func:`residue_sets_tried` up to
    min(fetches // PREDICTED_MIN_STALLS, SLOTS_MAX_PERIOD)."""
    return residue_sets_tried(min(int(fetches) // PREDICTED_MIN_STALLS, SLOTS_MAX_PERIOD))


def _multi_residue_test(stalled: np.ndarray, position: np.ndarray, period: int,
                        tested: np.ndarray, tests: int) -> Optional[dict]:
    """The several-stalls test above at ``period`` (arrays as
    :func:`predicted_cadence` takes them), its p-value times ``tests``;
    None where no set S of 2 to SLOTS_MAX residues, each stalling most of
    its fetches, has ``period`` for its least period.  The answer has the
    keys of :func:`_residue_test`'s (``phase`` the least residue of S,
    ``slots`` the fetches on S, ``on_residue`` the stalls on them), with
    ``residues`` (S, ascending) beside them."""
    fetches_at, stalls_at, _ = _core.residue_counts(
        position, period, np.asarray(tested, dtype=bool), np.asarray(stalled, dtype=bool))
    chosen = np.flatnonzero((stalls_at > PERIOD_MIN_SHARE * fetches_at)
                            & (stalls_at >= PERIOD_MIN_REPEATS))
    if not 2 <= len(chosen) <= SLOTS_MAX:
        return None
    if shifted_by_a_divisor(chosen, period):
        return None     # the same set every d fetches: d is the period
    n, slots = int(fetches_at.sum()), int(fetches_at[chosen].sum())
    k, j = int(stalls_at.sum()), int(stalls_at[chosen].sum())
    p_single = _hypergeom_tail(j, n, slots, k) if k else 1.0
    best = _hypergeom_tail(min(k, slots), n, slots, k) if k else 1.0
    p = min(1.0, tests * p_single)
    periodic = (p < PERIOD_ALPHA and k >= PREDICTED_MIN_STALLS
                and j >= max(PERIOD_MIN_REPEATS * len(chosen), PERIOD_MIN_SHARE * k))
    consistent = (j >= PERIOD_MIN_REPEATS * len(chosen) and k - j <= PREDICTED_OFF_RESIDUE
                  and p_single < PERIOD_ALPHA)
    return {"period": int(period), "phase": int(chosen[0]), "residues": [int(r) for r in chosen],
            "fetches": n, "slots": slots, "stalls": k, "on_residue": j, "tests": int(tests),
            "p_value": p, "single_p_value": p_single, "hypergeom_p_value": p_single,
            "rank_p_value": None, "best_p_value": min(1.0, tests * best), "every": True,
            "periodic": bool(periodic), "consistent": bool(consistent)}


# Searched periods, by position.  Where the loader's own period does not
# hold (or it has none), the stalls may still come every P fetches of each
# epoch for another P: a data set whose every P-th sample is slow.  The
# gaps between stalls show that only while each slow sample makes one
# stall; on a loaded host a slow sample's wait can spill onto the fetch
# beside it (waits of 103 and 53 ms for one 80 ms sample), the gaps read
# 1, 2, 3, ... and the gap test sees no period.  The positions do not
# move: the residue test above, at the residue holding the most stalls,
# for each candidate period.  The search pays for itself: its p-value is
# multiplied by every (period, phase) pair a run of n tested fetches could
# be tested on, periods 2 to n // PREDICTED_MIN_STALLS (each residue at
# least PREDICTED_MIN_STALLS fetches), sum(P) pairs (Bonferroni).  The
# candidates drawn from the gaps only choose which pairs are computed:
# the bound counts them all, so the choice costs no false alarms.  A
# searched period is consistent (not yet) where it would hold as a
# pre-stated one: its own p-value, before the search's price, under
# PERIOD_ALPHA, most stalls (PERIOD_MIN_SHARE) on its residue and at most
# PREDICTED_OFF_RESIDUE off it (the predicted test's own bound: random
# stalls, 3 of 6 on a phase of 13 the search picked among 119, read "not
# yet" at p = 1), at least PERIOD_MIN_REPEATS, most of the residue's
# fetches stalled and no smaller period's (the least-period rule).  A longer run at the same
# rates then settles it.  Where even that does not hold no period is
# shown; a run too short to show one (slow samples spilling onto their
# neighbours in 24 steps) is then IRREGULAR by the gaps, a known limit.
SEARCH_CANDIDATES = 4
# The search reads the first this many steps (a fixed prefix keeps the
# null's exchangeability, as the rank test's does): at 10M steps four
# residue counts over every step would cost 0.2 s of report().
SEARCH_MAX_FETCHES = 2 * RANK_MAX_FETCHES


def search_tests(fetches: int) -> int:
    """How many (period, phase) pairs the search pays for among
    ``fetches`` tested fetches: sum(P) for P in 2..fetches //
    PREDICTED_MIN_STALLS (0: too few fetches for any period)."""
    top = int(fetches) // PREDICTED_MIN_STALLS
    return top * (top + 1) // 2 - 1 if top >= 2 else 0


def searched_cadence(stalled: np.ndarray, position: np.ndarray, tested: np.ndarray,
                     wait_ns: Optional[np.ndarray], candidates) -> Optional[dict]:
    """The residue test of each candidate period (ints, each at least 2),
    paying for the search (see above); arrays as :func:`predicted_cadence`
    takes them, read over their first SEARCH_MAX_FETCHES steps.  Returns
    the periodic answer with the smallest p-value, else the consistent one
    with the smallest, else None; the answer is predicted_cadence's with
    ``searched`` True and ``consistent`` by the share rule above."""
    m = min(len(stalled), SEARCH_MAX_FETCHES)
    stalled = np.asarray(stalled, dtype=bool)[:m]
    position, tested = np.asarray(position)[:m], np.asarray(tested, dtype=bool)[:m]
    n = int(np.count_nonzero(tested))
    tests = search_tests(n)
    if wait_ns is not None:
        wait_ns = wait_ns[:m]
    found = []
    for period in dict.fromkeys(int(c) for c in candidates):
        if not 2 <= period <= n // PREDICTED_MIN_STALLS:
            continue
        t = _residue_test(stalled, position, period, tested, wait_ns, phase=None, tests=tests)
        k, j = t["stalls"], t["on_residue"]
        t["consistent"] = bool(t["every"] and j >= PERIOD_MIN_REPEATS
                               and j >= PERIOD_MIN_SHARE * k
                               and k - j <= PREDICTED_OFF_RESIDUE
                               and t["single_p_value"] < PERIOD_ALPHA)
        t["searched"] = True
        if (t["periodic"] or t["consistent"]) and not _a_divisor_holds(
                stalled, position, tested, t):
            found.append(t)
        found.extend(_several(stalled, position, tested, period, n))
    if not found:
        return None
    return min(found, key=lambda t: (not t["periodic"], t["p_value"], t["period"]))


def _a_divisor_holds(stalled: np.ndarray, position: np.ndarray, tested: np.ndarray,
                     t: dict) -> bool:
    """Whether "a stall every d fetches, some missed" holds the stalls of
    the one-residue test ``t`` as well, for a proper divisor d >= 2 of its
    period: the residue of t's phase mod d holds all but
    PREDICTED_OFF_RESIDUE of the stalls, and their share on t's own
    residue among that class's fetches is not beyond chance (the
    hypergeometric tail of t's stalls on its residue, the class's stalls
    drawn at random among the class's fetches, not under PERIOD_ALPHA),
    where every class stall on t's residue would have been.
    A slow sample every 4th index at 4 workers, half its batches hidden by
    the look-ahead, stalled on 8 of 16 fetches at 0 mod 4: 5 of them at 4
    mod 8 read "PERIODIC every 8" beside gaps 4x5, 8x1, 20x1 (helper 41A,
    2 of 4 runs)."""
    period = t["period"]
    for d in range(period // 2, 1, -1):
        if period % d:
            continue
        one, spread = _class_spread(stalled, position, tested, t, d)
        if t["stalls"] - one["on_residue"] > PREDICTED_OFF_RESIDUE:
            continue
        # Only where the spread could be refuted at all (every class stall
        # on t's residue under PERIOD_ALPHA): 3 stalls every 10 of 40 steps
        # cannot tell "every 10" from "every 5, half missed", and t stands.
        best = _hypergeom_tail(min(one["on_residue"], t["slots"]), one["slots"], t["slots"],
                               one["on_residue"])
        if best >= PERIOD_ALPHA:
            continue
        if spread >= PERIOD_ALPHA:
            return True
    return False


def _class_spread(stalled: np.ndarray, position: np.ndarray, tested: np.ndarray,
                  t: dict, d: int) -> tuple[dict, float]:
    """(the residue test of the class mod ``d`` holding ``t``'s phase, the
    hypergeometric tail of ``t``'s stalls on its own residues were that
    class's stalls spread over its fetches alike): "a stall every d
    fetches, some missed" against t's finer cadence, before any price
    for a search."""
    one = _residue_test(stalled, position, d, tested, None, phase=t["phase"] % d, tests=1)
    return one, _hypergeom_tail(t["on_residue"], one["slots"], t["slots"], one["on_residue"])


def _several(stalled: np.ndarray, position: np.ndarray, tested: np.ndarray, period: int,
             n: int) -> list:
    """[the several-stalls test at ``period``] where it is periodic or
    consistent, searched (its own family's price), and not "a stall every
    d fetches" with some missed for a divisor d whose one residue holds
    all its places (:func:`_spread_refuted`), else []."""
    if period > SLOTS_MAX_PERIOD:
        return []
    t = _multi_residue_test(stalled, position, period, tested, multi_search_tests(n))
    if t is None or not (t["periodic"] or t["consistent"]):
        return []
    for d in range(period - 1, 1, -1):
        if period % d == 0 and len({x % d for x in t["residues"]}) == 1:
            # The largest such d: its one residue is the tightest that
            # holds S ("every 4" with misses holds 0, 8 and 12 of 16 as
            # "every 2" does, and the even fetches at 2 of 4 never stall).
            refuted = _spread_refuted(stalled, position, tested, t, d, n)
            if refuted is None:
                return []
            t["spread_p_value"], t["spread_period"] = refuted, d
            break
    t["searched"] = True
    return [t]


@functools.lru_cache(maxsize=256)
def _spread_tries(most: int) -> int:
    """The proper subsets of 2 to SLOTS_MAX places among k, summed over
    the multiples k in 2..``most``."""
    return sum(math.comb(k, s) for k in range(2, max(2, most) + 1)
               for s in range(2, min(k - 1, SLOTS_MAX) + 1))


def _spread_refuted(stalled: np.ndarray, position: np.ndarray, tested: np.ndarray,
                    t: dict, d: int, n: int) -> Optional[float]:
    """The p-value that the stalls of the residue mod ``d`` holding ``t``'s
    residues would sit on those residues as much as they do, were they
    spread over its fetches alike ("a stall every d fetches", some
    missed): the hypergeometric tail, Bonferroni over every proper subset
    of 2 to SLOTS_MAX places of every multiple k * d (k >= 2, k * d at
    most SLOTS_MAX_PERIOD) a search among ``n`` tested fetches could try;
    None where that is not under PERIOD_ALPHA, or where S is all of its
    places."""
    if len(t["residues"]) >= t["period"] // d:
        return None
    _, spread = _class_spread(stalled, position, tested, t, d)
    tries = _spread_tries(min(n // (PREDICTED_MIN_STALLS * d), SLOTS_MAX_PERIOD // d))
    p = tries * spread
    return min(1.0, p) if p < PERIOD_ALPHA else None


def finer_cadence(positions: Optional["Positions"], period: int) -> Optional[dict]:
    """Where a period ``period`` was found, the several-stalls answer at a
    multiple of it that the stalls show instead, or None (also without
    positions).  "A stall every ``period`` fetches", some missed, spreads
    its misses over the fetches of its residue alike; stalls at 0 and 2 of
    every 6 fill two thirds of the even fetches, and those at 4 of every 6
    never stall.  The answer at ``k * period`` (k >= 2, each of its
    residues at least PREDICTED_MIN_STALLS fetches, ``k * period`` at
    most SLOTS_MAX_PERIOD) replaces it where it
    is periodic (the several-stalls test, its search's price paid), its
    residues all on one residue of ``period`` and not all of that
    residue's places, and the even spread is refuted
    (:func:`_spread_refuted`, under PERIOD_ALPHA).  "Every 2" at 60 % with
    random misses read 4, 6 or 10 in 10 % of 40-step runs without that
    test."""
    if positions is None:
        return None
    m = min(len(positions.stalled), SEARCH_MAX_FETCHES)
    stalled = np.asarray(positions.stalled, dtype=bool)[:m]
    position = np.asarray(positions.position)[:m]
    tested = np.asarray(positions.tested, dtype=bool)[:m]
    n = int(np.count_nonzero(tested))
    best = None
    most = min(n // PREDICTED_MIN_STALLS, SLOTS_MAX_PERIOD) // max(1, period)
    for times in range(2, most + 1):
        for t in _several(stalled, position, tested, times * period, n):
            # (Residues on one residue of ``period``: _several refuted the
            # spread against the largest such divisor, ``period`` or more.)
            if not t["periodic"] or len({x % period for x in t["residues"]}) != 1:
                continue
            if best is None or t["p_value"] < best["p_value"]:
                best = t
    return best


def _settle_steps(steps: int, p_of) -> Optional[int]:
    """The fewest steps, at least ``steps``, at which ``p_of(steps)`` (the
    p-value of a run that keeps this one's pattern and rates) falls under
    PERIOD_ALPHA; None past SETTLE_MAX_GROWTH times ``steps``."""
    lo, hi = steps, steps
    while p_of(hi) >= PERIOD_ALPHA:
        lo, hi = hi, hi * 2
        if hi > SETTLE_MAX_GROWTH * max(steps, 1):
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if p_of(mid) < PERIOD_ALPHA else (mid, hi)
    return hi


def predicted_settle_steps(test: dict) -> Optional[int]:
    """How many more steps would let :func:`predicted_cadence` (or
    :func:`searched_cadence`) conclude if the run went on as it is: the
    same stall rate and the same share of the stalls on the residue; None
    if not within SETTLE_MAX_GROWTH."""
    n, k, j, period = test["fetches"], test["stalls"], test["on_residue"], test["period"]
    slots = test.get("slots") or max(n // period, 1)
    if not n or not k or not j:
        return None

    # With the rank test beside it, the hypergeometric test concludes at
    # half the level (the doubling in predicted_cadence); a searched
    # period pays for the search at each length (search_tests).
    both = 2.0 if test.get("rank_p_value") is not None else 1.0
    # The run goes on from its own counts: one fetch in `period` of the
    # later ones on the residue, each stalling at the residue's own rate,
    # the others at theirs.  (From the counts' rates alone, every 5 of 16
    # steps at num_workers=5, 3 of 3 slots stalled, read "about 9 more
    # steps" where 1 more settled it: m // period fetches on the residue
    # at 12 tested fetches is 2 of the 3 there are; helper 35A.)
    on_rate = j / slots
    off_rate = (k - j) / (n - slots) if n > slots else 0.0
    last, phase = test.get("last_position"), test.get("phase")

    def later_slots(more: int) -> int:
        # The fetches on the residue among the next `more` positions, where
        # the run's last position is known; else one in `period`.
        if last is None or phase is None:
            return round(more / period)
        return (last + more - phase) // period - (last - phase) // period

    def p_of(m: int) -> float:
        more_slots = later_slots(m - n)
        mm_slots = slots + more_slots
        jj = j + round(on_rate * more_slots)
        kk = jj + (k - j) + round(off_rate * ((m - n) - more_slots))
        # A test needs at least PREDICTED_MIN_STALLS stalls (never assumed
        # sooner).
        if kk < PREDICTED_MIN_STALLS or jj < PERIOD_MIN_REPEATS:
            return 1.0
        tests = search_tests(m) if test.get("searched") else 1
        return both * tests * _hypergeom_tail(jj, m, mm_slots, kk)

    got = _settle_steps(n, p_of)
    return None if got is None else max(got - n, 1)


def gap_settle_steps(modal_share: float, stalls: int, steps: int, bursts: int = 0) -> Optional[int]:
    """How many more steps would let the searched test (period_p_value)
    conclude if the run went on as it is: stalls at this run's rate
    (``stalls`` in ``steps``), the same share ``modal_share`` of their gaps
    at the modal gap, or, with ``bursts`` (the runs of back-to-back stalls
    among them), bursts at this run's rate and that share of their gaps;
    None if not within SETTLE_MAX_GROWTH.  (Every later gap at the period
    would settle a 44-step run with gaps 5, 10, 10 in one more step; at
    the run's own mix it takes twice the steps.)"""
    if stalls < 1 or steps < 1:
        return None

    def p_of(m: int) -> float:
        kk = round(stalls * m / steps)
        bb = round(bursts * m / steps) if bursts else kk
        if bb < PREDICTED_MIN_STALLS:
            return 1.0
        # The modal count the share gives, rounded down: "about M more
        # steps" should not promise a conclusion sooner than the mix does.
        c = max(PERIOD_MIN_REPEATS, int(modal_share * (bb - 1) + 1e-9))
        return _modal_count_p(min(c, bb - 1), bb - 1, max(kk, bb), m, bool(bursts))

    got = _settle_steps(steps, p_of)
    return None if got is None else max(got - steps, 1)


class Positions(NamedTuple):
    """Where each step sits, for the residue tests (shapes (steps,) but
    ``wait_ns``): ``stalled`` (bool), ``position`` (0-based in its epoch,
    -1 unknown), ``tested`` (bool: steady, position known), ``wait_ns``
    (the first m <= steps fetches' waits, ns, or None)."""

    stalled: np.ndarray
    position: np.ndarray
    tested: np.ndarray
    wait_ns: Optional[np.ndarray]


def temporal_of(stall_mask: np.ndarray, epoch: np.ndarray,
                steady_wait_ns: np.ndarray, steady_steps: Optional[int] = None,
                every_fetch: bool = False, predicted: Optional[dict] = None,
                stall_wait_ns: Optional[np.ndarray] = None,
                positions: Optional[Positions] = None,
                gaps: Optional[np.ndarray] = None) -> Optional[dict]:
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
    runs are tried, under the same null test, each run placed at its
    longest wait (:func:`burst_anchors`; ``stall_wait_ns``: each stall's
    wait in step order, None: at its first stall); ``counted`` says which
    was used.

    ``predicted`` (:func:`predicted_cadence` for the loader's own period,
    or None) is answered first: PERIODIC at that period when it holds
    (``tested`` "predicted").  Otherwise the period is searched
    (``tested`` "searched"): in the gaps, then, with ``positions``, by
    residue (:func:`searched_cadence`, ``counted`` "position", the test in
    ``searched``).  With no period shown, the answer is
    UNSETTLED (``consistent_period``, ``settle_steps``: about how many more
    steps would settle it) where the stalls fit the predicted period or
    one gap holds at least PERIOD_MIN_SHARE of the gaps (``phase_filled``
    False where the stalls do not stall most of that phase's fetches over
    the run: no count of steps then),
    IRREGULAR only where no gap does and some gap is off it (the evidence
    against a period); ``p_value`` is then the quoted test's
    (:func:`unsettled_test`); ``predicted`` rides
    along in the answer.  Counted in bursts, the answer also holds
    ``burst_gap_histogram``: [[gap, count], ...] between the bursts' first
    stalls, so that the words and the gaps shown are the same gaps, and
    ``bursts``, how many there are (every epoch's).
    ``gaps``: ``_core.stall_gaps(stall_mask, epoch)`` where the caller holds
    it already (None: computed here).
    """
    anchors = burst_anchors(stall_mask, epoch, stall_wait_ns)
    if gaps is None:
        gaps = _core.stall_gaps(stall_mask, epoch)
    found = _temporal_of(stall_mask, epoch, steady_wait_ns, steady_steps, every_fetch, predicted,
                         anchors, positions, gaps)
    if found is not None and found.get("counted") == "bursts":
        values, counts = _core.gap_histogram(_core.stall_gaps(anchors, epoch))
        found["burst_gap_histogram"] = np.stack([values, counts], axis=1).tolist()
        found["bursts"] = int(np.count_nonzero(anchors))
    if found is not None and found["label"] == UNSETTLED:
        # The p-value the words quote (the predicted, searched or gap test's).
        found["p_value"] = unsettled_test(found)[0].get("p_value")
    return found


def _temporal_of(stall_mask: np.ndarray, epoch: np.ndarray, steady_wait_ns: np.ndarray,
                 steady_steps: Optional[int], every_fetch: bool,
                 predicted: Optional[dict], anchors: np.ndarray,
                 positions: Optional[Positions], gaps: np.ndarray) -> Optional[dict]:
    """:func:`temporal_of` before the bursts' gap histogram is added."""
    n = len(steady_wait_ns) if steady_steps is None else int(steady_steps)
    k = int(np.count_nonzero(stall_mask))
    if k == 0:
        return None
    extra = {"predicted": predicted, "tested": "searched", "consistent_period": None,
             "settle_steps": None, "searched": None}
    if every_fetch or k >= n:
        return {**_label_only(EVERY_FETCH, gaps), "counted": "stalls", **extra}

    def by_position(found: dict, test: dict) -> dict:
        # PERIODIC at the residue test ``test``'s period, by position.
        lag = test["period"]
        ac = _core.autocorr(steady_wait_ns, lag) if lag < len(steady_wait_ns) else float("nan")
        return {**found, **extra, "label": PERIODIC, "period": lag,
                "p_value": test["p_value"], "autocorrelation": None if math.isnan(ac) else ac,
                "counted": "position", "searched": test}

    if predicted is not None and predicted["periodic"]:
        lag = predicted["period"]
        found, counted = temporal(gaps, steady_wait_ns, stalls=k, steps=n), "stalls"
        finer = finer_cadence(positions, lag)
        if finer is not None:
            return by_position(found, finer)
        onsets = anchors
        if found["modal_gap"] != lag and onsets.sum() < k:
            # Rounds whose workers finish in pairs stall twice back to back:
            # the bursts keep the period the residue test found.
            per_burst = temporal(_core.stall_gaps(onsets, epoch), steady_wait_ns,
                                 stalls=k, steps=n, bursts=True)
            if per_burst["modal_gap"] == lag:
                found, counted = per_burst, "bursts"
        ac = _core.autocorr(steady_wait_ns, lag) if lag < len(steady_wait_ns) else float("nan")
        return {**found, "label": PERIODIC, "period": lag, "p_value": predicted["p_value"],
                "autocorrelation": None if math.isnan(ac) else ac, "counted": counted,
                **extra, "tested": "predicted"}
    per_stall = temporal(gaps, steady_wait_ns, stalls=k, steps=n)
    if per_stall["label"] == PERIODIC and not (_holds_one_phase(positions, per_stall["period"])
                                               and _fills_its_residue(positions,
                                                                      per_stall["period"])):
        # Gaps alternating 3, 7, 3, 7 (stalls at 0 and 3 of every 10)
        # make 3 the commonest gap, yet the stalls keep no one phase of 3:
        # not a stall every 3 fetches.  Gaps alternating 2, 10 (stalls at
        # 5 and 7 of every 12: a burst of slow samples on 2 workers) keep
        # one phase of 2, yet stall a third of its fetches: not a stall
        # every 2 fetches either (helper 29A: "PERIODIC every 2 ... the
        # cadence follows num_workers" in 11 of 11 runs, its p falling as
        # the run grew).  The search below tries the pair's sum.
        per_stall = {**per_stall, "label": IRREGULAR, "period": None}
    if per_stall["label"] == PERIODIC:
        # A pattern of several stalls a cycle at a multiple of it?
        finer = finer_cadence(positions, per_stall["period"])
        if finer is not None:
            return by_position(per_stall, finer)
        return {**per_stall, "counted": "stalls", **extra}
    onsets = anchors
    bursts = int(onsets.sum())
    per_burst = None
    if per_stall["label"] != TOO_FEW and bursts < k:
        per_burst = temporal(_core.stall_gaps(onsets, epoch), steady_wait_ns,
                             stalls=k, steps=n, bursts=True)
        if per_burst["label"] == PERIODIC:
            return {**per_burst, "counted": "bursts", **extra}
    out = {**per_stall, "counted": "stalls", **extra}
    searched = None
    if positions is not None and per_stall["label"] != TOO_FEW:
        searched = searched_cadence(*positions, _candidates(gaps, onsets, epoch))
        if searched is not None and searched["periodic"] and not searched.get("residues"):
            searched = finer_cadence(positions, searched["period"]) or searched
        if searched is not None and searched["periodic"]:
            lag = searched["period"]
            ac = _core.autocorr(steady_wait_ns, lag) if lag < len(steady_wait_ns) else float("nan")
            return {**out, "label": PERIODIC, "period": lag, "p_value": searched["p_value"],
                    "autocorrelation": None if math.isnan(ac) else ac, "counted": "position",
                    "searched": searched}
    if predicted is not None and predicted["consistent"]:
        return {**out, "label": UNSETTLED, "consistent_period": predicted["period"],
                "settle_steps": predicted_settle_steps(predicted)}
    if per_stall["label"] == TOO_FEW:
        return out
    if searched is not None:
        return {**out, "label": UNSETTLED, "counted": "position", "searched": searched,
                "consistent_period": searched["period"],
                "settle_steps": predicted_settle_steps(searched)}
    if per_burst is not None and per_stall["modal_gap"] == 1:
        # Back-to-back stalls are the commonest gap: the stalls come in
        # bursts, and the question of a period is the bursts' (a gap of 1
        # is never a period, so it is no evidence against one).
        out, k_gap = {**per_burst, "counted": "bursts", **extra}, bursts
        if per_burst["label"] == TOO_FEW:
            return out
    else:
        k_gap = 0
    fits = (out["modal_share"] >= PERIOD_MIN_SHARE and out["modal_gap"] > 1
            and out["modal_count"] >= PERIOD_MIN_REPEATS and out["modal_leads"])
    if fits and (k_gap or _fills_its_residue(positions, out["modal_gap"])):
        return {**out, "label": UNSETTLED, "consistent_period": out["modal_gap"],
                "settle_steps": gap_settle_steps(out["modal_share"], k, n, bursts=k_gap)}
    if out["label"] == IRREGULAR and not _gaps_could_show_a_period(out["gaps"], k, n, k_gap > 0):
        # No evidence against a period: as many gaps, every one alike,
        # would not have shown one either.
        return {**out, "label": TOO_FEW}
    if fits:
        # One gap holds PERIOD_MIN_SHARE of them: a period with stalls
        # missed at its phase (every gap a multiple of it), or a round
        # that slipped once (lock-step at 4 workers over 3 epochs of
        # persistent workers: gaps 4, 4, 4, 3 read "IRREGULAR (commonest
        # gap 4 holds 75% of gaps) ... no regular period", helper 28A),
        # is no evidence against it: IRREGULAR needs some.  The stalls do
        # not fill that phase over the run (one stretch, or a phase
        # stalled only now and then), so more steps of the same would not
        # settle a cadence over the run: no count.
        return {**out, "label": UNSETTLED, "consistent_period": out["modal_gap"],
                "settle_steps": None, "phase_filled": False}
    return out


def _holds_one_phase(positions: Optional[Positions], period: int) -> bool:
    """Whether at least PERIOD_MIN_SHARE of the stalls sit on one residue
    mod ``period`` (the residue test's on_residue over its stalls): what
    "a stall every ``period`` fetches" means of their positions.  True
    where the positions are not known."""
    if positions is None:
        return True
    t = _residue_of(positions, period)
    return bool(t["stalls"] and t["on_residue"] >= PERIOD_MIN_SHARE * t["stalls"])


def _residue_of(positions: Positions, period: int) -> dict:
    """The residue test (unsearched, without waits) at the residue mod
    ``period`` holding the most stalls, over the first SEARCH_MAX_FETCHES
    of ``positions``."""
    m = min(len(positions.stalled), SEARCH_MAX_FETCHES)
    return _residue_test(np.asarray(positions.stalled, dtype=bool)[:m],
                         np.asarray(positions.position)[:m], int(period),
                         np.asarray(positions.tested, dtype=bool)[:m], None, phase=None, tests=1)


def _fills_its_residue(positions: Optional[Positions], period: int) -> bool:
    """Whether the stalls, at the residue mod ``period`` holding most of
    them, stall most of that residue's fetches over the run (the residue
    test's ``every``): what "a stall every ``period`` fetches" predicts.
    Stalls a gap of 3 apart in one stretch of slow batches (lock-step
    inside a slow episode) fill 3 of the residue's 15 fetches in 45: one
    stretch, not a cadence more steps would settle.  True where the
    positions are not known."""
    if positions is None:
        return True
    return bool(_residue_of(positions, period)["every"])


def _gaps_could_show_a_period(m: int, stalls: int, steps: int, bursts: bool) -> bool:
    """Whether ``m`` gaps, every one the same, among ``stalls`` stalls in
    ``steps`` steps would reach PERIOD_ALPHA under the gap test
    (:func:`period_p_value`): only then is a mix of gaps evidence against a
    period (IRREGULAR), not too few gaps to tell (TOO-FEW)."""
    return _modal_count_p(m, m, stalls, steps, bursts) < PERIOD_ALPHA


def _candidates(gaps: np.ndarray, anchors: np.ndarray, epoch: np.ndarray) -> list[int]:
    """The periods the residue search computes: the SEARCH_CANDIDATES
    commonest gaps of at least 2 between stalls and between bursts' anchors
    (counts added), commonest first."""
    values, counts = _core.gap_histogram(np.r_[gaps, _core.stall_gaps(anchors, epoch)]
                                         .astype(np.int64))
    keep = values >= 2
    order = np.argsort(-counts[keep], kind="stable")[:SEARCH_CANDIDATES]
    out = [int(v) for v in values[keep][order]]
    if len(gaps) >= 2:
        # Two gaps that alternate (3, 7, 3, 7) repeat every their sum.
        pairs = (gaps[:-1] + gaps[1:]).astype(np.int64)
        out.append(int(_core.modal_gap(pairs)))
    return out


def _label_only(label: str, gaps: np.ndarray) -> dict:
    """A temporal answer with no period tested (EVERY-FETCH, TOO-FEW)."""
    modal = _core.modal_gap(gaps) if len(gaps) else None
    return {"label": label, "period": None, "p_value": None,
            "modal_gap": None if modal is None else int(modal), "modal_share": None,
            "multiple_fraction": None, "autocorrelation": None, "gaps": int(len(gaps)),
            "modal_count": None, "modal_leads": None}


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
        "modal_count": modal_count,
        "modal_leads": modal_count > runner_up,
    }


# Each DataLoader worker's first batch of an epoch carries that worker's
# start-up (process start, dataset copy, worker_init_fn): the first
# max(1, num_workers) fetches of an epoch are start-up, not steady state.
# For other iterables only the first fetch (which holds iter()) is.


def epoch_start_mask(position: np.ndarray, workers_per_step: np.ndarray) -> np.ndarray:
    """True where a step's position in its epoch (0-based; recorded by the
    wrap iterator, so a reset() mid-epoch does not shift it) is below
    ``workers_per_step`` (shapes (steps,)); see the rule above."""
    return np.asarray(position) < np.asarray(workers_per_step)


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


def settle_words(more: Optional[int]) -> str:
    """"about 12 more steps would settle it", or how far past this run."""
    if more is None:
        return f"more than {SETTLE_MAX_GROWTH}x this run's steps would be needed to settle it"
    return f"about {plural(more, 'more step')} would settle it"


def unsettled_test(tmp: dict) -> tuple[dict, str]:
    """The test that found an UNSETTLED answer's period consistent, and
    which: ("predicted", the loader's own period's residue test, only
    where it found it consistent: the gaps can fit num_workers' period
    while its residue does not), ("searched", the residue search's), or
    ("gaps", {"p_value": the gap test's}).  The shape line and the next
    step quote the same one."""
    period = tmp["consistent_period"]
    pred = tmp.get("predicted") or {}
    searched = tmp.get("searched") if tmp.get("counted") == "position" else None
    if pred.get("period") == period and pred.get("consistent"):
        return pred, "predicted"
    if searched:
        return searched, "searched"
    return {"p_value": tmp.get("p_value")}, "gaps"


def unsettled_part(tmp: dict) -> str:
    """UNSETTLED for the shape line: the period the stalls fit, the
    p-value that does not yet reach PERIOD_ALPHA, and the steps to settle."""
    period = tmp["consistent_period"]
    test, kind = unsettled_test(tmp)
    what = {"predicted": " (the period num_workers predicts)",
            "searched": f" ({position_part(test)})" if kind == "searched" else "",
            "gaps": ""}[kind]
    p = test.get("p_value")
    which = "a burst of stalls" if tmp.get("counted") == "bursts" else "a stall"
    if tmp.get("phase_filled") is False:
        gaps = (f"every gap between stalls is a multiple of {period}"
                if tmp.get("multiple_fraction") == 1.0 else
                f"{pct(tmp['modal_share'])} of the gaps between stalls are {period}")
        return (f"{UNSETTLED}: {gaps}, so "
                f"consistent with {which} every {period} fetches with some missed, but most "
                "fetches at that phase over the run did not stall: no cadence over the run "
                "yet, and none against one")
    return (f"{UNSETTLED}: consistent with {which} every {period} fetches{what}, "
            f"{not_yet_part(p, test.get('stalls'))}; " + settle_words(tmp.get("settle_steps")))


def not_yet_part(p: float, stalls: Optional[int] = None) -> str:
    """Why a period that fits is not yet claimed: its p-value not under
    PERIOD_ALPHA, or (under it) fewer stalls than PREDICTED_MIN_STALLS, the
    least a period is claimed on."""
    if p >= PERIOD_ALPHA:
        return f"not yet told from random stalls (p = {p:.2g}, not under {PERIOD_ALPHA:g})"
    if stalls is not None and stalls < PREDICTED_MIN_STALLS:
        return (f"p = {p:.2g} against random stalls, from {plural(stalls, 'stall')}: fewer "
                f"than the {PREDICTED_MIN_STALLS} a period is claimed on")
    return (f"p = {p:.2g} against random stalls, from too few stalls on those fetches to "
            "claim a period")


def places_words(test: dict) -> str:
    """Where a residue test's stalls sit in each epoch: "1, 4, 7, ..." for
    one residue, "0 and 3 of every 7" for several."""
    period, residues = test["period"], test.get("residues")
    if residues and len(residues) > 1:
        return (", ".join(str(r) for r in residues[:-1]) + f" and {residues[-1]} of every "
                f"{period}")
    return ", ".join(str(test["phase"] + i * period) for i in range(3)) + ", ..."


def position_part(test: dict) -> str:
    """Where a searched period's stalls sit: "7 of the 8 fetches at 1, 4,
    7, ... of each epoch stalled, 7 of 9 stalls; searched over periods
    2-7", with several stalls a period "12 of the 12 fetches at 0 and 3
    of every 7 of each epoch ..." and the test that a smaller period's
    misses are not spread alike."""
    top = test["fetches"] // PREDICTED_MIN_STALLS
    several = len(test.get("residues") or ()) > 1
    text = (f"{test['on_residue']} of the {test['slots']} fetches at {places_words(test)} of "
            f"each epoch stalled, {test['on_residue']} of {plural(test['stalls'], 'stall')}; "
            f"searched over periods 2-{top}"
            + (f" with 2 to {SLOTS_MAX} stalls each" if several else ""))
    if several and test.get("spread_p_value") is not None:
        d = test["spread_period"]
        text += (f"; not a stall every {d} fetches with some missed: the other fetches at "
                 f"{test['phase'] % d} mod {d} stalled less than such misses allow "
                 f"(p = {test['spread_p_value']:.2g})")
    return text


# How many distinct gaps the histogram line lists before "…".
GAPS_SHOWN = 12


def shape_line(s: dict) -> Optional[str]:
    """Shape, temporal structure and concentration of the stalls; None
    without a shape."""
    if not s.get("shape"):
        return None
    parts = [f"shape {s['shape']}"]
    steady = s.get("steady_steps")
    if steady is not None and steady < input_bound.MIN_STEADY_STEPS:
        # The too-few-steps next step says the shape cannot be judged:
        # the label is what these steps show, not yet a claim.
        parts[0] += (f" (over {plural(steady, 'steady-state step')}: not yet, it takes "
                     f"{input_bound.MIN_STEADY_STEPS})")
    trend = wait_trend.trend_part(s.get("trend"))
    if trend:
        parts.append(trend)
    tmp = s.get("temporal")
    if tmp is None:
        outliers = (s.get("stalls") or {}).get("outliers")
        parts.append(f"no stalls ({plural(outliers, 'outlier')})" if outliers else "no stalls")
    elif tmp["label"] == TOO_FEW:
        parts.append(f"{TOO_FEW} {'bursts of stalls' if tmp.get('counted') == 'bursts' else 'stalls'}"
                     " for a temporal pattern")
    elif tmp["label"] == EVERY_FETCH or tmp.get("period") == 1:
        # (A run saved before EVERY-FETCH existed may hold "PERIODIC" with
        # a period of 1: never said as a period.)
        count, steady = (s.get("stalls") or {}).get("count"), s.get("steady_steps")
        if count is not None and steady and count < steady:
            # The all-slow rule: every fetch slow, a few under its line.
            parts.append(f"{EVERY_FETCH}: the fetches are slow throughout ({count} of "
                         f"{steady} steady-state fetches past the line)")
        else:
            parts.append(f"{EVERY_FETCH}: every steady-state fetch waits")
    elif tmp["label"] == UNSETTLED:
        parts.append(unsettled_part(tmp))
    elif tmp["label"] == PERIODIC:
        several = (tmp.get("searched") or {}).get("residues") or ()
        text = f"{PERIODIC} every {tmp['period']} steps"
        if len(several) > 1 and tmp.get("counted") == "position":
            text += f", {len(several)} stalls in each"
        if tmp.get("counted") == "bursts":
            text += " (counting back-to-back stalls as one burst)"
        evidence = []
        if tmp.get("counted") == "position" and tmp.get("searched"):
            evidence.append(position_part(tmp["searched"]))
        # The exact test in plain words; the autocorrelation only where no
        # test of where the stalls fall is printed (helper 38D: "wait
        # autocorrelation 0.87 at lag 2" was jargon in the line read first).
        if tmp.get("p_value") is not None and tmp.get("tested") == "predicted":
            ranks = (tmp.get("predicted") or {}).get("rank_p_value") is not None
            evidence.append(("the stalls, or the longest waits," if ranks else "the stalls")
                            + f" fall on fetches 0, {tmp['period']}, {2 * tmp['period']}, ... "
                            "of each epoch; as many at random would line up so with chance "
                            f"p = {tmp['p_value']:.2g}, < {PERIOD_ALPHA:g}")
        elif tmp.get("p_value") is not None and tmp.get("counted") == "position":
            evidence.append(f"p = {tmp['p_value']:.2g} that random stalls"
                            + (f" line up so on {len(several)} positions of any period"
                               if len(several) > 1 else
                               ", or waits ranked as high, line up so on one position of any "
                               "period") + f", < {PERIOD_ALPHA:g}")
        elif tmp.get("p_value") is not None:
            evidence.append(f"p = {tmp['p_value']:.2g} against random stalls at this rate, "
                            f"< {PERIOD_ALPHA:g}")
        if tmp["autocorrelation"] is not None and not evidence:
            evidence.append(f"wait autocorrelation {tmp['autocorrelation']:.2f} "
                            f"at lag {tmp['period']}")
        if evidence:
            text += f" ({'; '.join(evidence)})"
        parts.append(text)
    else:
        between = " between bursts" if tmp.get("counted") == "bursts" else ""
        hist = (tmp.get("burst_gap_histogram") if tmp.get("counted") == "bursts"
                else (s.get("stalls") or {}).get("gap_histogram"))
        if tmp.get("modal_leads") is False and hist:
            # A tie for the commonest gap: no gap stands out to name.
            parts.append(f"{IRREGULAR} (no gap{between} commoner than another: "
                         f"{len(hist)} distinct gaps among {tmp['gaps']})")
        else:
            parts.append(
                f"{IRREGULAR} (commonest gap{between} {tmp['modal_gap']} holds "
                f"{pct(tmp['modal_share'])} of gaps)"
            )
    conc = s.get("concentration") or {}
    if conc.get("stall_wait_share") is not None and s["stalls"]["count"]:
        parts.append(
            f"{pct(conc['stall_step_share'])} of steps hold "
            f"{pct(conc['stall_wait_share'])} of the input wait"
        )
    return " · ".join(parts)


def stall_lines(s: dict) -> list[str]:
    """The stall count at its threshold and rule, the cadence, and the
    histogram of gaps between stalls."""
    st = s["stalls"]
    # With outliers past the line, "waited >" would count them too: the
    # count is of stalls ("0 of 12 ... waited > 6.16 ms" stood beside "One
    # outlier (33.1 ms)", helper 29D).
    waited = "were stalls past" if st.get("outliers") else "waited >"
    # Where some fetches passed the line only by waiting for a core, the
    # count is of the loader's waits: "5 of 18 ... waited > 53.8 ms" where
    # 8 did by the clock (helper 33A, 3 of 4 runs); the note gives them.
    less = (", less their waits for a core" if (st.get("host_waits") or {}).get("count")
            else "")
    lines = [
        f"{st['count']} of {s['steady_steps']} steady-state fetches {waited} "
        f"{fmt_s(st['threshold_s'])}{less} ({st['rule']})"
    ]
    if st.get("outliers"):
        cost = (pct(st["cost_share"]) + " of the step time"
                if st.get("cost_share") is not None else "")
        lines.append(
            f"{plural(st['outliers'], 'outlier')} above it, largest "
            f"{fmt_s(st['outlier_max_s'])}, not counted as stalls: "
            + (f"a lone wait (stalls come {stall_threshold.MIN_GROUP_ON_TOP} or more)"
               + (f", {cost}" if cost else "")
               if st["matter"] == stall_threshold.STALLS_LONE
               else f"together {cost or 'too little'}, under "
               f"{pct(stall_threshold.STALL_MIN_COST_SHARE)}"))
    cad = s["cadence"]
    tmp = s.get("temporal") or {}
    several = (tmp.get("searched") or {}).get("residues") or ()
    if cad["period"] is not None and cad["period"] > 1:
        # The period's own words: the bursts' gap where the stalls come in
        # bursts (the histogram of gaps between stalls then peaks at 1).
        # A period the residue test found at the loader's own period whose
        # commonest gap is another (stalls the threshold split in two)
        # is said by position, never as the modal gap.
        how = {"position": "a stall every {} steps (by position in the epoch)",
               "bursts": "a burst of stalls every {} steps (modal gap between bursts)"}
        counted = tmp.get("counted")
        if (counted == "stalls" and tmp.get("tested") == "predicted"
                and tmp.get("modal_gap") != cad["period"]):
            counted = "position"
        if counted == "position" and len(several) > 1:
            how["position"] = (f"{len(several)} stalls every {{}} steps, at "
                               f"{places_words(tmp['searched'])} (by position in the epoch)")
        text = "cadence: " + how.get(counted,
                                     "a stall every {} steps (modal gap)").format(cad["period"])
        by_position = counted == "position"
    elif tmp.get("label") == EVERY_FETCH or cad["period"] == 1:
        text = "cadence: every fetch waits, no period"
    elif tmp.get("label") == TOO_FEW:
        text = ("cadence: too few bursts of stalls to tell" if tmp.get("counted") == "bursts"
                else "cadence: too few stalls to tell")
    elif tmp.get("label") == UNSETTLED:
        which = "a burst of stalls" if tmp.get("counted") == "bursts" else "a stall"
        text = (f"cadence: not settled, consistent with {which} every "
                f"{tmp['consistent_period']} steps")
    elif st["gaps"]:
        text = "cadence: no period between stalls"
    else:
        text = None
    # An unsettled period the position test holds: its evidence is the
    # residue's, as a found one's ("consistent with a stall every 6 fetches"
    # beside "(0% of gaps are multiples of 6)": stalls at 6, 9 and 12,
    # helper 35A).
    unsettled = next((t for t in (tmp.get("predicted"), tmp.get("searched"))
                      if t and t.get("stalls") and t.get("period") == tmp.get("consistent_period")),
                     None) if tmp.get("label") == UNSETTLED else None
    if unsettled is not None:
        by_position = True
    elif cad["period"] is None or cad["period"] <= 1:
        by_position = False
    if text and cad["num_workers"] is not None:
        text += f"; num_workers={cad['num_workers']}"
        if cad["matches_num_workers"] and cad["period"] is not None and cad["period"] > 1:
            # One run has one num_workers: it can match it; only a sweep
            # can show that the cadence follows it.
            text += ": the period equals num_workers"
        test = unsettled or ((tmp.get("predicted") if tmp.get("tested") == "predicted"
                              else tmp.get("searched")) if by_position else None)
        if test and test.get("stalls"):
            # Found by position: the residue's share is the evidence; the
            # gaps (a stall split in two, neighbours spilled over) are not.
            own = test.get("residues") or ()
            at = (f"positions {' and '.join(str(r) for r in own)}" if len(own) > 1
                  else f"position {test['phase']}")
            text += (f" ({test['on_residue']} of the {test['stalls']} stalls at {at} "
                     f"mod {test['period']} of the epoch)")
        elif cad["multiple_fraction"] is not None and cad["num_workers"] > 1:
            # Every gap is a multiple of 1: said only when it can fail.
            k = cad["num_workers"]
            text += (
                f" ({pct(cad['multiple_fraction'])} of gaps are "
                f"multiples of {k})"
            )
    if text:
        lines.append(text)
    if st["gap_histogram"]:
        shown = st["gap_histogram"][:GAPS_SHOWN]
        hist = "  ".join(f"{g}×{c}" for g, c in shown)
        more = " …" if len(st["gap_histogram"]) > GAPS_SHOWN else ""
        lines.append(f"gaps between stalls (steps×count): {hist}{more}")
    if tmp.get("burst_gap_histogram"):
        shown = tmp["burst_gap_histogram"][:GAPS_SHOWN]
        more = " …" if len(tmp["burst_gap_histogram"]) > GAPS_SHOWN else ""
        lines.append("gaps between bursts of back-to-back stalls (steps×count): "
                     + "  ".join(f"{g}×{c}" for g, c in shown) + more)
    return lines
