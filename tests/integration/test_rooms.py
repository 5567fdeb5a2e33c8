"""One room per concern: the package's modules import each other without
cycles, each imports alone, sentences quote thresholds from the findings
families (never as literals), and a report builds from plain data without the
source registry."""

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pytest

import traceml
from traceml import findings, wrapping
from traceml.findings import comparison, input_bound, stall_shape, stall_threshold, sweeps
from traceml.build import build

from support import INFO, MS, records

# The package under test: the checkout, or an installed wheel (tools/check_dist.sh).
PKG = os.path.dirname(os.path.abspath(traceml.__file__))
# Every module of the package by dotted name under traceml ("build",
# "findings.stall_timing", "findings" for its __init__).
MODULES = sorted(
    os.path.relpath(os.path.join(d, f), PKG)[:-3].replace(os.sep, ".").removesuffix(".__init__")
    for d, _, files in os.walk(PKG) for f in files if f.endswith(".py"))
FAMILIES = sorted(m for m in MODULES if m.startswith("findings."))
# Entry points may import anything; _core is the C extension, a leaf.
ROOTS = {"__init__", "__main__", "demo"}


def _tree(module: str) -> ast.Module:
    path = os.path.join(PKG, *module.split("."))
    path = os.path.join(path, "__init__.py") if os.path.isdir(path) else path + ".py"
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read())


def _imports(module: str) -> set[str]:
    """The package modules ``module`` imports, at any level of the file
    (function-level imports included), by dotted name under traceml."""
    known = set(MODULES) | {"_core"}
    package = module.split(".")[:-1]
    if os.path.isdir(os.path.join(PKG, *module.split("."))):
        package = module.split(".")
    out = set()
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.ImportFrom):
            name = node.module or ""
            if node.level == 0:
                if name.split(".")[0] != "traceml":
                    continue
                base = name.split(".")[1:]
            else:
                base = package[:len(package) - (node.level - 1)] + (name.split(".") if name else [])
            dotted = ".".join(base)
            subs = {".".join(base + [a.name]) for a in node.names}
            hit = subs & known
            out.update(hit or ({dotted} & known))
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "traceml":
                    out.add(".".join(parts[1:]) or "__init__")
    out.discard(module)
    return out & (known | {"__init__"})


def test_no_import_cycles():
    graph = {m: (set() if m in ROOTS else _imports(m)) for m in MODULES}
    graph["_core"] = set()
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(m, path):
        if state.get(m) == 1:
            pytest.fail("import cycle: " + " -> ".join(path[path.index(m):] + [m]))
        if state.get(m) == 2:
            return
        state[m] = 1
        for dep in sorted(graph.get(m, ())):
            visit(dep, path + [m])
        state[m] = 2

    for m in graph:
        visit(m, [])
    # The rooms the design names stay apart: the findings families import
    # only each other, the C core and the formatting helpers.
    assert "render" not in graph["evidence"] and "report" not in graph["io"]
    for family in FAMILIES:
        assert graph[family] <= set(FAMILIES) | {"findings", "_core", "fmt"}, family


@pytest.mark.parametrize("module", [m for m in MODULES if m != "__init__"])
def test_each_module_imports_alone(module):
    done = subprocess.run([sys.executable, "-c", f"import traceml.{module}"],
                          capture_output=True, text=True, cwd=os.path.dirname(PKG))
    assert done.returncode == 0, done.stderr


# A threshold restated in a sentence: digits followed by a unit or a
# percent sign ("20%", "1 ms", "4x", "5 s").
LITERAL = re.compile(r"\d+(?:\.\d+)?\s?(?:%|ms\b|µs\b|ns\b|s\b|x\b|kB\b|MB\b)")
MARKUP = re.compile(r"style=|<\w")
SENTENCE_MODULES = ("render", "comparing", "sweeping", "build", "evidence", *FAMILIES)


def _sentence_literals(module: str) -> list[str]:
    """String literal parts of ``module`` (docstrings, format specs such as
    ``{x:.1f}`` and HTML markup left out) that restate a number with its
    unit."""
    tree = _tree(module)
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
        if isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            skip.update(id(n) for n in ast.walk(node.format_spec))
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in skip and not MARKUP.search(n.value) and LITERAL.search(n.value)]


def test_the_literal_pattern_finds_restated_thresholds():
    assert LITERAL.search("(>= 20%: TensorFlow's input-pipeline analyzer")
    assert LITERAL.search("floor max(1 ms, 20% of median step)")
    assert LITERAL.search("typically 4x the rest")
    assert not LITERAL.search("p95 wait") and not LITERAL.search("num_workers=(0, 1, 2, 4)")


@pytest.mark.parametrize("module", SENTENCE_MODULES)
def test_sentences_quote_thresholds_from_policy_not_literals(module):
    assert _sentence_literals(module) == []


def _threshold_sentences(rule):
    """Sentences that quote policy constants: diagnosis, stall rule, shape
    rule, and the sweep's "within REL_TOL" line."""
    best = {"condition": {"num_workers": 2}, "mean_s": 0.01, "close": ["num_workers=4"]}
    return (*findings.sentences([input_bound.diagnosis_finding(input_bound.INPUT_BOUND, 0.54),
                                 stall_threshold.stall_finding(rule),
                                 stall_shape.shape_finding(stall_shape.SHAPE_MOST_STALL)]),
            sweeps.sweep_best(best, 2))


