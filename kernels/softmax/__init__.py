"""Softmax over the rows of an N x N matrix, forward and backward: y = exp(x - max) / sum(exp(x - max)).

Forward: a row of at most MAX_FUSED_BLOCK elements is held in registers by one program (padded to a power of two with
-inf, which exp sends to 0): x read once, y written once; the rows RELOAD_MIN_COLS names read x again, from the L2.
Longer rows: online softmax over tiles, a running max m and sum s, rescaled by exp(m_old - m_new) when m grows, then a
second pass writes exp(x - m) / s (few long rows: split over several programs, kernels/softmax/shapes.py). Backward:
dx = y * (dy - sum_j dy_j y_j), one program per row, two passes over tiles for long rows. Row statistics are fp32.
Passes: "fwd" and "fwd+bwd" (a fixed seeded upstream gradient). Also here: hand-written CUDA (softmax.cu).

References: Triton tutorial 02-fused-softmax; Liger-Kernel ops/softmax.py (autograd Function); Milakov &
Gimelshein, "Online normalizer calculation for softmax" (2018).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._shared import tables
from kernels._shared.cuda import build_cuda, cuda_source
from kernels._shared.fastlaunch import LaunchCache, spec
from kernels._shared.rows import MAX_BLOCK_SIZE, bound_mask, device_sms, leading_rows, needs_grad
from kernels._shared.tables import track_swaps, values
from kernels.softmax import plan
from kernels.softmax.shapes import (
    finite_shift,  # noqa: F401  the plan names the kernel it launches (plan.Launch.kernel)
    softmax_bwd_rows_kernel,  # noqa: F401  the plan names the kernel it launches (plan.Launch.kernel)
    softmax_fwd_aligned_kernel,  # noqa: F401  the plan names the kernel it launches (plan.Launch.kernel)
    softmax_fwd_rows_kernel,  # noqa: F401  the plan names the kernel it launches (plan.Launch.kernel)
    split_forward,  # noqa: F401  the plan names the kernel it launches (plan.Launch.kernel)
)
from kernels.softmax.table import SOFTMAX
from rooflab.cuda_ext import cuda_skip_reason
from rooflab.kernel import ELEMENT_BYTES, Kernel, differentiable, vjp_keeping_output
from rooflab.shapes import as_shape
from rooflab.triton_utils import check_device

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key

SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
MAX_FUSED_BLOCK = MAX_BLOCK_SIZE  # longest row held by one program, and the online kernels' tile
# The launch tables (table.py), read at each call: tests and the lab swap them.
RELOAD_MIN_COLS = values(SOFTMAX["RELOAD_MIN_COLS"])  # element size -> fewest columns of a row read twice
HELD_MIN_WARPS = values(SOFTMAX["HELD_MIN_WARPS"])  # held rows: element size -> (columns, fewest warps)
UNMASKED_COLS = values(SOFTMAX["UNMASKED_COLS"])  # element size -> (fewest, most) columns without a column mask
SPLIT_BELOW = values(SOFTMAX["SPLIT_BELOW"])  # (rows a SM, columns): fewer, longer rows are split (_softmax_shapes)
SPLIT_CHUNK = values(SOFTMAX["SPLIT_CHUNK"])  # (programs a SM, fewest, most elements a program) of a split row
SPLIT_UNALIGNED = values(SOFTMAX["SPLIT_UNALIGNED"])  # long rows not 16-byte aligned split whatever their number
ALIGNED_TILES = values(SOFTMAX["ALIGNED_TILES"])  # element size -> (tile, warps) of tiled unaligned rows
PACK_ROWS = values(SOFTMAX["PACK_ROWS"])  # (columns, elements): shorter rows packed to about that many a program


@triton.jit
def _softmax_fwd_row_kernel(x_ptr, y_ptr, n_rows, n_cols, stride_xm, stride_xn, stride_ym, stride_yn,
                            BLOCK_N: tl.constexpr, RELOAD: tl.constexpr = False, FULL: tl.constexpr = False):
    row = tl.program_id(axis=0).to(tl.int64)  # int64: row * stride passes 2^31 at 8192^2
    cols = tl.arange(0, BLOCK_N)
    mask = bound_mask(cols, n_cols, FULL)  # FULL: a row exactly BLOCK_N long, no mask
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=-float("inf"),
                eviction_policy="evict_last" if RELOAD else "").to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)  # padding: exp(-inf) = 0
    inv_s = 1.0 / tl.sum(e, axis=0)
    if RELOAD:  # read the row again (from the L2) instead of holding e across the sum: Inductor's shape
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=-float("inf"),
                    eviction_policy="evict_first").to(tl.float32)
        e = tl.exp(x - m)
    y = e * inv_s
    tl.store(y_ptr + row * stride_ym + cols * stride_yn, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_fwd_online_kernel(x_ptr, y_ptr, n_rows, n_cols, stride_xm, stride_xn, stride_ym, stride_yn,
                               BLOCK_N: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * stride_xm
    y_row = y_ptr + row * stride_ym
    # Pass 1: running max m and sum s = sum exp(x - m) (finite_shift: a tile of only -inf makes no NaN)
    m = -float("inf")
    s = 0.0
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        # evict_last: the row is read again in pass 2, from the L2 if it is still there
        x = tl.load(x_row + cols * stride_xn, mask=cols < n_cols, other=-float("inf"),
                    eviction_policy="evict_last").to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        shift = finite_shift(m_new)
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), axis=0)
        m = m_new
    # Pass 2: normalise.
    inv_s = 1.0 / s
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < n_cols
        x = tl.load(x_row + cols * stride_xn, mask=mask, other=-float("inf"),
                    eviction_policy="evict_first").to(tl.float32)
        y = tl.exp(x - m) * inv_s
        tl.store(y_row + cols * stride_yn, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_bwd_row_kernel(y_ptr, dy_ptr, dx_ptr, n_rows, n_cols, stride_ym, stride_yn, stride_dym, stride_dyn,
                            stride_dxm, stride_dxn, BLOCK_N: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    y = tl.load(y_ptr + row * stride_ym + cols * stride_yn, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * stride_dym + cols * stride_dyn, mask=mask, other=0.0).to(tl.float32)
    dot = tl.sum(y * dy, axis=0)
    dx = y * (dy - dot)
    tl.store(dx_ptr + row * stride_dxm + cols * stride_dxn, dx.to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_bwd_tiled_kernel(y_ptr, dy_ptr, dx_ptr, n_rows, n_cols, stride_ym, stride_yn, stride_dym, stride_dyn,
                              stride_dxm, stride_dxn, BLOCK_N: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    y_row = y_ptr + row * stride_ym
    dy_row = dy_ptr + row * stride_dym
    dx_row = dx_ptr + row * stride_dxm
    acc = tl.zeros((BLOCK_N, ), dtype=tl.float32)  # pass 1: dot = sum(y * dy)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < n_cols
        y = tl.load(y_row + cols * stride_yn, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_row + cols * stride_dyn, mask=mask, other=0.0).to(tl.float32)
        acc += y * dy
    dot = tl.sum(acc, axis=0)
    for start in range(0, n_cols, BLOCK_N):  # pass 2: dx = y * (dy - dot)
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < n_cols
        y = tl.load(y_row + cols * stride_yn, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_row + cols * stride_dyn, mask=mask, other=0.0).to(tl.float32)
        tl.store(dx_row + cols * stride_dxn, (y * (dy - dot)).to(dx_ptr.dtype.element_ty), mask=mask)


def _check(name: str, *tensors: torch.Tensor) -> None:
    check_device(*tensors)
    for t in tensors:
        if t.dtype not in SUPPORTED_DTYPES:
            raise TypeError(f"{name} supports float32, bfloat16 and float16, not {t.dtype}")
        if t.dim() != 2:
            raise ValueError(f"{name} needs 2-D tensors (rows x columns), got shape {tuple(t.shape)}")
        if t.shape != tensors[0].shape or t.dtype != tensors[0].dtype:
            raise ValueError(f"{name} needs tensors of one shape and dtype, got {tuple(tensors[0].shape)} "
                             f"{tensors[0].dtype} and {tuple(t.shape)} {t.dtype}")


def _tables() -> plan.Tables:
    """The launch table's values as the module holds them now (tests and the lab swap them)."""
    return plan.Tables(*(globals()[name] for name in plan.Tables._fields))


