"""The num_workers model (traceml.predict): its arithmetic on made-up
inputs worked by hand, and on real DataLoaders whose items sleep a set
time (so that the time per batch is known and survives CPU load)."""

import time
import warnings

import pytest

from traceml import predict
from traceml.fmt import fmt_s
from traceml.findings import advice, input_bound, prediction_check
from traceml.findings import sentences


def _summary(make=0.020, cpu=0.020, runq=None, handover=0.0, compute=0.012, cpus=2,
             n=1, busy=1.0, wait=None, coverage=1.0):
    def stats(v):
        return None if v is None else {"mean": v, "median": v, "p95": v}

    return {
        "production": {"available": True, "coverage": coverage, "make_s": stats(make),
                       "cpu_s": stats(cpu), "runq_s": stats(runq),
                       "handover_s": stats(handover), "busy_share": busy},
        "host": {"usable_cpus": cpus},
        "loader": {"num_workers": n},
        "compute_s": {"mean": compute},
        "input_wait_s": {"mean": wait},
        "step_s": {"mean": None if wait is None else compute + wait},
    }


def test_cpu_bound_batches_need_more_workers_than_cores_give_for_free():
    # c = 20 ms, no wait for a core (the main process alone besides: L = 1),
    # s = 12 ms.  With k workers each gets min(1, 2 / (k + 1)) of a core:
    # T_k / k = 0.02 (k + 1) / (2k) for k >= 1, <= 12 ms from k = 5.
    p = predict.predict(_summary(wait=0.008))
    assert p["keeps_up_with"] == 5 and p["enough_cores"]
    assert p["wait_floor_s"] == 0.0 and p["cheaper_by"] is None
    want = {0: 0.020, 1: 0.008, 2: 0.015 - 0.012, 4: 0.0125 - 0.012}
    got = {row["num_workers"]: row["wait_s"] for row in p["by_workers"]}
    for k, w in want.items():
        assert got[k] == pytest.approx(w)
    assert got[8] == 0.0 and got[16] == 0.0  # the hand-over, 0 here
    assert p["worker_cores_needed"] == pytest.approx(0.020 / 0.012)
    assert p["this_run"]["error"] == pytest.approx(0.0)


def test_the_no_workers_row_gives_both_ends_of_the_main_processes_fetch_cpu():
    # A custom Sampler costing 12 ms of the main process's CPU a fetch at
    # num_workers=2 (wait_parts: 0.6 s of main CPU over 50 clocked
    # fetches): at num_workers=0 the batch is made there (20 ms) and the
    # sampler's part of the 12 ms stays, receiving goes: 20 to 32 ms.
    s = _summary(wait=0.008, n=2)
    s["wait_parts"] = {"all": {"fetches": 50, "wait_s": 1.0,
                               "parts_s": {"main_cpu": 0.6, "cpu_wait": 0.0, "asleep": 0.4}}}
    p = predict.predict(s)
    zero = next(row for row in p["by_workers"] if row["num_workers"] == 0)
    assert zero["wait_s"] == pytest.approx(0.020)
    assert zero["main_fetch_s"] == pytest.approx(0.012)
    assert all("main_fetch_s" not in row for row in p["by_workers"] if row["num_workers"])
    from traceml.fmt import fmt_s
    assert prediction_check._row_wait(zero).startswith(f"{fmt_s(0.020)} to {fmt_s(0.032)}")


def test_a_dataset_too_costly_for_the_host_gets_a_floor_and_a_factor():
    # c = 60 ms on 2 cores against s = 10 ms: c / C = 30 ms per batch at
    # best, so 20 ms of wait per step at any num_workers; 3x cheaper.
    # With 2 workers and the main process (L = 1) each gets 2 / 3 of a core:
    # T_2 = 90 ms, 45 per batch, 35 ms of wait: as measured, so trusted.
    p = predict.predict(_summary(make=0.060, cpu=0.060, compute=0.010, n=2, wait=0.035))
    assert p["trust"] == "trusted" and p["this_run"]["miss_of_step"] == pytest.approx(0.0)
    assert p["keeps_up_with"] is None and not p["enough_cores"]
    assert p["wait_floor_s"] == pytest.approx(0.020)
    assert p["cheaper_by"] == pytest.approx(3.0)
    assert p["worker_cores_needed"] == pytest.approx(6.0)
    lines = prediction_check.prediction_lines({"prediction": p})
    assert "no num_workers keeps up" in lines[1] and "3.0x cheaper" in lines[1]


