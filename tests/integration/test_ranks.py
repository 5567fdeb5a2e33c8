"""Many ranks (traceml.ranks): the multi-rank rules on hand-made arrays,
and real 2- and 3-rank DDP jobs (gloo, CPU) launched as child processes by
tests/ranks_worker.py.  No process group is ever initialised in the pytest
process."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import traceml
from traceml import _core, ranks, render
from traceml.findings import rank_stragglers
from traceml.build import build

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MS = 1_000_000
INFO = {"dropped_steps": 0, "out_of_memory": False, "misuse": {}, "probe_step_open": False}


# --- hand-made arrays ------------------------------------------------------------

def records(wait_ns, compute_ns, start_ns=10**9) -> np.ndarray:
    """One rank's records, steps back to back from ``start_ns``."""
    wait = np.asarray(wait_ns, dtype=np.int64)
    compute = np.asarray(compute_ns, dtype=np.int64)
    a = np.zeros(len(wait), dtype=_core.RECORD_DTYPE)
    step = wait + compute
    a["begin_ns"] = start_ns + np.concatenate([[0], np.cumsum(step)[:-1]])
    a["fetch_done_ns"] = a["begin_ns"] + wait
    a["end_ns"] = a["fetch_done_ns"] + compute
    a["source"] = 1
    a["flags"] = np.arange(len(wait)) << _core.FLAG_POS_SHIFT
    return a


def job(waits, computes):
    """(the combined report, {rank: records}) of ranks with these per-step
    waits and computes (ns), each rank's facts from its own build()."""
    recs = {r: records(w, c, start_ns=10**9 + 7 * r) for r, (w, c) in
            enumerate(zip(waits, computes))}
    facts = {r: ranks.local_facts(build(a, INFO, 1, None, sources={})) for r, a in recs.items()}
    return ranks.combine(recs, facts), recs


def stalling_job(n=40, stall_rank=1, world=3, stall_ms=50, seed=0, short=None):
    """``world`` ranks, ``stall_rank`` stalls stall_ms every 4th step; the
    others' compute grows by the stall there (the all-reduce)."""
    rng = np.random.default_rng(seed)
    waits, computes = [], []
    for r in range(world):
        m = short[1] if short and short[0] == r else n
        w = (0.2 + 0.1 * rng.random(m)) * MS
        c = (5 + rng.random(m)) * MS
        stall = np.arange(m) % 4 == 3
        if r == stall_rank:
            w[stall] += stall_ms * MS
        else:
            c[stall] += stall_ms * MS
        waits.append(w.astype(np.int64))
        computes.append(c.astype(np.int64))
    return job(waits, computes)


def test_max_across_ranks_matches_numpy_on_ragged_ranks():
    rng = np.random.default_rng(1)
    for _ in range(20):
        lengths = rng.integers(0, 30, size=rng.integers(1, 5))
        waits = [rng.integers(0, 5, size=n).astype(np.int64) for n in lengths]
        top, holder, second = rank_stragglers.max_across_ranks(waits)
        n = max(lengths)
        grid = np.full((len(waits), n), -1, dtype=np.int64)
        for r, w in enumerate(waits):
            grid[r, :len(w)] = w
        assert np.array_equal(top, grid.max(axis=0))
        have = (grid >= 0).any(axis=0)
        assert np.array_equal(holder[have], grid.argmax(axis=0)[have])  # lowest on ties
        assert (holder[~have] == -1).all()
        # The second largest: sort each column, take the one under the top.
        sorted_grid = np.sort(grid, axis=0)
        expect_second = np.maximum(sorted_grid[-2], 0) if len(waits) > 1 else np.zeros(n)
        assert np.array_equal(second, expect_second)


def test_stragglers_rule_exact_values():
    # 4 steps, 2 ranks: rank 1 holds 30 of the 34 ns of unique wait.
    top = np.array([10, 40, 5, 7], dtype=np.int64)
    holder = np.array([1, 1, 0, 0], dtype=np.int32)
    second = np.array([0, 20, 3, 5], dtype=np.int64)
    out = rank_stragglers.stragglers(top, holder, second, 200.0, [0, 1], {0: True, 1: True})
    assert out[1]["held_steps"] == 2 and out[1]["held_share"] == 0.5
    assert out[1]["unique_wait_s"] == pytest.approx(30e-9)
    assert out[1]["unique_share"] == pytest.approx(30 / 34)
    assert out[1]["cost_share"] == pytest.approx(30 / 200)
    assert out[1]["straggler"] and not out[0]["straggler"]
    # Its own report finds no input wait worth an experiment: no straggler.
    out = rank_stragglers.stragglers(top, holder, second, 200.0, [0, 1], {0: True, 1: False})
    assert not out[1]["straggler"]
    # Under STRAGGLER_MIN_COST_SHARE of the job's step time: no straggler.
    out = rank_stragglers.stragglers(top, holder, second, 30 / rank_stragglers.STRAGGLER_MIN_COST_SHARE * 1.01,
                            [0, 1], {0: True, 1: True})
    assert not out[1]["straggler"]


