"""Report.save() and traceml.load() of long runs: wall time and peak memory
against the floor, at 1M and 10M steps.

For each size, a synthetic run (lognormal ~50 us waits, a 30 ms stall
every 50th step, 5 ms compute; ``report.build`` over it, not timed) is
saved and loaded, in two shapes:

* "probes": the report of a probe-recorded loop (no delivery record), the
  shape the issue measured (20 s to save, 3.9 s to load 10M steps);
* "loader": the same with a DataLoader's per-step delivery record
  (``delivery.ranks`` and ``delivery.workers``, one int per step each),
  held as ``report.build`` holds it: two int64 arrays beside the summary,
  made into lists only on first use of ``Report.summary``.

Beside each, in the same process and interleaved round by round, the
floor, one pass over the same bytes with no zip, no checks:

* save floor: each field of the steps (and each delivery array) copied
  contiguous and written with its ``.npy`` header into one plain file,
  plus ``json.dumps`` of the summary and its write;
* load floor: one ``read()`` of that file, a fresh ``np.empty`` steps
  array filled from ``np.frombuffer`` views (and the delivery arrays
  copied out), plus ``json.loads`` of the summary.

Wall-clock time (file I/O is the cost; the page cache holds the file, as
it does right after a save), best and median of the rounds, and the peak
RSS above the RSS before each call (``VmHWM`` reset through
/proc/self/clear_refs), in bytes per step.  Files go to a temporary
directory (``--dir`` to choose), removed at the end.

Target (the issue): save() and load() of a 10M-step run each at most 2 s.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import tempfile
import time

import numpy as np

import traceml
from _common import Check, Stat, common_args, print_checks, print_machine, \
    proc_status_kib, reset_peak, run_main, write_json
from traceml import _core

TARGET_S = 2.0
TARGET_STEPS = 10_000_000



def make_report(n: int, loader: bool):
    """A Report of n synthetic steps (see the module docstring)."""
    build = importlib.import_module("traceml.build").build
    rng = np.random.default_rng(0)
    wait = rng.lognormal(np.log(50e3), 0.5, n).astype(np.int64)
    wait[::50] += 30_000_000
    compute = np.full(n, 5_000_000, np.int64)
    rec = np.zeros(n, dtype=_core.RECORD_DTYPE)
    step = wait + compute
    rec["begin_ns"] = 10**12 + np.cumsum(step) - step
    rec["fetch_done_ns"] = rec["begin_ns"] + wait
    rec["end_ns"] = rec["fetch_done_ns"] + compute
    info = {"dropped_steps": 0, "out_of_memory": False, "misuse": {},
            "probe_step_open": False}
    rep = build(rec, info, 0, None, sources={})
    if loader:
        summary = dict(rep.summary, delivery={"in_order": True, "overtaking": 0, "known": n})
        ranks = np.arange(n, dtype=np.int64)
        rep = traceml.Report(summary, rep.steps, delivery={"ranks": ranks, "workers": ranks % 4})
    return rep


def columns(rep) -> list:
    """The arrays a run file holds: the steps' fields, then the delivery
    arrays (without making the summary's lists)."""
    out = [rep.steps[field] for field in rep.steps.dtype.names]
    for key in ("ranks", "workers"):
        # A private read: .summary would make the lists the floor skips.
        if "ranks" not in (rep._summary.get("delivery") or {}):
            col = rep.delivery_column(key)
            if col is not None:
                out.append(col)
    return out


def floor_save(rep, path: str) -> None:
    with open(path, "wb") as f:
        for col in columns(rep):
            # A contiguous copy, then one write: write_array would hand the
            # strided field to ndarray.tofile(), which writes it element by
            # element.
            column = np.ascontiguousarray(col)
            np.lib.format.write_array_header_1_0(
                f, np.lib.format.header_data_from_array_1_0(column))
            f.write(column.data)
        f.write(json.dumps(rep._summary, separators=(",", ":")).encode())


def floor_load(rep, path: str) -> None:
    with open(path, "rb") as f:
        raw = f.read()
    n = len(rep.steps)
    steps = np.empty(n, dtype=_core.RECORD_DTYPE)
    offset = 0
    for field in steps.dtype.names:
        offset += 128  # the .npy header before each column
        dtype = steps.dtype[field]
        steps[field] = np.frombuffer(raw, dtype, n, offset)
        offset += n * dtype.itemsize
    for _ in columns(rep)[len(steps.dtype.names):]:
        offset += 128
        np.frombuffer(raw, np.int64, n, offset).copy()
        offset += n * 8
    json.loads(raw[offset:].decode())


def measure(call) -> tuple[float, float]:
    """(wall seconds, peak RSS above the start in bytes) of call()."""
    rss0 = proc_status_kib("VmRSS")
    reset_peak()
    t = time.perf_counter()
    call()
    wall = time.perf_counter() - t
    return wall, max(0, proc_status_kib("VmHWM") - rss0) * 1024.0


def bench(n: int, shape: str, rounds: int, where: str) -> dict:
    rep = make_report(n, loader=shape == "loader")
    run = os.path.join(where, f"run-{n}.traceml")
    flat = os.path.join(where, f"flat-{n}.bin")
    ops = {
        "save": lambda: rep.save(run),
        "save floor": lambda: floor_save(rep, flat),
        "load": lambda: traceml.load(run),
        "load floor": lambda: floor_load(rep, flat),
    }
    times = {k: [] for k in ops}
    peaks = {k: [] for k in ops}
    for r in range(rounds):
        # Saves first (the loads read their files); the order of each pair
        # alternates by round.
        for pair in (("save", "save floor"), ("load", "load floor")):
            for name in (pair if r % 2 == 0 else pair[::-1]):
                wall, peak = measure(ops[name])
                times[name].append(wall)
                peaks[name].append(peak)
    size = os.path.getsize(run)
    back = traceml.load(run)
    assert back == rep, "the loaded run differs from the saved one"
    os.remove(run)
    os.remove(flat)
    return {"n": n, "shape": shape, "file_bytes": size,
            "time": {k: Stat.of(v) for k, v in times.items()},
            "peak_per_step": {k: min(v) / n for k, v in peaks.items()}}


def main(argv: list[str]) -> int:
    p = common_args(__doc__.splitlines()[0], timing=False)
    p.add_argument("--steps", type=int, nargs="+", default=None,
                   help="run sizes (default 1,000,000 10,000,000; quick: 100,000)")
    p.add_argument("--shapes", nargs="+", choices=("probes", "loader"),
                   default=["probes", "loader"])
    p.add_argument("--rounds", type=int, default=None, help="rounds (default 3; quick 2)")
    p.add_argument("--dir", default=None, help="where to write the files (default: a "
                                               "temporary directory)")
    args = p.parse_args(argv)
    sizes = args.steps or ([100_000] if args.quick else [1_000_000, TARGET_STEPS])
    rounds = args.rounds or (2 if args.quick else 3)
    if not args.no_machine:
        print_machine()
    if not reset_peak():
        print("note: /proc/self/clear_refs refused: peaks are since process start")
    where = tempfile.mkdtemp(prefix="bench_runfile-", dir=args.dir)
    checks, results = [], []
    try:
        for shape in args.shapes:
            for n in sizes:
                res = bench(n, shape, rounds, where)
                results.append(res)
                t, pk = res["time"], res["peak_per_step"]
                print(f"\n{shape}, {n:,} steps, file {res['file_bytes'] / n:.1f} B/step; "
                      f"wall s best / median / max, peak RSS above start (B/step):")
                for op in ("save", "load"):
                    for name in (op, f"{op} floor"):
                        print(f"  {name:11} {t[name].fmt(3)}   peak {pk[name]:7.1f}")
                    ratio = t[op].min / max(t[f'{op} floor'].min, 1e-9)
                    print(f"  {op} / floor: {ratio:.2f}x")
                    checks.append(Check("bench_runfile", f"{op}() {shape} {n:,} steps",
                                        t[op].min, "s", f"<= {TARGET_S:g} s at 10M steps",
                                        t[op].min <= TARGET_S, info=n != TARGET_STEPS))
    finally:
        shutil.rmtree(where, ignore_errors=True)
    print()
    print_checks(checks)
    write_json(args.json, checks, {"results": [
        {**r, "time": {k: vars(v) for k, v in r["time"].items()}} for r in results]})
    return 0


if __name__ == "__main__":
    run_main(main)
