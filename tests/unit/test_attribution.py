"""attribution: LOCK-STEP needs workers making the batches in the stalls."""

import numpy as np
import pytest
import scipy.stats as sps

import corpus
from traceml.findings import attribution, sentences, wait_parts


def _lockstep(making):
    """12 rounds of 4 workers, a stall on each round's first batch."""
    ranks = np.arange(4, 52, 4)
    workers = ranks % 4
    batches = np.arange(4, 52) % 4
    return attribution.attribution(ranks, workers, batches, 4, 4, None, making=making)


@pytest.mark.parametrize("making,label", [(True, "LOCK-STEP"), (None, "LOCK-STEP"),
                                          (False, None)])
def test_lock_step_needs_workers_making_the_batches(making, label):
    a = _lockstep(making)
    assert (a["label"] if a else None) == label


def test_cpu_is_compared_per_batch_made():
    # Worker 0 makes 2 of each epoch's 3 batches by construction: twice the
    # CPU for twice the batches is not a busier worker.
    ticks, made = {0: 200, 1: 100}, {0: 20, 1: 10}
    assert attribution.cpu_ratio(ticks, 0) == 2.0
    assert attribution.cpu_ratio(ticks, 0, made) == 1.0
    assert attribution.cpu_ratio({0: 300, 1: 100}, 0, made) == 1.5
    # A worker with no batch delivered cannot be put per batch.
    assert attribution.cpu_ratio(ticks, 0, {0: 20}) is None


def _on_worker_0(per_worker):
    """2 workers, a stall on each of worker 0's 16 batches (ranks 2, 4, ...),
    its batches timed as ``per_worker`` says."""
    ranks = np.arange(2, 34, 2)
    return attribution.attribution(ranks, ranks % 2, np.arange(2, 34) % 2, 2, 2, None,
                                   per_worker=per_worker, making=True)


def test_lock_step_needs_the_round_to_cost_its_workers_alike():
    # Every 3rd of worker 0's batches takes 160 ms against 20 ms (a slow
    # sample every 6th index at num_workers=2): its median is the others',
    # its mean 3.3x theirs; its round is not what makes the loop wait.
    slow = np.where(np.arange(16) % 3 == 0, 0.160, 0.020)
    heavy = {0: {"batches": 16, "make_median_s": float(np.median(slow)),
                 "make_mean_s": float(slow.mean())},
             1: {"batches": 16, "make_median_s": 0.020, "make_mean_s": 0.020}}
    assert attribution.make_ratio(heavy, 0) == pytest.approx(1.0)
    assert attribution.make_ratio(heavy, 0, "make_mean_s") == pytest.approx(
        slow.mean() / 0.020)
    assert _on_worker_0(heavy) is None
    # A round whose batches cost every worker alike stays LOCK-STEP.
    alike = {w: {"batches": 16, "make_median_s": 0.1, "make_mean_s": 0.1 * (1 + 0.2 * w)}
             for w in (0, 1)}
    assert _on_worker_0(alike)["label"] == "LOCK-STEP"
    # A file written before make_mean_s was kept: the median alone decides.
    old = {w: {k: v for k, v in d.items() if k != "make_mean_s"} for w, d in heavy.items()}
    assert _on_worker_0(old)["label"] == "LOCK-STEP"


def _worker_0_slow(samples_by_worker):
    """4 workers, a stall on each of worker 0's 12 batches, its batches
    made 12x slower than the others' (every 8th index at batch size 2
    lands in worker 0's turn; or worker 0 itself is slow)."""
    ranks = np.arange(4, 52, 4)
    per_worker = {w: {"batches": 12, "make_median_s": 0.060 if w == 0 else 0.005,
                      "make_mean_s": 0.060 if w == 0 else 0.005} for w in range(4)}
    return attribution.attribution(ranks, ranks % 4, np.arange(4, 52) % 4, 4, 4, None,
                                   per_worker=per_worker, making=True,
                                   samples_by_worker=samples_by_worker)


def test_one_worker_needs_its_cheaper_samples_slower_too():
    # Worker 0's batches each hold one 115 ms sample and one 2.5 ms one:
    # its median sample is between, its 25th percentile the others'.
    turn = {w: {"samples": 24, "median_s": 0.058 if w == 0 else 0.0025, "p25_s": 0.0025}
            for w in range(4)}
    assert attribution.sample_ratio(turn, 0) == pytest.approx(1.0)
    a = _worker_0_slow(turn)
    assert a is None or a["label"] != "ONE-WORKER"
    # A worker whose every sample costs 3x (its shard, its core): ONE-WORKER.
    slow = {w: {"samples": 24, "median_s": 0.0075 if w == 0 else 0.0025,
                "p25_s": 0.0075 if w == 0 else 0.0025} for w in range(4)}
    assert attribution.sample_ratio(slow, 0) == pytest.approx(3.0)
    assert _worker_0_slow(slow)["label"] == "ONE-WORKER"
    # Samples not timed, or too few a worker: the batches decide as before.
    assert _worker_0_slow(None)["label"] == "ONE-WORKER"
    few = {w: {**v, "samples": 3} for w, v in turn.items()}
    assert attribution.sample_ratio(few, 0) is None
    assert _worker_0_slow(few)["label"] == "ONE-WORKER"


