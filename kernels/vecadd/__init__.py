"""Vector add: z = x + y, elementwise over two N x N tensors.

The whole story of the kernel: the Triton kernel, its launch wrapper, the naive PyTorch expression, the builtin, the
float64 reference, and the FLOP/byte model that the analysis uses. Vector add is the purest bandwidth test: one FLOP
per 3 elements moved, so it sits far left on the roofline and its GB/s should match a device-to-device copy.

References: Triton tutorial 01-vector-add. The kernel honours strides (x.t() and x[:, ::2] give the right answer);
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
def _vecadd_kernel(x_ptr, y_ptr, z_ptr, n_rows, n_cols, stride_xm, stride_xn, stride_ym, stride_yn, stride_zm,
                   stride_zn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ONE_ROW: tl.constexpr):
    rows, cols, interior = tile(tl.program_id(axis=0), n_rows, n_cols, BLOCK_M, BLOCK_N, ONE_ROW)
    x_ptrs = x_ptr + rows * stride_xm + cols * stride_xn
    y_ptrs = y_ptr + rows * stride_ym + cols * stride_yn
    z_ptrs = z_ptr + rows * stride_zm + cols * stride_zn
    if interior:
        # an interior tile: no mask, so its accesses vectorise even when n_cols is no multiple of 16 (1793^2)
        x = tl.load(x_ptrs).to(tl.float32)
        y = tl.load(y_ptrs).to(tl.float32)
        z = x + y
        tl.store(z_ptrs, z.to(z_ptr.dtype.element_ty))
    else:  # the ragged edge
        mask = (rows < n_rows) & (cols < n_cols)
        x = tl.load(x_ptrs, mask=mask).to(tl.float32)
        y = tl.load(y_ptrs, mask=mask).to(tl.float32)
        z = x + y
        tl.store(z_ptrs, z.to(z_ptr.dtype.element_ty), mask=mask)


_LAUNCHES = LaunchCache("vecadd")


def vecadd_triton(x: torch.Tensor, y: torch.Tensor, num_warps: int | None = None, block_size: int | None = None,
                  one_row: bool | None = None) -> torch.Tensor:
    """Check the inputs; allocate the output; launch one program per tile of ``block_size`` elements with ``num_warps``
    (defaults by dtype: _shared/elementwise.LAUNCH); ``one_row``: see _shared/elementwise.tile_launch."""
    return launch_binary(_LAUNCHES, _vecadd_kernel, "vecadd_triton", x, y, (), num_warps, block_size, one_row)


def vecadd_naive(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y  # 1 kernel: read 2N^2, write N^2


def vecadd_builtin(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.add(x, y)


def reference(inputs) -> torch.Tensor:
    x, y = inputs
    return x.to(torch.float64) + y.to(torch.float64)


def make_inputs(shape, dtype: torch.dtype, device: str, seed: int = 0):
    rows, cols = as_shape(shape, "rows")  # an int n: the square n x n
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((rows, cols), generator=g, device=device, dtype=torch.float32).to(dtype)
    y = torch.randn((rows, cols), generator=g, device=device, dtype=torch.float32).to(dtype)
    return x, y


FLOPS_PER_ELEMENT = 1  # one add


def flops(shape) -> float:
    rows, cols = as_shape(shape, "rows")
    return FLOPS_PER_ELEMENT * rows * cols


def bytes_moved(shape, dtype: str) -> float:
    rows, cols = as_shape(shape, "rows")
    return 3 * rows * cols * ELEMENT_BYTES[dtype]  # the fewest: read x and y once, write z once


KERNEL = Kernel(name="vecadd", description="vector add x + y, elementwise over N x N", make_inputs=make_inputs,
                reference=reference, flops=flops, bytes=bytes_moved,
                impls=eager(naive=vecadd_naive, builtin=vecadd_builtin, triton=vecadd_triton), naive_fn=vecadd_naive,
                )
