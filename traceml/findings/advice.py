"""The next steps of a report: which experiment the findings call for, and
which advice supersedes which.
"""

from __future__ import annotations

import statistics
from typing import Optional


from ..fmt import code_where, fmt_bytes, fmt_s, pct, plural
from ._types import Finding, Words
from . import (attribution, bottom_line, gpu_wait, hand_over, host_contention, input_bound,
               prediction_check, slow_code, slow_samples, stall_shape, stall_threshold,
               stall_timing, startup_once, sweeps, wait_parts, wait_trend)


# The workers keep the usable CPUs saturated when their own CPU time over
# the run (the sampler's intervals, stalls and the rest together) covers
# at least this share of every usable CPU: no core is left for more
# workers, so "add workers" cannot help there.
CPU_SATURATED_SHARE = 0.9

# A wait is "spread over every fetch" only where the outliers beside it
# hold at most this share of it ("most": the majority the other families
# use); past it the outliers are the wait.
OUTLIERS_HOLD = 0.5


def next_steps(s: dict) -> list[tuple[str, dict]]:
    """What the evidence of a report summary ``s`` says and which cheap
    experiment discriminates next, as (code, numbers) items, following
    headline (stuck fetch, epoch starts) -> INPUT-BOUND -> trend -> shape
    -> temporal structure -> vary num_workers -> compare in_order ->
    worker CPU versus storage reads.  An item is only given when the
    numbers it quotes are present, and advice is only given where it can
    work (no in_order with fewer than 2 workers, no "more workers" when
    the workers already saturate the CPUs, none while the wait trends);
    each family's WORDS word them (durations in seconds, shares as
    fractions)."""
    diag = s["diagnosis"]
    if diag == input_bound.NO_DATA:
        # A first fetch that raised: the exception, not "nothing recorded".
        return _headline_steps(s) or [("no_data", {})]
    lead = _headline_steps(s)
    if s["steady_steps"] < input_bound.MIN_STEADY_STEPS:
        return lead + [("too_few_steps", {"steps": s["steady_steps"],
                                          "least": input_bound.MIN_STEADY_STEPS})]
    return lead + _steady_steps(s, bool(lead))


def _headline_steps(s: dict) -> list[tuple[str, dict]]:
    """The first next step when something other than the steady state holds
    the run's wall time: a stuck fetch, or the epoch starts."""
    head = s.get("headline")
    if not head or head["label"] == bottom_line.STEADY:
        return []
    if head["label"] == bottom_line.WORKER_EXITED and head.get("exited"):
        return [("worker_exited", dict(head["exited"]))]
    if head["label"] == bottom_line.RAISED and head.get("raised"):
        return [("raised", {**head["raised"], "longest_wait_s": head.get("longest_wait_s")})]
    if head["label"] == bottom_line.STUCK:
        one = head["code"] == bottom_line.HEADLINE_ONE_FETCH and s.get("wall_s")
        return [("stuck", {"now": head["code"] == bottom_line.HEADLINE_STUCK_NOW,
                           "waited_s": head["longest_wait_s"],
                           "stuck_after_s": head["stuck_after_s"],
                           **({"wall_share": head["longest_wait_s"] / s["wall_s"]}
                              if one else {})})]
    loader = s.get("loader") or {}
    nw = loader.get("num_workers")
    once = [f for f in startup_once.notes(s) if startup_once.mostly_once(f)]
    if once:
        # One epoch's start-up holds most of it: a one-off, not a cost of
        # each epoch (the note beside it gives the numbers).
        es = s.get("epoch_start") or {}
        first = next((e for e in es.get("by_epoch") or []
                      if e["epoch"] == once[0].numbers["epoch"]), {})
        # The one-off measured where it was: the loader's worker_init_fn
        # in the workers started once (persistent workers: a 0.3 s
        # worker_init_fn, 80% of epoch 0's start, went unnamed, helper
        # 38C, 3 of 3).
        init = ({"init_s": first["init_s"], "worker_init_code": es.get("worker_init_code")}
                if first.get("init_s") is not None
                and first["init_s"] > bottom_line.STARTUP_INIT_SHARE * first["input_wait_s"]
                else {})
        return [Finding("epoch_start_once", {**once[0].numbers, **init,
                                             "wall_share": head["epoch_start_share"]})]
    per_epoch = head["epoch_start_s_per_epoch"]
    return [("epoch_start", {
        "share": head["epoch_start_share"], "epochs": len(per_epoch),
        "mean_s": sum(per_epoch) / len(per_epoch) if per_epoch else None,
        "num_workers": nw,
        "recreated": (None if not nw else not loader.get("persistent_workers")),
        **({"making_share": es["making_share"]}
           if (es := s.get("epoch_start") or {}).get("making_share") is not None else {}),
        **{k: es[k] for k in ("first_cpu_ratio", "first_work_ratio", "iter_share",
                              "iter_cpu_share", "sampler_code", "sampler_library",
                              "init_share",
                              "worker_init_code")
           if es.get(k) is not None},
        **({"init_s": statistics.median([e["init_s"] for e in es["by_epoch"]
                                             if e.get("init_s") is not None])}
           if es.get("init_share") is not None else {}),
    })]


def _workers_saturate_cpus(s: dict) -> Optional[dict]:
    """{cores, cpus} when the worker counters show the workers' CPU time
    over the run's sampled intervals, the stalls' and the rest together
    (worker CPU-s over wall s), covering CPU_SATURATED_SHARE of every
    usable CPU; None otherwise or unknown.  Not the stalls' alone: workers
    are busiest while the loop waits, and a look-ahead full at other times
    leaves them idle there, CPU more workers would use (1.9 cores in the
    stalls at num_workers=2 read "more workers cannot help", while 4
    workers cut the step from 32-44 ms to 25-30 ms, helper 37B)."""
    host = s.get("host") or {}
    cpus = host.get("usable_cpus")
    iv = ((s.get("workers") or {}).get("intervals")) or {}
    if not cpus:
        return None
    parts = [p for p in (iv.get("slow") or {}, iv.get("fast") or {})
             if p.get("count") and p.get("worker_cpu_s") is not None and p.get("wall_s")]
    if not parts:
        return None
    cores = sum(p["worker_cpu_s"] for p in parts) / sum(p["wall_s"] for p in parts)
    return {"cores": cores, "cpus": cpus} if cores >= CPU_SATURATED_SHARE * cpus else None


def _wait_rose(trend_: dict) -> bool:
    """Whether a trend's later side waits longer than its earlier one."""
    if trend_.get("before_median_s") is not None and trend_.get("after_median_s") is not None:
        return trend_["after_median_s"] > trend_["before_median_s"]
    return (trend_.get("last_tenth_median_s") or 0.0) > (trend_.get("first_tenth_median_s")
                                                         or 0.0)


