"""The host's part of the input wait: other programs' CPU against the
job's wait for a core (evidence.others_in_waits), the split it moves
(wait_split), and the HOST-BOUND reading it decides."""

import numpy as np
import pytest

from traceml import _core, evidence, findings, wait_split
from traceml.findings import input_bound, wait_parts

_TICKS = evidence.CLK_TCK


def _readings(pid, role, cores, runq_per_s, t_ns):
    """Linear counters: ``cores`` CPU-s a second (stat ticks), ``runq_per_s``
    s a second in the run queue (schedstat ns)."""
    rows = np.zeros(len(t_ns), dtype=_core.SAMPLE_DTYPE)
    rows["t_ns"], rows["pid"], rows["role"] = t_ns, pid, role
    rows["utime_ticks"] = np.round((t_ns - t_ns[0]) * 1e-9 * _TICKS * cores)
    rows["runq_ns"] = (t_ns - t_ns[0]) * runq_per_s if runq_per_s is not None else -1
    return rows


def test_others_cpu_is_the_hosts_busy_time_less_the_jobs_in_the_windows():
    t = np.arange(0, 2_000_000_001, 20_000_000, dtype=np.int64)   # 2 s at 20 ms
    # Main 0.5 cores and 0.25 s/s queued, one worker 0.5 and 0.5 s/s, the
    # host busy 2.0 cores: other programs 1.0 core.
    rows = np.r_[_readings(10, -1, 0.5, 0.25, t), _readings(11, 0, 0.5, 0.5, t),
                 _readings(evidence.HOST_PID, _core.HOST_ROLE, 2.0, None, t)]
    a = np.array([100_000_000, 1_000_000_000])
    b = a + 400_000_000                                              # 0.8 s of windows
    got = evidence.others_in_waits(rows, a, b, 10, [11])
    assert got["wall_s"] == pytest.approx(0.8)
    assert got["others_cpu_s"] == pytest.approx(0.8, abs=2 / _TICKS)
    assert got["job_runq_s"] == pytest.approx(0.6)
    assert got["host_share"] == pytest.approx(1.0)
    # Other programs at a fifth of a core: a fifth of the 0.75 s/s queued
    # at most is theirs.
    rows["utime_ticks"][rows["pid"] == evidence.HOST_PID] = np.round(
        t * 1e-9 * _TICKS * 1.2)
    got = evidence.others_in_waits(rows, a, b, 10, [11])
    assert got["host_share"] == pytest.approx(0.16 / 0.6, abs=0.03)
    # No host readings, or no main process: nothing to say.
    job = rows[rows["pid"] != evidence.HOST_PID]
    assert evidence.others_in_waits(job, a, b, 10, [11]) is None
    assert evidence.others_in_waits(rows, a, b, None, [11]) is None


def test_the_host_share_moves_the_waits_for_a_core_and_keeps_the_sum():
    wait = np.array([10, 10], dtype=np.int64)
    cpu, runq = np.array([2, 2]), np.array([4, 4])
    making, queued = np.array([4, 4]), np.array([2, 2])
    plain = wait_split.split(wait, cpu, runq, making, queued)
    got = wait_split.split(wait, cpu, runq, making, queued, host_share=0.25)
    p, q = got["parts_s"], plain["parts_s"]
    assert list(p) == ["worker_making", "worker_cpu_wait", "main_cpu", "cpu_wait",
                       wait_split.HOST_PART, "in_transit"]
    assert p[wait_split.HOST_PART] == pytest.approx(0.25 * (q["cpu_wait"] + q["worker_cpu_wait"]))
    assert p["cpu_wait"] == pytest.approx(0.75 * q["cpu_wait"])
    assert p["worker_cpu_wait"] == pytest.approx(0.75 * q["worker_cpu_wait"])
    assert sum(p.values()) == pytest.approx(got["wait_s"]) == pytest.approx(20e-9)
    # Without worker timing the host part sits after cpu_wait too.
    got = wait_split.split(wait, cpu, runq, host_share=1.0)
    assert list(got["parts_s"]) == ["main_cpu", "cpu_wait", wait_split.HOST_PART, "asleep"]
    assert got["parts_s"]["cpu_wait"] == 0.0


