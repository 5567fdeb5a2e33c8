"""sweep(): the grid, the correlation of the cadence with num_workers, and
the sweep's next step.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
from scipy.stats import combine_pvalues, hypergeom


from ..fmt import fmt_s, pct, plural
from ._types import Words
from . import comparison, input_bound, stall_timing, wait_parts


# A condition's median stall gap counts as its observed cadence only with
# at least 3 stalls (2 gaps), the least PERIODIC needs (PERIOD_MIN_GAPS).
MIN_STALLS_FOR_CADENCE = stall_timing.PERIOD_MIN_GAPS + 1


# "The period follows num_workers" (period == max(1, num_workers) in every
# row with a period) needs rows with a period at 3 or more distinct
# num_workers: any two points lie on a line (Pearson r = +-1 by
# construction), so two values cannot contradict the rule; a third is the
# least that can.  Below that the sweep says it is too few to tell, and
# prints no r.  Rows without a period (too few stalls, IRREGULAR, or a
# stall on every fetch, EVERY-FETCH, which any input-bound loader shows at
# num_workers 0 or 1) are left out and named.
SWEEP_MIN_DISTINCT_WORKERS = 3


def sweep_grid(num_workers: Optional[int]) -> tuple[int, ...]:
    """The num_workers a next step suggests sweeping to see whether a stall
    period follows them: the run's own, 4, 3, 2 and 1, descending.  Rows
    at 2 or more workers can show a period, so the grid holds at least
    SWEEP_MIN_DISTINCT_WORKERS of them; 1 shows EVERY-FETCH when the
    workers are the limit, and 0 (loading in the loop's process) says
    nothing about the workers' cadence."""
    return tuple(sorted({int(num_workers or 0), 4, 3, 2, 1} - {0}, reverse=True))

SWEEP_KEEP_FEWEST = "keep_fewest"      # fewer workers wait within REL_TOL of the best
SWEEP_KEEP_BEST = "keep_best"          # the best leads beyond REL_TOL and the order effect
SWEEP_UNDECIDED = "undecided"          # its lead is within the order effect
SWEEP_MORE_WORKERS = "more_workers"    # still input-bound, and best at the most workers
SWEEP_STILL_INPUT = "still_input"      # still input-bound at the best condition
SWEEP_TRADE = "trade"                  # by step: another condition waits less, steps no faster


def by_sample(batch_sizes) -> bool:
    """Whether a sweep's conditions are weighed per sample: where their
    batch sizes (one per condition, None unknown) differ and all are
    known, a wait per batch of 8 samples and one of 4 are not alike."""
    sizes = set(batch_sizes)
    return len(sizes) > 1 and None not in sizes


def sweep_next(conds: list[dict], order_spread_s: Optional[float],
               order_measured: bool = True, passes: int = 1,
               by_step: bool = False) -> list[tuple[str, dict]]:
    """The next step a sweep's numbers support, as (code, numbers) items.

    ``conds``: one dict per condition, {name, workers (the loader's
    num_workers, None unknown), diagnosis (the label most of its rows
    read; None unknown), mean_s (mean input wait per step over its
    rows), input_share (mean over its rows), and where known step_s (its
    mean step) and batch_size (where the sweep varied it)}; ``passes``:
    the sweep's passes; ``order_spread_s``: the
    largest |forward - backward| mean wait among the conditions whose
    order effect differs beyond compare's tolerance (None: none differs);
    per sample where the conditions are (:func:`by_sample`);
    ``order_measured``: some condition ran backward too (False: one
    direction, and a kept best says its lead was not set against an order
    effect).

    Rules: where batch_size varied, the wait is weighed per sample (mean_s
    over batch_size: a larger batch carries more samples a step, and the
    wait per step always favours the smallest).  The conditions within
    compare's tolerance of the lowest mean wait (REL_TOL of it or
    STEP_TOL of its mean step, whichever is larger) do not differ; among
    them the one with the fewest
    workers is kept (workers cost memory and cores), "more workers did not
    help" (SWEEP_KEEP_FEWEST).  Otherwise the best is kept when its lead
    over the runner-up exceeds the order effect (SWEEP_KEEP_BEST), else
    the sweep is repeated (SWEEP_UNDECIDED: passes=2); where it already
    ran two passes or more, the conditions within the order effect of the
    best do not differ either, and the fewest workers among them is kept
    (SWEEP_KEEP_FEWEST).  ``by_step``: the sweep ran the user's own step
    on each batch (sweep()'s ``step_fn``), so the conditions are ranked by
    their mean step (``step_s``) within REL_TOL of the lowest: workers
    that take the model's cores lengthen its compute, and the condition
    that waits least for input need not train fastest (2 workers of 3 ms
    items beside a 2-thread model on 2 cores: the input wait fell, the
    step rose from 38.5 to 40.4 ms, helper 64).  The items then carry
    ``measure`` "step".  When the kept
    condition's input share is still at least INPUT_BOUND_SHARE: if it has
    the most workers of the sweep and led beyond tolerance, more workers
    may help further (SWEEP_MORE_WORKERS, only where num_workers varied),
    else no condition of the sweep removes the wait (SWEEP_STILL_INPUT); by
    step, where another condition is under INPUT_BOUND_SHARE, that one
    took the wait away without a shorter step (SWEEP_TRADE).
    [] with fewer than 2 conditions."""
    if by_step:
        conds = [{**c, "mean_s": c.get("step_s")} for c in conds]
    conds = [c for c in conds if c.get("mean_s") is not None]
    if len(conds) < 2:
        return []
    measure = {"measure": "step"} if by_step else {}
    per_sample = by_sample([c.get("batch_size") for c in conds])
    if per_sample:
        conds = [{**c, "mean_s": c["mean_s"] / c["batch_size"],
                  "step_s": None if c.get("step_s") is None else c["step_s"] / c["batch_size"]}
                 for c in conds]
    ranked = sorted(conds, key=lambda c: c["mean_s"])
    best = ranked[0]
    tol = max(comparison.REL_TOL * best["mean_s"],
              0.0 if by_step else comparison.STEP_TOL * (best.get("step_s") or 0.0))
    order_basis = False
    if passes >= 2 and order_spread_s is not None and order_spread_s > tol:
        # Two passes and more already ran: a lead within the order effect
        # is no difference, and another pass would not make it one.
        tol, order_basis = order_spread_s, True
    close = [c for c in ranked if c["mean_s"] <= best["mean_s"] + tol]
    with_workers = [c for c in close if c.get("workers") is not None]
    fewest = (min(with_workers, key=lambda c: (c["workers"], c["mean_s"]))
              if with_workers else best)
    out: list[tuple[str, dict]] = []
    led = False
    runner = next((c for c in ranked[1:] if c not in close), None)
    if fewest is not best or runner is None:
        # No real difference among ``close``: keep the fewest workers.
        keep = fewest
        others = [c for c in close if c is not keep]
        out.append((SWEEP_KEEP_FEWEST, {
            "keep": keep["name"], "keep_mean_s": keep["mean_s"],
            "best": best["name"], "best_mean_s": best["mean_s"],
            "others": [c["name"] for c in others], "tolerance": comparison.REL_TOL,
            "within_s": tol, "per_sample": per_sample, "order_basis": order_basis, **measure,
            "fewer_workers": bool(others) and keep.get("workers") is not None and all(
                c.get("workers") is not None and c["workers"] > keep["workers"]
                for c in others)}))
    else:
        keep = best
        lead = runner["mean_s"] - best["mean_s"]
        params = {"best": best["name"], "best_mean_s": best["mean_s"],
                  "runner": runner["name"], "runner_mean_s": runner["mean_s"],
                  "lead_s": lead, "order_spread_s": order_spread_s,
                  "order_measured": bool(order_measured), "within_s": tol,
                  "close": [c["name"] for c in close if c is not best],
                  "per_sample": per_sample, **measure}
        if order_spread_s is not None and lead <= order_spread_s:
            out.append((SWEEP_UNDECIDED, params))
            return out
        out.append((SWEEP_KEEP_BEST, params))
        led = True
    share = keep.get("input_share")
    if by_step and share is not None and share >= input_bound.INPUT_BOUND_SHARE:
        # Kept for its step, still input-bound, beside a condition that is
        # not: that one took the wait away and gave it back in compute.
        fed = [c for c in conds if c is not keep and c.get("input_share") is not None
               and c["input_share"] < input_bound.INPUT_BOUND_SHARE]
        if fed:
            other = min(fed, key=lambda c: c["mean_s"])
            out.append((SWEEP_TRADE, {"keep": keep["name"], "share": share,
                                      "keep_step_s": keep["mean_s"], "other": other["name"],
                                      "other_share": other["input_share"],
                                      "other_step_s": other["mean_s"],
                                      "per_sample": per_sample, **measure}))
            return out
    if share is not None and share >= input_bound.INPUT_BOUND_SHARE:
        # Only what the sweep varied is spoken of: "more workers" needs
        # num_workers to have varied.
        workers = {c["workers"] for c in conds if c.get("workers") is not None}
        varied = len(workers) >= 2
        # HOST-BOUND and HAND-OVER runs wait on what more workers do not
        # shorten (other programs' cores, batches already made).
        host = keep.get("diagnosis") in (input_bound.HOST_BOUND, input_bound.HAND_OVER)
        if varied and led and keep.get("workers") == max(workers) and not host:
            out.append((SWEEP_MORE_WORKERS, {"keep": keep["name"], "share": share,
                                             "workers": keep["workers"], **measure}))
        else:
            part = keep.get("largest_part")
            out.append((SWEEP_STILL_INPUT, {
                "keep": keep["name"], "share": share, "workers_varied": varied,
                "diagnosis": keep.get("diagnosis"), "off_cpu_cores": _off_cpu_cores(keep),
                # Measured: what the kept runs waited on most, where it is
                # the main process's own work no num_workers changes (a slow
                # Sampler read "make each batch cheaper ... or give the
                # workers more cores" with its workers idle, helper 35B).
                **({"part": part, "workers": keep.get("workers")}
                   if part in (wait_parts.SAMPLER, wait_parts.OTHER_THREADS) else {})}))
    return out


# More cores shorten a worker's batch only where the worker computes:
# one on a CPU under half of the slow intervals spends most of them
# waiting (a lock, a device, a read), and a core more would not halve it.
WORKER_ON_CPU_MIN = 0.5


def _off_cpu_cores(keep: dict) -> Optional[float]:
    """The cores the kept condition's workers kept busy in the slow
    intervals, where that is under WORKER_ON_CPU_MIN a worker (they mostly
    waited); None where they computed, or where it was not measured or
    there were no workers.  Workers asleep on a shared lock (0.0-0.4 cores)
    read "give the workers more cores" (helper 31A)."""
    cores, workers = keep.get("worker_cores"), keep.get("workers")
    if cores is None or not workers or cores >= WORKER_ON_CPU_MIN * workers:
        return None
    # Workers on a CPU or queued for one (``worker_runnable``) did not
    # wait on a lock, a device or a read: the cores were full.  Pure-CPU
    # workers beside other programs read "so they mostly waited (a lock,
    # a device, a read)" in 5 of 21 sweeps (helper 33A).
    runnable = keep.get("worker_runnable")
    if runnable is not None and runnable >= WORKER_ON_CPU_MIN * workers:
        return None
    return float(cores)


# "The cadence follows num_workers", pooled over every row of a sweep:
# each row's own pre-stated test (stall_timing.predicted_cadence, a stall
# on every max(1, num_workers)-th fetch from the epoch start) enters one
# exact test.  Under the null the stalls of every row fall at random, each
# row independently; the statistic is the product of the rows'
# hypergeometric p-values, and its exact distribution is the convolution
# of each row's hypergeometric p-value distribution (past
# POOLED_MAX_SUPPORT distinct values the sum is binned down to that many,
# rounding each value down, toward the extreme: the p-value can only
# grow).  A row's own p also counts its rank test (waits on the residue
# ranked high), on another scale: its product fell below every value the
# hypergeometric null can take, and the sweep printed "p < 1e-300" over
# two rows of 13 fetches (helper 30A).  Those rows' p-values are valid
# (super-uniform) under the null, so Fisher's combination of them is a
# valid, conservative test; where any row has a rank test, the pooled p
# is the smaller of the two, doubled (Bonferroni over the two tests).  Rows at 0 or 1 workers predict a stall
# on every fetch: EVERY-FETCH there is consistent (period 1) and carries
# no evidence, so it counts as a row that fits, not in the product.  The
# claim needs the pooled p under stall_timing.PERIOD_ALPHA, no row whose
# stalls keep another period, and tested rows that fit at 2 or more
# distinct num_workers of at least 2: a period that "follows" num_workers
# must be seen to change with it.  Every fetch stalling at 0 and 1 workers
# is what any input-bound loader shows, and stalls on one worker's
# residue are what random slow samples show half the time at 2 workers
# (their worker's round-robin place, not lock-step): counting the 0/1
# rows as a second num_workers let a random-slow-sample control read
# "follows" in 3 of 10 quiet sweeps (benchmarks/bench_truth.py).  They
# count only beside rows of 2 or more workers that all keep their own
# period, one of them settled (pooled_cadence): a data set slow every
# k-th sample would stall every k fetches at 1 worker too, so every fetch
# there is then the cadence changing; the control's rows at 4 workers
# keep no period, and its chance-settled 2-worker rows no longer count
# (1 of 20 sweeps beside the hog).
# A row's stalls may also keep its period at another phase
# (stall_timing.any_phase: workers on fewer cores than there are of them
# do not start together): a row fits at any phase as well, and the pooled
# p is then also read as Fisher's combination of the rows' any-phase
# p-values (each valid under the null, its phases paid for), the smaller
# of the two doubled.  The reversed seed sweep of helper 41A (4 workers
# on 2 loaded cores, stalls at 5, 9, 13) read "too few to tell" in 2 of 3
# runs with two rows settled at 4 and 2.
POOLED_MAX_SUPPORT = 4096
POOLED_MIN_DISTINCT_WORKERS = 2


def _row_distribution(test: dict) -> tuple[np.ndarray, np.ndarray]:
    """(log p-values, their probabilities) of one row's predicted test
    over every count of stalls the null can put on the residue."""

    n, slots, k = test["fetches"], test["slots"], test["stalls"]
    j = np.arange(0, min(k, slots) + 1)
    prob = hypergeom.pmf(j, n, slots, k)
    logp = np.log(np.clip(hypergeom.sf(j - 1, n, slots, k), 1e-300, 1.0))
    return logp, prob


def pooled_p_value(tests: list[dict]) -> float:
    """The exact chance, under random stalls in every row, that the
    product of the rows' hypergeometric p-values is at most the observed
    one; where a row also ran its rank test, the smaller of that and
    Fisher's combination of the rows' own p-values, doubled (see above).
    1.0 without rows; where every row also holds its any-phase test, the
    smaller of that and Fisher's combination of the rows' any-phase
    p-values, doubled.  ``tests``: each row's predicted_cadence dict."""
    if not tests:
        return 1.0
    exact = _pooled_hypergeom(tests)
    if any(t.get("rank_p_value") is not None for t in tests):
        own = np.clip([t["p_value"] for t in tests], 1e-300, 1.0)
        fisher = float(combine_pvalues(own, method="fisher").pvalue)
        exact = float(min(1.0, 2 * min(exact, fisher)))
    if any(t.get("any_phase_p_value") is None for t in tests):
        return exact
    any_p = np.clip([t["any_phase_p_value"] for t in tests], 1e-300, 1.0)
    fisher = float(combine_pvalues(any_p, method="fisher").pvalue)
    return float(min(1.0, 2 * min(exact, fisher)))


def _fits(test: dict) -> bool:
    """A row's stalls fit its period: at phase 0, or at any phase."""
    return bool(test["periodic"] or test["consistent"] or test.get("any_phase_fits"))


def _settled(test: dict) -> bool:
    """A row's own test settled its period: at phase 0, or at any phase
    under PERIOD_ALPHA with its phases paid for."""
    return bool(test["periodic"] or (test.get("any_phase_fits") and test.get(
        "any_phase_p_value", 1.0) < stall_timing.PERIOD_ALPHA))


def _pooled_hypergeom(tests: list[dict]) -> float:
    """The exact pooled chance over the rows' hypergeometric p-values."""
    observed = float(sum(math.log(max(t.get("hypergeom_p_value", t["p_value"]), 1e-300))
                         for t in tests))
    values, probs = np.zeros(1), np.ones(1)
    for t in tests:
        logp, prob = _row_distribution(t)
        values = (values[:, None] + logp[None, :]).ravel()
        probs = (probs[:, None] * prob[None, :]).ravel()
        if len(values) > POOLED_MAX_SUPPORT:
            edges = np.linspace(values.min(), values.max(), POOLED_MAX_SUPPORT)
            at = np.searchsorted(edges, values, side="right") - 1
            values = edges[np.clip(at, 0, len(edges) - 1)]
            values, inverse = np.unique(values, return_inverse=True)
            probs = np.bincount(inverse, weights=probs)
    return float(min(1.0, probs[values <= observed + 1e-9].sum()))


def pooled_cadence(rows: list[tuple[int, Optional[str], Optional[int], Optional[dict]]]) -> dict:
    """The pooled test above over a sweep's rows, each (max(1,
    num_workers), its temporal label, its period, its predicted test or
    None).  Returns {follows (True, or None: not shown), p_value (None
    without a tested row), tested (rows in the product), fitting (rows
    whose stalls fit their own period), other_period (rows whose stalls
    keep another period), distinct_workers (the distinct max(1,
    num_workers) >= 2 among the tested rows that fit)}."""
    tests, fitting, other, workers, every_fetch, fitting_tested = [], 0, 0, set(), 0, 0
    for k, label, period, test in rows:
        if label == stall_timing.PERIODIC and period is not None and period != k:
            other += 1
            continue
        if k < 2:
            if label == stall_timing.EVERY_FETCH:
                fitting += 1
                every_fetch += 1
            continue
        if test is None:
            continue
        tests.append(test)
        if _fits(test):
            fitting += 1
            fitting_tested += 1
            workers.add(k)
    if (every_fetch and tests and any(_settled(t) for t in tests)
            and all(_fits(t) for t in tests)):
        # Period 1 at 0 and 1 workers beside rows of 2 or more workers that
        # all keep their own period, one of them settled: a period of the
        # data set would stall every k fetches at 1 worker too (its fast
        # fetches between), so every fetch stalling there is the cadence
        # changing with num_workers (the seed's first rows).  Where a row
        # of 2 or more workers keeps no period, or none settled one, any
        # loader slow enough stalls on every fetch at 1 worker: no second
        # value (random slow samples at 4, 2, 1 and 0 workers, one 2-worker
        # row settled by chance, read "follows" in 4 of 12 sweeps).
        workers.add(1)
    p = pooled_p_value(tests) if tests else None
    # At least one row of 2 or more workers settles its period alone: the
    # pool then carries rows too short to settle theirs, but does not make
    # a cadence out of rows that each only fit one.  Each row's test picks
    # its best phase (paid for) and the loader's mechanics are not the
    # null's independent placements: the random control (slow samples
    # hidden behind earlier stalls, 2 to 4 stalls a row) read "follows" in
    # 1 of 20 sweeps quiet, 1 of 20 beside the hog and 1 of the first 9 of
    # another run (2026-12-07), that one kept: rows fitting at p = 0.018,
    # 0.0175 and 0.07, none settled, pooled p = 0.0096.  The seed's rows
    # settle alone at its size (4 of 16 on one residue mod 4: p = 1/1820).
    settled = any(_settled(t) for t in tests if _fits(t))
    follows = (p is not None and p < stall_timing.PERIOD_ALPHA and not other and settled
               and len(workers) >= POOLED_MIN_DISTINCT_WORKERS) or None
    return {"follows": follows, "p_value": p, "tested": len(tests), "fitting": fitting,
            "fitting_tested": fitting_tested, "other_period": other,
            "distinct_workers": len(workers), "every_fetch_rows": every_fetch}


def condition(cond: dict) -> str:
    """A sweep condition as "num_workers=4 in_order=True"."""
    return " ".join(f"{k}={v}" for k, v in cond.items())


def sweep_correlation(c: dict, ignored: bool) -> Optional[str]:
    """The line on num_workers against the stall period (sweep.correlation);
    ``ignored``: make_loader ignored num_workers somewhere.  Pearson r,
    slope and intercept are printed only beside "follows", where they
    support it (with fewer than SWEEP_MIN_DISTINCT_WORKERS distinct
    num_workers they are not computed).  None where the sweep did not vary
    num_workers (a sweep of prefetch_factor alone: the footer speaks of
    what it varied), unless make_loader ignored it."""
    shown = " ".join(f"{x}:{y}" for x, y in c.get("rows", []))
    rests = (f"over {plural(c['points'], 'condition')} with a period ({c['gaps']} stall gaps "
             f"in all; max(1, num_workers):period {shown})")
    least = SWEEP_MIN_DISTINCT_WORKERS
    pooled = c.get("pooled") or {}
    if c.get("workers_varied") is False:
        # A sweep of batch_size or prefetch_factor speaks of what it varied
        # only (helper 36B: "num_workers did not vary in this sweep" under a
        # prefetch_factor sweep); where make_loader ignored the num_workers
        # asked for, that is said.
        if not ignored:
            return None
        return ("num_workers vs stall period: num_workers did not vary in this sweep "
                "(counting the workers each loader was built with; make_loader ignored "
                "num_workers, see below)")
    if _none_stalled(c):
        return "num_workers vs stall period: no condition stalled; nothing to correlate"
    text = _follows_line(c, rests, least, pooled)
    if text is None:
        text = _not_follows_line(c, rests, least, ignored)
        # Said wherever rows read it: "run a third num_workers" is no step
        # for rows that are one slow worker's (helper 30A: (4, 2, 1) with
        # worker 1 slow, 4 of 4 rows ONE-WORKER, read only "too few").
        if c.get("one_worker_rows") and c.get("follows") is not False:
            text += (f"; {c['one_worker_rows']} of the {c['rows_with_workers']} rows with 2 "
                     "or more workers read ONE-WORKER: one slow worker's turn comes every "
                     "num_workers fetches, which a cadence of lock-step would too (their "
                     "attribution lines name the worker)")
        return text
    if c.get("one_worker_rows"):
        text += (f"; but {c['one_worker_rows']} of the {c['rows_with_workers']} rows with 2 or "
                 "more workers read ONE-WORKER: one slow worker's turn also comes every "
                 "num_workers fetches, so this does not tell lock-step from that worker (its "
                 "rows' attribution lines name it)")
    return text


def _p_text(p: float) -> str:
    """"p = 6e-07", or where the pooled sum fell under the smallest double
    (every placement but the observed one far likelier), "p < 1e-300"
    rather than "p = 0"."""
    return f"p = {p:.2g}" if p > 0 else "p < 1e-300"


def _follows_line(c: dict, rests: str, least: int, pooled: dict) -> Optional[str]:
    """:func:`sweep_correlation`'s line where the period follows
    num_workers, else None."""
    if c.get("follows") is True and pooled.get("follows"):
        # Said of 0 and 1 workers only where the sweep tried them.
        low = pooled.get("every_fetch_rows") or 0
        every = (f", {low} of them at 0 or 1 workers stalling on every fetch (period 1)"
                 if low else "")
        fit = ("" if c.get("r") is None else
               f"; Pearson r = {c['r']:.3f}, slope {c['slope']:.2f}, "
               f"intercept {c['intercept']:.2f}")
        return (f"num_workers vs stall period: the period follows num_workers: the stalls "
                f"fall on every max(1, num_workers)-th fetch (from the epoch start, or "
                f"from another place where the workers did not start together) in "
                f"{plural(pooled['fitting'], 'row')}{every}, at "
                f"{plural(pooled['distinct_workers'], 'distinct max(1, num_workers)')}, none "
                f"at another period; {_p_text(pooled['p_value'])} pooled over the "
                f"{plural(pooled['tested'], 'row')} with 2 or more workers against random "
                f"stalls, < {stall_timing.PERIOD_ALPHA:g}{fit}")
    if c.get("follows") is True:
        fit = ("" if c["r"] is None else
               f"; Pearson r = {c['r']:.3f}, slope {c['slope']:.2f}, "
               f"intercept {c['intercept']:.2f}")
        return (f"num_workers vs stall period: the period follows num_workers (period == "
                f"max(1, num_workers) in every row, at {c['distinct_workers']} distinct "
                f"num_workers) {rests}{fit}")
    return None


def _not_follows_line(c: dict, rests: str, least: int, ignored: bool) -> str:
    """:func:`sweep_correlation`'s line where the period does not follow
    num_workers, or too few rows tell."""
    if c.get("follows") is False:
        why = ("the same at every num_workers: set by the data" if c.get("same_period")
               else f"period != max(1, num_workers) in {c['mismatched']} of {c['points']} rows")
        # Only a flat fit supports "set by the data"; r = 1.000 beside "does
        # not follow" (periods 3, 3, 6 at 1, 1, 2 workers) reads as agreement.
        fit = (f"; slope {c['slope']:.2f}, intercept {c['intercept']:.2f}"
               if c.get("same_period") and c["slope"] is not None else "")
        return (f"num_workers vs stall period: the period does not follow num_workers "
                f"({why}) {rests}{fit}")
    if c["distinct_workers"] < 2 and c["points"] >= 2:
        text = ("num_workers vs stall period: num_workers did not vary among the "
                "conditions with a period; nothing to correlate")
        if ignored:
            text += (" (counting the workers each loader was built with; "
                     "make_loader ignored num_workers, see below)")
        return text
    if c["distinct_workers"] >= 2:
        return (f"num_workers vs stall period: too few to tell: the period equals max(1, "
                f"num_workers) {rests}, but only {c['distinct_workers']} distinct num_workers "
                f"have a period; it takes {least} (any 2 points lie on a line)")
    pooled = c.get("pooled") or {}
    fit = pooled.get("fitting_tested", pooled.get("fitting"))
    if (pooled.get("p_value") is not None and pooled["p_value"] < stall_timing.PERIOD_ALPHA
            and fit is not None and fit < pooled.get("tested", 0)):
        # The pooled product counts every tested row, and a period of the
        # data's own that is a multiple of each row's max(1, num_workers)
        # (every 6th sample at 2, 3 and 6 workers) puts each row's stalls
        # on its predicted positions without filling them: "the rows that
        # fit ... share one num_workers" was said of 1 fitting row among 5
        # at three num_workers (helper 32A).
        return (f"num_workers vs stall period: too few to tell: the stalls fall on each row's "
                f"predicted positions more than chance allows (pooled p = "
                f"{pooled['p_value']:.2g} over {plural(pooled['tested'], 'row')}), but only "
                f"{fit} of them stall at most of those positions, as a period of the data's "
                "own that is a multiple of num_workers would leave them; it takes "
                f"{least} distinct num_workers whose rows keep their period")
    if (pooled.get("p_value") is not None and pooled["p_value"] < stall_timing.PERIOD_ALPHA
            and pooled.get("distinct_workers") == 1):
        # Rows of one num_workers whose stalls fit its period, pooled: the
        # period is shown, its following num_workers is not (helper 31B:
        # "0 conditions with a period" beside two rows of gaps all 5 at 5
        # workers, pooled p = 7e-05, unprinted).
        return (f"num_workers vs stall period: too few to tell: the rows that fit their own "
                f"period together show it (pooled p = {pooled['p_value']:.2g}, "
                f"{plural(pooled['tested'], 'row')}), but they share one num_workers, and one "
                f"value cannot show the period following it; it takes {least} distinct "
                "num_workers with a period")
    return (f"num_workers vs stall period: too few to tell "
            f"({plural(c['points'], 'condition')} with a settled period, "
            f"{c['distinct_workers']} distinct num_workers; it takes {least} distinct "
            "num_workers with a period)")


_LEFT_OUT = {
    "error": lambda r: "error",
    "no_num_workers": lambda r: "no num_workers",
    "few_stalls": lambda r: (f"{plural(r['stalls'], 'stall')}, under "
                             f"{MIN_STALLS_FOR_CADENCE}"),
    # Period 1: the pooled test of the cadence following num_workers
    # counts these rows; the correlation of periods has no gap to read
    # ("4 of them at 0 or 1 workers stalling on every fetch (period 1)"
    # beside "a stall on every fetch: no period", helper 34A).
    "every_fetch": lambda r: ("a stall on every fetch: period 1, which the pooled test "
                              "counts and the correlation has no gap for"),
    "no_period": lambda r: f"{plural(r['stalls'], 'stall')} with no period",
    "unsettled": lambda r: (f"{plural(r['stalls'], 'stall')} that fit a stall every "
                            f"{r.get('consistent_period')} fetches, not yet settled"),
}


def _none_stalled(c: dict) -> bool:
    """Whether no row of the sweep stalled at all: every row left out of
    the correlation, none of them with a stall or an error."""
    left = c.get("left_out") or []
    return (not c.get("points") and bool(left)
            and all(r.get("stalls") == 0 and r.get("reason") != "error" for r in left))


def sweep_left_out(c: dict) -> Optional[str]:
    """The rows the correlation left out, each with its reason; None where
    none was, or where num_workers did not vary (there is no correlation
    to leave a row out of)."""
    left = c.get("left_out") or []
    if not left or c.get("workers_varied") is False or _none_stalled(c):
        return None
    return "left out of the correlation: " + "; ".join(
        f"{condition(r['condition'])} pass {r['pass_']} {r['direction']} "
        f"({_LEFT_OUT[r['reason']](r)})" for r in left)


def sweep_ignored(pairs: list) -> Optional[str]:
    """(asked, built) num_workers pairs where make_loader ignored num_workers."""
    if not pairs:
        return None
    return ("make_loader ignored num_workers: "
            + ", ".join(f"num_workers={a} built a loader with {plural(b, 'worker')}"
                        for a, b in pairs)
            + "; the correlation uses the loaders' own num_workers")


def sweep_best(best: Optional[dict], rows: int) -> Optional[str]:
    """The condition with the lowest mean fetch (SweepResult.best())."""
    if best is None or rows < 2:
        return None
    text = (f"lowest mean fetch{_per(best)}: {condition(best['condition'])} "
            f"({fmt_s(best['mean_s'])})")
    if best["close"]:
        text += (f"; within {pct(comparison.REL_TOL)} of it (no real difference): "
                 + ", ".join(best["close"]))
    return text


def _per(p: dict) -> str:
    return " per sample" if p.get("per_sample") else ""


def _mean(p: dict) -> str:
    """What the conditions were ranked by: "mean step" where the sweep ran
    the user's step (sweep_next's ``by_step``), else "mean fetch"."""
    return "mean step" if p.get("measure") == "step" else "mean fetch"


def _within(p: dict) -> str:
    """The tolerance two conditions are alike within: compare's (REL_TOL
    of the mean fetch or STEP_TOL of the step; REL_TOL of the mean step
    where the steps were ranked), or the order effect after two passes."""
    if p.get("within_s") is None:
        return pct(p["tolerance"])
    if p.get("order_basis"):
        return f"the order effect ({fmt_s(p['within_s'])})"
    if p.get("measure") == "step":
        return (f"compare's tolerance ({fmt_s(p['within_s'])}: {pct(comparison.REL_TOL)} of "
                "the mean step)")
    return (f"compare's tolerance ({fmt_s(p['within_s'])}: {pct(comparison.REL_TOL)} of the "
            f"mean fetch or {pct(comparison.STEP_TOL)} of the step)")


WORDS: dict[str, Words] = {
    SWEEP_KEEP_FEWEST: lambda p: (
        # Alike and not fewer workers than the rest: nothing to change to.
        f"Next: nothing to change: {p['keep']} "
        f"({fmt_s(p['keep_mean_s'])}{_per(p)}, the lowest {_mean(p)}) and "
        f"{', '.join(p['others'])} are within {_within(p)} of each other (no real "
        "difference); keep whichever you run now."
        if p["others"] and not p["fewer_workers"] and p["keep"] == p["best"] else
        f"Next: keep {p['keep']} ({fmt_s(p['keep_mean_s'])}{_per(p)}): "
        + (f"it is the lowest {_mean(p)}" if p["keep"] == p["best"]
           else f"the lowest, {p['best']} ({fmt_s(p['best_mean_s'])}), is within "
                f"{_within(p)} of it")
        + (f"; {', '.join(o for o in p['others'] if o != p['best'])} within "
           f"{_within(p)} too" if [o for o in p["others"] if o != p["best"]] else "")
        + (" (no real difference): more workers did not shorten the wait"
           if p["fewer_workers"] and p.get("measure") != "step" else
           " (no real difference): more workers did not shorten the step"
           if p["fewer_workers"] else " (no real difference)") + "."),
    SWEEP_KEEP_BEST: lambda p: (
        f"Next: keep {p['best']}: its {_mean(p)}{_per(p)}, {fmt_s(p['best_mean_s'])}, is "
        f"{fmt_s(p['lead_s'])} under the nearest condition past {_within(p)}, "
        f"{p['runner']} ({fmt_s(p['runner_mean_s'])})"
        + (f"; {', '.join(p['close'])} within it (no real difference)" if p.get("close")
           else "")
        + (f" and beyond the order effect ({fmt_s(p['order_spread_s'])})"
           if p["order_spread_s"] is not None else "")
        + ("; one direction only, so the run order's effect was not measured "
           "(both_directions=True sets the lead against it)"
           if p.get("order_measured") is False else "") + "."),
    SWEEP_UNDECIDED: lambda p: (
        f"Next: run again with passes=2 before choosing: {p['best']} leads {p['runner']} by "
        f"{fmt_s(p['lead_s'])}{_per(p)}, no more than the order effect "
        f"({fmt_s(p['order_spread_s'])}{_per(p)})."),
    SWEEP_MORE_WORKERS: lambda p: (
        f"Even with {p['keep']} input is {pct(p['share'])} of step time (INPUT-BOUND), and the "
        f"{'step' if p.get('measure') == 'step' else 'wait'} fell up to the most workers "
        "tried: try more where the host has cores for them "
        "(each run's report() has a prediction of the num_workers that keeps up)."),
    SWEEP_TRADE: lambda p: (
        f"{p['other']} waits for input only {pct(p['other_share'])} of its step against "
        f"{pct(p['share'])} with {p['keep']}, yet its mean step{_per(p)} is "
        f"{fmt_s(p['other_step_s'])} against {fmt_s(p['keep_step_s'])}: its workers cost the "
        "model's compute what they save it in waiting (the cores they share). Next: sweep "
        "fewer workers than cores with the same step_fn, or make each batch cheaper."),
    SWEEP_STILL_INPUT: lambda p: (
        f"Even with {p['keep']} input is {pct(p['share'])} of step time, and its runs read "
        f"{input_bound.HOST_BOUND} (the largest measured part of the wait is other programs "
        "holding the cores): no condition of this sweep removes the wait; the same sweep "
        "beside fewer processes tells what the loader itself needs."
        if p.get("diagnosis") == input_bound.HOST_BOUND else
        f"Even with {p['keep']} input is {pct(p['share'])} of step time, and its runs read "
        f"{input_bound.HAND_OVER} (the loop waits mostly for batches already made): more "
        "workers do not shorten that; each run's report names the largest measured part of "
        "the hand-over, and what shortens it."
        if p.get("diagnosis") == input_bound.HAND_OVER else
        f"Even with {p['keep']} input is {pct(p['share'])} of step time "
        f"({p.get('diagnosis') or input_bound.INPUT_BOUND}): no condition of this sweep "
        "removes the wait, and its runs' largest measured part of it is "
        f"{wait_parts.part_name(p['part'], p.get('workers'))}: what shortens it is "
        f"{wait_parts.part_next(p['part'], p.get('workers'))}."
        if p.get("part") else
        f"Even with {p['keep']} input is {pct(p['share'])} of step time "
        f"({p.get('diagnosis') or input_bound.INPUT_BOUND}): no "
        "condition of this sweep removes the wait; make each batch cheaper (each run's "
        "report() has a prediction of how much)"
        + ((f"; its workers kept {p['off_cpu_cores']:.1f} cores busy in the slow intervals, "
            "so they mostly waited (a lock, a device, a read): more cores would not shorten "
            "that." if p.get("off_cpu_cores") is not None else
            " or give the workers more cores.") if p.get("workers_varied", True)
           else "; num_workers did not vary here (a sweep of it tells whether more workers "
           "shorten the wait).")),
}


def sweep_next_lines(items: list) -> list[str]:
    """The sentences of SweepResult.next_steps() (:func:`sweep_next`)."""
    return [WORDS[code](params) for code, params in items]


def sweep_order(effects: list[dict]) -> Optional[str]:
    """Where forward and backward runs disagree (SweepResult.order_effects())."""
    if not effects:
        return None
    differ = [e for e in effects if e["differs"]]
    compared = [e for e in effects if e["verdict"] != input_bound.NO_DATA]
    if not compared:
        return ("forward and backward: no condition has steady-state steps on both "
                "sides to compare")
    if not differ:
        skipped = len(effects) - len(compared)
        return (f"forward and backward agree for all {len(compared)} conditions "
                f"(within compare's tolerance: {pct(comparison.REL_TOL)} of the mean fetch "
                f"or {pct(comparison.STEP_TOL)} of the step)"
                + (f"; {skipped} without steady-state steps to compare" if skipped else ""))
    several = len({e["pass_"] for e in effects}) > 1
    # What moved, in compare's words (backward against forward): the mean
    # fetch alone read "48.6 us forward vs 83.3 us backward. Beyond
    # compare's tolerance" where the fetch was within it and the step had
    # moved (helper 34A).
    listed = "; ".join(
        condition(e["condition"]) + (f" pass {e['pass_']}" if several else "")
        + f" backward against forward {e['verdict']} ({e['why']})"
        for e in differ)
    return (f"order effect in {len(differ)} of {len(effects)} conditions: {listed}. "
            "Beyond compare's tolerance, so differences that size between conditions "
            "are not evidence; "
            + ("see whether they recur in every pass" if several
               else "passes=2 shows whether they recur"))


def sweep_consumer(consumer: Optional[dict], rows: list[dict]) -> Optional[str]:
    """What each condition did with its batches (SweepResult.consumer): the
    user's step, by which the conditions were ranked, or a sleep standing
    in for it, which holds no core; the latter said only where some
    condition ran workers (they could take the model's cores, and the
    sweep would not show it).  None where the consumer is not known."""
    if not consumer:
        return None
    if consumer.get("step_fn"):
        return (f"consumer: `{consumer['step_fn']}` ran on each batch, so the step times are "
                "the loop's own (the model's compute beside the workers) and the conditions "
                "are ranked by mean step.")
    workers = {row_workers(r) for r in rows if not r["error"]}
    if not any(w for w in workers if w):
        return None
    return (f"consumer: a {fmt_s(consumer.get('pace_s') or 0.0)} sleep a batch stood in for "
            "the model's step; a sleep takes no core, so workers that take the model's cores "
            "do not show here: sweep(..., step_fn=your_step) runs the step itself.")


def sweep_short(rows: list[dict]) -> list[str]:
    """One line per requested step count that some row fell short of: the
    conditions whose loader ran out of batches first."""
    short: dict[int, list[str]] = {}
    for r in rows:
        asked, ran = r.get("steps_requested"), r.get("steps")
        if r["error"] or asked is None or ran is None or ran >= asked:
            continue
        cell = f"{condition(r['condition'])} ({ran})"
        if cell not in short.setdefault(asked, []):
            short[asked].append(cell)
    return [f"ran fewer batches than steps={asked}: " + ", ".join(cells)
            for asked, cells in short.items()]


def sweep_error(row: dict) -> str:
    return (f"error in {condition(row['condition'])} pass {row['pass_']} {row['direction']}: "
            f"{row['error']}")


SWEEP_INTERRUPTED = "(interrupted: the rows above are what was measured)"


def sweep_period(row: dict) -> str:
    """A sweep row's period cell: the period, "every" for a stall on every
    fetch (EVERY-FETCH: no period), "4?" where the stalls fit a period
    that the row is too short to settle (UNSETTLED), else "-"."""
    if row.get("period") is not None:
        return str(row["period"])
    if row.get("temporal") == stall_timing.UNSETTLED and row.get("consistent_period"):
        return f"{row['consistent_period']}?"
    return "every" if row.get("temporal") == stall_timing.EVERY_FETCH else "-"


def sweep_unsettled(rows: list[dict]) -> Optional[str]:
    """The legend of "4?" period cells, when a row has one."""
    if not any(r.get("temporal") == stall_timing.UNSETTLED and r.get("consistent_period")
               for r in rows):
        return None
    return ("period N?: that row's stalls fit a stall every N fetches, not yet told from "
            "random stalls at its length (its own report says how many more steps would "
            "settle it).")


def row_workers(row: dict) -> Optional[int]:
    """A sweep row's num_workers: the DataLoader's own where known
    (``loader_num_workers``), else the condition's."""
    built = row.get("loader_num_workers")
    return built if built is not None else row["condition"].get("num_workers")


def sweep_in_order(rows: list[dict]) -> Optional[str]:
    """What a sweep over in_order showed (the seed's step after the
    num_workers sweep: "batches overtake but the cadence survives"), where
    rows ran both in_order=True and in_order=False; None otherwise.  Of the
    in_order=False rows: the deliveries that overtook a lower rank, and
    the rows whose stalls kept the period max(1, num_workers).  Batches
    that overtake while the period stays say the workers' round, not one
    slow batch holding the line; overtakings with no period left say
    single slow batches; no overtaking at all says no batch was ever ready
    before the awaited one (the workers finish together)."""
    ok = [r for r in rows if not r.get("error")]
    on = [r for r in ok if r["condition"].get("in_order") is True]
    # Overtaking is measured only on a DataLoader's deliveries.
    off = [r for r in ok if r["condition"].get("in_order") is False
           and r.get("overtaking") is not None]
    if not on or not off:
        return None

    def kept(r: dict) -> bool:
        k = stall_timing.effective_workers(row_workers(r))
        return k is not None and k >= 2 and r.get("period") == k

    def unsettled(r: dict) -> bool:
        # Too short to settle, yet consistent with a period: neither kept
        # nor lost ("3?" and "4?" rows counted as losing it, helper 33A).
        return (r.get("temporal") == stall_timing.UNSETTLED
                and bool(r.get("consistent_period")))

    if all(r.get("stalls") == 0 for r in on + off):
        # Nothing stalled: no batch held the line in either order (a
        # footer of "single slow batches held the line" above rows of 0
        # stalls, helper 33B, 3 of 3).
        return ("in_order: no row stalled in either order, so no batch held the line for "
                "in_order=False to let others overtake.")
    over = sum(int(r.get("overtaking") or 0) for r in off)
    undecided = sum(unsettled(r) for r in off)
    held = sum(kept(r) for r in off)
    decided = len(off) - undecided
    rows_off = plural(decided, "in_order=False row") + (
        f" that settled ({undecided} too short to say)" if undecided else "")
    on_kept = sum(kept(r) for r in on)
    if over and decided and held * 2 < decided and on_kept * 2 < len(on):
        # The period was not there with in_order=True either: nothing to
        # compare the overtaking rows against.
        return (f"in_order: with in_order=False {plural(over, 'delivery', 'deliveries')} overtook "
                "a lower rank, but "
                f"the in_order=True rows kept the period max(1, num_workers) in only {on_kept} "
                f"of {len(on)} as well: no cadence to compare, so the sweep does not say "
                "whether single slow batches held the line.")
    if over and not decided:
        return ("in_order: with in_order=False "
                f"{plural(over, 'delivery', 'deliveries')} overtook a lower rank; "
                f"every in_order=False row was too short to settle its period ({undecided}): "
                "run more steps a row to tell whether the cadence survives.")
    if not over:
        return (f"in_order: no delivery overtook a lower rank in the {rows_off}: no batch was "
                "ever ready before the awaited one, so the workers finish together (their "
                "round), not single slow batches holding the line.")
    if held * 2 >= decided:
        return ("in_order: with in_order=False "
                f"{plural(over, 'delivery', 'deliveries')} overtook a lower rank, yet "
                f"the stalls kept the period max(1, num_workers) in {held} of the {rows_off}: "
                "batches overtake but the cadence survives, so not a single slow batch "
                "holding the line but the workers' round; next, worker CPU against storage "
                "reads in the stalls (each run's report).")
    return ("in_order: with in_order=False "
            f"{plural(over, 'delivery', 'deliveries')} overtook a lower rank and the "
            f"stalls kept the period max(1, num_workers) in only {held} of the {rows_off}: "
            "single slow batches held the line with in_order=True.")


def sweep_progress(done: int, total: int, row: dict) -> str:
    """The progress line of one condition when tqdm is not installed."""
    gap = row["period"] if row.get("period") is not None else "-"
    status = (f"error {row['error']}" if row["error"] else
              f"mean fetch {fmt_s(row['mean_s'])}, {row['stalls']} stalls, period {gap}")
    return (f"[traceml.sweep {done}/{total}] {condition(row['condition'])} "
            f"pass {row['pass_']} {row['direction']}: {status}")
