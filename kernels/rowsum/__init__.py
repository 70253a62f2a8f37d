"""Row sum: s[i] = sum_j x[i, j] over an N x N matrix, one value per row, accumulated in fp32.

A reduction reads N^2 elements and writes only N, so it is memory-bound: the question is whether it reaches copy
bandwidth. A row that fits in one block (up to _shared/rows.MAX_BLOCK_SIZE columns) is loaded whole, in one go, and
reduced in-block (tl.sum); short rows are packed several to a program. Longer rows are walked in BLOCK_N columns into
an fp32 register tile reduced once at the end. The output has the input's dtype. On the H200 the one-row-per-program
form reads at copy speed (docs/archive/performance-rounds.md) but for few long rows (SMs idle) or long
unaligned rows (no vector loads): there x is split into aligned flat tiles summed per row (_split_sum). Launch
tables: table.py.
References: Triton tutorial 02-fused-softmax (row reductions) and 05-layer-norm (the tiled loop over a long row).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._shared import tables
from kernels._shared.counts import counts_for
from kernels._shared.fastlaunch import LaunchCache, spec
from kernels._shared.rows import (
    MAX_BLOCK_SIZE,
    aligned_row,
    bound_mask,
    device_sms,
    launch_split,
    leading_rows,
    row_launch_params,
)  # yapf: disable (the import as ruff sorts it)
from kernels._shared.tables import track_swaps, values
from kernels.rowsum import plan
from kernels.rowsum.table import ROWSUM
from rooflab.kernel import ELEMENT_BYTES, Kernel, eager
from rooflab.shapes import as_shape
from rooflab.triton_utils import check_device

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key

SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
MAX_BLOCK_N = MAX_BLOCK_SIZE  # longest row one program holds whole; longer rows take the tiled loop
# The launch tables (table.py), read at each call: tests and the lab swap them.
MIN_TILE_ELEMENTS = values(ROWSUM["MIN_TILE_ELEMENTS"])  # short rows are packed to this many elements a program
UNMASKED_COLS = values(ROWSUM["UNMASKED_COLS"])  # element size -> (fewest, most) columns without masks
SPLIT_BELOW = values(ROWSUM["SPLIT_BELOW"])  # (rows a SM, columns): fewer, longer rows are split (_split_sum)
SPLIT_CHUNK = values(ROWSUM["SPLIT_CHUNK"])  # (programs a SM, fewest, most elements a program) of a split
SPLIT_UNALIGNED = values(ROWSUM["SPLIT_UNALIGNED"])  # long rows not 16-byte aligned split whatever their number
SPLIT_ONCE_MAX_ROWS = values(ROWSUM["SPLIT_ONCE_MAX_ROWS"])  # split rows up to this many: one launch, not two
ALIGNED_TILES = values(ROWSUM["ALIGNED_TILES"])  # element size -> (tile, warps) of long rows no multiple of 16 B
NAIVE_CHUNK = 1024  # rowsum_naive's columns a pass


@triton.jit
def _rowsum_kernel(x_ptr, s_ptr, n_rows, n_cols, stride_xm, stride_xn, stride_s, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, ONE_TILE: tl.constexpr,
                   FULL: tl.constexpr = False,  # one tile exactly, whole programs of rows: no mask
                   ALIGN: tl.constexpr = 1):  # divides n_cols and stride_xm (_shared/rows.row_align): vector loads
    n_cols, stride_xm = n_cols // ALIGN * ALIGN, stride_xm // ALIGN * ALIGN
    pid = tl.program_id(axis=0)
    rows = pid.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)  # int64: 8192^2 * 4 B > 2^31
    row_mask = bound_mask(rows, n_rows, FULL)  # FULL: every row of every program is in range
    row_ptrs = x_ptr + rows[:, None] * stride_xm  # (BLOCK_M, 1)
    cols = tl.arange(0, BLOCK_N).to(tl.int64)
    if ONE_TILE:
        # The whole tile in one go: every load is issued before the first add needs one.
        mask = row_mask[:, None] & bound_mask(cols, n_cols, FULL)[None, :]
        x = tl.load(row_ptrs + cols[None, :] * stride_xn, mask=mask, other=0.0).to(tl.float32)
        s = tl.sum(x, axis=1)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            c = start + cols
            mask = row_mask[:, None] & (c[None, :] < n_cols)
            acc += tl.load(row_ptrs + c[None, :] * stride_xn, mask=mask, other=0.0).to(tl.float32)
        s = tl.sum(acc, axis=1)  # (BLOCK_M,): one in-block reduction per row, after the loop
    tl.store(s_ptr + rows * stride_s, s.to(s_ptr.dtype.element_ty), mask=row_mask)


@triton.jit
def _rowsum_aligned_kernel(x_ptr, s_ptr, n_cols, stride_s, BLOCK_N: tl.constexpr, ALIGN: tl.constexpr):
    # A long row of a contiguous x no multiple of 16 bytes, on 16-byte aligned tiles of the flat buffer (RMSNorm's
    # walk): the first and last tiles masked, the inner ones unmasked at offsets the compiler can prove aligned.
    row = tl.program_id(axis=0).to(tl.int64)
    row_start, row_end, first, n_tiles = aligned_row(row, n_cols, BLOCK_N, ALIGN)
    lanes = tl.arange(0, BLOCK_N)
    offs = first + lanes
    acc = tl.load(x_ptr + offs, mask=(offs >= row_start) & (offs < row_end), other=0.0).to(tl.float32)
    for k in range(1, n_tiles - 1):
        acc += tl.load(x_ptr + first + k * BLOCK_N + lanes, eviction_policy="evict_first").to(tl.float32)
    if n_tiles > 1:
        offs = first + (n_tiles - 1) * BLOCK_N + lanes
        acc += tl.load(x_ptr + offs, mask=offs < row_end, other=0.0).to(tl.float32)
    tl.store(s_ptr + row * stride_s, tl.sum(acc, axis=0).to(s_ptr.dtype.element_ty))


@triton.jit
def _split_partials(x_ptr, part_ptr, pid, n_elements, n_cols, CHUNK: tl.constexpr):
    # Split rows, phase 1: a contiguous x as one flat buffer, CHUNK elements a program, so every tile starts
    # 16-byte aligned whatever the row length; a tile spans at most two rows (CHUNK <= n_cols): the sums of its
    # head (the row it starts in) and of its tail (the next row) go to part[pid, 0] and part[pid, 1].
    start = pid * CHUNK  # int64: the flat offset passes 2^31
    offs = tl.arange(0, CHUNK)
    if start + CHUNK <= n_elements:  # every tile but the last: no mask, so nothing stops 16-byte vectors
        x = tl.load(x_ptr + start + offs).to(tl.float32)
    else:
        x = tl.load(x_ptr + start + offs, mask=start + offs < n_elements, other=0.0).to(tl.float32)
    head = (start // n_cols + 1) * n_cols - start  # elements of the first row in this tile
    tl.store(part_ptr + 2 * pid, tl.sum(tl.where(offs < head, x, 0.0), axis=0))
    tl.store(part_ptr + 2 * pid + 1, tl.sum(tl.where(offs < head, 0.0, x), axis=0))


@triton.jit
def _combine_rows(part_ptr, s_ptr, rows, n_rows, n_cols, stride_s, CHUNK: tl.constexpr, BLOCK_K: tl.constexpr):
    # Split rows, phase 2: each row adds the partials of the tiles it touches, in a fixed order (no atomics); a
    # tile that starts in the row before holds this row's part as its tail. ".cg": read at the L2, where another
    # program's partials are (never a stale L1 line)
    first = rows * n_cols // CHUNK  # the tile of the row's first element
    last = ((rows + 1) * n_cols - 1) // CHUNK
    tiles = first[:, None] + tl.arange(0, BLOCK_K)[None, :]  # (BLOCK_M, BLOCK_K)
    mask = (rows < n_rows)[:, None] & (tiles <= last[:, None])
    tail = (tiles * CHUNK // n_cols != rows[:, None]).to(tl.int64)
    s = tl.sum(tl.load(part_ptr + 2 * tiles + tail, mask=mask, other=0.0, cache_modifier=".cg"), axis=1)
    tl.store(s_ptr + rows * stride_s, s.to(s_ptr.dtype.element_ty), mask=rows < n_rows)


@triton.jit
def _rowsum_split_kernel(x_ptr, part_ptr, n_elements, n_cols, CHUNK: tl.constexpr):
    _split_partials(x_ptr, part_ptr, tl.program_id(axis=0).to(tl.int64), n_elements, n_cols, CHUNK)


@triton.jit
def _rowsum_combine_kernel(part_ptr, s_ptr, n_rows, n_cols, stride_s, CHUNK: tl.constexpr, BLOCK_M: tl.constexpr,
                           BLOCK_K: tl.constexpr):
    rows = tl.program_id(axis=0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    _combine_rows(part_ptr, s_ptr, rows, n_rows, n_cols, stride_s, CHUNK, BLOCK_K)


@triton.jit
def _rowsum_split_once_kernel(x_ptr, s_ptr, part_ptr, count_ptr, n_elements, n_rows, n_cols, stride_s,
                              CHUNK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    # Both phases in one launch: each program writes its partials and counts itself done (the atomic releases its
    # stores and acquires the others'); the last program to finish adds up every row, in the two launches' order,
    # and sets the count back to 0 for the next call (count_ptr: the stream's, kernels/_shared/counts.py).
    pid = tl.program_id(axis=0).to(tl.int64)
    _split_partials(x_ptr, part_ptr, pid, n_elements, n_cols, CHUNK)
    tl.debug_barrier()  # every thread's stores before the count
    if tl.atomic_add(count_ptr, 1, sem="acq_rel") == tl.num_programs(axis=0) - 1:
        for start in range(0, n_rows, BLOCK_M):
            _combine_rows(part_ptr, s_ptr, start + tl.arange(0, BLOCK_M).to(tl.int64), n_rows, n_cols, stride_s, CHUNK,
                          BLOCK_K)
        tl.atomic_xchg(count_ptr, 0)


def launch_params(n_cols: int, element_size: int) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps) for rows of n_cols elements (plan.launch_params on this module's tables)."""
    return plan.launch_params(n_cols, element_size, MAX_BLOCK_N, MIN_TILE_ELEMENTS)


