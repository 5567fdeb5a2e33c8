"""traceml.integrations under a real 2-rank launch: ``python -m
torch.distributed.run --standalone --nproc_per_node=2`` (torchrun; gloo on
the CPU) runs tests/trainer_ranks_worker.py, where a ``lightning.Trainer``
(``strategy="ddp"``), a ``transformers.Trainer`` or an Accelerate loop
trains a DistributedDataParallel model with the traceml adapter, and rank
1's dataset sleeps on every 4th item it fetches.

Each test checks, against the records each rank saved of its own steps:
rank 0 got the job's report and wrote it, rank 1 got None and wrote
nothing; the framework sharded the data (the ranks fetched disjoint
items); rank 1 stalled exactly at the steps the framework's fetch order
predicts; the job's report names rank 1 as the straggler, with period 4,
its per-step wait is the largest of the two ranks', and rank 0's compute
shows the echo of rank 1's stalls (it waits in the all-reduce).

torchrun starts each rank in a session of its own, so killing the launcher
would leave them running: on failure or timeout the launcher is asked to
stop them (SIGTERM), then the launcher and each rank's process group (the
rank writes its id first thing) are killed.  No process group is ever
initialised in the pytest process; nothing touches the network.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import traceml
from traceml.integrations import RUN_FILE, TEXT_FILE

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)
import trainer_ranks_worker as worker  # noqa: E402 - sys.path set above

WORLD = 2
# Stalled steps are told from the others by their input wait: 25 ms is
# half the sleep and far above the few ms a healthy fetch takes here
# under load (shared/TRAPS.md: scheduling blips of 2-10 ms).
STALLED_WAIT_NS = int(worker.STALL_S / 2 * 1e9)
LAUNCH_TIMEOUT_S = 150.0
# Variables of an outer launch that must not leak into ours.
OUTER = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
         "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "NODE_RANK")


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _is_rank(pid: int) -> bool:
    """Whether ``pid`` is still one of our ranks (not a reused PID)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"trainer_ranks_worker" in fh.read()
    except OSError:
        return False


