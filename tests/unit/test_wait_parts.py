"""wait_split and findings.wait_parts: the measured parts of the input
wait, the largest of them, and the HAND-OVER reading they decide."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from traceml import wait_split
from traceml.findings import advice, input_bound, label_support, wait_parts


def test_the_parts_of_each_fetch_add_up_to_its_wait():
    wait = np.array([10, 10, 10, 10], dtype=np.int64)
    cpu = np.array([2, 12, 0, 3], dtype=np.int64)       # 12 > wait: capped
    runq = np.array([1, 5, 20, -1], dtype=np.int64)     # -1: unread, no wait
    making = np.array([4, 4, 30, -1], dtype=np.int64)   # -1: unknown, left out
    got = wait_split.split(wait, cpu, runq, making)
    assert got["fetches"] == 3
    p = got["parts_s"]
    # fetch 0: cpu 2, runq 1, asleep 7 of which making 4, transit 3;
    # fetch 1: cpu 10 (capped), nothing left; fetch 2: cpu 0, runq 10
    # (capped at what is left), asleep 0, making 0.
    assert p == pytest.approx({"worker_making": 4e-9, "worker_cpu_wait": 0.0,
                               "main_cpu": 12e-9, "cpu_wait": 11e-9, "in_transit": 3e-9})
    assert sum(p.values()) == pytest.approx(got["wait_s"]) == pytest.approx(30e-9)
    assert got["runq_known"]
    # The worker waited 3 ns of its 4 for a core in fetch 0; fetch 2's 9 ns
    # are capped at its making (0); -1 (unknown) reads 0.
    got = wait_split.split(wait, cpu, runq, making, np.array([3, -1, 9, 5]))
    assert got["parts_s"] == pytest.approx({"worker_making": 1e-9, "worker_cpu_wait": 3e-9,
                                            "main_cpu": 12e-9, "cpu_wait": 11e-9,
                                            "in_transit": 3e-9})
    assert wait_parts.production_fraction(got) == pytest.approx(4 / 30)
    # The largest of the other parts over their sum: main_cpu 12 of 26.
    assert wait_parts.other_largest_fraction(got) == pytest.approx(12 / 26)


def test_without_worker_timing_the_sleep_is_one_part():
    got = wait_split.split(np.array([10, 20]), np.array([4, 5]), np.array([-1, -1]))
    # Without the process's clock the other threads' part is left out.
    assert list(got["parts_s"]) == [p for p in wait_split.PARTS_UNTIMED
                                    if p not in (wait_split.OTHERS_PART,
                                                 wait_split.OTHERS_QUEUED_PART,
                                                 wait_split.SAMPLER_PART)]
    assert got["parts_s"] == pytest.approx({"main_cpu": 9e-9, "cpu_wait": 0.0,
                                            "asleep": 21e-9})
    assert not got["runq_known"]


def test_other_threads_come_out_of_the_unexplained_sleep():
    wait = np.array([10, 10, 10], dtype=np.int64)
    cpu = np.array([2, 2, 2], dtype=np.int64)
    runq = np.array([1, 1, 1], dtype=np.int64)
    making = np.array([3, 0, 7], dtype=np.int64)
    others = np.array([2, 50, -1], dtype=np.int64)   # 50: capped; -1 reads 0
    got = wait_split.split(wait, cpu, runq, making, others_cpu_ns=others)
    # Asleep 7 in each; made 3, 0, 7; the rest 4, 7, 0, of which the other
    # threads take 2, 7 (all of it), 0.
    assert list(got["parts_s"]) == [p for p in wait_split.PARTS_TIMED
                                    if p not in (wait_split.SAMPLER_PART,
                                                 wait_split.OTHERS_QUEUED_PART,
                                                 wait_split.TRANSIT_QUEUED_PART,
                                                 wait_split.BEHIND_PART)]
    assert got["parts_s"] == pytest.approx({
        "worker_making": 10e-9, "worker_cpu_wait": 0.0, "main_cpu": 6e-9, "cpu_wait": 3e-9,
        "other_threads": 9e-9, "in_transit": 2e-9})
    untimed = wait_split.split(wait, cpu, runq, others_cpu_ns=others)
    assert list(untimed["parts_s"]) == [p for p in wait_split.PARTS_UNTIMED
                                        if p not in (wait_split.SAMPLER_PART,
                                                     wait_split.OTHERS_QUEUED_PART)]
    assert untimed["parts_s"] == pytest.approx({"main_cpu": 6e-9, "cpu_wait": 3e-9,
                                                "other_threads": 9e-9, "asleep": 12e-9})
    assert sum(untimed["parts_s"].values()) == pytest.approx(untimed["wait_s"])
    assert wait_parts.largest(untimed) == ("asleep", pytest.approx(0.4))


def test_the_samplers_time_comes_out_of_the_threads_own_parts_first():
    # Waits of 10 ns: the thread on a CPU 2, queued 1, asleep 7; the
    # sampler 6 ns in the first fetch (1 of CPU: out of main_cpu, 5 out of
    # the sleep, before the worker's overlap of 3 is read from what is
    # left), 9 in the second (1 of CPU, 7 asleep, and 1 queued for a core,
    # which stays the queue's), none in the third.  The parts still add
    # up to the wait.
    wait = np.array([10, 10, 10], dtype=np.int64)
    cpu = np.array([2, 2, 2], dtype=np.int64)
    runq = np.array([1, 1, 1], dtype=np.int64)
    making = np.array([3, 0, 7], dtype=np.int64)
    sampler = (np.array([6, 9, 0]), np.array([1, 1, 0]))
    got = wait_split.split(wait, cpu, runq, making, sampler=sampler)
    assert list(got["parts_s"]) == [p for p in wait_split.PARTS_TIMED
                                    if p not in (wait_split.OTHERS_PART,
                                                 wait_split.OTHERS_QUEUED_PART,
                                                 wait_split.TRANSIT_QUEUED_PART,
                                                 wait_split.BEHIND_PART)]
    assert got["parts_s"] == pytest.approx({
        "worker_making": (2 + 0 + 7) * 1e-9, "worker_cpu_wait": 0.0,
        "main_cpu": (1 + 1 + 2) * 1e-9, "cpu_wait": (1 + 1 + 1) * 1e-9,
        "sampler": (6 + 8 + 0) * 1e-9, "in_transit": 0.0})
    assert sum(got["parts_s"].values()) == pytest.approx(got["wait_s"])
    # Without worker timing the sampler comes out of the one sleep.
    untimed = wait_split.split(wait, cpu, runq, sampler=sampler)
    assert untimed["parts_s"] == pytest.approx({
        "main_cpu": 4e-9, "cpu_wait": 3e-9, "sampler": 14e-9, "asleep": 9e-9})


def test_the_transits_wait_for_a_core_comes_out_of_what_is_left_in_transit():
    # Waits of 10 ns: on a CPU 2, queued 1, asleep 7; made 3, 0, 7; the
    # other threads 2, 0, 0; in transit then 2, 7, 0, of which the awaited
    # worker's threads waited for a core 1, 9 (capped at 7), 4 (nothing
    # left: 0).
    wait = np.array([10, 10, 10], dtype=np.int64)
    cpu = np.array([2, 2, 2], dtype=np.int64)
    runq = np.array([1, 1, 1], dtype=np.int64)
    making = np.array([3, 0, 7], dtype=np.int64)
    others = np.array([2, 0, 0], dtype=np.int64)
    transit = np.array([1, 9, 4], dtype=np.int64)
    got = wait_split.split(wait, cpu, runq, making, others_cpu_ns=others,
                           transit_queued_ns=transit)
    assert list(got["parts_s"]) == [p for p in wait_split.PARTS_TIMED
                                    if p not in (wait_split.SAMPLER_PART, wait_split.BEHIND_PART,
                                                 wait_split.OTHERS_QUEUED_PART)]
    assert got["parts_s"] == pytest.approx({
        "worker_making": 10e-9, "worker_cpu_wait": 0.0, "main_cpu": 6e-9, "cpu_wait": 3e-9,
        "other_threads": 2e-9, "transit_cpu_wait": 8e-9, "in_transit": 1e-9})
    assert sum(got["parts_s"].values()) == pytest.approx(got["wait_s"])
    # With the host read, its share of every wait for a core is the host's.
    hosted = wait_split.split(wait, cpu, runq, making, host_share=0.5, others_cpu_ns=others,
                              transit_queued_ns=transit)
    assert hosted["parts_s"]["transit_cpu_wait"] == pytest.approx(4e-9)
    assert hosted["parts_s"]["host_cpu_wait"] == pytest.approx(0.5 * (3e-9 + 8e-9))
    assert sum(hosted["parts_s"].values()) == pytest.approx(got["wait_s"])
    # The loop's and the transit's waits for a core are one cause: the host
    # leads where they outweigh the rest, its share past a third of them.
    assert wait_parts.host_leads(hosted)


def test_nothing_readable_is_no_split():
    assert wait_split.split(np.array([10]), np.array([-1]), np.array([3])) is None
    assert wait_split.split(np.array([10]), np.array([3]), np.array([3]),
                            np.array([-1])) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**7), st.integers(-1, 2 * 10**7),
                          st.integers(-1, 2 * 10**7), st.integers(-1, 2 * 10**7)),
                min_size=1, max_size=40))
def test_the_parts_never_exceed_the_wait_property(rows):
    wait, cpu, runq, making = (np.array(c, dtype=np.int64) for c in zip(*rows))
    got = wait_split.split(wait, cpu, runq, making, runq[::-1], others_cpu_ns=cpu[::-1])
    keep = (cpu >= 0) & (making >= 0)
    if not keep.any():
        assert got is None
        return
    assert got["fetches"] == int(keep.sum())
    assert all(v >= 0 for v in got["parts_s"].values())
    assert sum(got["parts_s"].values()) == pytest.approx(wait[keep].sum() * 1e-9, abs=1e-15)


def test_clocked_store_steps_map_to_the_sources_positions():
    selected = np.array([True, False, True, True, False, True])
    # store steps 0, 1 (another source's), 3, 5, and 9 (past the records)
    pos = wait_split.clocked_positions(np.array([0, 1, 3, 5, 9]), selected, 6)
    assert pos.tolist() == [0, -1, 2, 3, -1]
    assert wait_split.clocked_positions(np.array([0, 4, 6]), None, 6).tolist() == [0, 4, -1]


def test_the_largest_part_and_the_rest_in_proportion():
    split = {"wait_s": 10.0, "parts_s": {"worker_making": 3.0, "main_cpu": 1.0,
                                         "cpu_wait": 4.0, "in_transit": 2.0}}
    assert wait_parts.largest(split) == ("cpu_wait", pytest.approx(0.4))
    assert wait_parts.other_largest_fraction(split) == pytest.approx(4.0 / 7.0)
    assert wait_parts.other_largest_fraction(
        {"wait_s": 1.0, "parts_s": {"main_cpu": 1.0, "cpu_wait": 0.0, "asleep": 0.0}}) is None
    assert wait_parts.largest(None) is None
    assert wait_parts.largest({"wait_s": 0.0, "parts_s": {}}) is None


@pytest.mark.parametrize("share, production, fraction", [
    (0.30, 0.25, None), (0.30, 0.10, None), (0.80, 0.30, None), (0.80, 0.30, 0.5),
    (0.80, 0.30, 0.4), (0.50, 0.20, 1 / 3), (0.25, 0.05, 0.9),
])
def test_hand_over_is_the_production_smaller_than_the_largest_other_part(
        share, production, fraction):
    # The parts of the step: production, and the rest of the wait split
    # as measured; HAND-OVER exactly where the production is not the
    # largest of them.
    rest = share - production
    others = [rest] if fraction is None else [rest * fraction, rest * (1 - fraction)]
    expected = (input_bound.HAND_OVER if production < max(others) else input_bound.INPUT_BOUND)
    got = input_bound.diagnose(share, production, None, None, fraction).label
    assert got == expected
    # Under the input-bound line, the parts decide nothing.
    assert input_bound.diagnose(0.1, production * 0.1, None, None, fraction).label == \
        input_bound.BALANCED


def test_the_resamples_read_hand_over_with_the_measured_split():
    # 400 steps of 10 ms waiting 6 ms, 2 ms of it on a worker making the
    # batch: production 20% of the step against 40% of the rest.  Read
    # whole, the rest is larger (HAND-OVER); split 30/30/40 by the clocks
    # its largest part is 1.6 ms, under the production (INPUT-BOUND).  The
    # resamples read as the run does, since every block is alike.
    n = 400
    wait = np.full(n, 6_000_000, dtype=np.int64)
    step = np.full(n, 10_000_000, dtype=np.int64)
    making = np.full(n, 2_000_000, dtype=np.int64)
    for fraction, label in ((None, input_bound.HAND_OVER), (0.4, input_bound.INPUT_BOUND)):
        assert input_bound.diagnose(0.6, 0.2, None, None, fraction).label == label
        got = label_support.support(wait, step, label, making, 1, 1e7, fraction)
        assert got["support"] == 1.0, got


def test_the_line_names_each_part_with_its_share():
    s = {"wait_parts": {"all": {"fetches": 50, "wait_s": 2.0, "runq_known": True,
                                "parts_s": {"main_cpu": 1.5, "cpu_wait": 0.1, "asleep": 0.4}},
                        "stalls": {"fetches": 5, "wait_s": 1.0, "runq_known": True,
                                   "parts_s": {"main_cpu": 0.9, "cpu_wait": 0.0,
                                               "asleep": 0.1}}}}
    line = wait_parts.wait_parts_line(s)
    assert "50 clocked fetches" in line and "main CPU 75%" in line and "asleep 20%" in line
    assert "5 clocked stalls" in line and "main CPU 90%" in line
    # A part under half a percent (0%) is counted, not named.
    assert line.endswith("main CPU 90%, asleep 10%, 1 other part 0%"), line
    assert wait_parts.wait_parts_line({"wait_parts": None}) is None


def test_a_source_without_records_has_no_clocked_positions():
    pos = wait_split.clocked_positions(np.array([0, 2]), np.zeros(3, dtype=bool), 3)
    assert pos.tolist() == [-1, -1]


def test_the_body_splits_into_cpu_queue_and_the_rest():
    got = wait_split.body_split(np.array([10, 20, 30]), np.array([4, 25, -1]),
                                np.array([3, 9, 1]))
    # step 0: 4 on CPU, 3 queued, 3 off; step 1: CPU capped at 20; step 2
    # not clocked.
    assert got["steps"] == 2
    assert got["parts_s"] == pytest.approx({"main_cpu": 24e-9, "cpu_wait": 3e-9,
                                            "off_cpu": 3e-9})
    assert got["compute_s"] == pytest.approx(30e-9)
    assert wait_split.body_split(np.array([5]), np.array([-1]), np.array([0])) is None


def _clocked(queued_s, waited_s, runq_known=True):
    return {"loader": {"num_workers": 2}, "host": {"usable_cpus": 2},
            "wait_parts": {"all": {"fetches": 10, "wait_s": 10 * waited_s,
                                   "parts_s": {}, "runq_known": runq_known},
                           "compute": {"steps": 10, "compute_s": 1.0, "runq_known": runq_known,
                                       "parts_s": {"main_cpu": 0.5, "cpu_wait": 10 * queued_s,
                                                   "off_cpu": 0.5 - 10 * queued_s}}}}


def test_the_note_needs_the_steps_queue_longer_than_the_input_wait():
    (f,) = wait_parts.notes(_clocked(0.004, 0.002))
    assert f.code == "compute_waits_for_core"
    assert f.numbers["cpu_wait_s"] == pytest.approx(0.004)
    assert f.numbers["compute_share"] == pytest.approx(0.04)
    assert "2 workers" in wait_parts.WORDS[f.code](f.numbers)
    assert wait_parts.notes(_clocked(0.002, 0.004)) == []
    assert wait_parts.notes(_clocked(0.004, 0.002, runq_known=False)) == []
    assert wait_parts.notes({"wait_parts": None}) == []


def test_the_clocked_production_decides_where_it_is_measured():
    # A worker making the batch while the loop's thread is itself on a
    # CPU does not make the loop wait: the clocked split gives production
    # 4% of the wait (worker timing's overlap gave 40%), so the other
    # parts lead and the run reads HAND-OVER.
    split = {"wait_s": 1.0, "parts_s": {"worker_making": 0.04, "main_cpu": 0.36,
                                        "cpu_wait": 0.55, "in_transit": 0.05}}
    p = wait_parts.production_fraction(split)
    f = wait_parts.other_largest_fraction(split)
    assert p == pytest.approx(0.04) and f == pytest.approx(0.55 / 0.96)
    share = 0.23
    assert input_bound.diagnose(share, share * p, None, None, f).label == input_bound.HAND_OVER
    assert input_bound.diagnose(share, 0.4 * share, None, None, f).label == \
        input_bound.INPUT_BOUND
    # Held fixed across the resamples, whatever each one's share.
    n = 400
    wait = np.full(n, 2_300_000, dtype=np.int64)
    step = np.full(n, 10_000_000, dtype=np.int64)
    got = label_support.support(wait, step, input_bound.HAND_OVER, None, 1, 1e7, f, p)
    assert got["support"] == 1.0
    assert wait_parts.production_fraction({"wait_s": 1.0, "parts_s": {"main_cpu": 1.0}}) is None



def test_main_cpu_at_no_workers_is_the_dataset_not_receiving():
    # At num_workers=0 nothing is handed over: the main process's CPU in
    # the fetch makes the batch (a helper's 30-step loop was told to time
    # the sampler against "receiving the batch, unpickling").
    with_workers = advice.WORDS["largest_part"]({"part": "main_cpu", "share": 0.8,
                                                 "num_workers": 2})
    alone = advice.WORDS["largest_part"]({"part": "main_cpu", "share": 0.8, "num_workers": 0})
    assert "receiving the batch" in with_workers
    assert "receiving" not in alone and "num_workers >= 1" in alone


def test_the_jobs_own_part_beside_a_host_that_leads():
    # Host 41%, main CPU 35%, in transit 21% (50 tensors a batch beside a
    # hog): main CPU, at least half the host's part, is named next.
    split = {"wait_s": 1.0, "parts_s": {"main_cpu": 0.35, "cpu_wait": 0.03,
                                        "host_cpu_wait": 0.41, "in_transit": 0.21}}
    assert wait_parts.second_part(split) == {"part": "main_cpu", "share": 0.35}
    # Host 60%, main CPU 28%: under half; nothing.
    split["parts_s"].update(host_cpu_wait=0.60, main_cpu=0.28, in_transit=0.09)
    assert wait_parts.second_part(split) is None
    assert wait_parts.second_part(None) is None


def test_waits_for_a_core_are_one_cause_against_the_transit():
    # Beside a hog: other programs 35%, the loop's own wait for a core 9%,
    # in transit 40%.  The cores full (44%) lead, and other programs hold
    # most of that: HOST-BOUND, not HAND-OVER on the transit.
    split = {"wait_s": 1.0, "parts_s": {
        "worker_making": 0.05, "worker_cpu_wait": 0.0, "main_cpu": 0.11, "cpu_wait": 0.09,
        "host_cpu_wait": 0.35, "in_transit": 0.40}}
    assert wait_parts.host_leads(split)
    assert wait_parts.other_largest_fraction(split) == pytest.approx(0.44 / 0.95)
    # The job's own wait for a core 29%, other programs' 25%, in transit
    # 27% (6 workers beside 2 hogs): others hold 46% of the core waits,
    # past a third: the host's.
    split["parts_s"].update(cpu_wait=0.29, host_cpu_wait=0.25, in_transit=0.27, main_cpu=0.14)
    assert wait_parts.host_leads(split)
    assert wait_parts.other_largest_fraction(split) == pytest.approx(0.54 / 0.95)
    # Others hold under a third (10 of 54%): the job's own oversubscription.
    split["parts_s"].update(cpu_wait=0.44, host_cpu_wait=0.10)
    assert not wait_parts.host_leads(split)


def _outrun_inputs(cpu_s, step_s, wait_s, main_cpu_s, cpu_wait_s, handover_s=0.0):
    production = {"model": {"cpu_s": cpu_s, "step_s": step_s, "wait_s": wait_s,
                            "handover_s": handover_s}}
    compute = step_s - wait_s
    body = {"steps": 10, "compute_s": 10 * compute,
            "parts_s": {"main_cpu": 10 * main_cpu_s, "cpu_wait": 10 * cpu_wait_s,
                        "off_cpu": 10 * max(compute - main_cpu_s - cpu_wait_s, 0.0)}}
    return production, body


def test_workers_that_outrun_the_cores_make_the_wait_the_loaders():
    # 30 ms of worker CPU a batch, a 5 ms CPU step stretched to 7 ms by a
    # 2 ms wait for a core: quiet, the loop takes a batch per 5 ms and
    # keeps a core, so the workers need 30 / 5 = 6 cores against 2 - 1.
    production, body = _outrun_inputs(0.030, 0.027, 0.020, 0.005, 0.002)
    assert wait_parts.workers_outrun_cores(production, body, 2)
    # 2 ms a batch: 0.4 cores, which the host gives: the host may lead.
    production, body = _outrun_inputs(0.002, 0.027, 0.020, 0.005, 0.002)
    assert not wait_parts.workers_outrun_cores(production, body, 2)
    # 8 ms a batch against a 5 ms sleeping step (no core kept): 1.6 cores
    # of 2 fit; with the step on a CPU, 1.6 of 1 do not.
    production, body = _outrun_inputs(0.008, 0.007, 0.002, 0.0, 0.0)
    assert not wait_parts.workers_outrun_cores(production, body, 2)
    production, body = _outrun_inputs(0.008, 0.007, 0.002, 0.005, 0.0)
    assert wait_parts.workers_outrun_cores(production, body, 2)
    # Anything unmeasured: no claim.
    assert not wait_parts.workers_outrun_cores(None, body, 2)
    assert not wait_parts.workers_outrun_cores(production, None, 2)
    assert not wait_parts.workers_outrun_cores(production, body, None)


def test_idle_workers_say_where_the_measured_wait_lies():
    from traceml.findings import worker_evidence

    idle = {"who": "workers", "reads": "none", "read_bytes": 0, "major_faults": 0,
            "wall_s": 0.3, "fast_read_bytes": 0, "fast_wall_s": 0.7}
    guessed = worker_evidence.WORDS["idle"](idle)
    assert guessed.endswith("the wait lies elsewhere (IPC, the main process, locks).")
    measured = worker_evidence.WORDS["idle"](
        {**idle, "largest": {"part": "host_cpu_wait", "share": 0.62}})
    assert "IPC" not in measured
    assert measured.endswith("its largest measured part (62% of the stalls' wait) is "
                             + wait_parts.PART_NAMES["host_cpu_wait"] + ".")


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_sleeping_sampler_is_its_own_part_and_its_own_next_step(num_workers):
    """The sampler's timed calls hold all but 0.5 ms of each 12-13.5 ms
    fetch (0.1 ms of CPU each), the loop's thread 0.4 ms on a CPU: the
    sampler part is each fetch's call less nothing (its CPU out of
    main_cpu, the rest out of the sleep), the largest part; the next step
    is the sampler's, and "try num_workers" is not offered."""
    import corpus
    from traceml import _core

    case = corpus.slow_sampler(0, num_workers)
    s = corpus.replay(case).summary
    rec = case.records
    # Each epoch's first max(1, num_workers) fetches are start-up.
    steady = (rec["flags"] >> _core.FLAG_POS_SHIFT) >= max(1, num_workers)
    split = s["wait_parts"]["all"]
    calls = case.sampler_items
    assert split["parts_s"]["sampler"] == pytest.approx(
        float((calls["end_ns"] - calls["begin_ns"])[steady].sum()) * 1e-9, rel=1e-6)
    assert sum(split["parts_s"].values()) == pytest.approx(split["wait_s"], rel=1e-9)
    assert split["parts_s"]["main_cpu"] == pytest.approx(
        (0.4e-3 - 0.1e-3) * split["fetches"], rel=1e-6)
    assert s["wait_parts"]["largest"]["part"] == "sampler"
    codes = [c for c, _ in s["next_items"]]
    assert "largest_part" in codes and "try_workers" not in codes
    (text,) = [t for (c, _), t in zip(s["next_items"], s["next"]) if c == "largest_part"]
    assert "the sampler: it runs in the main process at any num_workers" in text


