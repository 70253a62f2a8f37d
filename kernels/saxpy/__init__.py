"""SAXPY: z = a * x + y, elementwise over two N x N tensors, with a a Python float scalar.

The whole story of the kernel: the Triton kernel, its launch wrapper, the naive PyTorch expression, the builtin, the
float64 reference, and the FLOP/byte model that the analysis uses. Two FLOPs per 3 elements moved: memory-bound.

References: BLAS level 1 ?AXPY (Lawson et al., 1979); Triton tutorial 01-vector-add for the launch pattern. The
scalar a travels as an fp32 kernel argument (make_inputs draws it exactly representable in fp32, so the float64
reference sees the same a). The kernel honours strides (x.t() and x[:, ::2] give the right answer);
when every tensor is contiguous the wrapper views them as one long row so loads vectorise and no lane is wasted at
the end of short rows.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._shared.elementwise import launch_binary, tile
from kernels._shared.fastlaunch import LaunchCache
from kernels._shared.tables import track_swaps
from rooflab.kernel import ELEMENT_BYTES, Kernel, eager
from rooflab.shapes import as_shape

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key


@triton.jit
def _saxpy_kernel(x_ptr, y_ptr, z_ptr, a, n_rows, n_cols, stride_xm, stride_xn, stride_ym, stride_yn, stride_zm,
                  stride_zn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ONE_ROW: tl.constexpr):
    rows, cols, interior = tile(tl.program_id(axis=0), n_rows, n_cols, BLOCK_M, BLOCK_N, ONE_ROW)
    x_ptrs = x_ptr + rows * stride_xm + cols * stride_xn
    y_ptrs = y_ptr + rows * stride_ym + cols * stride_yn
    z_ptrs = z_ptr + rows * stride_zm + cols * stride_zn
    if interior:
        # an interior tile: no mask, so its accesses vectorise even when n_cols is no multiple of 16 (1793^2)
        x = tl.load(x_ptrs).to(tl.float32)
        y = tl.load(y_ptrs).to(tl.float32)
        z = a * x + y
        tl.store(z_ptrs, z.to(z_ptr.dtype.element_ty))
    else:  # the ragged edge
        mask = (rows < n_rows) & (cols < n_cols)
        x = tl.load(x_ptrs, mask=mask).to(tl.float32)
        y = tl.load(y_ptrs, mask=mask).to(tl.float32)
        z = a * x + y
        tl.store(z_ptrs, z.to(z_ptr.dtype.element_ty), mask=mask)


_LAUNCHES = LaunchCache("saxpy")


def saxpy_triton(a: float, x: torch.Tensor, y: torch.Tensor, num_warps: int | None = None,
                 block_size: int | None = None, one_row: bool | None = None) -> torch.Tensor:
    """Check the inputs; allocate the output; launch one program per tile of ``block_size`` elements with ``num_warps``
    (defaults by dtype: _shared/elementwise.LAUNCH); ``one_row``: see _shared/elementwise.tile_launch."""
    if a.__class__ is not float:  # the checks and the conversion only where a is no float (a bool is an int)
        if isinstance(a, bool) or not isinstance(a, (int, float)):
            raise TypeError(f"saxpy_triton needs a Python float scalar a, got {type(a).__name__}")
        a = float(a)
    return launch_binary(_LAUNCHES, _saxpy_kernel, "saxpy_triton", x, y, (a, ), num_warps, block_size, one_row)


def saxpy_naive(a: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return a * x + y  # 2 kernels: read N^2, write N^2; read 2N^2, write N^2


def saxpy_builtin(a: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.add(y, x, alpha=a)  # one fused kernel


def reference(inputs) -> torch.Tensor:
    a, x, y = inputs
    return a * x.to(torch.float64) + y.to(torch.float64)


def make_inputs(shape, dtype: torch.dtype, device: str, seed: int = 0):
    rows, cols = as_shape(shape, "rows")  # an int n: the square n x n
    g = torch.Generator(device=device).manual_seed(seed)
    a = 0.5 + float(torch.rand((), generator=g, device=device, dtype=torch.float32))  # exact in fp32
    x = torch.randn((rows, cols), generator=g, device=device, dtype=torch.float32).to(dtype)
    y = torch.randn((rows, cols), generator=g, device=device, dtype=torch.float32).to(dtype)
    return a, x, y


FLOPS_PER_ELEMENT = 2  # one multiply, one add


def flops(shape) -> float:
    rows, cols = as_shape(shape, "rows")
    return FLOPS_PER_ELEMENT * rows * cols


def bytes_moved(shape, dtype: str) -> float:
    rows, cols = as_shape(shape, "rows")
    return 3 * rows * cols * ELEMENT_BYTES[dtype]  # the fewest: read x and y, write z (a is a kernel argument)


KERNEL = Kernel(name="saxpy", description="SAXPY a * x + y (a scalar), elementwise over N x N", make_inputs=make_inputs,
                reference=reference, flops=flops, bytes=bytes_moved,
                impls=eager(naive=saxpy_naive, builtin=saxpy_builtin, triton=saxpy_triton), naive_fn=saxpy_naive,
                )
