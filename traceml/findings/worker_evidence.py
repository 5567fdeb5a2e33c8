"""What the sampled worker counters say about the stalls: CPU against
storage, the run queue, the awaited worker's state, worker processes.
"""

from __future__ import annotations

from typing import Optional


from ..fmt import fmt_bytes, fmt_s, pct
from ._types import Finding, Words
from . import attribution, bottom_line, wait_parts

# The reason a worker reading is missing when the loader has no worker processes.
NO_WORKERS = "no worker processes"


# During a stall, workers count as busy when they are runnable -- on a CPU
# or waiting in the run queue for one -- for at least half of the CPUs
# they could use (min(num_workers, usable CPUs)).  Counting run-queue wait
# keeps CPU-bound workers on an oversubscribed host from looking idle.
BUSY_SHARE = 0.5


# Run-queue wait counts as contention when, on average, at least half a
# worker was runnable but not running during stalls.
CONTENTION_RUNQ_PER_WALL = 0.5


# Reads below these rates during stalls are a trace (a page of a module, a
# log line, one fault), not a storage bottleneck: a loader held up by storage
# moves tens of MB/s or more.  1 MB/s is 256 pages of 4 KiB a second.
MIN_STALL_READ_BYTES_PER_S = 1e6
MIN_STALL_MAJOR_FAULTS_PER_S = 10.0


# Sampler readings kept around a report's steps: two sampler periods on
# either side, so that the counters at the first and last step's edges
# can be interpolated.
SAMPLE_MARGIN_PERIODS = 2


# The sampled state codes of a process asleep: S (interruptible sleep: a
# sleep, a socket or pipe read, a lock) and D (uninterruptible: disk I/O).
# The sampler derives a process's state from its threads (up to 64, from
# /proc/PID/task/TID/stat): R when any of them is running or runnable,
# else D when any is in D, else the main thread's.  So a worker whose main
# thread waits on a helper (a decoder thread, torch's intra-op threads)
# while the helper computes reads R, not S.
BLOCKED_STATES = ("S", "D")


# Blocked when at least half of the readings in the stalls' windows find it
# asleep and it keeps under BUSY_SHARE of a core busy meanwhile (a worker
# computing in threads reads R or shows CPU; a sleeping one neither).
BLOCKED_MIN_SHARE = 0.5


# A worker asleep during a stall is blocked only if it was making the
# awaited batch then: where the workers' own batch timing says it was
# making batches for under this share of the stalls' wait, the batch was
# made already and the worker slept because it had nothing to do (a user
# trial: a healthy in-memory loader whose hand-over blips read "the worker
# ... was blocked during stalls: sleeping or waiting on I/O" while its
# production line said busy 2%, hand-over 16% of step time).  Half: the
# same bar as BLOCKED_MIN_SHARE.
AWAITED_MAKING_MIN_SHARE = 0.5


# The workers' processes spend CPU outside the batches they make (threads
# a worker_init_fn or the dataset starts, a library's thread pool spinning)
# where their CPU over the steady steps (every thread: the sampler's slow
# and fast intervals) exceeds what their batches took (each batch's making
# thread: the workers' batch timing, scaled to every steady batch) by at
# least OUTSIDE_MIN_CORES cores and OUTSIDE_MIN_SHARE of it: cores taken
# from the loop that no batch needed.  Two workers each spinning a thread
# beside batches of 1 ms read "HAND-OVER ... in transit 42%" or "other
# programs holding the cores (58%)", and never that the workers held 1.6
# cores (helper 36B, 3 of 3).
OUTSIDE_MIN_CORES = 0.25
OUTSIDE_MIN_SHARE = 0.5
# The training step's wait for a core is said beside it from this share of
# its time (below it, a busy host's usual queueing).
OUTSIDE_COMPUTE_WAIT_SAID = 0.1


