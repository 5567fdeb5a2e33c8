"""Number formatting: durations, shares and byte counts as text.

Pure functions of one number each; they know nothing of thresholds,
reports or what the numbers mean.
"""

from __future__ import annotations

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


def pct(share: float, digits: int = 0) -> str:
    """A share (0.2) as a percentage ("20%"), ``digits`` decimals."""
    return f"{100 * share:.{digits}f}%"


def fmt_bytes(n: float) -> str:
    """A byte count: megabytes (10^6) from 100 kB up (in size, either
    sign), else bytes."""
    return f"{n / 1e6:.1f} MB" if abs(n) >= 1e5 else f"{n:.0f} B"


def plural(n: int, word: str, many: Optional[str] = None) -> str:
    """``n`` and ``word``, with ``many`` (default word + "s") unless n is 1:
    "1 step", "3 steps"."""
    return f"{n} {word if n == 1 else (many or word + 's')}"
