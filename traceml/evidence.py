"""Worker and delivery evidence: which batch came from where, worker
processes and their /proc counters in slow and fast intervals, stuck
fetches, the host, and NVML's GPU utilisation in the same intervals.  Pure functions of what the C store and sampler
recorded, returning numbers and finding codes; the finding families
(:mod:`traceml.findings`) word them, and nothing here draws or reads the
live process.
"""

from __future__ import annotations

import os
import signal
from typing import Optional

import numpy as np

from . import _core
from .findings import gpu_wait, hand_over, worker_evidence

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

# Why a counter is null (values of ``intervals()["unavailable"]`` besides
# the /proc error read): a loader with num_workers=0 has no workers, or
# the sampler never read the counter.
NO_WORKERS = "no worker processes"
# ... or a framework's loader wrapper hid the workers' PIDs (the loader
# facts' ``unread`` entry says how).
HIDDEN_PIDS = "worker PIDs hidden by {wrapper}"
NO_READING = "no reading of this counter"
# The sampler's readings of the whole host (/proc/stat) carry pid 0.
HOST_PID = 0
# The sampler thread's CPU share is given once it has run this many
# periods: its first tick opens every /proc file it reads (and smaps costs
# a page-table walk, 6.6 ms for a torch process), so over a few ticks the
# share measures that start, and read 106-131% of one CPU over 2 ticks.
SAMPLER_SHARE_MIN_PERIODS = 10


# --- host ------------------------------------------------------------------------


def host(src, thread_pools: Optional[list] = None) -> Optional[dict]:
    """Loader and host facts of the last epoch, and per epoch, with the
    native thread pools the workers run too (``thread_pools``,
    wrapping.thread_pools) where known."""
    facts = getattr(src, "epoch_facts", None)
    if not facts or getattr(src, "loader", None) is None:
        return None
    last = facts[max(facts)]
    loader = last["loader"] or {}
    nw = loader.get("num_workers")
    cpus = last["usable_cpus"]
    return {
        "usable_cpus": cpus,
        "start_method": last["start_method"],
        "torch_version": last["torch_version"],
        "num_workers": nw,
        "oversubscribed": bool(nw and cpus and nw > cpus),
        **({"thread_pools": thread_pools} if thread_pools is not None else {}),
        "by_epoch": [
            {"epoch": e, **(facts[e]["loader"] or {}), "start_method": facts[e]["start_method"],
             "worker_pids": facts[e]["worker_pids"]}
            for e in sorted(facts)
        ],
    }


# --- delivery ----------------------------------------------------------------------


def epoch_runs(epoch: np.ndarray) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """(the distinct epochs in ascending order, as numpy.unique gives them;
    where each begins, when the steps come in epoch order (one contiguous
    run per epoch, the usual case), else None).  In order, found in one
    pass, without numpy.unique's sort of every step."""
    if len(epoch) > 1 and bool((epoch[1:] >= epoch[:-1]).all()):
        starts = np.r_[0, np.flatnonzero(epoch[1:] != epoch[:-1]) + 1]
        return epoch[starts], starts
    if len(epoch) == 1:
        return np.asarray(epoch[:1]).copy(), np.zeros(1, dtype=np.int64)
    return np.unique(epoch), None


def delivery_ranks(steps: np.ndarray, rank: Optional[np.ndarray],
                   worker: Optional[np.ndarray], src,
                   runs: Optional[tuple] = None) -> tuple[np.ndarray, np.ndarray]:
    """(ranks, workers) per step (int32, or wider when given wider; shape
    (steps,), -1 where unknown; ``rank`` and ``worker`` themselves when
    nothing is to change: treat them as read-only)
    from the recorded ``rank`` and ``worker`` (None: not recorded).  A
    loader with num_workers=0 delivers in sampler order by construction:
    in its epochs, rank = the step's position in its epoch (where the
    position is known, below FLAG_POS_MAX).  ``runs`` is
    :func:`epoch_runs` of the steps' epochs when the caller has it."""
    n = len(steps)
    # int32 as the store records them (4 B a step each), wider if given so;
    # the caller's arrays themselves where nothing is written (read only).
    ranks = (np.full(n, -1, dtype=np.int32) if rank is None
             else np.asarray(rank, dtype=np.result_type(rank, np.int32)))
    workers = (np.full(n, -1, dtype=np.int32) if worker is None
               else np.asarray(worker, dtype=np.result_type(worker, np.int32)))
    epoch = steps["epoch"]
    epochs, _ = runs if runs is not None else epoch_runs(epoch)
    zero = [e for e in epochs
            if (f := src.loader_of(e)) is not None and (f.get("num_workers") or 0) == 0]
    if zero:
        if rank is not None:
            ranks = ranks.copy()    # written below: never the caller's array
        position = steps["flags"] >> _core.FLAG_POS_SHIFT   # uint16: 2 B a step
        if len(zero) == len(epochs):
            sel = position < _core.FLAG_POS_MAX
            ranks[sel] = position[sel]
        else:
            for e in zero:
                sel = (epoch == e) & (position < _core.FLAG_POS_MAX)
                ranks[sel] = position[sel]
    return ranks, workers


def _dense(r: np.ndarray) -> np.ndarray:
    """Each value's index among the distinct values of ``r`` (numpy.unique's
    inverse); ``r`` itself when it already is 0..m-1 in some order (a whole
    epoch), found without sorting."""
    m = len(r)
    if m and r.min() == 0 and r.max() == m - 1 and np.bincount(r, minlength=m).max() == 1:
        return r
    return np.unique(r, return_inverse=True)[1]


def delivery(steps: np.ndarray, rank: Optional[np.ndarray], worker: Optional[np.ndarray],
             src, ranks_workers: Optional[tuple] = None,
             runs: Optional[tuple] = None) -> Optional[dict]:
    """{in_order, overtaking, known} for a DataLoader source.

    The per-step record it is judged from, (ranks, workers), is
    :func:`delivery_ranks` (or ``ranks_workers`` when the caller has it
    already): ranks[i] is step i's batch position in its epoch's sampler
    order, workers[i] the worker that produced it (-1: unknown or the main
    process); the Report carries them (``summary["delivery"]["ranks"]`` and
    ``["workers"]``).  ``known`` counts the steps whose rank is known;
    ``overtaking`` counts deliveries made while a batch
    of lower rank was still undelivered (see ``_core.overtaking``), among
    the batches the record holds: one delivered before a reset()
    mid-epoch, or still pending when the loop stopped, is not counted.
    ``runs``: :func:`epoch_runs` of the steps' epochs, if known.
    """
    loader = getattr(src, "loader", None)
    if loader is None:
        return None
    n = len(steps)
    ranks, workers = (ranks_workers if ranks_workers is not None
                      else delivery_ranks(steps, rank, worker, src, runs))
    epoch = steps["epoch"]
    known = ranks >= 0
    # Overtaking is judged among the deliveries recorded: each epoch's
    # recorded ranks are renumbered 0..m-1 in rank order.  For a whole epoch
    # that changes nothing; a batch the record never saw (delivered before a
    # reset() mid-epoch, or still pending when the loop stopped) then does
    # not count as undelivered.
    counted = ranks    # copied before the first epoch that renumbers
    epochs, starts = runs if runs is not None else epoch_runs(epoch)
    if starts is not None:
        # One run per epoch: slices, no per-epoch masks.
        ends = np.r_[starts[1:], n]
        for a, b in zip(starts.tolist(), ends.tolist()):
            k = known[a:b]
            whole = bool(k.all())
            part = ranks[a:b] if whole else ranks[a:b][k]
            if not len(part):
                continue
            dense = _dense(part)
            if dense is not part:
                if counted is ranks:
                    counted = ranks.copy()
                if whole:
                    counted[a:b] = dense
                else:
                    counted[a:b][k] = dense
        # _core.overtaking takes each epoch as one contiguous run: they are.
        overtook = _core.overtaking(counted, epoch) if n else np.zeros(0, dtype=bool)
    else:
        for e in epochs:
            sel = (epoch == e) & known
            if sel.any():
                part = ranks[sel]
                dense = _dense(part)
                if dense is not part:
                    if counted is ranks:
                        counted = ranks.copy()
                    counted[sel] = dense
        # Two iterators of one loader alive at once (zip(wrap(dl),
        # wrap(dl))) interleave their epochs' steps: group them by epoch
        # first, keeping step order within.
        overtook = np.zeros(n, dtype=bool)
        if n:
            order = np.argsort(epoch, kind="stable")
            overtook[order] = _core.overtaking(counted[order], epoch[order])
    return {
        "in_order": loader.get("in_order"),
        "overtaking": int(overtook.sum()),
        "known": int(known.sum()),
    }


