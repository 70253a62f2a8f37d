"""FlashAttention-2's backward (kernels/attention/__init__.py holds the story and the forward): a preprocess delta =
rowsum(dO * O), dK and dV in one kernel over key/value tiles, dQ in another, each recomputing P per tile from the
forward's logsumexp (base 2). Grouped K/V heads: a dK dV program walks every query head of its group in turn (one
deterministic sum, as FlashAttention-2's), a dQ program reads its group's K/V head. Causal, aligned bottom right
(row i sees keys j <= i + Sk - Sq): the tiles on the diagonal masked, those past it skipped. fp32 accumulation.
Also the tile loaders the forward's pointer kernel shares. Reference: Triton tutorial 06-fused-attention.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._shared.tables import track_swaps, values
from kernels.attention.launches import LAUNCHES, KeptBackward, backward_key
from kernels.attention.plan import block_d, candidate_tiles, check_config, input_precision, pruner, tiles_for
from kernels.attention.table import ATTENTION
from rooflab.triton_utils import autotune_bench, autotune_configs, multiprocessor_count

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key

LOG2E = 1.4426950408889634  # exp(x) = exp2(x * log2(e)): the softmax runs in base 2 (ex2 is one instruction)

# (BLOCK_M, BLOCK_N, num_warps, num_stages), BLOCK_N a multiple of BLOCK_M (dK dV) or the reverse (dQ): the causal
# stages split at a tile edge. table.py gives the reasons; plan.py adds the fallbacks and drops what does not fit.
DKDV_TILES, DQ_TILES = values(ATTENTION["DKDV_TILES"]), values(ATTENTION["DQ_TILES"])
DKDV_SPLIT_BELOW, DKDV_GROUP_FILL = values(ATTENTION["DKDV_SPLIT_BELOW"]), values(ATTENTION["DKDV_GROUP_FILL"])
TILES = {"dkdv": DKDV_TILES, "dq": DQ_TILES}
CONFIGS = {
    kind:
    autotune_configs([
        triton.Config({
            "BLOCK_M": m,
            "BLOCK_N": n
        }, num_warps=w, num_stages=s)
        for m, n, w, s in candidate_tiles(kind, tiles)
    ])
    for kind, tiles in TILES.items()
}
# the autotuners' keys, and every tensor's dtype; a dK dV program's group_chunk too (split groups: other launches)
KEY = ["seq_q", "seq_k", "HEAD_DIM", "HEAD_DIM_V", "CAUSAL", "INPUT_PRECISION"]
DKDV_KEY = KEY + ["group_chunk"]
EVEN = {"EVEN": lambda a: a["seq_q"] % a["BLOCK_M"] == 0 and a["seq_k"] % a["BLOCK_N"] == 0}


@triton.jit
def _load_rows(ptrs, rows, n_rows, offs_d, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, EVEN: tl.constexpr):
    """A (rows, BLOCK_D) tile; rows past n_rows (unless every tile is whole: EVEN) and columns past HEAD_DIM read
    as 0."""
    if EVEN and BLOCK_D == HEAD_DIM:
        return tl.load(ptrs)
    else:
        keep = offs_d[None, :] < HEAD_DIM
        if not EVEN:
            keep = keep & (rows[:, None] < n_rows)
        return tl.load(ptrs, mask=keep, other=0.0)


@triton.jit
def _store_rows(ptrs, x, rows, n_rows, offs_d, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr):
    keep = rows[:, None] < n_rows
    if BLOCK_D != HEAD_DIM:
        keep = keep & (offs_d[None, :] < HEAD_DIM)
    tl.store(ptrs, x, mask=keep)


@triton.jit
def _row_stat(ptr, rows, seq_len, other, EVEN: tl.constexpr):
    if EVEN:
        return tl.load(ptr + rows)
    else:
        return tl.load(ptr + rows, mask=rows < seq_len, other=other)


@triton.jit
def _attn_bwd_preprocess(o_ptr, do_ptr, delta_ptr, stride_oz, stride_oh, stride_om, stride_dz, stride_dh, stride_dm,
                         n_heads, seq_q, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr):
    """delta = rowsum(dO * O): HEAD_DIM and BLOCK_D are V's (O's and dO's) head size and tile."""
    off_hz = tl.program_id(1)
    z, h = (off_hz // n_heads).to(tl.int64), (off_hz % n_heads).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    o = _load_rows(o_ptr + z * stride_oz + h * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :], offs_m, seq_q,
                   offs_d, HEAD_DIM, BLOCK_D, False).to(tl.float32)
    do = _load_rows(do_ptr + z * stride_dz + h * stride_dh + offs_m[:, None] * stride_dm + offs_d[None, :], offs_m,
                    seq_q, offs_d, HEAD_DIM, BLOCK_D, False).to(tl.float32)
    tl.store(delta_ptr + off_hz.to(tl.int64) * seq_q + offs_m, tl.sum(o * do, axis=1), mask=offs_m < seq_q)


