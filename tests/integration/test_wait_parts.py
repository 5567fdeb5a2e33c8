"""The measured parts of the input wait on real DataLoaders whose cost is
placed on purpose: in __getitem__ (the workers, or the main process with
num_workers=0) or in unpickling the batch in the main process (the
hand-over).  The largest part names where the cost was put, and HAND-OVER
follows it."""

import multiprocessing
import os
import time
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import traceml  # noqa: E402 - after importorskip("torch")
from traceml.findings import input_bound  # noqa: E402 - after importorskip("torch")

from burn import BurnDataset, burn_cpu  # noqa: E402 - after importorskip("torch")

warnings.filterwarnings("ignore", message=".*worker processes in total.*")
DataLoader = torch.utils.data.DataLoader


pytestmark = pytest.mark.usefixtures("sampler_off")


def _run(loader, body_cpu_s):
    rec = traceml.Recorder()
    for _ in rec.wrap(loader):
        burn_cpu(body_cpu_s)
    return rec.report()


class _CostlyToReceive:
    """A batch that costs ``cpu_s`` of CPU to unpickle in the main process
    (nothing in the worker)."""

    def __init__(self, i, cpu_s):
        self.i, self.cpu_s = i, cpu_s

    def __reduce__(self):
        return (_receive, (self.i, self.cpu_s))


def _receive(i, cpu_s):
    if torch.utils.data.get_worker_info() is None:
        burn_cpu(cpu_s)
    return i


def _collate_costly(items):
    return _CostlyToReceive(int(items[0]), 0.006)


def test_the_main_process_making_the_batch_is_its_cpu():
    # num_workers=0: 3 ms of CPU in each __getitem__, 1 ms in the body.
    r = _run(DataLoader(BurnDataset(60, 0.003), batch_size=1, num_workers=0), 0.001)
    parts = r["wait_parts"]["all"]
    assert parts["fetches"] == r["steady_steps"]
    # Of the process's own parts, its CPU is the largest; on a loaded host
    # the waits for a core inside the fetches may outweigh it (they are
    # the host's, measured apart).
    queued = {"cpu_wait", "host_cpu_wait", "others_cpu_wait", "worker_cpu_wait",
              "transit_cpu_wait"}
    own = {k: v for k, v in parts["parts_s"].items() if k not in queued}
    assert max(own, key=own.get) == "main_cpu"
    assert r["wait_parts"]["largest"]["part"] in {"main_cpu"} | queued
    # The CPU burned in the fetches, by this process's own count, is at
    # least 60 x 3 ms less the first fetch (start-up, not steady).
    assert parts["parts_s"]["main_cpu"] >= 0.9 * 59 * 0.003
    assert r["diagnosis"] == input_bound.INPUT_BOUND


@pytest.mark.slow
def test_a_batch_costly_to_receive_is_hand_over_by_its_measured_part():
    # The workers make each batch in microseconds; receiving it costs the
    # main process 6 ms of CPU, against a 3 ms body.
    loader = DataLoader(list(range(80)), batch_size=1, num_workers=2,
                        collate_fn=_collate_costly)
    r = _run(loader, 0.003)
    assert r["wait_parts"]["largest"]["part"] == "main_cpu", r["wait_parts"]
    assert r["diagnosis"] == input_bound.HAND_OVER
    lead = " ".join(r["next"])
    assert "More workers will not shorten this wait" in lead
    assert "the main process on a CPU inside the fetch" in lead
    assert "receiving the batch" in lead


class _SleepingBatchSampler(torch.utils.data.Sampler):
    """Batches of one index, each drawn after a ``sleep_s`` sleep (a
    sampler that queries something per batch): no CPU, in the main
    process at any num_workers."""

    def __init__(self, n, sleep_s):
        self.n, self.sleep_s = n, sleep_s

    def __len__(self):
        return self.n

    def __iter__(self):
        for i in range(self.n):
            time.sleep(self.sleep_s)
            yield [i]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_sleeping_sampler_is_the_samplers_part_not_the_hand_over(num_workers):
    # 6 ms asleep in the batch_sampler per batch, cheap items, a 2 ms body.
    # Unmeasured, that sleep read "asleep" (num_workers=0: "try num_workers
    # >= 1") or "in transit" (HAND-OVER: "fewer or smaller tensors").
    loader = DataLoader(list(range(50)), batch_sampler=_SleepingBatchSampler(50, 0.006),
                        num_workers=num_workers)
    r = _run(loader, 0.002)
    split = r["wait_parts"]["all"]
    assert r["wait_parts"]["largest"]["part"] == "sampler", split
    assert split["parts_s"]["sampler"] >= 0.9 * split["fetches"] * 0.006
    assert split["parts_s"]["sampler"] <= split["wait_s"]
    codes = [c for c, _ in r["next_items"]]
    assert "try_workers" not in codes
    said = " ".join(r["next"])
    assert "the sampler: it runs in the main process at any num_workers" in said
    assert "fewer or smaller tensors" not in said


