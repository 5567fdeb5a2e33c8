"""What holds the run's wall time: a stuck fetch, the epoch starts, or the
steady steps; the report's first line.
"""

from __future__ import annotations

from typing import NamedTuple, Optional


from ..fmt import code_where, fmt_s, pct, plural
from ._types import Finding, Words
from . import attribution, input_bound, stall_threshold


# What holds the run's wall time, over the whole run rather than steady
# state alone.  WORKER-EXITED: a DataLoader worker died during its epoch
# (evidence.dead_workers: an exit code other than 0, or gone before the
# epoch's last fetch), which makes the DataLoader raise: the event that
# ended the run, whatever its steady state was.  RAISED: the loop's fetch
# raised an exception (an Exception, not StopIteration nor an interrupt:
# the wrap iterator's on_raise), an error in the dataset, its collate_fn
# or a worker re-raised by the DataLoader, or a timeout: the loop ended
# there, after WORKER-EXITED, whose death makes the DataLoader raise too.
# STUCK: a fetch is stuck
# now, or one waited at least the stuck watch's stuck_after_s
# (configure(); its default lives in csrc/sampler.c).  EPOCH-START: the epoch starts (the first
# max(1, num_workers) fetches of each epoch: iter(), worker start-up) hold
# more than EPOCH_START_MAX_SHARE of the wall time, or at least
# INPUT_BOUND_SHARE of it (TensorFlow's "highly input-bound" line, taken
# for the wall time) while costing more than the steady input wait.
# Then STUCK again where one fetch holds more than EPOCH_START_MAX_SHARE of
# the wall time, however short of stuck_after_s (an 8 s hang in an 8.5 s
# run): that one fetch is the run, not an outlier of its steady state;
# it must outlast the stall floor (stall_threshold.STALL_FLOOR_S, a
# scheduler tick) and share the run with other fetches: a one-step probe
# run's 47 µs fetch is most of its 60 µs wall and read STUCK (helper 41C).
# STEADY otherwise: the diagnosis of the steady state speaks for the run.
EPOCH_START = "EPOCH-START"
STUCK = "STUCK"
STEADY = "STEADY"
WORKER_EXITED = "WORKER-EXITED"
RAISED = "RAISED"
EPOCH_START_MAX_SHARE = 0.5

HEADLINE_WORKER_EXITED = "worker_exited"  # a worker died mid-epoch
HEADLINE_RAISED = "raised"                # a fetch raised and ended the loop
HEADLINE_STUCK_NOW = "stuck_now"          # a stuck event still waiting
HEADLINE_STUCK_WAITED = "stuck_waited"    # a recorded fetch waited past stuck_after_s
HEADLINE_ONE_FETCH = "one_fetch"          # one fetch holds most of the wall time
HEADLINE_MOST_WALL = "most_wall"          # epoch starts > EPOCH_START_MAX_SHARE of wall
HEADLINE_OVER_STEADY = "over_steady"      # >= INPUT_BOUND_SHARE and > steady input wait
HEADLINE_STEADY = "steady"


class Headline(NamedTuple):
    """The headline label, the rule's code (HEADLINE_*) and the epoch
    starts' share of the wall time (None without wall time)."""

    label: str
    code: str
    epoch_start_share: Optional[float]


