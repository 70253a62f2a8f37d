"""FlashAttention-2's checks and tile plan: which inputs it takes, the head-dim tile, the fp32 math mode, and which
tiles fit in shared memory. Plain values in and out (no launch): tests check it on the CPU.

Inputs: q (batch, Hq, Sq, D), k (batch, Hkv, Sk, D), v (batch, Hkv, Sk, Dv), Hkv dividing Hq (grouped-query; Hkv = 1
multi-query), D and Dv (DeepSeek-V2/V3's attention: 192 and 128) any size 1-MAX_HEAD_DIM, each padded inside to a
power-of-two tile with masked loads and stores. A tile's shared memory is estimated at the larger of the two
(smem_bytes: the held tiles, the loaded ones times num_stages, fp32's score tiles) and every tile over
SMEM_LIMIT_BYTES dropped; each kernel's FALLBACK_TILES fit at 256 in fp32, so every supported input has a tile
(tests/test_attention_families.py checks it).
"""
from __future__ import annotations

import torch
import triton

from kernels._shared.tables import track_swaps, values
from kernels.attention.table import ATTENTION
from kernels.matmul.operands import input_precision_for
from rooflab.triton_utils import check_config as check_tile
from rooflab.triton_utils import check_device

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key

SUPPORTED = (torch.float32, torch.bfloat16, torch.float16)
MAX_HEAD_DIM = 256  # any head size up to it: padded to BLOCK_D (the next power of two) inside
HEAD_DIMS = (16, 32, 64, 80, 96, 128, 192, 256)  # the sizes models ship, each checked against float64 on a GPU
SMEM_LIMIT_BYTES = 227 * 1024  # H100 / H200: the most shared memory one block may opt into
MAX_GRID_Y = 65535  # CUDA's limit on a grid's second dimension
FALLBACK_TILES = values(ATTENTION["FALLBACK_TILES"])
KINDS = ("fwd", "tma", "dkdv", "dq")  # the pointer forward, the TMA forward, the backward's two kernels


def block_d(head_dim: int) -> int:
    """The head-dim tile: the next power of two (tl.arange and tl.dot need one), at least 16."""
    return max(16, triton.next_power_of_2(head_dim))


def input_precision(dtype: torch.dtype) -> str:
    """tl.dot's input precision, as kernels/matmul's (and decode.py's): fp32 products follow
    torch's TF32 setting like torch.mm's: "ieee" when off (rooflab.kernel.math_mode("float32")),
    "tf32" when on; 16-bit products ignore it."""
    return input_precision_for(dtype)


def math_mode(dtype: torch.dtype) -> str:
    """The math mode a call runs in, as rooflab.kernel.math_mode_ran names it: fp32-ieee, tf32, bf16 or fp16."""
    if dtype == torch.float32:
        return "fp32-ieee" if input_precision(dtype) == "ieee" else "tf32"
    return {torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]


def smem_bytes(kind: str, tile: tuple, head_dim: int, element_size: int) -> int:
    """Shared memory of one program of ``kind`` at tile (BLOCK_M, BLOCK_N, num_warps, num_stages): the tiles held
    across the loop and one buffer per stage of the loaded ones (as kernels/matmul counts its pipeline); fp32 adds the
    score tiles (FMA and TF32 dots take both operands through shared memory; 16-bit ones take P from registers).
    fwd/tma: Q held, K and V loaded; dkdv: K and V held, Q and dO loaded; dq: Q and dO held, K and V loaded. The
    output tile after the loop reuses the pipeline's buffers. A tile this keeps that still fails to compile is skipped
    by the autotuner (an OutOfResources is a failed config there), and FALLBACK_TILES sit well inside."""
    m, n, _, stages = tile
    d = block_d(head_dim)
    scores = (2 if kind in ("dkdv", "dq") else 1) * m * n if element_size == 4 else 0
    if kind in ("fwd", "tma"):
        words = m * d + stages * 2 * n * d
    elif kind == "dkdv":
        words = 2 * n * d + stages * 2 * m * d
    elif kind == "dq":
        words = 2 * m * d + stages * 2 * n * d
    else:
        raise ValueError(f"kind {kind!r}: one of {KINDS}")
    return (words + scores) * element_size


def split_ok(kind: str, tile: tuple) -> bool:
    """The causal stages split at a tile edge: BLOCK_M a multiple of BLOCK_N (forward, dQ), the reverse (dK dV)."""
    m, n = tile[:2]
    return (n % m == 0) if kind == "dkdv" else (m % n == 0)


def fits(kind: str, tile: tuple, head_dim: int, element_size: int) -> bool:
    return split_ok(kind, tile) and smem_bytes(kind, tile, head_dim, element_size) <= SMEM_LIMIT_BYTES


def candidate_tiles(kind: str, table_tiles) -> list[tuple]:
    """The autotuner's list: the table's tiles (the first the interpreter's), then the fallbacks not among them."""
    tiles = list(table_tiles)
    return tiles + [t for t in FALLBACK_TILES["fwd" if kind == "tma" else kind] if t not in tiles]


def tiles_for(kind: str, table_tiles, head_dim: int, element_size: int) -> list[tuple]:
    """The table's tiles that fit at this head dim and element size; where one does not, the fallbacks that fit
    join them (so where all fit, the autotuner's choice is the table's alone, as measured)."""
    kept = [t for t in table_tiles if fits(kind, t, head_dim, element_size)]
    if len(kept) == len(table_tiles):
        return kept
    return kept + [
        t for t in candidate_tiles(kind, table_tiles)[len(table_tiles):]
        if fits(kind, t, head_dim, element_size) and t not in kept
    ]