def outside_batches(s: dict) -> list[Finding]:
    """``workers_outside_batches`` {cores, batch_cores, outside_cores,
    compute_core_wait (the step's body's share waiting for a core, or
    None)} by the rule above; [] where the intervals or the workers'
    batch timing are not measured, or the rule does not hold."""
    iv = (s.get("workers") or {}).get("intervals")
    prod = s.get("production") or {}
    if not iv or not prod.get("available") or not prod.get("coverage"):
        return []
    slow, fast = iv["slow"], iv["fast"]
    if slow.get("worker_cpu_s") is None or fast.get("worker_cpu_s") is None:
        return []
    wall = slow["wall_s"] + fast["wall_s"]
    if not wall > 0:
        return []
    cores = (slow["worker_cpu_s"] + fast["worker_cpu_s"]) / wall
    batch_cores = prod["cpu_s"]["mean"] * prod["batches"] / prod["coverage"] / wall
    outside = cores - batch_cores
    if outside < OUTSIDE_MIN_CORES or outside < OUTSIDE_MIN_SHARE * cores:
        return []
    body = (s.get("wait_parts") or {}).get("compute") or {}
    waited = (body["parts_s"].get("cpu_wait", 0.0) / body["compute_s"]
              if body.get("compute_s") and body.get("runq_known") else None)
    return [Finding("workers_outside_batches", {
        "cores": cores, "batch_cores": batch_cores, "outside_cores": outside,
        "compute_core_wait": waited})]


# The workers' batches ran on other threads than the one that ran
# __getitem__ and collate_fn where, of their CPU (the workers' batch timing:
# every thread of the worker while it made a batch), at least this share
# was not the samples' and collate_fn's (each timed on its own thread).
# The null: every batch's work runs on the dataset's thread, and the rest
# (the queue's feeder sending a batch made before, a collection) is a few
# percent.  NumPy's OpenBLAS pool (2 threads a worker) beside 2 workers on
# 2 CPUs: 36% of the batches' CPU on its threads, the step 112-329 ms
# against 11-13 ms with one BLAS thread a worker, and no report named it
# (helper 37B, 10 of 10).
THREAD_POOL_MIN_SHARE = 0.2
# ... and the batches are made on a CPU, not blocked: their CPU (every
# thread) and their wait for a core at least this share of their mean make
# time.  A pool can only make a batch slow by its threads' CPU and the
# cores they hold; a worker that sleeps 120 ms a batch and spends 0.4 ms
# of CPU on its queue's feeder has 29% of its batch CPU on other threads,
# and threadpool_limits(1) cannot change its 120 ms (64 of 145 reports on
# datasets that only sleep, helper 39A).  The off-CPU line of
# slow_code.OFF_CPU_SHARE.
THREAD_POOL_ON_CPU_SHARE = 0.5


def thread_pool(s: dict) -> list[Finding]:
    """``workers_thread_pool`` {share (of the batches' CPU on other
    threads), pools (the native pools with more than one thread,
    host.thread_pools), num_workers, cpus, threads (num_workers x the
    largest pool's threads)} where the share is at least
    THREAD_POOL_MIN_SHARE, the batches' CPU and run-queue wait at least
    THREAD_POOL_ON_CPU_SHARE of their mean make time, and such a pool is
    loaded; [] where the
    workers' batch or per-sample timing is not measured, or the rule does
    not hold.  The samples' CPU a batch is their mean times the samples a
    batch; collate_fn's is bounded by its wall time."""
    host = s.get("host") or {}
    pools = [p for p in host.get("thread_pools") or [] if (p.get("threads") or 0) > 1]
    nw = (s.get("loader") or {}).get("num_workers")
    prod = s.get("production") or {}
    samples = prod.get("samples") or {}
    if not pools or not nw or not prod.get("available") or not samples.get("available"):
        return []
    batch_cpu = (prod.get("cpu_s") or {}).get("mean")
    make = (prod.get("make_s") or {}).get("mean")
    sample_cpu = (samples.get("sample_cpu_s") or {}).get("mean")
    if not batch_cpu or not make or sample_cpu is None or not samples.get("batches"):
        return []
    per_batch = sample_cpu * samples["samples"] / samples["batches"]
    collate = (samples.get("collate") or {}).get("mean_s") or 0.0
    runq = (prod.get("runq_s") or {}).get("mean") or 0.0
    share = (batch_cpu - per_batch - collate) / batch_cpu
    if share < THREAD_POOL_MIN_SHARE or batch_cpu + runq < THREAD_POOL_ON_CPU_SHARE * make:
        return []
    most = max(p["threads"] for p in pools)
    return [Finding("workers_thread_pool", {
        "share": share, "pools": pools, "num_workers": nw,
        "cpus": host.get("usable_cpus"), "threads": nw * most})]


