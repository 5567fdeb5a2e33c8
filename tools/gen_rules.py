#!/usr/bin/env python3
"""Write docs/rules.md from the findings registry.

For each family of ``traceml.findings.REGISTRY``, in report order: its
module docstring; each UPPER_CASE numeric constant with its value and the
comment block above it in the source (where the number comes from); its
public rule functions; each code of its ``WORDS`` with the sentence it
renders for the first corpus case (``tests/corpus.py``) whose report words
it, or "no corpus case yet"; its ``SUPERSEDES`` if any; and the unit-test
file of the family when ``tests/unit/test_<family>.py`` exists.

The corpus is replayed once, with ``traceml.findings.words_of`` wrapped so
that every code the build words is seen with its numbers.  The output
depends only on the sources and the corpus, never on the host or the
clock, so it is the same on every run.

    python tools/gen_rules.py            # writes docs/rules.md
    python tools/gen_rules.py --check    # exit 1 if docs/rules.md is not current
"""

from __future__ import annotations

import argparse
import ast
import functools
import inspect
import io
import os
import sys
import tokenize
from typing import Any, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "rules.md")
COMMAND = "python tools/gen_rules.py"


def _paths() -> None:
    for path in (ROOT, os.path.join(ROOT, "tests")):
        if path not in sys.path:
            sys.path.insert(0, path)


def _family(module) -> str:
    return module.__name__.rsplit(".", 1)[-1]


def _rel(path: str) -> str:
    return os.path.relpath(path, ROOT).replace(os.sep, "/")


def _is_number(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        return True
    return (isinstance(v, (tuple, frozenset)) and len(v) > 0
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v))


