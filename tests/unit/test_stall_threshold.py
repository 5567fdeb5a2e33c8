"""The stall threshold: which waits are stalls.  Two separate groups of
waits against the compute step; one noisy group against its own median
and half a step.  The expected stalls are the ones each series was built
with, not what the rule returns."""

import numpy as np
import pytest

from traceml import _core
from traceml.findings import stall_threshold as st

MS = 1_000_000


def _series(n, every, slow_ms, fast_ms, compute_ms, seed=0):
    """(wait_ns, step_ns, slow mask): every ``every``-th fetch slow, 5%
    jitter on each group."""
    rng = np.random.default_rng(seed)
    slow = (np.arange(n) + 1) % every == 0
    wait = np.where(slow, slow_ms, fast_ms) * rng.uniform(0.95, 1.05, n) * MS
    wait = wait.astype(np.int64)
    step = wait + (compute_ms * MS)
    return wait, step.astype(np.int64), slow


@pytest.mark.parametrize("every, slow_ms, fast_ms, compute_ms", [
    (4, 1.1, 0.18, 2.2),    # the probe loop: 1.1 ms under half a 2.4 ms step
    (3, 0.7, 0.12, 1.6),    # a slow group under the 1 ms floor
    (5, 3.0, 0.3, 9.0),     # a 3 ms group against a 9 ms step
    (4, 1.1, 0.3, 3.0),     # 3.7x apart: time.sleep's 0.1 ms on every fetch
    (4, 2.5, 1.0, 5.0),     # 2.5x apart, 1.5 ms past the fast group
])
def test_a_separate_slow_group_past_a_fifth_of_compute_is_the_stalls(every, slow_ms, fast_ms,
                                                                     compute_ms):
    wait, step, slow = _series(120, every, slow_ms, fast_ms, compute_ms)
    rule = st.stall_threshold_ns(wait, step, None)
    assert rule.code in (st.RULE_OTSU, st.RULE_COMPUTE, st.RULE_P95)
    stalls = wait > rule.threshold_ns
    np.testing.assert_array_equal(stalls, slow)
    # The bar: past the fast group's (lower) median by 20% of the median
    # compute.
    fast = np.sort(wait[~slow])
    bar = fast[(len(fast) - 1) // 2] + st.STALL_MIN_COMPUTE_SHARE * np.median(step - wait)
    assert rule.threshold_ns >= int(bar) - 1
    matter = st.stalls_matter(wait, step, stalls, rule.code)
    excess = (wait[slow] - np.median(wait[~slow])).sum() / step.sum()
    assert matter.cost_share == pytest.approx(excess, rel=1e-3)
    assert matter.code == st.STALLS_KEPT


def test_a_slow_group_under_a_fifth_of_compute_is_no_stall():
    # 0.5 ms against 0.1 ms: two groups, but 0.4 ms is 4% of a 10 ms step.
    wait, step, slow = _series(120, 4, 0.5, 0.1, 10.0)
    rule = st.stall_threshold_ns(wait, step, None)
    assert rule.code == st.RULE_COMPUTE
    assert not np.any(wait > rule.threshold_ns)


def test_a_slow_group_that_is_most_fetches_is_not_two_groups_of_stalls():
    # Three fetches in four slow: the typical fetch, never "stalls".
    wait, step, slow = _series(120, 4, 0.18, 1.1, 2.2)
    rule = st.stall_threshold_ns(wait, step, None)
    assert rule.code not in (st.RULE_OTSU, st.RULE_COMPUTE)
    assert np.count_nonzero(wait > rule.threshold_ns) <= 60


def test_one_noisy_group_keeps_half_a_step_and_the_ratio():
    # Lognormal waits around 1 ms, no two groups: a stall must clear half
    # the median step and 4x the lower median.
    rng = np.random.default_rng(5)
    wait = (rng.lognormal(np.log(1.0), 0.35, 200) * MS).astype(np.int64)
    step = wait + 10 * MS
    assert st.bimodal_split(wait) is None and st.bimodal_split(wait, min_ratio=1.0) is None
    rule = st.stall_threshold_ns(wait, step, None)
    half_step = st.STALL_MIN_STEP_SHARE * np.median(step)
    ratio = st.STALL_MIN_RATIO * np.sort(wait)[(len(wait) - 1) // 2]
    assert rule.threshold_ns == int(max(half_step, ratio, st.STALL_P95_SHARE
                                        * _core.percentiles(wait, 95.0)))


def test_eta_critical_is_one_groups_eta_at_the_alpha_quantile():
    # Fresh draws (another seed than the rule's) of one Gaussian group of
    # log waits pass the line about BIMODAL_ALPHA of the time: binomial
    # (3000, 0.01) exceeds 55 with chance under 1e-9.
    rng = np.random.default_rng(123)
    for n in (12, 30):
        line = st.eta_critical(n)
        draws = (np.exp(rng.standard_normal((3000, n))) * MS).astype(np.int64)
        passed = sum(_core.log_otsu(d)["eta"] > line for d in draws)
        assert 5 <= passed <= 55, (n, line, passed)
    assert st.eta_critical(10_000) == st.BIMODAL_MIN_ETA


@pytest.mark.parametrize("n", [2, 5, 12, 27, 64])
def test_the_eta_table_is_the_simulation(n):
    # The table the rule reads holds the seeded simulation's values (every
    # size: tests/integration/test_corpus.py).
    assert st.eta_critical(n) == st.eta_critical_simulated(n)
    assert len(st.ETA_CRITICAL) == st.ETA_NULL_MAX_N - 1


def test_one_tight_group_in_a_short_run_is_not_two_groups():
    # 12 waits of one lognormal group around 1 ms (sigma 0.3), compute
    # 2 ms: a fixed eta of 0.8 split 14% of such runs into two groups
    # 1.4x apart; at the run's size about 1% pass.  Binomial (400, 0.01)
    # exceeds 12 with chance under 1e-3.
    rng = np.random.default_rng(9)
    split = 0
    for _ in range(400):
        wait = (rng.lognormal(np.log(1.0), 0.3, 12) * MS).astype(np.int64)
        rule = st.stall_threshold_ns(wait, wait + 2 * MS, None)
        split += rule.code in (st.RULE_OTSU, st.RULE_COMPUTE)
    assert split <= 12, split


@pytest.mark.parametrize("every, slow_ms, fast_ms, compute_ms", [
    (3, 35.0, 10.0, 10.0),    # 3.5x apart, every fetch past the floor
    (3, 12.0, 4.0, 10.0),     # 3x: the Otsu bar under half a median step
    (4, 15.0, 6.0, 10.0),     # 2.5x
])
def test_every_fetch_slow_with_a_closer_group_on_top_keeps_it(every, slow_ms, fast_ms,
                                                              compute_ms):
    # Every fetch slow, every ``every``-th slower by less than 4x: eta at
    # this size shows two groups, so the upper one is the stalls (a cadence
    # to test), not one uniformly slow group.
    wait, step, slow = _series(60, every, slow_ms, fast_ms, compute_ms)
    rule = st.stall_threshold_ns(wait, step, None)
    assert rule.code == st.RULE_ALL_SLOW_SPLIT and rule.all_slow
    np.testing.assert_array_equal(wait > rule.threshold_ns, slow)


def test_every_fetch_slow_in_one_noisy_group_stays_one_group():
    # 60 waits of one lognormal group around 10 ms (sigma 0.3), compute
    # 10 ms: every fetch slow, and eta past the line at this size in about
    # 1% of runs only.  Binomial (300, 0.01) exceeds 10 with chance < 1e-3.
    rng = np.random.default_rng(21)
    split = 0
    for _ in range(300):
        wait = (rng.lognormal(np.log(10.0), 0.3, 60) * MS).astype(np.int64)
        rule = st.stall_threshold_ns(wait, wait + 10 * MS, None)
        split += rule.code == st.RULE_ALL_SLOW_SPLIT
    assert split <= 10, split


def test_all_slow_fetches_whose_group_on_top_does_not_matter_stay_all_stalls():
    # 24 fetches of decode at num_workers=0, 250 ms each and 4 of them
    # 300 ms, against a 10 ms step body: a group on top by eta, whose
    # excess (4 x 50 ms) is 3% of the step time and does not matter.
    # Every fetch is still slow: every one a stall, never "no stalls".
    from traceml.findings import stall_shape

    rng = np.random.default_rng(2)
    wait = (rng.uniform(0.99, 1.01, 24) * np.where(np.arange(24) % 6 == 0, 300, 250)
            * MS).astype(np.int64)
    step = wait + 10 * MS
    c = stall_shape.classify(wait, step, None)
    assert c.rule.code == st.RULE_ALL_SLOW and c.rule.every_fetch_slow
    assert c.stalls.all()


def test_the_position_test_is_mann_whitney_over_every_period_and_phase():
    # Every 4th wait 3x the rest with 30% jitter, 60 fetches: the test's
    # p-value is scipy's asymptotic Mann-Whitney at that phase times the
    # (period, phase) pairs tried (2..15: 119).
    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(0)
    wait = (rng.lognormal(0, 0.3, 60) * MS).astype(np.int64)
    wait[::4] *= 3
    got = st.position_test(wait)
    assert (got.period, got.phase, got.tests) == (4, 0, sum(range(2, 16)))
    on = np.arange(60) % 4 == 0
    p = mannwhitneyu(wait[on], wait[~on], alternative="greater", method="asymptotic").pvalue
    assert got.p_value == pytest.approx(p * got.tests)
    # One lognormal group: no phase passes, in about 1% of runs at most.
    claims = sum(st.position_test((rng.lognormal(0, 0.5, 60) * MS).astype(np.int64))
                 is not None for _ in range(300))
    assert claims <= 8, claims


def test_stalls_by_position_must_delay_their_step_as_two_groups_do():
    # Every 6th wait 2.2x the rest (0.88 against 0.40 ms, 30% jitter) on a
    # 10 ms compute: the phase ranks above the rest far beyond chance, yet
    # each such wait adds 0.48 ms to a 10.4 ms step, under a fifth of the
    # compute: no stalls by position.
    rng = np.random.default_rng(4)
    n = 120
    wait = (rng.lognormal(0, 0.3, n) * 0.40 * MS).astype(np.int64)
    wait[5::6] = (rng.lognormal(0, 0.3, n // 6) * 0.88 * MS).astype(np.int64)
    step = wait + 10 * MS
    assert st.position_test(wait) is not None
    assert st.stall_threshold_ns(wait, step, None).code != st.RULE_POSITION
    # The same phase on a 2 ms compute adds a quarter of it: stalls.
    short = wait + 2 * MS
    rule = st.stall_threshold_ns(wait, short, None)
    assert rule.code == st.RULE_POSITION
    assert np.count_nonzero(wait > rule.threshold_ns) >= 0.8 * (n // 6)


@pytest.mark.parametrize("seed", range(6))
def test_stalls_matter_by_rank_agrees_with_the_gathered_waits(seed):
    # Given the threshold, the calm waits are read by rank; the answer and
    # its cost share are those of gathering them (NumPy's median and sum).
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 400))
    wait = rng.integers(0, 4, n) * rng.integers(1, 10 * MS, n)
    step = wait + rng.integers(1 * MS, 20 * MS, n)
    threshold = int(np.quantile(wait, rng.uniform(0.5, 1.0)))
    above = wait > threshold
    by_rank = st.stalls_matter(wait, step, above, st.RULE_P95, threshold)
    calm = wait[~above]
    typical = float(np.median(calm)) if len(calm) else 0.0
    want = float(np.maximum(wait[above] - typical, 0).sum()) / float(step.sum())
    assert by_rank.cost_share == pytest.approx(want, rel=1e-12)
    assert by_rank.code == st.stalls_matter(wait, step, above, st.RULE_P95).code


def test_a_split_of_uniform_waits_that_leaves_none_on_top_is_one_slow_group():
    """bench_truth seed-16-0w, quiet, 2 of 20 runs: sixteen waits of
    101 ms (100 ms of CPU at num_workers=0), three of them 0.4 ms longer.
    Otsu splits the tight cluster with eta past one group's, but the line
    against the compute (the fast group's median + STALL_MIN_COMPUTE_SHARE
    of the 5 ms compute) leaves no wait above it: that read "no stalls".
    It is one slow group: every fetch a stall."""
    rng = np.random.default_rng(1)
    wait = 101_000_000 + rng.integers(0, 10_000, 15)
    wait[[3, 7, 11]] += 400_000
    wait = wait.astype(np.int64)
    step = wait + 5_100_000
    split = st.bimodal_split(wait, min_ratio=1.0)
    assert split["eta"] > st.eta_critical(15)
    line = np.median(wait[wait < split["threshold_ns"]]) + (
        st.STALL_MIN_COMPUTE_SHARE * 5_100_000)
    assert not (wait > line).any()
    rule = st.stall_threshold_ns(wait, step, None)
    assert rule.code == st.RULE_ALL_SLOW and rule.all_slow
    assert int(np.count_nonzero(wait > rule.threshold_ns)) == 15
