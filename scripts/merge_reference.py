"""Merge one device call's results into the committed reference dataset (data/reference/<gpu>/).

For each kernel the call measured, its raw parquet replaces the reference's, and its rows replace that kernel's
rows in profiles.parquet and compiled.parquet (the call's results/raw/<gpu>/profiles/<kernel>.parquet and
compiled/<kernel>.parquet, one per kernel as the DAG writes them, or a single profiles.parquet and compiled.parquet
as older calls wrote them); the call's ceilings are kept apart, as
data/tuning/ceilings_<label>.parquet (ratios are taken within one call; the DAG reads the reference's own
ceilings.parquet only); its paired rounds (raw/paired/<kernel>.parquet) replace the reference's. With --impls (a call that measured some implementations only, e.g.
``--config impls=[builtin,triton]``) only those implementations' rows are replaced, the others' kept (compiled rows,
which describe our Triton kernels, only when triton is among them). The README's table of calls is edited by hand.

    python scripts/merge_reference.py RESULTS_DIR --gpu h200 --label s8 --kernels rmsnorm
    python scripts/merge_reference.py RESULTS_DIR --label s14 --kernels matmul --impls builtin triton
"""
import argparse
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent

from rooflab.io import write_parquet  # (atomic: a killed merge leaves whole files)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path, help="the call's results/ folder (with raw/<gpu>/)")
    ap.add_argument("--gpu", default="h200")
    ap.add_argument(
        "--label", required=True, help="the call's name, e.g. s8: <tuning-dir>/ceilings_<label>.parquet "
        "(data/tuning holds the H200's calls: name another GPU's calls apart, e.g. h100_s1)")
    ap.add_argument("--kernels", nargs="+", required=True)
    ap.add_argument("--impls", nargs="+", default=None,
                    help="replace only these implementations' rows (default: every row of the kernels)")
    ap.add_argument("--reference-dir", type=Path, default=REPO / "data" / "reference")
    ap.add_argument("--tuning-dir", type=Path, default=None,
                    help="where the call's ceilings go (default: tuning/ beside the reference dir, data/tuning)")
    args = ap.parse_args(argv)
    tuning = args.tuning_dir or args.reference_dir.parent / "tuning"
    raw, ref = args.results / "raw" / args.gpu, args.reference_dir / args.gpu
    if not ref.is_dir():
        raise SystemExit(f"no reference folder {ref}: create it (and its README) for a new GPU first")
    # Read and check every input before writing anything, so a missing file leaves the reference as it was.
    new = {name: read(raw / f"{name}.parquet", args.gpu) for name in [*args.kernels, "ceilings"]}
    new.update({name: read_per_kernel(raw, name, args.kernels, args.gpu) for name in ("profiles", "compiled")})
    for k in args.kernels:
        if set(new[k]["kernel"].unique()) != {k}:
            raise SystemExit(f"{raw / f'{k}.parquet'} holds rows of {sorted(new[k]['kernel'].unique())}, not {k}")
    # the paired rounds (rooflab/paired.py) replace the kernel's, whatever --impls says: a group's rounds are one
    # process's, and only whole (a call that timed no rounds leaves the reference's)
    paired = {
        k: read(raw / "paired" / f"{k}.parquet", args.gpu)
        for k in args.kernels
        if (raw / "paired" / f"{k}.parquet").exists()
    }
    old = {name: read(ref / f"{name}.parquet", args.gpu, "the reference") for name in ("profiles", "compiled")}
    if args.impls:
        old.update({k: read(ref / f"{k}.parquet", args.gpu, "the reference") for k in args.kernels})
        for k in args.kernels:
            for name in (k, "profiles"):
                rows = new[name][new[name]["kernel"] == k]
                missing = set(args.impls) - set(rows["impl"].unique())
                if missing:
                    where = raw / name / f"{k}.parquet" if (raw / name).is_dir() else raw / f"{name}.parquet"
                    raise SystemExit(f"{where} has no {k} rows of {sorted(missing)}. Nothing was "
                                     "written.")
    merged = {}
    for k in args.kernels:
        if args.impls:  # the call's rows of those implementations, the reference's of the others
            merged[k] = pd.concat([old[k][~old[k]["impl"].isin(args.impls)], new[k][new[k]["impl"].isin(args.impls)]],
                                  ignore_index=True)
        else:
            merged[k] = new[k]
    for k in args.kernels:
        write_parquet(merged[k], ref / f"{k}.parquet")
        shas = new[k][new[k]["impl"].isin(args.impls)] if args.impls else new[k]
        print(f"{k}: {len(merged[k])} rows ({len(shas)} from this call), git_sha "
              f"{', '.join(shas['git_sha'].dropna().unique())}")
    for name in ("profiles", "compiled"):
        if name == "compiled" and args.impls and "triton" not in args.impls:
            continue

        def ours(df):
            rows = df["kernel"].isin(args.kernels)
            if args.impls and "impl" in df:
                rows &= df["impl"].isin(args.impls)
            return rows

        mine = new[name][ours(new[name])]
        kept = old[name][~ours(old[name])]
        write_parquet(pd.concat([kept, mine], ignore_index=True), ref / f"{name}.parquet")
        print(f"{name}: {len(mine)} rows of {', '.join(args.kernels)} replace "
              f"{len(old[name]) - len(kept)}")
    for k, rounds in paired.items():
        write_parquet(rounds, ref / "paired" / f"{k}.parquet")
        print(f"paired/{k}.parquet replaced")
    write_parquet(new["ceilings"], tuning / f"ceilings_{args.label}.parquet")
    print(f"{tuning / f'ceilings_{args.label}.parquet'} written")


def read_per_kernel(raw: Path, name: str, kernels, gpu: str) -> pd.DataFrame:
    """The call's <name> rows of these kernels: raw/<name>/<kernel>.parquet each, or (a call from before the
    per-kernel jobs) the single raw/<name>.parquet."""
    if not (raw / name).is_dir():
        return read(raw / f"{name}.parquet", gpu)
    return pd.concat([read(raw / name / f"{k}.parquet", gpu) for k in kernels], ignore_index=True)


def read(path: Path, gpu: str, whose: str = "the call") -> pd.DataFrame:
    """A results parquet whose rows are all of `gpu`, or a clear exit."""
    if not path.is_file():
        if whose != "the call":
            raise SystemExit(f"{path} is missing: {whose} has no rows of this kernel to keep; merge the call without "
                             "--impls. Nothing was written.")
        raise SystemExit(f"{path} is missing: did the call measure it (profiles and compiled rows need the DAG's "
                         "profile and compiled rules)? Nothing was written.")
    df = pd.read_parquet(path)
    if "gpu" in df and set(df["gpu"].unique()) - {gpu}:
        raise SystemExit(f"{path} holds rows of {sorted(df['gpu'].unique())}, not only {gpu}. Nothing was written.")
    return df


if __name__ == "__main__":
    main()
