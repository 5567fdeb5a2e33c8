"""Cost per call of the hand-placed probes, from Python.

Times ``traceml.step_begin()``, ``fetch_done()``, ``step_end()`` and the
full begin + fetch + end triple with ``timeit``, interleaved round by
round with baselines measured in the same process:

* ``pass``: the timeit loop itself (subtracted to give the *net* cost);
* a trivial C call: ``math.gcd()`` with no arguments, a METH_FASTCALL
  builtin like the probes, which returns the cached int 0, i.e. the bare
  cost of calling into C from Python; and ``sys.is_finalizing()``, a
  METH_NOARGS builtin (CPython 3.11 does not specialise calls to those, so
  it is slower);
* ``time.perf_counter_ns()`` and ``traceml.clock_ns()``: a clock read plus
  the creation of a Python int.

A probe called alone repeatedly does not follow its normal path, so each
isolated row says which path it takes; the triple is the real sequence and
gives the headline "per probe call" cost (triple / 3).

The store is ``reset()`` before every timing so that it does not grow
without bound; ``reset()`` keeps the allocated array, so these rows do not
pay for growth.  The "cold store" row frees the array first and so pays
for every doubling and every first touch of a page: its difference to the
warm triple is the amortised cost of growth.

Target (the issue): <= 40 ns per probe call.  The verdicts use the best
(minimum) timing of each row, the least disturbed by the other processes
of a shared machine; the medians are printed beside them.
"""

from __future__ import annotations

import math
import sys
import time
import timeit

import numpy as np

import traceml
from _common import (
    Check,
    Stat,
    clock_seconds,
    free_store,
    interleave,
    print_checks,
    run_main,
    start_sized,
    stat_header,
    write_json,
)

TARGET_NS = 40.0

# name -> (statement, setup, probe calls per statement, store before timing,
#          what the row measures).  store: "reset" keeps the capacity,
#          "free" frees the array so growth is paid inside the timing.
VARIANTS = {
    "empty loop (pass)": ("pass", "pass", 1, "reset", "the timeit loop"),
    "trivial C call": (
        "gcd()",
        "pass",
        1,
        "reset",
        "math.gcd(): METH_FASTCALL like the probes, returns a cached 0",
    ),
    "trivial NOARGS C call": (
        "is_finalizing()",
        "pass",
        1,
        "reset",
        "sys.is_finalizing(): METH_NOARGS (not specialised in 3.11)",
    ),
    "time.perf_counter_ns()": (
        "perf_counter_ns()",
        "pass",
        1,
        "reset",
        "clock read + a new int",
    ),
    "traceml.clock_ns()": ("clock_ns()", "pass", 1, "reset", "clock read + a new int"),
    "step_begin()": (
        "step_begin()",
        "pass",
        1,
        "reset",
        "alone: every call also closes the open step and writes a record",
    ),
    "fetch_done()": (
        "fetch_done()",
        "step_begin()",
        1,
        "reset",
        "with a step open (a repeated fetch: the normal path + a counter)",
    ),
    "step_end()": (
        "step_end()",
        "pass",
        1,
        "reset",
        "alone: no step open, clock + misuse counter, no record",
    ),
    "begin+end pair": (
        "step_begin(); step_end()",
        "pass",
        2,
        "reset",
        "step_end() on its real path: closes the step, writes a record",
    ),
    "begin+fetch+end triple": (
        "step_begin(); fetch_done(); step_end()",
        "pass",
        3,
        "reset",
        "the real sequence: one record per triple",
    ),
    "triple as traceml.x()": (
        "traceml.step_begin(); traceml.fetch_done(); traceml.step_end()",
        "pass",
        3,
        "reset",
        "as usually written: + module attribute lookups",
    ),
    "triple, cold store": (
        "step_begin(); fetch_done(); step_end()",
        "pass",
        3,
        "free",
        "store freed first: pays every doubling and page fault",
    ),
}

NAMESPACE = {
    "gcd": math.gcd,
    "is_finalizing": sys.is_finalizing,
    "perf_counter_ns": time.perf_counter_ns,
    "clock_ns": traceml.clock_ns,
    "step_begin": traceml.step_begin,
    "fetch_done": traceml.fetch_done,
    "step_end": traceml.step_end,
    "traceml": traceml,
}