def headline(wall_s: float, epoch_start_s: float, steady_wait_s: float,
             stuck_now: bool, longest_wait_s: Optional[float],
             stuck_after_s: Optional[float], worker_exited: bool = False,
             raised: bool = False, fetches: Optional[int] = None) -> Headline:
    """The headline by the rule above: ``epoch_start_s`` is the input wait
    of every epoch's start-up fetches, ``steady_wait_s`` that of the
    steady-state ones, ``longest_wait_s`` the longest recorded fetch,
    ``worker_exited`` whether a worker died during its epoch, ``raised``
    whether a fetch raised an exception that ended the loop, ``fetches``
    how many fetches were recorded (None: not known)."""
    share = epoch_start_s / wall_s if wall_s > 0 else None
    if worker_exited:
        return Headline(WORKER_EXITED, HEADLINE_WORKER_EXITED, share)
    if raised:
        return Headline(RAISED, HEADLINE_RAISED, share)
    if stuck_now:
        return Headline(STUCK, HEADLINE_STUCK_NOW, share)
    if (longest_wait_s is not None and stuck_after_s is not None and stuck_after_s > 0
            and longest_wait_s >= stuck_after_s):
        return Headline(STUCK, HEADLINE_STUCK_WAITED, share)
    if share is not None and share > EPOCH_START_MAX_SHARE:
        return Headline(EPOCH_START, HEADLINE_MOST_WALL, share)
    if share is not None and share >= input_bound.INPUT_BOUND_SHARE and epoch_start_s > steady_wait_s:
        return Headline(EPOCH_START, HEADLINE_OVER_STEADY, share)
    if (longest_wait_s is not None and wall_s > 0
            and longest_wait_s > EPOCH_START_MAX_SHARE * wall_s
            and longest_wait_s >= stall_threshold.STALL_FLOOR_S
            and (fetches is None or fetches >= 2)):
        return Headline(STUCK, HEADLINE_ONE_FETCH, share)
    return Headline(STEADY, HEADLINE_STEADY, share)


def _stuck_next(p: dict) -> str:
    waited = fmt_s(p["waited_s"]) if p["waited_s"] is not None else "-"
    if p["now"]:
        return ("A fetch is stuck now (see the STUCK line): whatever the steady state says, "
                "the run is waiting there; look at the worker holding the batch "
                "(py-spy dump --pid PID) before anything else.")
    if p.get("wall_share") is not None:
        return (f"One fetch waited {waited}, {pct(p['wall_share'])} of the run's wall time: "
                "that one fetch is the run, whatever the steady state says; find what it "
                "waited on (a lock, a network read, a worker that hung, a sleep) before "
                "tuning the loader.")
    return (f"A fetch waited {waited}, past the stuck watch's {fmt_s(p['stuck_after_s'])}: "
            "that one fetch holds the run's time, whatever the steady state says; find what "
            "it waited on (a lock, a network read, a worker that hung) before tuning the "
            "loader.")


def dead_worker_line(d: dict) -> str:
    """A worker that died during its epoch (evidence.dead_workers)."""
    code = d.get("exitcode")
    if code is None:
        how = "exited mid-run"
    elif code < 0:
        how = f"was killed by {d['signal']} (exit code {code})"
    else:
        how = f"exited with code {code}"
    if d.get("when") == "after":
        at = f"after step {d['step']}, the last recorded of epoch {d['epoch']}"
    else:
        at = f"near step {d['step']}" + (f" (epoch {d['epoch']})" if "epoch" in d else "")
    return f"worker {d['worker']} (pid {d['pid']}) {how} {at}"


def raised_line(r: dict, longest_wait_s: Optional[float] = None) -> str:
    """An exception that ended the loop (evidence.raised); with the
    longest delivered fetch's wait ``longest_wait_s`` (s), the raising
    fetch's own wait where it was longer (a fetch that hung until Ctrl-C)."""
    where = (f" in DataLoader worker {r['worker']}" if r.get("worker") is not None else "")
    said = f" ({r['message']})" if r.get("message") else ""
    return (f"fetch {r['fetch']} of epoch {r['epoch']} raised {r['type']}{where}{said}"
            + _longer(r.get("wait_s"), longest_wait_s))


def _longer(wait_s: Optional[float], longest_wait_s: Optional[float]) -> str:
    """" after waiting 1.2 s, longer than any batch delivered (62.6 ms)"
    where the raising fetch waited longer than every delivered one."""
    if wait_s is None or longest_wait_s is None or not wait_s > longest_wait_s:
        return ""
    return (f" after waiting {fmt_s(wait_s)}, longer than any batch delivered "
            f"({fmt_s(longest_wait_s)})")


def _earlier(p: dict) -> str:
    """" (2 earlier fetches raised too, the loop going on past them; the
    first: ...)" where more than this one raised; else ""."""
    more = (p.get("count") or 1) - 1
    if more < 1:
        return ""
    first = p.get("first")
    return (f" ({plural(more, 'earlier fetch', 'earlier fetches')} raised too, the loop "
            "going on past " + ("it" if more == 1 else "them")
            + (f"; the first: {raised_line(first)}" if first and more > 1 else "") + ")")


