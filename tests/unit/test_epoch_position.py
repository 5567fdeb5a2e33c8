"""Each step's position in its epoch, and the epochs' runs, against a walk
over the steps."""

import numpy as np
import pytest

from traceml import _core, build, evidence

_STEPS = np.dtype([("epoch", "<i4"), ("flags", "<u2")])


def _positions_by_walking(epoch, recorded):
    """Position of each step: its run's first recorded position (a run is
    a stretch of one epoch), counted on; -1 for a run whose first position
    was past FLAG_POS_MAX."""
    out = []
    for i, e in enumerate(epoch):
        if i == 0 or epoch[i - 1] != e:
            start, first = i, int(recorded[i])
        out.append(first + (i - start) if first < _core.FLAG_POS_MAX else -1)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_positions_agree_with_a_walk_over_the_steps(seed):
    rng = np.random.default_rng(seed)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        steps = np.zeros(n, dtype=_STEPS)
        # Epochs in order (one run each) or interleaved (two iterators).
        steps["epoch"] = (np.sort(rng.integers(0, 4, n)) if rng.random() < 0.7
                          else rng.integers(0, 3, n))
        recorded = rng.integers(0, _core.FLAG_POS_MAX + 1, n)
        steps["flags"] = (recorded << _core.FLAG_POS_SHIFT).astype(np.uint16)
        want = _positions_by_walking(steps["epoch"].tolist(), recorded)
        assert build.stall_steps.epoch_position(steps).tolist() == want
        runs = evidence.epoch_runs(steps["epoch"])
        assert build.stall_steps.epoch_position(steps, runs).tolist() == want


def test_epoch_runs_give_each_epochs_start_only_when_in_order():
    epochs, starts = evidence.epoch_runs(np.array([0, 0, 1, 1, 1, 3], dtype=np.int32))
    assert epochs.tolist() == [0, 1, 3] and starts.tolist() == [0, 2, 5]
    epochs, starts = evidence.epoch_runs(np.array([0, 1, 0], dtype=np.int32))
    assert epochs.tolist() == [0, 1] and starts is None


def test_positions_of_many_runs_agree_with_a_walk(monkeypatch):
    # Past STEADY_RUNS_MAX runs the shifts are repeated, not added run by
    # run: both ways give the walk's positions.
    rng = np.random.default_rng(7)
    n = 400
    steps = np.zeros(n, dtype=_STEPS)
    steps["epoch"] = np.sort(rng.integers(0, 120, n))
    recorded = rng.integers(0, _core.FLAG_POS_MAX + 1, n)
    steps["flags"] = (recorded << _core.FLAG_POS_SHIFT).astype(np.uint16)
    want = _positions_by_walking(steps["epoch"].tolist(), recorded)
    runs = evidence.epoch_runs(steps["epoch"])
    assert build.stall_steps.epoch_position(steps, runs).tolist() == want
    monkeypatch.setattr(build.common, "STEADY_RUNS_MAX", 3)
    assert build.stall_steps.epoch_position(steps, runs).tolist() == want
    assert build.stall_steps.epoch_position(steps).tolist() == want


@pytest.mark.parametrize("runs_max", [4096, 2])
def test_steady_difference_drops_the_start_up_steps(monkeypatch, runs_max):
    # The steady waits against NumPy's masked difference, run by run and,
    # past STEADY_RUNS_MAX start-up steps, by a mask.
    monkeypatch.setattr(build.common, "STEADY_RUNS_MAX", runs_max)
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(0, 30))
        a, b = rng.integers(0, 10**9, n), rng.integers(0, 10**9, n)
        at_first = np.sort(rng.choice(n, int(rng.integers(0, n + 1)), replace=False))
        keep = np.ones(n, dtype=bool)
        keep[at_first] = False
        got = build.common.steady_difference(a, b, at_first)
        assert got.dtype == np.int64 and got.tolist() == (a - b)[keep].tolist()
