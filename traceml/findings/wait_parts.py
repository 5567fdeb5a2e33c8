"""What the loop's input wait was made of, as measured (traceml.wait_split),
and which part is the largest.

The model: a fetch's wait is the sum of its parts (the awaited worker
making the batch, the loop's thread on a CPU receiving or making it, the
thread waiting for a core, the batch in transit); an experiment shortens
one part, so the next step is the one the largest measured part calls for.
No threshold: the verdict is the part with the most of the wait.
"""

from __future__ import annotations

from typing import Optional

from ..fmt import code_where, fmt_s, pct, plural
from ._types import Finding, Words

# The parts that are the workers' production (traceml.wait_split's names:
# the awaited worker making the batch, on a core or waiting for one).
PRODUCTION_PARTS = ("worker_making", "worker_cpu_wait")
# The parts that are a made batch crossing to the loop (the main process
# receiving it, the batch in transit, its sender waiting for a core): paid
# per batch a worker makes, none at num_workers=0.
RECEIVING_PARTS = ("main_cpu", "in_transit", "transit_cpu_wait")
# A made batch held while another worker ran Python (wait_split's
# BEHIND_PART): the workers' own work, though no worker was making the
# awaited batch.
BEHIND_WORKER = "behind_worker"
# The main process's other threads on a CPU in the wait (wait_split's
# OTHERS_PART): no loader setting shortens it.
OTHER_THREADS = "other_threads"
# The loop's thread in the DataLoader's sampler inside the fetch
# (wait_split's SAMPLER_PART): no num_workers shortens it either.
SAMPLER = "sampler"

# The parts' names in the report, and what each calls for.
PART_NAMES = {
    "worker_making": "a worker still making the batch",
    "worker_cpu_wait": "the worker making the batch waiting for a core",
    "main_cpu": "the main process on a CPU inside the fetch",
    "cpu_wait": "the main process waiting for a core",
    "host_cpu_wait": ("the loop or the awaited worker waiting for a core that other programs "
                      "held (their CPU in the waits, from /proc/stat)"),
    "other_threads": ("the main process's other threads on a CPU while the loop waited (a "
                      "thread holding the GIL, the pin-memory thread)"),
    "others_cpu_wait": ("the main process's other threads waiting for a core while the "
                        "loop waited (the index queues' feeders sending the workers their "
                        "indices; a thread preempted holding the GIL holds the loop)"),
    "sampler": ("the main process in the sampler's next() (the DataLoader draws each batch's "
                "indices here, inside the fetch, at any num_workers)"),
    "transit_cpu_wait": ("the awaited worker's threads waiting for a core while its batch was "
                         "in transit (its queue's feeder sending it, the fd sharer, the GIL "
                         "holder)"),
    "behind_worker": ("the batch made but not yet sent while another worker made a batch on a "
                      "CPU (the workers send under one lock, each sender needing its own "
                      "worker's GIL, which that worker's Python holds)"),
    "in_transit": "the batch made but not yet here (queued, sent, a worker waiting to send it)",
    "asleep": "the main process asleep (I/O, locks, or workers not timed)",
}

