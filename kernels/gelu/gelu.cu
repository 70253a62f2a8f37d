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