def test_lock_step_needs_the_batches_made_alike():
    # Slow samples at random indices: their batches cost more, and the loop
    # stalls behind each on its worker's turn (period num_workers); the
    # make times form two groups, which no round of equal batches does.
    ranks = np.arange(4, 52, 4)
    args = (ranks, ranks % 4, np.arange(4, 52) % 4, 4, 4, None)
    assert attribution.attribution(*args, making=True, made_alike=False) is None
    assert attribution.attribution(*args, making=True, made_alike=True)["label"] == "LOCK-STEP"
    assert attribution.attribution(*args, making=True)["label"] == "LOCK-STEP"


def test_slow_samples_from_the_stalls_need_batches_that_cost_more():
    # 4 workers whose stalls came every 2 batches (workers pairing up on 2
    # cores), over workers 0 and 2: a period other than num_workers.  Batches
    # timed alike are no slow samples; untimed, the stalls' period stands.
    ranks = np.arange(4, 52, 2)
    args = (ranks, ranks % 4, np.arange(4, 52) % 4, 4, 2, None)
    assert attribution.attribution(*args, made_alike=True) is None
    a = attribution.attribution(*args)
    assert a["label"] == "SLOW-SAMPLE" and a["period_from"] == attribution.PERIOD_FROM_STALLS
    assert attribution.attribution(*args, made_alike=False)["label"] == "SLOW-SAMPLE"


def test_batch_cost_needs_two_groups_apart_in_size():
    rng = np.random.default_rng(4)
    # A lock-step round beside a hog: 16 batches of 202-215 ms.
    round_ = (rng.uniform(202, 215, 16) * 1e6).astype(np.int64)
    assert attribution.batch_cost(round_)["alike"]
    # Random slow samples: 6 of 40 batches 80 ms against 1-3 ms.
    mixed = (rng.uniform(1, 3, 40) * 1e6).astype(np.int64)
    mixed[rng.choice(40, 6, replace=False)] = 80_000_000
    cost = attribution.batch_cost(mixed)
    assert not cost["alike"] and cost["slow"] == 6 and cost["batches"] == 40
    fast = np.sort(mixed)[:34]
    assert cost["ratio"] == pytest.approx(80e6 / np.exp(np.log(fast).mean()), rel=1e-9)
    # Two tight groups 1.2x apart: eta is high, the gap is not.
    near = np.array([100] * 8 + [120] * 8, dtype=np.int64) * 1_000_000
    assert attribution.batch_cost(near)["alike"]
    assert not attribution.batch_cost(near * np.repeat([1, 2], 8))["alike"]
    # One or two batches apart are hiccups, not a group that costs more:
    # 60 ms batches with one or two read far cheaper or dearer stay alike;
    # three of them are a group (ATTR_MIN_STALLS).
    rng = np.random.default_rng(4)
    sleep = (60e6 * rng.uniform(0.99, 1.01, 30)).astype(np.int64)
    for apart in (1, 2):
        for scale in (0.15, 5.0):
            odd = sleep.copy()
            odd[:apart] = (odd[:apart] * scale).astype(np.int64)
            assert attribution.batch_cost(odd)["alike"], (apart, scale)
    odd = sleep.copy()
    odd[:attribution.ATTR_MIN_STALLS] *= 5
    assert not attribution.batch_cost(odd)["alike"]


def test_slow_sample_words_time_an_iterable_by_position_not_by_index():
    attr = {"label": "SLOW-SAMPLE", "period": 3, "residue": 1, "residue_share": 0.95,
            "stall_workers": {0: 6, 1: 6}, "made": None}
    (f,) = attribution.advise({"attribution": attr})
    assert "__getitem__ on the indices" in attribution.WORDS[f.code](f.numbers)
    (f,) = attribution.advise({"attribution": attr,
                               "production": {"samples": {"kind": "iterable"}}})
    words = attribution.WORDS[f.code](f.numbers)
    assert "__getitem__" not in words and "__next__ at the positions" in words


