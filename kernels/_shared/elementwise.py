"""What the binary elementwise kernels (vecadd, saxpy) share: their launch table (ELEMENTWISE), their launch plan
(``plan``: a pure function of shape, strides and dtype), the wrapper that checks, allocates and launches it
(``launch_binary``) and the tile indexing of their Triton kernels (``tile``)."""
import math
from typing import NamedTuple

import torch
import triton
import triton.language as tl

from kernels._shared import tables
from kernels._shared.fastlaunch import spec
from kernels._shared.layout import contiguous
from kernels._shared.tables import Choice, T, track_swaps, values
from rooflab.triton_utils import check_device

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key

# The launch table of the elementwise kernels over two operands (vecadd, saxpy): dtype -> (elements per program,
# num_warps).
ELEMENTWISE = {
    "LAUNCH": {
        "float32":
        Choice((1024, 4), "Inductor's XBLOCK 1024 / 4 warps beat 4096 / 8 in three calls at 8192^2",
               T + "tune_v5_looped_reload_and_elementwise.csv"),
        "bfloat16":
        Choice((2048, 4), "two 16-byte loads a thread beat 4096 / 8 at 8192^2", T + "tune_v2.csv"),
        "float16":
        Choice((2048, 4), "as bfloat16 (the same bytes a thread)", T + "tune_v2.csv"),
    },
}

SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# (elements per program, num_warps) by dtype
LAUNCH = {getattr(torch, name): launch for name, launch in values(ELEMENTWISE["LAUNCH"]).items()}


