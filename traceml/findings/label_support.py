"""How firmly the run's own steps hold its diagnosis: the label's support
under a block bootstrap of the steady steps, and "borderline" below a
stated support, with both readings and about how many steps would settle
it.

The model: the steady steps are a stationary series whose dependence
reaches a few steps (prefetch, a round of workers), so the input share
(total wait / total step time) of another run of the same loop would
differ from this one's by what resampling whole blocks of steps shows.
The block bootstrap of disjoint blocks (Carlstein 1986, "The use of
subseries values for estimating the variance of a general statistic
from a stationary sequence", Ann. Statist. 14(3)) draws SUPPORT_RESAMPLES
series of the run's length from its n // b blocks of b = block_length(n)
steps (the few steps past the last whole block join every resample as
they are; one pass over the steps, so 10M steps stay fast),
re-reads the diagnosis of each (input_bound.diagnose, over the
resampled wait, step and, where the workers' timing decides HAND-OVER,
production), and the support is the share of resamples that give the
run's own label.  A label under SUPPORT_MIN is borderline: two identical
runs of such a loop can read either way (a user trial: 12 of 44 loops
gave a different label on two identical runs).
"""

from __future__ import annotations

import collections
import math
from typing import Optional

import numpy as np
from scipy import stats

from ..fmt import pct
from ._types import Finding, Words
from . import input_bound, stall_timing, wait_trend

# A label is firm when at least 9 in 10 resamples of its own steps agree
# (the 90% of a one-sided interval); under it, borderline.
SUPPORT_MIN = 0.9
# 199: (199 + 1) * 0.05 is whole, and a support of 0.9 is read within
# about +-2 points (binomial standard error sqrt(0.9 * 0.1 / 199)).
SUPPORT_RESAMPLES = 199
# Any fixed seed: the same run gives the same support.
SUPPORT_SEED = 52_021
# Below this many steady steps no diagnosis is supported (as for the
# shape and the next steps: input_bound.MIN_STEADY_STEPS).
SUPPORT_MIN_STEPS = input_bound.MIN_STEADY_STEPS
# The z of SUPPORT_MIN (one-sided), for the steps that would settle it.
_Z = 1.2815515655446004   # scipy.stats.norm.ppf(0.9)

LABELS = (input_bound.INPUT_BOUND, input_bound.BALANCED, input_bound.COMPUTE_BOUND,
          input_bound.HAND_OVER, input_bound.HOST_BOUND)


# At most this many blocks: past about 93k steps (n^(2/3) > 2048) the
# blocks grow instead, so that the resampling costs 199 x 2048 additions
# whatever the run's length (longer blocks only keep more of the
# dependence; the share of a run that long is read to a fraction of a
# point either way).
SUPPORT_MAX_BLOCKS = 2048