def _more_workers(s: dict, nw: Optional[int]) -> tuple[str, dict]:
    """The "vary num_workers" experiment, where it can work."""
    if nw == 0:
        # Batches past the hand-over's line would cross processes with
        # workers, at a cost per byte the main process does not pay now:
        # 40 MB batches were told "try num_workers >= 1" plainly, and took
        # 61-63 ms a step at 2 workers against 33 ms at 0 (helper 33B).
        size = (s.get("batch_bytes") or {}).get("median")
        if size is not None and size >= hand_over.HANDOVER_MIN_BYTES:
            return ("try_workers", {"bytes": size})
        return ("try_workers", {})
    if nw is None:
        return ("wrap_and_sweep", {"probes": s.get("source") == "probes"})
    saturated = _workers_saturate_cpus(s)
    if saturated is not None:
        return ("cpus_saturated", {**saturated, "num_workers": nw})
    return ("vary_workers_around", {"num_workers": nw})


def _steady_steps(s: dict, after_headline: bool) -> list[tuple[str, dict]]:
    """The next steps of the steady state (see :func:`next_steps`)."""
    out: list[tuple[str, dict]] = []
    diag = s["diagnosis"]
    share = s["input_share"]
    shp = s["shape"]
    conc = s["concentration"]
    tmp = s["temporal"]
    loader = s["loader"]
    nw = loader.get("num_workers") if loader else None
    wait = s["input_wait_s"]
    st = s["stalls"]
    if diag == input_bound.COMPUTE_BOUND:
        gpu_said = (s.get("gpu") or {}).get("rule") in (gpu_wait.GPU_DID_NOT_WAIT, gpu_wait.GPU_DIFFERS)
        core_wait = _compute_core_wait(s)
        out.append(("compute_bound", {"share": s["gpu"]["gpu_share"] if gpu_said else share,
                                      "steady_only": after_headline, "gpu": gpu_said,
                                      **({"core_wait": True} if core_wait else {})}))
        if core_wait and not gpu_said:
            out.append(("compute_core_wait", core_wait))
        if shp == stall_shape.HEAVY_TAILED and conc["stall_wait_share"] is not None:
            out.append(("compute_bound_stalls", {"step_share": conc["stall_step_share"],
                                                 "wait_share": conc["stall_wait_share"]}))
        return out
    if diag == input_bound.HOST_BOUND:
        # The host's wait: its next step (host_contention's host_bound)
        # leads; the loader's pattern and trend are moot.  The job's own
        # next part follows where it is comparable (at least half the
        # host's): a loaded host stretches the job's own work (50 tensors a
        # batch waited 42 ms beside a hog, one tensor 1.9 ms).
        second = wait_parts.second_part((s.get("wait_parts") or {}).get("all"))
        if second is not None:
            out.append(("largest_part", {**second, "num_workers": nw, "second": True,
                                         **_part_context(s)}))
        return out
    trend_ = s.get("trend")
    largest = (s.get("wait_parts") or {}).get("largest")
    if (diag == input_bound.INPUT_BOUND and trend_ is not None and largest
            and largest["part"] == wait_parts.SAMPLER):
        # The measured parts name the sampler (input_bound.diagnose's
        # main_leads): its next step leads, a trend of the waits follows
        # as "also", as under HAND-OVER ("the input wait shrinks steadily"
        # led over a sampler sleeping 6 ms a batch, 70% of the wait).
        out.append(("largest_part", {**largest, "num_workers": nw,
                                     **_part_context(s)}))
    if diag == input_bound.HAND_OVER:
        # The measured parts decided the label: the largest part's next
        # step leads; a trend of the waits follows it as "also".
        prod = s.get("production") or {}
        # The production share the label read (input_bound.diagnose: the
        # clocked parts' where measured, else the worker timing's overlap):
        # the sentence quoting the other read "only 70% of step time" of a
        # 93% wait that the clocks split 11% production (helper 31B).
        fraction = wait_parts.production_fraction((s.get("wait_parts") or {}).get("all"))
        produced = (share * fraction if fraction is not None and share is not None
                    else prod.get("production_share"))
        context = _part_context(s)
        out.append(("hand_over", {
            "share": share, "production_share": produced,
            "busy_share": prod.get("busy_share"),
            "ready_before_fetch": prod.get("ready_before_fetch"),
            "median_s": wait["median"], "num_workers": nw,
            "largest": {**largest, **context} if largest else largest,
            "tensors": context["tensors"],
            **_fewer(s)}))
    if trend_ is not None:
        out.append(("trend", {**{k: trend_[k] for k in (
            "label", "slope_ms_per_step", "slope_ms_per_epoch", "first_tenth_median_s",
            "last_tenth_median_s")}, "changed_at_step": trend_.get("changed_at_step"),
            **({"less_core_waits": True} if trend_.get("less_core_waits") else {})}))
        out.append(("trend_next", {"label": trend_["label"],
                                   "changed_at_step": trend_.get("changed_at_step"),
                                   **({"host_cores": trend_["host_cores"],
                                       "wait_rose": _wait_rose(trend_)}
                                      if trend_.get("host_cores") else {}),
                                   "at_epoch_start": trend_.get("at_epoch_start"),
                                   **{k: trend_[k] for k in ("workers_before", "workers_after")
                                      if k in trend_},
                                   # No workers: the dataset's memory is the main process's.
                                   **({"main": True} if nw == 0 else {})}))
        return out
    if diag == input_bound.HAND_OVER:
        return out
    if largest and largest["part"] == "cpu_wait":
        # Measured: most of the wait is the loop's thread without a core.
        out.append(("wait_for_core", {"share": largest["share"], "num_workers": nw,
                                      "cpus": (s.get("host") or {}).get("usable_cpus"),
                                      **({"past_host": largest["past_host"]}
                                         if largest.get("past_host") else {})}))
        return out
    if largest and largest["part"] in (wait_parts.OTHER_THREADS, wait_parts.SAMPLER):
        # Measured: most of the wait, the main process's other threads ran
        # (a thread holding the GIL), or its thread was in the sampler's
        # next() (timed there): no loader setting shortens that, and "try
        # num_workers >= 1" would leave it as it is.
        out.append(("largest_part", {**largest, "num_workers": nw,
                                     **_part_context(s)}))
        return out
    stuck = (s.get("headline") or {}).get("label") == bottom_line.STUCK
    if st.get("outliers") and not st["count"] and not stuck:
        # Recurring beyond chance (stall_timing.recurring at PERIOD_ALPHA):
        # "record longer" would ask for what the run already shows.
        steps, n = st.get("outlier_steps") or [], s.get("steps") or s["steady_steps"]
        again = stall_timing.recurring(steps, n)
        # Without a recurrence, the even-spacing p-value still rides along
        # (recurring read it already where it was under the line).
        even = None if again else stall_timing.even_spacing(steps, n)
        out.append(("outliers", {"count": st["outliers"], "max_s": st["outlier_max_s"],
                                 "cost_share": st["cost_share"], "median_s": wait["median"],
                                 "every": again["every"] if again else None,
                                 "p_value": (again["p_value"] if again else
                                             even[1] if even is not None else None),
                                 **({"bursts": True} if again and again.get("bursts") else {})}))
    if shp == stall_shape.UNIFORMLY_SLOW:
        count = st["count"]
        on_top = (0 < count <= stall_threshold.HEAVY_TAIL_MAX_STALL_SHARE * s["steady_steps"]
                  and count < st.get("slow_count", s["steady_steps"]))
        step_median = s["step_s"]["median"]
        out.append(("uniformly_slow", {
            "every": st.get("all_slow", True),
            "median_s": wait["median"],
            "step_share": wait["median"] / step_median if step_median else None,
            "on_top": on_top,
        }))
        periodic = tmp is not None and tmp["label"] == stall_timing.PERIODIC
        if on_top and periodic:
            out.append(("periodic_on_top", {"period": tmp["period"], "num_workers": nw}))
        elif on_top:
            out.append(("stalls_on_top", {
                "count": count, "threshold_s": st.get("threshold_s"),
                "pattern_known": tmp is not None and tmp["label"] != stall_timing.TOO_FEW,
                "pattern": tmp["label"] if tmp is not None else None,
                "period": tmp.get("consistent_period") if tmp is not None else None,
                # Counted in bursts: how many (15 stalls in 3 bursts are
                # too few bursts, not too few stalls; helper 36A).
                "bursts": tmp.get("bursts") if tmp is not None else None}))
        elif periodic:
            out.append(("periodic_slow", {"period": tmp["period"], "num_workers": nw}))
        out.append(_more_workers(s, nw))
        return out
    if shp == stall_shape.FAST:
        # Outliers beside a wait that holds the loop (INPUT-BOUND) are a
        # note; the wait spread over every fetch is still what to work on,
        # where it is: not where the outliers hold most of the input
        # (their cost_share, of step time, against the input share).  One
        # 966 ms wait holding 58% of the step time read "input is 94% of
        # step time, spread over every fetch (median 95.8 us)" (helper
        # 28A, 6 workers, 16 steps).
        if st.get("outliers") and (
                diag != input_bound.INPUT_BOUND
                or (st.get("cost_share") or 0.0) > OUTLIERS_HOLD * (share or 0.0)):
            return out
        if (st.get("rule_code") == stall_threshold.RULE_GIVEN and wait["median"] is not None
                and wait["mean"] and wait["median"] < OUTLIERS_HOLD * wait["mean"]):
            # The caller's line passed no fetch, yet the fetches above the
            # median hold more than three quarters of the wait (with the
            # median under half the mean, the lower half holds under a
            # quarter): no cost spread over every fetch.
            out.append(("given_threshold_hides", {
                "given_s": st["threshold_s"], "share": share, "mean_s": wait["mean"],
                "median_s": wait["median"], "p90_s": wait["p90"]}))
            return out
        if not loader:
            # Probes around code traceml does not see into: no workers,
            # hand-over or prefetch to speak of.
            out.append(("spread_wait", {"share": share, "median_s": wait["median"],
                                        "probes": s.get("source") == "probes",
                                        "no_loader": True}))
            out.append(("wrap_and_sweep", {"probes": s.get("source") == "probes"}))
            return out
        out.append(("spread_wait", {"share": share, "median_s": wait["median"],
                                    "num_workers": nw}))
        if largest:
            # Measured (wait_parts): the parts say which of the two the
            # experiment below would tell apart.
            out.append(("largest_part", {
                **largest, "num_workers": nw, **_part_context(s),
                **(_fewer(s) if largest["part"] in wait_parts.RECEIVING_PARTS else {})}))
        else:
            out.append(("vary_workers_or_prefetch", {}))
        return out
    # HEAVY-TAILED: mostly fast input with large stalls.
    out.append(("heavy_tailed", {"step_share": conc["stall_step_share"],
                                 "wait_share": conc["stall_wait_share"],
                                 "calm_median_s": st.get("calm_median_s"),
                                 "stall_median_s": st.get("stall_median_s")}))
    if tmp is None or tmp["label"] == stall_timing.TOO_FEW:
        in_bursts = tmp is not None and tmp.get("counted") == "bursts"
        out.append(("too_few_stalls", {"count": st["count"],
                                       "bursts": tmp["gaps"] + 1 if in_bursts else None}))
        return out
    dlv = s.get("delivery")
    if loader and loader.get("in_order") is False and dlv and dlv["known"]:
        if (dlv["overtaking"] and tmp["label"] == stall_timing.PERIODIC
                and tmp["period"] == stall_timing.effective_workers(nw)):
            out.append(("overtaking_round", {"overtaking": dlv["overtaking"],
                                             "period": tmp["period"]}))
            return out
        if dlv["overtaking"]:
            out.append(("overtaking", {"overtaking": dlv["overtaking"]}))
    if tmp["label"] == stall_timing.PERIODIC:
        p = tmp["period"]
        k = stall_timing.effective_workers(nw)
        cost = s.get("batch_cost") or {}
        if k is not None and p == k and cost.get("alike") is False:
            # Measured: the batches do not cost alike, so no round of equal
            # batches makes the cadence (attribution.batch_cost).
            out.append(("uneven_batches", {"period": p, "num_workers": nw,
                                           "slow": cost["slow"], "batches": cost["batches"],
                                           "ratio": cost["ratio"]}))
            out = _with_in_order_step(out, loader, dlv)
        elif k is not None and p == k:
            prod = s.get("production") or {}
            # Without the workers' batch timing nothing measures whether
            # every batch of a round is slow or one on its worker's turn
            # (spawn: every 3rd batch slow at 3 workers read lock-step with
            # no caveat, 3 of 3, helper 37A).
            untimed = (prod.get("unavailable") if nw and not prod.get("available")
                       else None)
            out.append(("lockstep", {"period": p, "num_workers": nw,
                                     **({"untimed": untimed} if untimed else {})}))
            out.append(("vary_workers_then_in_order", {"grid": sweeps.sweep_grid(nw)}))
        elif (k is not None and (loader or {}).get("in_order") is False and dlv
              and dlv.get("overtaking")):
            # Batches overtook each other: the loop's cadence is not the
            # data's, and no step recurs at it (every 2nd batch slow at
            # in_order=False stalled every 4 steps; "look at what runs
            # every 4 steps" in 6 of 8 runs, helper 37A).  The slow
            # batches' ranks and samples, where measured, lead instead.
            out.append(("period_not_workers", {"period": p, "num_workers": nw,
                                               "overtaking": dlv["overtaking"]}))
        elif k is not None:
            out.append(("period_not_workers", {"period": p, "num_workers": nw}))
            out.append(("confirm_period", {"period": p}))
        else:
            out.append(("period", {"period": p}))
            out.append(("wrap_to_compare_period", {"period": p}))
        return out
    if tmp["label"] == stall_timing.UNSETTLED:
        period = tmp["consistent_period"]
        pred = tmp.get("predicted") or {}
        # The p of the test the shape line quotes; the sweep is the next
        # step wherever the period is the one num_workers predicts.
        test, _ = stall_timing.unsettled_test(tmp)
        predicted = pred.get("period") == period
        out.append(Finding("unsettled", {
            "period": period, "predicted": predicted, "num_workers": nw,
            "stalls": st["count"], "steps": s["steady_steps"],
            "p_value": test.get("p_value"),
            "tested_stalls": test.get("stalls"),
            "settle_steps": tmp["settle_steps"],
            "phase_filled": tmp.get("phase_filled", True),
            "modal_share": (None if tmp.get("multiple_fraction") == 1.0
                            else tmp.get("modal_share")),
            "bursts": tmp.get("counted") == "bursts",
            "grid": sweeps.sweep_grid(nw) if predicted else None,
            "slow_samples": slow_code._samples_slow(s)}))
        return out
    # The workers' own batch timing: every batch took about as long to make
    # (one group of make times).  No slow sample sets such stalls, and no
    # batch can overtake a slower one: the in_order experiment asks nothing
    # ("they point at particular slow samples" and "compare in_order" beside
    # "every batch costs alike", helper 30A, 5 workers on 2 cores).
    alike = (s.get("slow_code") or {}).get("one_group") is True
    irregular = {"modal_gap": tmp["modal_gap"], "modal_share": tmp["modal_share"],
                 "bursts": tmp.get("counted") == "bursts", "no_loader": not loader}
    if alike:
        irregular.update(alike=True, num_workers=nw,
                         cpus=(s.get("host") or {}).get("usable_cpus"),
                         spread=slow_code.samples_spread(s),
                         slow_found=slow_code.samples_found(s),
                         blocked=_blocked_share(s))
    out.append(("irregular", irregular))
    if alike:
        return out
    if not loader:
        # Probes around code traceml does not see into: no workers, round
        # or in_order to compare.
        out.append(("wrap_to_see_stalls", {}))
    elif nw is not None and stall_timing.effective_workers(nw) < 2:
        # One loader in flight: no batch can overtake another, and torch
        # ignores in_order at num_workers=0.
        out.append(("slow_samples_one_loader", {"num_workers": nw}))
    else:
        out = _with_in_order_step(out, loader, s.get("delivery"))
    return out


