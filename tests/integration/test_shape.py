"""Shape, temporal structure, concentration and next steps on controlled
inputs."""

import numpy as np
import pytest

from traceml import _core
from traceml.fmt import fmt_s
from traceml.findings import advice, stall_shape, stall_threshold, stall_timing
from traceml.findings import sentences

from support import INFO, SYNTHETIC, MS, build, lockstep, records


def test_equal_mean_different_shape(loader_source):
    """Same mean input wait (20 ms), different shapes, different labels."""
    loader_source(4)
    n = 4 * 30
    uniform = np.full(n, 20 * MS)
    heavy = np.where(np.arange(n) % 4 == 0, 80 * MS - 150_000, 50_000)
    assert uniform.mean() == pytest.approx(heavy.mean(), rel=1e-9)
    compute = np.full(n, 10 * MS)
    a = build(records(uniform, compute), INFO, SYNTHETIC, None)
    b = build(records(heavy, compute), INFO, SYNTHETIC, None)
    assert a["shape"] == "UNIFORMLY-SLOW"
    assert b["shape"] == "HEAVY-TAILED"
    assert a["input_wait_s"]["mean"] == pytest.approx(b["input_wait_s"]["mean"], rel=0.02)
    assert b["concentration"]["stall_step_share"] == pytest.approx(29 / 116)
    assert b["concentration"]["stall_wait_share"] > 0.99
    assert a["concentration"]["stall_step_share"] == 1.0


def test_fast_shape_when_no_stall():
    rng = np.random.default_rng(0)
    wait = rng.integers(20_000, 60_000, 200)
    r = build(records(wait, np.full(200, 20 * MS)), INFO, SYNTHETIC, None)
    assert r["shape"] == "FAST" and r["stalls"]["count"] == 0
    assert r["temporal"] is None
    assert r["concentration"]["stall_wait_share"] == 0.0


@pytest.mark.parametrize("period", [2, 3, 4, 6])
def test_periodic_with_jitter(loader_source, period):
    """Stalls every `period` steps, sizes jittered +-30%, one stall in
    eight missed (a doubled gap) and one in nine shifted by one step."""
    loader_source(period)
    rng = np.random.default_rng(period)
    n = period * 60
    wait = rng.integers(20_000, 80_000, n)
    stall_at = np.arange(period, n, period)
    stall_at = np.delete(stall_at, np.arange(0, len(stall_at), 8))
    stall_at[::9] += 1
    stall_at = stall_at[stall_at < n]
    wait[stall_at] = (60 * MS * rng.uniform(0.7, 1.3, len(stall_at))).astype(np.int64)
    r = build(records(wait, np.full(n, 8 * MS)), INFO, SYNTHETIC, None)
    t = r["temporal"]
    assert t["label"] == "PERIODIC" and t["period"] == period
    assert t["modal_share"] >= 0.5
    assert r["cadence"]["matches_num_workers"] is True
    assert r["stalls"]["count"] == len(stall_at)


def test_random_stalls_are_irregular(loader_source):
    loader_source(4)
    rng = np.random.default_rng(11)
    n = 400
    wait = rng.integers(20_000, 80_000, n)
    stalls = rng.random(n) < 0.2
    stalls[:4] = False
    wait[stalls] = 60 * MS
    r = build(records(wait, np.full(n, 8 * MS)), INFO, SYNTHETIC, None)
    assert r["stalls"]["count"] == int(stalls.sum())
    assert r["temporal"]["label"] == "IRREGULAR"
    assert r["temporal"]["period"] is None and r["cadence"]["period"] is None
    assert r["cadence"]["matches_num_workers"] is False
    assert r["temporal"]["modal_share"] < 0.5


def test_too_few_stalls_give_no_temporal_label():
    wait = np.full(30, 40_000)
    wait[[10, 20]] = 60 * MS  # two stalls: one gap
    r = build(records(wait, np.full(30, 8 * MS)), INFO, SYNTHETIC, None)
    assert r["stalls"]["count"] == 2
    assert r["temporal"]["label"] == "TOO-FEW" and r["temporal"]["period"] is None
    assert any("too few to tell a pattern" in s for s in r["next"])


def test_autocorrelation_peaks_at_the_period(loader_source):
    loader_source(4)
    wait, compute = lockstep(4, bursts=30)
    r = build(records(wait, compute), INFO, SYNTHETIC, None)
    assert r["temporal"]["autocorrelation"] > 0.9


