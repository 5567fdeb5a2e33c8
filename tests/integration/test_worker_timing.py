"""Worker-side batch timing (traceml.worker_timing, _core.BatchLog and
TimedFetch): the shared log, the step-to-batch match and the busy-time
reducer against brute-force references, and real DataLoaders whose items
burn or sleep a set time, so that each batch's cost is known."""

import gc
import multiprocessing
import os
import pickle
import time
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import traceml  # noqa: E402 - after importorskip("torch")
from traceml import _core, worker_timing  # noqa: E402 - after importorskip("torch")
from traceml.findings import input_bound, worker_evidence  # noqa: E402 - after importorskip("torch")

from burn import BurnDataset  # noqa: E402 - after importorskip("torch")
import support  # noqa: E402 - after importorskip("torch")

warnings.filterwarnings("ignore", message=".*worker processes in total.*")
DataLoader = torch.utils.data.DataLoader
MS = 1e-3


pytestmark = pytest.mark.usefixtures("sampler_off")


# --- the shared log --------------------------------------------------------------


def test_forked_writers_reach_the_owner_in_claim_order():
    log = _core.BatchLog(64)
    pids = []
    for w in range(3):
        pid = os.fork()
        if pid == 0:
            try:
                for k in range(5):
                    log.fetch_begin()
                    log.fetch_end(7, w, k)
            finally:
                os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)
    got = log.drain()
    assert len(got) == 15 and log.lost == 0 and log.claimed == 15
    for w in range(3):
        mine = got[got["worker"] == w]
        assert mine["seq"].tolist() == list(range(5))
        assert (mine["epoch"] == 7).all()
        assert (mine["end_ns"] >= mine["begin_ns"]).all()
        assert np.all(np.diff(mine["begin_ns"]) > 0)
    assert len(log.drain()) == 0  # drained once


def test_a_lap_loses_the_oldest_records_and_counts_them():
    log = _core.BatchLog(4)
    for k in range(10):
        log.fetch_begin()
        assert log.fetch_end(0, 0, k) is True
    got = log.drain()
    assert got["seq"].tolist() == [6, 7, 8, 9] and log.lost == 6


def test_fetch_end_without_begin_writes_nothing():
    log = _core.BatchLog(4)
    assert log.fetch_end(0, 0, 0) is False
    log.fetch_begin()
    assert log.fetch_end(0, 0, 0) is True
    assert log.fetch_end(0, 0, 1) is False
    assert len(log.drain()) == 1


def test_a_garbage_collection_is_an_item_of_its_own_kind():
    log = _core.BatchLog(4)
    assert log.gc_end(0, 2) is False          # no collection open
    log.gc_begin()
    end = time.thread_time() + 0.01
    while time.thread_time() < end:
        pass
    assert log.gc_end(3, 2) is True
    assert log.gc_end(3, 2) is False
    (r,) = log.drain_items()
    assert (r["kind"], r["worker"], r["count"], r["index"]) == (_core.ITEM_GC, 3, 2, -1)
    assert r["cpu_ns"] >= 10_000_000 and r["end_ns"] - r["begin_ns"] >= r["cpu_ns"] - 100_000
    with pytest.raises(TypeError, match="gc_end\\(\\): worker must be an int"):
        log.gc_end(1.0, 0)
    with pytest.raises(ValueError, match="gc_end\\(\\): generation must be -1"):
        log.gc_end(0, -2)
    with pytest.raises(TypeError, match="takes 2 arguments"):
        log.gc_end(0)


def test_cpu_time_is_the_writers_own():
    log = _core.BatchLog(4)
    log.fetch_begin()
    end = time.thread_time() + 0.02
    while time.thread_time() < end:
        pass
    time.sleep(0.03)
    log.fetch_end(0, 0, 0)
    r = log.drain()[0]
    wall, cpu = (r["end_ns"] - r["begin_ns"]) * 1e-9, r["cpu_ns"] * 1e-9
    assert 0.05 <= wall and 0.02 <= cpu < 0.05


@pytest.mark.parametrize("args, exc, word", [
    ((-1, 0, 0), ValueError, "epoch"), ((0, -1, 0), ValueError, "worker"),
    ((0, 0, -1), ValueError, "seq"), ((0.0, 0, 0), TypeError, "epoch"),
    ((0, 0, 2**63), OverflowError, None),
])
def test_fetch_end_names_a_bad_argument(args, exc, word):
    log = _core.BatchLog(4)
    with pytest.raises(exc, match=word):
        log.fetch_end(*args)
    with pytest.raises(TypeError, match="3 arguments"):
        log.fetch_end(0, 0)


