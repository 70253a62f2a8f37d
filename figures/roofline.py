"""Roofline of one GPU: a labelled handful of points under the datasheet and the measured ceilings, ridge points
marked: per kernel, forward, at its largest size in its lowest precision, ours (filled) and the fastest PyTorch
implementation (hollow, in its colour), joined. Message: how far ours and the best of PyTorch sit from what the
hardware allows, kernel by kernel (every cell is in the paper's tables).

Log-log axes: x = arithmetic intensity (FLOP/byte, from the kernel's own model), y = achieved TFLOP/s in the
median's frame (GPU time; host time on the CPU, which has measured roofs only). Each roof is a line of its own:
datasheet roofs grey and thin, measured roofs black, and within each the compute unit by its dash (fp32 solid, tf32
dashed, bf16 dash-dot, fp16 dotted), each named in the legend with its peak and ridge point. A point above its roof
is ringed: it is in the paper's findings table. The kernels' labels are placed clear of each other, of the markers
and of the roofs (figures/_common.place_labels), with a leader line where one had to move off its point.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from analysis.latex import DTYPE_SHORT
from analysis.why_tables import LOW_PRECISION_FIRST
from figures import SCOPES
from figures._common import (IMPL_LABEL, PALETTE, claimable, gpu_name, impls_present, mark_findings, new_figure,
                             no_data, parse_args, place_labels, read_metrics, save, setup, time_frame)
from rooflab.gpus import spec_for

SCOPE = SCOPES["roofline"]
UNIT_DASH = {"fp32": "-", "tf32": (0, (5, 2)), "bf16": "-.", "fp16": (0, (1, 1.5))}
ROOF_KIND = {"datasheet": {"color": "0.6", "lw": 1.0}, "measured": {"color": "black", "lw": 1.2}}
KERNEL_MARKERS = ["o", "s", "D", "^", "v", "P", "X", "<", ">", "h", "p", "d"]  # "*" rings a finding


def roof(ax, ai, peak_flops, peak_bw, unit, kind):
    """One roof, its dash the compute unit's and its colour the kind's; its ridge point is marked and its peak and
    ridge go into the legend (labels on the plot overlapped where roofs sit close together, as bf16 and fp16 do)."""
    ridge = peak_flops / peak_bw
    y = np.minimum(peak_flops, ai * peak_bw) / 1e12
    ax.plot(ai, y, ls=UNIT_DASH.get(unit, "-"), **ROOF_KIND[kind],
            label=f"{kind} {unit}: {peak_flops / 1e12:.3g} TFLOP/s, ridge {ridge:.3g}")
    ax.plot([ridge], [peak_flops / 1e12], "o", ms=3, color=ROOF_KIND[kind]["color"],
            mfc="white" if kind == "datasheet" else ROOF_KIND[kind]["color"])


OURS = "triton"
TORCH = ("naive", "builtin", "compile", "compile-max")


def handful(df: pd.DataFrame) -> pd.DataFrame:
    """The points the roofline draws: per kernel, forward, at the largest size in its lowest precision, ours and the
    fastest PyTorch implementation (GPU time): one labelled pair a kernel, not every cell (the tables hold those)."""
    fwd = df[df["pass"] == "fwd"] if "pass" in df else df
    out = []
    for _, k in fwd.groupby("kernel", sort=True):
        dtype = next((d for d in LOW_PRECISION_FIRST if d in set(k["dtype"])), k["dtype"].iloc[0])
        k = k[k["dtype"] == dtype]
        k = k[k["size"] == k["size"].max()]
        torch = k[k["impl"].isin(TORCH)].dropna(subset=["median_ms"])
        out += [k[k["impl"] == OURS], torch.loc[[torch["median_ms"].idxmin()]] if len(torch) else torch]
    return pd.concat(out) if out else df.iloc[:0]


def main(argv=None):
    args = parse_args(SCOPE, argv)
    setup()
    metrics = read_metrics(args.metrics)
    df = claimable(metrics, args.gpu)
    fig, ax = new_figure("roofline")
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
            roof(ax, ai, spec.peak_flops(unit), spec.mem_bandwidth, unit, "datasheet")
    measured = []
    for unit in units:
        peak = df.loc[df["compute_unit"] == unit, "peak_tflops_measured"].dropna()
        bw = df["peak_bandwidth_measured_gbps"].dropna()
        if len(peak) and len(bw):
            measured.append((peak.iloc[0] * 1e12, bw.iloc[0] * 1e9, unit))
    for peak, bw, unit in sorted(measured, reverse=True):
        roof(ax, ai, peak, bw, unit, "measured")
    roofs = ax.get_legend_handles_labels()
    few = handful(df)
    kernels = sorted(set(few["kernel"]))
    marker = dict(zip(kernels, KERNEL_MARKERS * (len(kernels) // len(KERNEL_MARKERS) + 1)))
    anchors, labels = [], []
    for kernel, g in few.groupby("kernel", sort=True):
        g = g.sort_values("impl", key=lambda s: s.ne(OURS))  # ours first: the label sits beside it
        ax.plot(g["arithmetic_intensity"], g["achieved_tflops"], color="0.55", lw=0.7, zorder=2)
        for r in g.itertuples():
            ours = r.impl == OURS
            ax.scatter([r.arithmetic_intensity], [r.achieved_tflops], s=22, marker=marker[kernel], zorder=3,
                       color=PALETTE[r.impl] if ours else "white", edgecolors=PALETTE[r.impl], lw=1.0)
        top = g.iloc[0]
        anchors.append((top["arithmetic_intensity"], top["achieved_tflops"]))
        labels.append(f"{kernel} ({DTYPE_SHORT.get(top['dtype'], top['dtype'])})")
    mark_findings(ax, few, "arithmetic_intensity", "achieved_tflops")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity [FLOP/byte]")
    ax.set_ylabel(f"achieved [TFLOP/s], {time_frame(args.gpu)}")
    fig.suptitle(f"Roofline on {gpu_name(args.gpu)} ({time_frame(args.gpu)})")
    handles = [
        Line2D([], [], ls="", marker="o", ms=4, color=PALETTE[i], label=IMPL_LABEL[i])
        for i in impls_present(few)
        if i == OURS
    ]
    handles += [
        Line2D([], [], ls="", marker="o", ms=4, mfc="white", color=PALETTE[i],
               label=f"{IMPL_LABEL[i]}, fastest of PyTorch") for i in impls_present(few) if i != OURS
    ]
    handles += roofs[0]
    handles += [h for h, lab in zip(*ax.get_legend_handles_labels()) if lab.startswith("above")]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), handlelength=2.6)
    # last, on the laid-out axes: the memory-bound kernels sit close together on the bandwidth roof
    place_labels(ax, anchors, labels, fontsize=7, color="0.15")
    save(fig, args)


if __name__ == "__main__":
    main()
