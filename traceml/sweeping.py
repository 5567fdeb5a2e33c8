"""traceml.sweep(): the cheap experiment, built in.

Each condition builds a fresh DataLoader, iterates a few batches with an
artificial consumer (a sleep instead of model compute), and is recorded as
its own run, so that one call answers "does the stall cadence follow
num_workers?" or "does in_order=False change it?".  This module holds the
workflow and the SweepResult data; its rules, thresholds and sentences are
in :mod:`traceml.findings.sweeps`, tables in :mod:`traceml.render`, and
it never touches C internals beyond snapshotting its own records.
"""

from __future__ import annotations

import collections.abc
import gc
import inspect
import itertools
import math
import numbers
import sys
import time
import warnings
from typing import Any, Callable, Optional, Sequence

import numpy as np

from . import predict, render, torch_private
from .findings import comparison, input_bound, stall_timing, sweeps
from .comparing import _stalls_over, verdict
from .recorder import Recorder
from .build import Report, _check_threshold
from .result import summary_of

# compare() verdicts under which a forward/backward pair does not differ:
# EQUIVALENT, and NO-DATA (a side without steady-state steps).
_SAME = frozenset((comparison.EQUIVALENT, input_bound.NO_DATA))
# (MIXED, some measures better and some worse, is a difference too.)


def _shutdown(loader: Any) -> None:
    """Stop a DataLoader's worker processes now.  A non-persistent
    iterator's workers stop when the iterator is released; persistent ones
    live in the loader's private ``_iterator`` until shut down."""
    torch_private.shutdown_workers(loader)


