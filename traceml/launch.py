"""``python -m traceml run [options] script.py [args...]`` (or ``-m
module``): run a training script unmodified with every torch DataLoader it
iterates timed as if wrapped, and print the report when it exits.

How (see docs/launcher.md):

* ``DataLoader.__init__`` and ``DataLoader.__iter__`` are patched (class
  attributes) when ``torch.utils.data.dataloader`` is imported, by the
  script or already; nothing imports torch before the script does, so a
  script that sets environment variables before ``import torch`` still
  sees them first.  Both are restored when the report is made.
* ``__init__`` notes, once torch's has returned, where each loader was
  built (file:line of the ``DataLoader(...)`` call; a subclass's
  ``super().__init__`` frames are looked past).  A loader whose class
  skips ``DataLoader.__init__`` is named by where it is first iterated.
  (``__new__`` would keep traceml's frame off the stack of torch's
  ``__init__``, but CPython cannot take a ``__new__`` back off a class:
  ``object.__new__`` then refuses the constructor's arguments.)
* Each ``iter(loader)`` goes through :func:`traceml.wrap` into the default
  recorder, under the loader's site as its source name: ``train.py:41``;
  a second loader built at the same line while the first still lives is
  ``train.py:41#2``; a new loader at the same line once the old one is
  gone continues its source (a loader rebuilt each epoch is one source).
  A loader the script wraps itself (``traceml.wrap(loader)``) is timed
  once, by the script's wrap.
* The script runs as ``python script.py`` runs it: ``sys.argv``,
  ``sys.path[0]``, a fresh ``__main__`` module (``__file__`` absolute,
  ``__spec__`` None; ``-m``: the module's spec), its exit code, its
  exceptions (printed by ``sys.excepthook`` with traceml's and runpy's
  frames left out), its warnings.
* The report is made at exit, after the script's own ``atexit`` handlers
  (registered first, so it runs last) and after non-daemon threads end:
  normal exit, ``sys.exit(n)``, an uncaught exception (traceback, then the
  report, exit 1), Ctrl-C (``KeyboardInterrupt`` propagates as usual;
  traceback, report -- made at once, before the script's atexit handlers
  --, then death by SIGINT as Python does: 130 in a shell),
  SIGTERM (a handler installed unless SIGTERM was ignored or handled: the
  report, then death by SIGTERM: 143).  It goes to stderr; the run file is
  saved next to the working directory the launcher started in.
* Under torchrun (several ranks): ``destroy_process_group()`` of the
  default group makes the report first, while the group is up, and so
  does an exit with the group still up: every rank's steps are gathered
  to rank 0 (:func:`traceml.ranks.gather`), which prints and saves the
  job's report.  Where the script made no group, raised, was stopped or
  exited non-zero, every rank saves its own run file and says so.
* A loader that the script's own ``traceml.wrap`` or a traceml trainer
  integration times (:func:`traceml.integrations.claim`) is left to it.
"""

from __future__ import annotations

import argparse
import atexit
import functools
import importlib.machinery
import os
import signal
import sys
import threading
import types
import weakref
from typing import Any, Optional

# The module torch defines DataLoader in: patched when it is imported.
DATALOADER_MODULE = "torch.utils.data.dataloader"
# The default run file, in the working directory at launch (PID: two runs
# from one folder never overwrite each other's).
DEFAULT_SAVE = "traceml-run-{pid}.traceml"

EPILOG = """\
The script runs as `python script.py args...` would run it (sys.argv,
sys.path[0], __main__, exit code, exceptions, warnings); every DataLoader
it iterates is timed as if wrapped with traceml.wrap(), each one a source
named by where it was built (train.py:41).  At exit -- normal, sys.exit(),
an uncaught exception, Ctrl-C or SIGTERM -- the report goes to stderr and
the run is saved to ./traceml-run-<pid>.traceml in the directory the
launcher started in (--save PATH to choose, --no-save for none); open it
with `python -m traceml show FILE` or traceml.load(FILE).

under torchrun (`torchrun --nproc_per_node=N -m traceml run train.py`):
rank 0 prints and saves the job's report, gathered over torch.distributed
when the script destroys its process group or exits with it up; without a
group (or after an error) every rank saves its own run file.

exit status: the script's own (Ctrl-C and SIGTERM end the process by that
signal, as without traceml); 2 a usage error or a script that cannot be
opened; 1 a module that cannot be found (-m)."""