@pytest.mark.parametrize("capacity", [0, -1, 2**24 + 1])
def test_capacity_is_checked(capacity):
    with pytest.raises(ValueError, match="capacity"):
        _core.BatchLog(capacity)


def test_only_the_owner_drains():
    log = _core.BatchLog(4)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            log.drain()
            os.write(w, b"drained")
        except RuntimeError as exc:
            os.write(w, str(exc).encode()[:200])
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert b"only the process that made the log" in os.read(r, 300)


def test_epoch_word_round_trips_and_is_checked():
    log = _core.BatchLog(4)
    assert log.epoch == 0
    log.epoch = 41
    assert log.epoch == 41
    with pytest.raises(ValueError, match="epoch"):
        log.epoch = -1
    with pytest.raises(TypeError, match="epoch"):
        log.epoch = "1"


def test_timed_fetch_records_batches_and_passes_errors_through():
    log = _core.BatchLog(8)
    calls = []

    def fetch(index):
        calls.append(index)
        if index == "stop":
            raise StopIteration
        if index == "bad":
            raise KeyError("bad")
        return [index]

    timed = _core.TimedFetch(log, fetch, 3, 1)
    assert timed(5) == [5] and timed(index=6) == [6]
    with pytest.raises(StopIteration):
        timed("stop")
    with pytest.raises(KeyError, match="bad"):
        timed("bad")
    assert timed(7) == [7] and timed.seq == 3
    got = log.drain()
    assert got["seq"].tolist() == [0, 1, 2] and (got["epoch"] == 3).all()
    assert (got["worker"] == 1).all() and calls == [5, 6, "stop", "bad", 7]
    with pytest.raises(TypeError, match="callable"):
        _core.TimedFetch(log, 3, 0, 0)
    with pytest.raises(TypeError):
        _core.TimedFetch(object(), fetch, 0, 0)
    with pytest.raises(ValueError, match=">= 0"):
        _core.TimedFetch(log, fetch, -1, 0)


# --- match and busy time against brute force -----------------------------------


def _records(rows):
    return np.array(rows, dtype=_core.BATCH_RECORD_DTYPE) if rows else np.zeros(
        0, _core.BATCH_RECORD_DTYPE)


def test_match_meets_the_kth_step_of_a_worker_with_its_kth_batch():
    rng = np.random.default_rng(5)
    for _ in range(100):
        n = int(rng.integers(0, 40))
        epoch = rng.integers(0, 3, n).astype(np.int32)
        worker = rng.integers(-1, 3, n).astype(np.int32)
        offsets = {(int(e), int(w)): int(rng.integers(0, 3))
                   for e in range(3) for w in range(3) if rng.random() < 0.3}
        rows = [(0, 1, 1, -1, k, e, w) for e in range(3) for w in range(3)
                for k in range(int(rng.integers(0, 20)))]
        order = rng.permutation(len(rows))
        recs = _records([rows[i] for i in order])
        got = worker_timing.match(recs, epoch, worker, offsets)
        seen = {}
        for i in range(n):
            e, w = int(epoch[i]), int(worker[i])
            if w < 0:
                assert got[i] == -1
                continue
            k = offsets.get((e, w), 0) + seen.get((e, w), 0)
            seen[(e, w)] = seen.get((e, w), 0) + 1
            hit = np.flatnonzero((recs["epoch"] == e) & (recs["worker"] == w) & (recs["seq"] == k))
            assert got[i] == (hit[0] if len(hit) else -1)


