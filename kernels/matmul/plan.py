"""The matrix product's split-K plan: from a call's (M, N, K), element size and the device's SM count (with the launch
table and the caller's override) to the split kernel's tile and how many slices of K it sums. Plain values in, plain
values out: tests check it on the CPU without launching anything.

A skinny product (a decode step: a few to 128 rows against a 4096 x 4096 weight) makes too few output tiles to fill
the GPU, each walking all of K; split K over several programs per tile, each writing fp32 partial sums; the tile's last
slice adds them in a fixed order and applies the epilogue (ReLU after the whole sum): deterministic (splitk.py).
"""
from __future__ import annotations

from typing import NamedTuple


class Tables(NamedTuple):
    """The launch table's values the plan reads (kernels/matmul/table.py says what each is for)."""
    SPLITK_WHEN: tuple  # (most rows or columns, fewest K)
    SPLITK_FILL: tuple  # (programs a SM, fewest K elements a split, most splits)
    SPLITK_TILES: dict  # element size -> ((most rows, (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps)), ...)


class SplitK(NamedTuple):
    split: int  # slices of K, each summed by its own program per output tile (>= 2 where planned)
    k_per_split: int  # K elements a slice: a multiple of BLOCK_K; the last slice gets the rest (never none)
    tiles: int  # output tiles
    meta: dict  # BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps


def tile_for(m: int, element_size: int, tables: Tables) -> tuple | None:
    """The split kernel's tile for a product of m rows: the first SPLITK_TILES entry with at least m rows, else the
    last (a tall product with few columns); None for an element size the table has no tiles for."""
    entries = tables.SPLITK_TILES.get(element_size)
    if not entries:
        return None
    return next((t for most, t in entries if m <= most), entries[-1][1])


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def plan(m: int, n: int, k: int, element_size: int, sms: int, tables: Tables, split: int | None = None,
         tile: tuple | None = None) -> SplitK | None:
    """The split-K launch for C (m x n) = A (m x k) @ B (k x n), or None: the one-program-a-tile kernels. ``sms``:
    the device's SM count (0 under the interpreter: never split unless asked). ``split``: the caller's count (1:
    never split; more: at most that many slices, each given some of K); ``tile``: the caller's (BLOCK_M, BLOCK_N,
    BLOCK_K, num_stages, num_warps), else SPLITK_TILES'. Automatic: min(m, n) <= SPLITK_WHEN's rows,
    k >= its K and fewer output tiles than SMs; as many slices as SPLITK_FILL's programs an SM allow in whole waves
    (rounded down), at least 2 (a partial second wave where the tiles outnumber half the SMs), each at least its
    fewest K elements, at most its most splits."""
    if split is not None and split < 1:
        raise ValueError(f"split must be >= 1 (1: no split-K), got {split}")
    tile = tile or tile_for(m, element_size, tables)
    if tile is None and split is not None and split > 1:
        raise ValueError(f"split-K has tiles for element sizes {sorted(tables.SPLITK_TILES)} (bytes), not "
                         f"{element_size}: pass config= (BLOCK_M, BLOCK_N, BLOCK_K) to split such a product")
    if tile is None or split == 1 or min(m, n, k) == 0:
        return None
    bm, bn, bk, stages, warps = tile
    tiles = _cdiv(m, bm) * _cdiv(n, bn)
    k_tiles = _cdiv(k, bk)
    if split is None:
        (most_rows, min_k), (per_sm, min_split_k, most) = tables.SPLITK_WHEN, tables.SPLITK_FILL
        if sms <= 0 or min(m, n) > most_rows or k < min_k or tiles >= sms:
            return None
        split = min(max(2, sms * per_sm // tiles), max(1, k // min_split_k), most)  # whole waves; at least 2
    tiles_per_split = _cdiv(k_tiles, min(split, k_tiles))
    split = _cdiv(k_tiles, tiles_per_split)  # no slice left without K: a smaller split of the same slices
    if split < 2:
        return None
    return SplitK(split, tiles_per_split * bk, tiles,
                  dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_stages=stages, num_warps=warps))