class SweepResult:
    """What a sweep measured.

    Attributes:
        rows: one dict per condition and pass: ``condition`` (the keyword
            arguments given to make_loader), ``pass_``, ``direction``
            ("forward"/"backward"), ``mean_s``, ``median_s``, ``p95_s`` (input
            wait, s), ``stalls``, ``median_gap``, ``period`` (the
            report's), ``temporal`` (its label: EVERY-FETCH rows count as
            one stall a step in the correlation),
            ``multiple_fraction`` (share of stall gaps that are multiples of
            max(1, num_workers)), ``input_share``, ``diagnosis``, ``shape``,
            ``overtaking`` (deliveries that overtook a lower rank),
            ``slow_worker_cores``, ``slow_worker_runnable``, ``slow_read_bytes``,
            ``slow_major_faults`` (worker evidence during stalls: busy cores,
            cores' worth on a CPU or waiting for one, read_bytes, major
            faults; the main process's for a loader with num_workers=0,
            where the dataset runs; None where not read), ``error``
            (repr of an exception raised in that condition, else None),
            ``steps`` (batches actually iterated; fewer than
            ``steps_requested`` when the loader ran out),
            ``steps_requested`` (sweep()'s ``steps``),
            ``loader_num_workers`` (num_workers of the DataLoader that
            make_loader built, from the report's ``loader`` section; None
            for other iterables and failed conditions; differs from
            ``condition["num_workers"]`` when make_loader ignored it).
        runs: the Report of each row (None where the condition failed).
        correlation: see :func:`correlation`: whether the stall period
            follows max(1, num_workers) (the loader's own num_workers where
            known) over the rows with a period, with Pearson r, slope and
            intercept where 3 or more distinct num_workers have one; the
            rows left out are listed with the reason.
        interrupted: True when Ctrl-C stopped the sweep early.
        consumer: what each condition did with its batches:
            ``{"pace_s": s}`` (a sleep standing in for the step) or
            ``{"step_fn": name}`` (the user's step); None where not said.

    ``best()`` names the condition with the lowest mean fetch;
    ``order_effects()`` says where the forward and backward runs of one
    condition disagree; ``next_steps()`` gives the next step the numbers
    support (which condition to keep, or to repeat the sweep).
    """

    def __init__(self, rows: list[dict], runs: list[Optional[Report]], interrupted: bool,
                 consumer: Optional[dict] = None):
        self.rows = rows
        self.runs = runs
        self.interrupted = interrupted
        self.consumer = consumer
        self.correlation = correlation(rows)
        # The first run's model of num_workers against each run's wait.
        self.prediction = predict.against_runs(
            rows, [summary_of(rep).get("prediction") if rep is not None else None for rep in runs])

    def __repr__(self) -> str:
        c = self.correlation
        r = "-" if c["r"] is None else f"{c['r']:.3f}"
        return (f"<traceml.SweepResult rows={len(self.rows)} r={r} points={c['points']}"
                f"{' interrupted' if self.interrupted else ''}>")

    def to_dict(self) -> dict:
        return {
            "rows": [dict(r) for r in self.rows],
            "correlation": dict(self.correlation),
            "best": self.best(),
            "order_effects": self.order_effects(),
            "next": [[code, params] for code, params in self.next_steps()],
            "ignored_num_workers": [list(pair) for pair in self._ignored()],
            "prediction": self.prediction,
            "interrupted": self.interrupted,
            "consumer": dict(self.consumer) if self.consumer is not None else None,
        }

    def __str__(self) -> str:
        return render.sweep_text(self.to_dict())

    def _repr_html_(self) -> str:
        from .plot import png_data_uri

        return render.sweep_html(self.to_dict(), png_data_uri(self.plot))

    def _ignored(self) -> list[tuple]:
        """(condition's num_workers, loader's num_workers) for each
        distinct pair where make_loader built a DataLoader with another
        num_workers than the condition asked for, in row order."""
        out: list[tuple] = []
        for r in self.rows:
            built = r.get("loader_num_workers")
            asked = r["condition"].get("num_workers")
            if built is not None and asked is not None and built != asked \
                    and (asked, built) not in out:
                out.append((asked, built))
        return out

    def best(self) -> Optional[dict]:
        """The condition with the lowest mean fetch (averaged over passes
        and directions; per sample where the conditions' batch sizes
        differ, sweeps.by_sample): {condition, mean_s, close, per_sample}
        where ``close`` lists the other conditions within
        comparison.REL_TOL of it (compare's relative tolerance)."""
        means: dict[str, list] = {}
        conds: dict[str, dict] = {}
        for r in self.rows:
            if not r["error"] and r["mean_s"] is not None:
                key = sweeps.condition(r["condition"])
                means.setdefault(key, []).append(r["mean_s"])
                conds[key] = r["condition"]
        if not means:
            return None
        avg = {k: float(np.mean(v)) for k, v in means.items()}
        per_sample = sweeps.by_sample([(c or {}).get("batch_size") for c in conds.values()])
        if per_sample:
            avg = {k: v / conds[k]["batch_size"] for k, v in avg.items()}
        top = min(avg, key=avg.get)
        close = [k for k, v in avg.items() if k != top and v <= avg[top] * (1 + comparison.REL_TOL)]
        return {"condition": conds[top], "mean_s": avg[top], "close": close,
                "per_sample": per_sample}

    def next_steps(self) -> list[tuple[str, dict]]:
        """The next step the sweep's numbers support
        (:func:`traceml.findings.sweeps.sweep_next`), as (code, numbers) items: the
        condition to keep (the fewest workers among those within
        comparison.REL_TOL of the lowest mean fetch, or the best when it leads
        by more than that and than the order effect), or a repeat with
        passes=2 when its lead is within the order effect; and whether the
        kept condition is still input-bound.  Means are averaged over each
        condition's passes and directions (s); [] with fewer than 2
        conditions measured."""
        conds: dict[str, dict] = {}
        for r in self.rows:
            if r["error"] or r["mean_s"] is None:
                continue
            c = conds.setdefault(sweeps.condition(r["condition"]), {
                "name": sweeps.condition(r["condition"]), "workers": sweeps.row_workers(r),
                "batch_size": (r["condition"] or {}).get("batch_size"),
                "means": [], "shares": [], "steps": [], "diagnoses": [], "cores": [],
                "runnable": [], "parts": []})
            c["means"].append(r["mean_s"])
            if r.get("slow_worker_cores") is not None:
                c["cores"].append(r["slow_worker_cores"])
            if r.get("slow_worker_runnable") is not None:
                c["runnable"].append(r["slow_worker_runnable"])
            if r.get("diagnosis") is not None:
                c["diagnoses"].append(r["diagnosis"])
            if r.get("input_share") is not None:
                c["shares"].append(r["input_share"])
            if r.get("step_mean_s") is not None:
                c["steps"].append(r["step_mean_s"])
            if r.get("largest_part") is not None:
                c["parts"].append(r["largest_part"])
        summary = [{"name": c["name"], "workers": c["workers"], "batch_size": c["batch_size"],
                    "mean_s": float(np.mean(c["means"])),
                    "step_s": float(np.mean(c["steps"])) if c["steps"] else None,
                    "input_share": float(np.mean(c["shares"])) if c["shares"] else None,
                    # The label most of its rows read (ties: the first met).
                    "diagnosis": (max(c["diagnoses"], key=c["diagnoses"].count)
                                  if c["diagnoses"] else None),
                    # The cores its workers (at num_workers=0 the main
                    # process) kept busy in the slow intervals.
                    "worker_cores": float(np.mean(c["cores"])) if c["cores"] else None,
                    # And the cores' worth on a CPU or waiting for one.
                    "worker_runnable": (float(np.mean(c["runnable"])) if c["runnable"]
                                        else None),
                    # The largest measured part most of its rows read.
                    "largest_part": (max(c["parts"], key=c["parts"].count)
                                     if c["parts"] else None)}
                   for c in conds.values()]
        # Weighed per sample where the conditions are (sweeps.sweep_next).
        per_sample = sweeps.by_sample([c["batch_size"] for c in summary])
        spread = [abs(e["forward_mean_s"] - e["backward_mean_s"])
                  / ((e["condition"] or {})["batch_size"] if per_sample else 1)
                  for e in self.order_effects()
                  if e["differs"] and e["forward_mean_s"] is not None
                  and e["backward_mean_s"] is not None]
        measured = any(r["direction"] == "backward" for r in self.rows if not r["error"])
        passes = 1 + max((r["pass_"] for r in self.rows), default=0)
        return sweeps.sweep_next(summary, max(spread) if spread else None, measured, passes,
                                 by_step=bool((self.consumer or {}).get("step_fn")))

    def order_effects(self) -> list[dict]:
        """Each condition measured both forward and backward in one pass:
        {condition, pass_, forward_mean_s, backward_mean_s, verdict, differs,
        why}.

        ``verdict`` is compare()'s verdict of the backward run against the
        forward one (tolerance: comparison.REL_TOL of the forward mean fetch or
        comparison.STEP_TOL of its mean step, whichever is larger).  ``differs`` is False for
        EQUIVALENT and for NO-DATA (a side without steady-state steps:
        nothing to compare); True means that the order of
        the conditions moved the result beyond what compare() would call
        equivalent (warm page cache, workers of the previous condition
        still exiting, a host that got busier), so that differences
        between conditions of that size are not evidence.  An empty list
        when the sweep ran one direction.
        """
        pairs: dict[tuple, dict] = {}
        for row, rep in zip(self.rows, self.runs):
            if rep is not None:
                key = (sweeps.condition(row["condition"]), row["pass_"])
                pairs.setdefault(key, {})[row["direction"]] = (row, rep)
        out = []
        for (_, pass_), d in pairs.items():
            if "forward" not in d or "backward" not in d:
                continue
            (fwd, fwd_rep), (bwd, bwd_rep) = d["forward"], d["backward"]
            fs = summary_of(fwd_rep)
            thr = fs["stalls"]["threshold_s"] if fs["steady_steps"] else None
            stalls = ((None, None) if thr is None else
                      tuple((_stalls_over(r, thr)[0], summary_of(r)["steady_steps"])
                            for r in (fwd_rep, bwd_rep)))
            label, why = verdict(fs, summary_of(bwd_rep), *stalls)
            out.append({"condition": fwd["condition"], "pass_": pass_,
                        "forward_mean_s": fwd["mean_s"], "backward_mean_s": bwd["mean_s"],
                        "verdict": label, "differs": label not in _SAME, "why": why})
        return out

    def plot(self):
        """A matplotlib Figure: stall period against max(1, num_workers),
        num_workers being the loader's own where known (as in the
        correlation)."""
        from .plot import sweep_figure

        return sweep_figure([
            dict(r, condition=dict(r["condition"], num_workers=r["loader_num_workers"]))
            if r.get("loader_num_workers") is not None else r for r in self.rows])


