"""advice: the next steps a summary's evidence calls for."""

import numpy as np
import pytest

import corpus
from traceml.findings import advice


def _spread_with_outliers(seed: int) -> dict:
    """num_workers=0, each batch 0.2-9 ms in the main process against a 8 ms
    step (input about 40% of the step, spread over every fetch), and 3
    lone 25 ms batches: FAST, no stalls, 3 outliers."""
    rng = np.random.default_rng(seed)
    wait = rng.uniform(0.2, 9.0, 150)
    wait[[40, 90, 130]] = 25.0
    case = corpus.make(f"spread-plus-outliers-s{seed}", wait, {}, num_workers=0, compute_ms=8.0)
    return corpus.replay(case).summary


def test_outliers_beside_an_input_bound_spread_wait_keep_its_next_step():
    s = _spread_with_outliers(0)
    assert s["diagnosis"] == "INPUT-BOUND" and s["shape"] == "FAST"
    assert s["stalls"]["outliers"] == 3 and s["stalls"]["count"] == 0
    codes = [code for code, _ in advice.next_steps(s)]
    # The outliers are a note; the wait spread over every fetch leads.
    assert codes[0] == "outliers" and "spread_wait" in codes
    assert any(c in codes for c in ("largest_part", "vary_workers_or_prefetch"))


def test_an_outlier_that_holds_most_of_the_wait_is_not_a_spread_wait():
    # 40 fetches of 2 ms and 10 ms steps, one of them 300 ms: input is
    # about half the step time, 80% of it the outlier's.
    wait = np.full(40, 2.0)
    wait[25] = 300.0
    case = corpus.make("one-outlier-holds-the-wait", wait, {}, num_workers=0, compute_ms=10.0)
    s = corpus.replay(case).summary
    assert s["diagnosis"] == "INPUT-BOUND" and s["shape"] == "FAST"
    assert s["stalls"]["outliers"] == 1 and s["stalls"]["count"] == 0
    held = s["stalls"]["cost_share"] / s["input_share"]
    assert held > advice.OUTLIERS_HOLD
    codes = [code for code, _ in advice.next_steps(s)]
    assert codes[0] == "outliers" and "spread_wait" not in codes
    # Where the rest of the wait holds most of it, the spread leads still
    # (the test above): its outliers hold under half.
    s2 = _spread_with_outliers(0)
    assert s2["stalls"]["cost_share"] <= advice.OUTLIERS_HOLD * s2["input_share"]


def test_a_one_off_change_after_the_first_epoch_leads_its_next_step():
    from traceml.findings import Finding

    named = Finding("look_at_function", {"function": "DS.__getitem__"})
    step = Finding("trend_next", {"label": "STEP"})
    items, roles = advice.arrange([named, step])
    assert [it[0] for it in items] == ["trend_next", "look_at_function"]
    assert roles == ["lead", "also"]
    # A rise keeps the named function first.
    items, roles = advice.arrange([named, Finding("trend_next", {"label": "RISING"})])
    assert [it[0] for it in items] == ["look_at_function", "trend_next"]
    # So does a change inside the run: the measured part leads it.
    inside = Finding("trend_next", {"label": "STEP", "changed_at_step": 42})
    items, roles = advice.arrange([inside, named])
    assert [it[0] for it in items] == ["look_at_function", "trend_next"]


def test_other_threads_holding_the_loop_lead_at_no_workers():
    # num_workers=0 and the main process's other threads ran through most
    # of each fetch: their part leads alone, not "try num_workers >= 1".
    s = corpus.replay(corpus.gil_held_no_workers(0)).summary
    assert s["diagnosis"] == "INPUT-BOUND"
    largest = s["wait_parts"]["largest"]
    assert largest["part"] == "other_threads" and largest["share"] > 0.5
    steps = advice.next_steps(s)
    assert [code for code, _ in steps] == ["largest_part"]
    assert steps[0][1]["part"] == "other_threads"


