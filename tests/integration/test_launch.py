"""The wrap iterator as torch's iterator to its user, and the launcher
(``python -m traceml run``) on scripts written as users write them.

What iter() of a wrapped DataLoader returns answers len(),
__length_hint__, bool() and the attribute reads it does not define itself
as torch's iterator does, while it holds it: ``tqdm(iter(loader))``,
``range(len(it))`` and reads of torch's private ``_workers`` run unchanged.
"""

import io
import re
import sys
import itertools
import operator

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, IterableDataset, TensorDataset  # noqa: E402 - after importorskip("torch")

import traceml  # noqa: E402 - after importorskip("torch")

pytestmark = pytest.mark.filterwarnings(
    "ignore:This DataLoader will create:UserWarning"
)

_names = itertools.count()


def uname(tag="launch"):
    return f"test_launch-{tag}-{next(_names)}"


def tensor_loader(num_workers, n=20, batch_size=4, **kw):
    ds = TensorDataset(torch.arange(float(n)), torch.arange(n))
    return DataLoader(ds, batch_size=batch_size, num_workers=num_workers, **kw)


class Stream(IterableDataset):
    """An iterable dataset without a length."""

    def __iter__(self):
        return iter(range(6))


# --- the wrap iterator, in process -------------------------------------------


@pytest.mark.parametrize("num_workers", [0, 2])
def test_len_and_length_hint_are_torchs(num_workers):
    loader = tensor_loader(num_workers, n=22)
    plain = iter(loader)
    it = iter(traceml.wrap(loader, name=uname()))
    assert len(it) == len(plain) == 6
    assert operator.length_hint(it) == operator.length_hint(plain) == 6
    assert it.__length_hint__() == 6
    assert bool(it) is bool(plain) is True
    del plain
    it.close()


@pytest.mark.parametrize("num_workers", [0, 2])
def test_range_len_loop_as_tqdm_users_write_it(num_workers):
    loader = tensor_loader(num_workers)
    expected = [b[1].tolist() for b in loader]
    it = iter(traceml.wrap(loader, name=(name := uname())))
    got = [next(it)[1].tolist() for _ in range(len(it))]
    assert got == expected
    with pytest.raises(StopIteration):
        next(it)
    assert traceml.report(source=name)["steps"] == len(expected)


def test_tqdm_of_the_iterator_knows_its_total():
    tqdm = pytest.importorskip("tqdm").tqdm
    loader = tensor_loader(0)
    bar = tqdm(iter(traceml.wrap(loader, name=uname())), file=io.StringIO())
    assert bar.total == len(loader) == 5
    assert sum(1 for _ in bar) == 5


def test_private_workers_read_off_torchs_iterator():
    loader = tensor_loader(2)
    it = iter(traceml.wrap(loader, name=uname()))
    inner = it.inner
    assert it._workers is inner._workers
    assert [w.pid for w in it._workers] == [w.pid for w in inner._workers]
    assert it._num_workers == 2
    assert hasattr(it, "_task_info")
    next(it)
    # Its own names first: steps, close, inner are the WrapIter's.
    assert it.steps == 1 and it.inner is inner
    it.close()


def test_missing_attribute_raises_torchs_error():
    loader = tensor_loader(0)
    plain = iter(loader)
    it = iter(traceml.wrap(loader, name=uname()))
    with pytest.raises(AttributeError) as ours:
        it.no_such_thing  # noqa: B018 - the read is the test
    with pytest.raises(AttributeError) as theirs:
        plain.no_such_thing  # noqa: B018 - the read is the test
    assert str(ours.value) == str(theirs.value)


def test_dunders_are_never_forwarded():
    it = iter(traceml.wrap(tensor_loader(0), name=uname()))
    assert hasattr(it.inner, "__dict__")
    assert not hasattr(it, "__dict__")
    with pytest.raises(AttributeError):
        it.__wrapped__  # noqa: B018 - the read is the test