@pytest.mark.slow
def test_a_worker_still_making_the_batch_is_input_bound():
    # One worker burning 10 ms a batch against a 2 ms body: the loop waits
    # on the worker making it.
    r = _run(DataLoader(BurnDataset(60, 0.010), batch_size=1, num_workers=1), 0.002)
    assert r["wait_parts"]["largest"]["part"] == "worker_making", r["wait_parts"]
    parts = r["wait_parts"]["all"]["parts_s"]
    assert parts["worker_making"] > sum(v for k, v in parts.items() if k != "worker_making")
    assert r["diagnosis"] == input_bound.INPUT_BOUND


def test_probe_steps_carry_their_fetch_and_body_clocks():
    # The fetch (step_begin to fetch_done) burns 3 ms of CPU, the body
    # (fetch_done to step_end) sleeps 2 ms: the clocks hold the fetch's CPU
    # and a body off the CPU, and the wait's largest part is the main
    # process's CPU.
    rec = traceml.Recorder()
    for _ in range(12):
        rec.step_begin()
        burn_cpu(0.003)
        rec.fetch_done()
        time.sleep(0.002)
        rec.step_end()
    step, cpu, runq, body_cpu, body_runq, _ = rec.snapshot_fetch_clocks()
    assert step.tolist() == list(range(12))
    assert (cpu >= 2_900_000).all(), cpu
    assert (body_cpu >= 0).all() and (body_cpu < 1_000_000).all(), body_cpu
    assert (runq >= 0).all() and (body_runq >= 0).all()
    r = rec.report()
    parts = r["wait_parts"]["all"]
    assert parts["fetches"] == 12
    wait = rec.snapshot()["fetch_done_ns"] - rec.snapshot()["begin_ns"]
    on_cpu = float(np.minimum(cpu, wait).sum()) * 1e-9
    assert parts["parts_s"]["main_cpu"] == pytest.approx(on_cpu, rel=1e-6)
    # Main CPU leads unless the thread waited for a core longer than it ran
    # (a loaded host: then that wait is the largest part).
    queued = sum(parts["parts_s"].get(k, 0.0) for k in ("cpu_wait", "host_cpu_wait"))
    want = "main_cpu" if queued < parts["parts_s"]["main_cpu"] else ("cpu_wait", "host_cpu_wait")
    assert r["wait_parts"]["largest"]["part"] in ((want,) if isinstance(want, str) else want)


def test_probe_clocks_are_sampled_past_the_first_fetches_and_skip_misuse():
    # The first 1024 steps clocked, then two in a row every 8191; a step
    # closed without fetch_done() or abandoned has no clocks, and the count
    # starts again at reset().
    rec = traceml.Recorder()
    n = 16500
    for i in range(n):
        rec.step_begin()
        if i == 7:
            rec.abandon_step()
            continue
        if i != 5:
            rec.fetch_done()
        rec.step_end()
    step = rec.snapshot_fetch_clocks()[0].tolist()
    kept = [k for k in range(n) if k != 7]            # the store's steps
    clocked = [i for i, k in enumerate(kept) if (k < 1024 or k % 8191 <= 1) and k != 5]
    assert step == clocked
    rec.reset()
    for _ in range(3):
        rec.step_begin()
        rec.fetch_done()
        rec.step_end()
    assert rec.snapshot_fetch_clocks()[0].tolist() == [0, 1, 2]


