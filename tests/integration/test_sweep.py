"""sweep() on real DataLoaders whose items burn a set amount of CPU."""

import multiprocessing
import re
import time
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import traceml  # noqa: E402 - after importorskip("torch")
from traceml import _core  # noqa: E402 - after importorskip("torch")
from traceml.fmt import fmt_s  # noqa: E402 - after importorskip("torch")
from traceml.findings import comparison, sweeps  # noqa: E402 - after importorskip("torch")

from burn import BurnDataset, PacedBurnDataset, StartTogether, burn_cpu  # noqa: E402 - after importorskip("torch")

warnings.filterwarnings("ignore", message=".*worker processes in total.*")


def make_loader(num_workers, **kw):
    # 4 items of 25 ms wall each (3 ms of it CPU) = one batch per 100 ms
    # per worker: far above the 10 ms consumer pace, so every condition is
    # input-bound.  The items are paced on a fixed grid and the workers
    # start together, so that they stay in lock-step on a crowded host
    # (see tests/burn.py).
    return torch.utils.data.DataLoader(
        PacedBurnDataset(4 * 48, 0.003, 0.025),
        batch_size=4, num_workers=num_workers,
        worker_init_fn=StartTogether(num_workers) if num_workers else None, **kw
    )


@pytest.mark.slow
def test_cadence_follows_num_workers():
    # 48 steps: 9-11 stalls at 4 workers, so that a few scheduling blips on
    # a crowded host do not hide the period (beside a load of 6 on 2 cores:
    # 14 of 16 conditions at 4 and 3 workers kept it, against 4 of 8 with
    # 24 steps).
    res = traceml.sweep(make_loader, num_workers=(4, 3, 2, 1), steps=48,
                        consumer_pace_s=0.01, both_directions=False, progress=False)
    assert [r["condition"]["num_workers"] for r in res.rows] == [4, 3, 2, 1]
    assert [r["error"] for r in res.rows] == [None] * 4
    # One worker: every fetch waits (EVERY-FETCH, no period): left out of the
    # correlation, which keeps 3 distinct num_workers, the least that can
    # say "follows" (sweeps.SWEEP_MIN_DISTINCT_WORKERS).
    assert [r["period"] for r in res.rows] == [4, 3, 2, None]
    assert res.rows[3]["median_gap"] == 1
    assert all(r["diagnosis"] == "INPUT-BOUND" for r in res.rows)
    c = res.correlation
    assert c["points"] == 3 and c["rows"] == [[4, 4], [3, 3], [2, 2]]
    assert [r["reason"] for r in c["left_out"]] == ["every_fetch"]
    assert c["follows"] is True and c["mismatched"] == 0
    assert c["r"] == pytest.approx(1.0) and c["slope"] == pytest.approx(1.0)
    # The rows hold the reports' own numbers.
    for row, rep in zip(res.rows, res.runs):
        assert row["p95_s"] == rep["input_wait_s"]["p95"]
        assert row["stalls"] == rep["stalls"]["count"]
    text = str(res)
    assert "num_workers=4" in text and "the period follows num_workers" in text
    assert "Pearson r" in text
    assert "<table" in res._repr_html_()
    assert res.to_dict()["correlation"]["points"] == 3
    assert repr(res) == "<traceml.SweepResult rows=4 r=1.000 points=3>"


@pytest.mark.slow
def test_both_directions_and_other_axes_make_the_grid():
    calls = []

    def make(num_workers, in_order):
        calls.append((num_workers, in_order))
        return [np.zeros(1)] * 4  # any iterable serves as a loader

    res = traceml.sweep(make, num_workers=(2, 0), steps=3, consumer_pace_s=0,
                        in_order=(True, False), progress=False)
    grid = [(2, True), (2, False), (0, True), (0, False)]
    assert calls == grid + grid[::-1]
    assert [r["direction"] for r in res.rows] == ["forward"] * 4 + ["backward"] * 4
    assert all(rep.summary["steps"] == 3 for rep in res.runs)


def test_an_error_is_recorded_and_the_sweep_goes_on():
    def make(num_workers):
        if num_workers == 2:
            raise RuntimeError("no loader for 2")
        return range(10)

    res = traceml.sweep(make, num_workers=(4, 2, 1), steps=4, consumer_pace_s=0,
                        both_directions=False, progress=False)
    assert [r["error"] for r in res.rows] == [None, "RuntimeError: no loader for 2", None]
    assert res.runs[1] is None and res.runs[2].summary["steps"] == 4
    assert "error in num_workers=2 pass 0 forward: RuntimeError: no loader for 2" in str(res)


def test_ctrl_c_returns_what_was_measured():
    def make(num_workers):
        if num_workers == 1:
            raise KeyboardInterrupt
        return range(10)

    res = traceml.sweep(make, num_workers=(4, 2, 1, 0), steps=4, consumer_pace_s=0,
                        progress=False)
    assert res.interrupted and len(res.rows) == 2
    assert "interrupted" in str(res)


def test_the_users_recording_is_left_as_it_was():
    for _ in range(3):
        traceml.step_begin()
        traceml.fetch_done()
        traceml.step_end()
    before = _core.default_recorder().snapshot().copy()
    traceml.sweep(lambda num_workers: range(8), num_workers=(1, 0), steps=5,
                  consumer_pace_s=0, progress=False)
    np.testing.assert_array_equal(_core.default_recorder().snapshot(), before)


