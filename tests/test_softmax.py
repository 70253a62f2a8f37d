"""softmax: forward (whole-row and online-over-tiles kernels) and backward against float64 on the CPU interpreter;
strides, edge shapes, bad input, the fwd+bwd closures, FLOP/byte model."""
import pytest
import torch

from kernels.softmax import (KERNEL, MAX_FUSED_BLOCK, reference, softmax_backward, softmax_forward, softmax_naive,
                             softmax_triton)
from rooflab.cell import relative_error

SHAPES = [(1, 1), (3, 17), (1, 300), (37, 1793), (4, 2048)]
TOLERANCES = [(torch.float32, 1e-6, 1e-5), (torch.bfloat16, 1e-4, 2e-2)]
# dx = y (dy - dot) cancels where one y dominates a row; with y stored in bf16 that costs absolute, not relative,
# accuracy (torch.softmax's own bf16 backward does the same), so the bf16 atol is on the scale of max |dx| ~ 1.
BWD_TOLERANCES = [(torch.float32, 1e-6, 1e-5), (torch.bfloat16, 5e-3, 2e-2)]
# max_block=256 sends every row above 256 columns through the tiled online kernels, at interpreter-friendly sizes.
MAX_BLOCKS = [MAX_FUSED_BLOCK, 256]


