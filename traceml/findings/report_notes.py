"""Notes of a report and messages about what was recorded: dropped steps,
probe misuse, loaders wrapped or hidden, the live line.
"""

from __future__ import annotations

from typing import Optional


from ..fmt import fmt_s, pct, plural
from ._types import Words


WORDS: dict[str, Words] = {
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
    "few_steps": lambda p: (f"only {plural(p['steps'], 'steady-state step')}: too few for the "
                            "shape of the input wait to mean much"),
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


def loader_line(s: dict) -> Optional[str]:
    """The DataLoader's settings; None for other iterables."""
    if not s["loader"]:
        return None
    loader = dict(s["loader"])
    asked = loader.pop("pin_memory_asked", False)
    line = "loader: " + " ".join(f"{k}={v}" for k, v in loader.items())
    if asked:
        line += ("\n  pin_memory=True was asked for; torch pins only where an accelerator "
                 "is available, and none is here, so batches are not pinned")
    return line


def live_line(st: dict) -> str:
    """The live line (traceml.liveline): running numbers while a loop runs."""
    parts = [f"traceml · {st['name']} · {st['steps']:,} steps"]
    if st["input_share"] is not None:
        parts.append(f"input {pct(st['input_share'])} of step time")
    if st["median_s"] is not None:
        parts.append(f"wait median {fmt_s(st['median_s'])}, p95 {fmt_s(st['p95_s'])}")
        parts.append(f"{st['slow']:,} past {st['slow_ratio']:g}x the median")
    return " · ".join(parts)


def demo_quick_note(steady_steps: int) -> str:
    """The last line of ``python -m traceml.demo --quick``."""
    return (f"note: --quick records {steady_steps} steady-state steps a path on a tiny "
            "dataset, to show the reports; too few to judge the loaders by: run "
            "`python -m traceml.demo` for the diagnosis.")
