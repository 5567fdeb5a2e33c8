"""wait_trend: a trend only where it holds against the run's own noise, and
a change after the first epoch is a STEP, not a slope."""


import numpy as np
import pytest

from traceml.findings import sentences, wait_trend

from support import ar1_waits, most_false_alarms

MS = 1_000_000


@pytest.mark.parametrize("start_ms,end_ms,label", [(1.0, 40.0, "RISING"),
                                                    (40.0, 1.0, "FALLING")])
@pytest.mark.parametrize("seed", range(3))
def test_a_ramp_is_a_trend_with_its_slope(seed, start_ms, end_ms, label):
    n = 80
    rng = np.random.default_rng(seed)
    wait = (np.linspace(start_ms, end_ms, n) * rng.lognormal(0.0, 0.15, n) * MS).astype(np.int64)
    tr = wait_trend.trend(wait, np.zeros(n, np.int32), 1.0 * MS)
    truth = (end_ms - start_ms) / (n - 1)
    assert tr["label"] == label
    assert tr["slope_ms_per_step"] == pytest.approx(truth, rel=0.3)
    low, high = tr["slope_interval_ms_per_step"]
    assert low <= truth <= high and (low > 0 if label == "RISING" else high < 0)
    assert tr["p_value"] < wait_trend.TREND_ALPHA


def _step_run(seed, first_ms=5.0, later_ms=1.0, per=30, epochs=3):
    rng = np.random.default_rng(seed)
    levels = np.repeat([first_ms] + [later_ms] * (epochs - 1), per)
    wait = (levels * rng.lognormal(0.0, 0.3, per * epochs) * MS).astype(np.int64)
    return wait, np.repeat(np.arange(epochs), per).astype(np.int32)


@pytest.mark.parametrize("seed", range(3))
def test_a_level_drop_after_epoch_0_is_a_step_not_a_slope(seed):
    wait, epoch = _step_run(seed)
    tr = wait_trend.trend(wait, epoch, 1.0 * MS)
    assert tr["label"] == wait_trend.STEP
    assert tr["slope_ms_per_step"] is None and tr["slope_ms_per_epoch"] is None
    assert tr["first_epoch"] == 0
    assert tr["first_epoch_median_s"] == pytest.approx(np.median(wait[:30]) * 1e-9)
    assert tr["later_epochs_median_s"] == pytest.approx(np.median(wait[30:]) * 1e-9)
    assert tr["first_epoch_median_s"] == pytest.approx(5e-3, rel=0.2)
    assert tr["later_epochs_median_s"] == pytest.approx(1e-3, rel=0.2)
    assert tr["p_value"] < wait_trend.TREND_ALPHA
    (note,) = wait_trend.notes({"trend": tr})
    (text,) = sentences([note])
    assert text.startswith("epoch 0's waits were ")
    assert "later epochs'" in text and "a one-off change after the first epoch" in text
    assert "persistent_workers" in text
    line = wait_trend._trend_next_line(tr)
    part = wait_trend.trend_part(tr)
    assert "per step" not in part and "µs" not in line and "ms" not in line
    assert part.startswith("wait STEP ")


def test_a_rise_after_epoch_0_is_a_step_too():
    wait, epoch = _step_run(0, first_ms=1.0, later_ms=5.0)
    tr = wait_trend.trend(wait, epoch, 1.0 * MS)
    assert tr["label"] == wait_trend.STEP
    (text,) = sentences(wait_trend.notes({"trend": tr}))
    assert "a cache filled" not in text and "not a cost that keeps growing" in text


def test_a_ramp_over_epochs_is_no_step():
    """The later epochs move too: a trend, not a one-off change."""
    n = 120
    rng = np.random.default_rng(7)
    wait = (np.linspace(1.0, 40.0, n) * rng.lognormal(0.0, 0.15, n) * MS).astype(np.int64)
    tr = wait_trend.trend(wait, np.repeat(np.arange(3), 40).astype(np.int32), 1.0 * MS)
    assert tr["label"] == wait_trend.RISING