def elementwise_tile(n_cols: int, elements: int) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N) covering about `elements` per program: wide along the row, more rows when rows are short."""
    if elements < 1 or elements & (elements - 1):
        raise ValueError(f"elements per program must be a power of two, got {elements}")
    block_n = min(triton.next_power_of_2(max(n_cols, 1)), elements)
    return max(1, elements // block_n), block_n


class Launch(NamedTuple):
    flat: bool  # every operand viewed as one (1, n) row (contiguous, or copied so first: ``copy``); else 2-D as given
    copy: tuple  # (x, y): copied contiguous first (an operand of another rank than 2 with no one-row view)
    grid: tuple
    ints: tuple  # n_rows, n_cols, then the (row, column) stride of x, y and z
    meta: dict  # the constexprs BLOCK_M, BLOCK_N, ONE_ROW (see ``tile``) and num_warps


def plan(shape: tuple[int, ...], x_strides: tuple[int, ...], y_strides: tuple[int, ...], dtype, launch: dict,
         elements: int | None = None, num_warps: int | None = None, one_row: bool | None = None) -> Launch:
    """The launch of vecadd and saxpy over x and y of ``shape`` (any rank, not empty) into a fresh contiguous z: one
    program per BLOCK_M x BLOCK_N tile; pure, tested on the CPU (tests/test_elementwise_plan.py). Contiguous operands
    run as one long row (aligned, vectorised, no ragged row ends); 2-D ones keep their strides (x.t(), x[:, ::2]);
    other strided ones are copied contiguous first. ``elements`` (per program) and ``num_warps`` default to
    ``launch`` (dtype -> (elements, warps): LAUNCH). ``one_row`` (default: the view has one row) numbers a single-row
    view's tiles by the program id alone, with BLOCK_M = 1; False keeps the 2-D split (probes); True on several rows
    is refused."""
    x_flat, y_flat = contiguous(shape, x_strides), contiguous(shape, y_strides)
    copy = (False, False)
    if len(shape) != 2:  # one long row: a copy only where a strided operand has no such view
        copy, x_flat, y_flat = (not x_flat, not y_flat), True, True
    if x_flat and y_flat:
        n_rows, n_cols = 1, math.prod(shape)
        # a one-element operand's view keeps its own last stride (torch's view); z's is 1
        strides = [(n_cols, t[-1] if n_cols == 1 and t else 1) for t in (x_strides, y_strides, ())]
    else:
        n_rows, n_cols = shape
        strides = [x_strides, y_strides, (n_cols, 1)]
    if one_row is None:
        one_row = n_rows == 1
    elif one_row and n_rows != 1:
        raise ValueError(f"one_row needs a single-row view, got {n_rows} rows")
    default_elements, default_warps = launch[dtype]
    block_m, block_n = elementwise_tile(n_cols, elements or default_elements)
    if one_row:
        block_m = 1
    # a single-row view's row stride is passed as 0, which Triton's divisibility-by-16 specialisation takes as an
    # aligned row start, so interior tiles move 16-byte vectors (with the odd true stride of 1793^2 they stayed scalar)
    ints = [n_rows, n_cols]
    for row, col in strides:
        ints += [0 if n_rows == 1 else row, col]
    grid = (triton.cdiv(n_rows, block_m) * triton.cdiv(n_cols, block_n), )
    meta = {"BLOCK_M": block_m, "BLOCK_N": block_n, "ONE_ROW": bool(one_row), "num_warps": num_warps or default_warps}
    return Launch(x_flat and y_flat, copy, grid, tuple(ints), meta)


def launch_binary(launches, kernel, name: str, x: torch.Tensor, y: torch.Tensor, scalars: tuple = (),
                  num_warps: int | None = None, block_size: int | None = None, one_row: bool | None = None):
    """z = kernel over x and y: ``kernel(x, y, z, *scalars, n_rows, n_cols, *strides, BLOCK_M, BLOCK_N, ONE_ROW)``,
    as ``plan`` plans it, through ``launches`` (a _shared/fastlaunch.LaunchCache): a key seen before skips the checks
    and the plan. Check two tensors of one shape (any rank, as torch.add takes) and float dtype; operands the plan
    copies launch without keeping an entry."""
    key = (spec(x), spec(y), num_warps, block_size, one_row, tables.VERSION)
    launch = launches.get(key)
    if launch is not None:
        z = torch.empty_like(x, memory_format=torch.contiguous_format)  # torch.empty(x.shape, ...) parses a Size slower
        launch(x, y, z, *scalars)  # the views' addresses are the operands': the kernel needs nothing else of them
        return z
    check_device(x, y)
    if x.dtype not in SUPPORTED_DTYPES or y.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{name} supports float32, bfloat16 and float16, not {x.dtype} and {y.dtype}")
    if x.dtype != y.dtype:
        raise TypeError(f"{name} needs x and y of one dtype, got {x.dtype} and {y.dtype}")
    if x.shape != y.shape:
        raise ValueError(f"{name} needs two tensors of one shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    z = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if z.numel() == 0:
        return z
    p = plan(tuple(x.shape), x.stride(), y.stride(), x.dtype, LAUNCH, block_size, num_warps, one_row)
    views = [t.contiguous() if copied else t for t, copied in zip((x, y), p.copy)] + [z]
    if p.flat:
        views = [t.view(1, -1) for t in views]
    launches.launch(None if any(p.copy) else key, kernel, p.grid, (*views, *scalars, *p.ints), p.meta,
                    n_head=3 + len(scalars))
    return z


@triton.jit
def tile(pid, n_rows, n_cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ONE_ROW: tl.constexpr):
    """(rows, cols, interior) of program ``pid``'s tile: rows (BLOCK_M, 1) and cols (1, BLOCK_N) as int64 indices
    (8192^2 * 4 B > 2^31), and whether the tile lies wholly inside (no mask needed), also in int64.

    Tiles are numbered row-major over the (n_rows / BLOCK_M) x (n_cols / BLOCK_N) split. A single-row view
    (ONE_ROW, BLOCK_M = 1) takes the program id as its column tile: no integer division, whose dependent chain
    made a program run 56 instead of 23 instructions before its first load (sm_90;
    docs/archive/performance-rounds.md).
    """
    if ONE_ROW:
        tl.static_assert(BLOCK_M == 1, "a single-row view's tile is one row")
        pid_n = pid.to(tl.int64)
        rows = tl.zeros((BLOCK_M, ), dtype=tl.int64)[:, None]
        cols = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N))[None, :]
        interior = (pid_n + 1) * BLOCK_N <= n_cols
    else:
        n_col_blocks = (n_cols - 1) // BLOCK_N + 1  # tl.cdiv's n_cols + BLOCK_N - 1 overflows int32 near 2^31
        pid_m = (pid // n_col_blocks).to(tl.int64)  # the division in the width of its operands, the rest in int64
        pid_n = (pid % n_col_blocks).to(tl.int64)
        rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M))[:, None]
        cols = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N))[None, :]
        interior = ((pid_m + 1) * BLOCK_M <= n_rows) & ((pid_n + 1) * BLOCK_N <= n_cols)
    return rows, cols, interior