def test_irregular_stalls_without_a_loader_get_no_loader_experiment():
    # Probes around a hand-written loop (no DataLoader facts): 10 stalls of
    # 40 ms at gaps drawn from 3-17 among 1 ms fetches, 150 steps.
    gaps = [3, 11, 5, 17, 7, 13, 4, 9, 15]
    stalls = np.cumsum([6] + gaps)
    wait = np.full(150, 1.0)
    wait[stalls] = 40.0
    s = corpus.replay(corpus.make("probes-irregular", wait, {}, num_workers=None)).summary
    assert not s.get("loader") and s["temporal"]["label"] == "IRREGULAR", s["temporal"]
    codes = [code for code, _ in advice.next_steps(s)]
    assert "wrap_to_see_stalls" in codes and "compare_in_order" not in codes
    words = advice.WORDS["irregular"](dict(advice.next_steps(s))["irregular"])
    assert "worker round" not in words


def test_a_spread_wait_at_no_workers_names_no_workers():
    # num_workers=0 (helper 29A): "handing it over from the workers" was
    # said of a loader with none.
    from traceml.findings import sentences

    at0 = sentences([("spread_wait", {"share": 0.3, "median_s": 0.002, "num_workers": 0})])[0]
    assert "from the workers" not in at0 and "at num_workers=0 it makes every batch" in at0
    at2 = sentences([("spread_wait", {"share": 0.3, "median_s": 0.002, "num_workers": 2})])[0]
    assert "handing it over from the workers" in at2


def test_irregular_stalls_of_alike_batches_ask_no_in_order_experiment():
    # Random stalls at 4 workers: IRREGULAR.  Where the workers' batch
    # timing found one group of make times (every batch alike), no slow
    # sample sets them and none can overtake: no "slow samples" story and
    # no in_order experiment (helper 30A: 5 workers on 2 cores).
    rng = np.random.default_rng(5)
    wait = rng.uniform(0.1, 0.3, 100)
    hit = rng.random(100) < 0.2
    wait[hit] = rng.uniform(60.0, 100.0, hit.sum())
    s = corpus.replay(corpus.make("irregular-alike", wait, {}, num_workers=4,
                                  compute_ms=8.0)).summary
    assert s["temporal"]["label"] == "IRREGULAR"
    codes = [c for c, _ in advice.next_steps(s)]
    assert "irregular" in codes and "compare_in_order" in codes
    s["slow_code"] = {"status": "on", "one_group": True}
    s["host"] = {**(s.get("host") or {}), "usable_cpus": 2}
    steps = advice.next_steps(s)
    assert [c for c, _ in steps][-1] == "irregular"
    said = advice.WORDS["irregular"](dict(steps)["irregular"])
    assert "slow samples" not in said and "(4 workers on 2 CPUs)" in said, said
    assert "of gaps): every batch took about as long to make" in said, said


def test_a_change_of_level_inside_the_run_follows_the_measured_lead():
    # A GIL-holding thread, 93% of the wait, and a change of level at
    # steady step 32 of one epoch (helper 30B): the hand-over's measured
    # step leads, the change follows it; its own next step stays "also".
    trend = ("trend", {"label": "STEP", "changed_at_step": 32})
    items = [trend, ("hand_over", {}), ("trend_next", {"label": "STEP",
                                                       "changed_at_step": 32})]
    arranged, roles = advice.arrange(items)
    assert [c for c, _ in arranged] == ["hand_over", "trend", "trend_next"]
    assert roles == ["lead", "why", "also"]
    # Alone, the change comes before its own next step.
    arranged, roles = advice.arrange([trend, items[2]])
    assert [c for c, _ in arranged] == ["trend", "trend_next"] and roles == ["why", "lead"]


def test_a_loop_without_workers_is_not_worded_as_workers():
    # num_workers=0 (helper 31A): no "worker PIDs stable", no "worker
    # start-up" at the epoch start, and a rising wait asks for the main
    # process's memory, where the dataset runs.
    from traceml.findings import bottom_line, worker_evidence

    assert "main process" in bottom_line._epoch_start_cause({"num_workers": 0})
    assert "worker start-up" in bottom_line._epoch_start_cause({"num_workers": 2})
    s = {"loader": {"num_workers": 0}, "host": None, "delivery": None,
         "workers": {"pid_changes": [], "pids_by_epoch": [[], [], []], "exited": [],
                     "sampler": {"samples": 0, "enabled": False}}}
    assert not any("worker PIDs" in line for line in worker_evidence.process_lines(s))
    s["loader"]["num_workers"] = 2
    assert "worker PIDs stable across 3 epochs" in worker_evidence.process_lines(s)
    words = advice.WORDS["trend_next"]
    assert "main process's memory" in words({"label": "RISING", "main": True})
    assert "workers' memory" in words({"label": "RISING"})


