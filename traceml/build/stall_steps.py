"""The waits' statistics, the stall rule's steps and gaps, and the
positions the residue tests read.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .. import _core
from ..findings import (input_bound, label_support, stall_shape, stall_threshold, stall_timing,
                        wait_trend)
from . import common
from .common import NS


def input_share(w: common.Steady) -> tuple[Optional[float], int]:
    """(the steady steps' total input wait over their total step time,
    None without step time; the total step time, ns)."""
    total_step = int(w.step.sum())
    return (float(w.wait.sum()) / total_step if total_step > 0 else None), total_step


def duration_block(w: common.Steady, production: Optional[dict] = None,
                   unmarked: Optional[tuple] = None,
                   production_fraction: Optional[float] = None,
                   other_largest_fraction: Optional[float] = None,
                   host_leads: bool = False, main_leads: bool = False, *,
                   totals: tuple) -> dict:
    """Input wait, compute and step statistics of the steady-state steps,
    the input share and the diagnosis (with the workers' own timing when
    it covers the steady steps, the clocked split of the wait, as
    fractions of it (wait_parts.production_fraction and
    other_largest_fraction) and whether its largest part is the host's
    (wait_parts.host_leads), and the probe steps without a fetch mark:
    input_bound.diagnose).  ``totals``: :func:`input_share` of ``w``,
    which the caller's host test reads too."""
    share, total_step = totals
    mean_step_ns = total_step / len(w.step) if len(w.step) else None
    produced = input_bound.production_share(production)
    if produced is not None and production_fraction is not None and share is not None:
        produced = share * production_fraction
    diagnosis = input_bound.diagnose(share, produced, unmarked, mean_step_ns,
                                     other_largest_fraction, host_leads, main_leads)
    # The stall rule's order statistics of the same waits and steps, from
    # the same selections (stall_threshold.KnownStats).
    wait_s, (p10, p95) = common.stats_and(w.wait, (stall_threshold.ALL_SLOW_PERCENTILE,
                                                   stall_threshold.STALL_PERCENTILE))
    compute_s, (compute_median,) = common.stats_and(w.step - w.wait, (50.0,))
    step_s, (step_median,) = common.stats_and(w.step, (50.0,))
    w.known = stall_threshold.KnownStats(p10, p95, step_median, compute_median)
    return {
        "input_wait_s": wait_s,
        "compute_s": compute_s,
        "step_s": step_s,
        "input_share": share,
        "diagnosis": diagnosis.label,
        **common.worded("diagnosis_rule", input_bound.diagnosis_finding(*diagnosis)),
    }


def diagnosis_support(w: common.Steady, label: str, production: Optional[dict],
                      making_ns: Optional[np.ndarray], loader: Optional[dict],
                      production_fraction: Optional[float] = None,
                      other_largest_fraction: Optional[float] = None,
                      host_leads: bool = False,
                      main_leads: bool = False) -> Optional[dict]:
    """label_support.support of the diagnosis over the steady steps, with
    the workers' production per step where it decided the label (or its
    clocked fraction of the wait, held fixed)."""
    making = None
    decided = making_ns is not None and input_bound.production_share(production) is not None
    if decided and production_fraction is None:
        making = making_ns if w.all else making_ns[w.steady]
    if not decided:
        production_fraction = None
    nw = (loader or {}).get("num_workers") or 0
    mean_step = float(w.step.mean()) if len(w.step) else None
    return label_support.support(w.wait, w.step, label, making, max(1, int(nw)), mean_step,
                                 other_largest_fraction, production_fraction, host_leads,
                                 main_leads)


def stall_block(w: common.Steady, epoch: np.ndarray, threshold_s: Optional[float],
                round_steps: int = 1, marked: Optional[np.ndarray] = None
                ) -> tuple[np.ndarray, np.ndarray, dict]:
    """(stall mask over all steps, gaps between stalls, the shape,
    concentration, trend and stalls sections) under
    stall_threshold.stall_threshold_ns.  ``marked``: the steady probe
    steps whose fetch was marked (None: all): the trend reads only their
    waits, since a step without fetch_done() has no measured wait (5
    unmarked steps at a run's end read "wait STEP 8 ms -> 2 ms", helper
    36B)."""
    trends, not_yet = [], []

    def trending(rule) -> bool:
        wait, ep = w.wait, epoch if w.all else epoch[w.steady]
        if marked is not None:
            wait, ep = wait[marked], ep[marked]
        if trends:
            found = wait_trend.trend(wait, ep, rule.floor_ns, round_steps)
        else:
            found, first_not_yet = wait_trend.read(wait, ep, rule.floor_ns, round_steps)
            not_yet.append(first_not_yet)
        if found is not None and marked is not None and found.get("changed_at_step") is not None:
            # Back to the index among all steady steps.
            found["changed_at_step"] = int(np.flatnonzero(marked)[found["changed_at_step"]])
        trends.append(found)
        return trends[0] is not None

    found = stall_shape.classify(w.wait, w.step, threshold_s, trending, known=w.known)
    trend = trends[0]
    shape_support = (label_support.shape_support(
        w.wait, w.step, found.shape[0], threshold_s, round_steps,
        position=found.rule.code == stall_threshold.RULE_POSITION)
                     if found.shape else None)
    w.step = None    # not needed past the stall rule: 8 B a step
    rule, matter, mask_s, outliers_s = found.rule, found.matter, found.stalls, found.outliers
    mask, outliers = w.full(mask_s), w.full(outliers_s)
    gaps = _core.stall_gaps(mask, epoch)
    values, counts = _core.gap_histogram(gaps)
    stall_count = int(np.count_nonzero(mask_s))
    calm_median, stall_median = found.calm_median_ns, found.stall_median_ns
    shape = found.shape
    outlier_count = int(np.count_nonzero(outliers_s))
    return mask, gaps, {
        "shape": shape[0] if shape else None,
        **common.worded("shape_rule", stall_shape.shape_finding(shape[1]) if shape else None),
        "shape_support": shape_support,
        "concentration": stall_shape.concentration(w.wait, mask_s),
        "trend": trend,
        "trend_not_yet": not_yet[0] if not_yet else None,
        "stalls": {
            "threshold_s": rule.threshold_ns * NS,
            **common.worded("rule", stall_threshold.stall_finding(rule)),
            "rule_code": rule.code,
            "all_slow": rule.all_slow,
            "count": stall_count,
            "steps": np.flatnonzero(mask).tolist(),
            "outliers": outlier_count,
            "outlier_steps": np.flatnonzero(outliers).tolist(),
            "outlier_max_s": float(w.wait[outliers_s].max()) * NS if outlier_count else None,
            "matter": matter.code,
            "cost_share": matter.cost_share,
            "floor_s": rule.floor_ns * NS,
            "slow_count": int(np.count_nonzero(w.wait > rule.floor_ns)),
            "calm_median_s": calm_median * NS if calm_median is not None else None,
            "stall_median_s": stall_median * NS if stall_median is not None else None,
            "every_fetch_slow": rule.every_fetch_slow,
            "gaps": gaps.tolist(),
            "median_gap": _core.percentiles(gaps, 50.0) if len(gaps) else None,
            "modal_gap": _core.modal_gap(gaps),
            "gap_histogram": np.stack([values, counts], axis=1).tolist(),
        },
    }


