"""Drawing results: compact text for terminals and static HTML for
notebooks, of the plain dicts of a Report, a Comparison and a SweepResult.

Nothing here measures or decides, and no sentence is worded here (the
findings families give the lines, and ``traceml.findings.SECTIONS`` says
which go where); it walks those sections, marks the lines, lays out the
tables with one helper, and escapes HTML.
"""

from __future__ import annotations

import html
import os
import re
import textwrap
import warnings
from typing import Optional, Sequence

from .findings import (NO_DATA_SECTIONS, advice, bottom_line, comparison, gpu_wait,
                       prediction_check, rank_stragglers, section_lines, sweeps)
from .fmt import duration_columns, pct

ROWS = (("input wait", "input_wait_s"), ("compute", "compute_s"), ("step", "step_s"))
COLS = ("mean", "median", "p90", "p95", "p99", "max", "total")


# --- text width -----------------------------------------------------------------

# The terminal views keep every line within TEXT_WIDTH columns (issue 22: a
# report read in ten seconds); tables are laid out to fit it, and a longer
# line of prose breaks at spaces, its continuation indented under the text
# after its mark.  The environment variable TRACEML_TEXT_WIDTH sets another
# width (at least MIN_TEXT_WIDTH), or 0 for none: one line a sentence, for
# grep and for logs that wrap by themselves.
TEXT_WIDTH = 100
MIN_TEXT_WIDTH = 40
_LEAD = re.compile(r"^( *)(→ |· |\(|also: |note: )?")


def text_width() -> int:
    """The width the terminal views wrap prose at: TRACEML_TEXT_WIDTH where
    set to an integer (0: no wrapping; others at least MIN_TEXT_WIDTH),
    else TEXT_WIDTH.  Any other value warns (RuntimeWarning naming the
    variable) and reads TEXT_WIDTH: a report printed after a long run is
    never lost to a mistyped setting (under ``traceml run --save`` it
    took the report and the saved file with it)."""
    raw = os.environ.get("TRACEML_TEXT_WIDTH", "").strip()
    if not raw:
        return TEXT_WIDTH
    try:
        width = int(raw)
    except ValueError:
        width = -1
    if width != 0 and width < MIN_TEXT_WIDTH:
        warnings.warn(f"TRACEML_TEXT_WIDTH must be 0 or a width of at least {MIN_TEXT_WIDTH} "
                      f"columns, got {raw!r}: wrapping at {TEXT_WIDTH}", RuntimeWarning,
                      stacklevel=2)
        return TEXT_WIDTH
    return width


def wrap_lines(lines: Sequence[str], width: Optional[int] = None) -> list[str]:
    """``lines`` (prose) with each line longer than ``width`` columns
    (None: :func:`text_width`; 0: no wrapping) broken at spaces: its
    continuation lines are indented under the text after its lead (the
    spaces and a mark: "→ ", "· ", "(", "also: ", "note: "), or two
    columns in where there is no mark.  A word longer than a line (a
    path) is kept whole.  Lines within ``width`` and empty lines are kept
    as they are."""
    width = text_width() if width is None else width
    out: list[str] = []
    for line in lines:
        if not width or len(line) <= width:
            out.append(line)
            continue
        m = _LEAD.match(line)
        indent = len(m.group(0)) if m.group(2) else len(m.group(1)) + 2
        out.extend(textwrap.wrap(line, width, subsequent_indent=" " * indent,
                                 break_long_words=False, break_on_hyphens=False))
    return out


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


def _ms(x) -> str:
    """Seconds as milliseconds, three significant digits ("-" for None)."""
    return _cell(x, lambda v: f"{v * 1e3:.3g}")


# --- Report ----------------------------------------------------------------------


def _duration_table(block: dict, rows, cols) -> tuple[list[str], list[list[str]]]:
    """A table of duration statistics: ``rows`` (label, key) pairs, each
    key's dict in ``block`` read at ``cols``; (header, cells), one unit a
    column (fmt.duration_columns)."""
    head, cells = duration_columns(cols, [(label, [block[key][c] for c in cols])
                                          for label, key in rows])
    return ["", *head], cells


def _stat_table(s: dict) -> tuple[list[str], list[list[str]]]:
    """The table of input wait, compute and step statistics."""
    return _duration_table(s, ROWS, COLS)


