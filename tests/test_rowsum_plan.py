"""Row-sum's launch plan (kernels/rowsum/plan.py) as a pure function: shapes, strides and dtypes in, the launch out,
on the CPU, nothing launched. (tests/test_launch_pins.py pins every launch the wrapper makes from it.)"""
import pytest

from kernels import rowsum as rs
from kernels.rowsum import plan

H200_SMS = 132


def _plan(shape, strides=None, element_size=4, sms=0, **kw):
    return plan.forward(shape, strides or (shape[1], 1), element_size, sms, rs._tables(), **kw)


@pytest.mark.parametrize("shape, element_size, kernel, meta", [((4096, 4096), 4, "_rowsum_kernel", {
    "BLOCK_M": 1,
    "BLOCK_N": 4096,
    "ONE_TILE": True,
    "FULL": True
}), ((1000, 32), 4, "_rowsum_kernel", {
    "BLOCK_M": 128,
    "BLOCK_N": 32
}),  # short rows packed
                                                               ((64, 20000), 4, "_rowsum_kernel", {
                                                                   "BLOCK_N": 16384,
                                                                   "ONE_TILE": False
                                                               }),  # too long to hold: tiles
                                                               ((1024, 50257), 2, "_rowsum_aligned_kernel", {
                                                                   "BLOCK_N": 2048,
                                                                   "ALIGN": 8
                                                               }),  # unaligned bf16: aligned tiles
                                                               ])
def test_plan_by_shape(shape, element_size, kernel, meta):
    launch = _plan(shape, element_size=element_size)
    assert launch.kernel == kernel and launch.meta.items() >= meta.items(), launch


def test_few_long_rows_split_on_a_gpu_only():
    assert _plan((4, 1_000_000), sms=H200_SMS).kernel == "split"
    assert _plan((4, 1_000_000), sms=0).kernel == "_rowsum_kernel"  # the interpreter
    assert _plan((4, 1_000_000), (1, 4), sms=H200_SMS).kernel == "_rowsum_kernel"  # x.t(): not one flat buffer


def test_overrides_are_checked():
    with pytest.raises(ValueError, match="power of two"):
        _plan((8, 64), block_n=48)
    with pytest.raises(ValueError, match="power of two"):
        _plan((8, 64), split=48)


def test_a_swapped_table_reaches_the_plan(monkeypatch):
    monkeypatch.setattr(rs, "MIN_TILE_ELEMENTS", 64)
    assert _plan((1000, 32)).meta["BLOCK_M"] == 2
