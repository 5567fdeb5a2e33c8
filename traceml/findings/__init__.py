"""The findings: one family of rules a module, each holding its thresholds
(with where they come from), its rules over numbers, and the words of its
codes.

Data flows one way: the records are measured into numbers (durations,
stalls, evidence), each family's rules turn numbers into codes and the
numbers behind them, and the views word the codes.  A family imports only
other families, the C core and :mod:`traceml.fmt`.

``REGISTRY`` lists the families in the order a report reads them.
"""

from __future__ import annotations

import numpy as np

from ._types import Finding, Words

from . import (advice, attribution, bottom_line, comparison, gpu_wait, hand_over,
               host_contention, input_bound, label_support,
               prediction_check, rank_stragglers, report_notes, slow_code, slow_samples,
               stall_shape,
               stall_threshold, stall_timing, startup_once, sweeps, wait_parts, wait_trend,
               worker_evidence, worker_memory)

__all__ = ["Finding", "REGISTRY", "Words", "family_notes", "sentences", "stored",
           "words_of"]

# The families in report order: the bottom line, the diagnosis, the stalls'
# threshold, shape and timing, the trend, what the workers show, then the
# next steps; the workflows' families (compare, sweep, ranks) after.
REGISTRY = (bottom_line, startup_once, input_bound, label_support, stall_threshold, stall_shape, stall_timing,
            wait_trend, attribution, slow_samples, slow_code, wait_parts, hand_over, host_contention,
            worker_evidence,
            worker_memory, gpu_wait, prediction_check, advice, report_notes, comparison, sweeps, rank_stragglers)


def words_of(code: str) -> Words:
    """The template of ``code``, from the one family whose ``WORDS`` holds
    it.  Raises KeyError naming the code when no family words it."""
    for family in REGISTRY:
        table = getattr(family, "WORDS", None)
        if table and code in table:
            return table[code]
    raise KeyError(f"no findings family words the code {code!r}")


def sentences(items) -> list[str]:
    """The sentences of ``(code, numbers)`` items (Findings or the
    ``[code, numbers]`` pairs a run file stores), in their order."""
    return [words_of(code)(numbers) for code, numbers in items]


def stored(items) -> list[list]:
    """``(code, numbers)`` items as a run file keeps them: ``[code,
    numbers]`` lists of plain JSON values (NumPy scalars and arrays made
    Python numbers and lists, tuples lists), the form :func:`sentences`
    words again when the run is loaded."""
    return [[code, _plain(numbers)] for code, numbers in items]


def _plain(x):
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return _plain(x.tolist())
    if isinstance(x, np.generic):
        return x.item()
    return x


def family_notes(summary: dict) -> list[Finding]:
    """The notes the registry's families find in a built ``summary``: each
    family with a ``notes(summary) -> list[Finding]`` rule, in REGISTRY
    order.  A family that adds a note to the report is one file and its
    REGISTRY entry: no renderer changes, since the views show the notes."""
    out: list[Finding] = []
    for family in REGISTRY:
        rule = getattr(family, "notes", None)
        if rule is not None:
            out.extend(rule(summary))
    return out