def _with_roles(s: dict) -> list[tuple[str, str]]:
    """The next-step lines with their roles (advice.arrange: "why", "lead",
    "also"); a run saved before roles existed reads all as "why"."""
    lines = s.get("next") or []
    roles = s.get("next_roles")
    if not isinstance(roles, list) or len(roles) != len(lines):
        roles = ["why"] * len(lines)
    return list(zip(lines, roles))


def next_lines(s: dict) -> list[str]:
    """The terminal's next-step lines: the explanations and the one next
    step as arrows, the further experiments under it as "also".  The one
    next step says "Next:" where its words do not already, and an "also"
    line does not (a reader scanning for "Next:" landed on "also: Next:
    time __getitem__ ..." below a lead "Look at ..." without it, helper
    38D)."""
    out = []
    items = s.get("next_items") or []
    codes = ([it[0] for it in items] if len(items) == len(s.get("next") or [])
             else [None] * len(s.get("next") or []))
    for (line, role), code in zip(_with_roles(s), codes):
        if role == "also":
            out.append(f"      also: {line[len('Next: '):] if line.startswith('Next: ') else line}")
        elif (role == "lead" and "Next:" not in line and "next:" not in line
              and code not in advice.BOTTOM_LINE_CODES):
            # The event that ended or held the run is the bottom line, not
            # an experiment: it keeps its own words.
            # "Look at ..." reads "Next: look at ..." (a word, not a name).
            lower = line[:1].isupper() and line[1:2].islower()
            out.append(f"  → Next: {line[:1].lower() + line[1:] if lower else line}")
        else:
            out.append(f"  → {line}")
    return out


def _raised_first(s: dict) -> bool:
    """A run whose first fetch raised: its NO-DATA report leads with the
    exception's next step (the bottom line), not with nothing."""
    return (s.get("headline") or {}).get("label") == bottom_line.RAISED and bool(s.get("next"))


def report_text(s: dict) -> str:
    """The terminal report of a Report summary dict: the first line, the
    diagnosis, then the registry's sections (findings.SECTIONS) in their
    slots around the next steps and the table; prose within TEXT_WIDTH
    columns (:func:`wrap_lines`, the width read once)."""
    width = text_width()
    out = wrap_lines([bottom_line.first_line(s)], width)
    out.extend(ranks_text(s.get("ranks"), width))
    if s["diagnosis"] == "NO-DATA":
        prose = [f"NO-DATA: {s['diagnosis_rule']}"]
        if _raised_first(s):
            prose.extend(next_lines(s))
        prose.extend(f"  · {line}" for line in section_lines("evidence", s, NO_DATA_SECTIONS))
        prose.extend(section_lines("facts", s, NO_DATA_SECTIONS))
        prose.extend(f"note: {n}" for n in s["notes"])
        return "\n".join(out + wrap_lines(prose, width))
    prose = [f"{s['diagnosis']}: {s['diagnosis_rule']}"]
    prose.extend(f"  ({line})" for line in section_lines("diagnosis_support", s))
    shape = section_lines("shape", s)
    if shape:
        prose.extend(shape)
        prose.extend(f"  ({line})" for line in section_lines("shape_support", s))
    prose.extend(next_lines(s))
    prose.extend(f"  · {line}" for line in section_lines("evidence", s))
    prose.append("")
    prose.extend(section_lines("stalls", s))
    prose.append("")
    out.extend(wrap_lines(prose, width))
    out.extend(table_text(*_stat_table(s), sep="", min_widths=(12, *[12] * len(COLS))))
    out.extend(gpu_text(s, width))
    out.extend(wrap_lines([*section_lines("facts", s), *section_lines("prediction", s),
                           *(f"note: {n}" for n in s["notes"])], width))
    return "\n".join(out)


_BADGE = {
    "INPUT-BOUND": "#b42318",
    "BALANCED": "#b54708",
    "HAND-OVER": "#93370d",
    "HOST-BOUND": "#6941c6",
    "COMPUTE-BOUND": "#067647",
    "NO-DATA": "#475467",
}


# A code name in the prose (`DS.__getitem__` in `ds.py:8`): the terminal
# keeps the backticks, HTML sets it as code.
_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def _code_tag(match: "re.Match[str]") -> str:
    return f"<code>{match.group(1)}</code>"


def prose_html(text: str) -> str:
    """``text`` escaped for HTML, each backticked span as <code>.  A
    function, not a template string: 3.11's re kept a block for every
    template substitution (test_leaks, PYTHONMALLOC=malloc)."""
    return _CODE_SPAN.sub(_code_tag, html.escape(text))


