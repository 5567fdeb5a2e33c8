"""The Report: one run's summary and per-step arrays, in memory and on
disk.  Plain data and its views; it never measures or decides, and
drawing is delegated to :mod:`traceml.render` and :mod:`traceml.plot`.

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

import copy
import io
import json
import os
import zipfile
import zlib
from typing import Any, Optional

import numpy as np

from . import _core

FORMAT = "traceml-run"
FORMAT_VERSION = 1


class Report:
    """What one source recorded, reduced.

    Attributes:
        steps: the per-step records, a NumPy structured array with fields
            ``begin_ns``, ``fetch_done_ns``, ``end_ns`` (int64, clock_ns()
            timestamps), ``epoch`` (int32), ``source`` (uint16) and
            ``flags`` (uint16; see ``traceml._core.FLAG_*``), in step order.
        summary: the dict :meth:`to_dict` returns.

    ``str(report)`` is the terminal text, ``report._repr_html_()`` the
    notebook view (static HTML, no JavaScript).
    """

    def __init__(self, summary: dict, steps: np.ndarray):
        self.summary = summary
        self.steps = steps
        # The source's worker batch records (traceml.worker_timing), kept
        # in memory for save_trace(); not written by save().
        self.worker_batches: Optional[np.ndarray] = None
        self.worker_offsets: Optional[dict] = None

    # Convenience views of the per-step arrays, in nanoseconds.
    @property
    def input_wait_ns(self) -> np.ndarray:
        """fetch_done_ns - begin_ns per step (int64, shape (steps,))."""
        return self.steps["fetch_done_ns"] - self.steps["begin_ns"]

    @property
    def compute_ns(self) -> np.ndarray:
        """end_ns - fetch_done_ns per step (int64, shape (steps,))."""
        return self.steps["end_ns"] - self.steps["fetch_done_ns"]

    @property
    def step_ns(self) -> np.ndarray:
        """end_ns - begin_ns per step (int64, shape (steps,))."""
        return self.steps["end_ns"] - self.steps["begin_ns"]

    @property
    def diagnosis(self) -> str:
        return self.summary["diagnosis"]

    def __getitem__(self, key: str) -> Any:
        return self.summary[key]

    def to_dict(self) -> dict:
        """The summary as plain JSON-serialisable data (a deep copy).

        Keys: version, source, sources, steps, steady_steps, epochs,
        wall_s, dropped_steps, out_of_memory, misuse, input_wait_s,
        compute_s, step_s ({mean, median, p90, p95, p99, max, total}, s),
        input_share, diagnosis, diagnosis_rule, shape, shape_rule,
        temporal, concentration, stalls, cadence, trend, epoch_start,
        loader, host, delivery, workers, stuck, headline, notes, next.
        ``stalls`` holds ``count`` and ``outliers``; ``temporal`` (None
        without stalls) a ``label`` of PERIODIC, IRREGULAR, EVERY-FETCH or
        TOO-FEW with ``period`` and ``p_value``; ``trend`` (None, or
        RISING / FALLING with ``slope_ms_per_step``); ``headline`` a
        ``label`` of EPOCH-START, STUCK or STEADY with
        ``epoch_start_share`` and ``epoch_start_s_per_epoch``.
        """
        return copy.deepcopy(self.summary)

    def flat(self, prefix: str = "traceml/") -> dict:
        """The report's headline numbers as one flat dict of scalars, keys
        ``prefix`` + name, for loggers that take such a dict as it is
        (``wandb.log(report.flat())``, ``mlflow.log_metrics(...)``, a
        Lightning logger's ``log_metrics``).  Numbers are floats (seconds,
        shares as fractions, counts); labels are strings; a value that was
        not measured is left out rather than given as None.

        Keys: steps, steady_steps, epochs, wall_s, input_share,
        wait_mean_s, wait_median_s, wait_p95_s, compute_median_s,
        step_median_s, stalls, stalls_per_100, outliers, period (when
        PERIODIC), diagnosis, shape, and with worker batch timing
        production_share, handover_share, make_batch_s, cpu_batch_s, and
        with a prediction keeps_up_with_workers, worker_cores_needed.

        Raises:
            TypeError: prefix is not a str.
        """
        if not isinstance(prefix, str):
            raise TypeError(f"flat(): prefix must be a str, got {type(prefix).__name__}")
        s = self.summary
        wait, compute, step = s.get("input_wait_s") or {}, s.get("compute_s") or {}, \
            s.get("step_s") or {}
        stalls = s.get("stalls") or {}
        steady = s.get("steady_steps") or 0
        temporal = s.get("temporal") or {}
        prod = s.get("production") or {}
        pred = s.get("prediction") or {}
        out = {
            "steps": s.get("steps"), "steady_steps": steady, "epochs": s.get("epochs"),
            "wall_s": s.get("wall_s"), "input_share": s.get("input_share"),
            "wait_mean_s": wait.get("mean"), "wait_median_s": wait.get("median"),
            "wait_p95_s": wait.get("p95"), "compute_median_s": compute.get("median"),
            "step_median_s": step.get("median"), "stalls": stalls.get("count"),
            "stalls_per_100": (100.0 * stalls["count"] / steady
                               if steady and stalls.get("count") is not None else None),
            "outliers": stalls.get("outliers"),
            "period": temporal.get("period") if temporal.get("label") == "PERIODIC" else None,
            "diagnosis": s.get("diagnosis"), "shape": s.get("shape"),
            "production_share": prod.get("production_share"),
            "handover_share": prod.get("handover_share"),
            "make_batch_s": (prod.get("make_s") or {}).get("mean"),
            "cpu_batch_s": (prod.get("cpu_s") or {}).get("mean"),
            "keeps_up_with_workers": pred.get("keeps_up_with"),
            "worker_cores_needed": pred.get("worker_cores_needed"),
        }
        return {prefix + k: (v if isinstance(v, str) else float(v))
                for k, v in out.items() if v is not None}

    def save_trace(self, path, *, max_steps: int = 100_000, window: int = 20) -> str:
        """Write this run as a Chrome trace-event JSON timeline (Perfetto,
        ``chrome://tracing``): the loop's fetch and compute slices, each
        worker's batches, stuck fetches; see :mod:`traceml.trace` for the
        tracks, the clock and how ``max_steps`` (the most steps written;
        past it the slowest fetches and ``window`` steps either side) thins
        a long run.  A report read back with :func:`traceml.load` has no
        worker batches to show.  Returns the path.

        Raises:
            TypeError: path is not a str or os.PathLike; max_steps or window
                not an int.
            ValueError: max_steps < 1 or window < 0.
            OSError: the file cannot be written.
        """
        from .trace import save_trace

        return save_trace(self, path, max_steps=max_steps, window=window)

    def save(self, path) -> str:
        """Write this report (summary and per-step arrays) to ``path``.

        The format, readable without traceml, is described in
        :mod:`traceml.result`: a zip with ``summary.json`` and one ``.npy`` per
        field of :attr:`steps`.  Returns the path.

        Raises:
            TypeError: path is not a str or os.PathLike.
            OSError: the file cannot be written.
        """
        return _write(self.to_dict(), self.steps, _path_arg(path, "Report.save()"))

    @classmethod
    def load(cls, path) -> "Report":
        """Read a run file written by :meth:`save` (``traceml.load``).

        Raises:
            TypeError: path is not a str or os.PathLike.
            FileNotFoundError: no such file.
            ValueError: the file is truncated, corrupt, or not a traceml run
                file; the message names the file.
        """
        return cls(*_read(_path_arg(path, "traceml.load()")))

    def plot(self):
        """A matplotlib Figure (no pyplot state): per-step input wait over
        steps (log scale) with stalls and epoch boundaries marked, and the
        input-wait histogram.  Raises ImportError without matplotlib."""
        from .plot import report_figure

        return report_figure(self.summary, self.steps)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Report):
            return NotImplemented
        return self.summary == other.summary and np.array_equal(self.steps, other.steps)

    __hash__ = None

    def __str__(self) -> str:
        from .render import report_text

        return report_text(self.summary)

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"<traceml.Report source={s['source']!r} steps={s['steps']} "
            f"diagnosis={s['diagnosis']}>"
        )

    def _repr_html_(self) -> str:
        from .plot import png_data_uri
        from .render import report_html

        return report_html(self.summary, png_data_uri(self.plot))


def _path_arg(path: Any, func: str) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{func}: path must be a str or os.PathLike, got {type(path).__name__}")
    return os.fspath(path)


def _write(summary: dict, steps: np.ndarray, path: str) -> str:
    """Write a run file (overwriting); returns the path."""
    header = {"format": FORMAT, "format_version": FORMAT_VERSION, "summary": summary}
    try:
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
            z.writestr("summary.json", json.dumps(header, indent=1))
            for field in steps.dtype.names:
                buf = io.BytesIO()
                np.lib.format.write_array(buf, np.ascontiguousarray(steps[field]),
                                          allow_pickle=False)
                z.writestr(f"{field}.npy", buf.getvalue())
    except OSError as exc:
        # Same errno, so the same subclass (IsADirectoryError, ...).
        raise OSError(exc.errno, f"Report.save(): cannot write {path!r}: "
                                 f"{exc.strerror or exc}") from exc
    return path


def _read(path: str) -> tuple[dict, np.ndarray]:
    """(summary, steps) of a run file; errors as Report.load says."""
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
    _worker_id_keys(summary)
    return summary, steps


# Maps keyed by worker id (int in memory; JSON object keys are strings).
_WORKER_KEYED = (("attribution", "stall_workers"), ("workers", "cpu_ticks_by_worker"),
                 ("workers", "awaited", "workers"), ("production", "workers"))


def _worker_id_keys(summary: dict) -> None:
    """Give the maps keyed by worker id their int keys back after JSON;
    anything not shaped as expected is left as it is."""
    for path in _WORKER_KEYED:
        parent = summary
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if not isinstance(parent, dict):
            continue
        m = parent.get(path[-1])
        if isinstance(m, dict) and all(isinstance(k, str) and k.isdigit() for k in m):
            parent[path[-1]] = {int(k): v for k, v in m.items()}

