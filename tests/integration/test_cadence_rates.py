"""stall_timing's searched tests over many simulated runs: random stalls
claim a searched period, or several stalls a period, no more often than
PERIOD_ALPHA allows, and one stall a period with misses at random keeps
its period.  Pure, but hundreds of
temporal_of() calls a test: here rather than in the seconds-long unit tier
(tests/unit/test_stall_timing.py holds the rule's own cases)."""

import math

import numpy as np
import pytest

from traceml.findings import stall_timing

from support import most_false_alarms, one_epoch_temporal as _one


def test_one_stall_a_period_with_random_misses_keeps_its_period():
    # "Every 2" (or 4) with a third of the stalls missed at random: the
    # misses fall anywhere on the residue, and the several-stalls answer at
    # a multiple may replace it only where the spread test refutes that,
    # at PERIOD_ALPHA: at most about 1 % of such runs.
    rng = np.random.default_rng(11)
    moved = 0
    runs = 150
    for period, n, fill in ((2, 40, 0.6), (4, 60, 0.75)):
        for _ in range(runs):
            at = [i for i in range(0, n, period) if rng.random() < fill]
            got = _one(n, at, 40_000_000, 1_000_000)
            moved += bool(got is not None and (got.get("searched") or {}).get("residues"))
    assert moved <= 3, moved


def test_random_stalls_rarely_read_as_several_a_period():
    # Measured over 400 runs each of 7 sizes (16-100 fetches): none.
    rng = np.random.default_rng(12)
    claimed = 0
    runs = 200
    for n, k in ((30, 10), (42, 12)):
        for _ in range(runs):
            got = _one(n, np.sort(rng.choice(n, k, replace=False)), 40_000_000, 1_000_000)
            claimed += bool(got["label"] == stall_timing.PERIODIC
                            and (got.get("searched") or {}).get("residues"))
    # The binomial bound of a PERIOD_ALPHA rate over the 400 runs.
    assert stall_timing.PERIOD_ALPHA == 0.01
    assert claimed <= most_false_alarms(2 * runs), claimed


@pytest.mark.parametrize("rate", [0.15, 0.4])
def test_random_stalls_claim_a_searched_period_no_more_often_than_alpha(rate):
    rng = np.random.default_rng(11)
    runs, claims, n = 500, 0, 48
    position, tested = np.arange(n), np.ones(n, dtype=bool)
    for _ in range(runs):
        stalled = rng.random(n) < rate
        candidates = range(2, n // stall_timing.PREDICTED_MIN_STALLS + 1)
        got = stall_timing.searched_cadence(stalled, position, tested, None, candidates)
        claims += bool(got and got["periodic"])
    alpha = stall_timing.PERIOD_ALPHA
    assert claims / runs <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / runs)
