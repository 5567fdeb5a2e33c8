"""Instructions per probe call and per wrapped step, counted by callgrind.

Wall and CPU time on a shared machine move with the other jobs; the number
of instructions executed does not.  This script runs small loops under
``valgrind --tool=callgrind`` and reads how many instructions (Ir) each
executes, in two child processes:

* ``light`` (Python + traceml, no torch): an empty loop, a trivial C call
  (``math.gcd()``), ``traceml.clock_ns()``, the probe triple ``step_begin();
  fetch_done(); step_end()``, iteration of a ``range`` bare and through
  ``traceml.wrap``, and ``next()`` on a range iterator bare, between the
  probes and between two ``perf_counter_ns()`` stamps appended to a list
  (the hand-written shapes of bench_peers.py around a cheap fetch);
* ``dataloader`` (with torch): the loop of bench_peers.py, a real
  ``DataLoader`` over an in-memory ``TensorDataset`` (``num_workers=0``)
  and a small MLP forward as the step, bare (``for`` and ``next()`` by
  hand), through ``traceml.wrap``, with the probes, with a plain-Python
  ``perf_counter_ns()`` recorder and with ``torch.profiler.record_function``
  around the fetch; and ``record_function`` around ``next()`` of a range
  iterator.

Around a cheap fetch the counts repeat exactly from run to run.  A
DataLoader step executes about 500,000 instructions, and two identical
DataLoader loops differ by a few hundred to a thousand or so per step
(glibc's malloc state, CPython re-specialising attribute lookups): the
"A/A copy" row shows it, and the whole-process "added" of a cheap
instrumentation is lost in it.  The "in _core" column, the instructions
executed inside traceml's compiled module, is exact there too.

``--cache-sim`` runs callgrind's cache simulation too and adds, per
iteration, the level-1 instruction and data read misses inside ``_core``
(I1mr, D1mr): a real DataLoader's ``__next__`` evicts traceml's code and
data between two steps, so those misses, not the instructions, are most of
what ``wrap`` costs per step there (benchmarks/README.md, "The DataLoader
path").  The simulated caches are valgrind's model of this host's, not the
hardware's counters.

Each loop runs N and then 2N iterations (after a warm-up run of 2N, so that
the store has grown and the interpreter has specialised the code).  Each
run starts with a call of ``traceml._core.sampler_info()``, at whose entry
callgrind zeroes its counters (``--zero-before=mod_sampler_info``), and
ends with one of ``traceml._core.default_recorder().store_info()``, at whose entry it dumps
them (``--dump-before=rec_store_info``); so ``(I(2N) - I(N)) / N`` is the
instructions of one iteration, without the interpreter's start-up or any
per-run constant.  The garbage collector is off during the runs (it runs,
uncounted, before each), as timeit has it.  Only the main thread is counted
(``--separate-threads=yes``): traceml's sampler thread wakes on the wall
clock, which valgrind slows down 50-fold, so its count would depend on how
slow the run was (bench_sampler.py measures its CPU share instead).  The
stuck watch's per-fetch publication runs on the main thread and is counted.

"added" is a variant minus its baseline: the empty loop for the calls, the
bare loop of the same shape for the loops.

Without valgrind the script prints a message and exits 0.
"""

from __future__ import annotations

import gc
import glob
import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Neither function is on any loop path: at the entry of _core.sampler_info()
# callgrind zeroes its counters, at the entry of _core.default_recorder().store_info() it dumps
# them (and zeroes them).
ZERO = "mod_sampler_info"
MARKER = "rec_store_info"
CORE_OBJ = "traceml/_core."  # the compiled module's path, as callgrind names it


# --------------------------------------------------------------------------
# the child: runs under valgrind


