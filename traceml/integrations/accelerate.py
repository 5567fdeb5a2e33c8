"""Accelerate: prepare a DataLoader, then time its fetches.

::

    from accelerate import Accelerator
    from traceml.integrations import accelerate as tm_accelerate

    accelerator = Accelerator()
    model, optimizer = accelerator.prepare(model, optimizer)
    loader = tm_accelerate.prepare(accelerator, loader)   # prepare, then wrap
    for batch in loader:
        ...
    tm_accelerate.publish(accelerator)   # main process: files and trackers

The order matters: ``accelerator.prepare`` recognises a torch DataLoader
(``isinstance``) to shard it across processes and move its batches to the
device; a :class:`traceml.Wrapped` is not one, and would be passed through
unprepared.  So :func:`prepare` calls ``accelerator.prepare(loader)`` first
and wraps what it returns (a ``DataLoaderShard``, or a
``DataLoaderDispatcher`` with ``dispatch_batches``).  Each step's wait is
then what the loop waits for: the shard's fetch, its move to the device
and, for a dispatcher, the broadcast of the batch from process 0.  The
shard fetches one batch ahead, so the wait of step i is the fetch of batch
i + 1 (the cadence is the same).

What the report keeps of the loader: its settings (read from the
DataLoader inside, ``base_dataloader``; ``batch_size`` per process, from
the shard's batch sampler; ``wrapper`` names the class).  Accelerate makes
torch's iterator inside a generator at the first fetch, so worker PIDs,
delivery order and the workers' own batch timing cannot be read: the
loader facts' ``unread`` entry says so when the loader has workers.

Neither ``accelerate`` nor torch is imported before a function here is
called.
"""

from __future__ import annotations

from typing import Any, Optional

from .. import _core
from . import folder_or, numbers, rank_zero, require, write

__all__ = ["prepare", "make_report", "publish"]


def prepare(accelerator: Any, loader: Any, *, name: Optional[str] = None,
            recorder: Any = None) -> Any:
    """``accelerator.prepare(loader)``, then :func:`traceml.wrap` of the
    result (:meth:`traceml.Recorder.wrap` of ``recorder`` when given).

    Args:
        accelerator: an ``accelerate.Accelerator``.
        loader: a torch DataLoader, not yet prepared.
        name: the name the steps are reported under (default: the prepared
            loader's type name, ``"DataLoaderShard"``).
        recorder: a :class:`traceml.Recorder` (default: traceml's default
            recorder).

    Returns:
        A :class:`traceml.Wrapped` of the prepared loader (``len()`` and
        its attributes, such as ``total_batch_size``, pass through).

    Raises:
        ImportError: accelerate is not installed.
        TypeError: ``accelerator`` has no ``prepare``; ``loader`` is
            already a :class:`traceml.Wrapped` (prepare first, then wrap).
    """
    require("accelerate", "accelerate", "traceml.integrations.accelerate.prepare")
    from ..wrapping import Wrapped

    if not callable(getattr(accelerator, "prepare", None)):
        raise TypeError("prepare(): accelerator must be an accelerate.Accelerator, got "
                        f"{type(accelerator).__name__}")
    if isinstance(loader, Wrapped):
        raise TypeError("prepare(): loader is already wrapped by traceml; pass the DataLoader "
                        "itself (accelerator.prepare must see a DataLoader to shard it)")
    prepared = accelerator.prepare(loader)
    target = recorder if recorder is not None else _core.default_recorder()
    return target.wrap(prepared, name=name)


def make_report(recorder: Any = None, *, source: Any = None,
                stall_threshold_s: Optional[float] = None) -> Any:
    """The report of the job (:meth:`traceml.Recorder.report` of
    ``recorder``, default traceml's default recorder, with
    ``ranks="all"``): under torch.distributed, every process's steps
    gathered on rank 0, which gets the job's report (straggler ranks, the
    all-reduce echo: ``to_dict()["ranks"]``); the other processes get
    None.  Without a process group (or in a group of one), this process's
    report.  Every process must call it."""
    target = recorder if recorder is not None else _core.default_recorder()
    return target.report(stall_threshold_s, source=source, ranks="all")


def publish(accelerator: Any, report: Any = None, *, folder: Any = None,
            step: Optional[int] = None) -> Any:
    """On the main process (``accelerator.is_main_process``): log the
    numbers of :meth:`traceml.Report.flat` to the accelerator's trackers
    (``accelerator.log``, when it has any) and write the text and run files
    to ``folder`` (default: ``accelerator.project_dir``, else the working
    folder).  Call it on every process: each makes its report (a many-rank
    report needs every rank to take part); the others write nothing.

    Args:
        accelerator: an ``accelerate.Accelerator``.
        report: the report (default: :func:`make_report`).
        folder: where the files go.
        step: the step the numbers are logged at (default: the report's
            step count).

    Returns:
        The report on the main process, None elsewhere.

    Raises:
        OSError: a file cannot be written.
    """
    rep = report if report is not None else make_report()
    if rep is None or not rank_zero(getattr(accelerator, "is_main_process", None)):
        return None
    if getattr(accelerator, "trackers", None):
        accelerator.log(numbers(rep), step=int(step if step is not None else rep["steps"]))
    write(rep, folder_or(folder, getattr(accelerator, "project_dir", None)))
    return rep