def make_variant(stmt: str, setup: str, calls: int, store: str, number: int):
    """A callable timing `number` executions of stmt; returns ns per call."""
    timer = timeit.Timer(stmt, setup, timer=clock_seconds, globals=NAMESPACE)

    def run() -> float:
        if store == "free":
            free_store()
        else:
            traceml.reset()
        seconds = timer.timeit(number)
        traceml.reset()
        return seconds * 1e9 / (number * calls)

    return run


def measure(number: int, rounds: int) -> dict:
    variants = {
        name: make_variant(stmt, setup, calls, store, number)
        for name, (stmt, setup, calls, store, _) in VARIANTS.items()
    }
    # One untimed pass: warms caches, the specialising interpreter and the
    # store's capacity.
    for run in variants.values():
        run()
    per_call = interleave(variants, rounds)
    # The loop's cost is a constant: its least disturbed timing is the best
    # estimate of it.  It is paid once per statement, not per probe call.
    empty = per_call["empty loop (pass)"].min()
    net = {
        name: values - empty / VARIANTS[name][2]
        for name, values in per_call.items()
    }
    return {"per_call": per_call, "net": net}


def report(res: dict, number: int, rounds: int) -> list[Check]:
    per_call, net = res["per_call"], res["net"]
    print(
        f"\nprobe cost per call: {number:,} statements per timing, {rounds} "
        "rounds interleaved; net = minus the empty loop's best timing"
    )
    w = 24
    print(f"{'':{w}} {'ns per call':^26}   {'net ns per call':^26}")
    print(f"{'':{w}} {stat_header('ns')}")
    for name in VARIANTS:
        print(
            f"{name:{w}} {Stat.of(per_call[name]).fmt()}   "
            f"{Stat.of(net[name]).fmt()}   {VARIANTS[name][4]}"
        )

    def best(name: str) -> float:
        return float(net[name].min())

    def typical(name: str) -> float:
        return float(np.median(net[name]))

    triple = "begin+fetch+end triple"
    print("\nratios (net of the loop; best timings, medians in brackets):")
    for base in ("trivial C call", "traceml.clock_ns()", "time.perf_counter_ns()"):
        print(
            f"  per probe in the triple / {base}: "
            f"{best(triple) / best(base):.2f}x "
            f"({typical(triple) / typical(base):.2f}x)"
        )
    call = best("trivial C call")
    print(
        f"  per probe in the triple beyond a trivial C call (clock read + "
        f"bookkeeping): {best(triple) - call:.1f} ns; clock_ns() beyond it "
        f"(clock read + a new int): {best('traceml.clock_ns()') - call:.1f} ns"
    )
    growth = (best("triple, cold store") - best(triple)) * 3
    print(
        f"  amortised growth of the store, per step (cold - warm triple, "
        f"{number:,} steps from an empty store): {growth:+.1f} ns"
    )
    attr = best("triple as traceml.x()") - best(triple)
    print(
        f"  writing traceml.step_begin() instead of a local name: "
        f"{attr:+.1f} ns per call"
    )

    def check(name: str, value: float) -> Check:
        return Check("probes", name, value, "ns", f"<= {TARGET_NS:g} ns",
                     value <= TARGET_NS)

    isolated = ["step_begin()", "fetch_done()", "step_end()", "begin+end pair"]
    worst = max(isolated, key=best)
    return [
        check("per probe call in a begin+fetch+end triple (net)", best(triple)),
        check(f"slowest probe on its own: {worst} (net)", best(worst)),
        check(
            "per probe call with store growth amortised (cold triple, net)",
            best("triple, cold store"),
        ),
        check(
            "per probe call, traceml.x() form, loop included (gross)",
            float(per_call["triple as traceml.x()"].min()),
        ),
    ]


def main(argv: list[str]) -> int:
    args, number, rounds = start_sized(__doc__.splitlines()[0], argv, "--number",
                                       "statements per timing", (1_000_000, 100_000), (15, 5))
    res = measure(number, rounds)
    checks = report(res, number, rounds)
    print()
    print_checks(checks)
    write_json(args.json, checks, {"bench": "probes"})
    return 0


if __name__ == "__main__":
    run_main(main)
