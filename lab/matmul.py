"""matmul + ReLU: the pointer kernel and the TMA persistent kernel, each autotuned, against torch.relu(a @ b) and
cuBLAS's product alone, bf16 and fp16 at every --matmul-n; the configs the autotuners chose are kept as rows.
Section: matmul."""
import torch

from lab.common import DTYPES, timed


def matmul_variants(n, dtype):
    from kernels import matmul as mm

    a = torch.randn(n, n, device="cuda").to(dtype)
    b = torch.randn(n, n, device="cuda").to(dtype)
    return {"builtin relu(mm)": lambda: torch.relu(torch.mm(a, b)),
            "cuBLAS mm alone": lambda: torch.mm(a, b),
            "triton pointer (autotuned)": lambda: mm.matmul_triton(a, b, method="pointer"),
            "triton tma persistent (autotuned)": lambda: mm.matmul_triton(a, b, method="tma")}


def run_matmul(run):
    from kernels import matmul as mm

    for n in run.args.matmul_n:
        for dname in ("bfloat16", "float16"):
            for name, fn in matmul_variants(n, DTYPES[dname]).items():
                run.record("matmul", n, dname, name, timed(fn, run.timer, run.cfg), flops=2.0 * n ** 3 + n * n)
            for tuner, label in ((mm._matmul_kernel_autotuned, "pointer"), (mm._matmul_tma_autotuned, "tma")):
                best = getattr(tuner, "best_config", None)
                run.rows.append({"kernel": "matmul", "n": n, "dtype": dname, "variant": f"chosen {label}: {best}"})
            print(f"done matmul n={n}", flush=True)
