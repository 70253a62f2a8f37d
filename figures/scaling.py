"""Time per call against size on one GPU, one panel per kernel (log-log), for the PyTorch builtin and ours. Message:
small problems sit on a plateau (time flat in N) of what a call costs whatever its work, large ones follow the work
(N^2 for elementwise and row kernels, N^3 for matmul). The plateau is not one cost: in GPU time it is the kernel's
start-up and tail and what timing one call alone costs (no launch: the stream is held); the Python loop adds the
launch on top of it; a CUDA graph replays calls back to back, without launch or L2 flush (rooflab/timers.py).

Two implementations a panel, each its own colour, so that the frames stay apart: the builtin and ours (Triton; on a
device where none of ours is timed, the CPU, torch.compile): the rest are in the speedup and bandwidth figures. The
three frames, each a time per call: solid, median_ms (GPU time of one call, L2 flushed, stream held so host launch
cost is not timed), with its p20-p80 band; dashed, graph_median_ms (CUDA graph replay); thin with crosses, loop_ms
(Python loop: back-to-back calls, launch included). The y axis reads microseconds (the lines are the rows' ms). Grey
dotted: a guide with the kernel's own scaling, anchored at the fastest time at the largest size; grey dash-dot: the
launch floor, the fastest Python-loop time at the smallest size (where no loop was timed, the fastest GPU time
there, named so), its value in the panel's title; triangles at the top edge: each implementation's crossover N in
GPU time (analysis/why_tables.py plateau: where the work at the large-N rate outgrows the fixed cost). Each panel's
x axis is its kernel's N (rooflab/shapes.py), its ticks labelled once the figure is laid out, from each panel's
width as drawn, so that no two labels come within GAP_PT; a size whose label has no room (1793 beside 2048) keeps a
short tick, named under the legend. On the CPU only what applies is drawn: host time and the Python loop, no CUDA
graph, no launch floor. One dtype per figure (float32 where measured) so that the panels stay readable: three
panels a row at the page's width, the legend under them.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from analysis.why_tables import plateau
from figures import SCOPES
from figures._common import (IMPL_LABEL, MARKER, PALETTE, claimable, gpu_name, impls_present, is_cpu, new_figure,
                             no_data_figure, parse_args, plain_log_ticks, print_size, read_metrics, save, setup,
                             size_axis, size_label, spread, unlabelled_note)
from rooflab.kernel import DTYPES

SCOPE = SCOPES["scaling"]
CUBIC = {"matmul"}  # kernels whose work grows as N^3 (M = N = K); the rest as N^2
BASELINE = "builtin"
OURS_FIRST = ("triton", "cuda", "compile", "naive")  # beside the builtin: ours, else what the device timed
GAP_PT = 4.0  # the least room between two size labels: a digit's width and more, so that 4096 8192 read as two
EDGE_OCTAVES = 0.12  # the x axis's margin beyond the smallest and largest size, in octaves (a marker's room)
Y_LABEL = "time per call [µs]"  # every frame drawn is one: GPU time, graph replay, Python loop


def time_label(ms: float) -> str:
    """A time with the unit that keeps it short: 3.2 µs, 41 ms, 1.2 s."""
    if ms < 1:
        return f"{ms * 1e3:.3g} µs"
    if ms < 1e3:
        return f"{ms:.3g} ms"
    return f"{ms / 1e3:.3g} s"


def fit_size_axes(fig, axes_sizes, narrowest: dict | None = None) -> set[int]:
    """figures/_common.size_axis again for each (axes, sizes), on the laid-out figure: with each axes' width as
    drawn (constrained layout gives it less than its share of the page: its y labels, a last label past its end), no
    two labels within GAP_PT. `narrowest` keeps each axes' narrowest width so far: labels that fit it fit any layout
    that the labels' own room gives. Returns the sizes left without a label, for the legend to name."""
    fig.canvas.draw()
    narrowest = {} if narrowest is None else narrowest
    unlabelled: set[int] = set()
    for ax, sizes in axes_sizes:
        width = min(narrowest.get(ax, np.inf), ax.get_window_extent().width / fig.dpi)
        narrowest[ax] = width
        unlabelled |= set(size_axis(ax, sizes, width, GAP_PT))
    return unlabelled


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
        loop = smallest["loop_ms"].notna().any()
        floor = smallest["loop_ms"].min() if loop else smallest["median_ms"].min()
        ax.axhline(floor, color="0.5", ls="-.", lw=0.8)
    # the floor's value in the title: on the plot, every frame's line crosses it somewhere
    ax.set_title(f"{kernel}, {'launch' if loop else 'GPU-time'} floor {time_label(floor)}" if floor_line else kernel)
    ax.set_xlim(sizes.min() / 2**EDGE_OCTAVES, sizes.max() * 2**EDGE_OCTAVES)
    unlabelled = size_axis(ax, sizes, width_in, GAP_PT)
    ax.set_yscale("log")
    d = k[k["impl"].isin(impls)]
    plain_log_ticks(ax.yaxis,
                    np.concatenate([d["median_ms"], d["graph_median_ms"].dropna(), d["loop_ms"].dropna(), guide]))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda ms, _: f"{ms * 1e3:g}"))  # drawn in ms, read in µs
    return unlabelled


