"""The report's tables of durations: one unit a column, within 100
columns, every value read back to its summary's number."""

import math
import re

import pytest

from traceml import fmt, render

UNIT_S = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}


@pytest.mark.parametrize("values, unit", [
    ([2.5e-6, 4e-3, 0.2], "ms"), ([1.0, 3e-9], "s"), ([9.99e-4, 1e-7], "µs"),
    ([None, 0.0], "ns"), ([], "ns"), ([-2e-3, 1e-6], "ms")])
def test_a_column_reads_in_the_largest_unit_its_largest_value_reaches(values, unit):
    assert fmt.duration_unit(values) == (unit, UNIT_S[unit])


@pytest.mark.parametrize("seconds", [4.12e-7, 1.234e-4, 0.0195, 0.1, 1.0, 9.996, 47.1, 1234.5])
@pytest.mark.parametrize("unit", ["s", "ms", "µs"])
def test_a_value_keeps_three_significant_digits_in_its_column_unit(seconds, unit):
    size = UNIT_S[unit]
    text = fmt.fmt_in(seconds, size)
    assert "e" not in text                  # fixed notation, never 1e+03
    x = seconds / size
    # Read back, the value is the number rounded to 3 significant digits
    # (or to a whole number past 999).
    step = max(10.0 ** (math.floor(math.log10(x)) - 2), 1.0 if x >= 1000 else 0.0)
    assert abs(float(text) - x) <= step / 2 * (1 + 1e-9)
    digits = text.replace(".", "").lstrip("0")
    assert len(digits) == max(3, len(str(int(round(x)))))


def test_none_and_zero_cells():
    assert fmt.fmt_in(None, 1e-3) == "-"
    assert fmt.fmt_in(0.0, 1e-3) == "0"


def test_the_report_table_holds_one_unit_a_column(corpus_summaries):
    """Every corpus report: each column of the statistics table names one
    unit in its header, each of its cells is the summary's value in it, and
    the table fits in 100 columns."""
    for name, s in corpus_summaries:
        if s["diagnosis"] == "NO-DATA":
            continue
        lines = render.report_text(s).splitlines()
        at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("mean ("))
        header, rows = lines[at], lines[at + 1:at + 1 + len(render.ROWS)]
        assert all(len(line) <= 100 for line in (header, *rows)), name
        units = re.findall(r"\((s|ms|µs|ns)\)", header)
        assert len(units) == len(render.COLS), (name, header)
        for (label, key), line in zip(render.ROWS, rows):
            assert line.startswith(label), (name, line)
            cells = line[len(label):].split()
            for col, unit, cell in zip(render.COLS, units, cells):
                want = s[key][col]
                if want is None:
                    assert cell == "-"
                    continue
                got = float(cell) * UNIT_S[unit]
                assert got == pytest.approx(want, rel=5e-3, abs=UNIT_S[unit] * 1e-6), \
                    (name, label, col, cell, unit, want)


# --- prose within the text width ---------------------------------------------------


@pytest.mark.parametrize("width", [40, 72, 100])
def test_wrapped_prose_keeps_every_word_within_the_width(width):
    long = "word " * 60
    lines = [f"  → {long}", f"      also: {long}", f"  · {long}", f"note: {long}",
             f"  ({long})", f"INPUT-BOUND: {long}", "", "short line",
             "  → " + "x" * (width + 30) + " tail"]
    out = render.wrap_lines(lines, width)
    # Nothing lost or added but the breaks and their indents.
    assert " ".join(" ".join(out).split()) == " ".join(" ".join(lines).split())
    assert "" in out and "short line" in out
    # A word longer than a line stays whole, alone past the width.
    assert all(len(x) <= width or ("x" * (width + 30)) in x for x in out)
    # Each continuation is indented under the text after its lead.
    for lead, indent in (("  → ", 4), ("      also: ", 12), ("  · ", 4), ("note: ", 6),
                         ("  (", 3), ("INPUT-BOUND: ", 2)):
        i = next(k for k, x in enumerate(out) if x.startswith(lead + "word"))
        assert out[i + 1].startswith(" " * indent + "word"), (lead, out[i + 1])
    assert render.wrap_lines(lines, 0) == lines


def test_the_text_width_is_100_unless_the_environment_says_otherwise(monkeypatch):
    monkeypatch.delenv("TRACEML_TEXT_WIDTH", raising=False)
    assert render.text_width() == render.TEXT_WIDTH == 100
    monkeypatch.setenv("TRACEML_TEXT_WIDTH", "0")
    assert render.text_width() == 0
    monkeypatch.setenv("TRACEML_TEXT_WIDTH", "120")
    assert render.text_width() == 120
    # A mistyped value warns and wraps at 100: the report is never lost.
    for bad in ("30", "wide", "-1"):
        monkeypatch.setenv("TRACEML_TEXT_WIDTH", bad)
        with pytest.warns(RuntimeWarning, match="TRACEML_TEXT_WIDTH"):
            assert render.text_width() == 100


