"""Predict the fix from one run: the num_workers a loop needs, whether the
host has the cores for it, and the input wait each num_workers would give.

Pure functions of a report summary (numbers only; the sentences are in
:mod:`traceml.findings.prediction_check`).  Every quantity is a mean over the run's steady
steps, in seconds, measured inside the workers (:mod:`traceml.worker_timing`)
or by the step clock:

* ``T`` wall time a worker takes to make one batch, ``c`` its process's CPU
  over it (every thread's: a dataset's own threads take cores too), ``q`` its wait for a core (the kernel's schedstat), and
  ``o = T - c - q`` the rest: I/O, sleeps, locks;
* ``s`` the step's compute (step minus input wait) and ``h`` the hand-over
  per step (input wait while the awaited worker was not making batches);
* ``C`` usable CPUs, ``M`` the cores the main process kept busy (the
  sampler's readings; 1 when unread).

Cores are shared fairly among runnable threads: a worker that waited ``q``
for ``c`` of CPU got a share ``f = c / (c + q)`` of a core, so about
``R = C / f`` threads were runnable; ``n * u`` of them were this run's
workers (``u``: their busy share), the other ``L = R - n * u`` (the main
process, other programs) stay when num_workers changes.  A worker that
waited for no core (``f >= 0.95``) says only that cores were to spare:
then ``L = M``.  With ``k``
workers, all busy, each gets ``f_k = min(1, C / (k + L))`` of a core and
makes a batch in ``T_k = o + c / f_k``; the workers deliver ``k / T_k``
batches per second and the loop uses one per ``s + h``.  So the wait per
step is ``max(h, T_k / k - s)`` for ``k >= 1`` and ``o + c / f_0`` with
``k = 0`` (the main process makes the batch, no hand-over; ``f_0 = min(1,
C / max(1, L_0))``, ``L_0 = L - M + 1`` where ``M`` was read: the threads
the main process keeps busy computing pause during its fetch, and the one
making the batch runs instead; a 2-thread model beside 2 workers on 2
cores put num_workers=0 at 22.5-23.3 ms against 12.4 ms measured, helper
64).  The loop keeps up with the fewest ``k`` for which
``T_k / k <= s + h``, ``s`` the compute as measured (the rows the report
prints: workers that take the loop's cores slow it, and fewer keep up).  As ``k`` grows ``T_k / k`` falls towards ``c / C``
(every core making batches): when ``c / C > s + h`` no num_workers keeps
up, the wait per step cannot fall below ``(c + u s) / C - s`` (every core
busy with a batch's CPU and a step's, ``u`` the share of the compute on a
CPU: the loop's thread holds a core only while it computes), the dataset
must get ``c / (C (s + h) - u s)`` times cheaper per batch (at that pace
the loop computes all the time and leaves the workers ``C - u s / (s +
h)`` cores), or the loop needs ``c / (s + h)`` cores for its workers.
``s`` there is the compute less its wait for a core (:func:`quiet_compute`).  Without schedstat (``q`` unknown)
the workers are taken to have had a core each (``f = 1``, ``L = M``).

Assumptions (each stated in the report): batches go to workers round
robin and ``prefetch_factor`` keeps every worker busy; the workers share no
lock (a dataset that serialises them makes ``T_k`` grow with ``k``); ``o``
and ``c`` do not change with ``k``; the rest of the host's load stays as
it was.  The one check a single run allows is made: the model's wait at
this run's num_workers beside the measured mean wait (``this_run``);
:func:`traceml.sweep` shows the same for each condition it runs.

The means leave out stuck steps (a batch made, or a fetch waited, for the
stuck watch's ``stuck_after_s`` or more): a stuck fetch is an event the
headline reports, not the rate the workers keep, and one 10 s batch among
120 would add 83 ms to a 0.3 ms mean.  The check uses the same steps.

Trust (:func:`traceml.findings.prediction_check.prediction_trust`): when the check misses by
more than ``prediction_check.PREDICT_FIT_TOL`` of the measured mean step, the model
does not fit the run and the report gives its check but no num_workers
advice; likewise when the attribution names one worker (ONE-WORKER) or
slow samples (SLOW-SAMPLE), which break "equal workers, round robin".
"""

from __future__ import annotations

import math
from typing import Optional

from .findings import prediction_check

# The num_workers the prediction table covers (besides the run's own).
WORKER_GRID = (0, 1, 2, 4, 8, 16)
# Largest num_workers the model names as "keeps up"; past this the
# prediction says none does.
MAX_WORKERS = 64
# The model needs the workers' timing on this share of the steady steps
# (input_bound.PRODUCTION_MIN_COVERAGE's reason).
MIN_COVERAGE = 0.9
# A worker that got at least this share of a core while making batches
# waited for none: the host had cores to spare, and the other load is the
# main process's measured use of the cores.
SHARE_CONTENDED = 0.95