PART_NEXT = {
    "worker_making": ("the workers' production: more workers, or cheaper samples (the "
                      "slow-code and slow-sample lines say which)"),
    "worker_cpu_wait": ("a core for the workers: fewer processes than cores (a lower "
                        "num_workers), or a quieter host, compared on step time "
                        "(traceml.compare)"),
    # The main process's CPU inside a fetch is the sampler's next() (a
    # custom Sampler or batch_sampler runs here, not in the workers),
    # receiving the batch (a cost per tensor as much as per byte), or work
    # an iterator leaves here: the parts are not told apart by the clock,
    # so the next step is the experiment that does (a slow sampler with
    # 128-byte batches was told "fewer or smaller tensors").
    "main_cpu": ("the main process's own work in the fetch: the sampler's next() (a custom "
                 "Sampler or batch_sampler runs in the main process), receiving the batch "
                 "(unpickling and rebuilding its tensors, a cost per tensor), or work an "
                 "iterator leaves here; time the sampler alone (iterate "
                 "loader.batch_sampler): what it does not explain is receiving, cheaper with "
                 "fewer tensors per batch"),
    "cpu_wait": ("a core for the main process: fewer processes than cores (a lower "
                 "num_workers), or a quieter host"),
    "host_cpu_wait": ("a quieter host: the same loop with what else runs stopped, compared "
                      "on step time (traceml.compare); the loader itself is not what to "
                      "change"),
    "sampler": ("the sampler: it runs in the main process at any num_workers, so more "
                "workers leave this wait as it is; time it alone (iterate "
                "loader.batch_sampler) and make its next() cheaper (what it reads, waits on "
                "or computes per batch)"),
    "others_cpu_wait": ("a core for the main process's threads: fewer processes than cores "
                        "(a lower num_workers), or a quieter host, compared on step time "
                        "(traceml.compare)"),
    "transit_cpu_wait": ("a core for the workers' threads that send the batches: fewer "
                         "processes than cores (a lower num_workers), or a quieter host, "
                         "compared on step time (traceml.compare)"),
    # A worker running Python holds its GIL, which its queue's feeder
    # needs to send; the feeders send under one lock, so that worker's
    # slowness holds the others' made batches.  The switch interval is the
    # experiment that tells the GIL from the rest: a 30 ms pure-Python
    # sample every 13th index read 35-41 % of the wait in transit, 0 %
    # with the workers' interval at 0.2 ms.
    "behind_worker": ("the workers' Python: a worker making a batch in Python keeps its "
                      "GIL from its queue's sender, which holds the lock every worker sends "
                      "under; cheaper samples shorten it (the slow-code and slow-sample lines "
                      "say which), and worker_init_fn=lambda _: sys.setswitchinterval(2e-4) "
                      "tells it apart: a wait that falls with it was the GIL"),
    "in_transit": ("the transfer: the same loop with fewer processes than cores (a lower "
                   "num_workers): a wait that falls was workers waiting for a core; one that "
                   "stays is the transfer itself, cheaper with fewer or smaller tensors per "
                   "batch"),
    # The loop's thread slept while others of its process ran: one
    # holding the GIL (pure Python in a thread of the user's, a C call that
    # keeps it) delays the loop's every step back to Python; the
    # pin-memory thread's copy is the hand-over itself.
    "other_threads": ("what the main process's other threads do: a thread of yours (a "
                      "logger, a writer, a prefetcher) that holds the GIL keeps the loop "
                      "from taking its batch (py-spy dump --pid <main pid> names it; move "
                      "its work into a process, or stop it and compare with "
                      "traceml.compare); with pin_memory=True the pin-memory thread copies "
                      "each batch (fewer bytes per batch shorten it)"),
    "asleep": ("what the loop sleeps on: I/O, a lock, or workers whose timing is off "
               "(the worker lines say why)"),
}


def largest(split: Optional[dict]) -> Optional[tuple[str, float]]:
    """(part, its share of the split's wait) of the largest part of a
    ``wait_split.split`` result; None without one or without any wait."""
    if not split or not split.get("wait_s"):
        return None
    parts = split["parts_s"]
    name = max(parts, key=lambda k: parts[k])
    return name, parts[name] / split["wait_s"]


def making_fraction(split: Optional[dict]) -> Optional[float]:
    """The share of the split's wait during which the awaited worker was
    making the batch, on a core or runnable (the production, and the part
    of the host's share that was the worker waiting for a core:
    ``host_of_workers_s``); None without a split with worker timing.
    Beside a CPU hog, lock-step workers sharing a core made their stalls'
    batches 28% on it and 68% waiting for one the hog held."""
    prod = production_fraction(split)
    if prod is None:
        return None
    return prod + split.get("host_of_workers_s", 0.0) / split["wait_s"]


def second_part(split: Optional[dict]) -> Optional[dict]:
    """{part, share} of the largest part after the host's
    (``host_cpu_wait``) where it is at least half the host's part: the
    job's own share of a wait the host leads; None otherwise."""
    if not split or not split.get("wait_s"):
        return None
    parts = split["parts_s"]
    host = parts.get("host_cpu_wait")
    rest = {k: v for k, v in parts.items() if k != "host_cpu_wait"}
    if not host or not rest:
        return None
    name = max(rest, key=lambda k: rest[k])
    if rest[name] < 0.5 * host:
        return None
    return _with_sampler({"part": name, "share": rest[name] / split["wait_s"]}, split)


def _with_sampler(out: dict, split: dict) -> dict:
    """``out`` ({part, share, ...}) with ``sampler_share`` where its part is
    the main CPU and the split timed the sampler apart: measured, not a
    suspect to time ("time the sampler alone" beside "the sampler 0%",
    helper 36B)."""
    if out["part"] == "main_cpu" and SAMPLER in split["parts_s"]:
        out["sampler_share"] = split["parts_s"][SAMPLER] / split["wait_s"]
    return out


