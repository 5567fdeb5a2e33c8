"""The throughput model's prediction and whether its check trusts it.
"""

from __future__ import annotations

import math
from typing import Optional


from ..fmt import fmt_s, pct, plural
from ._types import Finding, Words
from . import attribution, host_contention, input_bound, sweeps, worker_evidence


# The model (traceml.predict) is checked on the one setting a run measured:
# its wait at the run's num_workers beside the measured mean wait.  The
# miss is taken as a share of the measured mean step, not of the wait (a
# wait near 0 makes any relative error huge; bench_predict.py scores the
# model the same way).  Measured on the user-trial runs of 2026-11-30 (2
# CPUs, 38 runs): where the model's assumptions hold (uniform batches,
# lock-step, a growing cost, healthy loaders, 50 MB batches at 2 workers,
# the demo) the check missed by at most 11% of the step (25 runs, median
# 2%); where they do not (a slow sample every k, one slow shard, 7 workers
# on 2 cores with 50 MB batches, a 10 s stuck fetch averaged in) by 20% to
# 58% (13 runs).  15% of the step lies between the two groups.
PREDICT_FIT_TOL = 0.15

PREDICT_TRUSTED = "trusted"          # the check within PREDICT_FIT_TOL: advice given
PREDICT_MISFIT = "misfit"            # the check misses by more: no num_workers advice
PREDICT_UNCHECKED = "unchecked"      # no measured wait or step to check against
PREDICT_ONE_WORKER = "one_worker"    # the stalls are one worker's: the model assumes equal ones
PREDICT_SLOW_SAMPLE = "slow_sample"  # the stalls follow sample ranks: not a mean throughput


def prediction_trust(predicted_s: Optional[float], measured_s: Optional[float],
                     step_s: Optional[float], attribution_label: Optional[str]
                     ) -> tuple[str, Optional[float]]:
    """(code, miss) for a prediction: ``miss`` is |predicted - measured|
    wait at the run's num_workers over the measured mean step ``step_s``
    (None where either is unknown).  An attribution that names one worker
    (ONE-WORKER) or slow samples (SLOW-SAMPLE) withholds the num_workers
    advice whatever the check (the model averages the workers and the
    samples: round robin over equal workers); otherwise the check decides:
    PREDICT_TRUSTED within PREDICT_FIT_TOL, PREDICT_MISFIT beyond it,
    PREDICT_UNCHECKED without the numbers."""
    miss = (abs(predicted_s - measured_s) / step_s
            if predicted_s is not None and measured_s is not None and step_s else None)
    if attribution_label == attribution.ONE_WORKER:
        return PREDICT_ONE_WORKER, miss
    if attribution_label in (*attribution.SLOW_RESIDUE, attribution.LARGE_BATCH):
        return PREDICT_SLOW_SAMPLE, miss
    if miss is None:
        return PREDICT_UNCHECKED, miss
    return (PREDICT_TRUSTED if miss <= PREDICT_FIT_TOL else PREDICT_MISFIT), miss


def _row_wait(row: dict) -> str:
    """A prediction row's wait; at num_workers=0 with the main process's
    own fetch CPU measured, both ends (predict._main_fetch_s)."""
    extra = row.get("main_fetch_s")
    if row.get("slow_batch_s") is not None:
        # The slow batches outlast the look-ahead: the mean is a floor.
        return (f"over {fmt_s(row['wait_s'])} (its p95 batch, {fmt_s(row['slow_batch_s'])}, "
                f"outlasts the {fmt_s(row['look_ahead_s'])} of batches in hand: stalls)")
    low, high = fmt_s(row["wait_s"]), fmt_s(row["wait_s"] + (extra or 0.0))
    if not extra or low == high:
        # A part too small to show at the wait's precision: one number.
        return low
    return (f"{low} to {high} (the main process's own "
            f"{fmt_s(extra)} a fetch now: the sampler's part stays)")


