"""Which worker, round or samples the stalls follow (attribution.attribution),
the state of the worker holding the awaited batch, worker CPU from every
thread, and bytes per batch: rules on hand-made inputs, then real
DataLoaders whose workers burn, sleep, burn in threads, or hand over large
batches."""

import collections
import os
import threading
import time
import warnings

import numpy as np
import pytest

from traceml import _core
from traceml.findings import advice, attribution, hand_over, input_bound, stall_threshold, stall_timing, worker_evidence

warnings.filterwarnings("ignore", message=".*worker processes in total.*")

# --- the rule on hand-made inputs ---------------------------------------------------


def _round_robin(n, nw):
    return np.arange(n) % nw


def _attr(stall_steps, nw, period, ticks, n=40):
    batches = _round_robin(n, nw)
    stall_steps = np.asarray(stall_steps)
    return attribution.attribution(stall_steps, batches[stall_steps], batches, nw, period, ticks)


def test_one_busier_worker_is_named():
    # 4 workers, worker 2's batch stalls in 8 of its 10 rounds; it used 5.4x
    # the others' CPU (ticks measured in a slow-shard run).
    stalls = [2 + 4 * r for r in range(10) if r not in (3, 7)]
    a = _attr(stalls, 4, 4, {0: 46, 1: 46, 2: 248, 3: 47})
    assert a["label"] == attribution.ONE_WORKER and a["worker"] == 2
    assert a["stall_workers"] == {2: 8} and a["known"] == 8
    assert a["own_share"] == pytest.approx(8 / 10) and a["others_share"] == 0.0
    assert a["cpu_ratio"] == pytest.approx(248 / 46)


def test_equally_busy_workers_stalling_on_one_are_lock_step():
    # Free-running lock-step measured 8 of 8 stalls on worker 3 with 83-84
    # ticks each: the position alone names no worker.
    stalls = [3 + 4 * r for r in range(10)]
    a = _attr(stalls, 4, 4, {0: 83, 1: 83, 2: 83, 3: 84})
    assert a["label"] == attribution.LOCK_STEP and a["cpu_ratio"] == pytest.approx(84 / 83)
    assert not a["ambiguous"]
    # Without readings it stays LOCK-STEP, flagged as not told apart.
    a = _attr(stalls, 4, 4, None)
    assert a["label"] == attribution.LOCK_STEP and a["ambiguous"]
    line = attribution.attribution_line({"attribution": a})
    assert line.endswith("without CPU readings a slow worker 3 cannot be told from the round")


def test_a_sleeping_worker_is_named_unless_it_opens_the_round():
    stalls = [1 + 3 * r for r in range(10)]
    a = _attr(stalls, 3, 3, {0: 25, 1: 6, 2: 27})  # measured: a shard that sleeps
    assert a["label"] == attribution.ONE_WORKER and a["worker"] == 1
    stalls = [3 * r for r in range(1, 10)]
    a = _attr(stalls, 3, 3, {0: 6, 1: 25, 2: 27})
    assert a["label"] == attribution.LOCK_STEP and a["worker"] is None
    assert a["top_worker"] == attribution.ROUND_OPENER


def test_stalls_spread_over_workers_at_the_round_are_lock_step():
    stalls = [4 * r + (r % 2) for r in range(1, 10)]  # pairs: worker 0 or 1
    a = _attr(stalls, 4, 4, {0: 100, 1: 101, 2: 99, 3: 100})
    assert a["label"] == attribution.LOCK_STEP
    assert a["stall_workers"] == {0: 4, 1: 5}


def test_stalls_on_one_rank_residue_across_workers_are_slow_samples():
    # Every 3rd sample slow, 2 workers: rank % 3 == 1 on both workers.
    stalls = list(range(1, 40, 3))
    a = _attr(stalls, 2, 3, {0: 87, 1: 87})
    assert a["label"] == attribution.SLOW_SAMPLE and a["worker"] is None
    assert a["residue"] == 1 and a["residue_share"] == 1.0
    assert set(a["stall_workers"]) == {0, 1}


def test_one_slow_sample_per_two_rounds_is_not_a_slow_worker():
    # Every 8th index slow with 4 workers: all on worker 3 but only half of
    # its batches, and on one worker, so neither ONE-WORKER nor SLOW-SAMPLE.
    stalls = list(range(3, 40, 8))
    a = _attr(stalls, 4, 8, {0: 50, 1: 50, 2: 50, 3: 90})
    assert a is None


