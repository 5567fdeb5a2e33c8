"""Diagnostic truth: how often the report finds the true label, and how
often it raises a false alarm.

Two parts (both by default):

* ``--corpus``: the labelled corpus of ``tests/corpus.py`` (per-step wait
  sequences whose truth comes from how they were made) replayed through
  ``traceml.build.build`` -- deterministic, no timing noise;
* ``--loaders``: real DataLoaders, each scenario run ``--runs`` times (20;
  ``--quick``: 5) while a CPU hog (a separate process spinning on one core)
  runs beside them, each run recorded by its own ``traceml.Recorder()``.
  Healthy loaders should show no stall, no period and no INPUT-BOUND in at
  least 19 of 20 runs; the true patterns should be found in at least 19 of
  20.

Each report is normalised to one found label per dimension (stall-ness,
outliers, diagnosis, shape, temporal label/period, trend, attribution
label/worker, headline) and counted against the true label in a confusion
table per dimension: the corpus, the real runs, and both together.  A key
the report does not have counts as "(missing)": not found.

Rates belong here, not in timed tests; tests/integration/test_corpus.py holds the
deterministic corpus.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from typing import Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")
sys.path.insert(0, HERE)
sys.path.insert(1, TESTS)

import corpus  # noqa: E402 - sys.path set above (tests/corpus.py)
import traceml  # noqa: E402 - sys.path set above
from _common import Check, common_args, print_checks, print_machine, run_main, write_json  # noqa: E402 - sys.path set above

# A healthy run raises a false alarm with any of these.
ALARMS = {
    "stalls": lambda d: isinstance(corpus.lookup(d, "stalls.count"), int)
    and corpus.lookup(d, "stalls.count") > 0,
    "period": lambda d: corpus.lookup(d, "temporal.label") == "PERIODIC",
    "INPUT-BOUND": lambda d: corpus.lookup(d, "diagnosis") == "INPUT-BOUND",
}
HEALTHY_MAX = 1      # false alarms allowed in 20 runs
PATTERN_MIN = 19     # finds required in 20 runs


def is_healthy(truth: dict) -> bool:
    """A case whose truth holds every HEALTHY claim (it may add its own)."""
    return all(k in truth and truth[k] == v for k, v in corpus.HEALTHY.items())


# --- the corpus -----------------------------------------------------------------


def run_corpus() -> tuple[list, list]:
    """Replay every corpus case: (label pairs, per-case lines and a summary
    line)."""
    pairs, lines = [], []
    alarms = {k: 0 for k in ALARMS}
    healthy = any_alarm = right = 0
    for case in corpus.corpus():
        d = corpus.replay(case).to_dict()
        pairs.append((corpus.true_labels(case.truth), corpus.found_labels(d)))
        wrong = corpus.check(case, d)
        right += not wrong
        lines.append(f"  {'ok   ' if not wrong else 'WRONG'} {case.name}"
                     + "".join(f"; {p}: want {corpus.label_of(w)}, got {corpus.label_of(g)}"
                               for p, w, g in wrong))
        if is_healthy(case.truth):
            healthy += 1
            raised = [k for k, f in ALARMS.items() if f(d)]
            any_alarm += bool(raised)
            for k in raised:
                alarms[k] += 1
    lines.append(f"corpus: {right}/{len(pairs)} cases fully right; healthy cases with a "
                 f"false alarm: {any_alarm}/{healthy} ("
                 + ", ".join(f"{k} {v}/{healthy}" for k, v in alarms.items()) + ")")
    return pairs, lines


# --- real loaders ------------------------------------------------------------------


def _datasets():
    """The datasets, defined once torch is imported (only for --loaders)."""
    import torch
    from torch.utils.data import Dataset, IterableDataset, get_worker_info

    class SleepDataset(Dataset):
        """Item i sleeps cost_s(i): I/O-like cost that holds no CPU, so the
        pattern survives the CPU hog."""

        def __init__(self, n, cost_s):
            self.n = n
            self.cost_s = cost_s

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            time.sleep(self.cost_s(i))
            return torch.tensor([i])

    class SlowWorkerIterable(IterableDataset):
        """Each worker yields ``per_worker`` items costing ``cost_s``; worker
        ``slow`` costs ``factor`` x as much."""

        def __init__(self, per_worker, cost_s, slow, factor=3.0):
            self.per_worker = per_worker
            self.cost_s = cost_s
            self.slow = slow
            self.factor = factor

        def __iter__(self):
            info = get_worker_info()
            wid = info.id if info is not None else 0
            cost = self.cost_s * (self.factor if wid == self.slow else 1.0)
            for j in range(self.per_worker):
                time.sleep(cost)
                yield torch.tensor([wid, j])

    return torch, SleepDataset, SlowWorkerIterable


def slow_every(every, phase, slow_s, fast_s):
    return lambda i: slow_s if i % every == phase else fast_s


def burst_cost(length, period, offset, slow_s, fast_s):
    return lambda i: slow_s if i >= offset and (i - offset) % period < length else fast_s


def ramp_cost(start_s, slope_s):
    return lambda i: start_s + slope_s * i


# Lock-step as tests/integration/test_dataloader.py makes it: 100 ms batches (4 items
# of 25 ms CPU), the burn of every worker on one shared core (the hog spins
# on another), the workers started at one barrier.  With 40 ms batches the
# delivery noise on the crowded core blurred the rounds.
BURN_ITEM_S = 0.025
LOCK_BATCH = 4
SLOW_WORKER = 2


def scenarios():
    """(name, make_loader, consumer pace s, truth) per scenario; truth as in
    tests/corpus.py (dotted to_dict() paths)."""
    from burn import BurnDataset, OneCoreBurnDataset, StartTogether
    from torch.utils.data import DataLoader, TensorDataset

    torch, SleepDataset, SlowWorkerIterable = _datasets()
    core = min(os.sched_getaffinity(0))
    fork = {"multiprocessing_context": "fork"}

    def lockstep(k, rounds):
        return lambda: DataLoader(
            OneCoreBurnDataset(LOCK_BATCH * k * rounds, BURN_ITEM_S, core=core),
            batch_size=LOCK_BATCH, num_workers=k, worker_init_fn=StartTogether(k), **fork)

    def burn_loader(k, batches):
        """``batches`` lock-step batches at num_workers=k (0: in the main
        process, the same burn)."""
        if k == 0:
            return lambda: DataLoader(
                OneCoreBurnDataset(LOCK_BATCH * batches, BURN_ITEM_S, core=core),
                batch_size=LOCK_BATCH, num_workers=0)
        return lockstep(k, batches // k)

    rng = np.random.default_rng(11)

    def random_slow(k, batches, slow):
        """``slow`` of ``batches`` batches (one item each) sleep 80 ms, at
        positions drawn afresh for every run: the seed's random control."""
        def make():
            at = set(rng.choice(np.arange(k, batches), size=slow, replace=False).tolist())
            return DataLoader(SleepDataset(batches, lambda i: 0.080 if i in at else 0.0001),
                              batch_size=1, num_workers=k, **fork)
        return make

    n_tensor = 60 * 64
    tensors = TensorDataset(torch.randn(n_tensor, 32), torch.randint(0, 10, (n_tensor,)))
    healthy = dict(corpus.HEALTHY)
    return [
        ("healthy-tensordataset-3w",
         lambda: DataLoader(tensors, batch_size=64, num_workers=3, **fork),
         0.008, healthy),
        ("healthy-cheap-4w",
         lambda: DataLoader(BurnDataset(60 * 8, 0.0001), batch_size=8, num_workers=4, **fork),
         0.010, healthy),
        ("healthy-cheap-8w",
         lambda: DataLoader(BurnDataset(60 * 8, 0.0001), batch_size=8, num_workers=8, **fork),
         0.005, healthy),
        # The investigation's rows at its own size: 16 deliveries.
        ("seed-16-4w", burn_loader(4, 16), 0.005,
         {"temporal.label": "PERIODIC", "temporal.period": 4}),
        ("seed-16-2w", burn_loader(2, 16), 0.005,
         {"temporal.label": "PERIODIC", "temporal.period": 2}),
        ("seed-16-1w", burn_loader(1, 16), 0.005, {"temporal.label": "EVERY-FETCH"}),
        ("seed-16-0w", burn_loader(0, 16), 0.005, {"temporal.label": "EVERY-FETCH"}),
        ("seed-random-16-4w", random_slow(4, 16, 3), 0.005,
         {"temporal.label": corpus.Not("PERIODIC")}),
        ("lockstep-2w", lockstep(2, 8), 0.005,
         {"temporal.label": "PERIODIC", "temporal.period": 2,
          "attribution.label": "LOCK-STEP"}),
        ("lockstep-4w", lockstep(4, 6), 0.005,
         {"temporal.label": "PERIODIC", "temporal.period": 4,
          "attribution.label": "LOCK-STEP"}),
        ("slow-sample-every5-4w",
         # prefetch_factor=1: 4 batches in flight, fewer than the 5 between
         # slow samples, so each slow sample is dispatched after the previous
         # stall; with 8 in flight the next one hides in that stall and the
         # loop stalls on every other slow sample (period 10).
         lambda: DataLoader(SleepDataset(64, slow_every(5, 2, 0.080, 0.0001)),
                            batch_size=1, num_workers=4, prefetch_factor=1, **fork),
         0.010, {"temporal.label": "PERIODIC", "temporal.period": 5,
                 "attribution.label": "SLOW-SAMPLE"}),
        ("slow-sample-every5-4w-prefetch2",
         # The default prefetch_factor=2: 8 batches in flight hide every
         # other 150 ms slow sample, so the loop stalls every 10 (80 ms
         # ones hide entirely: no stall, nothing to attribute); the
         # workers' make times keep the data's period 5 (attribution.made_period).
         lambda: DataLoader(SleepDataset(104, slow_every(5, 2, 0.150, 0.0001)),
                            batch_size=1, num_workers=4, **fork),
         0.010, {"attribution.label": "SLOW-SAMPLE", "attribution.period": 5}),
        ("bursts-4of30-0w",
         lambda: DataLoader(SleepDataset(130, burst_cost(4, 30, 10, 0.040, 0.0001)),
                            batch_size=1, num_workers=0),
         0.008, {"temporal.label": "PERIODIC", "temporal.period": 30}),
        ("ramp-2+0.3ms-0w",
         lambda: DataLoader(SleepDataset(60, ramp_cost(0.002, 0.0003)),
                            batch_size=1, num_workers=0),
         0.005, {"trend.label": "RISING",
                 "trend.slope_ms_per_step": corpus.Approx(0.3, 0.3)}),
        (f"slow-worker-{SLOW_WORKER}of4-3x",
         lambda: DataLoader(SlowWorkerIterable(16, 0.025, SLOW_WORKER),
                            batch_size=1, num_workers=4, **fork),
         0.010, {"temporal.label": "PERIODIC", "temporal.period": 4,
                 "attribution.label": "ONE-WORKER", "attribution.worker": SLOW_WORKER}),
    ]