def test_the_host_leaves_the_compute_too_where_it_held_the_loops_core():
    # Slow samples every 7th index beside 6 CPU hogs (helper 63): input 50%
    # of the step, the host's part 89% of the wait, and the loop's thread
    # waited for a core 71% of its compute, 90% of that while other
    # programs held the cores.  Without the host in the wait alone:
    # 0.50 x 0.11 / (1 - 0.50 x 0.89) = 10%, "the host's wait"; without it
    # in the compute too: 0.50 x 0.11 / (0.50 x 0.11 + 0.50 x (1 - 0.639))
    # = 23%, the loader's (44-45% on a quiet host).
    split = {"wait_s": 1.0, "parts_s": {"worker_making": 0.08, "main_cpu": 0.02,
                                        "cpu_wait": 0.0, "host_cpu_wait": 0.89,
                                        "in_transit": 0.01}}
    body = {"steps": 50, "compute_s": 2.0, "runq_known": True, "host_share": 0.9,
            "parts_s": {"main_cpu": 0.58, "cpu_wait": 1.42, "off_cpu": 0.0}}
    r, h, c = 0.5, 0.89, 1.42 * 0.9 / 2.0
    assert wait_parts.compute_host_fraction(body) == pytest.approx(c)
    assert r * (1 - h) / (1 - r * h) < wait_parts.LOADER_OWN_SHARE
    assert r * (1 - h) / (r * (1 - h) + (1 - r) * (1 - c)) > wait_parts.LOADER_OWN_SHARE
    assert wait_parts.host_explains(split, r)
    assert not wait_parts.host_explains(split, r, body)
    assert wait_parts.next_for(split, r, body) == {
        "part": "worker_making", "share": 0.08, "past_host": 0.89}
    # The loop's own workers holding its core are no host's: the compute
    # keeps its waits, and the host explains the wait as before.
    assert wait_parts.host_explains(split, r, dict(body, host_share=0.0))
    unread = {k: v for k, v in body.items() if k != "host_share"}
    assert wait_parts.compute_host_fraction(unread) == 0.0
    assert wait_parts.host_explains(split, r, unread)