_FWD_LAUNCHES = LaunchCache("softmax_forward")
_BWD_LAUNCHES = LaunchCache("softmax_backward")


def softmax_forward(x: torch.Tensor, max_block: int = MAX_FUSED_BLOCK, num_warps: int | None = None,
                    reload: bool | None = None, full: bool | None = None, split: int | None = None,
                    aligned: bool | None = None) -> torch.Tensor:
    """Softmax over rows. Check; allocate; launch what kernels/softmax/plan.py plans. Tuning overrides:
    ``num_warps``; ``reload`` (a held row read twice; default RELOAD_MIN_COLS); ``full`` (no column mask; default
    UNMASKED_COLS); ``split`` (elements a program of the split path, 0: none; default split_cols on SPLIT_*, GPU
    only); ``aligned`` (default ALIGNED_TILES). A key seen before launches as its first call did (the launch cache,
    kernels/_shared/fastlaunch.py, keyed on the plan's inputs and the table version)."""
    key = (spec(x), max_block, num_warps, reload, full, split, aligned, tables.VERSION)
    launch = _FWD_LAUNCHES.get(key)
    if launch is not None:
        y = torch.empty_like(x, memory_format=torch.contiguous_format)  # as below, with less argument parsing
        launch(x, y)
        return y
    _check("softmax_forward", x)
    y = torch.empty(tuple(x.shape), dtype=x.dtype, device=x.device)
    if y.numel() == 0:
        return y
    p = plan.forward(tuple(x.shape), x.stride(), x.element_size(), device_sms(x), _tables(), max_block, num_warps,
                     reload, full, split, aligned)
    if p.kernel == "split":
        split_forward(_FWD_LAUNCHES, key, x, y, p.meta["CHUNK"])
    else:
        _FWD_LAUNCHES.launch(key, globals()[p.kernel], p.grid, (x, y, *p.ints), p.meta, n_head=2)
    return y


