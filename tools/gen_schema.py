#!/usr/bin/env python3
"""Write traceml/run_schema.json from the summary's types.

The JSON Schema a saved run is checked against on load is generated from
``traceml.summary_types`` (``RunFile`` and the sections it holds) by
``traceml.json_schema.generate``; nothing in it is written by hand.  The
output depends only on those sources.

    python tools/gen_schema.py            # writes traceml/run_schema.json
    python tools/gen_schema.py --check    # exit 1 if it is not current
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "traceml", "run_schema.json")


def render() -> str:
    """The text of run_schema.json as the types give it today."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from traceml import json_schema, summary_types

    generated = json_schema.generate(summary_types.RunFile, **summary_types.SCHEMA_HEAD)
    return json.dumps(generated, indent=2, ensure_ascii=False) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when the file differs from what the types give")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != text:
                print(f"{os.path.relpath(OUT, ROOT)} is not current: run tools/gen_schema.py",
                      file=sys.stderr)
                return 1
        return 0
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
