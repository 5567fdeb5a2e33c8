"""notebooks/investigate.ipynb: stored clean, installs itself, and runs
headless end to end.

The notebook is executed with nbclient on the python3 kernel (ipykernel,
launched with this interpreter) in a temporary working directory, with its
parameters cell set to QUICK = True and a temporary dataset directory.

The install cell is plain Python, so its ways of failing are tested by
running its source under IPython in a subprocess: a stub package named
traceml on PYTHONPATH (PyPI's `traceml` or traceml-ai's alias shadowing this
one), no traceml at all, a bad TRACEML_SOURCE, a wheel for another Python, a
Colab upload of the wrong file.  Its installing paths (a wheel next to the
notebook, Colab's upload) run in tools/check_dist.sh, from a built wheel in a
fresh venv.
"""

import ast
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOK = os.path.join(ROOT, "notebooks", "investigate.ipynb")

nbformat = pytest.importorskip("nbformat")


def traceml_version() -> str:
    import traceml

    return traceml.__version__


def _load():
    return nbformat.read(NOTEBOOK, as_version=4)


def _outputs(cell):
    return cell.get("outputs", [])


def _text(cell) -> str:
    """Everything a code cell printed or displayed as text."""
    out = []
    for o in _outputs(cell):
        if o["output_type"] == "stream":
            out.append(o["text"])
        elif o["output_type"] in ("execute_result", "display_data"):
            out.append(o["data"].get("text/plain", ""))
    return "".join(out)


def _data(cell, mime: str) -> list:
    return [
        o["data"][mime]
        for o in _outputs(cell)
        if o["output_type"] in ("execute_result", "display_data") and mime in o["data"]
    ]


def _install_cell(nb):
    return _cell(nb, "TRACEML_SOURCE = ")


def _cell(nb, needle: str):
    """The one code cell whose source contains ``needle``."""
    hits = [c for c in nb.cells if c.cell_type == "code" and needle in c.source]
    assert len(hits) == 1, f"{len(hits)} code cells contain {needle!r}"
    return hits[0]