@pytest.mark.parametrize("parts, leads", [
    # The host's part above the production and every other part.
    ({"worker_making": 1.0, "worker_cpu_wait": 0.5, "main_cpu": 1.0, "host_cpu_wait": 2.0}, True),
    # Production together (1.5 + 1.0) passes it: the loader's wait.
    ({"worker_making": 1.5, "worker_cpu_wait": 1.0, "main_cpu": 0.1, "host_cpu_wait": 2.0}, False),
    # Another part passes it: that part's wait.
    ({"worker_making": 0.1, "in_transit": 3.0, "host_cpu_wait": 2.0}, False),
    ({"main_cpu": 1.0, "cpu_wait": 0.2, "host_cpu_wait": 0.0, "asleep": 0.5}, False),
])
def test_the_host_leads_only_as_the_largest_measured_part(parts, leads):
    assert wait_parts.host_leads({"parts_s": parts}) is leads


def test_host_bound_needs_an_input_bound_wait():
    assert input_bound.diagnose(0.3, 0.05, None, None, 0.5, True).label == input_bound.HOST_BOUND
    assert input_bound.diagnose(0.15, 0.05, None, None, 0.5, True).label == input_bound.BALANCED
    assert input_bound.diagnose(0.3, 0.25, None, None, 0.5, False).label == input_bound.INPUT_BOUND
    rule = findings.sentences([input_bound.diagnosis_finding(input_bound.HOST_BOUND, 0.3)])[0]
    assert "other programs holding the cores" in rule and "30.0%" in rule


def test_the_stall_rules_cores_wait_is_the_splits_own():
    # One clocked steady fetch of 10 ms: no CPU, no run-queue wait, the
    # awaited worker making 2 ms of it, the sampler asleep 5 ms inside it,
    # the worker's threads queued 6 ms in the transit.  The sampler's sleep
    # comes out of the fetch's sleep first (wait_split's model), leaving
    # 10 - 5 - 2 = 3 ms for the transit's wait for a core: the stall rule
    # takes out those 3 ms, the number the split reports.
    from traceml import build

    ms = 1_000_000
    steps = np.zeros(2, dtype=_core.RECORD_DTYPE)
    steps["begin_ns"] = [0, 20 * ms]
    steps["fetch_done_ns"] = [1 * ms, 30 * ms]
    steps["end_ns"] = [10 * ms, 40 * ms]
    w = build.common.Steady(steps, np.zeros(2, dtype=bool))
    one = lambda v: np.array([v], dtype=np.int64)  # noqa: E731 - a column of one fetch
    clocks = (one(1), one(0), one(0), one(-1), one(-1), one(0))
    making = (one(2 * ms), one(0), one(6 * ms))
    sampler = (one(5 * ms), one(0))
    queued = build.clock_split.queued_in_fetch(steps, w, clocks, making, sampler)
    split = wait_split.split(one(10 * ms), one(0), one(0), making[0], making[1],
                             others_cpu_ns=one(0), sampler=sampler,
                             transit_queued_ns=making[2])
    assert queued.tolist() == [0, 3 * ms]
    assert split["parts_s"][wait_split.TRANSIT_QUEUED_PART] == pytest.approx(3e-3)
    assert split["parts_s"]["in_transit"] == 0


def test_a_host_that_only_stretches_the_wait_is_not_a_hand_over():
    # The clocked parts of a slow sample every 37th index beside a busy
    # host (helper 31B): workers making 41% of the wait, the main CPU 14%,
    # other programs 44%, in transit 1%; input 34% of the step.  The host
    # leads, yet without its part the loop still waits 22% of the step
    # (r (1 - h) / (1 - r h)): the wait is the loader's.  Read by its own
    # parts the production (41%) leads the main CPU (14%): INPUT-BOUND,
    # where the host's 44% counted as a hand-over part read HAND-OVER.
    split = {"wait_s": 1.0, "parts_s": {
        "worker_making": 0.41, "worker_cpu_wait": 0.0, "main_cpu": 0.14, "cpu_wait": 0.0,
        "host_cpu_wait": 0.44, "in_transit": 0.01}}
    share = 0.341
    assert wait_parts.host_leads(split)
    assert not wait_parts.host_explains(split, share)
    assert share * (1 - 0.44) / (1 - share * 0.44) > 0.2
    produced = share * wait_parts.production_fraction(split)
    counted = wait_parts.other_largest_fraction(split)
    aside = wait_parts.other_largest_fraction(split, host_aside=True)
    # Fractions of the parts other than production (0.59 together).
    assert counted == pytest.approx(0.44 / 0.59)
    assert aside == pytest.approx(0.14 / 0.59)
    assert input_bound.diagnose(share, produced, None, None, counted).label == input_bound.HAND_OVER
    assert input_bound.diagnose(share, produced, None, None, aside).label == input_bound.INPUT_BOUND
    # A hand-over part of the job's own still reads HAND-OVER with the host aside.
    split["parts_s"].update(main_cpu=0.05, in_transit=0.10, worker_making=0.05)
    aside = wait_parts.other_largest_fraction(split, host_aside=True)
    produced = share * wait_parts.production_fraction(split)
    assert input_bound.diagnose(share, produced, None, None, aside).label == input_bound.HAND_OVER


