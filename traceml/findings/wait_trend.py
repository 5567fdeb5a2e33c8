"""A trend of the input wait over the run: RISING or FALLING.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ..fmt import fmt_s
from . import _numbers, input_bound


# A wait that grows (or shrinks) steadily over the run is state that
# changes per step (a cache or list kept in the dataset, a leak,
# fragmentation), which more workers would only hide.  RISING / FALLING
# when both hold:
# * Kendall's rank test of the steady waits against step index, over block
#   medians (at most TREND_BLOCKS blocks, so 10M steps stay fast and one
#   stall cannot drive it), is significant at TREND_ALPHA (the same 1 in
#   100 false-alarm rate as a period), with Theil-Sen's robust slope;
# * the change is material: the median of the last tenth of the steady
#   waits and that of the first tenth are at least TREND_MIN_RATIO apart,
#   and they differ by more than the floor (max(1 ms, 20% of the median
#   step)), below which a wait does not matter to the step, and by at
#   least TREND_MIN_WAIT_SHARE of the mean steady wait: a drift that
#   moves the wait by less than half its mean is not what the loop waits
#   on (a user trial's loader with one slow sample in 5 and a constant
#   cost per item read "FALLING 4.15 ms -> 1.03 ms ... a warm-up" beside
#   stalls that made a 30.7 ms mean wait).
# With at least TREND_MIN_EPOCHS epochs whose median steady waits move
# monotonically, the Theil-Sen slope over epochs is given too.
RISING = "RISING"
FALLING = "FALLING"
TREND_BLOCKS = 200
TREND_ALPHA = 0.01
TREND_MIN_RATIO = 2.0
TREND_TENTH = 0.1
TREND_MIN_EPOCHS = 3
TREND_MIN_WAIT_SHARE = 0.5


def _block_medians(x: np.ndarray, blocks: int) -> tuple[np.ndarray, np.ndarray]:
    """(centre index, median) of ``blocks`` contiguous blocks of n // blocks
    steps of the integers ``x``, the last one holding the remainder too
    (numpy.median's values, by selection in C: no copy of ``x``)."""
    n = len(x)
    size = n // blocks
    if size == 1 and n == blocks:
        return np.arange(n, dtype=np.float64), x.astype(np.float64)
    head = (blocks - 1) * size
    med = np.empty(blocks)
    for b in range(blocks - 1):
        med[b] = _numbers.int_median(x[b * size:(b + 1) * size])
    med[-1] = _numbers.int_median(x[head:])
    centre = np.r_[np.arange(blocks - 1) * size + (size - 1) / 2.0, (head + n - 1) / 2.0]
    return centre, med


def trend(wait_ns: np.ndarray, epoch: np.ndarray, floor_ns: float) -> Optional[dict]:
    """{label, slope_ms_per_step, slope_ms_per_epoch, first_tenth_median_s,
    last_tenth_median_s, tau, p_value} of the steady-state waits ``wait_ns``
    (in step order, with their ``epoch``) by the rule above, or None (no
    trend, or fewer than MIN_STEADY_STEPS steps).  ``floor_ns`` is the
    stall rule's floor (ns)."""
    n = len(wait_ns)
    if n < input_bound.MIN_STEADY_STEPS:
        return None
    from scipy.stats import kendalltau, theilslopes

    # Medians by selection over the integer waits: the same values as over
    # wait_ns.astype(float64) (the cast keeps the order), without a copy.
    x = np.ascontiguousarray(wait_ns) if _numbers._is_int(wait_ns) else wait_ns.astype(np.float64)
    centre, med = _block_medians(x, min(TREND_BLOCKS, n))
    if np.ptp(med) == 0:
        return None
    tau, p_value = kendalltau(centre, med)
    if not math.isfinite(p_value) or p_value >= TREND_ALPHA:
        return None
    tenth = max(1, int(round(TREND_TENTH * n)))
    first, last = _numbers.int_median(x[:tenth]), _numbers.int_median(x[-tenth:])
    lo, hi = sorted((first, last))
    if hi < TREND_MIN_RATIO * max(lo, 1.0) or hi - lo <= floor_ns:
        return None
    if hi - lo < TREND_MIN_WAIT_SHARE * float(np.mean(x)):
        return None
    label = RISING if last > first else FALLING
    slope = float(theilslopes(med, centre)[0])
    if (slope > 0) != (label == RISING):
        return None
    per_epoch = None
    epochs = np.unique(epoch)
    if len(epochs) >= TREND_MIN_EPOCHS:
        order = np.argsort(epoch, kind="stable")
        bounds = np.searchsorted(epoch[order], epochs[1:])
        meds = np.array([np.median(part) for part in
                         np.split(x.astype(np.float64)[order], bounds)])
        step = np.diff(meds)
        if (step > 0).all() or (step < 0).all():
            per_epoch = float(theilslopes(meds, np.arange(len(meds)))[0]) * 1e-6
    return {"label": label, "slope_ms_per_step": slope * 1e-6,
            "slope_ms_per_epoch": per_epoch,
            "first_tenth_median_s": first * 1e-9, "last_tenth_median_s": last * 1e-9,
            "tau": float(tau), "p_value": float(p_value)}


def _trend_next_line(p: dict) -> str:
    grows = p["label"] == RISING
    per_step = abs(p["slope_ms_per_step"]) * 1e-3
    text = (f"The input wait {'grows' if grows else 'shrinks'} steadily, "
            f"{'+' if grows else '-'}{fmt_s(per_step)} per step (median "
            f"{fmt_s(p['first_tenth_median_s'])} in the first tenth of the steps, "
            f"{fmt_s(p['last_tenth_median_s'])} in the last)")
    if p.get("slope_ms_per_epoch") is not None:
        text += (f", {'+' if p['slope_ms_per_epoch'] > 0 else '-'}"
                 f"{fmt_s(abs(p['slope_ms_per_epoch']) * 1e-3)} per epoch")
    if grows:
        return text + (": state that grows per step, such as a cache or list kept in the "
                       "dataset, a leak or memory fragmentation; more workers would only "
                       "hide a cost that keeps growing.")
    return text + (": a warm-up (caches filling, files coming into the page cache) "
                   "rather than a steady cost.")


def trend_part(trend: Optional[dict]) -> Optional[str]:
    """"wait RISING 1.2 ms -> 38 ms (+0.49 ms per step)" for the shape line;
    None without a trend."""
    if not trend:
        return None
    slope = trend["slope_ms_per_step"] * 1e-3
    return (f"wait {trend['label']} {fmt_s(trend['first_tenth_median_s'])} -> "
            f"{fmt_s(trend['last_tenth_median_s'])} (first to last tenth, "
            f"{'+' if slope > 0 else '-'}{fmt_s(abs(slope))} per step)")
