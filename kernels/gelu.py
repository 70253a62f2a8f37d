"""GeLU, tanh approximation: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), elementwise over an N x N tensor.

The whole story of the kernel: the Triton kernel, its launch wrapper, a hand-written CUDA kernel (compiled on first
use by torch.utils.cpp_extension.load_inline; skipped with a reason where there is no GPU or nvcc), the naive PyTorch
expression (several kernels, as a student writes it), the builtin, the float64 reference, and the FLOP/byte model that
the analysis uses.

References: Hendrycks & Gimpel, "Gaussian Error Linear Units" (2016); Triton tutorial 01-vector-add for the launch
pattern. The identity 0.5 (1 + tanh(u)) = sigmoid(2u) lets the kernel avoid libdevice's tanh (unsupported by the
Triton interpreter) with no loss of accuracy.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from rooflab.cuda_ext import cuda_skip_reason
from rooflab.kernel import ELEMENT_BYTES, Kernel, eager
from rooflab.triton_utils import check_device

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
# -2 sqrt(2/pi) log2(e), and times 0.044715: 2^(x (C1 + C2 x^2)) == exp(-2u), u = sqrt(2/pi) (x + 0.044715 x^3)
GELU_C1: tl.constexpr = tl.constexpr(-2.0 * SQRT_2_OVER_PI / math.log(2.0))
GELU_C2: tl.constexpr = tl.constexpr(-2.0 * SQRT_2_OVER_PI / math.log(2.0) * 0.044715)
FLOPS_PER_ELEMENT = 9  # x^3 (2 mul), *0.044715, +x, *sqrt(2/pi), tanh (1), +1, *0.5, *x


@triton.jit
def _gelu_tanh(x, PRECISE: tl.constexpr):
    if PRECISE:
        u = 0.7978845608028654 * (x + 0.044715 * x * x * x)  # sqrt(2/pi) * (x + 0.044715 x^3)
        return x * tl.sigmoid(2.0 * u)  # == 0.5 x (1 + tanh(u)); sigmoid divides with IEEE rounding (div.rn.f32)
    else:
        # The same value in fewer instructions: x / (1 + exp(-2u)) with -2u log2(e) folded into one polynomial,
        # exp2 for exp, and the fast division (div.full.f32, <= 2 ulp) for the IEEE one. At 16-bit storage the
        # kernel issues ~20 instructions per element (~2.5 warp-instructions per cycle per SM at 8192^2 bf16),
        # enough to cost bandwidth; this form needs about 12.
        z = x * (GELU_C1 + GELU_C2 * (x * x))
        return tl.fdiv(x, 1.0 + tl.exp2(z), ieee_rounding=False)


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr, PRECISE: tl.constexpr):
    pid = tl.program_id(axis=0)
    start = pid.to(tl.int64) * BLOCK_SIZE  # int64: 8192^2 * 4 B > 2^31
    offsets = start + tl.arange(0, BLOCK_SIZE)
    if start + BLOCK_SIZE <= n_elements:
        # a full block: no mask, so the accesses vectorise even when n_elements is no multiple of 16 (1793^2)
        x = tl.load(x_ptr + offsets).to(tl.float32)  # math in fp32, whatever the storage dtype
        tl.store(y_ptr + offsets, _gelu_tanh(x, PRECISE).to(y_ptr.dtype.element_ty))
    else:  # the last, partial block
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
        tl.store(y_ptr + offsets, _gelu_tanh(x, PRECISE).to(y_ptr.dtype.element_ty), mask=mask)


# (BLOCK_SIZE, num_warps) by dtype, from scripts/tune.py on the H200 (flushed medians). fp32: 1024/8 reached 4118
# GB/s at 8192^2 (0.97 of that run's copy; tune_elementwise.csv) and stayed the best after the fast-division form
# (0.998, tune_v2.csv). 16-bit: with the fast form 2048/4 ran 63.6 us at 8192^2 bf16 (0.98 of copy)
# against 4096/4's 64.8, and was the fastest or within 0.1 us of it at 1024 and 2048 (not at 1793: 7.36 us against
# 2048/8's 6.82; docs/performance.md round 10).
LAUNCH = {torch.float32: (1024, 8), torch.bfloat16: (2048, 4), torch.float16: (2048, 4)}


def gelu_triton(x: torch.Tensor, block_size: int | None = None, num_warps: int | None = None,
                precise: bool = False) -> torch.Tensor:
    """Check the input; allocate the output; launch one program per BLOCK_SIZE elements. ``precise`` divides with
    IEEE rounding (the fast division is within 2 ulp of fp32, far below the bf16/fp32 tolerances of the tests)."""
    check_device(x)
    if not x.is_contiguous():
        raise ValueError(f"gelu_triton needs a contiguous tensor (got shape {tuple(x.shape)}, strides "
                         f"{x.stride()}); call .contiguous() explicitly if a copy is acceptable")
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"gelu_triton supports float32, bfloat16 and float16, not {x.dtype}")
    y = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return y
    default_block, default_warps = LAUNCH[x.dtype]
    block_size, num_warps = block_size or default_block, num_warps or default_warps
    grid = lambda META: (triton.cdiv(n, META["BLOCK_SIZE"]),)  # noqa: E731
    _gelu_kernel[grid](x, y, n, BLOCK_SIZE=block_size, PRECISE=precise, num_warps=num_warps)
    return y


# Hand-written CUDA: a grid-stride loop over 16-byte packs (4 fp32 or 8 bf16) when both pointers are 16-byte
# aligned, then a scalar grid-stride loop over the tail (or over everything when unaligned). Math in float.
CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>
#include <math.h>

template <typename scalar_t, int VEC>
struct alignas(sizeof(scalar_t) * VEC) Pack {
  scalar_t v[VEC];
};

__device__ __forceinline__ float gelu_tanh(float x) {
  const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);  // sqrt(2/pi) (x + 0.044715 x^3)
  return 0.5f * x * (1.0f + tanhf(u));
}

// Packs [0, n_packs) as VEC-wide vectors, then elements [n_packs * VEC, n) one at a time.
template <typename scalar_t, int VEC>
__global__ void gelu_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int64_t n, int64_t n_packs) {
  using P = Pack<scalar_t, VEC>;
  const int64_t stride = (int64_t)blockDim.x * gridDim.x;
  const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const P* xp = reinterpret_cast<const P*>(x);
  P* yp = reinterpret_cast<P*>(y);
  for (int64_t i = tid; i < n_packs; i += stride) {
    const P p = xp[i];
    P out;
    for (int k = 0; k < VEC; ++k) out.v[k] = static_cast<scalar_t>(gelu_tanh(static_cast<float>(p.v[k])));
    yp[i] = out;
  }
  for (int64_t i = n_packs * VEC + tid; i < n; i += stride) {
    y[i] = static_cast<scalar_t>(gelu_tanh(static_cast<float>(x[i])));
  }
}

template <typename scalar_t>
static void launch(const torch::Tensor& x, torch::Tensor& y) {
  constexpr int VEC = 16 / sizeof(scalar_t);
  constexpr int THREADS = 256;
  const int64_t n = x.numel();
  const scalar_t* xp = x.data_ptr<scalar_t>();
  scalar_t* yp = y.data_ptr<scalar_t>();
  const bool aligned = reinterpret_cast<uintptr_t>(xp) % 16 == 0 && reinterpret_cast<uintptr_t>(yp) % 16 == 0;
  const int64_t n_packs = aligned ? n / VEC : 0;
  const int64_t work = n_packs > 0 ? n_packs : n;
  const int64_t max_blocks = (int64_t)at::cuda::getCurrentDeviceProperties()->multiProcessorCount * 32;
  const int64_t blocks = std::min<int64_t>((work + THREADS - 1) / THREADS, max_blocks);
  gelu_kernel<scalar_t, VEC><<<blocks, THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(xp, yp, n, n_packs);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

torch::Tensor gelu_cuda(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16, "x must be float32 or bfloat16");
  const at::cuda::OptionalCUDAGuard guard(x.device());
  auto y = torch::empty_like(x);
  if (x.numel() == 0) return y;
  if (x.scalar_type() == at::kFloat) launch<float>(x, y);
  else launch<at::BFloat16>(x, y);
  return y;
}
"""
CPP_SOURCE = "torch::Tensor gelu_cuda(torch::Tensor x);"
CUDA_DTYPES = (torch.float32, torch.bfloat16)
_cuda_module = None  # compiled on first use


