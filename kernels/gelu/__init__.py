"""GeLU, tanh approximation, elementwise over an N x N tensor: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

One program per BLOCK_SIZE elements, math in fp32 whatever the storage dtype; full blocks load and store without a
mask. The identity 0.5 (1 + tanh(u)) = sigmoid(2u) avoids libdevice's tanh (the interpreter has none); the default
form folds it into x / (1 + 2^(x (C1 + C2 x^2))) with the fast division. Also here: a hand-written CUDA kernel
(kernels/gelu/gelu.cu, compiled on first use; skipped with a reason where there is no GPU or nvcc), the naive
PyTorch expression, the builtin, the float64 reference and the FLOP/byte model.

References: Hendrycks & Gimpel, "Gaussian Error Linear Units" (2016); Triton tutorial 01-vector-add.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels._shared import tables
from kernels._shared.cuda import build_cuda, cuda_source
from kernels._shared.fastlaunch import LaunchCache, spec
from kernels._shared.tables import track_swaps, values
from kernels.gelu import plan
from kernels.gelu.table import GELU
from rooflab.cuda_ext import cuda_skip_reason
from rooflab.kernel import ELEMENT_BYTES, Kernel, eager
from rooflab.shapes import as_shape
from rooflab.triton_utils import check_device

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
# -2 sqrt(2/pi) log2(e), and times 0.044715: 2^(x (C1 + C2 x^2)) == exp(-2u), u = sqrt(2/pi) (x + 0.044715 x^3)
GELU_C1: tl.constexpr = tl.constexpr(-2.0 * SQRT_2_OVER_PI / math.log(2.0))
GELU_C2: tl.constexpr = tl.constexpr(-2.0 * SQRT_2_OVER_PI / math.log(2.0) * 0.044715)
LAUNCH = {getattr(torch, name): launch for name, launch in values(GELU["LAUNCH"]).items()}  # (BLOCK_SIZE, warps)


@triton.jit
def _gelu_tanh(x, PRECISE: tl.constexpr):
    if PRECISE:
        u = 0.7978845608028654 * (x + 0.044715 * x * x * x)  # sqrt(2/pi) * (x + 0.044715 x^3)
        return x * tl.sigmoid(2.0 * u)  # == 0.5 x (1 + tanh(u)); sigmoid divides with IEEE rounding (div.rn.f32)
    else:
        # The same value in fewer instructions: x / (1 + exp(-2u)) with -2u log2(e) folded into one polynomial,
        # exp2 for exp, and the fast division (div.full.f32, <= 2 ulp) for the IEEE one. At 16-bit storage the
        # kernel issues ~20 instructions per element (~2.5 warp-instructions per cycle per SM at 8192^2 bf16),
        # enough to cost bandwidth; this form needs about 12.
        z = x * (GELU_C1 + GELU_C2 * (x * x))
        return tl.fdiv(x, 1.0 + tl.exp2(z), ieee_rounding=False)


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr, PRECISE: tl.constexpr):
    pid = tl.program_id(axis=0)
    start = pid.to(tl.int64) * BLOCK_SIZE  # int64: 8192^2 * 4 B > 2^31
    offsets = start + tl.arange(0, BLOCK_SIZE)
    if start + BLOCK_SIZE <= n_elements:
        # a full block: no mask, so the accesses vectorise even when n_elements is no multiple of 16 (1793^2)
        x = tl.load(x_ptr + offsets).to(tl.float32)  # math in fp32, whatever the storage dtype
        tl.store(y_ptr + offsets, _gelu_tanh(x, PRECISE).to(y_ptr.dtype.element_ty))
    else:  # the last, partial block
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
        tl.store(y_ptr + offsets, _gelu_tanh(x, PRECISE).to(y_ptr.dtype.element_ty), mask=mask)


_LAUNCHES = LaunchCache("gelu")


def gelu_triton(x: torch.Tensor, block_size: int | None = None, num_warps: int | None = None,
                precise: bool = False) -> torch.Tensor:
    """Check the input; allocate the output; launch what kernels/gelu/plan.py plans: one program per BLOCK_SIZE
    elements, BLOCK_SIZE and num_warps by dtype (table.py) unless given. ``precise`` divides with
    IEEE rounding (the fast division is within 2 ulp of fp32, far below the bf16/fp32 tolerances of the tests).
    A key seen before skips the checks and launches as its first call did (kernels/_shared/fastlaunch.py)."""
    key = (spec(x), block_size, num_warps, precise, tables.VERSION)
    launch = _LAUNCHES.get(key)
    if launch is not None:
        y = torch.empty_like(x)
        launch(x, y)
        return y
    check_device(x)
    if not x.is_contiguous():
        raise ValueError(f"gelu_triton needs a contiguous tensor (got shape {tuple(x.shape)}, strides "
                         f"{x.stride()}); call .contiguous() explicitly if a copy is acceptable")
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"gelu_triton supports float32, bfloat16 and float16, not {x.dtype}")
    y = torch.empty_like(x)
    if x.numel() == 0:
        return y
    p = plan.forward(x.numel(), x.dtype, LAUNCH, block_size, num_warps, precise)
    _LAUNCHES.launch(key, globals()[p.kernel], p.grid, (x, y, *p.ints), p.meta, n_head=2)
    return y


# Hand-written CUDA (kernels/gelu/gelu.cu): a grid-stride loop over 16-byte packs (4 fp32 or 8 bf16) when both
# pointers are 16-byte aligned, then a scalar grid-stride loop over the tail (or everything when unaligned).
CUDA_SOURCE = cuda_source("gelu")
CPP_SOURCE = "torch::Tensor gelu_cuda(torch::Tensor x);"
CUDA_DTYPES = (torch.float32, torch.bfloat16)
_cuda_module = None  # compiled on first use


def _cuda():
    global _cuda_module
    if _cuda_module is None:
        _cuda_module = build_cuda("gelu", CPP_SOURCE, ["gelu_cuda"])
    return _cuda_module


def gelu_cuda(x: torch.Tensor) -> torch.Tensor:
    """Check the input; the extension (compiled on first call) allocates and launches."""
    if x.device.type != "cuda":
        raise ValueError(f"gelu_cuda needs a CUDA tensor, got a tensor on {x.device}")
    if x.dtype not in CUDA_DTYPES:
        raise TypeError(f"gelu_cuda supports float32 and bfloat16, not {x.dtype}")
    if not x.is_contiguous():
        raise ValueError(f"gelu_cuda needs a contiguous tensor (got shape {tuple(x.shape)}, strides {x.stride()}); "
                         f"call .contiguous() explicitly if a copy is acceptable")
    return _cuda().gelu_cuda(x)


def gelu_naive(x: torch.Tensor) -> torch.Tensor:
    """The unfused expression: every line is its own kernel and its own pass over memory."""
    cube = x * x * x  # 2 kernels: read 2N^2, write N^2 each
    inner = x + 0.044715 * cube  # 2 kernels: read N^2 write N^2; read 2N^2 write N^2
    t = torch.tanh(SQRT_2_OVER_PI * inner)  # 2 kernels: read N^2, write N^2 each
    return 0.5 * x * (1.0 + t)  # 3 kernels: read N^2 write N^2; read N^2 write N^2; read 2N^2 write N^2


def gelu_builtin(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


def reference(inputs) -> torch.Tensor:
    (x, ) = inputs
    return F.gelu(x.to(torch.float64), approximate="tanh")


def make_inputs(shape, dtype: torch.dtype, device: str, seed: int = 0):
    rows, cols = as_shape(shape, "rows")  # an int n: the square n x n
    g = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn((rows, cols), generator=g, device=device, dtype=torch.float32).to(dtype), )


FLOPS_PER_ELEMENT = 9  # x^3 (2 mul), *0.044715, +x, *sqrt(2/pi), tanh (1), +1, *0.5, *x


def flops(shape) -> float:
    rows, cols = as_shape(shape, "rows")
    return FLOPS_PER_ELEMENT * rows * cols


def bytes_moved(shape, dtype: str) -> float:
    rows, cols = as_shape(shape, "rows")
    return 2 * rows * cols * ELEMENT_BYTES[dtype]  # the fewest: read x once, write y once


KERNEL = Kernel(name="gelu", description="GeLU (tanh approximation), elementwise over N x N", make_inputs=make_inputs,
                reference=reference, flops=flops, bytes=bytes_moved, impls=eager(naive=gelu_naive, builtin=gelu_builtin,
                                                                                 triton=gelu_triton, cuda=gelu_cuda),
                naive_fn=gelu_naive, skip_reason=lambda impl, device: cuda_skip_reason(device)
                if impl == "cuda" else None,
                )