def light_phases():
    """name -> (baseline or None, function of n)."""
    import traceml

    sb, fd, se = traceml.step_begin, traceml.fetch_done, traceml.step_end
    clk, gcd, wrap = traceml.clock_ns, math.gcd, traceml.wrap
    repeat = itertools.repeat

    def empty(n):
        for _ in repeat(None, n):
            pass

    def trivial(n):
        for _ in repeat(None, n):
            gcd()

    def clock(n):
        for _ in repeat(None, n):
            clk()

    def triple(n):
        for _ in repeat(None, n):
            sb()
            fd()
            se()

    def bare_range(n):
        for _ in range(n):
            pass

    def wrap_range(n):
        for _ in wrap(range(n), name="bench_callgrind"):
            pass

    # The hand-written shapes of bench_peers.py, around a cheap fetch.
    stamp = time.perf_counter_ns

    def bare_next(n):
        it = iter(range(n))
        for _ in repeat(None, n):
            x = next(it)  # noqa: F841 - held to the next fetch, as a loop holds its batch

    def probes_next(n):
        it = iter(range(n))
        for _ in repeat(None, n):
            sb()
            x = next(it)  # noqa: F841 - held to the next fetch, as a loop holds its batch
            fd()
            se()

    def probes_pair_next(n):
        it = iter(range(n))
        for _ in repeat(None, n):
            sb()
            x = next(it)  # noqa: F841 - held to the next fetch, as a loop holds its batch
            fd()

    def python_next(n):
        it = iter(range(n))
        stamps = []
        append = stamps.append
        for _ in repeat(None, n):
            t0 = stamp()
            x = next(it)  # noqa: F841 - held to the next fetch, as a loop holds its batch
            append(t0)
            append(stamp())

    return {
        "empty loop": (None, empty),
        "math.gcd()": ("empty loop", trivial),
        "traceml.clock_ns()": ("empty loop", clock),
        "probe triple (begin+fetch+end)": ("empty loop", triple),
        "bare range": (None, bare_range),
        "traceml wrap(range)": ("bare range", wrap_range),
        "range: bare next()": (None, bare_next),
        "range: traceml probes": ("range: bare next()", probes_next),
        "range: probes, no step_end": ("range: bare next()", probes_pair_next),
        "range: python list": ("range: bare next()", python_next),
    }


def dataloader_phases(steps: int):
    import torch

    import bench_peers
    import traceml

    class A:  # bench_peers' loop, sized for 2N steps per epoch
        dataset_steps = steps
        batch, dim, hidden, block = 8, 64, 256, 1
        light_block = 1

    ctx = bench_peers.Ctx(A, "dataloader", tm=traceml)
    loader, step = ctx.loader, ctx.step
    sb, fd, se, wrap = traceml.step_begin, traceml.fetch_done, traceml.step_end, traceml.wrap
    repeat, stamp = itertools.repeat, time.perf_counter_ns
    record_function, rf_name = torch.profiler.record_function, bench_peers.RF_NAME

    # Counted and left by break, as a training loop that stops early would
    # (itertools.islice would add its own cost per step).
    def bare_for_count(n):
        i = 0
        for batch in loader:
            step(batch)
            i += 1
            if i == n:
                break

    def wrap_for_count(n):
        i = 0
        for batch in wrap(loader):
            step(batch)
            i += 1
            if i == n:
                break

    def bare_next(n):
        it = iter(loader)
        for _ in repeat(None, n):
            batch = next(it)
            step(batch)

    def probes(n):
        it = iter(loader)
        for _ in repeat(None, n):
            sb()
            batch = next(it)
            fd()
            step(batch)
            se()

    def python_list(n):
        it = iter(loader)
        stamps = []
        append = stamps.append
        for _ in repeat(None, n):
            t0 = stamp()
            batch = next(it)
            append(t0)
            append(stamp())
            step(batch)

    def rec_fn(n):
        it = iter(loader)
        for _ in repeat(None, n):
            with record_function(rf_name):
                batch = next(it)
            step(batch)

    # record_function around a cheap fetch, as in the light child.
    def range_next(n):
        it = iter(range(n))
        for _ in repeat(None, n):
            x = next(it)  # noqa: F841 - held to the next fetch, as a loop holds its batch

    def range_rec_fn(n):
        it = iter(range(n))
        for _ in repeat(None, n):
            with record_function(rf_name):
                x = next(it)  # noqa: F841 - held to the next fetch, as a loop holds its batch

    return {
        "DataLoader bare for": (None, bare_for_count),
        "DataLoader bare for (A/A copy)": ("DataLoader bare for", bare_for_count),
        "DataLoader traceml wrap": ("DataLoader bare for", wrap_for_count),
        "DataLoader bare next()": (None, bare_next),
        "DataLoader traceml probes": ("DataLoader bare next()", probes),
        "DataLoader python list": ("DataLoader bare next()", python_list),
        "DataLoader record_function": ("DataLoader bare next()", rec_fn),
        "range: bare next() (torch loaded)": (None, range_next),
        "range: record_function": ("range: bare next() (torch loaded)", range_rec_fn),
    }


