"""Thresholds in words: shares and percentiles as the sentences quote them.
"""

from __future__ import annotations



from ..fmt import pct


def _of_the(share: float) -> str:
    """"half the" for 0.5, else "40% of the"."""
    return "half the" if share == 0.5 else f"{pct(share)} of the"


def _part(share: float) -> str:
    """"half" for 0.5, else "40%"."""
    return "half" if share == 0.5 else pct(share)


def _p(percentile: float) -> str:
    return f"p{percentile:g}"
