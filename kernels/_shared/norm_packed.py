"""The packed forward LayerNorm and RMSNorm share for many short rows (issue 23): one program a row of 32 columns
launches a million programs of one load each (LayerNorm 1000000 x 32 bf16: 607 us on the H200, torch 32).

A program holds BLOCK_M whole rows as one (BLOCK_M, BLOCK_N) tile, about PACK_ROWS[1] elements, and reduces along
its columns, as softmax's packed kernel does (kernels/softmax/shapes.py). Rows must be contiguous along their
columns, the weights contiguous; ALIGN (kernels/_shared/rows.row_align) lets rows of 100 columns load vectors. The
wrappers choose (packed_norm_plan, packed_norm_launch) and launch through their launch cache.
"""
from __future__ import annotations

import triton
import triton.language as tl

from kernels._shared.rows import packed_plan
from kernels._shared.tables import track_swaps

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key

PACK_ROWS = (256, 4096)  # rows under 256 columns, about 4096 elements a program: softmax's values, not tuned apart


@triton.jit
def _packed_rows(x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, stride_xm, stride_ym, eps, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr, CENTRE: tl.constexpr, HAS_BIAS: tl.constexpr, ALIGN: tl.constexpr):
    n_cols, stride_xm, stride_ym = n_cols // ALIGN * ALIGN, stride_xm // ALIGN * ALIGN, stride_ym // ALIGN * ALIGN
    rows = tl.program_id(axis=0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    if CENTRE:
        x = tl.where(mask, x - (tl.sum(x, axis=1) / n_cols)[:, None], 0.0)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    y = x * rstd[:, None] * tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]
    if HAS_BIAS:
        y += tl.load(b_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]
    tl.store(y_ptr + rows[:, None] * stride_ym + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def layernorm_fwd_packed_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, stride_xm, stride_ym, eps,
                                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ALIGN: tl.constexpr):
    _packed_rows(x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, stride_xm, stride_ym, eps, BLOCK_M, BLOCK_N, True, True,
                 ALIGN)


@triton.jit
def rmsnorm_fwd_packed_kernel(x_ptr, w_ptr, y_ptr, n_rows, n_cols, stride_xm, stride_ym, eps, BLOCK_M: tl.constexpr,
                              BLOCK_N: tl.constexpr, ALIGN: tl.constexpr):
    _packed_rows(x_ptr, w_ptr, w_ptr, y_ptr, n_rows, n_cols, stride_xm, stride_ym, eps, BLOCK_M, BLOCK_N, False, False,
                 ALIGN)  # (the weights stand in for the bias it never loads)


def packed_norm_launch(x, y, weight, bias, eps: float):
    """(kernel, grid, args after the head, kwargs) of the packed forward (LayerNorm's head (x, weight, bias, y) where
    a bias is given, RMSNorm's (x, weight, y)) into a contiguous y, or None where it does not apply
    (packed_norm_plan)."""
    plan = packed_norm_plan(*x.shape, x.stride(), weight.stride(0), None if bias is None else bias.stride(0),
                            x.element_size())
    if plan is None:
        return None
    name, grid, ints, meta = plan
    return globals()[name], grid, (*ints, eps), meta


def packed_norm_plan(n_rows: int, n_cols: int, x_strides: tuple[int, int], weight_stride: int, bias_stride: int | None,
                     element_size: int):
    """(kernel name, grid, integer arguments, kwargs) of the packed forward into a contiguous y (bias_stride None:
    RMSNorm's, no bias), or None where it does not apply: rows of PACK_ROWS[0] columns or more
    (kernels/_shared/rows.packed_plan), or rows or weights not contiguous along the columns."""
    if x_strides[1] != 1 or weight_stride != 1 or (bias_stride is not None and bias_stride != 1):
        return None
    packed = packed_plan(n_rows, n_cols, triton.next_power_of_2(n_cols), PACK_ROWS, None, element_size,
                         (x_strides[0], n_cols))
    if packed is None:
        return None
    name = "layernorm_fwd_packed_kernel" if bias_stride is not None else "rmsnorm_fwd_packed_kernel"
    return name, packed[0], (n_rows, n_cols, x_strides[0], n_cols), packed[1]