def test_at_no_workers_the_slow_batches_may_be_collates_as_much_as_samples():
    # A slow collate_fn every 7th batch at num_workers=0 (helper 32B): the
    # stack samples named my_collate > merge_meta, and the residue's step
    # said "particular samples are slow ... time __getitem__": at 0
    # workers nothing times collate_fn apart from the samples.
    attr = {"label": "SLOW-SAMPLE", "period": 7, "residue": 0, "residue_share": 1.0,
            "stall_workers": {}, "made": None}
    (f,) = attribution.advise({"attribution": attr, "loader": {"num_workers": 0}})
    words = attribution.WORDS[f.code](f.numbers)
    assert "share rank % 7 == 0" in words
    assert "their samples or their collate_fn" in words and "collate_fn on them" in words
    assert "particular samples are slow" not in words
    # With workers, their per-sample timing tells the two apart.
    attr["stall_workers"] = {0: 6, 1: 6}
    (f,) = attribution.advise({"attribution": attr, "loader": {"num_workers": 2}})
    assert "particular samples are slow" in attribution.WORDS[f.code](f.numbers)


def test_batches_slow_in_collate_read_slow_collate_not_slow_samples():
    # Every 5th batch's collate_fn burns 50 ms over samples of 12 us: the
    # stalled batches spent 97% of their make time in collate_fn.
    sample = {"label": "SLOW-SAMPLE", "period": 5, "residue": 0, "residue_share": 1.0,
              "stall_workers": {0: 3, 1: 4}, "known": 7, "made": None}
    attr = attribution.with_collate_share(sample, 0.97)
    assert attr["label"] == "SLOW-COLLATE" and sample["label"] == "SLOW-SAMPLE"
    (f,) = attribution.advise({"attribution": attr})
    assert f.code == "slow_collate"
    words = attribution.WORDS[f.code](f.numbers)
    assert "collate_fn holds 97% of the stalled batches' make time" in words
    assert "time collate_fn on those batches" in words
    assert "particular samples are slow" not in words and "__getitem__ on" not in words
    line = attribution.attribution_line({"attribution": attr})
    assert line.startswith("attribution: SLOW-COLLATE, rank % 5 == 0"), line
    assert line.endswith("collate_fn holds 97% of the stalled batches' make time: the "
                         "batches are slow, not their samples"), line
    # Collate half the time or less: the samples' label and words stand.
    for share in (0.5, None):
        attr = attribution.with_collate_share(sample, share)
        assert attr["label"] == "SLOW-SAMPLE"
        (f,) = attribution.advise({"attribution": attr})
        assert f.code == "slow_sample"
        assert "particular samples are slow" in attribution.WORDS[f.code](f.numbers)
        assert "collate_fn holds" not in attribution.attribution_line({"attribution": attr})



def test_deeper_look_ahead_is_advised_only_where_the_workers_keep_up():
    # 2 workers, prefetch_factor 2, a 30 ms step, stalls of 100 ms (median):
    # one more batch in flight a worker starts each batch 2 x 30 = 60 ms
    # earlier, so ceil(100 / 60) = 2 more hide the median stall.
    s = {"loader": {"num_workers": 2, "prefetch_factor": 2},
         "prediction": {"keeps_up_with": 2}, "stalls": {"stall_median_s": 0.1},
         "step_s": {"mean": 0.03}}
    assert attribution.deeper_look_ahead(s) == {"from": 2, "to": 4, "stall_s": 0.1}
    # The workers do not keep up on average: look-ahead makes no batch
    # faster, so none is advised.
    s["prediction"]["keeps_up_with"] = 3
    assert attribution.deeper_look_ahead(s) is None
    s["prediction"] = {"keeps_up_with": None}
    assert attribution.deeper_look_ahead(s) is None


def test_no_look_ahead_is_advised_where_the_stalls_awaited_made_batches():
    # A slow sample every 7th index at prefetch_factor=4 (helper 63): the
    # stalls' clocked parts put 20% in a worker making the batch and 70%
    # in a made batch held behind its worker's Python.  Starting batches
    # earlier hides none of that: no deeper look-ahead (the mean wait a
    # step was 6.2 ms at 4, 5.2-5.5 ms at 6, 2.9-3.2 ms at 3).
    held = {"wait_s": 1.0, "parts_s": {"worker_making": 0.19, "worker_cpu_wait": 0.01,
                                       "main_cpu": 0.05, "cpu_wait": 0.02,
                                       "behind_worker": 0.70, "in_transit": 0.03}}
    s = {"loader": {"num_workers": 2, "prefetch_factor": 4},
         "prediction": {"keeps_up_with": 2}, "stalls": {"stall_median_s": 0.04},
         "step_s": {"mean": 0.013}, "wait_parts": {"stalls": held}}
    assert wait_parts.production_leads(held) is False
    assert attribution.deeper_look_ahead(s) is None
    # The same stalls with the worker making 89% of their wait: it leads,
    # and one more batch in flight starts each 2 x 13 ms earlier.
    making = {"wait_s": 1.0, "parts_s": {"worker_making": 0.86, "worker_cpu_wait": 0.03,
                                         "main_cpu": 0.04, "cpu_wait": 0.01,
                                         "behind_worker": 0.02, "in_transit": 0.04}}
    s["wait_parts"]["stalls"] = making
    assert wait_parts.production_leads(making) is True
    assert attribution.deeper_look_ahead(s) == {"from": 4, "to": 6, "stall_s": 0.04}
    # Without the workers' timing nothing is measured against it.
    assert wait_parts.production_leads({"wait_s": 1.0, "parts_s": {"main_cpu": 1.0}}) is None


