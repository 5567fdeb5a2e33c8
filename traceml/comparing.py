"""traceml.compare(): runs side by side, each judged against the first.

Holds the comparison workflow and its plain data; the verdict rule, its
tolerances and its sentences live in :mod:`traceml.findings.comparison`,
the table in :mod:`traceml.render`.  Never touches the recording.
"""

from __future__ import annotations

import collections.abc
import os
from typing import Optional, Sequence

import numpy as np

from . import _core, render
from .findings import comparison, input_bound, stall_threshold
from .findings.comparison import (  # noqa: F401 - re-exported
    EQUIVALENT, IMPROVEMENT, MIXED, REGRESSION, UNSETTLED)
from .findings.input_bound import NO_DATA  # noqa: F401 - re-exported
from .result import Report, summary_of

BASELINE = "BASELINE"


def judge(base: dict, run: dict, base_stalls: Optional[tuple] = None,
          run_stalls: Optional[tuple] = None, base_steps: Optional[dict] = None,
          run_steps: Optional[dict] = None) -> tuple[str, str, list]:
    """(verdict, why, measures) of ``run`` against ``base`` (report
    summaries).  Four measures, each with its tolerance from the findings:
    mean input wait per steady-state step (comparison.compare_means), input
    share (comparison.SHARE_TOL), stalls per 100 steady-state steps
    (``*_stalls`` = (count, steady steps) at the baseline's threshold; not
    judged when None) and the mean step (the mean wait's tolerance, in
    seconds).  The verdict is REGRESSION where the mean step grew by more
    than comparison.STEP_REGRESSION_TOL of the baseline's (a slower loop,
    whatever else moved), IMPROVEMENT where it fell by more than that (a
    faster loop); else IMPROVEMENT (some better, none worse),
    REGRESSION (some worse, none better), MIXED (both), UNSETTLED (none
    moved, one past its tolerance within the runs' noise: not yet),
    EQUIVALENT (none moved); NO_DATA when either summary has no
    steady-state mean wait.
    ``why`` says which measure moved, by how much, against which
    tolerance, and, where a measure moved, whether the two runs met
    different host load (comparison.host_note); an IMPROVEMENT on a
    quieter host or a REGRESSION on a busier one is UNSETTLED
    (comparison.host_went_with).  ``*_steps``: each run's
    steady steps' {"wait": ns, "step": ns} (:func:`steady_series`), where
    known: the mean wait, the input share (tested on each step's share)
    and the mean step then move only beyond the two runs' own noise too
    (comparison.noise_p_value).  Where the two runs' loaders had different
    batch sizes, the wait, the step and the stall rate are judged per
    sample (a step of 32 samples against one of 8), and ``why`` says so."""
    sizes = _batch_sizes(base, run)
    if sizes is not None:
        base, base_steps, base_stalls = _per_sample(base, base_steps, base_stalls, sizes[0])
        run, run_steps, run_stalls = _per_sample(run, run_steps, run_stalls, sizes[1])

    rounds = [max(1, int((s.get("loader") or {}).get("num_workers") or 0)) for s in (base, run)]

    def noise(key: str) -> Optional[float]:
        if base_steps is None or run_steps is None:
            return None
        return comparison.noise_p_value(base_steps[key], run_steps[key], *rounds)

    v = comparison.compare_means(base["input_wait_s"]["mean"], run["input_wait_s"]["mean"],
                                 base["step_s"]["mean"], noise("wait"))
    if v.label == input_bound.NO_DATA:
        return v.label, comparison.verdict_why(v), []
    line = (base.get("stalls") or {}).get("threshold_s")
    near = (None if base_steps is None or run_steps is None or line is None else
            tuple(comparison.near_line_rate(x["wait"], line) for x in (base_steps, run_steps)))
    moved = comparison.compare_measures(v, base["input_share"], run["input_share"],
                                        base_stalls, run_stalls,
                                        base["step_s"]["mean"], run["step_s"]["mean"],
                                        noise("step"), noise("share"),
                                        None if near is None or None in near else near)
    # The epoch starts, judged apart from the steady steps (a next step of
    # the report's own: persistent_workers=True, compared).
    moved.append(comparison.epoch_start_moved(base, run))
    bodies = tuple((x.get("wait_parts") or {}).get("compute") for x in (base, run))
    label, why = comparison.overall(v, moved), comparison.compare_why(v, moved, bodies)
    # The epoch starts against the steps, each as wall time an epoch.
    label, weighed = comparison.weigh_epoch_starts(
        label, moved, (base.get("steps") or 0) / max(1, base.get("epochs") or 1))
    if weighed:
        why = f"{why}; {weighed}"
    if comparison.host_went_with(label, base, run, base_steps, run_steps):
        label = comparison.UNSETTLED
    host = comparison.host_note(base, run) if label != comparison.EQUIVALENT else None
    if sizes is not None:
        why = (f"batch_size {sizes[0]} -> {sizes[1]}: each measure per sample (a step, its "
               f"wait and the stall rate over its samples); " + why)
    return label, why + (f"; {host}" if host else ""), moved


