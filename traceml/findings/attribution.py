"""Which worker, the workers' round, or the samples hold the stalls:
ONE-WORKER, LOCK-STEP, SLOW-SAMPLE (SLOW-COLLATE where the slow batches'
time is collate_fn's), LARGE-BATCH.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
from scipy import stats
from scipy.stats import mannwhitneyu

from .. import _core
from ..fmt import fmt_s, nth, pct, plural
from ._types import Finding, Words
from . import _numbers, slow_samples, stall_threshold, stall_timing, wait_parts


# From the delivery record (the worker that produced each stalled batch, its
# rank in the sampler order) and the per-worker CPU ticks of the sampler
# (utime + stime of /proc/PID/stat: every thread of the worker).
ONE_WORKER = "ONE-WORKER"
LOCK_STEP = "LOCK-STEP"
SLOW_SAMPLE = "SLOW-SAMPLE"
# SLOW-SAMPLE's residue, where the stalled batches spent most of their
# make time in collate_fn (with_collate_share): the batches are slow,
# not their samples.
SLOW_COLLATE = "SLOW-COLLATE"
SLOW_RESIDUE = (SLOW_SAMPLE, SLOW_COLLATE)
# The batches made slow hold more samples (a batch_sampler of uneven
# sizes), each sample costing about what the others' do.
LARGE_BATCH = "LARGE-BATCH"


# An attribution rests on at least as many stalls as a period does.
ATTR_MIN_STALLS = stall_timing.PERIOD_MIN_GAPS + 1


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

# A worker's sample quartile needs this many of its samples timed: with
# fewer, one sample moves it (the slow-sample test's own floor,
# slow_samples.SLOW_MIN_SAMPLES, is per run; this is per worker).
SAMPLE_RATIO_MIN = 8


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


def cpu_ratio(ticks: Optional[dict], worker: int,
              batches: Optional[dict] = None) -> Optional[float]:
    """Worker ``worker``'s CPU ticks over the other workers' median, per
    batch each made where ``batches`` ({worker id: batches delivered}) is
    given: a worker that makes more of the batches by construction (2 of
    each epoch's 3 with 2 workers) is not busier for it.  None without
    readings of it and at least one other, or when both sides stay under
    CPU_MIN_TICKS."""
    if not ticks or worker not in ticks or len(ticks) < 2:
        return None
    others = [v for w, v in ticks.items() if w != worker]
    if max(ticks[worker], float(np.median(others))) < CPU_MIN_TICKS:
        return None
    if batches:
        if not batches.get(worker) or any(not batches.get(w) for w in ticks):
            return None
        per = {w: v / batches[w] for w, v in ticks.items()}
        own, others = per[worker], [v for w, v in per.items() if w != worker]
    else:
        own = ticks[worker]
    median = float(np.median(others))
    return float("inf") if median <= 0 else own / median


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


# The stalls are what the loop felt; prefetch hides some slow samples (a
# worker started one early enough), so their ranks can keep a multiple of
# the data's period: every 5th sample slow at num_workers=4 and
# prefetch_factor=2 stalls on every other one (measured: stalls every 10
# ranks in 2 of 3 runs, "Diagnostic truth" user trial; in 24 of 40 runs of
# tests/integration/test_attribution.py's loader; the corpus's simulated loader gives
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
# tests/integration/test_attribution.py).  p = max(1, num_workers) is one worker's
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
                num_workers: Optional[int],
                sizes: Optional[np.ndarray] = None) -> Optional[dict]:
    """The rank period of the batches made slow in the workers, by the rule
    above; None when the make times form no slow group of their own, too
    few are slow, no residue holds them, or the period is the workers' own
    count.

    ``ranks`` (int, shape (batches,)): each steady-state batch's rank in
    the epoch's sampler order (-1 unknown); ``make_ns`` (int64, same
    shape): its make time in its worker, ns (worker_timing; -1 unknown);
    ``num_workers`` the loader's.  Returns {period, residue (the one
    holding the most), residues (every residue of the slow set,
    :func:`_made_residues`), slow (batches made slow), batches (with rank and make time known), split_ns (the
    make time above which a batch is slow), slow_on_residue (share of the
    slow-made on the residue), residue_slow (share of the residue's batches
    made slow), sizes ([the slow batches' median samples, the others'],
    from ``sizes``, each batch's timed samples, same shape, 0 or less
    unknown; None without them) and sample_cost_ratio (the slow batches'
    median make time per sample over the others'; None likewise)}."""
    r = np.asarray(ranks, dtype=np.int64)
    m = np.asarray(make_ns, dtype=np.int64)
    known = (r >= 0) & (m >= 0)
    size = None if sizes is None else np.asarray(sizes, dtype=np.int64)[known]
    r, m = r[known], m[known]
    if len(m) < 2 * RANK_PERIOD_MIN_STALLS:
        return None
    split = _core.log_otsu(m)["threshold_ns"]
    if not math.isfinite(split) or not stall_threshold._stands_out(m, split):
        return None
    slow = m > split
    count = int(slow.sum())
    if count < RANK_PERIOD_MIN_STALLS:
        return None
    slow_ranks = r[slow]
    for p in range(2, RANK_PERIOD_MAX + 1):
        on = np.bincount(slow_ranks % p, minlength=p)
        if np.sort(on)[-stall_timing.SLOTS_MAX:].sum() <= MADE_MIN_RESIDUE_SHARE * count:
            # No set _made_residues takes can hold most of the slow ranks:
            # the pass over every batch's rank is not needed.
            continue
        at = np.bincount(r % p, minlength=p)
        residues = _made_residues(on, at, count, p, len(r))
        if residues is None:
            continue
        if p == stall_timing.effective_workers(num_workers):
            return None
        held, of = int(on[residues].sum()), int(at[residues].sum())
        return {"period": p, "residue": int(residues[0]),
                "residues": [int(x) for x in residues], "slow": count,
                "batches": int(len(m)), "split_ns": float(split),
                "slow_on_residue": held / count, "residue_slow": held / of,
                **_sizes(m, slow, size)}
    return None


# Two or three slow places a period (every 10th index at batch size 4 makes
# batches 0 and 2 of every 5 slow): the made-slow model above with a set S
# of residues, each of them ATTR_SHARE made slow, together holding more
# than MADE_MIN_RESIDUE_SHARE of the slow-made ranks, and S not the same
# set shifted by a divisor of p.  One residue of two held 51% there, and
# the report named it alone (helper 34B, rank % 5 == 2 of {0, 2}).  A set
# is chosen from the data, so it pays for the search: the hypergeometric
# tail of the slow-made ranks on S's batches, times every (p, S) pair the
# several-stalls search of stall_timing counts (multi_search_tests), under
# its PERIOD_ALPHA.
def _made_residues(on: np.ndarray, at: np.ndarray, count: int, p: int,
                   batches: int) -> Optional[list[int]]:
    """The residues mod ``p`` that hold the slow-made batches, by the rules
    above (``on``: slow-made batches per residue, ``at``: batches per
    residue, ``count`` slow-made in all, ``batches`` known in all): one
    residue, or 2 to stall_timing.SLOTS_MAX, the most slow first; None
    where no such set holds them."""
    full = [int(x) for x in np.argsort(-on, kind="stable")
            if on[x] > 0 and on[x] >= ATTR_SHARE * at[x]]
    top = int(np.argmax(on))
    single = [top] if on[top] > MADE_MIN_RESIDUE_SHARE * count and top in full else None
    several = [x for x in full if on[x] >= stall_timing.PERIOD_MIN_REPEATS]
    if not 2 <= len(several) <= stall_timing.SLOTS_MAX or p > stall_timing.SLOTS_MAX_PERIOD:
        return single
    if on[several].sum() <= MADE_MIN_RESIDUE_SHARE * count:
        return single
    if stall_timing.shifted_by_a_divisor(several, p):
        return single
    tail = stall_timing._hypergeom_tail(int(on[several].sum()), batches,
                                        int(at[several].sum()), count)
    if stall_timing.multi_search_tests(batches) * tail >= stall_timing.PERIOD_ALPHA:
        return single
    return several


def _larger(made: dict) -> bool:
    """Whether the batches made slow are slow by their size (LARGE-BATCH):
    they hold at least BUSIER_RATIO times the others' samples (medians)
    and cost under BUSIER_RATIO times the others' make time per sample.
    The model: a batch's make time is its samples' times; a batch slow
    by its size costs what its samples do, one slow by its samples costs
    more a sample."""
    sizes, ratio = made.get("sizes"), made.get("sample_cost_ratio")
    return bool(sizes and ratio is not None and sizes[0] >= BUSIER_RATIO * sizes[1]
                and ratio < BUSIER_RATIO)


def _stalled_residue(ranks: np.ndarray, period: int) -> Optional[tuple[int, float]]:
    """(the residue of rank % ``period`` holding the most stalled ranks,
    its share of the known ones); None under ATTR_MIN_STALLS known."""
    known = ranks[ranks >= 0]
    if len(known) < ATTR_MIN_STALLS:
        return None
    res, rc = _numbers.value_counts(known % period)
    return int(res[np.argmax(rc)]), float(rc.max()) / len(known)


def _residue_made_slower(by_size: Optional[tuple], period: int, residue: int
                         ) -> Optional[bool]:
    """Whether the batches of rank % ``period`` == ``residue`` took at
    least BUSIER_RATIO times the others' own make time (medians), where
    the workers timed them (``by_size``'s ranks and make times, see
    :func:`attribution`); None unmeasured.  Stalls that gather on a residue
    whose batches cost what the others do are not slow samples: uniform
    samples beside a CPU hog, 6 workers pairing up on 2 cores, read
    "SLOW-SAMPLE, rank % 2 == 0 from the stalls" (1 of 65 runs)."""
    if by_size is None:
        return None
    ranks, make = (np.asarray(a, dtype=np.int64) for a in by_size[:2])
    ok = (ranks >= 0) & (make >= 0)
    on = ranks[ok] % period == residue
    made = make[ok]
    if on.sum() < ATTR_MIN_STALLS or (~on).sum() < ATTR_MIN_STALLS:
        return None
    return bool(np.median(made[on]) >= BUSIER_RATIO * np.median(made[~on]))


def _residue_by_size(by_size: Optional[tuple], period: int, residue: int) -> Optional[dict]:
    """Where the stalls' residue holds the batches slow by their size: its
    batches made at least BUSIER_RATIO times slower than the others
    (medians) and :func:`_larger` by their samples.  Then the ``made``
    block LARGE-BATCH reads ({slow: the residue's batches, batches,
    split_s None, slow_on_residue 1.0, residue_slow 1.0, sizes,
    sample_cost_ratio}); None otherwise or without ``by_size`` (see
    :func:`attribution`).  made_period needs RANK_PERIOD_MIN_STALLS slow
    batches; a short run's stalls can name the residue with fewer, and
    every 5th batch of 16 samples against 2 read SLOW-SAMPLE there."""
    if by_size is None or by_size[2] is None:
        return None
    ranks, make, size = (np.asarray(a, dtype=np.int64) for a in by_size)
    ok = (ranks >= 0) & (make >= 0) & (size > 0)
    ranks, make, size = ranks[ok], make[ok], size[ok]
    on = ranks % period == residue
    if not on.any() or on.all():
        return None
    if np.median(make[on]) < BUSIER_RATIO * np.median(make[~on]):
        return None
    sizes = _sizes(make, on, size)
    if not _larger(sizes):
        return None
    return {"slow": int(on.sum()), "batches": int(len(make)), "split_s": None,
            "slow_on_residue": 1.0, "residue_slow": 1.0, **sizes}


def _sizes(make_ns: np.ndarray, slow: np.ndarray, size: Optional[np.ndarray]) -> dict:
    """{sizes, sample_cost_ratio} of made_period (None, None where the
    slow or the other batches have no known size)."""
    if size is None:
        return {"sizes": None, "sample_cost_ratio": None}
    ok = size > 0
    a, b = slow & ok, ~slow & ok
    if not a.any() or not b.any():
        return {"sizes": None, "sample_cost_ratio": None}
    per = make_ns / np.maximum(size, 1)
    other_cost = float(np.median(per[b]))
    return {"sizes": [float(np.median(size[a])), float(np.median(size[b]))],
            "sample_cost_ratio": (float(np.median(per[a])) / other_cost
                                  if other_cost > 0 else None)}


def batch_cost(make_ns: np.ndarray) -> dict:
    """Whether batches of make times ``make_ns`` (shape (n,), ns; n >= 2)
    cost alike, as a lock-step round's do: {alike, slow (batches in the
    upper group), batches, ratio (the upper group's geometric mean over
    the lower's; None without a split)}.  Not alike when they form two
    groups: Otsu's split of log(make time) beyond what one Gaussian group
    of n reaches at alpha 0.01 (stall_threshold.eta_critical), and the
    upper group's geometric mean at least BUSIER_RATIO times the lower's.
    The ratio keeps out a round's own spread: lock-step batches of 202-215
    ms split with eta 0.82-0.87 at 16 batches (measured beside a CPU hog),
    1.02x apart.  Each group also holds at least ATTR_MIN_STALLS batches,
    as many as a pattern rests on: one or two batches apart are hiccups,
    not batches that cost more (lock-step batches sleeping 60 ms each
    split 29 against 1 where one batch's wait for a core, read from the
    worker's every thread, took most of its make time)."""
    m = np.asarray(make_ns, dtype=np.int64)
    out = {"alike": True, "slow": 0, "batches": int(len(m)), "ratio": None}
    split = _core.log_otsu(m)
    eta, threshold = split["eta"], split["threshold_ns"]
    if not (math.isfinite(eta) and math.isfinite(threshold)):
        return out
    above = m > threshold
    if not above.any() or above.all():
        return out
    gap = stall_threshold._mean_log(m[above]) - stall_threshold._mean_log(m[~above])
    out.update(slow=int(np.count_nonzero(above)), ratio=math.exp(gap))
    groups = min(int(np.count_nonzero(above)), int(np.count_nonzero(~above)))
    out["alike"] = bool(eta < stall_threshold.eta_critical(len(m))
                        or gap < math.log(BUSIER_RATIO) or groups < ATTR_MIN_STALLS)
    return out


def sample_ratio(samples_by_worker: Optional[dict], worker: int) -> Optional[float]:
    """Worker ``worker``'s 25th percentile sample time over the other
    workers' median of theirs (the report's ``production.samples.by_worker``);
    None without per-sample timing of it and another worker, each with at
    least SAMPLE_RATIO_MIN samples.

    The quartile, not the median: a slow worker (its shard, its resource,
    its core) makes its cheaper samples slower too, while slow samples that
    land on its turn (every num_workers-th batch holding one) leave its
    cheaper samples at the others' cost, whatever share of its samples they
    are short of three quarters."""
    got = {w: v for w, v in (samples_by_worker or {}).items()
           if (v.get("samples") or 0) >= SAMPLE_RATIO_MIN}
    return make_ratio(got, worker, "p25_s")


def make_ratio(per_worker: Optional[dict], worker: int,
               key: str = "make_median_s") -> Optional[float]:
    """Worker ``worker``'s median time to make a batch (measured in the
    worker: traceml.worker_timing) over the other workers' median of
    theirs (``key="make_mean_s"``: its mean over the median of their
    means; any other per-worker figure by its key); None without it and
    at least one other."""
    if (not per_worker or worker not in per_worker or len(per_worker) < 2
            or any(v.get(key) is None for v in per_worker.values())):
        return None
    others = [v[key] for w, v in per_worker.items() if w != worker]
    median = float(np.median(others))
    mine = per_worker[worker][key]
    return float("inf") if median <= 0 else mine / median


def also_slow(per_worker: Optional[dict], worker: int) -> dict[int, float]:
    """{worker id: make_ratio} of the workers other than ``worker`` (the
    one holding the stalls) that take at least BUSIER_RATIO times the other
    workers' median time to make a batch, measured in the workers; {}
    without that timing.  With the workers' batches dealt in turn, a slow
    worker whose turn comes while the loop already waits on another slow
    worker's batch makes its own in that wait: its slowness is real but
    hidden behind the first one's stalls (workers 1 and 3 of 5 each taking
    60 ms against 4 ms put all 15 stalls on worker 1).  Fixing the worker
    that holds the stalls then leaves these to stall."""
    if not per_worker:
        return {}
    out = {}
    for w in sorted(per_worker):
        if w == worker:
            continue
        ratio = make_ratio(per_worker, w)
        if ratio is not None and ratio >= BUSIER_RATIO:
            out[int(w)] = float(ratio)
    return out


def _also_slow_words(p: dict) -> str:
    """The sentence on the workers as slow as the one holding the stalls
    (``p["also_slow"]``: {worker: make_ratio}, keys may be str after a
    run file); "" without any."""
    also = {int(w): float(r) for w, r in (p.get("also_slow") or {}).items()}
    if not also:
        return ""
    ids = sorted(also)
    ratios = ", ".join(f"{also[w]:.1f}x" for w in ids)
    one = len(ids) == 1
    them = workers_named(ids)
    return (f" {them[0].upper() + them[1:]} also {'takes' if one else 'take'} {ratios} the "
            f"other workers' median time to make a batch; {'its' if one else 'their'} "
            f"batches were made while the loop waited on worker {p['worker']}'s, which hid "
            f"them: fixing worker {p['worker']} alone leaves {them}'s batches to stall.")


# Where a SLOW-SAMPLE period comes from (the attribution's ``period_from``).
PERIOD_FROM_MAKE_TIMES = "make_times"   # the workers' make times (made_period)
PERIOD_FROM_STALLS = "stalls"           # the stalled ranks or their gaps
PERIOD_FROM_SIZES = "sizes"             # no period: the stalled batches' sizes

# LARGE-BATCH without a period: the stalled batches hold more samples than
# the others beyond chance, a one-sided Mann-Whitney test of their sizes at
# this level (the cadence tests' stall_timing.PERIOD_ALPHA).  Batches of 32
# samples among batches of 8 at random places read "the cost is every
# batch's" in 5 of 5 runs (helper 34B): the residue rules need a period.
SIZE_ALPHA = 0.01


def _stalls_by_size(by_size: Optional[tuple], stall_ranks: np.ndarray) -> Optional[dict]:
    """Where the stalled batches are slow by their size, wherever they sit:
    at least ATTR_MIN_STALLS of them with known sizes, made at least
    BUSIER_RATIO times slower than the others (medians), :func:`_larger`
    by their samples, and larger beyond chance (SIZE_ALPHA).  Returns the
    ``made`` block LARGE-BATCH reads ({slow: the stalled batches, batches,
    split_s None, slow_on_residue and residue_slow 1.0, sizes,
    sample_cost_ratio, size_p_value}); None otherwise or without sizes.
    The model: a batch's make time is its samples' times."""
    if by_size is None or by_size[2] is None:
        return None
    ranks, make, size = (np.asarray(a, dtype=np.int64) for a in by_size)
    ok = (ranks >= 0) & (make >= 0) & (size > 0)
    ranks, make, size = ranks[ok], make[ok], size[ok]
    stalled = np.asarray(stall_ranks, dtype=np.int64)
    on = np.isin(ranks, stalled[stalled >= 0])
    if on.sum() < ATTR_MIN_STALLS or on.all():
        return None
    if np.median(make[on]) < BUSIER_RATIO * np.median(make[~on]):
        return None
    sizes = _sizes(make, on, size)
    if not _larger(sizes):
        return None
    p = float(mannwhitneyu(size[on], size[~on], alternative="greater").pvalue)
    if not p < SIZE_ALPHA:
        return None
    return {"slow": int(on.sum()), "batches": int(len(make)), "split_s": None,
            "slow_on_residue": 1.0, "residue_slow": 1.0, **sizes, "size_p_value": p}


def attribution(stall_ranks: np.ndarray, stall_workers: np.ndarray,
                batch_workers: np.ndarray, num_workers: Optional[int],
                period: Optional[int], ticks: Optional[dict],
                per_worker: Optional[dict] = None,
                made: Optional[dict] = None,
                making: Optional[bool] = None,
                making_ranks: Optional[np.ndarray] = None,
                made_alike: Optional[bool] = None,
                samples_by_worker: Optional[dict] = None,
                slow_samples: Optional[dict] = None,
                by_size: Optional[tuple] = None) -> Optional[dict]:
    """Which worker held the stalls, the workers' round, the samples or
    the batches' sizes: :func:`_by_rules` (the arguments and the dict are
    its), and where it names no LARGE-BATCH or ONE-WORKER, LARGE-BATCH
    with ``period_from`` PERIOD_FROM_SIZES (period and residue None)
    where the stalled batches are slow by their size wherever they sit
    (:func:`_stalls_by_size`: a batch_sampler's large batches at random
    places keep no period)."""
    got = _by_rules(stall_ranks, stall_workers, batch_workers, num_workers, period, ticks,
                    per_worker, made, making, making_ranks, made_alike, samples_by_worker,
                    slow_samples, by_size)
    if got is not None and got["label"] in (LARGE_BATCH, ONE_WORKER):
        return got
    # A small batch queued behind a large one on the same worker waits for
    # the large one: the batch in the making is the one waited on.
    sized = _stalls_by_size(by_size, _waited_on(stall_ranks, making_ranks))
    if sized is None:
        return got
    base = got if got is not None else _base(stall_workers, period)
    return {**base, "label": LARGE_BATCH, "worker": None, "period": None, "residue": None,
            "residue_share": None, "period_from": PERIOD_FROM_SIZES, "made": sized,
            "ambiguous": False}


# "Most" of a worker's batches slow, read at the source where the workers
# timed their batches: prefetch hides some of a slow worker's batches from
# the loop, not from their make times.  A 3x slower IterableDataset shard
# on 2 workers stalled 29 of its worker's 59 batches (49%), and read
# PERIODIC 4 with no attribution in 2 of 7 runs (helper 34B), while its
# make times put every one of them in the slow group.  The groups are
# batch_cost's (two groups by Otsu's split beyond one group's eta); the
# worker's share of its batches above the split must pass
# ONE_WORKER_OWN_SHARE, the others' stay within ONE_WORKER_OTHERS_SHARE.
def _made_slow_mostly(by_size: Optional[tuple], batch_workers: np.ndarray,
                      worker: int) -> bool:
    """Whether the workers' own make times (``by_size``'s second array,
    aligned with ``batch_workers``, the steady batches' workers) put most
    of ``worker``'s batches and few of the others' in a slow group, by the
    rule above; False where not measured or the batches cost alike."""
    if by_size is None or len(by_size[1]) != len(batch_workers):
        return False
    make = np.asarray(by_size[1], dtype=np.int64)
    who = np.asarray(batch_workers, dtype=np.int64)
    ok = (make >= 0) & (who >= 0)
    make, who = make[ok], who[ok]
    if len(make) < 2 or batch_cost(make)["alike"]:
        return False
    slow = make > _core.log_otsu(make)["threshold_ns"]
    mine = who == worker
    if not mine.any() or mine.all():
        return False
    return bool(slow[mine].mean() > ONE_WORKER_OWN_SHARE
                and slow[~mine].mean() <= ONE_WORKER_OTHERS_SHARE)


def _waited_on(stall_ranks: np.ndarray, making_ranks: Optional[np.ndarray]) -> np.ndarray:
    """The rank of the batch each stall waited on (int64, shape of
    ``stall_ranks``): the one its worker was making during the wait where
    measured (``making_ranks`` >= 0), else the received one."""
    ranks = np.asarray(stall_ranks, dtype=np.int64)
    if making_ranks is None:
        return ranks
    return np.where(np.asarray(making_ranks) >= 0, making_ranks, ranks)


def _base(stall_workers: np.ndarray, period: Optional[int]) -> dict:
    """The keys every attribution carries, before any rule: the stalls'
    workers (-1 unknown) counted, the rest None."""
    wk = np.asarray(stall_workers, dtype=np.int64)
    known = wk >= 0
    ids, counts = _numbers.value_counts(wk[known])
    return {"label": None, "worker": None, "top_worker": None,
            "stall_workers": {int(i): int(c) for i, c in zip(ids, counts)},
            "known": int(known.sum()), "share": None, "own_share": None,
            "others_share": None, "cpu_ratio": None, "make_ratio": None,
            "sample_ratio": None, "period": period,
            "residue": None, "residue_share": None, "ambiguous": False,
            "period_from": None, "stall_period": period, "made": None}


def _by_rules(stall_ranks: np.ndarray, stall_workers: np.ndarray,
              batch_workers: np.ndarray, num_workers: Optional[int],
              period: Optional[int], ticks: Optional[dict],
              per_worker: Optional[dict] = None,
              made: Optional[dict] = None,
              making: Optional[bool] = None,
              making_ranks: Optional[np.ndarray] = None,
              made_alike: Optional[bool] = None,
              samples_by_worker: Optional[dict] = None,
              slow_samples: Optional[dict] = None,
              by_size: Optional[tuple] = None) -> Optional[dict]:
    """Which worker held the stalls, the workers' round, or the samples.

    ``stall_ranks``/``stall_workers``: rank and worker (-1 unknown) of each
    steady-state stall; ``batch_workers``: the worker of every steady-state
    batch; ``period``: the report's period (None unless PERIODIC);
    ``ticks``: CPU ticks per worker id over the run (None: no readings);
    ``per_worker``: the workers' own batch timing (the report's
    ``production.workers``; None: not measured); ``made``: the period of
    the batches made slow in the workers (:func:`made_period`; None: no
    such period, or no worker timing); ``making_ranks``: per stall, the
    rank of the batch its worker was making during the wait (the received
    one, or the next one when the received batch was made before the wait:
    worker_timing.in_the_making; -1 unknown; None: not measured);
    ``made_alike``: whether the steady batches cost alike
    (:func:`batch_cost`'s ``alike``; None: not measured);
    ``samples_by_worker``: each worker's per-sample times (the report's
    ``production.samples.by_worker``; None: not measured);
    ``slow_samples``: the per-sample test's slow samples of a map-style
    dataset (the report's ``production.samples.slow``; None: not
    measured, or an IterableDataset, whose positions are the workers');
    ``by_size``: (ranks, make_ns, sizes) of the steady batches (int arrays
    of one shape: rank in the epoch, own make time, timed samples; -1 or
    less unknown; sizes None where the samples were not counted), or None
    without the workers' batch timing.

    SLOW-SAMPLE from the make times comes first: with ``made`` and more
    than MADE_STALL_SHARE of the known stalls waiting on a batch of its
    residue (the batch in the making where measured, else the received
    one), the
    period is the data's (``period_from`` PERIOD_FROM_MAKE_TIMES), whatever
    the stalls' own cadence (``stall_period``: the report's period, or
    without one :func:`rank_period` of the stalled ranks; prefetch can hide
    every other slow sample and double it).  A made period other than the
    workers' count is never one slow worker's batches (see made_period), so
    it is read before ONE-WORKER.  LARGE-BATCH in its place where the
    batches made slow are slow by their size (:func:`_larger`: the
    per-sample timing counted their samples).  Otherwise, from the stalls
    alone:

    ONE-WORKER k: at least ATTR_SHARE of the known stalls are worker k's,
    more than ONE_WORKER_OWN_SHARE of k's batches stall (or are made slow,
    where the workers timed them: :func:`_made_slow_mostly`) and at most
    ONE_WORKER_OTHERS_SHARE of the others' do, and either k takes
    BUSIER_RATIO times the others' median time to make a batch (make_ratio,
    measured in the workers: this holds whether k burns CPU or sleeps), or
    k is busier (cpu_ratio >= BUSIER_RATIO) or less busy (<= 1/BUSIER_RATIO:
    it waits on something) and not the round opener.  SLOW-SAMPLE: a period
    p != max(1, num_workers) (the report's, or without one
    :func:`rank_period`'s) with ATTR_SHARE of the stalled ranks on one
    residue of rank % p, over at least two workers (when workers are known),
    unless the workers timed the batches and they cost alike (``made_alike``)
    or that residue's batches took under BUSIER_RATIO times the others'
    make time (:func:`_residue_made_slower`); LARGE-BATCH in its place
    where the residue's batches are slow by their size
    (:func:`_residue_by_size`), at that period or at num_workers' own
    (every num_workers-th batch larger lands on one worker).
    LOCK-STEP: period == num_workers >= 2, not ONE-WORKER, the batches
    delivered in rounds of one from each worker (:func:`in_rounds`), and
    the workers
    making the batches during the stalls where that was measured
    (``making``: busy by the sampler or by their own batch timing; None:
    not measured): the round's cost is per-batch work inside the workers,
    which idle workers do not do; and, where the workers timed their
    batches, the batches costing alike (``made_alike``, :func:`batch_cost`:
    slow samples at random indices make some batches cost more, and the
    loop stalls behind them on each worker's turn) and the worker holding
    the most stalls taking under BUSIER_RATIO times the others' mean time
    a batch (a round costs its workers alike)
    (``ambiguous`` when the stalls sit on one
    worker but neither CPU readings nor batch timing tell it from the
    others).  None when too few stalls or no rule holds:
    {label, worker (ONE-WORKER's k, else None), top_worker (the worker
    holding most known stalls), stall_workers ({worker id: stalls}), known
    (stalls whose worker is known), share (top_worker's share of them),
    own_share, others_share, cpu_ratio, make_ratio, period, residue,
    residue_share (the share of the known stalled ranks on the residue),
    ambiguous, period_from (SLOW-SAMPLE: PERIOD_FROM_MAKE_TIMES or
    PERIOD_FROM_STALLS; else None), stall_period (the stalls' period, as
    above; None when they keep none), made (from the make times: {slow,
    batches, split_s, slow_on_residue, residue_slow}; else None),
    pinned_indices (ONE-WORKER only, where ``slow_samples`` found every
    slow sample in worker k's batches and none of those indices made by
    another worker: the slow indices, as many as shown; a worker's cost
    and the cost of the indices it is sent are then one reading, which
    a run with the indices on other workers tells apart)}."""
    ranks = np.asarray(stall_ranks, dtype=np.int64)
    batches = np.asarray(batch_workers, dtype=np.int64)
    out = _base(stall_workers, period)
    by_worker = out["stall_workers"]
    if len(ranks) < ATTR_MIN_STALLS:
        return None
    nw = num_workers or 0
    k = stall_timing.effective_workers(num_workers)
    one_worker = False
    if nw >= 2 and out["known"] >= ATTR_MIN_STALLS:
        # The worker holding the most stalls, ties to the lowest id (the
        # counts are by ascending id).
        top = max(by_worker, key=by_worker.get)
        share = by_worker[top] / out["known"]
        # Every steady batch's worker counted in one pass (-1 unknown, at 0).
        shifted = batches + 1
        counts = np.bincount(np.maximum(shifted, 0, out=shifted), minlength=top + 2)
        del shifted
        own = int(counts[top + 1])
        others = int(counts[1:].sum()) - own
        own_share = by_worker[top] / own if own else 0.0
        others_share = (out["known"] - by_worker[top]) / others if others else 0.0
        delivered = {w: int(c) for w, c in enumerate(counts[1:].tolist()) if c}
        ratio = cpu_ratio(ticks, top, delivered)
        slower = make_ratio(per_worker, top)
        cheap = sample_ratio(samples_by_worker, top)
        out.update(worker=top, top_worker=top, share=share, own_share=own_share,
                   others_share=others_share, cpu_ratio=ratio, make_ratio=slower,
                   sample_ratio=cheap)
        concentrated = (share >= ATTR_SHARE and others_share <= ONE_WORKER_OTHERS_SHARE
                        and (own_share > ONE_WORKER_OWN_SHARE
                             or _made_slow_mostly(by_size, batches, top)))
        # Where its samples were timed, a slow worker makes its cheaper
        # samples slower too; a worker whose batches are slow only through
        # the slow samples its turn holds is not one.
        one_worker = concentrated and (cheap is None or cheap >= BUSIER_RATIO) and (
            (slower is not None and slower >= BUSIER_RATIO)
            or (slower is None and ratio is not None and (
                ratio >= BUSIER_RATIO
                or (ratio <= 1 / BUSIER_RATIO and top != ROUND_OPENER))))
    waited_on = _waited_on(ranks, making_ranks)
    waited_on = waited_on[waited_on >= 0]
    if made is not None and made["period"] != k and len(waited_on) >= ATTR_MIN_STALLS:
        on = float(np.mean(np.isin(waited_on % made["period"], made["residues"])))
        if on > MADE_STALL_SHARE:
            stall_period = period if period is not None else rank_period(ranks, k)
            return {**out, "label": LARGE_BATCH if _larger(made) else SLOW_SAMPLE,
                    "worker": None, "period": made["period"],
                    "residue": made["residue"], "residues": made["residues"],
                    "residue_share": on,
                    "period_from": PERIOD_FROM_MAKE_TIMES, "stall_period": stall_period,
                    "made": {"slow": made["slow"], "batches": made["batches"],
                             "split_s": made["split_ns"] * 1e-9,
                             "slow_on_residue": made["slow_on_residue"],
                             "residue_slow": made["residue_slow"],
                             "sizes": made.get("sizes"),
                             "sample_cost_ratio": made.get("sample_cost_ratio")}}
    if one_worker:
        pinned = _pinned_indices(slow_samples, out["worker"])
        also = also_slow(per_worker, out["worker"])
        return {**out, "label": ONE_WORKER,
                **({"pinned_indices": pinned} if pinned is not None else {}),
                **({"also_slow": also} if also else {})}
    if period is None:
        period = rank_period(ranks, k)
        out["period"] = out["stall_period"] = period
        if period is None:
            return None
    if period > 1 and period != k:
        held = _stalled_residue(ranks, period)
        if held is not None:
            residue, rshare = held
            out.update(residue=residue, residue_share=rshare)
            spread = nw < 2 or len(by_worker) >= 2
            # Slow samples make their batches cost more: where the workers
            # timed the batches and they cost alike, the stalls' period is
            # not the data's (workers pairing up on shared cores, say).
            if (rshare >= ATTR_SHARE and spread and made_alike is not True
                    and _residue_made_slower(by_size, period, residue) is not False):
                larger = _residue_by_size(by_size, period, residue)
                if larger is not None:
                    return {**out, "label": LARGE_BATCH, "worker": None,
                            "period_from": PERIOD_FROM_STALLS, "made": larger}
                return {**out, "label": SLOW_SAMPLE, "worker": None,
                        "period_from": PERIOD_FROM_STALLS}
        return None
    if period == k and k >= 2 and by_size is not None:
        # Every num_workers-th batch larger (a batch_sampler's) lands on
        # one worker in round-robin order: the stalls keep the workers'
        # period, yet the batches are slow by their size, not by the
        # worker (its samples cost the others') nor by a round.
        held = _stalled_residue(ranks, period)
        if held is not None:
            residue, rshare = held
            larger = (_residue_by_size(by_size, period, residue) if rshare >= ATTR_SHARE
                      else None)
            if larger is not None:
                return {**out, "label": LARGE_BATCH, "worker": None, "residue": residue,
                        "residue_share": rshare, "period_from": PERIOD_FROM_STALLS,
                        "made": larger}
    # A round made in lock-step costs each worker alike: where the worker
    # holding the stalls takes BUSIER_RATIO times the others' mean time a
    # batch (some of its batches slow: samples every num_workers-th index
    # land on one worker in round-robin order), the round does not explain
    # the stalls, whatever its median says.
    heavier = make_ratio(per_worker, out["top_worker"], "make_mean_s")
    if nw >= 2 and period == k and making is not False and made_alike is not False and not (
            heavier is not None and heavier >= BUSIER_RATIO) and in_rounds(batches, k):
        # Stalls on one worker with no CPU readings to tell it from the
        # rest: a slow worker and drifted lock-step look alike here.
        ambiguous = bool(out["share"] is not None and out["share"] >= ATTR_SHARE
                         and out["cpu_ratio"] is None and out["make_ratio"] is None)
        return {**out, "label": LOCK_STEP, "worker": None, "ambiguous": ambiguous}
    return None


def in_rounds(batch_workers: np.ndarray, k: int) -> bool:
    """Whether the steady batches could come in rounds of one from each of
    the ``k`` workers, as LOCK-STEP's "once per round" needs: the complete
    rounds (``k`` times the fewest batches any worker made) hold at least
    ATTR_SHARE of the batches whose worker is known (True where none is
    known: nothing says otherwise).  In order, a map-style dataset's
    batches always do, and batches that overtake (in_order=False) keep the
    counts; an IterableDataset whose shards are uneven does not: 3
    workers, worker 0's shard twice the others', read "LOCK-STEP, once
    per round of 3 workers" with worker 0 alone making every batch past
    step 72 (helper 64)."""
    w = np.asarray(batch_workers, dtype=np.int64)
    w = w[w >= 0]
    if k < 2 or not len(w):
        return True
    counts = np.bincount(w, minlength=k)[:k]
    return k * int(counts.min()) >= ATTR_SHARE * len(w)


def _pinned_indices(slow: Optional[dict], worker: int) -> Optional[list]:
    """The slow indices (up to slow_samples.INDICES_SHOWN, as its finding
    shows them) where every slow sample was made by ``worker`` and none of
    the slow indices by any other worker (``slow``: slow_samples.slow_of's,
    with slow_workers and indices_moved); None otherwise or where that was
    not measured."""
    if not slow or not slow.get("count") or not slow.get("indices"):
        return None
    if slow.get("slow_workers") != [worker] or slow.get("indices_moved", 1) != 0:
        return None
    return [int(i) for i in slow["indices"][:slow_samples.INDICES_SHOWN]]


def workers_list(ids) -> str:
    """Worker ids as words, sorted: "0", "0 and 2", "0, 1 and 3"."""
    ids = sorted(ids)
    return ", ".join(str(i) for i in ids[:-1]) + (" and " if len(ids) > 1 else "") + str(ids[-1])


def workers_named(ids) -> str:
    """"worker 1", or "workers 0 and 2" (:func:`workers_list`)."""
    ids = sorted(ids)
    return f"worker {ids[0]}" if len(ids) == 1 else "workers " + workers_list(ids)


def _slow_set(p: dict) -> str:
    """"worker 1", or with ``also_slow`` "workers 1 and 3"."""
    also = [int(w) for w in p.get("also_slow") or []]
    return workers_named([int(p["worker"]), *also])


def _one_worker(p: dict) -> str:
    ratio = p["cpu_ratio"]
    busy = ("" if ratio is None
            else f", using {ratio:.1f}x the other workers' median CPU" if ratio >= 1
            else f", using {ratio:.1f}x the other workers' median CPU (it waits on something)")
    return (f"Worker {p['worker']} held {p['stalls']} of the {p['known']} stalls "
            f"({pct(p['own_share'])} of its batches stalled, few of the others'){busy}: "
            + ("slow workers, not the workers' round." if p.get("also_slow") else
               "one worker is slower than the rest, not the workers' round.")
            + _also_slow_words(p))


def _stalls_against_made(p: dict) -> str:
    """How the stalls' own period stands to the slow samples' period (made
    slow in the workers): the same, a multiple (prefetch hid some), or
    none."""
    sp = p.get("stall_period")
    if sp is None:
        return "the stalls keep no period of their own"
    if sp == p["period"]:
        return f"the stalls recur every {sp} batches too"
    if sp % p["period"] == 0:
        return (f"the loop stalled on only some of them, every {sp} batches (prefetch made "
                "the others in time)")
    return f"the stalls recur every {sp} batches"


# The stalled batches are slow in collate_fn, not in their samples, where
# collate_fn holds more than this share (most) of their make time,
# measured by the workers' per-sample timing (sample_timing).
COLLATE_SHARE = 0.5


def _in_collate(p: dict) -> bool:
    return (p.get("collate_share") or 0.0) > COLLATE_SHARE


def with_collate_share(attr: Optional[dict], share: Optional[float],
                       sampled: bool = False) -> Optional[dict]:
    """``attr`` (:func:`attribution`'s dict, or None) with
    ``collate_share``: the stalled batches' collate_fn time over their
    make time (0..1, measured by the workers' per-sample timing; None: not
    timed), or with ``sampled`` (num_workers=0) the share of the stalled
    fetches' stack samples taken under collate_fn (``collate_sampled``
    True).  A SLOW-SAMPLE residue whose stalled batches spent more than
    COLLATE_SHARE of their make time in collate_fn reads SLOW-COLLATE: the
    batches are slow, not their samples, and timing __getitem__ on them
    would find nothing (at num_workers=0 a collate_fn burning 25 ms every
    5th batch read SLOW-SAMPLE, "nothing times the two apart", beside stack
    samples 91-94% in it, helper 35B)."""
    if attr is None:
        return None
    out = {**attr, "collate_share": share, **({"collate_sampled": True} if sampled else {})}
    if out["label"] == SLOW_SAMPLE and _in_collate(out):
        out["label"] = SLOW_COLLATE
    return out


# The stalled batches' indices, not their samples, are what come late
# where the sampler's next() holds more than this share of the stalls'
# measured wait (wait_parts: the sampler part of the stalls' split).
SAMPLER_HOLDS_STALLS = 0.5


def unless_sampler(attr: Optional[dict], stalls_split: Optional[dict]) -> Optional[dict]:
    """``attr`` (:func:`attribution`'s dict, or None), or None where it
    names a residue of slow batches (SLOW-SAMPLE, SLOW-COLLATE) whose wait
    the sampler's next() holds, more than SAMPLER_HOLDS_STALLS of the
    stalls' measured wait (``stalls_split``, wait_split's split of the
    stalled fetches): the batches at that residue wait for their indices,
    and timing their samples or collate_fn finds nothing.  A Sampler
    sleeping every 16 indices at num_workers=0 read "SLOW-SAMPLE, rank %
    4 == 0 ... time __getitem__ on the indices of those batches" beside
    the sampler's 98% of the stalls' wait (helper 36B, 3 of 3)."""
    if attr is None or attr["label"] not in SLOW_RESIDUE or not stalls_split:
        return attr
    total = stalls_split.get("wait_s") or 0.0
    held = (stalls_split.get("parts_s") or {}).get(wait_parts.SAMPLER, 0.0)
    return None if total > 0 and held > SAMPLER_HOLDS_STALLS * total else attr


def _what_is_slow(p: dict) -> str:
    """What the residue's batches are: slow samples, or, where collate_fn
    holds most of the stalled batches' make time (COLLATE_SHARE),
    batches slow in collate_fn; at num_workers=0 (``main``), where nothing
    times collate_fn apart from the samples, particular batches (a slow
    collate_fn every 7th batch read "particular samples are slow ... time
    __getitem__" beside the stack samples naming the collate_fn, helper
    32B)."""
    if _in_collate(p):
        return (f"particular batches are slow, not a worker, and collate_fn holds "
                f"{pct(p['collate_share'])} of the stalled batches' "
                f"{'sampled time' if p.get('collate_sampled') else 'make time'}, not their "
                "samples' __getitem__")
    if p.get("main"):
        return ("particular batches are slow (their samples or their collate_fn: at "
                "num_workers=0 nothing times the two apart)")
    return "particular samples are slow, not a worker"


def _time_them(p: dict) -> str:
    """How to time the slow samples: by index, or for an IterableDataset
    by position in each worker's stream; where collate_fn holds the slow
    batches' time (COLLATE_SHARE), collate_fn on those batches."""
    if _in_collate(p):
        return "time collate_fn on those batches"
    if p.get("index_stride"):
        # The per-sample timing's own stride names every slow index, where
        # a batch residue holds only some of them (every 7th index at
        # batch size 2 makes batches at rank % 7 == 0 and == 3 slow).
        if p.get("index_residues"):
            return (f"time __getitem__ on index % {p['index_stride']} in "
                    f"{{{', '.join(str(r) for r in p['index_residues'])}}} (the workers' "
                    f"per-sample timing found those {len(p['index_residues'])} places in "
                    f"every {p['index_stride']} indices slow, and no other)")
        return (f"time __getitem__ on index % {p['index_stride']} == {p['index_residue']} "
                f"(the workers' per-sample timing found every {nth(p['index_stride'])} index "
                "slow, and no other)")
    if p.get("iterable"):
        return "time the dataset's __next__ at the positions of those batches"
    if p.get("main"):
        return "time __getitem__ on the indices of those batches, and collate_fn on them"
    return "time __getitem__ on the indices of those batches"


def deeper_look_ahead(s: dict) -> Optional[dict]:
    """The prefetch_factor that would make each batch early enough to hide
    the median stall, where the workers keep up on average (the
    prediction's keeps_up_with at most the run's num_workers) and each of
    them does (:func:`_behind`): {from, to, stall_s}; where a worker falls
    behind, {behind: [...], make_s, budget_s, period, spread} instead;
    None otherwise.  The model: in order, each worker holds
    prefetch_factor batches in flight, so one more starts every batch
    num_workers steps earlier (num_workers x the mean step); a stall of W
    is hidden by ceil(W / (num_workers x step)) more.  Deeper look-ahead
    pays only where production keeps up: it moves batches earlier, it
    makes none faster, and hides only a wait for batches still being made:
    where the stalls' measured parts (``wait_parts.stalls``) put another
    cause above the workers' production (wait_parts.production_leads),
    None.  A slow sample every 7th index at prefetch_factor=4, its stalls
    60% a made batch held behind its worker's Python, was told
    "prefetch_factor=6 (now 4)": the mean wait a step was 6.2 ms at 4,
    5.2-5.5 ms at 6 and 2.9-3.2 ms at 3 (helper 63)."""
    if wait_parts.production_leads((s.get("wait_parts") or {}).get("stalls")) is False:
        return None
    loader = s.get("loader") or {}
    nw, pf = loader.get("num_workers"), loader.get("prefetch_factor")
    pred = s.get("prediction") or {}
    keeps = pred.get("keeps_up_with")
    stall = (s.get("stalls") or {}).get("stall_median_s")
    step = (s.get("step_s") or {}).get("mean")
    if not nw or not pf or keeps is None or keeps > nw or not stall or not step:
        return None
    behind = _behind(s, nw, pred)
    if behind is not None:
        return behind
    more = math.ceil(stall / (nw * step))
    return {"from": int(pf), "to": int(pf) + more, "stall_s": stall}


# A worker is behind on its own batches where the one-sided lower bound of
# its mean make time at this level is past its budget: the 1 in 100 of
# the report's other claims.
BEHIND_ALPHA = 0.01


def _behind(s: dict, nw: int, pred: dict) -> Optional[dict]:
    """The workers that fall behind on their own batches, or None.  In
    order, worker w makes every num_workers-th batch, so it keeps up only
    where its own mean make time (production.workers) is at most
    num_workers times the loop's use of a batch (the prediction's compute
    plus hand-over): the pooled mean keeping up says nothing of a worker
    that every slow batch lands on (4 workers, every 2nd batch 60 ms, 10
    ms compute: workers 0 and 2 need 60 ms a batch against 44 ms, and
    prefetch_factor 3 or 6 left the stalls as they were, helper 37A).
    Where the attribution's period shares a factor with num_workers, a
    num_workers that does not (``spread``, the nearest at 2 or more)
    deals the slow batches to every worker in turn.  A worker is behind
    where its mean make time exceeds that budget beyond its own batches'
    spread: the one-sided BEHIND_ALPHA lower bound of the mean (Student's
    t on its make times) is past it ("21.5 ms against the 21 ms each has"
    claimed no look-ahead could help, helper 39A, 6 of 6).  ``low_s``:
    that bound.  Where no worker is behind but one's two-sided bounds
    hold its budget, {close, make_s, low_s, high_s, budget_s, num_workers}:
    not yet either way."""
    per = pred.get("compute_s", 0.0) + pred.get("handover_s", 0.0)
    made = {int(w): m for w, m in ((s.get("production") or {}).get("workers") or {}).items()
            if (m.get("batches") or 0) >= 2 and m.get("make_mean_s") is not None
            and m.get("make_sd_s") is not None}
    if per <= 0 or len(made) < 2:
        return None
    budget = nw * per

    def low(m: dict) -> float:
        n = m["batches"]
        return m["make_mean_s"] - float(stats.t.ppf(1.0 - BEHIND_ALPHA, n - 1)) * (
            m["make_sd_s"] / math.sqrt(n))

    def high(m: dict) -> float:
        return 2.0 * m["make_mean_s"] - low(m)

    late = sorted(w for w, m in made.items() if low(m) > budget)
    if not late:
        # Within a worker's own spread of its budget, either way: not yet.
        # A point reading would claim one: "21.5 ms against 21 ms" that no
        # look-ahead hides (helper 39A), or, with that bound alone, a
        # deeper look-ahead where workers 0 and 2 of 4 make every slow
        # batch (prefetch_factor 4 and 6 left the stalls, helper 40C).
        close = sorted(w for w, m in made.items() if high(m) > budget)
        if not close:
            return None
        top = max(close, key=lambda w: made[w]["make_mean_s"])
        return {"close": close, "make_s": made[top]["make_mean_s"], "low_s": low(made[top]),
                "high_s": high(made[top]), "budget_s": budget, "num_workers": nw}
    period = (s.get("attribution") or {}).get("period")
    spread = None
    if period and math.gcd(nw, int(period)) > 1:
        spread = min((k for k in range(2, 2 * nw + 2) if math.gcd(k, int(period)) == 1),
                     key=lambda k: (abs(k - nw), k))
    top = max(late, key=lambda w: made[w]["make_mean_s"])
    return {"behind": late, "make_s": made[top]["make_mean_s"], "low_s": low(made[top]),
            "budget_s": budget, "num_workers": nw, "period": period, "spread": spread}


def _look_ahead(p: dict) -> str:
    d = p.get("deeper")
    if not d:
        return ""
    if d.get("close"):
        who = workers_named(d["close"])
        return (f" Whether a deeper look-ahead hides them is not yet told: {who} took "
                f"{fmt_s(d['make_s'])} a batch on average ({fmt_s(d['low_s'])} to "
                f"{fmt_s(d['high_s'])} at {pct(1.0 - 2 * BEHIND_ALPHA)}), about the "
                f"{fmt_s(d['budget_s'])} each has (num_workers x the loop's use of a batch); "
                "more steps would tell.")
    if d.get("behind"):
        who = workers_named(d["behind"])
        spread = (f"; num_workers={d['spread']}, which shares no factor with the period "
                  f"{d['period']}, deals them to every worker in turn (traceml.sweep("
                  f"make_loader, num_workers=({d['num_workers']}, {d['spread']})) measures "
                  "it)" if d.get("spread") else "")
        bound = (f" (at least {fmt_s(d['low_s'])} at {pct(1.0 - BEHIND_ALPHA)})"
                 if d.get("low_s") is not None else "")
        return (f" No deeper look-ahead hides them: {who} took {fmt_s(d['make_s'])} a batch on "
                f"average{bound}, more than the {fmt_s(d['budget_s'])} each has (num_workers x "
                f"the loop's use of a batch){spread}.")
    return (f" Or, since the workers keep up on average (the prediction), a deeper "
            f"look-ahead hides them: prefetch_factor={d['to']} (now {d['from']}) starts each "
            f"batch early enough for the median stall ({fmt_s(d['stall_s'])}).")


def ranks_on(p: dict) -> str:
    """"rank % 5 == 2", or for several residues "rank % 5 in {0, 2}"."""
    several = p.get("residues") or []
    if len(several) > 1:
        return f"rank % {p['period']} in {{{', '.join(str(x) for x in sorted(several))}}}"
    return f"rank % {p['period']} == {p['residue']}"


def _how_many(p: dict) -> str:
    """"one in 5", or for several residues "2 in 5"."""
    several = len(p.get("residues") or [])
    return f"{several} in {p['period']}" if several > 1 else f"one in {p['period']}"


def _slow_made(p: dict) -> str:
    """SLOW-SAMPLE from the workers' make times (made_period)."""
    return (f"The workers made {p['slow']} of {p['batches']} batches slow, "
            f"{pct(p['slow_on_residue'])} of them with {ranks_on(p)}, "
            # Of the stalls, not of those batches: a stall waits on the
            # batch its worker was making then, and 54 stalls on 39 slow
            # batches read "100% of the stalls are among them" (helper 42).
            f"and {pct(p['share'])} of the stalls waited on one with {ranks_on(p)} (the "
            "batch received, or the one its worker was making during the wait); "
            f"{_stalls_against_made(p)}. "
            + (_what_is_slow(p)[0].upper() + _what_is_slow(p)[1:] if _in_collate(p) else
               f"Particular samples are slow, {_how_many(p)}, not a worker")
            + f"; next: {_time_them(p)}"
            + ("" if p.get("index_stride") and not _in_collate(p) else
               f" with {ranks_on(p)}")
            + "." + _look_ahead(p))


def attribution_line(s: dict) -> Optional[str]:
    """Which worker, round or samples the stalls follow (attribution);
    None without an attribution."""
    a = s.get("attribution")
    if not a:
        return None
    spread = ", ".join(f"{w}:{c}" for w, c in sorted(a["stall_workers"].items()))
    on = f" (stalls by worker {spread}; {a['known']} with a known worker)" if spread else ""
    also = ("" if not a.get("also_slow") else
            f"; {_slow_set({'worker': a['worker'], 'also_slow': a['also_slow']})} "
            f"{'both' if len(a['also_slow']) == 1 else 'all'} make "
            f"their batches slowly (worker {a['worker']}'s stalls hid the others')")
    if a["label"] == ONE_WORKER and a.get("pinned_indices"):
        return (f"attribution: {ONE_WORKER} worker {a['worker']}{on}, or the samples it is "
                f"sent: its slow samples were never made by another worker{also}")
    if a["label"] == ONE_WORKER and order_fixed(s):
        return (f"attribution: {ONE_WORKER} worker {a['worker']}{on}, or the samples it is "
                f"sent: the loader's fixed order sends it the same indices every epoch{also}")
    if a["label"] == ONE_WORKER:
        return f"attribution: {ONE_WORKER} worker {a['worker']}{on}{also}"
    if a["label"] == LARGE_BATCH:
        m = a["made"]
        if a.get("period_from") == PERIOD_FROM_SIZES:
            return (f"attribution: {LARGE_BATCH}, from the batches' sizes: the {m['slow']} "
                    f"stalled batches of {m['batches']} hold {m['sizes'][0]:.0f} samples a "
                    f"batch against {m['sizes'][1]:.0f} (medians; p = "
                    f"{m['size_p_value']:.2g} that sizes at random rank so){on}")
        if a.get("period_from") == PERIOD_FROM_STALLS:
            return (f"attribution: {LARGE_BATCH}, rank % {a['period']} == {a['residue']} from "
                    f"the stalls, in {pct(a['residue_share'])} of stalled batches; that "
                    f"residue's {m['slow']} of {m['batches']} batches made slow by their size, "
                    f"{m['sizes'][0]:.0f} samples a batch against {m['sizes'][1]:.0f}{on}")
        return (f"attribution: {LARGE_BATCH}, {ranks_on(a)} from the "
                f"workers' make times ({m['slow']} of {m['batches']} batches made slow, "
                f"{m['sizes'][0]:.0f} samples a batch against {m['sizes'][1]:.0f}){on}")
    if a["label"] == SLOW_COLLATE:
        on += (f"; collate_fn holds {pct(a['collate_share'])} of the stalled batches' "
               f"{'sampled time' if a.get('collate_sampled') else 'make time'}: the batches "
               "are slow, not their samples")
    if a["label"] in SLOW_RESIDUE and a.get("period_from") == PERIOD_FROM_MAKE_TIMES:
        m = a["made"]
        sp = a.get("stall_period")
        stalls = ("no period of their own" if sp is None
                  else f"period {sp}" + (" too" if sp == a["period"] else ""))
        several = len(a.get("residues") or []) > 1
        return (f"attribution: {a['label']}, {ranks_on(a)} from "
                f"the workers' make times ({m['slow']} of {m['batches']} batches made slow, "
                f"{pct(m['slow_on_residue'])} of them "
                f"{'on those residues' if several else 'on that residue'}); the stalls: "
                f"{pct(a['residue_share'])} on {'them' if several else 'it'}, {stalls}{on}")
    if a["label"] in SLOW_RESIDUE:
        return (f"attribution: {a['label']}, rank % {a['period']} == {a['residue']} from "
                f"the stalls, in {pct(a['residue_share'])} of stalled batches{on}")
    text = f"attribution: {LOCK_STEP}, once per round of {a['period']} workers{on}"
    if a.get("ambiguous"):
        text += (f"; without CPU readings a slow worker {a['top_worker']} cannot be told from "
                 "the round")
    elif not (s.get("production") or {}).get("available"):
        # Spawn workers are not timed: one slow batch a round reads the same
        # (helper 38C: the next step said so, this line did not).
        text += ("; the workers' batch timing is off, so one slow batch a round, on one "
                 "worker's turn, reads the same")
    return text


# --- advice -----------------------------------------------------------------
# The next-step codes (traceml.findings.advice) that point at the workers'
# round or at varying num_workers: an attribution to one worker replaces
# them.
ROUND_CODES = frozenset(("lockstep", "uneven_batches", "vary_workers_then_in_order", "period_not_workers",
                         "confirm_period", "period", "wrap_to_compare_period", "irregular",
                         "compare_in_order", "in_order_seen", "vary_workers_around", "overtaking_round",
                         "unsettled"))
# The next-step codes each of this family's items replaces.  SLOW-SAMPLE
# replaces "confirm the period"; when the workers' make times give the
# samples a period other than the stalls' cadence, also the items that
# read a period off the stalls (they would name the wrong one), lock-step
# among them: every 6th sample slow on 2 workers lands on one worker and
# stalls every 2nd fetch, the stall period equal to num_workers by the
# round-robin, not because the workers finish together (2 of 5 such runs
# printed "lock-step" and "vary num_workers" beside "SLOW-SAMPLE, rank %
# 6 == 2").
SUPERSEDES = {
    "one_worker": ROUND_CODES,
    "one_worker_or_samples": ROUND_CODES,
    "split_shards": ROUND_CODES,
    "slow_sample": frozenset(("confirm_period", "compare_in_order", "in_order_seen")),
    "slow_collate": frozenset(("confirm_period", "compare_in_order", "in_order_seen")),
    "large_batches": ROUND_CODES,
}
SLOW_SAMPLE_OWN_PERIOD_SUPERSEDES = frozenset(("period_not_workers", "period",
                                               "wrap_to_compare_period", "lockstep",
                                               "vary_workers_then_in_order"))
ONLY_REPLACING: frozenset = frozenset()


def superseded_by(f: Finding) -> frozenset:
    """The next-step codes the item ``f`` replaces (SUPERSEDES)."""
    out = SUPERSEDES.get(f.code, frozenset())
    n = f.numbers
    if (f.code in ("slow_sample", "slow_collate") and "stall_period" in n
            and n["stall_period"] != n["period"]):
        out = out | SLOW_SAMPLE_OWN_PERIOD_SUPERSEDES
    return out


def advise(s: dict) -> list[Finding]:
    """The next steps the attribution (``s["attribution"]``) calls for:
    ONE-WORKER names that worker's shard; SLOW-SAMPLE the samples'
    residue (with the workers' make-time figures when they gave it)."""
    attr = s.get("attribution")
    if attr and attr["label"] == ONE_WORKER and (attr.get("pinned_indices")
                                                 or order_fixed(s)):
        nw = (s.get("loader") or {}).get("num_workers")
        return [Finding("one_worker_or_samples", {
            "worker": attr["worker"], "stalls": attr["stall_workers"].get(attr["worker"], 0),
            "known": attr["known"], "indices": attr.get("pinned_indices"),
            "num_workers": nw, **({"also_slow": attr["also_slow"]}
                                  if attr.get("also_slow") else {})})]
    if attr and attr["label"] == ONE_WORKER:
        also = attr.get("also_slow") or {}
        return [Finding("one_worker", {"worker": attr["worker"],
                                       "stalls": attr["stall_workers"].get(attr["worker"], 0),
                                       "known": attr["known"], "own_share": attr["own_share"],
                                       "cpu_ratio": attr["cpu_ratio"],
                                       **({"also_slow": also} if also else {})}),
                Finding("split_shards", {"worker": attr["worker"],
                                         **({"also_slow": sorted(int(w) for w in also)}
                                            if also else {})})]
    if attr and attr["label"] == LARGE_BATCH:
        m = attr["made"]
        return [Finding("large_batches", {
            "period": attr["period"], "residue": attr["residue"],
            **({"residues": attr["residues"]} if attr.get("residues") else {}),
            "slow": m["slow"],
            "sized": attr.get("period_from") == PERIOD_FROM_SIZES,
            "batches": m["batches"], "share": attr["residue_share"],
            "slow_on_residue": m["slow_on_residue"],
            "slow_samples": m["sizes"][0], "other_samples": m["sizes"][1],
            "sample_cost_ratio": m["sample_cost_ratio"], "deeper": deeper_look_ahead(s),
            **({"main": True} if (s.get("loader") or {}).get("num_workers") == 0 else {})})]
    if attr and attr["label"] in SLOW_RESIDUE:
        params = {"period": attr["period"], "residue": attr["residue"],
                  **({"residues": attr["residues"]} if attr.get("residues") else {}),
                  "share": attr["residue_share"], "workers": len(attr["stall_workers"]),
                  # An IterableDataset has no indices: its samples are the
                  # positions in each worker's stream (sample_timing).
                  "iterable": (((s.get("production") or {}).get("samples") or {})
                               .get("kind") == "iterable"),
                  "deeper": deeper_look_ahead(s),
                  "collate_share": attr.get("collate_share"),
                  **({"collate_sampled": True} if attr.get("collate_sampled") else {}),
                  **({"main": True} if (s.get("loader") or {}).get("num_workers") == 0
                     else {}),
                  **_index_stride(s)}
        made = attr.get("made")
        if made is not None:
            params.update(period_from=attr["period_from"], stall_period=attr["stall_period"],
                          slow=made["slow"], batches=made["batches"],
                          slow_on_residue=made["slow_on_residue"])
        return [Finding("slow_collate" if attr["label"] == SLOW_COLLATE else "slow_sample",
                        params)]
    return []


def order_fixed(s: dict) -> bool:
    """Whether the loader sends each worker the same indices every epoch:
    a map-style dataset (the workers' per-sample timing says so) read in a
    fixed order (``shuffle`` False: no RandomSampler), where batch rank r
    goes to worker r % num_workers.  A worker whose batches are slow then
    cannot be told from the samples it is sent, whatever the per-sample
    timing found: every 5th index 3x slower at batch size 1 on 5 workers
    makes every sample of worker 3's slow (helper 27A, ONE-WORKER 3 in 3 of
    4 runs, with no word of its samples)."""
    samples = (s.get("production") or {}).get("samples") or {}
    return samples.get("kind") == "map" and (s.get("loader") or {}).get("shuffle") is False


def _index_stride(s: dict) -> dict:
    """{index_stride, index_residue} where the workers' per-sample timing
    of a map-style dataset found an exact index stride
    (slow_samples.slow_of's stride and residue); else {}."""
    samples = (s.get("production") or {}).get("samples") or {}
    slow = samples.get("slow") or {}
    if samples.get("kind") != "map" or slow.get("stride") is None:
        return {}
    return {"index_stride": slow["stride"], "index_residue": slow["residue"],
            **({"index_residues": slow["residues"]} if slow.get("residues") else {})}


def _one_worker_or_samples(p: dict) -> str:
    nw = p.get("num_workers")
    other = (f"num_workers={nw - 1}" if nw and nw > 2 else
             f"num_workers={nw + 1}" if nw else "another num_workers")
    if p.get("indices"):
        shown = ", ".join(str(i) for i in p["indices"])
        why = (f"and every slow sample the workers timed was in its batches (index {shown} "
               "...), none of them ever made by another worker: the order sends those "
               "indices to it every epoch")
    else:
        why = ("and the loader's order is fixed (a map-style dataset, no shuffle): it sends "
               "worker {} the same indices every epoch").format(p["worker"])
    return (f"Worker {p['worker']} held {p['stalls']} of the {p['known']} stalls, {why}, "
            "so a slow worker and slow samples read the same here."
            + _also_slow_words(p) + " Next: the same "
            f"loop at {other}, or with shuffle=True: stalls that follow the indices are the "
            "samples (time __getitem__ on them); stalls that stay on one worker are the "
            "worker.")


def _large_batches(p: dict) -> str:
    if p.get("sized"):
        return (f"The {p['slow']} stalled batches of {p['batches']} hold "
                f"{p['slow_samples']:.0f} samples against {p['other_samples']:.0f} "
                f"(medians), each costing {p['sample_cost_ratio']:.1f}x the others' time a "
                "sample: they are slow by their size, not by particular samples or a "
                "worker. Next: even batch sizes (the batch_sampler's)." + _look_ahead(p))
    who = ("The main process (num_workers=0) made" if p.get("main") else "The workers made")
    return (f"{who} {p['slow']} of {p['batches']} batches slow, "
            f"{pct(p['slow_on_residue'])} of them with {ranks_on(p)}, "
            f"and {pct(p['share'])} of the stalls "
            f"wait on them; those batches hold {p['slow_samples']:.0f} samples against "
            f"{p['other_samples']:.0f} (medians), each costing "
            f"{p['sample_cost_ratio']:.1f}x the others' time a sample: they are slow by "
            "their size, not by particular samples or a worker. Next: even batch sizes (the "
            "batch_sampler's)." + _look_ahead(p))


WORDS: dict[str, Words] = {
    "large_batches": _large_batches,
    "one_worker": _one_worker,
    "one_worker_or_samples": _one_worker_or_samples,
    "split_shards": lambda p: (
        f"Next: look at what {_slow_set(p)} {'has' if not p.get('also_slow') else 'have'} "
        "that the others do not, not at "
        "num_workers: with an IterableDataset, the shard each reads (split by "
        "get_worker_info().id) is larger or slower than the others' (balance the split); "
        "with a map-style dataset every worker runs the same code, so its own "
        "worker_init_fn, a per-worker resource (a file, a connection, a cache) or the core "
        "it runs on."),
    "slow_sample": lambda p: _slow_residue(p),
    "slow_collate": lambda p: _slow_residue(p),
}


def _slow_residue(p: dict) -> str:
    """SLOW-SAMPLE's and SLOW-COLLATE's next step: the residue's batches,
    what is slow in them (:func:`_what_is_slow`) and how to time it."""
    return (
        _slow_made(p) if p.get("period_from") == PERIOD_FROM_MAKE_TIMES else (
            f"The stalled batches share rank % {p['period']} == {p['residue']} "
            f"({pct(p['share'])} of them) "
            + (f"across {plural(p['workers'], 'worker')}" if p["workers"] else
               "(num_workers=0: made in the main process)")
            + f": {_what_is_slow(p)}; next: {_time_them(p)}."
            + _look_ahead(p)))