def _build_parser() -> tuple[argparse.ArgumentParser, set]:
    """The parser of the launcher's own options, and the option strings
    that take a value (so that the script's path is found among them)."""
    p = argparse.ArgumentParser(
        prog="python -m traceml run",
        usage="%(prog)s [options] script.py [args...]\n"
              "       %(prog)s [options] -m module [args...]",
        description="Run a PyTorch script unmodified and report whether its "
                    "DataLoaders kept it waiting.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    valued: set = set()

    def opt(*names: str, **kw: Any) -> None:
        action = p.add_argument(*names, **kw)
        if action.nargs != 0:
            valued.update(names)

    opt("--save", metavar="PATH",
        help="write the run file here (default ./traceml-run-<pid>.traceml, in the "
             "directory the launcher started in)")
    opt("--no-save", action="store_true", help="write no run file")
    opt("--html", metavar="PATH", help="also write the HTML report to PATH")
    opt("--trace", metavar="PATH",
        help="also write a Chrome trace-event timeline (Perfetto, chrome://tracing)")
    opt("--quiet", "-q", action="store_true",
        help="print no report (the files are still written)")
    opt("--live", action="store_true",
        help="show a line on stderr that updates while each loop runs")
    opt("--stuck-after", metavar="S", type=float,
        help="record a fetch that waits longer than S seconds as a stuck loader "
             "(default 30; 0: off)")
    opt("--stall-threshold", metavar="S", type=float,
        help="a fetch waiting longer than S seconds is a stall (default: automatic)")
    opt("--sampler-period", metavar="S", type=float,
        help="seconds between /proc readings of the main process and the workers "
             "(default 0.02)")
    opt("--no-sampler", action="store_true",
        help="time the fetches only: no /proc readings, no stuck-loader watch")
    opt("--gather-timeout", metavar="S", type=float,
        help="under torchrun: seconds rank 0 waits for the other ranks' steps at "
             "the end (default 120)")
    opt("--cuda", action="store_true",
        help="also measure the input wait the GPU saw (CUDA events), where a CUDA "
             "device is available")
    return p, valued


def split_argv(argv: list, valued: set) -> tuple[list, Optional[str], Optional[str], list]:
    """``argv`` (after ``run``) as (the launcher's options, script, module,
    the script's arguments): the launcher's options end at the first word
    that is not one of them (the script), at ``-m MODULE``, or at ``--``."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            rest = argv[i + 1:]
            return argv[:i], (rest[0] if rest else None), None, rest[1:]
        if word == "-m" or (word.startswith("-m") and not word.startswith("--")):
            module = word[2:] or (argv[i + 1] if i + 1 < len(argv) else None)
            after = i + 1 if word[2:] else i + 2
            return argv[:i], None, module, argv[after:]
        if word.startswith("-") and word != "-":
            i += 2 if (word in valued and "=" not in word) else 1
            continue
        return argv[:i], word, None, argv[i + 1:]
    return argv, None, None, []


class Launcher:
    """One launch: the DataLoader patch, the exit handling, the report."""

    def __init__(self, opts: argparse.Namespace, target: str) -> None:
        from . import _core

        self.opts = opts
        self.target = target
        self.pid = os.getpid()
        self.cwd = os.getcwd()
        self.recorder = _core.default_recorder()
        self.cls: Any = None          # the patched DataLoader class
        self.saved: dict = {}         # its own __init__/__iter__ before the patch
        self.finder: Optional[_PatchOnImport] = None
        # id(loader) -> [weakref, site, name]: where each loader was built,
        # and its source name once iterated.
        self.loaders: dict = {}
        # source name -> weakref of the loader holding it now.
        self.holders: dict = {}
        self.lines: dict = {}         # source name -> LiveLine (--live)
        self.wrapped = 0              # epochs the launcher wrapped
        self.failed: Optional[str] = None   # why wrapping was given up
        self.finishing = False
        self.finished = False
        self.die_by: Optional[int] = None   # a signal to die by once finished
        # Re-entrant: the SIGTERM handler may land inside finish().
        self.lock = threading.RLock()
        self.code_to_hide: set = set()
        # How the script ended, once it has (None while it runs): "ok", or
        # why its ranks are not gathered ("the script raised", ...).
        self.outcome: Optional[str] = None
        # Epochs the launcher left to the script's own traceml.wrap or to a
        # traceml trainer integration (timed there, not here).
        self.timed_elsewhere = 0
        self.dist_saved: list = []    # (module, its own destroy_process_group)
        self.tls = threading.local()  # .wrapping: inside the launcher's own iter(wrap)

    # --- the patch ----------------------------------------------------------

    def install(self) -> None:
        module = sys.modules.get(DATALOADER_MODULE)
        if module is not None:
            self.patch(module)
        else:
            self.finder = _PatchOnImport(self.patch)
            sys.meta_path.insert(0, self.finder)

    def patch(self, module: Any) -> None:
        cls = getattr(module, "DataLoader", None)
        if not isinstance(cls, type) or self.cls is not None:
            return
        launcher = self
        own_init = cls.__dict__.get("__init__")
        own_iter = cls.__dict__.get("__iter__")
        if own_init is None or own_iter is None:
            return

        # functools.wraps: inspect.signature(DataLoader) and __init__'s name,
        # doc and signature stay torch's (Lightning reads them).
        @functools.wraps(own_init)
        def __init__(loader, *args, **kwargs):
            own_init(loader, *args, **kwargs)
            launcher.note_site(loader, "__init__", 2)

        @functools.wraps(own_iter)
        def __iter__(loader):
            return launcher.iterate(loader, own_iter)

        self.cls = cls
        self.saved = {"__init__": own_init, "__iter__": own_iter}
        from . import wrapping

        self.code_to_hide = {__init__.__code__, __iter__.__code__, Launcher.iterate.__code__,
                             wrapping.Wrapped.__iter__.__code__}
        cls.__init__ = __init__
        cls.__iter__ = __iter__
        # torch.distributed is imported by the DataLoader's module: done by now.
        self.patch_dist()

    def patch_dist(self) -> None:
        """``destroy_process_group`` of the default group makes the report
        first, while the group is still up (the ranks' gather needs it)."""
        dist = sys.modules.get("torch.distributed")
        c10d = sys.modules.get("torch.distributed.distributed_c10d")
        own = getattr(c10d, "destroy_process_group", None)
        if dist is None or c10d is None or own is None or self.dist_saved:
            return
        launcher = self

        @functools.wraps(own)
        def destroy_process_group(*args, **kwargs):
            group = args[0] if args else kwargs.get("group")
            try:
                whole = group is None or group is c10d.GroupMember.WORLD
            except Exception:  # noqa: BLE001 - never in the way of torch's own
                whole = False
            if whole and os.getpid() == launcher.pid and not launcher.finishing:
                launcher.finish()
            return own(*args, **kwargs)

        for module in (c10d, dist):
            if getattr(module, "destroy_process_group", None) is own:
                self.dist_saved.append((module, own))
                module.destroy_process_group = destroy_process_group

    def unpatch(self) -> None:
        if self.finder is not None and self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        for module, own in self.dist_saved:
            module.destroy_process_group = own
        self.dist_saved = []
        cls, self.cls = self.cls, None
        if cls is None:
            return
        for name, value in self.saved.items():
            setattr(cls, name, value)

    def note_site(self, loader: Any, method: str, depth: int) -> None:
        """Where ``loader`` is being built (or first iterated): the frame
        ``sys._getframe(depth)`` from here, past every frame whose first
        argument is the loader itself: its ``method`` in a subclass calling
        ``super().__init__``, or a framework's wrapper of ``__init__``
        (Lightning wraps it while it calls a module's
        ``train_dataloader()``), so the site is the user's
        ``DataLoader(...)`` call."""
        try:
            entry = self.loaders.get(id(loader))
            if entry is not None and entry[0]() is loader:
                return
            frame = sys._getframe(depth)
            while frame is not None:
                code = frame.f_code
                first = code.co_varnames[0] if code.co_argcount else None
                if first is None or frame.f_locals.get(first) is not loader:
                    break
                frame = frame.f_back
            site = (f"{self._short(frame.f_code.co_filename)}:{frame.f_lineno}"
                    if frame is not None else type(loader).__name__)
            key = id(loader)
            ref = weakref.ref(loader, lambda _r, k=key: self.loaders.pop(k, None))
            self.loaders[key] = [ref, site, None]
        except Exception:  # noqa: BLE001 - naming must never break the script
            pass

    def _short(self, path: str) -> str:
        try:
            rel = os.path.relpath(path, self.cwd)
        except ValueError:
            return path
        return path if rel.startswith(os.pardir) else rel

    def name_of(self, loader: Any) -> str:
        """The source name of ``loader``: its site, unique among the loaders
        alive now (``#2``, ``#3`` ...)."""
        entry = self.loaders.get(id(loader))
        if entry is None or entry[0]() is not loader:
            # Not built through DataLoader.__init__: named by where it is
            # first iterated (name_of <- iterate <- __iter__ <- the caller).
            self.note_site(loader, "__iter__", 4)
            entry = self.loaders.get(id(loader))
        if entry is None:
            return type(loader).__name__
        if entry[2] is not None:
            return entry[2]
        site = entry[1] if entry[1].isprintable() else ascii(entry[1])
        k = 1
        while True:
            name = site if k == 1 else f"{site}#{k}"
            held = self.holders.get(name)
            holder = held() if held is not None else None
            if holder is None or holder is loader:
                break
            k += 1
        self.holders[name] = weakref.ref(loader)
        entry[2] = name
        return name

    def iterate(self, loader: Any, own_iter: Any) -> Any:
        """The patched ``DataLoader.__iter__``: one wrapped epoch, or torch's
        own iterator (inside traceml.wrap, after the report, or once
        wrapping failed)."""
        from . import wrapping

        if self.cls is None or self.failed is not None or os.getpid() != self.pid:
            return own_iter(loader)
        if getattr(self.tls, "wrapping", False):
            return own_iter(loader)     # the launcher's own wrap, below
        if wrapping.wrapping_now() or _claimed(loader):
            # The script's own wrap, or a traceml trainer integration,
            # times this epoch: timed once, there.
            self.timed_elsewhere += 1
            return own_iter(loader)
        try:
            wrapped = wrapping.wrap_into(self.recorder, loader, self.name_of(loader),
                                         cuda="auto" if self.opts.cuda else False)
            if self.opts.live and wrapped.source is not None:
                from .liveline import LiveLine

                line = self.lines.get(wrapped.name)
                if line is None or line.source != wrapped.source:
                    line = self.lines[wrapped.name] = LiveLine(
                        self.recorder, wrapped.source, wrapped.name, True)
                wrapped._live = line
        except Exception as exc:  # noqa: BLE001 - the script must run whatever traceml does
            self.failed = f"{type(exc).__name__}: {exc}"
            return own_iter(loader)
        self.wrapped += 1
        self.tls.wrapping = True
        try:
            return iter(wrapped)
        finally:
            self.tls.wrapping = False

    # --- the end --------------------------------------------------------------

    def on_sigterm(self, signum: int, frame: Any) -> None:
        if os.getpid() != self.pid or self.finished:
            _die_by(signum)    # a forked child, or the report is out: as without traceml
        with self.lock:
            if self.finishing:
                # The report is being made (atexit, or this handler landed
                # inside it): die once it is out.
                self.die_by = signum
                return
        if self.outcome is None:
            self.outcome = "stopped by SIGTERM"
        self.finish()
        _die_by(signum)

    def finish(self) -> None:
        """Restore torch, then print and save the report (once, in the
        launching process only)."""
        with self.lock:
            if self.finishing or os.getpid() != self.pid:
                return
            self.finishing = True
        try:
            self.unpatch()
            self._report()
        finally:
            self.finished = True
            if self.die_by is not None:
                _die_by(self.die_by)

    def _report(self) -> None:
        out = _stderr()
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001 - a closed or broken stdout is the script's
            pass
        lines = []
        try:
            if self.failed is not None:
                lines.append(f"traceml · stopped wrapping DataLoaders: {self.failed}")
            if self.timed_elsewhere:
                lines.append(f"traceml · {self.timed_elsewhere} epoch(s) timed by the script's "
                             "own traceml.wrap or a traceml trainer integration, not again "
                             "by the launcher")
            rank, world, group_up = _rank_info()
            why = None
            if world > 1:
                if not group_up:
                    why = "no process group at exit"
                elif self.outcome not in (None, "ok"):
                    why = f"{self.outcome}: ranks not gathered"
                else:
                    why = self._report_job(lines, rank, world)
                    if why is None:
                        self._write(out, lines, quiet=False)
                        return
            self._report_local(lines, rank, world, why)
        except Exception:  # noqa: BLE001 - the exit status stays the script's
            import traceback

            lines.append("traceml · the report failed (a bug in traceml; the script's "
                         "exit status is kept):\n" + traceback.format_exc().rstrip())
        self._write(out, lines, quiet=False)

    def _nothing(self) -> bool:
        rec = self.recorder
        return rec.store_info()["steps"] == 0 and len(rec.sources.by_id) <= 1

    def _report_job(self, lines: list, rank: int, world: int) -> Optional[str]:
        """The job's report over torch.distributed (traceml.ranks.gather),
        printed and saved on rank 0; None when done, else why this rank
        reports alone instead."""
        import warnings

        from . import ranks

        opts = self.opts
        timeout = opts.gather_timeout if opts.gather_timeout is not None \
            else ranks.DEFAULT_TIMEOUT_S
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always", RuntimeWarning)
            try:
                rep = ranks.gather(opts.stall_threshold, recorder=self.recorder,
                                   timeout_s=timeout)
            except Exception as exc:  # noqa: BLE001 - the rank's own report instead
                return f"the gather failed ({type(exc).__name__}: {exc})"
        trouble = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)
                   and "gather()" in str(w.message)]
        if rep is None:
            if trouble:
                return trouble[0]
            if not opts.quiet:
                lines.append(f"traceml · rank {rank} of {world}: steps sent to rank 0, "
                             "which prints the job's report")
            return None
        if rep["steps"] == 0 and self._nothing():
            self._say_nothing(lines, f" on any of the {world} ranks")
            return None
        if not opts.quiet:
            lines.append(str(rep))
        lines.extend(self._files(rep))
        return None

    def _say_nothing(self, lines: list, where: str) -> None:
        """The one line of a run with no steps of the launcher's (none
        under --quiet), in place of the line on epochs timed elsewhere."""
        if self.timed_elsewhere:
            lines[:] = [line for line in lines if "timed by the script's own" not in line]
            lines.append(f"traceml · nothing left to record{where}: the {self.timed_elsewhere} "
                         "epoch(s) of DataLoaders were timed by the script's own traceml.wrap "
                         "or a traceml trainer integration, which report them (no run file "
                         "written)")
        else:
            lines.append(f"traceml · nothing recorded: {self.target} iterated no DataLoader"
                         f"{where} (no run file written)")
        if self.opts.quiet:
            del lines[:]

    def _report_local(self, lines: list, rank: int, world: int, why: Optional[str]) -> None:
        """This process's own report; under several ranks (``why``: why
        not the job's), each rank saves its own file and says so, and only
        rank 0 prints its report."""
        opts = self.opts
        who = f"rank {rank} of {world}" if world > 1 else None
        if self._nothing():
            self._say_nothing(lines, f" on {who}" if who else "")
            return
        rep = self.recorder.report(opts.stall_threshold)
        if not opts.quiet and (world <= 1 or rank == 0):
            lines.append(str(rep))
        if who is not None and not opts.quiet:
            lines.append(f"traceml · {who}: this rank's own report ({why}); every rank "
                         "saves its own run file")
        lines.extend(self._files(rep, rank if world > 1 else None))

    def _run_path(self, rank: Optional[int]) -> str:
        """The run file: --save PATH (a rank's own: PATH with ``.rank<R>``
        before its suffix), else traceml-run-<pid>.traceml (a PID each rank)."""
        if not self.opts.save:
            return os.path.join(self.cwd, DEFAULT_SAVE.format(pid=self.pid))
        if rank is None:
            return self.opts.save
        root, ext = os.path.splitext(self.opts.save)
        return f"{root}.rank{rank}{ext}"

    def _files(self, rep: Any, rank: Optional[int] = None) -> list:
        """Write the files asked for; ``rank``: a rank's own report (each
        rank's files apart)."""
        opts = self.opts
        said = []
        writes = []
        if not opts.no_save:
            writes.append(("run", self._run_path(rank), rep.save))
        def own(path: str) -> str:
            if rank is None:
                return path
            root, ext = os.path.splitext(path)
            return f"{root}.rank{rank}{ext}"

        if opts.html:
            writes.append(("HTML report", own(opts.html), lambda p: _write_html(rep, p)))
        if opts.trace:
            writes.append(("trace", own(opts.trace), rep.save_trace))
        for what, path, write in writes:
            try:
                write(path)
                if not opts.quiet:
                    said.append(f"traceml · {what} saved to {path}")
            except (OSError, ValueError, TypeError) as exc:
                said.append(f"traceml · could not write the {what} to {path}: {exc}")
        return said

    @staticmethod
    def _write(out: Any, lines: list, quiet: bool) -> None:
        if quiet or not lines or out is None:
            return
        try:
            out.write("\n".join(lines) + "\n")
            out.flush()
        except Exception:  # noqa: BLE001 - nowhere left to say it
            pass

    # --- tracebacks -----------------------------------------------------------

    def show_exception(self, exc: BaseException, code: Any) -> None:
        """Print ``exc`` as Python prints an uncaught exception (through
        sys.excepthook), with the launcher's frames left out."""
        _strip(exc, code, self.code_to_hide, set())
        sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, exc.__traceback__
        if sys.version_info >= (3, 12):
            sys.last_exc = exc
        try:
            sys.excepthook(type(exc), exc, exc.__traceback__)
        except BaseException as hook_exc:  # noqa: BLE001 - as Python does: say so, show both
            print("Error in sys.excepthook:", file=sys.stderr)
            sys.__excepthook__(type(hook_exc), hook_exc, hook_exc.__traceback__)
            print("\nOriginal exception was:", file=sys.stderr)
            sys.__excepthook__(type(exc), exc, exc.__traceback__)