def figure_html(png_uri: Optional[str]) -> str:
    """An inline PNG, or how to get one."""
    if png_uri is None:
        from .plot import INSTALL_HINT

        return f'<div style="color:#667085">({INSTALL_HINT})</div>'
    return f'<img src="{png_uri}" style="max-width:100%" alt="input wait per step"/>'


def report_html(s: dict, png_uri: Optional[str] = None) -> str:
    """Static HTML (no JavaScript) of a Report summary dict, with the plot
    as an inline PNG when ``png_uri`` is given."""
    e = prose_html
    color = _BADGE.get(s["diagnosis"], "#475467")
    parts = [
        '<div class="traceml-report" style="font-family:system-ui,sans-serif;'
        'font-size:13px;line-height:1.4">',
        f"<div><b>{e(bottom_line.first_line(s))}</b></div>",
        f"<div>{_badge(s['diagnosis'], color)} {e(s['diagnosis_rule'])}</div>",
    ]
    parts.extend(f'<div style="color:#b54708">({e(line)})</div>'
                 for line in section_lines("diagnosis_support", s))
    parts.append(ranks_html(s.get("ranks")))
    if s["diagnosis"] != "NO-DATA":
        shape = section_lines("shape", s)
        if shape:
            parts.extend(f"<div><b>{e(line)}</b></div>" for line in shape)
            parts.extend(f'<div style="color:#b54708">({e(line)})</div>'
                         for line in section_lines("shape_support", s))
        if s.get("next"):
            parts.append(
                '<ul style="margin:4px 0 6px 18px;padding:0">'
                + "".join(f'<li style="color:#667085">also: {e(line)}</li>' if role == "also"
                          else f"<li><b>{e(line)}</b></li>" if role == "lead"
                          else f"<li>{e(line)}</li>" for line, role in _with_roles(s))
                + "</ul>"
            )
        ev = section_lines("evidence", s)
        if ev:
            parts.append('<ul style="margin:0 0 6px 18px;padding:0;color:#344054">'
                         + "".join(f"<li>{e(line)}</li>" for line in ev) + "</ul>")
        parts.extend(f"<div>{e(line)}</div>" for line in section_lines("stalls", s))
        parts.append(table_html(*_stat_table(s), row_heads=True))
        parts.append(gpu_html(s))
        parts.extend(f"<div>{e(line)}</div>" for line in section_lines("facts", s))
        pred = section_lines("prediction", s)
        if pred:
            parts.append('<div style="margin-top:6px"><b>' + e(pred[0]) + "</b></div>")
            parts.extend(f'<div style="margin-left:12px">{e(line.strip())}</div>'
                         for line in pred[1:])
        parts.append(figure_html(png_uri))
    else:
        if _raised_first(s):
            parts.extend(f"<div><b>{e(line)}</b></div>" for line, _ in _with_roles(s))
        parts.extend(f"<div>{e(line)}</div>"
                     for line in (*section_lines("evidence", s, NO_DATA_SECTIONS),
                                  *section_lines("facts", s, NO_DATA_SECTIONS)))
    parts.extend(f'<div style="color:#b54708">note: {e(n)}</div>' for n in s["notes"])
    parts.append("</div>")
    return "".join(parts)


def _page(parts: list[str]) -> str:
    return ('<div style="font-family:system-ui,sans-serif;font-size:13px">'
            + "".join(parts) + "</div>")


# --- Comparison ------------------------------------------------------------------

# Within 100 columns, one unit a column: the times in ms a step (said in
# the title), stalls per 100 steady steps at the baseline's threshold,
# their median gap in steps, the input share of step time.
COMPARE_TITLE = "each run, times in ms a step:"
COMPARE_COLUMNS = ("run", "fetch", "median", "p95", "step", "stalls/100", "gap", "input",
                   "diagnosis", "shape", "verdict")


def _comparison_cells(rows: list[dict]) -> list[list[str]]:
    return [[
        r["label"], _ms(r["mean_wait_s"]), _ms(r["median_wait_s"]), _ms(r["p95_wait_s"]),
        _ms(r.get("step_mean_s")), _cell(r.get("stalls_per_100"), lambda x: f"{x:.1f}"),
        _cell(r["median_gap"], lambda g: f"{g:g}"),
        _cell(r["input_share"], lambda x: pct(x, 1)),
        r["diagnosis"], r["shape"] or "-", r["verdict"],
    ] for r in rows]


