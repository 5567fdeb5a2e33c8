"""traceml.Recorder: a recording owned by one object.

Probe and wrap semantics are checked exactly with the test clock (no
sleeps); the faults that a single process-wide recording caused are each
reproduced: zipped or nested loaders keep their worker evidence, two
sweeps in a row are alike, the module can be freed, and the reducers'
scratch memory is visible to tracemalloc.
"""

import gc
import os
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

import traceml
from traceml import _core


def fields(rec):
    snap = rec.snapshot()
    return [(int(r["begin_ns"]), int(r["fetch_done_ns"]), int(r["end_ns"]),
             int(r["epoch"]), int(r["source"]), int(r["flags"])) for r in snap]


# --- the test clock ---------------------------------------------------------------


def test_probes_record_the_test_clock_exactly():
    rec = traceml.Recorder()
    rec._set_test_clock([100, 150, 400, 500, 520, 900, 1000, 1100])
    rec.step_begin()
    rec.fetch_done()
    rec.step_end()
    rec.step_begin()
    rec.fetch_done()
    rec.step_end()
    rec.step_begin()          # 1000
    rec.step_begin()          # 1100: closes the open step without a fetch
    assert fields(rec) == [
        (100, 150, 400, 0, 0, 0),
        (500, 520, 900, 0, 0, 0),
        (1000, 1000, 1100, 0, 0, _core.FLAG_NO_FETCH | _core.FLAG_IMPLICIT_END),
    ]
    info = rec.store_info()
    assert info["misuse"]["step_begin_while_open"] == 1
    assert info["misuse"]["step_end_without_fetch"] == 0   # step_end() did not close it
    assert info["probe_step_open"] is True
    assert info["test_clock_overrun"] == 0
    rec.step_end()            # past the end: the last value repeats, counted
    assert rec.store_info()["test_clock_overrun"] == 1
    assert fields(rec)[-1] == (1100, 1100, 1100, 0, 0, _core.FLAG_NO_FETCH)


def test_probe_misuse_with_the_test_clock_touches_no_record():
    rec = traceml.Recorder()
    rec._set_test_clock([10, 20, 30, 40, 50, 60])
    rec.fetch_done()          # 10: no open step
    rec.step_end()            # 20: no open step
    rec.step_begin()          # 30
    rec.fetch_done()          # 40
    rec.fetch_done()          # 50: repeated, the later one counts
    rec.step_end()            # 60
    assert fields(rec) == [(30, 50, 60, 0, 0, 0)]
    misuse = rec.store_info()["misuse"]
    assert misuse["fetch_done_without_step"] == 1
    assert misuse["step_end_without_step"] == 1
    assert misuse["fetch_done_repeated"] == 1


def test_wrap_steps_follow_the_test_clock_exactly():
    rec = traceml.Recorder()
    # iter(): 1000; each next(): call, done; the last next() finds the end.
    rec._set_test_clock([1000, 1010, 1030, 1100, 1120, 1300, 1340, 1500, 1510])
    got = [x for x in rec.wrap(["a", "b", "c"], name="letters")]
    assert got == ["a", "b", "c"]
    start = _core.FLAG_EPOCH_START
    shift = _core.FLAG_POS_SHIFT
    sid = rec.sources.by_name["letters"].id
    # Step i: from the call fetching batch i (the first from iter()) to the
    # call fetching batch i + 1; the last ends at the call that hits the end.
    assert fields(rec) == [
        (1000, 1030, 1100, 0, sid, start),
        (1100, 1120, 1300, 0, sid, 1 << shift),
        (1300, 1340, 1500, 0, sid, 2 << shift),
    ]
    assert rec.store_info()["test_clock_overrun"] == 0


def test_wrap_break_closes_the_step_at_release():
    rec = traceml.Recorder()
    rec._set_test_clock([0, 5, 7, 20, 26, 90])
    it = iter(rec.wrap(range(10), name="r"))
    next(it)                  # 5, 7
    next(it)                  # 20, 26
    it.close()                # 90
    assert [(b, f, e) for b, f, e, *_ in fields(rec)] == [(0, 7, 20), (20, 26, 90)]


