"""Drawing a Report: compact text for terminals, static HTML for notebooks.

Nothing here measures or decides; it only lays out the summary dict.
"""

from __future__ import annotations

import html
from typing import Optional

from . import wording
from .fmt import fmt_s, pct

ROWS = (("input wait", "input_wait_s"), ("compute", "compute_s"), ("step", "step_s"))
COLS = ("mean", "median", "p90", "p95", "p99", "max", "total")


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
            from .evidence import NO_WORKERS

            # Worker counters of a loader without workers are not news.
            for name, why in iv["unavailable"].items():
                if why != NO_WORKERS:
                    out.append(f"{name}: unavailable ({why})")
    return out


def _loader_line(s: dict) -> Optional[str]:
    if not s["loader"]:
        return None
    return "loader: " + " ".join(f"{k}={v}" for k, v in s["loader"].items())


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
    width = 11
    out.append(" " * 12 + "".join(c.rjust(width) for c in COLS))
    for label, key in ROWS:
        row = s[key]
        out.append(label.ljust(12) + "".join(fmt_s(row[c]).rjust(width) for c in COLS))
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
        cell = 'style="padding:2px 8px;text-align:right"'
        head = "".join(f"<th {cell}>{c}</th>" for c in COLS)
        rows = "".join(
            f"<tr><th style=\"text-align:left;padding:2px 8px\">{label}</th>"
            + "".join(f"<td {cell}>{e(fmt_s(s[key][c]))}</td>" for c in COLS)
            + "</tr>"
            for label, key in ROWS
        )
        parts.append(
            '<table style="border-collapse:collapse;margin:6px 0">'
            f"<tr><th></th>{head}</tr>{rows}</table>"
        )
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
