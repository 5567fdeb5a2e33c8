"""Per-item overhead of ``for x in traceml.wrap(seq)``.

Three loops over the same iterable, interleaved round by round:

* bare: ``for x in seq: pass``;
* traceml: ``for x in traceml.wrap(seq): pass`` (the C iterator
  ``traceml._core.WrapIter``: two clock reads and one 32-byte record per
  item);
* pure Python: a generator that reads ``time.perf_counter_ns()`` before
  and after ``next()`` and appends both stamps to a list, i.e. what one
  would write without traceml (it records less than traceml: no epoch,
  source or flags).

over two iterables: a list of a few million small ints, and a ``range``.
traceml runs as configured by default (the /proc sampler on, which also
publishes each fetch for the stuck-loader watch); a "sampler off" row
(``traceml.configure(sampler=False)``) isolates that part.

The loop body is empty, so the numbers are the whole per-item cost of
iterating; "added" is the wrapped loop minus the bare loop's best timing.
The store is ``reset()`` before each traceml loop (the capacity
is kept); one more row frees the store first, so that loop pays for the
growth of the store from nothing (a first epoch).

Also printed: the fixed cost of an epoch (``iter()`` of the wrapper, which
starts the sampler thread, and the end of the loop, which stops it), and the
CPU the sampler thread uses during a wrapped loop (the timings read this
thread's CPU time, so they do not include it).

Target (the issue): <= 60 ns added per batch over bare iteration.  The
verdicts use the best (minimum) timing of each loop, the least disturbed
by other processes; medians are printed beside them.
"""

from __future__ import annotations

import time

import numpy as np

import traceml
from _common import (
    Check,
    Stat,
    clock,
    free_store,
    interleave,
    print_checks,
    run_main,
    start_sized,
    stat_header,
    write_json,
)

TARGET_NS = 60.0


def bare_loop(seq) -> None:
    for _ in seq:
        pass


def traceml_loop(seq) -> None:
    # Named, so that every loop continues one source: a list takes no weak
    # reference, and unnamed it would get a new source each time.
    for _ in traceml.wrap(seq, name="bench_wrap"):
        pass


def py_timed(iterable, stamps: list):
    """The pure-Python equivalent: stamp the clock around every next()."""
    it = iter(iterable)
    stamp = time.perf_counter_ns
    append = stamps.append
    while True:
        t0 = stamp()
        try:
            x = next(it)
        except StopIteration:
            return
        append(t0)
        append(stamp())
        yield x


def python_loop(seq) -> None:
    stamps: list = []
    for _ in py_timed(seq, stamps):
        pass


def sampler(on: bool):
    """A `before` hook: reset the store and set the sampler on or off."""

    def before() -> None:
        traceml.configure(sampler=on)
        traceml.reset()

    return before


def timed(loop, seq, before=traceml.reset):
    """A variant: ns per item of loop(seq)."""

    def run() -> float:
        before()
        t0 = clock()
        loop(seq)
        dt = clock() - t0
        traceml.configure(sampler=True)
        traceml.reset()
        return dt / len(seq)

    return run


def measure(n: int, rounds: int) -> dict[str, np.ndarray]:
    data = {"list": list(range(n)), "range": range(n)}
    variants = {}
    for kind, seq in data.items():
        variants[f"bare {kind}"] = timed(bare_loop, seq)
        variants[f"traceml {kind}"] = timed(traceml_loop, seq)
        variants[f"traceml {kind}, sampler off"] = timed(
            traceml_loop, seq, before=sampler(False))
        variants[f"python {kind}"] = timed(python_loop, seq)
    variants["traceml list, cold store"] = timed(
        traceml_loop, data["list"], before=free_store
    )
    for run in variants.values():  # warm-up, untimed
        run()
    return interleave(variants, rounds)


def epoch_cost(epochs: int, rounds: int) -> dict[str, float]:
    """Fixed cost of one epoch (iter() of the wrapper, loop start and end),
    in us of wall time (starting and joining the sampler thread is mostly
    waiting): best of `rounds` timings of `epochs` loops over an empty list."""
    empty: list = []
    wrapped = traceml.wrap(empty, name="bench_wrap_epochs")
    cases = {
        "sampler on": (wrapped, True),
        "sampler off": (wrapped, False),
        "bare": (empty, True),
    }
    out = {}
    for label, (iterable, on) in cases.items():
        traceml.configure(sampler=on)
        best = float("inf")
        for _ in range(rounds):
            t0 = time.perf_counter_ns()
            for _ in range(epochs):
                bare_loop(iterable)
            best = min(best, (time.perf_counter_ns() - t0) / epochs / 1e3)
        out[label] = best
    traceml.configure(sampler=True)
    traceml.reset()
    return out


def slow_batches(steps: int, step_s: float):
    """A loader whose every batch takes step_s of sleep (no CPU)."""
    for i in range(steps):
        time.sleep(step_s)
        yield i


