"""Bad input: every public function refuses wrong types and values with a
TypeError or ValueError that names the argument, nothing crashes, and what
was recorded before the bad call is still there and reportable.

Each test records some steps first (the ``recorded`` fixture), makes its bad
calls, and then checks that the store, ``traceml.report()["steps"]`` and the
probes' misuse counters are exactly as they were.
"""

import itertools
import json
import math
import os
import re
import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import traceml
from traceml import _core

_names = itertools.count()


def uname(tag="src"):
    return f"test_bad_input-{tag}-{next(_names)}"


class Recorded:
    """What was recorded before the bad calls, and the check that it is
    all still there."""

    def __init__(self):
        for _ in range(6):
            traceml.step_begin()
            traceml.fetch_done()
            traceml.step_end()
        self.name = uname("list")
        for _ in traceml.wrap([1, 2, 3, 4], name=self.name):
            pass
        self.snapshot = _core.default_recorder().snapshot().copy()
        self.info = _core.default_recorder().store_info()
        self.steps = traceml.report()["steps"]
        self.list_steps = traceml.report(source=self.name)["steps"]
        self.settings = traceml.configure()
        assert self.steps == 6 and self.list_steps == 4

    def check(self):
        np.testing.assert_array_equal(_core.default_recorder().snapshot(), self.snapshot)
        info = _core.default_recorder().store_info()
        for key in ("steps", "dropped_steps", "out_of_memory", "misuse",
                    "probe_step_open", "generation"):
            assert info[key] == self.info[key], key
        assert traceml.report()["steps"] == self.steps
        assert traceml.report(source=self.name)["steps"] == self.list_steps
        assert traceml.configure() == self.settings
        str(traceml.report())


@pytest.fixture
def recorded():
    rec = Recorded()
    yield rec
    rec.check()


@pytest.fixture
def scratch(recorded):
    """A fresh recorder as the default for the test's own steps: what the
    ``recorded`` fixture recorded is untouched by construction."""
    with traceml.Recorder() as rec:
        yield rec


def names_argument(exc, arg):
    """The message names the argument as a word of its own."""
    return re.search(rf"(?<!\w){re.escape(arg)}(?!\w)", str(exc)) is not None


# --------------------------------------------------------------------------
# argument checks that name the argument


def _report_obj():
    """A Report of what the fixture recorded (reading changes nothing)."""
    return traceml.report()