def _with_in_order_step(out: list, loader: Optional[dict], dlv: Optional[dict]) -> list:
    """``out`` with the in_order experiment, or where this run already had
    in_order=False and its deliveries are known, what that half of the
    experiment showed (``in_order_seen``: the overtakings counted, in
    place of the ``overtaking`` line, whose count it words); the other
    half, in_order=True, is the default every loop runs."""
    if loader and loader.get("in_order") is False and dlv and dlv.get("known"):
        return ([item for item in out if item[0] != "overtaking"]
                + [("in_order_seen", {"overtaking": int(dlv["overtaking"])})])
    return out + [("compare_in_order", {})]


def _fewer(s: dict) -> dict:
    """{"fewer": host_contention.fewer_workers(s)} where a trusted
    prediction halves the wait with fewer workers, else {}: a wait for
    batches crossing processes is paid per batch a worker makes."""
    fewer = host_contention.fewer_workers(s)
    return {"fewer": fewer} if fewer else {}


def _compute_core_wait(s: dict) -> dict:
    """{core_wait_share, num_workers, largest, and where it is not the
    largest part cpu_wait_s and input_wait_s} where the step's compute,
    split by the clocks (wait_parts' ``compute``), spent its largest
    measured part waiting for a core, or waited for a core longer a step
    than the loop waited for input a fetch (wait_parts.compute_waits) and
    at least COMPUTE_CORE_WAIT_MIN_SHARE of its time: profiling the
    step's code would not find that time, and the workers that hold the
    cores cost the model more than they save it.  {} otherwise or
    unmeasured."""
    c = (s.get("wait_parts") or {}).get("compute")
    if not c or not c.get("runq_known") or not c.get("compute_s"):
        return {}
    parts = c["parts_s"]
    share = parts.get("cpu_wait", 0.0) / c["compute_s"]
    largest = parts.get("cpu_wait", 0.0) >= max(parts.values())
    more = {}
    if not largest:
        waited = [f for f in wait_parts.compute_waits(s)
                  if f.numbers["compute_share"] >= COMPUTE_CORE_WAIT_MIN_SHARE]
        if not waited:
            return {}
        more = {"cpu_wait_s": waited[0].numbers["cpu_wait_s"],
                "input_wait_s": waited[0].numbers["input_wait_s"]}
    return {"core_wait_share": share, "largest": largest, **more,
            "num_workers": (s.get("loader") or {}).get("num_workers"),
            **({"host_share": c["host_share"]} if c.get("host_share") is not None else {})}


