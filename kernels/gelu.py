"""GeLU, tanh approximation: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), elementwise over an N x N tensor.

The whole story of the kernel: the Triton kernel, its launch wrapper, the naive PyTorch expression (several kernels,
as a student writes it), the builtin, the float64 reference, and the FLOP/byte model that the analysis uses.

References: Hendrycks & Gimpel, "Gaussian Error Linear Units" (2016); Triton tutorial 01-vector-add for the launch
pattern. The identity 0.5 (1 + tanh(u)) = sigmoid(2u) lets the kernel avoid libdevice's tanh (unsupported by the
Triton interpreter) with no loss of accuracy.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from rooflab.kernel import ELEMENT_BYTES, Kernel
from rooflab.triton_utils import check_device

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
FLOPS_PER_ELEMENT = 9  # x^3 (2 mul), *0.044715, +x, *sqrt(2/pi), tanh (1), +1, *0.5, *x


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)  # int64: 8192^2 * 4 B > 2^31
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)  # math in fp32, whatever the storage dtype
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)  # sqrt(2/pi) * (x + 0.044715 x^3)
    y = x * tl.sigmoid(2.0 * u)  # == 0.5 x (1 + tanh(u))
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


def gelu_triton(x: torch.Tensor, block_size: int = 2048, num_warps: int = 8) -> torch.Tensor:
    """Check the input; allocate the output; launch one program per BLOCK_SIZE elements."""
    check_device(x)
    if not x.is_contiguous():
        raise ValueError(f"gelu_triton needs a contiguous tensor (got shape {tuple(x.shape)}, strides "
                         f"{x.stride()}); call .contiguous() explicitly if a copy is acceptable")
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"gelu_triton supports float32, bfloat16 and float16, not {x.dtype}")
    y = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return y
    grid = lambda META: (triton.cdiv(n, META["BLOCK_SIZE"]),)  # noqa: E731
    _gelu_kernel[grid](x, y, n, BLOCK_SIZE=block_size, num_warps=num_warps)
    return y


def gelu_naive(x: torch.Tensor) -> torch.Tensor:
    """The unfused expression: every line is its own kernel and its own pass over memory."""
    cube = x * x * x  # 2 kernels: read 2N^2, write N^2 each
    inner = x + 0.044715 * cube  # 2 kernels: read N^2 write N^2; read 2N^2 write N^2
    t = torch.tanh(SQRT_2_OVER_PI * inner)  # 2 kernels: read N^2, write N^2 each
    return 0.5 * x * (1.0 + t)  # 3 kernels: read N^2 write N^2; read N^2 write N^2; read 2N^2 write N^2


def gelu_builtin(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


def reference(inputs) -> torch.Tensor:
    (x,) = inputs
    return F.gelu(x.to(torch.float64), approximate="tanh")


def make_inputs(n: int, dtype: torch.dtype, device: str, seed: int = 0):
    g = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn((n, n), generator=g, device=device, dtype=torch.float32).to(dtype),)


def flops(n: int) -> float:
    return FLOPS_PER_ELEMENT * n * n


def bytes_moved(n: int, dtype: str) -> float:
    return 2 * n * n * ELEMENT_BYTES[dtype]  # the fewest: read x once, write y once


KERNEL = Kernel(
    name="gelu",
    description="GeLU (tanh approximation), elementwise over N x N",
    make_inputs=make_inputs,
    reference=reference,
    flops=flops,
    bytes=bytes_moved,
    impls={
        "naive": lambda inputs: (lambda: gelu_naive(*inputs)),
        "builtin": lambda inputs: (lambda: gelu_builtin(*inputs)),
        "triton": lambda inputs: (lambda: gelu_triton(*inputs)),
    },
    naive_fn=gelu_naive,
)
