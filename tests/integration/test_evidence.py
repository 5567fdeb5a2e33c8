"""Worker and delivery evidence on real DataLoaders with controlled
per-item CPU cost: delivery order, worker PIDs, /proc counters in slow and
fast intervals, stuck loaders, unavailable counters."""

import json
import os
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import traceml  # noqa: E402 - after importorskip("torch")
from traceml import _core, evidence  # noqa: E402 - after importorskip("torch")
from traceml.findings import sentences  # noqa: E402 - after importorskip("torch")
from traceml.findings import worker_evidence  # noqa: E402 - after importorskip("torch")

from burn import BurnDataset  # noqa: E402 - after importorskip("torch")

warnings.filterwarnings("ignore", message=".*worker processes in total.*")
DataLoader = torch.utils.data.DataLoader


def _sentences(iv, num_workers, cpus):
    """The evidence sentences of intervals ``iv`` (findings, then wording)."""
    return sentences(evidence.interval_findings(iv, num_workers, cpus))


@pytest.fixture(autouse=True)
def default_sampler():
    traceml.configure(sampler=True, sampler_period_s=0.02, stuck_after_s=30.0)
    yield
    traceml.configure(sampler=True, sampler_period_s=0.02, stuck_after_s=30.0)


def run(loader, pace_s=0.005, epochs=1, name=None):
    for _ in range(epochs):
        for _batch in traceml.wrap(loader, name=name):
            time.sleep(pace_s)
    return traceml.report(source=name) if name else traceml.report()


@pytest.mark.parametrize("in_order", [True, False])
@pytest.mark.slow
def test_overtaking_follows_in_order(in_order):
    """One index in eight is slow (num_workers=4, batch_size=1)."""
    ds = BurnDataset(48, 0.002, slow_every=8, slow_index=3, slow_cpu_s=0.2)
    r = run(DataLoader(ds, batch_size=1, num_workers=4, in_order=in_order))
    d = r["delivery"]
    assert d["in_order"] is in_order and d["known"] == 48
    ranks = d["ranks"]
    assert sorted(ranks) == list(range(48))  # every batch delivered once
    # Recompute overtaking independently from the delivered ranks.
    overtook = sum(1 for t, rk in enumerate(ranks) if any(q < rk for q in set(range(48)) - set(ranks[:t])))
    assert d["overtaking"] == overtook
    if in_order:
        assert ranks == list(range(48)) and d["overtaking"] == 0
        assert d["workers"] == [i % 4 for i in range(48)]  # round robin
    else:
        assert d["overtaking"] > 0
    # The ranks are the batches actually delivered: the dataset returns
    # its index, which with batch_size=1 is the rank.
    assert "overtook a batch of lower rank" in str(r)


def test_two_live_iterators_of_one_loader_keep_their_own_delivery_order():
    # zip(wrap(dl), wrap(dl)): two epochs of one source run at once, their
    # steps interleaved in the store.  Each epoch delivers in order.
    loader = DataLoader(BurnDataset(8, 0.001), batch_size=1, num_workers=2)
    pairs = [(int(a), int(b)) for a, b in zip(traceml.wrap(loader), traceml.wrap(loader))]
    assert pairs == [(i, i) for i in range(8)]
    r = traceml.report()
    d = r["delivery"]
    assert d["known"] == 16 and d["overtaking"] == 0
    epochs = r.steps["epoch"]
    assert len(np.unique(epochs)) == 2
    for e in np.unique(epochs):
        assert [d["ranks"][i] for i in np.flatnonzero(epochs == e)] == list(range(8))


def test_delivery_for_workerless_loader_is_sampler_order():
    r = run(DataLoader(BurnDataset(10, 0.0), batch_size=2, num_workers=0))
    assert r["delivery"]["ranks"] == [0, 1, 2, 3, 4]
    assert r["delivery"]["overtaking"] == 0
    assert r["delivery"]["workers"] == [None] * 5