def test_a_compute_queued_behind_other_programs_names_the_host():
    # The step's compute waited for a core 54% of its time at 2 workers,
    # and 50% at num_workers=0 beside the same programs (helper 32B): the
    # next step said "a lower num_workers".  Where other programs' CPU
    # accounts for most of the job's waits for a core in the compute, the
    # host is named.
    body = {"steps": 100, "compute_s": 1.0, "runq_known": True,
            "parts_s": {"main_cpu": 0.4, "cpu_wait": 0.54, "off_cpu": 0.06}}
    s = {"wait_parts": {"compute": {**body, "host_share": 0.9}},
         "loader": {"num_workers": 2}}
    p = advice._compute_core_wait(s)
    assert p == {"core_wait_share": 0.54, "largest": True, "num_workers": 2,
                 "host_share": 0.9}
    said = advice.WORDS["compute_core_wait"](p)
    assert "quieter host" in said and "lower num_workers" not in said, said
    # The job's own processes hold the cores: fewer of them.
    s["wait_parts"]["compute"]["host_share"] = 0.2
    said = advice.WORDS["compute_core_wait"](advice._compute_core_wait(s))
    assert "a lower num_workers" in said, said
    del s["wait_parts"]["compute"]["host_share"]
    assert "host_share" not in advice._compute_core_wait(s)


def test_a_compute_that_waits_for_a_core_longer_than_for_input_leads():
    # Helper 64: 2 workers of 3 ms items beside a 2-thread model on 2
    # cores, COMPUTE-BOUND: the loop's thread waited for a core 15% of a
    # 46.7 ms compute (7 ms a step) against a 2.11 ms fetch, and the lead
    # said "profile the step itself"; num_workers=0 stepped 38.5 ms
    # against 40.4 ms.  Not the compute's largest part, yet past compare's
    # tolerance and past the input wait: a lower num_workers, by step time.
    body = {"steps": 58, "compute_s": 58 * 0.0467, "runq_known": True,
            "parts_s": {"main_cpu": 58 * 0.0467 * 0.85, "cpu_wait": 58 * 0.0467 * 0.15,
                        "off_cpu": 0.0}}
    s = {"wait_parts": {"compute": {**body, "host_share": 0.05},
                        "all": {"wait_s": 58 * 0.00211, "fetches": 58}},
         "loader": {"num_workers": 2}, "host": {"usable_cpus": 2}}
    p = advice._compute_core_wait(s)
    assert p["largest"] is False
    assert p["cpu_wait_s"] == pytest.approx(0.15 * 0.0467)
    assert p["input_wait_s"] == pytest.approx(0.00211)
    said = advice.WORDS["compute_core_wait"](p)
    assert said.startswith("The step's own compute waited for a core 15% of its time, 7 ms a "
                           "step, more than the loop waited for input (2.11 ms a fetch): its "
                           "2 workers or other programs held the cores"), said
    assert "a lower num_workers" in said
    # Under compare's tolerance of the compute the experiment could not
    # show it: the lead stays "profile the step itself".
    tenth = advice.COMPUTE_CORE_WAIT_MIN_SHARE
    body["parts_s"] = {"main_cpu": body["compute_s"] * (1 - tenth / 2),
                       "cpu_wait": body["compute_s"] * tenth / 2, "off_cpu": 0.0}
    s["wait_parts"]["compute"] = {**body, "host_share": 0.05}
    assert advice._compute_core_wait(s) == {}


def test_stalls_on_top_in_few_bursts_say_the_bursts_are_few():
    # 15 stalls in 3 bursts (helper 36A): "TOO-FEW bursts" on the shape
    # line beside "15 stalls ..., too few to show a pattern".
    from traceml.findings import advice
    p = {"count": 15, "threshold_s": 0.027, "pattern_known": False, "pattern": "TOO-FEW",
         "period": None, "bursts": 3}
    said = advice.WORDS["stalls_on_top"](p)
    assert said == ("On top, 15 stalls past the stall line (27 ms), in 3 bursts of back-to-back "
                    "stalls: too few bursts to show a pattern."), said
    assert advice.WORDS["stalls_on_top"]({**p, "bursts": None}).endswith(
        "too few to show a pattern.")


