"""The floors under two speed targets: what the clock read and CPython's
call of a C function cost by themselves, beside what traceml adds.

Two parts (``--parts``), each timed in one process, its variants
interleaved round by round in a random order and paired by round with the
bare loop of the same round (this thread's CPU time):

* ``probes``: the light loop of bench_peers.py (a list iterator, no step).
  ``python list`` is its hand-written recorder (``perf_counter_ns()``
  before and after ``next()``, both appended to a list); ``traceml
  probes`` the triple ``step_begin(); next(it); fetch_done(); step_end()``;
  ``probes, no step_end`` the pair ``step_begin(); next(it); fetch_done()``
  (the next ``step_begin()`` ends the step): the same two stamps a step as
  the Python recorder, and the form the target is checked on;
  ``probes, test clock`` the same with the recorder's test clock set (its
  values come from an array: no clock read), so that the difference is the
  three clock reads; ``3 C calls reading the clock`` is
  ``fetch_done()`` called three times outside a step (each call reads
  the clock and returns None: the least any three-call probe can cost);
  ``3 C calls`` is ``math.gcd()`` three times (CPython's call of a C
  function alone).  Target (issue 8): the probes add at most 0.6x what the
  Python recorder adds, taking the same stamps (``probes, no step_end``);
  the triple, one clock read more, is shown beside it.
* ``loader``: a ``DataLoader`` over an in-memory ``TensorDataset``
  (``batch_size=1``, ``num_workers=0``, the default collate), as in
  bench_loader.py's ``tensor`` case.  ``islice`` (``itertools.islice(it,
  None)``) is a C iterator that forwards each item and does nothing else;
  ``WrapIter`` traceml's C iterator made directly (two clock reads and the
  record; no watch, no tracking, no sampler thread); ``WrapIter, test
  clock`` the same without the clock reads.  A DataLoader's ``__next__``
  evicts the iterator's code and data, and the vDSO's, between two steps,
  so a clock read costs more here than in a hot loop.  Target (issue 8):
  at most 100 ns per step.

The test clock is a testing hook (``Recorder._set_test_clock``); its
stamps are meaningless here and are thrown away with the store.
"""

from __future__ import annotations

import itertools
import math
import time

import numpy as np

import traceml
from traceml import _core
from _common import (
    Check,
    clock,
    common_args,
    interleave,
    mean_ci,
    median_ci,
    print_checks,
    print_machine,
    run_main,
    set_clock,
    write_json,
)


def probes_variants(block: int) -> dict:
    batches = list(range(2 * block))
    rec = _core.default_recorder()
    sb, fd, se = traceml.step_begin, traceml.fetch_done, traceml.step_end
    gcd = math.gcd
    stamp = time.perf_counter_ns
    test_values = list(range(1, 3 * block + 16))

    def bare():
        it = iter(batches)
        t0 = clock()
        for _ in itertools.repeat(None, block):
            next(it)
        return (clock() - t0) / block

    def python_list():
        kept: list = []
        append = kept.append
        it = iter(batches)
        t0 = clock()
        for _ in itertools.repeat(None, block):
            t = stamp()
            next(it)
            append(t)
            append(stamp())
        return (clock() - t0) / block

    def probes(test_clock: bool, step_end: bool = True):
        def run():
            rec._reset_store()
            if test_clock:
                rec._set_test_clock(test_values)
            it = iter(batches)
            t0 = clock()
            if step_end:
                for _ in itertools.repeat(None, block):
                    sb()
                    next(it)
                    fd()
                    se()
            else:
                for _ in itertools.repeat(None, block):
                    sb()
                    next(it)
                    fd()
            t = (clock() - t0) / block
            if test_clock:
                rec._set_test_clock(None)
            rec._reset_store()
            return t
        return run

    def calls(f):
        def run():
            it = iter(batches)
            t0 = clock()
            for _ in itertools.repeat(None, block):
                f()
                next(it)
                f()
                f()
            return (clock() - t0) / block
        return run

    return {
        "bare next()": bare,
        "python list": python_list,
        "traceml probes": probes(False),
        "probes, no step_end": probes(False, step_end=False),
        "probes, test clock": probes(True),
        "3 C calls reading the clock": calls(fd),
        "3 C calls": calls(gcd),
    }


def loader_variants(steps: int) -> dict:
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_num_threads(1)
    ds = TensorDataset(torch.randn(steps + 8, 4), torch.randint(0, 10, (steps + 8,)))
    loader = DataLoader(ds, batch_size=1)
    rec = _core.Recorder()
    test_values = list(range(1, 2 * steps + 64))

    def epoch(make, test_clock: bool = False):
        def run():
            rec._reset_store()
            it = make()
            if test_clock:
                rec._set_test_clock(test_values)
            t0 = clock()
            for _ in itertools.islice(it, steps):
                pass
            t = (clock() - t0) / steps
            if test_clock:
                rec._set_test_clock(None)
            for _ in it:
                pass
            return t
        return run

    def wrapiter():
        return _core.WrapIter(iter(loader), rec, 1, 0, time.monotonic_ns())

    return {
        "bare": epoch(lambda: iter(loader)),
        "islice": epoch(lambda: itertools.islice(iter(loader), None)),
        "WrapIter": epoch(wrapiter),
        "WrapIter, test clock": epoch(wrapiter, test_clock=True),
    }


