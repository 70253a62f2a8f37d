"""Real shapes on one GPU: at every shape of the shape sets (config shapes: llm, odd, explicit), our Triton kernel
over the best of the PyTorch builtin and torch.compile in GPU time. Message: where ours wins or loses once the
problem is no longer N x N.

One panel per kernel, log-log: x = the work of one call in the kernel's own model (no one N fits rows x cols or
M x K x N): FLOPs for a compute-bound kernel (matmul, attention: most of our cells above the ridge, metrics' `bound`:
x_quantity), bytes moved for the others, each named under its panel, or under the lowest of the panels stacked above
one another that read the same quantity; the panels of one quantity share their x range, so that they compare;
y = best PyTorch time / ours (above 1: ours faster), shared by all; one colour and marker per set; a filled marker
is a win or a loss beyond noise, a hollow one a tie (analysis/shapes.py: verdict). The forward pass in bfloat16
(else the dtype most cells have), as the paper's table (analysis/shapes.py).

    python -m figures.shapes --metrics results/metrics/h200/shapes/*/*.parquet --gpu h200 --pdf X.pdf --png X.png
"""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from analysis.columns import flags
from analysis.shapes import one_dtype, ours_over_best
from figures import SCOPES
from figures._common import gpu_name, new_figure, no_data_figure, parse_args, save, setup

SCOPE = SCOPES["shapes"]

SET_COLOUR = {"llm": "#0072B2", "odd": "#D55E00", "custom": "#009E73"}  # Okabe-Ito
SET_MARKER = {"llm": "o", "odd": "s", "custom": "D"}
RATIO_TICKS = [0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4]  # a ratio axis spans little of a decade: 1-2-5 would tick 1 and 2
PANEL_IN = 1.15  # one row of panels, with its title and tick labels
X_AXIS = {"flops": "FLOPs per call", "bytes": "bytes moved per call"}  # the work of one call, by what bounds it


def x_quantity(metrics: pd.DataFrame, d: pd.DataFrame) -> dict[str, str]:
    """Per kernel of `d` (the cells drawn), the column its panel's x axis draws: 'flops' where most of our correct,
    timed (Triton) cells in the dtype and pass drawn are compute-bound (metrics' `bound`, the roofline's verdict),
    else 'bytes'; 'bytes' for every kernel where the metrics carry no verdict."""
    ok = metrics[flags(metrics, "claimable")] if "claimable" in metrics else metrics[metrics["status"] == "ok"]
    out = {}
    for kernel in sorted(set(d["kernel"])):
        ours = ok[(ok["kernel"] == kernel) & (ok["impl"] == "triton") & ok["dtype"].isin(set(d["dtype"]))
                  & ok["pass"].isin(set(d["pass"]))]
        bound = ours["bound"] if "bound" in ours else pd.Series(dtype=object)
        out[kernel] = "flops" if len(bound) and (bound == "compute").mean() > 0.5 else "bytes"
    return out


def main(argv=None) -> None:
    from figures.speedup import floored_metrics

    metrics, rules, rest = floored_metrics(argv)
    args = parse_args("gpu", rest)
    setup()
    table = ours_over_best(metrics, rules)
    d = one_dtype(table[table["gpu"] == args.gpu])
    title = f"{gpu_name(args.gpu)}: ours over the best of PyTorch at real shapes"
    if d.empty:
        no_data_figure(args, title, "no shape set with a timed Triton cell and a timed PyTorch baseline here")
        return
    x_of = x_quantity(metrics[metrics["gpu"] == args.gpu], d)
    kernels = sorted(x_of)
    ncols = min(3, len(kernels))
    nrows = math.ceil(len(kernels) / ncols)
    groups = len(set(x_of.values()))  # a second x quantity labels a row of panels more
    fig, axes = new_figure("shapes", PANEL_IN * nrows + 0.75 + 0.25 * (groups - 1), nrows=nrows, ncols=ncols,
                           squeeze=False, sharey=True)
    sets = list(dict.fromkeys(d["preset"]))
    first: dict[str, object] = {}  # each x quantity's first panel: the others of that quantity share its x axis
    for i, (ax, kernel) in enumerate(zip(axes.flat, kernels)):
        k, x = d[d["kernel"] == kernel], x_of[kernel]
        if x in first:
            ax.sharex(first[x])
        first.setdefault(x, ax)
        ax.axhline(1.0, color="0.3", lw=0.8, ls="--", zorder=1)
        for preset, p in k.groupby("preset", sort=True):
            colour, tie = SET_COLOUR.get(preset, "0.4"), (p["verdict"] == "tie").to_numpy()
            ax.scatter(p[x], p["ratio"], marker=SET_MARKER.get(preset, "^"), s=16, linewidths=0.8, zorder=3,
                       facecolors=np.where(tie, "none", colour), edgecolors=colour)
        ax.set_title(kernel)
        ax.set_xscale("log")
        below = i + ncols
        if below < len(kernels) and x_of[kernels[below]] == x:  # the panel under it reads the same x axis
            ax.tick_params(labelbottom=False)
        else:
            ax.set_xlabel(X_AXIS[x])
    for ax in axes.flat[len(kernels):]:
        ax.set_axis_off()
    top = axes[0][0]
    top.set_yscale("log")
    top.yaxis.set_major_locator(FixedLocator(RATIO_TICKS))
    top.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    top.yaxis.set_minor_locator(NullLocator())
    fig.supylabel("best PyTorch / ours", fontsize=plt.rcParams["axes.labelsize"])  # once: the panels share it
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
