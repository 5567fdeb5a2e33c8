"""Per-sample and collate time on real DataLoaders (traceml.sample_timing,
_core.TimedDataset, TimedIter and TimedCall): items of known CPU cost,
every 8th index slow, a collate_fn that sleeps a known time, an iterable
dataset, a dataset with __getitems__, errors passing through, and spawn."""

import os
import time
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import traceml  # noqa: E402 - after importorskip("torch")
from traceml import _core  # noqa: E402 - after importorskip("torch")
from traceml.findings import slow_samples  # noqa: E402 - after importorskip("torch")

from burn import BurnDataset, BurnIterable, burn_cpu  # noqa: E402 - after importorskip("torch")
import support  # noqa: E402 - after importorskip("torch")

warnings.filterwarnings("ignore", message=".*worker processes in total.*")
DataLoader = torch.utils.data.DataLoader


pytestmark = pytest.mark.usefixtures("sampler_off")


def _report(loader, epochs=1):
    rec = traceml.Recorder()
    w = rec.wrap(loader)
    for _ in range(epochs):
        for _batch in w:
            pass
    return rec.report(), w


def _samples(r):
    return r["production"]["samples"]


def test_every_8th_index_slow_is_named_with_its_stride():
    # 0.5 ms of CPU an item, 10 ms every 8th (index % 8 == 0): CPU time is
    # the test's basis, so a loaded host's wall blips cannot break it.
    loader = DataLoader(BurnDataset(64, 0.0005, slow_every=8, slow_cpu_s=0.010),
                        batch_size=4, num_workers=2)
    r, _ = _report(loader)
    b = _samples(r)
    assert b["available"] and b["kind"] == "map" and b["samples"] == 64
    slow = b["slow"]
    # Each worker's first sample (index 0 and 4: batches of 4 in turn) is
    # its start-up's, left out of the test.
    assert slow["first_left_out"] == 2 and slow["of"] == 62
    assert slow["basis"] == "cpu" and (slow["stride"], slow["residue"]) == (8, 0)
    # A fast sample's CPU clock can run past the line now and then (a VM's
    # stolen time is charged to the thread on the core; a collection in
    # the worker): the stride allows STRIDE_MISS_MAX such, and says so.
    on = list(range(8, 64, 8))
    off = [i for i in slow["indices"] if i % 8]
    assert [i for i in slow["indices"] if i % 8 == 0] == on
    assert len(off) <= slow_samples.STRIDE_MISS_MAX
    assert (slow.get("p_value") is None) == (not off)
    assert slow["slow_cpu_s"] == pytest.approx(0.010, rel=0.15)
    assert b["sample_cpu_s"]["median"] == pytest.approx(0.0005, rel=0.3)
    # One 10 ms sample beside three of 0.5 ms: most of its batch's CPU.
    assert b["slowest"][0]["index"] % 8 == 0
    text = str(r)
    shown = ", ".join(str(i) for i in slow["indices"][:slow_samples.INDICES_SHOWN])
    assert f"slow samples: index {shown} ..." in text
    if off:
        assert "every 8th index (index % 8 == 0, but for 1 slow sample off it" in text
    else:
        assert "every 8th index (index % 8 == 0, and no other)" in text
    assert "per-sample time in the workers" in text
    assert "slow samples:" in r._repr_html_()
    d = r.to_dict()["production"]["samples"]["table"]
    assert d["rows"] == 64 and sorted(d["index"]) == list(range(64))
    assert set(d["step"]) <= set(range(r["steps"]))


class _CollectsGarbage(torch.utils.data.Dataset):
    """0.2 ms of CPU an item; every 8th index also runs a full garbage
    collection over the half a million tuples the dataset keeps (tens of
    milliseconds here): the collector's pause, not the sample's own cost."""

    def __init__(self, n):
        self.n = n
        self.kept = [(i, str(i)) for i in range(500_000)]
        self.burn = BurnDataset(n, 0.0002)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i % 8 == 0:
            import gc
            gc.collect()
        return self.burn[i]


def test_a_garbage_collection_inside_a_sample_is_not_the_sample_slow():
    loader = DataLoader(_CollectsGarbage(64), batch_size=4, num_workers=2)
    r, _ = _report(loader)
    b = _samples(r)
    gc_block = b["gc"]
    # Every index % 8 == 0 ran one full collection (8 of the 64), besides
    # whatever the allocations set off.
    assert gc_block["collections"] >= 8 and gc_block["samples"] >= 8
    assert gc_block["longest_in_a_sample_s"] >= slow_samples.SLOW_MIN_EXCESS_CPU_S
    # Less the collections, every sample costs its 0.2 ms: none is slow.
    assert b["slow"]["count"] == 0
    assert b["sample_cpu_s"]["median"] == pytest.approx(0.0002, rel=0.5)
    text = str(r)
    assert "slow samples:" not in text
    assert "the workers' garbage collector ran inside" in text


