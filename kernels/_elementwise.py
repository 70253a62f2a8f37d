"""Launch shape shared by the elementwise kernels (vecadd, saxpy)."""
import triton

ELEMENTS_PER_PROGRAM = 4096  # elementwise tile: 4096 elements, 8 warps -> 16 elements (64 B fp32) per thread


def elementwise_tile(n_cols: int, elements: int = ELEMENTS_PER_PROGRAM) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N) covering about `elements` per program: wide along the row, more rows when rows are short."""
    block_n = min(triton.next_power_of_2(max(n_cols, 1)), elements)
    return max(1, elements // block_n), block_n