def test_no_look_ahead_is_advised_where_the_slow_batches_fall_on_some_workers():
    # Helper 37A: 4 workers, every 2nd batch 60 ms, 10 ms compute and 1 ms
    # hand-over: the pooled mean (about 31 ms) keeps up with 4 x 11 = 44
    # ms, but workers 0 and 2 make every slow batch (60 ms each) and fall
    # behind; prefetch_factor 3 or 6 left the stalls as they were.
    workers = {0: 60e-3, 1: 2e-3, 2: 60e-3, 3: 2e-3}
    s = {"loader": {"num_workers": 4, "prefetch_factor": 2},
         "prediction": {"keeps_up_with": 3, "compute_s": 0.010, "handover_s": 0.001},
         "stalls": {"stall_median_s": 0.017}, "step_s": {"mean": 0.0154},
         "attribution": {"period": 2},
         "production": {"workers": {w: {"batches": 8, "make_mean_s": m, "make_sd_s": 2e-3}
                                    for w, m in workers.items()}}}
    d = attribution.deeper_look_ahead(s)
    assert d["behind"] == [0, 2] and d["make_s"] == 60e-3
    # The 99% one-sided lower bound of the mean, Student's t on 8 batches.
    assert d["low_s"] == pytest.approx(60e-3 - sps.t.ppf(0.99, 7) * 2e-3 / np.sqrt(8))
    assert d["budget_s"] == pytest.approx(4 * 0.011)
    # 3 shares no factor with the period 2: the slow batches go to every
    # worker in turn, and the nearest such count to 4 (3 before 5).
    assert d["spread"] == 3
    said = attribution._look_ahead({"deeper": d})
    assert "No deeper look-ahead hides them: workers 0 and 2 took 60 ms a batch" in said
    assert "num_workers=(4, 3)" in said and "prefetch_factor" not in said
    # Helper 39A: a worker's mean just past its budget within its own
    # spread (21.5 ms against 21 ms) is no evidence it falls behind, nor
    # is it "the one the slow batches fall on".
    near = {**s, "production": {"workers": {
        w: {"batches": 25, "make_mean_s": 45e-3 if w == 1 else 10e-3, "make_sd_s": 20e-3}
        for w in range(4)}}}
    d = attribution.deeper_look_ahead(near)
    assert d["close"] == [1] and "behind" not in d and "to" not in d
    half = sps.t.ppf(0.99, 24) * 20e-3 / 5.0
    assert (d["low_s"], d["high_s"]) == (pytest.approx(45e-3 - half), pytest.approx(45e-3 + half))
    said_near = attribution._look_ahead({"deeper": d})
    assert "Whether a deeper look-ahead hides them is not yet told: worker 1 took 45 ms" in said_near
    assert "prefetch_factor" not in said_near and "fall on" not in said
    # The slow batches spread over every worker (each worker's mean 31 ms,
    # under its 44 ms): the look-ahead is the step, as before.
    s["production"]["workers"] = {w: {"batches": 8, "make_mean_s": 31e-3, "make_sd_s": 1e-3}
                                  for w in range(4)}
    assert attribution.deeper_look_ahead(s) == {"from": 2, "to": 3, "stall_s": 0.017}


def _sized(ranks, every, big, small, sample_ns, seed):
    """Batch sizes (``big`` on every ``every``-th rank, else ``small``) and
    make times (each sample ``sample_ns``, +-3% a batch) of the ranks."""
    sizes = np.where(ranks % every == 0, big, small)
    spread = np.random.default_rng(seed).uniform(0.97, 1.03, len(ranks))
    return sizes, (sizes * sample_ns * spread).astype(np.int64)


