"""FlashAttention-2's backward (kernels/attention/__init__.py holds the story and the forward): a preprocess delta =
rowsum(dO * O), dK and dV in one kernel over key/value tiles, dQ in another, each recomputing P per tile from the
forward's logsumexp (base 2). Causal: the tiles on the diagonal masked, those past it skipped. fp32 accumulation.
Also the tile loaders the forward's pointer kernel shares. Reference: Triton tutorial 06-fused-attention.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._shared.tables import track_swaps, values
from kernels.attention.table import ATTENTION
from rooflab.triton_utils import autotune_bench, autotune_configs

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key

LOG2E = 1.4426950408889634  # exp(x) = exp2(x * log2(e)): the softmax runs in base 2 (ex2 is one instruction)

# (BLOCK_M, BLOCK_N, num_warps, num_stages), BLOCK_N a multiple of BLOCK_M (dK dV) or the reverse (dQ): the causal
# stages split at a tile edge. table.py gives the reasons.
DKDV_TILES, DQ_TILES = values(ATTENTION["DKDV_TILES"]), values(ATTENTION["DQ_TILES"])
TILES = {"dkdv": DKDV_TILES, "dq": DQ_TILES}
CONFIGS = {kind: autotune_configs([triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s)
                                   for m, n, w, s in tiles]) for kind, tiles in TILES.items()}
KEY = ["seq_len", "HEAD_DIM", "CAUSAL"]  # and every tensor's dtype (the autotuner adds them)
EVEN = {"EVEN": lambda a: a["seq_len"] % a["BLOCK_M"] == 0 and a["seq_len"] % a["BLOCK_N"] == 0}


@triton.jit
def _load_rows(ptrs, rows, seq_len, EVEN: tl.constexpr):
    """A (rows, head_dim) tile; rows past seq_len read as 0 unless every tile is whole (EVEN)."""
    if EVEN:
        return tl.load(ptrs)
    else:
        return tl.load(ptrs, mask=rows[:, None] < seq_len, other=0.0)


@triton.jit
def _row_stat(ptr, rows, seq_len, other, EVEN: tl.constexpr):
    if EVEN:
        return tl.load(ptr + rows)
    else:
        return tl.load(ptr + rows, mask=rows < seq_len, other=other)


@triton.jit
def _attn_bwd_preprocess(o_ptr, do_ptr, delta_ptr, stride_oz, stride_oh, stride_om, stride_dz, stride_dh, stride_dm,
                         n_heads, seq_len, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    off_hz = tl.program_id(1)
    z, h = (off_hz // n_heads).to(tl.int64), (off_hz % n_heads).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    o = _load_rows(o_ptr + z * stride_oz + h * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :], offs_m,
                   seq_len, False).to(tl.float32)
    do = _load_rows(do_ptr + z * stride_dz + h * stride_dh + offs_m[:, None] * stride_dm + offs_d[None, :], offs_m,
                    seq_len, False).to(tl.float32)
    tl.store(delta_ptr + off_hz.to(tl.int64) * seq_len + offs_m, tl.sum(o * do, axis=1), mask=offs_m < seq_len)


@triton.jit
def _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_dm, offs_n, offs_d, seq_len,
                qk_scale, lo, hi, BLOCK_M: tl.constexpr, DIAGONAL: tl.constexpr, EVEN: tl.constexpr):
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        q = _load_rows(q_base + offs_m[:, None] * stride_qm + offs_d[None, :], offs_m, seq_len, EVEN)
        do = _load_rows(do_base + offs_m[:, None] * stride_dm + offs_d[None, :], offs_m, seq_len, EVEN)
        lse = _row_stat(lse_base, offs_m, seq_len, float("inf"), EVEN)  # a row past the end: P = 0
        delta = _row_stat(delta_base, offs_m, seq_len, 0.0, EVEN)
        p_t = tl.math.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])  # P^T: (BLOCK_N, BLOCK_M)
        if DIAGONAL:
            p_t = tl.where(offs_m[None, :] >= offs_n[:, None], p_t, 0.0)
        dv += tl.dot(p_t.to(do.dtype), do)
        ds_t = p_t * (tl.dot(v, tl.trans(do)) - delta[None, :])  # dS^T = P^T * (dP^T - delta)
        dk += tl.dot(ds_t.to(q.dtype), q)
    return dk, dv


@triton.autotune(configs=CONFIGS["dkdv"], key=KEY, do_bench=autotune_bench)
@triton.heuristics(EVEN)
@triton.jit
def _attn_bwd_dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, dk_ptr, dv_ptr, lse_ptr, delta_ptr, stride_qz, stride_qh,
                          stride_qm, stride_kz, stride_kh, stride_kn, stride_vz, stride_vh, stride_vn, stride_dz,
                          stride_dh, stride_dm, n_heads, seq_len, sm_scale, qk_scale, HEAD_DIM: tl.constexpr,
                          CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EVEN: tl.constexpr):
    start_n = tl.program_id(0) * BLOCK_N
    off_hz = tl.program_id(1)
    z, h = (off_hz // n_heads).to(tl.int64), (off_hz % n_heads).to(tl.int64)
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    kv_offs = offs_n[:, None] * stride_kn + offs_d[None, :]
    k = _load_rows(k_ptr + z * stride_kz + h * stride_kh + kv_offs, offs_n, seq_len, EVEN)
    v = _load_rows(v_ptr + z * stride_vz + h * stride_vh + offs_n[:, None] * stride_vn + offs_d[None, :], offs_n,
                   seq_len, EVEN)
    q_base = q_ptr + z * stride_qz + h * stride_qh
    do_base = do_ptr + z * stride_dz + h * stride_dh
    lse_base = lse_ptr + off_hz.to(tl.int64) * seq_len
    delta_base = delta_ptr + off_hz.to(tl.int64) * seq_len
    dk = tl.zeros((BLOCK_N, HEAD_DIM), dtype=tl.float32)
    dv = tl.zeros((BLOCK_N, HEAD_DIM), dtype=tl.float32)
    if CAUSAL:  # the query tiles on the diagonal masked, those below it unmasked
        dk, dv = _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_dm, offs_n,
                             offs_d, seq_len, qk_scale, start_n, start_n + BLOCK_N, BLOCK_M, True, EVEN)
        dk, dv = _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_dm, offs_n,
                             offs_d, seq_len, qk_scale, start_n + BLOCK_N, seq_len, BLOCK_M, False, EVEN)
    else:
        dk, dv = _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_dm, offs_n,
                             offs_d, seq_len, qk_scale, 0, seq_len, BLOCK_M, False, EVEN)
    out = z * n_heads * seq_len * HEAD_DIM + h * seq_len * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    tl.store(dk_ptr + out, (dk * sm_scale).to(dk_ptr.dtype.element_ty), mask=offs_n[:, None] < seq_len)
    tl.store(dv_ptr + out, dv.to(dv_ptr.dtype.element_ty), mask=offs_n[:, None] < seq_len)


@triton.jit
def _dq_tiles(dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, seq_len, qk_scale, lo,
              hi, BLOCK_N: tl.constexpr, DIAGONAL: tl.constexpr, EVEN: tl.constexpr):
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = _load_rows(k_base + offs_n[:, None] * stride_kn + offs_d[None, :], offs_n, seq_len, EVEN)
        v = _load_rows(v_base + offs_n[:, None] * stride_vn + offs_d[None, :], offs_n, seq_len, EVEN)
        p = tl.math.exp2(tl.dot(q, tl.trans(k)) * qk_scale - lse[:, None])  # a key past the end: k = 0, adds 0
        if DIAGONAL:
            p = tl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
        ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k)
    return dq


@triton.autotune(configs=CONFIGS["dq"], key=KEY, do_bench=autotune_bench)
@triton.heuristics(EVEN)
@triton.jit
def _attn_bwd_dq_kernel(q_ptr, k_ptr, v_ptr, do_ptr, dq_ptr, lse_ptr, delta_ptr, stride_qz, stride_qh, stride_qm,
                        stride_kz, stride_kh, stride_kn, stride_vz, stride_vh, stride_vn, stride_dz, stride_dh,
                        stride_dm, n_heads, seq_len, sm_scale, qk_scale, HEAD_DIM: tl.constexpr,
                        CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EVEN: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    off_hz = tl.program_id(1)
    z, h = (off_hz // n_heads).to(tl.int64), (off_hz % n_heads).to(tl.int64)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = _load_rows(q_ptr + z * stride_qz + h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :], offs_m,
                   seq_len, EVEN)
    do = _load_rows(do_ptr + z * stride_dz + h * stride_dh + offs_m[:, None] * stride_dm + offs_d[None, :], offs_m,
                    seq_len, EVEN)
    lse = _row_stat(lse_ptr + off_hz.to(tl.int64) * seq_len, offs_m, seq_len, float("inf"), EVEN)
    delta = _row_stat(delta_ptr + off_hz.to(tl.int64) * seq_len, offs_m, seq_len, 0.0, EVEN)
    k_base = k_ptr + z * stride_kz + h * stride_kh
    v_base = v_ptr + z * stride_vz + h * stride_vh
    dq = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    if CAUSAL:
        dq = _dq_tiles(dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, seq_len,
                       qk_scale, 0, start_m, BLOCK_N, False, EVEN)
        dq = _dq_tiles(dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, seq_len,
                       qk_scale, start_m, start_m + BLOCK_M, BLOCK_N, True, EVEN)
    else:
        dq = _dq_tiles(dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, seq_len,
                       qk_scale, 0, seq_len, BLOCK_N, False, EVEN)
    out = z * n_heads * seq_len * HEAD_DIM + h * seq_len * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    tl.store(dq_ptr + out, (dq * sm_scale).to(dq_ptr.dtype.element_ty), mask=offs_m[:, None] < seq_len)


def attention_backward(q, k, v, o, lse, do, causal: bool, sm_scale: float, configs: dict | None = None):
    """(dQ, dK, dV): delta = rowsum(dO * O), then dK and dV over key tiles, dQ over query tiles. ``configs``:
    {"dkdv": tile, "dq": tile}, either or both, a tile {BLOCK_M, BLOCK_N, num_warps, num_stages} instead of the
    autotuner's (the lab's)."""
    configs = configs or {}
    for kind, (outer, inner) in (("dkdv", ("BLOCK_N", "BLOCK_M")), ("dq", ("BLOCK_M", "BLOCK_N"))):
        if kind in configs and configs[kind][outer] % configs[kind][inner]:
            raise ValueError(f"{kind}: {outer} must be a multiple of {inner} (the causal stages split at a tile "
                             f"edge), got {configs[kind]}")
    if do.stride(-1) != 1:
        do = do.contiguous()  # autograd may hand an expanded gradient: the kernels read rows of head_dim
    batch, heads, seq, head_dim = q.shape
    dq, dk, dv = (torch.empty(q.shape, dtype=q.dtype, device=q.device) for _ in range(3))  # contiguous
    delta = torch.empty_like(lse)
    if dq.numel() == 0:
        return dq, dk, dv
    _attn_bwd_preprocess[(triton.cdiv(seq, 64), batch * heads)](o, do, delta, *o.stride()[:3], *do.stride()[:3],
                                                                heads, seq, HEAD_DIM=head_dim, BLOCK_M=64)
    strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *do.stride()[:3])
    scales = (heads, seq, sm_scale, sm_scale * LOG2E)
    grid = lambda META: (triton.cdiv(seq, META["BLOCK_N"]), batch * heads)  # noqa: E731
    kernel = _attn_bwd_dkdv_kernel.fn if "dkdv" in configs else _attn_bwd_dkdv_kernel
    kernel[grid](q, k, v, do, dk, dv, lse, delta, *strides, *scales, HEAD_DIM=head_dim, CAUSAL=causal,
                 **configs.get("dkdv", {}))
    grid = lambda META: (triton.cdiv(seq, META["BLOCK_M"]), batch * heads)  # noqa: E731
    kernel = _attn_bwd_dq_kernel.fn if "dq" in configs else _attn_bwd_dq_kernel
    kernel[grid](q, k, v, do, dq, lse, delta, *strides, *scales, HEAD_DIM=head_dim, CAUSAL=causal,
                 **configs.get("dq", {}))
    return dq, dk, dv
