"""Achieved bandwidth vs size for one kernel on one GPU, per implementation and dtype, against the measured copy
bandwidth. Message: which implementation reaches the memory wall, and from what size on.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from figures._common import (IMPL_LABEL, PALETTE, claimable, gpu_name, impls_present, no_data, parse_args, save,
                             setup, size_axis)
from rooflab.gpus import spec_for

SCOPE = "kernel"


def main(argv=None):
    args = parse_args(SCOPE, argv)
    setup()
    metrics = pd.read_parquet(args.metrics)
    df = claimable(metrics, args.gpu, args.kernel)
    df = df[df["pass"] == "fwd"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if df.empty:
        no_data(ax, f"no correct, timed {args.kernel} measurements on {args.gpu}")
        save(fig, args)
        return
    sns.lineplot(data=df, x="size", y="achieved_gbps", hue="impl", style="dtype", markers=True,
                 hue_order=impls_present(df), palette=PALETTE, ax=ax)
    copy = df["peak_bandwidth_measured_gbps"].dropna()
    if len(copy):
        ax.axhline(copy.iloc[0], color="tab:red", ls="--", lw=1)
        ax.annotate(f"measured copy {copy.iloc[0]:.0f} GB/s", (df["size"].min(), copy.iloc[0]),
                    textcoords="offset points", xytext=(2, -11), fontsize=8, color="tab:red")
    spec = spec_for(args.gpu)
    if spec:
        ax.axhline(spec.mem_bandwidth / 1e9, color="0.3", ls="-", lw=0.9)
        ax.annotate(f"datasheet {spec.mem_bandwidth / 1e9:.0f} GB/s", (df["size"].max(), spec.mem_bandwidth / 1e9),
                    textcoords="offset points", xytext=(-2, -11), ha="right", fontsize=8, color="0.3")
    size_axis(ax, df["size"])
    ax.set_xlabel("N (problem N x N)")
    ax.set_ylabel("achieved bandwidth [GB/s]")
    ax.set_title(f"{args.kernel} on {gpu_name(args.gpu)}: who reaches the memory wall, from which size", fontsize=11)
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles, [IMPL_LABEL.get(lab, lab) for lab in labels], fontsize=7, loc="upper left",
              bbox_to_anchor=(1.01, 1.0))
    save(fig, args)


if __name__ == "__main__":
    main()
