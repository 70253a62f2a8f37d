"""Softmax off the square (plan.py chooses): many short rows packed several to a program, forward and
backward (BLOCK_M rows x BLOCK_N columns, as rowsum packs); few long rows of a contiguous x split over several
programs (one program a row leaves SMs idle); long rows no multiple of 16 bytes on aligned tiles.

Split: x as one flat buffer in tiles of CHUNK elements, a program each, every tile 16-byte aligned, in two launches
(_shared/rows.launch_split): phase 1 writes each tile's (max, sum of exp(x - max)) for the row it starts in and for
the next; phase 2 combines a row's partials in a fixed order (no atomics) and writes the tile's elements, x read
again (from the L2 where it still is). Aligned tiles: the online softmax, one program a row, on tiles that start on
16-byte boundaries (the first before the row; a row's own tiles would load one element at a time); the first and
last are masked and peeled off the loops.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._shared.rows import launch_split, row_launch_params
from kernels._shared.tables import track_swaps

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key


@triton.jit
def finite_shift(m):
    """A running max as a shift: -inf (nothing seen yet) shifts by 0, so exp(-inf - shift) is 0, never NaN."""
    return tl.where(m == -float("inf"), 0.0, m)


@triton.jit
def softmax_fwd_rows_kernel(x_ptr, y_ptr, n_rows, n_cols, stride_xm, stride_xn, stride_ym, stride_yn,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ALIGN: tl.constexpr = 1):
    # ALIGN divides n_cols and the row strides (kernels/_shared/rows.row_align): rows of 100 columns load vectors
    n_cols, stride_xm, stride_ym = n_cols // ALIGN * ALIGN, stride_xm // ALIGN * ALIGN, stride_ym // ALIGN * ALIGN
    rows = tl.program_id(axis=0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    in_rows = (rows < n_rows)[:, None]
    mask = in_rows & (cols < n_cols)[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask, other=-float("inf"))
    x = tl.where(in_rows, x.to(tl.float32), 0.0)  # rows past the end: zeros, not -inf (no -inf - -inf)
    e = tl.exp(x - tl.max(x, axis=1)[:, None])
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(y_ptr + rows[:, None] * stride_ym + cols[None, :] * stride_yn, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_bwd_rows_kernel(y_ptr, dy_ptr, dx_ptr, n_rows, n_cols, stride_ym, stride_yn, stride_dym, stride_dyn,
                            stride_dxm, stride_dxn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            ALIGN: tl.constexpr = 1):
    n_cols, stride_ym, stride_dym = n_cols // ALIGN * ALIGN, stride_ym // ALIGN * ALIGN, stride_dym // ALIGN * ALIGN
    stride_dxm = stride_dxm // ALIGN * ALIGN
    rows = tl.program_id(axis=0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    y = tl.load(y_ptr + rows[:, None] * stride_ym + cols[None, :] * stride_yn, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + rows[:, None] * stride_dym + cols[None, :] * stride_dyn, mask=mask, other=0.0).to(tl.float32)
    dx = y * (dy - tl.sum(y * dy, axis=1)[:, None])
    tl.store(dx_ptr + rows[:, None] * stride_dxm + cols[None, :] * stride_dxn, dx.to(dx_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def softmax_fwd_aligned_kernel(x_ptr, y_ptr, n_cols, BLOCK_N: tl.constexpr, ALIGN: tl.constexpr):
    # Online softmax of one row of a contiguous x whose rows are no multiple of 16 bytes: tiles on 16-byte boundaries
    # (the first starts before the row), the first and last masked and peeled off the loop, the inner ones unmasked
    # at offsets the compiler can prove 16-byte aligned (an aligned base plus a whole number of tiles).
    row_start = tl.program_id(axis=0).to(tl.int64) * n_cols
    row_end = row_start + n_cols
    first = row_start // ALIGN * ALIGN
    n_tiles = ((row_end - first + BLOCK_N - 1) // BLOCK_N).to(tl.int32)
    offs = first + tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + offs, mask=(offs >= row_start) & (offs < row_end), other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    s = tl.sum(tl.exp(x - finite_shift(m)), axis=0)  # a first tile of only -inf leaves m at -inf: no NaN
    for k in range(1, n_tiles - 1):
        x = tl.load(x_ptr + first + k * BLOCK_N + tl.arange(0, BLOCK_N), eviction_policy="evict_last").to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - finite_shift(m_new)) + tl.sum(tl.exp(x - finite_shift(m_new)), axis=0)
        m = m_new
    if n_tiles > 1:
        offs = first + (n_tiles - 1) * BLOCK_N + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + offs, mask=offs < row_end, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - finite_shift(m_new)) + tl.sum(tl.exp(x - finite_shift(m_new)), axis=0)
        m = m_new
    inv_s = 1.0 / s
    offs = first + tl.arange(0, BLOCK_N)
    mask = (offs >= row_start) & (offs < row_end)
    x = tl.load(x_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
    tl.store(y_ptr + offs, (tl.exp(x - m) * inv_s).to(y_ptr.dtype.element_ty), mask=mask)
    for k in range(1, n_tiles - 1):
        offs = first + k * BLOCK_N + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + offs, eviction_policy="evict_first").to(tl.float32)
        tl.store(y_ptr + offs, (tl.exp(x - m) * inv_s).to(y_ptr.dtype.element_ty))
    if n_tiles > 1:
        offs = first + (n_tiles - 1) * BLOCK_N + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + offs, mask=offs < row_end, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + offs, (tl.exp(x - m) * inv_s).to(y_ptr.dtype.element_ty), mask=offs < row_end)


@triton.jit
def _load_flat(x_ptr, start, n_elements, CHUNK: tl.constexpr, EVICT: tl.constexpr):
    """CHUNK elements of a flat buffer from ``start``, in fp32; -inf past its end. Unmasked (16-byte vectors) but
    for the last tile."""
    offs = tl.arange(0, CHUNK)
    if start + CHUNK <= n_elements:
        x = tl.load(x_ptr + start + offs, eviction_policy=EVICT)
    else:
        x = tl.load(x_ptr + start + offs, mask=start + offs < n_elements, other=-float("inf"), eviction_policy=EVICT)
    return x.to(tl.float32)


@triton.jit
def _softmax_split_stats_kernel(x_ptr, part_ptr, n_elements, n_cols, CHUNK: tl.constexpr):
    # Split rows, phase 1: a contiguous x as one flat buffer, CHUNK elements a program (every tile 16-byte
    # aligned); a tile spans at most two rows (CHUNK <= n_cols): the max and sum of exp(x - max) of its head (the
    # row it starts in) go to part[pid, 0:2], of its tail (the next row) to part[pid, 2:4].
    pid = tl.program_id(axis=0).to(tl.int64)
    start = pid * CHUNK  # int64: the flat offset passes 2^31
    x = _load_flat(x_ptr, start, n_elements, CHUNK, "evict_last")  # phase 2 reads it again, from the L2
    in_head = tl.arange(0, CHUNK) < (start // n_cols + 1) * n_cols - start
    x_head = tl.where(in_head, x, -float("inf"))
    x_tail = tl.where(in_head, -float("inf"), x)
    m_head = tl.max(x_head, axis=0)
    m_tail = tl.max(x_tail, axis=0)
    tl.store(part_ptr + 4 * pid, m_head)
    tl.store(part_ptr + 4 * pid + 1, tl.sum(tl.exp(x_head - finite_shift(m_head)), axis=0))
    tl.store(part_ptr + 4 * pid + 2, m_tail)
    tl.store(part_ptr + 4 * pid + 3, tl.sum(tl.exp(x_tail - finite_shift(m_tail)), axis=0))


@triton.jit
def _split_row_stats(part_ptr, row, n_cols, n_tiles, CHUNK: tl.constexpr, BLOCK_K: tl.constexpr):
    """A split row's max and sum of exp(x - max), from the partials of the tiles it touches (a tile that starts in
    the row before holds this row's as its tail), in a fixed order: no atomics."""
    first = row * n_cols // CHUNK
    tiles = first + tl.arange(0, BLOCK_K)
    mask = (tiles <= ((row + 1) * n_cols - 1) // CHUNK) & (tiles < n_tiles)
    part = part_ptr + 4 * tiles + 2 * (tiles * CHUNK // n_cols != row).to(tl.int64)
    m = tl.load(part, mask=mask, other=-float("inf"))
    s = tl.load(part + 1, mask=mask, other=0.0)
    m_row = tl.max(m, axis=0)
    return m_row, tl.sum(s * tl.exp(m - finite_shift(m_row)), axis=0)


@triton.jit
def _softmax_split_apply_kernel(part_ptr, x_ptr, y_ptr, n_elements, n_cols, n_tiles, CHUNK: tl.constexpr,
                                BLOCK_K: tl.constexpr):
    # Split rows, phase 2: each tile combines the partials of its head's and its tail's rows, then writes its
    # elements' exp(x - max) / sum, x read again (from the L2 where phase 1 left it).
    pid = tl.program_id(axis=0).to(tl.int64)
    start = pid * CHUNK
    row = start // n_cols
    m_head, s_head = _split_row_stats(part_ptr, row, n_cols, n_tiles, CHUNK, BLOCK_K)
    m_tail, s_tail = _split_row_stats(part_ptr, row + 1, n_cols, n_tiles, CHUNK, BLOCK_K)
    offs = tl.arange(0, CHUNK)
    in_head = offs < (row + 1) * n_cols - start
    m = tl.where(in_head, m_head, m_tail)  # a row of only -inf: NaN, as torch's (lanes past the end are not stored)
    inv_s = tl.where(in_head, 1.0 / s_head, 1.0 / s_tail)
    x = _load_flat(x_ptr, start, n_elements, CHUNK, "evict_first")
    y = tl.exp(x - m) * inv_s
    if start + CHUNK <= n_elements:
        tl.store(y_ptr + start + offs, y.to(y_ptr.dtype.element_ty))
    else:
        tl.store(y_ptr + start + offs, y.to(y_ptr.dtype.element_ty), mask=start + offs < n_elements)


def split_forward(cache, key, x: torch.Tensor, y: torch.Tensor, chunk: int) -> None:
    """The split path: flat tiles of ``chunk`` elements of a contiguous x, a program each, their rows' partial
    (max, sum) into an fp32 workspace (programs, 4); then each tile combines its rows' partials and writes its
    elements (two launches, kept in ``cache`` as one under ``key``)."""
    n_cols = x.shape[1]
    programs = triton.cdiv(x.numel(), chunk)
    block_k = triton.next_power_of_2(triton.cdiv(n_cols, chunk) + 1)  # the most tiles a row touches
    warps = row_launch_params(chunk, x.element_size())[1]
    launch_split(cache, key, (x, y), (0, 1, 2),
                 (_softmax_split_stats_kernel, (programs, ), (x.numel(), n_cols), dict(CHUNK=chunk, num_warps=warps)),
                 (_softmax_split_apply_kernel, (programs, ),
                  (x.numel(), n_cols, programs), dict(CHUNK=chunk, BLOCK_K=block_k, num_warps=warps)), (programs, 4))
