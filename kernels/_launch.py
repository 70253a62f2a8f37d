"""The launch choices of the Triton kernels, as data: one table per kernel, one Choice per entry.

Each Choice holds the value a kernel reads, a one-line reason and its evidence: the lab CSV (data/tuning/) that measured it
(data/tuning/<file>), or None for a rule of thumb no tune run decided. The measurements behind each entry, with their
readings, are in docs/decisions.md and docs/archive/performance-rounds.md. Kernels read the bare values through ``values`` into
module attributes of the same names (``kernels.layernorm.UNMASKED_COLS``), which tests and the lab (python -m lab) swap.

Keys: an element size in bytes (2: bfloat16 and float16, 4: float32) or a dtype name. Row tables give, per key,
(columns, warps): rows of at least that many columns take at least that many warps; or (fewest, most) columns.
"""
from __future__ import annotations

from typing import Any, NamedTuple


class Choice(NamedTuple):
    value: Any
    reason: str
    evidence: str | None  # data/tuning/<file>.csv, or None: no tune run decided it


def values(table):
    """The bare values a kernel reads: {key: value} for a table of Choices, the value for one Choice."""
    return table.value if isinstance(table, Choice) else {k: c.value for k, c in table.items()}


T = "data/tuning/"

# The shared one-program-per-row heuristic (kernels/_rows.row_launch_params).
ROWS = {
    "MAX_BLOCK_SIZE": Choice(16384, "widest row held in registers: 32 fp32 values a thread at 16 warps, room for "
                                    "the weight tile without spilling; longer rows take the tiled loop", None),
    "BYTES_PER_THREAD": Choice(64, "each thread loads about four 16-byte vectors of the tile", None),
    "WARPS": Choice((4, 16), "(fewest, most) warps the heuristic gives", None),
}

# Elementwise kernels over two operands (vecadd, saxpy): dtype -> (elements per program, num_warps).
ELEMENTWISE = {
    "LAUNCH": {
        "float32": Choice((1024, 4), "Inductor's XBLOCK 1024 / 4 warps beat 4096 / 8 in three calls at 8192^2",
                          T + "tune_v5_looped_reload_and_elementwise.csv"),
        "bfloat16": Choice((2048, 4), "two 16-byte loads a thread beat 4096 / 8 at 8192^2", T + "tune_v2.csv"),
        "float16": Choice((2048, 4), "as bfloat16 (the same bytes a thread)", T + "tune_v2.csv"),
    },
}

# GeLU: dtype -> (BLOCK_SIZE, num_warps).
GELU = {
    "LAUNCH": {
        "float32": Choice((1024, 8), "0.97-0.998 of the copy at 8192^2, before and after the fast division",
                          T + "tune_elementwise.csv"),
        "bfloat16": Choice((2048, 4), "with the fast division ahead of 4096 / 4 at 8192^2; not at 1793",
                           T + "tune_v2.csv"),
        "float16": Choice((2048, 4), "as bfloat16 (the same bytes a thread)", T + "tune_v2.csv"),
    },
}

