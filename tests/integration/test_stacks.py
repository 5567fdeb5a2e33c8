"""traceml._core.StackLog, the C sampler of Python stacks: its argument
checks, sampling in this process and in a forked child through the shared
mapping, and the SIGPROF state it leaves behind.  No torch."""

import os
import resource
import signal
import time

import numpy as np
import pytest

from traceml import _core, stacks


def spin_here(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def _leaf_names(samples, frames, codes):
    start = np.concatenate(([0], np.cumsum(samples[:, stacks.DEPTH])[:-1]))
    return [codes[frames[s, 0]][1] for s, row in zip(start, samples) if row[stacks.DEPTH]]


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="capacity"):
        _core.StackLog(capacity=0)
    log = _core.StackLog(capacity=16)
    with pytest.raises(ValueError, match="worker"):
        log.start(worker=-2)
    with pytest.raises(ValueError, match="interval_us"):
        log.start(interval_us=10)
    with pytest.raises(TypeError):
        log.start(worker="0")
    assert log.stop() is False      # never started


def test_sampling_this_process_counts_cpu_and_restores_sigprof():
    before = signal.getsignal(signal.SIGPROF)
    log = _core.StackLog()
    assert log.start(worker=-1, interval_us=5000) is None
    assert log.info()["running"] and log.info()["started"] == 1
    assert log.start() == "a traceml stack sampler already runs in this process"
    before_cpu = resource.getrusage(resource.RUSAGE_SELF)
    spin_here(0.3)
    after_cpu = resource.getrusage(resource.RUSAGE_SELF)
    assert log.stop() is True
    cpu_s = (after_cpu.ru_utime - before_cpu.ru_utime) + (after_cpu.ru_stime - before_cpu.ru_stime)
    assert signal.getsignal(signal.SIGPROF) == before
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    samples, frames, codes = log.drain()
    # 0.3 s of CPU at 5 ms a tick: at most about 60 ticks.  The kernel checks
    # a CPU-time timer on its scheduler tick and sends one signal per check,
    # so a kernel built with HZ=100 (a 10 ms tick) sends about 30: the lower
    # bound is half of what a 10 ms tick gives.  Against the process's own
    # CPU over the spin (getrusage), ticks of every thread.
    ticks = samples[:, stacks.WEIGHT].sum()
    coarsest_tick_s = 0.010
    assert 0.5 * cpu_s / coarsest_tick_s <= ticks <= 1.25 * cpu_s / 0.005 + 2, (ticks, cpu_s, log.info())
    assert cpu_s >= 0.29, cpu_s
    names = _leaf_names(samples, frames, codes)
    assert names.count("spin_here") >= 0.8 * len(names), names
    assert (samples[:, stacks.WORKER] == -1).all() and (samples[:, stacks.PID] == os.getpid()).all()
    assert log.info()["handler_errors"] == 0 and log.info()["lost"] == 0
    again, _, _ = log.drain()
    assert len(again) == 0


def test_a_handler_already_set_is_left_alone():
    def mine(signum, frame):
        pass

    old = signal.signal(signal.SIGPROF, mine)
    try:
        log = _core.StackLog()
        assert log.start() == "a SIGPROF handler was already set"
        assert signal.getsignal(signal.SIGPROF) is mine
        assert log.info()["refused"] == 1
    finally:
        signal.signal(signal.SIGPROF, old)
    signal.setitimer(signal.ITIMER_PROF, 10.0, 10.0)
    try:
        assert _core.StackLog().start() == "an ITIMER_PROF timer was already set"
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)


def test_a_stop_from_another_thread_leaves_sampling_possible():
    # A loader iterator collected in another thread stops the sampler there,
    # where signal.signal() refuses: the timer stops, and the Python-level
    # handler left is this log's idle _on_signal.  The next start in the main
    # thread takes it for traceml's own, samples, and its stop puts back what
    # was there before the first start.
    import threading

    before = signal.getsignal(signal.SIGPROF)
    first = _core.StackLog()
    assert first.start(worker=-1, interval_us=5000) is None
    raised = []

    def stop_there():
        try:
            first.stop()
        except ValueError as e:
            raised.append(e)

    t = threading.Thread(target=stop_there)
    t.start()
    t.join()
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    assert not first.info()["running"]
    second = _core.StackLog()
    assert second.start(worker=-1, interval_us=5000) is None
    spin_here(0.1)
    assert second.stop() is True
    assert len(second.drain()[0]) > 0
    assert signal.getsignal(signal.SIGPROF) == before
    third = _core.StackLog()
    assert third.start() is None
    assert third.stop() is True
    assert signal.getsignal(signal.SIGPROF) == before


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_samples_into_the_shared_log():
    log = _core.StackLog()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            if log.start(worker=3, interval_us=5000) is None:
                spin_here(0.2)
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    samples, frames, codes = log.drain()
    assert len(samples) and (samples[:, stacks.WORKER] == 3).all()
    assert (samples[:, stacks.PID] == pid).all()
    assert "spin_here" in _leaf_names(samples, frames, codes)
    # The child's sampling left this process's SIGPROF as it was.
    assert signal.getsignal(signal.SIGPROF) == signal.SIG_DFL
    # Only the process that made the log drains it.
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            log.drain()
        except RuntimeError as e:
            code = 0 if "only the process that made the log" in str(e) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_profiler_that_takes_sigprof_over_is_left_alone_at_stop():
    def theirs(signum, frame):
        pass

    log = _core.StackLog()
    assert log.start(worker=-1, interval_us=5000) is None
    signal.signal(signal.SIGPROF, theirs)
    signal.setitimer(signal.ITIMER_PROF, 0.05, 0.05)
    try:
        assert log.stop() is True
        assert signal.getsignal(signal.SIGPROF) is theirs
        assert signal.getitimer(signal.ITIMER_PROF)[1] == pytest.approx(0.05)
        assert log.info()["taken_over"] == 1
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, signal.SIG_DFL)
