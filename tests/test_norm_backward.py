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


# The sweep's pass fwd+bwd (issue 24): every implementation's (dx, dweight[, dbias]) against the kernel's float64
# reference within the dtype's tolerance, the check on a row sample, the FLOP/byte model and one cell end to end.
NORMS = ("layernorm", "rmsnorm")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("impl", ["naive", "builtin", "triton"])
@pytest.mark.parametrize("name", NORMS)
@pytest.mark.parametrize("shape", [(37, 64), (5, 100)])
def test_fwd_bwd_pass_within_kernel_tolerance(name, impl, dtype, shape):
    from rooflab.cell import relative_error
    from rooflab.kernel import load_kernel

    k = load_kernel(name)
    inputs = k.make_inputs(shape, getattr(torch, dtype), "cpu", seed=3)
    out = k.impls[impl](inputs, pass_="fwd+bwd")()
    ref = k.reference(inputs, pass_="fwd+bwd")
    assert len(out) == len(ref) == len(inputs) - 1  # dx and one gradient per parameter
    assert rel(out[0], k.impls[impl](inputs, pass_="fwd")()) > 0.1  # a gradient, not the forward
    rel_err, _ = relative_error(out, ref)
    assert rel_err <= k.tolerance[dtype], rel_err


@pytest.mark.parametrize("name", NORMS)
def test_compiled_naive_fwd_bwd_within_tolerance(name):
    from rooflab.cell import compiled_factory, relative_error
    from rooflab.kernel import load_kernel

    k = load_kernel(name)
    inputs = k.make_inputs((16, 48), torch.float32, "cpu", seed=1)
    make, fell_back = compiled_factory(k)
    rel_err, _ = relative_error(make(inputs, pass_="fwd+bwd")(), k.reference(inputs, pass_="fwd+bwd"))
    assert rel_err <= k.tolerance["float32"] and not fell_back()


@pytest.mark.parametrize("name", NORMS)
def test_check_on_a_row_sample_reduces_the_parameter_gradients_over_every_row(name):
    from rooflab.cell import _rows_of, check_sample, relative_error
    from rooflab.kernel import load_kernel

    k = load_kernel(name)
    inputs = k.make_inputs((40, 64), torch.float32, "cpu", seed=2)
    rows = check_sample((40, 64), "cpu", max_elements=64 * 6)
    assert rows is not None and len(rows) < 40
    out = _rows_of(k.impls["naive"](inputs, pass_="fwd+bwd")(), rows)
    sampled = k.check_rows(inputs, rows)
    rel_err, _ = relative_error(out, k.reference(sampled, pass_="fwd+bwd"))
    assert rel_err <= k.tolerance["float32"]
    rel_err, _ = relative_error(_rows_of(k.impls["naive"](inputs)(), rows), k.reference(sampled))
    assert rel_err <= k.tolerance["float32"]


def test_fwd_bwd_flop_and_byte_model():
    from kernels import layernorm as ln, rmsnorm as rms

    assert ln.flops(10, "fwd") == 700 and ln.flops(10, "fwd+bwd") == (7 + 13) * 100
    assert rms.flops(10, "fwd") == 400 and rms.flops(10, "fwd+bwd") == (4 + 9) * 100
    # fwd: x, y, weight, bias; bwd: x, dy, dx, weight, dweight, dbias
    assert ln.bytes_moved(10, "bfloat16", "fwd+bwd") == (5 * 100 + 5 * 10) * 2
    assert rms.bytes_moved(10, "bfloat16", "fwd+bwd") == (5 * 100 + 3 * 10) * 2  # no bias
    assert ln.bytes_moved(10, "bfloat16") == ln.bytes_moved(10, "bfloat16", "fwd")


@pytest.mark.parametrize("impl,status", [("naive", "ok"), ("triton", "not_timed")])
def test_a_fwd_bwd_cell_end_to_end(impl, status):
    from rooflab.cell import Cell, run_cell
    from rooflab.kernel import load_kernel
    from rooflab.timing import TimingConfig

    k = load_kernel("layernorm")
    timing = TimingConfig(warmup_ms=1.0, min_samples=3, max_samples=3, max_time_s=1.0, min_time_s=0.0, instances=1,
                          placements=1, loop_ms=0.0)
    row = run_cell(k, Cell("layernorm", impl, "float32", 32, "fwd+bwd"), "cpu", timing, interpret_max_size=64)
    assert row["status"] == status, row.get("error")
    assert row["flops"] == (7 + 13) * 32 * 32 and row["rel_err"] <= row["tolerance"]
