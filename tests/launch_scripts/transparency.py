"""torch's DataLoader behaviours, one value each, to compare with and
without traceml: ``python transparency.py [case ...]`` prints one line a
case (run it plainly and under ``python -m traceml run``); the tests also
call each case in process with ``wrap`` = traceml.wrap and with the
identity.  Datasets live here, at module level, so that spawned workers
can import them."""
import operator
import sys
import time
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


def results(wrap=same):
    return [values(wrap(DataLoader(Squares(), batch_size=4, num_workers=n))) for n in (0, 2)]


def lengths(wrap=same):
    out = []
    for n in (0, 2):
        loader = DataLoader(Squares(), batch_size=3, num_workers=n)
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
        return [got, type(exc).__name__, str(exc)]
    return [got, None, None]


def exceptions(wrap=same):
    return _failure(wrap(DataLoader(Failing(), batch_size=2)))


def worker_error(wrap=same):
    return _failure(wrap(DataLoader(Failing(), batch_size=2, num_workers=2)))


def timeout(wrap=same):
    return _failure(wrap(DataLoader(Slow(), batch_size=1, num_workers=1, timeout=0.5)))


def persistent(wrap=same):
    loader = DataLoader(Squares(), batch_size=4, num_workers=2, persistent_workers=True)
    epochs, pids = [], []
    for _ in range(2):
        it = iter(wrap(loader))
        pids.append([w.pid for w in it._workers])
        epochs.append(values(it))
    return [epochs, pids[0] == pids[1], len(pids[0])]


def unordered(wrap=same):
    loader = DataLoader(Squares(), batch_size=2, num_workers=2, in_order=False)
    got = values(wrap(loader))
    return [sorted(v for b in got for v in b), len(got)]


def start_methods(wrap=same):
    return {m: values(wrap(DataLoader(Squares(), batch_size=4, num_workers=2,
                                      multiprocessing_context=m)))
            for m in ("spawn", "forkserver", "fork")}


def iterable(wrap=same):
    return [values(wrap(DataLoader(Shards(), batch_size=2, num_workers=n))) for n in (0, 2)]


def warns(wrap=same):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for b in wrap(DataLoader(Squares(), batch_size=8, pin_memory=True)):
            warnings.warn(f"batch of {len(b)}", stacklevel=1)
    return [(w.category.__name__, str(w.message), w.filename.rsplit("/", 1)[-1], w.lineno)
            for w in seen]


CASES = {f.__name__: f for f in (results, lengths, exceptions, worker_error, timeout,
                                 persistent, unordered, start_methods, iterable, warns)}


if __name__ == "__main__":
    warnings.warn("transparency.py: a warning of the script's own", stacklevel=1)
    for name in sys.argv[1:] or CASES:
        print(f"{name}: {CASES[name]()!r}", flush=True)