def test_no_step_after_epoch_0_without_later_epochs_or_with_epoch_0_back():
    # The waits drop from 5 ms to 1 ms at step 30: without later epochs,
    # or with epoch 0 back at the end, that is a change inside the run
    # (Pettitt's test, at step 30), never "a change after epoch 0".
    wait, epoch = _step_run(0)
    for epochs in (np.zeros_like(epoch), np.r_[epoch[:-5], np.zeros(5, np.int32)]):
        tr = wait_trend.trend(wait, epochs, 1.0 * MS)
        assert tr["label"] == wait_trend.STEP and "first_epoch" not in tr, tr
        assert abs(tr["changed_at_step"] - 30) <= 1, tr
    # Too few steps in epoch 0 to stand for it.
    short = np.r_[np.zeros(5, np.int32), np.ones(len(wait) - 5, np.int32)]
    tr = wait_trend.trend(wait, short, 1.0 * MS)
    assert tr is None or "first_epoch" not in tr


def test_the_change_point_statistic_is_pettitts():
    # S at each cut against the pairwise sign sum, counted directly.
    rng = np.random.default_rng(4)
    x = rng.permutation(12)
    cuts = np.arange(1, 12)
    direct = [sum(np.sign(x[j] - x[i]) for i in range(c) for j in range(c, 12)) for c in cuts]
    assert wait_trend._cut_s(x, cuts).tolist() == direct
    # Ties count 0 through average ranks: a periodic series of equal waits
    # has no change point.
    from scipy.stats import rankdata

    tied = np.array([5, 1, 1, 1, 5, 1, 1, 1, 5, 1, 1, 1])
    direct = [sum(np.sign(tied[j] - tied[i]) for i in range(c) for j in range(c, 12))
              for c in cuts]
    assert wait_trend._cut_s(rankdata(tied) - 1.0, cuts).tolist() == direct
    periodic = np.full(120, 50_000, dtype=np.int64)
    periodic[::8] = 300 * MS
    assert wait_trend.trend(periodic, np.zeros(120, np.int32), 1.0 * MS) is None
    rows = np.stack([x, x[::-1]])
    assert wait_trend._cut_s(rows, cuts)[1].tolist() == [
        sum(np.sign(x[::-1][j] - x[::-1][i]) for i in range(c) for j in range(c, 12))
        for c in cuts]


def test_a_level_change_inside_the_run_is_found_by_itself():
    # AR(1) noise (phi 0.5, log sd 0.5) whose level triples at step 60 of
    # 120.  Measured over 40 seeds: found within 6 steps of it in 29 (32
    # STEP in all), where the slope test that gated it found 17; at phi
    # 0.8, 19 (24) against 12.  The same noise without the change claims
    # it in no more runs than TREND_ALPHA allows (the rule as a whole:
    # slope or change; none of the 40 at either phi).
    found, claimed = 0, 0
    for seed in range(20):
        wait = ar1_waits(100 + seed, 120, sigma=0.5, phi=0.5)
        stepped = np.r_[wait[:60], 3 * wait[60:]]
        tr = wait_trend.trend(stepped, np.zeros(120, np.int32), 1.0 * MS)
        found += tr is not None and tr["label"] == wait_trend.STEP and abs(
            tr["changed_at_step"] - 60) <= 6
        claimed += wait_trend.trend(wait, np.zeros(120, np.int32), 1.0 * MS) is not None
    assert found >= 13, found
    assert claimed <= most_false_alarms(20), claimed


@pytest.mark.parametrize("at", [0.25, 0.5, 0.75])
def test_a_clear_change_of_level_is_found_wherever_it_falls(at):
    """Independent noise (log sd 0.3) whose level triples at a quarter, a
    half or three quarters of 200 steps: a change as clear at the run's
    edges as in its middle.  The null fitted to the series as it is
    (the shift read as persistence) found it at 25% and 75% in 2 and 1
    of 40 seeds; fitted to the residuals, in 38-40 of 40 (here 8 of 10
    at least, the change placed within 5% of the run)."""
    n, found = 200, 0
    cut = int(at * n)
    for seed in range(10):
        wait = (2 * MS * np.random.default_rng(seed).lognormal(0.0, 0.3, n)).astype(np.int64)
        wait[cut:] *= 3
        tr = wait_trend.trend(wait, np.zeros(n, np.int32), 1.0 * MS)
        found += (tr is not None and tr["label"] == wait_trend.STEP
                  and abs(tr["changed_at_step"] - cut) <= 0.05 * n)
    assert found >= 8, found