def test_the_main_processs_other_threads_wait_for_a_core_is_its_wait_less_the_loops():
    # The main process (every thread) waits 0.5 s a second for a core,
    # read every 20 ms over 1 s.  The loop's steps are 10 ms each, a 4 ms
    # fetch then a 6 ms body, every one clocked, the loop thread itself
    # queued 1 ms in each body: 0.1 s a second.  The other threads' 0.4 s
    # a second falls evenly over time, 1.6 ms in each 4 ms fetch.
    t = np.arange(0, 1_000_000_001, 20_000_000, dtype=np.int64)
    samples = _readings(7, -1, 1.0, 0.5, t)
    begin = np.arange(0, 1_000_000_000, 10_000_000, dtype=np.int64)
    done, end = begin + 4_000_000, begin + 10_000_000
    got = evidence.main_others_queued(samples, 7, (begin, done, np.zeros(len(begin))),
                                      (done, end, np.full(len(begin), 1_000_000)))
    assert got == pytest.approx(np.full(len(begin), 1.6e6), rel=1e-9)
    # A body not clocked leaves its interval unknown: nothing there.
    body_runq = np.full(len(begin), 1_000_000)
    body_runq[:10] = -1
    got = evidence.main_others_queued(samples, 7, (begin, done, np.zeros(len(begin))),
                                      (done, end, body_runq))
    assert (got[:10] < 1.6e6).all() and got[20:] == pytest.approx(1.6e6, rel=1e-9)
    # The split takes it from the sleep, after the other threads' CPU, as
    # a wait for a core, which the host's share then moves.
    wait = np.full(3, 10, dtype=np.int64)
    split = wait_split.split(wait, np.ones(3, np.int64), np.zeros(3, np.int64),
                             np.array([2, 0, 0]), host_share=0.5,
                             others_queued_ns=np.array([4, 4, 20]))
    parts = split["parts_s"]
    assert parts[wait_split.OTHERS_QUEUED_PART] == pytest.approx(0.5 * (4 + 4 + 9) * 1e-9)
    assert parts[wait_split.HOST_PART] == pytest.approx(0.5 * (4 + 4 + 9) * 1e-9)
    assert sum(parts.values()) == pytest.approx(split["wait_s"])


