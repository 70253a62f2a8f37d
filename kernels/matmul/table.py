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
}