def _batch_sizes(base: dict, run: dict) -> Optional[tuple[int, int]]:
    """(the baseline's, the run's) batch sizes where both loaders give one
    and they differ; else None."""
    a = (base.get("loader") or {}).get("batch_size")
    b = (run.get("loader") or {}).get("batch_size")
    if not a or not b or a == b:
        return None
    return int(a), int(b)


def _per_sample(s: dict, steps: Optional[dict], stalls: Optional[tuple],
                size: int) -> tuple[dict, Optional[dict], Optional[tuple]]:
    """The summary's mean wait and step, its steady series' waits and
    steps, and its (stalls, steps) over ``size`` samples a step."""
    s = dict(s)
    for key in ("input_wait_s", "step_s"):
        if s.get(key):
            s[key] = {**s[key], "mean": _over(s[key].get("mean"), size)}
    if steps is not None:
        steps = {**steps, "wait": steps["wait"] / size, "step": steps["step"] / size}
    if stalls is not None:
        stalls = (stalls[0], stalls[1] * size)
    return s, steps, stalls


def _over(x: Optional[float], size: int) -> Optional[float]:
    return None if x is None else x / size


def verdict(base: dict, run: dict, base_stalls: Optional[tuple] = None,
            run_stalls: Optional[tuple] = None) -> tuple[str, str]:
    """(verdict, why) of :func:`judge`.  Only IMPROVEMENT, REGRESSION and
    MIXED mean a difference beyond the tolerances."""
    label, why, _ = judge(base, run, base_stalls, run_stalls)
    return label, why


def steady_series(report) -> Optional[dict]:
    """{"wait", "step", "share"}: the input wait and the step (ns,
    float64) of each steady-state step of ``report`` (its epochs' start-up
    fetches left out), and the wait's share of each step; None where the
    report has no per-step records."""
    steps = getattr(report, "steps", None)
    if steps is None or not len(steps):
        return None
    keep = np.ones(len(steps), dtype=bool)
    keep[summary_of(report)["epoch_start"]["steps"]] = False
    wait = report.input_wait_ns[keep].astype(np.float64)
    step = report.step_ns[keep].astype(np.float64)
    return {"wait": wait, "step": step,
            "share": np.divide(wait, step, out=np.zeros_like(wait), where=step > 0)}


def _same_recording(a, b) -> bool:
    """Whether two reports hold the same steps (per-step records equal,
    the clock's begin times included): one recording reported twice."""
    sa, sb = getattr(a, "steps", None), getattr(b, "steps", None)
    if sa is None or sb is None or len(sa) != len(sb) or not len(sa):
        return False
    return bool(np.array_equal(sa["begin_ns"], sb["begin_ns"])
                and np.array_equal(sa["end_ns"], sb["end_ns"]))


