"""FlashAttention-2, forward and backward: O = softmax(Q K^T / sqrt(d)) V, q (batch, Hq, Sq, D), k (batch, Hkv, Sk, D),
v (batch, Hkv, Sk, Dv): Hkv dividing Hq (grouped-query; 1: multi-query; K/V never repeated), D and Dv any sizes 1-256
(padded to power-of-two tiles inside; Dv != D as DeepSeek-V2/V3's 192 and 128). Forward: one program per (query
tile, batch x query head) walks its K/V head's tiles with an online softmax in base 2, never writing the Sq x Sk
scores; it stores O and the logsumexp (base 2). Causal is aligned bottom right as FlashAttention >= 2.1 (row i sees
keys j <= i + Sk - Sq; torch SDPA's is_causal is top left): tiles left of the diagonal unmasked, the diagonal
masked, none past it; a row that sees no key (Sq > Sk) gives O = 0, not NaN. Math: fp32 products in IEEE fp32, or
TF32 when torch's TF32 setting is on (plan.math_mode names it); 16-bit ones on tensor cores, fp32
accumulation. On Hopper, 16-bit contiguous heads come through TMA descriptors (zeros past a short head), the rest
through pointers. Backward: backward.py; tiles: plan.py; a call whose specs were seen replays its launches: launches.py.
References: Dao, "FlashAttention-2" (2023); Triton tutorial 06-fused-attention (its Hopper configs).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from kernels._shared.tables import track_swaps, values
from kernels.attention import decode, plan
from kernels.attention.backward import EVEN, KEY, LOG2E, _load_rows, _store_rows, attention_backward
from kernels.attention.exact import reference
from kernels.attention.launches import LAUNCHES, KeptForward, forward_key
from kernels.attention.plan import block_d, candidate_tiles, check_config, check_inputs, input_precision, pruner
from kernels.attention.table import ATTENTION
from rooflab.kernel import ELEMENT_BYTES, Kernel, differentiable, vjp_keeping_output
from rooflab.shapes import as_shape
from rooflab.triton_utils import autotune_bench, autotune_configs, device_capability

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key

CAUSAL = True  # what the sweep measures
METHODS = ("auto", "tma", "pointer")

# (BLOCK_M, BLOCK_N, num_warps, num_stages), BLOCK_M a multiple of BLOCK_N (the causal stages split at a tile edge),
# and the query tiles' launch order: table.py, with their reasons; plan.py adds the fallbacks and drops what does
# not fit in shared memory.
TMA_TILES, POINTER_TILES, HEAVY_FIRST = (values(ATTENTION[k]) for k in ("TMA_TILES", "POINTER_TILES", "HEAVY_FIRST"))
POINTER_CONFIGS = autotune_configs([
    triton.Config({
        "BLOCK_M": m,
        "BLOCK_N": n
    }, num_warps=w, num_stages=s) for m, n, w, s in candidate_tiles("fwd", POINTER_TILES)
])


@triton.jit
def _online_step(acc, l_i, m_i, q, k, v, qk_scale, offs_m, offs_n, seq_k, offset, DIAGONAL: tl.constexpr,
                 EVEN: tl.constexpr, INPUT_PRECISION: tl.constexpr):
    """One key/value tile: logits in base 2 (the scale folded into one FMA with the max), P, the rescaled sums.
    DIAGONAL: row i keeps keys j <= i + offset; a row that has seen no key yet keeps m = -inf, P = 0."""
    qk = tl.dot(q, tl.trans(k), input_precision=INPUT_PRECISION)
    if DIAGONAL or not EVEN:
        keep = offs_n[None, :] < seq_k
        if DIAGONAL:
            keep = keep & (offs_m[:, None] + offset >= offs_n[None, :])
        qk = tl.where(keep, qk * qk_scale, -float("inf"))  # whatever a masked key holds (the next head's rows)
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        if DIAGONAL:  # -inf where a row has no key yet (seq_q > seq_k): subtract 0 there, not -inf
            m_sub = tl.where(m_new == -float("inf"), 0.0, m_new)
        else:
            m_sub = m_new  # finite: every row has a key in a tile that is not on the diagonal
        qk -= m_sub[:, None]
    else:
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)  # qk_scale > 0: the max of the scaled logits
        m_sub = m_new
        qk = qk * qk_scale - m_new[:, None]
    p = tl.math.exp2(qk)
    if not EVEN:
        v = tl.where(offs_n[:, None] < seq_k, v, 0.0)  # P is 0 there, but 0 * inf is not
    alpha = tl.math.exp2(m_i - m_sub)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=INPUT_PRECISION)
    return acc, l_i * alpha + tl.sum(p, 1), m_new


@triton.jit
def _finish(acc, l_i, m_i):
    """O = acc / l and the base-2 logsumexp; a row that saw no key: O = 0 and logsumexp +inf (the backward's
    P = exp2(s - logsumexp) is then 0)."""
    seen = l_i > 0
    l_i = tl.where(seen, l_i, 1.0)
    return acc / l_i[:, None], tl.where(seen, m_i + tl.math.log2(l_i), float("inf"))


@triton.jit
def _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, offs_dv, seq_k, offset, qk_scale,
               lo, hi, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, HEAD_DIM_V: tl.constexpr,
               BLOCK_DV: tl.constexpr, DIAGONAL: tl.constexpr, EVEN: tl.constexpr, INPUT_PRECISION: tl.constexpr):
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = _load_rows(k_base + offs_n[:, None] * stride_kn + offs_d[None, :], offs_n, seq_k, offs_d, HEAD_DIM, BLOCK_D,
                       EVEN)
        v = _load_rows(v_base + offs_n[:, None] * stride_vn + offs_dv[None, :], offs_n, seq_k, offs_dv, HEAD_DIM_V,
                       BLOCK_DV, EVEN)
        acc, l_i, m_i = _online_step(acc, l_i, m_i, q, k, v, qk_scale, offs_m, offs_n, seq_k, offset, DIAGONAL, EVEN,
                                     INPUT_PRECISION)
    return acc, l_i, m_i


@triton.autotune(configs=POINTER_CONFIGS, key=KEY, do_bench=autotune_bench,
                 prune_configs_by={"early_config_prune": pruner("fwd", POINTER_TILES, "q_ptr")})
@triton.heuristics(EVEN)
@triton.jit
def _attn_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, stride_qz, stride_qh, stride_qm, stride_kz, stride_kh,
                     stride_kn, stride_vz, stride_vh, stride_vn, stride_oz, stride_oh, stride_om, n_heads, n_kv_heads,
                     seq_q, seq_k, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, HEAD_DIM_V: tl.constexpr,
                     BLOCK_DV: tl.constexpr, CAUSAL: tl.constexpr, INPUT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, EVEN: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    off_hz = tl.program_id(1)
    z, h = (off_hz // n_heads).to(tl.int64), (off_hz % n_heads).to(tl.int64)  # int64: z * stride passes 2^31
    hk = h // (n_heads // n_kv_heads)  # the group's K/V head
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d, offs_dv = tl.arange(0, BLOCK_D), tl.arange(0, BLOCK_DV)
    q = _load_rows(q_ptr + z * stride_qz + h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :], offs_m, seq_q,
                   offs_d, HEAD_DIM, BLOCK_D, EVEN)
    k_base = k_ptr + z * stride_kz + hk * stride_kh
    v_base = v_ptr + z * stride_vz + hk * stride_vh
    m_i = tl.full((BLOCK_M, ), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M, ), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_DV), dtype=tl.float32)
    offset = seq_k - seq_q
    if CAUSAL:  # key tiles below diag_lo seen by every row, unmasked; [diag_lo, hi) masked; none past
        hi = tl.maximum(tl.minimum(seq_k, start_m + BLOCK_M + offset), 0)
        diag_lo = tl.maximum(start_m + offset, 0) // BLOCK_N * BLOCK_N
        acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, offs_dv,
                                   seq_k, offset, qk_scale, 0, diag_lo, BLOCK_N, HEAD_DIM, BLOCK_D, HEAD_DIM_V,
                                   BLOCK_DV, False, EVEN, INPUT_PRECISION)
        acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, offs_dv,
                                   seq_k, offset, qk_scale, diag_lo, hi, BLOCK_N, HEAD_DIM, BLOCK_D, HEAD_DIM_V,
                                   BLOCK_DV, True, EVEN, INPUT_PRECISION)
    else:
        acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, offs_dv,
                                   seq_k, offset, qk_scale, 0, seq_k, BLOCK_N, HEAD_DIM, BLOCK_D, HEAD_DIM_V, BLOCK_DV,
                                   False, EVEN, INPUT_PRECISION)
    o, lse = _finish(acc, l_i, m_i)
    o_ptrs = o_ptr + z * stride_oz + h * stride_oh + offs_m[:, None] * stride_om + offs_dv[None, :]
    _store_rows(o_ptrs, o.to(o_ptr.dtype.element_ty), offs_m, seq_q, offs_dv, HEAD_DIM_V, BLOCK_DV)
    tl.store(lse_ptr + off_hz.to(tl.int64) * seq_q + offs_m, lse, mask=offs_m < seq_q)


@triton.jit
def _fwd_tiles_tma(acc, l_i, m_i, q, desc_k, desc_v, row0, offs_m, seq_k, offset, qk_scale, lo, hi,
                   BLOCK_N: tl.constexpr, DIAGONAL: tl.constexpr, EVEN: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        k = desc_k.load([row0 + start_n, 0])  # rows past seq_k: the next head's (or zeros), masked if not EVEN
        v = desc_v.load([row0 + start_n, 0])
        offs_n = start_n + tl.arange(0, BLOCK_N)
        acc, l_i, m_i = _online_step(acc, l_i, m_i, q, k, v, qk_scale, offs_m, offs_n, seq_k, offset, DIAGONAL, EVEN,
                                     "tf32")
    return acc, l_i, m_i


@triton.heuristics(EVEN)
@triton.jit
def _attn_fwd_tma_kernel(desc_q, desc_k, desc_v, desc_o, o_ptr, lse_ptr, n_heads, n_kv_heads, seq_q, seq_k, qk_scale,
                         HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, HEAD_DIM_V: tl.constexpr,
                         BLOCK_DV: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         EVEN: tl.constexpr, WARP_SPECIALIZE: tl.constexpr = False,
                         HEAVY_FIRST: tl.constexpr = HEAVY_FIRST):
    """Q, K, V and O as (batch * heads * seq, head_dim) row tables. A tile past a head's end reads the next head's
    rows (the last head's: zeros), masked as keys; not EVEN, O is stored through a row mask, not the descriptor.
    HEAVY_FIRST: each head's query tiles run last to first (grid axis 0 is dispatched first): causal, a head's
    heaviest tiles start first and its lightest end it, the grid ending on the last head's lightest."""
    start_m = (tl.num_programs(0) - 1 - tl.program_id(0) if HEAVY_FIRST else tl.program_id(0)) * BLOCK_M
    off_hz = tl.program_id(1)
    row0 = off_hz * seq_q  # the head's first query row; its K/V head's first row:
    kv_row0 = (off_hz // n_heads * n_kv_heads + off_hz % n_heads // (n_heads // n_kv_heads)) * seq_k
    offs_m = start_m + tl.arange(0, BLOCK_M)
    q = desc_q.load([row0 + start_m, 0])
    m_i = tl.full((BLOCK_M, ), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M, ), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_DV), dtype=tl.float32)
    offset = seq_k - seq_q
    if CAUSAL:  # below diag_lo whole tiles of real keys; the diagonal masked, stopping at the keys' end
        hi = tl.maximum(tl.minimum(seq_k, start_m + BLOCK_M + offset), 0)
        diag_lo = tl.maximum(start_m + offset, 0) // BLOCK_N * BLOCK_N
        acc, l_i, m_i = _fwd_tiles_tma(acc, l_i, m_i, q, desc_k, desc_v, kv_row0, offs_m, seq_k, offset, qk_scale, 0,
                                       diag_lo, BLOCK_N, False, True, WARP_SPECIALIZE)
        acc, l_i, m_i = _fwd_tiles_tma(acc, l_i, m_i, q, desc_k, desc_v, kv_row0, offs_m, seq_k, offset, qk_scale,
                                       diag_lo, hi, BLOCK_N, True, EVEN, False)
    else:  # whole key tiles unmasked, then the last, partial one masked
        whole = seq_k // BLOCK_N * BLOCK_N
        acc, l_i, m_i = _fwd_tiles_tma(acc, l_i, m_i, q, desc_k, desc_v, kv_row0, offs_m, seq_k, offset, qk_scale, 0,
                                       whole, BLOCK_N, False, True, WARP_SPECIALIZE)
        if seq_k % BLOCK_N:
            acc, l_i, m_i = _fwd_tiles_tma(acc, l_i, m_i, q, desc_k, desc_v, kv_row0, offs_m, seq_k, offset, qk_scale,
                                           whole, seq_k, BLOCK_N, False, False, False)
    o, lse = _finish(acc, l_i, m_i)
    o = o.to(desc_o.dtype)
    if EVEN:
        desc_o.store([row0 + start_m, 0], o)
    else:
        rows = (row0 + offs_m).to(tl.int64)
        offs_dv = tl.arange(0, BLOCK_DV)
        _store_rows(o_ptr + rows[:, None] * HEAD_DIM_V + offs_dv[None, :], o, offs_m, seq_q, offs_dv, HEAD_DIM_V,
                    BLOCK_DV)
    tl.store(lse_ptr + off_hz.to(tl.int64) * seq_q + offs_m, lse, mask=offs_m < seq_q)


