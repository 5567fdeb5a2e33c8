"""Memory per recorded step, at 10 million steps.

Records 10 million steps, from a wrapped ``range`` (``for _ in
traceml.wrap(range(n))``) and from the probes (``step_begin();
fetch_done(); step_end()`` in a loop), each into a store freed beforehand,
and reads:

* ``store_info()``: the record size (``record_bytes``), and the allocated
  array (``capacity * record_bytes``, plus ``capacity * 8`` for the
  delivery array when there is one), which grows by doubling from 1024
  records, so that up to half of it can be unused;
* the process's resident memory (``VmRSS`` in /proc/self/status) before
  and after, and its peak (``VmHWM``, reset before each recording through
  /proc/self/clear_refs where allowed): pages of the array that were never
  written are not resident, so the RSS grows by about the records written;
* the transient cost of ``snapshot()`` (the copy of the records into a
  NumPy array that ``report()`` reads).

A third recording, "tracked", wraps an iterator shaped like a
multiprocessing DataLoader iterator (a ``_task_info`` table), so that
traceml also stores each step's delivery (sampler rank and worker, 8 bytes
in an array parallel to the records), as it does for a DataLoader with
workers.

With ``--via all`` (the default) each recording runs in a fresh child
process, so that neither inherits the other's heap: glibc raises its mmap
threshold (up to 32 MiB) when a large block is freed, after which a store
below that size grows on the heap, where each doubling's old block can stay
resident (see README.md).

Target (the issue): <= 32 bytes per step for the record itself.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time

import traceml
from _common import (
    Check,
    TaskTableIter,
    common_args,
    free_store,
    print_checks,
    print_machine,
    proc_status_kib,
    reset_peak,
    run_main,
    write_json,
)
from traceml import _core

TARGET_BYTES = 32
# sizeof(tm_delivery) in csrc/store.h: (int32 rank, int32 worker) per step,
# allocated beside the records (same capacity) once a step carries one.
DELIVERY_BYTES = 8



def record_wrap(n: int) -> None:
    for _ in traceml.wrap(range(n), name="bench_memory"):
        pass


def record_probes(n: int) -> None:
    step_begin, fetch_done, step_end = (
        traceml.step_begin,
        traceml.fetch_done,
        traceml.step_end,
    )
    for _ in itertools.repeat(None, n):
        step_begin()
        fetch_done()
        step_end()


def record_tracked(n: int) -> None:
    for _ in traceml.wrap(TaskTableIter(n), name="bench_memory_tracked"):
        pass


RECORDERS = {"wrap": record_wrap, "probes": record_probes,
             "tracked": record_tracked}


def measure(via: str, n: int) -> dict:
    """Record n steps into a freshly freed store; memory figures in bytes."""
    free_store()
    gc.collect()
    peak_reset = reset_peak()
    rss0 = proc_status_kib("VmRSS") * 1024
    t0 = time.perf_counter_ns()
    RECORDERS[via](n)
    elapsed = time.perf_counter_ns() - t0
    info = _core.default_recorder().store_info()
    rss1 = proc_status_kib("VmRSS") * 1024
    hwm1 = proc_status_kib("VmHWM") * 1024
    delivery = _core.default_recorder().snapshot_delivery() if hasattr(_core, "snapshot_delivery") else None
    tracked = delivery is not None and int((delivery[0] >= 0).sum())
    del delivery
    snap = _core.default_recorder().snapshot()
    rss_snap = proc_status_kib("VmRSS") * 1024
    snap_len = len(snap)
    del snap
    free_store()
    rss_freed = proc_status_kib("VmRSS") * 1024
    steps = info["steps"]
    return {
        "via": via,
        "steps": steps,
        "dropped": info["dropped_steps"],
        "delivery_steps": tracked or 0,
        "record_bytes": info["record_bytes"],
        "capacity": info["capacity"],
        "allocated_per_step": info["capacity"]
        * (info["record_bytes"] + (DELIVERY_BYTES if tracked else 0)) / steps,
        "rss_per_step": (rss1 - rss0) / steps,
        "peak_per_step": (hwm1 - rss0) / steps if peak_reset else None,
        "snapshot_per_step": (rss_snap - rss1) / snap_len,
        "freed_per_step": (rss1 - rss_freed) / steps,
        "ns_per_step": elapsed / steps,
    }


def measure_in_child(via: str, n: int) -> dict:
    """measure(via, n) in a fresh interpreter."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--no-machine",
             "--steps", str(n), "--via", via, "--child-out", out],
            check=True,
        )
        with open(out) as f:
            return json.load(f)