# --- next steps follow the chain and quote only what is there ------------------


def test_next_for_lockstep_cadence_points_at_sweep(loader_source):
    loader_source(4)
    wait, compute = lockstep(4, bursts=20)
    nxt = build(records(wait, compute), INFO, SYNTHETIC, None)["next"]
    assert "of the input wait: mostly fast input with large stalls" in nxt[0]
    assert "recur every 4 steps and num_workers=4" in nxt[1]
    assert "vary num_workers" in nxt[2] and "in_order=(True, False)" in nxt[2]


def test_next_for_a_period_that_does_not_follow_workers(loader_source):
    loader_source(2)
    wait, compute = lockstep(5, bursts=20)
    nxt = build(records(wait, compute), INFO, SYNTHETIC, None)["next"]
    assert "every 5 steps while num_workers=2" in nxt[1]


def test_next_for_irregular_stalls_points_at_in_order(loader_source):
    loader_source(4)
    rng = np.random.default_rng(5)
    wait = rng.integers(20_000, 80_000, 300)
    wait[4:][rng.random(296) < 0.2] = 60 * MS
    nxt = build(records(wait, np.full(300, 8 * MS)), INFO, SYNTHETIC, None)["next"]
    assert "no regular period" in nxt[1] and "in_order=(True, False)" in nxt[2]


def test_next_for_uniformly_slow_without_workers(loader_source):
    loader_source(0)
    nxt = build(records(np.full(50, 30 * MS), np.full(50, 5 * MS)), INFO, SYNTHETIC, None)["next"]
    # 30 ms of a 35 ms step.
    assert nxt[0] == ("Every fetch waits (median 30 ms, 86% of the median step): "
                      "uniformly slow input, not a few large stalls.")
    assert "num_workers=0 loads in the main process" in nxt[1]


def test_next_for_compute_bound_says_input_is_not_the_bottleneck():
    nxt = build(records(np.full(50, 10_000), np.full(50, 20 * MS)), INFO, SYNTHETIC, None)["next"]
    assert nxt == [
        "The loop waits for input 0% of the time: input is not the bottleneck; "
        "profile the step itself."
    ]


def test_no_next_sentence_mentions_num_workers_without_a_loader():
    wait, compute = lockstep(4, bursts=20)
    r = build(records(wait, compute), INFO, SYNTHETIC, None)
    assert r["loader"] is None
    assert not any("num_workers=" in s for s in r["next"])
    assert "every 4 steps" in r["next"][1]


def test_shape_rule_table():
    assert stall_shape.shape(0, 10, False)[0] == "FAST"
    assert stall_shape.shape(3, 10, True)[0] == "UNIFORMLY-SLOW"
    assert stall_shape.shape(6, 10, False)[0] == "UNIFORMLY-SLOW"
    assert stall_shape.shape(5, 10, False)[0] == "HEAVY-TAILED"
    assert stall_shape.shape(0, 0, False) is None


def test_stalls_in_pairs_keep_the_period_of_their_bursts(loader_source):
    """A crowded host: the 4 workers finish in two pairs, so each round
    holds two back-to-back stalls (gaps 1, 3, 1, 3)."""
    loader_source(4)
    rng = np.random.default_rng(8)
    n = 4 * 30
    wait = rng.integers(20_000, 80_000, n)
    for r0 in range(4, n, 4):
        wait[r0] = int(1.5e9 * rng.uniform(0.8, 1.2))
        wait[r0 + 1] = int(1.3e9 * rng.uniform(0.8, 1.2))
    r = build(records(wait, np.full(n, 150 * MS)), INFO, SYNTHETIC, None)
    assert set(r["stalls"]["gaps"]) == {1, 3}
    t = r["temporal"]
    assert t["label"] == "PERIODIC" and t["period"] == 4 and t["counted"] == "bursts"
    assert r["cadence"]["matches_num_workers"] is True
    assert "counting back-to-back stalls as one burst" in str(r)


