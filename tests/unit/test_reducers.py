"""The C reducers against NumPy and exact Python references."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from traceml import _core

I64 = np.iinfo(np.int64)
QS = [0.0, 1.0, 10.0, 25.0, 50.0, 90.0, 95.0, 99.0, 99.9, 100.0]


def exact_percentile(x, q):
    """numpy's "linear" rule in exact rational arithmetic."""
    s = sorted(int(v) for v in x)
    h = (len(s) - 1) * (q / 100.0)  # float, as numpy computes the index
    k = math.floor(h)
    if k >= len(s) - 1:
        return Fraction(s[-1])
    t = Fraction(h - k)
    return s[k] + (s[k + 1] - s[k]) * t


timing_arrays = hnp.arrays(
    np.int64,
    st.integers(0, 300),
    elements=st.integers(-(2**40), 2**50),
)
any_int64 = hnp.arrays(
    np.int64, st.integers(0, 60), elements=st.integers(I64.min, I64.max)
)


# --- summary -----------------------------------------------------------------


@given(any_int64)
def test_summary_exact_on_any_int64(x):
    s = _core.summary(x)
    vals = [int(v) for v in x]
    assert s["count"] == len(vals)
    assert s["sum"] == sum(vals)
    if not vals:
        assert s["min"] is None and s["max"] is None
        assert math.isnan(s["mean"]) and math.isnan(s["std"])
        return
    assert s["min"] == min(vals) and s["max"] == max(vals)
    mean = Fraction(sum(vals), len(vals))
    assert s["mean"] == pytest.approx(float(mean), rel=1e-12, abs=1e-9)
    var = sum((Fraction(v) - mean) ** 2 for v in vals) / len(vals)
    assert s["std"] == pytest.approx(math.sqrt(var), rel=1e-9, abs=1e-6)


def test_summary_matches_numpy_on_timings():
    x = np.random.default_rng(3).integers(0, 10**10, 100_003)
    s = _core.summary(x)
    assert s["mean"] == pytest.approx(x.mean(), rel=1e-14)
    assert s["std"] == pytest.approx(x.std(), rel=1e-12)
    assert (s["min"], s["max"], s["sum"]) == (x.min(), x.max(), int(x.sum()))


def test_summary_sum_beyond_int64_is_exact():
    x = np.full(5, I64.max, dtype=np.int64)
    assert _core.summary(x)["sum"] == 5 * int(I64.max)
    y = np.full(3, I64.min, dtype=np.int64)
    assert _core.summary(y)["sum"] == 3 * int(I64.min)


# --- percentiles ---------------------------------------------------------------


@given(timing_arrays.filter(len), st.lists(st.floats(0, 100), min_size=1, max_size=6))
def test_percentiles_equal_numpy_linear_within_1ns(x, q):
    got = _core.percentiles(x, q)
    want = np.percentile(x, q, method="linear")
    np.testing.assert_allclose(got, want, rtol=0, atol=1.0)


@given(any_int64.filter(len), st.sampled_from(QS))
def test_percentiles_exact_near_int64_limits(x, q):
    got = _core.percentiles(x, q)
    want = exact_percentile(x, q)
    assert got == pytest.approx(float(want), rel=1e-15, abs=1.0)


@pytest.mark.parametrize(
    "make",
    [
        lambda r: r.integers(0, 10**9, 50_001),  # uniform
        lambda r: (r.lognormal(13, 2, 60_000)).astype(np.int64),  # heavy tail
        lambda r: np.r_[np.full(70_000, 5_000), [10**15]],  # one far outlier
        lambda r: r.integers(0, 4, 40_000),  # few distinct values
        lambda r: np.full(9_000, -7),  # all equal, negative
        lambda r: np.sort(r.integers(-(10**12), 10**12, 33_333))[::-1].copy(),
        lambda r: r.integers(I64.min, I64.max, 20_000, dtype=np.int64, endpoint=True),
    ],
    ids=["uniform", "lognormal", "outlier", "few-values", "all-equal", "descending", "full-range"],
)
def test_percentiles_large_arrays(make):
    """Above 4096 values the histogram-prefiltered selection is used."""
    x = np.asarray(make(np.random.default_rng(7)), dtype=np.int64)
    before = x.copy()
    got = _core.percentiles(x, QS)
    np.testing.assert_array_equal(x, before)  # the input is not modified
    if np.abs(x).max() < 2**52:
        np.testing.assert_allclose(got, np.percentile(x, QS), rtol=0, atol=1.0)
    want = [float(exact_percentile(x, q)) for q in QS]
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=1.0)


