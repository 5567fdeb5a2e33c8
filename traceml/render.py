"""Drawing results: compact text for terminals and static HTML for
notebooks, of the plain dicts of a Report, a Comparison and a SweepResult.

Nothing here measures or decides, and no sentence is worded here
(:mod:`traceml.wording`); it only lays out the dicts, with one table helper.
"""

from __future__ import annotations

import html
from typing import Optional, Sequence

from . import wording
from .evidence import NO_WORKERS
from .fmt import fmt_bytes, fmt_s, pct

ROWS = (("input wait", "input_wait_s"), ("compute", "compute_s"), ("step", "step_s"))
COLS = ("mean", "median", "p90", "p95", "p99", "max", "total")


# --- tables ---------------------------------------------------------------------

_CELL = 'style="padding:2px 8px;text-align:right"'


def table_text(head: Sequence[str], rows: Sequence[Sequence[str]], *, sep: str = "  ",
               min_widths: Sequence[int] = ()) -> list[str]:
    """The header and rows of cells (str) as lines: the first column
    left-aligned, the others right-aligned, each as wide as its widest cell
    (and at least ``min_widths[i]``), columns joined by ``sep``."""
    widths = [max([len(h), *(len(r[i]) for r in rows), *min_widths[i:i + 1]])
              for i, h in enumerate(head)]

    def line(row):
        return sep.join(v.ljust(w) if i == 0 else v.rjust(w)
                        for i, (v, w) in enumerate(zip(row, widths)))

    return [line(head)] + [line(r) for r in rows]


def table_html(head: Sequence[str], rows: Sequence[Sequence[str]], *,
               row_heads: bool = False) -> str:
    """The header and rows of cells (str) as an HTML table; with
    ``row_heads`` the first cell of each row is a left-aligned header."""
    e = html.escape

    def row(cells):
        first = (f'<th style="text-align:left;padding:2px 8px">{e(cells[0])}</th>'
                 if row_heads else f"<td {_CELL}>{e(cells[0])}</td>")
        return "<tr>" + first + "".join(f"<td {_CELL}>{e(v)}</td>" for v in cells[1:]) + "</tr>"

    corner = f"<th>{e(head[0])}</th>" if row_heads else f"<th {_CELL}>{e(head[0])}</th>"
    return ('<table style="border-collapse:collapse;margin:6px 0"><tr>' + corner
            + "".join(f"<th {_CELL}>{e(h)}</th>" for h in head[1:]) + "</tr>"
            + "".join(row(r) for r in rows) + "</table>")


def _cell(value, fmt=str) -> str:
    """A table cell: "-" for None, else ``fmt(value)``."""
    return "-" if value is None else fmt(value)


# --- Report ----------------------------------------------------------------------


def _headline(s: dict) -> str:
    if s["steps"] == 0:
        if s["source"] == "probes" and not s.get("sources"):
            return "traceml · nothing recorded yet"
        return f"traceml · {s['source']} · no steps yet"
    return (
        f"traceml · {s['source']} · {s['steps']} steps in {s['epochs']} "
        f"epoch{'s' if s['epochs'] != 1 else ''} · {fmt_s(s['wall_s'])} wall"
    )


def _shape_line(s: dict) -> Optional[str]:
    if not s.get("shape"):
        return None
    parts = [f"shape {s['shape']}"]
    tmp = s.get("temporal")
    if tmp is None:
        parts.append("too few stalls for a temporal pattern")
    elif tmp["label"] == "PERIODIC":
        text = f"PERIODIC every {tmp['period']} step{'s' if tmp['period'] != 1 else ''}"
        if tmp.get("counted") == "bursts":
            text += " (counting back-to-back stalls as one burst)"
        if tmp["autocorrelation"] is not None and tmp["period"] > 1:
            text += f" (wait autocorrelation {tmp['autocorrelation']:.2f} at lag {tmp['period']})"
        parts.append(text)
    else:
        parts.append(
            f"IRREGULAR (commonest gap {tmp['modal_gap']} holds "
            f"{pct(tmp['modal_share'])} of gaps)"
        )
    conc = s.get("concentration") or {}
    if conc.get("stall_wait_share") is not None and s["stalls"]["count"]:
        parts.append(
            f"{pct(conc['stall_step_share'])} of steps hold "
            f"{pct(conc['stall_wait_share'])} of the input wait"
        )
    return " · ".join(parts)


