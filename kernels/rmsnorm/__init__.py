"""RMSNorm over the last dimension of an N x N input: y = x / sqrt(mean(x^2) + eps) * weight.

One program per row, the sum of squares in fp32. A row that fits in one block (up to kernels/_shared/rows.MAX_BLOCK_SIZE
columns) is read once and kept in registers, or, for the rows RELOAD_MIN_COLS names, read twice, the second time
from the L2, which frees the registers for more rows per SM (Inductor's shape); rows WIDE_HELD names, up to a wider
block. A longer row is walked in tiles twice: once for the sum of squares, once to normalise and store (a contiguous
row no multiple of 16 bytes on 16-byte aligned tiles of the flat x); few long rows are split over several programs
(kernels/_shared/norm_split.py). Rows a whole number of tiles long that UNMASKED_COLS names drop the column mask. The
tables are in table.py. Passes "fwd" and "fwd+bwd" (kernels/_shared/norm_bwd.py's backward).

References: Zhang & Sennrich, "Root Mean Square Layer Normalization" (2019); Liger-Kernel's ops/rms_norm.py.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels._shared import tables
from kernels._shared.fastlaunch import LaunchCache, spec
from kernels._shared.norm_bwd import TritonNorm, norm_check_rows, norm_naive_fn, norm_reference, upstream_gradient
from kernels._shared.norm_fwd import norm_forward, norm_row
from kernels._shared.rows import aligned_row, bound_mask, device_sms, leading_rows, needs_grad
from kernels._shared.tables import track_swaps, values
from kernels.rmsnorm import plan
from kernels.rmsnorm.table import RMSNORM
from rooflab.kernel import ELEMENT_BYTES, Kernel, differentiable
from rooflab.shapes import as_shape

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key

EPS = 1e-5
# The launch tables (table.py), read at each call: tests and the lab swap them.
RELOAD_MIN_COLS = values(RMSNORM["RELOAD_MIN_COLS"])  # element size -> fewest columns of a row read twice
RELOAD_WARPS = values(RMSNORM["RELOAD_WARPS"])  # ... with this many warps
SPARSE_BLOCK = values(RMSNORM["SPARSE_BLOCK"])  # (fewest, most columns, warps): held, not read twice
UNMASKED_COLS = values(RMSNORM["UNMASKED_COLS"])  # element size -> (fewest, most) columns without a column mask
SPLIT_BELOW = values(RMSNORM["SPLIT_BELOW"])  # (rows a SM, columns): fewer, longer rows are split (_norm_split)
SPLIT_CHUNK = values(RMSNORM["SPLIT_CHUNK"])  # (programs a SM, fewest, most columns a program) of a split row
TILED_LAUNCH = values(RMSNORM["TILED_LAUNCH"])  # rows too long to hold: element size -> (tile, warps)
ALIGNED_TILES = values(RMSNORM["ALIGNED_TILES"])  # element size -> (tile, warps) of tiled rows no multiple of 16 B
WIDE_HELD = values(RMSNORM["WIDE_HELD"])  # rows too long to hold by the heuristic: (most columns, warps), one tile


@triton.jit
def _rmsnorm_fwd_kernel(
        x_ptr, w_ptr, y_ptr, n_cols, stride_xm, stride_xn, stride_w, stride_ym, stride_yn, eps,
        BLOCK_SIZE: tl.constexpr,
        ONE_TILE: tl.constexpr,  # the whole row fits in BLOCK_SIZE: read it once, keep it in registers
        RELOAD: tl.constexpr = False,  # ... or read it twice, holding nothing across the reduction
        FULL: tl.constexpr = False,  # the row is a whole number of tiles (n_cols % BLOCK_SIZE == 0): no column mask
        ALIGN: tl.constexpr = 1,  # divides n_cols and the row strides (kernels/_shared/rows.row_align): vector loads
):
    _, x_row, y_row, cols, n_cols = norm_row(x_ptr, y_ptr, n_cols, stride_xm, stride_ym, BLOCK_SIZE, ALIGN)
    if ONE_TILE:
        mask = bound_mask(cols, n_cols, FULL)
    if ONE_TILE and RELOAD:
        # Inductor's shape: the row is read for the sum of squares and read again (from the L2) to normalise, so no
        # register holds it across the reduction
        x = tl.load(x_row + cols * stride_xn, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        x = tl.load(x_row + cols * stride_xn, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(y_row + cols * stride_yn, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    elif ONE_TILE:
        x = tl.load(x_row + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        # the weight issued with x, not after the reduction: its (L2-resident) load overlaps the row's DRAM latency
        w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0)
        rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        tl.store(y_row + cols * stride_yn, (x * rstd * w.to(tl.float32)).to(y_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros((BLOCK_SIZE, ), dtype=tl.float32)
        for start in range(0, n_cols, BLOCK_SIZE):  # pass 1: the sum of squares
            c = start + cols
            # evict_last: the row is read again in pass 2, from the L2 if it is still there
            x = tl.load(x_row + c * stride_xn, mask=bound_mask(c, n_cols, FULL), other=0.0,
                        eviction_policy="evict_last").to(tl.float32)
            acc += x * x
        rstd = tl.math.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
        for start in range(0, n_cols, BLOCK_SIZE):  # pass 2: normalise, scale, store
            c = start + cols
            mask = bound_mask(c, n_cols, FULL)
            x = tl.load(x_row + c * stride_xn, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + c * stride_w, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            tl.store(y_row + c * stride_yn, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rmsnorm_fwd_aligned_kernel(x_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK_N: tl.constexpr, ALIGN: tl.constexpr):
    # A long row of a contiguous x no multiple of 16 bytes, on 16-byte aligned tiles of the flat buffer (softmax's
    # walk, kernels/softmax/shapes.py): the first and last tiles masked, the inner ones unmasked at offsets the
    # compiler can prove aligned, so x and y move 16-byte vectors. The weight, indexed by column, stays unaligned.
    row_start, row_end, first, n_tiles = aligned_row(tl.program_id(axis=0), n_cols, BLOCK_N, ALIGN)
    lanes = tl.arange(0, BLOCK_N)
    offs = first + lanes
    x = tl.load(x_ptr + offs, mask=(offs >= row_start) & (offs < row_end), other=0.0).to(tl.float32)
    acc = x * x
    for k in range(1, n_tiles - 1):  # pass 1, the sum of squares: inner tiles unmasked, the last one masked
        x = tl.load(x_ptr + first + k * BLOCK_N + lanes, eviction_policy="evict_last").to(tl.float32)
        acc += x * x
    if n_tiles > 1:
        offs = first + (n_tiles - 1) * BLOCK_N + lanes
        x = tl.load(x_ptr + offs, mask=offs < row_end, other=0.0).to(tl.float32)
        acc += x * x
    rstd = tl.math.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
    offs = first + lanes  # pass 2: normalise, scale, store, tile by tile as pass 1
    mask = (offs >= row_start) & (offs < row_end)
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + (offs - row_start), mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    for k in range(1, n_tiles - 1):
        offs = first + k * BLOCK_N + lanes
        x = tl.load(x_ptr + offs, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(w_ptr + (offs - row_start)).to(tl.float32)
        tl.store(y_ptr + offs, (x * rstd * w).to(y_ptr.dtype.element_ty))
    if n_tiles > 1:
        offs = first + (n_tiles - 1) * BLOCK_N + lanes
        mask = offs < row_end
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + (offs - row_start), mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


_LAUNCHES = LaunchCache("rmsnorm")


@leading_rows
def _rmsnorm_forward(x: torch.Tensor, weight: torch.Tensor, eps: float = EPS, block_size: int | None = None,
                     num_warps: int | None = None, reload: bool | None = None, full: bool | None = None,
                     split: int | None = None) -> torch.Tensor:
    """Check the inputs; allocate y; launch what kernels/rmsnorm/plan.py plans, honouring any strides of x and weight
    without a copy. ``block_size`` and ``num_warps`` override the heuristic (_shared/rows.py; asked for, with ``full``,
    they turn off TILED_LAUNCH, WIDE_HELD and ALIGNED_TILES); ``reload`` reads a one-tile row twice (the second time
    from the L2): by default for the rows RELOAD_MIN_COLS names, at RELOAD_WARPS, but SPARSE_BLOCK's (held, its warps)
    where no block_size is asked for. ``full`` drops the column mask of a row a whole number of tiles long (default:
    UNMASKED_COLS's rows). ``split``: columns a program of the split path takes (kernels/_shared/norm_split.py), 0: one
    program a row, None: split_cols's choice (GPU only). A key seen before launches as its first call did."""
    key = (spec(x), spec(weight), eps, block_size, num_warps, reload, full, split, tables.VERSION)
    launch = _LAUNCHES.get(key)
    if launch is not None:
        y = torch.empty_like(x, memory_format=torch.contiguous_format)  # as below, with less argument parsing
        launch(x, weight, y)
        return y
    return norm_forward(
        _LAUNCHES, key, globals(), "rmsnorm_triton", x, weight, None, eps,
        lambda n_rows, n_cols: (plan.forward((n_rows, n_cols), x.stride(), weight.stride(0), x.element_size(),
                                             device_sms(x), _tables(), block_size, num_warps, reload, full, split)))


def _tables() -> plan.Tables:
    """The launch table's values as the module holds them now (tests and the lab swap them)."""
    return plan.Tables(*(globals()[name] for name in plan.Tables._fields))


def rmsnorm_triton(x: torch.Tensor, weight: torch.Tensor, eps: float = EPS, **launch) -> torch.Tensor:
    """RMSNorm over the last dimension, differentiable: where autograd records (an input requires grad), the
    backward is kernels/_shared/norm_bwd.py's; ``launch`` (block_size, num_warps, reload, full) goes to the forward."""
    if needs_grad(x, weight):
        return TritonNorm.apply(x, weight, None, eps, _rmsnorm_forward, False)
    return _rmsnorm_forward(x, weight, eps, **launch)


def rmsnorm_naive(x: torch.Tensor, weight: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """The unfused expression: every line is its own kernel (or several) and its own pass over memory."""
    ms = x.pow(2).mean(dim=-1, keepdim=True)  # 2 kernels: read N^2 write N^2; read N^2 write N
    rstd = torch.rsqrt(ms + eps)  # 2 kernels: read N write N each
    return x * rstd * weight  # 2 kernels: read N^2 + N, write N^2 each


def rmsnorm_builtin(x: torch.Tensor, weight: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1], ), weight, eps)


