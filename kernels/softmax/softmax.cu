#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>
#include <math.h>

template <typename scalar_t, int VEC>
struct alignas(sizeof(scalar_t) * VEC) Pack {
  scalar_t v[VEC];
};

// Reduce v over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
template <bool IS_MAX>
__device__ float block_reduce(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffff, v, o);
    v = IS_MAX ? fmaxf(v, w) : v + w;
  }
  __syncthreads();  // earlier readers of shared[0] are done before it is overwritten
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < n_warps ? shared[lane] : (IS_MAX ? -INFINITY : 0.0f);
    for (int o = 16; o > 0; o >>= 1) {
      const float w = __shfl_xor_sync(0xffffffff, v, o);
      v = IS_MAX ? fmaxf(v, w) : v + w;
    }
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  return shared[0];
}

template <typename scalar_t, int VEC>
__global__ void softmax_fwd_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int64_t n_cols) {
  __shared__ float shared[32];
  using P = Pack<scalar_t, VEC>;
  const int64_t row = blockIdx.x;
  const P* xr = reinterpret_cast<const P*>(x + row * n_cols);
  P* yr = reinterpret_cast<P*>(y + row * n_cols);
  const int64_t n_packs = n_cols / VEC;

  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < n_packs; i += blockDim.x) {
    const P p = xr[i];
    for (int k = 0; k < VEC; ++k) m = fmaxf(m, static_cast<float>(p.v[k]));
  }
  m = block_reduce<true>(m, shared);

  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < n_packs; i += blockDim.x) {
    const P p = xr[i];
    for (int k = 0; k < VEC; ++k) s += expf(static_cast<float>(p.v[k]) - m);
  }
  const float inv_s = 1.0f / block_reduce<false>(s, shared);

  for (int64_t i = threadIdx.x; i < n_packs; i += blockDim.x) {
    const P p = xr[i];
    P out;
    for (int k = 0; k < VEC; ++k) out.v[k] = static_cast<scalar_t>(expf(static_cast<float>(p.v[k]) - m) * inv_s);
    yr[i] = out;
  }
}

template <typename scalar_t, int VEC>
__global__ void softmax_bwd_kernel(const scalar_t* __restrict__ y, const scalar_t* __restrict__ dy,
                                   scalar_t* __restrict__ dx, int64_t n_cols) {
  __shared__ float shared[32];
  using P = Pack<scalar_t, VEC>;
  const int64_t row = blockIdx.x;
  const P* yr = reinterpret_cast<const P*>(y + row * n_cols);
  const P* dyr = reinterpret_cast<const P*>(dy + row * n_cols);
  P* dxr = reinterpret_cast<P*>(dx + row * n_cols);
  const int64_t n_packs = n_cols / VEC;

  float dot = 0.0f;
  for (int64_t i = threadIdx.x; i < n_packs; i += blockDim.x) {
    const P a = yr[i], b = dyr[i];
    for (int k = 0; k < VEC; ++k) dot += static_cast<float>(a.v[k]) * static_cast<float>(b.v[k]);
  }
  dot = block_reduce<false>(dot, shared);

  for (int64_t i = threadIdx.x; i < n_packs; i += blockDim.x) {
    const P a = yr[i], b = dyr[i];
    P out;
    for (int k = 0; k < VEC; ++k) {
      const float yk = static_cast<float>(a.v[k]);
      out.v[k] = static_cast<scalar_t>(yk * (static_cast<float>(b.v[k]) - dot));
    }
    dxr[i] = out;
  }
}

static int threads_for(int64_t n_packs) {
  return n_packs >= 4096 ? 1024 : (n_packs >= 1024 ? 512 : 256);
}

// 16-byte packs when every row starts 16-byte aligned, else one element at a time.
static bool rows_aligned(int64_t n_cols, int64_t elem_bytes, std::initializer_list<const void*> ptrs) {
  if ((n_cols * elem_bytes) % 16 != 0) return false;
  for (const void* p : ptrs) if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

template <typename scalar_t>
static void launch_fwd(const torch::Tensor& x, torch::Tensor& y) {
  const int64_t n_rows = x.size(0), n_cols = x.size(1);
  constexpr int VEC = 16 / sizeof(scalar_t);
  auto stream = at::cuda::getCurrentCUDAStream();
  const scalar_t* xp = x.data_ptr<scalar_t>();
  scalar_t* yp = y.data_ptr<scalar_t>();
  if (rows_aligned(n_cols, sizeof(scalar_t), {xp, yp})) {
    softmax_fwd_kernel<scalar_t, VEC><<<n_rows, threads_for(n_cols / VEC), 0, stream>>>(xp, yp, n_cols);
  } else {
    softmax_fwd_kernel<scalar_t, 1><<<n_rows, threads_for(n_cols), 0, stream>>>(xp, yp, n_cols);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename scalar_t>
static void launch_bwd(const torch::Tensor& y, const torch::Tensor& dy, torch::Tensor& dx) {
  const int64_t n_rows = y.size(0), n_cols = y.size(1);
  constexpr int VEC = 16 / sizeof(scalar_t);
  auto stream = at::cuda::getCurrentCUDAStream();
  const scalar_t* yp = y.data_ptr<scalar_t>();
  const scalar_t* dyp = dy.data_ptr<scalar_t>();
  scalar_t* dxp = dx.data_ptr<scalar_t>();
  if (rows_aligned(n_cols, sizeof(scalar_t), {yp, dyp, dxp})) {
    softmax_bwd_kernel<scalar_t, VEC><<<n_rows, threads_for(n_cols / VEC), 0, stream>>>(yp, dyp, dxp, n_cols);
  } else {
    softmax_bwd_kernel<scalar_t, 1><<<n_rows, threads_for(n_cols), 0, stream>>>(yp, dyp, dxp, n_cols);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

static void check_input(const torch::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), name, " must be a CUDA tensor");
  TORCH_CHECK(t.dim() == 2, name, " must be 2-D");
  TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
  TORCH_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16, name,
              " must be float32 or bfloat16");
}

torch::Tensor softmax_fwd(torch::Tensor x) {
  check_input(x, "x");
  const at::cuda::OptionalCUDAGuard guard(x.device());
  auto y = torch::empty_like(x);
  if (x.numel() == 0) return y;
  if (x.scalar_type() == at::kFloat) launch_fwd<float>(x, y);
  else launch_fwd<at::BFloat16>(x, y);
  return y;
}

torch::Tensor softmax_bwd(torch::Tensor y, torch::Tensor dy) {
  check_input(y, "y");
  check_input(dy, "dy");
  TORCH_CHECK(y.sizes() == dy.sizes() && y.scalar_type() == dy.scalar_type(), "y and dy must match");
  const at::cuda::OptionalCUDAGuard guard(y.device());
  auto dx = torch::empty_like(y);
  if (y.numel() == 0) return dx;
  if (y.scalar_type() == at::kFloat) launch_bwd<float>(y, dy, dx);
  else launch_bwd<at::BFloat16>(y, dy, dx);
  return dx;
}
