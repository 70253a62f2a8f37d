"""GeLU's launch choices (kernels/_shared/tables.py says how to read a table): the values its plan reads, each
with a one-line reason and its evidence."""
from __future__ import annotations

from kernels._shared.tables import Choice, T

# GeLU: dtype -> (BLOCK_SIZE, num_warps).
GELU = {
    "LAUNCH": {
        "float32":
        Choice((1024, 8), "0.97-0.998 of the copy at 8192^2, before and after the fast division",
               T + "tune_elementwise.csv"),
        "bfloat16":
        Choice((2048, 4), "with the fast division ahead of 4096 / 4 at 8192^2; not at 1793", T + "tune_v2.csv"),
        "float16":
        Choice((2048, 4), "as bfloat16 (the same bytes a thread)", T + "tune_v2.csv"),
    },
}
