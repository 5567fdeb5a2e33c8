"""Report and policy on hand-made records: every number checked against
NumPy, every verdict against the documented rule."""

import json
import time

import numpy as np
import pytest

import traceml
from traceml.findings import input_bound, stall_timing
from traceml.fmt import fmt_s

from support import INFO, MS, SYNTHETIC, build, lockstep, records


def test_statistics_equal_numpy(loader_source):
    loader_source(1)
    rng = np.random.default_rng(1)
    wait = rng.integers(1, 50 * MS, 200)
    compute = rng.integers(1, 30 * MS, 200)
    r = build(records(wait, compute), INFO, SYNTHETIC, None)
    steady = slice(1, None)  # one worker: only the first fetch is start-up
    for key, x in (("input_wait_s", wait), ("compute_s", compute), ("step_s", wait + compute)):
        got = r[key]
        xs = x[steady]
        assert got["mean"] == pytest.approx(xs.mean() * 1e-9, rel=1e-12)
        assert got["total"] == pytest.approx(xs.sum() * 1e-9, rel=1e-12)
        assert got["max"] == pytest.approx(xs.max() * 1e-9)
        for name, q in (("median", 50), ("p90", 90), ("p95", 95), ("p99", 99)):
            assert got[name] == pytest.approx(np.percentile(xs, q) * 1e-9, abs=1e-9)
    assert r["input_share"] == pytest.approx(wait[1:].sum() / (wait + compute)[1:].sum())
    assert r["steps"] == 200 and r["steady_steps"] == 199
    assert r["epoch_start"]["count"] == 1 and r["epoch_start"]["steps"] == [0]
    assert r["wall_s"] == pytest.approx((wait + compute).sum() * 1e-9)


@pytest.mark.parametrize(
    "share, label",
    [(0.0, "COMPUTE-BOUND"), (0.049, "COMPUTE-BOUND"), (0.05, "BALANCED"),
     (0.199, "BALANCED"), (0.20, "INPUT-BOUND"), (0.9, "INPUT-BOUND")],
)
def test_diagnosis_thresholds(share, label):
    assert input_bound.diagnose(share)[0] == label
    wait = np.full(50, int(share * 1_000_000))      # 1 ms steps
    r = build(records(wait, 1_000_000 - wait), INFO, SYNTHETIC, None)
    assert r["diagnosis"] == label
    assert r["input_share"] == pytest.approx(share, abs=1e-3)


@pytest.mark.parametrize("step_ns", [300, 3_999, 4_000, 1_000_000])
def test_steps_too_short_to_time_get_no_share(step_ns):
    """Under input_bound.MIN_MEAN_STEP_NS (timing's own cost / the compute-bound
    share) the share could be the timing's own: NO-DATA, saying why."""
    assert input_bound.MIN_MEAN_STEP_NS == input_bound.TIMING_OWN_COST_NS / input_bound.COMPUTE_BOUND_SHARE
    wait = np.full(50, int(0.6 * step_ns))
    r = build(records(wait, step_ns - wait), INFO, SYNTHETIC, None)
    assert r["input_share"] == pytest.approx(0.6, abs=1e-3)
    if step_ns < input_bound.MIN_MEAN_STEP_NS:
        assert r["diagnosis"] == input_bound.NO_DATA
        assert r["diagnosis_rule"].startswith(
            f"steps average {fmt_s(step_ns * 1e-9)}, under {fmt_s(input_bound.MIN_MEAN_STEP_NS * 1e-9)}")
        assert str(r).splitlines()[1].startswith("NO-DATA: steps average")
    else:
        assert r["diagnosis"] == input_bound.INPUT_BOUND


def test_no_data_report_says_so():
    r = traceml.report()
    assert r["diagnosis"] == "NO-DATA" and r["steps"] == 0
    assert r["input_wait_s"]["mean"] is None
    text = str(r)
    assert text.splitlines()[0] == "traceml · nothing recorded yet"
    assert "NO-DATA" in text and "no steps recorded" in text
    assert "NO-DATA" in r._repr_html_()
    json.dumps(r.to_dict())


