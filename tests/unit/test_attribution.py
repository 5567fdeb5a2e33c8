"""attribution: LOCK-STEP needs workers making the batches in the stalls."""

import numpy as np
import pytest

from traceml.findings import attribution


def _lockstep(making):
    """12 rounds of 4 workers, a stall on each round's first batch."""
    ranks = np.arange(4, 52, 4)
    workers = ranks % 4
    batches = np.arange(4, 52) % 4
    return attribution.attribution(ranks, workers, batches, 4, 4, None, making=making)


@pytest.mark.parametrize("making,label", [(True, "LOCK-STEP"), (None, "LOCK-STEP"),
                                          (False, None)])
def test_lock_step_needs_workers_making_the_batches(making, label):
    a = _lockstep(making)
    assert (a["label"] if a else None) == label


def test_cpu_is_compared_per_batch_made():
    # Worker 0 makes 2 of each epoch's 3 batches by construction: twice the
    # CPU for twice the batches is not a busier worker.
    ticks, made = {0: 200, 1: 100}, {0: 20, 1: 10}
    assert attribution.cpu_ratio(ticks, 0) == 2.0
    assert attribution.cpu_ratio(ticks, 0, made) == 1.0
    assert attribution.cpu_ratio({0: 300, 1: 100}, 0, made) == 1.5
    # A worker with no batch delivered cannot be put per batch.
    assert attribution.cpu_ratio(ticks, 0, {0: 20}) is None
