"""Diagnostic truth: the labelled corpus of tests/corpus.py, replayed
through ``traceml.build.build`` without timing noise.

Each case is a per-step wait sequence made by a recipe with a fixed seed
(healthy loops with jitter, an isolated blip, uniformly slow input,
lock-step workers at several periods, lock-step pairs, random stalls at
several rates, bursts with a long period, rising and falling trends, one
slow worker, a slow sample every k batches, epoch-start dominated runs, a
stuck fetch), and loaders played out as torch schedules them with the
workers' own batch records (a slow sample every k that prefetch hides
every other time, uniform or randomly slow make times, lock-step, one
slow worker).  Its truth comes from how the sequence was made, and names
only the report keys the case is about.

The contract the report answers to (``Report.to_dict()``):

* ``diagnosis``: INPUT-BOUND | BALANCED | COMPUTE-BOUND;
* ``shape``: FAST | UNIFORMLY-SLOW | HEAVY-TAILED;
* ``stalls``: {"count": int, "outliers": int, ...}: a healthy loop has no
  stall; one isolated blip is an outlier, not a stall;
* ``temporal``: None (no stalls) or {"label": PERIODIC | IRREGULAR |
  EVERY-FETCH | TOO-FEW, "period": int or None, ...};
* ``trend``: None or {"label": RISING | FALLING, "slope_ms_per_step": float};
* ``attribution``: None or {"label": ONE-WORKER | LOCK-STEP | SLOW-SAMPLE,
  "worker": int or None, "period": the samples' period, "period_from":
  "make_times" | "stalls", "stall_period": the stalls' own, "made": the
  make-time reading or None};
* ``headline``: {"label": EPOCH-START | STUCK | STEADY}, what holds most of
  the run's wall time.

A key the report lacks counts as not found (the case fails).  Cases that
fail against the rules of the day are the point of the corpus: the truth
is never weakened to make them pass.  ``benchmarks/bench_truth.py
--corpus`` prints the same comparison as confusion tables.
"""

import numpy as np
import pytest

import corpus
from traceml import _core

CASES = corpus.corpus()


def test_corpus_is_well_formed():
    assert len(CASES) >= 40
    assert len({c.name for c in CASES}) == len(CASES)
    for c in CASES:
        r = c.records
        assert r.dtype == _core.RECORD_DTYPE, c.name
        assert len(r) > 0, c.name
        assert (r["begin_ns"] <= r["fetch_done_ns"]).all(), c.name
        assert (r["fetch_done_ns"] <= r["end_ns"]).all(), c.name
        # Steps follow each other: each begins after the previous ended.
        assert (r["begin_ns"][1:] >= r["end_ns"][:-1]).all(), c.name
        assert (np.diff(r["epoch"]) >= 0).all(), c.name
        assert (r["source"] == corpus.SOURCE_ID).all(), c.name
        wait = r["fetch_done_ns"] - r["begin_ns"]
        # Physically plausible: at least 5 us, below an hour.
        assert wait.min() >= 5_000 and wait.max() < 3600 * 10**9, c.name
        # The position in the epoch (flags) restarts at 0 with each epoch.
        pos = r["flags"] >> _core.FLAG_POS_SHIFT
        starts = np.r_[True, r["epoch"][1:] != r["epoch"][:-1]]
        assert (pos[starts] == 0).all() and (pos[~starts] > 0).all(), c.name
        if c.delivery is not None:
            rank, worker = c.delivery
            assert rank.dtype == np.int32 and worker.dtype == np.int32, c.name
            assert len(rank) == len(worker) == len(r), c.name
        if c.batches is not None:
            b = c.batches
            assert b.dtype == _core.BATCH_RECORD_DTYPE and c.delivery is not None, c.name
            rank, worker = c.delivery
            # One record per delivered batch, made before it was handed over.
            assert len(b) == len(r) and (b["worker"] == worker).all(), c.name
            assert (b["begin_ns"] <= b["end_ns"]).all(), c.name
            assert (b["end_ns"] <= r["fetch_done_ns"]).all(), c.name
            for w in np.unique(b["worker"]):
                mine = b[b["worker"] == w]
                # A worker makes its batches one at a time, in order.
                assert (mine["seq"] == np.arange(len(mine))).all(), c.name
                assert (mine["begin_ns"][1:] >= mine["end_ns"][:-1]).all(), c.name
        assert corpus.SOURCE_ID in c.sources, c.name
        assert c.truth, c.name
        for path in c.truth:
            assert path.split(".")[0] in (
                "diagnosis", "shape", "stalls", "temporal", "trend",
                "attribution", "headline", "production", "diagnosis_support",
                "shape_support", "wait_parts", "batch_cost"), (c.name, path)


def test_labels_read_missing_keys_as_not_found():
    assert corpus.lookup({}, "trend.label") is corpus.MISSING
    assert corpus.lookup({"temporal": None}, "temporal.label") is None
    assert not corpus.matches(None, corpus.MISSING)
    assert not corpus.matches(corpus.Not("PERIODIC"), corpus.MISSING)
    assert corpus.found_labels({})["headline"] == "(missing)"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_report_finds_the_truth(case):
    report = corpus.replay(case).to_dict()
    wrong = corpus.check(case, report)
    assert not wrong, "\n".join(
        f"{path}: want {want!r}, report says {got!r}" for path, want, got in wrong)


def test_every_size_of_the_eta_table_is_the_simulation():
    from traceml.findings import stall_threshold as st

    got = [st.eta_critical_simulated(n) for n in range(2, st.ETA_NULL_MAX_N + 1)]
    assert got == list(st.ETA_CRITICAL)
