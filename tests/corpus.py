"""A labelled corpus of per-step input-wait sequences, for diagnostic truth.

Each case is a loop made by hand: per-step input waits and compute times
(int64 ns) built from a recipe with a fixed NumPy seed, wrapped as the store
would record them (``traceml._core.RECORD_DTYPE``), with the DataLoader
facts and the delivery order (rank, worker) a wrapped loader would carry.
Its ``truth`` says what the report must find, and it comes from how the
sequence was made, never from what any version of the rules says.

Truth keys are dotted paths into ``Report.to_dict()`` (the contract the
rules are being changed to): ``diagnosis``, ``shape``, ``stalls.count``,
``stalls.outliers``, ``temporal`` (None: no stalls), ``temporal.label``,
``temporal.period``, ``trend.label``, ``trend.slope_ms_per_step``,
``attribution.label``, ``attribution.worker``, ``attribution.period``,
``attribution.period_from``, ``attribution.stall_period``,
``attribution.made``, ``headline.label``.  A case
names only the keys it is about.  A value is compared for equality, or is
a :class:`OneOf`, :class:`Not` or :class:`Approx`.  A key the report does
not have (the current rules lack ``trend``, ``attribution``, ``headline``
and ``stalls.outliers``) is :data:`MISSING`, which matches nothing.

The recipes, in the words of the project's "Diagnostic truth" issue:

* healthy: lognormal ~1 ms waits against a 10 ms step with a few 2-10 ms
  scheduling blips, or a 4-worker loader of cheap items (waits of 0.1 ms,
  some 1-4 ms) -- no stall, no period, not INPUT-BOUND;
* input at 20% or 5% of step time exactly -- either label, borderline with
  the other (the diagnosis's block-bootstrap support); four stalls that
  cost about 5% of the step time -- FAST or HEAVY-TAILED, the shape
  borderline with the other;
* a small stall once a round (the cheap loader's 2-3 ms ripple) and two
  groups of sub-step waits (every 3rd-5th fetch 0.7-3 ms against
  0.12-0.3 ms, compute 1.6-9 ms) -- PERIODIC, not INPUT-BOUND; the same
  slow fetches at random steps -- never PERIODIC;
* one isolated 50 ms blip in a healthy loop -- an outlier, not a stall;
* uniformly slow (every fetch waits 15-40 ms) -- UNIFORMLY-SLOW, EVERY-FETCH;
* heavy-tailed periodic: lock-step workers, one stall per round of k
  batches on the round's first batch (worker 0), k = 2, 3, 4, 8; the same
  periods on a plain iterable (no loader facts);
* lock-step pairs: 4 workers finishing two by two, stalls at 1, 3, 1, 3
  -- PERIODIC every 4 counted per burst;
* random stalls, each steady step a stall with probability 0.05, 0.1 or
  0.25 (several seeds; also 24-step runs) -- never PERIODIC;
* bursts of 3-4 back-to-back stalls every 20-30 steps -- PERIODIC at the
  burst period; only 3 bursts (of 4-5 stalls, every 36-40 steps) --
  UNSETTLED, consistent with the burst period; bursts at random onsets --
  never PERIODIC;
* trends: wait rising 1 -> 40 ms over 80 steps, falling 40 -> 1 ms, a ramp
  of 2 + 0.3 ms per step -- RISING / FALLING, not PERIODIC;
* trend noise: waits around 2 ms whose neighbours are alike (log waits an
  AR(1), phi 0.8), 60-200 steps -- no trend;
* a step after epoch 0: epoch 0's waits 4x the later epochs' (5 -> 1 ms, 3
  epochs of 30 steps; 8 -> 2 ms, 4 epochs of 300) -- STEP, not a slope;
* one slow worker: worker k of 4 (or of 3) delivers every k-th batch
  round-robin and only its batches stall -- ONE-WORKER, worker k.  The
  stall falls on a round's first batch (worker 0) under lock-step and on
  worker k != 0 here: which worker delivered the stall is the evidence
  that tells the two apart;
* slow sample every k-th batch, k not a multiple of num_workers, so the
  stalls rotate over the workers -- SLOW-SAMPLE at period k;
* epoch-start dominated: 3 epochs, each a 1.5 s first fetch and fast
  steady steps -- headline EPOCH-START;
* stuck: a fetch that waits 45 s or 120 s in an otherwise healthy loop --
  headline STUCK;
* with the workers' own batch records (:func:`simulated_loader`: an
  in-order DataLoader played out as torch schedules it, so waits, delivery
  and make times come from one schedule): a slow sample every k whose
  every other one prefetch hides (every 5 at 4 workers stalls every 10;
  every 3 at 2 workers every 6; every 7 at 4 every 14) -- SLOW-SAMPLE at
  period k from the make times, the stall cadence still 2k; uniform make
  times and randomly slow batches -- never SLOW-SAMPLE; lock-step and one
  slow worker (3x and 6x) -- their labels kept.

Physically: waits are at least 5 us (a prefetched batch), compute is
5-10 ms a step, the first max(1, num_workers) fetches of each epoch hold
the workers' start-up (150 ms, then prefetched batches).
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

import numpy as np

from traceml import _core, wrapping

MS = 1_000_000  # ns
SOURCE_ID = 1
INFO = {"dropped_steps": 0, "out_of_memory": False, "misuse": {},
        "probe_step_open": False}
STARTUP_MS = 150.0
MIN_WAIT_MS = 0.005


# --- truth values ----------------------------------------------------------


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()


class OneOf(tuple):
    """Truth: the report's value is any of these."""

    def __new__(cls, *values):
        return super().__new__(cls, values)

    def label(self) -> str:
        return "|".join(label_of(v) for v in self)


class Not(tuple):
    """Truth: the report has the key, with none of these values."""

    def __new__(cls, *values):
        return super().__new__(cls, values)

    def label(self) -> str:
        return "not " + "|".join(label_of(v) for v in self)


@dataclass(frozen=True)
class Approx:
    """Truth: a number within ``rel`` of ``value``."""

    value: float
    rel: float = 0.25

    def label(self) -> str:
        return f"{self.value:.3g}±{self.rel:.0%}"


def matches(want: Any, got: Any) -> bool:
    """Whether the report's value ``got`` satisfies the truth ``want``."""
    if got is MISSING:
        return False
    if isinstance(want, OneOf):
        return any(matches(w, got) for w in want)
    if isinstance(want, Not):
        return not any(matches(w, got) for w in want)
    if isinstance(want, Approx):
        return (isinstance(got, (int, float)) and not isinstance(got, bool)
                and math.isfinite(got) and abs(got - want.value) <= want.rel * abs(want.value))
    if want is None or got is None or isinstance(want, bool) or isinstance(got, bool):
        return want is got
    return want == got


def lookup(report: dict, path: str) -> Any:
    """The value at a dotted path of ``Report.to_dict()``, read defensively:
    :data:`MISSING` where a key is absent, None below a None (``temporal``
    is None when there are no stalls, so its label is None too)."""
    node: Any = report
    for part in path.split("."):
        if node is None:
            return None
        if not isinstance(node, dict) or part not in node:
            return MISSING
        node = node[part]
    return node


# --- the confusion dimensions ---------------------------------------------
# Each report is normalised to one found label per dimension; each case's
# truth to one true label for the dimensions it names.

DIMENSIONS = ("stalls", "outliers", "diagnosis", "wait part", "shape", "temporal", "trend",
              "attribution", "headline")


def label_of(v: Any) -> str:
    if v is MISSING:
        return "(missing)"
    if v is None:
        return "none"
    if isinstance(v, (OneOf, Not, Approx)):
        return v.label()
    if isinstance(v, dict) and "label" in v:  # a whole temporal, trend, ...
        return _joined(v["label"], v.get("period", v.get("worker")))
    return str(v)


def _joined(label: Any, detail: Any) -> str:
    if isinstance(label, OneOf) or isinstance(detail, OneOf):
        # Alternatives of either: every pairing, as "a|b" alternatives.
        labels = label if isinstance(label, OneOf) else (label,)
        details = detail if isinstance(detail, OneOf) else (detail,)
        return "|".join(dict.fromkeys(_joined(a, d) for a in labels for d in details))
    if label is MISSING or label is None or detail is None or detail is MISSING:
        return label_of(label)
    return f"{label}/{detail}"


def found_labels(report: dict) -> dict:
    """Per dimension, the label the report gives (``(missing)`` where the
    key is absent): stall-ness, outliers, diagnosis, the largest measured
    part of the wait, shape, temporal label
    (/period), trend label, attribution label (/worker), headline label."""
    count = lookup(report, "stalls.count")
    return {
        "stalls": (label_of(count) if not isinstance(count, int)
                   else ("stalls" if count > 0 else "no stalls")),
        "outliers": label_of(lookup(report, "stalls.outliers")),
        "diagnosis": label_of(lookup(report, "diagnosis")),
        "wait part": label_of(lookup(report, "wait_parts.largest.part")),
        "shape": label_of(lookup(report, "shape")),
        "temporal": _joined(lookup(report, "temporal.label"),
                            lookup(report, "temporal.period")),
        "trend": label_of(lookup(report, "trend.label")),
        "attribution": _joined(lookup(report, "attribution.label"),
                               lookup(report, "attribution.worker")),
        "headline": label_of(lookup(report, "headline.label")),
    }


def true_labels(truth: dict) -> dict:
    """Per dimension the case names, its true label (as :func:`found_labels`
    spells it)."""
    out = {}
    if "stalls.count" in truth:
        c = truth["stalls.count"]
        out["stalls"] = "stalls" if c > 0 else "no stalls"
    if "stalls.outliers" in truth:
        out["outliers"] = label_of(truth["stalls.outliers"])
    for dim in ("diagnosis", "shape"):
        if dim in truth:
            out[dim] = label_of(truth[dim])
    if "wait_parts.largest.part" in truth:
        out["wait part"] = label_of(truth["wait_parts.largest.part"])
    if "temporal" in truth:
        out["temporal"] = label_of(truth["temporal"])
    elif "temporal.label" in truth:
        out["temporal"] = _joined(truth["temporal.label"], truth.get("temporal.period"))
    if "trend.label" in truth:
        out["trend"] = label_of(truth["trend.label"])
    if "attribution.label" in truth:
        out["attribution"] = _joined(truth["attribution.label"],
                                     truth.get("attribution.worker"))
    if "headline.label" in truth:
        out["headline"] = label_of(truth["headline.label"])
    return out


def confusion(pairs) -> dict:
    """{dimension: {(true, found): count}} over (true_labels, found_labels)
    pairs."""
    table: dict = {}
    for true, found in pairs:
        for dim, t in true.items():
            cell = table.setdefault(dim, {})
            key = (t, found.get(dim, "(missing)"))
            cell[key] = cell.get(key, 0) + 1
    return table


def format_confusion(table: dict) -> str:
    """The confusion tables as text: one block per dimension, a row per
    true label, a column per found label."""
    lines = []
    for dim in DIMENSIONS:
        if dim not in table:
            continue
        cells = table[dim]
        rows = sorted({t for t, _ in cells})
        cols = sorted({f for _, f in cells})
        w0 = max(len("true \\ found"), *(len(r) for r in rows))
        widths = [max(len(c), 3) for c in cols]
        right = sum(n for (t, f), n in cells.items() if _agrees(t, f))
        total = sum(cells.values())
        lines.append(f"{dim}: {right}/{total} right")
        lines.append("  " + "true \\ found".ljust(w0) + "  "
                     + "  ".join(c.rjust(w) for c, w in zip(cols, widths)))
        for r in rows:
            lines.append(("  " + r.ljust(w0) + "  " + "  ".join(
                str(cells.get((r, c), "")).rjust(w) for c, w in zip(cols, widths))).rstrip())
        lines.append("")
    return "\n".join(lines)


def _agrees(true: str, found: str) -> bool:
    """Whether a found label satisfies a true label as spelled by
    :func:`true_labels` (alternatives "a|b", negations "not a|b")."""
    if found == "(missing)":
        return False
    if true.startswith("not "):
        return found not in true[4:].split("|")
    return found in true.split("|")


# --- cases --------------------------------------------------------------------


@dataclass
class Case:
    """One labelled loop: records as the store holds them, delivery
    (rank, worker) parallel to them or None, the sources build() reads, and
    the truth (dotted to_dict() path -> expected value)."""

    name: str
    records: np.ndarray
    delivery: Optional[tuple]
    sources: dict
    truth: dict
    samples: Optional[np.ndarray] = None       # sampler readings, or none
    sampler_info: Optional[dict] = None
    batches: Optional[np.ndarray] = None       # worker batch records, or none
    items: Optional[np.ndarray] = None         # their item records (samples, collate), or none
    clocks: Optional[tuple] = None             # step clocks (snapshot_fetch_clocks), or none
    sampler_items: Optional[np.ndarray] = None  # the sampler's calls in the main process, or none
    stall_threshold_s: Optional[float] = None  # the report's given threshold, or the rules'


