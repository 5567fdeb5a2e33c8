"""sweep() on real DataLoaders whose items burn a set amount of CPU."""

import multiprocessing
import os
import time
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import traceml  # noqa: E402
from traceml import _core  # noqa: E402
from traceml.render import fmt_s  # noqa: E402

from burn import BurnDataset, OneCoreBurnDataset, StartTogether  # noqa: E402

warnings.filterwarnings("ignore", message=".*worker processes in total.*")


def make_loader(num_workers, **kw):
    # 4 items x 25 ms CPU = 100 ms of CPU per batch: far above the 10 ms
    # consumer pace, so every condition is input-bound.  Workers start
    # together and burn on one shared core, so that they stay in lock-step
    # on a loaded host (see tests/burn.py).
    return torch.utils.data.DataLoader(
        OneCoreBurnDataset(4 * 24, 0.025, core=min(os.sched_getaffinity(0))),
        batch_size=4, num_workers=num_workers,
        worker_init_fn=StartTogether(num_workers) if num_workers else None, **kw
    )


def test_cadence_follows_num_workers():
    res = traceml.sweep(make_loader, num_workers=(4, 2, 1), steps=24,
                        consumer_pace_s=0.01, both_directions=False, progress=False)
    assert [r["condition"]["num_workers"] for r in res.rows] == [4, 2, 1]
    assert [r["error"] for r in res.rows] == [None] * 3
    assert [r["period"] for r in res.rows] == [4, 2, 1]
    assert all(r["diagnosis"] == "INPUT-BOUND" for r in res.rows)
    c = res.correlation
    assert c["points"] == 3
    assert c["r"] > 0.95
    assert 0.7 < c["slope"] < 1.3
    # The rows hold the reports' own numbers.
    for row, rep in zip(res.rows, res.runs):
        assert row["p95_s"] == rep["input_wait_s"]["p95"]
        assert row["stalls"] == rep["stalls"]["count"]
    text = str(res)
    assert "num_workers=4" in text and "Pearson r" in text
    assert "<table" in res._repr_html_()
    assert res.to_dict()["correlation"]["points"] == 3
    assert repr(res) == f"<traceml.SweepResult rows=3 r={c['r']:.3f} points=3>"


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
    before = _core.snapshot().copy()
    traceml.sweep(lambda num_workers: range(8), num_workers=(1, 0), steps=5,
                  consumer_pace_s=0, progress=False)
    np.testing.assert_array_equal(_core.snapshot(), before)


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
        ({"num_workers": (2, -1)}, ValueError, "num_workers must be ints >= 0"),
        ({"in_order": ()}, ValueError, "in_order needs at least one value"),
        ({"stall_threshold_s": float("nan")}, ValueError, "stall_threshold_s"),
    ],
)
def test_bad_arguments_are_named(kwargs, exc, words):
    with pytest.raises(exc, match=words):
        traceml.sweep(lambda num_workers, **kw: range(3), progress=False, **kwargs)


def test_make_loader_must_be_callable():
    with pytest.raises(TypeError, match="make_loader must be callable"):
        traceml.sweep(None)


def test_correlation_says_what_it_rests_on():
    from traceml.sweep import _row, correlation

    rows = [dict(_row({"num_workers": k}, 0, "forward", None, None),
                 stalls=s, median_gap=g, mean_s=0.1)
            for k, s, g in [(4, 5, 4.0), (2, 9, 2.0), (1, 2, 1.0), (0, 12, 1.0)]]
    c = correlation(rows)
    # The 1-worker row has 2 stalls: below the 3 needed for a cadence.
    assert c["points"] == 3 and c["distinct_workers"] == 3 and c["gaps"] == 4 + 8 + 11
    same = [dict(r, condition={"num_workers": 2}) for r in rows]
    res = traceml.SweepResult(same, [None] * 4, False)
    assert res.correlation["r"] is None
    assert "num_workers did not vary" in str(res)


def test_sweep_plot_shows_cadence_and_mean_fetch():
    pytest.importorskip("matplotlib")
    res = traceml.sweep(lambda num_workers: range(12), num_workers=(2, 1), steps=6,
                        consumer_pace_s=0, progress=False)
    fig = res.plot()
    gap_ax, wait_ax = fig.axes
    assert wait_ax.get_ylabel() == "mean fetch (s)"
    assert list(gap_ax.get_xticks()) == [1, 2]


def test_sweep_names_the_lowest_mean_fetch_and_its_peers():
    from traceml.sweep import _row

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
    assert f"{fmt_s(effects[1]['forward_mean_s'])} forward vs " in text
    assert "passes=2 shows whether they recur" in text
    assert res.to_dict()["order_effects"] == effects
    assert "order effect in 2 of 2" in res._repr_html_()


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
                f"{fmt_s(e['forward_mean_s'])} forward vs") in str(res)
        assert "see whether they recur in every pass" in str(res)
    else:
        assert "forward and backward agree for all 4 conditions" in str(res)


def test_one_direction_has_no_order_effects():
    res = traceml.sweep(lambda num_workers: [0] * 4, num_workers=(1, 0), steps=3,
                        consumer_pace_s=0, both_directions=False, progress=False)
    assert res.order_effects() == []
    assert res.to_dict()["order_effects"] == []
    assert "forward and backward" not in str(res) and "order effect" not in str(res)


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