def production_fraction(split: Optional[dict]) -> Optional[float]:
    """The workers' production (``worker_making`` and ``worker_cpu_wait``:
    the awaited worker making the batch, on a core or waiting for one that
    the job's own processes held; the share other programs held is
    ``host_cpu_wait``, not production) as
    a fraction of the split's wait; None without a split with worker
    timing.  Where it is
    known, input_bound.diagnose reads the production from it rather than
    from the worker timing's overlap alone: a worker making a batch while
    the loop's thread is itself on a CPU or waiting for a core does not
    make the loop wait (measured on 8 cheap workers beside a CPU hog: the
    overlap put 40% of the wait in production, the clocks 4%)."""
    if not split or "worker_making" not in split["parts_s"] or not split["wait_s"]:
        return None
    return sum(split["parts_s"].get(k, 0.0) for k in PRODUCTION_PARTS) / split["wait_s"]


# The loop's thread waiting for a core, the job's share and the host's,
# and the awaited worker's threads waiting for one to send its batch: one
# cause (the cores are full), which the verdict weighs as one part.
CORE_WAIT_PARTS = ("cpu_wait", "host_cpu_wait", "others_cpu_wait", "transit_cpu_wait")
# Other programs' share of the waits for a core past which the host is
# their cause: a third, where the job's own processes (workers beyond the
# cores) hold the rest; without other programs the wait is the job's own
# oversubscription, which fewer workers shorten.
HOST_CORE_SHARE = 1.0 / 3.0


def _causes(parts: dict) -> dict:
    """The non-production parts with the waits for a core as one, and a
    made batch held behind another worker's Python counted with the
    transit it was measured out of: the verdict (HAND-OVER, HOST-BOUND)
    weighs the made batches' wait as one, and its largest part names the
    next step (:func:`next_for`)."""
    out = {k: v for k, v in parts.items()
           if k not in PRODUCTION_PARTS and k not in CORE_WAIT_PARTS}
    if BEHIND_WORKER in out:
        out["in_transit"] = out.get("in_transit", 0.0) + out.pop(BEHIND_WORKER)
    core = sum(parts.get(k, 0.0) for k in CORE_WAIT_PARTS if k in parts)
    if any(k in parts for k in CORE_WAIT_PARTS):
        out["core_wait"] = core
    return out


def host_leads(split: Optional[dict]) -> bool:
    """Whether the split's largest cause is the host's (input_bound.
    diagnose's HOST-BOUND): the waits for a core (the loop's thread's,
    ``cpu_wait`` and ``host_cpu_wait`` together: one cause, the cores
    full) more than the workers' production and at least each other part,
    and other programs holding at least a third of them (HOST_CORE_SHARE).
    Split three ways, contention lost to "in transit" in 23 of 26 HAND-OVER
    readings of healthy loops beside CPU hogs (host 35% and the loop's own
    9% against in transit 40%; host 25% and own 29% against 27%)."""
    parts = (split or {}).get("parts_s") or {}
    host = parts.get("host_cpu_wait")
    if not host or host < HOST_CORE_SHARE * sum(parts.get(k, 0.0) for k in CORE_WAIT_PARTS):
        return False
    production = sum(parts.get(k, 0.0) for k in PRODUCTION_PARTS)
    causes = _causes(parts)
    core = causes.pop("core_wait")
    return core > production and all(core >= v for v in causes.values())


# The wait the loop would keep without the host's part holds it (this
# share of step time or more: input_bound's INPUT_BOUND_SHARE, repeated
# here as the families import no other family's constants): the loader's
# own wait, whatever the host adds.
LOADER_OWN_SHARE = 0.20