# The workers' make time mostly off CPU (more than this share): sleeps, I/O,
# a lock.  The model scales that time down with more workers; it cannot
# tell parallel waits from serialized ones, so its "keeps up" says so.
OFF_CPU_MAKE_SHARE = 0.5


def _cheaper(factor: float) -> str:
    """How much cheaper a batch must get: "2.3x cheaper", or under 1.5x
    as the share of its cost to save ("6% cheaper": "1.0x" read as none)."""
    if factor >= 1.5:
        return f"{factor:.1f}x cheaper"
    return f"{pct(1.0 - 1.0 / factor)} cheaper"


_ASSUMPTION = {
    "round_robin": "batches go to the workers in turn",
    "prefetch_deep": "prefetch_factor keeps every worker busy",
    "no_shared_lock": "the workers share no lock",
    "load_steady": "the rest of the host's load stays as it was",
}


def prediction_lines(s: dict) -> list[str]:
    """The prediction (traceml.predict) in words: what one batch costs,
    what the loop needs, the answer, the wait per num_workers, and how well
    the model reproduces this run; [] without a prediction.  Only a
    trusted prediction (prediction_trust) gives the answer and the
    table; otherwise the lines say why the model gives no num_workers
    advice here, with its check's numbers."""
    p = s.get("prediction")
    if not p:
        return []
    per_step = p["compute_s"] + p["handover_s"]
    waited = (f", {fmt_s(p['runq_s'])} waiting for a core" if p["runq_s"] is not None else "")
    stuck = p.get("left_out_stuck") or 0
    out = [f"prediction: a worker makes a batch in {fmt_s(p['make_s'])} (mean"
           + (f" without {plural(stuck, 'stuck step')}" if stuck else "")
           + f": {fmt_s(p['cpu_s'])} of CPU{waited}), the loop uses one per {fmt_s(per_step)} "
           f"(compute {fmt_s(p['compute_s'])} + hand-over {fmt_s(p['handover_s'])}); "
           f"{p['usable_cpus']} usable CPUs, each worker got {pct(p['core_share'])} of one"
           + (f" (about {p['other_runnable']:.1f} other threads were runnable: the main "
              "process and other programs; more workers take more of the cores from them)"
              if p["other_runnable"] > 1.5 else "") + "."]
    trust = p.get("trust", PREDICT_TRUSTED)
    if trust == PREDICT_TRUSTED:
        k = p["keeps_up_with"]
        if k is not None:
            now = ", as now," if k == p["num_workers"] else ""
            # The cores at the pace it keeps up with (the compute as
            # measured, which the rows read): the quiet compute's pace
            # (worker_cores_needed) read "num_workers=57 keeps up (the
            # workers need about 13.3 cores)" on 2 CPUs (helper 33A).
            text = (f"  num_workers={k}{now} keeps up on this host (the workers need about "
                    f"{p['cpu_s'] / per_step:.1f} cores at a step of {fmt_s(per_step)})")
            if p["handover_s"] >= input_bound.COMPUTE_BOUND_SHARE * per_step:
                # Keeping up is the workers' side: the hand-over stays at
                # any num_workers (wait = max(h, ...)), so say what is left.
                text += (f", making batches as fast as the loop uses them; the hand-over, "
                         f"{fmt_s(p['handover_s'])} a step ({pct(p['handover_s'] / per_step)} "
                         "of it), stays whatever num_workers is")
            if k > p["num_workers"] and p["off_cpu_s"] > OFF_CPU_MAKE_SHARE * p["make_s"]:
                # More workers shorten a wait off CPU only where it runs in
                # parallel: the check at this num_workers cannot tell (a
                # shared lock: 2 and 5 workers waited 8.6 and 8.4 ms, and
                # each run's model said more keep up).
                text += (f", if what the workers wait on off CPU "
                         f"({pct(p['off_cpu_s'] / p['make_s'])} of their make time) runs in "
                         "parallel: a lock they share or one disk would serialize it, and "
                         f"traceml.sweep(make_loader, num_workers=({p['num_workers']}, {k})) "
                         "tells which")
            elif k > p["num_workers"] and _held_short(p):
                text += (", only by their taking cores from the loop's and other programs' "
                         "threads, which a host that shares its cores by process group (a "
                         "container, a cgroup) does not give: traceml.sweep(make_loader, "
                         f"num_workers=({p['num_workers']}, {k})) measures it")
            out.append(text + ".")
        elif _off_cpu_bound(p):
            out.append(f"  no num_workers keeps up on this host: the workers need about "
                       f"{p['worker_cores_needed']:.1f} cores, {_host_has(p, 'usable_cpus')}, "
                       f"but {_off_cpu_words(p['off_cpu_s'], p['quiet_compute_s'] + p['handover_s'], p['make_s'])}.")
        else:
            want = math.ceil(p["worker_cores_needed"])
            out.append(f"  no num_workers keeps up on this host: the workers need about "
                       f"{p['worker_cores_needed']:.1f} cores ({want} workers, each with a "
                       f"core), {_host_has(p, 'usable_cpus')}; {_least_step(p)}. The "
                       f"dataset must get {_cheaper(p['cheaper_by'])} per batch, or run on "
                       f"{want} cores besides the main process's.")
        out.append("  predicted wait per step: " + ", ".join(
            f"num_workers={row['num_workers']}: {_row_wait(row)}" for row in p["by_workers"]))
    elif trust == PREDICT_ONE_WORKER:
        out.append("  no num_workers advice: the stalls are one worker's batches (see the "
                   "attribution), and the model assumes equal workers taking batches in turn.")
    elif trust == PREDICT_SLOW_SAMPLE:
        # "From the model": a next step may still name a num_workers from
        # the slow batches' places (attribution._behind: one that deals
        # them to every worker), which read as a contradiction (helper 38C).
        out.append("  no num_workers advice from the model: the stalls follow particular "
                   "samples or batches "
                   "(see the attribution), and the model works with the mean batch, not the "
                   "slow ones holding the line.")
    run = p["this_run"]
    miss = run.get("miss_of_step")
    assumes = "it assumes " + "; ".join(_ASSUMPTION[a] for a in p["assumptions"]) + "."
    if run["measured_wait_s"] is not None and run["error"] is not None:
        said = (f"at num_workers={run['num_workers']} the model gives "
                f"{fmt_s(run['predicted_wait_s'])} against {fmt_s(run['measured_wait_s'])} "
                "measured")
        if trust == PREDICT_MISFIT:
            out.append(f"  the model does not fit this run: {said}, off by {pct(miss)} of the "
                       f"step ({run['error']:+.0%} of the wait), more than "
                       f"{pct(PREDICT_FIT_TOL)}: no num_workers advice from it; "
                       + assumes)
        else:
            missed = f", {pct(miss)} of the step" if miss is not None else ""
            out.append(f"  check: {said} ({run['error']:+.0%}{missed}); " + assumes)
    elif trust == PREDICT_UNCHECKED:
        out.append("  no measured wait to check the model against: no num_workers advice "
                   "from it.")
    return out