def _inputs(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (3 * torch.randn(shape, generator=g)).to(dtype)  # x3: a real spread of exponents
    dy = torch.randn(shape, generator=g).to(dtype)
    return x, dy


@pytest.mark.parametrize("max_block", MAX_BLOCKS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype, atol, rtol", TOLERANCES)
def test_forward_matches_float64(shape, dtype, atol, rtol, max_block):
    x, dy = _inputs(shape, dtype)
    y = softmax_forward(x, max_block)
    assert y.dtype == dtype and y.shape == x.shape
    torch.testing.assert_close(y.double(), reference((x, dy)), atol=atol, rtol=rtol)


@pytest.mark.parametrize("max_block", MAX_BLOCKS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype, atol, rtol", BWD_TOLERANCES)
def test_backward_matches_float64_autograd(shape, dtype, atol, rtol, max_block):
    x, dy = _inputs(shape, dtype)
    x_leaf = x.clone().requires_grad_(True)
    softmax_triton(x_leaf, max_block).backward(dy)
    assert x_leaf.grad.dtype == dtype
    ref = reference((x, dy), pass_="fwd+bwd")
    torch.testing.assert_close(x_leaf.grad.double(), ref, atol=atol, rtol=rtol)
    rel, _ = relative_error(x_leaf.grad, ref)  # what the sweep checks
    assert rel <= KERNEL.tolerance[str(dtype).removeprefix("torch.")]


@pytest.mark.parametrize("shape", [(1, 37), (17, 300), (4, 8192)])
@pytest.mark.parametrize("dtype, atol, rtol", TOLERANCES)
def test_forward_reload_reads_the_row_twice_and_matches_float64(shape, dtype, atol, rtol):
    x, dy = _inputs(shape, dtype)
    y = softmax_forward(x, reload=True)  # the row read again after the sum instead of held
    torch.testing.assert_close(y.double(), reference((x, dy)), atol=atol, rtol=rtol)


@pytest.mark.parametrize("reload", [False, True], ids=["held", "read-again"])
def test_forward_unmasked_full_rows_give_the_masked_result(spy_launches, reload):
    """full drops the column mask of a row exactly one block long: bit for bit the masked result, which matches
    float64; on a shorter row the mask stays. Rows of 512: the one-block row kernel (shorter rows are packed, and
    the packed kernel takes neither full nor reload)."""
    import kernels.softmax as sm

    seen = spy_launches(sm, "_softmax_fwd_row_kernel")
    x, dy = _inputs((5, 512), torch.float32)
    masked = softmax_forward(x, reload=reload, full=False)
    torch.testing.assert_close(masked.double(), reference((x, dy)), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(softmax_forward(x, reload=reload, full=True), masked, atol=0, rtol=0)
    short = x[:, :509]
    torch.testing.assert_close(
        softmax_forward(short, reload=reload, full=True).double(), reference((short, dy)), atol=1e-6, rtol=1e-5)
    assert [(kw["RELOAD"], kw["FULL"]) for _, kw in seen] == [(reload, False), (reload, True), (reload, False)]


def test_default_reload_and_unmasked_rows_follow_the_tables(monkeypatch):
    """RELOAD_MIN_COLS and UNMASKED_COLS decide the one-block launch: fp32 rows of 8192 read again and unmasked,
    bf16 rows of 4096 unmasked, bf16 rows of 8192 held and masked; full=True on a row shorter than its block is
    ignored."""
    import kernels.softmax as sm

    seen = []

    class Spy:

        def __getitem__(self, grid):
            return lambda *args, **kw: seen.append((kw["RELOAD"], kw["FULL"]))

    monkeypatch.setattr(sm, "_softmax_fwd_row_kernel", Spy())
    for cols, dtype, full in [(8192, torch.float32, None), (4096, torch.bfloat16, None), (8192, torch.bfloat16, None),
                              (4096, torch.float32, None), (300, torch.float32, True)]:
        softmax_forward(torch.zeros((2, cols), dtype=dtype), full=full)
    assert seen == [(True, True), (False, True), (False, False), (False, False), (False, False)]


def test_rows_longer_than_the_bound_take_the_online_kernel():
    x, dy = _inputs((2, MAX_FUSED_BLOCK + 1), torch.float32)
    torch.testing.assert_close(softmax_forward(x).double(), reference((x, dy)), atol=1e-7, rtol=1e-5)
    x_leaf = x.clone().requires_grad_(True)
    softmax_triton(x_leaf).backward(dy)
    torch.testing.assert_close(x_leaf.grad.double(), reference((x, dy), pass_="fwd+bwd"), atol=1e-7, rtol=1e-5)


@pytest.mark.parametrize("max_block", MAX_BLOCKS)
def test_large_and_negative_values_are_stable(max_block):
    x = torch.tensor([[1000.0, 999.0, -1000.0] * 100, [-1e4] * 300])
    y = softmax_forward(x, max_block)
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y.double(), torch.softmax(x.double(), dim=1), atol=1e-7, rtol=1e-5)


@pytest.mark.parametrize("prefix, cols, max_block", [(256, 600, 256), (512, 600, 256), (300, 300, 256),
                                                     (16384, 20000, MAX_FUSED_BLOCK)])
def test_rows_whose_leading_tiles_are_all_minus_inf_stay_finite(prefix, cols, max_block):
    """A masked prefix (left padding) fills whole leading tiles of the online kernel with -inf: the running max
    stays -inf there, and exp(-inf - -inf) must not poison the row with NaN (it did: every element of such a row
    came out NaN). A row of only -inf is NaN, as torch's is."""
    x, _ = _inputs((3, cols), torch.float32)
    x[:, :prefix] = float("-inf")
    y = softmax_forward(x, max_block)
    want = torch.softmax(x.double(), dim=1)
    assert torch.equal(torch.isnan(y), torch.isnan(want))
    torch.testing.assert_close(y.double(), want, atol=1e-7, rtol=1e-5, equal_nan=True)


@pytest.mark.parametrize("max_block", MAX_BLOCKS)
@pytest.mark.parametrize("view", ["transpose", "column_slice"])
def test_non_contiguous_inputs_through_strides(view, max_block):
    x, dy = _inputs((40, 1100), torch.float32)
    if view == "transpose":
        x, dy = x[:, :40].t(), dy[:, :40].t()
    else:
        x, dy = x[:, ::2], dy[:, ::2]
    torch.testing.assert_close(softmax_forward(x, max_block).double(), reference((x, dy)), atol=1e-7, rtol=1e-5)
    y = softmax_forward(x.contiguous(), max_block)
    dx = softmax_backward(y.t().contiguous().t(), dy, max_block)  # y transposed in memory, dy sliced
    torch.testing.assert_close(dx.double(), reference((x, dy), pass_="fwd+bwd"), atol=1e-7, rtol=1e-5)


@pytest.mark.parametrize("shape", [(0, 5), (5, 0)])
def test_empty(shape):
    x, dy = _inputs(shape, torch.float32)
    assert softmax_forward(x).shape == shape
    assert softmax_backward(x, dy).shape == shape


def test_bad_inputs_raise_clearly():
    x, dy = _inputs((4, 4), torch.float32)
    with pytest.raises(TypeError, match="supports float32"):
        softmax_forward(x.to(torch.int32))
    with pytest.raises(ValueError, match="2-D"):
        softmax_forward(x.flatten())
    with pytest.raises(ValueError, match="one shape and dtype"):
        softmax_backward(x, dy.to(torch.bfloat16))
    with pytest.raises(ValueError, match="power of two"):
        softmax_forward(x, max_block=100)


@pytest.mark.parametrize("pass_", ["fwd", "fwd+bwd"])
@pytest.mark.parametrize("impl", ["naive", "builtin", "triton"])
def test_impls_through_registry(impl, pass_):
    inputs = KERNEL.make_inputs(48, torch.float32, "cpu", seed=3)
    assert not inputs[0].requires_grad
    fn = KERNEL.impls[impl](inputs, pass_=pass_)
    first = fn().clone()
    again = fn()  # fwd+bwd: x.grad is reset each call, not accumulated
    ref = KERNEL.reference(inputs, pass_=pass_)
    torch.testing.assert_close(first.double(), ref, atol=1e-7, rtol=1e-5)
    torch.testing.assert_close(again, first)


@pytest.mark.parametrize("pass_", ["fwd", "fwd+bwd"])
def test_naive_fn_for_compile_takes_pass(pass_):
    inputs = KERNEL.make_inputs(48, torch.float32, "cpu", seed=3)
    out = softmax_naive(*inputs, pass_=pass_)
    if pass_ == "fwd+bwd":  # (dx, y): the output comes back too, so a compiled fwd+bwd stores it
        out, y = out
        torch.testing.assert_close(y, softmax_naive(*inputs))
    torch.testing.assert_close(out.double(), KERNEL.reference(inputs, pass_=pass_), atol=1e-7, rtol=1e-5)


def test_flop_and_byte_model():
    n = 1024
    assert KERNEL.flops(n, pass_="fwd") == 5 * n * n  # max, subtract, exp, sum, scale
    assert KERNEL.flops(n, pass_="fwd+bwd") == 9 * n * n  # + dy*y, sum, subtract, multiply
    assert KERNEL.bytes(n, "float32", pass_="fwd") == 8_388_608  # read x, write y: 2 * 1024^2 * 4 B
    assert KERNEL.bytes(n, "float32", pass_="fwd+bwd") == 20_971_520  # + read y, dy, write dx: 5 * 1024^2 * 4 B
    assert KERNEL.bytes(n, "bfloat16", pass_="fwd+bwd") == 10_485_760