def _left_out(row: dict) -> Optional[str]:
    """Why a row has no point in the correlation (None: it has one), as a
    code: "error", "no_num_workers", "few_stalls" (fewer than
    sweeps.MIN_STALLS_FOR_CADENCE), "every_fetch" (a stall on every fetch,
    EVERY-FETCH: no period, and what any input-bound loader shows at
    num_workers 0 or 1), "unsettled" (its stalls fit a period that its
    length cannot settle: UNSETTLED), "no_period" (its stalls keep no
    period: IRREGULAR)."""
    if row["error"]:
        return "error"
    if sweeps.row_workers(row) is None:
        return "no_num_workers"
    if row["stalls"] < sweeps.MIN_STALLS_FOR_CADENCE:
        return "few_stalls"
    if row.get("period") is None:
        if row.get("temporal") == stall_timing.EVERY_FETCH:
            return "every_fetch"
        if row.get("temporal") == stall_timing.UNSETTLED and row.get("consistent_period"):
            return "unsettled"
        return "no_period"
    return None


def correlation(rows: list[dict]) -> dict:
    """Whether the stall period follows max(1, num_workers), over the rows
    with a period (the report's period: the modal gap between stalls, or
    between bursts of back-to-back stalls where stalls come in pairs; never
    a median of gaps, which on a crowded host reads 2 for gaps 1, 3, 1, 3,
    a gap that never occurs) and a known num_workers (the DataLoader's own
    where known, else the condition's).  Rows without a period, a stall on
    every fetch included, are left out and named: they cannot follow
    anything.

    ``follows`` is True when the period equals max(1, num_workers) in every
    row used and those rows span at least sweeps.SWEEP_MIN_DISTINCT_WORKERS
    distinct num_workers; False when it differs in any row used; None
    otherwise (too few to tell).
    ``same_period`` is True when every row used has the same period over 2
    or more distinct num_workers (the period is set by the data), and no
    row at 0 or 1 workers stalled on every fetch where that period is not
    1: such a row is left out of the points (no gap to read) but its
    cadence is every fetch, so a period of 2 at 2 and 4 workers beside it
    is not one period everywhere.
    ``points`` counts the rows used, ``rows`` lists their [max(1, n),
    period], ``mismatched`` how many differ, ``left_out`` the others as
    {condition, pass_, direction, reason, stalls}; ``distinct_workers`` and
    ``gaps`` (stall gaps in the rows used) say how much it rests on.

    r, slope and intercept (least squares of the period on max(1, n)) are
    given only with SWEEP_MIN_DISTINCT_WORKERS or more distinct
    num_workers (through two values a line fits exactly, r = +-1 by
    construction), else None; r is None too when the period does not vary
    (slope then exactly 0.0, intercept that period)."""
    used, left = [], []
    # A row at 0 or 1 workers that stalled on every fetch: period 1.
    every_fetch_low = False
    for r in rows:
        why = _left_out(r)
        if why is None:
            used.append(r)
        else:
            every_fetch_low |= (why == "every_fetch"
                                and stall_timing.effective_workers(sweeps.row_workers(r)) == 1)
            left.append({"condition": r["condition"], "pass_": r["pass_"],
                         "direction": r["direction"], "reason": why,
                         "stalls": r["stalls"],
                         "consistent_period": r.get("consistent_period")})
    pts = [(stall_timing.effective_workers(sweeps.row_workers(r)), r["period"]) for r in used]
    distinct = len({p[0] for p in pts})
    out = {"r": None, "slope": None, "intercept": None, "points": len(pts),
           "distinct_workers": distinct,
           "gaps": int(sum(r["stalls"] - 1 for r in used)),
           "rows": [[int(x), int(y)] for x, y in pts], "left_out": left,
           "mismatched": int(sum(x != y for x, y in pts)),
           "follows": None, "same_period": None,
           # Whether the sweep itself ran more than one num_workers (the
           # rows that ran, with a known count): a line about num_workers
           # speaks only where it varied.
           "workers_varied": len({sweeps.row_workers(r) for r in rows
                                  if not r["error"] and sweeps.row_workers(r) is not None}) >= 2}
    out["pooled"] = sweeps.pooled_cadence([
        (stall_timing.effective_workers(sweeps.row_workers(r)), r.get("temporal"), r.get("period"),
         r.get("predicted")) for r in rows if not r["error"] and sweeps.row_workers(r) is not None])
    # Rows with 2 or more workers whose stalls one worker holds: a slow
    # worker's turn also comes every num_workers fetches, so "follows"
    # does not tell lock-step from it there.
    out["one_worker_rows"] = sum(1 for r in rows if not r["error"]
                                 and (sweeps.row_workers(r) or 0) >= 2
                                 and r.get("attribution") == "ONE-WORKER")
    out["rows_with_workers"] = sum(1 for r in rows if not r["error"] and (sweeps.row_workers(r) or 0) >= 2)
    if out["pooled"]["follows"] and not out["mismatched"]:
        out["follows"] = True
    if out["mismatched"]:
        # One settled row whose period is not max(1, num_workers) refutes
        # "the period follows num_workers", whatever the other rows show
        # (period 6 at 0 and 1 workers read "nothing to correlate").
        out["follows"] = False
    if distinct < 2:
        return out
    x = np.array([p[0] for p in pts], dtype=float)
    y = np.array([p[1] for p in pts], dtype=float)
    out["same_period"] = bool(np.ptp(y) == 0 and not (every_fetch_low and y[0] != 1))
    if out["mismatched"]:
        out["follows"] = False
    elif distinct >= sweeps.SWEEP_MIN_DISTINCT_WORKERS or out["follows"]:
        out["follows"] = True
    if distinct < sweeps.SWEEP_MIN_DISTINCT_WORKERS:
        return out
    if np.ptp(y) == 0:
        # polyfit leaves rounding residue (1e-16) here; the fit is exact.
        out["slope"], out["intercept"] = 0.0, float(y[0])
        return out
    slope, intercept = np.polyfit(x, y, 1)
    out["slope"], out["intercept"] = float(slope), float(intercept)
    out["r"] = float(np.corrcoef(x, y)[0, 1])
    return out