def floor_label(df: pd.DataFrame) -> str:
    """The legend's words for the dash-dot floor: the Python loop's (launch included), else GPU time's."""
    return "launch floor (loop, smallest N)" if df["loop_ms"].notna().any() else "GPU-time floor (smallest N)"


def main(argv=None):
    args = parse_args(SCOPE, argv)
    setup()
    metrics = read_metrics(args.metrics)
    df = claimable(metrics, args.gpu)
    df = df[df["pass"] == "fwd"]
    for col in ("graph_median_ms", "loop_ms"):  # results from before a column existed still draw
        if col not in df:
            df = df.assign(**{col: np.nan})
    title = f"Time per call vs size, {gpu_name(args.gpu)}"
    if df.empty:
        no_data_figure(args, title, f"no correct, timed measurements on {args.gpu}")
        return
    dtype = pick_dtype(df)
    df = df[df["dtype"] == dtype]
    kernels = sorted(set(df["kernel"]))
    ncols = min(3, len(kernels))
    nrows = math.ceil(len(kernels) / ncols)
    fig, axes = new_figure("scaling", 1.75 * nrows + 0.9, nrows=nrows, ncols=ncols, squeeze=False)
    fig.get_layout_engine().set(w_pad=0.01)  # the panels' width to their size labels (GAP_PT apart)
    cpu = is_cpu(args.gpu)
    panel_in = print_size("scaling")[0] / ncols - 0.55  # a panel's axes: its share of the width, less its labels
    cross = plateau(metrics[metrics["dtype"] == dtype], args.gpu)  # the plotted dtype's, in GPU time (host on CPU)
    for ax, kernel in zip(axes.flat, kernels):
        c = cross[cross["kernel"] == kernel]
        draw(ax, df[df["kernel"] == kernel], kernel, floor_line=not cpu, width_in=panel_in,
             crossover=dict(zip(c["impl"], c["crossover"])), impls=shown(df))
    for ax in axes.flat[len(kernels):]:
        ax.set_axis_off()
    for ax in axes[:, 0]:
        ax.set_ylabel(Y_LABEL)  # the frames: in the legend
    for ax, kernel in zip(axes.flat, kernels):  # each panel's size axis in its kernel's shape family
        ax.set_xlabel(size_label(df[df["kernel"] == kernel], panel_in))
    panels = [(ax, df.loc[df["kernel"] == k, "size"]) for ax, k in zip(axes.flat, kernels)]
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
            Line2D([], [], color="0.5", ls="-.", label=floor_label(df)),
            Line2D([], [], color="0.3", ls="", marker="v", ms=4, label="crossover: work outgrows fixed cost")
        ]
    legend, unlabelled, narrowest = None, None, {}
    for _ in range(4):  # the legend (its note of the sizes left unlabelled) and the labels take room: until settled
        fitted = fit_size_axes(fig, panels, narrowest)
        if fitted == unlabelled:
            break
        if legend is not None:
            legend.remove()
        unlabelled = fitted
        note = [Line2D([], [], ls="", label=unlabelled_note(unlabelled))] if unlabelled else []
        legend = fig.legend(handles=handles + note, loc="outside lower center", ncols=3)
    fig.suptitle(f"{title} ({dtype}): a fixed cost per call, then the work")
    save(fig, args)


if __name__ == "__main__":
    main()