def records_of(epochs) -> np.ndarray:
    """Store records for contiguous steps: ``epochs`` is a list of
    (wait_ns, compute_ns) array pairs, one per epoch, epoch numbers 0, 1, ...
    and each step's position in its epoch in the flags."""
    parts = []
    t = 10**12
    for e, (wait, compute) in enumerate(epochs):
        wait = np.asarray(wait, dtype=np.int64)
        compute = np.asarray(compute, dtype=np.int64)
        rec = np.zeros(len(wait), dtype=_core.RECORD_DTYPE)
        step = wait + compute
        rec["begin_ns"] = t + np.cumsum(step) - step
        rec["fetch_done_ns"] = rec["begin_ns"] + wait
        rec["end_ns"] = rec["fetch_done_ns"] + compute
        rec["epoch"] = e
        rec["source"] = SOURCE_ID
        pos = np.minimum(np.arange(len(wait)), _core.FLAG_POS_MAX)
        rec["flags"] = (pos << _core.FLAG_POS_SHIFT) | np.where(
            pos == 0, _core.FLAG_EPOCH_START, 0)
        t = int(rec["end_ns"][-1]) + 2 * MS if len(wait) else t
        parts.append(rec)
    return np.concatenate(parts)


def source_of(num_workers: Optional[int], epochs: int) -> dict:
    """{SOURCE_ID: Source}: a DataLoader with ``num_workers`` (batch 64,
    prefetch 2, in order) on a 2-CPU host, or a plain iterable (no loader
    facts) when ``num_workers`` is None."""
    if num_workers is None:
        src = wrapping.Source(SOURCE_ID, "corpus", "list", loader=None, epochs=epochs)
        return {SOURCE_ID: src}
    facts = {k: None for k in wrapping.LOADER_FIELDS}
    facts.update(num_workers=num_workers, batch_size=64,
                 prefetch_factor=2 if num_workers else None,
                 persistent_workers=False, pin_memory=False, in_order=True, shuffle=False)
    src = wrapping.Source(
        SOURCE_ID, "corpus", "DataLoader", loader=facts, epochs=epochs,
        epoch_facts={e: {"loader": facts, "worker_pids": None, "start_method": "fork",
                         "torch_version": None, "usable_cpus": 2, "watched": False}
                     for e in range(epochs)},
    )
    return {SOURCE_ID: src}


def startup(num_workers: Optional[int]) -> int:
    """Leading fetches of an epoch that hold worker start-up."""
    return max(1, num_workers or 0)


def make(name: str, steady_wait_ms, truth: dict, *, num_workers: Optional[int] = 0,
         compute_ms=10.0, epochs: int = 1, first_ms=STARTUP_MS) -> Case:
    """A case whose every epoch is the start-up fetches (``first_ms``, then
    prefetched batches) followed by ``steady_wait_ms`` (ms per steady step;
    a list of arrays gives each epoch its own), ``compute_ms`` a step
    (scalar or per steady step).  Delivery is round-robin: rank = position
    in the epoch, worker = rank % num_workers (-1 without workers).
    ``first_ms``: the first fetch's wait, or a list of one per epoch."""
    k = startup(num_workers)
    per_epoch = steady_wait_ms if isinstance(steady_wait_ms, list) else [steady_wait_ms] * epochs
    firsts = first_ms if isinstance(first_ms, list) else [first_ms] * len(per_epoch)
    pairs, ranks, workers = [], [], []
    for steady, first in zip(per_epoch, firsts, strict=True):
        steady = np.asarray(steady, dtype=np.float64)
        wait_ms = np.r_[first, np.full(k - 1, 0.05), steady]
        comp_ms = np.r_[np.full(k, 10.0), np.broadcast_to(compute_ms, steady.shape)]
        wait_ms = np.maximum(wait_ms, MIN_WAIT_MS)
        pairs.append((np.round(wait_ms * MS), np.round(comp_ms * MS)))
        rank = np.arange(len(wait_ms), dtype=np.int32)
        ranks.append(rank)
        workers.append(rank % num_workers if num_workers else np.full_like(rank, -1))
    delivery = None
    if num_workers is not None:
        delivery = (np.concatenate(ranks).astype(np.int32),
                    np.concatenate(workers).astype(np.int32))
    return Case(name, records_of(pairs), delivery,
                source_of(num_workers, len(per_epoch)), truth)


MAIN_PID = 4000  # made-up PIDs of the readings: main, then worker w at MAIN_PID + 1 + w
TICKS_PER_S = 100  # /proc clock ticks (sysconf(_SC_CLK_TCK) on Linux)


def with_readings(case: Case, busy: dict, period_s: float = 0.02,
                  runq: Optional[dict] = None, others_cores: Optional[float] = None) -> Case:
    """``case`` with sampler readings over its run: worker w's process uses
    ``busy[w]`` cores (utime ticks at TICKS_PER_S), the main process a
    tenth of one; ``runq`` (role -> seconds in the run queue per second,
    -1 the main process; default none) the time each waits for a CPU;
    ``others_cores`` (None: no host readings) what other programs ran,
    the host's readings (pid 0) then counting the job's cores and theirs;
    the epochs' facts name the PIDs and say the sampler watched them."""
    runq = runq or {}
    rec = case.records
    t = np.arange(int(rec["begin_ns"].min()) - 2 * int(period_s * 1e9),
                  int(rec["end_ns"].max()) + 2 * int(period_s * 1e9), int(period_s * 1e9))
    roles = [-1] + sorted(busy)
    rows = np.zeros(len(t) * len(roles), dtype=_core.SAMPLE_DTYPE)
    for i, role in enumerate(roles):
        part = rows[i::len(roles)]
        cores = 0.1 if role < 0 else busy[role]
        part["t_ns"] = t
        part["pid"] = MAIN_PID + 1 + role
        part["role"] = role
        part["utime_ticks"] = np.floor((t - t[0]) * 1e-9 * TICKS_PER_S * cores)
        part["state"] = ord("R")
        part["read_bytes"] = 0
        part["majflt"] = 0
        part["cpu_ns"] = (t - t[0]) * cores
        part["runq_ns"] = (t - t[0]) * runq.get(role, 0.0)
    if others_cores is not None:
        host = np.zeros(len(t), dtype=_core.SAMPLE_DTYPE)
        host["t_ns"], host["pid"], host["role"] = t, 0, _core.HOST_ROLE
        cores = 0.1 + sum(busy.values()) + others_cores
        host["utime_ticks"] = np.floor((t - t[0]) * 1e-9 * TICKS_PER_S * cores)
        host["cpu_ns"] = (t - t[0]) * cores
        host["runq_ns"] = host["read_bytes"] = host["majflt"] = -1
        rows = np.r_[rows, host]
    rows = rows[np.argsort(rows["t_ns"], kind="stable")]
    pids = [MAIN_PID + 1 + w for w in sorted(busy)]
    for src in case.sources.values():
        for facts in src.epoch_facts.values():
            facts.update(worker_pids=pids, watched=True)
    info = {"enabled": True, "period_s": period_s, "overwritten": 0, "dropped_watch": 0,
            "error": None, "busy_s": 0.0, "run_s": 0.0,
            "procs": [{"pid": MAIN_PID, "role": -1, "exited_ns": 0, "errors": {}}]
            + [{"pid": p, "role": w, "exited_ns": 0, "errors": {}}
               for w, p in zip(sorted(busy), pids)]}
    return dataclasses.replace(case, samples=rows, sampler_info=info)


def _fast(rng, n, median_ms=0.05, sigma=0.5):
    """Prefetched batches: waits of tens of microseconds."""
    return rng.lognormal(math.log(median_ms), sigma, n)


def _rank_of_steady(n: int, num_workers: Optional[int]) -> np.ndarray:
    """The delivery rank of each of ``n`` steady steps (after start-up)."""
    return startup(num_workers) + np.arange(n)


# --- recipes ------------------------------------------------------------------

HEALTHY = {"stalls.count": 0, "shape": "FAST", "temporal": None,
           "diagnosis": Not("INPUT-BOUND")}


def healthy_jitter(seed: int, n: int = 80, num_workers: int = 2) -> Case:
    """In-memory loader that keeps up: lognormal waits around 1 ms against
    a 10 ms step, and 3-4 scheduling blips of 2-10 ms."""
    rng = np.random.default_rng(seed)
    wait = rng.lognormal(math.log(1.0), 0.35, n)
    blips = rng.choice(n, size=rng.integers(3, 5), replace=False)
    wait[blips] = rng.uniform(2.0, 10.0, len(blips))
    compute = rng.uniform(9.5, 10.5, n)
    return make(f"healthy-jitter-s{seed}", wait, dict(HEALTHY),
                num_workers=num_workers, compute_ms=compute)


def healthy_cheap_workers(seed: int, n: int = 80, ripple: bool = False) -> Case:
    """4 workers of cheap items on 2 cores: mostly 0.1 ms waits, some of
    1-4 ms while a worker holds a core, a few blips to 8 ms; with
    ``ripple``, a 2-3 ms wait on each round's first batch: a small stall
    once a round (20-30% of the compute step, past the two-group rule's
    20%), so PERIODIC every 4, never INPUT-BOUND."""
    rng = np.random.default_rng(100 + seed)
    wait = _fast(rng, n, 0.1, 0.6)
    busy = rng.random(n) < 0.25
    wait[busy] = rng.uniform(1.0, 4.0, busy.sum())
    blips = rng.choice(n, size=3, replace=False)
    wait[blips] = rng.uniform(4.0, 8.0, 3)
    if ripple:
        on_round = _rank_of_steady(n, 4) % 4 == 0
        wait[on_round] = rng.uniform(2.0, 3.0, on_round.sum())
    if ripple:
        name = f"ripple-cheap-4w-s{seed}"
        truth = {"temporal.label": "PERIODIC", "temporal.period": 4,
                 "diagnosis": Not("INPUT-BOUND")}
    else:
        name, truth = f"healthy-cheap-4w-s{seed}", dict(HEALTHY)
    return make(name, wait, truth, num_workers=4, compute_ms=rng.uniform(9.0, 11.0, n))


class _Ended(NamedTuple):
    """A worker process as torch keeps it (pid, exit code; None while it
    runs); the pid is no child of this process, so its code is read here."""

    pid: int
    exitcode: Optional[int]


def worker_exited(seed: int, exitcode: int, n: int = 40) -> Case:
    """A healthy loader (2 workers, cheap items, 10 ms steps) whose worker 1
    died with ``exitcode`` (< 0: minus a signal) before the loop's last
    step, which made the DataLoader raise: whatever the steady state reads,
    the run ended there, and that is the bottom line."""
    rng = np.random.default_rng(3100 + seed)
    case = with_readings(
        make(f"worker-exited-{exitcode}-s{seed}", _fast(rng, n, 0.1, 0.5),
             {"headline.label": "WORKER-EXITED", "headline.exited.worker": 1,
              "headline.exited.exitcode": exitcode},
             num_workers=2, compute_ms=rng.uniform(9.0, 11.0, n)), {0: 0.05, 1: 0.05})
    facts = case.sources[SOURCE_ID].epoch_facts[0]
    pids = facts["worker_pids"]
    facts["worker_exits"] = wrapping.WorkerExits([_Ended(pids[0], None),
                                                  _Ended(pids[1], exitcode)])
    return case


def raised_in_a_worker(seed: int, worker: Optional[int], n: int = 40) -> Case:
    """A healthy loader (2 workers, cheap items, 10 ms steps) whose fetch
    after the last recorded step raised (in ``worker``, re-raised by the
    DataLoader, or in the main process where ``worker`` is None), as the
    wrap iterator's on_raise keeps it: whatever the steady state reads, the
    loop ended there, and that is the bottom line."""
    rng = np.random.default_rng(3200 + seed)
    case = make(f"raised-{'main' if worker is None else f'worker{worker}'}-s{seed}",
                _fast(rng, n, 0.1, 0.5),
                {"headline.label": "RAISED", "headline.raised.worker": worker,
                 "headline.raised.step": n + 2},
                num_workers=2, compute_ms=rng.uniform(9.0, 11.0, n))
    # n steady steps after startup(2) = 2 start-up ones: fetch n + 2 raised.
    case.sources[SOURCE_ID].epoch_facts[0]["raised"] = {
        "type": "ValueError", "message": "ValueError: bad sample", "worker": worker,
        "fetch": n + 2}
    return case


