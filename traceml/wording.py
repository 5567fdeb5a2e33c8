"""Every sentence traceml prints: rule descriptions, next steps, evidence,
notes, the lines of a report, compare and sweep sentences, worded from the
codes and numbers of :mod:`traceml.policy` and :mod:`traceml.evidence`.

Thresholds are quoted from the policy constants, never restated as
literals, so a changed constant changes the sentence.  Nothing here
measures or decides, and layout (order, markers, tables, HTML) is
:mod:`traceml.render`'s.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Optional

from . import policy
from .evidence import NO_WORKERS
from .fmt import fmt_s, pct, plural

# --- thresholds in words -------------------------------------------------------


def _of_the(share: float) -> str:
    """"half the" for 0.5, else "40% of the"."""
    return "half the" if share == 0.5 else f"{pct(share)} of the"


def _part(share: float) -> str:
    """"half" for 0.5, else "40%"."""
    return "half" if share == 0.5 else pct(share)


def _floor(the: str = "") -> str:
    """The stall floor: "max(1 ms, 20% of median step)"."""
    return (f"max({fmt_s(policy.STALL_FLOOR_S)}, {pct(policy.STALL_FLOOR_STEP_SHARE)} "
            f"of {the}median step)")


def _p(percentile: float) -> str:
    return f"p{percentile:g}"


# --- diagnosis, stall threshold, shape ------------------------------------------


def diagnosis_rule(label: str, share: Optional[float],
                   unmarked: Optional[tuple] = None,
                   mean_step_ns: Optional[float] = None) -> str:
    """The rule behind a diagnosis (policy.diagnose's label, share,
    unmarked steps and too-short mean step)."""
    if label == policy.NO_DATA and unmarked is not None:
        return (f"fetch_done() was not called in {unmarked[0]} of {unmarked[1]} steady-state "
                "steps, so their input wait is unknown (recorded as 0); call "
                "traceml.fetch_done() once the batch is in hand, between step_begin() and "
                "step_end()")
    if label == policy.NO_DATA and mean_step_ns is not None:
        return (f"steps average {fmt_s(mean_step_ns * 1e-9)}, under "
                f"{fmt_s(policy.MIN_MEAN_STEP_NS * 1e-9)}: traceml's own timing (up to "
                f"{fmt_s(policy.TIMING_OWN_COST_NS * 1e-9)} a step) could move the input share "
                f"across {pct(policy.COMPUTE_BOUND_SHARE)}, so none is read")
    if label == policy.NO_DATA:
        return "no steady-state steps recorded"
    said = f"input wait is {pct(share, 1)} of step time"
    top, low = pct(policy.INPUT_BOUND_SHARE), pct(policy.COMPUTE_BOUND_SHARE)
    if label == policy.INPUT_BOUND:
        return (f"{said} (>= {top}: TensorFlow's input-pipeline analyzer calls this "
                "highly input-bound)")
    if label == policy.HAND_OVER:
        return (f"{said} (>= {top}), but under {top} of step time was spent waiting "
                "while the awaited worker was making batches: the loop waits for batches "
                "already made")
    if label == policy.COMPUTE_BOUND:
        return (f"{said} (< {low}: TensorFlow's input-pipeline analyzer calls this "
                "not input-bound)")
    return (f"{said} ({low} to {top}: moderately input-bound in TensorFlow's "
            "input-pipeline analyzer)")


def _threshold_basis(code: str, all_slow: bool) -> str:
    if code == policy.RULE_FLOOR:
        return f"floor {_floor()}"
    if code == policy.RULE_STEP:
        return (f"max({fmt_s(policy.STALL_FLOOR_S)}, {_of_the(policy.STALL_MIN_STEP_SHARE)} "
                "median step)")
    if code == policy.RULE_RATIO:
        return f"{policy.STALL_MIN_RATIO:g}x the median wait (no two separate groups)"
    if code == policy.RULE_P95:
        return f"{_of_the(policy.STALL_P95_SHARE)} {_p(policy.STALL_PERCENTILE)} wait"
    return ("Otsu split between slow and stalled fetches" if all_slow
            else "Otsu split between fast and slow fetches")


def stall_rule(rule: policy.StallRule) -> str:
    """The stall threshold rule that applied (policy.stall_threshold_ns)."""
    slow = f"every fetch is slow ({_p(policy.ALL_SLOW_PERCENTILE)} wait > floor)"
    if rule.code == policy.RULE_GIVEN:
        return f"given: wait > {rule.given_s:g} s"
    if rule.code == policy.RULE_NO_STEPS:
        return "auto: no steady-state steps"
    if rule.code == policy.RULE_ALL_SLOW:
        return f"auto: {slow}; floor {_floor()}"
    if rule.code == policy.RULE_ALL_SLOW_SPLIT:
        return (f"auto: {slow} and a separate group of large waits stands out (at least "
                f"{policy.MIN_GROUP_ON_TOP}, at most {_of_the(policy.HEAVY_TAIL_MAX_STALL_SHARE)} "
                f"fetches, typically {policy.BIMODAL_MIN_RATIO:g}x the rest); "
                + _threshold_basis(rule.basis, True))
    return "auto: " + _threshold_basis(rule.code, False)


def shape_rule(code: str) -> str:
    """The rule behind a shape (policy.shape's code)."""
    most = _part(policy.HEAVY_TAIL_MAX_STALL_SHARE)
    return {
        policy.SHAPE_NO_STALLS: "no fetch waited past the stall threshold",
        policy.SHAPE_EVERY_SLOW: (f"at least {pct(1 - policy.ALL_SLOW_PERCENTILE / 100)} of "
                                  "fetches wait past the stall threshold"),
        policy.SHAPE_MOST_STALL: f"more than {most} of the fetches are stalls",
        policy.SHAPE_SLOW_BETWEEN: ("the fetches between stalls are slow too (median wait "
                                    f"above {_floor('the ')}), stalls on top"),
        policy.SHAPE_HEAVY_TAIL: f"at most {most} of the fetches are stalls; the rest are fast",
        policy.SHAPE_SLOW_MEDIAN: (
            f"the median fetch is itself slow (a stall, or past {_floor('the ')} "
            "beside stalls; without stalls, past max("
            f"{fmt_s(policy.STALL_FLOOR_S)}, {_of_the(policy.STALL_MIN_STEP_SHARE)} median "
            f"step), or past {_floor('the ')} in a wait that trends): not mostly fast"),
    }[code]


# --- next steps ---------------------------------------------------------------------


def _uniformly_slow(p: dict) -> str:
    of_step = f", {pct(p['step_share'])} of the median step" if p["step_share"] else ""
    every = p["every"]
    return (f"{'Every fetch waits' if every else 'Most fetches wait'} "
            f"(median {fmt_s(p['median_s'])}{of_step}): "
            + ("slow input on every batch." if p["on_top"] and every
               else "slow input on most batches." if p["on_top"]
               else "uniformly slow input, not a few large stalls."))


def _workers_in(p: dict) -> str:
    return f" (num_workers={p['num_workers']})" if p["num_workers"] is not None else ""


def _stuck_next(p: dict) -> str:
    waited = fmt_s(p["waited_s"]) if p["waited_s"] is not None else "-"
    if p["now"]:
        return ("A fetch is stuck now (see the STUCK line): whatever the steady state says, "
                "the run is waiting there; look at the worker holding the batch "
                "(py-spy dump --pid PID) before anything else.")
    return (f"A fetch waited {waited}, past the stuck watch's {fmt_s(p['stuck_after_s'])}: "
            "that one fetch holds the run's time, whatever the steady state says; find what "
            "it waited on (a lock, a network read, a worker that hung) before tuning the "
            "loader.")


def _epoch_start_next(p: dict) -> str:
    each = (f"{plural(p['epochs'], 'epoch')}, {fmt_s(p['mean_s'])} each on average"
            if p["mean_s"] is not None else plural(p["epochs"], "epoch"))
    said = f"Epoch starts hold {pct(p['share'])} of the wall time ({each}): "
    if p["epochs"] < 2:
        return (f"The start (iter() and the first batches) holds {pct(p['share'])} of the "
                "wall time of this one-epoch recording: a short run, whose steady state is "
                "a small part of it; record more steps before judging the loader, and "
                "check what start-up does if real runs are this short.")
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


def _trend_next_line(p: dict) -> str:
    grows = p["label"] == policy.RISING
    per_step = abs(p["slope_ms_per_step"]) * 1e-3
    text = (f"The input wait {'grows' if grows else 'shrinks'} steadily, "
            f"{'+' if grows else '-'}{fmt_s(per_step)} per step (median "
            f"{fmt_s(p['first_tenth_median_s'])} in the first tenth of the steps, "
            f"{fmt_s(p['last_tenth_median_s'])} in the last)")
    if p.get("slope_ms_per_epoch") is not None:
        text += (f", {'+' if p['slope_ms_per_epoch'] > 0 else '-'}"
                 f"{fmt_s(abs(p['slope_ms_per_epoch']) * 1e-3)} per epoch")
    if grows:
        return text + (": state that grows per step, such as a cache or list kept in the "
                       "dataset, a leak or memory fragmentation; more workers would only "
                       "hide a cost that keeps growing.")
    return text + (": a warm-up (caches filling, files coming into the page cache) "
                   "rather than a steady cost.")


def _hand_over_next(p: dict) -> str:
    busy = (f"busy making batches {pct(p['busy_share'])} of the time"
            if p.get("busy_share") is not None else "mostly idle")
    ready = (f", and {pct(p['ready_before_fetch'])} of the batches were made before their "
             "fetch began" if p.get("ready_before_fetch") is not None else "")
    # Large batches get their own sentence (policy.handover's code).
    return (f"Input is {pct(p['share'])} of step time, but the loop waited on a worker still "
            f"making its batch for only {pct(p['production_share'])} of step time; the "
            f"workers were {busy}{ready}. More workers will not shorten this wait: it is the "
            "hand-over (the batch queued in its worker, sent, unpickled and mapped here, or a "
            f"process waiting for a core; median fetch {fmt_s(p['median_s'])}). Next: the same "
            "loop with fewer processes than cores (a lower num_workers): a wait that falls was "
            "processes waiting for a core; one that stays is the transfer itself, cheaper with "
            "fewer or smaller tensors per batch.")


_NEXT: dict[str, Callable[[dict], str]] = {
    "stuck": _stuck_next,
    "epoch_start": _epoch_start_next,
    "trend": _trend_next_line,
    "trend_next": lambda p: (
        "Next: compare early and late steps (report.input_wait_ns[:n] against [-n:]) and "
        "time the dataset's __getitem__ at the start and the end of a run; watch the "
        "workers' memory over the run." if p["label"] == policy.RISING else
        "Next: skip a warm-up before judging the steady state (traceml.reset() after the "
        "first steps), or record longer."),
    "outliers": lambda p: (
        (f"One outlier ({fmt_s(p['max_s'])}, the median fetch {fmt_s(p['median_s'])}): a "
         "single long wait is a hiccup (a preempted process, a GC pause), not a pattern"
         if p["count"] == 1 else
         f"{p['count']} outliers (largest {fmt_s(p['max_s'])}, the median fetch "
         f"{fmt_s(p['median_s'])}): too small together to be stalls"
         + (f" ({pct(p['cost_share'])} of the step time)"
            if p["cost_share"] is not None else ""))
        + ". Record longer to see whether it recurs."),
    "periodic_slow": lambda p: (f"The slow fetches recur every {p['period']} steps"
                                f"{_workers_in(p)}."),
    "cpus_saturated": lambda p: (
        f"The workers already keep the {p['cpus']} usable CPUs busy ({p['cores']:.1f} cores "
        f"at num_workers={p['num_workers']}): more workers cannot help. Next: make each "
        "batch cheaper (profile the dataset's __getitem__ and collate_fn) or give the job "
        "more CPUs."),
    "slow_samples_one_loader": lambda p: (
        f"Next: with num_workers={p['num_workers']} one batch is loaded at a time, so no "
        "batch can overtake another (in_order changes nothing): time the dataset's "
        "__getitem__ for the stalled steps (report['stalls']['steps']) to find the slow "
        "samples, then try more workers to hide them."),
    "no_data": lambda p: ("Nothing recorded yet: iterate traceml.wrap(loader), then call "
                          "traceml.report()."),
    "too_few_steps": lambda p: (f"Only {plural(p['steps'], 'steady-state step')}: too few to "
                                "judge the input's shape; record at least "
                                f"{p['least']}."),
    "compute_bound": lambda p: (
        f"The GPU waits for input {pct(p['share'])} of its time (the host's waits overlap "
        "its work): input is not the bottleneck; profile the step itself." if p.get("gpu") else
        f"Between epoch starts the loop waits for input {pct(p['share'])} of the time: there, "
        "input is not the bottleneck." if p.get("steady_only") else
        f"The loop waits for input {pct(p['share'])} of the time: input "
        "is not the bottleneck; profile the step itself."),
    "compute_bound_stalls": lambda p: (f"Still, {pct(p['step_share'])} of steps hold "
                                       f"{pct(p['wait_share'])} of the input wait: stalls "
                                       "matter only if step-time spikes do."),
    "uniformly_slow": _uniformly_slow,
    "periodic_on_top": lambda p: (f"On top, larger stalls recur every {p['period']} steps"
                                  f"{_workers_in(p)}."),
    "stalls_on_top": lambda p: (f"On top, {p['count']} larger stall"
                                f"{'s' if p['count'] != 1 else ''}"
                                + (" at irregular intervals." if p["pattern_known"]
                                   else ", too few to show a pattern.")),
    "try_workers": lambda p: ("num_workers=0 loads in the main process: next, try num_workers "
                              ">= 1 (traceml.sweep(make_loader, num_workers=(0, 1, 2, 4)))."),
    "vary_workers_around": lambda p: (
        f"Next: vary num_workers around {p['num_workers']} (traceml.sweep(make_loader, "
        "num_workers=...)): if the wait falls as workers are added, the workers are the "
        "limit; if not, look at work in the main process."),
    "wrap_and_sweep": lambda p: ("Next: wrap the DataLoader itself and sweep num_workers "
                                 "(traceml.sweep) to see whether more workers shorten the wait."),
    "hand_over": _hand_over_next,
    "spread_wait": lambda p: (
        f"No fetch waited past the stall threshold, yet input is {pct(p['share'])} of step "
        f"time, spread over every fetch (median {fmt_s(p['median_s'])}): a cost paid per "
        "batch (handing it over from the workers, collate, pin_memory) or a loader only "
        "just keeping up."),
    "vary_workers_or_prefetch": lambda p: (
        "Next: vary num_workers or prefetch_factor (traceml.sweep): a wait that stays put "
        "is per-batch hand-over cost; one that falls with more workers is loader throughput."),
    "heavy_tailed": lambda p: (
        f"{pct(p['step_share'])} of steps hold {pct(p['wait_share'])} of the input wait: "
        f"mostly fast input with large stalls (the other fetches' median "
        f"{fmt_s(p['calm_median_s'])}, the stalls' {fmt_s(p['stall_median_s'])})."),
    "too_few_stalls": lambda p: (f"Only {plural(p['count'], 'stall')}: too few to tell a "
                                 "pattern; record more steps."),
    "overtaking_round": lambda p: (
        f"With in_order=False, {p['overtaking']} deliveries overtook a slower batch, yet the "
        f"stalls still recur every {p['period']} steps: not one slow sample blocking the "
        "line, but the workers' round; next, check worker CPU against storage reads."),
    "overtaking": lambda p: (f"With in_order=False, {p['overtaking']} deliveries overtook a "
                             "slower batch: single slow samples hold batches back."),
    "lockstep": lambda p: (
        f"The stalls recur every {p['period']} steps and num_workers={p['num_workers']}: "
        "consistent with the workers finishing their batches together (lock-step), so the "
        "cost is per-batch work inside the workers."),
    "vary_workers_then_in_order": lambda p: (
        "Next: vary num_workers (traceml.sweep(make_loader, num_workers="
        f"{tuple(p.get('grid') or policy.sweep_grid(None))})); if "
        "the period follows, compare in_order=(True, False) to see whether batches "
        "overtake, then check worker CPU against storage reads in the slow intervals."),
    "period_not_workers": lambda p: (
        f"The stalls recur every {p['period']} steps while num_workers={p['num_workers']}: a "
        "period that does not follow the workers points at something that recurs by step "
        f"(a slow sample every {p['period']} batches, a periodic flush or log write)."),
    "confirm_period": lambda p: (
        f"Next: vary num_workers (traceml.sweep) to confirm the period stays at "
        f"{p['period']}, and look at what runs every {p['period']} steps."),
    "period": lambda p: f"The stalls recur every {p['period']} steps.",
    "wrap_to_compare_period": lambda p: (
        "Next: wrap the DataLoader itself so its num_workers can be compared with the "
        f"period, or look at what recurs every {p['period']} steps."),
    "irregular": lambda p: (
        f"The stalls have no regular period (the commonest gap, "
        f"{plural(p['modal_gap'], 'step')}, holds {pct(p['modal_share'])} of gaps): they "
        "point at particular slow samples or outside contention rather than the worker "
        "round."),
    "compare_in_order": lambda p: (
        "Next: compare in_order=(True, False) (traceml.sweep(make_loader, in_order=(True, "
        "False))): if later batches overtake a slow one, single slow samples are to blame; "
        "then check worker CPU against storage reads."),
}


def next_steps(summary: dict) -> list[str]:
    """The next-step sentences of a report summary (policy.next_steps)."""
    return [_NEXT[code](params) for code, params in policy.next_steps(summary)]


# --- notes of a report ------------------------------------------------------------------

_NOTES: dict[str, Callable[[dict], str]] = {
    "dropped": lambda p: (f"{p['count']} steps were dropped: the step store could not grow "
                          "(out of memory); statistics cover the recorded steps only"),
    "unmarked": lambda p: (f"{p['steps']} of {p['steady']} steady-state steps have no "
                           "fetch_done(): recorded with no input wait and their fetch counted "
                           "as compute, so the input wait and its share read low and those "
                           "steps' compute high"),
    "misuse": lambda p: (f"probe misuse: {p['key']} x{p['count']} "
                         f"(see help(traceml.{p['probe']}))"),
    "probe_open": lambda p: ("the last probe step is still open (it ends at step_end() or the "
                             "next step_begin()); not counted"),
    "no_fetch_yet": lambda p: "no fetch of this source has returned yet",
    "no_steps": lambda p: ("no steps recorded: iterate traceml.wrap(loader) or call "
                           "traceml.step_begin()/fetch_done()/step_end()"),
    "few_steps": lambda p: (f"only {p['steps']} steady-state steps: too few for the shape of "
                            "the input wait to mean much"),
    "oversubscribed": lambda p: (
        f"num_workers={p['num_workers']} exceeds the {p['cpus']} usable CPUs: workers share "
        "cores, so absolute stall lengths depend on contention"),
    "stuck_elsewhere": lambda p: (f"a fetch of {p['name']!r} is stuck now: see "
                                  f"report(source={p['name']!r})"),
    "unwatched": lambda p: (
        f"the sampler did not watch {_epochs(p['epochs'])} ({p['error']}): no worker or "
        "process readings and no stuck-fetch watch there; timings are complete"),
    "also_recorded": lambda p: ("also recorded: "
                                + ", ".join(f"{name!r} ({steps} steps)"
                                            for name, steps in p["others"])
                                + "; see report(source=name)"),
}


def _epochs(epochs: list[int]) -> str:
    """ "epoch 3", "epochs 0, 1, 2" or "4 epochs, 0 to 9" past five."""
    if len(epochs) == 1:
        return f"epoch {epochs[0]}"
    if len(epochs) <= 5:
        return "epochs " + ", ".join(str(e) for e in epochs)
    return f"{len(epochs)} epochs, {epochs[0]} to {epochs[-1]}"


def notes(items: Iterable[tuple[str, dict]]) -> list[str]:
    """The notes of a report, from (code, numbers) items."""
    return [_NOTES[code](params) for code, params in items]


# --- evidence -------------------------------------------------------------------------------

CAVEATS = (
    "Caveats: read_bytes 0 does not rule out page-cache effects (a cached "
    "read costs CPU, not storage); nothing here measures CPU cache misses "
    "or isolates the scheduler."
)
# Once the stalls did read from storage in earnest, the page-cache caveat
# is moot.
CAVEATS_WITH_READS = ("Caveats: nothing here measures CPU cache misses or isolates "
                      "the scheduler.")


def _rate(amount: float, wall: float) -> str:
    return f"{amount / wall / 1e6:.1f} MB/s" if wall > 0 else "-"


def _storage(code: str, p: dict) -> str:
    """CPU-side work versus storage reads (evidence._storage_finding)."""
    who = "the main process" if p["who"] == "main" else "the workers"
    was = "was" if p["who"] == "main" else "were"
    reads, faults = p["read_bytes"], p["major_faults"]
    if code == "cpu_no_reads_anywhere":
        return ("read_bytes 0 and major faults 0 in both: the cost is CPU-side "
                "dataset processing, not storage reads.")
    if code == "cpu_no_reads":
        return (f"No storage reads or major faults during stalls while {who} {was} "
                "busy: the stalls are CPU-side dataset processing.")
    lighter = {
        "none": "",
        "trace": (f"; it read only {reads / 1e3:.0f} kB with {faults:.0f} major "
                  f"fault{'s' if faults != 1 else ''}: a trace, not a storage bottleneck"),
        "lighter": (f"; its reads ({reads / 1e6:.1f} MB, {_rate(reads, p['wall_s'])}) were no "
                    f"heavier than outside the stalls "
                    f"({_rate(p['fast_read_bytes'], p['fast_wall_s'])})"),
    }.get(p["reads"], "")
    if code == "cpu_light_reads":
        return (f"During stalls {who} {was} busy{lighter}: the stalls are CPU-side "
                "dataset processing, not storage reads.")
    if code == "idle":
        elsewhere = ("a sleep, a lock, the network" if p["who"] == "main"
                     else "IPC, the main process, locks")
        return (f"During stalls {who} {was} mostly idle"
                + (" and read nothing from storage" if p["reads"] == "none" else lighter)
                + f": the wait lies elsewhere ({elsewhere}).")
    heavy = (f"{reads / 1e6:.1f} MB from storage ({_rate(reads, p['wall_s'])} against "
             f"{_rate(p['fast_read_bytes'], p['fast_wall_s'])} outside the stalls) with "
             f"{faults:.0f} major faults")
    if code == "storage":
        return (f"During stalls {who} read {heavy} while keeping few cores busy: storage "
                "reads are the suspect.")
    return (f"During stalls {who} {was} busy and also read {heavy}: both CPU work and "
            "storage may matter.")


def _cores(cores: float, runnable: Optional[float]) -> str:
    return f"{cores:.1f} cores busy" + (f", {runnable:.1f} runnable" if runnable is not None
                                        else "")


def _run_queue(p: dict) -> str:
    nw, cpus = p["num_workers"], p["cpus"]
    text = (f"Workers waited {p['runq_s']:.2f} s in the run queue during stalls (their "
            "main threads: schedstat holds no other): runnable but not running")
    if nw and cpus and nw > cpus:
        text += f" ({nw} workers on {cpus} CPUs)"
    elif nw and cpus:
        text += (f" although {nw} workers fit on {cpus} CPUs: other threads or processes, "
                 "the training loop's own included, competed for the CPUs")
    return text + ", which stretches each batch."


_UNTOLD = "CPU-side versus storage cannot be told apart here."

def _awaited_blocked(p: dict) -> str:
    held = _workers_list(p["workers"])
    return (f"The worker holding the awaited batch (worker {held}) was blocked during "
            "stalls: sleeping or waiting on I/O, a lock or the network (asleep in "
            f"{p['asleep']} of {p['readings']} readings, {p['cores']:.2f} cores busy).")


def _cpu_handover(p: dict) -> str:
    who = "the main process" if p["who"] == "main" else "the workers"
    was = "was" if p["who"] == "main" else "were"
    return (f"No storage reads to speak of during stalls while {who} {was} busy: CPU-side "
            f"work, which with {fmt_bytes(p['batch_bytes'])} batches includes collate's "
            "copy into shared memory, not only the samples' processing.")


_EVIDENCE: dict[str, Callable[[dict], str]] = {
    "main_unavailable": lambda p: f"Main-process counters unavailable ({p['why']}): {_UNTOLD}",
    "main_cpu": lambda p: (
        f"num_workers=0, so the dataset runs in the main process: slow intervals held "
        f"{p['cpu_s']:.2f} main-process CPU-s over {p['wall_s']:.2f} s ("
        f"{_cores(p['cores'], p['runnable'])}) against {p['fast_cpu_s']:.2f} over "
        f"{p['fast_wall_s']:.2f} s in fast ones ({p['fast_cores']:.1f} cores, the training "
        "step included)."),
    "worker_cpu": lambda p: (
        f"Slow intervals held {p['cpu_s']:.2f} worker-CPU-s over {p['wall_s']:.2f} s "
        f"({_cores(p['cores'], p['runnable'])}) against {p['fast_cpu_s']:.2f} over "
        f"{p['fast_wall_s']:.2f} s in fast ones "
        f"({_cores(p['fast_cores'], p['fast_runnable'])})."),
    "one_worker_busy": lambda p: (
        f"One worker stayed busy through the stalls ({p['cores']:.1f} cores) while the "
        "others had little to do: one slow batch held the line."),
    "storage_unavailable": lambda p: f"Storage counters unavailable ({p['why']}): {_UNTOLD}",
    "run_queue": _run_queue,
    "caveats": lambda p: CAVEATS_WITH_READS if p["reads_matter"] else CAVEATS,
    "awaited_blocked": _awaited_blocked,
    "cpu_handover": _cpu_handover,
}


def evidence_sentences(findings: Iterable[tuple[str, dict]]) -> list[str]:
    """What the worker (or main-process) counters say, from
    evidence.interval_findings."""
    return [_EVIDENCE[code](p) if code in _EVIDENCE else _storage(code, p)
            for code, p in findings]


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


# --- the lines of a report ------------------------------------------------------------
# How many distinct gaps the histogram line lists before "…".
GAPS_SHOWN = 12
# How many worker-PID changes the text lists one by one; past this it
# counts them and names the first and the last (a loader without persistent
# workers changes them every epoch: 1,000 epochs made a 20,000-character
# line).  Report.to_dict()["workers"]["pid_changes"] keeps every one.
PID_CHANGES_SHOWN = 3


def headline(s: dict) -> str:
    """The first line of a report: source, steps, epochs, wall time."""
    if s["steps"] == 0:
        if s["source"] == "probes" and not s.get("sources"):
            return "traceml · nothing recorded yet"
        return f"traceml · {s['source']} · no steps yet"
    return (
        f"traceml · {s['source']} · {s['steps']} steps in {s['epochs']} "
        f"epoch{'s' if s['epochs'] != 1 else ''} · {fmt_s(s['wall_s'])} wall"
        + headline_part(s.get("headline"))
    )


def headline_part(head: Optional[dict]) -> str:
    """" · EPOCH-START: epoch starts hold 86% of the wall time" (or STUCK)
    for the first line; empty for a STEADY run."""
    if not head or head["label"] == policy.STEADY:
        return ""
    if head["label"] == policy.STUCK:
        if head["code"] == policy.HEADLINE_STUCK_NOW:
            return f" · {policy.STUCK}: a fetch is stuck now"
        return (f" · {policy.STUCK}: a fetch waited {fmt_s(head['longest_wait_s'])} "
                f"(stuck after {fmt_s(head['stuck_after_s'])})")
    return (f" · {policy.EPOCH_START}: epoch starts hold "
            f"{pct(head['epoch_start_share'])} of the wall time")


def shape_line(s: dict) -> Optional[str]:
    """Shape, temporal structure and concentration of the stalls; None
    without a shape."""
    if not s.get("shape"):
        return None
    parts = [f"shape {s['shape']}"]
    trend = trend_part(s.get("trend"))
    if trend:
        parts.append(trend)
    tmp = s.get("temporal")
    if tmp is None:
        outliers = (s.get("stalls") or {}).get("outliers")
        parts.append(f"no stalls ({plural(outliers, 'outlier')})" if outliers else "no stalls")
    elif tmp["label"] == policy.TOO_FEW:
        parts.append(f"{policy.TOO_FEW} stalls for a temporal pattern")
    elif tmp["label"] == policy.EVERY_FETCH or tmp.get("period") == 1:
        # (A run saved before EVERY-FETCH existed may hold "PERIODIC" with
        # a period of 1: never said as a period.)
        parts.append(f"{policy.EVERY_FETCH}: every steady-state fetch waits")
    elif tmp["label"] == policy.PERIODIC:
        text = f"{policy.PERIODIC} every {tmp['period']} steps"
        if tmp.get("counted") == "bursts":
            text += " (counting back-to-back stalls as one burst)"
        evidence = []
        if tmp["autocorrelation"] is not None:
            evidence.append(f"wait autocorrelation {tmp['autocorrelation']:.2f} "
                            f"at lag {tmp['period']}")
        if tmp.get("p_value") is not None:
            evidence.append(f"p = {tmp['p_value']:.1g} against random stalls at this rate, "
                            f"< {policy.PERIOD_ALPHA:g}")
        if evidence:
            text += f" ({'; '.join(evidence)})"
        parts.append(text)
    else:
        parts.append(
            f"{policy.IRREGULAR} (commonest gap {tmp['modal_gap']} holds "
            f"{pct(tmp['modal_share'])} of gaps)"
        )
    conc = s.get("concentration") or {}
    if conc.get("stall_wait_share") is not None and s["stalls"]["count"]:
        parts.append(
            f"{pct(conc['stall_step_share'])} of steps hold "
            f"{pct(conc['stall_wait_share'])} of the input wait"
        )
    return " · ".join(parts)


def trend_part(trend: Optional[dict]) -> Optional[str]:
    """"wait RISING 1.2 ms -> 38 ms (+0.49 ms per step)" for the shape line;
    None without a trend."""
    if not trend:
        return None
    slope = trend["slope_ms_per_step"] * 1e-3
    return (f"wait {trend['label']} {fmt_s(trend['first_tenth_median_s'])} -> "
            f"{fmt_s(trend['last_tenth_median_s'])} (first to last tenth, "
            f"{'+' if slope > 0 else '-'}{fmt_s(abs(slope))} per step)")


def stall_lines(s: dict) -> list[str]:
    """The stall count at its threshold and rule, the cadence, and the
    histogram of gaps between stalls."""
    st = s["stalls"]
    lines = [
        f"{st['count']} of {s['steady_steps']} steady-state fetches waited "
        f"> {fmt_s(st['threshold_s'])} ({st['rule']})"
    ]
    if st.get("outliers"):
        cost = (pct(st["cost_share"]) + " of the step time"
                if st.get("cost_share") is not None else "")
        lines.append(
            f"{plural(st['outliers'], 'outlier')} above it, largest "
            f"{fmt_s(st['outlier_max_s'])}, not counted as stalls: "
            + (f"a lone wait (stalls come {policy.MIN_GROUP_ON_TOP} or more)"
               + (f", {cost}" if cost else "")
               if st["matter"] == policy.STALLS_LONE
               else f"together {cost or 'too little'}, under "
               f"{pct(policy.STALL_MIN_COST_SHARE)}"))
    cad = s["cadence"]
    tmp = s.get("temporal") or {}
    if cad["period"] is not None and cad["period"] > 1:
        text = f"cadence: a stall every {cad['period']} steps (modal gap)"
    elif tmp.get("label") == policy.EVERY_FETCH or cad["period"] == 1:
        text = "cadence: every fetch waits, no period"
    elif tmp.get("label") == policy.TOO_FEW:
        text = "cadence: too few stalls to tell"
    elif st["gaps"]:
        text = "cadence: no period between stalls"
    else:
        text = None
    if text and cad["num_workers"] is not None:
        text += f"; num_workers={cad['num_workers']}"
        if cad["matches_num_workers"] and cad["period"] is not None and cad["period"] > 1:
            text += ": the cadence follows num_workers"
        if cad["multiple_fraction"] is not None and cad["num_workers"] > 1:
            # Every gap is a multiple of 1: said only when it can fail.
            k = cad["num_workers"]
            text += (
                f" ({pct(cad['multiple_fraction'])} of gaps are "
                f"multiples of {k})"
            )
    if text:
        lines.append(text)
    if st["gap_histogram"]:
        shown = st["gap_histogram"][:GAPS_SHOWN]
        hist = "  ".join(f"{g}×{c}" for g, c in shown)
        more = " …" if len(st["gap_histogram"]) > GAPS_SHOWN else ""
        lines.append(f"gaps between stalls (steps×count): {hist}{more}")
    return lines


def _epoch_start_cause(loader: Optional[dict]) -> str:
    if not loader:
        return "includes iter()"
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


def evidence_lines(s: dict) -> list[str]:
    """Stuck fetches first, then what the worker counters say."""
    out = [stuck_sentence(ev) for ev in s.get("stuck") or []]
    w = s.get("workers")
    if w and w.get("evidence"):
        out.extend(w["evidence"])
    return out


def missing_framework(adapter: str, module: str, package: str) -> str:
    """The ImportError of an adapter whose framework is not installed."""
    return (f"{adapter} needs the {module!r} module, which is not installed: "
            f"pip install {package}")


def trainer_loader_line(loader: dict) -> str:
    """The head line of the Hugging Face callback's text file: the Trainer's
    loader, which its probe-placed steps do not carry."""
    return ("trainer loader (read at on_train_begin; the steps below are placed by "
            "TrainerCallback hooks): " + " ".join(f"{k}={v}" for k, v in loader.items()))


def hidden_loader_facts(wrapper: str, iterator: str) -> str:
    """Why a wrapped loader's worker PIDs and delivery order are not read
    (wrapping.hidden_facts): the ``unread`` entry of its loader facts."""
    return (f"worker PIDs, delivery order, worker batch timing: {wrapper} makes torch's "
            f"iterator in a {iterator} at its first fetch")


def untimed_wrap(max_sources: int) -> str:
    """The warning of a wrap that finds every source id in use."""
    return (f"traceml.wrap(): all {max_sources} source ids of this recorder hold recorded "
            "steps or live wrappers, so this wrap iterates untimed; call traceml.reset() "
            "(or Recorder.reset()), or wrap under a name so that each wrap continues "
            "one source")


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


def pid_changes_line(changes: list[dict], epochs: int) -> str:
    """The epochs whose worker PIDs changed: each one, or past
    PID_CHANGES_SHOWN their count among the epoch starts after the first,
    the first and the last."""
    def at(c: dict) -> str:
        return f"step {c['step']} (epoch {c['epoch']})"

    if len(changes) <= PID_CHANGES_SHOWN:
        return "worker PIDs changed at " + ", ".join(at(c) for c in changes)
    starts = max(epochs - 1, len(changes))
    return (f"worker PIDs changed at {len(changes)} of {starts} epoch starts after the "
            f"first, first at {at(changes[0])}, last at {at(changes[-1])} (each one in "
            "to_dict()['workers']['pid_changes'])")


def process_lines(s: dict) -> list[str]:
    """Host, delivery order, worker processes, sampler and unavailable
    counters."""
    out = []
    h = s.get("host")
    if h:
        out.append(f"host: {h['usable_cpus']} usable CPUs, start method "
                   f"{h['start_method'] or '-'}, torch {h['torch_version'] or '-'}")
    d = s.get("delivery")
    if d and d["known"]:
        out.append(f"delivery: in_order={d['in_order']}, {d['overtaking']} of {d['known']} "
                   "deliveries overtook a batch of lower rank")
    w = s.get("workers")
    if w:
        changes = w["pid_changes"]
        if changes:
            out.append(pid_changes_line(changes, len(w["pids_by_epoch"])))
        elif len(w["pids_by_epoch"]) > 1:
            out.append(f"worker PIDs stable across {len(w['pids_by_epoch'])} epochs")
        out.extend(dead_worker_line(e) for e in w["exited"])
        smp = w["sampler"]
        if smp["samples"]:
            share = smp["cpu_share"]
            out.append(f"sampler: {smp['samples']} readings every {fmt_s(smp['period_s'])}"
                       + (f", {pct(share, 2)} of one CPU" if share is not None else ""))
        elif smp.get("error") and smp["enabled"]:
            out.append(f"sampler: unavailable ({smp['error']}): timings only, no worker "
                       "or process evidence")
        if smp.get("readings_lost"):
            out.append(f"sampler: the ring dropped {smp['overwritten']} readings, some of this "
                       "run's; raise traceml.configure(sampler_capacity=...)")
        if smp.get("dropped_watch"):
            out.append(f"sampler: {smp['dropped_watch']} loops or processes could not be "
                       "watched (out of memory or over the process limit)")
        iv = w.get("intervals")
        if iv and iv["unavailable"]:
            # Worker counters of a loader without workers are not news.
            for name, why in iv["unavailable"].items():
                if why != NO_WORKERS:
                    out.append(f"{name}: unavailable ({why})")
    return out


def loader_line(s: dict) -> Optional[str]:
    """The DataLoader's settings; None for other iterables."""
    if not s["loader"]:
        return None
    return "loader: " + " ".join(f"{k}={v}" for k, v in s["loader"].items())


# --- compare ------------------------------------------------------------------------------


def verdict_why(v: policy.Verdict) -> str:
    """Why compare() gave its verdict (policy.compare_means)."""
    if v.label == policy.NO_DATA:
        which = {"both": "either run", "baseline": "the baseline", "run": "this run"}[v.missing]
        return f"no steady-state steps in {which}: no mean fetch to compare"
    delta = v.run_s - v.base_s
    return (f"mean fetch {fmt_s(v.base_s)} -> {fmt_s(v.run_s)} ({'+' if delta >= 0 else '-'}"
            f"{fmt_s(abs(delta))}; tolerance {fmt_s(v.tolerance_s)})")


BASELINE_WHY = "the baseline"


def compare_threshold(threshold_s: Optional[float]) -> str:
    """The line on which threshold compare() counted stalls at."""
    if threshold_s is None:
        return ("no stalls counted: the baseline has no steady-state steps to set "
                "the threshold")
    return f"stalls and stall gaps counted at the baseline's threshold, {fmt_s(threshold_s)}"


# --- sweep ---------------------------------------------------------------------------------


def condition(cond: dict) -> str:
    """A sweep condition as "num_workers=4 in_order=True"."""
    return " ".join(f"{k}={v}" for k, v in cond.items())


def sweep_correlation(c: dict, ignored: bool) -> str:
    """The line on num_workers against the stall period (sweep.correlation);
    ``ignored``: make_loader ignored num_workers somewhere.  Pearson r,
    slope and intercept are printed only beside "follows", where they
    support it (with fewer than policy.SWEEP_MIN_DISTINCT_WORKERS distinct
    num_workers they are not computed)."""
    shown = " ".join(f"{x}:{y}" for x, y in c.get("rows", []))
    rests = (f"over {plural(c['points'], 'condition')} with a period ({c['gaps']} stall gaps "
             f"in all; max(1, num_workers):period {shown})")
    least = policy.SWEEP_MIN_DISTINCT_WORKERS
    if c.get("follows") is True:
        fit = ("" if c["r"] is None else
               f"; Pearson r = {c['r']:.3f}, slope {c['slope']:.2f}, "
               f"intercept {c['intercept']:.2f}")
        return (f"num_workers vs stall period: the period follows num_workers (period == "
                f"max(1, num_workers) in every row, at {c['distinct_workers']} distinct "
                f"num_workers) {rests}{fit}")
    if c.get("follows") is False:
        why = ("the same at every num_workers: set by the data" if c.get("same_period")
               else f"period != max(1, num_workers) in {c['mismatched']} of {c['points']} rows")
        # Only a flat fit supports "set by the data"; r = 1.000 beside "does
        # not follow" (periods 3, 3, 6 at 1, 1, 2 workers) reads as agreement.
        fit = (f"; slope {c['slope']:.2f}, intercept {c['intercept']:.2f}"
               if c.get("same_period") and c["slope"] is not None else "")
        return (f"num_workers vs stall period: the period does not follow num_workers "
                f"({why}) {rests}{fit}")
    if c["distinct_workers"] < 2 and c["points"] >= 2:
        text = ("num_workers vs stall period: num_workers did not vary among the "
                "conditions with a period; nothing to correlate")
        if ignored:
            text += (" (counting the workers each loader was built with; "
                     "make_loader ignored num_workers, see below)")
        return text
    if c["distinct_workers"] >= 2:
        return (f"num_workers vs stall period: too few to tell: the period equals max(1, "
                f"num_workers) {rests}, but only {c['distinct_workers']} distinct num_workers "
                f"have a period; it takes {least} (any 2 points lie on a line)")
    return (f"num_workers vs stall period: too few to tell "
            f"({plural(c['points'], 'condition')} with a period, {c['distinct_workers']} "
            f"distinct num_workers; it takes {least} distinct num_workers with a period)")


_LEFT_OUT = {
    "error": lambda r: "error",
    "no_num_workers": lambda r: "no num_workers",
    "few_stalls": lambda r: (f"{plural(r['stalls'], 'stall')}, under "
                             f"{policy.MIN_STALLS_FOR_CADENCE}"),
    "every_fetch": lambda r: "a stall on every fetch: no period",
    "no_period": lambda r: f"{plural(r['stalls'], 'stall')} with no period",
}


def sweep_left_out(c: dict) -> Optional[str]:
    """The rows the correlation left out, each with its reason."""
    left = c.get("left_out") or []
    if not left:
        return None
    return "left out of the correlation: " + "; ".join(
        f"{condition(r['condition'])} pass {r['pass_']} {r['direction']} "
        f"({_LEFT_OUT[r['reason']](r)})" for r in left)


def sweep_ignored(pairs: list) -> Optional[str]:
    """(asked, built) num_workers pairs where make_loader ignored num_workers."""
    if not pairs:
        return None
    return ("make_loader ignored num_workers: "
            + ", ".join(f"num_workers={a} built a loader with {plural(b, 'worker')}"
                        for a, b in pairs)
            + "; the correlation uses the loaders' own num_workers")


def sweep_best(best: Optional[dict], rows: int) -> Optional[str]:
    """The condition with the lowest mean fetch (SweepResult.best())."""
    if best is None or rows < 2:
        return None
    text = f"lowest mean fetch: {condition(best['condition'])} ({fmt_s(best['mean_s'])})"
    if best["close"]:
        text += (f"; within {pct(policy.REL_TOL)} of it (no real difference): "
                 + ", ".join(best["close"]))
    return text


_SWEEP_NEXT: dict[str, Callable[[dict], str]] = {
    policy.SWEEP_KEEP_FEWEST: lambda p: (
        f"Next: keep {p['keep']} ({fmt_s(p['keep_mean_s'])}): "
        + ("it is the lowest mean fetch" if p["keep"] == p["best"]
           else f"the lowest, {p['best']} ({fmt_s(p['best_mean_s'])}), is within "
                f"{pct(p['tolerance'])} of it")
        + (f"; {', '.join(o for o in p['others'] if o != p['best'])} within "
           f"{pct(p['tolerance'])} too" if [o for o in p["others"] if o != p["best"]] else "")
        + (" (no real difference): more workers did not shorten the wait"
           if p["fewer_workers"] else " (no real difference)") + "."),
    policy.SWEEP_KEEP_BEST: lambda p: (
        f"Next: keep {p['best']}: its mean fetch, {fmt_s(p['best_mean_s'])}, is "
        f"{fmt_s(p['lead_s'])} under the next, {p['runner']} ({fmt_s(p['runner_mean_s'])}), "
        f"beyond {pct(policy.REL_TOL)}"
        + (f" and beyond the order effect ({fmt_s(p['order_spread_s'])})"
           if p["order_spread_s"] is not None else "") + "."),
    policy.SWEEP_UNDECIDED: lambda p: (
        f"Next: run again with passes=2 before choosing: {p['best']} leads {p['runner']} by "
        f"{fmt_s(p['lead_s'])}, no more than the order effect ({fmt_s(p['order_spread_s'])})."),
    policy.SWEEP_MORE_WORKERS: lambda p: (
        f"Even with {p['keep']} input is {pct(p['share'])} of step time (INPUT-BOUND), and the "
        "wait fell up to the most workers tried: try more where the host has cores for them "
        "(each run's report() has a prediction of the num_workers that keeps up)."),
    policy.SWEEP_STILL_INPUT: lambda p: (
        f"Even with {p['keep']} input is {pct(p['share'])} of step time (INPUT-BOUND): no "
        "condition of this sweep removes the wait; make each batch cheaper (each run's "
        "report() has a prediction of how much) or give the workers more cores."),
}


def sweep_next(items: list) -> list[str]:
    """The sentences of SweepResult.next_steps() (policy.sweep_next)."""
    return [_SWEEP_NEXT[code](params) for code, params in items]


def sweep_order(effects: list[dict]) -> Optional[str]:
    """Where forward and backward runs disagree (SweepResult.order_effects())."""
    if not effects:
        return None
    differ = [e for e in effects if e["differs"]]
    compared = [e for e in effects if e["verdict"] != policy.NO_DATA]
    if not compared:
        return ("forward and backward: no condition has steady-state steps on both "
                "sides to compare")
    if not differ:
        skipped = len(effects) - len(compared)
        return (f"forward and backward agree for all {len(compared)} conditions "
                f"(within compare's tolerance: {pct(policy.REL_TOL)} of the mean fetch "
                f"or {pct(policy.STEP_TOL)} of the step)"
                + (f"; {skipped} without steady-state steps to compare" if skipped else ""))
    several = len({e["pass_"] for e in effects}) > 1
    listed = "; ".join(
        condition(e["condition"]) + (f" pass {e['pass_']}" if several else "")
        + f" {fmt_s(e['forward_mean_s'])} forward vs {fmt_s(e['backward_mean_s'])} backward"
        for e in differ)
    return (f"order effect in {len(differ)} of {len(effects)} conditions: {listed}. "
            "Beyond compare's tolerance, so differences that size between conditions "
            "are not evidence; "
            + ("see whether they recur in every pass" if several
               else "passes=2 shows whether they recur"))


def sweep_short(rows: list[dict]) -> list[str]:
    """One line per requested step count that some row fell short of: the
    conditions whose loader ran out of batches first."""
    short: dict[int, list[str]] = {}
    for r in rows:
        asked, ran = r.get("steps_requested"), r.get("steps")
        if r["error"] or asked is None or ran is None or ran >= asked:
            continue
        cell = f"{condition(r['condition'])} ({ran})"
        if cell not in short.setdefault(asked, []):
            short[asked].append(cell)
    return [f"ran fewer batches than steps={asked}: " + ", ".join(cells)
            for asked, cells in short.items()]


def sweep_error(row: dict) -> str:
    return (f"error in {condition(row['condition'])} pass {row['pass_']} {row['direction']}: "
            f"{row['error']}")


SWEEP_INTERRUPTED = "(interrupted: the rows above are what was measured)"


def sweep_period(row: dict) -> str:
    """A sweep row's period cell: the period, "every" for a stall on every
    fetch (EVERY-FETCH: no period), else "-"."""
    if row.get("period") is not None:
        return str(row["period"])
    return "every" if row.get("temporal") == policy.EVERY_FETCH else "-"


def sweep_progress(done: int, total: int, row: dict) -> str:
    """The progress line of one condition when tqdm is not installed."""
    gap = row["period"] if row.get("period") is not None else "-"
    status = (f"error {row['error']}" if row["error"] else
              f"mean fetch {fmt_s(row['mean_s'])}, {row['stalls']} stalls, period {gap}")
    return (f"[traceml.sweep {done}/{total}] {condition(row['condition'])} "
            f"pass {row['pass_']} {row['direction']}: {status}")


# --- attribution, the awaited worker, batch bytes ------------------------------------

from .fmt import fmt_bytes  # noqa: E402


def _workers_list(ids) -> str:
    ids = sorted(ids)
    return ", ".join(str(i) for i in ids[:-1]) + (" and " if len(ids) > 1 else "") + str(ids[-1])


def _one_worker(p: dict) -> str:
    ratio = p["cpu_ratio"]
    busy = ("" if ratio is None
            else f", using {ratio:.1f}x the other workers' median CPU" if ratio >= 1
            else f", using {ratio:.1f}x the other workers' median CPU (it waits on something)")
    return (f"Worker {p['worker']} held {p['stalls']} of the {p['known']} stalls "
            f"({pct(p['own_share'])} of its batches stalled, few of the others'){busy}: "
            "one worker is slower than the rest, not the workers' round.")


def _stalls_against_made(p: dict) -> str:
    """How the stalls' own period stands to the slow samples' period (made
    slow in the workers): the same, a multiple (prefetch hid some), or
    none."""
    sp = p.get("stall_period")
    if sp is None:
        return "the stalls keep no period of their own"
    if sp == p["period"]:
        return f"the stalls recur every {sp} batches too"
    if sp % p["period"] == 0:
        return (f"the loop stalled on only some of them, every {sp} batches (prefetch made "
                "the others in time)")
    return f"the stalls recur every {sp} batches"


def _slow_made(p: dict) -> str:
    """SLOW-SAMPLE from the workers' make times (policy.made_period)."""
    return (f"The workers made {p['slow']} of {p['batches']} batches slow, "
            f"{pct(p['slow_on_residue'])} of them with rank % {p['period']} == {p['residue']}, "
            f"and {pct(p['share'])} of the stalls are among them; "
            f"{_stalls_against_made(p)}. Particular samples are slow, one in {p['period']}, "
            f"not a worker; next: time __getitem__ on the indices with rank % {p['period']} "
            f"== {p['residue']}.")


_EVIDENCED_NEXT: dict[str, Callable[[dict], str]] = {
    "one_worker": _one_worker,
    "split_shards": lambda p: (
        f"Next: look at worker {p['worker']}'s share of the data, not num_workers: with an "
        "IterableDataset, the shard it reads (split by get_worker_info().id) is larger or "
        "slower than the others'; balance the split."),
    "slow_sample": lambda p: (
        _slow_made(p) if p.get("period_from") == policy.PERIOD_FROM_MAKE_TIMES else (
            f"The stalled batches share rank % {p['period']} == {p['residue']} "
            f"({pct(p['share'])} of them) across {plural(p['workers'], 'worker')}: particular "
            "samples are slow, not a worker; next: time __getitem__ on those indices.")),
    "handover_main": lambda p: (
        f"Batches carry {fmt_bytes(p['bytes'])} each while the workers idled and the main "
        "process was busy during stalls: handing the batches over (receiving, rebuilding "
        "and freeing large tensors) is the cost, not the samples."),
    "handover_bytes": lambda p: (
        f"Batches carry {fmt_bytes(p['bytes'])} each (at least "
        f"{fmt_bytes(policy.HANDOVER_MIN_BYTES)}): moving them costs per byte (collate's "
        "copy into shared memory in the workers, mapping and freeing it in the main "
        "process), so busy workers need not mean costly samples."),
    "predicted_no_workers": lambda p: (
        f"Next: not more workers: the prediction (below, its check within "
        f"{pct(policy.PREDICT_FIT_TOL)} of the step) finds that no num_workers keeps up on "
        f"this host: the workers need about {p['cores_needed']:.1f} cores, the host has "
        f"{p['cpus']} (at least {fmt_s(p['floor_s'])} of wait per step at any num_workers); "
        f"make each batch {p['cheaper_by']:.1f}x cheaper (profile __getitem__ and collate), "
        f"or run on {math.ceil(p['cores_needed'])} cores for the workers."),
    "fewer_bytes": lambda p: (
        "Next: send fewer bytes per batch: uint8 images converted to float after the "
        "transfer, a smaller dtype, cropping or resizing in the worker; on a GPU, "
        "pin_memory=True."),
}


def evidenced_next_steps(summary: dict) -> list[str]:
    """The next-step sentences of a report summary, with what the
    attribution and the batch bytes add (policy.evidence_next_steps)."""
    items = policy.evidence_next_steps(summary, policy.next_steps(summary))
    return [(_EVIDENCED_NEXT.get(code) or _NEXT[code])(params) for code, params in items]


def attribution_line(s: dict) -> Optional[str]:
    """Which worker, round or samples the stalls follow (policy.attribution);
    None without an attribution."""
    a = s.get("attribution")
    if not a:
        return None
    spread = ", ".join(f"{w}:{c}" for w, c in sorted(a["stall_workers"].items()))
    on = f" (stalls by worker {spread}; {a['known']} with a known worker)" if spread else ""
    if a["label"] == policy.ONE_WORKER:
        return f"attribution: {policy.ONE_WORKER} worker {a['worker']}{on}"
    if a["label"] == policy.SLOW_SAMPLE and a.get("period_from") == policy.PERIOD_FROM_MAKE_TIMES:
        m = a["made"]
        sp = a.get("stall_period")
        stalls = ("no period of their own" if sp is None
                  else f"period {sp}" + (" too" if sp == a["period"] else ""))
        return (f"attribution: {policy.SLOW_SAMPLE}, rank % {a['period']} == {a['residue']} from "
                f"the workers' make times ({m['slow']} of {m['batches']} batches made slow, "
                f"{pct(m['slow_on_residue'])} of them on that residue); the stalls: "
                f"{pct(a['residue_share'])} on it, {stalls}{on}")
    if a["label"] == policy.SLOW_SAMPLE:
        return (f"attribution: {policy.SLOW_SAMPLE}, rank % {a['period']} == {a['residue']} from "
                f"the stalls, in {pct(a['residue_share'])} of stalled batches{on}")
    text = f"attribution: {policy.LOCK_STEP}, once per round of {a['period']} workers{on}"
    if a.get("ambiguous"):
        text += (f"; without CPU readings a slow worker {a['top_worker']} cannot be told from "
                 "the round")
    return text


def production_line(s: dict) -> Optional[str]:
    """What the workers measured of their own batches; None when the source
    is not a multiprocessing DataLoader."""
    p = s.get("production")
    if not p:
        return None
    if not p.get("available"):
        return f"worker batch timing: off ({p.get('unavailable') or 'not measured'})"
    make, cpu = p["make_s"], p.get("cpu_s")
    text = (f"workers made a batch in {fmt_s(make['median'])} (median; p95 "
            f"{fmt_s(make['p95'])})")
    if cpu:
        text += f", {fmt_s(cpu['median'])} of CPU"
    if p.get("busy_share") is not None:
        text += f"; busy {pct(p['busy_share'])} of the time"
    if p.get("production_share") is not None:
        text += (f"; input wait on a worker making batches {pct(p['production_share'])} of "
                 f"step time, on made batches (hand-over) {pct(p['handover_share'])}")
    if p["coverage"] < policy.PRODUCTION_MIN_COVERAGE:
        text += f" ({pct(p['coverage'])} of steps met their batch: too few to decide on)"
    return text


_ASSUMPTION = {
    "round_robin": "batches go to the workers in turn",
    "prefetch_deep": "prefetch_factor keeps every worker busy",
    "no_shared_lock": "the workers share no lock",
    "load_steady": "the rest of the host's load stays as it was",
}


def prediction_lines(s: dict) -> list[str]:
    """The prediction (traceml.predict) in words: what one batch costs,
    what the loop needs, the answer, the wait per num_workers, and how well
    the model reproduces this run; [] without a prediction.  Only a
    trusted prediction (policy.prediction_trust) gives the answer and the
    table; otherwise the lines say why the model gives no num_workers
    advice here, with its check's numbers."""
    p = s.get("prediction")
    if not p:
        return []
    per_step = p["compute_s"] + p["handover_s"]
    waited = (f", {fmt_s(p['runq_s'])} waiting for a core" if p["runq_s"] is not None else "")
    stuck = p.get("left_out_stuck") or 0
    out = [f"prediction: a worker makes a batch in {fmt_s(p['make_s'])} (mean"
           + (f" without {plural(stuck, 'stuck step')}" if stuck else "")
           + f": {fmt_s(p['cpu_s'])} of CPU{waited}), the loop uses one per {fmt_s(per_step)} "
           f"(compute {fmt_s(p['compute_s'])} + hand-over {fmt_s(p['handover_s'])}); "
           f"{p['usable_cpus']} usable CPUs, each worker got {pct(p['core_share'])} of one"
           + (f" (about {p['other_runnable']:.1f} other threads were runnable: the main "
              "process and other programs; more workers take more of the cores from them)"
              if p["other_runnable"] > 1.5 else "") + "."]
    trust = p.get("trust", policy.PREDICT_TRUSTED)
    if trust == policy.PREDICT_TRUSTED:
        k = p["keeps_up_with"]
        if k is not None:
            now = ", as now," if k == p["num_workers"] else ""
            out.append(f"  num_workers={k}{now} keeps up on this host (the workers need about "
                       f"{p['worker_cores_needed']:.1f} cores).")
        else:
            want = math.ceil(p["worker_cores_needed"])
            out.append(f"  no num_workers keeps up on this host: the workers need about "
                       f"{p['worker_cores_needed']:.1f} cores ({want} workers, each with a "
                       f"core), the host has {p['usable_cpus']}; expect at least "
                       f"{fmt_s(p['wait_floor_s'])} of wait per step at any num_workers. The "
                       f"dataset must get {p['cheaper_by']:.1f}x cheaper per batch, or run on "
                       f"{want} cores besides the main process's.")
        out.append("  predicted wait per step: " + ", ".join(
            f"num_workers={row['num_workers']}: {fmt_s(row['wait_s'])}"
            for row in p["by_workers"]))
    elif trust == policy.PREDICT_ONE_WORKER:
        out.append("  no num_workers advice: the stalls are one worker's batches (see the "
                   "attribution), and the model assumes equal workers taking batches in turn.")
    elif trust == policy.PREDICT_SLOW_SAMPLE:
        out.append("  no num_workers advice: the stalls follow particular samples (see the "
                   "attribution), and the model works with the mean batch, not the slow ones "
                   "holding the line.")
    run = p["this_run"]
    miss = run.get("miss_of_step")
    assumes = "it assumes " + "; ".join(_ASSUMPTION[a] for a in p["assumptions"]) + "."
    if run["measured_wait_s"] is not None and run["error"] is not None:
        said = (f"at num_workers={run['num_workers']} the model gives "
                f"{fmt_s(run['predicted_wait_s'])} against {fmt_s(run['measured_wait_s'])} "
                "measured")
        if trust == policy.PREDICT_MISFIT:
            out.append(f"  the model does not fit this run: {said}, off by {pct(miss)} of the "
                       f"step ({run['error']:+.0%} of the wait), more than "
                       f"{pct(policy.PREDICT_FIT_TOL)}: no num_workers advice from it; "
                       + assumes)
        else:
            missed = f", {pct(miss)} of the step" if miss is not None else ""
            out.append(f"  check: {said} ({run['error']:+.0%}{missed}); " + assumes)
    elif trust == policy.PREDICT_UNCHECKED:
        out.append("  no measured wait to check the model against: no num_workers advice "
                   "from it.")
    return out


def cores_needed_line(runs: list[tuple[str, Optional[dict]]]) -> Optional[str]:
    """One line setting beside each other the cores each run's workers
    need at its step time (traceml.predict); None when no run has a
    prediction."""
    parts = []
    cpus = None
    for name, p in runs:
        if not p:
            parts.append(f"{name}: no prediction (no worker batch timing)")
            continue
        cpus = p["usable_cpus"]
        trusted = p.get("trust", policy.PREDICT_TRUSTED) == policy.PREDICT_TRUSTED
        keeps = ("the model does not fit this run: no num_workers advice" if not trusted
                 else f"num_workers={p['keeps_up_with']} keeps up" if p["keeps_up_with"]
                 else f"no num_workers keeps up here, {p['cheaper_by']:.1f}x too costly")
        parts.append(f"{name} needs about {p['worker_cores_needed']:.1f} cores for its workers "
                     f"({fmt_s(p['cpu_s'])} of CPU per batch; {keeps})")
    if cpus is None:
        return None
    return f"prediction at this step time, on {cpus} CPUs: " + "; ".join(parts) + "."


def sweep_prediction(pred: Optional[dict], rows: list[dict]) -> Optional[str]:
    """Where the sweep's "predicted" column comes from, and how far off it
    was; None without a prediction."""
    if not pred:
        return None
    errors = [abs(rows[i]["predicted_error"]) for i in pred["rows"]
              if rows[i].get("predicted_error") is not None and i != pred["basis"]]
    basis = condition(rows[pred["basis"]]["condition"])
    off = (f"; off by {pct(min(errors))} to {pct(max(errors))} on the other runs"
           if errors else "")
    return (f"predicted: mean wait per step for each num_workers from the workers' batch "
            f"timing of the run {basis} (traceml.predict){off}.")


def live_line(st: dict) -> str:
    """The live line (traceml.liveline): running numbers while a loop runs."""
    parts = [f"traceml · {st['name']} · {st['steps']:,} steps"]
    if st["input_share"] is not None:
        parts.append(f"input {pct(st['input_share'])} of step time")
    if st["median_s"] is not None:
        parts.append(f"wait median {fmt_s(st['median_s'])}, p95 {fmt_s(st['p95_s'])}")
        parts.append(f"{st['slow']:,} past {st['slow_ratio']:g}x the median")
    return " · ".join(parts)


def memory_line(s: dict) -> Optional[str]:
    """The processes' memory over the run (traceml.memory); None without
    readings."""
    m = s.get("memory")
    if not m or not m.get("available"):
        return None
    parts = []
    main = (m.get("main") or {}).get("rss")
    if main:
        parts.append(f"main RSS {fmt_bytes(main['first'])} -> {fmt_bytes(main['last'])} "
                     f"(max {fmt_bytes(main['max'])})")
    growth = m.get("worker_uss_growth")
    if growth is not None:
        parts.append(f"workers' unshared memory {'grew' if growth >= 0 else 'shrank'} "
                     f"{fmt_bytes(abs(growth))} within an epoch (median)")
    return ("memory: " + "; ".join(parts)) if parts else None


_MEMORY_NEXT = {
    "copy_on_read": lambda p: (
        f"Each forked worker's unshared memory grew {fmt_bytes(p['growth_bytes'])} within an "
        "epoch: copy-on-read (reading Python objects writes their reference counts, which "
        "copies the parent's pages into every worker). Hold the dataset in NumPy arrays or "
        "Arrow rather than lists or dicts of Python objects; with num_workers="
        f"{p['num_workers']} the copies add up, and persistent workers keep them."),
    "epoch_jump": lambda p: (
        f"The main process's memory stepped up {fmt_bytes(p['rss_bytes'])} at the start of "
        f"epoch {p['epoch']}: something is built or kept per epoch (a new iterator's state, "
        "a cache); compare its size at each epoch boundary."),
}


def memory_next_steps(items: list[tuple[str, dict]]) -> list[str]:
    """The sentences of policy.memory_findings."""
    return [_MEMORY_NEXT[code](params) for code, params in items]


def batch_bytes_line(s: dict) -> Optional[str]:
    """Bytes per batch as measured; None when none was."""
    b = s.get("batch_bytes")
    if not b:
        return None
    return (f"batch bytes: median {fmt_bytes(b['median'])} over "
            f"{plural(b['measured'], 'measured batch', 'measured batches')}, max "
            f"{fmt_bytes(b['max'])}")


# --- compare: which measure moved ----------------------------------------------------

_MEASURE = {
    "mean_wait": ("mean fetch", fmt_s, lambda d: ("+" if d >= 0 else "-") + fmt_s(abs(d)), fmt_s),
    "input_share": ("input share", lambda x: pct(x, 1),
                    lambda d: f"{d * 100:+.1f} points", lambda t: f"{t * 100:.1f} points"),
    "stall_rate": ("stalls per 100 steps", lambda x: f"{x:.1f}",
                   lambda d: f"{d:+.1f}", lambda t: f"{t:.1f}"),
}


def compare_why(v: policy.Verdict, moved: list) -> str:
    """Why compare() gave its verdict: each measure (policy.compare_measures)
    with both values, the change, its tolerance and whether it moved."""
    parts = []
    for m in moved:
        name, val, change, tol = _MEASURE[m.measure]
        if m.direction is None:
            parts.append(f"{name} not compared (not measured in both)")
            continue
        parts.append(f"{name} {val(m.base)} -> {val(m.run)} ({change(m.run - m.base)}; "
                     f"tolerance {tol(m.tolerance)}): {m.direction}")
    return "; ".join(parts)


# --- GPU-visible input wait (traceml.gpu) ---------------------------------------------

GPU_ROWS = (("host wait", "host_wait_s"), ("GPU-visible wait", "gpu_wait_s"),
            ("GPU step", "gpu_step_s"))
GPU_COLS = ("mean", "median", "p95")


def _pct_or_dash(share: Optional[float], digits: int = 0) -> str:
    return "-" if share is None else pct(share, digits)


def gpu_rule(code: str, g: dict) -> str:
    """Why the diagnosis is what it is once GPU-visible waits are read
    (policy.gpu_diagnosis's code; ``g`` the report's ``gpu`` block)."""
    host, gpu = _pct_or_dash(g.get("host_share"), 1), _pct_or_dash(g.get("gpu_share"), 1)
    top = pct(policy.INPUT_BOUND_SHARE)
    if code == policy.GPU_NOT_USED:
        return (f"GPU-visible waits read on {_pct_or_dash(g.get('coverage'))} of the steady steps "
                f"({g.get('steps_read', 0)}); under {pct(policy.GPU_MIN_COVERAGE)} "
                f"or {policy.MIN_STEADY_STEPS} steps they do not decide the diagnosis")
    if code == policy.GPU_DID_NOT_WAIT:
        return (f"the host waited {host} of its step for input, but the GPU waited only "
                f"{gpu} of its step (< {top}): the host waited while the GPU was still "
                f"working on the previous step, so faster input would gain little")
    if code == policy.GPU_AGREES:
        return f"the GPU saw the same: it waited {gpu} of its step for input (host {host})"
    return (f"the GPU waited {gpu} of its step for input (host {host}, same steps); "
            "the GPU-visible share decides")


def gpu_lines(s: dict) -> list[str]:
    """The lines under the GPU table: coverage, the shares, what the
    readings mean, and the rule; [] without a ``gpu`` block."""
    g = s.get("gpu")
    if not g:
        return []
    out = [f"GPU-visible input wait ({g.get('backend') or 'cuda'} events): read on "
           f"{g['steps_read']} of {g['steady_steps']} steady steps "
           f"({_pct_or_dash(g['coverage'])})"
           + (f", {g['skipped']} not recorded (ring of {g['ring']} full)" if g["skipped"] else "")
           + (f", {g['pending']} not reached by the GPU yet (torch.cuda.synchronize() "
              "before report() reads them)" if g["pending"] else "")]
    if g["gpu_share"] is not None:
        out.append(f"  the GPU waited {pct(g['gpu_share'], 1)} of its step for input; "
                   f"the host {_pct_or_dash(g['host_share'], 1)} of its step, on the same steps")
    out.append("  " + ("waits run to input_ready() (the host-to-device copy included) on "
                       f"{g['ready_marked']} steps" if g["ready_marked"] else
                       "waits end when the batch reached the loop: a host-to-device copy "
                       "after it counts as GPU step, not wait (input_ready() to include it)"))
    if g["rule"] != policy.GPU_NOT_USED or g["steps_read"]:
        out.append("  " + g["rule_text"])
    if g.get("error"):
        out.append(f"  the event source failed and was turned off: {g['error']}")
    out.extend("  " + line for line in gpu_util_lines(g.get("utilisation")))
    return out


def _util_pct(kind: dict) -> str:
    m = kind.get("mean_pct")
    return ("-" if m is None else f"{m:.0f}%") + f" ({kind.get('readings', 0)} readings)"


def gpu_util_lines(u: Optional[dict]) -> list[str]:
    """The GPU utilisation lines (NVML; the gpu block's ``utilisation``,
    evidence.gpu_utilisation): unavailable and why, or the mean in input
    waits against the rest of the steps, and what policy.gpu_util_rule
    says; [] without it (a run file saved before it was read)."""
    if not u:
        return []
    if not u.get("available"):
        return [f"GPU utilisation (NVML): unavailable: {u.get('why') or 'not read'}"]
    window = u.get("window_s")
    out = [f"GPU utilisation (NVML, a kernel running, % of the driver's window"
           + (f" of about {fmt_s(window)}" if window else "") + "): "
           f"{_util_pct(u['slow'])} during input waits, "
           f"{_util_pct(u['fast'])} in the rest of the steps"]
    if u.get("rule") == policy.GPU_UTIL_TOO_FEW:
        out.append(f"  too few readings to tell (under {policy.GPU_UTIL_MIN_READINGS} in input "
                   "waits or in the rest; only waits longer than the driver's window show)")
    elif u.get("rule") == policy.GPU_UTIL_IDLE_IN_WAITS:
        out.append("  NVML confirms that the GPU idles while the loop waits for input: its "
                   "utilisation drops in the waits")
    lost = (u.get("overwritten") or 0) + (u.get("dropped") or 0)
    if lost:
        out.append(f"  {lost} NVML readings lost (the ring was full, or the driver announced them but did not return them)")
    if u.get("error"):
        out.append(f"  NVML stopped: {u['error']}")
    return out


# --- many ranks (traceml.ranks) ----------------------------------------------------


def rank_missing_reason(kind: str, *, timeout_s: float, got: int = 0, of: int = 0) -> str:
    """Why a rank is missing from a gathered report: ``kind`` "absent"
    (it did not check in within the deadline), "silent" (it checked in,
    then sent nothing within the deadline) or "stopped" (a message after
    ``got`` of its ``of`` steps took longer than the deadline)."""
    if kind == "absent":
        return (f"no answer within {fmt_s(timeout_s)} (it did not call the gather, "
                "has died, or called it later)")
    if kind == "silent":
        return f"checked in, then sent nothing within {fmt_s(timeout_s)}"
    return (f"stopped sending: a message took longer than {fmt_s(timeout_s)} after "
            f"{got} of its {of} steps")


def ranks_source_name(name: str, ranks: int) -> str:
    """The job report's source name: "DataLoader#1 (max of 3 ranks)"."""
    return f"{name} (max of {plural(ranks, 'rank')})"


def straggler_rule() -> str:
    """The straggler rule, from policy.stragglers' constants."""
    return (f"a straggler alone holds at least {_of_the(policy.STRAGGLER_MIN_SHARE)} wait "
            "only one rank had (each step's largest input wait minus the second largest, "
            "summed), that wait is at least "
            f"{pct(policy.STRAGGLER_MIN_COST_SHARE)} of the job's step time, and its own "
            "report finds its input wait matters (stalls kept, or "
            f"{policy.INPUT_BOUND} / {policy.HAND_OVER})")


def echo_rule() -> str:
    """The all-reduce echo rule, from policy.echo's constants."""
    return (f"a rank echoes a straggler's stalls when its median compute on the "
            f"straggler's stall steps exceeds its median on the other steady steps by at "
            f"least {_of_the(policy.ECHO_MIN_ABSORBED)} straggler's median stall "
            f"(at least {policy.ECHO_MIN_STALLS} stall steps): it waited for that rank "
            "inside the gradient all-reduce")


def _rank_cadence(p: dict) -> str:
    if p.get("period"):
        return f"stalls {policy.PERIODIC} every {p['period']} steps"
    if p.get("stalls"):
        return f"{plural(p['stalls'], 'stall')}, {p.get('temporal') or 'no pattern'}"
    return "no stalls"


def ranks_lines(r: dict) -> list[str]:
    """The ranks part of a gathered report: who was gathered, who is
    missing, the straggler(s) with their cadence, and the echo."""
    got = r["gathered"]
    out = [f"{plural(r['world_size'], 'rank')}: gathered "
           f"{', '.join(str(x) for x in got)} · {r['aligned_steps']} aligned steps · "
           f"job's largest input wait per step: median {fmt_s(r['max_wait']['median'])}, "
           f"total {fmt_s(r['max_wait']['total'])}"]
    out.extend(f"MISSING rank {m['rank']}: {m['reason']}" for m in r["missing"])
    by_rank = {p["rank"]: p for p in r["per_rank"]}
    if not r["stragglers"]:
        out.append("no straggler: no rank alone holds the job's input wait "
                   f"({r['straggler_rule']})")
    for s in r["stragglers"]:
        p = by_rank[s]
        out.append(
            f"STRAGGLER rank {s}: held the job's largest input wait on {p['held_steps']} "
            f"of {r['aligned_steps']} steps; {pct(p['unique_share'])} of the wait only one "
            f"rank had ({fmt_s(p['unique_wait_s'])}, {pct(p['cost_share'], 1)} of the "
            f"job's step time) · {p['diagnosis']} · {_rank_cadence(p)}")
    for e in r["echo"]:
        if e.get("echo") is None:
            out.append(f"  echo on rank {e['rank']}: too few of rank {e['straggler']}'s "
                       "stall steps to tell")
            continue
        verb = ("waited for it in the all-reduce" if e["echo"]
                else "no echo (it did not wait for it)")
        out.append(
            f"  echo on rank {e['rank']}: {verb}: compute {fmt_s(e['compute_on_stalls_s'])} "
            f"(median) on rank {e['straggler']}'s {e['stall_steps']} stall steps against "
            f"{fmt_s(e['compute_other_s'])} on its other steps, "
            f"{'+' if e['growth_s'] >= 0 else '-'}{fmt_s(abs(e['growth_s']))}"
            + (f", {pct(e['absorbed'])} of its median stall of "
               f"{fmt_s(e['stall_excess_s'])}" if e.get("absorbed") is not None else ""))
    return out


def ranks_next_steps(r: dict) -> list[str]:
    """What to do about the ranks: the straggler's own pipeline first."""
    out = []
    by_rank = {p["rank"]: p for p in r["per_rank"]}
    for s in r["stragglers"]:
        p = by_rank[s]
        loader = p.get("loader") or {}
        workers = (f" (num_workers={loader['num_workers']})" if loader.get("num_workers")
                   is not None else "")
        echoed = [e["rank"] for e in r["echo"] if e["straggler"] == s and e.get("echo")]
        wait = (f"; {'rank' if len(echoed) == 1 else 'ranks'} "
                f"{', '.join(str(x) for x in echoed)} "
                f"{'waits' if len(echoed) == 1 else 'wait'} for it in the all-reduce, so "
                f"speeding {'it' if len(echoed) == 1 else 'them'} up gains nothing"
                if echoed else "")
        out.append(
            f"fix rank {s} first (host {p.get('host') or '?'}): compare its loader"
            f"{workers}, its host (CPUs, other processes, storage) and its shard of the "
            f"data (the samples its sampler hands it) with rank "
            f"{next((x for x in r['gathered'] if x != s), s)}'s{wait}")
        out.extend(f"rank {s}: {line}" for line in (p.get("next") or [])[:1])
    if r["missing"]:
        out.append("the report leaves out rank(s) "
                   + ", ".join(str(m["rank"]) for m in r["missing"])
                   + ": call traceml.report(ranks='all') on every rank, or raise timeout_s")
    return out


def compare_ranks_line(row: dict) -> str:
    """A compare row gathered over many ranks: whose waits it compares."""
    who = (", ".join(f"rank {x}" for x in row["stragglers"]) if row.get("stragglers")
           else "none")
    return (f"{row['label']}: largest input wait across {plural(row['ranks'], 'rank')} "
            f"per step; straggler: {who}")


def demo_quick_note(steady_steps: int) -> str:
    """The last line of ``python -m traceml.demo --quick``."""
    return (f"note: --quick records {steady_steps} steady-state steps a path on a tiny "
            "dataset, to show the reports; too few to judge the loaders by: run "
            "`python -m traceml.demo` for the diagnosis.")
