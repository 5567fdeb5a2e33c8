"""The live line (traceml.liveline): the C running histogram against NumPy,
the line and its update rate, tqdm and callable targets, the notebook
display (a kernel run by nbclient) and TensorBoard scalars read back with
TensorBoard's own EventAccumulator."""

import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import traceml
from traceml import _core, liveline as live

BOUND = 1 / 64  # the histogram's stated relative error


def _recorder_with_waits(waits, step_extra=10):
    """A Recorder whose probe steps have exactly these input waits (ns)."""
    rec = traceml.Recorder()
    clock = []
    for w in waits:
        clock += [0, w, w + step_extra]
    rec._set_test_clock(clock or [0])
    for _ in waits:
        rec.step_begin()
        rec.fetch_done()
        rec.step_end()
    return rec


@settings(max_examples=60, deadline=None)
@given(hs.lists(hs.integers(min_value=0, max_value=10**11), min_size=1, max_size=300),
       hs.sampled_from([0.0, 0.1, 0.5, 0.9, 0.95, 0.99, 1.0]))
def test_quantiles_are_within_the_stated_bound_of_the_order_statistic(waits, q):
    rec = _recorder_with_waits(waits)
    h = _core.WaitHistogram()
    assert h.feed(rec, -1) == len(waits)
    x = np.sort(np.array(waits, dtype=np.int64))
    want = x[int(q * (len(x) - 1) + 0.5)]
    got = h.quantile(q)
    if want < 64:
        assert got == want
    else:
        assert abs(got - want) <= BOUND * want
    s = h.stats()
    assert s["steps"] == len(waits) and s["wait_total_ns"] == int(x.sum())
    assert s["step_total_ns"] == int(x.sum()) + 10 * len(waits)


def test_feed_adds_only_new_steps_of_its_source_and_restarts_after_reset():
    rec = _recorder_with_waits([100, 200, 300])
    h = _core.WaitHistogram()
    assert h.feed(rec, 0) == 3 and h.feed(rec, 0) == 0
    assert h.feed(rec, 5) == 0  # nothing new for the probes either way
    rec.reset()
    rec._set_test_clock([0, 7000, 7010])
    rec.step_begin()
    rec.fetch_done()
    rec.step_end()
    assert h.feed(rec, 0) == 1 and h.stats()["steps"] == 1
    assert h.quantile(0.5) == pytest.approx(7000, rel=BOUND)
    assert h.count_above(1000) == 1 and h.count_above(10**9) == 0


@pytest.mark.parametrize("args, exc", [((None, 0), TypeError), ((1,), TypeError)])
def test_feed_checks_its_arguments(args, exc):
    with pytest.raises(exc):
        _core.WaitHistogram().feed(*args)
    with pytest.raises(ValueError, match="source"):
        _core.WaitHistogram().feed(traceml.Recorder(), 70000)
    with pytest.raises(ValueError, match="q"):
        _core.WaitHistogram().quantile(1.5)
    assert _core.WaitHistogram().quantile(0.5) is None


def test_the_line_shows_the_loops_numbers_and_ends_with_it():
    lines = []
    rec = traceml.Recorder()
    for _ in rec.wrap(range(40), live=lines.append):
        time.sleep(0.01)
    # The last update is made as the loop releases its iterator.
    assert lines and "40 steps" in lines[-1]
    r = rec.report()
    share = r.input_wait_ns.sum() / r.step_ns.sum()
    assert f"input {round(100 * share)}% of step time" in lines[-1]
    # At most 4 updates a second, plus the last.
    assert len(lines) <= math.ceil(40 * 0.02 / live.INTERVAL_S) + 2


def test_a_tqdm_bar_gets_the_line_as_its_postfix():
    class Bar:
        def __init__(self):
            self.postfix = []

        def set_postfix_str(self, s, refresh=True):
            self.postfix.append(s)

    bar = Bar()
    for _ in traceml.Recorder().wrap(range(5), live=bar):
        pass
    assert bar.postfix and "5 steps" in bar.postfix[-1]


