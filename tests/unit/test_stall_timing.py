"""The stall-timing family: the pre-stated cadence test and its three
answers, checked against counts made by enumeration, not by the rule."""

import itertools
import math

import numpy as np
import pytest

import corpus
from traceml.findings import stall_timing


def _steady_test(stall_positions, n_steps, period, startup=None):
    """predicted_cadence over one epoch of ``n_steps`` fetches whose first
    ``startup`` (default: ``period``) are start-up, stalls at the given
    positions."""
    startup = period if startup is None else startup
    position = np.arange(n_steps)
    stalled = np.isin(position, stall_positions)
    return stall_timing.predicted_cadence(stalled, position, period, position >= startup)


def _enumerated_tail(n_steps, startup, period, k, j):
    """P(at least j of k random steady stalls on the residue), by listing
    every placement."""
    steady = range(startup, n_steps)
    hits = total = 0
    for chosen in itertools.combinations(steady, k):
        total += 1
        hits += sum(p % period == 0 for p in chosen) >= j
    return hits / total


def test_the_seeds_four_worker_run_concludes_at_its_own_size():
    # 16 steps, stalls at 0, 4, 8, 12: steady fetches 4..15, 3 of 3 stalls
    # on the 3 residue fetches: 1 placement in C(12, 3) = 220.
    t = _steady_test([0, 4, 8, 12], 16, 4)
    assert (t["fetches"], t["slots"], t["stalls"], t["on_residue"]) == (12, 3, 3, 3)
    assert t["p_value"] == pytest.approx(1 / math.comb(12, 3))
    assert t["p_value"] == pytest.approx(_enumerated_tail(16, 4, 4, 3, 3))
    assert t["periodic"] and t["p_value"] < stall_timing.PERIOD_ALPHA


@pytest.mark.parametrize("stalls,j", [([4, 8, 13], 2), ([5, 8, 12, 14], 2), ([4, 9], 1)])
def test_the_p_value_is_the_enumerated_chance(stalls, j):
    t = _steady_test(stalls, 16, 4)
    assert t["on_residue"] == j
    assert t["p_value"] == pytest.approx(_enumerated_tail(16, 4, 4, len(stalls), j))
    assert not t["periodic"]


def test_random_stalls_claim_the_cadence_no_more_often_than_the_p_value_allows():
    rng = np.random.default_rng(3)
    runs, claims = 4000, 0
    for _ in range(runs):
        chosen = rng.choice(np.arange(4, 40), size=6, replace=False)
        claims += _steady_test(chosen, 40, 4)["periodic"]
    # At most PERIOD_ALPHA in expectation; 3 binomial sigmas of slack.
    alpha = stall_timing.PERIOD_ALPHA
    assert claims / runs <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / runs)


def test_the_least_period_is_claimed():
    # A stall every 2 fetches fills the residue mod 4 too: not "every 4".
    every2 = _steady_test(list(range(0, 64, 2)), 64, 4)
    assert every2["p_value"] < stall_timing.PERIOD_ALPHA and not every2["periodic"]
    # Rounds whose workers finish in pairs (0 and 1 mod 4) keep period 4.
    pairs = _steady_test([p for p in range(4, 64) if p % 4 in (0, 1)], 64, 4)
    assert pairs["periodic"]
    # Stalls every other round sit on the residue: that is period 8.
    every8 = _steady_test(list(range(0, 64, 8)), 64, 4)
    assert not every8["periodic"] and not every8["consistent"]


def test_too_few_stalls_are_not_yet_with_the_steps_that_would_settle_it():
    # 12 steps at 4 workers: 2 of 2 steady stalls on the 2 residue fetches
    # among 8, p = 1/28: consistent, not settled.  The same lock-step run
    # went on settles it within about the steps predicted: the test itself
    # over the longer series, not the model's arithmetic.
    t = _steady_test([0, 4, 8], 12, 4)
    assert t["consistent"] and not t["periodic"]
    more = stall_timing.predicted_settle_steps(t)
    settled = next(m for m in range(12, 200)
                   if _steady_test(list(range(0, m, 4)), m, 4)["periodic"])
    assert 12 + more == settled, (more, settled)


def test_the_steps_that_settle_a_cadence_are_counted_from_the_run_itself():
    # Every 5th fetch stalls at num_workers=5 (helper 35A): 16 steps read
    # "about 9 more steps would settle it" (p = 0.012) where 17 concluded
    # (p = 0.0091), since the residue's fetches were counted as m // 5 of
    # the tested ones, 2 of the 3 there are at 12.  With a rank test beside
    # it (waits known), as a wrapped loader has.
    def test(period, m):
        position = np.arange(m)
        wait = np.where(position % period == 0, 60e6, 1e5)
        return stall_timing.predicted_cadence(position % period == 0, position, period,
                                              position >= period, wait)

    for period, steps in ((5, 16), (6, 16), (6, 18), (3, 9), (4, 12), (7, 20), (8, 20)):
        t = test(period, steps)
        assert not t["periodic"]
        settled = next(m for m in range(steps, 200) if test(period, m)["periodic"])
        more = stall_timing.predicted_settle_steps(t)
        # The run's last position says where its next residue fetch falls.
        assert steps + more == settled, (period, steps, more, settled)
        # Without it, one in `period` of the later fetches: about.
        t.pop("last_position")
        more = stall_timing.predicted_settle_steps(t)
        assert abs((steps + more) - settled) < period, (period, steps, more, settled)


def test_two_stalls_are_consistent_only_where_they_fill_the_residue():
    # 16 steps at 4 workers, 12 steady: the residue holds fetches 4, 8 and
    # 12.  Two random stalls on 2 of those 3 are not "consistent" (fewer
    # stalls than a claim needs, and the residue not filled): TOO-FEW's
    # territory.  Three of three are consistent and more.
    t = _steady_test([4, 12], 16, 4)
    assert t["stalls"] == 2 and t["on_residue"] == 2 and t["slots"] == 3
    assert t["every"] and not t["consistent"]
    assert _steady_test([4, 8, 12], 16, 4)["consistent"]


