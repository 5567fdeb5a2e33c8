"""GPU-visible input stalls: CUDA events at each step's begin and fetch done.

With asynchronous kernels the host can wait for a batch while the GPU is
still busy with the previous step's kernels; the host's input wait then
overstates what the GPU lost.  A :class:`GpuTimeline` puts a CUDA event
on the current stream at each step's begin (before the fetch) and at its
fetch done (when the batch is handed to the loop), and reads them later:

* **GPU-visible input wait** of step i: ``begin_i.elapsed_time(done_i)``.
  The GPU reaches ``begin_i`` once it has run everything queued before it
  (step i-1's kernels), and ``done_i`` right after unless it has to wait
  for the host to queue it.  So the reading is the time the GPU sat idle
  waiting for step i's batch: about 0 when the GPU was still busy with
  step i-1 when the batch arrived, the whole fetch when it was idle.
* **GPU step** of step i: ``begin_i.elapsed_time(begin_{i+1})``, the time
  between consecutive step begins as the GPU saw them.

What the host-to-device copy counts as: ``batch.to(device,
non_blocking=True)`` in the loop body comes after ``done_i``, so the copy
is in the GPU step, not in the GPU-visible wait: the wait then says how
long the GPU idled before the batch was in the host's hands.  Call
:func:`input_ready` (or ``Wrapped.input_ready()``, or the timeline's
:meth:`GpuTimeline.input_ready`) right after the copy to end the wait
there instead: the reading then runs to when the copy finished on the
stream (a pinned ``non_blocking`` copy is queued on the stream; a
blocking one has finished before the marker is queued), so it includes
the transfer as the GPU saw it.  A ``pin_memory=True`` DataLoader pins in
its own thread: the pinning is in the host wait only when the loop waits
for it, and never on the GPU's stream.

Events are read lazily: each step's begin asks the oldest unread events
``query()`` (never ``synchronize()`` inside the loop) and stores the
finished readings.  Events come from a ring of ``ring`` slots (three
reusable events each), so at most ``ring`` steps can be unread at once;
when the GPU runs so far behind that the ring is full, the step is not
recorded (no event, no block) and counted in ``skipped``; its reading is
missing.  A reading is also missing for the step before a skipped one
(its GPU step needs the next begin), for the last step of a loop left by
``break`` or of the probes (no later begin), and for steps the GPU had
not reached when the report was made (``pending``: call
``torch.cuda.synchronize()`` before ``report()`` to read them all).

Cost: nothing when off (the C probes and the wrap iterator test one
pointer); when on, a few Python calls into torch per step (two
``Event.record``, two ``current_stream()``, a ``query()`` or two), billed
to the step's compute, not to its input wait: the begin event is queued
before the step's clock is read.  If the event source raises, the
timeline turns itself off and the report says why (``error``).

**GPU utilisation** (NVML, where the NVIDIA driver's libnvidia-ml is
installed; no Python package needed): when a timeline starts on a device
that names its UUID (``torch.cuda.get_device_properties(i).uuid`` of the
current device, as NVML spells it: ``GPU-...``; CUDA's and NVML's device
indices differ under CUDA_VISIBLE_DEVICES, UUIDs do not), the C sampler
thread loads libnvidia-ml and reads the driver's own utilisation samples
(``nvmlDeviceGetSamples``) every :data:`NVML_PERIOD_S` while a wrapped
loop runs (see csrc/nvml.h).  Each sample is the percent of the driver's
sample window (1/6 s to 1 s, by product) during which a kernel ran, so an
input wait shorter than the window cannot show in it.  The report
compares the samples that fell in input waits with those in the rest of
the steps (:func:`traceml.evidence.gpu_utilisation`).  No library, a
missing symbol or an NVML error: the report says "unavailable" and why;
the timing is never touched.  The library is loaded and initialised once,
when the timeline starts (``wrap()``), with the GIL released.  One device
per process: a timeline on another device switches NVML to it and forgets
the first's readings.  A MIG instance reads "unavailable" (NVML names it
``MIG-...``, which torch's UUID does not tell apart, and gives no
utilisation samples for it).  The
probes' ``cuda_events()`` loop has no sampler watch, so its utilisation is
read only while a wrapped loop runs.

Any object with the small interface of ``torch.cuda`` can stand in for it
(``Event(enable_timing=True)`` with ``record(stream)``, ``query()`` and
``elapsed_time(other)`` in ms; ``current_stream()``): the tests drive a
clock-driven fake through it.
"""

from __future__ import annotations

import math
import sys
import threading
from typing import Any, Optional

import numpy as np

