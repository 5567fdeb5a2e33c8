"""The parts of the input wait, measured: numbers only.

On the fetches whose clocks wrap read (``Recorder.snapshot_fetch_clocks``:
the first 1024 of each epoch and every 1021st after), the fetching thread's
CPU time and run-queue wait inside the fetch split each wait into

- ``main_cpu``: the loop's thread on a CPU inside the fetch.  With
  ``num_workers=0`` that is the dataset and collate making the batch; with
  workers, receiving it (unpickling, rebuilding tensors, the reorder
  buffer);
- ``cpu_wait``: the loop's thread runnable but waiting for a core (the
  host, or the workers, holding every core);
- the rest, the thread asleep, split where the workers time their batches
  (``traceml.worker_timing``: the ns of each wait during which the awaited
  worker was making its batch) into ``worker_making`` (that overlap, at
  most the sleep) and ``in_transit`` (the batch made but not yet here:
  queued in its worker, pickled and sent by the worker's feeder thread, a
  worker waiting for a core to send it).  Of the overlap, the part the
  worker itself waited for a core (its batches' run-queue wait, spread
  over their make time: worker_timing.queued_during) is
  ``worker_cpu_wait``, the rest ``worker_making``.  Without worker timing
  the sleep is one part, ``asleep`` (with ``num_workers=0``: I/O, locks,
  sleep()).
- ``other_threads``: where the process's CPU clock was read beside the
  thread's (``others_cpu_ns``), the CPU time the main process's other
  threads took inside the fetch, taken out of the sleep's unexplained
  part (``in_transit``, or ``asleep``), at most all of it: a thread
  holding the GIL keeps the loop's thread from taking its batch (a batch
  made and sent reads as in transit without it), and the pin-memory
  thread copies each batch there.  Their CPU beside the loop's sleep is
  measured; that it delayed the loop is the model's reading.

Where the sampler read the host (``host_share``: at most that share of the
job's run-queue wait in the clocked fetches is other programs',
evidence.others_in_waits), that share of ``cpu_wait`` and of
``worker_cpu_wait`` is ``host_cpu_wait``: the loop or the awaited worker
waiting for a core that other programs held.  The rest stays the job's
own (more processes than cores).

- ``transit_cpu_wait``: of ``in_transit``, the part the awaited
  worker's threads waited for a core while its made batch was in transit
  (evidence.transit_queued: the sampler's reading of the worker's every
  thread, outside its making, spread over its batches' transit; the
  model, where the readings give totals a 20 ms): its queue's feeder
  pickling and sending, the fd sharer handing the main process each
  tensor's shared memory, the worker's main thread holding the GIL they
  need.  Beside two CPU hogs on 2 cores, healthy loops of sleeping
  workers waited 0.13 ms a fetch in transit on a quiet host and 0.85 ms
  beside the hogs, their workers' threads other than the main one
  0.05 s and 0.15 s for a core over 300 fetches: the hogs stretch the
  hand-over by holding the cores its threads need, which no change to
  the batch shortens.  With the host read, ``host_share`` of it is
  HOST_PART's, as for the other waits for a core.

- ``behind_worker``: of ``in_transit``, what is left after the above
  during which another worker was making a batch on a CPU
  (worker_timing.others_on_cpu_during over the made batch's transit, from
  its record's ``end_ns`` to the fetch's end): the workers send through one
  queue under one write lock, each worker's feeder thread needs its own
  process's GIL to send, and a worker running Python holds it, so a
  feeder holding the lock holds every worker's made batch.  Measured
  here: a pure-Python sample of 30 ms every 13th index, 2 workers, 200
  steps, read 35-41 % of the wait ``in_transit``; the same loop with the
  workers' switch interval at 0.2 ms read 0 %, and with the slow sample a
  sleep, 0-3 %.  The overlap is measured; that it held the batch is the
  model.

- ``others_cpu_wait``: where the sampler read the main process, the part
  of the sleep (after its other threads' CPU) during which the main
  process's other threads waited for a core (evidence.main_others_queued:
  the process's run-queue wait less the loop thread's, in the intervals
  the clocked windows cover, spread over them; the model): the index
  queues' feeder threads send each batch's indices to the workers, and a
  thread preempted while it holds the GIL keeps the loop from taking its
  batch.  Beside 4 CPU hogs on 2 cores a healthy loop of 256-byte batches
  read 28-31 % of the wait in transit without it.  With the host read,
  ``host_share`` of it is HOST_PART's.

- ``sampler``: where the DataLoader's sampler was timed in this process
  (worker_timing.time_sampler: each ``next()`` of its indices, wall and
  thread CPU), the time the loop's thread spent in it inside the fetch.
  torch draws the next batch's indices inside the fetch at any
  num_workers (at 0 before making the batch, with workers after the
  batch came and before the fetch returns), so that time is the wait's
  whatever else went on beside it.  It is measured on the loop's own
  thread, so it is taken out of the other parts first: its CPU out of
  ``main_cpu``, the rest out of the thread's sleep (before the awaited
  worker's overlap is read from it: a worker making the next batch
  while the loop sleeps in the sampler does not make the loop wait).
  A sampler that sleeps (a query, a file, a lock) showed as
  ``in_transit`` without it, and the hand-over's next step ("fewer or
  smaller tensors") went to 256-byte batches.  Its waits for a core stay
  in ``cpu_wait`` (and the host's part): a CPU-bound sampler beside CPU
  hogs read "the sampler 98-99%, other programs 0%", and its slow batches
  "not on CPU ... look for sleeps, I/O or locks" (helper 32B).

The parts of a fetch add up to its wait: the CPU time is capped at the
wait, the run-queue wait at what is left.

The step's body (its compute: from the batch in hand to the next fetch)
splits the same way where the next fetch was clocked too: ``main_cpu``,
``cpu_wait`` (the model's thread waiting for a core: workers or other
programs holding the cores) and ``off_cpu`` (a GPU sync, I/O, sleep).
"""

