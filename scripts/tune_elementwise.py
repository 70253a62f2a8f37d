"""Tune the elementwise Triton launch (BLOCK_SIZE x num_warps) on the GPU present, with the sweep's own timer.

Prints achieved GB/s per variant at N x N against the measured copy bandwidth; the table guides the defaults in
kernels/gelu.py (and the per-program element count of vecadd/saxpy). GPU only.

    python scripts/tune_elementwise.py --n 8192 --out tune.csv
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402

from kernels.gelu import gelu_builtin, gelu_triton  # noqa: E402
from rooflab.timing import CudaEventTimer, TimingConfig, measure  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[8192])
    ap.add_argument("--out", default="tune_elementwise.csv")
    args = ap.parse_args()
    timer = CudaEventTimer(flush_l2=True)
    cfg = TimingConfig(warmup_ms=20, max_time_s=0.5)
    rows = []
    src = torch.randn(1 << 30, device="cuda")
    dst = torch.empty_like(src)
    copy = measure(lambda: dst.copy_(src), timer, cfg)
    copy_gbps = 2 * src.numel() * 4 / copy["median_ms"] / 1e6
    del src, dst
    for n in args.n:
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.randn(n, n, device="cuda").to(dtype)
            moved = 2 * x.numel() * x.element_size()
            variants = {"builtin": lambda: gelu_builtin(x)}
            for block in (1024, 2048, 4096, 8192, 16384):
                for warps in (4, 8, 16):
                    variants[f"triton B={block} w={warps}"] = (lambda b=block, w=warps: gelu_triton(x, b, w))
            for name, fn in variants.items():
                s = measure(fn, timer, cfg)
                rows.append({"n": n, "dtype": str(dtype).replace("torch.", ""), "variant": name,
                             "median_us": s["median_ms"] * 1e3, "gbps": moved / s["median_ms"] / 1e6,
                             "of_copy": moved / s["median_ms"] / 1e6 / copy_gbps})
    # Host-side launch overhead: back-to-back calls without synchronisation, small N (GPU work is tiny).
    import time

    from kernels.gelu import _gelu_kernel

    x = torch.randn(256, 256, device="cuda")
    y = torch.empty_like(x)
    n = x.numel()
    compiled = _gelu_kernel.warmup(x, y, n, BLOCK_SIZE=2048, num_warps=8, grid=(triton.cdiv(n, 2048),))
    runner = compiled[(triton.cdiv(n, 2048), 1, 1)]
    launches = {
        "builtin F.gelu": lambda: gelu_builtin(x),
        "gelu_triton wrapper": lambda: gelu_triton(x),
        "_gelu_kernel[grid] direct": lambda: _gelu_kernel[(triton.cdiv(n, 2048),)](x, y, n, BLOCK_SIZE=2048,
                                                                                     num_warps=8),
        "CompiledKernel runner": lambda: runner(x, y, n),
        "torch.empty_like only": lambda: torch.empty_like(x),
        "flush zero_ (2x L2)": lambda: timer._flush(),
    }
    for name, fn in launches.items():
        try:
            fn()
        except TypeError as exc:  # the CompiledKernel runner's launcher signature differs in triton 3.6
            print(f"{name}: not available here ({exc})")
            continue
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(2000):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        rows.append({"n": 256, "dtype": "float32", "variant": f"host us/call: {name}",
                     "median_us": (t1 - t0) / 2000 * 1e6, "gbps": float("nan"), "of_copy": float("nan")})
    df = pd.DataFrame(rows)
    df.to_csv(args.out, index=False)
    print(f"copy: {copy_gbps:.0f} GB/s")
    print(df[df.variant.str.startswith("host")][["variant", "median_us"]].to_string(index=False))
    df = df[~df.variant.str.startswith("host")]
    for (n, dtype), g in df.groupby(["n", "dtype"]):
        print(f"\nN={n} {dtype}")
        print(g.sort_values("gbps", ascending=False).head(6).to_string(index=False, float_format="%.3f"))


if __name__ == "__main__":
    main()
