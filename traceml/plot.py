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
    # Below the axes, off the data: inside, it hid the stalls under it.
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=7,
               frameon=False)
    if len(wait_s):
        bins = np.logspace(np.log10(wait_s.min()), np.log10(wait_s.max()) + 1e-9, 30)
        hx.hist(wait_s, bins=bins, orientation="horizontal", color="#475467")
    hx.set_yscale("log")
    hx.set_xlabel("fetches")
    hx.set_title("input wait", fontsize=10)
    return fig


def sweep_figure(rows: list[dict]):
    """Two panels over num_workers as categories (0 and 1 apart, in
    order), one mark per condition and pass, forward and backward side by
    side: the stall period (filled: PERIODIC; hollow: EVERY-FETCH as a
    period of 1, or a period the row fits but has not settled), with
    max(1, num_workers) marked as the period lock-step predicts; and the
    mean step split into the mean fetch and the compute (ms).  The legend
    sits under the panels, off the data."""
    fig = _figure(9, 3.8)
    gap_ax, time_ax = fig.subplots(1, 2)
    sel = [r for r in rows if not r.get("error") and r["condition"].get("num_workers") is not None]
    cats = sorted({int(r["condition"]["num_workers"]) for r in sel})
    pos = {k: i for i, k in enumerate(cats)}
    offset = {"forward": -0.18, "backward": 0.18}
    colors = {"forward": "#b42318", "backward": "#175cd3"}
    from .findings import stall_timing

    for direction in ("forward", "backward"):
        mine = [r for r in sel if r["direction"] == direction]
        if not mine:
            continue
        x = np.array([pos[int(r["condition"]["num_workers"])] + offset[direction]
                      for r in mine])
        periods, hollow = [], []
        for r in mine:
            if r.get("period") is not None:
                periods.append(r["period"]), hollow.append(False)
            elif r.get("temporal") == stall_timing.EVERY_FETCH:
                periods.append(1), hollow.append(True)
            elif r.get("temporal") == stall_timing.UNSETTLED and r.get("consistent_period"):
                periods.append(r["consistent_period"]), hollow.append(True)
            else:
                periods.append(np.nan), hollow.append(False)
        periods, hollow = np.array(periods, dtype=float), np.array(hollow)
        c = colors[direction]
        if (~hollow & ~np.isnan(periods)).any():
            gap_ax.scatter(x[~hollow], periods[~hollow], color=c, s=30, zorder=3,
                           label=f"{direction}: period")
        if hollow.any():
            gap_ax.scatter(x[hollow], periods[hollow], facecolors="none", edgecolors=c, s=30,
                           zorder=3, label=f"{direction}: every fetch or not yet settled")
        fetch = np.array([np.nan if r.get("mean_s") is None else r["mean_s"] * 1e3
                          for r in mine])
        compute = np.array([np.nan if r.get("compute_mean_s") is None
                            else r["compute_mean_s"] * 1e3 for r in mine])
        time_ax.bar(x, fetch, width=0.34, color=c, label=f"{direction}: mean fetch")
        time_ax.bar(x, compute, width=0.34, bottom=np.nan_to_num(fetch), color=c, alpha=0.35,
                    label=f"{direction}: compute (the bar's top: the mean step)")
    if cats:
        gap_ax.scatter(range(len(cats)), [max(k, 1) for k in cats], marker="_", s=400,
                       color="#667085", zorder=2, label="max(1, num_workers)")
        for ax in (gap_ax, time_ax):
            ax.set_xticks(range(len(cats)), [str(k) for k in cats])
            ax.set_xlim(-0.6, len(cats) - 0.4)
    from matplotlib.ticker import MaxNLocator

    gap_ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    gap_ax.set_xlabel("num_workers")
    gap_ax.set_ylabel("stall period (fetches)")
    gap_ax.set_title("stall cadence", fontsize=10)
    time_ax.set_xlabel("num_workers")
    time_ax.set_ylabel("ms a step")
    time_ax.set_title("mean step: fetch + compute", fontsize=10)
    handles, labels = [], []
    for ax in (gap_ax, time_ax):
        h, lab = ax.get_legend_handles_labels()
        handles += h
        labels += lab
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=7,
                   frameon=False)
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
