"""traceml.load(): open a run saved with ``Report.save``.

The run file format is described, written and read in
:mod:`traceml.result`, next to the Report it holds; this module is the
public entry point and never imports the recording side or the report
builder.
"""

from __future__ import annotations

from .result import FORMAT, FORMAT_VERSION, Report  # noqa: F401 - the format's names


def load(path) -> Report:
    """Read a run file written by :meth:`Report.save`.

    Raises:
        TypeError: path is not a str or os.PathLike.
        FileNotFoundError: no such file.
        ValueError: the file is truncated, corrupt, or not a traceml run
            file; the message names the file.
    """
    return Report.load(path)
