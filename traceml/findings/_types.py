"""The types the findings families share."""

from __future__ import annotations

from typing import Callable, NamedTuple

# A template: the numbers of one finding in, its sentence out.
Words = Callable[[dict], str]


class Finding(NamedTuple):
    """One finding: its ``code`` (a key of its family's ``WORDS``) and the
    ``numbers`` its words quote (plain JSON values: a run file stores them
    as ``[code, numbers]``)."""

    code: str
    numbers: dict