@pytest.mark.slow
def test_workers_are_shut_down_between_conditions():
    seen = []

    def make(num_workers, persistent_workers):
        seen.append(len(multiprocessing.active_children()))
        return torch.utils.data.DataLoader(
            BurnDataset(40, 0.0), batch_size=2, num_workers=num_workers,
            persistent_workers=persistent_workers)

    traceml.sweep(make, num_workers=(2,), steps=4, consumer_pace_s=0,
                  persistent_workers=(True, False), progress=False)
    assert seen == [0, 0, 0, 0]
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize(
    "kwargs, exc, words",
    [
        ({"steps": 1}, ValueError, "steps must be an int >= 2"),
        ({"passes": 0}, ValueError, "passes must be an int >= 1"),
        ({"consumer_pace_s": -1}, ValueError, "consumer_pace_s"),
        ({"num_workers": (2, -1)}, ValueError, "num_workers must be ints from 0 to 1024"),
        # Past 1024: torch would start that many processes (helper 38D).
        ({"num_workers": (10 ** 9,)}, ValueError, "num_workers must be ints from 0 to 1024"),
        ({"in_order": ()}, ValueError, "in_order needs at least one value"),
        ({"stall_threshold_s": float("nan")}, ValueError, "stall_threshold_s"),
        ({"stall_threshold_s": -1}, ValueError, "stall_threshold_s must be finite and >= 0"),
        # 1e10 s is 1e19 ns: past int64, where the threshold is held.
        ({"stall_threshold_s": 1e10}, ValueError, "stall_threshold_s must be at most"),
        ({"stall_threshold_s": "5"}, TypeError, "stall_threshold_s must be a number"),
        ({"both_directions": "no"}, TypeError, "both_directions must be True or False"),
        ({"progress": "no"}, TypeError, "progress must be True or False"),
        ({"num_workers": ("a",)}, TypeError, "num_workers must be ints >= 0, got str"),
        ({"num_workers": (2, True)}, TypeError, "num_workers must be ints >= 0, got bool"),
        ({"steps": "16"}, TypeError, "steps must be an int >= 2, got str"),
        ({"passes": 1.0}, TypeError, "passes must be an int >= 1, got float"),
        ({"step_fn": 3}, TypeError, "step_fn must be callable or None, got int"),
        ({"step_fn": print, "consumer_pace_s": 0.01}, ValueError,
         "give consumer_pace_s .* or step_fn .*, not both"),
    ],
)
def test_bad_arguments_are_named(kwargs, exc, words):
    with pytest.raises(exc, match=words) as info:
        traceml.sweep(lambda num_workers, **kw: range(3), **{"progress": False, **kwargs})
    assert type(info.value) is exc
    assert str(info.value).startswith("sweep(): ")


def test_make_loader_must_be_callable():
    with pytest.raises(TypeError, match="make_loader must be callable"):
        traceml.sweep(None)


def test_correlation_says_what_it_rests_on():
    from traceml.sweeping import _row, correlation

    rows = [dict(_row({"num_workers": k}, 0, "forward", None, None),
                 stalls=s, period=p, mean_s=0.1)
            for k, s, p in [(4, 5, 4), (2, 9, 2), (1, 2, None), (0, 12, 1), (3, 7, None)]]
    c = correlation(rows)
    # The 1-worker row has 2 stalls: below the 3 needed for a period; the
    # 3-worker row has stalls but no period.  Both are listed, with why.
    assert c["points"] == 3 and c["distinct_workers"] == 3 and c["gaps"] == 4 + 8 + 11
    assert c["rows"] == [[4, 4], [2, 2], [1, 1]] and c["follows"] is True
    assert [(r["condition"], r["reason"]) for r in c["left_out"]] == [
        ({"num_workers": 1}, "few_stalls"), ({"num_workers": 3}, "no_period")]
    text = str(traceml.SweepResult(rows, [None] * 5, False))
    assert ("left out of the correlation: num_workers=1 pass 0 forward (2 stalls, under 3); "
            "num_workers=3 pass 0 forward (7 stalls with no period)") in text
    assert ("the period follows num_workers (period == max(1, num_workers) in every row, at "
            "3 distinct num_workers) over 3 conditions with a period (23 stall gaps in all; "
            "max(1, num_workers):period 4:4 2:2 1:1); Pearson r = 1.000, slope 1.00, "
            "intercept 0.00") in text
    assert c["one_worker_rows"] == 0 and c["rows_with_workers"] == 3
    held = [dict(r, attribution="ONE-WORKER") for r in rows]
    assert correlation(held)["one_worker_rows"] == 3
    same = [dict(r, condition={"num_workers": 2}) for r in rows]
    res = traceml.SweepResult(same, [None] * 5, False)
    assert res.correlation["r"] is None
    assert "num_workers vs stall period" not in str(res)


def test_a_period_at_one_worker_refutes_the_rule_alone():
    # Every 6th sample slow: period 6 at 1 and 0 workers (both directions),
    # the 2- and 4-worker rows without a settled period.  "period ==
    # max(1, num_workers)" says 1 there: one such row refutes it.
    from traceml.sweeping import _row

    rows = [dict(_row({"num_workers": k}, 0, d, None, None), stalls=s, period=p,
                 mean_s=0.02)
            for d in ("forward", "backward")
            for k, s, p in [(4, 4, None), (2, 5, None), (1, 6, 6), (0, 6, 6)]]
    res = traceml.SweepResult(rows, [None] * len(rows), False)
    c = res.correlation
    assert (c["distinct_workers"], c["mismatched"], c["follows"]) == (1, 4, False)
    assert ("the period does not follow num_workers (period != max(1, num_workers) in 4 of 4 "
            "rows)") in str(res)
    assert "nothing to correlate" not in str(res)


