"""Memory of the main process and the DataLoader workers over a run.

Numbers only (the rule is :func:`traceml.findings.worker_memory.memory_findings`, the
sentences :func:`traceml.findings.worker_memory.memory_line`).  The sampler reads each
watched process's resident set (RSS, ``/proc/PID/stat`` field 24) on every
round and, every ``configure(memory_period_s=...)`` (10 s by default, and
on the first round of a loop), its proportional (PSS) and unshared (USS:
Private_Clean + Private_Dirty) memory from ``/proc/PID/smaps_rollup``.

Why USS: a forked worker starts sharing every page with the main process.
Touching a Python object writes its reference count, which copies the page
into the worker (copy-on-write, here "copy-on-read").  RSS does not move
(the page was already mapped), USS grows by a page per touched page.  A
dataset held as a list of Python objects, read at random, makes each
worker's USS grow all epoch; the same data in a NumPy array does not.
"""

from __future__ import annotations

from typing import Optional

import numpy as np



def _readings(samples: np.ndarray, pid: int, t0: int, t1: int, field: str) -> np.ndarray:
    """(t_ns, value) rows of ``field`` for ``pid`` within [t0, t1], known
    values only."""
    sel = (samples["pid"] == pid) & (samples["t_ns"] >= t0) & (samples["t_ns"] <= t1)
    sel &= samples[field] >= 0
    return np.stack([samples["t_ns"][sel], samples[field][sel]]) if sel.any() else np.zeros((2, 0))


def _span(series: np.ndarray) -> Optional[dict]:
    """{first, last, max, growth, readings} of a (t, value) series; None
    when empty."""
    if series.shape[1] == 0:
        return None
    v = series[1]
    return {"first": int(v[0]), "last": int(v[-1]), "max": int(v.max()),
            "growth": int(v[-1] - v[0]), "readings": int(len(v))}


def summarise(samples: Optional[np.ndarray], steps: np.ndarray, facts: dict,
              main_pid: Optional[int]) -> dict:
    """The report's ``memory`` block.

    ``samples`` are the sampler's readings (SAMPLE_DTYPE; None: no
    sampler), ``steps`` the source's steps, ``facts`` its epoch facts
    (``worker_pids`` per epoch), ``main_pid`` the training process.

    Returns {available, unavailable, main: {rss, uss} spans over the run,
    epochs: [{epoch, main: {rss, uss}, workers: [{worker, pid, rss,
    uss}]}], worker_uss_growth: the median over workers and epochs of the
    unshared memory's growth within an epoch (bytes; None without two deep
    readings of any worker in an epoch), worker_rss_growth: the median of
    their resident memory's growth over the same spans (bytes, or None),
    epoch_jumps: [{epoch, rss_bytes}]
    of the main process between one epoch's last reading and the next's
    first}.  A span is {first, last, max, growth, readings} in bytes."""
    out: dict = {"available": False, "unavailable": None, "main": None, "epochs": [],
                 "worker_uss_growth": None, "worker_rss_growth": None, "epoch_jumps": []}
    if samples is None or len(samples) == 0 or len(steps) == 0:
        out["unavailable"] = "no sampler readings"
        return out
    if "rss_bytes" not in (samples.dtype.names or ()):
        out["unavailable"] = "this build's sampler reads no memory"
        return out
    t0, t1 = int(steps["begin_ns"].min()), int(steps["end_ns"].max())
    if main_pid is not None:
        out["main"] = {f: _span(_readings(samples, main_pid, t0, t1, f"{f}_bytes"))
                       for f in ("rss", "uss")}
    growths, rss_growths = [], []
    prev_last = None
    for e in np.unique(steps["epoch"]).tolist():
        sel = steps["epoch"] == e
        a, b = int(steps["begin_ns"][sel].min()), int(steps["end_ns"][sel].max())
        entry = {"epoch": int(e), "main": None, "workers": []}
        if main_pid is not None:
            rss = _readings(samples, main_pid, a, b, "rss_bytes")
            entry["main"] = {"rss": _span(rss),
                             "uss": _span(_readings(samples, main_pid, a, b, "uss_bytes"))}
            if rss.shape[1]:
                if prev_last is not None:
                    out["epoch_jumps"].append({"epoch": int(e),
                                               "rss_bytes": int(rss[1][0] - prev_last)})
                prev_last = rss[1][-1]
        pids = (facts.get(e) or facts.get(int(e)) or {}).get("worker_pids") or []
        for wid, pid in enumerate(pids):
            uss = _readings(samples, pid, a, b, "uss_bytes")
            entry["workers"].append({"worker": wid, "pid": int(pid),
                                     "rss": _span(_readings(samples, pid, a, b, "rss_bytes")),
                                     "uss": _span(uss)})
            if uss.shape[1] >= 2:
                growths.append(float(uss[1][-1] - uss[1][0]))
                # RSS over the same span: from the first USS reading's time
                # to the last's.
                rss = _readings(samples, pid, int(uss[0][0]), int(uss[0][-1]), "rss_bytes")
                if rss.shape[1] >= 2:
                    rss_growths.append(float(rss[1][-1] - rss[1][0]))
        out["epochs"].append(entry)
    out["available"] = out["main"] is not None or any(en["workers"] for en in out["epochs"])
    if not out["available"]:
        out["unavailable"] = "no reading of the run's processes"
    if growths:
        out["worker_uss_growth"] = float(np.median(growths))
    if rss_growths:
        out["worker_rss_growth"] = float(np.median(rss_growths))
    return out
