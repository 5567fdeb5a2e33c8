"""How far to trust traceml.predict, and what worker batch timing costs.

Accuracy: DataLoaders whose items burn a set CPU time (``burn``: T and c
known) or sleep it (``sleep``: T known, c near 0) run at num_workers 1, 2
and 4, interleaved round by round (``--runs`` rounds), each with its own
Recorder and a ``time.sleep`` consumer.  Every run's prediction is read for
the other two num_workers and set beside their measured mean wait in the
same round: the table gives, per dataset and (from, to) pair, the median
error over the rounds, as a share of the measured mean step and in ms, and
how often it was within 30% of the step.  It also prints each run's
self-check (the model at the run's own num_workers against its measured
wait, as a share of the step: what ``prediction_check.PREDICT_FIT_TOL`` judges) and
checks the inputs the model rests on: measured CPU per batch within 15% of
the burn, wall per batch at least the sleep.

Cost: ``TimedFetch`` around a fetch that returns at once, against calling
the fetch itself, in one process, interleaved: the ns a worker pays per
batch (the main process pays nothing per step).

    .venv/bin/python benchmarks/bench_predict.py            # 5 rounds, about 2 min
    .venv/bin/python benchmarks/bench_predict.py --quick    # 2 rounds
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
sys.path.insert(0, os.path.dirname(__file__))

import numpy as np

import traceml
from traceml import _core, predict
from _common import Check, common_args, print_checks, print_machine, write_json

WORKERS = (1, 2, 4)
ITEMS_PER_BATCH = 4
ITEM_S = 0.004          # so a batch costs 16 ms of CPU or of sleep
CONSUMER_S = 0.006
BATCHES = 40
WITHIN = 0.30


def _datasets():
    import torch
    from burn import BurnDataset, SleepDataset

    n = ITEMS_PER_BATCH * BATCHES
    return torch, {"burn": lambda: BurnDataset(n, ITEM_S),
                   "sleep": lambda: SleepDataset(n, ITEM_S)}


def one_run(torch, make_ds, k: int):
    rec = traceml.Recorder()
    loader = torch.utils.data.DataLoader(make_ds(), batch_size=ITEMS_PER_BATCH, num_workers=k)
    for _batch in rec.wrap(loader):
        time.sleep(CONSUMER_S)
    return rec.report()


def accuracy(rounds: int) -> tuple[list[Check], dict]:
    torch, kinds = _datasets()
    warnings.filterwarnings("ignore", message=".*worker processes in total.*")
    errors: dict = {}
    checks_self: dict = {}
    inputs: dict = {kind: {"cpu": [], "make": []} for kind in kinds}
    for r in range(rounds):
        for kind, make_ds in kinds.items():
            reps = {k: one_run(torch, make_ds, k) for k in WORKERS}
            for k, rep in reps.items():
                p = rep["prediction"]
                if p is None:
                    continue
                inputs[kind]["cpu"].append(p["cpu_s"])
                inputs[kind]["make"].append(p["make_s"])
                # The self-check prediction_check.prediction_trust judges: the miss at
                # the run's own num_workers, as a share of its step.
                checks_self.setdefault((kind, k), []).append(
                    (p["this_run"].get("miss_of_step"), p.get("trust")))
                for other, rep2 in reps.items():
                    measured = rep2["input_wait_s"]["mean"]
                    step = rep2["step_s"]["mean"]
                    if other == k or not measured or not step:
                        continue
                    predicted = predict.wait_for(p, other)
                    # Relative to the step, not the wait: a wait near 0
                    # makes any relative error huge.
                    errors.setdefault((kind, k, other), []).append(
                        ((predicted - measured) / step, (predicted - measured) * 1e3))
        print(f"  round {r + 1}/{rounds} done", flush=True)
    checks = []
    print(f"\n{'dataset':8} {'from':>4} {'to':>3}  {'error/step':>10}  {'error ms':>8}  "
          f"within {WITHIN:.0%} of the step")
    for (kind, k, other), errs in sorted(errors.items()):
        rel = [e for e, _ in errs]
        within = sum(abs(e) <= WITHIN for e in rel)
        print(f"{kind:8} {k:>4} {other:>3}  {statistics.median(rel):>+10.0%}  "
              f"{statistics.median(ms for _, ms in errs):>+8.1f}  {within}/{len(errs)}")
    print(f"\n{'dataset':8} {'at':>4}  {'self-check miss/step':>20}  trusted "
          f"(prediction_check.PREDICT_FIT_TOL)")
    for (kind, k), got in sorted(checks_self.items()):
        misses = [m for m, _ in got if m is not None]
        print(f"{kind:8} {k:>4}  {(statistics.median(misses) if misses else float('nan')):>20.1%}"
              f"  {sum(t == 'trusted' for _, t in got)}/{len(got)}"
              f"  (max {max(misses) if misses else float('nan'):.1%})")
    for kind in kinds:
        all_errs = [abs(e) for (kd, _, _), errs in errors.items() if kd == kind for e, _ in errs]
        if all_errs:
            checks.append(Check("predict", f"{kind}: predictions within {WITHIN:.0%} of the step",
                                sum(e <= WITHIN for e in all_errs) / len(all_errs), "x",
                                "info (the issue asks for a stated error)", True, info=True))
    batch_s = ITEMS_PER_BATCH * ITEM_S
    cpu = statistics.median(inputs["burn"]["cpu"]) if inputs["burn"]["cpu"] else float("nan")
    slept = min(inputs["sleep"]["make"]) if inputs["sleep"]["make"] else float("nan")
    checks.append(Check("predict", "burn: CPU per batch / truth", cpu / batch_s, "x",
                        "0.85 to 1.15", 0.85 <= cpu / batch_s <= 1.15))
    checks.append(Check("predict", "sleep: least wall per batch / truth", slept / batch_s, "x",
                        ">= 1.0", slept >= batch_s))
    return checks, {"errors": {f"{a}:{b}->{c}": v for (a, b, c), v in errors.items()},
                    "self_check": {f"{a}:{b}": v for (a, b), v in checks_self.items()}}


def overhead(rounds: int, n: int = 200_000) -> list[Check]:
    log = _core.BatchLog(1 << 10)

    def fetch(index):
        return index

    timed = _core.TimedFetch(log, fetch, 0, 0)
    plain, wrapped = [], []
    for _ in range(rounds):
        for f, out in ((fetch, plain), (timed, wrapped)):
            t = time.perf_counter_ns()
            for i in range(n):
                f(i)
            out.append((time.perf_counter_ns() - t) / n)
        log.drain()
    cost = float(np.median(np.array(wrapped) - np.array(plain)))
    print(f"\nTimedFetch: {cost:.0f} ns per batch over a bare call "
          f"({float(np.median(plain)):.0f} ns), median of {rounds} interleaved rounds")
    return [Check("predict", "worker timing cost per batch", cost, "ns",
                  "info (a batch takes ms)", True, info=True)]


def main(argv: list[str]) -> int:
    p = common_args(__doc__.splitlines()[0], timing=False)
    p.add_argument("--runs", type=int, default=None, help="rounds (default 5; quick: 2)")
    args = p.parse_args(argv)
    if not args.no_machine:
        print_machine()
    rounds = args.runs or (2 if args.quick else 5)
    checks = overhead(rounds=5)
    more, extra = accuracy(rounds)
    checks += more
    print()
    print_checks(checks)
    write_json(args.json, checks, extra)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