def _tables() -> plan.Tables:
    """The launch table's values as the module holds them now (tests and the lab swap them)."""
    return plan.Tables(*(globals()[name] for name in plan.Tables._fields))


def _split_sum(key, x: torch.Tensor, s: torch.Tensor, chunk: int) -> None:
    """The split path: flat tiles of ``chunk`` elements of a contiguous x, a program each, into fp32 partials
    (programs, 2); then each row adds its tiles' partials: in the same launch where the rows are at most
    SPLIT_ONCE_MAX_ROWS (the last program adds them all), else in a second (kept as one under ``key``)."""
    n_rows, n_cols = x.shape
    programs = triton.cdiv(x.numel(), chunk)
    block_k = triton.next_power_of_2(triton.cdiv(n_cols, chunk) + 1)  # the most tiles a row touches
    block_m = max(1, MIN_TILE_ELEMENTS // block_k)
    warps = row_launch_params(chunk, x.element_size())[1]
    if n_rows <= SPLIT_ONCE_MAX_ROWS:
        once = _SplitOnce()
        once.workspace = (programs, 2)
        once.launch = _LAUNCHES.launch(("once", key), _rowsum_split_once_kernel, (programs, ),
                                       (x, s, torch.empty(once.workspace, dtype=torch.float32, device=x.device),
                                        counts_for(x.device, 1), x.numel(), n_rows, n_cols, s.stride(0)),
                                       dict(CHUNK=chunk, BLOCK_M=block_m, BLOCK_K=block_k, num_warps=warps), n_head=4)
        if once.launch is not None:
            _LAUNCHES.keep(key, once)
        return
    launch_split(_LAUNCHES, key, (x, s), (0, 2),
                 (_rowsum_split_kernel, (programs, ), (x.numel(), n_cols), dict(CHUNK=chunk, num_warps=warps)),
                 (_rowsum_combine_kernel, (triton.cdiv(n_rows, block_m), ),
                  (n_rows, n_cols, s.stride(0)), dict(CHUNK=chunk, BLOCK_M=block_m, BLOCK_K=block_k, num_warps=4)),
                 (programs, 2))


class _SplitOnce:
    """The one-launch split as kept under its key: a fresh workspace for the partials each call, the stream's count."""
    __slots__ = ("launch", "workspace")

    def __call__(self, x, s):
        self.launch(x, s, torch.empty(self.workspace, dtype=torch.float32, device=x.device), counts_for(x.device, 1))


_LAUNCHES = LaunchCache("rowsum")


@leading_rows
def rowsum_triton(x: torch.Tensor, block_m: int | None = None, block_n: int | None = None, num_warps: int | None = None,
                  full: bool | None = None, split: int | None = None) -> torch.Tensor:
    """Check the input; allocate the output (N values, x's dtype); launch what kernels/rowsum/plan.py plans.

    ``block_m``, ``block_n`` and ``num_warps`` override the heuristic (launch_params), e.g. to test the tiled loop
    on short rows or to tune. ``full`` drops the masks where the rows are exactly one tile long and fill whole
    programs (by default for the rows UNMASKED_COLS names); asked for anywhere else, it is ignored. ``split``: the
    elements a program of the split path sums (_split_sum; a power of two, at most a row), 0 for one program a row,
    None for kernels/_shared/rows.split_cols's choice on the SPLIT_* tables (a contiguous x on a GPU only).
    """
    key = (spec(x), block_m, block_n, num_warps, full, split, tables.VERSION)
    launch = _LAUNCHES.get(key)
    if launch is not None:
        s = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)  # an int: a Size costs more to parse
        launch(x, s)
        return s
    check_device(x)
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"rowsum_triton supports float32, bfloat16 and float16, not {x.dtype}")
    if x.dim() != 2:
        raise ValueError(f"rowsum_triton needs a 2-D tensor, got shape {tuple(x.shape)}")
    n_rows, n_cols = x.shape
    s = torch.empty((n_rows, ), dtype=x.dtype, device=x.device)
    if n_rows == 0:
        return s
    if n_cols == 0:
        return s.zero_()  # the empty sum
    p = plan.forward((n_rows, n_cols), x.stride(), x.element_size(), device_sms(x), _tables(), block_m, block_n,
                     num_warps, full, split)
    if p.kernel == "split":
        _split_sum(key, x, s, p.meta["CHUNK"])
    else:
        _LAUNCHES.launch(key, globals()[p.kernel], p.grid, (x, s, *p.ints), p.meta, n_head=2)
    return s


