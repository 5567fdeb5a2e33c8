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

Transport: torch.distributed's own point-to-point operations on the
process group in use (``isend``/``irecv``, CPU tensors for gloo, tensors on
the rank's CUDA device for NCCL), never a socket of ours.  Each rank sends
rank 0 a header (its step count and the size of its facts), its facts (its
own report's verdicts and its source's loader facts, pickled as
``gather_object`` pickles them) and its 32-byte records in chunks of
``chunk_steps`` steps, received straight into the final array (no whole
message, no second copy on rank 0 with gloo).  Every wait has a deadline
(``Work.wait(timeout)``): rank 0 gives the headers ``timeout_s`` in all,
then each message ``timeout_s``; a rank that never calls, has died or
stops sending is reported missing with the reason, and the others go on.
A collective (``gather``, ``gather_object``) would block every rank until
the *group's* timeout (30 min by default) when one rank is absent, and
that timeout is the user's setting, which traceml does not change.
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

from . import _core, policy, wording
from .report import build as _build, duration_stats_s as _duration_stats_s
from .result import Report

# The default deadline, in seconds: long enough for rank 0 to save a
# checkpoint at the end of training before it calls, short enough that a
# dead rank costs two minutes, not the group's 30.
DEFAULT_TIMEOUT_S = 120.0
# Steps per message: 2 MiB of records.  1M steps in 16 messages a rank.
DEFAULT_CHUNK_STEPS = 1 << 16
# Tags of traceml's messages (gloo matches by tag; NCCL by order): a base,
# the call number (mod 256) and the message's number in the call.
_TAG_BASE = 0x54000000
_MAX_MESSAGES = 0x10000
_HEADER, _FACTS, _FIRST_CHUNK = 0, 1, 2
# Works abandoned after a timeout keep their buffers alive here: the
# backend may still write into (or read from) them.
_ABANDONED: list = []
_CALLS = [0]


def gather(stall_threshold_s: Optional[float] = None, *, source: Union[None, str, int] = None,
           recorder: Any = None, group: Any = None,
           timeout_s: float = DEFAULT_TIMEOUT_S,
           chunk_steps: int = DEFAULT_CHUNK_STEPS) -> Optional[Report]:
    """Gather every rank's recorded steps to rank 0 of ``group`` and report
    the job; call it on every rank of the group (it is collective).

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
        group: the torch.distributed process group (default: the default
            group).  gloo sends CPU tensors; NCCL sends tensors on
            ``torch.cuda.current_device()`` (set it to the rank's GPU).
        timeout_s: seconds rank 0 waits for all the ranks' first messages,
            and any rank waits for each later message, before it reports
            that rank missing (rank 0) or gives up (the others, with a
            RuntimeWarning).  Default ``DEFAULT_TIMEOUT_S`` (120 s).
        chunk_steps: steps per message (default 65536: 2 MiB); raised when
            a run would need more than 65534 messages.

    Returns:
        On rank 0 of the group, the job's :class:`traceml.Report` (see
        :func:`combine`: the top level is the largest input wait across
        ranks per step, ``to_dict()["ranks"]`` the per-rank verdicts,
        straggler and echo); on every other rank None.  Without an
        initialised process group, or in a group of one, the local report
        (as ``traceml.report()``, with no ``ranks`` key).

    Raises:
        TypeError, ValueError: a bad stall_threshold_s or source (as
            traceml.report), timeout_s not a positive finite number,
            chunk_steps not a positive int.
        ImportError: torch is not installed and ranks were asked for.
    """
    timeout_s = _check_timeout(timeout_s)
    if isinstance(chunk_steps, bool) or not isinstance(chunk_steps, int) or chunk_steps < 1:
        raise ValueError(f"gather(): chunk_steps must be a positive int, got {chunk_steps!r}")
    rec = recorder if recorder is not None else _core.default_recorder()
    local = rec.report(stall_threshold_s, source=source)
    dist = _dist()
    if dist is None or not dist.is_initialized() or dist.get_world_size(group) <= 1:
        return local
    src = rec.sources.by_name.get(local.summary["source"])
    facts = local_facts(local, src)
    size = dist.get_world_size(group)
    me = dist.get_rank(group)
    peers = [_global_rank(dist, group, i) for i in range(size)]
    device = _device(dist, group)
    call = _CALLS[0] % 256
    _CALLS[0] += 1
    steps = np.ascontiguousarray(local.steps)
    if me != 0:
        _send(dist, group, peers[0], steps, facts, call, timeout_s, chunk_steps, device)
        return None
    records, gathered, missing = _receive(dist, group, peers, steps, facts, call, timeout_s,
                                          chunk_steps, device)
    return combine(records, gathered, world_size=size, missing=missing,
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
    """torch.distributed, or None where it is not available."""
    try:
        import torch.distributed as dist
    except ImportError as exc:
        raise ImportError("traceml: ranks='all' needs torch (torch.distributed)") from exc
    return dist if dist.is_available() else None


def _global_rank(dist, group, group_rank: int) -> int:
    if group is None:
        return group_rank
    return dist.get_global_rank(group, group_rank)


def _device(dist, group):
    """Where tensors must be for the group's backend: CUDA for NCCL, else CPU."""
    import torch

    backend = str(dist.get_backend(group)).lower()
    if "nccl" in backend and "gloo" not in backend:
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _tag(call: int, message: int) -> int:
    return _TAG_BASE + call * _MAX_MESSAGES + message


def _chunk(n_max: int, chunk_steps: int) -> int:
    """Steps per message, so that no run needs more than the tags allow."""
    return max(chunk_steps, -(-n_max // (_MAX_MESSAGES - _FIRST_CHUNK)))


def _tensor(a: np.ndarray, device):
    """``a`` (contiguous) as a uint8 tensor sharing its memory on the CPU,
    or a copy on ``device``."""
    import torch

    with warnings.catch_warnings():
        # A read-only view (the store's snapshot_view): sent, never written.
        warnings.simplefilter("ignore", UserWarning)
        t = torch.from_numpy(np.ascontiguousarray(a).reshape(-1).view(np.uint8))
    return t if device.type == "cpu" else t.to(device)


def _wait(work, seconds: float) -> None:
    work.wait(timeout=datetime.timedelta(seconds=max(seconds, 1e-3)))


def _send(dist, group, dst: int, steps: np.ndarray, facts: dict, call: int,
          timeout_s: float, chunk_steps: int, device) -> None:
    """A rank's side: header, facts, chunks; gives up with a
    RuntimeWarning when rank 0 takes more than timeout_s for a message."""
    import torch

    blob = np.frombuffer(pickle.dumps(facts, protocol=pickle.HIGHEST_PROTOCOL), np.uint8)
    n = len(steps)
    header = torch.tensor([n, len(blob), chunk_steps], dtype=torch.int64, device=device)
    chunk = _chunk(n, chunk_steps)
    out = [(header, _HEADER), (_tensor(blob, device), _FACTS)]
    out += [(_tensor(steps[a:a + chunk], device), _FIRST_CHUNK + k)
            for k, a in enumerate(range(0, n, chunk))]
    works = [(dist.isend(t, dst, group=group, tag=_tag(call, m)), t) for t, m in out]
    for i, (work, _) in enumerate(works):
        try:
            _wait(work, timeout_s)
        except RuntimeError as exc:
            _ABANDONED.extend(works[i:])
            warnings.warn(f"traceml.gather(): rank 0 did not take this rank's records "
                          f"within {timeout_s:g} s ({str(exc).splitlines()[0][:200]}); "
                          "this rank is missing from the report", RuntimeWarning,
                          stacklevel=3)
            return


def _receive(dist, group, peers: list, steps: np.ndarray, facts: dict, call: int,
             timeout_s: float, chunk_steps: int, device):
    """Rank 0's side: ({rank: records}, {rank: facts}, {rank: why missing})."""
    import torch

    size = len(peers)
    deadline = time.monotonic() + timeout_s
    headers = {}
    for r in range(1, size):
        t = torch.zeros(3, dtype=torch.int64, device=device)
        headers[r] = (dist.irecv(t, peers[r], group=group, tag=_tag(call, _HEADER)), t)
    missing: dict = {}
    sizes = {}
    for r, (work, t) in headers.items():
        try:
            _wait(work, deadline - time.monotonic())
            sizes[r] = tuple(int(x) for x in t.cpu().tolist())
        except RuntimeError:
            _ABANDONED.append((work, t))
            missing[r] = wording.rank_missing_reason("absent", timeout_s=timeout_s)
    records = {0: steps}
    gathered = {0: facts}
    posted = {}
    for r, (n, nbytes, their_chunk) in sizes.items():
        dest = np.empty(n, dtype=_core.RECORD_DTYPE)
        blob = np.empty(nbytes, dtype=np.uint8)
        chunk = _chunk(n, their_chunk)
        parts = [(blob, _FACTS)] + [(dest[a:a + chunk], _FIRST_CHUNK + k)
                                    for k, a in enumerate(range(0, n, chunk))]
        works = []
        for arr, m in parts:
            t = (torch.from_numpy(arr.reshape(-1).view(np.uint8)) if device.type == "cpu"
                 else torch.empty(arr.nbytes, dtype=torch.uint8, device=device))
            works.append((dist.irecv(t, peers[r], group=group, tag=_tag(call, m)), t, arr))
        posted[r] = (dest, blob, works, chunk)
    for r, (dest, blob, works, chunk) in posted.items():
        done = 0  # messages received: the facts, then the chunks
        try:
            for work, t, arr in works:
                _wait(work, timeout_s)
                if device.type != "cpu":
                    arr.reshape(-1).view(np.uint8)[:] = t.cpu().numpy()
                done += 1
        except RuntimeError:
            _ABANDONED.extend(works)
            got = min(max(done - 1, 0) * chunk, len(dest))
            missing[r] = wording.rank_missing_reason("stopped", timeout_s=timeout_s,
                                                      got=got, of=len(dest))
            continue
        records[r] = dest
        gathered[r] = pickle.loads(blob.tobytes())
    return records, gathered, missing


# --- what each rank sends besides its records -------------------------------------

# The keys of a rank's own report kept for the job's report.
_LOCAL_KEYS = ("source", "steps", "steady_steps", "epochs", "wall_s", "input_share",
               "diagnosis", "diagnosis_rule", "shape", "dropped_steps", "next")


def local_facts(rep: Report, src: Any = None) -> dict:
    """What a rank sends rank 0 besides its records: its host and pid, its
    source's loader facts (``name``, ``kind``, ``loader``, ``epochs``,
    ``epoch_facts``, None for a source it does not know), its report's
    verdicts (``summary``: source, steps, diagnosis, shape, input share,
    wait/compute/step statistics, stalls count/threshold/matter, temporal,
    cadence, headline, next steps) and the stall and epoch-start step
    indices (int64 arrays).  Plain data: picklable, a few hundred bytes
    plus 8 bytes a stall."""
    s = rep.summary
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
    label = wording.ranks_source_name(name, ranks)
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
        :func:`traceml.policy.stragglers` held_steps, held_share,
        unique_wait_s, unique_share, cost_share, straggler),
        ``held_by`` (per aligned step the rank that held the largest wait,
        None where no rank has the step), ``max_wait`` (statistics of the
        per-step largest wait and the job's unique wait),
        ``stragglers`` (ranks), ``straggler_rule``, ``echo`` ([{straggler,
        rank, ...policy.echo}]), ``echo_rule`` and ``next`` (sentences).
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
    waits = [a["fetch_done_ns"] - a["begin_ns"] for a in recs]
    steps_ns = [a["end_ns"] - a["begin_ns"] for a in recs]
    top, holder, second = policy.max_across_ranks(waits)
    step_top, _, _ = policy.max_across_ranks(steps_ns)
    n = len(top)
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
    sid = 1
    syn["source"] = sid
    src = _source_of(facts[ranks[0]], sid, len(ranks))
    info = {"dropped_steps": sum(int(facts[r]["summary"].get("dropped_steps") or 0)
                                 for r in ranks),
            "out_of_memory": False, "misuse": {}, "probe_step_open": False}
    rep = _build(syn, info, sid, stall_threshold_s, sources={sid: src})
    steady = {r: ~_mask(len(a), facts[r]["epoch_start_steps"]) for r, a in zip(ranks, recs)}
    job_step = float(np.sum(step_top[_steady_all(steady, ranks, n)], dtype=np.float64))
    matters = {r: policy.input_matters(facts[r]["summary"]) for r in ranks}
    held = policy.stragglers(top, holder, second, job_step, ranks, matters)
    per_rank = [_rank_entry(r, facts[r], h, matters[r]) for r, h in zip(ranks, held)]
    stragglers = [h["rank"] for h in held if h["straggler"]]
    echoes = []
    for s in stragglers:
        i = ranks.index(s)
        stall = _mask(len(recs[i]), facts[s]["stall_steps"])
        for j, r in enumerate(ranks):
            if r == s:
                continue
            e = policy.echo(stall, waits[i], steady[s],
                            recs[j]["end_ns"] - recs[j]["fetch_done_ns"], steady[r])
            echoes.append({"straggler": s, "rank": r, **(e or {"echo": None})})
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
        "straggler_rule": wording.straggler_rule(),
        "echo": echoes,
        "echo_rule": wording.echo_rule(),
    }
    block["next"] = wording.ranks_next_steps(block)
    rep.summary["ranks"] = block
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
        "input_share": s.get("input_share"),
        "shape": s.get("shape"),
        "temporal": tmp.get("label"),
        "period": tmp.get("period") if tmp.get("label") == policy.PERIODIC else None,
        "stalls": (s.get("stalls") or {}).get("count"),
        "stall_threshold_s": (s.get("stalls") or {}).get("threshold_s"),
        "input_wait_median_s": (s.get("input_wait_s") or {}).get("median"),
        "input_wait_total_s": (s.get("input_wait_s") or {}).get("total"),
        "compute_median_s": (s.get("compute_s") or {}).get("median"),
        "step_median_s": (s.get("step_s") or {}).get("median"),
        "loader": s.get("loader"),
        "next": list(s.get("next") or []),
        "input_matters": bool(matters),
        **{k: v for k, v in held.items() if k != "rank"},
    }