from __future__ import annotations

from typing import Optional

import numpy as np


PARTS_TIMED = ("worker_making", "worker_cpu_wait", "main_cpu", "cpu_wait", "other_threads",
               "others_cpu_wait", "sampler", "transit_cpu_wait", "behind_worker", "in_transit")
PARTS_UNTIMED = ("main_cpu", "cpu_wait", "other_threads", "others_cpu_wait", "sampler",
                 "asleep")
# Present only where the sampler's calls were timed (``sampler``).
SAMPLER_PART = "sampler"
# Present only where the process's CPU clock was read (others_cpu_ns).
OTHERS_PART = "other_threads"

# Present only where the sampler read the workers (transit_queued_ns).
TRANSIT_QUEUED_PART = "transit_cpu_wait"
# Present only where the sampler read the main process (others_queued_ns).
OTHERS_QUEUED_PART = "others_cpu_wait"
# Present only where the workers' batches were timed with their CPU.
BEHIND_PART = "behind_worker"
# The waits for a core that the host's share splits (HOST_PART).
CORE_WAITS = ("worker_cpu_wait", "cpu_wait", OTHERS_QUEUED_PART, TRANSIT_QUEUED_PART)

# Where the host was read: after cpu_wait in either list.
HOST_PART = "host_cpu_wait"
PARTS_BODY = ("main_cpu", "cpu_wait", "off_cpu")


def clocked_positions(clock_steps: np.ndarray, selected: Optional[np.ndarray],
                      n_records: int) -> np.ndarray:
    """Positions in the source's records (shape (m,), int64) of the clocked
    store steps ``clock_steps`` (indices into the whole store, in step
    order), and -1 for those of other sources or past ``n_records``;
    ``selected`` is the store's mask of the source (None: every record is
    the source's)."""
    steps = np.asarray(clock_steps, dtype=np.int64)
    ok = (steps >= 0) & (steps < n_records)
    if selected is None:
        return np.where(ok, steps, -1)
    mine = np.flatnonzero(selected)
    if not len(mine):
        return np.full(len(steps), -1, dtype=np.int64)
    pos = np.searchsorted(mine, np.where(ok, steps, 0))
    found = ok & (pos < len(mine)) & (mine[np.minimum(pos, len(mine) - 1)] == steps)
    return np.where(found, pos, -1)