def test_without_a_gap_period_the_ranks_can_keep_one():
    # Every 3rd sample slow, but stalls missed under the threshold made the
    # gaps IRREGULAR (3, 6, 3, 9, ...): the ranks still sit on rank % 3 == 1.
    stalls = [1, 4, 10, 13, 22, 25, 31, 37]
    a = _attr(stalls, 2, None, {0: 80, 1: 82})
    assert a["label"] == attribution.SLOW_SAMPLE and a["period"] == 3 and a["residue"] == 1
    assert attribution.rank_period(np.array(stalls), 2) == 3
    # Under 8 stalls, or ranks with no common residue: none.
    assert attribution.rank_period(np.array(stalls[:7]), 2) is None
    assert attribution.rank_period(np.array([1, 2, 4, 7, 11, 16, 22, 29]), 2) is None
    # The largest period the ranks keep: 0 mod 4 is 0 mod 2 as well.
    assert attribution.rank_period(np.arange(0, 64, 4), 1) == 4
    # The workers' own count is never taken for the samples' period.
    assert attribution.rank_period(np.arange(0, 64, 4), 4) == 2


def test_too_few_stalls_or_no_period_give_no_attribution():
    assert _attr([2, 6], 4, 4, None) is None
    assert _attr([1, 4, 9, 11], 4, None, None) is None


# --- the samples' period from the workers' make times -------------------------------

MS = 1_000_000


def _made(ranks, slow_at, slow_ms=150.0, seed=0):
    """Make times (ns) of batches with these ranks: ``slow_ms`` where
    ``slow_at(rank)``, else lognormal around 0.1 ms."""
    rng = np.random.default_rng(seed)
    ranks = np.asarray(ranks)
    fast = rng.lognormal(np.log(0.1), 0.3, len(ranks))
    slow = slow_ms * rng.uniform(0.95, 1.05, len(ranks))
    return np.round(np.where(slow_at(ranks), slow, fast) * MS).astype(np.int64)


def _brute_residues(ranks, slow):
    """Every (p, residue) holding more than half the slow ranks with
    ATTR_SHARE of that residue's batches slow, by definition."""
    out = []
    for p in range(2, attribution.RANK_PERIOD_MAX + 1):
        for r in range(p):
            on = ranks % p == r
            if (slow & on).sum() > 0.5 * slow.sum() and on.sum() and \
                    (slow & on).sum() >= attribution.ATTR_SHARE * on.sum():
                out.append((p, r))
    return out


def test_every_fifth_sample_made_slow_has_period_five():
    ranks = np.arange(4, 100)
    make = _made(ranks, lambda r: r % 5 == 2)
    m = attribution.made_period(ranks, make, 4)
    slow = ranks % 5 == 2
    assert m["period"] == 5 and m["residue"] == 2
    assert m["slow"] == int(slow.sum()) == 19 and m["batches"] == len(ranks)
    assert m["slow_on_residue"] == 1.0 and m["residue_slow"] == 1.0
    # The split lies between the two groups' make times.
    assert make[~slow].max() < m["split_ns"] < make[slow].min()
    # The smallest p that holds (10 holds residue 7 or 2 with 10 of 19).
    assert _brute_residues(ranks, slow)[0] == (5, 2)
    # Unknown ranks or make times (-1) are left out, not read as residues.
    r2, m2 = ranks.copy(), make.copy()
    r2[::7], m2[3::11] = -1, -1
    keep = (r2 >= 0) & (m2 >= 0)
    got = attribution.made_period(r2, m2, 4)
    assert got["period"] == 5 and got["batches"] == int(keep.sum())
    assert got["slow"] == int((keep & slow).sum())


def test_two_slow_places_a_period_are_both_named():
    # Every 10th index at batch size 4 makes batches 0 and 2 of every 5
    # slow (helper 34B): one residue held 51% of them and was named alone.
    ranks = np.arange(2, 150)
    slow = np.isin(ranks % 5, (0, 2))
    make = _made(ranks, lambda r: np.isin(r % 5, (0, 2)))
    m = attribution.made_period(ranks, make, 2)
    assert (m["period"], m["residue"], m["residues"]) == (5, 2, [2, 0])
    assert m["slow"] == int(slow.sum()) == 59
    assert m["slow_on_residue"] == 1.0 and m["residue_slow"] == 1.0
    assert attribution.ranks_on({"period": 5, **m}) == "rank % 5 in {0, 2}"
    # One of the two places only half slow: the other alone, as before.
    half = slow & ~((ranks % 5 == 0) & (ranks % 10 == 5))
    m = attribution.made_period(ranks, _made(ranks, lambda r: half[r - 2]), 2)
    assert (m["period"], m["residues"]) == (5, [2])
    # Two places that are one place of a smaller period: that period.
    m = attribution.made_period(ranks, _made(ranks, lambda r: np.isin(r % 6, (1, 4))), 2)
    assert (m["period"], m["residues"]) == (3, [1])


def test_random_slow_batches_name_no_set_of_places():
    # Random slow sets of several rates and run lengths: the set's search
    # pays for every (period, set) it could try, so none is named (a
    # single residue never was: test_make_time_noise_gives_no_period).
    claims = 0
    for seed in range(200):
        rng = np.random.default_rng(900 + seed)
        n = int(rng.choice((40, 80, 150)))
        ranks = np.arange(2, 2 + n)
        hit = rng.random(n) < rng.choice((0.15, 0.3, 0.45))
        if hit.sum() < attribution.RANK_PERIOD_MIN_STALLS:
            continue
        got = attribution.made_period(ranks, _made(ranks, lambda r, hit=hit: hit[r - 2],
                                                   seed=seed), 2)
        claims += got is not None and len(got["residues"]) > 1
    assert claims == 0


