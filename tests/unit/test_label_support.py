"""The diagnosis's support under the block bootstrap: block sums against
NumPy, the spread of the resampled share against the delta method's, and
firm and borderline labels on series built either side of, and on, a
bound."""

import math

import numpy as np
import pytest

from traceml.findings import input_bound, label_support as ls

MS = 1_000_000


def test_block_length_follows_its_rule():
    assert ls.block_length(16) == math.ceil(16 ** (1 / 3))           # 3
    assert ls.block_length(16, round_steps=4) == 4                    # a whole round
    assert ls.block_length(1000) == 10
    n = 10_000_000
    assert ls.block_length(n) == -(-n // ls.SUPPORT_MAX_BLOCKS)       # blocks capped
    assert ls.block_length(5, round_steps=8) == 2                     # two blocks at least
    assert ls.block_length(10, round_steps=6) == 5                    # 16 steps, 6 workers


def test_a_run_of_one_round_and_a_half_is_resampled_in_halves():
    # 10 steady steps of 6 workers (a 16-step run), stalls at steps 0 and
    # 6.  With one block of a round (6 steps) every resample was the first
    # 6 steps, which hold one stall and read FAST: "HEAVY-TAILED in 0%,
    # FAST in 100%" under a HEAVY-TAILED label (helper 28A, 6 workers).
    # In halves of 5, each holding one stall, every resample (AA, AB, BA,
    # BB) holds two stalls in 10 steps, as the run does.
    from traceml.findings import stall_shape
    wait = np.full(10, 200_000, dtype=np.int64)
    wait[[0, 6]] = 380 * MS
    step = wait + 10 * MS
    assert stall_shape.classify(wait, step, None).shape[0] == "HEAVY-TAILED"
    assert stall_shape.classify(wait[:6], step[:6], None).shape[0] == "FAST"
    sup = ls.shape_support(wait, step, "HEAVY-TAILED", round_steps=6)
    assert sup["block"] == 5
    assert sup["readings"] == {"HEAVY-TAILED": 1.0}


def test_block_sums_are_numpys():
    x = np.random.default_rng(1).integers(0, 10**9, 103)
    sums, rest = ls._block_sums(x, 10)
    np.testing.assert_array_equal(sums, x[:100].reshape(10, 10).sum(axis=1).astype(float))
    assert rest == float(x[100:].sum())


def _iid(n, wait_ms, sigma, compute_ms, seed=0):
    rng = np.random.default_rng(seed)
    wait = (wait_ms * rng.lognormal(0, sigma, n) * MS).astype(np.int64)
    return wait, wait + int(compute_ms * MS)


def test_the_resampled_spread_is_the_delta_methods():
    # Independent steps: the share's standard error by the delta method,
    # sqrt(Var(W - r S) / n) / mean(S), computed here with NumPy.
    wait, step = _iid(4000, 1.0, 0.8, 5.0)
    r = wait.sum() / step.sum()
    delta_se = np.std(wait - r * step) / math.sqrt(len(wait)) / step.mean()
    sup = ls.support(wait, step, input_bound.diagnose(r).label)
    assert sup["share"] == pytest.approx(r)
    assert sup["share_se"] == pytest.approx(delta_se, rel=0.2)


def test_a_share_far_from_the_lines_is_firm():
    wait, step = _iid(60, 8.0, 0.3, 10.0)          # input ~45%
    label = input_bound.diagnose(wait.sum() / step.sum()).label
    sup = ls.support(wait, step, label)
    assert label == input_bound.INPUT_BOUND
    assert sup["support"] == 1.0 and not ls.is_borderline(sup)


def test_a_share_on_the_line_is_borderline_with_both_readings():
    # Waits scaled so that the share is 20% exactly: either side is as
    # likely as the other.
    wait, step = _iid(60, 1.0, 0.8, 4.0)
    compute = step - wait
    scale = 0.2 * compute.sum() / (0.8 * wait.sum())
    wait = (wait * scale).astype(np.int64)
    step = wait + compute
    share = wait.sum() / step.sum()
    assert share == pytest.approx(0.2, abs=1e-3)
    label = input_bound.diagnose(share).label
    sup = ls.support(wait, step, label)
    assert ls.is_borderline(sup)
    assert {label, sup["other"]} == {input_bound.INPUT_BOUND, input_bound.BALANCED}
    assert 0.2 < sup["support"] < 0.8
    assert sum(sup["readings"].values()) == pytest.approx(1.0)
    assert sup["line"] == input_bound.INPUT_BOUND_SHARE
    d = abs(share - 0.2)
    want = len(wait) * (ls._Z * sup["share_se"] / d) ** 2 if d else math.inf
    assert sup["settle_steps"] == (None if want > 64 * len(wait)
                                   else math.ceil(want - len(wait)))
    # Where the normal approximation says this run would do while the
    # resamples say it does not, the run's length again, never 0 more.
    assert ls._settle_steps(60, 0.30, 0.01, 0.2) == 60
    assert ls._settle_steps(60, 0.21, 0.01, 0.2) == math.ceil(60 * (ls._Z * 0.01 / 0.01) ** 2
                                                              - 60)
    # The words give both readings and the steps.
    s = {"diagnosis": label, "diagnosis_support": sup}
    (line,) = ls.diagnosis_lines(s)
    assert label in line and sup["other"] in line
    # The run's own label in under half the resamples: said as the point
    # reading, beside the resamples' majority.
    for own, other in ((0.46, 0.54), (0.54, 0.46)):
        p = {"label": "BALANCED", "other": "COMPUTE-BOUND", "support": own,
             "readings": {"BALANCED": own, "COMPUTE-BOUND": other}, "resamples": 199}
        said = ls.WORDS["borderline"](p)
        assert said.startswith("borderline: the run's own steps read BALANCED, yet BALANCED in "
                               "46%, COMPUTE-BOUND in 54%") == (own < other), said


def test_production_decides_hand_over_in_every_resample():
    # 40% input, of which the awaited worker was making the batch for 5%
    # of step time: HAND-OVER, and each resample reads it too.
    wait, step = _iid(80, 6.0, 0.2, 9.0)
    making = (wait * 0.1).astype(np.int64)
    prod_share = making.sum() / step.sum()
    label = input_bound.diagnose(wait.sum() / step.sum(), prod_share).label
    assert label == input_bound.HAND_OVER
    sup = ls.support(wait, step, label, making)
    assert sup["support"] == 1.0
    # Unknown production (-1) leaves the steps out of the production share.
    making[::2] = -1
    assert ls.support(wait, step, label, making)["support"] == 1.0


def test_the_same_run_gets_the_same_support_and_few_steps_get_none():
    wait, step = _iid(30, 1.5, 0.8, 5.0)
    label = input_bound.diagnose(wait.sum() / step.sum()).label
    assert ls.support(wait, step, label) == ls.support(wait, step, label)
    assert ls.support(wait[:5], step[:5], label) is None
    assert ls.support(wait, step, input_bound.NO_DATA) is None


def _stalls_among_fast(n, stalls, stall_ms, seed=0):
    rng = np.random.default_rng(seed)
    wait = rng.lognormal(np.log(0.1), 0.5, n) * MS
    wait[rng.choice(n, stalls, replace=False)] = stall_ms * MS
    wait = wait.astype(np.int64)
    return wait, wait + 10 * MS


def test_the_shape_support_reads_each_resample_with_the_stall_rule():
    from traceml.findings import stall_shape

    # A stall every 4th fetch, 80 ms against 0.1 ms: every resample of
    # blocks of 4 holds a quarter of stalls, HEAVY-TAILED each time.
    wait = np.where(np.arange(80) % 4 == 0, 80 * MS, MS // 10).astype(np.int64)
    step = wait + 10 * MS
    label = stall_shape.classify(wait, step, None).shape[0]
    sup = ls.shape_support(wait, step, label, round_steps=4)
    assert label == stall_shape.HEAVY_TAILED and sup["support"] == 1.0
    # Four 8 ms waits: about 5% of the step time together, the line
    # between outliers (FAST) and stalls: resamples read both.
    wait, step = _stalls_among_fast(60, 4, 8.0, seed=1500)
    label = stall_shape.classify(wait, step, None).shape[0]
    sup = ls.shape_support(wait, step, label)
    assert ls.is_borderline(sup)
    assert {label, sup["other"]} == {stall_shape.FAST, stall_shape.HEAVY_TAILED}
    (line,) = ls.shape_lines({"shape": label, "shape_support": sup})
    assert line.startswith(f"borderline shape: {label} in ")
    assert sup["resamples"] == ls.SUPPORT_RESAMPLES    # a disagreement reads them all
    # Past SHAPE_SUPPORT_MAX_STEPS: not computed.
    wait, step = _stalls_among_fast(ls.SHAPE_SUPPORT_MAX_STEPS + 1, 40, 80.0)
    assert ls.shape_support(wait, step, stall_shape.HEAVY_TAILED) is None


def test_a_firm_shape_stops_after_the_first_stage(monkeypatch):
    from traceml.findings import stall_shape

    # A stall every 4th fetch: the first SHAPE_SUPPORT_FIRST resamples all
    # read HEAVY-TAILED, and the rest are not read; reading all 199 gives
    # the same support, 1.0.
    wait = np.where(np.arange(80) % 4 == 0, 80 * MS, MS // 10).astype(np.int64)
    step = wait + 10 * MS
    sup = ls.shape_support(wait, step, stall_shape.HEAVY_TAILED, round_steps=4)
    assert sup["resamples"] == ls.SHAPE_SUPPORT_FIRST < ls.SUPPORT_RESAMPLES
    assert sup["support"] == 1.0 and not ls.is_borderline(sup)
    monkeypatch.setattr(ls, "SHAPE_SUPPORT_FIRST", ls.SUPPORT_RESAMPLES + 1)
    full = ls.shape_support(wait, step, stall_shape.HEAVY_TAILED, round_steps=4)
    assert full["resamples"] == ls.SUPPORT_RESAMPLES and full["support"] == 1.0
    # The stage's false-firm chance at the line, as the constant's comment says.
    assert ls.SUPPORT_MIN ** ls.SHAPE_SUPPORT_FIRST < 0.01


def test_a_borderline_shape_beside_a_trend_reads_the_trend_and_the_line_is_exact():
    # A probe wait rising 0.5 -> 10.5 ms (helper 33B, 3 of 3): "borderline
    # shape: UNIFORMLY-SLOW in 41% ...; record more steps", which a trend
    # does not settle; and "BALANCED in 90% ... (a firm label needs 90%)".
    sup = {"label": "UNIFORMLY-SLOW", "support": 0.41, "other": "FAST",
           "readings": {"UNIFORMLY-SLOW": 0.41, "FAST": 0.59}, "block": 10, "resamples": 199}
    s = {"shape": "UNIFORMLY-SLOW", "shape_support": sup, "trend": {"label": "RISING"}}
    (line,) = ls.shape_lines(s)
    assert "the wait is RISING" in line and "record more steps" not in line
    s["trend"] = None
    (line,) = ls.shape_lines(s)
    assert "record more steps" in line
    d = {"label": "BALANCED", "support": 0.897, "other": "COMPUTE-BOUND",
         "readings": {"BALANCED": 0.897, "COMPUTE-BOUND": 0.103}, "share": 0.06,
         "settle_steps": None, "block": 10, "resamples": 199}
    (line,) = ls.diagnosis_lines({"diagnosis": "BALANCED", "diagnosis_support": d})
    assert "BALANCED in 89.7%" in line, line


def test_a_borderline_shape_says_how_many_more_steps_would_settle_it():
    from scipy import stats

    # Helper 38D: "borderline shape: HEAVY-TAILED in 71%, UNIFORMLY-SLOW in
    # 29% ...; record more steps" gave no number.  The model: the leading
    # reading's z = Phi^-1(71%) grows as sqrt(n); 90% needs z = Phi^-1(90%).
    n = 120
    z = stats.norm.ppf(0.71)
    expect = math.ceil(n * (stats.norm.ppf(0.9) / z) ** 2 - n)
    assert ls._shape_settle_steps(n, 0.71, 199) == expect
    # The minority label printed (29%) settles toward the other: the same.
    sup = {"label": "UNIFORMLY-SLOW", "support": 0.29, "other": "HEAVY-TAILED",
           "readings": {"HEAVY-TAILED": 0.71, "UNIFORMLY-SLOW": 0.29},
           "settle_steps": expect, "block": 4, "resamples": 199}
    (line,) = ls.shape_lines({"shape": "UNIFORMLY-SLOW", "shape_support": sup})
    assert f"about {expect} more steps would settle it" in line
    # An even split has no leading reading: no length settles it.
    assert ls._shape_settle_steps(n, 0.5, 199) is None
    # Just under the line, at least one more run's length, never 0.
    assert ls._shape_settle_steps(n, 0.899, 199) >= 1
    # A saved run without the estimate reads as before, with the horizon.
    old = {k: v for k, v in sup.items() if k != "settle_steps"}
    (line,) = ls.shape_lines({"shape": "UNIFORMLY-SLOW", "shape_support": old})
    assert line.endswith("record more steps before reading the stalls' pattern")


def test_the_shape_support_of_a_real_borderline_run_carries_its_estimate():
    from traceml.findings import stall_shape

    wait, step = _stalls_among_fast(60, 4, 8.0, seed=1500)
    label = stall_shape.classify(wait, step, None).shape[0]
    sup = ls.shape_support(wait, step, label)
    lead = max(sup["readings"].values())
    assert sup["settle_steps"] == ls._shape_settle_steps(60, lead, sup["resamples"])
    firm = np.where(np.arange(80) % 4 == 0, 80 * MS, MS // 10).astype(np.int64)
    assert ls.shape_support(firm, firm + 10 * MS, stall_shape.HEAVY_TAILED,
                            round_steps=4)["settle_steps"] is None


def test_a_shape_support_that_does_not_grow_with_the_run_gives_no_step_count():
    from traceml.findings import stall_shape

    # Helper 40C: a loop whose shape sat on a rule's line read "about 15
    # more steps would settle it" at 300 steps; neither 315 nor 1700 did.
    # The estimate's model says the leading reading's support grows with
    # the run: read at half the run it must be lower, else no count.
    wait, step = _stalls_among_fast(60, 4, 8.0, seed=1500)
    label = stall_shape.classify(wait, step, None).shape[0]
    sup = ls.shape_support(wait, step, label)
    lead = max(sup["readings"].values())
    assert 0.0 <= sup["half_support"] <= 1.0
    want = (ls._shape_settle_steps(60, lead, sup["resamples"])
            if lead > sup["half_support"] else None)
    assert sup["settle_steps"] == want
    flat = {"label": "HEAVY-TAILED", "support": 0.89, "other": "FAST",
            "readings": {"HEAVY-TAILED": 0.89, "FAST": 0.11}, "settle_steps": None,
            "half_support": 0.93, "block": 4, "resamples": 199}
    (line,) = ls.shape_lines({"shape": "HEAVY-TAILED", "shape_support": flat})
    assert ("its leading reading held 93% of resamples of half these steps and 89% of all of "
            "them, so more steps may not settle it") in line
    assert "would settle it" not in line
