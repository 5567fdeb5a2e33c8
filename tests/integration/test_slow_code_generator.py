"""A wrapped generator (no DataLoader) makes its items in this process, as
a DataLoader at num_workers=0 does: its stalled fetches' stacks are
sampled (CPU only) and the function that makes the slow items named.  No
torch."""

import gc
import signal
import time

import traceml
from traceml import stacks
from traceml.findings import slow_code

from burn import burn_cpu


def parse_rows(i):
    burn_cpu(0.04)


def decode(i):
    burn_cpu(0.002)


def records(n=96):
    """``n`` items of 2 ms of CPU; every 8th also 40 ms in parse_rows."""
    for i in range(n):
        decode(i)
        if i % 8 == 0:
            parse_rows(i)
        yield i


def _run(iterable):
    rec = traceml.Recorder()
    for _ in rec.wrap(iterable, name="gen"):
        pass
    gc.collect()
    return rec.report()


def test_a_generators_slow_items_name_their_function():
    r = _run(records())
    block = r["slow_code"]
    assert block["status"] == "on" and block["in_main"], block
    f = slow_code.judge(block)
    # 12 slow items of 42 ms against 84 fast ones of 2 ms: parse_rows in
    # (nearly) every slow sample and in no fast one.
    assert f.code == "slow_code_named" and f.numbers["function"] == "parse_rows", (f, block)
    assert f.numbers["fast_share"] == 0.0 and f.numbers["slow_share"] > 0.8, f.numbers
    assert "Next: look at `parse_rows`" in str(r)
    # The generator is gone: sampling stopped and SIGPROF is back, with no
    # wall-clock timer armed around its fetches (CPU samples only).
    assert signal.getsignal(signal.SIGPROF) == signal.SIG_DFL
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    assert stacks.MAIN.live == 0
    assert block["samples"]["slow_off_cpu"] == 0 and block["samples"]["fast_off_cpu"] == 0


def test_a_list_or_a_plain_iterator_is_not_sampled():
    # Lists and ranges make nothing in Python; a class's iterator may hand
    # out items made elsewhere: no block, no sampler.
    items = list(records(24))
    r = _run(items)
    assert r["slow_code"] is None
    assert not stacks.MAIN.live


def test_a_generator_that_sleeps_draws_no_off_cpu_samples():
    # CPU only: a generator's fetch is not timed off CPU (the wall timer
    # would cost each fetch about 2.5 us), so sleeping items draw nothing.
    def sleepy():
        for i in range(24):
            time.sleep(0.02 if i % 4 == 0 else 0.0)
            yield i
    r = _run(sleepy())
    block = r["slow_code"]
    assert block is not None and block["status"] == "on", block
    assert block["samples"]["slow_off_cpu"] == 0 and block["samples"]["slow"] <= 2, block["samples"]