def test_released_iterator_forwards_nothing_and_says_why():
    it = iter(traceml.wrap(tensor_loader(0), name=uname()))
    assert it._num_workers == 0
    assert len(list(it)) == 5
    assert it.inner is None
    with pytest.raises(AttributeError, match="released"):
        it._num_workers  # noqa: B018 - the read is the test
    with pytest.raises(TypeError, match="released"):
        len(it)
    assert operator.length_hint(it) == 0
    assert bool(it) is True
    assert repr(it) == "<traceml wrap of a released iterator>"


def test_no_length_raises_what_torch_raises():
    loader = DataLoader(Stream(), batch_size=2)
    with pytest.raises(TypeError) as theirs:
        len(iter(loader))
    it = iter(traceml.wrap(loader, name=uname()))
    with pytest.raises(TypeError) as ours:
        len(it)
    assert str(ours.value) == str(theirs.value)
    assert [b.tolist() for b in it] == [[0, 1], [2, 3], [4, 5]]


def test_generators_and_lists_as_python_has_them():
    gen = iter(traceml.wrap((i for i in range(3)), name=uname()))
    with pytest.raises(TypeError, match="'generator' has no len"):
        len(gen)
    assert bool(gen) is True
    assert operator.length_hint(gen, 7) == 7   # neither len nor hint: the default
    lst = iter(traceml.wrap([1, 2, 3], name=uname()))
    assert operator.length_hint(lst) == 3
    next(lst)
    assert operator.length_hint(lst) == 2     # list_iterator's own hint
    assert list(lst) == [2, 3]


def test_repr_names_the_inner_iterator():
    loader = tensor_loader(0)
    it = iter(traceml.wrap(loader, name=uname()))
    assert repr(it) == f"<traceml wrap of {it.inner!r}>"
    assert "_SingleProcessDataLoaderIter" in repr(it)


def test_attribute_writes_stay_refused():
    it = iter(traceml.wrap(tensor_loader(0), name=uname()))
    with pytest.raises(AttributeError):
        it._num_workers = 3
    assert it.inner._num_workers == 0


# --- the launcher, in process ---------------------------------------------------

from traceml import launch  # noqa: E402 - the section's own import


def make_launcher(**opts):
    parser, _ = launch._build_parser()
    ns = parser.parse_args([])
    for k, v in opts.items():
        setattr(ns, k, v)
    return launch.Launcher(ns, "test")


@pytest.fixture
def launcher():
    la = make_launcher()
    before = {k: DataLoader.__dict__.get(k) for k in ("__new__", "__iter__", "__init__")}
    la.install()   # torch is imported: patched at once
    yield la
    la.unpatch()
    assert {k: DataLoader.__dict__.get(k) for k in before} == before


@pytest.mark.parametrize("argv, split", [
    (["s.py"], ([], "s.py", None, [])),
    (["--save", "x", "s.py", "--save", "y"], (["--save", "x"], "s.py", None, ["--save", "y"])),
    (["--save=x", "-q", "s.py", "-q"], (["--save=x", "-q"], "s.py", None, ["-q"])),
    (["--live", "-m", "pkg.mod", "-m", "z"], (["--live"], None, "pkg.mod", ["-m", "z"])),
    (["-mpkg", "a"], ([], None, "pkg", ["a"])),
    (["--quiet", "--", "-odd.py", "b"], (["--quiet"], "-odd.py", None, ["b"])),
    (["--quiet"], (["--quiet"], None, None, [])),
])
def test_options_end_where_the_script_begins(argv, split):
    _, valued = launch._build_parser()
    assert launch.split_argv(argv, valued) == split


def test_patch_is_class_attributes_restored_after(launcher):
    assert DataLoader.__iter__ is not launcher.saved["__iter__"]
    assert DataLoader.__init__ is not launcher.saved["__init__"]
    launcher.unpatch()
    assert DataLoader.__dict__["__iter__"] is launcher.saved["__iter__"]
    assert DataLoader.__dict__["__init__"] is launcher.saved["__init__"]
    assert "__new__" not in DataLoader.__dict__
    assert len(list(tensor_loader(0))) == 5


