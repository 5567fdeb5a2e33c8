import gc
import os
import sys
import threading
import time

import pytest

# The tests import the package from the checkout (built in place by
# `pip install -e .`); keep the checkout first on sys.path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The tests read the terminal views' words one line a sentence: wrapped at
# 100 columns, a phrase would cross a line break where a number in it grows
# a digit.  Their wrapping has tests of its own (tests/unit/test_render.py);
# subprocesses inherit the setting.
os.environ["TRACEML_TEXT_WIDTH"] = "0"

import traceml
from traceml import _core

# How long a test's leftover threads get to end before the next test
# (threads_ended): a closed queue's feeder ends within milliseconds; a
# live persistent loader's never does, and costs the next test this much.
THREADS_WAIT_S = 1.0


@pytest.fixture(autouse=True)
def fresh_record():
    """Every test starts and ends with an empty store and no cap."""
    traceml.reset()
    _core.default_recorder()._set_capacity_limit(None)
    yield
    traceml.reset()
    _core.default_recorder()._set_capacity_limit(None)


@pytest.fixture(autouse=True)
def threads_ended():
    """Threads a test started (a DataLoader's queue feeders, a sampler)
    have ended before the next test forks, or at most THREADS_WAIT_S
    later.

    A feeder thread of a queue just closed is still freeing its buffers
    for a moment; a fork then copies its allocator lock held.  glibc's
    malloc resets its locks in the child, AddressSanitizer's (GCC 12) does
    not, and the child waits forever (tools/sanitize.sh, seen in CI on
    2026-12-03: a DataLoader worker waiting on ASan's size-class mutex
    right after fork, the test after a persistent-workers test)."""
    before = set(threading.enumerate())
    yield
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    if not left:
        return
    gc.collect()  # a loader in a reference cycle shuts its workers down now
    deadline = time.monotonic() + THREADS_WAIT_S
    for t in left:
        t.join(max(0.0, deadline - time.monotonic()))


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