# The least share of the compute its wait for a core must hold, where it
# is not the compute's largest part, for the next step to be a lower
# num_workers judged by step time: compare's relative tolerance (10%), a
# step change under which compare reads as no change, so the experiment
# could not show it.  2 workers of 3 ms items beside a 2-thread model on
# 2 cores: the loop's thread waited for a core 15% of its compute (7 ms a
# step against a 2.1 ms fetch) and read "profile the step itself", while
# num_workers=0 stepped 38.5 ms against 40.4 ms (helper 64).
COMPUTE_CORE_WAIT_MIN_SHARE = 0.10


# Other programs' CPU accounts for more than this share (most) of the
# job's waits for a core in the steps' compute: the host's, not the
# loader's processes (the same "most" as HOST-BOUND's reading of the
# input wait).  At num_workers=2 the compute waited for a core 54% of its
# time, and num_workers=0 beside the same programs 50%; the next step
# said "a lower num_workers" (helper 32B).
COMPUTE_HOST_SHARE = 0.5


def _part_context(s: dict) -> dict:
    """{tensors, collate_share, lines_said}: what a measured part's next
    step reads besides the part (wait_parts.next_of): the median count of
    tensors a measured batch holds (evidence.batch_bytes; None: not
    counted), collate_fn's share of the workers' batch time, and whether a
    slow-code or slow-sample line is printed."""
    samples = (s.get("production") or {}).get("samples") or {}
    return {"tensors": (s.get("batch_bytes") or {}).get("tensors_median"),
            "collate_share": (samples.get("collate") or {}).get("share"),
            "lines_said": bool(slow_code.evidence_lines(s) or slow_samples.evidence_lines(s))}


def _largest_part_words(p: dict) -> str:
    """The largest measured part's next step ("Next: the largest ..."),
    or the next one after the host's (``second``: "The next largest
    ..."), with the host's part set aside where ``past_host``."""
    text = ((f"besides other programs holding the cores ({pct(p['past_host'])}), the"
             if p.get("past_host") else "the")
            + (" next" if p.get("second") else "")
            + f" largest measured part of the wait ({pct(p['share'])}) is "
            f"{wait_parts.part_name(p['part'], p.get('num_workers'))}; what shortens it is "
            f"{wait_parts.next_of(p)}{wait_parts.sampler_where(p)}."
            + (host_contention.fewer_receiving_words(p["fewer"]) if p.get("fewer") else ""))
    return text[0].upper() + text[1:] if p.get("second") else "Next: " + text


def _workers_stopped(p: dict) -> str:
    """trend_next where fewer workers made batches after a STEP's change
    (wait_trend.workers_at_change)."""
    after, gone = p["workers_after"], set(p["workers_before"]) - set(p["workers_after"])
    return (f"From steady step {p['changed_at_step']} only "
            f"{attribution.workers_named(after)} made batches "
            f"({attribution.workers_named(gone)} made none after it): the others' shards ran "
            f"out, and {plural(len(after), 'worker')} fed the loop alone. Next: even the "
            "workers' shards (an "
            "IterableDataset splits its data by get_worker_info(); give each worker the same "
            "count), then judge the steady state again.")