# (id, call, expected exception types, word the message must contain)
# `call` takes the tmp_path, so file cases get a place of their own.
GOOD_MESSAGES = [
    # wrap
    ("wrap-int", lambda p: traceml.wrap(5), TypeError, "iterable"),
    ("wrap-None", lambda p: traceml.wrap(None), TypeError, "iterable"),
    ("wrap-name-int", lambda p: traceml.wrap([1], name=5), TypeError, "name"),
    ("wrap-name-bytes", lambda p: traceml.wrap([1], name=b"x"), TypeError, "name"),
    ("wrap-name-probes", lambda p: traceml.wrap([1], name="probes"), ValueError, "probes"),
    ("wrap-name-empty", lambda p: traceml.wrap([1], name=""), ValueError, "name must be non-blank"),
    ("wrap-name-blank", lambda p: traceml.wrap([1], name="  "), ValueError, "name must be non-blank"),
    ("wrap-name-newline", lambda p: traceml.wrap([1], name="a\nb"), ValueError, "printable"),
    ("wrap-positional-name", lambda p: traceml.wrap([1], "x"), TypeError, "wrap"),
    # report
    ("report-str", lambda p: traceml.report("5"), TypeError, "stall_threshold_s"),
    ("report-bool", lambda p: traceml.report(True), TypeError, "stall_threshold_s"),
    ("report-list", lambda p: traceml.report([1]), TypeError, "stall_threshold_s"),
    ("report-negative", lambda p: traceml.report(-1), ValueError, "stall_threshold_s"),
    ("report-nan", lambda p: traceml.report(math.nan), ValueError, "stall_threshold_s"),
    ("report-inf", lambda p: traceml.report(math.inf), ValueError, "stall_threshold_s"),
    ("report-huge", lambda p: traceml.report(1e10), ValueError, "stall_threshold_s must be at most"),
    ("report-source-unknown", lambda p: traceml.report(source="no such"), ValueError, "source"),
    ("report-source-id", lambda p: traceml.report(source=10**9), ValueError, "source"),
    ("report-source-list", lambda p: traceml.report(source=[1]), TypeError, "source must be"),
    ("report-source-bytes", lambda p: traceml.report(source=b"x"), TypeError, "source must be"),
    ("report-source-bool", lambda p: traceml.report(source=True), TypeError, "source must be"),
    ("report-extra-positional", lambda p: traceml.report(1, 2), TypeError, "report"),
    # reset and the probes take no arguments
    ("reset-arg", lambda p: traceml.reset(1), TypeError, "reset"),
    ("clock_ns-arg", lambda p: traceml.clock_ns(1), TypeError, "clock_ns"),
    ("clock_ns-kw", lambda p: traceml.clock_ns(x=1), TypeError, "clock_ns"),
    ("step_begin-arg", lambda p: traceml.step_begin(None), TypeError, "step_begin"),
    ("step_begin-kw", lambda p: traceml.step_begin(x=1), TypeError, "step_begin"),
    ("fetch_done-arg", lambda p: traceml.fetch_done(1, 2), TypeError, "fetch_done"),
    ("fetch_done-kw", lambda p: traceml.fetch_done(x=1), TypeError, "fetch_done"),
    ("step_end-arg", lambda p: traceml.step_end("x"), TypeError, "step_end"),
    ("step_end-kw", lambda p: traceml.step_end(x=1), TypeError, "step_end"),
    ("abandon_step-arg", lambda p: traceml.abandon_step(0), TypeError, "abandon_step"),
    # sweep: all refused before anything runs
    ("sweep-not-callable", lambda p: traceml.sweep(5), TypeError, "make_loader"),
    ("sweep-steps-1", lambda p: traceml.sweep(list, steps=1), ValueError, "steps"),
    ("sweep-steps-float", lambda p: traceml.sweep(list, steps=2.5), TypeError, "steps"),
    ("sweep-steps-str", lambda p: traceml.sweep(list, steps="4"), TypeError, "steps"),
    ("sweep-passes-0", lambda p: traceml.sweep(list, passes=0), ValueError, "passes"),
    ("sweep-pace-negative", lambda p: traceml.sweep(list, consumer_pace_s=-1), ValueError,
     "consumer_pace_s"),
    ("sweep-pace-nan", lambda p: traceml.sweep(list, consumer_pace_s=math.nan), ValueError,
     "consumer_pace_s"),
    ("sweep-threshold-str", lambda p: traceml.sweep(list, stall_threshold_s="1"), TypeError,
     "stall_threshold_s"),
    ("sweep-workers-empty", lambda p: traceml.sweep(list, num_workers=()), ValueError,
     "num_workers"),
    ("sweep-workers-negative", lambda p: traceml.sweep(list, num_workers=(2, -1)), ValueError,
     "num_workers"),
    ("sweep-workers-float", lambda p: traceml.sweep(list, num_workers=(1.5,)), TypeError,
     "num_workers"),
    ("sweep-axis-empty", lambda p: traceml.sweep(list, in_order=()), ValueError, "in_order"),
    ("sweep-workers-repeated", lambda p: traceml.sweep(list, num_workers=(0, 2, 0)), ValueError,
     "sweep(): num_workers repeats 0; use passes="),
    # compare
    ("compare-nothing", lambda p: traceml.compare(), ValueError, "run"),
    ("compare-int", lambda p: traceml.compare(5), TypeError, "runs[0]"),
    ("compare-second-bad", lambda p: traceml.compare(_report_obj(), {}), TypeError, "runs[1]"),
    ("compare-labels-length", lambda p: traceml.compare(_report_obj(), labels=["a", "b"]),
     ValueError, "labels"),
    ("compare-missing-file", lambda p: traceml.compare(str(p / "missing.traceml")),
     FileNotFoundError, "missing.traceml"),
    # load
    ("load-missing", lambda p: traceml.load(p / "missing.traceml"), FileNotFoundError,
     "missing.traceml"),
    ("load-directory", lambda p: traceml.load(p), ValueError, "not a readable"),
    ("load-not-zip", lambda p: traceml.load(_write(p / "text.traceml", b"hello")), ValueError,
     "text.traceml"),
    ("load-empty", lambda p: traceml.load(_write(p / "empty.traceml", b"")), ValueError,
     "empty.traceml"),
    ("load-zip-no-summary", lambda p: traceml.load(_zip(p / "nosum.traceml", {"a": b"1"})),
     ValueError, "nosum.traceml"),
    ("load-bad-json", lambda p: traceml.load(_zip(p / "json.traceml", {"summary.json": b"{"})),
     ValueError, "json.traceml"),
    ("load-wrong-format",
     lambda p: traceml.load(_zip(p / "fmt.traceml", {"summary.json": b'{"format": "x"}'})),
     ValueError, "fmt.traceml"),
    ("load-wrong-version", lambda p: traceml.load(_zip(p / "ver.traceml", {
        "summary.json": b'{"format": "traceml-run", "format_version": 99}'})),
     ValueError, "ver.traceml"),
    ("load-array-missing", lambda p: traceml.load(_damaged(p, "nobegin", drop="begin_ns.npy")),
     ValueError, "begin_ns"),
    ("load-array-garbage", lambda p: traceml.load(_damaged(p, "garbage", replace={
        "end_ns.npy": b"\x93NUMPY garbage"})), ValueError, "end_ns"),
    ("load-array-pickled", lambda p: traceml.load(_damaged(p, "pickled", replace={
        "flags.npy": _npy(np.array([{"a": 1}], dtype=object))})), ValueError, "flags"),
    ("load-array-short", lambda p: traceml.load(_damaged(p, "short", replace={
        "epoch.npy": _npy(np.zeros(0, np.int32))})), ValueError, "epoch"),
    ("load-steps-None", lambda p: traceml.load(_damaged(p, "stepsnone", steps=None)),
     ValueError, "stepsnone.traceml"),
    # configure
    ("configure-sampler-int", lambda p: traceml.configure(sampler=1), TypeError, "sampler"),
    ("configure-period-str", lambda p: traceml.configure(sampler_period_s="1"), TypeError,
     "sampler_period_s"),
    ("configure-period-bool", lambda p: traceml.configure(sampler_period_s=True), TypeError,
     "sampler_period_s"),
    ("configure-period-small", lambda p: traceml.configure(sampler_period_s=1e-4), ValueError,
     "sampler_period_s"),
    ("configure-period-nan", lambda p: traceml.configure(sampler_period_s=math.nan), ValueError,
     "sampler_period_s"),
    ("configure-stuck-negative", lambda p: traceml.configure(stuck_after_s=-1), ValueError,
     "stuck_after_s"),
    ("configure-stuck-inf", lambda p: traceml.configure(stuck_after_s=math.inf), ValueError,
     "stuck_after_s"),
    ("configure-memory-negative", lambda p: traceml.configure(memory_period_s=-1), ValueError,
     "memory_period_s"),
    ("configure-memory-str", lambda p: traceml.configure(memory_period_s="1"), TypeError,
     "memory_period_s"),
    ("configure-capacity-float", lambda p: traceml.configure(sampler_capacity=100.0), TypeError,
     "sampler_capacity"),
    ("configure-capacity-bool", lambda p: traceml.configure(sampler_capacity=True), TypeError,
     "sampler_capacity"),
    ("configure-capacity-small", lambda p: traceml.configure(sampler_capacity=15), ValueError,
     "sampler_capacity"),
    ("configure-positional", lambda p: traceml.configure(True), TypeError, "configure"),
    ("configure-unknown", lambda p: traceml.configure(period=1), TypeError, "period"),
    # Report.save
    ("save-missing-dir", lambda p: _report_obj().save(p / "no" / "such" / "dir.traceml"),
     FileNotFoundError, "dir.traceml"),
    ("save-directory", lambda p: _report_obj().save(p), IsADirectoryError,
     "Report.save(): cannot write"),
]


