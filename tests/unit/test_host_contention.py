"""host_contention: the stall time spent waiting for a CPU, from the
sampler's stall windows."""

import pytest

from traceml.findings import advice, host_contention, input_bound


def _summary(main_runq_s, workers_runq_s, wall_s=0.5, stalls=10, num_workers=4):
    return {"workers": {"intervals": {"slow": {
                "count": stalls, "wall_s": wall_s, "main_runq_wait_s": main_runq_s,
                "runq_wait_s": workers_runq_s}}},
            "loader": {"num_workers": num_workers}, "host": {"usable_cpus": 2},
            "diagnosis": input_bound.BALANCED, "steady_steps": 80}


def test_the_measured_share_is_main_plus_the_workers_mean():
    m = host_contention.measure(_summary(0.1, 0.8))
    # (0.1 + 0.8 / 4) / 0.5 s of stall time; per stall over 10 stalls.
    assert m["share"] == pytest.approx(0.6) and m["cpu_wait_s"] == pytest.approx(0.03)
    assert m["main_s"] == pytest.approx(0.01) and m["workers_s"] == pytest.approx(0.02)


def test_a_full_host_replaces_the_loaders_pattern_advice():
    items = [("heavy_tailed", {}), ("irregular", {}), ("compare_in_order", {})]
    got = advice.evidence_next_steps(_summary(0.1, 0.8), items)
    assert [c for c, _ in got] == ["host_contention"]
    # Under HOST_WAIT_SHARE of the stall time: the items stand.
    assert advice.evidence_next_steps(_summary(0.05, 0.4), items) == items
    # Not read: nothing is said.
    s = _summary(None, None)
    assert host_contention.measure(s) is None
    assert advice.evidence_next_steps(s, items) == items
