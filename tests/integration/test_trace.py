"""Report.save_trace (traceml.trace): Chrome trace-event JSON of a real
multi-worker run, checked against the format and against the report."""

import json
import time
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import traceml  # noqa: E402 - after importorskip("torch")
from traceml import trace  # noqa: E402 - after importorskip("torch")

from burn import BurnDataset  # noqa: E402 - after importorskip("torch")

warnings.filterwarnings("ignore", message=".*worker processes in total.*")


@pytest.fixture(scope="module")
def run():
    # Batch 4k holds one item of 60 ms CPU, the rest 2 ms: worker 0 makes
    # every slow batch and every fourth step stalls on it.
    traceml.configure(sampler=False)
    try:
        rec = traceml.Recorder()
        ds = BurnDataset(4 * 24, 0.002, slow_every=16, slow_index=0, slow_cpu_s=0.06)
        for _batch in rec.wrap(torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2)):
            time.sleep(0.005)
        return rec.report()
    finally:
        traceml.configure(sampler=True)


def _check_format(data):
    assert set(data) >= {"traceEvents", "displayTimeUnit", "otherData"}
    for ev in data["traceEvents"]:
        assert {"ph", "name", "pid", "tid"} <= set(ev)
        if ev["ph"] == "X":
            assert ev["dur"] >= 0 and isinstance(ev["ts"], float)
        elif ev["ph"] == "i":
            assert ev["s"] in ("g", "p", "t") and "ts" in ev
        elif ev["ph"] == "C":
            assert ev["args"] and all(v >= 0 for v in ev["args"].values())
        else:
            assert ev["ph"] == "M" and "args" in ev


def test_every_step_has_a_fetch_and_a_compute_slice_in_order(run, tmp_path):
    path = run.save_trace(tmp_path / "run.json")
    data = json.loads(open(path, encoding="utf-8").read())
    _check_format(data)
    loop = [e for e in data["traceEvents"] if e["ph"] == "X" and e["tid"] == trace.LOOP_TID]
    fetches = [e for e in loop if e["cat"] in ("fetch", "stall")]
    computes = [e for e in loop if e["cat"] == "compute"]
    n = len(run.steps)
    assert [e["args"]["step"] for e in fetches] == list(range(n))
    assert [e["args"]["step"] for e in computes] == list(range(n))
    # Each fetch is the step's input wait, in µs of the step clock.
    wait_us = run.input_wait_ns / 1e3
    assert np.allclose([e["dur"] for e in fetches], wait_us)
    assert np.allclose([e["ts"] for e in fetches], run.steps["begin_ns"] / 1e3)
    ts = [e["ts"] for e in loop]
    assert ts == sorted(ts)  # one track, no overlap: fetch then compute
    assert data["otherData"]["kept_steps"] == n


def test_the_stalls_land_on_the_stalled_steps(run):
    data = trace.trace_events(run)
    stalled = [e["args"]["step"] for e in data["traceEvents"]
               if e.get("cat") == "stall"]
    assert stalled == run["stalls"]["steps"] and stalled
    starts = [e["args"]["step"] for e in data["traceEvents"]
              if e.get("name") == "fetch (epoch start)"]
    assert starts == run["epoch_start"]["steps"]


