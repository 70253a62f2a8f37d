"""FlashAttention-2, forward and backward: O = softmax(Q K^T / sqrt(d)) V over (batch, heads, seq, head_dim).

Forward: one program per (query tile, batch x head) walks the key/value tiles with an online softmax in base 2 (a
running max m and sum l, the accumulator rescaled by exp2(m_old - m_new)), never writing the seq x seq scores;
it stores O and the logsumexp (base 2) of each row. Causal: the tiles left of the diagonal run unmasked, the
diagonal ones masked, the ones right of it not at all. Backward recomputes P per tile from the logsumexp: a
preprocess delta = rowsum(dO * O), dK and dV in one kernel over key/value tiles, dQ in another. fp32 accumulation.
The sweep is causal (CAUSAL: an LLM's prefill); non-causal is tested and in scripts/check_attention.py. Passes
"fwd" and "fwd+bwd". No launch cache (kernels/_fastlaunch.py): at the swept shapes a call is milliseconds of GPU.

References: Dao, "FlashAttention-2" (2023); Triton tutorial 06-fused-attention (its Hopper configs).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from rooflab.kernel import ELEMENT_BYTES, Kernel, differentiable, vjp_keeping_output
from rooflab.shapes import as_shape
from rooflab.triton_utils import autotune_bench, autotune_configs, check_device

CAUSAL = True  # what the sweep measures
SUPPORTED = (torch.float32, torch.bfloat16, torch.float16)
HEAD_DIMS = (16, 32, 64, 128)
LOG2E = 1.4426950408889634  # exp(x) = exp2(x * log2(e)): the softmax runs in base 2 (ex2 is one instruction)


# (BLOCK_M, BLOCK_N, num_warps, num_stages) from the tutorial's Hopper search; BLOCK_M a multiple of BLOCK_N (fwd,
# dQ) or the reverse (dK dV): the causal stages split at a tile edge. Three each, so a new key compiles 9 kernels;
# the first is the interpreter's. A key: seq_len, HEAD_DIM, CAUSAL and every tensor's dtype.
TILES = {"fwd": [(128, 64, 4, 3), (128, 128, 8, 3), (128, 64, 8, 4)],
         "dkdv": [(32, 128, 4, 3), (64, 128, 8, 3), (32, 64, 4, 3)],
         "dq": [(128, 32, 4, 3), (128, 64, 8, 3), (64, 32, 4, 3)]}
CONFIGS = {kind: autotune_configs([triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s)
                                   for m, n, w, s in tiles]) for kind, tiles in TILES.items()}
KEY = ["seq_len", "HEAD_DIM", "CAUSAL"]
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
def _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, seq_len, qk_scale, lo, hi,
               BLOCK_N: tl.constexpr, DIAGONAL: tl.constexpr, EVEN: tl.constexpr):
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = _load_rows(k_base + offs_n[:, None] * stride_kn + offs_d[None, :], offs_n, seq_len, EVEN)
        v = _load_rows(v_base + offs_n[:, None] * stride_vn + offs_d[None, :], offs_n, seq_len, EVEN)
        qk = tl.dot(q, tl.trans(k)) * qk_scale  # (BLOCK_M, BLOCK_N) logits, base 2
        if DIAGONAL:
            qk = tl.where(offs_m[:, None] >= offs_n[None, :], qk, -float("inf"))
        if not EVEN:
            qk = tl.where(offs_n[None, :] < seq_len, qk, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))  # finite: every row has seen a key by its first tile
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    return acc, l_i, m_i


@triton.autotune(configs=CONFIGS["fwd"], key=KEY, do_bench=autotune_bench)
@triton.heuristics(EVEN)
@triton.jit
def _attn_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, stride_qz, stride_qh, stride_qm, stride_kz, stride_kh,
                     stride_kn, stride_vz, stride_vh, stride_vn, stride_oz, stride_oh, stride_om, n_heads, seq_len,
                     qk_scale, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, EVEN: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    off_hz = tl.program_id(1)
    z, h = (off_hz // n_heads).to(tl.int64), (off_hz % n_heads).to(tl.int64)  # int64: z * stride passes 2^31
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = _load_rows(q_ptr + z * stride_qz + h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :], offs_m,
                   seq_len, EVEN)
    k_base = k_ptr + z * stride_kz + h * stride_kh
    v_base = v_ptr + z * stride_vz + h * stride_vh
    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    if CAUSAL:  # left of the diagonal unmasked, then the diagonal tiles masked
        acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d,
                                   seq_len, qk_scale, 0, start_m, BLOCK_N, False, EVEN)
        acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d,
                                   seq_len, qk_scale, start_m, start_m + BLOCK_M, BLOCK_N, True, EVEN)
    else:
        acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d,
                                   seq_len, qk_scale, 0, seq_len, BLOCK_N, False, EVEN)
    o = acc / l_i[:, None]
    o_ptrs = o_ptr + z * stride_oz + h * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :]
    tl.store(o_ptrs, o.to(o_ptr.dtype.element_ty), mask=offs_m[:, None] < seq_len)
    tl.store(lse_ptr + off_hz.to(tl.int64) * seq_len + offs_m, m_i + tl.math.log2(l_i), mask=offs_m < seq_len)


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


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    check_device(q, k, v)
    if q.dim() != 4 or k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"attention_triton needs q, k, v of one shape (batch, heads, seq, head_dim), got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)} (grouped K/V heads: repeat them)")
    if q.dtype not in SUPPORTED or k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"attention_triton supports float32, bfloat16 and float16 (one for q, k, v), got "
                        f"{q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[-1] not in HEAD_DIMS:
        raise ValueError(f"attention_triton supports head dims {HEAD_DIMS}, got {q.shape[-1]}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(-1) != 1 or t.shape[2] * t.stride(2) >= 2 ** 31:
            raise ValueError(f"attention_triton needs {name} with unit stride over head_dim and seq x stride(seq) "
                             f"< 2^31 (in-head offsets are int32), got strides {t.stride()}")


def attention_forward(q, k, v, causal: bool, sm_scale: float):
    """(O, logsumexp in base 2 of each row, (batch * heads, seq) fp32). Check; allocate; launch."""
    _check(q, k, v)
    batch, heads, seq, head_dim = q.shape
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)  # (batch, heads, seq, head_dim), contiguous
    lse = torch.empty((batch * heads, seq), dtype=torch.float32, device=q.device)
    if o.numel() == 0:
        return o, lse
    grid = lambda META: (triton.cdiv(seq, META["BLOCK_M"]), batch * heads)  # noqa: E731
    _attn_fwd_kernel[grid](q, k, v, o, lse, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
                           heads, seq, sm_scale * LOG2E, HEAD_DIM=head_dim, CAUSAL=causal)
    return o, lse


def attention_backward(q, k, v, o, lse, do, causal: bool, sm_scale: float):
    """(dQ, dK, dV): delta = rowsum(dO * O), then dK and dV over key tiles, dQ over query tiles."""
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
    _attn_bwd_dkdv_kernel[grid](q, k, v, do, dk, dv, lse, delta, *strides, *scales, HEAD_DIM=head_dim,
                                CAUSAL=causal)
    grid = lambda META: (triton.cdiv(seq, META["BLOCK_M"]), batch * heads)  # noqa: E731
    _attn_bwd_dq_kernel[grid](q, k, v, do, dq, lse, delta, *strides, *scales, HEAD_DIM=head_dim, CAUSAL=causal)
    return dq, dk, dv


class TritonAttention(torch.autograd.Function):
    """Saves q, k, v, O and the logsumexp; the kernels do the work."""

    @staticmethod
    def forward(ctx, q, k, v, causal, sm_scale):
        o, lse = attention_forward(q, k, v, causal, sm_scale)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale = causal, sm_scale
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        return (*attention_backward(q, k, v, o, lse, do, ctx.causal, ctx.sm_scale), None, None)


def attention_triton(q, k, v, causal: bool = CAUSAL, sm_scale: float | None = None) -> torch.Tensor:
    sm_scale = q.shape[-1] ** -0.5 if sm_scale is None else sm_scale
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        return TritonAttention.apply(q, k, v, causal, sm_scale)
    return attention_forward(q, k, v, causal, sm_scale)[0]


def attention_naive(q, k, v, causal: bool = CAUSAL) -> torch.Tensor:
    """The unfused expression (S = seq, E = batch * heads * seq * head_dim elements, B = batch * heads):"""
    s = q @ k.transpose(-2, -1)  # read 2E, write B S^2: the scores, seq x seq per head, in memory
    s = s * q.shape[-1] ** -0.5  # read B S^2, write B S^2
    if causal:
        mask = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1)  # write S^2 (twice)
        s = s.masked_fill(mask, float("-inf"))  # read B S^2 + S^2, write B S^2
    p = torch.softmax(s, dim=-1)  # read B S^2, write B S^2 (one fused kernel, fp32 inside)
    return p @ v  # read B S^2 + E, write E


def attention_builtin(q, k, v, causal: bool = CAUSAL) -> torch.Tensor:
    """SDPA picks its backend (flash, cuDNN, memory-efficient, math) per call: scripts/check_attention.py says which."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def attention_naive_fn(q, k, v, grad_o, pass_: str = "fwd"):
    """What torch.compile compiles: fwd, the naive expression (the fwd+bwd cell's too); fwd+bwd, its gradients with
    grad_o and its output as one joint graph (rooflab.kernel.vjp_keeping_output; the lab's compileframes)."""
    if pass_ == "fwd":
        return attention_naive(q, k, v)
    return vjp_keeping_output(attention_naive, (q, k, v), grad_o)


