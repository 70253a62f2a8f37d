"""Wave quantisation of the matrix product on one GPU: the rate of Triton and the builtin against N, each relative
to its own best, beside the wave model on the same scale, one panel per dtype. Message: where a size's 128 x 128
output tiles leave the last wave of SMs part-empty (N = 1793: 15^2 = 225 tiles on 132 SMs -> 225/264), the model
predicts a small loss; what the measured rate loses beyond it is not the waves (the gap, labelled).

Model (analysis/metrics.py): wave_efficiency = tiles / (ceil(tiles / SMs) x SMs), drawn relative to its largest
value over the measured sizes, as each implementation's achieved TFLOP/s is drawn relative to its own best: both are
1 at full waves, so the model and the data share one scale (the absolute best rates are in each panel's title). The
GPU's SM count comes from its datasheet entry; on a GPU without one only the measurements are drawn. Waves of SMs do
not exist on the CPU: its figure says so, and the paper leaves it out. Rates are in GPU time; a point above its roof
is ringed (the paper's findings table).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from figures import SCOPES
from figures._common import (IMPL_LABEL, IMPL_SHORT, MARKER, PALETTE, claimable, gpu_name, is_cpu, mark_findings,
                             new_figure, no_data_figure, parse_args, print_size, read_metrics, save, setup, size_axis,
                             size_label)
from rooflab.kernel import DTYPES

SCOPE = SCOPES["wave"]
KERNEL = "matmul"
IMPLS = ["builtin", "triton"]
TILE = 128
MODEL_LABEL = "wave model: tiles / SM slots of their waves, over its best"
GAP_COLOR = "tab:purple"


def relative(d: pd.DataFrame) -> pd.DataFrame:
    """The rows of one dtype with relative_tflops, each implementation's achieved TFLOP/s over its own best, and
    relative_wave_model, the wave efficiency over its largest value: the data and the model on one scale."""
    d = d.copy()
    d["relative_tflops"] = d["achieved_tflops"] / d.groupby("impl")["achieved_tflops"].transform("max")
    d["relative_wave_model"] = d["wave_efficiency"] / d["wave_efficiency"].max()
    return d


def draw(ax, d: pd.DataFrame, dtype: str, width_in: float | None = None) -> None:
    d = relative(d)
    best = {}
    for impl in IMPLS:
        g = d[d["impl"] == impl].sort_values("size")
        if len(g):
            ax.plot(g["size"], g["relative_tflops"], "-", marker=MARKER[impl], ms=3, lw=1.2, color=PALETTE[impl],
                    label=IMPL_LABEL[impl], zorder=3)
            best[impl] = g["achieved_tflops"].max()
    mark_findings(ax, d, "size", "relative_tflops")
    model = d.dropna(subset=["relative_wave_model"]).drop_duplicates("size").sort_values("size")
    if len(model):
        ax.plot(model["size"], model["relative_wave_model"], "--", color="0.25", lw=1.0, label=MODEL_LABEL, zorder=2)
    for n in sorted({int(s) for s in d["size"] if int(s) % TILE}):
        at = d[d["size"] == n]
        expected = at["relative_wave_model"].dropna()
        low = at["relative_tflops"].min()
        if not len(expected) or not low < expected.iloc[0]:  # no model here, or nothing it leaves unexplained
            ax.axvline(n, color=GAP_COLOR, ls="-.", lw=0.7, alpha=0.6, zorder=1)
            continue
        ax.plot([n, n], [low, expected.iloc[0]], color=GAP_COLOR, lw=5, alpha=0.3, solid_capstyle="butt", zorder=1)
        # the label sits low right of the gap, where every panel is empty (the rates are high past N = 2048)
        ax.annotate(f"gap at N = {n}\n(not x{TILE}): loss\nthe wave model\ndoes not explain",
                    (n, (low + expected.iloc[0]) / 2), xytext=(0.99, 0.03), textcoords="axes fraction", ha="right",
                    va="bottom", fontsize=7, color=GAP_COLOR, arrowprops={
                        "arrowstyle": "-",
                        "color": GAP_COLOR,
                        "lw": 0.6,
                        "shrinkA": 1,
                        "shrinkB": 3
                    })
    size_axis(ax, d["size"], width_in)  # 1793 beside 2048: a short tick, its label in the gap's
    ax.set_title(f"{dtype}\nbest (1.0): " + ", ".join(f"{IMPL_SHORT[i]} {v:.3g}" for i, v in best.items()) + " TFLOP/s",
                 loc="left", fontsize=7)
    ax.set_xlabel(size_label(d, width_in))
    top = np.nanmax(d[["relative_tflops", "relative_wave_model"]].to_numpy(dtype=float))
    ax.set_ylim(0, max(1.0, top) * 1.08)


def main(argv=None):
    args = parse_args(SCOPE, argv)
    setup()
    metrics = read_metrics(args.metrics)
    df = claimable(metrics, args.gpu, KERNEL)
    df = df[df["impl"].isin(IMPLS) & (df["pass"] == "fwd")] if "pass" in df else df[df["impl"].isin(IMPLS)]
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
    fig, axes = new_figure("wave", 1.8 * nrows + 0.8, nrows=nrows, ncols=ncols, squeeze=False)
    for ax in axes.flat[len(dtypes):]:
        ax.set_axis_off()
    for ax, dtype in zip(axes.flat, dtypes):
        draw(ax, df[df["dtype"] == dtype], dtype, print_size("wave")[0] / ncols - 0.6)
    for ax in axes[:, 0]:
        ax.set_ylabel("TFLOP/s / its best\n(GPU time)")
    seen = {}
    for ax in axes.flat:  # every panel's entries once (a finding may sit in any panel)
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    fig.legend(list(seen.values()), list(seen), loc="outside lower center", ncols=2)
    sms = "" if df["wave_efficiency"].notna().any() else " (no SM count for this device: model not drawn)"
    fig.suptitle(f"{title}: at N no multiple of {TILE}, the waves explain little of the loss{sms}")
    save(fig, args)


if __name__ == "__main__":
    main()
