"""Our FlashAttention-2 (kernels/attention.py) against PyTorch SDPA on a CUDA GPU: correctness and TFLOP/s.

    python scripts/check_attention.py            # b=4, h=16, s=4096, d=128, bf16, causal and not, fwd and fwd+bwd
    python scripts/check_attention.py --long     # ... and 1 x 32 x 16384 x 128 causal (int64 offsets, long rows)

Each output (O; dQ, dK, dV) of ours and of SDPA is compared with the float64 naive expression (relative norm, the
sweep's tolerance for the dtype); times are triton.testing.do_bench medians (GPU time of a Python loop, L2 flushed),
TFLOP/s from kernels/attention.flops (FA2's count: backward 2.5x forward, causal half). Also prints the backend SDPA
ran (the kernel names a profiler saw: flash, cuDNN or memory-efficient). About 30-60 s, most of it our autotuning.
"""
from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402

from kernels import attention as at  # noqa: E402
from rooflab.kernel import DEFAULT_TOLERANCE, torch_dtype  # noqa: E402

SHAPES = [((4, 16, 4096, 128), True), ((4, 16, 4096, 128), False)]
LONG = [((1, 32, 16384, 128), True)]


def impls(causal: bool) -> dict:
    return {"ours": functools.partial(at.attention_triton, causal=causal),
            "sdpa": functools.partial(F.scaled_dot_product_attention, is_causal=causal)}


def closure(fn, inputs, pass_: str):
    q, k, v, grad_o = inputs
    if pass_ == "fwd":
        return lambda: fn(q, k, v)
    leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]

    def fwd_bwd():
        for t in leaves:
            t.grad = None
        fn(*leaves).backward(grad_o)
        return tuple(t.grad for t in leaves)

    return fwd_bwd


def rel_err(out, ref) -> float:
    outs, refs = (out,) if torch.is_tensor(out) else out, (ref,) if torch.is_tensor(ref) else ref
    num = sum(float(((o.double() - r) ** 2).sum()) for o, r in zip(outs, refs))
    return (num / sum(float((r ** 2).sum()) for r in refs)) ** 0.5


def sdpa_backend(inputs, causal: bool) -> str:
    """The CUDA kernels one SDPA forward launched, as the profiler names them."""
    q, k, v, _ = inputs
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.cuda.synchronize()
    names = {e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA}
    tags = [t for t in ("flash", "cudnn", "efficient", "fmha", "cutlass") if any(t in n.lower() for n in names)]
    return f"{'/'.join(tags) or 'math?'} ({', '.join(sorted(n[:60] for n in names))})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--long", action="store_true", help="add 1 x 32 x 16384 x 128 causal")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    start, failures = time.perf_counter(), 0
    tol = DEFAULT_TOLERANCE[args.dtype]
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, {args.dtype}, "
          f"tolerance {tol:g}")
    print(f"{'shape':>20} {'causal':>6} {'pass':>7} {'ours ms':>8} {'sdpa ms':>8} {'ours TF/s':>9} {'sdpa TF/s':>9} "
          f"{'ours err':>9} {'sdpa err':>9}  tuned")
    for shape, causal in SHAPES + (LONG if args.long else []):
        inputs = at.make_inputs(shape, torch_dtype(args.dtype), "cuda", seed=0)
        print(f"  SDPA ran: {sdpa_backend(inputs, causal)}")
        for pass_ in ("fwd", "fwd+bwd"):
            ref = at.reference(inputs, pass_, causal)
            row, errs = {}, {}
            for name, fn in impls(causal).items():
                run = closure(fn, inputs, pass_)
                errs[name] = rel_err(run(), ref)  # the first call compiles and autotunes
                row[name] = triton.testing.do_bench(run, warmup=25, rep=100)
            del ref
            tflops = {n: at.flops(shape, pass_, causal) / (ms * 1e-3) / 1e12 for n, ms in row.items()}
            ok = errs["ours"] <= tol
            failures += not ok
            tuned = [getattr(k, "best_config", None) for k in (at._attn_fwd_kernel, at._attn_bwd_dkdv_kernel,
                                                                 at._attn_bwd_dq_kernel)]
            tuned = "; ".join(str(c) for c in tuned[:1 if pass_ == "fwd" else 3] if c is not None)
            print(f"{'x'.join(map(str, shape)):>20} {str(causal):>6} {pass_:>7} {row['ours']:8.3f} {row['sdpa']:8.3f} "
                  f"{tflops['ours']:9.1f} {tflops['sdpa']:9.1f} {errs['ours']:9.2e} {errs['sdpa']:9.2e}  "
                  f"{'' if ok else 'MISMATCH '}{tuned}")
    print(f"{'all within tolerance' if not failures else f'{failures} mismatches'}; "
          f"{time.perf_counter() - start:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