def _write(path, data):
    path.write_bytes(data)
    return path


def _zip(path, members):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def _npy(arr):
    import io

    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=True)
    return buf.getvalue()


def _damaged(tmp_path, tag, drop=None, replace=None, steps="keep"):
    """A saved run with one member dropped or replaced, or a bad step count."""
    good = tmp_path / f"{tag}-good.traceml"
    _report_obj().save(good)
    with zipfile.ZipFile(good) as z:
        members = {n: z.read(n) for n in z.namelist()}
    if drop:
        del members[drop]
    members.update(replace or {})
    if steps != "keep":
        header = json.loads(members["summary.json"])
        header["summary"]["steps"] = steps
        members["summary.json"] = json.dumps(header).encode()
    return _zip(tmp_path / f"{tag}.traceml", members)


@pytest.mark.parametrize("case", GOOD_MESSAGES, ids=[c[0] for c in GOOD_MESSAGES])
def test_bad_call_raises_a_clear_error_and_keeps_the_record(case, recorded, tmp_path):
    _, call, exc_type, word = case
    with pytest.raises(exc_type) as info:
        call(tmp_path)
    if word:
        assert word in str(info.value), str(info.value)


# Calls whose error does not name the argument (or is not a TypeError /
# ValueError).  Each is a bug report: see its reason.
SWEEP_WHY = ("sweep() converts consumer_pace_s with float() and each axis with "
             "tuple() unchecked (traceml/sweeping.py): the error does not name it")
CONFIGURE_WHY = ("configure() checks the range in seconds, then int(seconds * 1e9) "
                 "and _sampler_config's 'L'/'n' converters raise OverflowError "
                 "without the name for huge finite values (traceml/wrapping.py)")
PATH_WHY = ("load()/Report.save() hand path to os.fspath() unchecked "
            "(traceml/io.py): 'expected str, bytes or os.PathLike object'")
STEPS_WHY = ("load() calls np.zeros(int(summary['steps'])) before checking the "
             "count against the arrays (traceml/io.py): a ValueError without the "
             "file name, or MemoryError for 10**12; check it is an int in "
             "[0, len(begin_ns.npy)] first")


def _bad(id_, call, word, why):
    """A bad call whose error once failed to name its argument (``why``
    says how); kept as a regression test."""
    return pytest.param(call, word, id=id_)


BAD_MESSAGES = [
    _bad("sweep-pace-str", lambda p: traceml.sweep(list, consumer_pace_s="x"),
         "consumer_pace_s", SWEEP_WHY),
    _bad("sweep-step-fn-int", lambda p: traceml.sweep(list, step_fn=5), "step_fn", SWEEP_WHY),
    _bad("sweep-pace-and-step-fn",
         lambda p: traceml.sweep(list, consumer_pace_s=0.01, step_fn=print),
         "consumer_pace_s", SWEEP_WHY),
    _bad("sweep-workers-int", lambda p: traceml.sweep(list, num_workers=4),
         "num_workers", SWEEP_WHY),
    _bad("sweep-axis-not-iterable", lambda p: traceml.sweep(list, in_order=True),
         "in_order", SWEEP_WHY),
    _bad("compare-labels-int", lambda p: traceml.compare(_report_obj(), labels=5), "labels",
         "compare() calls list(labels) unchecked (traceml/comparing.py)"),
    _bad("configure-period-huge", lambda p: traceml.configure(sampler_period_s=1e300),
         "sampler_period_s", CONFIGURE_WHY),
    _bad("configure-stuck-huge", lambda p: traceml.configure(stuck_after_s=1e12),
         "stuck_after_s", CONFIGURE_WHY),
    _bad("configure-capacity-huge", lambda p: traceml.configure(sampler_capacity=2**63),
         "sampler_capacity", CONFIGURE_WHY),
    _bad("load-None", lambda p: traceml.load(None), "path", PATH_WHY),
    _bad("load-int", lambda p: traceml.load(5), "path", PATH_WHY),
    _bad("save-None", lambda p: _report_obj().save(None), "path", PATH_WHY),
    _bad("load-steps-negative", lambda p: traceml.load(_damaged(p, "neg", steps=-1)),
         "neg.traceml", STEPS_WHY),
    _bad("load-steps-str", lambda p: traceml.load(_damaged(p, "str", steps="many")),
         "str.traceml", STEPS_WHY),
    _bad("load-steps-huge", lambda p: traceml.load(_damaged(p, "huge", steps=10**12)),
         "huge.traceml", STEPS_WHY),
]


