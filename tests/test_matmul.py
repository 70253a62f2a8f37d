"""kernels/matmul/__init__.py under the Triton interpreter: C = relu(A @ B) against float64, strides, errors, FLOP/byte model.

The interpreter computes fp32 dots exactly (no tf32), so float32 is held to a tight tolerance here; the GPU's tf32 is
covered by KERNEL.tolerance, checked by the measurement job.
"""
import pytest
import torch
import triton

from kernels.matmul import operands as operands
from kernels import matmul as mm
from kernels.matmul import configs as mm_configs
from kernels.matmul.configs import IEEE_TILES
from rooflab.cell import relative_error
from rooflab.kernel import math_mode, math_mode_ran, torch_dtype
from rooflab.triton_utils import autotune_configs
from tests.test_launch_pins import _recorded, _value

DTYPES = [  # (dtype, atol, rtol): the tolerance travels with the dtype
    (torch.float32, 1e-4, 1e-4), (torch.bfloat16, 2e-2, 1.6e-2),  # C rounded to bf16 (8-bit mantissa)
    (torch.float16, 2e-3, 2e-3),
]
SHAPES = [(1, 1, 1), (17, 33, 65), (64, 48, 100), (100, 70, 40), (5, 128, 3), (128, 128, 128)]  # (M, N, K)
SMALL_TILES = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 3}  # many tiles; 7 row-tiles, groups of 3