def block_length(n: int, round_steps: int = 1) -> int:
    """Steps a block: n^(1/3) rounded up (the order of the block length
    that estimates a variance best, Hall, Horowitz & Jing 1995, Biometrika
    82(3)), at least ``round_steps`` (one round of the loader's workers,
    so that a block holds whole rounds) and n / SUPPORT_MAX_BLOCKS, at most
    n // 2: two blocks are the fewest a resample can vary over (with one,
    every resample is the run itself, and a label read firm from 10 steps
    of 6 workers was only the run's own reading again).  A round longer
    than half the run is cut: such a run holds under two rounds, and its
    support is that of its halves."""
    least = max(math.ceil(n ** (1.0 / 3.0)), int(round_steps), -(-n // SUPPORT_MAX_BLOCKS))
    return int(max(1, min(n // 2, least)))


def _block_sums(x: np.ndarray, b: int) -> tuple[np.ndarray, float]:
    """(the sums of the n // b disjoint blocks of ``b`` steps of ``x``, the
    sum of the steps left over after them), float64: one pass over ``x``."""
    k = len(x) // b
    head = np.asarray(x[:k * b], dtype=np.float64).reshape(k, b).sum(axis=1)
    return head, float(np.sum(x[k * b:], dtype=np.float64))


def support(wait_ns: np.ndarray, step_ns: np.ndarray, label: str,
            making_ns: Optional[np.ndarray] = None, round_steps: int = 1,
            mean_step_ns: Optional[float] = None,
            other_largest_fraction: Optional[float] = None,
            production_fraction: Optional[float] = None,
            host_leads: bool = False, main_leads: bool = False) -> Optional[dict]:
    """The support of ``label`` (the run's diagnosis) under the block
    bootstrap of the steady steps (see above), or None for a label
    it does not apply to (NO-DATA) or under SUPPORT_MIN_STEPS steps.

    ``wait_ns``, ``step_ns``: the steady steps' input wait and step
    duration (ns, shape (n,)); ``making_ns``: per step the ns of its wait
    during which the awaited worker was making batches, -1 unknown (None:
    the workers' timing does not decide HAND-OVER); ``round_steps``:
    max(1, num_workers); ``other_largest_fraction``: as
    input_bound.diagnose takes it (the measured split of the hand-over,
    held fixed across resamples); ``production_fraction``: the clocked
    production's fraction of the wait (wait_parts.production_fraction),
    held fixed too, each resample's production its share times it
    (``making_ns`` then None); ``host_leads`` and ``main_leads``: as
    input_bound.diagnose takes them, held fixed.  Returns {label, support (share of resamples
    giving ``label``), readings ({label: share of resamples}), other (the
    commonest other label, or None), share (the run's input share),
    share_se (the resamples' standard deviation of it), line (the nearest
    bound between ``label`` and ``other``), settle_steps (about how many
    more steps would put the share SUPPORT_MIN's z standard errors from
    that line, or None where the share sits on it), block, resamples}."""
    n = len(wait_ns)
    if label not in LABELS or n < SUPPORT_MIN_STEPS:
        return None
    b = block_length(n, round_steps)
    k = n // b
    picks = np.random.default_rng(SUPPORT_SEED).integers(0, k, size=(SUPPORT_RESAMPLES, k))

    def resampled(x: np.ndarray) -> np.ndarray:
        sums, rest = _block_sums(x, b)
        return sums[picks].sum(axis=1) + rest

    wait_r = resampled(wait_ns)
    step_r = resampled(step_ns)
    share_r = np.divide(wait_r, step_r, out=np.full(SUPPORT_RESAMPLES, np.nan),
                        where=step_r > 0)
    prod_r = None
    if production_fraction is not None:
        prod_r = share_r * production_fraction
    elif making_ns is not None:
        making = np.asarray(making_ns)
        known = making >= 0
        prod_sum = resampled(np.where(known, np.clip(making, 0, wait_ns), 0))
        known_step = resampled(np.where(known, step_ns, 0))
        prod_r = np.divide(prod_sum, known_step, out=np.full(SUPPORT_RESAMPLES, np.nan),
                           where=known_step > 0)
    readings, other = _readings(label, [input_bound.diagnose(
        float(s), None if prod_r is None or not math.isfinite(prod_r[i]) else float(prod_r[i]),
        None, mean_step_ns, other_largest_fraction, host_leads, main_leads).label
        for i, s in enumerate(share_r)])
    share = float(np.sum(wait_ns, dtype=np.float64) / np.sum(step_ns, dtype=np.float64))
    se = float(np.nanstd(share_r))
    line = _line_between(label, other, share)
    return {"label": label, "support": readings.get(label, 0.0), "readings": readings,
            "other": other, "share": share, "share_se": se, "line": line,
            "settle_steps": _settle_steps(n, share, se, line), "block": b,
            "resamples": SUPPORT_RESAMPLES}


# The shape is re-read from each resample by the whole stall rule (its
# percentiles, Otsu split and cost): measured here 0.06 s for the 199
# resamples at 100 steps, 0.17 s at 2,000, 1.4 s at 20,000.  Past
# SHAPE_SUPPORT_MAX_STEPS steady steps its support is not computed (None),
# a bound on report()'s cost, not a statement about the label; runs that
# long hold their shape firmly unless it sits on a rule's line.
SHAPE_SUPPORT_MAX_STEPS = 4096
# Two stages: where the first SHAPE_SUPPORT_FIRST resamples all read the
# run's own shape, the shape is firm without the rest.  A shape whose true
# support were SUPPORT_MIN (the line) would pass that stage with chance
# 0.9^49 = 0.0057, under 1%; a firm shape (a support near 1) passes it
# almost always and costs a quarter of the 199 readings.  Any disagreement
# reads all SUPPORT_RESAMPLES, so a support under the line, and what the
# borderline line prints, come from the full set.  The first stage is the
# first rows of the same seeded draw: the same run gives the same answer.
SHAPE_SUPPORT_FIRST = 49


def shape_support(wait_ns: np.ndarray, step_ns: np.ndarray, label: str,
                  given_s: Optional[float] = None, round_steps: int = 1,
                  position: bool = False) -> Optional[dict]:
    """The support of the shape ``label`` (FAST, HEAVY-TAILED,
    UNIFORMLY-SLOW) under the same block bootstrap as :func:`support`: each
    resample is the steps of its blocks in order, then the steps past the
    last whole block as they are (so a resample is as long as the run and
    holds its last steps, as :func:`support`'s do), read again by the stall
    rule and the shape (stall_shape.classify, the caller's threshold
    ``given_s`` too; no trend: resampled blocks carry none).  None under
    SUPPORT_MIN_STEPS or past SHAPE_SUPPORT_MAX_STEPS steps.  The stall
    rule's position test runs in the resamples only where the run's own
    rule was it (``position``): 199 of them a report otherwise.  Where the
    first SHAPE_SUPPORT_FIRST resamples all agree with ``label`` the rest
    are not read (support 1.0, ``resamples`` SHAPE_SUPPORT_FIRST).  Returns
    {label, support, readings, other, block, resamples}."""
    from . import stall_shape

    n = len(wait_ns)
    if n < SUPPORT_MIN_STEPS or n > SHAPE_SUPPORT_MAX_STEPS or label is None:
        return None
    b = block_length(n, round_steps)
    k = n // b
    rng = np.random.default_rng(SUPPORT_SEED + 1)
    picks = rng.integers(0, k, size=(SUPPORT_RESAMPLES, k))
    offsets = np.arange(b)
    rest = np.arange(k * b, n)
    names = []
    for i, row in enumerate(picks):
        if i == SHAPE_SUPPORT_FIRST and all(x == label for x in names):
            break
        idx = np.concatenate([(row[:, None] * b + offsets).ravel(), rest])
        got = stall_shape.classify(wait_ns[idx], step_ns[idx], given_s,
                                   position=position).shape
        names.append(got[0] if got else None)
    readings, other = _readings(label, names)
    sup = readings.get(label, 0.0)
    out = {"label": label, "support": sup, "readings": readings, "other": other,
           "settle_steps": None, "block": b, "resamples": len(names)}
    if sup < SUPPORT_MIN and other is not None and k >= 4:
        # The model behind the estimate says the leading reading's support
        # grows with the run; read at half the run (each resample's first
        # half of its blocks, no tail), it must be lower, else more steps
        # may not settle it (a loop whose shape sat on a rule's line read
        # "about 15 more steps would settle it" at 300 steps, and neither
        # 315 nor 1700 did, helper 40C).
        leader = label if sup >= readings.get(other, 0.0) else other
        half = [stall_shape.classify(wait_ns[idx], step_ns[idx], given_s,
                                     position=position).shape
                for idx in ((row[: k // 2, None] * b + offsets).ravel() for row in picks)]
        out["half_support"] = sum(1 for h in half if h and h[0] == leader) / len(half)
        lead = readings.get(leader, 0.0)
        if lead > out["half_support"]:
            out["settle_steps"] = _shape_settle_steps(n, lead, len(names))
    return out


def _shape_settle_steps(n: int, lead: float, resamples: int) -> Optional[int]:
    """About how many more steps would let the leading reading (the
    share ``lead`` of ``resamples`` resamples of ``n`` steps) reach
    SUPPORT_MIN.  The model, the diagnosis's (:func:`_settle_steps`): the
    reading is decided by a margin whose standard error shrinks as
    1/sqrt(n), so the support is Phi(z sqrt(n / n0)) from z = Phi^-1(lead)
    at n0 = n, and SUPPORT_MIN is reached at n (_Z / z)^2 steps.  None
    where no reading leads (lead <= 1/2: the margin is nil, no length
    settles it) or past stall_timing.SETTLE_MAX_GROWTH times the run;
    never 0 (the run's own length again, the next length to look at, as
    :func:`_settle_steps`).  ``lead`` of 1 is read as 1 - 1/(2 resamples),
    the most a finite count can tell."""
    lead = min(lead, 1.0 - 0.5 / max(1, resamples))
    if lead <= 0.5:
        return None
    z = float(stats.norm.ppf(lead))
    need = n * (_Z / z) ** 2
    if need > stall_timing.SETTLE_MAX_GROWTH * n:
        return None
    more = int(math.ceil(need - n))
    return more if more > 0 else n


def _readings(label: str, labels: list) -> tuple[dict, Optional[str]]:
    """({label: share of the resamples}, commonest first, None left out;
    the commonest label other than ``label``, or None) of the labels the
    resamples gave."""
    counts = collections.Counter(x for x in labels if x is not None)
    readings = {x: c / len(labels) for x, c in counts.most_common()}
    return readings, next((x for x in readings if x != label), None)


def _line_between(label: str, other: Optional[str], share: float) -> Optional[float]:
    """The input-share bound the two labels sit either side of (None when
    the other reading is HAND-OVER against INPUT-BOUND: that line is the
    production share's, not the input share's; HOST-BOUND sits where
    INPUT-BOUND does)."""
    bounds = (input_bound.COMPUTE_BOUND_SHARE, input_bound.INPUT_BOUND_SHARE)
    if other is None:
        return min(bounds, key=lambda x: abs(x - share))
    pair = {label, other}
    if pair == {input_bound.COMPUTE_BOUND, input_bound.BALANCED}:
        return input_bound.COMPUTE_BOUND_SHARE
    if input_bound.BALANCED in pair or input_bound.COMPUTE_BOUND in pair:
        return input_bound.INPUT_BOUND_SHARE
    return None


def _settle_steps(n: int, share: float, se: float, line: Optional[float]) -> Optional[int]:
    """More steps for the share's standard error, shrinking as 1/sqrt(n),
    to put the share _Z errors from ``line``: n (z se / d)^2 - n; None
    where it cannot (on the line, no spread, no line) or past
    stall_timing.SETTLE_MAX_GROWTH times the run (the same horizon as a
    period's "not yet").  Where the normal approximation says this run
    would do (need <= n) while the resamples' support says it does not (a
    skewed share), the run's own length again: the next length at which
    to look, never "0 more steps"."""
    if line is None or se <= 0:
        return None
    d = abs(share - line)
    if d <= 0:
        return None
    need = n * (_Z * se / d) ** 2
    if need > stall_timing.SETTLE_MAX_GROWTH * n:
        return None
    more = int(math.ceil(need - n))
    return more if more > 0 else n


def is_borderline(sup: Optional[dict]) -> bool:
    """Whether the support is under SUPPORT_MIN."""
    return bool(sup and sup["support"] < SUPPORT_MIN and sup["other"] is not None)


def _borderline(s: dict, label_key: str, code: str, keys: tuple) -> list[Finding]:
    """[Finding(code, the support's ``keys``)] when the support of
    ``s[label_key]`` (under ``label_key + "_support"``) is under
    SUPPORT_MIN and is that label's; else []."""
    sup = s.get(f"{label_key}_support")
    if not is_borderline(sup) or s.get(label_key) != sup["label"]:
        return []
    return [Finding(code, {k: sup[k] for k in keys})]


def findings(s: dict) -> list[Finding]:
    """``borderline`` when the diagnosis's support is under SUPPORT_MIN;
    else nothing.  The views print it under the diagnosis line."""
    return _borderline(s, "diagnosis", "borderline", (
        "label", "support", "other", "readings", "share", "settle_steps", "block", "resamples"))


def shape_findings(s: dict) -> list[Finding]:
    """``borderline_shape`` when the shape's support is under SUPPORT_MIN;
    else nothing.  The views print it under the shape line."""
    found = _borderline(s, "shape", "borderline_shape", (
        "label", "support", "other", "readings", "block", "resamples"))
    if found and "settle_steps" in s["shape_support"]:
        # Runs saved before the shape's settle estimate carry none.
        found[0].numbers["settle_steps"] = s["shape_support"]["settle_steps"]
        found[0].numbers["half_support"] = s["shape_support"].get("half_support")
    trend = (s.get("trend") or {}).get("label")
    if found and trend in (wait_trend.RISING, wait_trend.FALLING):
        # A wait that trends changes its shape along the run, and block
        # resamples mix its levels: more steps do not settle that (a probe
        # wait rising 0.5 -> 10.5 ms: "record more steps", helper 33B).
        found[0].numbers["trend"] = trend
    return found


def diagnosis_lines(s: dict) -> list[str]:
    """The sentences of :func:`findings`, for the line under the
    diagnosis."""
    return [WORDS[f.code](f.numbers) for f in findings(s)]


def shape_lines(s: dict) -> list[str]:
    """The sentences of :func:`shape_findings`, for the line under the
    shape."""
    return [WORDS[f.code](f.numbers) for f in shape_findings(s)]


def _support(share: float) -> str:
    """A support as a percentage, to a tenth where whole ones would read as
    the line itself ("BALANCED in 90% ... a firm label needs 90%")."""
    whole = pct(share)
    return pct(share, 1) if share < SUPPORT_MIN and whole == pct(SUPPORT_MIN) else whole


def _minority(p: dict) -> str:
    """"the run's own steps read X, " where the other reading is the
    resamples' majority: the label printed is the point estimate, which a
    run near the line can hold in under half its resamples ("BALANCED"
    above "BALANCED in 46%, COMPUTE-BOUND in 54%" read as a contradiction,
    helper 37B)."""
    other = p["readings"].get(p["other"], 0.0)
    return (f"the run's own steps read {p['label']}, yet " if other > p["support"] else "")


def _borderline_words(p: dict) -> str:
    settle = stall_timing.settle_words(p.get("settle_steps"))
    return (f"borderline: {_minority(p)}{p['label']} in {_support(p['support'])}, "
            f"{p['other']} in "
            f"{pct(p['readings'].get(p['other'], 0.0))} of {p['resamples']} block-bootstrap "
            f"resamples of these steps (a firm label needs {pct(SUPPORT_MIN)}); another run "
            f"of the same loop may read {p['other']}; {settle}")


def _settle_shape(p: dict) -> str:
    """How many more steps would settle a borderline shape, or why more
    may not (its support did not grow from half the run to all of it)."""
    if "settle_steps" not in p:
        return ""
    if p.get("half_support") is not None and p["settle_steps"] is None:
        lead = max(p["readings"].values())
        if lead <= p["half_support"]:
            return (f": its leading reading held {pct(p['half_support'])} of resamples of half "
                    f"these steps and {pct(lead)} of all of them, so more steps may not settle "
                    "it (the loop may sit on a rule's line)")
    return ": " + stall_timing.settle_words(p["settle_steps"])


def _borderline_shape_words(p: dict) -> str:
    then = (f"the wait is {p['trend']}, so its shape changes along the run and resampled "
            "blocks mix its levels: read the trend, not the shape" if p.get("trend") else
            "record more steps before reading the stalls' pattern" + _settle_shape(p))
    return (f"borderline shape: {_minority(p)}{p['label']} in {_support(p['support'])}, "
            f"{p['other']} in "
            f"{pct(p['readings'].get(p['other'], 0.0))} of {p['resamples']} block-bootstrap "
            f"resamples of these steps (a firm label needs {pct(SUPPORT_MIN)}); {then}")


WORDS: dict[str, Words] = {
    "borderline": _borderline_words,
    "borderline_shape": _borderline_shape_words,
}