def host_explains(split: Optional[dict], input_share: Optional[float],
                  body: Optional[dict] = None) -> bool:
    """Whether taking the host's part out of the step would leave the loop
    under LOADER_OWN_SHARE input-bound.  With r the input share, h the
    host's fraction of the wait (``host_cpu_wait``) and c the host's
    fraction of the compute (``body``: wait_split.body_split of the
    steps, its ``cpu_wait`` times its ``host_share``: the loop's thread
    waiting for a core that other programs held, 0 where unread), the
    share without the host is r (1 - h) / (r (1 - h) + (1 - r) (1 - c)):
    the host's seconds leave the wait and the compute alike.  The model:
    other programs' CPU delayed the job one for one, and no more.  Where
    the rest still holds the loop, the wait is the loader's and the host
    only stretches it.  Batches of 1,200 small tensors waited 94% of the
    step, the host's part 52%, and read HOST-BOUND, "the host's wait,
    not the loader's" (helper 28B, 12 of 12 runs); without the host's
    part the share is 88%.  Slow samples every 7th index beside 6 CPU
    hogs waited 50% of the step, 89% of it the host's, while the compute
    waited for a core 71% of its time; taking the host out of the wait
    alone left 10% (HOST-BOUND, 2 of 2 runs), out of both about 27%,
    against 44-45% on a quiet host (helper 63).  True without the share
    or without a host part (nothing to take out)."""
    parts = (split or {}).get("parts_s") or {}
    wait = (split or {}).get("wait_s")
    if input_share is None or not wait or not parts.get("host_cpu_wait"):
        return True
    r, h = float(input_share), min(1.0, parts["host_cpu_wait"] / wait)
    own = r * (1.0 - h)
    left = own + (1.0 - r) * (1.0 - compute_host_fraction(body))
    return left <= 0.0 or own / left < LOADER_OWN_SHARE


def compute_host_fraction(body: Optional[dict]) -> float:
    """The share of the compute (``body``: wait_split.body_split of the
    steps, with its ``host_share``) during which the loop's thread waited
    for a core that other programs held; 0 where any of it is unread."""
    total = (body or {}).get("compute_s")
    queued = ((body or {}).get("parts_s") or {}).get("cpu_wait")
    share = (body or {}).get("host_share")
    if not total or not queued or share is None:
        return 0.0
    return min(1.0, max(0.0, queued * float(share) / total))


def workers_outrun_cores(production: Optional[dict], body: Optional[dict],
                         cpus: Optional[int]) -> bool:
    """Whether the workers' CPU a batch needs more cores than the host
    would give them with no other program running: then the loop waits on
    any host of these cores, and the wait is the loader's (INPUT-BOUND),
    however much other programs stretch it now (a HOST-BOUND "not the
    loader's" would send the user to a quiet host that leaves the wait).

    The model: the loop takes a batch per ``pace`` s, its compute less the
    part it waited for a core (``body``: wait_split.body_split of the
    compute, measured on the loop's thread) plus the hand-over; the
    workers need (CPU a batch) / pace cores; the host gives them ``cpus``
    less what the loop's own thread keeps busy (its CPU in the compute
    over the pace).  ``production``: worker_timing's block, whose
    ``model`` means (s) give the CPU a batch, the step, the wait and the
    hand-over.  False where any input is unmeasured."""
    model = (production or {}).get("model") or {}
    cpu, step, wait = model.get("cpu_s"), model.get("step_s"), model.get("wait_s")
    if not cpu or step is None or wait is None or not cpus or not body:
        return False
    total = body.get("compute_s") or 0.0
    if total <= 0:
        return False
    parts = body.get("parts_s") or {}
    compute = max(step - wait, 0.0)
    quiet = compute * (1.0 - parts.get("cpu_wait", 0.0) / total)
    pace = quiet + (model.get("handover_s") or 0.0)
    if pace <= 0:
        return True
    main_cores = compute * parts.get("main_cpu", 0.0) / total / pace
    return cpu / pace > cpus - min(main_cores, 1.0)


def production_leads(split: Optional[dict]) -> Optional[bool]:
    """Whether the workers' production (:func:`production_fraction`) is
    at least each other cause of the split's wait as the verdict weighs
    them (:func:`_causes`: the waits for a core as one, a made batch held
    behind another worker's Python with the transit); None without a
    split with worker timing.  Where it is not, the awaited batches were
    mostly made already: starting them earlier (a deeper look-ahead)
    hides none of that wait."""
    made = production_fraction(split)
    if made is None:
        return None
    causes = _causes(split["parts_s"])
    return all(made * split["wait_s"] >= v for v in causes.values())


