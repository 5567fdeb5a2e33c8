"""traceml.compare(): runs side by side, each judged against the first."""

from __future__ import annotations

import collections.abc
import math
import os
from typing import Optional, Sequence, Union

from . import _core
from .render import fmt_s

# A change in mean input wait per step counts only when it exceeds both:
# 10% of the baseline's mean input wait (mean fetch time moves by several
# percent between identical runs on a shared machine), and 2% of the
# baseline's mean step (below that, input wait cannot move training
# throughput by more than 2%).
REL_TOL = 0.10
STEP_TOL = 0.02

IMPROVEMENT = "IMPROVEMENT"
REGRESSION = "REGRESSION"
EQUIVALENT = "EQUIVALENT"
BASELINE = "BASELINE"

COLUMNS = (
    ("label", "run"),
    ("mean_wait_s", "mean fetch"),
    ("median_wait_s", "median"),
    ("p95_wait_s", "p95"),
    ("stalls", "stalls>thr"),
    ("median_gap", "stall gap"),
    ("overtaking", "overtakes"),
    ("input_share", "input share"),
    ("diagnosis", "diagnosis"),
    ("shape", "shape"),
    ("verdict", "verdict"),
)


def verdict(base: dict, run: dict) -> tuple[str, str]:
    """(verdict, why) of ``run`` against ``base`` (report summaries), on
    mean input wait per steady-state step with the tolerances above."""
    b = base["input_wait_s"]["mean"]
    r = run["input_wait_s"]["mean"]
    if b is None or r is None:
        return EQUIVALENT, "no steady-state steps to compare"
    step = base["step_s"]["mean"] or 0.0
    tol = max(REL_TOL * b, STEP_TOL * step)
    delta = r - b
    why = (f"mean fetch {fmt_s(b)} -> {fmt_s(r)} ({'+' if delta >= 0 else '-'}"
           f"{fmt_s(abs(delta))}; tolerance {fmt_s(tol)})")
    if abs(delta) <= tol:
        return EQUIVALENT, why
    return (IMPROVEMENT if delta < 0 else REGRESSION), why


def _stalls_over(report, threshold_s: float) -> int:
    """Steady-state fetches of ``report`` waiting longer than threshold_s."""
    s = report.summary
    wait = report.input_wait_ns
    mask = _core.stall_mask(wait, int(round(threshold_s * 1e9)))
    mask[s["epoch_start"]["steps"]] = False
    return int(mask.sum())


class Comparison:
    """Runs side by side.  ``rows`` (list of dicts, keys of COLUMNS plus
    ``why``), ``threshold_s`` (the baseline's stall threshold, applied to
    every run so that stall counts compare), ``str()``, ``_repr_html_()``,
    ``to_dict()``."""

    def __init__(self, rows: list[dict], threshold_s: float):
        self.rows = rows
        self.threshold_s = threshold_s

    def __repr__(self) -> str:
        verdicts = ", ".join(f"{r['label']}={r['verdict']}" for r in self.rows)
        return f"<traceml.Comparison {verdicts}>"

    def to_dict(self) -> dict:
        return {"threshold_s": self.threshold_s, "rows": [dict(r) for r in self.rows],
                "tolerance": {"relative": REL_TOL, "step_share": STEP_TOL}}

    def _cells(self) -> list[list[str]]:
        out = []
        for r in self.rows:
            out.append([
                r["label"], fmt_s(r["mean_wait_s"]), fmt_s(r["median_wait_s"]),
                fmt_s(r["p95_wait_s"]), str(r["stalls"]),
                "-" if r["median_gap"] is None else f"{r['median_gap']:g}",
                "-" if r["overtaking"] is None else str(r["overtaking"]),
                "-" if r["input_share"] is None else f"{100 * r['input_share']:.1f}%",
                r["diagnosis"], r["shape"] or "-", r["verdict"],
            ])
        return out

    def __str__(self) -> str:
        head = [h for _, h in COLUMNS]
        cells = self._cells()
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
        line = lambda row: "  ".join(v.ljust(w) if i == 0 else v.rjust(w)  # noqa: E731
                                     for i, (v, w) in enumerate(zip(row, widths)))
        out = [f"stalls counted at the baseline's threshold, {fmt_s(self.threshold_s)}",
               line(head)]
        out.extend(line(c) for c in cells)
        out.extend(f"{r['label']}: {r['verdict']}: {r['why']}" for r in self.rows[1:])
        return "\n".join(out)

    def _repr_html_(self) -> str:
        import html

        e = html.escape
        cell = 'style="padding:2px 8px;text-align:right"'
        head = "".join(f"<th {cell}>{e(h)}</th>" for _, h in COLUMNS)
        body = "".join(
            "<tr>" + "".join(f"<td {cell}>{e(v)}</td>" for v in c) + "</tr>"
            for c in self._cells()
        )
        notes = "".join(f"<div>{e(r['label'])}: <b>{e(r['verdict'])}</b> {e(r['why'])}</div>"
                        for r in self.rows[1:])
        return ('<div style="font-family:system-ui,sans-serif;font-size:13px">'
                f"<div>stalls counted at the baseline's threshold, {e(fmt_s(self.threshold_s))}</div>"
                f'<table style="border-collapse:collapse"><tr>{head}</tr>{body}</table>'
                f"{notes}</div>")


