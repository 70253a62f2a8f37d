"""LayerNorm's forward launch plan (kernels/layernorm/plan.py) as a pure function: shapes, strides and dtypes in, the
launch out, on the CPU, nothing launched. (tests/test_launch_pins.py pins every launch the wrapper makes from it.)"""
import pytest

from kernels import layernorm as ln
from kernels.layernorm import plan

H200_SMS = 132


def _plan(shape, strides=None, element_size=4, sms=0, prefetch=False, **kw):
    return plan.forward(shape, strides or (shape[1], 1), 1, 1, element_size, sms, prefetch, ln._tables(), **kw)


@pytest.mark.parametrize("shape, element_size, kernel, meta", [((4096, 2048), 4, "_layernorm_fwd_kernel", {
    "BLOCK_SIZE": 2048,
    "ONE_TILE": True,
    "FULL": True
}),  # held
                                                               ((1024, 50257), 4, "_layernorm_fwd_aligned_kernel", {
                                                                   "BLOCK_N": 1024,
                                                                   "ALIGN": 4
                                                               }),  # unaligned: aligned tiles
                                                               ((64, 65536), 4, "_layernorm_fwd_kernel", {
                                                                   "BLOCK_SIZE": 2048,
                                                                   "ONE_TILE": False
                                                               }),  # TILED_LAUNCH's tile
                                                               ((10000, 32), 2, "layernorm_fwd_packed_kernel", {
                                                                   "BLOCK_N": 32
                                                               }),  # short rows packed
                                                               ])
def test_plan_by_shape(shape, element_size, kernel, meta):
    launch = _plan(shape, element_size=element_size)
    assert launch.kernel == kernel and launch.meta.items() >= meta.items(), launch


def test_the_weights_prefetch_only_where_the_device_can():
    assert not _plan((4096, 1024), prefetch=False).meta["WB_PREFETCH"]
    assert _plan((4096, 1024), prefetch=True).meta["WB_PREFETCH"]


def test_few_long_rows_split_on_a_gpu_only():
    assert _plan((8, 256000), element_size=2, sms=H200_SMS).kernel == "split"
    assert _plan((8, 256000), element_size=2, sms=0).kernel != "split"


def test_a_swapped_table_reaches_the_plan(monkeypatch):
    monkeypatch.setattr(ln, "ALIGNED_TILES", {})
    assert _plan((1024, 50257)).kernel == "_layernorm_fwd_kernel"