def main_cores(summary: dict) -> Optional[float]:
    """The cores the main process kept busy over the steady steps (the
    sampler's CPU readings in the stall and calm intervals together), or
    None without readings."""
    iv = ((summary.get("workers") or {}).get("intervals")) or {}
    cpu = wall = 0.0
    for kind in ("slow", "fast"):
        part = iv.get(kind) or {}
        if part.get("main_cpu_s") is None:
            continue
        cpu += part["main_cpu_s"]
        wall += part.get("wall_s") or 0.0
    return cpu / wall if wall > 0 else None


def quiet_compute(compute_s: float, body: Optional[dict]) -> tuple[float, float]:
    """(the loop's compute per step without its wait for a core, the
    cores its thread keeps busy computing): ``compute_s`` the measured mean
    compute (s), ``body`` wait_split.body_split of the compute (its parts:
    on a CPU, waiting for a core, off CPU).  The wait for a core is the
    host's or the workers', not the model's, and a prediction of what
    keeps up on a quiet host leaves it out: a 5 ms CPU step stretched to
    12 ms by two busy workers made "make each batch 1.6x cheaper" of an
    8x shortfall.  Without a body split: (compute_s, 0.0)."""
    total = (body or {}).get("compute_s") or 0.0
    if total <= 0:
        return compute_s, 0.0
    parts = body.get("parts_s") or {}
    quiet = compute_s * max(0.0, 1.0 - parts.get("cpu_wait", 0.0) / total)
    on_cpu = compute_s * parts.get("main_cpu", 0.0) / total
    return quiet, (min(1.0, on_cpu / quiet) if quiet > 0 else 0.0)


def core_share(k: int, cpus: float, other_runnable: float) -> float:
    """The share of a core each of ``k`` busy workers gets (fair sharing
    of ``cpus`` among them and ``other_runnable`` other threads)."""
    return min(1.0, cpus / max(k + other_runnable, 1e-9))


def make_time_with(k: int, cpu_s: float, off_cpu_s: float, cpus: float,
                   other_runnable: float) -> float:
    """``T_k``: a worker's time to make a batch (s) with ``k`` busy workers
    sharing the cores (k >= 1)."""
    return off_cpu_s + cpu_s / core_share(k, cpus, other_runnable)


def wait_with(k: int, cpu_s: float, off_cpu_s: float, compute_s: float,
              handover_s: float, cpus: float, other_runnable: float) -> float:
    """The model's input wait per step (s) with ``k`` workers."""
    if k <= 0:
        return off_cpu_s + cpu_s / core_share(0, cpus, max(1.0, other_runnable))
    t_k = make_time_with(k, cpu_s, off_cpu_s, cpus, other_runnable)
    return max(handover_s, t_k / k - compute_s)


def held_wait_with(k: int, cpu_s: float, off_cpu_s: float, compute_s: float,
                   handover_s: float, workers_cores: float) -> float:
    """The model's wait per step (s) with ``k`` workers sharing the
    ``workers_cores`` cores this run's workers had (their count times the
    share of a core each got, where they waited for one), none taken from
    other threads.  Fair sharing among every runnable thread of the host
    (``wait_with``) gives more workers more cores; a host that shares its
    cores by process group (a container, a cgroup, systemd's slices) does
    not, and there more workers of pure CPU shorten nothing (helper 34A:
    the model put
    num_workers=16 at 14.1 ms against 21.8 at 4 on 2 busy cores; the sweep
    measured 25.7-45.9, 28.3-31.3 and 29.2-37.8 ms at 4, 8 and 16)."""
    return wait_with(k, cpu_s, off_cpu_s, compute_s, handover_s, workers_cores, 0.0)


