"""Split-K for skinny matrix products (kernels/matmul/plan.py decides when): each program sums one slice of K for one
output tile into an fp32 workspace (split, M, N); a second kernel adds the slices in a fixed order, applies the
epilogue (ReLU after the whole sum, never per slice) and stores C in its dtype. Two launches in stream order, no
atomics: the result is deterministic. Reference: Triton tutorial 03-matrix-multiplication (the tile loop).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from rooflab.triton_utils import interpreting

REDUCE_BLOCK = 1024  # elements of C a reduce program adds up (4 warps: 8 a thread)


@triton.jit
def _matmul_splitk_kernel(a_ptr, b_ptr, ws_ptr, M, N, K,
                          K_PER_SPLIT,  # K_PER_SPLIT: a multiple of BLOCK_K; slice s sums k in [s * K_PER_SPLIT, ...)
                          stride_am, stride_ak, stride_bk, stride_bn, DOT_IN_FP32: tl.constexpr,
                          INPUT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr,
                          ):
    # Row tiles fastest: the programs of one column of tiles (and one slice) read the same B tile close in time.
    pid = tl.program_id(axis=0)
    pid_k = tl.program_id(axis=1)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    pid_m = pid % num_pid_m
    pid_n = pid // num_pid_m
    k_start = pid_k * K_PER_SPLIT  # int32, as K: the loop's bound stays int32 (the pipeliner's usual loop)
    k_len = tl.minimum(K - k_start, K_PER_SPLIT)

    offs_m = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    offs_ks = k_start.to(tl.int64) + offs_k  # this slice's first K tile; int64: k * stride reaches K * M
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_ks[None, :] * stride_ak  # (BLOCK_M, BLOCK_K)
    b_ptrs = b_ptr + offs_ks[:, None] * stride_bk + offs_n[None, :] * stride_bn  # (BLOCK_K, BLOCK_N)
    mask_m = offs_m < M
    mask_n = offs_n < N

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(k_len, BLOCK_K)):
        k_left = k_len - k * BLOCK_K
        a = tl.load(a_ptrs, mask=mask_m[:, None] & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & mask_n[None, :], other=0.0)
        if DOT_IN_FP32:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    ws_ptrs = ws_ptr + pid_k.to(tl.int64) * M * N + offs_m[:, None] * N + offs_n[None, :]  # this slice's (M, N)
    tl.store(ws_ptrs, acc, mask=mask_m[:, None] & mask_n[None, :])


@triton.jit
def _splitk_reduce_kernel(ws_ptr, c_ptr, MN, SPLIT, ACTIVATION: tl.constexpr, BLOCK: tl.constexpr):
    # C (contiguous, M x N) = activation(sum of the SPLIT fp32 slices), slice 0 first: the same order every call.
    offs = tl.program_id(axis=0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    ptrs = ws_ptr + offs
    acc = tl.load(ptrs, mask=mask, other=0.0)
    for _ in range(1, SPLIT):
        ptrs += MN
        acc += tl.load(ptrs, mask=mask, other=0.0)
    if ACTIVATION == "relu":
        acc = tl.maximum(acc, 0.0, propagate_nan=tl.PropagateNan.ALL)  # relu(NaN) = NaN, as torch.relu's
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


class SplitKLaunch:
    """A split product's two kept launches as one (kernels/_shared/fastlaunch.py), called with (a, b, c): the
    workspace is allocated fresh each call, as the first call's was."""
    __slots__ = ("first", "second", "workspace", "extra")

    def __call__(self, a, b, c):
        ws = torch.empty(self.workspace, dtype=torch.float32, device=a.device)
        self.first(a, b, ws)
        self.second(ws, c)


def launch_splitk(cache, key, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, activation: str, precision: str,
                  p) -> None:
    """C = activation(A @ B) on ``p`` (plan.SplitK) through ``cache`` (a LaunchCache), both launches kept under
    ``key`` as one SplitKLaunch (key None: nothing kept). C must be contiguous."""
    (m, k), n = a.shape, b.shape[1]
    meta = dict(p.meta)
    options = {name: meta.pop(name) for name in ("num_warps", "num_stages")}
    workspace = (p.split, m, n)
    ws = torch.empty(workspace, dtype=torch.float32, device=a.device)
    first = cache.launch(None if key is None else ("splitk", 1, key), _matmul_splitk_kernel, (p.tiles, p.split),
                         (a, b, ws, m, n, k, p.k_per_split, a.stride(0), a.stride(1), b.stride(0), b.stride(1)),
                         dict(DOT_IN_FP32=interpreting(), INPUT_PRECISION=precision, **meta, **options), n_head=3)
    second = cache.launch(None if key is None else ("splitk", 2, key), _splitk_reduce_kernel,
                          (triton.cdiv(m * n, REDUCE_BLOCK), ), (ws, c, m * n, p.split),
                          dict(ACTIVATION=activation, BLOCK=REDUCE_BLOCK, num_warps=4), n_head=2)
    if first is not None and second is not None:
        kept = SplitKLaunch()
        kept.first, kept.second, kept.workspace, kept.extra = first, second, workspace, None
        cache.keep(key, kept)
