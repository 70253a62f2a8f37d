"""The split forward LayerNorm and RMSNorm share for few long rows (issue 23): one program a row leaves SMs idle.

Each row is cut into chunks of CHUNK columns, a program each, in two launches (_shared/rows.launch_split). Phase 1:
each chunk's statistics in fp32 into a workspace (rows, chunks, 2): RMSNorm its sum of squares, LayerNorm its mean
and sum of squared deviations (exact within the held chunk). Phase 2: each program combines its row's partials
(LayerNorm by Chan's formula, as the tiled path's lanes: no E[x^2] - E[x]^2) and normalises its chunk, read again
from the L2. No atomics: the combine's order is fixed, the result deterministic. The wrappers choose and launch.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._shared.rows import aligned_tile, launch_split, load_tile, row_launch_params, store_tile, tile_counts
from kernels._shared.tables import track_swaps

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key

# Element sizes whose rows, no multiple of 16 bytes, of a contiguous x split in chunks on 16-byte aligned tiles
# (aligned_s25_d1.csv, 16 x 333333: RMSNorm bf16 26.2 -> 25.0 us, LayerNorm 34.8 -> 32.7; fp32 RMSNorm 27.2 -> 29.0)
ALIGNED_SPLIT = (2, )


@triton.jit
def welford_combine(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    """Merge two (mean, sum of squared deviations, count) partials (Chan et al.); empty partials add nothing."""
    n = n_a + n_b
    w_b = tl.where(n == 0, 0.0, n_b / tl.where(n == 0, 1.0, n))
    delta = mean_b - mean_a
    return mean_a + delta * w_b, m2_a + m2_b + delta * delta * n_a * w_b, n


@triton.jit
def _norm_split_stats_kernel(x_ptr, part_ptr, n_cols, n_chunks, stride_xm, stride_xn, CHUNK: tl.constexpr,
                             CENTRE: tl.constexpr, ALIGN: tl.constexpr = 1):
    # ALIGN > 1: a contiguous x whose rows are no multiple of 16 bytes, its chunks on 16-byte aligned tiles of the
    # flat buffer (kernels/_shared/rows.aligned_tile: inner chunks unmasked, vector loads)
    chunk = tl.program_id(axis=0)
    row = tl.program_id(axis=1).to(tl.int64)
    if ALIGN > 1:
        start, cols, mask, edge = aligned_tile(row * n_cols, chunk, n_cols, CHUNK, ALIGN)
        x = load_tile(x_ptr, start, mask, edge, CHUNK)
        count = tl.maximum(tile_counts(chunk, ((row * n_cols) % ALIGN).to(tl.int32), n_cols, CHUNK), 1)
    else:
        cols = chunk.to(tl.int64) * CHUNK + tl.arange(0, CHUNK)
        mask = cols < n_cols
        # evict_last: phase 2 reads the chunk again, from the L2 if it is still there
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0,
                    eviction_policy="evict_last").to(tl.float32)
        count = tl.minimum(n_cols - chunk * CHUNK, CHUNK)
    part = part_ptr + (row * n_chunks + chunk) * 2
    if CENTRE:
        mean = tl.sum(x, axis=0) / count.to(tl.float32)
        diff = tl.where(mask, x - mean, 0.0)
        tl.store(part, mean)
        tl.store(part + 1, tl.sum(diff * diff, axis=0))
    else:
        tl.store(part, tl.sum(x * x, axis=0))


@triton.jit
def _norm_split_apply_kernel(part_ptr, x_ptr, w_ptr, b_ptr, y_ptr, n_cols, n_chunks, stride_xm, stride_xn, stride_w,
                             stride_b, stride_ym, stride_yn, eps, CHUNK: tl.constexpr, CHUNKS: tl.constexpr,
                             CENTRE: tl.constexpr,  # CHUNKS: n_chunks' next power of two
                             ALIGN: tl.constexpr = 1):  # > 1: as the stats kernel's, y contiguous too
    chunk = tl.program_id(axis=0)
    row = tl.program_id(axis=1).to(tl.int64)
    k = tl.arange(0, CHUNKS)
    parts = part_ptr + (row * n_chunks + k) * 2
    if CENTRE:
        if ALIGN > 1:
            counts = tile_counts(k, ((row * n_cols) % ALIGN).to(tl.int32), n_cols, CHUNK)
        else:
            counts = tl.minimum(n_cols - k * CHUNK, CHUNK)
        counts = tl.where(k < n_chunks, counts, 0).to(tl.float32)
        means = tl.load(parts, mask=k < n_chunks, other=0.0)
        m2s = tl.load(parts + 1, mask=k < n_chunks, other=0.0)
        mean, m2, _ = tl.reduce((means, m2s, counts), 0, welford_combine)
    else:
        mean, m2 = 0.0, tl.sum(tl.load(parts, mask=k < n_chunks, other=0.0), axis=0)
    rstd = tl.math.rsqrt(m2 / n_cols + eps)
    if ALIGN > 1:
        start, cols, mask, edge = aligned_tile(row * n_cols, chunk, n_cols, CHUNK, ALIGN)
        x = load_tile(x_ptr, start, mask, edge, CHUNK)
    else:
        cols = chunk.to(tl.int64) * CHUNK + tl.arange(0, CHUNK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0,
                    eviction_policy="evict_first").to(tl.float32)
    w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
    y = (x - mean) * rstd * w
    if CENTRE:
        y += tl.load(b_ptr + cols * stride_b, mask=mask, other=0.0).to(tl.float32)
    if ALIGN > 1:
        store_tile(y_ptr, start, y.to(y_ptr.dtype.element_ty), mask, edge, CHUNK)
    else:
        tl.store(y_ptr + row * stride_ym + cols * stride_yn, y.to(y_ptr.dtype.element_ty), mask=mask)


def norm_split_forward(cache, key, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, y: torch.Tensor,
                       eps: float, chunk: int) -> None:
    """y = the norm of x's rows (LayerNorm where ``bias`` is given, else RMSNorm) in chunks of ``chunk`` columns
    (a power of two), two launches through ``cache`` kept under ``key``; x any strides, y contiguous."""
    n_rows, n_cols = x.shape
    if chunk & (chunk - 1) or n_rows > 65535:  # the grid's second axis holds the rows
        raise ValueError(f"split must be a power of two over at most 65535 rows, got {chunk} over {n_rows}")
    es = x.element_size()
    align = 16 // es if es in ALIGNED_SPLIT and n_cols * es % 16 and x.stride() == (n_cols, 1) else 1  # y: contiguous
    n_chunks, aligned = triton.cdiv(n_cols + align - 1, chunk), {"ALIGN": align} if align > 1 else {}
    centre = bias is not None
    params, order = ((x, weight, bias, y), (0, 1, 2, 3, 4)) if centre else ((x, weight, y), (0, 1, 2, 2, 3))
    grid = (n_chunks, n_rows)  # RMSNorm: the weight stands in for the bias it never reads
    warps = row_launch_params(chunk, x.element_size())[1]
    launch_split(
        cache, key, params, order,
        (_norm_split_stats_kernel, grid,
         (n_cols, n_chunks, x.stride(0), x.stride(1)), dict(CHUNK=chunk, CENTRE=centre, num_warps=warps) | aligned),
        (_norm_split_apply_kernel, grid, (n_cols, n_chunks, x.stride(0), x.stride(1), weight.stride(0),
                                          (bias if centre else weight).stride(0), y.stride(0), y.stride(1), eps),
         dict(CHUNK=chunk, CHUNKS=triton.next_power_of_2(n_chunks), CENTRE=centre, num_warps=warps) | aligned),
        (n_rows, n_chunks, 2))