def test_a_report_reads_within_100_columns_and_says_the_same(monkeypatch):
    import corpus

    case = corpus.seed_table(0, 4)
    monkeypatch.setenv("TRACEML_TEXT_WIDTH", "0")
    flat = str(corpus.replay(case))
    monkeypatch.delenv("TRACEML_TEXT_WIDTH")
    text = str(corpus.replay(case))
    assert max(len(x) for x in flat.splitlines()) > 100     # there was prose to wrap
    assert max(len(x) for x in text.splitlines()) <= 100
    assert " ".join(text.split()) == " ".join(flat.split())


def test_a_comparison_table_cuts_long_labels_to_fit_100_columns():
    # Helper 38D: file-name labels of 13 characters made 102-column rows,
    # a 200-character label a 200-column table, and a newline in a label
    # split its row.
    row = {"label": "", "mean_wait_s": 0.0123, "median_wait_s": 0.0011, "p95_wait_s": 0.0456,
           "step_mean_s": 0.0222, "stalls_per_100": 12.5, "median_gap": 4.0,
           "input_share": 0.55, "diagnosis": "INPUT-BOUND", "shape": "HEAVY-TAILED",
           "verdict": "UNSETTLED", "why": "x", "overtaking": None}
    d = {"threshold_s": 0.01, "rows": [{**row, "label": "run_winit_pw0.traceml"},
                                        {**row, "label": "L" * 200},
                                        {**row, "label": "x\ny"}]}
    text = render.comparison_text(d)
    table = text.splitlines()[2:5]
    assert max(len(x) for x in table) <= 100, table
    assert table[1].startswith("run_winit_") and "…" in table[1]
    assert table[3 - 1].startswith("L") and "…" in table[2]
    assert any(x.startswith("x y ") for x in text.splitlines())
    # Short labels stay whole.
    short = {"threshold_s": 0.01, "rows": [{**row, "label": "a"}, {**row, "label": "b"}]}
    assert render._fit_first_column(render.COMPARE_COLUMNS,
                                    render._comparison_cells(short["rows"]))[0][0] == "a"


def test_the_lead_says_next_unless_it_is_the_event_that_ended_the_run():
    s = {"next": ["Look at `f` in `ds.py:3`: 90% of the slow batches' CPU.",
                  "Next: time __getitem__ on index 8."],
         "next_roles": ["lead", "also"],
         "next_items": [["look_at_function", {}], ["time_slow_samples", {}]]}
    assert render.next_lines(s) == ["  → Next: look at `f` in `ds.py:3`: 90% of the slow "
                                    "batches' CPU.",
                                    "      also: time __getitem__ on index 8."]
    raised = {"next": ["The loop ended when fetch 0 of epoch 0 raised ValueError."],
              "next_roles": ["lead"], "next_items": [["raised", {}]]}
    assert render.next_lines(raised) == [
        "  → The loop ended when fetch 0 of epoch 0 raised ValueError."]


def test_html_sets_code_names_as_code_and_escapes_the_rest():
    # Helper 38D: the HTML view printed the terminal's backticks literally.
    assert render.prose_html("Look at `DS.__getitem__` in `ds.py:8` <now>") == (
        "Look at <code>DS.__getitem__</code> in <code>ds.py:8</code> &lt;now&gt;")
    # An odd backtick is text; markup inside a span stays escaped.
    assert render.prose_html("a ` b") == "a ` b"
    assert render.prose_html("`<img onerror=x>`") == "<code>&lt;img onerror=x&gt;</code>"


def test_html_views_show_code_names_and_coloured_verdicts(corpus_summaries):
    # The corpus has no stacks to name: a note stands in for a named line.
    s = {**corpus_summaries[0][1], "notes": ["look at `DS.__getitem__` in `ds.py:8`"]}
    page = render.report_html(s)
    assert "<code>DS.__getitem__</code> in <code>ds.py:8</code>" in page and "`" not in page
    row = {"label": "base", "mean_wait_s": 0.0123, "median_wait_s": 0.0011,
           "p95_wait_s": 0.0456, "step_mean_s": 0.0222, "stalls_per_100": 12.5,
           "median_gap": 4.0, "input_share": 0.55, "diagnosis": "INPUT-BOUND",
           "shape": "HEAVY-TAILED", "verdict": "BASELINE", "why": "", "overtaking": None}
    d = {"threshold_s": 0.01, "rows": [row, {**row, "label": "new", "verdict": "REGRESSION",
                                             "why": "the mean fetch rose"}]}
    page = render.comparison_html(d)
    badge = re.search(r'new: <span style="background:(#[0-9a-f]{6});[^>]*>REGRESSION</span>',
                      page)
    assert badge and badge.group(1) == render._BADGE["INPUT-BOUND"]     # red, as the report's
