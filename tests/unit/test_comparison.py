"""comparison: what compare() says beside its verdict."""

import numpy as np
import pytest

from traceml.findings import comparison


def _summary(others_cores: float, cpus: int = 2) -> dict:
    """A summary whose sampler saw other programs run ``others_cores``
    cores over 0.3 s of stalls and 0.7 s of the rest."""
    return {"workers": {"intervals": {
        "unavailable": None,
        "slow": {"others_cpu_s": 0.3 * others_cores, "wall_s": 0.3},
        "fast": {"others_cpu_s": 0.7 * others_cores, "wall_s": 0.7}}},
        "host": {"usable_cpus": cpus}}


def test_host_load_is_other_programs_cpu_over_the_intervals():
    assert comparison.host_load_cores(_summary(0.5)) == 0.5
    s = _summary(0.5)
    s["workers"]["intervals"]["slow"]["others_cpu_s"] = None   # unread: the rest counts
    assert comparison.host_load_cores(s) == 0.5
    assert comparison.host_load_cores({"workers": None}) is None


def test_the_host_note_needs_loads_apart_by_a_tenth_of_the_cpus():
    # 2 CPUs: other programs 1.40 cores during the baseline, 0.00 during the
    # run (a helper's "30% slower" run read MIXED, the host its cause).
    note = comparison.host_note(_summary(1.4), _summary(0.0))
    assert "1.40 cores during the baseline and 0.00 during this run (of 2 CPUs)" in note
    gap = comparison.HOST_LOAD_TOL * 2
    assert comparison.host_note(_summary(1.0), _summary(1.0 + 0.9 * gap)) is None
    assert comparison.host_note(_summary(1.0), _summary(1.0 + 1.1 * gap)) is not None
    assert comparison.host_note(_summary(1.0), {"host": {"usable_cpus": 2}}) is None


def test_a_change_the_host_moved_the_same_way_is_not_yet_the_codes():
    # Baseline beside 0.96 cores of other programs, the run beside 0.04:
    # an IMPROVEMENT may be the host's; a REGRESSION against it stands.
    busy, quiet = _summary(0.96), _summary(0.04)
    assert comparison.host_went_with(comparison.IMPROVEMENT, busy, quiet)
    assert not comparison.host_went_with(comparison.REGRESSION, busy, quiet)
    assert comparison.host_went_with(comparison.REGRESSION, quiet, busy)
    assert not comparison.host_went_with(comparison.IMPROVEMENT, quiet, busy)
    # Loads within HOST_LOAD_TOL of the CPUs: the verdict stands.
    assert not comparison.host_went_with(comparison.IMPROVEMENT, _summary(0.3), _summary(0.2))
    assert not comparison.host_went_with(comparison.MIXED, busy, quiet)


def _timed(others_cores: float, wait_s: float, step_s: float) -> dict:
    return {**_summary(others_cores), "input_wait_s": {"mean": wait_s},
            "step_s": {"mean": step_s}}


def test_a_change_larger_than_the_hosts_move_can_explain_stands():
    # 2 CPUs, others 1.00 -> 0.00 cores: the job's work can speed up by at
    # most (2 - 0) / (2 - 1) = 2x.  A wait 52.3 ms -> 1.57 ms (33x) is the
    # code's; a wait 40 -> 25 ms with its step 50 -> 35 ms is within it.
    busy, quiet = 1.0, 0.0
    assert not comparison.host_went_with(
        comparison.IMPROVEMENT, _timed(busy, 0.0523, 0.06), _timed(quiet, 0.00157, 0.01))
    assert comparison.host_went_with(
        comparison.IMPROVEMENT, _timed(busy, 0.040, 0.050), _timed(quiet, 0.025, 0.035))
    # 0.69 -> 1.00 cores: at most (2 - 0.69) / (2 - 1) = 1.31x slower; a
    # step 7.04 -> 12.8 ms (1.82x) stands as REGRESSION.
    assert not comparison.host_went_with(
        comparison.REGRESSION, _timed(0.69, 0.0063, 0.00704), _timed(1.0, 0.0062, 0.0128))
    assert comparison.host_went_with(
        comparison.REGRESSION, _timed(0.69, 0.0063, 0.00704), _timed(1.0, 0.0072, 0.0080))
    # Others holding every CPU in the busier run: nothing bounds the host.
    assert comparison.host_went_with(
        comparison.REGRESSION, _timed(0.5, 0.001, 0.01), _timed(2.0, 0.1, 0.2))