# Unread steps the ring holds by default (three CUDA events each, a few
# hundred bytes of driver state apiece).  A GPU rarely runs more than a
# few steps behind the host (a DataLoader's prefetch and the caching
# allocator bound it); 1024 leaves a wide margin.
DEFAULT_RING = 1024
MAX_RING = 1 << 20

_NO_SUCC, _UNDECIDED, _NEXT = -1, 0, 1

# The NVML library the sampler loads (dlopen's search: the driver installs
# libnvidia-ml.so.1 in the loader's path).  Private: the tests point it at
# a fake built from tests/fake_nvml.c.
_NVML_LIBRARY = "libnvidia-ml.so.1"
# How often the sampler thread asks NVML for new samples.  The driver keeps
# its samples (one per 1/6 s to 1 s) in a buffer and each read returns
# those since the last, so the period bounds only how late a sample is
# read, not how many: 0.5 s is one call of a few microseconds every 25
# sampler ticks.
NVML_PERIOD_S = 0.5

# The timeline that began a step last (for input_ready()).
_last: Optional["GpuTimeline"] = None


def _torch_cuda() -> Any:
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch
        except ImportError:
            return None
    return getattr(torch, "cuda", None)


def resolve(cuda: Any, func: str) -> Any:
    """The event source ``cuda`` names, or None (off).

    ``cuda``: False/None (off); True (``torch.cuda``, which must have a
    device); ``"auto"`` (``torch.cuda`` when ``torch.cuda.is_available()``,
    else off); or an object with ``Event`` and ``current_stream`` (the
    interface of ``torch.cuda``; tests pass a fake).

    Raises:
        RuntimeError: cuda=True without torch or without a CUDA device.
        TypeError / ValueError: anything else (naming ``cuda``).
    """
    if cuda is None or cuda is False:
        return None
    if cuda is True or cuda == "auto":
        mod = _torch_cuda()
        available = False
        if mod is not None:
            try:
                available = bool(mod.is_available())
            except Exception:  # noqa: BLE001 (a broken driver reads as none)
                available = False
        if available:
            return mod
        if cuda == "auto":
            return None
        raise RuntimeError(
            f"{func}: cuda=True needs a CUDA device, but "
            + ("torch is not installed" if mod is None
               else "torch.cuda.is_available() is False")
            + "; pass cuda='auto' to time the host alone when there is none")
    if isinstance(cuda, str):
        raise ValueError(f"{func}: cuda must be True, False, 'auto' or an event source, "
                         f"got {cuda!r}")
    if not (callable(getattr(cuda, "Event", None))
            and callable(getattr(cuda, "current_stream", None))):
        raise TypeError(f"{func}: cuda must be True, False, 'auto' or an object with "
                        f"Event and current_stream (as torch.cuda), got "
                        f"{type(cuda).__name__}")
    return cuda


def check_ring(ring: Any, func: str, arg: str = "cuda_ring") -> int:
    """``ring`` (``func``'s argument ``arg``) as an int in [2, MAX_RING];
    TypeError/ValueError naming the function and the argument."""
    if isinstance(ring, bool) or not isinstance(ring, int):
        raise TypeError(f"{func}: {arg} must be an int, got {type(ring).__name__}")
    if not 2 <= ring <= MAX_RING:
        raise ValueError(f"{func}: {arg} must be between 2 and {MAX_RING} steps, "
                         f"got {ring}")
    return ring


def _uuid_text(uuid: Any) -> str:
    """A device UUID as NVML spells it: ``GPU-`` + 8-4-4-4-12 hex digits
    (torch gives the bare digits, or 16 bytes)."""
    raw = getattr(uuid, "bytes", None)
    if isinstance(uuid, (bytes, bytearray)) or (raw is not None and not callable(raw)):
        b = bytes(uuid if isinstance(uuid, (bytes, bytearray)) else raw)
        if len(b) != 16:
            raise ValueError(f"a device UUID has 16 bytes, got {len(b)}")
        h = b.hex()
        text = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    else:
        text = str(uuid).strip()
    if not text:
        raise ValueError("the device UUID is empty")
    return text if text.startswith(("GPU-", "MIG-")) else "GPU-" + text


def device_uuid(backend: Any) -> tuple[Optional[str], Optional[str]]:
    """(the NVML UUID of the event source's current device, None) or
    (None, why not).  ``backend`` is ``torch.cuda`` or an object with its
    ``current_device()`` and ``get_device_properties(i).uuid``."""
    current = getattr(backend, "current_device", None)
    props_of = getattr(backend, "get_device_properties", None)
    if not (callable(current) and callable(props_of)):
        return None, "the event source names no device (no get_device_properties)"
    try:
        uuid = getattr(props_of(current()), "uuid", None)
        if uuid is None:
            return None, "the device properties give no UUID (torch too old?)"
        return _uuid_text(uuid), None
    except Exception as exc:  # noqa: BLE001 (never break the loop's start)
        return None, f"the device UUID could not be read: {type(exc).__name__}: {exc}"[:300]


