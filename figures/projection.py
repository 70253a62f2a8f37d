"""Cross-GPU projection: the roofline-model time of each kernel at its largest size on the A100, H100, H200 and
B200 datasheets, calibrated by this GPU, beside the GPU time measured here (fastest correct implementation, ties
named, and the builtin). Message: what the model says each datasheet GPU would take, how far off the model is here,
and where a bigger GPU would help.

Model (analysis/calibration.py): each datasheet peak scaled by this GPU's measured / datasheet ratio per resource
(copy bandwidth; best GEMM per compute unit), model_ms = max(FLOPs / scaled peak, bytes / scaled bandwidth). Its
whiskers span the range of measured / model of this GPU's fastest cells of the same bound: the calibration error,
measured. A GPU without a datasheet entry is not calibrated (no whiskers, raw datasheet model); the CPU is not
projected at all (its figure says so, and the paper leaves it out). Log time axis; one panel per dtype.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from analysis import calibration
from figures import SCOPES
from figures._common import (IMPL_LABEL, IMPL_SHORT, claimable, gpu_name, is_cpu, new_figure, no_data_figure,
                             parse_args, read_metrics, save, setup)
from rooflab.gpus import SPECS
from rooflab.kernel import DTYPES

SCOPE = SCOPES["projection"]
MODEL_COLORS = dict(zip(SPECS, ["#bdd7e7", "#6baed6", "#3182bd", "#08519c"]))
ROW_IN = 0.3  # one kernel's six bars


def projection_table(df: pd.DataFrame, gpu: str) -> tuple[pd.DataFrame, bool]:
    """(table, calibrated): one row per (kernel, dtype) at the largest size: the calibrated model time per spec GPU
    with the whisker factors (lo, hi) of its bound, best (ties named) and builtin measured time. Uncalibrated (the
    raw datasheet model, no whiskers) where this GPU has no datasheet entry."""
    t, r = calibration.projections(df, gpu)
    calibrated = np.isfinite(r["bandwidth"])
    err = calibration.error(t).set_index("bound")
    big = df[df["size"] == df.groupby(["kernel", "dtype"])["size"].transform("max")]
    rows = []
    for best in t.itertuples():
        g = big[(big["kernel"] == best.kernel) & (big["dtype"] == best.dtype)]
        names = [IMPL_LABEL[i] for i in best.fastest] if len(best.fastest) == 1 else \
            [IMPL_SHORT[i] for i in best.fastest]
        row = {"kernel": best.kernel, "dtype": best.dtype, "size": int(best.size),
               "best_impl": " = ".join(names) + (" (tie)" if len(names) > 1 else ""),
               "measured_best_ms": best.median_ms,
               "measured_builtin_ms": g.loc[g["impl"] == "builtin", "median_ms"].min(),
               "lo": err.loc[best.bound, "min"] if best.bound in err.index else np.nan,
               "hi": err.loc[best.bound, "max"] if best.bound in err.index else np.nan}
        row.update({f"model_{key}_ms": getattr(best, f"model_ms_{key}") if calibrated
                    else g[f"model_time_ms_{key}"].iloc[0] for key in SPECS})
        rows.append(row)
    return pd.DataFrame(rows), calibrated


def main(argv=None):
    args = parse_args(SCOPE, argv)
    setup()
    metrics = read_metrics(args.metrics)
    df = claimable(metrics, args.gpu)
    df = df[df["pass"] == "fwd"]
    here = gpu_name(args.gpu)
    title = f"Roofline-model time on four datasheet GPUs vs time measured on {here}"
    if is_cpu(args.gpu):
        no_data_figure(args, title, "not drawn for the CPU: a CPU's times say nothing of a GPU's", "projection")
        return
    if df.empty:
        no_data_figure(args, title, f"no correct, timed measurements on {args.gpu}", "projection")
        return
    table, calibrated = projection_table(df, args.gpu)
    model = f"model, calibrated to {args.gpu}" if calibrated else "model (datasheet, uncalibrated)"
    dtypes = [d for d in DTYPES if d in set(table["dtype"])]
    kernels_of = {d: sorted(set(table.loc[table["dtype"] == d, "kernel"])) for d in dtypes}
    # one panel a row, as tall as its kernels: the page's width leaves room for the fastest implementations' names
    fig, axes = new_figure("projection", sum(ROW_IN * len(k) + 0.55 for k in kernels_of.values()) + 1.0,
                           nrows=len(dtypes), ncols=1, squeeze=False,
                           gridspec_kw={"height_ratios": [len(k) + 2 for k in kernels_of.values()]})
    series = [(f"model_{k}_ms", f"{model}: {s.name}", MODEL_COLORS[k]) for k, s in SPECS.items()]
    series += [("measured_builtin_ms", "measured here (GPU time): PyTorch builtin", "#fdae6b"),
               ("measured_best_ms", "measured here (GPU time): fastest impl", "#d94801")]
    height = 0.8 / len(series)
    for ax, dtype in zip(axes.flat, dtypes):
        kernels = kernels_of[dtype]
        y = np.arange(len(kernels))
        t = table[table["dtype"] == dtype].set_index("kernel").reindex(kernels)
        for i, (col, label, color) in enumerate(series):
            v = t[col].to_numpy(dtype=float) * 1e3
            whiskers = None
            if col.startswith("model_") and calibrated:  # the calibration error measured here, by bound
                lo, hi = t["lo"].to_numpy(dtype=float), t["hi"].to_numpy(dtype=float)
                whiskers = np.nan_to_num([v - v * np.minimum(lo, 1), v * np.maximum(hi, 1) - v])
            ax.barh(y + (i - (len(series) - 1) / 2) * height, v, height=height, color=color, label=label,
                    xerr=whiskers, error_kw={"elinewidth": 0.6, "capsize": 1.5, "ecolor": "0.35"})
        offset = (len(series) - 1) / 2 * height
        for yi, kernel in zip(y, kernels):
            if isinstance(t.loc[kernel, "best_impl"], str):
                ax.annotate(t.loc[kernel, "best_impl"], (t.loc[kernel, "measured_best_ms"] * 1e3, yi + offset),
                            textcoords="offset points", xytext=(3, 0), va="center", fontsize=7, color="#d94801")
        ax.set_xscale("log")
        values = t[[c for c, _, _ in series]].to_numpy(dtype=float) * 1e3
        if calibrated:
            values = np.concatenate([values.ravel(), (t[[c for c, _, _ in series[:-2]]].to_numpy(dtype=float).T
                                                      * t["hi"].clip(lower=1).to_numpy(dtype=float)).ravel() * 1e3])
        lo, hi = np.nanmin(values), np.nanmax(values)
        ax.set_xlim(lo / 1.5, hi * (hi / lo) ** 0.35 * 1.5)  # room right of the longest bar for its label
        decades = np.log10(hi / lo)
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0,) if decades > 2 else (1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}" if v < 1e4 else f"{v:,.0f}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(dtype)
        ax.set_xlabel("time per call at the largest N [µs], log")
        ax.set_yticks(y)
        ax.set_yticklabels([f"{k} (N={int(t.loc[k, 'size'])})" if np.isfinite(t.loc[k, "size"]) else k
                            for k in kernels])
        ax.invert_yaxis()
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2)
    whisker = "; whiskers: measured / model here" if calibrated else ""
    fig.suptitle(f"{title}\nbars right of the models: time the model does not explain{whisker}")
    save(fig, args)


if __name__ == "__main__":
    main()
