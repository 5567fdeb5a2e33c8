"""The sweep family's pooled cadence test, against an enumeration of every
placement of every row's stalls."""

import itertools
import math

import numpy as np
import pytest

from traceml.findings import stall_timing, sweeps


_ANY_PHASE = ("any_phase_phase", "any_phase_p_value", "any_phase_fits")


def _test(stalls, n_steps, period, any_phase=False):
    """The row's predicted test; without ``any_phase``, its phase-0 part
    alone (the exact pool's input)."""
    position = np.arange(n_steps)
    t = stall_timing.predicted_cadence(np.isin(position, stalls), position, period,
                                       position >= period)
    return t if any_phase else {k: v for k, v in t.items() if k not in _ANY_PHASE}


def _p(positions, n_steps, period):
    return _test(list(positions), n_steps, period)["p_value"]


def test_the_pooled_p_value_is_the_enumerated_chance():
    rows = [([4, 8, 13], 16, 4), ([2, 4, 6, 9], 12, 2)]
    tests = [_test(*r) for r in rows]
    observed = math.prod(t["p_value"] for t in tests)
    placements = [list(itertools.combinations(range(period, n), len(stalls)))
                  for stalls, n, period in rows]
    pa = np.array([_p(a, 16, 4) for a in placements[0]])
    pb = np.array([_p(b, 12, 2) for b in placements[1]])
    product = pa[:, None] * pb[None, :]
    want = np.count_nonzero(product <= observed * (1 + 1e-9)) / product.size
    assert sweeps.pooled_p_value(tests) == pytest.approx(want)


def test_the_seed_sweep_concludes_both_ways():
    """4, 2, 1, 0 workers and back at 16 steps: the 4- and 2-worker rows
    carry the evidence, the 1- and 0-worker rows (a stall on every fetch)
    fit period 1."""
    seed4, seed2 = _test([0, 4, 8, 12], 16, 4), _test(list(range(0, 16, 2)), 16, 2)
    rows = [(4, "PERIODIC", 4, seed4), (2, "PERIODIC", 2, seed2),
            (1, "EVERY-FETCH", None, None), (1, "EVERY-FETCH", None, None)]
    c = sweeps.pooled_cadence(rows + rows[::-1])
    assert c["follows"] is True and c["tested"] == 4 and c["fitting"] == 8
    # 4 and 2 settled, and period 1 at 0 and 1 workers beside them.
    assert c["distinct_workers"] == 3 and c["other_period"] == 0
    assert c["every_fetch_rows"] == 4
    assert c["p_value"] == pytest.approx(sweeps.pooled_p_value([seed4, seed2] * 2))
    # One direction alone concludes too.
    assert sweeps.pooled_cadence(rows)["follows"] is True


def test_a_period_set_by_the_data_does_not_follow():
    # Every 4th sample slow at 4, 2 and 1 workers: period 4 everywhere.
    every4 = [(4, "PERIODIC", 4, _test([4, 8, 12], 16, 4)),
              (2, "PERIODIC", 4, _test([4, 8, 12], 16, 2)),
              (1, "PERIODIC", 4, None)]
    c = sweeps.pooled_cadence(every4)
    assert c["follows"] is None and c["other_period"] == 2


def test_evidence_at_one_num_workers_and_every_fetch_rows_is_not_following():
    # Stalls on worker 0's residue at 2 workers (random slow samples land
    # there half the time) and every fetch at 1 and 0 workers (any
    # input-bound loader): the period is never seen to change with
    # num_workers, whatever the pooled p.
    on_residue = _test([2, 6, 8, 12], 16, 2)
    rows = [(2, "UNSETTLED", None, on_residue), (1, "EVERY-FETCH", None, None),
            (1, "EVERY-FETCH", None, None), (2, "UNSETTLED", None, on_residue)]
    c = sweeps.pooled_cadence(rows)
    assert c["distinct_workers"] == 1 and c["fitting"] == 4
    assert c["follows"] is None


def test_one_num_workers_alone_is_not_a_sweep():
    t = _test([0, 4, 8, 12], 16, 4)
    c = sweeps.pooled_cadence([(4, "PERIODIC", 4, t)] * 3)
    assert c["p_value"] < stall_timing.PERIOD_ALPHA and c["follows"] is None


def _cond(name, workers, mean_s, share):
    return {"name": name, "workers": workers, "mean_s": mean_s, "input_share": share}


def test_more_workers_is_said_only_where_num_workers_varied():
    varied = [_cond("num_workers=2", 2, 0.050, 0.5), _cond("num_workers=4", 4, 0.020, 0.4)]
    codes = [c for c, _ in sweeps.sweep_next(varied, None)]
    assert codes == [sweeps.SWEEP_KEEP_BEST, sweeps.SWEEP_MORE_WORKERS]
    # in_order varied at a fixed num_workers=4: nothing about more workers.
    fixed = [_cond("num_workers=4 in_order=True", 4, 0.050, 0.5),
             _cond("num_workers=4 in_order=False", 4, 0.020, 0.4)]
    items = sweeps.sweep_next(fixed, None)
    assert [c for c, _ in items] == [sweeps.SWEEP_KEEP_BEST, sweeps.SWEEP_STILL_INPUT]
    text = sweeps.sweep_next_lines(items)[-1]
    assert "more cores" not in text and "num_workers did not vary" in text


