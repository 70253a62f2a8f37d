"""Repeatability benchmark (not a test): measure the same sweep twice, in two separate processes, and compare.

    python scripts/repeatability.py --kernels gelu softmax --impls builtin triton --out results/raw/h200/repeatability.csv
    python scripts/repeatability.py --kernels gelu --sizes 256 4096 --impls builtin triton --out /tmp/rep.csv

Each run is experiments/measure.run with reuse_cells false, writing to its own temporary folder, one after the
other (never concurrently: they would share the GPU). Per cell: the relative difference of the medians,
(run2 - run1) / run1, for the flushed event-timed median and for the CUDA-graph median. With --runs K (default 2)
the sweep runs in K processes and every pair i < j is compared (column `pair`, "1-2", "1-3", ...): the summary's
maximum is then over all pairs, the stricter reading of "two separate processes". Summary: max and median
|difference| over cells >= 50 us in event mode (where back-to-back medians should agree within a fraction of a
percent) and over cells < 10 us in CUDA-graph mode (launch overhead removed: what short cells can claim), and, for
contrast, event mode under 10 us. The table goes to --out (.csv or .parquet), the summary to stdout. Written as
results/raw/<gpu>/repeatability.csv, the next `snakemake all` puts it in the paper (Table "Repeatability").

Settings come from the config the DAG would use (config/config.yaml on a GPU node, config/cpu.yaml elsewhere), with
the command line's overrides.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

from analysis.repeatability import compare_all, summarize  # (the comparison and summary the paper shows too)


def load_params(args) -> tuple[str, list[str], dict]:
    import yaml

    from rooflab.config import default_configfile
    from rooflab.gpus import detect_key

    config = yaml.safe_load(Path(args.config or default_configfile(REPO)).read_text())
    gpu = args.gpu or detect_key()
    kernels = args.kernels or [k for k in config.get("kernels", []) if k != "all"] or ["gelu"]
    params = {
        "sizes": args.sizes or config["sizes"],
        "extra_sizes": [] if args.sizes else config.get("extra_sizes", []),
        "dtypes": args.dtypes or config.get("dtypes", ["float32"]),
        "impls": args.impls or config.get("impls", ["builtin", "triton"]),
        "timing": config.get("timing", {}),
        "interpret_max_size": config.get("interpret_max_size", 0),
        "seed": config.get("seed", 0),
        "cache_dirs": config.get("cache_dirs", {}),
        "allow_failures": True,  # a failed cell is compared as missing, not a reason to lose the run
        "reuse_cells": False,  # both runs measure every cell
    }
    return gpu, kernels, params


def measure_once(gpu: str, kernels: list[str], params: dict, folder: Path) -> list[Path]:
    """One run, in a fresh process (its own CUDA context, JIT caches in memory, clocks ramp-up)."""
    spec = folder / "params.json"
    spec.write_text(json.dumps({"gpu": gpu, "kernels": kernels, "params": params}))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(spec)]
    print(f"run in {folder}: {' '.join(kernels)} on {gpu}", file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, cwd=REPO)
    return [folder / f"{k}.parquet" for k in kernels]


def worker(spec_path: str) -> int:
    import logging

    from experiments.measure import run

    spec = json.loads(Path(spec_path).read_text())
    folder = Path(spec_path).parent
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    rc = 0
    for kernel in spec["kernels"]:
        rc |= run(kernel, spec["gpu"], str(folder / f"{kernel}.parquet"), dict(spec["params"]), progress=True)
    return rc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="table of per-cell differences (.csv or .parquet)")
    ap.add_argument("--gpu", help="config key of the device (default: the one present)")
    ap.add_argument("--config", help="config file (default: the DAG's default here)")
    ap.add_argument("--kernels", nargs="+")
    ap.add_argument("--sizes", type=int, nargs="+")
    ap.add_argument("--dtypes", nargs="+")
    ap.add_argument("--impls", nargs="+")
    ap.add_argument("--runs", type=int, default=2, help="processes to run the sweep in (>= 2; all pairs compared)")
    ap.add_argument("--keep", help="folder to keep every run's parquet files in (default: a temporary one)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.worker)
    if not args.out:
        ap.error("--out is required")
    if args.runs < 2:
        ap.error("--runs must be at least 2")

    import pandas as pd

    gpu, kernels, params = load_params(args)
    with tempfile.TemporaryDirectory(prefix="rooflab-repeat-") as tmp:
        root = Path(args.keep or tmp)
        runs = []
        for i in range(1, args.runs + 1):
            folder = root / f"run{i}"
            folder.mkdir(parents=True, exist_ok=True)
            runs.append(measure_once(gpu, kernels, params, folder))
        table = compare_all(runs)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".parquet":
        table.to_parquet(out, index=False)
    else:
        table.to_csv(out, index=False)
    with pd.option_context("display.width", 160, "display.max_rows", 500, "display.float_format", "{:.4g}".format):
        print(table.to_string(index=False))
        print(
            f"\nrepeatability on {gpu} over {args.runs} processes (|run j - run i| / run i of the medians, every pair "
            f"i < j; table in {out}):")
        print(summarize(table).drop(columns="group").to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
