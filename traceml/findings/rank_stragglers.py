"""Many ranks: the straggler that holds each step, and the echo of its
stalls on the other ranks.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from scipy.stats import theilslopes

from ..fmt import fmt_s, pct, plural
from . import _numbers, _words, attribution, input_bound, stall_threshold, stall_timing


# With DistributedDataParallel the gradient all-reduce makes every rank wait
# for the slowest one at each step, so the job waits, at step i, for the
# largest input wait across the ranks (torch DDP docs, "Internal Design":
# backward's all-reduce is a synchronisation point).  Steps are aligned by
# index: step i of every rank is the same optimizer step.
#
# The straggler's cost is the part of a step's wait that only it had: the
# largest wait minus the second largest ("unique wait"); the job would have
# waited the second largest anyway.  A rank is a straggler when it holds
# at least STRAGGLER_MIN_SHARE of the job's unique wait (a majority: no
# other rank can hold as much), when that unique wait is at least
# STRAGGLER_MIN_COST_SHARE of the job's step time (the 5% line below which
# TensorFlow's input-pipeline analyzer calls a step "not input-bound", the
# same materiality line as STALL_MIN_COST_SHARE), and when its own
# single-rank report finds its input wait matters (stalls kept by
# stalls_matter, or INPUT-BOUND / HAND-OVER): scheduling blips of a few ms
# (TRAPS: 2-10 ms under load) then never name a healthy rank.
STRAGGLER_MIN_SHARE = 0.5
STRAGGLER_MIN_COST_SHARE = stall_threshold.STALL_MIN_COST_SHARE


# The all-reduce echo: on the straggler's stall steps, another rank that
# waits for it inside the all-reduce sees its compute (fetch_done ->
# step end) grow by about the stall.  Echo when the median compute on
# those steps exceeds the median on the straggler's other steady steps by
# at least ECHO_MIN_ABSORBED of the straggler's median stall excess (its
# median stalled wait over its median calm wait): a majority of the stall
# reached that rank.  At least ECHO_MIN_STALLS stall steps (as for
# attribution: ATTR_MIN_STALLS), else unknown.
ECHO_MIN_ABSORBED = 0.5
ECHO_MIN_STALLS = attribution.ATTR_MIN_STALLS
# When the straggler stalls on most steps, fewer than ECHO_MIN_STALLS calm
# steps are left to set against its stalls, and the medians say nothing.
# The echo is then read on the stall steps themselves: a rank that waits
# for the straggler in the all-reduce grows its compute with the
# straggler's wait, step by step (slope about 1); one that overlapped it
# does not (slope about 0).  The slope is Theil-Sen's (the median of the
# pairwise slopes, scipy.stats.theilslopes: one outlying step cannot move
# it) of the other rank's compute against the straggler's wait; echo when
# it is at least ECHO_MIN_ABSORBED and its confidence interval at level
# 1 - ECHO_SLOPE_ALPHA lies above 0 (the slope is told from none at
# ECHO_SLOPE_ALPHA).  Waits that do not vary leave it unknown.
ECHO_SLOPE_ALPHA = 0.05


def max_across_ranks(waits, n: Optional[int] = None) -> tuple[np.ndarray, np.ndarray,
                                                               np.ndarray]:
    """(largest wait, the rank holding it, second largest wait) per
    aligned step, over ``waits`` (one int64 ns array per rank, in rank
    order; lengths may differ: a step counts the ranks that have it).

    Shapes (n,) with n the longest array (give ``n`` to read ``waits``,
    any iterable, once: one rank's array at a time); the holder is int32
    (the position in ``waits``), the lowest rank on ties; the second
    largest is 0 where one rank has the step.  One pass per rank, O(n)
    memory (no (ranks, n) matrix)."""
    if n is None:
        waits = list(waits)
        n = max((len(w) for w in waits), default=0)
    top = np.full(n, -1, dtype=np.int64)
    second = np.zeros(n, dtype=np.int64)
    holder = np.full(n, -1, dtype=np.int32)
    for r, w in enumerate(waits):
        w = np.asarray(w, dtype=np.int64)
        m = len(w)
        head = top[:m]
        # The second largest takes the smaller of the new wait and the old top.
        np.maximum(second[:m], np.minimum(w, head), out=second[:m])
        wins = w > head
        head[wins] = w[wins]
        holder[:m][wins] = r
    np.maximum(second, 0, out=second)
    return top, holder, second


def stragglers(top: np.ndarray, holder: np.ndarray, second: np.ndarray,
               job_step_ns: float, ranks: list, input_matters: dict) -> list[dict]:
    """Per rank of ``ranks`` (the rank numbers, positions in ``holder``):
    {rank, held_steps (steps where it held the largest wait), held_share
    (of the aligned steps), unique_wait_s (its summed unique wait),
    unique_share (of the job's unique wait; None when the job has none),
    cost_share (of ``job_step_ns``, the job's summed step time), straggler
    (the rule above, with ``input_matters[rank]`` its own report's
    verdict)}."""
    n = len(top)
    unique = (top - second).astype(np.float64)
    unique[holder < 0] = 0.0
    total_unique = float(unique.sum())
    held = np.bincount(holder[holder >= 0], minlength=len(ranks))
    held_unique = np.bincount(holder[holder >= 0], weights=unique[holder >= 0],
                              minlength=len(ranks))
    out = []
    for i, r in enumerate(ranks):
        share = float(held_unique[i]) / total_unique if total_unique > 0 else None
        cost = float(held_unique[i]) / job_step_ns if job_step_ns > 0 else None
        out.append({
            "rank": int(r),
            "held_steps": int(held[i]),
            "held_share": float(held[i]) / n if n else None,
            "unique_wait_s": float(held_unique[i]) * 1e-9,
            "unique_share": share,
            "cost_share": cost,
            "straggler": bool(share is not None and share >= STRAGGLER_MIN_SHARE
                              and cost is not None and cost >= STRAGGLER_MIN_COST_SHARE
                              and input_matters.get(r, False)),
        })
    return out


def input_matters(summary: dict) -> bool:
    """Whether a single-rank report finds its input wait worth an
    experiment: stalls kept by stalls_matter, or INPUT-BOUND / HAND-OVER."""
    st = summary.get("stalls") or {}
    kept = bool(st.get("count")) and st.get("matter") == stall_threshold.STALLS_KEPT
    return kept or summary.get("diagnosis") in (input_bound.INPUT_BOUND, input_bound.HAND_OVER,
                                                input_bound.HOST_BOUND)


def echo(stall_mask: np.ndarray, straggler_wait_ns: np.ndarray,
         straggler_steady: np.ndarray, compute_ns: np.ndarray,
         steady: np.ndarray) -> dict:
    """The all-reduce echo on one other rank of a straggler's stalls (rule
    above).  ``stall_mask``, ``straggler_wait_ns`` and ``straggler_steady``
    are the straggler's per-step stall mask, input wait (ns) and
    steady-state mask; ``compute_ns`` and ``steady`` the other rank's
    per-step compute (ns) and steady mask; aligned by index, lengths may
    differ (the common prefix counts).

    Returns {read ("medians", or "slope" where fewer than ECHO_MIN_STALLS
    calm steps are left), stall_steps, compute_on_stalls_s,
    compute_other_s (None for "slope"), growth_s, stall_excess_s (None for
    "slope"), absorbed (growth / stall excess, or the slope), echo (bool;
    None unknown), unknown (None, "few_stalls": fewer than ECHO_MIN_STALLS
    shared stall steps, "flat_waits": no calm steps to set against them
    and the straggler's waits on them do not vary)}."""
    m = min(len(stall_mask), len(compute_ns))
    stall = stall_mask[:m] & steady[:m]
    other = ~stall_mask[:m] & steady[:m] & straggler_steady[:m]
    k = int(np.count_nonzero(stall))
    out = {"read": "medians", "stall_steps": k, "compute_on_stalls_s": None,
           "compute_other_s": None, "growth_s": None, "stall_excess_s": None,
           "absorbed": None, "echo": None, "unknown": None}
    if k < ECHO_MIN_STALLS:
        return {**out, "unknown": "few_stalls"}
    on = float(_numbers.int_median(compute_ns[:m][stall]))
    out["compute_on_stalls_s"] = on * 1e-9
    if int(np.count_nonzero(other)) < ECHO_MIN_STALLS:
        return {**out, **_echo_slope(straggler_wait_ns[:m][stall], compute_ns[:m][stall])}
    off = float(_numbers.int_median(compute_ns[:m][other]))
    calm = straggler_wait_ns[~stall_mask & straggler_steady]
    stalled = straggler_wait_ns[stall_mask & straggler_steady]
    excess = (float(_numbers.int_median(stalled)) - (float(_numbers.int_median(calm)) if len(calm) else 0.0)
              if len(stalled) else 0.0)
    growth = on - off
    absorbed = growth / excess if excess > 0 else None
    return {**out, "compute_other_s": off * 1e-9, "growth_s": growth * 1e-9,
            "stall_excess_s": excess * 1e-9, "absorbed": absorbed,
            "echo": bool(absorbed is not None and absorbed >= ECHO_MIN_ABSORBED)}


def _echo_slope(wait_ns: np.ndarray, compute_ns: np.ndarray) -> dict:
    """The echo read as a slope over the stall steps (rule above): {read,
    absorbed (the slope), growth_s (the slope times the spread of the
    waits, their p90 - p10), echo, unknown}."""

    wait = np.asarray(wait_ns, dtype=np.float64)
    if np.ptp(wait) == 0:
        return {"read": "slope", "unknown": "flat_waits"}
    slope, _, low, _ = theilslopes(np.asarray(compute_ns, dtype=np.float64), wait,
                                   alpha=1 - ECHO_SLOPE_ALPHA)
    spread = float(np.percentile(wait, 90) - np.percentile(wait, 10))
    return {"read": "slope", "absorbed": float(slope), "growth_s": float(slope) * spread * 1e-9,
            "echo": bool(slope >= ECHO_MIN_ABSORBED and low > 0)}


def rank_missing_reason(kind: str, *, timeout_s: float, got: int = 0, of: int = 0) -> str:
    """Why a rank is missing from a gathered report: ``kind`` "absent"
    (it did not check in within the deadline), "silent" (it checked in,
    then sent nothing within the deadline) or "stopped" (a message after
    ``got`` of its ``of`` steps took longer than the deadline)."""
    if kind == "absent":
        return (f"no answer within {fmt_s(timeout_s)} (it did not call the gather, "
                "has died, or called it later)")
    if kind == "silent":
        return f"checked in, then sent nothing within {fmt_s(timeout_s)}"
    return (f"stopped sending: a message took longer than {fmt_s(timeout_s)} after "
            f"{got} of its {of} steps")


def ranks_source_name(name: str, ranks: int) -> str:
    """The job report's source name: "DataLoader#1 (max of 3 ranks)"."""
    return f"{name} (max of {plural(ranks, 'rank')})"


def straggler_rule() -> str:
    """The straggler rule, from stragglers()' constants."""
    return (f"a straggler alone holds at least {_words._of_the(STRAGGLER_MIN_SHARE)} wait "
            "only one rank had (each step's largest input wait minus the second largest, "
            "summed), that wait is at least "
            f"{pct(STRAGGLER_MIN_COST_SHARE)} of the job's step time, and its own "
            "report finds its input wait matters (stalls kept, or "
            f"{input_bound.INPUT_BOUND} / {input_bound.HAND_OVER} / {input_bound.HOST_BOUND})")


def echo_rule() -> str:
    """The all-reduce echo rule, from echo()'s constants."""
    return (f"a rank echoes a straggler's stalls when its median compute on the "
            f"straggler's stall steps exceeds its median on the other steady steps by at "
            f"least {_words._of_the(ECHO_MIN_ABSORBED)} straggler's median stall "
            f"(at least {ECHO_MIN_STALLS} stall steps), or, with fewer than "
            f"{ECHO_MIN_STALLS} other steps, when its compute on the stall steps grows with "
            f"the straggler's wait (Theil-Sen slope at least {ECHO_MIN_ABSORBED:g}, above 0 "
            f"at alpha {ECHO_SLOPE_ALPHA:g}): it waited for that rank "
            "inside the gradient all-reduce")


def _rank_cadence(p: dict) -> str:
    if p.get("period"):
        return f"stalls {stall_timing.PERIODIC} every {p['period']} steps"
    if p.get("stalls"):
        return f"{plural(p['stalls'], 'stall')}, {p.get('temporal') or 'no pattern'}"
    return "no stalls"


def ranks_lines(r: dict) -> list[str]:
    """The ranks part of a gathered report: who was gathered, who is
    missing, the straggler(s) with their cadence, and the echo."""
    got = r["gathered"]
    out = [f"{plural(r['world_size'], 'rank')}: gathered "
           f"{', '.join(str(x) for x in got)} · {r['aligned_steps']} aligned steps · "
           f"job's largest input wait per step: median {fmt_s(r['max_wait']['median'])}, "
           f"total {fmt_s(r['max_wait']['total'])}"]
    out.extend(f"MISSING rank {m['rank']}: {m['reason']}" for m in r["missing"])
    by_rank = {p["rank"]: p for p in r["per_rank"]}
    if not r["stragglers"]:
        out.append("no straggler: no rank alone holds the job's input wait "
                   f"({r['straggler_rule']})")
    for s in r["stragglers"]:
        p = by_rank[s]
        out.append(
            f"STRAGGLER rank {s}: held the job's largest input wait on {p['held_steps']} "
            f"of {r['aligned_steps']} steps; {pct(p['unique_share'])} of the wait only one "
            f"rank had ({fmt_s(p['unique_wait_s'])}, {pct(p['cost_share'], 1)} of the "
            f"job's step time) · {p['diagnosis']} · {_rank_cadence(p)}")
    for e in r["echo"]:
        if e.get("echo") is None:
            why = ("its stall steps do not vary in wait and it has too few other steps"
                   if e.get("unknown") == "flat_waits" else "too few of its stall steps")
            out.append(f"  echo on rank {e['rank']}: unknown, rank {e['straggler']}: {why} "
                       "to tell")
            continue
        verb = ("waited for it in the all-reduce" if e["echo"]
                else "no echo (it did not wait for it)")
        if e.get("read") == "slope":
            out.append(
                f"  echo on rank {e['rank']}: {verb}: on rank {e['straggler']}'s "
                f"{e['stall_steps']} stall steps (too few other steps to compare), its "
                f"compute grew {e['absorbed']:.2f} ms per ms of rank {e['straggler']}'s wait "
                "(Theil-Sen slope)")
            continue
        out.append(
            f"  echo on rank {e['rank']}: {verb}: compute {fmt_s(e['compute_on_stalls_s'])} "
            f"(median) on rank {e['straggler']}'s {e['stall_steps']} stall steps against "
            f"{fmt_s(e['compute_other_s'])} on its other steps, "
            f"{'+' if e['growth_s'] >= 0 else '-'}{fmt_s(abs(e['growth_s']))}"
            + (f", {pct(e['absorbed'])} of its median stall of "
               f"{fmt_s(e['stall_excess_s'])}" if e.get("absorbed") is not None else ""))
    return out


def ranks_next_steps(r: dict) -> list[str]:
    """What to do about the ranks: the straggler's own pipeline first."""
    out = []
    by_rank = {p["rank"]: p for p in r["per_rank"]}
    for s in r["stragglers"]:
        p = by_rank[s]
        loader = p.get("loader") or {}
        workers = (f" (num_workers={loader['num_workers']})" if loader.get("num_workers")
                   is not None else "")
        echoed = [e["rank"] for e in r["echo"] if e["straggler"] == s and e.get("echo")]
        wait = (f"; {'rank' if len(echoed) == 1 else 'ranks'} "
                f"{', '.join(str(x) for x in echoed)} "
                f"{'waits' if len(echoed) == 1 else 'wait'} for it in the all-reduce, so "
                f"speeding {'it' if len(echoed) == 1 else 'them'} up gains nothing"
                if echoed else "")
        out.append(
            f"fix rank {s} first (host {p.get('host') or '?'}): compare its loader"
            f"{workers}, its host (CPUs, other processes, storage) and its shard of the "
            f"data (the samples its sampler hands it) with rank "
            f"{next((x for x in r['gathered'] if x != s), s)}'s{wait}")
        out.extend(f"rank {s}: {line}" for line in (p.get("next") or [])[:1])
    if r["missing"]:
        out.append("the report leaves out rank(s) "
                   + ", ".join(str(m["rank"]) for m in r["missing"])
                   + ": call traceml.report(ranks='all') on every rank, or raise timeout_s")
    return out


def compare_ranks_line(row: dict) -> str:
    """A compare row gathered over many ranks: whose waits it compares."""
    who = (", ".join(f"rank {x}" for x in row["stragglers"]) if row.get("stragglers")
           else "none")
    return (f"{row['label']}: largest input wait across {plural(row['ranks'], 'rank')} "
            f"per step; straggler: {who}")