def test_a_period_set_by_the_data_does_not_follow_num_workers():
    """Every 3rd sample slow: period 3 at 4, 2, 1 and 0 workers.  The old
    median-gap column gave 3, 3, 6, 9 and r = 1.000; the period says 3
    everywhere, which does not follow num_workers."""
    from traceml.sweeping import _row

    rows = [dict(_row({"num_workers": k}, 0, "forward", None, None),
                 stalls=10, period=3, median_gap=g, mean_s=0.02)
            for k, g in [(4, 3.0), (2, 3.0), (1, 6.0), (0, 9.0)]]
    c = traceml.SweepResult(rows, [None] * 4, False).correlation
    assert c["follows"] is False and c["r"] is None and c["slope"] == 0.0
    assert c["intercept"] == 3.0 and c["rows"] == [[4, 3], [2, 3], [1, 3], [1, 3]]
    text = str(traceml.SweepResult(rows, [None] * 4, False))
    assert ("the period does not follow num_workers (the same at every num_workers: set by "
            "the data) over 4 conditions with a period (36 stall gaps in all; max(1, "
            "num_workers):period 4:3 2:3 1:3 1:3); slope 0.00, intercept 3.00") in text
    assert "Pearson" not in text
    # One row off the diagonal is enough: 4:4 2:2 1:3.
    rows = [dict(_row({"num_workers": k}, 0, "forward", None, None), stalls=10, period=p)
            for k, p in [(4, 4), (2, 2), (1, 3)]]
    c = traceml.SweepResult(rows, [None] * 3, False).correlation
    assert c["follows"] is False
    assert c["r"] == pytest.approx(np.corrcoef([4, 2, 1], [4, 2, 3])[0, 1])


@pytest.mark.slow
def test_sweep_plot_shows_cadence_and_mean_fetch():
    pytest.importorskip("matplotlib")
    res = traceml.sweep(lambda num_workers: range(12), num_workers=(2, 1), steps=6,
                        consumer_pace_s=0, progress=False)
    fig = res.plot()
    gap_ax, time_ax = fig.axes
    assert time_ax.get_ylabel() == "ms a step"
    # num_workers as categories in order, 1 and 2 side by side.
    assert list(gap_ax.get_xticks()) == [0, 1]
    assert [t.get_text() for t in gap_ax.get_xticklabels()] == ["1", "2"]
    # Each condition's bar: the mean fetch, then the compute on top of it
    # (the bar's top is the mean step), in ms.
    fetch = sorted(p.get_height() for p in time_ax.patches[::1][:2])
    rows = sorted((r for r in res.to_dict()["rows"] if r["direction"] == "forward"),
                  key=lambda r: r["condition"]["num_workers"])
    assert fetch == pytest.approx(sorted(r["mean_s"] * 1e3 for r in rows))
    # The legend sits under the panels, off the data.
    assert fig.legends and not gap_ax.get_legend() and not time_ax.get_legend()


def test_sweep_names_the_lowest_mean_fetch_and_its_peers():
    from traceml.sweeping import _row

    def row(k, mean, direction="forward"):
        return dict(_row({"num_workers": k}, 0, direction, None, None),
                    mean_s=mean, diagnosis="INPUT-BOUND")

    res = traceml.SweepResult([row(4, 0.052), row(2, 0.050), row(1, 0.105),
                               row(2, 0.051, "backward")], [None] * 4, False)
    b = res.best()
    assert b["condition"] == {"num_workers": 2} and b["mean_s"] == pytest.approx(0.0505)
    assert b["close"] == ["num_workers=4"]
    assert ("lowest mean fetch: num_workers=2 (50.5 ms); within 10% of it "
            "(no real difference): num_workers=4") in str(res)
    assert res.to_dict()["best"]["close"] == ["num_workers=4"]


def paced(wait_s, n):
    """A generator loader whose every fetch sleeps wait_s."""
    for i in range(n):
        time.sleep(wait_s)
        yield i


@pytest.mark.slow
def test_order_effect_is_named_when_backward_differs():
    calls = []

    def make(num_workers):
        # The forward runs wait 2 ms a fetch, the backward ones 30 ms: as if
        # the host got busy half-way through the sweep.
        calls.append(num_workers)
        return paced(0.002 if len(calls) <= 2 else 0.030, 8)

    res = traceml.sweep(make, num_workers=(2, 1), steps=8, consumer_pace_s=0.001,
                        progress=False)
    effects = res.order_effects()
    assert [e["condition"] for e in effects] == [{"num_workers": 2}, {"num_workers": 1}]
    for e in effects:
        fwd, bwd = (r for r in res.rows if r["condition"] == e["condition"])
        assert (fwd["direction"], bwd["direction"]) == ("forward", "backward")
        assert e["forward_mean_s"] == fwd["mean_s"] < 0.015
        assert e["backward_mean_s"] == bwd["mean_s"] >= 0.030
        assert e["differs"] is True
        assert e["pass_"] == 0
    text = str(res)
    assert "order effect in 2 of 2 conditions: num_workers=2 " in text
    # What moved, in compare's words: here the mean fetch.
    assert (f"num_workers=1 backward against forward {effects[1]['verdict']} "
            f"({effects[1]['why']})") in text
    assert fmt_s(effects[1]['forward_mean_s']) in effects[1]["why"]
    assert "passes=2 shows whether they recur" in text
    assert res.to_dict()["order_effects"] == effects
    assert "order effect in 2 of 2" in res._repr_html_()