def softmax_backward(y: torch.Tensor, dy: torch.Tensor, max_block: int = MAX_FUSED_BLOCK,
                     num_warps: int | None = None) -> torch.Tensor:
    """dx = y * (dy - rowsum(dy * y)). Check; allocate; launch what plan.backward plans. ``num_warps``: a tune."""
    key = (spec(y), spec(dy), max_block, num_warps, tables.VERSION)
    launch = _BWD_LAUNCHES.get(key)
    if launch is not None:
        dx = torch.empty_like(y, memory_format=torch.contiguous_format)
        launch(y, dy, dx)
        return dx
    _check("softmax_backward", y, dy)
    dx = torch.empty(tuple(y.shape), dtype=y.dtype, device=y.device)
    if dx.numel() == 0:
        return dx
    p = plan.backward(tuple(y.shape), y.stride(), dy.stride(), y.element_size(), _tables(), max_block, num_warps)
    _BWD_LAUNCHES.launch(key, globals()[p.kernel], p.grid, (y, dy, dx, *p.ints), p.meta, n_head=3)
    return dx


class TritonSoftmax(torch.autograd.Function):
    """Stores y for the backward; the kernels do the work."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, max_block: int = MAX_FUSED_BLOCK) -> torch.Tensor:
        y = softmax_forward(x, max_block)
        ctx.save_for_backward(y)
        ctx.max_block = max_block
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        (y, ) = ctx.saved_tensors
        return softmax_backward(y, dy, ctx.max_block), None


@leading_rows
def softmax_triton(x: torch.Tensor, max_block: int = MAX_FUSED_BLOCK) -> torch.Tensor:
    if needs_grad(x):
        return TritonSoftmax.apply(x, max_block)
    return softmax_forward(x, max_block)


# Hand-written CUDA (softmax.cu): a block a row, three sweeps (max, sum of exp, write; the row read again
# from L1/L2), warp-shuffle then shared-memory reductions; 16-byte vector loads when every row is aligned.
CUDA_SOURCE = cuda_source("softmax")
CPP_SOURCE = """
torch::Tensor softmax_fwd(torch::Tensor x);
torch::Tensor softmax_bwd(torch::Tensor y, torch::Tensor dy);
"""
CUDA_DTYPES = (torch.float32, torch.bfloat16)
_cuda_module = None  # compiled on first use


def _cuda():
    global _cuda_module
    _cuda_module = _cuda_module or build_cuda("softmax", CPP_SOURCE, ["softmax_fwd", "softmax_bwd"])
    return _cuda_module


def _check_cuda(name: str, *tensors: torch.Tensor) -> None:
    for t in tensors:
        if t.device.type != "cuda":
            raise ValueError(f"{name} needs CUDA tensors, got a tensor on {t.device}")
        if t.dtype not in CUDA_DTYPES:
            raise TypeError(f"{name} supports float32 and bfloat16, not {t.dtype}")
        if t.dim() != 2 or not t.is_contiguous():
            raise ValueError(f"{name} needs contiguous 2-D tensors (got shape {tuple(t.shape)}, strides "
                             f"{t.stride()}); call .contiguous() explicitly if a copy is acceptable")


class CudaSoftmax(torch.autograd.Function):

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        _check_cuda("softmax_cuda", x)
        y = _cuda().softmax_fwd(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        (y, ) = ctx.saved_tensors
        _check_cuda("softmax_cuda backward", dy)
        return _cuda().softmax_bwd(y, dy)


def softmax_cuda(x: torch.Tensor) -> torch.Tensor:
    return CudaSoftmax.apply(x)


def softmax_naive_fwd(x: torch.Tensor) -> torch.Tensor:
    """The unfused expression: every line is its own kernel and its own pass over memory."""
    m = x.max(dim=1, keepdim=True).values  # 1 kernel: read N^2, write N
    e = torch.exp(x - m)  # 2 kernels: read N^2 + N, write N^2; read N^2, write N^2
    return e / e.sum(dim=1, keepdim=True)  # 2 kernels: read N^2, write N; read N^2 + N, write N^2


def softmax_naive(x: torch.Tensor, grad_y: torch.Tensor, pass_: str = "fwd") -> torch.Tensor:
    """What torch.compile compiles (and, for fwd, the naive impl; its fwd+bwd cell compiles the fwd). fwd+bwd: (dx,
    y), the naive forward's gradient with grad_y and its output as one joint graph (rooflab.kernel.vjp_keeping_output;
    the lab's compileframes)."""
    if pass_ == "fwd":
        return softmax_naive_fwd(x)
    (dx, ), y = vjp_keeping_output(softmax_naive_fwd, (x, ), grad_y)
    return dx, y


