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
