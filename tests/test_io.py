"""Saving, loading, corrupt files, the command line, plots."""

import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import traceml

from test_report import INFO, SYNTHETIC, build, lockstep, records, loader_source  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def run(loader_source):  # noqa: F811
    loader_source(4)
    wait, compute = lockstep(4, bursts=12)
    return build(records(wait, compute), INFO, SYNTHETIC, None)


def test_save_load_round_trip(run, tmp_path):
    path = run.save(tmp_path / "a.traceml")
    back = traceml.load(path)
    assert back == run
    assert back.to_dict() == run.to_dict()
    np.testing.assert_array_equal(back.steps, run.steps)
    assert str(back) == str(run)


def test_file_is_readable_without_traceml(run, tmp_path):
    path = run.save(tmp_path / "a.traceml")
    with zipfile.ZipFile(path) as z:
        header = json.loads(z.read("summary.json"))
    assert header["format"] == "traceml-run" and header["format_version"] == 1
    assert header["summary"]["stalls"]["count"] == run["stalls"]["count"]
    arrays = np.load(path)
    np.testing.assert_array_equal(arrays["begin_ns"], run.steps["begin_ns"])
    np.testing.assert_array_equal(arrays["epoch"], run.steps["epoch"])


def test_truncated_file_names_the_file(run, tmp_path):
    path = run.save(tmp_path / "a.traceml")
    data = open(path, "rb").read()
    cut = tmp_path / "cut.traceml"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="cut.traceml"):
        traceml.load(cut)


def test_foreign_files_are_refused(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(ValueError, match="notes.txt: not a readable traceml run file"):
        traceml.load(text)
    other = tmp_path / "other.npz"
    np.savez(other, x=np.arange(3))
    with pytest.raises(ValueError, match="other.npz: not a traceml run file"):
        traceml.load(other)
    with pytest.raises(FileNotFoundError, match="missing.traceml"):
        traceml.load(tmp_path / "missing.traceml")


def test_damaged_member_is_refused(run, tmp_path):
    path = run.save(tmp_path / "a.traceml")
    bad = tmp_path / "bad.traceml"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(bad, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "end_ns.npy":
                data = data[:-16]  # a short array
            dst.writestr(item, data)
    with pytest.raises(ValueError, match="bad.traceml"):
        traceml.load(bad)


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "traceml", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)


def test_cli_show_and_compare(run, tmp_path):
    a = run.save(tmp_path / "a.traceml")
    out = _cli("show", a, "--html", str(tmp_path / "a.html"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(run)
    assert "<table" in (tmp_path / "a.html").read_text()
    out = _cli("compare", a, a, "--labels", "before", "after")
    assert out.returncode == 0, out.stderr
    assert "after: EQUIVALENT" in out.stdout and "BASELINE" in out.stdout


def test_cli_reports_a_bad_file(tmp_path):
    bad = tmp_path / "bad.traceml"
    bad.write_bytes(b"nope")
    out = _cli("show", str(bad))
    assert out.returncode == 2 and "bad.traceml" in out.stderr


def test_plot_and_html_embed(run):
    pytest.importorskip("matplotlib")
    fig = run.plot()
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    assert len(ax.lines[0].get_xdata()) == run["steps"]
    html = run._repr_html_()
    assert "data:image/png;base64," in html and "<script" not in html


def test_html_says_how_to_get_plots_without_matplotlib(run, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    html = run._repr_html_()
    assert "pip install matplotlib" in html and "data:image/png" not in html


def test_plot_without_matplotlib_says_how_to_get_it(run, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"pip install matplotlib .*\[plot\] extra"):
        run.plot()