def _set_block_shapes(nargs):
    """Each descriptor's block for the config being run (the autotuner's pre-hook)."""
    blocks = {"desc_q": "BLOCK_M", "desc_o": "BLOCK_M", "desc_k": "BLOCK_N", "desc_v": "BLOCK_N"}
    for desc, block in blocks.items():
        nargs[desc].block_shape = [nargs[block], nargs["BLOCK_DV" if desc in ("desc_v", "desc_o") else "BLOCK_D"]]


TMA_CONFIGS = autotune_configs([
    triton.Config({
        "BLOCK_M": m,
        "BLOCK_N": n
    }, num_warps=w, num_stages=s, pre_hook=_set_block_shapes) for m, n, w, s in candidate_tiles("tma", TMA_TILES)
])
_attn_fwd_tma_autotuned = triton.autotune(configs=TMA_CONFIGS, key=KEY, do_bench=autotune_bench,
                                          prune_configs_by={"early_config_prune":
                                                            pruner("tma", TMA_TILES, "desc_q")})(_attn_fwd_tma_kernel)


def tma_ok(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """The TMA kernel's inputs: 16-bit, contiguous (rows of one table, fewer than 2^31: int32 coordinates), 16-byte
    aligned rows and base, Hopper or newer. A head dim short of its tile reads as zeros past its end (the
    descriptor's padding) and stores clipped there."""
    if q.dtype == torch.float32 or q.shape[-1] * q.element_size() % 16 or v.shape[-1] * v.element_size() % 16:
        return False
    if max(t.numel() // max(1, t.shape[-1]) for t in (q, k)) >= 2**31:
        return False
    if q.device.type == "cuda" and device_capability(q.device)[0] < 9:
        return False
    return all(t.is_contiguous() and t.data_ptr() % 16 == 0 for t in (q, k, v))


def attention_forward(q, k, v, causal: bool, sm_scale: float, method: str = "auto", config: dict | None = None):
    """(O, logsumexp in base 2 of each row, (batch * Hq, Sq) fp32; +inf for a row that sees no key, whose O is 0).
    Check; allocate; launch. ``config``: one tile ({BLOCK_M, BLOCK_N, num_warps, num_stages}; the TMA kernel's
    WARP_SPECIALIZE and HEAVY_FIRST too) instead of the autotuner's (the lab's), never kept (launches.py)."""
    key = forward_key(q, k, v, causal, sm_scale, method) if config is None else None
    if key is not None and (launch := LAUNCHES.get(key)) is not None:  # checked and planned by an earlier call
        return launch(q, k, v)
    batch, heads, kv_heads, seq_q, seq_k, head_dim, head_dim_v = check_inputs(q, k, v)
    if method not in METHODS or (method == "tma" and not tma_ok(q, k, v)):
        raise ValueError(f"method {method!r}: one of {METHODS}; tma needs tma_ok(q, k, v)")
    pointer = method == "pointer" or (method == "auto" and not tma_ok(q, k, v))
    check_config("fwd" if pointer else "tma", config, max(head_dim, head_dim_v), q.element_size())
    sm_scale = plan.check_scale(sm_scale)
    o = torch.empty((*q.shape[:3], head_dim_v), dtype=q.dtype, device=q.device)  # contiguous
    lse = torch.empty((batch * heads, seq_q), dtype=torch.float32, device=q.device)
    if o.numel() == 0 or seq_k == 0:  # no key: every row's O is 0
        return o.zero_(), lse.fill_(float("inf"))
    grid = lambda META: (triton.cdiv(seq_q, META["BLOCK_M"]), batch * heads)  # noqa: E731
    meta = dict(HEAD_DIM=head_dim, BLOCK_D=block_d(head_dim), HEAD_DIM_V=head_dim_v, BLOCK_DV=block_d(head_dim_v),
                CAUSAL=causal, **(config or {}))
    if pointer:
        args = (q, k, v, o, lse, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3], heads, kv_heads,
                seq_q, seq_k, sm_scale * LOG2E)
        meta["INPUT_PRECISION"] = input_precision(q.dtype)
        if config:
            _attn_fwd_kernel.fn[grid](*args, **meta)
        elif entry := LAUNCHES.launch(key and ("launch", key), _attn_fwd_kernel, grid, args, meta, n_head=5):
            LAUNCHES.keep(key, KeptForward(entry, None, batch * heads))
        return o, lse
    from triton.tools.tensor_descriptor import TensorDescriptor

    descs = {
        name: TensorDescriptor.from_tensor(t.view(-1, t.shape[-1]), [1, meta[block]])
        for name, t, block in (("desc_q", q, "BLOCK_D"), ("desc_k", k, "BLOCK_D"), ("desc_v", v, "BLOCK_DV"),
                               ("desc_o", o, "BLOCK_DV"))
    }
    args = (*descs.values(), o, lse, heads, kv_heads, seq_q, seq_k, sm_scale * LOG2E)
    if config:
        _set_block_shapes({**descs, **meta})
        _attn_fwd_tma_kernel[grid](*args, **meta)
    elif entry := LAUNCHES.launch(key and ("launch", key), _attn_fwd_tma_autotuned, grid, args, meta, n_head=6):
        LAUNCHES.keep(key, KeptForward(entry, tuple(descs.values()), batch * heads))  # the config's block shapes
    return o, lse


class TritonAttention(torch.autograd.Function):
    """Saves q, k, v, O and the logsumexp; the kernels do the work."""

    @staticmethod
    def forward(ctx, q, k, v, causal, sm_scale):
        o, lse = attention_forward(q, k, v, causal, sm_scale)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale = causal, sm_scale
        return o

    @staticmethod
    @once_differentiable  # the kernels' gradients are not differentiable again: a double backward raises
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        return (*attention_backward(q, k, v, o, lse, do, ctx.causal, ctx.sm_scale), None, None)


def attention_triton(q, k, v, causal: bool = CAUSAL, sm_scale: float | None = None) -> torch.Tensor:
    """O (batch, Hq, Sq, Dv) for q (batch, Hq, Sq, D), k (batch, Hkv, Sk, D), v (batch, Hkv, Sk, Dv). With
    gradients: FlashAttention-2 forward and backward. Without: 1-16 query rows with V of K's size go to the split-KV
    decode kernel (decode.py: one row per head cannot fill the FlashAttention-2 grid), the rest to the
    FlashAttention-2 forward."""
    try:
        if sm_scale is None:  # (a head size of 0, refused by the checks below by name, gets any scale)
            sm_scale = q.shape[-1]**-0.5 if q.shape[-1] else 1.0
        elif type(sm_scale) is not float:  # a tensor, a NumPy number: the kernels and the launch keys take a float
            sm_scale = plan.check_scale(sm_scale)
        grads = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    except AttributeError:  # no tensor: the checks say which
        check_inputs(q, k, v)
        raise
    if grads:
        return TritonAttention.apply(q, k, v, causal, sm_scale)
    short = q.dim() == 4 and q.shape[2] <= decode.MAX_SEQ_Q and q.stride(-1) == k.stride(-1) == v.stride(-1) == 1
    launch = decode.kept(q, k, v, causal, sm_scale) if short else None  # takes()'s strides: a kept launch is decode's
    if launch is not None:  # a decode call made before with these specs: its kept launches, no checks or plan
        return launch(q, k, v)
    if decode.takes(q, k, v, causal):
        return decode.decode_attention(q, k, v, causal=causal, scale=sm_scale, check=False)
    return attention_forward(q, k, v, causal, sm_scale)[0]


def attention_naive(q, k, v, causal: bool = CAUSAL) -> torch.Tensor:
    """The unfused expression (S = seq, E = batch * heads * seq * head_dim elements, B = batch * heads):"""
    s = q @ k.transpose(-2, -1)  # read 2E, write B S^2: the scores, seq x seq per head, in memory
    s = s * q.shape[-1]**-0.5  # read B S^2, write B S^2
    if causal:
        mask = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1)  # write S^2 (twice)
        s = s.masked_fill(mask, float("-inf"))  # read B S^2 + S^2, write B S^2
    p = torch.softmax(s, dim=-1)  # read B S^2, write B S^2 (one fused kernel, fp32 inside)
    return p @ v  # read B S^2 + E, write E


def attention_builtin(q, k, v, causal: bool = CAUSAL) -> torch.Tensor:
    """SDPA picks its backend (flash, cuDNN, memory-efficient, math) per call; experiments/backends.py forces each."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def attention_naive_fn(q, k, v, grad_o, pass_: str = "fwd"):
    """What torch.compile compiles: fwd, the naive expression (the fwd+bwd cell's too); fwd+bwd, its gradients with
    grad_o and its output as one joint graph (rooflab.kernel.vjp_keeping_output; the lab's compileframes)."""
    if pass_ == "fwd":
        return attention_naive(q, k, v)
    return vjp_keeping_output(attention_naive, (q, k, v), grad_o)


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
    make_inputs=make_inputs, reference=reference, flops=flops, bytes=bytes_moved, impls={
        "naive": differentiable(attention_naive),
        "builtin": differentiable(attention_builtin),
        "triton": differentiable(attention_triton)
    }, naive_fn=attention_naive_fn, compute_unit=lambda dtype: {
        "bfloat16": "bf16",
        "float16": "fp16"
    }.get(dtype, "fp32"), dtypes=("bfloat16", "float16"), family="bhsd", passes=("fwd", "fwd+bwd"),
)