def test_the_footers_speak_only_of_what_varied():
    # prefetch_factor swept at num_workers=2: no row is "left out of the
    # correlation", as there is none; where num_workers varied, they are.
    left = [{"condition": {"num_workers": 2, "prefetch_factor": 1}, "pass_": 0,
             "direction": "forward", "reason": "few_stalls", "stalls": 1}]
    assert sweeps.sweep_left_out({"workers_varied": False, "left_out": left}) is None
    said = sweeps.sweep_left_out({"workers_varied": True, "left_out": left})
    assert said.startswith("left out of the correlation: num_workers=2 prefetch_factor=1")
    # ... nor a line on num_workers against the period (helper 36B), unless
    # make_loader ignored the num_workers asked for.
    fixed = {"workers_varied": False, "left_out": left, "points": 0, "gaps": 0, "rows": []}
    assert sweeps.sweep_correlation(fixed, False) is None
    assert "make_loader ignored num_workers" in sweeps.sweep_correlation(fixed, True)


def test_the_prediction_footer_counts_the_runs_it_was_checked_on():
    from traceml.findings import prediction_check

    rows = [{"condition": {"num_workers": k}, "predicted_error": e}
            for k, e in ((4, None), (2, 0.22), (1, -0.08))]
    one = prediction_check.sweep_prediction({"basis": 0, "rows": [0, 1]}, rows)
    assert one.endswith("; off by 22% on the other run.")
    two = prediction_check.sweep_prediction({"basis": 0, "rows": [0, 1, 2]}, rows)
    assert two.endswith("; off by 8% to 22% on the other 2 runs.")


def test_the_pooled_line_speaks_of_0_and_1_workers_only_where_tried():
    pooled = {"follows": True, "fitting": 4, "distinct_workers": 1, "p_value": 1e-4,
              "tested": 4, "every_fetch_rows": 0}
    c = {"rows": [[4, 4], [4, 4]], "points": 2, "gaps": 12, "workers_varied": True,
         "follows": True, "distinct_workers": 1, "pooled": pooled, "r": None}
    assert "0 or 1" not in sweeps.sweep_correlation(c, False)
    pooled.update(fitting=6, distinct_workers=2, every_fetch_rows=2)
    line = sweeps.sweep_correlation(c, False)
    assert "in 6 rows, 2 of them at 0 or 1 workers stalling on every fetch (period 1), at 2 " \
        "distinct max(1, num_workers)" in line
    assert "p = 0.0001 pooled over the 4 rows with 2 or more workers" in line


def test_three_workers_and_every_fetch_at_0_and_1_conclude():
    # Helper 29A's sweep (3, 1, 0) of a lock-step loader, 16 steps each:
    # period 3 settled at 3 workers, every fetch at 1 and 0.  A data set
    # slow every 3rd sample would stall every 3rd fetch at 1 worker too:
    # every fetch there is the cadence changing with num_workers.
    seed3 = _test([0, 3, 6, 9, 12], 16, 3)
    assert seed3["periodic"]
    rows = [(3, "PERIODIC", 3, seed3), (1, "EVERY-FETCH", None, None),
            (1, "EVERY-FETCH", None, None)]
    c = sweeps.pooled_cadence(rows + rows[::-1])
    assert c["follows"] is True and c["distinct_workers"] == 2
    assert c["p_value"] == pytest.approx(sweeps.pooled_p_value([seed3, seed3]))
    # Without the 0- and 1-worker rows: one num_workers, no conclusion.
    assert sweeps.pooled_cadence([rows[0], rows[0]])["follows"] is None


def test_one_row_settled_by_chance_beside_rows_without_a_period_is_not_following():
    # The random control of the seed sweep (bench_truth): 3 of 16 batches
    # slow at random at 4 workers, 7 at 2, every batch slow at 1 and 0.
    # One 2-worker row may settle period 2 by chance; with the 4-worker
    # rows keeping no period of 4, the every-fetch rows are no second
    # value (4 of 12 such sweeps read "follows" before).
    lucky = _test([2, 4, 6, 8, 10, 12, 14], 16, 2)
    assert lucky["periodic"]
    off = _test([5, 7, 14], 16, 4)
    assert not (off["periodic"] or off["consistent"])
    rows = [(4, "IRREGULAR", None, off), (2, "PERIODIC", 2, lucky),
            (1, "EVERY-FETCH", None, None), (1, "EVERY-FETCH", None, None)]
    c = sweeps.pooled_cadence(rows)
    assert c["distinct_workers"] == 1 and c["follows"] is None