# --- worker processes ------------------------------------------------------------------


def pid_changes(src, steps: np.ndarray) -> list[dict]:
    """Epochs whose worker PID set differs from the previous epoch's:
    {step (first step of that epoch in this report), epoch, old, new}."""
    facts = getattr(src, "epoch_facts", None) or {}
    out = []
    prev = None
    for e in sorted(facts):
        pids = facts[e]["worker_pids"]
        if pids is None:
            prev = None
            continue
        if prev is not None and sorted(prev) != sorted(pids):
            idx = np.flatnonzero(steps["epoch"] == e)
            out.append({"step": int(idx[0]) if len(idx) else None, "epoch": e,
                        "old": list(prev), "new": list(pids)})
        prev = pids
    return out


def _series(samples: np.ndarray, pid: int, field: str, scale: float) -> Optional[tuple]:
    rows = samples[samples["pid"] == pid]
    if len(rows) == 0:
        return None
    v = rows[field]
    ok = v >= 0
    if not ok.any():
        return None
    return rows["t_ns"][ok].astype(np.float64), v[ok].astype(np.float64) * scale


def _cpu_series(samples, pid):
    """CPU-seconds of process ``pid`` over time from utime + stime of
    /proc/PID/stat, which count every thread, those that have exited too.
    The readings' ``cpu_ns`` sums the threads' own schedstat
    (/proc/PID/task/TID/schedstat, at most 64 threads a process) but
    misses a thread's last moments before it exits and threads that live
    between two readings, so CPU comes from stat; schedstat serves
    run-queue wait alone."""
    rows = samples[(samples["pid"] == pid) & (samples["utime_ticks"] >= 0)]
    if len(rows) == 0:
        return None
    total = (rows["utime_ticks"] + rows["stime_ticks"]).astype(np.float64) / CLK_TCK
    return rows["t_ns"].astype(np.float64), total


def _window_deltas(series, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Growth of a cumulative counter over each window [a, b] (linear
    between readings; windows outside the readings count 0)."""
    t, v = series
    a = np.clip(a, t[0], t[-1])
    b = np.clip(b, t[0], t[-1])
    return np.interp(b, t, v) - np.interp(a, t, v)


def every_thread_runq(records: np.ndarray, samples: Optional[np.ndarray],
                      facts: dict) -> np.ndarray:
    """The workers' batch records (BATCH_RECORD_DTYPE) with each batch's
    run-queue wait taken from every thread of its worker: the record's own
    ``runq_ns`` is the fetching thread's (schedstat), which misses work a
    dataset hands to a helper thread (a pool, a decoder's threads) that
    then waits for a core.  The sampler reads each worker's threads
    (/proc/PID/task/TID/schedstat, their run-queue waits summed); that
    cumulative count, linear between readings, grows over the batch's
    [begin, end] by an amount that becomes the batch's wait, kept at least
    the record's own and at most its make time less its CPU (every
    thread's), so that CPU and wait never exceed the make time.  A worker
    without readings, or a record whose CPU is unknown, keeps its own.
    Returns a copy where anything changed, else ``records`` itself.
    ``facts``: the source's epoch facts ({epoch: {"worker_pids": [pid by
    worker id] or None}})."""
    if samples is None or not len(samples) or not len(records):
        return records
    # Each record's worker PID; then one series per distinct PID (a
    # persistent worker serves many epochs).
    rec_pid = _record_pids(records, facts)
    rec_pid[records["cpu_ns"] < 0] = -1
    out = None
    make = records["end_ns"] - records["begin_ns"]
    for pid in np.unique(rec_pid[rec_pid >= 0]).tolist():
        series = _series(samples, pid, "runq_ns", 1.0)
        if series is None or len(series[0]) < 2:
            continue
        sel = np.flatnonzero(rec_pid == pid)
        r = records[sel]
        grew = _window_deltas(series, r["begin_ns"].astype(np.float64),
                              r["end_ns"].astype(np.float64))
        room = np.maximum(make[sel] - r["cpu_ns"], 0).astype(np.float64)
        got = np.maximum(np.minimum(grew, room), np.maximum(r["runq_ns"], 0))
        got = np.round(got).astype(np.int64)
        if (got != r["runq_ns"]).any():
            if out is None:
                out = records.copy()
            out["runq_ns"][sel] = got
    return records if out is None else out


def _record_pids(records: np.ndarray, facts: dict) -> np.ndarray:
    """Each batch record's worker PID (shape (records,), int64, -1
    unknown), through its (epoch, worker) pair and the source's epoch
    facts ({epoch: {"worker_pids": [pid by worker id] or None}})."""
    pid_of = {(int(e), w): int(pid) for e, f in facts.items()
              for w, pid in enumerate(f.get("worker_pids") or [])}
    if not pid_of or not len(records):
        return np.full(len(records), -1, dtype=np.int64)
    pairs, inverse = np.unique(np.stack([records["epoch"].astype(np.int64),
                                         records["worker"].astype(np.int64)], axis=1),
                               axis=0, return_inverse=True)
    return np.array([pid_of.get((int(e), int(w)), -1) for e, w in pairs],
                    dtype=np.int64)[inverse.reshape(-1)]


def _cumulative(starts: np.ndarray, ends: np.ndarray):
    """The running length of the disjoint intervals [starts, ends) (sorted
    by start) as a function of time: (knots, values) for np.interp."""
    return _cumulative_weighted(starts, ends, ends - starts)


def transit_queued(samples: Optional[np.ndarray], facts: dict, records: np.ndarray,
                   idx: np.ndarray, begin_ns: np.ndarray, done_ns: np.ndarray
                   ) -> Optional[np.ndarray]:
    """Per step (shape (steps,), float64 ns; 0 where unknown): how long the
    threads of the worker that made its batch waited for a core while the
    batch was in transit, from the batch made (its record's ``end_ns``)
    to the fetch's end (``done_ns``), where that is inside the fetch
    (from ``begin_ns``).  None without readings or matched steps.

    What is measured: each worker's run-queue wait, every thread's
    (the sampler's ``runq_ns``: /proc/PID/task/TID/schedstat summed), over
    each interval between two readings.  The part of it inside the
    worker's making of batches is the batches' own (every_thread_runq
    spreads it over their make time); the rest, outside making, is the
    worker's threads waiting for a core while it made nothing: its queue's
    feeder thread pickling and sending a batch, the fd sharer thread
    handing each tensor's shared memory to the main process (a round trip
    the main thread sleeps through, inside its fetch), and the worker's
    main thread holding the GIL they need.

    The model: that wait falls in the worker's batches' transit to the
    loop (the sharer serves only while the main process takes a batch),
    spread over those transit windows in proportion to their length; it is
    the model, not a measure, since a reading every 20 ms gives each
    interval's total, not when in it a thread waited.  The split caps each
    fetch's figure at its unexplained sleep (wait_split's ``in_transit``).
    ``idx``: each step's record (worker_timing.match; -1: none), so the
    windows are every step's, clocked or not (a window left out would
    concentrate its interval's wait into the others)."""
    if samples is None or not len(samples) or not len(records) or not len(idx):
        return None
    rec_pid = _record_pids(records, facts)
    hit = idx >= 0
    step_pid = np.full(len(idx), -1, dtype=np.int64)
    step_pid[hit] = rec_pid[idx[hit]]
    made = np.full(len(idx), np.inf)
    made[hit] = records["end_ns"][idx[hit]]
    lo = np.maximum(begin_ns.astype(np.float64), made)
    hi = done_ns.astype(np.float64)
    out = np.zeros(len(idx))
    for pid in np.unique(step_pid[step_pid >= 0]).tolist():
        series = _series(samples, pid, "runq_ns", 1.0)
        if series is None or len(series[0]) < 2:
            continue
        t, runq = series
        grew = np.diff(runq)
        recs = records[rec_pid == pid]
        order = np.argsort(recs["begin_ns"], kind="stable")
        making = _cumulative(recs["begin_ns"][order].astype(np.float64),
                             np.maximum(recs["end_ns"], recs["begin_ns"])[order]
                             .astype(np.float64))
        span = np.diff(t)
        made_in = np.diff(np.interp(t, *making))
        idle_grew = grew * np.clip(1.0 - np.divide(made_in, span, out=np.ones(len(span)),
                                                   where=span > 0), 0.0, 1.0)
        mine = np.flatnonzero((step_pid == pid) & (hi > lo))
        if not len(mine):
            continue
        order = mine[np.argsort(lo[mine], kind="stable")]
        transit = _cumulative(lo[order], np.maximum(hi[order], lo[order]))
        in_transit = np.diff(np.interp(t, *transit))
        rate = np.divide(idle_grew, in_transit, out=np.zeros(len(span)),
                         where=in_transit > 0)
        out[mine] = np.maximum(_spread_upto(hi[mine], t, transit, rate)
                               - _spread_upto(lo[mine], t, transit, rate), 0.0)
    return out