def test_a_slow_workers_batches_are_not_a_period_of_the_data():
    ranks = np.arange(4, 100)
    make = _made(ranks, lambda r: r % 4 == 1, slow_ms=60.0)
    # Odd ranks hold every slow batch but only half of them are slow: not
    # period 2; rank % 4 is worker 1's batches at num_workers=4: None.
    slow = ranks % 4 == 1
    assert _brute_residues(ranks, slow) == [(4, 1)]
    assert attribution.made_period(ranks, make, 4) is None
    # At num_workers=2 the same ranks are every other batch of worker 1:
    # a period of the data, 4.
    assert attribution.made_period(ranks, make, 2)["period"] == 4


def test_make_time_noise_gives_no_period():
    ranks = np.arange(4, 124)
    rng = np.random.default_rng(3)
    # Uniform make times: no two groups.
    uniform = np.round(rng.lognormal(np.log(30.0), 0.15, len(ranks)) * MS).astype(np.int64)
    assert stall_threshold.bimodal_split_ns(uniform) is None
    assert attribution.made_period(ranks, uniform, 4) is None
    # Slow batches at random ranks: two groups, no residue holds them.
    for seed in range(20):
        hit = np.random.default_rng(seed).random(len(ranks)) < 0.15
        make = _made(ranks, lambda r, hit=hit: hit[r - 4], seed=seed)
        want = _brute_residues(ranks, hit) if hit.sum() >= attribution.RANK_PERIOD_MIN_STALLS else []
        got = attribution.made_period(ranks, make, 4)
        assert (got is None) == (not want), (seed, want, got)
        assert got is None, seed


# Make times (ms) of one run beside a CPU hog: a 0.1 ms sleep per item,
# 80 ms on every 5th, 4 workers (benchmarks/bench_truth.py's SleepDataset);
# 51 fast batches waited up to 16 ms for a core, 13 slow ones.
BUSY_FAST_MS = [
    0.33, 0.37, 0.37, 0.38, 0.39, 0.4, 0.42, 0.42, 0.44, 0.46, 0.46, 0.48, 0.53, 0.54, 0.55,
    0.6, 0.63, 0.82, 0.85, 0.9, 0.98, 1.13, 1.14, 1.33, 1.34, 1.56, 1.58, 1.59, 1.65, 1.84,
    1.99, 2.17, 2.41, 2.82, 2.98, 3.05, 3.06, 3.22, 3.25, 3.32, 3.34, 3.34, 3.35, 3.82, 3.98,
    4.04, 4.22, 4.28, 7.1, 10.45, 15.58]
BUSY_SLOW_MS = [80.4, 80.46, 80.48, 80.48, 80.52, 80.53, 80.53, 82.21, 82.53, 83.88, 84.13,
                84.14, 84.8]


def test_fast_batches_made_slow_by_a_busy_host_leave_the_period():
    # Otsu's eta of these make times is 0.797: the stall rule's two-group
    # split would refuse them, and the fast batches at 7-16 ms land above
    # the split.  The slow samples' residue still holds most slow-made
    # batches, and every batch on it is slow.
    rng = np.random.default_rng(0)
    ranks = np.arange(4, 68)
    on = ranks % 5 == 2
    assert on.sum() == len(BUSY_SLOW_MS) and (~on).sum() == len(BUSY_FAST_MS)
    make = np.zeros(len(ranks), dtype=np.int64)
    make[on] = np.round(rng.permutation(BUSY_SLOW_MS) * MS)
    make[~on] = np.round(rng.permutation(BUSY_FAST_MS) * MS)
    split = _core.log_otsu(make)
    assert split["eta"] < stall_threshold.BIMODAL_MIN_ETA
    assert stall_threshold.bimodal_split_ns(make) is None
    m = attribution.made_period(ranks, make, 4)
    slow = make > split["threshold_ns"]
    assert m is not None and m["period"] == 5 and m["residue"] == 2
    assert m["slow"] == int(slow.sum()) and m["residue_slow"] == 1.0
    assert m["slow_on_residue"] == pytest.approx(on.sum() / slow.sum())
    assert m["slow_on_residue"] < attribution.ATTR_SHARE    # fast ones above the split
    assert _brute_residues(ranks, slow)[0] == (5, 2)


def test_heavy_tailed_make_times_give_no_period():
    # Lognormal make times with sigma 1: the upper half stands 5x above the
    # lower, a "group", yet at random ranks.
    ranks = np.arange(4, 124)
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        make = np.round(rng.lognormal(np.log(5.0), 1.0, len(ranks)) * MS).astype(np.int64)
        thr = _core.log_otsu(make)["threshold_ns"]
        slow = make > thr
        want = _brute_residues(ranks, slow)
        got = attribution.made_period(ranks, make, 4)
        assert want == [] and got is None, (seed, want, got)