@pytest.mark.parametrize("call,word", BAD_MESSAGES)
def test_bad_call_error_names_the_argument(call, word, recorded, tmp_path):
    with pytest.raises((TypeError, ValueError)) as info:
        call(tmp_path)
    assert word in str(info.value), str(info.value)


# --------------------------------------------------------------------------
# the reducers of traceml._core


MASK = np.array([True, False, True, True])
REDUCER_CASES = [
    # (function, args, kwargs, exception, argument named)
    ("summary", (None,), {}, TypeError, "x"),
    ("summary", ("123",), {}, TypeError, "x"),
    ("summary", (b"123",), {}, TypeError, "x"),
    ("summary", ({1: 2},), {}, TypeError, "x"),
    ("summary", (5,), {}, TypeError, "x"),
    ("summary", ([1.5, 2.0],), {}, TypeError, "x"),
    ("summary", (["a", "b"],), {}, TypeError, "x"),
    ("summary", ([1, None],), {}, TypeError, "x"),
    ("summary", ([[1, 2], [3]],), {}, TypeError, "x"),
    ("summary", ([[1, 2], [3, 4]],), {}, ValueError, "x"),
    ("summary", (np.zeros((2, 2), np.int64),), {}, ValueError, "x"),
    ("summary", (np.array(5),), {}, ValueError, "x"),
    ("summary", ([2**63],), {}, TypeError, "x"),
    ("summary", ([2**64],), {}, TypeError, "x"),
    ("summary", ([-(2**63) - 1],), {}, TypeError, "x"),
    ("summary", (np.array([1, 2], np.uint64),), {}, TypeError, "x"),
    ("summary", (np.array([1, 2], np.float32),), {}, TypeError, "x"),
    ("summary", (np.array([1 + 2j]),), {}, TypeError, "x"),
    ("summary", (np.array(["2020-01-01"], "datetime64[D]"),), {}, TypeError, "x"),
    ("summary", (np.array([1], "timedelta64[ns]"),), {}, TypeError, "x"),
    ("summary", (np.array([1], dtype=object),), {}, TypeError, "x"),
    ("percentiles", ([1, 2], 101), {}, ValueError, "q"),
    ("percentiles", ([1, 2], -0.5), {}, ValueError, "q"),
    ("percentiles", ([1, 2], math.nan), {}, ValueError, "q"),
    ("percentiles", ([1, 2], [50, math.inf]), {}, ValueError, "q"),
    ("percentiles", ([1, 2], None), {}, ValueError, "q"),
    ("percentiles", ([1, 2], "fifty"), {}, TypeError, "q"),
    ("percentiles", ([1, 2], [[50]]), {}, TypeError, "q"),
    ("percentiles", ([1, 2], object()), {}, TypeError, "q"),
    ("percentiles", ([1.5], 50), {}, TypeError, "x"),
    ("percentiles", (None, 50), {}, TypeError, "x"),
    ("percentiles", ([1, 2],), {}, TypeError, "percentiles"),
    ("percentiles", ([1, 2], 50, 50), {}, TypeError, "percentiles"),
    ("stall_mask", ([1, 2], 1.5), {}, TypeError, "threshold_ns"),
    ("stall_mask", ([1, 2], True), {}, TypeError, "threshold_ns"),
    ("stall_mask", ([1, 2], None), {}, TypeError, "threshold_ns"),
    ("stall_mask", ([1, 2], "5"), {}, TypeError, "threshold_ns"),
    ("stall_mask", ([1, 2], 2**70), {}, OverflowError, "threshold_ns"),
    ("stall_mask", ([1.0, 2.0], 1), {}, TypeError, "wait_ns"),
    ("stall_mask", ("ab", 1), {}, TypeError, "wait_ns"),
    ("stall_mask", ([1, 2],), {}, TypeError, "stall_mask"),
    ("stall_gaps", ([1, 0, 1],), {}, TypeError, "mask"),
    ("stall_gaps", (np.array([[True]]),), {}, TypeError, "mask"),
    ("stall_gaps", (None,), {}, TypeError, "mask"),
    ("stall_gaps", (MASK, [0, 0]), {}, ValueError, "epoch"),
    ("stall_gaps", (MASK, "abcd"), {}, TypeError, "epoch"),
    ("stall_gaps", (MASK, [0.0, 0.0, 1.0, 1.0]), {}, TypeError, "epoch"),
    ("stall_gaps", (MASK,), {"epochs": [0, 0, 0, 0]}, TypeError, "epochs"),
    ("stall_gaps", (), {}, TypeError, "mask"),
    ("gap_histogram", ([0],), {}, ValueError, "gaps"),
    ("gap_histogram", ([3, -2],), {}, ValueError, "gaps"),
    ("gap_histogram", ("3",), {}, TypeError, "gaps"),
    ("gap_histogram", ([1.5],), {}, TypeError, "gaps"),
    ("modal_gap", ([0],), {}, ValueError, "gaps"),
    ("modal_gap", (None,), {}, TypeError, "gaps"),
    ("modal_gap", ([[1]],), {}, ValueError, "gaps"),
    ("cadence_match", ([1, 2], 0), {}, ValueError, "num_workers"),
    ("cadence_match", ([1, 2], -4), {}, ValueError, "num_workers"),
    ("cadence_match", ([1, 2], 1.5), {}, TypeError, "num_workers"),
    ("cadence_match", ([1, 2], True), {}, TypeError, "num_workers"),
    ("cadence_match", ([1, 2], None), {}, TypeError, "num_workers"),
    ("cadence_match", ([0, 2], 2), {}, ValueError, "gaps"),
    ("cadence_match", ("ab", 2), {}, TypeError, "gaps"),
    ("cadence_match", ([1, 2],), {}, TypeError, "cadence_match"),
    ("autocorr", ([1, 2, 3], 0), {}, ValueError, "lag"),
    ("autocorr", ([1, 2, 3], -1), {}, ValueError, "lag"),
    ("autocorr", ([1, 2, 3], 1.0), {}, TypeError, "lag"),
    ("autocorr", ([1, 2, 3], 2**64), {}, OverflowError, "lag"),
    ("autocorr", (None, 1), {}, TypeError, "x"),
    ("autocorr", ([1.5, 2.5], 1), {}, TypeError, "x"),
    ("overtaking", ("abc",), {}, TypeError, "ranks"),
    ("overtaking", ([1.5],), {}, TypeError, "ranks"),
    ("overtaking", (np.zeros((2, 2), np.int64),), {}, ValueError, "ranks"),
    ("overtaking", ([1, 2], [0]), {}, ValueError, "epoch"),
    ("overtaking", ([1, 2], "ab"), {}, TypeError, "epoch"),
    ("overtaking", ([1, 2],), {"epochs": [0, 0]}, TypeError, "epochs"),
    ("log_otsu", (None,), {}, TypeError, "x"),
    ("log_otsu", ([[1, 2]],), {}, ValueError, "x"),
    ("log_otsu", ([1.0, 2.0],), {}, TypeError, "x"),
    ("log_otsu", (), {}, TypeError, "log_otsu"),
]