def _spread_upto(x: np.ndarray, t: np.ndarray, windows: tuple, rate: np.ndarray) -> np.ndarray:
    """The wait spread over the windows (``windows``: :func:`_cumulative`
    of them) at ``rate`` a ns of window in each interval between the
    readings ``t``, up to each time ``x``: the whole intervals before x,
    then x's interval's rate over its window time before x."""
    before = np.r_[0.0, np.cumsum(rate * np.diff(np.interp(t, *windows)))]
    i = np.clip(np.searchsorted(t, x, side="right") - 1, 0, len(rate) - 1)
    inside = np.interp(np.clip(x, t[0], t[-1]), *windows) - np.interp(t[i], *windows)
    return before[i] + rate[i] * np.maximum(inside, 0.0)


def _reason(info: dict, pids: list[int], file: str) -> Optional[str]:
    for p in info.get("procs", []):
        if p["pid"] in pids and p["errors"].get(file):
            return f"/proc/{p['pid']}/{file}: {p['errors'][file]}"
    return None


COUNTERS = (
    # name, field, scale, file, whose: "workers", "main" or "host"
    # CPU from /proc/PID/stat (every thread); run-queue wait from the
    # sampler's sum of /proc/PID/task/TID/schedstat over the threads (at
    # most 64 a process; "schedstat" names the file whose error explains
    # an unknown).
    ("worker_cpu_s", "cpu", 1.0, "stat", "workers"),
    ("runq_wait_s", "runq_ns", 1e-9, "schedstat", "workers"),
    ("read_bytes", "read_bytes", 1.0, "io", "workers"),
    ("major_faults", "majflt", 1.0, "stat", "workers"),
    ("main_cpu_s", "cpu", 1.0, "stat", "main"),
    # With num_workers=0 the dataset runs in the main process: its own
    # storage counters are the evidence.
    ("main_runq_wait_s", "runq_ns", 1e-9, "schedstat", "main"),
    ("main_read_bytes", "read_bytes", 1.0, "io", "main"),
    ("main_major_faults", "majflt", 1.0, "stat", "main"),
    # The busy time of every core, whoever ran it (/proc/stat, the
    # sampler's pid 0): less the job's own, what other programs ran.
    ("host_cpu_s", "cpu", 1.0, "host", "host"),
)


# Of a sampler interval, the share the loop thread's clocked windows
# (fetches and bodies) must cover for its own run-queue wait there to be
# known, and the rest of the process's to be its other threads'.
CLOCKED_COVER = 0.9


def main_others_queued(samples: Optional[np.ndarray], main_pid: Optional[int],
                       fetch: tuple, body: tuple) -> Optional[np.ndarray]:
    """Per clocked fetch (shape (m,), float64 ns; 0 where unknown): how long
    the main process's threads other than the loop's waited for a core
    inside it.

    What is measured: the main process's run-queue wait, every thread's
    (the sampler's ``runq_ns``, /proc/PID/task/*/schedstat summed), over
    each interval between two readings; and the loop thread's own inside
    each clocked fetch and body (its schedstat at their ends).  In an
    interval the clocked windows cover (CLOCKED_COVER), the process's wait
    less the loop thread's is its other threads': the DataLoader's index
    queues' feeder threads, which send each batch's indices to the
    workers, and any thread of the user's.

    The model: that wait falls evenly over its interval, and a thread
    queued while it holds the GIL keeps the loop thread from taking a
    batch already here; the split caps each fetch's figure at its
    unexplained sleep.  Beside 4 CPU hogs on 2 cores, 3 workers of
    256-byte batches, 300 steps: the three feeders waited 0.35 s for a
    core, and the loop 0.41 s in fetches that nothing measured read as
    the batch in transit (HAND-OVER and 46-52 stalls; helper 33B).

    ``fetch`` and ``body``: (begin_ns, end_ns, runq_ns) of the clocked
    fetches and of their steps' bodies (shape (m,) each; a runq of -1:
    not read, the window then counts as uncovered).  None without
    readings of the main process."""
    if samples is None or main_pid is None or not len(fetch[0]):
        return None
    series = _series(samples, main_pid, "runq_ns", 1.0)
    if series is None or len(series[0]) < 2:
        return None
    t, runq = series
    starts = np.concatenate([np.asarray(fetch[0]), np.asarray(body[0])]).astype(np.float64)
    ends = np.concatenate([np.asarray(fetch[1]), np.asarray(body[1])]).astype(np.float64)
    waits = np.concatenate([np.asarray(fetch[2]), np.asarray(body[2])]).astype(np.float64)
    ok = (waits >= 0) & (ends > starts)
    if not ok.any():
        return None
    order = np.argsort(starts[ok], kind="stable")
    a, b, r = starts[ok][order], ends[ok][order], waits[ok][order]
    # The loop thread's wait and the clocked time, cumulative over time
    # (each window's wait spread over it: the windows are milliseconds,
    # the readings 20 ms apart).
    loop = _cumulative_weighted(a, b, r)
    covered = _cumulative_weighted(a, b, b - a)
    span = np.diff(t)
    cover = np.diff(np.interp(t, *covered))
    mine = np.diff(np.interp(t, *loop))
    grew = np.diff(runq)
    known = (span > 0) & (cover >= CLOCKED_COVER * span)
    others = np.where(known, np.maximum(grew - mine, 0.0), 0.0)
    cum = np.r_[0.0, np.cumsum(others)]
    f0 = np.clip(np.asarray(fetch[0], dtype=np.float64), t[0], t[-1])
    f1 = np.clip(np.asarray(fetch[1], dtype=np.float64), t[0], t[-1])
    return np.interp(f1, t, cum) - np.interp(f0, t, cum)


