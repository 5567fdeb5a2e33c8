"""traceml: is my training loop waiting for data, in what pattern, and which
cheap experiment tells me why?

::

    import traceml
    for batch in traceml.wrap(loader):   # every fetch stamped in C, in ns
        train_step(batch)
    print(traceml.report())              # diagnosis + evidence

Probes for loops that do not iterate a loader directly::

    traceml.step_begin(); batch = get(); traceml.fetch_done()
    train_step(batch); traceml.step_end()

Timings live in a C array (32 bytes a step); C reducers give the mean,
median, p95, the stall gaps and their cadence; Python renders them.
"""

from . import _core, wrapping
from ._core import clock_ns, fetch_done, step_begin, step_end
from .compare import Comparison, compare
from .io import load
from .report import Report, report
from .sweep import SweepResult, sweep
from .wrapping import Wrapped, configure, wrap

__version__ = "0.1.0"


def reset() -> None:
    """Start a new recording: discard every recorded step, the drop count
    and the misuse counts (per-epoch facts of wrapped loaders are kept for
    the latest epoch only).  A step open at this moment (in a wrapped loop or
    between probes) is not recorded; a wrapped loop goes on recording from
    its next step, so ``reset()`` inside the loop skips a warm-up."""
    _core.reset()
    wrapping.prune_after_reset()


__all__ = [
    "Comparison",
    "Report",
    "SweepResult",
    "Wrapped",
    "clock_ns",
    "compare",
    "configure",
    "fetch_done",
    "load",
    "report",
    "reset",
    "step_begin",
    "step_end",
    "sweep",
    "wrap",
]
