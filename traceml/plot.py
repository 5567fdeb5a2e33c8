"""Figures, built on ``matplotlib.figure.Figure`` (never pyplot's global
state, so a notebook never shows a figure twice).  matplotlib is optional:
everything else in traceml works without it."""

from __future__ import annotations

import base64
import io
from typing import Callable, Optional

import numpy as np

INSTALL_HINT = "pip install matplotlib to see the plots"


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def report_figure(summary: dict, steps: np.ndarray):
    """Input wait per step (log scale) with stalls and epoch boundaries,
    and the histogram of input wait (log-spaced bins)."""
    fig = _figure(9, 3.2)
    ax, hx = fig.subplots(1, 2, width_ratios=[3, 1])
    wait_s = (steps["fetch_done_ns"] - steps["begin_ns"]).astype(float) * 1e-9
    wait_s = np.maximum(wait_s, 1e-9)
    idx = np.arange(len(wait_s))
    ax.plot(idx, wait_s, lw=0.8, color="#475467", label="input wait")
    stalls = np.asarray(summary["stalls"]["steps"], dtype=int)
    if len(stalls):
        ax.scatter(stalls, wait_s[stalls], s=14, color="#b42318", zorder=3,
                   label=f"stall ({len(stalls)})")
    start = np.asarray(summary["epoch_start"]["steps"], dtype=int)
    if len(start):
        ax.scatter(start, wait_s[start], s=14, marker="x", color="#667085",
                   zorder=3, label="epoch start-up")
    boundaries = np.flatnonzero(np.diff(steps["epoch"])) + 0.5
    for b in boundaries:
        ax.axvline(b, color="#98a2b3", lw=0.8, ls="--")
    ax.axhline(summary["stalls"]["threshold_s"], color="#b42318", lw=0.8, ls=":",
               label="stall threshold")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("input wait (s)")
    ax.set_title(f"{summary['source']}: {summary['diagnosis']}"
                 + (f", {summary['shape']}" if summary.get("shape") else ""), fontsize=10)
    ax.legend(fontsize=7, loc="upper right")
    if len(wait_s):
        bins = np.logspace(np.log10(wait_s.min()), np.log10(wait_s.max()) + 1e-9, 30)
        hx.hist(wait_s, bins=bins, orientation="horizontal", color="#475467")
    hx.set_yscale("log")
    hx.set_xlabel("fetches")
    hx.set_title("input wait", fontsize=10)
    return fig


def sweep_figure(rows: list[dict]):
    """Observed stall cadence (median gap) against num_workers, one point
    per condition and pass, with the line period = max(1, num_workers)."""
    fig = _figure(5, 3.4)
    ax = fig.subplots()
    pts = [(max(r["condition"].get("num_workers") or 0, 1), r["median_gap"], r)
           for r in rows if r.get("median_gap") is not None
           and r["condition"].get("num_workers") is not None]
    for x, y, r in pts:
        ax.scatter(x, y, color="#b42318" if r["direction"] == "forward" else "#175cd3",
                   s=24, zorder=3)
    if pts:
        xs = np.array(sorted({p[0] for p in pts}))
        ax.plot(xs, xs, color="#98a2b3", ls="--", lw=0.8, label="period = num_workers")
    ax.set_xlabel("max(1, num_workers)")
    ax.set_ylabel("median stall gap (steps)")
    ax.set_title("stall cadence against num_workers", fontsize=10)
    if pts:
        ax.legend(fontsize=7)
    return fig


def png_data_uri(make_figure: Callable) -> Optional[str]:
    """A ``data:image/png;base64,...`` URI of ``make_figure()``, or None when
    matplotlib is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return None
    fig = make_figure()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
