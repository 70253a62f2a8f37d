"""Split-K for skinny matrix products (kernels/matmul/plan.py decides when): each program sums one slice of K for one
output tile into an fp32 workspace (split, M, N) and counts itself in on the tile; the tile's last slice to finish
adds every slice in a fixed order (slice 0 first: deterministic), applies the epilogue (ReLU after the whole sum,
never per slice) and stores C in its dtype. One launch, no second reducing one: 3-5 us less a call in the Python
loop (data/tuning/h100_matmul_splitk_launches.csv). The counts (kernels/_shared/counts.py) stay zero between
launches. References: Triton tutorial 03-matrix-multiplication (the tile loop), CUDA's threadFenceReduction sample.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._shared.counts import counts_for
from rooflab.triton_utils import interpreting


@triton.jit
def _matmul_splitk_kernel(a_ptr, b_ptr, ws_ptr, c_ptr, counts_ptr, M, N, K,
                          K_PER_SPLIT,  # K_PER_SPLIT: a multiple of BLOCK_K; slice s sums k in [s * K_PER_SPLIT, ...)
                          SPLIT, stride_am, stride_ak, stride_bk, stride_bn, ACTIVATION: tl.constexpr,
                          DOT_IN_FP32: tl.constexpr, INPUT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr,
                          BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
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
    step_a = tl.cast(stride_ak, tl.int64) * BLOCK_K  # int64 steps: BLOCK_K * stride passes 2^31 first
    step_b = tl.cast(stride_bk, tl.int64) * BLOCK_K
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
        a_ptrs += step_a
        b_ptrs += step_b

    mn = tl.cast(M, tl.int64) * N  # a slice of the workspace (C: the same offsets); M may be a constexpr 1
    tile = offs_m[:, None] * N + offs_n[None, :]
    mask = mask_m[:, None] & mask_n[None, :]
    tl.store(ws_ptr + pid_k * mn + tile, acc, mask=mask)
    tl.debug_barrier()  # every thread's partial sums stored before the count (acq_rel, one thread) publishes them
    if tl.atomic_add(counts_ptr + pid, 1, sem="acq_rel", scope="gpu") == SPLIT - 1:  # the tile's last slice
        total = tl.load(ws_ptr + tile, mask=mask, other=0.0, cache_modifier=".cg")  # .cg: L2, never a stale L1
        for s in range(1, SPLIT):
            total += tl.load(ws_ptr + s * mn + tile, mask=mask, other=0.0, cache_modifier=".cg")
        if ACTIVATION == "relu":
            total = tl.maximum(total, 0.0, propagate_nan=tl.PropagateNan.ALL)  # relu(NaN) = NaN, as torch.relu's
        tl.store(c_ptr + tile, total.to(c_ptr.dtype.element_ty), mask=mask)
        tl.store(counts_ptr + pid, 0)  # zero for the stream's next split launch


class SplitKLaunch:
    """A split product's kept launch (kernels/_shared/fastlaunch.py), called with (a, b, c): a fresh workspace each
    call, as the first call's was, and the stream's counts."""
    __slots__ = ("launch", "workspace", "tiles", "extra")

    def __call__(self, a, b, c):
        ws = torch.empty(self.workspace, dtype=torch.float32, device=a.device)
        self.launch(a, b, ws, c, counts_for(a.device, self.tiles))


def launch_splitk(cache, key, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, activation: str, precision: str,
                  p) -> None:
    """C = activation(A @ B) on ``p`` (plan.SplitK) through ``cache`` (a LaunchCache), the launch kept under ``key``
    as a SplitKLaunch (key None: nothing kept). C must be contiguous."""
    (m, k), n = a.shape, b.shape[1]
    meta = dict(p.meta)
    options = {name: meta.pop(name) for name in ("num_warps", "num_stages")}
    workspace = (p.split, m, n)
    ws = torch.empty(workspace, dtype=torch.float32, device=a.device)
    args = (a, b, ws, c, counts_for(a.device, p.tiles), m, n, k, p.k_per_split, p.split, a.stride(0), a.stride(1),
            b.stride(0), b.stride(1))
    consts = dict(ACTIVATION=activation, DOT_IN_FP32=interpreting(), INPUT_PRECISION=precision, **meta, **options)
    first = cache.launch(None if key is None else ("splitk", key), _matmul_splitk_kernel, (p.tiles, p.split), args,
                         consts, n_head=5)
    if first is not None:
        kept = SplitKLaunch()
        kept.launch, kept.workspace, kept.tiles, kept.extra = first, workspace, p.tiles, None
        cache.keep(key, kept)
