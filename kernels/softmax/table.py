"""Softmax's launch choices (kernels/_shared/tables.py says how to read a table): the values its plan reads, each
with a one-line reason and its evidence."""
from __future__ import annotations

from kernels._shared.tables import Choice, T

SOFTMAX = {
    # forward rows of at least this many columns, by element size, are read twice with 16 warps, not held
    "RELOAD_MIN_COLS": {
        4: Choice(8192, "fp32 rows of 8192 read twice beat held and torch.compile; 16-bit rows lose",
                  T + "tune_v5.csv"),
    },
    # held forward rows: element size -> (columns, warps)
    "HELD_MIN_WARPS": {
        2: Choice((8192, 16), "16 warps (four elements a thread) faster in six tune calls of six", T + "tune_v5.csv"),
    },
    # forward rows of (fewest, most) columns, exactly one block long, drop the column mask
    "UNMASKED_COLS": {
        2: Choice((4096, 4096), "faster in two calls; bf16 8192 a tie", T + "tune_v21_unmasked_confirm.csv"),
        4: Choice((8192, 8192), "faster in two calls; fp32 4096 a tie", T + "tune_v21_unmasked_confirm.csv"),
    },
    # (rows a SM, columns): fewer rows than that, of at least that many columns, are split over several programs
    "SPLIT_BELOW":
    Choice((2, 32768), "one program a row leaves most SMs idle (bf16 8 x 256000: 0.44x torch); "
           "square shapes never qualify", None),
    # a split row: (programs a SM, fewest, most elements a program): the flat tile one program holds
    "SPLIT_CHUNK":
    Choice((4, 4096, 16384), "a few programs a SM fill it; one held tile each", None),
    # (columns, elements): rows shorter than that many columns, forward and backward, packed to about that many
    # elements a program
    "PACK_ROWS":
    Choice((256, 4096), "one program a row of 32 columns ran 0.06x torch (odd 1000000 x 32); rowsum's "
           "packing to 4096 elements", None),
    # tiled forward rows no multiple of 16 bytes: element size -> (tile, warps) on 16-byte aligned tiles
    "ALIGNED_TILES": {
        2:
        Choice((4096, 8), "bf16 1024 x 50257: 113 us against one program a row's 146 (builtin 98), 4096 x 50257: "
               "402, 556 (363); longer tiles slower", T + "softmax_unaligned_u1.csv"),
    },
    # whether long forward rows not 16-byte aligned are split whatever their number (as rowsum's)
    "SPLIT_UNALIGNED":
    Choice(
        False, "off: 1024 x 50257 split took bf16 189 us, one program a row 146 (builtin 98); "
        "fp32 215, 161 (builtin 194)", T + "softmax_unaligned_u1.csv"),
}