def _compute_bound_words(p: dict) -> str:
    if p.get("gpu"):
        return (f"The GPU waits for input {pct(p['share'])} of its time (the host's waits "
                "overlap its work): input is not the bottleneck; profile the step itself.")
    if p.get("steady_only"):
        return (f"Between epoch starts the loop waits for input {pct(p['share'])} of the "
                "time: there, input is not the bottleneck.")
    return (f"The loop waits for input {pct(p['share'])} of the time: input is not the "
            "bottleneck" + ("." if p.get("core_wait") else "; profile the step itself."))


def _compute_core_wait_words(p: dict) -> str:
    nw = p.get("num_workers")
    which = ("its largest measured part" if p.get("largest", True) else
             f"{fmt_s(p['cpu_wait_s'])} a step, more than the loop waited for input "
             f"({fmt_s(p['input_wait_s'])} a fetch)")
    if (p.get("host_share") or 0.0) > COMPUTE_HOST_SHARE:
        return (f"The step's own compute waited for a core {pct(p['core_wait_share'])} of its "
                f"time, {which}, and other programs' CPU accounts for "
                f"{pct(p['host_share'])} of the job's waits for a core then: the host held "
                "the cores the model needs, which profiling the step's code would not find. "
                "Next: the same loop on a quieter host (what else runs stopped), judged by "
                "step time (traceml.compare).")
    who = f"its {plural(nw, 'worker')} or other programs" if nw else "other programs"
    return (f"The step's own compute waited for a core {pct(p['core_wait_share'])} of its "
            f"time, {which}: {who} held the cores the model needs, which "
            "profiling the step's code would not find. Next: the same loop with fewer "
            "processes than cores" + (" (a lower num_workers)" if nw else "")
            + ", judged by step time (traceml.compare).")


def evidence_next_steps(s: dict, items: list[Finding]) -> list[Finding]:
    """:func:`next_steps`'s items with what the evidence families advise
    (nothing for COMPUTE-BOUND, NO-DATA or under MIN_STEADY_STEPS
    steady-state steps).  Each of ``EVIDENCE_FAMILIES`` in turn gives its
    items (``advise(s)``); each item removes the earlier items its family
    declares it supersedes (``superseded_by(item)``, from the family's
    ``SUPERSEDES``), and an item of the family's ``ONLY_REPLACING`` codes
    is added only where it supersedes one: ONE-WORKER replaces the round
    and num_workers items, SLOW-SAMPLE the "confirm the period" ones, the
    batch bytes the slow-sample and num_workers experiments, a trusted
    prediction that no num_workers keeps up the "vary num_workers" ones."""
    out = list(items)
    if (s.get("diagnosis") in (input_bound.COMPUTE_BOUND, input_bound.NO_DATA)
            or s.get("steady_steps", 0) < input_bound.MIN_STEADY_STEPS):
        # Input is not the bottleneck, or too few steps to say: nothing to add.
        return out
    for family in EVIDENCE_FAMILIES:
        added = family.advise(s)
        drop = frozenset().union(*(family.superseded_by(f) for f in added))
        present = {code for code, _ in out}
        added = [f for f in added
                 if f.code not in family.ONLY_REPLACING or family.superseded_by(f) & present]
        if added:
            out = [it for it in out if it[0] not in drop] + added
    return out


# The items that propose an experiment or a change (their words hold a
# "Next:" or "Look at"); the others explain what the numbers show.
EXPERIMENTS = frozenset((
    "worker_exited", "raised", "given_threshold_hides", "epoch_start", "epoch_start_once", "trend_next", "cpus_saturated", "slow_samples_one_loader",
    "vary_workers_around", "wrap_and_sweep", "hand_over", "vary_workers_or_prefetch",
    "vary_workers_then_in_order", "confirm_period", "wrap_to_compare_period", "unsettled",
    "compare_in_order", "in_order_seen", "wrap_to_see_stalls", "split_shards", "compute_core_wait",
    "one_worker_or_samples",
    "slow_sample", "slow_collate", "large_batches",
    "time_slow_samples", "fewer_bytes", "predicted_no_workers",
    "host_contention", "host_bound", "look_at_function", "look_at_path", "wait_for_core",
    "freeze_gc",
    "largest_part", "try_workers"))
# Which experiment leads where several are advised: the measured evidence
# before the pattern's experiments, the code that makes the batches first
# (it answers what the loader's pattern only points at), then a full host
# (it makes the loader's pattern moot), the prediction's cost, the bytes,
# the worker attribution; the base advice's experiments after, in order.
LEAD_ORDER = ("slow_code", "host_contention", "prediction_check", "hand_over", "attribution")
# The diagnosis's own next step where the diagnosis names the largest
# measured part as the host's (HOST-BOUND): it leads before any family.
LEAD_FIRST = frozenset(("host_bound",))


def _one_off_change(item) -> bool:
    """The next step of a STEP trend (the wait changed once, after the
    first epoch): it leads, since the run's own figures then mix two
    levels, and a function named from the first epoch's slow batches
    explains a cost the later epochs no longer pay."""
    code, numbers = item
    # A change inside the run (changed_at_step) does not lead a measured
    # part: a thread of the user's holding the GIL, 73% of the wait, read
    # "Next: look at what changed at steady step 42" above its own step
    # (helper 29B, 2 of 4 runs).
    return (code == "trend_next" and numbers.get("label") == wait_trend.STEP
            and numbers.get("changed_at_step") is None)


# The bottom line's items (a stuck fetch, epoch starts that hold the
# run): they come first, and an experiment among them leads.
BOTTOM_LINE_CODES = frozenset(("worker_exited", "raised", "stuck", "epoch_start",
                               "epoch_start_once"))


def arrange(items: list[Finding]) -> tuple[list[Finding], list[str]]:
    """(the items in report order: the bottom line's first, then the
    explanations, in their order, then the experiments by LEAD_ORDER (then
    the order they came in); per item its role: "why", "lead" (the first
    experiment: the one next step) or "also" (a further experiment, shown
    as such))."""
    family_of = {code: f.__name__.rsplit(".", 1)[-1] for f in EVIDENCE_FAMILIES
                 for code in f.WORDS}
    head = [it for it in items if it[0] in BOTTOM_LINE_CODES]
    rest = [it for it in items if it[0] not in BOTTOM_LINE_CODES]
    why = [it for it in rest if it[0] not in EXPERIMENTS]
    tried = [it for it in rest if it[0] in EXPERIMENTS]

    def rank(pair):
        i, it = pair
        fam = family_of.get(it[0])
        if it[0] in LEAD_FIRST or _one_off_change(it):
            return (-1, i)
        if fam == "host_contention" and host_contention.follows_the_loader(it):
            return (len(LEAD_ORDER), i)
        return (LEAD_ORDER.index(fam) if fam in LEAD_ORDER else len(LEAD_ORDER), i)

    tried = [it for _, it in sorted(enumerate(tried), key=rank)]
    # A change of level inside the run (not after the first epoch) is a
    # reading, not the cause: where an experiment leads, the change follows
    # it (a GIL-holding thread, 93% of the wait, came second to "the input
    # wait changed once, at steady step 32", helper 30B, 2 of 3 runs).
    later = [it for it in why if it[0] == "trend" and it[1].get("label") == wait_trend.STEP
             and it[1].get("changed_at_step") is not None] if (
        tried and tried[0][0] != "trend_next") else []
    why = [it for it in why if not any(it is x for x in later)]
    out = head + why + tried[:1] + later + tried[1:]
    roles, led = [], False
    for code, _ in out:
        if code not in EXPERIMENTS:
            roles.append("why")
        else:
            roles.append("also" if led else "lead")
            led = True
    return out, roles


