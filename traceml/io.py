"""Saving and loading runs.

A run file is a zip archive (``np.load`` opens it as an ``.npz``) holding:

* ``summary.json`` — UTF-8 JSON ``{"format": "traceml-run",
  "format_version": 1, "summary": <Report.to_dict()>}``;
* ``begin_ns.npy``, ``fetch_done_ns.npy``, ``end_ns.npy`` (int64,
  ``clock_ns()`` timestamps), ``epoch.npy`` (int32), ``source.npy`` and
  ``flags.npy`` (uint16) — the per-step arrays of ``Report.steps``, in NumPy's
  ``.npy`` format, all of length ``summary["steps"]``.

Read without traceml::

    import json, zipfile, numpy as np
    with zipfile.ZipFile(path) as z:
        summary = json.loads(z.read("summary.json"))["summary"]
    begin_ns = np.load(path)["begin_ns"]
"""

from __future__ import annotations

import io
import json
import os
import zipfile
import zlib
from typing import Union

import numpy as np

from . import _core

FORMAT = "traceml-run"
FORMAT_VERSION = 1
PathLike = Union[str, "os.PathLike[str]"]


def _path_arg(path, func: str) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{func}: path must be a str or os.PathLike, got {type(path).__name__}")
    return os.fspath(path)


def save_report(report, path: PathLike) -> str:
    """Write ``report`` to ``path`` (overwriting); returns the path as str.

    Raises:
        TypeError: path is not a str or os.PathLike.
        OSError: the file cannot be written.
    """
    path = _path_arg(path, "Report.save()")
    header = {"format": FORMAT, "format_version": FORMAT_VERSION,
              "summary": report.to_dict()}
    try:
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
            z.writestr("summary.json", json.dumps(header, indent=1))
            for field in report.steps.dtype.names:
                buf = io.BytesIO()
                np.lib.format.write_array(buf, np.ascontiguousarray(report.steps[field]),
                                          allow_pickle=False)
                z.writestr(f"{field}.npy", buf.getvalue())
    except OSError as exc:
        # Same errno, so the same subclass (IsADirectoryError, ...).
        raise OSError(exc.errno, f"Report.save(): cannot write {path!r}: "
                                 f"{exc.strerror or exc}") from exc
    return path


def load(path: PathLike):
    """Read a run file written by :meth:`Report.save`.

    Raises:
        TypeError: path is not a str or os.PathLike.
        FileNotFoundError: no such file.
        ValueError: the file is truncated, corrupt, or not a traceml run
            file; the message names the file.
    """
    from .report import Report

    path = _path_arg(path, "traceml.load()")
    where = f"traceml.load(): {path}"
    if not os.path.exists(path):
        raise FileNotFoundError(f"traceml.load(): no such file: {path}")
    try:
        with zipfile.ZipFile(path) as z:
            try:
                header = json.loads(z.read("summary.json").decode("utf-8"))
            except KeyError:
                raise ValueError(
                    f"{where}: not a traceml run file (no summary.json inside)"
                ) from None
            if not isinstance(header, dict) or header.get("format") != FORMAT:
                raise ValueError(f"{where}: not a traceml run file (format is not {FORMAT!r})")
            if header.get("format_version") != FORMAT_VERSION:
                raise ValueError(
                    f"{where}: traceml run format version "
                    f"{header.get('format_version')!r} is not supported "
                    f"(this traceml reads {FORMAT_VERSION})"
                )
            summary = header["summary"]
            count = summary.get("steps") if isinstance(summary, dict) else None
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"{where}: summary.json has no valid step count ({count!r})")
            if "begin_ns.npy" not in z.namelist():
                raise ValueError(f"{where}: run file lacks the 'begin_ns' array")
            # Each step takes 8 bytes of begin_ns: refuse a count the file
            # cannot hold before allocating for it.
            if z.getinfo("begin_ns.npy").file_size < count * 8:
                raise ValueError(
                    f"{where}: the step count {count} does not match the arrays in the file")
            steps = np.zeros(count, dtype=_core.RECORD_DTYPE)
            for field in steps.dtype.names:
                try:
                    raw = z.read(f"{field}.npy")
                except KeyError:
                    raise ValueError(f"{where}: run file lacks the {field!r} array") from None
                try:
                    arr = np.lib.format.read_array(io.BytesIO(raw), allow_pickle=False)
                except ValueError as exc:
                    raise ValueError(f"{where}: the {field!r} array is damaged ({exc})") from exc
                if arr.shape != steps.shape:
                    raise ValueError(
                        f"{where}: the {field!r} array has shape {arr.shape}, "
                        f"expected {steps.shape}"
                    )
                steps[field] = arr
    except (zipfile.BadZipFile, EOFError, OSError, UnicodeDecodeError,
            json.JSONDecodeError, KeyError, TypeError, zlib.error) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ValueError(f"{where}: not a readable traceml run file ({exc})") from exc
    return Report(summary, steps)

