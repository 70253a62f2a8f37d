"""Speedup over the PyTorch builtin on one GPU: a heatmap of kernel x implementation (rows) against size (columns),
one panel per dtype, every cell annotated. Message: where each implementation beats the builtin (blue, > 1x) and
where it loses (red, < 1x).

speedup = builtin median time / this median time, within the same (kernel, dtype, size, pass), correct cells only
(analysis/metrics.py: speedup_vs_builtin). Colour is log2(speedup), so 2x and 0.5x are equally far from white.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from figures._common import IMPL_LABEL, IMPL_ORDER, claimable, gpu_name, no_data_figure, parse_args, save, setup
from rooflab.kernel import DTYPES

SCOPE = "gpu"
LIMIT = 3.0  # colour saturates at 2^-3 = 0.125x and 2^3 = 8x


def heat_table(df: pd.DataFrame) -> pd.DataFrame:
    """Rows 'kernel | impl' (pass added where a kernel has several), columns size; values speedup_vs_builtin."""
    df = df[df["impl"] != "builtin"].copy()
    multi_pass = df.groupby("kernel")["pass"].transform("nunique") > 1
    df["row"] = df["kernel"] + np.where(multi_pass, " " + df["pass"], "") + " | " + df["impl"].map(IMPL_LABEL)
    df["impl_rank"] = df["impl"].map({k: i for i, k in enumerate(IMPL_ORDER)})
    order = df.sort_values(["kernel", "pass", "impl_rank"])["row"].drop_duplicates()
    table = df.pivot_table(index="row", columns="size", values="speedup_vs_builtin", aggfunc="first")
    return table.reindex(order)


def main(argv=None):
    args = parse_args(SCOPE, argv)
    setup()
    metrics = pd.read_parquet(args.metrics)
    df = claimable(metrics, args.gpu).dropna(subset=["speedup_vs_builtin"])
    title = f"Speedup over the PyTorch builtin on {gpu_name(args.gpu)}"
    if df[df["impl"] != "builtin"].empty:
        no_data_figure(args, title, f"no correct, timed cell with a builtin baseline on {args.gpu}")
        return
    dtypes = [d for d in DTYPES if d in set(df["dtype"])]
    tables = {d: heat_table(df[df["dtype"] == d]) for d in dtypes}
    rows = max(len(t) for t in tables.values())
    width = sum(1.2 + 0.62 * t.shape[1] for t in tables.values()) + 3.5
    fig, axes = plt.subplots(1, len(dtypes), figsize=(width, max(3.2, 1.4 + 0.3 * rows)), squeeze=False,
                             gridspec_kw={"width_ratios": [t.shape[1] for t in tables.values()]})
    for i, (ax, dtype) in enumerate(zip(axes[0], dtypes)):
        t = tables[dtype]
        sns.heatmap(np.log2(t), annot=t, fmt=".2g", cmap="RdBu", center=0, vmin=-LIMIT, vmax=LIMIT,
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
            ax.set_yticklabels([] if list(t.index) == list(tables[dtypes[0]].index) else t.index, fontsize=8)
    cbar = axes[0][-1].collections[0].colorbar
    ticks = np.arange(-LIMIT, LIMIT + 1)
    cbar.set_ticks(ticks)
    cbar.set_ticklabels([f"{2.0 ** k:g}x" for k in ticks])
    fig.suptitle(f"{title}: blue cells (> 1x) beat it, red cells lose; blank = no correct timed pair", fontsize=11)
    fig.tight_layout()
    save(fig, args)


if __name__ == "__main__":
    main()
