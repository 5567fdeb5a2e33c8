"""host_contention: the stall time spent waiting for a CPU, from the
sampler's stall windows."""

import pytest

from traceml.findings import advice, host_contention, input_bound


def _summary(main_runq_s, workers_runq_s, wall_s=0.5, stalls=10, num_workers=4,
             main_cpu_s=None, workers_cpu_s=None, cpus=2, others_cpu_s=None):
    return {"workers": {"intervals": {"slow": {
                "count": stalls, "wall_s": wall_s, "main_runq_wait_s": main_runq_s,
                "runq_wait_s": workers_runq_s, "main_cpu_s": main_cpu_s,
                "worker_cpu_s": workers_cpu_s, "others_cpu_s": others_cpu_s}}},
            "loader": {"num_workers": num_workers}, "host": {"usable_cpus": cpus},
            "diagnosis": input_bound.BALANCED, "steady_steps": 80}


def test_the_job_waiting_for_its_own_workers_is_not_the_hosts():
    # 4 workers on 2 cores, each running half the time and waiting half:
    # over 0.5 s of stalls they used 1.0 CPU-s (2 cores full, with the
    # main process's 0.05) and waited 1.0 s in the run queue.  The CPU the
    # job left unused, 2 x 0.5 - 1.05 < 0, bounds what other programs took:
    # nothing.  The seed investigation's host, not a busy one.
    m = host_contention.measure(_summary(0.0, 1.0, main_cpu_s=0.05, workers_cpu_s=1.0))
    assert m["share"] == pytest.approx(0.5)           # (0 + 1.0 / 4) / 0.5
    assert m["others_fraction"] == 0.0 and m["host_share"] == 0.0
    assert m["own_cores"] == pytest.approx(2.1)
    items = [("lockstep", {}), ("vary_workers_then_in_order", {})]
    assert advice.evidence_next_steps(_summary(0.0, 1.0, main_cpu_s=0.05,
                                               workers_cpu_s=1.0), items) == items


def test_waiting_beside_an_idle_job_is_the_hosts():
    # The same waits while the job used 0.15 CPU-s of the 1.0 it could
    # have: spare 0.85 of the 1.2 s queued, so 0.85 / 1.2 of the wait is
    # what other programs can have taken.
    m = host_contention.measure(_summary(0.2, 1.0, main_cpu_s=0.05, workers_cpu_s=0.1))
    assert m["others_fraction"] == pytest.approx(0.85 / 1.2)
    assert m["host_share"] == pytest.approx(min(1.0, (0.2 + 0.25) / 0.5) * 0.85 / 1.2)
    assert [c for c, _ in advice.evidence_next_steps(
        _summary(0.2, 1.0, main_cpu_s=0.05, workers_cpu_s=0.1), [("irregular", {})])] == [
        "host_contention"]


def test_workers_pinned_to_one_core_wait_for_each_other_not_the_host():
    # 4 workers pinned to one of 2 cores: 1.0 s queued over 0.5 s of stalls,
    # 0.5 CPU-s used (one core full), the other core idle: the spare-CPU
    # bound alone leaves 0.5 / 1.0 to other programs, but /proc/stat says
    # they ran 0.01 CPU-s then, so at most 0.01 of the 1.0 s is theirs.
    s = _summary(0.0, 1.0, main_cpu_s=0.0, workers_cpu_s=0.5, others_cpu_s=0.01)
    m = host_contention.measure(s)
    assert m["others_fraction"] == pytest.approx(0.01)
    assert m["others_cores"] == pytest.approx(0.02)
    assert advice.evidence_next_steps(s, [("lockstep", {})]) == [("lockstep", {})]
    # The same waits while a hog ran 0.45 CPU-s on the idle core's share:
    # both bounds allow 0.45 of the 1.0 s, under half of the 0.5 share.
    m = host_contention.measure(_summary(0.0, 1.0, main_cpu_s=0.0, workers_cpu_s=0.5,
                                         others_cpu_s=0.45))
    assert m["others_fraction"] == pytest.approx(0.45)
    assert m["host_share"] == pytest.approx(0.5 * 0.45)