def test_batch_means_and_the_noise_test_follow_their_definitions():
    import math

    import numpy as np
    from scipy import stats

    rng = np.random.default_rng(3)
    x = rng.normal(10.0, 2.0, 150)
    mean, se, b = comparison.batch_means(x)
    assert b == 5 and mean == x.mean()          # round(150 ** (1/3)) batches of 30
    means = x.reshape(5, 30).mean(axis=1)
    assert se == np.std(means, ddof=1) / math.sqrt(5)
    y = rng.normal(11.0, 2.0, 200)
    my, sey, by = comparison.batch_means(y)
    # Welch's test on the batch means' statistics, as scipy computes it.
    want = stats.ttest_ind_from_stats(my, sey * math.sqrt(by), by, mean, se * math.sqrt(b), b,
                                      equal_var=False).pvalue
    assert comparison.noise_p_value(x, y) == np.float64(want) or abs(
        comparison.noise_p_value(x, y) - want) < 1e-12
    assert comparison.batch_means(x[:3]) is None        # 2 batches need 4 values
    assert comparison.noise_p_value(x[:3], y) is None


def test_batches_of_whole_rounds_hold_a_lock_step_loops_stalls_alike():
    import numpy as np

    # 12 steady steps of 4 lock-step workers: a 290 ms stall at the first
    # fetch of each round, 10 ms steps between (noise of +-1 ms).
    rng = np.random.default_rng(5)
    x = 10.0 + rng.uniform(-1, 1, 12)
    x[0::4] = 290.0 + rng.uniform(-20, 20, 3)
    # In batches of round(12 ** (1/3)) = 2 (6 steps) the batches hold one
    # stall and two; in whole rounds (4 steps, 3 batches) one each.
    mean, se, b = comparison.batch_means(x)
    assert b == 2 and se == np.std(x.reshape(2, 6).mean(axis=1), ddof=1) / np.sqrt(2)
    mean4, se4, b4 = comparison.batch_means(x, round_steps=4)
    assert b4 == 3 and mean4 == mean
    assert se4 == np.std(x.reshape(3, 4).mean(axis=1), ddof=1) / np.sqrt(3)
    assert se4 < se / 5
    # Too few values for two batches of a round: no test.
    assert comparison.batch_means(x[:7], round_steps=4) is None
    fixed = 10.7 + rng.uniform(-1, 1, 12)
    assert comparison.noise_p_value(x, fixed, 4, 4) < comparison.noise_p_value(x, fixed)


def test_identical_loops_rarely_differ_beyond_noise():
    """Two runs of the same autocorrelated loop (AR(1) steps, phi 0.8):
    the noise test rejects in about NOISE_ALPHA of pairs, where a plain
    tolerance of 2% of the step flags most of them."""
    import numpy as np

    def run(seed):
        rng = np.random.default_rng(seed)
        z = np.zeros(150)
        for i in range(1, 150):
            z[i] = 0.8 * z[i - 1] + rng.normal(0.0, 0.6)
        return 15.0 + z

    rejected = beyond_tol = 0
    for seed in range(200):
        a, b = run(2 * seed), run(2 * seed + 1)
        rejected += comparison.noise_p_value(a, b) < comparison.NOISE_ALPHA
        beyond_tol += abs(b.mean() - a.mean()) > comparison.STEP_TOL * a.mean()
    assert beyond_tol > 60
    # Measured 1.7% over 300 pairs (see comparison's comment); 8 of 200 is
    # past twice that with odds under 1 in 100.
    assert rejected <= 8


