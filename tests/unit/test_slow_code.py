"""findings.slow_code and traceml.stacks over hand-made samples: the
function counts, the batch join and the Fisher-test rule, each checked
against an independent computation (scipy's hypergeometric tail)."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from traceml import _core, stacks
from traceml.findings import slow_code, slow_samples

CODES = [("/data/ds.py", "DS.__getitem__", 10), ("/data/ds.py", "query_rows", 30),
         ("/data/ds.py", "burn", 2), (stacks._OWN_DIR + "wrapping.py", "own", 1)]


def _drained(stacks_rows):
    """stacks_rows: [(t_ns, worker, weight, kind, [(code, line) innermost first])]."""
    samples, frames = [], []
    for t, w, weight, kind, fr in stacks_rows:
        samples.append([t, 100 + w, w, weight, kind, len(fr)])
        frames.extend(fr)
    return stacks.Drained(np.array(samples, np.int64).reshape(-1, 6),
                          np.array(frames, np.int32).reshape(-1, 2), CODES, {})


def test_function_counts_hold_each_function_once_and_leave_traceml_out():
    d = _drained([
        (1, 0, 1, 0, [(2, 4), (1, 31), (0, 12), (3, 9)]),        # burn < query_rows < getitem
        (2, 0, 2, 0, [(2, 5), (2, 5), (0, 11), (3, 9)]),         # burn recursing
        (3, 0, 1, 1, []),                                         # another thread
        (4, 0, 3, 0, [(0, 11), (3, 9)]),
    ])
    group = np.array([1, 1, 1, 0])
    c = stacks.function_counts(d, group)
    by = {k[1]: i for i, k in enumerate(c.keys)}
    assert "own" not in by
    # held: weight of samples whose stack holds it, per group (0 fast, 1 slow).
    assert c.held[by["burn"]].tolist() == [0, 3]
    assert c.held[by["query_rows"]].tolist() == [0, 1]
    assert c.held[by["DS.__getitem__"]].tolist() == [3, 3]
    # own: the innermost kept frame.
    assert c.own[by["burn"]].tolist() == [0, 3]
    assert c.own[by["DS.__getitem__"]].tolist() == [3, 0]
    assert c.hot_line[by["burn"]] == 5          # weight 2 at line 5, 1 at line 4
    # From the root: getitem's frame is 1 (traceml's own at 0) in both slow samples.
    assert c.root_distance[by["DS.__getitem__"]] == pytest.approx(1.0)
    assert c.root_distance[by["burn"]] == pytest.approx((3 * 1 + 2 * 2) / 3)


def test_batch_of_joins_samples_to_the_worker_batch_holding_their_time():
    rec = np.zeros(3, _core.BATCH_RECORD_DTYPE)
    rec["worker"] = [0, 1, 0]
    rec["begin_ns"] = [100, 100, 300]
    rec["end_ns"] = [200, 250, 400]
    s = np.zeros((6, 6), np.int64)
    s[:, stacks.T_NS] = [150, 150, 250, 350, 401, 120]
    s[:, stacks.WORKER] = [0, 1, 0, 0, 0, -1]
    assert stacks.batch_of(s, rec).tolist() == [0, 1, -1, 2, -1, -1]


def _block(functions, slow, fast, **kw):
    base = {"status": "on", "samples": {"slow": slow, "fast": fast, "slow_other_thread": 0},
            "slow_batches": 4, "slow_cpu_share": 0.95, "functions": functions}
    base.update(kw)
    return base


def _fn(name, slow, fast, root, own=0.0):
    return {"file": "/data/ds.py", "function": name, "first_line": 1, "hot_line": 7,
            "slow": slow, "fast": fast, "own_slow": own, "own_fast": own, "root_distance": root}


def _hyper_p(a, n1, b, n0):
    """P(X >= a), X ~ Hypergeom(N = n1 + n0, K = a + b, n = n1)."""
    return sps.hypergeom.sf(a - 1, n1 + n0, a + b, n1)


def test_the_named_function_is_the_outermost_of_the_path_that_tells_batches_apart():
    fns = [_fn("DS.__getitem__", 40, 60, 1), _fn("query_rows", 36, 3, 2),
           _fn("burn", 35, 3, 3), _fn("decode", 4, 57, 2)]
    f = slow_code.judge(_block(fns, 40, 60))
    assert f.code == "slow_code_named"
    assert f.numbers["function"] == "query_rows"       # burn: its callee, within 90 %
    assert f.numbers["p_value"] == pytest.approx(_hyper_p(36, 40, 3, 60))
    assert f.numbers["slow_share"] == pytest.approx(0.9)
    assert f.numbers["fast_share"] == pytest.approx(0.05)
    # The next step names its callee within 90 % first, where the CPU
    # goes, with its own shares, called from the named one.
    (adv,) = slow_code.advise({"slow_code": _block(fns, 40, 60)})
    said = slow_code.WORDS[adv.code](adv.numbers)
    assert adv.code == "look_at_function"
    assert said.startswith("Look at `burn` in `data/ds.py:7` (called from `query_rows` in "
                           "`data/ds.py:7`): 88% of the slow batches' sampled worker CPU, "
                           "5% of the fast ones'"), said


def test_a_chain_of_callers_that_tie_is_named_through_to_the_work():
    # Every 7th sample burns 40 ms in _spin, called by _expensive_transform
    # < decode < load < __getitem__; the fast batches drew 3 samples, none
    # on that path: all five tell the batches apart alike, and which is
    # outermost by a sample is chance.  The words name the path through.
    fns = [_fn("DS.__getitem__", 40, 0, 1), _fn("load", 40, 0, 2), _fn("decode", 40, 0, 3),
           _fn("_expensive_transform", 40, 0, 4), _fn("_spin", 40, 0, 5)]
    f = slow_code.judge(_block(fns, 40, 3))
    assert f.code == "slow_code_named" and f.numbers["function"] == "DS.__getitem__"
    assert [r["function"] for r in f.numbers["through"]] == [
        "load", "decode", "_expensive_transform"]
    (adv,) = slow_code.advise({"slow_code": _block(fns, 40, 3)})
    said = slow_code.WORDS[adv.code](adv.numbers)
    assert said.startswith("Look at `_spin` in `data/ds.py:7` (called from `DS.__getitem__` "
                           "in `data/ds.py:7` through `load`, `decode`, "
                           "`_expensive_transform`)"), said
    # Past THROUGH_SHOWN between, the innermost are kept.
    more = fns[:1] + [_fn(f"step{i}", 40, 0, 2 + i) for i in range(5)] + [_fn("_spin", 40, 0, 9)]
    said = slow_code.WORDS["look_at_function"](slow_code.judge(_block(more, 40, 3)).numbers)
    assert "Look at `_spin`" in said and "through ... `step2`, `step3`, `step4`)" in said, said


def _path_entry(name, share):
    return {"file": "/data/ds.py", "function": name, "first_line": 1, "line": 3, "share": share}


def test_a_function_in_every_batch_is_not_named_but_the_hot_path_is():
    fns = [_fn("DS.__getitem__", 40, 60, 1, own=0), _fn("decode", 39, 58, 2, own=48)]
    path = [_path_entry("DS.__getitem__", 1.0), _path_entry("decode", 0.97),
            _path_entry("inflate", 0.58)]
    f = slow_code.judge(_block(fns, 40, 60, hot_path=path))
    assert f.code == "slow_code_same" and not f.numbers["every_fetch"]
    # 58 of 100 samples is not "most" beyond chance: binomial P(X >= 58) > 0.01.
    assert sps.binom.sf(57, 100, 0.5) > 0.01
    assert [e["function"] for e in f.numbers["path"]] == ["DS.__getitem__", "decode"]
    said = slow_code.WORDS[f.code](f.numbers)
    assert "`decode` in `data/ds.py:3` 97%" in said, said
    # Every fetch stalled: nothing fast to compare with, the path still holds.
    f = slow_code.judge(_block(fns, 100, 0, hot_path=path))
    assert f.code == "slow_code_same" and f.numbers["every_fetch"]


def test_the_hot_path_follows_the_heaviest_callee_across_workers():
    # Two workers' code tables hold the same functions under other indices.
    codes = [("/data/ds.py", "getitem", 1), ("/data/ds.py", "a", 5), ("/data/ds.py", "b", 9),
             ("/data/ds.py", "getitem", 1), ("/data/ds.py", "a", 5)]
    rows = ([(i, 0, 1, 0, [(1, 6), (0, 2)]) for i in range(3)]
            + [(i, 1, 1, 0, [(4, 7), (3, 2)]) for i in range(3, 6)]
            + [(i, 1, 1, 0, [(2, 10), (3, 2)]) for i in range(6, 8)])
    samples, frames = [], []
    for t, w, weight, kind, fr in rows:
        samples.append([t, 100 + w, w, weight, kind, len(fr)])
        frames.extend(fr)
    d = stacks.Drained(np.array(samples, np.int64), np.array(frames, np.int32), codes, {})
    path = stacks.hot_path(d, np.zeros(len(samples), np.int64))
    assert [(e["function"], e["share"]) for e in path] == [("getitem", 1.0), ("a", 6 / 8)]
    assert path[1]["line"] in (6, 7)


def test_too_few_samples_say_not_yet_from_the_best_p_possible():
    # 3 slow and 4 fast samples: even all 3 slow in one function, no fast,
    # reach only 1 / C(7, 3) = 1/35 > 0.01.
    assert slow_code.best_p_value(3, 4) == pytest.approx(1 / math.comb(7, 3))
    assert slow_code.best_p_value(900, 900) == 0.0     # C(1800, 900) overflows a float
    f = slow_code.judge(_block([_fn("query_rows", 3, 0, 2)], 3, 4))
    assert f.code == "slow_code_too_few" and f.numbers["samples"] == 7
    assert "too few to name a function" in slow_code.WORDS[f.code](f.numbers)
    # With 8 and 12 the same split is named (1/C(20, 8) < 0.01).
    f = slow_code.judge(_block([_fn("query_rows", 8, 0, 2)], 8, 12))
    assert f.code == "slow_code_named"


def test_off_cpu_and_other_thread_come_before_any_function():
    fns = [_fn("query_rows", 36, 3, 2)]
    f = slow_code.judge(_block(fns, 40, 60, slow_cpu_share=0.2))
    assert f.code == "slow_code_off_cpu"
    assert "not on CPU in the slow batches" in slow_code.WORDS[f.code](f.numbers)
    b = _block(fns, 40, 60)
    b["samples"]["slow_other_thread"] = 90
    f = slow_code.judge(b)
    assert f.code == "slow_code_other_thread"
    assert f.numbers["share"] == pytest.approx(90 / 130)
    assert slow_code.judge({"status": "a SIGPROF handler was already set"}).code == "slow_code_off"
    assert slow_code.judge(None) is None
    assert slow_code.judge(_block(fns, 0, 60, slow_batches=0)) is None


def test_every_batch_alike_and_input_bound_leads_with_the_hot_path():
    fns = [_fn("DS.__getitem__", 40, 60, 1), _fn("decode", 39, 58, 2)]
    path = [_path_entry("DS.__getitem__", 1.0), _path_entry("read_rows", 0.98),
            _path_entry("inflate", 0.9)]
    s = {"slow_code": _block(fns, 40, 60, hot_path=path), "diagnosis": "INPUT-BOUND"}
    (adv,) = slow_code.advise(s)
    assert adv.code == "look_at_path"
    said = slow_code.WORDS[adv.code](adv.numbers)
    assert ("`inflate` in `data/ds.py:3` holds 90% of the workers' sampled CPU (called from "
            "`read_rows` in `data/ds.py:3`)") in said, said
    s["diagnosis"] = "HAND-OVER"
    assert slow_code.advise(s) == []
    # The user's functions between the two are on the way (helper 35B:
    # "`load_episode` ... down to `burn`" skipped `decode_video_frames`).
    path = [_path_entry("DS.__getitem__", 1.0), _path_entry("load_episode", 0.99),
            _path_entry("decode_video_frames", 0.94), _path_entry("burn", 0.94)]
    s = {"slow_code": _block(fns, 40, 60, hot_path=path), "diagnosis": "INPUT-BOUND"}
    (adv,) = slow_code.advise(s)
    said = slow_code.WORDS[adv.code](adv.numbers)
    assert ("`burn` in `data/ds.py:3` holds 94% of the workers' sampled CPU (called from "
            "`load_episode` in `data/ds.py:3` through `decode_video_frames`)") in said, said
    # A path rooted in a collate_fn keeps its root (helper 39A: `burn` was
    # named alone for a collate_fn holding 94% of the batch time).
    path = [_path_entry("coll", 0.98), _path_entry("burn", 0.97)]
    s = {"slow_code": _block(fns, 40, 60, hot_path=path), "diagnosis": "INPUT-BOUND"}
    (adv,) = slow_code.advise(s)
    said = slow_code.WORDS[adv.code](adv.numbers)
    assert ("`burn` in `data/ds.py:3` holds 97% of the workers' sampled CPU (called from "
            "`coll` in `data/ds.py:3`)") in said, said


def test_the_hot_path_is_named_down_to_the_users_code_not_the_library_under_it():
    # __getitem__ > load_and_augment > _resize > F.interpolate (helper
    # 30A): "down to `interpolate` in `nn/functional.py`" skipped the
    # user's `_resize`, which holds 98%; it is named, torch's op after it.
    import sysconfig

    torch_file = sysconfig.get_paths()["purelib"] + "/torch/nn/functional.py"

    def entry(name, file, share):
        return {"file": file, "function": name, "first_line": 1, "line": 5, "share": share,
                "library": stacks.is_library(file)}

    path = [entry("TorchAug.__getitem__", "/u/torchds.py", 1.0),
            entry("load_and_augment", "/u/torchds.py", 0.99),
            entry("_resize", "/u/torchds.py", 0.98),
            entry("interpolate", torch_file, 0.7)]
    assert stacks.is_library(torch_file) and not stacks.is_library("/u/torchds.py")
    fns = [_fn("TorchAug.__getitem__", 40, 60, 1)]
    s = {"slow_code": _block(fns, 40, 60, hot_path=path), "diagnosis": "INPUT-BOUND"}
    (adv,) = slow_code.advise(s)
    said = slow_code.WORDS[adv.code](adv.numbers)
    assert "`_resize` in `u/torchds.py:5` holds 98% of the workers' sampled CPU (called from " \
           "`load_and_augment` in `u/torchds.py:5`), which spends it in `interpolate` in " \
           "`nn/functional.py:5` (70%)." in said, said
    # All of it the user's: down to the last, nothing "inside".
    path[-1] = entry("_blend", "/u/torchds.py", 0.75)
    (adv,) = slow_code.advise(s)
    assert adv.numbers["tail"]["function"] == "_blend" and adv.numbers["inside"] is None


def test_a_named_function_does_not_lead_where_the_loop_waits_on_the_hand_over():
    fns = [_fn("DS.__getitem__", 40, 60, 1), _fn("query_rows", 38, 2, 2)]
    s = {"slow_code": _block(fns, 40, 60), "diagnosis": "INPUT-BOUND"}
    (adv,) = slow_code.advise(s)
    assert adv.code == "look_at_function" and adv.numbers["function"] == "query_rows"
    # Batches already made when the loop waited: not the code to look at.
    s["diagnosis"] = "HAND-OVER"
    assert slow_code.advise(s) == []
    assert slow_code.judge(s["slow_code"]).code == "slow_code_named"     # the evidence stays


def test_slow_batches_of_the_same_code_get_no_next_step_of_their_own():
    # Two groups of make times (one slow worker, or slow samples) that run
    # the same code: no function tells them apart, and "every batch costs
    # alike" would be false; the evidence says so, the attribution leads.
    fns = [_fn("DS.__getitem__", 40, 60, 1), _fn("burn", 39, 58, 2)]
    path = [_path_entry("DS.__getitem__", 1.0), _path_entry("burn", 0.98)]
    s = {"slow_code": _block(fns, 40, 60, hot_path=path), "diagnosis": "INPUT-BOUND",
         "attribution": {"label": "ONE-WORKER"}}
    f = slow_code.judge(s["slow_code"])
    assert f.code == "slow_code_same" and not f.numbers["one_group"]
    (said,) = slow_code.evidence_lines(s)
    assert "they run the same code, only longer" in said and "every batch's" not in said
    assert slow_code.advise(s) == []
    # A lock-step round (or no attribution) makes batches wait, not cost
    # more: every batch's cost, and the hot path is the next step.
    for label in ("LOCK-STEP", None):
        s["attribution"] = {"label": label}
        assert "the cost is every batch's" in slow_code.evidence_lines(s)[0]
        assert [a.code for a in slow_code.advise(s)] == ["look_at_path"]
    # Without an attribution, the workers' per-sample timing finding slow
    # samples (every 6th index, most of their batch's time) says the same.
    s["attribution"] = None
    s["production"] = {"samples": {"slow": {"count": 7, "batch_share": 0.98}}}
    assert "they run the same code, only longer" in slow_code.evidence_lines(s)[0]
    assert slow_code.advise(s) == []
    s["production"]["samples"]["slow"]["count"] = slow_samples.STRIDE_MIN_SLOW - 1
    assert [a.code for a in slow_code.advise(s)] == ["look_at_path"]
    # One slow sample in every batch (every 4th index at batch size 4):
    # each batch bears it, so the cost is every batch's.
    s["production"]["samples"]["slow"].update(count=62, batches_holding=62,
                                               batches_tested=64)
    assert "the cost is every batch's" in slow_code.evidence_lines(s)[0]
    assert [a.code for a in slow_code.advise(s)] == ["look_at_path"]
    s["production"]["samples"]["slow"].update(batches_holding=16)
    assert slow_code.advise(s) == []


def test_off_cpu_names_the_larger_measured_part():
    fns = [_fn("query_rows", 36, 3, 2)]
    # 30% on CPU, 50% in the run queue, 20% blocked: waiting for a CPU.
    f = slow_code.judge(_block(fns, 40, 60, slow_cpu_share=0.3, fast_cpu_share=0.9,
                               slow_runq_share=0.5))
    assert f.code == "slow_code_cpu_wait" and f.numbers["runq_share"] == 0.5
    said = slow_code.WORDS[f.code](f.numbers)
    assert "waited for a CPU in the slow batches" in said and "went down" not in said
    # Every batch still ran its code: where that CPU went, held beyond
    # chance (38 of 100 samples in query_rows is not), is said after.
    path = [_path_entry("DS.__getitem__", 0.97), _path_entry("query_rows", 0.38)]
    f = slow_code.judge(_block(fns, 40, 60, slow_cpu_share=0.3, fast_cpu_share=0.9,
                               slow_runq_share=0.5, hot_path=path))
    said = slow_code.WORDS[f.code](f.numbers)
    assert [e["function"] for e in f.numbers["path"]] == ["DS.__getitem__"]
    assert said.endswith("most of the workers' CPU went down `DS.__getitem__` in "
                         "`data/ds.py:3` 97%"), said
    # 30% on CPU, 10% run queue, 60% blocked: a sleep, I/O or a lock.
    f = slow_code.judge(_block(fns, 40, 60, slow_cpu_share=0.3, fast_cpu_share=0.9,
                               slow_runq_share=0.1))
    assert f.code == "slow_code_off_cpu"


def test_one_group_waiting_for_a_cpu_still_names_the_code_every_batch_runs():
    # 4 workers on 2 cores, every batch 40 ms of decode: each batch on CPU
    # 24% of its make time and queued 70% (other programs beside).  The
    # cores were shared; the batches' CPU is still decode's, and it leads.
    fns = [_fn("DS.__getitem__", 60, 0, 1), _fn("decode", 59, 0, 2)]
    path = [_path_entry("DS.__getitem__", 1.0), _path_entry("decode", 0.98)]
    queued = dict(one_group=True, slow_batches=12, fast_batches=0, hot_path=path,
                  slow_cpu_share=0.24, fast_cpu_share=None, slow_runq_share=0.70)
    s = {"slow_code": _block(fns, 60, 0, **queued), "diagnosis": "INPUT-BOUND",
         "attribution": {"label": "LOCK-STEP"}}
    f = slow_code.judge(s["slow_code"])
    assert f.code == "slow_code_same" and f.numbers["runq_share"] == 0.70
    (said,) = slow_code.evidence_lines(s)
    assert "`decode` in `data/ds.py:3` 98%" in said and "waiting for it 70%" in said, said
    assert [a.code for a in slow_code.advise(s)] == ["look_at_path"]
    # The CPU of every thread of the worker and the making thread's queue
    # past 100% together (helper 37B: "on it 57% ... waiting for it 71%"):
    # said as more than one thread at once.
    s["slow_code"].update(slow_cpu_share=0.57, slow_runq_share=0.71)
    (said,) = slow_code.evidence_lines(s)
    assert ("its threads on a CPU 57% of their make time (more than one thread at once) and "
            "the making thread waiting for one 71%") in said and "on it 57%" not in said
    # Queued less than on CPU: the queue goes unsaid.
    s["slow_code"].update(slow_cpu_share=0.6, slow_runq_share=0.3)
    assert "waiting for it" not in slow_code.evidence_lines(s)[0]
    # Blocked most of the make time (24% on CPU, 10% queued): off CPU.
    s["slow_code"].update(slow_cpu_share=0.24, slow_runq_share=0.10)
    assert slow_code.judge(s["slow_code"]).code == "slow_code_off_cpu"


def test_one_workers_slow_batches_in_the_same_function_leave_the_lead_to_it():
    # Worker 1's shard costs 24x: its batches spend 99% of their samples in
    # DS.__iter__, the fast ones 82%.  The function is named (its share
    # differs) but is every worker's code: ONE-WORKER's next step leads.
    fns = [_fn("DS.__iter__", 198, 82, 1)]
    b = _block(fns, 200, 100)
    s = {"slow_code": b, "attribution": {"label": "ONE-WORKER"}}
    assert slow_code.judge(b).code == "slow_code_named"
    assert slow_code.advise(s) == []
    s["attribution"] = {"label": "LOCK-STEP"}
    assert [a.code for a in slow_code.advise(s)] == ["look_at_function"]
    # A function the fast batches hardly run is the slow batches' own.
    b["functions"] = [_fn("decode_shard", 190, 10, 1)]
    s["attribution"] = {"label": "ONE-WORKER"}
    assert [a.code for a in slow_code.advise(s)] == ["look_at_function"]


def test_batches_all_blocked_are_off_cpu_whatever_the_others_did():
    # Every batch sleeps 10 ms (0.3 ms of CPU): the slow group 3% on CPU
    # and 2% queued, the fast one 5% on CPU.  Both off CPU: no function's
    # CPU made them slow, though one holds most of the few samples.
    fns = [_fn("DS.__getitem__", 20, 9, 1)]
    path = [_path_entry("DS.__getitem__", 0.76)]
    b = _block(fns, 20, 9, hot_path=path, slow_cpu_share=0.03, fast_cpu_share=0.05,
               slow_runq_share=0.02)
    assert slow_code.judge(b).code == "slow_code_off_cpu"
    assert slow_code.advise({"slow_code": b, "diagnosis": "INPUT-BOUND"}) == []
    # Without the run-queue reading the two shares alone cannot say.
    b["slow_runq_share"] = None
    assert slow_code.judge(b).code != "slow_code_off_cpu"


def test_blocked_batches_name_the_function_their_off_cpu_samples_went_down():
    # Every 8th index sleeps 30 ms in fetch_remote: the slow batches 3% on
    # CPU, 8% queued; 186 off-CPU wall-clock samples, all through
    # __getitem__ down to fetch_remote, 180 of them in it.
    off_path = [_path_entry("DS.__getitem__", 1.0), _path_entry("fetch_remote", 180 / 186)]
    b = _block([_fn("DS.__getitem__", 3, 1, 1)], 3, 1, slow_cpu_share=0.03,
               fast_cpu_share=1.0, slow_runq_share=0.08, off_path=off_path)
    b["samples"].update(slow_off_cpu=186.0, fast_off_cpu=0.0)
    f = slow_code.judge(b)
    assert f.code == "slow_code_off_cpu"
    assert [e["function"] for e in f.numbers["path"]] == ["DS.__getitem__", "fetch_remote"]
    [adv] = slow_code.advise({"slow_code": b, "diagnosis": "INPUT-BOUND"})
    assert adv.code == "look_at_function" and adv.numbers["off_cpu"]
    assert adv.numbers["function"] == "fetch_remote" and adv.numbers["from"]["function"] == (
        "DS.__getitem__")
    said = slow_code.WORDS["look_at_function"](adv.numbers)
    assert said.startswith("Look at `fetch_remote` in `data/ds.py:3` (from `DS.__getitem__`")
    assert f"{180 / 186:.0%}" in said
    # A path no longer most of the samples beyond chance names nothing:
    # 100 of 186 in fetch_remote, binomial P(X >= 100 | 186, 1/2) > 0.01.
    assert sps.binom.sf(99, 186, 0.5) > 0.01
    b["off_path"] = [_path_entry("DS.__getitem__", 1.0), _path_entry("fetch_remote", 100 / 186)]
    f = slow_code.judge(b)
    assert [e["function"] for e in f.numbers["path"]] == ["DS.__getitem__"]
    # A library call under the user's function: the user's is named, the
    # library's after it.
    b["off_path"] = off_path + [{**_path_entry("socket.recv", 170 / 186), "library": True}]
    [adv] = slow_code.advise({"slow_code": b, "diagnosis": "INPUT-BOUND"})
    said = slow_code.WORDS["look_at_function"](adv.numbers)
    assert adv.numbers["function"] == "fetch_remote" and said.endswith(
        "waiting in `socket.recv` in `data/ds.py:3`."), said
    b["off_path"] = []
    assert slow_code.advise({"slow_code": b, "diagnosis": "INPUT-BOUND"}) == []


def test_twice_the_cpu_in_a_batch_that_mostly_sleeps_is_still_off_cpu():
    # 0.7 ms of CPU against the others' 0.3 ms (2.3x, past BUSIER_RATIO),
    # in batches of 30 ms: the extra CPU is 1% of a slow batch, its time
    # blocked 89%; the larger part is named.
    b = _block([_fn("DS.__getitem__", 3, 1, 1)], 3, 1, slow_cpu_share=0.03,
               fast_cpu_share=1.0, slow_runq_share=0.08, slow_cpu_ratio=2.3,
               slow_extra_cpu_share=0.4e-3 / 30e-3)
    assert slow_code.judge(b).code == "slow_code_off_cpu"
    # Where the extra CPU outweighs the time blocked, the code is the cost.
    b.update(slow_cpu_share=0.45, slow_runq_share=0.2, slow_extra_cpu_share=0.4)
    assert slow_code.judge(b).code != "slow_code_off_cpu"


def test_slow_batches_that_burn_more_cpu_name_their_code_even_when_stretched():
    # Every 5th index burns 30 ms of CPU against 0.3 ms (batch size 1), on
    # a host whose run queue stretched the slow batches: 30% of their
    # make time on CPU, 50% queued, against 90% on CPU for the others.
    # Yet each burned 100x the others' CPU: their own code is the cost.
    fns = [_fn("decode", 36, 3, 2)]
    stretched = dict(slow_cpu_share=0.3, fast_cpu_share=0.9, slow_runq_share=0.5)
    assert slow_code.judge(_block(fns, 40, 60, **stretched)).code == "slow_code_cpu_wait"
    f = slow_code.judge(_block(fns, 40, 60, slow_cpu_ratio=100.0, **stretched))
    assert f.code == "slow_code_named" and f.numbers["function"] == "decode"
    # Batches queued as long with the same CPU as the others: the queue.
    f = slow_code.judge(_block(fns, 40, 60, slow_cpu_ratio=1.1, **stretched))
    assert f.code == "slow_code_cpu_wait"


def test_fast_batches_too_short_to_sample_are_not_every_batch_alike():
    # 3 slow batches of 30 ms among 14 (every 5th index, batch size 1):
    # the 11 fast ones, 0.4 ms each, drew no stack sample.  No fast
    # sample is not "every fetch stalled": nothing tells the two apart,
    # but the slow batches' 15 samples all in `burn` hold it beyond chance
    # (binomial P(15 of 15 | 1/2) = 3e-5 < 0.01): where their CPU goes.
    fns = [_fn("burn", 15, 0, 1)]
    path = [{"file": "/data/ds.py", "function": "burn", "first_line": 1, "line": 7,
             "share": 1.0}]
    b = _block(fns, 15, 0, slow_batches=3, fast_batches=11, hot_path=path)
    f = slow_code.judge(b)
    assert f.code == "slow_code_slow_only" and f.numbers["samples"] == 15
    said = slow_code.WORDS[f.code]({**f.numbers, "main": False})
    assert said.startswith("the fast batches were too short to be sampled") and "`burn`" in said
    (adv,) = slow_code.advise({"slow_code": b, "diagnosis": "INPUT-BOUND"})
    assert adv.code == "look_at_path" and adv.numbers["slow_only"]
    assert slow_code.WORDS[adv.code](adv.numbers).startswith("Make the slow batches cheaper")
    # 5 samples, 4 in `burn` (P(>= 4 of 5 | 1/2) = 0.19): not yet.
    f = slow_code.judge(_block([_fn("burn", 4, 0, 1)], 5, 0, slow_batches=3,
                               fast_batches=11, hot_path=[{**path[0], "share": 0.8}]))
    assert f.code == "slow_code_too_few" and f.numbers["samples"] == 5
    # Every batch slow (no fast batch at all): the cost is every batch's.
    b = _block(fns, 15, 0, slow_batches=14, fast_batches=0, hot_path=path)
    assert slow_code.judge(b).code == "slow_code_same"


def test_too_few_worker_samples_are_not_said_where_the_wait_is_outside_the_workers():
    # A slow Sampler at num_workers=2: the main process's CPU is 85% of the
    # wait; the workers' few stack samples cannot name it, however long
    # the run, so "a longer run would" is not said.
    block = _block([_fn("decode", 3, 5, 1)], 3, 5, slow_batches=2, fast_batches=30)
    s = {"slow_code": block, "loader": {"num_workers": 2},
         "wait_parts": {"largest": {"part": "main_cpu", "share": 0.85}}}
    assert slow_code.judge(block).code == "slow_code_too_few"
    assert slow_code.evidence_lines(s) == []
    # The workers making the batches are the largest part: not yet, said.
    s["wait_parts"]["largest"] = {"part": "worker_making", "share": 0.7}
    assert "a longer run would" in slow_code.evidence_lines(s)[0]


def test_top_of_batches_takes_a_frame_whose_line_is_unknown():
    # PyFrame_GetLineNumber can give -1: the batch's top function still comes out.
    d = _drained([(1, 0, 2, 0, [(2, -1), (0, 12)]), (2, 0, 1, 0, [(2, -1), (0, 12)])])
    top = stacks.top_of_batches(d, np.array([0, 0]))
    assert top == {0: ("burn (ds.py:-1)", 3, 3, None)}


def test_make_times_split_only_where_they_form_two_groups():
    rng = np.random.default_rng(5)
    # One lognormal group (a busy host stretching some batches): no split.
    one = rng.lognormal(np.log(8e6), 0.3, 400).astype(np.int64)
    assert slow_code.slow_make_threshold_ns(one) is None
    # 1 batch in 8 holds a slow sample (7 ms + 20 ms against 7 ms): two groups
    # under 4x apart, split between them.
    two = np.where(np.arange(400) % 8 == 0, 27e6, 7e6) * rng.lognormal(0, 0.05, 400)
    t = slow_code.slow_make_threshold_ns(two.astype(np.int64))
    assert t is not None and two[np.arange(400) % 8 != 0].max() < t < two[::8].min()
    # The eta behind the answer, computed here from the split it reports.
    logs = np.log(two)
    hi = logs > np.log(t)
    between = hi.mean() * (1 - hi.mean()) * (logs[hi].mean() - logs[~hi].mean()) ** 2
    assert between / logs.var() >= slow_code.SLOW_MAKE_MIN_ETA


def test_one_group_of_make_times_says_so_not_every_fetch():
    fns = [_fn("DS.__getitem__", 100, 0, 1, own=0)]
    path = [_path_entry("DS.__getitem__", 1.0)]
    block = _block(fns, 100, 0, hot_path=path)
    block["one_group"] = True
    f = slow_code.judge(block)
    assert f.code == "slow_code_same" and f.numbers["one_group"]
    assert not f.numbers["every_fetch"]
    said = slow_code.WORDS[f.code](f.numbers)
    assert said.startswith("the batches' make times form one group"), said


def test_other_threads_are_named_only_where_their_cpu_could_make_the_batches_slow():
    # 6 samples outside the dataset's thread against 2 inside: a sleeping
    # sample, whose stall held torch's threads' few samples, not a helper's
    # work (6 x 5 ms against 720 ms of slow batches: 4%): off CPU, as its
    # clock says.
    b = _block([_fn("query_rows", 2, 3, 2)], 2, 3, slow_cpu_share=0.05,
               slow_other_cpu_share=6 * 5e-3 / 0.72)
    b["samples"]["slow_other_thread"] = 6
    assert slow_code.judge(b).code == "slow_code_off_cpu"
    # A helper thread doing the work: its samples cover most of the time.
    b["slow_other_cpu_share"] = 0.8
    assert slow_code.judge(b).code == "slow_code_other_thread"
    # A run saved before the share was kept: the samples alone decide.
    del b["slow_other_cpu_share"]
    assert slow_code.judge(b).code == "slow_code_other_thread"
    # Beside 2 CPU hogs the helper queues for a core too: its CPU is 26 %
    # of the slow batches' time, yet the worker (all threads) was on a CPU
    # or queued for one all of it (measured: 97 of 109 samples, 0.45 on
    # CPU, 0.55 queued): not blocked, the other thread's work.
    b.update(slow_other_cpu_share=0.26, slow_cpu_share=0.45, slow_runq_share=0.55)
    b["samples"].update(slow=12, slow_other_thread=97)
    assert slow_code.judge(b).code == "slow_code_other_thread"
    # The same shares with the worker blocked most of the time (asleep, a
    # lock): off CPU, whatever few samples the other threads drew.
    b.update(slow_cpu_share=0.2, slow_runq_share=0.1)
    assert slow_code.judge(b).code == "slow_code_off_cpu"


def test_without_a_round_stalled_batches_apart_do_not_cost_alike():
    # num_workers=0, 2 of every 9 items burning 20 ms against 0.5 ms: the
    # stalled fetches are the costly ones; no lock-step round to blame.
    fns = [_fn("DS.__getitem__", 40, 60, 1), _fn("burn", 39, 58, 2)]
    path = [_path_entry("DS.__getitem__", 1.0), _path_entry("burn", 0.98)]
    s = {"slow_code": _block(fns, 40, 60, hot_path=path), "diagnosis": "INPUT-BOUND",
         "attribution": None, "loader": {"num_workers": 0}}
    assert "they run the same code, only longer" in slow_code.evidence_lines(s)[0]
    assert slow_code.advise(s) == []
    s["loader"]["num_workers"] = 2
    assert "the cost is every batch's" in slow_code.evidence_lines(s)[0]


def test_one_group_is_not_said_beside_one_slow_worker():
    # 3 workers, worker 2 at 3x under load: the make times' split finds one
    # group (eta under the line) while the workers' own timing pins worker 2.
    fns = [_fn("DS.__iter__", 40, 60, 1)]
    path = [_path_entry("DS.__iter__", 1.0)]
    block = _block(fns, 40, 60, hot_path=path)
    block["one_group"] = True
    s = {"slow_code": block, "attribution": {"label": "ONE-WORKER"},
         "loader": {"num_workers": 3}}
    (said,) = slow_code.evidence_lines(s)
    assert "one group" not in said and "they run the same code, only longer" in said
    s["attribution"] = None
    assert "form one group" in slow_code.evidence_lines(s)[0]


def test_one_group_is_not_said_beside_a_worker_at_three_times_the_cpu():
    # No attribution (in_order=False: the stalls keep no worker's turn),
    # one group of make times, but the workers' own CPU a batch: worker 1
    # at 31.1 ms against 10.5 and 10.6 (7, 10 and 10 batches).  Its
    # batches cost more: not "every batch costs alike", and the line says
    # which worker, by how much.
    fns = [_fn("It.__iter__", 40, 60, 1)]
    block = _block(fns, 40, 60, hot_path=[_path_entry("It.__iter__", 1.0)])
    block["one_group"] = True
    workers = {0: {"batches": 10, "cpu_median_s": 0.0105},
               1: {"batches": 7, "cpu_median_s": 0.0311},
               2: {"batches": 10, "cpu_median_s": 0.0106}}
    s = {"slow_code": block, "attribution": None, "loader": {"num_workers": 3},
         "diagnosis": "INPUT-BOUND", "production": {"workers": workers}}
    busier = slow_code.busier_worker(s)
    assert busier["worker"] == 1
    assert busier["cpu_ratio"] == pytest.approx(0.0311 / np.median([0.0105, 0.0106]))
    (said,) = slow_code.evidence_lines(s)
    assert "form one group" not in said and "they run the same code, only longer" in said
    assert "; worker 1's batches took 2.9x the other workers' CPU a batch (31.1 ms against " \
           "10.6 ms, medians)" in said
    assert slow_code.advise(s) == []
    # 1.4x is within the others' spread: alike, as before.
    workers[1]["cpu_median_s"] = 0.0147
    assert slow_code.busier_worker(s) is None
    assert "form one group" in slow_code.evidence_lines(s)[0]
    # Too few batches of that worker to say.
    workers[1].update(cpu_median_s=0.0311, batches=2)
    assert slow_code.busier_worker(s) is None


def test_the_samplers_share_is_the_weight_under_the_iterators_call_to_it():
    from traceml import torch_private

    codes = [("/s/torch/utils/data/dataloader.py", "_BaseDataLoaderIter._next_index", 700),
             ("/s/torch/utils/data/sampler.py", "BatchSampler.__iter__", 320),
             ("/data/sampler.py", "SlowSampler.__iter__", 8),
             ("/s/torch/utils/data/_utils/fetch.py", "_MapDatasetFetcher.fetch", 50),
             ("/data/ds.py", "DS.__getitem__", 3)]
    rows = [  # (weight, frames innermost first)
        (3, [(2, 10), (1, 330), (0, 705)]),          # the user's sampler, under _next_index
        (1, [(4, 5), (3, 52)]),                      # the dataset, under fetch
        (2, [(2, 11), (1, 331), (0, 705)]),
        (4, [(4, 6), (3, 52)])]
    samples, frames = [], []
    for t, (weight, fr) in enumerate(rows):
        samples.append([t, 100, -1, weight, stacks.KIND_STACK, len(fr)])
        frames.extend(fr)
    d = stacks.Drained(np.array(samples, np.int64), np.array(frames, np.int32), codes, {})
    share = stacks.under_frame_share(d, np.zeros(4, np.int64), torch_private.SAMPLER_FRAME)
    assert share == pytest.approx(5 / 10)
    assert stacks.under_frame_share(d, np.array([0, -1, 0, -1]),
                                    torch_private.SAMPLER_FRAME) == 1.0
    assert stacks.under_frame_share(d, np.full(4, -1), torch_private.SAMPLER_FRAME) is None


def test_a_sampler_that_holds_the_fetch_replaces_try_workers():
    fns = [_fn("SlowSampler.__iter__", 100, 0, 1), _fn("burn", 99, 0, 2)]
    path = [_path_entry("SlowSampler.__iter__", 1.0), _path_entry("burn", 0.94)]
    s = {"slow_code": _block(fns, 100, 0, hot_path=path, sampler_share=0.9),
         "diagnosis": "INPUT-BOUND", "loader": {"num_workers": 0}}
    (adv,) = slow_code.advise(s)
    assert slow_code.superseded_by(adv) == {"try_workers"}
    assert "runs in the main process at any num_workers" in slow_code.WORDS[adv.code](adv.numbers)
    s["slow_code"]["sampler_share"] = 0.1
    (adv,) = slow_code.advise(s)
    assert slow_code.superseded_by(adv) == frozenset()
    assert "sampler" not in slow_code.WORDS[adv.code](adv.numbers)


def test_a_collection_in_the_slow_batches_is_named_and_ticks_elsewhere_are_checked():
    # 6 workers of 2 epochs, non-persistent, on 2 cores: one batch a run
    # held a generation-2 collection of 100-112 ms, 75-78 % of its CPU,
    # and 77-87 % of its ticks were counted in other threads (helper 33A).
    fns = [_fn("decode", 4, 190, 2)]
    b = _block(fns, 5, 200, slow_batches=1, slow_cpu_share=0.2, slow_runq_share=0.8)
    b["samples"]["slow_other_thread"] = 30
    assert slow_code.judge(b).code == "slow_code_other_thread"
    f = slow_code.judge({**b, "slow_gc_cpu_share": 0.76})
    assert f.code == "slow_code_gc" and f.numbers["share"] == 0.76
    said = slow_code.WORDS[f.code](f.numbers)
    assert "the garbage collector took 76% of the CPU of 1 slow batch" in said
    assert "gc.freeze()" in said
    # Helper 40C: its remedy is the next step, and replaces comparing
    # in_order ("compare in_order" led beside "the collector took 89%").
    (adv,) = slow_code.advise({"slow_code": {**b, "slow_gc_cpu_share": 0.76}})
    assert adv.code == "freeze_gc"
    assert slow_code.WORDS[adv.code](adv.numbers).startswith(
        "Next: gc.freeze() in the main process before iter(loader) starts the workers")
    assert "compare_in_order" in slow_code.superseded_by(adv)
    # Under half the CPU, the collection is not the finding.
    assert slow_code.judge({**b, "slow_gc_cpu_share": 0.3}).code == "slow_code_other_thread"
    # The other threads measured at 3 % of the slow batches' CPU: the
    # ticks counted elsewhere do not make a helper thread.
    assert slow_code.judge({**b, "slow_other_threads_cpu_share": 0.03}).code != \
        "slow_code_other_thread"
    assert slow_code.judge({**b, "slow_other_threads_cpu_share": 0.8}).code == \
        "slow_code_other_thread"


def test_the_collections_cpu_is_summed_into_the_batch_that_holds_it():
    from traceml import sample_timing

    recs = np.zeros(3, dtype=_core.BATCH_RECORD_DTYPE)
    recs["begin_ns"], recs["end_ns"] = [0, 100, 0], [100, 200, 150]
    recs["worker"] = [0, 0, 1]
    gc = np.zeros(4, dtype=_core.ITEM_RECORD_DTYPE)
    gc["kind"] = _core.ITEM_GC
    gc["worker"] = [0, 0, 1, 0]
    gc["begin_ns"], gc["end_ns"] = [10, 120, 20, 210], [30, 190, 40, 220]
    gc["cpu_ns"] = [15, 60, 7, 9]
    # Worker 0's first two fall in its batches; worker 1's in its one; the
    # last, past every batch, in none.
    assert sample_timing._gc_cpu_by_record(gc, recs).tolist() == [15, 60, 7]


def _slow(**kw):
    slow = {"count": 223, "of": 1198, "time_share": 0.82, "batch_share": 0.37,
            "batches_holding": 120, "batches_tested": 150}
    slow.update(kw)
    return {"production": {"samples": {"slow": slow}}}


def test_slow_samples_too_few_to_set_batches_apart_are_not_denied():
    # Lognormal item costs at 2 workers (helper 64): 17 of 958 samples past
    # 5x the median, 10% of all sample time, 63% of their batch's time in
    # 17 of 240 batches; the make times form one group.  The irregular
    # stalls read "so no slow sample sets them" above the line listing
    # them; now the sentence names them as a possible cause.
    from traceml.findings import advice

    s = _slow(count=17, of=958, time_share=0.10, batch_share=0.63, batches_holding=17,
              batches_tested=240)
    assert slow_code.samples_spread(s) is None
    found = slow_code.samples_found(s)
    assert found == {"count": 17, "of": 958, "time_share": 0.10}
    said = advice._alike_irregular({"num_workers": 2, "cpus": 2, "slow_found": found})
    assert "no slow sample sets them" not in said
    assert ("though the per-sample timing found 17 slow samples of 958, 10% of all sample "
            "time (the slow-sample line): the stalls may follow the batches that hold "
            "them") in said, said
    # None found, or a spread: the other sentences.
    assert slow_code.samples_found(_slow(count=0)) is None
    assert slow_code.samples_found(_slow()) is None


def test_slow_samples_spread_over_the_batches_are_their_cost():
    # One sample in 5 costs 5 ms against 0.3 ms, 8 a batch (helper 34B):
    # each is 37% of its batch, in 80% of the batches, 82% of all sample
    # time.  The batches' make times form one group, and it is the slow
    # samples they hold that make it.
    from traceml.findings import advice, sentences

    s = _slow()
    assert not slow_code._samples_slow(s)
    assert slow_code.samples_spread(s) == {"count": 223, "of": 1198, "time_share": 0.82}
    said = advice._alike_irregular({"num_workers": 2, "cpus": 2,
                                    "spread": slow_code.samples_spread(s)})
    assert "no slow sample sets them" not in said
    assert "each batch costing what its slow samples cost (223 of 1198 samples, 82% of all " \
        "sample time, spread over the batches" in said
    head = {"function": "burn", "file": "common.py", "line": 19, "share": 0.95}
    (text,) = sentences([("look_at_path", {"head": head, "tail": head, "inside": None,
                                           "samples": 274, "main": False,
                                           "sampler_share": None, "slow_only": False,
                                           "spread": slow_code.samples_spread(s)})])
    assert text.startswith("Every batch costs what its slow samples cost (223 of 1198")
    # Slow samples holding most of their batches, in few of them: the slow
    # batches are theirs, not a spread (slow_samples' own line leads).
    assert slow_code.samples_spread(_slow(batch_share=0.8, batches_holding=30)) is None
    # Slow samples that hold half the sample time or less: no spread.
    assert slow_code.samples_spread(_slow(time_share=0.5)) is None
    assert slow_code.samples_spread(_slow(count=1)) is None


def test_two_slow_code_paths_are_both_named():
    # Every 12th index decodes video, every 12th + 5 resamples audio, both
    # under load_episode, both calling burn (helper 35B: the lead named
    # one at 47-50%, the other only in the evidence line, 11 of 11).
    fns = [_fn("EpisodeDS.__getitem__", 100, 60, 7), _fn("load_episode", 100, 60, 8),
           _fn("resample_audio", 50, 0, 9), _fn("decode_video_frames", 45, 0, 9),
           _fn("burn", 99, 50, 9.6)]
    f = slow_code.judge(_block(fns, 100, 60))
    assert f.code == "slow_code_named" and f.numbers["function"] == "resample_audio"
    # burn runs under both (50% + 99% > 100%): not another path.
    assert [r["function"] for r in f.numbers["beside"]] == ["decode_video_frames"]
    (adv,) = slow_code.advise({"slow_code": _block(fns, 100, 60)})
    said = slow_code.WORDS[adv.code](adv.numbers)
    assert said.startswith("Look at `resample_audio` in `data/ds.py:7`: 50% of the slow "
                           "batches' sampled worker CPU, 0% of the fast ones'; and beside "
                           "it, another slow path: `decode_video_frames` in `data/ds.py:7` "
                           "(45% and 0%).")
    # One path: nothing beside it.
    one = [r for r in fns if r["function"] != "decode_video_frames"]
    assert "beside" not in slow_code.judge(_block(one, 100, 60)).numbers


def test_a_stride_with_no_slow_sample_attribution_still_times_the_samples():
    # Slow samples at index % 8 == 3, batch size 4, 2 workers (helper
    # 36B): every slow batch is worker 0's, so no SLOW-SAMPLE carries the
    # stride, and "compare in_order" was the step in 3 of 5 runs.
    n = {"indices": [11, 19, 27], "distinct": 31, "slow_s": 0.0402, "fast_s": 6.2e-6,
         "count": 31, "of": 254, "stride": 8, "residue": 3}
    s = {"production": {"samples": {"kind": "map",
                                    "findings": [["slow_samples_stride", n]]}},
         "attribution": None}
    (f,) = slow_code._time_slow_samples(s)
    assert f.code == "time_slow_samples" and f.numbers["indices"] == [11, 19, 27]
    # Where SLOW-SAMPLE carries the stride, its own step serves.
    s["attribution"] = {"label": "SLOW-SAMPLE"}
    assert slow_code._time_slow_samples(s) == []


def test_large_batches_asleep_in_their_samples_leave_the_lead_to_the_sizes():
    # A batch_sampler's 64-sample batches every 5th among 4-sample ones,
    # each sample sleeping 1 ms (helper 36B): off CPU in __getitem__, yet
    # every sample costs alike; LARGE-BATCH's "even batch sizes" leads.
    off_path = [_path_entry("DS.__getitem__", 0.99)]
    b = _block([_fn("DS.__getitem__", 3, 1, 1)], 3, 1, slow_cpu_share=0.03,
               fast_cpu_share=0.1, slow_runq_share=0.02, off_path=off_path)
    b["samples"].update(slow_off_cpu=148.0, fast_off_cpu=0.0)
    assert slow_code.judge(b).code == "slow_code_off_cpu"
    s = {"slow_code": b, "diagnosis": "INPUT-BOUND"}
    [adv] = slow_code.advise(s)
    assert adv.code == "look_at_function"
    s["attribution"] = {"label": "LARGE-BATCH"}
    assert slow_code.advise(s) == []


def test_main_process_fetches_weigh_their_own_cpu_from_the_fetch_clocks():
    # Helper 39B: at num_workers=0 beside two CPU hogs, every 32nd index
    # burning 60 ms in expensive_augment (921 slow samples against 0) read
    # "the main process waited for a CPU ... not more work of their own"
    # in 6 of 8 runs: the slow fetches' CPU against the others' was not
    # read there.  The clocked fetches hold it: the loop thread's CPU in
    # each fetch, and the process's other threads'.
    from traceml import build

    n = 12
    slow = np.zeros(n, dtype=bool)
    slow[[2, 6, 10]] = True
    fast = ~slow
    wait = np.where(slow, 150, 2).astype(np.int64) * 1_000_000
    cpu = np.where(slow, 60, 1).astype(np.int64) * 1_000_000
    others = np.where(slow, 3, 0).astype(np.int64) * 1_000_000
    zero = np.zeros(n, dtype=np.int64)
    clocks = (np.arange(n), cpu, zero, zero, zero, others)
    got = build.worker_code.main_cpu_ratio(clocks, wait, slow, fast)
    assert got["slow_cpu_ratio"] == pytest.approx(np.median(cpu[slow]) / np.median(cpu[fast]))
    assert got["slow_extra_cpu_share"] == pytest.approx(
        (np.median(cpu[slow]) - np.median(cpu[fast])) / np.median(wait[slow]))
    assert got["slow_other_threads_cpu_share"] == pytest.approx(
        others[slow].sum() / (cpu[slow].sum() + others[slow].sum()))
    # Judged with it, the slow fetches' own CPU names the function, though
    # their time went mostly to the run queue.
    fns = [_fn("expensive_augment", 900, 0, 2)]
    stretched = dict(slow_cpu_share=0.3, fast_cpu_share=0.9, slow_runq_share=0.6, in_main=True)
    assert slow_code.judge(_block(fns, 921, 40, **stretched)).code == "slow_code_cpu_wait"
    f = slow_code.judge(_block(fns, 921, 40, **stretched, **got))
    assert f.code == "slow_code_named" and f.numbers["function"] == "expensive_augment"
    # Fewer than two clocked fetches a side: nothing read.
    assert build.worker_code.main_cpu_ratio((np.arange(2), cpu[:2], zero[:2], zero[:2], zero[:2]),
                                 wait[:2], slow[:2], fast[:2]) == {}
    assert build.worker_code.main_cpu_ratio(None, wait, slow, fast) == {}


def test_library_code_that_tells_the_batches_apart_is_named_from_the_users_caller():
    # Helper 39B: every 10th record is a large JSON blob; parse_record runs
    # for every sample, so only json's functions tell the slow batches
    # apart: "Look at `JSONDecoder.raw_decode` in `json/decoder.py:353`"
    # with no word of parse_record (2 of 11 runs).
    def lib(name, slow, fast, root, line):
        return {**_fn(name, slow, fast, root), "file": "/usr/lib/python3.11/json/decoder.py",
                "first_line": line, "hot_line": line, "library": True}

    fns = [{**_fn("Records.__getitem__", 526, 40, 1), "library": False},
           {**_fn("parse_record", 526, 40, 2), "first_line": 10, "hot_line": 11,
            "library": False},
           lib("loads", 316, 2, 3, 346), lib("JSONDecoder.decode", 305, 0, 4, 337),
           lib("JSONDecoder.raw_decode", 300, 0, 5, 353)]
    f = slow_code.judge(_block(fns, 526, 40))
    assert f.code == "slow_code_named" and f.numbers["function"] == "loads"
    assert f.numbers["own_caller"]["function"] == "parse_record"
    said = slow_code.WORDS["look_at_function"](f.numbers)
    assert said.startswith("Look at `parse_record` in `data/ds.py:11`: the slow batches' CPU "
                           "goes into library code it calls, `JSONDecoder.raw_decode` in "
                           "`json/decoder.py:353` (called from `loads`"), said
    # The user's own function telling them apart is named as before.
    own = [{**_fn("decode", 300, 0, 3), "library": False}, *fns[:2]]
    f = slow_code.judge(_block(own, 526, 40))
    assert f.numbers["function"] == "decode" and "own_caller" not in f.numbers


def test_two_slow_paths_under_one_caller_are_both_named():
    # Helper 39B: every 20th index decodes video, every 20th + 10 resamples
    # audio, in alternate slow batches of 5: the caller of both, named
    # alone in 4 of 4 runs.  Each path holds half the slow samples and
    # none of the 9 fast ones (too few fast samples to name either alone).
    fns = [{**_fn("AV.__getitem__", 864, 3, 16), "library": False},
           {**_fn("decode_video", 436, 0, 17), "first_line": 7, "hot_line": 9,
            "library": False},
           {**_fn("resample_audio", 418, 0, 17), "first_line": 12, "hot_line": 15,
            "library": False},
           {**_fn("rfft", 384, 0, 18), "file": "/x/site-packages/numpy/fft/_pocketfft.py",
            "library": True}]
    f = slow_code.judge(_block(fns, 872, 9))
    assert f.code == "slow_code_named" and f.numbers["function"] == "AV.__getitem__"
    assert [p["function"] for p in f.numbers["split"]] == ["decode_video", "resample_audio"]
    said = slow_code.WORDS["look_at_function"](f.numbers)
    assert said == ("Look at `decode_video` in `data/ds.py:9` and `resample_audio` in "
                    "`data/ds.py:15` (each called from `AV.__getitem__` in `data/ds.py:7`): "
                    "the slow batches' sampled worker CPU goes 50%, 48% into them, the fast "
                    "ones' 0%, 0%.")
    # One path carrying nearly all of them is the down_to path, no split;
    # two that overlap (shares adding past the caller's) are no split.
    one = [fns[0], {**fns[1], "slow": 860}]
    assert "split" not in slow_code.judge(_block(one, 872, 9)).numbers
    overlap = [fns[0], {**fns[1], "slow": 600}, {**fns[2], "slow": 600}]
    assert "split" not in slow_code.judge(_block(overlap, 872, 9)).numbers


def test_a_comprehension_is_named_as_the_function_that_holds_it():
    # The demo on Python 3.11 named `_delta_values.<locals>.<listcomp>`;
    # 3.12 inlines comprehensions, so the same code named `_delta_values`.
    path = [_path_entry("DS.__getitem__", 1.0), _path_entry("_delta_values", 0.96),
            _path_entry("_delta_values.<locals>.<listcomp>", 0.95)]
    tail = slow_code.user_tail(path, path[1])
    assert tail["function"] == "_delta_values"
    # Alone on the path it is still named: nothing holds it.
    assert slow_code.user_tail(path[2:], path[2])["function"].endswith("<listcomp>")
    fns = [_fn("DS.__getitem__", 40, 60, 1), _fn("decode", 39, 58, 2)]
    s = {"slow_code": _block(fns, 40, 60, hot_path=path), "diagnosis": "INPUT-BOUND"}
    (adv,) = slow_code.advise(s)
    assert adv.numbers["tail"]["function"] == "_delta_values"


def test_one_fast_sample_cannot_tell_the_slow_batches_code_apart():
    # Helper 39B: 901 of 912 slow samples in _update_shared_index, 0 of the
    # one fast sample, read "they run the same code, only longer".  Absent
    # from every fast sample it would still have p = 12/913 (hypergeometric
    # tail, checked by SciPy), above 0.01: too few fast samples to tell.
    fns = [{**_fn("DS.__getitem__", 912, 1, 1), "library": False},
           {**_fn("_update_shared_index", 901, 0, 2), "library": False}]
    p = slow_code._p_value(901, 912, 0, 1)
    assert p == pytest.approx(_hyper_p(901, 912, 0, 1)) and p > slow_code.SLOW_CODE_ALPHA
    path = [_path_entry("DS.__getitem__", 1.0), _path_entry("_update_shared_index", 0.99)]
    f = slow_code.judge(_block(fns, 912, 1, fast_batches=30, hot_path=path))
    assert f.code in ("slow_code_too_few", "slow_code_slow_only"), f.code


def test_the_best_p_of_a_function_held_in_part_of_the_slow_samples():
    # Absent from every fast sample, a function in a of n1 slow samples
    # has the hypergeometric chance that all a fall among the n1 slow.
    assert slow_code.best_p_value(912, 1, 901) == pytest.approx(_hyper_p(901, 912, 0, 1))
    assert slow_code.best_p_value(40, 60, 30) == pytest.approx(_hyper_p(30, 40, 0, 60))
    assert slow_code.best_p_value(3, 4, 3) == slow_code.best_p_value(3, 4)


def test_a_queue_in_every_batch_stretches_them_it_sets_none_apart():
    # Every batch slow at num_workers=0 beside CPU hogs (helper 41B): one
    # group of make times, 63% of it in the run queue.
    p = {"main": True, "one_group": True, "runq_share": 0.63, "cpu_share": 0.1,
         "batches": 16, "path": []}
    said = slow_code.WORDS["slow_code_cpu_wait"](p)
    assert "which stretched each batch past its own CPU" in said
    assert "set these batches apart" not in said and "63% of their make time" in said
    said = slow_code.WORDS["slow_code_cpu_wait"]({**p, "one_group": False})
    assert "set these batches apart" in said and "the slow batches" in said


def test_the_leads_callee_carrying_its_gap_is_named_without_passing_again():
    # Helper 41B: `PL.__getitem__` passed (101 of 104 slow samples, 2 of
    # 5 fast) and `augment_noise` under it, 3 samples fewer, missed the
    # level by a hair: "Look at `PL.__getitem__`" where augment_noise did
    # the work.  The lead passed; its callee within CALLEE_SHARE of the
    # gap is where its slow samples go.
    fns = [_fn("PL.__getitem__", 101, 2, 1), _fn("<lambda>", 98, 2, 2),
           _fn("augment_noise", 98, 2, 3), _fn("collate", 1, 3, 1)]
    rows = {r["function"]: r for r in slow_code.tested(_block(fns, 104, 5))}
    assert rows["PL.__getitem__"]["named"] and not rows["augment_noise"]["named"]
    f = slow_code.judge(_block(fns, 104, 5))
    assert f.code == "slow_code_named" and f.numbers["function"] == "PL.__getitem__"
    assert f.numbers["down_to"]["function"] == "augment_noise"
    assert [t["function"] for t in f.numbers["through"]] == ["<lambda>"]
    # A callee holding well under the gap is not.
    fns[2] = _fn("augment_noise", 60, 2, 3)
    fns[1] = _fn("<lambda>", 60, 2, 2)
    assert slow_code.judge(_block(fns, 104, 5)).numbers["down_to"] is None


def test_a_second_branch_beside_the_hot_path_is_named_with_its_share():
    # Helper 41B: decode_video (70%) and resample_audio (28%) under
    # TwoGuilty.__getitem__, every fetch slow; the hot path follows the
    # larger branch alone and read only decode_video.
    fns = [_fn("TwoGuilty.__getitem__", 200, 0, 1), _fn("decode_video", 140, 0, 2),
           _fn("resample_audio", 56, 0, 2), _fn("tiny_helper", 3, 0, 2),
           _fn("inner_of_decode", 60, 0, 3)]
    path = [_path_entry("TwoGuilty.__getitem__", 1.0), _path_entry("decode_video", 0.70)]
    f = slow_code.judge(_block(fns, 200, 0, hot_path=path))
    assert f.code == "slow_code_same"
    # resample_audio: 56 of 200 past a tenth beyond chance; tiny_helper's
    # 3 is not, and inner_of_decode runs a frame deeper (under decode).
    assert sps.binom.sf(55, 200, 0.1) < slow_code.SLOW_CODE_ALPHA
    assert [b["function"] for b in f.numbers["beside"]] == ["resample_audio"]
    assert f.numbers["beside"][0]["share"] == pytest.approx(0.28)
    said = slow_code.WORDS[f.code](f.numbers)
    assert "`decode_video` in `data/ds.py:3` 70%; beside it, `resample_audio` in " in said
    # As the next step, where every batch costs alike and input leads.
    s = {"slow_code": _block(fns, 200, 0, hot_path=path), "diagnosis": "INPUT-BOUND"}
    (adv,) = slow_code.advise(s)
    assert adv.code == "look_at_path" and "resample_audio" in slow_code.WORDS[adv.code](
        adv.numbers)
    # Shares that overlap the path's (a helper both branches call) are not
    # a branch of their own.
    fns[2] = _fn("resample_audio", 80, 0, 2)
    f = slow_code.judge(_block(fns, 200, 0, hot_path=path))
    assert "beside" not in f.numbers


def test_a_noisy_function_apart_does_not_make_a_same_code_run_too_few():
    # The quick demo's historical loader beside a CPU hog: 21 slow and 52
    # fast samples, every batch down _delta_values alike; the function
    # furthest apart is noise (3 of 21 against 1 of 52).  A function of the
    # slow batches' own in a third of their samples (7), in no fast one,
    # would pass, so the test had the power: the cost is every batch's.
    fns = [{**_fn("_DeltaDataset.__getitem__", 20, 51, 1), "library": False},
           {**_fn("_delta_values", 19, 49, 2), "library": False},
           {**_fn("zip_dict", 3, 1, 5), "library": True}]
    m = len(fns)
    assert slow_code.best_p_value(21, 52, 7) == pytest.approx(_hyper_p(7, 21, 0, 52))
    assert _hyper_p(7, 21, 0, 52) < slow_code.SLOW_CODE_ALPHA / m < _hyper_p(3, 21, 0, 52)
    path = [_path_entry("_DeltaDataset.__getitem__", 0.97), _path_entry("_delta_values", 0.93)]
    f = slow_code.judge(_block(fns, 21, 52, fast_batches=30, hot_path=path))
    assert f.code == "slow_code_same", f.code
    assert [e["function"] for e in f.numbers["path"]][-1] == "_delta_values"
    # With a fifth of the samples (4 slow, 16 fast) even a function in a
    # third of the slow ones could not pass: not yet.
    fns = [{**_fn("_DeltaDataset.__getitem__", 4, 16, 1), "library": False},
           {**_fn("_delta_values", 4, 15, 2), "library": False},
           {**_fn("zip_dict", 1, 0, 5), "library": True}]
    f = slow_code.judge(_block(fns, 4, 16, fast_batches=30, hot_path=path))
    assert _hyper_p(2, 4, 0, 16) > slow_code.SLOW_CODE_ALPHA / m
    assert f.code == "slow_code_too_few", f.code


def test_stalls_past_twice_the_slow_batches_are_every_batchs_cost():
    # The quick demo beside 3 CPU hogs: 17 stalls in a lock-step round,
    # one batch slow to make (a hog's outlier) holding 1 of 61 samples.
    # At most 1 stall awaited it; the other 16 awaited batches no slower
    # than the rest, so the path all the samples hold is the cost.
    fns = [{**_fn("_DeltaDataset.__getitem__", 1, 59, 1), "library": False},
           {**_fn("_delta_values", 1, 56, 2), "library": False}]
    path = [_path_entry("_DeltaDataset.__getitem__", 0.98), _path_entry("_delta_values", 0.93)]
    b = _block(fns, 1, 60, stalls=17, slow_batches=1, fast_batches=37, hot_path=path)
    f = slow_code.judge(b)
    assert f.code == "slow_code_same", f.code
    assert f.numbers["stalls_on_fast"] == {"stalls": 17, "slow_batches": 1}
    s = {"slow_code": b, "loader": {"num_workers": 2}, "diagnosis": "INPUT-BOUND",
         "attribution": {"label": "LOCK-STEP"}}
    (line,) = slow_code.evidence_lines(s)
    assert line.startswith("the stalls awaited batches no slower to make than the rest: "
                           "at most 1 of the 17 awaited the 1 batch slow to make (61 samples)")
    assert "`_delta_values`" in line
    (adv,) = slow_code.advise(s)
    assert adv.code == "look_at_path" and adv.numbers["tail"]["function"] == "_delta_values"
    # 17 stalls on 9 slow batches: most of them could be the slow ones':
    # not yet.
    b = _block(fns, 1, 60, stalls=17, slow_batches=9, fast_batches=29, hot_path=path)
    assert slow_code.judge(b).code == "slow_code_too_few"


def test_a_generators_stalled_items_are_not_every_batchs_cost():
    # Helper 42: every item calls tokenize, every 6th for 30 ms and the
    # others for 3 ms, in a wrapped generator (no loader facts, sampled in
    # the main process): the stalled items cost more, as at num_workers=0.
    fns = [{**_fn("gen", 100, 60, 1), "library": False},
           {**_fn("tokenize", 99, 59, 2), "library": False}]
    path = [_path_entry("gen", 1.0), _path_entry("tokenize", 0.99)]
    b = _block(fns, 100, 60, fast_batches=200, hot_path=path, in_main=True)
    f = slow_code.judge(b)
    assert f.code == "slow_code_same"
    s = {"slow_code": b, "diagnosis": "INPUT-BOUND"}
    assert not slow_code.alike(s, f)
    assert "they run the same code, only longer" in slow_code.evidence_lines(s)[0]
    # No loader to sweep: where their CPU goes leads, not "costs alike".
    (adv,) = slow_code.advise(s)
    said = slow_code.WORDS[adv.code](adv.numbers)
    assert adv.code == "look_at_path" and adv.numbers["tail"]["function"] == "tokenize"
    assert said.startswith("The stalled items run the same code as the others, longer"), said
    # A DataLoader at 2 workers keeps its lock-step reading.
    s["loader"] = {"num_workers": 2}
    assert slow_code.alike(s, f)
