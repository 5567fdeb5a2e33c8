"""Processes and threads: forked children record into their own store,
DataLoader workers work under every start method, the probes' bookkeeping
holds when two threads call them at once, report() runs beside the sampler
thread, and failures (a worker's exception, KeyboardInterrupt, break, exit)
leave a reportable record and no worker behind."""

import itertools
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
import traceback
import warnings

import numpy as np
import pytest

import traceml
from traceml import _core
from traceml.findings import worker_evidence

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402 - after importorskip("torch")

from burn import BurnDataset  # noqa: E402 - after importorskip("torch")

warnings.filterwarnings("ignore", message=".*worker processes in total.*")

_names = itertools.count()
DEFAULT_SAMPLER = dict(sampler=True, sampler_period_s=0.02, stuck_after_s=30.0,
                       sampler_capacity=1 << 17)


def uname(tag):
    return f"test_processes-{tag}-{next(_names)}"


@pytest.fixture(autouse=True)
def default_sampler():
    traceml.configure(**DEFAULT_SAMPLER)
    yield
    traceml.configure(**DEFAULT_SAMPLER)


def probe_steps(n):
    for _ in range(n):
        traceml.step_begin()
        traceml.fetch_done()
        traceml.step_end()


def alive(pid):
    """The process exists and has not exited (a zombie has exited)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_gone(pids, within_s):
    """Seconds until every pid has exited; fails after within_s."""
    t0 = time.monotonic()
    while any(alive(p) for p in pids):
        if time.monotonic() - t0 > within_s:
            still = [p for p in pids if alive(p)]
            pytest.fail(f"workers {still} still alive {within_s} s after the loop")
        time.sleep(0.01)
    return time.monotonic() - t0


def worker_pids(name, epoch=0):
    return traceml.report(source=name)["workers"]["pids_by_epoch"][epoch]["pids"]


def run_in_fork(child):
    """Run child() in an os.fork()ed child; its JSON-able result."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 0
        try:
            os.close(r)
            out = json.dumps(child()).encode()
            os.write(w, out)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            os.write(w, json.dumps({"child_error": repr(exc)}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r) as fh:
        data = fh.read()
    _, status = os.waitpid(pid, 0)
    result = json.loads(data) if data else {"child_error": f"no output, status {status}"}
    assert os.waitstatus_to_exitcode(status) == 0, result
    return result


def run_python(script, timeout=60, env=None):
    """Run script in a fresh interpreter importing this checkout's traceml
    (the build under test, sanitizer builds included)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(traceml.__file__)))
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env["PYTHONPATH"] = os.pathsep.join([root, tests, full_env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=root,
                          env=full_env, capture_output=True, text=True, timeout=timeout)
    _pass_on_sanitizer_reports(proc.stderr)
    return proc


def _pass_on_sanitizer_reports(stderr):
    """A sanitizer build's report in a child's captured stderr goes on to
    this process's fd 2, where tools/sanitize.sh looks for reports (UBSan
    has no log file).  Nothing happens in ordinary builds."""
    if "runtime error:" in stderr or "Sanitizer" in stderr:
        os.write(2, ("\n[child process stderr]\n" + stderr[-20000:]).encode())


# --------------------------------------------------------------------------
# fork


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_mid_loop_records_only_its_own_steps():
    probe_steps(3)
    traceml.step_begin()                      # a probe step open at the fork
    name = uname("fork-mid-loop")
    it = iter(traceml.wrap(list(range(6)), name=name))
    try:
        _fork_mid_loop(it, name)
    finally:
        it.close()


def _fork_mid_loop(it, name):
    assert [next(it), next(it)] == [0, 1]     # step 1 open at the fork
    assert _core.sampler_info()["running"]
    parent_before = _core.default_recorder().snapshot().copy()
    info_before = _core.default_recorder().store_info()

    def child():
        out = {
            "inherited": len(_core.default_recorder().snapshot()),
            "probe_open": _core.default_recorder().store_info()["probe_step_open"],
            "sampler_running": _core.sampler_info()["running"],
            "samples": len(_core.sampler_samples()),
        }
        out["rest"] = list(it)                # the inherited loop goes on
        probe_steps(2)
        out["list_steps"] = traceml.report(source=name)["steps"]
        out["probe_steps"] = traceml.report(source="probes")["steps"]
        out["store_steps"] = _core.default_recorder().store_info()["steps"]
        return out

    got = run_in_fork(child)
    assert got == {"inherited": 0, "probe_open": False, "sampler_running": False,
                   "samples": 0, "rest": [2, 3, 4, 5],
                   # the step open at the fork is the parent's: not recorded
                   "list_steps": 4, "probe_steps": 2, "store_steps": 6}
    # The parent is untouched and goes on where it was.
    np.testing.assert_array_equal(_core.default_recorder().snapshot(), parent_before)
    assert _core.default_recorder().store_info() == info_before
    assert _core.sampler_info()["running"]
    assert list(it) == [2, 3, 4, 5]
    traceml.fetch_done()
    traceml.step_end()
    assert traceml.report(source=name)["steps"] == 6
    assert traceml.report(source="probes")["steps"] == 4


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_runs_its_own_worker_loader():
    probe_steps(2)
    parent_before = _core.default_recorder().snapshot().copy()
    name = uname("fork-child-loader")

    def child():
        loader = DataLoader(BurnDataset(12, 0.0), batch_size=2, num_workers=2,
                            multiprocessing_context="fork")
        ids = sorted(int(i) for b in traceml.wrap(loader, name=name) for i in b)
        rep = traceml.report(source=name)
        return {"ids": ids, "steps": rep["steps"], "all": _core.default_recorder().store_info()["steps"],
                "pids": rep["workers"]["pids_by_epoch"][0]["pids"],
                "me": os.getpid()}

    got = run_in_fork(child)
    assert got["ids"] == list(range(12))
    assert got["steps"] == 6 and got["all"] == 6
    assert len(got["pids"]) == 2 and got["me"] not in got["pids"]
    np.testing.assert_array_equal(_core.default_recorder().snapshot(), parent_before)
    with pytest.raises(ValueError):
        traceml.report(source=name)           # the parent never saw it


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_inherited_loop_ending_in_a_child_does_not_stop_the_childs_sampler():
    it = iter(traceml.wrap(list(range(5)), name=uname("fork-watch-parent")))
    next(it)

    def child():
        own = iter(traceml.wrap(list(range(5)), name=uname("fork-watch-child")))
        next(own)
        before = _core.sampler_info()["running"]
        it.close()                        # the parent's loop, inherited
        after = _core.sampler_info()["running"]
        own.close()
        return [before, after]

    try:
        got = run_in_fork(child)
    finally:
        it.close()      # a failing test must not leave a loop (and sampler) on
    assert got == [True, True]


# --------------------------------------------------------------------------
# DataLoader workers under each start method


@pytest.mark.parametrize("method", [
    "fork",
    pytest.param("spawn", marks=pytest.mark.slow),
    pytest.param("forkserver", marks=pytest.mark.slow),
])
def test_wrapped_workers_under_each_start_method(method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} here")
    loader = DataLoader(BurnDataset(16, 0.0), batch_size=2, num_workers=2,
                        multiprocessing_context=method)
    name = uname(method)
    ids = sorted(int(i) for b in traceml.wrap(loader, name=name) for i in b)
    assert ids == list(range(16))
    rep = traceml.report(source=name)
    assert rep["steps"] == 8
    assert rep["host"]["start_method"] == method
    assert rep["loader"]["num_workers"] == 2
    assert rep["delivery"]["known"] == 8
    assert sorted(rep["delivery"]["ranks"]) == list(range(8))
    pids = rep["workers"]["pids_by_epoch"][0]["pids"]
    assert len(pids) == 2 and os.getpid() not in pids
    wait_gone(pids, within_s=10)
    str(rep)


# --------------------------------------------------------------------------
# threads


def test_probes_from_two_threads_keep_the_bookkeeping():
    """Probes are process-wide and serialised by the GIL: calls from two
    threads interleave, and every call is accounted for.  With B, F, E the
    step_begin, fetch_done and step_end calls:

      records             = (E - step_end_without_step) + IMPLICIT_END records
      B                   = records + (1 if a step is still open else 0)
      NO_FETCH records    = step_end_without_fetch + step_begin_while_open
      IMPLICIT_END and NO_FETCH records = step_begin_while_open
      F                   = fetch_done_without_step + fetch_done_repeated
                            + (records - NO_FETCH records)   [none open]
    """
    n = 20_000
    counts = {}
    errors = []
    start = threading.Barrier(3)

    def prober(seed):
        rng = random.Random(seed)
        c = {"B": 0, "F": 0, "E": 0}
        probes = [("B", traceml.step_begin), ("F", traceml.fetch_done),
                  ("E", traceml.step_end)]
        try:
            start.wait()
            for _ in range(n):
                key, probe = rng.choice(probes)
                probe()
                c[key] += 1
        except BaseException as exc:  # noqa: BLE001 - collected, asserted empty
            errors.append(exc)
        counts[seed] = c

    def reporter():
        start.wait()
        while len(counts) < 2 and not errors:
            try:
                rep = traceml.report(source="probes")
                str(rep)
            except BaseException as exc:  # noqa: BLE001 - collected, asserted empty
                errors.append(exc)
                return

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)   # interleave as finely as the GIL allows
    try:
        threads = [threading.Thread(target=prober, args=(s,)) for s in (1, 2)]
        threads.append(threading.Thread(target=reporter))
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        sys.setswitchinterval(switch)
    assert not errors, errors
    traceml.step_end()     # close any open step: one more E
    B = sum(c["B"] for c in counts.values())
    F = sum(c["F"] for c in counts.values())
    E = sum(c["E"] for c in counts.values()) + 1
    assert B + F + E == 2 * n + 1

    info = _core.default_recorder().store_info()
    m = info["misuse"]
    rec = _core.default_recorder().snapshot()
    records = len(rec)
    assert info["dropped_steps"] == 0 and not info["probe_step_open"]
    assert records == info["steps"]
    assert (rec["source"] == 0).all()
    assert B == records
    no_fetch = (rec["flags"] & _core.FLAG_NO_FETCH) != 0
    implicit = (rec["flags"] & _core.FLAG_IMPLICIT_END) != 0
    assert records == (E - m["step_end_without_step"]) + int(implicit.sum())
    assert int(no_fetch.sum()) == m["step_end_without_fetch"] + m["step_begin_while_open"]
    assert int((implicit & no_fetch).sum()) == m["step_begin_while_open"]
    assert F == (m["fetch_done_without_step"] + m["fetch_done_repeated"]
                 + records - int(no_fetch.sum()))
    assert not (rec["flags"] & ~np.uint16(_core.FLAG_NO_FETCH | _core.FLAG_IMPLICIT_END)).any()
    assert (rec["begin_ns"] <= rec["fetch_done_ns"]).all()
    assert (rec["fetch_done_ns"] <= rec["end_ns"]).all()
    assert (rec["fetch_done_ns"][no_fetch] == rec["begin_ns"][no_fetch]).all()
    assert (np.diff(rec["end_ns"]) >= 0).all()    # closed in clock order
    # Each recorded step begins after the previous one.
    assert (np.diff(rec["begin_ns"]) > 0).all()
    rep = traceml.report(source="probes")
    assert rep["steps"] == records and rep["misuse"] == m


def test_report_from_another_thread_while_the_sampler_runs():
    traceml.configure(sampler_period_s=0.005)
    name = uname("concurrent-report")
    loader = DataLoader(BurnDataset(48, 0.004), batch_size=1, num_workers=2,
                        multiprocessing_context="fork")
    seen = []
    errors = []
    done = threading.Event()

    def reporter():
        while not done.is_set():
            try:
                if name in _core.default_recorder().sources.by_name:
                    rep = traceml.report(source=name)
                    str(rep)
                    d = rep.to_dict()
                    seen.append((d["steps"], (d["workers"] or {}).get("sampler", {})
                                 .get("samples", 0)))
                _core.sampler_info()
                _core.sampler_samples()
            except BaseException as exc:  # noqa: BLE001 - collected, asserted empty
                errors.append(exc)
                return
            # A pause between reports: without one this thread takes the
            # GIL back at every switch interval, and the loop's first
            # fetch (torch's seed draw in the DataLoader iterator, which
            # gives the GIL up and takes it back many times) took 47-166 s.
            time.sleep(0.001)

    loops_before = _core.sampler_info()["active_loops"]
    t = threading.Thread(target=reporter)
    t.start()
    try:
        for i, _b in enumerate(traceml.wrap(loader, name=name)):
            assert _core.sampler_info()["running"]
            if i == 24:
                # Make sure reports ran during the loop, however loaded the
                # machine: hold the loop until three have.
                deadline = time.monotonic() + 30
                while len(seen) < 3 and not errors and time.monotonic() < deadline:
                    time.sleep(0.005)
            time.sleep(0.002)
    finally:
        done.set()
        t.join(60)
    assert not errors, errors
    assert len(seen) >= 3, seen
    steps = [s for s, _ in seen]
    assert steps == sorted(steps) and steps[-1] <= 48
    final = traceml.report(source=name)
    assert final["steps"] == 48
    assert final["workers"]["sampler"]["samples"] > 0
    assert _core.sampler_info()["ticks"] >= 3
    # The loop is over: it no longer keeps the sampler on.
    assert _core.sampler_info()["active_loops"] == loops_before
    wait_gone(final["workers"]["pids_by_epoch"][0]["pids"], within_s=10)


# --------------------------------------------------------------------------
# the sampler reads every thread of a watched process

# A child whose main thread waits (on stdin, a join, an Event) while its
# other threads do as the test asks: "burn S" (one helper thread burns S s
# of CPU and prints [monotonic ns at start, at end, its thread CPU ns]),
# "churn N S" (N helpers one after another, S s of CPU each, each exiting),
# "idle N" (N threads that wait), "exit".
_THREADS_CHILD = textwrap.dedent("""
    import json, sys, threading, time

    def burn(seconds):
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass

    def helper(seconds):
        m0, c0 = time.monotonic_ns(), time.thread_time_ns()
        burn(seconds)
        print(json.dumps([m0, time.monotonic_ns(), time.thread_time_ns() - c0]), flush=True)

    stop = threading.Event()
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "burn":
            t = threading.Thread(target=helper, args=(float(cmd[1]),))
            t.start()
            t.join()
        elif cmd[0] == "churn":
            for _ in range(int(cmd[1])):
                t = threading.Thread(target=burn, args=(float(cmd[2]),))
                t.start()
                t.join()
            print("done", flush=True)
        elif cmd[0] == "idle":
            for _ in range(int(cmd[1])):
                threading.Thread(target=stop.wait).start()
            print("done", flush=True)
        else:
            stop.set()
            break