def cores_needed_line(runs: list[tuple[str, Optional[dict]]]) -> Optional[str]:
    """One line setting beside each other the cores each run's workers
    need at its step time (traceml.predict); None when no run has a
    prediction."""
    parts = []
    cpus = None
    for name, p in runs:
        if not p:
            parts.append(f"{name}: no prediction (no worker batch timing)")
            continue
        cpus = p["usable_cpus"]
        trusted = p.get("trust", PREDICT_TRUSTED) == PREDICT_TRUSTED
        keeps = ("the model does not fit this run: no num_workers advice" if not trusted
                 else f"num_workers={p['keeps_up_with']} keeps up" if p["keeps_up_with"]
                 else "no num_workers keeps up here until a batch gets "
                 f"{_cheaper(p['cheaper_by'])}")
        parts.append(f"{name} needs about {p['worker_cores_needed']:.1f} cores for its workers "
                     f"({fmt_s(p['cpu_s'])} of CPU per batch; {keeps})")
    if cpus is None:
        return None
    return f"prediction at this step time, on {cpus} CPUs: " + "; ".join(parts) + "."


def sweep_prediction(pred: Optional[dict], rows: list[dict]) -> Optional[str]:
    """Where the sweep's "predicted" column comes from, and how far off it
    was; None without a prediction."""
    if not pred:
        return None
    errors = [abs(rows[i]["predicted_error"]) for i in pred["rows"]
              if rows[i].get("predicted_error") is not None and i != pred["basis"]]
    basis = sweeps.condition(rows[pred["basis"]]["condition"])
    off = ""
    if errors:
        low, high = pct(min(errors)), pct(max(errors))
        where = "the other run" if len(errors) == 1 else f"the other {len(errors)} runs"
        off = f"; off by {low if low == high else f'{low} to {high}'} on {where}"
    return (f"predicted: mean wait per step for each num_workers from the workers' batch "
            f"timing of the run {basis}{off}.")