def test_following_rows_that_name_one_worker_say_it_may_be_that_worker():
    # 4, 3 and 2 workers, period == num_workers in each, but every row's
    # stalls held by worker 1: its turn comes every num_workers fetches as
    # lock-step's does, so the line says so beside "follows".
    pooled = {"follows": True, "fitting": 3, "distinct_workers": 3, "p_value": 1e-6,
              "tested": 3}
    c = {"rows": [[4, 4], [3, 3], [2, 2]], "points": 3, "gaps": 20, "workers_varied": True,
         "follows": True, "distinct_workers": 3, "pooled": pooled, "r": 1.0, "slope": 1.0,
         "intercept": 0.0, "one_worker_rows": 3, "rows_with_workers": 3}
    line = sweeps.sweep_correlation(c, False)
    assert line.startswith("num_workers vs stall period: the period follows num_workers")
    assert line.endswith("; but 3 of the 3 rows with 2 or more workers read ONE-WORKER: one "
                         "slow worker's turn also comes every num_workers fetches, so this "
                         "does not tell lock-step from that worker (its rows' attribution "
                         "lines name it)")
    c["one_worker_rows"] = 0
    assert "ONE-WORKER" not in sweeps.sweep_correlation(c, False)


def test_too_few_rows_that_name_one_worker_say_so():
    # (4, 2, 1) with worker 1 slow (helper 30A): both rows with workers
    # keep period == num_workers and read ONE-WORKER; 2 distinct values
    # are too few, and the line also says whose turn the stalls are.
    pooled = {"follows": None, "fitting": 2, "distinct_workers": 2, "p_value": 1e-4,
              "tested": 2}
    c = {"rows": [[4, 4], [2, 2]], "points": 2, "gaps": 12, "workers_varied": True,
         "follows": None, "distinct_workers": 2, "pooled": pooled, "r": None, "slope": None,
         "intercept": None, "one_worker_rows": 2, "rows_with_workers": 2}
    line = sweeps.sweep_correlation(c, False)
    assert "too few to tell" in line
    assert line.endswith("; 2 of the 2 rows with 2 or more workers read ONE-WORKER: one slow "
                         "worker's turn comes every num_workers fetches, which a cadence of "
                         "lock-step would too (their attribution lines name the worker)"), line


def _c(name, workers, mean_s, share=0.1, step_s=0.011, batch_size=None):
    return {"name": name, "workers": workers, "mean_s": mean_s, "input_share": share,
            "step_s": step_s, "batch_size": batch_size}


def test_two_passes_do_not_ask_for_a_second_pass():
    # num_workers 1 leads 0 by 500 us, past compare's tolerance (300 us)
    # and within a 600 us order effect: one pass asks for a second; two
    # passes keep the fewest workers.
    conds = [_c("num_workers=0", 0, 0.0035), _c("num_workers=1", 1, 0.003)]
    (code, _), = sweeps.sweep_next(conds, 0.0006, passes=1)
    assert code == sweeps.SWEEP_UNDECIDED
    (code, p), = sweeps.sweep_next(conds, 0.0006, passes=2)
    assert code == sweeps.SWEEP_KEEP_FEWEST and p["keep"] == "num_workers=0"
    assert "within the order effect (600 µs)" in sweeps.WORDS[code](p)


def test_a_lead_under_the_steps_tolerance_is_no_difference():
    # prefetch_factor 2 at 910 us, 4 at 1.1 ms on an 11 ms step: 192 us is
    # under 2% of the step (222 us): no real difference, the fewest kept.
    conds = [_c("prefetch_factor=2", 2, 0.000910), _c("prefetch_factor=4", 2, 0.001102)]
    (code, p), = sweeps.sweep_next(conds, None)
    assert code == sweeps.SWEEP_KEEP_FEWEST


def test_batch_sizes_are_weighed_per_sample():
    # 4 samples for 1 ms a step against 16 for 2 ms: per sample 250 against
    # 125 us, the larger batch leads.
    conds = [_c("batch_size=4", 2, 0.001, step_s=0.004, batch_size=4),
             _c("batch_size=16", 2, 0.002, step_s=0.016, batch_size=16)]
    (code, p), *_ = sweeps.sweep_next(conds, None)
    assert code == sweeps.SWEEP_KEEP_BEST and p["best"] == "batch_size=16"
    assert "mean fetch per sample" in sweeps.WORDS[code](p)


def test_a_sweep_with_no_stall_says_so_and_lists_nothing_left_out():
    left = [{"condition": {"num_workers": k}, "pass_": 0, "direction": "forward",
             "reason": "few_stalls", "stalls": 0} for k in (0, 1, 2)]
    c = {"rows": [], "points": 0, "gaps": 0, "workers_varied": True, "follows": None,
         "distinct_workers": 0, "left_out": left}
    assert sweeps.sweep_correlation(c, False) == (
        "num_workers vs stall period: no condition stalled; nothing to correlate")
    assert sweeps.sweep_left_out(c) is None
    left[1]["stalls"] = 2
    assert "too few to tell" in sweeps.sweep_correlation(c, False)
    assert sweeps.sweep_left_out(c).startswith("left out of the correlation")