def _stall_lines(s: dict) -> list[str]:
    st = s["stalls"]
    lines = [
        f"{st['count']} of {s['steady_steps']} steady-state fetches waited "
        f"> {fmt_s(st['threshold_s'])} ({st['rule']})"
    ]
    cad = s["cadence"]
    if cad["period"] is not None:
        every = "step" if cad["period"] == 1 else f"{cad['period']} steps"
        text = f"cadence: a stall every {every} (modal gap)"
    elif st["gaps"]:
        text = "cadence: no dominant gap between stalls"
    else:
        text = None
    if text and cad["num_workers"] is not None:
        text += f"; num_workers={cad['num_workers']}"
        if cad["matches_num_workers"]:
            text += ": the cadence follows num_workers"
        if cad["multiple_fraction"] is not None and cad["num_workers"] > 1:
            # Every gap is a multiple of 1: said only when it can fail.
            k = cad["num_workers"]
            text += (
                f" ({pct(cad['multiple_fraction'])} of gaps are "
                f"multiples of {k})"
            )
    if text:
        lines.append(text)
    if st["gap_histogram"]:
        hist = "  ".join(f"{g}×{c}" for g, c in st["gap_histogram"][:12])
        more = " …" if len(st["gap_histogram"]) > 12 else ""
        lines.append(f"gaps between stalls (steps×count): {hist}{more}")
    return lines


def _epoch_start_cause(loader: Optional[dict]) -> str:
    if not loader:
        return "includes iter()"
    if loader.get("persistent_workers"):
        return "iter() and the workers' first batches; persistent workers start once"
    return "iter() and worker start-up"


def _epoch_start_line(s: dict) -> Optional[str]:
    es = s["epoch_start"]
    if not es["count"]:
        return None
    w = es["input_wait_s"]
    return (
        f"epoch start: {es['count']} first fetch{'es' if es['count'] != 1 else ''} "
        f"({_epoch_start_cause(s.get('loader'))}) "
        f"mean {fmt_s(w['mean'])}, max "
        f"{fmt_s(w['max'])}; not in the table above"
    )


def _evidence_lines(s: dict) -> list[str]:
    """Stuck fetches first, then what the worker counters say."""
    out = [wording.stuck_sentence(ev) for ev in s.get("stuck") or []]
    w = s.get("workers")
    if w and w.get("evidence"):
        out.extend(w["evidence"])
    return out


def _process_lines(s: dict) -> list[str]:
    out = []
    h = s.get("host")
    if h:
        out.append(f"host: {h['usable_cpus']} usable CPUs, start method "
                   f"{h['start_method'] or '-'}, torch {h['torch_version'] or '-'}")
    d = s.get("delivery")
    if d and d["known"]:
        out.append(f"delivery: in_order={d['in_order']}, {d['overtaking']} of {d['known']} "
                   "deliveries overtook a batch of lower rank")
    w = s.get("workers")
    if w:
        changes = w["pid_changes"]
        if changes:
            at = ", ".join(f"step {c['step']} (epoch {c['epoch']})" for c in changes)
            out.append(f"worker PIDs changed at {at}")
        elif len(w["pids_by_epoch"]) > 1:
            out.append(f"worker PIDs stable across {len(w['pids_by_epoch'])} epochs")
        for e in w["exited"]:
            out.append(f"worker {e['worker']} (pid {e['pid']}) exited mid-run near step {e['step']}")
        smp = w["sampler"]
        if smp["samples"]:
            share = smp["cpu_share"]
            out.append(f"sampler: {smp['samples']} readings every {fmt_s(smp['period_s'])}"
                       + (f", {pct(share, 2)} of one CPU" if share is not None else ""))
        iv = w.get("intervals")
        if iv and iv["unavailable"]:
            # Worker counters of a loader without workers are not news.
            for name, why in iv["unavailable"].items():
                if why != NO_WORKERS:
                    out.append(f"{name}: unavailable ({why})")
    return out


