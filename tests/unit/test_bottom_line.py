"""bottom_line: what holds the run's wall time, and the epoch start's next step."""

from traceml.findings import advice, bottom_line


def _epoch_start(**kw):
    p = {"share": 0.3, "epochs": 3, "mean_s": 0.205, "num_workers": 2, "recreated": True}
    p.update(kw)
    return bottom_line._epoch_start_next(p)


def test_slow_first_batches_are_the_datasets_not_the_workers_start_up():
    # Indices 0-47 of each epoch cost 10 ms each, 2 workers, not persistent
    # (helper 32B): the awaited worker made the epoch's first batches for
    # most of the start-up wait.  "persistent_workers=True pays that
    # start-up once" was the next step in 4 of 4 runs, and persistent
    # workers still waited 160 ms an epoch.
    said = _epoch_start(making_share=0.83)
    assert "for 83% of it the awaited worker was still making the epoch's first batches" in said
    assert "pays that start-up once" not in said
    # ... and a 300 ms open in each worker's first __getitem__ (helper 34B)
    # reads the same from one run of recreated workers: both readings, and
    # the run that tells them apart.
    assert "work each new worker does first" in said
    assert "the dataset's work at each epoch's first indices" in said
    assert "record two or more epochs with persistent_workers=True" in said
    assert "would not remove it" not in said
    # The workers persist: the first indices' work, not a worker's.
    said = _epoch_start(making_share=0.83, recreated=False)
    assert "still making" in said and "each new worker" not in said
    assert "time __getitem__ on each epoch's first indices" in said
    # A start-up the workers spent starting (worker_init_fn, spawning):
    # the workers' start-up, as before.
    assert "pays that start-up once" in _epoch_start(making_share=0.1)
    assert "pays that start-up once" in _epoch_start()
    # At the line: not most.
    assert "pays that start-up once" in _epoch_start(
        making_share=bottom_line.STARTUP_MAKING_SHARE)


def test_the_epoch_start_step_carries_the_measured_making_share():
    s = {"headline": {"label": bottom_line.EPOCH_START, "epoch_start_share": 0.3,
                      "epoch_start_s_per_epoch": [0.2, 0.2, 0.2]},
         "loader": {"num_workers": 2, "persistent_workers": False},
         "epoch_start": {"by_epoch": [], "making_share": 0.7}}
    ((code, p),) = advice._headline_steps(s)
    assert code == "epoch_start" and p["making_share"] == 0.7
    del s["epoch_start"]["making_share"]
    ((_, p),) = advice._headline_steps(s)
    assert "making_share" not in p


def test_first_batches_that_cost_what_later_ones_do_are_the_pipeline_filling():
    # 6 workers on 2 cores, every sample 5 ms of CPU (helper 33A, 9 of 9
    # runs: "the dataset's work at each epoch's first samples"): the
    # workers made the first batches for 80-88% of the start-up wait,
    # at 1.0x the later batches' CPU.
    said = _epoch_start(making_share=0.83, num_workers=6, first_cpu_ratio=1.0,
                        first_work_ratio=1.1)
    assert "the pipeline filling" in said and "6 workers making their first" in said
    assert "time __getitem__ on each epoch's first indices" not in said
    # First batches of the same CPU that took 30x their own time (a 300 ms
    # sleep on a lazy open, helper 34B): no filling.
    said = _epoch_start(making_share=0.83, first_cpu_ratio=1.4, first_work_ratio=30.0,
                        recreated=False)
    assert "the pipeline filling" not in said
    assert "time __getitem__ on each epoch's first indices" in said
    # First batches costing more than BUSIER_RATIO times the later ones:
    # the dataset's work at those indices, as before.
    from traceml.findings import attribution
    said = _epoch_start(making_share=0.83, first_cpu_ratio=attribution.BUSIER_RATIO,
                        first_work_ratio=1.0, recreated=False)
    assert "time __getitem__ on each epoch's first indices" in said
