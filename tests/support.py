"""Helpers shared by the test modules: hand-made store records and the
build() over them, the synthetic DataLoader source, and the leak
readings.  Test modules import from here, never from one another;
fixtures live in conftest.py."""

import gc
import math
import sys
import traceback
import tracemalloc

import numpy as np

from traceml import _core, wrapping
from traceml.build import build as build_report

# The sources the hand-made records belong to: build() reads no registry.
SOURCES = {}

MS = 1_000_000
# A source id no test reaches by wrapping (ids count up from 1).
SYNTHETIC = 65000
INFO = {
    "dropped_steps": 0,
    "out_of_memory": False,
    "misuse": {},
    "probe_step_open": False,
}


def build(records, info, source_id, threshold, **kw):
    """report.build over SOURCES (the loader_source fixture registers
    SYNTHETIC there; without it the source is unknown)."""
    return build_report(records, info, source_id, threshold,
                        sources=kw.pop("sources", SOURCES), **kw)


def records(wait_ns, compute_ns, epoch=None, source=SYNTHETIC, t0=10**12):
    """Contiguous steps with the given waits and computes (ns)."""
    wait_ns = np.asarray(wait_ns, dtype=np.int64)
    compute_ns = np.asarray(compute_ns, dtype=np.int64)
    n = len(wait_ns)
    rec = np.zeros(n, dtype=_core.RECORD_DTYPE)
    begin = t0 + np.r_[0, np.cumsum(wait_ns + compute_ns)[:-1]]
    rec["begin_ns"] = begin
    rec["fetch_done_ns"] = begin + wait_ns
    rec["end_ns"] = begin + wait_ns + compute_ns
    rec["epoch"] = 0 if epoch is None else epoch
    rec["source"] = source
    # Position in epoch, as the wrap iterator records it in flags.
    e = rec["epoch"]
    idx = np.arange(n)
    change = np.r_[True, e[1:] != e[:-1]] if n else np.zeros(0, bool)
    pos = idx - np.maximum.accumulate(np.where(change, idx, 0)) if n else idx
    pos = np.minimum(pos, _core.FLAG_POS_MAX)
    rec["flags"] = (pos << _core.FLAG_POS_SHIFT) | (pos == 0) * _core.FLAG_EPOCH_START
    return rec


def lockstep(k, bursts, stall_ms=80, fast_us=50, compute_ms=10, rng=None):
    """Input-bound k-worker loader: one stall then k-1 fast fetches."""
    rng = rng or np.random.default_rng(0)
    wait = []
    for _ in range(bursts):
        wait.append(stall_ms * MS * rng.uniform(0.9, 1.1))
        wait.extend(fast_us * 1000 * rng.uniform(0.5, 2, k - 1))
    n = len(wait)
    return np.array(wait, dtype=np.int64), np.full(n, compute_ms * MS)


def register_loader_source(num_workers, epochs=1):
    """Register SYNTHETIC in SOURCES as a DataLoader source with
    ``num_workers`` and ``epochs`` (the ``loader_source`` fixture of
    conftest.py calls it and drops the source after the test)."""
    facts = {k: None for k in wrapping.LOADER_FIELDS}
    facts["num_workers"] = num_workers
    SOURCES[SYNTHETIC] = wrapping.Source(
        SYNTHETIC, "synthetic", "DataLoader", loader=facts, epochs=epochs,
        epoch_facts={e: {"loader": facts, "worker_pids": None, "start_method": None,
                         "torch_version": None, "usable_cpus": 2}
                     for e in range(epochs)},
    )


# --- leak readings (tests/integration/test_leaks.py, tests/integration/test_longrun.py) ---

OPS = 200       # operations per round
ROUNDS = 4      # measured rounds (after the warm-up)
# Growth allowed between the first and the last measured round, for
# (ROUNDS - 1) * OPS = 600 operations: a leak of one object or block per
# operation exceeds it several times over.  (The readings themselves cost
# about 5 blocks and 150 bytes a round; freelists, dict resizes and
# interning add a few dozen blocks of noise.)
MAX_OBJECTS = 60
MAX_BLOCKS = 150
MAX_BYTES = 16 * 1024


def release_frames(tb) -> None:
    """Clear the frames of the traceback ``tb`` (a loader's error): the
    DataLoader iterator they hold is freed now, and shuts its workers down
    at once.  Left in the exception's reference cycle until a gc pass,
    torch's shutdown waits 5 s a worker (MP_STATUS_CHECK_INTERVAL): the
    cycle's queues are finalized first, their feeder threads closed, so the
    workers never receive the None that ends them (10.2 s for 2 workers in
    plain torch, 2026-12-04; 0.03 s shut down before)."""
    traceback.clear_frames(tb)