def test_a_change_past_its_tolerance_but_within_the_noise_is_not_yet():
    # Wait 4.59 -> 3.31 ms and step 16.6 -> 20.2 ms (a helper's 1 -> 4
    # workers on a loaded host), both past their tolerance, neither past
    # the runs' noise: UNSETTLED, and why says what would settle it.
    v = comparison.compare_means(4.59e-3, 3.31e-3, 16.6e-3, noise_p=0.014)
    assert v.label == comparison.EQUIVALENT and v.noise_p == 0.014
    moved = comparison.compare_measures(v, 0.277, 0.164, None, None, 16.6e-3, 20.2e-3,
                                        step_noise_p=0.095, share_noise_p=0.012)
    assert [m.direction for m in moved] == ["same", "same", None, "same"]
    assert comparison.overall(v, moved) == comparison.UNSETTLED
    why = comparison.compare_why(v, moved)
    assert "within the runs' own noise: p = 0.095, not under 0.01): not yet" in why
    assert "): same" not in why
    # The same step past the noise: a slower loop, whatever else.
    moved = comparison.compare_measures(v, 0.277, 0.164, None, None, 16.6e-3, 20.2e-3,
                                        step_noise_p=0.001, share_noise_p=0.012)
    assert comparison.overall(v, moved) == comparison.REGRESSION
    # No noise test made (summaries alone): the tolerances decide, as before.
    v = comparison.compare_means(4.59e-3, 3.31e-3, 16.6e-3)
    assert v.label == comparison.IMPROVEMENT


def test_an_improvement_needs_no_measure_worse_within_the_noise():
    # A 30% slower loader on a loaded host: input share fell past the noise
    # (the step grew), the step grew 33% but within the runs' noise.  Not
    # an improvement: not yet anything.
    v = comparison.compare_means(3.06e-3, 3.54e-3, 17e-3, noise_p=0.08)
    moved = comparison.compare_measures(v, 0.18, 0.156, None, None, 17e-3, 22.6e-3,
                                        step_noise_p=0.033, share_noise_p=0.001)
    assert [m.direction for m in moved] == ["same", "better", None, "same"]
    assert comparison.overall(v, moved) == comparison.UNSETTLED
    # The step past the noise: a slower loop (REGRESSION, whatever else).
    moved = comparison.compare_measures(v, 0.18, 0.156, None, None, 17e-3, 22.6e-3,
                                        step_noise_p=0.001, share_noise_p=0.001)
    assert comparison.overall(v, moved) == comparison.REGRESSION


def test_runs_of_different_batch_sizes_are_judged_per_sample():
    from traceml import comparing

    # 8 samples a step of 14 ms (wait 1.5 ms) against 32 a step of 50 ms
    # (wait 1.5 ms): per step the larger batch is slower; per sample it is
    # 1.56 against 1.75 ms a sample, and its wait 47 against 188 us.
    def summary(bs, wait, step):
        return {"loader": {"batch_size": bs}, "input_wait_s": {"mean": wait},
                "step_s": {"mean": step}, "input_share": wait / step}

    label, why, moved = comparing.judge(summary(8, 1.5e-3, 14e-3), summary(32, 1.5e-3, 50e-3))
    assert label == comparison.IMPROVEMENT, why
    assert why.startswith("batch_size 8 -> 32: each measure per sample")
    step = next(m for m in moved if m.measure == "step_time")
    assert (step.base, step.run) == (14e-3 / 8, 50e-3 / 32)
    # The same batch size: judged per step, a REGRESSION.
    label, _, _ = comparing.judge(summary(8, 1.5e-3, 14e-3), summary(8, 1.5e-3, 50e-3))
    assert label == comparison.REGRESSION


def test_past_the_hosts_bound_only_beyond_the_runs_noise():
    # Others 1.06 -> 1.40 cores of 2: the job stretches by at most
    # 0.94 / 0.60 = 1.57x.  A step 1.64x longer whose series scatter
    # (sd a third of the mean, 100 steps) is within noise of 1.57x: the
    # host may explain it.  A step 5x longer is past it beyond the noise.
    import numpy as np

    rng = np.random.default_rng(7)
    base_step = rng.normal(10e6, 3.3e6, 100)
    base_wait = rng.normal(5e6, 1.6e6, 100)

    def run(factor):
        return {"step": rng.normal(10e6 * factor, 3.3e6 * factor, 100),
                "wait": rng.normal(5e6 * factor, 1.6e6 * factor, 100)}

    base = {"step": base_step, "wait": base_wait}
    for factor, explained in ((1.64, True), (5.0, False)):
        r = run(factor)
        a, b = _timed(1.06, base_wait.mean() * 1e-9, base_step.mean() * 1e-9), _timed(
            1.40, r["wait"].mean() * 1e-9, r["step"].mean() * 1e-9)
        assert comparison.host_went_with(comparison.REGRESSION, a, b, base, r) is explained
    # Without the series the means alone decide: 1.64x is past 1.57x.
    r = run(1.64)
    a, b = _timed(1.06, 0.005, 0.010), _timed(1.40, 0.0082, 0.0164)
    assert not comparison.host_went_with(comparison.REGRESSION, a, b)


