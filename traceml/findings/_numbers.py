"""Order statistics the rules share: the lower and the integer-exact median.
"""

from __future__ import annotations


import numpy as np

from .. import _core


def lower_median(x: np.ndarray) -> float:
    """The lower median of ``x`` (non-empty, integers): a value of ``x``
    that at least half its values do not exceed (never between two
    groups).  Integers by selection in C, without copying ``x``."""
    return float(span_middles(x, [(0, len(x))])[0][0])


def _is_int(x) -> bool:
    return np.issubdtype(np.asarray(x).dtype, np.integer)


def int_median(x: np.ndarray) -> float:
    """``numpy.median`` of the integers ``x`` (non-empty), by selection in
    C without copying ``x``: the middle value, or the mean of the two
    middle values as float64 (as numpy.median computes it).  Also the
    median of ``x.astype(float64)``: the cast keeps the order.  Other
    dtypes: numpy.median itself."""
    if not _is_int(x):
        return float(np.median(x))
    return mid(span_middles(x, [(0, len(x))])[0])


def span_middles(x: np.ndarray, spans) -> list:
    """The two middle values of each span of ``sorted(x)``: ``spans`` is a
    sequence of (lo, hi), 0 <= lo < hi <= len(x), the values of 0-based
    ranks lo to hi - 1 (the waits at or under a threshold are the first of
    them, those above it the last).  Returns [(a, b), ...] (ints for
    integer ``x``): a at rank lo + (m - 1) // 2, b at lo + m // 2, m = hi
    - lo, so that ``numpy.median`` of the span is (a + b) / 2 and its lower
    median a.  One selection over ``x`` for every span, without gathering
    any span's values.  Raises ValueError naming the span outside x."""
    ranks = []
    for lo, hi in spans:
        if not 0 <= lo < hi <= len(x):
            raise ValueError(f"span_middles(): span ({lo}, {hi}) outside 0..{len(x)}")
        ranks += [lo + (hi - lo - 1) // 2, lo + (hi - lo) // 2]
    if not ranks:
        return []
    if _is_int(x):
        vals = _core.order_stats(x, np.array(ranks, dtype=np.int64)).tolist()
    else:
        vals = np.partition(x, sorted(set(ranks)))[ranks].tolist()
    return list(zip(vals[::2], vals[1::2]))


def mid(pair) -> float:
    """``numpy.median`` from a span's two middle values (span_middles)."""
    return (float(pair[0]) + float(pair[1])) / 2.0


# Past this many distinct candidate values bincount's table costs more
# than a sort; worker ids and residues are far below it.
_BINCOUNT_MAX = 1 << 16


def value_counts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``numpy.unique(x, return_counts=True)`` of the integers ``x``
    (shape (n,)): the distinct values ascending (int64) and how often each
    occurs.  Small non-negative values (worker ids, residues) are counted
    in one pass (numpy.bincount) instead of a sort: 10M batches' worker
    ids in a fraction of unique's time."""
    x = np.asarray(x)
    if len(x) and _is_int(x):
        lo, hi = int(x.min()), int(x.max())
        if lo >= 0 and hi < _BINCOUNT_MAX:
            counts = np.bincount(x, minlength=hi + 1)
            values = np.flatnonzero(counts)
            return values.astype(np.int64), counts[values]
    values, counts = np.unique(x, return_counts=True)
    return values, counts