def test_echo_exact_values():
    n = 12
    stall = np.arange(n) % 4 == 3                      # steps 3, 7, 11
    straggler_wait = np.where(stall, 50, 1).astype(np.int64) * MS
    compute = np.where(stall, 40, 5).astype(np.int64) * MS
    compute[7] = 44 * MS
    steady = np.ones(n, dtype=bool)
    e = rank_stragglers.echo(stall, straggler_wait, steady, compute, steady)
    assert e["stall_steps"] == 3
    assert e["compute_on_stalls_s"] == pytest.approx(np.median([40, 44, 40]) * 1e-3)
    assert e["compute_other_s"] == pytest.approx(5e-3)
    assert e["stall_excess_s"] == pytest.approx(49e-3)
    assert e["absorbed"] == pytest.approx((40 - 5) / 49)
    assert e["echo"]
    # A rank that overlapped the stall: no echo.
    flat = np.full(n, 5 * MS, dtype=np.int64)
    assert rank_stragglers.echo(stall, straggler_wait, steady, flat, steady)["echo"] is False
    # Too few stall steps shared with the other rank: unknown.
    few = rank_stragglers.echo(stall, straggler_wait, steady, compute[:5], steady[:5])
    assert (few["echo"], few["unknown"]) == (None, "few_stalls")


def test_combine_names_the_straggler_its_cadence_and_the_echo():
    rep, recs = stalling_job(stall_rank=1)
    r = rep.to_dict()["ranks"]
    assert r["stragglers"] == [1]
    assert r["gathered"] == [0, 1, 2] and r["world_size"] == 3 and r["missing"] == []
    assert r["per_rank"][1]["period"] == 4 and r["per_rank"][1]["straggler"]
    waits = np.stack([a["fetch_done_ns"] - a["begin_ns"] for a in recs.values()])
    assert np.array_equal(rep.input_wait_ns, waits.max(axis=0))
    assert r["held_by"] == waits.argmax(axis=0).tolist()
    echo = {e["rank"]: e for e in r["echo"]}
    assert set(echo) == {0, 2} and all(e["echo"] for e in echo.values())
    stall = np.arange(40) % 4 == 3
    stall[0] = False  # step 0 is start-up on every rank
    c0 = recs[0]["end_ns"] - recs[0]["fetch_done_ns"]
    steady = np.arange(40) > 0
    assert echo[0]["compute_on_stalls_s"] == pytest.approx(np.median(c0[stall]) * 1e-9)
    assert echo[0]["compute_other_s"] == pytest.approx(np.median(c0[~stall & steady]) * 1e-9)
    assert rep.to_dict()["temporal"]["period"] == 4  # the job's own cadence
    text = str(rep)
    assert "STRAGGLER rank 1" in text and "echo on rank 0: waited for it" in text
    html = render.report_html(rep.summary)
    assert "STRAGGLER rank 1" in html and "<table" in html


def test_the_rank_table_fits_100_columns_one_unit_a_column():
    r, _ = stalling_job(stall_rank=1)
    lines = str(r).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("rank "))
    head, rows = lines[at], lines[at + 1:at + 4]
    assert lines[at - 1] == render.RANK_LEGEND
    assert all(len(line) <= 100 for line in (head, *rows))
    wait_unit = re.search(r"wait \((\w+)\)", head).group(1)
    per = r.to_dict()["ranks"]["per_rank"]
    scale = {"s": 1.0, "ms": 1e-3, "µs": 1e-6}[wait_unit]
    for p, line in zip(per, rows):
        cells = line.split()
        assert cells[0] == f"{p['rank']}*" if p["straggler"] else str(p["rank"])
        assert float(cells[8]) * scale == pytest.approx(p["input_wait_median_s"], rel=5e-3)
    assert [p["straggler"] for p in per] == [False, True, False]