def test_made_period_needs_a_slow_minority_of_enough_batches():
    ranks = np.arange(4, 100)
    # Seven slow batches: under RANK_PERIOD_MIN_STALLS.
    few = _made(ranks, lambda r: (r % 13 == 0))
    assert int(((ranks % 13) == 0).sum()) == 7
    assert attribution.made_period(ranks, few, 4) is None
    # Most batches slow (all but every 5th): the slow ones are no minority.
    most = _made(ranks, lambda r: r % 5 != 0)
    assert attribution.made_period(ranks, most, 4) is None


def _made_attr(stall_ranks, nw, period, made, n=100):
    batches = np.arange(n) % nw
    stall_ranks = np.asarray(stall_ranks)
    return attribution.attribution(stall_ranks, batches[stall_ranks], batches[nw:], nw, period,
                              None, None, made)


def test_the_samples_period_comes_from_the_make_times_before_the_stalls():
    # Every 5th sample slow at 4 workers; prefetch hid every other one, so
    # the stalls recur every 10 (the user trial's runs).
    ranks = np.arange(4, 100)
    made = attribution.made_period(ranks, _made(ranks, lambda r: r % 5 == 0), 4)
    stalls = list(range(10, 100, 10))
    a = _made_attr(stalls, 4, 10, made)
    assert a["label"] == attribution.SLOW_SAMPLE and a["worker"] is None
    assert a["period"] == 5 and a["residue"] == 0 and a["residue_share"] == 1.0
    assert a["period_from"] == attribution.PERIOD_FROM_MAKE_TIMES and a["stall_period"] == 10
    assert a["made"]["slow"] == 19 and a["made"]["batches"] == 96
    # Without the make times the stalls alone name 10 (the old reading).
    old = _made_attr(stalls, 4, 10, None)
    assert old["label"] == attribution.SLOW_SAMPLE and old["period"] == 10
    assert old["period_from"] == attribution.PERIOD_FROM_STALLS and old["made"] is None
    # No period in the stall gaps: the stalled ranks' own period is said.
    a = _made_attr(stalls, 4, None, made)
    assert a["period"] == 5 and a["stall_period"] == attribution.rank_period(np.array(stalls), 4)
    # Stalls that are not on the slow samples (lock-step rounds, rank % 4
    # == 0, 20% of them on rank % 5 == 0): the stalls' reading stands.
    rounds = list(range(4, 100, 4))
    on = np.mean(np.array(rounds) % 5 == 0)
    assert on <= attribution.MADE_STALL_SHARE
    a = _made_attr(rounds, 4, 4, made)
    assert a["label"] == attribution.LOCK_STEP and a["period"] == 4 and a["period_from"] is None


def test_slow_samples_on_one_workers_place_are_not_lock_step():
    # Every 6th sample slow on 2 workers: all on worker 0, so every stall
    # falls on an even fetch and the pre-stated test reads a stall every
    # 2 fetches, num_workers; the make times name the samples' period, 6,
    # and the lock-step reading and its sweep give way to it.
    ranks = np.arange(2, 100)
    made = attribution.made_period(ranks, _made(ranks, lambda r: r % 6 == 2), 2)
    a = _made_attr(list(range(2, 100, 6)), 2, 2, made)
    assert a["label"] == attribution.SLOW_SAMPLE and (a["period"], a["residue"]) == (6, 2)
    assert a["stall_period"] == 2
    items = [("lockstep", {"period": 2, "num_workers": 2}),
             ("vary_workers_then_in_order", {"grid": (2, 1)})]
    s = {"attribution": a, "diagnosis": input_bound.INPUT_BOUND, "steady_steps": 98}
    assert [c for c, _ in advice.evidence_next_steps(s, items)] == ["slow_sample"]


def test_the_words_say_where_the_period_comes_from():
    ranks = np.arange(4, 100)
    made = attribution.made_period(ranks, _made(ranks, lambda r: r % 5 == 0), 4)
    a = _made_attr(list(range(10, 100, 10)), 4, 10, made)
    line = attribution.attribution_line({"attribution": a})
    assert line.startswith(f"attribution: {attribution.SLOW_SAMPLE}, rank % 5 == 0 from the "
                           "workers' make times (19 of 96 batches made slow, 100% of them "
                           "on that residue); the stalls: 100% on it, period 10"), line
    items = [("heavy_tailed", {}), ("period_not_workers", {"period": 10, "num_workers": 4}),
             ("confirm_period", {"period": 10})]
    s = {"attribution": a, "diagnosis": input_bound.INPUT_BOUND, "steady_steps": 96}
    out = advice.evidence_next_steps(s, items)
    # "a slow sample every 10 batches" would send the user to half of them.
    assert [c for c, _ in out] == ["heavy_tailed", "slow_sample"]
    # When the stalls keep the samples' period, the stall-period items stay.
    a5 = _made_attr(list(range(5, 100, 5)), 4, 5, made)
    assert a5["stall_period"] == 5
    out = advice.evidence_next_steps(dict(s, attribution=a5), items)
    assert [c for c, _ in out] == ["heavy_tailed", "period_not_workers", "slow_sample"]
    assert attribution.attribution_line({"attribution": a5}).split(" (stalls")[0].endswith(
        "the stalls: 100% on it, period 5 too")
    # From the stalls alone, the line says so.
    old = _made_attr(list(range(10, 100, 10)), 4, 10, None)
    assert "rank % 10 == 0 from the stalls, in 100% of stalled batches" in \
        attribution.attribution_line({"attribution": old})


