"""build() as a pipeline: each stage once, in order, each adding the
sections it owns."""

import pytest

import corpus
from traceml import build as build_module


def _case():
    return next(c for c in corpus.corpus() if c.sources and c.delivery is not None)


def test_each_stage_runs_once_in_order_and_adds_its_own_sections(monkeypatch):
    seen, owners = [], {}

    def watched(stage):
        def run(r, s):
            seen.append(stage.__name__)
            added = stage(r, s)
            for key in added:
                owners.setdefault(key, []).append(stage.__name__)
            return added
        run.__name__ = stage.__name__
        return run

    monkeypatch.setattr(build_module, "STAGES", tuple(watched(st) for st in build_module.STAGES))
    rep = corpus.replay(_case())
    assert seen == [st.__name__ for st in build_module.STAGES]
    assert all(len(v) == 1 for v in owners.values()), owners
    # Every section of the summary but its version comes from one stage.
    assert set(rep.summary) == set(owners) | {"version"}


def test_a_stage_that_rewrites_another_stages_section_is_refused(monkeypatch):
    def rewrites(r, s):
        return {"diagnosis": "INPUT-BOUND"}

    monkeypatch.setattr(build_module, "STAGES", build_module.STAGES + (rewrites,))
    with pytest.raises(AssertionError, match="rewrites .*diagnosis"):
        corpus.replay(_case())


def test_the_stalls_split_decides_whether_the_workers_made_the_awaited_batches():
    from traceml import build

    # Beside CPU hogs, a healthy loader's stalls: 1% in the making, the
    # rest in transit or waiting for a core, while the sampler found the
    # workers busy (prefetching other batches): not making them.
    split = {"wait_s": 1.0, "fetches": 45, "runq_known": True,
             "parts_s": {"worker_making": 0.01, "worker_cpu_wait": 0.0, "main_cpu": 0.08,
                         "cpu_wait": 0.06, "host_cpu_wait": 0.32, "in_transit": 0.53}}
    s = {"wait_parts": {"stalls": split}, "input_share": 0.49}
    assert build.worker_code.making_in_stalls(s, True) is False
    split["parts_s"].update(worker_making=0.45, worker_cpu_wait=0.1, in_transit=0.0)
    assert build.worker_code.making_in_stalls(s, False) is True
    # Without a split, the sampler's reading stands.
    assert build.worker_code.making_in_stalls({"input_share": 0.49}, True) is True


def test_the_start_cost_ratios_are_the_medians_of_cpu_and_own_time():
    import numpy as np

    from traceml import _core

    # Four batches: two received by start-up fetches (one of them slept
    # 300 ms off CPU, one waited 40 ms for a core), two by steady ones.
    rec = np.zeros(4, dtype=_core.BATCH_RECORD_DTYPE)
    rec["begin_ns"] = 0
    rec["end_ns"] = [310e6, 50e6, 10e6, 12e6]
    rec["cpu_ns"] = [10e6, 10e6, 8e6, 9e6]
    rec["runq_ns"] = [0, 40e6, -1, 2e6]
    first = np.array([True, True, False, False])
    idx = np.arange(4)
    got = build_module.startup.start_cost((rec, idx), first, ~first)
    assert got["first_cpu_ratio"] == pytest.approx(np.median([10, 10]) / np.median([8, 9]))
    # Own time: 310 and 50 - 40 = 10 ms against 10 (runq unknown) and 10 ms.
    assert got["first_work_ratio"] == pytest.approx(np.median([310, 10]) / np.median([10, 10]))
    # A side with no batch: no ratio.
    assert build_module.startup.start_cost((rec, np.full(4, -1)), first, ~first) == {}


