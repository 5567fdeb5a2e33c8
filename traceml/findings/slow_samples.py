"""Slow samples and collate cost: which items make the slow batches.

Measured inside the workers (:mod:`traceml.sample_timing`): the time of
each sample's ``__getitem__`` (map-style; by index) or ``__next__``
(iterable; by position in its worker), of ``__getitems__`` and of each
``collate_fn`` call, each joined to its batch.

The model: most samples cost about the same, and a few cost far more.  A
sample is *slow* when its cost, on either clock, exceeds both SLOW_FACTOR
times that clock's median sample cost and the median plus a floor:

- the CPU clock (the worker thread's CPU time, where every sample has it;
  floor SLOW_MIN_EXCESS_CPU_S): a busy host stretches wall time, not CPU
  time, so scheduling blips cannot pose as slow samples on it;
- the wall clock (floor SLOW_MIN_EXCESS_WALL_S, above a loaded host's
  scheduling blips): a sample that waits on storage, sleeps, or hands its
  work to a helper thread (a thread pool, a decoder's own threads) holds
  no CPU on the worker's thread, and only this clock sees it.  Its time
  is taken less the most of it that was a wait for a core: its batch's
  measured run-queue wait (every thread of the worker), at most the
  sample's time off CPU.  What a full host stretches is then not read
  as a sample's cost.

Both are tested and either suffices: a few samples slow on CPU (a worker's
lazy set-up) do not hide others slow on the wall clock.  Each worker's
first sample of an epoch is left out of the test: it carries the worker's
start-up (imports, opened files, a pool started), which the report shows
as the epoch's start, not as a cost of that sample.  The wall clock also
leaves out the epoch's start-up window, until every worker has made its
first batch of the epoch: the workers still forking and importing beside
a sample stretch its wall time by work that neither its CPU clock nor its
batch's run-queue wait counts.  A stride is stated where it holds
exactly (every slow index is ``residue`` modulo ``stride`` and every
timed index of that class is slow), or with at most STRIDE_MISS_MAX
exceptions each way where the class holds the slow samples beyond chance
(:func:`_stride`).
"""

from __future__ import annotations

from math import gcd
from typing import Optional

import numpy as np
from scipy.stats import hypergeom

from ..fmt import fmt_s, nth, pct, plural
from ._types import Finding, Words
from . import stall_timing

# Fewer timed samples than this: no median to stand out from (the same
# floor as a report's "too few steps", stall_threshold.MIN_STEPS' order).
SLOW_MIN_SAMPLES = 16
# "Far above the median": five times it.  A lognormal per-sample cost of
# sigma 0.3 (the corpus's fast items) passes 5x its median with odds below
# 1e-7; the corpus's slow items cost 25-200x.
SLOW_FACTOR = 5.0
# And at least this much above it on the CPU clock (its resolution is
# about 1 µs; 1 ms is a cost a batch of 32 samples notices) ...
SLOW_MIN_EXCESS_CPU_S = 1e-3
# ... or on the wall clock, where a loaded host adds scheduling blips of
# 2-10 ms to any item (docs/TRAPS: "Healthy loops therefore show a steady
# small wait plus scheduling blips of 2-10 ms under load").
SLOW_MIN_EXCESS_WALL_S = 10e-3
# A stride needs at least this many slow indices (two points fit any).
STRIDE_MIN_SLOW = 3
# Slow samples are named from this many slow timings on: one long sample
# is a hiccup (stall_threshold.MIN_GROUP_ON_TOP's reason for stalls); on
# a host beside CPU hogs a worker's second batch, made while the others
# still forked, read "slow samples: index 45: 73 ms each" in 7 of 162
# healthy runs, 1 of 2364 samples.
SLOW_MIN_TIMINGS = 2
# collate_fn above this share of the workers' batch time gets its own
# line in the evidence: a quarter, where collating is a cost of its own
# beside the samples, not rounding.
COLLATE_SHARE_SHOWN = 0.25
# Slow indices the words list before "...".
INDICES_SHOWN = 6
# A slow sample reaches the loop only through its batch: where the slow
# samples hold under this share of their batch's make time (median), the
# samples made as cheap as the rest would shorten their batches by less,
# and they are not a finding.  The 20% of step time that makes a loop
# input-bound (TensorFlow's input-pipeline analyzer, input_bound).  Batches
# of 20 MB read "slow samples: index 1, 2, 3 ...: 1.75 ms each ... 1% of
# their batch's time" beside a collate copying 20 MB a batch: fresh pages
# for some 2.5 MB tensors, not particular samples.
SLOW_MIN_BATCH_SHARE = 0.2


