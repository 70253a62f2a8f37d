"""LayerNorm over the last dimension of an N x N input: y = (x - mean) / sqrt(var + eps) * weight + bias.

One program per row (few long rows: several, kernels/_shared/norm_split.py), statistics in fp32. A row that fits in one
block (up to _shared/rows.MAX_BLOCK_SIZE columns, or WIDE_HELD's wider block) is held in registers. A longer row is
walked in tiles twice: for both statistics, by Welford's update in every lane (a running mean and sum of squared
deviations, not E[x^2] - E[x]^2, which cancels badly when |mean| >> std) and one combining reduction at the end, as
torch.compile's LayerNorm does; then to normalise and store. Launch choices: tables in table.py. Passes
"fwd" and "fwd+bwd" (kernels/_shared/norm_bwd.py's backward).

References: Ba, Kiros & Hinton, "Layer Normalization" (2016); Triton tutorial 05-layer-norm; Liger-Kernel's
ops/layer_norm.py.
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
from kernels._shared.norm_split import welford_combine
from kernels._shared.rows import (
    aligned_row,
    bound_mask,
    can_prefetch,
    device_sms,
    l2_prefetch,
    leading_rows,
    needs_grad,
)  # yapf: disable (the import as ruff sorts it)
from kernels._shared.tables import track_swaps, values
from kernels.layernorm import plan
from kernels.layernorm.table import LAYERNORM
from rooflab.kernel import ELEMENT_BYTES, Kernel, differentiable
from rooflab.shapes import as_shape

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key

EPS = 1e-5
# The launch tables (table.py), read at each call: tests and the lab swap them.
TILED_LAUNCH = values(LAYERNORM["TILED_LAUNCH"])  # rows too long to hold: element size -> (tile, warps)
HELD_MIN_WARPS = values(LAYERNORM["HELD_MIN_WARPS"])  # held rows: element size -> (columns, fewest warps)
WB_EARLY_COLS = values(LAYERNORM["WB_EARLY_COLS"])  # held rows loading weight and bias with x: (fewest, most) cols
REGISTER_CAP = values(LAYERNORM["REGISTER_CAP"])  # maxnreg by (element size, columns, warps)
PREFETCH_PROGRAMS = values(LAYERNORM["PREFETCH_PROGRAMS"])  # programs asking the L2 for the weights; 0: off
UNMASKED_COLS = values(LAYERNORM["UNMASKED_COLS"])  # held rows as long as their tile, no column mask
SPLIT_BELOW = values(LAYERNORM["SPLIT_BELOW"])  # (rows a SM, columns): fewer, longer rows are split (_norm_split)
SPLIT_CHUNK = values(LAYERNORM["SPLIT_CHUNK"])  # (programs a SM, fewest, most columns a program) of a split row
SPARSE_BLOCK = values(LAYERNORM["SPARSE_BLOCK"])  # element size -> (fewest, most columns, tile, warps, unaligned)
WIDE_HELD = values(LAYERNORM["WIDE_HELD"])  # rows too long to hold by the heuristic: (most columns, warps) held
ALIGNED_TILES = values(LAYERNORM["ALIGNED_TILES"])  # element size -> (fewest columns, tile, warps): aligned tiles


@triton.jit
def _layernorm_fwd_kernel(
        x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride_xm, stride_xn, stride_w, stride_b, stride_ym, stride_yn, eps,
        BLOCK_SIZE: tl.constexpr,
        ONE_TILE: tl.constexpr,  # the whole row fits in BLOCK_SIZE: read it once, keep it in registers
        WB_EARLY: tl.constexpr = False,  # held row: load weight and bias with x, before the reductions
        WB_PREFETCH: tl.constexpr = False,  # held row: the first programs ask the L2 for weight and bias (GPU only)
        W_LINE: tl.constexpr = 32,  # weight elements per L2 line
        prefetch_programs=0,  # ... how many programs ask
        FULL: tl.constexpr = False,  # held row exactly as long as the tile (n_cols == BLOCK_SIZE): no column mask
        ALIGN: tl.constexpr = 1,  # divides n_cols and the row strides (kernels/_shared/rows.row_align): vector loads
):
    row, x_row, y_row, cols, n_cols = norm_row(x_ptr, y_ptr, n_cols, stride_xm, stride_ym, BLOCK_SIZE, ALIGN)
    if ONE_TILE:
        mask = bound_mask(cols, n_cols, FULL)  # FULL: all-true, so the masks and the selects below drop out
        if WB_PREFETCH:
            lines = tl.arange(0, BLOCK_SIZE // W_LINE).to(tl.int64) * W_LINE
            ask = (lines < n_cols) & (row < prefetch_programs)
            l2_prefetch(w_ptr + lines * stride_w, ask)
            l2_prefetch(b_ptr + lines * stride_b, ask)
        x = tl.load(x_row + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        if WB_EARLY:  # kept in the storage dtype until used: fewer registers across the reductions
            w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0)
            b = tl.load(b_ptr + cols * stride_b, mask=mask, other=0.0)
        mean = tl.sum(x, axis=0) / n_cols
        diff = tl.where(mask, x - mean, 0.0)
        rstd = tl.math.rsqrt(tl.sum(diff * diff, axis=0) / n_cols + eps)
        if not WB_EARLY:
            w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0)
            b = tl.load(b_ptr + cols * stride_b, mask=mask, other=0.0)
        y = diff * rstd * w.to(tl.float32) + b.to(tl.float32)
        tl.store(y_row + cols * stride_yn, y.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        # pass 1: both statistics, a Welford update per lane, then one combining reduction over the lanes
        lane_mean = tl.zeros((BLOCK_SIZE, ), dtype=tl.float32)
        lane_m2 = tl.zeros((BLOCK_SIZE, ), dtype=tl.float32)
        for start in range(0, n_cols, BLOCK_SIZE):
            c = start + cols
            mask = c < n_cols
            # evict_last: the row is read once more, from the L2 if it is still there
            x = tl.load(x_row + c * stride_xn, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            # Every lane this tile updates has seen exactly one value per earlier tile (only the last tile is
            # ragged), so its new count is the tile's number: one scalar reciprocal, no division per element.
            inv_count = 1.0 / (start // BLOCK_SIZE + 1)
            delta = tl.where(mask, x - lane_mean, 0.0)
            lane_mean += delta * inv_count
            lane_m2 += delta * tl.where(mask, x - lane_mean, 0.0)
        # each lane's count: one per full tile, plus one if it falls in the ragged last tile (not a third register
        # tile carried through the loop)
        lane_n = (n_cols // BLOCK_SIZE + (cols < n_cols % BLOCK_SIZE).to(tl.int32)).to(tl.float32)
        mean, m2, _ = tl.reduce((lane_mean, lane_m2, lane_n), 0, welford_combine)
        rstd = tl.math.rsqrt(m2 / n_cols + eps)
        for start in range(0, n_cols, BLOCK_SIZE):  # pass 2: normalise, scale, shift, store
            c = start + cols
            mask = c < n_cols
            x = tl.load(x_row + c * stride_xn, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + c * stride_w, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            b = tl.load(b_ptr + c * stride_b, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            y = (x - mean) * rstd * w + b
            tl.store(y_row + c * stride_yn, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _layernorm_fwd_aligned_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, eps, BLOCK_N: tl.constexpr, ALIGN: tl.constexpr):
    # A row of a contiguous x no multiple of 16 bytes on 16-byte aligned tiles of the flat buffer (RMSNorm's walk:
    # the first and last tiles masked, the inner ones unmasked, so x and y move 16-byte vectors). Both statistics in
    # one pass: each lane sums about its own first value (within its own spread: neither a large mean nor an
    # outlier cancels), then the lanes combine as Welford partials; then normalise, scale, shift, store.
    row_start, row_end, first, n_tiles = aligned_row(tl.program_id(axis=0), n_cols, BLOCK_N, ALIGN)
    lanes = tl.arange(0, BLOCK_N)
    head = first + lanes
    head_in = (head >= row_start) & (head < row_end)
    x0 = tl.load(x_ptr + head, mask=head_in, other=0.0).to(tl.float32)
    tail = first + (n_tiles - 1) * BLOCK_N + lanes
    tail_in = (tail < row_end) & (n_tiles > 1)
    xl = tl.load(x_ptr + tail, mask=tail_in, other=0.0).to(tl.float32)
    shift = tl.where(head_in, x0, xl)  # the lane's first value (tile 1's where there are inner tiles)
    if n_tiles > 2:
        shift = tl.where(head_in, x0, tl.load(x_ptr + first + BLOCK_N + lanes).to(tl.float32))
    d0, dl = tl.where(head_in, x0 - shift, 0.0), tl.where(tail_in, xl - shift, 0.0)
    s1, s2 = d0 + dl, d0 * d0 + dl * dl
    for k in range(1, n_tiles - 1):
        x = tl.load(x_ptr + first + k * BLOCK_N + lanes, eviction_policy="evict_last").to(tl.float32) - shift
        s1, s2 = s1 + x, s2 + x * x
    count = head_in.to(tl.float32) + tail_in.to(tl.float32) + tl.maximum(n_tiles - 2, 0)
    safe = tl.maximum(count, 1.0)
    lane_mean, lane_m2 = shift + s1 / safe, tl.maximum(s2 - s1 * s1 / safe, 0.0)
    mean, m2, _ = tl.reduce((tl.where(count > 0, lane_mean, 0.0), lane_m2, count), 0, welford_combine)
    rstd = tl.math.rsqrt(m2 / n_cols + eps)
    w = tl.load(w_ptr + (head - row_start), mask=head_in, other=0.0).to(tl.float32)  # pass 2: edges masked
    b = tl.load(b_ptr + (head - row_start), mask=head_in, other=0.0).to(tl.float32)
    tl.store(y_ptr + head, ((x0 - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=head_in)
    for k in range(1, n_tiles - 1):
        offs = first + k * BLOCK_N + lanes
        x = tl.load(x_ptr + offs, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(w_ptr + (offs - row_start)).to(tl.float32)
        b = tl.load(b_ptr + (offs - row_start)).to(tl.float32)
        tl.store(y_ptr + offs, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty))
    w = tl.load(w_ptr + (tail - row_start), mask=tail_in, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + (tail - row_start), mask=tail_in, other=0.0).to(tl.float32)
    tl.store(y_ptr + tail, ((xl - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=tail_in)


def launch_params(n_cols: int, element_size: int, block_size: int | None = None) -> tuple[int, int]:
    """(BLOCK_SIZE, num_warps) for rows of n_cols elements: plan.launch_params on this module's tables."""
    return plan.launch_params(n_cols, element_size, _tables(), block_size)


