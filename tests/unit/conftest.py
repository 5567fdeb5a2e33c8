"""The unit tier: pure tests of the rules, reducers and views, with no
torch import and no subprocess.  The labelled corpus (tests/corpus.py) is
a support module beside the integration tests; it is put on sys.path here,
never imported from another test module."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pytest  # noqa: E402 - after the path is set, as the other imports here


_TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "tools")


@pytest.fixture(scope="session")
def corpus_replay():
    """(summaries, examples) from one replay of the corpus for the whole
    unit tier: summaries, (case name, built summary) of every case;
    examples, tools/gen_rules.corpus_examples' {code: (case, sentence)},
    None in a copy of tests/ without tools/ beside it (tools/check_dist.sh)."""
    if os.path.exists(os.path.join(_TOOLS, "gen_rules.py")):
        sys.path.insert(0, _TOOLS)
        import gen_rules

        summaries: list = []
        examples = gen_rules.corpus_examples(summaries)
        return summaries, examples
    import corpus

    return [(case.name, corpus.replay(case).summary) for case in corpus.corpus()], None


@pytest.fixture(scope="session")
def corpus_summaries(corpus_replay):
    """(case name, built summary) of every corpus case."""
    return corpus_replay[0]