@triton.jit
def _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_dm, offs_n, offs_d, offs_dv,
                seq_q, offset, qk_scale, lo, hi, BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                HEAD_DIM_V: tl.constexpr, BLOCK_DV: tl.constexpr, DIAGONAL: tl.constexpr, EVEN: tl.constexpr,
                INPUT_PRECISION: tl.constexpr):
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        q = _load_rows(q_base + offs_m[:, None] * stride_qm + offs_d[None, :], offs_m, seq_q, offs_d, HEAD_DIM, BLOCK_D,
                       EVEN)
        do = _load_rows(do_base + offs_m[:, None] * stride_dm + offs_dv[None, :], offs_m, seq_q, offs_dv, HEAD_DIM_V,
                        BLOCK_DV, EVEN)
        lse = _row_stat(lse_base, offs_m, seq_q, float("inf"), EVEN)  # past the end (or a row with no key): P = 0
        delta = _row_stat(delta_base, offs_m, seq_q, 0.0, EVEN)
        qk_t = tl.dot(k, tl.trans(q), input_precision=INPUT_PRECISION)
        p_t = tl.math.exp2(qk_t * qk_scale - lse[None, :])  # P^T: (BLOCK_N, BLOCK_M)
        if DIAGONAL:
            p_t = tl.where(offs_m[None, :] + offset >= offs_n[:, None], p_t, 0.0)
        dv += tl.dot(p_t.to(do.dtype), do, input_precision=INPUT_PRECISION)
        dp_t = tl.dot(v, tl.trans(do), input_precision=INPUT_PRECISION)
        ds_t = p_t * (dp_t - delta[None, :])  # dS^T = P^T * (dP^T - delta)
        dk += tl.dot(ds_t.to(q.dtype), q, input_precision=INPUT_PRECISION)
    return dk, dv


@triton.autotune(configs=CONFIGS["dkdv"], key=DKDV_KEY, do_bench=autotune_bench,
                 prune_configs_by={"early_config_prune": pruner("dkdv", DKDV_TILES, "q_ptr")})
