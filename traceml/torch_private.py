"""Every name traceml reads from torch's private API, in one place.

torch makes no promise about these; each is looked up with a guard, so a
torch without one gets a clear "unavailable" (or None) rather than an
AttributeError, and a torch upgrade that moves one touches this file
alone.  As of torch 2.13:

* ``torch.utils.data.dataloader._BaseDataLoaderIter``: what
  ``iter(DataLoader)`` returns (:func:`is_loader_iterator`);
* ``_BaseDataLoaderIter._workers``: a multiprocessing iterator's worker
  ``Process`` objects, by worker id (:func:`iterator_workers`);
* ``_BaseDataLoaderIter._task_info``: its task table, rank -> (worker id,
  ...) (:func:`has_task_table`; read by the C wrap iterator, csrc/wrap.c,
  on each fetch, once this says it is there);
* ``DataLoader._iterator`` and its ``_shutdown_workers()``: a persistent
  loader's live iterator (:func:`live_iterator`, :func:`shutdown_workers`);
* ``torch.utils.data._DatasetKind.create_fetcher``: the factory of each
  worker's fetcher, replaced in forked workers to time their batches
  (:func:`dataset_kind`);
* ``_BaseDataLoaderIter._sampler_iter``: the iterator over the sampler's
  (or batch_sampler's) indices that ``_next_index`` draws from inside
  each fetch, replaced by a timed one for the epoch (:func:`time_sampler`);
* ``_BaseDataLoaderIter._next_index`` in ``torch/utils/data/dataloader.py``:
  where the iterator asks its sampler for the next indices, a frame name
  the stack sampler reads (:data:`SAMPLER_FRAME`);
* the message of an exception re-raised from a worker
  (``torch._utils.ExceptionWrapper.reraise``: "Caught ValueError in
  DataLoader worker process 1.\nOriginal Traceback ...", its last line the
  worker's own), read for its worker id and last line (:func:`raised`);
* ``torch.distributed.distributed_c10d._get_default_store``: the default
  group's store, through which ``traceml.gather`` hears who is present
  (:func:`default_store_getter`).
"""

from __future__ import annotations

import re
import sys
from typing import Any, Callable, Optional


# (file suffix, function name suffix) of the frame through which a
# DataLoader iterator calls its sampler (or batch_sampler): sampled stacks
# whose innermost frame of torch.utils.data is this one are the sampler's.
SAMPLER_FRAME = ("torch/utils/data/dataloader.py", "_next_index")


def is_loader_iterator(obj: Any) -> bool:
    """True for what iter(DataLoader) returns (torch already imported and
    ``_BaseDataLoaderIter`` there)."""
    torch = sys.modules.get("torch")
    module = getattr(getattr(getattr(torch, "utils", None), "data", None), "dataloader", None)
    base = getattr(module, "_BaseDataLoaderIter", None)
    return isinstance(base, type) and isinstance(obj, base)


def iterator_workers(inner: Any) -> Optional[list]:
    """A multiprocessing DataLoader iterator's worker processes by worker
    id, or None where that is not exposed."""
    workers = getattr(inner, "_workers", None)
    return workers if isinstance(workers, list) else None


def has_task_table(inner: Any) -> bool:
    """Whether ``inner`` has the task table (a dict) the wrap iterator reads
    each delivery's rank and worker from."""
    return isinstance(getattr(inner, "_task_info", None), dict)


def live_iterator(loader: Any) -> Any:
    """A DataLoader's kept iterator (persistent workers), or None."""
    return getattr(loader, "_iterator", None)


def shutdown_workers(loader: Any) -> None:
    """Stop the worker processes of a loader's kept iterator now, if it
    has one; best effort (an error in torch's clean-up is swallowed)."""
    stop = getattr(live_iterator(loader), "_shutdown_workers", None)
    if callable(stop):
        try:
            stop()
        except Exception:  # noqa: BLE001 - best effort at clean-up
            pass


def dataset_kind() -> Any:
    """``torch.utils.data._DatasetKind`` when it has ``create_fetcher``,
    else None (torch not installed, or a torch without it)."""
    try:
        from torch.utils.data import _DatasetKind
    except ImportError:
        return None
    return _DatasetKind if hasattr(_DatasetKind, "create_fetcher") else None


def time_sampler(inner: Any, wrap: Callable[[Any], Any]) -> bool:
    """Replace the DataLoader iterator ``inner``'s ``_sampler_iter`` (the
    iterator its ``_next_index`` calls ``next()`` on, inside each fetch, at
    any num_workers) with ``wrap(it)``; False where ``inner`` is not a
    DataLoader iterator or has no such iterator.  A persistent loader's
    ``_reset`` makes a new one each epoch, so this is done after each
    ``iter()``."""
    if not is_loader_iterator(inner):
        return False
    it = getattr(inner, "_sampler_iter", None)
    if it is None or not hasattr(type(it), "__next__"):
        return False
    inner._sampler_iter = wrap(it)
    return True


def default_store_getter() -> Optional[Callable[[], Any]]:
    """``torch.distributed.distributed_c10d._get_default_store``, or None
    for a torch without it."""
    from torch.distributed import distributed_c10d

    return getattr(distributed_c10d, "_get_default_store", None)


# "Caught <type> in DataLoader worker process <id>." (ExceptionWrapper).
_WORKER_RERAISE = re.compile(r"^Caught \S+ in DataLoader worker process (\d+)\.")
# How much of an exception's message the report keeps (characters).
RAISED_MESSAGE_MAX = 200


def raised(exc: BaseException) -> dict:
    """What the report keeps of an exception that ended a loop: ``type``
    (its qualified name), ``message`` (for one re-raised from a DataLoader
    worker, the last line of the worker's own traceback, else the first
    line of ``str(exc)``; at most RAISED_MESSAGE_MAX characters) and
    ``worker`` (the worker's id from torch's message, or None)."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a failing __str__ still leaves the type
        text = ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    worker = None
    found = _WORKER_RERAISE.match(lines[0]) if lines else None
    if found is not None:
        worker = int(found.group(1))
        message = lines[-1]
    else:
        message = lines[0] if lines else ""
    return {"type": type(exc).__qualname__, "message": message[:RAISED_MESSAGE_MAX],
            "worker": worker}