# The families whose evidence adds to or replaces the next steps, in the
# order they apply: the bytes after the attribution (the slow-sample and
# num_workers experiments would vary everything but what each batch
# carries), then the prediction, and a full host last (it makes the
# loader's own pattern moot).
EVIDENCE_FAMILIES = (attribution, hand_over, prediction_check, host_contention, slow_code)


def _stalls_on_top(p: dict) -> str:
    """The stalls past the line beside a uniformly slow wait, and when
    they fall, as the temporal answer has it (PERIODIC has its own code)."""
    past = (f" past the stall line ({fmt_s(p['threshold_s'])})"
            if p.get("threshold_s") is not None else " larger")
    head = f"On top, {plural(p['count'], 'stall')}{past}"
    pattern = p.get("pattern")
    if pattern is None:
        # A run saved before the label was kept with this item.
        pattern = stall_timing.IRREGULAR if p["pattern_known"] else stall_timing.TOO_FEW
    if pattern == stall_timing.UNSETTLED and p.get("period"):
        return (f"{head}, consistent with one every {p['period']} steps but not yet told "
                "from random stalls.")
    if pattern == stall_timing.TOO_FEW and p.get("bursts"):
        return (f"{head}, in {plural(p['bursts'], 'burst')} of back-to-back stalls: too few "
                "bursts to show a pattern.")
    if pattern == stall_timing.TOO_FEW:
        return f"{head}, too few to show a pattern."
    if pattern == stall_timing.EVERY_FETCH:
        return f"{head}, on every fetch."
    return f"{head} at irregular intervals."


def _uniformly_slow(p: dict) -> str:
    of_step = f", {pct(p['step_share'])} of the median step" if p["step_share"] else ""
    every = p["every"]
    return (f"{'Every fetch waits' if every else 'Most fetches wait'} "
            f"(median {fmt_s(p['median_s'])}{of_step}): "
            + ("slow input on every batch." if p["on_top"] and every
               else "slow input on most batches." if p["on_top"]
               else "uniformly slow input, not a few large stalls."))


def _workers_in(p: dict) -> str:
    return f" (num_workers={p['num_workers']})" if p["num_workers"] is not None else ""


# Where the workers timed slow samples, they are measured: the period the
# stalls might keep is no experiment's lead (the slow-sample line and its
# step say which indices; "Next: look at what recurs every 3 steps" beside
# a named slow function and listed indices, helper 30A).
_SLOW_SAMPLES_MEASURED = (" The workers timed particular samples as slow (the slow-sample "
                          "line): they, not a period, are the measured lead.")


# The workers' batches were blocked (neither on a CPU nor waiting for one:
# a sleep, a read, a lock) for most of their make time: when each is ready
# depends on what they wait on, not on how they share the cores (one
# multiprocessing.Lock held 20 ms a batch by 4 workers read "when each
# batch is ready depends on how the workers and the loop share the cores"
# in 4 of 6 runs, about 1.3 ms of CPU in a 40-70 ms batch; helper 37A).
BLOCKED_MOST = 0.5


def _blocked_share(s: dict) -> Optional[float]:
    """Of the workers' mean make time, the share neither on a CPU (every
    thread's) nor queued for one (production's means); None unmeasured."""
    prod = s.get("production") or {}
    make, cpu, runq = ((prod.get(k) or {}).get("mean") for k in ("make_s", "cpu_s", "runq_s"))
    if not make or cpu is None or runq is None:
        return None
    return max(0.0, 1.0 - (cpu + runq) / make)


def _alike_irregular(p: dict) -> str:
    """Irregular stalls of batches that all took about as long to make."""
    share = (f" ({p['num_workers']} workers on {p['cpus']} CPUs)"
             if p.get("num_workers") and p.get("cpus") else "")
    if (p.get("blocked") or 0.0) > BLOCKED_MOST:
        return ("every batch took about as long to make (one group of make times), and the "
                f"workers were blocked, neither on a CPU nor waiting for one, for "
                f"{pct(p['blocked'])} of it: a sleep, a read or a lock (one the workers share "
                "serialises them whatever num_workers is); when each batch is ready depends on "
                "what they wait on (the slow-code line says where).")
    if p.get("spread"):
        return ("the batches' make times form one group, each batch costing what its slow "
                f"samples cost ({slow_code.spread_words(p['spread'])}: the slow-sample "
                "line), so no few batches stand apart: when each batch is ready depends on "
                f"that and on how the workers and the loop share the cores{share}.")
    if p.get("slow_found"):
        # Slow samples too few or too small to set batches apart (not
        # "no slow sample": the per-sample line lists them).
        return ("the batches' make times form one group, though the per-sample timing found "
                f"{slow_code.found_words(p['slow_found'])} (the slow-sample line): the stalls "
                "may follow the batches that hold them, and when each batch is ready depends "
                f"on that and on how the workers and the loop share the cores{share}.")
    return ("every batch took about as long to make (one group of make times), so no slow "
            "sample sets them: when each batch is ready depends on how the workers and the "
            f"loop share the cores{share}.")


def _unsettled(p: dict) -> str:
    """UNSETTLED's words: the period the stalls fit, why it is not yet
    claimed, and how many more steps would settle it (none where the stalls
    do not fill the period's phase over the run: ``phase_filled`` False)."""
    which = "a burst of stalls" if p.get("bursts") else "a stall"
    if p.get("phase_filled") is False:
        gaps = (f"{pct(p['modal_share'])} of the gaps between the stalls are {p['period']}"
                if p.get("modal_share") is not None else
                f"Every gap between the stalls is a multiple of {p['period']}")
        return (f"{gaps}: they fit {which} "
                f"every {p['period']} fetches with some missed, but most fetches at that phase "
                "did not stall, so the run shows no cadence over its length and none against "
                "one." + (_SLOW_SAMPLES_MEASURED if p.get("slow_samples") else
                          f" Next: look at what recurs every {p['period']} steps where the "
                          "stalls are, and record longer to see whether it holds over the run."))
    return (
        f"The stalls fit {which} every {p['period']} fetches"
        + (f" (num_workers={p['num_workers']} predicts it)" if p["predicted"] else "")
        + (f", but {plural(p['stalls'], 'stall')} in {p['steps']} steps cannot tell that from "
           f"random stalls yet (p = {p['p_value']:.2g}, not under "
           f"{stall_timing.PERIOD_ALPHA:g})" if p["p_value"] >= stall_timing.PERIOD_ALPHA else
           f", but {stall_timing.not_yet_part(p['p_value'], p.get('tested_stalls'))}")
        + f"; {stall_timing.settle_words(p['settle_steps'])}."
        + (_SLOW_SAMPLES_MEASURED if p.get("slow_samples") else " ")
        + ("" if p.get("slow_samples") else
           f"Next: vary num_workers (traceml.sweep(make_loader, num_workers={tuple(p['grid'])}))"
           ": the sweep pools every condition's stalls, so a cadence that follows "
           "num_workers settles sooner than a longer run." if p["predicted"] else
           "Next: record longer before choosing an experiment."))


