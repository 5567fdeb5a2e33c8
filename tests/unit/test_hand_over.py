"""hand_over: bytes advice only where bytes cross processes."""

import pytest

from traceml.findings import hand_over, input_bound

BIG = 2 * hand_over.HANDOVER_MIN_BYTES


def test_no_hand_over_without_worker_processes():
    # num_workers=0: ImageFolder-style float32 batches past the line, made in
    # the main process: nothing is handed over, so no bytes advice.
    assert hand_over.handover(BIG, input_bound.INPUT_BOUND, None, True, 0) is None
    assert hand_over.handover(BIG, input_bound.INPUT_BOUND, True, False, 2) == "handover_bytes"
    assert hand_over.handover(BIG, input_bound.INPUT_BOUND, False, True, 2) == "handover_main"


def test_a_trend_does_not_displace_the_measured_hand_over():
    # HAND-OVER is read from the measured parts of the wait; a trend of the
    # waits (a loaded host drifting) follows its next step, not in its place.
    from traceml.findings import advice

    trend = {"label": "RISING", "slope_ms_per_step": 0.1, "slope_ms_per_epoch": None,
             "first_tenth_median_s": 0.008, "last_tenth_median_s": 0.012}
    s = {"diagnosis": input_bound.HAND_OVER, "input_share": 0.6, "shape": "FAST",
         "concentration": {}, "temporal": None, "loader": {"num_workers": 2},
         "input_wait_s": {"median": 0.008}, "stalls": {"count": 0},
         "trend": trend, "production": {"production_share": 0.01},
         "wait_parts": {"largest": {"part": "in_transit", "share": 0.9}}}
    codes = [code for code, _ in advice._steady_steps(s, False)]
    assert codes == ["hand_over", "trend", "trend_next"]
    items, roles = advice.arrange(advice._steady_steps(s, False))
    lead = [it[0] for it, role in zip(items, roles) if role == "lead"]
    assert lead == ["hand_over"]
    # Without HAND-OVER the trend's next step is the one, as before.
    s["diagnosis"] = input_bound.INPUT_BOUND
    assert [c for c, _ in advice._steady_steps(s, False)] == ["trend", "trend_next"]


def test_main_process_work_names_the_sampler_and_the_experiment():
    # The main process on a CPU inside the fetch is the sampler, receiving
    # the batch or the iterator: a slow Sampler with 128-byte batches was
    # told "fewer or smaller tensors".  The words name the sampler first
    # and the experiment that tells the parts apart.
    p = {"share": 0.63, "production_share": 0.01, "busy_share": 0.05,
         "ready_before_fetch": 1.0, "median_s": 0.0095, "num_workers": 2,
         "largest": {"part": "main_cpu", "share": 0.65}}
    text = hand_over._hand_over_next(p)
    assert "the sampler's next()" in text and "loader.batch_sampler" in text
    assert "fewer or smaller tensors" not in text


def test_bytes_advice_only_where_the_bytes_are_measured_to_be_the_cost():
    # 9.6 MB float32 images whose __getitem__ burns 4 ms each: the samples
    # hold 90% of the workers' batch time, receiving 9% of the wait.
    parts = {"parts_s": {"worker_making": 0.74, "worker_cpu_wait": 0.05, "main_cpu": 0.09,
                         "cpu_wait": 0.12, "in_transit": 0.0}}
    args = (BIG, input_bound.INPUT_BOUND, True, False, 2)
    assert hand_over.handover(*args, 0.9, parts) is None
    # Ready tensors: collate's copy is most of the batch time.
    assert hand_over.handover(*args, 0.1, parts) == "handover_bytes"
    # Costly samples, but the batch in transit is most of the wait.
    moving = {"parts_s": {**parts["parts_s"], "in_transit": 1.5}}
    assert hand_over.handover(*args, 0.9, moving) == "handover_bytes"
    # Not measured (spawned workers time nothing): as before.
    assert hand_over.handover(*args, None, parts) == "handover_bytes"
    assert hand_over.handover(*args, 0.9, None) is None


def test_a_hand_over_that_fewer_workers_halve_names_them():
    # One small tensor a batch at num_workers=2, 10 ms compute: 1.5-2.6 ms
    # a fetch receiving it, 0.32 ms at num_workers=0, and the trusted
    # prediction said 0.18-1.36 ms there; the only advice was "fewer
    # tensors per batch" (helper 32B).  The row that halves the wait is
    # named, with the sweep that shows it.
    from traceml.findings import advice

    pred = {"trust": "trusted", "num_workers": 2,
            "this_run": {"measured_wait_s": 2.1e-3},
            "by_workers": [{"num_workers": 0, "wait_s": 0.184e-3, "main_fetch_s": 0.5e-3},
                           {"num_workers": 1, "wait_s": 2.0e-3}]}
    s = {"diagnosis": input_bound.HAND_OVER, "input_share": 0.2, "shape": "FAST",
         "concentration": {}, "temporal": None, "loader": {"num_workers": 2},
         "input_wait_s": {"median": 0.002}, "stalls": {"count": 0}, "trend": None,
         "production": {"production_share": 0.01}, "prediction": pred,
         "wait_parts": {"largest": {"part": "main_cpu", "share": 0.7}}}
    ((code, p),) = advice._steady_steps(s, False)
    assert code == "hand_over"
    assert p["fewer"] == {"num_workers": 0, "wait_s": 0.684e-3, "now_s": 2.1e-3,
                          "now_workers": 2}
    said = advice.WORDS["hand_over"](p)
    assert "num_workers=0 (no batch crosses processes there) 684 µs a step against " \
           "2.1 ms measured at 2: try traceml.sweep(make_loader, num_workers=(2, 0))" in said, said
    # A row that does not halve the wait (or an untrusted one) names none.
    pred["by_workers"][0]["main_fetch_s"] = 1.0e-3
    ((_, p),) = advice._steady_steps(s, False)
    assert "fewer" not in p and "try traceml.sweep" not in advice.WORDS["hand_over"](p)
    # BALANCED, the same wait spread over every fetch: the main process's
    # part of receiving names the same row.
    pred["by_workers"][0]["main_fetch_s"] = 0.5e-3
    s.update(diagnosis=input_bound.BALANCED, steady_steps=100,
             step_s={"median": 0.012})
    steps = dict(advice._steady_steps(s, False))
    assert steps["largest_part"]["fewer"]["num_workers"] == 0
    assert "num_workers=(2, 0)" in advice.WORDS["largest_part"](steps["largest_part"])
    # The workers' own production is not paid per batch crossing: no row.
    s["wait_parts"]["largest"] = {"part": "worker_making", "share": 0.7}
    assert "fewer" not in dict(advice._steady_steps(s, False))["largest_part"]


