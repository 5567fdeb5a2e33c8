"""The report's views walk the registry's sections: a line added there
shows in the text and the HTML alike, in its slot."""

import pytest

from traceml import findings, render


@pytest.fixture
def summary(corpus_summaries):
    """A corpus report with a diagnosis, the table and facts."""
    return next(s for _, s in corpus_summaries
                if s["diagnosis"] != "NO-DATA" and s.get("loader"))


def test_a_new_section_entry_shows_in_text_and_html(summary, monkeypatch):
    before_text, before_html = render.report_text(summary), render.report_html(summary)
    assert "a line from a new family" not in before_text
    monkeypatch.setitem(findings.SECTIONS, "facts",
                        findings.SECTIONS["facts"] + (lambda s: "a line from a new family",))
    text, page = render.report_text(summary), render.report_html(summary)
    # In the facts slot: after the table, before the notes.
    lines = text.splitlines()
    at = lines.index("a line from a new family")
    assert any(line.startswith("step ") for line in lines[:at])
    assert "<div>a line from a new family</div>" in page
    assert len(lines) == len(before_text.splitlines()) + 1
    assert len(page) > len(before_html)


def test_section_lines_take_one_line_a_list_or_none():
    sections = {"x": (lambda s: None, lambda s: "one", lambda s: ["two", ""], lambda s: [])}
    assert findings.section_lines("x", {}, sections) == ["one", "two"]
    with pytest.raises(KeyError):
        findings.section_lines("no such slot", {}, sections)