def test_a_residue_of_large_batches_from_the_stalls_reads_large_batch():
    # 38 steady batches at 2 workers, every 5th of 16 samples and the rest
    # of 2, each sample 5 ms: too few slow batches (8) for the make times'
    # own period, so the stalls name the residue; the residue's batches
    # hold 8x the samples at the same cost a sample: LARGE-BATCH.
    ranks = np.arange(2, 40)
    sizes, make = _sized(ranks, 5, 16, 2, 5_000_000, seed=2)
    stalled = ranks[ranks % 5 == 0]
    args = (stalled, stalled % 2, ranks % 2, 2, 5, None)
    a = attribution.attribution(*args, by_size=(ranks, make, sizes))
    assert a["label"] == "LARGE-BATCH" and (a["period"], a["residue"]) == (5, 0)
    assert a["made"]["sizes"] == [16.0, 2.0]
    assert a["made"]["sample_cost_ratio"] == pytest.approx(1.0, abs=0.05)
    assert "from the stalls" in attribution.attribution_line({"attribution": a})
    # The same stalls where every batch holds 2 samples and the residue's
    # cost 8x a sample: slow samples.
    a = attribution.attribution(*args, by_size=(ranks, make, np.full(len(ranks), 2)))
    assert a["label"] == "SLOW-SAMPLE"
    assert attribution.attribution(*args)["label"] == "SLOW-SAMPLE"


def test_a_shuffled_loader_never_pins_slow_samples_to_one_worker():
    # Every 3rd index slow at batch size 1 and 3 workers, in order: every
    # slow sample is worker 0's, and the order sends them to it each epoch
    # (ONE-WORKER, or the samples it is sent).  The same run read from a
    # loader that shuffles: the order pins nothing, so no such reading and
    # no "shuffle=True" next step.
    import dataclasses

    case = corpus.sim_slow_items_pinned_to_one_worker(0)
    s = corpus.replay(case).summary
    assert s["attribution"]["label"] == "ONE-WORKER" and s["attribution"]["pinned_indices"]
    assert "one_worker_or_samples" in [f.code for f in attribution.advise(s)]
    src = case.sources[corpus.SOURCE_ID]
    shuffled = {**src.loader, "shuffle": True}
    epochs = {e: {**f, "loader": shuffled} for e, f in src.epoch_facts.items()}
    case = dataclasses.replace(case, sources={corpus.SOURCE_ID: dataclasses.replace(
        src, loader=shuffled, epoch_facts=epochs)})
    s = corpus.replay(case).summary
    assert s["loader"]["shuffle"] is True
    assert "pinned_indices" not in (s["attribution"] or {})
    codes = [f.code for f in attribution.advise(s)]
    assert "one_worker_or_samples" not in codes


def test_a_fixed_order_keeps_the_slow_worker_and_its_samples_apart_in_words():
    # The same ONE-WORKER reading where the per-sample timing pinned no
    # slow index (samples a little slower, under its line): a map-style
    # dataset in a fixed order still sends worker 0 the same indices each
    # epoch, so the next step is the run that moves them, not the worker's
    # shard; a shuffled order, or an IterableDataset, keeps the shard.
    s = corpus.replay(corpus.sim_slow_items_pinned_to_one_worker(0)).summary
    s["attribution"] = {k: v for k, v in s["attribution"].items() if k != "pinned_indices"}
    assert s["production"]["samples"]["kind"] == "map" and s["loader"]["shuffle"] is False
    (f,) = attribution.advise(s)
    assert f.code == "one_worker_or_samples" and f.numbers["indices"] is None
    (text,) = sentences([f])
    assert "the loader's order is fixed (a map-style dataset, no shuffle)" in text
    assert "shuffle=True" in text
    assert attribution.attribution_line(s).endswith(
        "or the samples it is sent: the loader's fixed order sends it the same indices "
        "every epoch")
    for loader, kind in (({**s["loader"], "shuffle": True}, "map"),
                         (s["loader"], "iterable")):
        t = {**s, "loader": loader, "production": {
            **s["production"], "samples": {**s["production"]["samples"], "kind": kind}}}
        assert [f.code for f in attribution.advise(t)] == ["one_worker", "split_shards"]


def test_every_num_workers_th_batch_larger_reads_large_batch_not_the_round():
    # 4 workers, every 4th batch of 48 samples against 8 (0.8 ms each):
    # the large batches all land on worker 0, the stalls keep the workers'
    # period 4; the batches are slow by their size, not a round or worker.
    ranks = np.arange(4, 120)
    sizes, make = _sized(ranks, 4, 48, 8, 800_000, seed=5)
    stalled = ranks[ranks % 4 == 0]
    a = attribution.attribution(stalled, np.zeros(len(stalled), dtype=np.int64), ranks % 4,
                                4, 4, None, by_size=(ranks, make, sizes))
    assert a["label"] == "LARGE-BATCH" and (a["period"], a["residue"]) == (4, 0)
    # Equal batches in lock-step: the round, as before.
    even = np.full(len(ranks), 8)
    make = (even * 800_000).astype(np.int64)
    a = attribution.attribution(stalled, stalled % 4, ranks % 4, 4, 4, None,
                                by_size=(ranks, make, even))
    assert a["label"] == "LOCK-STEP"