def test_combine_healthy_ranks_name_no_straggler():
    rng = np.random.default_rng(3)
    n = 60
    waits = [((0.2 + 0.1 * rng.random(n)) * MS).astype(np.int64) for _ in range(3)]
    # Scheduling blips of 2-10 ms, all on rank 2: it holds the unique wait,
    # but its own report keeps no stall that matters.
    waits[2][[10, 30, 50]] += np.array([2, 6, 10]) * MS
    computes = [((8 + rng.random(n)) * MS).astype(np.int64) for _ in range(3)]
    rep, _ = job(waits, computes)
    r = rep.to_dict()["ranks"]
    assert r["stragglers"] == [] and r["echo"] == []
    assert r["per_rank"][2]["unique_share"] > rank_stragglers.STRAGGLER_MIN_SHARE
    assert "no straggler" in str(rep)


def test_combine_ranks_with_fewer_steps_align_by_index():
    rep, recs = stalling_job(stall_rank=2, short=(1, 30))
    r = rep.to_dict()["ranks"]
    assert r["aligned_steps"] == 40 and [p["steps"] for p in r["per_rank"]] == [40, 30, 40]
    grid = np.full((3, 40), -1, dtype=np.int64)
    for k, a in recs.items():
        grid[k, :len(a)] = a["fetch_done_ns"] - a["begin_ns"]
    assert np.array_equal(rep.input_wait_ns, grid.max(axis=0))
    assert r["stragglers"] == [2]
    assert {e["rank"]: e["stall_steps"] for e in r["echo"]} == {0: 10, 1: 7}


def test_combine_save_load_and_compare(tmp_path):
    a, _ = stalling_job(stall_rank=1)
    b, _ = stalling_job(stall_rank=1, stall_ms=5, seed=2)
    path = a.save(tmp_path / "a.run")
    back = traceml.load(path)
    assert back.to_dict()["ranks"] == a.to_dict()["ranks"]
    assert back == a
    cmp = traceml.compare(a, b, labels=["slow", "fast"])
    rows = cmp.to_dict()["rows"]
    # compare() reads the largest wait across ranks per steady step.
    steady = np.ones(len(a.steps), dtype=bool)
    steady[a.summary["epoch_start"]["steps"]] = False
    assert rows[0]["mean_wait_s"] == pytest.approx(a.input_wait_ns[steady].mean() * 1e-9)
    assert rows[0]["ranks"] == 3 and rows[0]["stragglers"] == [1]
    assert "straggler: rank 1" in str(cmp)


def test_each_ranks_rule_and_next_steps_read_in_the_loading_traceml_words(tmp_path,
                                                                         monkeypatch):
    from traceml import findings

    a, _ = stalling_job(stall_rank=1)
    path = a.save(tmp_path / "a.run")
    straggler = a.to_dict()["ranks"]["per_rank"][1]
    code, numbers = straggler["diagnosis_rule_item"]
    # The items are what the rank's saved words were made from.
    assert findings.words_of(code)(numbers) == straggler["diagnosis_rule"]
    assert findings.sentences(straggler["next_items"]) == straggler["next"]
    assert straggler["next_items"], "the stalling rank has next steps"
    next_code = straggler["next_items"][0][0]
    for c in (code, next_code):
        table = next(f.WORDS for f in findings.REGISTRY if c in getattr(f, "WORDS", {}))
        monkeypatch.setitem(table, c, lambda p, c=c: f"today's words for {c}")
    back = traceml.load(path).to_dict()["ranks"]["per_rank"][1]
    assert back["diagnosis_rule"] == f"today's words for {code}"
    assert back["next"][0] == f"today's words for {next_code}"


def test_run_file_with_a_bad_ranks_block_is_refused(tmp_path):
    a, _ = stalling_job(stall_rank=1)
    a.summary["ranks"]["held_by"] = a.summary["ranks"]["held_by"][:-1]
    path = a.save(tmp_path / "bad.run")
    with pytest.raises(traceml.RunFileError, match="held_by"):
        traceml.load(path)


def test_report_ranks_argument_and_gather_arguments():
    rec = traceml.Recorder()
    for _ in rec.wrap(range(5)):
        pass
    with pytest.raises(ValueError, match="ranks must be None or 'all'"):
        rec.report(ranks="some")
    # Without a process group: the local report.
    local = rec.report(ranks="all")
    assert local.summary["steps"] == 5 and "ranks" not in local.summary
    with pytest.raises(ValueError, match="timeout_s"):
        traceml.gather(recorder=rec, timeout_s=0)
    with pytest.raises(TypeError, match="timeout_s"):
        traceml.gather(recorder=rec, timeout_s="5")
    with pytest.raises(ValueError, match="chunk_steps"):
        traceml.gather(recorder=rec, chunk_steps=0)
    with pytest.raises(TypeError, match="chunk_steps"):
        traceml.gather(recorder=rec, chunk_steps=2.0)
    with pytest.raises(TypeError, match="recorder"):
        traceml.gather(recorder="default")