def launch_options(n_cols: int, element_size: int, block_size: int, num_warps: int, prefetch: bool = False) -> dict:
    """The kernel's launch options for a launch of block_size and num_warps: plan.launch_options on this module's
    tables."""
    return plan.launch_options(n_cols, element_size, block_size, num_warps, _tables(), prefetch)


def _tables() -> plan.Tables:
    """The launch table's values as the module holds them now (tests and the lab swap them)."""
    return plan.Tables(*(globals()[name] for name in plan.Tables._fields))


_LAUNCHES = LaunchCache("layernorm")


@leading_rows
def _layernorm_forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = EPS,
                       block_size: int | None = None, num_warps: int | None = None,
                       split: int | None = None) -> torch.Tensor:
    """Check the inputs; allocate y; launch what kernels/layernorm/plan.py plans. Any strides of x, weight and bias are
    honoured (``x.t()``, ``x[:, ::2]``) without a copy. ``block_size`` and ``num_warps`` override the shared
    heuristic (kernels/_shared/rows.py), TILED_LAUNCH and SPARSE_BLOCK, e.g. to test the tiled path on short rows.
    Held rows take at least HELD_MIN_WARPS warps; launch_options adds the early weights, their L2 prefetch, the
    column mask and a register cap (a held row read again from the L2, as RMSNorm's, was slower). ``split``: columns
    a program of the split path takes (kernels/_shared/norm_split.py), 0: one program a row, None: split_cols's
    choice (GPU only). A key seen before launches as its first call did (kernels/_shared/fastlaunch.py)."""
    key = (spec(x), spec(weight), spec(bias), eps, block_size, num_warps, split, tables.VERSION)
    launch = _LAUNCHES.get(key)
    if launch is not None:
        y = torch.empty_like(x, memory_format=torch.contiguous_format)  # as below, with less argument parsing
        launch(x, weight, bias, y)
        return y
    return norm_forward(
        _LAUNCHES, key, globals(), "layernorm_triton", x, weight, bias, eps, lambda n_rows, n_cols: (plan.forward(
            (n_rows, n_cols), x.stride(), weight.stride(0), bias.stride(0), x.element_size(), device_sms(x),
            can_prefetch(x), _tables(), block_size, num_warps, split)))


