"""The matrix product's autotuning configs and their pruning: which tiles each kernel is offered, at which dtype and
input precision, within shared memory (kernels/matmul/__init__.py builds its autotuners from these)."""
from __future__ import annotations

import triton

from kernels._shared.tables import track_swaps, values
from kernels.matmul.table import MATMUL

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key

# H200: 227 KiB of shared memory usable by one block; configs needing more are dropped before costing a compile
SMEM_LIMIT_BYTES = 227 * 1024
IEEE_TILES = values(MATMUL["IEEE_TILES"])  # FFMA tiles offered to IEEE fp32 products only, beside the narrow ones


def get_matmul_configs() -> list[triton.Config]:
    """The pointer kernel's tiles: each the autotuner chose in some cell of the H200 reference (autotune_config: 64x32,
    64x64 fp32; 64x128, 64x256 small 16-bit; 128x128 at 1793), the widest Hopper tile, and TF32_TILES for TF32, then
    IEEE_TILES for IEEE fp32 (interpreter: the first only, rooflab.triton_utils.autotune_configs)."""
    return _configs([(128, 256, 64, 8, 3, 8), (128, 128, 64, 8, 4, 8), (64, 256, 32, 8, 4, 4), (64, 128, 64, 8, 4, 4),
                     (64, 64, 64, 8, 4, 4), (128, 128, 32, 8, 3, 4), (128, 256, 32, 8, 3, 8), (64, 32, 32, 8, 5, 2),
                     *IEEE_TILES])


# TF32 on a K-major B: 337-347 TFLOP/s at 128x128x32 (3 stages, 4 warps), 313-330 at 128x256x32, where the 16-bit
# tiles are pruned to 64 wide at fp32's size (data/tuning/tune_tf32_kmajor.csv); offered to TF32 products only.
TF32_TILES = {(128, 128, 32), (128, 256, 32)}


def _configs(tiles, pre_hook=None) -> list[triton.Config]:
    """triton.Configs from (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_stages, num_warps) tuples."""
    return [
        triton.Config({
            "BLOCK_M": bm,
            "BLOCK_N": bn,
            "BLOCK_K": bk,
            "GROUP_M": group_m
        }, num_stages=stages, num_warps=warps, pre_hook=pre_hook) for bm, bn, bk, group_m, stages, warps in tiles
    ]


def _tile(config: triton.Config) -> tuple:  # as IEEE_TILES lists it
    kw = config.kwargs
    return kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], kw["GROUP_M"], config.num_stages, config.num_warps


def _smem_bytes(config: triton.Config, element_size: int) -> int:  # the pipeline's A and B tiles, one per stage
    kw = config.kwargs
    return config.num_stages * (kw["BLOCK_M"] + kw["BLOCK_N"]) * kw["BLOCK_K"] * element_size


# IEEE fp32 products (FMA units, not tensor cores): the reference chose tiles of at most 64 x 64 at every size.
IEEE_MAX_TILE = 64 * 64


def _fits(config: triton.Config, element_size: int, ieee: bool, epilogue: bool = False) -> bool:
    """Whether a config's pipelined tiles (and the TMA kernel's epilogue tile) fit in shared memory at this element
    size, and, for IEEE fp32 products, whether its tile is one such products can use (IEEE_TILES are)."""
    kw = config.kwargs
    smem = _smem_bytes(config, element_size) + (kw["BLOCK_M"] * kw["BLOCK_N"] * element_size if epilogue else 0)
    wide = kw["BLOCK_M"] * kw["BLOCK_N"] > IEEE_MAX_TILE and _tile(config) not in IEEE_TILES
    return smem <= SMEM_LIMIT_BYTES and not (ieee and wide)


def _prune_configs(configs, named_args, **kwargs):
    """Drop configs whose pipelined tiles cannot fit in shared memory at this dtype (float32 tiles are twice as big),
    wide tiles for IEEE fp32 products, TF32_TILES for all but TF32 and IEEE_TILES for all but IEEE fp32."""
    element_size = named_args["a_ptr"].element_size()
    ieee = kwargs.get("INPUT_PRECISION") == "ieee" and element_size == 4
    tf32 = kwargs.get("INPUT_PRECISION") in ("tf32", "tf32x3") and element_size == 4  # 16-bit ones say "tf32" too
    return [
        c for c in configs if _fits(c, element_size, ieee) and
        (tf32 or (c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]) not in TF32_TILES) and
        (ieee or _tile(c) not in IEEE_TILES)
    ] or configs[-1:]


def get_tma_configs() -> list[triton.Config]:
    """Tiles for the TMA kernel; the pre-hook gives each descriptor its block shape for the config being run."""
    # The tiles the reference chose (128x256 for 16-bit, 128x64 for TF32, 64x64 for IEEE fp32) and 128x128.
    return _configs([(128, 256, 64, 8, 3, 8), (128, 128, 64, 8, 4, 8), (128, 64, 64, 8, 4, 4), (64, 64, 64, 8, 4, 4)],
                    pre_hook=_set_block_shapes)


def _set_block_shapes(nargs):
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk] if nargs.get("B_KMAJOR") else [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn]


def _prune_tma_configs(configs, named_args, **kwargs):
    element_size = named_args["c_desc"].base.element_size()
    ieee = kwargs.get("INPUT_PRECISION") == "ieee"
    return [c for c in configs if _fits(c, element_size, ieee, epilogue=True)] or configs[-1:]