def test_the_host_explains_a_wait_only_where_the_rest_would_not_hold_the_loop():
    # The host's part 52% of a wait that is 94% of the step: without it the
    # wait is 0.94 x 0.48 / (1 - 0.94 x 0.52) = 88% of the step (its
    # compute unsplit), the
    # loader's own (1,200 small tensors a batch).  At 25% with the host's
    # 42%: 0.25 x 0.58 / (1 - 0.25 x 0.42) = 16%, the host's.
    split = {"wait_s": 1.0, "fetches": 10, "runq_known": True,
             "parts_s": {"worker_making": 0.02, "worker_cpu_wait": 0.0, "main_cpu": 0.41,
                         "cpu_wait": 0.02, "host_cpu_wait": 0.52, "in_transit": 0.03}}
    assert not wait_parts.host_explains(split, 0.94)
    assert wait_parts.host_explains(split, 0.25)
    want = 0.94 * 0.48 / (1 - 0.94 * 0.52)
    assert want > wait_parts.LOADER_OWN_SHARE
    # The next step then is the largest of the loader's own parts.
    got = wait_parts.next_for(split, 0.94)
    assert got == {"part": "main_cpu", "share": 0.41, "past_host": 0.52}
    assert wait_parts.next_for(split, 0.25)["part"] == "host_cpu_wait"
    assert wait_parts.next_for(split)["part"] == "host_cpu_wait"
    # The sentence says what it set aside: "the largest" of 41% beside a
    # 52% part on the same line read as a contradiction (helper 30B).
    said = wait_parts.largest_sentence(got)
    assert said.startswith("Besides other programs holding the cores (52%), the largest "
                           "measured part of the wait (41%) is "), said
    assert wait_parts.largest_sentence(wait_parts.next_for(split)).startswith(
        "The largest measured part of the wait (52%)")
    # The next step says it likewise: "(52%) (41%)" side by side read as
    # two bare numbers for one part (helper 32B).
    nxt = advice.WORDS["largest_part"]({**got, "num_workers": 2})
    assert nxt.startswith("Next: besides other programs holding the cores (52%), the largest "
                          "measured part of the wait (41%) is "), nxt
    assert advice.WORDS["largest_part"]({**got, "second": True}).startswith(
        "Besides other programs holding the cores (52%), the next largest measured part")
    assert advice.WORDS["largest_part"]({"part": "main_cpu", "share": 0.4,
                                         "second": True}).startswith(
        "The next largest measured part of the wait (40%) is ")
    assert advice.WORDS["largest_part"]({"part": "main_cpu", "share": 0.4}).startswith(
        "Next: the largest measured part of the wait (40%) is ")


