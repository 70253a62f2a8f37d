"""The fast-kernels scorecard, from a metrics parquet (one run): per kernel and dtype,

- memory-bound kernels: Triton GB/s at the largest N, its fraction of the copy bandwidth measured in the same run
  (goal >= 0.95), its fraction of a same-size copy (ceiling copy_<dtype>_<N> where the ceilings table has it:
  the wall under the per-call fixed cost every cell pays), and the worst ratio Triton / best of (builtin, torch.compile) over N >= 1024 (goal >= 1.00);
- matmul + ReLU: Triton TFLOP/s / cuBLAS (builtin) TFLOP/s at each N (goals: >= 1.00 at 4096 and 8192, >= 0.90 at
  2048, >= 0.80 at 1024);
- the memory-bound Triton cells (fp32 and bf16, N >= 1024) below the best of builtin and torch.compile: how many,
  how many within 2 %, and which trail by more than three of the pair's standard errors (each median's rse_median,
  combined), since two medians at the memory wall a fraction of a percent apart cannot say which is faster.

    python scripts/ratio_table.py results/metrics.parquet [--gpu h200] [--pass fwd] [--ceilings PATH]
"""
import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent

from rooflab.verdicts import VerdictRules  # (k_sigma: how many standard errors a difference must exceed)

MATMUL_GOALS = {1024: 0.80, 2048: 0.90, 4096: 1.00, 8192: 1.00}


