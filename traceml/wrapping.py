"""traceml.wrap(): time every fetch of an iterable, one epoch per iter().

Holds the wrapper (:class:`Wrapped`), a recorder's sources
(:class:`SourceRegistry`), what is known of a DataLoader at each epoch's
start, and the sampler's settings (:func:`configure`).  The wrapper is thin
Python; each iter() of it returns the C iterator ``traceml._core.WrapIter``,
which stamps the clock around the inner ``__next__`` and writes one record
per step into its recorder's store.  Never reduces or reports.
"""

from __future__ import annotations

import collections.abc
import functools
import os
import sys
import threading
import time
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

try:
    # Imported with traceml, not at the first report: a module imported
    # for the first time while another thread forks DataLoader workers
    # stays locked in them (tests/integration/test_fork_safe_imports.py).
    import threadpoolctl
except ImportError:     # a dependency; without it the report reads no thread pools
    threadpoolctl = None

from . import _core, stacks, torch_private, worker_timing
from .findings import report_notes
from . import gpu as gpu_events
from . import liveline as live_line

# DataLoader attributes the report shows.  in_order exists from torch 2.6;
# prefetch_factor is None when num_workers == 0.  Absent fields read None.
LOADER_FIELDS = (
    "num_workers",
    "batch_size",
    "prefetch_factor",
    "persistent_workers",
    "pin_memory",
    "in_order",
)


@dataclass
class Source:
    """One wrapped iterable: its id in the store, its name, and what was
    known of it at each epoch's start (``epoch_facts[e]``: loader settings,
    worker PIDs, start method, torch version, usable CPUs).  ``reset()``
    keeps only the latest epoch's facts, and may release the source (see
    :class:`SourceRegistry`)."""

    id: int
    name: str
    kind: str
    loader: Optional[dict] = None
    epochs: int = 0
    epoch_facts: dict = field(default_factory=dict)
    # Per-batch times measured in its DataLoader workers (worker_timing).
    timing: Any = field(default_factory=lambda: worker_timing.Timing())
    # Each call of its DataLoader's sampler in this process (wall and
    # thread CPU, worker_timing.time_sampler): its log's item records.
    sampler: Any = field(default_factory=lambda: worker_timing.Timing())
    named: bool = False  # named by the user: kept for the recorder's life
    # A generator, not a DataLoader, whose items were sampled as they were
    # made in this process (stacks.MAIN.begins_for_generator).
    main_sampled: bool = False
    _lease: Optional[weakref.ref] = field(default=None, repr=False, compare=False)

    def lease(self) -> "_Lease":
        """A token that keeps this source in use while it is held."""
        held = self._lease() if self._lease is not None else None
        if held is None:
            held = _Lease()
            self._lease = weakref.ref(held)
        return held

    def in_use(self) -> bool:
        """Whether a wrapper or an iterator of this source is alive."""
        return self._lease is not None and self._lease() is not None

    def loader_of(self, epoch: int) -> Optional[dict]:
        """The DataLoader settings of an epoch (None: not a DataLoader or
        not known)."""
        return (self.epoch_facts.get(int(epoch)) or {}).get("loader")


def configure(
    *,
    sampler: Optional[bool] = None,
    sampler_period_s: Optional[float] = None,
    stuck_after_s: Optional[float] = None,
    sampler_capacity: Optional[int] = None,
    memory_period_s: Optional[float] = None,
) -> dict:
    """Set how the /proc sampler runs; returns the settings now in force.

    Args:
        sampler: sample the main process and DataLoader workers while a
            wrapped loop runs (default True).  Off: timing only.
        sampler_period_s: seconds between readings (default 0.02; 0.001
            to 3600).  Each reading is a few pread() calls per process; at
            20 ms the thread stays under 1% of one CPU (benchmarks/).
        stuck_after_s: a fetch waiting longer than this is recorded as a
            stuck loader (default 30 s; 0 turns the watch off; at most 1e7).
        sampler_capacity: readings kept in the ring, shared by every
            watched process (default 131072: with a main process and 4
            workers at 20 ms, the last ~9 minutes; 16 to 2**20, 120 bytes
            each, so at most 120 MiB).  Readings the ring drops are counted
            (``sampler_info()["overwritten"]``) and the report says so.
        memory_period_s: seconds between readings of each process's PSS
            and unshared memory (``/proc/PID/smaps_rollup``; default 10;
            0 turns them off; at most 3600).  The kernel walks the page
            tables for it: about 6.6 ms for a process that imported torch
            (benchmarks/README.md), so at 10 s five processes cost 0.3% of
            one CPU.  RSS is read on every reading regardless.

    Raises:
        TypeError: a setting of the wrong type.
        ValueError: a setting out of range; the message names it.
    """
    import math
    import numbers

    new = _core._sampler_settings()
    if sampler is not None:
        if not isinstance(sampler, bool):
            raise TypeError(f"configure(): sampler must be a bool, got {type(sampler).__name__}")
        new["sampler"] = sampler
    # Upper bounds keep the nanosecond and ring sizes well inside C's types.
    for name, value, low, high in (("sampler_period_s", sampler_period_s, 0.001, 3600.0),
                                   ("stuck_after_s", stuck_after_s, 0.0, 1e7),
                                   ("memory_period_s", memory_period_s, 0.0, 3600.0)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"configure(): {name} must be a number of seconds, "
                            f"got {type(value).__name__}")
        if not math.isfinite(value) or not low <= value <= high:
            raise ValueError(f"configure(): {name} must be between {low:g} and {high:g} "
                             f"seconds, got {value!r}")
        if value > 0 and round(value * 1e9) == 0:
            # Held in whole nanoseconds: a positive value that rounds to 0
            # would switch the stuck watch off instead of arming it.
            raise ValueError(f"configure(): {name} must be 0 or at least 1 ns, "
                             f"got {value!r}")
        new[name] = float(value)
    if sampler_capacity is not None:
        if isinstance(sampler_capacity, bool) or not isinstance(sampler_capacity, int):
            raise TypeError("configure(): sampler_capacity must be an int")
        if not 16 <= sampler_capacity <= _core.SAMPLER_RING_MAX:
            raise ValueError("configure(): sampler_capacity must be between 16 and "
                             f"{_core.SAMPLER_RING_MAX} readings, got {sampler_capacity}")
        new["sampler_capacity"] = sampler_capacity
    _core._sampler_config(int(round(new["sampler_period_s"] * 1e9)),
                          int(round(new["stuck_after_s"] * 1e9)),
                          new["sampler_capacity"], new["sampler"],
                          int(round(new["memory_period_s"] * 1e9)))
    return _core._sampler_settings()