def _targets(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
        return [node.target.id]
    return []


def _comment_lines(source: str) -> dict[int, str]:
    """Line number -> the comment's text, for every ``#`` comment."""
    out: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out[tok.start[0]] = tok.string
    return out


def _strip(comment: str) -> str:
    text = comment[1:]
    return text[1:] if text.startswith(" ") else text


def _segment(lines: list[str], node: ast.expr) -> str:
    """The source text of ``node`` (ast.get_source_segment without
    splitting the whole source again for each node)."""
    first, last = node.lineno - 1, node.end_lineno - 1
    if first == last:
        return lines[first].encode()[node.col_offset:node.end_col_offset].decode()
    parts = [lines[first].encode()[node.col_offset:].decode(), *lines[first + 1:last],
             lines[last].encode()[:node.end_col_offset].decode()]
    return " ".join(part.strip() for part in parts)


@functools.cache
def constants(module) -> list[dict]:
    """Each UPPER_CASE numeric constant ``module`` assigns at its top
    level, in source order: {name, expr, value, comment}.  ``comment`` is
    the block of whole-line comments right above the constant, or above
    the run of statements (with no blank line between) that it ends, plus
    any comment on its own line(s)."""
    path = inspect.getsourcefile(module)
    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    lines = source.splitlines()
    tree = ast.parse(source)
    comments = _comment_lines(source)
    ends = {node.end_lineno: node for node in tree.body}
    out = []
    for node in tree.body:
        for name in _targets(node):
            if not name.isupper() or not hasattr(module, name):
                continue
            value = getattr(module, name)
            if not _is_number(value):
                continue
            block: list[str] = []
            line = node.lineno - 1
            while line >= 1:
                text = lines[line - 1].strip()
                if line in comments and text.startswith("#"):
                    block.append(_strip(comments[line]))
                    line -= 1
                elif not text or block:
                    break
                elif line in ends:
                    line = ends[line].lineno - 1
                else:
                    break
            block.reverse()
            own = [_strip(comments[n]) for n in range(node.lineno, node.end_lineno + 1)
                   if n in comments]
            out.append({"name": name, "expr": _segment(lines, node.value),
                        "value": value, "comment": block + own})
    return out


def functions(module) -> list[tuple[str, str]]:
    """(name and signature, first docstring line) of each public function
    the module defines, in source order."""
    out = []
    for name, fn in vars(module).items():
        if (name.startswith("_") or not inspect.isfunction(fn)
                or fn.__module__ != module.__name__):
            continue
        doc = (inspect.getdoc(fn) or "").strip()
        first = doc.split("\n\n", 1)[0].replace("\n", " ") if doc else ""
        sig = inspect.signature(fn)
        sig = sig.replace(parameters=[p.replace(annotation=p.empty)
                                      for p in sig.parameters.values()],
                          return_annotation=sig.empty)
        out.append((fn.__code__.co_firstlineno, f"{name}{sig}", first))
    return [(sig, first) for _, sig, first in sorted(out)]


def corpus_examples(summaries: Optional[list] = None) -> dict[str, tuple[str, str]]:
    """code -> (first corpus case whose build words it, the sentence), from
    one replay of the whole corpus; ``summaries``, where given, gets each
    case's (name, built summary) appended, so that one replay serves both."""
    _paths()
    import corpus

    from traceml import findings

    seen: dict[str, tuple[str, str]] = {}
    current = [""]
    original = findings.words_of

    def recording(code: str):
        template = original(code)

        def words(numbers):
            text = template(numbers)
            seen.setdefault(code, (current[0], text))
            return text
        return words

    findings.words_of = recording
    try:
        for case in corpus.corpus():
            current[0] = case.name
            rep = corpus.replay(case)
            str(rep)  # a view that words at display time is seen too
            if summaries is not None:
                summaries.append((case.name, rep.summary))
    finally:
        findings.words_of = original
    return seen


def _md(text: str) -> str:
    """``text`` safe inside a Markdown table cell or a one-line quote."""
    return text.replace("|", "\\|").replace("\n", " ")


def _value(v: Any) -> str:
    if isinstance(v, frozenset):
        return "{" + ", ".join(repr(x) for x in sorted(v)) + "}"
    return repr(v)


def _literal(expr: Optional[str]) -> bool:
    """Whether ``expr`` is a plain literal (its value adds nothing)."""
    if expr is None:
        return True
    try:
        ast.literal_eval(expr)
    except (ValueError, SyntaxError):
        return False
    return not any(op in expr for op in "*/+") or expr.lstrip().startswith("-")


def _codes(v) -> str:
    return ", ".join(f"`{c}`" for c in sorted(v))


def render(examples: Optional[dict] = None) -> str:
    """The text of docs/rules.md (``examples``: corpus_examples(), replayed
    here when not given)."""
    _paths()
    from traceml import findings

    if examples is None:
        examples = corpus_examples()
    families = findings.REGISTRY
    out = [
        "# The rules",
        "",
        f"<!-- Generated by `{COMMAND}` from traceml/findings/; do not edit. -->",
        "",
        "Every rule of the report, family by family in the order the report reads",
        "them (`traceml.findings.REGISTRY`): what the family decides, each",
        "threshold with where its number comes from (the comment above it in the",
        "source), its rule functions, and each code it words with the sentence",
        "that code renders for a case of the labelled corpus (`tests/corpus.py`).",
        "",
        f"This page is generated: `{COMMAND}` writes it, `{COMMAND} --check` exits 1",
        "when it is not current, and `tests/unit/test_docs.py` fails then too.",
        "`tests/unit/test_registry.py` checks that every code is worded by one",
        "family and that every code a `SUPERSEDES` names exists.",
        "",
        "| # | family | thresholds | codes | with a corpus case |",
        "|---|---|---|---|---|",
    ]
    for i, family in enumerate(families, 1):
        name = _family(family)
        words = getattr(family, "WORDS", None) or {}
        covered = sum(1 for code in words if code in examples)
        out.append(f"| {i} | [{name}](#{name}) | "
                   f"{len(constants(family))} | {len(words)} | {covered} |")
    out.append("")
    for family in families:
        out.extend(_family_section(family, examples))
    return "\n".join(out).rstrip("\n") + "\n"


def _family_section(family, examples: dict) -> list[str]:
    name = _family(family)
    src = _rel(inspect.getsourcefile(family))
    test = os.path.join(ROOT, "tests", "unit", f"test_{name}.py")
    out = [f"## {name}", "",
           f"Source: [`{src}`](../{src})"
           + (f" · unit tests: [`{_rel(test)}`](../{_rel(test)})" if os.path.exists(test)
              else " · unit tests: none of its own yet (the registry test covers its words)"),
           ""]
    doc = inspect.getdoc(family)
    if doc:
        out.extend([doc, ""])
    consts = constants(family)
    out.append("### Thresholds")
    out.append("")
    if not consts:
        out.extend(["No numeric constant of its own.", ""])
    for c in consts:
        shown = c["expr"] if c["expr"] is not None else _value(c["value"])
        head = f"- `{c['name']} = {shown}`"
        if not _literal(c["expr"]):
            head += f" (= `{_value(c['value'])}`)"
        out.append(head)
        if c["comment"]:
            out.append("")
            out.extend(f"  > {line}".rstrip() for line in c["comment"])
            out.append("")
    if out[-1] != "":
        out.append("")
    fns = functions(family)
    if fns:
        out.extend(["### Rules", ""])
        out.extend(f"- `{sig}`" + (f": {first}" if first else "") for sig, first in fns)
        out.append("")
    words = getattr(family, "WORDS", None) or {}
    out.extend(["### Codes", ""])
    if not words:
        out.extend(["No `WORDS` table: this family words no code of its own.", ""])
    else:
        out.extend(["| code | corpus case | its sentence there |", "|---|---|---|"])
        for code in words:
            if code in examples:
                case, text = examples[code]
                out.append(f"| `{code}` | `{case}` | {_md(text)} |")
            else:
                out.append(f"| `{code}` | no corpus case yet | |")
        out.append("")
    sup = getattr(family, "SUPERSEDES", None)
    if sup:
        out.extend(["### Supersedes", "",
                    "When one of these codes is advised, the next steps it names are dropped:", ""])
        out.extend(f"- `{code}` replaces {_codes(replaced)}" for code, replaced in sup.items())
        for extra in sorted(n for n in vars(family)
                            if n.isupper() and n.endswith("_SUPERSEDES") and n != "SUPERSEDES"):
            out.append(f"- `{extra}`: {_codes(getattr(family, extra))}")
        only = getattr(family, "ONLY_REPLACING", None)
        if only:
            out.append(f"- `ONLY_REPLACING` (shown only where they replace a step): "
                       f"{_codes(only)}")
        out.append("")
    return out


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--check", action="store_true",
                    help="exit 1 (writing nothing) if docs/rules.md is not current")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        try:
            with open(OUT, encoding="utf-8") as fh:
                current = fh.read()
        except FileNotFoundError:
            current = None
        if current != text:
            print(f"{_rel(OUT)} is not current: run `{COMMAND}`", file=sys.stderr)
            return 1
        print(f"{_rel(OUT)} is current")
        return 0
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(f"wrote {_rel(OUT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
