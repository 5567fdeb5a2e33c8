"""report() on long runs: 1M and 10M steps, time and peak memory beside
the floor.

Each data set is appended to a fresh recorder's store through the
``_append_records`` testing hook (the same ``tm_store_push`` a loop uses,
so the store grows as in a loop), then ``rec.report()`` is timed in the
same process as the floor:

* the floor is the least any report must do: one pass over the records
  (the input wait ``fetch_done_ns - begin_ns`` of every step, one NumPy
  subtraction over the store) and one selection per percentile the report
  gives (``_core.percentiles`` of that wait at each of the 4 QUANTILES,
  each called on its own, for each of the 3 series: wait, compute, step);
* report() and the floor are timed alternately, ``--rounds`` times each;
  the best and the median are printed, and the ratio of the bests.

Memory, per step, beside the store's own 32 B: the peak resident memory
(``VmHWM``, reset through /proc/self/clear_refs before the call) above the
resident memory just before it; and, in a separate untimed call under
tracemalloc (NumPy's buffers and the C core's PyMem scratch are traced),
the peak of traced allocations, what is still allocated when report()
returns (``kept``: the Report's summary, whose stall and gap lists grow
with the stalls) and the transient, peak minus kept.  The RSS peak reads
0 where glibc serves the arrays from memory freed earlier (below its mmap
threshold, up to 32 MiB: the 1M-step runs); the traced figures do not
depend on that.

Data sets (every step of one source):

* ``fast``: the probes (source 0), waits of a few microseconds with a
  lognormal spread and a 1-in-1000 blip of 2-10 ms, compute 5 ms +- 10%:
  a healthy loop, the issue's "10 million probe steps";
* ``periodic``: a wrapped source without loader facts (id 1, 10
  epochs), a 40 ms stall every 8th step over 50 us waits: every stage of
  the report has work (1/8 of the steps in the stall lists, a period to
  test);
* ``loader``: a wrapped DataLoader with 4 workers as wrap() records it
  (loader facts per epoch, each batch's rank and worker in the store's
  delivery array), a 30 ms stall every 4th step: the delivery evidence and
  the attribution too, whose per-step rank and worker lists the Report
  keeps.

Targets (issue 10): report() on 10M steps in at most 1.5 s here, and at
most one store's worth (32 B per step) of transient memory above the
store.
"""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np

import traceml
from _common import (
    Check,
    common_args,
    print_checks,
    print_machine,
    proc_status_kib,
    reset_peak,
    run_main,
    clock,
    set_clock,
    write_json,
)
from traceml import _core
from traceml.build import QUANTILES

TARGET_S = 1.5
TARGET_BYTES = 32


def make_records(kind: str, n: int, seed: int = 0) -> np.ndarray:
    """n records of one source, in step order (RECORD_DTYPE)."""
    rng = np.random.default_rng(seed)
    if kind == "fast":
        wait = np.exp(rng.normal(np.log(4e3), 0.5, n)).astype(np.int64)
        blip = rng.random(n) < 1e-3
        wait[blip] = rng.integers(2_000_000, 10_000_000, int(blip.sum()))
        compute = rng.integers(4_500_000, 5_500_000, n)
        source, epochs = 0, 1
    elif kind == "periodic":
        wait = rng.integers(40_000, 60_000, n)
        wait[7::8] = rng.integers(38_000_000, 42_000_000, len(wait[7::8]))
        compute = rng.integers(9_000_000, 11_000_000, n)
        source, epochs = 1, 10
    elif kind == "loader":
        wait = rng.integers(40_000, 60_000, n)
        wait[3::4] = rng.integers(25_000_000, 35_000_000, len(wait[3::4]))
        compute = rng.integers(9_000_000, 11_000_000, n)
        source, epochs = 1, 10
    else:
        raise ValueError(kind)
    rec = np.zeros(n, dtype=_core.RECORD_DTYPE)
    step = wait + compute
    begin = np.empty(n, dtype=np.int64)
    begin[0] = 1_000_000_000
    np.cumsum(step[:-1], out=begin[1:])
    begin[1:] += begin[0]
    rec["begin_ns"] = begin
    rec["fetch_done_ns"] = begin + wait
    rec["end_ns"] = begin + step
    rec["source"] = source
    epoch = np.arange(n, dtype=np.int64) * epochs // n
    rec["epoch"] = epoch
    # Position in the epoch (saturated), as the wrap iterator records it.
    start = np.searchsorted(epoch, np.arange(epochs))
    pos = np.arange(n, dtype=np.int64) - start[epoch]
    flags = np.minimum(pos, _core.FLAG_POS_MAX) << _core.FLAG_POS_SHIFT
    flags[pos == 0] |= _core.FLAG_EPOCH_START
    rec["flags"] = flags if source != 0 else 0
    return rec


LOADER_WORKERS = 4


