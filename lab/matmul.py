"""matmul + ReLU: the pointer kernel and the TMA persistent kernel, each autotuned, against torch.relu(a @ b) and
cuBLAS's product alone, bf16 and fp16 at every --matmul-n; the configs the autotuners chose are kept as rows.
Section: matmul."""
import torch

from lab.common import DTYPES, timed


def matmul_variants(n, dtype):
    from kernels import matmul as mm

    a = torch.randn(n, n, device="cuda").to(dtype)
    b = torch.randn(n, n, device="cuda").to(dtype)
    b_k = b.t().contiguous().t()  # the same B stored K-major (a linear layer's weight.t())
    return {
        "builtin relu(mm)": lambda: torch.relu(torch.mm(a, b)),
        "cuBLAS mm alone": lambda: torch.mm(a, b),
        "triton pointer (autotuned)": lambda: mm.matmul_triton(a, b, method="pointer"),
        "triton tma persistent, B K-major (autotuned)": lambda: mm.matmul_triton(a, b_k, method="tma"),
        "triton tma persistent (autotuned)": lambda: mm.matmul_triton(a, b, method="tma"),  # last: "chosen tma"
        "cuBLAS mm alone, B K-major": lambda: torch.mm(a, b_k)
    }


def run_matmul(run):
    from kernels import matmul as mm

    for n in run.args.matmul_n:
        for dname in ("bfloat16", "float16"):
            for name, fn in matmul_variants(n, DTYPES[dname]).items():
                run.record("matmul", n, dname, name, timed(fn, run.timer, run.cfg), flops=2.0 * n**3 + n * n)
            for tuner, label in ((mm._matmul_kernel_autotuned, "pointer"), (mm._matmul_tma_autotuned, "tma")):
                best = getattr(tuner, "best_config", None)
                run.rows.append({"kernel": "matmul", "n": n, "dtype": dname, "variant": f"chosen {label}: {best}"})
            print(f"done matmul n={n}", flush=True)


# TF32 tiles: fp32 tiles are twice the bytes of 16-bit ones, so the 16-bit tiles at BLOCK_K 64 are pruned to 64-wide
# ones; these keep 128-256 wide tiles in shared memory with BLOCK_K 32 (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps).
TF32_TILES = [(128, 128, 32, 3, 4), (128, 128, 32, 4, 8), (128, 256, 32, 3, 8), (256, 128, 32, 3, 8),
              (128, 64, 32, 4, 4), (64, 128, 32, 4, 4)]


def run_tf32(run):
    """TF32 (float32 operands, torch's TF32 switch on): cuBLAS, ours autotuned, ours on B stored K-major (pointer and
    TMA kernels), and ours at each of TF32_TILES on the pointer and the TMA kernel, at every --matmul-n."""
    from kernels import matmul as mm
    from rooflab.kernel import math_mode

    def tile(bm, bn, bk, stages, warps):
        return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "num_stages": stages, "num_warps": warps}

    with math_mode("tf32"):
        for n in run.args.matmul_n:
            a = torch.randn(n, n, device="cuda")
            b = torch.randn(n, n, device="cuda")
            bk_major = b.t().contiguous().t()  # the same B, stored K-major (N x K rows): what Hopper's TF32 MMA reads
            variants = {
                "builtin relu(mm)":
                lambda: torch.relu(torch.mm(a, b)),
                "triton auto (autotuned)":
                lambda: mm.matmul_triton(a, b),
                "pointer auto, B K-major (product alone)":
                lambda: mm.matmul_triton(a, bk_major, method="pointer"),
                "pointer auto, B transposed + product":
                lambda: mm.matmul_triton(a,
                                         b.t().contiguous().t(), method="pointer"),
                "tma auto, B K-major (product alone)":
                lambda: mm.matmul_triton(a, bk_major, method="tma"),
                "cuBLAS mm alone":
                lambda: torch.mm(a, b)
            }
            for t in TF32_TILES[:3]:
                for method in ("pointer", "tma"):
                    variants[f"{method} {t[0]}x{t[1]}x{t[2]} s{t[3]} w{t[4]}, B K-major"] = \
                        lambda c=tile(*t), m=method: mm.matmul_triton(a, bk_major, config=c, method=m)
            for t in TF32_TILES:
                for method in ("pointer", "tma"):
                    variants[f"{method} {t[0]}x{t[1]}x{t[2]} s{t[3]} w{t[4]}"] = \
                        lambda c=tile(*t), m=method: mm.matmul_triton(a, b, config=c, method=m)
            for name, fn in variants.items():  # timed: a tile that does not fit or compile is a NaN row
                run.record("matmul", n, "tf32", name, timed(fn, run.timer, run.cfg), flops=mm.flops(n))
            print(f"done tf32 n={n}", flush=True)
