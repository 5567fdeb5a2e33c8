import os
import sys

import pytest

# The tests import the package from the checkout (built in place by
# `pip install -e .`); keep the checkout first on sys.path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import traceml
from traceml import _core


@pytest.fixture(autouse=True)
def fresh_record():
    """Every test starts and ends with an empty store and no cap."""
    traceml.reset()
    _core.default_recorder()._set_capacity_limit(None)
    yield
    traceml.reset()
    _core.default_recorder()._set_capacity_limit(None)


@pytest.fixture
def sampler_off():
    """The /proc sampler off for the test (tests of the workers' own
    timing that want no sampler thread beside them), on again after."""
    traceml.configure(sampler=False)
    yield
    traceml.configure(sampler=True)


@pytest.fixture
def loader_source():
    """``make(num_workers, epochs=1)``: registers the synthetic DataLoader
    source (support.SYNTHETIC) that hand-made records belong to; dropped
    after the test."""
    import support

    yield support.register_loader_source
    support.SOURCES.pop(support.SYNTHETIC, None)