def test_other_threads_at_no_workers_are_the_batch_making_first():
    # A dataset handing its 6 ms decode to a ThreadPoolExecutor at
    # num_workers=0 (helper 29B): the wait is the main process's other
    # threads; the next step keeps num_workers >= 1, and says that a
    # thread holding the GIL reads the same.
    from traceml.findings import wait_parts as wp

    at0 = wp.part_next("other_threads", 0)
    assert "num_workers >= 1 moves the dataset's threads into the worker processes" in at0
    assert "pin-memory" not in wp.part_name("other_threads", 0)
    assert "threads the dataset starts" in wp.part_name("other_threads", 0)
    # With workers: the GIL holder and the pin-memory thread, as before.
    assert wp.part_next("other_threads", 2) == wp.PART_NEXT["other_threads"]
    assert wp.part_name("other_threads", 2) == wp.PART_NAMES["other_threads"]


def test_a_one_tensor_batch_is_not_told_to_send_fewer_tensors():
    # A batch that is one tensor already (helper 36B: a one-tensor batch
    # was told "fewer tensors per batch"): receiving is cheaper with
    # fewer, larger batches; a batch of 22 tensors keeps the per-tensor
    # remedy, and so does one whose tensors were not counted.
    from traceml.findings import wait_parts as wp

    for part in ("main_cpu", "in_transit"):
        one = wp.part_next(part, 2, None, 1.0)
        assert "fewer tensors" not in one and "smaller tensors" not in one, one
        assert wp.ONE_TENSOR_RECEIVING in one
        many = wp.part_next(part, 2, None, 22.0)
        assert many == wp.part_next(part, 2) == wp.PART_NEXT[part]
        assert "tensors per batch" in many
    timed = wp.part_next("main_cpu", 2, 0.1, 1.0)
    assert "sampler (timed apart, 10%)" in timed and wp.ONE_TENSOR_RECEIVING in timed
    assert "fewer tensors" not in timed
    # At 0 workers nothing crosses processes: the same words whatever the count.
    assert wp.part_next("main_cpu", 0, None, 1.0) == wp.MAIN_CPU_NO_WORKERS_NEXT
    said = advice.WORDS["largest_part"]({"part": "in_transit", "share": 0.6,
                                          "num_workers": 2, "tensors": 1.0})
    assert wp.ONE_TENSOR_RECEIVING in said and "fewer or smaller tensors" not in said