def _stalls_over(report, threshold_s: float,
                 rule_code: str = "compare") -> tuple[int, Optional[float]]:
    """(count, median gap in steps) of the steady-state fetches of
    ``report`` waiting longer than threshold_s, where they matter as a
    group (``rule_code``: the baseline's stall rule, whose all-slow and
    given thresholds keep every wait past them); the gap is None with fewer
    than two such stalls in one epoch.  (The report's own period is for its
    own stalls; here the gap of stalls at another run's threshold.)  The
    fetches the report itself left out as the host's (``stalls.host_waits``:
    past its own line only through the loop's wait for a core) are left
    out here too: identical runs beside a busy host counted 10 and 1 such
    fetches and read "stalls per 100 steps 5.1 -> 0.5: better"."""
    s = summary_of(report)
    own = s.get("stalls") or {}
    if own.get("threshold_s") == threshold_s and own.get("count") is not None:
        # At the report's own line its own count stands: the report read
        # each clocked wait less its waits for a core, which the stored
        # waits here do not; recounting them made a baseline of 0 stalls
        # and 11 outliers "3.7 stalls per 100 steps", and a same-code pair
        # IMPROVEMENT on that alone (helper 28B, beside 2 hogs).
        gap = own.get("median_gap")
        return int(own["count"]), (float(gap) if gap is not None else None)
    wait = report.input_wait_ns
    steady = np.ones(len(wait), dtype=bool)
    steady[s["epoch_start"]["steps"]] = False
    mask = _core.stall_mask(wait, int(round(threshold_s * 1e9))) & steady
    host = ((s.get("stalls") or {}).get("host_waits") or {}).get("steps")
    if host:
        mask[np.asarray(host, dtype=np.int64)] = False
    # Waits past the line are stalls only where they matter as a group
    # (stall_threshold.stalls_matter, the rule each report applies):
    # identical healthy runs whose reports counted 0 stalls and 57
    # outliers read "stalls per 100 steps 39.0 -> 83.6: worse".
    matter = stall_threshold.stalls_matter(wait[steady], report.step_ns[steady], mask[steady],
                                           rule_code)
    if matter.code != stall_threshold.STALLS_KEPT:
        mask[:] = False
    gaps = _core.stall_gaps(mask, report.steps["epoch"])
    return int(mask.sum()), (float(_core.percentiles(gaps, 50.0)) if len(gaps) else None)


def _distinct(names: list[str]) -> list[str]:
    """``names`` with each repeat suffixed "#2", "#3", ... in order of
    appearance, skipping suffixed names that are already taken."""
    taken = set(names)
    seen: set[str] = set()
    out = []
    for name in names:
        label = name
        if name in seen:
            n = 2
            while f"{name}#{n}" in taken:
                n += 1
            label = f"{name}#{n}"
            taken.add(label)
        seen.add(name)
        out.append(label)
    return out


class Comparison:
    """Runs side by side.  ``rows`` (list of dicts: label, mean_wait_s,
    median_wait_s, p95_wait_s, stalls, median_gap, stalls_per_100,
    overtaking, input_share, diagnosis, shape, moved ({measure: "better",
    "worse", "same" or None} for mean_wait, input_share, stall_rate),
    verdict, why, ranks and stragglers (for a report gathered over many
    ranks, whose waits are the largest across ranks per step; else None); ``verdict`` is BASELINE for the first row, then
    IMPROVEMENT, REGRESSION, MIXED, UNSETTLED, EQUIVALENT or NO-DATA),
    ``threshold_s`` (the baseline's stall threshold, applied to
    every run so that stall counts and median stall gaps compare; None, and
    no stalls counted, when the baseline has no steady-state steps),
    ``str()``, ``_repr_html_()``, ``to_dict()``."""

    def __init__(self, rows: list[dict], threshold_s: Optional[float]):
        self.rows = rows
        self.threshold_s = threshold_s

    def __repr__(self) -> str:
        verdicts = ", ".join(f"{r['label']}={r['verdict']}" for r in self.rows)
        return f"<traceml.Comparison {verdicts}>"

    def to_dict(self) -> dict:
        return {"threshold_s": self.threshold_s, "rows": [dict(r) for r in self.rows],
                "tolerance": {"relative": comparison.REL_TOL, "step_share": comparison.STEP_TOL,
                              "input_share": comparison.SHARE_TOL,
                              "stall_rate_sigmas": comparison.STALL_RATE_SIGMAS,
                              "stall_rate_min": comparison.STALL_RATE_MIN_TOL}}

    def __str__(self) -> str:
        return render.comparison_text(self.to_dict())

    def _repr_html_(self) -> str:
        return render.comparison_html(self.to_dict())


