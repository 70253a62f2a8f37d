"""What every figure script shares: its command line, the data it may claim from, and saving PDF + PNG.

Each figure script draws one figure with one message:
    python -m figures.<name> --metrics M.parquet [M2.parquet ...] --gpu h200 [--kernel gelu] --pdf X.pdf --png X.png
The DAG draws all the figures of one device, or of one (device, kernel), in one process: python -m figures
(figures/__main__.py), from the per-kernel metrics results/metrics/<gpu>/<kernel>.parquet.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402


from analysis.claims import CPU_FRAME_LABEL, FRAME_LABEL, over_roof
from rooflab.gpus import CPU_KEY
from rooflab.kernel import IMPL_LABEL, IMPLS

IMPL_ORDER = list(IMPLS)
PALETTE = dict(zip(IMPL_ORDER, sns.color_palette("colorblind", len(IMPL_ORDER))))
# A point above its own run's roof: drawn, but never silently (it is listed in the paper's findings table)
FINDING_LABEL = "above its roof (findings table)"
FINDING_STYLE = {"marker": "*", "s": 140, "facecolors": "none", "edgecolors": "black", "linewidths": 0.9, "zorder": 5}


def parse_args(scope: str, argv=None, profiles: bool = False) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--metrics", required=True, nargs="+", help="metrics parquet files, read as one table")
    ap.add_argument("--gpu", required=True)
    if scope == "kernel":
        ap.add_argument("--kernel", required=True)
    if profiles:
        ap.add_argument("--profiles", nargs="*", default=[], help="profiles.parquet files (kernel launch counts)")
    ap.add_argument("--pdf", required=True)
    ap.add_argument("--png", required=True)
    return ap.parse_args(argv)


_READ: dict[tuple[str, ...], pd.DataFrame] = {}


def read_metrics(paths) -> pd.DataFrame:
    """The metrics files as one table (a path or a list), read once per process: the figures drawn together share
    it (each gets a copy)."""
    key = tuple([paths] if isinstance(paths, (str, Path)) else paths)
    if key not in _READ:
        frames = [pd.read_parquet(p) for p in key]
        _READ[key] = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    return _READ[key].copy()


def gpu_name(gpu: str) -> str:
    """The datasheet name of a GPU key ('NVIDIA H200 SXM'), or the key itself (cpu, an unknown GPU)."""
    from rooflab.gpus import spec_for

    spec = spec_for(gpu)
    return spec.name if spec else ("CPU" if gpu == "cpu" else gpu)


def legend_outside(ax, title: str | None = None, labels_map: dict | None = None, **kw) -> None:
    """The legend right of the axes, labels translated (impl keys -> readable names)."""
    handles, labels = ax.get_legend_handles_labels()
    labels_map = IMPL_LABEL if labels_map is None else labels_map
    if not handles:
        return
    ax.legend(handles, [labels_map.get(lab, lab) for lab in labels], title=title, fontsize=8, title_fontsize=8,
              loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, **kw)


def claimable(metrics: pd.DataFrame, gpu: str, kernel: str | None = None) -> pd.DataFrame:
    """Rows a figure may draw: measured on this gpu, correct, timed and not a silent compile fallback."""
    ok = metrics["claimable"] if "claimable" in metrics else metrics["status"] == "ok"
    df = metrics[(metrics["gpu"] == gpu) & ok]
    if kernel is not None:
        df = df[df["kernel"] == kernel]
    return df.copy()


def is_cpu(gpu: str) -> bool:
    """The CPU gets only the concepts that apply to it: host time, no CUDA graph, no launch floor, no datasheet."""
    return gpu == CPU_KEY


def time_frame(gpu: str) -> str:
    """The frame of a row's median: GPU time on a GPU, host time on the CPU (analysis/claims.py)."""
    return CPU_FRAME_LABEL["gpu"] if is_cpu(gpu) else FRAME_LABEL["gpu"]


def mark_findings(ax, df: pd.DataFrame, x: str, y: str) -> None:
    """Ring every point of `df` above its roof (analysis/claims.over_roof), labelled for the legend."""
    over = df[over_roof(df)] if "roofline_fraction_measured" in df else df.iloc[:0]
    if len(over):
        ax.scatter(over[x], over[y], label=FINDING_LABEL, **FINDING_STYLE)


def spread(df: pd.DataFrame, nbytes: bool = False) -> tuple[pd.Series, pd.Series] | None:
    """Each cell's p20-p80 spread as (low, high): times in ms, or as achieved GB/s (the p80 time gives the low
    rate); None where the rows carry no quantiles."""
    if not {"p20_ms", "p80_ms"} <= set(df.columns) or df[["p20_ms", "p80_ms"]].isna().all().all():
        return None
    if not nbytes:
        return df["p20_ms"], df["p80_ms"]
    return df["bytes"] / (df["p80_ms"] * 1e-3) / 1e9, df["bytes"] / (df["p20_ms"] * 1e-3) / 1e9


def impls_present(df: pd.DataFrame) -> list[str]:
    return [i for i in IMPL_ORDER if i in set(df["impl"])]


def no_data(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, fontsize=11, color="0.4",
            wrap=True)
    ax.set_axis_off()


def no_data_figure(args, title: str, message: str) -> None:
    """A whole figure that says, in words, why there is nothing to draw (the DAG still gets its PDF and PNG)."""
    fig, ax = plt.subplots(figsize=(7, 2.5))
    no_data(ax, message)
    fig.suptitle(title, fontsize=11)
    save(fig, args)


def time_label(ms: float) -> str:
    """A time with the unit that keeps it short: 3.2 us, 41 ms, 1.2 s."""
    if ms < 1:
        return f"{ms * 1e3:.3g} µs"
    if ms < 1e3:
        return f"{ms:.3g} ms"
    return f"{ms / 1e3:.3g} s"


def save(fig, args) -> None:
    for path in (args.pdf, args.png):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.pdf, bbox_inches="tight")
    fig.savefig(args.png, bbox_inches="tight", dpi=150)
    plt.close(fig)


def setup() -> None:
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.1)


def size_axis(ax, sizes) -> None:
    """Log2 x axis labelled with the measured power-of-two sizes as plain numbers (others, like 1793, unlabelled)."""
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    ax.set_xscale("log", base=2)
    ticks = sorted({int(n) for n in sizes if int(n) & (int(n) - 1) == 0}) or sorted({int(n) for n in sizes})
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.set_xticklabels([str(t) for t in ticks], fontsize=8, rotation=0)
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())


def plain_log_ticks(axis, values) -> None:
    """Log ticks labelled as plain numbers (0.05, 2, 500): 1-2-5 per decade over narrow ranges, 1 per decade else."""
    import numpy as np
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    v = np.asarray([x for x in values if np.isfinite(x) and x > 0], dtype=float)
    decades = np.log10(v.max() / v.min()) if len(v) else 3
    axis.set_major_locator(LogLocator(subs=(1.0,) if decades > 2.5 else (1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    axis.set_minor_formatter(NullFormatter())
