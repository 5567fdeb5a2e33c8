"""Host contention: the stalls' time spent waiting for a CPU.

A wait is a stall of the loader only if the loader made it.  On a full
host (a CPU hog beside the job, more runnable threads than cores) the
worker making the awaited batch sits in the run queue, and the main
thread, once its batch is ready, waits for a core too: real waits, whose
cause is the host.  The sampler reads every thread's run-queue delay
(/proc/PID/task/TID/schedstat: the main process and each worker) and
evidence.intervals() sums it over the stall windows (each stall's input
wait).  The measured part of the stall time spent waiting for a CPU is

    (main thread's run-queue wait + the workers' mean run-queue wait)
    / the stall windows' wall time,

the workers' mean standing in for the awaited worker's (all of them
stand in the same run queue).  When it is the larger part
(HOST_WAIT_SHARE), the report says so and its next step is the host's,
replacing the readings and experiments that would blame the loader's
pattern.
"""

from __future__ import annotations

from ..fmt import fmt_s, pct
from ._types import Finding, Words

# "The larger part": at least half of the stall time waiting for a CPU,
# the same majority the other families call "most".
HOST_WAIT_SHARE = 0.5

# The readings and experiments about the loader's own pattern that a full
# host makes moot (traceml.findings.advice and the evidence families).
_PATTERN_CODES = frozenset((
    "heavy_tailed", "periodic_on_top", "stalls_on_top", "too_few_stalls", "irregular",
    "unsettled", "lockstep", "vary_workers_then_in_order", "period_not_workers",
    "confirm_period", "period", "wrap_to_compare_period", "compare_in_order",
    "slow_samples_one_loader", "overtaking", "overtaking_round", "one_worker",
    "split_shards", "slow_sample", "vary_workers_around", "vary_workers_or_prefetch",
    "trend", "trend_next"))
SUPERSEDES = {"host_contention": _PATTERN_CODES}
ONLY_REPLACING: frozenset = frozenset()


def measure(s: dict) -> dict | None:
    """{cpu_wait_s (per stall), share (of the stall time), main_s, workers_s
    (per stall: the main thread's and the workers' mean run-queue wait),
    stalls, cpus, num_workers} from the sampler's stall windows, or None
    where the run-queue wait was not read or there were no stalls."""
    iv = (s.get("workers") or {}).get("intervals") or {}
    slow = iv.get("slow") or {}
    wall, count = slow.get("wall_s"), slow.get("count")
    main, workers = slow.get("main_runq_wait_s"), slow.get("runq_wait_s")
    if not count or not wall or (main is None and workers is None):
        return None
    nw = (s.get("loader") or {}).get("num_workers") or 0
    per_worker = (workers or 0.0) / max(nw, 1) if nw else 0.0
    waited = (main or 0.0) + per_worker
    return {"cpu_wait_s": waited / count, "share": min(1.0, waited / wall),
            "main_s": (main or 0.0) / count, "workers_s": per_worker / count,
            "stalls": int(count), "cpus": (s.get("host") or {}).get("usable_cpus"),
            "num_workers": nw}


def superseded_by(f: Finding) -> frozenset:
    """The next-step codes the item ``f`` replaces (SUPERSEDES)."""
    return SUPERSEDES.get(f.code, frozenset())


def advise(s: dict) -> list[Finding]:
    """``host_contention`` where waiting for a CPU is HOST_WAIT_SHARE or
    more of the stall time (see :func:`measure`); else nothing."""
    m = measure(s)
    if m is None or m["share"] < HOST_WAIT_SHARE:
        return []
    return [Finding("host_contention", m)]


WORDS: dict[str, Words] = {
    "host_contention": lambda p: (
        f"During the stalls the loop and its workers waited {fmt_s(p['cpu_wait_s'])} a "
        f"stall for a CPU ({pct(p['share'])} of the stall time; the main thread "
        f"{fmt_s(p['main_s'])}, each worker {fmt_s(p['workers_s'])}"
        + (f", {p['num_workers']} workers on {p['cpus']} CPUs" if p["cpus"] else "")
        + "): the host is full, so the stalls say more about it than about the loader. "
        "Next: run beside fewer processes (stop what else is running, or use fewer workers "
        "than cores) and compare (traceml.compare) before changing the loader."),
}
