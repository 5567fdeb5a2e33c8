"""Synthetic long runs for the long-run tests and their reference summaries.

``records(kind, n)`` makes n seeded step records (RECORD_DTYPE, step
order) of a named pattern; ``digest(summary)`` reduces a report's
``to_dict()`` to plain JSON where every list longer than LONG items is
replaced by its length and the SHA-256 of its JSON text, so that reference
summaries of 200k-step runs stay small.

The reference holds codes and numbers only: the sentences (WORDS: the
next steps, notes and worker evidence, kept as codes and numbers in
``next_items``, ``note_items`` and ``workers.evidence_items``, and the
rules' sentences beside their codes and numbers) are left out, so a
wording edit does not rewrite it.

``python tests/longrun_cases.py`` writes ``tests/data/longrun_reference.json``:
the digests of ``Recorder.report()`` on every case, computed by the code
checked out at the time.  It was written by main at b656b5f (plus the
``_append_records`` testing hook), the code before the long-run work of
issue 10 (snapshot views, the histogram Otsu split, the single-pass
build), so the test comparing against it shows that none of that changed
a number.  A later change that changes a report on purpose rewrites it
(run this file on the code before that change).  Rewritten since: when the
stalls block gained calm_median_s and stall_median_s and the heavy-tail
sentence and the SLOW_MEDIAN shape rule their new words, and when the
lock-step next step began to suggest num_workers=(4, 3, 2, 1) (every
other value, compared, the same), and when two separate groups of waits
began to be judged against the compute step (the random-stall case keeps
its stalls; its threshold and rule changed), and when the diagnosis gained
its block-bootstrap support (diagnosis_support, added beside the rest),
and when the sentences left it for their codes and numbers, and when the
slow-sample step at num_workers=0 gained ``main`` (its only change).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import numpy as np

LONG = 64
STEPS = 200_000
REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                         "longrun_reference.json")


def _flags(epoch: np.ndarray, wrapped: bool, pos_shift: int, pos_max: int,
           epoch_start: int) -> np.ndarray:
    """Each step's position in its epoch (saturated) as the wrap iterator
    records it; 0 for the probes."""
    if not wrapped:
        return np.zeros(len(epoch), dtype=np.int64)
    n = len(epoch)
    change = np.r_[True, epoch[1:] != epoch[:-1]]
    start = np.maximum.accumulate(np.where(change, np.arange(n), 0))
    pos = np.arange(n) - start
    flags = np.minimum(pos, pos_max) << pos_shift
    flags[pos == 0] |= epoch_start
    return flags


def records(kind: str, n: int = STEPS, seed: int = 0) -> np.ndarray:
    """n records of the pattern ``kind`` (see CASES)."""
    from traceml import _core

    rng = np.random.default_rng(seed)
    source = np.zeros(n, dtype=np.int64)
    epochs = 1
    if kind == "fast":
        wait = np.exp(rng.normal(np.log(4e3), 0.5, n)).astype(np.int64)
        blip = rng.random(n) < 1e-3
        wait[blip] = rng.integers(2_000_000, 10_000_000, int(blip.sum()))
        compute = rng.integers(4_500_000, 5_500_000, n)
    elif kind == "periodic":
        wait = rng.integers(40_000, 60_000, n)
        wait[7::8] = rng.integers(38_000_000, 42_000_000, len(wait[7::8]))
        compute = rng.integers(9_000_000, 11_000_000, n)
        source[:] = 1
        epochs = 10
    elif kind == "random_stalls":
        wait = rng.integers(20_000, 80_000, n)
        hit = rng.random(n) < 0.03
        wait[hit] = rng.integers(30_000_000, 90_000_000, int(hit.sum()))
        compute = rng.integers(8_000_000, 12_000_000, n)
        source[:] = 2
        epochs = 4
    elif kind == "all_slow":
        # Every fetch past the floor, a group of much larger waits on top.
        wait = rng.integers(3_000_000, 5_000_000, n)
        wait[::10] = rng.integers(200_000_000, 220_000_000, len(wait[::10]))
        compute = rng.integers(9_000_000, 11_000_000, n)
        source[:] = 1
        epochs = 3
    elif kind == "rising":
        base = np.linspace(100_000, 6_000_000, n)
        wait = (base * rng.uniform(0.8, 1.2, n)).astype(np.int64)
        compute = rng.integers(9_000_000, 11_000_000, n)
        source[:] = 1
        epochs = 5
    elif kind == "mixed":
        # Two sources interleaved: the report picks the larger (source 1).
        wait = rng.integers(40_000, 60_000, n)
        wait[5::6] = rng.integers(15_000_000, 25_000_000, len(wait[5::6]))
        compute = rng.integers(4_000_000, 6_000_000, n)
        source[:] = 1
        source[rng.random(n) < 0.3] = 0
        epochs = 2
    elif kind == "otsu":
        # Short steps, 2% of fetches 200 ms: the Otsu split sets the line.
        wait = rng.integers(30_000, 90_000, n)
        hit = rng.random(n) < 0.02
        wait[hit] = rng.integers(150_000_000, 250_000_000, int(hit.sum()))
        compute = rng.integers(800_000, 1_200_000, n)
        source[:] = 1
        epochs = 2
    elif kind == "equal":
        wait = np.full(n, 50_000, dtype=np.int64)
        compute = np.full(n, 5_000_000, dtype=np.int64)
    else:
        raise ValueError(kind)
    step = wait + compute
    begin = np.empty(n, dtype=np.int64)
    begin[0] = 1_000_000_000
    np.cumsum(step[:-1], out=begin[1:])
    begin[1:] += begin[0]
    rec = np.zeros(n, dtype=_core.RECORD_DTYPE)
    rec["begin_ns"] = begin
    rec["fetch_done_ns"] = begin + wait
    rec["end_ns"] = begin + step
    rec["source"] = source
    epoch = np.arange(n, dtype=np.int64) * epochs // n
    rec["epoch"] = epoch
    flags = np.zeros(n, dtype=np.int64)
    for s in np.unique(source):
        sel = source == s
        flags[sel] = _flags(epoch[sel], s != 0, _core.FLAG_POS_SHIFT,
                            _core.FLAG_POS_MAX, _core.FLAG_EPOCH_START)
    rec["flags"] = flags
    return rec


# (case name, records kind, report() keyword arguments)
CASES = [
    ("fast", "fast", {}),
    ("periodic", "periodic", {}),
    ("periodic_given", "periodic", {"stall_threshold_s": 0.01}),
    ("random_stalls", "random_stalls", {}),
    ("all_slow", "all_slow", {}),
    ("rising", "rising", {}),
    ("mixed", "mixed", {}),
    ("mixed_probes", "mixed", {"source": "probes"}),
    ("otsu", "otsu", {}),
    ("equal", "equal", {}),
]


# DataLoader-like sources (loader facts, delivery), reduced by build() with
# explicit inputs: no live sampler, so the digests do not depend on the
# process.  (case name, num_workers, stall_every)
LOADER_CASES = [
    ("loader0", 0, 8),
    ("loader4", 4, 4),
]


def loader_inputs(num_workers: int, stall_every: int, n: int = STEPS, seed: int = 0):
    """(records, sources, delivery) of a wrapped DataLoader source (id 1)
    over 4 epochs: waits of 50 us with a 30 ms stall every
    ``stall_every``-th step; with workers, each batch's rank (mostly in
    order, every 50th pair swapped: an overtaking delivery) and worker
    (rank % num_workers; every 1000th unknown)."""
    from traceml.wrapping import Source

    rng = np.random.default_rng(seed)
    rec = records("periodic", n, seed)
    epochs = 4
    epoch = np.arange(n, dtype=np.int64) * epochs // n
    rec["epoch"] = epoch
    rec["flags"] = _flags(epoch, True, *_pos_consts())
    wait = rng.integers(40_000, 60_000, n)
    wait[stall_every - 1::stall_every] = rng.integers(25_000_000, 35_000_000,
                                                      len(wait[stall_every - 1::stall_every]))
    compute = rng.integers(9_000_000, 11_000_000, n)
    begin = np.empty(n, dtype=np.int64)
    begin[0] = 1_000_000_000
    np.cumsum((wait + compute)[:-1], out=begin[1:])
    begin[1:] += begin[0]
    rec["begin_ns"] = begin
    rec["fetch_done_ns"] = begin + wait
    rec["end_ns"] = begin + wait + compute
    facts = {"num_workers": num_workers, "batch_size": 2, "prefetch_factor": 2 if num_workers else None,
             "persistent_workers": False, "pin_memory": False, "in_order": True}
    src = Source(1, "loader", "DataLoader", loader=dict(facts), epochs=epochs)
    src.epoch_facts = {e: {"loader": dict(facts), "worker_pids": list(range(101, 101 + num_workers)),
                           "start_method": "fork" if num_workers else None,
                           "torch_version": "2.13.0", "usable_cpus": 2, "watched": False}
                       for e in range(epochs)}
    delivery = None
    if num_workers:
        start = np.searchsorted(epoch, np.arange(epochs))
        rank = (np.arange(n) - start[epoch]).astype(np.int32)
        swap = np.arange(0, n - 1, 50)
        swap = swap[epoch[swap] == epoch[swap + 1]]
        rank[swap], rank[swap + 1] = rank[swap + 1].copy(), rank[swap].copy()
        worker = (rank % num_workers).astype(np.int32)
        worker[::1000] = -1
        delivery = (rank, worker)
    return rec, {0: Source(0, "probes", "probes"), 1: src}, delivery


def _pos_consts():
    from traceml import _core

    return _core.FLAG_POS_SHIFT, _core.FLAG_POS_MAX, _core.FLAG_EPOCH_START


def loader_report_of(num_workers: int, stall_every: int, n: int = STEPS) -> dict:
    """digest(to_dict()) of build() over loader_inputs(...)."""
    import traceml
    from traceml.build import build

    rec, sources, delivery = loader_inputs(num_workers, stall_every, n)
    info = traceml.Recorder().store_info()
    return digest(build(rec, info, 1, None, sources=sources, delivery=delivery,
                        samples=None, sampler_info=None, stuck_events=[], main_pid=1,
                        batch_bytes=None).to_dict())


# The sentences of a summary, by their path of keys (see the module
# docstring): not part of the reference.
WORDS = (("next",), ("notes",), ("workers", "evidence"), ("diagnosis_rule",), ("shape_rule",),
         ("stalls", "rule"))


def digest(obj, path: tuple = ()):
    """obj with every list longer than LONG replaced by {len, sha256}, and
    the sentences (WORDS) left out."""
    if isinstance(obj, dict):
        return {k: digest(v, path + (k,)) for k, v in obj.items() if path + (k,) not in WORDS}
    if isinstance(obj, (list, tuple)):
        if len(obj) > LONG:
            text = json.dumps(obj, sort_keys=True)
            return {"len": len(obj), "sha256": hashlib.sha256(text.encode()).hexdigest()}
        return [digest(v, path) for v in obj]
    return obj


def report_of(kind: str, kwargs: dict, n: int = STEPS) -> dict:
    """digest(to_dict()) of Recorder.report(**kwargs) over records(kind, n)."""
    import traceml

    rec = traceml.Recorder()
    rec._append_records(records(kind, n))
    return digest(rec.report(**kwargs).to_dict())


def main() -> int:
    out = {name: report_of(kind, kwargs) for name, kind, kwargs in CASES}
    out.update({name: loader_report_of(nw, every) for name, nw, every in LOADER_CASES})
    os.makedirs(os.path.dirname(REFERENCE), exist_ok=True)
    with open(REFERENCE, "w") as f:
        json.dump({"steps": STEPS, "cases": out}, f, indent=1, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
