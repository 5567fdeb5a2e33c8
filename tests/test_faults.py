"""The smaller faults of issue 10: reset() from a signal handler, a sampler
whose buffers cannot be allocated, a worker killed mid-run, worker-PID
changes in the text, and the sources of objects that are gone."""

import json

import numpy as np

import traceml
from traceml.report import build

import corpus


# --- worker-PID changes ------------------------------------------------------------


def _run_with_new_workers_each_epoch(epochs: int, steps: int):
    """A report over ``epochs`` epochs of a 2-worker loader without
    persistent workers: each epoch has workers of its own (PIDs 10000 +
    2e, 10001 + 2e)."""
    rec = corpus.records_of([(np.full(steps, corpus.MS), np.full(steps, 5 * corpus.MS))] * epochs)
    sources = corpus.source_of(2, epochs)
    for e, facts in sources[corpus.SOURCE_ID].epoch_facts.items():
        facts["worker_pids"] = [10000 + 2 * e, 10001 + 2 * e]
    info = {"enabled": True, "period_s": 0.02, "overwritten": 0, "dropped_watch": 0,
            "error": None, "busy_s": 0.0, "run_s": 0.0, "procs": []}
    return build(rec, dict(corpus.INFO), corpus.SOURCE_ID, None, sources=sources,
                 samples=np.zeros(0, dtype=traceml._core.SAMPLE_DTYPE), sampler_info=info)


def test_pid_changes_are_summarised_in_the_text_and_whole_in_to_dict():
    """1,000 epochs, new workers each: one short line with the count, the
    first and the last change; to_dict() keeps all 999."""
    r = _run_with_new_workers_each_epoch(1000, 4)
    lines = [ln for ln in str(r).splitlines() if ln.startswith("worker PIDs changed")]
    assert lines == ["worker PIDs changed at 999 of 999 epoch starts after the first, "
                     "first at step 4 (epoch 1), last at step 3996 (epoch 999) (each one "
                     "in to_dict()['workers']['pid_changes'])"]
    changes = json.loads(json.dumps(r.to_dict()))["workers"]["pid_changes"]
    assert len(changes) == 999
    assert changes[0] == {"step": 4, "epoch": 1, "old": [10000, 10001], "new": [10002, 10003]}
    assert changes[-1] == {"step": 3996, "epoch": 999, "old": [11996, 11997],
                           "new": [11998, 11999]}
    # A few are still listed one by one.
    r = _run_with_new_workers_each_epoch(3, 4)
    lines = [ln for ln in str(r).splitlines() if ln.startswith("worker PIDs changed")]
    assert lines == ["worker PIDs changed at step 4 (epoch 1), step 8 (epoch 2)"]