def test_a_stall_rate_moves_only_beyond_the_two_counts_noise():
    import math

    # Under one rate, the run's count given both is Binomial(k, its share
    # of the steps); the two-sided p sums the outcomes no likelier than
    # the one seen (by hand, here: 11 stalls, equal steps, 1 in the run).
    k, q = 11, 0.5
    pmf = [math.comb(k, j) * q ** j * (1 - q) ** (k - j) for j in range(k + 1)]
    want = sum(x for x in pmf if x <= pmf[1] * (1 + 1e-7))
    assert comparison.stall_rate_p_value((10, 196), (1, 196)) == pytest.approx(want)
    assert comparison.stall_rate_p_value((0, 196), (0, 196)) is None
    assert comparison.stall_rate_p_value(None, (1, 196)) is None
    # A run file's nonsense (steps scaled by a negative batch size): no test.
    assert comparison.stall_rate_p_value((3, -28.0), (1, 196)) is None
    # Identical loops beside a busy host: 10 and 1 stalls in 196 steps each,
    # the mean wait and step unchanged: not a verdict on the stall rate.
    v = comparison.compare_means(2.0e-3, 2.0e-3, 10e-3)
    moved = comparison.compare_measures(v, 0.17, 0.17, (10, 196), (1, 196), 10e-3, 10e-3)
    rate = next(m for m in moved if m.measure == "stall_rate")
    assert rate.direction == "same" and comparison.held_by_noise(rate)
    assert comparison.overall(v, moved) == comparison.UNSETTLED
    # 20 against 1: beyond the noise, better.
    moved = comparison.compare_measures(v, 0.17, 0.17, (20, 196), (1, 196), 10e-3, 10e-3)
    assert comparison.overall(v, moved) == comparison.IMPROVEMENT


def test_a_stall_line_among_the_bulk_gives_no_stall_rate_verdict():
    # Identical configurations, 1600 steps each, the baseline's line
    # (9.62 ms) under its median wait (10.5 ms): 787 and 478 fetches past
    # it, the mean wait and step the same (helper 29B).  The count follows
    # the waits' level there; IMPROVEMENT on it alone was the fault.
    rng = np.random.default_rng(0)
    base_wait = rng.normal(10.5e6, 1.5e6, 1600)
    near = comparison.near_line_rate(base_wait, 9.62e-3)
    want = 100 * np.mean((base_wait > 9.62e6 / 1.1) & (base_wait <= 9.62e6 * 1.1))
    assert near == pytest.approx(want) and near > 30
    v = comparison.compare_means(11.4e-3, 10.6e-3, 15.9e-3)
    assert v.label == comparison.EQUIVALENT
    moved = comparison.compare_measures(v, 0.714, 0.715, (787, 1600), (478, 1600),
                                        15.9e-3, 14.8e-3, near_line=(near, near))
    rate = next(m for m in moved if m.measure == "stall_rate")
    assert rate.direction is None and rate.base == pytest.approx(100 * 787 / 1600)
    assert comparison.overall(v, moved) == comparison.EQUIVALENT
    assert "stalls per 100 steps 49.2 -> 29.9 not judged (the stall line falls among the " \
        "fetches' bulk" in comparison.compare_why(v, moved)
    # Two groups with the line in the gap between (1 ms and 100 ms waits,
    # the line at 40 ms): no fetch near it, the rate judged.
    gap = comparison.near_line_rate(np.r_[np.full(100, 1e6), np.full(100, 1e8)], 0.04)
    assert gap == 0.0
    moved = comparison.compare_measures(v, 0.714, 0.715, (400, 1600), (100, 1600),
                                        15.9e-3, 14.8e-3, near_line=(gap, gap))
    assert next(m for m in moved if m.measure == "stall_rate").direction == "better"


