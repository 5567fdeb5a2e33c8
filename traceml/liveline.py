"""The live line: one line that updates while a wrapped loop runs, and
TensorBoard scalars on the way.

A daemon thread wakes every ``interval_s`` (0.25 s), feeds the steps the
recorder's store gained since its last wake into a
:class:`traceml._core.WaitHistogram` (C, so the loop itself pays nothing
per step and the histogram is O(1) per step), and shows the running
numbers: steps, input share, median and p95 wait (within 1.6%), and the
waits past 4x the running median (the stall rule proper needs the whole
run: :func:`traceml.report`).

Where it shows (``live=``): ``True`` picks a notebook display (updated in
place through an IPython display handle) inside a Jupyter or Colab kernel,
else the terminal (one line on stderr, rewritten with a carriage return;
where stderr is not a terminal, a plain line at most every 10 s); a tqdm
bar gets the line as its postfix; a callable is called with the line.

The terminal path writes with ``os.write`` on the descriptor, taking no
lock a forked DataLoader worker could inherit held.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import weakref
from typing import Any, Optional

from . import _core
from .findings import report_notes

INTERVAL_S = 0.25
# Where stderr is not a terminal (a CI log, a file) a line is written at
# most this often, so the log keeps a few lines, not thousands.
PLAIN_EVERY_S = 10.0
# "waits past 4x the running median": the ratio of policy's stall rule
# without two separate groups (stall_threshold.STALL_MIN_RATIO).
SLOW_RATIO = 4.0


def _in_notebook() -> bool:
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # noqa: BLE001 (any failure: not a kernel)
        return False
    return shell is not None and hasattr(shell, "kernel")


def _is_tqdm(obj: Any) -> bool:
    return callable(getattr(obj, "set_postfix_str", None))


def check_live(live: Any, func: str = "traceml.wrap()", arg: str = "live") -> Any:
    """``live`` as given to ``func`` (its argument ``arg``): None/False
    (off), True, a tqdm bar or a callable; anything else raises TypeError
    naming the function and the argument."""
    if live is None or isinstance(live, bool) or _is_tqdm(live) or callable(live):
        return live or None
    raise TypeError(f"{func}: {arg} must be True, False, a tqdm bar or a callable taking "
                    f"the line, got {type(live).__name__}")


def check_tensorboard(writer: Any, every: Any, func: str = "traceml.wrap()") -> None:
    """Raise TypeError/ValueError, naming ``func``, for a writer without
    add_scalar or a bad tensorboard_every."""
    if writer is not None and not callable(getattr(writer, "add_scalar", None)):
        raise TypeError(f"{func}: tensorboard must be a SummaryWriter (with add_scalar), "
                        f"got {type(writer).__name__}")
    if isinstance(every, bool) or not isinstance(every, int):
        raise TypeError(f"{func}: tensorboard_every must be an int, got {type(every).__name__}")
    if every < 1:
        raise ValueError(f"{func}: tensorboard_every must be at least 1, got {every}")


class LiveLine:
    """The live line of one wrapped source (kept across its epochs, so a
    notebook shows one display).  :meth:`follow` starts a thread for one
    epoch's iterator; it stops, with a last update, when the iterator is
    exhausted, closed or released."""

    def __init__(self, recorder: Any, source: int, name: str, live: Any = True,
                 tensorboard: Any = None, tensorboard_every: int = 100,
                 interval_s: float = INTERVAL_S):
        self.recorder = recorder
        self.source = source
        self.name = name
        self.live = live
        self.tensorboard = tensorboard
        self.tensorboard_every = tensorboard_every
        self.interval_s = interval_s
        self.hist = _core.WaitHistogram()
        self.logged_at = 0           # steps at the last TensorBoard write
        self.last_plain = 0.0
        self.handle = None           # the notebook display
        self.thread: Optional[threading.Thread] = None
        self._stopping = threading.Event()
        self.lines = 0               # updates shown, for tests
        self.last_line: Optional[str] = None

    def follow(self, it: Any) -> None:
        """Show this source while ``it`` (a WrapIter) runs.  When the loop
        releases the iterator (the end of a ``for``, a ``break``), the last
        update is made right then, before the loop's next statement."""
        self.stop()
        self._stopping = threading.Event()
        ref = weakref.ref(it, lambda _ref: self.stop())
        self.thread = threading.Thread(target=self._run, args=(ref,),
                                       name="traceml-live", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop the thread now (with a last update), if one runs."""
        t = self.thread
        if t is not None and t.is_alive() and t is not threading.current_thread():
            self._stopping.set()
            t.join()
        self.thread = None

    def stats(self) -> dict:
        """The running numbers (see report_notes.live_line)."""
        self.hist.feed(self.recorder, self.source)
        s = self.hist.stats()
        median = self.hist.quantile(0.5)
        return {
            "name": self.name, "steps": s["steps"],
            "input_share": (s["wait_total_ns"] / s["step_total_ns"]
                            if s["step_total_ns"] > 0 else None),
            "median_s": None if median is None else median * 1e-9,
            "p95_s": None if s["steps"] == 0 else self.hist.quantile(0.95) * 1e-9,
            "slow": (self.hist.count_above(int(SLOW_RATIO * median))
                     if median is not None else 0),
            "slow_ratio": SLOW_RATIO,
        }

    def start(self) -> None:
        """Show this source until :meth:`stop` (for the probes, which have
        no iterator to follow)."""
        self.stop()
        self._stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(None,),
                                       name="traceml-live", daemon=True)
        self.thread.start()

    def _run(self, ref: Any) -> None:
        while True:
            stopping = self._stopping.wait(self.interval_s)
            it = ref() if ref is not None else self
            done = stopping or it is None or getattr(it, "inner", True) is None
            del it
            try:
                self.update(final=done)
            except Exception:  # noqa: BLE001 (a display must never break the loop)
                return
            if done:
                return

    def update(self, final: bool = False) -> str:
        """Feed, render and show once; returns the line."""
        st = self.stats()
        line = report_notes.live_line(st)
        self.last_line = line
        self.lines += 1
        self._show(line, final)
        self._log(st, final)
        return line

    def _show(self, line: str, final: bool) -> None:
        live = self.live
        if not live:
            return
        if _is_tqdm(live):
            live.set_postfix_str(line, refresh=True)
        elif callable(live) and live is not True:
            live(line)
        elif _in_notebook():
            from IPython.display import display

            if self.handle is None:
                self.handle = display({"text/plain": line}, raw=True, display_id=True)
            else:
                self.handle.update({"text/plain": line}, raw=True)
        else:
            self._terminal(line, final)

    def _terminal(self, line: str, final: bool) -> None:
        try:
            tty = os.isatty(2)
        except OSError:
            return
        if tty:
            text = "\r" + line + "\x1b[K" + ("\n" if final else "")
        else:
            now = time.monotonic()
            if not final and now - self.last_plain < PLAIN_EVERY_S:
                return
            self.last_plain = now
            text = line + "\n"
        try:
            os.write(2, text.encode("utf-8", "replace"))
        except OSError:
            pass

    def _log(self, st: dict, final: bool) -> None:
        w = self.tensorboard
        if w is None or st["steps"] == 0:
            return
        if not final and st["steps"] - self.logged_at < self.tensorboard_every:
            return
        self.logged_at = st["steps"]
        for key, value in (("input_share", st["input_share"]),
                           ("wait_median_s", st["median_s"]),
                           ("wait_p95_s", st["p95_s"]),
                           ("slow_waits_per_100", 100.0 * st["slow"] / st["steps"])):
            if value is not None:
                w.add_scalar(f"traceml/{key}", value, global_step=st["steps"])
        if final:
            flush = getattr(w, "flush", None)
            if callable(flush):
                flush()


def log_report(writer: Any, report: Any, step: Optional[int] = None) -> None:
    """Write a report's headline numbers (:meth:`traceml.Report.flat`) to a
    TensorBoard ``SummaryWriter`` as scalars under ``traceml/``, and its
    diagnosis and text as text (``traceml/diagnosis``, ``traceml/report``).

    Raises:
        TypeError: writer has no add_scalar.
    """
    if not callable(getattr(writer, "add_scalar", None)):
        raise TypeError(f"log_report(): writer must be a SummaryWriter, "
                        f"got {type(writer).__name__}")
    step = report["steps"] if step is None else step
    for key, value in report.flat().items():
        if isinstance(value, str):
            continue
        writer.add_scalar(key, value, global_step=step)
    add_text = getattr(writer, "add_text", None)
    if callable(add_text):
        add_text("traceml/diagnosis", report["diagnosis"], global_step=step)
        add_text("traceml/report", "```\n" + str(report) + "\n```", global_step=step)
    flush = getattr(writer, "flush", None)
    if callable(flush):
        flush()


_PROBES: dict = {}


def live(target: Any = True, *, recorder: Any = None, tensorboard: Any = None,
         tensorboard_every: int = 100) -> Optional[LiveLine]:
    """The live line for the probes (``traceml.step_begin()`` ...):
    ``traceml.live()`` starts it over the default recorder's probes (or
    ``recorder``'s), ``traceml.live(False)`` stops it with a last update.
    ``target`` is as wrap()'s ``live=`` (True, a tqdm bar, a callable);
    ``tensorboard`` and ``tensorboard_every`` as wrap()'s.  Returns the
    :class:`LiveLine` (None when stopping).

    Raises:
        TypeError: a bad target, writer, tensorboard_every or recorder
            (naming it).
        ValueError: tensorboard_every < 1.
    """
    if recorder is not None and not isinstance(recorder, _core.Recorder):
        raise TypeError(f"traceml.live(): recorder must be a traceml.Recorder or None, got "
                        f"{type(recorder).__name__}")
    rec = recorder if recorder is not None else _core.default_recorder()
    old = _PROBES.pop(rec.id, None)
    if old is not None:
        old.stop()
    target = check_live(target, "traceml.live()", "target")
    check_tensorboard(tensorboard, tensorboard_every, "traceml.live()")
    if not target and tensorboard is None:
        return None
    line = LiveLine(rec, 0, "probes", target, tensorboard, tensorboard_every)
    _PROBES[rec.id] = line
    line.start()
    return line