def slow_of(arrays: Optional[dict]) -> Optional[dict]:
    """The slow-sample test over the per-sample arrays
    (sample_timing.summarise's second value; ``first``, where given, marks
    the samples left out): None without samples; ``{"too_few": n}`` under
    SLOW_MIN_SAMPLES tested; else {basis (the clock that found the slow
    samples: cpu, wall, or cpu+wall where the wall clock adds samples the
    CPU clock did not find; with none found, the CPU
    clock where it was read), threshold_s and median_s (the basis's; for
    cpu+wall the CPU clock's), wall_threshold_s (cpu+wall only), count,
    of (samples tested), first_left_out, startup_left_out (samples the
    wall clock left out as the start-up window's, where ``startup`` marks
    them), slow_s and fast_s (wall medians
    of the slow and the other tested samples), slow_cpu_s, time_share
    (the slow samples' part of all tested sample wall time), batch_share
    (their median share of their batch's make time), batches_holding and
    batches_tested (the batches holding a slow sample, of those holding a
    tested one; where ``batch`` is given), indices (the
    distinct slow indices, sorted; -1 left out), slow_timings (the slow
    samples with a known index), timings (every tested timing of those
    indices, slow or fast), stride, residue (None: no stride holds),
    checked (timed indices of the stride's class), and where the arrays
    give each sample's ``worker``: slow_workers (the workers of the slow
    timings, sorted) and indices_moved (the slow indices timed on more
    than one worker)}."""
    if arrays is None or len(arrays["wall_ns"]) == 0:
        return None
    first = arrays.get("first")
    keep = ~first if first is not None else np.ones(len(arrays["wall_ns"]), dtype=bool)
    wall, cpu, index = arrays["wall_ns"][keep], arrays["cpu_ns"][keep], arrays["index"][keep]
    n = len(wall)
    if n < SLOW_MIN_SAMPLES:
        return {"too_few": int(n)}
    clocks = [("wall", _off_runq(wall, cpu, arrays.get("batch_runq_ns"), keep),
               SLOW_MIN_EXCESS_WALL_S)]
    if (cpu >= 0).all():
        clocks.insert(0, ("cpu", cpu, SLOW_MIN_EXCESS_CPU_S))
    found = {}
    for name, x, floor in clocks:
        med = float(np.median(x))
        threshold = max(SLOW_FACTOR * med, med + floor * 1e9)
        found[name] = (threshold, med, x > threshold)
    startup = arrays.get("startup")
    startup = (np.zeros(n, dtype=bool) if startup is None
               else np.asarray(startup, dtype=bool)[keep])
    threshold, med, wall_slow = found["wall"]
    found["wall"] = (threshold, med, wall_slow & ~startup)
    # The wall clock counts as a basis of its own only where it finds a
    # sample the CPU clock did not (a CPU-bound slow sample is slow on both).
    hit = [name for name in found if found[name][2].any()]
    if hit == ["cpu", "wall"] and not (found["wall"][2] & ~found["cpu"][2]).any():
        hit = ["cpu"]
    share = arrays["batch_share"][keep]
    batch = arrays["batch"][keep] if arrays.get("batch") is not None else None
    worker = arrays["worker"][keep] if arrays.get("worker") is not None else None
    # Samples the wall clock did not test (the start-up window) are not
    # fast where it is one of the clocks in ``hit``: whatever the CPU clock
    # says of them, a sleeping slow index made in that window is slow on
    # the wall clock alone.  Read as fast, "no common index stride" stood
    # beside slow indices 18, 31, 44, ... every 13th (helper 29B, the wall
    # clock alone), and 31, 44, 57, ... (helper 32B, 10 of 12 runs, with a
    # CPU-slow sample beside them).
    untested = startup if "wall" in hit else None
    out = _slow_set(hit, found, wall, cpu, index, share, batch, worker, untested)
    if hit == ["cpu", "wall"] and (out["stride"] is None or out.get("p_value") is not None):
        # A busy host stretches a fast sample's wall time past the floor
        # now and then (one index off the stride); the CPU clock's own
        # slow set, where it holds a stride (exactly, where the union's
        # holds one with exceptions), is the finding.
        alone = _slow_set(["cpu"], found, wall, cpu, index, share, batch, worker)
        if alone["stride"] is not None and (out["stride"] is None
                                            or alone.get("p_value") is None):
            out = alone
    out["first_left_out"] = int(len(keep) - n)
    out["startup_left_out"] = int(startup.sum())
    return out


