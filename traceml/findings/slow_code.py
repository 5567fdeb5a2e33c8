"""The code that makes the slow batches: the function whose share of the
workers' sampled CPU tells the stalled batches from the others.

Numbers (``summary["slow_code"]``, traceml.report._slow_code): each
DataLoader worker's Python stack sampled every 5 ms of its CPU
(traceml.stacks), each sample tied to the batch its worker was making;
the batches split into *slow* (a stalled steady fetch waited for them)
and *fast* (every other steady fetch's); per function (file, qualified
name, first line), the sample weight of each group whose stack holds it.

The model.  Under the null hypothesis that a function takes the same
share of the workers' CPU in slow and in fast batches, the samples
holding it are split between the groups as the samples are: the count in
the slow group is hypergeometric.  A function is named when the one-sided
Fisher exact test (scipy.stats.fisher_exact) of its 2x2 table (holds it or
not, slow or fast) rejects the null at SLOW_CODE_ALPHA / m, m the
functions tested (Bonferroni).  Among those named, a function and the
callee carrying nearly all of its samples tell the batches apart equally:
the outermost of those within CALLEE_SHARE of the largest share gap is the
one to look at (the caller the dataset's code calls).  When even a
function in every slow sample and no fast one could not reach that level
(too few samples), the answer is *not yet*.  Before any function: the slow
batches' CPU over their wall time (the worker's own clock, BatchLog); below
OFF_CPU_SHARE the workers were mostly off CPU and no function is to blame;
and the ticks that fell in another thread (a helper decoding, the queue's
feeder) are said when they outweigh the sampled thread's.
"""

from __future__ import annotations

import math
from typing import Optional

from scipy import stats

from ..fmt import pct
from ._types import Finding, Words

# The false-naming rate across the functions of one report: 1 in 100
# (stall_timing.PERIOD_ALPHA's level), split over the functions tested.
SLOW_CODE_ALPHA = 0.01
# "Nearly all of its samples": a callee within 90 % of its caller's share
# gap names the same code path; the caller is named.
CALLEE_SHARE = 0.9
# Off CPU: the slow batches' worker CPU under half their make time means
# the worker mostly waited (sleep, I/O, a lock), so no function's CPU made
# them slow.
OFF_CPU_SHARE = 0.5
# Functions a report keeps in its table (largest share gap first).
TABLE_ROWS = 8

# The codes of the note (the next step is look_at_function).
NOTE_CODES = ("slow_code_named", "slow_code_same", "slow_code_too_few", "slow_code_off_cpu",
         "slow_code_other_thread", "slow_code_off")


def _p_value(a: float, n1: float, b: float, n0: float) -> float:
    """One-sided Fisher exact p of ``a`` of ``n1`` slow samples against
    ``b`` of ``n0`` fast ones holding a function."""
    a, n1, b, n0 = (int(round(x)) for x in (a, n1, b, n0))
    return float(stats.fisher_exact([[a, n1 - a], [b, n0 - b]], alternative="greater")[1])


def tested(block: dict) -> list[dict]:
    """The functions of ``block["functions"]`` with their Fisher p-value
    (``p_value``) and share gap (``gap``), largest gap first; ``named``
    marks those under SLOW_CODE_ALPHA / (functions tested)."""
    n1, n0 = block["samples"]["slow"], block["samples"]["fast"]
    rows = [dict(f) for f in block.get("functions") or [] if f["slow"] > 0]
    m = max(1, len(rows))
    for f in rows:
        f["slow_share"] = f["slow"] / n1 if n1 else 0.0
        f["fast_share"] = f["fast"] / n0 if n0 else 0.0
        f["gap"] = f["slow_share"] - f["fast_share"]
        f["p_value"] = _p_value(f["slow"], n1, f["fast"], n0) if n1 and n0 else 1.0
        f["named"] = f["p_value"] < SLOW_CODE_ALPHA / m and f["gap"] > 0
    rows.sort(key=lambda f: -f["gap"])
    return rows


def best_p_value(n1: float, n0: float) -> float:
    """The smallest p any function could reach: in all ``n1`` slow samples
    and none of the ``n0`` fast ones, 1 / C(n1 + n0, n1)."""
    n1, n0 = int(round(n1)), int(round(n0))
    return 1.0 / math.comb(n1 + n0, n1) if n1 >= 0 and n0 >= 0 else 1.0


def _row(f: dict) -> dict:
    return {"function": f["function"], "file": f["file"],
            "line": f["hot_line"] if f["hot_line"] >= 0 else f["first_line"],
            "first_line": f["first_line"], "slow_share": f.get("slow_share"),
            "fast_share": f.get("fast_share")}


