"""Leaks: building and dropping wrappers, WrapIters (exhausted, broken out
of, closed, failed), reports, reducer outputs and sweeps many times leaves
no growing trail of objects or memory; a WrapIter lets go of its inner
iterator as soon as its loop is over.

Method: run a scenario a few times to warm caches up, then several rounds
of it, each followed by ``gc.collect()``.  Between the first and the last
round, the number of live objects (``gc.get_objects()``), the interpreter's
allocated blocks (``sys.getallocatedblocks()``) and the memory
``tracemalloc`` traces (which covers ``PyMem_*`` and ``PyMem_Raw*``
allocations made by the C extension too) must stay within small bounds --
far below what one leaked object or buffer per operation would add
(hundreds of operations run per round).
"""

import gc
import itertools
import os
import sys
import weakref

import numpy as np
import pytest

import traceml
from traceml import _core, stacks
from support import OPS, ROUNDS, assert_no_growth, measure

_names = itertools.count()

def uname(tag):
    return f"test_leaks-{tag}-{next(_names)}"


def by_name():
    return _core.default_recorder().sources.by_name


def _trim_epoch_facts(*names):
    """Per-epoch facts are kept for every epoch a source ever had (see
    test_epoch_facts_do_not_outlive_reset); drop them so that the rounds
    measure everything else."""
    for name in names:
        src = by_name().get(name)
        if src is not None:
            src.epoch_facts.clear()


def live_wrapiters():
    return sum(1 for o in gc.get_objects() if type(o) is _core.WrapIter)


# --------------------------------------------------------------------------
# inner iterators with a weak reference to the last one made


class Items:
    """An iterable whose iterators can be watched through a weakref."""

    def __init__(self, n, fail_at=None):
        self.n = n
        self.fail_at = fail_at
        self.last = None

    def __iter__(self):
        it = ItemIter(self.n, self.fail_at)
        self.last = weakref.ref(it)
        return it


class Item(int):
    """A fresh object per item (a leaked reference to it shows), equal to
    its number."""


class ItemIter:
    def __init__(self, n, fail_at):
        self.i = 0
        self.n = n
        self.fail_at = fail_at
        self.payload = bytearray(256)   # makes a leak of the iterator visible

    def __iter__(self):
        return self

    def __next__(self):
        if self.i == self.fail_at:
            raise ValueError("inner failed")
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return Item(self.i)


class TaskItems(Items):
    """Iterators with a `_task_info` dict like a DataLoader's, so that the
    WrapIter tracks deliveries (and allocates its task tables)."""

    def __iter__(self):
        it = TaskIter(self.n)
        self.last = weakref.ref(it)
        return it


class TaskIter(ItemIter):
    def __init__(self, n):
        super().__init__(n, None)
        self._task_info = {r: (r % 3,) for r in range(6)}
        self.sent = 6

    def __next__(self):
        item = super().__next__()
        self._task_info.pop(min(self._task_info), None)
        self._task_info[self.sent] = (self.sent % 3,)
        self.sent += 1
        return item


def gen_items(n):
    yield from range(n)


class GenItems:
    def __init__(self, n):
        self.n = n
        self.last = None

    def __iter__(self):
        g = gen_items(self.n)
        self.last = weakref.ref(g)
        return g


# --------------------------------------------------------------------------
# scenarios


@pytest.mark.parametrize("tag,data_type", [("exhausted", Items), ("generator", GenItems)])
@pytest.mark.slow
def test_loops_run_to_the_end_leak_nothing(tag, data_type, monkeypatch):
    # The wrap's own: a generator's stack sampler is the next test's.
    monkeypatch.setenv("TRACEML_STACKS", "0")
    data = data_type(5)
    assert_no_growth(measure(_run_to_the_end(data, uname(tag))), tag)
    assert data.last() is None


def _run_to_the_end(data, name):
    """A round: OPS epochs of ``data`` wrapped under ``name`` run to their
    end, then reset()."""
    def scenario():
        for _ in range(OPS):
            for _x in traceml.wrap(data, name=name):
                pass
        traceml.reset()
        _trim_epoch_facts(name)
    return scenario