def layernorm_triton(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = EPS,
                     **launch) -> torch.Tensor:
    """LayerNorm over the last dimension, differentiable: where autograd records (an input requires grad), the
    backward is kernels/_shared/norm_bwd.py's; ``launch`` (block_size, num_warps) goes to the forward."""
    if needs_grad(x, weight, bias):
        return TritonNorm.apply(x, weight, bias, eps, _layernorm_forward, True)
    return _layernorm_forward(x, weight, bias, eps, **launch)


def layernorm_naive(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """The unfused expression: every line is its own kernel (or several) and its own pass over memory."""
    mean = x.mean(dim=-1, keepdim=True)  # read N^2, write N
    xc = x - mean  # read N^2 + N, write N^2
    var = (xc * xc).mean(dim=-1, keepdim=True)  # 2 kernels: read N^2 write N^2; read N^2 write N
    rstd = torch.rsqrt(var + eps)  # 2 kernels: read N write N each
    return xc * rstd * weight + bias  # 3 kernels: read N^2 + N, write N^2 each


def layernorm_builtin(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1], ), weight, bias, eps)


def layernorm64(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """The float64 reference expression (its inputs float64), differentiable for the fwd+bwd check."""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean)**2).mean(dim=-1, keepdim=True)  # biased variance, as LayerNorm uses
    return (x - mean) / torch.sqrt(var + EPS) * weight + bias