def test_a_thread_pool_in_the_workers_is_named_where_other_threads_took_the_batch_cpu():
    # Helper 37B: NumPy's OpenBLAS (2 threads a process) in 2 workers on 2
    # CPUs.  A batch's CPU 66 ms (every thread), its 4 samples 8.3 ms each
    # on the dataset's thread and collate_fn 0.7 ms: 48% on other threads.
    from traceml.findings import worker_evidence as we

    pool = {"api": "blas", "library": "openblas", "threads": 2}
    s = {"host": {"usable_cpus": 2, "thread_pools": [pool, dict(pool)]},
         "loader": {"num_workers": 2},
         "production": {"available": True, "cpu_s": {"mean": 0.066},
                        "make_s": {"mean": 0.11},
                        "samples": {"available": True, "samples": 160, "batches": 40,
                                    "sample_cpu_s": {"mean": 0.0083},
                                    "collate": {"mean_s": 0.0007}}}}
    (f,) = we.thread_pool(s)
    assert f.numbers["share"] == pytest.approx(1 - (0.0083 * 4 + 0.0007) / 0.066)
    assert f.numbers["threads"] == 4
    said = we.WORDS[f.code](f.numbers)
    assert "openblas (blas, 2 threads) x2" in said
    assert "2 workers run up to 4 of its threads on 2 CPUs" in said and "threads the dataset starts" in said
    assert "threadpool_limits(1) in worker_init_fn" in said
    # One thread a pool (OPENBLAS_NUM_THREADS=1), no pool known, or the
    # batches' CPU on the dataset's thread: nothing to say.
    one = {**s, "host": {"usable_cpus": 2, "thread_pools": [{**pool, "threads": 1}]}}
    assert we.thread_pool(one) == []
    assert we.thread_pool({**s, "host": {"usable_cpus": 2}}) == []
    own = {**s, "production": {**s["production"], "cpu_s": {"mean": 0.036}}}
    assert we.thread_pool(own) == []
    # Helper 39A: workers that sleep 120 ms a batch on 1.53 ms of CPU, 29%
    # of it on other threads (the queue's feeder): a batch blocked 99% of
    # its time is not made slow by a pool.
    sleepy = {**s, "production": {**s["production"], "cpu_s": {"mean": 0.00153},
                                  "make_s": {"mean": 0.121},
                                  "samples": {**s["production"]["samples"],
                                              "sample_cpu_s": {"mean": 0.00027},
                                              "collate": {"mean_s": 0.0}}}}
    other = 0.00153 - 4 * 0.00027
    assert other / 0.00153 >= we.THREAD_POOL_MIN_SHARE       # the share alone would fire
    assert we.thread_pool(sleepy) == []
    # The same batches on a CPU or queued for one half their time fire.
    busy = {**sleepy, "production": {**sleepy["production"],
                                     "runq_s": {"mean": 0.121 * we.THREAD_POOL_ON_CPU_SHARE}}}
    assert we.thread_pool(busy)


def test_more_workers_are_not_advised_where_a_thread_pool_took_the_batch_cpu():
    # Helper 38C: OpenBLAS at 2 threads a worker, "traceml.sweep(make_loader,
    # num_workers=(2, 16))" led; one BLAS thread a worker ran 13x faster.
    from traceml.findings import prediction_check as pc, worker_evidence as we

    pool = {"api": "blas", "library": "openblas", "threads": 2}
    s = {"host": {"usable_cpus": 2, "thread_pools": [pool]},
         "loader": {"num_workers": 2},
         "production": {"available": True, "cpu_s": {"mean": 0.066},
                        "make_s": {"mean": 0.11},
                        "samples": {"available": True, "samples": 160, "batches": 40,
                                    "sample_cpu_s": {"mean": 0.0083},
                                    "collate": {"mean_s": 0.0007}}},
         "prediction": {"trust": pc.PREDICT_TRUSTED, "keeps_up_with": None,
                        "num_workers": 2, "off_cpu_s": 0.0, "make_s": 0.07,
                        "quiet_compute_s": 0.01, "handover_s": 0.0,
                        "worker_cores_needed": 6.6, "usable_cpus": 2, "wait_floor_s": 0.02,
                        "cheaper_by": 3.3,
                        "by_workers": [{"num_workers": 2, "wait_s": 0.030},
                                       {"num_workers": 16, "wait_s": 0.010}]}}
    assert we.thread_pool(s)
    (f,) = pc.advise(s)
    assert f.numbers["shorter"] is None
    # Helper 40C: the model's "the workers need about 21.7 cores" led, 3 of
    # 3, where one BLAS thread a worker took the step from 61-228 ms to
    # 15 ms: the pool's experiment now heads the line.
    said = pc.WORDS[f.code](f.numbers)
    assert said.startswith("Next: one thread a worker first (threadpoolctl.threadpool_limits(1) "
                           "in worker_init_fn; the thread-pool line below): 49% of the workers'")
    assert f.numbers["pool_share"] == pytest.approx(we.thread_pool(s)[0].numbers["share"])
    # Without the pool's evidence the rows' shorter wait is advised.
    quiet = {**s, "host": {"usable_cpus": 2}}
    (g,) = pc.advise(quiet)
    assert g.numbers["shorter"] is not None and g.numbers["shorter"]["num_workers"] == 16
    assert "pool_share" not in g.numbers