def child(kind: str, n: int, out: str) -> int:
    sys.path.insert(0, HERE)
    import traceml
    from traceml import _core

    phases = light_phases() if kind == "light" else dataloader_phases(2 * n + 10)
    start, mark = _core.sampler_info, _core.default_recorder().store_info  # zero, dump
    order = []  # the run of dump j + 1 (j >= 1) is order[j - 1]
    gc.disable()  # as timeit does: no collection inside a run
    mark()  # dump 1: start-up
    for name, (_, fn) in phases.items():
        for label, k in (("warm", 2 * n), ("N", n), ("2N", 2 * n)):
            gc.collect()  # uncounted: zeroed by start()
            start()
            fn(k)
            traceml.reset()  # constant: keeps the capacity grown by warm
            order.append((name, label))
            mark()
    with open(out, "w") as f:
        json.dump({"order": order, "n": n,
                   "baselines": {k: v[0] for k, v in phases.items()}}, f)
    return 0


# --------------------------------------------------------------------------
# the parent


def run_child(kind: str, n: int, tmp: str, timeout: float, cache_sim: bool = False) -> dict:
    out = os.path.join(tmp, f"{kind}.json")
    prefix = os.path.join(tmp, f"cg.{kind}")
    cmd = ["valgrind", "--tool=callgrind", "--separate-threads=yes",
           "--compress-strings=no", "--compress-pos=no",
           f"--cache-sim={'yes' if cache_sim else 'no'}",
           f"--zero-before={ZERO}", f"--dump-before={MARKER}",
           f"--callgrind-out-file={prefix}",
           sys.executable, os.path.abspath(__file__), "--child", kind,
           "--n", str(n), "--out", out]
    env = dict(os.environ, PYTHONHASHSEED="0")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=env)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0 or not os.path.exists(out):
        raise RuntimeError(f"callgrind child {kind} failed (exit {proc.returncode}):\n"
                           + proc.stderr[-3000:])
    with open(out) as f:
        meta = json.load(f)
    dumps = {}
    for path in glob.glob(prefix + ".*-01"):  # dumps of thread 1, the main one
        m = re.search(r"\.(\d+)-01$", path)
        dumps[int(m.group(1))] = self_cost_by_object(path)
    runs, core, misses = {}, {}, {}
    for j, (name, label) in enumerate(meta["order"], start=2):
        by_object = dumps[j]
        runs[(name, label)] = sum(v["Ir"] for v in by_object.values())
        mine = [v for ob, v in by_object.items() if CORE_OBJ in ob]
        core[(name, label)] = sum(v["Ir"] for v in mine)
        misses[(name, label)] = {e: sum(v.get(e, 0) for v in mine) for e in ("I1mr", "D1mr")}
    per = {name: (runs[(name, "2N")] - runs[(name, "N")]) / n
           for name in meta["baselines"]}
    per_core = {name: (core[(name, "2N")] - core[(name, "N")]) / n
                for name in meta["baselines"]}
    per_miss = {name: {e: (misses[(name, "2N")][e] - misses[(name, "N")][e]) / n
                       for e in ("I1mr", "D1mr")}
                for name in meta["baselines"]} if cache_sim else None
    return {"per": per, "core": per_core, "core_misses": per_miss,
            "baselines": meta["baselines"], "n": n, "seconds": elapsed,
            "runs": {f"{k[0]} / {k[1]}": v for k, v in runs.items()}}


def self_cost_by_object(path: str) -> dict:
    """Each object file's self cost (the cost lines of each function, not
    the inclusive cost lines that follow ``calls=``) per event of the dump
    ({object: {"Ir": ..., "I1mr": ..., ...}}; only Ir without the cache
    simulation), from a callgrind dump written with --compress-strings=no."""
    cost: dict = {}
    events = ["Ir"]
    ob, after_call = "?", False
    with open(path) as f:
        for line in f:
            c = line[:1]
            if c.isdigit() or c in "+-*":
                parts = line.split()
                if len(parts) >= 2:
                    if after_call:
                        after_call = False  # the inclusive cost of a call
                    else:
                        mine = cost.setdefault(ob, {})
                        for e, v in zip(events, parts[1:]):
                            mine[e] = mine.get(e, 0) + int(v)
            elif line.startswith("ob="):
                ob = line[3:].strip()
            elif line.startswith("calls="):
                after_call = True
            elif line.startswith("events:"):
                events = line.split()[1:]
    return cost