reference = norm_reference(layernorm64)  # (inputs, pass_): y, or (dx, dweight, dbias) by autograd in float64


def make_inputs(shape, dtype: torch.dtype, device: str, seed: int = 0):
    """x, weight, bias and the fixed upstream gradient grad_y (fwd+bwd factories make their own leaves)."""
    rows, cols = as_shape(shape, "rows")  # an int n: the square n x n
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((rows, cols), generator=g, device=device, dtype=torch.float32)
    weight = 1.0 + 0.1 * torch.randn((cols, ), generator=g, device=device, dtype=torch.float32)  # near 1, as trained
    bias = 0.1 * torch.randn((cols, ), generator=g, device=device, dtype=torch.float32)
    return x.to(dtype), weight.to(dtype), bias.to(dtype), upstream_gradient((rows, cols), dtype, device, seed)


# Forward, per element: sum for the mean, x - mean, square, sum for the variance, * rstd, * weight, + bias.
# Backward from the statistics, per element: x_hat (2), g = weight * dy, g * x_hat and its sum (2), sum of g,
# dx = rstd * (g - x_hat * a - b) (4), dweight += dy * x_hat (2), dbias += dy. Per-row O(N) work is left out.
FWD_FLOPS_PER_ELEMENT = 7
BWD_FLOPS_PER_ELEMENT = 13


def flops(shape, pass_: str = "fwd") -> float:
    rows, cols = as_shape(shape, "rows")
    return (FWD_FLOPS_PER_ELEMENT + (BWD_FLOPS_PER_ELEMENT if pass_ == "fwd+bwd" else 0)) * rows * cols


def bytes_moved(shape, dtype: str, pass_: str = "fwd") -> float:
    """The fewest: fwd reads x, weight, bias and writes y; bwd reads x (statistics recomputed or saved: 2 per row,
    left out), weight and dy and writes dx, dweight and dbias. Our backward's fp32 partial sums stay out."""
    rows, cols = as_shape(shape, "rows")
    fwd = 2 * rows * cols + 2 * cols
    bwd = 3 * rows * cols + 3 * cols
    return (fwd + (bwd if pass_ == "fwd+bwd" else 0)) * ELEMENT_BYTES[dtype]


KERNEL = Kernel(
    name="layernorm",
    description="LayerNorm over the last dim of N x N, with weight and bias, fp32 statistics, forward and "
    "forward+backward", make_inputs=make_inputs, reference=reference, flops=flops, bytes=bytes_moved, impls={
        "naive": differentiable(layernorm_naive),
        "builtin": differentiable(layernorm_builtin),
        "triton": differentiable(layernorm_triton)
    }, naive_fn=norm_naive_fn(layernorm_naive), dtypes=("float32", "bfloat16", "float16"), check_rows=norm_check_rows,
    passes=("fwd", "fwd+bwd"),
)
