"""Host contention: the stalls' time spent waiting for a CPU.

A wait is a stall of the loader only if the loader made it.  On a full
host (a CPU hog beside the job, more runnable threads than cores) the
worker making the awaited batch sits in the run queue, and the main
thread, once its batch is ready, waits for a core too: real waits, whose
cause is the host.  The sampler reads every thread's run-queue delay
(/proc/PID/task/TID/schedstat: the main process and each worker) and
evidence.intervals() sums it over the stall windows (each stall's input
wait).  The measured part of the stall time spent waiting for a CPU is

    (the main process's run-queue wait + the workers' mean run-queue wait)
    / the stall windows' wall time,

(each process's wait summed over its threads: torch's intra-op threads
queued beside the loop's count too, so a main process of several busy
threads can reach the cap of 1 alone),

the workers' mean standing in for the awaited worker's (all of them
stand in the same run queue).

Not all of that wait is the host's.  4 workers on 2 cores wait for each
other: the loader's own demand for CPU exceeds the cores, and that is
the loader's cost (the seed investigation's 4 workers on a 2-CPU Colab
host), not the host's.  The CPU time the job's threads waited for that
other programs can have taken is at most the CPU the job itself left
unused in the stall windows:

    spare = usable CPUs x stall wall time - (main process's CPU + the
            workers' CPU), at least 0,

and no more than other programs ran on the host in those windows: under
the kernel's fair sharing, a CPU-second another program runs while one of
the job's threads waits for a core delays the job by at most that second
(the sampler reads every core's busy time from /proc/stat; less the job's
own CPU, that is the others' CPU).  So of the job's total run-queue wait Q
(main thread + every worker's), at most

    min(1, spare / Q, others' CPU / Q)

is the host's; the measured share above is scaled by that.  The second
bound is what tells 4 workers pinned to one core (their wait is each
other's, while the job's other core sits idle: spare is large, the
others' CPU near 0) from the same loop beside a CPU hog.  When the
host's part is the larger part of the stall time (HOST_WAIT_SHARE), the
report says so and its next step is the host's, replacing the readings
and experiments that would blame the loader's pattern.

The same bound, over every clocked fetch rather than the stalls, splits
the input wait's waits for a core (traceml.wait_split's host_cpu_wait);
where that part is the largest, the diagnosis is HOST-BOUND and this
family's ``host_bound`` is the next step.

The sampler's stall windows hold every worker's wait for a core, the
awaited worker's or not; where the stalls' own clocks were read
(``wait_parts.stalls``, with the host), they say which waits were in the
loop's way: the loop's thread waiting for a core, and the awaited worker
while it made the batch.  A worker queued beside a batch already made
delays nothing.  There, the host's share of the stall time is the clocked
stalls' ``host_cpu_wait`` over their wait, and the sampler's figure only
words it.
"""

from __future__ import annotations

from typing import Optional

from ..fmt import fmt_s, pct
from . import input_bound
from ._types import Finding, Words

# "The larger part": at least half of the stall time waiting for a CPU,
# the same majority the other families call "most".
HOST_WAIT_SHARE = 0.5

# The readings and experiments about the loader's own pattern that a full
# host makes moot (traceml.findings.advice and the evidence families): the
# waits' shape, cadence and trend, which a host's waits for a core make
# and unmake.  Not the attribution to one worker or to particular samples
# (one_worker, split_shards, slow_sample, slow_collate): those compare the workers'
# batches with each other, and a full host delays every worker alike, so
# they follow the host's next step as further readings.
_PATTERN_CODES = frozenset((
    "heavy_tailed", "periodic_on_top", "stalls_on_top", "too_few_stalls", "irregular",
    "unsettled", "lockstep", "uneven_batches", "vary_workers_then_in_order", "period_not_workers",
    "confirm_period", "period", "wrap_to_compare_period", "compare_in_order", "in_order_seen",
    "slow_samples_one_loader", "overtaking", "overtaking_round",
    "vary_workers_around", "vary_workers_or_prefetch", "trend", "trend_next"))
SUPERSEDES = {"host_contention": _PATTERN_CODES, "host_bound": _PATTERN_CODES}
ONLY_REPLACING: frozenset = frozenset()