def _off_runq(wall: np.ndarray, cpu: np.ndarray, runq: Optional[np.ndarray],
              keep: np.ndarray) -> np.ndarray:
    """Each sample's wall time (ns) less the most of it that can have
    been a wait for a core: its batch's measured run-queue wait, at most
    the sample's time off CPU (its wall less its CPU, where known); where
    the wait is unknown (-1), the wall time as it is."""
    if runq is None:
        return wall
    runq = np.asarray(runq)[keep]
    off_cpu = np.maximum(wall - np.maximum(cpu, 0), 0)
    return wall - np.where(runq > 0, np.minimum(runq, off_cpu), 0)


def _slow_set(hit: list, found: dict, wall: np.ndarray, cpu: np.ndarray, index: np.ndarray,
              batch_share: np.ndarray, batch: Optional[np.ndarray] = None,
              worker: Optional[np.ndarray] = None,
              untested: Optional[np.ndarray] = None) -> dict:
    """slow_of's numbers for the samples slow on the clocks ``hit`` (names
    in ``found``: {clock: (threshold_ns, median_ns, slow mask)}; none hit:
    the first clock's threshold, nothing slow); ``batch``, each sample's
    batch where known, adds batches_holding and batches_tested;
    ``untested`` (bool, or None: none) the samples those clocks did not
    test, which the stride's check does not read as fast."""
    basis = "+".join(hit) if hit else next(iter(found))
    threshold, med, slow = found[hit[0] if hit else basis]
    for name in hit[1:]:
        slow = slow | found[name][2]
    out = {"basis": basis, "threshold_s": threshold * 1e-9, "median_s": med * 1e-9,
           "count": int(slow.sum()), "of": int(len(wall)),
           "indices": [], "stride": None, "residue": None, "checked": 0}
    if len(hit) > 1:
        out["wall_threshold_s"] = found["wall"][0] * 1e-9
    if not slow.any():
        return out
    fast = ~slow
    out.update({
        "slow_s": float(np.median(wall[slow])) * 1e-9,
        "fast_s": float(np.median(wall[fast])) * 1e-9 if fast.any() else None,
        "slow_cpu_s": (float(np.median(cpu[slow])) * 1e-9 if (cpu[slow] >= 0).all() else None),
        "time_share": float(wall[slow].sum()) / max(int(wall.sum()), 1),
        "batch_share": float(np.median(batch_share[slow])),
    })
    if batch is not None:
        out["batches_holding"] = int(len(np.unique(batch[slow])))
        out["batches_tested"] = int(len(np.unique(batch)))
    slow_idx = np.unique(index[slow & (index >= 0)])
    out["indices"] = slow_idx.tolist()
    # How often those indices were timed, slow or not: an index slow in one
    # epoch and fast in the others is not a slow sample (the slowness was
    # the moment's: a busy host, a cache filled once).
    known = slow & (index >= 0)
    out["slow_timings"] = int(known.sum())
    out["timings"] = int(np.isin(index, slow_idx).sum())
    tested_fast = fast if untested is None else fast & ~untested
    out.update(_stride(slow_idx, np.unique(index[tested_fast & (index >= 0)])))
    if worker is not None and len(slow_idx):
        # Which workers made the slow timings, and whether any slow index
        # was made by two workers (shuffled, or a later epoch's other
        # round): where none was, a worker's cost and its indices' cost are
        # one reading (attribution's ONE-WORKER).
        worker = np.asarray(worker)
        out["slow_workers"] = np.unique(worker[known]).tolist()
        timed = np.isin(index, slow_idx)
        pairs = np.unique(np.stack([index[timed], worker[timed]]), axis=1)
        out["indices_moved"] = int(len(pairs[0]) - len(np.unique(pairs[0])))
    return out