def test_combine_refuses_facts_missing_a_rank():
    recs = {0: records([MS] * 4, [MS] * 4)}
    with pytest.raises(ValueError, match="facts lacks rank 0"):
        ranks.combine(recs, {})
    with pytest.raises(ValueError, match="no rank"):
        ranks.combine({}, {})


# --- real ranks -------------------------------------------------------------------

def run_ranks(world: int, scenario: str, out, timeout_s: float = 150.0):
    """Run tests/ranks_worker.py as ``world`` processes; every one is killed
    if any fails or the run takes longer than timeout_s."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="default")
    procs = []
    try:
        for r in range(world):
            log = open(out / f"log{r}", "w")
            procs.append(subprocess.Popen(
                [sys.executable, os.path.join(HERE, "ranks_worker.py"), str(r), str(world),
                 str(out / "rdv"), str(out), scenario],
                stdout=log, stderr=subprocess.STDOUT, env=env))
            log.close()
        for p in procs:
            p.wait(timeout=timeout_s)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    logs = "\n".join((out / f"log{r}").read_text() for r in range(world))
    assert all(p.returncode == 0 for p in procs), logs
    if "dies=" not in scenario:
        # Every rank's last all-reduce on the job's own group went through.
        assert ([(out / f"allreduce{r}").read_text() for r in range(world)]
                == [str(world)] * world)
    rep = traceml.load(out / "job.run")
    rep.out_dir = out
    return rep, [np.load(out / f"rank{r}.npy") for r in range(world)]


def rep_dir(rep):
    return rep.out_dir


def _waits(steps):
    return steps["fetch_done_ns"] - steps["begin_ns"]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("two_ranks")
    return run_ranks(2, "stall=1,repeat=2", out)


@pytest.fixture(scope="module")
def healthy_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("healthy_ranks")
    return run_ranks(2, "", out)


@pytest.fixture(scope="module")
def three_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("three_ranks")
    return run_ranks(3, "stall=2,steps=1:34", out)


@pytest.fixture(scope="module")
def absent_rank(tmp_path_factory):
    out = tmp_path_factory.mktemp("absent_rank")
    rep, local = run_ranks(3, "absent=2,timeout=3", out)
    return rep, local, out


@pytest.mark.slow
def test_two_ranks_name_the_stalling_rank_and_its_cadence(two_ranks):
    rep, local = two_ranks
    r = rep.to_dict()["ranks"]
    assert r["gathered"] == [0, 1] and r["stragglers"] == [1]
    assert r["per_rank"][1]["period"] == 4 and r["per_rank"][0]["straggler"] is False
    waits = np.stack([_waits(a) for a in local])
    assert np.array_equal(rep.input_wait_ns, waits.max(axis=0))
    assert r["held_by"] == waits.argmax(axis=0).tolist()
    assert "STRAGGLER rank 1" in str(rep)


@pytest.mark.slow
def test_a_second_gather_gives_the_same_report(two_ranks):
    rep, _ = two_ranks
    out = rep_dir(rep)
    again = traceml.load(out / "job2.run")
    assert again.to_dict()["ranks"] == rep.to_dict()["ranks"]
    assert np.array_equal(again.steps, rep.steps)


@pytest.mark.slow
def test_two_ranks_show_the_echo_in_the_other_ranks_compute(two_ranks):
    rep, local = two_ranks
    (e,) = rep.to_dict()["ranks"]["echo"]
    assert e["straggler"] == 1 and e["rank"] == 0 and e["echo"] is True
    # Independently: rank 1's stall steps are where its dataset slept.
    stall = _waits(local[1]) > 25 * MS
    assert np.array_equal(np.flatnonzero(stall), np.arange(3, 40, 4))
    c0 = local[0]["end_ns"] - local[0]["fetch_done_ns"]
    steady = np.arange(40) > 0
    assert e["compute_on_stalls_s"] == pytest.approx(np.median(c0[stall]) * 1e-9)
    assert e["compute_other_s"] == pytest.approx(np.median(c0[~stall & steady]) * 1e-9)
    assert e["growth_s"] > 0.5 * e["stall_excess_s"]


@pytest.mark.slow
def test_three_ranks_with_a_short_rank(three_ranks):
    rep, local = three_ranks
    r = rep.to_dict()["ranks"]
    assert [p["steps"] for p in r["per_rank"]] == [len(a) for a in local] == [40, 34, 40]
    assert r["stragglers"] == [2] and r["per_rank"][2]["period"] == 4
    grid = np.full((3, 40), -1, dtype=np.int64)
    for k, a in enumerate(local):
        grid[k, :len(a)] = _waits(a)
    assert np.array_equal(rep.input_wait_ns, grid.max(axis=0))
    echo = {e["rank"]: e for e in r["echo"]}
    assert echo[0]["echo"] is True and echo[1]["echo"] is True


@pytest.mark.slow
def test_absent_rank_is_stated_after_the_timeout_and_healthy_ranks_name_no_straggler(
        absent_rank):
    rep, local, out = absent_rank
    r = rep.to_dict()["ranks"]
    assert r["gathered"] == [0, 1] and r["world_size"] == 3
    assert [m["rank"] for m in r["missing"]] == [2]
    assert "3.00 s" in r["missing"][0]["reason"]
    assert r["stragglers"] == []
    waits = np.stack([_waits(a) for a in local[:2]])
    assert np.array_equal(rep.input_wait_ns, waits.max(axis=0))
    assert "MISSING rank 2" in (out / "job.txt").read_text()
    assert (out / "done1").exists() and not (out / "done2").exists()


@pytest.mark.slow
def test_healthy_ranks_name_no_straggler(healthy_ranks):
    rep, local = healthy_ranks
    r = rep.to_dict()["ranks"]
    assert r["gathered"] == [0, 1] and r["missing"] == []
    assert r["stragglers"] == [] and r["echo"] == []
    assert not any(p["straggler"] for p in r["per_rank"])
    waits = np.stack([_waits(a) for a in local])
    assert np.array_equal(rep.input_wait_ns, waits.max(axis=0))
    assert "no straggler" in str(rep)


@pytest.fixture(scope="module")
def dying_rank(tmp_path_factory):
    out = tmp_path_factory.mktemp("dying_rank")
    return run_ranks(2, "stall=0,dies=1,timeout=5", out)


@pytest.mark.slow
def test_a_rank_that_dies_inside_the_gather_is_stated_not_waited_for(dying_rank):
    rep, local = dying_rank
    r = rep.to_dict()["ranks"]
    assert r["gathered"] == [0] and [m["rank"] for m in r["missing"]] == [1]
    assert "checked in, then sent nothing" in r["missing"][0]["reason"]
    assert np.array_equal(rep.input_wait_ns, _waits(local[0]))
    assert r["per_rank"][0]["period"] == 4


def test_echo_of_a_straggler_that_stalls_on_most_steps_is_read_as_a_slope():
    # Rank 0 stalls on every steady step, its waits 20-80 ms; rank 1 waits
    # for it in the all-reduce: its compute is 5 ms plus rank 0's wait.  No
    # calm step is left for the medians: the Theil-Sen slope of rank 1's
    # compute against rank 0's wait reads the echo.
    rng = np.random.default_rng(4)
    n = 30
    stall = np.ones(n, dtype=bool)
    wait = rng.integers(20, 80, n).astype(np.int64) * MS
    steady = np.ones(n, dtype=bool)
    waited = 5 * MS + wait + rng.integers(0, 2, n) * MS // 10
    e = rank_stragglers.echo(stall, wait, steady, waited, steady)
    from scipy.stats import theilslopes
    slope = theilslopes(waited.astype(float), wait.astype(float)).slope
    assert (e["read"], e["stall_steps"], e["echo"]) == ("slope", n, True)
    assert e["absorbed"] == pytest.approx(slope) and 0.9 < slope < 1.1
    # A rank that overlapped the stalls: its compute does not follow them.
    flat = (5 * MS + rng.integers(0, 3, n) * MS // 10).astype(np.int64)
    e = rank_stragglers.echo(stall, wait, steady, flat, steady)
    assert e["read"] == "slope" and e["echo"] is False and abs(e["absorbed"]) < 0.1
    # Waits that do not vary on the stall steps: unknown, and said so.
    e = rank_stragglers.echo(stall, np.full(n, 50 * MS), steady, waited, steady)
    assert (e["echo"], e["unknown"]) == (None, "flat_waits")
    lines = rank_stragglers.ranks_lines({
        "world_size": 2, "gathered": [0, 1], "aligned_steps": n,
        "max_wait": {"median": 0.05, "total": 1.5}, "missing": [], "per_rank": [],
        "stragglers": [], "straggler_rule": "", "echo": [{"straggler": 0, "rank": 1, **e}]})
    assert "do not vary" in lines[-1] and "too few of its stall steps" not in lines[-1]