def other_largest_fraction(split: Optional[dict], host_aside: bool = False) -> Optional[float]:
    """The largest of the parts other than the workers' production (the
    waits for a core counted as one), as a fraction of those parts
    together (None: no split with worker timing, or no such wait).
    input_bound.diagnose scales the wait the workers' production does not
    explain by it, so HAND-OVER is read against the largest measured part
    of the hand-over, not against the hand-over's sum.  ``host_aside``:
    other programs' part (``host_cpu_wait``) is left out of the candidates
    (still counted in the sum): where the host leads but does not explain
    the wait (host_explains), the loader's own wait is read by its own
    parts, and a host that only stretches it is not a hand-over.  A slow
    sample every 37th index, the host 44% of the wait and the workers
    making 41%, read HAND-OVER, "more workers will not shorten this wait",
    where 4 workers took the stalls away (helper 31B)."""
    got = _weighed_causes(split, host_aside)
    if got is None:
        return None
    rest, total = got
    return max(rest.values()) / total if total > 0 else None


def _weighed_causes(split: Optional[dict], host_aside: bool) -> Optional[tuple[dict, float]]:
    """(the parts other than the workers' production as the verdict weighs
    them, :func:`_causes`, with other programs' part out of the candidates
    where ``host_aside``; their sum before that), or None without a split
    with worker timing."""
    if not split or "worker_making" not in split["parts_s"]:
        return None
    parts = split["parts_s"]
    rest = _causes(parts)
    total = sum(rest.values())
    if host_aside and "core_wait" in rest:
        rest["core_wait"] -= parts.get("host_cpu_wait", 0.0)
    return rest, total


def main_work_leads(split: Optional[dict], host_aside: bool = False) -> bool:
    """Whether the largest of the parts other than the workers' production
    (as :func:`other_largest_fraction` weighs them) is the sampler's
    next(), the DataLoader drawing indices in the main process: the
    loader's own work, not the batch's hand-over (input_bound.diagnose's
    ``main_leads``).  Another thread holding the GIL is not: the batch
    waits made, to be received (sim-handover-other_threads)."""
    got = _weighed_causes(split, host_aside)
    if got is None or not got[0] or max(got[0].values()) <= 0:
        return False
    return max(got[0], key=got[0].get) == SAMPLER


# The other threads' part is read on every wrapped loop and is about 0 in
# most: the line names it where it reaches the 0.5% that pct() shows as
# more than "0%".
OTHERS_SHOWN = 0.005


def wait_parts_line(s: dict) -> Optional[str]:
    """The measured parts of the input wait, over every clocked steady
    fetch and over the clocked stalls; None when nothing was clocked."""
    wp = s.get("wait_parts")
    if not wp or not wp.get("all"):
        return None

    def parts(sp: dict) -> str:
        # Parts under OTHERS_SHOWN of the wait are counted, not named: ten
        # parts named twice made a 771-character line (helper 36B).
        total = sp["wait_s"]
        if not total > 0:
            return ", ".join(f"{_SHORT[k]} -" for k in sp["parts_s"])
        shown = [f"{_SHORT[k]} {pct(v / total)}" for k, v in sp["parts_s"].items()
                 if v >= OTHERS_SHOWN * total]
        rest = sum(1 for v in sp["parts_s"].values() if v < OTHERS_SHOWN * total)
        # (Each under OTHERS_SHOWN: pct() shows it as 0%.)
        return ", ".join(shown + ([f"{plural(rest, 'other part')} {pct(0.0)}"] if rest else []))

    text = (f"input wait by part ({plural(wp['all']['fetches'], 'clocked fetch', 'clocked fetches')}): "
            f"{parts(wp['all'])}")
    if wp.get("stalls") and wp["stalls"]["fetches"] < wp["all"]["fetches"]:
        text += (f"; in the {plural(wp['stalls']['fetches'], 'clocked stall')}: "
                 f"{parts(wp['stalls'])}")
    if not wp["all"].get("runq_known"):
        text += " (no run-queue times from this kernel: a wait for a core reads as CPU or sleep)"
    return text


def compute_parts_line(s: dict) -> Optional[str]:
    """The measured parts of the step's body (its compute), over the
    clocked steady steps; None when none was clocked."""
    c = (s.get("wait_parts") or {}).get("compute")
    if not c or not c["compute_s"]:
        return None
    total = c["compute_s"]
    parts = ", ".join(f"{_BODY_SHORT[k]} {pct(v / total)}" for k, v in c["parts_s"].items())
    return (f"compute by part ({plural(c['steps'], 'clocked step')}, the loop's thread from "
            f"its batch to the next fetch): {parts}")


_BODY_SHORT = {"main_cpu": "on a CPU", "cpu_wait": "waiting for a core",
               "off_cpu": "off CPU (GPU sync, I/O, sleep)"}