def positions(steps: np.ndarray, w: common.Steady, mask: np.ndarray, stalls: dict,
              runs: Optional[tuple] = None) -> Optional[stall_timing.Positions]:
    """Each step's place for the residue tests (stall_timing.Positions):
    the phase counted from each epoch's start, the steady fetches whose
    position is known, and the loader waits (``w.wait``) of the first
    steps; None without stalls that matter."""
    if not stalls["count"]:
        return None
    position = epoch_position(steps, runs)
    # The rank tests read at most RANK_MAX_FETCHES tested fetches: the
    # waits of twice as many first steps, not a copy of every step's.
    m = min(len(steps), 2 * stall_timing.RANK_MAX_FETCHES)
    if w.all:
        wait = w.wait[:m]
    else:
        wait = np.zeros(m, dtype=np.int64)
        head = w.steady[:m]
        wait[head] = w.wait[:int(np.count_nonzero(head))]
    return stall_timing.Positions(mask, position, w.steady & (position >= 0), wait)


def predicted_cadence(positions: Optional[stall_timing.Positions],
                      num_workers: Optional[int]) -> Optional[dict]:
    """The pre-stated cadence test (stall_timing.predicted_cadence) for
    the loader's own period max(1, num_workers); None without a loader,
    with one loader in flight or without ``positions`` (no stalls that
    matter)."""
    period = stall_timing.effective_workers(num_workers)
    if period is None or period < 2 or positions is None:
        return None
    return stall_timing.predicted_cadence(positions.stalled, positions.position, period,
                                          positions.tested, positions.wait_ns)


def epoch_position(steps: np.ndarray, runs: Optional[tuple] = None) -> np.ndarray:
    """Each step's 0-based position in its epoch (int64, shape (steps,)),
    -1 where unknown.  The wrap iterator records it up to FLAG_POS_MAX; past
    that, it is counted on from the first recorded step of the epoch's run
    (a reset() mid-epoch leaves that first step's own position).  ``runs``
    (evidence.epoch_runs of the steps' epochs) gives the runs' starts where
    each epoch is one run."""
    starts = runs[1] if runs is not None else None
    if starts is None:
        epoch = steps["epoch"]
        starts = np.flatnonzero(np.r_[True, epoch[1:] != epoch[:-1]])
    if len(steps) == 0:
        return np.zeros(0, dtype=np.int64)
    first = (steps["flags"][starts] >> _core.FLAG_POS_SHIFT).astype(np.int64)
    known = first < _core.FLAG_POS_MAX
    # Within each run: the first step's position plus the distance from it.
    position = np.arange(len(steps), dtype=np.int64)
    shift = np.where(known, first - starts, -1 - len(steps))
    if len(starts) <= common.STEADY_RUNS_MAX:
        # Run by run, in place: no full-length array of shifts.
        for lo, hi, by in zip(starts.tolist(), np.r_[starts[1:], len(steps)].tolist(),
                              shift.tolist()):
            position[lo:hi] += by
    else:
        position += np.repeat(shift, np.diff(np.r_[starts, len(steps)]))
    return np.maximum(position, -1, out=position)


def temporal_block(mask: np.ndarray, gaps: np.ndarray, epoch: np.ndarray,
                   steady_wait: np.ndarray, num_workers: Optional[int],
                   every_fetch: bool, predicted: Optional[dict] = None,
                   stall_wait: Optional[np.ndarray] = None,
                   positions: Optional[stall_timing.Positions] = None) -> dict:
    """The temporal structure of the stalls and their cadence;
    ``stall_wait``: each stall's wait (ns, in step order); ``positions``:
    for the residue tests."""
    temporal = stall_timing.temporal_of(mask, epoch, steady_wait, len(steady_wait), every_fetch,
                                        predicted, stall_wait, positions, gaps)
    period = temporal["period"] if temporal else None
    if temporal and temporal["counted"] == "bursts":
        # The cadence of a period counted per burst is that of the bursts.
        gaps = _core.stall_gaps(stall_timing.burst_anchors(mask, epoch, stall_wait), epoch)
    return {"temporal": temporal, "cadence": stall_timing.cadence(gaps, period, num_workers)}