def test_unsettled_hands_the_lead_to_measured_slow_samples():
    from traceml.findings import advice

    p = {"period": 4, "predicted": True, "num_workers": 4, "stalls": 3, "steps": 12,
         "p_value": 0.036, "tested_stalls": 3, "settle_steps": 6, "phase_filled": True,
         "modal_share": None, "bursts": False, "grid": (4, 3, 2, 1)}
    assert "Next: vary num_workers" in advice.WORDS["unsettled"](p)
    said = advice.WORDS["unsettled"]({**p, "slow_samples": True})
    assert "Next:" not in said and said.endswith("they, not a period, are the measured lead.")
    gaps = advice.WORDS["unsettled"]({**p, "phase_filled": False, "modal_share": 0.67,
                                      "slow_samples": True})
    assert "Next:" not in gaps


def _continued(gaps, first, n):
    """A stall mask of n steps: the first stall at ``first``, then the
    gaps repeated."""
    mask, at, i = np.zeros(n, dtype=bool), first, 0
    while at < n:
        mask[at] = True
        at += gaps[i % len(gaps)]
        i += 1
    return mask


def test_steps_to_settle_keep_the_runs_own_mix_of_gaps():
    # Gaps 5, 10, 10 in 44 steps: consistent with a stall every 10, not
    # yet.  Counting every later gap as 10 promised "about 1 more step";
    # at the run's own mix it takes more than half its length again, and
    # a run that goes on with that mix does settle by then.
    n = 44
    mask = _continued([5, 10, 10], 3, 29)
    mask = np.r_[mask, np.zeros(n - 29, dtype=bool)]
    wait = np.where(mask, 50_000_000, 1_000_000).astype(np.int64)
    t = stall_timing.temporal_of(mask, np.zeros(n, dtype=np.int32), wait)
    assert (t["label"], t["consistent_period"]) == (stall_timing.UNSETTLED, 10)
    more = t["settle_steps"]
    assert more >= n // 2, more
    m = n + more + 10
    longer = _continued([5, 10, 10], 3, m)
    lw = np.where(longer, 50_000_000, 1_000_000).astype(np.int64)
    got = stall_timing.temporal_of(longer, np.zeros(m, dtype=np.int32), lw)
    assert (got["label"], got["period"]) == (stall_timing.PERIODIC, 10), got["p_value"]


def test_not_yet_quotes_the_test_that_found_the_period():
    # 2 workers, stalls at 3, 5, 7, 9, 10, 13, 14 of 16 (two held out as
    # start-up): the gaps fit a stall every 2 fetches, the predicted
    # residue (0 mod 2) holds 2 of 7.  The sentence quotes the gap test's
    # p, not the predicted test's, and does not call 2 the predicted
    # period's finding.
    pos = np.arange(16)
    tested = pos >= 2
    stalled = np.isin(pos, [3, 5, 7, 9, 10, 13, 14])
    wait = np.where(stalled, 50_000_000, 1_000_000).astype(np.int64)
    pred = stall_timing.predicted_cadence(stalled, pos, 2, tested, wait[tested])
    assert not pred["consistent"] and pred["p_value"] == 1.0
    t = stall_timing.temporal_of(stalled[tested], np.zeros(14, dtype=np.int32), wait[tested],
                                 predicted=pred,
                                 positions=stall_timing.Positions(stalled, pos, tested,
                                                                  wait[tested]))
    assert (t["label"], t["consistent_period"]) == (stall_timing.UNSETTLED, 2)
    text = stall_timing.unsettled_part(t)
    assert f"p = {t['p_value']:.2g}," in text and "p = 1," not in text
    assert "num_workers predicts" not in text


def test_the_seed_table_reads_in_the_report():
    """The seed's rows at 16 steps, as the report says them: PERIODIC 4
    and 2 from the pre-stated test, EVERY-FETCH at 1 and 0 workers; and
    the label, the gap histogram and the sentence agree."""
    def steady(nw):
        k = corpus.startup(nw)
        wait = np.full(16 - k, 0.2)
        period = max(1, nw)
        wait[[i for i in range(16 - k) if (i + k) % period == 0]] = 80.0
        return wait

    for nw, label, period in ((4, "PERIODIC", 4), (2, "PERIODIC", 2),
                              (1, "EVERY-FETCH", None), (0, "EVERY-FETCH", None)):
        r = corpus.replay(corpus.make(f"seed-{nw}", steady(nw), {}, num_workers=nw))
        t = r["temporal"]
        assert (t["label"], t["period"]) == (label, period), nw
        if period:
            assert t["tested"] == "predicted"
            assert {g for g, _ in r["stalls"]["gap_histogram"]} == {period}
            text = str(r)
            assert f"PERIODIC every {period} steps" in text
            assert "no regular period" not in text


def test_three_bursts_are_not_yet_a_period_never_irregular():
    # 5 back-to-back stalls every 40 steps, 3 bursts: the per-stall gaps
    # are 1 (12 times) and 36 (twice); the bursts' gaps 40, 40.
    n = 130
    mask = np.zeros(n, dtype=bool)
    for start in (10, 50, 90):
        mask[start:start + 5] = True
    wait = np.where(mask, 40_000_000, 100_000).astype(np.int64)
    epoch = np.zeros(n, dtype=np.int32)
    t = stall_timing.temporal_of(mask, epoch, wait)
    assert t["label"] == stall_timing.UNSETTLED
    assert (t["counted"], t["consistent_period"]) == ("bursts", 40)
    assert t["burst_gap_histogram"] == [[40, 2]]
    assert t["settle_steps"] is not None and t["settle_steps"] > 0
    # The words name the bursts' period and the gaps they rest on.
    s = {"shape": "HEAVY-TAILED", "temporal": t, "trend": None,
         "stalls": {"count": 15}, "concentration": {}}
    assert "a burst of stalls every 40 fetches" in stall_timing.shape_line(s)
    # Run on at the same rates past the steps it named: the period holds.
    m = n + t["settle_steps"] + 40
    mask = np.zeros(m, dtype=bool)
    for start in range(10, m - 5, 40):
        mask[start:start + 5] = True
    wait = np.where(mask, 40_000_000, 100_000).astype(np.int64)
    longer = stall_timing.temporal_of(mask, np.zeros(m, dtype=np.int32), wait)
    assert (longer["label"], longer["period"]) == (stall_timing.PERIODIC, 40)