def test_compare_leaves_out_the_fetches_each_report_gave_the_host():
    # One healthy loop twice: quiet, and on a busy host whose 25 fetches
    # waited ~6 ms for a core inside them (the host's waits, no stalls in
    # either report).  Counted at the baseline's line, those fetches are
    # the host's there too: no stall rate moves.
    import corpus
    from traceml import comparing

    busy = corpus.replay(corpus.healthy_on_a_busy_host(1, 25, 6.0))
    assert busy.summary["stalls"]["count"] == 0
    hw = busy.summary["stalls"]["host_waits"]
    assert hw["count"] == 25 and len(hw["steps"]) == 25
    line = busy.summary["stalls"]["threshold_s"]
    assert (busy.input_wait_ns[hw["steps"]] > line * 1e9).all()
    assert comparing._stalls_over(busy, line)[0] == 0
    quiet = corpus.replay(corpus.healthy_on_a_busy_host(1, 0, 6.0))
    counted = [comparing._stalls_over(r, quiet.summary["stalls"]["threshold_s"])[0]
               for r in (quiet, busy)]
    assert counted == [0, 0], counted


def test_a_wait_saved_into_a_longer_compute_is_not_an_improvement():
    # 0 -> 2 workers on 2 cores (helper 29B): the wait 20.4 -> 3.08 ms,
    # the step 33.6 -> 35.6 ms (inside its tolerance), so the compute rose
    # 13.2 -> 32.5 ms: the saved wait went into the step.
    v = comparison.compare_means(20.4e-3, 3.08e-3, 33.6e-3)
    assert v.label == comparison.IMPROVEMENT
    moved = comparison.compare_measures(v, 0.606, 0.087, None, None, 33.6e-3, 35.6e-3)
    step = next(m for m in moved if m.measure == "step_time")
    assert step.direction == "same"
    assert comparison.overall(v, moved) == comparison.MIXED
    why = comparison.compare_why(v, moved)
    assert "the step did not fall with the wait: its compute rose 13.2 ms -> 32.5 ms" in why
    # The compute splits say which part rose: its wait for a core here.
    def body(cpu_s, wait_s):
        return {"steps": 10, "compute_s": 10 * (cpu_s + wait_s), "runq_known": True,
                "parts_s": {"main_cpu": 10 * cpu_s, "cpu_wait": 10 * wait_s, "off_cpu": 0.0}}

    why = comparison.compare_why(v, moved, (body(13e-3, 0.2e-3), body(13.1e-3, 19.4e-3)))
    assert "taking the model's cores: its wait for a core 200 µs -> 19.4 ms a step" in why
    # Its own CPU (8 -> 16 ms a step on a CPU, helper 33B): not the cores.
    why = comparison.compare_why(v, moved, (body(8e-3, 0.2e-3), body(16e-3, 0.5e-3)))
    assert "the step's own work: on a CPU 8 ms -> 16 ms a step" in why, why
    assert "taking the model's cores" not in why
    # The same wait saved with the compute unchanged: the step falls too.
    moved = comparison.compare_measures(v, 0.606, 0.087, None, None, 33.6e-3, 16.3e-3)
    assert comparison.overall(v, moved) == comparison.IMPROVEMENT
    assert "did not fall" not in comparison.compare_why(v, moved)


def test_stalls_saved_into_a_longer_compute_are_not_an_improvement():
    # num_workers 1 -> 3 beside a 2-thread model (helper 30B): the stall
    # rate 36.2 -> 0 per 100 steps is the one measure past its noise; the
    # wait 26.9 -> 9.31 ms and the step 46.1 -> 39.8 ms are within it,
    # and the compute rose 19.2 -> 30.5 ms.  That read IMPROVEMENT.
    v = comparison.compare_means(26.9e-3, 9.31e-3, 46.1e-3, noise_p=0.043)
    moved = comparison.compare_measures(v, 0.584, 0.234, (21, 58), (0, 58), 46.1e-3, 39.8e-3,
                                        step_noise_p=0.18, share_noise_p=0.014)
    dirs = {m.measure: m.direction for m in moved}
    assert dirs["stall_rate"] == "better" and dirs["mean_wait"] == "same"
    assert dirs["step_time"] == "same"
    # The step fell 6.3 ms, past its tolerance, in the noise (p = 0.18):
    # not yet, neither IMPROVEMENT nor "did not fall" (helper 36B).
    assert comparison.overall(v, moved) == comparison.UNSETTLED
    why = comparison.compare_why(v, moved)
    assert "the step fell less than the wait: its compute rose 19.2 ms -> 30.5 ms" in why
    # The same stalls saved at an unchanged compute: the step fell with them.
    moved = comparison.compare_measures(v, 0.584, 0.234, (21, 58), (0, 58), 46.1e-3, 28.6e-3,
                                        step_noise_p=0.18, share_noise_p=0.014)
    assert comparison.overall(v, moved) != comparison.MIXED


