"""The transparency suite, start method by start method: torch's
DataLoader behaviours that involve workers (iteration results, len,
worker errors, timeout, persistent workers, in_order=False, iterable
datasets; tests/launch_scripts/transparency.py, WORKER_CASES) under
``multiprocessing_context`` = fork, spawn and forkserver, compared value
by value

* with and without the launcher: ``python transparency.py --method M``
  and ``python -m traceml run transparency.py --method M`` print the same
  lines, and the launcher timed the loaders (it did not give up and hand
  torch's iterators back);
* with and without ``traceml.wrap``, in process.

tests/integration/test_launch.py has the cases without workers (exceptions,
warnings) and the default start method.  A spawned or forkserver worker
imports torch (about 1.5 s of CPU here), so those cases are split into
groups that each start a few workers: every test stays near 10 s on 2
shared cores (measured: 3-12 s each launched pair, 5-11 s each in
process).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import traceml  # noqa: E402 - after importorskip("torch")

SCRIPTS = Path(__file__).parent.parent / "launch_scripts"
SCRIPT = SCRIPTS / "transparency.py"
TIMEOUT = 300
WORKER_CASES = ("results", "lengths", "worker_error", "timeout", "persistent", "unordered",
                "iterable")
# Groups of cases for the start methods whose workers are slow to start.
GROUPS = (("results", "lengths"), ("worker_error", "timeout"), ("persistent",),
          ("unordered", "iterable"))

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")


def env():
    out = dict(os.environ)
    out.pop("PYTHONWARNINGS", None)
    out["PYTHONPATH"] = os.pathsep.join([str(SCRIPTS.parent.parent),
                                         out.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return out


def matrix():
    """Every case under fork, and once under a start method whose workers
    traceml does not hook (spawn and forkserver by turns: the launcher
    treats the two alike, start_method_of, and each group under both cost
    CI about a minute more)."""
    out = [pytest.param("fork", WORKER_CASES, id="fork")]
    for i, g in enumerate(GROUPS):
        method = ("spawn", "forkserver")[i % 2]
        out.append(pytest.param(method, g, id=f"{method}-{'-'.join(g)}"))
    return out


def test_the_cases_are_the_scripts():
    import importlib.util

    spec = importlib.util.spec_from_file_location("transparency_cases", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.WORKER_CASES == WORKER_CASES
    assert sorted(c for g in GROUPS for c in g) == sorted(WORKER_CASES)


@pytest.mark.slow
@pytest.mark.parametrize("method, cases", matrix())
def test_launched_prints_what_plain_prints(tmp_path, method, cases):
    args = [str(SCRIPT), "--method", method, *cases]
    run = tmp_path / "run.traceml"
    procs = [subprocess.Popen(cmd, cwd=tmp_path, env=env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
             for cmd in ([sys.executable, *args],
                         [sys.executable, "-m", "traceml", "run", "--save", str(run), *args])]
    (p_out, p_err), (l_out, l_err) = (p.communicate(timeout=TIMEOUT) for p in procs)
    l_err = l_err.decode("utf-8", "replace")
    assert procs[0].returncode == procs[1].returncode == 0, l_err
    assert l_out == p_out
    lines = p_out.decode().splitlines()
    assert [line.split(":", 1)[0] for line in lines] == [f"{method} {c}" for c in cases]
    # Timed by the launcher, not handed back to torch untimed.
    assert "stopped wrapping" not in l_err and "the report failed" not in l_err
    assert f"traceml · run saved to {run}" in l_err
    sources = traceml.load(run).to_dict()["sources"]
    assert sources and all(s["name"].startswith(f"{SCRIPT}:") for s in sources)
    assert sum(s["steps"] for s in sources) > 0


def in_process():
    out = [pytest.param("fork", g, id=f"fork-{'-'.join(g)}") for g in GROUPS]
    # One case each: the launched runs above compare them all.
    out += [pytest.param(m, (c,), id=f"{m}-{c}") for m, c in (
        ("spawn", "worker_error"), ("spawn", "unordered"), ("forkserver", "persistent"))]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("method, cases", in_process())
def test_wrap_gives_what_torch_gives_in_process(method, cases, monkeypatch):
    # Spawned and forkserver workers import the datasets by module name.
    monkeypatch.syspath_prepend(str(SCRIPTS))
    monkeypatch.delitem(sys.modules, "transparency", raising=False)
    import transparency

    for case in cases:
        fn = transparency.CASES[case]
        name = f"test_launch_transparency-{method}-{case}"
        assert fn(lambda loader, n=name: traceml.wrap(loader, name=n), ctx=method) \
            == fn(ctx=method), case