def test_waiting_for_a_core_counts_the_other_load():
    # A worker got c / (c + q) = 0.5 of a core: R = C / 0.5 = 4 runnable,
    # one of them the worker (busy 100%): L = 3 others.  Off-CPU time
    # o = T - c - q = 5 ms.
    p = predict.predict(_summary(make=0.045, cpu=0.020, runq=0.020, compute=0.010, n=1))
    assert p["core_share"] == pytest.approx(0.5)
    assert p["other_runnable"] == pytest.approx(3.0)
    assert p["off_cpu_s"] == pytest.approx(0.005)
    # k = 2: each gets 2 / 5 of a core, T_2 = 5 + 20 / 0.4 = 55 ms, 27.5 per
    # batch, 17.5 ms of wait.
    got = {row["num_workers"]: row["wait_s"] for row in p["by_workers"]}
    assert got[2] == pytest.approx(0.0175)
    assert predict.wait_for(p, 3) == pytest.approx((0.005 + 0.020 / (2 / 6)) / 3 - 0.010)


def test_the_no_workers_row_gives_the_main_processes_computing_cores_to_the_fetch():
    # The worker got half a core: L = 3 others, 1.8 of them the main
    # process's computing threads (its CPU over the steady steps).  At
    # num_workers=0 those pause while the main process makes the batch, one
    # thread: L_0 = 3 - 1.8 + 1 = 2.2, f_0 = 2 / 2.2, and the batch's 20
    # ms of CPU (and 5 ms off CPU) take 5 + 20 x 1.1 = 27 ms, where L = 3
    # gave 5 + 20 x 1.5 = 35 ms.
    s = _summary(make=0.045, cpu=0.020, runq=0.020, compute=0.010, n=1)
    s["workers"] = {"intervals": {"slow": {"main_cpu_s": 0.9, "wall_s": 0.5},
                                  "fast": {"main_cpu_s": 0.9, "wall_s": 0.5}}}
    p = predict.predict(s)
    assert p["other_runnable"] == pytest.approx(3.0)
    assert predict.wait_for(p, 0) == pytest.approx(0.005 + 0.020 * 2.2 / 2)
    del s["workers"]
    assert predict.wait_for(predict.predict(s), 0) == pytest.approx(0.005 + 0.020 * 3 / 2)


def test_without_a_wait_for_a_core_the_other_load_is_the_main_processes():
    # No wait for a core, and the main process kept 0.2 of a core busy
    # (sleeping between steps): L = 0.2.  k = 2: each worker gets
    # min(1, 2 / 2.2) of a core, T_2 = 20 / (2 / 2.2) = 22 ms, 11 per batch.
    s = _summary(runq=0.0, compute=0.006)
    s["workers"] = {"intervals": {"slow": {"main_cpu_s": 0.1, "wall_s": 0.5},
                                  "fast": {"main_cpu_s": 0.1, "wall_s": 0.5}}}
    p = predict.predict(s)
    assert predict.main_cores(s) == pytest.approx(0.2)
    assert p["other_runnable"] == pytest.approx(0.2)
    assert predict.wait_for(p, 2) == pytest.approx(0.022 / 2 - 0.006)


def test_sleeping_batches_need_workers_not_cores():
    # o = 39 ms, c = 0: T_k / k = 39 / k ms against s + h = 10 ms: 4 workers.
    p = predict.predict(_summary(make=0.039, cpu=0.0, compute=0.009, handover=0.001))
    assert p["keeps_up_with"] == 4 and p["enough_cores"]
    assert predict.wait_for(p, 2) == pytest.approx(0.039 / 2 - 0.009)
    # A little CPU shared with the main process tips it to 5: with k = 4
    # each worker gets 2 / 5 of a core, T_4 = 39.8 + 0.2 / 0.4 ms.
    p = predict.predict(_summary(make=0.040, cpu=0.0002, compute=0.009, handover=0.001))
    assert p["keeps_up_with"] == 5


@pytest.mark.parametrize("change", [
    {"coverage": 0.5}, {"n": 0}, {"cpus": None},
])
def test_no_prediction_without_what_it_rests_on(change):
    assert predict.predict(_summary(**change)) is None
    assert predict.predict({"production": {"available": False}}) is None


