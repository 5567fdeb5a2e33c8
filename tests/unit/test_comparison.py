"""comparison: what compare() says beside its verdict."""

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
