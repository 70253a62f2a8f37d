"""Softmax's launch plan: from a call's shape, strides and element size (with the device's SM count, the launch
table and the caller's overrides) to the kernel it launches, its grid, its integer arguments and its
meta-parameters. Plain values in, plain values out: tests check it on the CPU without launching anything.

Forward: few long rows of a contiguous x split over several programs (``split``); a row of at most ``max_block``
columns held by one program (short ones packed several to a program); longer rows walked in tiles (online softmax),
on 16-byte aligned tiles where a contiguous row is no multiple of 16 bytes. Backward: held, packed or tiled alike.
"""
from __future__ import annotations

from typing import NamedTuple

from kernels._shared.layout import contiguous
from kernels._shared.rows import MAX_BLOCK_SIZE, chosen_split, held_min_warps, packed_plan, row_launch_params, unmasked


class Tables(NamedTuple):
    """The launch table's values the plan reads (kernels/softmax/table.py says what each is for)."""
    RELOAD_MIN_COLS: dict
    HELD_MIN_WARPS: dict
    UNMASKED_COLS: dict
    SPLIT_BELOW: tuple
    SPLIT_CHUNK: tuple
    SPLIT_UNALIGNED: bool
    ALIGNED_TILES: dict
    PACK_ROWS: tuple


class Launch(NamedTuple):
    kernel: str  # the Triton kernel's name in kernels/softmax; "split": the two launches of shapes.split_forward
    grid: tuple
    ints: tuple  # the integer arguments after the tensors
    meta: dict  # constexprs and num_warps (split: CHUNK, the elements a program)


def launch_params(n_cols: int, element_size: int, max_block: int) -> tuple[int, int, bool]:
    """(BLOCK_N, num_warps, whole row in one block?) for rows of n_cols; a lower max_block reaches the tiled kernels."""
    if not (max_block >= 16 and max_block & (max_block - 1) == 0):
        raise ValueError(f"max_block must be a power of two >= 16, got {max_block}")
    block, num_warps = row_launch_params(min(n_cols, max_block), element_size)
    return block, num_warps, block >= n_cols


def forward(shape: tuple[int, int], strides: tuple[int, int], element_size: int, sms: int, tables: Tables,
            max_block: int = MAX_BLOCK_SIZE, num_warps: int | None = None, reload: bool | None = None,
            full: bool | None = None, split: int | None = None, aligned: bool | None = None) -> Launch:
    """The forward's launch for x of ``shape`` (rows, columns; no empty one) and ``strides`` into a fresh
    contiguous y; ``sms``: the device's SM count (0 under the interpreter: never split). The overrides are
    softmax_forward's."""
    (n_rows, n_cols), es, t = shape, element_size, tables
    flat = contiguous(shape, strides)
    split = chosen_split(split, n_rows, n_cols, es, sms, t.SPLIT_BELOW, t.SPLIT_CHUNK, t.SPLIT_UNALIGNED, flat)
    if split:
        return Launch("split", (), (), dict(CHUNK=split))
    block, auto_warps, one_block = launch_params(n_cols, es, max_block)
    if reload is None:
        reload = one_block and n_cols >= t.RELOAD_MIN_COLS.get(es, n_cols + 1)
        if not reload and one_block:
            auto_warps = held_min_warps(t.HELD_MIN_WARPS, n_cols, es, auto_warps)
    ints = (n_rows, n_cols, *strides, n_cols, 1)  # y: contiguous
    packed = one_block and packed_plan(n_rows, n_cols, block, t.PACK_ROWS, num_warps, es, (strides[0], n_cols))
    if packed:
        return Launch("softmax_fwd_rows_kernel", packed[0], ints, packed[1])
    if one_block:
        full = unmasked(t.UNMASKED_COLS, full, n_cols, es, whole_tiles=block == n_cols)
        return Launch("_softmax_fwd_row_kernel", (n_rows, ), ints,
                      dict(BLOCK_N=block, RELOAD=reload, FULL=full, num_warps=num_warps or auto_warps))
    if flat and n_cols * es % 16 and (aligned or aligned is None and es in t.ALIGNED_TILES):
        tile, warps = t.ALIGNED_TILES.get(es, (block, auto_warps))
        return Launch("softmax_fwd_aligned_kernel", (n_rows, ), (n_cols, ),
                      dict(BLOCK_N=min(tile, block), ALIGN=16 // es, num_warps=num_warps or warps))
    return Launch("_softmax_fwd_online_kernel", (n_rows, ), ints, dict(BLOCK_N=block, num_warps=num_warps
                                                                       or auto_warps))


def backward(shape: tuple[int, int], y_strides: tuple[int, int], dy_strides: tuple[int, int], element_size: int,
             tables: Tables, max_block: int = MAX_BLOCK_SIZE, num_warps: int | None = None) -> Launch:
    """The backward's launch for y and dy of ``shape`` (no empty one) into a fresh contiguous dx."""
    n_rows, n_cols = shape
    block, auto_warps, one_block = launch_params(n_cols, element_size, max_block)
    ints = (n_rows, n_cols, *y_strides, *dy_strides, n_cols, 1)  # dx: contiguous
    row_strides = (y_strides[0], dy_strides[0], n_cols)
    packed = one_block and packed_plan(n_rows, n_cols, block, tables.PACK_ROWS, num_warps, element_size, row_strides)
    if packed:
        return Launch("softmax_bwd_rows_kernel", packed[0], ints, packed[1])
    kernel = "_softmax_bwd_row_kernel" if one_block else "_softmax_bwd_tiled_kernel"
    return Launch(kernel, (n_rows, ), ints, dict(BLOCK_N=block, num_warps=num_warps or auto_warps))