def test_a_sweep_row_gets_the_basis_runs_prediction():
    p = predict.predict(_summary(wait=0.008))
    rows = [{"condition": {"num_workers": 1, "batch_size": 4}, "loader_num_workers": 1,
             "mean_s": 0.008},
            {"condition": {"num_workers": 2, "batch_size": 4}, "loader_num_workers": 2,
             "mean_s": 0.004},
            {"condition": {"num_workers": 2, "batch_size": 8}, "loader_num_workers": 2,
             "mean_s": 0.004}]
    got = predict.against_runs(rows, [p, None, None])
    assert got == {"basis": 0, "rows": [0, 1]}
    assert rows[1]["predicted_s"] == pytest.approx(0.003)
    assert rows[1]["predicted_error"] == pytest.approx(-0.25)
    assert "predicted_s" not in rows[2]  # batch_size differs: not the model's question
    assert predict.against_runs(rows, [None, None, None]) is None


def test_a_sweep_that_kept_num_workers_gets_no_prediction():
    # prefetch_factor varied at num_workers=2, forward and back: the model
    # predicts across num_workers only, so it has nothing to check here (a
    # sweep printed "predicted ... for each num_workers; off by 80% on the
    # other run", the other run being the same condition's backward pass).
    p = predict.predict(_summary(wait=0.008))
    rows = [{"condition": {"num_workers": 2, "prefetch_factor": f}, "loader_num_workers": 2,
             "mean_s": 0.004} for f in (1, 2, 4, 4, 2, 1)]
    assert predict.against_runs(rows, [p] + [None] * 5) is None
    assert not any("predicted_s" in r for r in rows)


torch = pytest.importorskip("torch")


@pytest.mark.slow
def test_a_sleeping_loader_predicts_its_own_fix():
    # One worker makes a batch in 24 ms (4 items sleeping 6 ms) against a
    # 6 ms consumer: 4 workers keep up (24 / 4 = 6), give or take the
    # sleep's overshoot and the hand-over (so 4 or 5).
    import traceml
    from burn import SleepDataset

    warnings.filterwarnings("ignore", message=".*worker processes in total.*")
    traceml.configure(sampler=False)
    try:
        rec = traceml.Recorder()
        loader = torch.utils.data.DataLoader(SleepDataset(4 * 30, 0.006), batch_size=4,
                                             num_workers=1)
        for _batch in rec.wrap(loader):
            time.sleep(0.006)
        r = rec.report()
    finally:
        traceml.configure(sampler=True)
    p = r["prediction"]
    assert p is not None and p["num_workers"] == 1
    assert 0.024 <= p["make_s"] < 0.024 * 1.5
    assert p["cpu_s"] < 0.2 * p["make_s"]
    assert p["keeps_up_with"] in (4, 5)
    assert "prediction: a worker makes a batch in" in str(r)


# --- trust: the check, the attribution, stuck steps ---------------------------------


def _miss(predicted, measured, step):
    return abs(predicted - measured) / step


def test_a_check_that_misses_by_more_than_the_tolerance_withholds_the_advice():

    # The model gives 8 ms at num_workers=1 (see the first test).  Measured
    # 30 ms of wait on a 42 ms step: a miss of 22 ms, 52% of the step.
    p = predict.predict(_summary(wait=0.030))
    assert p["this_run"]["predicted_wait_s"] == pytest.approx(0.008)
    assert p["this_run"]["miss_of_step"] == pytest.approx(_miss(0.008, 0.030, 0.042))
    assert p["trust"] == prediction_check.PREDICT_MISFIT
    lines = prediction_check.prediction_lines({"prediction": p})
    text = "\n".join(lines)
    assert "the model does not fit this run" in text and "no num_workers advice from it" in text
    assert "keeps up" not in text and "predicted wait per step" not in text
    assert "off by 52% of the step" in text
    # The numbers stay in the block (to_dict) for whoever wants them.
    assert p["keeps_up_with"] == 5


def test_the_fit_tolerance_is_a_share_of_the_step():

    # |0.008 - w| / (0.012 + w) = tol at w = (0.008 + 0.012 tol) / (1 - tol).
    tol = prediction_check.PREDICT_FIT_TOL
    edge = (0.008 + 0.012 * tol) / (1 - tol)
    inside = predict.predict(_summary(wait=edge * 0.999))
    outside = predict.predict(_summary(wait=edge * 1.001))
    assert inside["this_run"]["miss_of_step"] < tol < outside["this_run"]["miss_of_step"]
    assert inside["trust"] == prediction_check.PREDICT_TRUSTED
    assert outside["trust"] == prediction_check.PREDICT_MISFIT
    assert prediction_check.prediction_trust(0.008, None, 0.02, None) == (prediction_check.PREDICT_UNCHECKED, None)