def _thread_pool(p: dict) -> str:
    # NumPy and SciPy each load their own copy of a library: one entry, counted.
    seen: dict = {}
    for q in p["pools"]:
        key = (q["library"], q["api"], q["threads"])
        seen[key] = seen.get(key, 0) + 1
    pools = ", ".join(f"{lib} ({api}, {n} threads)" + (f" x{k}" if k > 1 else "")
                      for (lib, api, n), k in seen.items())
    crowd = (f"; where the samples call it, {p['num_workers']} workers run up to "
             f"{p['threads']} of its threads on {p['cpus']} CPUs"
             if p.get("cpus") and p["threads"] > p["cpus"] else "")
    # Loaded is not used: a dataset's own Python thread reads the same
    # share (a helper thread spinning 5 ms a sample, NumPy imported and no
    # BLAS call, read "2 workers run 4 of its threads", helper 38C, 3 of
    # 3); the experiment tells the two apart.
    return (f"{pct(p['share'])} of the workers' batch CPU ran on other threads than the one "
            "that ran __getitem__ and collate_fn: threads the dataset starts, or a native "
            "thread pool its samples call into, and this process loads one the workers run "
            f"too (threadpoolctl: {pools}; torch's own are set to one thread in workers, "
            f"NumPy's and SciPy's BLAS are not){crowd}. Next: one thread a worker, "
            "threadpoolctl.threadpool_limits(1) in worker_init_fn (or "
            "OPENBLAS_NUM_THREADS=1 / OMP_NUM_THREADS=1 before the workers start), compared "
            "on step time (traceml.compare): a step that falls was the pool; one that stays, "
            "the dataset's own threads (py-spy dump --pid <a worker's pid> names them).")


def _outside_batches(p: dict) -> str:
    waited = p.get("compute_core_wait")
    return (f"The workers' processes kept {p['cores']:.1f} cores busy over the steady steps, "
            f"their batches {p['batch_cores']:.1f} (each batch's making thread): "
            f"{p['outside_cores']:.1f} cores went to work outside the batches (threads a "
            "worker_init_fn or the dataset starts, a library's thread pool)"
            + (f", and the training step waited for a core {pct(waited)} of its time"
               if waited is not None and waited >= OUTSIDE_COMPUTE_WAIT_SAID else "")
            + ": find what runs in the workers besides making batches (py-spy dump --pid "
            "a worker's pid) before tuning the loader.")


def awaited_blocked(readings: int, asleep: int, cores: Optional[float],
                    making_share: Optional[float] = None) -> Optional[bool]:
    """Whether the worker holding the awaited batch was blocked during the
    stalls: ``asleep`` of ``readings`` readings in BLOCKED_STATES and
    ``cores`` (CPU-s per wall-s, all threads) under BUSY_SHARE, and, where
    the workers' batch timing is known, ``making_share`` (the stalls' wait
    during which it was making batches) at least AWAITED_MAKING_MIN_SHARE.
    None without readings."""
    if readings <= 0 or cores is None:
        return None
    if making_share is not None and making_share < AWAITED_MAKING_MIN_SHARE:
        return False
    return asleep / readings >= BLOCKED_MIN_SHARE and cores < BUSY_SHARE


CAVEATS = (
    "Caveats: read_bytes 0 does not rule out page-cache effects (a cached "
    "read costs CPU, not storage); nothing here measures CPU cache misses "
    "or isolates the scheduler."
)


# Once the stalls read from storage at all, "read_bytes 0" is not so (a
# loader reading 1 GB at the same rate in and out of stalls read it beside
# its reads, helper 30B).
CAVEATS_WITH_READS = ("Caveats: nothing here measures CPU cache misses or isolates "
                      "the scheduler.")


def _rate(amount: float, wall: float) -> str:
    return f"{amount / wall / 1e6:.1f} MB/s" if wall > 0 else "-"