def report(results: list[dict]) -> list[Check]:
    print()
    rows = [
        ("steps recorded", "steps", "{:,}"),
        ("steps dropped", "dropped", "{:,}"),
        ("steps with a delivery (rank, worker)", "delivery_steps", "{:,}"),
        ("record size (bytes)", "record_bytes", "{}"),
        ("capacity (records)", "capacity", "{:,}"),
        ("allocated per step (bytes, + delivery)", "allocated_per_step", "{:.2f}"),
        ("RSS growth per step (bytes)", "rss_per_step", "{:.2f}"),
        ("peak RSS growth per step (bytes)", "peak_per_step", "{:.2f}"),
        ("snapshot() copy, per step (bytes)", "snapshot_per_step", "{:.2f}"),
        ("RSS returned by freeing (bytes/step)", "freed_per_step", "{:.2f}"),
        ("recording ns per step (page faults incl.)", "ns_per_step", "{:.1f}"),
    ]
    w = 42
    print(f"{'':{w}}" + "".join(f"{r['via']:>14}" for r in results))
    for label, key, fmt in rows:
        cells = "".join(
            f"{'n/a' if r[key] is None else fmt.format(r[key]):>14}" for r in results
        )
        print(f"{label:{w}}{cells}")
    checks = []
    for r in results:
        checks.append(
            Check("memory", f"record bytes per step ({r['via']})",
                  r["record_bytes"], "B", f"<= {TARGET_BYTES} B",
                  r["record_bytes"] <= TARGET_BYTES)
        )
        if r["delivery_steps"]:
            # Not the record: the delivery array beside it, 8 B a step.
            checks.append(
                Check("memory", f"resident bytes per step, RSS delta ({r['via']})",
                      r["rss_per_step"], "B", "none (32 B record + 8 B delivery)",
                      r["rss_per_step"] <= TARGET_BYTES + 8.5, info=True)
            )
        else:
            checks.append(
                Check("memory", f"resident bytes per step, RSS delta ({r['via']})",
                      r["rss_per_step"], "B",
                      f"<= {TARGET_BYTES} B (+page rounding)",
                      r["rss_per_step"] <= TARGET_BYTES + 0.5)
            )
        checks.append(
            Check("memory", f"allocated bytes per step, capacity ({r['via']})",
                  r["allocated_per_step"], "B", "none (doubling: < 2x resident)",
                  True, info=True)
        )
    return checks


def main(argv: list[str]) -> int:
    p = common_args(__doc__.splitlines()[0], timing=False)
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help="steps to record (default 10,000,000; quick: 1,000,000)",
    )
    p.add_argument(
        "--via", choices=[*RECORDERS, "all"], default="all",
        help="how to record the steps (default all, each in a fresh process)",
    )
    p.add_argument("--child-out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    n = args.steps or (1_000_000 if args.quick else 10_000_000)
    if args.child_out:  # a child of --via all: measure, write, no output
        with open(args.child_out, "w") as f:
            json.dump(measure(args.via, n), f)
        return 0
    if not args.no_machine:
        print_machine()
    if args.via == "all":
        print(f"\nmemory per step, {n:,} steps recorded into a fresh process each")
        results = [measure_in_child(via, n) for via in RECORDERS]
    else:
        print(f"\nmemory per step, {n:,} steps recorded into a freed store")
        results = [measure(args.via, n)]
    checks = report(results)
    print()
    print_checks(checks)
    write_json(args.json, checks, {"bench": "memory", "results": results})
    return 0


if __name__ == "__main__":
    run_main(main)