def test_a_spread_wait_without_a_loader_speaks_of_no_workers():
    """The same waits from the probes, or from a wrapped iterable that is
    no DataLoader: no workers, hand-over or prefetch to vary; the next step
    is to wrap the loader itself."""
    wait = np.full(60, 10 * MS)
    rec = records(wait, np.full(60, 150 * MS), source=0)
    probes = build(rec, INFO, 0, None)
    assert probes["shape"] == "FAST" and probes["source"] == "probes"
    assert "between step_begin() and fetch_done()" in probes["next"][0]
    other = build(records(wait, np.full(60, 150 * MS)), INFO, SYNTHETIC, None)
    assert "the wrapped iterable's next()" in other["next"][0]
    for r in (probes, other):
        assert "workers" not in r["next"][0] and "prefetch_factor" not in " ".join(r["next"])
        # No DataLoader may exist: wrapping one is conditional on it.
        assert r["next"][1].startswith("Next: where a DataLoader feeds this loop, wrap the "
                                       "DataLoader itself")


def test_every_step_stalling_is_every_fetch_not_a_period(loader_source):
    loader_source(1)
    r = build(records(np.full(40, 80 * MS), np.full(40, 5 * MS)), INFO, SYNTHETIC, None)
    assert r["temporal"]["label"] == "EVERY-FETCH" and r["temporal"]["period"] is None
    assert r["cadence"]["period"] is None


def test_next_for_even_small_waits_names_both_explanations(loader_source):
    """BALANCED with no stall: the numbers cannot tell a per-batch hand-over
    cost from a loader at its limit, so the sentence names both."""
    loader_source(2)
    wait = np.full(60, 10 * MS)
    r = build(records(wait, np.full(60, 150 * MS)), INFO, SYNTHETIC, None)
    assert r["diagnosis"] == "BALANCED" and r["shape"] == "FAST"
    assert "spread over every fetch (median 10 ms)" in r["next"][0]
    assert "handing it over from the workers" in r["next"][0]
    assert "only just keeping up" in r["next"][0]
    assert "a wait that stays put is per-batch hand-over cost" in r["next"][1]


def test_slow_throughout_with_periodic_stalls_is_not_heavy_tailed(loader_source):
    """A stall every 4th fetch, and most fetches between them wait 40 ms,
    four steps of compute: not "mostly fast input" however few the stalls."""
    loader_source(4)
    n = 4 * 30
    wait = np.tile(np.array([150, 40, 3, 40]) * MS, 30)
    r = build(records(wait, np.full(n, 10 * MS)), INFO, SYNTHETIC, None)
    assert 0 < r["stalls"]["count"] <= r["steady_steps"] / 2
    assert r["shape"] == "UNIFORMLY-SLOW"
    assert "between stalls are slow too" in r["shape_rule"]
    assert r["next"][0].startswith("Most fetches wait (median 40 ms")  # a quarter wait 3 ms
    assert r["next"][0].endswith("slow input on most batches.")
    assert r["next"][1] == "On top, larger stalls recur every 4 steps (num_workers=4)."


def test_too_few_steps_get_no_advice():
    r = build(records(np.full(4, 80 * MS), np.full(4, 1 * MS)), INFO, SYNTHETIC, None)
    assert r["steady_steps"] == 3
    assert r["next"] == ["Only 3 steady-state steps: too few to judge the input's "
                         "shape; record at least 8."]


def test_large_stalls_over_slow_fetches_keep_their_own_cadence(loader_source):
    """Every fetch waits 10 ms against a 1 ms step (num_workers=0), and one
    in ten waits 400 ms: the 400 ms fetches are the stalls, every 10 steps,
    not "a stall every step"."""
    loader_source(0)
    rng = np.random.default_rng(11)
    n = 120
    wait = (10 * MS * rng.uniform(0.9, 1.1, n)).astype(np.int64)
    wait[5::10] = (400 * MS * rng.uniform(0.95, 1.05, len(wait[5::10]))).astype(np.int64)
    r = build(records(wait, np.full(n, 1 * MS)), INFO, SYNTHETIC, None)
    big = np.flatnonzero(wait > 100 * MS)
    assert r["stalls"]["steps"] == big.tolist()  # step 0 is the epoch start
    assert r["stalls"]["count"] == len(big) == 12
    assert r["stalls"]["threshold_s"] * 1e9 > wait[wait < 100 * MS].max()
    assert ("a separate group of large waits stands out (at least 2, at most half the "
            "fetches, 4x the rest or two groups by Otsu's eta at this many "
            "fetches)") in r["stalls"]["rule"]
    assert r["temporal"]["label"] == "PERIODIC" and r["temporal"]["period"] == 10
    assert r["cadence"]["matches_num_workers"] is False
    # Slow between the stalls too: not "mostly fast input".
    assert r["shape"] == "UNIFORMLY-SLOW"
    assert "between stalls are slow too" in r["shape_rule"]
    steady = wait[1:]
    share = steady[steady > 100 * MS].sum() / steady.sum()
    assert r["concentration"]["stall_wait_share"] == pytest.approx(share, rel=1e-12)
    assert r["next"][0].endswith("slow input on every batch.")
    assert r["next"][1].startswith("On top, larger stalls recur every 10 steps")
    # num_workers=0: every gap is a multiple of 1, so that is not said.
    assert "cadence: a stall every 10 steps (modal gap); num_workers=0\n" in str(r) + "\n"
    assert "multiples of 1" not in str(r)


