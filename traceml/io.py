"""traceml.load(): open a run saved with ``Report.save``.

The run file format is described, written and read in
:mod:`traceml.result`, next to the Report it holds; this module is the
public entry point and never imports the recording side or the report
builder.
"""

from __future__ import annotations

from typing import Optional

from .result import FORMAT, FORMAT_VERSION, Report, RunFileError  # noqa: F401 - the format's names


def load(path, *, max_bytes: Optional[int] = None, max_member_bytes: Optional[int] = None,
         max_ratio: Optional[int] = None) -> Report:
    """Read a run file written by :meth:`Report.save`, as untrusted input.

    The limits (defaults fit a 100M-step run) and every check are those
    of :meth:`Report.load`.

    Raises:
        TypeError: path is not a str or os.PathLike, or a limit is not an int.
        ValueError: a limit is not positive.
        RunFileError (a ValueError): the file cannot be read as a traceml
            run (missing -- then also a FileNotFoundError --, not a regular
            file, over a limit, corrupt, another format version, a bad key
            or array); the message names the file, the member and the key.
    """
    return Report.load(path, max_bytes=max_bytes, max_member_bytes=max_member_bytes,
                       max_ratio=max_ratio)
