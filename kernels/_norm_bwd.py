"""The backward pass LayerNorm and RMSNorm share, and the autograd Function that calls it (issue 24).

Per row, with x_hat = (x - mean) * rstd (RMSNorm: no mean) and g = weight * dy:
    dx = rstd * (g - x_hat * mean(g * x_hat) - mean(g))      (RMSNorm: without the last term)
    dweight = sum over rows of dy * x_hat,  dbias = sum over rows of dy
The statistics are recomputed from x (one more read of a row the backward reads anyway), so the forward saves
nothing but its inputs. dweight and dbias are reduced in two stages, as Liger-Kernel and the Triton layer-norm
tutorial do: each program walks a block of rows and keeps its partial sums in fp32 registers, then torch sums the
programs' partials (no lock, no atomics: the order is fixed, so the result is deterministic).
A row must fit in one block (kernels/_rows.MAX_BLOCK_SIZE columns); longer rows are refused with that limit.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._rows import MAX_BLOCK_SIZE, row_launch_params
from rooflab.triton_utils import multiprocessor_count

PROGRAMS_PER_SM = 4  # partial sums: enough programs to fill the GPU, few enough that stage two is small


@triton.jit
def _norm_bwd_kernel(x_ptr, w_ptr, dy_ptr, dx_ptr, dw_part_ptr, db_part_ptr, n_rows, n_cols, eps,
                     ROWS_PER_PROGRAM: tl.constexpr, BLOCK_SIZE: tl.constexpr, CENTRE: tl.constexpr,
                     HAS_BIAS: tl.constexpr):
    pid = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    db = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    for i in range(ROWS_PER_PROGRAM):
        row = pid * ROWS_PER_PROGRAM + i
        if row < n_rows:
            offset = row.to(tl.int64) * n_cols  # contiguous rows; int64: row * n_cols passes 2^31
            x = tl.load(x_ptr + offset + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + offset + cols, mask=mask, other=0.0).to(tl.float32)
            if CENTRE:
                xc = tl.where(mask, x - tl.sum(x, axis=0) / n_cols, 0.0)
            else:
                xc = x
            rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / n_cols + eps)
            x_hat = xc * rstd
            g = w * dy
            dx = g - x_hat * (tl.sum(g * x_hat, axis=0) / n_cols)
            if CENTRE:
                dx = dx - tl.sum(g, axis=0) / n_cols
            tl.store(dx_ptr + offset + cols, (dx * rstd).to(dx_ptr.dtype.element_ty), mask=mask)
            dw += dy * x_hat
            if HAS_BIAS:
                db += dy
    tl.store(dw_part_ptr + pid * n_cols + cols, dw, mask=mask)
    if HAS_BIAS:
        tl.store(db_part_ptr + pid * n_cols + cols, db, mask=mask)


def norm_backward(x: torch.Tensor, weight: torch.Tensor, dy: torch.Tensor, eps: float, centre: bool,
                  has_bias: bool):
    """(dx, dweight, dbias or None) of LayerNorm (centre) or RMSNorm over the last dimension of x."""
    n_cols = x.shape[-1]
    block = triton.next_power_of_2(max(n_cols, 1))
    if block > MAX_BLOCK_SIZE:
        raise ValueError(f"the norm backward holds a row in one block: rows of at most {MAX_BLOCK_SIZE} columns, "
                         f"got {n_cols}")
    x2, dy2 = x.reshape(-1, n_cols).contiguous(), dy.reshape(-1, n_cols).contiguous()
    n_rows = x2.shape[0]
    dx = torch.empty_like(x2)
    if n_rows == 0 or n_cols == 0:
        zeros = torch.zeros_like(weight)
        return dx.reshape(x.shape), zeros, zeros.clone() if has_bias else None
    sms = multiprocessor_count(x.device) if x.is_cuda else 4
    rows_per_program = triton.cdiv(n_rows, min(n_rows, PROGRAMS_PER_SM * sms))
    programs = triton.cdiv(n_rows, rows_per_program)
    dw_part = torch.empty((programs, n_cols), dtype=torch.float32, device=x.device)
    db_part = torch.empty((programs, n_cols), dtype=torch.float32, device=x.device) if has_bias else dw_part
    _, num_warps = row_launch_params(n_cols, 4)  # the fp32 partial sums set the registers a row needs
    _norm_bwd_kernel[(programs,)](x2, weight.contiguous(), dy2, dx, dw_part, db_part, n_rows, n_cols, eps,
                                  ROWS_PER_PROGRAM=rows_per_program, BLOCK_SIZE=block, CENTRE=centre,
                                  HAS_BIAS=has_bias, num_warps=num_warps)
    dbias = db_part.sum(dim=0).to(weight.dtype) if has_bias else None
    return dx.reshape(x.shape), dw_part.sum(dim=0).to(weight.dtype), dbias


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
    """What torch.compile compiles: fwd, the naive expression; fwd+bwd, its vector-Jacobian product with grad_y
    through torch.func.vjp (a fullgraph compiled function cannot call .backward())."""
    def fn(x, *rest, pass_: str = "fwd"):
        *params, grad_y = rest
        if pass_ == "fwd":
            return naive(x, *params)
        _, vjp = torch.func.vjp(naive, x, *params)
        return vjp(grad_y)

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