LAYERNORM = {
    # rows too long to hold: element size -> (tile, num_warps) in place of the heuristic's 16384 x 16
    "TILED_LAUNCH": {
        2: Choice((4096, 8), "16-bit long rows spilled at 16384 x 16; 4096 x 8 is the fastest two-read walk",
                  T + "tune_v7_layernorm_long_rows.csv"),
        4: Choice((2048, 4), "fp32 1024 x 50257 202 us against 16384 x 16's 295 (torch.compile 251)",
                  T + "longfwd_s21.csv"),
    },
    # rows just too long for the shared heuristic's block: element size -> (most columns, warps) held whole
    "WIDE_HELD": {
        2: Choice((32768, 32), "bf16 4096 x 32000 162 us against the tiles' 191 (torch.compile 150), 1024 x 28672 "
                               "42.3, 45.0 (41.7)", T + "longfwd_s21.csv"),
        4: Choice((32768, 32), "fp32 4096 x 32000 278 us against the tiles' 357 (torch.compile 269), 1024 x 28672 "
                               "71.0, 91.9 (65.6)", T + "longfwd_s21.csv"),
    },
    # held rows: element size -> (columns, warps); keyed on columns, so rows of 1025-2047 keep the heuristic
    "HELD_MIN_WARPS": {
        4: Choice((2048, 8), "fp32 rows of 2048: 8 warps beat 4 and torch.compile; slower at 1024",
                  T + "tune_v12_small_rows_fp32.csv"),
        2: Choice((4096, 8), "a tie with 4 warps at 4096, kept because the reference (S12, S13) ran with it",
                  T + "tune_v13_lnconfirm.csv"),
    },
    # held rows of (fewest, most) columns load weight and bias with the row, before the reductions
    "WB_EARLY_COLS": {
        4: Choice((4096, 8192), "the row's chain ends at its store; 16-bit rows lose (more registers)",
                  T + "tune_v13_lnconfirm.csv"),
    },
    # ptxas register cap (maxnreg) by (element size, columns, num_warps) of a held row
    "REGISTER_CAP": {
        (2, 8192, 8): Choice(64, "same four rows per SM, better scheduled under the cap (fp16 follows bf16)",
                             T + "tune_v13_lnconfirm.csv"),
    },
    "PREFETCH_PROGRAMS": Choice(1, "the first program asks the L2 for the weights of late-loading held rows; "
                                   "every asking program pays for it", T + "tune_v14_wbprefetch_timeline.csv"),
    # held rows of (fewest, most) columns exactly as long as their tile drop the column mask
    "UNMASKED_COLS": {
        4: Choice((2048, 4096), "faster at 2048; a tie at 4096 kept because the reference (S17) ran with it",
                  T + "tune_v15_onerow_lnfull.csv"),
    },
    # element size -> (fewest, most columns, tile, warps, only rows no multiple of 16 bytes): rows under 3/4 of
    # their 8192 block walked in tiles, not held
    "SPARSE_BLOCK": {
        4: Choice((4097, 6143, 1024, 8, False), "4097^2 fp32 63.3 us against held 93.3 (torch.compile 65.7); odd "
                                                "8192 x 5000 89.8, 92.9", T + "rows_4097_s20.csv"),
        2: Choice((4097, 6143, 1024, 8, True), "4097^2 bf16 64.5 us against held 69.3 (torch.compile 59.8); aligned "
                                               "rows stay held (odd bf16 8192 x 5000 tiled 80.0, held 51.7)",
                  T + "rows_4097_s20.csv"),
    },
    # (rows a SM, columns): fewer rows than that, of at least that many columns, are split over several programs
    "SPLIT_BELOW": Choice((2, 32768), "one program a row leaves most SMs idle (bf16 8 x 256000: 77.8 us, "
                                      "torch.compile 19.1); square shapes never qualify", None),
    # a split row: (programs a SM, fewest, most columns a program): one chunk of a row, held
    "SPLIT_CHUNK": Choice((4, 4096, 16384), "a few programs a SM fill it; one held tile each", None),
    # element size -> (fewest columns, tile, warps): contiguous rows no multiple of 16 bytes on 16-byte aligned tiles
    # of the flat x (RMSNorm's walk); shorter rows stay held (6000 x 1793 bf16 held 29.4 us, aligned 1024 x 8 48.3)
    "ALIGNED_TILES": {
        2: Choice((4097, 1024, 8), "bf16 4096 x 4097 64.4 -> 50.2 us (torch.compile 46.6), 2048 x 5001 36.0 -> 28.0, "
                                   "1024 x 50257 175 -> 121 (builtin 210)", T + "aligned_s25_d1.csv"),
        4: Choice((4097, 1024, 8), "fp32 4096 x 4097 62.8 -> 53.4 us (torch.compile 51.6), 8192 x 4097 121 -> 102, "
                                   "1024 x 50257 202 -> 184", T + "aligned_s25_d1.csv"),
    },
}