def _raised_next(p: dict) -> str:
    hung = _longer(p.get("wait_s"), p.get("longest_wait_s"))
    if p.get("type") == "KeyboardInterrupt" and hung:
        # Interrupted in a fetch that waited longer than any other: that
        # fetch is where the run's time went, not an error to fix.
        return (f"The loop was interrupted in fetch {p['fetch']} of epoch {p['epoch']}{hung}: "
                "that fetch is where the run was waiting, whatever the steady state says; "
                "find what it waited on (a lock, a network read, a worker that hung, a sleep; "
                "with traceml.configure(stuck_after_s=...) shorter than that wait the stuck "
                "watch records where) before tuning the loader.")
    if not p.get("step"):
        return (f"The loop ended when {raised_line(p)}{_earlier(p)}, before any batch of "
                "that epoch arrived; fix the error first"
                + (" (num_workers=0 raises it in the main process, where a debugger can "
                   "stop at it)." if p.get("worker") is not None else "."))
    return (f"The loop ended when {raised_line(p)}{_earlier(p)}: the figures below are of "
            f"the {plural(p['step'], 'step')} before it; fix the error before tuning the "
            "loader"
            + (" (its traceback is in the exception the DataLoader re-raised; "
               "num_workers=0 raises it in the main process, where a debugger can stop "
               "at it)." if p.get("worker") is not None else "."))


def notes(s: dict) -> list[Finding]:
    """``raised_went_on`` where fetches raised and the loop went on past
    them (evidence.raised, not ``ended``): their batches are not in the
    steps, and the report's figures are of the batches that arrived."""
    r = (s.get("headline") or {}).get("raised")
    if not r or r.get("ended", True):
        return []
    return [Finding("raised_went_on", dict(r))]


def _raised_went_on(p: dict) -> str:
    count = p.get("count") or 1
    first = p.get("first")
    return (f"{plural(count, 'fetch', 'fetches')} raised an exception and the loop went on "
            f"past {'it' if count == 1 else 'them'}: "
            + (f"the latest, {raised_line(p)}; the first, {raised_line(first)}"
               if first else raised_line(p))
            + f"; {'its batch is' if count == 1 else 'their batches are'} not in these steps")


WORDS: dict[str, Words] = {"raised_went_on": _raised_went_on}


def _worker_exited_next(p: dict) -> str:
    return (f"The run ended when {dead_worker_line(p)}: whatever the steady "
            "state says, find why it died before tuning the loader. "
            + ("A kill by SIGKILL is often the kernel's out-of-memory killer (dmesg shows it); "
               if p.get("signal") == "SIGKILL" else "")
            + "num_workers=0 runs the dataset in the main process, where its own traceback "
            "shows (the DataLoader's message loses it).")


# The awaited worker still making the epoch's first batches for most (more
# than this share) of the start-up fetches' wait: the epoch starts are the
# dataset's first samples, not the workers' start-up (a worker starting,
# or running worker_init_fn, makes no batch).  The same "most" as
# stall_timing.PERIOD_MIN_SHARE.  Slow first indices each epoch read
# "the DataLoader starts its 2 workers anew ... persistent_workers=True
# pays that start-up once" in 4 of 4 runs (helper 32B), and persistent
# workers still waited 160 ms an epoch.
STARTUP_MAKING_SHARE = 0.5
# iter() on the loader itself holds most (more than this share) of the
# start-up fetches' wait: measured in the wrapper (wall and the main
# thread's CPU), it is the main process's own work, before any worker
# makes a batch.  A sampler whose __iter__ burned 0.4 s each epoch read
# "the DataLoader starts its 2 workers anew ... persistent_workers=True"
# in 5 of 5 runs (helper 37B), which left the start as it was.
STARTUP_ITER_SHARE = 0.5
# The loader's worker_init_fn holds most (more than this share) of the
# start-up fetches' wait: timed in each worker before its first batch (the
# longest of each epoch's new workers; they start at once).  A
# worker_init_fn sleeping 0.5 s read "the DataLoader starts its 2 workers
# anew ... persistent_workers=True" and never named the function (helper
# 36B).
STARTUP_INIT_SHARE = 0.5