# --- advice -----------------------------------------------------------------
# The next-step codes (traceml.findings.advice) that propose varying
# num_workers: where a trusted prediction finds that no num_workers keeps
# up on this host, its own next step (a cheaper batch or more cores)
# replaces them, and is given only where one of them was.
VARY_WORKERS_CODES = frozenset(("try_workers", "wrap_and_sweep", "vary_workers_around",
                                "vary_workers_or_prefetch", "vary_workers_then_in_order"))
SUPERSEDES = {"predicted_no_workers": VARY_WORKERS_CODES}
ONLY_REPLACING = frozenset(("predicted_no_workers",))


def superseded_by(f: Finding) -> frozenset:
    """The next-step codes the item ``f`` replaces (SUPERSEDES)."""
    return SUPERSEDES.get(f.code, frozenset())


def advise(s: dict) -> list[Finding]:
    """``predicted_no_workers`` (cores needed, usable CPUs, wait floor, how
    much cheaper a batch must get) when ``s``'s ``prediction`` is trusted
    (PREDICT_TRUSTED) and no num_workers keeps up on this host; else none."""
    p = s.get("prediction")
    if not p or p.get("trust") != PREDICT_TRUSTED or p.get("keeps_up_with") is not None:
        return []
    pool = worker_evidence.thread_pool(s)
    return [Finding("predicted_no_workers", {
        "off_cpu": ({"off_cpu_s": p["off_cpu_s"], "make_s": p["make_s"],
                     "per_step_s": p["quiet_compute_s"] + p["handover_s"]}
                    if _off_cpu_bound(p) else None),
        "cores_needed": p["worker_cores_needed"], "cpus": p["usable_cpus"],
        "floor_s": p["wait_floor_s"], "cheaper_by": p["cheaper_by"],
        "step_floor_s": p.get("step_floor_s"), "quiet_compute_s": p.get("quiet_compute_s"),
        "num_workers": p["num_workers"], "main_cores": p.get("main_cores"),
        # Where the host reads full (host_contention's next step: fewer
        # processes), "more workers shorten the wait" is said against it
        # (helper 29B: both as "also" lines in 6 reports); the rows stay
        # in the prediction below.  Likewise where a native thread pool
        # took the batches' CPU: more workers run more of its threads
        # (OpenBLAS at 2 threads a worker, "sweep num_workers=(2, 16)"
        # led where one BLAS thread made the run 13x faster, helper 38C).
        "shorter": (None if host_contention.advise(s) or pool else _shorter_with_more(p)),
        # The pool's threads' CPU (spinning, oversubscribed) is in the
        # cores the model asks for: one thread a worker is the experiment
        # before the model's verdict (helper 40C: "the workers need about
        # 21.7 cores ... make each batch 10-20x cheaper" led, 3 of 3, where
        # threadpool_limits(1) alone took the step from 61-228 ms to 15).
        **({"pool_share": pool[0].numbers["share"]} if pool else {})})]


