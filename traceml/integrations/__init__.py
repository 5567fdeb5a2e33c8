"""Adapters for the trainers people use, each a thin layer over the public
API (:class:`traceml.Recorder`, :func:`traceml.wrap`, :class:`traceml.Report`):

* :mod:`traceml.integrations.lightning`: ``TraceMLCallback`` for a
  ``lightning.Trainer`` (``PLTraceMLCallback`` for ``pytorch_lightning``);
* :mod:`traceml.integrations.huggingface`: ``TraceMLCallback`` for a
  ``transformers.Trainer``;
* :mod:`traceml.integrations.accelerate`: :func:`prepare`, which is
  ``accelerator.prepare(loader)`` then ``traceml.wrap``.

Importing this package, or any of its modules, imports no framework: each
is imported when its adapter is first used, and a missing one raises an
ImportError naming the package to install.

Each adapter records into a :class:`traceml.Recorder` of its own (the
user's default recorder is untouched) and reports with ``ranks="all"``:
under torch.distributed every rank's steps are gathered to rank 0
(:mod:`traceml.ranks`), which alone writes (the framework's own rank,
else ``torch.distributed.get_rank()``); without a process group, the
local process.  The report goes where that framework's
users look: a text file and a run file (:meth:`traceml.Report.save`) in
the run's folder, and the numbers of :meth:`traceml.Report.flat` in its
logs.
"""

from __future__ import annotations

import importlib
import os
import sys
import weakref
from typing import Any, Optional

from ..findings import report_notes

# Loaders an adapter times by other means than iterating them through
# traceml.wrap (the Hugging Face callback's probes): ``python -m traceml
# run`` leaves their epochs alone, so that no loader is recorded twice.
_CLAIMED: "weakref.WeakSet" = weakref.WeakSet()

# The files each adapter writes into the run's folder.
TEXT_FILE = "traceml_report.txt"
RUN_FILE = "traceml_report.traceml"


def require(module: str, package: str, adapter: str) -> Any:
    """Import ``module`` for ``adapter``, or raise an ImportError that
    names the pip ``package`` to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(report_notes.missing_framework(adapter, module, package)) from exc


def is_rank_zero() -> bool:
    """Whether this process is rank 0 of torch.distributed's default group
    (True when torch.distributed is not in use)."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None)
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_rank() == 0
    except (RuntimeError, ValueError):
        pass
    return True


def rank_zero(flag: Any) -> bool:
    """The framework's own "rank 0" flag (``trainer.is_global_zero``,
    ``state.is_world_process_zero``, ``accelerator.is_main_process``), or
    :func:`is_rank_zero` where the framework gave none (None)."""
    return is_rank_zero() if flag is None else bool(flag)


def claim(loader: Any) -> None:
    """Mark ``loader`` as timed by an adapter (held weakly): the launcher
    (``python -m traceml run``) then iterates it as torch does, untimed.
    Loaders an adapter wraps (:func:`traceml.wrap`) need no claim: the
    launcher never times what a traceml wrap iterates."""
    try:
        _CLAIMED.add(loader)
    except TypeError:   # not weakly referable: nothing to leave alone
        pass


def is_claimed(loader: Any) -> bool:
    """Whether an adapter has claimed ``loader`` (:func:`claim`)."""
    try:
        return loader in _CLAIMED
    except TypeError:
        return False


def numbers(report: Any) -> dict:
    """The numeric entries of ``report.flat()`` (floats), for loggers whose
    metrics must be numbers (labels such as the diagnosis are in the text
    file)."""
    return {k: v for k, v in report.flat().items() if isinstance(v, float)}


def write(report: Any, folder: Any) -> dict:
    """Write ``report`` into ``folder`` (made if missing) as text
    (:data:`TEXT_FILE`, ``str(report)``) and as a run file
    (:data:`RUN_FILE`, :meth:`traceml.Report.save`); returns
    ``{"text": path, "run": path}``.

    Raises:
        OSError: a file cannot be written.
    """
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    text = os.path.join(folder, TEXT_FILE)
    with open(text, "w", encoding="utf-8") as fh:
        fh.write(str(report) + "\n")
    run = report.save(os.path.join(folder, RUN_FILE))
    return {"text": text, "run": run}


def folder_or(*candidates: Optional[Any]) -> str:
    """The first candidate folder that is set, else the working folder."""
    for c in candidates:
        if c:
            return os.fspath(c)
    return os.getcwd()
