"""RMSNorm's forward launch plan: from a call's shape, strides and element size (with the device's SM count, the
launch table and the caller's overrides) to the kernel it launches, its grid, its integer arguments (eps follows
them) and its meta-parameters. Plain values in, plain values out: tests check it on the CPU without launching.

Few long rows are split over several programs (``split``); many short rows packed several to a program
(kernels/_shared/norm_packed.py); a row held in one tile (read twice where RELOAD_MIN_COLS names it), a wider one
held at more warps (WIDE_HELD), a contiguous one no multiple of 16 bytes on aligned tiles, any other walked twice in
tiles (TILED_LAUNCH).
"""
from __future__ import annotations

from typing import NamedTuple

import triton

from kernels._shared.norm_packed import packed_norm_plan
from kernels._shared.rows import row_align, row_launch_params, split_cols, unmasked


class Tables(NamedTuple):
    """The launch table's values the plan reads (kernels/rmsnorm/table.py says what each is for)."""
    RELOAD_MIN_COLS: dict
    RELOAD_WARPS: int
    SPARSE_BLOCK: tuple
    UNMASKED_COLS: dict
    SPLIT_BELOW: tuple
    SPLIT_CHUNK: tuple
    TILED_LAUNCH: dict
    ALIGNED_TILES: dict
    WIDE_HELD: dict


class Launch(NamedTuple):
    kernel: str  # the Triton kernel's name (the packed one's in kernels/_shared/norm_packed.py); "split": norm_split
    grid: tuple
    ints: tuple  # the integer arguments after the tensors (x, weight, y); eps follows them
    meta: dict  # constexprs and num_warps (split: CHUNK, the columns a program)


def forward(shape: tuple[int, int], x_strides: tuple[int, int], weight_stride: int, element_size: int, sms: int,
            tables: Tables, block_size: int | None = None, num_warps: int | None = None, reload: bool | None = None,
            full: bool | None = None, split: int | None = None) -> Launch:
    """The forward's launch for x of ``shape`` (no empty one) and ``x_strides`` into a fresh contiguous y; ``sms``:
    the device's SM count (0 under the interpreter: never split). The overrides are rmsnorm_triton's."""
    (n_rows, n_cols), es, t = shape, element_size, tables
    if split is None:
        split = split_cols(n_rows, n_cols, sms, t.SPLIT_BELOW, t.SPLIT_CHUNK)
    if split:
        return Launch("split", (), (), dict(CHUNK=split))
    if block_size is None and num_warps is None and reload is None and full is None and \
            (packed := packed_norm_plan(n_rows, n_cols, x_strides, weight_stride, None, es)):
        return Launch(*packed)  # many short rows: several a program
    auto_block, auto_warps = row_launch_params(n_cols, es)
    asked = block_size is not None or num_warps is not None or full is not None
    if auto_block < n_cols and not asked:  # too long for the heuristic's block
        if n_cols <= t.WIDE_HELD.get(es, (0, ))[0]:  # one tile at more warps
            block_size, num_warps = triton.next_power_of_2(n_cols), t.WIDE_HELD[es][1]
        elif n_cols * es % 16 and es in t.ALIGNED_TILES and tuple(x_strides) == (n_cols, 1) and weight_stride == 1:
            tile, warps = t.ALIGNED_TILES[es]  # contiguous, no multiple of 16 bytes: on aligned tiles
            return Launch("_rmsnorm_fwd_aligned_kernel", (n_rows, ), (n_cols, ),
                          dict(BLOCK_N=tile, ALIGN=16 // es, num_warps=warps))
        else:  # the tiled walk's table
            auto_block, auto_warps = t.TILED_LAUNCH.get(es, (auto_block, auto_warps))
    sparse = block_size is None and t.SPARSE_BLOCK[0] <= n_cols <= t.SPARSE_BLOCK[1]  # a block mostly masked
    block_size = block_size or auto_block
    if block_size & (block_size - 1):
        raise ValueError(f"block_size must be a power of two, got {block_size}")
    if reload is None:
        reload = not sparse and block_size >= n_cols >= t.RELOAD_MIN_COLS.get(es, n_cols + 1)
        auto_warps = t.RELOAD_WARPS if reload else t.SPARSE_BLOCK[2] if sparse else auto_warps
    full = unmasked(t.UNMASKED_COLS, full, n_cols, es, whole_tiles=n_cols % block_size == 0)
    return Launch(
        "_rmsnorm_fwd_kernel", (n_rows, ), (n_cols, *x_strides, weight_stride, n_cols, 1),
        dict(BLOCK_SIZE=block_size, ONE_TILE=block_size >= n_cols, RELOAD=reload, FULL=full, num_warps=num_warps
             or auto_warps, ALIGN=row_align(es, n_cols, x_strides[0], n_cols)))