def test_two_groups_with_most_fetches_slow_stay_every_fetch_slow(loader_source):
    """Every fetch slow and two groups, but the upper group is most of the
    fetches: that is a slow loader with a few quick fetches, every fetch a
    stall."""
    loader_source(1)
    n = 60
    wait = np.full(n, 400 * MS, dtype=np.int64)
    wait[::5] = 90 * MS  # above the floor, 20% of the ~400 ms median step
    r = build(records(wait, np.full(n, 1 * MS)), INFO, SYNTHETIC, None)
    assert stall_threshold.bimodal_split_ns(wait[1:]) is not None
    assert "every fetch is slow" in r["stalls"]["rule"]
    assert r["stalls"]["count"] == r["steady_steps"] == n - 1
    assert r["shape"] == "UNIFORMLY-SLOW"


def test_stalls_over_spread_out_slow_fetches_of_one_worker(loader_source):
    """Measured with num_workers=1 (10 ms batches, one in ten 200 ms, a 1 ms
    step): prefetching spreads the ordinary waits over 0.7-36 ms, which
    pulls Otsu's eta to 0.74; the three 200 ms waits are still the stalls."""
    loader_source(1)
    ms = np.array([5.0, 7.6, 8.1, 6.3, 6.3, 6.6, 6.3, 11.3, 36.1, 208.4, 4.8, 6.8, 5.9,
                   2.5, 7.0, 7.4, 7.6, 1.9, 12.3, 191.5, 12.6, 10.6, 4.9, 9.6, 19.6, 6.0,
                   4.8, 28.9, 23.9, 206.4, 5.8, 5.6, 5.7, 2.8, 5.6, 6.5, 5.6, 8.5, 0.7])
    wait = np.r_[60.0, ms]  # step 0: the epoch start
    r = build(records((wait * MS).astype(np.int64), np.full(len(wait), 1 * MS)),
              INFO, SYNTHETIC, None)
    assert _core.log_otsu((ms * MS).astype(np.int64))["eta"] < stall_threshold.BIMODAL_MIN_ETA
    assert r["stalls"]["steps"] == np.flatnonzero(wait > 100).tolist() == [10, 20, 30]
    # Three stalls with two equal gaps are not yet evidence of a period:
    # random stalls at that rate repeat a gap that often in more than 1 run
    # in 100.  They fit one, so the answer is "not yet", not "irregular".
    assert r["temporal"]["label"] == "UNSETTLED" and r["temporal"]["modal_gap"] == 10
    assert r["temporal"]["consistent_period"] == 10
    assert r["temporal"]["p_value"] >= stall_timing.PERIOD_ALPHA
    assert r["shape"] == "UNIFORMLY-SLOW"


@pytest.mark.parametrize("hiccups,expect_all", [(1, True), (3, False)])
def test_one_long_wait_in_a_slow_run_is_a_hiccup_not_a_group(loader_source, hiccups,
                                                            expect_all):
    """Every fetch ~100 ms: one 450 ms wait leaves every fetch a stall (a
    single hiccup is no pattern); three make a group of their own."""
    loader_source(1)
    rng = np.random.default_rng(5)
    wait = (100 * MS * rng.uniform(0.95, 1.05, 20)).astype(np.int64)
    wait[[5, 11, 17][:hiccups]] = 450 * MS
    r = build(records(wait, np.full(20, 5 * MS)), INFO, SYNTHETIC, None)
    if expect_all:
        assert r["stalls"]["count"] == r["steady_steps"] == 19
        assert "every fetch is slow (p10 wait > floor); floor" in r["stalls"]["rule"]
    else:
        assert r["stalls"]["steps"] == [5, 11, 17]
        # Two equal gaps: the modal gap, not yet a period.
        assert r["temporal"]["modal_gap"] == 6 and r["temporal"]["period"] is None