def test_test_clock_refuses_bad_values():
    rec = traceml.Recorder()
    with pytest.raises(ValueError, match="empty"):
        rec._set_test_clock([])
    with pytest.raises(TypeError):
        rec._set_test_clock(5)
    with pytest.raises(TypeError):
        rec._set_test_clock(["x"])
    rec._set_test_clock([1, 2])
    rec._set_test_clock(None)      # back to CLOCK_MONOTONIC
    a = rec.clock_ns()
    assert abs(a - traceml.clock_ns()) < 10**9


# --- recorders are separate --------------------------------------------------------


def test_recorders_do_not_see_each_other():
    a, b = traceml.Recorder(), traceml.Recorder()
    assert a.id != b.id
    for _ in a.wrap([1, 2, 3], name="x"):
        pass
    for _ in b.wrap([1, 2], name="x"):
        pass
    b.step_begin()
    b.fetch_done()
    b.step_end()
    assert a.report(source="x")["steps"] == 3
    assert b.report(source="x")["steps"] == 2
    assert a.report(source="probes")["steps"] == 0
    assert b.report(source="probes")["steps"] == 1
    a.reset()
    assert a.store_info()["steps"] == 0 and b.store_info()["steps"] == 3


def test_context_manager_makes_the_recorder_the_default_and_restores():
    outer = _core.default_recorder()
    before = outer.store_info()["steps"]
    with traceml.Recorder() as rec:
        assert _core.default_recorder() is rec
        traceml.step_begin()
        traceml.fetch_done()
        traceml.step_end()
        for _ in traceml.wrap([1, 2], name="inside"):
            pass
        assert traceml.report(source="inside")["steps"] == 2
        with traceml.Recorder() as inner:
            assert _core.default_recorder() is inner
        assert _core.default_recorder() is rec
    assert _core.default_recorder() is outer
    assert outer.store_info()["steps"] == before
    assert "inside" not in outer.sources.by_name
    assert rec.report(source="probes")["steps"] == 1


def test_recorders_left_out_of_order_say_so_and_keep_the_default():
    outer = _core.default_recorder()
    a, b = traceml.Recorder(), traceml.Recorder()
    a.__enter__()
    b.__enter__()
    # a is not the default (b is): restoring a's outer would hand b's
    # steps to the recorder before a.
    with pytest.raises(RuntimeError, match="reverse order"):
        a.__exit__(None, None, None)
    assert _core.default_recorder() is b
    b.__exit__(None, None, None)
    assert _core.default_recorder() is a
    a.__exit__(None, None, None)
    assert _core.default_recorder() is outer
    with pytest.raises(RuntimeError, match="without a matching __enter__"):
        traceml.Recorder().__exit__(None, None, None)
    assert _core.default_recorder() is outer


def test_recorder_refuses_arguments_and_default_refuses_strangers():
    with pytest.raises(TypeError):
        traceml.Recorder(1)
    with pytest.raises(TypeError, match="recorder"):
        _core._set_default_recorder(object())


@pytest.mark.slow
def test_a_stuck_fetch_belongs_to_its_recorder_only():
    import threading
    import time

    traceml.configure(stuck_after_s=0.05, sampler_period_s=0.01)
    release = threading.Event()

    class Slow:
        def __iter__(self):
            return self

        def __next__(self):
            release.wait(5)
            raise StopIteration

    try:
        a, b = traceml.Recorder(), traceml.Recorder()
        it = iter(a.wrap(Slow(), name="slow"))
        watcher = threading.Thread(target=lambda: list(it))
        watcher.start()
        deadline = time.monotonic() + 5
        while not a.report()["stuck"] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert a.report()["stuck"], "the stuck watch saw nothing"
        assert not b.report()["stuck"]
        release.set()
        watcher.join(5)
        a.reset()
        assert not [ev for ev in _core.sampler_stuck() if ev["recorder"] == a.id]
    finally:
        release.set()
        traceml.configure(stuck_after_s=30.0, sampler_period_s=0.02)


