"""What the row-wise kernels (layernorm, rmsnorm, softmax, rowsum) share.

The launch heuristic (one program per row; a row that fits in one block stays in registers, a longer one is walked
in BLOCK_SIZE tiles), the tables' lookups (held_min_warps, names_row, unmasked), the mask that a row a whole number
of tiles long drops (bound_mask), an L2 prefetch, the split path for few long rows (split_cols; launch_split: two
launches through the launch cache), the packed launch of many short rows (packed_launch) and the row alignment a
kernel may assume (row_align).
"""
from __future__ import annotations

import operator

import torch
import triton
import triton.language as tl

from kernels._shared.tables import Choice, track_swaps, values
from rooflab.triton_utils import interpreting, multiprocessor_count

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key

# The shared one-program-per-row heuristic (row_launch_params): its launch table.
ROWS = {
    "MAX_BLOCK_SIZE":
    Choice(
        16384, "widest row held in registers: 32 fp32 values a thread at 16 warps, room for "
        "the weight tile without spilling; longer rows take the tiled loop", None),
    "BYTES_PER_THREAD":
    Choice(64, "each thread loads about four 16-byte vectors of the tile", None),
    "WARPS":
    Choice((4, 16), "(fewest, most) warps the heuristic gives", None),
}

MAX_BLOCK_SIZE = values(ROWS["MAX_BLOCK_SIZE"])  # longest row one program holds
BYTES_PER_THREAD = values(ROWS["BYTES_PER_THREAD"])
MIN_WARPS, MAX_WARPS = values(ROWS["WARPS"])
L2_LINE_BYTES = 128  # a prefetch asks for the line that holds its address


def leading_rows(fn):
    """Let a row kernel's wrapper take (..., columns) as torch's own row ops do: leading dimensions are flattened
    into rows (a view where the strides allow, else a copy), and the result takes them back (the row sums: x.shape[:-1];
    the rest: x's shape). A 2-D input goes straight through."""
    import functools
    import math

    @functools.wraps(fn)
    def wrapper(x, *args, **kwargs):
        if x.dim() == 2:
            return fn(x, *args, **kwargs)
        if x.dim() == 0:
            raise ValueError(f"{fn.__name__} needs at least one dimension (the row), got a 0-d tensor")
        out = fn(x.reshape(math.prod(x.shape[:-1]), x.shape[-1]), *args, **kwargs)  # not -1: a 0-wide row
        return out.reshape(x.shape[:-1] if out.dim() == 1 else x.shape)

    return wrapper