class _SleepCollate:
    def __init__(self, s):
        self.s = s

    def __call__(self, batch):
        time.sleep(self.s)
        return torch.utils.data.default_collate(batch)


def test_collate_time_comes_out_as_slept():
    loader = DataLoader(BurnDataset(40, 0.0002), batch_size=4, num_workers=2,
                        collate_fn=_SleepCollate(0.005))
    r, _ = _report(loader)
    c = _samples(r)["collate"]
    assert c["calls"] == 10
    # A sleep never ends early; waking on a loaded host adds up to ~2 ms.
    assert 0.005 <= c["median_s"] < 0.0075
    assert c["share"] > 0.5
    assert any("collate_fn took" in line for line in slow_samples.evidence_lines(r.summary))


class _SlowEveryFifthCollate:
    """Burns ``burn_s`` of CPU on the batches whose first index is a
    multiple of 20 (every 5th batch of 4, in order): the batches are slow
    in collate_fn, their samples are not."""

    def __init__(self, burn_s):
        self.burn_s = burn_s

    def __call__(self, batch):
        if int(batch[0][0]) % 20 == 0:
            burn_cpu(self.burn_s)
        return torch.utils.data.default_collate(batch)


def _paced_report(loader):
    """The report of one epoch of ``loader`` under a 5 ms step that sleeps
    (the loop's own CPU would stretch on a loaded host and hide the
    stalls)."""
    rec = traceml.Recorder()
    for _ in rec.wrap(loader):
        time.sleep(0.005)
    return rec.report()


@pytest.mark.slow
def test_batches_slow_in_collate_say_so_not_slow_samples():
    # 0.1 ms a sample, 80 ms of collate on every 5th batch of 80, a 5 ms
    # step that sleeps: each worker falls behind on its slow batches,
    # and the workers timed their collate_fn at nearly all of their make
    # time.
    r = _paced_report(DataLoader(BurnDataset(320, 0.0001), batch_size=4, num_workers=2,
                                 collate_fn=_SlowEveryFifthCollate(0.080)))
    a = r["attribution"]
    assert a is not None and a["label"] == "SLOW-COLLATE", str(r)
    # Independently: 80 ms of collate CPU against 4 x 0.1 ms of samples.
    assert a["collate_share"] > 0.8, a
    text = str(r)
    assert "particular samples are slow" not in text
    assert "time collate_fn on those batches" in text


def test_batches_slow_in_collate_at_num_workers_0_say_so_from_the_stacks():
    # No worker times collate_fn apart from the samples at num_workers=0:
    # the stalled fetches' stack samples under the loader's collate_fn do
    # (helper 35B: SLOW-SAMPLE and "nothing times the two apart" beside
    # stack samples 91-94% in it, 3 of 3).
    r = _paced_report(DataLoader(BurnDataset(240, 0.0001), batch_size=4, num_workers=0,
                                 collate_fn=_SlowEveryFifthCollate(0.020)))
    a = r["attribution"]
    assert a is not None and a["label"] == "SLOW-COLLATE", str(r)
    assert a["collate_sampled"] and a["collate_share"] > 0.5, a
    assert "nothing times the two apart" not in str(r)
    assert "collate_fn holds" in str(r) and "stalled batches' sampled time" in str(r)


def test_an_iterable_dataset_is_timed_by_position():
    loader = DataLoader(BurnIterable(24, 0.0005), batch_size=4, num_workers=1)
    r, _ = _report(loader)
    b = _samples(r)
    assert b["available"] and b["kind"] == "iterable" and b["samples"] == 24
    assert sorted(b["table"]["index"]) == list(range(24))
    assert b["sample_cpu_s"]["median"] == pytest.approx(0.0005, rel=0.3)


class _Batched(BurnDataset):
    def __getitems__(self, indices):
        return [self[i] for i in indices]


