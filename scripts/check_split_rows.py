"""Check the row kernels' split path on a GPU (issue 23): GPU time of ours as chosen, ours forced onto one program a
row (split=0), the PyTorch builtin and
torch.compile of the naive expression, bf16, at few-long-row shapes, unaligned 1024 x 50257 and a square shape
whose launch must not change; each of ours checked against float64.

GPU time: triton.testing.do_bench (median of its repetitions, µs, the L2 flushed between calls). No snakemake.
Usage: python scripts/check_split_rows.py [--dtype bfloat16] [--kernels softmax ...] [--shapes 8x256000 ...]
(about a minute on an H200, most of it torch.compile: a compile per kernel and shape)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's kernels, whatever is installed

import torch  # noqa: E402
import triton  # noqa: E402

from kernels import layernorm as ln, rmsnorm as rms, rowsum as rs, softmax as sm  # noqa: E402
from kernels._shared.rows import device_sms, split_cols  # noqa: E402
from rooflab.cell import relative_error  # noqa: E402
from rooflab.kernel import DEFAULT_TOLERANCE  # noqa: E402

SHAPES = ((8, 256000), (32, 128256), (64, 53248), (1024, 50257), (1024, 151936), (4096, 32000), (8192, 8192))
# kernel -> (module, forward inputs of make_inputs, ours, builtin, naive, float64 expression over those inputs,
# the keywords that force ours onto one program a row)
KERNELS = {
    "rowsum":
    (rs, 1, rs.rowsum_triton, rs.rowsum_builtin, rs.rowsum_naive, lambda x: x.double().sum(dim=1), dict(split=0)),
    "rmsnorm": (rms, 2, rms.rmsnorm_triton, rms.rmsnorm_builtin, rms.rmsnorm_naive,
                lambda x, w: rms.rmsnorm64(x.double(), w.double()), dict(split=0)),
    "layernorm": (ln, 3, ln.layernorm_triton, ln.layernorm_builtin, ln.layernorm_naive,
                  lambda x, w, b: ln.layernorm64(x.double(), w.double(), b.double()), dict(split=0)),
    "softmax": (sm, 1, sm.softmax_forward, sm.softmax_builtin, sm.softmax_naive_fwd,
                lambda x: torch.softmax(x.double(), dim=1), dict(split=0)),
}


def gpu_us(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3


def chosen(name: str, module, x: torch.Tensor) -> str:
    """The path the wrapper takes by itself: 'split C' (C columns a program) or 'one-row'."""
    rows, cols = x.shape
    unaligned = getattr(module, "SPLIT_UNALIGNED", False) and cols * x.element_size() % 16 != 0
    chunk = split_cols(rows, cols, device_sms(x), module.SPLIT_BELOW, module.SPLIT_CHUNK, unaligned)
    return f"split {chunk}" if chunk else "one-row"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    parser.add_argument("--shapes", nargs="*", default=[f"{m}x{n}" for m, n in SHAPES])
    parser.add_argument("--kernels", nargs="*", default=list(KERNELS), choices=list(KERNELS))
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    tolerance = DEFAULT_TOLERANCE[args.dtype]
    print(f"{torch.cuda.get_device_name()}, {device_sms(torch.empty(1, device='cuda'))} SMs, torch "
          f"{torch.__version__}, triton {triton.__version__}, {args.dtype}; GPU time, median of do_bench, µs")
    print(f"{'kernel':10} {'shape':>12} {'path':>11} {'ours':>8} {'one-row':>8} {'builtin':>8} {'compile':>8} "
          f"{'best/ours':>9}  check")
    failed = False
    for name in args.kernels:
        module, n_inputs, ours, builtin, naive, expr64, one_row = KERNELS[name]
        compiled = torch.compile(naive)
        for shape in args.shapes:
            rows, cols = (int(v) for v in shape.split("x"))
            inputs = module.make_inputs((rows, cols), dtype, "cuda")[:n_inputs]  # the norms add grad_y last
            ref = expr64(*inputs)
            errors = [relative_error(fn(*inputs), ref)[0] for fn in (ours, lambda *a: ours(*a, **one_row))]
            ok = all(e <= tolerance for e in errors)
            failed |= not ok
            t = {
                label: gpu_us(lambda: fn(*inputs))
                for label, fn in (("ours", ours), ("one-row", lambda *a: ours(*a, **one_row)), ("builtin", builtin),
                                  ("compile", compiled))
            }
            best = min(t["builtin"], t["compile"])
            print(f"{name:10} {shape:>12} {chosen(name, module, inputs[0]):>11} {t['ours']:8.1f} {t['one-row']:8.1f} "
                  f"{t['builtin']:8.1f} {t['compile']:8.1f} {best / t['ours']:9.2f}  "
                  f"{'ok' if ok else 'WRONG'} (relative error {errors[0]:.1e}, one-row {errors[1]:.1e})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