# One slow index off the stride, or one timed index of its class read as
# fast, is a timing's noise (a busy host stretching one fast sample's wall
# time past the floor, a sleeping slow sample read short), not another
# pattern: a sleeping slow sample every 10th index read "no common index
# stride" in 2 of 5 runs with 57-58 of its 59 slow samples on it (helper
# 34B).  With at most this many exceptions each way, the stride is stated
# where its class holds the slow samples beyond chance: the hypergeometric
# tail of that many of them among the class's timed indices, drawn at
# random from every timed index, times the strides tried (the modal gap's
# divisors), under STRIDE_ALPHA (the cadence tests' level).
STRIDE_MISS_MAX = 1
STRIDE_ALPHA = 0.01


def _stride(slow_idx: np.ndarray, fast_idx: np.ndarray) -> dict:
    """{stride, residue, checked, off_stride, fast_on_stride, p_value}:
    the greatest common divisor of the slow indices' gaps, when it is at
    least 2 and no timed fast index shares their residue (p_value None:
    exact); else the least divisor (at least 2) of their commonest gap
    whose class holds all but at most STRIDE_MISS_MAX slow indices, and
    at most that many fast ones, beyond chance (see STRIDE_ALPHA); stride
    None where neither holds.  ``slow_idx`` sorted, distinct."""
    none = {"stride": None, "residue": None, "checked": 0}
    if len(slow_idx) < STRIDE_MIN_SLOW:
        return none
    step = 0
    for d in np.diff(slow_idx).tolist():
        step = gcd(step, int(d))
    if step >= 2:
        residue = int(slow_idx[0]) % step
        if not (fast_idx % step == residue).any():
            return {"stride": step, "residue": residue, "checked": int(len(slow_idx)),
                    "off_stride": 0, "fast_on_stride": 0, "p_value": None}
    gaps = np.diff(slow_idx)
    values, counts = np.unique(gaps[gaps >= 2], return_counts=True)
    if not len(values):
        return none
    modal = int(values[np.argmax(counts)])
    tries = [d for d in range(2, modal + 1) if modal % d == 0]
    timed = len(slow_idx) + len(fast_idx)
    for d in tries:
        res, cnt = np.unique(slow_idx % d, return_counts=True)
        residue = int(res[np.argmax(cnt)])
        on = int(cnt.max())
        off = len(slow_idx) - on
        fast_on = int(np.count_nonzero(fast_idx % d == residue))
        if off > STRIDE_MISS_MAX or fast_on > STRIDE_MISS_MAX or on < STRIDE_MIN_SLOW:
            continue
        p = len(tries) * float(hypergeom.sf(on - 1, timed, on + fast_on, len(slow_idx)))
        if p < STRIDE_ALPHA:
            return {"stride": d, "residue": residue, "checked": on, "off_stride": off,
                    "fast_on_stride": fast_on, "p_value": min(1.0, p)}
    return _stride_set(slow_idx, fast_idx) or none