def predict(summary: dict) -> Optional[dict]:
    """The ``prediction`` block of a report summary, or None when the
    workers' own timing is missing or covers under MIN_COVERAGE of the
    steady steps.  Keys (seconds): make_s, cpu_s, runq_s (None: unknown),
    off_cpu_s, compute_s, handover_s (the model's inputs), usable_cpus,
    core_share (what a worker got this run), other_runnable,
    other_runnable_no_workers (L_0, above), num_workers,
    keeps_up_with (the fewest workers that keep up, None when none up to
    MAX_WORKERS does on this host), keeps_up_held_wait_s (where that is
    past num_workers and the workers waited for a core: its wait with the
    workers' cores held, :func:`held_wait_with`), worker_cores_needed,
    enough_cores,
    wait_floor_s (0 when some num_workers keeps up), cheaper_by (None when
    the dataset need not get cheaper; against the cores the loop's own
    thread leaves the workers), main_cores (the cores the loop's thread
    keeps busy at the pace that keeps up), step_floor_s (the least step
    at any num_workers: every core busy with a batch's CPU and a step's
    compute; no row of ``by_workers`` with workers makes a step under it
    with the compute as measured) and quiet_compute_s
    (:func:`quiet_compute`: the loop's pace and the workers' cores leave
    out the compute's wait for a core), by_workers [{num_workers, wait_s,
    and past num_workers, where the workers waited for a core,
    held_wait_s}],
    this_run {num_workers, predicted_wait_s, measured_wait_s, error
    (relative to the measured wait), measured_step_s, miss_of_step
    (|predicted - measured| over the measured mean step)},
    left_out_stuck (steps left out of the means: stuck), trust
    (prediction_check.PREDICT_*: only "trusted" carries num_workers advice; the
    numbers are kept either way), assumptions (codes)."""
    prod = summary.get("production") or {}
    host = summary.get("host") or {}
    loader = summary.get("loader") or {}
    if not prod.get("available") or not prod.get("make_s") or not prod.get("cpu_s"):
        return None
    if prod.get("coverage", 0.0) < MIN_COVERAGE:
        return None
    cpus = host.get("usable_cpus")
    n = loader.get("num_workers")
    compute = (summary.get("compute_s") or {}).get("mean")
    if not cpus or not n or compute is None:
        return None
    # The means without stuck batches (worker_timing's ``model`` block;
    # run files and hand-made summaries without it: the plain means).
    model = prod.get("model") or {}
    make = model.get("make_s") or prod["make_s"]["mean"]
    cpu = min(model.get("cpu_s") or prod["cpu_s"]["mean"], make)
    runq = model["runq_s"] if "runq_s" in model else (prod.get("runq_s") or {}).get("mean")
    handover = (model["handover_s"] if model.get("handover_s") is not None
                else (prod.get("handover_s") or {}).get("mean") or 0.0)
    busy = prod.get("busy_share") or 0.0
    main = main_cores(summary)
    idle_host = 1.0 if main is None else main
    if runq is not None and cpu + runq > 0:
        runq = min(runq, make - cpu)
        share = cpu / (cpu + runq) if cpu > 0 else 1.0
        # Without a wait for a core, the only other load known is the main
        # process's own (the sampler's reading; 1 core when unread).
        other = max(0.0, cpus / share - n * busy) if share < SHARE_CONTENDED else idle_host
        off_cpu = max(0.0, make - cpu - runq)
    else:
        share, other = 1.0, idle_host
        off_cpu = max(0.0, make - cpu)
    quiet, main_busy = quiet_compute(compute, (summary.get("wait_parts") or {}).get("compute"))
    per_step = quiet + handover
    # The loop's own CPU a step: its thread holds a core only while it
    # computes, and while it waits the workers can have that core too.
    loop_cpu = main_busy * quiet
    # At the pace that keeps up the loop computes all the time, which
    # leaves the workers the host's cores less loop_cpu / per_step.
    main_at_pace = loop_cpu / per_step if per_step > 0 else 0.0
    cpus_w = max(cpus - main_at_pace, 1e-9)
    args = (cpu, off_cpu, compute, handover, cpus, other)
    # At num_workers=0 the main process makes the batch while its compute
    # pauses: the threads it keeps busy computing (``main``, part of
    # ``other``) give way to the one making the batch.
    other_0 = other if main is None else max(1.0, other - main + 1.0)
    args_0 = (cpu, off_cpu, compute, handover, cpus, other_0)
    # The least step at any num_workers: every core busy with one batch's
    # CPU and one step's compute, (c + loop_cpu) / C; the wait is what of
    # it the quiet compute leaves.
    step_floor = (cpu + loop_cpu) / cpus

    def at(k: int) -> float:
        # With workers, never a step (this wait and the compute as
        # measured) under step_floor: the fair-share model alone lets the
        # workers take the loop's core while it computes.
        return _at_least_the_step_floor(k, wait_with(k, *(args_0 if k == 0 else args)),
                                        step_floor, compute)

    def held(k: int) -> Optional[float]:
        # The same with the workers' cores held at this run's; None where
        # they waited for no core (cores to spare: more take idle ones).
        if share >= SHARE_CONTENDED:
            return None
        return _at_least_the_step_floor(
            k, held_wait_with(k, cpu, off_cpu, compute, handover, n * share),
            step_floor, compute)

    # The fewest workers whose predicted wait is the hand-over alone, read
    # from the same rows the report prints (the compute as measured).  Read
    # against the quiet compute instead, "num_workers=6 keeps up" sat above
    # rows putting 2 workers at the hand-over (helper 31A, 3 of 3 runs),
    # and "no num_workers keeps up" above a row at it (6 of 6): the
    # workers' share of the cores slows the loop, which is how fewer keep
    # up.  The quiet compute still sets what no num_workers reaches.
    keeps_up = next((k for k in range(1, MAX_WORKERS + 1)
                     if at(k) <= handover * (1 + 1e-9)), None)
    floor = max(0.0, step_floor - quiet) if keeps_up is None else 0.0
    needed = cpu / per_step if per_step > 0 else math.inf
    grid = sorted(set(WORKER_GRID) | {int(n)})

    held_up = held(keeps_up) if keeps_up is not None and keeps_up > n else None
    predicted_here = at(int(n))
    if model.get("wait_s") is not None:
        measured, step = model["wait_s"], model.get("step_s")
    else:
        measured = (summary.get("input_wait_s") or {}).get("mean")
        step = (summary.get("step_s") or {}).get("mean")
    main_fetch = _main_fetch_s(summary)
    sampler_fetch = _sampler_fetch_s(summary)
    tail = _tail(prod, make)
    pf = loader.get("prefetch_factor") or 2
    trust, miss = prediction_check.prediction_trust(predicted_here, measured, step,
                                          (summary.get("attribution") or {}).get("label"))
    return {
        "make_s": make, "cpu_s": cpu, "runq_s": runq, "off_cpu_s": off_cpu,
        "compute_s": compute, "handover_s": handover, "usable_cpus": cpus,
        "core_share": share, "other_runnable": other, "other_runnable_no_workers": other_0,
        "num_workers": int(n),
        "keeps_up_with": keeps_up,
        **({"keeps_up_held_wait_s": held_up} if held_up is not None else {}),
        "worker_cores_needed": needed,
        "enough_cores": keeps_up is not None,
        "wait_floor_s": floor,
        "cheaper_by": (cpu / (cpus_w * per_step) if keeps_up is None and per_step > 0
                       else None),
        "main_cores": main_at_pace, "quiet_compute_s": quiet,
        "step_floor_s": step_floor,
        "by_workers": [{**_row(k, at(k), main_fetch, sampler_fetch,
                               held(k) if k > n else None),
                        **_exposed(k, tail, pf, compute + handover, cpu, off_cpu, cpus, other)}
                       for k in grid],
        "this_run": {"num_workers": int(n), "predicted_wait_s": predicted_here,
                     "measured_wait_s": measured,
                     "error": ((predicted_here - measured) / measured
                               if measured else None),
                     "measured_step_s": step, "miss_of_step": miss},
        "left_out_stuck": int(model.get("left_out") or 0),
        "trust": trust,
        "assumptions": ["round_robin", "prefetch_deep", "no_shared_lock", "load_steady"],
    }


