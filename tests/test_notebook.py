"""notebooks/investigate.ipynb: stored clean, and runs headless end to end.

The notebook is executed with nbclient on the python3 kernel (ipykernel,
launched with this interpreter) in a temporary working directory, with its
parameters cell set to QUICK = True and a temporary dataset directory.
"""

import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
    # The install cell installs only when traceml does not import.
    install = _cell(nb, "%pip install")
    lines = install.source.splitlines()
    try_at = lines.index("try:")
    assert lines[try_at + 1].strip() == "import traceml"
    assert lines[try_at + 2] == "except ImportError:"
    pip = [ln for ln in lines if "%pip install" in ln]
    assert len(pip) == 1 and pip[0].startswith("    ")  # inside the except
    # Colab's own torch satisfies the [demo] extra: the cell must not
    # replace it with a pinned one.
    assert "torch" not in pip[0]
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

    install = _cell(nb, "%pip install")
    # traceml imported: nothing installed, and it came from this checkout.
    text = _text(install)
    assert text.startswith(f"traceml {traceml_version()} from "), text
    assert os.path.join(ROOT, "traceml") in text, text
    assert "Successfully installed" not in text

    # The report renders as HTML with its figure embedded.
    report_cell = _cell(nb, 'historical = run_path("historical"')
    html = _data(report_cell, "text/html")
    assert html, "the report cell displayed no HTML"
    assert any(d in html[0] for d in ("INPUT-BOUND", "COMPUTE-BOUND", "BALANCED"))
    assert "historical" in html[0]
    assert "data:image/png;base64," in html[0]

    # Figures: report.plot() and sweep.plot() display as PNG.
    assert _data(_cell(nb, "historical.plot()"), "image/png")
    assert _data(_cell(nb, "sweep.plot()"), "image/png")

    # The sweep table: 8 rows, 4, 2, 1, 0 then 0, 1, 2, 4.
    table = _text(_cell(nb, "sweep = traceml.sweep("))
    rows = [ln for ln in table.splitlines() if ln.startswith("num_workers=")]
    workers = [int(ln.split()[0].split("=")[1]) for ln in rows]
    assert workers == [4, 2, 1, 0, 0, 1, 2, 4], table
    assert [ln.split()[3] for ln in rows] == ["forward"] * 4 + ["backward"] * 4
    assert "num_workers vs stall period" in table

    order = _text(_cell(nb, "in_order=(True, False)"))
    assert "in_order=True" in order and "in_order=False" in order, order

    # The comparison renders as an HTML table with both runs and a verdict.
    cmp_html = _data(_cell(nb, "traceml.compare("), "text/html")
    assert cmp_html and "<table" in cmp_html[0]
    assert "historical" in cmp_html[0] and "fixed" in cmp_html[0]
    assert "BASELINE" in cmp_html[0]
    assert any(v in cmp_html[0] for v in ("IMPROVEMENT", "EQUIVALENT", "REGRESSION", "MIXED"))

    # The dataset went to DATA_DIR, not to the user's cache.
    assert any(p.name.startswith("lerobot-") for p in data_dir.iterdir())