def _fit_first_column(head: Sequence[str], cells: list[list[str]],
                      width: int = TEXT_WIDTH) -> list[list[str]]:
    """``cells`` with the first column's values cut (ending in "…") so that
    table_text's lines fit ``width`` columns, where they would not and the
    first column keeps at least 8; one line a value (a newline in a label
    would split its row)."""
    cells = [[" ".join(c[0].split()), *c[1:]] for c in cells]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(head)]
    over = sum(widths) + 2 * (len(widths) - 1) - width
    if over <= 0:
        return cells
    keep = max(8, len(head[0]), widths[0] - over)
    return [[c[0] if len(c[0]) <= keep else c[0][:keep - 1] + "…", *c[1:]] for c in cells]


def comparison_text(d: dict) -> str:
    """The terminal table of a Comparison's ``to_dict()``: within
    TEXT_WIDTH columns, long labels cut in the table (the lines under it
    name each run in full)."""
    out = [comparison.compare_threshold(d["threshold_s"]), COMPARE_TITLE]
    out.extend(table_text(COMPARE_COLUMNS,
                          _fit_first_column(COMPARE_COLUMNS, _comparison_cells(d["rows"]))))
    prose = []
    moved = [r for r in d["rows"] if r.get("overtaking")]
    if moved:
        prose.append("overtakes (deliveries that passed a batch of lower rank): " + ", ".join(
            f"{r['label']} {r['overtaking']}" for r in moved))
    prose.extend(f"{r['label']}: {r['verdict']}: {r['why']}" for r in d["rows"][1:])
    prose.extend(rank_stragglers.compare_ranks_line(r) for r in d["rows"] if r.get("ranks"))
    return "\n".join(out + wrap_lines(prose))


# The verdicts' colours, as the report's diagnosis badge: worse red,
# better green, not yet amber, the rest grey.
_VERDICT_BADGE = {
    comparison.REGRESSION: "#b42318",
    comparison.MIXED: "#b54708",
    comparison.UNSETTLED: "#b54708",
    comparison.IMPROVEMENT: "#067647",
}


def _badge(text: str, color: str) -> str:
    return (f'<span style="background:{color};color:#fff;padding:1px 6px;'
            f'border-radius:3px;font-weight:600">{html.escape(text)}</span>')


def comparison_html(d: dict) -> str:
    """Static HTML of a Comparison's ``to_dict()``, styled as the report's:
    each run's verdict a coloured badge, then its reason."""
    e = prose_html
    return _page([f"<div>{e(comparison.compare_threshold(d['threshold_s']))}</div>",
                  f"<div>{e(COMPARE_TITLE)}</div>",
                  table_html(COMPARE_COLUMNS, _comparison_cells(d["rows"]))]
                 + [f"<div>{e(r['label'])}: "
                    f"{_badge(r['verdict'], _VERDICT_BADGE.get(r['verdict'], '#475467'))} "
                    f"{e(r['why'])}</div>" for r in d["rows"][1:]])


# --- SweepResult -----------------------------------------------------------------

# Two tables, each within 100 columns with one unit a column: what each
# condition cost (every time in ms a step, said in the title), then the
# evidence behind its pattern.  The conditions' varied parameters are
# columns of their own; "pass" only where a sweep ran more than one.
SWEEP_TIMING_TITLE = "each condition, times in ms a step:"
SWEEP_TIMING_COLUMNS = ("dir", "fetch", "p95", "step", "compute", "stalls", "period",
                        "diagnosis")
# The title within 100 columns; each column's meaning in a legend line
# under the tables, in words a reader of the loop knows.
SWEEP_EVIDENCE_TITLE = "the evidence behind each (the columns are said under the tables):"
SWEEP_EVIDENCE_LEGEND = ("columns: model, the mean fetch the workers' timing predicts, off by its "
                         "error against the row; on cadence, the stall gaps that are multiples "
                         "of max(1, num_workers); stall cores and MB, the workers' busy cores "
                         "and reads during the stalls.")
SWEEP_EVIDENCE_COLUMNS = ("dir", "model (ms)", "off by", "on cadence", "overtakes",
                          "stall cores", "stall MB")
_DIR = {"forward": "fwd", "backward": "bwd"}