def test_the_batch_bytes_carry_the_median_tensor_count():
    from traceml import evidence

    nbytes = np.array([-1, 100, 100, 300, -1], dtype=np.int64)
    tensors = np.array([-1, 1, 3, 3, -1], dtype=np.int32)
    got = evidence.batch_bytes(nbytes, np.ones(5, bool), tensors)
    assert got == {"median": 100.0, "max": 300, "measured": 3,
                   "tensors_median": float(np.median([1, 3, 3]))}
    assert evidence.batch_bytes(nbytes, np.ones(5, bool))["tensors_median"] is None


def test_a_timed_sampler_is_not_a_suspect_in_the_main_process_cpu():
    # A cheap loader: main CPU 62% of the wait, the sampler timed apart at
    # 1% (helper 30A read "time the sampler alone" beside "the sampler 1%").
    split = {"wait_s": 1.0, "fetches": 21, "runq_known": True,
             "parts_s": {"worker_making": 0.01, "main_cpu": 0.62, "cpu_wait": 0.0,
                         "host_cpu_wait": 0.28, "other_threads": 0.03, "sampler": 0.01,
                         "in_transit": 0.05}}
    got = wait_parts.next_for(split, 0.15)
    assert got["part"] == "main_cpu" and got["sampler_share"] == pytest.approx(0.01)
    said = wait_parts.largest_sentence(got)
    assert "past the sampler (timed apart, 1%)" in said and "time the sampler" not in said
    # Not timed: the sampler is one of the suspects, and the step says how to time it.
    del split["parts_s"]["sampler"]
    assert "time the sampler alone" in wait_parts.largest_sentence(
        wait_parts.next_for(split, 0.15))


