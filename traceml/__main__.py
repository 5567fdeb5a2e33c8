"""Command line: ``python -m traceml run [options] script.py [args...]``
(records: :mod:`traceml.launch`), ``python -m traceml show RUN``,
``python -m traceml compare A B ... [--fail-on regression]`` and
``python -m traceml export RUN --trace FILE`` on files written by
Report.save; those read saved runs only, never record.

Exit status (``run``: the script's own, see :mod:`traceml.launch`):

* 0: done (with ``--fail-on``: no run got one of the named verdicts);
* 1: ``--fail-on`` named a verdict that some run got against the baseline
  (the table is printed first), or stdout was closed early (``| head``);
* 2: a usage error, or a file that cannot be read (a
  :class:`traceml.RunFileError`, one line on stderr naming the file).
"""

from __future__ import annotations

import argparse
import os
import sys

from .findings import comparison, input_bound
from .comparing import compare
from .io import load as load_report
from .result import summary_of

# --fail-on choices: the verdicts of compare() a pipeline may refuse.
FAIL_ON = {"regression": comparison.REGRESSION, "mixed": comparison.MIXED,
           "unsettled": comparison.UNSETTLED, "no-data": input_bound.NO_DATA}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["run"]:
        # Before argparse: everything after the script is the script's.
        from .launch import main as launch_main

        return launch_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m traceml",
        description="Run a script with its DataLoaders timed, or show, compare and export "
                    "traceml runs saved with Report.save(path).",
        epilog="exit status: 0 done; 1 a run got a --fail-on verdict (or stdout closed "
               "early); 2 usage error or unreadable run file",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    # Listed for --help only: main() hands "run" to traceml.launch first.
    sub.add_parser("run", add_help=False,
                   help="run a script (or -m module) with its DataLoaders timed, and "
                        "report at its exit (python -m traceml run --help)")
    show = sub.add_parser("show", help="print the report of a saved run")
    show.add_argument("run", help="a file written by Report.save")
    show.add_argument("--html", metavar="FILE", help="also write the HTML report to FILE")
    cmp_ = sub.add_parser("compare", help="compare saved runs against the first")
    cmp_.add_argument("runs", nargs="+", help="files written by Report.save")
    cmp_.add_argument("--labels", nargs="+", help="one name per run")
    cmp_.add_argument("--fail-on", action="append", choices=sorted(FAIL_ON), default=[],
                      help="exit with status 1 when a run gets this verdict against the "
                           "first; repeat for several (a CI gate: --fail-on regression)")
    exp = sub.add_parser("export", help="write a saved run in another format")
    exp.add_argument("run", help="a file written by Report.save")
    exp.add_argument("--trace", metavar="FILE", required=True,
                     help="Chrome trace-event JSON for Perfetto or chrome://tracing "
                          "(Report.save_trace; a saved run has no worker tracks)")
    exp.add_argument("--max-steps", type=int, default=100_000,
                     help="the most steps written: past it, the slowest fetches and 20 "
                          "steps either side (default 100000)")
    args = parser.parse_args(argv)
    failed = False
    try:
        if args.command == "show":
            rep = load_report(args.run)
            if args.html:
                # Before any output, so that a bad path fails alone and a
                # reader that stops early (| head) still gets the file.
                try:
                    with open(args.html, "w", encoding="utf-8") as fh:
                        fh.write(_html_page(rep))
                except OSError as exc:
                    raise OSError(f"cannot write --html {args.html!r}: "
                                  f"{exc.strerror or exc}") from exc
            text = str(rep)
        elif args.command == "export":
            rep = load_report(args.run)
            try:
                path = rep.save_trace(args.trace, max_steps=args.max_steps)
            except OSError as exc:
                raise OSError(f"cannot write --trace {args.trace!r}: "
                              f"{exc.strerror or exc}") from exc
            text = f"wrote {path}: {rep['steps']} steps of {rep['source']}"
        else:
            result = compare(*args.runs, labels=args.labels)
            refused = {FAIL_ON[v] for v in args.fail_on}
            failed = any(row["verdict"] in refused for row in result.rows[1:])
            text = str(result)
    except (OSError, ValueError) as exc:
        print(f"traceml: {exc}", file=sys.stderr)
        return 2
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        return _stdout_closed()
    return 1 if failed else 0


def _html_page(rep) -> str:
    """The notebook view of ``rep`` as a standalone UTF-8 page (the report
    prints "·", "µs" and "→", which need the charset declared)."""
    import html

    title = html.escape(f"traceml · {summary_of(rep)['source']}")
    return ('<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
            f"<title>{title}</title></head>\n<body>\n{rep._repr_html_()}\n</body></html>\n")


def _stdout_closed() -> int:
    """The reader of stdout went away (``| head``): exit quietly, status 1.

    As the Python docs advise (``signal`` module, "Note on SIGPIPE"):
    point stdout at devnull so that the flush at interpreter exit does not
    raise BrokenPipeError again.
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file: nothing to flush
        return 1
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
    return 1


if __name__ == "__main__":
    sys.exit(main())