@pytest.mark.slow
def test_a_sampled_generators_epochs_leak_no_object_or_block():
    # Each epoch of a wrapped generator starts and stops the main
    # process's stack sampler (traceml.stacks.MAIN).  The tuples and
    # bound methods its start and stop make go back to CPython's free
    # lists, which tracemalloc counts as held until they are full: traced
    # bytes grew 8-33 KB over 600 epochs after 400 or 1,200 of warm-up,
    # more when other tests had drained the lists first, and levelled off
    # near 36 KB (8,000 epochs), while the live objects and the process's
    # allocated blocks did not grow.  Those two are asserted here.
    data = GenItems(5)
    assert_no_growth(measure(_run_to_the_end(data, uname("sampled-generator"))),
                     "sampled generator", traced_bytes=False)
    assert data.last() is None
    assert stacks.MAIN.live == 0


@pytest.mark.slow
def test_broken_out_of_loops_leak_nothing():
    name = uname("break")
    data = Items(10)

    def scenario():
        for _ in range(OPS):
            for x in traceml.wrap(data, name=name):
                if x == 3:
                    break
        traceml.reset()
        _trim_epoch_facts(name)

    assert_no_growth(measure(scenario), "break")


@pytest.mark.slow
def test_closed_iterators_leak_nothing():
    name = uname("close")
    data = Items(10)
    w = traceml.wrap(data, name=name)

    def scenario():
        for _ in range(OPS):
            it = iter(w)
            next(it)
            next(it)
            it.close()
            it.close()
            del it
        traceml.reset()
        _trim_epoch_facts(name)

    assert_no_growth(measure(scenario), "close")