def test_stored_without_outputs():
    nb = _load()
    nbformat.validate(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        assert cell.get("outputs") == [], f"cell {i} has stored outputs"
        assert cell.get("execution_count") is None, f"cell {i} has an execution count"
    assert nb.metadata["kernelspec"]["name"] == "python3"


def test_structure():
    nb = _load()
    assert nb.cells[0].cell_type == "markdown"
    assert nb.cells[-1].cell_type == "markdown"
    closing = nb.cells[-1].source
    for step in ("INPUT-BOUND", "eavy-tailed", "eriodic", "num_workers",
                 "in_order", "read_bytes"):
        assert step in closing, step
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1
    assert "QUICK = False" in params[0].source.splitlines()
    # The install cell is the first code cell, plain Python (no magics, so
    # it runs as a script too), with its one setting at the top.
    install = _install_cell(nb)
    assert install is next(c for c in nb.cells if c.cell_type == "code")
    ast.parse(install.source)
    settings = [ln for ln in install.source.splitlines() if not ln.startswith("#")]
    assert settings[0].startswith('TRACEML_SOURCE = ""'), settings[0]
    # The runtime's own torch stays: the cell's one pip call gets a
    # constraint pinning it (tools/check_dist.sh sees it kept).
    assert install.source.count('"-m", "pip", "install"') == 1
    assert '"--constraint"' in install.source
    assert 'f"torch=={torch_version}\\n"' in install.source
    assert "[demo]" in install.source


@pytest.mark.slow
def test_executes_quick(tmp_path, monkeypatch):
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("torch")
    pytest.importorskip("datasets")
    pytest.importorskip("matplotlib")

    nb = _load()
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    data_dir = tmp_path / "data"
    params.source = (
        params.source.replace("QUICK = False", "QUICK = True")
        .replace("DATA_DIR = None", f"DATA_DIR = {str(data_dir)!r}")
    )
    assert "QUICK = True" in params.source and repr(str(data_dir)) in params.source

    # The kernel imports traceml from this checkout, whatever is installed.
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", ROOT + (os.pathsep + path if path else ""))
    work = tmp_path / "work"
    work.mkdir()
    client = nbclient.NotebookClient(
        nb,
        kernel_name="python3",
        timeout=240,
        resources={"metadata": {"path": str(work)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell

    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        errors = [o for o in _outputs(cell) if o["output_type"] == "error"]
        assert not errors, f"cell {i} raised: {errors}"
        assert cell.execution_count is not None, f"cell {i} did not run"

    install = _install_cell(nb)
    # traceml imported: nothing installed, and it came from this checkout.
    text = _text(install)
    assert text == (f"traceml {traceml_version()} from {os.path.join(ROOT, 'traceml')}: "
                    "already importable, nothing installed.\n"), text

    # The report renders as HTML with its figure embedded.
    report_cell = _cell(nb, 'historical = run_path("historical"')
    html = _data(report_cell, "text/html")
    assert html, "the report cell displayed no HTML"
    # Any diagnosis but NO-DATA: the quick run's 12 steps of 5 ms on a loaded host
    # read INPUT-BOUND or, once in a CI run, HAND-OVER (what this checks is
    # that the report is drawn, not the verdict of 12 tiny steps).
    from traceml.findings import input_bound
    labels = (input_bound.INPUT_BOUND, input_bound.COMPUTE_BOUND, input_bound.BALANCED, input_bound.HAND_OVER)
    assert any(d in html[0] for d in labels)
    assert "historical" in html[0]
    assert "data:image/png;base64," in html[0]

    # Figures: report.plot() and sweep.plot() display as PNG.
    assert _data(_cell(nb, "historical.plot()"), "image/png")
    assert _data(_cell(nb, "sweep.plot()"), "image/png")

    # The sweep table: 10 rows, 4, 3, 2, 1, 0 then back.
    # The timing table follows its title, one row a condition, num_workers
    # and path as columns, then the direction.
    table = _text(_cell(nb, "sweep = traceml.sweep("))
    lines = table.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("num_workers "))
    rows = lines[head + 1:lines.index("", head)]
    workers = [int(ln.split()[0]) for ln in rows]
    assert workers == [4, 3, 2, 1, 0, 0, 1, 2, 3, 4], table
    assert [ln.split()[2] for ln in rows] == ["fwd"] * 5 + ["bwd"] * 5
    assert "num_workers vs stall period" in table

    order = _text(_cell(nb, "in_order=(True, False)"))
    # in_order is a column of its own, True in one row and False in the other.
    head = next(ln for ln in order.splitlines() if ln.startswith("num_workers "))
    col = head.split().index("in_order")
    rows = order.splitlines()
    first = rows.index(head)
    cells = [ln.split()[col] for ln in rows[first + 1:rows.index("", first)]]
    assert cells == ["True", "False"], order

    # The comparison renders as an HTML table with both runs and a verdict.
    cmp_html = _data(_cell(nb, "traceml.compare("), "text/html")
    assert cmp_html and "<table" in cmp_html[0]
    assert "historical" in cmp_html[0] and "fixed" in cmp_html[0]
    assert "BASELINE" in cmp_html[0]
    # Any verdict: the quick run's 12 tiny steps may not get past the runs'
    # own noise (UNSETTLED).
    from traceml.findings import comparison
    assert any(v in cmp_html[0] for v in (comparison.IMPROVEMENT, comparison.EQUIVALENT,
                                         comparison.REGRESSION, comparison.MIXED,
                                         comparison.UNSETTLED))

    # The dataset went to DATA_DIR, not to the user's cache.
    assert any(p.name.startswith("lerobot-") for p in data_dir.iterdir())


# -- the install cell's ways of failing, each one sentence ---------------------

RUNNER = """
import sys
if sys.argv[2] == "no-traceml":
    class NoTraceml:
        # traceml not installed: the import system finds no module of that name
        def find_spec(self, name, path=None, target=None):
            if name == "traceml" or name.startswith("traceml."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None
    sys.meta_path.insert(0, NoTraceml())
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
result = shell.run_cell(open(sys.argv[1], encoding="utf-8").read())
error = result.error_in_exec
print("ERROR:", type(error).__name__ if error else None)
"""


def _run_install_cell(tmp_path, *, pythonpath=(), source=None, traceml=True):
    """Run the install cell's source under IPython in a fresh interpreter,
    working in tmp_path/"work" (the notebook's folder); returns what it
    printed (without the ERROR line), the error's class name or "None", and
    the folder."""
    pytest.importorskip("IPython")
    cell = _install_cell(_load()).source
    if source is not None:
        assert 'TRACEML_SOURCE = ""' in cell
        cell = cell.replace('TRACEML_SOURCE = ""', f"TRACEML_SOURCE = {source!r}", 1)
    (tmp_path / "cell.py").write_text(cell, encoding="utf-8")
    (tmp_path / "runner.py").write_text(RUNNER, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["IPYTHONDIR"] = str(tmp_path / "ipython")
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    done = subprocess.run(
        [sys.executable, str(tmp_path / "runner.py"), str(tmp_path / "cell.py"),
         "traceml" if traceml else "no-traceml"],
        capture_output=True, text=True, cwd=work, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.rstrip("\n").split("\n")
    assert lines[-1].startswith("ERROR: "), done.stdout
    return "\n".join(lines[:-1]), lines[-1][len("ERROR: "):], work


def _one_sentence(out: str) -> str:
    """The cell's failure: one line, no traceback, prefixed 'traceml set-up: '."""
    assert "Traceback" not in out and "File " not in out, out
    lines = out.strip().split("\n")
    assert len(lines) == 1, out
    assert lines[0].startswith("traceml set-up: ") and lines[0].endswith("."), out
    return lines[0]


def test_install_cell_finds_this_traceml(tmp_path):
    import traceml

    out, error, _ = _run_install_cell(tmp_path)
    assert error == "None", out
    here = os.path.dirname(os.path.abspath(traceml.__file__))
    assert out == (f"traceml {traceml.__version__} from {here}: "
                   "already importable, nothing installed."), out


def test_install_cell_names_a_shadowing_package(tmp_path):
    # PyPI's `traceml` (experiment tracking) imports as traceml and has a
    # version; the stub stands in for it, first on the path.
    stub = tmp_path / "shadow" / "traceml"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text('__version__ = "1.2.3"\n')
    out, error, _ = _run_install_cell(tmp_path, pythonpath=[stub.parent])
    assert error == "TracemlSetupError", out
    line = _one_sentence(out)
    assert f"another package named traceml (version 1.2.3, in {stub}) shadows " \
           "traceml-stalls" in line, line
    assert "pip uninstall -y traceml traceml-ai traceml-stalls" in line, line
    assert "take it off sys.path" in line, line  # pip does not own the stub


def test_install_cell_names_a_shadowing_package_that_fails_to_import(tmp_path):
    stub = tmp_path / "shadow" / "traceml"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("import polyaxon_sdk_not_installed\n")
    out, error, _ = _run_install_cell(tmp_path, pythonpath=[stub.parent])
    assert error == "TracemlSetupError", out
    line = _one_sentence(out)
    assert "`import traceml` failed (No module named 'polyaxon_sdk_not_installed')" in line
    assert "pip uninstall -y traceml traceml-ai traceml-stalls" in line, line


def test_install_cell_says_what_to_do_when_nothing_applies(tmp_path):
    out, error, work = _run_install_cell(tmp_path, traceml=False)
    assert error == "TracemlSetupError", out
    line = _one_sentence(out)
    assert f"traceml-stalls is not installed, no wheel or sdist of it is in {work}, " \
           "and TRACEML_SOURCE is empty" in line, line


def test_install_cell_skips_a_wheel_for_another_python(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    other = "traceml_stalls-0.1.0-cp27-cp27mu-manylinux1_x86_64.whl"
    (work / other).write_bytes(b"")
    out, error, _ = _run_install_cell(tmp_path, traceml=False)
    assert error == "TracemlSetupError", out
    line = _one_sentence(out)
    assert f"(skipped {other}: built for another Python or machine)" in line, line


def test_install_cell_refuses_a_source_that_is_not_there(tmp_path):
    missing = str(tmp_path / "no-such-clone")
    out, error, _ = _run_install_cell(tmp_path, source=missing, traceml=False)
    assert error == "TracemlSetupError", out
    line = _one_sentence(out)
    assert f"TRACEML_SOURCE is {missing!r}, which is neither a git URL nor an existing " \
           "path" in line, line


def test_install_cell_refuses_an_upload_that_is_not_traceml(tmp_path):
    # A stand-in for Colab's google.colab: upload() returns {name: bytes}.
    colab = tmp_path / "colab" / "google" / "colab"
    colab.mkdir(parents=True)
    (colab / "__init__.py").write_text("")
    (colab / "files.py").write_text(textwrap.dedent("""
        def upload():
            return {"notes.txt": b"not a wheel"}
    """))
    out, error, work = _run_install_cell(tmp_path, pythonpath=[colab.parent.parent],
                                         traceml=False)
    assert error == "TracemlSetupError", out
    asked, failed = out.strip().split("\n")
    assert asked.startswith("Upload a traceml-stalls sdist"), out
    line = _one_sentence(failed)
    assert "the upload (notes.txt) holds no traceml-stalls sdist or wheel" in line, line
    assert (work / "notes.txt").read_bytes() == b"not a wheel"