def measure(scenario, warmup=2, rounds=ROUNDS, exclude=(), depth=32, exclude_inner=()):
    """[(objects, blocks, traced bytes)] after each measured round.

    With ``exclude`` (filename patterns), blocks and bytes count only the
    traced allocations with none of those files in their traceback: for
    third-party code with caches of its own that fill up slowly (torch).
    ``exclude_inner`` (patterns too) leaves out only the allocations made
    directly in those files, their innermost frame: for a library whose
    C calls keep small blocks (NumPy), where leaving out every trace that
    passes through it would hide what traceml keeps of its results.
    The traceback kept is the innermost ``depth`` frames: torch's caches
    are filled deep inside torch and need 32 (at 12 the DataLoader epochs
    grew 160 blocks under ASan, past MAX_BLOCKS); scipy's and jsonschema's
    are reached in 12, at half the time of 32 (test_reports_leak_nothing:
    61 s against 134 s)."""
    for _ in range(warmup):
        scenario()
    gc.collect()
    readings = []
    exclude_any = bool(exclude or exclude_inner)
    tracemalloc.start(depth if exclude_any else 1)
    try:
        for _ in range(rounds):
            scenario()
            gc.collect()
            if exclude_any:
                objects = len(gc.get_objects())
                snap = tracemalloc.take_snapshot().filter_traces(
                    [tracemalloc.Filter(False, pat, all_frames=True) for pat in exclude]
                    + [tracemalloc.Filter(False, pat) for pat in exclude_inner])
                stats = snap.statistics("filename")
                readings.append((objects, sum(st.count for st in stats),
                                 sum(st.size for st in stats)))
                del snap, stats
            else:
                readings.append((len(gc.get_objects()), sys.getallocatedblocks(),
                                 tracemalloc.get_traced_memory()[0]))
    finally:
        tracemalloc.stop()
    return readings


def assert_no_growth(readings, what, traced_bytes=True):
    """No growth of live objects, allocated blocks and (``traced_bytes``)
    tracemalloc's traced bytes between the first and the last round."""
    first, last = readings[0], readings[-1]
    objects, blocks, traced = (last[i] - first[i] for i in range(3))
    detail = f"{what}: readings (objects, blocks, bytes) per round {readings}"
    assert objects <= MAX_OBJECTS, detail
    assert blocks <= MAX_BLOCKS, detail
    if traced_bytes:
        assert traced <= MAX_BYTES, detail


def ar1_waits(seed: int, n: int, median_ms: float = 1.0, phi: float = 0.8,
              sigma: float = 0.5) -> np.ndarray:
    """Lognormal waits around ``median_ms`` whose logs are an AR(1) with
    coefficient ``phi`` and stationary sd ``sigma`` (ns, int64)."""
    rng = np.random.default_rng(seed)
    z = np.empty(n)
    z[0] = rng.normal(0.0, sigma)
    shocks = rng.normal(0.0, sigma * math.sqrt(1.0 - phi * phi), n)
    for i in range(1, n):
        z[i] = phi * z[i - 1] + shocks[i]
    return (median_ms * 1_000_000 * np.exp(z)).astype(np.int64)


def most_false_alarms(trials: int) -> int:
    """The most claims a rule whose false-alarm rate is TREND_ALPHA makes
    in ``trials`` runs but for a TREND_ALPHA share of the time (binomial):
    6 of 200.  (Measured over 1000 such runs: the test alone 1.4%, the rule
    without a floor 1.1%; these 200 seeds, 5 and 4.)"""
    from scipy.stats import binom

    from traceml.findings import wait_trend

    return int(binom.ppf(1.0 - wait_trend.TREND_ALPHA, trials, wait_trend.TREND_ALPHA))


def one_epoch_temporal(n, at, stall_ns, calm_ns):
    """stall_timing.temporal_of over ``n`` steady fetches of one epoch,
    positions 0..n-1, the fetches ``at`` stalled (waits of ``stall_ns``,
    the rest ``calm_ns``), no period predicted: the answer dict."""
    from traceml.findings import stall_timing

    stalled = np.zeros(n, dtype=bool)
    stalled[at] = True
    wait = np.where(stalled, stall_ns, calm_ns).astype(np.int64)
    tested = np.ones(n, dtype=bool)
    pos = stall_timing.Positions(stalled, np.arange(n), tested, wait)
    return stall_timing.temporal_of(stalled, np.zeros(n, dtype=np.int32), wait, n, False, None,
                                    positions=pos)