def test_signature_and_construction_errors_are_torchs(launcher, capsys):
    import inspect

    launcher.unpatch()
    plain = inspect.signature(DataLoader)
    launcher.install()
    assert inspect.signature(DataLoader) == plain
    assert DataLoader.__init__.__qualname__ == "DataLoader.__init__"
    with pytest.raises(ValueError, match="prefetch_factor") as err:
        DataLoader(TensorDataset(torch.arange(4.0)), prefetch_factor=2)
    # Shown as uncaught: torch's __init__ right under the caller.
    launcher.show_exception(err.value, None)
    shown = capsys.readouterr().err
    assert "traceml/launch.py" not in shown
    assert shown.count("in __init__") == 1 and "dataloader.py" in shown


def test_each_loader_a_source_named_by_its_site(launcher):
    def make(n):
        return DataLoader(TensorDataset(torch.arange(float(n))), batch_size=4)  # the site

    site = f"{launcher._short(__file__)}:{make.__code__.co_firstlineno + 1}"
    train, val = make(16), make(8)
    for _ in range(2):
        assert sum(1 for _ in train) == 4
        assert sum(1 for _ in val) == 2
    sources = {s.name: s.epochs for s in launcher.recorder.sources.by_id.values()}
    assert sources[site] == 2 and sources[f"{site}#2"] == 2
    del train, val
    again = make(8)          # built where a gone loader was: its source goes on
    list(again)
    sources = {s.name: s.epochs for s in launcher.recorder.sources.by_id.values()}
    assert sources[site] == 3
    assert launcher.wrapped == 5


def test_subclass_named_where_it_is_built(launcher):
    class Mine(DataLoader):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)

    loader = Mine(TensorDataset(torch.arange(8.0)), batch_size=4); line = sys._getframe().f_lineno  # noqa: E702 - the site and its line together
    assert len(list(loader)) == 2
    assert f"{launcher._short(__file__)}:{line}" in launcher.recorder.sources.by_name


def test_a_loader_the_script_wraps_itself_is_timed_once(launcher):
    loader = tensor_loader(0)
    name = uname()
    assert len(list(traceml.wrap(loader, name=name))) == 5
    assert launcher.wrapped == 0
    assert traceml.report(source=name)["steps"] == 5


def test_iterating_after_the_report_is_torchs_own(launcher):
    launcher.unpatch()
    it = iter(tensor_loader(0))
    assert type(it).__name__ == "_SingleProcessDataLoaderIter"


def test_traceback_shown_without_the_launchers_frames(launcher, capsys):
    code = compile("def f():\n    raise KeyError('k')\nf()\n", "/tmp/user_script.py", "exec")
    try:
        exec(code, {})
    except KeyError as exc:
        launcher.show_exception(exc, code)
    err = capsys.readouterr().err
    assert err.startswith('Traceback (most recent call last):\n  File "/tmp/user_script.py", line 3')
    assert "test_launch.py" not in err and "KeyError: 'k'" in err


# --- the launcher on scripts written as users write them ---------------------
#
# Each script runs twice, as `python script.py` and as `python -m traceml
# run script.py` (at once, to halve the wait), from a scratch directory.
# Every run imports torch: these are slow.

import os  # noqa: E402 - the section's own imports
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402

SCRIPTS = Path(__file__).parent.parent / "launch_scripts"
LAUNCH = [sys.executable, "-m", "traceml", "run"]
TIMEOUT = 300


def site_of(script, text="DataLoader("):
    """file:line of the first line of ``script`` that builds a DataLoader."""
    for n, line in enumerate(script.read_text().splitlines(), 1):
        if text in line and not line.lstrip().startswith(("#", "from", "import")):
            return f"{script.name}:{n}"
    raise AssertionError(f"no {text} in {script}")