def test_batches_held_behind_another_workers_python_are_not_called_the_transfer():
    # Two workers, a 30 ms pure-Python sample every 13th index: most of the
    # wait was made batches not yet sent while the other worker ran
    # Python (helper 32B, 8 of 8 runs: "More workers will not shorten this
    # wait ... fewer or smaller tensors per batch" for 256-byte batches).
    import numpy as np

    from traceml import wait_split
    from traceml.findings import wait_parts

    # Three fetches of 10 ns, asleep 9 each (1 on a CPU); the awaited
    # worker made 2, 0, 0; another worker ran on a CPU over 7, 9 and 50
    # (capped at what is left) of each batch's transit.
    wait = np.full(3, 10, dtype=np.int64)
    got = wait_split.split(wait, np.ones(3, np.int64), np.zeros(3, np.int64),
                           np.array([2, 0, 0]), behind_ns=np.array([7, 9, 50]))
    assert got["parts_s"][wait_split.BEHIND_PART] == pytest.approx(25e-9)
    assert got["parts_s"]["in_transit"] == pytest.approx(0.0)
    assert sum(got["parts_s"].values()) == pytest.approx(got["wait_s"])
    largest = wait_parts.next_for(got)
    assert largest["part"] == wait_parts.BEHIND_WORKER
    # The verdict weighs the made batches' wait as one, as before the part
    # was measured out of it: the same fraction with and without it.
    whole = wait_split.split(wait, np.ones(3, np.int64), np.zeros(3, np.int64),
                             np.array([2, 0, 0]))
    assert wait_parts.other_largest_fraction(got) == pytest.approx(
        wait_parts.other_largest_fraction(whole))
    assert wait_parts.host_leads(got) == wait_parts.host_leads(whole)
    p = {"share": 0.35, "production_share": 0.03, "busy_share": 0.42,
         "ready_before_fetch": 1.0, "median_s": 0.003, "num_workers": 2,
         "largest": largest}
    text = hand_over._hand_over_next(p)
    assert "More workers will not shorten" not in text
    assert "fewer or smaller tensors" not in text
    assert "sys.setswitchinterval" in text and "slow-code" in text
    # A transit with no other worker on a CPU stays the transfer's.
    p["largest"] = {"part": "in_transit", "share": 0.6}
    assert ("More workers shorten at most the part a worker was still making (9% of the "
            "wait); the rest is the hand-over") in hand_over._hand_over_next(p)


def test_try_workers_says_what_large_batches_would_cost_to_cross():
    # 40 MB batches at num_workers=0 (helper 33B, 3 of 3): "try num_workers
    # >= 1" plainly, where 2 workers then took 61-63 ms a step against 33.
    from traceml.findings import advice

    s = {"batch_bytes": {"median": 40e6}}
    code, p = advice._more_workers(s, 0)
    said = advice.WORDS[code](p)
    low, high = (40e6 * x for x in hand_over.HANDOVER_S_PER_BYTE)
    from traceml.fmt import fmt_s
    assert f"about {fmt_s(low)} to {fmt_s(high)} a batch of copying" in said, said
    assert "pays only where making a batch costs more" in said
    code, p = advice._more_workers({"batch_bytes": {"median": 4096}}, 0)
    assert advice.WORDS[code](p).endswith("num_workers=(0, 1, 2, 4))).")


def test_hand_over_words_give_more_workers_the_part_they_can_shorten():
    # 3 workers of 20 ms sleeping samples, a 5 ms step: the awaited worker
    # was still making the batch for 8% of step time in a 23% wait, and 6
    # workers halved the wait where the words said "More workers will not
    # shorten this wait" (helper 35A, 4 of 14 runs).
    p = dict(share=0.23, production_share=0.08, busy_share=0.86, ready_before_fetch=0.82,
             median_s=0.000878, largest=None)
    said = hand_over._hand_over_next(p)
    assert "More workers shorten at most the part a worker was still making (35% of the " \
           "wait); the rest is the hand-over" in said
    assert "will not shorten" not in said
    # A making part that rounds to nothing: the hand-over is the wait.
    said = hand_over._hand_over_next({**p, "production_share": 0.0005})
    assert "More workers will not shorten this wait: it is the hand-over" in said