def _cumulative_weighted(starts: np.ndarray, ends: np.ndarray, amount: np.ndarray):
    """(knots, values) for np.interp: ``amount`` of each disjoint window
    [starts, ends) (sorted by start) spread evenly over it, cumulative."""
    before = np.cumsum(amount) - amount
    knots = np.empty(2 * len(starts))
    values = np.empty(2 * len(starts))
    knots[0::2], knots[1::2] = starts, ends
    values[0::2], values[1::2] = before, before + amount
    return knots, values


def job_pids(src, info: dict, main_pid: Optional[int] = None
             ) -> tuple[Optional[int], list[int]]:
    """(main process PID, the workers' PIDs over every epoch, sorted) of a
    DataLoader source: ``main_pid`` if given, else the main process the
    sampler read (role -1 in ``info["procs"]``), else None."""
    facts = getattr(src, "epoch_facts", None) or {}
    pids = sorted({p for f in facts.values() for p in (f["worker_pids"] or [])})
    if main_pid is None:
        main = [p["pid"] for p in info.get("procs", []) if p["role"] == -1]
        main_pid = main[0] if main else None
    return main_pid, pids


def others_in_waits(samples: Optional[np.ndarray], starts_ns: np.ndarray,
                    ends_ns: np.ndarray, main_pid: Optional[int],
                    worker_pid_list: list[int]) -> Optional[dict]:
    """What other programs ran against what the job waited for a core, over
    the windows [starts_ns, ends_ns) (ns, shape (m,): the clocked fetches'
    input waits).

    {others_cpu_s: every core's busy time (/proc/stat, the sampler's pid
    0) less the main process's and the workers' CPU, at least 0;
    job_runq_s: the main process's and the workers' run-queue wait (their
    threads' schedstat); wall_s; host_share: min(1, others_cpu_s /
    job_runq_s), the most of the job's wait for a core that other programs
    can account for (a CPU-second another program runs while one of the
    job's threads waits delays the job by at most that second;
    findings.host_contention), None where the job did not wait for a
    core}; None where the host or the main process was not read."""
    if samples is None or len(samples) == 0 or not len(starts_ns) or main_pid is None:
        return None
    a = np.asarray(starts_ns, dtype=np.float64)
    b = np.asarray(ends_ns, dtype=np.float64)

    def total(pid: int, field: str) -> Optional[float]:
        s = _cpu_series(samples, pid) if field == "cpu" else _series(samples, pid, field, 1e-9)
        return None if s is None or not len(s[0]) else float(_window_deltas(s, a, b).sum())

    host, main_cpu = total(HOST_PID, "cpu"), total(main_pid, "cpu")
    if host is None or main_cpu is None:
        return None
    job_cpu = main_cpu + sum(total(p, "cpu") or 0.0 for p in worker_pid_list)
    runq = sum(total(p, "runq_ns") or 0.0 for p in [main_pid, *worker_pid_list])
    others = max(0.0, host - job_cpu)
    return {"others_cpu_s": others, "job_runq_s": runq, "wall_s": float((b - a).sum()) * 1e-9,
            "host_share": min(1.0, others / runq) if runq > 0 else None}


