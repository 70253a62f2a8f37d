"""The norms' backward on rows too long to hold (kernels/_shared/norm_bwd.py holds the rest), in column tiles.

A row's dx needs its statistics, which need the whole row: a row longer than a program holds is read twice. Two
launches: each tile of each row its statistics (mean, squared deviations, sum of g * (x - mean), sum of g), then
each tile combines its row's and writes dx and the partial dweight, dbias of its rows. LayerNorm combines tiles about
their own means (Chan's formula): a large mean does not cancel the variance away. (One launch whose programs read
their rows twice, the second time from the L2, lost to these on the H200: docs/decisions.md, the norms' long rows.)
"""
from __future__ import annotations

import triton
import triton.language as tl

from kernels._shared.tables import track_swaps

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key


@triton.jit
def _norm_bwd_tile_stats_kernel(x_ptr, w_ptr, dy_ptr, stats_ptr, n_cols, n_tiles, BLOCK_N: tl.constexpr,
                                CENTRE: tl.constexpr, ALIGN: tl.constexpr = 1):
    # Column tiles, launch 1: one column tile of one row a program; its (mean, squared deviations, sum of
    # g * (x - mean), sum of g) over its own columns into stats[row, tile, 0:4] (RMSNorm: mean 0).
    n_cols = n_cols // ALIGN * ALIGN
    pid = tl.program_id(axis=0)
    row, tile = pid // n_tiles, pid % n_tiles
    cols = tile * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    offset = row.to(tl.int64) * n_cols
    x = tl.load(x_ptr + offset + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32) * \
        tl.load(dy_ptr + offset + cols, mask=mask, other=0.0).to(tl.float32)
    store_tile_stats(stats_ptr, pid, x, g, mask, tl.minimum(n_cols - tile * BLOCK_N, BLOCK_N), CENTRE)


@triton.jit
def store_tile_stats(stats_ptr, pid, x, g, mask, count, CENTRE: tl.constexpr):
    # one tile's (mean, squared deviations, sum of g * (x - mean), sum of g) over its ``count`` (at least 1) columns
    # of the row into stats[pid, 0:4] (RMSNorm: mean 0)
    if CENTRE:
        mean = tl.sum(x, axis=0) / count
        x = tl.where(mask, x - mean, 0.0)
    else:
        mean = 0.0
    out = stats_ptr + pid.to(tl.int64) * 4
    tl.store(out, mean)
    tl.store(out + 1, tl.sum(x * x, axis=0))
    tl.store(out + 2, tl.sum(g * x, axis=0))
    tl.store(out + 3, tl.sum(g, axis=0))


@triton.jit
def _norm_bwd_tile_apply_kernel(x_ptr, w_ptr, dy_ptr, dx_ptr, stats_ptr, part_ptr, n_rows, n_cols, n_tiles, eps,
                                ROWS_PER_PROGRAM: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_T: tl.constexpr,
                                CENTRE: tl.constexpr, HAS_BIAS: tl.constexpr, ALIGN: tl.constexpr = 1,
                                PREFETCH: tl.constexpr = False):
    # Column tiles, launch 2: one column tile of ROWS_PER_PROGRAM rows a program; each row's statistics from its
    # tiles' (in tile order), then dx of the tile and the rows' partial dweight, dbias into part[row block, cols].
    # PREFETCH: the next row's x and dy load, in their own dtype, while this row's work.
    n_cols = n_cols // ALIGN * ALIGN
    pid = tl.program_id(axis=0)
    block, tile = pid // n_tiles, pid % n_tiles
    cols = tile * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    tiles = tl.arange(0, BLOCK_T)
    t_mask = tiles < n_tiles
    counts = tl.minimum(n_cols - tiles * BLOCK_N, BLOCK_N).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK_N, ), dtype=tl.float32)
    db = tl.zeros((BLOCK_N, ), dtype=tl.float32)
    first = block.to(tl.int64) * ROWS_PER_PROGRAM  # int64: row * n_cols passes 2^31
    if PREFETCH:
        x_next = tl.load(x_ptr + first * n_cols + cols, mask=mask & (first < n_rows), other=0.0)
        dy_next = tl.load(dy_ptr + first * n_cols + cols, mask=mask & (first < n_rows), other=0.0)
    for i in range(ROWS_PER_PROGRAM):
        row = first + i
        row_ok = row < n_rows
        offset = row * n_cols
        if PREFETCH:
            x, dy = x_next.to(tl.float32), dy_next.to(tl.float32)
            next_mask = mask & (row + 1 < n_rows) & (i + 1 < ROWS_PER_PROGRAM)
            x_next = tl.load(x_ptr + offset + n_cols + cols, mask=next_mask, other=0.0)
            dy_next = tl.load(dy_ptr + offset + n_cols + cols, mask=next_mask, other=0.0)
        else:
            x = tl.load(x_ptr + offset + cols, mask=mask & row_ok, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + offset + cols, mask=mask & row_ok, other=0.0).to(tl.float32)
        dx, x_hat = tile_dx(stats_ptr, row, row_ok, n_tiles, tiles, t_mask, counts, x, dy, w, mask, n_cols, eps, CENTRE)
        tl.store(dx_ptr + offset + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask & row_ok)
        dw += dy * x_hat
        if HAS_BIAS:
            db += dy
    store_partials(part_ptr, block, n_tiles, cols, mask, n_cols, dw, db, HAS_BIAS)


@triton.jit
def tile_dx(stats_ptr, row, row_ok, n_tiles, tiles, t_mask, counts, x, dy, w, mask, n_cols, eps, CENTRE: tl.constexpr):
    # (dx, x_hat) of one tile of a row, its statistics combined from its tiles' (in tile order; counts: the row's
    # columns in each tile)
    stats = stats_ptr + (row * n_tiles + tiles) * 4
    s_mask = t_mask & row_ok
    t_mean = tl.load(stats, mask=s_mask, other=0.0)
    t_sg = tl.load(stats + 3, mask=s_mask, other=0.0)
    mean = tl.sum(tl.where(t_mask, counts * t_mean, 0.0), axis=0) / n_cols
    d = t_mean - mean  # Chan: the row's sums from its tiles' about their own means
    m2 = tl.sum(tl.load(stats + 1, mask=s_mask, other=0.0) + tl.where(t_mask, counts * d * d, 0.0), axis=0)
    sgx = tl.sum(tl.load(stats + 2, mask=s_mask, other=0.0) + d * t_sg, axis=0)
    # 0 past the last row: its 1 / sqrt(0 + eps) is inf where eps is 0, and 0 * inf a NaN in dweight
    rstd = tl.where(row_ok, 1.0 / tl.sqrt(m2 / n_cols + eps), 0.0)
    x_hat = tl.where(mask, x - mean, 0.0) * rstd
    dx = w * dy - x_hat * (sgx * rstd / n_cols)
    if CENTRE:
        dx = dx - tl.sum(t_sg, axis=0) / n_cols
    return dx * rstd, x_hat


@triton.jit
def store_partials(part_ptr, block, n_tiles, cols, mask, n_cols, dw, db, HAS_BIAS: tl.constexpr):
    # a program's partial dweight (and dbias, n_parts rows further) into part[block, cols]
    tl.store(part_ptr + block.to(tl.int64) * n_cols + cols, dw, mask=mask)
    if HAS_BIAS:
        db_row = (tl.num_programs(axis=0) // n_tiles + block).to(tl.int64)
        tl.store(part_ptr + db_row * n_cols + cols, db, mask=mask)
