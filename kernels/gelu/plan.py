"""GeLU's launch plan: from a call's element count and dtype (with the launch table and the caller's overrides) to
the kernel's grid and meta-parameters. Plain values in, plain values out: tested on the CPU without launching
anything (tests/test_gelu_plan.py).

One program per BLOCK_SIZE elements of a contiguous x (the wrapper refuses a strided one), BLOCK_SIZE and num_warps
by dtype from table.py's LAUNCH unless the caller asks for its own.
"""
from __future__ import annotations

from typing import NamedTuple


class Launch(NamedTuple):
    kernel: str  # the Triton kernel's name in kernels/gelu
    grid: tuple
    ints: tuple  # the integer arguments after the tensors
    meta: dict  # constexprs and num_warps


def forward(n_elements: int, dtype, launch: dict, block_size: int | None = None, num_warps: int | None = None,
            precise: bool = False) -> Launch:
    """The launch for a contiguous x of ``n_elements`` (> 0) of ``dtype`` into a fresh y; ``launch``: dtype ->
    (BLOCK_SIZE, num_warps), table.py's LAUNCH as the module holds it."""
    default_block, default_warps = launch[dtype]
    block = block_size or default_block
    return Launch("_gelu_kernel", (-(-n_elements // block), ), (n_elements, ),
                  dict(BLOCK_SIZE=block, PRECISE=precise, num_warps=num_warps or default_warps))