def test_the_wait_for_a_core_sentence_says_what_it_set_aside():
    # "The largest measured part (23%) is the loop's thread waiting for a
    # core" beside "other programs holding the cores 47%" (helper 33B):
    # next_for set the host's larger part aside, and the words say so.
    split = {"wait_s": 1.0, "parts_s": {"main_cpu": 0.2, "cpu_wait": 0.23,
                                        "host_cpu_wait": 0.47, "in_transit": 0.1}}
    largest = wait_parts.next_for(split, input_share=0.6)
    assert largest["part"] == "cpu_wait" and largest["past_host"] == pytest.approx(0.47)
    from traceml.findings import advice
    s = {"diagnosis": "INPUT-BOUND", "input_share": 0.6, "shape": "FAST", "concentration": {},
         "temporal": None, "loader": {"num_workers": 2}, "input_wait_s": {"median": 0.002},
         "stalls": {"count": 0}, "trend": None, "host": {"usable_cpus": 2},
         "wait_parts": {"largest": largest}}
    p = dict(advice._steady_steps(s, False))["wait_for_core"]
    said = advice.WORDS["wait_for_core"](p)
    assert said.startswith("Besides other programs holding the cores (47%), the largest "
                           "measured part of the input wait (23%)"), said
    del largest["past_host"]
    said = advice.WORDS["wait_for_core"](dict(advice._steady_steps(s, False))["wait_for_core"])
    assert said.startswith("The largest measured part of the input wait (23%)")


