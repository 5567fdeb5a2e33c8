"""Hugging Face: a TrainerCallback that times the Trainer's batch fetches.

::

    from transformers import Trainer
    from traceml.integrations.huggingface import TraceMLCallback

    trainer = Trainer(model=model, args=args, train_dataset=ds,
                      callbacks=[TraceMLCallback()])
    trainer.train()
    # main process: traceml_report.txt and traceml_report.traceml in
    # args.output_dir; the numbers of Report.flat() appended to
    # trainer.state.log_history (and so to trainer_state.json).

``transformers`` is not imported before ``TraceMLCallback`` is first used.

What one step is, and what its input wait holds.  A callback cannot wrap
the Trainer's DataLoader (the Trainer keeps its own reference), so the
steps are placed with the probes of the callback's own
:class:`traceml.Recorder`, one step per optimizer step:

* begin: ``on_epoch_begin``, then each ``on_step_end`` (the end of the
  previous optimizer step), moved later by each ``on_log``,
  ``on_evaluate`` and ``on_save`` that follows it (the Trainer logs,
  evaluates and saves after ``on_step_end``, before it fetches);
* fetch done: ``on_step_begin``;
* end: ``on_step_end``.

In the Trainer's loop (``_inner_training_loop`` / ``_run_epoch`` of
transformers 5.24, the version tested) each optimizer step first fetches its
``gradient_accumulation_steps`` batches together (``get_batch_samples``:
``next()`` on the epoch's iterator, then counting the items of the
batches when the model takes ``num_items_in_batch``), then calls
``on_step_begin``.  So the input wait is the fetch of *all* the step's
micro-batches, plus that count and the loop's few lines between the hooks;
at an epoch's start, ``iter()`` of the loader too (the workers' start).
Compute is forward, backward, clipping and the optimizer step.  Time the
Trainer spends logging, evaluating or saving is in neither: the step
opened at ``on_step_end`` is dropped (``abandon_step``) and opened again
at each of those hooks.  The steps of an epoch's end that fetched nothing
are dropped too; each drop is counted as ``steps_abandoned`` in
``callback.recorder.store_info()``, not as misuse.

The Trainer's loader is accelerate's ``DataLoaderShard``, which fetches
one batch ahead: a step waits for the batch after its own (the stall
cadence is the same).  It is given to ``on_train_begin``: its settings (``traceml.wrapping.loader_facts``) are
written at the head of the text file, since the probes' report has no
loader of its own.

Where the report is made: :meth:`TraceMLCallback.make_report`, with
``ranks="all"``.  Under torchrun (DDP, ``ddp_backend="gloo"`` on the CPU)
the callback runs on every process; at ``on_train_end`` each joins the
gather, and the main process (``state.is_world_process_zero``) alone logs
and writes the job's report (tested under a 2-rank torchrun).  The steps
are the probes', which mark no epoch start-up step, on every rank as in
the job.
"""

from __future__ import annotations

from typing import Any, Optional

from .. import recorder as _recorder
from .. import wrapping
from ..findings import report_notes
from . import claim, numbers, rank_zero, require, write

__all__ = ["TraceMLCallback"]  # noqa: F822 - made by __getattr__


