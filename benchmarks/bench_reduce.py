"""The C reducers against NumPy on 10 million int64 samples.

* percentiles: median, p95 and p99 in one call,
  ``traceml._core.percentiles(x, [50, 95, 99])`` (a histogram of the high
  bits, then selection in the buckets holding the wanted ranks) against
  ``numpy.percentile(x, [50, 95, 99])`` (method "linear", the same rule) and
  against a hand-written ``numpy.partition`` at the needed ranks plus the
  linear interpolation.  The results are checked equal, |diff| <= 1 ns.
* summary: ``traceml._core.summary(x)`` (count, exact sum, mean, population
  std, min, max in C) against ``x.mean(), x.std(), x.min(), x.max()``;
  min/max checked exact, mean and std to a relative 1e-9.

The samples are int64 nanosecond durations of three shapes: a lognormal
mix (95 % fetches of ~40 us, 5 % stalls of ~80 ms), uniform random over
[0, 2**40), and a narrow range with many ties.  Variants are interleaved
round by round; the ratio is taken on the best (minimum) timing of each,
the medians are printed beside.

Target (the issue): percentiles faster than NumPy.
"""

from __future__ import annotations

import math

import numpy as np

from _common import (
    Check,
    Stat,
    clock,
    interleave,
    print_checks,
    run_main,
    start_sized,
    stat_header,
    write_json,
)
from traceml import _core

Q = [50.0, 95.0, 99.0]


def make_data(n: int, seed: int = 20240611) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    stalls = rng.random(n) < 0.05
    mix = np.where(
        stalls,
        rng.lognormal(math.log(80e6), 0.3, n),
        rng.lognormal(math.log(40e3), 0.5, n),
    ).astype(np.int64)
    return {
        "lognormal mix": mix,
        "uniform [0, 2**40)": rng.integers(0, 2**40, n, dtype=np.int64),
        "narrow, many ties": rng.integers(30_000, 30_100, n, dtype=np.int64),
    }


def partition_percentiles(x: np.ndarray, q) -> np.ndarray:
    """numpy.percentile's "linear" rule by hand, on one np.partition."""
    n = len(x)
    h = (n - 1) * np.asarray(q, dtype=float) / 100.0
    lo = np.floor(h).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    part = np.partition(x, np.unique(np.concatenate([lo, hi])))
    a = part[lo].astype(float)
    b = part[hi].astype(float)
    return a + (b - a) * (h - lo)


def numpy_summary(x: np.ndarray) -> dict:
    return {"mean": x.mean(), "std": x.std(), "min": x.min(), "max": x.max()}


def exact_sum(x: np.ndarray) -> int:
    """The exact sum as a Python int (int64 sums of 20-bit halves)."""
    return (int((x >> 20).sum()) << 20) + int((x & ((1 << 20) - 1)).sum())


def verify(data: dict[str, np.ndarray]) -> list[Check]:
    """Equality of the C reducers with NumPy on every data set."""
    worst_pct = 0.0
    summary_ok = True
    for name, x in data.items():
        ref = np.percentile(x, Q)
        got = _core.percentiles(x, Q)
        part = partition_percentiles(x, Q)
        diff = float(np.max(np.abs(got - ref)))
        worst_pct = max(worst_pct, diff)
        if not np.allclose(part, ref, rtol=0, atol=1.0):
            raise AssertionError(f"partition_percentiles is wrong on {name}")
        s = _core.summary(x)
        r = numpy_summary(x)
        ok = (
            s["count"] == len(x)
            and s["sum"] == exact_sum(x)
            and s["min"] == r["min"]
            and s["max"] == r["max"]
            and math.isclose(s["mean"], r["mean"], rel_tol=1e-9)
            and math.isclose(s["std"], r["std"], rel_tol=1e-9)
        )
        summary_ok = summary_ok and ok
        print(
            f"  {name:20} p50/p95/p99 = {', '.join(f'{v:.1f}' for v in got)} ns; "
            f"|traceml - numpy| max {diff:g} ns; summary "
            f"{'equal' if ok else 'DIFFERENT'} (mean {s['mean']:.1f}, "
            f"std {s['std']:.1f})"
        )
    return [
        Check("reduce", "max |percentiles - numpy.percentile|", worst_pct, "ns",
              "<= 1 ns", worst_pct <= 1.0),
        Check("reduce", "summary equals numpy (min/max exact, mean/std 1e-9)",
              float(summary_ok), "", "1 (equal)", summary_ok),
    ]


def timed(fn, x):
    """A variant: ms per call of fn(x)."""

    def run() -> float:
        t0 = clock()
        fn(x)
        return (clock() - t0) / 1e6  # ms

    return run


def measure(data: dict[str, np.ndarray], rounds: int) -> dict[str, np.ndarray]:
    variants = {}
    for name, x in data.items():
        variants[(name, "traceml percentiles")] = timed(
            lambda a: _core.percentiles(a, Q), x)
        variants[(name, "numpy.percentile")] = timed(
            lambda a: np.percentile(a, Q), x)
        variants[(name, "np.partition + lerp")] = timed(
            lambda a: partition_percentiles(a, Q), x)
        variants[(name, "traceml summary")] = timed(_core.summary, x)
        variants[(name, "numpy mean/std/min/max")] = timed(numpy_summary, x)
    return interleave(variants, rounds)


def report(res, data, rounds: int) -> list[Check]:
    n = len(next(iter(data.values())))
    print(f"\ntime per call on {n:,} int64 samples, {rounds} rounds interleaved")
    w = 26
    print(f"{'':{w}} {stat_header('ms')}")
    checks = []
    for name in data:
        print(name)
        rows = [v for (d, v) in res if d == name]
        for v in rows:
            print(f"  {v:{w - 2}} {Stat.of(res[(name, v)]).fmt()}")
        for ours, base in (
            ("traceml percentiles", "numpy.percentile"),
            ("traceml percentiles", "np.partition + lerp"),
            ("traceml summary", "numpy mean/std/min/max"),
        ):
            b = res[(name, base)]
            o = res[(name, ours)]
            speedup = b.min() / o.min()
            print(
                f"  {ours} is {speedup:.2f}x as fast as {base} "
                f"(median {np.median(b) / np.median(o):.2f}x)"
            )
            if base == "numpy.percentile":
                checks.append(
                    Check("reduce", f"percentiles speed-up over numpy, {name}",
                          speedup, "x", "> 1 (faster)", speedup > 1.0)
                )
            if base == "numpy mean/std/min/max":
                checks.append(
                    Check("reduce", f"summary speed-up over numpy, {name}",
                          speedup, "x", "none", speedup > 1.0, info=True)
                )
    return checks


def main(argv: list[str]) -> int:
    args, n, rounds = start_sized(__doc__.splitlines()[0], argv, "--samples",
                                  "samples per data set", (10_000_000, 1_000_000), (7, 3))
    data = make_data(n)
    print(f"\nequality with numpy ({n:,} samples):")
    checks = verify(data)
    res = measure(data, rounds)
    checks += report(res, data, rounds)
    print()
    print_checks(checks)
    write_json(args.json, checks, {"bench": "reduce"})
    return 0


if __name__ == "__main__":
    run_main(main)