@pytest.mark.slow
def test_order_effects_use_compares_tolerance():
    # A steady 20 ms fetch both ways: whether a pair differs is recomputed
    # here from the per-step arrays with compare()'s rule.
    res = traceml.sweep(lambda num_workers: paced(0.020, 8), num_workers=(1, 0),
                        steps=8, consumer_pace_s=0.002, passes=2, progress=False)
    effects = res.order_effects()
    assert [(e["condition"]["num_workers"], e["pass_"]) for e in effects] == [
        (1, 0), (0, 0), (1, 1), (0, 1)]
    for e in effects:
        fwd, bwd = (rep for row, rep in zip(res.rows, res.runs)
                    if row["condition"] == e["condition"] and row["pass_"] == e["pass_"])
        # Not a DataLoader: the first fetch is the epoch start.
        f_wait = fwd.input_wait_ns[1:].mean() / 1e9
        b_wait = bwd.input_wait_ns[1:].mean() / 1e9
        tol = max(0.10 * f_wait, 0.02 * fwd.step_ns[1:].mean() / 1e9)
        assert e["forward_mean_s"] == pytest.approx(f_wait, rel=1e-9)
        assert e["backward_mean_s"] == pytest.approx(b_wait, rel=1e-9)
        assert e["differs"] is bool(abs(b_wait - f_wait) > tol)
    differ = [e for e in effects if e["differs"]]
    if differ:  # with two passes each pair names its pass
        e = differ[0]
        assert (f"num_workers={e['condition']['num_workers']} pass {e['pass_']} "
                f"backward against forward {e['verdict']} ({e['why']})") in str(res)
        assert "see whether they recur in every pass" in str(res)
    else:
        assert "forward and backward agree for all 4 conditions" in str(res)


def test_one_direction_has_no_order_effects():
    res = traceml.sweep(lambda num_workers: [0] * 4, num_workers=(1, 0), steps=3,
                        consumer_pace_s=0, both_directions=False, progress=False)
    assert res.order_effects() == []
    assert res.to_dict()["order_effects"] == []
    assert "forward and backward" not in str(res) and "order effect" not in str(res)


@pytest.mark.slow
def test_order_effects_name_the_pass_when_there_are_several():
    calls = []

    def make(num_workers):
        calls.append(num_workers)  # runs 2 and 4 are the backward ones
        return paced(0.030 if len(calls) % 2 == 0 else 0.002, 8)

    res = traceml.sweep(make, num_workers=(1,), steps=8, consumer_pace_s=0.001,
                        passes=2, progress=False)
    assert [(r["pass_"], r["direction"]) for r in res.rows] == [
        (0, "forward"), (0, "backward"), (1, "forward"), (1, "backward")]
    effects = res.order_effects()
    assert [(e["pass_"], e["differs"]) for e in effects] == [(0, True), (1, True)]
    text = str(res)
    assert "order effect in 2 of 2 conditions: num_workers=1 pass 0 " in text
    assert "; num_workers=1 pass 1 " in text
    assert "see whether they recur in every pass" in text


def test_the_same_period_everywhere_is_said_plainly():
    from traceml.sweeping import _row

    # Every condition stalls every other step: the period is 2 at 4, 2 and 0
    # workers, so the cadence does not follow num_workers.
    rows = [dict(_row({"num_workers": k}, 0, "forward", None, None),
                 stalls=6, period=2, mean_s=0.02) for k in (4, 2, 0)]
    res = traceml.SweepResult(rows, [None] * 3, False)
    c = res.to_dict()["correlation"]
    assert c["r"] is None and c["follows"] is False
    assert c["slope"] == 0.0 and c["intercept"] == 2.0
    assert c["points"] == 3 and c["distinct_workers"] == 3 and c["gaps"] == 3 * 5
    text = str(res)
    assert "the period does not follow num_workers (the same at every num_workers: set by " \
        "the data)" in text
    assert "Pearson" not in text and "too few" not in text


def test_the_correlation_uses_the_loaders_own_num_workers():
    from traceml.sweeping import _row

    def row(asked, built, period):
        return dict(_row({"num_workers": asked}, 0, "forward", None, None),
                    stalls=8, period=period, mean_s=0.02, loader_num_workers=built)

    # Labelled 4, 2 and 3 but built with 1, 2 and 3 workers: the period
    # follows the built count (slope +1), not the labels (which would give
    # r = -0.5 and no follow).
    c = traceml.SweepResult([row(4, 1, 1), row(2, 2, 2), row(3, 3, 3)], [None] * 3,
                            False).correlation
    assert c["rows"] == [[1, 1], [2, 2], [3, 3]] and c["workers_varied"] is True
    assert c["slope"] == pytest.approx(1.0) and c["r"] == pytest.approx(1.0)
    assert c["follows"] is True
    # Both built with 0 workers: nothing varied.
    res = traceml.SweepResult([row(4, 0, 1), row(2, 0, 1)], [None] * 2, False)
    assert res.correlation["distinct_workers"] == 1 and res.correlation["r"] is None
    text = str(res)
    assert res.correlation["workers_varied"] is False
    assert "num_workers did not vary in this sweep (counting the workers each loader" in text
    assert "too few to tell" not in text
    assert ("make_loader ignored num_workers: num_workers=4 built a loader with 0 workers, "
            "num_workers=2 built a loader with 0 workers") in text


@pytest.mark.slow
def test_a_make_loader_that_ignores_num_workers_is_named():
    def make(num_workers):
        return torch.utils.data.DataLoader(BurnDataset(20, 0.0), batch_size=2, num_workers=0)

    res = traceml.sweep(make, num_workers=(1, 0), steps=4, consumer_pace_s=0,
                        both_directions=False, progress=False)
    assert [r["error"] for r in res.rows] == [None, None]
    assert [rep.summary["loader"]["num_workers"] for rep in res.runs] == [0, 0]
    assert [r["loader_num_workers"] for r in res.rows] == [0, 0]
    assert [r["condition"]["num_workers"] for r in res.rows] == [1, 0]
    text = str(res)
    assert "make_loader ignored num_workers: num_workers=1 built a loader with 0 workers" in text
    assert "num_workers=0 built" not in text
    assert "make_loader ignored num_workers" in res._repr_html_()
    assert res.to_dict()["rows"][0]["loader_num_workers"] == 0


