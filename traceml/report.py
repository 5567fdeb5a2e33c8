"""The Report: what was recorded, reduced to numbers and verdicts.

``traceml.report()`` snapshots the C store, reduces it with the C reducers,
applies the rules in :mod:`traceml.policy`, and returns a :class:`Report`:
plain data that renders itself as text (``str``), HTML (``_repr_html_``)
and a JSON-serialisable dict (``to_dict``), defined in :mod:`traceml.result`.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Optional, Union

import numpy as np

from . import _core, evidence, policy
from .result import Report
from .wrapping import by_name, sources

NS = 1e-9
QUANTILES = (50.0, 90.0, 95.0, 99.0)
STAT_KEYS = ("mean", "median", "p90", "p95", "p99", "max", "total")


def duration_stats_s(x_ns: np.ndarray) -> dict:
    """{mean, median, p90, p95, p99, max, total} in seconds (None if empty).

    mean/total/max come from the C ``summary``, the rest from the C
    ``percentiles`` (numpy.percentile's "linear" rule).
    """
    if len(x_ns) == 0:
        return {k: None for k in STAT_KEYS}
    s = _core.summary(x_ns)
    p50, p90, p95, p99 = _core.percentiles(x_ns, QUANTILES)
    return {
        "mean": s["mean"] * NS,
        "median": p50 * NS,
        "p90": p90 * NS,
        "p95": p95 * NS,
        "p99": p99 * NS,
        "max": s["max"] * NS,
        "total": s["sum"] * NS,
    }


def _check_threshold(stall_threshold_s: Any) -> Optional[float]:
    if stall_threshold_s is None:
        return None
    if isinstance(stall_threshold_s, bool) or not isinstance(
        stall_threshold_s, numbers.Real
    ):
        raise TypeError(
            "report(): stall_threshold_s must be a number of seconds or None, "
            f"got {type(stall_threshold_s).__name__}"
        )
    value = float(stall_threshold_s)
    if not math.isfinite(value) or value < 0:
        raise ValueError(
            "report(): stall_threshold_s must be finite and >= 0 seconds, "
            f"got {stall_threshold_s!r}"
        )
    if value > policy.MAX_THRESHOLD_S:
        raise ValueError(
            f"report(): stall_threshold_s must be at most {policy.MAX_THRESHOLD_S:g} s "
            f"(int64 nanoseconds), got {stall_threshold_s!r}"
        )
    return value


def _startup_steps(src, epoch: np.ndarray) -> np.ndarray:
    """Per step: how many leading steps of its epoch are start-up
    (max(1, num_workers) for a DataLoader, else 1)."""
    out = np.ones(len(epoch), dtype=np.int64)
    if src is None:
        return out
    for e in np.unique(epoch):
        loader = src.loader_of(e)
        out[epoch == e] = policy.effective_workers((loader or {}).get("num_workers")) or 1
    return out


def _pick_source(records: np.ndarray, source: Union[None, str, int]) -> int:
    known = sources()
    ids, counts = np.unique(records["source"], return_counts=True)
    if source is not None and (isinstance(source, bool)
                               or not isinstance(source, (str, int))):
        raise TypeError("report(): source must be a source name (str) or id (int), "
                        f"got {type(source).__name__}")
    if source is None:
        if len(ids) == 0:
            # Nothing recorded: a loader stuck on its very first fetch is
            # what there is to show, if the stuck watch has seen one.
            stuck = [ev for ev in _core.sampler_stuck() if ev["source"] in known]
            return int(max(stuck, key=lambda ev: ev["since_ns"])["source"]) if stuck else 0
        # The source with the most steps; the earliest wrapped on ties.
        return int(ids[np.argmax(counts)])
    if isinstance(source, str) and source in by_name():
        return by_name()[source].id
    if isinstance(source, int) and not isinstance(source, bool) and source in known:
        return source
    recorded = ["probes"] + [known[int(i)].name for i in ids if int(i) in known and i != 0]
    names = ", ".join(repr(n) for n in recorded)
    raise ValueError(f"report(): unknown source {source!r}; recorded: {names}")


def build(
    records: np.ndarray,
    info: dict,
    source_id: int,
    stall_threshold_s: Optional[float],
    *,
    delivery: Optional[tuple] = None,
    samples: Optional[np.ndarray] = None,
    sampler_info: Optional[dict] = None,
    stuck_events: Optional[list] = None,
) -> Report:
    """The Report of one source from a snapshot of the store (pure).

    ``delivery`` is ``(rank, worker)`` parallel to ``records`` (or None);
    ``samples``, ``sampler_info`` and ``stuck_events`` come from the
    sampler (None: no worker evidence)."""
    known = sources()
    src = known.get(source_id)
    selected = records["source"] == source_id
    steps = records[selected]
    if delivery is not None:
        delivery = (delivery[0][selected], delivery[1][selected])
    n = len(steps)
    wait = steps["fetch_done_ns"] - steps["begin_ns"]
    compute = steps["end_ns"] - steps["fetch_done_ns"]
    step = steps["end_ns"] - steps["begin_ns"]
    position = steps["flags"] >> _core.FLAG_POS_SHIFT
    first = policy.epoch_start_mask(position, _startup_steps(src, steps["epoch"]))
    if source_id == 0:
        first[:] = False
    steady = ~first
    epochs = np.unique(steps["epoch"])

    ids, counts = np.unique(records["source"], return_counts=True)
    all_sources = [
        {"name": known[int(i)].name if int(i) in known else str(int(i)),
         "steps": int(c)}
        for i, c in zip(ids, counts)
    ]
    loader = src.loader if src is not None else None

    total_step = int(step[steady].sum())
    input_share = (
        float(wait[steady].sum()) / total_step if total_step > 0 else None
    )
    diagnosis, diagnosis_rule = policy.diagnose(input_share)

    rule = policy.stall_threshold_ns(wait[steady], step[steady], stall_threshold_s)
    threshold_ns = rule.threshold_ns
    mask = _core.stall_mask(wait, threshold_ns) & steady
    gaps = _core.stall_gaps(mask, steps["epoch"])
    values, hist_counts = _core.gap_histogram(gaps)
    num_workers = loader.get("num_workers") if loader else None
    n_steady = int(steady.sum())
    temporal = policy.temporal_of(mask, steps["epoch"], wait[steady])
    period = temporal["period"] if temporal else None
    cad = policy.cadence(gaps, period, num_workers)
    median_gap = _core.percentiles(gaps, 50.0) if len(gaps) else None
    calm = wait[steady & ~mask]
    shape = policy.shape(int(mask.sum()), n_steady, rule.every_fetch_slow,
                         _core.percentiles(calm, 50.0) if len(calm) else None,
                         rule.floor_ns)

    notes = []
    if info["dropped_steps"]:
        notes.append(
            f"{info['dropped_steps']} steps were dropped: the step store could "
            "not grow (out of memory); statistics cover the recorded steps only"
        )
    if source_id == 0:
        misuse = {k: v for k, v in info["misuse"].items() if v}
        for key, count in misuse.items():
            probe = key.split("_without_")[0].split("_while_")[0].split("_repeated")[0]
            notes.append(f"probe misuse: {key} x{count} (see help(traceml.{probe}))")
        if info["probe_step_open"]:
            notes.append("a probe step is still open (step_end() not called); not counted")
    if n == 0 and source_id != 0:
        notes.append("no fetch of this source has returned yet")
    elif n == 0:
        notes.append(
            "no steps recorded: iterate traceml.wrap(loader) or call "
            "traceml.step_begin()/fetch_done()/step_end()"
        )
    elif int(steady.sum()) < policy.MIN_STEADY_STEPS:
        notes.append(
            f"only {int(steady.sum())} steady-state steps: too few for the "
            "shape of the input wait to mean much"
        )
    host = evidence.host(src) if src is not None and source_id != 0 else None
    if host and host["oversubscribed"]:
        notes.append(
            f"num_workers={host['num_workers']} exceeds the {host['usable_cpus']} usable "
            "CPUs: workers share cores, so absolute stall lengths depend on contention"
        )
    stuck = evidence.stuck(stuck_events or [], source_id, steps)
    for sid in sorted({ev["source"] for ev in stuck_events or []
                       if ev["source"] != source_id and not ev["ended_ns"]}):
        name = known[sid].name if sid in known else str(sid)
        notes.append(f"a fetch of {name!r} is stuck now: see report(source={name!r})")
    others = [s for s in all_sources if s["name"] != (src.name if src else None)]
    if others:
        listed = ", ".join(f"{o['name']!r} ({o['steps']} steps)" for o in others)
        notes.append(f"also recorded: {listed}; see report(source=name)")

    summary = {
        "version": 1,
        "source": src.name if src is not None else str(source_id),
        "sources": all_sources,
        "steps": n,
        "steady_steps": n_steady,
        "epochs": int(len(epochs)),
        "wall_s": (
            float(steps["end_ns"].max() - steps["begin_ns"].min()) * NS if n else 0.0
        ),
        "dropped_steps": int(info["dropped_steps"]),
        "out_of_memory": bool(info["out_of_memory"]),
        "misuse": dict(info["misuse"]) if source_id == 0 else {},
        "input_wait_s": duration_stats_s(wait[steady]),
        "compute_s": duration_stats_s(compute[steady]),
        "step_s": duration_stats_s(step[steady]),
        "input_share": input_share,
        "diagnosis": diagnosis,
        "diagnosis_rule": diagnosis_rule,
        "shape": shape[0] if shape else None,
        "shape_rule": shape[1] if shape else None,
        "temporal": temporal,
        "concentration": policy.concentration(wait[steady], mask[steady]),
        "stalls": {
            "threshold_s": threshold_ns * NS,
            "rule": rule.rule,
            "all_slow": rule.all_slow,
            "count": int(mask.sum()),
            "steps": [int(i) for i in np.flatnonzero(mask)],
            "gaps": [int(g) for g in gaps],
            "median_gap": median_gap,
            "modal_gap": _core.modal_gap(gaps),
            "gap_histogram": [[int(v), int(c)] for v, c in zip(values, hist_counts)],
        },
        "cadence": cad,
        "epoch_start": {
            "count": int(first.sum()),
            "steps": [int(i) for i in np.flatnonzero(first)],
            "input_wait_s": duration_stats_s(wait[first]),
        },
        "loader": dict(loader) if loader is not None else None,
        "host": host,
        "delivery": (evidence.delivery(steps, *(delivery or (None, None)), src)
                     if src is not None and source_id != 0 else None),
        "workers": (evidence.workers(src, steps, mask, steady, samples, sampler_info)
                    if samples is not None and sampler_info is not None and src is not None
                    and source_id != 0 else None),
        "stuck": stuck,
        "notes": notes,
    }
    from .render import fmt_s

    summary["next"] = policy.next_steps(summary, fmt_s)
    return Report(summary, steps)


def report(
    stall_threshold_s: Optional[float] = None,
    *,
    source: Union[None, str, int] = None,
) -> Report:
    """Reduce what has been recorded so far into a :class:`Report`.

    Args:
        stall_threshold_s: a fetch whose input wait exceeds this many
            seconds is a stall (``5`` reproduces the common "> 5 s stall"
            convention).  None (default): the automatic rule of
            :func:`traceml.policy.stall_threshold_ns`.
        source: which wrapped iterable to report, by name or id; None picks
            the one with the most steps (the probes are ``"probes"``).

    Statistics (input_wait_s, compute_s, step_s, input_share, stalls,
    cadence) cover steady-state steps.  The first max(1, num_workers)
    steps of each epoch of a DataLoader (the first step for other
    iterables) hold start-up, each worker's first batch carrying its process
    start, and are reported on their own under ``epoch_start``.

    Returns:
        A Report; with nothing recorded, one whose diagnosis is NO-DATA and
        whose text says so.

    Raises:
        TypeError: stall_threshold_s is not a real number, or source is
            neither a str nor an int.
        ValueError: stall_threshold_s is negative, NaN, infinite or over 9e9 s; or
            source names no known source.
        MemoryError: the step store could not grow and nothing was recorded.
    """
    threshold = _check_threshold(stall_threshold_s)
    info = _core.store_info()
    records = _core.snapshot()
    if info["out_of_memory"] and len(records) == 0:
        raise MemoryError(
            "traceml could not allocate its step store: "
            f"{info['dropped_steps']} steps were dropped and none recorded"
        )
    sid = _pick_source(records, source)
    return build_from_store(records, info, sid, threshold)


def build_from_store(records: np.ndarray, info: dict, source_id: int,
                     threshold: Optional[float], start: int = 0) -> Report:
    """build() with the delivery, sampler readings and stuck events the C
    core holds now; ``records`` is ``snapshot()[start:]``."""
    delivery = _core.snapshot_delivery()
    if delivery is not None:
        delivery = (delivery[0][start:start + len(records)],
                    delivery[1][start:start + len(records)])
    return build(records, info, source_id, threshold, delivery=delivery,
                 samples=_core.sampler_samples(), sampler_info=_core.sampler_info(),
                 stuck_events=_core.sampler_stuck())