def notes(s: dict) -> list[Finding]:
    """The measured parts' notes: ``host_waits`` and
    ``compute_waits_for_core`` (see :func:`host_waits` and
    :func:`compute_waits`)."""
    return host_waits(s) + compute_waits(s)


def host_waits(s: dict) -> list[Finding]:
    """``host_waits`` where clocked fetches waited past the stall line only
    through waits for a core inside them (the loop thread's own, and the
    awaited worker's threads' while its batch was in transit): the stall
    rule reads each clocked fetch's wait less those (the loader's wait;
    ``build.clock_split.queued_in_fetch``), so those are not counted as stalls,
    and this says so.  Nothing otherwise."""
    hw = (s.get("stalls") or {}).get("host_waits")
    if not hw:
        return []
    return [Finding("host_waits", {**hw, "threshold_s": s["stalls"]["threshold_s"]})]


def compute_waits(s: dict) -> list[Finding]:
    """``compute_waits_for_core`` where the training step's own wait for a
    core, per clocked step, exceeds the loop's input wait per clocked
    fetch: the cores the workers (or other programs) hold cost the model
    more than the loader makes it wait, which the input share alone does
    not show.  Nothing otherwise, or without clocks."""
    wp = s.get("wait_parts") or {}
    c, a = wp.get("compute"), wp.get("all")
    if not c or not a or not c.get("runq_known"):
        return []
    queued = c["parts_s"]["cpu_wait"] / c["steps"]
    waited = a["wait_s"] / a["fetches"]
    if queued <= waited:
        return []
    return [Finding("compute_waits_for_core", {
        "cpu_wait_s": queued, "compute_share": c["parts_s"]["cpu_wait"] / c["compute_s"],
        "input_wait_s": waited,
        "num_workers": (s.get("loader") or {}).get("num_workers"),
        "cpus": (s.get("host") or {}).get("usable_cpus")})]


def _compute_words(p: dict) -> str:
    who = "other programs"
    if p.get("num_workers"):
        who = f"its {plural(p['num_workers'], 'worker')} or other programs"
    cores = f" on {p['cpus']} CPUs" if p.get("cpus") else ""
    return (f"The training step itself waited {fmt_s(p['cpu_wait_s'])} a step for a core "
            f"({pct(p['compute_share'])} of its compute), more than the loop waited for "
            f"input ({fmt_s(p['input_wait_s'])} a fetch): {who} held the cores the model "
            f"needed{cores}. Judge a change of num_workers by step time, not by input wait "
            "alone (traceml.compare shows both).")


WORDS: dict[str, Words] = {
    "host_waits": lambda p: (
        f"{plural(p['count'], 'fetch', 'fetches')} waited past the stall line "
        f"({fmt_s(p['threshold_s'])}) only because the loop's thread, or the awaited "
        f"worker's threads sending its batch, waited for a core inside "
        f"{'it' if p['count'] == 1 else 'them'} ({fmt_s(p['queued_s'])} on average): the "
        "cores' waits, not the loader's, so they are not counted as stalls (the stall rule "
        "reads each clocked fetch's wait less its waits for a core)."),
    "compute_waits_for_core": _compute_words,
}


_SHORT = {"worker_making": "worker making", "worker_cpu_wait": "worker waiting for a core",
          "main_cpu": "main CPU", "cpu_wait": "main waiting for a core",
          "host_cpu_wait": "other programs holding the cores",
          "other_threads": "main's other threads",
          "others_cpu_wait": "main's other threads waiting for a core", "sampler": "the sampler",
          "transit_cpu_wait": "worker sending, waiting for a core",
          "behind_worker": "behind another worker's Python",
          "in_transit": "in transit", "asleep": "asleep"}


def next_for(split: Optional[dict], input_share: Optional[float] = None,
             body: Optional[dict] = None) -> Optional[dict]:
    """The numbers of the largest part's next step, {part, share (of the
    split's wait)}; None without a split.  Where the largest is the host's
    and the rest would still hold the loop (not :func:`host_explains`,
    with the steps' compute split ``body``), the largest of the others,
    with the host's share set aside as ``past_host``: the loader's own
    wait is what to shorten (a quieter host leaves it), and the sentence
    says what it set aside."""
    got = largest(split)
    if got is None:
        return None
    out = {"part": got[0], "share": got[1]}
    if got[0] == "host_cpu_wait" and not host_explains(split, input_share, body):
        rest = {k: v for k, v in split["parts_s"].items() if k != "host_cpu_wait"}
        if rest and max(rest.values()) > 0:
            name = max(rest, key=lambda k: rest[k])
            out = {"part": name, "share": rest[name] / split["wait_s"], "past_host": got[1]}
    return _with_sampler(out, split)


