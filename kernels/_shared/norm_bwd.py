"""The backward pass LayerNorm and RMSNorm share, and the autograd Function that calls it (issue 24).

Per row, with x_hat = (x - mean) * rstd (RMSNorm: no mean) and g = weight * dy:
    dx = rstd * (g - x_hat * mean(g * x_hat) - mean(g))      (RMSNorm: without the last term)
    dweight = sum over rows of dy * x_hat,  dbias = sum over rows of dy
The statistics are recomputed from x, so the forward saves nothing but its inputs. dweight and dbias are reduced in
two stages, as Liger-Kernel and the Triton layer-norm tutorial do: each program walks a block of rows (short rows
several at once) with its partial sums in fp32 registers, then one launch sums the programs' partials and casts
them (no atomics: a fixed order, a deterministic result). Rows longer than HELD_MAX_COLS (held, they spill) are
read twice, in column tiles (kernels/_shared/norm_bwd_long.py).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._shared import norm_bwd_aligned as aligned_rows
from kernels._shared import norm_bwd_long as long_rows
from kernels._shared import tables
from kernels._shared.fastlaunch import LaunchCache, spec
from kernels._shared.rows import row_align, row_launch_params
from kernels._shared.tables import track_swaps
from rooflab.kernel import vjp_keeping_output
from rooflab.triton_utils import gdc_launch_dependents, gdc_wait, multiprocessor_count, pdl_ok

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key

# Programs a SM: ELEMENTS_PER_SM // a program's tile, at most PROGRAMS_PER_SM (bf16 4096 x 8192 backward alone: 1
# program a SM 88 us, 2 92, 4 99; 4096 x 4096: 2 45, 4 47, 1 66; 1024^2: 4 12.6, 2 13.4; normbwd_s21.csv)
PROGRAMS_PER_SM, ELEMENTS_PER_SM = 4, 8192
PACK_BELOW, PACK_ELEMENTS = 256, 2048  # rows under 256 columns: a program takes 2048 elements of rows at once
# Rows held whole up to 8192 columns: held rows of 16384 spilled (fp32 2048 x 16384 0.27 of torch, 8192 x 14336
# 0.22) where the tiled path held 1024 x 28672 at 0.96-1.15 (docs/decisions.md, the norms' backward)
HELD_MAX_COLS = 8192
# Long rows: columns a program takes; element sizes whose second launch loads the next row's x and dy while it works
# on this one's (bwd alone, longbwd_s23_d4.csv, tiles of 4096 -> 2048 and the prefetch: RMSNorm bf16 8192 x 14336
# 327 -> 288 us, 1024 x 50257 315 -> 277; LayerNorm 354 -> 322; fp32 prefetched lost, 152 -> 181 at 1024 x 28672)
LONG_TILE, TILE_PREFETCH = 2048, (2, )
# Long rows no multiple of 16 bytes on tiles aligned to 16 bytes (kernels/_shared/norm_bwd_aligned.py; bwd alone,
# aligned_s25_d1.csv: RMSNorm bf16 1024 x 50257 276 -> 237 us, 16 x 333333 45.0 -> 38.6; LayerNorm 286 -> 261)
ALIGNED_LONG = True
HELD_WARPS = None  # num_warps of held rows; None: row_launch_params's for the fp32 tile
# Held rows no multiple of 16 bytes that do not prefetch, of over this many columns: 32 warps (bwd alone, LayerNorm
# 4096 x 4097, normbwd_s25_d4.csv: bf16 16 warps 151 us, 32 103, aligned tiles 106; fp32 161, 109; timed at 4097
# columns only: aligned rows of 5120 lost at 32 warps, so rows of 5000-8191 are the next to time)
UNALIGNED_WIDE_COLS = 4096
# Held rows of (over, at most) bytes load the next rows' x and dy while working on this one's, at most 8 warps
# (bwd alone, normbwd_s22_d1.csv: RMSNorm bf16 4096 x 8192 88 -> 57 us, fp32 8192^2 235 -> 206; LayerNorm bf16
# 8192^2 175 -> 120, fp32 4096^2 91 -> 65; LayerNorm lost on rows of 8 KB, bf16 4096^2 47 -> 52, and of 32 KB)
PREFETCH_ROW_BYTES = ((1024, 32768), (8192, 16384))  # [centre]: RMSNorm's, LayerNorm's (over, at most)
# [centre]: whether rows no multiple of 16 bytes prefetch: RMSNorm's gain, LayerNorm's lose (fwd+bwd bf16 4096 x
# 4097 in the odd preset's rows, docs/archive/reference-h200-calls.md)
PREFETCH_UNALIGNED = (True, False)
PREFETCH_WARPS = 8
# The reduction's tile: up to 8192 fp32 partials a step (32 a thread at 8 warps), at least 64 columns a program
# where there are that many, at most 256 partial rows (a few steps over 528 programs' partials)
REDUCE_TILE, REDUCE_MIN_COLS, REDUCE_MAX_PARTS, REDUCE_WARPS = 8192, 64, 256, 8
# Held rows' backward and its reduction launched as programmatic dependents (rooflab.triton_utils.pdl_ok): each may
# start while the kernel before it ends (lab pdl)
PDL = False


@triton.jit
def _norm_bwd_kernel(x_ptr, w_ptr, dy_ptr, dx_ptr, part_ptr, n_rows, n_cols, eps, ROWS_PER_PROGRAM: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_SIZE: tl.constexpr, CENTRE: tl.constexpr, HAS_BIAS: tl.constexpr,
                     ALIGN: tl.constexpr = 1, PREFETCH: tl.constexpr = False, PDL: tl.constexpr = False):
    if PDL:  # x, w and dy may be the kernel before's: wait for all of it before any load, then let the reduction in
        gdc_wait()
        gdc_launch_dependents()
    # A program walks its ROWS_PER_PROGRAM rows BLOCK_M at a time (short rows packed: one (BLOCK_M, BLOCK_SIZE)
    # tile, reduced along its columns); ALIGN divides n_cols (row_align), so rows start on 16-byte vectors.
    # part[0, program] takes its partial dweight, part[1, program] its partial dbias.
    n_cols = n_cols // ALIGN * ALIGN
    pid = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    col_mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]
    dw = tl.zeros((BLOCK_M, BLOCK_SIZE), dtype=tl.float32)
    db = tl.zeros((BLOCK_M, BLOCK_SIZE), dtype=tl.float32)
    first = pid.to(tl.int64) * ROWS_PER_PROGRAM  # int64: row * n_cols passes 2^31
    if PREFETCH:  # the first rows' x and dy, in their own dtype; each step loads the next while it works
        nxt = first + tl.arange(0, BLOCK_M)
        nxt_mask = ((nxt < n_rows) & (tl.arange(0, BLOCK_M) < ROWS_PER_PROGRAM))[:, None] & col_mask[None, :]
        x_next = tl.load(x_ptr + nxt[:, None] * n_cols + cols[None, :], mask=nxt_mask, other=0.0)
        dy_next = tl.load(dy_ptr + nxt[:, None] * n_cols + cols[None, :], mask=nxt_mask, other=0.0)
    for i in range(0, ROWS_PER_PROGRAM, BLOCK_M):
        local = i + tl.arange(0, BLOCK_M)
        rows = first + local
        row_ok = (rows < n_rows) & (local < ROWS_PER_PROGRAM)
        mask = row_ok[:, None] & col_mask[None, :]
        offsets = rows[:, None] * n_cols + cols[None, :]  # contiguous rows
        if PREFETCH:
            x, dy = x_next.to(tl.float32), dy_next.to(tl.float32)
            nxt_ok = (rows + BLOCK_M < n_rows) & (local + BLOCK_M < ROWS_PER_PROGRAM)
            nxt_mask = nxt_ok[:, None] & col_mask[None, :]
            x_next = tl.load(x_ptr + offsets + BLOCK_M * n_cols, mask=nxt_mask, other=0.0)
            dy_next = tl.load(dy_ptr + offsets + BLOCK_M * n_cols, mask=nxt_mask, other=0.0)
        else:
            x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        if CENTRE:
            x = tl.where(mask, x - (tl.sum(x, axis=1) / n_cols)[:, None], 0.0)
        # 0 on rows past the end: their 1 / sqrt(0 + eps) is inf where eps is 0, and 0 * inf a NaN in dweight
        rstd = tl.where(row_ok, 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / n_cols + eps), 0.0)[:, None]
        x_hat = x * rstd
        g = w * dy
        dx = g - x_hat * (tl.sum(g * x_hat, axis=1) / n_cols)[:, None]
        if CENTRE:
            dx = dx - (tl.sum(g, axis=1) / n_cols)[:, None]
        tl.store(dx_ptr + offsets, (dx * rstd).to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * x_hat
        if HAS_BIAS:
            db += dy
    tl.store(part_ptr + pid.to(tl.int64) * n_cols + cols, tl.sum(dw, axis=0), mask=col_mask)
    if HAS_BIAS:
        db_row = (tl.num_programs(axis=0) + pid).to(tl.int64)
        tl.store(part_ptr + db_row * n_cols + cols, tl.sum(db, axis=0), mask=col_mask)


@triton.jit
def _norm_bwd_reduce_kernel(part_ptr, out_ptr, n_parts, n_cols, out_stride, BLOCK_P: tl.constexpr,
                            BLOCK_N: tl.constexpr, PDL: tl.constexpr = False):
    if PDL:  # the partials are the kernel before's
        gdc_wait()
    # Stage two: columns pid(0) of partial pid(1) (dweight, dbias) summed over its n_parts rows in fp32 and stored
    # in the weight's dtype, row pid(1) of out (rows out_stride apart): one launch where torch took a sum and a cast
    # of each.
    which = tl.program_id(axis=1).to(tl.int64)
    cols = tl.program_id(axis=0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    base = part_ptr + which * n_parts * n_cols
    acc = tl.zeros((BLOCK_P, BLOCK_N), dtype=tl.float32)
    for start in range(0, n_parts, BLOCK_P):
        rows = start + tl.arange(0, BLOCK_P)
        mask = (rows < n_parts)[:, None] & col_mask[None, :]
        acc += tl.load(base + rows.to(tl.int64)[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + which * out_stride + cols, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty), mask=col_mask)


class _Plan:
    """A key's backward as its first call launched it, kept in _LAUNCHES (_shared/fastlaunch.py): its workspaces'
    shapes and its kept launches (``launch(*head)``), so a hit allocates and launches with no Python planning."""
    __slots__ = ("parts", "stats", "out", "launches")

    def __call__(self, x2, weight, dy2):
        dx = torch.empty_like(x2)
        parts = torch.empty(self.parts, dtype=torch.float32, device=x2.device)
        out = torch.empty(self.out, dtype=weight.dtype, device=x2.device)
        if self.stats is None:  # held rows
            self.launches[0](x2, weight, dy2, dx, parts)
        else:  # long rows in column tiles: the tile statistics, then the tiles
            stats = torch.empty(self.stats, dtype=torch.float32, device=x2.device)
            self.launches[0](x2, weight, dy2, stats)
            self.launches[1](x2, weight, dy2, dx, stats, parts)
        self.launches[-1](parts, out)
        return dx, out


def _first_call(key, x2, weight, dy2, eps, centre, has_bias, tile, sms):
    """Plan and launch a key's backward (held rows, several a program where short; or column tiles of ``tile``:
    kernels/_shared/norm_bwd_long.py), then the partial sums' reduction; keep it as a _Plan where every launch was kept.
    Returns (dx, out): out is dweight, or dweight and dbias as its two rows, each on a 16-byte boundary
    (_out_shape)."""
    n_rows, n_cols = x2.shape
    plan, launched, align = _Plan(), [], row_align(x2.element_size(), n_cols)
    dx = torch.empty_like(x2)
    plan.stats, plan.out = None, _out_shape(n_cols, weight.element_size(), has_bias)
    if tile is None:
        block = triton.next_power_of_2(n_cols)
        rows_per_program = triton.cdiv(n_rows,
                                       min(n_rows,
                                           _per_sm(block if n_cols >= PACK_BELOW else PACK_ELEMENTS) * sms))
        n_parts = triton.cdiv(n_rows, rows_per_program)
        block_m = max(1, min(PACK_ELEMENTS // block, triton.next_power_of_2(rows_per_program))) \
            if n_cols < PACK_BELOW else 1
        parts = _parts(plan, has_bias, n_parts, n_cols, x2.device)
        over, most = PREFETCH_ROW_BYTES[centre]
        prefetch = over < n_cols * x2.element_size() <= most and (PREFETCH_UNALIGNED[centre]
                                                                  or align * x2.element_size() == 16)
        warps = HELD_WARPS or (32 if n_cols > UNALIGNED_WIDE_COLS and not prefetch and align * x2.element_size() != 16
                               else row_launch_params(block_m * block, 4)[1])
        launched.append(
            _LAUNCHES.launch(("held", key), _norm_bwd_kernel, (n_parts, ),
                             (x2, weight, dy2, dx, parts, n_rows, n_cols, eps),
                             dict(ROWS_PER_PROGRAM=rows_per_program, BLOCK_M=block_m,
                                  BLOCK_SIZE=block, CENTRE=centre, HAS_BIAS=has_bias, ALIGN=align, PREFETCH=prefetch,
                                  **_pdl(x2), num_warps=min(warps, PREFETCH_WARPS) if prefetch else warps), n_head=5))
    elif ALIGNED_LONG and align * x2.element_size() != 16:
        n_parts, parts = _aligned_tiles(plan, launched, key, x2, weight, dy2, dx, eps, centre, has_bias, tile, sms)
    else:
        n_tiles = triton.cdiv(n_cols, tile)
        warps = row_launch_params(tile, 4)[1]  # the fp32 partial sums set the registers a tile needs
        plan.stats = (n_rows, n_tiles, 4)
        stats = torch.empty(plan.stats, dtype=torch.float32, device=x2.device)
        launched.append(
            _LAUNCHES.launch(("stats", key), long_rows._norm_bwd_tile_stats_kernel, (n_rows * n_tiles, ),
                             (x2, weight, dy2, stats, n_cols, n_tiles),
                             dict(BLOCK_N=tile, CENTRE=centre, ALIGN=align, num_warps=warps), n_head=4))
        rows_per_program = triton.cdiv(n_rows, max(1, min(n_rows, _per_sm(tile) * sms // n_tiles)))
        n_parts = triton.cdiv(n_rows, rows_per_program)
        parts = _parts(plan, has_bias, n_parts, n_cols, x2.device)
        launched.append(
            _LAUNCHES.launch(("tiles", key), long_rows._norm_bwd_tile_apply_kernel, (n_parts * n_tiles, ),
                             (x2, weight, dy2, dx, stats, parts, n_rows, n_cols, n_tiles, eps),
                             dict(ROWS_PER_PROGRAM=rows_per_program, BLOCK_N=tile,
                                  BLOCK_T=triton.next_power_of_2(n_tiles), CENTRE=centre, HAS_BIAS=has_bias,
                                  ALIGN=align, PREFETCH=x2.element_size() in TILE_PREFETCH, num_warps=warps), n_head=6))
    out = torch.empty(plan.out, dtype=weight.dtype, device=x2.device)
    block_p = min(triton.next_power_of_2(n_parts), REDUCE_MAX_PARTS)  # few partials: wide column blocks
    block_n = min(triton.next_power_of_2(n_cols), max(REDUCE_MIN_COLS, REDUCE_TILE // block_p))
    launched.append(
        _LAUNCHES.launch(("reduce", key), _norm_bwd_reduce_kernel, (triton.cdiv(n_cols, block_n), 1 + has_bias),
                         (parts, out, n_parts, n_cols, out.stride(0) if has_bias else 0),
                         dict(BLOCK_P=block_p, BLOCK_N=block_n, num_warps=REDUCE_WARPS, **_pdl(x2)), n_head=2))
    if None not in launched:
        plan.launches = launched
        _LAUNCHES.keep(key, plan)
    return dx, out


def _aligned_tiles(plan, launched, key, x2, weight, dy2, dx, eps, centre, has_bias, tile, sms):
    """Launch the long-row path on 16-byte aligned tiles (_shared/norm_bwd_aligned.py): the tile statistics, then
    the tiles, each program rows of one class; returns the partials' count and their workspace."""
    n_rows, n_cols = x2.shape
    align = 16 // x2.element_size()
    n_tiles, n_classes = triton.cdiv(n_cols + align - 1, tile), aligned_rows.classes(n_cols, align)
    warps = row_launch_params(tile, 4)[1]
    plan.stats = (n_rows, n_tiles, 4)
    stats = torch.empty(plan.stats, dtype=torch.float32, device=x2.device)
    launched.append(
        _LAUNCHES.launch(("aligned stats", key), aligned_rows._norm_bwd_aligned_stats_kernel, (n_rows * n_tiles, ),
                         (x2, weight, dy2, stats, n_cols, n_tiles),
                         dict(BLOCK_N=tile, CENTRE=centre, ALIGN=align, num_warps=warps), n_head=4))
    per_class = triton.cdiv(n_rows, n_classes)
    chunks = min(per_class, triton.cdiv(max(1, _per_sm(tile) * sms // n_tiles), n_classes))
    rows_per_program = triton.cdiv(per_class, chunks)
    n_parts = n_classes * triton.cdiv(per_class, rows_per_program)
    parts = _parts(plan, has_bias, n_parts, n_cols, x2.device)
    launched.append(
        _LAUNCHES.launch(("aligned tiles", key), aligned_rows._norm_bwd_aligned_apply_kernel, (n_parts * n_tiles, ),
                         (x2, weight, dy2, dx, stats, parts, n_rows, n_cols, n_tiles, n_classes, eps),
                         dict(ROWS_PER_PROGRAM=rows_per_program, BLOCK_N=tile, BLOCK_T=triton.next_power_of_2(n_tiles),
                              CENTRE=centre, HAS_BIAS=has_bias, ALIGN=align, num_warps=warps), n_head=6))
    return n_parts, parts


def _pdl(x: torch.Tensor) -> dict:
    """The launch options of a kernel launched as a programmatic dependent where PDL asks and the device can."""
    pdl = PDL and pdl_ok(x.device)
    return {"PDL": True, "launch_pdl": True} if pdl else {}


def _per_sm(tile_elements: int) -> int:
    """Programs a SM for a program's tile of this many elements (ELEMENTS_PER_SM in flight, at most PROGRAMS_PER_SM)."""
    return max(1, min(PROGRAMS_PER_SM, ELEMENTS_PER_SM // tile_elements))


def _out_shape(n_cols: int, element_size: int, has_bias: bool) -> tuple:
    """dweight's shape, or dweight's and dbias's as two rows whose stride rounds n_cols up to 16 bytes, so dbias
    starts aligned as a tensor of its own would."""
    return (2, triton.cdiv(n_cols * element_size, 16) * 16 // element_size) if has_bias else (n_cols, )


def _parts(plan, has_bias, n_parts, n_cols, device):
    """The partial dweight (and dbias after it) of each program: (1 or 2, programs, columns), fp32; its shape is kept
    in plan.parts for the plan's later calls."""
    plan.parts = (1 + has_bias, n_parts, n_cols)
    return torch.empty(plan.parts, dtype=torch.float32, device=device)


_LAUNCHES = LaunchCache("norm_backward")


def norm_backward(x: torch.Tensor, weight: torch.Tensor, dy: torch.Tensor, eps: float, centre: bool, has_bias: bool,
                  tile: int | None = None):
    """(dx, dweight, dbias or None) of LayerNorm (centre) or RMSNorm over the last dimension of x. ``tile``: the
    column tiles of the long-row path (a power of two; by default LONG_TILE for rows over HELD_MAX_COLS). A key seen
    before launches as its first call did (kernels/_shared/fastlaunch.py)."""
    n_cols = x.shape[-1]
    if x.numel() == 0:  # no rows or no columns (reshape(-1, 0) is ambiguous): empty dx, zero parameter gradients
        zeros = torch.zeros_like(weight)
        return torch.empty_like(x), zeros, zeros.clone() if has_bias else None
    x2, dy2, weight_c = x.reshape(-1, n_cols).contiguous(), dy.reshape(-1, n_cols).contiguous(), weight.contiguous()
    key = (spec(x2), spec(weight_c), spec(dy2), eps, centre, has_bias, tile, tables.VERSION)
    plan = _LAUNCHES.get(key)
    if plan is not None:
        dx, out = plan(x2, weight_c, dy2)
    else:
        if tile is None and n_cols > HELD_MAX_COLS:
            tile = LONG_TILE
        if tile is not None and (tile < 16 or tile & (tile - 1)):
            raise ValueError(f"tile must be a power of two of at least 16 columns, got {tile}")
        sms = multiprocessor_count(x.device) if x.is_cuda else 4
        dx, out = _first_call(key, x2, weight_c, dy2, eps, centre, has_bias, tile, sms)
    if has_bias:
        dweight, dbias = (out if out.shape[1] == n_cols else out.narrow(1, 0, n_cols)).unbind(0)
        return dx.reshape(x.shape), dweight, dbias
    return dx.reshape(x.shape), out, None


class TritonNorm(torch.autograd.Function):
    """forward: the kernel's own forward (``fwd``, no statistics saved); backward: norm_backward."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps, fwd, centre):
        ctx.save_for_backward(x, weight)
        ctx.eps, ctx.centre, ctx.has_bias = eps, centre, bias is not None
        return fwd(x, weight, bias, eps) if bias is not None else fwd(x, weight, eps)

    @staticmethod
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        dx, dw, db = norm_backward(x, weight, dy, ctx.eps, ctx.centre, ctx.has_bias)
        return dx, dw, db, None, None, None


# The sweep's side of both norms: inputs are (x, *params, grad_y), params being (weight, bias) or (weight,).
GRAD_SEED_OFFSET = 1_000_003  # the upstream gradient's seed, apart from the inputs'
REFERENCE_CHUNK_ELEMENTS = 1 << 24  # float64 rows reduced at a time for a parameter's gradient at a sampled shape


def upstream_gradient(shape, dtype: torch.dtype, device: str, seed: int) -> torch.Tensor:
    """The fixed, seeded gradient of the output a fwd+bwd cell back-propagates."""
    g = torch.Generator(device=device).manual_seed(seed + GRAD_SEED_OFFSET)
    return torch.randn(shape, generator=g, device=device, dtype=torch.float32).to(dtype)


def norm_naive_fn(naive):
    """What torch.compile compiles: fwd, the naive expression (the fwd+bwd cell's too); fwd+bwd, its gradients with
    grad_y and its output as one joint graph (rooflab.kernel.vjp_keeping_output; the lab's compileframes)."""

    def fn(x, *rest, pass_: str = "fwd"):
        *params, grad_y = rest
        if pass_ == "fwd":
            return naive(x, *params)
        return vjp_keeping_output(naive, (x, *params), grad_y)

    return fn


def _grads64(expr64, x, params, grad_y):
    leaves = [t.detach().to(torch.float64, copy=True).requires_grad_(True) for t in (x, *params)]
    expr64(*leaves).backward(grad_y.to(torch.float64))
    return [t.grad for t in leaves]


def norm_check_rows(inputs, rows):
    """The inputs of the output rows ``rows``: x and grad_y at those rows, the parameters whole, and last the full
    inputs with the rows: a parameter's gradient sums over every row, so the reference reduces them all."""
    x, *params, grad_y = inputs
    return (x[rows], *params, grad_y[rows], (inputs, rows))


def norm_reference(expr64):
    """reference(inputs, pass_): expr64 (the float64 expression) forward, or autograd through it for fwd+bwd:
    (dx, *dparams). On a row sample (norm_check_rows) dx is the sampled rows', each dparam reduced over all rows by
    chunks, then indexed as the check indexes every output (so a sampled shape needs no more rows than columns)."""

    def reference(inputs, pass_: str = "fwd"):
        sample = inputs[-1] if isinstance(inputs[-1], tuple) else None
        x, *params, grad_y = inputs[:-1] if sample else inputs
        if pass_ == "fwd":
            return expr64(*(t.to(torch.float64) for t in (x, *params)))
        grads = _grads64(expr64, x, params, grad_y)
        if sample is None:
            return tuple(grads)
        (full_x, *_, full_dy), rows = sample
        step = max(1, REFERENCE_CHUNK_ELEMENTS // max(1, full_x.shape[-1]))
        dparams = [torch.zeros_like(g) for g in grads[1:]]
        for start in range(0, full_x.shape[0], step):
            part = _grads64(expr64, full_x[start:start + step], params, full_dy[start:start + step])[1:]
            dparams = [d + p for d, p in zip(dparams, part)]
        return (grads[0], *(d[rows] for d in dparams))

    return reference
