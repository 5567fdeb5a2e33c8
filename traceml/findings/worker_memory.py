"""The workers' memory: copy-on-read growth, memory the workers keep,
and epoch jumps.

Copy-on-read and a worker that keeps what it allocates both grow a
worker's unshared memory (USS).  They part on its resident memory (RSS):
a page the parent shared and the worker now writes (a reference count)
was resident before and stays resident, so RSS stays flat while USS
grows; new allocations grow both alike.
"""

from __future__ import annotations

from typing import Optional


from ..fmt import fmt_bytes
from ._types import Words


# Copy-on-read: forked workers' unshared memory (USS) grows within an epoch
# by at least this much (median over workers and epochs).  Measured here
# (tests/integration/test_memory.py, benchmarks/README.md): 3 million short strings in
# a list, read at random by 2 workers, grew each worker's USS by 233 MiB in
# one epoch; the same numbers in a NumPy array by 1.4 MiB.  A worker's own
# buffers (batches in flight) come and go, so they do not add up to a
# growth over an epoch.
MEM_COW_GROWTH_BYTES = 32 * 2**20


# Copy-on-read leaves RSS flat: the workers' RSS growth over the same span
# under half their USS growth.  At half or more, the workers allocated the
# growth themselves (a 1 MB list append a sample: RSS +261 MB beside USS
# +215 MB, a helper's probe).
COW_RSS_SHARE = 0.5
# glibc's malloc serves a block of M_MMAP_THRESHOLD or more with its own
# mmap, given back when freed; freeing such a block raises the threshold
# to its size (up to 32 MiB on 64-bit), and later blocks that size come
# from the heap, which need not shrink when they are freed (mallopt(3):
# M_MMAP_THRESHOLD, its default 128 KiB and the dynamic adjustment).  A
# worker making samples of a new 12 MB tensor each grew 6 MB a step with
# no tensor kept, under a plain DataLoader too, and stayed flat with
# MALLOC_MMAP_THRESHOLD_=131072 (helper 32B, 4 of 4 runs read "the
# workers allocate memory and keep it").  Samples of at least this many
# bytes (the median batch over batch_size) get that experiment beside the
# reading.
ALLOCATOR_SAMPLE_BYTES = 128 * 2**10


# A step of the main process's RSS from one epoch's last reading to the
# next epoch's first, worth naming: at least this much.
MEM_EPOCH_JUMP_BYTES = 256 * 2**20

COPY_ON_READ = "COPY-ON-READ"


def memory_findings(mem: Optional[dict], num_workers: Optional[int],
                    start_method: Optional[str],
                    sample_bytes: Optional[float] = None) -> list[tuple[str, dict]]:
    """What the memory block (traceml.memory.summarise) shows, as (code,
    numbers): "copy_on_read" when forked workers' unshared memory grew by
    MEM_COW_GROWTH_BYTES or more within an epoch (median) while their
    resident memory grew under COW_RSS_SHARE of that (unknown: copy-on-read
    as before), "workers_keep_memory" when it grew as much, "epoch_jump"
    for each epoch whose start the main process's RSS reached
    MEM_EPOCH_JUMP_BYTES above the previous epoch's end.  ``sample_bytes``
    (the median batch's bytes over batch_size; None: unknown) of at least
    ALLOCATOR_SAMPLE_BYTES adds it to "workers_keep_memory"'s numbers."""
    out: list[tuple[str, dict]] = []
    if not mem or not mem.get("available"):
        return out
    growth = mem.get("worker_uss_growth")
    rss = mem.get("worker_rss_growth")
    if (growth is not None and growth >= MEM_COW_GROWTH_BYTES and (num_workers or 0) > 0
            and start_method in (None, "fork")):
        if rss is not None and rss >= COW_RSS_SHARE * growth:
            out.append(("workers_keep_memory", {
                "growth_bytes": growth, "rss_bytes": rss, "num_workers": num_workers,
                **({"sample_bytes": sample_bytes}
                   if sample_bytes is not None and sample_bytes >= ALLOCATOR_SAMPLE_BYTES
                   else {})}))
        else:
            out.append(("copy_on_read", {"growth_bytes": growth, "num_workers": num_workers}))
    for jump in mem.get("epoch_jumps") or []:
        if jump["rss_bytes"] >= MEM_EPOCH_JUMP_BYTES:
            out.append(("epoch_jump", dict(jump)))
    return out


def memory_line(s: dict) -> Optional[str]:
    """The processes' memory over the run (traceml.memory); None without
    readings."""
    m = s.get("memory")
    if not m or not m.get("available"):
        return None
    parts = []
    main = (m.get("main") or {}).get("rss")
    if main:
        parts.append(f"main RSS {fmt_bytes(main['first'])} -> {fmt_bytes(main['last'])} "
                     f"(max {fmt_bytes(main['max'])})")
    growth = m.get("worker_uss_growth")
    if growth is not None:
        parts.append(f"workers' unshared memory {'grew' if growth >= 0 else 'shrank'} "
                     f"{fmt_bytes(abs(growth))} within an epoch (median)")
    return ("memory: " + "; ".join(parts)) if parts else None


WORDS: dict[str, Words] = {
    "copy_on_read": lambda p: (
        f"Each forked worker's unshared memory grew {fmt_bytes(p['growth_bytes'])} within an "
        "epoch while its resident memory stayed flat: pages it shared with the parent were "
        "written, by copy-on-read (reading Python objects writes their reference counts) or "
        "by the worker's own short-lived objects reusing memory the parent had freed (many "
        "small tensors or dicts a sample). If the dataset holds lists or dicts of Python "
        "objects, hold them in NumPy arrays or Arrow; with num_workers="
        f"{p['num_workers']} the copies add up, and persistent workers keep them."),
    "workers_keep_memory": lambda p: (
        f"Each worker's unshared memory grew {fmt_bytes(p['growth_bytes'])} within an epoch "
        f"and its resident memory {fmt_bytes(p['rss_bytes'])} with it: the workers allocate "
        "memory and keep it (a cache or a list that grows with each sample, tensors kept "
        "alive), not copy-on-read, which leaves resident memory flat. Look for what the "
        f"dataset keeps per sample; with num_workers={p['num_workers']} each worker keeps "
        "its own."
        + (f" Samples of about {fmt_bytes(p['sample_bytes'])} are blocks glibc's malloc can "
           "keep after they are freed (its mmap threshold rises with them): run once with "
           "MALLOC_MMAP_THRESHOLD_=131072 in the environment; growth that stops then is the "
           "allocator's, not the dataset's." if p.get("sample_bytes") else "")),
    "epoch_jump": lambda p: (
        f"The main process's memory stepped up {fmt_bytes(p['rss_bytes'])} at the start of "
        f"epoch {p['epoch']}: something is built or kept per epoch (a new iterator's state, "
        "a cache); compare its size at each epoch boundary."),
}