def test_a_dataset_with_getitems_says_per_sample_time_is_unavailable():
    loader = DataLoader(_Batched(16, 0.001), batch_size=4, num_workers=2)
    r, _ = _report(loader)
    b = _samples(r)
    assert b["kind"] == "getitems" and b["samples"] == 0
    assert b["getitems"]["calls"] == 4
    assert b["getitems"]["median_s"] >= 0.004
    assert "per-sample time is unavailable" in str(r)


def test_the_proxy_forwards_the_datasets_attributes():
    # A collate_fn that reads the worker's dataset through get_worker_info
    # sees the real dataset, and the fetcher's dataset answers for it.
    seen = []

    def collate(batch):
        info = torch.utils.data.get_worker_info()
        seen.append(info.dataset.n)
        return torch.utils.data.default_collate(batch)

    ds = BurnDataset(8, 0.0)
    log = _core.BatchLog(4)
    proxy = _core.TimedDataset(log, ds, 0, 0)
    assert proxy.n == 8 and len(proxy) == 8 and isinstance(proxy, BurnDataset)
    assert proxy.__wrapped__ is ds and int(proxy[3][0]) == 3
    assert not hasattr(proxy, "__getitems__")
    got = log.drain_items()
    assert got["index"].tolist() == [3] and got["kind"].tolist() == [_core.ITEM_GETITEM]
    r, _ = _report(DataLoader(ds, batch_size=2, num_workers=1, collate_fn=collate))
    assert _samples(r)["samples"] == 8


@pytest.mark.slow   # torch takes ~10 s to shut the workers down after an error
def test_an_error_in_collate_reaches_the_loop_unchanged():
    def collate(batch):
        if int(batch[0][0]) == 4:
            raise KeyError("collate 4")
        return torch.utils.data.default_collate(batch)

    loader = DataLoader(BurnDataset(12, 0.0), batch_size=2, num_workers=2, collate_fn=collate)
    with pytest.raises(KeyError, match="collate 4") as info:
        for _ in traceml.Recorder().wrap(loader):
            pass
    import re
    import traceback
    ours = os.path.dirname(os.path.abspath(traceml.__file__))
    in_worker = re.findall(r'^\s*File "(.*)", line \d+', str(info.value), re.M)
    assert os.path.abspath(__file__) in map(os.path.abspath, in_worker)
    in_loop = [f.filename for f in traceback.extract_tb(info.tb)]
    assert [f for f in in_worker + in_loop
            if os.path.commonpath([os.path.abspath(f), ours]) == ours] == []
    support.release_frames(info.tb)


@pytest.mark.slow
def test_spawned_workers_say_per_sample_time_is_unavailable():
    loader = DataLoader(BurnDataset(8, 0.0), batch_size=2, num_workers=1,
                        multiprocessing_context="spawn")
    r, _ = _report(loader)
    b = _samples(r)
    assert not b["available"] and "spawn" in b["unavailable"]
    assert "worker batch timing: off" in str(r)
    assert "per-sample time" not in str(r)


def test_persistent_workers_time_samples_every_epoch():
    loader = DataLoader(BurnDataset(16, 0.0002), batch_size=4, num_workers=2,
                        persistent_workers=True)
    r, w = _report(loader, epochs=2)
    assert _samples(r)["samples"] == 32
    items = w._source.timing.items()
    got = items[np.isin(items["kind"], [_core.ITEM_GETITEM])]
    assert sorted(np.unique(got["epoch"]).tolist()) == [0, 1]


def test_timed_call_records_a_worker_init_fn_as_its_own_kind():
    # worker_timing.WorkerHook times the loader's worker_init_fn so: one
    # ITEM_INIT record with its wall and CPU, the call's result and
    # arguments unchanged; a kind of no call (GC) is refused by name.
    log = _core.BatchLog()
    seen = []

    def init(worker_id):
        t = time.thread_time()
        while time.thread_time() - t < 0.02:
            pass
        seen.append(worker_id)
        return "done"

    timed = _core.TimedCall(log, init, 3, 1, _core.ITEM_INIT)
    assert timed(1) == "done" and seen == [1] and timed.kind == _core.ITEM_INIT
    (r,) = log.drain_items()
    assert (r["kind"], r["epoch"], r["worker"], r["count"]) == (_core.ITEM_INIT, 3, 1, -1)
    assert r["cpu_ns"] >= 20_000_000 and r["end_ns"] - r["begin_ns"] >= r["cpu_ns"] * 0.5
    with pytest.raises(ValueError, match="ITEM_GETITEMS, ITEM_COLLATE or ITEM_INIT"):
        _core.TimedCall(log, init, 0, 0, _core.ITEM_GC)