# More workers than now "shorten" the wait where the model puts it at
# least this share under the wait it predicts for this run's num_workers
# (its own tolerance, PREDICT_FIT_TOL, is what it can tell apart).
MORE_WORKERS_SHORTER = 0.15


def _shorter_with_more(p: dict) -> Optional[dict]:
    """{num_workers, wait_s, now_s}: the fewest workers past this run's
    whose predicted wait is the least of the rows (within
    MORE_WORKERS_SHORTER of it) and at least MORE_WORKERS_SHORTER under
    this run's predicted wait; None where no row with more workers is.
    One worker of 80 ms batches on 2 cores read "not more workers" beside
    its own rows, 78 ms at num_workers=1 and 54 ms at 2 (helper 28A)."""
    rows = p.get("by_workers") or []
    now = next((r["wait_s"] for r in rows if r["num_workers"] == p["num_workers"]), None)
    more = [r for r in rows if r["num_workers"] > (p["num_workers"] or 0)]
    if now is None or not more:
        return None
    least = min(r["wait_s"] for r in more)
    if least > (1.0 - MORE_WORKERS_SHORTER) * now:
        return None
    first = next(r for r in more if r["wait_s"] <= least * (1.0 + MORE_WORKERS_SHORTER))
    held = first.get("held_wait_s")
    # Batches whose making is CPU, made by at least as many workers as the
    # host has CPUs, gain from more workers only the cores other threads
    # give up: the held rows read shorter or not from one run to the next
    # on a shared host (helper 36B: num_workers=8, 16, or a sweep to 16,
    # in 3 identical runs of 2 workers on 2 CPUs).
    full = (not _off_cpu_bound(p) and p.get("usable_cpus") is not None
            and (p["num_workers"] or 0) >= p["usable_cpus"])
    return {"num_workers": first["num_workers"], "wait_s": first["wait_s"], "now_s": now,
            # The gain rests on cores taken from other threads where, with
            # the workers' cores held, the row is not shorter.
            "from_others": full or (held is not None
                                    and held > (1.0 - MORE_WORKERS_SHORTER) * now),
            "other_runnable": p.get("other_runnable")}


def _held_short(p: dict) -> bool:
    """Whether the prediction's ``keeps_up_with`` workers keep up only by
    taking cores from other threads: their wait with the workers' cores
    held at this run's (``keeps_up_held_wait_s``) is above the hand-over,
    which is all a loop that keeps up waits."""
    held = p.get("keeps_up_held_wait_s")
    return held is not None and held > p["handover_s"] * (1 + MORE_WORKERS_SHORTER)


def _more_words(p: dict) -> str:
    """The head of ``predicted_no_workers``: "not more workers", or where
    more still shorten the wait (``shorter``), how far."""
    m = p.get("shorter")
    if p.get("pool_share") is not None:
        return ("Next: one thread a worker first (threadpoolctl.threadpool_limits(1) in "
                f"worker_init_fn; the thread-pool line below): {pct(p['pool_share'])} of the "
                "workers' batch CPU ran on other threads, and a pool's threads spinning on "
                "shared cores count in the cores below; if the step stays, not more workers: ")
    if not m:
        return "Next: not more workers: "
    if m.get("from_others"):
        others = (f" (about {m['other_runnable']:.1f} were runnable beside the workers)"
                  if m.get("other_runnable") else "")
        return (f"Next: traceml.sweep(make_loader, num_workers=({p['num_workers']}, "
                f"{m['num_workers']})) measures whether more workers shorten the wait on "
                f"this host: the model puts num_workers={m['num_workers']} at about "
                f"{fmt_s(m['wait_s'])} of input wait a step ({fmt_s(m['now_s'])} at "
                f"{p['num_workers']}) "
                "only by their taking cores from the loop's and other programs' threads"
                f"{others}, which a host that shares its cores by process group (a "
                "container, a cgroup) does not give; ")
    return (f"Next: num_workers={m['num_workers']} shortens the wait to about "
            f"{fmt_s(m['wait_s'])} a step ({fmt_s(m['now_s'])} at {p['num_workers']}), the "
            "most more workers do here: ")