def test_a_line_most_fetches_pass_gives_no_stall_rate_verdict():
    # Identical loaders (helper 34B): the line under the median fetch, 38.5
    # and 60.8 stalls per 100 steps, fetches near the line under the
    # tolerance: the run's rate is most of its fetches, the line's place
    # among the waits, not stalls among fast fetches.
    v = comparison.compare_means(5.7e-3, 5.9e-3, 10e-3)
    assert v.label == comparison.EQUIVALENT
    moved = comparison.compare_measures(v, 0.4, 0.41, (45, 117), (71, 117), 14e-3, 14.2e-3,
                                        near_line=(2.0, 2.0))
    rate = next(m for m in moved if m.measure == "stall_rate")
    assert rate.direction is None
    assert comparison.overall(v, moved) == comparison.EQUIVALENT
    # Under half in both: judged as before.
    moved = comparison.compare_measures(v, 0.4, 0.41, (20, 117), (50, 117), 14e-3, 14.2e-3,
                                        near_line=(2.0, 2.0))
    assert next(m for m in moved if m.measure == "stall_rate").direction == "worse"


def test_a_step_that_fell_less_than_the_wait_is_not_said_not_to_fall():
    # 0 -> 2 workers on 2 cores (helper 36B): the wait 8.26 -> 0.907 ms,
    # the step 18.8 -> 13.5 ms, past its tolerance but at p = 0.017 in the
    # runs' own noise, the compute up 10.5 -> 12.6 ms.  Not MIXED, and not
    # "the step did not fall": it fell, less than the wait did, not yet
    # beyond the noise.
    v = comparison.compare_means(8.26e-3, 0.907e-3, 18.8e-3)
    moved = comparison.compare_measures(v, 0.44, 0.067, None, None, 18.8e-3, 13.5e-3,
                                        step_noise_p=0.017)
    step = next(m for m in moved if m.measure == "step_time")
    assert comparison.held_by_noise(step)
    assert comparison.overall(v, moved) == comparison.UNSETTLED
    why = comparison.compare_why(v, moved)
    assert "did not fall" not in why
    assert "the step fell less than the wait: its compute rose 10.5 ms -> 12.6 ms" in why, why
    # The measure the noise holds is named.
    assert "mean step within the noise: not yet a change" in why, why


def _starts(waits, wall_s):
    return {"epoch_start": {"by_epoch": [{"epoch": i, "fetches": 2, "input_wait_s": w}
                                         for i, w in enumerate(waits)]},
            "wall_s": wall_s, "epochs": len(waits)}