@pytest.mark.parametrize("k", [2, 4, 8])
def test_mostly_fast_with_lockstep_stalls(loader_source, k):
    loader_source(k)
    wait, compute = lockstep(k, bursts=12)
    r = build(records(wait, compute), INFO, SYNTHETIC, None)
    start = k  # the first k fetches are start-up
    stall_idx = [i for i in range(start, len(wait)) if i % k == 0]
    assert r["stalls"]["steps"] == stall_idx
    assert r["stalls"]["gaps"] == [k] * (len(stall_idx) - 1)
    assert r["stalls"]["modal_gap"] == k and r["stalls"]["median_gap"] == k
    assert r["stalls"]["gap_histogram"] == [[k, len(stall_idx) - 1]]
    assert r["cadence"]["period"] == k
    assert r["cadence"]["matches_num_workers"] is True
    assert r["cadence"]["multiple_fraction"] == 1.0
    assert r["diagnosis"] == "INPUT-BOUND"


def test_cadence_not_matching_num_workers(loader_source):
    loader_source(4)
    wait, compute = lockstep(2, bursts=20)
    r = build(records(wait, compute), INFO, SYNTHETIC, None)
    assert r["cadence"]["period"] == 2
    assert r["cadence"]["matches_num_workers"] is False
    assert r["cadence"]["multiple_fraction"] == 0.0


def test_every_fetch_slow_is_every_fetch_a_stall(loader_source):
    loader_source(0)
    rng = np.random.default_rng(2)
    wait = (100 * MS * rng.uniform(0.97, 1.03, 60)).astype(np.int64)
    r = build(records(wait, np.full(60, 5 * MS)), INFO, SYNTHETIC, None)
    assert r["stalls"]["count"] == r["steady_steps"] == 59
    # Every fetch a stall is EVERY-FETCH, never "a period of 1" that
    # "follows num_workers" at num_workers=0.
    assert r["temporal"]["label"] == "EVERY-FETCH" and r["temporal"]["period"] is None
    assert r["cadence"]["period"] is None
    assert r["cadence"]["matches_num_workers"] is False
    assert "every fetch is slow" in r["stalls"]["rule"]
    text = str(r)
    assert "every 1 step" not in text and "follows num_workers" not in text


def test_healthy_noise_is_not_a_stall():
    rng = np.random.default_rng(3)
    wait = rng.lognormal(np.log(40_000), 0.8, 500).astype(np.int64)  # ~40 µs
    wait[::97] = 900_000  # rare 0.9 ms hiccups
    r = build(records(wait, np.full(500, 30 * MS)), INFO, SYNTHETIC, None)
    assert r["stalls"]["count"] == 0
    assert r["diagnosis"] == "COMPUTE-BOUND"
    assert r["cadence"]["period"] is None


def test_given_threshold_is_absolute():
    wait = np.array([1, 6, 2, 7, 3, 5] * 5, dtype=np.int64) * 1_000_000_000
    r = build(records(wait, np.full(30, MS)), INFO, SYNTHETIC, 5.0)
    w = wait[1:]
    assert r["stalls"]["threshold_s"] == 5.0
    assert r["stalls"]["count"] == int((w > 5e9).sum())
    assert r["stalls"]["rule"] == "given: wait > 5 s"