def _tile_of(config) -> tuple:
    return (config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"], config.num_warps, config.num_stages)


def pruner(kind: str, table_tiles, tensor_arg: str):
    """An early_config_prune for triton.autotune over candidate_tiles(kind, table_tiles): tiles_for the call's head
    dim and element size (``tensor_arg``: the argument whose element size counts; a TMA descriptor's base). Under
    the interpreter (one config, no shared memory) an unfit one still runs."""

    def prune(configs, named_args, **kwargs):
        arg = named_args[tensor_arg]
        size = (arg.base if hasattr(arg, "base") else arg).element_size()
        dims = [kwargs.get(n, named_args.get(n)) for n in ("HEAD_DIM", "HEAD_DIM_V")]
        kept = tiles_for(kind, table_tiles, max(d for d in dims if d is not None), size)
        return [c for c in configs if _tile_of(c) in kept] or configs

    return prune


def check_config(kind: str, config: dict | None, head_dim: int, element_size: int) -> None:
    """A forced tile ({BLOCK_M, BLOCK_N, num_warps, num_stages}; the lab's) must split at a tile edge and fit."""
    if not config:
        return
    check_tile(config, ("BLOCK_M", "BLOCK_N"), ("num_warps", "num_stages", "HEAVY_FIRST", "WARP_SPECIALIZE"), kind)
    tile = (config["BLOCK_M"], config["BLOCK_N"], config.get("num_warps", 4), config.get("num_stages", 2))
    if not split_ok(kind, tile):
        outer, inner = ("BLOCK_N", "BLOCK_M") if kind == "dkdv" else ("BLOCK_M", "BLOCK_N")
        raise ValueError(f"{kind}: {outer} must be a multiple of {inner} (the causal stages split at a tile edge), "
                         f"got {config}")
    need = smem_bytes(kind, tile, head_dim, element_size)
    if need > SMEM_LIMIT_BYTES:
        raise ValueError(f"{kind}: tile {config} needs about {need // 1024} KiB of shared memory at head dim "
                         f"{head_dim}, element size {element_size}; at most {SMEM_LIMIT_BYTES // 1024} KiB")


def check_scale(scale, who: str = "attention_triton") -> float:
    """The softmax scale as a float: a number (a Python or NumPy one, a one-element tensor), finite and > 0 (the
    kernels take the max before scaling); a TypeError or ValueError naming it otherwise."""
    if isinstance(scale, (bool, str, bytes)) or (isinstance(scale, torch.Tensor) and scale.numel() != 1):
        raise TypeError(f"{who} needs a number as its scale, got {scale!r}")
    try:
        scale = float(scale)
    except (TypeError, ValueError):
        raise TypeError(f"{who} needs a number as its scale, got {type(scale).__name__}") from None
    if not 0 < scale < float("inf"):
        raise ValueError(f"{who} needs a finite scale > 0 (the max is taken before scaling), got {scale}")
    return scale


def check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[int, int, int, int, int, int, int]:
    """(batch, Hq, Hkv, Sq, Sk, D, Dv) of a call it supports; a ValueError or TypeError naming what is supported."""
    check_device(q, k, v)
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4 or k.shape[:3] != v.shape[:3]:
        raise ValueError(f"attention_triton needs q (batch, Hq, Sq, D), k (batch, Hkv, Sk, D) and v (batch, Hkv, Sk, "
                         f"Dv), got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    (batch, hq, sq, d), (kb, hkv, sk, kd) = q.shape, k.shape
    if kb != batch or kd != d:
        raise ValueError(f"attention_triton needs q and k with one batch and head size, got {tuple(q.shape)} and "
                         f"{tuple(k.shape)}")
    if hkv == 0 or hq % hkv:
        raise ValueError(f"attention_triton needs the K/V heads to divide the query heads (grouped-query; 1: "
                         f"multi-query), got {hq} query heads and {hkv} K/V heads")
    if q.dtype not in SUPPORTED or k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"attention_triton supports float32, bfloat16 and float16 (one for q, k, v), got "
                        f"{q.dtype}, {k.dtype}, {v.dtype}")
    if not (1 <= d <= MAX_HEAD_DIM and 1 <= v.shape[-1] <= MAX_HEAD_DIM):
        raise ValueError(f"attention_triton supports head dims 1-{MAX_HEAD_DIM} (padded to a power of two inside), "
                         f"got {d} for q and k, {v.shape[-1]} for v")
    if batch * hq > MAX_GRID_Y:
        raise ValueError(f"attention_triton runs batch x heads on the grid's y axis, at most {MAX_GRID_Y}; got "
                         f"{batch} x {hq} (split the batch)")
    if sq * v.shape[-1] >= 2**31:  # O (and dO) is contiguous, rows of V's size: in-head offsets are int32
        raise ValueError(f"attention_triton needs seq_q x Dv < 2^31 (O's in-head offsets are int32), got {sq} x "
                         f"{v.shape[-1]}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(-1) != 1 or t.shape[2] * t.stride(2) >= 2**31:
            raise ValueError(f"attention_triton needs {name} with unit stride over head_dim and seq x stride(seq) "
                             f"< 2^31 (in-head offsets are int32), got strides {t.stride()}")
    return batch, hq, hkv, sq, sk, d, v.shape[-1]