# --- the three faults ---------------------------------------------------------------

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402 - after importorskip("torch")

from burn import BurnDataset  # noqa: E402 - after importorskip("torch")


def _burning_loader():
    # 16 batches of 2 items x 15 ms of CPU, 2 workers, against a 1 ms
    # consumer: the workers are busy through the whole run.
    return DataLoader(BurnDataset(32, 0.015), batch_size=2, num_workers=2)


def _worker_cpu_s(rep):
    iv = rep["workers"]["intervals"]
    assert iv is not None, rep["workers"]
    return (iv["slow"]["worker_cpu_s"] or 0.0) + (iv["fast"]["worker_cpu_s"] or 0.0)


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["zip", "nested"])
def test_zipped_or_nested_loader_keeps_its_worker_cpu(shape):
    """Each iter() of a wrapped object used to replace the sampler's one
    watch list: zip(wrap(loader), wrap(list)) lost the loader's workers and
    reported them idle."""
    import time

    with traceml.Recorder() as rec:
        loader = traceml.wrap(_burning_loader(), name="loader")
        if shape == "zip":
            loop = zip(loader, traceml.wrap(list(range(100)), name="other"))
        else:
            loop = traceml.wrap(loader, name="outer")
        for _ in loop:
            time.sleep(0.001)
        rep = rec.report(source="loader")
    assert rep["steps"] == 16
    # 32 items x 15 ms: about 0.48 s of worker CPU; the sampler's 10 ms
    # ticks lose a little at the edges.
    assert _worker_cpu_s(rep) > 0.2, rep["workers"]["intervals"]


@pytest.mark.slow
def test_two_sweeps_in_a_row_are_alike_and_leave_no_trace():
    """A second sweep used to continue the first sweep's sources (names
    restart at sweep#0): its reports carried the first sweep's PIDs and
    'worker PIDs changed at step 0'."""
    def make(num_workers):
        return DataLoader(BurnDataset(12, 0.002), batch_size=2, num_workers=num_workers)

    default = _core.default_recorder()
    before = (default.store_info()["steps"], set(default.sources.by_name))
    results = [traceml.sweep(make, num_workers=(2, 0), steps=5, consumer_pace_s=0.001,
                             progress=False) for _ in range(2)]
    for res in results:
        assert [r["error"] for r in res.rows] == [None] * 4
        for rep, row in zip(res.runs, res.rows):
            assert rep["steps"] == 5
            assert rep["workers"]["pid_changes"] == []
            pids = rep["workers"]["pids_by_epoch"]
            assert len(pids) == 1
            assert len(pids[0]["pids"] or []) == row["condition"]["num_workers"]
    first, second = ([(r["condition"], r["direction"]) for r in res.rows] for res in results)
    assert first == second
    assert [rep["source"] for rep in results[0].runs] == [rep["source"] for rep in results[1].runs]
    # The user's recording is untouched by construction.
    assert (default.store_info()["steps"], set(default.sources.by_name)) == before