def given_threshold_over_stalls(seed: int, n: int = 90) -> Case:
    """Every 3rd batch 60 ms slower at num_workers=0, reported with the
    "> 5 s" convention (stall_threshold_s=5): no fetch passes it, yet a
    third of the fetches hold most of the wait, which is no cost spread
    over every fetch (helper 35B: "spread over every fetch (median 2.41
    ms)" beside a mean of 22.2 ms, 6 of 6)."""
    rng = np.random.default_rng(3400 + seed)
    wait = rng.uniform(2.0, 2.8, n)
    wait[::3] += rng.uniform(58.0, 62.0, len(wait[::3]))
    case = make(f"given-5s-over-stalls-s{seed}", wait,
                {"stalls.count": 0, "shape": "FAST", "diagnosis": "INPUT-BOUND"},
                num_workers=0, compute_ms=rng.uniform(9.5, 10.5, n))
    return dataclasses.replace(case, stall_threshold_s=5.0)


def raised_and_went_on(seed: int, n: int = 40) -> Case:
    """The same healthy loader whose fetches 9 and 21 raised, each caught
    by the loop, which went on to its end: not the bottom line, a note
    (their batches are not in the steps)."""
    rng = np.random.default_rng(3300 + seed)
    case = make(f"raised-went-on-s{seed}", _fast(rng, n, 0.1, 0.5),
                {"headline.label": Not("RAISED"), "headline.raised.ended": False,
                 "headline.raised.count": 2, "stalls.count": 0},
                num_workers=2, compute_ms=rng.uniform(9.0, 11.0, n))
    facts = case.sources[SOURCE_ID].epoch_facts[0]
    first = {"type": "KeyError", "message": "'frame 18'", "worker": None, "fetch": 9}
    facts.update(raised={**first, "message": "'frame 42'", "fetch": 21}, raised_first=first,
                 raised_count=2)
    return case


