"""Wave quantisation of the matrix product on one GPU: achieved TFLOP/s against N for Triton and the builtin, one
panel per dtype, beside the wave model scaled to the measured cuBLAS peak. Message: a size whose 128 x 128 output
tiles leave the last wave of SMs part-empty (N = 1793: 15^2 = 225 tiles on 132 SMs -> 225/264) loses throughput the
model predicts; sizes that are no multiple of 128 are marked.

Model (analysis/metrics.py): wave_model_tflops = peak_tflops_measured x wave_efficiency, with
wave_efficiency = tiles / (ceil(tiles / SMs) x SMs). The GPU's SM count comes from its datasheet entry; on a GPU
without one only the measurements are drawn. Waves of SMs do not exist on the CPU: its figure says so, and the paper
leaves it out. Rates are in GPU time; a point above its roof is ringed (the paper's findings table).
"""
from __future__ import annotations

import pandas as pd

from figures import SCOPES
from figures._common import (IMPL_LABEL, MARKER, PALETTE, claimable, gpu_name, is_cpu, mark_findings, new_figure,
                             no_data_figure, parse_args, print_size, read_metrics, save, setup, size_axis, size_label)
from rooflab.kernel import DTYPES

SCOPE = SCOPES["wave"]
KERNEL = "matmul"
IMPLS = ["builtin", "triton"]
TILE = 128


def draw(ax, d: pd.DataFrame, dtype: str, width_in: float | None = None) -> None:
    for impl in IMPLS:
        g = d[d["impl"] == impl].sort_values("size")
        if len(g):
            ax.plot(g["size"], g["achieved_tflops"], "-", marker=MARKER[impl], ms=3, lw=1.2, color=PALETTE[impl],
                    label=IMPL_LABEL[impl])
    mark_findings(ax, d, "size", "achieved_tflops")
    model = d.dropna(subset=["wave_model_tflops"]).drop_duplicates("size").sort_values("size")
    if len(model):
        ax.plot(model["size"], model["wave_model_tflops"], "--x", color="0.3", lw=1.0, ms=4,
                label="wave model x measured peak")
    peak = d["peak_tflops_measured"].dropna()
    if len(peak):
        ax.axhline(peak.iloc[0], color="black", ls=":", lw=1)
        ax.annotate(f"measured peak {peak.iloc[0]:.3g} TFLOP/s", (d["size"].min(), peak.iloc[0]),
                    textcoords="offset points", xytext=(2, -2), va="top", fontsize=7, color="black")
    for n in sorted({int(s) for s in d["size"] if int(s) % TILE}):
        ax.axvline(n, color="tab:purple", ls="-.", lw=0.9, alpha=0.7)
        eff = d.loc[d["size"] == n, "wave_efficiency"].dropna()
        note = f"N={n}\nnot x{TILE}" + (f"\nwave eff.\n{eff.iloc[0]:.2f}" if len(eff) else "")
        ax.annotate(note, (n, 0.5), xycoords=("data", "axes fraction"), textcoords="offset points",
                    xytext=(-4, 0), ha="right", va="center", fontsize=7, color="tab:purple",
                    bbox={"fc": "white", "ec": "none", "alpha": 0.85, "pad": 1})
    size_axis(ax, d["size"], width_in)
    unit = d["compute_unit"].iloc[0]
    ax.set_title(f"{dtype} ({unit} peak)")
    ax.set_xlabel(size_label(d))
    ax.set_ylim(bottom=0)


def main(argv=None):
    args = parse_args(SCOPE, argv)
    setup()
    metrics = read_metrics(args.metrics)
    df = claimable(metrics, args.gpu, KERNEL)
    df = df[df["impl"].isin(IMPLS)]
    for col in ("wave_model_tflops", "wave_efficiency"):  # metrics from before the wave model: draw without it
        if col not in df:
            df[col] = float("nan")
    name = gpu_name(args.gpu)
    title = f"Matmul waves on {name}"
    if is_cpu(args.gpu):
        no_data_figure(args, title, "not drawn for the CPU: it has no waves of SMs to quantise", "wave")
        return
    dtypes = [d for d in DTYPES if d in set(df["dtype"])]
    if not dtypes:
        no_data_figure(args, title, f"no data: no correct, timed matmul (Triton or builtin) on {args.gpu}", "wave")
        return
    ncols = min(2, len(dtypes))  # two panels a row, the legend under them
    nrows = -(-len(dtypes) // ncols)
    fig, axes = new_figure("wave", 1.7 * nrows + 0.8, nrows=nrows, ncols=ncols, squeeze=False)
    for ax in axes.flat[len(dtypes):]:
        ax.set_axis_off()
    for ax, dtype in zip(axes.flat, dtypes):
        draw(ax, df[df["dtype"] == dtype], dtype, print_size("wave")[0] / ncols - 0.6)
    for ax in axes[:, 0]:
        ax.set_ylabel("achieved [TFLOP/s], GPU time")
    seen = {}
    for ax in axes.flat:  # every panel's entries once (a finding may sit in any panel)
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    fig.legend(list(seen.values()), list(seen), loc="outside lower center", ncols=3)
    sms = "" if df["wave_efficiency"].notna().any() else " (no SM count for this device: model not drawn)"
    fig.suptitle(f"{title}: part-empty last waves of {TILE}-wide tiles cost throughput{sms}")
    save(fig, args)


if __name__ == "__main__":
    main()
