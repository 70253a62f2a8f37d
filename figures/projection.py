"""Cross-GPU projection: the roofline-model time of each kernel at its largest size on the A100, H100, H200 and
B200 datasheets, beside the time measured here (fastest correct implementation, and the builtin). Message: how
far the GPU we have sits from what the model says each datasheet GPU would take, and where a bigger GPU would help.

model_time_ms_<gpu> = max(FLOPs / peak FLOP/s of the kernel's unit, bytes / peak bandwidth)  (analysis/metrics.py;
it depends on the kernel, dtype and size only, not on the implementation). Log time axis; one panel per dtype.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from figures._common import IMPL_LABEL, claimable, gpu_name, no_data_figure, parse_args, save, setup
from rooflab.gpus import SPECS
from rooflab.kernel import DTYPES

SCOPE = "gpu"
MODEL_COLORS = dict(zip(SPECS, ["#bdd7e7", "#6baed6", "#3182bd", "#08519c"]))


def projection_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (kernel, dtype) at the largest size: model time per spec GPU, best and builtin measured time."""
    big = df[df["size"] == df.groupby(["kernel", "dtype"])["size"].transform("max")]
    rows = []
    for (kernel, dtype), g in big.groupby(["kernel", "dtype"]):
        best = g.loc[g["median_ms"].idxmin()]
        row = {"kernel": kernel, "dtype": dtype, "size": int(best["size"]), "best_impl": best["impl"],
               "measured_best_ms": best["median_ms"],
               "measured_builtin_ms": g.loc[g["impl"] == "builtin", "median_ms"].min()}
        row.update({f"model_{key}_ms": g[f"model_time_ms_{key}"].iloc[0] for key in SPECS})
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv=None):
    args = parse_args(SCOPE, argv)
    setup()
    metrics = pd.read_parquet(args.metrics)
    df = claimable(metrics, args.gpu)
    df = df[df["pass"] == "fwd"]
    here = gpu_name(args.gpu)
    title = f"Roofline-model time on four datasheet GPUs vs measured on {here}"
    if df.empty:
        no_data_figure(args, title, f"no correct, timed measurements on {args.gpu}")
        return
    table = projection_table(df)
    dtypes = [d for d in DTYPES if d in set(table["dtype"])]
    kernels = sorted(set(table["kernel"]))
    fig, axes = plt.subplots(1, len(dtypes), figsize=(4.6 * len(dtypes) + 2.6, 0.55 * len(kernels) + 1.8),
                             squeeze=False, sharey=True)
    series = [(f"model_{k}_ms", f"model: {s.name}", MODEL_COLORS[k]) for k, s in SPECS.items()]
    series += [("measured_builtin_ms", f"measured here: PyTorch builtin", "#fdae6b"),
               ("measured_best_ms", f"measured here: fastest impl", "#d94801")]
    height = 0.8 / len(series)
    y = np.arange(len(kernels))
    for ax, dtype in zip(axes[0], dtypes):
        t = table[table["dtype"] == dtype].set_index("kernel").reindex(kernels)
        for i, (col, label, color) in enumerate(series):
            ax.barh(y + (i - (len(series) - 1) / 2) * height, t[col] * 1e3, height=height, color=color, label=label)
        offset = (len(series) - 1) / 2 * height
        for yi, kernel in zip(y, kernels):
            if isinstance(t.loc[kernel, "best_impl"], str):
                ax.annotate(IMPL_LABEL[t.loc[kernel, "best_impl"]], (t.loc[kernel, "measured_best_ms"] * 1e3, yi + offset),
                            textcoords="offset points", xytext=(3, 0), va="center", fontsize=6.5, color="#d94801")
        ax.set_xscale("log")
        values = t[[c for c, _, _ in series]].to_numpy(dtype=float) * 1e3
        lo, hi = np.nanmin(values), np.nanmax(values)
        ax.set_xlim(lo / 1.5, hi * (hi / lo) ** 0.35 * 1.5)  # room right of the longest bar for its label
        decades = np.log10(hi / lo)
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0,) if decades > 2 else (1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(dtype, fontsize=10)
        ax.set_xlabel("time per call at the largest N [µs], log")
        ax.set_yticks(y)
        ax.set_yticklabels([f"{k} (N={int(t.loc[k, 'size'])})" if np.isfinite(t.loc[k, "size"]) else k
                            for k in kernels], fontsize=8)
        ax.tick_params(axis="x", labelsize=8)
    axes[0][0].invert_yaxis()  # the y axis is shared: invert it once
    handles, labels = axes[0][-1].get_legend_handles_labels()
    axes[0][-1].legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.suptitle(f"{title}: bars right of the models = time the model does not explain", fontsize=11)
    fig.tight_layout()
    save(fig, args)


if __name__ == "__main__":
    main()