def test_summarise_shares_against_brute_force():
    # Two workers alternate; worker w's k-th batch is made over
    # [b, b + make) and step i (delivered by worker i % 2) waits over
    # [begin, fetch_done).  Every share is recomputed here from its
    # definition in summarise()'s docstring.
    rng = np.random.default_rng(11)
    for _ in range(50):
        n = int(rng.integers(4, 30))
        rows, steps, worker = [], [], []
        t = 0
        seq = [0, 0]
        free = [-100, -100]       # a worker makes one batch at a time
        for i in range(n):
            w = i % 2
            make = int(rng.integers(1, 40))
            start = max(free[w], t - int(rng.integers(0, 50)))
            free[w] = start + make
            rows.append((start, start + make, make, -1, seq[w], 0, w))
            seq[w] += 1
            wait = int(rng.integers(0, 30))
            body = int(rng.integers(1, 20))
            steps.append((t, t + wait, t + wait + body, 0, 0, 0))
            worker.append(w)
            t += wait + body
        recs = _records(rows)
        st = np.array(steps, dtype=_core.RECORD_DTYPE)
        block, _busy = worker_timing.summarise(
            recs, st, np.array(worker, np.int32), np.ones(n, bool), {}, 2, None)
        span = st["end_ns"].max() - st["begin_ns"].min()
        made = (recs["end_ns"] - recs["begin_ns"]).sum()
        assert block["busy_share"] == pytest.approx(made / (2 * span))
        total = (st["end_ns"] - st["begin_ns"]).sum()
        prod = 0
        for i in range(n):
            b, e = st["begin_ns"][i], st["fetch_done_ns"][i]
            mine = recs[recs["worker"] == worker[i]]
            overlap = sum(max(0, min(x["end_ns"], e) - max(x["begin_ns"], b)) for x in mine)
            prod += min(overlap, e - b)
        assert block["production_share"] == pytest.approx(prod / total)
        wait = (st["fetch_done_ns"] - st["begin_ns"]).sum()
        assert block["handover_share"] == pytest.approx((wait - prod) / total)
        assert block["ready_before_fetch"] == pytest.approx(
            np.mean(recs["end_ns"] <= st["begin_ns"]))
        assert block["coverage"] == 1.0 and block["batches"] == n


# --- the diagnosis rule -------------------------------------------------------------


@pytest.mark.parametrize("share, production, coverage, label", [
    (0.30, 0.25, 1.0, input_bound.INPUT_BOUND),
    (0.30, 0.05, 1.0, input_bound.HAND_OVER),
    (0.30, 0.05, 0.5, input_bound.INPUT_BOUND),    # too little met to decide
    (0.10, 0.01, 1.0, input_bound.BALANCED),
    (0.02, 0.00, 1.0, input_bound.COMPUTE_BOUND),
])
def test_hand_over_needs_a_wait_the_workers_production_does_not_explain(
        share, production, coverage, label):
    block = {"available": True, "coverage": coverage, "production_share": production}
    assert input_bound.diagnose(share, input_bound.production_share(block)).label == label
    assert input_bound.diagnose(share).label == (
        input_bound.INPUT_BOUND if share >= 0.2 else label)


# --- real DataLoaders ---------------------------------------------------------------


def _run(loader, pace_s, epochs=1, rec=None):
    rec = rec or traceml.Recorder()
    w = rec.wrap(loader)
    for _ in range(epochs):
        for _batch in w:
            time.sleep(pace_s)
    return rec.report(), w


@pytest.mark.parametrize("in_order", [True, False])
def test_each_step_meets_the_batch_its_worker_made(in_order):
    # 4 items of 2 ms CPU a batch: the CPU per batch is known (8 ms, and
    # the feeder's sending); the wall may stretch on a busy host, never
    # shrink.
    loader = DataLoader(BurnDataset(4 * 16, 0.002), batch_size=4, num_workers=2,
                        in_order=in_order)
    r, _ = _run(loader, 0.002)
    p = r["production"]
    assert p["available"] and p["coverage"] == 1.0
    assert p["batches"] == r["steady_steps"]
    assert sorted(p["workers"]) == [0, 1]
    assert sum(v["batches"] for v in p["workers"].values()) == p["batches"]
    # The worker process's CPU over a batch: the 8 ms burnt, plus what its
    # queue's feeder thread spends sending the batch before (pickling 4
    # small tensors: under a millisecond quiet, 1.7 ms under the sanitizer).
    assert 0.85 * 0.008 <= p["cpu_s"]["median"] <= 1.5 * 0.008, p["cpu_s"]
    assert p["make_s"]["median"] >= 0.95 * p["cpu_s"]["median"]
    assert "workers made a batch in" in str(r)


def test_user_worker_init_fn_still_runs_and_is_given_back():
    class Init:
        def __call__(self, worker_id):
            torch.utils.data.get_worker_info().dataset.tag = worker_id

    init = Init()
    loader = DataLoader(BurnDataset(8, 0.0), batch_size=2, num_workers=2, worker_init_fn=init)
    r, _ = _run(loader, 0.0)
    assert loader.worker_init_fn is init
    assert r["production"]["available"]


