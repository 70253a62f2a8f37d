"""What the LayerNorm and RMSNorm forwards share: their row kernels' prelude (``norm_row``), and their wrappers'
first call (a key their launch cache has not seen): check the inputs, allocate y, launch what their plan chose: their
own kernel, the packed one (norm_packed.py) or the split (norm_split.py). Each wrapper keeps its own cache key, its
replay of a kept launch and its plan.
"""
from __future__ import annotations

from typing import Callable

import torch
import triton
import triton.language as tl

from kernels._shared import norm_packed
from kernels._shared.norm_split import norm_split_forward
from rooflab.triton_utils import check_device

SUPPORTED = (torch.float32, torch.bfloat16, torch.float16)


@triton.jit
def norm_row(x_ptr, y_ptr, n_cols, stride_xm, stride_ym, BLOCK_SIZE: tl.constexpr, ALIGN: tl.constexpr):
    """(row, x_row, y_row, cols, n_cols) of this program's row: its index, x's and y's row pointers, the block's
    column indices and n_cols, with n_cols and the row strides written as multiples of ALIGN, which divides them
    (kernels/_shared/rows.row_align), so the compiler proves the rows' vector loads aligned."""
    n_cols, stride_xm, stride_ym = n_cols // ALIGN * ALIGN, stride_xm // ALIGN * ALIGN, stride_ym // ALIGN * ALIGN
    row = tl.program_id(axis=0).to(tl.int64)  # int64: row * stride_xm passes 2^31 for large inputs
    x_row = x_ptr + row * stride_xm
    y_row = y_ptr + row * stride_ym
    cols = tl.arange(0, BLOCK_SIZE).to(tl.int64)  # int64: cols * stride_xn is large for a transposed x
    return row, x_row, y_row, cols, n_cols


def norm_forward(launches, key, kernels: dict, name: str, x: torch.Tensor, weight: torch.Tensor,
                 bias: torch.Tensor | None, eps: float, plan_of: Callable) -> torch.Tensor:
    """y = the norm of x's rows (bias None: RMSNorm's, no bias) into a fresh contiguous (rows, cols) y.

    ``launches``/``key``: the wrapper's LaunchCache and this call's key; ``kernels``: the wrapper's module globals,
    where the plan's kernel names are found (the packed ones in norm_packed); ``name``: the wrapper, as its errors
    say it; ``plan_of(n_rows, n_cols)``: the wrapper's plan (kernel, grid, ints, meta), called once the inputs are
    checked and y is not empty. The kernel takes (x, weight[, bias], y, *ints, eps)."""
    params = (("weight", weight), ) if bias is None else (("weight", weight), ("bias", bias))
    check_device(x, *(t for _, t in params))
    if x.dim() != 2:
        raise ValueError(f"{name} needs a 2-D input (rows, cols), got shape {tuple(x.shape)}")
    if x.dtype not in SUPPORTED:
        raise TypeError(f"{name} supports float32, bfloat16 and float16, not {x.dtype}")
    if any(t.dtype != x.dtype for _, t in params):
        raise TypeError(" and ".join(f"{p} ({t.dtype})" for p, t in params) + f" must have x's dtype ({x.dtype})")
    n_rows, n_cols = x.shape
    for p, t in params:
        if tuple(t.shape) != (n_cols, ):
            raise ValueError(f"{p} must have shape ({n_cols},) to match x's last dimension, got {tuple(t.shape)}")
    y = torch.empty((n_rows, n_cols), device=x.device, dtype=x.dtype)  # (rows, cols), contiguous
    if y.numel() == 0:
        return y
    p = plan_of(n_rows, n_cols)
    if p.kernel == "split":
        norm_split_forward(launches, key, x, weight, bias, y, eps, p.meta["CHUNK"])
        return y
    kernel = getattr(norm_packed, p.kernel) if p.kernel.endswith("_packed_kernel") else kernels[p.kernel]
    head = (x, weight, y) if bias is None else (x, weight, bias, y)
    launches.launch(key, kernel, p.grid, (*head, *p.ints, eps), p.meta, n_head=len(head))
    return y