def measure(s: dict) -> dict | None:
    """{cpu_wait_s (per stall), share (of the stall time, waiting for a
    CPU), others_fraction (the part of it other programs can have caused:
    min(1, spare / Q, others' CPU / Q), see above; a bound not read is left
    out, 1.0 where neither was), host_share (share x others_fraction),
    own_cores (the job's CPU-s per stall wall-s, or None), others_cores
    (other programs' CPU-s per stall wall-s, from /proc/stat, or None),
    main_s, workers_s (per stall: the main process's run-queue wait, its
    threads summed, and the workers' mean), stalls, cpus, num_workers} from the sampler's stall
    windows, or None where the run-queue wait was not read or there were
    no stalls."""
    iv = (s.get("workers") or {}).get("intervals") or {}
    slow = iv.get("slow") or {}
    wall, count = slow.get("wall_s"), slow.get("count")
    main, workers = slow.get("main_runq_wait_s"), slow.get("runq_wait_s")
    if not count or not wall or (main is None and workers is None):
        return None
    nw = (s.get("loader") or {}).get("num_workers") or 0
    per_worker = (workers or 0.0) / max(nw, 1) if nw else 0.0
    waited = (main or 0.0) + per_worker
    share = min(1.0, waited / wall)
    cpus = (s.get("host") or {}).get("usable_cpus")
    main_cpu, workers_cpu = slow.get("main_cpu_s"), slow.get("worker_cpu_s")
    own = None if main_cpu is None and workers_cpu is None else (main_cpu or 0.0) + (workers_cpu or 0.0)
    queued = (main or 0.0) + (workers or 0.0)
    others_cpu = slow.get("others_cpu_s")
    others = 1.0
    if own is not None and cpus and queued > 0:
        others = min(others, max(0.0, cpus * wall - own) / queued)
    if others_cpu is not None and queued > 0:
        others = min(others, others_cpu / queued)
    return {"cpu_wait_s": waited / count, "share": share, "others_fraction": others,
            "host_share": share * others,
            "own_cores": None if own is None else own / wall,
            "others_cores": None if others_cpu is None else others_cpu / wall,
            "main_s": (main or 0.0) / count, "workers_s": per_worker / count,
            "stalls": int(count), "cpus": cpus, "num_workers": nw}


def superseded_by(f: Finding) -> frozenset:
    """The next-step codes the item ``f`` replaces (SUPERSEDES); none
    where the stalls outlast the host's part (``loader_own``)."""
    if f.numbers.get("loader_own"):
        return frozenset()
    return SUPERSEDES.get(f.code, frozenset())


def follows_the_loader(f: Finding) -> bool:
    """Whether ``f`` ranks after the loader's own experiments: a host
    that stretched stalls the loader makes anyway (``loader_own``)."""
    return bool(f[1].get("loader_own"))


# prediction_check.PREDICT_TRUSTED (that family imports this one).
_TRUSTED = "trusted"
# Fewer workers are named beside a full host where the prediction puts
# their wait at most this share of this run's measured wait: a halving
# that the model's own check (PREDICT_FIT_TOL of the step) cannot blur.
FEWER_WORKERS_SHARE = 0.5


def fewer_workers(s: dict) -> Optional[dict]:
    """{num_workers, wait_s, now_s, now_workers}: the row of a trusted
    prediction with fewer workers than this run's whose predicted wait is
    the least of those rows and at most FEWER_WORKERS_SHARE of the measured
    mean wait; None otherwise.  The loader's own processes are part of a
    full host: 4 workers beside 4 spinning programs read HOST-BOUND, "run
    beside fewer processes ... before changing the loader", while their
    own prediction gave 0.5-0.9 ms at num_workers=0 against 2.5 ms
    measured, and num_workers=0 read COMPUTE-BOUND beside the same
    programs (helper 31B)."""
    p = s.get("prediction") or {}
    run = p.get("this_run") or {}
    now, n = run.get("measured_wait_s"), p.get("num_workers")
    if p.get("trust") != _TRUSTED or not now or not n:
        return None
    # A row's upper end: at num_workers=0 the main process's own fetch CPU
    # on top (prediction_check's two ends).
    # Not a row whose slow batches outlast its look-ahead: its mean wait
    # understates the stalls (predict._exposed).
    rows = [(r["wait_s"] + (r.get("main_fetch_s") or 0.0), r["num_workers"])
            for r in p.get("by_workers") or []
            if r["num_workers"] < n and r.get("slow_batch_s") is None]
    if not rows:
        return None
    wait, k = min(rows)
    if wait > FEWER_WORKERS_SHARE * now:
        return None
    return {"num_workers": int(k), "wait_s": float(wait), "now_s": float(now),
            "now_workers": int(n)}


