"""FlashAttention-2's launch choices (_shared/tables.py says how to read a table): the values its plan reads, each
with a one-line reason and its evidence."""
from __future__ import annotations

from kernels._shared.tables import Choice, T

# FlashAttention-2 (kernels/attention/__init__.py, backward.py): tiles (BLOCK_M, BLOCK_N, num_warps, num_stages),
# each list autotuned per (seq, head dim, mask, dtype), its first the interpreter's.
ATTENTION = {
    "TMA_TILES":
    Choice(((128, 128, 8, 3), (64, 64, 4, 3), (128, 64, 8, 4)),
           "the best of the tutorial's Hopper tiles: 128x128 w8 s3 at head dim 128, seq >= 4096; 64x64 w4 "
           "s3 at seq 1024 and head dim 64", T + "attention_tiles_s29_d1.csv"),
    "POINTER_TILES":
    Choice(((128, 128, 8, 3), (128, 64, 8, 4)),
           "the tutorial's Hopper tiles less 128x64 w4 s3, 0.75x 128x128 w8 s3 at head dim 128",
           T + "attention_tiles_s29_d1.csv"),
    "HEAVY_FIRST":
    Choice(
        True, "causal: a head's longest query tiles first; bf16 1x16x16384 0.878 -> 0.938 of cuDNN, "
        "elsewhere within noise", T + "attention_s29_d3.csv"),
    "DKDV_TILES":
    Choice(((64, 128, 8, 4), (32, 64, 4, 5), (32, 64, 4, 3)),
           "backward alone 1.06-1.10x the old 64x128 w8 s3 at bf16 head dim 128; 32x64 w4 s3 fits "
           "fp32 in shared memory", T + "attention_bwd_s29_d8.csv"),
    # a group's query heads are split across dK dV programs (partial sums, then a fixed-order sum) where the grid of
    # key tiles x K/V heads falls short of DKDV_SPLIT_BELOW programs a SM, into as many chunks as reach
    # DKDV_GROUP_FILL a SM (at most one head each: a group of up to 8 gets a head a program at any grid under a
    # wave). Timed at 64 programs (split) and 512 and 1024 (not split); none between.
    "DKDV_SPLIT_BELOW":
    Choice(
        1, "a grid of a wave or more: 2-4 chunks slowed the H100 backward alone 1-30 % (1024 x 8192 and 4x32:8 "
        "heads at 4096, d128)", T + "h100_attention_bwd_group_split.csv"),
    "DKDV_GROUP_FILL":
    Choice(
        8, "under a wave a head a program was fastest (H100 bwd alone, ms, unsplit / 3 chunks / a head each: "
        "14:2 d64 0.597/0.401/0.367, 8:1 d256 2.012/1.201/1.101)", T + "h100_attention_bwd_group_split.csv"),
    "DQ_TILES":
    Choice(((128, 32, 4, 3), (128, 64, 8, 3), (64, 32, 4, 3)),
           "the tutorial's Hopper tiles; 128x64 w8 s3 is also the best of attnbwd's dQ tiles",
           T + "attention_bwd_s29_d8.csv"),
    "FALLBACK_TILES":
    Choice(
        {
            "fwd": ((128, 64, 8, 2), (64, 64, 4, 2), (64, 32, 4, 2), (32, 32, 4, 2)),
            "dkdv": ((32, 64, 4, 2), (32, 32, 4, 2), (16, 32, 4, 2)),
            "dq": ((64, 32, 4, 2), (32, 32, 4, 2), (32, 16, 4, 2))
        }, "two stages, smaller tiles: what fits 227 KiB at head dims 192-256 and fp32 (plan.py "
        "estimates each); the last of each fits fp32 at 256", None),
}
