"""The rules of "Diagnostic truth", each on deterministic hand-made wait
sequences: a stall stands apart and matters (else it is an outlier), a
period needs evidence against random stalls, a trend is named, the
headline covers the whole run, labels agree with their numbers, and advice
is only given where it can work."""

import json

import numpy as np
import pytest

from traceml.findings import advice, bottom_line, stall_threshold, stall_timing, wait_trend
from traceml.findings import sentences

from support import INFO, MS, SYNTHETIC, build, records

BANNED = ("every 1 step", "every 1 batches", "a slow sample every 1 ", "follows num_workers at")


def _text_is_sane(r):
    """No period of 1 and no cadence "following" one worker, anywhere."""
    text = str(r)
    for phrase in BANNED:
        assert phrase not in text, (phrase, text)
    json.dumps(r.to_dict())
    return text


def _lockstep(k, rounds, seed, stall_ms=80.0, compute_ms=10.0):
    """k workers in lock-step: after the k start-up fetches, one stall per
    round of k batches, the rest prefetched (tens of microseconds)."""
    rng = np.random.default_rng(seed)
    n = k * (rounds + 1)
    wait = rng.lognormal(np.log(0.05), 0.5, n) * MS
    stall = (np.arange(n) % k == 0) & (np.arange(n) >= k)
    wait[stall] = stall_ms * MS * rng.uniform(0.85, 1.15, stall.sum())
    return wait.astype(np.int64), np.full(n, int(compute_ms * MS)), stall


# --- 1. a stall stands apart and matters ------------------------------------


@pytest.mark.parametrize("seed", range(10))
def test_healthy_jitter_with_scheduling_blips_has_no_stall(loader_source, seed):
    """~1 ms waits against a 10 ms step and 3-4 blips of 2-10 ms (TRAPS.md:
    what healthy loops show on this VM under load): no stall, FAST."""
    loader_source(2)
    rng = np.random.default_rng(seed)
    n = 80
    wait = rng.lognormal(np.log(1.0), 0.35, n)
    blips = rng.choice(np.arange(2, n), size=rng.integers(3, 5), replace=False)
    wait[blips] = rng.uniform(2.0, 10.0, len(blips))
    r = build(records((wait * MS).astype(np.int64), (rng.uniform(9.5, 10.5, n) * MS)
                      .astype(np.int64)), INFO, SYNTHETIC, None)
    assert r["stalls"]["count"] == 0
    assert r["shape"] == "FAST" and r["temporal"] is None
    assert r["diagnosis"] != "INPUT-BOUND"
    _text_is_sane(r)


def test_cheap_items_on_four_workers_have_no_stall(loader_source):
    """4 workers of cheap items on 2 cores: 0.1 ms waits, a fifth of 1-2 ms
    while a worker holds a core: under 20% of the 10 ms compute past the
    fast group, so no stall."""
    loader_source(4)
    rng = np.random.default_rng(3)
    n = 84
    wait = rng.lognormal(np.log(0.1), 0.6, n)
    busy = rng.random(n) < 0.2
    wait[busy] = rng.uniform(1.0, 2.0, busy.sum())
    r = build(records((wait * MS).astype(np.int64), np.full(n, 10 * MS)), INFO, SYNTHETIC, None)
    assert r["stalls"]["count"] == 0 and r["shape"] == "FAST"