@pytest.mark.parametrize("at, lo, hi", [(0.2, 2.3, 8.4), (0.8, 8.5, 2.3)])
def test_a_small_drift_beside_a_change_of_level_leaves_it_a_step(at, lo, hi):
    """A 4x change at 20% or 80% of 400 steps whose long side drifts 2%
    (a loaded host's slow creep), noise 2%: the ranks' best cut moved into
    the drift and the drift read as a trend of its own (helper 27C: STEP
    in 8 and 3 of 20, FALLING "a warm-up" beside); the least-squares cut
    places the change, and a side's drift under SIDE_TREND_SHARE of the
    change is no trend."""
    n, found = 400, 0
    cut = int(at * n)
    rng = np.random.default_rng(7)
    for seed in range(10):
        x = np.r_[np.full(cut, lo), np.full(n - cut, hi)]
        long_side = slice(cut, n) if at < 0.5 else slice(0, cut)
        size = x[long_side].size
        x[long_side] *= 1 + 0.02 * np.linspace(0, 1, size) * (1 if seed % 2 else -1)
        wait = (x * MS * np.exp(rng.normal(0, 0.02, n))).astype(np.int64)
        tr = wait_trend.trend(wait, np.zeros(n, np.int32), 2.3 * MS)
        found += (tr is not None and tr["label"] == wait_trend.STEP
                  and abs(tr["changed_at_step"] - cut) <= 2)
    assert found == 10, found


def test_the_residual_null_is_the_scores_less_each_sides_mean():
    """With a cut, the sieve is fitted to the normal scores less each
    side's mean: a series that is only a shift (plus independent noise)
    gives a null with no dependence left, where the series' own sieve
    reads the shift as persistence."""
    rng = np.random.default_rng(2)
    med = np.r_[rng.normal(0, 0.1, 100), 5 + rng.normal(0, 0.1, 100)]
    own, resid = wait_trend._null_series(med), wait_trend._null_series(med, 100)

    def lag1(rows):
        return np.mean([np.corrcoef(r[1:], r[:-1])[0, 1] for r in rows])
    assert lag1(own) > 0.4
    assert abs(lag1(resid)) < 0.15


def test_block_medians_split_the_steps_evenly():
    x = np.arange(300, dtype=np.int64)
    centre, med = wait_trend._block_medians(x, 200)
    edge = np.arange(201) * 300 // 200
    assert np.diff(edge).min() == 1 and np.diff(edge).max() == 2
    assert med.tolist() == [float(np.median(x[a:b])) for a, b in zip(edge[:-1], edge[1:])]
    assert centre.tolist() == [(a + b - 1) / 2 for a, b in zip(edge[:-1], edge[1:])]


def test_an_immaterial_step_is_none():
    wait, epoch = _step_run(0, first_ms=1.5, later_ms=1.0)
    assert wait_trend.trend(wait, epoch, 1.0 * MS) is None


def test_the_same_run_gives_the_same_answer():
    wait = ar1_waits(3, 150, median_ms=4.0, sigma=0.9)
    epoch = np.zeros(150, np.int32)
    assert wait_trend.trend(wait, epoch, 0.0) == wait_trend.trend(wait, epoch, 0.0)
    centre, med = wait_trend._block_medians(wait, 150)
    assert wait_trend._slope_test(centre, med) == wait_trend._slope_test(centre, med)


def test_the_bootstrap_statistics_match_their_definitions():
    rng = np.random.default_rng(1)
    series = rng.normal(size=(7, 23))
    i, j = np.triu_indices(23, 1)
    want = np.sign(series[:, j] - series[:, i]).sum(axis=1)
    assert (wait_trend._s_rows(series) == want).all()
    cut = 9
    want = np.sign(series[:, cut:, None] - series[:, None, :cut]).sum(axis=(1, 2))
    assert (wait_trend._step_s_rows(series, cut) == want).all()