@pytest.mark.slow   # torch takes ~10 s to shut the workers down after an error
def test_a_worker_error_reaches_the_loop_unchanged():
    class Bad(BurnDataset):
        def __getitem__(self, i):
            if i == 5:
                raise KeyError("item 5")
            return super().__getitem__(i)

    loader = DataLoader(Bad(12, 0.0), batch_size=2, num_workers=2)
    with pytest.raises(KeyError, match="item 5") as info:
        for _ in traceml.Recorder().wrap(loader):
            pass
    # No frame of ours, in the worker's traceback (the text torch puts into
    # the message) or the loop's.  Judged by traceml's own folder, not by
    # "traceml/" in a path: a clone named traceml (git's default name) has
    # that in every path, the venv's torch included.
    import re
    import traceback
    ours = os.path.dirname(os.path.abspath(traceml.__file__))

    def of_ours(path):
        path = os.path.abspath(path)
        return os.path.commonpath([path, ours]) == ours

    in_worker = re.findall(r'^\s*File "(.*)", line \d+', str(info.value), re.M)
    assert os.path.abspath(__file__) in map(os.path.abspath, in_worker)  # the raise
    in_loop = [f.filename for f in traceback.extract_tb(info.tb)]
    assert [f for f in in_worker + in_loop if of_ours(f)] == []
    assert loader.worker_init_fn is None
    # The traceback's frames hold the DataLoader iterator: cleared, it
    # shuts down now (support.release_frames).
    support.release_frames(info.tb)
    gc.collect()


def test_persistent_workers_are_timed_every_epoch():
    loader = DataLoader(BurnDataset(4 * 6, 0.001), batch_size=4, num_workers=2,
                        persistent_workers=True)
    rec = traceml.Recorder()
    r, w = _run(loader, 0.001, epochs=3, rec=rec)
    p = r["production"]
    assert p["available"] and p["coverage"] == 1.0 and r["epochs"] == 3
    recs = w._source.timing.drain()
    assert sorted(np.unique(recs["epoch"]).tolist()) == [0, 1, 2]
    for e in range(3):
        for k in (0, 1):
            mine = recs[(recs["epoch"] == e) & (recs["worker"] == k)]
            assert mine["seq"].tolist() == list(range(3))


def test_persistent_workers_started_unwrapped_are_said_to_be_untimed():
    loader = DataLoader(BurnDataset(8, 0.0), batch_size=2, num_workers=2,
                        persistent_workers=True)
    for _ in loader:
        pass
    r, _ = _run(loader, 0.0)
    p = r["production"]
    assert not p["available"] and p["unavailable"] == worker_timing.STARTED_BEFORE
    assert "worker batch timing: off" in str(r)
    assert r["diagnosis"] != input_bound.HAND_OVER


@pytest.mark.slow
def test_spawned_workers_fall_back_and_say_why():
    loader = DataLoader(list(range(8)), batch_size=2, num_workers=1,
                        multiprocessing_context="spawn")
    r, _ = _run(loader, 0.0)
    p = r["production"]
    assert not p["available"] and "spawn" in p["unavailable"]


def test_a_reset_inside_an_epoch_keeps_steps_and_batches_together():
    loader = DataLoader(BurnDataset(2 * 20, 0.001), batch_size=2, num_workers=2)
    rec = traceml.Recorder()
    w = rec.wrap(loader)
    for i, _batch in enumerate(w):
        if i == 7:
            rec.reset()
        time.sleep(0.001)
    r = rec.report()
    p = r["production"]
    assert p["coverage"] == 1.0 and p["batches"] == r["steady_steps"]
    # Each matched batch was made before the fetch that got it ended.
    recs = w._source.timing.drain()
    steps = r.steps
    worker = np.array(r["delivery"]["workers"], dtype=np.int32)
    idx = worker_timing.match(recs, steps["epoch"], worker, w._source.timing.offsets)
    assert (idx >= 0).all()
    assert (recs["end_ns"][idx] <= steps["fetch_done_ns"]).all()


class _SlowToUnpickle:
    """Unpickled in the main process at a cost of ``sleep_s``: a hand-over
    the workers do not see."""

    def __init__(self, i, sleep_s):
        self.i, self.sleep_s = i, sleep_s

    def __reduce__(self):
        return (_rebuild_slowly, (self.i, self.sleep_s))


def _rebuild_slowly(i, sleep_s):
    if torch.utils.data.get_worker_info() is None:
        time.sleep(sleep_s)
    return i