def test_slow_sample_words_time_the_per_sample_stride_where_it_is_known():
    # Every 7th index slow at batch size 2: batches at rank % 7 == 0 and
    # == 3 are slow, the made-time residue holds one of them; the workers'
    # per-sample timing found index % 7 == 0 exactly, which the next step
    # names instead of half the batches.
    attr = {"label": "SLOW-SAMPLE", "period": 7, "residue": 3, "residue_share": 0.95,
            "stall_workers": {0: 4, 1: 4}, "known": 8, "period_from": "stalls"}
    s = {"attribution": attr, "production": {"samples": {
        "kind": "map", "slow": {"stride": 7, "residue": 0}}}}
    (f,) = attribution.advise(s)
    words = attribution.WORDS[f.code](f.numbers)
    assert ("time __getitem__ on index % 7 == 0 (the workers' per-sample timing found every "
            "7th index slow, and no other)") in words
    # Without a stride: the batches' indices, as before.
    s["production"]["samples"]["slow"]["stride"] = None
    (f,) = attribution.advise(s)
    assert "time __getitem__ on the indices of those batches" in attribution.WORDS[f.code](
        f.numbers)


def test_stalls_on_a_residue_whose_batches_cost_alike_are_not_slow_samples():
    # 6 workers pairing up on 2 cores: the stalls gather on even ranks,
    # yet the workers timed every batch at ~4 ms whatever its rank.
    ranks = np.arange(6, 126)
    make = (4_000_000 * np.random.default_rng(9).uniform(0.9, 1.1, len(ranks))).astype(np.int64)
    stalled = ranks[ranks % 2 == 0][:20]
    args = (stalled, stalled % 6, ranks % 6, 6, 2, None)
    assert attribution.attribution(*args)["label"] == "SLOW-SAMPLE"
    assert attribution.attribution(*args, by_size=(ranks, make, None)) is None
    # The same stalls where the even ranks' batches took 3x: slow samples.
    slow = np.where(ranks % 2 == 0, make * 3, make)
    a = attribution.attribution(*args, by_size=(ranks, slow, None))
    assert a["label"] == "SLOW-SAMPLE" and (a["period"], a["residue"]) == (2, 0)


def test_a_slow_worker_hidden_behind_another_is_named_beside_it():
    # 5 workers dealt batches in turn, workers 1 and 3 each making theirs
    # in 60 ms against 4 ms: worker 3's batch is made while the loop waits
    # on worker 1's, so all 15 stalls sit on worker 1 (measured: helper
    # run /tmp/s29/two_slow.py, 15 of 15).  ONE-WORKER 1, with worker 3
    # named as slow too: fixing worker 1 alone would leave worker 3's.
    make = {0: 0.004, 1: 0.060, 2: 0.004, 3: 0.059, 4: 0.004}
    per_worker = {w: {"batches": 16, "make_median_s": m, "make_mean_s": m}
                  for w, m in make.items()}
    ranks = np.arange(6, 80, 5)
    a = attribution.attribution(ranks, ranks % 5, np.arange(5, 80) % 5, 5, 5, None,
                                per_worker=per_worker, making=True)
    assert a["label"] == "ONE-WORKER" and a["worker"] == 1
    assert set(a["also_slow"]) == {3}
    assert a["also_slow"][3] == pytest.approx(0.059 / np.median([0.004, 0.060, 0.004, 0.004]))
    one, shards = attribution.advise({"attribution": a, "loader": {"num_workers": 5}})
    assert one.code == "one_worker" and shards.code == "split_shards"
    text = " ".join(sentences([one, shards]))
    assert "Worker 3 also takes 14.7x" in text
    assert "fixing worker 1 alone leaves worker 3's batches to stall" in text
    assert "look at what workers 1 and 3 have" in text
    line = attribution.attribution_line({"attribution": a})
    assert "workers 1 and 3 both make their batches slowly" in line
    # A run file's keys come back as strings: the same words.
    stored = {**a, "also_slow": {"3": a["also_slow"][3]}}
    assert attribution.attribution_line({"attribution": stored}) == line
    # Worker 3 as fast as the rest: one slow worker, no such words.
    per_worker[3] = per_worker[0]
    a = attribution.attribution(ranks, ranks % 5, np.arange(5, 80) % 5, 5, 5, None,
                                per_worker=per_worker, making=True)
    assert a["label"] == "ONE-WORKER" and "also_slow" not in a
    text = " ".join(sentences(attribution.advise({"attribution": a,
                                                  "loader": {"num_workers": 5}})))
    assert "also takes" not in text and "look at what worker 1 has" in text