HOG = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


def start_hog() -> subprocess.Popen:
    """A process spinning on the last usable core (lock-step burns on the
    first)."""
    core = max(os.sched_getaffinity(0))
    return subprocess.Popen([sys.executable, "-c", HOG, str(core)])


def one_run(make_loader, pace_s: float):
    """The Report of one run of ``make_loader()``'s loader, each step
    sleeping ``pace_s``."""
    rec = traceml.Recorder()
    for _ in rec.wrap(make_loader()):
        time.sleep(pace_s)
    return rec.report()


def keep_wrong(keep_dir: Optional[str], name: str, r: int, report, truth: dict) -> None:
    """Where ``keep_dir`` is given, write the text of ``report`` (run ``r``
    of scenario ``name``) there when it misses any part of ``truth``
    (a healthy scenario: when it raises an alarm), so that a rare miss can
    be read afterwards."""
    if keep_dir is None:
        return
    if not all(_right(truth, report.to_dict()).values()):
        os.makedirs(keep_dir, exist_ok=True)
        with open(os.path.join(keep_dir, f"{name}_r{r}.txt"), "w") as f:
            f.write(str(report) + "\n")


def stall_parts(reports: list) -> str:
    """What the healthy runs' clocked stalls were made of, summed over the
    runs (wait_parts.stalls): the host's share shows as waiting for a
    core.  Empty where no run clocked a stall."""
    total: dict = {}
    for d in reports:
        st = (d.get("wait_parts") or {}).get("stalls")
        if st:
            for k, v in st["parts_s"].items():
                total[k] = total.get(k, 0.0) + v
    whole = sum(total.values())
    if not whole:
        return ""
    return "; stalls by part: " + ", ".join(f"{k} {v / whole:.0%}" for k, v in total.items())