def softmax_builtin(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=1)


def reference(inputs, pass_: str = "fwd") -> torch.Tensor:
    x, grad_y = inputs
    x64 = x.detach().to(torch.float64, copy=True).requires_grad_(pass_ != "fwd")
    y = torch.softmax(x64, dim=1)
    if pass_ == "fwd":
        return y
    y.backward(grad_y.to(torch.float64))
    return x64.grad


GRAD_SEED_OFFSET = 1_000_003  # the upstream gradient's seed, apart from x's


def make_inputs(shape, dtype: torch.dtype, device: str, seed: int = 0):
    """x (requires_grad=False; fwd+bwd factories make their own leaf) and the fixed upstream gradient grad_y."""
    rows, cols = as_shape(shape, "rows")  # an int n: the square n x n
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((rows, cols), generator=g, device=device, dtype=torch.float32).to(dtype)
    g.manual_seed(seed + GRAD_SEED_OFFSET)
    grad_y = torch.randn((rows, cols), generator=g, device=device, dtype=torch.float32).to(dtype)
    return x, grad_y


FWD_FLOPS_PER_ELEMENT = 5  # max, subtract, exp, add (sum), multiply by 1/sum
BWD_FLOPS_PER_ELEMENT = 4  # dy*y, add (dot), subtract, multiply


def flops(shape, pass_: str = "fwd") -> float:
    rows, cols = as_shape(shape, "rows")
    per_element = FWD_FLOPS_PER_ELEMENT + (BWD_FLOPS_PER_ELEMENT if pass_ == "fwd+bwd" else 0)
    return per_element * rows * cols


def bytes_moved(shape, dtype: str, pass_: str = "fwd") -> float:
    rows, cols = as_shape(shape, "rows")
    # The fewest: fwd reads x, writes y (2 elements each); bwd reads y and dy, writes dx (3 more).
    return (2 if pass_ == "fwd" else 5) * rows * cols * ELEMENT_BYTES[dtype]


def skip_reason(impl: str, device: str) -> str | None:
    return cuda_skip_reason(device) if impl == "cuda" else None


KERNEL = Kernel(
    name="softmax", description="softmax over the rows of an N x N matrix, forward and forward+backward",
    make_inputs=make_inputs, reference=reference, flops=flops, bytes=bytes_moved, impls={
        "naive": differentiable(softmax_naive_fwd),
        "builtin": differentiable(softmax_builtin),
        "triton": differentiable(softmax_triton),
        "cuda": differentiable(softmax_cuda),
    }, naive_fn=softmax_naive, passes=("fwd", "fwd+bwd"), skip_reason=skip_reason,
)
