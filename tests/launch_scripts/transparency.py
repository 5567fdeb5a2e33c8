"""torch's DataLoader behaviours, one value each, to compare with and
without traceml: ``python transparency.py [case ...]`` prints one line a
case (run it plainly and under ``python -m traceml run``); the tests also
call each case in process with ``wrap`` = traceml.wrap and with the
identity.  Datasets live here, at module level, so that spawned workers
can import them (as ``__mp_main__`` when run as a script).

``python transparency.py --method M [case ...]`` runs the cases that
start workers (WORKER_CASES) with ``multiprocessing_context=M`` (fork,
spawn or forkserver), one line a case."""
import operator
import sys
import time
import traceback
import warnings

from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info


class Squares(Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        return i * i


class Failing(Dataset):
    """Raises on index 5 (batch 2 at batch_size 2: worker 0's second)."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        if i == 5:
            raise ValueError(f"sample {i} is corrupt")
        return i


class Slow(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 1:
            time.sleep(1.5)
        return i


class Shards(IterableDataset):
    """range(12), split between the workers."""

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return iter(range(12))
        return iter(range(info.id, 12, info.num_workers))


def same(loader):
    return loader


def values(batches):
    return [b.tolist() for b in batches]


def workers(n, ctx):
    """DataLoader keywords for n workers started by ``ctx`` (None: the
    default start method; torch refuses a context without workers)."""
    return {"num_workers": n, **({"multiprocessing_context": ctx} if ctx and n else {})}


def results(wrap=same, ctx=None):
    return [values(wrap(DataLoader(Squares(), batch_size=4, **workers(n, ctx)))) for n in (0, 2)]


def lengths(wrap=same, ctx=None):
    out = []
    for n in (0, 2):
        loader = DataLoader(Squares(), batch_size=3, **workers(n, ctx))
        it = iter(wrap(loader))
        row = [len(loader), len(it), operator.length_hint(it), bool(it)]
        row.append(values(next(it) for _ in range(len(it))))
        try:
            next(it)
        except StopIteration:
            row.append("StopIteration")
        out.append(row)
    return out


def _failure(loader):
    got = []
    try:
        for b in loader:
            got.append(b.tolist())
    except Exception as exc:  # noqa: BLE001 - what torch raises is the value compared
        # The traceback's frames hold the DataLoader iterator: cleared, it
        # shuts its workers down now.  Left to a later gc pass, torch's
        # shutdown waits 5 s a worker (the queues' finalizers have closed
        # their feeder threads first, so the workers never get their None).
        traceback.clear_frames(exc.__traceback__)
        return [got, type(exc).__name__, str(exc)]
    return [got, None, None]


def exceptions(wrap=same):
    return _failure(wrap(DataLoader(Failing(), batch_size=2)))


def worker_error(wrap=same, ctx=None):
    return _failure(wrap(DataLoader(Failing(), batch_size=2, **workers(2, ctx))))


def timeout(wrap=same, ctx=None):
    got = _failure(wrap(DataLoader(Slow(), batch_size=1, timeout=0.5, **workers(1, ctx))))
    if ctx not in (None, "fork"):
        # A spawned (or forkserver) worker imports torch before its first
        # batch, which can take longer than the timeout itself: which
        # batch times out depends on the machine, not on traceml.
        got[0] = "not compared"
    return got


def persistent(wrap=same, ctx=None):
    loader = DataLoader(Squares(), batch_size=4, persistent_workers=True, **workers(2, ctx))
    epochs, pids = [], []
    for _ in range(2):
        it = iter(wrap(loader))
        pids.append([w.pid for w in it._workers])
        epochs.append(values(it))
    return [epochs, pids[0] == pids[1], len(pids[0])]


def unordered(wrap=same, ctx=None):
    loader = DataLoader(Squares(), batch_size=2, in_order=False, **workers(2, ctx))
    got = values(wrap(loader))
    return [sorted(v for b in got for v in b), len(got)]


def start_methods(wrap=same):
    return {m: values(wrap(DataLoader(Squares(), batch_size=4, num_workers=2,
                                      multiprocessing_context=m)))
            for m in ("spawn", "forkserver", "fork")}


def iterable(wrap=same, ctx=None):
    return [values(wrap(DataLoader(Shards(), batch_size=2, **workers(n, ctx)))) for n in (0, 2)]


def warns(wrap=same):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for b in wrap(DataLoader(Squares(), batch_size=8, pin_memory=True)):
            warnings.warn(f"batch of {len(b)}", stacklevel=1)
    return [(w.category.__name__, str(w.message), w.filename.rsplit("/", 1)[-1], w.lineno)
            for w in seen]


CASES = {f.__name__: f for f in (results, lengths, exceptions, worker_error, timeout,
                                 persistent, unordered, start_methods, iterable, warns)}
# The cases that start workers, for each start method (--method).
WORKER_CASES = ("results", "lengths", "worker_error", "timeout", "persistent", "unordered",
                "iterable")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--method"]:
        method = sys.argv[2]
        for name in sys.argv[3:] or WORKER_CASES:
            print(f"{method} {name}: {CASES[name](ctx=method)!r}", flush=True)
        sys.exit(0)
    warnings.warn("transparency.py: a warning of the script's own", stacklevel=1)
    for name in sys.argv[1:] or CASES:
        print(f"{name}: {CASES[name]()!r}", flush=True)
