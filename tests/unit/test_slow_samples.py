"""slow_samples and sample_timing: the item-to-batch join against brute
force, the slow-sample test and its exact stride, the collate share, and
the words over the corpus's item cases."""

import numpy as np
import pytest

import corpus
from traceml import _core, sample_timing
from traceml.findings import slow_samples
from traceml.result import schema

MS = 1_000_000


def _arrays(wall_ms, cpu_ms=None, index=None):
    wall = np.round(np.asarray(wall_ms, dtype=float) * MS).astype(np.int64)
    cpu = (wall.copy() if cpu_ms is None
           else np.round(np.asarray(cpu_ms, dtype=float) * MS).astype(np.int64))
    return {"wall_ns": wall, "cpu_ns": cpu,
            "index": np.arange(len(wall)) if index is None else np.asarray(index),
            "batch_share": np.full(len(wall), 0.25), "kind": "map"}


def _costs(n=64, every=8, slow=12.0, fast=0.5, seed=0):
    rng = np.random.default_rng(seed)
    x = fast * rng.lognormal(0, 0.3, n)
    x[np.arange(n) % every == 0] = slow
    return x


def test_join_matches_brute_force():
    rng = np.random.default_rng(3)
    recs = np.zeros(40, _core.BATCH_RECORD_DTYPE)
    for j in range(40):
        w, e = j % 3, j // 20
        begin = 1000 * (j // 3) + 10 * w
        recs[j] = (begin, begin + 400, 0, -1, j // 3, e, w)
    items = np.zeros(300, _core.ITEM_RECORD_DTYPE)
    items["begin_ns"] = rng.integers(0, 14_000, 300)
    items["end_ns"] = items["begin_ns"] + rng.integers(0, 300, 300)
    items["epoch"] = rng.integers(0, 2, 300)
    items["worker"] = rng.integers(0, 3, 300)
    got = sample_timing.join(items, recs)
    for i, it in enumerate(items):
        want = [j for j, r in enumerate(recs) if r["epoch"] == it["epoch"]
                and r["worker"] == it["worker"] and r["begin_ns"] <= it["begin_ns"]
                and it["end_ns"] <= r["end_ns"]]
        assert got[i] == (want[0] if want else -1)
    assert (got >= 0).sum() > 20 and (got < 0).sum() > 20


def test_every_8th_index_slow_is_found_with_its_stride():
    got = slow_samples.slow_of(_arrays(_costs()))
    assert got["basis"] == "cpu" and got["count"] == 8 and got["of"] == 64
    assert got["indices"] == list(range(0, 64, 8))
    assert (got["stride"], got["residue"]) == (8, 0)
    assert got["slow_s"] == pytest.approx(0.012)
    assert got["fast_s"] == pytest.approx(0.0005, rel=0.15)


def test_a_stride_holds_exactly_or_with_one_exception_beyond_chance():
    from scipy.stats import hypergeom

    exact = slow_samples.slow_of(_arrays(_costs()))
    assert exact["stride"] == 8 and exact["p_value"] is None
    x = _costs()
    x[16] = 0.5          # one index of the class read fast (helper 34B's noise)
    got = slow_samples.slow_of(_arrays(x))
    k = got["count"]
    assert got["stride"] == 8 and got["residue"] == 0
    assert (got["off_stride"], got["fast_on_stride"]) == (0, 1)
    # The tail of k slow among the class's k + 1 timed indices, k drawn
    # from every timed index, times the 3 strides tried (2, 4, 8).
    assert got["p_value"] == pytest.approx(3 * hypergeom.sf(k - 1, got["of"], k + 1, k))
    y = _costs()
    y[20] = 12.0         # one slow index off the class: gcd 4, yet 8 holds but one
    got = slow_samples.slow_of(_arrays(y))
    assert got["stride"] == 8 and (got["off_stride"], got["fast_on_stride"]) == (1, 0)
    # Two exceptions a way: no stride.
    w = _costs()
    w[[16, 32]] = 0.5
    assert slow_samples.slow_of(_arrays(w))["stride"] is None
    z = _costs(every=16)  # only every 16th: stride 16, not 8
    assert slow_samples.slow_of(_arrays(z))["stride"] == 16


def test_scheduling_blips_in_wall_time_do_not_pose_as_slow_samples():
    x = _costs()
    wall = x.copy()
    wall[[5, 13, 30]] = 9.0    # a loaded host stretched three fast items' wall
    got = slow_samples.slow_of(_arrays(wall, cpu_ms=x))
    assert got["basis"] == "cpu" and got["stride"] == 8 and 5 not in got["indices"]


def test_without_cpu_the_wall_clock_is_tested_with_its_floor():
    x = _costs(slow=30.0)
    got = slow_samples.slow_of(_arrays(x, cpu_ms=np.full(len(x), -1e-6)))
    assert got["basis"] == "wall" and got["stride"] == 8
    # 8 ms over a 0.5 ms median is under the wall floor (10 ms): not slow.
    y = _costs(slow=8.0)
    got = slow_samples.slow_of(_arrays(y, cpu_ms=np.full(len(y), -1e-6)))
    assert got["count"] == 0


def test_sleeping_samples_are_slow_on_the_wall_clock():
    x = _costs(slow=25.0)
    cpu = np.full(len(x), 0.05)           # the slow ones sleep: no CPU
    got = slow_samples.slow_of(_arrays(x, cpu_ms=cpu))
    assert got["basis"] == "wall" and got["stride"] == 8


def test_samples_slow_on_cpu_do_not_hide_samples_slow_on_the_wall_clock():
    # Work handed to a helper thread (or a sleep) every 8th index: 25 ms of
    # wall, no CPU on the worker's thread; and two samples (33, 50) that
    # burned 3 ms of CPU on it (a lazily built cache).
    x = _costs(slow=25.0)
    cpu = np.full(len(x), 0.05)
    cpu[[33, 50]] = x[[33, 50]] = 3.0
    got = slow_samples.slow_of(_arrays(x, cpu_ms=cpu))
    assert got["basis"] == "cpu+wall" and got["count"] == 8 + 2
    assert got["threshold_s"] == pytest.approx(max(5 * 0.05, 0.05 + 1.0) * 1e-3)
    assert got["wall_threshold_s"] == pytest.approx(
        max(5 * np.median(x), np.median(x) + 10.0) * 1e-3)
    assert set(range(0, 64, 8)) | {33, 50} == set(got["indices"])
    (f,) = slow_samples.rule({"available": True, "kind": "map", "slow": got})
    assert "of CPU or" in slow_samples.WORDS[f.code](f.numbers)


def test_slow_samples_that_hold_little_of_their_batch_are_no_finding():
    # The same slow samples, each holding 25% of its batch's make time (the
    # helper above: a finding), then 1% (a batch that copies 20 MB).
    arrays = _arrays(_costs())
    got = slow_samples.slow_of(arrays)
    assert got["batch_share"] == pytest.approx(0.25)
    block = {"available": True, "kind": "map", "slow": got}
    assert [f.code for f in slow_samples.rule(block)] == ["slow_samples_stride"]
    arrays["batch_share"] = np.full(len(arrays["wall_ns"]), 0.01)
    block["slow"] = slow_samples.slow_of(arrays)
    assert block["slow"]["count"] == 8       # measured, kept in the block
    assert slow_samples.rule(block) == []


def test_a_host_blip_on_the_wall_clock_does_not_break_the_cpu_stride():
    # Every 8th index burns 12 ms; a loaded host stretched index 13's wall
    # to 15 ms (its CPU 0.5 ms): the union has no stride, the CPU set has.
    x = _costs()
    wall = x.copy()
    wall[13] = 15.0
    got = slow_samples.slow_of(_arrays(wall, cpu_ms=x))
    assert got["basis"] == "cpu" and (got["stride"], got["residue"]) == (8, 0)
    assert 13 not in got["indices"]
    # Without a stride in the CPU set either, the union stands.
    y = x.copy()
    y[[0, 8]] = 0.5
    got = slow_samples.slow_of(_arrays(np.where(np.arange(64) == 13, 15.0, y), cpu_ms=y))
    assert got["basis"] == "cpu+wall" and 13 in got["indices"] and got["stride"] is None


def test_a_wait_for_a_core_measured_in_the_batch_is_not_a_slow_sample():
    # Healthy samples of 0.5 ms CPU on a full host: index 21's wall reads
    # 15 ms, of which its batch waited 14 ms for a core (the run queue).
    x = 0.5 * np.random.default_rng(3).lognormal(0, 0.3, 64)   # none slow
    wall = x.copy()
    wall[21] = 15.0
    arrays = _arrays(wall, cpu_ms=x)
    runq = np.zeros(64, dtype=np.int64)
    runq[21] = 14 * MS
    got = slow_samples.slow_of({**arrays, "batch_runq_ns": runq})
    assert got["count"] == 0
    # Unmeasured (-1), the wall clock alone cannot tell it: slow.
    got = slow_samples.slow_of({**arrays, "batch_runq_ns": np.full(64, -1)})
    assert got["basis"] == "wall" and got["indices"] == [21]
    # A sample that sleeps 15 ms while its batch waited 1 ms for a core
    # stays slow: only the measured wait comes off.
    runq[21] = 1 * MS
    got = slow_samples.slow_of({**arrays, "batch_runq_ns": runq})
    assert got["indices"] == [21]
    # The wait taken off is at most the sample's time off CPU: a batch's
    # 40 ms of waiting does not clear a sample that burned 14 ms of CPU.
    cpu = x.copy()
    cpu[21] = 14.0
    runq[21] = 40 * MS
    got = slow_samples.slow_of({**_arrays(wall, cpu_ms=cpu), "batch_runq_ns": runq})
    assert got["indices"] == [21] and got["basis"] == "cpu"


def test_each_workers_first_sample_is_left_out_as_its_start_up():
    # 2 workers, 32 samples each; each worker's first sample (index 0 and
    # 1) carries 300 ms of start-up, the rest cost 2 ms.
    wall = np.full(64, 2.0)
    wall[[0, 1]] = 300.0
    first = np.zeros(64, dtype=bool)
    first[[0, 1]] = True
    arrays = {**_arrays(wall), "first": first}
    got = slow_samples.slow_of(arrays)
    assert got["count"] == 0 and got["of"] == 62 and got["first_left_out"] == 2
    # Without the mark they are slow samples.
    assert slow_samples.slow_of(_arrays(wall))["indices"] == [0, 1]


def test_the_wall_clock_leaves_out_the_start_up_window_and_the_cpu_clock_does_not():
    # 4 workers, 8 samples a batch: while the last workers still fork,
    # two samples of the second round wait 30 ms off CPU (wall only) and
    # one burns 30 ms of CPU; the steady samples cost 0.2 ms.
    wall = np.full(400, 0.2)
    cpu = wall.copy()
    wall[[45, 53]] = 30.0
    wall[47] = cpu[47] = 30.0
    startup = np.arange(400) < 64
    got = slow_samples.slow_of({**_arrays(wall, cpu_ms=cpu), "startup": startup})
    assert got["indices"] == [47] and got["basis"] == "cpu"
    assert got["startup_left_out"] == 64 and got["of"] == 400
    # The same waits past the window are slow samples on the wall clock.
    wall[[45, 53]], wall[[145, 153]] = 0.2, 30.0
    got = slow_samples.slow_of({**_arrays(wall, cpu_ms=cpu), "startup": startup})
    assert got["indices"] == [47, 145, 153] and got["basis"] == "cpu+wall"


def test_a_slow_index_in_the_start_up_window_does_not_break_the_stride():
    # Every 13th index from 5 sleeps 60 ms (off CPU: the wall clock alone
    # finds it); index 5 falls in the start-up window, left out of the
    # wall clock's test (helper 29B).  Untested, it is not a fast index of
    # the stride's class: every 13th index, not "no common index stride".
    n = 300
    wall = np.full(n, 1.0)
    cpu = np.full(n, 0.05)
    slow = np.arange(n) % 13 == 5
    wall[slow] = 60.0
    startup = np.arange(n) < 8
    got = slow_samples.slow_of({**_arrays(wall, cpu_ms=cpu), "startup": startup})
    assert got["basis"] == "wall" and got["indices"][0] == 18
    assert (got["stride"], got["residue"]) == (13, 5)
    # Some of them burning CPU as well (both clocks find slow samples,
    # the wall clock some the CPU clock does not): index 5 is still
    # untested on the wall clock, not a fast index of the class (helper
    # 32B: "no common index stride" in 10 of 12 runs).
    cpu[slow & (np.arange(n) % 2 == 0)] = 40.0
    got = slow_samples.slow_of({**_arrays(wall, cpu_ms=cpu), "startup": startup})
    assert got["basis"] == "cpu+wall", got["basis"]
    assert (got["stride"], got["residue"]) == (13, 5)
    # A fast index of that class that was tested is an exception the
    # stride states; two break it.
    wall[5 + 13 * 11] = 1.0
    cpu[5 + 13 * 11] = 0.05
    got = slow_samples.slow_of({**_arrays(wall, cpu_ms=cpu), "startup": startup})
    assert got["stride"] == 13 and got["fast_on_stride"] == 1
    wall[5 + 13 * 12] = 1.0
    cpu[5 + 13 * 12] = 0.05
    got = slow_samples.slow_of({**_arrays(wall, cpu_ms=cpu), "startup": startup})
    assert got["stride"] != 13
    # (The CPU clock's own set, the even ones, still holds every 26th but
    # one: the finding where the union holds no stride.)
    assert got["stride"] in (None, 26)


def test_start_up_ends_when_every_worker_has_made_its_first_batch_of_the_epoch():
    rng = np.random.default_rng(8)
    n = 300
    epoch, worker = rng.integers(0, 2, n), rng.integers(0, 3, n)
    begin = rng.permutation(n).astype(np.int64) * 10
    end = begin + rng.integers(5, 400, n)
    got = sample_timing._in_startup(epoch, sample_timing._first_of_worker(epoch, worker, begin),
                                    begin, end)
    for e in range(2):
        mine = epoch == e
        # Brute force: each worker's earliest sample, its batch's end.
        ends = [end[mine & (worker == w)][np.argmin(begin[mine & (worker == w)])]
                for w in range(3) if (mine & (worker == w)).any()]
        assert (got[mine] == (begin[mine] < max(ends))).all()


def test_first_of_worker_marks_each_epoch_and_workers_earliest_sample():
    rng = np.random.default_rng(5)
    epoch, worker = rng.integers(0, 3, 200), rng.integers(0, 4, 200)
    begin = rng.permutation(200).astype(np.int64)
    got = sample_timing._first_of_worker(epoch, worker, begin)
    for e in range(3):
        for w in range(4):
            sel = np.flatnonzero((epoch == e) & (worker == w))
            assert got[sel].sum() == (1 if len(sel) else 0)
            if len(sel):
                assert got[sel[np.argmin(begin[sel])]]


def test_uniform_samples_have_none_slow_and_too_few_say_so():
    rng = np.random.default_rng(1)
    got = slow_samples.slow_of(_arrays(0.5 * rng.lognormal(0, 0.3, 200)))
    assert got["count"] == 0 and got["stride"] is None
    assert slow_samples.slow_of(_arrays([1.0] * 5)) == {"too_few": 5}
    assert slow_samples.slow_of(None) is None


def _replayed(case):
    return corpus.replay(case).summary


def test_corpus_every_8th_index_is_named_with_its_stride_and_share():
    s = _replayed(corpus.sim_slow_items(0))
    b = s["production"]["samples"]
    assert b["available"] and b["kind"] == "map" and b["samples"] == 256
    assert b["batches"] == 64 and b["sample_share"] == pytest.approx(1.0, abs=1e-6)
    (code, numbers), = b["findings"]
    assert code == "slow_samples_stride" and numbers["stride"] == 8
    # Batch of 4: one 12 ms sample beside three of ~0.5 ms.
    assert numbers["batch_share"] == pytest.approx(12 / 13.5, abs=0.02)
    # Each worker's first sample is left out of the test (its start-up):
    # index 0, worker 0's first, among them.
    t = b["table"]
    firsts = {min((e, w, i) for i, e, w in zip(range(t["of"]), t["epoch"], t["worker"])
                  if (e, w) == ew) for ew in set(zip(t["epoch"], t["worker"]))}
    assert b["slow"]["first_left_out"] == len(firsts)
    assert b["slow"]["of"] == 256 - len(firsts) and b["slow"]["count"] == 32 - 1
    (line,) = slow_samples.evidence_lines(s)
    assert line.startswith("slow samples: index 8, 16, 24, 32, 40, 48 ...: 12 ms each")
    assert "every 8th index (index % 8 == 0, and no other)" in line
    assert b["slowest"][0]["s"] == pytest.approx(0.012, rel=0.03)
    assert b["table"]["rows"] == b["table"]["of"] == 256 and b["table"]["order"] == "claim"


def test_corpus_collate_share_is_the_collate_time_over_batch_time():
    s = _replayed(corpus.sim_slow_items(1, every=5, batch_size=8, collate_ms=6.0))
    b = s["production"]["samples"]
    per = sum(r for r in b["table"]["s"])
    total = per + b["collate"]["calls"] * 0.006
    assert b["collate"]["median_s"] == pytest.approx(0.006, abs=1e-6)
    assert b["collate"]["share"] == pytest.approx(64 * 0.006 / total, rel=1e-3)
    assert f"collate_fn {round(100 * b['collate']['share'])}%" in slow_samples.sample_line(s)


def test_corpus_getitems_says_per_sample_time_is_unavailable():
    s = _replayed(corpus.sim_slow_items(2, collate_ms=4.0, getitems=True))
    b = s["production"]["samples"]
    assert b["kind"] == "getitems" and b["samples"] == 0 and b["slow"] is None
    codes = [c for c, _ in b["findings"]]
    assert codes == ["collate_share", "getitems_only"]
    assert "per-sample time is unavailable" in " ".join(slow_samples.evidence_lines(s))


def test_every_code_is_emitted_by_a_corpus_case(corpus_summaries):
    emitted = {code for _, s in corpus_summaries
               for code, _ in ((s.get("production") or {}).get("samples") or {}).get("findings", [])}
    # slow_samples (no stride) is emitted in the tests above' variants.
    assert {"slow_samples_stride", "collate_share", "getitems_only"} <= emitted
    x = _costs()
    x[[16, 32]] = 0.5
    block = {"available": True, "kind": "map", "slow": slow_samples.slow_of(_arrays(x))}
    (f,) = slow_samples.rule(block)
    assert f.code == "slow_samples" and "no common index stride" in slow_samples.WORDS[f.code](
        f.numbers)


def test_the_samples_block_fits_the_run_schema():
    jsonschema = pytest.importorskip("jsonschema")
    s = _replayed(corpus.sim_slow_items(0))
    jsonschema.validate({"format": "traceml-run", "format_version": 2, "summary": s}, schema())


def test_a_source_without_items_says_why():
    block, arrays = sample_timing.summarise(np.zeros(0, _core.ITEM_RECORD_DTYPE),
                                            np.zeros(0, _core.BATCH_RECORD_DTYPE), None)
    assert block == {"available": False, "unavailable": "the workers timed no sample",
                     "lost": 0} and arrays is None
    block, _ = sample_timing.summarise(np.zeros(0, _core.ITEM_RECORD_DTYPE),
                                       np.zeros(0, _core.BATCH_RECORD_DTYPE), None, 0,
                                       "its workers are not forked (start method 'spawn')")
    assert "spawn" in block["unavailable"]
    assert slow_samples.rule(block) == []


def test_an_index_slow_once_and_fast_after_is_said_not_to_be_the_samples():
    # Two workers' first samples (index 0 and 1) carry a 300 ms start-up
    # in epoch 0; the same indices cost 2 ms in epochs 1 and 2.
    index = np.tile(np.arange(20), 3)
    wall = np.full(60, 2_000_000, dtype=np.int64)
    wall[[0, 1]] = 300_000_000
    arrays = {"wall_ns": wall, "cpu_ns": wall.copy(), "index": index,
              "batch_share": np.ones(60)}
    out = slow_samples.slow_of(arrays)
    assert out["indices"] == [0, 1] and out["stride"] is None
    assert (out["slow_timings"], out["timings"]) == (2, 6)
    block = {"available": True, "kind": "map", "slow": out}
    (f,) = slow_samples.rule(block)
    said = slow_samples.WORDS[f.code](f.numbers)
    assert "fast in 4 of their 6 timings" in said and "not of the samples" in said
    # Slow every time they were made: the samples' own cost.
    wall[[20, 21, 40, 41]] = 300_000_000
    out = slow_samples.slow_of({**arrays, "wall_ns": wall, "cpu_ns": wall.copy()})
    (f,) = slow_samples.rule({**block, "slow": out})
    said = slow_samples.WORDS[f.code](f.numbers)
    assert "slow in every one of their 6 timings: the samples' own cost" in said
    assert "not of the samples" not in said


def test_indices_slow_in_most_of_their_timings_are_the_samples_own_cost():
    # A slow block of a ConcatDataset, indices 30-49 of 50, timed in 4
    # epochs; a busy host made 3 of those 80 timings fast.  The repeats
    # (60 past each index's first slow one) were slow 57 times: 95%,
    # nearer "always" than the 40% (77 of 200) at which any timing was
    # slow.  The block reads as one range.
    index = np.tile(np.arange(50), 4)
    wall = np.where(index >= 30, 20_000_000, 2_000_000).astype(np.int64)
    wall[[130, 181, 199]] = 2_000_000
    arrays = {"wall_ns": wall, "cpu_ns": wall.copy(), "index": index,
              "batch_share": np.ones(200)}
    out = slow_samples.slow_of(arrays)
    assert out["indices"] == list(range(30, 50))
    assert (out["slow_timings"], out["timings"], out["count"]) == (77, 80, 77)
    (f,) = slow_samples.rule({"available": True, "kind": "map", "slow": out})
    said = slow_samples.WORDS[f.code](f.numbers)
    assert said.startswith("slow samples: index 30-49 (every one of the 20)")
    assert "slow in 77 of their 80 timings: the samples' own cost" in said
    # Slow in one epoch of four (a cache filled once): the repeats were
    # slow 0 times of 60, nearer the 10% (20 of 200) of any timing.
    wall = np.full(200, 2_000_000, dtype=np.int64)
    wall[30:50] = 20_000_000
    out = slow_samples.slow_of({**arrays, "wall_ns": wall, "cpu_ns": wall.copy()})
    (f,) = slow_samples.rule({"available": True, "kind": "map", "slow": out})
    said = slow_samples.WORDS[f.code](f.numbers)
    assert "were fast in 60 of their 80 timings" in said
    # Slow on the CPU clock: work done then, not a busy host.
    assert "their CPU rose then" in said and "busy host" not in said


def test_gc_inside_sums_the_collections_within_each_item_of_its_worker():
    ms = 1_000_000
    gc = np.zeros(4, dtype=_core.ITEM_RECORD_DTYPE)
    # worker 0: collections at 2-5 ms and 6-7 ms; worker 1: 2-4 ms; worker
    # 0 again at 20-30 ms, past every item.
    gc["worker"] = [0, 0, 1, 0]
    gc["begin_ns"] = np.array([2, 6, 2, 20]) * ms
    gc["end_ns"] = np.array([5, 7, 4, 30]) * ms
    gc["cpu_ns"] = np.array([3, 1, -1, 10]) * ms
    worker = np.array([0, 0, 1, 1])
    begin = np.array([0, 5, 0, 5]) * ms
    end = np.array([5, 10, 5, 10]) * ms
    wall, cpu = sample_timing.gc_inside(gc, worker, begin, end)
    np.testing.assert_array_equal(wall, np.array([3, 1, 2, 0]) * ms)
    np.testing.assert_array_equal(cpu, np.array([3, 1, 0, 0]) * ms)
    empty = np.zeros(0, dtype=_core.ITEM_RECORD_DTYPE)
    assert not sample_timing.gc_inside(empty, worker, begin, end)[0].any()


def test_one_slow_timing_is_a_hiccup_not_slow_samples():
    # 60 samples at 2 ms, one at 70 ms (a worker's batch made while the
    # others forked): the test finds it, the rule names no slow samples.
    wall = np.full(60, 2_000_000, dtype=np.int64)
    wall[13] = 70_000_000
    arrays = {"wall_ns": wall, "cpu_ns": wall.copy(), "index": np.arange(60),
              "batch_share": np.ones(60)}
    out = slow_samples.slow_of(arrays)
    assert out["count"] == 1 and out["indices"] == [13]
    assert slow_samples.rule({"available": True, "kind": "map", "slow": out}) == []
    wall[40] = 70_000_000
    out = slow_samples.slow_of({**arrays, "wall_ns": wall, "cpu_ns": wall.copy()})
    (f,) = slow_samples.rule({"available": True, "kind": "map", "slow": out})
    assert f.code == "slow_samples" and f.numbers["count"] == 2


def test_a_calls_mean_is_said_beside_its_median_where_a_few_calls_hold_the_time():
    # collate_fn 40 ms on every 3rd of 30 batches, 0.1 ms on the others.
    ms = np.where(np.arange(30) % 3 == 0, 40.0, 0.1)
    dur = np.round(ms * MS).astype(np.int64)
    c = sample_timing._call_block(dur, int(dur.sum() * 1.2))
    assert c["median_s"] == pytest.approx(np.median(ms) * 1e-3)
    assert c["mean_s"] == pytest.approx(ms.mean() * 1e-3)
    words = slow_samples.WORDS["collate_share"]({**c})
    assert "median 100 µs, mean 13.4 ms a batch, over 30 calls" in words, words
    # Calls alike: the median alone.
    c = sample_timing._call_block(np.full(30, MS // 10), 30 * MS)
    assert "(100 µs a batch, median, over 30 calls)" in slow_samples.WORDS["collate_share"](c)


def test_two_slow_places_a_stride_are_a_set():
    # Every 12th index and every 12th + 5 (helper 35B: "no common index
    # stride", 8 of 8): the set's test pays for every (stride, set) tried.
    idx = np.arange(240)
    slow = idx[np.isin(idx % 12, (0, 5))]
    got = slow_samples._stride(slow, idx[~np.isin(idx % 12, (0, 5))])
    assert (got["stride"], got["residues"], got["off_stride"], got["fast_on_stride"]) == \
        (12, [0, 5], 0, 0)
    assert got["p_value"] < slow_samples.STRIDE_ALPHA
    # Through the per-sample test and its finding: the words.
    rng = np.random.default_rng(2)
    wall = 0.5 * rng.lognormal(0, 0.3, 240)
    wall[np.isin(idx % 12, (0, 5))] = 12.0
    block = {"available": True, "kind": "map", "slow": slow_samples.slow_of(_arrays(wall))}
    (f,) = slow_samples.rule(block)
    said = slow_samples.WORDS[f.code](f.numbers)
    assert "2 places in every 12 indices (index % 12 in {0, 5}, and no other: p = " in said
    # One place: the single-residue answer, no set.
    one = idx[idx % 12 == 5]
    assert "residues" not in slow_samples._stride(one, idx[idx % 12 != 5])
    # Random slow indices: no stride, no set (200 draws of 8-40 of 240).
    rng = np.random.default_rng(5)
    claims = 0
    for _ in range(200):
        k = int(rng.integers(8, 41))
        pick = np.sort(rng.choice(240, size=k, replace=False))
        claims += slow_samples._stride(pick, np.setdiff1d(idx, pick))["stride"] is not None
    assert claims == 0
