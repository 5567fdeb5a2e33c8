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
    assert st.bimodal_split(wait) is None
    rule = st.stall_threshold_ns(wait, step, None)
    half_step = st.STALL_MIN_STEP_SHARE * np.median(step)
    ratio = st.STALL_MIN_RATIO * np.sort(wait)[(len(wait) - 1) // 2]
    assert rule.threshold_ns == int(max(half_step, ratio, st.STALL_P95_SHARE
                                        * _core.percentiles(wait, 95.0)))
