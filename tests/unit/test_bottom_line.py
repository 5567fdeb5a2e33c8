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
    assert "persistent_workers=True would not remove it" in said
    assert "pays that start-up once" not in said
    # The workers persist: the same reading, without the persistence.
    said = _epoch_start(making_share=0.83, recreated=False)
    assert "still making" in said and "persistent_workers" not in said
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
