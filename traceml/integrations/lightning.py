"""Lightning: a Callback that times the training DataLoader's fetches.

::

    import lightning as L
    from traceml.integrations.lightning import TraceMLCallback

    trainer = L.Trainer(callbacks=[TraceMLCallback()])
    trainer.fit(model, train_loader)
    # rank 0: traceml_report.txt and traceml_report.traceml in
    # trainer.log_dir (default_root_dir without a logger), the numbers of
    # Report.flat() in every logger (log_metrics) at the last global step.

``PLTraceMLCallback`` is the same callback for ``pytorch_lightning``
(a ``pytorch_lightning.Trainer`` accepts only its own Callback class).
Neither framework is imported before one of these names is first used.

What is timed: at ``setup`` of a fit, the callback takes over the
strategy's ``process_dataloader`` (Lightning's public hook through which
each dataloader passes before its loop uses it; the strategy's own result
is kept) and wraps each *training* dataloader with
:meth:`traceml.Recorder.wrap` into the callback's own recorder (name
``"train"``; ``"train#2"``... for several).  Validation and sanity-check
loaders are left alone.  Each step is then one fetch of Lightning's fit
loop, exactly as :func:`traceml.wrap` defines it: from the fetch of one
training batch to the next.  Lightning fetches one batch per training
batch for loaders with a length; for a loader without one, its data
fetcher fetches one batch ahead, so a step's wait is that of the next
batch (the cadence is the same).  With ``training_step(self,
dataloader_iter)`` the fetches are the ones the step makes.  The loader's
settings, delivery order and worker evidence are read as for any wrapped
DataLoader.  The strategy's method is given back at ``teardown``.

Tested with lightning 2.6 (``lightning.pytorch``; ``pytorch_lightning``
2.6 for ``PLTraceMLCallback``).

Where the report is made: :meth:`TraceMLCallback.make_report`, with
``ranks="all"``.  Under DDP (``strategy="ddp"``) the callback runs on
every rank: at the end of the fit each rank joins the gather, then reads
``trainer.log_dir`` (a broadcast from rank 0 in Lightning, which every
rank must join); rank 0 alone logs and writes.  Lightning rebuilds the training DataLoader with a
``DistributedSampler`` before ``process_dataloader``, so the callback
wraps the sharded loader (tested under a 2-rank torchrun).
"""

from __future__ import annotations

from typing import Any, Optional

from .. import recorder as _recorder
from .. import wrapping
from . import folder_or, numbers, rank_zero, require, write

__all__ = ["TraceMLCallback", "PLTraceMLCallback"]  # noqa: F822 - made by __getattr__

# Attributes Lightning writes on the dataloaders it holds: set on the
# DataLoader inside the wrapper (worker_init_fn when seeding workers with
# PL_SEED_WORKERS; _iterator when it shuts persistent workers down).
_FORWARD = frozenset({"worker_init_fn", "_iterator"})
_MISSING = object()


class _Wrapped(wrapping.Wrapped):
    """A :class:`traceml.Wrapped` whose writes of the attributes Lightning
    sets on its dataloaders reach the DataLoader itself."""

    def __setattr__(self, attr: str, value: Any) -> None:
        if attr in _FORWARD:
            setattr(self.iterable, attr, value)
        else:
            super().__setattr__(attr, value)