def _row(condition: dict, pass_: int, direction: str, rep: Optional[Report],
         error: Optional[str], steps: Optional[int] = None,
         steps_requested: Optional[int] = None) -> dict:
    row = {"condition": condition, "pass_": pass_, "direction": direction,
           "steps": steps, "steps_requested": steps_requested,
           "loader_num_workers": None,
           "mean_s": None, "median_s": None, "p95_s": None, "stalls": 0,
           "step_mean_s": None, "compute_mean_s": None,
           "median_gap": None, "period": None, "temporal": None, "predicted": None,
           "consistent_period": None,
           "multiple_fraction": None,
           "input_share": None, "diagnosis": None, "shape": None,
           "overtaking": None, "slow_worker_cores": None, "slow_worker_runnable": None,
           "slow_read_bytes": None,
           "slow_major_faults": None, "attribution": None, "largest_part": None,
           "error": error}
    if rep is not None:
        s = summary_of(rep)
        gap = s["stalls"]["median_gap"]
        row.update({
            "mean_s": s["input_wait_s"]["mean"],
            "median_s": s["input_wait_s"]["median"],
            "p95_s": s["input_wait_s"]["p95"],
            # What the loop paid per step, and its own work: workers that
            # take the model's cores show here, not in the fetch.
            "step_mean_s": (s.get("step_s") or {}).get("mean"),
            "compute_mean_s": (s.get("compute_s") or {}).get("mean"),
            "stalls": s["stalls"]["count"],
            "median_gap": None if gap is None or math.isnan(gap) else float(gap),
            # The report's period: per burst where stalls come in pairs.
            "period": (s.get("temporal") or {}).get("period"),
            "temporal": (s.get("temporal") or {}).get("label"),
            "consistent_period": (s.get("temporal") or {}).get("consistent_period"),
            # The row's own pre-stated cadence test, pooled by correlation().
            "predicted": (s.get("temporal") or {}).get("predicted"),
            "multiple_fraction": s["cadence"]["multiple_fraction"],
            "input_share": s["input_share"],
            "diagnosis": s["diagnosis"],
            "shape": s["shape"],
            # Which worker, round or samples the row's stalls follow.
            "attribution": (s.get("attribution") or {}).get("label"),
            # The largest measured part of the row's wait (wait_parts).
            "largest_part": ((s.get("wait_parts") or {}).get("largest") or {}).get("part"),
        })
        if s.get("delivery"):
            row["overtaking"] = s["delivery"]["overtaking"]
        row["loader_num_workers"] = (s.get("loader") or {}).get("num_workers")
        iv = (s.get("workers") or {}).get("intervals")
        if iv and iv["slow"]["count"]:
            slow = iv["slow"]
            if row["loader_num_workers"] == 0:
                # No workers: the dataset runs in the main process, whose
                # counters stand in (evidence._main_process_sentences).
                row["slow_worker_cores"] = slow.get("main_cores_busy")
                row["slow_worker_runnable"] = slow.get("main_cores_runnable")
                row["slow_read_bytes"] = slow.get("main_read_bytes")
                row["slow_major_faults"] = slow.get("main_major_faults")
            else:
                row["slow_worker_cores"] = slow.get("worker_cores_busy")
                row["slow_worker_runnable"] = slow.get("worker_cores_runnable")
                row["slow_read_bytes"] = slow.get("read_bytes")
                row["slow_major_faults"] = slow.get("major_faults")
    return row