class _CallbackBody:
    """What TraceMLCallback does, apart from the framework's base class."""

    def __init__(self, *, stall_threshold_s: Optional[float] = None,
                 log_history: bool = True, write_files: bool = True) -> None:
        """
        Args:
            stall_threshold_s: passed to :meth:`traceml.Recorder.report`
                (None: the automatic threshold).
            log_history: at the end of training, append the numbers of
                :meth:`traceml.Report.flat` (and ``step``) to
                ``state.log_history``.
            write_files: at the end of training, write the text and run
                files to ``args.output_dir``.

        Attributes:
            recorder: the :class:`traceml.Recorder` the steps go to.
            loader: the training loader's settings, read at
                ``on_train_begin`` (None: not a DataLoader or not given).
            last_report: the last report made (None before the first).
            paths: ``{"text": ..., "run": ...}`` written at the end of
                training (None before, and on processes other than the
                main one).
        """
        super().__init__()
        if stall_threshold_s is not None:
            from ..report import _check_threshold
            _check_threshold(stall_threshold_s)
        self.stall_threshold_s = stall_threshold_s
        self.log_history = bool(log_history)
        self.write_files = bool(write_files)
        self.recorder = _recorder.Recorder()
        self.loader: Optional[dict] = None
        self.last_report = None
        self.paths: Optional[dict] = None
        self._before_fetch = False   # a step is open and has not fetched yet

    # --- timing -------------------------------------------------------------------

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        loader = kwargs.get("train_dataloader")
        self.loader = wrapping.loader_facts(loader) if loader is not None else None
        if loader is not None:
            # Timed by the probes: under python -m traceml run, not again.
            claim(loader)

    def _begin(self) -> None:
        self.recorder.step_begin()
        self._before_fetch = True

    def _drop_open(self) -> None:
        if self._before_fetch:
            self.recorder.abandon_step()
            self._before_fetch = False

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._drop_open()
        self._begin()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._before_fetch:
            self.recorder.fetch_done()
            self._before_fetch = False

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.recorder.step_end()
        self._begin()

    def _restart(self) -> None:
        # Logging, evaluating or saving, after on_step_end: not input wait.
        if self._before_fetch:
            self.recorder.abandon_step()
            self._begin()

    def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._restart()

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._restart()

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._restart()

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._drop_open()

    # --- reporting ----------------------------------------------------------------

    def make_report(self) -> Any:
        """The report of the job (:meth:`traceml.Recorder.report` of
        :attr:`recorder` with ``ranks="all"``): under torch.distributed,
        every rank's steps gathered on rank 0, which gets the job's report
        (straggler ranks, the all-reduce echo: ``to_dict()["ranks"]``);
        the other ranks get None.  Without a process group (or in a group of
        one), this process's report.  Every rank must call it."""
        return self.recorder.report(self.stall_threshold_s, ranks="all")

    def report(self, args: Any = None, state: Any = None) -> Any:
        """Make the report now (on demand, also mid-training) and return it;
        with ``args`` and ``state``, also log and write it as at the end of
        training, on the main process only (``state.is_world_process_zero``).
        Called on every process at the end of training (a many-rank report
        needs every rank to take part); under torch.distributed only rank 0
        gets a report, the others None (see :meth:`make_report`)."""
        rep = self.make_report()
        self.last_report = rep
        if rep is not None and args is not None and state is not None and rank_zero(
                getattr(state, "is_world_process_zero", None)):
            self._publish(args, state, rep)
        return rep

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._drop_open()
        self.report(args, state)

    def _publish(self, args: Any, state: Any, rep: Any) -> None:
        if self.log_history:
            entry = numbers(rep)
            entry["step"] = int(getattr(state, "global_step", 0))
            state.log_history.append(entry)
        if self.write_files:
            self.paths = write(rep, getattr(args, "output_dir", None) or ".")
            if self.loader is not None:
                with open(self.paths["text"], "r+", encoding="utf-8") as fh:
                    text = fh.read()
                    fh.seek(0)
                    fh.write(report_notes.trainer_loader_line(self.loader) + "\n" + text)


_CLASSES: dict = {}


def _build() -> type:
    transformers = require("transformers", "transformers",
                           "traceml.integrations.huggingface.TraceMLCallback")
    cls = type("TraceMLCallback", (_CallbackBody, transformers.TrainerCallback), {
        "__module__": __name__,
        "__doc__": ("A transformers.TrainerCallback that times each optimizer step's "
                    "batch fetch into its own traceml.Recorder and reports at the end of "
                    "training on the main process (see traceml.integrations.huggingface)."),
    })
    _CLASSES["TraceMLCallback"] = cls
    return cls


def __getattr__(name: str) -> Any:
    # PEP 562: the class is made (and transformers imported) on first use.
    if name == "TraceMLCallback":
        return _CLASSES.get(name) or _build()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