@pytest.mark.slow
def test_a_loader_honouring_num_workers_gets_no_such_line():
    res = traceml.sweep(
        lambda num_workers: torch.utils.data.DataLoader(BurnDataset(20, 0.0), batch_size=2,
                                                        num_workers=num_workers),
        num_workers=(0,), steps=3, consumer_pace_s=0, progress=False)
    assert [r["loader_num_workers"] for r in res.rows] == [0, 0]
    assert "ignored num_workers" not in str(res)
    # Iterables that are not DataLoaders have no num_workers of their own.
    res = traceml.sweep(lambda num_workers: range(5), num_workers=(1,), steps=3,
                        consumer_pace_s=0, both_directions=False, progress=False)
    assert res.rows[0]["loader_num_workers"] is None
    assert "ignored num_workers" not in str(res)


@pytest.mark.slow
def test_a_loader_that_runs_out_is_named():
    sizes = {2: 3, 1: 10, 0: 4}

    def make(num_workers):
        if num_workers == 0:
            raise RuntimeError("no loader")
        return range(sizes[num_workers])

    res = traceml.sweep(make, num_workers=(2, 1, 0), steps=5, consumer_pace_s=0,
                        progress=False)
    assert [r["steps"] for r in res.rows] == [3, 5, 0, 0, 5, 3]
    assert {r["steps_requested"] for r in res.rows} == {5}
    assert [rep.summary["steps"] for rep in res.runs if rep is not None] == [3, 5, 5, 3]
    text = str(res)
    # Listed once although it ran short both ways; the failed condition
    # has its error line instead.
    assert "ran fewer batches than steps=5: num_workers=2 (3)\n" in text + "\n"
    assert "error in num_workers=0 pass 0 forward" in text
    assert "ran fewer batches than steps=5" in res._repr_html_()
    res = traceml.sweep(lambda num_workers: range(8), num_workers=(1,), steps=5,
                        consumer_pace_s=0, progress=False)
    assert [r["steps"] for r in res.rows] == [5, 5]
    assert "ran fewer" not in str(res)


def test_make_loader_signature_is_checked_before_anything_runs():
    calls = []

    def make(nw, **k):
        calls.append(nw)
        return range(4)

    with pytest.raises(TypeError) as info:
        traceml.sweep(make, num_workers=(1, 0), in_order=(True, False), steps=3,
                      progress=False)
    assert str(info.value).startswith(
        "sweep(): make_loader must accept the keyword arguments num_workers=..., "
        "in_order=...; got signature (nw, **k)")
    assert calls == []


def test_keyword_only_and_unsigned_make_loaders_run():
    def make(*, num_workers, **kw):
        return range(4)

    res = traceml.sweep(make, num_workers=(1,), steps=3, consumer_pace_s=0,
                        both_directions=False, progress=False)
    assert res.rows[0]["error"] is None and res.rows[0]["steps"] == 3
    # dict has no signature inspect can read: not checked, and called as
    # dict(num_workers=1), whose one key is its one batch.
    res = traceml.sweep(dict, num_workers=(1,), steps=2, consumer_pace_s=0,
                        both_directions=False, progress=False)
    assert res.rows[0]["error"] is None and res.rows[0]["steps"] == 1
    assert "ran fewer batches than steps=2: num_workers=1 (1)" in str(res)


@pytest.mark.slow
def test_pairs_without_steady_state_steps_do_not_differ():
    from traceml.comparing import NO_DATA

    # One batch per condition: the epoch-start fetch only, no steady state.
    res = traceml.sweep(lambda num_workers: range(1), num_workers=(1, 0), steps=2,
                        consumer_pace_s=0, progress=False)
    assert [rep.summary["input_wait_s"]["mean"] for rep in res.runs] == [None] * 4
    effects = res.order_effects()
    assert [(e["verdict"], e["differs"]) for e in effects] == [(NO_DATA, False)] * 2
    text = str(res)
    assert "order effect" not in text and "agree" not in text
    assert ("forward and backward: no condition has steady-state steps on both sides "
            "to compare") in text


def _slow_every(n, every, slow_cpu_s):
    """make_loader over n items of 1 ms CPU, item i burning slow_cpu_s where
    i % every == 1, one item per batch."""
    def make(num_workers):
        return torch.utils.data.DataLoader(
            BurnDataset(n, 0.001, slow_every=every, slow_index=1, slow_cpu_s=slow_cpu_s),
            batch_size=1, num_workers=num_workers)
    return make


@pytest.mark.slow
def test_without_workers_the_stall_columns_hold_the_main_process():
    # num_workers=0: the dataset runs in the main process, so cores@stall
    # and read@stall are its counters, not "-".
    res = traceml.sweep(_slow_every(16, 4, 0.1), num_workers=(0,), steps=16, consumer_pace_s=0.002,
                        both_directions=False, progress=False)
    (row,), (rep,) = res.rows, res.runs
    assert row["stalls"] == 4, rep.input_wait_ns // 1_000_000
    slow = rep["workers"]["intervals"]["slow"]
    assert row["slow_worker_cores"] == pytest.approx(slow["main_cpu_s"] / slow["wall_s"])
    assert row["slow_worker_cores"] >= 0.25  # 4 x 0.1 s of CPU burnt in the stalls
    assert row["slow_read_bytes"] == slow["main_read_bytes"]
    assert row["slow_major_faults"] == slow["main_major_faults"]
    # The evidence table (after a blank line, its title and its header):
    # the row ends with cores@stall and read@stall (MB).
    lines = str(res).splitlines()
    line = lines[lines.index("") + 3]
    cores_cell = f"{row['slow_worker_cores']:.1f}"
    read_cell = f"{row['slow_read_bytes'] / 1e6:.3g}"
    assert re.search(rf"\s{re.escape(cores_cell)}\s+{re.escape(read_cell)}$", line), line


