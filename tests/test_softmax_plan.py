"""Softmax's launch plan (kernels/softmax/plan.py) as a pure function: shapes, strides and dtypes in, the launch out,
on the CPU, nothing launched. (tests/test_launch_pins.py pins every launch the wrapper makes from it.)"""
import pytest

from kernels import softmax as sm
from kernels.softmax import plan

H200_SMS = 132


def _plan(shape, strides=None, element_size=4, sms=0, **kw):
    return plan.forward(shape, strides or (shape[1], 1), element_size, sms, sm._tables(), **kw)


@pytest.mark.parametrize("shape, element_size, kernel, meta", [((4096, 4096), 4, "_softmax_fwd_row_kernel", {
    "BLOCK_N": 4096
}),  # held: one program a row
                                                               ((4096, 8192), 4, "_softmax_fwd_row_kernel", {
                                                                   "RELOAD": True,
                                                                   "FULL": True
                                                               }),  # fp32 rows RELOAD_MIN_COLS names
                                                               ((10000, 32), 2, "softmax_fwd_rows_kernel", {
                                                                   "BLOCK_N": 32,
                                                                   "BLOCK_M": 128
                                                               }),  # short rows packed
                                                               ((64, 20000), 4, "_softmax_fwd_online_kernel", {
                                                                   "BLOCK_N": 16384
                                                               }),  # too long to hold: tiles
                                                               ((1024, 50257), 2, "softmax_fwd_aligned_kernel", {
                                                                   "BLOCK_N": 4096,
                                                                   "ALIGN": 8
                                                               }),  # unaligned bf16: aligned tiles
                                                               ])
def test_forward_plan_by_shape(shape, element_size, kernel, meta):
    launch = _plan(shape, element_size=element_size)
    assert launch.kernel == kernel and launch.meta.items() >= meta.items(), launch


def test_few_long_rows_split_on_a_gpu_only():
    assert _plan((8, 256000), element_size=2, sms=H200_SMS).kernel == "split"
    assert _plan((8, 256000), element_size=2, sms=0).kernel == "_softmax_fwd_online_kernel"  # the interpreter
    assert _plan((8, 256000), (1, 8), element_size=2, sms=H200_SMS).kernel != "split"  # x.t(): not contiguous


def test_strides_reach_the_launch_uncopied():
    launch = _plan((40, 33), (1, 40))  # x.t() of a (33, 40) buffer
    assert launch.ints == (40, 33, 1, 40, 33, 1)


def test_backward_plan():
    assert plan.backward((4096, 4096), (4096, 1), (4096, 1), 4, sm._tables()).kernel == "_softmax_bwd_row_kernel"
    assert plan.backward((4, 65536), (65536, 1), (65536, 1), 4, sm._tables()).kernel == "_softmax_bwd_tiled_kernel"


def test_a_swapped_table_reaches_the_plan(monkeypatch):
    monkeypatch.setattr(sm, "RELOAD_MIN_COLS", {})
    assert _plan((4096, 8192)).meta["RELOAD"] is False