def compare(*runs, labels: Optional[Sequence[str]] = None) -> Comparison:
    """Compare runs side by side, each against the first.

    Args:
        *runs: Reports, or paths of files written by ``Report.save``.
        labels: one distinct name per run, used as given (default: the file name,
            or the report's source name; a default name that repeats gets
            "#2", "#3", ... on its second, third, ... use, so every row
            has its own label).

    Returns:
        A :class:`Comparison`: per run mean fetch, median, p95, stalls over
        the baseline's threshold, median stall gap, input share, diagnosis,
        shape, and a verdict against the first run (:func:`judge`) on mean
        input wait per step (within max(comparison.REL_TOL of the baseline's
        mean wait, comparison.STEP_TOL of its mean step)), input share (within
        comparison.SHARE_TOL) and stalls per 100 steady-state steps at the
        baseline's threshold (within comparison.STALL_RATE_SIGMAS * sqrt(count),
        at least comparison.STALL_RATE_MIN_TOL), the mean wait, input share
        and mean step also beyond the two runs' own noise
        (comparison.noise_p_value, p < comparison.NOISE_ALPHA): IMPROVEMENT,
        REGRESSION, MIXED, UNSETTLED (past a tolerance, not past the noise:
        not yet) or EQUIVALENT, with ``why`` saying which moved; NO-DATA when the
        baseline or the run has no steady-state steps (e.g. a report of
        nothing recorded), with ``why`` naming which.  The first run is
        the baseline by position: passing the same Report twice gives
        BASELINE then EQUIVALENT.

    Raises:
        TypeError: a run is neither a Report nor a path, or labels is not a
            sequence.
        ValueError: no runs, or labels of the wrong length or repeated.
        RunFileError (a ValueError): a path that cannot be read as a run
            (see :func:`traceml.load`; a missing file's is also a
            FileNotFoundError).
    """
    if not runs:
        raise ValueError("compare(): give at least one run")
    reports, names = [], []
    for i, run in enumerate(runs):
        if isinstance(run, Report):
            reports.append(run)
            names.append(summary_of(run)["source"])
        elif isinstance(run, (str, os.PathLike)):
            reports.append(Report.load(run))
            names.append(os.path.basename(os.fspath(run)))
        else:
            raise TypeError(
                f"compare(): runs[{i}] must be a Report or a path, got {type(run).__name__}"
            )
    if labels is not None:
        # A sequence: a set's order is arbitrary, and would label the runs
        # in whatever order it iterates (helper 38D).
        if isinstance(labels, (str, bytes)) or not isinstance(labels, collections.abc.Sequence):
            raise TypeError(f"compare(): labels must be a sequence of names, got "
                            f"{type(labels).__name__}")
        labels = list(labels)
        if len(labels) != len(reports):
            raise ValueError(
                f"compare(): labels has {len(labels)} name{'s' if len(labels) != 1 else ''} "
                f"for {len(reports)} run{'s' if len(reports) != 1 else ''}"
            )
        names = [str(x) for x in labels]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"compare(): labels must be distinct, {repeated[0]!r} repeats")
    else:
        names = _distinct(names)
    base = summary_of(reports[0])
    # A baseline without steady-state steps has no threshold of its own to
    # lend (only the rule's 1 ms default): then no stalls are counted.
    threshold = base["stalls"]["threshold_s"] if base["steady_steps"] else None
    rows = []
    rule = base["stalls"].get("rule_code") or "compare"
    counted = [_stalls_over(rep, threshold, rule) if threshold is not None else (None, None)
               for rep in reports]
    series = [steady_series(rep) for rep in reports]
    base_stalls = ((counted[0][0], base["steady_steps"]) if counted[0][0] is not None
                   else None)
    for i, (name, rep) in enumerate(zip(names, reports)):
        s = summary_of(rep)
        stalls, gap = counted[i]
        run_stalls = (stalls, s["steady_steps"]) if stalls is not None else None
        if i == 0:
            v, why, moved = BASELINE, comparison.BASELINE_WHY, []
        else:
            v, why, moved = judge(base, s, base_stalls, run_stalls, series[0], series[i])
            if _same_recording(reports[0], rep):
                # Two report() calls over one recorder's one source give
                # one recording twice (a second loop under another name
                # goes to its own source: report(source=...) picks it).
                why = ("the same recording as the baseline (the same steps, step for step): "
                       "compare a report of the other run, report(source=name) where one "
                       "recorder holds both; " + why)
        rows.append({
            "label": name,
            "mean_wait_s": s["input_wait_s"]["mean"],
            "median_wait_s": s["input_wait_s"]["median"],
            "p95_wait_s": s["input_wait_s"]["p95"],
            "step_mean_s": (s.get("step_s") or {}).get("mean"),
            "stalls": stalls,
            "median_gap": gap,
            "overtaking": (s.get("delivery") or {}).get("overtaking"),
            "input_share": s["input_share"],
            "diagnosis": s["diagnosis"],
            "shape": s.get("shape"),
            "stalls_per_100": (100.0 * stalls / s["steady_steps"]
                               if stalls is not None and s["steady_steps"] else None),
            "moved": {m.measure: m.direction for m in moved},
            "verdict": v,
            "why": why,
            # Gathered over many ranks (traceml.gather): the numbers above
            # are the largest input wait across ranks per step.
            "ranks": len((s.get("ranks") or {}).get("gathered") or []) or None,
            "stragglers": (s.get("ranks") or {}).get("stragglers"),
        })
    return Comparison(rows, threshold)
