"""The persistent (programs-per-SM, software-pipelined) forms of the row kernels against float64, under the
interpreter (4 "SMs"): more rows than programs, fewer rows than programs, odd widths, a transposed input."""
import pytest
import torch

from kernels import layernorm, rmsnorm, rowsum, softmax

SHAPES = [(37, 1793), (3, 64), (300, 33)]
TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.bfloat16: dict(atol=6e-2, rtol=2e-2)}


def _inputs(shape, dtype, transpose=False):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape[::-1] if transpose else shape, generator=g)
    x = x.t() if transpose else x
    n = shape[1]
    return x.to(dtype), (1 + 0.1 * torch.randn(n, generator=g)).to(dtype), torch.randn(n, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("programs_per_sm,num_stages", [(1, 2), (3, 3)])
def test_persistent_forms_match_float64(shape, dtype, programs_per_sm, num_stages):
    x, w, b = _inputs(shape, dtype)
    kw = dict(programs_per_sm=programs_per_sm, num_stages=num_stages)
    cases = [(layernorm.layernorm_triton(x, w, b, **kw), layernorm.reference((x, w, b))),
             (rmsnorm.rmsnorm_triton(x, w, **kw), rmsnorm.reference((x, w))),
             (softmax.softmax_forward(x, **kw), torch.softmax(x.double(), dim=1)),
             (rowsum.rowsum_triton(x, **kw), x.double().sum(dim=1))]
    for out, ref in cases:
        assert out.dtype == dtype
        tol = TOL[dtype] if out.dim() == 2 else dict(atol=TOL[dtype]["atol"] * 10, rtol=TOL[dtype]["rtol"])
        torch.testing.assert_close(out.double(), ref, **tol)


def test_persistent_forms_honour_strides():
    x, w, b = _inputs((40, 24), torch.float32, transpose=True)
    assert not x.is_contiguous()
    torch.testing.assert_close(layernorm.layernorm_triton(x, w, b, programs_per_sm=2).double(),
                               layernorm.reference((x, w, b)), **TOL[torch.float32])
    torch.testing.assert_close(rmsnorm.rmsnorm_triton(x, w, programs_per_sm=2).double(),
                               rmsnorm.reference((x, w)), **TOL[torch.float32])
    torch.testing.assert_close(rowsum.rowsum_triton(x, programs_per_sm=2).double(), x.double().sum(dim=1),
                               **TOL[torch.float32])