@pytest.mark.parametrize(
    "func,args,kwargs,exc,arg", REDUCER_CASES,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(REDUCER_CASES)])
def test_reducer_refuses_bad_input_naming_the_argument(func, args, kwargs, exc, arg, recorded):
    with pytest.raises(exc) as info:
        getattr(_core, func)(*args, **kwargs)
    assert names_argument(info.value, arg), str(info.value)


@pytest.mark.parametrize("func,arg", [("summary", "x"), ("log_otsu", "x"),
                                      ("gap_histogram", "gaps"), ("modal_gap", "gaps")])
def test_unary_reducers_refuse_unknown_keyword_and_missing_arguments(func, arg, recorded):
    """One parser serves every reducer: an argument comes by position or by
    its documented name, and nothing else is taken."""
    f = getattr(_core, func)
    with pytest.raises(TypeError, match=f"missing required argument '{arg}'"):
        f()
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        f(nope=[1])
    with pytest.raises(TypeError, match="at most 1 arguments"):
        f([1], [1])
    with pytest.raises(TypeError, match="multiple values"):
        f([1], **{arg: [1]})
    assert repr(f(**{arg: [1, 2, 2]})) == repr(f([1, 2, 2]))


def test_reducers_accept_any_integer_layout(recorded):
    """Byte-swapped, strided, read-only, unaligned and narrow integer
    arrays are read right, not refused or misread."""
    base = np.array([4, 0, 3, 1, 2], dtype=np.int64)
    swapped = base.astype(">i8")
    strided = np.repeat(base, 2)[::2]
    reversed_ = base[::-1].copy()[::-1]
    readonly = base.copy()
    readonly.setflags(write=False)
    raw = np.zeros(base.nbytes + 1, np.uint8)
    unaligned = raw[1:].view(np.int64)
    unaligned[:] = base
    otsu = _core.log_otsu(base)
    for arr in (base, swapped, strided, reversed_, readonly, unaligned, base.astype(np.int8),
                base.astype(np.uint32), base.astype(np.int16), base.astype(bool) * base,
                list(base), tuple(int(v) for v in base)):
        s = _core.summary(arr)
        assert (s["count"], s["sum"], s["min"], s["max"]) == (5, 10, 0, 4)
        assert _core.percentiles(arr, 50) == 2.0
        assert _core.stall_mask(arr, 2).tolist() == [True, False, True, False, False]
        assert _core.overtaking(arr).tolist() == [True, False, True, False, False]
        assert _core.log_otsu(arr) == otsu
    assert _core.stall_gaps(np.array([True, False, True])[::-1].copy()).tolist() == [2]
    assert _core.stall_gaps(np.array([True, False, False, True, True, False])[::2]).tolist() \
        == [2]