def test_two_bursts_are_too_few_bursts():
    n = 100
    mask = np.zeros(n, dtype=bool)
    mask[10:15] = mask[60:65] = True
    wait = np.where(mask, 40_000_000, 100_000).astype(np.int64)
    t = stall_timing.temporal_of(mask, np.zeros(n, dtype=np.int32), wait)
    assert (t["label"], t["counted"]) == (stall_timing.TOO_FEW, "bursts")


def test_a_burst_is_placed_at_a_dominant_wait_else_at_its_first_stall():
    epoch = np.zeros(12, dtype=np.int32)
    mask = np.zeros(12, dtype=bool)
    # One worker's GIL hand-over: 55 ms on the batch before the slow one,
    # 156 ms on the slow one (74% of the run): the run stands at the slow.
    mask[[3, 4]] = True
    # A burst of equal slow samples: no wait holds half: its first stall.
    mask[[7, 8, 9]] = True
    waits = np.array([55, 156, 40, 41, 39]) * 1_000_000
    got = stall_timing.burst_anchors(mask, epoch, waits)
    assert np.flatnonzero(got).tolist() == [4, 7]
    # Without the waits, every run stands at its first stall.
    assert np.flatnonzero(stall_timing.burst_anchors(mask, epoch)).tolist() == [3, 7]
    # A round's pair (100 ms then 50): the first is the longest.
    pair = np.zeros(12, dtype=bool)
    pair[[0, 1]] = True
    assert np.flatnonzero(stall_timing.burst_anchors(
        pair, epoch, np.array([100, 50]) * 1_000_000)).tolist() == [0]
    # Two equal slow fetches (50.2 ms and 50.9 ms): the longer holds half
    # by noise alone, not a cause: the run stands at its first stall.
    assert np.flatnonzero(stall_timing.burst_anchors(
        pair, epoch, np.array([50_200, 50_900]) * 1_000)).tolist() == [0]


def _anchors_by_walking(mask, epoch, waits):
    """burst_anchors by a walk over the steps: each run of back-to-back
    stalls in one epoch, its first longest wait if that is at least twice
    the rest of the run's wait, else its first stall."""
    out, k, i, n = [], 0, 0, len(mask)
    while i < n:
        if not mask[i]:
            i += 1
            continue
        j = i
        while j + 1 < n and mask[j + 1] and epoch[j + 1] == epoch[i]:
            j += 1
        w = [int(x) for x in waits[k:k + j - i + 1]]
        top = w.index(max(w))
        out.append(i + top if max(w) >= 2 * (sum(w) - max(w)) else i)
        k += j - i + 1
        i = j + 1
    return out


@pytest.mark.parametrize("seed", range(5))
def test_burst_anchors_agree_with_a_walk_over_the_steps(seed):
    rng = np.random.default_rng(seed)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        mask = rng.random(n) < rng.random()
        epoch = np.sort(rng.integers(0, 3, n)).astype(np.int32)
        # Few distinct values, so ties and exact halves occur.
        waits = rng.integers(1, 4, int(mask.sum())) * rng.choice([1, 3], int(mask.sum()))
        got = np.flatnonzero(stall_timing.burst_anchors(mask, epoch, waits)).tolist()
        assert got == _anchors_by_walking(mask, epoch, waits), (mask, epoch, waits)


def test_bursts_of_the_hand_over_keep_their_period():
    # Slow batches at 5, 15, 25, 35; the fetch before two of them stalls
    # too.  By first stalls the bursts' gaps read 9, 11, 9; placed at their
    # longest waits, 10, 10, 10.
    n = 40
    mask = np.zeros(n, dtype=bool)
    mask[[5, 14, 15, 25, 34, 35]] = True
    wait = np.full(n, 10_000_000, dtype=np.int64)
    wait[[5, 15, 25, 35]] = 156_000_000
    wait[[14, 34]] = 60_000_000
    epoch = np.zeros(n, dtype=np.int32)
    t = stall_timing.temporal_of(mask, epoch, wait, stall_wait_ns=wait[mask])
    assert t["counted"] == "bursts" and t["burst_gap_histogram"] == [[10, 3]]
    assert (t.get("period") or t.get("consistent_period")) == 10


def test_the_predicted_cadence_also_ranks_the_waits():
    # Two workers on one core, 12 steady fetches: the residue's waits are
    # the long ones, but a stall line caught only 3 of them.
    position = np.arange(14)
    tested = position >= 2
    wait = np.array([300, 1, 250, 60, 120, 6, 210, 24, 110, 0.4, 140, 80, 170, 10]) * 1e6
    stalled = np.isin(position, [2, 6, 12])
    got = stall_timing.predicted_cadence(stalled, position, 2, tested, wait)
    # The rank test by enumeration: of every way to choose which 6 of the 12
    # steady waits are the residue's, the share whose rank sum is at least
    # the observed one.
    w = wait[tested]
    ranks = np.argsort(np.argsort(w)) + 1
    on = (position[tested] % 2) == 0
    observed = ranks[on].sum()
    sums = [ranks[list(c)].sum() for c in itertools.combinations(range(12), 6)]
    rank_p = np.mean(np.array(sums) >= observed)
    assert got["rank_p_value"] == pytest.approx(rank_p)
    hyper_p = _enumerated_tail(14, 2, 2, 3, 3)
    assert got["hypergeom_p_value"] == pytest.approx(hyper_p)
    assert got["p_value"] == pytest.approx(min(1.0, 2 * min(rank_p, hyper_p)))
    assert rank_p == pytest.approx(1 / 924) and got["p_value"] < stall_timing.PERIOD_ALPHA
    # 3 of the residue's 6 fetches past the line: not most of them, so no
    # "stall every 2 fetches" is claimed, however small p is.
    assert not got["periodic"] and 3 <= stall_timing.PERIOD_MIN_SHARE * 6
    # Five of the six long waits past the line: periodic on the ranks, where
    # the placement alone (p = 6/792 * 2 > 0.01) would not say so.
    five = np.isin(position, [2, 4, 6, 10, 12])
    got = stall_timing.predicted_cadence(five, position, 2, tested, wait)
    assert 2 * got["hypergeom_p_value"] >= stall_timing.PERIOD_ALPHA
    assert got["periodic"] and got["p_value"] == pytest.approx(2 / 924)
    # Waits with no cadence: the rank test finds none.
    flat = stall_timing.predicted_cadence(stalled, position, 2, tested, wait[::-1])
    assert flat["rank_p_value"] > 0.5


