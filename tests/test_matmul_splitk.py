"""Skinny matrix products: the split-K plan (kernels/matmul/plan.py) on the CPU, split-K under the interpreter against
float64 (ReLU after the whole sum), and the precision= plumbing (tf32x3: fp32 via three TF32 products).

The interpreter computes fp32 dots exactly, so tf32x3 here checks only that the precision reaches tl.dot; its real
error is measured on a GPU by scripts/bench_matmul_modes.py."""
import pytest
import torch

from kernels import matmul as mm
from kernels._shared import counts
from kernels.matmul import configs as mm_configs
from kernels.matmul import plan as mp
from kernels.matmul import splitk
from tests.test_launch_pins import _recorded

SMS = (132, 114, 78)  # H100 SXM / H200, H100 PCIe, a smaller part
TINY = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 2}  # the split kernel's tile: slices of a small K


def _operands(m, n, k, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn((m, k), generator=g).to(dtype), torch.randn((k, n), generator=g).to(dtype)


def _ref(a, b, relu=True):
    c = a.to(torch.float64) @ b.to(torch.float64)
    return torch.relu(c) if relu else c


def _covers_k(p, k):
    """Every slice gets some of K and together they cover it: k_per_split a multiple of BLOCK_K, the last slice
    starting before K ends."""
    return (p.split >= 2 and p.k_per_split % p.meta["BLOCK_K"] == 0
            and (p.split - 1) * p.k_per_split < k <= p.split * p.k_per_split)


@pytest.mark.parametrize("sms", SMS)
@pytest.mark.parametrize("m", [1, 3, 8, 16, 17, 32, 64, 100, 128])
@pytest.mark.parametrize("n, k", [(4096, 4096), (4096, 8192), (8192, 8192), (1024, 4096), (4096, 14336)])
def test_decode_products_split_k(m, n, k, sms):
    """A decode product of at most SPLITK_WHEN's rows splits wherever its tiles leave SMs idle: every one of these
    on a 132-SM H100 or H200; more rows never."""
    p = mp.plan(m, n, k, 2, sms, mm.SPLITK)
    bm, bn = mp.tile_for(m, 2, mm.SPLITK)[:2]
    tiles = -(-m // bm) * -(-n // bn)
    few = m <= mm.SPLITK.SPLITK_WHEN[0]
    assert (p is not None) == (tiles < sms and few) and (sms != 132 or not few or p is not None)
    if p is not None:
        assert _covers_k(p, k) and p.split <= mm.SPLITK.SPLITK_FILL[2] and p.tiles == tiles
        assert m > 16 or p.meta["BLOCK_M"] == 16  # a GEMV-shaped tile for a batch of at most 16


@pytest.mark.parametrize("sms", SMS)
@pytest.mark.parametrize("shape", [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
                                   (1793, 1793, 1793), (4096, 14336, 4096), (128, 14336, 4096), (256, 4096, 4096),
                                   (128, 4096, 1024), (1, 4096, 1024)])
def test_squares_wide_and_shallow_products_do_not_split(shape, sms):
    m, n, k = shape
    assert mp.plan(m, n, k, 2, sms, mm.SPLITK) is None


@pytest.mark.parametrize("m", [1, 16, 64, 128])
def test_split_counts_fill_whole_waves(m):
    """One program a SM rounded down, at least 2 slices: on 132 SMs a 4096 x 4096 weight (64 tiles) and an 8192 x 8192
    one (128 tiles) take 2 (the counts the H100 timed best in one launch: table.py's evidence); a 4096 x 1024 weight
    (16 tiles) 8."""
    assert [mp.plan(m, n, n, 2, 132, mm.SPLITK).split for n in (4096, 8192)] == [2, 2]
    assert mp.plan(m, 1024, 4096, 2, 132, mm.SPLITK).split == 8


def test_tall_narrow_products_split_too():
    """Few columns (N <= 128) against a deep K: the same too-few-tiles problem, rows and columns swapped."""
    p = mp.plan(4096, 64, 8192, 2, 132, mm.SPLITK)
    assert p is not None and _covers_k(p, 8192)


def test_plan_refusals_and_overrides():
    t = mm.SPLITK
    assert mp.plan(8, 4096, 4096, 2, 0, t) is None  # the interpreter (no SM count): never split unless asked
    assert mp.plan(8, 4096, 4096, 4, 132, t).meta["BLOCK_K"] == 64  # float32: its own tiles, half the 16-bit K
    assert mp.plan(8, 4096, 4096, 8, 132, t) is None  # float64: no tiles in the table, never split automatically
    assert mp.plan(8, 4096, 4096, 2, 132, t, split=1) is None  # 1: never
    with pytest.raises(ValueError, match="split must be >= 1"):
        mp.plan(8, 64, 64, 2, 132, t, split=0)
    with pytest.raises(ValueError, match="config="):
        mp.plan(8, 64, 64, 8, 132, t, split=2)
    p = mp.plan(8, 64, 64, 4, 0, t, split=3, tile=(16, 16, 16, 2, 4))  # asked: three slices of 64 / 16 = 4 tiles
    assert (p.split, p.k_per_split, p.tiles) == (2, 32, 4) and _covers_k(p, 64)  # 3 would leave a slice empty
    p = mp.plan(8, 64, 40, 2, 0, t, split=16, tile=(16, 16, 16, 2, 4))  # more slices asked than K tiles: one each
    assert (p.split, p.k_per_split) == (3, 16) and _covers_k(p, 40)
    assert mp.plan(8, 64, 16, 2, 0, t, split=4, tile=(16, 16, 16, 2, 4)) is None  # one K tile: nothing to split
    for k in range(1, 700, 37):
        p = mp.plan(3, 50, k, 2, 132, t, split=5, tile=(16, 16, 32, 2, 4))
        assert p is None or _covers_k(p, k)


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.float16, 2e-3)], ids=["float32", "float16"])
@pytest.mark.parametrize("m, n, k", [(1, 33, 70), (3, 17, 129), (17, 40, 100), (5, 7, 33)])
@pytest.mark.parametrize("split", [2, 3, 16])
def test_split_k_matches_float64(m, n, k, dtype, tol, split):
    a, b = _operands(m, n, k, dtype)
    c = mm.matmul_triton(a, b, config=TINY, split_k=split)
    assert c.shape == (m, n) and c.dtype == dtype and c.is_contiguous()
    torch.testing.assert_close(c.to(torch.float64), _ref(a, b), atol=tol, rtol=tol)
    c = mm.matmul_triton(a, b, activation="none", config=TINY, split_k=split)
    torch.testing.assert_close(c.to(torch.float64), _ref(a, b, relu=False), atol=tol, rtol=tol)