def _cuda():
    global _cuda_module
    if _cuda_module is None:
        from torch.utils.cpp_extension import load_inline

        _cuda_module = load_inline(name="rooflab_gelu_cuda", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE,
                                   functions=["gelu_cuda"], extra_cuda_cflags=["-O3"], verbose=False)
    return _cuda_module


def gelu_cuda(x: torch.Tensor) -> torch.Tensor:
    """Check the input; the extension (compiled on first call) allocates and launches."""
    if x.device.type != "cuda":
        raise ValueError(f"gelu_cuda needs a CUDA tensor, got a tensor on {x.device}")
    if x.dtype not in CUDA_DTYPES:
        raise TypeError(f"gelu_cuda supports float32 and bfloat16, not {x.dtype}")
    if not x.is_contiguous():
        raise ValueError(f"gelu_cuda needs a contiguous tensor (got shape {tuple(x.shape)}, strides {x.stride()}); "
                         f"call .contiguous() explicitly if a copy is acceptable")
    return _cuda().gelu_cuda(x)


def gelu_naive(x: torch.Tensor) -> torch.Tensor:
    """The unfused expression: every line is its own kernel and its own pass over memory."""
    cube = x * x * x  # 2 kernels: read 2N^2, write N^2 each
    inner = x + 0.044715 * cube  # 2 kernels: read N^2 write N^2; read 2N^2 write N^2
    t = torch.tanh(SQRT_2_OVER_PI * inner)  # 2 kernels: read N^2, write N^2 each
    return 0.5 * x * (1.0 + t)  # 3 kernels: read N^2 write N^2; read N^2 write N^2; read 2N^2 write N^2


def gelu_builtin(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


def reference(inputs) -> torch.Tensor:
    (x,) = inputs
    return F.gelu(x.to(torch.float64), approximate="tanh")


def make_inputs(n: int, dtype: torch.dtype, device: str, seed: int = 0):
    g = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn((n, n), generator=g, device=device, dtype=torch.float32).to(dtype),)


def flops(n: int) -> float:
    return FLOPS_PER_ELEMENT * n * n


def bytes_moved(n: int, dtype: str) -> float:
    return 2 * n * n * ELEMENT_BYTES[dtype]  # the fewest: read x once, write y once


KERNEL = Kernel(
    name="gelu",
    description="GeLU (tanh approximation), elementwise over N x N",
    make_inputs=make_inputs,
    reference=reference,
    flops=flops,
    bytes=bytes_moved,
    impls=eager(naive=gelu_naive, builtin=gelu_builtin, triton=gelu_triton, cuda=gelu_cuda),
    naive_fn=gelu_naive,
    skip_reason=lambda impl, device: cuda_skip_reason(device) if impl == "cuda" else None,
)
