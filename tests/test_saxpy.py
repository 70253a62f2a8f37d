"""saxpy: Triton kernel against float64 on the CPU interpreter; strides, edge shapes, bad input, FLOP/byte model."""
import pytest
import torch

from kernels.saxpy import KERNEL, reference, saxpy_triton

SHAPES = [(1, 1), (3, 17), (1, 4097), (37, 1793), (64, 300)]
TOLERANCES = [(torch.float32, 1e-6, 1e-6), (torch.bfloat16, 1e-2, 1.6e-2)]
A = 1.75  # exact in fp32, as the kernel receives it


def _inputs(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(shape, generator=g).to(dtype) for _ in range(2))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype, atol, rtol", TOLERANCES)
def test_matches_float64(shape, dtype, atol, rtol):
    x, y = _inputs(shape, dtype)
    out = saxpy_triton(A, x, y)
    assert out.dtype == dtype and out.shape == x.shape
    torch.testing.assert_close(out.double(), reference((A, x, y)), atol=atol, rtol=rtol)


@pytest.mark.parametrize("dtype, atol, rtol", TOLERANCES)
@pytest.mark.parametrize("view", ["transpose", "column_slice"])
def test_non_contiguous_inputs_through_strides(view, dtype, atol, rtol):
    x, y = _inputs((33, 66), dtype)
    x, y = (x.t(), y.t()) if view == "transpose" else (x[:, ::2], y[:, ::2])
    torch.testing.assert_close(saxpy_triton(-0.5, x, y).double(), reference((-0.5, x, y)), atol=atol, rtol=rtol)


@pytest.mark.parametrize("one_row", [True, False])
def test_single_row_tiles_both_ways(one_row):
    x, y = _inputs((37, 1793), torch.float32)
    out = saxpy_triton(A, x, y, block_size=4096, one_row=one_row)
    torch.testing.assert_close(out.double(), reference((A, x, y)), atol=1e-6, rtol=1e-6)


def test_integer_scalar_and_zero():
    x, y = _inputs((5, 7), torch.float32)
    torch.testing.assert_close(saxpy_triton(2, x, y), 2 * x + y)
    torch.testing.assert_close(saxpy_triton(0.0, x, y), y)


@pytest.mark.parametrize("shape", [(0, 5), (5, 0)])
def test_empty(shape):
    x, y = _inputs(shape, torch.float32)
    assert saxpy_triton(A, x, y).shape == shape


def test_bad_inputs_raise_clearly():
    x, y = _inputs((4, 4), torch.float32)
    with pytest.raises(TypeError, match="supports float32"):
        saxpy_triton(A, x.to(torch.int32), y.to(torch.int32))
    with pytest.raises(TypeError, match="one dtype"):
        saxpy_triton(A, x, y.to(torch.bfloat16))
    with pytest.raises(TypeError, match="Python float scalar"):
        saxpy_triton(torch.tensor(A), x, y)
    with pytest.raises(ValueError, match="one shape"):
        saxpy_triton(A, x, y[:3])


@pytest.mark.parametrize("impl", ["naive", "builtin", "triton"])
def test_impls_through_registry(impl):
    inputs = KERNEL.make_inputs(40, torch.float32, "cpu", seed=3)
    assert isinstance(inputs[0], float)
    torch.testing.assert_close(KERNEL.impls[impl](inputs)().double(), KERNEL.reference(inputs))


def test_flop_and_byte_model():
    assert KERNEL.flops(1024) == 2 * 1024 * 1024  # multiply and add per element
    assert KERNEL.bytes(1024, "float32") == 12_582_912  # (read x, y + write z) 3 * 1024^2 * 4 B
    assert KERNEL.bytes(1024, "bfloat16") == 6_291_456
