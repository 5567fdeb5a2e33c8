"""The documentation stays true to the code: docs/rules.md is what
tools/gen_rules.py writes from the registry today, the README stays short
and restates no threshold of the findings in its prose (docs/rules.md is
where they live), every relative link in the README and docs/ points at a
file (and heading) that exists, and docs/api.md names every public name."""

import math
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if not os.path.exists(os.path.join(ROOT, "tools", "gen_rules.py")):
    # tools/check_dist.sh and tools/check_pythons.sh run a copy of tests/
    # against an installed traceml, away from the checkout: the docs and
    # their generator are not there to check.
    pytest.skip("the docs are checked in the checkout, not in a copy of tests/",
                allow_module_level=True)
sys.path.insert(0, os.path.join(ROOT, "tools"))

import gen_rules  # noqa: E402 - tools/ is put on the path just above

README = os.path.join(ROOT, "README.md")
DOCS = os.path.join(ROOT, "docs")
README_MAX_LINES = 250

# A number with a unit, as tests/integration/test_rooms.py's LITERAL finds restated
# thresholds in sentences; the lookbehind keeps "2.13" whole.
LITERAL = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s?(%|ms\b|µs\b|ns\b|s\b|x\b|kB\b|MB\b)")
FENCE = re.compile(r"\s*(```|~~~)")
LINK = re.compile(r"(?<!\\)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _markdown_files() -> list[str]:
    names = sorted(n for n in os.listdir(DOCS) if n.endswith(".md"))
    return [README, os.path.join(ROOT, "benchmarks", "README.md"),
            *(os.path.join(DOCS, n) for n in names)]


def _prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    out, fenced = [], False
    for i, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((i, line))
    return out


def _constants() -> list[tuple[str, float]]:
    """(name, value) of every numeric constant of the findings families."""
    from traceml import findings

    out = []
    for family in findings.REGISTRY:
        for c in gen_rules.constants(family):
            values = c["value"] if isinstance(c["value"], (tuple, frozenset)) else (c["value"],)
            out.extend((c["name"], float(v)) for v in values)
    return out


def _restates(number: float, unit: str, constants) -> list[str]:
    """The findings constants that ``number`` ``unit`` restates: a share
    (a float constant) as a percentage, a ratio (a *RATIO*/*GROWTH*
    constant) as "Nx", a duration (a *_S or *_NS constant) in any time
    unit, a size (a *BYTES* constant) in kB or MB."""
    scale = {"ms": 1e-3, "µs": 1e-6, "ns": 1e-9, "s": 1.0}
    hits = []
    for name, value in constants:
        if unit == "%":
            want = [number / 100] if isinstance(value, float) or "PCT" in name else []
            if "PCT" in name:
                want.append(number)
        elif unit == "x":
            want = [number] if "RATIO" in name or "GROWTH" in name else []
        elif unit in scale:
            if name.endswith("_NS"):
                want = [number * scale[unit] * 1e9]
            elif (name.endswith("_S") or "_S_" in name) and not name.endswith("_PER_S"):
                want = [number * scale[unit]]
            else:
                want = []
        else:
            want = ([number * 1e3, number * 2**10] if unit == "kB" else
                    [number * 1e6, number * 2**20]) if "BYTES" in name else []
        if any(math.isclose(w, value, rel_tol=1e-9, abs_tol=1e-15) for w in want):
            hits.append(name)
    return hits


def _threshold_literals(text: str, constants) -> list[str]:
    out = []
    for i, line in _prose(text):
        for m in LITERAL.finditer(line):
            hits = _restates(float(m.group(1)), m.group(2), constants)
            if hits:
                out.append(f"line {i}: {m.group(0)!r} restates {', '.join(hits)}: {line.strip()}")
    return out


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, line in _prose(_read(path)):
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = _slug(m.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(path: str) -> list[tuple[int, str]]:
    out = []
    for i, line in _prose(_read(path)):
        line = re.sub(r"`[^`]*`", "", line)
        out.extend((i, m.group(1)) for m in LINK.finditer(line))
    return out


def test_rules_md_is_what_the_generator_writes(corpus_replay):
    want = gen_rules.render(corpus_replay[1])
    path = os.path.join(DOCS, "rules.md")
    assert os.path.exists(path), "docs/rules.md is missing: run `python tools/gen_rules.py`"
    assert _read(path) == want, "docs/rules.md is not current: run `python tools/gen_rules.py`"


def test_the_readme_is_short():
    lines = _read(README).count("\n")
    assert lines < README_MAX_LINES, f"README.md has {lines} lines (under {README_MAX_LINES})"


def test_the_literal_check_finds_restated_thresholds():
    constants = _constants()
    assert _restates(20, "%", constants)          # the INPUT-BOUND share
    assert _restates(1, "ms", constants)          # the stall floor
    assert _restates(4, "x", constants)           # the stall rule's ratio
    assert _restates(200, "ns", constants)        # traceml's own cost a step
    assert not _restates(55, "s", constants) and not _restates(70.3, "%", constants)
    assert _threshold_literals("floor max(1 ms, 20% of the median step)", constants)
    assert not _threshold_literals("```\nINPUT-BOUND (>= 20%)\n```\n", constants)


def test_the_readme_prose_restates_no_threshold():
    found = _threshold_literals(_read(README), _constants())
    assert not found, ("README.md quotes thresholds of traceml/findings/ (say where they "
                       "live, docs/rules.md, instead):\n" + "\n".join(found))


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_every_relative_link_points_at_a_file(path):
    bad = []
    for i, target in _links(path):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):      # http:, https:, mailto:
            continue
        file_part, _, fragment = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part \
            else path
        if not os.path.exists(dest):
            bad.append(f"line {i}: {target} (no such file)")
        elif fragment and dest.endswith(".md") and fragment not in _anchors(dest):
            bad.append(f"line {i}: {target} (no such heading)")
    assert not bad, f"{os.path.relpath(path, ROOT)}:\n" + "\n".join(bad)


def test_the_readme_keeps_its_two_commands():
    """.ci/run runs the ```sh block after <!-- test-command --> (awk)."""
    text = _read(README)
    for marker in ("<!-- demo-command -->", "<!-- test-command -->"):
        after = text.split(marker, 1)
        assert len(after) == 2, marker
        block = after[1].lstrip("\n")
        assert block.startswith("```sh\n"), marker
        command = block[len("```sh\n"):].split("\n```", 1)[0]
        assert command.startswith("python3 -m venv .venv") and "\n" not in command, marker


def test_the_api_reference_names_every_public_name():
    import traceml

    text = _read(os.path.join(DOCS, "api.md"))
    headings = [line for _, line in _prose(text) if line.startswith("#")]
    missing = [name for name in traceml.__all__
               if not any(re.search(rf"`(traceml\.)?{name}\b", h) for h in headings)]
    assert not missing, f"docs/api.md has no heading for {missing}"


def test_the_readme_first_report_is_the_replay_it_names(monkeypatch):
    # The README's first report is corpus.seed_table(0, 4) replayed: the
    # block after its command is that replay's text, line for line, as a
    # terminal shows it (wrapped at 100 columns).
    import corpus

    monkeypatch.delenv("TRACEML_TEXT_WIDTH", raising=False)

    text = _read(README)
    block = text.split("## A first report, line by line", 1)[1].split("```\n\n```\n", 1)[1]
    shown = block.split("\n```", 1)[0]
    assert shown == str(corpus.replay(corpus.seed_table(0, 4))), (
        "README.md's first report is not what its command prints today")


def test_the_api_page_lists_every_summary_key():
    """docs/api.md's list of a Report's summary keys holds every key of
    the summary's type (summary_types.Summary)."""
    import typing

    from traceml.summary_types import Summary

    doc = _read(os.path.join(ROOT, "docs", "api.md"))
    part = doc[doc.index("* `summary` / `to_dict()`"):doc.index("* `steps`: the per-step records")]
    missing = [k for k in typing.get_type_hints(Summary) if f"`{k}`" not in part]
    assert not missing, f"docs/api.md does not list the summary keys {missing}"
