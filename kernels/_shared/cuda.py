"""The hand-written CUDA implementations: a kernel's source (kernels/<name>/<name>.cu) and its build."""
from __future__ import annotations

from pathlib import Path

KERNELS_DIR = Path(__file__).resolve().parent.parent


def cuda_source(name: str) -> str:
    """The text of kernels/<name>/<name>.cu."""
    return (KERNELS_DIR / name / f"{name}.cu").read_text()


def build_cuda(name: str, cpp_source: str, functions: list[str]):
    """kernels/<name>/<name>.cu compiled by torch.utils.cpp_extension.load_inline as the module rooflab_<name>_cuda,
    binding ``functions`` (declared in ``cpp_source``). Slow the first time on a machine (nvcc), cached after."""
    from torch.utils.cpp_extension import load_inline

    return load_inline(name=f"rooflab_{name}_cuda", cpp_sources=cpp_source, cuda_sources=cuda_source(name),
                       functions=functions, extra_cuda_cflags=["-O3"], verbose=False)
