"""A start-up paid once: the first epoch's start-up fetches against the
later epochs'.

The epoch-start line averages the start-up fetches over every epoch, so a
one-off cost (persistent workers started once, a cache filled in the first
epoch) reads as a cost of each epoch.  Measured here from the start-up
waits of each epoch (``epoch_start.by_epoch``): when the first recorded
epoch holds most of them, the report says it was paid once.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..fmt import fmt_s, pct, plural
from ._types import Finding, Words

# "Once" and "each epoch" differ by one epoch with two epochs: nothing to
# tell them apart by.  From three on, the later epochs show what an epoch
# start costs without the one-off.
ONE_OFF_MIN_EPOCHS = 3
# Unless the workers persist: then the loader's configuration predicts a
# cost paid once (the workers start in epoch 0 alone), and one later epoch
# shows what an epoch start costs without it.  Persistent workers whose
# first __getitem__ slept 300 ms, 2 epochs: "2 epochs, 184-211 ms each on
# average ... a file or cache opened per epoch" in 7 of 9 runs (helper
# 34B), epoch 0's start 344-404 ms against epoch 1's 11-20 ms.
ONE_OFF_MIN_EPOCHS_PERSISTENT = 2
# The first epoch "holds most" of the start-up wait: more than this share
# of all epochs' start-up wait together (a majority, the same "most" as
# stall_timing.PERIOD_MIN_SHARE).
ONE_OFF_SHARE = 0.5
# A later epoch's start-up wait longer than this many median steps is a
# cost of each epoch worth naming beside the one-off (a plain start pays
# the first batch and the hand-over: about a step).
RECUR_STEPS = 4


def notes(s: dict) -> list[Finding]:
    """``startup_once`` when the first recorded epoch's start-up fetches
    hold more than ONE_OFF_SHARE of all epochs' start-up wait over at least
    ONE_OFF_MIN_EPOCHS epochs (ONE_OFF_MIN_EPOCHS_PERSISTENT where the
    workers persist); else nothing."""
    by = (s.get("epoch_start") or {}).get("by_epoch") or []
    loader: Optional[dict] = s.get("loader")
    persistent = bool(loader and loader.get("num_workers")
                      and loader.get("persistent_workers"))
    if len(by) < (ONE_OFF_MIN_EPOCHS_PERSISTENT if persistent else ONE_OFF_MIN_EPOCHS):
        return []
    total = sum(e["input_wait_s"] for e in by)
    first = by[0]
    if total <= 0 or first["input_wait_s"] <= ONE_OFF_SHARE * total:
        return []
    later = [e["input_wait_s"] for e in by[1:]]
    return [Finding("startup_once", {
        "epoch": first["epoch"], "first_s": first["input_wait_s"],
        "share": first["input_wait_s"] / total, "later_epochs": len(later),
        "later_median_s": float(np.median(later)),
        "persistent": persistent,
        "step_median_s": (s.get("step_s") or {}).get("median")})]


def mostly_once(f: Finding) -> bool:
    """Whether the one-off of a ``startup_once`` note (the first epoch's
    excess over the later epochs' median) is itself more than ONE_OFF_SHARE
    of all epochs' start-up wait: only then does the bottom line call the
    start-up a one-off.  Each epoch start pays the later epochs' median;
    123 ms at epoch 0 against 60 ms at each of two later starts holds 51%
    of the start-up wait, yet 60 ms of it is paid every epoch: "a one-off
    cost ... not one paid each epoch" read beside "60.3 ms is paid at each
    epoch start" (helper 31A, persistent_workers=False)."""
    p = f.numbers
    total = p["first_s"] / p["share"] if p["share"] > 0 else 0.0
    return total > 0 and p["first_s"] - p["later_median_s"] > ONE_OFF_SHARE * total


def _once(p: dict) -> str:
    """The one-off part of the first epoch's start-up (its wait less the
    later epochs' median), and, where the later epochs still wait at their
    start, that they do: epoch 0 at 200 ms against 78.9 ms in each later
    epoch (workers not persistent) read "a cost paid once, not at each
    epoch start" beside the 78.9 ms each epoch pays."""
    once = max(p["first_s"] - p["later_median_s"], 0.0)
    persistent = " (persistent_workers=True starts the workers once)" if p["persistent"] else ""
    # What each later epoch still pays is said where it is half the one-off
    # or more, or longer than RECUR_STEPS median steps: 86 ms at each later
    # start beside a 214 ms one-off and a 10 ms step read "a cost paid
    # once, not at each epoch start" (helper 37A, index 0 sleeping 80 ms
    # each epoch; a plain start there took 5-6 ms).
    step = p.get("step_median_s")
    if (p["later_median_s"] >= ONE_OFF_SHARE * once
            or (step and p["later_median_s"] > RECUR_STEPS * step)):
        return (f"{fmt_s(once)} of epoch {p['epoch']}'s was paid once{persistent}, and "
                f"{fmt_s(p['later_median_s'])} is paid at each epoch start")
    return f"a cost paid once{persistent}, not at each epoch start"


WORDS: dict[str, Words] = {
    "startup_once": lambda p: (
        f"epoch {p['epoch']}'s start-up fetches waited {fmt_s(p['first_s'])} in all, "
        f"{pct(p['share'])} of every epoch's start-up wait; the later "
        f"{plural(p['later_epochs'], 'epoch')} {fmt_s(p['later_median_s'])} each (median): "
        + _once(p)),
}