class _SleepEvery:
    """n items; item i sleeps slow_s where i % every == 1, else 1 ms: a
    cost that holds no CPU, so the pattern it makes survives a loaded
    host (the CI suite runs beside its own leftover work)."""

    def __init__(self, n, every, slow_s):
        self.n, self.every, self.slow_s = n, every, slow_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.slow_s if i % self.every == 1 else 0.001)
        return torch.tensor([i])


@pytest.mark.slow
def test_every_third_sample_slow_keeps_its_period_across_num_workers():
    # One index in 3 sleeps 80 ms: the period is 3 whatever num_workers
    # is, set by the data.  (The median-gap column read 3, 3, 6, 9 here and
    # the correlation "confirmed" r = 1.000.)  Slept, not burnt: beside
    # two CPU spinners on this 2-core host a burn splits across two
    # fetches (the positions still show period 3 at 1 worker, 8 of 8
    # sweeps) and the two workers' turns can make the 2-worker row's
    # period 6 (5 of 8): what the host does, not what this test checks.
    def make(num_workers):
        return torch.utils.data.DataLoader(_SleepEvery(60, 3, 0.08), batch_size=1,
                                           num_workers=num_workers)

    res = traceml.sweep(make, num_workers=(2, 1, 0), steps=60, consumer_pace_s=0.005,
                        both_directions=False, progress=False)
    periods = [rep["temporal"]["period"] for rep in res.runs]
    assert [r["period"] for r in res.rows] == periods
    # With 2 workers prefetching, every other slow sample can hide behind
    # the other worker's batches: period 6, still set by the data.  On a
    # loaded host (a CI run beside other tests) the two workers' batches
    # can bunch so that 60 steps only fit the period without settling it:
    # "not yet" (UNSETTLED, 3 or 6), never another period.
    first = res.runs[0]["temporal"]
    settled = periods[0] is not None
    assert (periods[0] if settled else first["consistent_period"]) in (3, 6), (
        first, [r.input_wait_ns.tolist() for r in res.runs])
    assert settled or first["label"] == "UNSETTLED"
    assert periods[1:] == [3, 3], (periods, [r.input_wait_ns.tolist() for r in res.runs])
    c = res.correlation
    if settled:
        assert c["follows"] is False and c["rows"] == [[2, periods[0]], [1, 3], [1, 3]]
        said = ("the same at every num_workers: set by the data" if periods[0] == 3
                else "period != max(1, num_workers) in 3 of 3 rows")
        assert f"the period does not follow num_workers ({said})" in str(res)
    else:
        assert c["rows"] == [[1, 3], [1, 3]] and c["follows"] is not True
    assert "Pearson" not in str(res)    # 2 distinct num_workers: no fit printed
    for rep in res.runs:
        # Recomputed from the delivery record: the stalled ranks' residue,
        # and the workers holding them (a loaded host adds a stray stall).
        steps = rep["stalls"]["steps"]
        stalled = [rep["delivery"]["ranks"][i] for i in steps]
        share = sum(k % 3 == 1 for k in stalled) / len(stalled)
        # One worker with prefetch_factor 2 can spread a slow sample over
        # two fetches (both stalls) on a loaded host: the wait can land on
        # rank k - 1, queued behind it.  Count bursts of back-to-back
        # stalls, each of which must hold a slow sample or the rank just
        # before one.
        bursts, prev = [], None
        for i, k in zip(steps, stalled):
            if prev is not None and i == prev + 1:
                bursts[-1].append(k)
            else:
                bursts.append([k])
            prev = i
        reach = 1 if rep["loader"]["num_workers"] else 0
        with_slow = sum(any((k + j) % 3 == 1 for k in b for j in range(reach + 1))
                        for b in bursts) / len(bursts)
        assert with_slow >= 0.8, (rep["loader"]["num_workers"], stalled)
        workers = {rep["delivery"]["workers"][i] for i in steps} - {None}
        p = rep["temporal"]["period"]
        a = rep["attribution"]
        if a is not None and a["period_from"] == "make_times":
            # The workers' make times name the data's period whatever the
            # stalls' cadence (6 at 2 workers): rank % 3 == 1, holding most
            # of the stalls.
            assert a["label"] == "SLOW-SAMPLE" and (a["period"], a["residue"]) == (3, 1), a
            # residue_share counts the batch each stall's worker was making
            # during the wait: the slow one itself, or (one worker, the
            # GIL hand-over above) the one after the batch received.
            assert a["residue_share"] >= 0.8 and with_slow >= 0.8, (a, stalled)
            assert a["stall_period"] == p or p is None, (a, p)
            continue
        expected = (p == 3 and share >= 0.9
                    and (rep["loader"]["num_workers"] < 2 or len(workers) >= 2))
        assert (a is not None and a["label"] == "SLOW-SAMPLE") == expected, (a, stalled)


# --- what the summary may claim, and the next step -----------------------------------------


def _period_row(k, stalls, period, temporal=None, mean=0.05, direction="forward", share=None):
    from traceml.sweeping import _row

    return dict(_row({"num_workers": k}, 0, direction, None, None), stalls=stalls,
                period=period, temporal=temporal, mean_s=mean, input_share=share,
                diagnosis="INPUT-BOUND")


