"""The norms' long-row backward for rows no multiple of 16 bytes: _shared/norm_bwd_long.py's column tiles, aligned.

A row of n columns that starts h elements past a 16-byte boundary gets no vector loads from tiles that start at its
first column. Here its tiles start at that boundary instead: tile t holds columns [t * T - h, (t + 1) * T - h), the
first and last masked, the inner ones unmasked at offsets the compiler can prove aligned, so x, dy and dx move
16-byte vectors (softmax's and RMSNorm's forward walk). Rows with the same h, every P-th row (P = ALIGN / gcd(n,
ALIGN)), put the same columns in a tile: launch 2 gives each program rows of one such class, so its partial dweight,
dbias stay one per column. The statistics and their combination are _norm_bwd_long.py's.
"""
from __future__ import annotations

import math

import triton
import triton.language as tl

from kernels._shared.norm_bwd_long import store_partials, store_tile_stats, tile_dx
from kernels._shared.rows import aligned_tile, load_tile, store_tile, tile_counts
from kernels._shared.tables import track_swaps

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key


@triton.jit
def _norm_bwd_aligned_stats_kernel(x_ptr, w_ptr, dy_ptr, stats_ptr, n_cols, n_tiles, BLOCK_N: tl.constexpr,
                                   CENTRE: tl.constexpr, ALIGN: tl.constexpr):
    # Launch 1: one aligned tile of one row a program; (mean, squared deviations, sum of g * (x - mean), sum of g)
    # over the row's columns in it into stats[row, tile, 0:4] (RMSNorm: mean 0; a tile past the row's end: zeros).
    pid = tl.program_id(axis=0)
    row, tile = pid // n_tiles, pid % n_tiles
    row_start = row.to(tl.int64) * n_cols
    start, cols, mask, edge = aligned_tile(row_start, tile, n_cols, BLOCK_N, ALIGN)
    x = load_tile(x_ptr, start, mask, edge, BLOCK_N)
    g = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32) * load_tile(dy_ptr, start, mask, edge, BLOCK_N)
    # at least 1: a tile past the row's end holds zeros, its mean 0
    count = tl.maximum(tile_counts(tile, (row_start % ALIGN).to(tl.int32), n_cols, BLOCK_N), 1)
    store_tile_stats(stats_ptr, pid, x, g, mask, count, CENTRE)


@triton.jit
def _norm_bwd_aligned_apply_kernel(x_ptr, w_ptr, dy_ptr, dx_ptr, stats_ptr, part_ptr, n_rows, n_cols, n_tiles,
                                   n_classes, eps, ROWS_PER_PROGRAM: tl.constexpr, BLOCK_N: tl.constexpr,
                                   BLOCK_T: tl.constexpr, CENTRE: tl.constexpr, HAS_BIAS: tl.constexpr,
                                   ALIGN: tl.constexpr):
    # Launch 2: one aligned tile of ROWS_PER_PROGRAM rows of one class a program (rows cls, cls + n_classes, ...);
    # each row's statistics from its tiles' (in tile order, Chan's formula), then dx of the tile and the rows'
    # partial dweight, dbias into part[block, cols].
    pid = tl.program_id(axis=0)
    block, tile = pid // n_tiles, pid % n_tiles
    cls, chunk = block % n_classes, block // n_classes
    _, cols, mask, edge = aligned_tile(cls.to(tl.int64) * n_cols, tile, n_cols, BLOCK_N, ALIGN)  # the class's columns
    tiles = tl.arange(0, BLOCK_T)
    t_mask = tiles < n_tiles
    counts = tile_counts(tiles, ((cls.to(tl.int64) * n_cols) % ALIGN).to(tl.int32), n_cols, BLOCK_N).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK_N, ), dtype=tl.float32)
    db = tl.zeros((BLOCK_N, ), dtype=tl.float32)
    first = chunk.to(tl.int64) * ROWS_PER_PROGRAM * n_classes + cls  # int64: row * n_cols passes 2^31
    for i in range(ROWS_PER_PROGRAM):
        row = first + i * n_classes
        row_ok = row < n_rows
        start = row * n_cols // ALIGN * ALIGN + tile * BLOCK_N
        x = load_tile(x_ptr, start, mask & row_ok, edge | (row >= n_rows), BLOCK_N)
        dy = load_tile(dy_ptr, start, mask & row_ok, edge | (row >= n_rows), BLOCK_N)
        dx, x_hat = tile_dx(stats_ptr, row, row_ok, n_tiles, tiles, t_mask, counts, x, dy, w, mask, n_cols, eps, CENTRE)
        store_tile(dx_ptr, start, dx.to(dx_ptr.dtype.element_ty), mask & row_ok, edge | (row >= n_rows), BLOCK_N)
        dw += dy * x_hat
        if HAS_BIAS:
            db += dy
    store_partials(part_ptr, block, n_tiles, cols, mask, n_cols, dw, db, HAS_BIAS)


def classes(n_cols: int, align: int) -> int:
    """Rows whose start sits the same distance past a 16-byte boundary recur every this many rows."""
    return align // math.gcd(n_cols, align)