# Two or three slow places a stride (every 12th index and every 12th + 5:
# "no common index stride", helper 35B, 8 of 8): the same test with a set
# S of 2 to STRIDE_SET_MAX residues mod d, each holding at least
# STRIDE_SET_MIN_SLOW slow indices, together all but STRIDE_MISS_MAX of
# them and at most that many fast ones, S not one set of a smaller stride
# (then that stride); it pays for every (d, S) pair of d up to
# STRIDE_SET_MAX_STRIDE, as the several-stalls cadence test does.
STRIDE_SET_MAX = 3
STRIDE_SET_MIN_SLOW = 2
STRIDE_SET_MAX_STRIDE = 32
STRIDE_SET_TESTS = stall_timing.residue_sets_tried(STRIDE_SET_MAX_STRIDE, STRIDE_SET_MAX)


def _stride_set(slow_idx: np.ndarray, fast_idx: np.ndarray) -> Optional[dict]:
    """The least stride d (2..STRIDE_SET_MAX_STRIDE) whose residue set
    holds the slow indices by the rule above: {stride, residue (the one
    holding the most), residues (ascending), checked, off_stride,
    fast_on_stride, p_value}; None where none does."""
    timed = len(slow_idx) + len(fast_idx)
    for d in range(2, STRIDE_SET_MAX_STRIDE + 1):
        counts = np.bincount(slow_idx % d, minlength=d)
        order = [int(r) for r in np.argsort(-counts, kind="stable")
                 if counts[r] >= STRIDE_SET_MIN_SLOW]
        chosen: list[int] = []
        for r in order:
            chosen.append(r)
            if counts[chosen].sum() >= len(slow_idx) - STRIDE_MISS_MAX:
                break
        on = int(counts[chosen].sum()) if chosen else 0
        if not 2 <= len(chosen) <= STRIDE_SET_MAX or on < len(slow_idx) - STRIDE_MISS_MAX:
            continue
        if stall_timing.shifted_by_a_divisor(chosen, d):
            continue
        fast_on = int(np.count_nonzero(np.isin(fast_idx % d, chosen)))
        if fast_on > STRIDE_MISS_MAX:
            continue
        p = STRIDE_SET_TESTS * float(hypergeom.sf(on - 1, timed, on + fast_on, len(slow_idx)))
        if p < STRIDE_ALPHA:
            return {"stride": d, "residue": chosen[0], "residues": sorted(chosen),
                    "checked": on, "off_stride": len(slow_idx) - on,
                    "fast_on_stride": fast_on, "p_value": min(1.0, p)}
    return None


