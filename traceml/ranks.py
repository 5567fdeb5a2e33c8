"""Many ranks: every rank's steps gathered to rank 0 over torch.distributed,
and the report of the job they make together.

::

    # every rank, after (or during) training, with the process group up:
    rep = traceml.report(ranks="all")      # or traceml.gather(timeout_s=60)
    if rep is not None:                    # rank 0 of the group
        print(rep)                         # straggler, cadence, all-reduce echo

With DistributedDataParallel the gradient all-reduce synchronises the
ranks at every step, so a data stall on one rank shows on the others as a
slow compute phase.  The job's input wait at step i is the largest wait
across the ranks at step i (steps aligned by index); this module gathers
the per-step records, and :func:`combine` (pure, testable on hand-made
arrays) reduces them.

Transport, all torch.distributed's own (no socket of ours):

1. Who is here: each rank sets a key in the process group's store (the
   c10d TCPStore / FileStore the group was made with); rank 0 waits for
   each key until ``timeout_s`` after it arrived (``Store.wait`` with a
   timeout), then publishes the ranks present.  A rank that never calls,
   has died or comes later is left out, and the report says so.
2. The present ranks make a gloo group of their own, once per set of
   ranks (``new_group(present, backend="gloo", timeout=timeout_s,
   use_local_synchronization=True)``: only they call it) and send rank 0,
   point to point, a header (step count, size of the facts), their facts
   (pickled, as ``gather_object`` pickles) and their 32-byte records in
   chunks of ``chunk_steps`` steps, received straight into the final array
   (no whole message, no second copy).  Every wait has the deadline
   ``timeout_s`` (``Work.wait(timeout)``); a rank that stops sending is
   reported with how far it got.

Why not the user's group and a collective: a collective with an absent
rank blocks every rank until the group's own timeout (30 min by default),
and gloo answers a timed-out wait by closing every connection of that
group ("Application timeout caused pair closure", measured here): a
deadline on the user's group would break the user's training.  A group of
traceml's own can fail alone; being gloo, it sends CPU tensors whatever
the user's backend (NCCL included), so traceml's records never take GPU
memory.
"""

from __future__ import annotations

import datetime
import math
import numbers
import os
import pickle
import socket
import time
import warnings
from typing import Any, Optional, Union

import numpy as np

from . import _core, torch_private
from .findings import rank_stragglers, stall_timing
from .build import build as _build, duration_stats_s as _duration_stats_s
from .result import Report, summary_of

# The default deadline, in seconds: long enough for rank 0 to save a
# checkpoint at the end of training before it calls, short enough that a
# dead rank costs two minutes, not the group's 30.
DEFAULT_TIMEOUT_S = 120.0
# Steps per message: 2 MiB of records.  1M steps in 16 messages a rank.
DEFAULT_CHUNK_STEPS = 1 << 16
# Tags of traceml's messages on its own group: the message's number.
_MAX_MESSAGES = 1 << 20
_HEADER, _FACTS, _FIRST_CHUNK = 0, 1, 2
# Works abandoned after a timeout keep their buffers alive here: the
# backend may still write into (or read from) them.
_ABANDONED: list = []
# Gathers called so far in this process, for the store keys of the next.
_CALLS = [0]
# traceml's own gloo groups, by the global ranks they hold (see _group).
_GROUPS: dict = {}


