"""Launch heuristic and helpers shared by the row-wise kernels (layernorm, rmsnorm, rowsum, softmax): one place, not
repeated per file.

One program normalises one row. When the row fits in one block it stays in registers (one read of x); a longer row
is walked in BLOCK_SIZE tiles. On Hopper a row kernel can also ask the L2 for the row a later program will read
(l2_prefetch), so more of the matrix is on its way from DRAM than the resident programs' registers hold. The leading
underscore keeps this file out of the kernel registry.
"""
from __future__ import annotations

import torch
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


@triton.jit
def l2_prefetch(ptr, nbytes, pred):
    """Ask the L2 for nbytes at ptr (16-byte aligned, nbytes a multiple of 16) where pred holds: one bulk request
    (PTX cp.async.bulk.prefetch.L2, sm_90 and newer) from the program's first thread. Nothing is waited for and no
    register is held: a later load of those bytes finds them in the L2, or they are still on the way. GPU only (the
    interpreter runs no inline assembly): callers guard it with a constexpr that is 0 there (rows_prefetchable)."""
    tl.inline_asm_elementwise(
        "{ .reg .pred p, q; .reg .b32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; setp.ne.u32 q, $3, 0; "
        "and.pred p, p, q; @p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
        "=r,l,r,r", [ptr, nbytes, pred.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)


def rows_aligned(x: torch.Tensor) -> bool:
    """Each row of the 2-D x is one 16-byte aligned run of bytes whose length is a multiple of 16 (what a bulk
    prefetch of a whole row needs): unit column stride, aligned base and row stride."""
    e = x.element_size()
    return (x.dim() == 2 and (x.stride(1) == 1 or x.shape[1] == 1) and x.data_ptr() % 16 == 0
            and (x.stride(0) * e) % 16 == 0 and (x.shape[1] * e) % 16 == 0)


def rows_prefetchable(x: torch.Tensor) -> bool:
    """l2_prefetch can fetch x's rows ahead: aligned rows (rows_aligned) on a CUDA device of compute capability 9.0
    or newer, not under the interpreter."""
    return (not interpreting() and x.is_cuda and torch.cuda.get_device_capability(x.device)[0] >= 9
            and rows_aligned(x))


def prefetch_rows_ahead(x: torch.Tensor, ahead: int | None, default: int) -> int:
    """How many rows (programs) ahead a row kernel prefetches: `ahead` as asked, else `default` where the rows
    allow it (rows_prefetchable), 0 (off) otherwise. Asking for it where it cannot run is an error, not a silent
    no-op."""
    if ahead is None:
        return default if default and rows_prefetchable(x) else 0
    if ahead < 0:
        raise ValueError(f"prefetch_ahead must be >= 0, got {ahead}")
    if ahead and not rows_prefetchable(x):
        raise ValueError("prefetch_ahead needs 16-byte aligned rows of a CUDA tensor on an sm_90+ GPU (no "
                         "interpreter): bulk L2 prefetch (cp.async.bulk.prefetch) is Hopper's")
    return ahead