def rule(block: Optional[dict]) -> list[Finding]:
    """The findings of a ``production.samples`` block (with its ``slow``
    test): ``slow_samples_stride`` or ``slow_samples`` when at least
    SLOW_MIN_TIMINGS samples are slow and hold at least
    SLOW_MIN_BATCH_SHARE of their batch's time, ``collate_share`` when collate_fn holds at least
    COLLATE_SHARE_SHOWN of batch time, ``gc_in_samples`` when a worker's
    garbage collection inside one sample took SLOW_MIN_EXCESS_CPU_S or
    more (what would make a sample slow on the CPU clock; the slow-sample
    test has left it out), ``getitems_only`` when the dataset made its
    batches at once (__getitems__)."""
    if not block or not block.get("available"):
        return []
    out: list[Finding] = []
    what = "position" if block.get("kind") == "iterable" else "index"
    slow = block.get("slow") or {}
    if slow.get("count", 0) >= SLOW_MIN_TIMINGS and (
            slow.get("batch_share") is None or slow["batch_share"] >= SLOW_MIN_BATCH_SHARE):
        numbers = {"what": what, "indices": slow["indices"][:INDICES_SHOWN],
                   "range": _contiguous(slow["indices"]),
                   "slow_timings": slow.get("slow_timings"), "timings": slow.get("timings"),
                   "distinct": len(slow["indices"]), "count": slow["count"], "of": slow["of"],
                   "slow_s": slow["slow_s"], "fast_s": slow["fast_s"],
                   "basis": slow["basis"], "threshold_s": slow["threshold_s"],
                   "wall_threshold_s": slow.get("wall_threshold_s"),
                   "batch_share": slow["batch_share"], "time_share": slow["time_share"]}
        if slow.get("stride"):
            out.append(Finding("slow_samples_stride", {
                **numbers, "stride": slow["stride"], "residue": slow["residue"],
                **({"residues": slow["residues"]} if slow.get("residues") else {}),
                "off_stride": slow.get("off_stride") or 0,
                "fast_on_stride": slow.get("fast_on_stride") or 0,
                "p_value": slow.get("p_value")}))
        else:
            out.append(Finding("slow_samples", numbers))
    c = block.get("collate")
    if c and c.get("share") is not None and c["share"] >= COLLATE_SHARE_SHOWN:
        out.append(Finding("collate_share", {"share": c["share"], "median_s": c["median_s"],
                                             "mean_s": c.get("mean_s"), "calls": c["calls"]}))
    gc = block.get("gc")
    if gc and gc.get("longest_in_a_sample_s", 0.0) >= SLOW_MIN_EXCESS_CPU_S:
        out.append(Finding("gc_in_samples", dict(gc)))
    g = block.get("getitems")
    if g and not block.get("samples"):
        out.append(Finding("getitems_only", {"share": g["share"], "median_s": g["median_s"],
                                             "calls": g["calls"]}))
    return out


def _contiguous(indices: list) -> Optional[list]:
    """[first, last] where the sorted distinct ``indices`` are every
    integer between the two and at least three (one block of the data set:
    a slow part of a ConcatDataset, a shard), else None."""
    if len(indices) < 3 or indices[-1] - indices[0] + 1 != len(indices):
        return None
    return [int(indices[0]), int(indices[-1])]


def _indices(p: dict) -> str:
    if p.get("range"):
        lo, hi = p["range"]
        return f"{p['what']} {lo}-{hi} (every one of the {p['distinct']})"
    shown = ", ".join(str(i) for i in p["indices"])
    more = " ..." if p["distinct"] > len(p["indices"]) else ""
    return f"{p['what']} {shown}{more}" if shown else f"{plural(p['count'], 'sample')}"


def _slow_body(p: dict) -> str:
    fast = f" against {fmt_s(p['fast_s'])} for the others" if p.get("fast_s") is not None else ""
    if p["basis"] == "cpu+wall":
        above = (f"{fmt_s(p['threshold_s'])} of CPU or {fmt_s(p['wall_threshold_s'])} wall "
                 f"({SLOW_FACTOR:g}x that clock's median and at least "
                 f"{fmt_s(SLOW_MIN_EXCESS_CPU_S)} of CPU or {fmt_s(SLOW_MIN_EXCESS_WALL_S)} "
                 "wall over it)")
    else:
        cpu = p["basis"] == "cpu"
        above = (f"{fmt_s(p['threshold_s'])} {'of CPU' if cpu else 'wall'} "
                 f"({SLOW_FACTOR:g}x the median and at least "
                 f"{fmt_s(SLOW_MIN_EXCESS_CPU_S if cpu else SLOW_MIN_EXCESS_WALL_S)} over it)")
    return (f"{_indices(p)}: {fmt_s(p['slow_s'])} each (median){fast}; "
            f"{p['count']} of {p['of']} samples above {above}, "
            f"{pct(p['batch_share'])} of their batch's time, {pct(p['time_share'])} of all "
            "sample time" + _not_the_index(p))