def test_alike_conditions_at_the_same_workers_recommend_no_change():
    # in_order True and False at 4 workers, 910 us against 1.1 ms on an
    # 11 ms step: within the step's tolerance, so nothing tells the user
    # to switch to the faster-looking one.
    conds = [_c("num_workers=4 in_order=True", 4, 0.001102),
             _c("num_workers=4 in_order=False", 4, 0.000910)]
    (code, p), = sweeps.sweep_next(conds, None)
    said = sweeps.WORDS[code](p)
    assert code == sweeps.SWEEP_KEEP_FEWEST and not p["fewer_workers"]
    assert said.startswith("Next: nothing to change: num_workers=4 "
                           "in_order=False (910 µs, the lowest mean fetch) and num_workers=4 "
                           "in_order=True are within"), said
    assert said.endswith("keep whichever you run now."), said
    # Fewer workers alike: keep the fewer (they cost memory and cores).
    conds = [_c("num_workers=2", 2, 0.001102), _c("num_workers=4", 4, 0.000910)]
    (code, p), = sweeps.sweep_next(conds, None)
    assert p["keep"] == "num_workers=2" and "more workers did not shorten" in (
        sweeps.WORDS[code](p))


def test_a_kept_condition_whose_runs_read_host_bound_says_so():
    conds = [{**_c("num_workers=2", 2, 0.05, share=0.83), "diagnosis": "HOST-BOUND"},
             {**_c("num_workers=3", 3, 0.08, share=0.9), "diagnosis": "HOST-BOUND"}]
    items = sweeps.sweep_next(conds, None)
    assert [c for c, _ in items] == [sweeps.SWEEP_KEEP_BEST, sweeps.SWEEP_STILL_INPUT]
    said = sweeps.sweep_next_lines(items)[-1]
    assert "(INPUT-BOUND)" not in said and "read HOST-BOUND" in said, said
    assert "beside fewer processes" in said
    conds[0]["diagnosis"] = "INPUT-BOUND"
    said = sweeps.sweep_next_lines(sweeps.sweep_next(conds, None))[-1]
    assert "83% of step time (INPUT-BOUND)" in said


def test_a_kept_condition_waiting_on_its_sampler_names_the_sampler():
    # A Sampler burning 4 ms an index, swept over num_workers 0-3 (helper
    # 35B): "make each batch cheaper ... or give the workers more cores"
    # with the workers idle and the sampler most of every run's wait.
    conds = [{**_c(f"num_workers={k}", k, 0.0104, share=0.5), "diagnosis": "INPUT-BOUND",
              "largest_part": "sampler"} for k in (0, 1, 2, 3)]
    said = sweeps.sweep_next_lines(sweeps.sweep_next(conds, None))[-1]
    assert "its runs' largest measured part of it is the main process in the sampler's " \
           "next()" in said
    assert "more cores" not in said and "make each batch cheaper" not in said
    # The workers making batches lead: the words as before.
    for c in conds:
        c["largest_part"] = "worker_making"
    said = sweeps.sweep_next_lines(sweeps.sweep_next(conds, None))[-1]
    assert "make each batch cheaper" in said


def test_a_kept_condition_whose_runs_read_hand_over_asks_for_no_more_workers():
    # The most workers tried lead, and their runs read HAND-OVER: the wait
    # is for batches already made, which more workers do not shorten.
    conds = [{**_c("num_workers=2", 2, 0.08, share=0.4), "diagnosis": "INPUT-BOUND"},
             {**_c("num_workers=4", 4, 0.02, share=0.25), "diagnosis": "HAND-OVER"}]
    items = sweeps.sweep_next(conds, None)
    assert sweeps.SWEEP_MORE_WORKERS not in [c for c, _ in items]
    said = sweeps.sweep_next_lines(items)[-1]
    assert "read HAND-OVER" in said and "try more" not in said, said
    conds[1]["diagnosis"] = "INPUT-BOUND"
    assert sweeps.SWEEP_MORE_WORKERS in [c for c, _ in sweeps.sweep_next(conds, None)]


def test_every_fetch_at_0_and_1_workers_is_not_the_same_period_as_2():
    # CPU-bound workers on 2 cores (helper 28A's reversed sweep): every
    # fetch stalls at 0 and 1 workers, period 2 at 2 and at 4 workers.  The
    # period is 1, 1, 2, 2: not "the same at every num_workers: set by the
    # data"; the 4-worker row misses max(1, num_workers).
    from traceml.sweeping import SweepResult, _row

    def row(k, stalls, period, temporal):
        return dict(_row({"num_workers": k}, 0, "forward", None, None), stalls=stalls,
                    period=period, temporal=temporal, mean_s=0.1, diagnosis="INPUT-BOUND")

    rows = [row(0, 15, None, "EVERY-FETCH"), row(1, 15, None, "EVERY-FETCH"),
            row(2, 7, 2, "PERIODIC"), row(4, 5, 2, "PERIODIC")]
    res = SweepResult(rows, [None] * 4, False)
    c = res.correlation
    assert c["rows"] == [[2, 2], [4, 2]] and c["mismatched"] == 1
    assert c["follows"] is False and c["same_period"] is False
    text = str(res)
    assert "set by the data" not in text
    assert "period != max(1, num_workers) in 1 of 2 rows" in text
    # Without the every-fetch rows the one period at 2 and 4 workers is
    # the same everywhere the sweep saw a period.
    c = SweepResult(rows[2:], [None] * 2, False).correlation
    assert c["same_period"] is True and c["follows"] is False