def _right(truth: dict, d: dict) -> dict:
    """{dimension: whether the summary ``d`` has it right}: for a healthy
    ``truth`` each ALARMS key (right: not raised), else each truth path
    (right: found)."""
    if is_healthy(truth):
        return {k: not f(d) for k, f in ALARMS.items()}
    return {path: corpus.matches(w, corpus.lookup(d, path)) for path, w in truth.items()}


def scenario_line(name: str, truth: dict, reports: list) -> tuple[str, list]:
    """The one-line summary of a scenario and its checks: a healthy
    scenario may raise each alarm in at most 1 run in 20, a pattern must be
    found in at least 19 in 20 (as rates, so --quick's 5 runs allow no
    false alarm and no miss)."""
    n = len(reports)
    checks = []
    right = [_right(truth, d) for d in reports]
    if is_healthy(truth):
        parts = []
        for k in ALARMS:
            hits = sum(not r[k] for r in right)
            parts.append(f"{k} {hits}/{n}")
            checks.append(Check("bench_truth", f"{name}: runs with {k}, of {n}", hits, "",
                                f"<= {HEALTHY_MAX} in 20", hits * 20 <= HEALTHY_MAX * n))
        return (f"{name}: {', '.join(parts)} (want <= {HEALTHY_MAX} in 20 each)"
                + stall_parts(reports)), checks
    parts = []
    for path, want in truth.items():
        hits = sum(r[path] for r in right)
        parts.append(f"{path}={corpus.label_of(want)} {hits}/{n}")
        checks.append(Check("bench_truth", f"{name}: runs finding {path}, of {n}", hits, "",
                            f">= {PATTERN_MIN} in 20", hits * 20 >= PATTERN_MIN * n))
    return f"{name}: {', '.join(parts)} (want >= {PATTERN_MIN} in 20 each)", checks