def moment_not_samples(p: dict) -> Optional[bool]:
    """Whether the slow indices' repeat timings read as the moment's cost,
    not the samples' (:func:`_not_the_index`'s model); None where no
    index was timed twice."""
    slow, timed, distinct = p.get("slow_timings"), p.get("timings"), p.get("distinct")
    if not slow or not timed or not distinct or timed <= distinct:
        return None
    base = p["count"] / p["of"] if p.get("of") else 0.0
    return (slow - distinct) / (timed - distinct) < (1.0 + base) / 2.0


def _not_the_index(p: dict) -> str:
    """Whether the slow indices' other timings (each index's timings past
    the one that made it slow) were slow too: the samples' own cost, or
    the moment's.  Two models of a repeat timing: slow always (the
    samples' cost) or slow at the rate any timing was (``count`` of
    ``of``: the moment's, a busy host or a cache filled once); the repeats'
    slow share reads as the model it is nearer to, at the midpoint of the
    two rates.  Nothing where no index was timed twice."""
    moment = moment_not_samples(p)
    if moment is None:
        return ""
    slow, timed = p["slow_timings"], p["timings"]
    whats = "indices" if p["what"] == "index" else f"{p['what']}s"
    if not moment:
        if timed == slow:
            return f"; slow in every one of their {timed} timings: the samples' own cost"
        return f"; slow in {slow} of their {timed} timings: the samples' own cost"
    if p["what"] == "position":
        # A position is each worker's n-th sample: its timings span the
        # workers' different parts of the stream.
        return (f"; yet those {whats} were fast in {timed - slow} of their {timed} timings: a "
                "cost of when they were made or of the worker's part of the stream (a busy "
                "host, a cache filled once, one shard slower), not of the positions")
    # Slow on the CPU clock, the cost was work done then (a busy host
    # stretches the wall clock, not a sample's CPU time).
    why = ("their CPU rose then: the data or what it reads changed, a cache was dropped"
           if p.get("basis", "").startswith("cpu") else "a busy host, a cache filled once")
    return (f"; yet those {whats} were fast in {timed - slow} of their {timed} timings: "
            f"a cost of when they were made ({why}), not of the samples")


# A call's mean is said beside its median where it is at least this many
# times the median: a few slow calls (collate_fn slow on every 3rd batch)
# hold the share while the median is the cheap calls'.
MEAN_SHOWN_RATIO = 2.0


def _stride_exceptions(p: dict) -> str:
    """"and no other", or the exceptions the stride was allowed and its
    p-value (exact strides have none)."""
    if p.get("p_value") is None:
        return "and no other"
    but = [x for x in (
        plural(p["off_stride"], "slow sample") + " off it" if p["off_stride"] else "",
        plural(p["fast_on_stride"], "timed sample") + " on it fast"
        if p["fast_on_stride"] else "") if x]
    return ((f"but for {', '.join(but)}" if but else "and no other")
            + f": p = {p['p_value']:.2g} that a stride holds them so by chance")


def stride_class(p: dict) -> str:
    """"index % 10 == 0", or for a set "index % 12 in {0, 5}" (``what``
    "index" or "position")."""
    what = p.get("what", "index")
    if p.get("residues"):
        return f"{what} % {p['stride']} in {{{', '.join(str(r) for r in p['residues'])}}}"
    return f"{what} % {p['stride']} == {p['residue']}"


def _a_batch(c: dict) -> str:
    """A per-batch call's typical time: the median, and the mean beside it
    where they part by MEAN_SHOWN_RATIO."""
    mean = c.get("mean_s")
    if mean is not None and mean >= MEAN_SHOWN_RATIO * c["median_s"]:
        return f"median {fmt_s(c['median_s'])}, mean {fmt_s(mean)} a batch"
    return f"{fmt_s(c['median_s'])} a batch, median"


