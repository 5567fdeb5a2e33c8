"""Long runs: the reducers' long-input paths against NumPy, the read-only
snapshot view, and report() on synthetic long runs against the summaries
the code before the long-run work gave (tests/longrun_cases.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.stats  # noqa: F401 - report() imports it on first use: not in a test's time

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
    # Two groups each inside one bin, tens of thousands of values a bin,
    # spanning more than 2^16 and 2^32: the refinement's radix sort takes
    # two and three passes.
    yield "wide_bins", np.r_[rng.integers(2**30, 2**30 + 2**20, 150_000),
                             rng.integers(2**36, 2**36 + 2**26, 50_000)]
    yield "wider_bins", np.r_[rng.integers(2**43, 2**43 + 2**33, 80_000),
                              rng.integers(2**50, 2**50 + 2**40, 40_000)]


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


# --- the read-only snapshot view -------------------------------------------------


def _records(n, start=0):
    a = np.zeros(n, dtype=_core.RECORD_DTYPE)
    a["begin_ns"] = np.arange(start, start + n)
    a["fetch_done_ns"] = a["begin_ns"] + 1
    a["end_ns"] = a["begin_ns"] + 2
    return a


def test_snapshot_view_is_a_read_only_view_equal_to_snapshot():
    rec = traceml.Recorder()
    assert len(rec.snapshot_view()) == 0
    rec._append_records(_records(3000))
    view = rec.snapshot_view()
    np.testing.assert_array_equal(view, rec.snapshot())
    assert view.dtype == _core.RECORD_DTYPE
    assert not view.flags.writeable
    with pytest.raises(ValueError):
        view["begin_ns"][0] = 5


def test_snapshot_view_survives_growth_reset_and_the_recorder():
    rec = traceml.Recorder()
    rec._append_records(_records(1000))      # capacity 1024
    before = rec.snapshot()
    view = rec.snapshot_view()
    rec._append_records(_records(100_000, start=10**6))  # grows: the block moves
    np.testing.assert_array_equal(view, before)
    np.testing.assert_array_equal(rec.snapshot()[:1000], before)
    assert len(rec.snapshot_view()) == 101_000
    kept = rec.snapshot_view()
    rec.reset()                                # new records go to a new block
    rec._append_records(_records(50, start=-77))
    assert kept["begin_ns"][0] == 0 and len(kept) == 101_000
    assert rec.snapshot_view()["begin_ns"][0] == -77
    del rec
    np.testing.assert_array_equal(view, before)
    assert int(kept["begin_ns"][-1]) == 10**6 + 100_000 - 1


def test_snapshot_view_appends_do_not_show():
    rec = traceml.Recorder()
    rec._append_records(_records(10))
    view = rec.snapshot_view()
    rec._append_records(_records(5, start=100))   # same block, past the view
    assert len(view) == 10
    np.testing.assert_array_equal(view["begin_ns"], np.arange(10))


def test_report_holds_a_view_not_a_copy():
    rec = traceml.Recorder()
    rec._append_records(longrun_cases.records("fast", 5000))
    r = rec.report()
    assert not r.steps.flags.writeable
    assert r.steps.base is not None
    np.testing.assert_array_equal(r.steps, rec.snapshot())


# --- totals and order_stats against NumPy ---------------------------------------


def _int_inputs():
    rng = np.random.default_rng(3)
    yield "one", np.array([42], dtype=np.int64)
    yield "equal", np.full(100_000, -7, dtype=np.int64)
    yield "extremes", rng.choice(np.array([I64.min, I64.min + 1, -1, 0, 1, I64.max - 1, I64.max]),
                                 50_000)
    yield "long", rng.integers(0, 10**9, 1_000_000)
    yield "heavy_tail", np.exp(rng.normal(10, 3, 300_000)).astype(np.int64)
    yield "small", rng.integers(-5, 5, 1000)


@pytest.mark.parametrize("name,x", list(_int_inputs()), ids=lambda v: v if isinstance(v, str) else "")
def test_totals_and_order_stats_match_numpy(name, x):
    t = _core.totals(x)
    s = _core.summary(x)
    assert t["count"] == len(x)
    assert t["sum"] == int(np.sum(x.astype(object)))   # exact, past int64
    assert t["min"] == int(x.min()) and t["max"] == int(x.max())
    assert t["mean"] == s["mean"]          # the same long double division
    n = len(x)
    ks = np.unique(np.r_[0, n - 1, (n - 1) // 2, n // 2, np.linspace(0, n - 1, 17).astype(np.int64)])
    ks = np.r_[ks[::-1], ks[:3]]           # any order, repeats allowed
    np.testing.assert_array_equal(_core.order_stats(x, ks), np.sort(x)[ks])
    before = x.copy()
    _core.order_stats(x, ks)
    np.testing.assert_array_equal(x, before)   # not modified


def test_totals_and_order_stats_edges():
    empty = _core.totals(np.zeros(0, np.int64))
    assert empty["count"] == 0 and empty["sum"] == 0 and math.isnan(empty["mean"])
    assert empty["min"] is None and empty["max"] is None
    assert len(_core.order_stats([5, 1, 3], np.zeros(0, np.int64))) == 0
    with pytest.raises(ValueError, match=r"k must be in \[0, len\(x\) - 1\]"):
        _core.order_stats(np.zeros(0, np.int64), [0])
    with pytest.raises(ValueError, match="got -1"):
        _core.order_stats([1, 2, 3], [-1])
    with pytest.raises(TypeError, match="k"):
        _core.order_stats([1, 2, 3], 1)


# --- report() on long runs: the numbers of the code before ----------------------


with open(longrun_cases.REFERENCE) as _f:
    _REFERENCE = json.load(_f)


@pytest.mark.parametrize("name,kind,kwargs", longrun_cases.CASES, ids=[c[0] for c in longrun_cases.CASES])
def test_report_matches_the_reference(name, kind, kwargs):
    """Every number, verdict and list of report() on 200k-step runs equals
    what the code before the long-run work gave (long lists by length and
    SHA-256 of their JSON text)."""
    got = json.loads(json.dumps(longrun_cases.report_of(kind, kwargs, _REFERENCE["steps"])))
    _same(got, _REFERENCE["cases"][name])


@pytest.mark.parametrize("name,workers,every", longrun_cases.LOADER_CASES,
                         ids=[c[0] for c in longrun_cases.LOADER_CASES])
def test_loader_report_matches_the_reference(name, workers, every):
    """The same for DataLoader-like sources (loader facts, delivery ranks
    and workers, attribution), through build() with explicit inputs."""
    got = json.loads(json.dumps(longrun_cases.loader_report_of(workers, every, _REFERENCE["steps"])))
    _same(got, _REFERENCE["cases"][name])


def _same(got, want):
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == want[key], key


@pytest.mark.parametrize("gaps", [
    np.tile(np.array([8, 8, 8, 16, 3], dtype=np.int64), 200_000),       # counted
    np.random.default_rng(5).integers(1, 2**40, 100_000),                 # sorted
    np.r_[np.ones(100_000, np.int64), [10**7]],                           # counted (span <= n)
    np.array([1], dtype=np.int64),
], ids=["periodic", "wide", "outlier", "one"])
def test_gap_histogram_long_matches_numpy(gaps):
    values, counts = _core.gap_histogram(gaps)
    want_v, want_c = np.unique(gaps, return_counts=True)
    np.testing.assert_array_equal(values, want_v)
    np.testing.assert_array_equal(counts, want_c)
    assert _core.modal_gap(gaps) == int(want_v[np.argmax(want_c)])


def test_views_reducers_and_long_reports_do_not_leak():
    from support import assert_no_growth, measure

    rec = traceml.Recorder()
    rec._append_records(_records(70_000))
    x = np.random.default_rng(2).integers(1, 10**9, 70_000)
    gaps = np.tile(np.array([3, 5], dtype=np.int64), 40_000)

    def scenario():
        v = rec.snapshot_view()
        rec._append_records(_records(10))      # the views hold old blocks
        rec.reset()
        rec._append_records(_records(70_000))
        del v
        _core.log_otsu(x)
        _core.order_stats(x, np.array([0, 5, 69_999]))
        _core.totals(x)
        _core.gap_histogram(gaps)
        _core.autocorr(x, 3)

    assert_no_growth(measure(scenario), "snapshot_view, long reducers")


def test_a_view_outlives_a_fork_and_the_childs_reset():
    import os

    rec = traceml.Recorder()
    rec._append_records(_records(5000))
    view = rec.snapshot_view()
    pid = os.fork()
    if pid == 0:   # the child: its store is cleared at the fork
        code = 1
        try:
            rec._append_records(_records(3000, start=-10**6))
            ok = (len(rec.snapshot_view()) == 3000
                  and int(view["begin_ns"][4999]) == 4999 and len(view) == 5000)
            code = 0 if ok else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    np.testing.assert_array_equal(view["begin_ns"], np.arange(5000))


# --- delivery evidence on long runs: the same as the plain algorithm ------------


def _ref_overtaking(ranks, epoch):
    """The algorithm as first written: renumber each epoch's known ranks
    with numpy.unique, sort the steps by epoch (stable), count."""
    known = ranks >= 0
    counted = ranks.astype(np.int64)
    for e in np.unique(epoch):
        sel = (epoch == e) & known
        if sel.any():
            counted[sel] = np.unique(ranks[sel], return_inverse=True)[1]
    order = np.argsort(epoch, kind="stable")
    return int(_core.overtaking(counted[order], epoch[order].astype(np.int64)).sum())


@pytest.mark.parametrize("layout", ["in_order", "interleaved", "partial", "one_epoch"])
def test_delivery_matches_the_plain_algorithm(layout):
    from traceml import evidence
    from traceml.wrapping import Source

    rng = np.random.default_rng(11)
    n = 60_000
    epoch = np.repeat(np.arange(6), n // 6).astype(np.int32)
    rank = np.concatenate([rng.permutation(n // 6) for _ in range(6)]).astype(np.int32)
    worker = (rank % 3).astype(np.int32)
    if layout == "interleaved":       # two iterators of one loader at once
        order = rng.permutation(n)
        epoch, rank, worker = epoch[order], rank[order], worker[order]
    elif layout == "partial":         # reset() mid-epoch: ranks 0..k missing
        rank = np.where(rank < 500, -1, rank).astype(np.int32)
        rank[::997] = -1
        worker[::1001] = -1
    elif layout == "one_epoch":
        epoch[:] = 0
        rank = rng.permutation(n).astype(np.int32)
    steps = np.zeros(n, dtype=_core.RECORD_DTYPE)
    steps["epoch"] = epoch
    facts = {"num_workers": 3, "in_order": False}    # workers: ranks as recorded
    src = Source(1, "dl", "DataLoader", loader=facts,
                 epoch_facts={e: {"loader": facts} for e in range(6)})
    got = evidence.delivery(steps, rank, worker, src)
    assert got["overtaking"] == _ref_overtaking(rank, epoch)
    assert got["known"] == int((rank >= 0).sum())
    # The Report's lists, made from the arrays on first use of .summary.
    from traceml.result import _join_delivery

    joined = {"delivery": {}}
    _join_delivery(joined, {"ranks": rank.astype(np.int64), "workers": worker.astype(np.int64)})
    assert joined["delivery"]["ranks"] == [int(r) if r >= 0 else None for r in rank]
    assert joined["delivery"]["workers"] == [int(w) if w >= 0 else None for w in worker]


def test_delivery_lists_are_made_on_first_use_only(tmp_path):
    """report() keeps a DataLoader's per-step delivery record as arrays;
    str(), the HTML and save() read them as they are, and the lists of
    to_dict() / report["delivery"] equal the arrays (None for -1), before
    and after a save/load round trip."""
    import traceml
    from traceml.build import build

    rec, sources, delivery = longrun_cases.loader_inputs(3, 4, 20_000)
    rep = build(rec, traceml.Recorder().store_info(), 1, None, sources=sources,
                delivery=delivery, samples=None, sampler_info=None, stuck_events=[],
                main_pid=1, batch_bytes=None)
    want_ranks = np.maximum(delivery[0], -1).astype(np.int64)
    want_workers = np.maximum(delivery[1], -1).astype(np.int64)
    assert (want_workers == -1).any()     # unknown workers: None in the lists
    str(rep), rep._repr_html_()
    back = traceml.load(rep.save(tmp_path / "run.traceml"))
    # Neither report made its lists yet.
    assert "ranks" not in rep._summary["delivery"] and "ranks" not in back._summary["delivery"]
    for r in (rep, back):
        np.testing.assert_array_equal(r.delivery_column("ranks"), want_ranks)
        np.testing.assert_array_equal(r.delivery_column("workers"), want_workers)
    lists = rep["delivery"]
    assert lists["ranks"] == [int(v) if v >= 0 else None for v in want_ranks]
    assert lists["workers"] == [int(v) if v >= 0 else None for v in want_workers]
    assert back == rep and back.to_dict() == rep.to_dict()
    # Saved again from the lists (a user may have edited them): the same run.
    again = traceml.load(rep.save(tmp_path / "again.traceml"))
    np.testing.assert_array_equal(again.delivery_column("workers"), want_workers)
    assert again == rep
    with pytest.raises(ValueError, match="key must be 'ranks' or 'workers'"):
        rep.delivery_column("pids")
