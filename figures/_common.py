"""What every figure script shares: its command line, the data it may claim from, and saving PDF + PNG.

Each figure script draws one figure with one message:
    python figures/<name>.py --metrics results/metrics.parquet --gpu h200 [--kernel gelu] --pdf X.pdf --png X.png
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

IMPL_ORDER = ["naive", "builtin", "compile", "triton", "cuda"]
IMPL_LABEL = {"naive": "naive PyTorch", "builtin": "PyTorch builtin", "compile": "torch.compile",
              "triton": "Triton (ours)", "cuda": "CUDA (ours)"}
PALETTE = dict(zip(IMPL_ORDER, sns.color_palette("colorblind", len(IMPL_ORDER))))


def parse_args(scope: str, argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--gpu", required=True)
    if scope == "kernel":
        ap.add_argument("--kernel", required=True)
    ap.add_argument("--pdf", required=True)
    ap.add_argument("--png", required=True)
    return ap.parse_args(argv)


def claimable(metrics: pd.DataFrame, gpu: str, kernel: str | None = None) -> pd.DataFrame:
    """Rows a figure may draw: measured on this gpu, correct and timed (status ok)."""
    df = metrics[(metrics["gpu"] == gpu) & (metrics["status"] == "ok")]
    if kernel is not None:
        df = df[df["kernel"] == kernel]
    return df.copy()


def impls_present(df: pd.DataFrame) -> list[str]:
    return [i for i in IMPL_ORDER if i in set(df["impl"])]


def no_data(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, fontsize=11, color="0.4")
    ax.set_axis_off()


def save(fig, args) -> None:
    for path in (args.pdf, args.png):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.pdf, bbox_inches="tight")
    fig.savefig(args.png, bbox_inches="tight", dpi=150)
    plt.close(fig)


def setup() -> None:
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.1)