@pytest.mark.parametrize("persistent", [False, True])
def test_pid_changes_at_epoch_starts_only_without_persistent_workers(persistent):
    loader = DataLoader(BurnDataset(16, 0.001), batch_size=2, num_workers=2,
                        persistent_workers=persistent)
    r = run(loader, pace_s=0.001, epochs=3)
    w = r["workers"]
    pids = [e["pids"] for e in w["pids_by_epoch"]]
    assert len(pids) == 3 and all(len(p) == 2 for p in pids)
    start_line = next(ln for ln in str(r).splitlines() if ln.startswith("epoch start:"))
    if persistent:
        assert pids[0] == pids[1] == pids[2]
        assert w["pid_changes"] == []
        assert "persistent workers start once" in start_line
        assert "worker start-up" not in start_line
    else:
        assert "(iter() and worker start-up)" in start_line
        assert len({tuple(p) for p in pids}) == 3
        steps_per_epoch = 8
        assert [c["step"] for c in w["pid_changes"]] == [steps_per_epoch, 2 * steps_per_epoch]
        assert [c["epoch"] for c in w["pid_changes"]] == [1, 2]
        assert w["pid_changes"][0]["old"] == pids[0] and w["pid_changes"][0]["new"] == pids[1]
    assert w["exited"] == []  # nobody died mid-run


@pytest.mark.slow
def test_slow_intervals_carry_the_worker_cpu_and_no_reads():
    # Batch 4k (items 16k..16k+3) holds one item costing 150 ms of CPU, the
    # rest 2 ms: worker 0 makes every slow batch, so every fourth step
    # waits for it.  (Uniform cost would not do: two workers in phase
    # give alternating waits, out of phase uniform ones with no stall at
    # all, and which one a run gets is the scheduler's choice.)
    ds = BurnDataset(4 * 24, 0.002, slow_every=16, slow_index=0, slow_cpu_s=0.15)
    r = run(DataLoader(ds, batch_size=4, num_workers=2), pace_s=0.01)
    iv = r["workers"]["intervals"]
    slow, fast = iv["slow"], iv["fast"]
    assert slow["count"] == r["stalls"]["count"] > 0
    assert slow["worker_cpu_s"] > fast["worker_cpu_s"]
    # The workers burn 6 * 0.15 + 90 * 0.002 s of CPU in all; the
    # intervals leave out the start-up.
    burned = 6 * 0.15 + 90 * 0.002
    total = slow["worker_cpu_s"] + fast["worker_cpu_s"]
    assert 0.5 * burned < total < 1.5 * burned
    assert slow["read_bytes"] == 0 and fast["read_bytes"] == 0  # in-memory data
    assert slow["major_faults"] == 0
    assert slow["wall_s"] == pytest.approx(
        (r.input_wait_ns[r["stalls"]["steps"]]).sum() * 1e-9)
    ev = r["workers"]["evidence"]
    assert any("the cost is CPU-side dataset processing" in e or
               "the stalls are CPU-side dataset processing" in e for e in ev)
    assert ev[-1] == worker_evidence.CAVEATS
    json.dumps(r.to_dict())


class _SlowOnce:
    """Item `slow` sleeps `sleep_s` (without burning CPU), then returns."""

    def __init__(self, n, slow, sleep_s):
        self.n, self.slow, self.sleep_s = n, slow, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.slow:
            time.sleep(self.sleep_s)
        return torch.tensor([i])


@pytest.mark.slow
def test_a_stuck_loader_is_reported_with_its_rank_and_worker():
    traceml.configure(stuck_after_s=0.5, sampler_period_s=0.02)
    # Item 5 sleeps far longer than the test: the DataLoader's timeout ends it.
    loader = DataLoader(_SlowOnce(12, slow=5, sleep_s=60), batch_size=1, num_workers=2,
                        timeout=3)
    seen_while_waiting = {}

    def look():
        time.sleep(1.5)
        seen_while_waiting["report"] = traceml.report(source="stuck")

    t = threading.Thread(target=look)
    t.start()
    with pytest.raises(RuntimeError, match="timed out"):
        for _b in traceml.wrap(loader, name="stuck"):
            pass
    t.join()
    live = seen_while_waiting["report"]["stuck"]
    assert len(live) == 1 and live[0]["still_waiting"]
    for ev in (live[0], traceml.report(source="stuck")["stuck"][0]):
        assert ev["oldest_rank"] == 5 and ev["worker"] == 1  # rank 5 -> worker 5 % 2
        assert ev["step_in_epoch"] == 5 and ev["epoch"] == 0
        assert ev["pid"] == traceml.report(source="stuck")["workers"]["pids_by_epoch"][0]["pids"][1]
        # Asleep, not computing: its CPU over the wait says so.  The one
        # state reading may catch the thread woken by traceml's own
        # off-CPU stack timer (aimed at it in a timed fetch), runnable on
        # a loaded host: R in a fresh-clone CI run, 1 of 3.
        assert ev["state"] in ("S", "R")
        assert ev["worker_cpu_s_during_wait"] is not None and ev["worker_cpu_s_during_wait"] < 0.2
    done = traceml.report(source="stuck")["stuck"][0]
    assert not done["still_waiting"] and done["waited_s"] > 2.5
    assert "STUCK: fetch 5 of epoch 0" in str(traceml.report(source="stuck"))
    assert "held by worker 1" in str(traceml.report(source="stuck"))
    # The DataLoader's timeout ended that fetch: no batch came of it.
    assert done["step"] is None
    assert "then ended without a batch" in str(traceml.report(source="stuck"))