def _collate_slow(items):
    return _SlowToUnpickle(items[0], 0.008)


@pytest.mark.slow
def test_a_wait_on_batches_already_made_is_hand_over_not_input_bound():
    # Workers make each batch in microseconds; every batch then costs
    # 8 ms to receive in the main process, against a 4 ms step body.
    loader = DataLoader(list(range(40)), batch_size=1, num_workers=2,
                        collate_fn=_collate_slow)
    r, _ = _run(loader, 0.004)
    assert r["input_share"] >= input_bound.INPUT_BOUND_SHARE
    p = r["production"]
    assert p["production_share"] < input_bound.INPUT_BOUND_SHARE
    assert p["ready_before_fetch"] > 0.5
    assert r["diagnosis"] == input_bound.HAND_OVER
    assert any("More workers will not shorten this wait" in line for line in r["next"])
    # The workers sleep through the waits because their batches are made:
    # idle, not blocked.
    held = (r["workers"] or {}).get("awaited")
    if held is not None:    # the sampler read the worker during a stall
        assert held["making_share"] < worker_evidence.AWAITED_MAKING_MIN_SHARE, held
        assert held["blocked"] is False, held
    assert "was blocked during stalls" not in str(r)


@pytest.mark.slow
def test_workers_that_cannot_keep_up_are_input_bound():
    # 2 workers, 20 ms of CPU a batch: one batch per 10 ms at best against
    # a 4 ms consumer.
    loader = DataLoader(BurnDataset(4 * 30, 0.005), batch_size=4, num_workers=2)
    r, _ = _run(loader, 0.004)
    p = r["production"]
    assert p["production_share"] >= input_bound.INPUT_BOUND_SHARE
    assert r["diagnosis"] == input_bound.INPUT_BOUND
    # Busy 85-90% of the time here, quiet or beside two CPU hogs; 70-80%
    # under AddressSanitizer beside two hogs, and 48% once in a CI
    # sanitizer run (the sanitizer's allocator slows the workers' Python
    # between batches).  Workers that keep up easily sit near 20%.
    assert p["busy_share"] > 0.3


def test_batch_record_dtype_is_what_drain_gives():
    assert _core.BatchLog(2).drain().dtype == _core.BATCH_RECORD_DTYPE
    with pytest.raises(TypeError):
        pickle.dumps(_core.BatchLog(2))


def test_reading_the_start_method_does_not_fix_it():
    # get_start_method() or get_context() without a method fix the
    # process's start method; a user's later set_start_method() would raise.
    # (Iterating a DataLoader fixes it anyway: torch makes its queues from
    # the default context.  Reading it must not, before or without that.)
    import subprocess
    import sys
    code = (
        "import multiprocessing, torch\n"
        "from traceml import worker_timing\n"
        "loader = torch.utils.data.DataLoader(list(range(4)), batch_size=2, num_workers=1)\n"
        "print(worker_timing.start_method_of(loader))\n"
        "assert multiprocessing.get_start_method(allow_none=True) is None\n"
        "multiprocessing.set_start_method('spawn')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [multiprocessing.get_all_start_methods()[0]]


def test_timing_does_not_keep_persistent_workers_alive():
    import gc
    loader = DataLoader(BurnDataset(8, 0.0), batch_size=2, num_workers=2,
                        persistent_workers=True)
    w = traceml.Recorder().wrap(loader)
    for _batch in w:
        pass
    timing = w._source.timing
    assert timing.hooked_iterator() is loader._iterator
    loader._iterator._shutdown_workers()
    loader._iterator = None
    gc.collect()
    assert timing.hooked_iterator() is None
    assert multiprocessing.active_children() == []


def test_a_report_with_worker_timing_round_trips_through_a_run_file(tmp_path):
    traceml.configure(sampler=True)
    loader = DataLoader(BurnDataset(4 * 12, 0.002), batch_size=4, num_workers=2)
    r, _ = _run(loader, 0.002)
    assert r["production"]["available"] and r["prediction"] is not None
    assert r["memory"] is not None
    back = traceml.load(r.save(tmp_path / "run.traceml"))
    assert back == r and str(back) == str(r)
    # A hand-over diagnosis is a label the run file knows.
    r.summary["diagnosis"] = input_bound.HAND_OVER
    assert traceml.load(r.save(tmp_path / "h.traceml"))["diagnosis"] == input_bound.HAND_OVER
