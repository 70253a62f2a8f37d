"""Row-sum's launch plan: from a call's shape, strides and element size (with the device's SM count, the launch
table and the caller's overrides) to the kernel it launches, its grid, its integer arguments and its
meta-parameters. Plain values in, plain values out: tests check it on the CPU without launching anything.

Few long rows of a contiguous x are split over several programs (``split``); long contiguous rows no multiple of 16
bytes take aligned tiles, one program a row; every other row one program, short rows packed several to a program,
rows longer than a block walked in tiles.
"""
from __future__ import annotations

from typing import NamedTuple

import triton

from kernels._shared.rows import chosen_split, row_align, row_launch_params, unmasked


class Tables(NamedTuple):
    """The launch table's values the plan reads (kernels/rowsum/table.py says what each is for)."""
    MAX_BLOCK_N: int
    MIN_TILE_ELEMENTS: int
    UNMASKED_COLS: dict
    SPLIT_BELOW: tuple
    SPLIT_CHUNK: tuple
    SPLIT_UNALIGNED: bool
    ALIGNED_TILES: dict


class Launch(NamedTuple):
    kernel: str  # the Triton kernel's name in kernels/rowsum; "split": the split path (_split_sum)
    grid: tuple
    ints: tuple  # the integer arguments after the tensors (x, s)
    meta: dict  # constexprs and num_warps (split: CHUNK, the elements a program)


def launch_params(n_cols: int, element_size: int, max_block_n: int, min_tile_elements: int) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps) for rows of n_cols elements: a whole row per program when it fits (BLOCK_N, the
    next power of two, up to max_block_n); rows shorter than min_tile_elements packed several to a program;
    num_warps from the shared row heuristic on the bytes of the whole tile."""
    block_n = min(triton.next_power_of_2(n_cols), max_block_n)
    block_m = max(1, min_tile_elements // block_n)
    _, num_warps = row_launch_params(block_m * block_n, element_size)
    return block_m, block_n, num_warps


def forward(shape: tuple[int, int], strides: tuple[int, int], element_size: int, sms: int, tables: Tables,
            block_m: int | None = None, block_n: int | None = None, num_warps: int | None = None,
            full: bool | None = None, split: int | None = None) -> Launch:
    """The launch for x of ``shape`` (rows, columns; neither 0) and ``strides`` into a fresh vector s; ``sms``: the
    device's SM count (0 under the interpreter: never split). The overrides are rowsum_triton's."""
    (n_rows, n_cols), es, t = shape, element_size, tables
    flat = strides[1] == 1 and (n_rows == 1 or strides[0] == n_cols)  # contiguous: one flat buffer
    split = chosen_split(split, n_rows, n_cols, es, sms, t.SPLIT_BELOW, t.SPLIT_CHUNK, t.SPLIT_UNALIGNED, flat)
    if split:
        return Launch("split", (), (), dict(CHUNK=split))
    aligned = flat and n_cols > t.MAX_BLOCK_N and n_cols * es % 16 and es in t.ALIGNED_TILES
    if aligned and block_m is None and block_n is None:
        tile, warps = t.ALIGNED_TILES[es]  # long rows no multiple of 16 bytes: on aligned tiles, one program a row
        return Launch("_rowsum_aligned_kernel", (n_rows, ), (n_cols, 1),
                      dict(BLOCK_N=tile, ALIGN=16 // es, num_warps=num_warps or warps))
    auto_m, auto_n, auto_warps = launch_params(n_cols, es, t.MAX_BLOCK_N, t.MIN_TILE_ELEMENTS)
    block_m, block_n = block_m or auto_m, block_n or auto_n
    for name, v in (("block_m", block_m), ("block_n", block_n)):
        if v & (v - 1):
            raise ValueError(f"{name} must be a power of two, got {v}")
    full = unmasked(t.UNMASKED_COLS, full, n_cols, es, whole_tiles=block_n == n_cols and n_rows % block_m == 0)
    return Launch(
        "_rowsum_kernel", (triton.cdiv(n_rows, block_m), ), (n_rows, n_cols, *strides, 1),
        dict(BLOCK_M=block_m, BLOCK_N=block_n, ONE_TILE=block_n >= n_cols, FULL=full, num_warps=num_warps or auto_warps,
             ALIGN=row_align(es, n_cols, strides[0])))