def sampler_share(seconds: float, step_s: float = 0.01) -> float:
    """CPU used by traceml's sampler thread during a wrapped loop of
    `seconds`, as a share of one CPU: the process's CPU time minus this
    thread's, over the wall time.  The loop sleeps, as a loader waiting for
    its workers would, so nearly all CPU used is the sampler's."""
    traceml.configure(sampler=True)
    traceml.reset()
    wall, proc, main = (time.perf_counter_ns(), time.process_time_ns(),
                        time.thread_time_ns())
    for _ in traceml.wrap(slow_batches(int(seconds / step_s), step_s),
                          name="bench_wrap_sampler"):
        pass
    main = time.thread_time_ns() - main
    proc = time.process_time_ns() - proc
    wall = time.perf_counter_ns() - wall
    traceml.reset()
    return (proc - main) / wall


def report(res: dict[str, np.ndarray], n: int, rounds: int) -> list[Check]:
    print(
        f"\nper-item cost of iterating: {n:,} items per loop, {rounds} rounds "
        "interleaved; added = minus the bare loop's best timing"
    )
    w = 28
    print(f"{'':{w}} {'ns per item':^26}   {'added ns per item':^26}")
    print(f"{'':{w}} {stat_header('ns')}")
    for name, values in res.items():
        kind = "list" if "list" in name else "range"
        added = values - res[f"bare {kind}"].min()
        print(f"{name:{w}} {Stat.of(values).fmt()}   {Stat.of(added).fmt()}")

    def best(name: str) -> float:
        return float(res[name].min())

    def typical(name: str) -> float:
        return float(np.median(res[name]))

    checks = []
    print("\nratios (best timings, medians in brackets):")
    for kind in ("list", "range"):
        bare, tm, py = f"bare {kind}", f"traceml {kind}", f"python {kind}"
        off = f"traceml {kind}, sampler off"
        added_tm = best(tm) - best(bare)
        added_off = best(off) - best(bare)
        added_py = best(py) - best(bare)
        typ_tm = typical(tm) - typical(bare)
        typ_py = typical(py) - typical(bare)
        print(
            f"  {kind:5}: traceml / bare {best(tm) / best(bare):.2f}x "
            f"({typical(tm) / typical(bare):.2f}x); python / bare "
            f"{best(py) / best(bare):.2f}x ({typical(py) / typical(bare):.2f}x); "
            f"added, python / traceml {added_py / added_tm:.2f}x "
            f"({typ_py / typ_tm:.2f}x)"
        )
        print(
            f"         the sampler's stuck watch adds {added_tm - added_off:.1f} ns "
            f"per item ({added_off:.1f} ns added with the sampler off)"
        )
        checks.append(
            Check("wrap", f"added per item, wrap({kind}) over bare {kind}",
                  added_tm, "ns", f"<= {TARGET_NS:g} ns", added_tm <= TARGET_NS)
        )
        checks.append(
            Check("wrap", f"added per item, wrap({kind}), sampler off",
                  added_off, "ns", f"<= {TARGET_NS:g} ns",
                  added_off <= TARGET_NS, info=True)
        )
    cold = best("traceml list, cold store") - best("bare list")
    growth = best("traceml list, cold store") - best("traceml list")
    print(
        f"  store growth from nothing (first epoch), amortised per item: "
        f"{growth:+.1f} ns"
    )
    checks.append(
        Check("wrap", "added per item, wrap(list) incl. store growth (cold)",
              cold, "ns", f"<= {TARGET_NS:g} ns", cold <= TARGET_NS)
    )
    return checks


def main(argv: list[str]) -> int:
    args, n, rounds = start_sized(__doc__.splitlines()[0], argv, "--items",
                                  "items per loop", (3_000_000, 300_000), (9, 5))
    res = measure(n, rounds)
    checks = report(res, n, rounds)
    per_epoch = epoch_cost(50 if args.quick else 200, 3 if args.quick else 5)
    print(
        "  fixed cost per epoch, wall time (iter() of the wrapper, loop start "
        "and end): "
        + ", ".join(f"{k} {v:.1f} us" for k, v in per_epoch.items())
    )
    seconds = 0.5 if args.quick else 2.0
    share = sampler_share(seconds)
    print(
        f"  the sampler thread's CPU during a {seconds:g} s wrapped loop of "
        f"10 ms batches (not in the rows above, which time this thread): "
        f"{100 * share:.2f}% of one CPU"
    )
    checks.append(
        Check("wrap", "sampler thread CPU during a wrapped loop", 100 * share,
              "%", "none (configure() docs: < 1% of one CPU)", share < 0.01,
              info=True)
    )
    print()
    print_checks(checks)
    write_json(args.json, checks, {"bench": "wrap"})
    return 0


if __name__ == "__main__":
    run_main(main)
