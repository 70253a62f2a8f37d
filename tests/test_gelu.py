"""GeLU: the Triton kernel (under the interpreter) against the float64 reference, and its FLOP/byte model."""
import pytest
import torch
import torch.nn.functional as F

from kernels.gelu import KERNEL, gelu_naive, gelu_triton
from rooflab.cell import relative_error

CASES = [  # (dtype, tolerance on ||out - ref|| / ||ref||)
    (torch.float32, 1e-6), (torch.bfloat16, 8e-3),
]
SHAPES = [(1, 1), (1, 2049), (3, 17), (37, 1793), (64, 64)]  # blocks of 1024/4096: only 64x64 fills them exactly


@pytest.mark.parametrize("dtype,tol", CASES)
@pytest.mark.parametrize("shape", SHAPES)
def test_triton_matches_float64(shape, dtype, tol):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    y = gelu_triton(x)
    assert y.dtype == dtype and y.shape == x.shape
    ref = F.gelu(x.double(), approximate="tanh")
    rel, _ = relative_error(y, ref)
    assert rel < tol


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # exp of +-1e4 under the interpreter
@pytest.mark.parametrize("precise", [True, False])
def test_fast_and_precise_forms_agree_over_the_range(precise):
    """The fast form (folded exp2 polynomial, approximate division) against float64 where tanh saturates, near 0 and
    in between; both forms must give 0 for large negative x and x for large positive x."""
    x = torch.cat([torch.linspace(-30, 30, 6001), torch.tensor([-1e4, -100.0, 0.0, 1e-30, 100.0, 1e4])])[None, :]
    y = gelu_triton(x, precise=precise)
    ref = F.gelu(x.double(), approximate="tanh")
    torch.testing.assert_close(y.double(), ref, atol=1e-6, rtol=2e-6)


def test_every_element_written():
    """A masked tail must be stored too: poison the output and check nothing is left."""
    x = torch.randn(5, 411)
    y = gelu_triton(x, block_size=128)
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y, F.gelu(x, approximate="tanh"), atol=1e-6, rtol=1e-5)


def test_naive_matches_builtin():
    x = torch.randn(33, 65, dtype=torch.float64)
    torch.testing.assert_close(gelu_naive(x), F.gelu(x, approximate="tanh"))


def test_non_contiguous_is_a_clear_error():
    x = torch.randn(64, 64)
    with pytest.raises(ValueError, match="contiguous"):
        gelu_triton(x.t())
    with pytest.raises(ValueError, match="contiguous"):
        gelu_triton(x[:, ::2])


def test_wrong_dtype_is_a_clear_error():
    with pytest.raises(TypeError, match="float32"):
        gelu_triton(torch.ones(4, 4, dtype=torch.int32))


def test_empty_input():
    assert gelu_triton(torch.empty(0, 8)).shape == (0, 8)


def test_flop_and_byte_model():
    # 9 FLOP per element; the fewest bytes: read x once and write y once.
    assert KERNEL.flops(1024) == 9 * 1024 * 1024
    assert KERNEL.bytes(1024, "float32") == 2 * 1024 * 1024 * 4
    assert KERNEL.bytes(8192, "bfloat16") == 2 * 8192 * 8192 * 2
