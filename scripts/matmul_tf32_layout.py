"""What the pointer kernel compiles to for a TF32 product on Hopper (sm_90), by B's layout and pipeline depth: how it
loads B into shared memory (asynchronous copies by width, or 16-byte loads through registers and scalar stores) and
its tensor-core instructions. No GPU needed: Triton compiles ahead of time for sm_90 with the ptxas its wheel ships.

Hopper's TF32 MMA (wgmma) reads its shared-memory operands K-major only, so a row-major B (N contiguous) must be
transposed on its way to shared memory. Usage: python scripts/matmul_tf32_layout.py [--out CSV]
"""
from __future__ import annotations

import argparse
import csv
import os
import re
import sys
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # compile for the target, never interpret
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from kernels.matmul import _matmul_kernel  # noqa: E402

ARGS = ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm",
        "stride_cn")
# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps)
TILES = ((128, 128, 32, 3, 8), (128, 128, 32, 1, 8), (64, 128, 32, 4, 4), (64, 128, 32, 1, 4))
FIELDS = ("precision", "b_layout", "block_m", "block_n", "block_k", "num_stages", "num_warps", "wgmma", "mma_sync",
          "cp_async_16B", "cp_async_4B", "ld_global_v4", "st_shared_scalar", "st_shared_v4", "shared_bytes")


def compile_ptx(dtype: str, precision: str, b_layout: str, t: tuple) -> tuple[str, int]:
    """The kernel's PTX and shared memory for one case: unit strides are specialised as the launcher's are."""
    consts = {
        "ACTIVATION": "relu",
        "DOT_IN_FP32": False,
        "INPUT_PRECISION": precision,
        "BLOCK_M": t[0],
        "BLOCK_N": t[1],
        "BLOCK_K": t[2],
        "GROUP_M": 8,
        "stride_ak": 1,
        "stride_cn": 1,
        ("stride_bn" if b_layout == "row-major" else "stride_bk"): 1
    }
    sig = {a: ("*" + dtype if a.endswith("_ptr") else "i32") for a in ARGS}
    sig |= {c: "constexpr" for c in consts}
    attrs = {(i, ): [["tt.divisibility", 16]] for i, a in enumerate(sig) if a not in consts}
    k = triton.compile(ASTSource(fn=_matmul_kernel, signature=sig, constexprs=consts, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32), options={
                           "num_stages": t[3],
                           "num_warps": t[4]
                       })
    return k.asm["ptx"], int(k.metadata.shared)


def count(ptx: str) -> dict:
    """Static counts in the PTX: the pipeline's prologue issues one k-step's copies per stage ahead of the loop."""
    copies = re.findall(r"cp\.async\.\w+\.shared\.global\S*\s*\[[^\]]*\],\s*\[[^\]]*\],\s*(0x[0-9a-f]+|\d+)", ptx)
    return {
        "wgmma": len(re.findall(r"wgmma\.mma_async", ptx)),
        "mma_sync": len(re.findall(r"mma\.sync", ptx)),
        "cp_async_16B": sum(int(c, 0) == 16 for c in copies),
        "cp_async_4B": sum(int(c, 0) == 4 for c in copies),
        "ld_global_v4": len(re.findall(r"ld\.global\S*\.v4", ptx)),
        "st_shared_scalar": len(re.findall(r"st\.shared\.b32", ptx)),
        "st_shared_v4": len(re.findall(r"st\.shared\.v4", ptx))
    }


def rows() -> list[dict]:
    out = []
    for precision, dtype in (("tf32", "fp32"), ("ieee", "bf16")):
        for b_layout in ("row-major", "K-major"):
            for t in TILES:
                ptx, smem = compile_ptx(dtype, precision, b_layout, t)
                out.append({
                    "precision": "bf16" if dtype == "bf16" else precision,
                    "b_layout": b_layout,
                    "block_m": t[0],
                    "block_n": t[1],
                    "block_k": t[2],
                    "num_stages": t[3],
                    "num_warps": t[4],
                    **count(ptx), "shared_bytes": smem
                })
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="data/tuning/matmul_tf32_layout.csv")
    args = ap.parse_args()
    table = rows()
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(table)
    for r in table:
        print(" ".join(f"{k}={r[k]}" for k in FIELDS))
    print(f"triton {triton.__version__}; wrote {args.out}")


if __name__ == "__main__":
    main()