def slow_fast_windows(steps: np.ndarray, stall: np.ndarray,
                      steady: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{"slow": (starts, ends), "fast": (starts, ends)} (ns): the slow
    intervals are each stall's input wait, [begin, fetch_done); the fast
    ones the rest of steady-state time: calm steady steps' [begin, end) and
    stalls' [fetch_done, end)."""
    calm = steady & ~stall
    return {"slow": (steps["begin_ns"][stall], steps["fetch_done_ns"][stall]),
            "fast": (np.r_[steps["begin_ns"][calm], steps["fetch_done_ns"][stall]],
                     np.r_[steps["end_ns"][calm], steps["end_ns"][stall]])}


def intervals(steps: np.ndarray, stall: np.ndarray, steady: np.ndarray,
              samples: np.ndarray, info: dict, worker_pid_list: list[int],
              main_pid: Optional[int]) -> Optional[dict]:
    """Counters over slow intervals (the input wait of each stall) and
    fast intervals (the rest of steady-state time).

    Per kind: count, wall_s, and per counter the total, the median per
    interval, and for CPU the busy cores (CPU-s per wall-s);
    ``host_cpu_s`` is every core's busy time (/proc/stat) and
    ``others_cpu_s`` that less the main process's and the workers' CPU
    (what other programs ran in the windows, at least 0; None where the
    host or the main process was not read).  A counter that could not be
    read is None, with its reason under ``unavailable``.
    """
    if len(samples) == 0:
        return None
    kinds = slow_fast_windows(steps, stall, steady)
    out = {k: {"count": int(len(a)), "wall_s": float((b - a).sum()) * 1e-9}
           for k, (a, b) in kinds.items()}
    unavailable = {}
    slow_by_pid: dict[str, dict[int, float]] = {}
    for name, field, scale, file, whose in COUNTERS:
        pids = (worker_pid_list if whose == "workers" else [HOST_PID] if whose == "host"
                else [main_pid] if main_pid else [])
        series = []
        for pid in pids:
            if field == "cpu":
                s = _cpu_series(samples, pid)
            else:
                s = _series(samples, pid, field, scale)
            if s is not None and len(s[0]):
                series.append((pid, s))
        if not series:
            unavailable[name] = (info.get("host_error") if whose == "host"
                                 else _reason(info, pids, file)) or (
                NO_READING if pids else NO_WORKERS)
            for k in kinds:
                out[k][name] = None
            continue
        for k, (a, b) in kinds.items():
            per = np.zeros(len(a))
            for pid, s in series:
                d = _window_deltas(s, a.astype(np.float64), b.astype(np.float64))
                per += d
                if k == "slow":
                    slow_by_pid.setdefault(name, {})[pid] = float(d.sum())
            out[k][name] = float(per.sum())
            out[k][f"{name}_median"] = float(np.median(per)) if len(per) else None
    for k in kinds:
        w = out[k]["wall_s"]
        cpu = out[k].get("worker_cpu_s")
        runq = out[k].get("runq_wait_s")
        out[k]["worker_cores_busy"] = cpu / w if cpu is not None and w > 0 else None
        out[k]["worker_cores_runnable"] = (
            (cpu + runq) / w if cpu is not None and runq is not None and w > 0 else None)
        main_cpu = out[k].get("main_cpu_s")
        main_runq = out[k].get("main_runq_wait_s")
        out[k]["main_cores_busy"] = main_cpu / w if main_cpu is not None and w > 0 else None
        out[k]["main_cores_runnable"] = (
            (main_cpu + (main_runq or 0.0)) / w if main_cpu is not None and w > 0 else None)
        # What other programs ran: the host's busy time less the job's.
        # Both counters tick at 1/CLK_TCK and are read at the same rounds.
        host_cpu = out[k].get("host_cpu_s")
        out[k]["others_cpu_s"] = (
            max(0.0, host_cpu - main_cpu - (cpu or 0.0))
            if host_cpu is not None and main_cpu is not None else None)
    # The busiest single worker during stalls: one worker grinding through a
    # slow sample while the others idle is CPU-side work too.
    w = out["slow"]["wall_s"]
    cpu_by = slow_by_pid.get("worker_cpu_s", {})
    runq_by = slow_by_pid.get("runq_wait_s", {})
    out["slow"]["busiest_worker_cores"] = (
        max((cpu_by[p] + runq_by.get(p, 0.0)) / w for p in cpu_by) if cpu_by and w > 0 else None)
    out["unavailable"] = unavailable
    return out


# What the stalls' reads amount to (see _stall_reads).
NO_READS, TRACE_READS, LIGHTER_READS, HEAVY_READS = "none", "trace", "lighter", "heavy"


def _stall_reads(slow: dict, fast: dict, read_key: str, fault_key: str) -> str:
    """What read_bytes (``read_key``) and major faults (``fault_key``) in the
    stalls amount to: NO_READS; TRACE_READS, both under
    worker_evidence.MIN_STALL_READ_BYTES_PER_S and MIN_STALL_MAJOR_FAULTS_PER_S;
    LIGHTER_READS, no heavier per second than outside the stalls (the
    training step may read files too, and at the sampler's period some of
    its reads spill into the stalls' windows); or HEAVY_READS, storage
    read in earnest."""
    slow_wall, fast_wall = slow["wall_s"], fast["wall_s"]
    if not (slow.get(read_key) or slow.get(fault_key)):
        return NO_READS
    lighter = False
    for key, floor in ((read_key, worker_evidence.MIN_STALL_READ_BYTES_PER_S),
                       (fault_key, worker_evidence.MIN_STALL_MAJOR_FAULTS_PER_S)):
        rate = (slow.get(key) or 0.0) / slow_wall if slow_wall > 0 else 0.0
        if rate < floor:
            continue
        if fast_wall <= 0 or rate > (fast.get(key) or 0.0) / fast_wall:
            return HEAVY_READS
        lighter = True
    return LIGHTER_READS if lighter else TRACE_READS


def _storage_finding(who: str, slow: dict, fast: dict, read_key: str, fault_key: str,
                     busy: bool, idle_known: bool) -> Optional[tuple[str, dict]]:
    """CPU-side work versus storage reads during stalls, for ``who``
    ("workers" or "main"), from the counters ``read_key`` (read_bytes) and
    ``fault_key`` (major faults) of the slow and fast intervals; storage
    counts only for HEAVY_READS (:func:`_stall_reads`).  Codes:
    "cpu_no_reads_anywhere", "cpu_no_reads", "cpu_light_reads", "idle",
    "storage", "cpu_and_storage"; None when nothing can be said (not busy,
    capacity unknown)."""
    kind = _stall_reads(slow, fast, read_key, fault_key)
    params = {"who": who, "reads": kind,
              "read_bytes": slow[read_key], "major_faults": slow[fault_key],
              "wall_s": slow["wall_s"],
              "fast_read_bytes": fast.get(read_key) or 0.0,
              "fast_major_faults": fast.get(fault_key) or 0.0,
              "fast_wall_s": fast["wall_s"]}
    if kind == NO_READS and busy and not (params["fast_read_bytes"]
                                          or params["fast_major_faults"]):
        return "cpu_no_reads_anywhere", params
    if kind == NO_READS and busy:
        return "cpu_no_reads", params
    if kind != HEAVY_READS:
        if busy:
            return "cpu_light_reads", params
        return ("idle", params) if idle_known else None
    return ("cpu_and_storage" if busy else "storage"), params


def _main_process_findings(iv: dict) -> list[tuple[str, dict]]:
    """num_workers=0: the dataset runs inside next() in the main process, so
    its CPU time and storage counters during stalls tell CPU-side work from
    storage reads.  Busy: runnable (on a CPU, or a thread of it waiting in
    the run queue for one) for at least worker_evidence.BUSY_SHARE of the stalls'
    wall time, so that a loaded host does not make CPU work look idle."""
    slow, fast = iv["slow"], iv["fast"]
    cpu = slow.get("main_cpu_s")
    if cpu is None or slow["wall_s"] <= 0:
        return [("main_unavailable", {"why": iv["unavailable"].get("main_cpu_s", "no reading")})]
    runnable = slow["main_cores_runnable"]
    out = [("main_cpu", {
        "cpu_s": cpu, "wall_s": slow["wall_s"], "cores": slow["main_cores_busy"],
        "runnable": runnable if slow.get("main_runq_wait_s") is not None else None,
        "fast_cpu_s": fast["main_cpu_s"], "fast_wall_s": fast["wall_s"],
        "fast_cores": fast["main_cores_busy"] or 0.0})]
    reads, faults = slow.get("main_read_bytes"), slow.get("main_major_faults")
    if reads is None or faults is None:
        why = (iv["unavailable"].get("main_read_bytes")
               or iv["unavailable"].get("main_major_faults"))
        out.append(("storage_unavailable", {"why": why}))
    else:
        found = _storage_finding("main", slow, fast, "main_read_bytes", "main_major_faults",
                                 runnable >= worker_evidence.BUSY_SHARE, True)
        if found:
            out.append(found)
    out.append(("caveats", {"reads_matter": reads is not None and faults is not None
                            and _stall_reads(slow, fast, "main_read_bytes",
                                             "main_major_faults") in (LIGHTER_READS, HEAVY_READS)}))
    return out


# The storage findings that read the stalls as CPU-side dataset processing.
_CPU_SIDE = frozenset(("cpu_no_reads_anywhere", "cpu_no_reads", "cpu_light_reads"))


def interval_findings(iv: Optional[dict], num_workers: Optional[int],
                      cpus: Optional[int], awaited: Optional[dict] = None,
                      batch_bytes: Optional[float] = None,
                      making: Optional[bool] = None,
                      stall_largest: Optional[dict] = None) -> list[tuple[str, dict]]:
    """What the slow/fast comparison of :func:`intervals` says, as
    (code, numbers) items ending with the caveats; :func:`traceml.findings.
    sentences` words them.  Empty without stalls.  ``awaited``
    (:func:`awaited`): when the worker holding the awaited batches was
    blocked, "awaited_blocked" takes the place of "idle" (the wait does not
    lie elsewhere: that worker sleeps on something).  With batches of at
    least hand_over.HANDOVER_MIN_BYTES (``batch_bytes``, the median), busy
    workers without storage reads read "cpu_handover": their CPU includes
    collate's copy of the batch into shared memory.  ``making`` (the
    workers' own batch timing: the awaited worker made the stalled batch
    for most of the wait; None unmeasured) rules out "idle": one of three
    workers burning an 80 ms sample keeps 0.8 of 2 cores busy, under half
    the cores, and read "mostly idle" beside its own CPU line.  It does
    not make them busy: a worker making its batch may sleep on I/O.
    ``stall_largest`` (wait_parts.next_for of the stalls' measured parts:
    {part, share}; None unmeasured) rides on "idle" as ``largest``: where
    the wait lies is then measured, not guessed (idle workers beside two
    CPU hogs read "IPC, the main process, locks")."""
    if iv is None or iv["slow"]["count"] == 0:
        return []
    if num_workers == 0:
        return _main_process_findings(iv)
    slow, fast = iv["slow"], iv["fast"]
    out = []
    if slow.get("worker_cpu_s") is not None:
        out.append(("worker_cpu", {
            "cpu_s": slow["worker_cpu_s"], "wall_s": slow["wall_s"],
            "cores": slow["worker_cores_busy"] or 0,
            "runnable": slow.get("worker_cores_runnable"),
            "fast_cpu_s": fast["worker_cpu_s"], "fast_wall_s": fast["wall_s"],
            "fast_cores": fast["worker_cores_busy"] or 0,
            "fast_runnable": fast.get("worker_cores_runnable")}))
    reads = slow.get("read_bytes")
    faults = slow.get("major_faults")
    capacity = min(num_workers or 0, cpus or 0) or None
    demand = slow.get("worker_cores_runnable")
    if demand is None:
        demand = slow.get("worker_cores_busy")
    busiest = slow.get("busiest_worker_cores")
    share = worker_evidence.BUSY_SHARE
    busy = ((demand is not None and capacity is not None and demand >= share * capacity)
            or (busiest is not None and busiest >= share))
    if busy and busiest is not None and capacity and capacity > 1 and (
            demand is None or demand < share * capacity):
        out.append(("one_worker_busy", {"cores": busiest}))
    blocked = bool(awaited and awaited.get("blocked"))
    if reads is not None and faults is not None:
        found = _storage_finding("workers", slow, fast, "read_bytes", "major_faults",
                                 busy, capacity is not None)
        if found and found[0] == "idle" and stall_largest is not None:
            found = ("idle", {**found[1], "largest": dict(stall_largest)})
        if (found and found[0] == "idle" and (blocked or making)
                and found[1]["reads"] == LIGHTER_READS):
            # Blocked workers that read in earnest at the rate they read
            # outside the stalls: the reads are every batch's, said.
            found = ("reads_alike", found[1])
        if found and not ((blocked or making) and found[0] == "idle"):
            if (found[0] in _CPU_SIDE and batch_bytes is not None
                    and batch_bytes >= hand_over.HANDOVER_MIN_BYTES):
                found = ("cpu_handover", {**found[1], "batch_bytes": batch_bytes})
            out.append(found)
    else:
        why = iv["unavailable"].get("read_bytes") or iv["unavailable"].get("major_faults")
        out.append(("storage_unavailable", {"why": why}))
    if blocked:
        out.append(("awaited_blocked", dict(awaited)))
    runq = slow.get("runq_wait_s")
    if (runq is not None and slow["wall_s"] > 0
            and runq / slow["wall_s"] >= worker_evidence.CONTENTION_RUNQ_PER_WALL):
        out.append(("run_queue", {"runq_s": runq, "num_workers": num_workers, "cpus": cpus}))
    out.append(("caveats", {"reads_matter": reads is not None and faults is not None
                            and _stall_reads(slow, fast, "read_bytes",
                                             "major_faults") in (LIGHTER_READS, HEAVY_READS)}))
    return out


def _unread_workers(facts: dict) -> Optional[str]:
    """Why the worker PIDs of a loader with workers were not read (its
    latest epoch's loader facts have an ``unread`` entry), else None."""
    loader = (facts[max(facts)] or {}).get("loader") or {}
    if not loader.get("unread") or not (loader.get("num_workers") or 0) > 0:
        return None
    return HIDDEN_PIDS.format(wrapper=loader.get("wrapper") or "the loader")


def workers(src, steps: np.ndarray, stall: np.ndarray, steady: np.ndarray,
            samples: np.ndarray, info: dict, main_pid: Optional[int] = None,
            delivered_workers: Optional[np.ndarray] = None,
            median_batch_bytes: Optional[float] = None,
            making_ns: Optional[np.ndarray] = None,
            runs: Optional[tuple] = None,
            stall_largest: Optional[dict] = None) -> Optional[dict]:
    """The ``workers`` section of a report for a DataLoader source, its
    ``findings`` being :func:`interval_findings` (``evidence``, their
    sentences, is added by the report).  ``main_pid`` is the training
    process (default: the main process the sampler read, if any);
    ``delivered_workers`` the worker of each step's batch (-1 unknown), for
    the state of the worker holding each awaited batch (:func:`awaited`);
    ``median_batch_bytes`` the batches' size (:func:`batch_bytes`), which
    qualifies busy workers when the batches are large; ``runs``
    :func:`epoch_runs` of the steps' epochs, if known."""
    facts = getattr(src, "epoch_facts", None)
    if not facts or src.loader is None:
        return None
    main_pid, pids = job_pids(src, info, main_pid)
    # Readings of this run were lost when the ring wrapped after it began.
    lost = False
    if len(steps) and any(f.get("watched") for f in facts.values()):
        lo, hi = steps["begin_ns"].min(), steps["end_ns"].max()
        lost = bool(info.get("overwritten")) and len(samples) > 0 and samples["t_ns"].min() > lo
        margin = info["period_s"] * worker_evidence.SAMPLE_MARGIN_PERIODS * 1e9
        samples = samples[(samples["t_ns"] >= lo - margin) & (samples["t_ns"] <= hi + margin)]
    else:
        samples = samples[:0]
    iv = intervals(steps, stall, steady, samples, info, pids, main_pid)
    unread = _unread_workers(facts) if not pids else None
    if iv is not None and unread is not None:
        # The loader has workers whose PIDs a framework's wrapper hid
        # (wrapping.hidden_facts): not "no worker processes".
        iv["unavailable"] = {k: (unread if v == NO_WORKERS else v)
                             for k, v in iv["unavailable"].items()}
    held = awaited(steps, stall, delivered_workers, samples, facts, making_ns)
    exited = dead_workers(facts, steps, info, runs)
    busy_s = info.get("busy_s") or 0.0
    run_s = info.get("run_s") or 0.0
    return {
        "pids_by_epoch": [{"epoch": e, "pids": facts[e]["worker_pids"]} for e in sorted(facts)],
        "pid_changes": pid_changes(src, steps),
        "exited": exited,
        "sampler": {
            "enabled": info.get("enabled"),
            "period_s": info.get("period_s"),
            "samples": int(len(samples)),
            "overwritten": info.get("overwritten"),
            "readings_lost": lost,
            "dropped_watch": info.get("dropped_watch"),
            "error": info.get("error"),
            "cpu_share": (min(busy_s / run_s, 1.0) if run_s > 0 and run_s >= (
                SAMPLER_SHARE_MIN_PERIODS * (info.get("period_s") or 0.0)) else None),
        },
        "intervals": iv,
        "cpu_ticks_by_worker": worker_ticks(samples, pids),
        "awaited": held,
        "findings": interval_findings(iv, (src.loader or {}).get("num_workers"),
                                      facts[max(facts)]["usable_cpus"], awaited=held,
                                      batch_bytes=median_batch_bytes,
                                      making=_making_in(steps, stall, making_ns),
                                      stall_largest=stall_largest),
    }


def _making_in(steps: np.ndarray, stall: np.ndarray,
               making_ns: Optional[np.ndarray]) -> Optional[bool]:
    """Whether the awaited workers were making the stalled batches for at
    least worker_evidence.BUSY_SHARE of the stalls' wait (the workers' own
    batch timing, ``making_ns`` per step, -1 unknown); None unmeasured."""
    if making_ns is None or not stall.any():
        return None
    made = np.asarray(making_ns)[stall]
    known = made >= 0
    if not known.any():
        return None
    at = np.flatnonzero(stall)[known]
    wait = steps["fetch_done_ns"][at] - steps["begin_ns"][at]
    total = int(wait.sum())
    return total > 0 and int(made[known].sum()) >= worker_evidence.BUSY_SHARE * total


def dead_workers(facts: dict, steps: np.ndarray, info: dict,
                 runs: Optional[tuple] = None) -> list[dict]:
    """The workers that died during their epoch: those the sampler saw
    vanish before the epoch's last fetch, and those whose exit code (read
    from the parent, ``epoch_facts[e]["worker_exits"]``) is not 0, such as
    a worker killed by a signal, which makes the DataLoader raise.

    Each is {worker, pid, epoch, exitcode (as multiprocessing gives it: < 0
    is minus a signal; None: unknown), signal (its name, or None), step,
    when}: ``step`` indexes this report's steps; ``when`` is "near" when
    the sampler saw the exit (the first step begun after it), or "after"
    when only the exit code tells (the epoch's last recorded step: the
    worker died before the loop ended).  At an epoch's end the workers
    are shut down with code 0, so those are not listed."""
    gone_at = {p["pid"]: p["exited_ns"] for p in info.get("procs", [])
               if p["role"] >= 0 and p["exited_ns"]}
    out = []
    epoch = steps["epoch"]
    epochs, starts = runs if runs is not None else epoch_runs(epoch)
    # Each epoch's steps: one contiguous run (slices) unless two iterators
    # interleaved them (masks).
    spans = ({int(e): slice(a, b) for e, a, b in
              zip(epochs.tolist(), starts.tolist(), np.r_[starts[1:], len(epoch)].tolist())}
             if starts is not None else None)
    for e in sorted(facts):
        pids = facts[e]["worker_pids"] or []
        exits = facts[e].get("worker_exits")
        codes = exits.codes() if exits is not None else []
        if spans is not None:
            if e not in spans:
                continue
            idx = np.arange(spans[e].start, spans[e].stop)
        else:
            idx = np.flatnonzero(epoch == e)
        if not len(idx):
            continue
        last_fetch = steps["fetch_done_ns"][idx].max()
        for w, pid in enumerate(pids):
            code = codes[w] if w < len(codes) else None
            t = gone_at.get(pid)
            # Vanished before the epoch's last fetch: died mid-run.
            seen = t is not None and t < last_fetch
            if not seen and not code:
                continue
            sig = None
            if code is not None and code < 0:
                try:
                    sig = signal.Signals(-code).name
                except ValueError:
                    sig = f"signal {-code}"
            out.append({
                "worker": w, "pid": pid, "epoch": int(e), "exitcode": code, "signal": sig,
                "step": int(np.searchsorted(steps["begin_ns"], t)) if seen else int(idx[-1]),
                "when": "near" if seen else "after",
            })
    return out


def raised(facts: dict, steps: np.ndarray,
           interrupt_bar_s: Optional[float] = None) -> Optional[dict]:
    """The exceptions the loop's fetches raised (the wrap iterator's
    on_raise, ``epoch_facts[e]["raised"]``): the latest epoch's latest one,
    {epoch, fetch (the epoch's fetch that raised, from 0), step (the index
    this report's next step of that epoch would have had; None where the
    report holds none of its steps), type, message, worker (the DataLoader
    worker it was raised in, or None), ended (no step of that epoch, nor
    of a later one, came after it: the loop ended there), count (every fetch that raised, all
    epochs), first (the first of them, the same keys as the fetch's own,
    where count > 1)}; None where no fetch raised.  A KeyboardInterrupt
    (``epoch_facts[e]["interrupted"]``) counts only in the latest epoch
    and where its fetch had waited longer than ``interrupt_bar_s`` (s;
    the caller's bar: the longest delivered fetch, at least a stall's
    floor; None: no interrupt counts): Ctrl-C in a fetch that hung is
    where the run went, Ctrl-C between normal fetches the user stopping
    it."""
    hit = [e for e in sorted(facts) if facts[e].get("raised")]
    latest = max(facts) if facts else None
    cut = facts[latest].get("interrupted") if facts else None
    if cut is not None and interrupt_bar_s is not None and cut["wait_s"] > interrupt_bar_s:
        facts = {**facts, latest: {**facts[latest], "raised": cut,
                                   "raised_count": facts[latest].get("raised_count", 0) + 1}}
        hit = sorted(set(hit) | {latest})
    if not hit:
        return None
    e = hit[-1]
    last = facts[e]["raised"]
    mine = steps["epoch"] == e
    idx = np.flatnonzero(mine)
    position = steps["flags"][idx] >> _core.FLAG_POS_SHIFT
    # A batch delivered after the raise sits at position >= its fetch
    # (positions saturate at FLAG_POS_MAX: count the epoch's steps there).
    went_on = (bool((position >= last["fetch"]).any()) if last["fetch"] < _core.FLAG_POS_MAX
               else len(idx) > last["fetch"])
    # ... or a later epoch ran (the loop started again after it).
    went_on = went_on or bool((steps["epoch"] > e).any())
    count = sum(int(facts[k].get("raised_count", 1)) for k in hit)
    first = facts[hit[0]].get("raised_first") or facts[hit[0]]["raised"]
    return {"epoch": int(e), "step": int(idx[-1]) + 1 if len(idx) else None,
            **last, "ended": not went_on, "count": count,
            **({"first": {"epoch": int(hit[0]), **first}} if count > 1 else {})}


def unwatched(src) -> list[dict]:
    """Epochs of a wrapped source (those whose facts the registry keeps:
    since the last reset, and the one in progress then) that the sampler
    could not watch while it was on, grouped by reason: [{epochs: [...],
    error}].  Those epochs have no /proc readings and no stuck-fetch watch
    (``epoch_facts[e]["watch_error"]``, from ``sampler_info()["error"]``
    when the loop started: a buffer that could not be allocated, a thread
    that could not start)."""
    facts = getattr(src, "epoch_facts", None) or {}
    by_error: dict[str, list[int]] = {}
    for e in sorted(facts):
        error = (facts[e] or {}).get("watch_error")
        if error:
            by_error.setdefault(error, []).append(e)
    return [{"epochs": epochs, "error": error} for error, epochs in by_error.items()]


# --- stuck fetches ---------------------------------------------------------------------


def stuck(events: list[dict], source_id: int, steps: np.ndarray) -> list[dict]:
    """Fetches of this source that waited past stuck_after_s."""
    out = []
    for ev in events:
        if ev["source"] != source_id:
            continue
        idx = np.flatnonzero(steps["begin_ns"] == ev["since_ns"])
        end = ev["ended_ns"] or ev["last_ns"]
        cpu = None
        if ev["cpu_ticks_last"] >= 0 and ev["cpu_ticks_at_since"] >= 0:
            cpu = (ev["cpu_ticks_last"] - ev["cpu_ticks_at_since"]) / CLK_TCK
        out.append({
            "step": int(idx[0]) if len(idx) else None,
            "epoch": ev["epoch"],
            "step_in_epoch": ev["step"],
            "waited_s": (end - ev["since_ns"]) * 1e-9,
            "still_waiting": ev["ended_ns"] == 0,
            "oldest_rank": ev["oldest_rank"] if ev["oldest_rank"] >= 0 else None,
            "worker": ev["worker"] if ev["worker"] >= 0 else None,
            "pid": ev["pid"] or None,
            "state": ev["state"] or None,
            "worker_cpu_s_during_wait": cpu,
        })
    return out


# --- per worker -------------------------------------------------------------------------


def worker_ticks(samples: np.ndarray, pids: list[int]) -> Optional[dict]:
    """CPU clock ticks (utime + stime of /proc/PID/stat: every thread) each
    worker id used over the readings, summed over the epochs' processes of
    that id; None without readings.  Keys are worker ids (the readings'
    role)."""
    out: dict[int, int] = {}
    for pid in pids:
        rows = samples[(samples["pid"] == pid) & (samples["utime_ticks"] >= 0)
                       & (samples["role"] >= 0)]
        if len(rows) < 2:
            continue
        total = rows["utime_ticks"] + rows["stime_ticks"]
        role = int(rows["role"][0])
        out[role] = out.get(role, 0) + int(total[-1] - total[0])
    return out or None


def awaited(steps: np.ndarray, stall: np.ndarray, delivered_workers: Optional[np.ndarray],
            samples: np.ndarray, facts: dict,
            making_ns: Optional[np.ndarray] = None) -> Optional[dict]:
    """The worker holding each awaited batch, during its stall: the
    readings of that worker's process inside the stall's window, how many
    found it asleep (worker_evidence.BLOCKED_STATES: the sampler reads R when
    any thread of it is running or runnable), its CPU-seconds (every thread)
    over the windows' wall time, and worker_evidence.awaited_blocked's verdict.

    ``making_ns`` (per step, the ns of its wait during which its worker was
    making batches, -1 unknown; worker_timing.summarise) gives
    ``making_share``: that time over the stalls' wait, where known.  A
    worker that was not making the awaited batch during most of the stall
    (it was made already) sleeps because it is idle, not blocked
    (worker_evidence.awaited_blocked).

    {workers: {worker id: stalls}, readings, asleep, states: {code: count},
    cpu_s, wall_s, cores, making_share, blocked}; None without stalls of a
    known worker or without readings."""
    if delivered_workers is None or not len(samples):
        return None
    idx = np.flatnonzero(stall & (np.asarray(delivered_workers) >= 0))
    if not len(idx):
        return None
    held: dict[int, int] = {}
    states: dict[str, int] = {}
    readings = asleep = 0
    cpu = wall = 0.0
    by_pid: dict[int, tuple] = {}
    for i in idx:
        w = int(delivered_workers[i])
        pids = (facts.get(int(steps["epoch"][i])) or {}).get("worker_pids") or []
        if w >= len(pids):
            continue
        pid = pids[w]
        if pid not in by_pid:
            by_pid[pid] = (samples[samples["pid"] == pid], _cpu_series(samples, pid))
        rows, series = by_pid[pid]
        a, b = int(steps["begin_ns"][i]), int(steps["fetch_done_ns"][i])
        inside = rows[(rows["t_ns"] >= a) & (rows["t_ns"] <= b)]
        held[w] = held.get(w, 0) + 1
        wall += (b - a) * 1e-9
        for code in inside["state"]:
            ch = chr(int(code)) if code > 0 else "?"
            states[ch] = states.get(ch, 0) + 1
            asleep += ch in worker_evidence.BLOCKED_STATES
        readings += len(inside)
        if series is not None and len(series[0]):
            cpu += float(_window_deltas(series, np.array([a], float), np.array([b], float))[0])
    if not held or readings == 0:
        return None
    cores = cpu / wall if wall > 0 else None
    making_share = None
    if making_ns is not None:
        known = idx[np.asarray(making_ns)[idx] >= 0]
        waits = (steps["fetch_done_ns"] - steps["begin_ns"])[known]
        if len(known) and waits.sum() > 0:
            making = np.minimum(np.asarray(making_ns)[known], waits)
            making_share = float(making.sum()) / float(waits.sum())
    return {"workers": held, "readings": readings, "asleep": asleep, "states": states,
            "cpu_s": cpu, "wall_s": wall, "cores": cores, "making_share": making_share,
            "blocked": worker_evidence.awaited_blocked(readings, asleep, cores, making_share)}


def batch_bytes(bytes_per_step: Optional[np.ndarray], steady: np.ndarray,
                tensors_per_step: Optional[np.ndarray] = None) -> Optional[dict]:
    """{median, max, measured, tensors_median} of the batch bytes the wrap
    iterator measured (the first 8 batches of each epoch and every 64th; -1
    where not measured), over every recorded step (a batch's size does not
    depend on whether its fetch was start-up), and the median count of
    tensors and arrays holding them (``tensors_per_step``, parallel, -1
    where not counted; None: not counted); None when no size was measured."""
    if bytes_per_step is None:
        return None
    b = np.asarray(bytes_per_step, dtype=np.int64)
    measured = b >= 0
    b = b[measured]
    if not len(b):
        return None
    tensors = None
    if tensors_per_step is not None:
        t = np.asarray(tensors_per_step, dtype=np.int64)[measured]
        t = t[t >= 0]
        tensors = float(np.median(t)) if len(t) else None
    return {"median": float(np.median(b)), "max": int(b.max()), "measured": int(len(b)),
            "tensors_median": tensors}


# --- GPU utilisation (NVML, traceml.gpu) ------------------------------------------------


def _util_kind(t: np.ndarray, starts: np.ndarray, ends: np.ndarray,
               kinds: np.ndarray) -> np.ndarray:
    """The kind (0 slow, 1 fast, -1 none) of the interval [start, end)
    holding each time of ``t``; the intervals are disjoint."""
    order = np.argsort(starts, kind="stable")
    starts, ends, kinds = starts[order], ends[order], kinds[order]
    at = np.searchsorted(starts, t, side="right") - 1
    ok = at >= 0
    out = np.full(len(t), -1, np.int8)
    inside = ok.copy()
    inside[ok] = t[ok] < ends[at[ok]]
    out[inside] = kinds[at[inside]]
    return out


def gpu_utilisation(steps: np.ndarray, stall: np.ndarray, steady: np.ndarray,
                    nvml: Optional[dict]) -> dict:
    """The ``utilisation`` entry of the ``gpu`` block: NVML's GPU
    utilisation in slow intervals (each stall's input wait, [begin,
    fetch_done)) against fast ones (the rest of steady-state time: calm
    steady steps [begin, end), stalls' [fetch_done, end)): the windows of
    :func:`slow_fast_windows`, as worker CPU's in :func:`intervals`.

    ``nvml`` is ``GpuTimeline.utilisation()``.  A reading belongs to the
    interval holding its timestamp (the end of the driver's window: a
    window that straddles an interval's edge counts whole on the side of
    its end).  Returns {available, why (None, or why there are no
    readings), uuid, period_s, error (NVML stopped mid-run: why),
    readings (in the steps' span), overwritten, dropped, window_s (the
    median spacing of the driver's samples, s: its window, the
    resolution), slow and fast ({readings, mean_pct, median_pct}), rule
    (gpu_wait.gpu_util_rule's code)}."""
    empty = {"readings": 0, "mean_pct": None, "median_pct": None}
    out = {"available": False, "why": None, "uuid": None, "period_s": None, "error": None,
           "readings": 0, "overwritten": 0, "dropped": 0, "window_s": None,
           "slow": dict(empty), "fast": dict(empty), "rule": None}
    if nvml is None:
        out["why"] = "not read"
        return out
    info = nvml.get("info") or {}
    out["uuid"] = nvml.get("uuid")
    if nvml.get("uuid") is None:
        out["why"] = nvml.get("why") or "no device"
        return out
    if info.get("uuid") != nvml["uuid"]:
        out["why"] = f"NVML reads another GPU in this process ({info.get('uuid')})"
        return out
    samples = np.asarray(nvml.get("samples"))
    if info.get("state") != "on" and not len(samples):
        out["why"] = info.get("error") or "NVML is off"
        return out
    if not nvml.get("sampler", True) and not len(samples):
        out["why"] = "the sampler thread, which reads NVML, is off (configure(sampler=False))"
        return out
    out.update(available=True, period_s=info.get("period_s"), error=info.get("error"),
               overwritten=int(info.get("overwritten") or 0),
               dropped=int(info.get("dropped") or 0))
    if len(samples) >= 2:
        gaps = np.diff(np.sort(samples["driver_us"]))
        gaps = gaps[gaps > 0]
        out["window_s"] = float(np.median(gaps)) * 1e-6 if len(gaps) else None
    if len(steps) and len(samples):
        lo, hi = steps["begin_ns"].min(), steps["end_ns"].max()
        samples = samples[(samples["t_ns"] >= lo) & (samples["t_ns"] < hi)]
    else:
        samples = samples[:0]
    out["readings"] = int(len(samples))
    windows = slow_fast_windows(steps, stall, steady)
    (slow_a, slow_b), (fast_a, fast_b) = windows["slow"], windows["fast"]
    starts, ends = np.r_[slow_a, fast_a], np.r_[slow_b, fast_b]
    kinds = np.r_[np.zeros(len(slow_a), np.int8), np.ones(len(fast_a), np.int8)]
    kind = (_util_kind(samples["t_ns"], starts, ends, kinds) if len(samples) and len(starts)
            else np.full(len(samples), -1, np.int8))
    for k, name in ((0, "slow"), (1, "fast")):
        v = samples["util_pct"][kind == k]
        out[name] = {"readings": int(len(v)),
                     "mean_pct": float(v.mean()) if len(v) else None,
                     "median_pct": float(np.median(v)) if len(v) else None}
    out["rule"] = gpu_wait.gpu_util_rule(out["slow"]["readings"], out["fast"]["readings"],
                                       out["slow"]["mean_pct"], out["fast"]["mean_pct"])
    return out
