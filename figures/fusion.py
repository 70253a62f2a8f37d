"""Kernels launched per call, per implementation, on one GPU: bars per kernel, one panel per dtype. Message: the
naive expression launches one kernel per line, the builtin a few, a fused Triton kernel exactly one, so fusion
saves launches and (for memory-bound kernels) passes over memory.

Input: results/raw/<gpu>/profiles.parquet (torch.profiler, one call at config['profile']['size']), columns gpu,
kernel, impl, dtype, size, n_kernels, kernel_names; passed as --profiles. Without it, a no-data figure says so.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from figures import SCOPES
from figures._common import (IMPL_LABEL, PALETTE, gpu_name, impls_present, legend_outside, no_data_figure,
                             parse_args, save, setup)
from rooflab.kernel import DTYPES

SCOPE = SCOPES["fusion"]
PROFILE_COLUMNS = ["gpu", "kernel", "impl", "dtype", "size", "n_kernels"]


def read_profiles(paths, gpu: str) -> tuple[pd.DataFrame, str]:
    """The profile rows of this gpu, or an empty frame and the reason there are none."""
    frames, why = [], f"no profiles.parquet for {gpu} (the profiles job has not run here)"
    for p in paths or []:
        if not Path(p).exists():
            continue
        try:
            df = pd.read_parquet(p)
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
        no_data_figure(args, title, f"no data: {why}")
        return
    dtypes = [d for d in DTYPES if d in set(df["dtype"])] or sorted(set(df["dtype"]))
    kernels = sorted(set(df["kernel"]))
    impls = impls_present(df)
    # one panel a row: the kernels side by side, readable at the width of a page
    fig, axes = plt.subplots(len(dtypes), 1, figsize=(max(6.0, 0.22 * len(kernels) * len(impls) + 2.5),
                                                      2.6 * len(dtypes) + 0.8), squeeze=False, sharey=True)
    for ax, dtype in zip(axes[:, 0], dtypes):
        d = df[df["dtype"] == dtype]
        sns.barplot(data=d, x="kernel", y="n_kernels", hue="impl", order=kernels, hue_order=impls, palette=PALETTE,
                    ax=ax, errorbar=None)
        for container in ax.containers:
            ax.bar_label(container, fmt="%.0f", fontsize=7, padding=1)
        size = ", ".join(str(int(s)) for s in sorted(set(d["size"])))
        ax.set_title(f"{dtype} (N = {size})", fontsize=10)
        ax.set_xlabel("kernel" if ax is axes[-1][0] else "")
        ax.set_ylabel(what_is_counted(df).replace(" per call", "\nper call"), fontsize=8)
        ax.tick_params(axis="x", rotation=0, labelsize=8)
        if ax is not axes[0][0] and ax.get_legend():
            ax.get_legend().remove()
    legend_outside(axes[0][0], labels_map=IMPL_LABEL)
    if "aten" in what_is_counted(df):
        title = f"Operators per call on {gpu_name(args.gpu)} (aten ops stand in for launches)"
    fig.suptitle(f"{title}: fused kernels run once, the naive expression once per operation", fontsize=11)
    fig.tight_layout()
    save(fig, args)


if __name__ == "__main__":
    main()
