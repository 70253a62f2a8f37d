"""What the row-wise kernels (layernorm, rmsnorm, softmax, rowsum) share: one place, not repeated per file.

The launch heuristic: one program per row; a row that fits in one block stays in registers (one read of x), a
longer row is walked in BLOCK_SIZE tiles. The masks: where a row is a whole number of tiles, bound_mask drops them
(the kernels' FULL), by each kernel's UNMASKED_COLS table (names_row, unmasked). And an L2 prefetch. The leading
underscore keeps this file out of the kernel registry.
"""
from __future__ import annotations

import triton
import triton.language as tl

from rooflab.triton_utils import interpreting

# Widest tile one program holds in registers: 16384 fp32 values across 16 warps is 32 values a thread, which leaves
# room for the weight (and bias) tile without spilling. Longer rows take the tiled loop.
MAX_BLOCK_SIZE = 16384
# Bytes of the row each thread should load: 64 B is four 16-byte vector loads, enough to keep the memory pipe busy.
BYTES_PER_THREAD = 64
MIN_WARPS, MAX_WARPS = 4, 16


def row_launch_params(n_cols: int, element_size: int) -> tuple[int, int]:
    """(BLOCK_SIZE, num_warps) for a one-program-per-row kernel over rows of n_cols elements of element_size bytes.

    BLOCK_SIZE is the next power of two of the row (tl.arange needs a power of two), capped at MAX_BLOCK_SIZE;
    num_warps grows with the bytes of one tile so each thread loads about BYTES_PER_THREAD, within [4, 16].
    """
    if n_cols < 1:
        raise ValueError(f"row length must be positive, got {n_cols}")
    if element_size not in (1, 2, 4, 8):
        raise ValueError(f"element_size must be 1, 2, 4 or 8 bytes, got {element_size}")
    block_size = min(triton.next_power_of_2(n_cols), MAX_BLOCK_SIZE)
    warps = triton.next_power_of_2(max(1, block_size * element_size // (32 * BYTES_PER_THREAD)))
    return block_size, max(MIN_WARPS, min(MAX_WARPS, warps))


def held_min_warps(table: dict[int, tuple[int, int]], n_cols: int, element_size: int, warps: int) -> int:
    """``warps`` raised to a kernel's own minimum for held rows: ``table`` maps an element size to (columns, warps),
    rows of at least that many columns take at least that many warps (the kernel files say what measured it)."""
    min_cols, min_warps = table.get(element_size, (n_cols + 1, 0))
    return max(warps, min_warps) if n_cols >= min_cols else warps


def names_row(table: dict[int, tuple[int, int]], n_cols: int, element_size: int) -> bool:
    """``table`` (element size -> (fewest, most) columns, e.g. a kernel's UNMASKED_COLS) names rows of n_cols."""
    fewest, most = table.get(element_size, (n_cols + 1, 0))
    return fewest <= n_cols <= most


def unmasked(table: dict[int, tuple[int, int]], full: bool | None, n_cols: int, element_size: int,
             whole_tiles: bool) -> bool:
    """A launch's FULL: as asked (``full``), or by default where ``table`` names the rows; never unless the tiles are
    whole (``whole_tiles``: every offset of every tile in range), so asking for it elsewhere is ignored."""
    return (names_row(table, n_cols, element_size) if full is None else bool(full)) and whole_tiles


@triton.jit
def bound_mask(offsets, bound, FULL: tl.constexpr):
    """offsets < bound, or, where the caller knows every offset is in range (FULL: a row a whole number of tiles
    long, programs of whole rows), a constant all-true mask: the compiler then drops the load and store predicates
    and the selects they guard (Inductor's rows of a constant length have none either). Measured per kernel: each
    file's UNMASKED_COLS says where it is faster."""
    if FULL:
        return tl.full(offsets.shape, 1, tl.int1)
    else:
        return offsets < bound


# Bytes of one L2 line: a prefetch asks for the line that holds its address.
L2_LINE_BYTES = 128


@triton.jit
def l2_prefetch(ptrs, mask):
    """Ask the L2 for the lines that hold ptrs, where mask holds (PTX prefetch.global.L2, any NVIDIA GPU; ptxas
    keeps it where it stands, among the loads): nothing is waited for and no register holds the data, so a load of
    those bytes later finds them in the L2 instead of queueing behind every byte already in flight. Each request
    costs the issuing program dearly (from every program of a LayerNorm call: 2.4x slower), so callers ask from a
    few programs only. GPU only (the interpreter runs no inline assembly): callers guard it with a constexpr that
    can_prefetch() sets. (The one-instruction bulk form, cp.async.bulk.prefetch.L2, ptxas moves after the first use
    of the row: docs/performance.md, round 32.)"""
    tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.u32 p, $2, 0; @p prefetch.global.L2 [$1]; mov.u32 $0, 0; }",
        "=r,l,r", [ptrs, mask.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)


def can_prefetch(*tensors) -> bool:
    """l2_prefetch can run: CUDA tensors, compiled (not the interpreter)."""
    return not interpreting() and all(t.device.type == "cuda" for t in tensors)