class GpuTimeline:
    """The CUDA events of one source's steps (a wrapped loader, or the
    probes), in a ring of reusable events, and the readings taken from
    them.

    The C wrap iterator and probes call :meth:`begin` before each step's
    clock read and :meth:`done` once its batch is handed over; the loop
    may call :meth:`input_ready` after its host-to-device copy.
    :meth:`readings` gives what has been read so far.  Thread-safe (a
    lock): a report may read while the loop runs.

    Attributes:
        ring: slots in the ring (most steps unread at once).
        recorded: steps whose begin and fetch-done events were queued.
        skipped: steps not recorded because the ring was full.
        ready_marked: steps whose wait ends at input_ready().
        error: why the timeline turned itself off (the event source
            raised), or None.
    """

    def __init__(self, backend: Any, ring: int = DEFAULT_RING, name: str = "cuda"):
        self.backend = backend
        self.name = name
        self.ring = int(ring)
        make = backend.Event
        self._begin = [make(enable_timing=True) for _ in range(self.ring)]
        self._done = [make(enable_timing=True) for _ in range(self.ring)]
        self._ready = [make(enable_timing=True) for _ in range(self.ring)]
        self._key = [0] * self.ring          # the step's host begin_ns
        self._has_done = [False] * self.ring
        self._has_ready = [False] * self.ring
        self._succ = [_UNDECIDED] * self.ring  # does the next slot hold the next step?
        self._head = 0                       # the oldest unread slot
        self._count = 0                      # unread slots
        self._open = -1                      # the current step's slot; -1: none
        self._skip = False                   # the current step was skipped
        self._lock = threading.Lock()
        self.enabled = True
        self.error: Optional[str] = None
        # NVML's device for this timeline, or why there is none.
        self.nvml_uuid: Optional[str] = None
        self.nvml_why: Optional[str] = None
        self._clear_readings()

    def start_utilisation(self) -> None:
        """Have the sampler read this device's utilisation from NVML (see
        :mod:`traceml.gpu`): its UUID is resolved here, the library loaded
        by the C core (nothing when it already reads that device).  Never
        raises for a missing library or device: the report says why."""
        from . import _core

        self.nvml_uuid, self.nvml_why = device_uuid(self.backend)
        if self.nvml_uuid is not None:
            _core._nvml_start(_NVML_LIBRARY, self.nvml_uuid, int(NVML_PERIOD_S * 1e9))

    def utilisation(self) -> dict:
        """What the report needs of NVML: {uuid, why (no device, or None),
        samples (a copy of ``_core.gpu_util_samples()``, GPU_UTIL_DTYPE,
        all devices' readings kept: those of this one when ``info["uuid"]``
        is ``uuid``), info (``_core.gpu_util_info()``), sampler (whether
        the sampler thread, which reads NVML, is on)}."""
        from . import _core

        info = _core.gpu_util_info()
        samples = (_core.gpu_util_samples() if self.nvml_uuid is not None
                   else np.zeros(0, _core.GPU_UTIL_DTYPE))
        return {"uuid": self.nvml_uuid, "why": self.nvml_why, "samples": samples,
                "info": info, "sampler": bool(_core._sampler_settings()["sampler"])}

    # --- what the loop calls ---------------------------------------------------

    def begin(self) -> None:
        """A step begins (before its fetch): read what the GPU has finished,
        then queue this step's begin event, or skip the step if the ring is
        full.  Never raises an Exception: a failing event source turns the
        timeline off."""
        global _last
        _last = self
        if not self.enabled:
            return
        with self._lock:
            try:
                self._poll()
                newest = (self._head + self._count - 1) % self.ring if self._count else -1
                if self._count == self.ring:
                    self._open = -1
                    self._skip = True    # counted once its fetch is done
                    if self._succ[newest] == _UNDECIDED:
                        self._succ[newest] = _NO_SUCC
                    return
                slot = (self._head + self._count) % self.ring
                self._begin[slot].record(self.backend.current_stream())
                if newest >= 0 and self._succ[newest] == _UNDECIDED:
                    self._succ[newest] = _NEXT
                self._key[slot] = -1
                self._has_done[slot] = False
                self._has_ready[slot] = False
                self._succ[slot] = _UNDECIDED
                self._count += 1
                self._open = slot
                self._skip = False
            except Exception as exc:  # noqa: BLE001 (never break the loop)
                self._fail(exc)

    def done(self, begin_ns: int) -> None:
        """The open step's batch is in the loop's hands: queue its
        fetch-done event; ``begin_ns`` is the step's host begin (its key in
        the store)."""
        if not self.enabled:
            return
        with self._lock:
            slot = self._open
            if slot < 0:
                if self._skip:
                    self.skipped += 1
                    self._skip = False
                return
            if not self._record(self._done[slot]):
                return
            if not self._has_done[slot]:
                self.recorded += 1
            self._key[slot] = int(begin_ns)
            self._has_done[slot] = True

    def _record(self, event: Any) -> bool:
        """Record ``event`` on the current stream; False (the timeline
        turned off, see :meth:`_fail`) when the event source raised."""
        try:
            event.record(self.backend.current_stream())
        except Exception as exc:  # noqa: BLE001 - turns the timeline off (_fail)
            self._fail(exc)
            return False
        return True

    def input_ready(self) -> None:
        """Call right after the batch's host-to-device copy: the open
        step's GPU-visible wait then ends when the GPU has finished
        everything queued so far (the copy included) instead of at fetch
        done.  Does nothing before the step's fetch is done, or for a
        skipped step."""
        if not self.enabled or self._open < 0:
            return
        with self._lock:
            slot = self._open
            if slot < 0 or not self._has_done[slot]:
                return
            if not self._record(self._ready[slot]):
                return
            if not self._has_ready[slot]:
                self.ready_marked += 1
            self._has_ready[slot] = True

    def new_epoch(self) -> None:
        """A new loop over the source starts: the last step before it has
        no GPU step (the next begin is another epoch's)."""
        with self._lock:
            if self._count:
                newest = (self._head + self._count - 1) % self.ring
                if self._succ[newest] == _UNDECIDED:
                    self._succ[newest] = _NO_SUCC
            self._open = -1
            self._skip = False

    # --- reading -----------------------------------------------------------------

    def _poll(self) -> None:
        """Read the oldest slots whose events the GPU has passed (query()
        only: never waits).  Called with the lock held."""
        while self._count:
            s = self._head
            succ = self._succ[s]
            if succ == _UNDECIDED:
                return  # the next begin is not queued yet
            if self._has_done[s]:
                end = self._ready[s] if self._has_ready[s] else self._done[s]
                if not end.query():
                    return
                step_ns = -1
                if succ == _NEXT:
                    nxt = self._begin[(s + 1) % self.ring]
                    if not nxt.query():
                        return
                    step_ns = _ns(self._begin[s].elapsed_time(nxt))
                self._store(self._key[s], _ns(self._begin[s].elapsed_time(end)), step_ns,
                            self._has_ready[s])
            # A slot without fetch done (the loop ended in its fetch) only
            # served as the previous step's end.
            self._head = (s + 1) % self.ring
            self._count -= 1
            if self._open == s:
                self._open = -1

    def _store(self, key: int, wait_ns: int, step_ns: int, ready: bool) -> None:
        n = self._n
        if n == len(self._keys):
            grow = max(64, 2 * n)
            self._keys = np.resize(self._keys, grow)
            self._wait = np.resize(self._wait, grow)
            self._step = np.resize(self._step, grow)
            self._ready_flag = np.resize(self._ready_flag, grow)
        self._keys[n] = key
        self._wait[n] = max(wait_ns, 0)   # another stream could order them oddly
        self._step[n] = step_ns if step_ns < 0 else max(step_ns, 0)
        self._ready_flag[n] = ready
        self._n = n + 1

    def _fail(self, exc: BaseException) -> None:
        self.enabled = False
        self.error = f"{type(exc).__name__}: {exc}"[:300]
        self._open = -1
        self._skip = False

    def _clear_readings(self) -> None:
        self._keys = np.zeros(0, np.int64)
        self._wait = np.zeros(0, np.int64)
        self._step = np.zeros(0, np.int64)
        self._ready_flag = np.zeros(0, bool)
        self._n = 0
        self.recorded = 0
        self.skipped = 0
        self.ready_marked = 0

    def reset(self) -> None:
        """Forget the readings and counts (the recorder's reset()); events
        still in the ring are read as usual, under keys no step holds."""
        with self._lock:
            self._clear_readings()

    def readings(self) -> dict:
        """Read what the GPU has finished (query() only), then return a
        copy of every reading so far:

        ``key_ns`` (int64, the step's host ``begin_ns``), ``wait_ns`` (the
        GPU-visible input wait) and ``step_ns`` (the GPU step, -1 where
        missing), all int64 ns of shape (readings,); ``ready`` (bool: the
        wait ends at input_ready()); and the counts ``recorded``,
        ``skipped``, ``pending`` (recorded steps not read yet),
        ``ready_marked``, ``ring``, ``backend`` and ``error``; and
        ``utilisation``, NVML's readings (:meth:`utilisation`).
        """
        with self._lock:
            if self.enabled:
                try:
                    self._poll()
                except Exception as exc:  # noqa: BLE001 - turns the timeline off (_fail)
                    self._fail(exc)
            pending = sum(self._has_done[(self._head + i) % self.ring]
                          for i in range(self._count))
            n = self._n
            return {
                "key_ns": self._keys[:n].copy(), "wait_ns": self._wait[:n].copy(),
                "step_ns": self._step[:n].copy(), "ready": self._ready_flag[:n].copy(),
                "recorded": self.recorded, "skipped": self.skipped, "pending": int(pending),
                "ready_marked": self.ready_marked, "ring": self.ring,
                "backend": self.name, "error": self.error,
                "utilisation": self.utilisation(),
            }

    def __repr__(self) -> str:
        return (f"<traceml.gpu.GpuTimeline ring={self.ring} recorded={self.recorded} "
                f"skipped={self.skipped} read={self._n}>")