def _sweep_params(rows: list[dict]) -> list[str]:
    """The parameters the rows' conditions name, in first-seen order."""
    names: list[str] = []
    for r in rows:
        names.extend(k for k in r["condition"] if k not in names)
    return names


def _sweep_tables(rows: list[dict]) -> list[tuple[tuple, list[list[str]]]]:
    """(header, cells) of the timing table and of the evidence table."""
    params = _sweep_params(rows)
    passes = any(r["pass_"] for r in rows)
    lead = (*params, *(("pass",) if passes else ()))
    timing, evidence = [], []
    for r in rows:
        first = ([str(r["condition"].get(k, "-")) for k in params]
                 + ([str(r["pass_"])] if passes else [])
                 + [_DIR.get(r["direction"], r["direction"])])
        if r["error"]:
            timing.append(first + ["error"] + ["-"] * (len(SWEEP_TIMING_COLUMNS) - 2))
            evidence.append(first + ["-"] * (len(SWEEP_EVIDENCE_COLUMNS) - 1))
            continue
        err = r.get("predicted_error")
        timing.append(first + [
            _ms(r["mean_s"]), _ms(r["p95_s"]), _ms(r.get("step_mean_s")),
            _ms(r.get("compute_mean_s")), str(r["stalls"]), sweeps.sweep_period(r),
            r["diagnosis"] or "-"])
        evidence.append(first + [
            _ms(r.get("predicted_s")), "-" if err is None else f"{err:+.0%}",
            _cell(r["multiple_fraction"], pct), _cell(r["overtaking"]),
            _cell(r["slow_worker_cores"], lambda c: f"{c:.1f}"),
            _cell(r["slow_read_bytes"], lambda b: f"{b / 1e6:.3g}")])
    return [((*lead, *SWEEP_TIMING_COLUMNS), timing),
            ((*lead, *SWEEP_EVIDENCE_COLUMNS), evidence)]


def _sweep_notes(d: dict) -> list[str]:
    """The lines under a sweep's table, before the errors."""
    ignored = d["ignored_num_workers"]
    out = [SWEEP_EVIDENCE_LEGEND]
    out += [t for t in (sweeps.sweep_correlation(d["correlation"], bool(ignored)),) if t]
    out.extend(t for t in (prediction_check.sweep_prediction(d.get("prediction"), d["rows"]),) if t)
    out.extend(t for t in (sweeps.sweep_unsettled(d["rows"]),
                           sweeps.sweep_left_out(d["correlation"])) if t)
    out.extend(t for t in (sweeps.sweep_in_order(d["rows"]),
                           sweeps.sweep_ignored(ignored),
                           sweeps.sweep_best(d["best"], len(d["rows"])),
                           sweeps.sweep_order(d["order_effects"])) if t)
    out.extend(t for t in (sweeps.sweep_consumer(d.get("consumer"), d["rows"]),) if t)
    out.extend(sweeps.sweep_next_lines(d.get("next") or []))
    out.extend(sweeps.sweep_short(d["rows"]))
    return out


def sweep_text(d: dict) -> str:
    """The terminal table of a SweepResult's ``to_dict()``."""
    (th, tc), (eh, ec) = _sweep_tables(d["rows"])
    out = ([SWEEP_TIMING_TITLE] + table_text(th, tc) + ["", SWEEP_EVIDENCE_TITLE]
           + table_text(eh, ec) + [""])
    notes = _sweep_notes(d) + [sweeps.sweep_error(r) for r in d["rows"] if r["error"]]
    if d["interrupted"]:
        notes.append(sweeps.SWEEP_INTERRUPTED)
    return "\n".join(out + wrap_lines(notes))


def sweep_html(d: dict, png_uri: Optional[str] = None) -> str:
    """Static HTML of a SweepResult's ``to_dict()``, with its plot as an
    inline PNG when ``png_uri`` is given."""
    e = html.escape
    (th, tc), (eh, ec) = _sweep_tables(d["rows"])
    return _page([f"<div>{e(SWEEP_TIMING_TITLE)}</div>", table_html(th, tc),
                  f"<div>{e(SWEEP_EVIDENCE_TITLE)}</div>", table_html(eh, ec)]
                 + [f"<div>{prose_html(t)}</div>" for t in _sweep_notes(d)]
                 + [figure_html(png_uri)])


# --- GPU-visible input wait (traceml.gpu) --------------------------------------------