def test_the_rank_test_reads_the_first_fetches_only(monkeypatch):
    # 80 steady fetches at period 2: the first 12 carry the opposite
    # cadence (the residue's waits short), the rest a clear one.  Capped at
    # 12 fetches, the rank test sees the first ones alone.
    position = np.arange(80)
    tested = np.ones(80, dtype=bool)
    wait = np.where(position % 2 == 0, 100.0, 1.0) + position * 1e-3
    wait[:12] = np.where(position[:12] % 2 == 0, 1.0, 100.0)
    stalled = np.zeros(80, dtype=bool)
    whole = stall_timing.predicted_cadence(stalled, position, 2, tested, wait)
    monkeypatch.setattr(stall_timing, "RANK_MAX_FETCHES", 12)
    first = stall_timing.predicted_cadence(stalled, position, 2, tested, wait)
    assert whole["rank_p_value"] < 0.01 < 0.99 < first["rank_p_value"]
    # The waits of the first 12 steps only (build passes a prefix): the same.
    monkeypatch.undo()
    prefix = stall_timing.predicted_cadence(stalled, position, 2, tested, wait[:12])
    assert prefix["rank_p_value"] == first["rank_p_value"]
    assert prefix["fetches"] == whole["fetches"] == 80


def test_the_search_pays_for_every_period_and_phase_it_could_test():
    # n tested fetches: periods 2..n // 3, each with its P phases.
    for n in (5, 6, 9, 24, 61, 200):
        pairs = sum(p for p in range(2, n // stall_timing.PREDICTED_MIN_STALLS + 1))
        assert stall_timing.search_tests(n) == pairs


def _spilled(seed, n=60, every=3, spill=0.7):
    """Waits (ns) of n fetches: every ``every``-th (position 1 mod every)
    slow, and with probability ``spill`` its wait split with a neighbour;
    the stall line at 20 ms."""
    rng = np.random.default_rng(seed)
    wait = rng.uniform(0.1, 0.3, n) * 1e6
    for i in range(1, n, every):
        j = i + rng.choice((-1, 1))
        if rng.random() < spill and 0 <= j < n:
            wait[[i, j]] = rng.uniform(40, 110, 2) * 1e6
        else:
            wait[i] = 80e6
    return wait.astype(np.int64)


def _tail_by_counting(j, n, slots, k):
    """P(at least j of k random stalls among n fetches on ``slots`` of
    them), by counting placements."""
    return sum(math.comb(slots, i) * math.comb(n - slots, k - i)
               for i in range(j, min(slots, k) + 1)) / math.comb(n, k)


def test_a_searched_period_is_found_by_position_when_the_gaps_blur():
    from scipy.stats import mannwhitneyu

    wait = _spilled(1)
    n = len(wait)
    position, tested = np.arange(n), np.arange(n) >= 1
    stalled = (wait > 20e6) & tested
    got = stall_timing.searched_cadence(stalled, position, tested, wait, [2, 3])
    assert (got["period"], got["phase"], got["periodic"]) == (3, 1, True)
    # Its p-value: the residue's placement and rank tests, the smaller
    # doubled, times every (period, phase) pair of the search.
    on = (position % 3 == 1) & tested
    k, j, slots = int(stalled.sum()), int((stalled & on).sum()), int(on.sum())
    hyper = _tail_by_counting(j, int(tested.sum()), slots, k)
    rank = mannwhitneyu(wait[on], wait[tested & ~on], alternative="greater",
                        method="exact").pvalue
    tests = stall_timing.search_tests(int(tested.sum()))
    assert got["p_value"] == pytest.approx(min(1.0, tests * 2 * min(hyper, rank)))
    # The gaps alone see no period here; the answer by position does, and
    # the words say where the stalls sit.
    epoch = np.zeros(n, dtype=np.int32)
    mask = stalled
    gaps_only = stall_timing.temporal_of(mask, epoch, wait[tested], stall_wait_ns=wait[mask])
    assert gaps_only["label"] != stall_timing.PERIODIC
    t = stall_timing.temporal_of(mask, epoch, wait[tested], stall_wait_ns=wait[mask],
                                 positions=stall_timing.Positions(mask, position, tested, wait))
    assert (t["label"], t["period"], t["counted"]) == (stall_timing.PERIODIC, 3, "position")
    line = stall_timing.shape_line({"shape": "HEAVY-TAILED", "temporal": t, "trend": None,
                                    "stalls": {"count": k}, "concentration": {}})
    assert f"{j} of the {slots} fetches at 1, 4, 7, ... of each epoch stalled" in line


def test_a_searched_period_short_of_evidence_is_not_yet():
    # 8 stalls on 1 mod 3 among 24 fetches, one off it: p = 1.3e-5 as a
    # pre-stated test, times 35 pairs and the two tests' doubling under
    # 0.01; shorter, 5 on the residue among 15 and the price (14 pairs)
    # leaves it "not yet", with the steps that would settle it.
    def case(n, on):
        position, tested = np.arange(n), np.ones(n, dtype=bool)
        stalled = np.isin(position, on)
        return stall_timing.searched_cadence(stalled, position, tested, None, [3])

    long = case(24, [1, 4, 7, 10, 13, 16, 19, 22, 12])
    assert long["periodic"]
    short = case(15, [1, 4, 7, 10, 13, 6])
    assert not short["periodic"] and short["consistent"]
    single = _tail_by_counting(5, 15, 5, 6)
    assert short["single_p_value"] == pytest.approx(single) and single < 0.01
    assert short["p_value"] == pytest.approx(min(1.0, single * stall_timing.search_tests(15)))
    more = stall_timing.predicted_settle_steps(short)
    assert more is not None and more > 0


def test_unsettled_says_why_when_the_p_value_is_under_alpha():
    """A p-value under PERIOD_ALPHA with fewer stalls than a period is
    claimed on reads as that, never "p = 0.0091, not under 0.01"."""
    tmp = {"label": stall_timing.UNSETTLED, "consistent_period": 4, "counted": "position",
           "settle_steps": 6, "p_value": 0.2,
           "predicted": {"period": 4, "consistent": True, "p_value": 0.0091, "stalls": 2}}
    said = stall_timing.unsettled_part(tmp)
    assert "not under" not in said
    assert f"from 2 stalls: fewer than the {stall_timing.PREDICTED_MIN_STALLS}" in said
    tmp["predicted"]["p_value"] = 0.03
    assert "(p = 0.03, not under 0.01)" in stall_timing.unsettled_part(tmp)


def test_irregular_needs_gaps_that_could_have_shown_a_period():
    """Two gaps (3 and 4) among 3 stalls in 16 steps: even two equal gaps
    would not reach PERIOD_ALPHA there, so they are no evidence against a
    period (TOO-FEW); distinct gaps among many stalls in a long run are."""
    def label(stall_steps, n):
        mask = np.zeros(n, dtype=bool)
        mask[stall_steps] = True
        wait = np.where(mask, 50_000_000, 100_000).astype(np.int64)
        return stall_timing.temporal_of(mask, np.zeros(n, dtype=np.int32), wait)["label"]

    assert not stall_timing._gaps_could_show_a_period(2, 3, 16, False)
    assert label([4, 7, 11], 16) == stall_timing.TOO_FEW
    gaps = [3, 5, 2, 7, 4, 9, 6, 8, 11, 10, 13, 12]
    assert stall_timing._gaps_could_show_a_period(len(gaps), len(gaps) + 1, 120, False)
    assert label(np.cumsum([1] + gaps), 120) == stall_timing.IRREGULAR


def _one_epoch(n, at, stall_ns, calm_ns, period=None, positions=True):
    """temporal_of over ``n`` steady fetches of one epoch, the fetches
    ``at`` stalled (waits of ``stall_ns``, the rest ``calm_ns``), with
    their positions 0..n-1 unless ``positions`` is False; ``period``: the
    period num_workers predicts (its residue test handed in), or None.
    Returns (the answer, the predicted test or None)."""
    stalled = np.zeros(n, dtype=bool)
    stalled[at] = True
    wait = np.where(stalled, stall_ns, calm_ns).astype(np.int64)
    tested = np.ones(n, dtype=bool)
    pred = (None if period is None else
            stall_timing.predicted_cadence(stalled, np.arange(n), period, tested, wait))
    pos = stall_timing.Positions(stalled, np.arange(n), tested, wait) if positions else None
    return stall_timing.temporal_of(stalled, np.zeros(n, dtype=np.int32), wait, n, False, pred,
                                    positions=pos), pred


def test_stalls_a_gap_apart_in_one_stretch_are_not_a_cadence_to_settle():
    # 45 steady fetches of one epoch, 3 workers in lock-step only inside one
    # slow stretch: stalls at 13, 16 and 19, nowhere else.  Their gaps (3, 3)
    # fit "a stall every 3", but that residue's other 12 fetches did not
    # stall: not UNSETTLED ("more steps would settle it"), too few.
    got, _ = _one_epoch(45, [13, 16, 19], 800_000_000, 1_000_000)
    assert got["label"] == stall_timing.TOO_FEW, got
    # The same gaps spread over the run (every 3rd fetch from 13 on, 11
    # stalls, two of them under the line): the residue fills, and the
    # answer is a period or not yet, never too few.
    at = [i for i in range(13, 45, 3) if i not in (22, 31)]
    got, _ = _one_epoch(45, at, 800_000_000, 1_000_000)
    assert got["label"] in (stall_timing.PERIODIC, stall_timing.UNSETTLED), got


def _cadence_line(temporal: dict, period: int) -> str:
    s = {"stalls": {"count": 9, "threshold_s": 0.01, "rule": "auto", "gaps": 8,
                    "gap_histogram": [[2, 5], [5, 1]]},
         "steady_steps": 40, "temporal": temporal,
         "cadence": {"period": period, "num_workers": 5, "matches_num_workers": True,
                     "multiple_fraction": 0.09}}
    return next(x for x in stall_timing.stall_lines(s) if x.startswith("cadence:"))


def test_a_predicted_period_whose_modal_gap_differs_is_said_by_position():
    # The residue test at num_workers=5 found the period; the commonest gap
    # is 2 (stalls split in two by the threshold): not "(modal gap)".
    tmp = {"label": "PERIODIC", "counted": "stalls", "tested": "predicted", "modal_gap": 2}
    assert _cadence_line(tmp, 5).startswith(
        "cadence: a stall every 5 steps (by position in the epoch)")
    tmp["modal_gap"] = 5
    assert _cadence_line(tmp, 5).startswith("cadence: a stall every 5 steps (modal gap)")


def test_a_period_found_by_position_quotes_its_residue_not_the_gaps():
    # Stalls at position 0 mod 6 in 5 of 6 rounds, and a spilled neighbour
    # (position 1) in each: the gaps read 1 and 5, none a multiple of 6,
    # while the residue test found the period.  The line gives the
    # residue's count, never "0% of gaps are multiples of 6".
    n = 36
    stalled = np.zeros(n, dtype=bool)
    stalled[[0, 1, 6, 7, 12, 13, 18, 19, 30, 31]] = True
    pred = stall_timing.predicted_cadence(stalled, np.arange(n), 6, np.ones(n, dtype=bool))
    assert (pred["on_residue"], pred["stalls"], pred["phase"]) == (5, 10, 0)
    tmp = {"label": "PERIODIC", "counted": "stalls", "tested": "predicted", "modal_gap": 1,
           "predicted": pred}
    s = {"stalls": {"count": 10, "threshold_s": 0.01, "rule": "auto", "gaps": 9,
                    "gap_histogram": [[1, 5], [5, 3], [11, 1]]},
         "steady_steps": n, "temporal": tmp,
         "cadence": stall_timing.cadence(np.diff(np.flatnonzero(stalled)), 6, 6)}
    line = next(x for x in stall_timing.stall_lines(s) if x.startswith("cadence:"))
    assert s["cadence"]["multiple_fraction"] == 0.0
    assert line == ("cadence: a stall every 6 steps (by position in the epoch); num_workers=6: "
                    "the period equals num_workers (5 of the 10 stalls at position 0 mod 6 "
                    "of the epoch)")


def test_even_spacing_is_the_chance_of_an_arithmetic_progression():
    # Counted by enumerating every placement of k positions among n.
    import itertools

    for n, k in ((12, 3), (12, 4), (15, 5)):
        even = sum(len({b - a for a, b in zip(c, c[1:])}) == 1
                   for c in itertools.combinations(range(n), k))
        gap, p = stall_timing.even_spacing(list(range(0, k)), n)
        assert gap == 1 and p == pytest.approx(even / math.comb(n, k))
    assert stall_timing.even_spacing([0, 5, 10, 15], 40) == (5, pytest.approx(247 / 91390))
    assert stall_timing.even_spacing([0, 5, 11], 40) is None
    assert stall_timing.even_spacing([0, 5], 40) is None


def test_outliers_that_recur_evenly_are_said_to_recur():
    from traceml.findings import advice

    p = {"count": 8, "max_s": 0.0031, "cost_share": 0.045, "median_s": 0.00057}
    assert "Record longer" in advice.WORDS["outliers"]({**p, "every": None})
    said = advice.WORDS["outliers"]({**p, "every": 5, "p_value": 1e-6})
    assert "they recur every 5 steps" in said and "Record longer" not in said


def test_gaps_all_multiples_of_the_commonest_are_no_evidence_against_it():
    # 45 fetches, stalls at 8, 12, 16, 20, 28 (one at 24 missed): every gap
    # a multiple of 4, yet the phase's other 7 fetches (0, 4, 24, 32, ...)
    # did not stall.  Not IRREGULAR (nothing against a period of 4), not a
    # count of steps to settle (the phase is not filled over the run).
    for at in ([8, 12, 16, 20, 28], [0, 4, 8, 12, 20]):
        got, _ = _one_epoch(45, at, 20_000_000, 1_000_000)
        assert got["label"] == stall_timing.UNSETTLED and got["consistent_period"] == 4, got
        assert got["phase_filled"] is False and got["settle_steps"] is None
        assert "multiple of 4" in stall_timing.unsettled_part(got)
    # One gap off the period (4, 4, 4, 5, 4, 7, 4): evidence against it stays.
    got, _ = _one_epoch(45, np.cumsum([2, 4, 4, 4, 5, 4, 7, 4]), 20_000_000, 1_000_000)
    assert got["label"] != stall_timing.UNSETTLED or got.get("phase_filled") is not False


def test_an_unsettled_answer_keeps_the_p_value_its_words_quote():
    # The loader's own period, 4 workers, stalls on its phase too rarely
    # to claim: the shape line quotes the predicted test's p, and so does
    # the summary's p_value.
    got, pred = _one_epoch(24, [0, 4, 9, 12, 20], 50_000_000, 100_000, period=4)
    assert got["label"] == stall_timing.UNSETTLED, got
    test, kind = stall_timing.unsettled_test(got)
    assert kind == "predicted" and got["p_value"] == test["p_value"] == pred["p_value"]
    assert f"p = {got['p_value']:.2g}" in stall_timing.unsettled_part(got)


def test_alternating_gaps_are_their_sums_period_not_the_commoner_gap():
    # Stalls at 0 and 3 of every 10 fetches, 200 fetches: the gaps read
    # 3, 7, 3, 7, ... (3 one more often), yet no phase of 3 holds them.
    at = [i for i in range(200) if i % 10 in (0, 3)]
    got, _ = _one_epoch(200, at, 10_000_000, 300_000)
    assert got["label"] == stall_timing.PERIODIC and got["period"] == 10, got
    assert got["counted"] == "position"
    # Without the positions the gaps alone decide, as before.
    got, _ = _one_epoch(200, at, 10_000_000, 300_000, positions=False)
    assert got["label"] == stall_timing.PERIODIC and got["period"] == 3


def test_a_gap_that_holds_one_phase_without_filling_it_is_no_cadence():
    # Bursts of 3 slow samples every 12 indices on 2 workers stall the
    # loop at 5 and 7 of every 12 fetches (helper 29A): gaps 2, 10, 2, 10,
    # every stall on the odd phase of 2, yet only a third of that phase's
    # fetches stall.  Not "a stall every 2 fetches": every 12, by position.
    at = [i for i in range(120) if i % 12 in (5, 7)]
    got, _ = _one_epoch(120, at, 50_000_000, 1_000_000, period=2)
    assert got["label"] == stall_timing.PERIODIC and got["period"] == 12, got
    assert got["counted"] == "position"
    # The same gap test without the positions cannot tell: 2, as before.
    got, _ = _one_epoch(120, at, 50_000_000, 1_000_000, period=2, positions=False)
    assert got["period"] == 2
    # Stalls that do fill the phase (every other fetch) keep their period.
    got, _ = _one_epoch(60, list(range(1, 60, 2)), 50_000_000, 1_000_000)
    assert got["label"] == stall_timing.PERIODIC and got["period"] == 2, got


@pytest.mark.parametrize("at", [[2, 8, 21, 24, 39, 47], [3, 7, 20, 21, 29, 39]])
def test_random_stalls_half_on_a_searched_phase_are_not_yet_no_period(at):
    # 6 random slow samples among 48 fetches at num_workers=0 (helper 29A,
    # random.Random(105) and (23)): 3 of them on one phase of 13 (or 9),
    # 3 off it.  The search found that phase among 119 it paid for, and
    # the answer read "consistent with a stall every 13 fetches ... p = 1
    # ... about 36 more steps would settle it".  A searched phase is "not
    # yet" only where it would be as a pre-stated one: at most
    # PREDICTED_OFF_RESIDUE stalls off it.
    got, _ = _one_epoch(48, at, 80_000_000, 1_000_000)
    assert got["label"] != stall_timing.UNSETTLED or got["counted"] != "position", got
    assert got["label"] in (stall_timing.IRREGULAR, stall_timing.TOO_FEW), got


def test_every_fetch_never_says_every_one_waited_where_some_did_not():
    s = {"shape": "UNIFORMLY-SLOW", "temporal": {"label": "EVERY-FETCH", "period": None},
         "stalls": {"count": 12}, "steady_steps": 13}
    line = stall_timing.shape_line(s)
    assert "every steady-state fetch waits" not in line
    assert "EVERY-FETCH: the fetches are slow throughout (12 of 13 steady-state fetches " \
        "past the line)" in line
    s["stalls"]["count"] = 13
    assert "EVERY-FETCH: every steady-state fetch waits" in stall_timing.shape_line(s)


def test_a_round_that_slipped_once_is_not_yet_a_period_never_irregular():
    # 3 epochs of 16 fetches (the first 4 of each the start-up, untested),
    # 7 stalls with gaps 4, 4, 4, 3 within epochs, the round's phase moving
    # between epochs (helper 28A: 4 lock-step workers, persistent, 3
    # epochs): one gap holds 75% of the gaps, so there is no evidence
    # against a stall every 4 fetches, though no one phase fills.
    n_ep, per = 3, 16
    epoch = np.repeat(np.arange(n_ep), per).astype(np.int32)
    position = np.tile(np.arange(per), n_ep)
    tested = position >= 4
    stalled = np.zeros(n_ep * per, dtype=bool)
    for e, at in ((0, [4, 8, 12]), (1, [6, 10]), (2, [5, 8])):
        stalled[e * per + np.asarray(at)] = True
    wait = np.where(stalled, 280_000_000, 200_000).astype(np.int64)
    mask = stalled[tested]
    pos = stall_timing.Positions(stalled, position, tested, wait)
    t = stall_timing.temporal_of(mask, epoch[tested], wait[tested], positions=pos)
    assert sorted(np.asarray(stall_timing._core.stall_gaps(mask, epoch[tested])).tolist()) \
        == [3, 4, 4, 4]
    assert t["label"] == stall_timing.UNSETTLED and t["consistent_period"] == 4, t
    s = {"shape": "HEAVY-TAILED", "temporal": t, "trend": None,
         "stalls": {"count": 7}, "concentration": {}}
    line = stall_timing.shape_line(s)
    assert "IRREGULAR" not in line and "no regular period" not in line
    assert t.get("phase_filled") is False
    assert "75% of the gaps between stalls are 4" in line, line


def test_the_stall_line_counts_stalls_where_outliers_pass_it():
    # 0 stalls and one outlier past the line (helper 29D: "0 of 12
    # steady-state fetches waited > 6.16 ms" beside "One outlier (33.1
    # ms)"): the first line counts stalls, the next the outlier.
    import corpus

    s = corpus.replay(corpus.isolated_blip(0, 40)).summary
    assert s["stalls"]["count"] == 0 and s["stalls"]["outliers"] == 1
    first, second = stall_timing.stall_lines(s)[:2]
    assert first.startswith(f"0 of {s['steady_steps']} steady-state fetches were stalls past ")
    assert second.startswith("1 outlier above it")
    s["stalls"] = {**s["stalls"], "outliers": 0}
    assert " waited > " in stall_timing.stall_lines(s)[0]
    # Fetches past the line only by waiting for a core: the count is of
    # the loader's waits, and the line says so (helper 33A: "5 of 18 ...
    # waited > 53.8 ms" where 8 did by the clock).
    s["stalls"]["host_waits"] = {"count": 3, "queued_s": 0.02}
    assert ", less their waits for a core (" in stall_timing.stall_lines(s)[0]


def test_the_hypergeometric_tail_is_scipys_on_both_sides_of_the_exact_bound():
    from scipy.stats import hypergeom

    rng = np.random.default_rng(3)
    for n in list(range(1, 40)) + [stall_timing.HYPERGEOM_EXACT_MAX,
                                    stall_timing.HYPERGEOM_EXACT_MAX + 1, 500]:
        for _ in range(20):
            slots, k = int(rng.integers(0, n + 1)), int(rng.integers(0, n + 1))
            j = int(rng.integers(0, k + 2))
            want = float(hypergeom.sf(j - 1, n, slots, k)) if j > 0 else 1.0
            assert stall_timing._hypergeom_tail(j, n, slots, k) == pytest.approx(
                want, rel=1e-12, abs=1e-300), (j, n, slots, k)


def test_outliers_that_recur_but_for_one_beat_or_in_bursts_are_said_to_recur():
    # Every 5th of 300 fetches but one (helper 31B: the 230th was set aside
    # as a wait for a core), and bursts of 4 every 40 steps: neither is
    # evenly spaced, both recur far beyond chance.
    one_missing = [i for i in range(0, 300, 5) if i != 230]
    assert stall_timing.even_spacing(one_missing, 300) is None
    got = stall_timing.recurring(one_missing, 300)
    assert got["every"] == 5 and got["p_value"] < 1e-30 and "bursts" not in got
    bursts = [j for i in range(0, 400, 40) for j in range(i, i + 4)]
    got = stall_timing.recurring(bursts, 400)
    assert got == {"every": 40, "p_value": got["p_value"], "bursts": True}
    assert got["p_value"] < stall_timing.PERIOD_ALPHA
    # Random placements of as many: claimed at most at the test's rate.
    rng = np.random.default_rng(8)
    runs = 400
    claims = sum(stall_timing.recurring(sorted(rng.choice(300, int(k), replace=False).tolist()),
                                        300) is not None
                 for k in rng.integers(5, 40, runs))
    alpha = stall_timing.PERIOD_ALPHA
    assert claims / runs <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / runs), claims


def _places(n, period, places):
    return [i for i in range(n) if i % period in places]


def test_two_stalls_a_period_are_that_period_not_irregular_nor_a_divisor():
    # A slow sample at 0 and 3 of every 7 (gaps 3, 4, 3, 4: no gap
    # commoner than another) read IRREGULAR; at 0 and 2 of every 6 (every
    # even fetch but those at 4 of 6) "PERIODIC every 2" (helper 32A).
    got, _ = _one_epoch(42, _places(42, 7, {0, 3}), 40_000_000, 1_000_000)
    assert got["label"] == stall_timing.PERIODIC and got["period"] == 7, got
    test = got["searched"]
    assert test["residues"] == [0, 3] and test["on_residue"] == test["slots"] == 12
    # Its p-value, independently: all 12 stalls on the 12 fetches at 0 and
    # 3 of 7, C(42, 12) placements, times every (period, 2-3 places) pair
    # of periods 2..14.
    tries = sum(math.comb(p, s) for p in range(2, 15) for s in (2, 3))
    assert test["p_value"] == pytest.approx(tries / math.comb(42, 12), rel=1e-9)
    got, _ = _one_epoch(36, _places(36, 6, {0, 2}), 40_000_000, 1_000_000)
    assert got["label"] == stall_timing.PERIODIC and got["period"] == 6, got
    test = got["searched"]
    assert test["residues"] == [0, 2] and test["spread_period"] == 2
    # "Every 2" with misses spread alike: the 12 stalls of the 18 even
    # fetches all on the 12 at 0 and 2 of 6, one way in C(18, 12), times
    # the 2-3 places of every multiple of 2 a 36-fetch search tries.
    tries = sum(math.comb(k, s) for k in range(2, 7) for s in range(2, min(k - 1, 3) + 1))
    assert test["spread_p_value"] == pytest.approx(tries / math.comb(18, 12), rel=1e-9)
    said = stall_timing.position_part(test)
    assert "at 0 and 2 of every 6" in said and "not a stall every 2 fetches" in said, said
    # The predicted period (num_workers=2) holds the same stalls: the
    # finer answer replaces it too.
    got, pred = _one_epoch(36, _places(36, 6, {0, 2}), 40_000_000, 1_000_000, period=2)
    assert pred["periodic"] and got["period"] == 6 and got["searched"]["residues"] == [0, 2]


@pytest.mark.parametrize("n", [0, 1, 7, 1000, 300_000])
@pytest.mark.parametrize("share", [0.0, 0.003, 0.5, 1.0])
@pytest.mark.parametrize("k", [1, 5, stall_timing.RANK_MAX_FETCHES])
def test_first_true_is_the_first_k_of_flatnonzero(n, share, k):
    mask = np.random.default_rng(n + k).random(n) < share
    got = stall_timing._first_true(mask, k)
    assert np.array_equal(got, np.flatnonzero(mask)[:k])


def test_stalls_counted_in_bursts_carry_every_epochs_burst_count():
    # Back-to-back pairs every 6 steps, 10 a epoch over 2 epochs: 20
    # bursts, 18 gaps between them (gaps do not cross an epoch), so the
    # count is not the gaps plus one.
    n = 120
    mask = np.zeros(n, dtype=bool)
    for start in (0, 60):
        for s in range(start + 2, start + 58, 6):
            mask[s] = mask[s + 1] = True
    epoch = np.repeat([0, 1], 60)
    wait = np.where(mask, 30_000_000, 100_000).astype(np.int64)
    found = stall_timing.temporal_of(mask, epoch, wait)
    assert found["counted"] == "bursts" and found["bursts"] == 20
    assert found["burst_gap_histogram"] == [[6, 18]]


def test_a_searched_period_a_divisor_holds_with_misses_is_not_claimed():
    """Helper 41A: a slow sample every 4th index at 4 workers, the
    look-ahead hiding half its batches: stalls on 8 of the 16 fetches at
    0 mod 4, 6 of them at 4 mod 8, read "PERIODIC every 8" beside gaps of
    4 and 8.  The spread of the 8 stalls over the class's two residues
    mod 8 is not beyond chance (hypergeometric), so 8 is not claimed."""
    from scipy.stats import hypergeom

    pos = np.arange(68)
    tested = pos >= 4
    stalled = np.isin(pos, [4, 8, 12, 20, 28, 36, 44, 64])
    # 16 fetches at 0 mod 4 (4..64), 8 of them at 4 mod 8, 8 stalls there.
    assert hypergeom.sf(5, 16, 8, 8) >= stall_timing.PERIOD_ALPHA
    assert stall_timing.searched_cadence(stalled, pos, tested, None, [8]) is None
    # Every stall at 4 mod 8 and none at 0 mod 8: a period of 8 indeed.
    stalled = np.isin(pos, [4, 12, 20, 28, 36, 44, 52, 60])
    assert hypergeom.sf(7, 16, 8, 8) < stall_timing.PERIOD_ALPHA
    got = stall_timing.searched_cadence(stalled, pos, tested, None, [8])
    assert got["period"] == 8 and got["phase"] == 4 and got["periodic"]
