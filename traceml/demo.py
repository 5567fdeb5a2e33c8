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
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from dataclasses import dataclass
from typing import Callable, Optional

import traceml


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


def _run_path(
    name: str, dataset, *, num_workers: int, steps: int, batch_size: int, pace_s: float
) -> "traceml.Report":
    """Iterate one epoch of ``steps`` batches of ``dataset`` through a
    DataLoader wrapped by traceml, sleeping ``pace_s`` seconds per batch, and
    return the report of that source."""
    import torch
    from torch.utils.data import DataLoader, RandomSampler

    # The same seed for both paths: the same samples in the same order.
    sampler = RandomSampler(
        dataset,
        num_samples=steps * batch_size,
        generator=torch.Generator().manual_seed(SEED),
    )
    traceml.reset()
    with warnings.catch_warnings():
        # More workers than cores is the point of the demo (see run_demo);
        # torch warns both when the loader is made and at each iter().
        warnings.filterwarnings(
            "ignore",
            message=r"This DataLoader will create \d+ worker processes",
            category=UserWarning,
        )
        loader = DataLoader(
            dataset, batch_size=batch_size, sampler=sampler, num_workers=num_workers
        )
        for _batch in traceml.wrap(loader, name=name):
            time.sleep(pace_s)  # the training step
    return traceml.report(source=name)


def verdict(historical: "traceml.Report", fixed: "traceml.Report") -> str:
    """One line: the historical diagnosis and its stall cadence against
    num_workers, then the fixed diagnosis and its stall count."""
    h, f = historical.to_dict(), fixed.to_dict()
    cad = h["cadence"]
    workers = f"num_workers={cad['num_workers']}"
    if cad["num_workers"] == 0:
        workers += " (loading in the loop's own process)"
    period = cad["period"]
    if period is None:
        cadence = f"no regular stall cadence with {workers}"
    else:
        every = "every step" if period == 1 else f"every {period} steps"
        match = "matching" if cad["matches_num_workers"] else "not matching"
        cadence = f"a stall {every}, {match} {workers}"
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
    from . import _lerobot

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

    slow = _lerobot.HistoricalDeltaDataset(hf)
    fast = _lerobot.FixedDeltaDataset(hf)
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
    return historical, fixed


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
        "--num-workers", type=int, default=4, help="DataLoader workers (default 4)"
    )
    parser.add_argument(
        "--steps", type=int, default=None, help="batches per path (default 72)"
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
    args = parser.parse_args(argv)
    if args.num_workers < 0:
        parser.error("--num-workers must be >= 0")
    if args.steps is not None and args.steps < 1:
        parser.error("--steps must be >= 1")
    if args.batch_size is not None and args.batch_size < 1:
        parser.error("--batch-size must be >= 1")
    if args.pace_ms is not None and args.pace_ms < 0:
        parser.error("--pace-ms must be >= 0")
    run_demo(
        data_dir=args.data_dir,
        num_workers=args.num_workers,
        steps=args.steps,
        batch_size=args.batch_size,
        pace_s=None if args.pace_ms is None else args.pace_ms / 1e3,
        quick=args.quick,
        out=lambda line: print(line, flush=True),
    )
    return 0


if __name__ == "__main__":
    main()
