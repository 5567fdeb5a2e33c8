"""Bytes per batch and the hand-over: waits for batches already made.
"""

from __future__ import annotations

from typing import Optional


from ..fmt import fmt_bytes, fmt_s, pct, plural
from ._types import Finding, Words
from . import host_contention, input_bound, wait_parts


# A batch this large costs its hand-over by itself.  Measured on the 2-core
# build machine: 16 images of 3x480x640 float32 (59 MB a batch) from a
# __getitem__ returning a ready tensor cost the workers 32-47 ms of CPU per
# batch (collate's copy into shared memory: 0.5-0.8 ms per MB, quiet and
# loaded host) and the main process about 50 ms per step outside the fetch
# on the loaded host (mapping and freeing the shared memory).  At 8 MB that
# is 4-6 ms a batch, past the 1 ms stall floor and a material share of a
# 10-100 ms training step.
HANDOVER_MIN_BYTES = 8e6
# The hand-over's cost per byte measured there (s a byte: the workers'
# collate copy into shared memory, 0.5-0.8 ms per MB, quiet and loaded).
HANDOVER_S_PER_BYTE = (0.5e-9, 0.8e-9)


# The bytes are measured not to be the cost when the samples' own
# processing holds more than half of the workers' batch time (the rest is
# collate, with its copy into shared memory) and receiving the batch (the
# main process on a CPU in the fetch, and the batch in transit) holds less
# than half of the input wait: the larger part of both is elsewhere.
BYTES_PART_SHARE = 0.5


def handover(median_bytes: Optional[float], diagnosis: str, workers_busy: Optional[bool],
             main_busy: Optional[bool], num_workers: Optional[int] = None,
             sample_share: Optional[float] = None,
             parts: Optional[dict] = None) -> Optional[str]:
    """Whether large batches may be the wait, as a code: None when the
    median batch is under HANDOVER_MIN_BYTES, input is not a concern
    (COMPUTE-BOUND, NO-DATA), no bytes cross processes (num_workers=0:
    the batch is made where it is used, so there is no hand-over to cost
    anything); "handover_main" when the workers idle while the main
    process is busy (the hand-over's receiving end is the cost); else
    "handover_bytes" (the workers' CPU may be collate's copy rather than
    the samples' processing), unless that is measured not to be so:
    ``sample_share`` (the samples' part of the workers' batch time,
    production.samples; None: not measured) above BYTES_PART_SHARE and the
    receiving parts of ``parts`` (findings.wait_parts' split of the input
    wait: main_cpu, other_threads and in_transit; None: not measured, and the samples'
    share decides) under it.  The
    receiving parts alone do not gate it: collate's copy into shared
    memory runs in the workers, where it is part of making the batch, and
    the cores it takes show as the main process waiting for one (measured
    on 59 MB batches here); the per-sample timing is what tells that copy
    from the samples' processing."""
    if median_bytes is None or median_bytes < HANDOVER_MIN_BYTES:
        return None
    if num_workers == 0:
        return None
    if diagnosis in (input_bound.COMPUTE_BOUND, input_bound.NO_DATA):
        return None
    if workers_busy is False and main_busy:
        return "handover_main"
    if sample_share is not None and sample_share > BYTES_PART_SHARE:
        p = (parts or {}).get("parts_s") or {}
        total = sum(p.values())
        receiving = (sum(p.get(k, 0.0) for k in ("main_cpu", "other_threads", "in_transit"))
                     / total if total else 0.0)
        if receiving < BYTES_PART_SHARE:
            return None
    return "handover_bytes"