def test_epoch_starts_are_judged_by_welch_on_their_logs():
    # Helper 37B: a worker_init_fn burning 0.4 s each epoch, then
    # persistent_workers=True: the starts fall from about 0.6 s to the
    # first epoch's 0.5 s and 10 ms after it.
    from scipy import stats

    base = _starts([0.60, 0.62, 0.61, 0.63, 0.60, 0.62], 6.0)
    run = _starts([0.50, 0.010, 0.012, 0.011, 0.010, 0.013], 2.4)
    m = comparison.epoch_start_moved(base, run)
    want = stats.ttest_ind(np.log([0.60, 0.62, 0.61, 0.63, 0.60, 0.62]),
                           np.log([0.50, 0.010, 0.012, 0.011, 0.010, 0.013]),
                           equal_var=False).pvalue
    assert m.noise_p == pytest.approx(want) and want < comparison.NOISE_ALPHA
    assert m.direction == comparison.BETTER
    assert m.base == pytest.approx(np.mean([0.60, 0.62, 0.61, 0.63, 0.60, 0.62]))
    # The tolerance: a tenth of the larger of the start and the wall an epoch.
    assert m.tolerance == pytest.approx(0.1 * 1.0)
    # The other way round it is a regression, and the verdict says so.
    back = comparison.epoch_start_moved(run, base)
    assert back.direction == comparison.WORSE
    v = comparison.Verdict(comparison.EQUIVALENT, 0.01, 0.01, 0.002)
    assert comparison.overall(v, [back]) == comparison.REGRESSION
    # Three epochs each, one of them paying: not yet.
    few = comparison.epoch_start_moved(_starts([0.6, 0.61, 0.62], 3.0),
                                       _starts([0.5, 0.01, 0.011], 1.3))
    assert few.direction == comparison.SAME and few.noise_p >= comparison.NOISE_ALPHA
    assert comparison.held_by_noise(few)
    # One epoch in a run: not judged, said where the starts differ.
    one = comparison.epoch_start_moved(_starts([0.6], 1.0), _starts([0.05], 0.5))
    assert one.direction is None
    assert "not judged (fewer than 2 epochs in a run" in comparison.compare_why(v, [one])


def test_epoch_starts_are_weighed_against_the_steps_as_wall_time_an_epoch():
    # Helper 38C: starts 69.7 -> 303 ms an epoch judged worse, the mean
    # step 6.01 -> 5.87 ms within the noise: UNSETTLED before, now the
    # starts decide (16 steps an epoch: 2.2 ms of steps against 233 ms).
    M = comparison.Moved
    start = M("epoch_start", comparison.WORSE, 0.0697, 0.303, 0.0182, 0.001)
    step = M("step_time", comparison.SAME, 0.00601, 0.00587, 0.00012, 0.48)
    label, why = comparison.weigh_epoch_starts(comparison.UNSETTLED, [step, start], 16)
    assert label == comparison.REGRESSION
    assert why == ("the epoch starts outweigh the steps: +233 ms an epoch against -2.24 ms "
                   "of steps an epoch")
    # A judged step the other way that moves more an epoch keeps its verdict.
    long_step = M("step_time", comparison.BETTER, 0.030, 0.010, 0.003, 0.0001)
    assert comparison.weigh_epoch_starts(comparison.IMPROVEMENT, [long_step, start], 16) == (
        comparison.IMPROVEMENT, None)
    # Starts within the noise that outweigh a judged step the other way:
    # not yet (persistent workers: +231 ms an epoch at p = 0.074 against
    # a step 0.9 ms shorter, 16 steps an epoch).
    held = M("epoch_start", comparison.SAME, 0.0318, 0.263, 0.0182, 0.074)
    short = M("step_time", comparison.BETTER, 0.00662, 0.00572, 0.0005, 0.001)
    label, why = comparison.weigh_epoch_starts(comparison.IMPROVEMENT, [short, held], 16)
    assert label == comparison.UNSETTLED and why.endswith("(the starts within the noise: not yet)")
    # Starts that agree with the verdict, or unjudged, change nothing.
    better = start._replace(direction=comparison.BETTER, base=0.303, run=0.0697)
    assert comparison.weigh_epoch_starts(comparison.IMPROVEMENT, [step, better], 16) == (
        comparison.IMPROVEMENT, None)
    none = start._replace(direction=None)
    assert comparison.weigh_epoch_starts(comparison.EQUIVALENT, [step, none], 16) == (
        comparison.EQUIVALENT, None)


def test_the_share_alone_moving_beside_a_wait_held_by_noise_is_not_yet():
    # Identical loaders run in turn on a busy host (helper 41A): mean
    # fetch 2 ms -> 725 us within the noise (p = 0.026), the step within
    # it (p = 0.4), the input share 12.3% -> 5.5% past its test: the
    # report read IMPROVEMENT beside "not yet a change".
    v = comparison.compare_means(2e-3, 0.725e-3, 16.2e-3, noise_p=0.026)
    moved = comparison.compare_measures(v, 0.123, 0.055, None, None, 16.2e-3, 13.1e-3,
                                        step_noise_p=0.4, share_noise_p=0.001)
    assert [m.direction for m in moved] == ["same", "better", None, "same"]
    assert comparison.held_by_noise(moved[0])
    assert comparison.overall(v, moved) == comparison.UNSETTLED
    # The wait past its noise test too: the share agrees, IMPROVEMENT.
    v = comparison.compare_means(2e-3, 0.725e-3, 16.2e-3, noise_p=0.001)
    moved = comparison.compare_measures(v, 0.123, 0.055, None, None, 16.2e-3, 14.93e-3,
                                        step_noise_p=0.4, share_noise_p=0.001)
    assert comparison.overall(v, moved) == comparison.IMPROVEMENT