# Workers that are not persistent: what each epoch's start pays again.
_STARTED_ANEW = ("The workers start anew every epoch (persistent_workers=False), so each "
                 "epoch pays it. ")
_COMPARE_EPOCHS = "compare the runs (traceml.compare, a few epochs each)."


def _init_start(p: dict, said: str) -> str:
    """The epoch start held by the loader's worker_init_fn
    (STARTUP_INIT_SHARE)."""
    code = (f" ({code_where(p['worker_init_code'])})" if p.get("worker_init_code") else "")
    head = (said + f"the loader's worker_init_fn{code} took {fmt_s(p['init_s'])} in each new "
            f"worker (the longest of each epoch's, median), {pct(p['init_share'])} of the "
            "start-up wait, before the worker made its first batch. ")
    if p.get("recreated"):
        return head + _STARTED_ANEW + ("Next: make worker_init_fn cheaper, or "
                                       "persistent_workers=True to pay it once, and "
                                       + _COMPARE_EPOCHS)
    return head + "Next: make worker_init_fn cheaper (what it opens, loads or imports)."


def _iter_start(p: dict, said: str) -> str:
    """The epoch start held by iter() itself (STARTUP_ITER_SHARE)."""
    cpu = (f", the main thread on a CPU for {pct(p['iter_cpu_share'])} of that"
           if p.get("iter_cpu_share") is not None else "")
    code = (f" (its code: {code_where(p['sampler_code'])})" if p.get("sampler_code") else "")
    workers = (f", and starts the {p['num_workers']} worker processes" if p.get("num_workers")
               else "")
    if p.get("num_workers") and p.get("sampler_library"):
        return _worker_start(p, said, cpu)
    # At num_workers=0 a generator sampler's __iter__ runs at the first
    # next(), inside the first fetch: that draw is counted with iter().
    what = ("iter() on the loader and the sampler's first draw took" if p.get("num_workers") == 0
            else "iter() on the loader itself took")
    return (said + f"{what} {pct(p['iter_share'])} of it{cpu}. "
            "iter() runs in the main process before any batch is made: it draws the first "
            f"index lists from the sampler, whose __iter__ runs there{code}{workers}; "
            "persistent_workers and more workers leave that as it is. Next: time "
            "iter(loader.batch_sampler) and its first next() alone; work the sampler does "
            "each epoch (sorting, grouping, reading an index) costs once if done in its "
            "__init__.")


def _worker_start(p: dict, said: str, cpu: str) -> str:
    """iter() held the start where the sampler is torch's own (library
    code): of what iter() does, the workers' start is what takes time.
    torch's SequentialSampler drew 8 index lists in 0.02 ms where iter()
    took 60-90 ms to start 4 workers on 2 busy CPUs, and the line named
    the sampler (helpers 41A and 41B, 4 of 15 runs)."""
    head = (said + f"iter() on the loader itself took {pct(p['iter_share'])} of it{cpu}. "
            f"iter() starts the {p['num_workers']} worker processes and draws their first "
            f"index lists from torch's own sampler ({code_where(p['sampler_code'])}, "
            "library code whose draws take microseconds): starting the workers holds it. ")
    if p["epochs"] >= 2 and p.get("recreated"):
        return head + _STARTED_ANEW + ("Next: persistent_workers=True to pay it once, or "
                                       "fewer workers (each is a process to start), and "
                                       + _COMPARE_EPOCHS)
    if p["epochs"] >= 2:
        return head + ("The workers persist, so the first epoch alone pays it: a one-off; "
                       "fewer workers start sooner on a busy host.")
    return head + ("In this one-epoch recording that is a one-off: a run of several epochs "
                   "pays it once with persistent_workers=True, and fewer workers start "
                   "sooner on a busy host; record more steps before judging the loader.")