def test_split_k_with_the_tables_tile_and_strided_operands():
    """No config: the table's GEMV-shaped tile (BLOCK_K 128: a K of 300 is three slices); A transposed and B a
    column slice are read through their strides."""
    a, b = _operands(3, 40, 300, torch.float16, seed=1)
    for a_, b_ in ((a, b), (a.t().contiguous().t(), b), (a, torch.cat([b, b], 1)[:, ::2])):
        (first, ) = _recorded(splitk, ("_matmul_splitk_kernel", ), lambda: mm.matmul_triton(a_, b_, split_k=8))
        assert first["grid"] == [1, 3] and first["kw"]["BLOCK_M"] == 16 and first["args"][8] == 128
        assert first["args"][9] == 3 and first["kw"]["ACTIVATION"] == "relu"
        torch.testing.assert_close(mm.matmul_triton(a_, b_, split_k=8).double(), _ref(a_, b_), atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
def test_relu_comes_after_the_whole_sum(dtype):
    """Planted: each column's two slices of K have sums of opposite signs. Column 0: 16 - 8 = 8 (ReLU per slice: 16),
    column 1: 8 - 16 = -8, so 0 (ReLU per slice: 8)."""
    a = torch.ones((1, 32), dtype=dtype)
    b = torch.empty((32, 2), dtype=dtype)
    b[:16, 0], b[16:, 0], b[:16, 1], b[16:, 1] = 1.0, -0.5, 0.5, -1.0
    c = mm.matmul_triton(a, b, config=TINY, split_k=2)
    assert c.tolist() == [[8.0, 0.0]]
    assert mm.matmul_triton(a, b, activation="none", config=TINY, split_k=2).tolist() == [[8.0, -8.0]]


def test_split_k_refusals():
    a, b = _operands(3, 16, 32, torch.float32)
    with pytest.raises(ValueError, match="pointer kernel"):
        mm.matmul_triton(a, b, split_k=2, method="tma")
    want = torch.relu(a.double() @ b.double()).float()  # float32's own split tiles (plan.py refuses float64's)
    torch.testing.assert_close(mm.matmul_triton(a, b, split_k=2, precision="ieee"), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="split_k is None"):
        mm.matmul_triton(a.half(), b.half(), split_k=0)
    assert torch.equal(mm.matmul_triton(a[:, :0], b[:0], config=TINY, split_k=2), torch.zeros(3, 16))  # K = 0


@pytest.mark.parametrize("precision", ["ieee", "tf32", "tf32x3"])
def test_precision_reaches_tl_dot(precision):
    a, b = _operands(17, 24, 40, torch.float32)
    for kw in ({}, {"config": TINY}, {"config": TINY, "split_k": 2}):
        names = ("_matmul_kernel", "_matmul_kernel_autotuned")
        module = splitk if "split_k" in kw else mm
        names = ("_matmul_splitk_kernel", ) if "split_k" in kw else names
        launch = _recorded(module, names, lambda: mm.matmul_triton(a, b, precision=precision, **kw))[0]
        assert launch["kw"]["INPUT_PRECISION"] == precision
        c = mm.matmul_triton(a, b, precision=precision, **kw)  # the interpreter's fp32 dot is exact in every mode
        torch.testing.assert_close(c.double(), _ref(a, b), atol=1e-4, rtol=1e-4)


def test_precision_refusals_and_tiles():
    a, b = _operands(4, 8, 8, torch.float32)
    with pytest.raises(ValueError, match="float32 operands"):
        mm.matmul_triton(a.half(), b.half(), precision="tf32x3")
    with pytest.raises(ValueError, match="tf32x3"):
        mm.matmul_triton(a, b, precision="bf16x3")
    configs = mm.get_matmul_configs()
    tiles = {(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"])
             for c in mm._prune_configs(configs, {"a_ptr": a}, INPUT_PRECISION="tf32x3")}
    assert mm.TF32_TILES <= tiles  # three TF32 products: the TF32 tiles


def test_ieee_tiles_are_offered_to_ieee_fp32_only(monkeypatch):
    wide = (128, 128, 16, 8, 3, 8)
    monkeypatch.setattr(mm_configs, "IEEE_TILES", (wide, ))
    configs = mm_configs.get_matmul_configs()

    def offered(dtype, precision):
        return [
            mm_configs._tile(c) for c in mm_configs._prune_configs(configs, {"a_ptr": torch.empty(1, dtype=dtype)},
                                                                   INPUT_PRECISION=precision)
        ]

    assert wide in offered(torch.float32, "ieee")
    assert wide not in offered(torch.float32, "tf32") + offered(torch.bfloat16, "tf32") + offered(torch.float16, "ieee")
    monkeypatch.setattr(mm_configs, "IEEE_TILES", ())
    assert wide not in [mm_configs._tile(c) for c in mm_configs.get_matmul_configs()]


def test_split_k_kept_launch_replays_on_new_operands():
    """A split product's launch is kept under its key: a later call of the key replays it on its own operands, a
    fresh workspace and the stream's counts, which each launch leaves zero (a count left over would make no slice
    the last one, and C would be left unwritten)."""
    from kernels._shared import fastlaunch as fl

    a, b = _operands(3, 40, 300, torch.float16)
    _, b2 = _operands(3, 40, 300, torch.float16, seed=5)
    with fl.replaying():
        mm.matmul_triton(a, b, split_k=8)
        c2 = mm.matmul_triton(a, b2, split_k=8)
        assert mm._LAUNCHES.misses == 1 and len(mm._LAUNCHES) == 2  # launched once; kept, and as the wrapper's
    torch.testing.assert_close(c2.double(), _ref(a, b2), atol=2e-3, rtol=2e-3)
    assert all(not buffer.any() for buffer in counts._COUNTS.values())


def test_split_k_kept_launch_takes_each_calls_counts(monkeypatch):
    """The counts are an argument of each call, never replayed from the first: a buffer given to the first call and
    poisoned after it is left alone by the second (a replayed one would count on from the poison)."""
    from kernels._shared import fastlaunch as fl

    given = []
    monkeypatch.setattr(splitk, "counts_for",
                        lambda device, n: given.append(torch.zeros(n, dtype=torch.int32)) or given[-1])
    a, b = _operands(3, 40, 300, torch.float16)
    with fl.replaying():
        mm._LAUNCHES.clear()
        mm.matmul_triton(a, b, split_k=8)
        given[0].fill_(100)
        c = mm.matmul_triton(a, b, split_k=8)
        assert mm._LAUNCHES.misses == 1  # the second call was the kept launch
    assert len(given) == 2 and bool((given[0] == 100).all()) and not given[1].any()
    torch.testing.assert_close(c.double(), _ref(a, b), atol=2e-3, rtol=2e-3)


def test_counts_are_kept_per_device_and_stream_and_grow(monkeypatch):
    monkeypatch.setattr(counts, "_COUNTS", {})  # the process's buffers untouched (launch pins read their size)
    cpu = torch.device("cpu")
    first = counts.counts_for(cpu, 10)
    assert first.numel() >= 10 and not first.any() and counts.counts_for(cpu, 10) is first
    bigger = counts.counts_for(cpu, counts.COUNTS_MIN + 1)
    assert bigger.numel() > counts.COUNTS_MIN and counts.counts_for(cpu, 3) is bigger


SM90 = r"""
import json, re, sys
sys.path.insert(0, sys.argv[1])
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernels.matmul import SPLITK, _matmul_kernel
from kernels.matmul.splitk import _matmul_splitk_kernel

target, out = GPUTarget("cuda", 90, 32), {}
names = ("a_ptr", "b_ptr", "ws_ptr", "c_ptr", "counts_ptr", "M", "N", "K", "K_PER_SPLIT", "SPLIT", "stride_am",
         "stride_ak", "stride_bk", "stride_bn")
for _, (bm, bn, bk, stages, warps) in SPLITK.SPLITK_TILES[2]:
    sig = dict(zip(names, ["*bf16", "*bf16", "*fp32", "*bf16", "*i32", *["i32"] * 9]))
    consts = {"stride_ak": 1, "stride_bn": 1, "ACTIVATION": "relu", "DOT_IN_FP32": False, "INPUT_PRECISION": "tf32",
              "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}
    k = triton.compile(ASTSource(fn=_matmul_splitk_kernel, signature=sig | {c: "constexpr" for c in consts if c not in sig},
                                 constexprs=consts), target=target, options={"num_warps": warps, "num_stages": stages})
    if bm == 16:  # one row: Triton passes M = 1 as a constexpr (a decode step of batch 1)
        one = {n: t for n, t in sig.items() if n != "M"} | {"M": "constexpr"}
        triton.compile(ASTSource(fn=_matmul_splitk_kernel, signature=one | {c: "constexpr" for c in consts if c not in one},
                                 constexprs=consts | {"M": 1}), target=target, options={"num_warps": warps, "num_stages": stages})
    ptx = k.asm["ptx"]
    out[f"{bm}x{bn}x{bk}"] = len(re.findall(r"(\bmma\.sync|wgmma\.mma_async)\S*bf16", ptx))
    out[f"{bm}x{bn}x{bk} count"] = len(re.findall(r"\batom\.global\.gpu\.acq_rel\.add|\batom\.acq_rel\.gpu\.global\.add", ptx))
for _, (bm, bn, bk, stages, warps) in SPLITK.SPLITK_TILES[4]:  # fp32, a row-major B: IEEE (FFMA) and TF32
    for prec in ("ieee", "tf32"):
        sig = dict(zip(names, ["*fp32", "*fp32", "*fp32", "*fp32", "*i32", *["i32"] * 9]))
        consts = {"stride_ak": 1, "stride_bn": 1, "ACTIVATION": "relu", "DOT_IN_FP32": False,
                  "INPUT_PRECISION": prec, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}
        k = triton.compile(ASTSource(fn=_matmul_splitk_kernel, signature=sig | {c: "constexpr" for c in consts if c not in sig},
                                     constexprs=consts), target=target, options={"num_warps": warps, "num_stages": stages})
        out[f"fp32 {prec} {bm}x{bn}x{bk}"] = len(re.findall(r"(wgmma\.mma_async|\bmma\.sync)\S*tf32", k.asm["ptx"]))
names = ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm",
         "stride_cn")
for prec in ("tf32", "tf32x3"):  # B K-major: the TF32 wgmma's operand order
    consts = {"stride_ak": 1, "stride_bk": 1, "stride_cn": 1, "ACTIVATION": "relu", "DOT_IN_FP32": False,
              "INPUT_PRECISION": prec, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}
    sig = dict(zip(names, ["*fp32"] * 3 + ["i32"] * 9)) | {c: "constexpr" for c in consts}
    k = triton.compile(ASTSource(fn=_matmul_kernel, signature=sig, constexprs=consts), target=target,
                       options={"num_warps": 4, "num_stages": 3})
    out[prec] = len(re.findall(r"wgmma\.mma_async\S*tf32", k.asm["ptx"]))
print(json.dumps(out))
"""


def test_split_tiles_and_tf32x3_compile_for_sm90():
    """The split kernel at every SPLITK_TILES tile compiles for an H100/H200 with bf16 MMAs and one acq_rel count; tf32x3
    issues three TF32 wgmmas for each one TF32 does (what makes it fp32 via 3xTF32, not TF32 under another name)."""
    import json
    import os
    import subprocess
    import sys

    from tests.test_sm90_compile import REPO, missing_toolchain

    if why := missing_toolchain():
        pytest.skip(f"no sm_90 toolchain: {why}")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", SM90, str(REPO)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    for _, (bm, bn, bk, _, _) in mm.SPLITK.SPLITK_TILES[2]:
        assert got[f"{bm}x{bn}x{bk}"] > 0 and got[f"{bm}x{bn}x{bk} count"] == 1
    assert got["tf32"] > 0 and got["tf32x3"] == 3 * got["tf32"]
    for _, (bm, bn, bk, _, _) in mm.SPLITK.SPLITK_TILES[4]:  # fp32 tiles fit sm_90; TF32 on tensor cores, IEEE not
        assert got[f"fp32 tf32 {bm}x{bn}x{bk}"] > 0 and got[f"fp32 ieee {bm}x{bn}x{bk}"] == 0