# Set while Wrapped.__iter__ calls iter() of what it wraps, in that thread:
# the launcher's DataLoader.__iter__ (traceml.launch) then gives torch's own
# iterator, so that a loader the script wraps itself is timed once.
_iterating = threading.local()


def wrapping_now() -> bool:
    """Whether this thread is inside a Wrapped's call of iter() on what it
    wraps (see ``_iterating``)."""
    return getattr(_iterating, "depth", 0) > 0


def _is_dataloader(obj: Any) -> bool:
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return isinstance(obj, torch.utils.data.DataLoader)
    except AttributeError:
        return False


def _is_dataloader_iterator(obj: Any) -> bool:
    """True for what iter(DataLoader) returns
    (torch_private.is_loader_iterator)."""
    return torch_private.is_loader_iterator(obj)


def loader_facts(obj: Any) -> Optional[dict]:
    """The DataLoader settings named in LOADER_FIELDS and ``shuffle``
    (:func:`_shuffling`), or None if obj is not a torch DataLoader.
    Fields the installed torch lacks are None.

    A framework's loader wrapper (:func:`torch_loader`) gives the settings
    of the torch DataLoader inside it, ``batch_size`` from its batch
    sampler when the loader has none (accelerate shards batches with a
    batch sampler), and ``wrapper``: the wrapper's package and class."""
    inner = torch_loader(obj)
    if inner is None or inner is obj:
        if not _is_dataloader(obj):
            return None
        return _shuffling(_pinning({name: getattr(obj, name, None) for name in LOADER_FIELDS}),
                          obj)
    facts = _shuffling(_pinning({name: getattr(inner, name, None) for name in LOADER_FIELDS}),
                       inner)
    if facts["batch_size"] is None:
        size = getattr(getattr(inner, "batch_sampler", None), "batch_size", None)
        if isinstance(size, int) and not isinstance(size, bool):
            facts["batch_size"] = size
    facts["wrapper"] = _wrapper_name(obj)
    return facts


def _shuffling(facts: dict, loader: Any) -> dict:
    """``facts`` with ``shuffle``: whether the loader draws its indices
    through a ``RandomSampler`` (what ``shuffle=True`` builds; the public
    ``sampler`` attribute), so that the same index goes to another worker
    each epoch; None where torch's sampler type is not known."""
    random = _torch_data("RandomSampler")
    facts["shuffle"] = (None if random is None
                        else isinstance(getattr(loader, "sampler", None), random))
    return facts


def _note_raised(known: dict, exc: BaseException, delivered: int, waited_ns: int) -> None:
    """The WrapIter's on_raise: keep in the epoch's facts the latest
    exception a fetch raised (``raised``: its type, message and worker,
    torch_private.raised, ``fetch``, the batches delivered before it, and
    ``wait_s``, how long that fetch had waited, s: Ctrl-C in a fetch that
    hangs ends the loop there), the first one (``raised_first``) and how
    many (``raised_count``): a loop that catches them and goes on raises
    more than one."""
    got = {**torch_private.raised(exc), "fetch": int(delivered),
           "wait_s": max(int(waited_ns), 0) * 1e-9}
    if isinstance(exc, KeyboardInterrupt):
        # The user stopping the loop: kept apart, and the report's bottom
        # line only where that fetch had waited longer than any delivered
        # one (evidence.raised).
        known["interrupted"] = got
        return
    known["raised"] = got
    known.setdefault("raised_first", known["raised"])
    known["raised_count"] = known.get("raised_count", 0) + 1