RMSNORM = {
    # rows of at least this many columns, by element size, are read twice (the second from the L2), not held
    "RELOAD_MIN_COLS": {
        2: Choice(8192, "frees registers for more rows per SM; 16-bit rows of 4096 are faster held",
                  T + "tune_v5.csv"),
        4: Choice(4096, "ahead of held at 4096 and 8192, level with torch.compile", T + "tune_v20_rms_fp32.csv"),
    },
    "RELOAD_WARPS": Choice(16, "rows read twice run with 16 warps (8 were slower)", T + "tune_v5.csv"),
    # rows of (fewest, most) columns, under 3/4 of their 8192 block, held with this many warps, not read twice
    "SPARSE_BLOCK": Choice((4097, 6143, 4), "4097^2 fp32 45.0 us against read twice 63.5 (torch.compile 52.0), "
                                            "bf16 39.8, held at 8 warps 41.2", T + "rows_4097_s20.csv"),
    # rows of (fewest, most) columns, a whole number of tiles long, drop the column mask
    "UNMASKED_COLS": {
        4: Choice((2048, 8192), "faster at 2048 and 8192, a tie at 4096; 16-bit rows a tie",
                  T + "tune_v20_rms_fp32.csv"),
    },
    # rows too long to hold: element size -> (tile, num_warps) of the two-read walk, in place of 16384 x 16
    "TILED_LAUNCH": {
        2: Choice((8192, 16), "bf16 4096 x 32000 133 us against 176 (torch.compile 141), 1024 x 28672 34.8, 39.6 "
                              "(33.4)", T + "longrows_s21.csv"),
    },
    # tiled rows no multiple of 16 bytes: element size -> (tile, warps) on 16-byte aligned tiles of the flat x
    "ALIGNED_TILES": {
        2: Choice((2048, 4), "bf16 1024 x 50257 89.9 us against 189 one program a row's tiles (builtin 206); "
                             "4096 x 8 116", T + "longrows_s21.csv"),
        4: Choice((1024, 4), "fp32 1024 x 50257 170 us against 16384 x 16's 209 (torch.compile 188)",
                  T + "longfwd_s21.csv"),
    },
    # rows just too long for the shared heuristic's block: element size -> (most columns, warps) in one tile, read
    # twice (RELOAD)
    "WIDE_HELD": {
        4: Choice((32768, 32), "fp32 4096 x 32000 246 us against 16384 x 16's 308 (torch.compile 258), 1024 x 28672 "
                               "59.6, 73.8 (58.7)", T + "longfwd_s21.csv"),
    },
    # (rows a SM, columns): fewer rows than that, of at least that many columns, are split over several programs
    "SPLIT_BELOW": Choice((2, 32768), "one program a row leaves most SMs idle (bf16 8 x 256000: 38.7 us, "
                                      "torch.compile 12.8); square shapes never qualify", None),
    # a split row: (programs a SM, fewest, most columns a program): one chunk of a row, held
    "SPLIT_CHUNK": Choice((4, 4096, 16384), "a few programs a SM fill it; one held tile each", None),
}

SOFTMAX = {
    # forward rows of at least this many columns, by element size, are read twice with 16 warps, not held
    "RELOAD_MIN_COLS": {
        4: Choice(8192, "fp32 rows of 8192 read twice beat held and torch.compile; 16-bit rows lose",
                  T + "tune_v5.csv"),
    },
    # held forward rows: element size -> (columns, warps)
    "HELD_MIN_WARPS": {
        2: Choice((8192, 16), "16 warps (four elements a thread) faster in six tune calls of six",
                  T + "tune_v5.csv"),
    },
    # forward rows of (fewest, most) columns, exactly one block long, drop the column mask
    "UNMASKED_COLS": {
        2: Choice((4096, 4096), "faster in two calls; bf16 8192 a tie", T + "tune_v21_unmasked_confirm.csv"),
        4: Choice((8192, 8192), "faster in two calls; fp32 4096 a tie", T + "tune_v21_unmasked_confirm.csv"),
    },
    # (rows a SM, columns): fewer rows than that, of at least that many columns, are split over several programs
    "SPLIT_BELOW": Choice((2, 32768), "one program a row leaves most SMs idle (bf16 8 x 256000: 0.44x torch); "
                                      "square shapes never qualify", None),
    # a split row: (programs a SM, fewest, most elements a program): the flat tile one program holds
    "SPLIT_CHUNK": Choice((4, 4096, 16384), "a few programs a SM fill it; one held tile each", None),
    # (columns, elements): rows shorter than that many columns, forward and backward, packed to about that many
    # elements a program
    "PACK_ROWS": Choice((256, 4096), "one program a row of 32 columns ran 0.06x torch (odd 1000000 x 32); rowsum's "
                                     "packing to 4096 elements", None),
    # tiled forward rows no multiple of 16 bytes: element size -> (tile, warps) on 16-byte aligned tiles
    "ALIGNED_TILES": {
        2: Choice((4096, 8), "bf16 1024 x 50257: 113 us against one program a row's 146 (builtin 98), 4096 x 50257: "
                             "402, 556 (363); longer tiles slower", T + "softmax_unaligned_u1.csv"),
    },
    # whether long forward rows not 16-byte aligned are split whatever their number (as rowsum's)
    "SPLIT_UNALIGNED": Choice(False, "off: 1024 x 50257 split took bf16 189 us, one program a row 146 (builtin 98); "
                                     "fp32 215, 161 (builtin 194)", T + "softmax_unaligned_u1.csv"),
}