def compare(*runs, labels: Optional[Sequence[str]] = None) -> Comparison:
    """Compare runs side by side, each against the first.

    Args:
        *runs: Reports, or paths of files written by ``Report.save``.
        labels: one name per run (default: the file name, or the report's
            source name).

    Returns:
        A :class:`Comparison`: per run mean fetch, median, p95, stalls over
        the baseline's threshold, median stall gap, input share, diagnosis,
        shape, and a verdict against the first run: IMPROVEMENT, REGRESSION
        or EQUIVALENT on mean input wait per step, within max(10% of the
        baseline's mean wait, 2% of its mean step).

    Raises:
        TypeError: a run is neither a Report nor a path, or labels is not a
            sequence.
        ValueError: no runs, labels of the wrong length, or a file that is
            not a readable traceml run.
        FileNotFoundError: a path that does not exist.
    """
    from .io import load as load_report
    from .report import Report

    if not runs:
        raise ValueError("compare(): give at least one run")
    reports, names = [], []
    for i, run in enumerate(runs):
        if isinstance(run, Report):
            reports.append(run)
            names.append(run.summary["source"])
        elif isinstance(run, (str, os.PathLike)):
            reports.append(load_report(run))
            names.append(os.path.basename(os.fspath(run)))
        else:
            raise TypeError(
                f"compare(): runs[{i}] must be a Report or a path, got {type(run).__name__}"
            )
    if labels is not None:
        if isinstance(labels, (str, bytes)) or not isinstance(labels, collections.abc.Iterable):
            raise TypeError(f"compare(): labels must be a sequence of names, got "
                            f"{type(labels).__name__}")
        labels = list(labels)
        if len(labels) != len(reports):
            raise ValueError(
                f"compare(): labels has {len(labels)} names for {len(reports)} runs"
            )
        names = [str(x) for x in labels]
    base = reports[0].summary
    threshold = base["stalls"]["threshold_s"]
    rows = []
    for name, rep in zip(names, reports):
        s = rep.summary
        if rep is reports[0]:
            v, why = BASELINE, "the baseline"
        else:
            v, why = verdict(base, s)
        gap = s["stalls"]["median_gap"]
        rows.append({
            "label": name,
            "mean_wait_s": s["input_wait_s"]["mean"],
            "median_wait_s": s["input_wait_s"]["median"],
            "p95_wait_s": s["input_wait_s"]["p95"],
            "stalls": _stalls_over(rep, threshold),
            "median_gap": None if gap is None or math.isnan(gap) else gap,
            "overtaking": (s.get("delivery") or {}).get("overtaking"),
            "input_share": s["input_share"],
            "diagnosis": s["diagnosis"],
            "shape": s.get("shape"),
            "verdict": v,
            "why": why,
        })
    return Comparison(rows, threshold)