def _storage(code: str, p: dict) -> str:
    """CPU-side work versus storage reads (evidence._storage_finding)."""
    who = "the main process" if p["who"] == "main" else "the workers"
    was = "was" if p["who"] == "main" else "were"
    reads, faults = p["read_bytes"], p["major_faults"]
    if code == "cpu_no_reads_anywhere":
        return ("read_bytes 0 and major faults 0 in both: the cost is CPU-side "
                "dataset processing, not storage reads.")
    if code == "cpu_no_reads":
        return (f"No storage reads or major faults during stalls while {who} {was} "
                "busy: the stalls are CPU-side dataset processing.")
    lighter = {
        "none": "",
        "trace": (f"; it read only {reads / 1e3:.0f} kB with {faults:.0f} major "
                  f"fault{'s' if faults != 1 else ''}: a trace, not a storage bottleneck"),
        "lighter": (f"; its reads ({reads / 1e6:.1f} MB, {_rate(reads, p['wall_s'])}) were no "
                    f"heavier than outside the stalls "
                    f"({_rate(p['fast_read_bytes'], p['fast_wall_s'])})"),
    }.get(p["reads"], "")
    if code == "cpu_light_reads":
        return (f"During stalls {who} {was} busy{lighter}: the stalls are CPU-side "
                "dataset processing, not storage reads.")
    if code == "idle":
        elsewhere = ("a sleep, a lock, the network" if p["who"] == "main"
                     else "IPC, the main process, locks")
        largest = p.get("largest")
        if largest:
            where = (f"; its largest measured part ({pct(largest['share'])} of the stalls' "
                     f"wait) is {wait_parts.PART_NAMES[largest['part']]}")
        else:
            where = f" ({elsewhere})"
        return (f"During stalls {who} {was} mostly idle"
                + (" and read nothing from storage" if p["reads"] == "none" else lighter)
                + f": the wait lies elsewhere{where}.")
    heavy = (f"{reads / 1e6:.1f} MB from storage ({_rate(reads, p['wall_s'])} against "
             f"{_rate(p['fast_read_bytes'], p['fast_wall_s'])} outside the stalls) with "
             f"{faults:.0f} major faults")
    if code == "reads_alike":
        return (f"During stalls {who} read {heavy}: no heavier than outside them, so every "
                "batch reads storage, and the reads are its cost, not what sets the stalls "
                "apart.")
    if code == "storage":
        return (f"During stalls {who} read {heavy} while keeping few cores busy: storage "
                "reads are the suspect.")
    return (f"During stalls {who} {was} busy and also read {heavy}: both CPU work and "
            "storage may matter.")


def _cores(cores: float, runnable: Optional[float]) -> str:
    return f"{cores:.1f} cores busy" + (f", {runnable:.1f} runnable" if runnable is not None
                                        else "")


def _run_queue(p: dict) -> str:
    nw, cpus = p["num_workers"], p["cpus"]
    text = (f"Workers waited {p['runq_s']:.2f} s in the run queue during stalls (summed "
            "over their threads' schedstat): runnable but not running")
    if nw and cpus and nw > cpus:
        text += f" ({nw} workers on {cpus} CPUs)"
    elif nw and cpus:
        text += (f" although {nw} workers fit on {cpus} CPUs: other threads or processes, "
                 "the training loop's own included, competed for the CPUs")
    return text + ", which stretches each batch."


_UNTOLD = "CPU-side versus storage cannot be told apart here."


def _awaited_blocked(p: dict) -> str:
    held = attribution.workers_list(p["workers"])
    return (f"The worker holding the awaited batch (worker {held}) was blocked during "
            "stalls: sleeping or waiting on I/O, a lock or the network (asleep in "
            f"{p['asleep']} of {p['readings']} readings, {p['cores']:.2f} cores busy).")


def _cpu_handover(p: dict) -> str:
    who = "the main process" if p["who"] == "main" else "the workers"
    was = "was" if p["who"] == "main" else "were"
    return (f"No storage reads to speak of during stalls while {who} {was} busy: CPU-side "
            f"work, which with {fmt_bytes(p['batch_bytes'])} batches includes collate's "
            "copy into shared memory, not only the samples' processing.")


WORDS: dict[str, Words] = {
    "main_unavailable": lambda p: f"Main-process counters unavailable ({p['why']}): {_UNTOLD}",
    "main_cpu": lambda p: (
        f"num_workers=0, so the dataset runs in the main process: slow intervals held "
        f"{p['cpu_s']:.2f} main-process CPU-s over {p['wall_s']:.2f} s ("
        f"{_cores(p['cores'], p['runnable'])}) against {p['fast_cpu_s']:.2f} over "
        f"{p['fast_wall_s']:.2f} s in fast ones ({p['fast_cores']:.1f} cores, the training "
        "step included)."),
    "worker_cpu": lambda p: (
        f"Slow intervals held {p['cpu_s']:.2f} worker-CPU-s over {p['wall_s']:.2f} s "
        f"({_cores(p['cores'], p['runnable'])}) against {p['fast_cpu_s']:.2f} over "
        f"{p['fast_wall_s']:.2f} s in fast ones "
        f"({_cores(p['fast_cores'], p['fast_runnable'])})."),
    "one_worker_busy": lambda p: (
        f"One worker stayed busy through the stalls ({p['cores']:.1f} cores) while the "
        "others had little to do: one slow batch held the line."),
    "storage_unavailable": lambda p: f"Storage counters unavailable ({p['why']}): {_UNTOLD}",
    "run_queue": _run_queue,
    "caveats": lambda p: CAVEATS_WITH_READS if p["reads_matter"] else CAVEATS,
    "awaited_blocked": _awaited_blocked,
    "cpu_handover": _cpu_handover,
    "workers_outside_batches": _outside_batches,
    "workers_thread_pool": _thread_pool,
    # CPU-side work against storage reads (evidence's storage finding).
    **{code: (lambda p, code=code: _storage(code, p))
       for code in ("cpu_no_reads_anywhere", "cpu_no_reads", "cpu_light_reads", "idle",
                    "storage", "cpu_and_storage", "reads_alike")},
}