def gather(stall_threshold_s: Optional[float] = None, *, source: Union[None, str, int] = None,
           recorder: Any = None, group: Any = None,
           timeout_s: float = DEFAULT_TIMEOUT_S,
           chunk_steps: int = DEFAULT_CHUNK_STEPS) -> Optional[Report]:
    """Gather every rank's recorded steps to rank 0 of ``group`` and report
    the job; call it on every rank of the group, the same number of times.

    Each rank first builds its own report (:meth:`traceml.Recorder.report`
    with ``stall_threshold_s`` and ``source``, where its worker evidence
    lives), then sends rank 0 that report's verdicts, its source's loader
    facts and its per-step records (32 bytes a step, in chunks of
    ``chunk_steps``; see the module doc for the transport and the
    deadlines).

    Args:
        stall_threshold_s, source: as for :func:`traceml.report`, on each
            rank (the same source name on every rank).
        recorder: the :class:`traceml.Recorder` to read (default: the
            default recorder).
        group: the torch.distributed process group whose ranks to gather
            (default: the default group, every rank).  Any backend: the
            records travel on a gloo group of traceml's own.
        timeout_s: seconds rank 0 waits for the other ranks to arrive
            (counted from its own arrival) and for each later message,
            before it reports a rank missing; the other ranks wait twice
            that for rank 0's answer, and timeout_s for each later
            message, before they give up (with a RuntimeWarning).
            Default ``DEFAULT_TIMEOUT_S`` (120 s).
        chunk_steps: steps per message (default 65536: 2 MiB).

    Returns:
        On rank 0 of the group, the job's :class:`traceml.Report` (see
        :func:`combine`: the top level is the largest input wait across
        ranks per step, ``to_dict()["ranks"]`` the per-rank verdicts,
        straggler and echo); on every other rank None.  Without an
        initialised process group (torch.distributed not even imported,
        or not initialised), or in a group of one, the local report (as
        ``traceml.report()``, with no ``ranks`` key).

    Ranks in the report are ranks of ``group``.

    Raises:
        TypeError: a bad stall_threshold_s or source (as traceml.report);
            timeout_s not a real number; chunk_steps not an int; recorder
            not a Recorder.
        ValueError: a bad stall_threshold_s or source (as traceml.report);
            timeout_s not finite and > 0; chunk_steps < 1.
    """
    timeout_s = _check_timeout(timeout_s)
    if isinstance(chunk_steps, bool) or not isinstance(chunk_steps, int):
        raise TypeError(f"gather(): chunk_steps must be an int, got "
                        f"{type(chunk_steps).__name__}")
    if chunk_steps < 1:
        raise ValueError(f"gather(): chunk_steps must be >= 1, got {chunk_steps!r}")
    if recorder is not None and not isinstance(recorder, _core.Recorder):
        raise TypeError(f"gather(): recorder must be a traceml.Recorder or None, got "
                        f"{type(recorder).__name__}")
    rec = recorder if recorder is not None else _core.default_recorder()
    local = rec.report(stall_threshold_s, source=source)
    dist = _dist()
    if dist is None or not dist.is_initialized() or dist.get_world_size(group) <= 1:
        return local
    src = rec.sources.by_name.get(summary_of(local)["source"])
    facts = local_facts(local, src)
    size = dist.get_world_size(group)
    members = [_global_rank(dist, group, i) for i in range(size)]
    me = dist.get_rank()
    call = _CALLS[0]
    _CALLS[0] += 1
    present, missing = _present(dist, members, me, call, timeout_s)
    if present is None:
        return None
    steps = np.ascontiguousarray(local.steps)
    sub = _group(dist, present, timeout_s) if len(present) > 1 else None
    if me != members[0]:
        if not _send(dist, sub, present[0], steps, facts, timeout_s, chunk_steps):
            _drop_group(present)
        return None
    records, gathered, failed = _receive(dist, sub, present, steps, facts, timeout_s)
    if failed:
        _drop_group(present)
    missing.update({members.index(g): why for g, why in failed.items()})
    by_group_rank = {members.index(g): v for g, v in records.items()}
    facts_by = {members.index(g): v for g, v in gathered.items()}
    return combine(by_group_rank, facts_by, world_size=size, missing=missing,
                   stall_threshold_s=stall_threshold_s, timeout_s=timeout_s)


def _check_timeout(timeout_s: Any) -> float:
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, numbers.Real):
        raise TypeError(f"gather(): timeout_s must be a number of seconds, got "
                        f"{type(timeout_s).__name__}")
    value = float(timeout_s)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"gather(): timeout_s must be finite and > 0 seconds, "
                         f"got {timeout_s!r}")
    return value


