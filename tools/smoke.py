"""A short run through every part of traceml's C core, for tools/memcheck.sh
(valgrind) and sanitizer builds: the probes (and their misuse), wrap() over
a list, a generator and a torch DataLoader with two worker processes (the
delivery tracking and the /proc sampler thread, for several of its ticks),
every reducer (on good and on bad input), reset, the report as text, HTML
and dict, save/load/compare, a forked child, and store growth.

    python tools/smoke.py [--quick] [--no-torch]

Prints one line per part and "smoke: ok" at the end; exits non-zero on any
failure.  Run from the repository root (or with traceml importable).
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import traceml  # noqa: E402 - sys.path set above
from traceml import _core  # noqa: E402 - sys.path set above


def say(msg):
    print(f"smoke: {msg}", flush=True)


def probes():
    traceml.reset()
    for _ in range(50):
        traceml.step_begin()
        traceml.fetch_done()
        traceml.step_end()
    traceml.fetch_done()          # misuse: no open step
    traceml.step_end()            # misuse: no open step
    traceml.step_begin()
    traceml.step_begin()          # misuse: begin while open
    traceml.fetch_done()
    traceml.fetch_done()          # misuse: repeated
    traceml.step_end()
    traceml.step_begin()
    traceml.step_end()            # misuse: end without fetch
    for bad in ((1,), (None, None)):
        try:
            traceml.step_begin(*bad)
        except TypeError:
            pass
    info = _core.default_recorder().store_info()
    assert info["steps"] == 53, info
    assert all(v >= 1 for v in info["misuse"].values()), info
    rep = traceml.report(source="probes")
    str(rep)
    say(f"probes: {rep['steps']} steps, misuse {rep['misuse']}")


def gen(n):
    for i in range(n):
        yield np.full(4, i)


def wraps():
    data = list(range(40))
    for _ in traceml.wrap(data, name="smoke-list"):
        pass
    for i, _ in enumerate(traceml.wrap(data, name="smoke-list")):
        if i == 5:
            break
    it = iter(traceml.wrap(data, name="smoke-list"))
    next(it)
    it.close()
    it.close()
    del it
    for _ in traceml.wrap(gen(30), name="smoke-gen"):
        pass
    try:
        for i, _ in enumerate(traceml.wrap(data, name="smoke-list")):
            if i == 3:
                raise KeyError("body")
    except KeyError:
        pass

    class Failing:
        def __iter__(self):
            return self

        def __next__(self):
            raise ValueError("inner")

    try:
        for _ in traceml.wrap(Failing(), name="smoke-failing"):
            pass
    except ValueError:
        pass

    class Tasks:
        """An iterator with a DataLoader-like task table (tracking)."""

        def __init__(self):
            self._task_info = {r: (r % 2,) for r in range(4)}
            self.i = 0

        def __iter__(self):
            return self

        def __next__(self):
            if self.i == 30:
                raise StopIteration
            self._task_info.pop(self.i, None)
            self._task_info[self.i + 4] = (self.i % 2, "data")
            self.i += 1
            return self.i

    class TaskLoader:
        def __iter__(self):
            return Tasks()

    for _ in traceml.wrap(TaskLoader(), name="smoke-tasks"):
        pass
    rep = traceml.report(source="smoke-list")
    say(f"wrap: list {rep['steps']} steps in {rep['epochs']} epochs, "
        f"generator {traceml.report(source='smoke-gen')['steps']}, "
        f"tracked {traceml.report(source='smoke-tasks')['steps']}")


def dataloader(quick):
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __len__(self):
            return 24 if quick else 48

        def __getitem__(self, i):
            time.sleep(0.01)
            return torch.tensor([i])

    traceml.configure(sampler_period_s=0.01)
    loader = DataLoader(Slow(), batch_size=2, num_workers=2)
    name = "smoke-dataloader"
    t0 = time.monotonic()
    for _ in range(2):
        for _b in traceml.wrap(loader, name=name):
            time.sleep(0.005)
    for i, _b in enumerate(traceml.wrap(loader, name=name)):
        if i == 2:
            break
    elapsed = time.monotonic() - t0
    rep = traceml.report(source=name)
    info = _core.sampler_info()
    assert rep["steps"] == 2 * len(loader) + 3, rep["steps"]
    assert info["ticks"] >= 3, info
    assert rep["workers"]["sampler"]["samples"] > 0
    _core.sampler_stuck()
    _core.default_recorder().snapshot_delivery()
    traceml.configure(sampler_period_s=0.02)
    say(f"dataloader: {rep['steps']} steps, {info['ticks']} sampler ticks, "
        f"{rep['workers']['sampler']['samples']} samples, "
        f"delivery known {rep['delivery']['known']}, {elapsed:.1f} s")


def reducers():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 10**9, 5000)
    small = x[:100]
    mask = x > 5 * 10**8
    epoch = np.repeat(np.arange(5), 1000)
    gaps = rng.integers(1, 6, 200)
    ranks = rng.permutation(5000)
    out = [
        _core.summary(x), _core.summary([]), _core.summary(small.astype(">i8")),
        _core.percentiles(x, [0, 1, 50, 99.9, 100]), _core.percentiles(small, 50),
        _core.percentiles(np.concatenate([np.zeros(6000, np.int64), [10**15]]), 99.99),
        _core.stall_mask(x, 5 * 10**8), _core.stall_gaps(mask), _core.stall_gaps(mask, epoch),
        _core.gap_histogram(gaps), _core.modal_gap(gaps), _core.modal_gap([]),
        _core.cadence_match(gaps, 3), _core.cadence_match([], 1),
        _core.autocorr(x, 7), _core.autocorr(small, 1000),
        _core.overtaking(ranks), _core.overtaking(ranks, epoch),
        _core.log_otsu(x), _core.log_otsu([5]),
    ]
    refused = 0
    for bad in (None, "abc", [1.5], np.zeros((2, 2), np.int64), [2**64], object(), 2**70):
        for call in (lambda b: _core.summary(b), lambda b: _core.percentiles(x, b),
                     lambda b: _core.stall_mask(x, b), lambda b: _core.stall_gaps(b),
                     lambda b: _core.stall_gaps(mask, b), lambda b: _core.gap_histogram(b),
                     lambda b: _core.cadence_match(gaps, b), lambda b: _core.autocorr(x, b),
                     lambda b: _core.overtaking(ranks, b), lambda b: _core.log_otsu(b)):
            try:
                call(bad)
            except (TypeError, ValueError, OverflowError):
                refused += 1
    for call in (lambda: _core.gap_histogram([0]), lambda: _core.percentiles(x, 101),
                 lambda: _core.stall_gaps(mask, epoch[:-1])):
        try:
            call()
        except ValueError:
            refused += 1
    say(f"reducers: {len(out)} results, {refused} bad calls refused")


def reports(tmp):
    from traceml.render import report_html

    rep = traceml.report(source="smoke-list")
    text = str(rep)
    html = report_html(rep.summary)
    d = rep.to_dict()
    path = os.path.join(tmp, "smoke.traceml")
    rep.save(path)
    back = traceml.load(path)
    assert back == rep
    cmp = traceml.compare(rep, path, labels=["live", "saved"])
    str(cmp)
    cmp._repr_html_()
    try:
        traceml.load(os.path.join(tmp, "missing.traceml"))
    except FileNotFoundError:
        pass
    with open(os.path.join(tmp, "junk.traceml"), "wb") as fh:
        fh.write(b"not a zip")
    try:
        traceml.load(os.path.join(tmp, "junk.traceml"))
    except ValueError:
        pass
    traceml.report(0.0001, source="smoke-list")
    say(f"report: {len(text)} chars of text, {len(html)} of HTML, {len(d)} keys, "
        "saved and loaded")


def sweep():
    res = traceml.sweep(lambda num_workers: list(range(8)), num_workers=(0, 1), steps=4,
                        consumer_pace_s=0, progress=False)
    str(res)
    say(f"sweep: {len(res.rows)} rows")


def forked():
    if not hasattr(os, "fork"):
        return
    traceml.step_begin()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        verdict = b"error"
        try:
            os.close(r)
            assert len(_core.default_recorder().snapshot()) == 0
            for _ in traceml.wrap(range(5), name="smoke-child"):
                pass
            traceml.step_begin()
            traceml.step_end()
            steps = traceml.report(source="smoke-child")["steps"]
            verdict = b"ok" if steps == 5 else f"steps {steps}".encode()
        finally:
            os.write(w, verdict)
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        verdict = fh.read()
    # (the verdict comes through the pipe: under valgrind a child's exit
    # status is valgrind's error count, not the child's)
    os.waitpid(pid, 0)
    traceml.step_end()
    assert verdict == b"ok", verdict
    say("fork: the child recorded into its own store")


def sampled_stacks():
    """The stack sampler in this process and in a forked child."""
    log = _core.StackLog(capacity=256)
    assert log.start(worker=-1, interval_us=2000) is None
    end = time.thread_time() + 0.1
    while time.thread_time() < end:
        pass
    assert log.stop() is True
    if hasattr(os, "fork"):
        pid = os.fork()
        if pid == 0:
            try:
                log.start(worker=1, interval_us=2000)
                end = time.thread_time() + 0.1
                while time.thread_time() < end:
                    pass
                log.stop()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
    samples, frames, codes = log.drain()
    assert len(samples) and len(codes), log.info()
    assert log.info()["handler_errors"] == 0, log.info()
    say(f"stacks: {len(samples)} samples, {len(codes)} code objects")


def growth():
    traceml.reset()
    for _ in range(5000):                 # past the first capacity, twice
        traceml.step_begin()
        traceml.step_end()
    assert _core.default_recorder().store_info()["capacity"] >= 5000
    traceml.reset()
    _core.default_recorder()._set_capacity_limit(100)
    for _ in range(150):
        traceml.step_begin()
        traceml.step_end()
    info = _core.default_recorder().store_info()
    assert info["steps"] == 100 and info["dropped_steps"] == 50, info
    str(traceml.report())
    traceml.reset()
    _core.default_recorder()._set_capacity_limit(0)
    traceml.step_begin()
    traceml.step_end()
    try:
        traceml.report()
    except MemoryError:
        pass
    traceml.reset()
    _core.default_recorder()._set_capacity_limit(None)
    say("store: growth, capacity limit, drops, reset")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer batches")
    ap.add_argument("--no-torch", action="store_true", help="skip the DataLoader part")
    args = ap.parse_args()
    say(f"traceml._core from {_core.__file__}")
    probes()
    wraps()
    if not args.no_torch:
        try:
            import torch  # noqa: F401 - is torch installed?
        except ImportError:
            say("dataloader: skipped (no torch)")
        else:
            dataloader(args.quick)
    reducers()
    with tempfile.TemporaryDirectory() as tmp:
        reports(tmp)
    sweep()
    forked()
    sampled_stacks()
    growth()
    traceml.reset()
    say("ok")


if __name__ == "__main__":
    main()