def fill(kind: str, n: int) -> traceml.Recorder:
    rec = traceml.Recorder()
    records = make_records(kind, n)
    if kind != "loader":
        rec._append_records(records)
    else:
        # A DataLoader with 4 workers as wrap() records one: its source's
        # loader facts, and each batch's rank (its position in the epoch)
        # and worker (round robin).
        src, _lease = rec.sources.for_iterable(object(), "loader")
        facts = {"num_workers": LOADER_WORKERS, "batch_size": 2, "prefetch_factor": 2,
                 "persistent_workers": False, "pin_memory": False, "in_order": True}
        src.kind, src.loader, src.epochs = "DataLoader", dict(facts), 10
        src.epoch_facts = {e: {"loader": dict(facts), "worker_pids": [], "start_method": "fork",
                               "torch_version": None, "usable_cpus": 2, "watched": False}
                           for e in range(10)}
        epoch = records["epoch"].astype(np.int64)
        start = np.searchsorted(epoch, np.arange(10))
        rank = (np.arange(n) - start[epoch]).astype(np.int32)
        rec._append_records(records, rank=rank, worker=rank % LOADER_WORKERS)
        del epoch, start, rank
    del records
    gc.collect()
    return rec


def floor_once(rec: traceml.Recorder) -> None:
    """One pass over the records, one selection per percentile."""
    records = rec.snapshot_view() if hasattr(rec, "snapshot_view") else rec.snapshot()
    wait = records["fetch_done_ns"] - records["begin_ns"]
    for _ in range(3):
        for q in QUANTILES:
            _core.percentiles(wait, q)



def measure(kind: str, n: int, rounds: int) -> dict:
    rec = fill(kind, n)
    store_bytes = rec.store_info()["capacity"] * rec.store_info()["record_bytes"]
    t_report, t_floor = [], []
    for _ in range(rounds):
        gc.collect()
        t0 = clock()
        floor_once(rec)
        t_floor.append(clock() - t0)
        gc.collect()
        t0 = clock()
        r = rec.report()
        t_report.append(clock() - t0)
        del r
    gc.collect()
    # Peak resident memory of one call, above what was resident before it.
    peak_ok = reset_peak()
    rss0 = proc_status_kib("VmRSS") * 1024
    r = rec.report()
    hwm = proc_status_kib("VmHWM") * 1024
    rss_kept = proc_status_kib("VmRSS") * 1024 - rss0
    diagnosis = r["diagnosis"]
    del r
    gc.collect()
    # Peak of traced allocations (untimed: tracemalloc slows Python objects).
    tracemalloc.start()
    r = rec.report()
    traced_kept, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del r, rec
    gc.collect()
    best_r, best_f = min(t_report), min(t_floor)
    return {
        "kind": kind, "steps": n, "diagnosis": diagnosis,
        "store_bytes": store_bytes,
        "report_best_s": best_r * 1e-9, "report_median_s": float(np.median(t_report)) * 1e-9,
        "floor_best_s": best_f * 1e-9, "floor_median_s": float(np.median(t_floor)) * 1e-9,
        "ratio": best_r / best_f,
        "peak_rss_per_step": (hwm - rss0) / n if peak_ok else None,
        "kept_rss_per_step": rss_kept / n,
        "traced_peak_per_step": traced_peak / n,
        # What the Report keeps (its summary's lists: stall steps, gaps) is
        # its result, not a transient.
        "traced_kept_per_step": traced_kept / n,
        "transient_per_step": (traced_peak - traced_kept) / n,
    }


def main(argv: list[str]) -> int:
    p = common_args(__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, nargs="*", default=None,
                   help="store sizes (default 1,000,000 and 10,000,000; "
                        "quick: 200,000)")
    p.add_argument("--kinds", nargs="*", default=["fast", "periodic", "loader"],
                   choices=["fast", "periodic", "loader"])
    args = p.parse_args(argv)
    set_clock(args.clock)
    sizes = args.steps or ([200_000] if args.quick else [1_000_000, 10_000_000])
    rounds = args.rounds or (2 if args.quick else 3)
    if not args.no_machine:
        print_machine()
    print(f"\nreport() on long runs ({args.clock} time; best / median of {rounds})")
    hdr = (f"{'data':>9} {'steps':>11} {'report s':>16} {'floor s':>16} "
           f"{'ratio':>6} {'RSS peak':>9} {'traced peak':>11} {'kept':>6} "
           f"{'transient':>9}  (B/step)")
    print(hdr)
    results, checks = [], []
    for n in sizes:
        for kind in args.kinds:
            m = measure(kind, n, rounds)
            results.append(m)
            peak = m["peak_rss_per_step"]
            print(f"{kind:>9} {n:>11,} "
                  f"{m['report_best_s']:>7.3f} / {m['report_median_s']:<6.3f} "
                  f"{m['floor_best_s']:>7.3f} / {m['floor_median_s']:<6.3f} "
                  f"{m['ratio']:>6.1f} {'n/a' if peak is None else f'{peak:.1f}':>9} "
                  f"{m['traced_peak_per_step']:>11.1f} {m['traced_kept_per_step']:>6.1f} "
                  f"{m['transient_per_step']:>9.1f}",
                  flush=True)
            if n >= 10_000_000:
                checks.append(Check("longrun", f"report() at {n:,} steps ({kind})",
                                    m["report_best_s"], "s", f"<= {TARGET_S} s",
                                    m["report_best_s"] <= TARGET_S))
                checks.append(Check("longrun", f"transient memory per step ({kind})",
                                    m["transient_per_step"], "B",
                                    f"<= {TARGET_BYTES} B",
                                    m["transient_per_step"] <= TARGET_BYTES))
    print()
    if checks:
        print_checks(checks)
    write_json(args.json, checks, {"bench": "longrun", "results": results})
    return 0


if __name__ == "__main__":
    run_main(main)
