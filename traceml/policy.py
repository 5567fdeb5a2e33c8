"""Every threshold and rule traceml applies, each with where it comes from.

Pure functions over NumPy arrays of nanoseconds: the same arrays in, the
same verdict out, so every rule is tested on hand-made inputs.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from . import _core

# --- diagnosis -------------------------------------------------------------
# Share of step time spent waiting for input.  TensorFlow's input-pipeline
# analyzer (TensorBoard profiler, "Input-pipeline analysis") calls a step
# "highly input-bound" above 20% and "not input-bound" below 5%; traceml-ai
# uses 10% and 20%.  We take TensorFlow's pair: 5% and 20%.
INPUT_BOUND_SHARE = 0.20
COMPUTE_BOUND_SHARE = 0.05

INPUT_BOUND = "INPUT-BOUND"
COMPUTE_BOUND = "COMPUTE-BOUND"
BALANCED = "BALANCED"
NO_DATA = "NO-DATA"


def diagnose(input_share: Optional[float]) -> tuple[str, str]:
    """(label, rule) for the share of step time spent waiting for input.

    ``input_share`` is total input wait / total step time over steady-state
    steps; None (no steps) gives NO-DATA.
    """
    if input_share is None or not math.isfinite(input_share):
        return NO_DATA, "no steady-state steps recorded"
    pct = f"{100 * input_share:.1f}%"
    if input_share >= INPUT_BOUND_SHARE:
        return INPUT_BOUND, (
            f"input wait is {pct} of step time (>= 20%: TensorFlow's "
            "input-pipeline analyzer calls this highly input-bound)"
        )
    if input_share < COMPUTE_BOUND_SHARE:
        return COMPUTE_BOUND, (
            f"input wait is {pct} of step time (< 5%: TensorFlow's "
            "input-pipeline analyzer calls this not input-bound)"
        )
    return BALANCED, (
        f"input wait is {pct} of step time (5% to 20%: moderately "
        "input-bound in TensorFlow's input-pipeline analyzer)"
    )


# --- stall threshold ---------------------------------------------------------
# A stall must be material next to the step it delays: at least 20% of the
# median step (the same 20% that makes a run input-bound above) and at
# least 1 ms, about one scheduler tick (Linux HZ=1000; 4 ms at HZ=250), below
# which a wait cannot be told from the thread being descheduled.
STALL_FLOOR_S = 1e-3
STALL_FLOOR_STEP_SHARE = 0.20
# Every fetch is slow when even the 10th-percentile wait clears the floor.
ALL_SLOW_PERCENTILE = 10.0
# Otherwise a stall is a *large* wait: above half the p95 wait.  Measured on
# this project's CPU-burning DataLoader runs (tests/test_dataloader.py): on
# a 2-core host with 4 workers, workers share the cores and finish in
# pairs, so waits inside a burst reach 20-30% of the burst's stall; half of
# p95 keeps those out and keeps the stalls in.
STALL_P95_SHARE = 0.5
# Otsu's separability eta (between-class share of the variance of
# log wait).  One Gaussian reaches at most 2/pi = 0.64 however it is split,
# so 0.8 asks for two clearly separate groups: "mostly fast, some stalled".
BIMODAL_MIN_ETA = 0.80
# eta is scale-free: a tight cluster of 20.1 ms fetches with a few 20.4 ms
# ones also splits cleanly.  Two groups only count as "fast" and "stalled"
# when their typical (geometric mean) waits differ at least 4-fold.
BIMODAL_MIN_RATIO = 4.0


def bimodal_split_ns(wait_ns: np.ndarray) -> Optional[float]:
    """The Otsu split of log(wait) when the waits form two well-separated
    groups (eta >= 0.8 and geometric means >= 4x apart), else None."""
    split = _core.log_otsu(wait_ns)
    eta = split["eta"]
    if not math.isfinite(eta) or eta < BIMODAL_MIN_ETA:
        return None
    if split["upper_mean_ns"] < BIMODAL_MIN_RATIO * split["lower_mean_ns"]:
        return None
    return split["threshold_ns"]


def stall_threshold_ns(
    wait_ns: np.ndarray, step_ns: np.ndarray, given_s: Optional[float]
) -> tuple[int, str]:
    """(threshold_ns, rule): a steady-state fetch is a stall when its input
    wait (ns, shape (steps,)) exceeds the threshold.

    Given ``given_s`` (seconds), the threshold is that, absolute
    (``5`` reproduces the common "> 5 s stall" convention).  Otherwise:

    * floor = max(1 ms, 20% of the median step);
    * every fetch slow (p10 wait > floor): the floor, so every slow fetch
      is a stall;
    * else the largest of the floor, half the p95 wait, and the Otsu split
      of log(wait) when the waits form two separate groups: this keeps the
      recurring large stalls of "mostly fast input with stalls" and leaves
      out both noise and the small waits inside a burst.
    """
    if given_s is not None:
        return int(round(given_s * 1e9)), f"given: wait > {given_s:g} s"
    if len(wait_ns) == 0:
        return int(STALL_FLOOR_S * 1e9), "auto: no steady-state steps"
    median_step = _core.percentiles(step_ns, 50.0)
    floor = max(STALL_FLOOR_S * 1e9, STALL_FLOOR_STEP_SHARE * median_step)
    p10, p95 = _core.percentiles(wait_ns, [ALL_SLOW_PERCENTILE, 95.0])
    if p10 > floor:
        return int(floor), (
            "auto: every fetch is slow (p10 wait > floor); floor "
            "max(1 ms, 20% of median step)"
        )
    candidates = {
        "floor max(1 ms, 20% of median step)": floor,
        "half the p95 wait": STALL_P95_SHARE * p95,
    }
    split = bimodal_split_ns(wait_ns)
    if split is not None:
        candidates["Otsu split between fast and slow fetches"] = split
    name = max(candidates, key=candidates.get)
    return int(candidates[name]), f"auto: {name}"


# --- epoch start ------------------------------------------------------------
# Each DataLoader worker's first batch of an epoch carries that worker's
# start-up (process start, dataset copy, worker_init_fn): the first
# max(1, num_workers) fetches of an epoch are start-up, not steady state.
# For other iterables only the first fetch (which holds iter()) is.


def epoch_start_mask(epoch: np.ndarray, workers_per_step: np.ndarray) -> np.ndarray:
    """True for the first ``workers_per_step`` steps of each run of equal
    ``epoch`` values (shapes (steps,)); see the rule above."""
    n = len(epoch)
    if n == 0:
        return np.zeros(0, dtype=bool)
    idx = np.arange(n)
    change = np.r_[True, epoch[1:] != epoch[:-1]]
    run_start = np.maximum.accumulate(np.where(change, idx, 0))
    return (idx - run_start) < workers_per_step


# --- cadence -----------------------------------------------------------------
# A period is claimed when there are at least 2 gaps and the modal gap holds
# at least half of them.  A DataLoader with num_workers = k hands batches
# out round-robin, k in flight at once; when input-bound the k workers
# finish together and the loop stalls once per k steps.  num_workers = 0
# loads in the main process, which behaves as one worker.
PERIOD_MIN_GAPS = 2
PERIOD_MIN_SHARE = 0.5


def effective_workers(num_workers: Optional[int]) -> Optional[int]:
    """Loaders in flight: num_workers, or 1 for num_workers = 0."""
    if num_workers is None:
        return None
    return max(int(num_workers), 1)


def cadence(gaps: np.ndarray, num_workers: Optional[int]) -> dict:
    """period (modal gap, or None), num_workers, matches_num_workers and
    multiple_fraction (share of gaps that are multiples of the effective
    worker count).  See PERIOD_MIN_GAPS and PERIOD_MIN_SHARE."""
    values, counts = _core.gap_histogram(gaps)
    period = None
    if len(gaps) >= PERIOD_MIN_GAPS and len(counts):
        best = int(_core.modal_gap(gaps))
        share = counts[values == best][0] / len(gaps)
        if share >= PERIOD_MIN_SHARE:
            period = best
    k = effective_workers(num_workers)
    out = {
        "period": period,
        "num_workers": num_workers,
        "matches_num_workers": None,
        "multiple_fraction": None,
    }
    if k is not None and len(gaps):
        match = _core.cadence_match(gaps, k)
        out["multiple_fraction"] = match["multiple_fraction"]
        out["matches_num_workers"] = period is not None and period == k
    return out