def _strip(exc: BaseException, code: Any, hide: set, seen: set) -> None:
    """Leave out of ``exc``'s traceback (and its cause's and context's) the
    frames before the script's module code ``code`` and the frames of the
    launcher's patch."""
    if exc is None or id(exc) in seen:
        return
    seen.add(id(exc))
    entries = []
    tb = exc.__traceback__
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    start = 0
    if code is not None:
        for i, entry in enumerate(entries):
            if entry.tb_frame.f_code is code:
                start = i
                break
    else:
        while start < len(entries) and _ours(entries[start].tb_frame):
            start += 1
    kept = [e for e in entries[start:] if e.tb_frame.f_code not in hide]
    new = None
    for entry in reversed(kept):
        new = types.TracebackType(new, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    if len(kept) != len(entries):
        exc.__traceback__ = new
    _strip(exc.__cause__, None, hide, seen)
    _strip(exc.__context__, None, hide, seen)


def _ours(frame: Any) -> bool:
    """A frame of the launcher or of runpy (before a script runpy ran)."""
    import runpy

    here = os.path.dirname(os.path.abspath(__file__))
    return frame.f_code.co_filename in (
        os.path.join(here, "launch.py"), os.path.join(here, "__main__.py"),
        runpy.__file__, "<frozen runpy>")


def _rank_info() -> tuple:
    """(this process's rank, the world size, whether a torch.distributed
    process group is up): the default group's where one is up, else
    torchrun's RANK and WORLD_SIZE (0, 1 outside a launch)."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size(), True
    except Exception:  # noqa: BLE001 - a half-torn-down group: as none
        pass
    try:
        rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    except ValueError:
        rank, world = 0, 1
    return rank, max(world, 1), False


def _claimed(loader: Any) -> bool:
    """Whether a traceml trainer integration times ``loader`` itself
    (:func:`traceml.integrations.claim`); never imports it."""
    integrations = sys.modules.get("traceml.integrations")
    try:
        return integrations is not None and integrations.is_claimed(loader)
    except Exception:  # noqa: BLE001 - as not claimed
        return False


def _die_by(signum: int) -> None:
    """End the process by ``signum`` with its default action, as a process
    without a handler for it ends."""
    for stream in (sys.stderr,):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - dying anyway
            pass
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)   # not reached unless the signal is blocked


def _stderr() -> Any:
    for stream in (sys.stderr, sys.__stderr__):
        if stream is not None and not getattr(stream, "closed", False):
            return stream
    return None


def _write_html(rep: Any, path: str) -> None:
    from .__main__ import _html_page

    with open(path, "w", encoding="utf-8") as fh:
        fh.write(_html_page(rep))


class _PatchOnImport:
    """A meta path finder that lets ``torch.utils.data.dataloader`` load as
    usual and patches its DataLoader right after the module ran."""

    def __init__(self, on_loaded: Any) -> None:
        self.on_loaded = on_loaded

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != DATALOADER_MODULE:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _PatchingLoader(spec.loader, self.on_loaded)
        return spec


class _PatchingLoader:
    """The module's own loader, and the patch once the module has run; the
    module keeps its own loader as ``__loader__`` and ``__spec__.loader``."""

    def __init__(self, loader: Any, on_loaded: Any) -> None:
        self._loader = loader
        self._on_loaded = on_loaded

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        spec = getattr(module, "__spec__", None)
        if spec is not None:
            spec.loader = self._loader
        module.__loader__ = self._loader
        self._loader.exec_module(module)
        try:
            self._on_loaded(module)
        except Exception:  # noqa: BLE001 - torch must import whatever the patch does
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


# --- running the target -------------------------------------------------------


def _main_module(name: str = "__main__") -> types.ModuleType:
    import builtins

    mod = types.ModuleType(name)
    mod.__dict__["__builtins__"] = builtins
    return mod


def _script_code(script: str) -> tuple[Any, types.ModuleType]:
    """The script's code and its fresh ``__main__`` module, as Python
    makes them for ``python script.py`` (``__file__`` absolute,
    ``__spec__`` None).  OSError where it cannot be read."""
    path = os.path.abspath(script)
    with open(path, "rb") as fh:
        source = fh.read()
    code = compile(source, path, "exec", dont_inherit=True)
    mod = _main_module()
    mod.__file__ = path
    mod.__cached__ = None
    mod.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
    mod.__spec__ = None
    mod.__package__ = None
    return code, mod


def _module_code(module: str) -> tuple[Any, types.ModuleType]:
    """The code and ``__main__`` of ``-m module``, as ``python -m`` finds
    them (runpy's own lookup: packages run their ``__main__``).
    ImportError where it cannot be found."""
    import runpy

    find = getattr(runpy, "_get_module_details", None)
    if find is None:   # a Python without it: runpy's public entry point
        raise NotImplementedError
    name, spec, code = find(module)
    mod = _main_module()
    mod.__file__ = spec.origin
    mod.__cached__ = spec.cached
    mod.__loader__ = spec.loader
    mod.__spec__ = spec
    mod.__package__ = spec.parent
    return code, mod


def main(argv: Optional[list] = None) -> int:
    """``python -m traceml run ...``: run the script and report at its exit.

    Returns the script's exit status (SystemExit and the signals pass
    through as they would without traceml)."""
    argv = list(sys.argv[2:] if argv is None else argv)
    parser, valued = _build_parser()
    own, script, module, args = split_argv(argv, valued)
    opts = parser.parse_args(own)
    if script is None and module is None:
        parser.error("a script to run (script.py) or -m module is required")
    for name in ("stuck_after", "sampler_period", "stall_threshold", "gather_timeout"):
        value = getattr(opts, name)
        if value is not None and not value >= 0:
            parser.error(f"--{name.replace('_', '-')} must be a number of seconds >= 0")
    if opts.gather_timeout is not None and not opts.gather_timeout > 0:
        parser.error("--gather-timeout must be a number of seconds > 0")
    # Files are named from where the launcher started: the script may chdir.
    for name in ("save", "html", "trace"):
        if getattr(opts, name):
            setattr(opts, name, os.path.abspath(getattr(opts, name)))
    settings = {}
    if opts.stuck_after is not None:
        settings["stuck_after_s"] = opts.stuck_after
    if opts.sampler_period is not None:
        settings["sampler_period_s"] = opts.sampler_period
    if opts.no_sampler:
        settings["sampler"] = False
    if settings:
        from .wrapping import configure

        try:
            configure(**settings)
        except (TypeError, ValueError) as exc:
            parser.error(str(exc))

    safe_path = getattr(sys.flags, "safe_path", False) or sys.flags.isolated
    if module is not None:
        if not safe_path:
            _set_path0(os.getcwd())
        try:
            code, mod = _module_code(module)
        except NotImplementedError:
            code, mod = None, None
        except ImportError as exc:
            print(f"{sys.executable}: {exc}", file=sys.stderr)
            return 1
        target = f"-m {module}"
        argv0 = mod.__file__ if mod is not None else module
    else:
        path = os.path.abspath(script)
        if os.path.isdir(path) or (os.path.isfile(path) and _is_zip(path)):
            code, mod = None, None   # a folder or zip with __main__.py: runpy's
        else:
            try:
                code, mod = _script_code(script)
            except OSError as exc:
                print(f"{sys.executable}: can't open file {path!r}: "
                      f"[Errno {exc.errno}] {exc.strerror}", file=sys.stderr)
                return 2
            except SyntaxError as exc:
                # As python does: the error, no report (nothing ran).
                sys.excepthook(type(exc), exc, None)
                return 1
        target = script
        argv0 = script
        if not safe_path:
            _set_path0(os.path.dirname(path) if code is not None else script)

    launcher = Launcher(opts, target)
    # Registered before the script runs: its own atexit handlers run first.
    atexit.register(launcher.finish)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, launcher.on_sigterm)
    launcher.install()
    sys.argv[:] = [argv0, *args]
    try:
        if code is not None:
            sys.modules["__main__"] = mod
            exec(code, mod.__dict__)
        else:
            import runpy

            if module is not None:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        launcher.outcome = ("ok" if exc.code in (None, 0)
                            else f"the script ended by sys.exit({exc.code!r})")
        raise
    except KeyboardInterrupt as exc:
        launcher.outcome = "stopped by Ctrl-C"
        launcher.show_exception(exc, code)
        # The report now, not at exit: Python ends the process by SIGINT
        # for a KeyboardInterrupt that leaves the main module, but forgets
        # it when code is imported meanwhile (an atexit handler importing
        # scipy then exits 1 instead), and the report imports what it uses.
        launcher.finish()
        # Raised on for Python to end by SIGINT; shown already.
        sys.excepthook = _quiet_hook
        raise
    except BaseException as exc:  # noqa: BLE001 - the script's uncaught exception, shown as Python would
        launcher.outcome = f"the script raised {type(exc).__name__}"
        launcher.show_exception(exc, code)
        return 1
    launcher.outcome = "ok"
    return 0


def _is_zip(path: str) -> bool:
    import zipfile

    try:
        return zipfile.is_zipfile(path)
    except OSError:
        return False


def _quiet_hook(*_exc: Any) -> None:
    """sys.excepthook for an exception already shown."""


def _set_path0(path: str) -> None:
    if sys.path:
        sys.path[0] = path
    else:
        sys.path.insert(0, path)