def _whats(p: dict) -> str:
    """The plural of what the slow samples are counted by: "indices", or
    "positions" for an IterableDataset."""
    return "indices" if p["what"] == "index" else p["what"] + "s"


WORDS: dict[str, Words] = {
    "slow_samples_stride": lambda p: (
        f"slow samples: {_slow_body(p)}; "
        + (f"{len(p['residues'])} places in every {p['stride']} "
           f"{_whats(p)} "
           if p.get("residues") else f"every {nth(p['stride'])} {p['what']} ")
        + f"({stride_class(p)}, " + _stride_exceptions(p) + ")"),
    # What the stride test tried, not "no stride": whole slow batches of 4
    # every 3rd batch sit on 4 places of every 12 indices, past the sets
    # it tries (helper 36A: "no common index stride").
    "slow_samples": lambda p: (
        f"slow samples: {_slow_body(p)}; no common {p['what']} stride (of 1 to "
        f"{plural(STRIDE_SET_MAX, 'place')} in every 2 to {STRIDE_SET_MAX_STRIDE} "
        f"{_whats(p)})"),
    "collate_share": lambda p: (
        f"collate_fn took {pct(p['share'])} of the workers' batch time "
        f"({_a_batch(p)}, over {p['calls']} calls)"),
    "gc_in_samples": lambda p: (
        f"the workers' garbage collector ran inside {plural(p['samples'], 'sample')} "
        f"(the longest {fmt_s(p['longest_in_a_sample_s'])}, {fmt_s(p['in_samples_s'])} in "
        f"all, {pct(p['sample_share'])} of sample time; {plural(p['collections'], 'collection')}"
        " timed): left out of each sample's own time before the slow-sample test, since the "
        "sample that allocates past gc's threshold pays for every object alive; many Python "
        "objects in the worker (those the dataset keeps, and those it inherited from the "
        "main process) make each collection long (gc.freeze() in worker_init_fn, or in the "
        "main process before iter(loader), takes them out of it)"),
    "getitems_only": lambda p: (
        "the dataset makes each batch at once (__getitems__): per-sample time is "
        f"unavailable; __getitems__ took {pct(p['share'] or 0.0)} of the workers' batch time "
        f"({fmt_s(p['median_s'])} a batch)"),
}


def evidence_lines(s: dict) -> list[str]:
    """The findings of ``s["production"]["samples"]``, worded."""
    block = (s.get("production") or {}).get("samples")
    return [WORDS[code](numbers) for code, numbers in (block or {}).get("findings") or []]


def sample_line(s: dict) -> Optional[str]:
    """The fact line of the per-sample timing; None when the source is not
    a multiprocessing DataLoader or its worker timing is off (the
    production line says why)."""
    p = s.get("production")
    if not p or not p.get("available"):
        return None
    b = p.get("samples")
    if not b:
        return None
    if not b.get("available"):
        return f"per-sample time: unavailable ({b.get('unavailable') or 'not measured'})"
    parts = []
    st = b.get("sample_s")
    if st:
        cpu = b.get("sample_cpu_s")
        parts.append(f"per-sample time in the workers: median {fmt_s(st['median'])}"
                     + (f" ({fmt_s(cpu['median'])} CPU on the thread that ran "
                        "__getitem__)" if cpu else "")
                     + f", p95 {fmt_s(st['p95'])} over {plural(b['samples'], 'sample')} in "
                     f"{plural(b['batches'], 'batch', 'batches')}")
        if b.get("sample_share") is not None:
            parts.append(f"samples {pct(b['sample_share'])} of batch time")
    else:
        parts.append("per-sample time: unavailable (the dataset makes each batch at once, "
                     "__getitems__)")
    c = b.get("collate")
    if c and c.get("share") is not None:
        parts.append(f"collate_fn {pct(c['share'])} ({_a_batch(c)})")
    if b.get("lost"):
        parts.append(f"{b['lost']} sample records lost")
    return "; ".join(parts)
