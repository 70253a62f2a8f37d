"""Kernels launched per call, per implementation, on one GPU: a table of counts, kernels down, implementations
across, one panel per dtype (two a row), each count written in its cell and shaded by it. Message: the naive
expression launches one kernel per line, the builtin a few, a fused Triton kernel exactly one, so fusion saves
launches and (for memory-bound kernels) passes over memory.

Input: results/raw/<gpu>/profiles.parquet (torch.profiler, one call at config['profile']['size']), columns gpu,
kernel, impl, dtype, size, n_kernels, kernel_names; passed as --profiles. Without it, a no-data figure says so.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm

from figures import SCOPES
from figures._common import (IMPL_SHORT, annotated_grid, gpu_name, impls_present, new_figure, no_data_figure,
                             parse_args, save, setup)
from rooflab.io import read_table
from rooflab.kernel import DTYPES

SCOPE = SCOPES["fusion"]
PROFILE_COLUMNS = ["gpu", "kernel", "impl", "dtype", "size", "n_kernels"]
HEADER = {"compile-max": "compile\n(max)"}  # on two lines, each no wider than 'compile': in its column


def read_profiles(paths, gpu: str) -> tuple[pd.DataFrame, str]:
    """The profile rows of this gpu, or an empty frame and the reason there are none."""
    frames, why = [], f"no profiles.parquet for {gpu} (the profiles job has not run here)"
    for p in paths or []:
        if not Path(p).exists():
            continue
        try:
            df = read_table(p)
        except Exception as exc:  # a corrupt or foreign file: say so rather than fail the figure
            why = f"{p}: unreadable ({type(exc).__name__})"
            continue
        missing = [c for c in PROFILE_COLUMNS if c not in df.columns]
        if missing:
            why = f"{p}: missing columns {', '.join(missing)}"
            continue
        frames.append(df)
    if not frames:
        return pd.DataFrame(columns=PROFILE_COLUMNS), why
    df = pd.concat(frames, ignore_index=True)
    df = df[(df["gpu"] == gpu) & df["n_kernels"].notna()]
    if "status" in df:
        df = df[df["status"] == "ok"]
    df = df.assign(n_kernels=df["n_kernels"].astype(float))
    if "pass" in df:  # a kernel with several passes gets one bar group per pass
        df = df.assign(kernel=df["kernel"] + df["pass"].map(lambda p: "" if p == "fwd" else f" {p}"))
    return df, f"profiles hold no launch counts for {gpu}"


def what_is_counted(df: pd.DataFrame) -> str:
    """GPU kernels, or (on the CPU, where nothing launches) the aten operators one call dispatches."""
    if "activity" in df and set(df["activity"].dropna()) and all("cpu" in a for a in set(df["activity"].dropna())):
        return "aten operators dispatched per call [count]"
    return "GPU kernels launched per call [count]"


def main(argv=None):
    args = parse_args(SCOPE, argv, profiles=True)
    setup()
    title = f"Kernels launched per call on {gpu_name(args.gpu)}"
    df, why = read_profiles(args.profiles, args.gpu)
    if df.empty:
        no_data_figure(args, title, f"no data: {why}", "fusion")
        return
    dtypes = [d for d in DTYPES if d in set(df["dtype"])] or sorted(set(df["dtype"]))
    kernels = sorted(set(df["kernel"]))
    impls = impls_present(df)
    ncols = min(2, len(dtypes))
    nrows = -(-len(dtypes) // ncols)
    fig, axes = new_figure("fusion",
                           nrows * (0.17 * len(kernels) + 0.55) + 0.45, nrows=nrows, ncols=ncols, squeeze=False,
                           sharey=True)
    norm = LogNorm(1, max(2.0, float(df["n_kernels"].max())))
    for ax in axes.flat[len(dtypes):]:
        ax.set_axis_off()
    for ax, dtype in zip(axes.flat, dtypes):
        d = df[df["dtype"] == dtype]
        counts = d.pivot_table(index="kernel", columns="impl", values="n_kernels", aggfunc="first")
        counts = counts.reindex(index=kernels, columns=impls)
        counts.columns = [HEADER.get(i, IMPL_SHORT[i]) for i in impls]
        labels = counts.map(lambda v: f"{v:.0f}" if np.isfinite(v) else "")
        annotated_grid(ax, counts, labels, "YlOrBr", norm)
        ax.xaxis.tick_top()
        size = ", ".join(str(int(s)) for s in sorted(set(d["size"])))
        ax.set_title(f"{dtype} (N = {size})")
    what = what_is_counted(df)
    if "aten" in what:
        title = f"Operators per call on {gpu_name(args.gpu)} (aten ops stand in for launches)"
    fig.suptitle(f"{title}; blank: not profiled")
    fig.supxlabel(f"{what}: fused kernels run once, the naive expression once per operation", fontsize=7)
    save(fig, args)


if __name__ == "__main__":
    main()