WORDS: dict[str, Words] = {
    "stuck": bottom_line._stuck_next,
    "worker_exited": bottom_line._worker_exited_next,
    "raised": bottom_line._raised_next,
    "epoch_start": bottom_line._epoch_start_next,
    "epoch_start_once": lambda p: (
        f"Epoch starts hold {pct(p['wall_share'])} of the wall time, {pct(p['share'])} of "
        f"it epoch {p['epoch']}'s start-up ({fmt_s(p['first_s'])}): "
        + (f"{fmt_s(p['first_s'] - p['later_median_s'])} of it a one-off cost that a longer "
           f"run spreads thin, and {fmt_s(p['later_median_s'])} paid again at each later "
           "epoch start (the workers' first batches of an epoch are made after its iter())"
           if p["later_median_s"] >= stall_threshold.STALL_FLOOR_S else
           "a one-off cost that a longer run spreads thin, not one paid each epoch")
        + (". Of it, the loader's worker_init_fn"
           + (f" ({code_where(p['worker_init_code'])})" if p.get("worker_init_code") else "")
           + f" took {fmt_s(p['init_s'])} in each worker, started once (persistent workers)"
           if p.get("init_s") is not None else "")
        + ". Next: judge the steady state below; if runs are this short in practice, look at "
        + ("that worker_init_fn (what it opens, loads or imports)." if p.get("init_s") is not None
           else "what the first epoch alone does (worker start, dataset set-up, a cache filled "
           "once).")),
    "trend": wait_trend._trend_next_line,
    "trend_next": lambda p: wait_trend.host_moved_words(p) or (
        "Next: compare early and late steps (report.input_wait_ns[:n] against [-n:]) and "
        "time the dataset's __getitem__ at the start and the end of a run; watch the "
        + ("main process's memory over the run (without workers the dataset runs there)."
           if p.get("main") else "workers' memory over the run.")
        if p["label"] == wait_trend.RISING else
        _workers_stopped(p) if p.get("workers_after") else
        f"Next: look at what changed at steady step {p['changed_at_step']}"
        + (f", where epoch {p['at_epoch_start']} began (the data or a file it reads changed "
           "between epochs, a cache dropped)" if p.get("at_epoch_start") is not None else
           " (a worker's shard of an IterableDataset running out, a data source or file "
           "switching, a cache filled or dropped)")
        + ", and judge each side on its own (report.input_wait_ns before and after it)."
        if p.get("changed_at_step") is not None else
        "Next: judge the steady state from the later epochs (traceml.reset() after the first "
        "epoch); to see what changed, time the dataset's __getitem__ in the first epoch and "
        "in a later one." if p["label"] == wait_trend.STEP else
        "Next: skip a warm-up before judging the steady state (traceml.reset() after the "
        "first steps), or record longer."),
    "outliers": lambda p: (
        (f"One outlier ({fmt_s(p['max_s'])}, the median fetch {fmt_s(p['median_s'])}): a "
         "single long wait is no pattern, whatever made it (slow samples, a preempted "
         "process, a GC pause: the lines below say which were measured)"
         if p["count"] == 1 else
         f"{p['count']} outliers (largest {fmt_s(p['max_s'])}, the median fetch "
         f"{fmt_s(p['median_s'])}): too small together to be stalls"
         + (f" ({pct(p['cost_share'], 1)} of the step time)"
            if p["cost_share"] is not None else ""))
        + (f"; they recur{' in bursts' if p.get('bursts') else ''} every {p['every']} steps "
           f"(p = {p['p_value']:.2g} that as many at random keep a period as well), so "
           "something that recurs makes them, worth an experiment only if they grow."
           if p.get("every") else ". Record longer to see whether it recurs.")),
    "periodic_slow": lambda p: (f"The slow fetches recur every {p['period']} steps"
                                f"{_workers_in(p)}."),
    "cpus_saturated": lambda p: (
        f"The workers already keep the {p['cpus']} usable CPUs busy through the run "
        f"({p['cores']:.1f} cores at num_workers={p['num_workers']}): more workers cannot "
        "help. Next: make each "
        "batch cheaper (profile the dataset's __getitem__ and collate_fn) or give the job "
        "more CPUs."),
    "slow_samples_one_loader": lambda p: (
        f"Next: with num_workers={p['num_workers']} one batch is loaded at a time, so no "
        "batch can overtake another (in_order changes nothing): time the dataset's "
        "__getitem__ for the stalled steps (report['stalls']['steps']) to find the slow "
        "samples, then try more workers to hide them."),
    "no_data": lambda p: ("Nothing recorded yet: iterate traceml.wrap(loader), then call "
                          "traceml.report()."),
    "too_few_steps": lambda p: (f"Only {plural(p['steps'], 'steady-state step')}: too few to "
                                "judge the input's shape; record at least "
                                f"{p['least']}."),
    "compute_bound": _compute_bound_words,
    "compute_core_wait": _compute_core_wait_words,
    "compute_bound_stalls": lambda p: (f"Still, {pct(p['step_share'])} of steps hold "
                                       f"{pct(p['wait_share'])} of the input wait: stalls "
                                       "matter only if step-time spikes do."),
    "uniformly_slow": _uniformly_slow,
    "periodic_on_top": lambda p: (f"On top, larger stalls recur every {p['period']} steps"
                                  f"{_workers_in(p)}."),
    "stalls_on_top": lambda p: _stalls_on_top(p),
    "try_workers": lambda p: (
        "num_workers=0 loads in the main process: next, try num_workers >= 1 "
        "(traceml.sweep(make_loader, num_workers=(0, 1, 2, 4)))"
        + (f"; with workers each batch of {fmt_bytes(p['bytes'])} crosses processes, about "
           f"{fmt_s(p['bytes'] * hand_over.HANDOVER_S_PER_BYTE[0])} to "
           f"{fmt_s(p['bytes'] * hand_over.HANDOVER_S_PER_BYTE[1])} a batch of copying on a "
           "2-core host, which pays only where making a batch costs more: the sweep measures "
           "both" if p.get("bytes") else "") + "."),
    "vary_workers_around": lambda p: (
        f"Next: vary num_workers around {p['num_workers']} (traceml.sweep(make_loader, "
        "num_workers=...)): if the wait falls as workers are added, the workers are the "
        "limit; if not, look at work in the main process."),
    "wrap_and_sweep": lambda p: ("Next: where a DataLoader feeds this loop, wrap the DataLoader "
                                 "itself and sweep num_workers (traceml.sweep) to see whether "
                                 "more workers shorten the wait; else time "
                                 + ("the code between step_begin() and fetch_done()."
                                    if p.get("probes") else
                                    "what the wrapped iterable's next() does.")),
    "hand_over": hand_over._hand_over_next,
    "wait_for_core": wait_parts.wait_for_core_words,
    "largest_part": lambda p: _largest_part_words(p),
    "given_threshold_hides": lambda p: (
        f"No fetch waited past the given stall threshold ({fmt_s(p['given_s'])}), yet input is "
        f"{pct(p['share'])} of step time, and it is not spread over every fetch: the mean "
        f"fetch waits {fmt_s(p['mean_s'])} against a median of {fmt_s(p['median_s'])} (p90 "
        f"{fmt_s(p['p90_s'])}), so the fetches above the median hold more than three quarters "
        "of it. Next: report with the rules' own threshold (stall_threshold_s=None), which "
        "sets those waits apart as stalls, with their pattern and the code that makes them."),
    "spread_wait": lambda p: (
        f"No fetch waited past the stall threshold, yet input is {pct(p['share'])} of step "
        f"time, spread over every fetch (median {fmt_s(p['median_s'])}): "
        + ("a cost paid on every fetch by the code between step_begin() and fetch_done()."
           if p.get("probes") else
           "a cost paid on every fetch by the wrapped iterable's next()."
           if p.get("no_loader") else
           "a cost paid per batch in the main process (at num_workers=0 it makes every "
           "batch: __getitem__, collate, pin_memory)."
           if p.get("num_workers") == 0 else
           "a cost paid per batch (handing it over from the workers, collate, pin_memory) "
           "or a loader only just keeping up.")),
    "vary_workers_or_prefetch": lambda p: (
        "Next: vary num_workers or prefetch_factor (traceml.sweep): a wait that stays put "
        "is per-batch hand-over cost; one that falls with more workers is loader throughput."),
    "heavy_tailed": lambda p: (
        f"{pct(p['step_share'])} of steps hold {pct(p['wait_share'])} of the input wait: "
        f"mostly fast input with large stalls (the other fetches' median "
        f"{fmt_s(p['calm_median_s'])}, the stalls' {fmt_s(p['stall_median_s'])})."),
    "too_few_stalls": lambda p: (
        f"Only {plural(p['count'], 'stall')}"
        + (f", in {plural(p['bursts'], 'burst')} of back-to-back stalls" if p.get("bursts")
           else "") + ": too few to tell a pattern; record more steps."),
    "overtaking_round": lambda p: (
        f"With in_order=False, {plural(p['overtaking'], 'delivery', 'deliveries')} overtook a "
        "slower batch, yet the "
        f"stalls still recur every {p['period']} steps: not one slow sample blocking the "
        "line, but the workers' round; next, check worker CPU against storage reads."),
    "overtaking": lambda p: (f"With in_order=False, {plural(p['overtaking'], 'delivery', 'deliveries')} overtook a "
                             "slower batch: single slow samples hold batches back."),
    "uneven_batches": lambda p: (
        f"The stalls recur every {p['period']} steps and num_workers={p['num_workers']}, "
        f"but not from a round of equal batches: {p['slow']} of {p['batches']} batches took "
        f"{p['ratio']:.1f}x the others' time to make (less their waits for a core; geometric "
        "means), and the loop, taking "
        "batches in order, waits behind each slow one on its worker's turn."),
    "lockstep": lambda p: (
        f"The stalls recur every {p['period']} steps and num_workers={p['num_workers']}: "
        "consistent with the workers finishing their batches together (lock-step), so the "
        "cost is per-batch work inside the workers"
        + (f"; the workers' batch timing is off ({p['untimed']}), so one slow batch a round, "
           "on one worker's turn, reads the same: the sweep below tells them apart"
           if p.get("untimed") else "") + "."),
    "vary_workers_then_in_order": lambda p: (
        "Next: vary num_workers (traceml.sweep(make_loader, num_workers="
        f"{tuple(p.get('grid') or sweeps.sweep_grid(None))})); if "
        "the period follows, compare in_order=(True, False) to see whether batches "
        "overtake, then check worker CPU against storage reads in the slow intervals."),
    "period_not_workers": lambda p: (
        f"The stalls recur every {p['period']} steps while num_workers={p['num_workers']}"
        + (f", with in_order=False and {p['overtaking']} deliveries overtaking a batch of "
           "lower rank: the loop takes batches out of the data's order, so this cadence is "
           "the loop's, not the data's; the slow batches' ranks and samples say what recurs "
           "in the data." if p.get("overtaking") else
           ": a period that does not follow the workers points at something that recurs by "
           f"step (a slow sample every {p['period']} batches, a periodic flush or log "
           "write).")),
    "confirm_period": lambda p: (
        f"Next: vary num_workers (traceml.sweep) to confirm the period stays at "
        f"{p['period']}, and look at what runs every {p['period']} steps."),
    "period": lambda p: f"The stalls recur every {p['period']} steps.",
    "wrap_to_compare_period": lambda p: (
        f"Next: look at what recurs every {p['period']} steps in the code that makes the "
        "input; where a DataLoader feeds it, wrap the DataLoader itself so its num_workers "
        "can be compared with the period."),
    "unsettled": lambda p: _unsettled(p),
    "irregular": lambda p: (
        f"The stalls have no regular period (the commonest gap"
        f"{' between bursts of back-to-back stalls' if p.get('bursts') else ''}, "
        f"{plural(p['modal_gap'], 'step')}, holds {pct(p['modal_share'])} of gaps): "
        + ("they point at particular slow fetches or outside contention." if p.get("no_loader")
           else _alike_irregular(p) if p.get("alike")
           else "they point at particular slow samples or outside contention rather than the "
           "worker round.")),
    "wrap_to_see_stalls": lambda p: (
        "Next: wrap the loop's data source (traceml.wrap) so that each stall is set against "
        "the worker and the samples that made its batch, or time what the fetch runs at the "
        "stalled steps."),
    "compare_in_order": lambda p: (
        "Next: compare in_order=(True, False) (traceml.sweep(make_loader, in_order=(True, "
        "False))): if later batches overtake a slow one, single slow samples are to blame; "
        "then check worker CPU against storage reads."),
    "in_order_seen": lambda p: (
        "With in_order=False, "
        + (f"{plural(p['overtaking'], 'delivery', 'deliveries')} overtook a slower batch: single "
           "slow batches hold "
           "the others back (this run is the in_order=False half of that comparison). Next: "
           "find what makes them slow: the worker evidence (CPU against storage reads in the "
           "stalls) and the workers' per-sample timing."
           if p["overtaking"] else
           "no delivery overtook another: no single slow batch held the others back, so the "
           "stalls hold every worker at once (the host, storage or a lock they share). Next: "
           "check worker CPU against storage reads in the stalls.")),
}
