"""Our kernels take any rank where torch's own ops do (issue 23): elementwise kernels 0-D to N-D, row kernels
(..., columns) with the leading dimensions flattened into rows. Checked against torch in float64 under the
interpreter (fp32), contiguous and strided."""
import pytest
import torch

from kernels.gelu import gelu_triton
from kernels.layernorm import layernorm_triton
from kernels.rmsnorm import rmsnorm_triton
from kernels.rowsum import rowsum_triton
from kernels.saxpy import saxpy_triton
from kernels.softmax import softmax_triton
from kernels.vecadd import vecadd_triton

SHAPES = [(), (37, ), (3, 5, 7), (2, 3, 4, 5)]


def rand(*shape, seed=0):
    return torch.randn(tuple(shape), generator=torch.Generator().manual_seed(seed), dtype=torch.float32)


@pytest.mark.parametrize("shape", SHAPES)
def test_elementwise_kernels_take_any_rank(shape):
    x, y = rand(*shape), rand(*shape, seed=1)
    torch.testing.assert_close(vecadd_triton(x, y), x + y)
    torch.testing.assert_close(saxpy_triton(0.5, x, y), 0.5 * x + y)
    torch.testing.assert_close(gelu_triton(x), torch.nn.functional.gelu(x, approximate="tanh"), rtol=1e-5, atol=1e-5)
    assert vecadd_triton(x, y).shape == x.shape


def test_elementwise_kernels_take_strided_n_d():
    x, y = rand(4, 6, 8).transpose(0, 2), rand(4, 6, 8, seed=1).transpose(0, 2)
    assert not x.is_contiguous()
    torch.testing.assert_close(vecadd_triton(x, y), x + y)
    torch.testing.assert_close(saxpy_triton(2.0, x, y), 2.0 * x + y)


def test_elementwise_shapes_must_match():
    with pytest.raises(ValueError, match="one shape"):
        vecadd_triton(rand(3, 4), rand(4, 3))


@pytest.mark.parametrize("shape", [(33, ), (2, 3, 33), (2, 2, 2, 40)])
def test_row_kernels_take_leading_dimensions(shape):
    x = rand(*shape)
    n = shape[-1]
    w, b = rand(n, seed=2), rand(n, seed=3)
    torch.testing.assert_close(layernorm_triton(x, w, b), torch.nn.functional.layer_norm(x, (n, ), w, b, eps=1e-5),
                               rtol=1e-4, atol=1e-4)
    rms = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w
    torch.testing.assert_close(rmsnorm_triton(x, w), rms, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(rowsum_triton(x), x.sum(-1), rtol=1e-4, atol=1e-4)
    assert rowsum_triton(x).shape == x.shape[:-1]
    torch.testing.assert_close(softmax_triton(x), torch.softmax(x, -1), rtol=1e-5, atol=1e-6)


def test_softmax_gradient_through_leading_dimensions():
    x = rand(2, 3, 17).requires_grad_()
    dy = rand(2, 3, 17, seed=4)
    softmax_triton(x).backward(dy)
    ref = x.detach().clone().requires_grad_()
    torch.softmax(ref, -1).backward(dy)
    torch.testing.assert_close(x.grad, ref.grad, rtol=1e-4, atol=1e-5)


def test_a_0_d_row_is_refused():
    with pytest.raises(ValueError, match="at least one dimension"):
        rowsum_triton(rand())
