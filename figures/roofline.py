"""Roofline of one GPU: measured points (coloured by implementation, shaped by kernel) under the datasheet and the
measured ceilings, ridge points marked. Message: how far each implementation sits from what the hardware allows.

Log-log axes: x = arithmetic intensity (FLOP/byte, from the kernel's own model), y = achieved TFLOP/s in the
median's frame (GPU time; host time on the CPU, which has measured roofs only). A point above its roof is ringed:
it is in the paper's findings table.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from figures import SCOPES
from figures._common import (IMPL_LABEL, PALETTE, claimable, gpu_name, impls_present, mark_findings, no_data,
                             parse_args, read_metrics, save, setup, time_frame)
from rooflab.gpus import spec_for

SCOPE = SCOPES["roofline"]


def roof(ax, ai, peak_flops, peak_bw, unit, kind, style, color):
    """One roof; its ridge point is marked and its value goes into the legend (labels on the plot overlapped where
    roofs sit close together, as bf16, fp16 and tf32 do)."""
    ridge = peak_flops / peak_bw
    y = np.minimum(peak_flops, ai * peak_bw) / 1e12
    ax.plot(ai, y, style, color=color, lw=1.4, label=f"{kind} {unit} (ridge {ridge:.3g} FLOP/B)")
    ax.plot([ridge], [peak_flops / 1e12], "o", color=color, ms=4)


def main(argv=None):
    args = parse_args(SCOPE, argv)
    setup()
    metrics = read_metrics(args.metrics)
    df = claimable(metrics, args.gpu)
    fig, ax = plt.subplots(figsize=(7.5, 5))
    if df.empty:
        no_data(ax, f"no correct, timed measurements on {args.gpu}")
        save(fig, args)
        return
    ai = np.logspace(np.log10(max(df["arithmetic_intensity"].min() / 4, 1e-2)),
                     np.log10(max(df["arithmetic_intensity"].max() * 4, 1e3)), 200)
    spec = spec_for(args.gpu)
    units = sorted(set(df["compute_unit"]))
    if spec:
        for unit in sorted(units, key=spec.peak_flops, reverse=True):
            roof(ax, ai, spec.peak_flops(unit), spec.mem_bandwidth, unit, "datasheet", "-", "0.25")
    measured = []
    for unit in units:
        peak = df.loc[df["compute_unit"] == unit, "peak_tflops_measured"].dropna()
        bw = df["peak_bandwidth_measured_gbps"].dropna()
        if len(peak) and len(bw):
            measured.append((peak.iloc[0] * 1e12, bw.iloc[0] * 1e9, unit))
    for peak, bw, unit in sorted(measured, reverse=True):
        roof(ax, ai, peak, bw, unit, "measured", "--", "tab:red")
    sns.scatterplot(data=df, x="arithmetic_intensity", y="achieved_tflops", hue="impl", style="kernel",
                    hue_order=impls_present(df), palette=PALETTE, ax=ax, s=30, alpha=0.85)
    mark_findings(ax, df, "arithmetic_intensity", "achieved_tflops")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity [FLOP/byte]")
    ax.set_ylabel(f"achieved [TFLOP/s], {time_frame(args.gpu)}")
    ax.set_title(f"Roofline on {gpu_name(args.gpu)} ({time_frame(args.gpu)}): how far each implementation sits "
                 "below the ceilings", fontsize=11)
    handles, labels = ax.get_legend_handles_labels()
    labels = [IMPL_LABEL.get(lab, lab) for lab in labels]
    ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    save(fig, args)


if __name__ == "__main__":
    main()
