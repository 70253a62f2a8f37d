"""Nsight Compute on the why cells, in one command and without snakemake (experiments/why_ncu.py's ``profile``):

    python3 scripts/why_ncu.py --out $OUT/why          # $OUT/why/why_ncu.parquet, the report, raw CSV, manifest

The GPU present picks the config key (--gpu to name it); the cells are experiments/why_ncu.CELLS (--cells JSON to
replace them). ncu must be on the PATH. About three minutes on one H100 or H200 (ncu replays each kernel once per
counter pass). Copy why_ncu.parquet to data/reference/<gpu>/ (or results/raw/<gpu>/) for the paper to read it.
"""
import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for why_ncu.parquet and the raw files")
    ap.add_argument("--gpu", default=None, help="config key of the device (default: the GPU present)")
    ap.add_argument("--cells", default="[]", help="JSON list of cells; [] for experiments/why_ncu.CELLS")
    args = ap.parse_args(argv)
    from experiments import why_ncu

    out = Path(args.out)
    return why_ncu.main(
        ["profile", "--out",
         str(out / "why_ncu.parquet"), "--raw-dir",
         str(out), "--cells", args.cells] + (["--gpu", args.gpu] if args.gpu else []))


if __name__ == "__main__":
    sys.exit(main())