def _torch_data(name: str) -> Any:
    """``torch.utils.data.<name>`` of a torch already imported, else None
    (traceml never imports torch itself)."""
    torch = sys.modules.get("torch")
    return getattr(getattr(getattr(torch, "utils", None), "data", None), name, None)


def _pinning(facts: dict) -> dict:
    """``facts`` with ``pin_memory`` as the loader's iterator uses it:
    torch pins only where an accelerator is available, and warns and goes
    on unpinned otherwise (a CPU-only run showed pin_memory=True).  Where
    it was asked for and is not used, ``pin_memory_asked`` is True, so the
    report can say why the setting reads False."""
    if facts.get("pin_memory"):
        torch = sys.modules.get("torch")
        acc = getattr(torch, "accelerator", None)
        available = (acc.is_available() if acc is not None and hasattr(acc, "is_available")
                     else torch.cuda.is_available())
        if not available:
            facts["pin_memory"] = False
            facts["pin_memory_asked"] = True
    return facts


def _wrapper_name(obj: Any) -> str:
    """``package.Class`` of a loader wrapper (its real type: accelerate's
    adapters answer ``__class__`` with the wrapped DataLoader's class)."""
    kind = type(obj)
    return f"{(kind.__module__ or '').split('.')[0]}.{kind.__name__}".lstrip(".")


def torch_loader(obj: Any) -> Optional[Any]:
    """The torch DataLoader that ``obj`` iterates: obj itself for a torch
    DataLoader (or a subclass of it), the one inside a framework's loader
    wrapper, else None.

    Wrappers recognised (each by a public attribute, checked before use):
    accelerate's ``DataLoaderShard``, ``DataLoaderDispatcher`` and
    ``SkipDataLoader`` keep the DataLoader as ``base_dataloader`` (they are
    not DataLoader subclasses; a ``__class__`` property makes
    ``isinstance(obj, DataLoader)`` true); Lightning's ``CombinedLoader``
    keeps its iterables as ``flattened`` (one DataLoader: that one; several:
    None, since one wrap cannot tell whose fetch each step waited for)."""
    loader_type = _torch_data("DataLoader")
    if not isinstance(loader_type, type):
        return None
    if isinstance(type(obj), type) and issubclass(type(obj), loader_type):
        return obj
    try:
        base = getattr(obj, "base_dataloader", None)
        flat = getattr(obj, "flattened", None) if base is None else None
    except Exception:  # noqa: BLE001 - a wrapper's __getattr__ may raise anything
        return None
    if isinstance(type(base), type) and issubclass(type(base), loader_type):
        return base
    if isinstance(flat, list) and len(flat) == 1 and isinstance(flat[0], loader_type):
        return flat[0]
    return None


def hidden_facts(loader: Any, inner: Any, facts: Optional[dict]) -> Optional[str]:
    """Why the worker PIDs, delivery order and worker batch timing of a
    DataLoader epoch cannot be read (None: they can, or it has no workers):
    the first two come from torch's own iterator (``_workers``,
    ``_task_info``), the third from a hook set on the loader while
    ``iter()`` starts the workers.  A wrapper or a DataLoader subclass may
    make torch's iterator inside a generator of its own, at the first fetch
    (accelerate's DataLoaderShard and DataLoaderDispatcher do): out of
    reach when the epoch starts."""
    if facts is None or not (facts.get("num_workers") or 0) > 0:
        return None
    if _is_dataloader_iterator(inner):
        return None
    return report_notes.hidden_loader_facts(facts.get("wrapper") or type(loader).__name__,
                                       type(inner).__name__)