@pytest.mark.parametrize("label, trust, said", [
    ("ONE-WORKER", "one_worker", "one worker's batches"),
    ("SLOW-SAMPLE", "slow_sample", "particular samples"),
    ("LOCK-STEP", "trusted", "keeps up"),
])
def test_an_attribution_to_one_worker_or_to_samples_withholds_the_advice(label, trust, said):
    # The check fits exactly (8 ms predicted, 8 ms measured), yet one slow
    # worker or slow samples break the model's "equal workers in turn".
    s = _summary(wait=0.008)
    s["attribution"] = {"label": label}
    p = predict.predict(s)
    assert p["trust"] == trust and p["this_run"]["miss_of_step"] == pytest.approx(0.0)
    text = "\n".join(prediction_check.prediction_lines({"prediction": p}))
    assert said in text
    assert ("keeps up" in text) == (trust == "trusted")


def test_stuck_steps_are_left_out_of_the_models_means():
    import numpy as np

    from traceml import _core, worker_timing

    # One worker, 20 batches of 2 ms CPU made back to back, each consumed by
    # a 10 ms step that waits 1 ms; batch 7 sleeps 10 s (its step waits 10 s).
    rows, steps = [], []
    t = 0
    for i in range(20):
        make = 10_000_000_000 if i == 7 else 2_000_000
        rows.append((t, t + make, 2_000_000, 0, i, 0, 0))
        wait = 10_000_000_000 if i == 7 else 1_000_000
        steps.append((t, t + wait, t + wait + 10_000_000, 0, 1, 0))
        t += wait + 10_000_000
    recs = np.array(rows, dtype=_core.BATCH_RECORD_DTYPE)
    st = np.array(steps, dtype=_core.RECORD_DTYPE)
    make = (recs["end_ns"] - recs["begin_ns"]).astype(float)
    wait = (st["fetch_done_ns"] - st["begin_ns"]).astype(float)
    keep = np.arange(20) != 7
    block, _ = worker_timing.summarise(recs, st, np.zeros(20, np.int32), np.ones(20, bool),
                                       {}, 1, None, stuck_after_ns=3_000_000_000)
    m = block["model"]
    assert m["left_out"] == 1
    assert m["make_s"] == pytest.approx(make[keep].mean() * 1e-9)
    assert m["wait_s"] == pytest.approx(wait[keep].mean() * 1e-9)
    assert block["make_s"]["mean"] == pytest.approx(make.mean() * 1e-9)  # the plain mean stays
    # Without a stuck line every step counts.
    block, _ = worker_timing.summarise(recs, st, np.zeros(20, np.int32), np.ones(20, bool),
                                       {}, 1, None)
    assert block["model"]["left_out"] == 0
    assert block["model"]["make_s"] == pytest.approx(make.mean() * 1e-9)


def test_the_prediction_rests_on_the_means_without_stuck_steps():
    # The plain means hold a 10 s batch (make 0.5 s a batch); the model
    # block's, without it, 2 ms: one worker keeps up with a 10 ms step.
    s = _summary(make=0.5, cpu=0.002, compute=0.010, wait=0.45)
    s["production"]["model"] = {"left_out": 1, "make_s": 0.002, "cpu_s": 0.002,
                                "runq_s": None, "handover_s": 0.0, "wait_s": 0.0,
                                "step_s": 0.010}
    p = predict.predict(s)
    assert p["make_s"] == pytest.approx(0.002) and p["left_out_stuck"] == 1
    assert p["keeps_up_with"] == 1 and p["trust"] == "trusted"
    assert p["this_run"]["measured_wait_s"] == 0.0
    assert "mean without 1 stuck step" in prediction_check.prediction_lines({"prediction": p})[0]


