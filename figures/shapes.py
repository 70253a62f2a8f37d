"""Real shapes on one GPU: at every shape of the shape sets (config shapes: llm, odd, explicit), our Triton kernel
over the best of the PyTorch builtin and torch.compile in GPU time. Message: where ours wins or loses once the
problem is no longer N x N.

One panel per kernel (shared axes, so the panels compare): x = bytes one call moves (the kernel's own model; no one N
fits rows x cols or M x K x N), log; y = best PyTorch time / ours (above 1: ours faster), log; one colour and marker
per set; a filled marker is a win or a loss beyond noise, a hollow one a tie (analysis/shapes.py: verdict). The
forward pass in bfloat16 (else the dtype most cells have), as the paper's table (analysis/shapes.py).

    python -m figures.shapes --metrics results/metrics/h200/shapes/*/*.parquet --gpu h200 --pdf X.pdf --png X.png
"""
from __future__ import annotations

import math

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from analysis.shapes import one_dtype, ours_over_best
from figures import SCOPES
from figures._common import gpu_name, new_figure, no_data_figure, parse_args, read_metrics, save, setup

SCOPE = SCOPES["shapes"]

SET_COLOUR = {"llm": "#0072B2", "odd": "#D55E00", "custom": "#009E73"}  # Okabe-Ito
SET_MARKER = {"llm": "o", "odd": "s", "custom": "D"}
RATIO_TICKS = [0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4]  # a ratio axis spans little of a decade: 1-2-5 would tick 1 and 2
PANEL_IN = 1.15  # one row of panels, with its title and tick labels


def main(argv=None) -> None:
    args = parse_args("gpu", argv)
    setup()
    table = ours_over_best(read_metrics(args.metrics))
    d = one_dtype(table[table["gpu"] == args.gpu])
    title = f"{gpu_name(args.gpu)}: ours over the best of PyTorch at real shapes"
    if d.empty:
        no_data_figure(args, title, "no shape set with a timed Triton cell and a timed PyTorch baseline here")
        return
    kernels = sorted(set(d["kernel"]))
    ncols = min(3, len(kernels))
    nrows = math.ceil(len(kernels) / ncols)
    fig, axes = new_figure("shapes", PANEL_IN * nrows + 0.75, nrows=nrows, ncols=ncols, squeeze=False, sharex=True,
                           sharey=True)
    sets = list(dict.fromkeys(d["preset"]))
    for ax, kernel in zip(axes.flat, kernels):
        k = d[d["kernel"] == kernel]
        ax.axhline(1.0, color="0.3", lw=0.8, ls="--", zorder=1)
        for preset, p in k.groupby("preset", sort=True):
            colour, tie = SET_COLOUR.get(preset, "0.4"), (p["verdict"] == "tie").to_numpy()
            ax.scatter(p["bytes"], p["ratio"], marker=SET_MARKER.get(preset, "^"), s=16, linewidths=0.8, zorder=3,
                       facecolors=np.where(tie, "none", colour), edgecolors=colour)
        ax.set_title(kernel)
    for ax in axes.flat[len(kernels):]:
        ax.set_axis_off()
    top = axes[0][0]
    top.set_xscale("log")
    top.set_yscale("log")
    top.yaxis.set_major_locator(FixedLocator(RATIO_TICKS))
    top.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    top.yaxis.set_minor_locator(NullLocator())
    for ax in axes[:, 0]:
        ax.set_ylabel("best PyTorch / ours")
    for ax in axes[-1]:
        ax.set_xlabel("bytes one call moves")
    handles = [
        Line2D([], [], ls="", marker=SET_MARKER.get(s, "^"), color=SET_COLOUR.get(s, "0.4"), label=f"set {s}")
        for s in sets
    ]
    handles += [
        Line2D([], [], ls="", marker="o", color="0.3", label="ours faster or slower beyond noise"),
        Line2D([], [], ls="", marker="o", color="0.3", markerfacecolor="none", label="a tie (within noise)"),
        Line2D([], [], ls="--", color="0.3", lw=0.8, label="equal (above: ours faster)")
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=3)
    fig.suptitle(f"{title} ({d['dtype'].iloc[0]}, forward)")
    save(fig, args)


if __name__ == "__main__":
    main()
