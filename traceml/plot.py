"""Figures, built on ``matplotlib.figure.Figure`` (never pyplot's global
state, so a notebook never shows a figure twice).  matplotlib is optional:
everything else in traceml works without it.  Draws plain summaries and
step arrays; never measures or decides."""

from __future__ import annotations

import base64
import io
from typing import Callable, Optional

import numpy as np

INSTALL_HINT = "pip install matplotlib to see the plots"


def _figure(width: float, height: float):
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(f"traceml plots need matplotlib: {INSTALL_HINT} "
                          "(or the [plot] extra)") from exc

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
    """Two panels over max(1, num_workers), one point per condition and
    pass, forward and backward told apart: the stall period (with the
    line period = num_workers) and the mean fetch."""
    fig = _figure(9, 3.4)
    gap_ax, wait_ax = fig.subplots(1, 2)
    styles = {"forward": ("#b42318", "o"), "backward": ("#175cd3", "x")}
    xs = set()
    for direction, (color, marker) in styles.items():
        sel = [r for r in rows if r["direction"] == direction and not r.get("error")
               and r["condition"].get("num_workers") is not None]
        x = [max(r["condition"]["num_workers"], 1) for r in sel]
        xs.update(x)
        gx = [xi for xi, r in zip(x, sel) if r.get("period") is not None]
        gy = [r["period"] for r in sel if r.get("period") is not None]
        if gx:
            gap_ax.scatter(gx, gy, color=color, marker=marker, s=30, zorder=3, label=direction)
        wx = [xi for xi, r in zip(x, sel) if r.get("mean_s") is not None]
        wy = [r["mean_s"] for r in sel if r.get("mean_s") is not None]
        if wx:
            wait_ax.scatter(wx, wy, color=color, marker=marker, s=30, zorder=3, label=direction)
    if xs:
        line = sorted(xs)
        gap_ax.plot(line, line, color="#98a2b3", ls="--", lw=0.8, label="period = num_workers")
        for ax in (gap_ax, wait_ax):
            ax.set_xticks(line)
    gap_ax.set_xlabel("max(1, num_workers)")
    gap_ax.set_ylabel("stall period (steps)")
    gap_ax.set_title("stall cadence", fontsize=10)
    wait_ax.set_xlabel("max(1, num_workers)")
    wait_ax.set_ylabel("mean fetch (s)")
    wait_ax.set_title("input wait", fontsize=10)
    for ax in (gap_ax, wait_ax):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    return fig


def png_data_uri(make_figure: Callable) -> Optional[str]:
    """A ``data:image/png;base64,...`` URI of ``make_figure()``, or None when
    matplotlib is not installed."""
    try:
        import matplotlib  # noqa: F401 - is matplotlib installed?
    except ImportError:
        return None
    fig = make_figure()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