def test_a_ripple_once_a_round_is_a_small_periodic_stall(loader_source):
    """The same loader with a 2.5-3 ms wait on each round's first batch
    (every 4th fetch): two groups, the slow one past 20% of the compute
    step and 5% of the step time, on the residue num_workers predicts."""
    loader_source(4)
    rng = np.random.default_rng(3)
    n = 84
    wait = rng.lognormal(np.log(0.1), 0.6, n)
    round_first = np.arange(n) % 4 == 0
    wait[round_first] = rng.uniform(2.5, 3.0, n // 4)
    r = build(records((wait * MS).astype(np.int64), np.full(n, 10 * MS)), INFO, SYNTHETIC, None)
    steady = np.arange(4, n)
    assert r["stalls"]["steps"] == steady[round_first[4:]].tolist()
    assert (r["temporal"]["label"], r["temporal"]["period"]) == ("PERIODIC", 4)
    assert r["diagnosis"] != "INPUT-BOUND"


@pytest.mark.parametrize("at", [5, 40, 79])
def test_an_isolated_blip_is_an_outlier_never_a_shape(loader_source, at):
    loader_source(2)
    rng = np.random.default_rng(at)
    wait = rng.lognormal(np.log(1.0), 0.3, 82)
    wait[2 + at] = 50.0
    r = build(records((wait * MS).astype(np.int64), np.full(82, 10 * MS)), INFO, SYNTHETIC,
              None)
    st = r["stalls"]
    assert st["count"] == 0 and st["outliers"] == 1 and st["outlier_steps"] == [2 + at]
    assert st["matter"] == stall_threshold.STALLS_LONE
    assert r["shape"] == "FAST" and r["temporal"] is None
    text = _text_is_sane(r)
    assert "no stalls (1 outlier)" in text and "One outlier (50 ms" in text
    assert "a lone wait" in text


def test_waits_that_stand_apart_but_cost_little_are_outliers():
    """Six 6 ms waits over 200 fast fetches against a 20 ms step stand
    apart (far past 4x the median) but cost under 5% of the step time."""
    wait = np.full(200, 100_000)
    wait[[20, 50, 90, 120, 150, 180]] = 12 * MS
    r = build(records(wait, np.full(200, 20 * MS)), INFO, SYNTHETIC, None)
    st = r["stalls"]
    assert st["count"] == 0 and st["outliers"] == 6
    assert st["matter"] == stall_threshold.STALLS_SMALL
    assert st["cost_share"] < stall_threshold.STALL_MIN_COST_SHARE
    # The same waits four times as long matter: stalls.
    wait[[20, 50, 90, 120, 150, 180]] = 48 * MS
    r = build(records(wait, np.full(200, 20 * MS)), INFO, SYNTHETIC, None)
    assert r["stalls"]["count"] == 6 and r["stalls"]["outliers"] == 0


def test_a_given_threshold_is_kept_as_given():
    """The caller's threshold is absolute: one wait past it is a stall."""
    wait = np.full(40, 100_000)
    wait[20] = 50 * MS
    r = build(records(wait, np.full(40, 10 * MS)), INFO, SYNTHETIC, 0.01)
    assert r["stalls"]["count"] == 1 and r["stalls"]["outliers"] == 0


# --- 2. a period needs evidence ---------------------------------------------------


@pytest.mark.parametrize("rate", [0.1, 0.25])
@pytest.mark.parametrize("seed", range(10))
def test_random_stalls_are_never_periodic(loader_source, rate, seed):
    loader_source(0)
    for n in (24, 100):
        rng = np.random.default_rng(1000 * seed + n + int(rate * 100))
        wait = rng.lognormal(np.log(0.1), 0.5, n + 1) * MS
        hit = np.r_[False, rng.random(n) < rate]
        wait[hit] = rng.uniform(60, 100, hit.sum()) * MS
        r = build(records(wait.astype(np.int64), np.full(n + 1, 10 * MS)), INFO, SYNTHETIC,
                  None)
        t = r["temporal"]
        if r["stalls"]["count"] == 0:  # none, or a lone outlier
            assert t is None
            continue
        # Never a period; at 24 steps the stalls may also fit one by chance
        # and read UNSETTLED (not yet), with how many more steps would tell.
        assert t["label"] in ("IRREGULAR", "TOO-FEW", "UNSETTLED"), (n, t)
        if t["label"] == "UNSETTLED":
            assert t["consistent_period"] > 1 and t["p_value"] >= stall_timing.PERIOD_ALPHA
        assert r["cadence"]["period"] is None
        _text_is_sane(r)
        # num_workers=0: torch ignores in_order, so it is never suggested.
        assert not any("in_order=(True, False)" in line for line in r["next"])


@pytest.mark.parametrize("k", [2, 3, 4, 8])
def test_lockstep_is_periodic_at_its_period(loader_source, k):
    loader_source(k)
    wait, compute, stall = _lockstep(k, rounds=12, seed=k)
    r = build(records(wait, compute), INFO, SYNTHETIC, None)
    t = r["temporal"]
    assert r["stalls"]["steps"] == np.flatnonzero(stall).tolist()
    assert (t["label"], t["period"]) == ("PERIODIC", k)
    assert t["p_value"] < stall_timing.PERIOD_ALPHA
    assert r["shape"] == "HEAVY-TAILED"
    assert r["cadence"]["matches_num_workers"] is True
    _text_is_sane(r)


def test_lockstep_pairs_are_periodic_per_burst_under_the_same_test(loader_source):
    loader_source(4)
    rng = np.random.default_rng(2)
    n = 4 * 15
    wait = rng.lognormal(np.log(0.05), 0.5, n) * MS
    phase = np.arange(n) % 4
    first = (phase == 0) & (np.arange(n) >= 4)
    second = (phase == 1) & (np.arange(n) >= 4)
    wait[first] = rng.uniform(60, 80, first.sum()) * MS
    wait[second] = rng.uniform(35, 50, second.sum()) * MS
    r = build(records(wait.astype(np.int64), np.full(n, 10 * MS)), INFO, SYNTHETIC, None)
    t = r["temporal"]
    assert r["stalls"]["count"] == first.sum() + second.sum()
    assert (t["label"], t["period"], t["counted"]) == ("PERIODIC", 4, "bursts")
    assert t["p_value"] < stall_timing.PERIOD_ALPHA
    assert r["cadence"]["multiple_fraction"] == 1.0  # over the bursts' gaps


def test_three_stalls_with_two_equal_gaps_are_not_yet_a_period():
    """Gaps 10, 10 fit a stall every 10 steps, but random stalls at that
    rate repeat a gap as often in more than 1 run in 100: not yet, never
    "no regular period"; the steps that would settle it are those at which
    the same pattern's p-value falls under PERIOD_ALPHA."""
    wait = np.full(40, 100_000)
    wait[[10, 20, 30]] = 80 * MS
    r = build(records(wait, np.full(40, 10 * MS)), INFO, SYNTHETIC, None)
    t = r["temporal"]
    assert t["label"] == "UNSETTLED" and t["modal_gap"] == 10 and t["period"] is None
    assert t["consistent_period"] == 10
    assert t["p_value"] >= stall_timing.PERIOD_ALPHA
    # The same run gone on settles it after the steps said, not before.
    def temporal(n):
        w = np.full(n, 100_000)
        w[np.arange(10, n, 10)] = 80 * MS
        return build(records(w, np.full(n, 10 * MS)), INFO, SYNTHETIC, None)["temporal"]
    more = t["settle_steps"]
    assert temporal(40 + more)["label"] == "PERIODIC"
    assert temporal(40 + more - 1)["label"] != "PERIODIC"
    text = str(r)
    assert "no regular period" not in text and "consistent with a stall every 10" in text


def test_an_unsettled_period_by_position_shows_its_residue_not_its_gaps(loader_source):
    # Stalls at 6, 9 and 12 of 24 steps at num_workers=6: 2 of 3 on the
    # predicted residue, consistent and not settled.  The cadence line read
    # "(0% of gaps are multiples of 6)" beside "consistent with a stall
    # every 6" (helper 35A): the residue is the evidence, as for a found
    # period.
    loader_source(6)
    wait = np.full(24, 200_000)
    wait[[6, 9, 12]] = 80 * MS
    r = build(records(wait, np.full(24, 5 * MS)), INFO, SYNTHETIC, None)
    assert r["temporal"]["label"] == "UNSETTLED" and r["temporal"]["consistent_period"] == 6
    (line,) = [x for x in str(r).splitlines() if x.startswith("cadence:")]
    assert line == ("cadence: not settled, consistent with a stall every 6 steps; "
                    "num_workers=6 (2 of the 3 stalls at position 0 mod 6 of the epoch)")


@pytest.mark.parametrize("num_workers", [0, 1, 4])
def test_every_fetch_a_stall_is_every_fetch(loader_source, num_workers):
    loader_source(num_workers)
    rng = np.random.default_rng(num_workers)
    n = 60
    wait = (30 * MS * rng.uniform(0.9, 1.1, n)).astype(np.int64)
    r = build(records(wait, np.full(n, 5 * MS)), INFO, SYNTHETIC, None)
    t = r["temporal"]
    assert t["label"] == "EVERY-FETCH" and t["period"] is None and t["p_value"] is None
    assert r["shape"] == "UNIFORMLY-SLOW"
    assert r["cadence"]["period"] is None and r["cadence"]["matches_num_workers"] is False
    text = _text_is_sane(r)
    assert "follows num_workers" not in text and "every step" not in text
    assert "rather than stalls" not in text


def test_two_stalls_are_too_few():
    wait = np.full(40, 100_000)
    wait[[10, 30]] = 80 * MS
    r = build(records(wait, np.full(40, 10 * MS)), INFO, SYNTHETIC, None)
    assert r["stalls"]["count"] == 2
    assert r["temporal"]["label"] == "TOO-FEW" and r["temporal"]["period"] is None
    assert "TOO-FEW stalls for a temporal pattern" in str(r)


def test_the_p_value_bounds_what_random_stalls_do():
    """8 stalls placed at random among 60 steps: the share of runs in which
    some gap of 2 or more occurs 4 times (as the modal gap does here) stays
    under the p-value, which bounds it."""
    rng = np.random.default_rng(0)
    n, k = 60, 8
    gaps = np.array([5] * 4 + [3, 9, 2])  # modal count 4 of 7
    bound = stall_timing.period_p_value(gaps, k, n)
    runs = 4000
    hits = 0
    for _ in range(runs):
        g = np.diff(np.sort(rng.choice(n, k, replace=False)))
        g = g[g >= 2]
        if len(g) and np.unique(g, return_counts=True)[1].max() >= 4:
            hits += 1
    assert 0 < hits / runs <= bound


def test_the_p_value_is_cheap_over_ten_million_steps():
    gaps = np.array([3, 5, 7, 1_000_000, 2_000_000])
    assert stall_timing.period_p_value(gaps, 6, 10_000_000) == 1.0
    assert stall_timing.period_p_value(np.full(999, 10_000), 1000, 10_000_000) < 1e-12


# --- 3. trend -----------------------------------------------------------------


@pytest.mark.parametrize("start_ms,end_ms,label", [(1.0, 40.0, "RISING"),
                                                    (40.0, 1.0, "FALLING"),
                                                    (2.0, 2.0 + 0.3 * 79, "RISING")])
def test_a_steady_ramp_is_a_trend_with_its_slope(loader_source, start_ms, end_ms,
                                                 label):
    loader_source(0)
    rng = np.random.default_rng(4)
    n = 80
    line = np.linspace(start_ms, end_ms, n)
    wait = np.r_[150.0, line * rng.lognormal(0.0, 0.1, n)]
    r = build(records((wait * MS).astype(np.int64), np.full(n + 1, 10 * MS)), INFO,
              SYNTHETIC, None)
    tr = r["trend"]
    truth = (end_ms - start_ms) / (n - 1)
    assert tr["label"] == label
    assert tr["slope_ms_per_step"] == pytest.approx(truth, rel=0.10)
    assert tr["p_value"] < wait_trend.TREND_ALPHA and (tr["tau"] > 0) == (label == "RISING")
    assert tr["first_tenth_median_s"] == pytest.approx(np.median(wait[1:9]) * 1e-3)
    assert r["temporal"] is None or r["temporal"]["label"] != "PERIODIC"
    nxt = r["next"]
    assert nxt[0].startswith("The input wait " + ("grows" if label == "RISING" else "shrinks"))
    assert not any("num_workers" in line for line in nxt)
    text = _text_is_sane(r)
    assert f"wait {label}" in text.splitlines()[2]
    assert "HEAVY-TAILED" not in text and "shape FAST" not in text


def test_no_trend_in_stationary_or_periodic_waits(loader_source):
    loader_source(4)
    wait, compute, _ = _lockstep(4, rounds=30, seed=1)
    assert build(records(wait, compute), INFO, SYNTHETIC, None)["trend"] is None
    rng = np.random.default_rng(5)
    wait = (rng.lognormal(np.log(20.0), 0.3, 200) * MS).astype(np.int64)
    assert build(records(wait, np.full(200, 10 * MS)), INFO, SYNTHETIC, None)["trend"] is None


def test_a_small_rise_is_no_trend():
    """Significant but immaterial: 100 us -> 300 us against a 10 ms step."""
    wait = np.linspace(100_000, 300_000, 200).astype(np.int64)
    r = build(records(wait, np.full(200, 10 * MS)), INFO, SYNTHETIC, None)
    assert r["trend"] is None


def test_a_rise_across_epochs_has_a_slope_per_epoch(loader_source):
    loader_source(0, epochs=4)
    rng = np.random.default_rng(6)
    per = 40
    wait = np.concatenate([(5.0 + 10.0 * e) * rng.lognormal(0, 0.05, per) for e in range(4)])
    epoch = np.repeat(np.arange(4), per).astype(np.int32)
    r = build(records((wait * MS).astype(np.int64), np.full(4 * per, 10 * MS), epoch=epoch),
              INFO, SYNTHETIC, None)
    tr = r["trend"]
    assert tr["label"] == "RISING"
    assert tr["slope_ms_per_epoch"] == pytest.approx(10.0, rel=0.1)


def test_a_trend_over_ten_million_steps():
    n = 10_000_000
    wait = (np.linspace(1e6, 41e6, n)).astype(np.int64)
    tr = wait_trend.trend(wait, np.zeros(n, np.int32), 2e6)
    assert tr["label"] == "RISING"
    assert tr["slope_ms_per_step"] == pytest.approx(40.0 / n, rel=0.01)


# --- 4. headline --------------------------------------------------------------------


@pytest.mark.parametrize("num_workers,persistent", [(0, None), (2, False), (2, True)])
def test_epoch_starts_that_dominate_make_the_headline(loader_source, num_workers,
                                                      persistent):
    """Three epochs, each a 1.5 s start and 20 fast steady steps."""
    loader_source(num_workers, epochs=3)
    from support import SOURCES

    SOURCES[SYNTHETIC].loader["persistent_workers"] = persistent
    k = max(1, num_workers)
    one = np.r_[1500.0, np.full(k - 1, 0.05), np.full(20, 0.1)]
    wait = np.tile(one, 3)
    epoch = np.repeat(np.arange(3), len(one)).astype(np.int32)
    r = build(records((wait * MS).astype(np.int64), np.full(len(wait), 10 * MS), epoch=epoch),
              INFO, SYNTHETIC, None)
    h = r["headline"]
    assert h["label"] == "EPOCH-START"
    assert h["epoch_start_s_per_epoch"] == pytest.approx([1.5 + 0.05e-3 * (k - 1)] * 3)
    assert h["epoch_start_share"] == pytest.approx(4.5 / r["wall_s"], rel=1e-3)
    assert h["epoch_start_share"] > 0.5
    first = r["next"][0]
    assert first.startswith("Epoch starts hold")
    assert ("persistent_workers=True" in first) == (persistent is False)
    text = str(r)
    assert text.splitlines()[0].endswith(f"EPOCH-START: epoch starts hold "
                                         f"{round(100 * h['epoch_start_share'])}% of the "
                                         "wall time")
    assert "profile the step itself" not in text


def test_a_short_start_in_a_long_run_is_steady():
    wait = np.r_[150 * MS, np.full(400, 100_000)]
    r = build(records(wait, np.full(401, 10 * MS)), INFO, SYNTHETIC, None)
    assert r["headline"]["label"] == "STEADY"
    assert "EPOCH-START" not in str(r).splitlines()[0]


def test_a_fetch_past_stuck_after_is_stuck():
    wait = np.full(40, 1 * MS)
    wait[20] = 45 * 10**9
    r = build(records(wait, np.full(40, 10 * MS)), INFO, SYNTHETIC, None)
    h = r["headline"]
    assert h["label"] == "STUCK" and h["code"] == bottom_line.HEADLINE_STUCK_WAITED
    assert r["next"][0].startswith("A fetch waited 45.00 s")
    assert "STUCK" in str(r).splitlines()[0]


def test_a_fetch_stuck_now_is_stuck():
    wait = np.full(40, 1 * MS)
    s = build(records(wait, np.full(40, 10 * MS)), INFO, SYNTHETIC, None).summary
    assert s["headline"]["label"] == "STEADY"
    head = bottom_line.headline(s["wall_s"], 0.0, 0.0, True, 0.001, 30.0)
    assert head.label == "STUCK" and head.code == bottom_line.HEADLINE_STUCK_NOW


# --- 5. labels agree with their numbers ------------------------------------------------


def test_alternating_slow_and_fast_fetches_are_not_heavy_tailed(loader_source):
    """Every other fetch 85 ms, the rest near 0 (the slow ones one more):
    the median fetch is 85 ms, so not "mostly fast input"."""
    loader_source(2)
    n = 2 + 61
    wait = np.where(np.arange(n) % 2 == 0, 85 * MS, 30_000).astype(np.int64)
    r = build(records(wait, np.full(n, 10 * MS)), INFO, SYNTHETIC, None)
    assert r["input_wait_s"]["median"] == pytest.approx(0.085)
    assert r["shape"] == "UNIFORMLY-SLOW"
    text = _text_is_sane(r)
    assert "mostly fast input" not in text
    assert r["shape_rule"].startswith("the median fetch is itself slow")
    assert (r["temporal"]["label"], r["temporal"]["period"]) == ("PERIODIC", 2)


def test_no_rather_than_stalls_beside_counted_stalls(loader_source):
    loader_source(2)
    rng = np.random.default_rng(9)
    wait = (30 * MS * rng.uniform(0.5, 1.5, 80)).astype(np.int64)
    wait[rng.choice(80, 8, replace=False)] = 200_000
    r = build(records(wait, np.full(80, 10 * MS)), INFO, SYNTHETIC, None)
    assert r["stalls"]["count"] > 0
    assert "rather than stalls" not in str(r)


# --- 6. advice only where it can work ------------------------------------------------


@pytest.mark.parametrize("num_workers", [0, 1])
def test_no_in_order_advice_with_one_loader_in_flight(loader_source, num_workers):
    loader_source(num_workers)
    rng = np.random.default_rng(5)
    n = 300
    wait = rng.integers(20_000, 80_000, n)
    wait[1:][rng.random(n - 1) < 0.2] = 60 * MS
    r = build(records(wait, np.full(n, 8 * MS)), INFO, SYNTHETIC, None)
    assert r["temporal"]["label"] == "IRREGULAR"
    assert not any("in_order" in line and "compare" in line for line in r["next"])
    assert "no batch can overtake another" in r["next"][-1]


def _uniformly_slow_summary(cores, cpus=2, num_workers=4):
    rng = np.random.default_rng(1)
    wait = (30 * MS * rng.uniform(0.9, 1.1, 60)).astype(np.int64)
    s = build(records(wait, np.full(60, 5 * MS)), INFO, SYNTHETIC, None).summary
    s["loader"] = {"num_workers": num_workers}
    s["host"] = {"usable_cpus": cpus}
    # Every fetch a stall: the stalls' intervals are the whole run.
    s["workers"] = {"intervals": {"slow": {"count": 59, "worker_cores_busy": cores,
                                           "wall_s": 1.0, "worker_cpu_s": cores},
                                  "fast": {"count": 0, "worker_cores_busy": None}}}
    return s


def test_no_more_workers_when_the_workers_saturate_the_cpus():
    nxt = sentences(advice.next_steps(_uniformly_slow_summary(cores=1.95)))
    assert not any("vary num_workers" in line for line in nxt)
    assert "already keep the 2 usable CPUs busy through the run (1.9 cores at num_workers=4)" in nxt[-1]
    nxt = sentences(advice.next_steps(_uniformly_slow_summary(cores=0.8)))
    assert "vary num_workers around 4" in nxt[-1]


def test_unreadable_worker_counters_leave_the_advice_alone():
    s = _uniformly_slow_summary(cores=None)
    assert "vary num_workers around 4" in sentences(advice.next_steps(s))[-1]
    s["workers"] = {"intervals": None}
    assert "vary num_workers around 4" in sentences(advice.next_steps(s))[-1]
    s["workers"] = None
    assert "vary num_workers around 4" in sentences(advice.next_steps(s))[-1]


def test_a_one_epoch_start_never_offers_persistent_workers(loader_source):
    """A 30-step recording whose 150 ms start is a third of the wall time:
    persistent_workers cannot help within one epoch."""
    loader_source(3)
    wait = np.r_[150.0, 0.05, 0.05, np.full(30, 1.0)]
    r = build(records((wait * MS).astype(np.int64), np.full(len(wait), 10 * MS)), INFO,
              SYNTHETIC, None)
    assert r["headline"]["label"] == "EPOCH-START"
    assert r["next"][0].startswith("The start (iter() and the first batches) holds")
    assert not any("persistent_workers" in line for line in r["next"])


def test_stalls_that_stand_apart_as_a_group_without_an_otsu_split(loader_source):
    """Measured with 2 workers burning 100 ms a batch on 2 cores against a
    10 ms consumer: the stalls (~40-95 ms) alternate with 6-26 ms fetches;
    Otsu's eta hovers at 0.8, and 4x the lower median is above most stalls,
    but the stalls form a group 4x the rest on their own."""
    loader_source(2)
    ms = np.array([188.5, 18.8, 46.2, 12.9, 70.2, 8.2, 83.2, 21.9, 63.5, 25.9, 41.7, 20.6,
                   61.5, 20.4, 70.0, 7.2, 94.8, 6.4, 91.3, 8.5, 63.8, 6.2, 41.6, 10.0])
    r = build(records((ms * MS).astype(np.int64), np.full(len(ms), 10 * MS)), INFO,
              SYNTHETIC, None)
    assert r["stalls"]["steps"] == list(range(2, 24, 2))
    assert (r["temporal"]["label"], r["temporal"]["period"]) == ("PERIODIC", 2)


def test_no_stalls_and_a_median_fetch_over_half_a_step_is_uniformly_slow():
    """Waits spread evenly over 0.5-40 ms against a 10 ms step: not every
    fetch is slow and no group stands apart, yet the typical fetch waits
    longer than the step computes."""
    rng = np.random.default_rng(12)
    wait = (rng.uniform(0.5, 40, 120) * MS).astype(np.int64)
    r = build(records(wait, np.full(120, 10 * MS)), INFO, SYNTHETIC, None)
    assert r["stalls"]["count"] == 0 and r["trend"] is None
    assert r["shape"] == "UNIFORMLY-SLOW"


def test_a_steady_per_batch_cost_without_stalls_stays_fast():
    """Measured on healthy loaders beside a CPU hog: ~2.8 ms of hand-over on
    most fetches of an 11 ms step, a third prefetched, no stall: FAST,
    worded as a per-batch cost."""
    rng = np.random.default_rng(13)
    wait = rng.lognormal(np.log(2.8), 0.2, 120) * MS
    wait[rng.random(120) < 0.3] = 0.1 * MS
    wait = wait.astype(np.int64)
    r = build(records(wait, np.full(120, 8 * MS)), INFO, SYNTHETIC, None)
    assert r["stalls"]["count"] == 0 and r["shape"] == "FAST"
    assert "spread over every fetch" in r["next"][0]


def test_a_burst_period_is_said_as_bursts_in_the_cadence_line():
    # 4 back-to-back stalls every 30 steps: the gaps between stalls are
    # 1 (most) and 27; the period is the bursts', and the cadence line
    # says so beside both histograms.
    wait = np.full(300, 100_000)
    for start in range(5, 300, 30):
        wait[start:start + 4] = 40 * MS
    r = build(records(wait, np.full(300, 10 * MS)), INFO, SYNTHETIC, None)
    t = r["temporal"]
    assert (t["label"], t["period"], t["counted"]) == ("PERIODIC", 30, "bursts")
    text = str(r)
    assert "cadence: a burst of stalls every 30 steps (modal gap between bursts)" in text
    assert "a stall every 30 steps" not in text
