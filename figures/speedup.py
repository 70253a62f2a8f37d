"""Speedup over the PyTorch builtin on one GPU, in GPU time (host time on the CPU): a heatmap of kernel x
implementation (rows) against size (columns), one panel per dtype, every cell annotated. Message: where each
implementation beats the builtin (blue) and where it loses (red), beyond noise.

speedup = builtin median time / this median time, within the same (kernel, dtype, size, pass), correct cells only
(analysis/metrics.py: speedup_vs_builtin). Colour is log2(speedup), so 2x and 0.5x are equally far from white; a
cell whose verdict (verdict_vs_builtin) is a tie is white and reads "tie", whatever its ratio: within noise it is
neither faster nor slower.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from figures import SCOPES
from figures._common import (IMPL_LABEL, IMPL_ORDER, claimable, gpu_name, no_data_figure, parse_args, read_metrics,
                             save, setup, time_frame)
from rooflab.kernel import DTYPES

SCOPE = SCOPES["speedup"]
LIMIT = 3.0  # colour saturates at 2^-3 = 0.125x and 2^3 = 8x


def heat_table(df: pd.DataFrame, values: str = "speedup_vs_builtin") -> pd.DataFrame:
    """Rows 'kernel | impl' (pass added where a kernel has several), columns size; values speedup_vs_builtin (or
    another column, e.g. verdict_vs_builtin)."""
    df = df[df["impl"] != "builtin"].copy()
    multi_pass = df.groupby("kernel")["pass"].transform("nunique") > 1
    df["row"] = df["kernel"] + np.where(multi_pass, " " + df["pass"], "") + " | " + df["impl"].map(IMPL_LABEL)
    df["impl_rank"] = df["impl"].map({k: i for i, k in enumerate(IMPL_ORDER)})
    order = df.sort_values(["kernel", "pass", "impl_rank"])["row"].drop_duplicates()
    table = df.pivot_table(index="row", columns="size", values=values, aggfunc="first")
    return table.reindex(order)


def colours_and_labels(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(log2 colour values, annotations) of one panel: a tie is white (0) and reads 'tie'."""
    speed = heat_table(df)
    verdicts = heat_table(df.assign(verdict_vs_builtin=df.get("verdict_vs_builtin", "").fillna("")),
                          "verdict_vs_builtin").reindex(index=speed.index, columns=speed.columns) \
        if "verdict_vs_builtin" in df else pd.DataFrame("", index=speed.index, columns=speed.columns)
    tie = verdicts == "tie"
    colour = np.log2(speed).mask(tie, 0.0)
    labels = speed.map(lambda v: f"{v:.2g}" if np.isfinite(v) else "").mask(tie, "tie")
    return colour, labels


def main(argv=None):
    args = parse_args(SCOPE, argv)
    setup()
    metrics = read_metrics(args.metrics)
    df = claimable(metrics, args.gpu).dropna(subset=["speedup_vs_builtin"])
    title = f"Speedup over the PyTorch builtin on {gpu_name(args.gpu)} ({time_frame(args.gpu)})"
    if df[df["impl"] != "builtin"].empty:
        no_data_figure(args, title, f"no correct, timed cell with a builtin baseline on {args.gpu}")
        return
    dtypes = [d for d in DTYPES if d in set(df["dtype"])]
    tables = {d: colours_and_labels(df[df["dtype"] == d]) for d in dtypes}
    rows = max(len(t) for t, _ in tables.values())
    width = sum(1.2 + 0.62 * t.shape[1] for t, _ in tables.values()) + 3.5
    fig, axes = plt.subplots(1, len(dtypes), figsize=(width, max(3.2, 1.4 + 0.3 * rows)), squeeze=False,
                             gridspec_kw={"width_ratios": [t.shape[1] for t, _ in tables.values()]})
    for i, (ax, dtype) in enumerate(zip(axes[0], dtypes)):
        t, labels = tables[dtype]
        sns.heatmap(t, annot=labels, fmt="", cmap="RdBu", center=0, vmin=-LIMIT, vmax=LIMIT,
                    annot_kws={"fontsize": 7}, linewidths=0.5, linecolor="white", ax=ax,
                    cbar=i == len(dtypes) - 1, cbar_kws={"label": "speedup over builtin [x]", "shrink": 0.8},
                    yticklabels=True)
        ax.set_title(dtype, fontsize=10)
        ax.set_xlabel("N (problem N x N; matmul N x N x N)")
        ax.set_ylabel("kernel | implementation" if i == 0 else "")
        ax.tick_params(axis="y", labelsize=8)
        ax.tick_params(axis="x", labelsize=8, rotation=0)
        if i > 0:
            ax.set_yticks(ax.get_yticks())
            ax.set_yticklabels([] if list(t.index) == list(tables[dtypes[0]][0].index) else t.index, fontsize=8)
    cbar = axes[0][-1].collections[0].colorbar
    ticks = np.arange(-LIMIT, LIMIT + 1)
    cbar.set_ticks(ticks)
    cbar.set_ticklabels([f"{2.0 ** k:g}x" for k in ticks])
    fig.suptitle(f"{title}: blue cells beat it, red cells lose, beyond noise; white 'tie' = within noise; "
                 "blank = no correct timed pair", fontsize=11)
    fig.tight_layout()
    save(fig, args)


if __name__ == "__main__":
    main()
