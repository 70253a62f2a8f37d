"""LayerNorm and RMSNorm backward (kernels/_norm_bwd.py, issue 24): every gradient (dx, dweight, dbias) against
autograd through the float64 expression, under the interpreter in fp32 and fp16; odd row lengths, several rows
per program, leading dimensions; the forward without autograd stays the plain kernel."""
import pytest
import torch

from kernels._norm_bwd import norm_backward
from kernels.layernorm import EPS as LN_EPS, layernorm_triton
from kernels.rmsnorm import EPS as RMS_EPS, rmsnorm_triton

TOL = {torch.float32: 1e-4, torch.float16: 2e-2}


def rand(shape, dtype, seed, scale=1.0, shift=0.0):
    g = torch.Generator().manual_seed(seed)
    return (shift + scale * torch.randn(shape, generator=g, dtype=torch.float32)).to(dtype)


def ln64(x, w, b):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + LN_EPS) * w + b


def rms64(x, w):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + RMS_EPS) * w


def grads(fn, inputs, dy):
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    fn(*leaves).backward(dy)
    return [t.grad for t in leaves]


def rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape", [(5, 17), (37, 64), (2, 3, 33)])
def test_layernorm_gradients_against_float64(dtype, shape):
    n = shape[-1]
    x, w, b = rand(shape, dtype, 0), rand((n,), dtype, 1, 0.1, 1.0), rand((n,), dtype, 2, 0.1)
    dy = rand(shape, dtype, 3)
    ours = grads(layernorm_triton, (x, w, b), dy)
    ref = grads(ln64, (x.double(), w.double(), b.double()), dy.double())
    for name, o, r in zip(("dx", "dweight", "dbias"), ours, ref):
        assert o.dtype == dtype and o.shape == r.shape, name
        assert rel(o, r) < TOL[dtype], (name, rel(o, r))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape", [(5, 17), (37, 64), (2, 3, 33)])
def test_rmsnorm_gradients_against_float64(dtype, shape):
    n = shape[-1]
    x, w = rand(shape, dtype, 0), rand((n,), dtype, 1, 0.1, 1.0)
    dy = rand(shape, dtype, 3)
    ours = grads(rmsnorm_triton, (x, w), dy)
    ref = grads(rms64, (x.double(), w.double()), dy.double())
    for name, o, r in zip(("dx", "dweight"), ours, ref):
        assert o.dtype == dtype and o.shape == r.shape, name
        assert rel(o, r) < TOL[dtype], (name, rel(o, r))


def test_the_forward_without_autograd_records_nothing():
    x, w, b = rand((4, 8), torch.float32, 0), rand((8,), torch.float32, 1), rand((8,), torch.float32, 2)
    assert layernorm_triton(x, w, b).grad_fn is None
    assert layernorm_triton(x, w.requires_grad_(), b).grad_fn is not None
    with torch.no_grad():
        assert rmsnorm_triton(x, w).grad_fn is None


def test_rows_longer_than_one_block_are_refused_by_name():
    from kernels._rows import MAX_BLOCK_SIZE

    n = 2 * MAX_BLOCK_SIZE
    with pytest.raises(ValueError, match=f"at most {MAX_BLOCK_SIZE} columns"):
        norm_backward(torch.zeros(1, n), torch.ones(n), torch.zeros(1, n), 1e-5, True, True)
