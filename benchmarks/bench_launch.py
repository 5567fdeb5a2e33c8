"""What ``python -m traceml run script.py`` costs against ``python
script.py``: at start-up and exit, and per step.

Start-up (whole processes, ``--rounds`` each, interleaved round by round,
the order rotating): three variants of each of two scripts,

* plain: ``python script.py``;
* launched, quiet: ``python -m traceml run --quiet --no-save script.py``
  (importing traceml, the import hook, the patch; no report);
* launched: ``python -m traceml run script.py`` (also the report on stderr
  and the run file written at exit, what a user pays by default);

over an empty script (the launcher's own fixed cost) and a script that
imports torch and takes one batch from a DataLoader (what a training
script pays before its first step).  Each process is timed by the wall
clock (Popen to exit) and by its CPU time (user + sys, from
``RUSAGE_CHILDREN``, which other processes on the machine do not add to).

Per step: a script that times its own loop (``--epochs`` epochs of
``--steps`` batches of a TensorDataset at batch_size 1, num_workers 0, the
case where the loader itself is cheapest and traceml's share largest; a
small matmul as the body) with ``time.thread_time`` (the main thread's
CPU), ``time.process_time`` (every thread's: the sampler's included) and
the wall clock, plain and launched in turn, ``PYTHONHASHSEED=0`` for both.
Each process gives its fastest epoch (the least disturbed by other
processes); the ratio divides the launched processes' median by the plain
ones', "added" is their difference per step, and the paired ratios (one
round's launched over its plain) show how far two processes of the same
script differ on this machine.

The issue gives no target: the numbers are shown, not judged.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

from _common import Check, Stat, common_args, print_checks, print_machine, run_main, write_json

EMPTY = "pass\n"

ONE_BATCH = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.arange(64.0)), batch_size=8)
for (x,) in loader:
    break
"""

STEPS = """\
import json, sys, time
import torch
from torch.utils.data import DataLoader, TensorDataset

n, epochs = int(sys.argv[1]), int(sys.argv[2])
data = TensorDataset(torch.randn(n, 16))
loader = DataLoader(data, batch_size=1)
w = torch.randn(16, 16)
out = {"cpu": [], "process": [], "wall": []}
for _ in range(epochs):
    it = iter(loader)
    next(it)                # the epoch's start-up is not a step
    cpu0, all0, wall0 = time.thread_time_ns(), time.process_time_ns(), time.perf_counter_ns()
    for (x,) in it:
        (x @ w).sum()
    cpu1, all1, wall1 = time.thread_time_ns(), time.process_time_ns(), time.perf_counter_ns()
    for k, v in (("cpu", cpu1 - cpu0), ("process", all1 - all0), ("wall", wall1 - wall0)):
        out[k].append(v / (n - 1))
print(json.dumps(out))
"""
# Both sides hash alike (a set's or dict's layout moves with the seed).
ENV = dict(os.environ, PYTHONHASHSEED="0")

LAUNCH = [sys.executable, "-m", "traceml", "run"]


