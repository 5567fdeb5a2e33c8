"""The fast tier (`pytest -m "not slow"`) relies on the `slow` marker being
registered; with --strict-markers an unregistered one fails collection."""

import os
import sys

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

PYPROJECT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
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
