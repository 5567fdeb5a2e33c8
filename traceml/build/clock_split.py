"""The sampled fetch and step clocks taken apart: the loop thread's CPU
and run-queue wait inside fetches and compute, the workers making or
queued, the sampler's part; numbers only.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .. import evidence, wait_split, worker_timing
from ..findings import wait_trend
from . import common
from .common import NS


def clocked_in(pos: np.ndarray, mask: np.ndarray, read: np.ndarray) -> np.ndarray:
    """Which clock readings (shape (m,), bool) are of a step in ``mask`` (a
    mask over the source's steps; ``pos`` the readings' positions there,
    -1 another source's) and pass ``read`` (a mask over the readings)."""
    ok = (pos >= 0) & read
    ok[ok] = mask[pos[ok]]
    return ok


def clocked_making(steps: np.ndarray, clocks: Optional[tuple],
                   making_ns: Optional[np.ndarray], met: Optional[tuple],
                   delivery: Optional[tuple], samples: Optional[np.ndarray] = None,
                   facts: Optional[dict] = None) -> Optional[tuple]:
    """Per clock reading (parallel to ``clocks``' arrays), the ns of its
    fetch's wait during which the awaited worker was making batches
    (``making_ns`` at that step), the ns of those it waited for a core
    (worker_timing.queued_during), -1 unknown, and the ns its threads
    waited for a core while its made batch was in transit
    (evidence.transit_queued over the sampler's ``samples``; 0 unknown),
    and the ns of its made batch's transit (from the record's ``end_ns``
    to the fetch's end, inside the fetch) during which another worker made
    a batch on a CPU (worker_timing.others_on_cpu_during; -1 unknown);
    None without clocks or without ``making_ns``.  Only the clocked steps
    are weighed: the split reads no other."""
    if clocks is None or making_ns is None:
        return None
    pos = clocks[0]
    ok = pos >= 0
    at = pos[ok]
    making = np.full(len(pos), -1, dtype=np.int64)
    making[ok] = np.asarray(making_ns)[at]
    queued = np.full(len(pos), -1, dtype=np.int64)
    transit = np.zeros(len(pos), dtype=np.int64)
    behind = np.full(len(pos), -1, dtype=np.int64)
    if met is not None and delivery is not None and ok.any():
        worker = np.asarray(delivery[1])[at]
        queued[ok] = worker_timing.queued_during(
            met[0], steps["epoch"][at], worker, steps["begin_ns"][at],
            steps["fetch_done_ns"][at])
        per_step = evidence.transit_queued(samples, facts or {}, met[0], met[1],
                                           steps["begin_ns"], steps["fetch_done_ns"])
        if per_step is not None:
            transit[ok] = np.round(per_step[at]).astype(np.int64)
        j = met[1][at]
        made = np.where(j >= 0, met[0]["end_ns"][np.maximum(j, 0)], steps["fetch_done_ns"][at])
        behind[ok] = worker_timing.others_on_cpu_during(
            met[0], steps["epoch"][at], np.where(j >= 0, worker, -1),
            np.maximum(steps["begin_ns"][at], made), steps["fetch_done_ns"][at])
    return making, queued, transit, behind


def trend_host(steps: np.ndarray, w: common.Steady, trend: dict, run) -> Optional[list]:
    """[before, after]: other programs' CPU (cores, evidence.others_in_waits
    over one window each) on the two sides a trend compares: before and
    after a STEP's change, or its first and last tenths of the steady
    steps; None where the host was not read or the sides are not steps'."""
    if run.samples is None or run.sampler_info is None:
        return None
    idx = np.arange(len(steps)) if w.all else np.flatnonzero(w.steady)
    n = len(idx)
    k = trend.get("changed_at_step")
    if trend["label"] == wait_trend.STEP:
        if k is None or not 0 < k < n:
            return None
        sides = ((0, k), (k, n))
    else:
        tenth = max(1, n // 10)
        sides = ((0, tenth), (n - tenth, n))
    main, workers = evidence.job_pids(run.src, run.sampler_info, run.main_pid)
    host_t = run.samples["t_ns"][run.samples["pid"] == evidence.HOST_PID]
    if not len(host_t):
        return None
    cores = []
    for a, b in sides:
        start, end = steps["begin_ns"][idx[a]], steps["end_ns"][idx[b - 1]]
        # Only where the host's readings cover the side (CLOCKED_COVER of
        # it: the first reading comes a few ms after the first step, the
        # last before report()); steps recorded outside them (hand-made
        # records, a sampler started late) have no host figure.
        lo, hi = max(start, int(host_t.min())), min(end, int(host_t.max()))
        if end <= start or hi - lo < evidence.CLOCKED_COVER * (end - start):
            return None
        got = evidence.others_in_waits(run.samples, np.array([lo]), np.array([hi]),
                                       main, workers)
        if got is None or not got["wall_s"]:
            return None
        cores.append(got["others_cpu_s"] / got["wall_s"])
    return cores


def clocked_others_queued(steps: np.ndarray, clocks: Optional[tuple],
                          samples: Optional[np.ndarray], src,
                          sampler_info: Optional[dict],
                          main_pid: Optional[int]) -> Optional[np.ndarray]:
    """Per clock reading (parallel to ``clocks``' arrays, int64 ns; 0 for
    another source's), the main process's other threads' wait for a core
    inside its fetch (evidence.main_others_queued); None without clocks
    or readings of the main process."""
    if clocks is None or samples is None or sampler_info is None:
        return None
    main, _ = evidence.job_pids(src, sampler_info, main_pid)
    pos = clocks[0]
    ok = pos >= 0
    if main is None or not ok.any():
        return None
    at = pos[ok]
    begin, done, end = (steps[k][at] for k in ("begin_ns", "fetch_done_ns", "end_ns"))
    got = evidence.main_others_queued(samples, main, (begin, done, clocks[2][ok]),
                                      (done, end, clocks[4][ok]))
    if got is None:
        return None
    out = np.zeros(len(pos), dtype=np.int64)
    out[ok] = np.round(got).astype(np.int64)
    return out


def clocked_sampler(steps: np.ndarray, clocks: Optional[tuple],
                    sampler_items: Optional[np.ndarray]) -> Optional[tuple]:
    """Per clock reading (parallel to ``clocks``' arrays), the ns and the
    CPU ns the sampler's calls ``sampler_items`` spent inside its fetch's
    wait (worker_timing.sampler_in_waits; 0 for another source's
    readings); None without clocks or without timed calls.  Computed once
    for every split that reads it."""
    if clocks is None or sampler_items is None or not len(sampler_items):
        return None
    pos = clocks[0]
    ok = pos >= 0
    wall = np.zeros(len(pos), dtype=np.int64)
    cpu = np.zeros(len(pos), dtype=np.int64)
    at = pos[ok]
    wall[ok], cpu[ok] = worker_timing.sampler_in_waits(
        sampler_items, steps["begin_ns"][at], steps["fetch_done_ns"][at])
    return wall, cpu


def others_in_clocked(steps: np.ndarray, steady: np.ndarray,
                      clocks: Optional[tuple], samples: Optional[np.ndarray], src,
                      sampler_info: Optional[dict], main_pid: Optional[int],
                      bodies: bool = False) -> Optional[dict]:
    """evidence.others_in_waits, for the main process and the source's
    workers, over the clocked steady fetches' waits (the fetches the split
    reads), or with ``bodies`` over the steps' bodies whose clocks were
    read (from the batch in hand to the step's end: the compute the body
    split reads); None without clocks, readings or such steps."""
    if clocks is None or samples is None or sampler_info is None:
        return None
    ok = clocked_in(clocks[0], steady, clocks[3] >= 0 if bodies else True)
    if not ok.any():
        return None
    at = clocks[0][ok]
    main, workers = evidence.job_pids(src, sampler_info, main_pid)
    start, end = ("fetch_done_ns", "end_ns") if bodies else ("begin_ns", "fetch_done_ns")
    return evidence.others_in_waits(samples, steps[start][at], steps[end][at], main, workers)


def split_wait(steps: np.ndarray, mask: np.ndarray, clocks: Optional[tuple],
               clocked_making: Optional[tuple],
               host_share: Optional[float] = None,
               clocked_sampler: Optional[tuple] = None,
               others_queued: Optional[np.ndarray] = None) -> Optional[dict]:
    """wait_split.split over the clocked steps in ``mask`` (a mask over
    the source's steps); None without clocks or without such steps.
    ``clocked_making``: :func:`clocked_making`'s (None: no worker
    timing); ``host_share``: the share of the waits for a core that is
    other programs' (:func:`others_in_clocked`; None: not read);
    ``clocked_sampler``: :func:`clocked_sampler`'s (None: the sampler
    not timed), each fetch's ``sampler`` part; ``others_queued``:
    :func:`clocked_others_queued`'s (None: not read)."""
    if clocks is None:
        return None
    pos, cpu, runq = clocks[:3]
    ok = clocked_in(pos, mask, True)
    if not ok.any():
        return None
    at = pos[ok]
    wait = steps["fetch_done_ns"][at] - steps["begin_ns"][at]
    # The process's clock beside the thread's (others_cpu_ns), where read.
    others = clocks[5][ok] if len(clocks) > 5 else None
    sampler = (None if clocked_sampler is None
               else (clocked_sampler[0][ok], clocked_sampler[1][ok]))
    queued = None if others_queued is None else others_queued[ok]
    if clocked_making is None:
        return wait_split.split(wait, cpu[ok], runq[ok], host_share=host_share,
                                others_cpu_ns=others, sampler=sampler,
                                others_queued_ns=queued)
    return wait_split.split(wait, cpu[ok], runq[ok], clocked_making[0][ok],
                            clocked_making[1][ok], host_share, others, sampler=sampler,
                            transit_queued_ns=clocked_making[2][ok],
                            behind_ns=clocked_making[3][ok], others_queued_ns=queued)


def queued_in_fetch(steps: np.ndarray, w: common.Steady, clocks: Optional[tuple],
                    clocked_making: Optional[tuple] = None,
                    clocked_sampler: Optional[tuple] = None,
                    others_queued: Optional[np.ndarray] = None) -> Optional[np.ndarray]:
    """Per steady step (shape (steady steps,), int64 ns), where the fetch
    was clocked, its waits for a core: wait_split.fetch_parts' ``cpu_wait``
    (the loop thread's run-queue wait inside it), TRANSIT_QUEUED_PART
    (the awaited worker's threads' while its made batch was in transit)
    and OTHERS_QUEUED_PART (the main process's other threads'), the same
    numbers the split sums; else 0.  An unread CPU time or making
    reads 0 here (the run-queue wait is still the fetch's).  None when no
    clocked steady fetch waited for a core."""
    if clocks is None:
        return None
    pos, cpu, runq = clocks[:3]
    read = runq > 0
    if clocked_making is not None:
        read |= clocked_making[2] > 0
    if others_queued is not None:
        read |= others_queued > 0
    ok = clocked_in(pos, w.steady, read)
    if not ok.any():
        return None
    at_steady = pos[ok] if w.all else np.cumsum(w.steady)[pos[ok]] - 1
    making = (None if clocked_making is None else
              (np.maximum(clocked_making[0][ok], 0), clocked_making[1][ok],
               clocked_making[2][ok]))
    _, parts = wait_split.fetch_parts(
        w.wait[at_steady], np.maximum(cpu[ok], 0), runq[ok],
        *(making[:2] if making else (None, None)),
        others_cpu_ns=clocks[5][ok] if len(clocks) > 5 else None,
        sampler=(None if clocked_sampler is None
                 else (clocked_sampler[0][ok], clocked_sampler[1][ok])),
        transit_queued_ns=making[2] if making else None,
        others_queued_ns=None if others_queued is None else others_queued[ok])
    queued = np.zeros(len(w.wait), dtype=np.int64)
    queued[at_steady] = (parts["cpu_wait"] + parts.get(wait_split.TRANSIT_QUEUED_PART, 0)
                         + parts.get(wait_split.OTHERS_QUEUED_PART, 0))
    return queued


def host_waits(real_wait: np.ndarray, queued: Optional[np.ndarray],
               threshold_s: float, w: common.Steady) -> Optional[dict]:
    """{count, queued_s (their mean wait for a core), steps (their indices
    among all the source's steps)} of the steady fetches that waited past
    the stall line only through the loop thread's wait for a core inside
    them (not stalls: the host's); None without clocks or without such
    fetches."""
    if queued is None:
        return None
    line = threshold_s / NS
    host = (real_wait > line) & (real_wait - queued <= line)
    count = int(np.count_nonzero(host))
    if not count:
        return None
    return {"count": count, "queued_s": float(queued[host].mean()) * NS,
            "steps": np.flatnonzero(w.full(host)).tolist()}


def body_split(steps: np.ndarray, mask: np.ndarray, clocks: Optional[tuple]
               ) -> Optional[dict]:
    """wait_split.body_split over the clocked steps in ``mask`` whose
    body was clocked; None without any."""
    if clocks is None:
        return None
    pos, _, _, cpu, runq = clocks[:5]
    ok = clocked_in(pos, mask, cpu >= 0)
    if not ok.any():
        return None
    at = pos[ok]
    return wait_split.body_split(steps["end_ns"][at] - steps["fetch_done_ns"][at], cpu[ok],
                                 runq[ok])