def fetch_parts(wait_ns: np.ndarray, cpu_ns: np.ndarray, runq_ns: np.ndarray,
                making_ns: Optional[np.ndarray] = None,
                making_queued_ns: Optional[np.ndarray] = None,
                others_cpu_ns: Optional[np.ndarray] = None,
                sampler: Optional[tuple] = None,
                transit_queued_ns: Optional[np.ndarray] = None,
                behind_ns: Optional[np.ndarray] = None,
                others_queued_ns: Optional[np.ndarray] = None
                ) -> tuple[np.ndarray, dict]:
    """Each clocked fetch's parts (the model above), before any host share.

    The arguments are :func:`split`'s.  Returns ``(keep, parts)``: ``keep``
    (bool, shape (m,)) the fetches whose wait, CPU and (with worker
    timing) making were read, and ``parts`` ({part: int64 ns of each kept
    fetch, shape (kept,)}, in PARTS_TIMED or PARTS_UNTIMED order, the
    parts not read left out); a kept fetch's parts add up to its wait."""
    wait = np.asarray(wait_ns, dtype=np.int64)
    cpu = np.asarray(cpu_ns, dtype=np.int64)
    runq = np.asarray(runq_ns, dtype=np.int64)
    keep = (cpu >= 0) & (wait >= 0)
    making = None
    if making_ns is not None:
        making = np.asarray(making_ns, dtype=np.int64)
        keep &= making >= 0
    wait, cpu, runq_k = wait[keep], cpu[keep], runq[keep]
    on_cpu = np.minimum(cpu, wait)
    queued = np.minimum(np.maximum(runq_k, 0), wait - on_cpu)
    asleep = wait - on_cpu - queued
    in_sampler = None
    if sampler is not None:
        s_wall = np.minimum(np.maximum(np.asarray(sampler[0], dtype=np.int64)[keep], 0), wait)
        s_cpu = np.minimum(np.maximum(np.asarray(sampler[1], dtype=np.int64)[keep], 0),
                           np.minimum(s_wall, on_cpu))
        # Its time off CPU out of the thread's sleep only: a sampler
        # queued for a core waited for the core, which stays the queue's
        # part (the host's, where the host is read).
        from_sleep = np.minimum(s_wall - s_cpu, asleep)
        on_cpu, asleep = on_cpu - s_cpu, asleep - from_sleep
        in_sampler = s_cpu + from_sleep
    rest = asleep
    if making is not None:
        made = np.minimum(making[keep], rest)
        worker_queued = (np.zeros(len(made), dtype=np.int64) if making_queued_ns is None else
                         np.minimum(np.maximum(np.asarray(making_queued_ns,
                                                          dtype=np.int64)[keep], 0), made))
        rest = rest - made

    def take(part_ns: Optional[np.ndarray]) -> Optional[np.ndarray]:
        # The next measured part of the sleep, out of what is left of it.
        nonlocal rest
        if part_ns is None:
            return None
        part = _others(part_ns, keep, rest)
        rest = rest - part
        return part

    parts = {"main_cpu": on_cpu, "cpu_wait": queued, OTHERS_PART: take(others_cpu_ns),
             OTHERS_QUEUED_PART: take(others_queued_ns), SAMPLER_PART: in_sampler}
    if making is not None:
        transit_queued = take(transit_queued_ns)
        behind = take(behind_ns)
        parts = {"worker_making": made - worker_queued, "worker_cpu_wait": worker_queued,
                 **parts, TRANSIT_QUEUED_PART: transit_queued, BEHIND_PART: behind,
                 "in_transit": rest}
    else:
        parts["asleep"] = rest
    return keep, {k: v for k, v in parts.items() if v is not None}