def test_a_sampler_that_leads_the_wait_is_no_hand_over():
    # A Sampler burning 4 ms an index at num_workers=2 (helper 35B): the
    # sampler 61% of the wait, other programs 33%, the workers' production
    # nothing; it read "HAND-OVER ... the loop waits mostly for batches
    # already made" (3 of 3).  The loader's own work in the main process:
    # INPUT-BOUND, the sampler's next step leading.
    from traceml.findings import input_bound

    split = {"wait_s": 1.0, "parts_s": {"worker_making": 0.0, "worker_cpu_wait": 0.0,
                                        "main_cpu": 0.06, "cpu_wait": 0.0,
                                        "host_cpu_wait": 0.33, "sampler": 0.61}}
    assert wait_parts.main_work_leads(split)
    share = 0.49
    other = wait_parts.other_largest_fraction(split)
    assert input_bound.diagnose(share, 0.0, None, None, other).label == input_bound.HAND_OVER
    assert input_bound.diagnose(share, 0.0, None, None, other,
                                main_leads=True).label == input_bound.INPUT_BOUND
    # Receiving leads: a hand-over, as before.
    receiving = {**split, "parts_s": {**split["parts_s"], "main_cpu": 0.61, "sampler": 0.06}}
    assert not wait_parts.main_work_leads(receiving)
    # Another thread holding the GIL: the batch waits made, to be received.
    gil = {**split, "parts_s": {**split["parts_s"], "other_threads": 0.61, "sampler": 0.06}}
    assert not wait_parts.main_work_leads(gil)
    # Without the workers' timing no part is production's: not read.
    assert not wait_parts.main_work_leads({"wait_s": 1.0, "parts_s": {"sampler": 0.9}})