@pytest.mark.slow
def test_a_stuck_fetch_that_returns_names_its_step():
    traceml.configure(stuck_after_s=0.3, sampler_period_s=0.02)
    loader = DataLoader(_SlowOnce(6, slow=2, sleep_s=1.0), batch_size=1, num_workers=1)
    r = run(loader, pace_s=0.0, name="slow-once")
    (ev,) = r["stuck"]
    assert ev["step"] == 2 and ev["step_in_epoch"] == 2 and not ev["still_waiting"]
    # The record of step 2 is the stuck fetch: its wait is the stuck time.
    assert ev["waited_s"] == pytest.approx(r.input_wait_ns[2] * 1e-9, abs=0.05)
    assert "STUCK: fetch 2 of epoch 0" in str(r) and "then returned a batch." in str(r)


@pytest.mark.slow
def test_a_loader_stuck_on_its_first_fetch_is_what_report_shows():
    # Nothing recorded yet: report() with no source picks the stuck loader,
    # not the empty probes.  Once a probe step exists, the probes' report
    # points at the stuck loader.
    traceml.configure(stuck_after_s=0.3, sampler_period_s=0.02)
    # The worker wakes soon after the timeout, so its shutdown is quick.
    loader = DataLoader(_SlowOnce(4, slow=0, sleep_s=2.5), batch_size=1, num_workers=1,
                        timeout=2)
    seen = {}

    def look():
        time.sleep(1.0)
        seen["first"] = traceml.report()
        traceml.step_begin()
        traceml.fetch_done()
        traceml.step_end()
        seen["probes"] = traceml.report()

    t = threading.Thread(target=look)
    t.start()
    with pytest.raises(RuntimeError, match="timed out"):
        for _b in traceml.wrap(loader, name="stuck-first"):
            pass
    t.join()
    first = seen["first"]
    assert first["source"] == "stuck-first" and first["steps"] == 0
    assert first["diagnosis"] == "NO-DATA"
    (ev,) = first["stuck"]
    assert ev["still_waiting"] and ev["step_in_epoch"] == 0 and ev["step"] is None
    assert ev["oldest_rank"] == 0 and ev["worker"] == 0
    # Asleep, not computing: the one state reading may catch the thread
    # woken by traceml's own off-CPU stack timer, runnable on a loaded host
    # (R in a fresh-clone CI run, as in the stuck test above); its CPU
    # over the wait says it slept.
    assert ev["state"] in ("S", "R")
    assert ev["worker_cpu_s_during_wait"] is not None and ev["worker_cpu_s_during_wait"] < 0.2
    assert 0.3 <= ev["waited_s"] < 2.0
    text = str(first)
    assert "STUCK: fetch 0 of epoch 0" in text and "held by worker 0" in text
    assert "loader: num_workers=1" in text
    assert "no fetch of this source has returned yet" in text
    assert "STUCK: fetch 0 of epoch 0" in first._repr_html_()
    probes = seen["probes"]
    assert probes["source"] == "probes" and probes["steps"] == 1
    assert "a fetch of 'stuck-first' is stuck now: see report(source='stuck-first')" in (
        probes["notes"])


