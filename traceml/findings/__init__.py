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

from typing import Optional

import numpy as np

from ._types import Finding, Words

from . import (advice, attribution, bottom_line, comparison, gpu_wait, hand_over,
               host_contention, input_bound, label_support,
               prediction_check, rank_stragglers, report_notes, slow_code, slow_samples,
               stall_shape,
               stall_threshold, stall_timing, startup_once, sweeps, wait_parts, wait_trend,
               worker_evidence, worker_memory)

__all__ = ["Finding", "NO_DATA_SECTIONS", "REGISTRY", "SECTIONS", "Words", "family_notes",
           "section_lines", "sentences", "stored", "words_of"]

# The families in report order: the bottom line, the diagnosis, the stalls'
# threshold, shape and timing, the trend, what the workers show, then the
# next steps; the workflows' families (compare, sweep, ranks) after.
REGISTRY = (bottom_line, startup_once, input_bound, label_support, stall_threshold, stall_shape, stall_timing,
            wait_trend, attribution, slow_samples, slow_code, wait_parts, hand_over, host_contention,
            worker_evidence,
            worker_memory, gpu_wait, prediction_check, advice, report_notes, comparison, sweeps, rank_stragglers)


# The report's lines by slot, each slot's rules in the order shown: the
# text and HTML views walk these (traceml.render), so a family's new line
# is one entry here, not an edit in each renderer.  Each rule takes the
# summary and gives a line, a list of lines, or None.  Slots: the
# diagnosis's and the shape's support ("borderline" lines), the shape, the
# evidence under the next steps, the stall lines, the facts under the
# table, the prediction.
SECTIONS = {
    "diagnosis_support": (label_support.diagnosis_lines,),
    "shape": (stall_timing.shape_line,),
    "shape_support": (label_support.shape_lines,),
    "evidence": (slow_code.evidence_lines, worker_evidence.evidence_lines,
                 slow_samples.evidence_lines),
    "stalls": (stall_timing.stall_lines, attribution.attribution_line),
    "facts": (bottom_line.epoch_start_line, report_notes.loader_line,
              hand_over.batch_bytes_line, hand_over.production_line,
              wait_parts.wait_parts_line, wait_parts.compute_parts_line,
              slow_samples.sample_line, worker_memory.memory_line,
              worker_evidence.process_lines),
    "prediction": (prediction_check.prediction_lines,),
}
# Without a diagnosis (NO-DATA) a report shows the worker evidence and the
# facts but the epoch start.
NO_DATA_SECTIONS = {"evidence": (worker_evidence.evidence_lines,),
                    "facts": SECTIONS["facts"][1:]}


def section_lines(slot: str, summary: dict, sections: Optional[dict] = None) -> list[str]:
    """The lines of ``slot`` in ``sections`` (SECTIONS by default) for a
    report ``summary``, empty ones left out.  Raises KeyError for an
    unknown slot."""
    out: list[str] = []
    for rule in (SECTIONS if sections is None else sections)[slot]:
        got = rule(summary)
        if got:
            out.extend([got] if isinstance(got, str) else got)
    return [line for line in out if line]


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