def one_long_fetch(seed: int, hang_ms: float, num_workers: int = 0, n: int = 80) -> Case:
    """Fetches of ~2 ms under 5 ms steps, and one that hangs ``hang_ms``
    (a sleep, a lock, a read that stalls), far short of the stuck watch's
    30 s yet most of the run's wall time: that fetch is the bottom line."""
    rng = np.random.default_rng(3200 + seed)
    wait = _fast(rng, n, 2.0, 0.1)
    wait[n // 2] = hang_ms
    return make(f"one-long-fetch-{hang_ms:g}ms-{num_workers}w-s{seed}", wait,
                {"headline.label": "STUCK", "headline.code": "one_fetch"},
                num_workers=num_workers, compute_ms=5.0)


def on_the_line(seed: int, line: float, n: int = 60, num_workers: int = 2) -> Case:
    """Lognormal waits (sigma 0.8) scaled so that input is ``line`` of step
    time exactly (20%: INPUT-BOUND against BALANCED; 5%: BALANCED against
    COMPUTE-BOUND): either label is as likely from another run of the same
    loop, so the diagnosis is borderline, with the other reading."""
    rng = np.random.default_rng(1400 + seed)
    wait = rng.lognormal(0.0, 0.8, n)
    compute = np.full(n, 4.0)
    wait *= line * compute.sum() / ((1 - line) * wait.sum())
    pair = ("INPUT-BOUND", "BALANCED") if line > 0.1 else ("BALANCED", "COMPUTE-BOUND")
    truth = {"diagnosis": OneOf(*pair), "diagnosis_support.other": OneOf(*pair)}
    return make(f"on-the-line-{line:g}-s{seed}", wait, truth, num_workers=num_workers,
                compute_ms=compute)


def at_the_cost_line(seed: int, n: int = 60) -> Case:
    """Four 8 ms waits among 0.1 ms fetches of a 10 ms step: together they
    cost about 5% of the step time, the line between outliers (FAST) and
    stalls (HEAVY-TAILED), so another run of the loop may read either:
    the shape is borderline, with the other reading."""
    rng = np.random.default_rng(1500 + seed)
    wait = _fast(rng, n, 0.1)
    wait[rng.choice(n, 4, replace=False)] = 8.0
    pair = ("FAST", "HEAVY-TAILED")
    truth = {"shape": OneOf(*pair), "shape_support.other": OneOf(*pair)}
    return make(f"at-the-cost-line-s{seed}", wait, truth, num_workers=2, compute_ms=10.0)


def small_two_groups(seed: int, every: int, slow_ms: float, fast_ms: float,
                     compute_ms: float, n: int = 100, periodic: bool = True) -> Case:
    """A probe loop (no loader facts) whose waits form two groups: every
    ``every``-th fetch ``slow_ms``, the rest ``fast_ms`` (5% jitter),
    against ``compute_ms`` of compute: a slow group under 1 ms or under
    half a step is still a set of stalls when it delays its step by 20% of
    the compute and costs 5% of the step time.  ``periodic=False``: the
    same number of slow fetches at random steps (the control)."""
    rng = np.random.default_rng(1300 + seed)
    wait = fast_ms * rng.uniform(0.95, 1.05, n)
    if periodic:
        hit = (np.arange(n) + 1) % every == 0
    else:
        hit = np.zeros(n, dtype=bool)
        hit[rng.choice(n, size=n // every, replace=False)] = True
    wait[hit] = slow_ms * rng.uniform(0.95, 1.05, hit.sum())
    truth = {"stalls.count": int(hit.sum()), "shape": "HEAVY-TAILED"}
    if periodic:
        truth.update({"temporal.label": "PERIODIC", "temporal.period": every})
    else:
        truth["temporal.label"] = Not("PERIODIC")
    kind = "every" if periodic else "random"
    return make(f"two-groups-{kind}{every}-{slow_ms:g}of{fast_ms:g}ms-s{seed}", wait, truth,
                num_workers=None, compute_ms=compute_ms * rng.uniform(0.98, 1.02, n),
                first_ms=fast_ms)


def isolated_blip(seed: int, at: int, num_workers: int = 2, n: int = 80) -> Case:
    """A healthy loop with one 50 ms blip at steady step ``at``."""
    rng = np.random.default_rng(200 + seed)
    wait = rng.lognormal(math.log(1.0), 0.3, n)
    wait[at] = 50.0
    truth = {"stalls.count": 0, "stalls.outliers": 1, "shape": "FAST", "temporal": None}
    return make(f"isolated-blip-at{at}-{num_workers}w", wait, truth,
                num_workers=num_workers, compute_ms=rng.uniform(9.5, 10.5, n))


def uniformly_slow(seed: int, wait_ms: float, num_workers: int, n: int = 60) -> Case:
    """Every fetch waits about ``wait_ms`` (the loader cannot keep up with
    any batch): every fetch is a stall."""
    rng = np.random.default_rng(300 + seed)
    wait = wait_ms * rng.lognormal(0.0, 0.12, n)
    truth = {"shape": "UNIFORMLY-SLOW", "diagnosis": "INPUT-BOUND",
             "temporal.label": "EVERY-FETCH"}
    return make(f"uniformly-slow-{wait_ms:g}ms-{num_workers}w", wait, truth,
                num_workers=num_workers, compute_ms=10.0)


def uneven_slow_pairs(seed: int, n: int = 58) -> Case:
    """2 workers that cannot keep up, drifting in and out of phase (a user
    trial: 80 ms of CPU a batch against an 11 ms step on 2 shared cores):
    every other fetch waits 100-250 ms, and of the fetches between, half
    find their batch made and half wait 25-95 ms for it.  The median fetch
    is slow, so not "mostly fast input": UNIFORMLY-SLOW."""
    rng = np.random.default_rng(350 + seed)
    wait = np.empty(n)
    wait[0::2] = rng.uniform(100.0, 250.0, len(wait[0::2]))
    between = np.where(rng.random(len(wait[1::2])) < 0.5,
                       _fast(rng, len(wait[1::2])), rng.uniform(25.0, 95.0, len(wait[1::2])))
    wait[1::2] = between
    truth = {"shape": "UNIFORMLY-SLOW", "diagnosis": "INPUT-BOUND"}
    return make(f"uneven-slow-pairs-2w-s{seed}", wait, truth, num_workers=2,
                compute_ms=rng.uniform(10.0, 12.0, n))


def lockstep(seed: int, k: int, rounds: int = 12, stall_ms: float = 80.0,
             loader: bool = True) -> Case:
    """k workers in lock-step: a stall on each round's first batch (worker
    0's), the other k-1 batches prefetched."""
    rng = np.random.default_rng(400 + 10 * k + seed)
    num_workers = k if loader else None
    n = rounds * k
    wait = _fast(rng, n)
    on_round = _rank_of_steady(n, num_workers) % k == 0
    wait[on_round] = stall_ms * rng.uniform(0.85, 1.15, on_round.sum())
    truth = {"stalls.count": int(on_round.sum()), "shape": "HEAVY-TAILED",
             "temporal.label": "PERIODIC", "temporal.period": k}
    if loader:
        truth["attribution.label"] = "LOCK-STEP"
        name = f"lockstep-{k}w-s{seed}"
    else:
        name = f"periodic-{k}-iterable-s{seed}"
    return make(name, wait, truth, num_workers=num_workers)


def _out_of_order(case: Case, name: str, swaps) -> Case:
    """``case`` from a loader built with in_order=False, the deliveries at
    each position a of ``swaps`` and a + 1 exchanged (the later batch
    delivered first: an overtaking)."""
    rank, worker = (a.copy() for a in case.delivery)
    for a in swaps:
        if a + 1 < len(rank):
            rank[[a, a + 1]] = rank[[a + 1, a]]
            worker[[a, a + 1]] = worker[[a + 1, a]]
    src = case.sources[SOURCE_ID]
    facts = {**src.loader, "in_order": False}
    sources = {SOURCE_ID: dataclasses.replace(
        src, loader=facts,
        epoch_facts={e: {**f, "loader": facts} for e, f in src.epoch_facts.items()})}
    return dataclasses.replace(case, name=name, delivery=(rank, worker), sources=sources)


def lockstep_out_of_order(seed: int, k: int = 4, rounds: int = 12,
                          stall_ms: float = 80.0) -> Case:
    """The seed's in_order=False arrow: k workers in lock-step, the loader
    built with in_order=False, so within some rounds a later batch is
    delivered before an earlier one (a round's 2nd and 3rd batches in
    every third round), yet each round's first delivery still stalls: the
    cadence survives the overtaking (the workers' round, not one slow
    sample blocking the line)."""
    start = startup(k)
    return _out_of_order(lockstep(seed, k, rounds, stall_ms),
                         f"lockstep-out-of-order-{k}w-s{seed}",
                         [start + m * k + 1 for m in range(0, rounds, 3)])


def overtaken_slow_samples(seed: int, rate: float = 0.08, n: int = 100,
                           overtake: bool = True) -> Case:
    """2 workers, in_order=False, slow samples at random ranks (60-100 ms):
    the next batch, the other worker's, is delivered first each time (an
    overtaking), and the stalls keep no period: single slow samples
    holding batches back.  ``overtake`` False: no delivery overtakes (both
    workers held at once: the stalls are not single slow batches)."""
    rng = np.random.default_rng(2200 + seed)
    wait = _fast(rng, n, 0.1)
    hit = rng.random(n) < rate
    hit[-1] = False
    wait[hit] = rng.uniform(60.0, 100.0, hit.sum())
    truth = {"stalls.count": int(hit.sum()),
             "temporal.label": OneOf("IRREGULAR", "TOO-FEW", "UNSETTLED")}
    name = "overtaken-slow-samples" if overtake else "out-of-order-none-overtaken"
    case = make(f"{name}-2w-s{seed}", wait, truth, num_workers=2)
    return _out_of_order(case, case.name,
                         startup(2) + np.flatnonzero(hit) if overtake else [])


def too_few_steps(seed: int, steady: int = 5, num_workers: int = 2) -> Case:
    """A recording stopped after ``steady`` steady steps, every one waiting
    30 ms against 10 ms of compute: INPUT-BOUND is measured, but the shape
    and its next step need MIN_STEADY_STEPS."""
    rng = np.random.default_rng(2100 + seed)
    wait = 30.0 * rng.uniform(0.95, 1.05, steady)
    return make(f"too-few-steps-{steady}-s{seed}", wait,
                {"diagnosis": "INPUT-BOUND"},
                num_workers=num_workers)


def lockstep_pairs(seed: int, rounds: int = 14) -> Case:
    """4 workers finishing two by two: stalls on ranks 4m and 4m+1 (gaps
    1, 3, 1, 3), one burst per round."""
    rng = np.random.default_rng(500 + seed)
    n = rounds * 4
    wait = _fast(rng, n)
    phase = _rank_of_steady(n, 4) % 4
    wait[phase == 0] = rng.uniform(60.0, 80.0, (phase == 0).sum())
    wait[phase == 1] = rng.uniform(35.0, 50.0, (phase == 1).sum())
    truth = {"stalls.count": int((phase <= 1).sum()), "temporal.label": "PERIODIC",
             "temporal.period": 4, "attribution.label": "LOCK-STEP"}
    return make(f"lockstep-pairs-4w-s{seed}", wait, truth, num_workers=4)


def random_stalls(seed: int, rate: float, n: int = 100) -> Case:
    """Each steady step independently a 60-100 ms stall with probability
    ``rate``: no period by construction."""
    rng = np.random.default_rng(600 + seed)
    wait = _fast(rng, n, 0.1)
    hit = rng.random(n) < rate
    assert hit.sum() >= 3, (seed, rate, n)  # a recipe with too few stalls
    wait[hit] = rng.uniform(60.0, 100.0, hit.sum())
    # No period by construction.  A short run may also fit one by chance:
    # "not yet" (UNSETTLED) is then true too; IRREGULAR is the answer a
    # run of 100 steps has the evidence for.
    labels = ("IRREGULAR", "TOO-FEW") if n >= 100 else ("IRREGULAR", "TOO-FEW", "UNSETTLED")
    truth = {"stalls.count": int(hit.sum()), "temporal.label": OneOf(*labels)}
    return make(f"random-p{rate:g}-n{n}-s{seed}", wait, truth, num_workers=0)


def bursts(seed: int, length: int, period: int, n_bursts: int = 5,
           offset: int = 10, at_random: bool = False) -> Case:
    """``length`` back-to-back 40 ms stalls every ``period`` steps
    (num_workers=0: consecutive slow items).  With 3 bursts (2 gaps) the
    answer is "not yet": consistent with a burst every ``period`` steps,
    never "no regular period".  ``at_random``: the same bursts at random
    onsets (the control), never PERIODIC."""
    rng = np.random.default_rng(700 + seed)
    n = offset + period * n_bursts
    wait = _fast(rng, n, 0.1)
    if at_random:
        starts = np.sort(rng.choice(np.arange(offset, n - length, length + 1), n_bursts,
                                    replace=False))
        hit = np.zeros(n, dtype=bool)
        for a in starts:
            hit[a:a + length] = True
    else:
        idx = np.arange(n) - offset
        hit = (idx >= 0) & (idx % period < length)
    wait[hit] = 40.0 * rng.uniform(0.9, 1.1, hit.sum())
    truth = {"stalls.count": int(hit.sum()), "shape": "HEAVY-TAILED"}
    if at_random:
        truth["temporal.label"] = Not("PERIODIC")
    elif n_bursts <= 3:
        truth.update({"temporal.label": "UNSETTLED", "temporal.consistent_period": period})
    else:
        truth.update({"temporal.label": "PERIODIC", "temporal.period": period})
    kind = "random-" if at_random else ""
    few = f"-x{n_bursts}" if n_bursts != 5 else ""
    return make(f"bursts-{kind}{length}of{period}{few}-s{seed}", wait, truth,
                num_workers=0, compute_ms=8.0)


def spilled_slow_sample(seed: int, every: int, n: int, spill: float,
                        at_random: bool = False) -> Case:
    """One worker (num_workers=1: no period of its own), every ``every``-th
    sample slow (60-100 ms at positions 1, 1 + every, ...), and each slow
    sample, with probability ``spill``, split across its fetch and the one
    before or after it in two waits of 40-110 ms: a burnt sample stretched
    by a loaded host (waits of 103 and 53 ms measured for one 80 ms
    sample).  The gaps read 1, 2, 3, ...; the positions keep the period.
    ``at_random``: as many slow samples, spilled alike, at random steady
    positions (the control, never PERIODIC)."""
    rng = np.random.default_rng(1900 + seed)
    k = startup(1)
    wait = _fast(rng, n, 0.1)
    position = np.arange(n) + k
    slow = np.flatnonzero(position % every == 1 % every)
    if at_random:
        slow = np.sort(rng.choice(n, size=len(slow), replace=False))
    for i in slow:
        j = i + rng.choice((-1, 1))
        if rng.random() < spill and 0 <= j < n:
            wait[[i, j]] = rng.uniform(40.0, 110.0, 2)
        else:
            wait[i] = rng.uniform(60.0, 100.0)
    if at_random:
        truth = {"temporal.label": Not("PERIODIC")}
    elif n >= 60:
        truth = {"temporal.label": "PERIODIC", "temporal.period": every}
    else:
        # Short: "not yet" is true too, never another period.  At 24
        # steps with most slow samples spilled no test can tell a period
        # (IRREGULAR by the gaps: a known limit of the rule, kept visible).
        truth = {"temporal.label": OneOf("PERIODIC", "UNSETTLED", "IRREGULAR"),
                 "temporal.period": OneOf(every, None),
                 "temporal.consistent_period": OneOf(every, None)}
    kind = "random-" if at_random else ""
    return make(f"spilled-{kind}every{every}-n{n}-p{spill:g}-s{seed}", wait, truth,
                num_workers=1, compute_ms=5.0)


def trend(seed: int, start_ms: float, end_ms: float, n: int = 80,
          noise: float = 0.15, name: Optional[str] = None) -> Case:
    """Wait moving linearly from ``start_ms`` to ``end_ms`` over n steps,
    with multiplicative lognormal noise."""
    rng = np.random.default_rng(800 + seed)
    line = np.linspace(start_ms, end_ms, n)
    wait = line * rng.lognormal(0.0, noise, n)
    slope = (end_ms - start_ms) / (n - 1)
    truth = {"trend.label": "RISING" if slope > 0 else "FALLING",
             "trend.slope_ms_per_step": Approx(slope, 0.3),
             "temporal.label": Not("PERIODIC")}
    name = name or f"trend-{start_ms:g}to{end_ms:g}ms-s{seed}"
    return make(name, wait, truth, num_workers=0)


def level_shift(seed: int, before_ms: float, after_ms: float, at: int, n: int = 200,
                noise: float = 0.3) -> Case:
    """One epoch whose wait drifts from ``before_ms`` up by a tenth until
    steady step ``at`` and holds ``after_ms`` from it on (an IterableDataset
    whose faster worker's shard ran out: a probe's per-20-step medians read
    1.0, 1.0, 1.0, 1.2, 1.3, then 10.1, 10.9, 9.9, 10.6, 10.2 ms),
    lognormal noise, against a 20 ms step.  One change of level, never a
    steady rise: no RISING (the trend test alone read one such run "RISING
    ... a leak"); STEP at the change where the trend test rejects its null,
    else nothing."""
    rng = np.random.default_rng(900 + seed)
    base = np.where(np.arange(n) < at, np.linspace(before_ms, 1.4 * before_ms, n), after_ms)
    wait = base * rng.lognormal(0.0, noise, n)
    truth = {"trend.label": Not("RISING")}
    return make(f"level-shift-{before_ms:g}to{after_ms:g}ms-at{at}-n{n}-s{seed}", wait, truth,
                num_workers=2, compute_ms=rng.uniform(19.0, 21.0, n))


def jittered_on_top(seed: int, every: int, slow_ms: float, fast_ms: float, n: int,
                    periodic: bool = True) -> Case:
    """Probes whose every ``every``-th fetch waits ``slow_ms`` over
    ``fast_ms`` (both past the floor), each wait jittered 30% (lognormal),
    a 10 ms step body: groups 2.5-3x apart whose sizes show no group at
    this size (Otsu's eta under the one-group line), while every
    ``every``-th wait ranks above the rest.  PERIODIC at ``every`` (the
    position rule); with ``periodic=False`` the same slow waits at random
    fetches: no period."""
    rng = np.random.default_rng(1500 + seed)
    slow = (np.arange(n) % every == 0) if periodic else (rng.random(n) < 1.0 / every)
    wait = np.where(slow, slow_ms, fast_ms) * rng.lognormal(0.0, 0.3, n)
    truth = ({"temporal.label": "PERIODIC", "temporal.period": every} if periodic
             else {"temporal.label": Not("PERIODIC")})
    kind = "every" if periodic else "random"
    return make(f"jittered-on-top-{kind}{every}-{slow_ms:g}of{fast_ms:g}ms-n{n}-s{seed}", wait,
                truth, num_workers=None, compute_ms=10.0)


def level_change_mid_run(seed: int, n: int = 120, at: int = 60, factor: float = 3.0) -> Case:
    """One epoch of AR(1) waits (phi 0.5, log sd 0.5, median 4 ms) whose
    level rises ``factor``-fold at steady step ``at``, against a 20 ms
    step: too weak a slope for the trend test, one change for Pettitt's
    (a sample cost that tripled mid-run read nothing in 5 of 10 probe runs
    before the change point was tested by itself).  The test finds such a
    change in about 4 of 5 runs (tests/unit/test_wait_trend.py): its truth
    is STEP or not yet (no trend label), never a slope."""
    rng = np.random.default_rng(1600 + seed)
    z = np.empty(n)
    z[0] = rng.normal(0.0, 0.5)
    shocks = rng.normal(0.0, 0.5 * np.sqrt(1 - 0.25), n)
    for i in range(1, n):
        z[i] = 0.5 * z[i - 1] + shocks[i]
    wait = 4.0 * np.exp(z) * np.where(np.arange(n) < at, 1.0, factor)
    truth = {"trend.label": Not("RISING", "FALLING")}
    return make(f"level-change-mid-run-x{factor:g}-at{at}-n{n}-s{seed}", wait, truth,
                num_workers=2, compute_ms=rng.uniform(19.0, 21.0, n))


def small_drift_beside_stalls(seed: int, n: int = 100) -> Case:
    """A slow sample every 5 batches (150-190 ms stalls) at 2 workers, and
    between them waits that fall from about 4 ms to 1 ms over the first
    third of the run as the prefetch queue fills (a user trial): a drift
    smaller than half a step beside stalls that hold the input wait is no
    trend worth a next step."""
    rng = np.random.default_rng(850 + seed)
    wait = np.maximum(4.0 - 3.0 * np.arange(n) / (n / 3), 1.0) * rng.lognormal(0.0, 0.15, n)
    hit = _rank_of_steady(n, 2) % 5 == 0
    wait[hit] = rng.uniform(150.0, 190.0, hit.sum())
    truth = {"trend.label": None, "temporal.label": "PERIODIC", "temporal.period": 5}
    return make(f"small-drift-beside-stalls-s{seed}", wait, truth, num_workers=2,
                compute_ms=rng.uniform(9.5, 11.5, n))


def trend_noise(seed: int, n: int, median_ms: float = 2.0, phi: float = 0.8,
                sigma: float = 0.7) -> Case:
    """A loader without a trend whose neighbouring waits are alike
    (prefetch, bursts): log waits an AR(1) with coefficient ``phi`` and
    stationary sd ``sigma`` around ``median_ms``, against a 10 ms step.  A
    short run of such noise often wanders 2x between its first and last
    tenth, past the floor (the rule of Kendall's independent-point p-value
    read a trend into 17% of 60-80-step runs of it, 6% of 180-200)."""
    rng = np.random.default_rng(870 + seed)
    z = np.empty(n)
    z[0] = rng.normal(0.0, sigma)
    shocks = rng.normal(0.0, sigma * math.sqrt(1.0 - phi * phi), n)
    for i in range(1, n):
        z[i] = phi * z[i - 1] + shocks[i]
    return make(f"trend-noise-ar{phi:g}-n{n}-s{seed}", median_ms * np.exp(z),
                {"trend.label": None}, num_workers=2, compute_ms=rng.uniform(9.5, 10.5, n))


def rising_in_rounds(seed: int, num_workers: int, rounds: int, start_ms: float,
                     end_ms: float) -> Case:
    """Workers in lock-step whose cost per sample grows over the run (a
    list kept in the dataset): each round's one unmade batch waits from
    ``start_ms`` rising to ``end_ms``, the round's other fetches
    prefetched.  Fetch by fetch the waits alternate between the two; the
    loop's mean wait per step rises by (end - start) / (steps - 1) /
    num_workers a step."""
    rng = np.random.default_rng(860 + seed)
    n = rounds * num_workers
    wait = _fast(rng, n, 0.08)
    unmade = _rank_of_steady(n, num_workers) % num_workers == 0
    wait[unmade] = np.linspace(start_ms, end_ms, n)[unmade] * rng.lognormal(0.0, 0.1, unmade.sum())
    slope = (end_ms - start_ms) / (n - 1) / num_workers
    truth = {"trend.label": "RISING", "trend.slope_ms_per_step": Approx(slope, 0.3)}
    return make(f"rising-in-rounds-{num_workers}w-{start_ms:g}to{end_ms:g}ms-s{seed}", wait,
                truth, num_workers=num_workers, compute_ms=rng.uniform(4.5, 5.5, n))


def step_after_first_epoch(seed: int, first_ms: float, later_ms: float, per: int,
                           epochs: int = 3, drain: int = 0) -> Case:
    """Epoch 0's steady waits around ``first_ms``, every later epoch's
    around ``later_ms`` (a cache filled in epoch 0, persistent workers
    started once), ``per`` steady steps an epoch, lognormal noise: a step
    after the first epoch, not a slope per step.  ``drain``: each epoch's
    last ``drain`` fetches wait a tenth as long (the workers' queue
    emptying at the epoch's end), so the later epochs' own last tenth is
    lower than their first: still a step, never a slope across it."""
    rng = np.random.default_rng(880 + seed)
    waits = [level * rng.lognormal(0.0, 0.3, per)
             for level in [first_ms] + [later_ms] * (epochs - 1)]
    for w in waits:
        w[len(w) - drain:] *= 0.1
    tail = f"-drain{drain}" if drain else ""
    # Two epochs of a few dozen steps may not yet show the change against
    # the waits' own dependence: "not yet" (no trend) is true then too; a
    # slope across the change never is.
    truth = {"trend.label": "STEP" if epochs > 2 else Not("RISING", "FALLING")}
    case = make(f"step-after-epoch0-{first_ms:g}to{later_ms:g}ms-{epochs}x{per}{tail}-s{seed}",
                waits, truth, num_workers=2, epochs=epochs)
    case.sources[SOURCE_ID].loader["persistent_workers"] = True
    return case


def one_slow_worker(seed: int, worker: int, num_workers: int = 4,
                    rounds: int = 20, cpu: bool = True) -> Case:
    """Worker ``worker`` is 3x slower than the rest and the only one the
    loop waits for: a 30-50 ms stall on each of its batches (every
    num_workers-th, round-robin), the others prefetched."""
    rng = np.random.default_rng(900 + 10 * worker + seed)
    n = rounds * num_workers
    wait = _fast(rng, n, 0.08)
    mine = _rank_of_steady(n, num_workers) % num_workers == worker
    wait[mine] = rng.uniform(30.0, 50.0, mine.sum())
    truth = {"stalls.count": int(mine.sum()), "temporal.label": "PERIODIC",
             "temporal.period": num_workers}
    if not cpu:
        # Without readings a slow worker and lock-step workers that drifted
        # out of phase look alike (all stalls on one worker, in the real
        # runs too): the report must say it cannot tell.
        truth["attribution.ambiguous"] = True
        return make(f"one-slow-worker-{worker}of{num_workers}-nocpu-s{seed}", wait, truth,
                    num_workers=num_workers)
    truth.update({"attribution.label": "ONE-WORKER", "attribution.worker": worker})
    case = make(f"one-slow-worker-{worker}of{num_workers}-s{seed}", wait, truth,
                num_workers=num_workers)
    # 3x slower: busy all the time, the others a third of it.
    return with_readings(case, {w: 1.0 if w == worker else 1 / 3
                                for w in range(num_workers)})


def slow_sample(seed: int, every: int, num_workers: int, base_ms: Optional[float] = None,
                n: int = 80, phase: int = 2) -> Case:
    """One slow sample every ``every`` batches (rank % every == phase): a
    60-90 ms stall (200 ms over a slow base of ``base_ms``); ``every`` is
    not a multiple of num_workers, so the stalls rotate over the workers."""
    rng = np.random.default_rng(1000 + seed)
    wait = _fast(rng, n, 0.08) if base_ms is None else base_ms * rng.lognormal(0, 0.12, n)
    hit = _rank_of_steady(n, num_workers) % every == phase
    wait[hit] = rng.uniform(60.0, 90.0, hit.sum()) if base_ms is None else 200.0
    truth = {"stalls.count": int(hit.sum()), "temporal.label": "PERIODIC",
             "temporal.period": every, "attribution.label": "SLOW-SAMPLE",
             "attribution.worker": None}
    base = "" if base_ms is None else f"-over{base_ms:g}ms"
    return make(f"slow-sample-every{every}-{num_workers}w{base}", wait, truth,
                num_workers=num_workers)


def epoch_start(seed: int, num_workers: int, steady: int = 20, epochs: int = 3) -> Case:
    """Each epoch a 1.5 s first fetch, then fast steady steps: start-up
    holds most of the wall time."""
    rng = np.random.default_rng(1100 + seed)
    waits = [_fast(rng, steady, 0.1) for _ in range(epochs)]
    truth = {"headline.label": "EPOCH-START", "stalls.count": 0}
    return make(f"epoch-start-{epochs}x1.5s-{num_workers}w", waits, truth,
                num_workers=num_workers, first_ms=1500.0)


def host_full(seed: int, num_workers: int = 4, n: int = 80) -> Case:
    """A healthy 4-worker loop beside CPU hogs: the cheap batches keep up
    (each worker busy 5% of a core, the main process 10%: the job uses 0.3
    of the 2 CPUs), but each worker waits 0.3 s and the main thread 0.4 s
    a second in the run queue, and the loop stalls 4-8 ms at random steps
    for it.  Not a pattern of the loader's: never PERIODIC."""
    rng = np.random.default_rng(1170 + seed)
    wait = _fast(rng, n, 0.2)
    hit = rng.random(n) < 0.15
    wait[hit] = rng.uniform(4.0, 8.0, hit.sum())
    truth = {"temporal.label": Not("PERIODIC"), "diagnosis": Not("INPUT-BOUND")}
    case = make(f"host-full-{num_workers}w-s{seed}", wait, truth, num_workers=num_workers,
                compute_ms=8.0)
    return with_readings(case, {w: 0.05 for w in range(num_workers)},
                         runq={-1: 0.4, **{w: 0.3 for w in range(num_workers)}})


def startup_once(seed: int, num_workers: int = 2, steady: int = 20, epochs: int = 3) -> Case:
    """Persistent workers: only epoch 0's first fetch carries the workers'
    start-up (1.5 s); later epochs start at 5 ms.  Start-up still holds
    most of the wall time; it was paid once."""
    rng = np.random.default_rng(1150 + seed)
    waits = [_fast(rng, steady, 0.1) for _ in range(epochs)]
    truth = {"headline.label": "EPOCH-START", "stalls.count": 0}
    case = make(f"startup-once-{epochs}ep-{num_workers}w", waits, truth,
                num_workers=num_workers, first_ms=[1500.0] + [5.0] * (epochs - 1))
    case.sources[SOURCE_ID].loader["persistent_workers"] = True
    return case


def stuck(seed: int, at: Optional[int], waited_s: float, n: int = 40) -> Case:
    """A healthy loop in which one fetch waits ``waited_s`` (past the
    default stuck_after_s of 30 s): at steady step ``at``, or the last."""
    rng = np.random.default_rng(1200 + seed)
    wait = rng.lognormal(math.log(1.0), 0.3, n)
    at = n - 1 if at is None else at
    wait[at] = waited_s * 1000.0
    truth = {"headline.label": "STUCK"}
    return make(f"stuck-{waited_s:g}s-at{at}", wait, truth, num_workers=2)


# --- loops with the workers' own batch records (traceml.worker_timing) ----------


def simulated_loader(name: str, cost_ms: np.ndarray, truth: dict, *, num_workers: int,
                     compute_ms: np.ndarray, prefetch: int = 2,
                     handover_ms: float = 0.05,
                     handover_parts_ms: Optional[tuple] = None,
                     body_runq_share: Optional[float] = None,
                     handover_others_ms: Optional[float] = None) -> Case:
    """An in-order multiprocessing DataLoader played out batch by batch as
    torch schedules it (torch/utils/data/dataloader.py,
    ``_MultiProcessingDataLoaderIter``): ``iter()`` sends prefetch *
    num_workers indices round-robin (rank r to worker r % num_workers);
    each worker makes its batches in the order sent, one at a time, batch
    r taking ``cost_ms[r]`` from when it is sent and its worker is free;
    step i waits until batch i is made (plus ``handover_ms``), and on
    receiving it the loader sends rank i + prefetch * num_workers.
    Workers start STARTUP_MS after ``iter()``.  The steps' waits, the
    delivery (rank, worker) and the workers' batch records
    (BATCH_RECORD_DTYPE, on the steps' clock; CPU = make time) all come
    from that one schedule, so a slow batch a worker made early enough
    costs the loop nothing: the stalls are what the loop felt, the make
    times what each batch cost.  ``handover_parts_ms`` = (main CPU, wait
    for a core) of each hand-over, at most ``handover_ms`` together (the
    rest of it in transit): the fetch clocks wrap would read, on every
    step (None: no clocks); ``body_runq_share``: the share of each step's
    compute its thread waited for a core (the rest on a CPU; None: bodies
    not clocked); ``handover_others_ms``: the CPU time the main process's
    other threads took in each fetch (None: the process's clock not
    read)."""
    n = len(cost_ms)
    cost = np.round(np.asarray(cost_ms, dtype=np.float64) * MS).astype(np.int64)
    compute = np.round(np.asarray(compute_ms, dtype=np.float64) * MS).astype(np.int64)
    handover = int(round(handover_ms * MS))
    free = [int(STARTUP_MS * MS)] * num_workers
    made = np.zeros((n, 2), dtype=np.int64)

    def send(r: int, at: int) -> None:
        w = r % num_workers
        made[r, 0] = max(free[w], at)
        made[r, 1] = free[w] = made[r, 0] + int(cost[r])

    for r in range(min(n, prefetch * num_workers)):
        send(r, 0)
    wait = np.zeros(n, dtype=np.int64)
    t = 0
    for i in range(n):
        done = max(t, int(made[i, 1])) + handover
        wait[i] = done - t
        if i + prefetch * num_workers < n:
            send(i + prefetch * num_workers, done)
        t = done + int(compute[i])
    records = records_of([(wait, compute)])
    t0 = int(records["begin_ns"][0])
    rank = np.arange(n, dtype=np.int32)
    worker = (rank % num_workers).astype(np.int32)
    batches = np.zeros(n, dtype=_core.BATCH_RECORD_DTYPE)
    batches["begin_ns"] = t0 + made[:, 0]
    batches["end_ns"] = t0 + made[:, 1]
    batches["cpu_ns"] = cost
    batches["runq_ns"] = -1
    batches["seq"] = rank // num_workers
    batches["epoch"] = 0
    batches["worker"] = worker
    sources = source_of(num_workers, 1)
    for facts in sources[SOURCE_ID].epoch_facts.values():
        facts["worker_timing"] = "on"
    clocks = None
    if handover_parts_ms is not None:
        cpu_ms, runq_ms = handover_parts_ms
        assert cpu_ms + runq_ms <= handover_ms, (name, handover_parts_ms, handover_ms)
        body_cpu = body_runq = np.full(n, -1, dtype=np.int64)
        if body_runq_share is not None:
            body_runq = np.round(compute * body_runq_share).astype(np.int64)
            body_cpu = compute - body_runq
        clocks = (np.arange(n, dtype=np.int64), np.full(n, int(round(cpu_ms * MS))),
                  np.full(n, int(round(runq_ms * MS))), body_cpu, body_runq)
        if handover_others_ms is not None:
            clocks += (np.full(n, int(round(handover_others_ms * MS))),)
    return Case(name, records, (rank, worker), sources, truth, batches=batches,
                clocks=clocks)


def stall_ranks(case: Case, above_ms: float) -> np.ndarray:
    """The steady-state ranks whose wait exceeds ``above_ms`` (a recipe's
    check of what its schedule made)."""
    wait = case.records["fetch_done_ns"] - case.records["begin_ns"]
    rank = case.delivery[0]
    return rank[(wait > above_ms * MS) & (rank >= startup(int(case.delivery[1].max()) + 1))]


def sim_slow_sample(seed: int, every: int, num_workers: int, slow_ms: float,
                    stall_every: int, prefetch: int = 2, n: int = 100,
                    jitter: float = 0.01) -> Case:
    """Every ``every``-th index slow (rank % every == 0: ``slow_ms``, the
    others ~0.1 ms) behind ``num_workers`` workers and a 10 ms step: the
    workers make every slow sample slowly, but prefetch lets them start
    some early enough, so the loop stalls every ``stall_every`` batches
    (the schedule's outcome, checked here: the waits over 30 ms).  The
    data's period is ``every``; the loop's cadence ``stall_every`` stays
    the temporal period.  Slow samples vary by +-``jitter``; at 5% the
    hidden ones surface as 10-20 ms waits beside the 50-70 ms stalls."""
    rng = np.random.default_rng(1300 + seed)
    fast = _fast(rng, n, 0.1, 0.3)
    slow = slow_ms * rng.uniform(1 - jitter, 1 + jitter, n)
    cost = np.where(np.arange(n) % every == 0, slow, fast)
    truth = {"temporal.label": "PERIODIC", "temporal.period": stall_every,
             "attribution.label": "SLOW-SAMPLE", "attribution.worker": None,
             "attribution.period": every, "attribution.period_from": "make_times",
             "attribution.stall_period": stall_every}
    case = simulated_loader(
        f"sim-slow-sample-every{every}-{num_workers}w-pf{prefetch}-stalls{stall_every}-s{seed}",
        cost, truth, num_workers=num_workers, compute_ms=rng.uniform(9.5, 10.5, n),
        prefetch=prefetch)
    stalled = stall_ranks(case, 30.0)
    assert len(stalled) >= 8 and (np.diff(stalled) == stall_every).all(), (case.name, stalled)
    return case


def sim_slow_items(seed: int, every: int = 8, batch_size: int = 4, num_workers: int = 2,
                   slow_ms: float = 12.0, fast_ms: float = 0.5, collate_ms: float = 0.0,
                   n: int = 64, getitems: bool = False, at_random: bool = False) -> Case:
    """A map-style dataset in order (batch r holds indices r * batch_size
    ...), every ``every``-th index costing ``slow_ms`` of CPU and the
    others ~``fast_ms`` (lognormal, sigma 0.3), then ``collate_ms`` of
    collate_fn a batch, behind ``num_workers`` workers and a 10 ms step:
    the workers' item records (ITEM_RECORD_DTYPE) lie inside their batch
    records, back to back, as the C wrappers write them.  ``getitems``: the
    dataset makes each batch at once (one __getitems__ record a batch, no
    per-sample record).  ``at_random``: a fixed random one in ``every``
    indices slow instead, no stride (the per-sample timing names them)."""
    rng = np.random.default_rng(1700 + seed)
    idx = np.arange(n * batch_size)
    slow = rng.random(len(idx)) < 1.0 / every if at_random else idx % every == 0
    per = np.where(slow, slow_ms * rng.uniform(0.98, 1.02, len(idx)),
                   _fast(rng, len(idx), fast_ms, 0.3)).reshape(n, batch_size)
    cost = per.sum(axis=1) + collate_ms
    truth = ({"production.samples.kind": "getitems"} if getitems else
             {"production.samples.slow.stride": None, "temporal.label": Not("PERIODIC")}
             if at_random else
             {"production.samples.slow.stride": every, "production.samples.slow.residue": 0})
    name = (f"sim-slow-items-{'random1in' if at_random else 'every'}{every}-bs{batch_size}-"
            f"{num_workers}w-c{collate_ms:g}{'-getitems' if getitems else ''}-s{seed}")
    case = simulated_loader(name, cost, truth, num_workers=num_workers,
                            compute_ms=np.full(n, 10.0))
    return _with_items(case, per, np.full(n, collate_ms), getitems)


def _with_items(case: Case, per: np.ndarray, collate_ms: np.ndarray,
                getitems: bool = False) -> Case:
    """``case`` with its workers' item records: batch r's samples (index
    r * batch_size + k costing ``per[r, k]`` ms; ``getitems``: one
    __getitems__ record of their sum) then its collate_fn call
    (``collate_ms[r]``), back to back from the batch's begin, as the C
    wrappers write them."""
    rows = []
    batch_size = per.shape[1]
    for r, b in enumerate(case.batches):
        t = int(b["begin_ns"])
        calls = ([(_core.ITEM_GETITEMS, -1, per[r].sum(), batch_size)] if getitems else
                 [(_core.ITEM_GETITEM, r * batch_size + k, per[r, k], 1)
                  for k in range(batch_size)])
        calls.append((_core.ITEM_COLLATE, -1, collate_ms[r], batch_size))
        # Cumulative rounding, capped at the batch's end: the items fill
        # the batch exactly.
        edges = np.minimum(t + np.round(np.cumsum([0.0] + [c[2] for c in calls]) * MS)
                           .astype(np.int64), int(b["end_ns"]))
        for (kind, index, _, count), a, z in zip(calls, edges[:-1], edges[1:]):
            rows.append((int(a), int(z), int(z - a), index, 0, int(b["worker"]), kind, count))
    case.items = np.array(rows, dtype=_core.ITEM_RECORD_DTYPE)
    return case


def sim_slow_collate(seed: int, every: int = 5, batch_size: int = 4, num_workers: int = 2,
                     collate_ms: float = 60.0, sample_ms: float = 0.2, n: int = 80) -> Case:
    """collate_fn costing ``collate_ms`` on every ``every``-th batch (0.1
    ms on the others) over samples of ~``sample_ms`` (lognormal, sigma
    0.3), in order behind ``num_workers`` workers and a 10 ms step: the
    stalls follow the batches' rank, their make time is collate_fn's and
    no sample is slow (SLOW-COLLATE at that residue)."""
    rng = np.random.default_rng(1800 + seed)
    per = _fast(rng, n * batch_size, sample_ms, 0.3).reshape(n, batch_size)
    collate = np.where(np.arange(n) % every == 0, collate_ms * rng.uniform(0.98, 1.02, n), 0.1)
    truth = {"attribution.label": "SLOW-COLLATE", "attribution.period": every,
             "attribution.residue": 0}
    case = simulated_loader(f"sim-slow-collate-every{every}-bs{batch_size}-{num_workers}w-"
                            f"{collate_ms:g}ms-s{seed}", per.sum(axis=1) + collate, truth,
                            num_workers=num_workers, compute_ms=np.full(n, 10.0))
    return _with_items(case, per, collate)


def sim_uneven_batch_sizes(seed: int, every: int = 5, big: int = 16, small: int = 4,
                           num_workers: int = 2, sample_ms: float = 3.0, n: int = 80) -> Case:
    """A batch_sampler whose every ``every``-th batch holds ``big`` samples
    and the others ``small``, every sample costing ~``sample_ms`` (lognormal,
    sigma 0.1), behind ``num_workers`` workers and a 10 ms step: the large
    batches stall the loop, slow by their size and not by any sample
    (LARGE-BATCH, at their residue)."""
    rng = np.random.default_rng(1750 + seed)
    size = np.where(np.arange(n) % every == every - 1, big, small)
    per = [sample_ms * rng.lognormal(0.0, 0.1, k) for k in size]
    cost = np.array([p.sum() for p in per])
    truth = {"attribution.label": "LARGE-BATCH"}
    case = simulated_loader(f"sim-uneven-batch-sizes-{big}v{small}-every{every}-s{seed}", cost,
                            truth, num_workers=num_workers, compute_ms=np.full(n, 10.0))
    rows, first = [], 0
    for r, b in enumerate(case.batches):
        t = int(b["begin_ns"])
        edges = np.minimum(t + np.round(np.cumsum(np.r_[0.0, per[r]]) * MS).astype(np.int64),
                           int(b["end_ns"]))
        for k, (a, z) in enumerate(zip(edges[:-1], edges[1:])):
            rows.append((int(a), int(z), int(z - a), first + k, 0, int(b["worker"]),
                         _core.ITEM_GETITEM, 1))
        first += len(per[r])
    case.items = np.array(rows, dtype=_core.ITEM_RECORD_DTYPE)
    return case


def sim_slow_items_pinned_to_one_worker(seed: int, num_workers: int = 3,
                                        slow_ms: float = 40.0) -> Case:
    """Every ``num_workers``-th index slow at batch size 1: in order,
    index k goes to worker k % num_workers, so every slow sample is worker
    0's and worker 0 never makes a fast one.  Worker 0 holds the stalls,
    and nothing in the run tells a slow worker from the samples it is
    sent: ONE-WORKER, with the slow indices pinned to it (the next step is
    the run that moves them)."""
    case = sim_slow_items(20 + seed, every=num_workers, batch_size=1,
                          num_workers=num_workers, slow_ms=slow_ms, fast_ms=0.5, n=72)
    return dataclasses.replace(
        case, name=f"sim-slow-items-pinned-{num_workers}w-s{seed}",
        truth={"attribution.label": "ONE-WORKER", "attribution.worker": 0})


def sim_slow_items_on_one_turn(seed: int, slow_ms: float = 60.0) -> Case:
    """Every 8th index slow at batch size 2 and 4 workers: each slow index
    (8k) lies in batch 4k, worker 0's turn, so every batch of worker 0 is
    slow and the loop stalls on its turns; yet worker 0 is like the others
    (its other samples cost theirs): slow samples, not ONE-WORKER."""
    case = sim_slow_items(10 + seed, every=8, batch_size=2, num_workers=4,
                          slow_ms=slow_ms, fast_ms=2.5, n=80)
    case.name = f"sim-slow-items-on-one-turn-{slow_ms:g}ms-s{seed}"
    case.truth = {**case.truth, "attribution.label": Not("ONE-WORKER")}
    return case


def sim_uniform_make(seed: int, num_workers: int = 2, make_ms: float = 30.0,
                     n: int = 100) -> Case:
    """Every batch costs about ``make_ms`` (lognormal noise, sigma 0.15),
    more than num_workers steps of 10 ms: the loop waits, but no sample is
    slower than another, so no slow-sample period, whatever the noise."""
    rng = np.random.default_rng(1400 + seed)
    cost = rng.lognormal(math.log(make_ms), 0.15, n)
    truth = {"attribution.label": Not("SLOW-SAMPLE"), "attribution.made": None,
             "diagnosis": "INPUT-BOUND"}
    return simulated_loader(f"sim-uniform-make-{make_ms:g}ms-{num_workers}w-s{seed}", cost,
                            truth, num_workers=num_workers, compute_ms=np.full(n, 10.0))


def sim_random_slow(seed: int, rate: float = 0.12, num_workers: int = 4,
                    n: int = 120) -> Case:
    """Each batch independently 150 ms with probability ``rate`` (~0.1 ms
    otherwise): slow batches a split of the make times finds, at random
    ranks, so no period of the data."""
    rng = np.random.default_rng(1500 + seed)
    hit = rng.random(n) < rate
    cost = np.where(hit, 150.0 * rng.uniform(0.9, 1.1, n), _fast(rng, n, 0.1, 0.3))
    truth = {"attribution.label": Not("SLOW-SAMPLE")}
    return simulated_loader(f"sim-random-slow-{rate:g}-{num_workers}w-s{seed}", cost, truth,
                            num_workers=num_workers, compute_ms=rng.uniform(9.5, 10.5, n))


# A draw of 22 slow indices among 66 (numpy's default_rng(1000), kept as
# drawn): 13 of them even, so with 2 workers in turn worker 0 gets more of
# them and the loop's stalls gather on its turns.
UNEVEN_DRAW = (4, 8, 10, 12, 14, 15, 22, 23, 27, 29, 31, 34, 42, 43, 50, 51, 52, 54, 55,
               60, 64, 65)


def sim_random_slow_on_turns(seed: int, slow_ms: float = 60.0) -> Case:
    """2 workers, the UNEVEN_DRAW indices ``slow_ms`` against ~1.2 ms: the
    stalls fall every 2 steps (on worker 0's turns, behind its slow
    batches), yet no round of equal batches makes them: LOCK-STEP would be
    wrong, and the batches' make times say so (two groups ~50x apart)."""
    rng = np.random.default_rng(2600 + seed)
    n = 66
    cost = _fast(rng, n, 1.2, 0.3)
    cost[list(UNEVEN_DRAW)] = slow_ms * rng.uniform(0.97, 1.03, len(UNEVEN_DRAW))
    truth = {"attribution.label": Not("LOCK-STEP"), "batch_cost.alike": False}
    return simulated_loader(f"sim-random-slow-on-turns-2w-s{seed}", cost, truth,
                            num_workers=2, compute_ms=rng.uniform(7.5, 8.5, n), handover_ms=1.0)


def sim_lockstep(seed: int, num_workers: int = 4, make_ms: float = 100.0,
                 n: int = 96) -> Case:
    """Every batch costs about ``make_ms`` (sigma 0.05), the workers started
    together: they finish together, and the loop stalls on each round's
    first batch -- LOCK-STEP with uniform make times."""
    rng = np.random.default_rng(1600 + seed)
    cost = rng.lognormal(math.log(make_ms), 0.05, n)
    truth = {"temporal.label": "PERIODIC", "temporal.period": num_workers,
             "attribution.label": "LOCK-STEP", "attribution.made": None}
    return simulated_loader(f"sim-lockstep-{num_workers}w-s{seed}", cost, truth,
                            num_workers=num_workers, compute_ms=np.full(n, 5.0))


def sim_one_slow_worker(seed: int, worker: int, factor: float, num_workers: int = 4,
                        fast_ms: float = 10.0, n: int = 100) -> Case:
    """Worker ``worker`` makes each batch ``factor`` x slower than the
    others (``fast_ms``): its batches, every num_workers-th rank, are made
    slow and stall -- ONE-WORKER, which a rank period of num_workers in the
    make times must not turn into SLOW-SAMPLE."""
    rng = np.random.default_rng(1700 + 10 * worker + seed)
    base = fast_ms * rng.uniform(0.95, 1.05, n)
    cost = np.where(np.arange(n) % num_workers == worker, factor * base, base)
    truth = {"temporal.label": "PERIODIC", "temporal.period": num_workers,
             "attribution.label": "ONE-WORKER", "attribution.worker": worker}
    return simulated_loader(f"sim-one-slow-worker-{worker}of{num_workers}-{factor:g}x-s{seed}",
                            cost, truth, num_workers=num_workers, compute_ms=np.full(n, 10.0))


def sim_slow_workers(seed: int, workers: tuple = (1, 3), factor: float = 6.0,
                     num_workers: int = 5, fast_ms: float = 10.0, n: int = 100) -> Case:
    """Workers ``workers`` each make every batch ``factor`` x slower than
    the others: the first slow worker's turn stalls the loop, and the next
    slow worker makes its batch in that wait, so the stalls sit on the
    first (ONE-WORKER) while the make times show both slow (helper run:
    workers 1 and 3 of 5 at 60 ms against 4 ms, 15 of 15 stalls on 1)."""
    rng = np.random.default_rng(1800 + seed)
    base = fast_ms * rng.uniform(0.95, 1.05, n)
    cost = np.where(np.isin(np.arange(n) % num_workers, workers), factor * base, base)
    truth = {"attribution.label": "ONE-WORKER", "attribution.worker": workers[0]}
    shown = "-".join(str(w) for w in workers)
    return simulated_loader(f"sim-slow-workers-{shown}of{num_workers}-{factor:g}x-s{seed}",
                            cost, truth, num_workers=num_workers, compute_ms=np.full(n, 10.0))


# --- the seed's size: 16 deliveries a condition ------------------------------
SEED_STEPS = 16


def seed_table(seed: int, num_workers: int, stall_ms: float = 80.0) -> Case:
    """The investigation's rows at its own size: 16 fetches; lock-step
    workers stall on the first fetch of each round (0, 4, 8, 12 at 4
    workers; every 2nd at 2), and at 1 or 0 workers every fetch waits."""
    rng = np.random.default_rng(900 + 10 * num_workers + seed)
    k = startup(num_workers)
    period = max(1, num_workers)
    n = SEED_STEPS - k
    wait = _fast(rng, n, 0.2)
    on = (np.arange(k, SEED_STEPS) % period) == 0
    wait[on] = stall_ms * rng.uniform(0.85, 1.15, on.sum())
    if period == 1:
        truth = {"temporal.label": "EVERY-FETCH"}
    else:
        truth = {"temporal.label": "PERIODIC", "temporal.period": period,
                 "stalls.count": int(on.sum())}
    return make(f"seed-{num_workers}w-16-s{seed}", wait, truth, num_workers=num_workers)


def seed_random(seed: int, num_workers: int, stall_ms: float = 80.0) -> Case:
    """The control of seed_table: the same number of stalls at the same
    size, placed at random among the steady fetches: never PERIODIC."""
    rng = np.random.default_rng(950 + 10 * num_workers + seed)
    k = startup(num_workers)
    n = SEED_STEPS - k
    stalls = int(((np.arange(k, SEED_STEPS) % num_workers) == 0).sum())
    wait = _fast(rng, n, 0.2)
    wait[rng.choice(n, size=stalls, replace=False)] = stall_ms * rng.uniform(0.85, 1.15, stalls)
    truth = {"stalls.count": stalls, "temporal.label": Not("PERIODIC")}
    return make(f"seed-random-{num_workers}w-16-s{seed}", wait, truth, num_workers=num_workers)


# --- the parts of the wait, as the fetch clocks measure them --------------------


def sim_handover(seed: int, part: str, num_workers: int = 2, n: int = 120) -> Case:
    """Cheap batches (~0.2 ms, made long before their fetch) and a 6 ms
    hand-over a fetch against a 4-6 ms step body: the loop waits 50-60% of
    its time, none of it on a worker making the batch.  ``part`` is where
    the hand-over goes: "main_cpu" (5 ms of it the main process receiving
    the batch on a CPU), "cpu_wait" (5 ms waiting for a core: a busy host)
    or "in_transit" (0.5 ms CPU, 0.5 ms run queue, the rest asleep while
    the batch is sent), or "other_threads" (as "in_transit", with the main
    process's other threads on a CPU for 4 of the 5 ms asleep: a thread
    holding the GIL).  HAND-OVER, and the largest part is ``part``."""
    rng = np.random.default_rng(2100 + seed)
    split = {"main_cpu": (5.0, 0.3), "cpu_wait": (0.5, 5.0), "in_transit": (0.5, 0.5),
             "other_threads": (0.5, 0.5)}[part]
    truth = {"diagnosis": "HAND-OVER", "wait_parts.largest.part": part}
    return simulated_loader(f"sim-handover-{part}-{num_workers}w-s{seed}",
                            _fast(rng, n, 0.2, 0.3), truth, num_workers=num_workers,
                            compute_ms=rng.uniform(4.0, 6.0, n), handover_ms=6.0,
                            handover_parts_ms=split,
                            handover_others_ms=4.0 if part == "other_threads" else 0.0)


def gil_held_no_workers(seed: int, n: int = 80) -> Case:
    """num_workers=0, each fetch 8-10 ms against a 6 ms step, of which the
    loop's thread is on a CPU 1 ms (the batch itself is cheap) and the
    main process's other threads run 6.5 ms (a thread of the user's that
    holds the GIL while the loop waits to run the dataset): INPUT-BOUND,
    every fetch, and the largest measured part is the other threads, not
    the dataset's work."""
    rng = np.random.default_rng(2150 + seed)
    wait = rng.uniform(8.0, 10.0, n)
    case = make(f"gil-held-no-workers-s{seed}", wait,
                {"diagnosis": "INPUT-BOUND", "wait_parts.largest.part": "other_threads"},
                num_workers=0, compute_ms=rng.uniform(5.5, 6.5, n))
    total = len(case.records)
    full = case.records["fetch_done_ns"] - case.records["begin_ns"]
    cpu = np.minimum(full, int(1.0 * MS))
    case.clocks = (np.arange(total, dtype=np.int64), cpu, np.zeros(total, dtype=np.int64),
                   np.full(total, -1), np.full(total, -1),
                   np.minimum(full - cpu, int(6.5 * MS)))
    return case


def slow_sampler(seed: int, num_workers: int, n: int = 80) -> Case:
    """A sampler that sleeps 11-13 ms a batch (a query per batch) in the
    main process, cheap batches, a 4-6 ms step body: each fetch waits
    about 12.5 ms, the loop's thread on a CPU 0.4 ms of it, and the
    sampler's timed calls hold all but 0.5 ms of each wait.  At
    ``num_workers`` 0 the sampler runs before the batch is made, with
    workers after it came: either way the largest measured part is the
    sampler, and the next step is the sampler's, never "try num_workers"
    (more workers leave it as it is) nor the hand-over's tensors.  (No
    worker timing here: the workers' production is unknown, so the label
    stays INPUT-BOUND; a real loader with timed workers reads HAND-OVER,
    whose line names the same part.)"""
    rng = np.random.default_rng(2250 + seed)
    wait = rng.uniform(12.0, 13.5, n)
    truth = {"diagnosis": "INPUT-BOUND", "wait_parts.largest.part": "sampler"}
    case = make(f"slow-sampler-{num_workers}w-s{seed}", wait, truth,
                num_workers=num_workers, compute_ms=rng.uniform(4.0, 6.0, n))
    rec = case.records
    total = len(rec)
    full = rec["fetch_done_ns"] - rec["begin_ns"]
    case.clocks = (np.arange(total, dtype=np.int64), np.minimum(full, int(0.4 * MS)),
                   np.zeros(total, dtype=np.int64), np.full(total, -1), np.full(total, -1))
    items = np.zeros(total, dtype=_core.ITEM_RECORD_DTYPE)
    items["begin_ns"] = rec["begin_ns"] + int(0.2 * MS)
    items["end_ns"] = rec["fetch_done_ns"] - int(0.3 * MS)
    items["cpu_ns"] = int(0.1 * MS)
    items["index"] = np.arange(total)
    items["epoch"] = rec["epoch"]
    items["kind"] = _core.ITEM_NEXT
    items["count"] = 1
    case.sampler_items = items
    return case


def sim_small_handover(seed: int, num_workers: int = 2, n: int = 120) -> Case:
    """Cheap batches made long before their fetch and a 1.5 ms hand-over
    (1.2 ms of it the main process on a CPU) against a 9-11 ms step body:
    input about 13% of the step (BALANCED), no stalls, and the measured
    parts say it is receiving the batch, not the workers' throughput."""
    rng = np.random.default_rng(2200 + seed)
    truth = {"diagnosis": "BALANCED", "shape": "FAST", "wait_parts.largest.part": "main_cpu"}
    return simulated_loader(f"sim-small-handover-{num_workers}w-s{seed}",
                            _fast(rng, n, 0.2, 0.3), truth, num_workers=num_workers,
                            compute_ms=rng.uniform(9.0, 11.0, n), handover_ms=1.5,
                            handover_parts_ms=(1.2, 0.1))


def sim_production_most_of_wait(seed: int, slow_ms: float = 108.0, n: int = 160) -> Case:
    """Every 8th batch slow (``slow_ms``, the others ~0.2 ms) behind 4
    workers and a 10 ms step body, each fetch handing over in 1.5 ms (1 ms
    main CPU, 0.2 ms run queue, the rest in transit).  The loop waits about
    a quarter of its time, about two thirds of that on a worker still
    making a slow batch: production is the largest part, so INPUT-BOUND
    (cheaper slow samples or more workers shorten it), although it is
    under 20% of the step time."""
    rng = np.random.default_rng(2200 + seed)
    cost = np.where(np.arange(n) % 8 == 0, slow_ms * rng.uniform(0.97, 1.03, n),
                    _fast(rng, n, 0.2, 0.3))
    truth = {"diagnosis": "INPUT-BOUND", "wait_parts.largest.part": "worker_making"}
    return simulated_loader(f"sim-production-most-of-wait-{slow_ms:g}ms-s{seed}", cost,
                            truth, num_workers=4, compute_ms=rng.uniform(9.5, 10.5, n),
                            handover_ms=1.5, handover_parts_ms=(1.0, 0.2))


def sim_workers_take_cores(seed: int, runq_share: float, n: int = 120) -> Case:
    """A loader that keeps up (4 workers, ~0.5 ms batches, a 1 ms
    hand-over: 0.6 ms main CPU, 0.2 ms run queue) beside a 30 ms step
    whose thread waits ``runq_share`` of it for a core: COMPUTE-BOUND, and
    where that wait (``runq_share`` x 30 ms) passes the input wait the
    report says the step itself waited for a core."""
    rng = np.random.default_rng(2300 + seed)
    truth = {"diagnosis": "COMPUTE-BOUND", "stalls.count": 0}
    return simulated_loader(f"sim-workers-take-cores-{runq_share:g}-s{seed}",
                            _fast(rng, n, 0.5, 0.3), truth, num_workers=4,
                            compute_ms=rng.uniform(29.0, 31.0, n), handover_ms=1.0,
                            handover_parts_ms=(0.6, 0.2), body_runq_share=runq_share)


def handover_beside_other_programs(seed: int, others_cores: float, n: int = 120) -> Case:
    """sim_handover's busy host (the loop's thread waits 5 ms for a core in
    each 6 ms hand-over, 0.8 s a second in the run queue) with the host
    read: other programs ran ``others_cores`` cores meanwhile.  The most
    of the job's wait for a core they can account for is min(1, others /
    0.8): at 1.5 cores all of it, so the largest part is the host's
    (HOST-BOUND); at 0.2 a quarter, and the loop's own wait for a core
    stays the largest part (HAND-OVER)."""
    case = sim_handover(10 + seed, "cpu_wait", num_workers=2, n=n)
    host = others_cores >= 0.8
    truth = ({"diagnosis": "HOST-BOUND", "wait_parts.largest.part": "host_cpu_wait"} if host
             else {"diagnosis": "HAND-OVER", "wait_parts.largest.part": "cpu_wait"})
    case = dataclasses.replace(case, name=f"handover-beside-others-{others_cores:g}cores-s{seed}",
                               truth=truth)
    return with_readings(case, {0: 0.05, 1: 0.05}, runq={-1: 0.8}, others_cores=others_cores)


def healthy_on_a_busy_host(seed: int, waits: int, queued_ms: float, n: int = 100,
                           num_workers: int = 4) -> Case:
    """A loader that keeps up (~0.3 ms waits against an 8 ms step) whose
    loop thread, on ``waits`` fetches at random, waited ``queued_ms`` (+-10%)
    for a core inside the fetch (the host's other work holding the cores):
    the wait the loop felt, and the clocks that measured it on every
    fetch.  The loader made no stall: no stalls, no period, and the
    host's waits named as such."""
    rng = np.random.default_rng(2400 + seed)
    steady = _fast(rng, n, 0.3, 0.3)
    queued = np.zeros(n)
    hit = rng.choice(n, size=waits, replace=False)
    queued[hit] = queued_ms * rng.uniform(0.9, 1.1, waits)
    case = make(f"healthy-busy-host-{waits}x{queued_ms:g}ms-s{seed}", steady + queued,
                {**HEALTHY, "stalls.host_waits.count": waits}, num_workers=num_workers,
                compute_ms=rng.uniform(7.5, 8.5, n))
    k = startup(num_workers)
    total = len(case.records)
    runq = np.r_[np.zeros(k), np.round(queued * MS)].astype(np.int64)
    wait = case.records["fetch_done_ns"] - case.records["begin_ns"]
    case.clocks = (np.arange(total, dtype=np.int64), np.minimum(wait - runq, 50_000),
                   runq, np.full(total, -1), np.full(total, -1))
    return case


# Which half of the corpus a case is in: the rules are tuned on "tune";
# "held-out" is only ever reported (benchmarks/bench_truth.py --corpus),
# its confusion table untouched.  By a hash of the name, so a case keeps
# its half as others are added.
HALVES = ("tune", "held-out")


def half(case: Case) -> str:
    """The half of the corpus ``case`` belongs to (see HALVES)."""
    return HALVES[zlib.crc32(case.name.encode()) % 2]


def corpus() -> list[Case]:
    """Every case, in a fixed order (names are unique)."""
    cases = []
    cases += [healthy_jitter(s) for s in range(5)]
    cases += [healthy_jitter(5, num_workers=0), healthy_jitter(6, n=30, num_workers=3)]
    cases += [healthy_cheap_workers(s) for s in range(2)]
    cases += [healthy_cheap_workers(s, ripple=True) for s in range(2)]
    cases += [on_the_line(0, 0.2), on_the_line(1, 0.05), at_the_cost_line(0), at_the_cost_line(1)]
    cases += [small_two_groups(0, 4, 1.1, 0.18, 2.2), small_two_groups(1, 3, 0.7, 0.12, 1.6),
              small_two_groups(2, 5, 3.0, 0.3, 9.0),
              small_two_groups(3, 4, 1.1, 0.18, 2.2, periodic=False),
              small_two_groups(4, 3, 0.7, 0.12, 1.6, periodic=False),
              # 3.7x apart (time.sleep's own 0.1 ms on every fetch), and its control.
              small_two_groups(5, 4, 1.1, 0.3, 3.0),
              small_two_groups(6, 4, 1.1, 0.3, 3.0, periodic=False)]
    cases += [isolated_blip(0, 40), isolated_blip(1, 5, num_workers=0),
              isolated_blip(2, 70, num_workers=4)]
    cases += [uniformly_slow(0, 25.0, 0), uniformly_slow(1, 40.0, 1),
              uniformly_slow(2, 15.0, 2)]
    cases += [uneven_slow_pairs(s) for s in range(3)]
    cases += [lockstep(0, k) for k in (2, 3, 4, 8)]
    cases += [lockstep(1, 4, stall_ms=30.0), lockstep(1, 2, rounds=20, stall_ms=25.0)]
    cases += [lockstep(0, k, loader=False) for k in (3, 8)]
    cases += [lockstep_pairs(s) for s in range(2)]
    cases += [random_stalls(s, rate, n) for rate, n, seeds in (
        (0.05, 120, (0, 1, 2)), (0.1, 100, (0, 1, 2)), (0.25, 100, (0, 1, 2)),
        (0.25, 24, (3, 4, 5, 6))) for s in seeds]
    cases += [bursts(0, 4, 30), bursts(1, 4, 30), bursts(2, 3, 20)]
    cases += [bursts(3, 5, 40, n_bursts=3), bursts(4, 4, 36, n_bursts=3),
              bursts(5, 5, 40, n_bursts=3, at_random=True),
              bursts(6, 4, 30, n_bursts=5, at_random=True)]
    cases += [spilled_slow_sample(s, every, n, spill) for s, every, n, spill in (
        (0, 3, 60, 0.6), (1, 3, 60, 0.9), (2, 4, 80, 0.5), (3, 5, 100, 0.7), (4, 3, 24, 0.7),
        (9, 3, 36, 0.5))]
    cases += [spilled_slow_sample(s, every, n, 0.7, at_random=True)
              for s, every, n in ((5, 3, 60), (6, 3, 60), (7, 4, 80), (8, 3, 24))]
    cases += [trend(0, 1.0, 40.0), trend(1, 1.0, 40.0), trend(2, 40.0, 1.0),
              trend(3, 40.0, 1.0),
              trend(4, 2.0, 2.0 + 0.3 * 79, noise=0.1, name="trend-ramp-2+0.3ms")]
    cases += [small_drift_beside_stalls(s) for s in range(3)]
    cases += [level_shift(s, 1.0, 10.0, 100) for s in range(4)]
    cases += [jittered_on_top(0, 4, 15.0, 5.0, 40), jittered_on_top(1, 4, 12.0, 4.0, 64),
              jittered_on_top(2, 6, 12.0, 4.0, 96),
              jittered_on_top(3, 4, 15.0, 5.0, 40, periodic=False),
              jittered_on_top(4, 4, 12.0, 4.0, 64, periodic=False)]
    cases += [level_change_mid_run(s) for s in range(3)]
    cases += [trend_noise(s, n) for s, n in ((0, 60), (1, 60), (2, 100), (3, 100), (4, 200),
                                             (5, 200))]
    cases += [rising_in_rounds(0, 2, 100, 2.0, 10.0), rising_in_rounds(1, 4, 60, 3.0, 15.0),
              rising_in_rounds(2, 2, 60, 2.0, 8.0)]
    cases += [step_after_first_epoch(0, 5.0, 1.0, 30),
              step_after_first_epoch(1, 8.0, 2.0, 300, epochs=4),
              step_after_first_epoch(2, 2.9, 1.2, 40, epochs=2, drain=2),
              step_after_first_epoch(3, 6.0, 1.5, 40, epochs=2, drain=2),
              step_after_first_epoch(4, 4.0, 1.0, 30, epochs=3, drain=2)]
    cases += [one_slow_worker(0, w) for w in (1, 2, 3)]
    cases += [one_slow_worker(1, 1, num_workers=3)]
    cases += [one_slow_worker(2, 2, cpu=False)]
    cases += [slow_sample(0, 5, 4), slow_sample(1, 7, 2), slow_sample(2, 6, 4),
              slow_sample(3, 10, 0, base_ms=15.0)]
    cases += [epoch_start(0, 0), epoch_start(1, 2), startup_once(0)]
    cases += [host_full(s) for s in range(2)]
    cases += [stuck(0, None, 120.0), stuck(1, 20, 45.0)]
    cases += [sim_slow_sample(0, 5, 4, 150.0, 10), sim_slow_sample(1, 5, 4, 150.0, 10, jitter=0.05),
              sim_slow_sample(2, 3, 2, 80.0, 6), sim_slow_sample(3, 7, 4, 200.0, 14, n=160),
              sim_slow_sample(4, 5, 4, 150.0, 5, prefetch=1)]
    cases += [sim_uniform_make(0), sim_uniform_make(1, num_workers=4, make_ms=60.0)]
    cases += [sim_slow_items(0), sim_slow_items(1, every=5, batch_size=8, collate_ms=6.0),
              sim_slow_items(2, collate_ms=4.0, getitems=True)]
    cases += [sim_slow_items(s, every=8, num_workers=2, slow_ms=30.0, n=80, at_random=True)
              for s in (0, 3)]
    cases += [sim_random_slow(s) for s in range(3)]
    cases += [sim_lockstep(0), sim_lockstep(1, num_workers=2)]
    cases += [sim_random_slow_on_turns(0), sim_random_slow_on_turns(1, slow_ms=40.0)]
    cases += [sim_one_slow_worker(0, 1, 6.0), sim_one_slow_worker(1, 2, 3.0, fast_ms=20.0)]
    cases += [sim_slow_workers(0), sim_slow_workers(1, (0, 2), factor=8.0, num_workers=6)]
    cases += [lockstep_out_of_order(0), lockstep_out_of_order(1, k=3)]
    cases += [overtaken_slow_samples(0), overtaken_slow_samples(1, rate=0.1),
              overtaken_slow_samples(3, overtake=False)]
    cases += [too_few_steps(0), too_few_steps(1, steady=7, num_workers=0)]
    cases += [sim_slow_items_on_one_turn(0), sim_slow_items_on_one_turn(1, slow_ms=40.0)]
    cases += [sim_slow_collate(0), sim_slow_collate(1, every=3, num_workers=4, collate_ms=90.0)]
    cases += [sim_uneven_batch_sizes(0, big=32), sim_uneven_batch_sizes(1, every=4, big=32, small=8,
                                                                num_workers=3)]
    cases += [sim_slow_items_pinned_to_one_worker(0),
              sim_slow_items_pinned_to_one_worker(1, num_workers=4, slow_ms=60.0)]
    cases += [worker_exited(0, 3), worker_exited(4, -9)]
    cases += [raised_in_a_worker(0, 1), raised_in_a_worker(1, None, n=24),
              raised_and_went_on(0), given_threshold_over_stalls(0)]
    cases += [one_long_fetch(0, 8000.0), one_long_fetch(1, 2500.0, num_workers=2)]
    cases += [seed_table(s, k) for k in (4, 2, 1, 0) for s in range(3)]
    cases += [seed_random(s, k) for k in (4, 2) for s in range(4)]
    cases += [sim_handover(s, part) for s, part in enumerate(("main_cpu", "cpu_wait",
                                                               "in_transit"))]
    cases += [sim_handover(3, "main_cpu", num_workers=4), sim_handover(4, "cpu_wait", n=60)]
    cases += [sim_handover(5, "other_threads"), sim_handover(6, "other_threads", num_workers=4),
              gil_held_no_workers(0), gil_held_no_workers(1, n=40)]
    cases += [sim_small_handover(0), sim_small_handover(1, num_workers=4)]
    cases += [slow_sampler(0, 0), slow_sampler(1, 2), slow_sampler(2, 4, n=40)]
    cases += [handover_beside_other_programs(0, 1.5), handover_beside_other_programs(1, 1.0),
              handover_beside_other_programs(2, 0.2), handover_beside_other_programs(3, 0.0)]
    cases += [sim_workers_take_cores(0, 0.25), sim_workers_take_cores(1, 0.02),
              sim_workers_take_cores(2, 0.6)]
    cases += [healthy_on_a_busy_host(0, 6, 12.0), healthy_on_a_busy_host(1, 25, 6.0),
              healthy_on_a_busy_host(2, 10, 14.0, num_workers=2),
              healthy_on_a_busy_host(4, 8, 9.0), healthy_on_a_busy_host(5, 12, 7.0, n=60)]
    cases += [sim_production_most_of_wait(s, ms) for s, ms in ((0, 108.0), (1, 104.0),
                                                               (2, 112.0))]
    names = [c.name for c in cases]
    assert len(set(names)) == len(names), "case names must be unique"
    return cases


def replay(case: Case, build=None):
    """``report.build`` over the case (its given threshold, if any): the
    Report."""
    if build is None:
        from traceml.build import build
    return build(case.records, dict(INFO), SOURCE_ID, case.stall_threshold_s,
                 sources=case.sources, delivery=case.delivery, samples=case.samples,
                 sampler_info=case.sampler_info, main_pid=MAIN_PID,
                 worker_batches=None if case.batches is None else (case.batches, {}),
                 worker_items=None if case.items is None else (case.items, 0),
                 fetch_clocks=case.clocks, sampler_items=case.sampler_items)


def check(case: Case, report: dict) -> list[tuple[str, Any, Any]]:
    """(path, want, got) for each truth key the report does not satisfy."""
    out = []
    for path, want in case.truth.items():
        got = lookup(report, path)
        if not matches(want, got):
            out.append((path, want, got))
    return out
