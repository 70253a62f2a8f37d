"""The binary elementwise kernels' launch plan (kernels/_shared/elementwise.plan, vecadd's and saxpy's) as a pure
function: shape, strides and dtype in, the launch out, on the CPU, nothing launched. (tests/test_launch_pins.py pins
every launch the wrappers make from it.)"""
import pytest
import torch

from kernels._shared.elementwise import LAUNCH, plan

FP32 = torch.float32


def _plan(shape, x_strides=None, y_strides=None, **kw):
    own = tuple(torch.empty(shape).stride())
    return plan(shape, x_strides or own, y_strides or own, FP32, LAUNCH, **kw)


def test_contiguous_operands_run_as_one_row_with_a_zero_row_stride():
    """Contiguous operands run as one (1, n) row; its row stride is passed as 0 so Triton can prove alignment."""
    p = _plan((37, 1793))
    assert p.flat and p.copy == (False, False)
    assert p.ints == (1, 37 * 1793, 0, 1, 0, 1, 0, 1) and p.meta["BLOCK_M"] == 1 and p.meta["ONE_ROW"]
    assert (p.meta["BLOCK_N"], p.meta["num_warps"]) == LAUNCH[FP32]
    assert p.grid == (-(-37 * 1793 // LAUNCH[FP32][0]), )
    assert not _plan((37, 1793), one_row=False).meta["ONE_ROW"]


def test_a_2d_view_keeps_its_strides_and_z_is_contiguous():
    p = _plan((37, 1793), (1, 37), (1, 37))  # x.t() and y.t() of (1793, 37) buffers
    assert not p.flat and p.ints == (37, 1793, 1, 37, 1, 37, 1793, 1) and not p.meta["ONE_ROW"]
    with pytest.raises(ValueError, match="power of two"):
        _plan((37, 1793), (1, 37), (1, 37), elements=1000)
    with pytest.raises(ValueError, match="single-row"):
        _plan((37, 1793), (1, 37), (1, 37), one_row=True)


def test_a_single_row_tile_is_one_row_even_when_the_row_is_short():
    assert {k: v for k, v in _plan((8, 8)).meta.items() if k != "num_warps"} == \
        {"BLOCK_M": 1, "BLOCK_N": 64, "ONE_ROW": True}  # 64 elements: a 64-wide tile, not 16 copies of the row
    assert _plan((8, 8), one_row=False).meta["BLOCK_M"] == 16  # the 2-D split masks the rows past the first


def test_other_ranks_copy_only_the_strided_operand():
    p = _plan((4, 5, 6), (1, 4, 20))  # x strided, y contiguous
    assert p.flat and p.copy == (True, False) and p.ints[:2] == (1, 120)
    assert _plan((4, 5, 6)).copy == (False, False) and _plan((7, )).ints[:2] == (1, 7)


def test_overrides_and_the_table():
    p = _plan((1, 5000), elements=256, num_warps=2)
    assert (p.meta["BLOCK_N"], p.meta["num_warps"], p.grid) == (256, 2, (20, ))
    assert plan((64, 64), (64, 1), (64, 1), FP32, {FP32: (512, 8)}).meta["BLOCK_N"] == 512