def test_a_pooled_p_under_the_smallest_double_is_never_said_as_zero():
    pooled = {"follows": True, "fitting": 6, "distinct_workers": 2, "p_value": 0.0,
              "tested": 2, "every_fetch_rows": 4}
    c = {"rows": [[3, 3], [3, 3]], "points": 2, "gaps": 8, "workers_varied": True,
         "follows": True, "distinct_workers": 1, "pooled": pooled, "r": None}
    line = sweeps.sweep_correlation(c, False)
    assert "p < 1e-300 pooled" in line and "p = 0 " not in line


def _in_order_row(in_order, period, overtaking, workers=4, error=None):
    return {"condition": {"num_workers": workers, "in_order": in_order}, "error": error,
            "period": period, "overtaking": overtaking, "loader_num_workers": workers}


def test_an_in_order_sweep_concludes_only_on_rows_that_say_something():
    # No row stalled (helper 33B, 3 of 3: "single slow batches held the
    # line" above rows of 0 stalls).
    rows = [{**_in_order_row(True, None, 0, 3), "stalls": 0},
            {**_in_order_row(False, None, 6, 3), "stalls": 0}]
    line = sweeps.sweep_in_order(rows)
    assert "no row stalled" in line and "held the line with" not in line
    # Rows too short to settle ("3?") are neither kept nor lost (helper
    # 33A: counted as losing the period).
    short = {**_in_order_row(False, None, 4), "temporal": "UNSETTLED", "consistent_period": 4}
    rows = [_in_order_row(True, 4, 0), _in_order_row(False, 4, 3), short, short]
    line = sweeps.sweep_in_order(rows)
    assert "in 1 of the 1 in_order=False row that settled (2 too short to say)" in line, line
    assert "the cadence survives" in line
    # The in_order=True rows without the period either: nothing to compare.
    rows = [_in_order_row(True, None, 0), _in_order_row(True, None, 0),
            _in_order_row(False, None, 5)]
    line = sweeps.sweep_in_order(rows)
    assert "no cadence to compare" in line and "held the line with" not in line


def test_an_in_order_sweep_says_the_cadence_survives_overtaking():
    # The seed's step after the num_workers sweep (helper 29D): 4 workers,
    # in_order (True, False) both ways; with in_order=False 3-9 deliveries
    # overtook yet the period stayed 4.
    rows = [_in_order_row(True, 4, 0), _in_order_row(False, 4, 3),
            _in_order_row(False, 4, 9), _in_order_row(True, 4, 0)]
    line = sweeps.sweep_in_order(rows)
    assert "12 deliveries overtook a lower rank, yet the stalls kept the period " \
        "max(1, num_workers) in 2 of the 2 in_order=False rows" in line
    assert "batches overtake but the cadence survives" in line
    # Overtakings with the period gone: single slow batches.
    rows = [_in_order_row(True, 4, 0), _in_order_row(False, None, 5)]
    assert "single slow batches held the line" in sweeps.sweep_in_order(rows)
    # None overtook: the round.
    rows = [_in_order_row(True, 4, 0), _in_order_row(False, 4, 0)]
    assert "no delivery overtook" in sweeps.sweep_in_order(rows)
    # Deliveries not measured (an iterable that is no DataLoader): no line.
    assert sweeps.sweep_in_order([_in_order_row(True, None, None),
                                  _in_order_row(False, None, None)]) is None
    # Without both values of in_order: no line.
    assert sweeps.sweep_in_order([_in_order_row(True, 4, 0)]) is None
    assert sweeps.sweep_in_order([{"condition": {"num_workers": 4}, "error": None,
                                   "period": 4, "overtaking": 0}]) is None


def test_rows_with_a_rank_test_pool_to_a_p_the_null_can_reach():
    """Two 3-worker rows of 13 fetches stalling twice a round (waits 48,
    18, 0 ms, helper 30A): each row's own p counts its rank test, far
    below any hypergeometric p of 7 stalls; the pooled p printed "< 1e-300".
    It is now twice the smaller of the exact hypergeometric pool and
    Fisher's combination of the rows' own p-values (chi-square, 2m d.f.)."""
    from scipy.stats import chi2

    position = np.arange(13)
    wait = np.where(position % 3 == 0, 48e6, np.where(position % 3 == 1, 18e6, 0.2e6))
    wait = (wait * (1 + 0.01 * position)).astype(np.int64)
    stalled = wait > 10e6
    tests = [{k: v for k, v in stall_timing.predicted_cadence(
        stalled, position, 3, np.ones(13, bool), wait).items() if k not in _ANY_PHASE}
        for _ in range(2)]
    assert all(t["rank_p_value"] < t["hypergeom_p_value"] for t in tests)
    fisher = chi2.sf(-2 * sum(math.log(t["p_value"]) for t in tests), 4)
    exact = sweeps.pooled_p_value([dict(t, rank_p_value=None, p_value=t["hypergeom_p_value"])
                                   for t in tests])
    got = sweeps.pooled_p_value(tests)
    assert got == pytest.approx(min(1.0, 2 * min(exact, fisher)))
    assert got > 0 and exact > 0