def _progress(total: int, show: bool):
    """A tqdm bar when tqdm is installed, else a line per condition."""
    if not show:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="traceml.sweep", unit="condition")


# The most num_workers a sweep starts: each is a process; past this a
# condition is a typo, not an experiment.
MAX_NUM_WORKERS = 1024
# The sleep a batch that stands in for the model's step without step_fn:
# 10 ms, a short step for which a loader must keep up.
DEFAULT_PACE_S = 0.01

def sweep(
    make_loader: Callable[..., Any],
    *,
    num_workers: Sequence[int] = (4, 3, 2, 1, 0),
    steps: int = 16,
    consumer_pace_s: Optional[float] = None,
    step_fn: Optional[Callable[[Any], Any]] = None,
    passes: int = 1,
    both_directions: bool = True,
    stall_threshold_s: Optional[float] = None,
    progress: bool = True,
    **other_axes: Sequence[Any],
) -> SweepResult:
    """Measure a DataLoader under each condition of a grid.

    ``make_loader`` is called with keyword arguments only, one per axis
    (``make_loader(num_workers=4, in_order=True)``), so its parameters must
    carry those names (or it takes ``**kwargs``); its signature is checked
    before anything runs.  It must build a fresh DataLoader for each
    condition (any iterable is accepted, but only a DataLoader gives
    num_workers its meaning).  Every condition iterates ``steps`` batches with a
    ``consumer_pace_s`` sleep per batch standing in for model compute (a
    DataLoader-only control), or with ``step_fn(batch)``, the user's own
    training step, and is reported as its own run.  A sleep holds no core,
    so workers that take the model's cores show only with ``step_fn``;
    then the conditions are ranked by their mean step, not by their mean
    fetch (sweeps.sweep_next).  The grid is
    the product of ``num_workers`` and ``other_axes`` (for example
    ``in_order=(True, False)``, ``prefetch_factor=(2, 4)``,
    ``persistent_workers=(False, True)``), run forward then, with
    ``both_directions``, backward (4, 3, 2, 1, 0 then 0, 1, 2, 3, 4), so that order
    and cache effects show; ``passes`` repeats the whole.

    An exception inside a condition is recorded on its row and the sweep
    goes on; worker processes of a condition are shut down before the next
    starts; Ctrl-C stops the sweep and returns what was measured.  The
    user's own recording is left as it was.  Each row records the batches
    actually iterated (``steps``; a loader may run out first, and the table
    says so) and the num_workers of the DataLoader actually built
    (``loader_num_workers``): when make_loader ignores its num_workers
    argument the table says so, and the correlation uses the loaders' own
    num_workers rather than the condition's label.

    Args:
        make_loader: callable taking the conditions' keyword arguments.
        num_workers: worker counts to sweep (ints >= 0).
        steps: batches per condition (int >= 2).
        consumer_pace_s: seconds slept per batch in place of model compute
            (None: 0.01 s without ``step_fn``).
        step_fn: called with each batch in place of the sleep (the training
            step; an exception in it is recorded on its condition's row,
            as the loader's are), or None.
        passes: how many times the whole grid runs (int >= 1).
        both_directions: also run the grid backward (bool).
        stall_threshold_s: seconds above which a fetch is a stall, or None
            for stall_threshold.stall_threshold_ns's automatic rule; at most
            9e9 s (int64 nanoseconds).
        progress: show progress (bool): a tqdm bar when tqdm is installed,
            else a line per condition on stderr.
        other_axes: further keyword arguments of make_loader, each a
            sequence of values to sweep.

    Returns:
        A :class:`SweepResult` (``str()`` is a table; ``.correlation`` says
        whether the stall period follows max(1, num_workers), with Pearson
        r and slope where 3 or more distinct num_workers have a period;
        ``order_effects()`` compares each condition's forward and backward
        runs; ``next_steps()`` gives the next step the means support).

    Raises:
        TypeError: make_loader is not callable or its signature cannot take
            the conditions' keyword arguments; steps, passes or a
            num_workers value is not an int (bool is not a count);
            both_directions or progress is not a bool; the pace or
            threshold is not a number; step_fn is not callable; an axis
            is not a sequence.
        ValueError: steps < 2, passes < 1, both consumer_pace_s and step_fn
            given, a negative or non-finite pace,
            a negative, non-finite or too large (> 9e9 s)
            threshold, an empty axis or one that repeats a value, or a
            negative num_workers.
    """
    if not callable(make_loader):
        raise TypeError(f"sweep(): make_loader must be callable, got {type(make_loader).__name__}")
    for name, value, least in (("steps", steps, 2), ("passes", passes, 1)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"sweep(): {name} must be an int >= {least}, "
                            f"got {type(value).__name__}")
        if value < least:
            raise ValueError(f"sweep(): {name} must be an int >= {least}, got {value!r}")
    steps, passes = int(steps), int(passes)
    for name, value in (("both_directions", both_directions), ("progress", progress)):
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"sweep(): {name} must be True or False, "
                            f"got {type(value).__name__} {value!r}")
    if step_fn is not None and not callable(step_fn):
        raise TypeError(f"sweep(): step_fn must be callable or None, got {type(step_fn).__name__}")
    if step_fn is not None and consumer_pace_s is not None:
        raise ValueError("sweep(): give consumer_pace_s (a sleep standing in for the step) or "
                         "step_fn (the step itself), not both")
    if consumer_pace_s is None:
        consumer_pace_s = 0.0 if step_fn is not None else DEFAULT_PACE_S
    if isinstance(consumer_pace_s, bool) or not isinstance(consumer_pace_s, numbers.Real):
        raise TypeError("sweep(): consumer_pace_s must be a number of seconds, "
                        f"got {type(consumer_pace_s).__name__}")
    pace = float(consumer_pace_s)
    if not math.isfinite(pace) or pace < 0:
        raise ValueError(f"sweep(): consumer_pace_s must be finite and >= 0, got {consumer_pace_s!r}")
    threshold = _sweep_threshold(stall_threshold_s)
    axes = {}
    for name, values in {"num_workers": num_workers, **other_axes}.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, collections.abc.Iterable):
            raise TypeError(f"sweep(): {name} must be a sequence of values to sweep, "
                            f"got {type(values).__name__}")
        axes[name] = tuple(values)
    for name, values in axes.items():
        if not values:
            raise ValueError(f"sweep(): {name} needs at least one value")
        seen = []
        for v in values:
            try:
                repeated = v in seen
            except Exception:  # noqa: BLE001 - values without a plain ==
                repeated = False
            if repeated:
                raise ValueError(f"sweep(): {name} repeats {v!r}; use passes= to "
                                 "measure a condition again")
            seen.append(v)
    for w in axes["num_workers"]:
        if isinstance(w, (bool, np.bool_)) or not isinstance(w, numbers.Integral):
            raise TypeError(f"sweep(): num_workers must be ints >= 0, got {type(w).__name__} "
                            f"{w!r} in {axes['num_workers']!r}")
    if any(w < 0 or w > MAX_NUM_WORKERS for w in axes["num_workers"]):
        # Past it, torch starts that many processes and the sweep hangs
        # (num_workers=10**9 ran 5 minutes and printed nothing, helper 38D).
        raise ValueError(f"sweep(): num_workers must be ints from 0 to {MAX_NUM_WORKERS}, "
                         f"got {axes['num_workers']!r}")
    grid = [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]
    _check_signature(make_loader, grid[0])
    plan = []
    for p in range(passes):
        plan.extend((c, p, "forward") for c in grid)
        if both_directions:
            plan.extend((c, p, "backward") for c in reversed(grid))

    rows: list[dict] = []
    runs: list[Optional[Report]] = []
    bar = _progress(len(plan), progress)
    interrupted = False
    try:
        for i, (condition, p, direction) in enumerate(plan):
            rep, error, ran = _run_condition(
                make_loader, condition, steps, pace if step_fn is None else step_fn, threshold,
                f"sweep#{i} {sweeps.condition(condition)} pass {p} {direction}")
            rows.append(_row(condition, p, direction, rep, error, ran, steps))
            runs.append(rep)
            if bar is not None:
                bar.update(1)
            elif progress:
                print(sweeps.sweep_progress(i + 1, len(plan), rows[-1]), file=sys.stderr,
                      flush=True)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if bar is not None:
            bar.close()
    consumer = ({"step_fn": getattr(step_fn, "__qualname__", None) or repr(step_fn)}
                if step_fn is not None else {"pace_s": pace})
    return SweepResult(rows, runs, interrupted, consumer)