def _at_least_the_step_floor(k: int, wait_s: float, step_floor_s: Optional[float],
                             compute_s: float) -> float:
    """``wait_s`` with ``k`` workers, raised where it and ``compute_s``
    make a step under ``step_floor_s`` (every core busy: no num_workers
    goes under it); at k = 0 the main process makes the batch itself."""
    if k < 1 or step_floor_s is None:
        return wait_s
    return max(wait_s, step_floor_s - compute_s)


def _main_fetch_s(summary: dict) -> Optional[float]:
    """The main process's own CPU a clocked fetch (s; wait_parts' main_cpu
    over its fetches), None where not measured or 0.  At num_workers=0
    the batch is made in the main process; of this run's main CPU in the
    fetch, the sampler's next() (a custom Sampler runs there at any
    num_workers) stays and receiving the batch goes, and the clock does
    not tell the two apart: the num_workers=0 row gives both ends."""
    split = ((summary.get("wait_parts") or {}).get("all")) or {}
    main = (split.get("parts_s") or {}).get("main_cpu")
    if not main or not split.get("fetches"):
        return None
    return main / split["fetches"]


def _sampler_fetch_s(summary: dict) -> Optional[float]:
    """The sampler's time a clocked fetch (s; wait_parts' ``sampler`` part
    over its fetches, where the sampler was timed), else None.  It stays
    at any num_workers: the DataLoader draws the indices in the main
    process (a sampler sleeping 16 ms a batch read "num_workers=0: 453 us
    to 1.28 ms" against 17.2 ms measured there, helper 29C)."""
    split = ((summary.get("wait_parts") or {}).get("all")) or {}
    part = (split.get("parts_s") or {}).get("sampler")
    if not part or not split.get("fetches"):
        return None
    return part / split["fetches"]


