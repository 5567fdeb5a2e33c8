"""Order statistics the rules share: the lower and the integer-exact median.
"""

from __future__ import annotations


import numpy as np

from .. import _core


def lower_median(x: np.ndarray) -> float:
    """The lower median of ``x`` (non-empty, integers): a value of ``x``
    that at least half its values do not exceed (never between two
    groups).  Integers by selection in C, without copying ``x``."""
    k = (len(x) - 1) // 2
    if not _is_int(x):
        return float(np.partition(x, k)[k])
    return float(_core.order_stats(x, np.array([k]))[0])


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
    n = len(x)
    if n % 2:
        return float(_core.order_stats(x, np.array([n // 2]))[0])
    a, b = _core.order_stats(x, np.array([n // 2 - 1, n // 2]))
    return (float(a) + float(b)) / 2.0


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