@pytest.mark.slow
def test_module_is_freed_and_reimported(tmp_path):
    """The at-fork hook used to hold a bound method of the module, so the
    module could never be freed."""
    script = textwrap.dedent("""
        import gc, sys, weakref
        import traceml
        for _ in traceml.wrap([1, 2, 3]):
            pass
        ref = weakref.ref(sys.modules["traceml._core"])
        old_type = sys.modules["traceml._core"].Recorder
        del old_type
        for name in [m for m in sys.modules if m == "traceml" or m.startswith("traceml.")]:
            del sys.modules[name]
        del traceml
        gc.collect()
        assert ref() is None, gc.get_referrers(ref())
        import traceml
        assert sys.modules["traceml._core"] is not None
        for _ in traceml.wrap([1, 2]):
            pass
        assert traceml.report()["steps"] == 2
        import os
        pid = os.fork()
        if pid == 0:
            os._exit(0 if traceml._core.default_recorder().store_info()["steps"] == 0 else 3)
        assert os.waitpid(pid, 0)[1] == 0
        print("freed")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "freed"


def test_reducer_scratch_memory_is_visible_to_tracemalloc():
    """The reducers allocate through PyMem_Raw*: a leak of their scratch
    would show in tracemalloc (it could not while they used malloc)."""
    x = np.arange(100_000, dtype=np.int64)[::-1].copy()
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        _core.percentiles(x, [50.0, 95.0])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The selection's histogram alone is 65536 counters of 8 bytes; the
    # copy it selects in is 8 bytes a value.
    assert peak - base >= 65536 * 8


def test_reentrant_task_info_does_not_read_freed_memory():
    """A `_task_info` property that advances the same iterator: the outer
    fetch must not hold a pointer into buffers the inner one swapped or
    grew (tools/sanitize.sh runs this file under ASan)."""
    class Inner:
        def __init__(self):
            self.n = 0
            self.outer = None
            self.depth = 0
            self.table = {0: (0,), 1: (1,)}

        def __iter__(self):
            return self

        def __next__(self):
            self.n += 1
            if self.n > 12:
                raise StopIteration
            # Grow the table so that the buffers must be reallocated.
            self.table = {r: (r % 3,) for r in range(self.n, self.n + 4 * self.n)}
            return self.n

        @property
        def _task_info(self):
            if self.outer is not None and self.depth == 0 and self.n % 3 == 1:
                self.depth += 1
                try:
                    next(self.outer)
                except StopIteration:
                    pass
                finally:
                    self.depth -= 1
            return self.table

    rec = traceml.Recorder()
    inner = Inner()
    it = _core.WrapIter(inner, rec, 1, 0, rec.clock_ns(), track=True)
    inner.outer = it
    got = list(it)
    del inner.outer
    assert got and all(isinstance(v, int) for v in got)
    assert 1 <= rec.store_info()["steps"] <= 12


@pytest.mark.slow
def test_a_sampler_that_cannot_start_never_stops_timing():
    """The thread start fails (errno 11, EAGAIN): the loop is timed in full
    and the report says the evidence is unavailable and why."""
    import errno

    _core._sampler_shutdown()
    _core._sampler_fail_next_start(errno.EAGAIN)
    with traceml.Recorder() as rec:
        loader = DataLoader(BurnDataset(8, 0.001), batch_size=1, num_workers=1)
        for _ in traceml.wrap(loader, name="nosampler"):
            pass
        rep = rec.report(source="nosampler")
    assert rep["steps"] == 8
    smp = rep["workers"]["sampler"]
    assert smp["samples"] == 0
    assert "thread start failed" in smp["error"] and "errno 11" in smp["error"]
    assert rep["workers"]["intervals"] is None
    assert "sampler: unavailable (thread start failed" in str(rep)
    # The next loop starts the thread again, and the error is gone.
    for _ in traceml.Recorder().wrap(DataLoader(BurnDataset(4, 0.0), num_workers=1)):
        pass
    assert _core.sampler_info()["error"] is None


def test_abandon_step_ends_a_manual_loop_cleanly_at_stop_iteration():
    """step_begin(); next(it) raising StopIteration used to leave a step
    open, and step_end(); break recorded one step too many."""
    rec = traceml.Recorder()
    rec._set_test_clock([0, 4, 10, 10, 15, 30, 30])
    it = iter(["a", "b"])
    while True:
        rec.step_begin()
        try:
            next(it)
        except StopIteration:
            rec.abandon_step()
            break
        rec.fetch_done()
        rec.step_end()
    assert fields(rec) == [(0, 4, 10, 0, 0, 0), (10, 15, 30, 0, 0, 0)]
    info = rec.store_info()
    assert info["steps_abandoned"] == 1 and info["probe_step_open"] is False
    assert not any(info["misuse"].values())
    rec.abandon_step()            # nothing open: nothing happens
    assert rec.store_info()["steps_abandoned"] == 1
    with pytest.raises(TypeError, match="abandon_step"):
        rec.abandon_step(1)
    with traceml.Recorder() as inner:
        traceml.step_begin()
        traceml.abandon_step()
        assert inner.store_info()["steps_abandoned"] == 1


def test_the_sampler_defaults_have_one_source():
    """configure()'s defaults are the C core's (sampler.c), and a report
    built from hand-made inputs uses the same stuck threshold."""
    script = ("import traceml; s = traceml.configure(); "
              "print(s['stuck_after_s'] == traceml._core.DEFAULT_STUCK_AFTER_S, "
              "s['sampler_period_s'], s['sampler_capacity'])")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "0.02", str(1 << 17)]


def run_under_malloc_debug(code: str):
    """Run code in a fresh interpreter with CPython's debug allocator (a
    use after free reads poisoned memory there); it must exit 0."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONMALLOC": "malloc_debug"})
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    return out


