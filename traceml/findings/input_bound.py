"""The diagnosis: the share of step time spent waiting for input, and its label
(INPUT-BOUND, BALANCED, COMPUTE-BOUND, HAND-OVER, HOST-BOUND, NO-DATA).
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional


from ..fmt import fmt_s, pct
from ._types import Finding, Words


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


# The loop waits INPUT_BOUND_SHARE or more, but not for the workers: each
# awaited batch was made, and its worker idle, for most of the wait.
HAND_OVER = "HAND-OVER"

# The loop waits INPUT_BOUND_SHARE or more, and the largest measured part
# of the wait is the loop or the awaited worker waiting for a core that
# other programs held (findings.wait_parts.host_leads): the host's wait,
# not the loader's.
HOST_BOUND = "HOST-BOUND"


# Worker-side timing (traceml.worker_timing) decides INPUT-BOUND only when
# it met at least this share of the steady steps (the rest: a reset that
# cut into an epoch, a log that overflowed, steps without a known worker).
PRODUCTION_MIN_COVERAGE = 0.9


class Diagnosis(NamedTuple):
    """The diagnosis label and the input share (total input wait / total
    step time, None without steps) it was read from; for NO-DATA over
    recorded steps, ``unmarked`` = (steps without fetch_done(), steady
    steps), or ``mean_step_ns`` when the steps were too short to read a
    share from (MIN_MEAN_STEP_NS)."""

    label: str
    share: Optional[float]
    unmarked: Optional[tuple] = None
    mean_step_ns: Optional[float] = None


# A probe step closed without fetch_done() is recorded with a zero input
# wait (it cannot be told from a batch that was ready).  When more than this
# share of the steady steps lack the mark, the input share would be read
# mostly from those made-up zeros (a user trial: a loop waiting 80% of its
# step read "COMPUTE-BOUND: 0.0%" with fetch_done() forgotten), so there is
# no diagnosis: NO-DATA, saying why.  Under it the misuse note stands.
PROBE_UNMARKED_MAX_SHARE = 0.5


# traceml's own timing cost per step, the upper end of what this project
# measured on its 2-core host (benchmarks/README.md): wrap adds 50-207 ns a
# step over a DataLoader, the probe triple about 80 ns.
TIMING_OWN_COST_NS = 200


# Under this mean step, that cost alone could move the input share across
# COMPUTE_BOUND_SHARE (200 ns / 5% = 4 us), so no share is read: NO-DATA,
# saying why.  A user trial: five empty probe steps (0.3 us each) read
# "INPUT-BOUND: input wait is 58% of step time".  Real training steps
# (tens of us and up) are far above it.
MIN_MEAN_STEP_NS = TIMING_OWN_COST_NS / COMPUTE_BOUND_SHARE


def unmarked_past_share(unmarked: Optional[tuple]) -> bool:
    """True when more than PROBE_UNMARKED_MAX_SHARE of the steady steps
    lack fetch_done() (``unmarked`` = (those steps, steady steps), or
    None): the input wait was not measured."""
    return bool(unmarked is not None and unmarked[1]
                and unmarked[0] > PROBE_UNMARKED_MAX_SHARE * unmarked[1])


def production_share(production: Optional[dict]) -> Optional[float]:
    """The share of step time the loop waited while the awaited worker was
    making batches, when the workers' own timing is available and met
    PRODUCTION_MIN_COVERAGE of the steady steps; else None."""
    if not production or not production.get("available"):
        return None
    if production.get("coverage", 0.0) < PRODUCTION_MIN_COVERAGE:
        return None
    return production.get("production_share")


def diagnose(input_share: Optional[float],
             production_share: Optional[float] = None,
             unmarked: Optional[tuple] = None,
             mean_step_ns: Optional[float] = None,
             other_largest_fraction: Optional[float] = None,
             host_leads: bool = False, main_leads: bool = False) -> Diagnosis:
    """(label, share) for the share of step time spent waiting for input:
    INPUT-BOUND at >= INPUT_BOUND_SHARE, COMPUTE-BOUND under
    COMPUTE_BOUND_SHARE, BALANCED between.

    ``input_share`` is total input wait / total step time over steady-state
    steps; None (no steps) gives NO-DATA.  ``production_share`` (see
    :func:`production_share`; None: unknown) is the part of it during
    which the awaited worker was making batches.  An input-bound wait is
    read by its largest part (findings.wait_parts): more workers shorten
    the production part only, so where the production is known and
    smaller than the largest other part, the loop waits mostly for batches
    already made (received in the main process, in transit, a process
    waiting for a core): HAND-OVER, whose next step is not more workers.
    The other parts are the wait less the production, split in the
    proportions the fetch clocks measured: ``other_largest_fraction`` is
    the largest of them over their sum (wait_parts.other_largest_fraction;
    None: not measured, the rest is one part).  Where the largest
    measured part is the host's (``host_leads``: the loop or the awaited
    worker waiting for a core other programs held, more than the
    production and than each other part; wait_parts.host_leads), an
    input-bound wait is HOST-BOUND: neither more workers nor a cheaper
    hand-over shortens it.  Where the largest other part is the sampler's
    next() (``main_leads``, wait_parts.main_work_leads: the DataLoader
    drawing indices in the main process), the wait is the loader's own
    work, not a hand-over: INPUT-BOUND, and that part's next step leads (a slow
    Sampler at num_workers=2 read "HAND-OVER ... the loop waits mostly for
    batches already made" with the sampler 61% of the wait, helper 35B).

    ``unmarked`` (probes only: (steady steps closed without fetch_done(),
    steady steps)) past PROBE_UNMARKED_MAX_SHARE gives NO-DATA: the input
    wait was not measured.  ``mean_step_ns`` (the steady steps' mean;
    None: not checked) under MIN_MEAN_STEP_NS gives NO-DATA too: the
    timing's own cost is a material part of such a step.
    """
    if input_share is None or not math.isfinite(input_share):
        return Diagnosis(NO_DATA, None)
    if unmarked_past_share(unmarked):
        return Diagnosis(NO_DATA, None, (int(unmarked[0]), int(unmarked[1])))
    if mean_step_ns is not None and mean_step_ns < MIN_MEAN_STEP_NS:
        return Diagnosis(NO_DATA, None, None, float(mean_step_ns))
    if input_share >= INPUT_BOUND_SHARE:
        if host_leads:
            return Diagnosis(HOST_BOUND, input_share)
        if production_share is not None:
            other = (input_share - production_share) * (
                1.0 if other_largest_fraction is None else other_largest_fraction)
            if production_share < other and not main_leads:
                return Diagnosis(HAND_OVER, input_share)
        return Diagnosis(INPUT_BOUND, input_share)
    if input_share < COMPUTE_BOUND_SHARE:
        return Diagnosis(COMPUTE_BOUND, input_share)
    return Diagnosis(BALANCED, input_share)


# Below this many steady-state steps no shape or next step is claimed.
MIN_STEADY_STEPS = 8


def _said(p: dict) -> str:
    return f"input wait is {pct(p['share'], 1)} of step time"


def _top() -> str:
    return pct(INPUT_BOUND_SHARE)


def _low() -> str:
    return pct(COMPUTE_BOUND_SHARE)


# The words of the rule behind each diagnosis, by rule code (RULE_CODES):
# what the share was measured against and where the line comes from.
WORDS: dict[str, Words] = {
    "diagnosis_unmarked": lambda p: (
        f"fetch_done() was not called in {p['steps']} of {p['steady']} steady-state steps, "
        "so their input wait is unknown (recorded as 0); call traceml.fetch_done() once the "
        "batch is in hand, between step_begin() and step_end()"),
    "diagnosis_short_steps": lambda p: (
        f"steps average {fmt_s(p['mean_step_ns'] * 1e-9)}, under "
        f"{fmt_s(MIN_MEAN_STEP_NS * 1e-9)}: traceml's own timing (up to "
        f"{fmt_s(TIMING_OWN_COST_NS * 1e-9)} a step) could move the input share across "
        f"{_low()}, so none is read"),
    "diagnosis_no_steps": lambda p: "no steady-state steps recorded",
    "diagnosis_input_bound": lambda p: (
        f"{_said(p)} (>= {_top()}: TensorFlow's input-pipeline analyzer calls this "
        "highly input-bound)"),
    "diagnosis_hand_over": lambda p: (
        f"{_said(p)} (>= {_top()}), but a worker still making the batch was a smaller part of "
        "the wait than the largest other part: the loop waits mostly for batches already "
        "made"),
    "diagnosis_host_bound": lambda p: (
        f"{_said(p)} (>= {_top()}), but its largest measured cause is waiting for a core, "
        "with other programs holding the cores: the host's wait, not the loader's"),
    "diagnosis_compute_bound": lambda p: (
        f"{_said(p)} (< {_low()}: TensorFlow's input-pipeline analyzer calls this not "
        "input-bound)"),
    "diagnosis_balanced": lambda p: (
        f"{_said(p)} ({_low()} to {_top()}: moderately input-bound in TensorFlow's "
        "input-pipeline analyzer)"),
}
# The rule code of each label read from the input share.
RULE_CODES = {INPUT_BOUND: "diagnosis_input_bound", HAND_OVER: "diagnosis_hand_over",
              HOST_BOUND: "diagnosis_host_bound", COMPUTE_BOUND: "diagnosis_compute_bound",
              BALANCED: "diagnosis_balanced"}


def diagnosis_finding(label: str, share: Optional[float],
                      unmarked: Optional[tuple] = None,
                      mean_step_ns: Optional[float] = None) -> Finding:
    """The rule behind a diagnosis as a Finding (a WORDS code and its
    numbers), from :func:`diagnose`'s label, input share (a fraction),
    unmarked steps ``(steps, steady)`` and mean step (ns).  Raises
    KeyError for a label no rule words."""
    if label == NO_DATA and unmarked is not None:
        return Finding("diagnosis_unmarked", {"steps": int(unmarked[0]),
                                              "steady": int(unmarked[1])})
    if label == NO_DATA and mean_step_ns is not None:
        return Finding("diagnosis_short_steps", {"mean_step_ns": float(mean_step_ns)})
    if label == NO_DATA:
        return Finding("diagnosis_no_steps", {})
    return Finding(RULE_CODES[label], {"share": float(share)})