def _operands(m, n, k, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn((m, k), generator=g).to(dtype)
    b = torch.randn((k, n), generator=g).to(dtype)
    return a, b


def _ref(a, b, relu=True):
    c = a.to(torch.float64) @ b.to(torch.float64)
    return torch.relu(c) if relu else c


@pytest.mark.parametrize("config", [None, SMALL_TILES], ids=["autotune-first", "small-tiles"])
@pytest.mark.parametrize("dtype,atol,rtol", DTYPES, ids=lambda v: str(v).replace("torch.", ""))
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_matches_float64(m, n, k, dtype, atol, rtol, config):
    a, b = _operands(m, n, k, dtype)
    c = mm.matmul_triton(a, b, config=config)
    assert c.shape == (m, n) and c.dtype == dtype
    torch.testing.assert_close(c.to(torch.float64), _ref(a, b), atol=atol, rtol=rtol)


@pytest.mark.parametrize("dtype,atol,rtol", DTYPES, ids=lambda v: str(v).replace("torch.", ""))
@pytest.mark.parametrize("which", ["a.t()", "b.t()", "both.t()", "a[:, ::2]", "b[::2]"])
def test_strided_operands_without_copy(which, dtype, atol, rtol):
    m, n, k = 33, 40, 50
    g = torch.Generator().manual_seed(1)
    if which == "a.t()":
        a, b = torch.randn((k, m), generator=g).to(dtype).t(), torch.randn((k, n), generator=g).to(dtype)
    elif which == "b.t()":
        a, b = torch.randn((m, k), generator=g).to(dtype), torch.randn((n, k), generator=g).to(dtype).t()
    elif which == "both.t()":
        a, b = torch.randn((k, m), generator=g).to(dtype).t(), torch.randn((n, k), generator=g).to(dtype).t()
    elif which == "a[:, ::2]":
        a, b = torch.randn((m, 2 * k), generator=g).to(dtype)[:, ::2], torch.randn((k, n), generator=g).to(dtype)
    else:
        a, b = torch.randn((m, k), generator=g).to(dtype), torch.randn((2 * k, n), generator=g).to(dtype)[::2]
    assert not (a.is_contiguous() and b.is_contiguous())
    for config in (None, SMALL_TILES):
        (launch, ) = _recorded(mm, ("_matmul_kernel_autotuned", "_matmul_kernel"),
                               lambda: mm.matmul_triton(a, b, config=config))
        assert launch["args"][:2] == [_value(a), _value(b)]  # the operands as given, strides and all: no copy
        assert launch["args"][6:10] == [*a.stride(), *b.stride()]
        c = mm.matmul_triton(a, b, config=config)
        torch.testing.assert_close(c.to(torch.float64), _ref(a, b), atol=atol, rtol=rtol)


@pytest.mark.parametrize("config", [None, SMALL_TILES], ids=["autotune-first", "small-tiles"])
def test_activation_none_keeps_negatives(config):
    a, b = _operands(37, 29, 45, torch.float32)
    c = mm.matmul_triton(a, b, activation="none", config=config)
    ref = _ref(a, b, relu=False)
    assert (ref < 0).any() and (c < 0).any()
    torch.testing.assert_close(c.to(torch.float64), ref, atol=1e-4, rtol=1e-4)
    relu = mm.matmul_triton(a, b, activation="relu", config=config)
    assert (relu >= 0).all()


@pytest.mark.parametrize("dtype,atol,rtol", DTYPES, ids=lambda v: str(v).replace("torch.", ""))
@pytest.mark.parametrize("m,n,k", [(20, 33, 50), (7, 48, 17), (24, 31, 32), (16, 32, 48)])
def test_large_unaligned_products_run_padded(monkeypatch, m, n, k, dtype, atol, rtol):
    """Past PAD_MIN_MNK, K or N no multiple of 16 runs on zero-padded copies: the same answer, the first N columns of
    a C padded to a multiple of 16 (what the H200's divisibility hint needs); aligned ones and pad=False as before."""
    monkeypatch.setattr(operands, "PAD_MIN_MNK", 1)
    a, b = _operands(m, n, k, dtype)
    c = mm.matmul_triton(a, b)
    torch.testing.assert_close(c.to(torch.float64), _ref(a, b), atol=atol, rtol=rtol)
    padded = mm.padded_dims(a, b)
    assert c.shape == (m, n) and (padded is None) == (n % 16 == 0 and k % 16 == 0)
    assert c.stride(0) == (padded[1] if padded else n)
    assert mm.matmul_triton(a, b, pad=False).is_contiguous()
    monkeypatch.setattr(operands, "PAD_MIN_MNK", m * n * k + 1)  # one multiply-add short: not padded
    assert mm.padded_dims(a, b) is None and mm.matmul_triton(a, b).is_contiguous()


def test_tf32_tiles_only_for_tf32_and_k_major_b_only_for_large_tf32_products_on_hopper(monkeypatch):
    """The BLOCK_K 32 tiles are offered to TF32 products only; on the CPU (the interpreter) no product is given a
    K-major B, and on a GPU only a TF32 product of at least KMAJOR_MIN_MNK whose B is row-major."""
    configs = mm.get_matmul_configs()
    a, b = _operands(4, 4, 4, torch.float32)

    def tiles(dtype, precision):  # what the autotuner is offered, as matmul_triton names the precision
        return {(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"])
                for c in mm._prune_configs(configs, {"a_ptr": a.to(dtype)}, INPUT_PRECISION=precision)}

    assert mm.input_precision_for(torch.bfloat16) == "tf32"  # 16-bit products pass "tf32" too: pruned by size
    sixteen = tiles(torch.bfloat16, "tf32") | tiles(torch.float16, "tf32")
    assert mm.TF32_TILES <= tiles(torch.float32, "tf32")
    assert not mm.TF32_TILES & (tiles(torch.float32, "ieee") | sixteen)
    assert mm.TF32_TILES & {(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]) for c in configs}
    monkeypatch.setattr(operands, "KMAJOR_MIN_MNK", 1)
    monkeypatch.setattr(operands, "KMAJOR_MIN_M", 4)
    with math_mode("tf32"):
        assert not operands.wants_k_major(a, b)  # CPU tensors
    monkeypatch.setattr(operands, "device_capability", lambda device: (9, 0))

    class Cuda:  # stands in for a CUDA tensor: what wants_k_major reads

        def __init__(self, t):
            self.t, self.dtype, self.device, self.shape = t, t.dtype, torch.device("cuda"), t.shape

        def dim(self):
            return self.t.dim()

        def stride(self, i):
            return self.t.stride(i)

        def numel(self):
            return self.t.numel()

    with math_mode("tf32"):
        assert operands.wants_k_major(Cuda(a), Cuda(b))
        assert not operands.wants_k_major(Cuda(a), Cuda(b.t().contiguous().t()))  # already K-major
        assert not operands.wants_k_major(Cuda(a.half()), Cuda(b.half()))
        monkeypatch.setattr(operands, "KMAJOR_MIN_M", 5)  # a product of fewer rows reads B once: no copy
        assert not operands.wants_k_major(Cuda(a), Cuda(b))
        monkeypatch.setattr(operands, "KMAJOR_MIN_M", 4)
        monkeypatch.setattr(operands, "KMAJOR_MIN_MNK", 4**3 + 1)
        assert not operands.wants_k_major(Cuda(a), Cuda(b))
    monkeypatch.setattr(operands, "KMAJOR_MIN_MNK", 1)
    with math_mode("float32"):
        assert not operands.wants_k_major(Cuda(a), Cuda(b))  # IEEE fp32: no TF32 MMA to feed


def test_empty_dimensions():
    a, b = _operands(0, 5, 4, torch.float32)
    assert mm.matmul_triton(a, b).shape == (0, 5)
    a, b = _operands(3, 5, 0, torch.float32)  # K = 0: an empty sum, C = relu(0) = 0
    assert torch.equal(mm.matmul_triton(a, b), torch.zeros(3, 5))


def test_rejects_bad_operands():
    a, b = _operands(4, 6, 5, torch.float32)
    with pytest.raises(ValueError, match="inner dimensions"):
        mm.matmul_triton(a, b.t())
    with pytest.raises(ValueError, match="2-D"):
        mm.matmul_triton(a[0], b)
    with pytest.raises(TypeError, match="one dtype"):
        mm.matmul_triton(a, b.to(torch.float16))
    with pytest.raises(TypeError, match="float64"):
        mm.matmul_triton(a.double(), b.double())
    with pytest.raises(TypeError, match="int32"):
        mm.matmul_triton(a.int(), b.int())
    with pytest.raises(ValueError, match="activation"):
        mm.matmul_triton(a, b, activation="gelu")


def test_configs_one_source_and_hopper_tiles():
    configs = mm.get_matmul_configs()
    tiles = {(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"], c.num_stages, c.num_warps)
             for c in configs}
    assert {(128, 256, 64, 3, 8), (128, 128, 64, 4, 8), (64, 64, 64, 4, 4)} <= tiles
    assert all(c.kwargs["GROUP_M"] >= 1 for c in configs)
    assert autotune_configs(configs) == configs[:1]  # the interpreter runs only the first


def test_prune_drops_configs_too_big_for_shared_memory():
    configs = mm.get_matmul_configs()
    big = next(c for c in configs if (c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_stages) == (128, 256, 3))
    # 3 stages x (128 + 256) x 64 x 4 B = 288 KiB > 227 KiB at float32; half that at bfloat16
    assert mm._smem_bytes(big, 4) == 3 * (128 + 256) * 64 * 4
    fp32 = mm._prune_configs(configs, {"a_ptr": torch.empty(1, dtype=torch.float32)})
    bf16 = mm._prune_configs(configs, {"a_ptr": torch.empty(1, dtype=torch.bfloat16)})
    assert big not in fp32 and big in bf16 and fp32  # TF32's and IEEE fp32's own tiles are theirs alone:
    assert len(bf16) == len(configs) - len(mm.TF32_TILES) - len(IEEE_TILES)
    tiny = [triton.Config({"BLOCK_M": 512, "BLOCK_N": 512, "BLOCK_K": 128, "GROUP_M": 8}, num_stages=4)]
    assert mm._prune_configs(tiny, {"a_ptr": torch.empty(1)}) == tiny  # never prunes to nothing


def test_ieee_fp32_products_keep_only_narrow_tiles_and_the_tables_ffma_tiles():
    a = {"a_ptr": torch.empty(1, dtype=torch.float32)}
    for prune, configs, args in ((mm._prune_configs, mm.get_matmul_configs(), a),
                                 (mm._prune_tma_configs, mm.get_tma_configs(), {
                                     "c_desc": type("D", (), {"base": torch.empty(1, dtype=torch.float32)})()
                                 })):
        ieee = prune(configs, args, INPUT_PRECISION="ieee")
        tf32 = prune(configs, args, INPUT_PRECISION="tf32")
        wide = [c for c in ieee if c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] > mm.IEEE_MAX_TILE]
        assert ieee and all(mm_configs._tile(c) in IEEE_TILES for c in wide)  # the table's FFMA tiles only
        offered = {mm_configs._tile(c) for c in configs} & set(IEEE_TILES)
        assert offered <= {mm_configs._tile(c) for c in ieee}  # each offered FFMA tile survives for IEEE
        assert not offered & {mm_configs._tile(c) for c in tf32}  # and for nothing else
        assert len(tf32) > len(ieee)  # TF32 runs on the tensor cores: wider tiles stay candidates


def test_flop_and_byte_model():
    assert mm.flops(4) == 2 * 4**3 + 4**2 == 144  # 2 n^3 for the product, n^2 for ReLU
    assert mm.flops(1000) == 2e9 + 1e6
    assert mm.bytes_moved(4, "bfloat16") == 3 * 16 * 2 == 96  # read A and B, write C
    assert mm.bytes_moved(1000, "float32") == 12e6
    assert mm.KERNEL.flops is mm.flops and mm.KERNEL.bytes is mm.bytes_moved


def test_kernel_declaration():
    k = mm.KERNEL
    assert k.name == "matmul" and k.naive_fn is mm.matmul_naive
    assert k.dtypes == ("float32", "tf32", "bfloat16", "float16")
    assert [k.compute_unit(d) for d in k.dtypes] == ["fp32", "tf32", "bf16", "fp16"]
    assert set(k.impls) == {"naive", "builtin", "triton"}


@pytest.mark.parametrize("dtype", ["float32", "tf32", "bfloat16", "float16"])
@pytest.mark.parametrize("impl", ["naive", "builtin", "triton"])
def test_every_impl_within_kernel_tolerance(impl, dtype):
    k = mm.KERNEL
    inputs = k.make_inputs(96, torch_dtype(dtype), "cpu", seed=3)
    with math_mode(dtype):
        rel, _ = relative_error(k.impls[impl](inputs)(), k.reference(inputs))
    assert rel <= k.tolerance[dtype]


def test_make_inputs_is_seeded():
    a1, b1 = mm.make_inputs(8, torch.float32, "cpu", seed=7)
    a2, b2 = mm.make_inputs(8, torch.float32, "cpu", seed=7)
    a3, _ = mm.make_inputs(8, torch.float32, "cpu", seed=8)
    assert torch.equal(a1, a2) and torch.equal(b1, b2) and not torch.equal(a1, a3) and not torch.equal(a1, b1)


TMA_SMALL = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 3}  # several tiles per persistent program


