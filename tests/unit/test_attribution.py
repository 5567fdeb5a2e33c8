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
