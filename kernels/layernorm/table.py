"""LayerNorm's launch choices (kernels/_shared/tables.py says how to read a table): the values its plan reads, each
with a one-line reason and its evidence."""
from __future__ import annotations

from kernels._shared.tables import Choice, T

LAYERNORM = {
    # rows too long to hold: element size -> (tile, num_warps) in place of the heuristic's 16384 x 16
    "TILED_LAUNCH": {
        2:
        Choice((4096, 8), "16-bit long rows spilled at 16384 x 16; 4096 x 8 is the fastest two-read walk",
               T + "tune_v7_layernorm_long_rows.csv"),
        4:
        Choice((2048, 4), "fp32 1024 x 50257 202 us against 16384 x 16's 295 (torch.compile 251)",
               T + "longfwd_s21.csv"),
    },
    # rows just too long for the shared heuristic's block: element size -> (most columns, warps) held whole
    "WIDE_HELD": {
        2:
        Choice((32768, 32), "bf16 4096 x 32000 162 us against the tiles' 191 (torch.compile 150), 1024 x 28672 "
               "42.3, 45.0 (41.7)", T + "longfwd_s21.csv"),
        4:
        Choice((32768, 32), "fp32 4096 x 32000 278 us against the tiles' 357 (torch.compile 269), 1024 x 28672 "
               "71.0, 91.9 (65.6)", T + "longfwd_s21.csv"),
    },
    # held rows: element size -> (columns, warps); keyed on columns, so rows of 1025-2047 keep the heuristic
    "HELD_MIN_WARPS": {
        4:
        Choice((2048, 8), "fp32 rows of 2048: 8 warps beat 4 and torch.compile; slower at 1024",
               T + "tune_v12_small_rows_fp32.csv"),
        2:
        Choice((4096, 8), "a tie with 4 warps at 4096, kept because the H200 reference ran with it",
               T + "tune_v13_lnconfirm.csv"),
    },
    # held rows of (fewest, most) columns load weight and bias with the row, before the reductions
    "WB_EARLY_COLS": {
        4:
        Choice((4096, 8192), "the row's chain ends at its store; 16-bit rows lose (more registers)",
               T + "tune_v13_lnconfirm.csv"),
    },
    # ptxas register cap (maxnreg) by (element size, columns, num_warps) of a held row
    "REGISTER_CAP": {
        (2, 8192, 8):
        Choice(64, "same four rows per SM, better scheduled under the cap (fp16 follows bf16)",
               T + "tune_v13_lnconfirm.csv"),
    },
    "PREFETCH_PROGRAMS":
    Choice(
        1, "the first program asks the L2 for the weights of late-loading held rows; "
        "every asking program pays for it", T + "tune_v14_wbprefetch_timeline.csv"),
    # held rows of (fewest, most) columns exactly as long as their tile drop the column mask
    "UNMASKED_COLS": {
        4:
        Choice((2048, 4096), "faster at 2048; a tie at 4096 kept because the H200 reference ran with it",
               T + "tune_v15_onerow_lnfull.csv"),
    },
    # element size -> (fewest, most columns, tile, warps, only rows no multiple of 16 bytes): rows under 3/4 of
    # their 8192 block walked in tiles, not held
    "SPARSE_BLOCK": {
        4:
        Choice((4097, 6143, 1024, 8, False), "4097^2 fp32 63.3 us against held 93.3 (torch.compile 65.7); odd "
               "8192 x 5000 89.8, 92.9", T + "rows_4097_s20.csv"),
        2:
        Choice((4097, 6143, 1024, 8, True), "4097^2 bf16 64.5 us against held 69.3 (torch.compile 59.8); aligned "
               "rows stay held (odd bf16 8192 x 5000 tiled 80.0, held 51.7)", T + "rows_4097_s20.csv"),
    },
    # (rows a SM, columns): fewer rows than that, of at least that many columns, are split over several programs
    "SPLIT_BELOW":
    Choice((2, 32768), "one program a row leaves most SMs idle (bf16 8 x 256000: 77.8 us, "
           "torch.compile 19.1); square shapes never qualify", None),
    # a split row: (programs a SM, fewest, most columns a program): one chunk of a row, held
    "SPLIT_CHUNK":
    Choice((4, 4096, 16384), "a few programs a SM fill it; one held tile each", None),
    # element size -> (fewest columns, tile, warps): contiguous rows no multiple of 16 bytes on 16-byte aligned tiles
    # of the flat x (RMSNorm's walk); shorter rows stay held (6000 x 1793 bf16 held 29.4 us, aligned 1024 x 8 48.3)
    "ALIGNED_TILES": {
        2:
        Choice((4097, 1024, 8), "bf16 4096 x 4097 64.4 -> 50.2 us (torch.compile 46.6), 2048 x 5001 36.0 -> 28.0, "
               "1024 x 50257 175 -> 121 (builtin 210)", T + "aligned_s25_d1.csv"),
        4:
        Choice((4097, 1024, 8), "fp32 4096 x 4097 62.8 -> 53.4 us (torch.compile 51.6), 8192 x 4097 121 -> 102, "
               "1024 x 50257 202 -> 184", T + "aligned_s25_d1.csv"),
    },
}