@pytest.mark.parametrize("config", [None, TMA_SMALL], ids=["autotune-first", "small-tiles"])
@pytest.mark.parametrize("dtype,atol,rtol", DTYPES, ids=lambda v: str(v).replace("torch.", ""))
@pytest.mark.parametrize("m,n,k", [(8, 8, 8), (64, 48, 104), (100, 72, 40), (136, 128, 24)])
def test_tma_persistent_matches_float64(m, n, k, dtype, atol, rtol, config):
    # shapes with 16-byte aligned rows (TMA's rule) that are no multiple of the tiles: the descriptor pads the
    # loads and clips the store; 4 interpreter programs walk all the tiles
    a, b = _operands(m, n, k, dtype, seed=2)
    assert mm.tma_ok(a, b)
    c = mm.matmul_triton(a, b, config=config, method="tma")
    torch.testing.assert_close(c.to(torch.float64), _ref(a, b), atol=atol, rtol=rtol)
    c = mm.matmul_triton(a, b, config=config, method="tma", activation="none")
    torch.testing.assert_close(c.to(torch.float64), _ref(a, b, relu=False), atol=atol, rtol=rtol)


@pytest.mark.parametrize("config", [None, TMA_SMALL], ids=["autotune-first", "small-tiles"])
@pytest.mark.parametrize("dtype,atol,rtol", DTYPES, ids=lambda v: str(v).replace("torch.", ""))
def test_tma_on_a_k_major_b_matches_float64(dtype, atol, rtol, config):
    """B stored K-major (TF32's copy, a linear layer's weight.t()): the descriptor is over its transpose and each
    tile is transposed back after the load."""
    a, b = _operands(100, 72, 40, dtype, seed=3)
    b_k = b.t().contiguous().t()
    assert b_k.stride() == (1, 40) and mm.tma_ok(a, b_k)
    c = mm.matmul_triton(a, b_k, config=config, method="tma")
    torch.testing.assert_close(c.to(torch.float64), _ref(a, b), atol=atol, rtol=rtol)
    if config is None:  # a kept launch (replayed under the interpreter) re-based on another K-major B of the key
        from kernels._shared import fastlaunch as fl

        _, b2 = _operands(100, 72, 40, dtype, seed=4)
        b2_k = b2.t().contiguous().t()
        with fl.replaying():
            mm.matmul_triton(a, b_k, method="tma")
            c2 = mm.matmul_triton(a, b2_k, method="tma")
            assert len(mm._LAUNCHES) == 1 and mm._LAUNCHES.misses == 1
        torch.testing.assert_close(c2.to(torch.float64), _ref(a, b2), atol=atol, rtol=rtol)