def _sweep_threshold(stall_threshold_s: Any) -> Optional[float]:
    """report()'s check of stall_threshold_s, in sweep()'s words."""
    try:
        return _check_threshold(stall_threshold_s)
    except (TypeError, ValueError) as exc:
        msg = str(exc).removeprefix("report(): ")
        raise type(exc)(f"sweep(): {msg}") from None


def _check_signature(make_loader: Callable[..., Any], condition: dict) -> None:
    """TypeError unless make_loader(**condition) binds.  Every condition
    has the same keywords, so the first stands for all.  Callables without
    a signature inspect can read (some builtins) are not checked."""
    try:
        sig = inspect.signature(make_loader)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(**condition)
    except TypeError as exc:
        wanted = ", ".join(f"{k}=..." for k in condition)
        raise TypeError(f"sweep(): make_loader must accept the keyword arguments {wanted}; "
                        f"got signature {sig} ({exc})") from None


def _run_condition(make_loader, condition, steps, consume, threshold, name):
    """Iterate one condition into a recorder of its own; (Report, None,
    batches) or (None, error repr, batches), ``batches`` being how many
    were iterated.  ``consume``: seconds to sleep a batch, or the step
    callable each batch is given to.  Nothing is written to the user's
    recorders."""
    rec = Recorder()
    loader = None
    it = None
    ran = 0
    try:
        with warnings.catch_warnings():
            # A sweep tries more workers than CPUs on purpose; the report's
            # host section says so when it happens.
            warnings.filterwarnings("ignore", message="This DataLoader will create",
                                    category=UserWarning)
            loader = make_loader(**condition)
            if loader is None:
                raise TypeError("make_loader returned None, not a loader")
            it = iter(rec.wrap(loader, name=name))
            for _ in range(steps):
                try:
                    batch = next(it)
                except StopIteration:
                    break
                ran += 1
                if callable(consume):
                    consume(batch)
                elif consume:
                    time.sleep(consume)
                del batch
        it.close()
        if rec.store_info()["steps"] == 0:
            return None, "the loader yielded no batch", ran
        return rec.report(threshold, source=name), None, ran
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - recorded on the row
        return None, f"{type(exc).__name__}: {exc}", ran
    finally:
        if it is not None:
            it.close()
        if loader is not None:
            _shutdown(loader)
        del it, loader
        gc.collect()
