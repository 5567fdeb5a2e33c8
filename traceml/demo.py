"""``python -m traceml.demo``: a DataLoader regression, reproduced on real data.

The demo builds (once, then reuses) a LeRobot-shaped robot dataset with
Hugging Face ``datasets``: frames with two JPEG camera images, a state and
an action vector.  Each training sample asks for its frame and the next 50
actions (LeRobot's ``delta_timestamps``, as ACT trains).  It
serves the same samples through a real ``torch.utils.data.DataLoader`` two
ways and times both with :func:`traceml.wrap`, the training step being a
sleep of a fixed pace:

* historical: each of the 50 action frames is read as a whole row, which
  decodes both camera images only to keep a 14-float vector;
* fixed: the numeric column is taken first, then indexed.

Expected on a small machine (2 cores, ``num_workers=4``): the historical
loader is INPUT-BOUND and the loop stalls once every 4 steps, the cadence
of the 4 workers finishing their batches together; the fixed loader has no
stalls.  ``--quick`` runs a tiny version (seconds) that only shows both
reports.

``--investigate`` runs the next cheap experiment on the same data (see
:func:`run_investigation`): the historical path at ``num_workers`` 4, 2, 1,
0 and back (0, 1, 2, 3, 4) with :func:`traceml.sweep`, then the fixed path at
4, and prints the worker-count table, the correlation between num_workers
and the stall cadence, and the historical-versus-fixed comparison.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
import warnings
from dataclasses import dataclass
from typing import Callable, Optional

import traceml
from .findings import prediction_check, report_notes, stall_timing


@dataclass(frozen=True)
class Size:
    """One size of the demo: the dataset and the run over it."""

    episodes: int
    frames_per_episode: int
    image_hw: tuple[int, int]  # (height, width), pixels
    steps: int  # batches per path
    batch_size: int  # samples per batch
    pace_s: float  # the stand-in training step, seconds


# A historical sample reads 51 rows (its frame and a 50-action chunk) and so
# decodes 102 JPEGs: ~0.7 s of CPU per batch of 10.  Four workers sharing 2
# cores hand over a burst of 4 batches about every 1.4 s while the loop
# takes 0.6 s for 4 steps: input-bound, a stall every 4 steps.  A fixed
# sample decodes only its own 2 images: ~30 ms of CPU per batch, and the
# workers stay ahead of the loop.  The 150 ms step keeps the stall floor
# (20% of the median step, 30 ms) above the 5-15 ms that handing a batch
# over to the loop takes when other processes crowd the 2 cores.
FULL = Size(
    episodes=10,
    frames_per_episode=120,
    image_hw=(240, 320),
    steps=72,
    batch_size=10,
    pace_s=0.150,
)
QUICK = Size(
    episodes=2,
    frames_per_episode=24,
    image_hw=(48, 64),
    steps=12,
    batch_size=2,
    pace_s=0.005,
)
SEED = 0


@dataclass(frozen=True)
class InvestigationSize:
    """One size of ``--investigate``: each condition of the sweep."""

    steps: int  # batches per condition
    pace_s: float  # the stand-in training step, seconds


# The sweep's conditions on the FULL dataset (a batch of 10 historical
# samples is ~0.6 s of CPU).  A condition's first max(1, num_workers)
# fetches are worker start-up and leave the steady state, so 4 workers keep
# 20 steady steps of 24: 5 stalls, 4 gaps, at one stall per 4 steps.  The
# step is the demo's 150 ms: short next to the workers' round (4 steps take
# 0.6 s, a round of 4 batches ~1.2 s on 2 cores; 2 steps 0.3 s against
# ~0.6 s for 2 workers), so the loop drains each round and waits for the
# next: the stall cadence is the round, max(1, num_workers) -- every step
# with 0 or 1 worker, every 2 steps with 2, every 4 with 4.  And long
# enough that the fixed path's 5-15 ms hand-overs on a crowded host stay
# under the stall floor (20% of the median step), as in the plain demo.
# Two workers on 2 cores each have a core: nothing keeps them in step but
# their common start, so on a crowded host they can drift apart and every
# fetch waits (stall gap 1 instead of 2).  Measured on 2 cores under a load
# average of 6-8: r = 1.000 in 4 runs of 5, 0.965 in the one where 2 workers
# drifted; 3 to 5 minutes in all.
INVESTIGATE_FULL = InvestigationSize(steps=24, pace_s=0.150)
INVESTIGATE_QUICK = InvestigationSize(steps=6, pace_s=0.005)
# The grid of the sweep: run 4 -> 3 -> 2 -> 1 -> 0, then back.  Three worker
# counts that can show a period (4, 3, 2) are the least with which the sweep
# can say the period follows num_workers (sweeps.SWEEP_MIN_DISTINCT_WORKERS).
INVESTIGATE_WORKERS = (4, 3, 2, 1, 0)
# The fixed path is measured at the demo's worker count.
FIXED_WORKERS = 4


def default_data_dir() -> str:
    """Where the demo dataset is cached: ``$XDG_CACHE_HOME/traceml-demo``
    (``~/.cache/traceml-demo``), or a temp directory if that is not
    writable."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache"
    )
    path = os.path.join(base, "traceml-demo")
    try:
        os.makedirs(path, exist_ok=True)
        if os.access(path, os.W_OK):
            return path
    except OSError:
        pass
    return os.path.join(tempfile.gettempdir(), "traceml-demo")


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def quiet_worker_warnings():
    """Silence torch's "this DataLoader will create N worker processes"
    warning (more workers than cores is the point of the demo); torch warns
    both when a loader is made and at each ``iter()``."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore",
            message=r"This DataLoader will create \d+ worker processes",
            category=UserWarning,
        )
        yield


def make_loader(dataset, *, num_workers: int, steps: int, batch_size: int, **kwargs):
    """A fresh ``torch.utils.data.DataLoader`` of ``steps`` batches of
    ``batch_size`` samples of ``dataset``, drawn by a ``RandomSampler`` of
    seed ``SEED``: every loader made with the same steps and batch size
    serves the same samples in the same order.  ``kwargs`` go to the
    DataLoader (``in_order``, ``prefetch_factor``, ...)."""
    import torch
    from torch.utils.data import DataLoader, RandomSampler

    sampler = RandomSampler(
        dataset,
        num_samples=steps * batch_size,
        generator=torch.Generator().manual_seed(SEED),
    )
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=num_workers,
        **kwargs,
    )


def loader_factory(datasets: dict, *, steps: int, batch_size: int) -> Callable:
    """``make(num_workers, path=..., **kwargs)`` for :func:`traceml.sweep`:
    a fresh :func:`make_loader` over ``datasets[path]`` (``path`` defaults
    to the first key), so that ``path`` can be one of the sweep's axes and
    name the access path on each row."""
    default = next(iter(datasets))

    def make(num_workers: int, path: str = default, **kwargs):
        return make_loader(
            datasets[path],
            num_workers=num_workers,
            steps=steps,
            batch_size=batch_size,
            **kwargs,
        )

    return make


def load_datasets(
    *,
    data_dir: Optional[str] = None,
    quick: bool = False,
    out: Callable[[str], None] = print,
):
    """Build (or reuse) the demo dataset and return its two views.

    Args:
        data_dir: cache directory (default: :func:`default_data_dir`).
        quick: the QUICK size instead of FULL.
        out: called with a progress line when building and a "dataset
            ready" line.

    Returns:
        (historical, fixed): a :class:`_lerobot.HistoricalDeltaDataset` and
        a :class:`_lerobot.FixedDeltaDataset` over the same rows.
    """
    from . import _lerobot

    size = QUICK if quick else FULL
    data_dir = default_data_dir() if data_dir is None else data_dir
    t0 = time.perf_counter()
    hf = _lerobot.build_dataset(
        data_dir,
        episodes=size.episodes,
        frames_per_episode=size.frames_per_episode,
        image_hw=size.image_hw,
        seed=SEED,
        log=out,
    )
    out(f"dataset ready: {len(hf)} frames ({time.perf_counter() - t0:.1f} s)")
    return _lerobot.HistoricalDeltaDataset(hf), _lerobot.FixedDeltaDataset(hf)


def _run_path(
    name: str, dataset, *, num_workers: int, steps: int, batch_size: int, pace_s: float
) -> "traceml.Report":
    """Iterate one epoch of ``steps`` batches of ``dataset`` through a
    DataLoader wrapped by traceml, sleeping ``pace_s`` seconds per batch, and
    return the report of that source."""
    traceml.reset()
    with quiet_worker_warnings():
        # The same seed for both paths: the same samples in the same order.
        loader = make_loader(
            dataset, num_workers=num_workers, steps=steps, batch_size=batch_size
        )
        for _batch in traceml.wrap(loader, name=name):
            time.sleep(pace_s)  # the training step
    return traceml.report(source=name)


def verdict(historical: "traceml.Report", fixed: "traceml.Report") -> str:
    """One line: the historical diagnosis and its stall cadence against
    num_workers (the report's own three answers: a period, none, or not
    yet with the steps that would settle it), then the fixed diagnosis and
    its stall count."""
    h, f = historical.to_dict(), fixed.to_dict()
    cad = h["cadence"]
    workers = f"num_workers={cad['num_workers']}"
    if cad["num_workers"] == 0:
        workers += " (loading in the loop's own process)"
    tmp = h.get("temporal") or {}
    label, period = tmp.get("label"), cad["period"]
    if not h["stalls"]["count"]:
        cadence = f"no stalls with {workers}"
    elif label == "EVERY-FETCH":
        cadence = f"a stall on every fetch with {workers}"
    elif period is not None:
        every = "every step" if period == 1 else f"every {period} steps"
        match = "matching" if cad["matches_num_workers"] else "not matching"
        cadence = f"a stall {every}, {match} {workers}"
    elif label == "UNSETTLED" and tmp.get("consistent_period"):
        cadence = (f"not yet: consistent with a stall every {tmp['consistent_period']} steps "
                   f"with {workers}, " + stall_timing.settle_words(tmp.get("settle_steps")))
    elif label == "IRREGULAR":
        cadence = f"no regular stall cadence with {workers}"
    else:
        cadence = f"too few stalls to read a cadence with {workers}"
    speed = ""
    if h["wall_s"] and f["wall_s"]:
        speed = f"; {h['wall_s'] / f['wall_s']:.1f}x the fixed wall time"
    n = f["stalls"]["count"]
    return (
        f"verdict: historical {h['diagnosis']}, {cadence}{speed}. "
        f"fixed {f['diagnosis']}, {n} stall{'s' if n != 1 else ''}."
    )


def run_demo(
    *,
    data_dir: Optional[str] = None,
    num_workers: int = 4,
    steps: Optional[int] = None,
    batch_size: Optional[int] = None,
    pace_s: Optional[float] = None,
    quick: bool = False,
    out: Callable[[str], None] = print,
):
    """Build the dataset, run both access paths, print both reports.

    Args:
        data_dir: cache directory of the dataset (default:
            :func:`default_data_dir`); built there once, then reused.
        num_workers: DataLoader worker processes, the same for both paths.
        steps: batches per path (default 72; 12 with ``quick``).
        batch_size: samples per batch (default 10; 2 with ``quick``).
        pace_s: the training step stand-in, seconds of sleep per batch
            (default 0.15; 0.005 with ``quick``).
        quick: a tiny dataset (2 episodes of 24 frames, 48x64 images) and
            run (12 batches of 2), for tests: both reports, too small for
            the cadence to hold.
        out: called with each line (or block) of output.

    Returns:
        (historical_report, fixed_report), two :class:`traceml.Report`.
    """
    size = QUICK if quick else FULL
    steps = size.steps if steps is None else int(steps)
    batch_size = size.batch_size if batch_size is None else int(batch_size)
    pace_s = size.pace_s if pace_s is None else float(pace_s)
    data_dir = default_data_dir() if data_dir is None else data_dir

    out(
        f"traceml demo: a LeRobot-shaped dataset served by a DataLoader, "
        f"{steps} batches of {batch_size} per path, num_workers={num_workers}, "
        f"training step = sleep {pace_s * 1e3:g} ms"
    )
    cores = _cpu_count()
    if num_workers > cores:
        out(
            f"note: {num_workers} workers on {cores} CPU cores is deliberate; "
            "torch's 'suggested max number of worker' warning is silenced "
            "inside this demo"
        )
    slow, fast = load_datasets(data_dir=data_dir, quick=quick, out=out)
    chunk = sum(len(rows) for rows in slow.delta_indices.values())
    paths = (
        ("historical", slow,
         f"the {chunk} action rows of a sample are read whole, images decoded"),
        ("fixed", fast,
         f"the {chunk} action rows of a sample come from the action column"),
    )
    reports = []
    for name, dataset, how in paths:
        out("")
        out(f"running the {name} path: {how} ...")
        report = _run_path(
            name,
            dataset,
            num_workers=num_workers,
            steps=steps,
            batch_size=batch_size,
            pace_s=pace_s,
        )
        out(str(report))
        reports.append(report)
    historical, fixed = reports
    out("")
    out(verdict(historical, fixed))
    cores = prediction_check.cores_needed_line([("historical", historical["prediction"]),
                                       ("fixed", fixed["prediction"])])
    if cores:
        out(cores)
    if quick:
        out(report_notes.demo_quick_note(min(historical["steady_steps"], fixed["steady_steps"])))
    return historical, fixed


class InvestigationResult(traceml.SweepResult):
    """The worker-count table of ``--investigate``: the rows of the
    historical sweep (num_workers 4, 3, 2, 1, 0 then back), then the row
    of the fixed path at 4.  ``correlation`` and ``plot()`` cover the
    historical rows only: the question is whether *its* stall cadence
    follows num_workers.

    Attributes (beyond :class:`traceml.SweepResult`'s):
        historical: the :class:`traceml.SweepResult` of the historical grid.
        fixed: the :class:`traceml.SweepResult` of the fixed path (one row),
            or None when the sweep was interrupted before it.
    """

    def __init__(self, historical: "traceml.SweepResult",
                 fixed: "Optional[traceml.SweepResult]"):
        rows = list(historical.rows) + (list(fixed.rows) if fixed else [])
        runs = list(historical.runs) + (list(fixed.runs) if fixed else [])
        interrupted = historical.interrupted or fixed is None or fixed.interrupted
        super().__init__(rows, runs, interrupted)
        self.historical = historical
        self.fixed = fixed
        self.correlation = dict(historical.correlation)

    def plot(self):
        """Stall period against max(1, num_workers), historical rows."""
        return self.historical.plot()


def _report_of(result: "traceml.SweepResult", index: int) -> "Optional[traceml.Report]":
    return result.runs[index] if len(result.runs) > index else None


def _cadence_line(historical: "traceml.SweepResult") -> str:
    """How many historical conditions stall at max(1, num_workers): a stall
    on every fetch is period 1, what 0 and 1 workers predict."""
    from .findings import stall_timing

    cells, hits = [], 0
    for row in historical.rows:
        k = max(row["condition"]["num_workers"], 1)
        gap = row["period"]
        if gap is None and row.get("temporal") == stall_timing.EVERY_FETCH:
            gap = 1
        hits += gap is not None and gap == k
        cells.append(f"{row['condition']['num_workers']}:"
                     f"{'-' if gap is None else f'{gap:g}'}")
    return (f"stall period = max(1, num_workers) in {hits} of {len(historical.rows)} "
            f"historical conditions (num_workers:period, a stall on every fetch as 1: "
            f"{' '.join(cells)})")


def run_investigation(
    *,
    data_dir: Optional[str] = None,
    quick: bool = False,
    steps: Optional[int] = None,
    batch_size: Optional[int] = None,
    pace_s: Optional[float] = None,
    progress: bool = True,
    out: Callable[[str], None] = print,
):
    """The next cheap experiment on the demo's data: does the stall cadence
    of the historical path follow num_workers, and does the fix remove it?

    Runs :func:`traceml.sweep` over the historical path at num_workers 4,
    3, 2, 1, 0 then 0, 1, 2, 3, 4 (each condition a fresh DataLoader of ``steps``
    batches, a ``pace_s`` sleep per batch standing in for the training
    step), then the fixed path at num_workers 4 the same way, and prints
    the worker-count table, the correlation between max(1, num_workers)
    and the stall period, and ``traceml.compare`` of the historical
    path at 4 workers (the sweep's last condition) against the fixed path.

    Args:
        data_dir: cache directory of the dataset (default:
            :func:`default_data_dir`).
        quick: the tiny dataset and conditions of 6 batches of 2 (seconds),
            for tests: the tables, too small for the cadence to hold.
        steps: batches per condition (default 24; 6 with ``quick``).
        batch_size: samples per batch (default 10; 2 with ``quick``).
        pace_s: the training step stand-in, seconds of sleep per batch
            (default 0.15; 0.005 with ``quick``).
        progress: show the sweeps' progress (a tqdm bar when tqdm is
            installed, else a line per condition on stderr).
        out: called with each line (or block) of output.

    Returns:
        (sweep, comparison): an :class:`InvestigationResult` (8 historical
        rows, then the fixed row) and a :class:`traceml.Comparison` labelled
        "historical" and "fixed" (None when a run is missing: interrupted
        or failed).
    """
    size = QUICK if quick else FULL
    plan = INVESTIGATE_QUICK if quick else INVESTIGATE_FULL
    steps = plan.steps if steps is None else int(steps)
    batch_size = size.batch_size if batch_size is None else int(batch_size)
    pace_s = plan.pace_s if pace_s is None else float(pace_s)
    data_dir = default_data_dir() if data_dir is None else data_dir
    t_start = time.perf_counter()

    grid = ", ".join(str(w) for w in INVESTIGATE_WORKERS)
    back = ", ".join(str(w) for w in reversed(INVESTIGATE_WORKERS))
    out(
        f"traceml demo --investigate: the historical path at num_workers "
        f"{grid}, then {back}, and the fixed path at {FIXED_WORKERS}; "
        f"{steps} batches of {batch_size} per condition, training step = "
        f"sleep {pace_s * 1e3:g} ms"
    )
    cores = _cpu_count()
    if max(INVESTIGATE_WORKERS) > cores:
        out(
            f"note: up to {max(INVESTIGATE_WORKERS)} workers on {cores} CPU "
            "cores is deliberate; torch's 'suggested max number of worker' "
            "warning is silenced inside this demo"
        )
    historical_ds, fixed_ds = load_datasets(data_dir=data_dir, quick=quick, out=out)
    make = loader_factory(
        {"historical": historical_ds, "fixed": fixed_ds},
        steps=steps,
        batch_size=batch_size,
    )
    common = dict(steps=steps, consumer_pace_s=pace_s, progress=progress)

    out("")
    out(f"sweeping the historical path over num_workers {grid}, then {back} ...")
    t0 = time.perf_counter()
    with quiet_worker_warnings():
        historical = traceml.sweep(
            make, num_workers=INVESTIGATE_WORKERS, path=("historical",), **common
        )
    out(f"({time.perf_counter() - t0:.1f} s)")
    fixed = None
    if not historical.interrupted:
        out(f"running the fixed path at num_workers={FIXED_WORKERS} ...")
        t0 = time.perf_counter()
        with quiet_worker_warnings():
            fixed = traceml.sweep(
                make,
                num_workers=(FIXED_WORKERS,),
                path=("fixed",),
                both_directions=False,
                **common,
            )
        out(f"({time.perf_counter() - t0:.1f} s)")
    result = InvestigationResult(historical, fixed)

    out("")
    out("worker-count table (input wait per fetch; stall period in steps; "
        "correlation over the historical rows):")
    out(str(result))
    out(_cadence_line(historical))

    # The historical path at FIXED_WORKERS: the sweep's last condition, the
    # one measured right before the fixed path.
    last = len(historical.rows) - 1
    hist_rep = _report_of(historical, last) if not historical.interrupted else None
    fixed_rep = _report_of(fixed, 0) if fixed is not None else None
    comparison = None
    out("")
    if hist_rep is not None and fixed_rep is not None:
        comparison = traceml.compare(hist_rep, fixed_rep, labels=["historical", "fixed"])
        out(f"historical versus fixed, num_workers={FIXED_WORKERS}, "
            f"{steps} batches each:")
        out(str(comparison))
    else:
        out("historical versus fixed: not compared (a run is missing: "
            "interrupted or failed, see the table)")
    out("")
    out(f"investigation took {time.perf_counter() - t_start:.1f} s")
    return result, comparison


def main(argv: Optional[list[str]] = None) -> int:
    """The ``python -m traceml.demo`` command line; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m traceml.demo",
        description=(
            "Reproduce a DataLoader regression on a locally built "
            "LeRobot-shaped dataset and show what traceml reports for the "
            "historical and the fixed access path."
        ),
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="dataset cache directory (default: ~/.cache/traceml-demo)",
    )
    parser.add_argument(
        "--num-workers",
        type=int,
        default=None,
        help="DataLoader workers (default 4; not with --investigate, which "
        "sweeps 4, 3, 2, 1, 0)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="batches per path (default 72; per condition with "
        "--investigate, default 24)",
    )
    parser.add_argument(
        "--batch-size", type=int, default=None, help="samples per batch (default 10)"
    )
    parser.add_argument(
        "--pace-ms",
        type=float,
        default=None,
        help="stand-in training step, ms of sleep per batch (default 150)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a tiny run (seconds): both reports, too small for the cadence",
    )
    parser.add_argument(
        "--investigate",
        action="store_true",
        help="the next experiment (a few minutes): sweep the historical path "
        "over num_workers 4, 3, 2, 1, 0 and back, run the fixed path at 4, and "
        "print the worker-count table, the num_workers-cadence correlation "
        "and the historical-versus-fixed comparison",
    )
    args = parser.parse_args(argv)
    if args.investigate and args.num_workers is not None:
        parser.error("--num-workers does not apply to --investigate "
                     "(it sweeps num_workers 4, 3, 2, 1, 0)")
    if args.num_workers is not None and args.num_workers < 0:
        parser.error("--num-workers must be >= 0")
    if args.steps is not None and args.steps < 1:
        parser.error("--steps must be >= 1")
    if args.batch_size is not None and args.batch_size < 1:
        parser.error("--batch-size must be >= 1")
    if args.pace_ms is not None and args.pace_ms < 0:
        parser.error("--pace-ms must be >= 0")
    if args.investigate and args.steps is not None and args.steps < 2:
        parser.error("--steps must be >= 2 with --investigate")
    from .render import wrap_lines

    def out(text) -> None:
        # The demo's own one-line messages within the report's width; a
        # report's str() is laid out already (its tables pass unchanged).
        text = str(text)
        print(text if "\n" in text else "\n".join(wrap_lines([text])), flush=True)
    pace_s = None if args.pace_ms is None else args.pace_ms / 1e3
    if args.investigate:
        run_investigation(
            data_dir=args.data_dir,
            quick=args.quick,
            steps=args.steps,
            batch_size=args.batch_size,
            pace_s=pace_s,
            out=out,
        )
        return 0
    run_demo(
        data_dir=args.data_dir,
        num_workers=4 if args.num_workers is None else args.num_workers,
        steps=args.steps,
        batch_size=args.batch_size,
        pace_s=pace_s,
        quick=args.quick,
        out=out,
    )
    return 0


if __name__ == "__main__":
    main()
