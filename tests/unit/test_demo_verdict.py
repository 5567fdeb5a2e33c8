"""The demo's one-line verdict says the report's own cadence answer: a
period, every fetch, none, or not yet with the steps that settle it."""
from traceml import demo
from traceml.findings import stall_timing


class _Report:
    def __init__(self, d):
        self._d = d

    def to_dict(self):
        return self._d


def _hist(label, period=None, stalls=5, **temporal):
    return _Report({"diagnosis": "INPUT-BOUND", "wall_s": 3.0, "stalls": {"count": stalls},
                    "cadence": {"num_workers": 4, "period": period,
                                "matches_num_workers": period == 4 if period else None},
                    "temporal": {"label": label, **temporal}})


FIXED = _Report({"diagnosis": "FAST", "wall_s": 1.0, "stalls": {"count": 1}})


def test_the_verdict_follows_the_temporal_answer():
    line = demo.verdict(_hist("PERIODIC", 4), FIXED)
    assert line == ("verdict: historical INPUT-BOUND, a stall every 4 steps, matching "
                    "num_workers=4; 3.0x the fixed wall time. fixed FAST, 1 stall.")
    # Not yet is not "no cadence": the period it fits and the steps to settle.
    line = demo.verdict(_hist("UNSETTLED", consistent_period=4, settle_steps=12), FIXED)
    assert ("not yet: consistent with a stall every 4 steps with num_workers=4, "
            + stall_timing.settle_words(12)) in line
    assert "about 12 more steps would settle it" in line
    assert "no regular stall cadence" in demo.verdict(_hist("IRREGULAR"), FIXED)
    assert "a stall on every fetch" in demo.verdict(_hist("EVERY-FETCH"), FIXED)
    assert "too few stalls to read a cadence" in demo.verdict(_hist("TOO-FEW"), FIXED)
    assert "no stalls with num_workers=4" in demo.verdict(_hist("TOO-FEW", stalls=0), FIXED)