def test_a_trusted_no_num_workers_prediction_replaces_vary_num_workers():

    # 60 ms of CPU a batch on 2 cores against a 10 ms step: no num_workers
    # keeps up (see above), and the check fits (35 ms predicted, measured).
    p = predict.predict(_summary(make=0.060, cpu=0.060, compute=0.010, n=2, wait=0.035))
    items = [("lockstep", {"period": 2, "num_workers": 2}),
             ("vary_workers_then_in_order", {})]
    got = advice.evidence_next_steps(_input_bound(p), items)
    assert [c for c, _ in got] == ["lockstep", "predicted_no_workers"]
    params = got[1][1]
    assert params["cheaper_by"] == pytest.approx(3.0)
    assert params["cores_needed"] == pytest.approx(6.0)
    text = sentences([got[1]])[0]
    assert "3.0x cheaper" in text
    # Not trusted, or some num_workers keeps up: the items stay.
    misfit = dict(p, trust=prediction_check.PREDICT_MISFIT)
    assert advice.evidence_next_steps(_input_bound(misfit), items) == items
    keeps = dict(p, keeps_up_with=4)
    assert advice.evidence_next_steps(_input_bound(keeps), items) == items
    assert advice.evidence_next_steps(_input_bound(None), items) == items
    # Only where it replaces a "vary num_workers" item.
    assert advice.evidence_next_steps(_input_bound(p), items[:1]) == items[:1]


def test_no_num_workers_keeps_up_yet_more_workers_shorten_the_wait():
    # One worker of 60 ms CPU a batch on 2 cores against a 10 ms step: no
    # num_workers keeps up, but a second worker takes the second core.
    p = predict.predict(_summary(make=0.060, cpu=0.060, compute=0.010, n=1, wait=0.050))
    rows = {r["num_workers"]: r["wait_s"] for r in p["by_workers"]}
    assert p["keeps_up_with"] is None and rows[2] < 0.85 * rows[1]
    # The fewest workers within 15% of the least predicted wait.
    least = min(w for k, w in rows.items() if k > 1)
    first = min(k for k, w in rows.items() if k > 1 and w <= 1.15 * least)
    (f,) = prediction_check.advise(_input_bound(p))
    # The worker waited for no core: the second core was idle, so the
    # shorter wait takes no core from another thread.
    assert f.numbers["shorter"] == {"num_workers": first, "wait_s": rows[first],
                                    "now_s": rows[1], "from_others": False,
                                    "other_runnable": p["other_runnable"]}
    text = sentences([(f.code, f.numbers)])[0]
    assert text.startswith(f"Next: num_workers={first} shortens the wait")
    assert "not more workers" not in text
    # Where no row with more workers is 15% under this run's: "not more".
    flat = dict(p, by_workers=[dict(r, wait_s=rows[1] * 0.9) if r["num_workers"] > 1 else r
                               for r in p["by_workers"]])
    (f2,) = prediction_check.advise(_input_bound(flat))
    assert f2.numbers["shorter"] is None
    assert sentences([(f2.code, f2.numbers)])[0].startswith("Next: not more workers")


def _input_bound(prediction):
    """A summary whose next steps the evidence families may change: input-
    bound over enough steady steps, with ``prediction``."""
    return {"prediction": prediction, "diagnosis": input_bound.INPUT_BOUND,
            "steady_steps": input_bound.MIN_STEADY_STEPS}


def test_keeping_up_with_a_large_hand_over_says_what_stays():
    # 64 small tensors a batch: the worker makes one in 1 ms but each takes
    # 18 ms to hand over against 2 ms of compute.  One worker keeps up; the
    # wait left is the hand-over, 90% of the loop's 20 ms a batch, at any
    # num_workers (the model's wait is max(h, T_k / k - s)).
    p = predict.predict(_summary(make=0.001, cpu=0.001, handover=0.018, compute=0.002,
                                 wait=0.018))
    assert p["keeps_up_with"] == 1
    assert all(row["wait_s"] == pytest.approx(0.018) for row in p["by_workers"]
               if row["num_workers"] >= 1)
    text = "\n".join(prediction_check.prediction_lines({"prediction": p}))
    assert "num_workers=1, as now, keeps up" in text
    assert "the hand-over, 18 ms a step (90% of it), stays whatever num_workers is" in text
    # A small hand-over (under 5% of the loop's time a batch) says nothing more.
    quiet = predict.predict(_summary(make=0.001, cpu=0.001, handover=0.0002, compute=0.010,
                                     wait=0.0002))
    text = "\n".join(prediction_check.prediction_lines({"prediction": quiet}))
    assert "keeps up" in text and "hand-over, " not in text


