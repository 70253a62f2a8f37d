"""Merge one device call's results into the committed reference dataset (data/reference/<gpu>/).

For each kernel the call measured, its raw parquet replaces the reference's, and its rows replace that kernel's
rows in profiles.parquet and compiled.parquet; the call's ceilings are kept beside, as ceilings_<label>.parquet
(ratios are taken within one call). The README's table of calls is edited by hand.

    python scripts/merge_reference.py RESULTS_DIR --gpu h200 --label s8 --kernels rmsnorm
"""
import argparse
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path, help="the call's results/ folder (with raw/<gpu>/)")
    ap.add_argument("--gpu", default="h200")
    ap.add_argument("--label", required=True, help="the call's name, e.g. s8: ceilings_<label>.parquet")
    ap.add_argument("--kernels", nargs="+", required=True)
    args = ap.parse_args()
    raw, ref = args.results / "raw" / args.gpu, REPO / "data" / "reference" / args.gpu
    for k in args.kernels:
        new = pd.read_parquet(raw / f"{k}.parquet")
        if set(new["kernel"].unique()) != {k}:
            raise SystemExit(f"{raw / f'{k}.parquet'} holds rows of {sorted(new['kernel'].unique())}, not {k}")
        new.to_parquet(ref / f"{k}.parquet", index=False)
        print(f"{k}: {len(new)} rows, git_sha {', '.join(new['git_sha'].dropna().unique())}")
    for name in ("profiles", "compiled"):
        new = pd.read_parquet(raw / f"{name}.parquet")
        new = new[new["kernel"].isin(args.kernels)]
        old = pd.read_parquet(ref / f"{name}.parquet")
        merged = pd.concat([old[~old["kernel"].isin(args.kernels)], new], ignore_index=True)
        merged.to_parquet(ref / f"{name}.parquet", index=False)
        print(f"{name}: {len(new)} rows of {', '.join(args.kernels)} replace {int(old['kernel'].isin(args.kernels).sum())}")
    pd.read_parquet(raw / "ceilings.parquet").to_parquet(ref / f"ceilings_{args.label}.parquet", index=False)
    print(f"ceilings_{args.label}.parquet written")


if __name__ == "__main__":
    main()
