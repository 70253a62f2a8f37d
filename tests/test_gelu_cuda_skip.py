"""The hand-written CUDA implementations (gelu, softmax) are skipped with a reason on the CPU, never failed, and
their wrappers refuse CPU tensors clearly. Compiling and checking them needs a GPU run."""
import pytest
import torch

from rooflab.kernel import load_kernel
from rooflab.cell import Cell, run_cell
from rooflab.timing import TimingConfig


@pytest.mark.parametrize("name", ["gelu", "softmax"])
def test_cuda_impl_registered_and_skipped_on_cpu(name):
    kernel = load_kernel(name)
    assert "cuda" in kernel.impls
    reason = kernel.skip_reason("cuda", "cpu")
    assert reason and "NVIDIA GPU" in reason
    assert kernel.skip_reason("triton", "cpu") is None
    for pass_ in kernel.passes:
        row = run_cell(kernel, Cell(name, "cuda", "float32", 8, pass_), "cpu", TimingConfig())
        assert row["status"] == "skipped" and row["error"] == reason


def test_cuda_wrappers_refuse_cpu_tensors():
    from kernels.gelu import gelu_cuda
    from kernels.softmax import softmax_cuda

    with pytest.raises(ValueError, match="CUDA tensor"):
        gelu_cuda(torch.ones(4, 4))
    with pytest.raises(ValueError, match="CUDA tensors"):
        softmax_cuda(torch.ones(4, 4))


def test_cuda_sources_define_the_bound_functions():
    from kernels import gelu, softmax

    assert "torch::Tensor gelu_cuda(torch::Tensor x)" in gelu.CUDA_SOURCE
    for fn in ("softmax_fwd", "softmax_bwd"):
        assert f"torch::Tensor {fn}(" in softmax.CUDA_SOURCE and fn in softmax.CPP_SOURCE
    assert gelu._cuda_module is None and softmax._cuda_module is None  # compiled lazily, on first use only