def split(wait_ns: np.ndarray, cpu_ns: np.ndarray, runq_ns: np.ndarray,
          making_ns: Optional[np.ndarray] = None,
          making_queued_ns: Optional[np.ndarray] = None,
          host_share: Optional[float] = None,
          others_cpu_ns: Optional[np.ndarray] = None,
          sampler: Optional[tuple] = None,
          transit_queued_ns: Optional[np.ndarray] = None,
          behind_ns: Optional[np.ndarray] = None,
          others_queued_ns: Optional[np.ndarray] = None) -> Optional[dict]:
    """The summed parts of the clocked fetches' waits (:func:`fetch_parts`
    each, summed).

    ``wait_ns``, ``cpu_ns``, ``runq_ns`` (shape (m,), ns): each clocked
    fetch's input wait, its thread's CPU time and run-queue wait inside it
    (-1: unreadable, that fetch left out; a run-queue -1 everywhere, a
    kernel without schedstat, reads 0 wait for a core and says so);
    ``making_ns`` (shape (m,), -1 unknown; None: no worker timing): the ns
    of the wait during which the awaited worker made its batch;
    ``making_queued_ns`` (shape (m,), -1 unknown reads 0; None: 0) the ns
    of those during which it waited for a core; ``host_share`` (0 to 1;
    None: the host not read) the share of those waits for a core that is
    other programs', moved to HOST_PART (left out where None);
    ``others_cpu_ns`` (shape (m,), -1 unknown reads 0; None: not read, the
    part left out) the CPU ns of the process's other threads inside each
    fetch, the OTHERS_PART; ``sampler`` ((wall_ns, cpu_ns), each shape
    (m,); None: not timed, the part left out) the sampler's time and CPU
    inside each fetch, the SAMPLER_PART (see above); ``transit_queued_ns``
    (shape (m,), ns; None: not read, the part left out) the awaited
    worker's threads' wait for a core in its batch's transit, at most
    what is left of ``in_transit``, the TRANSIT_QUEUED_PART;
    ``behind_ns`` (shape (m,), ns, -1 unknown reads 0; None: not read, the
    part left out) the ns of each made batch's transit during which
    another worker made a batch on a CPU, at most what is left, the
    BEHIND_PART; ``others_queued_ns`` (shape (m,), ns, -1 unknown reads 0;
    None: not read, the part left out) the main process's other threads'
    wait for a core inside each fetch, at most what is left of the sleep
    after their CPU, the OTHERS_QUEUED_PART.  None when no fetch is left.  Returns {fetches, wait_s, parts_s ({part: s}, in
    PARTS_TIMED or PARTS_UNTIMED order, HOST_PART after cpu_wait),
    runq_known, and where the host was read with worker timing
    host_of_workers_s (the part of HOST_PART that was the awaited worker
    waiting for a core: still making the batch)}."""
    keep, parts = fetch_parts(wait_ns, cpu_ns, runq_ns, making_ns, making_queued_ns,
                              others_cpu_ns, sampler, transit_queued_ns, behind_ns,
                              others_queued_ns)
    if not keep.any():
        return None
    runq_known = bool((np.asarray(runq_ns, dtype=np.int64)[keep] >= 0).any())
    parts_s = {k: float(v.sum()) * 1e-9 for k, v in parts.items()}
    wait = np.asarray(wait_ns, dtype=np.int64)[keep]
    out = {"fetches": int(keep.sum()), "wait_s": float(wait.sum()) * 1e-9}
    if host_share is not None:
        h = min(1.0, max(0.0, float(host_share)))
        hosts = 0.0
        for k in CORE_WAITS:
            if k in parts_s:
                hosts += h * parts_s[k]
                if k == "worker_cpu_wait":
                    out["host_of_workers_s"] = h * parts_s[k]
                parts_s[k] *= 1.0 - h
        at = list(parts_s).index("cpu_wait") + 1
        items = list(parts_s.items())
        parts_s = dict(items[:at] + [(HOST_PART, hosts)] + items[at:])
    return {**out, "parts_s": parts_s, "runq_known": runq_known}


def _others(others_cpu_ns: np.ndarray, keep: np.ndarray, room: np.ndarray) -> np.ndarray:
    """The kept fetches' ns of a part taken from the sleep (the other
    threads' CPU, the transit's wait for a core, the transit behind another
    worker), -1 read as 0, at most
    ``room`` (the sleep they are taken from)."""
    others = np.maximum(np.asarray(others_cpu_ns, dtype=np.int64)[keep], 0)
    return np.minimum(others, room)


def body_split(compute_ns: np.ndarray, cpu_ns: np.ndarray,
               runq_ns: np.ndarray) -> Optional[dict]:
    """The summed parts of the clocked steps' bodies: ``compute_ns`` (shape
    (m,), ns) each step's time from its batch in hand to the next fetch,
    ``cpu_ns`` and ``runq_ns`` the loop thread's CPU time and run-queue
    wait over it (-1: not clocked, that step left out; a run-queue -1
    reads 0).  None when no step is left.  Returns {steps, compute_s,
    parts_s ({part: s} in PARTS_BODY order), runq_known}."""
    compute = np.asarray(compute_ns, dtype=np.int64)
    cpu = np.asarray(cpu_ns, dtype=np.int64)
    runq = np.asarray(runq_ns, dtype=np.int64)
    keep = (cpu >= 0) & (compute >= 0)
    if not keep.any():
        return None
    compute, cpu, runq = compute[keep], cpu[keep], runq[keep]
    on_cpu = np.minimum(cpu, compute)
    queued = np.minimum(np.maximum(runq, 0), compute - on_cpu)
    parts = {"main_cpu": on_cpu, "cpu_wait": queued, "off_cpu": compute - on_cpu - queued}
    return {"steps": int(keep.sum()), "compute_s": float(compute.sum()) * 1e-9,
            "parts_s": {k: float(v.sum()) * 1e-9 for k, v in parts.items()},
            "runq_known": bool((runq >= 0).any())}
