"""startup_once: a first epoch that holds most of the start-up wait."""

import pytest

from traceml.findings import sentences, startup_once


def _summary(waits_s, persistent=True):
    return {"epoch_start": {"by_epoch": [{"epoch": e, "fetches": 2, "input_wait_s": w}
                                         for e, w in enumerate(waits_s)]},
            "loader": {"num_workers": 2, "persistent_workers": persistent}}


def test_a_first_epoch_holding_most_of_the_start_up_is_said_once():
    (f,) = startup_once.notes(_summary([1.5, 0.004, 0.006]))
    assert f.code == "startup_once"
    assert f.numbers["share"] == pytest.approx(1.5 / 1.51)
    assert f.numbers["later_median_s"] == pytest.approx(0.005)
    text = sentences([f])[0]
    assert "a cost paid once" in text and "persistent_workers=True" in text


def test_a_start_up_the_later_epochs_still_pay_is_not_said_once_only():
    # Workers restarted each epoch: 200 ms at epoch 0, 78.9 ms at each
    # later start.  121 ms was the first epoch's own; the rest each pays.
    (f,) = startup_once.notes(_summary([0.200, 0.0789, 0.0789], persistent=False))
    text = sentences([f])[0]
    assert "not at each epoch start" not in text
    assert "121 ms of epoch 0's was paid once, and 78.9 ms is paid at each epoch start" in text


def test_two_epochs_of_persistent_workers_show_the_one_off():
    # Persistent workers whose first __getitem__ sleeps 300 ms, 2 epochs
    # (helper 34B): epoch 0's start 350 ms, epoch 1's 17 ms.  The workers
    # start in epoch 0 alone, so one later epoch shows the rest.
    (f,) = startup_once.notes(_summary([0.350, 0.017]))
    assert startup_once.mostly_once(f)
    assert f.numbers["later_median_s"] == pytest.approx(0.017)
    assert "a cost paid once (persistent_workers=True starts the workers once)" in (
        sentences([f])[0])
    # Workers started anew each epoch: two epochs cannot tell once from each.
    assert startup_once.notes(_summary([0.350, 0.017], persistent=False)) == []


@pytest.mark.parametrize("waits", [
    [0.5, 0.3, 0.3],               # the first holds 45%: not most
    [0.5, 0.25, 0.25],             # exactly half: not more than half
    [0.0, 0.0, 0.0],               # nothing waited
])
def test_otherwise_nothing(waits):
    assert startup_once.notes(_summary(waits)) == []


def test_the_bottom_line_calls_it_a_one_off_only_where_the_one_off_is_most():
    # 123 ms at epoch 0, 60 ms at each later start (helper 31A): the first
    # holds 51%, but its one-off (63 ms) is 26% of the 243 ms: the note
    # splits it, the bottom line does not call the start-up a one-off.
    (f,) = startup_once.notes(_summary([0.123, 0.0603, 0.0603], persistent=False))
    assert not startup_once.mostly_once(f)
    # Persistent workers started once: 874 ms against 20 ms later.
    (f,) = startup_once.notes(_summary([0.874, 0.020, 0.020], persistent=True))
    assert startup_once.mostly_once(f)


def test_a_one_off_beside_a_cost_each_later_epoch_pays_says_both():
    # Persistent workers, 320 ms at epoch 0 against 78.8 ms at each of two
    # later starts (helper 32A): the one-off (241 ms) is most of the 478
    # ms, and the bottom line said "not one paid each epoch" beside the
    # note's 78.8 ms each.
    from traceml.findings import advice

    (f,) = startup_once.notes(_summary([0.320, 0.0788, 0.0788]))
    assert startup_once.mostly_once(f)
    said = advice.WORDS["epoch_start_once"]({**f.numbers, "wall_share": 0.56})
    assert "not one paid each epoch" not in said, said
    assert "241 ms of it a one-off cost that a longer run spreads thin, and 78.8 ms paid " \
           "again at each later epoch start" in said, said
    # Later starts under the 1 ms floor: the one-off alone.
    (f,) = startup_once.notes(_summary([0.874, 0.0004, 0.0004]))
    said = advice.WORDS["epoch_start_once"]({**f.numbers, "wall_share": 0.5})
    assert "a one-off cost that a longer run spreads thin, not one paid each epoch" in said


def test_a_later_start_of_several_steps_is_said_beside_a_larger_one_off():
    # Helper 37A: persistent workers starting in 0.2 s, index 0 sleeping 80
    # ms every epoch, a 10 ms step: 300 ms at epoch 0, 86.4 ms at each later
    # start.  The one-off (214 ms) is more than twice the rest, yet 86.4 ms
    # is 8.6 steps, paid every epoch.
    s = {**_summary([0.300, 0.0864, 0.0864]), "step_s": {"median": 0.010}}
    (f,) = startup_once.notes(s)
    text = sentences([f])[0]
    assert "214 ms of epoch 0's was paid once" in text
    assert "86.4 ms is paid at each epoch start" in text and "not at each" not in text
    # Under RECUR_STEPS steps (a 30 ms step: 2.9 steps), the one-off alone.
    s["step_s"]["median"] = 0.030
    assert "a cost paid once" in sentences(startup_once.notes(s))[0]