def test_a_period_of_overtaken_deliveries_is_not_sent_to_look_by_step():
    # Helper 37A: every 2nd batch slow at 2 workers and in_order=False
    # stalled every 4 steps, and read "look at what runs every 4 steps"
    # (6 of 8 runs): with batches overtaking, the cadence is the loop's.
    wait = np.full(96, 0.5)
    wait[::4] = 20.0
    case = corpus.make("period-4-at-2-workers", wait, {}, num_workers=2, compute_ms=10.0)
    s = corpus.replay(case).summary
    assert s["temporal"]["label"] == "PERIODIC" and s["temporal"]["period"] == 4
    codes = [code for code, _ in advice.next_steps(s)]
    assert "period_not_workers" in codes and "confirm_period" in codes
    s = {**s, "loader": {**s["loader"], "in_order": False},
         "delivery": {**(s.get("delivery") or {}), "overtaking": 14}}
    steps = dict(advice.next_steps(s))
    assert "confirm_period" not in steps
    said = advice.WORDS["period_not_workers"](steps["period_not_workers"])
    assert "in_order=False and 14 deliveries overtaking" in said
    assert "the loop's, not the data's" in said and "recurs by step" not in said


def test_alike_batches_blocked_off_cpu_are_not_said_to_share_the_cores():
    # Helper 37A: 4 workers serialised by one lock held 20 ms a batch, 1.3
    # ms of CPU in a 40-70 ms batch: not "how the workers share the cores".
    s = {"production": {"make_s": {"mean": 0.0568}, "cpu_s": {"mean": 0.00193},
                        "runq_s": {"mean": 0.00245}}}
    blocked = advice._blocked_share(s)
    assert blocked == 1 - (0.00193 + 0.00245) / 0.0568
    p = {"modal_gap": 4, "modal_share": 0.4, "alike": True, "num_workers": 4, "cpus": 2,
         "blocked": blocked}
    said = advice.WORDS["irregular"](p)
    assert "blocked, neither on a CPU nor waiting for one, for 92%" in said
    assert "share the cores" not in said
    # On a CPU or queued for one most of the time: the cores, as before.
    p["blocked"] = advice._blocked_share({"production": {
        "make_s": {"mean": 0.05}, "cpu_s": {"mean": 0.02}, "runq_s": {"mean": 0.02}}})
    assert "how the workers and the loop share the cores (4 workers on 2 CPUs)" in \
        advice.WORDS["irregular"](p)
    assert advice._blocked_share({"production": {}}) is None


def test_lock_step_without_worker_timing_says_what_it_cannot_tell():
    # Helper 37A: spawn workers (no batch timing), every 3rd batch slow at
    # 3 workers: read lock-step with no caveat.  The corpus's seed case
    # has no worker timing either; with it, the caveat goes.
    s = corpus.replay(corpus.seed_table(0, 4)).summary
    steps = dict(advice.next_steps(s))
    assert steps["lockstep"]["untimed"] == s["production"]["unavailable"]
    said = advice.WORDS["lockstep"](steps["lockstep"])
    assert "batch timing is off" in said and "one slow batch a round" in said
    timed = {**s, "production": {**s["production"], "available": True, "unavailable": None}}
    assert "untimed" not in dict(advice.next_steps(timed))["lockstep"]


def test_workers_saturate_the_cpus_only_over_the_whole_run():
    # Helper 37B: 1.9 worker cores in the stalls at num_workers=2 on 2 CPUs
    # read "more workers cannot help", while 4 workers cut the step from
    # 32-44 ms to 25-30 ms: between the stalls the workers idled with the
    # look-ahead full.  The workers' CPU over every sampled interval counts.
    def summary(slow_cpu, fast_cpu):
        return {"host": {"usable_cpus": 2}, "workers": {"intervals": {
            "slow": {"count": 10, "wall_s": 1.0, "worker_cpu_s": slow_cpu,
                     "worker_cores_busy": slow_cpu},
            "fast": {"count": 30, "wall_s": 3.0, "worker_cpu_s": fast_cpu,
                     "worker_cores_busy": fast_cpu / 3.0}}}}

    assert advice._workers_saturate_cpus(summary(1.9, 1.5)) is None      # 0.85 cores
    got = advice._workers_saturate_cpus(summary(1.9, 5.5))               # 1.85 cores
    assert got == {"cores": pytest.approx(7.4 / 4.0), "cpus": 2}
    words = advice.WORDS["cpus_saturated"]({**got, "num_workers": 2})
    assert "busy through the run (1.9 cores at num_workers=2)" in words
