"""prediction_check's words: the numbers in one line come from one pace."""

import re

import pytest

from traceml import predict
from traceml.findings import prediction_check


def test_a_row_that_keeps_up_quotes_the_cores_at_its_own_pace():
    # Batches of 16 ms of CPU and 84 ms asleep at 2 workers on 2 CPUs; the
    # loop's 12 ms step body is 5 ms on a CPU and 7 ms waiting for a core.
    # The rows read the compute as measured (12 ms), at which k workers
    # need 16 / 12 = 1.3 cores; at the quiet compute (5 ms) they would
    # need 3.2, more than the host has, and a line saying both
    # ("num_workers=57 keeps up ... the workers need about 13.3 cores" on 2
    # CPUs, helper 33A) contradicts itself.
    def stats(v):
        return {"mean": v, "median": v, "p95": v}

    s = {"production": {"available": True, "coverage": 1.0, "make_s": stats(0.100),
                        "cpu_s": stats(0.016), "runq_s": None, "handover_s": stats(0.0),
                        "busy_share": 1.0},
         "host": {"usable_cpus": 2}, "loader": {"num_workers": 2},
         "compute_s": {"mean": 0.012}, "input_wait_s": {"mean": 0.04},
         "step_s": {"mean": 0.052},
         "wait_parts": {"compute": {"steps": 40, "compute_s": 0.48, "runq_known": True,
                                    "parts_s": {"main_cpu": 0.20, "cpu_wait": 0.28,
                                                "off_cpu": 0.0}}}}
    p = predict.predict(s)
    assert p["keeps_up_with"] is not None and p["keeps_up_with"] > 2
    assert p["worker_cores_needed"] == pytest.approx(0.016 / (0.012 * 0.20 / 0.48))
    assert p["worker_cores_needed"] > 2
    trusted = {**p, "trust": prediction_check.PREDICT_TRUSTED}
    (line,) = [t for t in prediction_check.prediction_lines({"prediction": trusted})
               if "keeps up" in t]
    cores = float(re.search(r"the workers need about ([0-9.]+) cores", line).group(1))
    assert cores == pytest.approx(0.016 / 0.012, abs=0.05), line
    assert cores <= p["usable_cpus"]


def _contended(cpu_s, make_s, runq_s, num_workers=4, compute_s=0.003):
    # Workers of pure CPU on 2 busy cores: each waited runq_s for a core.
    def stats(v):
        return {"mean": v, "median": v, "p95": v}

    return {"production": {"available": True, "coverage": 1.0, "make_s": stats(make_s),
                           "cpu_s": stats(cpu_s), "runq_s": stats(runq_s),
                           "handover_s": stats(0.0005), "busy_share": 1.0},
            "host": {"usable_cpus": 2}, "loader": {"num_workers": num_workers},
            "compute_s": {"mean": compute_s}, "input_wait_s": {"mean": 0.02},
            "step_s": {"mean": 0.023}}


def test_the_held_rows_give_pure_cpu_workers_no_more_cores():
    # 30 ms of CPU a batch, 90 ms waiting for a core: each of 4 workers got
    # a quarter of a core, 1 core in all, and about 4 other threads were
    # runnable.  Fair sharing gives 16 workers 16/20 of 2 cores; held at
    # the 1 core 4 workers had, 16 make batches no faster than 4.
    p = predict.predict(_contended(0.030, 0.120, 0.090))
    rows = {r["num_workers"]: r for r in p["by_workers"]}
    assert "held_wait_s" not in rows[4] and "held_wait_s" not in rows[2]
    for k in (8, 16):
        share = min(1.0, 4 * 0.25 / k)                   # the held core, split k ways
        own = max(0.0005, (0.030 / share) / k - 0.003)
        assert rows[k]["held_wait_s"] == pytest.approx(
            max(own, p["step_floor_s"] - 0.003)), k
        assert rows[k]["wait_s"] < rows[k]["held_wait_s"]
    assert rows[16]["held_wait_s"] == pytest.approx(rows[4]["wait_s"], rel=1e-6)


def test_more_workers_that_only_take_others_cores_are_a_sweep_to_run():
    # helper 34A: "Next: num_workers=16 shortens the wait to about 14.1 ms
    # a step (21.8 ms at 4)" on 2 busy CPUs; the sweep measured no gain.
    p = predict.predict(_contended(0.030, 0.120, 0.090))
    shorter = prediction_check._shorter_with_more(p)
    assert shorter is not None and shorter["from_others"]
    said = prediction_check._more_words({"num_workers": 4, "shorter": shorter})
    assert said.startswith("Next: traceml.sweep(make_loader, num_workers=(4, ")
    assert "only by their taking cores" in said and "shortens the wait to" not in said
    # Workers asleep most of their make time overlap more of it with more
    # of them, cores held or not: the claim stays.
    p = predict.predict(_contended(0.005, 0.120, 0.005))
    shorter = prediction_check._shorter_with_more(p)
    assert shorter is not None and not shorter["from_others"]
    said = prediction_check._more_words({"num_workers": 4, "shorter": shorter})
    assert said.startswith(f"Next: num_workers={shorter['num_workers']} shortens the wait")


