"""Long runs: the reducers' long-input paths against NumPy, the read-only
snapshot view, and report() on synthetic long runs against the summaries
the code before the long-run work gave (tests/longrun_cases.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import traceml
from traceml import _core

import longrun_cases

I64 = np.iinfo(np.int64)


# --- Otsu: the histogram path (over 65536 values) -------------------------------


def ref_otsu(x):
    """Otsu's split of sorted log(max(x, 1)), every split, in NumPy (long
    double sums): (threshold, eta, upper_count, lower_mean, upper_mean) or
    None without two distinct values."""
    v = np.sort(np.log(np.maximum(x, 1).astype(np.float64)))
    n = len(v)
    c = np.cumsum(v.astype(np.longdouble))
    total = c[-1]
    i = np.arange(1, n)
    left = c[:-1]
    w0 = i / n
    m0, m1 = left / i, (total - left) / (n - i)
    between = w0 * (1 - w0) * (m0 - m1) ** 2
    between[v[:-1] == v[1:]] = -1
    k = int(np.argmax(between))
    if between[k] < 0:
        return None
    var = ((v.astype(np.longdouble) - total / n) ** 2).sum()
    return (math.exp((v[k] + v[k + 1]) / 2), float(between[k] * n / var), n - k - 1,
            float(np.exp(m0[k])), float(np.exp(m1[k])))


def _otsu_inputs():
    rng = np.random.default_rng(7)
    yield "bimodal", np.r_[rng.integers(40_000, 60_000, 180_000),
                           rng.integers(30_000_000, 50_000_000, 20_000)]
    yield "lognormal", np.exp(rng.normal(10, 1, 200_000)).astype(np.int64)
    yield "uniform", rng.integers(1, 10**9, 150_000)
    yield "few_values", rng.choice([5, 10, 3000, 3001, 10**6], 100_000)
    yield "int64_extremes", rng.choice(
        np.array([I64.min, -1, 0, 1, 2, 2**53, 2**53 + 1, 2**62, I64.max]), 100_000)
    yield "huge", rng.integers(2**60, I64.max, 100_000, dtype=np.int64)
    yield "one_apart", np.r_[np.full(70_000, 1000), np.full(30_000, 1001)]
    # Dense bins on both sides of the split: the refinement does the work.
    yield "dense", rng.integers(1_000_000, 1_003_000, 120_000)


@pytest.mark.parametrize("name,x", list(_otsu_inputs()), ids=lambda v: v if isinstance(v, str) else "")
def test_log_otsu_long_matches_numpy(name, x):
    rng = np.random.default_rng(1)
    x = x.copy()
    rng.shuffle(x)
    got = _core.log_otsu(x)
    want = ref_otsu(x)
    assert want is not None
    thr, eta, upper, lo_mean, up_mean = want
    # The same split, so the same threshold and class sizes, exactly.
    assert got["threshold_ns"] == thr
    assert got["upper_count"] == upper
    # eta divides by the variance, summed in another order: with values
    # 0.1% apart (one_apart) the reference's own rounding reaches 4e-11
    # (it gives eta > 1).
    assert got["eta"] == pytest.approx(eta, rel=1e-9)
    assert got["lower_mean_ns"] == pytest.approx(lo_mean, rel=1e-12)
    assert got["upper_mean_ns"] == pytest.approx(up_mean, rel=1e-12)


def test_log_otsu_long_equal_and_two_values():
    same = _core.log_otsu(np.full(100_000, 12_345, dtype=np.int64))
    assert math.isnan(same["eta"]) and math.isnan(same["threshold_ns"])
    assert same["upper_count"] == 0
    # Values <= 1 count as 1: all of these are one value.
    clamped = _core.log_otsu(np.r_[np.full(50_000, I64.min), np.zeros(50_000, np.int64),
                                   np.ones(50_000, np.int64)])
    assert math.isnan(clamped["eta"])
    two = _core.log_otsu(np.r_[np.full(90_000, 10), np.full(10_000, 10_000)])
    assert two["eta"] == pytest.approx(1.0)
    assert two["threshold_ns"] == pytest.approx(math.sqrt(10 * 10_000))
    assert two["upper_count"] == 10_000