def _measured(others_cores, step_s, fetch_core_s, body_core_s, fetches=100):
    """A summary with its mean step and the waits for a core measured in
    ``fetches`` clocked fetches (awaited worker and loop, s each) and as
    many clocked steps' compute (s each)."""
    s = _timed(others_cores, step_s / 2, step_s)
    s["wait_parts"] = {
        "all": {"fetches": fetches, "wait_s": fetches * step_s / 2, "runq_known": True,
                "parts_s": {"worker_making": 1.0, "worker_cpu_wait": fetches * fetch_core_s / 2,
                            "cpu_wait": fetches * fetch_core_s / 2}},
        "compute": {"steps": fetches, "compute_s": fetches * step_s / 2, "runq_known": True,
                    "parts_s": {"main_cpu": 1.0, "cpu_wait": fetches * body_core_s}}}
    return s


def test_the_measured_waits_for_a_core_bound_the_hosts_part():
    base = _measured(0.0, 0.0084, 0.0015, 0.0005)
    assert comparison.core_waits_per_step_s(base) == pytest.approx(0.0020)
    # Others holding every core in the run: the model bounds nothing, the
    # measured part does.  The step 8.4 -> 51.2 ms, 39 ms of it waits for
    # a core: 6.4 -> 12.2 ms without them (1.9x), the code's.
    slow = _measured(2.0, 0.0512, 0.030, 0.009)
    assert not comparison.host_went_with(comparison.REGRESSION, base, slow)
    # The same code beside the hogs: 8.4 -> 17.7 ms, 12.7 ms of waits for a
    # core, 4.9 ms without them: the host can hold it, not yet the code's.
    same = _measured(2.0, 0.0177, 0.0097, 0.003)
    assert comparison.host_went_with(comparison.REGRESSION, base, same)
    # Mirrored: the busy run as the baseline, a quiet run 1.9x faster net.
    assert not comparison.host_went_with(comparison.IMPROVEMENT, slow, _measured(0.0, 0.0084,
                                                                                  0.0015, 0.0005))
    # Not measured (no run-queue times): as before, nothing bounds it.
    slow["wait_parts"]["all"]["runq_known"] = False
    assert comparison.core_waits_per_step_s(slow) is None
    assert comparison.host_went_with(comparison.REGRESSION, base, slow)


def _generator_run(others_cores, step_s, cpus=2):
    """A wrapped generator's summary: no loader host facts, no worker
    intervals; the clocked fetches' host reading over 1 s of waits."""
    return {"host": None, "workers": None, "input_wait_s": {"mean": step_s / 6},
            "step_s": {"mean": step_s},
            "wait_parts": {"host": {"others_cpu_s": others_cores, "job_runq_s": 0.2,
                                    "wall_s": 1.0, "host_share": None,
                                    **({"usable_cpus": cpus} if cpus else {})}}}


def test_a_generators_runs_read_the_host_from_their_fetches():
    # Helper 42: one generator run twice, the second beside CPU hogs (1.37
    # cores of other programs in its fetches), read REGRESSION with no word
    # of the host: the loader's host facts and intervals were all it read.
    quiet, busy = _generator_run(0.0, 0.0120), _generator_run(1.37, 0.0154)
    assert comparison.host_load_cores(busy) == pytest.approx(1.37)
    assert comparison.usable_cpus(busy) == 2
    assert comparison.host_went_with(comparison.REGRESSION, quiet, busy)
    assert "0.00 cores during the baseline and 1.37 during this run (of 2 CPUs)" in (
        comparison.host_note(quiet, busy))
    # Without the CPU count (a run file of an older version): not judged.
    assert comparison.host_note(_generator_run(0.0, 0.012, None),
                                _generator_run(1.37, 0.0154, None)) is None
