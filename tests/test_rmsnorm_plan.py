"""RMSNorm's forward launch plan (kernels/rmsnorm/plan.py) as a pure function: shapes, strides and dtypes in, the
launch out, on the CPU, nothing launched. (tests/test_launch_pins.py pins every launch the wrapper makes from it.)"""
import pytest

from kernels import rmsnorm as rms
from kernels.rmsnorm import plan

H200_SMS = 132


def _plan(shape, strides=None, element_size=4, sms=0, weight_stride=1, **kw):
    return plan.forward(shape, strides or (shape[1], 1), weight_stride, element_size, sms, rms._tables(), **kw)


@pytest.mark.parametrize("shape, element_size, kernel, meta", [((4096, 2048), 4, "_rmsnorm_fwd_kernel", {
    "BLOCK_SIZE": 2048,
    "RELOAD": False
}),  # held
                                                               ((4096, 8192), 4, "_rmsnorm_fwd_kernel", {
                                                                   "RELOAD": True,
                                                                   "num_warps": 16
                                                               }),  # fp32 rows read twice
                                                               ((10000, 32), 2, "rmsnorm_fwd_packed_kernel", {
                                                                   "BLOCK_N": 32
                                                               }),  # short rows packed
                                                               ((1024, 50257), 2, "_rmsnorm_fwd_aligned_kernel", {
                                                                   "BLOCK_N": 2048,
                                                                   "ALIGN": 8
                                                               }),  # unaligned bf16: aligned tiles
                                                               ])
def test_plan_by_shape(shape, element_size, kernel, meta):
    launch = _plan(shape, element_size=element_size)
    assert launch.kernel == kernel and launch.meta.items() >= meta.items(), launch


def test_few_long_rows_split_on_a_gpu_only():
    assert _plan((8, 256000), element_size=2, sms=H200_SMS).kernel == "split"
    assert _plan((8, 256000), element_size=2, sms=0).kernel != "split"  # the interpreter


def test_strided_operands_reach_the_launch():
    launch = _plan((40, 33), (1, 40), weight_stride=2)  # x.t() of a (33, 40) buffer, a strided weight: not packed
    assert launch.kernel == "_rmsnorm_fwd_kernel" and launch.ints == (33, 1, 40, 2, 33, 1)


def test_a_swapped_table_reaches_the_plan(monkeypatch):
    monkeypatch.setattr(rms, "RELOAD_MIN_COLS", {})
    assert _plan((4096, 8192)).meta["RELOAD"] is False