def _hand_over_next(p: dict) -> str:
    busy = (f"busy making batches {pct(p['busy_share'])} of the time"
            if p.get("busy_share") is not None else "mostly idle")
    ready = (f", and {pct(p['ready_before_fetch'])} of the batches were made before their "
             "fetch began" if p.get("ready_before_fetch") is not None else "")
    if ready and p["ready_before_fetch"] >= 0.5 and p.get("production_share"):
        ready += " (the awaited worker was then making its next one)"
    # Large batches get their own sentence (hand_over's code).
    # The production share counts the awaited worker making a batch, its
    # own or the next (a worker burning its next batch holds the GIL its
    # queue's feeder needs to send the one made): "still making its
    # batch" beside "made before their fetch began" read as a contradiction.
    largest = p.get("largest")
    # Batches held behind another worker's Python are the workers' own
    # work, not the transfer: more workers may not shorten it, but the
    # claim that only the hand-over does is not what was measured.
    held = bool(largest) and largest["part"] == wait_parts.BEHIND_WORKER
    # More workers can shorten the part a worker was still making the
    # batch, and no more: with 3 workers of 20 ms sleeping samples that
    # part was 35% of the wait, and 6 workers halved it where the words
    # said "More workers will not shorten this wait" (helper 35A, 4 of 14).
    making = (min(1.0, p["production_share"] / p["share"])
              if p.get("share") and p.get("production_share") is not None else None)
    head = (f"Input is {pct(p['share'])} of step time, but the loop waited while the awaited "
            f"worker was making a batch for only {pct(p['production_share'])} of step time; the "
            f"workers were {busy}{ready}. "
            + ("The loop waits mostly for batches made but held in their worker" if held else
               "More workers will not shorten this wait: it is the hand-over"
               if not making or pct(making) == pct(0.0) else
               f"More workers shorten at most the part a worker was still making ({pct(making)} "
               "of the wait); the rest is the hand-over"))
    fewer = (host_contention.fewer_receiving_words(p["fewer"]) if p.get("fewer") else "")
    if largest and largest["part"] not in wait_parts.PRODUCTION_PARTS:
        # Measured (wait_parts): the next step is the largest part's.
        return (f"{head} (median fetch {fmt_s(p['median_s'])}). "
                f"{wait_parts.largest_sentence(largest)}{fewer}")
    return (f"{head} (the batch queued in its worker, sent, unpickled and mapped here, or a "
            f"process waiting for a core; median fetch {fmt_s(p['median_s'])}). "
            + wait_parts.for_tensors(
                "Next: the same loop with fewer processes than cores (a lower num_workers): a "
                "wait that falls was processes waiting for a core; one that stays is the "
                "transfer itself, cheaper with fewer or smaller tensors per batch.",
                p.get("tensors")) + fewer)


def production_line(s: dict) -> Optional[str]:
    """What the workers measured of their own batches; None when the source
    is not a multiprocessing DataLoader."""
    p = s.get("production")
    if not p:
        return None
    if not p.get("available"):
        return f"worker batch timing: off ({p.get('unavailable') or 'not measured'})"
    make, cpu = p["make_s"], p.get("cpu_s")
    text = (f"workers made a batch in {fmt_s(make['median'])} (median; p95 "
            f"{fmt_s(make['p95'])})")
    if cpu:
        text += f", {fmt_s(cpu['median'])} of CPU"
    if p.get("busy_share") is not None:
        text += f"; busy {pct(p['busy_share'])} of the time"
    if p.get("production_share") is not None:
        text += (f"; input wait on a worker making batches {pct(p['production_share'])} of "
                 f"step time, on made batches (hand-over) {pct(p['handover_share'])}")
    if p["coverage"] < input_bound.PRODUCTION_MIN_COVERAGE:
        text += f" ({pct(p['coverage'])} of steps met their batch: too few to decide on)"
    return text


def batch_bytes_line(s: dict) -> Optional[str]:
    """Bytes per batch as measured; None when none was."""
    b = s.get("batch_bytes")
    if not b:
        return None
    return (f"batch bytes: median {fmt_bytes(b['median'])} over "
            f"{plural(b['measured'], 'measured batch', 'measured batches')}, max "
            f"{fmt_bytes(b['max'])}")


# --- advice -----------------------------------------------------------------
# The next-step codes (traceml.findings.advice) large batches replace: the
# slow-sample and num_workers experiments would vary everything but what
# each batch carries.
_BYTES_FIRST = frozenset(("irregular", "compare_in_order", "in_order_seen",
                          "vary_workers_or_prefetch",
                          "vary_workers_then_in_order", "confirm_period"))
SUPERSEDES = {"handover_main": _BYTES_FIRST, "handover_bytes": _BYTES_FIRST,
              "fewer_bytes": _BYTES_FIRST}
ONLY_REPLACING: frozenset = frozenset()


def superseded_by(f: Finding) -> frozenset:
    """The next-step codes the item ``f`` replaces (SUPERSEDES)."""
    return SUPERSEDES.get(f.code, frozenset())


def advise(s: dict) -> list[Finding]:
    """The hand-over reading of large batches (``s["batch_bytes"]``'s
    ``handover`` code, :func:`handover`) and its next step; none without."""
    code = (s.get("batch_bytes") or {}).get("handover")
    if not code:
        return []
    return [Finding(code, {"bytes": s["batch_bytes"]["median"]}), Finding("fewer_bytes", {})]


WORDS: dict[str, Words] = {
    "handover_main": lambda p: (
        f"Batches carry {fmt_bytes(p['bytes'])} each while the workers idled and the main "
        "process was busy during stalls: handing the batches over (receiving, rebuilding "
        "and freeing large tensors) is the cost, not the samples."),
    "handover_bytes": lambda p: (
        f"Batches carry {fmt_bytes(p['bytes'])} each (at least "
        f"{fmt_bytes(HANDOVER_MIN_BYTES)}): moving them costs per byte (collate's "
        "copy into shared memory in the workers, mapping and freeing it in the main "
        "process), so busy workers need not mean costly samples."),
    "fewer_bytes": lambda p: (
        "Next: send fewer bytes per batch: uint8 images converted to float after the "
        "transfer, a smaller dtype, cropping or resizing in the worker; on a GPU, "
        "pin_memory=True."),
}
