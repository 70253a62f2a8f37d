"""Speedup over the PyTorch builtin on one GPU, in GPU time (host time on the CPU): one heatmap panel per dtype,
rows kernel | implementation, columns size (each panel's axis says what N is for each kind of kernel in it:
figures/_common.size_label), every cell annotated. Message: where each implementation beats the
builtin (blue) and where it loses (red), beyond noise.

speedup = builtin median time / this median time, within the same (kernel, dtype, size, pass), correct cells only
(analysis/metrics.py: speedup_vs_builtin). Colour is log2(speedup), so 2x and 0.5x are equally far from white; a
cell whose verdict (verdict_vs_builtin) is a tie is white and reads "tie", whatever its ratio: within noise it is
neither faster nor slower; one whose verdict is "not comparable" (its interval wider than the floor its length
allows, rooflab/verdicts.py) is white too and reads "n/c". The panels sit two a row at the page's width, each row of cells one line of 7 pt text
high, so the figure takes a float page of its own (analysis/latex.py: TALL_FIGURES).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.colors import Normalize

from analysis.columns import texts
from figures import SCOPES
from figures._common import (IMPL_ORDER, IMPL_SHORT, annotated_grid, claimable, gpu_name, new_figure, no_data_figure,
                             parse_args, print_size, read_metrics, save, setup, size_label, time_frame)
from rooflab.kernel import DTYPES

SCOPE = SCOPES["speedup"]
LIMIT = 3.0  # colour saturates at 2^-3 = 0.125x and 2^3 = 8x
ROW_IN = 0.135  # one row of cells: a line of 7 pt text and its padding
LABELS_IN = 1.4  # the rows' labels, left of the first panel ('layernorm fwd+bwd | compile')


def heat_table(df: pd.DataFrame, values: str = "speedup_vs_builtin") -> pd.DataFrame:
    """Rows 'kernel | impl' (pass added where a kernel has several), columns size; values speedup_vs_builtin (or
    another column, e.g. verdict_vs_builtin)."""
    df = df[df["impl"] != "builtin"].copy()
    multi_pass = df.groupby("kernel")["pass"].transform("nunique") > 1
    df["row"] = df["kernel"] + np.where(multi_pass, " " + df["pass"], "") + " | " + df["impl"].map(IMPL_SHORT)
    df["impl_rank"] = df["impl"].map({k: i for i, k in enumerate(IMPL_ORDER)})
    order = df.sort_values(["kernel", "pass", "impl_rank"])["row"].drop_duplicates()
    table = df.pivot_table(index="row", columns="size", values=values, aggfunc="first")
    return table.reindex(order)


def colours_and_labels(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(log2 colour values, annotations) of one panel: a tie is white (0) and reads 'tie'."""
    speed = heat_table(df)
    verdicts = heat_table(df.assign(verdict_vs_builtin=texts(df, "verdict_vs_builtin")),
                          "verdict_vs_builtin").reindex(index=speed.index, columns=speed.columns) \
        if "verdict_vs_builtin" in df else pd.DataFrame("", index=speed.index, columns=speed.columns)
    tie = verdicts == "tie"
    unknown = verdicts == "not comparable"  # its interval could hide a change of the size it would show
    colour = np.log2(speed).mask(tie | unknown, 0.0)
    labels = speed.map(cell_label).mask(tie, "tie").mask(unknown, "n/c")
    return colour, labels


def cell_label(v: float) -> str:
    """A speedup in at most four characters, so that it fits its cell at 7 pt: 0.09, 0.85, 1.2, 12."""
    if not np.isfinite(v):
        return ""
    return f"{v:.2f}" if v < 1 else f"{v:.2g}" if v < 10 else f"{v:.0f}"


def main(argv=None):
    args = parse_args(SCOPE, argv)
    setup()
    metrics = read_metrics(args.metrics)
    df = claimable(metrics, args.gpu).dropna(subset=["speedup_vs_builtin"])
    title = f"Speedup over the PyTorch builtin on {gpu_name(args.gpu)} ({time_frame(args.gpu)})"
    if df[df["impl"] != "builtin"].empty:
        no_data_figure(args, title, f"no correct, timed cell with a builtin baseline on {args.gpu}", "speedup")
        return
    dtypes = [d for d in DTYPES if d in set(df["dtype"])]
    tables = {d: colours_and_labels(df[df["dtype"] == d]) for d in dtypes}
    dtypes = sorted((d for d in dtypes if len(tables[d][0])), key=lambda d: -len(tables[d][0]))  # long ones first
    ncols = min(2, len(dtypes))
    grid = [dtypes[i:i + ncols] for i in range(0, len(dtypes), ncols)]
    order = list(heat_table(df).index)  # every row of every dtype, in order: panels side by side share their rows
    rows = [[r for r in order if any(r in tables[d][0].index for d in row)] for row in grid]
    sizes = sorted(set(df.loc[df["impl"] != "builtin", "size"]))
    fig, axes = new_figure("speedup",
                           sum(len(r) * ROW_IN + 0.5 for r in rows) + 0.85, nrows=len(grid), ncols=ncols, squeeze=False,
                           gridspec_kw={"height_ratios": [len(r) + 3.5 for r in rows]})
    norm = Normalize(-LIMIT, LIMIT)
    panel_in = (print_size("speedup")[0] - LABELS_IN) / ncols
    mesh = None
    for r, row in enumerate(grid):
        for c in range(ncols):
            ax = axes[r][c]
            if c >= len(row):
                ax.set_axis_off()
                continue
            colour, labels = (t.reindex(index=rows[r], columns=sizes) for t in tables[row[c]])
            mesh = annotated_grid(ax, colour, labels, "RdBu", norm)
            groups = [name.split(" | ")[0] for name in rows[r]]
            for i in range(1, len(groups)):  # a gap between kernels
                if groups[i] != groups[i - 1]:
                    ax.axhline(i, color="white", lw=2.5)
            ax.set_title(row[c])
            ax.set_xlabel(size_label(df[df["dtype"] == row[c]], panel_in))  # what N is for this panel's kernels
            if c:
                ax.tick_params(labelleft=False)
    cbar = fig.colorbar(mesh, ax=axes, location="bottom", shrink=0.5, aspect=35, pad=0.01)
    ticks = np.arange(-LIMIT, LIMIT + 1)
    cbar.set_ticks(ticks, labels=[f"{2.0 ** k:g}x" for k in ticks])
    cbar.set_label("speedup over the builtin: blue faster, red slower, beyond noise;\n"
                   "white 'tie': within noise; blank: no correct, timed pair")
    fig.suptitle(title)
    save(fig, args)


if __name__ == "__main__":
    main()
