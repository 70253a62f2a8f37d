"""Roofline of one GPU: where each kernel sits against the GPU's ceilings. Per kernel, forward, at its largest size
in its lowest precision: ours (filled) and the fastest PyTorch implementation (hollow), each in its implementation's
colour and marker, joined, the kernel named beside its point. Message: how far ours and the best of PyTorch sit from
what the hardware allows, kernel by kernel (every cell is in the paper's tables).

Two panels, log-log, of one meaning: x = arithmetic intensity (FLOP/byte, from the kernel's own model), y = achieved
TFLOP/s in the median's frame (GPU time; host time on the CPU, which has measured roofs only). Left, the
memory-bound kernels (intensity under their ridge point, analysis/metrics.py: bound) zoomed on their intensities,
under the bandwidth roof; right, the compute-bound ones (matmul, attention) zoomed on their compute roofs, ridge
points in view. A side with no kernel is left out. Measured roofs are black, datasheet roofs grey: the bandwidth
roof solid, a compute roof dashed by its unit. A panel draws only the roofs its points can reach: the compute roofs
of its points' units whose ridge point lies in its range (a memory-bound kernel's fp32 roof sits far off its panel).
Roofs of one kind at the same peak are one line and one legend entry ("datasheet bf16 = fp16"). The legend (under
the panels) names the fill, each implementation and each roof with its peak and ridge point; a dtype every point
shares is named once, in the title. A point above its roof (at the cell's own clock, analysis/metrics.py) is
starred: it is in the paper's findings table. The labels are placed clear of each other, of the markers and of the
roofs (figures/_common.place_labels), with a leader line where one had to move off its point.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from analysis.latex import DTYPE_SHORT
from analysis.why_tables import LOW_PRECISION_FIRST
from figures import SCOPES
from figures._common import (FINDING_LABEL, FINDING_STYLE, IMPL_LABEL, MARKER, PALETTE, claimable, gpu_name,
                             impls_present, mark_findings, new_figure, no_data, parse_args, place_labels,
                             plain_log_ticks, read_metrics, save, setup, time_frame)
from rooflab.gpus import spec_for

SCOPE = SCOPES["roofline"]
OURS = "triton"
TORCH = ("naive", "builtin", "compile", "compile-max")
UNITS = ("fp32", "tf32", "bf16", "fp16")  # the order a merged roof names its units in
ROOF_STYLE = {"measured": {"color": "black", "lw": 1.2}, "datasheet": {"color": "0.6", "lw": 1.0}}
CEILING_DASH = {"fp32": (0, (6, 2)), "tf32": (0, (2, 1.5)), "bf16": "-.", "fp16": ":"}  # the bandwidth roof: solid
MARGIN = 1.6  # a panel's x range reaches this factor past its outermost point (or ridge point)
SIDES = {"memory": "memory-bound: under the bandwidth roof", "compute": "compute-bound: at the compute roof"}


@dataclass(frozen=True)
class Roof:
    """A compute roof: its peak and the bandwidth it meets at its ridge point, named by every unit it holds for."""
    kind: str  # measured | datasheet
    units: tuple[str, ...]
    peak_flops: float
    bandwidth: float

    @property
    def ridge(self) -> float:
        return self.peak_flops / self.bandwidth

    @property
    def label(self) -> str:
        return f"{self.kind} {' = '.join(self.units)}: {self.peak_flops / 1e12:.3g} TFLOP/s, ridge {self.ridge:.3g}"


def compute_roofs(spec, measured: dict[str, tuple[float, float]], units) -> list[Roof]:
    """The compute roofs of `units`: the datasheet's (where the GPU has one), then the measured ones ({unit: (peak
    FLOP/s, bandwidth B/s)}). Roofs of one kind at one peak and bandwidth are one roof, named by each unit at it: the
    datasheet gives bf16 and fp16 the same peak, so they are one line and one legend entry, not two that coincide."""
    order = {u: i for i, u in enumerate(UNITS)}
    found = []
    if spec:
        for u in units:  # a datasheet roof is named by every unit of the datasheet at its peak
            same = tuple(v for v in UNITS if v == u or spec.peak_flops(v) == spec.peak_flops(u))
            found.append(Roof("datasheet", same, spec.peak_flops(u), spec.mem_bandwidth))
    found += [Roof("measured", (u, ), *measured[u]) for u in units if u in measured]
    merged: dict[tuple, Roof] = {}
    for r in found:
        key = (r.kind, r.peak_flops, r.bandwidth)
        if key in merged:
            units_ = sorted(set(merged[key].units) | set(r.units), key=lambda u: order.get(u, len(order)))
            r = replace(merged[key], units=tuple(units_))
        merged[key] = r
    return sorted(merged.values(), key=lambda r: (r.kind != "measured", -r.peak_flops))


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


def side(rows: pd.DataFrame) -> pd.Series:
    """Per row, the panel it goes to: 'compute' at or above its ridge point, 'memory' under it (the metrics' bound;
    from the measured roofs where the rows carry none)."""
    if "bound" in rows and rows["bound"].isin(["memory", "compute"]).all():
        return rows["bound"]
    ridge = rows["peak_tflops_measured"] * 1e3 / rows["peak_bandwidth_measured_gbps"]
    return pd.Series(np.where(rows["arithmetic_intensity"] >= ridge, "compute", "memory"), index=rows.index)


def rate_text(bandwidth: float) -> str:
    return f"{bandwidth / 1e12:.3g} TB/s" if bandwidth >= 1e12 else f"{bandwidth / 1e9:.3g} GB/s"


def draw_roofs(ax, lo: float, hi: float, bandwidths: dict[str, float], ceilings: list[Roof]) -> dict[str, Line2D]:
    """The panel's roofs over [lo, hi]: per kind its bandwidth roof, solid, up to its highest ridge point in range,
    and each compute roof from its ridge point on, dashed by its unit, each line labelled as the legend names it.
    Returns {legend label: line}."""
    drawn = {}
    for kind, bw in bandwidths.items():
        top = max([r.ridge for r in ceilings if r.kind == kind], default=hi)
        if top > lo:
            end, label = min(top, hi), f"{kind} bandwidth: {rate_text(bw)}"
            drawn[label] = ax.plot([lo, end], [lo * bw / 1e12, end * bw / 1e12], ls="-", zorder=1, label=label,
                                   **ROOF_STYLE[kind])[0]
    for r in ceilings:
        drawn[r.label] = ax.plot([max(r.ridge, lo), hi], [r.peak_flops / 1e12] * 2, zorder=1, label=r.label,
                                 ls=CEILING_DASH.get(r.units[0], "--"), **ROOF_STYLE[r.kind])[0]
    return drawn


def draw_points(ax, rows: pd.DataFrame, with_dtype: bool) -> tuple[list, list]:
    """Per kernel, ours and the fastest of PyTorch, joined, ours drawn over the hollow marker it may sit in; returns
    the label anchors (ours, else PyTorch's point) and the labels."""
    anchors, labels = [], []
    for kernel, g in rows.groupby("kernel", sort=True):
        g = g.sort_values("impl", key=lambda s: s.ne(OURS))  # ours first: the label sits beside it
        ax.plot(g["arithmetic_intensity"], g["achieved_tflops"], color="0.55", lw=0.7, zorder=2)
        for r in g.itertuples():
            ours = r.impl == OURS
            ax.scatter([r.arithmetic_intensity], [r.achieved_tflops], s=24, marker=MARKER[r.impl],
                       zorder=4 if ours else 3, color=PALETTE[r.impl] if ours else "white", edgecolors=PALETTE[r.impl],
                       lw=1.0)
        top = g.iloc[0]
        anchors.append((top["arithmetic_intensity"], top["achieved_tflops"]))
        labels.append(f"{kernel} ({DTYPE_SHORT.get(top['dtype'], top['dtype'])})" if with_dtype else kernel)
    return anchors, labels


def measured_roofs(rows: pd.DataFrame) -> tuple[float | None, dict[str, tuple[float, float]]]:
    """The measured bandwidth (B/s) and {unit: (peak FLOP/s, bandwidth)} the plotted rows were rated against."""
    bw = rows["peak_bandwidth_measured_gbps"].dropna()
    if not len(bw):
        return None, {}
    peaks = {}
    for unit, g in rows.groupby("compute_unit"):
        peak = g["peak_tflops_measured"].dropna()
        if len(peak):
            peaks[unit] = (peak.iloc[0] * 1e12, bw.iloc[0] * 1e9)
    return bw.iloc[0] * 1e9, peaks


def main(argv=None):
    args = parse_args(SCOPE, argv)
    setup()
    df = claimable(read_metrics(args.metrics), args.gpu)
    few = handful(df)
    if few.empty:
        fig, ax = new_figure("roofline")
        no_data(ax, f"no correct, timed measurements on {args.gpu}")
        save(fig, args)
        return
    spec = spec_for(args.gpu)
    bw, measured = measured_roofs(few)
    bandwidths = {"measured": bw} if bw else {}
    if spec:
        bandwidths["datasheet"] = spec.mem_bandwidth
    where = side(few)
    panels = [(s, few[where == s]) for s in SIDES if (where == s).any()]
    fig, axes = new_figure("roofline", ncols=len(panels), squeeze=False,
                           gridspec_kw={"width_ratios": [1.4, 1][:len(panels)]} if len(panels) > 1 else {})
    dtypes = sorted(set(few["dtype"]))
    legend_roofs, placed = {}, []
    for ax, (name, rows) in zip(axes[0], panels):
        ai = rows["arithmetic_intensity"]
        ceilings = compute_roofs(spec, measured, sorted(set(rows["compute_unit"])))
        lo = ai.min() / MARGIN
        if name == "compute":  # its ridge points in view
            lo = min([lo] + [r.ridge / MARGIN for r in ceilings])
        hi = ai.max() * MARGIN
        ceilings = [r for r in ceilings if r.ridge < hi]  # a roof the panel's points cannot reach is not drawn
        legend_roofs.update(draw_roofs(ax, lo, hi, bandwidths, ceilings))
        anchors, labels = draw_points(ax, rows, with_dtype=len(dtypes) > 1)
        mark_findings(ax, rows, "arithmetic_intensity", "achieved_tflops")
        ys = list(rows["achieved_tflops"]) + [y for line in ax.get_lines() for y in line.get_ydata()]
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(min(ys) / 1.3, max(ys) * 1.3)
        plain_log_ticks(ax.xaxis, [lo, hi])
        plain_log_ticks(ax.yaxis, ax.get_ylim())
        ax.set_title(SIDES[name])
        ax.set_xlabel("arithmetic intensity [FLOP/byte]")
        placed.append((ax, anchors, labels))
    axes[0][0].set_ylabel(f"achieved [TFLOP/s], {time_frame(args.gpu)}")
    dtype = f", {DTYPE_SHORT.get(dtypes[0], dtypes[0])}" if len(dtypes) == 1 else ""
    fig.suptitle(f"Roofline on {gpu_name(args.gpu)}: forward, largest size{dtype} ({time_frame(args.gpu)})")
    starred = any(c.get_label() == FINDING_LABEL for ax in axes[0] for c in ax.collections)
    fig.legend(handles=legend(few, legend_roofs, starred), loc="outside lower center", ncols=2, handlelength=2.6)
    for ax, anchors, labels in placed:  # last, on the laid-out axes: the memory-bound kernels sit close together
        place_labels(ax, anchors, labels, fontsize=7, color="0.15")
    save(fig, args)


def legend(few: pd.DataFrame, roofs: dict[str, Line2D], starred: bool) -> list:
    """Marker fill (ours filled, PyTorch hollow), in each implementation's colour and marker, and the star beside them;
    then each roof drawn, once (the bandwidth roofs stand in both panels)."""
    impls = impls_present(few)
    marks = [
        Line2D([], [], ls="", marker=MARKER[i], ms=4.5, color=PALETTE[i], label=f"{IMPL_LABEL[i]}: filled")
        for i in impls
        if i == OURS
    ]
    marks += [
        Line2D([], [], ls="", marker=MARKER[i], ms=4.5, mfc="white", color=PALETTE[i],
               label=f"{IMPL_LABEL[i]}: hollow, the fastest of PyTorch") for i in impls if i != OURS
    ]
    if starred:
        marks.append(
            Line2D([], [], ls="", marker="*", ms=8, mfc="none", mec=FINDING_STYLE["edgecolors"],
                   mew=FINDING_STYLE["linewidths"], label=FINDING_LABEL))
    lines = [
        Line2D([], [], color=line.get_color(), lw=line.get_linewidth(), ls=line.get_linestyle(), label=label)
        for label, line in roofs.items()
    ]
    rows = max(len(marks), len(lines))  # markers in the left column, roofs in the right
    blank = Line2D([], [], ls="", label=" ")
    return marks + [blank] * (rows - len(marks)) + lines + [blank] * (rows - len(lines))


if __name__ == "__main__":
    main()
