"""The findings registry stays whole: every code is worded by one family,
every code a ``SUPERSEDES`` names exists, every code the rules emit over
the labelled corpus has words, and every advice code has a corpus case
that emits it (or is listed, by name, as still awaiting one)."""

import pytest

from traceml import findings
from traceml.findings import advice

ADVICE_FAMILIES = ("advice", *(f.__name__.rsplit(".", 1)[-1] for f in advice.EVIDENCE_FAMILIES))

# Advice codes no corpus case emits yet.  The list may only shrink: a code
# that gains a case must leave it (the test below fails otherwise), and a
# new code must come with its case.
AWAITING_A_CASE = frozenset((
    "compute_bound_stalls", "cpus_saturated", "fewer_bytes", "handover_bytes",
    "handover_main", "no_data", "overtaking", "predicted_no_workers", "look_at_function",
    "look_at_path",
    # The slow code's steps need sampled worker stacks, which no corpus
    # case (step records) holds: tests/integration/test_slow_code_loader.py.
    "freeze_gc"))

# Evidence codes no corpus case emits: the corpus's cases are made of
# step records, and the slow-code evidence needs sampled worker stacks,
# which only real DataLoaders give (tests/integration/test_slow_code_loader.py emits
# them).  Each must still be worded.
EVIDENCE_AWAITING_A_CASE = frozenset(findings.slow_code.EVIDENCE_CODES)


def _family(module) -> str:
    return module.__name__.rsplit(".", 1)[-1]


def _worded() -> dict[str, str]:
    """code -> the family that words it; fails on a code worded twice."""
    out: dict[str, str] = {}
    for family in findings.REGISTRY:
        for code in getattr(family, "WORDS", {}):
            assert code not in out, f"{code!r} worded by {out[code]} and {_family(family)}"
            out[code] = _family(family)
    return out


def test_each_code_is_worded_by_one_family():
    worded = _worded()
    assert len(worded) > 60
    # words_of finds the family that holds the code, and names a missing one.
    assert findings.words_of("period") is advice.WORDS["period"]
    with pytest.raises(KeyError, match="no_such_code"):
        findings.words_of("no_such_code")


def test_every_superseded_code_exists():
    worded = _worded()
    for family in advice.EVIDENCE_FAMILIES:
        table = family.SUPERSEDES
        assert table, _family(family)
        for code, replaced in table.items():
            assert code in family.WORDS, (_family(family), code)
            missing = set(replaced) - set(worded)
            assert not missing, (_family(family), code, missing)
        assert set(family.ONLY_REPLACING) <= set(table), _family(family)
    attribution = findings.attribution
    assert set(attribution.SLOW_SAMPLE_OWN_PERIOD_SUPERSEDES) <= set(worded)


def _corpus_advice(summaries) -> dict[str, str]:
    """advice or note code -> the first corpus case whose report advises
    it or notes it (a family may word both)."""
    out: dict[str, str] = {}
    for name, s in summaries:
        for code, _ in (advice.evidence_next_steps(s, advice.next_steps(s))
                        + findings.family_notes(s)):
            out.setdefault(code, name)
    return out


def test_every_advice_code_has_words_and_a_corpus_case(corpus_summaries):
    worded = _worded()
    emitted = _corpus_advice(corpus_summaries)
    assert not set(emitted) - set(worded), "advised codes without words"
    advice_codes = {c for c, fam in worded.items()
                    if fam in ADVICE_FAMILIES and c not in EVIDENCE_AWAITING_A_CASE}
    assert EVIDENCE_AWAITING_A_CASE <= set(worded)
    uncovered = advice_codes - set(emitted)
    assert uncovered == AWAITING_A_CASE, (
        f"gained a case: {sorted(AWAITING_A_CASE - uncovered)}; "
        f"new without one: {sorted(uncovered - AWAITING_A_CASE)}")


def test_every_family_note_has_words_and_a_corpus_case(corpus_summaries):
    """A family's notes(summary) rule: each code it words is emitted by a
    corpus case, and each note it emits there is worded."""
    families = [f for f in findings.REGISTRY if hasattr(f, "notes")]
    emitted: dict[str, str] = {}
    for name, s in corpus_summaries:
        for family in families:
            for code, _ in family.notes(s):
                assert code in family.WORDS, (_family(family), code)
                emitted.setdefault(code, name)
    for family in families:
        missing = set(family.WORDS) - set(emitted)
        assert not missing, f"{_family(family)}: no corpus case emits {sorted(missing)}"


def test_every_diagnosis_line_code_has_words_and_a_corpus_case(corpus_summaries):
    """label_support's findings(summary) and shape_findings(summary),
    printed under the diagnosis and the shape: each code it words is
    emitted by a corpus case."""
    family = findings.label_support
    emitted = {code for _, s in corpus_summaries
               for code, _ in family.findings(s) + family.shape_findings(s)}
    assert emitted <= set(family.WORDS)
    assert set(family.WORDS) - emitted == set()


def test_every_experiment_code_is_worded_and_proposes_one(corpus_summaries):
    worded = _worded()
    assert advice.EXPERIMENTS <= set(worded), advice.EXPERIMENTS - set(worded)
    # Over the corpus: each report has at most one lead, its first
    # experiment, and every "Next:" sentence is an experiment's.
    for name, s in corpus_summaries:
        items, roles = advice.arrange(advice.evidence_next_steps(s, advice.next_steps(s)))
        tried = [r for (code, _), r in zip(items, roles) if code in advice.EXPERIMENTS]
        assert tried[:1] in ([], ["lead"]) and set(tried[1:]) <= {"also"}, (name, roles)
        assert roles.count("lead") == len(tried[:1]), name
        for (code, numbers), role in zip(items, roles):
            said = findings.words_of(code)(numbers)
            if "Next:" in said:
                assert role in ("lead", "also"), (name, code)


def test_the_code_that_makes_the_batches_leads_a_full_host_and_the_pattern():
    from traceml.findings import Finding
    items = [Finding("heavy_tailed", {}), Finding("vary_workers_around", {}),
             Finding("host_contention", {}), Finding("look_at_function", {})]
    arranged, roles = advice.arrange(items)
    assert [c for c, _ in arranged] == ["heavy_tailed", "look_at_function", "host_contention",
                                        "vary_workers_around"]
    assert roles == ["why", "lead", "also", "also"]
