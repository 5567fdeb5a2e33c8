"""How often the slow-code evidence is right, over repeated real runs of
DataLoaders whose truth is built in: quiet, and beside CPU hogs
(``--hog N``: N processes spinning for the whole run).

Cases (128 items, batch_size 1, 2 workers, a 4 ms step):

* ``every-8th``: each item 2 ms of CPU, every 8th also calls
  ``query_rows`` (40 ms).  Right: ``query_rows`` is named
  (``slow_code_named``).
* ``uniform``: every item 6 ms in ``decode``.  Right: no function named
  (stalls, if any, are every batch's: ``slow_code_same``, or no finding).
* ``sleeps``: every 8th item sleeps 40 ms in ``wait_for_disk``.  Right:
  ``slow_code_off_cpu`` whose off-CPU path ends in ``wait_for_disk`` (or
  ``slow_code_not_making``), never a function named by its CPU.
* ``helper-thread``: every 8th item runs ``query_rows`` in a thread.
  Right: ``slow_code_other_thread``.

Each case runs ``--runs`` times; the table gives, per case, how many runs
were right and what the wrong ones said.

Run: .venv/bin/python benchmarks/bench_slow_code.py [--runs 10] [--hog 2]
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import threading
import time

import torch
from torch.utils.data import DataLoader, Dataset

import traceml
from traceml.findings import slow_code


def burn(s: float) -> None:
    end = time.thread_time() + s
    while time.thread_time() < end:
        pass


def decode(i):
    burn(0.002)


def query_rows(i):
    burn(0.04)


def wait_for_disk(i):
    time.sleep(0.04)


def in_a_thread(i):
    t = threading.Thread(target=query_rows, args=(i,))
    t.start()
    t.join()


class Case(Dataset):
    def __init__(self, slow, uniform_s=None):
        self.slow, self.uniform_s = slow, uniform_s

    def __len__(self):
        return 128

    def __getitem__(self, i):
        if self.uniform_s is not None:
            burn(self.uniform_s)
        else:
            decode(i)
            if i % 8 == 0:
                self.slow(i)
        return torch.tensor([i])


CASES = {
    "every-8th": (lambda: Case(query_rows), lambda f: f is not None and f.code == "slow_code_named"
                  and f.numbers["function"] == "query_rows"),
    "uniform": (lambda: Case(None, 0.006), lambda f: f is None or f.code != "slow_code_named"),
    "sleeps": (lambda: Case(wait_for_disk), lambda f: f is not None and (
        f.code == "slow_code_not_making" or (
            f.code == "slow_code_off_cpu" and f.numbers.get("path")
            and f.numbers["path"][-1]["function"] == "wait_for_disk"))),
    "helper-thread": (lambda: Case(in_a_thread), lambda f: f is not None
                      and f.code == "slow_code_other_thread"),
}


def _spin() -> None:
    while True:
        pass


def one(case: str) -> "slow_code.Finding | None":
    rec = traceml.Recorder()
    for _ in rec.wrap(DataLoader(CASES[case][0](), batch_size=1, num_workers=2), name=case):
        time.sleep(0.004)
    return slow_code.judge(rec.report()["slow_code"])


def label(f) -> str:
    if f is None:
        return "none"
    if f.code == "slow_code_off_cpu":
        path = f.numbers.get("path") or []
        return f.code + (f"({path[-1]['function']})" if path else "(no path)")
    return f.code + (f"({f.numbers['function']})" if f.code == "slow_code_named" else "")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--hog", type=int, default=0, help="CPU hogs beside the runs")
    args = p.parse_args()
    hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.hog)]
    for h in hogs:
        h.start()
    try:
        print(f"{args.runs} runs a case, {args.hog} CPU hogs beside")
        for case, (_, right) in CASES.items():
            said = collections.Counter()
            ok = 0
            for _ in range(args.runs):
                f = one(case)
                ok += bool(right(f))
                said[label(f)] += 1
            print(f"{case:14s} right {ok}/{args.runs}   said: "
                  + ", ".join(f"{k} x{v}" for k, v in said.most_common()))
    finally:
        for h in hogs:
            h.terminate()


if __name__ == "__main__":
    main()
