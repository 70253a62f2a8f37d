"""FlashAttention-2's families (kernels/attention) under the interpreter, against a float64 reference written here:
grouped-query and multi-query heads, every head size models ship, queries shorter and longer than the keys (full and
causal bottom-right, rows that see no key giving 0), odd lengths; output and dQ, dK, dV. Small forced tiles walk
the causal tile bounds over many key offsets. Then the tile plan (nothing over shared memory), the fp32 math mode
and the refusals."""
import pytest
import torch

from kernels import attention as at
from kernels.attention import plan
from kernels.attention.backward import attention_backward
from rooflab.cell import relative_error
from rooflab.kernel import DEFAULT_TOLERANCE, math_mode

TOL = {torch.float32: DEFAULT_TOLERANCE["float32"], torch.float16: DEFAULT_TOLERANCE["float16"]}


def visible(sq: int, sk: int, causal: bool) -> torch.Tensor:
    """(sq, sk) keys each query row sees: causal aligned bottom right, row i sees keys j <= i + sk - sq."""
    rows, cols = torch.arange(sq)[:, None], torch.arange(sk)[None, :]
    return rows + (sk - sq) >= cols if causal else torch.ones(sq, sk, dtype=torch.bool)


def reference(q, k, v, grad_o, causal):
    """O and (dQ, dK, dV) in float64: K and V repeated over each group (the sum over a group's query heads is
    autograd's), the explicit mask; a row that sees no key gives O = 0 and no gradient."""
    q, k, v = (t.detach().to(torch.float64).requires_grad_(True) for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    kr, vr = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    keep = visible(q.shape[2], k.shape[2], causal)
    seen = keep.any(-1, keepdim=True)
    s = (q @ kr.transpose(-2, -1)) * q.shape[-1]**-0.5
    p = torch.softmax(s.masked_fill(~(keep | ~seen), float("-inf")), -1)  # an empty row: any finite row, then 0
    o = torch.where(seen, p, 0.0) @ vr
    o.backward(grad_o.to(torch.float64))
    return o.detach(), (q.grad, k.grad, v.grad)


def make(shape_q, shape_kv, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(shape_q, generator=g).to(dtype)
    k, v = (torch.randn(shape_kv, generator=g).to(dtype) for _ in range(2))
    return q, k, v, torch.randn(shape_q, generator=g).to(dtype)


def check(q, k, v, grad_o, causal, tol):
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    o = at.attention_triton(*leaves, causal=causal)
    o.backward(grad_o)
    ref_o, ref_grads = reference(q, k, v, grad_o, causal)
    assert not o.isnan().any() and relative_error(o.detach(), ref_o)[0] <= tol
    for name, t, r in zip("QKV", leaves, ref_grads):
        assert t.grad.shape == r.shape and t.grad.dtype == q.dtype, f"d{name}"
        assert relative_error(t.grad, r)[0] <= tol, f"d{name}"
    return o.detach()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("d,dv,sq,sk", [(192, 128, 19, 29), (192, 128, 2, 100), (40, 72, 33, 33), (128, 256, 70, 30)])
def test_a_value_head_size_of_its_own(d, dv, sq, sk, dtype):
    """V's head size apart from Q's and K's (DeepSeek-V2/V3: 192 and 128), grouped heads, both masks: O of V's
    size, dV of V's shape; the query rows of a decode step too (they go to FlashAttention-2's grid)."""
    g = torch.Generator().manual_seed(dv)
    q, k = torch.randn(1, 4, sq, d, generator=g).to(dtype), torch.randn(1, 2, sk, d, generator=g).to(dtype)
    v, grad_o = torch.randn(1, 2, sk, dv, generator=g).to(dtype), torch.randn(1, 4, sq, dv, generator=g).to(dtype)
    for causal in (True, False):
        assert check(q, k, v, grad_o, causal, TOL[dtype]).shape == (1, 4, sq, dv)
        with torch.no_grad():
            o = at.attention_triton(q, k, v, causal=causal)
        assert relative_error(o, reference(q, k, v, grad_o, causal)[0])[0] <= TOL[dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("hq,hkv", [(8, 2), (4, 1), (3, 3)], ids=["gqa", "mqa", "mha"])
def test_grouped_and_multi_query_heads(hq, hkv, causal, dtype):
    q, k, v, grad_o = make((2, hq, 37, 16), (2, hkv, 37, 16), dtype)
    check(q, k, v, grad_o, causal, TOL[dtype])


@pytest.mark.parametrize("head_dim", [64, 80, 96, 128, 192, 256, 1, 33, 72, 112, 160, 255])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_every_head_size_in_fp32(head_dim, causal):
    q, k, v, grad_o = make((1, 2, 19, head_dim), (1, 1, 29, head_dim), torch.float32, seed=head_dim)
    check(q, k, v, grad_o, causal, TOL[torch.float32])


@pytest.mark.parametrize("head_dim", [80, 256, 8, 40, 72, 112, 160, 200])  # models' sizes, then any up to 256
def test_padded_head_sizes_in_fp16(head_dim):
    q, k, v, grad_o = make((1, 2, 23, head_dim), (1, 2, 23, head_dim), torch.float16, seed=1)
    check(q, k, v, grad_o, True, TOL[torch.float16])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("sq,sk", [(5, 70), (37, 100), (1, 33), (70, 37), (100, 9)])
def test_queries_shorter_and_longer_than_keys(sq, sk, causal, dtype):
    q, k, v, grad_o = make((1, 4, sq, 32), (1, 2, sk, 32), dtype, seed=sq + sk)
    o = check(q, k, v, grad_o, causal, TOL[dtype])
    if causal and sq > sk:  # rows 0 .. sq - sk - 1 see no key: 0, not NaN
        assert (o[:, :, :sq - sk] == 0).all() and (o[:, :, sq - sk:] != 0).any()


def test_bottom_right_causal_is_torchs_causal_lower_right():
    """The reference's mask against torch's own bottom-right causal bias and grouped heads (float64 SDPA)."""
    from torch.nn.attention.bias import causal_lower_right

    q, k, v, grad_o = make((1, 4, 9, 16), (1, 2, 21, 16), torch.float64)
    sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(9, 21),
                                                            enable_gqa=True)
    torch.testing.assert_close(reference(q, k, v, grad_o, True)[0], sdpa)


FWD, DKDV, DQ = ({
    "BLOCK_M": m,
    "BLOCK_N": n,
    "num_warps": 4,
    "num_stages": 2
} for m, n in ((32, 16), (16, 32), (32, 16)))


@pytest.mark.parametrize("sq,sk", [(50, 50), (48, 64), (64, 48), (23, 70), (70, 23), (33, 40), (40, 33), (16, 96)])
def test_small_tiles_walk_the_causal_bounds(sq, sk):
    """Tiles of 16 and 32 rows: the unmasked, diagonal and skipped tiles of the forward, dK dV and dQ programs at
    key offsets that are multiples of no tile, and of one."""
    q, k, v, grad_o = make((1, 4, sq, 16), (1, 2, sk, 16), torch.float32, seed=sq * sk)
    o, lse = at.attention_forward(q, k, v, True, 16**-0.5, method="pointer", config=FWD)
    ref_o, ref_grads = reference(q, k, v, grad_o, True)
    assert relative_error(o, ref_o)[0] <= 1e-5
    grads = attention_backward(q, k, v, o, lse, grad_o, True, 16**-0.5, {"dkdv": DKDV, "dq": DQ})
    for name, g, r in zip("QKV", grads, ref_grads):
        assert relative_error(g, r)[0] <= 1e-5, f"d{name}"


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("sq,sk,head_dim", [(64, 128, 32), (45, 77, 32), (77, 45, 32), (64, 64, 80), (33, 50, 96)])
def test_tma_kernel_with_grouped_heads_and_other_key_lengths(sq, sk, head_dim, causal):
    """Heads of 80 and 96: tiles of 128 columns, the descriptor reading zeros past the head and clipping the store."""
    q, k, v, grad_o = make((2, 4, sq, head_dim), (2, 2, sk, head_dim), torch.float16, seed=3)
    assert at.tma_ok(q, k, v)
    ref = reference(q, k, v, grad_o, causal)[0]
    for config in (None, {**FWD, "HEAVY_FIRST": False}):
        o = at.attention_forward(q, k, v, causal, head_dim**-0.5, method="tma", config=config)[0]
        assert relative_error(o, ref)[0] <= TOL[torch.float16], config


def test_every_supported_input_has_a_tile_that_fits():
    for kind, table in (("fwd", at.POINTER_TILES), ("tma", at.TMA_TILES), ("dkdv", at.backward.DKDV_TILES),
                        ("dq", at.backward.DQ_TILES)):
        for head_dim in range(1, plan.MAX_HEAD_DIM + 1):
            for size in (2, 4):
                tiles = plan.tiles_for(kind, table, head_dim, size)
                assert tiles, (kind, head_dim, size)
                assert all(plan.smem_bytes(kind, t, head_dim, size) <= plan.SMEM_LIMIT_BYTES for t in tiles)
                assert all(plan.split_ok(kind, t) for t in tiles)
    assert (128, 128, 8, 3) not in plan.tiles_for("fwd", at.POINTER_TILES, 128, 4)  # fp32 at 128: out of memory
    assert plan.tiles_for("fwd", at.POINTER_TILES, 64, 2)[0] == at.POINTER_TILES[0]  # the table's first kept


def test_the_autotuners_prune_by_the_call():
    import triton

    configs = [
        triton.Config({
            "BLOCK_M": m,
            "BLOCK_N": n
        }, num_warps=w, num_stages=s) for m, n, w, s in plan.candidate_tiles("fwd", at.POINTER_TILES)
    ]
    prune = plan.pruner("fwd", at.POINTER_TILES, "q_ptr")
    kept = prune(configs, {"q_ptr": torch.zeros(1)}, HEAD_DIM=256)
    assert kept and len(kept) < len(configs)
    assert all(
        plan.fits("fwd", (c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages), 256, 4) for c in kept)
    same = prune(configs, {"q_ptr": torch.zeros(1, dtype=torch.bfloat16)}, HEAD_DIM=64)  # the table's all fit
    assert [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages) for c in same] == \
        list(at.POINTER_TILES)


def test_a_forced_tile_over_shared_memory_is_refused():
    q = torch.zeros(1, 1, 8, 256)
    with pytest.raises(ValueError, match="KiB of shared memory"):
        at.attention_forward(q, q, q, True, 1.0, config={
            "BLOCK_M": 128,
            "BLOCK_N": 128,
            "num_warps": 8,
            "num_stages": 3
        })


def test_fp32_products_follow_torchs_tf32_flag():
    with math_mode("float32"):
        assert plan.input_precision(torch.float32) == "ieee" and plan.math_mode(torch.float32) == "fp32-ieee"
    with math_mode("tf32"):
        assert plan.input_precision(torch.float32) == "tf32" and plan.math_mode(torch.float32) == "tf32"
        assert plan.math_mode(torch.bfloat16) == "bf16"


def test_block_d_pads_to_a_power_of_two():
    assert [plan.block_d(d) for d in plan.HEAD_DIMS] == [16, 32, 64, 128, 128, 128, 256, 256]


@pytest.mark.parametrize("shapes,match", [(((1, 6, 8, 16), (1, 4, 8, 16)), "divide the query heads"),
                                          (((1, 2, 8, 0), (1, 2, 8, 0)), "head dims"),
                                          (((1, 2, 8, 257), (1, 2, 8, 257)), "head dims"),
                                          (((2, 2, 8, 16), (1, 2, 8, 16)), "one batch and head size"),
                                          (((1, 2, 8, 16), (1, 2, 8, 32)), "one batch and head size"),
                                          (((1, 2, 8, 16), (2, 8, 16)), r"\(batch, Hkv, Sk, D\)"), ])
def test_refusals_name_what_is_supported(shapes, match):
    q, kv = (torch.zeros(s) for s in shapes)
    with pytest.raises(ValueError, match=match):
        at.attention_triton(q, kv, kv)


@pytest.mark.parametrize("v_shape,match", [((1, 2, 9, 16), r"v \(batch, Hkv, Sk, Dv\)"), ((1, 1, 8, 16), "Dv"),
                                           ((1, 2, 8, 300), "300 for v")])
def test_a_value_of_another_length_heads_or_size_is_refused(v_shape, match):
    q = k = torch.zeros(1, 2, 8, 16)
    with pytest.raises(ValueError, match=match):
        at.attention_triton(q, k, torch.zeros(v_shape))


def test_the_measured_16_bit_tiles_are_kept():
    """The table's tiles ran on the H200 at 16-bit head dim 128 (data/tuning): the estimate keeps them all."""
    for kind, table in (("fwd", at.POINTER_TILES), ("tma", at.TMA_TILES), ("dkdv", at.backward.DKDV_TILES),
                        ("dq", at.backward.DQ_TILES)):
        assert plan.tiles_for(kind, table, 128, 2) == list(table), kind  # and the fallbacks not offered


def test_the_families_benchmark_covers_each_family_and_prints_its_table(capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "scripts" / "bench_attention_families.py"
    spec = importlib.util.spec_from_file_location("bench_attention_families", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    cells = bench.CELLS + bench.CHECKED
    assert {c[5] for c in bench.CHECKED} >= set(plan.HEAD_DIMS)  # every head size checked against float64
    assert any(c[2] == 1 for c in cells) and any(1 < c[2] < c[1] for c in cells)  # multi- and grouped-query
    assert any(c[3] < c[4] for c in cells) and any(c[3] > c[4] and c[6] for c in bench.CHECKED)
    row = dict(batch=1, heads=32, kv_heads=8, seq_q=1024, seq_k=8192, head_dim=128, causal=False, **{"pass": "fwd"})
    rows = [{
        **row, "variant": "ours",
        "status": "ok",
        "gpu_ms": 1.0,
        "loop_ms": 1.5,
        "tflops": 100.0
    }, {
        **row, "variant": "flash",
        "status": "ok",
        "gpu_ms": 1.2,
        "loop_ms": 1.2
    }, {
        **row, "variant": "cudnn",
        "status": "refused",
        "error": "RuntimeError: no"
    }]
    text = bench.table(rows)
    assert "    1.200" in text and "1.000" in text.splitlines()[1] and "not run: cudnn" in text
    if not torch.cuda.is_available():
        assert bench.main(["--out", "/dev/null"]) == 2


def test_the_kernels_get_the_math_mode_torch_is_set_to(monkeypatch):
    seen = []

    class Recorder:

        def __getitem__(self, grid):
            return lambda *args, **kw: seen.append(kw["INPUT_PRECISION"])

    monkeypatch.setattr(at, "_attn_fwd_kernel", Recorder())
    q = torch.zeros(1, 1, 8, 16)
    for mode in ("float32", "tf32"):
        with math_mode(mode):
            at.attention_forward(q, q, q, True, 1.0)
    assert seen == ["ieee", "tf32"]


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_no_keys_gives_zeros(causal):
    q, grad_o = torch.randn(1, 2, 5, 16, requires_grad=True), torch.randn(1, 2, 5, 16)
    k, v = (torch.randn(1, 1, 0, 16, requires_grad=True) for _ in range(2))
    o = at.attention_triton(q, k, v, causal=causal)
    o.backward(grad_o)
    assert (o == 0).all() and (q.grad == 0).all() and k.grad.shape == k.shape


COMPILE_DV = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernels.attention import _attn_fwd_kernel, _attn_fwd_tma_kernel
from kernels.attention.backward import _attn_bwd_dkdv_kernel, _attn_bwd_dq_kernel

def jit(fn):  # under the autotuner and heuristics
    while type(fn).__name__ != "JITFunction":
        fn = fn.fn
    return fn

dims = {"HEAD_DIM": 192, "BLOCK_D": 256, "HEAD_DIM_V": 128, "BLOCK_DV": 128, "CAUSAL": True}
out = {}
consts = dims | {"BLOCK_M": 128, "BLOCK_N": 64, "EVEN": True, "WARP_SPECIALIZE": False, "HEAVY_FIRST": True}
sig = {"desc_q": "tensordesc<bf16[128, 256]>", "desc_k": "tensordesc<bf16[64, 256]>", "desc_v":
       "tensordesc<bf16[64, 128]>", "desc_o": "tensordesc<bf16[128, 128]>", "o_ptr": "*bf16", "lse_ptr": "*fp32",
       "n_heads": "i32", "n_kv_heads": "i32", "seq_q": "i32", "seq_k": "i32", "qk_scale": "fp32"}
k = triton.compile(ASTSource(fn=jit(_attn_fwd_tma_kernel), signature=sig | {n: "constexpr" for n in consts},
                             constexprs=consts), target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})
out["tma"] = {"shared": k.metadata.shared, "wgmma": k.asm["ptx"].count("wgmma.mma_async")}
for name, fn in (("fwd", _attn_fwd_kernel), ("dkdv", _attn_bwd_dkdv_kernel), ("dq", _attn_bwd_dq_kernel)):
    fn, consts = jit(fn), dims | {"BLOCK_M": 64, "BLOCK_N": 64, "EVEN": False, "INPUT_PRECISION": "tf32"}
    sig = {n: "constexpr" if n in consts else "*fp32" if n in ("lse_ptr", "delta_ptr") else "*bf16"
           if n.endswith("_ptr") else "fp32" if "scale" in n else "i32" for n in fn.arg_names}
    k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts), target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": 4, "num_stages": 2})
    out[name] = {"shared": k.metadata.shared, "wgmma": k.asm["ptx"].count("wgmma.mma_async")}
print(json.dumps(out))
"""


def test_a_value_head_size_of_its_own_compiles_for_sm90():
    """D 192 with Dv 128 in bf16, ahead of time for an H100 (tests/test_sm90_compile.py's way): the TMA forward
    (descriptors of two widths), the pointer forward and both backward kernels compile, on Hopper's tensor-core MMA,
    within shared memory."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.test_sm90_compile import missing_toolchain

    if why := missing_toolchain():
        pytest.skip(f"no sm_90 toolchain: {why}")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    repo = str(Path(__file__).resolve().parent.parent)
    r = subprocess.run([sys.executable, "-c", COMPILE_DV, repo], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    for kind, got in json.loads(r.stdout.strip().splitlines()[-1]).items():
        assert 0 < got["shared"] <= plan.SMEM_LIMIT_BYTES and got["wgmma"] > 0, (kind, got)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("hq,hkv,sq,sk,d,dv", [(8, 1, 37, 37, 32, 32), (6, 2, 20, 45, 16, 48)])
def test_a_group_split_across_dkdv_programs_sums_to_the_whole(hq, hkv, sq, sk, d, dv, dtype):
    """Few K/V heads: each group's query heads in 1, 2, 3, all or more chunks of dK dV programs, whose fp32 partial
    sums are added in a fixed order: the gradients of float64 every time, bitwise the same when repeated."""
    g = torch.Generator().manual_seed(hq)
    q, k = torch.randn(2, hq, sq, d, generator=g).to(dtype), torch.randn(2, hkv, sk, d, generator=g).to(dtype)
    v, grad_o = torch.randn(2, hkv, sk, dv, generator=g).to(dtype), torch.randn(2, hq, sq, dv, generator=g).to(dtype)
    for causal in (True, False):
        o, lse = at.attention_forward(q, k, v, causal, d**-0.5)
        ref = reference(q, k, v, grad_o, causal)[1]
        for chunks in (1, 2, 3, hq // hkv, 100):
            grads = attention_backward(q, k, v, o, lse, grad_o, causal, d**-0.5, chunks=chunks)
            assert all(t.shape == r.shape and t.dtype == dtype for t, r in zip(grads, ref)), chunks
            assert max(relative_error(t, r)[0] for t, r in zip(grads, ref)) <= TOL[dtype], chunks
            again = attention_backward(q, k, v, o, lse, grad_o, causal, d**-0.5, chunks=chunks)
            assert all(torch.equal(a, b) for a, b in zip(grads, again)), chunks


def test_the_group_splits_only_where_the_dkdv_grid_falls_short_of_the_sms():
    from kernels.attention.backward import DKDV_GROUP_FILL, DKDV_SPLIT_BELOW, group_chunks

    assert (DKDV_SPLIT_BELOW, DKDV_GROUP_FILL) == (1, 8)
    # 8 query heads on 1 K/V head, 4096 keys at head dim 256 (64-key tiles fit): 64 programs -> a head a program
    assert group_chunks(1, 1, 8, 4096, 256, 2, 132) == 8
    assert group_chunks(1, 8, 4, 4096, 128, 2, 132) == 1  # 32 key tiles x 8 K/V heads: two waves already
    assert group_chunks(1, 8, 4, 8192, 128, 2, 132) == 1  # 512 programs: no split, however short of 4 a SM
    assert group_chunks(1, 2, 7, 4096, 64, 2, 132) == 7  # 64 programs: 7 heads, one a program
    assert group_chunks(1, 4, 7, 3200, 64, 2, 132) == 7  # 100 programs: still a head a program
    assert group_chunks(1, 1, 16, 16384, 128, 2, 132) == 8  # 128 programs, 9 chunks wanted: 8 of 2 heads, none empty
    assert group_chunks(1, 1, 8, 4096, 256, 2, 0) == 1  # the interpreter: one
    assert group_chunks(1, 1, 8, 64, 64, 2, 132, chunks=100) == 8  # forced: at most a head each


def test_the_backward_refuses_an_output_or_gradient_of_another_shape():
    q = k = v = torch.zeros(1, 2, 8, 16)
    o, lse = at.attention_forward(q, k, v, True, 0.25)
    with pytest.raises(ValueError, match="O and dO"):
        attention_backward(q, k, v, o, lse, torch.zeros(1, 2, 8, 32), True, 0.25)