def test_reducers_on_empty_input(recorded):
    for empty in ([], (), np.zeros(0, np.float64), np.zeros(0, np.int64), np.array([], dtype=object)):
        assert _core.summary(empty)["count"] == 0
        assert math.isnan(_core.percentiles(empty, 50))
        assert _core.stall_mask(empty, 0).shape == (0,)
        assert _core.stall_gaps(empty).shape == (0,)
        assert _core.modal_gap(empty) is None
        assert _core.cadence_match(empty, 2)["modal_gap"] is None
        assert math.isnan(_core.autocorr(empty, 1))
        assert _core.overtaking(empty).shape == (0,)
        assert math.isnan(_core.log_otsu(empty)["eta"])


def test_reducers_on_extreme_values(recorded):
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    x = np.array([lo, hi, 0, hi, lo], dtype=np.int64)
    s = _core.summary(x)
    assert s["sum"] == int(lo) * 2 + int(hi) * 2
    assert (s["min"], s["max"]) == (lo, hi)
    np.testing.assert_array_equal(_core.percentiles(x, [0, 50, 100]),
                                  np.percentile(x, [0, 50, 100]))
    assert _core.stall_mask(x, hi).tolist() == [False] * 5
    assert _core.stall_mask(x, lo).tolist() == [False, True, True, True, False]
    assert -1.0 <= _core.autocorr(x, 1) <= 1.0
    assert _core.autocorr(x, 2**62) != _core.autocorr(x, 2**62)  # NaN
    assert _core.log_otsu(x)["upper_count"] == 2
    big = np.full(10_000, hi, dtype=np.int64)
    big[::7] = lo
    np.testing.assert_allclose(_core.percentiles(big, [1, 50, 99]),
                               np.percentile(big, [1, 50, 99]), rtol=1e-15)


def test_overtaking_with_a_huge_rank_needs_no_huge_memory(recorded):
    ranks = np.array([2**62, 0, 1], dtype=np.int64)
    assert _core.overtaking(ranks).tolist() == [True, False, False]


# --------------------------------------------------------------------------
# arbitrary objects into the reducers: an answer or TypeError/ValueError


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.complex_numbers(),
    st.text(max_size=4), st.binary(max_size=4),
    st.sampled_from([object(), Ellipsis, NotImplemented, int, "50", b"\x00", range(3)]),
)
arrays = hnp.arrays(
    dtype=st.one_of(hnp.scalar_dtypes(), hnp.byte_string_dtypes(max_len=3),
                    hnp.unicode_string_dtypes(max_len=3)),
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5),
)
int_arrays = hnp.arrays(
    dtype=hnp.integer_dtypes(endianness="="), shape=st.integers(0, 40),
)
anything = st.one_of(
    scalars,
    arrays,
    int_arrays,
    st.lists(st.integers(), max_size=20),
    st.lists(scalars, max_size=6),
    st.lists(st.lists(st.integers(-3, 3), max_size=3), max_size=3),
    st.tuples(st.integers(), st.floats()),
    st.dictionaries(st.integers(), st.integers(), max_size=3),
    st.frozensets(st.integers(), max_size=3),
)

REDUCERS = {
    "summary": 1, "log_otsu": 1, "gap_histogram": 1, "modal_gap": 1,
    "percentiles": 2, "stall_mask": 2, "cadence_match": 2, "autocorr": 2,
    "stall_gaps": 2, "overtaking": 2,
}
ACCEPTABLE = (TypeError, ValueError, OverflowError)


@pytest.mark.slow
@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(func=st.sampled_from(sorted(REDUCERS)), a=anything, b=anything)
def test_reducers_never_crash_on_arbitrary_objects(func, a, b, recorded):
    f = getattr(_core, func)
    args = (a,) if REDUCERS[func] == 1 else (a, b)
    try:
        f(*args)
    except ACCEPTABLE as exc:
        assert str(exc)
    if REDUCERS[func] == 2:
        try:
            f(a)
        except ACCEPTABLE:
            pass


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kwargs=st.dictionaries(
    st.sampled_from(["sampler", "sampler_period_s", "stuck_after_s", "sampler_capacity"]),
    scalars, max_size=3))
def test_configure_with_arbitrary_values_refuses_or_applies(kwargs, recorded):
    before = traceml.configure()
    try:
        now = traceml.configure(**kwargs)
    except ACCEPTABLE:
        assert traceml.configure() == before   # nothing half-applied
        return
    try:
        for key, value in kwargs.items():
            if value is None:
                continue
            if key.endswith("_s"):
                # Settings in seconds are held in whole nanoseconds.
                assert now[key] == pytest.approx(value, rel=1e-12, abs=0.5e-9)
            else:
                assert now[key] == value
    finally:
        traceml.configure(**before)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(threshold=scalars, source=scalars)
def test_report_with_arbitrary_arguments_refuses_or_reports(threshold, source, recorded):
    try:
        rep = traceml.report(threshold, source=source)
    except ACCEPTABLE:
        return
    assert rep["steps"] in (recorded.steps, recorded.list_steps, 0)
    str(rep)
    rep.to_dict()


# --------------------------------------------------------------------------
# the probes: a refused call changes nothing, even with a step open


def test_refused_probe_calls_leave_an_open_step_alone(scratch):
    traceml.step_begin()
    before = _core.default_recorder().store_info()
    for probe in (traceml.step_begin, traceml.fetch_done, traceml.step_end):
        for args, kwargs in (((1,), {}), ((None, None), {}), ((), {"x": 1})):
            with pytest.raises(TypeError):
                probe(*args, **kwargs)
    assert _core.default_recorder().store_info() == before
    traceml.fetch_done()
    traceml.step_end()
    info = _core.default_recorder().store_info()
    assert info["steps"] == before["steps"] + 1
    assert info["misuse"] == before["misuse"]
    # Back to what the fixture recorded, plus this one step.


