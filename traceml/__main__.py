"""Command line: ``python -m traceml show RUN`` and
``python -m traceml compare A B ...`` on files written by Report.save."""

from __future__ import annotations

import argparse
import sys

from .compare import compare
from .io import load as load_report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m traceml",
        description="Show or compare traceml runs saved with Report.save(path).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="print the report of a saved run")
    show.add_argument("run", help="a file written by Report.save")
    show.add_argument("--html", metavar="FILE", help="also write the HTML report to FILE")
    cmp_ = sub.add_parser("compare", help="compare saved runs against the first")
    cmp_.add_argument("runs", nargs="+", help="files written by Report.save")
    cmp_.add_argument("--labels", nargs="+", help="one name per run")
    args = parser.parse_args(argv)
    try:
        if args.command == "show":
            rep = load_report(args.run)
            print(rep)
            if args.html:
                with open(args.html, "w", encoding="utf-8") as fh:
                    fh.write(rep._repr_html_())
        else:
            print(compare(*args.runs, labels=args.labels))
    except (OSError, ValueError) as exc:
        print(f"traceml: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