def test_a_report_names_the_samples_period_and_keeps_the_stall_cadence():
    import corpus

    # Every 5th sample slow at 4 workers, played out as torch schedules it:
    # the loop stalls every 10 batches, the workers make every 5th slow.
    case = corpus.sim_slow_sample(0, 5, 4, 150.0, 10)
    r = corpus.replay(case)
    slow = case.batches["end_ns"] - case.batches["begin_ns"] > 100 * MS
    assert (case.delivery[0][slow] % 5 == 0).all() and slow.sum() == 20
    assert r["temporal"]["label"] == stall_timing.PERIODIC and r["temporal"]["period"] == 10
    a = r["attribution"]
    assert a["period"] == 5 and a["period_from"] == attribution.PERIOD_FROM_MAKE_TIMES
    # The steady batches (after the 4 start-up ones) made slow: 19.
    assert a["made"]["slow"] == int(slow[4:].sum()) == 19
    assert ("The workers made 19 of 96 batches slow, 100% of them with rank % 5 == 0, and 100% "
            "of the stalls waited on one with rank % 5 == 0 (the batch received, or the one its "
            "worker was making during the wait); the loop stalled on only some of them, every 10 "
            "batches (prefetch made the others in time). Particular samples are slow, one in "
            "5, not a worker; next: time __getitem__ on the indices of those batches with rank % 5 == 0."
            ) in r["next"]
    assert not any("a slow sample every 10 batches" in t for t in r["next"]), r["next"]
    text = str(r)
    assert "PERIODIC every 10 steps" in text
    assert "rank % 5 == 0 from the workers' make times" in text


def test_cpu_ratio_needs_material_ticks():
    assert attribution.cpu_ratio({0: 3, 1: 1, 2: 2}, 0) is None
    assert attribution.cpu_ratio({0: 30, 1: 10, 2: 20}, 0) == pytest.approx(2.0)
    assert attribution.cpu_ratio({0: 30}, 0) is None


def test_next_steps_of_one_worker_point_at_its_shard():
    a = _attr([2 + 4 * r for r in range(10)], 4, 4, {0: 46, 1: 46, 2: 248, 3: 47})
    items = [("heavy_tailed", {}), ("lockstep", {"period": 4, "num_workers": 4}),
             ("vary_workers_then_in_order", {})]
    s = {"attribution": a, "diagnosis": input_bound.INPUT_BOUND, "steady_steps": 36}
    out = advice.evidence_next_steps(s, items)
    assert [c for c, _ in out] == ["heavy_tailed", "one_worker", "split_shards"]
    # A compute-bound loop is not sent to balance shards.
    compute = [("compute_bound", {"share": 0.03})]
    assert advice.evidence_next_steps(dict(s, diagnosis=input_bound.COMPUTE_BOUND),
                                      compute) == compute


@pytest.mark.parametrize("readings,asleep,cores,expected", [
    (51, 51, 0.02, True), (60, 20, 0.02, False), (60, 60, 0.9, False), (0, 0, None, None)])
def test_blocked_needs_sleep_and_little_cpu(readings, asleep, cores, expected):
    assert worker_evidence.awaited_blocked(readings, asleep, cores) is expected
    # Making the awaited batch for at least half the stalls: the same.
    assert worker_evidence.awaited_blocked(readings, asleep, cores, 0.9) is expected
    # A worker whose batch was made already sleeps because it is idle.
    if readings:
        assert worker_evidence.awaited_blocked(readings, asleep, cores, 0.1) is False


def test_handover_reading_needs_large_batches_and_input_waits():
    big = 16 * 3 * 480 * 640 * 4
    assert hand_over.handover(big, input_bound.INPUT_BOUND, False, True) == "handover_main"
    assert hand_over.handover(big, input_bound.BALANCED, True, False) == "handover_bytes"
    assert hand_over.handover(big, input_bound.COMPUTE_BOUND, True, False) is None
    assert hand_over.handover(hand_over.HANDOVER_MIN_BYTES - 1, input_bound.INPUT_BOUND, False, True) is None


# --- real DataLoaders -----------------------------------------------------------------

torch = pytest.importorskip("torch")