def rowsum_naive(x: torch.Tensor) -> torch.Tensor:
    acc = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)  # 1 kernel: write N
    for j in range(0, x.shape[1], NAIVE_CHUNK):  # a student's column-chunked loop: a pass a chunk of 1024 columns
        acc = acc + x[:, j:j + NAIVE_CHUNK].sum(dim=1)  # 2 kernels per chunk: read 1024N, write N; read 2N, write N
    return acc


def rowsum_builtin(x: torch.Tensor) -> torch.Tensor:
    return x.sum(dim=1)


def reference(inputs) -> torch.Tensor:
    (x, ) = inputs
    return x.to(torch.float64).sum(dim=1)


def make_inputs(shape, dtype: torch.dtype, device: str, seed: int = 0):
    rows, cols = as_shape(shape, "rows")  # an int n: the square n x n
    g = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn((rows, cols), generator=g, device=device, dtype=torch.float32).to(dtype), )


FLOPS_PER_ELEMENT = 1  # one add per element read (N - 1 per row, counted as N)


def flops(shape) -> float:
    rows, cols = as_shape(shape, "rows")
    return FLOPS_PER_ELEMENT * rows * cols


def bytes_moved(shape, dtype: str) -> float:
    rows, cols = as_shape(shape, "rows")
    return (rows * cols + rows) * ELEMENT_BYTES[dtype]  # the fewest: read x once, write the row sums


COMPILE_MAX_CHUNKS = 64  # torch.compile unrolls the naive's loop: on the H200 its 326 passes (16 x 333333) took 75 s


def compile_skip(impl: str, shape) -> str | None:
    """torch.compile of the naive expression traces one graph node a chunk: minutes of compile on long rows."""
    chunks = triton.cdiv(shape[1], NAIVE_CHUNK)
    if impl == "compile" and chunks > COMPILE_MAX_CHUNKS:
        return (f"torch.compile would unroll the naive loop's {chunks} passes (over {COMPILE_MAX_CHUNKS}: 326 took "
                f"75 s and 977 took 281 s to compile on the H200)")
    return None


KERNEL = Kernel(name="rowsum", description="sum over each row of an N x N matrix (N outputs), fp32 accumulation",
                make_inputs=make_inputs, reference=reference, flops=flops, bytes=bytes_moved,
                impls=eager(naive=rowsum_naive, builtin=rowsum_builtin,
                            triton=rowsum_triton), naive_fn=rowsum_naive, shape_skip_reason=compile_skip,
                )
