"""Row sum: s[i] = sum_j x[i, j] over an N x N matrix, one value per row.

The whole story of the kernel: the Triton kernel, its launch wrapper, the naive PyTorch expression, the builtin, the
float64 reference, and the FLOP/byte model that the analysis uses. A reduction reads N^2 elements and writes only N,
so it is memory-bound; the question is whether a reduction reaches copy bandwidth.

The kernel handles rows longer than one block: each program owns BLOCK_M rows and walks along them in BLOCK_N
columns, accumulating in an fp32 register tile, and reduces the tile in-block (tl.sum) once at the end, so the
storage dtype (bfloat16 too) never limits the accumulation. The output has the input's dtype.

References: Triton tutorial 02-fused-softmax (row reductions) and 05-layer-norm (the tiled loop over a long row).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from rooflab.kernel import ELEMENT_BYTES, Kernel, eager
from rooflab.triton_utils import autotune_configs, check_device

FLOPS_PER_ELEMENT = 1  # one add per element read (N - 1 per row, counted as N)
SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def rowsum_configs() -> list[triton.Config]:
    """Tiles of 1-8K elements per program; the first (used alone under the interpreter) loops on rows > 1024."""
    return autotune_configs([
        triton.Config({"BLOCK_M": 1, "BLOCK_N": 1024}, num_warps=4),
        triton.Config({"BLOCK_M": 1, "BLOCK_N": 2048}, num_warps=8),
        triton.Config({"BLOCK_M": 1, "BLOCK_N": 4096}, num_warps=8),
        triton.Config({"BLOCK_M": 2, "BLOCK_N": 2048}, num_warps=8),
        triton.Config({"BLOCK_M": 4, "BLOCK_N": 1024}, num_warps=8),
        triton.Config({"BLOCK_M": 8, "BLOCK_N": 512}, num_warps=8),
        triton.Config({"BLOCK_M": 16, "BLOCK_N": 256}, num_warps=8),
    ])


@triton.autotune(configs=rowsum_configs(), key=["n_rows", "n_cols"])
@triton.jit
def _rowsum_kernel(x_ptr, s_ptr, n_rows, n_cols, stride_xm, stride_xn, stride_s,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(axis=0)
    rows = pid.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)  # int64: 8192^2 * 4 B > 2^31
    row_mask = rows < n_rows
    row_ptrs = x_ptr + rows[:, None] * stride_xm  # (BLOCK_M, 1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N).to(tl.int64)
        mask = row_mask[:, None] & (cols[None, :] < n_cols)
        acc += tl.load(row_ptrs + cols[None, :] * stride_xn, mask=mask, other=0.0).to(tl.float32)
    s = tl.sum(acc, axis=1)  # (BLOCK_M,): one in-block reduction per row, after the loop
    tl.store(s_ptr + rows * stride_s, s.to(s_ptr.dtype.element_ty), mask=row_mask)


def rowsum_triton(x: torch.Tensor) -> torch.Tensor:
    """Check the input; allocate the output (N values, x's dtype); launch one program per BLOCK_M rows."""
    check_device(x)
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"rowsum_triton supports float32, bfloat16 and float16, not {x.dtype}")
    if x.dim() != 2:
        raise ValueError(f"rowsum_triton needs a 2-D tensor, got shape {tuple(x.shape)}")
    n_rows, n_cols = x.shape
    s = torch.empty((n_rows,), dtype=x.dtype, device=x.device)
    if n_rows == 0:
        return s
    if n_cols == 0:
        return s.zero_()  # the empty sum
    grid = lambda META: (triton.cdiv(n_rows, META["BLOCK_M"]),)  # noqa: E731
    _rowsum_kernel[grid](x, s, n_rows, n_cols, x.stride(0), x.stride(1), s.stride(0))
    return s


def rowsum_naive(x: torch.Tensor) -> torch.Tensor:
    acc = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)  # 1 kernel: write N
    for j in range(0, x.shape[1], 1024):  # a student's column-chunked loop, one pass per chunk of 1024 columns
        acc = acc + x[:, j:j + 1024].sum(dim=1)  # 2 kernels per chunk: read 1024N, write N; read 2N, write N
    return acc


def rowsum_builtin(x: torch.Tensor) -> torch.Tensor:
    return x.sum(dim=1)


def reference(inputs) -> torch.Tensor:
    (x,) = inputs
    return x.to(torch.float64).sum(dim=1)


def make_inputs(n: int, dtype: torch.dtype, device: str, seed: int = 0):
    g = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn((n, n), generator=g, device=device, dtype=torch.float32).to(dtype),)


def flops(n: int) -> float:
    return FLOPS_PER_ELEMENT * n * n


def bytes_moved(n: int, dtype: str) -> float:
    return (n * n + n) * ELEMENT_BYTES[dtype]  # the fewest: read x once, write the N row sums


KERNEL = Kernel(
    name="rowsum",
    description="sum over each row of an N x N matrix (N outputs), fp32 accumulation",
    make_inputs=make_inputs,
    reference=reference,
    flops=flops,
    bytes=bytes_moved,
    impls=eager(naive=rowsum_naive, builtin=rowsum_builtin, triton=rowsum_triton),
    naive_fn=rowsum_naive,
)