def past_host(p: dict) -> str:
    """"Besides other programs holding the cores (N%), " where
    :func:`next_for` set the host's larger part aside, else ""."""
    if not p.get("past_host"):
        return ""
    return f"Besides other programs holding the cores ({pct(p['past_host'])}), "


def _largest_lead(p: dict, of: str) -> str:
    """"[Besides other programs ... (N%), t]he largest measured part of
    ``of`` (M%)": where :func:`next_for` set the host's larger part aside,
    the sentence says so ("The largest measured part (23%)" beside "other
    programs holding the cores 47%" read as a contradiction, helper 33B,
    3 of 7)."""
    return (past_host(p) + ("the" if p.get("past_host") else "The")
            + f" largest measured part of {of} ({pct(p['share'])})")


def wait_for_core_words(p: dict) -> str:
    """The next step where the largest measured part of the input wait is
    the loop's thread waiting for a core (advice's ``wait_for_core``)."""
    procs = (f" ({plural(p['num_workers'], 'worker')} on {p['cpus']} CPUs, and whatever "
             "else runs)" if p.get("num_workers") and p.get("cpus") else "")
    return (_largest_lead(p, "the input wait") + " is the loop's thread waiting for a core "
            "inside the fetch: the CPUs were taken, by the workers "
            f"or by other programs{procs}. Next: the same loop with fewer processes than "
            "cores (a lower num_workers, or what else runs stopped), compared on step time "
            "(traceml.compare).")


# At num_workers=0 nothing is handed over: the main process's CPU inside
# the fetch is the dataset and collate_fn making the batch there.
MAIN_CPU_NO_WORKERS_NEXT = (
    "the dataset's own work: at num_workers=0 the main process makes each batch inside "
    "the fetch (__getitem__ and collate_fn; the slow-code line says where its CPU goes), "
    "so num_workers >= 1 moves it to worker processes, which pays only where a batch costs "
    "more to make than its hand-over from a worker then costs the main process (about a "
    "millisecond for a small batch on a 2-core host: traceml.sweep(make_loader, "
    "num_workers=(0, 1, 2)) measures both), or a cheaper batch shortens it")


# At num_workers=0 the fetch makes the batch, so the main process's other
# threads on a CPU inside it are first the dataset's own (a thread pool in
# __getitem__ hands its decode to them): a dataset whose 6 ms decode ran
# in a ThreadPoolExecutor read "97% the main process's other threads ...
# a thread of yours that holds the GIL" and lost its num_workers step
# (helper 29B).  A thread of the user's holding the GIL reads the same.
OTHER_THREADS_NO_WORKERS_NEXT = (
    "the batch's making: at num_workers=0 the fetch makes the batch, so threads the "
    "dataset starts (a thread pool in __getitem__ or collate_fn) run inside it, as would a "
    "thread of yours holding the GIL; num_workers >= 1 moves the dataset's threads into "
    "the worker processes (traceml.sweep(make_loader, num_workers=(0, 1, 2))), and a wait "
    "that stays is a thread of yours (py-spy dump --pid <main pid> names it)")


def part_name(part: str, num_workers: Optional[int] = None) -> str:
    """The measured part ``part`` in words (PART_NAMES), with
    ``num_workers`` where it changes them (other_threads at 0 workers: no
    pin-memory thread there, the dataset's own threads instead)."""
    if part == OTHER_THREADS and num_workers == 0:
        return ("the main process's other threads on a CPU while the loop waited (threads "
                "the dataset starts, or one holding the GIL)")
    return PART_NAMES[part]


# The main process's CPU in the fetch where the sampler's next() was timed
# apart (its own part): the sampler is measured, not a suspect to time
# ("time the sampler alone" beside "the sampler 1%", helper 30A).
MAIN_CPU_SAMPLER_TIMED_NEXT = (
    "the main process's own work in the fetch past the sampler (timed apart, "
    "{sampler}): receiving the batch (unpickling and rebuilding its tensors, a cost per "
    "tensor) or work an iterator leaves here; receiving is cheaper with fewer tensors per batch")