def _loader_line(s: dict) -> Optional[str]:
    if not s["loader"]:
        return None
    return "loader: " + " ".join(f"{k}={v}" for k, v in s["loader"].items())


def _stat_rows(s: dict) -> list[list[str]]:
    """The table of input wait, compute and step statistics."""
    return [[label, *(fmt_s(s[key][c]) for c in COLS)] for label, key in ROWS]


def report_text(s: dict) -> str:
    """The terminal report of a Report summary dict."""
    out = [_headline(s)]
    if s["diagnosis"] == "NO-DATA":
        out.append(f"NO-DATA: {s['diagnosis_rule']}")
        out.extend(f"  · {line}" for line in _evidence_lines(s))
        out.extend(line for line in (_loader_line(s), *_process_lines(s)) if line)
        out.extend(f"note: {n}" for n in s["notes"])
        return "\n".join(out)
    out.append(f"{s['diagnosis']}: {s['diagnosis_rule']}")
    shape = _shape_line(s)
    if shape:
        out.append(shape)
    out.extend(f"  → {line}" for line in s.get("next", []))
    out.extend(f"  · {line}" for line in _evidence_lines(s))
    out.append("")
    out.extend(_stall_lines(s))
    out.append("")
    out.extend(table_text(("", *COLS), _stat_rows(s), sep="", min_widths=(12, *[11] * len(COLS))))
    for line in (_epoch_start_line(s), _loader_line(s), *_process_lines(s)):
        if line:
            out.append(line)
    out.extend(f"note: {n}" for n in s["notes"])
    return "\n".join(out)


_BADGE = {
    "INPUT-BOUND": "#b42318",
    "BALANCED": "#b54708",
    "COMPUTE-BOUND": "#067647",
    "NO-DATA": "#475467",
}


def figure_html(png_uri: Optional[str]) -> str:
    """An inline PNG, or how to get one."""
    if png_uri is None:
        from .plot import INSTALL_HINT

        return f'<div style="color:#667085">({INSTALL_HINT})</div>'
    return f'<img src="{png_uri}" style="max-width:100%" alt="input wait per step"/>'


def report_html(s: dict, png_uri: Optional[str] = None) -> str:
    """Static HTML (no JavaScript) of a Report summary dict, with the plot
    as an inline PNG when ``png_uri`` is given."""
    e = html.escape
    color = _BADGE.get(s["diagnosis"], "#475467")
    parts = [
        '<div class="traceml-report" style="font-family:system-ui,sans-serif;'
        'font-size:13px;line-height:1.4">',
        f"<div><b>{e(_headline(s))}</b></div>",
        f'<div><span style="background:{color};color:#fff;padding:1px 6px;'
        f'border-radius:3px;font-weight:600">{e(s["diagnosis"])}</span> '
        f"{e(s['diagnosis_rule'])}</div>",
    ]
    if s["diagnosis"] != "NO-DATA":
        shape = _shape_line(s)
        if shape:
            parts.append(f"<div><b>{e(shape)}</b></div>")
        if s.get("next"):
            parts.append(
                '<ul style="margin:4px 0 6px 18px;padding:0">'
                + "".join(f"<li>{e(line)}</li>" for line in s["next"])
                + "</ul>"
            )
        ev = _evidence_lines(s)
        if ev:
            parts.append('<ul style="margin:0 0 6px 18px;padding:0;color:#344054">'
                         + "".join(f"<li>{e(line)}</li>" for line in ev) + "</ul>")
        parts.extend(f"<div>{e(line)}</div>" for line in _stall_lines(s))
        parts.append(table_html(("", *COLS), _stat_rows(s), row_heads=True))
        for line in (_epoch_start_line(s), _loader_line(s), *_process_lines(s)):
            if line:
                parts.append(f"<div>{e(line)}</div>")
        parts.append(figure_html(png_uri))
    else:
        parts.extend(f"<div>{e(line)}</div>" for line in
                     (*_evidence_lines(s), _loader_line(s), *_process_lines(s)) if line)
    parts.extend(f'<div style="color:#b54708">note: {e(n)}</div>' for n in s["notes"])
    parts.append("</div>")
    return "".join(parts)


def _page(parts: list[str]) -> str:
    return ('<div style="font-family:system-ui,sans-serif;font-size:13px">'
            + "".join(parts) + "</div>")