def test_the_null_series_are_seeded_and_stationary():
    wait = ar1_waits(5, 200).astype(np.float64)
    a, b = wait_trend._null_series(wait), wait_trend._null_series(wait)
    assert a.shape == (wait_trend.TREND_RESAMPLES, 200) and (a == b).all()
    # The sieve keeps the noise's dependence: lag-1 correlation near phi.
    lag1 = np.mean([np.corrcoef(row[1:], row[:-1])[0, 1] for row in a])
    assert 0.6 < lag1 < 0.95


def _lockstep_rising(seed: int, rounds: int, workers: int) -> np.ndarray:
    """Each round's first fetch waits 2 ms rising 1% a step (lognormal
    noise, sd 0.1), the round's other fetches 50-65 us (ns, int64)."""
    rng = np.random.default_rng(seed)
    n = rounds * workers
    k = np.arange(n)
    stall = 2 * MS * (1 + 0.01 * k) * rng.lognormal(0.0, 0.1, n)
    calm = 50_000 * (1 + 0.3 * rng.random(n))
    return np.where(k % workers == 0, stall, calm).astype(np.int64)


@pytest.mark.parametrize("seed", range(4))
def test_a_cost_growing_in_lockstep_rounds_is_read_by_round(seed):
    """Two workers in lock-step: fetch by fetch the waits alternate and the
    rise hides (no trend, or a slope a hundredth of the true one); by round
    it is RISING, the slope the mean wait's per step."""
    wait = _lockstep_rising(seed, 100, 2)
    epoch = np.zeros(len(wait), dtype=np.int64)
    mean_slope_ms = 2 * 0.01 / 2      # the stall's 20 us a step, over a round of 2
    by_fetch = wait_trend.trend(wait, epoch, 1 * MS)
    assert by_fetch is None or by_fetch["slope_ms_per_step"] < 0.5 * mean_slope_ms
    found = wait_trend.trend(wait, epoch, 1 * MS, round_steps=2)
    assert found["label"] == wait_trend.RISING and found["round_steps"] == 2
    assert found["slope_ms_per_step"] == pytest.approx(mean_slope_ms, rel=0.15)
    low, high = found["slope_interval_ms_per_step"]
    assert low <= found["slope_ms_per_step"] <= high
    assert "median over rounds of 2 fetches" in wait_trend._trend_next_line(found)


def test_round_sums_are_each_epochs_whole_rounds():
    x = np.arange(11, dtype=np.int64) * 10
    epoch = np.array([0] * 7 + [1] * 4)
    sums, epochs = wait_trend._round_sums(x, epoch, 3)
    # epoch 0: rounds (0, 10, 20), (30, 40, 50), 60 left over; epoch 1: (70, 80, 90), 100 left.
    np.testing.assert_array_equal(sums, [30, 120, 240])
    assert sums.dtype == np.int64
    np.testing.assert_array_equal(epochs, [0, 0, 1])


def test_a_trend_read_over_round_sums_is_the_round_means_trend():
    # The rounds read as sums (exact integers) give the trend read over
    # the rounds' means: the same label and change, waits and slopes in
    # the means' units.  Lock-step rounds of 3, the stalled fetch growing
    # 8 -> 40 ms over 180 steps, and a level that quadruples at step 90.
    rng = np.random.default_rng(3)
    n, r = 180, 3
    epoch = np.zeros(n, dtype=np.int64)
    stall = np.where(np.arange(n) % r == 0, 1.0, 0.02)
    for base, want in ((np.linspace(8.0, 40.0, n), wait_trend.RISING),
                       (np.where(np.arange(n) < 90, 8.0, 32.0), wait_trend.STEP)):
        x = (base * stall * rng.lognormal(0.0, 0.2, n) * 1e6).astype(np.int64)
        by_sums = wait_trend.trend(x, epoch, 1e6, round_steps=r)
        means = x.reshape(-1, r).mean(axis=1)
        by_means = wait_trend._trend_or_step(means, epoch[::r], 1e6, r)
        assert by_sums is not None and by_means is not None
        assert by_sums["label"] == by_means["label"] == want
        for k, v in by_means.items():
            if k == "changed_at_step":
                assert by_sums[k] == v * r
            elif v is None:
                assert by_sums[k] is None, k
            elif k == "slope_ms_per_step":
                assert by_sums[k] == pytest.approx(v / r, rel=1e-9)
            elif k == "slope_interval_ms_per_step":
                assert by_sums[k] == pytest.approx([b / r for b in v], rel=1e-9)
            elif isinstance(v, float):
                assert by_sums[k] == pytest.approx(v, rel=1e-9), k
            else:
                assert by_sums[k] == v, k