def test_each_worker_track_holds_the_batches_it_made(run):
    data = trace.trace_events(run)
    made = [e for e in data["traceEvents"] if e.get("cat") == "worker"]
    assert len(made) == len(run.worker_batches) == len(run.steps)
    names = {e["tid"]: e["args"]["name"] for e in data["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names[trace.WORKER_TID0] == "worker 0" and names[trace.WORKER_TID0 + 1] == "worker 1"
    # The slow batches are worker 0's (by construction), and the steps that
    # received them got them from worker 0 (by the delivery record).
    slow = [e for e in made if e["args"]["cpu_ms"] >= 50]
    assert len(slow) == 6 and all(e["tid"] == trace.WORKER_TID0 for e in slow)
    got = [e["args"]["received_at_step"] for e in slow]
    assert got == [0, 4, 8, 12, 16, 20]
    assert all(run["delivery"]["workers"][i] == 0 for i in got)
    for e in made:  # made before the step that received it ended its fetch
        step = e["args"]["received_at_step"]
        assert e["ts"] + e["dur"] <= run.steps["fetch_done_ns"][step] / 1e3 + 1e-3


def test_a_long_run_keeps_its_slowest_fetches_and_their_windows(run):
    data = trace.trace_events(run, max_steps=6, window=1)
    steps = sorted({e["args"]["step"] for e in data["traceEvents"]
                    if e.get("cat") in ("fetch", "stall")})
    slowest = np.argsort(run.input_wait_ns)[-2:]  # 6 // 3 centres
    want = sorted({int(j) for c in slowest for j in range(c - 1, c + 2)
                   if 0 <= j < len(run.steps)})
    assert steps == want
    assert data["otherData"]["kept_steps"] == len(want)


@pytest.mark.parametrize("kw, exc", [({"max_steps": 0}, ValueError),
                                     ({"window": -1}, ValueError),
                                     ({"max_steps": 1.5}, TypeError),
                                     ({"window": True}, TypeError)])
def test_bad_arguments_are_named(run, kw, exc):
    with pytest.raises(exc, match=next(iter(kw))):
        trace.trace_events(run, **kw)
    with pytest.raises(TypeError, match="path"):
        run.save_trace(3)


def test_a_loaded_run_has_no_worker_tracks(run, tmp_path):
    back = traceml.load(run.save(tmp_path / "run.zip"))
    data = trace.trace_events(back)
    assert not [e for e in data["traceEvents"] if e.get("cat") == "worker"]
    assert len([e for e in data["traceEvents"] if e.get("cat") == "compute"]) == len(run.steps)


def test_flat_gives_the_headline_numbers_for_loggers(run):
    flat = run.flat()
    s = run.summary
    assert flat["traceml/steps"] == float(len(run.steps))
    assert flat["traceml/input_share"] == s["input_share"]
    assert flat["traceml/wait_p95_s"] == pytest.approx(
        np.percentile(run.input_wait_ns[~np.isin(np.arange(len(run.steps)),
                                                 s["epoch_start"]["steps"])], 95) * 1e-9)
    assert flat["traceml/stalls"] == s["stalls"]["count"]
    assert flat["traceml/stalls_per_100"] == pytest.approx(
        100 * s["stalls"]["count"] / s["steady_steps"])
    assert flat["traceml/diagnosis"] == s["diagnosis"]
    assert flat["traceml/production_share"] == s["production"]["production_share"]
    assert all(isinstance(v, (float, str)) for v in flat.values())
    assert set(run.flat(prefix="")) == {k[len("traceml/"):] for k in flat}
    json.dumps(flat)
    with pytest.raises(TypeError, match="prefix"):
        run.flat(prefix=1)


def test_the_command_line_exports_a_saved_run(run, tmp_path, capsys):
    from traceml.__main__ import main

    saved = run.save(tmp_path / "run.traceml")
    out = tmp_path / "run.json"
    assert main(["export", str(saved), "--trace", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    data = json.loads(out.read_text(encoding="utf-8"))
    _check_format(data)
    assert data["otherData"]["steps"] == len(run.steps)
    assert main(["export", str(saved), "--trace", str(out), "--max-steps", "0"]) == 2
    assert "max_steps" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "missing"), "--trace", str(out)]) == 2
    assert main(["export", str(saved), "--trace", str(tmp_path / "no" / "dir.json")]) == 2
    assert "cannot write --trace" in capsys.readouterr().err


def test_counter_tracks_hold_the_workers_cpu(tmp_path):
    # 2 workers burn 4 ms of CPU per item, 24 batches of 2: about 0.19 s.
    traceml.configure(sampler=True, sampler_period_s=0.01)
    try:
        rec = traceml.Recorder()
        ds = BurnDataset(2 * 24, 0.004)
        for _batch in rec.wrap(torch.utils.data.DataLoader(ds, batch_size=2, num_workers=2)):
            time.sleep(0.004)
        r = rec.report()
    finally:
        traceml.configure(sampler=True, sampler_period_s=0.02)
    data = trace.trace_events(r)
    _check_format(data)
    counters = [e for e in data["traceEvents"] if e["ph"] == "C"]
    names = {e["name"] for e in counters}
    assert {"main: CPU", "worker 0: CPU", "worker 1: CPU"} <= names
    # The counters integrate to the CPU the workers' batches took (ticks of
    # 10 ms, and the readings start after the workers' own start-up).
    made = float(r.worker_batches["cpu_ns"].sum()) * 1e-9
    total = 0.0
    for w in ("worker 0: CPU", "worker 1: CPU"):
        evs = sorted((e for e in counters if e["name"] == w), key=lambda e: e["ts"])
        for a, b in zip(evs, evs[1:]):
            total += a["args"]["cores busy"] * (b["ts"] - a["ts"]) * 1e-6
    assert made * 0.5 < total < made * 1.5 + 0.05
    # Readings are not saved: a run read back has no counter tracks.
    assert traceml.load(r.save(tmp_path / "run.traceml")).samples is None
