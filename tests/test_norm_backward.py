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


def _norm_grads64(centre, x, w, b, dy):
    if centre:
        return grads(ln64, (x.double(), w.double(), b.double()), dy.double())
    return grads(rms64, (x.double(), w.double()), dy.double())


@pytest.mark.parametrize("centre", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape,tile", [((3, 100), 16), ((37, 64), 32), ((1, 33), 16), ((9, 257), 64)])
def test_long_row_path_against_float64(centre, dtype, shape, tile):
    # the column-tiled path of rows longer than a block, forced on short rows: a last partial tile, one row,
    # several rows a program (37 rows over 2 tiles), a large mean (LayerNorm combines tiles about their own means)
    n = shape[-1]
    x, w, b = rand(shape, dtype, 0, 1.0, 8.0), rand((n,), dtype, 1, 0.1, 1.0), rand((n,), dtype, 2, 0.1)
    dy = rand(shape, dtype, 3)
    ours = norm_backward(x, w, dy, LN_EPS if centre else RMS_EPS, centre, centre, tile=tile)
    ref = _norm_grads64(centre, x, w, b, dy)
    for name, o, r in zip(("dx", "dweight", "dbias"), ours, ref):
        assert o.dtype == dtype and o.shape == r.shape, name
        assert rel(o, r) < TOL[dtype], (name, rel(o, r))
    if not centre:
        assert ours[2] is None


@pytest.mark.parametrize("centre", [True, False])
def test_rows_longer_than_one_block_take_the_tiled_path(centre):
    from kernels._rows import MAX_BLOCK_SIZE

    n = MAX_BLOCK_SIZE + 1000  # a row no block holds (nor HELD_MAX_COLS): the default goes to the long-row path
    x, w, b = rand((2, n), torch.float32, 0), rand((n,), torch.float32, 1, 0.1, 1.0), rand((n,), torch.float32, 2)
    dy = rand((2, n), torch.float32, 3)
    fn = (lambda *t: layernorm_triton(*t)) if centre else (lambda x, w: rmsnorm_triton(x, w))
    ours = grads(fn, (x, w, b) if centre else (x, w), dy)
    for name, o, r in zip(("dx", "dweight", "dbias"), ours, _norm_grads64(centre, x, w, b, dy)):
        assert rel(o, r) < TOL[torch.float32], (name, rel(o, r))


def test_a_tile_that_is_no_power_of_two_is_refused():
    with pytest.raises(ValueError, match="power of two"):
        norm_backward(torch.zeros(1, 40), torch.ones(40), torch.zeros(1, 40), 1e-5, True, True, tile=24)


def test_rows_over_held_max_cols_take_the_tiled_path(monkeypatch):
    # rows of 8193-16384 columns fit a block but spill when held: the tiled path takes them
    from kernels import _norm_bwd

    calls = []
    monkeypatch.setattr(_norm_bwd, "_long_rows", lambda *a: calls.append(a[-2]) or (torch.zeros(1, a[0].shape[1]),) * 2)
    n = _norm_bwd.HELD_MAX_COLS + 1
    norm_backward(torch.zeros(1, n), torch.ones(n), torch.zeros(1, n), 1e-5, True, True)
    norm_backward(torch.zeros(1, n - 1), torch.ones(n - 1), torch.zeros(1, n - 1), 1e-5, True, True)
    assert calls == [_norm_bwd.LONG_TILE]
