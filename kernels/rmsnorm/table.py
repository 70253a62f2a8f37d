"""RMSNorm's launch choices (kernels/_shared/tables.py says how to read a table): the values its plan reads, each
with a one-line reason and its evidence."""
from __future__ import annotations

from kernels._shared.tables import Choice, T

RMSNORM = {
    # rows of at least this many columns, by element size, are read twice (the second from the L2), not held
    "RELOAD_MIN_COLS": {
        2: Choice(8192, "frees registers for more rows per SM; 16-bit rows of 4096 are faster held", T + "tune_v5.csv"),
        4: Choice(4096, "ahead of held at 4096 and 8192, level with torch.compile", T + "tune_v20_rms_fp32.csv"),
    },
    "RELOAD_WARPS":
    Choice(16, "rows read twice run with 16 warps (8 were slower)", T + "tune_v5.csv"),
    # rows of (fewest, most) columns, under 3/4 of their 8192 block, held with this many warps, not read twice
    "SPARSE_BLOCK":
    Choice((4097, 6143, 4), "4097^2 fp32 45.0 us against read twice 63.5 (torch.compile 52.0), "
           "bf16 39.8, held at 8 warps 41.2", T + "rows_4097_s20.csv"),
    # rows of (fewest, most) columns, a whole number of tiles long, drop the column mask
    "UNMASKED_COLS": {
        4: Choice((2048, 8192), "faster at 2048 and 8192, a tie at 4096; 16-bit rows a tie",
                  T + "tune_v20_rms_fp32.csv"),
    },
    # rows too long to hold: element size -> (tile, num_warps) of the two-read walk, in place of 16384 x 16
    "TILED_LAUNCH": {
        2:
        Choice((8192, 16), "bf16 4096 x 32000 133 us against 176 (torch.compile 141), 1024 x 28672 34.8, 39.6 "
               "(33.4)", T + "longrows_s21.csv"),
    },
    # tiled rows no multiple of 16 bytes: element size -> (tile, warps) on 16-byte aligned tiles of the flat x
    "ALIGNED_TILES": {
        2:
        Choice((2048, 4), "bf16 1024 x 50257 89.9 us against 189 one program a row's tiles (builtin 206); "
               "4096 x 8 116", T + "longrows_s21.csv"),
        4:
        Choice((1024, 4), "fp32 1024 x 50257 170 us against 16384 x 16's 209 (torch.compile 188)",
               T + "longfwd_s21.csv"),
    },
    # rows just too long for the shared heuristic's block: element size -> (most columns, warps) in one tile, read
    # twice (RELOAD)
    "WIDE_HELD": {
        4:
        Choice((32768, 32), "fp32 4096 x 32000 246 us against 16384 x 16's 308 (torch.compile 258), 1024 x 28672 "
               "59.6, 73.8 (58.7)", T + "longfwd_s21.csv"),
    },
    # (rows a SM, columns): fewer rows than that, of at least that many columns, are split over several programs
    "SPLIT_BELOW":
    Choice((2, 32768), "one program a row leaves most SMs idle (bf16 8 x 256000: 38.7 us, "
           "torch.compile 12.8); square shapes never qualify", None),
    # a split row: (programs a SM, fewest, most columns a program): one chunk of a row, held
    "SPLIT_CHUNK":
    Choice((4, 4096, 16384), "a few programs a SM fill it; one held tile each", None),
}