""")


class _ThreadsChild:
    """The child above, watched by the sampler (with this process) while
    the `with` block runs."""

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", _THREADS_CHILD], text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdout.readline() == "ready\n"
        self.pid = self.proc.pid
        rec = traceml.Recorder()
        self.it = _core.WrapIter(iter([]), rec, 1, 0, rec.clock_ns(),
                                 watch=[os.getpid(), self.pid])
        assert self.it.watching
        return self

    def ask(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def readline(self):
        return self.proc.stdout.readline()

    def samples(self):
        s = _core.sampler_samples()
        return s[s["pid"] == self.pid]

    def __exit__(self, *exc):
        self.it.close()
        try:
            self.ask("exit")
        except BrokenPipeError:
            pass
        self.proc.wait(30)


def _leader_state(pid):
    """/proc/PID/stat's state: the thread-group leader's alone."""
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


def _leader_cpu_ns(pid):
    """/proc/PID/schedstat's on-CPU ns: the leader's alone."""
    with open(f"/proc/{pid}/schedstat") as fh:
        return int(fh.read().split()[0])


def _wait_readings(child, n, within_s=10.0):
    deadline = time.monotonic() + within_s
    while len(child.samples()) < n and time.monotonic() < deadline:
        time.sleep(0.01)


def test_sampler_counts_a_helper_thread_that_burns_while_the_main_thread_sleeps():
    """The user trial's shape: the work runs in a helper thread while the
    main thread waits.  The leader alone (/proc/PID/stat state and
    /proc/PID/schedstat) reads asleep and idle; the readings say running,
    with the helper's CPU as the helper itself measured it."""
    burn_s = 0.5
    with _ThreadsChild() as child:
        _wait_readings(child, 3)
        leader0 = _leader_cpu_ns(child.pid)
        child.ask(f"burn {burn_s}")
        leader_states = []
        while len(leader_states) < 3:       # during the burn
            time.sleep(0.05)
            leader_states.append(_leader_state(child.pid))
        m0, m1, helper_cpu_ns = json.loads(child.readline())
        leader_cpu_ns = _leader_cpu_ns(child.pid) - leader0
        n_after = len(child.samples()) + 3
        _wait_readings(child, n_after)      # readings after the helper exited
        s = child.samples()
        mine = _core.sampler_samples()
        mine = mine[(mine["pid"] == os.getpid()) & (mine["t_ns"] >= m0) & (mine["t_ns"] <= m1)]
        my_threads = len(os.listdir("/proc/self/task"))
        info = [p for p in _core.sampler_info()["procs"] if p["pid"] == child.pid][0]
    # What the leader-only figures said: asleep, (nearly) no CPU.
    assert leader_states == ["S"] * 3
    assert leader_cpu_ns < 0.1 * helper_cpu_ns
    assert helper_cpu_ns >= burn_s * 1e9
    assert info["errors"] == {"stat": None, "io": None, "schedstat": None,
                              "smaps_rollup": None, "task": None}
    assert info["threads_skipped"] == 0
    # Cumulative, never backwards, though the helper has gone.
    assert (np.diff(s["cpu_ns"]) >= 0).all() and (np.diff(s["runq_ns"]) >= 0).all()
    assert s["threads"][-1] == 1 and s["threads"].max() == 2
    # The whole run's CPU is the helper's (the main thread only waited),
    # less at most the helper's last moments before it exited (under one
    # 20 ms period; 0.1 s allowed for a loaded host).
    total = int(s["cpu_ns"][-1] - s["cpu_ns"][0])
    assert helper_cpu_ns - 1e8 <= total <= helper_cpu_ns + 5e7, (total, helper_cpu_ns)
    # Inside the burn: every reading running, and a core's worth busy or
    # waiting for one (so a loaded 2-CPU host cannot make it look idle).
    inside = s[(s["t_ns"] >= m0) & (s["t_ns"] <= m1)]
    assert len(inside) >= 5
    assert bytes(inside["state"].astype(np.uint8)) == b"R" * len(inside)
    assert (inside["threads"] == 2).all()
    wall = float(inside["t_ns"][-1] - inside["t_ns"][0])
    cores = float(inside["cpu_ns"][-1] - inside["cpu_ns"][0]) / wall
    runnable = cores + float(inside["runq_ns"][-1] - inside["runq_ns"][0]) / wall
    # (On CPU at least a tenth of a core: beside 8 runnable threads on 2
    # CPUs a spinning thread gets about a quarter; runnable holds the rest.)
    assert 0.1 <= cores <= 1.1 and 0.7 <= runnable <= 1.3, (cores, runnable)
    # This process meanwhile waited in sleep() and readline(): the sampler's
    # own thread, running as it reads, is left out of it (its figures are
    # traceml's), so it does not read R.
    assert len(mine) >= 5 and (mine["state"] == ord("R")).mean() < 0.5, bytes(
        mine["state"].astype(np.uint8))
    assert (mine["threads"] == my_threads - 1).all(), (mine["threads"], my_threads)
    # So the awaited-worker verdict no longer reads it as blocked.
    asleep = sum(chr(c) in worker_evidence.BLOCKED_STATES for c in inside["state"])
    assert worker_evidence.awaited_blocked(len(inside), asleep, cores) is False