def test_percentiles_shapes_and_empty():
    x = np.array([5, 1, 3], dtype=np.int64)
    assert _core.percentiles(x, 50) == 3.0
    assert isinstance(_core.percentiles(x, 50.0), float)
    out = _core.percentiles(x, [0, 100])
    assert out.dtype == np.float64 and out.tolist() == [1.0, 5.0]
    assert math.isnan(_core.percentiles([], 50))
    assert np.isnan(_core.percentiles(np.array([], dtype=np.int64), [5, 95])).all()


@pytest.mark.parametrize("q", [-0.1, 100.5, float("nan"), [50, 101]])
def test_percentiles_reject_bad_q(q):
    with pytest.raises(ValueError, match="q must be in"):
        _core.percentiles([1, 2, 3], q)


# --- stalls, gaps, cadence -------------------------------------------------------


def ref_gaps(mask, epoch=None):
    idx = np.flatnonzero(mask)
    gaps = np.diff(idx)
    if epoch is not None and len(idx) > 1:
        same = epoch[idx[1:]] == epoch[idx[:-1]]
        gaps = gaps[same]
    return gaps


@given(
    hnp.arrays(np.int64, st.integers(0, 200), elements=st.integers(0, 10**6)),
    st.integers(-1, 10**6),
)
def test_stall_mask_is_strictly_greater(wait, thr):
    mask = _core.stall_mask(wait, thr)
    assert mask.dtype == np.bool_
    np.testing.assert_array_equal(mask, wait > thr)


@given(
    hnp.arrays(np.bool_, st.integers(0, 300)),
    st.integers(1, 5),
    st.integers(0, 2**32 - 1),
)
def test_stall_gaps_within_epochs(mask, epochs, seed):
    epoch = np.sort(np.random.default_rng(seed).integers(0, epochs, len(mask)))
    np.testing.assert_array_equal(_core.stall_gaps(mask), ref_gaps(mask))
    np.testing.assert_array_equal(
        _core.stall_gaps(mask, epoch), ref_gaps(mask, epoch)
    )
    np.testing.assert_array_equal(
        _core.stall_gaps(mask, epoch=epoch.astype(np.int32)), ref_gaps(mask, epoch)
    )


def ref_modal(gaps):
    values, counts = np.unique(gaps, return_counts=True)
    return int(values[np.argmax(counts)]) if len(values) else None  # first max = smallest


@given(hnp.arrays(np.int64, st.integers(0, 200), elements=st.integers(1, 12)))
def test_histogram_modal_and_cadence_match(gaps):
    values, counts = _core.gap_histogram(gaps)
    want_v, want_c = np.unique(gaps, return_counts=True)
    np.testing.assert_array_equal(values, want_v)
    np.testing.assert_array_equal(counts, want_c)
    assert _core.modal_gap(gaps) == ref_modal(gaps)
    for k in (1, 2, 3, 4):
        m = _core.cadence_match(gaps, k)
        assert m["modal_gap"] == ref_modal(gaps)
        if len(gaps):
            assert m["multiple_fraction"] == pytest.approx(np.mean(gaps % k == 0))
            assert m["modal_matches"] == (ref_modal(gaps) == k)
        else:
            assert math.isnan(m["multiple_fraction"]) and m["modal_matches"] is False


def test_modal_gap_ties_take_the_smallest():
    assert _core.modal_gap([4, 2, 4, 2, 8]) == 2


def test_gap_reducers_reject_bad_values():
    with pytest.raises(ValueError, match="gaps must be >= 1"):
        _core.gap_histogram([2, 0, 3])
    with pytest.raises(ValueError, match="num_workers must be >= 1"):
        _core.cadence_match([2, 2], 0)
    with pytest.raises(TypeError, match="num_workers must be an int"):
        _core.cadence_match([2, 2], 2.0)
    with pytest.raises(ValueError, match="epoch must have the length of mask"):
        _core.stall_gaps(np.ones(3, bool), np.zeros(2, np.int64))


# --- Otsu ----------------------------------------------------------------------


def ref_otsu(x):
    v = np.sort(np.log(np.maximum(x, 1).astype(float)))
    n = len(v)
    best, split = -1.0, None
    for i in range(n - 1):
        if v[i] == v[i + 1]:
            continue
        a, b = v[: i + 1], v[i + 1 :]
        between = (len(a) / n) * (len(b) / n) * (a.mean() - b.mean()) ** 2
        if between > best:
            best, split = between, i
    if split is None:
        return None
    return best / v.var(), math.exp((v[split] + v[split + 1]) / 2), n - split - 1