def test_workers_that_mostly_waited_are_not_told_to_get_more_cores():
    # Two workers asleep on a shared lock (helper 31A): the wait stayed at
    # every num_workers, and the workers kept 0.3 cores busy in the slow
    # intervals, under half a core each: they waited, so more cores would
    # not shorten it.
    conds = [{**_cond("num_workers=1", 1, 0.030, 0.30), "worker_cores": 0.2},
             {**_cond("num_workers=2", 2, 0.031, 0.31), "worker_cores": 0.3}]
    items = sweeps.sweep_next(conds, None)
    assert items[-1][0] == sweeps.SWEEP_STILL_INPUT, items
    said = sweeps.sweep_next_lines(items)[-1]
    assert "more cores would not shorten" in said and "give the workers more cores" not in said
    assert "kept 0.2 cores busy" in said, said
    # Workers on a CPU (a core each): more cores stay the advice.
    for c, cores in zip(conds, (0.9, 1.8)):
        c["worker_cores"] = cores
    said = sweeps.sweep_next_lines(sweeps.sweep_next(conds, None))[-1]
    assert "give the workers more cores" in said, said
    # Workers off a CPU because they queued for one (pure-CPU workers
    # beside other programs: 0.9 cores busy, 5.7 runnable, helper 33A)
    # did not wait on a lock: the cores were full.
    for c, cores in zip(conds, (0.2, 0.3)):
        c.update(worker_cores=cores, worker_runnable=5.7)
    said = sweeps.sweep_next_lines(sweeps.sweep_next(conds, None))[-1]
    assert "(a lock, a device, a read)" not in said and "more cores" in said, said


def test_a_sweep_of_another_setting_says_num_workers_did_not_vary_first():
    # batch_size swept at num_workers=2, no row stalled (helper 31A).
    c = {"workers_varied": False, "points": 0, "gaps": 0, "rows": [],
         "left_out": [{"stalls": 0, "reason": "no stalls"}, {"stalls": 0, "reason": "no stalls"}]}
    assert sweeps._none_stalled(c)
    # Nothing on num_workers at all (helper 36B): the sweep did not vary it.
    assert sweeps.sweep_correlation(c, False) is None


def test_rows_of_one_num_workers_that_show_their_period_say_so():
    # Two 5-worker rows whose stalls all sit every 5 fetches, each short of
    # settling, pooled past the line (helper 31B): the line quotes the
    # pooled test and why it cannot conclude, never "0 conditions with a
    # period" beside them.
    c = {"workers_varied": True, "points": 0, "gaps": 0, "rows": [], "distinct_workers": 0,
         "follows": None, "left_out": [{"stalls": 4, "reason": "unsettled"}] * 2,
         "pooled": {"follows": None, "p_value": 7.3e-05, "tested": 2, "fitting": 2,
                    "other_period": 0, "distinct_workers": 1}}
    said = sweeps.sweep_correlation(c, False)
    assert "pooled p = 7.3e-05, 2 rows" in said and "share one num_workers" in said, said
    c["pooled"]["p_value"] = 0.2
    said = sweeps.sweep_correlation(c, False)
    assert "0 conditions with a settled period" in said, said


def test_a_data_period_that_is_a_multiple_of_num_workers_is_not_said_to_fit():
    # Every 6th sample slow, swept at 2, 3 and 6 workers (helper 32A): the
    # stalls sit on each row's predicted positions (0 mod 2, 0 mod 3) but
    # fill a third and a half of them; only the 6-worker row keeps its
    # period.  The pooled p is tiny, and the line said "the rows that fit
    # ... share one num_workers" of 1 fitting row among 3 num_workers.
    from traceml.findings import stall_timing

    n = 24
    stalled = np.arange(n) % 6 == 0
    tested = np.ones(n, dtype=bool)
    rows = [(k, stall_timing.PERIODIC if k == 6 else stall_timing.UNSETTLED,
             6 if k == 6 else None,
             stall_timing.predicted_cadence(stalled, np.arange(n), k, tested, None))
            for k in (2, 3, 6)]
    pooled = sweeps.pooled_cadence(rows)
    assert pooled["tested"] == 3 and pooled["fitting_tested"] == 1
    assert pooled["p_value"] < stall_timing.PERIOD_ALPHA and not pooled["follows"]
    c = {"rows": [[6, 6]], "points": 1, "gaps": 3, "workers_varied": True, "follows": None,
         "distinct_workers": 1, "pooled": pooled, "r": None}
    line = sweeps.sweep_correlation(c, False)
    assert "share one num_workers" not in line, line
    assert "but only 1 of them stall at most of those positions" in line, line


def test_a_row_at_another_phase_fits_its_period_paying_for_the_phases():
    """4 workers on 2 cores do not start together: stalls at 5, 9 and 13
    of 16 (helper 41A) keep period 4 at phase 1.  The any-phase test is
    the hypergeometric tail at that residue times the 4 residues."""
    from scipy.stats import hypergeom

    t = _test([5, 9, 13], 16, 4, any_phase=True)
    assert not (t["periodic"] or t["consistent"])
    assert t["any_phase_phase"] == 1 and t["any_phase_fits"]
    # 12 tested fetches (4 to 15), 3 of them at phase 1, all 3 stalls there.
    assert t["any_phase_p_value"] == pytest.approx(4 * hypergeom.sf(2, 12, 3, 3))


