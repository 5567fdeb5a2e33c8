"""The code that makes the slow batches: the function whose share of the
workers' sampled CPU tells the stalled batches from the others.

Numbers (``summary["slow_code"]``, traceml.build.worker_code.slow_code_block): each
DataLoader worker's Python stack sampled every 5 ms of its CPU
(traceml.stacks), each sample tied to the batch its worker was making;
the batches split into *slow* and *fast* by their own make time where
those form two groups (:func:`slow_make_threshold_ns`; one group: every
batch alike, all of them the "slow" side and none fast to compare; at
num_workers=0, stalled fetches against the others); per function (file,
qualified name, first line), the sample weight of each group whose stack
holds it.  Judged only when the loop stalled.

The model.  Under the null hypothesis that a function takes the same
share of the workers' CPU in slow and in fast batches, the samples
holding it are split between the groups as the samples are: the count in
the slow group is hypergeometric.  A function is named when the one-sided
Fisher exact test (scipy.stats.fisher_exact) of its 2x2 table (holds it or
not, slow or fast) rejects the null at SLOW_CODE_ALPHA / m, m the
functions tested (Bonferroni).  Among those named, a function and the
callee carrying nearly all of its samples tell the batches apart equally:
the outermost of those within CALLEE_SHARE of the largest share gap is the
one to look at (the caller the dataset's code calls), named with the
innermost of them (``down_to``: where that path spends the CPU, which a
reader of the caller would otherwise look for).  When even a
function in every slow sample and no fast one could not reach that level
(too few samples), the answer is *not yet*.  Before any function: the slow
batches' CPU over their wall time (the worker's own clock, BatchLog); below
OFF_CPU_SHARE of the other batches' (workers sharing cores get less than a
core whatever they run; with one group of make times, no other batches:
on CPU and waiting for one together under OFF_CPU_SHARE) the workers
were mostly off CPU and no function is to blame, and of the time off CPU the larger measured part is named:
the run queue (waiting for a CPU: the host, or more workers than cores)
or the rest (blocked: sleep, I/O, a lock); not where the slow batches
also burned BUSIER_RATIO times the others' CPU a batch (``slow_cpu_ratio``,
medians) and that extra CPU explains more of a slow batch than its time
blocked does (``slow_extra_cpu_share``): their own code made them
costlier, and the functions say which.  Blocked, the function is named
from the wall-clock samples the workers took off CPU while making a batch
(traceml.stacks.KIND_OFF): the path most of the slow batches' off-CPU
samples went down beyond chance (:func:`held_path`), whose innermost
function calls the sleep, the read or the lock (``look_at_function`` with
``off_cpu``).
Before that, the ticks that
fell in another thread (a helper
decoding, the queue's feeder) are said when they outweigh the sampled
thread's: the batch's thread then waits on CPU spent elsewhere.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
from scipy import stats

from .. import _core
from ..fmt import code_where, fmt_s, pct, plural
from . import attribution, slow_samples, stall_threshold, wait_parts
from ._types import Finding, Words

# Functions named beside the lead (another slow code path at its depth),
# at most.
BESIDE_SHOWN = 2
# The false-naming rate across the functions of one report: 1 in 100
# (stall_timing.PERIOD_ALPHA's level), split over the functions tested.
SLOW_CODE_ALPHA = 0.01
# "Nearly all of its samples": a callee within 90 % of its caller's share
# gap names the same code path; the caller is named.
CALLEE_SHARE = 0.9
# The slow batches' own code that the test must be able to name before
# "no function tells them apart" is said: a function in this share of
# their samples and in none of the fast ones', which is what slow batches
# at attribution.BUSIER_RATIO times the fast ones' CPU spend in code of
# their own (1 - 1/1.5 = 1/3).
POWER_SHARE = 1.0 - 1.0 / attribution.BUSIER_RATIO
# Off CPU: the slow batches' worker CPU under half their make time means
# the worker mostly waited (sleep, I/O, a lock), so no function's CPU made
# them slow.
OFF_CPU_SHARE = 0.5
# Functions a report keeps in its table (largest share gap first), and
# how many besides the named one its evidence line shows.
TABLE_ROWS = 8
TABLE_SHOWN = 2

# Two groups of make times: Otsu's split of log(make time) separates
# them with at least this eta (the between-group share of the variance),
# stall_threshold's test of two groups.  One lognormal group reaches at
# most 2/pi = 0.64 however it is split, so a run whose batches all cost
# alike, some a little longer by chance or by a busy host, is one group:
# naming the code of its "slower half" would name whatever every batch
# runs.  No ratio between the groups is asked (stall_threshold's 4x is for
# fetch waits): a batch of 8 samples with one slow among them is at most
# about 4x the others, and still a group apart.
SLOW_MAKE_MIN_ETA = stall_threshold.BIMODAL_MIN_ETA

# The codes of the evidence line (the next step is look_at_function).
EVIDENCE_CODES = ("slow_code_named", "slow_code_same", "slow_code_too_few", "slow_code_slow_only",
                  "slow_code_not_making", "slow_code_off_cpu", "slow_code_cpu_wait",
                  "slow_code_gc", "slow_code_other_thread", "slow_code_off")


def slow_make_threshold_ns(make_ns: np.ndarray) -> Optional[float]:
    """The make time (ns) above which a batch is slow, where the make
    times ``make_ns`` (shape (n,), ns) form two groups (log-Otsu eta >=
    SLOW_MAKE_MIN_ETA); None where they form one group."""
    split = _core.log_otsu(np.asarray(make_ns, dtype=np.int64))
    eta, threshold = split["eta"], split["threshold_ns"]
    if not (math.isfinite(eta) and math.isfinite(threshold)) or eta < SLOW_MAKE_MIN_ETA:
        return None
    return float(threshold)


def _p_value(a: float, n1: float, b: float, n0: float) -> float:
    """One-sided Fisher exact p of ``a`` of ``n1`` slow samples against
    ``b`` of ``n0`` fast ones holding a function."""
    a, n1, b, n0 = (int(round(x)) for x in (a, n1, b, n0))

    return float(stats.fisher_exact([[a, n1 - a], [b, n0 - b]], alternative="greater")[1])


def tested(block: dict) -> list[dict]:
    """The functions of ``block["functions"]`` with their Fisher p-value
    (``p_value``) and share gap (``gap``), largest gap first; ``named``
    marks those under SLOW_CODE_ALPHA / (functions tested)."""
    n1, n0 = block["samples"]["slow"], block["samples"]["fast"]
    rows = [dict(f) for f in block.get("functions") or [] if f["slow"] > 0]
    m = max(1, len(rows))
    for f in rows:
        f["slow_share"] = f["slow"] / n1 if n1 else 0.0
        f["fast_share"] = f["fast"] / n0 if n0 else 0.0
        f["gap"] = f["slow_share"] - f["fast_share"]
        f["p_value"] = _p_value(f["slow"], n1, f["fast"], n0) if n1 and n0 else 1.0
        f["named"] = f["p_value"] < SLOW_CODE_ALPHA / m and f["gap"] > 0
    rows.sort(key=lambda f: -f["gap"])
    return rows


def best_p_value(n1: float, n0: float, held: Optional[float] = None) -> float:
    """The smallest p a function in ``held`` of the ``n1`` slow samples
    (None: all of them) could reach: in none of the ``n0`` fast ones, the
    chance that all its samples fall among the slow, C(n1, held) /
    C(n1 + n0, held); 1 / C(n1 + n0, n1) for one in every slow sample."""
    n1, n0 = int(round(n1)), int(round(n0))
    a = n1 if held is None else int(round(held))
    if n1 < 0 or n0 < 0 or not 0 <= a <= n1:
        return 1.0

    def log_comb(n: int, k: int) -> float:
        # In logs: C(n1 + n0, n1) overflows a float past about 1030 samples.
        return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)

    return math.exp(log_comb(n1, a) - log_comb(n1 + n0, a))


def _row(f: dict) -> dict:
    return {"function": f["function"], "file": f["file"],
            "line": f["hot_line"] if f["hot_line"] >= 0 else f["first_line"],
            "first_line": f["first_line"], "slow_share": f.get("slow_share"),
            "fast_share": f.get("fast_share")}


def judge(block: Optional[dict]) -> Optional[Finding]:
    """The one finding on the slow batches' code (None: nothing to say:
    no block, no stall, or no slow batch).  Its numbers carry ``main``:
    the samples are the main process's (num_workers=0), not workers'."""
    f = _judge(block)
    if f is None:
        return None
    return Finding(f.code, {**f.numbers, "main": bool(block.get("in_main"))})


def _judge(block: Optional[dict]) -> Optional[Finding]:
    if block is None:
        return None
    if block.get("status") != "on":
        return Finding("slow_code_off", {"why": block.get("status")})
    s = block["samples"]
    if not block.get("stalls", block.get("slow_batches")) or not block.get("slow_batches"):
        return None     # the loop never waited, or no batch was slow to make
    if block.get("slow_batches_in_making") == 0:
        return Finding("slow_code_not_making", {"stalls": block.get("stalls")})
    gc_share = block.get("slow_gc_cpu_share")
    if gc_share is not None and gc_share >= OFF_CPU_SHARE:
        # Measured where it ran, in any of the worker's threads: a
        # collection is the interpreter's, not a function of the
        # dataset's, and the stacks cannot name it (6 workers of 2
        # epochs, non-persistent: one batch a run holding a 100-112 ms
        # generation-2 collection, 75-78 % of its CPU, read "a helper
        # thread" or nothing; helper 33A).
        return Finding("slow_code_gc", {"share": gc_share,
                                        "batches": block["slow_batches"]})
    other = s.get("slow_other_thread", 0)
    # Outside the sampled thread only where that CPU could have made the
    # slow batches slow (a sleeping sample leaves a few samples of torch's
    # threads, not a helper's work): at least OFF_CPU_SHARE of their time,
    # or, where the worker's queue for a CPU is measured, slow batches
    # that were not blocked (on a CPU or queued for one, all threads, at
    # least OFF_CPU_SHARE of their make time).  Beside 2 CPU hogs a helper
    # thread doing the work queues as well: 22-33 % of the slow batches'
    # time on CPU, 86-90 % of their CPU samples, the rest queued.
    other_share = block.get("slow_other_cpu_share")
    cpu_share, runq = block.get("slow_cpu_share"), block.get("slow_runq_share")
    busy = (cpu_share is not None and runq is not None
            and cpu_share + runq >= OFF_CPU_SHARE)
    # Where the dataset's own thread timed its calls, the other threads'
    # CPU is measured, and a tick counted in another thread is not: a
    # timer signal goes to another thread when the one burning the CPU
    # already has one pending.  6 workers on 2 cores, one batch holding a
    # 112 ms garbage collection on the dataset's thread: 77-87 % of its
    # ticks counted in other threads, which took 3 % of its CPU
    # (/proc/PID/task: 0 ticks), and "a helper thread" in 6 of 8 runs
    # (helper 33A).
    measured = block.get("slow_other_threads_cpu_share")
    if measured is not None and measured < OFF_CPU_SHARE:
        other = 0
    if other > s["slow"] and (other_share is None or other_share >= OFF_CPU_SHARE or busy):
        return Finding("slow_code_other_thread", {
            "share": other / (other + s["slow"]), "samples": other + s["slow"]})
    # Against the other batches' share: workers sharing cores get less
    # than a core each whatever they run, and that is not "off CPU".
    fast_share = block.get("fast_cpu_share") or 1.0
    # Slow batches that also burned BUSIER_RATIO times the others' CPU a
    # batch were made slow by their own code too: the run queue or a sleep
    # stretched them, and their functions are the finding; unless the time
    # they spent blocked (neither on CPU nor queued) outweighs the part of
    # them their extra CPU explains: the larger measured part is named (a
    # batch that sleeps 30 ms and burns 0.7 ms of CPU against the others'
    # 0.3 ms is 2.3x their CPU, and 1 % of its time).
    extra = block.get("slow_extra_cpu_share")
    blocked_share = (None if cpu_share is None or runq is None
                     else max(0.0, 1.0 - cpu_share - runq))
    costlier = ((block.get("slow_cpu_ratio") or 0.0) >= attribution.BUSIER_RATIO
                and not (extra is not None and blocked_share is not None
                         and extra < blocked_share))
    one_group = bool(block.get("one_group"))
    # Blocked (neither on CPU nor queued for one) most of their make time,
    # measured: off CPU whatever the other batches did (a loader that
    # sleeps in every batch has no batch on CPU to compare with).
    blocked = cpu_share is not None and runq is not None and cpu_share + runq < OFF_CPU_SHARE
    # Against the other batches' share only where there are other batches
    # or no queue reading: with one group, a batch that waited for a CPU
    # still ran its own code on it (4 workers on 2 cores are on CPU half
    # their make time, whatever they run).
    relative = (cpu_share is not None and not (one_group and runq is not None)
                and cpu_share < OFF_CPU_SHARE * fast_share)
    off = blocked or relative
    if off and not costlier:
        numbers = {"cpu_share": cpu_share, "fast_cpu_share": block.get("fast_cpu_share"),
                   "batches": block["slow_batches"], "one_group": bool(block.get("one_group"))}
        # Off CPU, the larger measured part decides: waiting for a CPU (the
        # run queue) or blocked (sleep, I/O, a lock: the rest).
        if runq is not None and runq > max(0.0, 1.0 - cpu_share - runq):
            # The queue set these batches apart, yet every batch still ran
            # its code on a CPU: where that CPU went, held beyond chance,
            # is still the code to make cheaper.
            path = held_path(block.get("hot_path") or [], s["slow"] + s["fast"])
            return Finding("slow_code_cpu_wait", {**numbers, "runq_share": runq,
                                                  "path": path})
        # Where the blocked time went: the path most of the slow batches'
        # off-CPU wall-clock samples held beyond chance (held_path), the
        # function that sleeps, reads or waits at its end.
        off_samples = float(s.get("slow_off_cpu") or 0.0)
        return Finding("slow_code_off_cpu", {
            **numbers, "off_samples": off_samples,
            "path": held_path(block.get("off_path") or [], off_samples)})
    rows = tested(block)
    named = [f for f in rows if f["named"]]
    m = max(1, len(rows))
    if named:
        top = max(f["gap"] for f in named)
        near = [f for f in named if f["gap"] >= CALLEE_SHARE * top]
        lead = min(near, key=lambda f: (math.inf if f["root_distance"] is None
                                        else f["root_distance"], -f["gap"]))
        placed = [f for f in near if f["root_distance"] is not None]
        # Below the lead, a callee within CALLEE_SHARE of the top gap is
        # where the lead's slow samples go, tested or not: the lead passed,
        # and its callee, in a sample or three fewer, need not pass again
        # (`augment_noise` under a lambda, 101 of 104 slow samples, p =
        # 0.0018 against 0.0017, left "Look at `PL.__getitem__`": helper
        # 41B).
        if lead["root_distance"] is not None:
            placed += [f for f in rows if f not in near and f["root_distance"] is not None
                       and f["root_distance"] > lead["root_distance"]
                       and f["gap"] >= CALLEE_SHARE * top]
        # Down to the innermost of the user's own functions where there is
        # one: a torch op under it is where its CPU goes, not what to change.
        own = [f for f in placed if not f.get("library")] or placed
        # A comprehension's own frame is its function's (Python 3.12
        # inlines them: the same code names the same function everywhere).
        own = [f for f in own if not _comprehension(f)] or own
        inner = max(own, key=lambda f: (f["root_distance"], -f["gap"]), default=None)
        down_to = (_row(inner) if inner is not None and lead["root_distance"] is not None
                   and inner["root_distance"] > lead["root_distance"] else None)
        # The near functions between the two, outermost first: with fast
        # batches too short to draw many samples, every caller on the slow
        # path tells the batches apart about equally, and which of them is
        # outermost by a sample or two is chance; the path between names
        # them all (the function that does the work among them).
        through = ([] if down_to is None else [
            _row(f) for f in sorted(placed, key=lambda f: f["root_distance"])
            if lead["root_distance"] < f["root_distance"] < inner["root_distance"]])
        # Named functions beside the lead, at its depth and on no path of
        # its: another code path that makes slow batches (every 12th index
        # decoding video, every 12th + 5 resampling audio: the lead named
        # one at 47-50% and the other only in the evidence, helper 35B).
        # Disjoint from it: two functions whose slow shares add past the
        # whole share some samples, so one runs under the other (a helper
        # both paths call).
        beside, taken = [], lead["slow_share"]
        for f in named:
            if (f is not lead and f["root_distance"] is not None
                    and lead["root_distance"] is not None
                    and abs(f["root_distance"] - lead["root_distance"]) < 1.0
                    and not f.get("library") and taken + f["slow_share"] <= 1.0
                    and len(beside) < BESIDE_SHOWN):
                beside.append(_row(f))
                taken += f["slow_share"]
        # The lead's slow samples split between two or more of the user's
        # functions under it, none carrying CALLEE_SHARE of it (every 20th
        # index decoding video, every 20th + 10 resampling audio, in
        # alternate slow batches: "Look at `AV.__getitem__`", the caller of
        # both, in 4 of 4 runs, helper 39B): those are where to look.  The
        # lead passed the test; this says where its slow samples go, so
        # each is only asked to be commoner in the slow batches (gap > 0)
        # and to hold at least 1 - CALLEE_SHARE of the lead's slow share;
        # disjoint (their shares add to at most the lead's) and together
        # CALLEE_SHARE of it.
        split = None
        if down_to is None and lead["root_distance"] is not None:
            under = [f for f in rows if f is not lead and not f.get("library")
                     and f["root_distance"] is not None
                     and f["root_distance"] > lead["root_distance"] and f["gap"] > 0
                     and f["slow_share"] >= (1.0 - CALLEE_SHARE) * lead["slow_share"]]
            if under:
                depth = min(f["root_distance"] for f in under)
                level = sorted((f for f in under if f["root_distance"] - depth < 1.0),
                               key=lambda f: -f["slow_share"])
                total = sum(f["slow_share"] for f in level)
                if (len(level) >= 2 and total >= CALLEE_SHARE * lead["slow_share"]
                        and total <= lead["slow_share"] + 1e-9):
                    split = [_row(f) for f in level[:BESIDE_SHOWN + 1]]
        # Library code alone tells the batches apart (the user's function
        # runs in every batch, its large inputs in the slow ones): the
        # innermost of the user's functions above it, holding every slow
        # sample it does, is where to look ("Look at
        # `JSONDecoder.raw_decode` in `json/decoder.py:353`" with no word
        # of the dataset's parse_record, 2 of 11 runs, helper 39B).
        caller = None
        if lead.get("library") and (down_to is None or inner.get("library")):
            callers = [f for f in rows if not f.get("library") and f["root_distance"] is not None
                       and lead["root_distance"] is not None
                       and f["root_distance"] < lead["root_distance"]
                       and f["slow"] >= lead["slow"]]
            if callers:
                caller = _row(max(callers, key=lambda f: f["root_distance"]))
        return Finding("slow_code_named", {
            **_row(lead), "p_value": lead["p_value"], "samples_slow": s["slow"],
            "samples_fast": s["fast"], "down_to": down_to, "through": through,
            **({"beside": beside} if beside else {}),
            **({"own_caller": caller} if caller else {}),
            **({"split": split} if split else {})})
    total = s["slow"] + s["fast"]
    # Too few samples to tell: a function of the slow batches' own, in
    # POWER_SHARE of their samples and in no fast one, could not pass (a
    # function in 901 of 912 slow samples and the one fast sample: p =
    # 0.013; "they run the same code, only longer" stood beside it, helper
    # 39B); without functions, one in every slow sample.  A stated share,
    # not the share of the function furthest apart: where the batches run
    # the same code that one is noise (3 of 21 slow samples against 1 of
    # 52 fast, beside a path in 68 of 73, read "too few to name a
    # function").
    held = math.ceil(POWER_SHARE * s["slow"]) if rows else None
    if (not s["fast"] and block.get("fast_batches")) or (
            s["fast"] and best_p_value(s["slow"], s["fast"], held) >= SLOW_CODE_ALPHA / m):
        # Fast batches were made, but too short to draw enough samples to
        # test against (none, or too few for any function to reach the
        # level): nothing tells the slow batches' code from theirs.  Where
        # the samples, nearly all the slow batches', hold a path beyond
        # chance, that is where the slow batches' CPU goes.
        path = held_path(block.get("hot_path") or [], total)
        if path and s["slow"] > s["fast"]:
            beside = beside_path(rows, path, total)
            return Finding("slow_code_slow_only", {"path": path, "samples": total,
                                                   "fast": s["fast"], "cpu_share": cpu_share,
                                                   "runq_share": runq,
                                                   **({"beside": beside} if beside else {})})
        # Most stalls awaited batches no slower to make than the rest: at
        # most one stall a slow batch, so past twice their count the
        # stalls are every batch's cost (a lock-step round of workers each
        # too slow for the loop), and where all the samples went is the
        # code to make cheaper (the quick demo beside 3 CPU hogs: 17
        # stalls, one batch slow to make and one sample in it, read "too
        # few to name a function" beside `_delta_values` in 93% of the 61).
        stalls, slow_batches = block.get("stalls") or 0, block.get("slow_batches") or 0
        if path and stalls > 2 * slow_batches:
            beside = beside_path(rows, path, total)
            return Finding("slow_code_same", {
                "path": path, "samples": total, "every_fetch": False, "one_group": False,
                "stalls_on_fast": {"stalls": stalls, "slow_batches": slow_batches},
                "cpu_share": cpu_share, "runq_share": runq,
                **({"beside": beside} if beside else {})})
        return Finding("slow_code_too_few", {"samples": total, "slow": s["slow"],
                                             "fast": s["fast"]})
    path = held_path(block.get("hot_path") or [], total)
    if not path:
        return Finding("slow_code_too_few", {"samples": total, "slow": s["slow"],
                                             "fast": s["fast"]})
    beside = beside_path(rows, path, total)
    return Finding("slow_code_same", {"path": path, "samples": total,
                                      "every_fetch": not s["fast"] and not one_group,
                                      "one_group": one_group, "cpu_share": cpu_share,
                                      "runq_share": runq,
                                      **({"beside": beside} if beside else {})})


def beside_path(rows: list[dict], path: list[dict], total: float) -> list[dict]:
    """The user's functions off a held hot path that hold a branch of
    their own: at the depth of the path's innermost user function (within
    one frame, as ``beside`` for a named function), not on the path, each
    holding more than 1 - CALLEE_SHARE of the ``total`` samples beyond
    chance (one-sided binomial test at SLOW_CODE_ALPHA), disjoint from it
    (their shares and its add to at most its caller's); at most
    BESIDE_SHOWN, largest first, as {function, file, line, share}.  The
    hot path follows the larger branch alone: two slow functions at 70/30
    under one caller read only `decode_video` 68-72% (helper 41B, 4 of 6
    runs)."""
    n = int(round(total))
    if n <= 0:
        return []
    on = {(e["function"], e["file"]) for e in path}
    by = {(f["function"], f["file"]): f for f in rows}
    users = [(i, by[(e["function"], e["file"])]) for i, e in enumerate(path)
             if not e.get("library") and (e["function"], e["file"]) in by]
    if not users or users[-1][1]["root_distance"] is None:
        return []
    at, anchor = users[-1]
    room = path[at - 1]["share"] if at > 0 else 1.0
    taken, out = path[at]["share"], []
    for f in sorted(rows, key=lambda f: -(f["slow"] + f["fast"])):
        k = int(round(f["slow"] + f["fast"]))
        if ((f["function"], f["file"]) in on or f.get("library") or f["root_distance"] is None
                or abs(f["root_distance"] - anchor["root_distance"]) >= 1.0
                or taken + k / n > room + 1e-9 or len(out) >= BESIDE_SHOWN):
            continue
        if stats.binomtest(k, n, 1.0 - CALLEE_SHARE,
                           alternative="greater").pvalue >= SLOW_CODE_ALPHA:
            continue
        out.append({**_row(f), "share": k / n})
        taken += k / n
    return out


def _beside_words(p: dict) -> str:
    """"; beside it, `f` in `x.py:3` 28%" for a path's ``beside``, or ""."""
    b = p.get("beside")
    if not b:
        return ""
    return "; beside it, " + ", ".join(f"{code_where(f)} {pct(f['share'])}" for f in b)


def alike(s: dict, f: Finding) -> bool:
    """Whether the ``slow_code_same`` finding ``f`` means every batch
    costs alike.  Not where the attribution pins the slow batches on one
    worker or on particular samples, or the per-sample timing finds slow
    samples (:func:`_samples_slow`): whatever the make times' split, those
    batches cost more.  Else alike where the make times form one group,
    every fetch stalled, or with 2 or more workers (a lock-step round makes
    some batches wait, not cost more); with 0 or 1 worker there is no
    round, so stalled fetches apart from the rest cost more (a wrapped
    generator's, sampled in the main process, as with 0)."""
    label = (s.get("attribution") or {}).get("label")
    if label in (attribution.ONE_WORKER, *attribution.SLOW_RESIDUE,
                 attribution.LARGE_BATCH) or _samples_slow(s) or busier_worker(s):
        return False
    nw = (s.get("loader") or {}).get("num_workers")
    if nw is None and (s.get("slow_code") or {}).get("in_main"):
        # A wrapped generator: its items are made in the fetch, as at
        # num_workers=0 (every 6th item 30 ms in `tokenize`, the others 3
        # ms in it, read "every batch costs alike", helper 42).
        nw = 0
    return bool(f.numbers.get("one_group") or f.numbers.get("every_fetch")
                or nw is None or nw >= 2)


def busier_worker(s: dict) -> Optional[dict]:
    """{worker, cpu_ratio, cpu_median_s, others_median_s} of the worker
    whose batches took at least attribution.BUSIER_RATIO times the other
    workers' median CPU a batch (each worker's median, measured in the
    workers: production.workers), with at least attribution.ATTR_MIN_STALLS
    batches; None otherwise.  Its batches cost more whatever the make
    times' split: one worker at 3x the CPU a batch on a crowded host made
    its batches 2.4x as long, under the two-group line, and the report
    read "every batch costs alike" beside it (helper 27A, in_order=False,
    4 of 4 runs)."""
    per = {w: v for w, v in ((s.get("production") or {}).get("workers") or {}).items()
           if v.get("cpu_median_s") is not None
           and (v.get("batches") or 0) >= attribution.ATTR_MIN_STALLS}
    if len(per) < 2:
        return None
    top = max(per, key=lambda w: per[w]["cpu_median_s"])
    ratio = attribution.make_ratio(per, top, "cpu_median_s")
    if ratio is None or not ratio >= attribution.BUSIER_RATIO:
        return None
    others = float(np.median([v["cpu_median_s"] for w, v in per.items() if w != top]))
    return {"worker": int(top), "cpu_ratio": ratio,
            "cpu_median_s": per[top]["cpu_median_s"], "others_median_s": others}


# Slow samples make their batches cost more where they hold most of their
# batch's make time (more than this share, median over the slow samples).
SLOW_SAMPLES_BATCH_SHARE = 0.5
# ... and where some batches go without one: slow samples in at least
# this share of the timed batches (one a batch: every 4th index at batch
# size 4) are every batch's cost; the few without are an epoch's short
# last batch or a shuffle's chance, not a cheaper kind of batch.
SLOW_SAMPLES_EVERY_BATCH = 0.9


def _slow_block(s: dict) -> dict:
    """The workers' per-sample timing's slow samples (the report's
    ``production.samples.slow``; {} where not measured)."""
    return (((s.get("production") or {}).get("samples") or {}).get("slow")) or {}


def _samples_slow(s: dict) -> bool:
    """Whether the workers' per-sample timing found particular samples slow
    (findings.slow_samples): at least its STRIDE_MIN_SLOW samples, most of
    their batches' make time (SLOW_SAMPLES_BATCH_SHARE), in fewer than
    SLOW_SAMPLES_EVERY_BATCH of the timed batches (where known)."""
    slow = _slow_block(s)
    holding, tested = slow.get("batches_holding"), slow.get("batches_tested")
    in_every_batch = bool(tested) and holding >= SLOW_SAMPLES_EVERY_BATCH * tested
    return bool(slow.get("count", 0) >= slow_samples.STRIDE_MIN_SLOW
                and (slow.get("batch_share") or 0.0) > SLOW_SAMPLES_BATCH_SHARE
                and not in_every_batch)


def samples_spread(s: dict) -> Optional[dict]:
    """{count, of, time_share}: the workers' per-sample timing found slow
    samples that hold most of all sample time (time_share over
    SLOW_SAMPLES_BATCH_SHARE), yet no few batches apart (not
    :func:`_samples_slow`: spread over most batches, or each a small part
    of its batch); else None.  Then each batch costs what the slow samples
    it holds cost, and batch make times form one group: one sample in 5
    costing 5 ms against 0.3, 8 a batch, read "one group of make times,
    so no slow sample sets them" beside "223 of 1198 samples ... 82% of
    all sample time" (helper 34B, 4 of 4)."""
    slow = _slow_block(s)
    if (slow.get("count", 0) < slow_samples.STRIDE_MIN_SLOW
            or (slow.get("time_share") or 0.0) <= SLOW_SAMPLES_BATCH_SHARE
            or _samples_slow(s)):
        return None
    return {"count": slow["count"], "of": slow.get("of"), "time_share": slow["time_share"]}


def samples_found(s: dict) -> Optional[dict]:
    """{count, of, time_share}: the workers' per-sample timing found slow
    samples (at least one), not most of all sample time spread over the
    batches (:func:`samples_spread`); else None.  Lognormal item costs
    (median 1.5 ms, sigma 0.8) at 2 workers put 17 of 958 samples past 5x
    the median, 10% of all sample time, in one group of batch make times,
    and the irregular stalls read "so no slow sample sets them" above the
    line listing them (helper 64)."""
    slow = _slow_block(s)
    if not slow.get("count") or slow.get("time_share") is None or samples_spread(s) is not None:
        return None
    return {"count": slow["count"], "of": slow.get("of"), "time_share": slow["time_share"]}


def found_words(p: dict) -> str:
    """"N slow samples of M, X% of all sample time" from
    :func:`samples_found`'s numbers."""
    of = f" of {p['of']}" if p.get("of") else ""
    return (f"{p['count']} slow {'sample' if p['count'] == 1 else 'samples'}{of}, "
            f"{pct(p['time_share'])} of all sample time")


def spread_words(p: dict) -> str:
    """"N of M samples, X% of all sample time, spread over the batches"
    from :func:`samples_spread`'s numbers."""
    of = f" of {p['of']}" if p.get("of") else ""
    return (f"{p['count']}{of} samples, {pct(p['time_share'])} of all sample time, spread "
            "over the batches")


def held_path(path: list[dict], total: float) -> list[dict]:
    """The entries of a hot path (traceml.stacks.hot_path: outermost
    first, each with its ``share`` of ``total`` samples) that hold most of
    the samples beyond chance: a one-sided binomial test of share > 1/2
    (scipy.stats.binomtest) at SLOW_CODE_ALPHA; the path stops at the
    first that does not."""

    n = int(round(total))
    out = []
    for f in path:
        k = int(round(f["share"] * total))
        if n <= 0 or stats.binomtest(k, n, 0.5, alternative="greater").pvalue >= SLOW_CODE_ALPHA:
            break
        out.append(f)
    return out


def _outside_the_workers(s: dict) -> bool:
    """Whether the wait's largest measured part is outside the workers'
    making (wait_parts: the main process's CPU, the transit, a wait for a
    core), with workers: their stacks cannot name it, however long the run,
    so "too few samples; a longer run would" would mislead."""
    block = s.get("slow_code") or {}
    largest = (s.get("wait_parts") or {}).get("largest") or {}
    return (not block.get("in_main") and largest.get("part") is not None
            and largest["part"] not in wait_parts.PRODUCTION_PARTS)


def evidence_lines(s: dict) -> list[str]:
    """The report's evidence lines: the finding, then (where one was
    named) the next functions of the table with their two shares.  They
    lead the evidence: the code that makes the slow batches answers what
    the loader's pattern only points at."""
    f = judge(s.get("slow_code"))
    if f is None or (f.code == "slow_code_too_few" and _outside_the_workers(s)):
        return []
    numbers = f.numbers
    if f.code == "slow_code_same":
        numbers = {**numbers, "alike": alike(s, f), "busier": busier_worker(s)}
    out = [WORDS[f.code](numbers)]
    if f.code == "slow_code_named":
        rows = [r for r in tested(s["slow_code"]) if r["named"]
                and (r["function"], r["file"]) != (f.numbers["function"], f.numbers["file"])]
        if rows:
            out.append("also apart in the slow batches: " + ", ".join(
                f"{code_where(_row(r))} {pct(r['slow_share'])} vs {pct(r['fast_share'])}"
                for r in rows[:TABLE_SHOWN]))
    return out


# The next step, where a function was named: it leads
# (advice.LEAD_ORDER); it replaces nothing, since the experiments on the
# loader still say why the cost reaches the loop in that pattern.
SUPERSEDES: dict = {"look_at_function": frozenset(), "look_at_path": frozenset(),
                    # Measured: the per-sample timing found the slow samples
                    # that comparing in_order would only point at.
                    "time_slow_samples": frozenset(("compare_in_order", "in_order_seen",
                                                    "slow_samples_one_loader")),
                    # Measured: the collector, not particular samples or
                    # their order, made the slow batches.
                    "freeze_gc": frozenset(("compare_in_order", "in_order_seen",
                                            "slow_samples_one_loader"))}
# A named function that holds at least half the fast batches' sampled CPU
# too is code every batch runs (most of it), not the slow batches' own.
SAME_CODE_FAST_SHARE = 0.5
ONLY_REPLACING: frozenset = frozenset(("time_slow_samples", "freeze_gc"))
# At num_workers=0, where the sampler's next() holds most (more than this
# share) of the main process's sampled CPU in the fetches, the work runs in
# the main process at any num_workers: "try num_workers >= 1" goes.
SAMPLER_SHARE = 0.5
_WORKERS_WONT_HELP = frozenset(("try_workers",))


def superseded_by(f: Finding) -> frozenset:
    """The next-step codes the item ``f`` replaces: "try num_workers"
    where the sampler holds most of the main process's fetch CPU
    (SAMPLER_SHARE), else none."""
    if (f.numbers.get("sampler_share") or 0.0) > SAMPLER_SHARE:
        return SUPERSEDES.get(f.code, frozenset()) | _WORKERS_WONT_HELP
    return SUPERSEDES.get(f.code, frozenset())


def advise(s: dict) -> list[Finding]:
    """``look_at_function`` where a function tells the slow batches
    apart, unless the loop waits for batches already made (HAND-OVER);
    ``look_at_path`` where every batch costs alike (:func:`alike`)
    and the loop is INPUT-BOUND (making batches is the limit): the hot
    path's first callee under the dataset's entry and its innermost
    function.  Slow batches that run the same code as the fast ones, only
    longer, because of one worker or particular samples get no next step
    here: the attribution's leads (one worker's slow batches whose named
    function holds half or more of the fast batches' CPU too are such;
    LARGE-BATCH's, which run it for more samples, likewise)."""
    timed = _time_slow_samples(s)
    f = judge(s.get("slow_code"))
    if f is None:
        return timed
    sampler = (s.get("slow_code") or {}).get("sampler_share")
    largest = ((s.get("wait_parts") or {}).get("largest") or {}).get("part")
    if largest == wait_parts.SAMPLER and not f.numbers.get("main"):
        # The loop waits most on the sampler's next() in the main process
        # (measured): the workers' code is not what it waits for, and the
        # sampler's next step leads; the evidence line stays ("Every batch
        # costs alike ... the workers' sampled CPU" led above the sampler's
        # 72% of the wait, helper 35B's slow Sampler at num_workers=2).
        return timed
    if f.code == "slow_code_gc":
        # The collector held most of the slow batches' CPU, measured where
        # it ran: its remedy is the next step (helper 40C: "compare
        # in_order" led beside "the garbage collector took 89%", 2 of 2).
        return [Finding("freeze_gc", dict(f.numbers))] + timed
    if (s.get("attribution") or {}).get("label") == attribution.LARGE_BATCH and f.code in (
            "slow_code_off_cpu", "slow_code_named"):
        # The slow batches run their code, on a CPU or off it, for more
        # samples: the batch sizes' next step leads, the evidence line
        # stays ("Look at `DS.__getitem__` ... waiting in a sleep" led
        # above "slow by their size ... even batch sizes", each sample
        # costing 1.0x the others', helper 36B).
        return timed
    if f.code == "slow_code_off_cpu" and f.numbers.get("path") and (
            s.get("diagnosis") != "HAND-OVER"):
        # Blocked, measured, and where: the function at the end of the
        # off-CPU path (the one that calls the sleep, the read, the lock),
        # from the dataset's first frame on it.
        path = f.numbers["path"]
        # The user's own function, the library call it waits in after it
        # (a dataset's fetch_remote waiting in a socket's recv).
        tail = user_tail(path, path[0])
        inside = path[-1] if path[-1] is not tail and path[-1].get("library") else None
        return [Finding("look_at_function", {
            **tail, "off_cpu": True, "off_share": tail["share"],
            "off_samples": f.numbers["off_samples"], "main": f.numbers["main"],
            "down_to": None, "through": [], "inside": inside,
            "from": path[0] if path[0] is not tail else None})] + timed
    if f.code == "slow_code_named" and s.get("diagnosis") == "HAND-OVER":
        # The loop waits for batches already made: the workers' slow
        # batches are not what it waits on, and the hand-over's step
        # leads; the evidence line stays (1,200 small tensors a batch led
        # with "Look at DS.__getitem__" above "more workers will not
        # shorten this wait: it is the hand-over", helper 28B).
        return timed
    if f.code == "slow_code_named":
        label = (s.get("attribution") or {}).get("label")
        if (label == attribution.ONE_WORKER
                and (f.numbers.get("fast_share") or 0.0) >= SAME_CODE_FAST_SHARE):
            # The fast batches spend most of their CPU in it too: the same
            # code run longer on one worker (its shard, its resource), which
            # the attribution's next step names; the evidence line stays.
            return []
        return [Finding("look_at_function", {**f.numbers, "sampler_share": sampler})] + timed
    slow_only = f.code == "slow_code_slow_only"
    # A wrapped generator whose stalled items run the same code as the
    # others, longer: no loader to sweep, no per-sample timing; where
    # their CPU goes is still the code to make cheaper (`tokenize` at 30
    # ms every 6th item, 3 ms the others, helper 42).
    longer = (f.code == "slow_code_same" and not s.get("loader")
              and bool(f.numbers.get("main")) and not alike(s, f))
    if ((f.code == "slow_code_same" and (alike(s, f) or longer)) or slow_only) and (
            s.get("diagnosis") == "INPUT-BOUND"):
        path = f.numbers["path"]
        # The first callee under the dataset's entry (its __getitem__ runs
        # in every batch: where it goes is the news); a path rooted
        # elsewhere (a collate_fn's own frame, `coll` > `burn`) keeps its
        # root, so "called from `coll`" says where the CPU is reached
        # (helper 39A: `burn` named alone for a collate_fn at 94%).
        entry = len(path) > 1 and path[0]["function"].rsplit(".", 1)[-1] in _DATASET_ENTRIES
        head = path[1] if entry else path[0]
        tail = user_tail(path, head)
        # The library function the user's code spends it in, said after.
        inside = path[-1] if path[-1] is not tail and path[-1].get("library") else None
        # The user's own functions between the two: where the path goes
        # (every sample decoding video under load_episode, "down to
        # `burn`" skipped `decode_video_frames` at the same share, helper
        # 35B, 7 of 7).
        at = [i for i, e in enumerate(path) if e is head or e is tail]
        through = ([e for e in path[at[0] + 1:at[-1]] if not e.get("library")]
                   if len(at) == 2 else [])
        return [Finding("look_at_path", {"head": head, "tail": tail, "inside": inside,
                                         **({"through": through} if through else {}),
                                         **({"beside": f.numbers["beside"]}
                                            if f.numbers.get("beside") else {}),
                                         "samples": f.numbers["samples"],
                                         "main": f.numbers["main"],
                                         "sampler_share": sampler,
                                         "slow_only": slow_only,
                                         **({"longer": True} if longer else {}),
                                         "spread": samples_spread(s)})] + timed
    return timed


# The dataset's own entry points a hot path starts from.
_DATASET_ENTRIES = frozenset(("__getitem__", "__getitems__", "__iter__", "__next__"))


def user_tail(path: list[dict], head: dict) -> dict:
    """The innermost entry of a hot ``path`` at or below ``head`` that is
    the user's own code (not ``library``: traceml.stacks.is_library), else
    the path's last: a
    dataset's ``_resize`` calling ``F.interpolate`` is named ``_resize``
    (helper 30A: "down to `interpolate` in `nn/functional.py`" beside the
    user's `_resize` at 98%)."""
    start = next((i for i, e in enumerate(path) if e is head), 0)
    own = [e for e in path[start:] if not e.get("library")]
    # A comprehension is its function's work: Python 3.11 gives it a frame
    # of its own ("`_delta_values.<locals>.<listcomp>`" in the demo), 3.12
    # inlines it (PEP 709); the function that holds it is named on both.
    while len(own) > 1 and _comprehension(own[-1]):
        own.pop()
    return own[-1] if own else path[-1]


# The code objects Python 3.11 makes for comprehensions.
_COMPREHENSIONS = frozenset(("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"))


def _comprehension(entry: dict) -> bool:
    """Whether a function or path entry is a comprehension's frame."""
    return entry["function"].rsplit(".", 1)[-1] in _COMPREHENSIONS


def _time_slow_samples(s: dict) -> list[Finding]:
    """``time_slow_samples`` where the workers' per-sample timing named
    slow samples (findings.slow_samples) of a map-style dataset with no
    index stride (a stride has the attribution's SLOW-SAMPLE, where it
    names one) and their
    repeats read as the samples' own cost: the question "compare in_order"
    asks (do single slow samples hold the loop?) is measured; it replaces
    that step (ONLY_REPLACING), else nothing."""
    block = (s.get("production") or {}).get("samples") or {}
    if block.get("kind") != "map":
        return []
    found = {code: n for code, n in block.get("findings") or []}
    n = found.get("slow_samples")
    if n is None and (s.get("attribution") or {}).get("label") not in attribution.SLOW_RESIDUE:
        # A stride with no SLOW-SAMPLE to carry it (its batches all on one
        # worker: ONE-WORKER, or no attribution): the samples are found
        # all the same (helper 36B: "compare in_order ... single slow
        # samples are to blame" beside "every 8th index", 3 of 5 runs).
        n = found.get("slow_samples_stride")
    if n is None or slow_samples.moment_not_samples(n):
        return []
    return [Finding("time_slow_samples", {
        "indices": n["indices"], "distinct": n["distinct"], "slow_s": n["slow_s"],
        "fast_s": n["fast_s"]})]


def _in_the_sampler(p: dict) -> str:
    """Where the sampler's next() holds most of the main process's fetch
    CPU: that it stays in the main process at any num_workers."""
    share = p.get("sampler_share")
    if share is None or share <= SAMPLER_SHARE:
        return ""
    return (f" The sampler's next() holds {pct(share)} of it: the sampler runs in the main "
            "process at any num_workers, so more workers leave this wait as it is; time the "
            "sampler alone (iterate loader.batch_sampler) and make it cheaper (its indices "
            "computed once an epoch).")


# The hot path's entries a sentence shows: the first two (where the
# dataset's code enters) and the last three (where the CPU is spent).
PATH_SHOWN = (2, 3)


def _path(path: list[dict]) -> str:
    head, tail = PATH_SHOWN
    shown = path if len(path) <= head + tail else path[:head] + [None] + path[-tail:]
    return " > ".join("..." if f is None else f"{code_where(f)} {pct(f['share'])}" for f in shown)


# Functions named between the one to look at and where its path spends
# the CPU, at most.
THROUGH_SHOWN = 3


def _through(through: Optional[list]) -> str:
    """"through `a`, `b` " for the named functions between (up to
    THROUGH_SHOWN, the innermost kept), or ""."""
    if not through:
        return ""
    shown = [f"`{f['function']}`" for f in through[-THROUGH_SHOWN:]]
    return "through " + ("... " if len(through) > THROUGH_SHOWN else "") + ", ".join(shown) + " "


def _whose(p: dict) -> str:
    """Whose CPU the samples are: the workers', or at num_workers=0 the
    main process's."""
    return "the main process's" if p.get("main") else "the workers'"


def _queued(p: dict) -> str:
    """Where the batches waited longer for a CPU than they ran on one:
    that, measured, after the code they run."""
    runq, cpu = p.get("runq_share"), p.get("cpu_share")
    if runq is None or cpu is None or runq <= cpu:
        return ""
    # The CPU is every thread of the worker's, the wait the making
    # thread's: past 100% together, more than one thread ran ("on it 57%
    # ... waiting for it 71%" read as a sum of 128%, helper 37B).
    on = (f"; its threads on a CPU {pct(cpu)} of their make time (more than one thread at "
          f"once) and the making thread waiting for one {pct(runq)}" if cpu + runq > 1.0
          else f"; on it {pct(cpu)} of their make time and waiting for it {pct(runq)}")
    return (on + ": the cores were shared (other processes, or more workers than cores), "
            "which stretched each batch past its own CPU")


def _which(p: dict) -> str:
    return "the batches (one group of make times)" if p.get("one_group") else "the slow batches"


def _beside(p: dict) -> str:
    """"; and beside it `f` in `file:line` (45% and 0%)" for each named
    function beside the lead (another slow code path), else ""."""
    rows = p.get("beside") or []
    if not rows:
        return ""
    return ("; and beside it, another slow path: " + ", ".join(
        f"{code_where(r)} ({pct(r['slow_share'])} and {pct(r['fast_share'])})" for r in rows))


def _called_from(outer: dict, through: Optional[list]) -> str:
    """" (called from `outer` through `a`, `b`)": where the function named
    first is reached from, outermost first."""
    via = [f"`{f['function']}`" for f in (through or [])[-THROUGH_SHOWN:]]
    return (f" (called from {code_where(outer)}"
            + (" through " + ("... " if len(through or []) > THROUGH_SHOWN else "")
               + ", ".join(via) if via else "") + ")")


# The function named first is the innermost of the user's own functions
# on the path, where the CPU is spent, and the outer ones say where it is
# reached from: `Compose.__call__` led over the one transform that burned
# the CPU (6 of 6), and `DS.__getitem__`, which every batch runs, over
# `heavy_warp` (3 of 7; helper 37B).


def _look_at_named(p: dict) -> str:
    """look_at_function's lead: the innermost own function the named one
    goes down to (``down_to``), called from it, else the named one, with
    the slow and fast batches' shares of the function named first."""
    inner = p.get("down_to")
    caller = p.get("own_caller")
    if p.get("split"):
        parts = p["split"]
        names = ", ".join(code_where(f) for f in parts[:-1]) + f" and {code_where(parts[-1])}"
        who = "main-process" if p.get("main") else "worker"
        return (f"Look at {names} (each called from {code_where(p)}): the slow batches' "
                f"sampled {who} CPU goes "
                + ", ".join(pct(f["slow_share"]) for f in parts) + " into them, the fast "
                "ones' " + ", ".join(pct(f["fast_share"]) for f in parts))
    if caller:
        at = inner or p
        shares = (_shares({**inner, "main": p.get("main")})
                  if inner and inner.get("slow_share") is not None
                  and inner.get("fast_share") is not None else _shares(p))
        return (f"Look at {code_where(caller)}: the slow batches' CPU goes into library code "
                f"it calls, {code_where(at)}"
                + (_called_from(p, p.get("through")) if inner else "") + f": {shares}")
    if not inner:
        return f"Look at {code_where(p)}: {_shares(p)}"
    shares = (_shares({**inner, "main": p.get("main")})
              if inner.get("slow_share") is not None and inner.get("fast_share") is not None
              else _shares(p))
    return f"Look at {code_where(inner)}{_called_from(p, p.get('through'))}: {shares}"


def _path_lead(p: dict) -> str:
    """look_at_path's lead: the innermost own function (``tail``) with its
    share, called from the first one below the dataset's entry (``head``)."""
    whose = f"of {_whose(p)} sampled CPU"
    if p["tail"] is p["head"] or p["tail"] == p["head"]:
        return f"{code_where(p['head'])} holds {pct(p['head']['share'])} {whose}"
    return (f"{code_where(p['tail'])} holds {pct(p['tail']['share'])} {whose}"
            f"{_called_from(p['head'], p.get('through'))}")


def _shares(p: dict) -> str:
    who = "main-process" if p.get("main") else "worker"
    return (f"{pct(p['slow_share'])} of the slow batches' sampled {who} CPU, "
            f"{pct(p['fast_share'])} of the fast ones'")


WORDS: dict[str, Words] = {
    "slow_code_named": lambda p: (
        f"the slow batches' code: {code_where(p)}, {_shares(p)} "
        f"({p['samples_slow']:.0f} and {p['samples_fast']:.0f} samples; "
        f"Fisher p = {p['p_value']:.2g})"),
    "slow_code_same": lambda p: (
        ("the stalls awaited batches no slower to make than the rest: at most "
         f"{p['stalls_on_fast']['slow_batches']} of the {p['stalls_on_fast']['stalls']} "
         f"awaited the {plural(p['stalls_on_fast']['slow_batches'], 'batch', 'batches')} "
         "slow to make" if p.get("stalls_on_fast") else
         "the batches' make times form one group, none slow apart from the rest"
         if p.get("one_group") and p.get("alike") is not False else
         "every fetch stalled, so no batch is fast to compare with"
         if p["every_fetch"] else "no function tells the slow batches from the fast ones")
        + f" ({p['samples']:.0f} samples): "
        + ("they run the same code, only longer (their data or their worker makes them "
           "slow, not a code path of their own)" if p.get("alike") is False else
           "the cost is every batch's")
        + (f"; worker {p['busier']['worker']}'s batches took {p['busier']['cpu_ratio']:.1f}x "
           f"the other workers' CPU a batch ({fmt_s(p['busier']['cpu_median_s'])} against "
           f"{fmt_s(p['busier']['others_median_s'])}, medians)" if p.get("busier") else "")
        + f"; most of {_whose(p)} CPU went down " + _path(p["path"]) + _beside_words(p)
        + _queued(p)),
    "slow_code_too_few": lambda p: (
        f"{p['samples']:.0f} stack samples ({p['slow']:.0f} in slow batches): "
        "too few to name a function; a longer run would give more"),
    "slow_code_slow_only": lambda p: (
        ("the fast batches were too short to be sampled" if not p.get("fast") else
         "the fast batches were too short to draw more than "
         f"{plural(int(round(p['fast'])), 'stack sample')}")
        + f", so nothing tells the slow batches' code from theirs; {_whose(p)} CPU "
        f"({p['samples']:.0f} samples, nearly all in slow batches) went down "
        + _path(p["path"]) + _beside_words(p) + _queued(p)),
    "slow_code_not_making": lambda p: (
        f"no worker was making a batch during the {p['stalls']} stalls: the wait is not "
        "in the dataset's code (the batches were made; see the hand-over)"),
    "slow_code_off_cpu": lambda p: (
        f"{'the main process was' if p.get('main') else 'the workers were'} not on CPU "
        f"in {_which(p)} ({pct(p['cpu_share'])} of their make time over "
        f"{plural(p['batches'], 'slow batch', 'slow batches') if not p.get('one_group') else plural(p['batches'], 'batch', 'batches')}"
        + (f", against {pct(p['fast_cpu_share'])} in the others"
           if p.get("fast_cpu_share") is not None else "")
        + "): no function's CPU made them slow; "
        + (f"their time off CPU ({p['off_samples']:.0f} wall-clock samples) went down "
           + _path(p["path"]) + ": a sleep, a read or a lock there" if p.get("path")
           else "look for sleeps, I/O or locks")),
    "slow_code_cpu_wait": lambda p: (
        f"{'the main process' if p.get('main') else 'the workers'} waited for a CPU in "
        f"{_which(p)} ({pct(p['runq_share'])} of their make time in the run queue, "
        f"{pct(p['cpu_share'])} on CPU, over {p['batches']} batches): the cores were "
        "shared (other processes, or more workers than cores), "
        # One group (every batch slow): nothing was set apart; the queue
        # stretched each batch (helper 41B: "set these batches apart"
        # beside EVERY-FETCH at num_workers=0).
        + ("which stretched each batch past its own CPU" if p.get("one_group") else
           "and the wait for one, not more work of their own, set these batches apart")
        + (f"; most of {_whose(p)} CPU went down " + _path(p["path"]) if p.get("path")
           else "")),
    "slow_code_gc": lambda p: (
        f"the garbage collector took {pct(p['share'])} of the CPU of "
        f"{plural(p['batches'], 'slow batch', 'slow batches')} (timed in "
        f"{'the main process' if p.get('main') else 'the workers'}): a full collection "
        "walks every object the process holds, a worker's included those it inherited "
        "from the main process; gc.freeze() in worker_init_fn, or in the main process "
        "before iter(loader) starts the workers, leaves those out of their collections"),
    "slow_code_other_thread": lambda p: (
        f"{pct(p['share'])} of the slow batches' CPU samples fell outside the "
        "thread that runs the dataset ("
        + ("a helper thread, torch's own threads" if p.get("main")
           else "a helper thread, a native thread pool, the queue's feeder")
        + "): their code is not sampled"),
    "slow_code_off": lambda p: f"{_whose(p)} stacks were not sampled: {p['why']}",
    "look_at_function": lambda p: (
        f"Look at {code_where(p)}"
        + (f" (from {code_where(p['from'])})" if p.get("from") else "")
        + f": {pct(p['off_share'])} of the slow batches' time off CPU went to it "
        f"({p['off_samples']:.0f} wall-clock samples), waiting in "
        + (f"{code_where(p['inside'])}." if p.get("inside") else
           "a sleep, a read or a lock that it calls.")
        if p.get("off_cpu") else
        _look_at_named(p) + _beside(p) + "." + _in_the_sampler(p)),
    "freeze_gc": lambda p: (
        "Next: gc.freeze() in the main process before iter(loader) starts the workers (or in "
        "worker_init_fn), and compare the runs (traceml.compare): the garbage collector took "
        f"{pct(p['share'])} of the CPU of "
        f"{plural(p['batches'], 'slow batch', 'slow batches')}, walking objects "
        f"{'the process holds' if p.get('main') else 'each worker inherited'}."),
    "time_slow_samples": lambda p: (
        "Next: time __getitem__ on index "
        + ", ".join(str(i) for i in p["indices"])
        + (" ..." if p["distinct"] > len(p["indices"]) else "")
        + f" (the workers timed them at {fmt_s(p['slow_s'])}"
        + (f" against {fmt_s(p['fast_s'])} for the others" if p.get("fast_s") is not None
           else "")
        + "): the per-sample timing found these samples slow themselves, so no "
        "experiment on the loader's order or workers is needed to point at them."),
    "look_at_path": lambda p: (
        ("Make the slow batches cheaper where their CPU goes: " if p.get("slow_only") else
         "The stalled items run the same code as the others, longer; make it cheaper where "
         "their CPU goes: " if p.get("longer") else
         f"Every batch costs what its slow samples cost ({spread_words(p['spread'])}); "
         "make them cheaper where their CPU goes: " if p.get("spread") else
         "Every batch costs alike; make it cheaper where its CPU goes: ")
        + _path_lead(p)
        + (f", which spends it in {code_where(p['inside'])} ({pct(p['inside']['share'])})"
           if p.get("inside") else "")
        + (", and " + ", ".join(f"{code_where(f)} ({pct(f['share'])})" for f in p["beside"])
           + " beside it" if p.get("beside") else "") + "."
        + _in_the_sampler(p)),
}