def launch(framework: str, out) -> tuple:
    """Run the 2-rank job under torchrun; returns (each rank's result
    dict, each rank's own steps).  Every process is killed if the launch
    fails or takes longer than LAUNCH_TIMEOUT_S."""
    env = {k: v for k, v in os.environ.items() if k not in OUTER}
    env.update(worker.OFFLINE)
    root = os.path.dirname(os.path.dirname(os.path.abspath(traceml.__file__)))
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        p for p in (root, env.get("PYTHONPATH")) if p))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={WORLD}", "--max_restarts=0",
           os.path.join(HERE, "trainer_ranks_worker.py"), framework, str(out)]
    with open(out / "log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                cwd=str(out), start_new_session=True)
    try:
        proc.wait(timeout=LAUNCH_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            _kill_group(proc.pid, signal.SIGTERM)     # torchrun stops its ranks
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            _kill_group(proc.pid, signal.SIGKILL)
            proc.wait()
        for r in range(WORLD):
            try:
                pgid = int((out / f"pid{r}").read_text())
            except (OSError, ValueError):    # not started, or killed mid-write
                continue
            if _is_rank(pgid):
                _kill_group(pgid, signal.SIGKILL)
    log = (out / "log").read_text()
    assert proc.returncode == 0, log
    results = [json.loads((out / f"result{r}.json").read_text()) for r in range(WORLD)]
    local = [np.load(out / f"local{r}.npy") for r in range(WORLD)]
    return results, local


def waits_of(steps):
    return steps["fetch_done_ns"] - steps["begin_ns"]


def check_job(out, results, local, expected_stalls, startup):
    """The checks every adapter must pass: ``expected_stalls`` are rank 1's
    stalled steps, ``startup`` the start-up steps of each rank's epoch (1 for
    a wrapped loader, 0 for the probes, which mark none); returns rank 0's
    report (loaded from the run file it wrote)."""
    # Both ranks trained STEPS optimizer steps as ranks 0 and 1 of 2.
    assert [r["dist_rank"] for r in results] == [0, 1]
    assert [r["framework_rank"] for r in results] == [0, 1]
    assert [r["world_size"] for r in results] == [WORLD, WORLD]
    assert [r["global_step"] for r in results] == [worker.STEPS] * WORLD
    # The framework sharded the data: disjoint items, the whole dataset.
    fetched = [set(r["fetched"]) for r in results]
    assert not fetched[0] & fetched[1]
    assert fetched[0] | fetched[1] == set(range(worker.ITEMS))

    # Rank 0 got the job's report and wrote it; rank 1 got None and wrote
    # nothing (each rank's run folder is its own here).
    assert [r["returned_none"] for r in results] == [False, True]
    assert results[1]["paths"] is None
    paths = results[0]["paths"]
    written = sorted(str(p) for p in out.rglob("traceml_report*"))
    assert written == sorted([paths["run"], paths["text"]])
    assert os.path.basename(paths["text"]) == TEXT_FILE
    assert os.path.basename(paths["run"]) == RUN_FILE
    assert paths["run"].startswith(str(out / "rank0") + os.sep)
    rep = traceml.load(paths["run"])

    # Each rank's own steps: rank 1 stalled at the expected steps (step 0,
    # the epoch's start, aside), rank 0 never.
    assert [len(a) for a in local] == [worker.STEPS] * WORLD
    waits = np.stack([waits_of(a) for a in local])
    stalled = [(np.flatnonzero(w[1:] > STALLED_WAIT_NS) + 1).tolist() for w in waits]
    assert stalled == [[], expected_stalls]

    # The job's report: rank 1 the straggler, its cadence, the max per step.
    r = rep.to_dict()["ranks"]
    assert r["world_size"] == WORLD and r["gathered"] == [0, 1] and r["missing"] == []
    assert r["stragglers"] == [1]
    assert r["per_rank"][1]["straggler"] and not r["per_rank"][0]["straggler"]
    assert r["per_rank"][1]["period"] == 4
    assert r["per_rank"][1]["stalls"] == len(expected_stalls)
    assert [p["steps"] for p in r["per_rank"]] == [worker.STEPS] * WORLD
    assert np.array_equal(rep.input_wait_ns, waits.max(axis=0))
    assert r["held_by"] == waits.argmax(axis=0).tolist()
    # The job's own verdict (its input wait the larger of the two per
    # step): stalled where rank 1 stalled, every 4 steps.
    assert rep["steps"] == worker.STEPS
    assert rep["steady_steps"] == worker.STEPS - startup
    assert rep["stalls"]["steps"] == expected_stalls
    assert rep["temporal"]["label"] == "PERIODIC" and rep["temporal"]["period"] == 4

    # The echo: rank 0 waits for rank 1 in the all-reduce, so its compute
    # grows on rank 1's stall steps (medians recomputed from rank 0's steps).
    (e,) = r["echo"]
    assert e["rank"] == 0 and e["straggler"] == 1 and e["echo"] is True
    stall = np.zeros(worker.STEPS, dtype=bool)
    stall[expected_stalls] = True
    compute0 = local[0]["end_ns"] - local[0]["fetch_done_ns"]
    # Steady steps: after each rank's start-up steps.
    assert [p["steps"] - p["steady_steps"] for p in r["per_rank"]] == [startup] * WORLD
    steady = np.arange(worker.STEPS) >= startup
    assert e["stall_steps"] == len(expected_stalls)
    assert e["compute_on_stalls_s"] == pytest.approx(np.median(compute0[stall]) * 1e-9)
    assert e["compute_other_s"] == pytest.approx(np.median(compute0[~stall & steady]) * 1e-9)
    assert e["growth_s"] > 0.5 * worker.STALL_S

    with open(paths["text"], encoding="utf-8") as fh:
        text = fh.read()
    assert "STRAGGLER rank 1" in text and "echo on rank 0" in text
    assert str(rep) in text
    return rep


@pytest.mark.slow
def test_lightning_ddp_under_torchrun(tmp_path):
    pytest.importorskip("lightning")
    results, local = launch("lightning", tmp_path)
    # Lightning saw torchrun's ranks (no processes of its own) and rebuilt
    # the DataLoader with a DistributedSampler before the callback wrapped it.
    assert [r["environment"] for r in results] == ["TorchElasticEnvironment"] * WORLD
    assert [r["launcher_external"] for r in results] == [True] * WORLD
    assert [r["loader_types"] for r in results] == [["_Wrapped"]] * WORLD
    assert [r["samplers"] for r in results] == [["DistributedSampler"]] * WORLD
    # A loader with a length is not fetched ahead: step k fetches the
    # rank's (k+1)-th item, so rank 1's sleeping 4th, 8th, ... items are
    # the fetches of steps 3, 7, 11, ...: period 4.
    expected = [k for k in range(1, worker.STEPS) if (k + 1) % 4 == 0]
    rep = check_job(tmp_path, results, local, expected, startup=1)
    # Written in rank 0's log_dir, the job's numbers in its CSV logger.
    log_dir = tmp_path / "rank0" / "lightning_logs" / "version_0"
    assert os.path.dirname(results[0]["paths"]["text"]) == str(log_dir)
    with open(log_dir / "metrics.csv", newline="") as fh:
        rows = [row for row in csv.DictReader(fh) if row.get("traceml/steps")]
    assert len(rows) == 1
    assert float(rows[0]["traceml/steps"]) == rep["steps"]
    assert float(rows[0]["traceml/stalls"]) == rep["stalls"]["count"]


@pytest.mark.slow
def test_huggingface_trainer_under_torchrun(tmp_path):
    pytest.importorskip("transformers")
    results, local = launch("huggingface", tmp_path)
    assert [r["model"] for r in results] == ["DistributedDataParallel"] * WORLD
    assert [r["is_world_process_zero"] for r in results] == [True, False]
    assert all(r["loader"]["wrapper"] == "accelerate.DataLoaderShard" for r in results)
    # The Trainer's DataLoaderShard fetches one batch ahead: step 0 waits
    # for the rank's items 1 and 2, step k >= 1 for item k + 2, so rank
    # 1's sleeping 4th, 8th, ... items are waited for at steps 2, 6, 10,
    # ...: period 4 still.
    expected = [k for k in range(1, worker.STEPS) if (k + 2) % 4 == 0]
    # The callback's probes mark no start-up step (step 0's wait holds the
    # loader's iter()).
    check_job(tmp_path, results, local, expected, startup=0)
    # Only rank 0's log history got the numbers.
    assert [r["logged"] for r in results] == [True, False]
    # The loader's settings head the text file, as on one process.
    with open(results[0]["paths"]["text"], encoding="utf-8") as fh:
        assert "wrapper=accelerate.DataLoaderShard" in fh.readline()


@pytest.mark.slow
def test_accelerate_loop_under_torchrun(tmp_path):
    pytest.importorskip("accelerate")
    results, local = launch("accelerate", tmp_path)
    assert [r["distributed_type"] for r in results] == ["DistributedType.MULTI_CPU"] * WORLD
    assert [r["model"] for r in results] == ["DistributedDataParallel"] * WORLD
    assert [r["loader"] for r in results] == ["DataLoaderShard"] * WORLD
    assert [r["is_main_process"] for r in results] == [True, False]
    # DataLoaderShard fetches one batch ahead (as above): steps 2, 6, 10, ...
    expected = [k for k in range(1, worker.STEPS) if (k + 2) % 4 == 0]
    rep = check_job(tmp_path, results, local, expected, startup=1)
    assert rep["loader"]["wrapper"] == "accelerate.DataLoaderShard"


# --- without a launch (fast) ------------------------------------------------------


class _Trainer:
    """Shaped like a lightning.Trainer for the callback's report():
    ``log_dir`` counts its reads (Lightning's is a broadcast from rank 0
    under DDP: every rank must read it, or rank 0 waits forever)."""

    def __init__(self, folder, is_global_zero):
        self.reads = 0
        self.folder = str(folder)
        self.is_global_zero = is_global_zero
        self.loggers = []
        self.global_step = 0
        self.default_root_dir = str(folder)

    @property
    def log_dir(self):
        self.reads += 1
        return self.folder


def test_lightning_callback_reads_log_dir_on_every_rank(tmp_path):
    from traceml.integrations.lightning import _CallbackBody

    cb = _CallbackBody()
    for _ in cb.recorder.wrap(range(3)):
        pass
    other = _Trainer(tmp_path / "other", is_global_zero=False)
    cb.on_fit_end(other, None)
    assert other.reads == 1                       # read, though it writes nothing
    assert cb.paths is None and not (tmp_path / "other").exists()
    zero = _Trainer(tmp_path / "zero", is_global_zero=True)
    cb.on_fit_end(zero, None)
    assert zero.reads == 1
    assert os.path.dirname(cb.paths["text"]) == str(tmp_path / "zero")
    assert traceml.load(cb.paths["run"])["steps"] == 3
    # Without files to write, log_dir is not read on any rank.
    quiet = _CallbackBody(write_files=False)
    t = _Trainer(tmp_path / "quiet", is_global_zero=True)
    quiet.on_fit_end(t, None)
    assert t.reads == 0 and quiet.paths is None


def _probe_rank(waits_ns, computes_ns):
    """A Recorder whose steps are placed by its probes (as the Hugging Face
    callback's are) on an exact test clock, back to back."""
    rec = traceml.Recorder()
    clock, t = [], 10**9
    for w, c in zip(waits_ns, computes_ns):
        clock += [t, t + w, t + w + c]      # step_begin, fetch_done, step_end
        t += w + c
    rec._set_test_clock(clock)
    for _ in waits_ns:
        rec.step_begin()
        rec.fetch_done()
        rec.step_end()
    return rec


def test_probe_steps_of_many_ranks_count_no_epoch_start(tmp_path):
    # The probes' steps carry no position in an epoch: none is start-up, on
    # one rank (build) as in the job (combine).  Rank 1 stalls 50 ms every
    # 4th step; rank 0 waits for it in its compute (the all-reduce).
    from traceml import ranks

    n, ms = 40, 1_000_000
    stall = np.arange(n) % 4 == 3
    waits = [np.full(n, ms // 5), np.where(stall, 50 * ms, ms // 5)]
    computes = [np.where(stall, 55 * ms, 5 * ms), np.full(n, 5 * ms)]
    recs, facts = {}, {}
    for r in (0, 1):
        rec = _probe_rank(waits[r].tolist(), computes[r].tolist())
        local = rec.report()
        assert local["source"] == "probes" and local["steady_steps"] == n
        recs[r] = local.steps
        facts[r] = ranks.local_facts(local, rec.sources.by_name["probes"])
    rep = ranks.combine(recs, facts)
    assert rep["steps"] == n and rep["steady_steps"] == n
    assert rep["epoch_start"]["count"] == 0
    top = np.maximum(waits[0], waits[1])
    assert np.array_equal(rep.input_wait_ns, top)
    assert rep["stalls"]["steps"] == np.flatnonzero(stall).tolist()
    assert rep["temporal"]["period"] == 4
    r = rep.to_dict()["ranks"]
    assert r["stragglers"] == [1] and r["per_rank"][1]["period"] == 4
    (e,) = r["echo"]
    assert e["compute_on_stalls_s"] == pytest.approx(0.055)
    assert e["compute_other_s"] == pytest.approx(0.005) and e["echo"] is True
    assert "NO-DATA" not in str(rep)
    back = traceml.load(rep.save(tmp_path / "job.run"))
    assert back == rep and back["steady_steps"] == n