def run_loaders(runs: int, hog: bool, only: tuple = (),
                keep_dir: Optional[str] = None) -> tuple[list, list, list]:
    """Every scenario ``runs`` times, interleaved (run r of every scenario
    before run r + 1 of any): (label pairs, lines, checks)."""
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    traceml.configure(sampler=True)
    todo = [t for t in scenarios() if not only or t[0] in only]
    reports = {name: [] for name, *_ in todo}
    errors = {name: 0 for name, *_ in todo}
    proc = start_hog() if hog else None
    t0 = time.monotonic()
    try:
        for r in range(runs):
            for name, make_loader, pace, truth in todo:
                try:
                    rep = one_run(make_loader, pace)
                    keep_wrong(keep_dir, name, r, rep, truth)
                    reports[name].append(rep.to_dict())
                except Exception as exc:  # noqa: BLE001 - a run that fails is counted, not hidden
                    errors[name] += 1
                    print(f"  {name} run {r}: {type(exc).__name__}: {exc}", flush=True)
            print(f"  round {r + 1}/{runs} done ({time.monotonic() - t0:.0f} s)", flush=True)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
    pairs, lines, checks = [], [], []
    for name, _, _, truth in todo:
        got = reports[name]
        pairs += [(corpus.true_labels(truth), corpus.found_labels(d)) for d in got]
        line, c = scenario_line(name, truth, got)
        lines.append(line + (f"; {errors[name]} runs failed" if errors[name] else ""))
        checks += c
    return pairs, lines, checks


def run_seed_sweeps(runs: int, hog: bool,
                    keep_dir: Optional[str] = None) -> tuple[list, list]:
    """The seed's sweep, ``runs`` times: num_workers (4, 2, 1, 0) and back,
    16 steps a condition, on the lock-step loader (the cadence follows
    num_workers: "follows" must be said in PATTERN_MIN of 20) and on its
    random control at 4 and 2 workers (3 and 7 of 16 batches slow at random;
    "follows" at most HEALTHY_MAX in 20).  ``keep_dir``: where to write
    the text of each sweep that misses (the lock-step's without "follows",
    the control's with it), with each row's cadence test.  (lines,
    checks)."""
    from burn import OneCoreBurnDataset, StartTogether
    from torch.utils.data import DataLoader

    _, SleepDataset, _ = _datasets()
    core = min(os.sched_getaffinity(0))
    rng = np.random.default_rng(12)

    def lockstep(num_workers):
        extra = ({"worker_init_fn": StartTogether(num_workers),
                  "multiprocessing_context": "fork"} if num_workers else {})
        return DataLoader(OneCoreBurnDataset(LOCK_BATCH * 16, BURN_ITEM_S, core=core),
                          batch_size=LOCK_BATCH, num_workers=num_workers, **extra)

    def control(num_workers):
        slow = {4: 3, 2: 7}.get(num_workers)
        if slow is None:   # 1 and 0 workers: every batch slow, as the seed's rows
            return lockstep(num_workers)
        at = set(rng.choice(np.arange(num_workers, 16), size=slow, replace=False).tolist())
        return DataLoader(SleepDataset(16, lambda i: 0.080 if i in at else 0.0001),
                          batch_size=1, num_workers=num_workers,
                          multiprocessing_context="fork")

    proc = start_hog() if hog else None
    said = {"lockstep": 0, "control": 0}
    try:
        for r in range(runs):
            for name, make in (("lockstep", lockstep), ("control", control)):
                res = traceml.sweep(make, num_workers=(4, 2, 1, 0), steps=16,
                                    consumer_pace_s=0.005, progress=False)
                follows = res.correlation["follows"] is True
                said[name] += follows
                if keep_dir is not None and follows != (name == "lockstep"):
                    os.makedirs(keep_dir, exist_ok=True)
                    with open(os.path.join(keep_dir, f"sweep-{name}_r{r}.txt"), "w") as f:
                        f.write(str(res) + "\n\n" + repr(res.correlation) + "\n")
                        for row, run in zip(res.rows, res.runs):
                            t = (run.to_dict().get("temporal") or {}) if run is not None else {}
                            f.write(f"{row['condition']} {t.get('label')} {t.get('period')} "
                                    f"{t.get('predicted')}\n")
            print(f"  seed sweep {r + 1}/{runs}: follows said {said}", flush=True)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
    checks = [
        Check("bench_truth", f"seed sweep: 'follows' said, of {runs}", said["lockstep"], "",
              f">= {PATTERN_MIN} in 20", said["lockstep"] * 20 >= PATTERN_MIN * runs),
        Check("bench_truth", f"random-control sweep: 'follows' said, of {runs}",
              said["control"], "", f"<= {HEALTHY_MAX} in 20",
              said["control"] * 20 <= HEALTHY_MAX * runs)]
    lines = [f"seed sweep (lock-step, 16 steps, 4 2 1 0 and back): follows "
             f"{said['lockstep']}/{runs} (want >= {PATTERN_MIN} in 20)",
             f"random-control sweep: follows {said['control']}/{runs} "
             f"(want <= {HEALTHY_MAX} in 20)"]
    return lines, checks