def test_a_stall_on_every_fetch_is_no_period_and_is_named():
    # The user's sweep of num_workers (1, 4): every fetch stalls at 1 worker
    # (EVERY-FETCH, period "-" in the table), period 4 at 4.  The old summary
    # counted the 1-worker rows as period 1 and said "follows ... r = 1.000".
    rows = [_period_row(1, 23, None, "EVERY-FETCH", 0.0821),
            _period_row(4, 5, 4, "PERIODIC", 0.0796),
            _period_row(4, 4, 4, "PERIODIC", 0.0700, "backward"),
            _period_row(1, 23, None, "EVERY-FETCH", 0.0792, "backward")]
    res = traceml.SweepResult(rows, [None] * 4, False)
    c = res.correlation
    assert c["rows"] == [[4, 4], [4, 4]] and c["distinct_workers"] == 1
    assert c["follows"] is None and c["r"] is None
    assert [r["reason"] for r in c["left_out"]] == ["every_fetch", "every_fetch"]
    text = str(res)
    assert "follows num_workers" not in text and "Pearson" not in text
    assert ("num_workers=1 pass 0 forward (a stall on every fetch: period 1, which the "
            "pooled test counts and the correlation has no gap for)") in text
    # The table names the row's lack of a period too.
    assert re.search(r"^1 +fwd .* every ", text, re.M)


def test_two_distinct_num_workers_are_too_few_to_say_follows():
    # period == num_workers at 2 and at 4: any two points lie on a line.
    rows = [_period_row(2, 8, 2), _period_row(4, 8, 4)]
    c = traceml.SweepResult(rows, [None] * 2, False).correlation
    assert c["distinct_workers"] == 2 and c["mismatched"] == 0
    assert c["follows"] is None and c["r"] is None and c["slope"] is None
    text = str(traceml.SweepResult(rows, [None] * 2, False))
    assert "too few to tell" in text and "it takes 3" in text
    assert "Pearson" not in text and "period follows" not in text
    # A third distinct value on the line makes the claim, with the fit.
    rows.append(_period_row(1, 8, 1))
    c = traceml.SweepResult(rows, [None] * 3, False).correlation
    x, y = np.array([2, 4, 1.0]), np.array([2, 4, 1.0])
    assert c["follows"] is True and c["r"] == pytest.approx(np.corrcoef(x, y)[0, 1])
    assert c["slope"] == pytest.approx(np.polyfit(x, y, 1)[0])


def test_a_varying_period_that_misses_num_workers_prints_no_r():
    # A slow sample every 3rd index: period 3 at 1 worker (four rows), 6 at 2.
    # r = 1.000 and slope 3.00 would read as perfect agreement.
    rows = [_period_row(1, 9, 3) for _ in range(4)] + [_period_row(2, 5, 6)]
    res = traceml.SweepResult(rows, [None] * 5, False)
    c = res.correlation
    assert c["follows"] is False and c["same_period"] is False and c["mismatched"] == 5
    assert c["r"] is None      # 2 distinct num_workers: no fit
    text = str(res)
    assert "the period does not follow num_workers (period != max(1, num_workers) in 5 of 5 " \
        "rows)" in text
    assert "Pearson" not in text and "slope" not in text


def _cond(name, workers, mean, share=None):
    return {"name": name, "workers": workers, "mean_s": mean, "input_share": share}


def test_sweep_next_keeps_the_fewest_workers_within_tolerance():

    # The user's sweep: num_workers=1 82.1 and 79.2 ms, num_workers=4 79.6
    # and 70 ms; input 87% of the step at 1 worker.
    one, four = np.mean([0.0821, 0.0792]), np.mean([0.0796, 0.0700])
    assert one <= four * (1 + comparison.REL_TOL)      # within compare's tolerance
    items = sweeps.sweep_next([_cond("num_workers=1", 1, one, 0.87),
                               _cond("num_workers=4", 4, four, 0.82)], None)
    assert [c for c, _ in items] == [sweeps.SWEEP_KEEP_FEWEST, sweeps.SWEEP_STILL_INPUT]
    assert items[0][1]["keep"] == "num_workers=1" and items[0][1]["fewer_workers"] is True
    assert items[0][1]["keep_mean_s"] == pytest.approx(one)
    rows = [_period_row(1, 23, None, "EVERY-FETCH", 0.0821, share=0.87),
            _period_row(4, 5, 4, "PERIODIC", 0.0796, share=0.82),
            _period_row(4, 4, 4, "PERIODIC", 0.0700, "backward", share=0.82),
            _period_row(1, 23, None, "EVERY-FETCH", 0.0792, "backward", share=0.87)]
    text = str(traceml.SweepResult(rows, [None] * 4, False))
    assert ("Next: keep num_workers=1 (80.7 ms): the lowest, num_workers=4 (74.8 ms), is "
            "within compare's tolerance (7.48 ms: 10% of the mean fetch or 2% of the step) of "
            "it (no real difference): more workers did not shorten the wait.") in text
    assert "Even with num_workers=1 input is 87% of step time (INPUT-BOUND)" in text


def test_sweep_next_keeps_a_clear_winner_or_asks_for_a_repeat():

    conds = [_cond("num_workers=4", 4, 0.010, 0.10), _cond("num_workers=2", 2, 0.020, 0.3),
             _cond("num_workers=1", 1, 0.040, 0.6)]
    items = sweeps.sweep_next(conds, None)
    assert [c for c, _ in items] == [sweeps.SWEEP_KEEP_BEST]
    assert items[0][1]["runner"] == "num_workers=2"
    assert items[0][1]["lead_s"] == pytest.approx(0.010)
    # The lead (10 ms) within an order effect of 12 ms: repeat.
    items = sweeps.sweep_next(conds, 0.012)
    assert [c for c, _ in items] == [sweeps.SWEEP_UNDECIDED]
    # Beyond an order effect of 5 ms, still input-bound at the most workers.
    conds[0]["input_share"] = 0.5
    items = sweeps.sweep_next(conds, 0.005)
    assert [c for c, _ in items] == [sweeps.SWEEP_KEEP_BEST, sweeps.SWEEP_MORE_WORKERS]
    assert sweeps.sweep_next(conds[:1], None) == []
    # One direction only: the lead is kept, and the words say the order's
    # effect was not set against it.
    (code, numbers), *_ = sweeps.sweep_next(conds, None, order_measured=False)
    assert code == sweeps.SWEEP_KEEP_BEST
    assert "one direction only" in sweeps.WORDS[code](numbers)
    assert "one direction only" not in sweeps.WORDS[code](items[0][1])