def test_a_change_of_level_at_an_epochs_start_names_the_epoch():
    # Three epochs of 50 steady steps; the waits drift 1.0 -> 1.3 ms, then
    # hold 20 ms from epoch 2's first step (a file the dataset reads grew).
    n = 150
    rng = np.random.default_rng(0)
    base = np.where(np.arange(n) < 100, np.linspace(1.0, 1.3, n), 20.0)
    x = (base * rng.lognormal(0.0, 0.3, n) * 1e6).astype(np.int64)
    epoch = np.repeat([0, 1, 2], 50)
    t = wait_trend.trend(x, epoch, 4e6)
    assert t["label"] == wait_trend.STEP and t["changed_at_step"] == 100
    assert t["at_epoch_start"] == 2
    (f,) = wait_trend.notes({"trend": t})
    assert "before steady step 100, where epoch 2 began" in wait_trend.WORDS[f.code](f.numbers)
    # The same change 4 blocks into epoch 1: no epoch named.
    assert wait_trend._epoch_started_at(epoch, 54) is None
    assert wait_trend._epoch_started_at(epoch, 51) == 1


def test_a_step_read_by_rounds_says_round_means_not_median_waits():
    # 3 lock-step workers whose stall grows from 70 to 210 ms at step 27,
    # the round's two other fetches waiting ~0 (helper 29A): read by rounds
    # the levels are 23 and 70 ms, each round's mean, while the median
    # wait is 0 on both sides.  The note and the shape line say so.
    from traceml.findings import Finding, sentences

    t = {"label": "STEP", "changed_at_step": 27, "before_median_s": 0.0232,
         "after_median_s": 0.070, "change_point": True, "p_value": 0.004,
         "round_steps": 3, "slope_ms_per_step": None, "first_tenth_median_s": None,
         "last_tenth_median_s": None}
    (f,) = wait_trend.notes({"trend": t})
    text = sentences([Finding(f.code, f.numbers)])[0]
    assert "the mean wait per round of 3 fetches (one batch from each worker) was 23.2 ms " \
        "(median over the rounds) before steady step 27 and 70 ms from it on" in text
    assert "Pettitt's change-point test, p = 0.004" in text
    assert "a round of 3 fetches (at steady step 27" in wait_trend.trend_part(t)
    # Fetch by fetch: the waits' own medians.
    t = {**t, "round_steps": None, "change_point": None}
    (f,) = wait_trend.notes({"trend": t})
    assert sentences([Finding(f.code, f.numbers)])[0].startswith(
        "the waits were 23.2 ms (median) before steady step 27")


