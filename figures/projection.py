"""Cross-GPU projection: how much faster (or slower) than measured here each kernel would run on the A100, H100,
H200 and B200, by the roofline model calibrated on this GPU. Message: memory-bound kernels scale with the datasheet
bandwidth and compute-bound ones with the datasheet compute, and the model's own error here is the distance of this
GPU's point from 1.

One point per (kernel, dtype) at its largest size and per datasheet GPU, each GPU its own colour and marker:
x = measured time here (fastest correct implementation, GPU time) / model time on that GPU, on a log2 axis (2 = twice
as fast as measured here). One panel per dtype.

Model (analysis/calibration.py): each datasheet peak scaled by this GPU's measured / datasheet ratio per resource
(copy bandwidth; best GEMM per compute unit), model_ms = max(FLOPs / scaled peak, bytes / scaled bandwidth). A GPU
without a datasheet entry is not calibrated (the raw datasheet model); the CPU is not projected at all (its figure
says so, and the paper leaves it out).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from analysis import calibration
from figures import SCOPES
from figures._common import claimable, gpu_name, is_cpu, new_figure, no_data_figure, parse_args, read_metrics, save, setup
from rooflab.gpus import SPECS
from rooflab.kernel import DTYPES

SCOPE = SCOPES["projection"]
# One colour and one marker per datasheet GPU (Okabe-Ito: distinct under the common colour-vision deficiencies)
GPU_COLORS = dict(zip(SPECS, ["#E69F00", "#56B4E9", "#009E73", "#CC79A7"]))
GPU_MARKERS = dict(zip(SPECS, ["o", "s", "D", "^"]))
ROW_IN = 0.22  # one (kernel, dtype) row: its four points, dodged


def projection_table(df: pd.DataFrame, gpu: str) -> tuple[pd.DataFrame, bool]:
    """(table, calibrated): one row per (kernel, dtype) at the largest size: the model time per datasheet GPU
    (model_<key>_ms: calibrated by `gpu`, or the raw datasheet model where `gpu` has no datasheet entry), the
    fastest measured time here and speedup_<key> = measured here / model there."""
    t, r = calibration.projections(df, gpu)
    calibrated = bool(np.isfinite(r["bandwidth"]))
    big = df[df["size"] == df.groupby(["kernel", "dtype"])["size"].transform("max")]
    rows = []
    for best in t.itertuples():
        g = big[(big["kernel"] == best.kernel) & (big["dtype"] == best.dtype)]
        row = {
            "kernel": best.kernel,
            "dtype": best.dtype,
            "size": int(best.size),
            "bound": best.bound,
            "measured_best_ms": best.median_ms
        }
        for key in SPECS:
            row[f"model_{key}_ms"] = getattr(best, f"model_ms_{key}") if calibrated \
                else g[f"model_time_ms_{key}"].iloc[0]
            row[f"speedup_{key}"] = best.median_ms / row[f"model_{key}_ms"]
        rows.append(row)
    return pd.DataFrame(rows), calibrated


def ratio_axis(axis, values) -> None:
    """A log2 axis of speed-ups, a tick at every power of two the values span, labelled '0.5x', '1x', '2x'."""
    v = np.asarray([x for x in values if np.isfinite(x) and x > 0], dtype=float)
    lo, hi = (np.floor(np.log2(v.min())), np.ceil(np.log2(v.max()))) if len(v) else (-1.0, 1.0)
    lo, hi = min(lo, -1.0), max(hi, 1.0)
    axis.set_major_locator(FixedLocator([2.0**e for e in np.arange(lo, hi + 1)]))
    axis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}x"))
    axis.set_minor_locator(NullLocator())


def main(argv=None):
    args = parse_args(SCOPE, argv)
    setup()
    metrics = read_metrics(args.metrics)
    df = claimable(metrics, args.gpu)
    df = df[df["pass"] == "fwd"]
    here = gpu_name(args.gpu)
    title = f"How fast each kernel would run on four datasheet GPUs, relative to {here}"
    if is_cpu(args.gpu):
        no_data_figure(args, title, "not drawn for the CPU: a CPU's times say nothing of a GPU's", "projection")
        return
    if df.empty:
        no_data_figure(args, title, f"no correct, timed measurements on {args.gpu}", "projection")
        return
    table, calibrated = projection_table(df, args.gpu)
    dtypes = [d for d in DTYPES if d in set(table["dtype"])]
    kernels_of = {d: sorted(set(table.loc[table["dtype"] == d, "kernel"])) for d in dtypes}
    fig, axes = new_figure("projection",
                           sum(ROW_IN * len(k) + 0.4 for k in kernels_of.values()) + 1.1, nrows=len(dtypes), ncols=1,
                           squeeze=False, sharex=True,
                           gridspec_kw={"height_ratios": [len(k) + 1.2 for k in kernels_of.values()]})
    dodge = 0.2  # of a row, between GPUs: points of equal speed-up (H100 and H200 on compute) stay apart
    for ax, dtype in zip(axes.flat, dtypes):
        kernels = kernels_of[dtype]
        t = table[table["dtype"] == dtype].set_index("kernel").reindex(kernels)
        y = np.arange(len(kernels))
        for i, key in enumerate(SPECS):
            own = key == args.gpu
            label = SPECS[key].name + (" (this GPU: its distance from 1x is the model's error)" if own else "")
            ax.scatter(t[f"speedup_{key}"], y + (i - (len(SPECS) - 1) / 2) * dodge, s=16, marker=GPU_MARKERS[key],
                       color=GPU_COLORS[key], edgecolors="black" if own else "none", linewidths=0.6, zorder=3,
                       label=label)
        for yi in y[1:]:  # a faint rule between kernels: each row's four points read as one group
            ax.axhline(yi - 0.5, color="0.92", lw=0.5, zorder=0)
        ax.axvline(1.0, color="black", lw=0.8, zorder=1)
        ax.set_xscale("log", base=2)
        ax.grid(axis="y", visible=False)
        ax.set_yticks(y, kernels)
        ax.set_ylim(len(kernels) - 0.5, -0.5)
        ax.tick_params(axis="y", length=0)
        sizes = sorted({int(s) for s in t["size"].dropna()})
        ax.set_title(f"{dtype}, N = {', '.join(map(str, sizes))}", loc="left")
    speedups = table[[f"speedup_{k}" for k in SPECS]].to_numpy(dtype=float).ravel()
    ratio_axis(axes[-1][0].xaxis, speedups)
    finite = speedups[np.isfinite(speedups) & (speedups > 0)]
    axes[-1][0].set_xlim(min(finite.min(), 1.0) / 1.25, max(finite.max(), 1.0) * 1.25)
    for ax in axes.flat:
        ax.tick_params(axis="x", labelbottom=True)
    model = f"the roofline model calibrated on {args.gpu}" if calibrated else "the datasheet roofline model"
    axes[-1][0].set_xlabel("speed-up over the time measured here (fastest implementation, GPU time)\n"
                           f"by {model}: right of 1x faster than measured here, left slower")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2, handletextpad=0.3, columnspacing=1.5)
    fig.suptitle(title)
    save(fig, args)


if __name__ == "__main__":
    main()