def scorecard(m: pd.DataFrame, gpu: str, pass_: str = "fwd",
              ceilings: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    ok = m[(m["status"] == "ok") & (m["gpu"] == gpu) & (m["pass"] == pass_)]
    t = ok.pivot_table(index=["kernel", "dtype", "size"], columns="impl", values="median_ms", aggfunc="first")
    gb = ok.pivot_table(index=["kernel", "dtype", "size"], columns="impl", values="achieved_gbps", aggfunc="first")
    copy = ok["peak_bandwidth_measured_gbps"].dropna()
    copy = float(copy.iloc[0]) if len(copy) else float("nan")
    same = {}
    if ceilings is not None and len(ceilings):
        c = ceilings[ceilings["gpu"] == gpu]
        same = {r["ceiling"]: r["value"] / 1e9 for _, r in c.iterrows() if r["ceiling"].startswith("copy_")}
    mem_rows, mm_rows = [], []
    for (kernel, dtype), g in t.groupby(level=[0, 1]):
        g = g.droplevel([0, 1])
        if "triton" not in g:
            continue
        if kernel == "matmul":
            for n, r in g.iterrows():
                if n in MATMUL_GOALS or n == 1793:
                    tf = ok[(ok.kernel == kernel) & (ok.dtype == dtype) & (ok["size"] == n)].set_index("impl")
                    mm_rows.append({
                        "dtype":
                        dtype,
                        "N":
                        n,
                        "triton_tflops":
                        tf.loc["triton", "achieved_tflops"] if "triton" in tf.index else float("nan"),
                        "cublas_tflops":
                        tf.loc["builtin", "achieved_tflops"] if "builtin" in tf.index else float("nan"),
                        "triton/cublas":
                        r.get("builtin") / r["triton"],
                        "goal":
                        MATMUL_GOALS.get(n, float("nan"))
                    })
            continue
        best_torch = g[[c for c in ("builtin", "compile") if c in g]].min(axis=1)
        big = g[g.index >= 1024]
        ratio = (best_torch / g["triton"])[big.index]
        nmax = g["triton"].dropna().index.max()
        tgb = gb.loc[(kernel, dtype, nmax), "triton"]
        mem_rows.append({
            "kernel": kernel,
            "dtype": dtype,
            "N": nmax,
            "triton_gbps": tgb,
            "copy_gbps": copy,
            "triton/copy": tgb / copy,
            "triton/same-size copy": tgb / same.get(f"copy_{dtype}_{nmax}", float("nan")),
            "min triton/best_torch (N>=1024)": ratio.min(),
            "at N": ratio.idxmin() if ratio.notna().any() else None
        })
    return pd.DataFrame(mem_rows), pd.DataFrame(mm_rows)


def behind_torch(m: pd.DataFrame, gpu: str, pass_: str = "fwd", dtypes=("float32", "bfloat16"),
                 min_size: int = 1024) -> tuple[pd.DataFrame, int]:
    """(the memory-bound Triton cells of `dtypes` at N >= min_size slower than the best of builtin and torch.compile,
    with ratio = best torch time / Triton time, se = the ratio's relative standard error from both medians'
    rse_median, and z = (1 - ratio) / se; the number of cells compared)."""
    ok = m[(m["status"] == "ok") & (m["gpu"] == gpu) & (m["pass"] == pass_) & (m["kernel"] != "matmul")
           & m["dtype"].isin(dtypes) & (m["size"] >= min_size)]
    rows, compared = [], 0
    for (kernel, dtype, n), g in ok.groupby(["kernel", "dtype", "size"]):
        g = g.set_index("impl")
        torch_impls = [i for i in ("builtin", "compile") if i in g.index]
        if "triton" not in g.index or not torch_impls:
            continue
        compared += 1
        best = min(torch_impls, key=lambda i: g.loc[i, "median_ms"])
        ratio = g.loc[best, "median_ms"] / g.loc["triton", "median_ms"]
        if ratio < 1:
            se = float(np.hypot(g.loc["triton"].get("rse_median", np.nan), g.loc[best].get("rse_median", np.nan)))
            rows.append({
                "kernel": kernel,
                "dtype": dtype,
                "N": n,
                "best torch": best,
                "triton/best_torch": ratio,
                "se": se,
                "z": (1 - ratio) / se if se > 0 else float("nan")
            })
    cols = ["kernel", "dtype", "N", "best torch", "triton/best_torch", "se", "z"]
    return pd.DataFrame(rows, columns=cols).sort_values("triton/best_torch", ignore_index=True), compared


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("metrics")
    ap.add_argument("--gpu", default=None, help="default: the first non-cpu gpu in the file")
    ap.add_argument("--pass", dest="pass_", default="fwd")
    ap.add_argument(
        "--ceilings", default=None,
        help="ceilings parquet with same-size copies (default: results/raw/<gpu>/ceilings.parquet, else "
        "the committed reference's data/reference/<gpu>/ceilings.parquet, which a CPU run merges)")
    a = ap.parse_args(argv)
    m = pd.read_parquet(a.metrics)
    gpus = [g for g in dict.fromkeys(m["gpu"]) if g != "cpu"] or list(dict.fromkeys(m["gpu"]))
    gpu = a.gpu or gpus[0]
    candidates = [Path(a.ceilings)] if a.ceilings else [
        Path(f"results/raw/{gpu}/ceilings.parquet"), REPO / "data" / "reference" / gpu / "ceilings.parquet"
    ]
    cpath = next((p for p in candidates if p.exists()), None)
    ceilings = pd.read_parquet(cpath) if cpath is not None else None
    mem, mm = scorecard(m, gpu, a.pass_, ceilings)
    pd.set_option("display.width", 160)
    print(f"gpu {gpu}, pass {a.pass_}")
    if len(mem):
        print("\nmemory-bound kernels (goals: triton/copy >= 0.95; triton vs best torch >= 1.00 for N >= 1024)")
        print(mem.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if len(mm):
        print("\nmatmul + ReLU (goals: >= 1.00 at 4096/8192, >= 0.90 at 2048, >= 0.80 at 1024)")
        print(mm.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    behind, compared = behind_torch(m, gpu, a.pass_)
    if compared:
        k = VerdictRules().k_sigma
        beyond = behind[behind["z"] > k]
        print(f"\nmemory-bound Triton cells (fp32, bf16, N >= 1024) below the best torch: {len(behind)} of {compared}; "
              f"{int((behind['triton/best_torch'] >= 0.98).sum())} within 2 %, {len(beyond)} by more than {k:g} "
              "standard errors" + (":" if len(beyond) else ""))
        if len(beyond):
            print(beyond.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