# How many worker-PID changes the text lists one by one; past this it
# counts them and names the first and the last (a loader without persistent
# workers changes them every epoch: 1,000 epochs made a 20,000-character
# line).  Report.to_dict()["workers"]["pid_changes"] keeps every one.
PID_CHANGES_SHOWN = 3


def evidence_lines(s: dict) -> list[str]:
    """Stuck fetches first, then what the worker counters say."""
    out = [bottom_line.stuck_sentence(ev) for ev in s.get("stuck") or []]
    w = s.get("workers")
    if w and w.get("evidence"):
        out.extend(w["evidence"])
    return out


def pid_changes_line(changes: list[dict], epochs: int) -> str:
    """The epochs whose worker PIDs changed: each one, or past
    PID_CHANGES_SHOWN their count among the epoch starts after the first,
    the first and the last."""
    def at(c: dict) -> str:
        return f"step {c['step']} (epoch {c['epoch']})"

    if len(changes) <= PID_CHANGES_SHOWN:
        return "worker PIDs changed at " + ", ".join(at(c) for c in changes)
    starts = max(epochs - 1, len(changes))
    return (f"worker PIDs changed at {len(changes)} of {starts} epoch starts after the "
            f"first, first at {at(changes[0])}, last at {at(changes[-1])} (each one in "
            "to_dict()['workers']['pid_changes'])")


def process_lines(s: dict) -> list[str]:
    """Host, delivery order, worker processes, sampler and unavailable
    counters."""
    out = []
    h = s.get("host")
    if h:
        out.append(f"host: {h['usable_cpus']} usable CPUs, start method "
                   f"{h['start_method'] or '-'}, torch {h['torch_version'] or '-'}")
    d = s.get("delivery")
    if d and d["known"]:
        out.append(f"delivery: in_order={d['in_order']}, {d['overtaking']} of {d['known']} "
                   "deliveries overtook a batch of lower rank")
    w = s.get("workers")
    if w:
        changes = w["pid_changes"]
        if changes:
            out.append(pid_changes_line(changes, len(w["pids_by_epoch"])))
        elif len(w["pids_by_epoch"]) > 1 and (s.get("loader") or {}).get("num_workers") != 0:
            out.append(f"worker PIDs stable across {len(w['pids_by_epoch'])} epochs")
        out.extend(bottom_line.dead_worker_line(e) for e in w["exited"])
        smp = w["sampler"]
        if smp["samples"]:
            share = smp["cpu_share"]
            out.append(f"sampler: {smp['samples']} readings every {fmt_s(smp['period_s'])}"
                       + (f", {pct(share, 2)} of one CPU" if share is not None else ""))
        elif smp.get("error") and smp["enabled"]:
            out.append(f"sampler: unavailable ({smp['error']}): timings only, no worker "
                       "or process evidence")
        if smp.get("readings_lost"):
            out.append(f"sampler: the ring dropped {smp['overwritten']} readings, some of this "
                       "run's; raise traceml.configure(sampler_capacity=...)")
        if smp.get("dropped_watch"):
            out.append(f"sampler: {smp['dropped_watch']} loops or processes could not be "
                       "watched (out of memory or over the process limit)")
        iv = w.get("intervals")
        if iv and iv["unavailable"]:
            # Worker counters of a loader without workers are not news.
            for name, why in iv["unavailable"].items():
                if why != NO_WORKERS:
                    out.append(f"{name}: unavailable ({why})")
    return out