def test_a_trend_the_host_moved_with_says_so_before_the_data():
    # 3 CPU hogs started at step 120 of an unchanged loader (helper 33B):
    # "look at what changed at steady step 128 (a worker's shard ...)".
    from traceml.findings import advice

    trend = {"label": wait_trend.STEP, "slope_ms_per_step": None, "slope_ms_per_epoch": None,
             "first_tenth_median_s": 0.001, "last_tenth_median_s": 0.0034,
             "changed_at_step": 128, "before_median_s": 0.00099, "after_median_s": 0.00336,
             "host_cores": [0.1, 2.9]}
    s = {"diagnosis": "BALANCED", "input_share": 0.15, "shape": "FAST", "concentration": {},
         "temporal": None, "loader": {"num_workers": 2}, "input_wait_s": {"median": 0.002},
         "stalls": {"count": 0}, "trend": trend}
    p = dict(advice._steady_steps(s, False))["trend_next"]
    said = advice.WORDS["trend_next"](p)
    assert "other programs' CPU went from 0.1 to 2.9 cores at steady step 128" in said, said
    assert "a worker's shard" not in said
    # The host moving less than HOST_CHANGE_CORES, or against the wait:
    # the data's next step, as before.
    for cores in ([0.1, 0.1 + 0.9 * wait_trend.HOST_CHANGE_CORES], [2.9, 0.1]):
        trend["host_cores"] = cores
        p = dict(advice._steady_steps(s, False))["trend_next"]
        assert "look at what changed at steady step 128" in advice.WORDS["trend_next"](p)


def test_probe_steps_without_a_fetch_mark_make_no_change_of_level():
    # 60 probe steps whose input costs 8 ms, the last 5 without
    # fetch_done() (helper 36B): their wait is not measured (0 in the
    # record), and read "wait STEP 8 ms -> 2 ms (at steady step 50)".
    import traceml
    from traceml import _core

    n, ms = 60, 1_000_000
    # (Seed 18's noise reads STEP, and FALLING at a wider spread, with the
    # unmarked steps' zeros in the series.)
    rng = np.random.default_rng(18)
    wait = (8 * ms * np.exp(rng.normal(0, 0.2, n))).astype(np.int64)
    step = wait + 5 * ms
    rec = np.zeros(n, dtype=_core.RECORD_DTYPE)
    rec["begin_ns"] = 10**9 + np.r_[0, np.cumsum(step[:-1])]
    rec["fetch_done_ns"] = rec["begin_ns"] + wait
    rec["end_ns"] = rec["begin_ns"] + step
    rec["fetch_done_ns"][55:] = rec["begin_ns"][55:]
    rec["flags"][55:] = _core.FLAG_NO_FETCH
    r = traceml.Recorder()
    r._append_records(rec)
    s = r.report()
    assert s["trend"] is None, s["trend"]
    assert "STEP" not in str(s).splitlines()[2]


def test_a_slow_first_epoch_of_few_rounds_is_a_step():
    # 3 epochs of 16 fetches at 2 persistent workers, a cache filled in
    # epoch 0 (helper 36A): 7 steady rounds before, 16 after.  Read by
    # rounds the first epoch was under MIN_STEADY_STEPS points, and the
    # change went unsaid in 3 of 5 runs.
    rng = np.random.default_rng(2)
    per, ms = 14, 1_000_000
    ep = np.repeat(np.arange(3), per)
    first = ep == 0
    stall = np.arange(3 * per) % 2 == 0
    wait = np.where(first & stall, 23 * ms, np.where(first, 1.5 * ms, 0.8 * ms))
    wait = (wait * np.exp(rng.normal(0, 0.2, len(ep)))).astype(np.int64)
    t = wait_trend.trend(wait, ep, 1e6, round_steps=2)
    assert t is not None and t["label"] == wait_trend.STEP, t
    assert t["first_epoch"] == 0 and t["first_epoch_median_s"] > 10 * t["later_epochs_median_s"]


def test_lockstep_rounds_over_short_epochs_claim_few_steps():
    # The same loop with no change: steps claimed at about TREND_ALPHA
    # (400 seeds of lognormal noise, sd 0.9: 1% at 2 workers).
    rng = np.random.default_rng(0)
    per, hits = 14, 0
    ep = np.repeat(np.arange(3), per)
    for _ in range(200):
        w = np.where(np.arange(3 * per) % 2 == 0, 20e6, 0.5e6)
        w = (w * np.exp(rng.normal(0, 0.9, 3 * per))).astype(np.int64)
        hits += wait_trend.trend(w, ep, 1e6, round_steps=2) is not None
    assert hits <= 6, hits