def test_other_programs_cpu_bounds_the_hosts_part():
    # Idle job (0.15 of 1.0 CPU-s) beside programs that ran 1.0 CPU-s: the
    # spare bound (0.85 / 1.2) is the smaller and stands; with 0.3 CPU-s
    # run by others, 0.3 / 1.2 does.
    big = host_contention.measure(_summary(0.2, 1.0, main_cpu_s=0.05, workers_cpu_s=0.1,
                                           others_cpu_s=1.0))
    small = host_contention.measure(_summary(0.2, 1.0, main_cpu_s=0.05, workers_cpu_s=0.1,
                                             others_cpu_s=0.3))
    assert big["others_fraction"] == pytest.approx(0.85 / 1.2)
    assert small["others_fraction"] == pytest.approx(0.3 / 1.2)


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


def test_a_full_host_keeps_the_workers_compared_with_each_other():
    # Worker 1 making its batches 3x slower beside a full host: a host
    # delays every worker alike, so the attribution to one worker (and to
    # particular samples) follows the host's next step; the waits' pattern
    # does not.
    items = [("heavy_tailed", {}), ("one_worker", {}), ("split_shards", {}),
             ("slow_sample", {}), ("vary_workers_around", {})]
    got = [c for c, _ in advice.evidence_next_steps(_summary(0.1, 0.8), items)]
    assert got == ["one_worker", "split_shards", "slow_sample", "host_contention"]
    arranged, roles = advice.arrange(advice.evidence_next_steps(_summary(0.1, 0.8), items))
    assert [c for (c, _), r in zip(arranged, roles) if r == "lead"] == ["host_contention"]


def test_the_stalls_clocks_count_only_the_waits_in_the_loops_way():
    # The sampler's stall windows: the main thread and 4 workers queued 1.6
    # s over 0.5 s of stalls (all of the stall time waiting, by the main
    # thread's and a mean worker's), the job used 0.15 of its 1.0 CPU-s and
    # a hog ran beside: 0.85 / 1.6 of the waiting reads as the host's.
    s = _summary(0.2, 1.4, main_cpu_s=0.05, workers_cpu_s=0.1, others_cpu_s=1.0)
    assert host_contention.measure(s)["host_share"] == pytest.approx(0.85 / 1.6)
    assert [c for c, _ in host_contention.advise(s)] == ["host_contention"]
    # But the stalls' own clocks: the batches were made (in transit 60%),
    # the loop's thread on a CPU receiving them 30%, and only 10% of the
    # wait a core the loop or the awaited worker waited for, held by
    # other programs.  The workers queued beside batches already made.
    s["wait_parts"] = {"stalls": {"fetches": 10, "wait_s": 0.5, "runq_known": True,
                                  "parts_s": {"worker_making": 0.0, "worker_cpu_wait": 0.0,
                                              "main_cpu": 0.15, "cpu_wait": 0.0,
                                              "host_cpu_wait": 0.05, "in_transit": 0.3}}}
    assert host_contention.advise(s) == []
    # Clocked stalls whose waits for a core were other programs': the host.
    s["wait_parts"]["stalls"]["parts_s"].update(host_cpu_wait=0.3, in_transit=0.05)
    assert [c for c, _ in host_contention.advise(s)] == ["host_contention"]
    # No run-queue reading on the clocks: the sampler's windows decide.
    s["wait_parts"]["stalls"]["runq_known"] = False
    s["wait_parts"]["stalls"]["parts_s"].update(host_cpu_wait=0.0)
    assert [c for c, _ in host_contention.advise(s)] == ["host_contention"]


