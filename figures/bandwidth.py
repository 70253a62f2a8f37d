"""Achieved rate vs size for one kernel on one GPU, per implementation, one panel per dtype (a shared y axis),
against its roofs: bandwidth in GB/s against the measured copy for a memory-bound kernel, TFLOP/s against the
measured GEMM peak (and datasheet peak) of the panel's compute unit for a compute-bound one (matmul, attention:
analysis/claims.compute_bound). Message: which implementation reaches the wall, and from what size on.

Rates are in the median's frame (GPU time: one call, stream held, L2 flushed; host time on the CPU); each point
carries its spread as a bar from the p80 time (low rate) to the p20 time (high rate). Colour and marker: the
implementation; the roofs are horizontal black (measured) and grey (datasheet) lines, each labelled on the plot.
The x axis is the kernel's N (its shape family's: rooflab/shapes.py), a size whose tick label has no room keeps a
short unlabelled tick, named under the legend. A point above its roof is ringed: it is in the paper's findings table.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from analysis.claims import compute_bound
from figures import SCOPES
from figures._common import (IMPL_LABEL, MARKER, PALETTE, claimable, gpu_name, impls_present, mark_findings, new_figure,
                             no_data, parse_args, plain_log_ticks, print_size, read_metrics, save, setup, size_axis,
                             size_label, spread, time_frame, unlabelled_note)
from rooflab.gpus import spec_for
from rooflab.kernel import DTYPES

SCOPE = SCOPES["bandwidth"]
PANEL_IN = 2.0  # one row of panels, its axes and labels (the legend under them apart)
ROOF = {"measured": {"color": "black", "lw": 1.0}, "datasheet": {"color": "0.55", "lw": 1.0}}


def rates(df: pd.DataFrame, tflops: bool) -> tuple[str, pd.Series, tuple[pd.Series, pd.Series] | None]:
    """(column, rate, its p80..p20 spread or None): GB/s, or TFLOP/s for a compute-bound kernel."""
    if not tflops:
        return "achieved_gbps", df["achieved_gbps"], spread(df, nbytes=True)
    band = spread(df)
    return ("achieved_tflops", df["achieved_tflops"], None if band is None else
            (df["flops"] / (band[1] * 1e-3) / 1e12, df["flops"] / (band[0] * 1e-3) / 1e12))


def draw(ax, df: pd.DataFrame, tflops: bool = False) -> str:
    """One line per implementation (the rows of one dtype), with p20-p80 error bars, and the findings ringed;
    returns the column drawn."""
    column = "achieved_tflops" if tflops else "achieved_gbps"
    for impl in impls_present(df):
        g = df[df["impl"] == impl].sort_values("size")
        column, rate, band = rates(g, tflops)
        yerr = None if band is None else [(rate - band[0]).clip(lower=0), (band[1] - rate).clip(lower=0)]
        ax.errorbar(g["size"], rate, yerr=yerr, color=PALETTE[impl], marker=MARKER[impl], ms=3, lw=1.1, capsize=1.5,
                    elinewidth=0.6)
    mark_findings(ax, df, "size", column)
    return column


def roof_text(value: float) -> str:
    """A roof's value in three significant digits, without an exponent: 51.3, 990, 4310."""
    return f"{float(f'{value:.3g}'):g}"


def roofs(ax, df: pd.DataFrame, gpu: str, tflops: bool) -> None:
    """The roofs of the quantity drawn, each a horizontal line: the measured copy (one per run's ceilings) and the
    datasheet bandwidth, or the measured GEMM peak of the panel's compute unit and its datasheet peak. Their values
    are written over the highest roof or rate (a finding may lie above its roof): the measured ones left (black), the
    datasheet's right (grey), so that no rate crosses a label and no label another."""
    spec = spec_for(gpu)
    units = sorted(set(df["compute_unit"]))
    if tflops:
        named = len(units) > 1  # one unit a panel: the panel's title names it
        measured = [(f"{u} GEMM" if named else "", v)
                    for u in units
                    for v in set(df.loc[df["compute_unit"] == u, "peak_tflops_measured"])]
        sheet = [(u if named else "", spec.peak_flops(u) / 1e12) for u in units] if spec else []
    else:
        measured = [("copy", v) for v in set(df["peak_bandwidth_measured_gbps"])]  # one per run's ceilings
        sheet = [("", spec.mem_bandwidth / 1e9)] if spec else []
    measured = sorted((n, v) for n, v in measured if np.isfinite(v))
    _, rate, band = rates(df, tflops)
    top = np.nanmax([v for _, v in measured + sheet] + [rate.max()] + ([band[1].max()] if band is not None else []))
    ends = {"measured": (df["size"].min(), False), "datasheet": (df["size"].max(), True)}
    for kind, lines in (("measured", measured), ("datasheet", sheet)):
        x, right = ends[kind]
        for _, value in lines:
            ax.axhline(value, ls="-", zorder=1, **ROOF[kind])
        if lines:
            text = f"{kind} " + ", ".join(f"{name} {roof_text(value)}".strip() for name, value in lines)
            ax.annotate(text, (x, top), textcoords="offset points", xytext=(-2 if right else 2, 2), va="bottom",
                        ha="right" if right else "left", fontsize=7, color=ROOF[kind]["color"])