# --- Comparison ------------------------------------------------------------------

COMPARE_COLUMNS = ("run", "mean fetch", "median", "p95", "stalls>thr", "stall gap",
                   "overtakes", "input share", "diagnosis", "shape", "verdict")


def _comparison_cells(rows: list[dict]) -> list[list[str]]:
    return [[
        r["label"], fmt_s(r["mean_wait_s"]), fmt_s(r["median_wait_s"]), fmt_s(r["p95_wait_s"]),
        _cell(r["stalls"]), _cell(r["median_gap"], lambda g: f"{g:g}"),
        _cell(r["overtaking"]), _cell(r["input_share"], lambda x: pct(x, 1)),
        r["diagnosis"], r["shape"] or "-", r["verdict"],
    ] for r in rows]


def comparison_text(d: dict) -> str:
    """The terminal table of a Comparison's ``to_dict()``."""
    out = [wording.compare_threshold(d["threshold_s"])]
    out.extend(table_text(COMPARE_COLUMNS, _comparison_cells(d["rows"])))
    out.extend(f"{r['label']}: {r['verdict']}: {r['why']}" for r in d["rows"][1:])
    return "\n".join(out)


def comparison_html(d: dict) -> str:
    """Static HTML of a Comparison's ``to_dict()``."""
    e = html.escape
    return _page([f"<div>{e(wording.compare_threshold(d['threshold_s']))}</div>",
                  table_html(COMPARE_COLUMNS, _comparison_cells(d["rows"]))]
                 + [f"<div>{e(r['label'])}: <b>{e(r['verdict'])}</b> {e(r['why'])}</div>"
                    for r in d["rows"][1:]])


# --- SweepResult -----------------------------------------------------------------

SWEEP_COLUMNS = ("condition", "pass", "dir", "mean fetch", "median", "p95", "stalls",
                 "stall gap", "gaps=k·n", "overtakes", "cores@stall", "read@stall",
                 "diagnosis")


def _sweep_cells(rows: list[dict]) -> list[list[str]]:
    out = []
    for r in rows:
        first = [wording.condition(r["condition"]), str(r["pass_"]), r["direction"]]
        if r["error"]:
            out.append(first + ["error"] + ["-"] * (len(SWEEP_COLUMNS) - 4))
            continue
        out.append(first + [
            fmt_s(r["mean_s"]), fmt_s(r["median_s"]), fmt_s(r["p95_s"]), str(r["stalls"]),
            _cell(r["median_gap"], lambda g: f"{g:g}"), _cell(r["multiple_fraction"], pct),
            _cell(r["overtaking"]), _cell(r["slow_worker_cores"], lambda c: f"{c:.1f}"),
            _cell(r["slow_read_bytes"], fmt_bytes), r["diagnosis"] or "-",
        ])
    return out


def _sweep_notes(d: dict) -> list[str]:
    """The lines under a sweep's table, before the errors."""
    ignored = d["ignored_num_workers"]
    out = [wording.sweep_correlation(d["correlation"], bool(ignored))]
    out.extend(t for t in (wording.sweep_ignored(ignored),
                           wording.sweep_best(d["best"], len(d["rows"])),
                           wording.sweep_order(d["order_effects"])) if t)
    out.extend(wording.sweep_short(d["rows"]))
    return out


def sweep_text(d: dict) -> str:
    """The terminal table of a SweepResult's ``to_dict()``."""
    out = table_text(SWEEP_COLUMNS, _sweep_cells(d["rows"])) + _sweep_notes(d)
    out.extend(wording.sweep_error(r) for r in d["rows"] if r["error"])
    if d["interrupted"]:
        out.append(wording.SWEEP_INTERRUPTED)
    return "\n".join(out)


def sweep_html(d: dict, png_uri: Optional[str] = None) -> str:
    """Static HTML of a SweepResult's ``to_dict()``, with its plot as an
    inline PNG when ``png_uri`` is given."""
    e = html.escape
    return _page([table_html(SWEEP_COLUMNS, _sweep_cells(d["rows"]))]
                 + [f"<div>{e(t)}</div>" for t in _sweep_notes(d)]
                 + [figure_html(png_uri)])