# --------------------------------------------------------------------------
# WrapIter: direct construction, and hostile inner iterators


# Arguments after the iterator's: the default recorder is put in second.
WRAPITER_BAD = [
    ((5, 1, 0, 0), TypeError, "iterator"),
    (([1, 2], 1, 0, 0), TypeError, "iterator"),
    ((iter([1]), 0, 0, 0), ValueError, "source"),
    ((iter([1]), 65536, 0, 0), ValueError, "source"),
    ((iter([1]), 1, -1, 0), ValueError, "epoch"),
    ((iter([1]), "1", 0, 0), TypeError, None),
    ((iter([1]), 1, 0, "0"), TypeError, None),
    ((iter([1]), 1, 0, 0.5), TypeError, None),
    ((iter([1]), 2**40, 0, 0), OverflowError, None),
    ((iter([1]),), TypeError, None),
]


@pytest.mark.parametrize("args,exc,word", WRAPITER_BAD)
def test_wrapiter_refuses_bad_construction(args, exc, word, recorded):
    args = (args[0], _core.default_recorder(), *args[1:])
    with pytest.raises(exc) as info:
        _core.WrapIter(*args)
    if word:
        assert names_argument(info.value, word), str(info.value)


@pytest.mark.parametrize("kwargs,exc,word", [
    ({"recorder": None}, TypeError, "recorder"),
    ({"recorder": object()}, TypeError, "recorder"),
    ({"watch": 5}, TypeError, "watch"),
    ({"watch": [0]}, ValueError, "PID"),
    ({"watch": ["x"]}, TypeError, None),
    ({"on_raise": 5}, TypeError, "on_raise"),
])
def test_wrapiter_refuses_a_bad_recorder_or_watch(kwargs, exc, word, recorded):
    args = {"iterator": iter([1]), "recorder": _core.default_recorder(), "source": 1,
            "epoch": 0, "epoch_begin_ns": 0, **kwargs}
    with pytest.raises(exc) as info:
        _core.WrapIter(**args)
    if word:
        assert word in str(info.value), str(info.value)


def _source_id(name):
    """(recorder, source id) of a new source named name."""
    w = traceml.wrap([], name=name)
    return w.recorder, w.source


def test_an_on_raise_hook_that_fails_leaves_the_exception_unchanged(scratch, monkeypatch):
    # The hook sees the loop's first exception once; its own failure is
    # reported as unraisable, and the loop's exception passes on as it was.
    err = ValueError("the loop's")
    seen = []

    def inner():
        yield 1
        raise err

    def hook(exc, delivered, waited_ns):
        seen.append((exc, delivered))
        assert waited_ns >= 0
        raise RuntimeError("the hook's")

    it = _core.WrapIter(inner(), *_source_id(uname("hook")), 0, traceml.clock_ns(),
                        on_raise=hook)
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: unraisable.append(u.exc_value))
    assert next(it) == 1
    with pytest.raises(ValueError) as info:
        next(it)
    assert info.value is err and info.traceback[-1].name == "inner"
    assert seen == [(err, 1)]
    assert [str(e) for e in unraisable] == ["the hook's"]


def test_inner_next_that_reenters_the_wrapper_does_not_crash(recorded):
    class Reentrant:
        outer = None

        def __iter__(self):
            return self

        def __next__(self):
            return next(self.outer)

    inner = Reentrant()
    it = _core.WrapIter(inner, *_source_id(uname("reenter")), 0, traceml.clock_ns())
    inner.outer = it
    # Each level is a C frame too: keep the depth modest (sanitizer builds
    # have large C frames).
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + 200)
    try:
        with pytest.raises(RecursionError):
            next(it)
    finally:
        sys.setrecursionlimit(limit)
    it.close()
    del inner.outer


def test_inner_next_that_reenters_once_does_not_crash(scratch):
    class ReentrantOnce:
        outer = None
        depth = 0
        n = 0

        def __iter__(self):
            return self

        def __next__(self):
            self.n += 1
            if self.n > 6:
                raise StopIteration
            if self.depth == 0:
                self.depth += 1
                try:
                    next(self.outer)
                except StopIteration:
                    pass
                finally:
                    self.depth -= 1
            return self.n

    inner = ReentrantOnce()
    name = uname("reenter-once")
    it = _core.WrapIter(inner, *_source_id(name), 0, traceml.clock_ns())
    inner.outer = it
    items = list(it)
    assert items and all(isinstance(i, int) for i in items)
    del inner.outer
    rep = traceml.report(source=name)
    assert 1 <= rep["steps"] <= 6


def test_inner_next_that_closes_or_resets_does_not_crash(scratch):
    class Closer:
        outer = None
        n = 0

        def __iter__(self):
            return self

        def __next__(self):
            self.n += 1
            if self.n == 3:
                self.outer.close()
            if self.n > 5:
                raise StopIteration
            return self.n

    inner = Closer()
    it = _core.WrapIter(inner, *_source_id(uname("closer")), 0, traceml.clock_ns())
    inner.outer = it
    got = list(it)
    assert got[:3] == [1, 2, 3]
    assert it.inner is None
    del inner.outer
    with pytest.raises(StopIteration):
        next(it)


