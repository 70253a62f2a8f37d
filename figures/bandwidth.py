"""Achieved rate vs size for one kernel on one GPU, per implementation and dtype, against its roofs: bandwidth in
GB/s against the measured copy for a memory-bound kernel, TFLOP/s against the measured GEMM peaks (and datasheet
peaks) for a compute-bound one (matmul: analysis/claims.compute_bound). Message: which implementation reaches the
wall, and from what size on.

Rates are in the median's frame (GPU time: one call, stream held, L2 flushed; host time on the CPU); each point
carries its spread as a bar from the p80 time (low rate) to the p20 time (high rate). Colour and marker: the
implementation; line style: the dtype; the roofs are horizontal black (measured) and grey (datasheet) lines, each
labelled on the plot. A point above its roof is ringed: it is in the paper's findings table.
"""
from __future__ import annotations

import pandas as pd
from matplotlib.lines import Line2D

from analysis.claims import compute_bound
from figures import SCOPES
from figures._common import (IMPL_LABEL, MARKER, PALETTE, claimable, gpu_name, impls_present, mark_findings, new_figure,
                             no_data, parse_args, read_metrics, save, setup, size_axis, size_label, spread, time_frame)
from rooflab.gpus import spec_for
from rooflab.kernel import DTYPES

SCOPE = SCOPES["bandwidth"]
DTYPE_DASH = dict(zip(DTYPES, ["-", (0, (5, 2)), "-.", (0, (1, 1.2))]))
ROOF = {"measured": {"color": "black", "lw": 1.0}, "datasheet": {"color": "0.55", "lw": 1.0}}


def rates(df: pd.DataFrame, tflops: bool) -> tuple[str, pd.Series, tuple[pd.Series, pd.Series] | None]:
    """(column, rate, its p80..p20 spread or None): GB/s, or TFLOP/s for a compute-bound kernel."""
    if not tflops:
        return "achieved_gbps", df["achieved_gbps"], spread(df, nbytes=True)
    band = spread(df)
    return ("achieved_tflops", df["achieved_tflops"], None if band is None else
            (df["flops"] / (band[1] * 1e-3) / 1e12, df["flops"] / (band[0] * 1e-3) / 1e12))


def draw(ax, df: pd.DataFrame, tflops: bool = False) -> str:
    """One line per (implementation, dtype), with p20-p80 error bars, and the findings ringed; returns the column
    drawn."""
    column = "achieved_tflops" if tflops else "achieved_gbps"
    for impl in impls_present(df):
        for dtype in [d for d in DTYPES if d in set(df["dtype"])]:
            g = df[(df["impl"] == impl) & (df["dtype"] == dtype)].sort_values("size")
            if g.empty:
                continue
            column, rate, band = rates(g, tflops)
            yerr = None if band is None else [(rate - band[0]).clip(lower=0), (band[1] - rate).clip(lower=0)]
            ax.errorbar(g["size"], rate, yerr=yerr, color=PALETTE[impl], ls=DTYPE_DASH[dtype], marker=MARKER[impl],
                        ms=3, lw=1.1, capsize=1.5, elinewidth=0.6)
    mark_findings(ax, df, "size", column)
    return column


def roof_lines(ax, roofs: list[tuple[str, float]], kind: str, unit: str, x: float, right: bool) -> None:
    """Horizontal roofs of one kind, each a line; roofs within 15 % of each other share one label (bf16 and fp16
    peaks sit that close), so that no two labels overlap."""
    groups: list[list[tuple[str, float]]] = []
    for name, value in sorted(roofs, key=lambda r: r[1]):
        ax.axhline(value, ls="-", zorder=1, **ROOF[kind])
        if groups and value <= groups[-1][0][1] * 1.15:
            groups[-1].append((name, value))
        else:
            groups.append([(name, value)])
    for group in groups:
        text = f"{kind} " + ", ".join(f"{name} {value:.3g}".strip() for name, value in group) + f" {unit}"
        below = kind == "measured"  # measured labels under their line, datasheet ones over it: never on each other
        ax.annotate(text, (x, (min if below else max)(v for _, v in group)), textcoords="offset points",
                    xytext=(-2 if right else 2, -2 if below else 2), va="top" if below else "bottom",
                    ha="right" if right else "left", fontsize=7, color=ROOF[kind]["color"])


def roofs(ax, df: pd.DataFrame, gpu: str, tflops: bool) -> None:
    """The roofs of the quantity drawn, each labelled: the measured copy (one per run's ceilings) and the datasheet
    bandwidth, or the measured GEMM peak of each compute unit and its datasheet peak."""
    spec = spec_for(gpu)
    lo, hi = df["size"].min(), df["size"].max()
    if not tflops:
        roof_lines(ax, [("copy", v) for v in sorted(set(df["peak_bandwidth_measured_gbps"].dropna()))], "measured",
                   "GB/s", lo, False)  # one line per run's ceilings
        if spec:
            roof_lines(ax, [("", spec.mem_bandwidth / 1e9)], "datasheet", "GB/s", hi, True)
        return
    units = sorted(set(df["compute_unit"]))
    roof_lines(ax, [(f"{u} GEMM", v)
                    for u in units
                    for v in set(df.loc[df["compute_unit"] == u, "peak_tflops_measured"].dropna())], "measured",
               "TFLOP/s", lo, False)
    if spec:
        roof_lines(ax, [(u, spec.peak_flops(u) / 1e12) for u in units], "datasheet", "TFLOP/s", hi, True)


def main(argv=None):
    args = parse_args(SCOPE, argv)
    setup()
    metrics = read_metrics(args.metrics)
    df = claimable(metrics, args.gpu, args.kernel)
    df = df[df["pass"] == "fwd"]
    fig, ax = new_figure("bandwidth")
    if df.empty:
        no_data(ax, f"no correct, timed {args.kernel} measurements on {args.gpu}")
        save(fig, args)
        return
    tflops = compute_bound(df)
    draw(ax, df, tflops)
    roofs(ax, df, args.gpu, tflops)
    ax.set_yscale("log" if tflops else "linear")
    size_axis(ax, df["size"])
    ax.set_xlabel(size_label(df))
    frame = time_frame(args.gpu)
    ax.set_ylabel(f"achieved {'TFLOP/s' if tflops else 'bandwidth [GB/s]'}, {frame}")
    fig.suptitle(f"{args.kernel} on {gpu_name(args.gpu)} ({frame}, p20-p80 bars)")
    handles = [
        Line2D([], [], color=PALETTE[i], marker=MARKER[i], ms=3, lw=1.1, label=IMPL_LABEL[i]) for i in impls_present(df)
    ]
    handles += [Line2D([], [], color="0.3", ls=DTYPE_DASH[d], lw=1.1, label=d) for d in DTYPES if d in set(df["dtype"])]
    handles += [h for h, lab in zip(*ax.get_legend_handles_labels()) if lab.startswith("above")]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), handlelength=2.6)
    save(fig, args)


if __name__ == "__main__":
    main()