def test_a_change_of_level_in_a_short_run_read_by_rounds_is_a_step():
    # An IterableDataset's faster shard runs out half-way through 32
    # fetches at 2 workers (helper 36A): waits alternating 1 and 30 ms,
    # then 36 ms each.  Read by rounds, 15 points: a cut needed 8 on
    # each side, and the run read PERIODIC, RISING "... a leak" or
    # TOO-FEW, never STEP (0 of 3).
    rng = np.random.default_rng(4)
    ms, n = 1_000_000, 30
    i = np.arange(n)
    wait = np.where(i < 14, np.where(i % 2 == 0, 30 * ms, 1 * ms), 36 * ms)
    wait = (wait * np.exp(rng.normal(0, 0.1, n))).astype(np.int64)
    t = wait_trend.trend(wait, np.zeros(n, dtype=np.int64), 1e6, round_steps=2)
    assert t is not None and t["label"] == wait_trend.STEP, t
    assert 12 <= t["changed_at_step"] <= 16, t


def test_the_hinge_error_is_the_best_bend_by_least_squares():
    # Checked against NumPy's lstsq at every bend, both hinge forms.
    rng = np.random.default_rng(3)
    t = np.arange(30, dtype=np.float64) * 2 + 0.5
    y = np.where(t < 35, 1.0, 1.0 + 0.4 * (t - 35)) + rng.normal(0, 0.1, 30)
    best = np.inf
    for bend in t[1:-1]:
        for h in (np.maximum(0.0, t - bend), np.minimum(0.0, t - bend)):
            a = np.c_[np.ones_like(t), h]
            res = y - a @ np.linalg.lstsq(a, y, rcond=None)[0]
            best = min(best, float(res @ res))
    assert wait_trend._hinge_sse(t, y) == pytest.approx(best, rel=1e-9)
    assert wait_trend._hinge_sse(t[:2], y[:2]) == np.inf