def test_epoch_start_is_not_steady_state_cadence(loader_source):
    """Each worker's first batch (slow: process start-up) is set apart, and
    gaps are not counted across an epoch boundary."""
    loader_source(4, epochs=2)
    wait, compute = lockstep(4, bursts=8)
    wait[:4] = 400 * MS  # start-up: all four first fetches slow
    wait2 = wait.copy()
    w = np.r_[wait, wait2]
    epoch = np.r_[np.zeros(len(wait)), np.ones(len(wait2))].astype(np.int32)
    r = build(records(w, np.r_[compute, compute], epoch=epoch), INFO, SYNTHETIC, None)
    assert r["epoch_start"]["count"] == 8
    assert r["epoch_start"]["steps"] == [0, 1, 2, 3, 32, 33, 34, 35]
    assert r["epoch_start"]["input_wait_s"]["mean"] == pytest.approx(0.4)
    assert set(r["stalls"]["gaps"]) == {4}  # no gap spans the boundary
    assert r["stalls"]["count"] == 14 and len(r["stalls"]["gaps"]) == 12
    assert r["epochs"] == 2


def test_text_and_html_show_the_evidence(loader_source):
    loader_source(4)
    wait, compute = lockstep(4, bursts=10)
    r = build(records(wait, compute), INFO, SYNTHETIC, None)
    text = str(r)
    assert text.splitlines()[1].startswith("INPUT-BOUND")
    assert "a stall every 4 steps" in text and "num_workers=4" in text
    assert "4×8" in text  # 10 bursts, the first is start-up: 9 stalls, 8 gaps
    for label in ("input wait", "compute", "step", "p95", "median"):
        assert label in text
    html = r._repr_html_()
    assert "<table" in html and "<script" not in html.lower()
    assert "INPUT-BOUND" in html and "a stall every 4 steps" in html
    d = json.loads(json.dumps(r.to_dict()))
    for key in ("steps", "epochs", "wall_s", "dropped_steps", "input_wait_s",
                "compute_s", "step_s", "input_share", "diagnosis", "stalls",
                "cadence", "epoch_start", "loader"):
        assert key in d
    assert set(d["stalls"]) >= {"threshold_s", "rule", "count", "steps", "gaps",
                                "median_gap", "modal_gap", "gap_histogram"}
    assert set(d["cadence"]) == {"period", "num_workers", "matches_num_workers",
                                 "multiple_fraction"}


def test_report_steps_views():
    wait = np.arange(1, 11) * MS
    r = build(records(wait, np.full(10, 2 * MS)), INFO, SYNTHETIC, None)
    np.testing.assert_array_equal(r.input_wait_ns, wait)
    np.testing.assert_array_equal(r.compute_ns, np.full(10, 2 * MS))
    np.testing.assert_array_equal(r.step_ns, wait + 2 * MS)
    assert r.steps["begin_ns"].dtype == np.int64


@pytest.mark.parametrize("bad", [-1, -0.001, float("nan"), float("inf")])
def test_bad_threshold_is_a_value_error(bad):
    traceml.step_begin()
    traceml.step_end()
    with pytest.raises(ValueError, match="stall_threshold_s"):
        traceml.report(bad)
    assert traceml.report()["steps"] == 1  # nothing recorded is lost


@pytest.mark.parametrize("bad", ["5", True, [1]])
def test_non_number_threshold_is_a_type_error(bad):
    with pytest.raises(TypeError, match="stall_threshold_s"):
        traceml.report(bad)


def test_unknown_source_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown source 'nope'; sources with steps: none "
                                         r"\(and 'probes', the hand-placed probes\)"):
        traceml.report(source="nope")
    for _ in traceml.wrap([1, 2], name="two"):
        pass
    with pytest.raises(ValueError, match="sources with steps: 'two' "):
        traceml.report(source="nope")


def test_epoch_start_mask_rule():
    pos = np.array([0, 1, 2, 3, 4, 0, 1, 2, 0])
    k = np.array([2] * 5 + [3] * 3 + [1])
    got = stall_timing.epoch_start_mask(pos, k)
    assert got.tolist() == [True, True, False, False, False, True, True, True, True]
    assert stall_timing.epoch_start_mask(np.array([], dtype=np.int32), np.array([])).shape == (0,)