def test_the_samplers_part_names_its_code():
    # A slow Sampler at num_workers=2 (helper 35B): the sampler's part led,
    # and nothing said whose code it is.
    from traceml import wrapping
    from traceml.findings import advice

    class WeightedOrderSampler:
        def __iter__(self):
            yield from range(4)

    class Loader:
        batch_sampler = None
        sampler = WeightedOrderSampler()

    code = wrapping.sampler_code(Loader())
    assert code == {"function": WeightedOrderSampler.__iter__.__qualname__,
                    "file": __file__,
                    "line": WeightedOrderSampler.__iter__.__code__.co_firstlineno}
    # A batch_sampler of the user's own is the code that draws the indices.
    Loader.batch_sampler = WeightedOrderSampler()
    Loader.sampler = None
    assert wrapping.sampler_code(Loader())["function"].endswith(
        "WeightedOrderSampler.__iter__")
    p = {"part": wait_parts.SAMPLER, "share": 0.72, "num_workers": 2,
         "sampler_code": {"function": "WeightedOrderSampler.__iter__",
                          "file": "/home/u/proj/B/c5_main.py", "line": 27}}
    said = advice.WORDS["largest_part"](p)
    assert said.endswith("(its code: `WeightedOrderSampler.__iter__` in `B/c5_main.py:27`).")
    assert "its code" not in advice.WORDS["largest_part"]({**p, "sampler_code": None})


def test_the_second_part_past_the_host_keeps_the_sampler_measured():
    # Other programs 48% of the wait, the main CPU 44%, the sampler timed
    # apart at 0% (helper 36B): the main CPU's step does not say "time the
    # sampler alone".
    split = {"wait_s": 1.0, "parts_s": {"host_cpu_wait": 0.48, "main_cpu": 0.44,
                                        "worker_making": 0.08, "sampler": 0.0}}
    second = wait_parts.second_part(split)
    assert second["part"] == "main_cpu" and second["sampler_share"] == 0.0
    said = wait_parts.part_next("main_cpu", 2, second["sampler_share"])
    assert "time the sampler alone" not in said and "past the sampler" in said


def test_the_making_part_names_what_was_measured_of_the_batches():
    # Helper 37B: "cheaper samples (the slow-code and slow-sample lines say
    # which)" beside collate_fn at 99% of the batch time and neither line.
    from traceml.findings import wait_parts as wp

    said = wp.making_next(0.99, False)
    assert "collate_fn holds 99% of their batch time" in said and "samples" not in said
    assert wp.making_next(0.01, True) == wp.PART_NEXT["worker_making"]
    bare = wp.making_next(None, False)
    assert "lines say which" not in bare and "profile the dataset's __getitem__" in bare
    p = {"part": "worker_making", "share": 0.8, "num_workers": 2, "collate_share": 0.99,
         "lines_said": False}
    assert "a cheaper collate_fn" in advice.WORDS["largest_part"](p)
    assert "a cheaper collate_fn" in wp.largest_sentence(p)