import traceml  # noqa: E402 - after importorskip("torch")

from burn import BurnDataset, burn_cpu  # noqa: E402 - after importorskip("torch")

DataLoader = torch.utils.data.DataLoader


@pytest.fixture(autouse=True)
def default_sampler():
    traceml.configure(sampler=True, sampler_period_s=0.02, stuck_after_s=30.0)
    yield
    traceml.configure(sampler=True, sampler_period_s=0.02, stuck_after_s=30.0)


def run(loader, name, pace_s=0.005):
    for _ in traceml.wrap(loader, name=name):
        time.sleep(pace_s)
    return traceml.report(source=name)


class Shards(torch.utils.data.IterableDataset):
    """Each worker yields `n` items; worker `slow` burns (or sleeps) `slow_s`
    per item, the others burn `fast_s`."""

    def __init__(self, n, slow, slow_s, fast_s, sleep=False):
        self.n, self.slow, self.slow_s, self.fast_s, self.sleep = n, slow, slow_s, fast_s, sleep

    def __iter__(self):
        wid = torch.utils.data.get_worker_info().id
        for i in range(self.n):
            if wid == self.slow and self.sleep:
                time.sleep(self.slow_s)
            else:
                burn_cpu(self.slow_s if wid == self.slow else self.fast_s)
            yield torch.tensor([wid, i])


def _independent_stall_workers(r):
    d = r["delivery"]
    return collections.Counter(d["workers"][i] for i in r["stalls"]["steps"])


@pytest.mark.slow
def test_a_slow_shard_is_one_worker_not_lock_step():
    r = run(DataLoader(Shards(30, slow=1, slow_s=0.06, fast_s=0.006), batch_size=None,
                       num_workers=3), "shard")
    a = r["attribution"]
    assert a is not None, str(r)
    counted = _independent_stall_workers(r)
    assert a["stall_workers"] == dict(counted) and a["known"] == sum(counted.values())
    assert a["label"] == attribution.ONE_WORKER and a["worker"] == 1, (a, str(r))
    ticks = r["workers"]["cpu_ticks_by_worker"]
    assert ticks[1] >= attribution.BUSIER_RATIO * np.median([ticks[0], ticks[2]])
    text = str(r)
    assert "look at what worker 1 has that the others do not, not at num_workers" in text
    assert "consistent with the workers finishing their batches together" not in text
    assert "vary num_workers" not in " ".join(r["next"])
    assert f"attribution: {attribution.ONE_WORKER} worker 1" in text


@pytest.mark.slow
def test_a_worker_sleeping_in_its_shard_is_blocked_not_elsewhere():
    r = run(DataLoader(Shards(30, slow=1, slow_s=0.06, fast_s=0.004, sleep=True),
                       batch_size=None, num_workers=3), "sleepy-shard")
    held = r["workers"]["awaited"]
    assert held["blocked"] is True and set(held["workers"]) == {1}, held
    assert held["asleep"] >= worker_evidence.BLOCKED_MIN_SHARE * held["readings"]
    assert held["making_share"] >= worker_evidence.AWAITED_MAKING_MIN_SHARE, held
    text = str(r)
    assert ("The worker holding the awaited batch (worker 1) was blocked during stalls: "
            "sleeping or waiting on I/O, a lock or the network") in text
    assert "the wait lies elsewhere" not in text
    assert r["attribution"]["label"] == attribution.ONE_WORKER, str(r)


class _Sleeps(torch.utils.data.Dataset):
    def __len__(self):
        return 24

    def __getitem__(self, i):
        time.sleep(0.1)
        return torch.tensor([i])


@pytest.mark.slow
def test_workers_sleeping_in_getitem_read_as_blocked():
    r = run(DataLoader(_Sleeps(), batch_size=1, num_workers=2), "sleeps")
    held = r["workers"]["awaited"]
    assert held is not None and held["blocked"] is True, held
    assert held["making_share"] >= worker_evidence.AWAITED_MAKING_MIN_SHARE, held
    assert held["states"].get("S", 0) >= held["readings"] // 2
    assert any("was blocked during stalls" in e for e in r["workers"]["evidence"])
    assert not any("the wait lies elsewhere" in e for e in r["workers"]["evidence"])


