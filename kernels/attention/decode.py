"""Split-KV attention for decode ("flash-decoding"): a few query rows (seq_q 1-16) against a long K/V cache.

One query row per head is too little work for FlashAttention-2's grid (one program per query tile and head): the
keys are split across programs instead. Each program takes one K/V head, one tile of its query rows (the group's
query heads x seq_q rows in the tile's M dimension, so a K/V tile is read once per group, never repeated per query
head) and one slice of the keys; it runs the online softmax (base 2, fp32 accumulation) over its slice and writes
a partial output and logsumexp. A second kernel weighs the partials by exp2(lse_s - lse) and sums them. The split
count is a pure function of the shape and the SM count (decode_plan), so a single row still fills the GPU. Causal is
aligned bottom-right (row i sees keys j <= i + seq_k - seq_q, as FlashAttention since 2.1). Forward only: decode
computes no gradients. Reference: Dao et al., "Flash-Decoding for long-context inference" (2023).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._shared import tables
from kernels._shared.fastlaunch import LaunchCache, spec
from kernels._shared.tables import track_swaps
from kernels.attention.backward import LOG2E
from kernels.attention.plan import check_scale
from kernels.matmul.operands import input_precision_for
from rooflab.triton_utils import check_device, interpreting, multiprocessor_count


@triton.jit
def _load_kv(ptrs, offs_n, offs_d, seq_k, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, MASKED: tl.constexpr):
    """A (BLOCK_N, BLOCK_D) key or value tile: keys past seq_k (MASKED) and the padded head dims read as 0."""
    if MASKED:
        if BLOCK_D != HEAD_DIM:
            tile = tl.load(ptrs, mask=(offs_n[:, None] < seq_k) & (offs_d[None, :] < HEAD_DIM), other=0.0)
        else:
            tile = tl.load(ptrs, mask=offs_n[:, None] < seq_k, other=0.0)
    elif BLOCK_D != HEAD_DIM:
        tile = tl.load(ptrs, mask=offs_d[None, :] < HEAD_DIM, other=0.0)
    else:
        tile = tl.load(ptrs)
    return tile


@triton.jit
def _decode_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd, offs_d, limit, seq_k,
                  qk_scale, lo, hi, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                  MASKED: tl.constexpr, PRECISION: tl.constexpr):
    """Key tiles [lo, hi): masked, keys past seq_k or past a row's ``limit`` (causal) drop out; a row with no key
    yet keeps m = -inf, its sums 0 (exp2 of a safe 0 instead of -inf - -inf)."""
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = _load_kv(k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd, offs_n, offs_d, seq_k,
                     HEAD_DIM, BLOCK_D, MASKED)
        v = _load_kv(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd, offs_n, offs_d, seq_k,
                     HEAD_DIM, BLOCK_D, MASKED)
        qk = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
        if MASKED:
            qk = tl.where(offs_n[None, :] <= limit[:, None], qk, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        p = tl.math.exp2(qk - m_safe[:, None])
        alpha = tl.math.exp2(m_i - m_safe)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _decode_split_kernel(q_ptr, k_ptr, v_ptr, o_ptr, part_o_ptr, part_lse_ptr, stride_qz, stride_qh, stride_qm,
                         stride_qd, stride_kz, stride_kh, stride_kn, stride_kd, stride_vz, stride_vh, stride_vn,
                         stride_vd, kv_heads, group, seq_q, seq_k, chunk, splits, qk_scale, HEAD_DIM: tl.constexpr,
                         CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                         SINGLE: tl.constexpr, PRECISION: tl.constexpr):
    """Grid (splits, batch * kv_heads, row tiles). Row r of a K/V head's group is query head r // seq_q, query
    r % seq_q; its output row is (batch * kv_heads + kv head) * group * seq_q + r of O (batch, heads, seq_q, dim)."""
    split = tl.program_id(0)
    off_bh = tl.program_id(1).to(tl.int64)
    z, h = off_bh // kv_heads, off_bh % kv_heads
    rows = group * seq_q
    offs_r = tl.program_id(2) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    qh, qi = h * group + offs_r // seq_q, offs_r % seq_q
    q_ptrs = q_ptr + z * stride_qz + qh[:, None] * stride_qh + qi[:, None] * stride_qm + offs_d[None, :] * stride_qd
    q = tl.load(q_ptrs, mask=(offs_r[:, None] < rows) & (offs_d[None, :] < HEAD_DIM), other=0.0)
    k_base = k_ptr + z * stride_kz + h * stride_kh
    v_base = v_ptr + z * stride_vz + h * stride_vh
    if CAUSAL:
        limit = qi + seq_k - seq_q  # a row's last key
    else:
        limit = qi * 0 + seq_k - 1
    lo = split * chunk
    hi = tl.minimum(lo + chunk, seq_k)
    visible = seq_k - seq_q + 1 if CAUSAL else seq_k  # keys every row sees
    mid = lo + tl.maximum(tl.minimum(hi, visible) - lo, 0) // BLOCK_N * BLOCK_N  # whole unmasked tiles end here
    m_i = tl.full((BLOCK_M, ), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M, ), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    acc, l_i, m_i = _decode_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd, offs_d,
                                  limit, seq_k, qk_scale, lo, mid, HEAD_DIM, BLOCK_N, BLOCK_D, False, PRECISION)
    acc, l_i, m_i = _decode_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd, offs_d,
                                  limit, seq_k, qk_scale, mid, hi, HEAD_DIM, BLOCK_N, BLOCK_D, True, PRECISION)
    out_row = off_bh * rows + offs_r
    keep = (offs_r[:, None] < rows) & (offs_d[None, :] < HEAD_DIM)
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)  # a row with no key in this slice: O 0, lse -inf (weight 0)
    if SINGLE:
        o = (acc / l_safe[:, None]).to(o_ptr.dtype.element_ty)
        tl.store(o_ptr + out_row[:, None] * HEAD_DIM + offs_d[None, :], o, mask=keep)
    else:
        part = out_row * splits + split
        tl.store(part_o_ptr + part[:, None] * HEAD_DIM + offs_d[None, :], acc / l_safe[:, None], mask=keep)
        lse = tl.where(l_i == 0.0, -float("inf"), m_i + tl.math.log2(l_safe))
        tl.store(part_lse_ptr + part, lse, mask=offs_r < rows)


@triton.jit
def _decode_combine_kernel(o_ptr, part_o_ptr, part_lse_ptr, splits, head_dim, BLOCK_S: tl.constexpr,
                           CHUNK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    """One program per output row: O = sum_s exp2(lse_s - lse) O_s, lse = log2 sum_s exp2(lse_s); the partial
    outputs CHUNK_S splits at a time (registers: CHUNK_S x BLOCK_D, whatever the split count)."""
    row = tl.program_id(0).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    offs_s = tl.arange(0, BLOCK_S)
    lse = tl.load(part_lse_ptr + row * splits + offs_s, mask=offs_s < splits, other=-float("inf"))
    m = tl.max(lse, 0)  # finite: the row's last key is in some slice
    acc = tl.zeros((BLOCK_D, ), dtype=tl.float32)
    for s0 in range(0, splits, CHUNK_S):
        offs = s0 + tl.arange(0, CHUNK_S)
        w = tl.math.exp2(tl.load(part_lse_ptr + row * splits + offs, mask=offs < splits, other=-float("inf")) - m)
        parts = tl.load(part_o_ptr + (row * splits + offs)[:, None] * head_dim + offs_d[None, :],
                        mask=(offs[:, None] < splits) & (offs_d[None, :] < head_dim), other=0.0)
        acc += tl.sum(parts * w[:, None], 0)
    o = acc / tl.sum(tl.math.exp2(lse - m), 0)
    tl.store(o_ptr + row * head_dim + offs_d, o.to(o_ptr.dtype.element_ty), mask=offs_d < head_dim)


SUPPORTED = (torch.float32, torch.bfloat16, torch.float16)
MAX_HEAD_DIM = 256  # any head size up to it, padded to a power of two of at least 64 inside (80, 96 -> 128)
MAX_SEQ_Q = 16
MAX_GRID_Y = 65535  # CUDA's limit on a grid's second dimension
MAX_ROWS = 64  # query rows (group x seq_q) in one tile; more: several row tiles, each reading the K/V slice again
# Launch choices by padded head size: key tile, pipeline and the programs a SM the split count aims at (K and V tiles
# of 2 x stages x BLOCK_N x BLOCK_D fit Hopper's shared memory in fp32 too). 128: the 64-key tile at two programs a SM
# for every head count; with whole waves it matches or beats the 32-key tile at four (what batch x K/V heads >= 32 took
# before) by a median 1.4 % over 18 H100 cells at 8k-128k keys; one query row there 0.995-1.003x the best SDPA backend
# (data/tuning/h100_logs/8_attn_decode_tiles.csv; six other tiles timed beside it).
KEY_TILES = {64: (64, 4, 3, 2), 128: (64, 4, 3, 2), 256: (32, 8, 2, 2)}  # BLOCK_D -> (BLOCK_N, warps, stages, per SM)
FP32_KEY_TILES = {64: (32, 8, 2, 2), 128: (16, 8, 2, 2), 256: (16, 8, 2, 2)}  # with FP32_MAX_ROWS: no spills (sm_90)
FP32_MAX_ROWS = 32  # fp32 query rows a tile: IEEE dots run on FMAs, 64 rows of head dim 128 spilled registers
# The split count: per_sm x SMs over the (batch, K/V head, row tile) programs, rounded down (WHOLE_WAVES: every
# program in the first wave, a few slots idle) or up (a last partial wave). Down: 1.00-1.13x (median 1.03x) in the
# 18 H100 cells where the counts differ, none slower beyond 0.2 % (data/tuning/h100_logs/8_attn_decode_waves.csv,
# with the key tiles of the time: every count that moved was at 32 keys, four a SM; untimed on the 64-key tile).
WHOLE_WAVES = True
MIN_SPLIT_KEYS = 128  # fewer keys per split than this: the combine costs more than the split gains
MAX_SPLITS = 256  # the combine holds one row's partial lse's in one tile
COMBINE_SPLITS = 16  # partial outputs the combine sums at a time
FALLBACK_BLOCK_N = 16  # a launch out of shared memory or registers is retried at 16 keys a tile, unpipelined
_LAUNCHES = LaunchCache("attention_decode")  # a call's launches kept under its inputs' specs (kept())
track_swaps(__name__)  # a launch choice swapped from outside (a test, scripts/bench_attention_decode.py) is a new key


def _pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def key_tile(block_d: int, dtype: torch.dtype) -> tuple:
    """(BLOCK_N, warps, stages, programs a SM) for a padded head size."""
    return (FP32_KEY_TILES if dtype == torch.float32 else KEY_TILES)[block_d]


def decode_plan(batch: int, kv_heads: int, seq_k: int, sm_count: int, rows: int = 1, head_dim: int = 128,
                dtype: torch.dtype = torch.bfloat16, splits: int | None = None) -> dict:
    """The launch for one decode call, a pure function: the query tile (rows = group x seq_q query rows per K/V
    head), the key tile, and the split of seq_k: about the tile's programs per SM (WHOLE_WAVES: rounded down), at
    least MIN_SPLIT_KEYS keys each, every split holding at least one key (chunk a multiple of BLOCK_N). ``splits``
    forces a count (tests, the combine path at small sizes); it is capped at one key tile per split."""
    block_d = max(64, _pow2(head_dim))
    block_m = min(FP32_MAX_ROWS if dtype == torch.float32 else MAX_ROWS, max(16, _pow2(rows)))
    row_tiles = -(-rows // block_m)
    block_n, warps, stages, per_sm = key_tile(block_d, dtype)
    tiles = max(1, -(-seq_k // block_n))
    if splits is None:
        base, slots = batch * kv_heads * row_tiles, per_sm * sm_count
        fill = slots // base if WHOLE_WAVES and base <= slots else -(-slots // base)
        splits = max(1, min(fill, -(-seq_k // MIN_SPLIT_KEYS), MAX_SPLITS))
    elif not 1 <= splits <= MAX_SPLITS:
        raise ValueError(f"decode_plan: splits must be 1-{MAX_SPLITS}, got {splits}")
    chunk = -(-tiles // min(splits, tiles)) * block_n  # whole key tiles per split
    return {
        "splits": max(1, -(-seq_k // chunk)),
        "chunk": chunk,
        "row_tiles": row_tiles,
        "BLOCK_M": block_m,
        "BLOCK_N": block_n,
        "BLOCK_D": block_d,
        "num_warps": warps,
        "num_stages": stages
    }


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> None:
    check_device(q, k, v)
    if q.dim() != 4 or k.dim() != 4 or k.shape != v.shape:
        raise ValueError(f"decode_attention needs q (batch, heads, seq_q, head_dim) and k, v of one shape (batch, "
                         f"kv_heads, seq_k, head_dim), got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    (b, hq, sq, d), (bk, hkv, sk, dk) = q.shape, k.shape
    if bk != b or dk != d or hkv < 1 or hq % hkv:
        raise ValueError(f"decode_attention needs one batch and head_dim for q and k, v and kv_heads dividing the "
                         f"query heads, got q {tuple(q.shape)}, k {tuple(k.shape)}")
    if q.dtype not in SUPPORTED or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"decode_attention supports float32, bfloat16 and float16 (one for q, k, v), got "
                         f"{q.dtype}, {k.dtype}, {v.dtype}")
    if b * hkv > MAX_GRID_Y:
        raise ValueError(f"decode_attention runs batch x kv_heads on the grid's y axis, at most {MAX_GRID_Y}; got "
                         f"{b} x {hkv} (split the batch)")
    if not 1 <= d <= MAX_HEAD_DIM:
        raise ValueError(f"decode_attention supports head dims 1-{MAX_HEAD_DIM}, got {d}")
    if not 1 <= sq <= MAX_SEQ_Q:
        raise ValueError(f"decode_attention takes 1-{MAX_SEQ_Q} query rows (longer: the FlashAttention-2 kernel), "
                         f"got seq_q {sq}")
    if sk < 1 or (causal and sk < sq):
        raise ValueError(f"decode_attention needs seq_k >= 1 and, causal (aligned bottom-right), seq_k >= seq_q; got "
                         f"seq_q {sq}, seq_k {sk}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if max(t.shape[2] * t.stride(2), t.shape[3] * t.stride(3)) >= 2**31:
            raise ValueError(f"decode_attention needs {name}'s in-head offsets below 2^31, got strides {t.stride()}")


def takes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> bool:
    """Whether decode_attention runs this call (1-16 query rows, a supported head dim and grid, unit last strides as
    FlashAttention-2's): attention_triton's forward without gradients sends such calls here (then with check=False)
    instead of to the FlashAttention-2 grid. Calls with more query rows return at the first test."""
    if q.dim() != 4 or not 1 <= q.shape[2] <= MAX_SEQ_Q or any(t.stride(-1) != 1 for t in (q, k, v)):
        return False
    try:
        _check(q, k, v, causal)
    except ValueError:
        return False
    return True


def decode_attention(q, k, v, causal: bool = True, scale: float | None = None, splits: int | None = None,
                     check: bool = True):
    """softmax(Q K^T scale) V for q (batch, heads, seq_q <= 16, head_dim) against k, v (batch, kv_heads, seq_k,
    head_dim), kv_heads dividing heads (grouped or multi-query heads read in place, not repeated). Causal: aligned
    bottom-right. Forward only (no autograd: decode has no backward). fp32 inputs: the dots follow
    torch's TF32 setting (TF32 when on, IEEE fp32 when off). ``splits``: force the split count;
    ``check=False``: the inputs were checked (takes)."""
    if not isinstance(q, torch.Tensor) or q.dim() != 4:  # the checks say what is wrong
        _check(q, k, v, causal)
    if scale is None and not q.shape[-1]:  # a head size of 0: refused by name
        _check(q, k, v, causal)
    if type(scale) is not float:  # a tensor, a NumPy number: the kernel and the launch key take a float
        scale = q.shape[-1]**-0.5 if scale is None else check_scale(scale, "decode_attention")
    launch = kept(q, k, v, causal, scale) if splits is None else None
    if launch is not None:  # these specs (this scale with them) were checked and planned by an earlier call
        return launch(q, k, v)
    check_scale(scale, "decode_attention")
    if check:
        _check(q, k, v, causal)
    (batch, heads, seq_q, head_dim), (kv_heads, seq_k) = q.shape, k.shape[1:3]
    group = heads // kv_heads
    sm = 1 if interpreting() else multiprocessor_count(q.device)
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    if o.numel() == 0:  # no batch or no head: nothing to plan
        return o
    plan = decode_plan(batch, kv_heads, seq_k, sm, group * seq_q, head_dim, q.dtype, splits)
    n, single = plan["splits"], plan["splits"] == 1
    part_o = o if single else torch.empty((o.numel() // head_dim, n, head_dim), dtype=torch.float32, device=q.device)
    part_lse = o if single else torch.empty((o.numel() // head_dim, n), dtype=torch.float32, device=q.device)
    grid = (n, batch * kv_heads, plan["row_tiles"])
    key = None if splits is not None else _key(q, k, v, causal, scale)
    for block_n, stages in ((plan["BLOCK_N"], plan["num_stages"]), (FALLBACK_BLOCK_N, 1)):  # chunk: a multiple of both
        try:
            first = _LAUNCHES.launch(
                key and ("split", key), _decode_split_kernel, grid,
                (q, k, v, o, part_o, part_lse, *q.stride(), *k.stride(), *v.stride(), kv_heads, group, seq_q, seq_k,
                 plan["chunk"], n, scale * LOG2E),
                dict(HEAD_DIM=head_dim, CAUSAL=causal, BLOCK_M=plan["BLOCK_M"], BLOCK_N=block_n,
                     BLOCK_D=plan["BLOCK_D"], SINGLE=single, PRECISION=input_precision_for(q.dtype),
                     num_warps=plan["num_warps"], num_stages=stages), n_head=6)
            break
        except triton.runtime.errors.OutOfResources as exc:
            if block_n == FALLBACK_BLOCK_N and stages == 1:
                raise ValueError(f"decode_attention: no tile of head dim {head_dim} in {q.dtype} fits this GPU "
                                 f"({exc})") from None
    second = None
    if not single:
        second = _LAUNCHES.launch(key and ("combine", key), _decode_combine_kernel, (o.numel() // head_dim, ),
                                  (o, part_o, part_lse, n, head_dim),
                                  dict(BLOCK_S=_pow2(n), CHUNK_S=COMBINE_SPLITS, BLOCK_D=plan["BLOCK_D"]), n_head=3)
    if first is not None and (single or second is not None):
        launch = _Kept()
        launch.split, launch.combine, launch.extra = first, second, None
        launch.parts = (tuple(part_o.shape), tuple(part_lse.shape))
        _LAUNCHES.keep(key, launch)
    return o


class _Kept:
    """A kept decode call: the split kernel's entry, then the combine's (None with one split), on fresh outputs."""
    __slots__ = ("split", "combine", "parts", "extra")

    def __call__(self, q, k, v):
        o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        if self.combine is None:
            self.split(q, k, v, o, o, o)
            return o
        part_o = torch.empty(self.parts[0], dtype=torch.float32, device=q.device)
        part_lse = torch.empty(self.parts[1], dtype=torch.float32, device=q.device)
        self.split(q, k, v, o, part_o, part_lse)
        self.combine(o, part_o, part_lse)
        return o


def _key(q, k, v, causal: bool, scale: float) -> tuple:
    """A decode call's launch key: what decides its checks, plan and Triton's specialisation (the inputs' specs,
    causal, scale, the fp32 dots' precision, which follows torch's TF32 switch, and the table version)."""
    return (spec(q), spec(k), spec(v), causal, float(scale), input_precision_for(q.dtype), tables.VERSION)


def kept(q, k, v, causal: bool, scale: float):
    """The kept launch of a call decode_attention made before with this key (_key), or None: a hit skips the checks
    and the plan (the key decides both), as attention_triton's loop wants."""
    return _LAUNCHES.get(_key(q, k, v, causal, scale))


def reference(q, k, v, causal: bool = True, scale: float | None = None) -> torch.Tensor:
    """The expression in float64 (differentiable: dK, dV summed over each group by autograd): K and V repeated to
    every query head, the causal mask aligned bottom-right. Memory: the (seq_q, seq_k) scores of every head."""
    q, k, v = (t.to(torch.float64) for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = q @ k.transpose(-1, -2) * (q.shape[-1]**-0.5 if scale is None else scale)
    if causal:
        seq_q, seq_k = q.shape[2], k.shape[2]
        rows, keys = torch.arange(seq_q, device=q.device), torch.arange(seq_k, device=q.device)
        s = s.masked_fill(keys[None, :] > rows[:, None] + seq_k - seq_q, float("-inf"))
    return torch.softmax(s, -1) @ v
