"""What per-sample timing costs a worker: ns per sample with the fetch's
dataset behind ``_core.TimedDataset`` against the bare dataset, in one
process, interleaved round by round.

Each round makes batches the way torch's map-style fetcher does
(``[dataset[i] for i in batch]``, then ``collate_fn(data)``), once over the
bare dataset and collate_fn and once over their C wrappers
(TimedDataset, TimedCall), writing into a real BatchLog's items ring (the
ring is drained between rounds, as each ``iter()`` drains it).  Items of
two costs: a trivial ``__getitem__`` (returns its index: the wrapper's
whole cost shows) and one that burns about 20 µs of CPU (a cheap real
sample: the ratio a user sees).  Timings read this thread's CPU clock
(--clock wall for the wall clock); the added cost is the wrapper's best
round minus the bare best.

    .venv/bin/python benchmarks/bench_samples.py            # 21 rounds of 20k samples
    .venv/bin/python benchmarks/bench_samples.py --quick    # 7 rounds of 5k
"""

from __future__ import annotations

import sys
import time

from _common import (Check, Stat, clock, common_args, interleave, print_checks,
                     print_machine, set_clock, stat_header, write_json)
from traceml import _core

BATCH = 32


class Trivial:
    def __getitem__(self, i):
        return i


class Burn:
    """About 20 µs of CPU an item."""

    def __init__(self, us: float = 20.0):
        self.s = us * 1e-6

    def __getitem__(self, i):
        end = time.thread_time() + self.s
        while time.thread_time() < end:
            pass
        return i


def collate(data):
    return data


def run(ds, fn, n: int) -> float:
    """ns per sample of n samples in batches of BATCH through ds and fn."""
    batches = [list(range(k, k + BATCH)) for k in range(0, n, BATCH)]
    t = clock()
    for b in batches:
        fn([ds[i] for i in b])
    return (clock() - t) / (len(batches) * BATCH)


def main(argv: list[str]) -> int:
    p = common_args(__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=None)
    args = p.parse_args(argv)
    set_clock(args.clock)
    rounds = args.rounds or (7 if args.quick else 21)
    n = args.samples or (5_000 if args.quick else 20_000)
    if not args.no_machine:
        print_machine()
    log = _core.BatchLog(16, items=1 << 20)
    checks = []
    extra: dict = {"rounds": rounds, "samples": n, "batch": BATCH}
    for name, ds, per in (("trivial", Trivial(), n), ("20 µs burn", Burn(), n // 10)):
        timed_ds = _core.TimedDataset(log, ds, 0, 0)
        timed_fn = _core.TimedCall(log, collate, 0, 0, _core.ITEM_COLLATE)

        def timed(ds=timed_ds, fn=timed_fn, per=per):
            got = run(ds, fn, per)
            log.drain_items()
            return got

        got = interleave({"bare": lambda ds=ds, per=per: run(ds, collate, per),
                          "timed": timed}, rounds)
        bare, tim = Stat.of(got["bare"]), Stat.of(got["timed"])
        added = tim.min - bare.min
        print(f"{name}: ns per sample, {stat_header('ns')}")
        print(f"  bare   {bare.fmt()}")
        print(f"  timed  {tim.fmt()}")
        print(f"  added {added:.1f} ns per sample (best - best, collate's share "
              f"included: one call per {BATCH}); ratio {tim.min / bare.min:.3f}x best, "
              f"{tim.median / bare.median:.3f}x median")
        extra[name] = {"bare": bare.__dict__, "timed": tim.__dict__}
        checks.append(Check("samples", f"added per sample, {name} item", added, "ns",
                            "none", True, info=True))
        checks.append(Check("samples", f"timed / bare, {name} item", tim.min / bare.min, "x",
                            "none", True, info=True))
    print_checks(checks)
    write_json(args.json, checks, extra)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
