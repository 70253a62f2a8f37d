"""Draw several figures in one process (the DAG's figure jobs): Python, pandas and matplotlib start once, and the
metrics are read once, instead of once per figure.

    python -m figures --gpu cpu --metrics results/metrics/cpu/*.parquet --profiles P... --outdir results/figures \\
        fusion roofline scaling speedup            # device figures: <outdir>/<gpu>/<fig>.pdf and .png
    python -m figures --gpu cpu --kernel gelu --metrics results/metrics/cpu/gelu.parquet --outdir results/figures \\
        bandwidth                                  # kernel figures: <outdir>/<gpu>/<fig>/<kernel>.pdf and .png

Each figure is its script's main() (figures/<name>.py), given the arguments it takes alone.
"""
from __future__ import annotations

import argparse
import importlib

from figures import SCOPES


def figure_argv(fig: str, a: argparse.Namespace) -> list[str]:
    """The command line figures/<fig>.py would get on its own, for this device (and kernel)."""
    stem = f"{a.outdir}/{a.gpu}/{fig}" + (f"/{a.kernel}" if SCOPES[fig] == "kernel" else "")
    argv = ["--metrics", *a.metrics, "--gpu", a.gpu, "--pdf", f"{stem}.pdf", "--png", f"{stem}.png"]
    if SCOPES[fig] == "kernel":
        argv += ["--kernel", a.kernel]
    if fig == "fusion":
        argv += ["--profiles", *a.profiles]
    if fig == "speedup":  # its text says tie within noise: the run's A/A floors (analysis/aa_floors)
        argv += ["--floors", *a.floors, "--verdicts", a.verdicts]
    return argv


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--kernel", help="for the figures of kernel scope")
    ap.add_argument("--metrics", nargs="+", required=True)
    ap.add_argument("--profiles", nargs="*", default=[], help="profiles parquet files (the fusion figure)")
    ap.add_argument("--floors", nargs="*", default=[], help="results/paired/floors_<gpu>.csv (the speedup figure)")
    ap.add_argument("--verdicts", default="{}", help="config verdicts, as JSON (the speedup figure)")
    ap.add_argument("--outdir", default="results/figures")
    drawn_here = sorted(f for f, scope in SCOPES.items() if scope in ("gpu", "kernel"))  # shapes: rules/shapes.smk
    ap.add_argument("figures", nargs="+", choices=drawn_here)
    a = ap.parse_args(argv)
    if a.kernel is None and any(SCOPES[f] == "kernel" for f in a.figures):
        ap.error("figures of kernel scope need --kernel")
    for fig in a.figures:
        importlib.import_module(f"figures.{fig}").main(figure_argv(fig, a))
        print(f"{fig}: drawn")


if __name__ == "__main__":
    main()