class _CallbackBody:
    """What TraceMLCallback does, apart from the framework's base class."""

    def __init__(self, *, stall_threshold_s: Optional[float] = None,
                 log_metrics: bool = True, write_files: bool = True) -> None:
        """
        Args:
            stall_threshold_s: passed to :meth:`traceml.Recorder.report`
                (None: the automatic threshold).
            log_metrics: at the end of the fit, log the numbers of
                :meth:`traceml.Report.flat` to every logger of the trainer.
            write_files: at the end of the fit, write the text and run
                files to ``trainer.log_dir`` (``default_root_dir`` without
                a logger).

        Attributes:
            recorder: the :class:`traceml.Recorder` the fetches go to.
            last_report: the last report made (None before the first).
            paths: ``{"text": ..., "run": ...}`` written at the end of the
                fit (None before, and on ranks other than 0).
        """
        super().__init__()
        if stall_threshold_s is not None:
            from ..report import _check_threshold
            _check_threshold(stall_threshold_s)
        self.stall_threshold_s = stall_threshold_s
        self.log_metrics = bool(log_metrics)
        self.write_files = bool(write_files)
        self.recorder = _recorder.Recorder()
        self.last_report = None
        self.paths: Optional[dict] = None
        self._taken: Optional[tuple] = None   # (strategy, its own instance attribute)

    # --- timing -------------------------------------------------------------------

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage != "fit" or self._taken is not None:
            return
        strategy = trainer.strategy
        own = vars(strategy).get("process_dataloader", _MISSING)
        process = strategy.process_dataloader

        def process_dataloader(dataloader: Any) -> Any:
            dataloader = process(dataloader)
            if getattr(trainer, "training", False) and not isinstance(dataloader,
                                                                      wrapping.Wrapped):
                dataloader = _Wrapped(dataloader, self._name(), self.recorder)
            return dataloader

        strategy.process_dataloader = process_dataloader
        self._taken = (strategy, own)

    def _name(self) -> str:
        names = self.recorder.sources.by_name
        n = 1
        while (f"train#{n}" if n > 1 else "train") in names:
            n += 1
        return f"train#{n}" if n > 1 else "train"

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if self._taken is None:
            return
        strategy, own = self._taken
        self._taken = None
        if own is _MISSING:
            vars(strategy).pop("process_dataloader", None)
        else:
            strategy.process_dataloader = own

    # --- reporting ----------------------------------------------------------------

    def make_report(self) -> Any:
        """The report of the job's training fetches
        (:meth:`traceml.Recorder.report` of :attr:`recorder` with
        ``ranks="all"``): under torch.distributed, every rank's steps
        gathered on rank 0, which gets the job's report (straggler ranks,
        the all-reduce echo: ``to_dict()["ranks"]``); the other ranks get
        None.  Without a process group (or in a group of one), this
        process's report.  Every rank must call it."""
        return self.recorder.report(self.stall_threshold_s, ranks="all")

    def report(self, trainer: Any = None) -> Any:
        """Make the report now (on demand, also mid-fit) and return it; with
        ``trainer``, also log and write it as at the end of the fit, on
        global rank 0 only.  Called on every rank at the end of the fit (a
        many-rank report needs every rank to take part, and with
        ``trainer`` and ``write_files`` every rank reads
        ``trainer.log_dir``, a broadcast under DDP); under
        torch.distributed only rank 0 gets a report, the others None (see
        :meth:`make_report`)."""
        rep = self.make_report()
        self.last_report = rep
        folder = None
        if trainer is not None and self.write_files:
            # Read on every rank: under DDP trainer.log_dir is a broadcast
            # from rank 0 (Lightning 2.6 Trainer.log_dir: "You must call
            # this on all processes"); read on rank 0 alone, it waits for
            # the other ranks forever, or fails when they have exited.
            folder = folder_or(getattr(trainer, "log_dir", None),
                               getattr(trainer, "default_root_dir", None))
        if rep is not None and trainer is not None and rank_zero(getattr(trainer, "is_global_zero", None)):
            self._publish(trainer, rep, folder)
        return rep

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        self.report(trainer)

    def _publish(self, trainer: Any, rep: Any, folder: Optional[str]) -> None:
        if self.log_metrics:
            values = numbers(rep)
            for logger in getattr(trainer, "loggers", None) or []:
                logger.log_metrics(values, step=int(getattr(trainer, "global_step", 0)))
                save = getattr(logger, "save", None)
                if callable(save):
                    save()
        if self.write_files:
            self.paths = write(rep, folder)


_CLASSES: dict = {}
_BASES = {
    "TraceMLCallback": ("lightning.pytorch", "lightning"),
    "PLTraceMLCallback": ("pytorch_lightning", "pytorch-lightning"),
}


def _build(name: str) -> type:
    module, package = _BASES[name]
    pl = require(module, package, f"traceml.integrations.lightning.{name}")
    cls = type(name, (_CallbackBody, pl.Callback), {
        "__module__": __name__,
        "__doc__": (f"A {module}.Callback that times the training DataLoader's "
                    "fetches into its own traceml.Recorder and reports at the end of "
                    "the fit on global rank 0 (see traceml.integrations.lightning)."),
    })
    _CLASSES[name] = cls
    return cls


def __getattr__(name: str) -> Any:
    # PEP 562: the classes are made (and the framework imported) on first use.
    if name in _BASES:
        return _CLASSES.get(name) or _build(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