@pytest.mark.parametrize("kw, exc, word", [
    ({"live": 3}, TypeError, "live"),
    ({"tensorboard": object()}, TypeError, "tensorboard"),
    ({"tensorboard_every": 0}, ValueError, "tensorboard_every"),
    ({"tensorboard_every": 1.0}, TypeError, "tensorboard_every"),
])
def test_bad_live_arguments_are_named(kw, exc, word):
    with pytest.raises(exc, match=r"^traceml\.wrap\(\): " + word):
        traceml.wrap(range(3), **kw)


def test_a_recorder_that_is_not_one_is_named():
    from traceml import _core

    before = _core.default_recorder()
    with pytest.raises(TypeError, match=r"^traceml\.live\(\): recorder must be a "
                                        r"traceml\.Recorder or None, got int"):
        traceml.live(True, recorder=5)
    with pytest.raises(TypeError, match=r"^traceml\.cuda_events\(\): recorder must be a "
                                        r"traceml\.Recorder or None, got str"):
        traceml.cuda_events(False, recorder="rec")
    assert _core.default_recorder() is before


def test_the_terminal_line_goes_to_stderr(capfd):
    for _ in traceml.Recorder().wrap(range(20), live=True, name="terminal-run"):
        time.sleep(0.005)
    err = capfd.readouterr().err
    assert "traceml · terminal-run · 20 steps" in err


tb = pytest.importorskip("torch.utils.tensorboard")


def test_tensorboard_scalars_read_back(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    writer = tb.SummaryWriter(log_dir=str(tmp_path))
    rec = traceml.Recorder()
    # 400 steps over at least 1.2 s: the line's thread (4 updates a
    # second) logs twice or more while running, 100 steps apart (250 steps
    # over 0.5 s logged once in one run under load).
    for _ in rec.wrap(range(400), tensorboard=writer, tensorboard_every=100):
        time.sleep(0.003)
    live.log_report(writer, rec.report())
    writer.close()
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    for tag in ("traceml/input_share", "traceml/wait_median_s", "traceml/wait_p95_s",
                "traceml/slow_waits_per_100", "traceml/stalls_per_100", "traceml/steps"):
        assert tag in tags
    # Logged at least 100 steps apart while running, then at the end (by
    # the live line and by log_report).
    steps = sorted({e.step for e in acc.Scalars("traceml/input_share")})
    assert steps[-1] == 400 and len(steps) >= 3
    assert all(b - a >= 100 for a, b in zip(steps[:-1], steps[1:-1]))
    assert acc.Scalars("traceml/steps")[-1].value == 400.0
    assert "traceml/diagnosis/text_summary" in acc.Tags()["tensors"]


nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


@pytest.mark.slow
def test_a_notebook_gets_one_display_updated_in_place():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import time, traceml\n"
        "for _ in traceml.wrap(range(60), live=True, name='nb'):\n"
        "    time.sleep(0.01)\n")]
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    outs = nb.cells[0].outputs
    shown = [o for o in outs if o.get("output_type") == "display_data"]
    assert len(shown) == 1  # one display, updated in place
    assert "traceml · nb · 60 steps" in shown[0]["data"]["text/plain"]
    assert not [o for o in outs if o.get("output_type") == "stream" and "traceml" in o["text"]]


def test_the_probes_get_a_live_line_until_stopped():
    rec = traceml.Recorder()
    lines = []
    line = traceml.live(lines.append, recorder=rec)
    for _ in range(30):
        rec.step_begin()
        time.sleep(0.002)
        rec.fetch_done()
        rec.step_end()
    assert traceml.live(False, recorder=rec) is None
    assert not line.thread and "30 steps" in lines[-1] and "probes" in lines[-1]
    with pytest.raises(TypeError, match=r"^traceml\.live\(\): target must be True"):
        traceml.live(3)
    with pytest.raises(ValueError, match=r"^traceml\.live\(\): tensorboard_every must be"):
        traceml.live(True, tensorboard_every=0)