def test_inner_next_that_resets_the_record_does_not_crash():
    class Resetter:
        n = 0

        def __iter__(self):
            return self

        def __next__(self):
            self.n += 1
            if self.n == 3:
                traceml.reset()
            if self.n > 5:
                raise StopIteration
            return self.n

    for _ in range(4):
        traceml.step_begin()
        traceml.step_end()
    name = uname("resetter")
    for _ in traceml.wrap(Resetter(), name=name):
        pass
    # The reset inside the third fetch discarded everything before it,
    # the step whose fetch ran it included (it began before the reset, as
    # test_wrap's reset tests require of every kept step); the steps of
    # the two batches fetched after it were recorded.
    assert traceml.report(source=name)["steps"] == 2
    assert traceml.report(source="probes")["steps"] == 0


class _Tasks:
    """An iterator whose `_task_info` is whatever the test sets."""

    def __init__(self, infos):
        self.infos = list(infos)
        self._task_info = {}

    def __iter__(self):
        return self

    def __next__(self):
        if not self.infos:
            raise StopIteration
        self._task_info = self.infos.pop(0)
        return len(self.infos)


@pytest.mark.parametrize("infos", [
    [{0: (0,), 1: (1,)}, {1: (1,)}, {}],                    # the real shape
    [{0: (0,)}, None, {}],                                  # not a dict
    [{"a": (0,)}, {}],                                      # key not an int
    [{0: 0}, {}],                                           # value not a tuple
    [{0: ()}, {}],                                          # empty tuple
    [{0: ("w",)}, {}],                                      # worker not an int
    [{2**70: (0,)}, {}],                                    # rank beyond int64
    [{0: (2**70,)}, {}],                                    # worker beyond long
    [{-5: (0,), 2**40: (1, "data")}, {}],                   # odd ranks
    [{i: (i % 3,) for i in range(500)}, {i: (0,) for i in range(1, 500)}, {}],
])
def test_odd_task_tables_turn_tracking_off_without_crashing(infos, scratch):
    inner = _Tasks(infos)
    inner._task_info = {0: (0,), 1: (1,)}
    name = uname("tasks")
    it = _core.WrapIter(inner, *_source_id(name), 0, traceml.clock_ns(), track=True)
    assert list(it) == list(range(len(infos) - 1, -1, -1))
    assert traceml.report(source=name)["steps"] == len(infos)


def test_task_table_mutated_while_read_does_not_corrupt_memory(tmp_path):
    script = textwrap.dedent("""
        import traceml

        class Key:
            def __init__(self, table):
                self.table = table
            def __index__(self):
                for k in range(64):
                    self.table[10_000 + k] = (0,)
                return 0

        class Inner:
            def __init__(self):
                self._task_info = {}
                self.n = 0
            def __iter__(self):
                return self
            def __next__(self):
                self.n += 1
                if self.n > 3:
                    raise StopIteration
                self._task_info = {}
                self._task_info[Key(self._task_info)] = (0,)
                return self.n

        class Loader:
            def __iter__(self):
                return Inner()

        for _ in traceml.wrap(Loader(), name="evil"):
            pass
        print("steps", traceml.report(source="evil")["steps"])
    """)
    proc = _run_python(script, {"PYTHONMALLOC": "malloc_debug"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "steps 3" in proc.stdout


def _run_python(script, env=None, timeout=60):
    """Run script in a fresh interpreter that imports this checkout's
    traceml (the one under test, sanitizer build included)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(traceml.__file__)))
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env["PYTHONPATH"] = root + os.pathsep + full_env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", script], cwd=root, env=full_env,
                          capture_output=True, text=True, timeout=timeout)
    # A sanitizer build's report in the child's stderr goes on to fd 2,
    # where tools/sanitize.sh looks for it (UBSan writes no log file).
    if "runtime error:" in proc.stderr or "Sanitizer" in proc.stderr:
        os.write(2, ("\n[child process stderr]\n" + proc.stderr[-20000:]).encode())
    return proc


def test_inner_that_is_not_an_iterator_is_refused_by_wrap(recorded):
    class BadIter:
        def __iter__(self):
            return 5

    with pytest.raises(TypeError):
        for _ in traceml.wrap(BadIter(), name=uname("badi")):
            pass


def test_iterable_with_len_that_raises(scratch):
    class BadLen:
        def __iter__(self):
            return iter([1, 2])

        def __len__(self):
            raise RuntimeError("no length")

    w = traceml.wrap(BadLen(), name=uname("badlen"))
    with pytest.raises(RuntimeError, match="no length"):
        len(w)
    with pytest.raises(RuntimeError, match="no length"):
        bool(w)
    # (list(w) would ask len() for a size hint and fail: a for loop does not.)
    assert [x for x in w] == [1, 2]


def test_wrapiter_in_a_reference_cycle_is_collected_and_closes_its_step(scratch):
    import gc
    import weakref

    class Holder:
        def __init__(self):
            self.items = iter([1, 2, 3])

        def __iter__(self):
            return self

        def __next__(self):
            return next(self.items)

    inner = Holder()
    name = uname("cycle")
    it = _core.WrapIter(inner, *_source_id(name), 0, traceml.clock_ns())
    inner.me = it          # inner -> WrapIter -> inner
    next(it)
    ref = weakref.ref(inner)
    del it, inner
    gc.collect()
    assert ref() is None
    assert traceml.report(source=name)["steps"] == 1