def test_large_fetches_at_no_workers_are_sized_by_their_own_wait(loader_source):
    # Helper 38C: at num_workers=0 beside a CPU hog the 8x larger fetches
    # were preempted and the small ones not, so their raw waits read 2.6x
    # the others' a sample and the stalls SLOW-SAMPLE (4 of 5 runs).  Each
    # fetch's own wait (less the loop thread's measured wait for a core,
    # as the stall rule reads it) is its batch's make time.  Here every
    # sample costs 1 ms of CPU; each 32-sample fetch also waited 60 ms for
    # a core, the 4-sample ones none.
    import numpy as np

    from support import INFO, MS, SYNTHETIC, build, records
    from traceml import _core
    from traceml.findings import attribution

    loader_source(0)
    n = 50
    size = np.array([(4, 4, 4, 4, 32)[k % 5] for k in range(n)])
    cpu = size * MS
    runq = np.where(size == 32, 60 * MS, 0)
    rec = records(cpu + runq, np.full(n, 5 * MS))
    items = np.zeros(n, dtype=_core.ITEM_RECORD_DTYPE)
    items["kind"] = _core.ITEM_NEXT
    items["begin_ns"] = rec["begin_ns"] + 1000
    items["end_ns"] = rec["begin_ns"] + 2000
    items["count"] = size
    zero = np.zeros(n, dtype=np.int64)
    clocks = (np.arange(n), cpu, runq, zero, zero)
    delivery = (np.arange(n), np.full(n, -1))
    r = build(rec, INFO, SYNTHETIC, None, delivery=delivery, fetch_clocks=clocks,
              sampler_items=items)
    a = r["attribution"]
    assert a is not None and a["label"] == attribution.LARGE_BATCH, a
    assert a["made"]["sizes"] == [32.0, 4.0]
    # Their own cost a sample is the others' (1 ms), not the raw 2.9 ms.
    assert a["made"]["sample_cost_ratio"] == pytest.approx(1.0, rel=0.05)


def test_iter_names_whether_the_sampler_is_library_code():
    """start_iter marks a sampler whose code is an installed package's
    (torch's own samplers) apart from the user's, by stacks.is_library."""
    import sysconfig

    from traceml import stacks

    by_epoch = [{"input_wait_s": 0.2, "iter_s": 0.12, "iter_cpu_s": 0.03}]
    lib = sysconfig.get_paths()["purelib"] + "/torch/utils/data/sampler.py"
    got = build_module.startup.start_iter(by_epoch, {"function": "SequentialSampler.__iter__",
                                                     "file": lib, "line": 109})
    assert got["iter_share"] == 0.6 and got["iter_cpu_share"] == 0.25
    assert got["sampler_library"] is True and stacks.is_library(lib)
    mine = build_module.startup.start_iter(by_epoch, {"function": "Mine.__iter__",
                                                      "file": "/home/u/proj/data.py", "line": 3})
    assert mine["sampler_library"] is False
    assert "sampler_library" not in build_module.startup.start_iter(by_epoch, None)


def test_a_wait_less_its_core_waits_is_weighed_against_the_step_less_them(loader_source):
    """At num_workers=0 beside CPU hogs, 100 ms batches waited 600 ms, 500
    of them for a core: the stall rule reads each clocked wait less its
    waits for a core, and weighed that against the raw step (half of 605
    ms), so none stalled ("no stalls" in 9 of 20 bench runs).  The step
    loses the same part: every fetch is a stall of the loader's own."""
    import numpy as np

    from support import INFO, MS, SYNTHETIC, build, records

    loader_source(0)
    n = 16
    cpu = np.full(n, 100 * MS)
    runq = np.full(n, 500 * MS)
    rec = records(cpu + runq, np.full(n, 5 * MS))
    zero = np.zeros(n, dtype=np.int64)
    r = build(rec, INFO, SYNTHETIC, None, fetch_clocks=(np.arange(n), cpu, runq, zero, zero))
    st = r["stalls"]
    assert st["less_core_waits"] and st["rule_code"] == "all_slow"
    assert st["count"] == r["steady_steps"] == n - 1
    assert r["temporal"]["label"] == "EVERY-FETCH"