def _gpu_table(g: dict) -> tuple[list[str], list[list[str]]]:
    """The host-vs-GPU wait table."""
    return _duration_table(g, gpu_wait.GPU_ROWS, gpu_wait.GPU_COLS)


def gpu_text(s: dict, width: Optional[int] = None) -> list[str]:
    """The host-vs-GPU wait table and its lines (prose within ``width``,
    wrap_lines'); [] without a gpu block."""
    g = s.get("gpu")
    if not g:
        return []
    return ([""] + table_text(*_gpu_table(g), sep="",
                              min_widths=(18, *[12] * len(gpu_wait.GPU_COLS)))
            + wrap_lines(gpu_wait.gpu_lines(s), width))


def gpu_html(s: dict) -> str:
    """The host-vs-GPU wait table and its lines as HTML; "" without a gpu
    block."""
    g = s.get("gpu")
    if not g:
        return ""
    e = html.escape
    return (table_html(*_gpu_table(g), row_heads=True)
            + "".join(f"<div>{e(line.strip())}</div>" for line in gpu_wait.gpu_lines(s)))


# --- many ranks ------------------------------------------------------------------

# Within 100 columns: each rank's input share of step time ("input"), its
# median input wait and compute (one unit a column), the share of aligned
# steps on which it held the job's largest wait ("held") and its share of
# the wait only one rank had ("unique"), a straggler's rank starred; the
# legend line says so.
RANK_COLUMNS = ("rank", "host", "steps", "diagnosis", "input", "shape", "period",
                "stalls", "wait", "compute", "held", "unique")
RANK_LEGEND = ("per rank: input = input wait's share of step time; wait, compute = "
               "medians; held = steps holding the job's largest wait; unique = "
               "share of the wait only one rank had; * = a straggler")
# The columns of durations, each in one unit (fmt.duration_columns).
_RANK_TIMES = (("wait", "input_wait_median_s"), ("compute", "compute_median_s"))


def _rank_table(r: dict) -> tuple[list[str], list[list[str]]]:
    """The per-rank table: (header, cells), the times one unit a column."""
    per = r["per_rank"]
    times_head, times = duration_columns([h for h, _ in _RANK_TIMES], [
        ("", [p[key] for _, key in _RANK_TIMES]) for p in per])
    head = [dict(zip([h for h, _ in _RANK_TIMES], times_head)).get(c, c) for c in RANK_COLUMNS]
    return head, [[
        f"{p['rank']}*" if p["straggler"] else str(p["rank"]), p.get("host") or "-", _cell(p["steps"]), p["diagnosis"] or "-",
        _cell(p["input_share"], lambda x: pct(x, 1)), p["shape"] or "-",
        _cell(p["period"]), _cell(p["stalls"]), *t[1:],
        _cell(p["held_share"], lambda x: pct(x)),
        _cell(p["unique_share"], lambda x: pct(x)),
    ] for p, t in zip(per, times)]


def ranks_text(r: Optional[dict], width: Optional[int] = None) -> list[str]:
    """The ranks block of a gathered report (traceml.ranks): lines, the
    per-rank table and the next steps (prose within ``width``,
    wrap_lines'); empty for a one-process report."""
    if not r:
        return []
    width = text_width() if width is None else width
    out = wrap_lines([*rank_stragglers.ranks_lines(r), RANK_LEGEND], width)
    out.extend(table_text(*_rank_table(r), sep=" "))
    out.extend(wrap_lines([f"  → {line}" for line in r.get("next") or []], width))
    out.append("job (largest input wait across ranks per step):")
    return out


def ranks_html(r: Optional[dict]) -> str:
    """Static HTML of the ranks block; empty for a one-process report."""
    if not r:
        return ""
    e = html.escape
    lines = rank_stragglers.ranks_lines(r)
    parts = ['<div class="traceml-ranks" style="margin:4px 0">']
    parts.extend(f"<div><b>{e(line)}</b></div>" if line.startswith(("STRAGGLER", "MISSING"))
                 else f"<div>{e(line)}</div>" for line in lines)
    parts.append(f"<div>{e(RANK_LEGEND)}</div>")
    parts.append(table_html(*_rank_table(r)))
    if r.get("next"):
        parts.append('<ul style="margin:4px 0 6px 18px;padding:0">'
                     + "".join(f"<li>{e(line)}</li>" for line in r["next"]) + "</ul>")
    parts.append("<div>job (largest input wait across ranks per step):</div></div>")
    return "".join(parts)