def test_the_pool_also_reads_the_rows_any_phase_p_values():
    """Twice the smaller of the exact phase-0 pool and Fisher's
    combination of the rows' any-phase p-values (chi-square, 2m d.f.)."""
    from scipy.stats import chi2

    tests = [_test([5, 9, 13], 16, 4, any_phase=True),
             _test([3, 5, 7, 9, 11, 13, 15], 16, 2, any_phase=True)]
    exact = sweeps.pooled_p_value([{k: v for k, v in t.items() if k not in _ANY_PHASE}
                                   for t in tests])
    fisher = chi2.sf(-2 * sum(math.log(t["any_phase_p_value"]) for t in tests), 4)
    assert sweeps.pooled_p_value(tests) == pytest.approx(min(1.0, 2 * min(exact, fisher)))
    assert fisher < exact


def test_the_reversed_seed_sweep_concludes_with_its_rows_at_another_phase():
    """The seed's sweep where the 4-worker rows stall at phase 1 and the
    2-worker rows at phase 1 (workers that did not start together): the
    rows fit their periods, so the cadence follows num_workers, 1 and 0
    workers (every fetch) counting as period 1."""
    shifted4 = _test([5, 9, 13], 16, 4, any_phase=True)
    shifted2 = _test([3, 5, 7, 9, 11, 13, 15], 16, 2, any_phase=True)
    rows = [(4, "UNSETTLED", None, shifted4), (2, "PERIODIC", 2, shifted2),
            (1, "EVERY-FETCH", None, None), (1, "EVERY-FETCH", None, None)]
    c = sweeps.pooled_cadence(rows[::-1] + rows)
    assert c["follows"] is True and c["tested"] == 4 and c["fitting_tested"] == 4
    assert c["distinct_workers"] == 3 and c["p_value"] < stall_timing.PERIOD_ALPHA
    # Phase 0 alone would not have shown it.
    bare = [(k, lab, per, None if t is None else {x: v for x, v in t.items()
                                                   if x not in _ANY_PHASE})
            for k, lab, per, t in rows]
    assert sweeps.pooled_cadence(bare[::-1] + bare)["follows"] is None


def test_random_stalls_at_any_phase_rarely_pool_to_following():
    """The null: at 4 and 2 workers, 3 and 5 stalls placed at random among
    each row's 16 fetches (past the first round), both directions; the
    pooled p falls under PERIOD_ALPHA in at most that share of 2000
    seeded sweeps (binomial slack of 3 standard errors)."""
    rng = np.random.default_rng(41)
    hits, n = 0, 2000
    for _ in range(n):
        tests = []
        for period, k in ((4, 3), (2, 5), (2, 5), (4, 3)):
            stalls = rng.choice(np.arange(period, 16), size=k, replace=False)
            tests.append(_test(stalls.tolist(), 16, period, any_phase=True))
        hits += sweeps.pooled_p_value(tests) < stall_timing.PERIOD_ALPHA
    a = stall_timing.PERIOD_ALPHA
    assert hits / n <= a + 3 * math.sqrt(a * (1 - a) / n)


def test_rows_that_only_fit_do_not_pool_into_a_cadence():
    # The random control beside no hog (bench_truth --keep-wrong): slow
    # samples hidden behind earlier stalls left 2 to 4 stalls a row, each
    # row fitting its period at its best phase without settling it (5 of
    # 14 tested fetches on one residue mod 2: p = 21/2002, just over
    # 0.01); the pool of those reached p < 0.01 and read "follows".  No row settles
    # alone: not a cadence.
    rows4 = [_test([7, 11, 15], 16, 4, any_phase=True), _test([3, 11], 16, 4, any_phase=True)]
    rows2 = [_test([2, 6, 8, 10, 14], 16, 2, any_phase=True),
             _test([3, 7, 9, 11, 13], 16, 2, any_phase=True)]
    tests = rows4 + rows2
    assert not any(sweeps._settled(t) for t in tests)
    assert sum(sweeps._fits(t) for t in tests) >= 3
    rows = [(4, "UNSETTLED", None, rows4[0]), (2, "UNSETTLED", None, rows2[0]),
            (1, "EVERY-FETCH", None, None), (1, "EVERY-FETCH", None, None),
            (1, "EVERY-FETCH", None, None), (1, "EVERY-FETCH", None, None),
            (2, "UNSETTLED", None, rows2[1]), (4, "TOO-FEW", None, rows4[1])]
    c = sweeps.pooled_cadence(rows)
    assert c["distinct_workers"] >= 2 and c["other_period"] == 0
    assert c["p_value"] < stall_timing.PERIOD_ALPHA, c
    assert c["follows"] is None
    # One of them settled alone (4 of 16 on one residue mod 4, p = 1/1820
    # at phase 0): the pool carries the rest.
    seed4 = _test([0, 4, 8, 12], 16, 4, any_phase=True)
    assert sweeps._settled(seed4)
    rows[0] = (4, "PERIODIC", 4, seed4)
    assert sweeps.pooled_cadence(rows)["follows"] is True