def test_unreadable_counters_are_null_with_a_reason():
    steps = np.zeros(3, dtype=_core.RECORD_DTYPE)
    steps["begin_ns"] = [0, 100, 200]
    steps["fetch_done_ns"] = [90, 110, 290]
    steps["end_ns"] = [100, 200, 300]
    samples = np.zeros(4, dtype=_core.SAMPLE_DTYPE)
    samples["t_ns"] = [0, 100, 200, 300]
    samples["pid"] = 4242
    samples["role"] = 0
    samples["cpu_ns"] = [0, 50, 100, 150]
    # Worker CPU comes from utime + stime (every thread), not schedstat.
    samples["utime_ticks"] = [0, 4, 8, 12]
    samples["stime_ticks"] = [0, 1, 2, 3]
    samples["runq_ns"] = 0
    for f in ("read_bytes", "rchar"):
        samples[f] = -1  # /proc/4242/io could not be read
    info = {"procs": [{"pid": 4242, "role": 0, "exited_ns": 0,
                       "errors": {"stat": None, "io": "Permission denied (errno 13)",
                                  "schedstat": None}}]}
    stall = np.array([True, False, True])
    iv = evidence.intervals(steps, stall, np.ones(3, bool), samples, info, [4242], None)
    assert iv["slow"]["read_bytes"] is None and iv["fast"]["read_bytes"] is None
    assert iv["unavailable"]["read_bytes"] == "/proc/4242/io: Permission denied (errno 13)"
    # 5 ticks per 100 ns, linear between readings: 4.5 ticks in each
    # 90 ns stall window.
    assert iv["slow"]["worker_cpu_s"] == pytest.approx((4.5 + 4.5) / evidence.CLK_TCK)
    assert iv["unavailable"]["main_cpu_s"] == "no worker processes"
    text = _sentences(iv, 1, 2)
    assert any("Storage counters unavailable (/proc/4242/io: Permission denied" in t for t in text)


def test_sampler_watches_real_counters_and_knows_a_missing_process():
    rec = traceml.Recorder()
    it = _core.WrapIter(iter([1]), rec, 1, 0, rec.clock_ns(),
                        watch=[os.getpid(), 2**22 + 12345])
    assert it.watching
    info = _core.sampler_info()
    it.close()
    missing = [p for p in info["procs"] if p["role"] == 0][0]
    assert "No such file or directory" in missing["errors"]["stat"]
    me = [p for p in info["procs"] if p["role"] == -1][0]
    assert me["errors"] == {"stat": None, "io": None, "schedstat": None, "smaps_rollup": None,
                            "task": None}
    assert missing["threads_skipped"] == 0 and me["threads_skipped"] >= 0