def _dist():
    """torch.distributed, or None where it is not available or not
    imported yet (then no process group can exist in this process)."""
    import sys

    if "torch.distributed" not in sys.modules:
        return None
    import torch.distributed as dist

    return dist if dist.is_available() else None


def _global_rank(dist, group, group_rank: int) -> int:
    if group is None:
        return group_rank
    return dist.get_global_rank(group, group_rank)


def _td(seconds: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=max(seconds, 1e-3))


def _present(dist, members: list, me: int, call: int, timeout_s: float):
    """(the global ranks present, in group order, {group rank: why
    missing}) on the group's first rank; (present, {}) on a present rank;
    (None, {}) on a rank left out or that heard nothing from the first
    rank (with a RuntimeWarning).  Through the store of the default group
    (``Store.wait`` with a deadline)."""
    # Private in torch (2.0 to 2.13 at least): guarded, so that a torch
    # without it gets a sentence, not an AttributeError.
    get_store = torch_private.default_store_getter()
    if get_store is None:
        raise RuntimeError("traceml.gather(): this torch has no "
                           "torch.distributed.distributed_c10d._get_default_store, "
                           "which traceml reads who is present through; "
                           "use report() on each rank instead")
    store = get_store()
    prefix = f"traceml/gather/{'-'.join(map(str, members))}/{call}/"
    if me != members[0]:
        store.set(prefix + str(me), "1")
        try:
            # Rank 0 may come up to timeout_s after this rank and then wait
            # timeout_s for the others: twice the deadline, so that a rank
            # that came in time is never dropped by the race.
            store.wait([prefix + "present"], _td(2 * timeout_s))
            present = [int(x) for x in store.get(prefix + "present").decode().split(",")]
        except RuntimeError as exc:
            _warn(f"rank {members[0]} did not answer within {2 * timeout_s:g} s "
                  f"({_first(exc)})")
            return None, {}
        if me not in present:
            _warn(f"rank {members[0]} had given up on this rank (it came more than "
                  f"{timeout_s:g} s after it)")
            return None, {}
        return present, {}
    deadline = time.monotonic() + timeout_s
    present, missing = [me], {}
    for i, g in enumerate(members[1:], start=1):
        try:
            store.wait([prefix + str(g)], _td(deadline - time.monotonic()))
            present.append(g)
        except RuntimeError:
            missing[i] = rank_stragglers.rank_missing_reason("absent", timeout_s=timeout_s)
    store.set(prefix + "present", ",".join(map(str, present)))
    return present, missing


def _group(dist, present: list, timeout_s: float):
    """traceml's gloo group of the ``present`` global ranks, made once and
    kept for the next gathers among the same ranks: a group made again
    with the same ranks after ``destroy_process_group`` gets the same name
    and store keys as the old one, and its members could read the old
    group's stale addresses (seen here: "connectFullMesh failed ...
    Connection refused")."""
    key = tuple(present)
    sub = _GROUPS.get(key)
    if sub is None:
        sub = dist.new_group(present, timeout=datetime.timedelta(seconds=timeout_s),
                             backend="gloo", use_local_synchronization=True)
        _GROUPS[key] = sub
    return sub


def _drop_group(present: list) -> None:
    """Forget a group a timeout broke (gloo closed its connections); it
    stays alive in _ABANDONED, so the next one with these ranks gets a new
    name."""
    sub = _GROUPS.pop(tuple(present), None)
    if sub is not None:
        _ABANDONED.append(sub)


def _warn(what: str) -> None:
    warnings.warn(f"traceml.gather(): {what}; this rank is missing from the report",
                  RuntimeWarning, stacklevel=4)


def _first(exc: BaseException) -> str:
    return (str(exc).splitlines() or [""])[0][:200]