def _ns(ms: float) -> int:
    """CUDA's elapsed_time (float ms, about 0.5 us resolution) as int ns."""
    ms = float(ms)
    if not math.isfinite(ms):
        raise ValueError(f"elapsed_time gave {ms!r}")
    return int(round(ms * 1e6))


def timeline_for(recorder: Any, source: int, backend: Any, ring: int) -> GpuTimeline:
    """The recorder's timeline of ``source``: the one it has when it is on
    the same event source with the same ring, else a new one."""
    table = recorder._gpu
    old = table.get(source)
    if old is not None and old.backend is backend and old.ring == ring and old.enabled:
        old.start_utilisation()   # nothing when NVML reads its device already
        return old
    name = "cuda" if backend is _torch_cuda() else type(backend).__name__
    tl = GpuTimeline(backend, ring, name)
    tl.start_utilisation()
    table[source] = tl
    return tl


def cuda_events(cuda: Any = True, *, ring: int = DEFAULT_RING,
                recorder: Any = None) -> Optional[GpuTimeline]:
    """GPU-visible input waits for the probes (``traceml.step_begin()``,
    ``fetch_done()``): from now on each ``step_begin()`` queues a CUDA
    event on the current stream before it reads the clock, and each
    ``fetch_done()`` one after (see :mod:`traceml.gpu`).
    ``traceml.cuda_events(False)`` turns it off.  For a wrapped loader,
    use ``traceml.wrap(loader, cuda=True)`` instead.  NVML's GPU
    utilisation is read for the device too, but only while a wrapped loop
    runs (the sampler thread ticks only then).

    Args:
        cuda: True (``torch.cuda``), ``"auto"`` (on when
            ``torch.cuda.is_available()``), False (off), or an object with
            torch.cuda's ``Event`` and ``current_stream``.
        ring: the most steps unread at once (default 1024; 2 to 2**20);
            past it steps are skipped and counted, never waited for.
        recorder: default: the default recorder.

    Returns:
        The :class:`GpuTimeline` (its ``input_ready()`` marks the end of a
        host-to-device copy), or None when off.

    Raises:
        RuntimeError: cuda=True without a CUDA device.
        TypeError, ValueError: a bad ``cuda`` or ``ring`` (naming it), or a
            ``recorder`` that is not a traceml.Recorder (TypeError).
    """
    from . import _core

    if recorder is not None and not isinstance(recorder, _core.Recorder):
        raise TypeError(f"traceml.cuda_events(): recorder must be a traceml.Recorder or None, "
                        f"got {type(recorder).__name__}")
    rec = recorder if recorder is not None else _core.default_recorder()
    backend = resolve(cuda, "traceml.cuda_events()")
    ring = check_ring(ring, "traceml.cuda_events()", "ring")
    if backend is None:
        rec._set_gpu_hooks(None, None)
        return None
    tl = timeline_for(rec, 0, backend, ring)
    rec._set_gpu_hooks(tl.begin, tl.done)
    return tl


def input_ready() -> None:
    """Mark the end of the current step's host-to-device copy, for the
    timeline (a ``wrap(..., cuda=True)`` loop or the probes' cuda_events)
    that began a step last: its GPU-visible input wait then includes the
    copy (see :mod:`traceml.gpu`).  Does nothing when no timeline is on."""
    tl = _last
    if tl is not None:
        tl.input_ready()
