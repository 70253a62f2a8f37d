"""LayerNorm forward over the last dimension of an N x N input: y = (x - mean) / sqrt(var + eps) * weight + bias.

The whole story of the kernel: the fused Triton kernel (one program per row, statistics in fp32), its launch wrapper,
the naive PyTorch expression (mean, centre, variance, scale: each its own pass over memory), the builtin
(F.layer_norm), the float64 reference, and the FLOP/byte model that the analysis uses.

A row that fits in one block (up to kernels/_rows.MAX_BLOCK_SIZE columns) is read once and kept in registers; a
longer row is walked in tiles twice: once for both statistics, by Welford's update in every lane of the tile
(a running mean and sum of squared deviations, not E[x^2] - E[x]^2, which cancels badly when |mean| >> std) and
one combining reduction at the end (torch.compile's LayerNorm does the same), and once more to normalise and store.

References: Ba, Kiros & Hinton, "Layer Normalization" (2016); Triton tutorial 05-layer-norm; Liger-Kernel's
ops/layer_norm.py.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels._rows import (L2_LINE_BYTES, bound_mask, can_prefetch, held_min_warps, l2_prefetch, names_row,
                           row_launch_params, unmasked)
from rooflab.kernel import ELEMENT_BYTES, Kernel, eager
from rooflab.triton_utils import check_device

EPS = 1e-5
# Rows too long to hold walk tiles; by element size, (tile, num_warps) where the shared heuristic's tile is not the
# best. 16-bit rows: 4096 x 8 warps. H200, 2048 x 32768 / 1024 x 65536 bf16
# (data/reference/h200/tune_v7_layernorm_long_rows.csv): 93.5 / 103.8 us, against 169 / 149 with the heuristic's
# 16384 x 16 (128 registers and a spilled stack) and 106.9 / 116.6 before (three reads).
# fp32 keeps the heuristic's 16384 x 16: 190-192 / 185.5 us (before: 208 / 222).
TILED_LAUNCH = {2: (4096, 8)}
# Held rows (one tile) of at least this many columns take at least this many warps, by element size, where the shared
# heuristic gives fewer: fp32 rows of 2048 get 4 warps from it (16 values a thread). H200, 2048^2 fp32, 8 starts per
# variant (data/reference/h200/tune_v12_small_rows_fp32.csv): 12.19 us with 8 warps against 13.25-14.18 with 4 (five
# readings) and torch.compile's 12.32; at 1024 columns 8 warps are slower (7.20 against 6.27-6.59 us). Keyed on the
# row's columns, not its tile: rows of 1025-2047 (the sweep's 1793) hold a 2048 tile too but were not measured with
# 8 warps, and keep 4 (at 1793 ahead of torch.compile with them: 14.40 against 15.07 us in S11).
# 16-bit rows of 4096 take 8 warps too: 19.78 us against 20.32-20.96 with the heuristic's 4 in the first reading
# (bf16 4096^2, data/reference/h200/tune_v13_lnchain.csv), a tie in the second (20.38-20.45 against 20.30-21.02,
# tune_v13_lnconfirm.csv): no gain is claimed; kept because the reference (S12, S13) was measured with it.
HELD_MIN_WARPS = {4: (2048, 8), 2: (4096, 8)}
# Held rows of (fewest, most) columns, by element size, load the weight and bias together with the row, before
# the two reductions, so a row's chain ends at its store instead of waiting on one more L2 round trip after them
# (docs/performance.md, round 31). It costs registers (fp32 rows of 8192 at 16 warps: 64 instead of 40, two rows per
# SM instead of three) and pays where the rows are long. H200, 4 starts, three readings each, interleaved
# (tune_v13_lnconfirm.csv): fp32 8192^2 127.1-127.7 us against 129.8-130.3; 4096^2 33.3-33.5 against 34.7-35.0.
# 16-bit rows lose (round 11; bf16 8192^2 at 8 warps: 80 registers, 70.4 against 67.0 us, tune_v13_lnchain.csv).
# fp32 rows of 8193-16384 (a 16384 tile) were not measured with it, and load the weights late.
WB_EARLY_COLS = {4: (4096, 8192)}
# ptxas register caps (the launch option maxnreg) by (element size, columns, warps): bf16 rows of 8192 at 8 warps
# keep four rows per SM either way (64 registers), but ptxas schedules them differently under the cap: 65.6-66.3 us
# against 66.8-67.1 uncapped (tune_v13_lnconfirm.csv, three readings each). Keyed on the row's columns (rows of
# 4097-8191 share the tile but were not measured); measured in bf16, fp16 rows have the same registers and take it.
REGISTER_CAP = {(2, 8192, 8): 64}
# Held rows that load their weights after the reductions (not WB_EARLY): the first PREFETCH_PROGRAMS programs ask
# the L2 for the weight's and bias's lines (kernels/_rows.l2_prefetch), so the first wave's loads of them hit the L2
# instead of waiting behind every row in flight: inside one call LayerNorm's first programs finished 3.3-3.6 us
# after the kernel began, row-sum's 0.8-1.3 us (docs/performance.md, round 32). H200, bf16 8192^2, 4 starts, three
# readings (data/reference/h200/tune_v14_wbprefetch_timeline.csv): 65.65-65.76 us against 65.70-66.13 without it,
# and 0.8-1.0 us off the kernel's own span in each of five paired timelines; a tie at 4096 and at 2048 fp32. Each
# asking program pays several microseconds for its requests (the first 528 asking: 71.0-71.3 us; every program:
# 156.6-157.1 us), so one asks. 0: off.
PREFETCH_PROGRAMS = 1
# Held rows of (fewest, most) columns, by element size, that are exactly as long as their tile skip the column mask
# (the kernel's FULL: a constant all-true mask, which the compiler folds away with the selects it guards). H200,
# 4 starts, three readings each, interleaved, in two calls (data/reference/h200/tune_v15_onerow_lnfull.csv): fp32
# 2048^2 11.74-12.26 and 11.49-11.94 us against 12.32-12.54 and 11.81-12.58 masked; 4096^2 33.12-33.31 against
# 33.44-33.60 in the first call but 33.66-34.02 against 33.38-33.82 in the second (a tie; kept because the reference,
# S17, was measured with it); fp32 8192^2 128.5-129.3 against 127.4-127.8, and bf16 a tie at 4096 and 8192 (536 ->
# 464 instructions for a bf16 row of 8192, no faster). bf16 2048 was faster in the one call that measured it
# (8.58-8.78 against 8.90-8.93 us), not adopted on one reading. So only fp32 rows of 2048-4096 take it
# (docs/performance.md, round 33).
UNMASKED_COLS = {4: (2048, 4096)}
SUPPORTED = (torch.float32, torch.bfloat16, torch.float16)
# Per element: sum for the mean, x - mean, square, sum for the variance, * rstd, * weight, + bias. The per-row
# divisions and rsqrt (O(N) in all) are left out.
FLOPS_PER_ELEMENT = 7


@triton.jit
def _welford_combine(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    """Merge two (mean, sum of squared deviations, count) partials (Chan et al.); empty partials add nothing."""
    n = n_a + n_b
    w_b = tl.where(n == 0, 0.0, n_b / tl.where(n == 0, 1.0, n))
    delta = mean_b - mean_a
    return mean_a + delta * w_b, m2_a + m2_b + delta * delta * n_a * w_b, n


@triton.jit
def _layernorm_fwd_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    n_cols,
    stride_xm, stride_xn, stride_w, stride_b, stride_ym, stride_yn,
    eps,
    BLOCK_SIZE: tl.constexpr,
    ONE_TILE: tl.constexpr,  # the whole row fits in BLOCK_SIZE: read it once, keep it in registers
    WB_EARLY: tl.constexpr = False,  # held row: load weight and bias with x, before the reductions
    WB_PREFETCH: tl.constexpr = False,  # held row: the first programs ask the L2 for weight and bias (GPU only)
    W_LINE: tl.constexpr = 32,  # weight elements per L2 line
    prefetch_programs=0,  # ... how many programs ask
    FULL: tl.constexpr = False,  # held row exactly as long as the tile (n_cols == BLOCK_SIZE): no column mask
):
    row = tl.program_id(axis=0).to(tl.int64)  # int64: row * stride_xm passes 2^31 for large inputs
    x_row = x_ptr + row * stride_xm
    y_row = y_ptr + row * stride_ym
    cols = tl.arange(0, BLOCK_SIZE).to(tl.int64)  # int64: cols * stride_xn is large for a transposed x
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
        lane_mean = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
        lane_m2 = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
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
        mean, m2, _ = tl.reduce((lane_mean, lane_m2, lane_n), 0, _welford_combine)
        rstd = tl.math.rsqrt(m2 / n_cols + eps)
        for start in range(0, n_cols, BLOCK_SIZE):  # pass 2: normalise, scale, shift, store
            c = start + cols
            mask = c < n_cols
            x = tl.load(x_row + c * stride_xn, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + c * stride_w, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            b = tl.load(b_ptr + c * stride_b, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            y = (x - mean) * rstd * w + b
            tl.store(y_row + c * stride_yn, y.to(y_ptr.dtype.element_ty), mask=mask)


def launch_params(n_cols: int, element_size: int, block_size: int | None = None) -> tuple[int, int]:
    """(BLOCK_SIZE, num_warps) for rows of n_cols elements: the shared row heuristic (kernels/_rows.py), TILED_LAUNCH
    for rows too long to hold (unless a block_size is asked for), and HELD_MIN_WARPS for held rows."""
    auto_block, warps = row_launch_params(n_cols, element_size)
    if auto_block < n_cols and block_size is None:  # too long to hold, and no tile asked for: the tiled loop's table
        auto_block, warps = TILED_LAUNCH.get(element_size, (auto_block, warps))
    block_size = block_size or auto_block
    if block_size & (block_size - 1):
        raise ValueError(f"block_size must be a power of two, got {block_size}")
    if block_size >= n_cols:  # held in one tile
        warps = held_min_warps(HELD_MIN_WARPS, n_cols, element_size, warps)
    return block_size, warps


def launch_options(n_cols: int, element_size: int, block_size: int, num_warps: int, prefetch: bool = False) -> dict:
    """The kernel's WB_EARLY, WB_PREFETCH (with prefetch_programs), FULL and, where REGISTER_CAP names the launch,
    ptxas's maxnreg, for a launch of block_size and num_warps over rows of n_cols elements: WB_EARLY_COLS for held
    rows, the weights prefetched (PREFETCH_PROGRAMS) where a held row loads them late and ``prefetch`` says the
    device can (kernels/_rows.can_prefetch), no column mask for the rows UNMASKED_COLS names that are as long as
    their tile; nothing for tiled rows."""
    held = block_size >= n_cols
    early = held and names_row(WB_EARLY_COLS, n_cols, element_size)
    fetch = held and not early and PREFETCH_PROGRAMS > 0 and prefetch
    options = {"WB_EARLY": early, "WB_PREFETCH": fetch, "W_LINE": min(L2_LINE_BYTES // element_size, block_size),
               "prefetch_programs": PREFETCH_PROGRAMS if fetch else 0,
               "FULL": unmasked(UNMASKED_COLS, None, n_cols, element_size, whole_tiles=n_cols == block_size)}
    cap = REGISTER_CAP.get((element_size, n_cols, num_warps)) if held else None
    return options | ({"maxnreg": cap} if cap else {})


def layernorm_triton(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = EPS,
                     block_size: int | None = None, num_warps: int | None = None) -> torch.Tensor:
    """Check the inputs; allocate y; launch one program per row.

    Any strides of x, weight and bias are honoured (``x.t()``, ``x[:, ::2]``) without a copy. ``block_size`` and
    ``num_warps`` override the shared heuristic (kernels/_rows.py) and TILED_LAUNCH, e.g. to test the tiled path on
    short rows. Held rows take at least HELD_MIN_WARPS warps; launch_options adds the early weights, their L2
    prefetch and a register cap.
    A one-tile row stays in registers: reading it again from the L2 (RMSNorm's reload) was slower here, in both
    the three-read and the one-shifted-reduction form (docs/performance.md, rounds 15 and 18).
    """
    check_device(x, weight, bias)
    if x.dim() != 2:
        raise ValueError(f"layernorm_triton needs a 2-D input (rows, cols), got shape {tuple(x.shape)}")
    if x.dtype not in SUPPORTED:
        raise TypeError(f"layernorm_triton supports float32, bfloat16 and float16, not {x.dtype}")
    if weight.dtype != x.dtype or bias.dtype != x.dtype:
        raise TypeError(f"weight ({weight.dtype}) and bias ({bias.dtype}) must have x's dtype ({x.dtype})")
    n_rows, n_cols = x.shape
    for name, t in (("weight", weight), ("bias", bias)):
        if tuple(t.shape) != (n_cols,):
            raise ValueError(f"{name} must have shape ({n_cols},) to match x's last dimension, got {tuple(t.shape)}")
    y = torch.empty((n_rows, n_cols), device=x.device, dtype=x.dtype)  # (rows, cols), contiguous
    if y.numel() == 0:
        return y
    block_size, auto_warps = launch_params(n_cols, x.element_size(), block_size)
    num_warps = num_warps or auto_warps
    grid = lambda META: (n_rows,)  # noqa: E731  one program per row
    _layernorm_fwd_kernel[grid](
        x, weight, bias, y, n_cols,
        x.stride(0), x.stride(1), weight.stride(0), bias.stride(0), y.stride(0), y.stride(1),
        eps, BLOCK_SIZE=block_size, ONE_TILE=block_size >= n_cols, num_warps=num_warps,
        **launch_options(n_cols, x.element_size(), block_size, num_warps, can_prefetch(x)),
    )
    return y


def layernorm_naive(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """The unfused expression: every line is its own kernel (or several) and its own pass over memory."""
    mean = x.mean(dim=-1, keepdim=True)  # read N^2, write N
    xc = x - mean  # read N^2 + N, write N^2
    var = (xc * xc).mean(dim=-1, keepdim=True)  # 2 kernels: read N^2 write N^2; read N^2 write N
    rstd = torch.rsqrt(var + eps)  # 2 kernels: read N write N each
    return xc * rstd * weight + bias  # 3 kernels: read N^2 + N, write N^2 each


def layernorm_builtin(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def reference(inputs) -> torch.Tensor:
    x, weight, bias = (t.to(torch.float64) for t in inputs)
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased variance, as LayerNorm uses
    return (x - mean) / torch.sqrt(var + EPS) * weight + bias


def make_inputs(n: int, dtype: torch.dtype, device: str, seed: int = 0):
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((n, n), generator=g, device=device, dtype=torch.float32)
    weight = 1.0 + 0.1 * torch.randn((n,), generator=g, device=device, dtype=torch.float32)  # near 1, as trained
    bias = 0.1 * torch.randn((n,), generator=g, device=device, dtype=torch.float32)
    return x.to(dtype), weight.to(dtype), bias.to(dtype)


def flops(n: int) -> float:
    return FLOPS_PER_ELEMENT * n * n


def bytes_moved(n: int, dtype: str) -> float:
    return (2 * n * n + 2 * n) * ELEMENT_BYTES[dtype]  # the fewest: read x, write y, read weight and bias once


KERNEL = Kernel(
    name="layernorm",
    description="LayerNorm forward over the last dim of N x N, with weight and bias, fp32 statistics",
    make_inputs=make_inputs,
    reference=reference,
    flops=flops,
    bytes=bytes_moved,
    impls=eager(naive=layernorm_naive, builtin=layernorm_builtin, triton=layernorm_triton),
    naive_fn=layernorm_naive,
    dtypes=("float32", "bfloat16", "float16"),
)