def timed_process(cmd: list, cwd: str) -> tuple[float, float, bytes]:
    """(wall s, CPU s, stdout) of one process run to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, timeout=600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd} exited {p.returncode}: {p.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p.stdout


def rotate(variants: dict, rounds: int) -> dict:
    """Each variant once a round, the order rotating; per variant its
    results in round order."""
    names = list(variants)
    out: dict = {n: [] for n in names}
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            out[name].append(variants[name]())
    return out


def startup(workdir: str, rounds: int) -> list[Check]:
    checks = []
    for label, text in (("empty script", EMPTY), ("torch + one batch", ONE_BATCH)):
        path = os.path.join(workdir, f"start_{len(checks)}.py")
        with open(path, "w") as fh:
            fh.write(text)
        variants = {
            "plain": lambda p=path: timed_process([sys.executable, p], workdir),
            "launched, quiet": lambda p=path: timed_process(
                [*LAUNCH, "--quiet", "--no-save", p], workdir),
            "launched": lambda p=path: timed_process([*LAUNCH, p], workdir),
        }
        got = rotate(variants, rounds)
        print(f"\nstart-up to exit, {label} ({rounds} runs each, interleaved)")
        print(f"  {'':18} {'wall s: min':>12} {'median':>8} {'max':>8}   "
              f"{'CPU s: min':>11} {'median':>8} {'max':>8}")
        base = {k: np.array([r[i] for r in got["plain"]]) for i, k in enumerate(("wall", "cpu"))}
        for name, runs in got.items():
            wall = Stat.of(r[0] for r in runs)
            cpu = Stat.of(r[1] for r in runs)
            print(f"  {name:18} {wall.fmt(3, 12)}   {cpu.fmt(3, 11)}")
        for name in ("launched, quiet", "launched"):
            for i, clock in enumerate(("wall", "cpu")):
                mine = np.array([r[i] for r in got[name]])
                ratio = float(np.median(mine) / np.median(base[clock]))
                added = float(np.median(mine) - np.median(base[clock]))
                print(f"  {name} / plain, {clock}: {ratio:.2f}x median "
                      f"({added * 1e3:+.0f} ms), {float(mine.min() / base[clock].min()):.2f}x min")
                checks.append(Check("bench_launch", f"start-up {label}, {name} / plain, {clock}",
                                    ratio, "x", "none (info)", True, info=True))
    return checks


def per_step(workdir: str, rounds: int, steps: int, epochs: int) -> list[Check]:
    path = os.path.join(workdir, "steps.py")
    with open(path, "w") as fh:
        fh.write(STEPS)

    def loop(cmd):
        # Per process, its least disturbed epoch.
        got = json.loads(timed_process([*cmd, path, str(steps), str(epochs)], workdir)[2])
        return {k: min(v) for k, v in got.items()}

    got = rotate({"plain": lambda: loop([sys.executable]),
                  "launched": lambda: loop([*LAUNCH, "--quiet", "--no-save"])}, rounds)
    print(f"\nper step: {epochs} epochs of {steps:,} steps of DataLoader(TensorDataset, "
          f"batch_size=1, num_workers=0) and a 1x16 @ 16x16 matmul, the fastest epoch of "
          f"each process ({rounds} processes each, interleaved)")
    print(f"  {'clock':8} {'plain ns/step: median':>22} {'launched':>9} "
          f"{'ratio of medians':>17} {'paired: min':>12} {'max':>6} {'added ns/step':>14}")
    checks = []
    for clock in ("cpu", "process", "wall"):
        a = np.array([r[clock] for r in got["plain"]])
        b = np.array([r[clock] for r in got["launched"]])
        ratio = float(np.median(b) / np.median(a))
        paired = b / a   # the same round
        print(f"  {clock:8} {np.median(a):22.0f} {np.median(b):9.0f} {ratio:17.3f} "
              f"{paired.min():12.3f} {paired.max():6.3f} {np.median(b) - np.median(a):14.0f}")
        checks.append(Check("bench_launch", f"per step, launched / plain, {clock}",
                            ratio, "x", "none (info)", True, info=True))
    print("  (cpu: the main thread's CPU; process: every thread's, the sampler's "
          "included; wall: the loop's elapsed time)")
    return checks


def main(argv: list) -> int:
    p = common_args(__doc__.splitlines()[0], timing=False)
    p.add_argument("--rounds", type=int, default=None,
                   help="runs of each variant (default 10; quick: 3)")
    p.add_argument("--steps", type=int, default=None,
                   help="steps of each epoch of the per-step loop (default 20,000; "
                        "quick: 5,000)")
    p.add_argument("--epochs", type=int, default=5,
                   help="epochs of the per-step loop in each process (default 5)")
    args = p.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 10)
    steps = args.steps or (5_000 if args.quick else 20_000)
    if not args.no_machine:
        print_machine()
    with tempfile.TemporaryDirectory(prefix="bench_launch-") as workdir:
        checks = startup(workdir, rounds) + per_step(workdir, rounds, steps, args.epochs)
    print()
    print_checks(checks)
    write_json(args.json, checks, {"rounds": rounds, "steps": steps, "epochs": args.epochs})
    return 0


if __name__ == "__main__":
    run_main(main)