@pytest.mark.parametrize("case,hidden", [(corpus.sim_slow_workers(0), {3}),
                                         (corpus.sim_slow_workers(1, (0, 2), 8.0, 6), {2})])
def test_the_corpus_slow_workers_name_the_hidden_one(case, hidden):
    # The schedule torch plays out (corpus.simulated_loader): the stalls
    # sit on the first slow worker only, the make times show both.
    s = corpus.replay(case).summary
    a = s["attribution"]
    assert set(a["stall_workers"]) == {case.truth["attribution.worker"]}
    assert set(a["also_slow"]) == hidden
    make = case.batches
    for w in hidden:
        own = make["end_ns"][make["worker"] == w] - make["begin_ns"][make["worker"] == w]
        assert np.median(own) > attribution.BUSIER_RATIO * np.median(
            (make["end_ns"] - make["begin_ns"])[make["worker"] == 4])


def test_value_counts_are_numpys_unique():
    from traceml.findings import _numbers

    rng = np.random.default_rng(5)
    for x in (rng.integers(0, 4, 1000), rng.integers(-3, 4, 500), rng.integers(0, 2**40, 300),
              np.array([], dtype=np.int64), np.array([7], dtype=np.int32),
              rng.random(50)):
        values, counts = _numbers.value_counts(x)
        want_v, want_c = np.unique(x, return_counts=True)
        np.testing.assert_array_equal(values, want_v)
        np.testing.assert_array_equal(counts, want_c)


def test_large_batches_at_random_places_are_named_by_their_sizes():
    # A batch_sampler's batches: 8 samples, and 32 at 15 random places of
    # 120 (helper 34B: "the cost is every batch's" in 5 of 5 runs); each
    # sample 1.5 ms, so a batch's make time is its size's.  The stalls
    # wait on the large ones and keep no period.
    import numpy as np
    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(3)
    ranks = np.arange(120)
    size = np.where(rng.random(120) < 0.125, 32, 8)
    make = (size * 1.5e6 * rng.uniform(0.9, 1.1, 120)).astype(np.int64)
    big = np.flatnonzero(size == 32)
    workers = ranks % 2
    a = attribution.attribution(big, workers[big], workers, 2, None, None,
                                by_size=(ranks, make, size))
    assert a["label"] == attribution.LARGE_BATCH
    assert a["period_from"] == attribution.PERIOD_FROM_SIZES and a["period"] is None
    m = a["made"]
    assert m["sizes"] == [32.0, 8.0] and m["slow"] == len(big)
    want = mannwhitneyu(size[big], np.delete(size, big), alternative="greater").pvalue
    assert m["size_p_value"] == pytest.approx(want)
    assert "from the batches' sizes" in attribution.attribution_line(
        {"attribution": a, "loader": {"num_workers": 2}})
    # Every batch the same size, slow samples making some slow: no size.
    even = np.full(120, 8)
    assert attribution._stalls_by_size((ranks, make, even), big) is None
    # Large batches that do not stall: the stalls' batches are not larger.
    small = np.flatnonzero(size == 8)[:15]
    assert attribution._stalls_by_size((ranks, make, size), small) is None


def _slow_shard_half_stalled(worker_1_ms: float):
    """2 workers over 120 steady batches (worker = rank % 2); worker 1's
    batches made in ``worker_1_ms`` against 8 ms, every other one of them
    stalled (prefetch hid the rest): 30 stalls of its 60 batches."""
    rng = np.random.default_rng(7)
    ranks = np.arange(2, 122)
    workers = ranks % 2
    make_ms = np.where(workers == 1, worker_1_ms, 8.0) * rng.uniform(0.9, 1.1, len(ranks))
    stalled = ranks[(workers == 1) & (ranks % 4 == 3)]
    per_worker = {w: {"batches": 60, "make_median_s": float(np.median(make_ms[workers == w]))
                      * 1e-3, "make_mean_s": float(np.mean(make_ms[workers == w])) * 1e-3}
                  for w in (0, 1)}
    made = np.round(make_ms * 1e6).astype(np.int64)
    return attribution.attribution(stalled, stalled % 2, workers, 2, 4, None,
                                   per_worker=per_worker, making=True, made_alike=False,
                                   by_size=(ranks, made, None))


