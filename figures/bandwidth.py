"""Achieved bandwidth vs size for one kernel on one GPU, per implementation and dtype, against the measured copy
bandwidth. Message: which implementation reaches the memory wall, and from what size on.

Rates are in the median's frame (GPU time: one call, stream held, L2 flushed; host time on the CPU); each point
carries its spread as a bar from the p80 time (low rate) to the p20 time (high rate). A point above its roof is
ringed: it is in the paper's findings table.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from figures import SCOPES
from figures._common import (IMPL_LABEL, PALETTE, claimable, gpu_name, impls_present, mark_findings, no_data,
                             parse_args, read_metrics, save, setup, size_axis, spread, time_frame)
from rooflab.gpus import spec_for
from rooflab.kernel import DTYPES

SCOPE = SCOPES["bandwidth"]
DTYPE_STYLE = dict(zip(DTYPES, [("-", "o"), ("-.", "D"), ("--", "s"), (":", "^")]))


def draw(ax, df: pd.DataFrame) -> None:
    """One line per (implementation, dtype), with p20-p80 error bars, and the findings ringed."""
    for impl in impls_present(df):
        for dtype in [d for d in DTYPES if d in set(df["dtype"])]:
            g = df[(df["impl"] == impl) & (df["dtype"] == dtype)].sort_values("size")
            if g.empty:
                continue
            ls, marker = DTYPE_STYLE[dtype]
            band = spread(g, nbytes=True)
            yerr = None if band is None else [(g["achieved_gbps"] - band[0]).clip(lower=0),
                                              (band[1] - g["achieved_gbps"]).clip(lower=0)]
            ax.errorbar(g["size"], g["achieved_gbps"], yerr=yerr, color=PALETTE[impl], ls=ls, marker=marker, ms=4,
                        lw=1.3, capsize=2, elinewidth=0.8)
    mark_findings(ax, df, "size", "achieved_gbps")


def main(argv=None):
    args = parse_args(SCOPE, argv)
    setup()
    metrics = read_metrics(args.metrics)
    df = claimable(metrics, args.gpu, args.kernel)
    df = df[df["pass"] == "fwd"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if df.empty:
        no_data(ax, f"no correct, timed {args.kernel} measurements on {args.gpu}")
        save(fig, args)
        return
    draw(ax, df)
    for copy in sorted(set(df["peak_bandwidth_measured_gbps"].dropna())):  # one line per run's ceilings
        ax.axhline(copy, color="tab:red", ls="--", lw=1)
        ax.annotate(f"measured copy {copy:.0f} GB/s", (df["size"].min(), copy),
                    textcoords="offset points", xytext=(2, -11), fontsize=8, color="tab:red")
    spec = spec_for(args.gpu)
    if spec:
        ax.axhline(spec.mem_bandwidth / 1e9, color="0.3", ls="-", lw=0.9)
        ax.annotate(f"datasheet {spec.mem_bandwidth / 1e9:.0f} GB/s", (df["size"].max(), spec.mem_bandwidth / 1e9),
                    textcoords="offset points", xytext=(-2, -11), ha="right", fontsize=8, color="0.3")
    size_axis(ax, df["size"])
    ax.set_xlabel("N (problem N x N)")
    frame = time_frame(args.gpu)
    ax.set_ylabel(f"achieved bandwidth [GB/s], {frame}")
    ax.set_title(f"{args.kernel} on {gpu_name(args.gpu)} ({frame}, p20-p80 bars): who reaches the memory wall",
                 fontsize=11)
    handles = [Line2D([], [], color=PALETTE[i], lw=1.3, label=IMPL_LABEL[i]) for i in impls_present(df)]
    handles += [Line2D([], [], color="0.3", ls=DTYPE_STYLE[d][0], marker=DTYPE_STYLE[d][1], ms=4, label=d)
                for d in DTYPES if d in set(df["dtype"])]
    handles += [h for h, lab in zip(*ax.get_legend_handles_labels()) if lab.startswith("above")]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    save(fig, args)


if __name__ == "__main__":
    main()