class _TwoThreads(torch.utils.data.Dataset):
    """Each item runs two threads burning 50 ms of CPU each."""

    def __len__(self):
        return 24

    def __getitem__(self, i):
        ts = [threading.Thread(target=burn_cpu, args=(0.05,)) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return torch.tensor([i])


@pytest.mark.slow
def test_worker_cpu_counts_every_thread():
    r = run(DataLoader(_TwoThreads(), batch_size=1, num_workers=1), "threads")
    iv = r["workers"]["intervals"]
    total = iv["slow"]["worker_cpu_s"] + iv["fast"]["worker_cpu_s"]
    # 23 steady-state items x 2 threads x 50 ms, at 10 ms tick resolution.
    assert total >= 0.5 * 23 * 0.1, iv
    # The sampler's schedstat sum over the worker's threads holds most of
    # what /proc/PID/stat's ticks (every thread, live or reaped) counted;
    # the leader alone, waiting in join(), would hold almost none.  A
    # thread born and gone between two readings is missed: 87-89% here.
    from traceml import _core
    pid = r["workers"]["pids_by_epoch"][0]["pids"][0]
    rows = _core.sampler_samples()
    rows = rows[rows["pid"] == pid]
    threads = (rows["cpu_ns"][-1] - rows["cpu_ns"][0]) * 1e-9
    ticks = rows["utime_ticks"] + rows["stime_ticks"]
    every = (ticks[-1] - ticks[0]) / os.sysconf("SC_CLK_TCK")
    assert 0.6 * every <= threads <= 1.05 * every + 0.02, (threads, every)
    assert rows["threads"].max() >= 2, rows["threads"]
    assert not any("mostly idle" in e for e in r["workers"]["evidence"]), r["workers"]["evidence"]


IMAGE = (3, 480, 640)


class _Images(torch.utils.data.Dataset):
    """Ready float32 images: __getitem__ costs microseconds."""

    def __init__(self, n):
        self.n = n
        self.img = torch.rand(*IMAGE)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.img


@pytest.mark.slow
def test_large_batches_are_reported_with_their_bytes_and_handover():
    bs = 16
    r = run(DataLoader(_Images(bs * 12), batch_size=bs, num_workers=2), "images", pace_s=0.01)
    b = r["batch_bytes"]
    expected = bs * int(np.prod(IMAGE)) * 4  # float32
    assert b["median"] == expected == 58_982_400 and b["max"] == expected
    assert b["measured"] == 8  # the first 8 batches of the epoch
    assert b["tensors_median"] == 1     # the collated images: one tensor
    assert f"batch bytes: median {expected / 1e6:.1f} MB over 8 measured batches" in str(r)
    if r["diagnosis"] in (input_bound.INPUT_BOUND, input_bound.BALANCED):
        assert b["handover"] in ("handover_main", "handover_bytes")
        assert any("send fewer bytes per batch" in t for t in r["next"]), r["next"]
        assert not any("compare in_order" in t for t in r["next"]), r["next"]


def test_small_batches_carry_their_bytes_without_handover():
    r = run(DataLoader(BurnDataset(20, 0.0), batch_size=2, num_workers=0), "small", pace_s=0)
    assert r["batch_bytes"]["median"] == 2 * 8  # two int64 indices
    assert r["batch_bytes"]["tensors_median"] == 1
    assert r["batch_bytes"]["handover"] is None


class _Fields(torch.utils.data.Dataset):
    """A sample of ``fields`` float32 tensors of 4 values, an int and a
    NumPy array of 3 float64 values: collated, a batch is a dict of
    ``fields`` tensors and a list of two tensors (the ints, the arrays)."""

    def __init__(self, n, fields):
        self.n, self.fields = n, fields

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {**{f"k{j}": torch.zeros(4) for j in range(self.fields)},
                "rest": [i, np.zeros(3)]}


def test_a_batch_of_many_tensors_is_counted_tensor_by_tensor():
    # The count the per-tensor hand-over cost is read by: 20 fields and 2
    # more in a nested list, 22 tensors a batch; the bytes of all of them.
    r = run(DataLoader(_Fields(12, 20), batch_size=2, num_workers=0), "fields", pace_s=0)
    b = r["batch_bytes"]
    assert b["tensors_median"] == 22
    assert b["median"] == 2 * (20 * 4 * 4 + 8 + 3 * 8)
    rank, worker, nbytes, tensors = traceml._core.default_recorder().snapshot_delivery()
    assert (tensors[nbytes >= 0] == 22).all() and (tensors[nbytes < 0] == -1).all()


@pytest.mark.slow
def test_every_third_sample_slow_is_slow_sample():
    # num_workers=0: rank = position, so the stalls sit on rank % 3 == 1.
    ds = BurnDataset(36, 0.001, slow_every=3, slow_index=1, slow_cpu_s=0.05)
    r = run(DataLoader(ds, batch_size=1, num_workers=0), "every3", pace_s=0.002)
    a = r["attribution"]
    assert r["temporal"]["period"] == 3, str(r)
    stalled = [r["delivery"]["ranks"][i] for i in r["stalls"]["steps"]]
    assert all(k % 3 == 1 for k in stalled)
    assert a["label"] == attribution.SLOW_SAMPLE and a["residue"] == 1 and a["period"] == 3
    assert any("share rank % 3 == 1" in t for t in r["next"])


@pytest.mark.slow
def test_every_fifth_sample_slow_at_four_workers_keeps_period_five():
    # The user trial's loader: index % 5 == 0 burns 150 ms, batch 1, 4
    # workers on this 2-core host (at 80 ms a quiet host hid enough slow
    # samples that the rest were outliers, not stalls, in 4 of 8 runs:
    # nothing to attribute).  Prefetch hides some slow samples, so the
    # stalls recur every 10 in some runs (5 in others); the workers' make
    # times see every one.  Measured here: this test passed 20 of 20 runs
    # (10 beside a CPU hog); over 114 runs at 80-150 ms that stalled, quiet
    # or beside one or two hogs, the period from the make times was 5 in
    # all, while the stalls recurred every 10 (what the stalls alone named)
    # in 24 of the 40 whose cadence was printed.
    ds = BurnDataset(100, 0.0, slow_every=5, slow_index=0, slow_cpu_s=0.15)
    r = run(DataLoader(ds, batch_size=1, num_workers=4), "every5-4w", pace_s=0.01)
    assert r["production"]["available"], r["production"]
    a = r["attribution"]
    assert a is not None and a["label"] == attribution.SLOW_SAMPLE, str(r)
    assert a["period"] == 5 and a["residue"] == 0, a
    assert a["period_from"] == attribution.PERIOD_FROM_MAKE_TIMES, a
    # Every steady slow sample (ranks 5, 10, ..., 95 after 4 start-up
    # batches) was made slow; a fast batch can be too, when a hog or
    # another worker preempts it (20 made slow in 2 of 18 runs at 80 ms
    # beside a hog, before this check allowed it): it is off the residue.
    made = a["made"]
    assert made["batches"] == 96 and made["residue_slow"] == 1.0, a
    assert round(made["slow_on_residue"] * made["slow"]) == len(range(5, 100, 5)), a
    stalled = np.asarray(r["delivery"]["ranks"])[r["stalls"]["steps"]]
    assert a["residue_share"] == pytest.approx(np.mean(stalled % 5 == 0))
    tmp = r["temporal"]
    if tmp["label"] == stall_timing.PERIODIC:
        assert a["stall_period"] == tmp["period"], (a, tmp)
    # The per-sample timing found the index stride itself: the next step
    # times those indices (else the residue's batches).
    stride = (r["production"]["samples"].get("slow") or {}).get("stride")
    want = ("time __getitem__ on index % 5 == 0" if stride == 5 else
            "time __getitem__ on the indices of those batches with rank % 5 == 0")
    assert any(want in t for t in r["next"]), r["next"]


def test_worker_keyed_maps_keep_int_keys_through_save_and_load(tmp_path):
    from support import INFO, MS, build, records

    r = build(records(np.full(12, MS), np.full(12, MS)), INFO, 65000, None)
    r.summary["attribution"] = {"label": attribution.ONE_WORKER, "worker": 2,
                                "stall_workers": {2: 7, 10: 1}, "known": 8}
    # With the keys the text report reads, so that the run file's schema
    # admits it (traceml/run_schema.json).
    r.summary["workers"] = {"cpu_ticks_by_worker": {0: 40, 2: 210},
                            "awaited": {"workers": {2: 7}},
                            "pid_changes": [], "pids_by_epoch": [], "exited": [],
                            "sampler": {"samples": 0, "cpu_share": None, "period_s": None,
                                        "enabled": False}}
    loaded = traceml.load(r.save(tmp_path / "w.traceml"))
    assert str(loaded) == str(r)
    assert loaded["attribution"]["stall_workers"] == {2: 7, 10: 1}
    assert loaded["workers"]["cpu_ticks_by_worker"] == {0: 40, 2: 210}
    assert loaded["workers"]["awaited"]["workers"] == {2: 7}
    assert loaded.to_dict() == r.to_dict()


class _FivesBatchSampler:
    """Index lists of 4, 4, 4, 4 and 32 in turn."""

    def __iter__(self):
        i = k = 0
        while True:
            size = (4, 4, 4, 4, 32)[k % 5]
            yield list(range(i, i + size))
            i, k = i + size, k + 1

    def __len__(self):
        return 10 ** 4


@pytest.mark.slow
def test_large_batches_at_no_workers_are_read_by_their_size():
    # Helper 37A: every sample burns the same 1 ms; every 5th batch holds
    # 8x the samples.  At num_workers=0 no worker times a batch: the
    # sampler's index lists give each fetch's size, and the stalls are
    # slow by their size (LARGE-BATCH), not particular samples (5 of 5
    # runs read SLOW-SAMPLE before).
    wrapped = traceml.wrap(DataLoader(BurnDataset(10 ** 5, 0.001),
                                      batch_sampler=_FivesBatchSampler(), num_workers=0),
                           name="fives")
    for k, _ in enumerate(wrapped):
        time.sleep(0.005)
        if k == 47:
            break
    r = traceml.report(source="fives")
    a = r["attribution"]
    assert a["label"] == attribution.LARGE_BATCH, str(r)
    assert a["made"]["sizes"] == [32.0, 4.0]
    (f,) = attribution.advise(r.to_dict())
    said = attribution.WORDS[f.code](f.numbers)
    assert "The main process (num_workers=0) made" in said and "even batch sizes" in said
