"""Saving, loading, corrupt files, the command line, plots."""

import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import traceml

from support import INFO, SYNTHETIC, build, lockstep, records

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def run(loader_source):
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
    assert header["format"] == "traceml-run" and header["format_version"] == 3
    assert header["summary"]["stalls"]["count"] == run["stalls"]["count"]
    # The words as saved, beside the codes and numbers they come from.
    assert header["summary"]["next"] == run["next"]
    assert [code for code, _ in header["summary"]["next_items"]] == [
        code for code, _ in run["next_items"]]
    arrays = np.load(path)
    np.testing.assert_array_equal(arrays["begin_ns"], run.steps["begin_ns"])
    np.testing.assert_array_equal(arrays["epoch"], run.steps["epoch"])


def test_a_saved_run_reads_in_the_loading_traceml_words(run, tmp_path, monkeypatch):
    from traceml.findings import words_of

    path = run.save(tmp_path / "a.traceml")
    code, numbers = run["next_items"][0]
    table = next(t for t in (getattr(f, "WORDS", {}) for f in traceml.findings.REGISTRY)
                 if code in t)
    # A later traceml words the same code and numbers otherwise.
    monkeypatch.setitem(table, code, lambda p: f"reworded, {len(p)} numbers")
    back = traceml.load(path)
    assert back["next"][0] == f"reworded, {len(numbers)} numbers"
    assert back["next"][1:] == run["next"][1:]
    assert f"reworded, {len(numbers)} numbers" in str(back)
    assert words_of(code) is table[code]
    # A format 2 file keeps its words: it has no codes to word again.
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    header = json.loads(members["summary.json"])
    header["format_version"] = 2
    for key in ("next_items", "note_items"):
        header["summary"].pop(key)
    members["summary.json"] = json.dumps(header).encode()
    old = tmp_path / "v2.traceml"
    with zipfile.ZipFile(old, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    assert traceml.load(old)["next"] == run["next"]


def test_the_rules_behind_the_labels_read_in_the_loading_traceml_words(run, tmp_path,
                                                                       monkeypatch):
    from traceml.findings import input_bound, stall_shape, stall_threshold

    path = run.save(tmp_path / "a.traceml")
    items = {key: run[key + "_item"] for key in ("diagnosis_rule", "shape_rule")}
    items["rule"] = run["stalls"]["rule_item"]
    # Each item is the code and numbers its saved words came from.
    assert input_bound.WORDS[items["diagnosis_rule"][0]](items["diagnosis_rule"][1]) \
        == run["diagnosis_rule"]
    assert items["diagnosis_rule"][1]["share"] == run["input_share"]
    assert stall_shape.WORDS[items["shape_rule"][0]]({}) == run["shape_rule"]
    assert stall_threshold.WORDS[items["rule"][0]](items["rule"][1]) == run["stalls"]["rule"]
    # A later traceml words them otherwise: the loaded run reads its words.
    for table, (code, _) in ((input_bound.WORDS, items["diagnosis_rule"]),
                             (stall_shape.WORDS, items["shape_rule"]),
                             (stall_threshold.WORDS, items["rule"])):
        monkeypatch.setitem(table, code, lambda p, code=code: f"today's words for {code}")
    back = traceml.load(path)
    assert back["diagnosis_rule"] == f"today's words for {items['diagnosis_rule'][0]}"
    assert back["shape_rule"] == f"today's words for {items['shape_rule'][0]}"
    assert back["stalls"]["rule"] == f"today's words for {items['rule'][0]}"
    assert f"{back['diagnosis']}: today's words for" in str(back)
    # A format 3 file saved before the items were kept keeps its words.
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    header = json.loads(members["summary.json"])
    for key in ("diagnosis_rule_item", "shape_rule_item"):
        header["summary"].pop(key)
    header["summary"]["stalls"].pop("rule_item")
    members["summary.json"] = json.dumps(header).encode()
    older = tmp_path / "older.traceml"
    with zipfile.ZipFile(older, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    kept = traceml.load(older)
    assert (kept["diagnosis_rule"], kept["shape_rule"], kept["stalls"]["rule"]) == (
        run["diagnosis_rule"], run["shape_rule"], run["stalls"]["rule"])


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
    # The legend sits below the axes, off the data (helper 38D: inside, it
    # hid a stall at the top right).
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    (legend,) = fig.legends
    assert not ax.get_legend()
    below = legend.get_window_extent(renderer)
    assert below.y1 <= ax.get_window_extent(renderer).y0 + 1
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


def _steady(wait_ms, n=60, compute_ms=10.0, seed=0):
    """A probe-shaped run: waits about ``wait_ms`` each, fixed compute."""
    rng = np.random.default_rng(seed)
    wait = (wait_ms * 1e6 * rng.uniform(0.9, 1.1, n)).astype(np.int64)
    return build(records(wait, np.full(n, int(compute_ms * 1e6))), INFO, SYNTHETIC, None)


@pytest.fixture
def fast_slow(tmp_path):
    """(fast, slow): runs whose mean wait differs 10x (a REGRESSION from
    fast to slow, an IMPROVEMENT back)."""
    return (_steady(0.2).save(tmp_path / "fast.traceml"),
            _steady(2.0, seed=1).save(tmp_path / "slow.traceml"))


def _main(*args) -> int:
    from traceml.__main__ import main

    return main([str(a) for a in args])


def test_cli_fail_on_regression_is_a_ci_gate(fast_slow, capsys):
    fast, slow = fast_slow
    assert traceml.compare(fast, slow).rows[1]["verdict"] == "REGRESSION"
    assert _main("compare", fast, slow, "--fail-on", "regression") == 1
    assert "slow.traceml: REGRESSION" in capsys.readouterr().out  # the table comes first
    # Without the gate, or for other verdicts, the same comparison exits 0.
    assert _main("compare", fast, slow) == 0
    assert _main("compare", fast, slow, "--fail-on", "mixed") == 0
    assert _main("compare", slow, fast, "--fail-on", "regression") == 0
    assert _main("compare", fast, fast, "--fail-on", "regression") == 0
    assert _main("compare", fast, fast, slow, "--fail-on", "mixed",
                 "--fail-on", "regression") == 1


@pytest.mark.slow
def test_cli_fail_on_exit_status_end_to_end(fast_slow):
    fast, slow = fast_slow
    out = _cli("compare", fast, slow, "--fail-on", "regression")
    assert out.returncode == 1 and "slow.traceml: REGRESSION" in out.stdout, out.stderr
    assert _cli("compare", slow, fast, "--fail-on", "regression").returncode == 0


def test_cli_fail_on_refuses_an_unknown_verdict(fast_slow, capsys):
    with pytest.raises(SystemExit) as info:
        _main("compare", *fast_slow, "--fail-on", "worse")
    assert info.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_cli_unreadable_runs_print_one_line_and_exit_2(fast_slow, tmp_path, capsys):
    fast, _ = fast_slow
    with zipfile.ZipFile(fast) as z:
        members = {n: z.read(n) for n in z.namelist()}
    header = json.loads(members["summary.json"])
    header["summary"]["stalls"] = "none"
    members["summary.json"] = json.dumps(header).encode()
    bad = tmp_path / "retyped.traceml"
    with zipfile.ZipFile(bad, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    fifo = tmp_path / "pipe.traceml"
    os.mkfifo(fifo)
    for args, word in ((("show", bad), "retyped.traceml"),
                       (("compare", fast, bad, "--fail-on", "regression"),
                        "retyped.traceml"),
                       (("show", fifo), "FIFO"),
                       (("show", "/dev/zero"), "device"),
                       (("show", tmp_path / "none.traceml"), "no such file")):
        assert _main(*args) == 2, args
        out = capsys.readouterr()
        assert out.err.count("\n") == 1 and word in out.err, out.err
        assert out.out == ""


def test_load_errors_are_run_file_errors(run, tmp_path):
    path = run.save(tmp_path / "a.traceml")
    cut = tmp_path / "cut.traceml"
    cut.write_bytes(open(path, "rb").read()[:100])
    with pytest.raises(traceml.RunFileError) as info:
        traceml.load(cut)
    assert isinstance(info.value, ValueError) and info.value.path == str(cut)


def test_saved_members_are_stored_and_np_load_reads_them(run, tmp_path):
    path = run.save(tmp_path / "a.traceml")
    with zipfile.ZipFile(path) as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}
    with np.load(path) as arrays:
        for field in run.steps.dtype.names:
            np.testing.assert_array_equal(arrays[field], run.steps[field])
            assert arrays[field].dtype == run.steps.dtype[field]