def test_keeping_up_off_cpu_says_it_holds_only_if_the_waits_run_in_parallel():
    # 33 ms a batch, 1.4 ms of it CPU (a lock or a read: 96% off CPU), 2
    # workers, 8 ms a step: the model has 5 workers keep up, which holds
    # only where the waits overlap; the line says so and names the sweep.
    s = _summary(make=0.033, cpu=0.0014, compute=0.008, n=2, busy=1.0, wait=0.0086)
    p = predict.predict(s)
    assert p["trust"] == prediction_check.PREDICT_TRUSTED and p["keeps_up_with"] > 2
    text = "\n".join(prediction_check.prediction_lines({**s, "prediction": p}))
    assert "runs in parallel: a lock they share or one disk would serialize it" in text
    assert f"num_workers=(2, {p['keeps_up_with']})" in text
    # Mostly on CPU: no such clause.
    s = _summary(make=0.033, cpu=0.030, compute=0.008, n=2, busy=1.0, wait=0.0086)
    p = predict.predict(s)
    text = "\n".join(prediction_check.prediction_lines({**s, "prediction": p}))
    assert "serialize" not in text


def test_how_much_cheaper_is_a_share_under_one_and_a_half_times():
    # "1.0x cheaper" read as no change: under 1.5x the saving is a share.
    assert prediction_check._cheaper(2.34) == "2.3x cheaper"
    assert prediction_check._cheaper(1.06) == "6% cheaper"
    # compare's line says it the same way: one fact, one wording (38D).
    line = prediction_check.cores_needed_line([("a", {
        "usable_cpus": 2, "trust": prediction_check.PREDICT_TRUSTED, "keeps_up_with": None,
        "cheaper_by": 1.0 / 0.7, "worker_cores_needed": 2.9, "cpu_s": 0.1})])
    assert "until a batch gets 30% cheaper" in line and "costly" not in line


def test_the_pace_leaves_out_the_computes_wait_for_a_core():
    # Collate burns 40 ms of CPU a batch on 2 workers; the loop computes
    # 5 ms of CPU, stretched to 12 ms by the workers holding the cores:
    # on a CPU 5 ms, waiting for a core 7 ms (the body split).  Quiet, the
    # loop takes a batch per 5 ms and keeps a core busy doing it, so the
    # workers have 1 core: 40 / 5 = 8 cores, and a batch must get 8x
    # cheaper (not 40 / (2 x 12) = 1.7x off the stretched step).
    s = _summary(make=0.045, cpu=0.040, runq=0.005, compute=0.012, n=2, wait=0.03)
    s["wait_parts"] = {"compute": {"steps": 40, "compute_s": 0.48, "runq_known": True,
                                   "parts_s": {"main_cpu": 0.20, "cpu_wait": 0.28,
                                               "off_cpu": 0.0}}}
    quiet, main = predict.quiet_compute(0.012, s["wait_parts"]["compute"])
    assert quiet == pytest.approx(0.012 * (1 - 0.28 / 0.48))
    assert main == pytest.approx(1.0)
    p = predict.predict(s)
    assert p["keeps_up_with"] is None
    assert p["worker_cores_needed"] == pytest.approx(0.040 / quiet)
    assert p["cheaper_by"] == pytest.approx(0.040 / (1.0 * quiet))
    # The least step: both cores busy with a batch's 40 ms of CPU and the
    # step's 5 (the loop's core is the workers' while it waits), 22.5 ms,
    # of which the quiet compute is 5: 17.5 ms of wait at any num_workers.
    assert p["wait_floor_s"] == pytest.approx((0.040 + quiet) / 2 - quiet)
    assert p["step_floor_s"] == pytest.approx((0.040 + quiet) / 2)
    # No row with workers makes a step under it with the compute as
    # measured (12 ms), though the fair-share model alone goes under at 16
    # workers, where the workers would take the loop's core.
    fair = predict.wait_with(16, p["cpu_s"], p["off_cpu_s"], p["compute_s"], p["handover_s"],
                             2, p["other_runnable"])
    assert fair + 0.012 < p["step_floor_s"]
    for row in p["by_workers"]:
        if row["num_workers"]:
            assert row["wait_s"] + 0.012 >= p["step_floor_s"] - 1e-12, row
    assert predict.wait_for(p, 16) == pytest.approx(p["step_floor_s"] - 0.012)
    trusted = {**p, "trust": prediction_check.PREDICT_TRUSTED}
    (line,) = [t for t in prediction_check.prediction_lines({"prediction": trusted})
               if "no num_workers keeps up" in t]
    assert (f"expect a step of at least {fmt_s(p['step_floor_s'])} at any num_workers"
            in line), line
    # A sleeping step (off CPU) keeps no core: the workers have both.
    s["wait_parts"]["compute"]["parts_s"] = {"main_cpu": 0.0, "cpu_wait": 0.28,
                                             "off_cpu": 0.20}
    p = predict.predict(s)
    assert p["main_cores"] == 0.0
    assert p["cheaper_by"] == pytest.approx(0.040 / (2 * quiet))


