"""Matmul's launch choices (kernels/_shared/tables.py says how to read a table): the values its plan reads, each
with a one-line reason and its evidence."""
from __future__ import annotations

from kernels._shared.tables import Choice, T

MATMUL = {
    "TMA_MIN_MNK": Choice(2 ** 35, "the TMA launch builds three tensor maps a call (about 90 us of host time): "
                                   "smaller products take the pointer kernel", None),
    "PAD_MIN_MNK": Choice(2 ** 30, "K or N no multiple of 16: 95 TFLOP/s at 1793^3 bf16, 205 on zero-padded "
                                   "copies; products this large are padded, smaller ones untested",
                          T + "alignment_g8.csv"),
    "KMAJOR_MIN_MNK": Choice(2 ** 30, "TF32 on a K-major B copy: 337-347 TFLOP/s against 105-116 (cuBLAS 288-398) at "
                                      "2048-8192; smaller products untested", T + "tune_tf32_kmajor.csv"),

    # TF32 "auto" with a K-major B (the KMAJOR_MIN_MNK copy): True takes the TMA kernel on it, False the pointer kernel
    "TF32_KMAJOR_TMA": Choice(False, "the pointer kernel on the K-major copy is what was measured (337-347 TFLOP/s); "
                                     "TMA on it: scripts/bench_matmul_modes.py times both", T + "tune_tf32_kmajor.csv"),
    # (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_stages, num_warps): FFMA tiles offered to IEEE fp32 products only
    "IEEE_TILES": Choice((), "none yet beside the <= 64 x 64 tiles the reference chose; scripts/bench_matmul_modes.py "
                             "times wider FFMA tiles (8 warps, BLOCK_K 16-32)", None),
    # skinny products (kernels/matmul/plan.py): min(M, N) at most this many rows or columns, K at least this deep
    "SPLITK_WHEN": Choice((128, 2048), "a decode product (batch <= 128 against 4096 x 4096) makes ~64 output tiles "
                                       "for 132 SMs: 0.75x cuBLAS on the H200; squares make thousands", None),
    # a split product: (programs a SM aimed at, fewest K elements a split, most splits)
    "SPLITK_FILL": Choice((2, 256, 16), "two programs a SM hide the loads' latency; a split under 256 of K is mostly "
                                        "prologue; the fp32 partials grow with the splits", None),
    # element size -> ((most rows, (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps)), ...): the split kernel's tile
    "SPLITK_TILES": {
        2: Choice(((16, (16, 64, 128, 4, 4)), (32, (32, 64, 128, 4, 4)), (64, (64, 64, 128, 3, 4)),
                   (128, (64, 128, 64, 4, 4))),
                  "a GEMV-shaped tile of 16 rows for batch <= 16; deep BLOCK_K streams B, which dominates the bytes",
                  None),
    },
}