def judge(block: Optional[dict]) -> Optional[Finding]:
    """The one finding on the slow batches' code (None: nothing to say:
    no block, or no slow batches)."""
    if block is None:
        return None
    if block.get("status") != "on":
        return Finding("slow_code_off", {"why": block.get("status")})
    s = block["samples"]
    if not block.get("slow_batches"):
        return None
    cpu_share = block.get("slow_cpu_share")
    if cpu_share is not None and cpu_share < OFF_CPU_SHARE:
        return Finding("slow_code_off_cpu", {"cpu_share": cpu_share,
                                             "batches": block["slow_batches"]})
    other = s.get("slow_other_thread", 0)
    if other > s["slow"]:
        return Finding("slow_code_other_thread", {
            "share": other / (other + s["slow"]), "samples": other + s["slow"]})
    rows = tested(block)
    named = [f for f in rows if f["named"]]
    m = max(1, len(rows))
    if named:
        top = max(f["gap"] for f in named)
        near = [f for f in named if f["gap"] >= CALLEE_SHARE * top]
        lead = min(near, key=lambda f: (math.inf if f["root_distance"] is None
                                        else f["root_distance"], -f["gap"]))
        return Finding("slow_code_named", {
            **_row(lead), "p_value": lead["p_value"], "samples_slow": s["slow"],
            "samples_fast": s["fast"]})
    if best_p_value(s["slow"], s["fast"]) >= SLOW_CODE_ALPHA / m:
        return Finding("slow_code_too_few", {"samples": s["slow"] + s["fast"],
                                             "slow": s["slow"], "fast": s["fast"]})
    own = sorted(block.get("functions") or [], key=lambda f: -(f["own_slow"] + f["own_fast"]))
    total = s["slow"] + s["fast"]
    return Finding("slow_code_same", {
        "top": [{**_row(f), "own_share": (f["own_slow"] + f["own_fast"]) / total}
                for f in own[:3] if total],
        "samples": total})


def notes(s: dict) -> list[Finding]:
    """The slow-code finding as a report note (none without one)."""
    f = judge(s.get("slow_code"))
    return [f] if f is not None else []


# The next step, where a function was named: it leads (advice puts a
# LEADS family's items first); it replaces nothing, since the experiments
# on the loader still say why the cost reaches the loop in that pattern.
LEADS = True
SUPERSEDES: dict = {"look_at_function": frozenset()}
ONLY_REPLACING: frozenset = frozenset()


def superseded_by(f: Finding) -> frozenset:
    """The next-step codes the item ``f`` replaces (none)."""
    return SUPERSEDES.get(f.code, frozenset())


def advise(s: dict) -> list[Finding]:
    """``look_at_function`` where a function tells the slow batches
    apart."""
    f = judge(s.get("slow_code"))
    if f is None or f.code != "slow_code_named":
        return []
    return [Finding("look_at_function", f.numbers)]


def _where(p: dict) -> str:
    return f"`{p['function']}` in `{_short(p['file'])}:{p['line']}`"


def _short(path: str) -> str:
    """A path as a reader finds it: its last two parts."""
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:])


def _shares(p: dict) -> str:
    return (f"{pct(p['slow_share'])} of the slow batches' sampled worker CPU, "
            f"{pct(p['fast_share'])} of the fast ones'")


WORDS: dict[str, Words] = {
    "slow_code_named": lambda p: (
        f"the slow batches' code: {_where(p)}, {_shares(p)} "
        f"({p['samples_slow']:.0f} and {p['samples_fast']:.0f} samples; "
        f"Fisher p = {p['p_value']:.1g})"),
    "slow_code_same": lambda p: (
        f"no function tells the slow batches from the fast ones "
        f"({p['samples']:.0f} samples): the cost is every batch's; where the "
        "workers' CPU went: "
        + ", ".join(f"{_where(f)} {pct(f['own_share'])}" for f in p["top"])),
    "slow_code_too_few": lambda p: (
        f"{p['samples']:.0f} stack samples ({p['slow']:.0f} in slow batches): "
        "too few to name a function; a longer run would"),
    "slow_code_off_cpu": lambda p: (
        f"the workers were not on CPU in the slow batches ({pct(p['cpu_share'])} "
        f"of their make time over {p['batches']} batches): no function's CPU made "
        "them slow; look for sleeps, I/O or locks"),
    "slow_code_other_thread": lambda p: (
        f"{pct(p['share'])} of the slow batches' CPU samples fell outside the "
        "thread that runs the dataset (a helper thread, the queue's feeder): "
        "their code is not sampled"),
    "slow_code_off": lambda p: f"the workers' stacks were not sampled: {p['why']}",
    "look_at_function": lambda p: (
        f"Look at {_where(p)}: {_shares(p)}."),
}
