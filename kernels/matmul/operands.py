"""What a matrix product's operands need before kernels/matmul/__init__.py launches: tl.dot's input precision, TMA's
alignment, zero padding for a large product whose K or N is no multiple of 16, and a K-major B for TF32 on Hopper."""
from __future__ import annotations

import torch

from kernels._shared.tables import track_swaps, values
from kernels.matmul.table import MATMUL
from rooflab.triton_utils import device_capability, tf32_matmul

track_swaps(__name__)  # a table or kernel swapped from outside is a new launch key

PAD_MIN_MNK = values(MATMUL["PAD_MIN_MNK"])  # "auto" pads a product this large whose K or N is no multiple of PAD_TO
PAD_TO = 16  # elements: Triton assumes an integer argument divisible by 16 only when it is (strides, K, N)
KMAJOR_MIN_M = values(MATMUL["KMAJOR_MIN_M"])  # ... of at least this many rows (a decode reads B once: no copy)
KMAJOR_MIN_MNK = values(MATMUL["KMAJOR_MIN_MNK"])  # "auto" gives a TF32 product this large a K-major B (wants_k_major)

PRECISIONS = ("ieee", "tf32", "tf32x3")  # what a float32 product may ask tl.dot for (tf32x3: fp32 via 3 TF32 products)


def input_precision_for(dtype: torch.dtype, asked: str | None = None) -> str:
    """tl.dot's input precision: float32 products follow torch's TF32 setting (tf32_matmul), as torch.mm's do,
    unless one of PRECISIONS is ``asked`` (float32 operands only: 16-bit ones have one)."""
    if asked is not None:
        if dtype != torch.float32 or asked not in PRECISIONS:
            raise ValueError(f"precision= is one of {PRECISIONS} for float32 operands; got {asked!r} for {dtype}")
        return asked
    return "tf32" if dtype != torch.float32 or tf32_matmul() else "ieee"


def tma_ok(a: torch.Tensor, b: torch.Tensor) -> bool:
    """TMA needs a unit last stride and 16-byte aligned base addresses and row strides (and Hopper or newer); B may
    be K-major (its transpose row-major: the TF32 copy, a linear layer's weight.t())."""
    if a.device.type == "cuda" and device_capability(a.device)[0] < 9:
        return False
    for t in (a, b if b.stride(1) == 1 else b.t()):  # a broadcast (stride-0) row cannot be a descriptor's
        if t.stride(0) == 0:
            return False
        e = t.element_size()
        if t.stride(1) != 1 or (t.stride(0) * e) % 16 or t.data_ptr() % 16:
            return False
    return (b.shape[1] * a.element_size()) % 16 == 0  # C (M, N) is allocated contiguous: its row stride too


def padded_dims(a: torch.Tensor, b: torch.Tensor) -> tuple[int, int] | None:
    """(K, N) rounded up to a multiple of PAD_TO for a product of at least PAD_MIN_MNK multiply-adds whose K or N is
    no such multiple (its strides would lose Triton's divisibility hint, and TMA its 16-byte rows); else None."""
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:  # matmul_triton's checks say what is wrong
        return None
    (m, k), n = a.shape, b.shape[1]
    aligned = not (k % PAD_TO or n % PAD_TO)
    return None if aligned or m * n * k < PAD_MIN_MNK else (-(-k // PAD_TO) * PAD_TO, -(-n // PAD_TO) * PAD_TO)


def wants_k_major(a: torch.Tensor, b: torch.Tensor, precision: str | None = None) -> bool:
    """Whether a TF32 (or tf32x3) product on Hopper or newer should read a K-major copy of B: those tensor cores read
    TF32 operands K-major only, and on a row-major B (K x N) Triton copies B into shared memory 4 bytes at a time
    (scripts/matmul_tf32_layout.py; 0.31-0.40x cuBLAS on the H200, data/tuning/h200_matmul_modes.csv). Not for a
    product of few rows (KMAJOR_MIN_M): it reads B once, and the copy reads and writes all of it.
    ``precision``: the product's input precision (None: input_precision_for's)."""
    return (a.dtype == torch.float32 and a.device.type == "cuda" and a.dim() == b.dim() == 2 and b.stride(0) != 1
            and a.numel() * b.shape[1] >= KMAJOR_MIN_MNK and a.shape[0] >= KMAJOR_MIN_M
            and (precision or input_precision_for(a.dtype)) in ("tf32", "tf32x3")
            and device_capability(a.device)[0] >= 9)