def _tail(prod: dict, make: float) -> Optional[float]:
    """The steady batches' p95 make time over their mean (at least 1), or
    None where either is unknown."""
    p95 = (prod.get("make_s") or {}).get("p95")
    return max(1.0, p95 / make) if p95 and make else None


def _exposed(k: int, tail: Optional[float], pf: int, per_step: float, cpu: float,
             off_cpu: float, cpus: float, other: float) -> dict:
    """{slow_batch_s, look_ahead_s} where the slow batches outlast what the
    look-ahead holds at ``k`` workers (``tail``: :func:`_tail`; ``pf`` the
    prefetch_factor; ``per_step`` the loop's use of a batch), else {}.

    The model's rows are means: a batch that takes T_p95 (the steady
    batches' p95 make time, scaled to k workers' share of the cores as the
    mean is) is hidden only while the loop still has batches in hand,
    about k x prefetch_factor of them at one per step (compute plus
    hand-over) in order.  Where it outlasts them the loop stalls on it,
    whatever the mean says: every 6th batch 100 ms, 20 ms steps,
    prefetch_factor=4: 0 stalls at 2 workers (8 batches, 164 ms ahead) and
    7 stalls, 3x the wait, at 1 (4 batches, 82 ms), which the mean row put
    at the hand-over (helper 37A, 6 of 6).  Not at num_workers=0 (no
    look-ahead: the row's mean holds every batch)."""
    if k <= 0 or tail is None or per_step <= 0:
        return {}
    slow = make_time_with(k, cpu, off_cpu, cpus, other) * tail
    ahead = k * pf * per_step
    return {"slow_batch_s": slow, "look_ahead_s": ahead} if slow > ahead else {}


def _row(k: int, wait_s: float, main_fetch: Optional[float],
         sampler: Optional[float] = None, held_s: Optional[float] = None) -> dict:
    if k == 0 and sampler:
        # The model's num_workers=0 wait is the batch's making; the
        # sampler's next() runs in the fetch besides it.
        wait_s = wait_s + sampler
    if k == 0 and main_fetch:
        return {"num_workers": 0, "wait_s": wait_s, "main_fetch_s": main_fetch}
    if held_s is not None:
        return {"num_workers": k, "wait_s": wait_s, "held_wait_s": held_s}
    return {"num_workers": k, "wait_s": wait_s}


def wait_for(prediction: dict, num_workers: int) -> float:
    """The wait per step (s) a ``prediction`` block gives for
    ``num_workers`` (any, not only its table's)."""
    p = prediction
    k = int(num_workers)
    return _at_least_the_step_floor(
        k, wait_with(k, p["cpu_s"], p["off_cpu_s"], p["compute_s"], p["handover_s"],
                     p["usable_cpus"], p.get("other_runnable_no_workers", p["other_runnable"])
                     if k == 0 else p["other_runnable"]),
        p.get("step_floor_s"), p["compute_s"])


def against_runs(rows: list[dict], predictions: list[Optional[dict]]) -> Optional[dict]:
    """Predicted against measured mean wait for each sweep row: the first
    row with a prediction is the basis, and each row whose condition
    differs from the basis's in num_workers alone gets ``predicted_s`` and
    ``predicted_error`` (relative to its measured mean wait).  Returns
    {basis (row index), rows (indices predicted)} or None without a
    basis, or where those rows hold one num_workers only (a sweep of
    prefetch_factor or in_order: the model predicts across num_workers
    alone, so it has nothing to say about what was varied)."""
    basis = next((i for i, p in enumerate(predictions) if p), None)
    if basis is None:
        return None
    base_cond = {k: v for k, v in rows[basis]["condition"].items() if k != "num_workers"}
    same = [i for i, row in enumerate(rows)
            if {k: v for k, v in row["condition"].items() if k != "num_workers"} == base_cond
            and row.get("loader_num_workers") is not None and row.get("mean_s") is not None]
    if len({rows[i]["loader_num_workers"] for i in same}) < 2:
        return None
    done = []
    for i in same:
        row = rows[i]
        k = row["loader_num_workers"]
        predicted = wait_for(predictions[basis], k)
        row["predicted_s"] = predicted
        row["predicted_error"] = ((predicted - row["mean_s"]) / row["mean_s"]
                                  if row["mean_s"] else None)
        done.append(i)
    return {"basis": basis, "rows": done}
