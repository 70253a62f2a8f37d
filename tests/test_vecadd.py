"""vecadd: Triton kernel against float64 on the CPU interpreter; strides, edge shapes, bad input, FLOP/byte model."""
import pytest
import torch
import triton
import triton.language as tl

from kernels._shared.elementwise import tile
from kernels.vecadd import KERNEL, reference, vecadd_triton

SHAPES = [(1, 1), (3, 17), (1, 4097), (37, 1793), (64, 300)]
TOLERANCES = [(torch.float32, 1e-6, 1e-6), (torch.bfloat16, 1e-2, 1.6e-2)]


def _inputs(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(shape, generator=g).to(dtype) for _ in range(2))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype, atol, rtol", TOLERANCES)
def test_matches_float64(shape, dtype, atol, rtol):
    x, y = _inputs(shape, dtype)
    out = vecadd_triton(x, y)
    assert out.dtype == dtype and out.shape == x.shape
    torch.testing.assert_close(out.double(), reference((x, y)), atol=atol, rtol=rtol)


@pytest.mark.parametrize("block_size", [16, 256, 8192])
def test_block_size_override(block_size):
    x, y = _inputs((37, 1793), torch.float32)
    torch.testing.assert_close(vecadd_triton(x, y, block_size=block_size).double(), reference((x, y)))


@triton.jit
def _interior_probe(out_ptr, pid, n_cols, BLOCK_N: tl.constexpr, ONE_ROW: tl.constexpr):
    """Store whether program ``pid``'s tile of a single-row view of n_cols elements is interior."""
    _, _, inside = tile(pid, 1, n_cols, 1, BLOCK_N, ONE_ROW)
    tl.store(out_ptr, inside.to(tl.int32))


@pytest.mark.parametrize("one_row", [True, False])
@pytest.mark.parametrize(
    "n_cols, pid, interior",
    [(2**31 - 5, 2**21 - 1, False),  # the last tile ends at 2^31 > n_cols: (pid + 1) * 1024 overflows int32
     (2**31 - 5, 2**21 - 2, True), (2**31 + 5, 2**21 - 1, True),  # n_cols past int32: an int64 argument
     (2**31 + 5, 2**21, False), ])
def test_interior_tiles_past_two_to_the_31_elements(one_row, n_cols, pid, interior):
    """Whether a tile needs its mask, for programs far along a row longer than int32 counts (a contiguous input of
    more than 2^31 elements, ~46341^2): computed in int64, so the last, ragged tile is never taken for interior."""
    out = torch.zeros(1, dtype=torch.int32)
    _interior_probe[(1, )](out, pid, n_cols, BLOCK_N=1024, ONE_ROW=one_row)
    assert bool(out.item()) is interior


@pytest.mark.parametrize("one_row", [True, False])
@pytest.mark.parametrize("block_size", [16, 4096])
def test_single_row_tiles_both_ways(one_row, block_size):
    """A contiguous input's (1, n) view, tiled from the program id alone or through the 2-D split: same answer,
    ragged last tile included (37 * 1793 is no multiple of 16 or 4096)."""
    x, y = _inputs((37, 1793), torch.float32)
    out = vecadd_triton(x, y, block_size=block_size, one_row=one_row)
    torch.testing.assert_close(out.double(), reference((x, y)))


@pytest.mark.parametrize("dtype, atol, rtol", TOLERANCES)
@pytest.mark.parametrize("view", ["transpose", "column_slice", "mixed"])
def test_non_contiguous_inputs_through_strides(view, dtype, atol, rtol):
    x, y = _inputs((33, 66), dtype)
    if view == "transpose":
        x, y = x.t(), y.t()
    elif view == "column_slice":
        x, y = x[:, ::2], y[:, ::2]
    else:
        x, y = x[:, :33].t(), y[:, 1::2]
    torch.testing.assert_close(vecadd_triton(x, y).double(), reference((x, y)), atol=atol, rtol=rtol)


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0, 0)])
def test_empty(shape):
    x, y = _inputs(shape, torch.float32)
    assert vecadd_triton(x, y).shape == shape


def test_bad_inputs_raise_clearly():
    x, y = _inputs((4, 4), torch.float32)
    with pytest.raises(TypeError, match="supports float32"):
        vecadd_triton(x.to(torch.int32), y.to(torch.int32))
    with pytest.raises(TypeError, match="one dtype"):
        vecadd_triton(x, y.to(torch.bfloat16))
    with pytest.raises(ValueError, match="one shape"):
        vecadd_triton(x, y[:3])
    torch.testing.assert_close(vecadd_triton(x.flatten(), y.flatten()), (x + y).flatten())  # any rank, as torch.add


@pytest.mark.parametrize("impl", ["naive", "builtin", "triton"])
def test_impls_through_registry(impl):
    inputs = KERNEL.make_inputs(40, torch.float32, "cpu", seed=3)
    torch.testing.assert_close(KERNEL.impls[impl](inputs)().double(), KERNEL.reference(inputs))


def test_flop_and_byte_model():
    assert KERNEL.flops(1024) == 1024 * 1024  # one add per element
    assert KERNEL.bytes(1024, "float32") == 12_582_912  # (read x, y + write z) 3 * 1024^2 * 4 B
    assert KERNEL.bytes(1024, "bfloat16") == 6_291_456