def test_a_count_that_keeps_up_only_on_others_cores_says_so():
    # 8 ms of CPU a batch, 24 ms waiting for a core, 2 workers: 4 workers
    # keep up under fair sharing, not on the half core the 2 had.
    p = predict.predict(_contended(0.008, 0.032, 0.024, num_workers=2, compute_s=0.006))
    assert p["keeps_up_with"] is not None and p["keeps_up_with"] > 2
    assert p["keeps_up_held_wait_s"] > p["handover_s"]
    trusted = {**p, "trust": prediction_check.PREDICT_TRUSTED}
    (line,) = [t for t in prediction_check.prediction_lines({"prediction": trusted})
               if "keeps up" in t]
    assert "only by their taking cores" in line
    assert f"num_workers=(2, {p['keeps_up_with']})" in line


def test_cpu_workers_as_many_as_the_cpus_gain_only_others_cores():
    # 2 workers of 15 ms of CPU a batch on 2 CPUs, barely waiting for a
    # core (helper 36B, c03): the rows put 8 or 16 workers ahead only by
    # their share of the loop's and other threads' cores, and the claim
    # flipped between 8, 16 and a sweep over 3 identical runs.  A sweep to
    # run, never "num_workers=N shortens the wait".
    p = predict.predict(_contended(0.015, 0.0155, 0.0005, num_workers=2))
    assert p["usable_cpus"] == 2 and not prediction_check._off_cpu_bound(p)
    assert all(r.get("held_wait_s") is None for r in p["by_workers"])
    shorter = prediction_check._shorter_with_more(p)
    assert shorter is not None and shorter["from_others"]
    said = prediction_check._more_words({"num_workers": 2, "shorter": shorter})
    assert said.startswith("Next: traceml.sweep(make_loader, num_workers=(2, ")
    # One worker on the same 2 CPUs: a second has a core of its own.
    p = predict.predict(_contended(0.015, 0.0155, 0.0005, num_workers=1))
    shorter = prediction_check._shorter_with_more(p)
    assert shorter is None or not shorter["from_others"]


def test_a_row_whose_slow_batches_outlast_its_look_ahead_says_so():
    # Helper 37A: every 6th batch 100 ms (a mean of 17.5 ms, p95 100 ms),
    # 20 ms compute, prefetch_factor=4, 2 workers: 0 stalls at 2 workers,
    # 7 at 1.  The mean row put num_workers=1 at the hand-over, and the
    # advice said "try traceml.sweep(make_loader, num_workers=(2, 1))".
    from traceml.findings import host_contention

    s = {"production": {"available": True, "coverage": 1.0,
                        "make_s": {"mean": 0.0175, "median": 0.001, "p95": 0.100},
                        "cpu_s": {"mean": 0.0005, "median": 0.0005, "p95": 0.0005},
                        "runq_s": None, "handover_s": {"mean": 0.0005}, "busy_share": 0.5},
         "host": {"usable_cpus": 2}, "loader": {"num_workers": 2, "prefetch_factor": 4},
         "compute_s": {"mean": 0.020}, "input_wait_s": {"mean": 0.0012},
         "step_s": {"mean": 0.0212}}
    p = predict.predict(s)
    rows = {r["num_workers"]: r for r in p["by_workers"]}
    # One worker: its p95 batch (100 ms, the mean's 17.5 ms scaled by
    # 100 / 17.5) against 1 x 4 batches of 20.5 ms in hand.
    assert rows[1]["slow_batch_s"] == pytest.approx(0.100, rel=1e-6)
    assert rows[1]["look_ahead_s"] == pytest.approx(4 * 0.0205)
    # Two workers: 8 batches, 164 ms, hold it; no row at 0 (no look-ahead).
    assert "slow_batch_s" not in rows[2] and "slow_batch_s" not in rows[0]
    said = prediction_check._row_wait(rows[1])
    assert said.startswith("over ") and "outlasts the 82 ms of batches in hand: stalls" in said
    # Fewer workers are not advised on that row.
    trusted = {**s, "prediction": {**p, "trust": prediction_check.PREDICT_TRUSTED}}
    fewer = host_contention.fewer_workers(trusted)
    assert fewer is None or fewer["num_workers"] != 1