ROWSUM = {
    "MIN_TILE_ELEMENTS": Choice(4096, "short rows are packed to this many elements a program; no shape with "
                                      "more, smaller programs was faster", T + "tune_v23_smallrows.csv"),
    # rows of (fewest, most) columns, exactly one tile long, in whole programs, drop the masks
    "UNMASKED_COLS": {
        2: Choice((8192, 8192), "a tie in the second call, kept because the reference (S20) ran with it",
                  T + "tune_v19b_rowsum_confirm.csv"),
        4: Choice((4096, 4096), "faster in the tune call and in the sweep", T + "tune_v19_unmasked.csv"),
    },
    # (rows a SM, columns): fewer rows than that, of at least that many columns, are split over several programs
    "SPLIT_BELOW": Choice((2, 32768), "few long rows leave SMs idle: fp32 4 x 1000000 one program a row 118 us, "
                                      "the builtin 13 (D1); bf16 8 x 256000 split 15.9, one a row 14.8 (S31)", None),
    # a split row: (programs a SM, fewest, most elements a program): the flat tile one program sums
    "SPLIT_CHUNK": Choice((4, 4096, 16384), "a few programs a SM fill it; one held tile each", None),
    "SPLIT_UNALIGNED": Choice(False, "off: aligned tiles beat the split on long rows no multiple of 16 bytes (bf16 "
                                     "1024 x 50257 split 49.2 us, aligned 28.6)", T + "aligned_s25_d1.csv"),
    "SPLIT_ONCE_MAX_ROWS": Choice(64, "a split in one launch, the last program adding the rows: bf16 64 x 53248 15.7 "
                                      "-> 13.7 us; 1024 x 50257 49.2 -> 77.0", T + "splitrows_s23_d4.csv"),
    # long rows no multiple of 16 bytes, not split: element size -> (tile, warps) on 16-byte aligned tiles of flat x
    "ALIGNED_TILES": {
        2: Choice((2048, 8), "bf16 1024 x 50257 49.2 -> 28.6 us (builtin 31.9), 4096 x 50257 155 -> 98, 2048 x 16385 "
                             "60.9 -> 21.2 (26.8)", T + "aligned_s25_d1.csv"),
        4: Choice((4096, 16), "fp32 1024 x 50257 64.1 -> 51.5 us (builtin 55.7), 256 x 50257 28.3 -> 16.5, 1024 x "
                              "151937 164 -> 145 (149)", T + "aligned_s25_d1.csv"),
    },
}

MATMUL = {
    "TMA_MIN_MNK": Choice(2 ** 35, "the TMA launch builds three tensor maps a call (about 90 us of host time): "
                                   "smaller products take the pointer kernel", None),
    "PAD_MIN_MNK": Choice(2 ** 30, "K or N no multiple of 16: 95 TFLOP/s at 1793^3 bf16, 205 on zero-padded "
                                   "copies; products this large are padded, smaller ones untested",
                          T + "alignment_g8.csv"),
    "KMAJOR_MIN_MNK": Choice(2 ** 30, "TF32 on a K-major B copy: 337-347 TFLOP/s against 105-116 (cuBLAS 288-398) at "
                                      "2048-8192; smaller products untested", T + "tune_tf32_kmajor.csv"),
}

# FlashAttention-2 (kernels/attention.py, kernels/_attention_bwd.py): tiles (BLOCK_M, BLOCK_N, num_warps, num_stages),
# each list autotuned per (seq, head dim, mask, dtype), its first the interpreter's.
ATTENTION = {
    "TMA_TILES": Choice(((128, 128, 8, 3), (64, 64, 4, 3), (128, 64, 8, 4)),
                        "the best of the tutorial's Hopper tiles: 128x128 w8 s3 at head dim 128, seq >= 4096; 64x64 w4 "
                        "s3 at seq 1024 and head dim 64", T + "attention_tiles_s29_d1.csv"),
    "POINTER_TILES": Choice(((128, 128, 8, 3), (128, 64, 8, 4)),
                            "the tutorial's Hopper tiles less 128x64 w4 s3, 0.75x 128x128 w8 s3 at head dim 128",
                            T + "attention_tiles_s29_d1.csv"),
    "HEAVY_FIRST": Choice(True, "causal: a head's longest query tiles first; bf16 1x16x16384 0.878 -> 0.938 of cuDNN, "
                                "elsewhere within noise", T + "attention_s29_d3.csv"),
    "DKDV_TILES": Choice(((64, 128, 8, 4), (32, 64, 4, 5), (32, 64, 4, 3)),
                         "backward alone 1.06-1.10x the old 64x128 w8 s3 at bf16 head dim 128; 32x64 w4 s3 fits "
                         "fp32 in shared memory", T + "attention_bwd_s29_d8.csv"),
    "DQ_TILES": Choice(((128, 32, 4, 3), (128, 64, 8, 3), (64, 32, 4, 3)),
                       "the tutorial's Hopper tiles; 128x64 w8 s3 is also the best of attnbwd's dQ tiles",
                       T + "attention_bwd_s29_d8.csv"),
}
