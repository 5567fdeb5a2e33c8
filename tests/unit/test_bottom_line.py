"""bottom_line: what holds the run's wall time, and the epoch start's next step."""

from traceml import findings, torch_private
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


def test_an_exception_that_ended_the_loop_is_the_bottom_line():
    # A worker that died makes the DataLoader raise too: the death leads.
    args = dict(wall_s=10.0, epoch_start_s=0.1, steady_wait_s=1.0, stuck_now=True,
                longest_wait_s=None, stuck_after_s=None)
    assert bottom_line.headline(**args, raised=True).label == bottom_line.RAISED
    assert bottom_line.headline(**args, raised=True, worker_exited=True).label == \
        bottom_line.WORKER_EXITED
    assert bottom_line.headline(**args).label == bottom_line.STUCK
    r = {"epoch": 1, "fetch": 12, "step": 30, "type": "OSError",
         "message": "[Errno 5] Input/output error", "worker": None}
    head = {"label": bottom_line.RAISED, "code": bottom_line.HEADLINE_RAISED, "raised": r}
    assert bottom_line.headline_part(head) == (
        " · RAISED: fetch 12 of epoch 1 raised OSError ([Errno 5] Input/output error)")
    (said,) = findings.sentences([("raised", r)])
    assert said.startswith("The loop ended when fetch 12 of epoch 1 raised OSError")
    assert "the figures below are of the 30 steps before it" in said
    assert "num_workers=0" not in said
    said = findings.sentences([("raised", {**r, "worker": 3, "step": 1})])[0]
    assert "raised OSError in DataLoader worker 3" in said and "the 1 step before it" in said
    assert "num_workers=0 raises it in the main process" in said
    # The epoch's first fetch raised: no figures to speak of.
    said = findings.sentences([("raised", {**r, "step": None, "fetch": 0})])[0]
    assert "before any batch of that epoch arrived; fix the error first" in said
    assert "figures" not in said
    # Earlier fetches raised and the loop went on past them.
    first = {"epoch": 0, "fetch": 3, "type": "KeyError", "message": "'x'", "worker": None}
    said = findings.sentences([("raised", {**r, "count": 3, "first": first})])[0]
    assert ("(2 earlier fetches raised too, the loop going on past them; the first: fetch 3 "
            "of epoch 0 raised KeyError ('x'))") in said
    said = findings.sentences([("raised", {**r, "count": 2, "first": first})])[0]
    assert "(1 earlier fetch raised too, the loop going on past it)" in said


def test_fetches_that_raised_and_the_loop_went_on_are_a_note_not_the_bottom_line():
    # A loop that catches a dataset's errors and goes on (helper 35B: "The
    # loop ended when fetch 20 ..." beside 98 trained steps, 6 of 6).
    r = {"epoch": 0, "fetch": 59, "step": 98, "type": "ValueError",
         "message": "corrupt record 121", "worker": None, "ended": False, "count": 2,
         "first": {"epoch": 0, "fetch": 20, "type": "ValueError",
                   "message": "corrupt record 41", "worker": None}}
    args = dict(wall_s=10.0, epoch_start_s=0.1, steady_wait_s=1.0, stuck_now=False,
                longest_wait_s=None, stuck_after_s=None)
    assert bottom_line.headline(**args, raised=False).label == bottom_line.STEADY
    (note,) = bottom_line.notes({"headline": {"label": "STEADY", "raised": r}})
    assert findings.sentences([note])[0] == (
        "2 fetches raised an exception and the loop went on past them: the latest, fetch 59 "
        "of epoch 0 raised ValueError (corrupt record 121); the first, fetch 20 of epoch 0 "
        "raised ValueError (corrupt record 41); their batches are not in these steps")
    assert bottom_line.notes({"headline": {"label": "RAISED", "raised": {**r, "ended": True}}}) \
        == []