def test_no_num_workers_keeps_up_off_cpu_says_the_off_cpu_wait_not_cheaper():
    # 8 workers sleeping 100 ms a batch (1.5 ms of it CPU) against a 2 ms
    # step on 2 cores (helper 29A): the batches' CPU fits the cores, yet
    # no num_workers the model tries keeps up.  It read "must get -145%
    # cheaper ... or run on 1 cores"; the off-CPU wait is what limits.
    s = _summary(make=0.100, cpu=0.0015, compute=0.002, n=8, busy=1.0, wait=0.010)
    p = predict.predict(s)
    assert p["keeps_up_with"] is None and p["cheaper_by"] < 1.0
    text = "\n".join(prediction_check.prediction_lines({**s, "prediction": p}))
    assert "cheaper" not in text and "run on 1 cores" not in text
    per_step = p["quiet_compute_s"] + p["handover_s"]
    want = -(-p["off_cpu_s"] // per_step)
    assert f"about {int(want)} workers waiting at once" in text
    assert f"each batch waits {fmt_s(p['off_cpu_s'])} off CPU in its worker" in text
    p = dict(p, trust=prediction_check.PREDICT_TRUSTED)
    (f,) = prediction_check.advise(_input_bound(p))
    said = sentences([(f.code, f.numbers)])[0]
    assert "cheaper" not in said and "waiting at once" in said


def test_more_workers_are_not_said_beside_a_full_host():
    # The stalls' readings: the loop and its workers queued for a core half
    # the stall time, other programs ran a core's worth (helper 29B: "run
    # beside fewer processes" and "num_workers=16 shortens the wait" as
    # two "also" lines of one report).
    from traceml.findings import host_contention

    p = predict.predict(_summary(make=0.060, cpu=0.060, compute=0.010, n=1, wait=0.050))
    s = {**_input_bound(p), "loader": {"num_workers": 2}, "host": {"usable_cpus": 2},
         "workers": {"intervals": {"slow": {
             "wall_s": 1.0, "count": 10, "main_runq_wait_s": 0.2, "runq_wait_s": 0.6,
             "main_cpu_s": 0.1, "worker_cpu_s": 0.9, "others_cpu_s": 1.0}}}}
    (host,) = host_contention.advise(s)
    said = sentences([(host.code, host.numbers)])[0]
    # 2 workers on 2 CPUs: "stop what else is running", not fewer workers.
    assert "stop what else is running)" in said and "fewer workers" not in said
    (f,) = prediction_check.advise(s)
    assert f.numbers["shorter"] is None
    assert sentences([(f.code, f.numbers)])[0].startswith("Next: not more workers")
    # Without the full host the model's shorter wait is said.
    (f,) = prediction_check.advise(_input_bound(p))
    assert f.numbers["shorter"] is not None


def test_the_no_workers_row_keeps_the_samplers_time():
    # A sampler sleeping 16 ms a batch in the main process (its calls
    # timed: wait_parts' sampler part), 2 workers: at num_workers=0 the
    # fetch runs the sampler besides making the batch (helper 29C: the row
    # read 453 us to 1.28 ms against 17.2 ms measured at 0 workers).
    s = _summary(make=0.0004, cpu=0.0004, compute=0.010, n=2, wait=0.016)
    plain = predict.predict(s)
    s["wait_parts"] = {"all": {"fetches": 40, "wait_s": 0.66,
                               "parts_s": {"sampler": 0.64, "main_cpu": 0.02}}}
    p = predict.predict(s)
    at0 = next(r for r in p["by_workers"] if r["num_workers"] == 0)
    was = next(r for r in plain["by_workers"] if r["num_workers"] == 0)
    assert at0["wait_s"] == pytest.approx(was["wait_s"] + 0.016)
    # The other rows are the model's as before.
    assert [r["wait_s"] for r in p["by_workers"] if r["num_workers"]] == pytest.approx(
        [r["wait_s"] for r in plain["by_workers"] if r["num_workers"]])
