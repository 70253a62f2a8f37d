"""Row-sum's launch choices (kernels/_shared/tables.py says how to read a table): the values its plan reads, each
with a one-line reason and its evidence."""
from __future__ import annotations

from kernels._shared.tables import Choice, T

ROWSUM = {
    "MIN_TILE_ELEMENTS":
    Choice(4096, "short rows are packed to this many elements a program; no shape with "
           "more, smaller programs was faster", T + "tune_v23_smallrows.csv"),
    # rows of (fewest, most) columns, exactly one tile long, in whole programs, drop the masks
    "UNMASKED_COLS": {
        2:
        Choice((8192, 8192), "a tie when confirmed, kept because the H200 reference ran with it",
               T + "tune_v19b_rowsum_confirm.csv"),
        4:
        Choice((4096, 4096), "faster in the tune call and in the sweep", T + "tune_v19_unmasked.csv"),
    },
    # (rows a SM, columns): fewer rows than that, of at least that many columns, are split over several programs
    "SPLIT_BELOW":
    Choice((2, 32768), "few long rows leave SMs idle: fp32 4 x 1000000 one program a row 118 us, "
           "the builtin 13; bf16 8 x 256000 split 15.9, one a row 14.8", None),
    # a split row: (programs a SM, fewest, most elements a program): the flat tile one program sums
    "SPLIT_CHUNK":
    Choice((4, 4096, 16384), "a few programs a SM fill it; one held tile each", None),
    "SPLIT_UNALIGNED":
    Choice(
        False, "off: aligned tiles beat the split on long rows no multiple of 16 bytes (bf16 "
        "1024 x 50257 split 49.2 us, aligned 28.6)", T + "aligned_s25_d1.csv"),
    "SPLIT_ONCE_MAX_ROWS":
    Choice(
        64, "a split in one launch, the last program adding the rows: bf16 64 x 53248 15.7 "
        "-> 13.7 us; 1024 x 50257 49.2 -> 77.0", T + "splitrows_s23_d4.csv"),
    # long rows no multiple of 16 bytes, not split: element size -> (tile, warps) on 16-byte aligned tiles of flat x
    "ALIGNED_TILES": {
        2:
        Choice((2048, 8), "bf16 1024 x 50257 49.2 -> 28.6 us (builtin 31.9), 4096 x 50257 155 -> 98, 2048 x 16385 "
               "60.9 -> 21.2 (26.8)", T + "aligned_s25_d1.csv"),
        4:
        Choice((4096, 16), "fp32 1024 x 50257 64.1 -> 51.5 us (builtin 55.7), 256 x 50257 28.3 -> 16.5, 1024 x "
               "151937 164 -> 145 (149)", T + "aligned_s25_d1.csv"),
    },
}