def test_the_seed_sweep_at_16_steps_concludes():
    """The investigation's table at its own size: 16 deliveries per
    condition at num_workers 4, 2, 1, 0 and back; lock-step stalls on the
    first fetch of each round (0, 4, 8, 12 at 4 workers), every fetch at 1
    and 0.  The pooled test of the rows' own cadences concludes, and the
    sentence says what it rests on."""
    import corpus
    from traceml.sweeping import _row

    def steady(nw):
        k = corpus.startup(nw)
        wait = np.full(16 - k, 0.2)
        wait[[i for i in range(16 - k) if (i + k) % max(1, nw) == 0]] = 80.0
        return wait

    rows, reports = [], []
    for direction, grid in (("forward", (4, 2, 1, 0)), ("backward", (0, 1, 2, 4))):
        for nw in grid:
            rep = corpus.replay(corpus.make(f"seed-{nw}", steady(nw), {}, num_workers=nw))
            rows.append(_row({"num_workers": nw}, 0, direction, rep, None))
            reports.append(rep)
    res = traceml.SweepResult(rows, reports, False)
    c = res.correlation
    assert c["follows"] is True and c["pooled"]["follows"] is True
    assert c["pooled"]["tested"] == 4 and c["pooled"]["fitting"] == 8
    assert c["pooled"]["p_value"] < 1e-6
    text = str(res)
    assert "the period follows num_workers" in text
    assert "8 rows, 4 of them at 0 or 1 workers stalling on every fetch (period 1), at 3 " \
        "distinct max(1, num_workers)" in text


def test_a_batch_size_sweep_weighs_its_order_effect_per_sample(monkeypatch):
    # batch_size 4 waits 18 ms a fetch, 8 waits 24 ms: per sample 4.5 ms
    # against 3 ms, so 8 is best.  The order effect, 14 ms on the batch of
    # 8, is 1.75 ms a sample: the lead (1.5 ms a sample) is within it, and
    # the repeat is asked in per-sample terms.
    from traceml.findings import sweeps
    from traceml.sweeping import _row

    rows = [dict(_row({"num_workers": 2, "batch_size": b}, 0, d, None, None), mean_s=m,
                 step_mean_s=m + 0.01, input_share=0.5)
            for b, m in ((4, 0.018), (8, 0.024)) for d in ("forward", "backward")]
    res = traceml.SweepResult(rows, [None] * 4, False)
    best = res.best()
    assert best["condition"]["batch_size"] == 8 and best["per_sample"] is True
    assert best["mean_s"] == pytest.approx(0.024 / 8)
    monkeypatch.setattr(traceml.SweepResult, "order_effects", lambda self: [
        {"condition": {"num_workers": 2, "batch_size": 8}, "pass_": 0, "differs": True,
         "forward_mean_s": 0.017, "backward_mean_s": 0.031}])
    (code, p), = res.next_steps()
    assert code == sweeps.SWEEP_UNDECIDED
    assert p["order_spread_s"] == pytest.approx(0.014 / 8)
    assert p["lead_s"] == pytest.approx(0.018 / 4 - 0.024 / 8)
    said = sweeps.WORDS[code](p)
    assert "by 1.5 ms per sample, no more than the order effect (1.75 ms per sample)" in said


class _WorkerTagged(torch.utils.data.Dataset):
    """24 items of 2 ms CPU, each the id of the worker that made it (-1 in
    the main process)."""

    def __len__(self):
        return 24

    def __getitem__(self, i):
        burn_cpu(0.002)
        info = torch.utils.data.get_worker_info()
        return torch.tensor([-1 if info is None else info.id])


@pytest.mark.slow
def test_a_sweep_runs_the_users_step_on_each_batch_and_ranks_by_step():
    """step_fn gets every batch of every condition in place of the sleep,
    its exception lands on its own row, and the next step names the
    condition of the lowest mean step: a step that burns 1 ms of CPU on a
    batch made in the main process and 15 ms on one made by a worker
    (workers that take the model's cores, made certain) leaves the
    2-worker condition waiting less and stepping slower."""
    got = []

    def make(num_workers):
        return torch.utils.data.DataLoader(_WorkerTagged(), batch_size=2,
                                           num_workers=num_workers)

    def train_step(batch):
        got.append(int(batch[0]))
        burn_cpu(0.001 if int(batch[0]) < 0 else 0.015)

    res = traceml.sweep(make, num_workers=(0, 2), steps=10, step_fn=train_step,
                        progress=False)
    assert len(got) == 4 * 10
    assert sorted(set(got)) == [-1, 0, 1]
    assert res.consumer == {"step_fn": train_step.__qualname__}
    means = {}
    for r in res.rows:
        means.setdefault(r["condition"]["num_workers"], []).append(r["step_mean_s"])
    assert np.mean(means[2]) > np.mean(means[0])
    codes = dict(res.next_steps())
    kept = codes.get(sweeps.SWEEP_KEEP_BEST) or codes.get(sweeps.SWEEP_KEEP_FEWEST)
    assert kept["measure"] == "step"
    assert (kept.get("best") or kept["keep"]) == "num_workers=0"
    text = str(res)
    assert "ran on each batch" in text and "ranked by mean step" in text

    def failing(batch):
        raise RuntimeError("step broke")

    res = traceml.sweep(make, num_workers=(0,), steps=3, step_fn=failing, progress=False,
                        both_directions=False)
    assert res.rows[0]["error"] == "RuntimeError: step broke"