@pytest.mark.slow
def test_failing_inner_and_failing_body_leak_nothing():
    name = uname("fail")
    inner_fails = Items(10, fail_at=3)
    body_fails = Items(10)

    def scenario():
        for _ in range(OPS // 2):
            try:
                for _x in traceml.wrap(inner_fails, name=name):
                    pass
            except ValueError:
                pass
            try:
                for x in traceml.wrap(body_fails, name=name):
                    if x == 2:
                        raise KeyError(x)
            except KeyError:
                pass
        traceml.reset()
        _trim_epoch_facts(name)

    assert_no_growth(measure(scenario), "failures")


@pytest.mark.slow
def test_tracked_deliveries_leak_nothing():
    name = uname("tracked")
    data = TaskItems(30)

    def scenario():
        for _ in range(OPS // 4):
            it = iter(traceml.wrap(data, name=name))
            assert it.tracking
            for _x in it:
                pass
            del it
        traceml.reset()
        _trim_epoch_facts(name)

    assert_no_growth(measure(scenario), "tracked")
    assert data.last() is None


@pytest.mark.slow
def test_probes_leak_nothing():
    def scenario():
        for _ in range(OPS * 5):
            traceml.step_begin()
            traceml.fetch_done()
            traceml.fetch_done()
            traceml.step_end()
            traceml.step_end()
        traceml.reset()

    assert_no_growth(measure(scenario), "probes")


@pytest.mark.slow
def test_store_growth_and_reset_leak_nothing():
    """Recording past the store's first capacity and resetting, many times:
    the store keeps one block, it does not pile them up."""

    def scenario():
        for _ in range(3):
            for _ in range(5000):
                traceml.step_begin()
                traceml.step_end()
            traceml.reset()

    assert_no_growth(measure(scenario, rounds=3), "store growth")


@pytest.mark.slow
def test_reports_leak_nothing(tmp_path):
    from traceml.render import report_html

    name = uname("report")
    for _ in range(3):
        for _x in traceml.wrap(list(range(60)), name=name):
            pass
    for _ in range(40):
        traceml.step_begin()
        traceml.fetch_done()
        traceml.step_end()
    path = tmp_path / "leak.traceml"

    def scenario():
        for _ in range(OPS // 20):
            rep = traceml.report(source=name)
            str(rep)
            repr(rep)
            rep.to_dict()
            report_html(rep.summary)
            probes = traceml.report(0.001, source="probes")
            str(probes)
            rep.save(path)
            back = traceml.load(path)
            assert back == rep
            str(traceml.compare(rep, back, path, labels=["a", "b", "c"]))

    # SciPy (the trend's Kendall and Theil-Sen, the period's binomial tail)
    # keeps caches of its own that fill up slowly: 500 kendalltau calls
    # grew its traced memory by 52 kB, saturating near 66 kB by 2000.
    # jsonschema (load() validates summary.json) likewise: its type checks'
    # lookups in an rpds map kept about 60 blocks after 500 validations,
    # then none more over 10,000.
    # After the suite's earlier files (never alone) the second traced round
    # reads 38-40 kB more than the first, then stays flat (41220, 41875,
    # 41990 bytes in CI): objects a round replaces, made before tracing
    # began.  A leak grows every round, so growth is read from the second
    # reading on.
    # NumPy's reductions keep small blocks too (52-59 bytes each, made
    # inside cumsum, any and the like): a loop of NumPy alone, cumsum and
    # any over arrays of random lengths with float64.item(), kept 49, 81,
    # 87, 202, 318, 410, 414, 414 traced blocks after rounds of 2000 calls
    # (numpy 2.4.5 and 2.4.6 alike); here, 190 blocks over three rounds in
    # CI (2026-12-04), 161 of them made directly in numpy's files.  Those
    # are left out (only where numpy's frame is the innermost): a result
    # traceml kept would still show as what holds it (the list, dict or
    # object counted at traceml's own lines and in the object count).
    readings = measure(scenario, exclude=("*/scipy/*", "*/jsonschema/*"), rounds=ROUNDS + 1,
                       depth=12, exclude_inner=("*/numpy/*",))
    assert_no_growth(readings[1:], "reports")


def _reducer_inputs():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 10**9, 2000)
    return dict(
        x=x,
        big=rng.integers(0, 10**12, 20_000),
        mask=x > 5 * 10**8,
        epoch=np.repeat(np.arange(4), 500),
        ranks=rng.permutation(2000),
        gaps=rng.integers(1, 6, 300),
        bad=[None, "abc", [1.5], np.zeros((2, 2), np.int64), np.array(3), [2**64],
             np.array([1.5]), np.array([True, False]), object(), 2**70, -1, 0, 1.5],
    )


def _reducer_calls(x, big, mask, epoch, ranks, gaps, bad):
    """Every reducer, on good input and on each bad input."""
    calls = [
        lambda: _core.summary(x),
        lambda: _core.percentiles(x, [5, 50, 95]),
        lambda: _core.percentiles(big, 99.9),
        lambda: _core.stall_mask(x, 5 * 10**8),
        lambda: _core.stall_gaps(mask, epoch),
        lambda: _core.stall_gaps(mask=mask),
        lambda: _core.gap_histogram(gaps),
        lambda: _core.modal_gap(gaps),
        lambda: _core.cadence_match(gaps, 3),
        lambda: _core.autocorr(x, 4),
        lambda: _core.overtaking(ranks, epoch),
        lambda: _core.overtaking(ranks=ranks),
        lambda: _core.log_otsu(x),
        lambda: _core.default_recorder().snapshot(),
        lambda: _core.default_recorder().snapshot_delivery(),
        lambda: _core.default_recorder().store_info(),
        lambda: _core.sampler_samples(),
        lambda: _core.sampler_stuck(),
        lambda: _core.sampler_info(),
        lambda: _core.gpu_util_samples(),
        lambda: _core.gpu_util_info(),
        lambda: _core.gap_histogram([0, 1]),
        lambda: _core.cadence_match([3, 0], 2),
        lambda: _core.percentiles(x, [50, 101]),
        lambda: _core.stall_gaps(mask, epoch[:-1]),
        lambda: _core.overtaking(ranks, epoch[:-1]),
    ]
    for b in bad:
        calls += [
            lambda b=b: _core.summary(b),
            lambda b=b: _core.percentiles(x, b),
            lambda b=b: _core.percentiles(b, 50),
            lambda b=b: _core.stall_mask(b, 1),
            lambda b=b: _core.stall_mask(x, b),
            lambda b=b: _core.stall_gaps(mask, b),
            lambda b=b: _core.stall_gaps(b),
            lambda b=b: _core.gap_histogram(b),
            lambda b=b: _core.modal_gap(b),
            lambda b=b: _core.cadence_match(gaps, b),
            lambda b=b: _core.cadence_match(b, 2),
            lambda b=b: _core.autocorr(b, 1),
            lambda b=b: _core.autocorr(x, b),
            lambda b=b: _core.overtaking(ranks, b),
            lambda b=b: _core.overtaking(b),
            lambda b=b: _core.log_otsu(b),
            lambda b=b: _core._nvml_start(b, "GPU-x", 10**7),
            lambda b=b: _core._nvml_start("lib", "GPU-x", b),
        ]
    return calls


def _call_all(calls):
    for call in calls:
        try:
            call()
        except (TypeError, ValueError, OverflowError):
            pass


@pytest.mark.slow
def test_reducer_outputs_and_errors_leak_nothing():
    calls = _reducer_calls(**_reducer_inputs())

    def scenario():
        for _ in range(OPS // 20):
            _call_all(calls)

    readings = measure(scenario)
    if os.environ.get("PYTHONMALLOC", "").startswith("malloc"):
        # Under PYTHONMALLOC=malloc (tools/sanitize.sh), repr() of a numpy
        # dtype -- which the refusals quote -- shows ~20 traced bytes a call
        # that tracemalloc never sees freed, with or without traceml (numpy
        # 2.4), and allocated blocks read 0: keep the object count only.
        # The reference count test below and tools/memcheck.sh cover the rest.
        readings = [(objects, 0, 0) for objects, _, _ in readings]
    assert_no_growth(readings, "reducers")


def test_reducers_leak_no_reference_to_their_arguments():
    """A reference leaked on an argument (say on an error path of the
    argument conversion) costs no new memory when the argument is an
    existing object: count the references instead."""
    inputs = _reducer_inputs()
    calls = _reducer_calls(**inputs)
    # Objects of the test's own (singletons, small ints and constants have
    # references all over the interpreter that come and go).
    watched = [v for v in [v for k, v in inputs.items() if k != "bad"] + inputs["bad"]
               if isinstance(v, (list, np.ndarray)) or type(v) is object]
    assert len(watched) >= 12
    _call_all(calls)
    before = [sys.getrefcount(v) for v in watched]
    for _ in range(20):
        _call_all(calls)
    after = [sys.getrefcount(v) for v in watched]
    assert after == before, [(repr(v)[:40], b, a) for v, b, a in
                             zip(watched, before, after) if a != b]


def test_wrapping_leaks_no_reference_to_the_iterable_or_its_items():
    data = Items(5)
    item = Item(7)
    items = [item] * 5
    name = uname("refs")
    for _ in range(3):
        for _x in traceml.wrap(items, name=name):
            pass
        for _x in traceml.wrap(data, name=name):
            pass
    before = sys.getrefcount(data), sys.getrefcount(item), sys.getrefcount(items)
    for _ in range(50):
        for _x in traceml.wrap(items, name=name):
            pass
        for x in traceml.wrap(data, name=name):
            if x == 3:
                break
        it = iter(traceml.wrap(items, name=name))
        next(it)
        it.close()
        del it
    del _x, x
    _trim_epoch_facts(name)
    assert (sys.getrefcount(data), sys.getrefcount(item), sys.getrefcount(items)) == before


@pytest.mark.slow
def test_sweeps_leak_nothing():
    """A leaked condition would keep its Report (a summary of dozens of
    objects and kilobytes): a few conditions per round are enough.  (Each
    condition runs gc.collect(), which is slow with torch imported.)"""

    def make(num_workers, in_order):
        return [np.zeros(2)] * 6

    def scenario():
        res = traceml.sweep(make, num_workers=(0, 1), steps=3, consumer_pace_s=0,
                            in_order=(True, False), both_directions=False, progress=False)
        assert [r["error"] for r in res.rows] == [None] * 4
        str(res)
        res.to_dict()
        # (not _repr_html_(): matplotlib's own glyph caches grow with it)
        del res

    assert_no_growth(measure(scenario, warmup=1, rounds=3), "sweeps")


@pytest.mark.slow
def test_dataloader_epochs_leak_nothing():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    name = uname("dataloader")
    loader = DataLoader(list(range(40)), batch_size=4, num_workers=0)

    def scenario():
        for _ in range(OPS // 10):
            for _b in traceml.wrap(loader, name=name):
                pass
        traceml.reset()
        _trim_epoch_facts(name)

    assert torch is not None
    # torch fills caches of its own (tensor creation, profiler ops) a few
    # bytes per batch for a long while: count only what traceml keeps.
    assert_no_growth(measure(scenario, exclude=("*/torch/*",)), "dataloader")


# --------------------------------------------------------------------------
# the inner iterator is released as soon as the loop is over


def test_inner_released_at_exhaustion_while_the_wrapiter_lives():
    data = Items(3)
    it = iter(traceml.wrap(data, name=uname("release")))
    assert list(it) == [1, 2, 3]
    assert it.inner is None
    assert data.last() is None        # no gc.collect(): released at once
    del it


def test_inner_released_when_breaking_out():
    data = Items(10)
    for x in traceml.wrap(data, name=uname("release")):
        if x == 2:
            assert data.last() is not None
            break
    assert data.last() is None


def test_inner_released_by_close():
    data = Items(10)
    it = iter(traceml.wrap(data, name=uname("release")))
    next(it)
    it.close()
    assert data.last() is None
    with pytest.raises(StopIteration):
        next(it)


def test_inner_released_when_the_body_raises():
    data = Items(10)

    def loop():
        for x in traceml.wrap(data, name=uname("release")):
            if x == 2:
                raise KeyError("body")

    try:
        loop()
    except KeyError:
        # The traceback keeps loop's frame, not the iterator it was running.
        assert data.last() is None
    assert data.last() is None


def test_inner_released_when_the_inner_raises():
    data = Items(10, fail_at=2)
    with pytest.raises(ValueError, match="inner failed"):
        for _x in traceml.wrap(data, name=uname("release")):
            pass
    assert data.last() is None


def test_generator_released_and_finalised_when_breaking_out():
    finalised = []

    def gen():
        try:
            yield from range(10)
        finally:
            finalised.append(True)

    g = gen()
    ref = weakref.ref(g)
    for x in traceml.wrap(g, name=uname("release")):
        if x == 2:
            break
    del g
    assert ref() is None
    assert finalised == [True]


def test_tracked_inner_released():
    data = TaskItems(8)
    it = iter(traceml.wrap(data, name=uname("release")))
    assert it.tracking
    for x in it:
        if x == 4:
            break
    del it
    assert data.last() is None


def test_dataloader_iterator_released_at_break_and_close():
    torch = pytest.importorskip("torch")
    loader = torch.utils.data.DataLoader(list(range(20)), batch_size=2, num_workers=0)
    w = traceml.wrap(loader, name=uname("release-dl"))
    it = iter(w)
    ref = weakref.ref(it.inner)
    next(it)
    it.close()
    assert ref() is None
    del it
    gc.collect()
    before = live_wrapiters()
    for _b in w:
        break
    assert live_wrapiters() == before


def test_no_wrapiter_outlives_its_loop():
    gc.collect()
    before = live_wrapiters()
    data = Items(5)
    w = traceml.wrap(data, name=uname("live"))
    for _ in range(50):
        for _x in w:
            pass
        for x in w:
            if x == 2:
                break
        it = iter(w)
        next(it)
        it.close()
        del it
    assert live_wrapiters() == before


# --------------------------------------------------------------------------
# per-epoch facts


@pytest.mark.slow
def test_epoch_facts_do_not_outlive_reset():
    name = uname("facts")
    data = Items(2)

    def scenario():
        for _ in range(OPS):
            for _x in traceml.wrap(data, name=name):
                pass
        traceml.reset()

    assert_no_growth(measure(scenario), "epochs then reset()")
