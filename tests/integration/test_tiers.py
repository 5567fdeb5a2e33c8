"""The fast tier (`pytest -m "not slow"`) relies on the `slow` marker being
registered; with --strict-markers an unregistered one fails collection."""

import os
import sys

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

PYPROJECT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                         "pyproject.toml")


def test_slow_marker_is_registered(pytestconfig):
    with open(PYPROJECT, "rb") as f:
        options = tomllib.load(f)["tool"]["pytest"]["ini_options"]
    names = [m.split(":", 1)[0].strip() for m in options["markers"]]
    assert "slow" in names
    assert "--strict-markers" in options["addopts"].split()
    # And pytest itself sees it (the file it read is this one).
    assert any(m.split(":", 1)[0].strip() == "slow"
               for m in pytestconfig.getini("markers"))


def _imported_names(path):
    """Every module name a file imports (top-level and inside functions)."""
    import ast

    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def test_no_test_module_imports_another():
    """Shared helpers live in tests/support.py (and tests/corpus.py),
    fixtures in conftest.py: a test module imported by another runs its
    module-level code twice and hides fixtures behind noqa comments."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bad = []
    for root, _, files in os.walk(here):
        for name in files:
            if name.startswith("test_") and name.endswith(".py"):
                path = os.path.join(root, name)
                bad += [f"{os.path.relpath(path, here)}: {mod}" for mod in _imported_names(path)
                        if mod.split(".")[-1].startswith("test_")]
    assert bad == []