# The loop's own thread is said to keep a core from the workers where it
# keeps at least half of one busy computing (predict.quiet_compute).
MAIN_CORES_SAID = 0.5


def _off_cpu_bound(p: dict) -> bool:
    """Whether no num_workers keeps up although the cores would
    (``cheaper_by`` under 1: the batches' CPU fits the cores the loop
    leaves): each batch's wait off CPU in its worker is what no count of
    workers the model tries overlaps enough.  A sleeping 100 ms batch
    against a 2 ms step on 2 cores read "must get -145% cheaper ... or
    run on 1 cores" (helper 29A, 6 of 28 runs)."""
    return p.get("cheaper_by") is not None and p["cheaper_by"] < 1.0


def _off_cpu_words(off_cpu_s: float, per_step_s: float, make_s: float) -> str:
    """The off-CPU limit in words: how long each batch waits off CPU,
    and how many workers would have to wait at once to keep up."""
    at_once = math.ceil(off_cpu_s / per_step_s) if per_step_s > 0 else None
    return (f"each batch waits {fmt_s(off_cpu_s)} off CPU in its worker (sleep, I/O or a "
            f"lock: {pct(off_cpu_s / make_s) if make_s else 'most'} of its make time)"
            + (f", so keeping up takes about {at_once} workers waiting at once"
               if at_once else "")
            + "; shorten that wait, or overlap it inside each worker (threads, async reads)")


def _least_step(p: dict) -> str:
    """The floor no num_workers goes under: the step where known (every
    core busy with a batch's CPU and a step's compute), else the wait."""
    if p.get("step_floor_s") is None:
        return (f"expect at least {fmt_s(p.get('wait_floor_s', p.get('floor_s')))} of wait "
                "per step at any num_workers")
    return (f"expect a step of at least {fmt_s(p['step_floor_s'])} at any num_workers, "
            f"every core busy, {fmt_s(p['quiet_compute_s'])} of it the compute on a free "
            "core")


def _host_has(p: dict, cpus_key: str) -> str:
    """"the host has N", and where the loop's thread computes on at least
    MAIN_CORES_SAID of a core, how many of them that leaves the workers."""
    main = p.get("main_cores") or 0.0
    text = f"the host has {p[cpus_key]}"
    if main >= MAIN_CORES_SAID:
        text += (f", {p[cpus_key] - main:.1f} of them left to the workers beside the "
                 "loop's own compute")
    return text


WORDS: dict[str, Words] = {
    "predicted_no_workers": lambda p: (
        _more_words(p) + "the prediction (below, its check within "
        f"{pct(PREDICT_FIT_TOL)} of the step) finds that no num_workers keeps up on "
        f"this host: the workers need about {p['cores_needed']:.1f} cores, "
        f"{_host_has(p, 'cpus')}, but "
        + _off_cpu_words(p["off_cpu"]["off_cpu_s"], p["off_cpu"]["per_step_s"],
                         p["off_cpu"]["make_s"]) + "."
        if p.get("off_cpu") else
        _more_words(p) + "the prediction (below, its check within "
        f"{pct(PREDICT_FIT_TOL)} of the step) finds that no num_workers keeps up on "
        f"this host: the workers need about {p['cores_needed']:.1f} cores, "
        f"{_host_has(p, 'cpus')} ({_least_step(p)}); "
        f"make each batch {_cheaper(p['cheaper_by'])} (profile __getitem__ and collate), "
        f"or run on {math.ceil(p['cores_needed'])} cores for the workers."),
}