@triton.heuristics(EVEN)
@triton.jit
def _attn_bwd_dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, dk_ptr, dv_ptr, lse_ptr, delta_ptr, stride_qz, stride_qh,
                          stride_qm, stride_kz, stride_kh, stride_kn, stride_vz, stride_vh, stride_vn, stride_dz,
                          stride_dh, stride_dm, n_heads, n_kv_heads, seq_q, seq_k, sm_scale, qk_scale, group_chunk,
                          HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, HEAD_DIM_V: tl.constexpr,
                          BLOCK_DV: tl.constexpr, CAUSAL: tl.constexpr, INPUT_PRECISION: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EVEN: tl.constexpr):
    """One key tile of one K/V head; group_chunk of its group's query heads in turn (grid axis 2 picks which: with
    more than one chunk, each stores its partial dK dV, fp32, at dk_ptr / dv_ptr + chunk x their size). Causal: the
    query tiles from the first that sees a key of the tile ([q_lo, q_mid) masked) to those that see all of them."""
    start_n = tl.program_id(0) * BLOCK_N
    off_hz = tl.program_id(1)
    z, hk = (off_hz // n_kv_heads).to(tl.int64), (off_hz % n_kv_heads).to(tl.int64)
    group = n_heads // n_kv_heads
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d, offs_dv = tl.arange(0, BLOCK_D), tl.arange(0, BLOCK_DV)
    k = _load_rows(k_ptr + z * stride_kz + hk * stride_kh + offs_n[:, None] * stride_kn + offs_d[None, :], offs_n,
                   seq_k, offs_d, HEAD_DIM, BLOCK_D, EVEN)
    v = _load_rows(v_ptr + z * stride_vz + hk * stride_vh + offs_n[:, None] * stride_vn + offs_dv[None, :], offs_n,
                   seq_k, offs_dv, HEAD_DIM_V, BLOCK_DV, EVEN)
    dk = tl.zeros((BLOCK_N, BLOCK_D), dtype=tl.float32)
    dv = tl.zeros((BLOCK_N, BLOCK_DV), dtype=tl.float32)
    offset = seq_k - seq_q
    q_lo = tl.minimum(tl.maximum(start_n - offset, 0) // BLOCK_M * BLOCK_M, seq_q)
    q_mid = q_lo + tl.cdiv(tl.maximum(start_n + BLOCK_N - 1 - offset - q_lo, 0), BLOCK_M) * BLOCK_M
    q_mid = tl.minimum(q_mid, seq_q)
    g0 = tl.program_id(2) * group_chunk
    for g in range(g0, tl.minimum(g0 + group_chunk, group)):
        h = hk * group + g
        q_base = q_ptr + z * stride_qz + h * stride_qh
        do_base = do_ptr + z * stride_dz + h * stride_dh
        lse_base = lse_ptr + (z * n_heads + h) * seq_q
        delta_base = delta_ptr + (z * n_heads + h) * seq_q
        if CAUSAL:
            dk, dv = _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_dm, offs_n,
                                 offs_d, offs_dv, seq_q, offset, qk_scale, q_lo, q_mid, BLOCK_M, HEAD_DIM, BLOCK_D,
                                 HEAD_DIM_V, BLOCK_DV, True, EVEN, INPUT_PRECISION)
            dk, dv = _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_dm, offs_n,
                                 offs_d, offs_dv, seq_q, offset, qk_scale, q_mid, seq_q, BLOCK_M, HEAD_DIM, BLOCK_D,
                                 HEAD_DIM_V, BLOCK_DV, False, EVEN, INPUT_PRECISION)
        else:
            dk, dv = _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_dm, offs_n,
                                 offs_d, offs_dv, seq_q, offset, qk_scale, 0, seq_q, BLOCK_M, HEAD_DIM, BLOCK_D,
                                 HEAD_DIM_V, BLOCK_DV, False, EVEN, INPUT_PRECISION)
    rows = (tl.program_id(2).to(tl.int64) * tl.num_programs(1) + off_hz) * seq_k + offs_n[:, None]
    _store_rows(dk_ptr + rows * HEAD_DIM + offs_d[None, :], (dk * sm_scale).to(dk_ptr.dtype.element_ty), offs_n, seq_k,
                offs_d, HEAD_DIM, BLOCK_D)
    _store_rows(dv_ptr + rows * HEAD_DIM_V + offs_dv[None, :], dv.to(dv_ptr.dtype.element_ty), offs_n, seq_k, offs_dv,
                HEAD_DIM_V, BLOCK_DV)


@triton.jit
def _dq_tiles(dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, offs_dv, seq_k, offset,
              qk_scale, lo, hi, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
              HEAD_DIM_V: tl.constexpr, BLOCK_DV: tl.constexpr, DIAGONAL: tl.constexpr, EVEN: tl.constexpr,
              INPUT_PRECISION: tl.constexpr):
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = _load_rows(k_base + offs_n[:, None] * stride_kn + offs_d[None, :], offs_n, seq_k, offs_d, HEAD_DIM, BLOCK_D,
                       EVEN)
        v = _load_rows(v_base + offs_n[:, None] * stride_vn + offs_dv[None, :], offs_n, seq_k, offs_dv, HEAD_DIM_V,
                       BLOCK_DV, EVEN)
        qk = tl.dot(q, tl.trans(k), input_precision=INPUT_PRECISION)
        p = tl.math.exp2(qk * qk_scale - lse[:, None])
        if DIAGONAL:
            p = tl.where((offs_m[:, None] + offset >= offs_n[None, :]) & (offs_n[None, :] < seq_k), p, 0.0)
        elif not EVEN:
            p = tl.where(offs_n[None, :] < seq_k, p, 0.0)  # exp2(-lse) may be inf there, and inf * 0 is not 0
        ds = p * (tl.dot(do, tl.trans(v), input_precision=INPUT_PRECISION) - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=INPUT_PRECISION)
    return dq


@triton.autotune(configs=CONFIGS["dq"], key=KEY, do_bench=autotune_bench,
                 prune_configs_by={"early_config_prune": pruner("dq", DQ_TILES, "q_ptr")})