def _hidden_leak(seed, n=60):
    """2 workers' waits: flat 1 ms for 36 fetches, then the awaited
    worker's climbing 0.6 ms a fetch (log-normal noise, sd 0.35), the
    other worker's fetch mostly ready (5-60% of it)."""
    rng = np.random.default_rng(seed)
    i = np.arange(n)
    wait = np.where(i < 36, 1.0, 1.0 + 0.6 * (i - 36)) * rng.lognormal(0, 0.35, n)
    wait[1::2] *= rng.uniform(0.05, 0.6, n // 2)
    return (wait * MS).astype(np.int64)


def test_a_wait_flat_then_climbing_is_no_change_of_level():
    # Helper 39A: a leak a prefetching loader hides at first, the wait
    # flat for 35 steps then climbing 13x: "STEP ... not a cost per step"
    # in 2 of 9 runs, its rising side too short for its own slope test.
    # A hinge (a level, then a ramp) fits it better than two levels.
    # Over 30 such runs, read by rounds of 2: STEP in 28 without the hinge.
    labels = [(wait_trend.trend(_hidden_leak(seed), np.zeros(60, dtype=np.int64), 2 * MS,
                                round_steps=2) or {}).get("label") for seed in range(30)]
    assert labels.count(wait_trend.STEP) <= 5, labels
    # A change of level still fits two levels better than any hinge.
    rng = np.random.default_rng(0)
    n = 60
    step = (np.where(np.arange(n) < 35, 1.0, 10.0) * rng.lognormal(0, 0.1, n) * MS).astype(np.int64)
    centre, med = wait_trend._block_medians(step, n)
    cut = wait_trend._least_squares_cut(centre, med.astype(float), n)
    assert wait_trend._two_levels_fit(centre, med.astype(float), cut)
    assert wait_trend.trend(step, np.zeros(n, dtype=np.int64), 2 * MS)["label"] == wait_trend.STEP


def test_a_material_move_without_a_trend_reads_not_yet():
    # Helper 39A: the same leak printed nothing in 5 of 9 runs: the tenths
    # 1 ms -> 13 ms, the slope test not past its level at 60 steps.  The
    # answer is "not yet", with the two medians (each round's mean).
    n = 60
    wait = np.full(n, MS, dtype=np.int64)
    wait[-6:] = 13 * MS
    got = wait_trend.not_yet(wait, np.zeros(n, dtype=np.int64), 2 * MS)
    assert got == {"label": wait_trend.RISING, "first_tenth_median_s": pytest.approx(1e-3),
                   "last_tenth_median_s": pytest.approx(13e-3), "round_steps": 1}
    rounds = wait_trend.not_yet(wait, np.zeros(n, dtype=np.int64), 2 * MS, round_steps=2)
    assert rounds["round_steps"] == 2 and rounds["last_tenth_median_s"] == pytest.approx(13e-3)
    # Under the floor, or under twice the first: nothing to say.
    assert wait_trend.not_yet(wait, np.zeros(n, dtype=np.int64), 20 * MS) is None
    small = np.full(n, 10 * MS, dtype=np.int64)
    small[-6:] = 15 * MS
    assert wait_trend.not_yet(small, np.zeros(n, dtype=np.int64), MS) is None
    (f,) = wait_trend.notes({"trend": None, "trend_not_yet": got})
    said = wait_trend.WORDS[f.code](f.numbers)
    assert said.startswith("the wait rose from 1 ms to 13 ms between the first and the "
                           "last tenth") and "record longer" in said
    assert wait_trend.notes({"trend": {"label": "RISING"}, "trend_not_yet": got}) == []


def test_levels_read_less_their_waits_for_a_core_say_so():
    # Helper 41A: "the waits were 2.15 ms (median) before steady step 39
    # and 21.1 ms from it on" where every later fetch slept 25 ms beside a
    # CPU hog: the trend read the clocked waits less their waits for a core.
    p = {"changed_at_step": 39, "before_median_s": 2.15e-3, "after_median_s": 21.1e-3,
         "at_epoch_start": None, "change_point": True, "p_value": 1e-4, "round_steps": None,
         "less_core_waits": True}
    said = wait_trend.WORDS["trend_shift"](p)
    assert said.startswith("the waits, less their waits for a core, were 2.15 ms (median) "
                           "before steady step 39 and 21.1 ms from it on")
    assert wait_trend.WORDS["trend_shift"]({**p, "less_core_waits": None}).startswith(
        "the waits were 2.15 ms")
    said = wait_trend.WORDS["trend_not_yet"]({"label": "RISING", "first_tenth_median_s": 1e-3,
                                              "last_tenth_median_s": 9e-3, "round_steps": 1,
                                              "less_core_waits": True})
    assert said.startswith("the wait, less its waits for a core, rose from 1 ms to 9 ms")
    said = wait_trend._trend_next_line({"label": "RISING", "slope_ms_per_step": 0.25,
                                        "slope_ms_per_epoch": None,
                                        "first_tenth_median_s": 2e-3,
                                        "last_tenth_median_s": 20e-3, "less_core_waits": True})
    assert said.startswith("The input wait, less its waits for a core, grows steadily")


def test_a_step_where_workers_stop_making_batches_names_them():
    """Helper 64: 3 workers, worker 0's shard twice the others': rounds of
    0, 1, 2 for 72 steps, then worker 0 alone.  The change at step 72 is
    the other shards running out, measured from the delivery record."""
    from traceml.findings import advice

    workers = np.r_[np.tile([0, 1, 2], 24), np.zeros(28, dtype=np.int64)]
    got = wait_trend.workers_at_change(workers, 72)
    assert got == {"workers_before": [0, 1, 2], "workers_after": [0]}
    # Every worker on both sides, an unknown worker, or no change: nothing.
    assert wait_trend.workers_at_change(np.tile([0, 1, 2], 30), 45) is None
    assert wait_trend.workers_at_change(np.full(20, -1), 10) is None
    assert wait_trend.workers_at_change(workers, 0) is None
    said = advice.WORDS["trend_next"]({"label": wait_trend.STEP, "changed_at_step": 72,
                                       "at_epoch_start": None, **got})
    assert said.startswith("From steady step 72 only worker 0 made batches (workers 1 and 2 "
                           "made none after it): the others' shards ran out"), said