def make_room(fig, axes, log: bool) -> None:
    """Raise the shared y axis's top until every roof label fits under it (the axes' height, in inches, is set by
    the layout: the labels' height in axes units is fixed, the roof's share of the axis is what moves)."""
    fig.canvas.draw()
    lo, hi = axes[0].get_ylim()
    f = np.log10 if log else (lambda v: v)
    need = 0.0  # the fraction of the axis under each label's top that the label's roof may take
    for ax in axes:
        box = ax.get_window_extent()
        for t in ax.texts:
            over = (t.get_window_extent().y1 - box.y0) / box.height
            roof = (f(t.xy[1]) - f(lo)) / (f(hi) - f(lo))
            need = max(need, over - roof)
    if need > 0:
        span = (f(max(t.xy[1] for ax in axes for t in ax.texts)) - f(lo)) / (0.97 - need)
        axes[0].set_ylim(lo, max(hi, 10**(np.log10(lo) + span) if log else lo + span))


def main(argv=None):
    args = parse_args(SCOPE, argv)
    setup()
    metrics = read_metrics(args.metrics)
    df = claimable(metrics, args.gpu, args.kernel)
    df = df[df["pass"] == "fwd"]
    if df.empty:
        fig, ax = new_figure("bandwidth", 1.6)
        no_data(ax, f"no correct, timed {args.kernel} measurements on {args.gpu}")
        save(fig, args)
        return
    tflops = compute_bound(df)
    dtypes = [d for d in DTYPES if d in set(df["dtype"])]
    ncols = min(2, len(dtypes))  # two panels a row: each wide enough for its roofs' labels
    nrows = -(-len(dtypes) // ncols)
    fig, axes = new_figure("bandwidth", PANEL_IN * nrows + 0.7, nrows=nrows, ncols=ncols, squeeze=False, sharey=True)
    width_in = print_size("bandwidth")[0] / ncols - 0.55  # a panel's axes: its share of the width, less its labels
    unlabelled: set[int] = set()
    for ax, dtype in zip(axes.flat, dtypes):
        d = df[df["dtype"] == dtype]
        draw(ax, d, tflops)
        roofs(ax, d, args.gpu, tflops)
        unlabelled |= set(size_axis(ax, d["size"], width_in))
        units = ", ".join(sorted(set(d["compute_unit"])))
        ax.set_title(f"{dtype}: {units} GEMM peaks" if tflops else dtype)
        ax.set_xlabel(size_label(d, width_in))
    for ax in axes.flat[len(dtypes):]:
        ax.set_axis_off()
    frame = time_frame(args.gpu)
    top = axes[0][0]
    if tflops:
        top.set_yscale("log")
        plain_log_ticks(top.yaxis, np.concatenate([line.get_ydata() for ax in axes.flat for line in ax.get_lines()]))
    else:
        top.set_ylim(bottom=0)
    for ax in axes[:, 0]:
        ax.set_ylabel(f"achieved {'TFLOP/s' if tflops else 'bandwidth [GB/s]'},\n{frame}")
    fig.suptitle(f"{args.kernel} on {gpu_name(args.gpu)} ({frame}, p20-p80 bars)")
    handles = [
        Line2D([], [], color=PALETTE[i], marker=MARKER[i], ms=3, lw=1.1, label=IMPL_LABEL[i]) for i in impls_present(df)
    ]
    found = {lab: h for ax in axes.flat for h, lab in zip(*ax.get_legend_handles_labels()) if lab.startswith("above")}
    handles += list(found.values())
    if unlabelled:
        handles.append(Line2D([], [], ls="", label=unlabelled_note(unlabelled)))
    spare = axes.flat[len(dtypes):]
    if len(spare):  # an empty panel's place: the legend fills it
        spare[0].legend(handles=handles, loc="center", handlelength=2.0)
    else:
        fig.legend(handles=handles, loc="outside lower center", ncols=min(3, len(handles)), handlelength=2.0)
    make_room(fig, [ax for ax in axes.flat if ax.axison], tflops)
    save(fig, args)


if __name__ == "__main__":
    main()