def test_sampler_thread_sums_never_go_back_as_threads_come_and_go():
    """Threads that exit take their schedstat with them; the readings add
    each thread's growth instead, so they stay cumulative, and never
    exceed the CPU /proc/PID/stat counts for every thread, dead ones
    too."""
    with _ThreadsChild() as child:
        _wait_readings(child, 2)
        child.ask("churn 12 0.02")
        assert child.readline() == "done\n"
        _wait_readings(child, len(child.samples()) + 2)
        s = child.samples()
        info = [p for p in _core.sampler_info()["procs"] if p["pid"] == child.pid][0]
    assert not any(info["errors"].values()), info["errors"]
    assert (np.diff(s["cpu_ns"]) >= 0).all() and (np.diff(s["runq_ns"]) >= 0).all()
    tick_ns = 1e9 / os.sysconf("SC_CLK_TCK")
    by_stat = float((s["utime_ticks"] + s["stime_ticks"])[-1]
                    - (s["utime_ticks"] + s["stime_ticks"])[0]) * tick_ns
    by_threads = float(s["cpu_ns"][-1] - s["cpu_ns"][0])
    assert 0 < by_threads <= by_stat + 3 * tick_ns, (by_threads, by_stat)


def test_sampler_reads_at_most_64_threads_and_counts_the_rest():
    """80 idle threads and the main one: each reading reads 64 and leaves
    81 - 64 = 17 out, counted in sampler_info()'s threads_skipped."""
    with _ThreadsChild() as child:
        child.ask("idle 80")
        assert child.readline() == "done\n"
        # Each new thread runs on a moment past its start() before it
        # blocks in wait(): a reading in that moment saw one running
        # (b"RSS" in a fresh-clone CI run).  The readings begun 50 ms on.
        settled = traceml.clock_ns() + 50_000_000
        n0 = len(child.samples())
        _wait_readings(child, n0 + 6)
        child.it.close()          # no more readings: the counts hold still
        s = child.samples()[n0:]   # begun once all 80 had started
        info = [p for p in _core.sampler_info()["procs"] if p["pid"] == child.pid][0]
        total = len(child.samples())
    assert len(s) >= 3 and (s["threads"] == 64).all()
    quiet = s[s["t_ns"] >= settled]
    assert len(quiet) >= 1
    assert bytes(quiet["state"].astype(np.uint8)) == b"S" * len(quiet)
    # Readings taken while the 80 were starting left out fewer.
    assert 17 * len(s) <= info["threads_skipped"] <= 17 * total