def test_a_slow_shard_half_hidden_by_prefetch_is_one_worker_by_its_make_times():
    # A 3x slower IterableDataset shard on 2 workers stalled 29 of its
    # worker's 59 batches (49%) and read PERIODIC 4 without an attribution
    # (helper 34B, 2 of 7 runs): every batch of it is slow where it is
    # made, which the stalls alone, at half, cannot say.
    a = _slow_shard_half_stalled(24.0)
    assert a["label"] == attribution.ONE_WORKER and a["worker"] == 1
    assert a["own_share"] == 0.5
    # Its batches made like the others': the stalls stay unexplained.
    assert _slow_shard_half_stalled(8.0) is None


def test_several_slow_places_are_worded_as_a_set():
    made = {"slow": 59, "batches": 148, "split_s": 0.01, "slow_on_residue": 1.0,
            "residue_slow": 1.0, "sizes": None, "sample_cost_ratio": None}
    attr = {"label": "SLOW-SAMPLE", "period": 5, "residue": 2, "residues": [2, 0],
            "residue_share": 1.0, "stall_workers": {0: 9, 1: 12}, "known": 21,
            "period_from": attribution.PERIOD_FROM_MAKE_TIMES, "stall_period": 5,
            "made": made}
    line = attribution.attribution_line({"attribution": attr})
    assert line.startswith("attribution: SLOW-SAMPLE, rank % 5 in {0, 2} from the workers' "
                           "make times (59 of 148 batches made slow, 100% of them on those "
                           "residues); the stalls: 100% on them, period 5 too"), line
    (f,) = attribution.advise({"attribution": attr})
    words = attribution.WORDS[f.code](f.numbers)
    assert "100% of them with rank % 5 in {0, 2}" in words
    assert "Particular samples are slow, 2 in 5, not a worker" in words
    # One place: as before.
    one = {**attr, "residues": [2]}
    assert "rank % 5 == 2" in attribution.attribution_line({"attribution": one})
    assert "on it, period 5" in attribution.attribution_line({"attribution": one})


def test_a_residue_whose_wait_the_sampler_holds_is_not_slow_samples():
    # A Sampler sleeping every 16 indices at num_workers=0 (helper 36B):
    # the stalled batches at rank % 4 == 0 wait for their indices.
    slow = {"label": "SLOW-SAMPLE", "period": 4, "residue": 0}
    split = {"wait_s": 0.392, "parts_s": {"sampler": 0.384, "main_cpu": 0.008}}
    assert attribution.unless_sampler(slow, split) is None
    assert attribution.unless_sampler({**slow, "label": "SLOW-COLLATE"}, split) is None
    # The sampler a small part: the residue stands; other labels stand.
    small = {"wait_s": 0.392, "parts_s": {"sampler": 0.1, "main_cpu": 0.292}}
    assert attribution.unless_sampler(slow, small) is slow
    one = {"label": "ONE-WORKER", "worker": 1}
    assert attribution.unless_sampler(one, split) is one
    assert attribution.unless_sampler(slow, None) is slow


def test_a_lock_step_attribution_without_worker_timing_says_so():
    # Helper 38C: spawn workers (no batch timing), CPU readings that pin no
    # worker: the LOCK-STEP line gave no caveat while the next step did.
    a = {"label": attribution.LOCK_STEP, "period": 4, "stall_workers": {0: 10},
         "known": 10, "ambiguous": False, "top_worker": 0}
    line = attribution.attribution_line({"attribution": a, "production": {"available": False}})
    assert line.endswith("the workers' batch timing is off, so one slow batch a round, on one "
                         "worker's turn, reads the same")
    timed = attribution.attribution_line({"attribution": a, "production": {"available": True}})
    assert "timing is off" not in timed


def test_lock_step_needs_batches_in_rounds_of_every_worker():
    # Helper 64: 3 workers of an IterableDataset, worker 0's shard twice
    # the others': rounds 0, 1, 2 for 72 batches (24 each), then worker 0
    # alone for 28.  Complete rounds hold 72 of 100 batches: not in rounds.
    uneven = np.r_[np.tile([0, 1, 2], 24), np.zeros(28, dtype=np.int64)]
    assert not attribution.in_rounds(uneven, 3)
    # Rounds whose batches overtake one another (in_order=False) keep
    # their counts; a worker unknown for some batches changes nothing.
    rng = np.random.default_rng(5)
    shuffled = np.concatenate([rng.permutation(3) for _ in range(30)])
    assert attribution.in_rounds(shuffled, 3)
    assert attribution.in_rounds(np.r_[shuffled, -1, -1], 3)
    # The last round short by a batch or two: still rounds.
    assert attribution.in_rounds(np.r_[np.tile([0, 1, 2], 30), 0, 1], 3)
    assert attribution.in_rounds(np.array([-1, -1]), 3)
