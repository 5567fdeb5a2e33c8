"""compare(): verdicts against the first run, with documented tolerances."""

import numpy as np
import pytest

import traceml
from traceml.compare import verdict
from traceml.report import build

from test_report import INFO, SYNTHETIC, MS, records

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


def test_compare_renders_and_validates(tmp_path):
    base = run(10)
    c = traceml.compare(base, base.save(tmp_path / "x.traceml"))
    assert c.rows[1]["label"] == "x.traceml"
    text = str(c)
    assert "mean fetch" in text and "x.traceml: EQUIVALENT" in text
    assert "<table" in c._repr_html_()
    assert c.to_dict()["rows"][1]["verdict"] == "EQUIVALENT"
    with pytest.raises(ValueError, match="at least one run"):
        traceml.compare()
    with pytest.raises(TypeError, match=r"runs\[1\] must be a Report or a path"):
        traceml.compare(base, 3)
    with pytest.raises(ValueError, match="labels has 1 names for 2 runs"):
        traceml.compare(base, base, labels=["a"])


def test_repr_names_the_verdicts():
    base = run(10)
    c = traceml.compare(base, run(20), labels=["before", "after"])
    assert repr(c) == "<traceml.Comparison before=BASELINE, after=REGRESSION>"