def test_a_child_forked_mid_reading_keeps_no_thread_file_of_the_parent():
    """The sampler opens each thread's files for a moment; a child forked
    in that moment would inherit the descriptor, so traceml's fork hooks
    hold the readings off across fork() (without, 8 and 16 forks of 40
    here kept one)."""
    traceml.configure(sampler_period_s=0.001)
    kept = []
    with _ThreadsChild() as child:
        child.ask("idle 60")          # a long walk each tick
        assert child.readline() == "done\n"
        _wait_readings(child, len(child.samples()) + 3)
        for _ in range(20):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                try:
                    os.close(r)
                    links = []
                    for fd in os.listdir("/proc/self/fd"):
                        try:
                            links.append(os.readlink(f"/proc/self/fd/{fd}"))
                        except OSError:
                            pass
                    os.write(w, json.dumps([x for x in links if "/task/" in x]).encode())
                finally:
                    os._exit(0)
            os.close(w)
            with os.fdopen(r) as fh:
                kept += json.loads(fh.read())
            os.waitpid(pid, 0)
            time.sleep(0.0005 * random.random())
    assert kept == []


def test_two_threads_pulling_from_one_wrapped_iterator():
    """Sharing one wrapped iterator between threads is outside the design
    (use the probes and loops from one thread), but must not crash: every
    item comes out once, and each step recorded is well formed."""

    class Slow:
        """A thread-safe iterator that releases the GIL in every fetch."""

        def __init__(self, n):
            self.items = iter(range(n))
            self.lock = threading.Lock()

        def __iter__(self):
            return self

        def __next__(self):
            time.sleep(0.0005)
            with self.lock:
                return next(self.items)

    n = 400
    name = uname("shared-iter")
    it = iter(traceml.wrap(Slow(n), name=name))
    got = [[], []]
    errors = []

    def pull(k):
        try:
            for x in it:
                got[k].append(x)
        except BaseException as exc:  # noqa: BLE001 - collected, asserted empty
            errors.append(exc)

    threads = [threading.Thread(target=pull, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert sorted(got[0] + got[1]) == list(range(n))
    assert it.inner is None
    rec = traceml.report(source=name).steps
    assert 1 <= len(rec) <= n
    assert (rec["begin_ns"] <= rec["fetch_done_ns"]).all()
    assert (rec["fetch_done_ns"] <= rec["end_ns"]).all()


@pytest.mark.slow
def test_reducer_input_mutated_by_another_thread_does_not_corrupt_memory():
    proc = run_python("""
        import threading, time
        import numpy as np
        from traceml import _core

        n = 1 << 21
        a = np.zeros(n, dtype=np.int64)
        narrow = np.arange(n, dtype=np.int64) % 1000
        wide = np.arange(n, dtype=np.int64) * (1 << 40)
        stop = False

        def flip():
            while not stop:
                np.copyto(a, wide)
                np.copyto(a, narrow)

        t = threading.Thread(target=flip)
        t.start()
        end = time.monotonic() + 3
        try:
            while time.monotonic() < end:
                _core.percentiles(a, [1.0, 50.0, 99.0])
                _core.summary(a)
                _core.log_otsu(a[:5000])
        finally:
            stop = True
            t.join()
        print("survived")
    """, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "survived" in proc.stdout


# --------------------------------------------------------------------------
# failures


class BrokenItem(Exception):
    """Raised by FailingDataset; importable, so it survives pickling."""


class FailingDataset(BurnDataset):
    def __init__(self, n, fail_at):
        super().__init__(n, 0.0)
        self.fail_at = fail_at

    def __getitem__(self, i):
        if i == self.fail_at:
            raise BrokenItem(f"item {i} is broken")
        return super().__getitem__(i)


FAIL_AT = 9


def _failing_loader():
    # batch_size 2: item 9 is in batch 4, so batches 0..3 arrive first.
    return DataLoader(FailingDataset(16, fail_at=FAIL_AT), batch_size=2, num_workers=2,
                      multiprocessing_context="fork")


def test_worker_exception_reaches_the_loop_unchanged():
    got = []
    with pytest.raises(BrokenItem) as bare:
        for b in _failing_loader():
            got.append(b)
    name = uname("worker-exception")
    wrapped_got = []
    with pytest.raises(BrokenItem) as wrapped:
        for b in traceml.wrap(_failing_loader(), name=name):
            wrapped_got.append(b)
    assert type(wrapped.value) is type(bare.value) is BrokenItem
    assert str(wrapped.value) == str(bare.value)
    assert "item 9 is broken" in str(wrapped.value)
    assert type(wrapped.value.__context__) is type(bare.value.__context__)
    assert len(wrapped_got) == len(got) == 4
    rep = traceml.report(source=name)
    assert rep["steps"] == 4                  # the batches that arrived
    str(rep)
    rep.to_dict()
    # The exceptions' tracebacks hold torch's frames, whose `self` is the
    # DataLoader iterator, in a reference cycle (torch's reraise() frame
    # holds the exception), so the workers live on until a collection --
    # for the bare loader too, and a collected iterator takes torch 10 s to
    # shut down here.  Clearing the frames releases it at once.
    for info in (bare, wrapped):
        traceback.clear_frames(info.value.__traceback__)
    del bare, wrapped
    wait_gone(worker_pids(name), within_s=10)


def test_keyboard_interrupt_from_the_loop_body_leaves_a_record():
    name = uname("ctrl-c-body")
    loader = DataLoader(BurnDataset(40, 0.001), batch_size=2, num_workers=2,
                        multiprocessing_context="fork")
    with pytest.raises(KeyboardInterrupt):
        for i, _b in enumerate(traceml.wrap(loader, name=name)):
            if i == 3:
                raise KeyboardInterrupt
    rep = traceml.report(source=name)
    assert rep["steps"] == 4                  # the interrupted step closes too
    assert "steps" in str(rep)
    wait_gone(worker_pids(name), within_s=10)


class SlowAfter(BurnDataset):
    """Items from `slow_from` on take `slow_s` of wall time (asleep)."""

    def __init__(self, n, slow_from, slow_s):
        super().__init__(n, 0.0)
        self.slow_from = slow_from
        self.slow_s = slow_s

    def __getitem__(self, i):
        if i >= self.slow_from:
            time.sleep(self.slow_s)
        return super().__getitem__(i)


@pytest.mark.slow
def test_sigint_while_waiting_for_a_worker_leaves_a_record():
    """Ctrl-C arrives while the loop is blocked inside the DataLoader's
    __next__: the KeyboardInterrupt comes out of the wrapped iterator and
    the steps before it stay reportable."""
    name = uname("ctrl-c-fetch")
    loader = DataLoader(SlowAfter(12, slow_from=4, slow_s=1.5), batch_size=1,
                        num_workers=2, multiprocessing_context="fork", prefetch_factor=1)
    armed = threading.Event()

    def on_sigint(signum, frame):
        if armed.is_set():
            armed.clear()
            raise KeyboardInterrupt

    old = signal.signal(signal.SIGINT, on_sigint)
    timer = None
    try:
        with pytest.raises(KeyboardInterrupt) as info:
            for i, _b in enumerate(traceml.wrap(loader, name=name)):
                if i == 3:
                    # The next fetch waits ~1.5 s for a sleeping worker.
                    armed.set()
                    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
                    timer.start()
        interrupted_at = traceml.clock_ns()
        # It came out of the DataLoader's __next__, through the wrapper.
        frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
        assert "__next__" in frames
        traceback.clear_frames(info.value.__traceback__)
        del info
    finally:
        armed.clear()
        if timer is not None:
            timer.join()
        signal.signal(signal.SIGINT, old)
    rep = traceml.report(source=name)
    assert rep["steps"] == 4
    assert rep.steps["end_ns"][-1] <= interrupted_at
    str(rep)
    wait_gone(worker_pids(name), within_s=15)


@pytest.mark.parametrize("how", ["break", "close", "exhaust"])
def test_leaving_a_worker_loop_stops_its_workers_at_once(how):
    name = uname(f"leave-{how}")
    n = 12 if how == "exhaust" else 400
    loader = DataLoader(BurnDataset(n, 0.002), batch_size=2, num_workers=2,
                        multiprocessing_context="fork")
    w = traceml.wrap(loader, name=name)
    if how == "break":
        for i, _b in enumerate(w):
            if i == 3:
                pids = worker_pids(name)
                assert all(alive(p) for p in pids)
                break
    elif how == "close":
        it = iter(w)
        for _ in range(4):
            next(it)
        pids = worker_pids(name)
        assert all(alive(p) for p in pids)
        it.close()
    else:
        for _b in w:
            pass
        pids = worker_pids(name)
    waited = wait_gone(pids, within_s=5)
    assert waited < 5
    assert not set(pids) & {p.pid for p in multiprocessing.active_children()}
    steps = traceml.report(source=name)["steps"]
    assert steps == (6 if how == "exhaust" else 4)
    if how == "close":
        del it


@pytest.mark.slow
def test_interpreter_exit_mid_epoch_is_clean():
    """Leaving the interpreter while wrapped multi-worker loops are open
    (one held in a global, one in a reference cycle) exits cleanly, and
    the workers do not outlive it."""
    proc = run_python("""
        import json, os, sys
        import traceml
        from torch.utils.data import DataLoader
        from burn import BurnDataset

        traceml.configure(sampler_period_s=0.005)
        loaders = [DataLoader(BurnDataset(200, 0.001), batch_size=2, num_workers=2,
                              multiprocessing_context="fork") for _ in range(2)]
        held = iter(traceml.wrap(loaders[0], name="held"))
        for _ in range(3):
            next(held)
        cycle = [iter(traceml.wrap(loaders[1], name="cycle"))]
        cycle.append(cycle)
        next(cycle[0])
        traceml.step_begin()
        rep = traceml.report(source="held")
        pids = rep["workers"]["pids_by_epoch"][0]["pids"]
        pids += traceml.report(source="cycle")["workers"]["pids_by_epoch"][0]["pids"]
        print(json.dumps(pids), flush=True)
    """, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Fatal Python error" not in proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    pids = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(pids) == 4
    wait_gone(pids, within_s=10)