def _tensor(a: np.ndarray):
    """``a`` (contiguous) as a uint8 CPU tensor sharing its memory."""
    import torch

    with warnings.catch_warnings():
        # A read-only view (the store's snapshot_view): sent, never written.
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(np.ascontiguousarray(a).reshape(-1).view(np.uint8))


def _wait(work, seconds: float) -> None:
    work.wait(timeout=_td(seconds))


def _send(dist, group, dst: int, steps: np.ndarray, facts: dict,
          timeout_s: float, chunk_steps: int) -> bool:
    """A rank's side: header, facts, chunks, each sent when rank 0 takes
    it; False (with a RuntimeWarning) when a message waits past
    timeout_s."""
    import torch

    blob = np.frombuffer(pickle.dumps(facts, protocol=pickle.HIGHEST_PROTOCOL), np.uint8)
    n = len(steps)
    chunk = max(chunk_steps, -(-n // (_MAX_MESSAGES - _FIRST_CHUNK)))
    header = torch.tensor([n, len(blob), chunk], dtype=torch.int64)
    out = [(header, _HEADER), (_tensor(blob), _FACTS)]
    out += [(_tensor(steps[a:a + chunk]), _FIRST_CHUNK + k)
            for k, a in enumerate(range(0, n, chunk))]
    works = [(dist.isend(t, dst, group=group, tag=m), t) for t, m in out]
    for i, (work, _) in enumerate(works):
        try:
            _wait(work, timeout_s)
        except RuntimeError as exc:
            _ABANDONED.extend(works[i:])
            _warn(f"rank {dst} did not take this rank's records within {timeout_s:g} s "
                  f"({_first(exc)})")
            return False
    return True


def _receive(dist, group, present: list, steps: np.ndarray, facts: dict, timeout_s: float):
    """Rank 0's side: ({global rank: records}, {global rank: facts},
    {global rank: why it failed}).  Every receive is posted before any is
    waited for, so that all ranks send at once."""
    import torch

    records = {present[0]: steps}
    gathered = {present[0]: facts}
    failed: dict = {}
    headers = {}
    for g in present[1:]:
        t = torch.zeros(3, dtype=torch.int64)
        headers[g] = (dist.irecv(t, g, group=group, tag=_HEADER), t)
    posted = {}
    for g, (work, header) in headers.items():
        try:
            _wait(work, timeout_s)
        except RuntimeError:
            _ABANDONED.append((work, header))
            failed[g] = rank_stragglers.rank_missing_reason("silent", timeout_s=timeout_s)
            continue
        n, nbytes, chunk = (int(x) for x in header.tolist())
        dest = np.empty(n, dtype=_core.RECORD_DTYPE)
        blob = np.empty(nbytes, dtype=np.uint8)
        parts = [(blob, _FACTS)] + [(dest[a:a + chunk], _FIRST_CHUNK + k)
                                    for k, a in enumerate(range(0, n, chunk))]
        works = []
        for arr, m in parts:  # received straight into dest and blob
            t = torch.from_numpy(arr.reshape(-1).view(np.uint8))
            works.append((dist.irecv(t, g, group=group, tag=m), t))
        posted[g] = (dest, blob, works, chunk)
    for g, (dest, blob, works, chunk) in posted.items():
        done = 0  # messages received: the facts, then the chunks
        try:
            for work, _ in works:
                _wait(work, timeout_s)
                done += 1
        except RuntimeError:
            _ABANDONED.extend(works)
            got = min(max(done - 1, 0) * chunk, len(dest))
            failed[g] = rank_stragglers.rank_missing_reason("stopped", timeout_s=timeout_s,
                                                    got=got, of=len(dest))
            continue
        records[g] = dest
        gathered[g] = pickle.loads(blob.tobytes())
    return records, gathered, failed


# --- what each rank sends besides its records -------------------------------------

# The keys of a rank's own report kept for the job's report.
_LOCAL_KEYS = ("source", "steps", "steady_steps", "epochs", "wall_s", "input_share",
               "diagnosis", "diagnosis_rule", "diagnosis_rule_item", "shape", "dropped_steps",
               "next", "next_items")


def local_facts(rep: Report, src: Any = None) -> dict:
    """What a rank sends rank 0 besides its records: its host and pid, its
    source's loader facts (``name``, ``kind``, ``loader``, ``epochs``,
    ``epoch_facts``, None for a source it does not know), its report's
    verdicts (``summary``: source, steps, diagnosis, shape, input share,
    wait/compute/step statistics, stalls count/threshold/matter, temporal,
    cadence, headline, next steps) and the stall and epoch-start step
    indices (int64 arrays).  Plain data: picklable, a few hundred bytes
    plus 8 bytes a stall."""
    s = summary_of(rep)
    st = s.get("stalls") or {}
    local = {k: s.get(k) for k in _LOCAL_KEYS}
    local.update({
        "input_wait_s": dict(s.get("input_wait_s") or {}),
        "compute_s": dict(s.get("compute_s") or {}),
        "step_s": dict(s.get("step_s") or {}),
        "stalls": {"count": st.get("count"), "threshold_s": st.get("threshold_s"),
                   "matter": st.get("matter"), "outliers": st.get("outliers")},
        "temporal": dict(s["temporal"]) if s.get("temporal") else None,
        "cadence": dict(s["cadence"]) if s.get("cadence") else None,
        "headline": (s.get("headline") or {}).get("label"),
        "loader": dict(s["loader"]) if s.get("loader") else None,
    })
    source = None
    if src is not None:
        source = {"id": int(src.id), "name": src.name, "kind": src.kind,
                  "loader": dict(src.loader) if src.loader else None,
                  "epochs": int(src.epochs),
                  "epoch_facts": {int(e): dict(f) for e, f in src.epoch_facts.items()}}
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "summary": local,
        "source": source,
        "stall_steps": np.asarray(st.get("steps") or [], dtype=np.int64),
        "epoch_start_steps": np.asarray((s.get("epoch_start") or {}).get("steps") or [],
                                        dtype=np.int64),
    }


# --- the job's report (pure) -------------------------------------------------------

def _mask(n: int, index: np.ndarray) -> np.ndarray:
    m = np.zeros(n, dtype=bool)
    index = np.asarray(index, dtype=np.int64)
    m[index[(index >= 0) & (index < n)]] = True
    return m


def _source_of(facts: dict, sid: int, ranks: int):
    """The job's source: the lowest gathered rank's, renamed."""
    from .wrapping import Source

    info = facts.get("source")
    name = (info or {}).get("name") or facts["summary"].get("source") or "steps"
    label = rank_stragglers.ranks_source_name(name, ranks)
    if not info:
        return Source(sid, label, "ranks")
    return Source(sid, label, info.get("kind") or "ranks", loader=info.get("loader"),
                  epochs=info.get("epochs") or 0, epoch_facts=dict(info.get("epoch_facts") or {}))


def combine(records: dict, facts: dict, *, world_size: Optional[int] = None,
            missing: Optional[dict] = None, stall_threshold_s: Optional[float] = None,
            timeout_s: Optional[float] = None) -> Report:
    """The job's Report from every gathered rank's records (pure).

    Args:
        records: {rank: the rank's records} (``traceml._core.RECORD_DTYPE``
            structured arrays, shape (steps,), of the one source reported on
            that rank); steps are aligned by index across ranks.
        facts: {rank: :func:`local_facts` of that rank's own report}, same
            keys as ``records``.
        world_size: ranks in the group (default: the highest rank + 1).
        missing: {rank: why it is missing} (from the gather).
        stall_threshold_s: for the job's stall rule, as traceml.report.
        timeout_s: the gather's deadline, for the record.

    Returns:
        A Report whose top level (``steps`` and every statistic, stall,
        shape and cadence of ``to_dict()``) is that of the largest input
        wait across ranks at each aligned step: record i has input wait
        max over ranks of their wait at step i, step time the max of their
        step times, epoch and flags of the lowest rank that has step i, and
        synthetic timestamps (step i begins where step i-1 ends, from the
        lowest rank's first begin_ns; clocks of different hosts are never
        compared).  ``to_dict()["ranks"]`` holds: ``world_size``,
        ``gathered`` (ranks), ``missing`` ([{rank, reason}]),
        ``timeout_s``, ``aligned_steps``, ``per_rank`` (per rank: host,
        steps, diagnosis, input share, shape, temporal label and period,
        stalls, median wait/compute/step, and from
        :func:`traceml.findings.rank_stragglers.stragglers` held_steps, held_share,
        unique_wait_s, unique_share, cost_share, straggler),
        ``held_by`` (per aligned step the rank that held the largest wait,
        None where no rank has the step), ``max_wait`` (statistics of the
        per-step largest wait and the job's unique wait),
        ``stragglers`` (ranks), ``straggler_rule``, ``echo`` ([{straggler,
        rank, ...rank_stragglers.echo}]), ``echo_rule`` and ``next`` (sentences).
        ``Report.rank_steps`` holds the ranks' records (in memory only).

    Raises:
        ValueError: records is empty, or facts lacks one of its ranks.
    """
    if not records:
        raise ValueError("combine(): records holds no rank")
    ranks = sorted(int(r) for r in records)
    lacking = [r for r in ranks if r not in facts]
    if lacking:
        raise ValueError(f"combine(): facts lacks rank {lacking[0]}")
    missing = dict(missing or {})
    world = int(world_size) if world_size is not None else max(ranks + list(missing)) + 1
    recs = [np.asarray(records[r]) for r in ranks]
    n = max(len(a) for a in recs)
    # One rank's durations at a time: 8 B a step, not 8 B a step per rank.
    top, holder, second = rank_stragglers.max_across_ranks(
        (a["fetch_done_ns"] - a["begin_ns"] for a in recs), n)
    step_top, _, _ = rank_stragglers.max_across_ranks((a["end_ns"] - a["begin_ns"] for a in recs), n)
    syn = np.zeros(n, dtype=_core.RECORD_DTYPE)
    start = next((int(a["begin_ns"][0]) for a in recs if len(a)), 0)
    step_top = np.maximum(step_top, np.maximum(top, 0))
    if n:
        syn["begin_ns"][1:] = np.cumsum(step_top[:-1])
        syn["begin_ns"] += start
    syn["fetch_done_ns"] = syn["begin_ns"] + top
    syn["end_ns"] = syn["begin_ns"] + step_top
    for a in reversed(recs):  # the lowest rank that has the step wins
        syn["epoch"][:len(a)] = a["epoch"]
        syn["flags"][:len(a)] = a["flags"]
    # Steps placed by the probes (source 0 on the ranks) have no start-up
    # steps: their flags hold no position in an epoch, so the job is
    # reported as source 0 too, where build() counts none (as source 1,
    # every step read as its epoch's first, and the job had no steady step).
    sid = 0 if (facts[ranks[0]].get("source") or {}).get("id") == 0 else 1
    syn["source"] = sid
    src = _source_of(facts[ranks[0]], sid, len(ranks))
    info = {"dropped_steps": sum(int(facts[r]["summary"].get("dropped_steps") or 0)
                                 for r in ranks),
            "out_of_memory": False, "misuse": {}, "probe_step_open": False}
    rep = _build(syn, info, sid, stall_threshold_s, sources={sid: src})
    steady = {r: ~_mask(len(a), facts[r]["epoch_start_steps"]) for r, a in zip(ranks, recs)}
    job_step = float(np.sum(step_top[_steady_all(steady, ranks, n)], dtype=np.float64))
    matters = {r: rank_stragglers.input_matters(facts[r]["summary"]) for r in ranks}
    held = rank_stragglers.stragglers(top, holder, second, job_step, ranks, matters)
    per_rank = [_rank_entry(r, facts[r], h, matters[r]) for r, h in zip(ranks, held)]
    stragglers = [h["rank"] for h in held if h["straggler"]]
    echoes = []
    for s in stragglers:
        i = ranks.index(s)
        stall = _mask(len(recs[i]), facts[s]["stall_steps"])
        for j, r in enumerate(ranks):
            if r == s:
                continue
            e = rank_stragglers.echo(stall, recs[i]["fetch_done_ns"] - recs[i]["begin_ns"], steady[s],
                            recs[j]["end_ns"] - recs[j]["fetch_done_ns"], steady[r])
            echoes.append({"straggler": s, "rank": r, **e})
    unique = np.where(holder >= 0, top - second, 0)
    block = {
        "world_size": world,
        "gathered": ranks,
        "missing": [{"rank": int(r), "reason": missing[r]} for r in sorted(missing)],
        "timeout_s": timeout_s,
        "aligned_steps": n,
        "per_rank": per_rank,
        "held_by": _held_by(holder, ranks),
        "max_wait": {**_duration_stats_s(np.maximum(top, 0)),
                     "unique_total_s": float(unique.sum()) * 1e-9,
                     "job_step_total_s": job_step * 1e-9},
        "stragglers": stragglers,
        "straggler_rule": rank_stragglers.straggler_rule(),
        "echo": echoes,
        "echo_rule": rank_stragglers.echo_rule(),
    }
    block["next"] = rank_stragglers.ranks_next_steps(block)
    summary_of(rep)["ranks"] = block
    rep.rank_steps = dict(zip(ranks, recs))
    return rep


def _held_by(holder: np.ndarray, ranks: list) -> list:
    """Per step the rank number holding the largest wait, None for none."""
    table = np.asarray(ranks, dtype=np.int64)
    out = np.where(holder >= 0, table[np.maximum(holder, 0)], -1)
    if out.min(initial=0) >= 0:
        return out.tolist()
    values = out.astype(object)
    values[out < 0] = None
    return values.tolist()


def _steady_all(steady: dict, ranks: list, n: int) -> np.ndarray:
    """Aligned steps that are steady on every rank that has them."""
    out = np.ones(n, dtype=bool)
    for r in ranks:
        m = steady[r]
        out[:len(m)] &= m
    return out


def _rank_entry(rank: int, facts: dict, held: dict, matters: bool) -> dict:
    s = facts["summary"]
    tmp = s.get("temporal") or {}
    return {
        "rank": rank,
        "host": facts.get("host"),
        "pid": facts.get("pid"),
        "source": s.get("source"),
        "steps": s.get("steps"),
        "steady_steps": s.get("steady_steps"),
        "diagnosis": s.get("diagnosis"),
        "diagnosis_rule": s.get("diagnosis_rule"),
        "diagnosis_rule_item": s.get("diagnosis_rule_item"),
        "input_share": s.get("input_share"),
        "shape": s.get("shape"),
        "temporal": tmp.get("label"),
        "period": tmp.get("period") if tmp.get("label") == stall_timing.PERIODIC else None,
        "stalls": (s.get("stalls") or {}).get("count"),
        "stall_threshold_s": (s.get("stalls") or {}).get("threshold_s"),
        "input_wait_median_s": (s.get("input_wait_s") or {}).get("median"),
        "input_wait_total_s": (s.get("input_wait_s") or {}).get("total"),
        "compute_median_s": (s.get("compute_s") or {}).get("median"),
        "step_median_s": (s.get("step_s") or {}).get("median"),
        "loader": s.get("loader"),
        "next": list(s.get("next") or []),
        "next_items": list(s.get("next_items") or []),
        "input_matters": bool(matters),
        **{k: v for k, v in held.items() if k != "rank"},
    }