@pytest.mark.parametrize("slow_steps,tail", [
    ([7, 19], "On top, 2 stalls past the stall line ({}), too few to show a pattern."),
    ([3, 5, 12, 20, 31, 33, 41, 50],
     "On top, 8 stalls past the stall line ({}) at irregular intervals."),
    # Two gaps of 20: they fit a period the run cannot yet tell from random
    # stalls, and the sentence says so (the label reads UNSETTLED).
    ([10, 30, 50], "On top, 3 stalls past the stall line ({}), consistent with one every "
                   "20 steps but not yet told from random stalls."),
])
def test_stalls_on_top_of_slow_fetches_are_never_called_no_stalls(loader_source,
                                                                   slow_steps, tail):
    """Slow fetches everywhere and a few much slower ones, not periodic: the
    sentence names the stalls instead of "uniformly slow rather than stalls"."""
    loader_source(0)
    n = 60
    wait = np.full(n, 10 * MS, dtype=np.int64)
    wait[slow_steps] = 200 * MS
    r = build(records(wait, np.full(n, 1 * MS)), INFO, SYNTHETIC, None)
    assert r["stalls"]["steps"] == slow_steps
    assert r["shape"] == "UNIFORMLY-SLOW"
    assert r["next"][0].endswith("slow input on every batch.")
    assert r["next"][1] == tail.format(fmt_s(r["stalls"]["threshold_s"]))
    assert not any("rather than stalls" in line for line in r["next"])


@pytest.mark.parametrize("gaps,label,period", [
    ([2, 18], "IRREGULAR", None),      # two different gaps: no period
    # Two or three gaps: a gap seen twice is not evidence against random
    # stalls at that rate (3 stalls in 40 steps).
    ([4, 4], "IRREGULAR", None),
    ([2, 2, 18], "IRREGULAR", None),
    ([1, 3, 1, 3], "IRREGULAR", None),  # a tie: left to the per-burst count
    ([4, 4, 8], "IRREGULAR", None),
    ([4] * 8 + [8], "PERIODIC", 4),
    ([2] * 6 + [18], "PERIODIC", 2),
    ([4, 4, 4, 4, 8, 8, 8], "IRREGULAR", None),  # 4 of 7 in 40 steps: p > 0.01
    ([1] * 9, "IRREGULAR", None),       # a gap of 1 is never a period
])
def test_a_period_is_a_gap_seen_often_commoner_than_any_other_and_unlikely_by_luck(
        gaps, label, period):
    t = stall_timing.temporal(np.array(gaps, dtype=np.int64), np.full(40, MS, dtype=np.int64))
    assert (t["label"], t["period"]) == (label, period)
    assert 0.0 <= t["p_value"] <= 1.0


def _overtaking_summary(period, num_workers=4, overtaking=30):
    """A HEAVY-TAILED summary whose stalls recur every ``period`` steps,
    from an in_order=False loader whose deliveries overtook."""
    n = 120
    wait = np.full(n, 50_000, dtype=np.int64)
    wait[::period] = 300 * MS
    s = build(records(wait, np.full(n, 10 * MS)), INFO, SYNTHETIC, None).summary
    assert s["shape"] == "HEAVY-TAILED" and s["temporal"]["period"] == period
    s["loader"] = {"num_workers": num_workers, "in_order": False}
    s["delivery"] = {"in_order": False, "known": n, "overtaking": overtaking}
    return s


def test_overtaking_with_the_workers_period_blames_the_round(loader_source):
    loader_source(4)
    nxt = sentences(advice.next_steps(_overtaking_summary(4)))
    assert any("yet the stalls still recur every 4 steps: not one slow sample" in t
               for t in nxt)


def test_overtaking_with_another_period_does_not_blame_the_round(loader_source):
    """in_order=False, num_workers=4, one slow sample every 8 batches: the
    stalls follow the sample, so the workers' round is not the cause."""
    loader_source(4)
    nxt = sentences(advice.next_steps(_overtaking_summary(8)))
    assert not any("workers' round" in t for t in nxt), nxt
    assert any("30 deliveries overtook a slower batch: single slow samples" in t for t in nxt), nxt
    assert any("The stalls recur every 8 steps while num_workers=4" in t for t in nxt)