def test_tma_needs_aligned_rows_and_auto_falls_back():
    a, b = _operands(17, 33, 65, torch.bfloat16)  # 65 * 2 B rows: not 16-byte aligned
    assert not mm.tma_ok(a, b)
    a8, b8 = _operands(8, 8, 8, torch.float32)
    assert mm.tma_ok(a8, b8) and not mm.tma_ok(a8.t(), b8)  # a transposed operand has no unit last stride
    with pytest.raises(ValueError, match="16-byte"):
        mm.matmul_triton(a, b, method="tma")
    torch.testing.assert_close(mm.matmul_triton(a, b).to(torch.float64), _ref(a, b), atol=2e-2, rtol=1.6e-2)
    with pytest.raises(ValueError, match="method"):
        mm.matmul_triton(a, b, method="wgmma")


def test_tma_prune_counts_the_epilogue_tile():
    configs = mm.get_tma_configs()
    c_desc = type("D", (), {"base": torch.empty(1, dtype=torch.float32)})()
    kept = mm._prune_tma_configs(configs, {"c_desc": c_desc})
    for c in kept:
        kw = c.kwargs
        assert mm._smem_bytes(c, 4) + kw["BLOCK_M"] * kw["BLOCK_N"] * 4 <= mm.SMEM_LIMIT_BYTES
    assert len(kept) < len(configs)  # 128x256 fp32 tiles do not fit