def test_a_row_that_fits_only_with_a_stall_off_its_chosen_residue_does_not_fit():
    """A quiet seed sweep of CPU-bound workers (helper 63): the forward
    4-worker row stalled at 6, 9 and 14 (none at 0 mod 4; 2 at 2 mod 4, 1
    off), the backward one at 8 and 11; the 2-worker rows kept period 2.
    The 4-worker rows show no cadence of their own, so "the period follows
    num_workers" would rest on 2 workers against the every-fetch rows."""
    from scipy.stats import hypergeom

    fwd4 = _test([6, 9, 14], 16, 4, any_phase=True)
    assert fwd4["on_residue"] == 0 and fwd4["any_phase_phase"] == 2
    # At a residue picked for its stalls, 2 of 3 on it is what 3 random
    # stalls show most of the time; all 3 on it, 4 placements of 220.
    assert not fwd4["any_phase_fits"]
    every = list(itertools.combinations(range(4, 16), 3))
    fit = sum(_test(list(c), 16, 4, any_phase=True)["any_phase_fits"] for c in every)
    assert fit == 4 and len(every) == 220
    assert fit / len(every) == pytest.approx(4 * hypergeom(12, 3, 3).pmf(3))
    bwd4 = _test([8, 11], 16, 4, any_phase=True)
    rows = [(4, "TOO-FEW", None, fwd4),
            (2, "UNSETTLED", None, _test([4, 8, 10, 14], 16, 2, any_phase=True)),
            (1, "EVERY-FETCH", None, None), (1, "EVERY-FETCH", None, None),
            (1, "EVERY-FETCH", None, None), (1, "EVERY-FETCH", None, None),
            (2, "PERIODIC", 2, _test([2, 6, 8, 12, 14], 16, 2, any_phase=True)),
            (4, "TOO-FEW", None, bwd4)]
    c = sweeps.pooled_cadence(rows)
    assert c["follows"] is None and c["distinct_workers"] == 1
    # The seed's own 4-worker rows (a stall at 0, 4, 8, 12) make it follow.
    seed4 = _test([0, 4, 8, 12], 16, 4, any_phase=True)
    rows[0], rows[-1] = (4, "PERIODIC", 4, seed4), (4, "PERIODIC", 4, seed4)
    assert sweeps.pooled_cadence(rows)["follows"] is True


def test_a_sweep_of_the_users_step_keeps_the_shortest_step_and_says_the_trade():
    """Helper 64: 3 ms items beside a 2-thread model on 2 cores.  num_workers=0
    waits 28% of a 44 ms step; 2 and 4 workers wait 3-5% of 47-48 ms steps.
    By fetch the 2-worker condition leads; by step (sweep's step_fn) the
    0-worker one does, and the 2 workers only moved the wait into compute."""
    conds = [{**_cond("num_workers=0", 0, 0.0125, 0.28), "step_s": 0.0442},
             {**_cond("num_workers=2", 2, 0.0015, 0.04), "step_s": 0.0470},
             {**_cond("num_workers=4", 4, 0.0021, 0.045), "step_s": 0.0477}]
    by_fetch = sweeps.sweep_next(conds, None)
    assert by_fetch[0][1]["best"] == "num_workers=2"
    items = sweeps.sweep_next(conds, None, by_step=True)
    codes = [c for c, _ in items]
    assert codes == [sweeps.SWEEP_KEEP_FEWEST, sweeps.SWEEP_TRADE]
    keep = items[0][1]
    # 47.0 ms is within 10% of 44.2 ms (4.42 ms): no real difference, and
    # the fewest workers are kept.
    assert keep["keep"] == "num_workers=0" and keep["measure"] == "step"
    assert keep["within_s"] == pytest.approx(0.1 * 0.0442)
    trade = items[1][1]
    assert trade["other"] == "num_workers=2" and trade["other_step_s"] == 0.0470
    lines = sweeps.sweep_next_lines(items)
    assert "it is the lowest mean step" in lines[0]
    assert "more workers did not shorten the step" in lines[0]
    assert lines[1].startswith("num_workers=2 waits for input only 4% of its step against 28%")
    assert "47 ms against 44.2 ms" in lines[1]
    # Conditions past the step tolerance: the lowest step is kept by its lead.
    conds[1]["step_s"] = conds[2]["step_s"] = 0.060
    items = sweeps.sweep_next(conds, None, by_step=True)
    assert items[0][0] == sweeps.SWEEP_KEEP_BEST
    assert items[0][1]["best"] == "num_workers=0"
    assert "its mean step, 44.2 ms, is 15.8 ms under" in sweeps.sweep_next_lines(items)[0]


def test_the_sweep_says_what_stood_in_for_the_step():
    rows = [{"error": None, "condition": {"num_workers": k}, "loader_num_workers": k}
            for k in (0, 2)]
    slept = sweeps.sweep_consumer({"pace_s": 0.01}, rows)
    assert slept.startswith("consumer: a 10 ms sleep a batch stood in for the model's step")
    assert "step_fn=your_step" in slept
    # Without workers nothing can take the model's cores.
    assert sweeps.sweep_consumer({"pace_s": 0.01}, rows[:1]) is None
    ran = sweeps.sweep_consumer({"step_fn": "train_step"}, rows)
    assert ran.startswith("consumer: `train_step` ran on each batch")
    assert sweeps.sweep_consumer(None, rows) is None
