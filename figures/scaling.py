"""Time against size on one GPU, one panel per kernel (log-log), for the PyTorch builtin and ours. Message: what a
Python loop sees of small problems is a launch-bound plateau (time flat in N), while the device time under it keeps
shrinking; large problems follow the work (N^2 for elementwise and row kernels, N^3 for matmul).

Two implementations a panel, each its own colour, so that the frames stay apart: the builtin and ours (Triton; on a
device where none of ours is timed, the CPU, torch.compile): the rest are in the speedup and bandwidth figures. The
three frames: solid, median_ms (GPU time of one call, L2 flushed, stream held so host launch cost is not timed), with
its p20-p80 band; dashed, graph_median_ms (CUDA graph replay); thin with crosses, loop_ms (Python loop: back-to-back
calls, launch included: the plateau). Grey dotted: a guide with the kernel's own scaling, anchored at the fastest
time at the largest size; grey dash-dot: the launch floor (fastest loop time at the smallest size); triangles at the
top edge: each implementation's crossover N in GPU time (analysis/why_tables.py plateau: where the work at the large-N
rate outgrows the fixed cost). Each panel's x axis is its kernel's N (rooflab/shapes.py); a size whose tick label has
no room (1793 beside 2048) keeps a short tick, named under the legend. On the CPU only what applies is drawn: host
time and the Python loop, no CUDA graph, no launch floor. One dtype per figure (float32 where measured) so that the
panels stay readable: three panels a row at the page's width, the legend under them.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from analysis.why_tables import plateau
from figures import SCOPES
from figures._common import (IMPL_LABEL, MARKER, PALETTE, claimable, gpu_name, impls_present, is_cpu, new_figure,
                             no_data_figure, parse_args, plain_log_ticks, print_size, read_metrics, save, setup,
                             size_axis, size_label, spread, time_frame, time_label, unlabelled_note)
from rooflab.kernel import DTYPES

SCOPE = SCOPES["scaling"]
CUBIC = {"matmul"}  # kernels whose work grows as N^3 (M = N = K); the rest as N^2
BASELINE = "builtin"
OURS_FIRST = ("triton", "cuda", "compile", "naive")  # beside the builtin: ours, else what the device timed


def shown(df: pd.DataFrame) -> list[str]:
    """The two implementations drawn: the builtin and the first of OURS_FIRST measured (each where present)."""
    present = impls_present(df)
    return [i for i in present if i == BASELINE] + [i for i in OURS_FIRST if i in present][:1]


def pick_dtype(df: pd.DataFrame) -> str:
    for d in DTYPES:
        if d in set(df["dtype"]):
            return d
    return df["dtype"].iloc[0]


def draw(ax, k: pd.DataFrame, kernel: str, floor_line: bool = True, width_in: float | None = None,
         crossover: dict | None = None, impls: list[str] | None = None) -> list[int]:
    """One kernel's panel: each of `impls` (default: every implementation) in the three frames, the median with
    its p20-p80 band; the launch floor only where launches exist (floor_line); a triangle under the top edge at each
    implementation's crossover N (the paper's plateau table: the first N whose work, at the largest N's rate,
    outgrows the smallest N's fixed cost). The guide's anchor and the floor are the fastest of every implementation
    of `k`. Returns the sizes whose tick has no label."""
    impls = impls_present(k) if impls is None else impls
    for impl in impls:
        g = k[k["impl"] == impl].sort_values("size")
        ax.plot(g["size"], g["median_ms"], "-", marker=MARKER[impl], color=PALETTE[impl], ms=2.5, lw=1.1)
        band = spread(g)
        if band is not None:
            ax.fill_between(g["size"], band[0], band[1], color=PALETTE[impl], alpha=0.2, lw=0)
        graph = g.dropna(subset=["graph_median_ms"])
        if len(graph):
            ax.plot(graph["size"], graph["graph_median_ms"], "--", color=PALETTE[impl], lw=0.8, alpha=0.8)
        loop = g.dropna(subset=["loop_ms"])
        if len(loop):
            ax.plot(loop["size"], loop["loop_ms"], "-x", color=PALETTE[impl], lw=0.6, ms=2.5, alpha=0.55)
        n = (crossover or {}).get(impl, np.nan)
        if np.isfinite(n):  # a second implementation at the same N under the first, not hidden by it
            y = 0.97 - 0.08 * sum(crossover.get(i) == n for i in impls[:impls.index(impl)])
            ax.plot([n], [y], "v", color=PALETTE[impl], ms=4, transform=ax.get_xaxis_transform(), clip_on=False)
    sizes = np.array(sorted(set(k["size"])), dtype=float)
    power = 3 if kernel in CUBIC else 2
    n_max = sizes.max()
    anchor = k.loc[k["size"] == n_max, "median_ms"].min()
    guide = anchor * (sizes / n_max)**power
    ax.plot(sizes, guide, ":", color="0.35", lw=1.0)
    at = min(1, len(sizes) - 1)  # under the guide's second point: the lowest line there, with room under it
    ax.annotate(f"∝ N$^{power}$", (sizes[at], guide[at]), textcoords="offset points", xytext=(2, -3), ha="left",
                va="top", fontsize=7, color="0.35")
    if floor_line:
        smallest = k[k["size"] == sizes.min()]
        floor = smallest["loop_ms"].min() if smallest["loop_ms"].notna().any() else smallest["median_ms"].min()
        ax.axhline(floor, color="0.5", ls="-.", lw=0.8)
    # the floor's value in the title: on the plot, every frame's line crosses it somewhere
    ax.set_title(f"{kernel}, floor {time_label(floor)}" if floor_line else kernel)
    unlabelled = size_axis(ax, sizes, width_in)
    ax.set_yscale("log")
    d = k[k["impl"].isin(impls)]
    plain_log_ticks(ax.yaxis,
                    np.concatenate([d["median_ms"], d["graph_median_ms"].dropna(), d["loop_ms"].dropna(), guide]))
    return unlabelled


def main(argv=None):
    args = parse_args(SCOPE, argv)
    setup()
    metrics = read_metrics(args.metrics)
    df = claimable(metrics, args.gpu)
    df = df[df["pass"] == "fwd"]
    for col in ("graph_median_ms", "loop_ms"):  # results from before a column existed still draw
        if col not in df:
            df = df.assign(**{col: np.nan})
    title = f"Time vs size, {gpu_name(args.gpu)}"
    if df.empty:
        no_data_figure(args, title, f"no correct, timed measurements on {args.gpu}")
        return
    dtype = pick_dtype(df)
    df = df[df["dtype"] == dtype]
    kernels = sorted(set(df["kernel"]))
    ncols = min(3, len(kernels))
    nrows = math.ceil(len(kernels) / ncols)
    fig, axes = new_figure("scaling", 1.75 * nrows + 0.9, nrows=nrows, ncols=ncols, squeeze=False)
    cpu = is_cpu(args.gpu)
    panel_in = print_size("scaling")[0] / ncols - 0.55  # a panel's axes: its share of the width, less its labels
    cross = plateau(metrics[metrics["dtype"] == dtype], args.gpu)  # the plotted dtype's, in GPU time (host on CPU)
    unlabelled: set[int] = set()
    for ax, kernel in zip(axes.flat, kernels):
        c = cross[cross["kernel"] == kernel]
        unlabelled |= set(
            draw(ax, df[df["kernel"] == kernel], kernel, floor_line=not cpu, width_in=panel_in,
                 crossover=dict(zip(c["impl"], c["crossover"])), impls=shown(df)))
    for ax in axes.flat[len(kernels):]:
        ax.set_axis_off()
    for ax in axes[:, 0]:
        ax.set_ylabel(f"time [ms], {time_frame(args.gpu)}")
    for ax, kernel in zip(axes.flat, kernels):  # each panel's size axis in its kernel's shape family
        ax.set_xlabel(size_label(df[df["kernel"] == kernel], panel_in))
    impls = shown(df)
    handles = [Line2D([], [], color=PALETTE[i], marker=MARKER[i], ms=3, label=IMPL_LABEL[i]) for i in impls]
    if cpu:
        handles += [
            Line2D([], [], color="0.3", ls="-", label="host time, one call (p20-p80 band)"),
            Line2D([], [], color="0.3", ls="-", marker="x", lw=0.7, ms=3, label="Python loop"),
            Line2D([], [], color="0.35", ls=":", label="work scaling guide"),
            Line2D([], [], color="0.3", ls="", marker="v", ms=4, label="crossover: work outgrows fixed cost")
        ]
    else:
        handles += [
            Line2D([], [], color="0.3", ls="-", label="GPU time, L2 flushed (p20-p80 band)"),
            Line2D([], [], color="0.3", ls="--", label="CUDA graph replay"),
            Line2D([], [], color="0.3", ls="-", marker="x", lw=0.7, ms=3, label="Python loop (launch incl.)"),
            Line2D([], [], color="0.35", ls=":", label="work scaling guide"),
            Line2D([], [], color="0.5", ls="-.", label="launch floor"),
            Line2D([], [], color="0.3", ls="", marker="v", ms=4, label="crossover: work outgrows fixed cost")
        ]
    if unlabelled:
        handles.append(Line2D([], [], ls="", label=unlabelled_note(unlabelled)))
    fig.legend(handles=handles, loc="outside lower center", ncols=3)
    message = "flat: per-call overhead, then the work" if cpu else "flat: launch-bound, then the work"
    fig.suptitle(f"{title} ({dtype}): {message}")
    save(fig, args)


if __name__ == "__main__":
    main()
