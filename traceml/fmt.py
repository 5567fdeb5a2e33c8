"""Number formatting: durations, shares and byte counts as text.

Pure functions of numbers (one each, or a table's column of durations
put in one unit); they know nothing of thresholds, reports or what the
numbers mean.
"""

from __future__ import annotations

import math
from typing import Optional


def fmt_s(seconds: Optional[float]) -> str:
    """A duration in the unit that keeps 3 significant digits readable;
    "-" for None."""
    if seconds is None:
        return "-"
    a = abs(seconds)
    if a >= 1e5:
        return f"{seconds:.3g} s"
    if a >= 1:
        return f"{seconds:.2f} s"
    if a >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    if a >= 1e-6:
        return f"{seconds * 1e6:.3g} µs"
    return f"{seconds * 1e9:.3g} ns"


# The units a column of durations may read in, largest first: (name,
# seconds per unit).
DURATION_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def duration_unit(seconds) -> tuple[str, float]:
    """The one unit a column of durations (seconds; None ignored) reads
    in: the largest of DURATION_UNITS that its largest magnitude reaches
    (ns for a column of zeros or Nones).  Returns (name, seconds per
    unit)."""
    top = max((abs(v) for v in seconds if v is not None), default=0.0)
    for name, size in DURATION_UNITS:
        if top >= size:
            return name, size
    return DURATION_UNITS[-1]


def fmt_in(seconds: Optional[float], size: float) -> str:
    """``seconds`` as a number of units of ``size`` seconds, 3 significant
    digits in fixed notation (0.000412, 1.23, 1234); "-" for None."""
    if seconds is None:
        return "-"
    x = seconds / size
    if x == 0:
        return "0"
    if abs(x) >= 999.5:
        return f"{x:.0f}"
    x = float(f"{x:.3g}")       # rounded first: 9.996 reads 10.0, not 10.00
    return f"{x:.{max(0, 2 - math.floor(math.log10(abs(x))))}f}"


def duration_columns(head, rows):
    """A table of durations with one unit a column: ``head`` the column
    names, ``rows`` (label, [seconds or None, one per column]) pairs.
    Returns (header, cells): each name followed by its column's unit
    (duration_unit), each value in it (fmt_in)."""
    units = [duration_unit([r[1][i] for r in rows]) for i in range(len(head))]
    header = [f"{h} ({u})" for h, (u, _) in zip(head, units)]
    cells = [[label, *(fmt_in(v, size) for v, (_, size) in zip(values, units))]
             for label, values in rows]
    return header, cells


def pct(share: float, digits: int = 0) -> str:
    """A share (0.2) as a percentage ("20%"), ``digits`` decimals."""
    return f"{100 * share:.{digits}f}%"


def fmt_bytes(n: float) -> str:
    """A byte count: megabytes (10^6) from 100 kB up (in size, either
    sign), else bytes."""
    return f"{n / 1e6:.1f} MB" if abs(n) >= 1e5 else f"{n:.0f} B"


def nth(k: int) -> str:
    """The ordinal of ``k``: 2nd, 3rd, 8th, 11th, 21st."""
    tail = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{tail}"


def plural(n: int, word: str, many: Optional[str] = None) -> str:
    """``n`` and ``word``, with ``many`` (default word + "s") unless n is 1:
    "1 step", "3 steps"."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def code_where(place: dict) -> str:
    """A function and where it is, as a reader finds it: "`fn` in
    `dir/file.py:12`" (``place``: {function, file, line}; the file's last
    two path parts)."""
    short = "/".join(place["file"].replace("\\", "/").split("/")[-2:])
    return f"`{place['function']}` in `{short}:{place['line']}`"