def _epoch_start_next(p: dict) -> str:
    each = (f"{plural(p['epochs'], 'epoch')}, {fmt_s(p['mean_s'])} each on average"
            if p["mean_s"] is not None else plural(p["epochs"], "epoch"))
    said = f"Epoch starts hold {pct(p['share'])} of the wall time ({each}): "
    if p["epochs"] < 2:
        # One epoch: a short run, but a start-up part that is measured
        # is still named (a 2 s worker_init_fn at 96% of the start read
        # only "record more steps", helper 39A, 5 of 5).
        said = (f"The start (iter() and the first batches) holds {pct(p['share'])} of the "
                "wall time of this one-epoch recording: ")
        if (p.get("iter_share") or 0.0) > STARTUP_ITER_SHARE:
            return _iter_start(p, said)
        if (p.get("init_share") or 0.0) > STARTUP_INIT_SHARE and p.get("init_s") is not None:
            return _init_start(p, said)
        return (said + "a short run, whose steady state is a small part of it; record more "
                "steps before judging the loader, and check what start-up does if real runs "
                "are this short.")
    if (p.get("iter_share") or 0.0) > STARTUP_ITER_SHARE:
        return _iter_start(p, said)
    if (p.get("init_share") or 0.0) > STARTUP_INIT_SHARE and p.get("init_s") is not None:
        return _init_start(p, said)
    # Filling: the first batches cost what later ones do, in CPU and in
    # their own time (make time less the wait for a core): a first
    # __getitem__ that sleeps 300 ms on a lazy open costs 1.4x the CPU of
    # later ones, and is no filling (helper 34B, 1 of 9 runs).
    filling = all(p.get(k) is not None and p[k] < attribution.BUSIER_RATIO
                  for k in ("first_cpu_ratio", "first_work_ratio"))
    if (p.get("making_share") or 0.0) > STARTUP_MAKING_SHARE and filling:
        # Every epoch starts with no batch made: its first fetch waits for
        # a whole batch, the workers all making their first at once (6
        # workers on 2 cores, samples of 5 ms of CPU each: "the dataset's
        # work at each epoch's first samples" in 9 of 9 runs, helper 33A).
        return (said + f"for {pct(p['making_share'])} of it the awaited worker was still "
                "making the epoch's first batches, which cost what later ones do "
                f"({p['first_cpu_ratio']:.1f}x their CPU): the pipeline filling, since every "
                "epoch starts with no batch made and its first fetch waits for a whole one, "
                f"{plural(p['num_workers'] or 1, 'worker')} making their first at once. A cheaper "
                "batch shortens it, and longer epochs make it a smaller share; no setting of "
                "the epoch's first indices is to blame.")
    if p["epochs"] >= 2 and (p.get("making_share") or 0.0) > STARTUP_MAKING_SHARE:
        making = (said + f"for {pct(p['making_share'])} of it the awaited worker was still "
                  "making the epoch's first batches: ")
        if p["recreated"]:
            # Workers started anew each epoch make each epoch's first
            # batches as their own first: a cost of each new worker (a
            # lazy open in its first __getitem__) and one of the epoch's
            # first indices read alike here.  Indices 0-47 slow each epoch
            # read "persistent_workers=True pays that start-up once" (4 of
            # 4, helper 32B); a 300 ms open in each worker's first
            # __getitem__ read "persistent_workers=True would not remove
            # it" (6 of 6, helper 34B), which it did (epoch 1's start
            # 11-20 ms against 331-389).
            return (making + "work each new worker does first (the workers start anew every "
                    "epoch: a file opened, an index loaded or a lazy import in its first "
                    "__getitem__) or the dataset's work at each epoch's first indices; this "
                    "run cannot tell the two apart. Next: record two or more epochs with "
                    "persistent_workers=True and compare the runs (traceml.compare): a start "
                    "that then shrinks after epoch 0 was each worker's first work, one that "
                    "stays is the first indices' (time __getitem__ on them against later "
                    "ones).")
        return (making + "the dataset's work at each epoch's first samples (what "
                "__getitem__ does at those indices, a file or cache opened per epoch), not "
                "the workers' start-up (they persist). Next: time __getitem__ on each "
                "epoch's first indices against later ones.")
    if p["recreated"]:
        return (said + f"the DataLoader starts its {p['num_workers']} workers anew every "
                "epoch (persistent_workers=False); persistent_workers=True pays that start-up "
                "once. Next: record a few epochs with persistent_workers=True and compare the two "
                "runs (traceml.compare).")
    if p["recreated"] is False:
        return (said + "the workers persist, so it is each epoch's first batches: iter(), "
                "the sampler and the workers' first batch; look at what runs once per epoch.")
    return (said + "the first fetch of each epoch holds it (iter(), the dataset's or the "
            "sampler's set-up); look at what runs once per epoch.")