def row_align(element_size: int, *ints: int) -> int:
    """ALIGN of a row kernel: the largest power of two, at most one 16-byte vector of elements, dividing every int (a
    row's length, its strides). Triton proves alignment only of ints divisible by 16; a kernel that rewrites each
    as (v // ALIGN) * ALIGN tells it more, so rows of 5000 or 100 elements load vectors, not single elements."""
    align = max(1, 16 // element_size)
    while align > 1 and any(v % align for v in ints):
        align //= 2
    return align


def needs_grad(*tensors) -> bool:
    """Whether autograd must see this call (one check on the forward's path): where it need not, a wrapper calls its
    forward without the autograd Function, whose own cost a call would otherwise pay."""
    if torch.is_grad_enabled():
        for t in tensors:  # a loop, not any() over a generator: this runs at every call
            if t is not None and t.requires_grad:
                return True
    return False


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
    rows of at least that many columns take at least that many warps (the kernel's table.py says why)."""
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
    """offsets < bound, or, where the caller knows every offset is in range (FULL), a constant all-true mask: the
    compiler then drops the predicates and the selects they guard. Each kernel's UNMASKED_COLS says where."""
    if FULL:
        return tl.full(offsets.shape, 1, tl.int1)
    else:
        return offsets < bound


@triton.jit
def l2_prefetch(ptrs, mask):
    """Ask the L2 for the lines that hold ptrs where mask holds (PTX prefetch.global.L2): nothing waits and no
    register holds the data, so a later load of them hits the L2. Each request costs the asking program dearly, so
    callers ask from a few programs only. GPU only (the interpreter runs no inline assembly): callers guard it with
    a constexpr that can_prefetch() sets."""
    tl.inline_asm_elementwise("{ .reg .pred p; setp.ne.u32 p, $2, 0; @p prefetch.global.L2 [$1]; mov.u32 $0, 0; }",
                              "=r,l,r", [ptrs, mask.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def aligned_tile(row_start, tile, n_cols, BLOCK_N: tl.constexpr, ALIGN: tl.constexpr):
    # Tile ``tile`` of the row at flat offset row_start on 16-byte aligned tiles of a contiguous buffer (rows no
    # multiple of 16 bytes): (the flat offset of its lane 0, a multiple of ALIGN; its columns; which of them are the
    # row's; whether it is masked: the first and last, the inner tiles lying wholly in the row)
    h = (row_start % ALIGN).to(tl.int32)
    cols = tile * BLOCK_N - h + tl.arange(0, BLOCK_N)
    edge = (tile == 0) | ((tile + 1) * BLOCK_N - h > n_cols)
    return row_start // ALIGN * ALIGN + tile * BLOCK_N, cols, (cols >= 0) & (cols < n_cols), edge


@triton.jit
def load_tile(ptr, start, mask, edge, BLOCK_N: tl.constexpr):
    # an aligned tile as fp32: masked where ``edge``, else unmasked (16-byte vectors)
    offs = start + tl.arange(0, BLOCK_N)
    if edge:
        v = tl.load(ptr + offs, mask=mask, other=0.0).to(tl.float32)
    else:
        v = tl.load(ptr + offs).to(tl.float32)
    return v


@triton.jit
def store_tile(ptr, start, value, mask, edge, BLOCK_N: tl.constexpr):
    # an aligned tile's store: masked where ``edge``, else unmasked (16-byte vectors)
    offs = start + tl.arange(0, BLOCK_N)
    if edge:
        tl.store(ptr + offs, value, mask=mask)
    else:
        tl.store(ptr + offs, value)


@triton.jit
def aligned_row(row, n_cols, BLOCK_N: tl.constexpr, ALIGN: tl.constexpr):
    # Row ``row`` of a contiguous buffer on 16-byte aligned tiles: (its flat start and end, the aligned offset of its
    # first tile, its number of tiles)
    row_start = row.to(tl.int64) * n_cols
    first = row_start // ALIGN * ALIGN
    return row_start, row_start + n_cols, first, ((row_start + n_cols - first + BLOCK_N - 1) // BLOCK_N).to(tl.int32)


@triton.jit
def tile_counts(tiles, h, n_cols, BLOCK_N: tl.constexpr):
    # the row's columns in each of its tiles (0 in a tile past its end)
    return tl.maximum(tl.minimum((tiles + 1) * BLOCK_N - h, n_cols) - tl.maximum(tiles * BLOCK_N - h, 0), 0)


def can_prefetch(*tensors) -> bool:
    """l2_prefetch can run: CUDA tensors, compiled (not the interpreter)."""
    return not interpreting() and all(t.device.type == "cuda" for t in tensors)


def split_cols(n_rows: int, n_cols: int, sms: int, below: tuple[int, int], chunk: tuple[int, int, int],
               unaligned: bool = False) -> int:
    """Columns (a power of two) each program of a split row takes, or 0: one program a row. Rows are split where
    they are fewer than below[0] a SM and at least below[1] columns long (with ``unaligned``, that long whatever
    their number); ``sms`` is the device's SM count (0 where unknown, under the interpreter: never split). The
    chunk gives about chunk[0] programs a SM, within chunk[1] to chunk[2] columns (the kernel's table.py's SPLIT_*)."""
    rows_per_sm, min_cols = below
    if sms < 1 or n_cols < min_cols or (n_rows >= rows_per_sm * sms and not unaligned):
        return 0
    programs_per_sm, fewest, most = chunk
    cols = max(fewest, min(most, triton.next_power_of_2(triton.cdiv(n_rows * n_cols, programs_per_sm * sms))))
    return cols if cols <= n_cols else 0  # a flat tile longer than a row would span three (tables a lab swapped)


def chosen_split(split: int | None, n_rows: int, n_cols: int, element_size: int, sms: int, below: tuple[int, int],
                 chunk: tuple[int, int, int], split_unaligned: bool, flat: bool) -> int:
    """The elements a program of a split row takes, 0 for none: ``split`` as asked (checked), else split_cols's
    choice over a contiguous (``flat``) x, rows no multiple of 16 bytes split whatever their number where
    ``split_unaligned``."""
    if split is not None:
        check_split(split, n_cols, flat)
        return split
    unaligned = split_unaligned and n_cols * element_size % 16 != 0
    return split_cols(n_rows, n_cols, sms, below, chunk, unaligned) if flat else 0


def check_split(split: int, n_cols: int, flat: bool) -> None:
    """A split asked for by hand (``split=``): flat tiles need a power of two of at most a row over a contiguous x."""
    if split and not (flat and split & (split - 1) == 0 and split <= n_cols):
        raise ValueError(f"split must be a power of two of at most a row ({n_cols}) over a contiguous x, got {split}")


def device_sms(x: torch.Tensor) -> int:
    """x's device's SM count, cached; 0 off a GPU (the interpreter), where split_cols never splits."""
    return multiprocessor_count(x.device) if x.is_cuda else 0


class SplitLaunch:
    """A split row's two kept launches as one (kernels/_shared/fastlaunch.py: called with the wrapper's head): phase 1
    (x, workspace) writes fp32 partials per chunk into a fresh workspace, phase 2 (``pick`` of (workspace, *head))
    reads them. Two launches in stream order, no atomics: the result is deterministic."""
    __slots__ = ("first", "second", "workspace", "pick")

    def __call__(self, *head):
        ws = torch.empty(self.workspace, dtype=torch.float32, device=head[0].device)
        self.first(head[0], ws)
        self.second(*self.pick((ws, *head)))


def launch_split(cache, key, head: tuple, order: tuple, first: tuple, second: tuple, workspace: tuple) -> None:
    """Launch a split row's phases through ``cache`` (_shared/fastlaunch.LaunchCache) and keep both under ``key``
    as one SplitLaunch. ``first`` and ``second``: (kernel, grid, the arguments after the head, kwargs); phase 1's
    head is (x, workspace), phase 2's (workspace, *head) at the indices ``order`` (two or more); the workspace is
    fp32, of shape ``workspace``."""
    ws = torch.empty(workspace, dtype=torch.float32, device=head[0].device)
    pick = operator.itemgetter(*order)
    launched = []
    for phase, phase_head, (kernel, grid, args, kwargs) in ((1, (head[0], ws), first), (2, pick((ws, *head)), second)):
        launched.append(
            cache.launch(("split", phase, key), kernel, grid, (*phase_head, *args), kwargs, n_head=len(phase_head)))
    if None not in launched:
        split = SplitLaunch()
        (split.first, split.second), split.workspace, split.pick = launched, workspace, pick
        cache.keep(key, split)


def packed_launch(n_rows: int, n_cols: int, block: int, table: tuple[int, int], num_warps: int | None, *tensors):
    """packed_plan of ``tensors`` (x, y; or y, dy, dx): their element size and row strides."""
    return packed_plan(n_rows, n_cols, block, table, num_warps, tensors[0].element_size(),
                       tuple(t.stride(0) for t in tensors))


def packed_plan(n_rows: int, n_cols: int, block: int, table: tuple[int, int], num_warps: int | None, element_size: int,
                row_strides: tuple[int, ...]):
    """(grid, kwargs) of a packed kernel for rows of n_cols held in one block of ``block`` columns, where ``table``
    (a kernel's PACK_ROWS: (columns, elements)) packs them: rows shorter than that many columns, about that many
    elements a program, ALIGN from the tensors' ``row_strides``; None elsewhere."""
    below, elements = table
    if n_cols >= below or block >= elements:
        return None
    block_m = elements // block
    return (triton.cdiv(n_rows,
                        block_m), ), dict(BLOCK_M=block_m, BLOCK_N=block,
                                          ALIGN=row_align(element_size, n_cols, *row_strides), num_warps=num_warps
                                          or row_launch_params(block_m * block, element_size)[1])