def test_changing_a_policy_constant_changes_the_sentence(monkeypatch):
    rule = stall_threshold.stall_threshold_ns(np.full(20, 30 * MS), np.full(20, 35 * MS), None)
    assert rule.code == stall_threshold.RULE_ALL_SLOW
    before = _threshold_sentences(rule)
    assert ">= 20%" in before[0] and "max(1 ms, 20% of median step)" in before[1]
    assert "more than half of" in before[2] and "within 10% of it" in before[3]
    monkeypatch.setattr(input_bound, "INPUT_BOUND_SHARE", 0.3)
    monkeypatch.setattr(stall_threshold, "STALL_FLOOR_S", 2e-3)
    monkeypatch.setattr(stall_threshold, "STALL_FLOOR_STEP_SHARE", 0.25)
    monkeypatch.setattr(stall_threshold, "HEAVY_TAIL_MAX_STALL_SHARE", 0.6)
    monkeypatch.setattr(comparison, "REL_TOL", 0.15)
    after = _threshold_sentences(rule)
    assert ">= 30%" in after[0] and "max(2 ms, 25% of median step)" in after[1]
    assert "more than 60% of" in after[2] and "within 15% of it" in after[3]


def test_a_report_quotes_the_constant_in_force(monkeypatch):
    """The threshold moves the verdict and its sentence together."""
    recs = records(np.full(40, 3 * MS), np.full(40, 7 * MS), source=7)  # input share 30%
    sources = {}
    s = build(recs, INFO, 7, None, sources=sources).summary
    assert s["diagnosis"] == input_bound.INPUT_BOUND and "(>= 20%:" in s["diagnosis_rule"]
    monkeypatch.setattr(input_bound, "INPUT_BOUND_SHARE", 0.4)
    s = build(recs, INFO, 7, None, sources=sources).summary
    assert s["diagnosis"] == input_bound.BALANCED and "5% to 40%" in s["diagnosis_rule"]


# --- build() from plain data ------------------------------------------------------


@dataclass
class PlainSource:
    """What build() needs of a source: no registry, no wrap()."""

    name: str
    kind: str = "DataLoader"
    loader: Optional[dict] = None
    epochs: int = 1
    epoch_facts: dict = field(default_factory=dict)

    def loader_of(self, epoch):
        return (self.epoch_facts.get(int(epoch)) or {}).get("loader")


def _loader_source(name, num_workers, epochs):
    loader = {"num_workers": num_workers, "in_order": True}
    return PlainSource(name, loader=loader, epochs=epochs, epoch_facts={
        e: {"loader": loader, "worker_pids": None, "start_method": "fork",
            "torch_version": None, "usable_cpus": 4} for e in range(epochs)})


def test_build_from_plain_data_matches_numpy(monkeypatch):
    def no_registry(*_):
        raise AssertionError("build() read the source registry")

    for module in (wrapping, sys.modules["traceml.build"]):
        for name in ("sources", "by_name"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, no_registry)
    rng = np.random.default_rng(7)
    k, n = 3, 90
    wait = rng.integers(10_000, 40 * MS, n)
    compute = rng.integers(MS, 20 * MS, n)
    epoch = np.repeat([0, 1], n // 2)
    recs = np.concatenate([records(wait, compute, epoch=epoch, source=5),
                           records(np.full(4, MS), np.full(4, MS), source=9, t0=10**13)])
    sources = {5: _loader_source("train", k, 2), 9: PlainSource("other", kind="list")}
    r = build(recs, INFO, 5, 0.02, sources=sources, main_pid=12345)
    s = r.summary
    # The first k fetches of each epoch are start-up, the rest steady state.
    steady = np.ones(n, bool)
    steady[[0, 1, 2, n // 2, n // 2 + 1, n // 2 + 2]] = False
    w, c = wait[steady] * 1e-9, compute[steady] * 1e-9
    assert s["source"] == "train" and s["steps"] == n and s["steady_steps"] == steady.sum()
    assert s["sources"] == [{"name": "train", "steps": n}, {"name": "other", "steps": 4}]
    assert s["epoch_start"]["count"] == 2 * k
    for key, x in (("input_wait_s", w), ("compute_s", c), ("step_s", w + c)):
        assert s[key]["mean"] == pytest.approx(x.mean(), rel=1e-12)
        assert s[key]["median"] == pytest.approx(np.median(x), rel=1e-12)
        assert s[key]["p95"] == pytest.approx(np.percentile(x, 95), rel=1e-12)
        assert s[key]["total"] == pytest.approx(x.sum(), rel=1e-12)
    assert s["input_share"] == pytest.approx(w.sum() / (w + c).sum(), rel=1e-12)
    stalls = np.flatnonzero(steady & (wait > 20 * MS))
    assert s["stalls"]["count"] == len(stalls) and s["stalls"]["steps"] == stalls.tolist()
    assert s["stalls"]["rule"] == "given: wait > 0.02 s" and s["stalls"]["rule_code"] == "given"
    assert s["cadence"]["num_workers"] == k and s["loader"]["num_workers"] == k
    assert s["host"]["usable_cpus"] == 4
    assert "also recorded: 'other' (4 steps); see report(source=name)" in s["notes"]
    np.testing.assert_array_equal(r.steps, recs[recs["source"] == 5])


def test_build_reports_an_unknown_source_by_number():
    s = build(records(np.full(10, MS), np.full(10, MS), source=3), INFO, 3, None,
              sources={}).summary
    assert s["source"] == "3" and s["loader"] is None and s["host"] is None
    assert s["epoch_start"]["count"] == 1 and s["steady_steps"] == 9
