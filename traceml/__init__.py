"""traceml: is my training loop waiting for data, in what pattern, and which
cheap experiment tells me why?

::

    import traceml
    for batch in traceml.wrap(loader):   # every fetch stamped in C, in ns
        train_step(batch)
    print(traceml.report())              # diagnosis + evidence

Probes for loops that do not iterate a loader directly::

    traceml.step_begin(); batch = get(); traceml.fetch_done()
    train_step(batch); traceml.step_end()   # optional: step_begin() ends it too

``traceml.wrap(loader, live=True)`` (``traceml.live()`` for the probes)
shows a line that updates while the loop runs.

``traceml.wrap(loader, cuda=True)`` (``traceml.cuda_events()`` for the
probes) also measures the input wait the GPU saw, from CUDA events read
lazily (:mod:`traceml.gpu`).

Timings live in a C array (32 bytes a step) owned by a
:class:`traceml.Recorder`; the module-level functions use the default one.
C reducers give the mean, median, p95, the stall gaps and their cadence;
Python renders them.
"""

from . import _core
from ._core import abandon_step, clock_ns, fetch_done, step_begin, step_end
from .comparing import Comparison, compare
from .gpu import cuda_events, input_ready
from .io import load
from .liveline import live
from .ranks import gather
from .recorder import Recorder, report, reset
from .build import Report
from .result import RunFileError
from .sweeping import SweepResult, sweep
from .wrapping import Wrapped, configure, wrap

__version__ = "0.1.0"

# The default recorder: what wrap(), the probes, report() and reset() use.
_core._set_default_recorder(Recorder())

__all__ = [
    "Comparison",
    "Recorder",
    "Report",
    "RunFileError",
    "SweepResult",
    "Wrapped",
    "abandon_step",
    "clock_ns",
    "compare",
    "configure",
    "cuda_events",
    "fetch_done",
    "gather",
    "input_ready",
    "live",
    "load",
    "report",
    "reset",
    "step_begin",
    "step_end",
    "sweep",
    "wrap",
]