def test_stalls_that_outlast_the_hosts_part_keep_the_loaders_readings():
    # Waiting beside an idle job (the host's share about 0.64 of the stall
    # time): with stalls of median 80 ms against a 20 ms line, the rest,
    # 80 x (1 - 0.64) = 29 ms, still passes it: the loader makes the
    # stalls; its pattern stays and leads.  At a median of 40 ms the rest,
    # 14 ms, does not: the host makes them, and its step leads alone.
    s = _summary(0.2, 1.0, main_cpu_s=0.05, workers_cpu_s=0.1)
    share = host_contention.measure(s)["host_share"]
    s["stalls"] = {"stall_median_s": 0.08, "threshold_s": 0.02}
    items = [("irregular", {}), ("compare_in_order", {})]
    got = advice.evidence_next_steps(s, items)
    [host] = [f for f in got if f[0] == "host_contention"]
    assert host[1]["loader_own"] and host[1]["rest_s"] == pytest.approx(0.08 * (1 - share))
    assert [c for c, _ in got][:2] == ["irregular", "compare_in_order"]
    arranged, roles = advice.arrange(got)
    assert [c for c, _ in arranged] == ["irregular", "compare_in_order", "host_contention"]
    assert roles == ["why", "lead", "also"]
    said = host_contention.WORDS["host_contention"](host[1])
    assert "the loader makes them" in said and "Next:" not in said
    s["stalls"] = {"stall_median_s": 0.04, "threshold_s": 0.02}
    assert [c for c, _ in advice.evidence_next_steps(s, items)] == ["host_contention"]
    # The rule read the waits less their waits for a core (clocked
    # fetches): the 40 ms median is already without the host's part, and
    # it passes the line as it is (helpers 41A, 41B: at num_workers=0,
    # scaled twice, it read under the line and the host led).
    s["stalls"] = {"stall_median_s": 0.04, "threshold_s": 0.02, "less_core_waits": True}
    got = advice.evidence_next_steps(s, items)
    [host] = [f for f in got if f[0] == "host_contention"]
    assert host[1]["loader_own"] and host[1]["rest_s"] == pytest.approx(0.04)
    assert [c for c, _ in advice.arrange(got)[0]][0] == "irregular"


def test_a_full_host_names_fewer_workers_where_the_prediction_halves_the_wait():
    from traceml.findings import prediction_check

    # 4 workers beside 4 spinning programs (helper 31B): HOST-BOUND, and
    # the trusted prediction gives 0.47-0.95 ms at num_workers=0 against
    # 2.47 ms measured at 4: fewer workers lead, not "before changing the
    # loader".
    assert host_contention._TRUSTED == prediction_check.PREDICT_TRUSTED
    pred = {"trust": "trusted", "num_workers": 4,
            "this_run": {"measured_wait_s": 2.47e-3},
            "by_workers": [{"num_workers": 0, "wait_s": 0.466e-3, "main_fetch_s": 0.482e-3},
                           {"num_workers": 1, "wait_s": 2.0e-3},
                           {"num_workers": 4, "wait_s": 2.4e-3}]}
    s = {"diagnosis": "HOST-BOUND", "input_share": 0.3, "loader": {"num_workers": 4},
         "host": {"usable_cpus": 2}, "prediction": pred,
         "wait_parts": {"all": {"parts_s": {"host_cpu_wait": 0.6, "in_transit": 0.4}}}}
    (f,) = host_contention.advise(s)
    assert f.numbers["fewer"] == {"num_workers": 0, "wait_s": pytest.approx(0.948e-3),
                                  "now_s": 2.47e-3, "now_workers": 4}
    said = host_contention.WORDS["host_bound"](f.numbers)
    assert "num_workers=(4, 0)" in said and "before changing the loader" not in said
    # Untrusted, or no halving: the host's own next step.
    pred["trust"] = "misfit"
    assert "fewer" not in host_contention.advise(s)[0].numbers
    pred["trust"] = "trusted"
    pred["by_workers"][0]["main_fetch_s"] = 1.0e-3
    assert "fewer" not in host_contention.advise(s)[0].numbers
