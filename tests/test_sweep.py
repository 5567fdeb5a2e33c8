"""sweep() on real DataLoaders whose items burn a set amount of CPU."""

import multiprocessing
import os
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import traceml  # noqa: E402
from traceml import _core  # noqa: E402

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
