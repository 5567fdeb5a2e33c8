"""Probes: step_begin / fetch_done / step_end, misuse, drops, fork."""

import json
import os
import time

import numpy as np
import pytest

import traceml
from traceml import _core

F = _core


def steps():
    return _core.default_recorder().snapshot()


def test_clock_is_monotonic_ns():
    a = time.monotonic_ns()
    b = traceml.clock_ns()
    c = time.monotonic_ns()
    assert a <= b <= c  # the same CLOCK_MONOTONIC as time.monotonic_ns
    assert isinstance(b, int)


def test_a_probed_step_records_its_wait_and_compute():
    for _ in range(3):
        traceml.step_begin()
        time.sleep(0.02)
        traceml.fetch_done()
        time.sleep(0.01)
        traceml.step_end()
    rec = steps()
    assert len(rec) == 3
    wait = rec["fetch_done_ns"] - rec["begin_ns"]
    compute = rec["end_ns"] - rec["fetch_done_ns"]
    assert (wait >= 20_000_000).all() and (wait < 200_000_000).all()
    assert (compute >= 10_000_000).all() and (compute < 200_000_000).all()
    assert (rec["source"] == 0).all() and (rec["epoch"] == 0).all()
    assert (rec["flags"] == 0).all()
    assert (np.diff(rec["begin_ns"]) > 0).all()
    r = traceml.report()
    assert r["source"] == "probes" and r["steps"] == 3
    assert r["input_wait_s"]["median"] == pytest.approx(np.median(wait) * 1e-9)
    assert r["compute_s"]["max"] == pytest.approx(compute.max() * 1e-9)


def test_probes_refuse_arguments():
    for probe in (traceml.step_begin, traceml.fetch_done, traceml.step_end, traceml.clock_ns):
        with pytest.raises(TypeError, match="takes no arguments"):
            probe(1)


def test_step_begin_after_fetch_closes_the_open_step_without_misuse():
    """step_end() is optional: the next step_begin() ends the step, as
    wrap's steps end at the next fetch."""
    rec = traceml.Recorder()
    rec._set_test_clock([100, 130, 200, 260, 300])
    for _ in range(2):
        rec.step_begin()
        rec.fetch_done()
    rec.step_begin()
    got = rec.snapshot()
    info = rec.store_info()
    assert got["begin_ns"].tolist() == [100, 200]
    assert got["fetch_done_ns"].tolist() == [130, 260]
    assert got["end_ns"].tolist() == [200, 300]
    assert (got["flags"] == F.FLAG_IMPLICIT_END).all()
    assert not any(info["misuse"].values())
    assert info["probe_step_open"] is True


def test_a_loop_without_step_end_reports_like_wrap():
    """The two-call loop: every step but the last (still open) is
    reported, with its compute running to the next step_begin(), and no
    misuse note."""
    for _ in range(4):
        traceml.step_begin()
        time.sleep(0.01)
        traceml.fetch_done()
        time.sleep(0.005)
    rec = steps()
    assert len(rec) == 3
    np.testing.assert_array_equal(rec["end_ns"][:-1], rec["begin_ns"][1:])
    wait = rec["fetch_done_ns"] - rec["begin_ns"]
    compute = rec["end_ns"] - rec["fetch_done_ns"]
    assert (wait >= 10_000_000).all() and (compute >= 5_000_000).all()
    r = traceml.report()
    assert r["steps"] == 3
    assert r["input_wait_s"]["median"] == pytest.approx(np.median(wait) * 1e-9)
    assert not any("misuse" in n for n in r["notes"])
    assert any("still open" in n for n in r["notes"])


def test_step_begin_twice_without_fetch_is_misuse():
    traceml.step_begin()
    traceml.step_begin()  # misuse: the first step ends here, unfetched
    traceml.fetch_done()
    traceml.step_end()
    rec = steps()
    assert len(rec) == 2
    assert rec["end_ns"][0] == rec["begin_ns"][1]
    assert rec["fetch_done_ns"][0] == rec["begin_ns"][0]
    assert rec["flags"][0] == F.FLAG_IMPLICIT_END | F.FLAG_NO_FETCH
    assert rec["flags"][1] == 0
    misuse = _core.default_recorder().store_info()["misuse"]
    assert misuse["step_begin_while_open"] == 1
    assert misuse["step_end_without_fetch"] == 0   # the user's step_end() had its fetch


def test_step_end_without_fetch_records_zero_wait():
    traceml.step_begin()
    time.sleep(0.005)
    traceml.step_end()
    rec = steps()
    assert len(rec) == 1
    assert rec["fetch_done_ns"][0] == rec["begin_ns"][0]
    assert rec["end_ns"][0] - rec["begin_ns"][0] >= 5_000_000
    assert rec["flags"][0] == F.FLAG_NO_FETCH
    assert _core.default_recorder().store_info()["misuse"]["step_end_without_fetch"] == 1


def test_stray_probes_are_counted_and_ignored():
    traceml.step_begin()
    traceml.fetch_done()
    traceml.step_end()
    before = steps().copy()
    traceml.fetch_done()  # no open step
    traceml.step_end()  # no open step
    traceml.step_end()
    after = steps()
    np.testing.assert_array_equal(before, after)  # nothing earlier touched
    misuse = _core.default_recorder().store_info()["misuse"]
    assert misuse["fetch_done_without_step"] == 1
    assert misuse["step_end_without_step"] == 2
    text = str(traceml.report())
    assert "fetch_done_without_step x1" in text
    assert "step_end_without_step x2" in text