def env():
    out = dict(os.environ)
    out.pop("PYTHONWARNINGS", None)
    # The checkout's traceml, wherever the scratch directory is.
    out["PYTHONPATH"] = os.pathsep.join([str(SCRIPTS.parent.parent),
                                         out.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return out


def _default_sigint():
    # As a terminal starts a script: a shell that starts pytest in the
    # background leaves SIGINT ignored, which children inherit, and Python
    # then installs no KeyboardInterrupt handler.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(cmd, cwd):
    return subprocess.Popen(cmd, cwd=cwd, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=_default_sigint)


def both(args, cwd, launch_opts=()):
    """(plain, launched): each (returncode, stdout, stderr, pid)."""
    procs = [start([sys.executable, *args], cwd), start([*LAUNCH, *launch_opts, *args], cwd)]
    out = []
    for p in procs:
        so, se = p.communicate(timeout=TIMEOUT)
        out.append((p.returncode, so, se.decode("utf-8", "replace"), p.pid))
    return out


def run_file(cwd, pid):
    return Path(cwd) / f"traceml-run-{pid}.traceml"


def assert_reported(err, site, path, steps=None):
    assert "traceml · " in err, err
    assert site in err, err
    assert f"traceml · run saved to {path}" in err
    rep = traceml.load(path)
    assert site in rep["source"]
    if steps is not None:
        assert rep["steps"] == steps
    return rep


@pytest.mark.slow
@pytest.mark.parametrize("num_workers", [0, 2])
def test_plain_loop(tmp_path, num_workers):
    script = SCRIPTS / "plain_loop.py"
    plain, launched = both([str(script), str(num_workers)], tmp_path)
    assert plain[0] == launched[0] == 0
    assert launched[1] == plain[1] and b"epoch 1: 8 batches" in plain[1]
    assert plain[2] == ""
    assert_reported(launched[2], site_of(script), run_file(tmp_path, launched[3]), steps=16)


@pytest.mark.slow
def test_exit_status_of_the_script_is_kept(tmp_path):
    script = SCRIPTS / "exit_code.py"
    plain, launched = both([str(script)], tmp_path)
    assert plain[0] == launched[0] == 3
    assert launched[1] == plain[1] == b"seen 40\n"
    assert launched[2].startswith(plain[2]) and plain[2] == "not enough data\n"
    assert_reported(launched[2], site_of(script), run_file(tmp_path, launched[3]), steps=10)


@pytest.mark.slow
def test_uncaught_exception_traceback_then_report(tmp_path):
    script = SCRIPTS / "raises.py"
    plain, launched = both([str(script)], tmp_path)
    assert plain[0] == launched[0] == 1
    assert launched[1] == plain[1]
    # Python's traceback, frame for frame, then the report.
    assert plain[2].startswith("Traceback (most recent call last):")
    assert plain[2].endswith("ValueError: batch 3 holds [12.0, 13.0, 14.0, 15.0]\n")
    assert launched[2].startswith(plain[2])
    assert_reported(launched[2], site_of(script), run_file(tmp_path, launched[3]))


def _stopped(cmd, cwd, sig):
    """Run ``cmd`` until it prints its first line, send ``sig``, wait."""
    p = start(cmd, cwd)
    first = p.stdout.readline()
    p.send_signal(sig)
    out, err = p.communicate(timeout=TIMEOUT)
    return p.returncode, first + out, err.decode("utf-8", "replace"), p.pid


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stopped_by_a_signal(tmp_path, sig):
    script = SCRIPTS / "interrupted.py"
    results = {}
    runs = [("plain", [sys.executable, str(script)]), ("launched", [*LAUNCH, str(script)])]
    threads = [threading.Thread(target=lambda k=k, c=c: results.__setitem__(k, _stopped(c, tmp_path, sig)))
               for k, c in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    plain, launched = results["plain"], results["launched"]
    # As Python ends: by the signal itself (130 and 143 in a shell).
    assert plain[0] == launched[0] == -sig
    assert launched[1] == plain[1] == b"training\n"
    err = launched[2]
    if sig == signal.SIGINT:
        assert "KeyboardInterrupt" in plain[2]
        assert err.index("KeyboardInterrupt") < err.index("traceml · ")
    else:
        assert plain[2] == ""
    assert_reported(err, site_of(script), run_file(tmp_path, launched[3]))


@pytest.mark.slow
def test_module_form(tmp_path):
    shutil.copytree(SCRIPTS / "userpkg", tmp_path / "userpkg")
    for args, code in ((["--ok"], 0), (["--no"], 5)):
        plain, launched = both(["-m", "userpkg.train", *args], tmp_path)
        assert plain[0] == launched[0] == code
        assert launched[1] == plain[1]
        assert b"package userpkg spec userpkg.train" in plain[1]
        assert_reported(launched[2], "userpkg/train.py:9", run_file(tmp_path, launched[3]),
                        steps=6)


@pytest.mark.slow
def test_transparency_value_by_value(tmp_path):
    """torch's behaviours (results, len, exceptions, worker errors, timeout,
    persistent workers, in_order=False, start methods, iterable datasets,
    warnings) print the same with and without the launcher."""
    script = SCRIPTS / "transparency.py"
    plain, launched = both([str(script)], tmp_path, ["--no-save"])
    assert plain[0] == launched[0] == 0
    assert launched[1] == plain[1]
    assert len(plain[1].splitlines()) == len(launch_cases())
    # The script's own warning, where the plain run prints it.
    first = plain[2].splitlines()[:2]
    assert first[0].endswith("UserWarning: transparency.py: a warning of the script's own")
    assert launched[2].splitlines()[:2] == first
    assert "traceml · " in launched[2]


def launch_cases():
    import importlib.util

    spec = importlib.util.spec_from_file_location("transparency", SCRIPTS / "transparency.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CASES


FAST_CASES = ("results", "lengths", "exceptions", "unordered", "iterable", "warns")


@pytest.mark.parametrize("case", [c if c in FAST_CASES else pytest.param(c, marks=pytest.mark.slow)
                                  for c in ("results", "lengths", "exceptions", "worker_error",
                                            "timeout", "persistent", "unordered",
                                            "start_methods", "iterable", "warns")])
def test_transparency_in_process(case, monkeypatch):
    """Each case with traceml.wrap and without, value by value."""
    # Spawned workers import the datasets by module name.
    monkeypatch.syspath_prepend(str(SCRIPTS))
    monkeypatch.delitem(sys.modules, "transparency", raising=False)
    import transparency

    fn = transparency.CASES[case]
    assert fn(lambda loader: traceml.wrap(loader, name=uname(case))) == fn()


@pytest.mark.slow
def test_console_script(tmp_path):
    exe = Path(sys.executable).with_name("traceml")
    if not exe.exists():
        pytest.skip("no traceml console script next to the interpreter (pip install -e .)")
    script = SCRIPTS / "plain_loop.py"
    p = subprocess.run([str(exe), "run", str(script)], cwd=tmp_path, env=env(),
                       capture_output=True, timeout=TIMEOUT)
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env(),
                           capture_output=True, timeout=TIMEOUT)
    assert p.returncode == 0 and p.stdout == plain.stdout
    assert "traceml · " in p.stderr.decode()
    assert list(tmp_path.glob("traceml-run-*.traceml"))


@pytest.mark.slow
def test_a_script_without_loaders_gets_one_line_and_no_file(tmp_path):
    script = tmp_path / "hello.py"
    script.write_text("import sys\nprint('hello', sys.argv[1:])\n")
    plain, launched = both([str(script), "x"], tmp_path)
    assert plain[0] == launched[0] == 0 and launched[1] == plain[1] == b"hello ['x']\n"
    assert launched[2] == ("traceml · nothing recorded: " + str(script)
                           + " iterated no DataLoader (no run file written)\n")
    assert not list(tmp_path.glob("*.traceml"))


@pytest.mark.parametrize("args, code, says", [
    ([], 2, "a script to run"),
    (["/nonexistent/x.py"], 2, "can't open file '/nonexistent/x.py'"),
    (["-m", "no_such_module_zz"], 1, "No module named no_such_module_zz"),
    (["--stuck-after", "-1", "x.py"], 2, "--stuck-after must be"),
])
def test_usage_errors(tmp_path, args, code, says):
    p = subprocess.run([*LAUNCH, *args], cwd=tmp_path, env=env(), capture_output=True,
                       timeout=TIMEOUT)
    assert p.returncode == code
    assert says in p.stderr.decode()
    assert not list(tmp_path.glob("*.traceml"))


@pytest.mark.slow
def test_help_names_the_default_run_file():
    p = subprocess.run([*LAUNCH, "--help"], env=env(), capture_output=True, timeout=TIMEOUT)
    assert p.returncode == 0
    text = p.stdout.decode()
    assert "traceml-run-<pid>.traceml" in text and "-m module" in text
    top = subprocess.run([sys.executable, "-m", "traceml", "--help"], env=env(),
                         capture_output=True, timeout=TIMEOUT)
    assert "run a script" in top.stdout.decode()


# --- under torchrun: 2 ranks, gloo on the CPU ---------------------------------
#
# torchrun runs the script (or `-m traceml run script.py`) on 2 ranks,
# each rank's stdout and stderr kept in a file of its own (--redirects).
# A monitor interval of 2 s lets every rank end by itself before the agent
# looks (with the default, the first rank to exit non-zero gets the other
# one SIGTERMed, plain or launched alike).

import glob  # noqa: E402 - the section's own import

TORCHRUN_OUTER = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                  "ROLE_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "NODE_RANK")


def torchrun(args, cwd, logs, launched):
    """Start a 2-rank torchrun of ``args`` (under the launcher when
    ``launched``), each rank's output into ``logs``."""
    e = {k: v for k, v in env().items() if k not in TORCHRUN_OUTER}
    e["OMP_NUM_THREADS"] = "1"
    e.update(LIGHTNING_OFFLINE)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "--max_restarts=0", "--monitor-interval=2", f"--log-dir={logs}", "--redirects=3",
           *(["-m", "traceml", "run"] if launched else []), *args]
    return subprocess.Popen(cmd, cwd=cwd, env=e, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)


def torchrun_both(args, tmp_path):
    """(plain, launched): each (torchrun's status, its own output, [each
    rank's (stdout, stderr)], the folder it ran in)."""
    runs = []
    for kind in ("plain", "launched"):
        cwd = tmp_path / kind
        cwd.mkdir()
        runs.append((cwd, torchrun(args, cwd, cwd / "logs", kind == "launched")))
    out = []
    for cwd, p in runs:
        try:
            text, _ = p.communicate(timeout=TIMEOUT)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)   # torchrun stops its ranks
                p.wait(timeout=30)
        ranks = []
        for r in range(2):
            (folder,) = glob.glob(str(cwd / "logs" / "*" / "attempt_0" / str(r)))
            ranks.append(tuple((Path(folder) / f"{s}.log").read_text() for s in ("stdout", "stderr")))
        out.append((p.returncode, text.decode("utf-8", "replace"), ranks, cwd))
    return out


def _rank_files(cwd):
    return sorted(cwd.glob("traceml-run-*.traceml"))


def exit_statuses(run, code):
    """torchrun's summary names each failed rank's own exit status.  Where
    every rank exits with ``code``, the first to exit is the root cause and
    torchrun may end the other with SIGTERM (-15) before its own exit: the
    summary then lists one ``code`` and one -15."""
    assert run[0] == (1 if code else 0), run[1]
    statuses = re.findall(r"exitcode  : (-?\d+) \(pid", run[1])
    if not code:
        assert statuses == [], run[1]
        return
    assert len(statuses) == 2 and str(code) in statuses, run[1]
    assert set(statuses) <= {str(code), "-15"}, run[1]


def check_job_report(launched, script, plain_err1):
    """Rank 0 printed and saved the job's report; rank 1 said where its
    steps went."""
    err0, err1 = launched[2][0][1], launched[2][1][1]
    site = f"{script.parent}/{site_of(script)}"     # outside the launch directory
    assert f"traceml · {site} (max of 2 ranks) · 16 steps" in err0, err0
    assert "2 ranks: gathered 0, 1" in err0
    (path,) = _rank_files(launched[3])
    assert f"traceml · run saved to {path}\n" in err0
    job = traceml.load(path)
    assert job["steps"] == 16 and sorted(job.to_dict()["ranks"]["gathered"]) == [0, 1]
    assert err1.startswith(plain_err1 + "traceml · rank 1 of 2: steps sent to rank 0, "
                           "which prints the job's report\n")


@pytest.mark.slow
@pytest.mark.parametrize("code", [0, 3])
def test_torchrun_rank0_prints_the_jobs_report(tmp_path, code):
    """destroy_process_group() at the end of the script: the report is
    made first, while the group is up; rank 0 prints and saves the job's
    report, gathered over torch.distributed; each rank keeps its exit
    status and output."""
    script = SCRIPTS / "ranks_loop.py"
    plain, launched = torchrun_both([str(script), "destroy"] + (["exit3"] if code else []),
                                    tmp_path)
    for run in (plain, launched):
        exit_statuses(run, code)
    for r in range(2):
        assert launched[2][r][0] == plain[2][r][0] == f"rank {r} of 2: 16 steps, total 2016.0\n"
        assert plain[2][r][1] == f"rank {r} env {r}\n"
    assert launched[2][0][1].startswith(plain[2][0][1])
    check_job_report(launched, script, plain[2][1][1])
    assert not _rank_files(plain[3])


@pytest.mark.slow
def test_torchrun_group_left_up_at_exit(tmp_path):
    """No destroy_process_group(): the report is made at exit, the group
    still up.  The exit status is not compared: torch's gloo often aborts
    at interpreter teardown with a group left up ("terminate called
    without an active exception"), plain or launched."""
    script = SCRIPTS / "ranks_loop.py"
    plain, launched = torchrun_both([str(script), "atexit"], tmp_path)
    for r in range(2):
        assert launched[2][r][0] == plain[2][r][0] == f"rank {r} of 2: 16 steps, total 2016.0\n"
    check_job_report(launched, script, "rank 1 env 1\n")


@pytest.mark.slow
@pytest.mark.parametrize("code", [0, 3])
def test_torchrun_ranks_without_a_group_save_their_own(tmp_path, code):
    """No process group at exit: every rank saves its own run file and
    says so; rank 0 also prints its own report; each rank keeps its exit
    status and output."""
    script = SCRIPTS / "ranks_loop.py"
    plain, launched = torchrun_both([str(script), "nogroup"] + (["exit3"] if code else []),
                                    tmp_path)
    for run in (plain, launched):
        exit_statuses(run, code)
    files = _rank_files(launched[3])
    assert len(files) == 2
    for r in range(2):
        out, err = launched[2][r]
        assert out == plain[2][r][0] and out.startswith(f"rank {r} of 2: 16 steps, total ")
        assert err.startswith(plain[2][r][1])
        assert f"traceml · rank {r} of 2: this rank's own report (no process group at exit); " \
               "every rank saves its own run file\n" in err, err
        saved = [f for f in files if f"traceml · run saved to {f}\n" in err]
        assert len(saved) == 1 and traceml.load(saved[0])["steps"] == 16
        assert ("16 steps in 1 epoch" in err) is (r == 0)


# --- Lightning: Trainer.fit run unmodified ----------------------------------------
#
# tests/launch_scripts/lightning_fit.py: two epochs of 8 training batches
# and 2 validation batches.  Plain and launched run side by side, each in
# a folder of its own (the callback writes into the working folder).

LIGHTNING_OFFLINE = {"DO_NOT_TRACK": "1", "WANDB_MODE": "disabled"}


def both_apart(args, tmp_path):
    """(plain, launched) as both() gives them, each run in its own folder
    (the fourth item is the folder, not the PID)."""
    procs = []
    for kind, cmd in (("plain", [sys.executable]), ("launched", LAUNCH)):
        cwd = tmp_path / kind
        cwd.mkdir()
        e = env()
        e.update(LIGHTNING_OFFLINE)
        procs.append((cwd, subprocess.Popen([*cmd, *args], cwd=cwd, env=e,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
    out = []
    for cwd, p in procs:
        so, se = p.communicate(timeout=TIMEOUT)
        out.append((p.returncode, so, se.decode("utf-8", "replace"), cwd))
    return out


def sources_of(path):
    return {s["name"]: s["steps"] for s in traceml.load(path).to_dict()["sources"]}


@pytest.mark.slow
@pytest.mark.parametrize("mode, code", [("fit", 4), ("hook", 0)])
def test_lightning_trainer_fit(tmp_path, mode, code):
    """Trainer.fit, unmodified: its output and exit status are kept, the
    report shows the training loader (16 steps) and names the validation
    one (4), each under the script's DataLoader(...) line, also where
    Lightning wraps DataLoader.__init__ (the module's hooks)."""
    pytest.importorskip("lightning")
    script = SCRIPTS / "lightning_fit.py"
    plain, launched = both_apart([str(script), mode] + (["exit4"] if code else []), tmp_path)
    assert plain[0] == launched[0] == code, launched[2]
    assert launched[1] == plain[1] and plain[1].startswith(b"fit done: global_step 16, ")
    assert launched[2].startswith(plain[2])
    lines = script.read_text().splitlines()
    at = {"fit": ("def train_loader", "def val_loader"),
          "hook": ("def train_dataloader", "def val_dataloader")}[mode]
    train, val = (f"{script}:{lines.index(next(t for t in lines if h in t)) + 2}" for h in at)
    (path,) = launched[3].glob("traceml-run-*.traceml")
    assert_reported(launched[2], train, path, steps=16)
    assert sources_of(path) == {train: 16, val: 4}
    assert "timed by the script's own" not in launched[2]


@pytest.mark.slow
def test_lightning_callback_under_the_launcher_times_each_loader_once(tmp_path):
    """With traceml's TraceMLCallback, the training loader is the
    callback's (its files, 16 steps, as without the launcher); the
    launcher times only what the callback leaves (validation: 4 steps)
    and says so."""
    pytest.importorskip("lightning")
    script = SCRIPTS / "lightning_fit.py"
    plain, launched = both_apart([str(script), "callback"], tmp_path)
    assert plain[0] == launched[0] == 0, launched[2]
    assert launched[1] == plain[1]
    assert launched[2].startswith(plain[2])
    from traceml.integrations import RUN_FILE

    for run in (plain, launched):
        own = traceml.load(run[3] / RUN_FILE)
        assert own["source"] == "train" and own["steps"] == 16
    (path,) = launched[3].glob("traceml-run-*.traceml")
    lines = script.read_text().splitlines()
    val = f"{script}:{lines.index('def val_loader():') + 2}"
    assert sources_of(path) == {val: 4}
    assert ("traceml · 2 epoch(s) timed by the script's own traceml.wrap or a traceml "
            "trainer integration, not again by the launcher\n") in launched[2]


def test_huggingface_callback_claims_its_loader(launcher):
    """The Hugging Face callback times the Trainer's loader with probes:
    it claims the loader at on_train_begin, and the launcher leaves it."""
    from traceml.integrations import huggingface, is_claimed

    loader = tensor_loader(0)
    assert not is_claimed(loader)
    huggingface._CallbackBody().on_train_begin(None, None, None, train_dataloader=loader)
    assert is_claimed(loader)
    assert type(iter(loader)).__name__ == "_SingleProcessDataLoaderIter"
    assert launcher.wrapped == 0 and launcher.timed_elsewhere == 1
    assert not is_claimed(tensor_loader(0))


@pytest.mark.slow
def test_torchrun_lightning_ddp_callback_and_launcher_time_once(tmp_path):
    """Lightning DDP with TraceMLCallback on 2 ranks under the launcher
    (tests/trainer_ranks_worker.py): the callback writes the job's report
    as without the launcher; the launcher, left nothing to time, gathers
    nothing and writes no file."""
    pytest.importorskip("lightning")
    import json

    worker = SCRIPTS.parent / "trainer_ranks_worker.py"
    out = tmp_path / "out"
    out.mkdir()
    p = torchrun([str(worker), "lightning", str(out)], tmp_path, tmp_path / "logs", True)
    try:
        text, _ = p.communicate(timeout=TIMEOUT)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=30)
    assert p.returncode == 0, text.decode("utf-8", "replace")
    results = [json.loads((out / f"result{r}.json").read_text()) for r in range(2)]
    assert results[0]["global_step"] == 24 and results[0]["loader_types"] == ["_Wrapped"]
    assert traceml.load(results[0]["paths"]["run"])["steps"] == 24 and results[1]["paths"] is None
    err0 = (next((tmp_path / "logs").glob("*/attempt_0/0")) / "stderr.log").read_text()
    assert ("traceml · nothing left to record on any of the 2 ranks: the 1 epoch(s) of "
            "DataLoaders were timed by the script's own traceml.wrap or a traceml trainer "
            "integration") in err0, err0
    assert not list(tmp_path.glob("traceml-run-*.traceml"))