def test_tma_autotuner_keys_on_dtype_and_auto_keeps_small_products_on_the_pointer_kernel():
    assert "IN_DTYPE" in mm._matmul_tma_autotuned.keys  # a float32 choice must not serve bfloat16
    assert 1024**3 < mm.TMA_MIN_MNK <= 4096**3
    a, b = _operands(64, 64, 64, torch.bfloat16)
    torch.testing.assert_close(mm.matmul_triton(a, b).to(torch.float64), _ref(a, b), atol=2e-2, rtol=1.6e-2)


@pytest.mark.parametrize("dtype, precision, want", [(torch.float32, "float32", "ieee"), (torch.float32, "tf32", "tf32"),
                                                    (torch.bfloat16, "float32", "tf32"),
                                                    (torch.float16, "tf32", "tf32")])
def test_float32_products_follow_torchs_tf32_switch(dtype, precision, want):
    """Like for like: our float32 products are IEEE unless torch's would be TF32 (the tf32 precision sets it);
    16-bit operands keep tl.dot's default."""
    with math_mode(precision):
        assert mm.input_precision_for(dtype) == want


def test_precisions_set_and_restore_torchs_switch():
    before = mm.input_precision_for(torch.float32)
    for dtype, mode in (("tf32", "tf32"), ("float32", "fp32-ieee"), ("bfloat16", "bf16")):
        with math_mode(dtype):
            assert math_mode_ran(dtype) == mode
            assert mm.input_precision_for(torch.float32) == ("tf32" if dtype == "tf32" else "ieee")
        assert mm.input_precision_for(torch.float32) == before


@pytest.mark.skipif(not hasattr(torch.backends.cuda.matmul, "fp32_precision"), reason="torch < 2.9: one API")
@pytest.mark.parametrize("setting, want", [("tf32", "tf32"), ("ieee", "ieee")])
def test_torchs_new_precision_api_is_read_and_left_as_set(setting, want):
    """A user who set TF32 through torch's new API (which makes the legacy allow_tf32 read raise) gets the mode it
    names, and a sweep cell's math_mode runs in its own and gives the user's setting back."""
    flags = torch.backends.cuda.matmul
    before = flags.fp32_precision
    try:
        flags.fp32_precision = setting
        assert mm.input_precision_for(torch.float32) == want
        assert math_mode_ran("float32") == {"tf32": "tf32", "ieee": "fp32-ieee"}[want]
        a, b = _operands(16, 32, 16, torch.float32)
        torch.testing.assert_close(mm.matmul_triton(a, b).double(), _ref(a, b), atol=1e-2, rtol=1e-2)
        for dtype in ("float32", "tf32"):
            with math_mode(dtype):
                assert mm.input_precision_for(torch.float32) == ("tf32" if dtype == "tf32" else "ieee")
            assert flags.fp32_precision == setting
    finally:
        flags.fp32_precision = before