def test_the_samplers_share_waits_for_enough_of_its_periods():
    # A fresh process's first short loop: the sampler's first tick opens
    # every /proc file it reads, and over 2 ticks its share read 106-131%
    # of one CPU.  No share before SAMPLER_SHARE_MIN_PERIODS periods; a
    # share of one thread's CPU after.
    script = (
        "import json, time, traceml\n"
        "from torch.utils.data import DataLoader\n"
        "for _ in traceml.wrap(DataLoader(list(range(3)))): pass\n"
        "short = traceml.report().to_dict()['workers']\n"
        "print(json.dumps(short['sampler']['cpu_share']))\n"
        "for _ in traceml.wrap(DataLoader(list(range(30)))): time.sleep(0.02)\n"
        "print(json.dumps(traceml.report().to_dict()['workers']['sampler']))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=True).stdout.splitlines()
    assert json.loads(out[0]) is None
    smp = json.loads(out[1])
    assert 0 < smp["cpu_share"] <= 1


@pytest.mark.slow
def test_host_facts_and_oversubscription_note():
    r = run(DataLoader(BurnDataset(12, 0.0), batch_size=2, num_workers=4,
                       multiprocessing_context="spawn"), pace_s=0)
    h = r["host"]
    assert h["usable_cpus"] == len(os.sched_getaffinity(0))
    assert h["start_method"] == "spawn" and h["num_workers"] == 4
    assert h["torch_version"] == torch.__version__
    assert h["by_epoch"][0]["batch_size"] == 2
    assert h["oversubscribed"] == (4 > h["usable_cpus"])
    if h["oversubscribed"]:
        assert any("exceeds the" in n for n in r["notes"])


def test_sampler_stops_with_the_loop_and_is_off_in_forked_children():
    loader = DataLoader(BurnDataset(8, 0.0), batch_size=1, num_workers=1)
    it = iter(traceml.wrap(loader))
    next(it)
    assert _core.sampler_info()["running"]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            info = _core.sampler_info()
            os.write(w, json.dumps([info["running"], info["active_loops"]]).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as fh:
        child = json.loads(fh.read())
    os.waitpid(pid, 0)
    assert child == [False, 0]
    it.close()
    assert not _core.sampler_info()["running"]


def test_sampler_off_means_no_worker_evidence_but_timings():
    traceml.configure(sampler=False)
    r = run(DataLoader(BurnDataset(8, 0.0), batch_size=1, num_workers=1), pace_s=0)
    assert r["steps"] == 8
    assert r["workers"]["intervals"] is None
    assert r["workers"]["sampler"]["samples"] == 0


@pytest.mark.parametrize(
    "kwargs, exc, words",
    [
        ({"sampler_period_s": 0}, ValueError, "sampler_period_s must be between 0.001 and 3600"),
        ({"stuck_after_s": -1}, ValueError, "stuck_after_s"),
        ({"stuck_after_s": "1"}, TypeError, "stuck_after_s must be a number"),
        ({"sampler": 1}, TypeError, "sampler must be a bool"),
        ({"sampler_capacity": 3}, ValueError, "sampler_capacity must be between 16 and"),
    ],
)
def test_configure_names_bad_settings(kwargs, exc, words):
    with pytest.raises(exc, match=words):
        traceml.configure(**kwargs)


def _iv(slow_cpu, slow_runq, busiest, wall=1.0, reads=0.0, faults=0.0):
    kind = {"count": 3, "wall_s": wall, "worker_cpu_s": slow_cpu, "runq_wait_s": slow_runq,
            "read_bytes": reads, "major_faults": faults,
            "worker_cores_busy": slow_cpu / wall,
            "worker_cores_runnable": (slow_cpu + slow_runq) / wall}
    fast = dict(kind, count=10, worker_cpu_s=0.1, runq_wait_s=0.0,
                worker_cores_busy=0.1, worker_cores_runnable=0.1)
    return {"slow": dict(kind, busiest_worker_cores=busiest), "fast": fast, "unavailable": {}}


def test_one_worker_grinding_a_slow_sample_is_cpu_side_not_idle():
    """2 workers on 2 CPUs: one burns through a slow item (0.97 cores),
    the other idles; total demand stays under half the capacity."""
    text = _sentences(_iv(0.97, 0.0, busiest=0.97), num_workers=2, cpus=2)
    assert any("One worker stayed busy through the stalls (1.0 cores)" in t for t in text)
    assert any("CPU-side dataset processing" in t for t in text)
    assert not any("mostly idle" in t for t in text)


def test_idle_workers_without_reads_point_elsewhere():
    text = _sentences(_iv(0.1, 0.0, busiest=0.06), num_workers=2, cpus=2)
    assert any("the workers were mostly idle" in t for t in text)


def test_blocked_workers_reading_alike_in_and_out_of_stalls_say_their_reads():
    """2 workers blocked in O_DIRECT reads, 420 MB over 1 s of stalls and
    603 MB over 1 s outside them (helper 30B): the reads are no heavier in
    the stalls, yet not zero; neither "read_bytes 0" nor silence."""
    iv = _iv(0.1, 0.0, busiest=0.06, reads=420e6)
    iv["fast"]["read_bytes"] = 603e6
    text = sentences(evidence.interval_findings(iv, 2, 2, making=True))
    assert any("During stalls the workers read 420.0 MB from storage (420.0 MB/s against "
               "603.0 MB/s outside the stalls)" in t and "every batch reads storage" in t
               for t in text), text
    assert not any("read_bytes 0" in t for t in text), text
    # No reads at all: the page-cache caveat stands.
    quiet = sentences(evidence.interval_findings(_iv(0.1, 0.0, busiest=0.06), 2, 2,
                                                 making=True))
    assert any("read_bytes 0 does not rule out page-cache effects" in t for t in quiet)


def test_workers_that_timed_themselves_making_the_batch_are_not_idle():
    """3 workers on 2 CPUs, one making the awaited batch: 0.8 cores busy,
    under half the cores, and the busiest worker's share unread.  The
    workers' own timing (the awaited worker making the stalled batch for
    most of the wait) says they were not idle."""
    iv = _iv(0.8, 0.0, busiest=None)
    idle = sentences(evidence.interval_findings(iv, 3, 2))
    assert any("mostly idle" in t for t in idle)
    made = sentences(evidence.interval_findings(iv, 3, 2, making=True))
    assert not any("mostly idle" in t for t in made)
    # Making the batch is not being on a CPU (it may sleep on I/O): no
    # CPU-side claim from it either.
    assert not any("CPU-side" in t for t in made)


def test_run_queue_wait_without_oversubscription_blames_other_processes():
    text = _sentences(_iv(0.7, 1.2, busiest=0.9), num_workers=2, cpus=2)
    assert any("although 2 workers fit on 2 CPUs: other threads or processes, the "
               "training loop's own included, competed" in t for t in text)


def _main_iv(slow_cpu, wall=1.0, reads=0.0, faults=0.0, fast_reads=0.0, runq=None):
    """Intervals of a num_workers=0 loader: main-process counters only,
    with the busy and runnable cores intervals() derives from them."""
    unavailable = {k: evidence.NO_WORKERS for k in
                   ("worker_cpu_s", "runq_wait_s", "read_bytes", "major_faults")}
    slow = {"count": 3, "wall_s": wall, "main_cpu_s": slow_cpu, "main_runq_wait_s": runq,
            "main_read_bytes": reads, "main_major_faults": faults,
            "main_cores_busy": slow_cpu / wall,
            "main_cores_runnable": (slow_cpu + (runq or 0.0)) / wall}
    fast = {"count": 10, "wall_s": 2.0, "main_cpu_s": 1.8, "main_runq_wait_s": None,
            "main_read_bytes": fast_reads, "main_major_faults": 0.0,
            "main_cores_busy": 0.9, "main_cores_runnable": 0.9}
    return {"slow": slow, "fast": fast, "unavailable": unavailable}


@pytest.mark.parametrize("slow_cpu,reads,faults,expected", [
    (0.95, 0.0, 0.0, "the cost is CPU-side dataset processing, not storage reads"),
    (0.05, 8e6, 3, "During stalls the main process read 8.0 MB from storage (8.0 MB/s "
                   "against 0.0 MB/s outside the stalls) with 3 major faults while keeping "
                   "few cores busy: storage reads are the suspect"),
    (0.9, 8e6, 0, "During stalls the main process was busy and also read 8.0 MB"),
    (0.05, 0.0, 0.0, "During stalls the main process was mostly idle and read nothing from "
                     "storage: the wait lies elsewhere (a sleep, a lock, the network)"),
])
def test_without_workers_the_main_process_counters_are_the_evidence(
        slow_cpu, reads, faults, expected):
    text = _sentences(_main_iv(slow_cpu, reads=reads, faults=faults),
                                       num_workers=0, cpus=2)
    assert text[0].startswith("num_workers=0, so the dataset runs in the main process: "
                              f"slow intervals held {slow_cpu:.2f} main-process CPU-s "
                              f"over 1.00 s ({slow_cpu:.1f} cores busy) against 1.80 over "
                              "2.00 s in fast ones (0.9 cores, the training step included)")
    assert sum(expected in t for t in text) == 1, text
    assert text[-1] == (worker_evidence.CAVEATS_WITH_READS if reads else worker_evidence.CAVEATS)
    assert not any("worker-CPU" in t or "Storage counters unavailable" in t for t in text)


@pytest.mark.parametrize("slow_cpu,expected", [
    (0.05, "During stalls the main process was mostly idle; its reads (8.0 MB, 8.0 MB/s) "
           "were no heavier than outside the stalls (100.0 MB/s): the wait lies elsewhere "
           "(a sleep, a lock, the network)."),
    (0.9, "During stalls the main process was busy; its reads (8.0 MB, 8.0 MB/s) were no "
          "heavier than outside the stalls (100.0 MB/s): the stalls are CPU-side dataset "
          "processing, not storage reads."),
])
def test_reads_heavier_outside_the_stalls_are_not_blamed(slow_cpu, expected):
    """The training step reads 200 MB in the 2 s outside the stalls; 8 MB
    land in the stalls' windows (sampler resolution): not the stalls' cause."""
    iv = _main_iv(slow_cpu, reads=8e6, fast_reads=200e6)
    text = _sentences(iv, num_workers=0, cpus=2)
    assert expected in text
    assert not any("suspect" in t or "may matter" in t for t in text)


def test_without_workers_unreadable_main_counters_say_why():
    iv = _main_iv(0.9)
    iv["slow"]["main_read_bytes"] = iv["fast"]["main_read_bytes"] = None
    iv["unavailable"]["main_read_bytes"] = "/proc/1/io: Permission denied"
    text = _sentences(iv, num_workers=0, cpus=2)
    assert ("Storage counters unavailable (/proc/1/io: Permission denied): CPU-side "
            "versus storage cannot be told apart here.") in text


@pytest.mark.parametrize("slow_kind", ["burn", "sleep"])
@pytest.mark.slow
def test_main_process_cpu_in_stalls_tells_burning_from_sleeping(slow_kind):
    # num_workers=0, one batch in 8 holds a 150 ms item: burnt on the CPU
    # or slept.  The main process's CPU time during those stalls says which.
    class Slow(BurnDataset):
        def __getitem__(self, i):
            if i % 8 == 3 and slow_kind == "sleep":
                time.sleep(0.150)
                return torch.tensor([i])
            return super().__getitem__(i)

    ds = Slow(32, 0.001, slow_every=8, slow_index=3,
              slow_cpu_s=0.150 if slow_kind == "burn" else 0.0)
    r = run(DataLoader(ds, batch_size=1), pace_s=0.005, name=f"main-{slow_kind}")
    assert r["stalls"]["steps"] == [3, 11, 19, 27], r.input_wait_ns // 1_000_000
    slow = r["workers"]["intervals"]["slow"]
    assert slow["count"] == 4
    cores = slow["main_cpu_s"] / slow["wall_s"]
    assert slow["main_cores_busy"] == pytest.approx(cores)
    text = str(r)
    assert "num_workers=0, so the dataset runs in the main process" in text
    assert "unavailable (no worker processes)" not in text
    if slow_kind == "burn":
        # 4 x 150 ms of thread CPU time, whatever the load stretches the
        # wall time to; stat counts 10 ms ticks.
        assert slow["main_cpu_s"] >= 0.45, slow
        runnable = cores + (slow["main_runq_wait_s"] or 0) / slow["wall_s"]
        assert runnable >= worker_evidence.BUSY_SHARE, slow
        assert "main process was mostly idle" not in text
    else:
        assert slow["main_cpu_s"] <= 0.15 and cores < 0.3, slow
        assert "During stalls the main process was mostly idle" in text


class _SlowEvery8:
    """Item 8k + 3 sleeps 150 ms (no CPU); the rest return at once."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i % 8 == 3:
            time.sleep(0.150)
        return torch.tensor([i])


_SPIN = "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 60:\n    pass\n"


@pytest.mark.slow
def test_other_programs_cpu_in_the_stalls_is_the_hosts_busy_time_less_the_jobs():
    # Stalls the main process sleeps through (num_workers=0, one item in
    # 8 sleeps 150 ms): beside a process spinning on a core, /proc/stat's
    # busy time in the stall windows less the job's own CPU is that
    # process's core; alone, nearly nothing.
    def stalls(name):
        r = run(DataLoader(_SlowEvery8(32), batch_size=1), pace_s=0.005, name=name)
        return r["workers"]["intervals"]["slow"]

    quiet = stalls("quiet")
    hog = subprocess.Popen([sys.executable, "-c", _SPIN])
    try:
        time.sleep(0.2)
        busy = stalls("beside-a-hog")
    finally:
        hog.kill()
        hog.wait()
    for slow in (quiet, busy):
        assert slow["count"] == 4 and slow["host_cpu_s"] is not None, slow
        assert slow["others_cpu_s"] == pytest.approx(
            max(0.0, slow["host_cpu_s"] - slow["main_cpu_s"]), abs=1e-9)
    # The spinning process holds about one core for the 0.6 s of stalls
    # (10 ms ticks, read every 20 ms: 0.6 allowed), over what the host ran
    # without it (the suite's own load, or another job's, runs in both:
    # quiet read 0.42 cores beside a fresh-clone CI and other tests).
    assert busy["others_cpu_s"] / busy["wall_s"] >= 0.6, busy
    # The difference only where the host had a core free for it: beside a
    # suite on both cores the quiet run read 2.0 cores of others already
    # (helper 38D, a fresh clone's suite beside another).
    if quiet["others_cpu_s"] / quiet["wall_s"] <= len(os.sched_getaffinity(0)) - 1:
        assert (busy["others_cpu_s"] / busy["wall_s"]
                - quiet["others_cpu_s"] / quiet["wall_s"]) >= 0.5, (quiet, busy)
    rows = _core.sampler_samples()
    host = rows[rows["pid"] == evidence.HOST_PID]
    assert len(host) and (host["role"] == _core.HOST_ROLE).all()
    assert (np.diff(host["t_ns"]) > 0).all() and (np.diff(host["cpu_ns"]) >= 0).all()


def test_without_workers_run_queue_wait_counts_as_busy():
    """On a loaded host the main thread waits its turn: 0.3 cores on a CPU
    plus 0.4 in the run queue is CPU work held up, not an idle wait."""
    iv = _main_iv(0.3, runq=0.4)
    text = _sentences(iv, num_workers=0, cpus=2)
    assert "(0.3 cores busy, 0.7 runnable)" in text[0]
    assert any("the cost is CPU-side dataset processing" in t for t in text)
    assert not any("mostly idle" in t for t in text)


@pytest.mark.parametrize("in_order", [True, False])
@pytest.mark.slow
def test_a_reset_mid_epoch_does_not_make_overtaking(in_order):
    # reset() after 4 batches drops ranks 0-3 from the record: they were
    # delivered, so in order the later ones overtook nothing.
    ds = BurnDataset(24, 0.002, slow_every=8, slow_index=5, slow_cpu_s=0.15)
    loader = DataLoader(ds, batch_size=1, num_workers=2, in_order=in_order)
    for i, _b in enumerate(traceml.wrap(loader, name=f"reset-{in_order}")):
        time.sleep(0.002)
        if i == 3:
            traceml.reset()
    d = traceml.report(source=f"reset-{in_order}")["delivery"]
    ranks = d["ranks"]
    assert len(ranks) == 20 and len(set(ranks)) == 20
    # Independent count among the recorded deliveries: one overtakes when a
    # lower rank is delivered after it.
    expected = sum(1 for i, rk in enumerate(ranks) if any(q < rk for q in ranks[i + 1:]))
    assert d["overtaking"] == expected
    if in_order:
        assert ranks == list(range(4, 24)) and expected == 0


@pytest.mark.parametrize("reads,faults", [(4096.0, 0.0), (0.0, 1.0)])
def test_a_trace_of_reads_in_the_stalls_is_not_storage(reads, faults):
    """One page read or one major fault in 0.45 s of stalls (a trial run of
    a dataset that only sleeps): not a storage bottleneck."""
    slow = {"count": 3, "wall_s": 0.45, "worker_cpu_s": 0.01, "runq_wait_s": 0.0,
            "read_bytes": reads, "major_faults": faults, "worker_cores_busy": 0.02,
            "worker_cores_runnable": 0.02, "busiest_worker_cores": 0.02}
    fast = {"count": 9, "wall_s": 1.3, "worker_cpu_s": 0.1, "runq_wait_s": 0.0,
            "read_bytes": 0.0, "major_faults": 0.0, "worker_cores_busy": 0.08,
            "worker_cores_runnable": 0.08}
    text = _sentences({"slow": slow, "fast": fast, "unavailable": {}},
                                       num_workers=2, cpus=2)
    assert not any("suspect" in t or "may matter" in t for t in text), text
    assert any(t.startswith("During stalls the workers were mostly idle; it read only "
                            f"{reads / 1e3:.0f} kB with {faults:.0f} major fault")
               and t.endswith("a trace, not a storage bottleneck: the wait lies elsewhere "
                              "(IPC, the main process, locks).") for t in text), text
    assert text[-1] == worker_evidence.CAVEATS  # the page-cache caveat still applies


def _spin_forever():
    while True:
        pass


def _start_a_spinner(_worker_id):
    threading.Thread(target=_spin_forever, daemon=True).start()


@pytest.mark.parametrize("spinning", [True, False])
def test_workers_cpu_outside_their_batches_is_measured(spinning):
    # Each worker's worker_init_fn starts a thread that spins (helper 36B:
    # "HAND-OVER ... in transit 42%", never that the workers held the
    # cores): their processes' CPU, every thread, against their batches'.
    name = f"outside-{spinning}"
    loader = DataLoader(BurnDataset(120, 0.0005), batch_size=4, num_workers=2,
                        worker_init_fn=_start_a_spinner if spinning else None)
    r = run(loader, pace_s=0.005, name=name)
    items = {code: p for code, p in r["workers"]["evidence_items"]}
    if not spinning:
        assert "workers_outside_batches" not in items, items
        return
    p = items["workers_outside_batches"]
    iv = r["workers"]["intervals"]
    wall = iv["slow"]["wall_s"] + iv["fast"]["wall_s"]
    assert p["cores"] == pytest.approx(
        (iv["slow"]["worker_cpu_s"] + iv["fast"]["worker_cpu_s"]) / wall)
    assert p["outside_cores"] >= worker_evidence.OUTSIDE_MIN_CORES
    assert p["batch_cores"] < 0.5 * p["cores"]
    assert any("went to work outside the batches" in line for line in r["workers"]["evidence"])
