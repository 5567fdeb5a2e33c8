"""A report as a timeline: Chrome trace-event JSON, which Perfetto
(ui.perfetto.dev) and ``chrome://tracing`` open.

Tracks (one process, "traceml: <source>"):

* **training loop** (tid 1): per step a ``fetch`` slice (the input wait;
  ``fetch (stall)`` with category ``stall`` when the report counted it a
  stall, ``fetch (epoch start)`` for the start-up fetches) and a
  ``compute`` slice; an instant event at each epoch's first step;
* **worker k** (tid 100 + k, with worker batch timing): each batch the
  worker made, from the moment its fetcher began to the moment the batch
  was made, with its number in the epoch, CPU and wait for a core, and the
  loop step that received it;
* **stuck** (tid 2): a fetch that waited past ``stuck_after_s``;
* counters from the sampler's readings: per process (``main``, ``worker
  k``) the cores it kept busy (utime + stime of every thread) and the
  cores' worth of its threads' wait for a core, between readings,
  and the bytes it read from storage per second;
* with ``cuda=`` on (:mod:`traceml.gpu`), a counter of each step's
  GPU-visible input wait (ms) at the step's begin.

Timestamps are microseconds of the monotonic clock the steps are stamped
with (``CLOCK_MONOTONIC``, as Python's ``time.monotonic_ns() / 1000``).
``otherData`` holds the clock's reading and the Unix time at export, so a
timestamp converts to wall time as ``unix_ns_at_export / 1000 - (
monotonic_ns_at_export / 1000 - ts)``; line up another tool's trace of
the same run by one event both show.

Large runs: at most ``max_steps`` steps are written (default 100,000,
about 20 MB of JSON); past that, the slowest fetches and ``window`` steps
either side of each are kept, and ``otherData["kept_steps"]`` says how
many.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np

from . import _core, worker_timing

LOOP_TID = 1
STUCK_TID = 2
WORKER_TID0 = 100
DEFAULT_MAX_STEPS = 100_000
DEFAULT_WINDOW = 20


def _kept(wait_ns: np.ndarray, max_steps: int, window: int) -> np.ndarray:
    """Indices of the steps written: all, or the slowest fetches and a
    window around each."""
    n = len(wait_ns)
    if n <= max_steps:
        return np.arange(n)
    centres = max(1, max_steps // (2 * window + 1))
    slowest = np.argpartition(wait_ns, n - centres)[n - centres:]
    keep = np.zeros(n, dtype=bool)
    for c in slowest:
        keep[max(0, c - window):c + window + 1] = True
    return np.flatnonzero(keep)


def _summary(report: Any) -> dict:
    """The report's summary without making its per-step delivery lists
    (``result.summary_of``; read here by attribute, as result imports this
    module)."""
    return getattr(report, "_summary", None) or report.summary


def _us(ns: Any) -> float:
    return float(ns) / 1e3


def trace_events(report: Any, *, max_steps: int = DEFAULT_MAX_STEPS,
                 window: int = DEFAULT_WINDOW) -> dict:
    """The trace of ``report`` (a :class:`traceml.Report`) as a dict in the
    Chrome trace-event format ({"traceEvents": [...], "displayTimeUnit",
    "otherData"}).

    Raises:
        TypeError: max_steps or window is not an int.
        ValueError: max_steps < 1 or window < 0.
    """
    for name, value, least in (("max_steps", max_steps, 1), ("window", window, 0)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"save_trace(): {name} must be an int, got {type(value).__name__}")
        if value < least:
            raise ValueError(f"save_trace(): {name} must be at least {least}, got {value}")
    s = _summary(report)
    steps = report.steps
    pid = 1
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
         "args": {"name": f"traceml: {s['source']}"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": LOOP_TID,
         "args": {"name": "training loop"}},
    ]
    wait = steps["fetch_done_ns"] - steps["begin_ns"]
    kept = _kept(wait, max_steps, window)
    stalls = set((s.get("stalls") or {}).get("steps") or [])
    starts = set((s.get("epoch_start") or {}).get("steps") or [])
    epochs = steps["epoch"]
    for i in kept.tolist():
        b, f, e = int(steps["begin_ns"][i]), int(steps["fetch_done_ns"][i]), int(steps["end_ns"][i])
        if i == 0 or epochs[i] != epochs[i - 1]:
            events.append({"ph": "i", "s": "p", "name": f"epoch {int(epochs[i])}", "pid": pid,
                           "tid": LOOP_TID, "ts": _us(b)})
        stalled = i in stalls
        name = ("fetch (stall)" if stalled else "fetch (epoch start)" if i in starts
                else "fetch")
        events.append({"ph": "X", "name": name, "cat": "stall" if stalled else "fetch",
                       "pid": pid, "tid": LOOP_TID, "ts": _us(b), "dur": _us(f - b),
                       "args": {"step": i, "epoch": int(epochs[i]), "wait_ms": (f - b) / 1e6}})
        events.append({"ph": "X", "name": "compute", "cat": "compute", "pid": pid,
                       "tid": LOOP_TID, "ts": _us(f), "dur": _us(e - f),
                       "args": {"step": i}})
    events.extend(_worker_events(report, kept, pid))
    events.extend(_counter_events(report, pid))
    events.extend(_gpu_events(report, kept, pid))
    for ev in s.get("stuck") or []:
        step = ev.get("step")
        since = (int(steps["begin_ns"][step]) if step is not None and step < len(steps)
                 else None)
        if since is None:
            continue
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": STUCK_TID,
                       "args": {"name": "stuck"}})
        events.append({"ph": "X", "name": "stuck fetch", "cat": "stuck", "pid": pid,
                       "tid": STUCK_TID, "ts": _us(since), "dur": ev["waited_s"] * 1e6,
                       "args": {k: ev[k] for k in ("worker", "pid", "state", "oldest_rank")}})
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "clock": "CLOCK_MONOTONIC, microseconds",
            "monotonic_ns_at_export": time.monotonic_ns(),
            "unix_ns_at_export": time.time_ns(),
            "source": s["source"], "steps": int(len(steps)), "kept_steps": int(len(kept)),
            "diagnosis": s.get("diagnosis"),
        },
    }


def _worker_events(report: Any, kept: np.ndarray, pid: int) -> list[dict]:
    """A track per worker with the batches it made (none without worker
    batch timing)."""
    batches = getattr(report, "worker_batches", None)
    if batches is None or len(batches) == 0:
        return []
    workers = report.delivery_column("workers")
    steps = report.steps
    received = {}
    if workers is not None and len(workers) == len(steps):
        wk = workers.astype(np.int32)
        idx = worker_timing.match(batches, steps["epoch"], wk,
                                  getattr(report, "worker_offsets", None) or {})
        received = {int(j): int(i) for i, j in enumerate(idx.tolist()) if j >= 0}
    tops = getattr(report, "batch_top", None) or {}
    lo = int(steps["begin_ns"][kept].min()) if len(kept) else 0
    hi = int(steps["end_ns"][kept].max()) if len(kept) else 0
    events: list[dict] = []
    for w in np.unique(batches["worker"]).tolist():
        events.append({"ph": "M", "name": "thread_name", "pid": pid,
                       "tid": WORKER_TID0 + int(w), "args": {"name": f"worker {int(w)}"}})
    for j in np.argsort(batches["begin_ns"], kind="stable").tolist():
        r = batches[j]
        if r["end_ns"] < lo or r["begin_ns"] > hi:
            continue
        args = {"epoch": int(r["epoch"]), "batch": int(r["seq"]),
                "cpu_ms": None if r["cpu_ns"] < 0 else r["cpu_ns"] / 1e6,
                "runq_ms": None if r["runq_ns"] < 0 else r["runq_ns"] / 1e6,
                "received_at_step": received.get(j)}
        if j in tops:
            label, n, of, named = tops[j]
            args.update(top_function=label, top_samples=n, stack_samples=of)
            if named is not None:
                args["named_function_samples"] = named
        events.append({"ph": "X", "name": "make batch", "cat": "worker", "pid": pid,
                       "tid": WORKER_TID0 + int(r["worker"]), "ts": _us(r["begin_ns"]),
                       "dur": _us(r["end_ns"] - r["begin_ns"]), "args": args})
    events.extend(_item_events(report, lo, hi, pid))
    return events


# The item slices a trace holds at most (each sample's __getitem__ and each
# collate_fn call nest inside their batch's slice); past it, the latest.
MAX_ITEM_EVENTS = 200_000
_ITEM_NAMES = {_core.ITEM_GETITEM: "sample", _core.ITEM_NEXT: "sample",
               _core.ITEM_GETITEMS: "__getitems__", _core.ITEM_COLLATE: "collate_fn",
               _core.ITEM_GC: "gc", _core.ITEM_INIT: "worker_init_fn"}


def _item_events(report: Any, lo: int, hi: int, pid: int) -> list[dict]:
    """Each timed item (worker_timing's per-sample and collate records, and
    the workers' garbage collections) in the kept window, on its worker's
    track; [] without item records."""
    items = getattr(report, "worker_items", None)
    if items is None or len(items) == 0:
        return []
    keep = np.flatnonzero((items["end_ns"] >= lo) & (items["begin_ns"] <= hi))[-MAX_ITEM_EVENTS:]
    out = []
    for r in items[keep]:
        kind = int(r["kind"])
        name = _ITEM_NAMES.get(kind, "item")
        if kind in (_core.ITEM_GETITEM, _core.ITEM_NEXT) and r["index"] >= 0:
            name = f"sample {int(r['index'])}"
        elif kind == _core.ITEM_GC and r["count"] >= 0:
            name = f"gc generation {int(r['count'])}"
        out.append({"ph": "X", "name": name, "cat": "item", "pid": pid,
                    "tid": WORKER_TID0 + int(r["worker"]), "ts": _us(r["begin_ns"]),
                    "dur": _us(r["end_ns"] - r["begin_ns"]),
                    "args": {"cpu_ms": None if r["cpu_ns"] < 0 else r["cpu_ns"] / 1e6,
                             "epoch": int(r["epoch"]), "items": int(r["count"])}})
    return out


def _counter_events(report: Any, pid: int) -> list[dict]:
    """Counter events ("C") from the sampler's readings of the run's
    processes: cores busy, cores' worth of run-queue wait and read bytes
    per second, each between one reading and the next (none without
    readings, as in a report read back from a file)."""
    samples = getattr(report, "samples", None)
    if samples is None or len(samples) == 0:
        return []
    s = _summary(report)
    names = {}
    for e in (s.get("workers") or {}).get("pids_by_epoch") or []:
        for k, p in enumerate(e.get("pids") or []):
            names[p] = f"worker {k}"
    tick = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
    events: list[dict] = []
    for p in np.unique(samples["pid"]).tolist():
        rows = samples[samples["pid"] == p]
        rows = rows[np.argsort(rows["t_ns"], kind="stable")]
        if len(rows) < 2:
            continue
        role = rows["role"][0]
        name = names.get(p, "main" if role == -1 else "host (all cores)"
                         if role == _core.HOST_ROLE else f"pid {p}")
        dt = np.diff(rows["t_ns"]).astype(np.float64) * 1e-9
        cpu = np.diff((rows["utime_ticks"] + rows["stime_ticks"]).astype(np.float64)) / tick
        runq = np.diff(rows["runq_ns"].astype(np.float64)) * 1e-9
        read = np.diff(rows["read_bytes"].astype(np.float64))
        ok_cpu = (rows["utime_ticks"][1:] >= 0) & (rows["utime_ticks"][:-1] >= 0)
        ok_runq = (rows["runq_ns"][1:] >= 0) & (rows["runq_ns"][:-1] >= 0)
        ok_read = (rows["read_bytes"][1:] >= 0) & (rows["read_bytes"][:-1] >= 0)
        for j in np.flatnonzero(dt > 0).tolist():
            args = {}
            if ok_cpu[j]:
                args["cores busy"] = cpu[j] / dt[j]
            if ok_runq[j]:
                args["waiting for a core"] = runq[j] / dt[j]
            if args:
                events.append({"ph": "C", "name": f"{name}: CPU", "pid": pid, "tid": 0,
                               "ts": _us(rows["t_ns"][j]), "args": args})
            if ok_read[j]:
                events.append({"ph": "C", "name": f"{name}: read bytes/s", "pid": pid,
                               "tid": 0, "ts": _us(rows["t_ns"][j]),
                               "args": {"read": read[j] / dt[j]}})
    return events


def _gpu_events(report: Any, kept: np.ndarray, pid: int) -> list[dict]:
    """A counter of each kept step's GPU-visible input wait (ms), at the
    step's begin, when cuda was on (``Report.gpu_wait_ns``; steps not read
    are left out).  A counter, not a slice: the CUDA events give durations
    on the GPU's clock, not instants on the steps' clock."""
    gpu = getattr(report, "gpu_wait_ns", None)
    if gpu is None or len(gpu) != len(report.steps):
        return []
    begin = report.steps["begin_ns"]
    return [{"ph": "C", "name": "GPU-visible input wait", "pid": pid, "tid": 0,
             "ts": _us(begin[i]), "args": {"ms": int(gpu[i]) / 1e6}}
            for i in kept.tolist() if gpu[i] >= 0]


def save_trace(report: Any, path: Any, *, max_steps: int = DEFAULT_MAX_STEPS,
               window: int = DEFAULT_WINDOW) -> str:
    """Write :func:`trace_events` of ``report`` to ``path`` as JSON;
    returns the path.

    Raises:
        TypeError: path is not a str or os.PathLike, or a bad max_steps or
            window (see trace_events).
        ValueError: max_steps or window out of range.
        OSError: the file cannot be written.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"save_trace(): path must be a str or os.PathLike, "
                        f"got {type(path).__name__}")
    data = trace_events(report, max_steps=max_steps, window=window)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, separators=(",", ":"))
    return os.fspath(path)
