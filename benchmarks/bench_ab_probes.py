"""The probes and wrap, this checkout against an earlier revision, in one run.

Builds ``traceml._core`` of ``--baseline`` (a git revision, default the
parent of the Recorder change) into a scratch directory, loads it beside
this checkout's as ``traceml_baseline._core`` (same ``PyInit__core``, another
package name), and times both in the same process, round by round in
alternating order, with the thread CPU clock:

* the probe triple ``step_begin(); fetch_done(); step_end()`` at module
  level (the default recorder in this checkout);
* this checkout's ``Recorder`` methods, which the baseline lacks;
* ``WrapIter`` over a list (the baseline's constructor takes no recorder).

Each row reports ns per step, best and median of the rounds, and the ratio
new / baseline of the best timings: the Recorder issue asks for no
regression beyond noise.  Run from the repository root:
``.venv/bin/python benchmarks/bench_ab_probes.py``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
import types

import numpy as np

import traceml
from traceml import _core

BASELINE = "63fed47"  # the last commit before the Recorder


def build_baseline(rev: str, where: str) -> str:
    """Path of the baseline's _core .so, built from `git archive rev`."""
    src = os.path.join(where, "src")
    os.makedirs(src)
    archive = subprocess.run(["git", "archive", rev, "csrc", "setup.py"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", src], input=archive, check=True)
    # setup.py reads pyproject's metadata only through setuptools: build the
    # extension alone.
    subprocess.run([sys.executable, "-c",
                    "import sys; sys.argv = ['setup.py', '-q', 'build_ext', '--build-lib', "
                    f"{os.path.join(where, 'lib')!r}, '--build-temp', "
                    f"{os.path.join(where, 'tmp')!r}]; exec(open('setup.py').read())"],
                   cwd=src, check=True, capture_output=True)
    lib = os.path.join(where, "lib", "traceml")
    return os.path.join(lib, next(f for f in os.listdir(lib) if f.startswith("_core")))


def load_as(path: str, package: str) -> types.ModuleType:
    sys.modules.setdefault(package, types.ModuleType(package))
    spec = importlib.util.spec_from_file_location(f"{package}._core", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


WARM_STEPS = 1100


def time_triples(begin, fetch, end, n: int) -> float:
    """ns per begin/fetch/end triple, thread CPU time, past a recording's
    first 1024 steps (clocked, as wrap's first fetches of an epoch are:
    about 2.5 us each, paid once)."""
    for _ in range(WARM_STEPS):
        begin()
        fetch()
        end()
    t0 = time.thread_time_ns()
    for _ in range(n):
        begin()
        fetch()
        end()
    return (time.thread_time_ns() - t0) / n


def time_loop(n: int) -> float:
    t0 = time.thread_time_ns()
    for _ in range(n):
        pass
    return (time.thread_time_ns() - t0) / n


def time_wrap(make_iter, items: list) -> float:
    t0 = time.thread_time_ns()
    for _ in make_iter(items):
        pass
    return (time.thread_time_ns() - t0) / len(items)


def time_list(items: list) -> float:
    t0 = time.thread_time_ns()
    for _ in iter(items):
        pass
    return (time.thread_time_ns() - t0) / len(items)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default=BASELINE)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--n", type=int, default=20000, help="steps per timing")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        old = load_as(build_baseline(args.baseline, tmp), "traceml_baseline")
        old_rec = old.Recorder()
        rec = traceml.Recorder()
        items = list(range(args.n))
        rows = {
            "loop overhead": lambda: time_loop(args.n),
            f"probes, baseline {args.baseline}": lambda: time_triples(
                old_rec.step_begin, old_rec.fetch_done, old_rec.step_end, args.n),
            "probes, module level (default recorder)": lambda: time_triples(
                traceml.step_begin, traceml.fetch_done, traceml.step_end, args.n),
            "probes, Recorder methods": lambda: time_triples(
                rec.step_begin, rec.fetch_done, rec.step_end, args.n),
            "list iteration": lambda: time_list(items),
            f"WrapIter over a list, baseline {args.baseline}": lambda: time_wrap(
                lambda it: old.WrapIter(iter(it), old_rec, 1, 0, old_rec.clock_ns()), items),
            "WrapIter over a list": lambda: time_wrap(
                lambda it: _core.WrapIter(iter(it), rec, 1, 0, rec.clock_ns()), items),
        }
        got = {name: [] for name in rows}
        names = list(rows)
        for r in range(args.rounds):
            order = names if r % 2 == 0 else names[::-1]
            for name in order:
                old_rec._reset_store()
                rec._reset_store()
                traceml.reset()
                got[name].append(rows[name]())
    best = {k: float(np.min(v)) for k, v in got.items()}
    print(f"ns per step, thread CPU time, {args.rounds} rounds of {args.n} steps, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'row':48s} {'best':>8s} {'median':>8s}")
    for k, v in got.items():
        print(f"{k:48s} {np.min(v):8.1f} {np.median(v):8.1f}")
    loop = best["loop overhead"]
    base_probes = best[f"probes, baseline {args.baseline}"] - loop
    base_wrap = best[f"WrapIter over a list, baseline {args.baseline}"] - best["list iteration"]
    print("\nratios new / baseline (best timings, loop or list iteration subtracted):")
    for k in ("probes, module level (default recorder)", "probes, Recorder methods"):
        print(f"  {k:46s} {(best[k] - loop) / base_probes:5.2f}")
    new_wrap = best["WrapIter over a list"] - best["list iteration"]
    print(f"  {'WrapIter over a list':46s} {new_wrap / base_wrap:5.2f}")


if __name__ == "__main__":
    main()
