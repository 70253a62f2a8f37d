"""LayerNorm's forward launch plan: from a call's shape, strides and element size (with the device's SM count,
whether it can prefetch, the launch table and the caller's overrides) to the kernel it launches, its grid, its integer
arguments (eps follows them) and its meta-parameters. Plain values in, plain values out: tests check it on the CPU.

Few long rows are split over several programs (``split``); many short rows packed several to a program
(kernels/_shared/norm_packed.py); a contiguous row no multiple of 16 bytes of ALIGNED_TILES' length on aligned tiles;
any other row one program, held in one block (launch_options: early weights, their prefetch, the mask, a register
cap) or walked twice in tiles (launch_params).
"""
from __future__ import annotations

from typing import NamedTuple

import triton

from kernels._shared.norm_packed import packed_norm_plan
from kernels._shared.rows import (
    L2_LINE_BYTES,
    held_min_warps,
    names_row,
    row_align,
    row_launch_params,
    split_cols,
    unmasked,
)  # yapf: disable (the import as ruff sorts it)


class Tables(NamedTuple):
    """The launch table's values the plan reads (kernels/layernorm/table.py says what each is for)."""
    TILED_LAUNCH: dict
    HELD_MIN_WARPS: dict
    WB_EARLY_COLS: dict
    REGISTER_CAP: dict
    PREFETCH_PROGRAMS: int
    UNMASKED_COLS: dict
    SPLIT_BELOW: tuple
    SPLIT_CHUNK: tuple
    SPARSE_BLOCK: dict
    WIDE_HELD: dict
    ALIGNED_TILES: dict


class Launch(NamedTuple):
    kernel: str  # the Triton kernel's name (the packed one's in kernels/_shared/norm_packed.py); "split": norm_split
    grid: tuple
    ints: tuple  # the integer arguments after the tensors (x, weight, bias, y); eps follows them
    meta: dict  # constexprs, num_warps and launch options (split: CHUNK, the columns a program)


def forward(shape: tuple[int, int], x_strides: tuple[int, int], weight_stride: int, bias_stride: int, element_size: int,
            sms: int, prefetch: bool, tables: Tables, block_size: int | None = None, num_warps: int | None = None,
            split: int | None = None) -> Launch:
    """The forward's launch for x of ``shape`` (no empty one) and ``x_strides`` into a fresh contiguous y; ``sms``:
    the device's SM count (0 under the interpreter: never split); ``prefetch``: whether the device can prefetch into
    the L2 (kernels/_shared/rows.can_prefetch). The overrides are layernorm_triton's."""
    (n_rows, n_cols), es, t = shape, element_size, tables
    if split is None:
        split = split_cols(n_rows, n_cols, sms, t.SPLIT_BELOW, t.SPLIT_CHUNK)
    if split:
        return Launch("split", (), (), dict(CHUNK=split))
    if block_size is None and num_warps is None and \
            (packed := packed_norm_plan(n_rows, n_cols, x_strides, weight_stride, bias_stride, es)):
        return Launch(*packed)  # many short rows: several a program
    aligned = t.ALIGNED_TILES.get(es)
    if aligned and n_cols >= aligned[0] and n_cols * es % 16 and block_size is None and num_warps is None and \
            tuple(x_strides) == (n_cols, 1) and weight_stride == 1 and bias_stride == 1:
        _, tile, warps = aligned  # contiguous rows no multiple of 16 bytes: on aligned tiles
        return Launch("_layernorm_fwd_aligned_kernel", (n_rows, ), (n_cols, ),
                      dict(BLOCK_N=tile, ALIGN=16 // es, num_warps=warps))
    block_size, auto_warps = launch_params(n_cols, es, t, block_size)
    num_warps = num_warps or auto_warps
    return Launch(
        "_layernorm_fwd_kernel", (n_rows, ), (n_cols, *x_strides, weight_stride, bias_stride, n_cols, 1),
        dict(BLOCK_SIZE=block_size, ONE_TILE=block_size >= n_cols, num_warps=num_warps,
             ALIGN=row_align(es, n_cols, x_strides[0], n_cols),
             **launch_options(n_cols, es, block_size, num_warps, t, prefetch)))


def launch_params(n_cols: int, element_size: int, tables: Tables, block_size: int | None = None) -> tuple[int, int]:
    """(BLOCK_SIZE, num_warps) for rows of n_cols elements: the shared row heuristic (_shared/rows.py), WIDE_HELD's
    block and warps for rows a little too long for it, TILED_LAUNCH for rows longer still and SPARSE_BLOCK's tiles for
    rows that would fill little of their block (unless a block_size is asked for), and HELD_MIN_WARPS for held
    rows."""
    auto_block, warps = row_launch_params(n_cols, element_size)
    if auto_block < n_cols and block_size is None:  # too long for the heuristic's block, and no tile asked for
        wide = tables.WIDE_HELD.get(element_size)
        if wide and n_cols <= wide[0]:  # held whole at more warps
            auto_block, warps = triton.next_power_of_2(n_cols), wide[1]
        else:  # the tiled loop's table
            auto_block, warps = tables.TILED_LAUNCH.get(element_size, (auto_block, warps))
    elif block_size is None and (sparse := tables.SPARSE_BLOCK.get(element_size)) \
            and sparse[0] <= n_cols <= sparse[1] and not (sparse[4] and n_cols * element_size % 16 == 0):
        # a block mostly masked: tiles
        auto_block, warps = sparse[2:4]
    block_size = block_size or auto_block
    if block_size & (block_size - 1):
        raise ValueError(f"block_size must be a power of two, got {block_size}")
    if block_size >= n_cols:  # held in one tile
        warps = held_min_warps(tables.HELD_MIN_WARPS, n_cols, element_size, warps)
    return block_size, warps


def launch_options(n_cols: int, element_size: int, block_size: int, num_warps: int, tables: Tables,
                   prefetch: bool = False) -> dict:
    """The kernel's WB_EARLY, WB_PREFETCH (with prefetch_programs), FULL and, where REGISTER_CAP names the launch,
    ptxas's maxnreg, for a launch of block_size and num_warps over rows of n_cols elements: WB_EARLY_COLS for held
    rows, the weights prefetched (PREFETCH_PROGRAMS) where a held row loads them late and ``prefetch`` says the
    device can (kernels/_shared/rows.can_prefetch), no column mask for the rows UNMASKED_COLS names that are as long as
    their tile; nothing for tiled rows."""
    held = block_size >= n_cols
    early = held and names_row(tables.WB_EARLY_COLS, n_cols, element_size)
    fetch = held and not early and tables.PREFETCH_PROGRAMS > 0 and prefetch
    options = {
        "WB_EARLY": early,
        "WB_PREFETCH": fetch,
        "W_LINE": min(L2_LINE_BYTES // element_size, block_size),
        "prefetch_programs": tables.PREFETCH_PROGRAMS if fetch else 0,
        "FULL": unmasked(tables.UNMASKED_COLS, None, n_cols, element_size, whole_tiles=n_cols == block_size)
    }
    cap = tables.REGISTER_CAP.get((element_size, n_cols, num_warps)) if held else None
    return options | ({"maxnreg": cap} if cap else {})