def _spin_on(core):
    os.sched_setaffinity(0, {core})
    while True:
        pass


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity")
def test_the_bodys_wait_for_a_core_is_measured_beside_a_hog_on_its_core():
    # The loop and a spinning process share one core: the body's 4 ms of
    # CPU take about twice that in wall time, the rest in the run queue.
    # The fetches (a list) cost nothing, so the note says the step waited
    # for a core longer than for input.
    core = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    hog = multiprocessing.get_context("fork").Process(target=_spin_on, args=(core,), daemon=True)
    hog.start()
    try:
        os.sched_setaffinity(0, {core})
        time.sleep(0.05)
        rec = traceml.Recorder()
        for _ in rec.wrap(list(range(40))):
            burn_cpu(0.004)
        r = rec.report()
    finally:
        os.sched_setaffinity(0, before)
        hog.kill()
        hog.join()
    c = r["wait_parts"]["compute"]
    assert c["steps"] >= 30
    parts = c["parts_s"]
    # The thread was either on the core or queued for it: the two add up
    # to the compute, and the queue holds a material part of it.
    assert parts["main_cpu"] + parts["cpu_wait"] >= 0.9 * c["compute_s"], c
    assert parts["cpu_wait"] >= 0.25 * c["compute_s"], c
    assert any("The training step itself waited" in n for n in r["notes"]), r["notes"]


def _sleepy_probe_steps(rec, n):
    for _ in range(n):
        rec.step_begin()
        time.sleep(0.004)
        rec.fetch_done()
        rec.step_end()


def test_a_thread_running_beside_the_wait_is_its_other_threads_part():
    # The probes' fetch sleeps 4 ms; beside it a thread of the same process
    # spins in pure Python (it takes the GIL whenever the loop sleeps).
    # The process's clock less the thread's puts that thread's CPU in the
    # fetch; without it, the same fetch holds no other thread's CPU.
    import threading

    quiet = traceml.Recorder()
    _sleepy_probe_steps(quiet, 20)
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            pass

    t = threading.Thread(target=spin, daemon=True)
    busy = traceml.Recorder()
    t.start()
    try:
        _sleepy_probe_steps(busy, 20)
    finally:
        stop.set()
        t.join()
    others_quiet = quiet.snapshot_fetch_clocks()[5]
    others_busy = busy.snapshot_fetch_clocks()[5]
    wait = busy.snapshot()["fetch_done_ns"] - busy.snapshot()["begin_ns"]
    assert (others_quiet >= 0).all() and (others_busy >= 0).all()
    assert others_quiet.sum() < 0.05 * wait.sum(), others_quiet
    # The spinning thread ran through much of each sleep (a core of its
    # own on this 2-core host, less what other programs took).
    assert others_busy.sum() > 0.25 * wait.sum(), (others_busy, wait)
    parts = busy.report()["wait_parts"]["all"]["parts_s"]
    assert parts["other_threads"] == pytest.approx(
        float(np.minimum(others_busy, wait).sum()) * 1e-9, rel=0.05)


def _short_switch_interval(_worker_id):
    import sys
    sys.setswitchinterval(2e-4)


@pytest.mark.slow
def test_batches_held_behind_another_workers_python_are_measured_apart():
    # Two workers; every 13th sample burns 30 ms in pure Python, the rest
    # 0.3 ms; the body sleeps 10 ms.  A worker in that Python holds its
    # GIL, which its queue's sender needs, and the senders share one lock:
    # the other worker's made batch waits.  Measured on the 2-core build
    # machine: 30-54% of the wait behind the other worker, 0-7% in transit;
    # with the workers' switch interval at 0.2 ms, 1%.
    def run(init):
        loader = DataLoader(BurnDataset(800, 0.0003, slow_every=13, slow_index=5,
                                        slow_cpu_s=0.030),
                            batch_size=4, num_workers=2, worker_init_fn=init)
        rec = traceml.Recorder()
        for _ in rec.wrap(loader):
            time.sleep(0.010)
        return rec.report()["wait_parts"]["all"]

    held = run(None)
    parts = held["parts_s"]
    assert parts["behind_worker"] >= 0.15 * held["wait_s"], held
    assert parts["behind_worker"] > parts["in_transit"], held
    quick = run(_short_switch_interval)
    assert quick["parts_s"]["behind_worker"] <= 0.5 * parts["behind_worker"], (held, quick)
