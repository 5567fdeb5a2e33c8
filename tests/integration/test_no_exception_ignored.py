"""traceml wrapping multi-worker DataLoaders must not make torch print
"Exception ignored ... can only test a child process" (seen in 3 of 3 runs
before the C core stopped holding iterators in fork-cleared state).  Each
loop shape that can leave an iterator alive across a fork runs in a fresh
interpreter, whose stderr is checked."""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(TESTS)

SCRIPT = textwrap.dedent("""
    import faulthandler, sys, threading, time, warnings
    # A hang prints every thread's stack and exits, for the test to show.
    faulthandler.dump_traceback_later(240, exit=True)
    sys.path.insert(0, {tests!r})
    warnings.filterwarnings("ignore")
    import traceml
    from burn import BurnDataset
    from torch.utils.data import DataLoader

    def mk(nw, **kw):
        return DataLoader(BurnDataset(40, 0.002), batch_size=2, num_workers=nw, **kw)

    for i, b in enumerate(traceml.wrap(mk(2))):          # break out of a loop
        if i == 3:
            break
    for a, b in zip(traceml.wrap(mk(2), name="a"), traceml.wrap(mk(2), name="b")):
        pass                                              # zip of two loaders

    def look():                                           # report() from another thread
        for _ in range(5):
            traceml.report()
            time.sleep(0.01)

    t = threading.Thread(target=look)
    t.start()
    for b in traceml.wrap(mk(2, persistent_workers=True), name="p"):
        time.sleep(0.002)
    t.join()
    traceml.sweep(lambda num_workers: mk(num_workers), num_workers=(2, 0), steps=6,
                  progress=False)                         # a sweep
    dl = mk(2, persistent_workers=True)
    for _ in range(2):                                    # break, epoch after epoch
        for i, b in enumerate(traceml.wrap(dl, name="pe")):
            if i == 2:
                break
    it = iter(traceml.wrap(mk(3), name="held"))           # left open at exit
    next(it)
    next(it)
    print(traceml.report(source="pe")["steps"])
""")


@pytest.mark.slow
def test_multi_worker_loops_print_no_exception_ignored(tmp_path):
    script = tmp_path / "loops.py"
    script.write_text(SCRIPT.format(tests=TESTS))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "6"  # two epochs of 3 batches before each break
    assert "Exception ignored" not in done.stderr, done.stderr
    assert "can only test a child process" not in done.stderr, done.stderr