def test_a_recorder_in_a_garbage_cycle_at_exit_does_not_crash():
    # The default recorder in a reference cycle, after a wrapped loop and a
    # report: at exit the cycle's collection could free the module before
    # the recorder, whose dealloc then read the freed sampler (SIGSEGV
    # under PYTHONMALLOC=malloc_debug).
    code = (
        "import traceml\n"
        "rec = traceml.Recorder()\n"
        "rec.me = rec\n"
        "with rec:\n"
        "    for _ in traceml.wrap(range(10)):\n"
        "        pass\n"
        "    traceml.report()\n"
        "traceml._core._set_default_recorder(rec)\n"
    )
    run_under_malloc_debug(code)


def test_module_level_probes_follow_the_default_recorder_and_survive_exit():
    # The module-level probes are bound to an object that holds the default
    # recorder (csrc/probes.c), not to the module: they must follow every
    # _set_default_recorder(), and a user's reference to them, called from
    # a finaliser of a garbage cycle at exit, must neither crash nor raise;
    # pickled, they come back as the module's own.
    code = (
        "import traceml\n"
        "from traceml import _core\n"
        "rec = _core.Recorder()\n"
        "old = _core._set_default_recorder(rec)\n"
        "traceml.step_begin(); traceml.fetch_done(); traceml.step_end()\n"
        "assert rec.store_info()['steps'] == 1\n"
        "assert old.store_info()['steps'] == 0\n"
        "_core._set_default_recorder(old)\n"
        "traceml.step_begin(); traceml.step_end()\n"
        "assert rec.store_info()['steps'] == 1\n"
        "assert old.store_info()['steps'] == 1\n"
        "class Late:\n"
        "    probes = (traceml.step_begin, traceml.fetch_done, traceml.step_end,\n"
        "              traceml.abandon_step)\n"
        "    def __del__(self):\n"
        "        for p in self.probes:\n"
        "            assert p() is None\n"
        "late = Late()\n"
        "late.me = late\n"
        "import pickle\n"
        "again = pickle.loads(pickle.dumps(traceml.step_begin))\n"
        "assert again == traceml.step_begin\n"
    )
    out = run_under_malloc_debug(code)
    assert "Exception ignored" not in out.stderr, out.stderr[-2000:]


def test_a_wrapped_iterable_wrapped_again_is_timed_once():
    rec = traceml.Recorder()
    inner = rec.wrap([1, 2, 3], name="once")
    with pytest.warns(UserWarning, match="already wraps"):
        again = rec.wrap(inner)
    assert again is inner
    for _ in again:
        pass
    assert rec.store_info()["steps"] == 3
    assert sorted(rec.sources.by_name) == ["once", "probes"]
    # A named outer wrap is a nesting asked for: both are timed
    # (test_zipped_or_nested_loader_keeps_its_worker_cpu).
    outer = rec.wrap(inner, name="outer")
    assert outer is not inner and outer.name == "outer"
