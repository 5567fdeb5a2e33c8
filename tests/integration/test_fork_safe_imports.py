"""A report made in one thread while another forks DataLoader workers must
not leave a worker waiting forever on a module lock.  A module that a
thread is importing for the first time as the fork happens stays locked
in the child, whose importing thread no longer exists; torch's worker loop
then reads ``numpy.random`` and blocks (seen in CI, 2026-12-06, and once
in 57 runs of tests/integration/test_no_exception_ignored.py beside three
CPU hogs: the worker's main thread in ``_ModuleLock.acquire`` under
``numpy.__getattr__``, while the main process's report thread imported
SciPy).  So ``import traceml`` imports every module that ``report()``,
``compare()`` and the run file need, and a first report in a fresh
interpreter imports nothing."""

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import sys, time
    import traceml
    before = set(sys.modules)
    for run in range(2):
        traceml.reset()
        for i in range(160):
            traceml.step_begin()
            # every 4th fetch waits 3 ms, the rest 0.2 ms; the second run's
            # waits grow, so the trend and stall tests both run
            time.sleep((0.003 if i % 4 == 0 else 0.0002) * (1 + run * i / 80))
            traceml.fetch_done()
            time.sleep(0.001)
            traceml.step_end()
        if run == 0:
            first = traceml.report()
            str(first)
    second = traceml.report()
    text = str(second) + str(traceml.compare(first, second))
    second.to_dict()
    print("\\n".join(sorted(set(sys.modules) - before)))
""")


def test_a_first_report_imports_nothing_new():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []


RACE = textwrap.dedent("""
    import sys, threading, time
    sys.path.insert(0, {tests!r})
    import traceml
    from burn import BurnDataset
    from torch.utils.data import DataLoader
    for i in range(40):
        traceml.step_begin(); time.sleep(0.0005); traceml.fetch_done(); traceml.step_end()
    look = threading.Thread(target=traceml.report)
    look.start()
    loaders = 0
    while look.is_alive() or loaders < 3:
        for b in DataLoader(BurnDataset(4, 0.0), batch_size=2, num_workers=2):
            pass
        loaders += 1
    print(loaders)
""")


@pytest.mark.slow
def test_workers_forked_beside_a_first_report_start():
    # Before the imports moved to import time: 8 of 8 runs hung here.
    pytest.importorskip("torch")
    script = RACE.format(tests=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= 3