def stuck_sentence(ev: dict) -> str:
    """One stuck fetch (an item of evidence.stuck)."""
    who = ""
    if ev["oldest_rank"] is not None:
        who = f" for batch rank {ev['oldest_rank']}"
        if ev["worker"] is not None:
            who += f" held by worker {ev['worker']}"
            if ev["pid"]:
                who += f" (pid {ev['pid']}, state {ev['state'] or '?'}"
                if ev["worker_cpu_s_during_wait"] is not None:
                    who += f", {ev['worker_cpu_s_during_wait']:.2f} CPU-s during the wait"
                who += ")"
    if ev["still_waiting"]:
        status = "still waiting"
    elif ev["step"] is not None:
        status = "then returned a batch"
    else:
        # No step begins at the stuck fetch: it ended without a batch.
        status = "then ended without a batch (an exception, or the loop stopped)"
    return (f"STUCK: fetch {ev['step_in_epoch']} of epoch {ev['epoch']} waited "
            f"{fmt_s(ev['waited_s'])}{who}; {status}.")


def first_line(s: dict) -> str:
    """The first line of a report: source, steps, epochs, wall time."""
    if s["steps"] == 0:
        if s["source"] == "probes" and not s.get("sources"):
            return "traceml · nothing recorded yet"
        head = s.get("headline") or {}
        return (f"traceml · {s['source']} · no steps yet"
                + (headline_part(head) if head.get("label") == RAISED else ""))
    return (
        f"traceml · {s['source']} · {plural(s['steps'], 'step')} in "
        f"{plural(s['epochs'], 'epoch')} · {fmt_s(s['wall_s'])} wall"
        + headline_part(s.get("headline"), s.get("wall_s"))
    )


def headline_part(head: Optional[dict], wall_s: Optional[float] = None) -> str:
    """" · EPOCH-START: epoch starts hold 86% of the wall time" (or STUCK)
    for the first line; empty for a STEADY run."""
    if not head or head["label"] == STEADY:
        return ""
    if head["label"] == WORKER_EXITED:
        exited = head.get("exited")
        return (f" · {WORKER_EXITED}: " + dead_worker_line(exited) if exited
                else f" · {WORKER_EXITED}")
    if head["label"] == RAISED:
        r = head.get("raised")
        return (f" · {RAISED}: " + raised_line(r, head.get("longest_wait_s")) if r
                else f" · {RAISED}")
    if head["label"] == STUCK:
        if head["code"] == HEADLINE_STUCK_NOW:
            return f" · {STUCK}: a fetch is stuck now"
        if head["code"] == HEADLINE_ONE_FETCH and wall_s:
            return (f" · {STUCK}: one fetch waited {fmt_s(head['longest_wait_s'])}, "
                    f"{pct(head['longest_wait_s'] / wall_s)} of the wall time")
        return (f" · {STUCK}: a fetch waited {fmt_s(head['longest_wait_s'])} "
                f"(stuck after {fmt_s(head['stuck_after_s'])})")
    return (f" · {EPOCH_START}: epoch starts hold "
            f"{pct(head['epoch_start_share'])} of the wall time")


def _epoch_start_cause(loader: Optional[dict]) -> str:
    if not loader:
        return "includes iter()"
    if loader.get("num_workers") == 0:
        return "iter() and the first batch, made in the main process"
    if loader.get("persistent_workers"):
        return "iter() and the workers' first batches; persistent workers start once"
    return "iter() and worker start-up"


def epoch_start_line(s: dict) -> Optional[str]:
    """The epoch-start fetches, kept out of the statistics; None without."""
    es = s["epoch_start"]
    if not es["count"]:
        return None
    w = es["input_wait_s"]
    return (
        f"epoch start: {es['count']} first fetch{'es' if es['count'] != 1 else ''} "
        f"({_epoch_start_cause(s.get('loader'))}) "
        f"mean {fmt_s(w['mean'])}, max "
        f"{fmt_s(w['max'])}; not in the table above"
    )