REFERENCE_SCORES = 1 << 26  # float64 scores per chunk of heads: a check's memory stays bounded at 16k tokens


def reference(inputs, pass_: str = "fwd", causal: bool = CAUSAL):
    """The naive expression in float64, a chunk of heads at a time: O, or (dQ, dK, dV) by autograd."""
    q, k, v, grad_o = (t.flatten(0, 1) for t in inputs)  # (batch * heads, seq, head_dim)
    step = max(1, REFERENCE_SCORES // max(1, q.shape[1] ** 2))
    outs = []
    for i in range(0, q.shape[0], step):
        part = [t[i:i + step].to(torch.float64) for t in (q, k, v)]
        if pass_ == "fwd":
            outs.append((attention_naive(*part, causal),))
            continue
        part = [t.requires_grad_(True) for t in part]
        attention_naive(*part, causal).backward(grad_o[i:i + step].to(torch.float64))
        outs.append(tuple(t.grad for t in part))
    joined = [torch.cat(parts).unflatten(0, inputs[0].shape[:2]) for parts in zip(*outs)]
    return joined[0] if pass_ == "fwd" else tuple(joined)


GRAD_SEED_OFFSET = 1_000_003  # the upstream gradient's seed, apart from the inputs'


def make_inputs(shape, dtype: torch.dtype, device: str, seed: int = 0):
    """q, k, v (batch, heads, seq, head_dim) and the fixed upstream gradient grad_o."""
    shape = as_shape(shape, "bhsd")  # an int n: the square shape of n (rooflab/shapes.py)
    g = torch.Generator(device=device).manual_seed(seed)
    q, k, v = (torch.randn(shape, generator=g, device=device, dtype=torch.float32).to(dtype) for _ in range(3))
    g.manual_seed(seed + GRAD_SEED_OFFSET)
    return q, k, v, torch.randn(shape, generator=g, device=device, dtype=torch.float32).to(dtype)


BWD_OVER_FWD_FLOPS = 2.5  # FA2's count: the backward's five matmuls against the forward's two (recompute left out)


def flops(shape, pass_: str = "fwd", causal: bool = CAUSAL) -> float:
    """Forward: QK^T and PV, 2 * 2 * seq^2 * head_dim per head; causal does half."""
    batch, heads, seq, head_dim = as_shape(shape, "bhsd")
    fwd = 4 * batch * heads * seq * seq * head_dim / (2 if causal else 1)
    return fwd * (1 + (BWD_OVER_FWD_FLOPS if pass_ == "fwd+bwd" else 0))


def bytes_moved(shape, dtype: str, pass_: str = "fwd") -> float:
    """The fewest: fwd reads Q, K, V and writes O and the fp32 logsumexp; bwd reads Q, K, V, O, dO and the
    logsumexp and writes dQ, dK, dV (delta, recomputable inside, left out)."""
    batch, heads, seq, head_dim = as_shape(shape, "bhsd")
    tensor, lse = batch * heads * seq * head_dim * ELEMENT_BYTES[dtype], batch * heads * seq * 4
    return 4 * tensor + lse + ((8 * tensor + lse) if pass_ == "fwd+bwd" else 0)


KERNEL = Kernel(
    name="attention",
    description="FlashAttention-2, causal, over batch x heads x seq x head_dim, forward and forward+backward",
    make_inputs=make_inputs,
    reference=reference,
    flops=flops,
    bytes=bytes_moved,
    impls={"naive": differentiable(attention_naive), "builtin": differentiable(attention_builtin),
           "triton": differentiable(attention_triton)},
    naive_fn=attention_naive_fn,
    compute_unit=lambda dtype: {"bfloat16": "bf16", "float16": "fp16"}.get(dtype, "fp32"),
    dtypes=("bfloat16", "float16"),
    family="bhsd",
    passes=("fwd", "fwd+bwd"),
)