def test_plain_iterables_get_no_host_and_a_plain_epoch_start_line():
    for _ in traceml.wrap(list(range(12)), name="plain-list"):
        time.sleep(1e-4)    # steps long enough for a diagnosis (input_bound.MIN_MEAN_STEP_NS)
    r = traceml.report(source="plain-list")
    assert r["host"] is None and r["loader"] is None
    text = str(r)
    assert "(includes iter())" in text and "worker start-up" not in text
    assert "torch" not in text


def test_misuse_notes_point_at_the_probe_misused():
    traceml.fetch_done()
    traceml.step_begin()
    traceml.step_begin()
    traceml.step_end()
    notes = traceml.report()["notes"]
    assert "probe misuse: fetch_done_without_step x1 (see help(traceml.fetch_done))" in notes
    assert "probe misuse: step_begin_while_open x1 (see help(traceml.step_begin))" in notes


@pytest.mark.parametrize("seconds,text", [
    (None, "-"), (0.0, "0 ns"), (4.2e-7, "420 ns"), (3.5e-5, "35 µs"), (0.0123, "12.3 ms"),
    (1.5, "1.50 s"), (86400.0, "86400.00 s"), (9e9, "9e+09 s"),
])
def test_durations_keep_three_digits_readable(seconds, text):
    from traceml.fmt import fmt_s

    assert fmt_s(seconds) == text


@pytest.mark.parametrize("unmarked", [0, 4, 5, 6, 10])
def test_probe_steps_without_fetch_done_give_no_diagnosis_past_half(unmarked):
    # 10 steps of 10 us, each waiting 8 us when fetch_done() is called;
    # the first `unmarked` steps forget it (recorded with 0 wait).
    rec = traceml.Recorder()
    clock, t = [], 1_000_000
    for i in range(10):
        clock += [t, t + 8_000, t + 10_000] if i >= unmarked else [t, t + 10_000]
        t += 10_000
    rec._set_test_clock(clock)
    for i in range(10):
        rec.step_begin()
        if i >= unmarked:
            rec.fetch_done()
        rec.step_end()
    r = rec.report()
    share = 0.8 * (10 - unmarked) / 10
    if unmarked > input_bound.PROBE_UNMARKED_MAX_SHARE * 10:
        assert r["diagnosis"] == input_bound.NO_DATA
        assert r["diagnosis_rule"].startswith(
            f"fetch_done() was not called in {unmarked} of 10 steady-state steps")
        assert str(r).splitlines()[1].startswith("NO-DATA: fetch_done() was not called")
    else:
        assert r["input_share"] == pytest.approx(share)
        assert r["diagnosis"] == input_bound.diagnose(share).label
    assert (f"step_end_without_fetch x{unmarked}" in " ".join(r["notes"])) == (unmarked > 0)
    # Below NO-DATA a note says the numbers are skewed, and by how many steps.
    skew = [n for n in r["notes"] if "have no fetch_done()" in n]
    if 0 < unmarked <= input_bound.PROBE_UNMARKED_MAX_SHARE * 10:
        assert skew == [skew[0]] and skew[0].startswith(f"{unmarked} of 10 steady-state steps")
    else:
        assert skew == []


def test_unmarked_note_stands_when_no_data_comes_from_short_steps():
    """The note on steps without fetch_done() is left out only where
    NO-DATA is for them (input_bound.unmarked_past_share), not for another
    reason: here 3 of 10 steps of 1 us, under input_bound.MIN_MEAN_STEP_NS."""
    rec = traceml.Recorder()
    clock, t = [], 1_000_000
    for i in range(10):
        clock += [t, t + 600, t + 1_000] if i >= 3 else [t, t + 1_000]
        t += 1_000
    rec._set_test_clock(clock)
    for i in range(10):
        rec.step_begin()
        if i >= 3:
            rec.fetch_done()
        rec.step_end()
    r = rec.report()
    assert r["diagnosis"] == input_bound.NO_DATA
    assert r["diagnosis_rule"].startswith("steps average 1 µs")
    assert [n for n in r["notes"] if "have no fetch_done()" in n][0].startswith(
        "3 of 10 steady-state steps")