@triton.heuristics(EVEN)
@triton.jit
def _attn_bwd_dq_kernel(q_ptr, k_ptr, v_ptr, do_ptr, dq_ptr, lse_ptr, delta_ptr, stride_qz, stride_qh, stride_qm,
                        stride_kz, stride_kh, stride_kn, stride_vz, stride_vh, stride_vn, stride_dz, stride_dh,
                        stride_dm, n_heads, n_kv_heads, seq_q, seq_k, sm_scale, qk_scale, HEAD_DIM: tl.constexpr,
                        BLOCK_D: tl.constexpr, HEAD_DIM_V: tl.constexpr, BLOCK_DV: tl.constexpr, CAUSAL: tl.constexpr,
                        INPUT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        EVEN: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    off_hz = tl.program_id(1)
    z, h = (off_hz // n_heads).to(tl.int64), (off_hz % n_heads).to(tl.int64)
    hk = h // (n_heads // n_kv_heads)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d, offs_dv = tl.arange(0, BLOCK_D), tl.arange(0, BLOCK_DV)
    q = _load_rows(q_ptr + z * stride_qz + h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :], offs_m, seq_q,
                   offs_d, HEAD_DIM, BLOCK_D, EVEN)
    do = _load_rows(do_ptr + z * stride_dz + h * stride_dh + offs_m[:, None] * stride_dm + offs_dv[None, :], offs_m,
                    seq_q, offs_dv, HEAD_DIM_V, BLOCK_DV, EVEN)
    lse = _row_stat(lse_ptr + off_hz.to(tl.int64) * seq_q, offs_m, seq_q, float("inf"), EVEN)
    delta = _row_stat(delta_ptr + off_hz.to(tl.int64) * seq_q, offs_m, seq_q, 0.0, EVEN)
    k_base = k_ptr + z * stride_kz + hk * stride_kh
    v_base = v_ptr + z * stride_vz + hk * stride_vh
    dq = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    offset = seq_k - seq_q
    if CAUSAL:  # the forward's bounds: key tiles below diag_lo seen by every row, [diag_lo, hi) masked
        hi = tl.maximum(tl.minimum(seq_k, start_m + BLOCK_M + offset), 0)
        diag_lo = tl.maximum(start_m + offset, 0) // BLOCK_N * BLOCK_N
        dq = _dq_tiles(dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, offs_dv, seq_k,
                       offset, qk_scale, 0, diag_lo, BLOCK_N, HEAD_DIM, BLOCK_D, HEAD_DIM_V, BLOCK_DV, False, EVEN,
                       INPUT_PRECISION)
        dq = _dq_tiles(dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, offs_dv, seq_k,
                       offset, qk_scale, diag_lo, hi, BLOCK_N, HEAD_DIM, BLOCK_D, HEAD_DIM_V, BLOCK_DV, True, EVEN,
                       INPUT_PRECISION)
    else:
        dq = _dq_tiles(dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, offs_dv, seq_k,
                       offset, qk_scale, 0, seq_k, BLOCK_N, HEAD_DIM, BLOCK_D, HEAD_DIM_V, BLOCK_DV, False, EVEN,
                       INPUT_PRECISION)
    out = off_hz.to(tl.int64) * seq_q * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    _store_rows(dq_ptr + out, (dq * sm_scale).to(dq_ptr.dtype.element_ty), offs_m, seq_q, offs_d, HEAD_DIM, BLOCK_D)


def group_chunks(batch: int, kv_heads: int, group: int, seq_k: int, head_dim: int, element_size: int, sms: int,
                 chunks: int | None = None) -> int:
    """How many dK dV programs share a group's query heads: one unless the grid (key tiles at the widest BLOCK_N that
    fits x batch x K/V heads) falls short of DKDV_SPLIT_BELOW programs a SM; then as many as reach DKDV_GROUP_FILL a
    SM, each of at least one head. ``chunks`` forces a count (tests); sms 0 (the interpreter): one."""
    if chunks is None:
        widest = max(t[1] for t in tiles_for("dkdv", DKDV_TILES, head_dim, element_size))
        grid = triton.cdiv(seq_k, widest) * batch * kv_heads
        chunks = min(group, triton.cdiv(DKDV_GROUP_FILL * sms, grid)) if sms and grid < DKDV_SPLIT_BELOW * sms else 1
    return triton.cdiv(group, triton.cdiv(group, max(1, min(chunks, group))))  # none left without a head


def attention_backward(q, k, v, o, lse, do, causal: bool, sm_scale: float, configs: dict | None = None,
                       chunks: int | None = None):
    """(dQ, dK, dV), dK and dV of K's and V's shapes (summed over each group's query heads): delta = rowsum(dO * O),
    then dK and dV over key tiles, dQ over query tiles. ``configs``: {"dkdv": tile, "dq": tile}, either or both, a tile
    {BLOCK_M, BLOCK_N, num_warps, num_stages} instead of the autotuner's (the lab's); ``chunks``: split each group's
    query heads into this many dK dV programs (group_chunks' count otherwise)."""
    configs = configs or {}
    if do.stride(-1) != 1:
        do = do.contiguous()  # autograd may hand an expanded gradient: the kernels read rows of head_dim
    key = None if configs or chunks is not None else backward_key(q, k, v, o, lse, do, causal, sm_scale,
                                                                  input_precision(q.dtype))
    if key is not None and (launch := LAUNCHES.get(key)) is not None:  # checked and planned by an earlier call
        return launch(q, k, v, o, lse, do)
    batch, heads, seq_q, head_dim = q.shape
    kv_heads, seq_k, head_dim_v = k.shape[1], k.shape[2], v.shape[-1]
    if o.shape != (*q.shape[:3], head_dim_v) or do.shape != o.shape:
        raise ValueError(f"attention_backward needs O and dO of (batch, Hq, Sq, Dv) = {(*q.shape[:3], head_dim_v)}, "
                         f"got {tuple(o.shape)} and {tuple(do.shape)}")
    for kind, config in configs.items():
        check_config(kind, config, max(head_dim, head_dim_v), q.element_size())
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)  # contiguous
    dk, dv = (torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (k, v))
    delta = torch.empty_like(lse)
    if dq.numel() == 0 or dk.numel() == 0:
        return dq.zero_(), dk.zero_(), dv.zero_()
    v_meta = dict(HEAD_DIM_V=head_dim_v, BLOCK_DV=block_d(head_dim_v))
    first = LAUNCHES.launch(
        key and ("delta", key), _attn_bwd_preprocess, (triton.cdiv(seq_q, 64), batch * heads),
        (o, do, delta, *o.stride()[:3], *do.stride()[:3], heads, seq_q, head_dim_v, v_meta["BLOCK_DV"]),
        dict(BLOCK_M=64), n_head=3)
    meta = dict(HEAD_DIM=head_dim, BLOCK_D=block_d(head_dim), **v_meta)
    strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *do.stride()[:3])
    scales = (heads, kv_heads, seq_q, seq_k, sm_scale, sm_scale * LOG2E)
    meta |= dict(CAUSAL=causal, INPUT_PRECISION=input_precision(q.dtype))
    group = heads // kv_heads
    sms = multiprocessor_count(q.device) if q.device.type == "cuda" else 0
    n = group_chunks(batch, kv_heads, group, seq_k, max(head_dim, head_dim_v), q.element_size(), sms, chunks)
    part_k, part_v = (dk, dv) if n == 1 else (torch.empty((n, *t.shape), dtype=torch.float32, device=t.device)
                                              for t in (k, v))
    grid = lambda META: (triton.cdiv(seq_k, META["BLOCK_N"]), batch * kv_heads, n)  # noqa: E731
    kernel = _attn_bwd_dkdv_kernel.fn if "dkdv" in configs else _attn_bwd_dkdv_kernel
    args = (q, k, v, do, part_k, part_v, lse, delta, *strides, *scales, triton.cdiv(group, n))
    second = LAUNCHES.launch(key and ("dkdv", key), kernel, grid, args, dict(meta, **configs.get("dkdv", {})), n_head=8)
    if n > 1:  # the chunks' partial sums, added in a fixed order: deterministic
        dk.copy_(part_k.sum(0))
        dv.copy_(part_v.sum(0))
    grid = lambda META: (triton.cdiv(seq_q, META["BLOCK_M"]), batch * heads)  # noqa: E731
    kernel = _attn_bwd_dq_kernel.fn if "dq" in configs else _attn_bwd_dq_kernel
    args = (q, k, v, do, dq, lse, delta, *strides, *scales)
    third = LAUNCHES.launch(key and ("dq", key), kernel, grid, args, dict(meta, **configs.get("dq", {})), n_head=7)
    if first is not None and second is not None and third is not None:
        LAUNCHES.keep(key, KeptBackward(first, second, third, n))
    return dq, dk, dv