def test_repeated_fetch_done_keeps_the_later_one():
    traceml.step_begin()
    traceml.fetch_done()
    time.sleep(0.003)
    t = traceml.clock_ns()
    traceml.fetch_done()
    traceml.step_end()
    rec = steps()
    assert rec["fetch_done_ns"][0] >= t
    assert _core.default_recorder().store_info()["misuse"]["fetch_done_repeated"] == 1


def test_reset_discards_the_record_and_the_open_step():
    traceml.step_begin()
    traceml.step_end()
    traceml.step_begin()
    traceml.reset()
    traceml.step_end()  # the open step went with the reset
    assert len(steps()) == 0
    info = _core.default_recorder().store_info()
    assert info["misuse"]["step_end_without_step"] == 1
    assert not info["probe_step_open"]


def test_open_probe_step_is_not_reported_but_noted():
    traceml.step_begin()
    traceml.fetch_done()
    traceml.step_end()
    traceml.step_begin()
    r = traceml.report()
    assert r["steps"] == 1
    assert any("still open" in n for n in r["notes"])
    traceml.step_end()


def test_failed_growth_drops_steps_and_keeps_the_rest():
    _core.default_recorder()._set_capacity_limit(1500)
    for _ in range(2000):
        traceml.step_begin()
        traceml.fetch_done()
        traceml.step_end()
    info = _core.default_recorder().store_info()
    assert info["steps"] == 1500 and info["dropped_steps"] == 500
    assert info["out_of_memory"]
    rec = steps()
    assert (np.diff(rec["begin_ns"]) > 0).all()  # the kept ones are intact
    r = traceml.report()
    assert r["dropped_steps"] == 500 and r["steps"] == 1500
    assert any("500 steps were dropped" in n for n in r["notes"])
    assert "500 steps were dropped" in str(r)


def test_nothing_recordable_raises_memory_error_at_report():
    _core.default_recorder()._set_capacity_limit(0)
    traceml.step_begin()
    traceml.step_end()  # never raises in the loop
    with pytest.raises(MemoryError, match="1 steps were dropped"):
        traceml.report()


def test_record_is_32_bytes_per_step():
    assert _core.RECORD_BYTES == 32
    assert _core.RECORD_DTYPE.itemsize == 32
    assert _core.RECORD_DTYPE.names == (
        "begin_ns", "fetch_done_ns", "end_ns", "epoch", "source", "flags",
    )


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_records_into_its_own_store():
    for _ in range(3):
        traceml.step_begin()
        traceml.fetch_done()
        traceml.step_end()
    parent_before = steps().copy()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(r)
            inherited = len(_core.default_recorder().snapshot())
            for _ in range(2):
                traceml.step_begin()
                traceml.fetch_done()
                traceml.step_end()
            rep = traceml.report()
            os.write(w, json.dumps([inherited, rep["steps"]]).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as fh:
        inherited, child_steps = json.loads(fh.read())
    os.waitpid(pid, 0)
    assert inherited == 0  # the child starts empty
    assert child_steps == 2
    np.testing.assert_array_equal(steps(), parent_before)  # parent untouched


class _ProbingDataset:
    """Calls the probes inside the worker and returns what the worker's own
    store holds afterwards."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        traceml.step_begin()
        traceml.fetch_done()
        traceml.step_end()
        return _core.default_recorder().store_info()["steps"]


def test_probes_in_dataloader_workers_do_not_touch_the_parent():
    torch = pytest.importorskip("torch")
    for _ in range(5):
        traceml.step_begin()
        traceml.fetch_done()
        traceml.step_end()
    parent_before = steps().copy()
    loader = torch.utils.data.DataLoader(
        _ProbingDataset(), batch_size=None, num_workers=2,
        multiprocessing_context="fork",
    )
    seen = [int(x) for x in loader]
    # Each worker counts only its own steps: 4 items each, 1..4.
    assert sorted(seen) == [1, 1, 2, 2, 3, 3, 4, 4]
    np.testing.assert_array_equal(steps(), parent_before)


def _c_callables():
    """Every public function and method the C extension exposes, by name."""
    rec = _core.Recorder()
    out = {}
    for owner_name, owner in (("_core", _core), ("Recorder", rec),
                              ("BatchLog", _core.BatchLog(16)),
                              ("WaitHistogram", _core.WaitHistogram())):
        for name in dir(owner):
            obj = getattr(owner, name)
            if type(obj).__name__ == "builtin_function_or_method" and not name.startswith("_"):
                out[f"{owner_name}.{name}"] = obj
    return out


def test_every_c_function_has_a_signature_inspect_can_read():
    """A docstring's first line is read as a text signature only in the
    exact form name(args)\\n--\\n\\n; anything after the parenthesis hides
    it from inspect.signature and help()."""
    import inspect
    callables = _c_callables()
    assert "_core.step_begin" in callables and "Recorder.snapshot" in callables
    unreadable = []
    for name, fn in sorted(callables.items()):
        try:
            inspect.signature(fn)
        except ValueError:
            unreadable.append(name)
    assert unreadable == []
    assert str(inspect.signature(_core.percentiles)) == "(x, q)"
    assert str(inspect.signature(traceml.step_begin)) == "()"