def main(argv: list[str]) -> int:
    p = common_args(__doc__.splitlines()[0], timing=False)
    p.add_argument("--corpus", action="store_true", help="the labelled corpus only")
    p.add_argument("--loaders", action="store_true", help="the real DataLoaders only")
    p.add_argument("--runs", type=int, default=None,
                   help="runs per real scenario (default 20; quick: 5)")
    p.add_argument("--no-hog", action="store_true", help="run without the CPU hog")
    p.add_argument("--cases", action="store_true", help="print each corpus case's verdict")
    p.add_argument("--keep-wrong", metavar="DIR",
                   help="write each real run's report that misses its truth to DIR")
    p.add_argument("--only", nargs="+", metavar="SCENARIO",
                   help="these real scenarios only (by name), without the seed sweeps")
    args = p.parse_args(argv)
    both = not (args.corpus or args.loaders)
    if not args.no_machine:
        print_machine()
    all_pairs, checks, extra = [], [], {}
    if args.corpus or both:
        pairs, lines = run_corpus()
        print(f"\n=== corpus: {len(pairs)} cases (tests/corpus.py) ===")
        print("\n".join(lines if args.cases else lines[-1:]))
        table = corpus.confusion(pairs)
        print(corpus.format_confusion(table))
        # The two halves apart: the rules are tuned on one, the other's
        # table is only reported (corpus.half).
        halves = [corpus.half(c) for c in corpus.corpus()]
        for name in corpus.HALVES:
            part = [pr for pr, h in zip(pairs, halves, strict=True) if h == name]
            print(f"\n--- {name} half: {len(part)} cases ---")
            print(corpus.format_confusion(corpus.confusion(part)))
        all_pairs += pairs
        extra["corpus"] = lines
    if args.loaders or both:
        runs = args.runs or (5 if args.quick else 20)
        hog = "" if args.no_hog else ", a CPU hog on one core beside them"
        print(f"\n=== real DataLoaders: {runs} runs per scenario{hog} ===", flush=True)
        pairs, lines, c = run_loaders(runs, not args.no_hog, tuple(args.only or ()),
                                      args.keep_wrong)
        print("\n".join(lines))
        print()
        print(corpus.format_confusion(corpus.confusion(pairs)))
        all_pairs += pairs
        checks += c
        extra["loaders"] = lines
        lines, c = ((["seed sweeps: not run (--only)"], []) if args.only
                    else run_seed_sweeps(runs, not args.no_hog, args.keep_wrong))
        print("\n".join(lines))
        checks += c
        extra["seed_sweeps"] = lines
    if both:
        print("\n=== corpus and real runs together ===")
        print(corpus.format_confusion(corpus.confusion(all_pairs)))
    if checks:
        print_checks(checks)
    write_json(args.json, checks, extra)
    return 0


if __name__ == "__main__":
    run_main(main)
