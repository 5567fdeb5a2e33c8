"""Shared helpers for the traceml benchmarks.

The build machine is small and noisy, so every benchmark follows the same
rules:

* speed is compared as ratios *within one run*: all variants of one
  benchmark are timed in the same process, interleaved round by round
  (the order rotates every round, or is drawn at random with
  ``interleave(..., shuffle=seed)``), never against numbers from another
  run;
* every variant is repeated, and we report the minimum (the least disturbed
  run, the best estimate of the cost itself) and the median (what a
  typical run sees) and the maximum, never a single timing;
* a difference ("net", "added") subtracts the baseline's best timing (a
  constant cost) from every timing of the variant;
* timings read this thread's CPU time by default (``--clock cpu``), which
  does not count the time other processes hold the CPU; ``--clock wall``
  reads the wall clock instead;
* verdicts on the targets use the best timings, since on a shared machine
  the other processes only ever add time; the medians are printed beside
  them, and the load average is printed with the machine.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable, Iterable, Optional

import numpy as np

import traceml
from traceml import _core

# --------------------------------------------------------------------------
# machine description


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _gcc_version() -> str:
    try:
        out = subprocess.run(
            ["gcc", "--version"], capture_output=True, text=True, timeout=10
        ).stdout
        return out.splitlines()[0].strip() if out else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _valgrind_version() -> str:
    try:
        out = subprocess.run(
            ["valgrind", "--version"], capture_output=True, text=True, timeout=10
        ).stdout
        return out.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "not installed"


def _dist_version(name: str) -> str:
    """An installed distribution's version, without importing it."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _clocksource() -> str:
    path = "/sys/devices/system/clocksource/clocksource0/current_clocksource"
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def load_average() -> str:
    """The 1/5/15-minute load averages: other processes share the CPUs."""
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def machine_info() -> dict:
    """What the numbers were measured on."""
    return {
        "nproc": os.cpu_count(),
        "cpu": _cpu_model(),
        "kernel": platform.release(),
        "clocksource": _clocksource(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "gcc": _gcc_version(),
        "torch": _dist_version("torch"),
        "valgrind": _valgrind_version(),
        "traceml": getattr(traceml, "__version__", "?"),
    }


def print_machine(info: Optional[dict] = None) -> None:
    info = info or machine_info()
    print(
        f"machine: {info['nproc']} cpus, {info['cpu']}, clocksource "
        f"{info['clocksource']}, Linux {info['kernel']}"
    )
    print(
        f"software: Python {info['python']}, numpy {info['numpy']}, "
        f"torch {info.get('torch', '?')}, {info['gcc']}, "
        f"{info.get('valgrind', 'valgrind ?')}, traceml {info['traceml']}"
    )
    print(f"load average now: {load_average()}")


# --------------------------------------------------------------------------
# the store


def free_store() -> None:
    """Empty the store *and* free its array, so that the next recording
    grows from nothing again (``reset()`` alone keeps the capacity).

    Uses the testing hook ``_core._set_capacity_limit``: setting "no cap"
    on an empty store frees the array."""
    traceml.reset()
    try:
        _core.default_recorder()._set_capacity_limit(None)
    except TypeError:  # an older build spelled "no cap" as 0
        _core.default_recorder()._set_capacity_limit(0)


# --------------------------------------------------------------------------
# inputs


class TaskTableIter:
    """An iterator shaped like a multiprocessing DataLoader iterator for
    traceml's delivery tracking: a ``_task_info`` dict (sampler rank ->
    (worker_id,)) from which each fetch removes the delivered rank and to
    which it adds the next one.  Wrapping it makes every step also store
    its delivery (rank, worker) in the array parallel to the records."""

    def __init__(self, n: int, workers: int = 2, outstanding: int = 0):
        # `outstanding` tasks in the table (default: one per worker; a
        # DataLoader keeps prefetch_factor x num_workers)
        self.n = n
        self.i = 0
        self.workers = workers
        self.ahead = outstanding or workers
        self._task_info = {r: (r % workers,) for r in range(self.ahead)}

    def __iter__(self):
        return self

    def __next__(self) -> int:
        i = self.i
        if i >= self.n:
            raise StopIteration
        del self._task_info[i]
        self._task_info[i + self.ahead] = ((i + self.ahead) % self.workers,)
        self.i = i + 1
        return i


# --------------------------------------------------------------------------
# timing

# What a timing reads.  "cpu": the CPU time of this thread (user + system,
# page faults included), which stops while other processes run on our
# CPU; on a shared machine it is far more stable than the wall clock.
# "wall": the monotonic wall clock, for a quiet machine.
CLOCKS = {"cpu": time.thread_time_ns, "wall": time.perf_counter_ns}
_clock = CLOCKS["cpu"]


def set_clock(name: str) -> None:
    global _clock
    _clock = CLOCKS[name]


def clock() -> int:
    """Now, in ns, on the clock chosen by --clock (default: thread CPU time)."""
    return _clock()


def clock_seconds() -> float:
    """The same clock in seconds, as timeit's ``timer`` wants it."""
    return _clock() * 1e-9


def interleave(
    variants: dict[str, Callable[[], float]], rounds: int,
    shuffle: Optional[int] = None,
) -> dict[str, np.ndarray]:
    """Call every variant once per round, rotating the order each round.

    Each variant times itself and returns nanoseconds per unit of work
    (per call, per item, per run), or a tuple of such numbers (the array
    then has one column per number).  Returns, per variant, the array of
    its per-round results in round order, so that results of one round can
    be paired (``b[i] - a[i]``).

    ``shuffle``: a seed; the order is then drawn at random every round
    instead of rotated (with many variants, a rotation keeps each one
    behind the same predecessor, whose traces in the caches and the
    allocator bias it: see bench_peers.py)."""
    import random

    names = list(variants)
    out: dict[str, list[float]] = {name: [] for name in names}
    order = random.Random(shuffle) if shuffle is not None else None
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(rounds):
            if order is not None:
                order.shuffle(names)
                this_round = names
            else:
                k = r % len(names)
                this_round = names[k:] + names[:k]
            for name in this_round:
                out[name].append(variants[name]())
    finally:
        if gc_was_enabled:
            gc.enable()
    return {name: np.asarray(v, dtype=float) for name, v in out.items()}


def median_ci(d: Iterable[float]) -> tuple[float, float]:
    """A distribution-free 95% interval of the median: the order statistics
    n/2 -+ 0.98 sqrt(n) (the binomial's normal approximation).  Paired
    differences have heavy tails (a block that met another job's burst),
    so the mean and its standard error would not do for the median."""
    x = np.sort(np.asarray(list(d), dtype=float))
    n = len(x)
    if n < 6:
        return float(x[0]), float(x[-1])
    k = max(0, int(math.floor((n - 1.96 * math.sqrt(n)) / 2)))
    return float(x[k]), float(x[n - 1 - k])


def mean_ci(d: Iterable[float]) -> tuple[float, float, float]:
    """The mean and its 95% interval (mean -+ 1.96 standard errors).  The
    median of per-block differences leaves out a cost that comes in bursts
    (a periodic drain, a page fault every 128 records): the mean keeps it,
    at the price of a wider interval."""
    x = np.asarray(list(d), dtype=float)
    m = float(x.mean())
    if len(x) < 2:
        return m, m, m
    se = float(x.std(ddof=1)) / math.sqrt(len(x))
    return m, m - 1.96 * se, m + 1.96 * se


@dataclass
class Stat:
    """min / median / max of repeated measurements."""

    min: float
    median: float
    max: float

    @classmethod
    def of(cls, values: Iterable[float]) -> "Stat":
        a = np.asarray(list(values), dtype=float)
        return cls(float(a.min()), float(np.median(a)), float(a.max()))

    def fmt(self, digits: int = 1, width: int = 8) -> str:
        return (
            f"{self.min:{width}.{digits}f} {self.median:{width}.{digits}f} "
            f"{self.max:{width}.{digits}f}"
        )


def stat_header(unit: str, width: int = 8) -> str:
    return f"{'min':>{width}} {'median':>{width}} {'max':>{width}}  ({unit})"


# --------------------------------------------------------------------------
# reporting the targets


@dataclass
class Check:
    """One target of the issue: a measured value against a limit."""

    bench: str
    name: str
    value: float
    unit: str
    target: str
    met: bool
    info: bool = False  # no target in the issue: shown, not judged

    def __post_init__(self) -> None:
        # NumPy scalars are not JSON-serialisable.
        self.value = float(self.value)
        self.met = bool(self.met)
        self.info = bool(self.info)

    def line(self) -> str:
        verdict = "info" if self.info else "MET" if self.met else "MISSED"
        sep = "" if self.unit in ("", "x") else " "
        return (
            f"  [{verdict:6}] {self.name}: {self.value:.4g}{sep}{self.unit} "
            f"(target {self.target})"
        )


def print_checks(checks: list[Check]) -> None:
    print("targets:")
    for c in checks:
        print(c.line())


def common_args(description: str, timing: bool = True) -> argparse.ArgumentParser:
    """The flags every benchmark script takes (--rounds and --clock only
    where it times something)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--quick", action="store_true", help="small sizes, few rounds (< 10 s)"
    )
    if timing:
        p.add_argument(
            "--rounds", type=int, default=None,
            help="override the number of rounds",
        )
        p.add_argument(
            "--clock",
            choices=sorted(CLOCKS),
            default="cpu",
            help="time by this thread's CPU time (default; robust to other "
            "processes) or by the wall clock",
        )
    p.add_argument(
        "--json",
        metavar="PATH",
        default=None,
        help="also write the target checks as JSON (used by run_all.py)",
    )
    p.add_argument(
        "--no-machine", action="store_true", help="do not print the machine line"
    )
    return p


def start_sized(description: str, argv: list[str], size_flag: str, what: str,
                size: tuple[int, int], rounds: tuple[int, int]):
    """Parse the common flags plus one size flag (``size_flag``, e.g.
    "--items"; ``size`` and ``rounds`` are (full, quick) defaults), set the
    clock and print the machine line unless --no-machine.  Returns
    (args, size, rounds)."""
    p = common_args(description)
    p.add_argument(size_flag, type=int, default=None,
                   help=f"{what} (default {size[0]:,}; quick: {size[1]:,})")
    args = p.parse_args(argv)
    set_clock(args.clock)
    n = getattr(args, size_flag.lstrip("-").replace("-", "_")) or size[args.quick]
    if not args.no_machine:
        print_machine()
    return args, n, args.rounds or rounds[args.quick]


def write_json(path: Optional[str], checks: list[Check], extra: dict) -> None:
    if not path:
        return
    with open(path, "w") as f:
        json.dump({"checks": [asdict(c) for c in checks], **extra}, f, indent=1)


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0: writing 5 to
    /proc/self/clear_refs); False if refused."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def proc_status_kib(field: str) -> int:
    """A ``kB`` field of /proc/self/status (VmRSS, VmHWM, ...), in KiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(re.findall(r"\d+", line)[0])
    raise KeyError(field)


def run_main(main: Callable[[list[str]], int]) -> None:
    sys.exit(main(sys.argv[1:]))
