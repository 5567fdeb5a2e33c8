"""compare(): verdicts against the first run, with documented tolerances."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import traceml
from traceml.__main__ import main
from traceml.comparing import EQUIVALENT, IMPROVEMENT, NO_DATA, REGRESSION, verdict
from traceml.findings import comparison
from traceml.fmt import fmt_s

from support import INFO, SYNTHETIC, MS, build, records

N = 100


def run(mean_wait_ms, compute_ms=20):
    wait = np.full(N, int(mean_wait_ms * MS))
    return build(records(wait, np.full(N, compute_ms * MS)), INFO, SYNTHETIC, None)


def test_verdicts_follow_the_tolerances():
    base = run(10)  # mean step 30 ms: tolerance max(1 ms, 0.6 ms) = 1 ms
    c = traceml.compare(base, run(10.9), run(11.2), run(8.5), labels=["b", "same", "worse", "better"])
    verdicts = {r["label"]: r["verdict"] for r in c.rows}
    assert verdicts == {"b": "BASELINE", "same": "EQUIVALENT",
                        "worse": "REGRESSION", "better": "IMPROVEMENT"}
    assert c.rows[2]["mean_wait_s"] == pytest.approx(0.0112)


def test_step_share_tolerance_dominates_for_tiny_waits():
    base = run(0.1, compute_ms=50)  # tolerance max(0.01 ms, 1.002 ms)
    assert verdict(base.summary, run(0.9, 50).summary)[0] == "EQUIVALENT"
    assert verdict(base.summary, run(1.2, 50).summary)[0] == "REGRESSION"


def test_stalls_counted_at_the_baseline_threshold():
    base = run(10)
    other_wait = np.full(N, 1 * MS)
    other_wait[::5] = 100 * MS
    other = build(records(other_wait, np.full(N, 20 * MS)), INFO, SYNTHETIC, None)
    c = traceml.compare(base, other)
    thr = base["stalls"]["threshold_s"]
    expected = int((other.input_wait_ns[1:] > thr * 1e9).sum())
    assert c.rows[1]["stalls"] == expected and c.threshold_s == thr
    assert str(c).splitlines()[0] == ("stalls and stall gaps counted at the baseline's "
                                      f"threshold, {fmt_s(thr)}")


def test_stall_gaps_are_counted_at_the_baseline_threshold_too():
    # The other run's own threshold keeps only its 100 ms stalls (every 6
    # steps); at the baseline's 4 ms threshold its 30 ms waits (every 3
    # steps) count too, and the gap column must say 3, like the count.
    base = run(1)
    wait = np.full(N, 1 * MS)
    wait[::3] = 30 * MS
    wait[::6] = 100 * MS
    other = build(records(wait, np.full(N, 20 * MS)), INFO, SYNTHETIC, None)
    assert other["stalls"]["median_gap"] == 6
    c = traceml.compare(base, other)
    thr_ns = c.threshold_s * 1e9
    stalled = np.flatnonzero(other.input_wait_ns > thr_ns)
    stalled = stalled[stalled > 0]  # step 0 is the epoch start
    assert c.rows[1]["stalls"] == len(stalled)
    assert c.rows[1]["median_gap"] == np.median(np.diff(stalled)) == 3


def test_a_baseline_without_data_counts_no_stalls():
    empty = traceml.report()
    c = traceml.compare(empty, run(10))
    assert c.threshold_s is None
    assert [r["stalls"] for r in c.rows] == [None, None]
    assert [r["median_gap"] for r in c.rows] == [None, None]
    text = str(c)
    assert text.splitlines()[0] == ("no stalls counted: the baseline has no steady-state "
                                    "steps to set the threshold")
    assert "no stalls counted" in c._repr_html_()


def test_compare_renders_and_validates(tmp_path):
    base = run(10)
    c = traceml.compare(base, base.save(tmp_path / "x.traceml"))
    assert c.rows[1]["label"] == "x.traceml"
    text = str(c)
    assert "fetch  median" in text and "x.traceml: EQUIVALENT" in text
    assert "<table" in c._repr_html_()
    assert c.to_dict()["rows"][1]["verdict"] == "EQUIVALENT"
    with pytest.raises(ValueError, match="at least one run"):
        traceml.compare()
    with pytest.raises(TypeError, match=r"runs\[1\] must be a Report or a path"):
        traceml.compare(base, 3)
    with pytest.raises(ValueError, match="labels has 1 name for 2 runs"):
        traceml.compare(base, base, labels=["a"])
    with pytest.raises(ValueError, match="compare\\(\\): labels must be distinct, 'x' repeats"):
        traceml.compare(base, base, labels=["x", "x"])
    # A set has no order: it would label the runs in whatever order it
    # iterates (helper 38D).
    with pytest.raises(TypeError, match="labels must be a sequence of names, got set"):
        traceml.compare(base, base, labels={"first", "second"})


def test_repr_names_the_verdicts():
    base = run(10)
    c = traceml.compare(base, run(20), labels=["before", "after"])
    assert repr(c) == "<traceml.Comparison before=BASELINE, after=REGRESSION>"


def test_no_data_is_its_own_verdict_naming_the_empty_side():
    empty = traceml.report()  # nothing recorded
    assert empty["diagnosis"] == "NO-DATA" and empty["input_wait_s"]["mean"] is None
    only_epoch_start = build(records(np.full(1, 50 * MS), np.full(1, 20 * MS)),
                             INFO, SYNTHETIC, None)
    assert only_epoch_start["steady_steps"] == 0
    a = run(50)
    for base, other, which in [(empty, a, "the baseline"), (a, empty, "this run"),
                               (a, only_epoch_start, "this run"),
                               (empty, empty, "either run")]:
        row = traceml.compare(base, other).rows[1]
        assert row["verdict"] == NO_DATA == "NO-DATA"
        assert f"no steady-state steps in {which}" in row["why"]
        assert verdict(base.summary, other.summary) == (row["verdict"], row["why"])
    # Not a difference: sweep's order effects must not count it as one.
    assert NO_DATA not in (IMPROVEMENT, REGRESSION, EQUIVALENT)
    text = str(traceml.compare(a, empty, labels=["full", "empty"]))
    assert "empty: NO-DATA: no steady-state steps in this run" in text


def test_baseline_is_the_first_position_not_the_first_object(tmp_path):
    a = run(10)
    assert [r["verdict"] for r in traceml.compare(a, a).rows] == ["BASELINE", EQUIVALENT]
    # the same object later on is judged like any other run
    c = traceml.compare(a, run(20), a)
    assert [r["verdict"] for r in c.rows] == ["BASELINE", REGRESSION, EQUIVALENT]
    # ... and said to be the baseline's own recording.
    assert c.rows[2]["why"].startswith("the same recording as the baseline")
    assert f"mean fetch {fmt_s(a['input_wait_s']['mean'])}" in c.rows[2]["why"]
    loaded = traceml.load(a.save(tmp_path / "s1.traceml"))
    assert [r["verdict"] for r in traceml.compare(loaded, loaded).rows] == ["BASELINE", EQUIVALENT]


def test_default_labels_that_collide_get_numbered(tmp_path):
    name = run(10)["source"]
    c = traceml.compare(run(10), run(12), run(14))
    assert [r["label"] for r in c.rows] == [name, f"{name}#2", f"{name}#3"]
    assert f"{name}#3: REGRESSION" in str(c)
    path = run(10).save(tmp_path / "x.traceml")
    assert [r["label"] for r in traceml.compare(path, path, run(10)).rows] == \
        ["x.traceml", "x.traceml#2", name]
    # a suffixed name already in use is skipped, and real names are kept
    other = run(10)
    (tmp_path / "d").mkdir()
    taken = other.save(tmp_path / "d" / "x.traceml#2")
    assert [r["label"] for r in traceml.compare(path, path, taken).rows] == \
        ["x.traceml", "x.traceml#3", "x.traceml#2"]
    # labels given by the caller are used as given, and must be distinct
    assert [r["label"] for r in traceml.compare(path, path, labels=["a", "b"]).rows] == ["a", "b"]


def _cli(*args, stdout):
    return subprocess.run([sys.executable, "-m", "traceml", *args], stdout=stdout,
                          stderr=subprocess.PIPE, timeout=120)


def test_cli_show_writes_html_and_text(tmp_path, capsys):
    path = str(run(10).save(tmp_path / "s1.traceml"))
    html = tmp_path / "s1.html"
    assert main(["show", path, "--html", str(html)]) == 0
    rep = traceml.load(path)
    assert capsys.readouterr().out == str(rep) + "\n"
    page = html.read_text(encoding="utf-8")
    # A standalone page that declares its charset, around the notebook view.
    assert page.startswith('<!DOCTYPE html>\n<html><head><meta charset="utf-8">')
    assert f"<title>traceml · {rep['source']}</title>" in page
    assert f"<body>\n{rep._repr_html_()}\n</body></html>" in page


def test_cli_bad_html_path_fails_first_and_prints_nothing(tmp_path, capsys):
    path = str(run(10).save(tmp_path / "s1.traceml"))
    bad = str(tmp_path / "missing-dir" / "out.html")
    assert main(["show", path, "--html", bad]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("traceml: cannot write --html") and repr(bad) in err


def test_cli_closed_stdout_exits_quietly_after_writing_html(tmp_path):
    path = str(run(10).save(tmp_path / "s1.traceml"))
    html = tmp_path / "s1.html"
    r, w = os.pipe()
    os.close(r)  # the reader is gone before anything is written, as after `| head`
    try:
        shown = _cli("show", path, "--html", str(html), stdout=w)
        compared = _cli("compare", path, path, stdout=w)
    finally:
        os.close(w)
    # exit status 1 and no traceback, as the Python docs advise for SIGPIPE
    assert (shown.returncode, shown.stderr) == (1, b"")
    assert (compared.returncode, compared.stderr) == (1, b"")
    assert traceml.load(path)._repr_html_() in html.read_text(encoding="utf-8")


def test_a_faster_model_with_a_larger_input_share_is_an_improvement():
    """Mean fetch falls 10 -> 8 ms (beyond the 1 ms tolerance) while the
    input share rises 49% -> 56%: the loop waits a larger part of its time,
    but each step is 30% shorter (20.4 -> 14.3 ms), past
    STEP_REGRESSION_TOL: a faster training loop, IMPROVEMENT, as a step
    that long the other way is a REGRESSION.  The input share's move is
    still given."""
    base = build(records(np.full(N, 10 * MS), np.full(N, int(10.4 * MS))), INFO, SYNTHETIC, None)
    run_ = build(records(np.full(N, 8 * MS), np.full(N, int(6.3 * MS))), INFO, SYNTHETIC, None)
    b_share = 10 / 20.4
    r_share = 8 / 14.3
    assert base["input_share"] == pytest.approx(b_share)
    assert run_["input_share"] == pytest.approx(r_share)
    c = traceml.compare(base, run_, labels=["before", "after"])
    row = c.rows[1]
    assert row["verdict"] == "IMPROVEMENT"
    # Every fetch waits alike, so every fetch passes the line in both runs:
    # the stall rate is the waits' place, not judged (STALL_RATE_BULK).
    # The epoch starts: one epoch a run, not judged.
    assert row["moved"] == {"mean_wait": "better", "input_share": "worse", "stall_rate": None,
                            "step_time": "better", "epoch_start": None}
    assert (f"input share {b_share * 100:.1f}% -> {r_share * 100:.1f}% "
            f"(+{(r_share - b_share) * 100:.1f} points; tolerance 2.0 points): worse") in row["why"]
    assert row["why"].startswith("mean fetch 10 ms -> 8 ms (-2 ms; tolerance 1 ms): better")
    back = traceml.compare(run_, base, labels=["after", "before"]).rows[1]
    assert back["verdict"] == "REGRESSION"


def test_a_step_within_a_tenth_leaves_opposite_measures_mixed():
    """Mean fetch falls 10 -> 8 ms while the step grows 20.4 -> 21.8 ms
    (7%, past the wait's 1 ms tolerance, within STEP_REGRESSION_TOL):
    one measure better, one worse, and the step too little to decide:
    MIXED."""
    base = build(records(np.full(N, 10 * MS), np.full(N, int(10.4 * MS))), INFO, SYNTHETIC, None)
    run_ = build(records(np.full(N, 8 * MS), np.full(N, int(13.8 * MS))), INFO, SYNTHETIC, None)
    c = traceml.compare(base, run_, labels=["before", "after"])
    row = c.rows[1]
    assert row["moved"]["mean_wait"] == "better" and row["moved"]["step_time"] == "worse"
    assert row["verdict"] == "MIXED"
    assert "after: MIXED: mean fetch" in str(c)
    # MIXED is a difference: a sweep's order effects count it.
    from traceml.sweeping import _SAME
    assert "MIXED" not in _SAME


def test_stalls_are_compared_per_100_steps_not_raw():
    """20 and 80 steps with a stall every 5th step: 4 and 16 stalls, the
    same 20 per 100 steps (raw counts would read 4x worse)."""
    def stalled(n):
        wait = np.full(n, 1 * MS)
        wait[::5] = 100 * MS
        return build(records(wait, np.full(n, 20 * MS)), INFO, SYNTHETIC, None)

    short, long_ = stalled(21), stalled(81)  # step 0 is the epoch start
    c = traceml.compare(short, long_)
    thr = c.threshold_s * 1e9
    counts = [int((r.input_wait_ns[1:] > thr).sum()) for r in (short, long_)]
    assert [r["stalls"] for r in c.rows] == counts == [4, 16]
    assert [r["stalls_per_100"] for r in c.rows] == [pytest.approx(100 * 4 / 20),
                                                    pytest.approx(100 * 16 / 80)]
    assert c.rows[1]["moved"]["stall_rate"] == "same"
    assert c.rows[1]["verdict"] == "EQUIVALENT"
    # Tolerance: 2 sqrt(4) stalls per 20 steps = 20 per 100 steps.
    assert "stalls per 100 steps 20.0 -> 20.0 (+0.0; tolerance 20.0): same" in c.rows[1]["why"]
    # 2.5x as many stalls per step on a long baseline is beyond it and
    # beyond the two counts' noise (40 against 100 of 200 steps); 1.67x
    # (40 against 67) is beyond the tolerance, not the noise (p = 0.012).
    base = stalled(201)
    for every, moved in ((2, "worse"), (3, "same")):
        wait = np.full(201, 1 * MS)
        wait[::every] = 100 * MS
        more = build(records(wait, np.full(201, 20 * MS)), INFO, SYNTHETIC, None)
        row = traceml.compare(base, more).rows[1]
        assert row["moved"]["stall_rate"] == moved, (every, row["why"])


def test_workers_that_take_the_models_cores_are_not_an_improvement():
    """Two workers on two cores: the wait falls 20 -> 10 ms a step but
    compute rises 40 -> 60 ms, so each step takes longer (60 -> 70 ms).
    Input measures alone called it an IMPROVEMENT; the step, 17% longer
    (beyond a tenth of it), says REGRESSION."""
    base = build(records(np.full(N, 20 * MS), np.full(N, 40 * MS)), INFO, SYNTHETIC, None)
    run_ = build(records(np.full(N, 10 * MS), np.full(N, 60 * MS)), INFO, SYNTHETIC, None)
    row = traceml.compare(base, run_, labels=["0 workers", "2 workers"]).rows[1]
    assert row["moved"]["mean_wait"] == "better" and row["moved"]["input_share"] == "better"
    assert row["moved"]["step_time"] == "worse" and row["verdict"] == "REGRESSION"
    assert "mean step 60 ms -> 70 ms (+10 ms; tolerance 2 ms): worse" in row["why"]


def test_a_step_longer_than_the_waits_tolerance_is_not_an_improvement():
    # The wait falls 5 -> 3 ms (tolerance max(0.5, 0.57) ms of a 28.7 ms
    # step) while compute rises 23.7 -> 27.9 ms: each step 2.2 ms longer,
    # 7.7% of it, under a tenth of the step yet past the wait's tolerance.
    base = build(records(np.full(N, 5 * MS), np.full(N, int(23.7 * MS))), INFO, SYNTHETIC,
                 None)
    run_ = build(records(np.full(N, 3 * MS), np.full(N, int(27.9 * MS))), INFO, SYNTHETIC,
                 None)
    row = traceml.compare(base, run_).rows[1]
    assert row["moved"]["mean_wait"] == "better" and row["moved"]["step_time"] == "worse"
    assert row["verdict"] == "MIXED"


def test_outliers_a_report_did_not_count_are_not_stalls_to_compare():
    """Two runs of one healthy loop: 150 steps of 20 ms, waits of 0.3 ms
    with a few of 8 ms (one run 2, the other 6): under 5% of the step
    together, so each report counts no stall, only outliers.  Counted at
    the baseline's line they are not stalls either: no stall rate moves."""
    def run(blips):
        wait = np.full(151, 0.3 * MS)
        wait[np.linspace(10, 140, blips).astype(int)] = 8 * MS
        return build(records(wait, np.full(151, 20 * MS)), INFO, SYNTHETIC, None)

    a, b = run(2), run(6)
    for r in (a, b):
        assert r["stalls"]["count"] == 0 and r["stalls"]["outliers"] > 0, r["stalls"]
    c = traceml.compare(a, b)
    assert [row["stalls"] for row in c.rows] == [0, 0]
    assert c.rows[1]["moved"]["stall_rate"] == "same"


def test_the_baselines_stalls_are_its_own_count_at_its_own_line():
    """A baseline whose report took each clocked fetch's wait for a core
    out of its waits (10 fetches of 8 ms, 4.2 ms of it in the run queue,
    beside 0.3 ms waits on a 5 ms step): the 3.8 ms left stand past its
    line but cost under 5% of the step together, so its report counts
    outliers, no stall; the stored 8 ms waits cost 9%.
    Recounting the stored waits at its line gave it stalls the report
    never had, and a same-code run IMPROVEMENT on the stall rate alone."""
    n = 150
    wait = np.full(n, int(0.3 * MS))
    slow = np.arange(10, 140, 13)
    wait[slow] = 8 * MS
    rec = records(wait, np.full(n, 5 * MS))
    steps = np.arange(n, dtype=np.int64)
    runq = np.zeros(n, dtype=np.int64)
    runq[slow] = int(4.2 * MS)
    zeros = np.zeros(n, dtype=np.int64)
    clocks = (steps, np.full(n, 100_000, dtype=np.int64), runq, zeros, zeros)
    base = build(rec, INFO, SYNTHETIC, None, fetch_clocks=clocks)
    assert base["stalls"]["count"] == 0 and base["stalls"]["outliers"] == 10, base["stalls"]
    line = base["stalls"]["threshold_s"]
    assert np.count_nonzero(base.input_wait_ns > line * 1e9) >= 10
    c = traceml.compare(base, base)
    assert c.rows[0]["stalls"] == 0


def test_the_same_recording_twice_says_so():
    # Helper 29D: the second report() of a notebook gave the first loop's
    # steps again, and compare read EQUIVALENT without a word.
    base = build(records(np.full(N, 20 * MS), np.full(N, 40 * MS)), INFO, SYNTHETIC, None)
    again = build(records(np.full(N, 20 * MS), np.full(N, 40 * MS)), INFO, SYNTHETIC, None)
    row = traceml.compare(base, again).rows[1]
    assert row["verdict"] == "EQUIVALENT"
    assert row["why"].startswith("the same recording as the baseline")
    other = build(records(np.full(N, 10 * MS), np.full(N, 40 * MS)), INFO, SYNTHETIC, None)
    assert "same recording" not in traceml.compare(base, other).rows[1]["why"]


def test_a_generators_report_carries_the_cpus_its_host_reading_is_of():
    # compare reads other programs' cores against these CPUs for sources
    # without a loader's host facts.
    def items():
        for i in range(60):
            end = time.thread_time() + 0.001
            while time.thread_time() < end:
                pass
            yield i

    rec = traceml.Recorder()
    for _ in rec.wrap(items(), name="gen"):
        time.sleep(0.001)
    d = rec.report().to_dict()
    assert d["host"] is None
    host = d["wait_parts"]["host"]
    assert host is not None and host["usable_cpus"] == len(os.sched_getaffinity(0))
    assert comparison.usable_cpus(d) == len(os.sched_getaffinity(0))
