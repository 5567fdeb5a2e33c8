"""The unit tier: pure tests of the rules, reducers and views, with no
torch import and no subprocess.  The labelled corpus (tests/corpus.py) is
a support module beside the integration tests; it is put on sys.path here,
never imported from another test module."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pytest  # noqa: E402 - after the path is set, as the other imports here


@pytest.fixture(scope="session")
def corpus_summaries():
    """(case name, built summary) of every corpus case, replayed once for
    the whole unit tier."""
    import corpus

    return [(case.name, corpus.replay(case).summary) for case in corpus.corpus()]