def main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="N = 10,000 (light) and 100 (DataLoader)")
    p.add_argument("--n", type=int, default=None,
                   help="light loops: N (default 100,000; the 2N run is 200,000)")
    p.add_argument("--dl-n", type=int, default=None,
                   help="DataLoader loops: N (default 500)")
    p.add_argument("--no-torch", action="store_true", help="skip the DataLoader child")
    p.add_argument("--cache-sim", action="store_true",
                   help="also count L1 instruction and data read misses in _core "
                        "(callgrind's cache simulation; slower)")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--json", metavar="PATH", default=None)
    p.add_argument("--no-machine", action="store_true")
    p.add_argument("--child", choices=["light", "dataloader"], help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args.child, args.n, args.out)

    sys.path.insert(0, HERE)
    from _common import Check, print_checks, print_machine, write_json

    if not args.no_machine:
        print_machine()
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("\nvalgrind is not installed: no instruction counts (apt-get install valgrind)")
        write_json(args.json, [], {"bench": "callgrind", "skipped": "no valgrind"})
        return 0
    version = subprocess.run(["valgrind", "--version"], capture_output=True,
                             text=True).stdout.strip()
    n = args.n or (10_000 if args.quick else 100_000)
    dl_n = args.dl_n or (100 if args.quick else 500)
    kinds = [("light", n)] + ([] if args.no_torch else [("dataloader", dl_n)])
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_callgrind_") as tmp:
        for kind, k in kinds:
            print(f"\nrunning the {kind} loops under {version} (N = {k:,}) ...",
                  flush=True)
            results[kind] = run_child(kind, k, tmp, args.timeout, args.cache_sim)
            print(f"  {results[kind]['seconds']:.0f} s")

    print("\ninstructions (Ir, main thread) per iteration = (I(2N) - I(N)) / N;"
          " 'in _core' = those executed in traceml's compiled module itself")
    w = 34
    print(f"{'':{w}} {'per iteration':>14} {'added':>10} {'in _core':>9}  vs")
    added, core = {}, {}
    for kind, r in results.items():
        print(f"{kind} (N = {r['n']:,}):")
        for name, per in r["per"].items():
            base = r["baselines"][name]
            core[name] = r["core"][name]
            if base is None:
                print(f"  {name:{w - 2}} {per:14,.1f}")
            else:
                added[name] = per - r["per"][base]
                print(f"  {name:{w - 2}} {per:14,.1f} {added[name]:10,.1f} "
                      f"{core[name]:9,.1f}  {base}")
    triple = added.get("probe triple (begin+fetch+end)")
    if triple is not None:
        print(f"  per probe call (the triple / 3): {triple / 3:,.1f} instructions")
    if args.cache_sim:
        print("\nL1 read misses in _core per iteration (callgrind's simulated caches):")
        print(f"{'':{w}} {'I1mr':>8} {'D1mr':>8}")
        for r in results.values():
            for name, m in r["core_misses"].items():
                if m["I1mr"] or m["D1mr"]:
                    print(f"  {name:{w - 2}} {m['I1mr']:8.2f} {m['D1mr']:8.2f}")

    checks = []
    if triple is not None:
        checks.append(Check("callgrind", "instructions per probe call (triple / 3)",
                            triple / 3, "", "none", True, info=True))
        checks.append(Check("callgrind", "instructions added per wrapped range item",
                            added["traceml wrap(range)"], "", "none", True, info=True))
    if triple is not None:
        # Around a cheap fetch the counts are exact: the verdict on "least".
        others = {k: v for k, v in added.items() if k.startswith("range:")
                  and "traceml" not in k and "probes" not in k}
        ours = min(added["traceml wrap(range)"], added["range: traceml probes"],
                   added["range: probes, no step_end"])
        low = min(others, key=others.get)
        checks.append(Check("callgrind",
                            f"cheap fetch: fewest added instructions, {low} minus traceml's",
                            others[low] - ours, "", "> 0 (traceml adds the least)",
                            ours < others[low]))
    if "DataLoader traceml wrap" in added:
        checks.append(Check("callgrind",
                            "instructions in _core per wrapped DataLoader step",
                            core["DataLoader traceml wrap"], "", "none", True, info=True))
        checks.append(Check("callgrind", "instructions added per wrapped DataLoader step "
                            "(whole process: within the A/A noise)",
                            added["DataLoader traceml wrap"], "", "none", True, info=True))
        checks.append(Check("callgrind", "DataLoader A/A copy: |added| (the noise)",
                            abs(added["DataLoader bare for (A/A copy)"]), "", "none",
                            True, info=True))
        miss = results["dataloader"]["core_misses"]
        if miss is not None:
            m = miss["DataLoader traceml wrap"]
            checks.append(Check("callgrind", "L1 read misses in _core per wrapped DataLoader "
                                "step (I1mr + D1mr)", m["I1mr"] + m["D1mr"], "", "none",
                                True, info=True))
    print()
    print_checks(checks)
    write_json(args.json, checks, {
        "bench": "callgrind", "valgrind": version,
        "results": {k: {kk: vv for kk, vv in v.items()} for k, v in results.items()},
        "added": added,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