def usable_cpus() -> Optional[int]:
    """CPUs this process may run on (os.sched_getaffinity), else cpu_count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def worker_pids(inner: Any) -> Optional[list[int]]:
    """PIDs of a multiprocessing DataLoader iterator's workers, by worker
    id (torch keeps them as ``_workers``, a private list of Process
    objects), or None where that is not exposed."""
    workers = torch_private.iterator_workers(inner)
    if workers is None:
        return None
    pids = [getattr(w, "pid", None) for w in workers]
    if not all(isinstance(p, int) for p in pids):
        return None
    return pids


class WorkerExits:
    """How each worker process of one DataLoader epoch ended, read from the
    parent's side (torch keeps them as ``_workers``, a private list of
    multiprocessing.Process objects, by worker id).

    A dead worker is looked at with ``os.waitid(..., WNOWAIT)``, which
    leaves it for torch to reap (torch's SIGCHLD check reads it the same
    way); one already reaped gives the exit code its Process object kept.
    Each Process object is let go once its code is known."""

    __slots__ = ("_procs", "_codes")

    def __init__(self, procs: list) -> None:
        self._procs: list = list(procs)
        self._codes: list[Optional[int]] = [None] * len(self._procs)

    def codes(self) -> list[Optional[int]]:
        """Exit code of each worker, by worker id, as multiprocessing gives
        it: 0 a clean exit, > 0 the process's exit status, < 0 minus the
        signal that ended it; None while it runs or where unknown."""
        for i, proc in enumerate(self._procs):
            if proc is None:
                continue
            code = _exit_code(proc)
            if code is not None:
                self._codes[i] = code
                self._procs[i] = None
        return list(self._codes)


def _exit_code(proc: Any) -> Optional[int]:
    pid = getattr(proc, "pid", None)
    if not isinstance(pid, int):
        return None
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        info = False  # reaped already (by torch, through this Process object)
    except (AttributeError, OSError):
        return None  # no waitid on this platform
    if info is None:
        return None  # still running
    if info is not False:
        if info.si_pid != pid:
            return None
        return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
    try:
        code = proc.exitcode
    except (ValueError, AssertionError, OSError):
        return None
    return code if isinstance(code, int) else None


def epoch_facts(loader: Any, inner: Any, facts: Optional[dict]) -> dict:
    """What is known of an epoch at its start."""
    torch = sys.modules.get("torch")
    out = {
        "loader": facts,
        "worker_pids": worker_pids(inner),
        "start_method": None,
        "torch_version": getattr(torch, "__version__", None) if facts else None,
        "usable_cpus": usable_cpus(),
        "watched": False,  # set once the sampler has taken the epoch
        "worker_exits": None,
        "watch_error": None,  # why the sampler could not watch the epoch
    }
    workers = torch_private.iterator_workers(inner)
    if out["worker_pids"] is not None and workers is not None:
        out["worker_exits"] = WorkerExits(workers)
    if facts is not None and (facts.get("num_workers") or 0) > 0:
        out["start_method"] = worker_timing.start_method_of(loader)
    if facts is not None:
        # Where the sampler's part of the wait runs (its __iter__), and the
        # collate_fn (a public attribute), whose stack samples tell a slow
        # collate from slow samples at num_workers=0.
        hooked = torch_loader(loader)
        out["sampler_code"] = sampler_code(hooked) if hooked is not None else None
        out["collate_code"] = code_place(getattr(hooked, "collate_fn", None))
    return out


def thread_pools() -> Optional[list[dict]]:
    """The native thread pools loaded in this process that a DataLoader
    worker runs too (threadpoolctl.threadpool_info): [{api ("blas",
    "openmp"), library ("openblas", "mkl", "openmp", ...), threads}], in
    threadpoolctl's order, leaving out torch's own libraries (a DataLoader
    worker sets torch's pools to one thread; NumPy's and SciPy's BLAS keep
    theirs, in forked and spawned workers alike).  None where threadpoolctl
    is not installed or cannot read them."""
    if threadpoolctl is None:
        return None
    try:
        info = threadpoolctl.threadpool_info()
    except Exception:  # noqa: BLE001 - a library it cannot introspect: no reading, no report lost
        return None
    torch_dir = os.sep + "torch" + os.sep
    return [{"api": p.get("user_api"), "library": p.get("internal_api"),
             "threads": int(p.get("num_threads") or 0)}
            for p in info if torch_dir not in (p.get("filepath") or "")]


def sampler_code(loader: Any) -> Optional[dict]:
    """Where the indices a DataLoader draws in the main process come from:
    the batch_sampler's ``__iter__``, or, for torch's own BatchSampler,
    that of the sampler it wraps (public attributes; torch's classes are
    named too), as :func:`code_place` gives it; None where neither has
    Python code."""
    batch_sampler = getattr(loader, "batch_sampler", None)
    plain = _torch_data("BatchSampler")
    chosen = (getattr(loader, "sampler", None)
              if batch_sampler is None or (plain is not None and type(batch_sampler) is plain)
              else batch_sampler)
    return code_place(getattr(type(chosen), "__iter__", None)) if chosen is not None else None


def code_place(fn: Any) -> Optional[dict]:
    """{function (qualified name), file, line} of a Python function, of a
    callable object's ``__call__`` or of a functools.partial's function;
    None for anything else (a C function)."""
    fn = getattr(fn, "func", fn)                  # functools.partial
    if callable(fn) and not hasattr(fn, "__code__"):
        fn = type(fn).__call__                    # a callable object
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    return {"function": getattr(fn, "__qualname__", code.co_name), "file": code.co_filename,
            "line": code.co_firstlineno}


class _Lease:
    """What a :class:`Wrapped` and each of its iterators hold of their
    source: while one is alive, the source is in use and is never released
    (the registry keeps only a weak reference to it)."""

    __slots__ = ("__weakref__",)


class SourceRegistry:
    """A recorder's sources: id -> :class:`Source` and name -> Source.

    Source 0 is the hand-placed probes; wrapped iterables get 1, 2, ...
    up to 65535 (the store's source field is a uint16).  Wrapping the same
    object again without a name continues its source: a weak reference
    guards against a recycled id(); objects that take no weak reference
    (list, tuple, range) get a new source each time unless named.

    An unnamed source is released (dropped from ``by_id`` and ``by_name``,
    its id free for a later wrap) once its object is gone (or, for an
    object that takes no weak reference, once its wrapper is), no wrapper
    or iterator of it is alive, and the store holds none of its steps nor
    the sampler a stuck fetch of it: at each ``reset()``, and when a wrap
    finds the ids used up.  Names are not reused ("list#7" stays retired).
    A named source lasts as long as the recorder, so that its name goes on
    continuing it.  When all 65535 ids hold steps or live wrappers, a new
    wrap iterates untimed, with a RuntimeWarning; ``reset()`` frees them.

    Safe against re-entry from signal handlers: a ``reset()`` that lands
    while the registry is busy (inside a reset or a wrap) defers its
    pruning to the end of that call; the store itself is cleared at once.
    """

    MAX_SOURCES = 65535  # the store's source field is uint16

    def __init__(self, recorded: Optional[Callable[[], set]] = None) -> None:
        """``recorded()``: the ids of the sources with steps in the store or
        a stuck fetch in the sampler (None: ids are only recycled after
        a reset, which empties the store)."""
        probes = Source(0, "probes", "probes", named=True)
        self.by_id: dict[int, Source] = {0: probes}
        self.by_name: dict[str, Source] = {"probes": probes}
        self._name_counts: dict[str, int] = {}  # last "#n" suffix per type name
        self._by_object: dict[int, tuple[Any, Source]] = {}
        self._last_id = 0       # the highest id handed out
        self._free: list[int] = []  # ids of released sources, for reuse
        self._recorded = recorded
        self._busy = 0          # nesting of reset/wrap bookkeeping (signal handlers)
        self._prune_due = False  # a reset came while busy
        self.untimed = 0        # wraps made untimed: every id in use

    def for_iterable(self, iterable: Any,
                     name: Optional[str]) -> tuple[Optional[Source], Optional[_Lease]]:
        """The source ``iterable`` records under (a new one, or the one it
        or ``name`` already has) and a lease on it, taken before any reset
        can release it; (None, None) when every id is in use."""
        self._busy += 1
        try:
            src = self._for_iterable(iterable, name)
            return src, (src.lease() if src is not None else None)
        finally:
            self._leave()

    def _for_iterable(self, iterable: Any, name: Optional[str]) -> Optional[Source]:
        if name is not None:
            src = self.by_name.get(name)
            if src is not None:
                if src.id == 0:
                    raise ValueError("traceml.wrap(): name 'probes' is reserved for the probes")
                return src
        else:
            known = self._by_object.get(id(iterable))
            if known is not None:
                ref, src = known
                if ref() is iterable and self.by_id.get(src.id) is src:
                    return src
        sid = self._new_id()
        if sid is None:
            self.untimed += 1
            return None
        kind = type(iterable).__name__
        if name is None:
            n = self._name_counts.get(kind, 0) + 1
            name = kind if n == 1 else f"{kind}#{n}"
            while name in self.by_name:
                n += 1
                name = f"{kind}#{n}"
            self._name_counts[kind] = n
            src = Source(sid, name, kind)
            try:
                self._by_object[id(iterable)] = (weakref.ref(iterable), src)
            except TypeError:
                pass  # no weak reference: an id() could be recycled, so no reuse
        else:
            src = Source(sid, name, kind, named=True)
        self.by_id[sid] = src
        self.by_name[src.name] = src
        return src

    def _new_id(self) -> Optional[int]:
        if not self._free and self._last_id >= self.MAX_SOURCES and self._recorded is not None:
            self._release(self._recorded())
        if self._free:
            return self._free.pop()
        if self._last_id < self.MAX_SOURCES:
            self._last_id += 1
            return self._last_id
        return None

    def prune_after_reset(self) -> None:
        """After a reset: each source keeps only its latest epoch's facts (a
        loop may still be running in it), and the sources that nothing uses
        are released (see the class).  Deferred to the end of the call in
        progress when the registry is busy (a signal handler's reset)."""
        self._prune_due = True
        # A loop, not recursion: resets that land meanwhile ask again.
        while self._prune_due and not self._busy:
            self._busy += 1
            try:
                self._prune_due = False
                self._prune()
            finally:
                self._busy -= 1

    def _prune(self) -> None:
        for src in list(self.by_id.values()):
            facts = src.epoch_facts
            if len(facts) > 1:
                last = max(facts)
                src.epoch_facts = {last: facts[last]}
            # A fetch that raised before the reset belongs to the recording
            # it discarded (in place: the epoch's iterator holds this dict).
            for kept in src.epoch_facts.values():
                for key in ("raised", "raised_first", "raised_count", "interrupted"):
                    kept.pop(key, None)
        self._release(self._recorded() if self._recorded is not None else set())

    def _leave(self) -> None:
        self._busy -= 1
        if self._prune_due and not self._busy:
            self.prune_after_reset()

    def _release(self, recorded: set) -> None:
        """Release the unnamed sources that nothing uses and that have no
        id in ``recorded``; forget the identities of objects that are gone."""
        alive = set()
        for key, (ref, src) in list(self._by_object.items()):
            if ref() is None:
                self._by_object.pop(key, None)
            else:
                alive.add(src.id)
        for sid, src in list(self.by_id.items()):
            if (src.named or sid in alive or sid in recorded or src.in_use()
                    or self.by_id.get(sid) is not src):
                continue
            del self.by_id[sid]
            if self.by_name.get(src.name) is src:
                del self.by_name[src.name]
            self._free.append(sid)


class Wrapped:
    """An iterable whose every iter() is one timed epoch.

    Made by :func:`traceml.wrap`.  ``len()`` is forwarded without starting
    an iteration (as tqdm does); other attributes are looked up on the
    wrapped object, so ``wrapped.dataset`` still works for a DataLoader.

    Attributes:
        iterable: the wrapped object.
        recorder: the :class:`traceml.Recorder` its steps go to.
        name: the name its steps are reported under (None: untimed).
        source: its source id in the recorder (int >= 1), or None when the
            wrap is untimed because all 65535 ids hold steps or live
            wrappers (a RuntimeWarning said so; see :func:`traceml.wrap`).
    """

    def __init__(self, iterable: Any, name: Optional[str], recorder: Any):
        self.iterable = iterable
        self.recorder = recorder
        # The lease holds the source in use: it is not released while this
        # wrapper lives.
        self._source, self._lease = recorder.sources.for_iterable(iterable, name)
        self._live = None  # a traceml.liveline.LiveLine, when asked for
        self._gpu = None   # a traceml.gpu.GpuTimeline, when cuda is on
        if self._source is None:
            warnings.warn(report_notes.untimed_wrap(recorder.sources.MAX_SOURCES),
                          RuntimeWarning, stacklevel=4)

    @property
    def name(self) -> Optional[str]:
        return self._source.name if self._source is not None else None

    @property
    def source(self) -> Optional[int]:
        return self._source.id if self._source is not None else None

    @property
    def epochs(self) -> int:
        """How many times this wrapper has been iterated."""
        return self._source.epochs if self._source is not None else 0

    def __iter__(self) -> Any:
        src = self._source
        if src is None:
            return iter(self.iterable)
        # The first step's clock starts before iter(): a DataLoader starts
        # its worker processes there, and that start-up belongs to the
        # epoch's first fetch.
        begin_ns = self.recorder.clock_ns()
        epoch = src.epochs
        facts = loader_facts(self.iterable)
        # A framework's wrapper starts the workers of the DataLoader inside
        # it: the worker hook goes on that one.
        hooked = torch_loader(self.iterable) if facts is not None else None
        why, user_fn = (worker_timing.before_iter(hooked, src.timing, epoch)
                        if hooked is not None else (worker_timing.NOT_A_LOADER, None))
        _iterating.depth = getattr(_iterating, "depth", 0) + 1
        # iter() itself, apart from the rest of the epoch's start: with
        # workers it starts their processes and draws the first
        # num_workers x prefetch_factor index lists from the sampler (its
        # __iter__ runs here, in this thread).
        # The real clock, not the recorder's (a test clock's values are
        # the steps').
        iter_ns, iter_cpu_ns = time.perf_counter_ns(), time.thread_time_ns()
        try:
            inner = iter(self.iterable)
        finally:
            _iterating.depth -= 1
            if hooked is not None:
                worker_timing.after_iter(hooked, src.timing, why, user_fn)
        iter_ns, iter_cpu_ns = (time.perf_counter_ns() - iter_ns,
                                time.thread_time_ns() - iter_cpu_ns)
        if hooked is not None:
            worker_timing.time_sampler(inner, src.sampler, epoch)
        if hooked is not None and not (getattr(hooked, "num_workers", 0) or 0):
            # num_workers=0: the batches are made in this process; its
            # stack is sampled while the epoch's iterator lives (only
            # samples inside fetches count).
            stacks.MAIN.epoch_begins(inner)
        elif hooked is None and facts is None and stacks.MAIN.begins_for_generator(inner):
            # Not a DataLoader: a generator makes each item in this
            # process, as num_workers=0 does; the stalled fetches' samples
            # name its code.
            src.main_sampled = True
        hidden = hidden_facts(self.iterable, inner, facts)
        if hidden is not None:
            facts["unread"] = hidden
            # Its workers start at the first fetch, after the hook was
            # taken off again.
            why = why or hidden
        src.epochs += 1
        src.loader = facts
        known = epoch_facts(self.iterable, inner, facts)
        known["worker_timing"] = why or "on"
        known["iter_s"], known["iter_cpu_s"] = iter_ns * 1e-9, iter_cpu_ns * 1e-9
        # The native pools the workers start with, read as they start (once
        # an epoch: a read per report grew ctypes' caches by tens of blocks
        # a round in test_leaks).
        known["thread_pools"] = (thread_pools() if hooked is not None
                                 and (getattr(hooked, "num_workers", 0) or 0) else None)
        # The loader's own (after_iter gave it back).
        known["worker_init_code"] = (code_place(getattr(hooked, "worker_init_fn", None))
                                     if hooked is not None else None)
        src.epoch_facts[epoch] = known
        # The sampler watches this loop's processes (main first, then worker
        # 0, 1, ...) while it runs, beside any other live loop's.
        watching = _core._sampler_settings()["sampler"]
        watch = [os.getpid(), *(known["worker_pids"] or [])] if watching else None
        # Delivery order is read from a multiprocessing DataLoader
        # iterator's private task table (rank -> (worker_id, ...)).
        track = torch_private.has_task_table(inner)
        if self._gpu is not None:
            self._gpu.new_epoch()
        it = _core.WrapIter(inner, self.recorder, src.id, epoch, begin_ns, track=track,
                            watch=watch, owner=self._lease, gpu=self._gpu,
                            on_raise=functools.partial(_note_raised, known))
        # Whether the sampler took this epoch's processes: without it the
        # readings of the time are other loops', not evidence about this one.
        known["watched"] = it.watching
        if watching and not it.watching:
            # Why not (a buffer or the thread could not be had), for the report.
            known["watch_error"] = (_core.sampler_info()["error"]
                                    or "the sampler could not take this loop")
        if self._live is not None:
            self._live.follow(it)
        return it

    @property
    def gpu(self) -> Optional[gpu_events.GpuTimeline]:
        """The CUDA-event timeline (``cuda=`` on), or None."""
        return self._gpu

    def input_ready(self) -> None:
        """With ``cuda=`` on: call right after the batch's host-to-device
        copy, so that this step's GPU-visible input wait includes the copy
        (:mod:`traceml.gpu`).  Without cuda, nothing."""
        if self._gpu is not None:
            self._gpu.input_ready()

    def __len__(self) -> int:
        return len(self.iterable)

    def __bool__(self) -> bool:
        try:
            return len(self.iterable) > 0
        except TypeError:
            return True

    def __getattr__(self, attr: str) -> Any:
        # Only reached for attributes Wrapped itself lacks.
        if attr.startswith("__") or attr in ("iterable", "recorder", "_source", "_lease",
                                             "_live", "_gpu"):
            raise AttributeError(attr)
        return getattr(self.iterable, attr)

    def __repr__(self) -> str:
        return f"traceml.wrap({self.iterable!r}, name={self.name!r})"


def wrap(iterable: Iterable, *, name: Optional[str] = None, live: Any = None,
         tensorboard: Any = None, tensorboard_every: int = 100, cuda: Any = False,
         cuda_ring: int = gpu_events.DEFAULT_RING) -> Wrapped:
    """Time every fetch from ``iterable`` into the default recorder
    (:meth:`traceml.Recorder.wrap` for another); each ``iter()`` is one
    epoch.

    ::

        for batch in traceml.wrap(loader):
            train_step(batch)
        print(traceml.report())

    Step i runs from the call that fetches batch i to the call that fetches
    batch i + 1 (or the end of the loop).  Input wait is the time inside the
    inner ``__next__``; compute is the rest of the step.  The first step of
    each epoch also holds ``iter(iterable)`` (DataLoader worker start-up)
    and is reported apart as ``epoch_start``.  Leaving the loop by
    exhaustion, ``break`` or an exception in the body closes the last step
    when the iterator is released; exceptions from the inner iterator
    propagate unchanged.

    Several wrapped iterables in one loop (``zip(wrap(a), wrap(b))``) each
    record their own steps under their own name: a step of ``a`` runs from
    one fetch of ``a`` to the next, so the time spent fetching ``b`` is
    compute from ``a``'s point of view.  ``report()`` shows the source with
    the most steps (the latest one where they ran one after another) and
    lists the others; ``report(source=name)`` picks one.

    Args:
        iterable: anything ``for`` accepts; a torch DataLoader is the main
            case (its settings are then shown in the report).
        name: the name to report the steps under.  Wrapping again under
            the same name, or wrapping the same object again without a
            name (objects that take weak references, such as a DataLoader),
            continues that source with its next epoch.  Default: the
            type name, made unique per object (``"DataLoader#2"``).
        live: show a line that updates while the loop runs (steps, input
            share, running median and p95 wait, waits past 4x the median;
            :mod:`traceml.liveline`): True (a notebook display in Jupyter or
            Colab, else one line on stderr), a tqdm bar (the line becomes
            its postfix), or a callable taking the line.  Updates come at
            most 4 times a second from a thread; the loop pays nothing per
            step.  Default None: off.
        tensorboard: a ``SummaryWriter`` (``torch.utils.tensorboard`` or
            ``tensorboardX``) to log the same numbers to, under
            ``traceml/``, every ``tensorboard_every`` steps (default 100)
            and at the end of each epoch.
        cuda: also measure the input wait the GPU saw (:mod:`traceml.gpu`):
            a CUDA event on the current stream at each step's begin and
            fetch done, read lazily, shown in the report's ``gpu`` block
            beside the host wait.  True (needs a CUDA device), ``"auto"``
            (on when ``torch.cuda.is_available()``, else off), False
            (default: off, nothing added per step), or an object with
            torch.cuda's ``Event`` and ``current_stream``.  Call
            ``wrapped.input_ready()`` (or ``traceml.input_ready()``) after
            the ``.to(device, non_blocking=True)`` copy to count the copy
            in the GPU-visible wait.  On a device NVML knows, the sampler
            also reads the GPU's utilisation (the ``gpu`` block's
            ``utilisation``: in input waits against the rest; see
            :mod:`traceml.gpu`).
        cuda_ring: with cuda on, the most steps whose events may be unread
            at once (default 1024, 2 to 2**20); past it a step is skipped
            (counted in the report), never waited for.

    The source of an unnamed wrap is released at the next ``reset()`` once
    its object is gone (for objects that take no weak reference, such as a
    list: once its wrapper and iterators are), so a loop that wraps a new
    loader each epoch holds no memory per wrap after a reset; its id is
    reused (ids are 16 bits).  A named source lasts as long as the
    recorder.  When all 65535 ids hold recorded steps or live wrappers,
    the wrap still iterates, untimed, with a RuntimeWarning: call
    ``reset()``, or name the wrap so that it continues one source.

    Returns:
        A :class:`Wrapped`: iterate it (once per epoch), ``len()`` it.

    Raises:
        TypeError: ``iterable`` is not iterable, ``name`` is not a str,
            ``live`` is none of the above, ``tensorboard`` has no
            ``add_scalar``, ``tensorboard_every`` or ``cuda_ring`` is not
            an int, or ``cuda`` is none of the above.
        RuntimeError: ``cuda=True`` and torch has no CUDA device.
        ValueError: ``name`` is ``"probes"`` (reserved), blank, or not
            printable (a newline, a control character).
    """
    return wrap_into(_core.default_recorder(), iterable, name, live, tensorboard,
                     tensorboard_every, cuda, cuda_ring)


def wrap_into(recorder: Any, iterable: Iterable, name: Optional[str], live: Any = None,
              tensorboard: Any = None, tensorboard_every: int = 100, cuda: Any = False,
              cuda_ring: int = gpu_events.DEFAULT_RING) -> Wrapped:
    """:func:`wrap` for ``recorder``: the argument checks, then the
    :class:`Wrapped`.  Called by :func:`wrap` and :meth:`Recorder.wrap`
    only, so that a warning points at their caller."""
    if not isinstance(iterable, collections.abc.Iterable) and not hasattr(
        type(iterable), "__getitem__"
    ):
        raise TypeError(
            "traceml.wrap(): iterable must be iterable (a DataLoader, list, "
            f"generator, ...), got {type(iterable).__name__}"
        )
    if name is not None and not isinstance(name, str):
        raise TypeError(
            f"traceml.wrap(): name must be a str or None, got {type(name).__name__}"
        )
    if name is not None and (not name.strip() or not name.isprintable()):
        # The name heads the report and keys report(source=...): an empty
        # or multi-line one would garble both.
        raise ValueError(
            "traceml.wrap(): name must be non-blank and printable (no newlines "
            f"or control characters), got {name!r}"
        )
    if isinstance(iterable, Wrapped) and iterable.recorder is recorder and name is None:
        # Wrapped again, unnamed, by its own recorder: every fetch would be
        # timed twice, the second under a source named 'Wrapped' (helper
        # 41C).  A named outer wrap, or another recorder's, is a nesting
        # asked for (a loop over a library's wrapped loader), and times both.
        warnings.warn(
            f"traceml.wrap() got an iterable it already wraps (as {iterable.name!r}): "
            "it is returned as it is, so each fetch is timed once",
            UserWarning, stacklevel=3)
        return iterable
    if _is_dataloader_iterator(iterable):
        warnings.warn(
            "traceml.wrap() got a DataLoader's iterator: wrap the DataLoader itself "
            "(traceml.wrap(loader)) so that the report has its settings, delivery "
            "order and worker evidence",
            UserWarning, stacklevel=3)
    live = live_line.check_live(live)
    live_line.check_tensorboard(tensorboard, tensorboard_every)
    backend = gpu_events.resolve(cuda, "traceml.wrap()")
    cuda_ring = gpu_events.check_ring(cuda_ring, "traceml.wrap()")
    wrapped = Wrapped(iterable, name, recorder)
    if backend is not None and wrapped.source is not None:
        wrapped._gpu = gpu_events.timeline_for(recorder, wrapped.source, backend, cuda_ring)
    if (live or tensorboard is not None) and wrapped.source is not None:
        wrapped._live = live_line.LiveLine(recorder, wrapped.source, wrapped.name, live,
                                           tensorboard, tensorboard_every)
    return wrapped