# What makes receiving a batch cheaper where each batch is one tensor or
# array already (the wrap iterator counts them, evidence.batch_bytes):
# its cost is per tensor crossing processes (about 1.6 ms for one small
# tensor on a 2-core host), so "fewer tensors per batch" has nothing left
# to cut (a one-tensor batch was told so, helper 36B), and fewer, larger
# batches pay it less often.
ONE_TENSOR_RECEIVING = ("fewer, larger batches (a larger batch_size): each batch is "
                        "one tensor already, and the cost is paid per tensor sent")
# The per-tensor remedies of PART_NEXT and MAIN_CPU_SAMPLER_TIMED_NEXT that
# a one-tensor batch reads as ONE_TENSOR_RECEIVING.
_PER_TENSOR = ("fewer or smaller tensors per batch", "fewer tensors per batch")


def part_next(part: str, num_workers: Optional[int] = None,
              sampler_share: Optional[float] = None,
              tensors: Optional[float] = None) -> str:
    """What shortens the measured part ``part`` (PART_NEXT), with
    ``num_workers`` where it changes the answer (main_cpu and other_threads
    at 0 workers), ``sampler_share`` (the sampler's timed part of the
    wait; None: not timed) where main_cpu no longer holds the sampler, and
    ``tensors`` (the median count of tensors a batch holds; None: not
    counted): at most one, receiving is made cheaper by fewer, larger
    batches (ONE_TENSOR_RECEIVING), not by fewer tensors."""
    if part == "main_cpu" and num_workers == 0:
        return MAIN_CPU_NO_WORKERS_NEXT
    if part == "main_cpu" and sampler_share is not None:
        text = MAIN_CPU_SAMPLER_TIMED_NEXT.format(sampler=pct(sampler_share))
    elif part == OTHER_THREADS and num_workers == 0:
        return OTHER_THREADS_NO_WORKERS_NEXT
    else:
        text = PART_NEXT[part]
    return for_tensors(text, tensors)


def for_tensors(text: str, tensors: Optional[float]) -> str:
    """``text`` with its per-tensor remedy (_PER_TENSOR) read as
    ONE_TENSOR_RECEIVING where a batch holds at most one tensor
    (``tensors``, the median count; None: not counted, ``text`` as is)."""
    if tensors is not None and tensors <= 1:
        for said in _PER_TENSOR:
            text = text.replace(said, ONE_TENSOR_RECEIVING)
    return text


# collate_fn holds most (more than this share) of the workers' batch time
# (the per-sample timing): the batches are made cheaper there, not in the
# samples ("cheaper samples (the slow-code and slow-sample lines say
# which)" beside collate_fn 99% of batch time and neither line printed,
# helper 37B).
COLLATE_MOST = 0.5


def making_next(collate_share: Optional[float], lines_said: bool) -> str:
    """What shortens the ``worker_making`` part, from what was measured:
    collate_fn where it holds most of the batch time (COLLATE_MOST), the
    evidence lines where they were printed (``lines_said``), else where to
    look."""
    if collate_share is not None and collate_share > COLLATE_MOST:
        return (f"the workers' production: collate_fn holds {pct(collate_share)} of their "
                "batch time, so a cheaper collate_fn (or more workers)")
    if lines_said:
        return PART_NEXT["worker_making"]
    return ("the workers' production: more workers, or cheaper batches (profile the "
            "dataset's __getitem__ and collate_fn)")


def next_of(p: dict) -> str:
    """What shortens the part of ``p`` ({part, num_workers, sampler_share,
    tensors, collate_share, lines_said}, as next_for and the advice give
    it): :func:`making_next` for the workers' making, else
    :func:`part_next`."""
    if p["part"] == "worker_making":
        return making_next(p.get("collate_share"), p.get("lines_said", True))
    return part_next(p["part"], p.get("num_workers"), p.get("sampler_share"), p.get("tensors"))


def sampler_where(p: dict) -> str:
    """" (its __iter__: `Cls.__iter__` in `dir/file.py:12`)" where the
    sampler's code is known (``sampler_code``), else ""."""
    code = p.get("sampler_code")
    return f" (its code: {code_where(code)})" if code else ""


def largest_sentence(p: dict) -> str:
    """The sentence naming the largest measured part (``p`` from
    :func:`next_for`) and what it calls for."""
    return (_largest_lead(p, "the wait") + " is "
            f"{part_name(p['part'], p.get('num_workers'))}: what shortens it is {next_of(p)}"
            f"{sampler_where(p)}.")
