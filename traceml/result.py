"""The Report: one run's summary and per-step arrays, in memory and on
disk.  Plain data and its views; it never measures or decides, and
drawing is delegated to :mod:`traceml.render` and :mod:`traceml.plot`.

A run file is a zip archive (``np.load`` opens it as an ``.npz``) holding:

* ``summary.json`` — UTF-8 JSON ``{"format": "traceml-run",
  "format_version": 3, "summary": <Report.to_dict()>}``, described by the
  JSON Schema ``traceml/run_schema.json`` (:func:`schema`), generated
  from the summary's types (:mod:`traceml.summary_types`,
  ``tools/gen_schema.py``).  From format
  3 the next steps, notes and worker evidence are kept as codes and
  numbers (``next_items``, ``note_items``, ``workers.evidence_items``:
  ``[code, numbers]`` lists) beside their words, and so are the rules
  behind the labels (``diagnosis_rule_item``, ``shape_rule_item``,
  ``stalls.rule_item``, ``gpu.rule_text_item``: one pair each);
  ``Report.load`` words them again (ITEM_WORDS, RULE_WORDS), so a saved
  run reads in the loading traceml's words;
* ``begin_ns.npy``, ``fetch_done_ns.npy``, ``end_ns.npy`` (int64,
  ``clock_ns()`` timestamps), ``epoch.npy`` (int32), ``source.npy`` and
  ``flags.npy`` (uint16) — the per-step arrays of ``Report.steps``, in NumPy's
  ``.npy`` format, all of length ``summary["steps"]``.

* ``delivery_ranks.npy``, ``delivery_workers.npy`` (int64, -1 for None;
  format 2) — ``summary["delivery"]["ranks"]`` and ``["workers"]``, one
  per step, taken out of ``summary.json`` (JSON of a long run's per-step
  lists cost seconds) and put back into the summary by ``Report.load``.
* ``gpu_wait_ns.npy``, ``gpu_step_ns.npy`` (int64, -1 where not read;
  only with a ``summary["gpu"]`` block) — ``Report.gpu_wait_ns`` and
  ``Report.gpu_step_ns``, each step's GPU-visible input wait and GPU step.
  Readers that do not know them skip them (format 2 unchanged).

``Report.save`` writes format 3 and stores every member uncompressed;
``Report.load`` reads formats 1 (the delivery lists inside
``summary.json``), 2 (sentences without their codes) and 3, stored or
deflated members, within the limits and checks it documents, and raises
:class:`RunFileError` on anything else.

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
import math
import os
import stat
import zipfile
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from . import _core

if TYPE_CHECKING:
    from .summary_types import Summary

FORMAT = "traceml-run"
FORMAT_VERSION = 3
# The versions Report.load reads: 1 kept the per-step delivery lists in
# summary.json; 2 kept the report's sentences only, as they were worded
# when it was built; 3 keeps each sentence's code and numbers beside them
# (ITEM_WORDS), worded again by the traceml that loads it.
READS_VERSIONS = (1, 2, 3)
# (where the items are, where their words go): each a path of keys into the
# summary.  From format 3, Report.load words the items with this traceml's
# findings families; the stored words are not read back (they stay where a
# code is not known here).
ITEM_WORDS = ((("next_items",), ("next",)), (("note_items",), ("notes",)),
              (("workers", "evidence_items"), ("workers", "evidence")))
# The same for the rules behind the labels, each one ``[code, numbers]``
# item worded as one sentence (absent from format 3 files saved before
# they were kept: their words stand).
RULE_WORDS = ((("diagnosis_rule_item",), ("diagnosis_rule",)),
              (("shape_rule_item",), ("shape_rule",)),
              (("stalls", "rule_item"), ("stalls", "rule")),
              (("gpu", "rule_text_item"), ("gpu", "rule_text")))
# Per-step lists of summary["delivery"] stored as int64 .npy members from
# format 2 (None as -1): (key, member).
DELIVERY_ARRAYS = (("ranks", "delivery_ranks.npy"), ("workers", "delivery_workers.npy"))
# Per-step GPU readings (traceml.gpu), with summary["gpu"]: (attribute, member).
GPU_ARRAYS = (("gpu_wait_ns", "gpu_wait_ns.npy"), ("gpu_step_ns", "gpu_step_ns.npy"))


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

    A DataLoader's per-step delivery record (``summary["delivery"]["ranks"]``
    and ``["workers"]``, one int or None a step) is held as two int64
    arrays (-1 for None) and made into lists on the first use of
    :attr:`summary`, ``report[key]`` or :meth:`to_dict`: on a 10M-step run
    the two lists cost about 0.8 s and 700 MB, which ``report()``, ``str()``,
    the HTML and :meth:`save` do not need.
    """

    def __init__(self, summary: dict, steps: np.ndarray,
                 delivery: Optional[dict] = None):
        # delivery: {"ranks": int64 array, "workers": int64 array}, -1 for
        # None, one per step; joined into summary["delivery"] as lists on
        # first use of .summary (see the class docstring).
        self._summary = summary
        self._delivery = (delivery if delivery is not None
                          and isinstance(summary.get("delivery"), dict) else None)
        self.steps = steps
        # The source's worker batch records (traceml.worker_timing), kept
        # in memory for save_trace(); not written by save().
        self.worker_batches: Optional[np.ndarray] = None
        self.worker_offsets: Optional[dict] = None
        # Their item records (each sample's and collate call's time,
        # ITEM_RECORD_DTYPE), for save_trace(); not written by save().
        self.worker_items: Optional[np.ndarray] = None
        # Per worker batch record index, the commonest innermost function
        # of its sampled stacks (traceml.stacks.top_of_batches), for
        # save_trace(); not written by save().
        self.batch_top: Optional[dict] = None
        # The sampler's readings of the run's processes (SAMPLE_DTYPE), for
        # save_trace()'s counter tracks; not written by save().
        self.samples: Optional[np.ndarray] = None
        # Each step's GPU-visible input wait and GPU step (int64 ns, -1
        # where not read; shape (steps,)) when cuda was on (traceml.gpu);
        # summary["gpu"] holds their statistics.  Written by save().
        self.gpu_wait_ns: Optional[np.ndarray] = None
        self.gpu_step_ns: Optional[np.ndarray] = None
        # A report gathered over many ranks (traceml.ranks.combine): {rank:
        # that rank's records}; in memory only, not written by save().
        self.rank_steps: Optional[dict] = None

    @property
    def summary(self) -> Summary:
        """The dict :meth:`to_dict` returns (not a copy: changes show in
        the text, the HTML and :meth:`save`)."""
        if self._delivery is not None:
            _join_delivery(self._summary, self._delivery)
            self._delivery = None
        return self._summary

    @summary.setter
    def summary(self, value: dict) -> None:
        self._summary = value
        self._delivery = None

    def delivery_column(self, key: str) -> Optional[np.ndarray]:
        """``summary["delivery"][key]`` (``"ranks"`` or ``"workers"``) as an
        int64 array, -1 for None, shape (steps,), without making the lists;
        None when the report has no such record.  Raises ValueError for
        another key."""
        if key not in ("ranks", "workers"):
            raise ValueError(f"delivery_column(): key must be 'ranks' or 'workers', got {key!r}")
        if self._delivery is not None:
            return self._delivery[key]
        values = (self._summary.get("delivery") or {}).get(key)
        if values is None:
            return None
        return np.array([-1 if v is None else v for v in values], dtype=np.int64)

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
        return self._summary["diagnosis"]

    def __getitem__(self, key: str) -> Any:
        return (self.summary if key == "delivery" else self._summary)[key]

    def to_dict(self) -> Summary:
        """The summary as plain JSON-serialisable data (a deep copy), of
        the type :class:`traceml.summary_types.Summary`: every key with
        its type and range (``traceml/run_schema.json`` is generated from
        those types).

        Keys: version, source, sources, steps, steady_steps, epochs,
        wall_s, dropped_steps, out_of_memory, misuse, input_wait_s,
        compute_s, step_s ({mean, median, p90, p95, p99, max, total}, s),
        input_share, diagnosis, diagnosis_rule, shape, shape_rule,
        temporal, concentration, stalls, cadence, trend, epoch_start,
        loader, host, delivery, workers, stuck, headline, notes, next,
        note_items, next_items (the notes and next steps as ``[code,
        numbers]`` pairs, which a saved run keeps and words again on load).
        ``stalls`` holds ``count`` and ``outliers``; ``temporal`` (None
        without stalls) a ``label`` of PERIODIC, IRREGULAR, EVERY-FETCH or
        TOO-FEW with ``period`` and ``p_value``; ``trend`` (None, or
        RISING / FALLING with ``slope_ms_per_step``); ``headline`` a
        ``label`` of EPOCH-START, STUCK or STEADY with
        ``epoch_start_share`` and ``epoch_start_s_per_epoch``.  With
        ``cuda=`` on (:mod:`traceml.gpu`), ``gpu``: host wait and
        GPU-visible wait over the same steady steps (``host_wait_s``,
        ``gpu_wait_s``), ``gpu_step_s``, ``coverage``, ``skipped``,
        ``pending``, ``host_share``, ``gpu_share``, ``host_diagnosis``,
        the ``rule`` (gpu_wait.gpu_diagnosis) that may have changed
        ``diagnosis``, and ``utilisation``, NVML's GPU utilisation in input
        waits against the rest (evidence.gpu_utilisation; absent from run
        files saved before it was read); without it there is no ``gpu``
        key.  A report
        gathered over many ranks (:func:`traceml.gather`) also has
        ``ranks`` (see :func:`traceml.ranks.combine`), and its top level
        is the largest input wait across ranks at each step.
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
        with a prediction keeps_up_with_workers (only where the prediction
        is trusted), worker_cores_needed, and
        with GPU-visible waits (``cuda=``) gpu_wait_mean_s,
        gpu_wait_median_s, gpu_wait_p95_s, gpu_step_median_s,
        gpu_input_share, gpu_coverage, gpu_skipped, and where NVML read
        the GPU's utilisation gpu_util_wait_pct, gpu_util_rest_pct
        (percent, in input waits and in the rest of the steps).

        Raises:
            TypeError: prefix is not a str.
        """
        if not isinstance(prefix, str):
            raise TypeError(f"flat(): prefix must be a str, got {type(prefix).__name__}")
        s = self._summary
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
            # The model's answer only where its check trusts it (prediction_check.prediction_trust).
            "keeps_up_with_workers": (pred.get("keeps_up_with")
                                      if pred.get("trust", "trusted") == "trusted" else None),
            "worker_cores_needed": pred.get("worker_cores_needed"),
        }
        out.update(_gpu_flat(s))
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
        field of :attr:`steps`, all stored uncompressed (about 32 bytes a
        step).  Returns the path.

        Raises:
            TypeError: path is not a str or os.PathLike.
            OSError: the file cannot be written.
        """
        # The summary as it is (json.dumps copies nothing): to_dict()'s deep
        # copy costs seconds on the per-step lists of a long run.
        gpu = {member: getattr(self, attr) for attr, member in GPU_ARRAYS
               if getattr(self, attr, None) is not None}
        return _write(self._summary, self.steps, _path_arg(path, "Report.save()"),
                      self._delivery, gpu)

    @classmethod
    def load(cls, path, *, max_bytes: Optional[int] = None, max_member_bytes: Optional[int] = None,
             max_ratio: Optional[int] = None) -> "Report":
        """Read a run file written by :meth:`save` (``traceml.load``).

        Run files are untrusted input: the file must be a regular file (a
        FIFO, device or directory is refused without reading it); the zip's
        directory is checked before anything is decompressed; only the
        members named in :mod:`traceml.result` are read (others, path
        traversal included, are ignored); ``summary.json`` is checked
        against :func:`traceml.result.schema` (``traceml/run_schema.json``)
        and each array's dtype, shape and range before it is used.  Nothing
        in a file runs code: pickled arrays are refused.

        Args:
            path: a str or os.PathLike.
            max_bytes: the most bytes all members read may hold
                uncompressed (default ``MAX_BYTES``, 4 GiB: a 100M-step run
                holds 3.2 GB of arrays).
            max_member_bytes: the most any one member may hold uncompressed
                (default ``MAX_MEMBER_BYTES``, 1 GiB).
            max_ratio: the highest compression ratio allowed for a member
                over 1 MiB uncompressed (default ``MAX_RATIO``, 100:1;
                Report.save stores members uncompressed, 1:1).

        Raises:
            TypeError: path is not a str or os.PathLike, or a limit is not an int.
            ValueError: a limit is not positive.
            RunFileError (a ValueError): every failure to read the file --
                missing (then also a FileNotFoundError), not a regular file,
                over a limit, truncated or corrupt, not a traceml run file,
                another format version ("written by format version N, this
                traceml reads M"), or a key or array of the wrong type or
                range; the message names the file, and the member and key.
        """
        limits = {k: v for k, v in (("max_bytes", max_bytes),
                                    ("max_member_bytes", max_member_bytes),
                                    ("max_ratio", max_ratio)) if v is not None}
        summary, steps, delivery, gpu = _read(_path_arg(path, "traceml.load()"), **limits)
        rep = cls(summary, steps, delivery)
        for attr, member in GPU_ARRAYS:
            setattr(rep, attr, gpu.get(member))
        return rep

    def plot(self):
        """A matplotlib Figure (no pyplot state): per-step input wait over
        steps (log scale) with stalls and epoch boundaries marked, and the
        input-wait histogram.  Raises ImportError without matplotlib."""
        from .plot import report_figure

        return report_figure(self._summary, self.steps)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Report):
            return NotImplemented
        return self.summary == other.summary and np.array_equal(self.steps, other.steps)

    __hash__ = None

    def __str__(self) -> str:
        from .render import report_text

        return report_text(self._summary)

    def __repr__(self) -> str:
        s = self._summary
        return (
            f"<traceml.Report source={s['source']!r} steps={s['steps']} "
            f"diagnosis={s['diagnosis']}>"
        )

    def _repr_html_(self) -> str:
        from .plot import png_data_uri
        from .render import report_html

        return report_html(self._summary, png_data_uri(self.plot))


def _gpu_flat(s: dict) -> dict:
    """flat()'s GPU-visible numbers (traceml.gpu), none without a gpu block."""
    g = s.get("gpu")
    if not g:
        return {}
    wait, step = g.get("gpu_wait_s") or {}, g.get("gpu_step_s") or {}
    util = g.get("utilisation") or {}
    return {"gpu_wait_mean_s": wait.get("mean"), "gpu_wait_median_s": wait.get("median"),
            "gpu_wait_p95_s": wait.get("p95"), "gpu_step_median_s": step.get("median"),
            "gpu_input_share": g.get("gpu_share"), "gpu_coverage": g.get("coverage"),
            "gpu_skipped": g.get("skipped"),
            # NVML's utilisation (%) in input waits and in the rest of the
            # steps (absent from run files saved before it was read).
            "gpu_util_wait_pct": (util.get("slow") or {}).get("mean_pct"),
            "gpu_util_rest_pct": (util.get("fast") or {}).get("mean_pct")}


def summary_of(report: "Report") -> dict:
    """``report.summary`` without making its per-step delivery lists (see
    :class:`Report`): for traceml's own readers, none of which reads them."""
    return report._summary


def _path_arg(path: Any, func: str) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{func}: path must be a str or os.PathLike, got {type(path).__name__}")
    return os.fspath(path)


# --- writing -------------------------------------------------------------------------

def _write(summary: dict, steps: np.ndarray, path: str,
           delivery: Optional[dict] = None, gpu: Optional[dict] = None) -> str:
    """Write a run file (overwriting); returns the path.

    Every member is stored uncompressed: the per-step arrays of a long run
    hardly compress (nanosecond timestamps), deflating them cost 20 s for
    10M steps, and stored members make the reader's ratio check trivial.
    Each array goes from its strided field of ``steps`` into the zip stream
    in 16 MiB pieces (``np.lib.format.write_array``), with no whole copy.
    ``delivery``: the Report's delivery arrays not yet joined into
    ``summary`` (written as they are), else they are taken out of it;
    ``gpu``: {member: int64 array} of GPU_ARRAYS, written with a
    ``summary["gpu"]`` block only."""
    if delivery is not None:
        delivery = {member: delivery[key] for key, member in DELIVERY_ARRAYS}
    else:
        summary, delivery = _split_delivery(summary, len(steps))
    header = {"format": FORMAT, "format_version": FORMAT_VERSION, "summary": summary}
    try:
        text = json.dumps(header, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except ValueError as exc:  # a NaN or infinity: a bug of the report, said plainly
        raise ValueError(f"Report.save(): the summary holds a number JSON cannot carry "
                         f"({exc}); not written") from exc
    try:
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
            z.writestr("summary.json", text)
            for field in steps.dtype.names:
                column = steps[field]
                info = zipfile.ZipInfo(f"{field}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_STORED
                # Sized in advance so that zipfile picks ZIP64 when it must.
                info.file_size = column.nbytes + 128
                with z.open(info, "w") as out:
                    np.lib.format.write_array(out, column, allow_pickle=False)
            extra = dict(delivery)
            if summary.get("gpu"):
                extra.update({m: c for m, c in (gpu or {}).items() if len(c) == len(steps)})
            for member, column in extra.items():
                column = np.asarray(column, dtype=np.int64)
                with z.open(member, "w", force_zip64=column.nbytes > 2**30) as out:
                    np.lib.format.write_array(out, column, allow_pickle=False)
    except OSError as exc:
        # Same errno, so the same subclass (IsADirectoryError, ...).
        raise OSError(exc.errno, f"Report.save(): cannot write {path!r}: "
                                 f"{exc.strerror or exc}") from exc
    return path


def _split_delivery(summary: dict, count: int) -> tuple[dict, dict]:
    """(the summary without the per-step delivery lists, {member: int64
    array}).  Lists that are not one int or None per step stay in the
    summary (hand-made summaries)."""
    dlv = summary.get("delivery")
    if not isinstance(dlv, dict):
        return summary, {}
    arrays = {}
    for key, member in DELIVERY_ARRAYS:
        values = dlv.get(key)
        if values is None or len(values) != count:
            continue
        if isinstance(values, list) and values.count(None) == count:
            arrays[member] = np.full(count, -1, np.int64)  # workers of num_workers=0
            continue
        try:
            arr = np.array(values)  # ints alone: int64, the fast path
        except (TypeError, ValueError, OverflowError):
            continue
        if arr.dtype != np.int64:
            # None among ints (an object array): through float64, None as
            # NaN; anything but whole numbers up to 2**53 stays in the JSON.
            if arr.dtype != object:
                continue
            try:
                as_float = np.array(values, dtype=np.float64)
            except (TypeError, ValueError):
                continue
            known = ~np.isnan(as_float)
            whole = as_float[known]
            if np.abs(whole).max(initial=0) > 2**53 or (whole != np.floor(whole)).any():
                continue
            arr = np.where(known, np.nan_to_num(as_float), -1).astype(np.int64)
        if arr.ndim != 1 or (arr < -1).any():
            continue
        arrays[member] = arr
    if not arrays:
        return summary, {}
    keys = {k for k, m in DELIVERY_ARRAYS if m in arrays}
    summary = dict(summary, delivery={k: v for k, v in dlv.items() if k not in keys})
    return summary, arrays


def _join_delivery(summary: dict, arrays: dict) -> None:
    """Put the delivery arrays ({key: int64 array}) into the summary as
    lists (None for -1)."""
    for key, _ in DELIVERY_ARRAYS:
        arr = arrays.get(key)
        if arr is None:
            continue
        if arr.min(initial=0) >= 0:
            summary["delivery"][key] = arr.tolist()
        elif arr.max(initial=-1) < 0:
            summary["delivery"][key] = [None] * len(arr)
        else:
            values = arr.astype(object)
            values[arr < 0] = None
            summary["delivery"][key] = values.tolist()


# --- reading: limits, errors ------------------------------------------------------------

# Defaults of Report.load's limits.  A run of 100M steps holds 3.2 GB of
# per-step arrays (32 B a step, the store's record), the largest member
# 800 MB (an int64 column); the summary of such a run is far smaller.
MAX_BYTES = 4 * 2**30         # all members read, uncompressed
MAX_MEMBER_BYTES = 2**30      # any one member, uncompressed
# Deflate cannot exceed 1032:1; the runs Report.save writes are stored
# (1:1), and the summaries older versions deflated compressed about 3:1
# (2.6-3.4 over the diagnostic corpus).  Checked on members above
# RATIO_FREE_BYTES only, so that small members never trip it; an old
# long run whose summary holds long lists of nulls may need max_ratio
# raised (the error says so).
MAX_RATIO = 100
RATIO_FREE_BYTES = 2**20
# summary.json nests 5 deep (the header included); deeper is refused
# before json.loads (which raises RecursionError near 1000 levels, and
# Report.to_dict()'s copy.deepcopy between 400 and 500 here).
MAX_JSON_DEPTH = 32
# Timestamps are CLOCK_MONOTONIC ns (non-negative); at most 2**62 so that
# the difference of any two stays inside int64.
MAX_TIMESTAMP_NS = 2**62


class RunFileError(ValueError):
    """A run file that cannot be read: missing, not a regular file, over
    a size limit, truncated or corrupt, not a traceml run file, of another
    format version, or holding a key or array of the wrong type or range.

    The message names the file, and the zip member and the key where one is
    to blame; the same are in ``path``, ``member`` and ``key`` (None where
    not known).  A file that does not exist raises a RunFileError that is
    also a FileNotFoundError."""

    path: Optional[str] = None
    member: Optional[str] = None
    key: Optional[str] = None


class _MissingRunFile(RunFileError, FileNotFoundError):
    """RunFileError for a path that does not exist (also a FileNotFoundError)."""


def _error(path: str, problem: str, member: Optional[str] = None,
           key: Optional[str] = None, cls: type = RunFileError) -> RunFileError:
    where = "".join((f"traceml.load(): {path}", f": {member}" if member else "",
                     f": key {key}" if key else ""))
    exc = cls(f"{where}: {problem}")
    exc.path, exc.member, exc.key = path, member, key
    return exc


def _check_limit(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"traceml.load(): {name} must be an int, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"traceml.load(): {name} must be > 0, got {value!r}")
    return value


# --- reading ---------------------------------------------------------------------------

SUMMARY = "summary.json"


def _read(path: str, max_bytes: int = MAX_BYTES, max_member_bytes: int = MAX_MEMBER_BYTES,
          max_ratio: int = MAX_RATIO) -> tuple[dict, np.ndarray, Optional[dict], dict]:
    """(summary, steps, delivery arrays or None: see Report, {GPU_ARRAYS
    member: int64 array}) of a run file; errors as Report.load says."""
    limits = (_check_limit("max_bytes", max_bytes),
              _check_limit("max_member_bytes", max_member_bytes),
              _check_limit("max_ratio", max_ratio))
    with _open_regular(path) as fh:
        try:
            with zipfile.ZipFile(fh) as z:
                members = _members(z, path, *limits)
                summary, version = _summary(_member_bytes(z, members[SUMMARY], path), path)
                count = summary["steps"]
                record = _core.RECORD_DTYPE
                for field in record.names:
                    name = f"{field}.npy"
                    if name not in members:
                        raise _error(path, f"run file lacks the {field!r} array")
                    # Before allocating for the count: each array must hold it.
                    if members[name].file_size < count * record[field].itemsize:
                        raise _error(path, f"too small for the summary's {count} steps "
                                           f"({members[name].file_size} bytes)", name)
                steps = np.zeros(count, dtype=record)
                for field in record.names:
                    name = f"{field}.npy"
                    _fill(steps, field, _member_bytes(z, members[name], path), path, name)
                delivery = {}
                if version >= 2 and summary.get("delivery"):
                    for key, name in DELIVERY_ARRAYS:
                        if name in members and key not in summary["delivery"]:
                            delivery[key] = _delivery_array(
                                _member_bytes(z, members[name], path), count, path, name)
                gpu = {}
                if summary.get("gpu"):
                    for _, name in GPU_ARRAYS:
                        if name in members:
                            gpu[name] = _delivery_array(
                                _member_bytes(z, members[name], path), count, path, name)
        except RunFileError:
            raise
        except Exception as exc:  # whatever the zip layer raises on bad input
            raise _error(path, f"not a readable traceml run file "
                               f"({type(exc).__name__}: {exc})") from exc
    _worker_id_keys(summary)
    # Both columns, or neither: one alone is joined into the summary now.
    if len(delivery) == len(DELIVERY_ARRAYS):
        return summary, steps, delivery, gpu
    _join_delivery(summary, delivery)
    return summary, steps, None, gpu


def _open_regular(path: str):
    """The file opened for binary reading, once it is known to be a regular
    file: a FIFO, device or directory is refused before any read (the open
    itself is non-blocking, so a FIFO without a writer cannot hang it)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise _error(path, "no such file", cls=_MissingRunFile) from None
    except OSError as exc:
        raise _error(path, f"not a readable traceml run file "
                           f"(cannot open: {exc.strerror or exc})") from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                    else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                    else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
            raise _error(path, f"not a readable traceml run file ({kind}, not a "
                               "regular file)")
        if hasattr(os, "O_NONBLOCK"):  # back to blocking reads, as for any file
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _members(z: zipfile.ZipFile, path: str, max_bytes: int, max_member_bytes: int,
             max_ratio: int) -> dict:
    """The ZipInfo of each member traceml reads, checked from the zip's
    central directory before anything is decompressed.  Other members
    (unknown names, path traversal, directories) are ignored unread."""
    wanted = {SUMMARY, *(f"{f}.npy" for f in _core.RECORD_DTYPE.names),
              *(m for _, m in DELIVERY_ARRAYS), *(m for _, m in GPU_ARRAYS)}
    found = {i.filename: i for i in z.infolist() if i.filename in wanted}
    if SUMMARY not in found:
        raise _error(path, "not a traceml run file (no summary.json inside)")
    total = 0
    for name, info in found.items():
        if info.flag_bits & 0x1:
            raise _error(path, "encrypted; traceml reads unencrypted run files", name)
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            method = {zipfile.ZIP_BZIP2: "bzip2", zipfile.ZIP_LZMA: "lzma"}.get(
                info.compress_type, f"method {info.compress_type}")
            raise _error(path, f"compressed with {method}; traceml reads stored or "
                               "deflated members (what Report.save and np.savez write)", name)
        size = info.file_size
        if size > max_member_bytes:
            raise _error(path, f"declares {size} bytes uncompressed, over "
                               f"max_member_bytes={max_member_bytes} (raise it to read "
                               "a larger run)", name)
        ratio = size / max(info.compress_size, 1)
        if size > RATIO_FREE_BYTES and ratio > max_ratio:
            raise _error(path, f"declares a compression ratio of {ratio:.0f}:1, over "
                               f"max_ratio={max_ratio} (a zip bomb, or raise it)", name)
        total += size
    if total > max_bytes:
        raise _error(path, f"its members declare {total} bytes uncompressed, over "
                           f"max_bytes={max_bytes} (raise it to read a larger run)")
    return found


def _member_bytes(z: zipfile.ZipFile, info: zipfile.ZipInfo, path: str) -> bytes:
    """A member's data, never more than its declared size: one bounded read
    (zipfile inflates at most the bytes asked for, and checks the CRC)."""
    try:
        with z.open(info) as f:
            data = f.read(info.file_size) if info.file_size else b""
            if f.read(1):
                raise _error(path, "holds more data than its declared size", info.filename)
    except RunFileError:
        raise
    except Exception as exc:  # BadZipFile, zlib.error, EOFError, OSError ...
        raise _error(path, f"damaged ({type(exc).__name__}: {exc})", info.filename) from exc
    if len(data) != info.file_size:
        raise _error(path, f"truncated ({len(data)} of {info.file_size} bytes)", info.filename)
    return data


# JSON bytes that open (+1) and close (-1) a level.
_LEVEL = np.zeros(256, np.int8)
_LEVEL[[ord("["), ord("{")]] = 1
_LEVEL[[ord("]"), ord("}")]] = -1


def _json_depth(raw: bytes) -> int:
    """The deepest nesting of [ and { outside strings in JSON text, so that
    deep text never reaches the parser.  NumPy passes over the bytes find
    the brackets and the quotes; a quote counts unless an odd run of
    backslashes precedes it; a bracket is inside a string when an odd
    number of counted quotes precede it.  Costs a few passes over the text
    however many brackets and quotes it holds."""
    b = np.frombuffer(raw, np.uint8)
    level = _LEVEL[b]
    brackets = np.flatnonzero(level)
    if not len(brackets):
        return 0
    quotes = np.flatnonzero(b == 0x22)
    escaped = quotes[(quotes > 0) & (b[np.maximum(quotes - 1, 0)] == 0x5C)]
    if len(escaped):
        # Runs of backslashes: each quote's run ends just before it.
        back = np.flatnonzero(b == 0x5C)
        run_start = np.r_[True, np.diff(back) != 1]
        first = back[np.maximum.accumulate(np.where(run_start, np.arange(len(back)), 0))]
        at = np.searchsorted(back, escaped - 1)
        odd = (escaped - first[at]) % 2 == 1
        quotes = np.setdiff1d(quotes, escaped[odd], assume_unique=True)
    outside = np.searchsorted(quotes, brackets) % 2 == 0
    return max(0, int(np.cumsum(level[brackets[outside]], dtype=np.int64).max(initial=0)))


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


# One decoder for every load (json.loads with hooks builds a decoder and
# its C scanner per call).
_DECODER = json.JSONDecoder(parse_float=_finite_float, parse_constant=_no_constant)


def _summary(raw: bytes, path: str) -> tuple[dict, int]:
    """(the summary dict of summary.json, validated against the schema, and
    the format version it was written in)."""
    depth = _json_depth(raw)
    if depth > MAX_JSON_DEPTH:
        raise _error(path, f"nested {depth} deep, more than {MAX_JSON_DEPTH}", SUMMARY)
    try:
        header = _DECODER.decode(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _error(path, f"not valid JSON ({exc})", SUMMARY) from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise _error(path, f"not a traceml run file (format is not {FORMAT!r})", SUMMARY)
    version = header.get("format_version")
    if isinstance(version, bool) or version not in READS_VERSIONS:
        reads = ", ".join(str(v) for v in READS_VERSIONS[:-1]) + f" and {READS_VERSIONS[-1]}"
        raise _error(path, f"written by format version {version!r}, this traceml reads "
                           f"{reads}", SUMMARY, "format_version")
    _validate(header, path)
    summary = header["summary"]
    steps = summary["steps"]
    if summary["steady_steps"] > steps:
        raise _error(path, f"steady_steps {summary['steady_steps']} exceeds steps {steps}",
                     SUMMARY, "summary.steady_steps")
    for key in (("stalls", "steps"), ("stalls", "outlier_steps"), ("epoch_start", "steps")):
        index = summary[key[0]].get(key[1]) or []
        if index and max(index) >= steps:
            raise _error(path, f"holds step index {max(index)}, past the {steps} steps",
                         SUMMARY, "summary." + ".".join(key))
    _check_ranks(summary, path)
    if version >= 3:
        reword(summary)
    return summary, version


def reword(summary: dict) -> dict:
    """Word ``summary``'s stored items (ITEM_WORDS, RULE_WORDS) with this
    traceml's findings families, in place, and each gathered rank's
    (``ranks.per_rank``: its ``next_items`` and ``diagnosis_rule_item``);
    an item with a code no family words here keeps its stored words.
    Returns ``summary``."""
    _reword(summary, ITEM_WORDS, RULE_WORDS)
    for entry in (summary.get("ranks") or {}).get("per_rank") or []:
        if isinstance(entry, dict):
            _reword(entry, ITEM_WORDS[:1], RULE_WORDS[:1])
    return summary


def _reword(summary: dict, lists, singles) -> None:
    """:func:`reword` over one dict: ``lists`` as ITEM_WORDS (item lists),
    ``singles`` as RULE_WORDS (one item each)."""
    from . import findings

    for (items_at, words_at), one in ([(at, False) for at in lists]
                                      + [(at, True) for at in singles]):
        holder = summary
        for key in items_at[:-1]:
            holder = holder.get(key) if isinstance(holder, dict) else None
        items = holder.get(items_at[-1]) if isinstance(holder, dict) else None
        if not isinstance(items, list):
            continue
        try:
            words = findings.sentences([items] if one else items)
        except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError):
            continue    # a code or numbers of another version: the words stand
        holder[words_at[-1]] = words[0] if one else words


_VALIDATOR = None


def schema() -> dict:
    """The JSON Schema (Draft 2020-12) of summary.json in this format
    version, shipped as traceml/run_schema.json (generated from
    :mod:`traceml.summary_types` by tools/gen_schema.py)."""
    from importlib import resources

    return json.loads(resources.files(__package__).joinpath("run_schema.json")
                      .read_text(encoding="utf-8"))


def _validator():
    """A Draft 2020-12 validator of run_schema.json whose ``items`` checks
    a list of plain integers (or nulls) against a bare integer schema in
    one pass of builtins: per-step lists of a long run hold millions."""
    global _VALIDATOR
    if _VALIDATOR is None:
        import jsonschema

        base = jsonschema.Draft202012Validator
        plain_items = base.VALIDATORS["items"]

        def items(validator, sub, instance, sch):
            if (isinstance(instance, list) and isinstance(sub, dict)
                    and set(sub) <= {"type", "minimum", "maximum"}
                    and sub.get("type") in ("integer", ["integer", "null"])):
                kinds = set(map(type, instance))
                allowed = {int} | ({type(None)} if sub["type"] != "integer" else set())
                if kinds <= allowed:
                    values = (instance if type(None) not in kinds
                              else [x for x in instance if x is not None])
                    low, high = sub.get("minimum"), sub.get("maximum")
                    if not values or ((low is None or min(values) >= low)
                                      and (high is None or max(values) <= high)):
                        return
            yield from plain_items(validator, sub, instance, sch)

        cls = jsonschema.validators.extend(base, {"items": items})
        _VALIDATOR = cls(_inlined(schema()))
    return _VALIDATOR


def _inlined(sch: dict) -> dict:
    """The schema with each local ``{"$ref": "#/$defs/NAME"}`` replaced by
    that definition (run_schema.json has no recursive ones): validation
    then never goes through the reference resolver, whose lookups cost
    time and kept growing caches over thousands of loads."""
    defs = sch.get("$defs", {})

    def walk(node):
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/") and len(node) == 1:
                return walk(defs[ref[len("#/$defs/"):]])
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return {k: walk(v) for k, v in sch.items() if k != "$defs"}


def _validate(header: dict, path: str) -> None:
    error = next(iter(_validator().iter_errors(header)), None)
    if error is None:
        return
    best = _best(error)
    key = ".".join(str(p) for p in best.absolute_path) or "(top level)"
    raise _error(path, f"does not match the run file schema: {_short(best.message)}",
                 SUMMARY, key)


def _best(error):
    import jsonschema

    return jsonschema.exceptions.best_match([error])


def _short(message: str, limit: int = 200) -> str:
    return message if len(message) <= limit else message[:limit] + "..."


def _delivery_array(raw: bytes, count: int, path: str, member: str) -> np.ndarray:
    """A format-2 per-step member (delivery, GPU readings): int64-sized
    integers, shape (count,), each -1 (None, not read) or more."""
    column = np.zeros(count, dtype=[("v", np.int64)])
    _fill(column, "v", raw, path, member, low=-1)
    return column["v"]


def _fill(steps: np.ndarray, field: str, raw: bytes, path: str, member: str,
          low: Optional[int] = None) -> None:
    """Put one .npy member into ``steps[field]``, after checking its
    header (an integer dtype of the field's size, either byte order; no
    object, float or structured dtype; shape (len(steps),)), its length
    and its range; no cast before that."""
    target = steps.dtype[field]
    buf = io.BytesIO(raw)
    try:
        version = np.lib.format.read_magic(buf)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(buf)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(buf)
        else:
            raise ValueError(f"npy format version {version} is not read here")
    except Exception as exc:  # numpy raises ValueError, SyntaxError, ...
        raise _error(path, f"damaged array header ({type(exc).__name__}: {exc})",
                     member) from exc
    if dtype.hasobject:
        raise _error(path, "holds Python objects (a pickle); refused", member)
    if (dtype.names is not None or dtype.subdtype is not None or dtype.kind not in "iu"
            or dtype.itemsize != target.itemsize):
        raise _error(path, f"has dtype {dtype.str!r}; expected an integer dtype of "
                           f"{target.itemsize} bytes like {target.str!r}", member)
    count = len(steps)
    if shape != (count,):
        raise _error(path, f"has shape {shape}, expected ({count},) (the summary's steps)",
                     member)
    offset = buf.tell()
    if len(raw) - offset != count * dtype.itemsize:
        raise _error(path, f"holds {len(raw) - offset} data bytes, expected "
                           f"{count * dtype.itemsize}", member)
    arr = np.frombuffer(raw, dtype, count, offset)
    if low is not None:
        high = int(np.iinfo(target).max)
    elif field.endswith("_ns"):
        low, high = 0, MAX_TIMESTAMP_NS
    elif field == "epoch":
        low, high = 0, int(np.iinfo(target).max)
    else:
        low, high = int(np.iinfo(target).min), int(np.iinfo(target).max)
    if count:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < low or hi > high:
            raise _error(path, f"holds values from {lo} to {hi}, outside [{low}, {high}]",
                         member)
    steps[field] = arr


# Maps keyed by worker id (int in memory; JSON object keys are strings).
_WORKER_KEYED = (("attribution", "stall_workers"), ("attribution", "also_slow"),
                 ("workers", "cpu_ticks_by_worker"),
                 ("workers", "awaited", "workers"), ("production", "workers"),
                 ("production", "samples", "by_worker"))


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



# --- many ranks ---------------------------------------------------------------------

def _check_ranks(summary: dict, path: str) -> None:
    """A gathered report's ``ranks`` block (the schema checked its types):
    one ``held_by`` entry per aligned step, as many aligned steps as steps,
    and every rank named below ``world_size``."""
    r = summary.get("ranks")
    if not r:
        return
    if r["aligned_steps"] != summary["steps"] or len(r["held_by"]) != summary["steps"]:
        raise _error(path, f"holds {len(r['held_by'])} held_by entries and "
                           f"{r['aligned_steps']} aligned steps for {summary['steps']} steps",
                     SUMMARY, "summary.ranks")
    named = (list(r["gathered"]) + list(r["stragglers"])
             + [m["rank"] for m in r["missing"]] + [p["rank"] for p in r["per_rank"]]
             + [x for x in r["held_by"] if x is not None])
    if named and max(named) >= r["world_size"]:
        raise _error(path, f"names rank {max(named)} of a world of {r['world_size']}",
                     SUMMARY, "summary.ranks")
