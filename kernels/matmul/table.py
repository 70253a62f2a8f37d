"""Matmul's launch choices (kernels/_shared/tables.py says how to read a table): the values its plan reads, each
with a one-line reason and its evidence."""
from __future__ import annotations

from kernels._shared.tables import Choice, T

H = T + "h100_matmul_modes.csv"  # scripts/bench_matmul_modes.py on one H100, GPU time (do_bench median)
S = T + "h100_matmul_splits.csv"  # the same, its decode part with --explore (split counts and tiles)
ONE_LAUNCH = T + "h100_matmul_splits_one_launch.csv"  # the same with split-K in one launch (splitk.py)

MATMUL = {
    "TMA_MIN_MNK":
    Choice(
        2**35, "the TMA launch builds three tensor maps a call (about 90 us of host time): "
        "smaller products take the pointer kernel", None),
    "PAD_MIN_MNK":
    Choice(
        2**30, "K or N no multiple of 16: 95 TFLOP/s at 1793^3 bf16, 205 on zero-padded "
        "copies; products this large are padded, smaller ones untested", T + "alignment_g8.csv"),
    "KMAJOR_MIN_MNK":
    Choice(
        2**30, "TF32 on a K-major B copy: 337-347 TFLOP/s against 105-116 (cuBLAS 288-398) at "
        "2048-8192; smaller products untested", T + "tune_tf32_kmajor.csv"),

    # ... and at least this many rows: a decode-shaped product reads B once, so copying it (read and write) costs more
    "KMAJOR_MIN_M":
    Choice(
        129, "H100 llm sweep, TF32 decode rows over cuBLAS (GPU time): 128 rows with the copy 0.16-0.25x, 8-32 "
        "rows without it (below KMAJOR_MIN_MNK) 0.29-1.09x", T + "h100_matmul_llm_sweep.csv"),
    # TF32 "auto" with a K-major B (the KMAJOR_MIN_MNK copy): True takes the TMA kernel on it, False the pointer kernel
    "TF32_KMAJOR_TMA":
    Choice(
        False, "H100, product alone on a K-major B: pointer 304-355 TFLOP/s (0.94-1.02x cuBLAS "
        "TF32), TMA 180-191 at its autotuned tiles, 204-268 at 128x128x32", H),
    # IEEE fp32 products: True lets "auto" take the TMA kernel (when big enough), False keeps them on the pointer one
    "IEEE_TMA":
    Choice(
        False, "H100, 4096^3 and 8192^3: the TMA kernel 25 TFLOP/s (0.49x cuBLAS), the pointer kernel's "
        "FFMA tiles 41-44 (0.81-0.86x)", H),
    # (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_stages, num_warps): FFMA tiles offered to IEEE fp32 products only
    "IEEE_TILES":
    Choice(((64, 128, 32, 8, 3, 8), (128, 64, 16, 8, 4, 8), (64, 64, 32, 8, 3, 4)),
           "H100: the best three of six FFMA tiles on the pointer kernel, 0.85-0.86x cuBLAS IEEE at "
           "4096^3 and 8192^3 (all six 0.81-0.86x)", H),
    # skinny products (kernels/matmul/plan.py): min(M, N) at most this many rows or columns, K at least this deep
    "SPLITK_WHEN":
    Choice((128, 2048), "H100 bf16 over cuBLAS, 1-128 rows against 4096^2 and 8192^2: split as planned "
           "0.94-1.01x, unsplit 0.75-0.94x", S),
    # a split product: (programs a SM aimed at, fewest K elements a split, most splits)
    "SPLITK_FILL":
    Choice((1, 256, 16),
           "H100 over cuBLAS, GPU time / loop: 4096^2 2 slices = 4 at 1-64 rows, 0.896 / 0.960 vs 0.887 / 0.828 at "
           "128; 8192^2 2 slices 0.99-1.02 / 0.94-1.04, 4 0.82-1.00", ONE_LAUNCH),
    # element size -> ((most rows, (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps)), ...): the split kernel's tile
    "SPLITK_TILES": {
        2:
        Choice(((16, (16, 64, 128, 4, 4)), (32, (32, 64, 128, 4, 4)), (64, (64, 64, 128, 3, 4)), (128,
                                                                                                  (64, 128, 64, 4, 4))),
               "a GEMV-shaped tile of 16 rows for batch <= 16; deep BLOCK_K streams B, which dominates the bytes",
               None),
        4:
        Choice(
            ((16, (16, 64, 64, 3, 4)), (32, (32, 64, 64, 3, 4)), (64, (64, 64, 32, 3, 4)), (128, (64, 128, 32, 3, 4))),
            "fp32: the 16-bit tiles at half BLOCK_K (the same bytes a stage), the split untimed; unsplit, the H100 "
            "llm sweep's fp32 decode rows ran 0.12-0.89x cuBLAS", T + "h100_matmul_llm_sweep.csv"),
    },
}