def advise(s: dict) -> list[Finding]:
    """``host_bound`` where the diagnosis is HOST-BOUND (the largest
    measured part of the input wait is the host's: wait_parts.host_leads);
    else ``host_contention`` where waiting for a CPU that other programs
    can have taken is HOST_WAIT_SHARE or more of the stall time (see
    :func:`measure`); else nothing."""
    if s.get("diagnosis") == input_bound.HOST_BOUND:
        wp = s.get("wait_parts") or {}
        parts, host = (wp.get("all") or {}).get("parts_s") or {}, wp.get("host") or {}
        total = sum(parts.values())
        return [Finding("host_bound", {
            "share": s["input_share"],
            "host_share": parts.get("host_cpu_wait", 0.0) / total if total > 0 else 0.0,
            "others_cores": (host["others_cpu_s"] / host["wall_s"]
                             if host.get("wall_s") else None),
            "num_workers": (s.get("loader") or {}).get("num_workers"),
            "cpus": (s.get("host") or {}).get("usable_cpus"),
            **({"fewer": fewer} if (fewer := fewer_workers(s)) else {})})]
    m = measure(s)
    if m is None:
        return []
    clocked = (s.get("wait_parts") or {}).get("stalls") or {}
    parts = clocked.get("parts_s") or {}
    if clocked.get("runq_known") and "host_cpu_wait" in parts and clocked.get("wait_s"):
        # The stalls' clocks: only the waits for a core in the loop's way.
        m["host_share"] = parts["host_cpu_wait"] / clocked["wait_s"]
    if m["host_share"] < HOST_WAIT_SHARE:
        return []
    st = s.get("stalls") or {}
    median, line = st.get("stall_median_s"), st.get("threshold_s")
    if median is not None and line:
        # Without the host's part the median stall would still pass the
        # stall line: the host stretched the stalls, it did not make them;
        # the loader's own readings stay and lead (samples 500x the others'
        # CPU, stretched 2x beside a hog, read only "the host is full",
        # helper 30A).  Where the rule read the waits less their waits for
        # a core, the median stall is already without them (scaled again,
        # 60 ms of a 135 ms stall at num_workers=0 read 24 ms, under a
        # 31 ms line, and the host led: helpers 41A and 41B, 4 runs).
        rest = median if st.get("less_core_waits") else median * (1.0 - m["host_share"])
        m["loader_own"] = rest > line
        m["rest_s"], m["line_s"] = rest, line
    return [Finding("host_contention", m)]


def _host_bound_words(p: dict) -> str:
    others = (f" (other programs ran {p['others_cores']:.1f} cores' worth in those waits"
              + (f", on {p['cpus']} CPUs" if p.get("cpus") else "") + ")"
              if p.get("others_cores") is not None else "")
    return (f"Input is {pct(p['share'])} of step time, and the largest measured part of it "
            f"({pct(p['host_share'])}) is the loop or the awaited worker waiting for a core "
            f"that other programs held{others}: the host is full, and more workers would "
            "only queue for the same cores. "
            + (_fewer_words(p["fewer"]) if p.get("fewer") else
               "Next: run beside fewer processes (stop what else is running) and compare "
               "(traceml.compare) before changing the loader."))


def _fewer_words(f: dict) -> str:
    k, n = f["num_workers"], f["now_workers"]
    return (f"The loader's own workers are among those processes: the prediction below gives "
            f"num_workers={k} {fmt_s(f['wait_s'])} a step against {fmt_s(f['now_s'])} measured "
            f"at {n}. Next: traceml.sweep(make_loader, num_workers=({n}, {k})) beside the same "
            "load; fewer workers that keep up leave the cores to the loop.")


def fewer_receiving_words(f: dict) -> str:
    """The sentence for :func:`fewer_workers`' row ``f`` where the wait is
    receiving batches (the hand-over, the main process's CPU or the batch
    in transit): each batch a worker makes crosses processes at a cost per
    batch and per tensor, which fewer workers pay less often and none at
    num_workers=0 (one small tensor a batch waited 1.5-2.6 ms at 2 workers
    and 0.32 ms at 0, helper 32B, where "fewer tensors per batch" was all
    the advice)."""
    k, n = f["num_workers"], f["now_workers"]
    at_zero = " (no batch crosses processes there)" if k == 0 else ""
    return (f" The prediction below gives num_workers={k}{at_zero} {fmt_s(f['wait_s'])} a step "
            f"against {fmt_s(f['now_s'])} measured at {n}: try traceml.sweep(make_loader, "
            f"num_workers=({n}, {k})).")


WORDS: dict[str, Words] = {
    "host_bound": _host_bound_words,
    "host_contention": lambda p: (
        f"During the stalls the loop and its workers waited {fmt_s(p['cpu_wait_s'])} a "
        f"stall for a CPU ({pct(p['share'])} of the stall time; the main process's threads "
        f"{fmt_s(p['main_s'])} together, each worker's {fmt_s(p['workers_s'])}"
        + (f", {p['num_workers']} workers on {p['cpus']} CPUs" if p["cpus"] else "")
        + (f"; the job itself used {p['own_cores']:.1f} of the CPUs then"
           if p.get("own_cores") is not None and p["cpus"] else "")
        + (f", other programs {p['others_cores']:.1f}"
           if p.get("others_cores") is not None else "")
        + ("): the host stretched the stalls, but without its part the median stall "
           f"would still be {fmt_s(p['rest_s'])}, past the stall line ({fmt_s(p['line_s'])}): "
           "the loader makes them, and a quieter host only shortens them; to see by how "
           "much, run beside fewer processes (stop what else is running" if p.get("loader_own")
           else
           "): the host is full, so the stalls say more about it than about the loader. "
           "Next: run beside fewer processes (stop what else is running")
        # Fewer workers only where the job's own outnumber the cores:
        # 2 CPU-bound workers on 2 cores beside another program's core
        # need more CPU, not fewer workers (helper 29B).
        + (", or use fewer workers than cores"
           if p.get("cpus") and (p.get("num_workers") or 0) > p["cpus"] else "")
        + ") and compare (traceml.compare) before changing the loader."),
}