@given(hnp.arrays(np.int64, st.integers(0, 80), elements=st.integers(-5, 10**9)))
def test_log_otsu_matches_brute_force(x):
    got = _core.log_otsu(x)
    want = ref_otsu(x)
    if want is None:
        assert math.isnan(got["eta"]) and math.isnan(got["threshold_ns"])
        return
    eta, thr, upper = want
    assert got["eta"] == pytest.approx(eta, rel=1e-6, abs=1e-9)
    # Ties between equally good splits may resolve differently; the
    # separability they reach is what must agree.
    if got["upper_count"] == upper:
        assert got["threshold_ns"] == pytest.approx(thr, rel=1e-9)


def test_log_otsu_separates_fast_from_stalled():
    x = np.r_[np.full(75, 50_000), np.full(25, 80_000_000)]
    got = _core.log_otsu(x)
    assert got["eta"] == pytest.approx(1.0)
    assert 50_000 < got["threshold_ns"] < 80_000_000
    assert got["upper_count"] == 25
    assert got["lower_mean_ns"] == pytest.approx(50_000)
    assert got["upper_mean_ns"] == pytest.approx(80_000_000)


# --- bad input -----------------------------------------------------------------


@pytest.mark.parametrize(
    "bad, exc, words",
    [
        (None, TypeError, "x must be a 1-D array of integers, got NoneType"),
        ("abc", TypeError, "x must be a 1-D array of integers, got str"),
        ([1.5, 2.0], TypeError, "x must hold integers"),
        (np.zeros(3), TypeError, "x must hold integers"),
        (np.zeros((2, 2), dtype=np.int64), ValueError, "x must be 1-D"),
        (np.array([1], dtype=np.uint64), TypeError, "x must convert to int64"),
    ],
)
def test_reducers_name_the_bad_argument(bad, exc, words):
    with pytest.raises(exc, match=words):
        _core.summary(bad)
    with pytest.raises(exc, match=words):
        _core.percentiles(bad, 50)


def test_reducers_accept_small_int_and_bool_arrays():
    assert _core.summary(np.array([1, 2, 3], dtype=np.int8))["sum"] == 6
    assert _core.summary(np.array([True, False, True]))["sum"] == 2
    assert _core.summary([])["count"] == 0
    assert _core.percentiles(np.array([1, 3], dtype=np.uint32), 50) == 2.0


@given(hnp.arrays(np.int64, st.integers(0, 60), elements=st.integers(-3, 40)),
       st.integers(1, 9), st.integers(0, 2**32))
def test_residue_counts_match_bincount(position, period, seed):
    rng = np.random.default_rng(seed)
    tested = rng.random(len(position)) < 0.8
    stalled = rng.random(len(position)) < 0.4
    fetches, stalls, last = _core.residue_counts(position, period, tested, stalled)
    counted = tested & (position >= 0)
    assert fetches.tolist() == np.bincount(position[counted] % period,
                                           minlength=period).tolist()
    assert stalls.tolist() == np.bincount(position[counted & stalled] % period,
                                          minlength=period).tolist()
    assert last == (int(position[counted].max()) if counted.any() else -1)


def test_residue_counts_name_the_bad_argument():
    pos, mask = np.arange(4), np.ones(4, dtype=bool)
    with pytest.raises(ValueError, match="period"):
        _core.residue_counts(pos, 0, mask, mask)
    with pytest.raises(ValueError, match="stalled"):
        _core.residue_counts(pos, 2, mask, mask[:3])
    with pytest.raises(TypeError, match="tested"):
        _core.residue_counts(pos, 2, pos, mask)


@given(hnp.arrays(np.int64, st.integers(1, 80), elements=st.integers(-50, 10**12)),
       st.data())
def test_span_middles_give_numpys_medians_of_sorted_spans(x, data):
    from traceml.findings import _numbers
    lo = data.draw(st.integers(0, len(x) - 1))
    hi = data.draw(st.integers(lo + 1, len(x)))
    span = np.sort(x)[lo:hi]
    (a, b), = _numbers.span_middles(x, [(lo, hi)])
    assert _numbers.mid((a, b)) == float(np.median(span))
    assert a == np.partition(span, (len(span) - 1) // 2)[(len(span) - 1) // 2]
    with pytest.raises(ValueError, match="span"):
        _numbers.span_middles(x, [(0, len(x) + 1)])