def test_what_is_kept_of_a_worker_exception_is_its_own_last_line():
    # torch re-raises a worker's exception as the same type with "Caught
    # <type> in DataLoader worker process <id>.\nOriginal Traceback ..."
    # (torch._utils.ExceptionWrapper.reraise).
    exc = ValueError("Caught ValueError in DataLoader worker process 2.\n"
                     "Original Traceback (most recent call last):\n"
                     '  File "x.py", line 3, in __getitem__\n'
                     "    raise ValueError('bad')\n"
                     "ValueError: bad\n")
    assert torch_private.raised(exc) == {"type": "ValueError", "message": "ValueError: bad",
                                         "worker": 2}
    assert torch_private.raised(RuntimeError("first\nsecond")) == {
        "type": "RuntimeError", "message": "first", "worker": None}
    long = torch_private.raised(OSError("x" * 1000))
    assert len(long["message"]) == torch_private.RAISED_MESSAGE_MAX

    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no")

    assert torch_private.raised(Unprintable()) == {
        "type": "test_what_is_kept_of_a_worker_exception_is_its_own_last_line.<locals>."
                "Unprintable", "message": "", "worker": None}


def test_a_one_epoch_start_still_names_its_measured_part():
    # Helper 39A: a worker_init_fn sleeping 2 s, 96% of the start-up wait,
    # in a one-epoch run read only "a short run ... record more steps"
    # (5 of 5); its summary named the function.
    code = {"function": "init", "file": "s07c_init.py", "line": 3}
    said = _epoch_start(epochs=1, share=0.75, mean_s=2.05, init_s=2.0, init_share=0.958,
                        worker_init_code=code)
    assert said.startswith("The start (iter() and the first batches) holds 75% of the wall "
                           "time of this one-epoch recording: ")
    assert "worker_init_fn (`init` in `s07c_init.py:3`) took 2.00 s" in said
    assert "96% of the start-up wait" in said and "record more steps" not in said
    # iter() on the loader: its sampler named, as over several epochs.
    said = _epoch_start(epochs=1, iter_share=0.9, iter_cpu_share=0.98)
    assert "iter() on the loader itself took 90% of it" in said
    # Nothing measured holds it: the short run's caveat.
    said = _epoch_start(epochs=1, init_share=0.3, init_s=0.1)
    assert "a short run" in said and "record more steps" in said


def test_torch_own_sampler_leaves_iter_to_the_workers_start():
    """iter() at 4 workers holding the start with torch's SequentialSampler
    (helpers 41A, 41B: 60-90 ms of fork on 2 busy CPUs where the sampler's
    8 draws took 0.02 ms): the workers' start is named, not the sampler's
    code, and no "time iter(loader.batch_sampler)"."""
    stock = {"function": "SequentialSampler.__iter__", "file": "torch/utils/data/sampler.py",
             "line": 109}
    said = _epoch_start(epochs=1, num_workers=4, iter_share=0.53, iter_cpu_share=0.22,
                        sampler_code=stock, sampler_library=True)
    assert "iter() on the loader itself took 53% of it" in said
    assert "starts the 4 worker processes" in said and "starting the workers holds it" in said
    assert "iter(loader.batch_sampler)" not in said and "one-off" in said
    # Several epochs of workers started anew: each epoch pays it.
    said = _epoch_start(epochs=3, num_workers=4, iter_share=0.6, sampler_code=stock,
                        sampler_library=True)
    assert "each epoch pays it" in said and "persistent_workers=True to pay it once" in said
    # The user's own sampler: its code is still where to look.
    mine = {"function": "Balanced.__iter__", "file": "my/sampler.py", "line": 4}
    said = _epoch_start(epochs=3, num_workers=4, iter_share=0.6, sampler_code=mine,
                        sampler_library=False)
    assert "Next: time iter(loader.batch_sampler)" in said and "`Balanced.__iter__`" in said


def test_one_fetch_of_a_one_step_run_is_not_stuck():
    # A one-step probe run (helper 41C): its 47 µs fetch is 95% of the
    # 50 µs wall, yet neither stuck nor "the run".
    h = bottom_line.headline(50e-6, 0.0, 47e-6, False, 47e-6, 10.0, fetches=1)
    assert h.label == bottom_line.STEADY
    # Past the stall floor, one fetch of several holding the wall is.
    h = bottom_line.headline(8.5, 0.0, 8.1, False, 8.0, 10.0, fetches=30)
    assert (h.label, h.code) == (bottom_line.STUCK, bottom_line.HEADLINE_ONE_FETCH)
    # Under the floor it is a tick, however few the fetches around it.
    h = bottom_line.headline(1.2e-3, 0.0, 1e-3, False, 0.9e-3, 10.0, fetches=3)
    assert h.label == bottom_line.STEADY