def table(res: dict, base: str, unit: str) -> dict:
    """Print each variant's extra over ``base``, paired by round; returns
    {name: (median, lo, hi, mean)}."""
    out = {}
    b = res[base]
    print(f"  {base}: {np.median(b):,.1f} ns {unit} (median)")
    print(f"  {'':34} {'median':>8} {'95% CI':>18} {'mean':>8} {'+-1.96 se':>18}")
    for name, v in res.items():
        if name == base:
            continue
        d = v - b
        lo, hi = median_ci(d)
        m, mlo, mhi = mean_ci(d)
        out[name] = (float(np.median(d)), lo, hi, m)
        print(f"  {name:34} {np.median(d):8.1f} {f'[{lo:.1f}, {hi:.1f}]':>18} "
              f"{m:8.1f} {f'[{mlo:.1f}, {mhi:.1f}]':>18}")
    return out


def run_part(title: str, variants: dict, rounds: int, seed: int, base: str):
    """Time the variants (3 warm-up rounds dropped) and print their table;
    returns (per-round results, table rows)."""
    print(f"\n--- {title}, {rounds} rounds (+3 warm-up), random order")
    res = interleave(variants, rounds + 3, shuffle=seed)
    res = {k: v[3:] for k, v in res.items()}
    return res, table(res, base, "a step")


def paired(res: dict, a: str, b: str) -> tuple[float, float, float]:
    """a - b, paired by round: (median, lo, hi) with its 95% interval."""
    d = res[a] - res[b]
    lo, hi = median_ci(d)
    print(f"  {a} - {b}, paired by round: {np.median(d):.1f} [{lo:.1f}, {hi:.1f}] ns a step")
    return float(np.median(d)), lo, hi


def main(argv: list[str]) -> int:
    p = common_args(__doc__.splitlines()[0])
    p.add_argument("--parts", nargs="+", choices=["probes", "loader"],
                   default=["probes", "loader"])
    p.add_argument("--block", type=int, default=None,
                   help="probes: steps per timed block (default 20,000; quick: 5,000)")
    p.add_argument("--steps", type=int, default=None,
                   help="loader: steps per epoch (default 2,000; quick: 500)")
    args = p.parse_args(argv)
    set_clock(args.clock)
    if not args.no_machine:
        print_machine()
    checks: list[Check] = []
    extra: dict = {}
    if "probes" in args.parts:
        block = args.block or (5_000 if args.quick else 20_000)
        rounds = args.rounds or (10 if args.quick else 60)
        res, t = run_part(f"probes: a list iterator, {block:,}-step blocks",
                          probes_variants(block), rounds, 1, "bare next()")
        py = t["python list"][0]
        ratio = {k: t[k][0] / py for k in t}
        paired_ratio = np.median((res["probes, no step_end"] - res["bare next()"])
                                 / (res["python list"] - res["bare next()"]))
        print(f"  added / python list's (medians): probes, no step_end "
              f"{ratio['probes, no step_end']:.3f}x, probes {ratio['traceml probes']:.3f}x, "
              f"probes with the test clock {ratio['probes, test clock']:.3f}x, "
              f"3 C calls reading the clock {ratio['3 C calls reading the clock']:.3f}x, "
              f"3 C calls {ratio['3 C calls']:.3f}x; paired by round: probes, no step_end "
              f"{paired_ratio:.3f}x")
        reads = paired(res, "traceml probes", "probes, test clock")
        above = paired(res, "traceml probes", "3 C calls reading the clock")
        checks += [
            Check("floor", "probes, no step_end (the recorder's two stamps) added / "
                  "python list added (medians)", ratio["probes, no step_end"], "x", "<= 0.6",
                  ratio["probes, no step_end"] <= 0.6),
            Check("floor", "probes with step_end (three stamps) added / python list added "
                  "(medians)", ratio["traceml probes"], "x", "none", True, info=True),
            Check("floor", "floor: 3 C calls reading the clock / python list (medians)",
                  ratio["3 C calls reading the clock"], "x", "none", True, info=True),
            Check("floor", "probes minus the floor, per step (paired median)",
                  above[0], "ns", "none", True, info=True),
            Check("floor", "the probes' three clock reads, per step (paired median)",
                  reads[0], "ns", "none", True, info=True),
        ]
        extra["probes"] = {"added_ns": t, "ratio": ratio, "paired_ratio": float(paired_ratio)}
    if "loader" in args.parts:
        steps = args.steps or (500 if args.quick else 2_000)
        rounds = args.rounds or (20 if args.quick else 300)
        res, t = run_part("loader: DataLoader(TensorDataset, batch_size=1, num_workers=0), "
                          f"{steps:,}-step epochs", loader_variants(steps), rounds, 2, "bare")
        reads = paired(res, "WrapIter", "WrapIter, test clock")[0]
        over_null = paired(res, "WrapIter", "islice")
        lo, hi = t["WrapIter"][1], t["WrapIter"][2]
        resolved = hi <= 100 or lo > 100
        checks += [
            Check("floor", f"loader: WrapIter extra per step, median (95% CI [{lo:.0f}, {hi:.0f}]"
                  + ("" if resolved else ": unresolved") + ")",
                  t["WrapIter"][0], "ns", "<= 100 ns", hi <= 100),
            Check("floor", "loader: the two clock reads a step (WrapIter - test clock)",
                  reads, "ns", "none", True, info=True),
            Check("floor", "loader: islice (a C iterator doing nothing) extra per step",
                  t["islice"][0], "ns", "none", True, info=True),
            Check("floor", f"loader: WrapIter - islice, per step (paired median, 95% CI "
                  f"[{over_null[1]:.0f}, {over_null[2]:.0f}])",
                  over_null[0], "ns", "none", True, info=True),
        ]
        extra["loader"] = {"added_ns": t}
    print()
    print_checks(checks)
    write_json(args.json, checks, extra)
    return 0


if __name__ == "__main__":
    run_main(main)