def rmsnorm64(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The float64 reference expression (its inputs float64), differentiable for the fwd+bwd check."""
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + EPS) * weight


reference = norm_reference(rmsnorm64)  # (inputs, pass_): y, or (dx, dweight) by autograd in float64


def make_inputs(shape, dtype: torch.dtype, device: str, seed: int = 0):
    """x, weight and the fixed upstream gradient grad_y (fwd+bwd factories make their own leaves)."""
    rows, cols = as_shape(shape, "rows")  # an int n: the square n x n
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((rows, cols), generator=g, device=device, dtype=torch.float32)
    weight = 1.0 + 0.1 * torch.randn((cols, ), generator=g, device=device, dtype=torch.float32)  # near 1, as trained
    return x.to(dtype), weight.to(dtype), upstream_gradient((rows, cols), dtype, device, seed)


# Forward, per element: square, sum, * rstd, * weight. Backward from the statistic, per element: x_hat,
# g = weight * dy, g * x_hat and its sum (2), dx = rstd * (g - x_hat * a) (3), dweight += dy * x_hat (2).
# Per-row O(N) work is left out.
FWD_FLOPS_PER_ELEMENT = 4
BWD_FLOPS_PER_ELEMENT = 9


def flops(shape, pass_: str = "fwd") -> float:
    rows, cols = as_shape(shape, "rows")
    return (FWD_FLOPS_PER_ELEMENT + (BWD_FLOPS_PER_ELEMENT if pass_ == "fwd+bwd" else 0)) * rows * cols


def bytes_moved(shape, dtype: str, pass_: str = "fwd") -> float:
    """The fewest: fwd reads x and weight and writes y; bwd reads x (rstd recomputed or saved: 1 per row, left out),
    weight and dy and writes dx and dweight. Our backward's fp32 partial sums stay out."""
    rows, cols = as_shape(shape, "rows")
    fwd = 2 * rows * cols + cols
    bwd = 3 * rows * cols + 2 * cols
    return (fwd + (bwd if pass_ == "fwd+bwd" else 0)) * ELEMENT_BYTES[dtype]


KERNEL = Kernel(
    name="rmsnorm",
    description="RMSNorm over the last dim of N x N, with weight, fp32 statistics, forward and forward+backward",
    make_inputs=make_inputs, reference=reference, flops=flops, bytes=bytes_moved, impls={
        "naive": differentiable(rmsnorm_naive),
        "builtin": differentiable(rmsnorm_builtin),
        "triton": differentiable(rmsnorm_triton)
    }, naive_fn=norm_naive_fn(rmsnorm_naive), dtypes=("float32", "bfloat16", "float16"), check_rows=norm_check_rows,
    passes=("fwd", "fwd+bwd"),
)