def test_a_tf32_product_fails_the_float32_tolerance():
    """The IEEE fp32 tolerance tells the modes apart: inputs rounded to TF32's 10-bit mantissa miss it."""
    k = mm.KERNEL
    a, b = k.make_inputs(256, torch.float32, "cpu", seed=1)
    tf32 = lambda t: (t.view(torch.int32) & ~0x1FFF).view(torch.float32)  # noqa: E731  (keep 10 mantissa bits)
    rel_tf32, _ = relative_error(torch.relu(tf32(a) @ tf32(b)), k.reference((a, b)))
    rel_ieee, _ = relative_error(mm.matmul_triton(a, b), k.reference((a, b)))
    assert rel_ieee <= k.tolerance["float32"] < rel_tf32 <= k.tolerance["tf32"]


def test_auto_takes_tma_for_large_products_but_not_ieee_fp32_nor_a_k_major_b(monkeypatch):
    big, small, f32 = 8192**3, 1024**3, torch.float32
    assert mm.auto_tma(big, True, torch.bfloat16, "tf32") and mm.auto_tma(big, True, f32, "tf32")
    assert not mm.auto_tma(small, True, torch.bfloat16, "tf32")
    assert not mm.auto_tma(big, True, f32, "ieee")  # IEEE_TMA False: the pointer kernel's FFMA tiles
    assert not mm.auto_tma(big, False, f32, "tf32")  # TF32_KMAJOR_TMA False: a K-major B on the pointer kernel
    monkeypatch.setattr(mm, "IEEE_TMA", True)
    monkeypatch.setattr(mm, "TF32_KMAJOR_TMA", True)
    assert mm.auto_tma(big, True, f32, "ieee") and mm.auto_tma(big, False, f32, "tf32x3")
    assert not mm.auto_tma(big, False, torch.bfloat16, "tf32")


@pytest.mark.parametrize("split_k", [1, 2], ids=["one-program-a-tile", "split-k"])
def test_k_offsets_past_2_to_the_31_elements_stay_in_bounds(split_k):
    """A transposed A of 2^25 rows (x.t() of a tall x) puts k * stride past 2^31 elements: the pointer kernels' K
    offsets and steps are int64 (in int32 they wrapped and read out of bounds). The storage is never touched but for
    the 256 elements read, so it costs pages, not its 8.7 GB."""
    stride = 34_087_056  # 63 * stride > 2^31 - 1: the first K tile already wraps in int32; 64 * stride, the step too
    k = 128
    store = torch.empty(k * stride, dtype=torch.float16)  # virtual memory only (torch.empty touches no page)
    a = store.as_strided((2, k), (1, stride))
    a.copy_(torch.randn(2, k).to(torch.float16))
    b = torch.randn(k, 16).to(torch.float16)
    config = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 64, "GROUP_M": 1}
    got = mm.matmul_triton(a, b, config=config, split_k=split_k) if split_k > 1 else \
        mm.matmul_triton(a, b, config=config)
    torch.testing.assert_close(got.double(), _ref(a, b), atol=2e-2, rtol=1e-2)


@pytest.mark.parametrize("change, match", [({
    "GROUP_M": 0
}, "GROUP_M must be a positive int"), ({
    "GROUP_M": -1
}, "GROUP_M must be a positive int"), ({
    "BLOCK_K": 24
}, "BLOCK_K must be a power of two"), ({
    "BLOCK_M": 8
}, "BLOCK_M must be a power of two of at least 16"), ({
    "num_warps": 6
}, "num_warps must be a power of two"), ({
    "BLOCK_Q": 16
}, r"unknown \['BLOCK_Q'\]"), ({
    "GROUP_M": None
}, r"missing \['GROUP_M'\]")])
def test_a_forced_config_triton_cannot_run_is_refused_by_name(change, match):
    """A config is launched as given: one that would divide by zero, write out of bounds (a negative GROUP_M did) or
    fail inside Triton is refused first, naming the key."""
    config = {k: v for k, v in {**SMALL_TILES, **change}.items() if v is not None}
    a, b = _operands(40, 24, 32, torch.float32)
    with pytest.raises(ValueError, match=match):
        mm.matmul_triton(a, b, config=config)


@pytest.mark.parametrize("split_k", [0, 2.5, 3.0, True, "2"])
def test_a_split_k_that_is_no_positive_int_is_refused(split_k):
    a, b = _operands(4, 16, 256, torch.float32)
    with pytest.raises(ValueError, match="split_k is None"):
        mm.matmul_triton(a, b, split_k=split_k)
