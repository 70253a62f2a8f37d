"""What one launch costs the host, piece by piece, in rounds that interleave the variants (one host's load drifts by
tens of percent within a minute, so back-to-back blocks of one variant mislead): Triton's launcher given tensors or
their addresses, our cache's entry, a C++ launcher (cuLaunchKernel from a torch extension, with and without the
output allocated in C++), torch's allocation and smallest ops. Lab section ``launcher`` (GPU; builds the C++ launcher
with torch.utils.cpp_extension.load_inline: about a minute, once a node)."""
import statistics
import time

import torch
import triton
import triton.language as tl

from kernels._shared import fastlaunch as fl

CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <dlfcn.h>
#include <stdexcept>
#include <string>

typedef int (*LaunchFn)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                        void**);
static LaunchFn cu_launch = nullptr;

// cuLaunchKernel on the current stream: each tensor's address, each int as int32, then Triton's two scratch
// pointers (null: the kernel asks for no scratch). alloc: an output like tensors[0] allocated here, launched last.
torch::Tensor launch(int64_t function, int64_t grid_x, int64_t threads, int64_t shared,
                     std::vector<torch::Tensor> tensors, std::vector<int64_t> ints, bool alloc) {
  if (!cu_launch) {
    void* lib = dlopen("libcuda.so.1", RTLD_LAZY);
    if (!lib) throw std::runtime_error("libcuda.so.1 not found");
    cu_launch = (LaunchFn)dlsym(lib, "cuLaunchKernel");
    if (!cu_launch) throw std::runtime_error("cuLaunchKernel not found");
  }
  torch::Tensor out;
  if (alloc) {
    out = torch::empty_like(tensors[0]);
    tensors.push_back(out);
  }
  size_t n = tensors.size(), m = ints.size();
  std::vector<uint64_t> ptrs(n + 2, 0);
  std::vector<int32_t> vals(m);
  std::vector<void*> params(n + m + 2);
  for (size_t i = 0; i < n; ++i) { ptrs[i] = (uint64_t)tensors[i].data_ptr(); params[i] = &ptrs[i]; }
  for (size_t i = 0; i < m; ++i) { vals[i] = (int32_t)ints[i]; params[n + i] = &vals[i]; }
  params[n + m] = &ptrs[n];
  params[n + m + 1] = &ptrs[n + 1];
  void* stream = (void*)c10::cuda::getCurrentCUDAStream().stream();
  int rc = cu_launch((void*)function, grid_x, 1, 1, threads, 1, 1, shared, stream, params.data(), nullptr);
  if (rc != 0) throw std::runtime_error("cuLaunchKernel failed: " + std::to_string(rc));
  return out;
}
"""


@triton.jit
def _add3_kernel(a_ptr, b_ptr, c_ptr, out_ptr, n, m, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    total = tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask) + tl.load(c_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, total * m, mask=mask)


def cpp_launcher():
    from torch.utils.cpp_extension import load_inline

    return load_inline(name="rooflab_lab_launcher", cpp_sources=[CPP], functions=["launch"], with_cuda=True,
                       extra_cflags=["-O2"], verbose=False)


def per_call_us(fn, calls: int) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def launcher_rows(rounds: int = 15, calls: int = 2000) -> list[dict]:
    """Per variant, the median over ``rounds`` of a loop's microseconds a call (loop then synchronise; every kernel
    here runs ~2 us on the GPU, under the host's time), the rounds interleaving the variants; also each variant's
    lower and upper quartile. The C++ launcher's output is checked against torch's before it is timed."""
    n = 256 * 256
    a, b, c = (torch.randn(n, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    out = torch.empty_like(a)
    block = 1024
    grid = triton.cdiv(n, block)
    compiled = _add3_kernel[(grid, )](a, b, c, out, n, 1, BLOCK=block)  # m = 1 is specialised: a constexpr
    compiled = _add3_kernel[(grid, )](a, b, c, out, n, 2, BLOCK=block)
    fl.raw_launch_reason()
    stream = fl._current_stream(fl._current_device())
    run, fn, packed = compiled.run, compiled.function, compiled.packed_metadata
    cache = fl.LaunchCache("lab launcher")
    key = fl.spec(a)
    cache.launch(key, _add3_kernel, (grid, ), (a, b, c, out, n, 2), {"BLOCK": block}, n_head=4)
    entry = cache.get(key)
    threads, shared = 32 * compiled.metadata.num_warps, compiled.metadata.shared
    ext = cpp_launcher()
    expected = (a.float() + b.float() + c.float()) * 2
    got = ext.launch(fn, grid, threads, shared, [a, b, c], [n, 2], True)
    torch.cuda.synchronize()
    if not torch.allclose(got.float(), expected, rtol=2e-2, atol=2e-2):
        raise RuntimeError("the C++ launcher's output differs from torch's")
    x1, y1 = torch.zeros(1, device="cuda"), torch.zeros(1, device="cuda")
    ptrs = (a.data_ptr(), b.data_ptr(), c.data_ptr(), out.data_ptr())

    def python_alloc_launch():
        o = torch.empty_like(a)
        run(grid, 1, 1, stream, fn, packed, None, None, None, a.data_ptr(), b.data_ptr(), c.data_ptr(), o.data_ptr(), n,
            2, block)
        return o

    variants = {
        "triton launcher, 4 tensors":
        lambda: run(grid, 1, 1, stream, fn, packed, None, None, None, a, b, c, out, n, 2, block),
        "triton launcher, 4 addresses":
        lambda: run(grid, 1, 1, stream, fn, packed, None, None, None, *ptrs, n, 2, block),
        "cache entry (a wrapper's hit), 4 tensors":
        lambda: entry(a, b, c, out),
        "C++ launcher, 4 tensors":
        lambda: ext.launch(fn, grid, threads, shared, [a, b, c, out], [n, 2], False),
        "empty_like + triton launcher (addresses)":
        python_alloc_launch,
        "C++ launcher, 3 tensors, output allocated in C++":
        lambda: ext.launch(fn, grid, threads, shared, [a, b, c], [n, 2], True),
        "torch.add, 256x256 (allocates its output)":
        lambda: torch.add(a, b),
        "torch.add, 1 element":
        lambda: torch.add(x1, y1),
        "torch.empty_like":
        lambda: torch.empty_like(a),
        "torch.empty(shape, dtype=, device=)":
        lambda: torch.empty((n, ), dtype=a.dtype, device=a.device),
        "a.new_empty(shape)":
        lambda: a.new_empty((n, )),
        "spec(a)":
        lambda: fl.spec(a),
    }
    for f in variants.values():
        f()
    samples = {name: [] for name in variants}
    for _ in range(rounds):
        for name, f in variants.items():
            samples[name].append(per_call_us(f, calls))
    rows = []
    for name, values in samples.items():
        q1, med, q3 = statistics.quantiles(values, n=4)
        rows.append({
            "kernel": "launcher",
            "n": 256,
            "dtype": "bfloat16",
            "variant": name,
            "median_us": statistics.median(values),
            "q1_us": q1,
            "q3_us": q3
        })
    return rows


def run_launcher(run):
    run.rows += launcher_rows()


def launcher_summary(df) -> str:
    g = df[df.kernel == "launcher"]
    return "\nlauncher: host us a call (median of interleaved rounds, quartiles)\n" + \
        g[["variant", "median_us", "q1_us", "q3_us"]].to_string(index=False, float_format="%.2f")
