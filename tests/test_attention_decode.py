"""kernels/attention/decode.py (split-KV decode attention) under the interpreter against float64: grouped, multi-query
and one-to-one heads, every head size, 1-16 query rows, causal (bottom-right) and full, odd key counts, several
splits (the combine) and one (no combine); the TF32 switch for fp32; the refusals; and decode_plan's splits."""
import pytest
import torch

from kernels.attention import decode as dc


def reference(q, k, v, causal, scale=None):
    return dc.reference(q, k, v, causal, scale)


def test_the_reference_is_sdpas_math_on_repeated_heads_with_a_bottom_right_mask():
    """The float64 reference against torch's own expression: K, V repeated by hand, the mask spelled out."""
    q, k, v = (t.to(torch.float64) for t in inputs(1, 4, 2, 3, 9, 64, seed=2))
    keep = torch.ones(3, 9, dtype=torch.bool).tril(9 - 3)  # row i sees keys j <= i + 6
    want = torch.nn.functional.scaled_dot_product_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1),
                                                            attn_mask=keep)
    assert torch.allclose(dc.reference(q, k, v, True), want)
    assert not torch.allclose(dc.reference(q, k, v, False), want)


def inputs(batch, heads, kv_heads, seq_q, seq_k, head_dim, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, seq_q, head_dim, generator=g).to(dtype)
    k, v = (torch.randn(batch, kv_heads, seq_k, head_dim, generator=g).to(dtype) for _ in range(2))
    return q, k, v


def max_err(out, ref) -> float:
    return (out.to(torch.float64) - ref).abs().max().item()


FP32_TOL, FP16_TOL = 1e-5, 2e-3  # absolute, outputs of unit scale


@pytest.mark.parametrize("head_dim", [64, 80, 96, 128, 192, 256, 1, 40, 72, 112, 160, 200])  # models', then any
@pytest.mark.parametrize("heads, kv_heads", [(4, 2), (4, 1), (2, 2)], ids=["gqa", "mqa", "mha"])
def test_every_head_size_and_grouping_matches_float64(head_dim, heads, kv_heads):
    q, k, v = inputs(1, heads, kv_heads, 4, 77, head_dim, seed=head_dim)
    for causal in (True, False):
        out = dc.decode_attention(q, k, v, causal=causal, splits=2)
        assert out.shape == q.shape and out.dtype == q.dtype
        assert max_err(out, reference(q, k, v, causal)) < FP32_TOL


@pytest.mark.parametrize("seq_q", [1, 4, 16])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("splits", [None, 1, 3])
def test_query_rows_masks_and_splits(seq_q, causal, splits):
    """Odd seq_k (past the last whole key tile); 8 heads on 1: 8 x 16 query rows, more than one row tile."""
    q, k, v = inputs(2, 8, 1 if seq_q == 16 else 2, seq_q, 201, 64, seed=seq_q)
    out = dc.decode_attention(q, k, v, causal=causal, splits=splits)
    assert max_err(out, reference(q, k, v, causal)) < FP32_TOL


def test_a_split_with_no_key_for_some_rows_weighs_nothing():
    """Causal, 16 rows, keys 64-69 in the second split: row 0 sees keys up to 54, none of them there."""
    q, k, v = inputs(1, 2, 1, 16, 70, 64, seed=7)
    assert dc.decode_plan(1, 1, 70, 1, 32, 64, torch.float32, splits=2)["splits"] == 2
    assert max_err(dc.decode_attention(q, k, v, causal=True, splits=2), reference(q, k, v, True)) < FP32_TOL


def test_fp16_and_a_scale_and_strided_views():
    """fp16 storage with fp32 accumulation; q a transposed view (batch, seq, heads, dim) as a model holds it."""
    q, k, v = inputs(1, 4, 2, 3, 150, 128, torch.float16, seed=11)
    q = q.transpose(1, 2).contiguous().transpose(1, 2)
    out = dc.decode_attention(q, k, v, causal=True, scale=0.3, splits=3)
    assert out.dtype == torch.float16 and max_err(out, reference(q, k, v, True, 0.3)) < FP16_TOL


def test_a_wrong_answer_fails_the_check():
    q, k, v = inputs(1, 2, 1, 1, 90, 64)
    out = dc.decode_attention(q, k, v, causal=False, splits=2)
    assert max_err(out, reference(q, k, v, True)) < FP32_TOL  # one row: causal and full are the same
    assert max_err(out, reference(q, k, v[..., torch.randperm(64)], False)) > 1e-2


def test_combine_runs_only_when_the_keys_are_split(spy_launches):
    seen = spy_launches(dc, "_decode_split_kernel", "_decode_combine_kernel")
    q, k, v = inputs(1, 2, 2, 1, 130, 64)
    dc.decode_attention(q, k, v, splits=3)
    assert [name for name, _ in seen] == ["_decode_split_kernel", "_decode_combine_kernel"]
    assert seen[0][1]["SINGLE"] is False
    seen.clear()
    dc.decode_attention(q, k, v, splits=1)
    assert [name for name, _ in seen] == ["_decode_split_kernel"] and seen[0][1]["SINGLE"] is True


def test_attention_triton_sends_short_queries_without_gradients_to_decode(spy_launches):
    """Forward only, 1-16 rows: the decode kernels; 17 rows or gradients: FlashAttention-2 (same answers)."""
    from kernels import attention

    seen = spy_launches(dc, "_decode_split_kernel")
    q, k, v = inputs(1, 4, 2, 3, 70, 64, seed=5)
    for causal in (True, False):
        out = attention.attention_triton(q, k, v, causal=causal)
        assert len(seen) == 1 and max_err(out, reference(q, k, v, causal)) < FP32_TOL
        seen.clear()
    q17 = inputs(1, 4, 2, 17, 70, 64, seed=6)[0]
    assert not dc.takes(q17, k, v, True) and dc.takes(q, k, v, True)
    assert max_err(attention.attention_triton(q17, k, v), reference(q17, k, v, True)) < FP32_TOL
    empty = attention.attention_triton(q[:0], k[:0], v[:0])  # no batch: an empty O, as FlashAttention-2 gives
    assert empty.shape == (0, 4, 3, 64) and not seen
    q.requires_grad_(True)
    attention.attention_triton(q, k, v).sum().backward()
    assert not seen and q.grad is not None


@pytest.mark.parametrize("seq_k", [100, 300], ids=["one split", "split"])
def test_a_kept_decode_launch_replays_the_first_calls_plan(seq_k):
    """A second call with inputs of the same specs replays the first call's launches (split and combine) on its own
    tensors, skipping checks and plan; another shape, the scale or causal is a new key (kernels/_shared/fastlaunch)."""
    from kernels._shared import fastlaunch as fl
    from kernels import attention

    q, k, v = inputs(1, 4, 1, 2, seq_k, 64, seed=7)
    with fl.replaying():
        first = attention.attention_triton(q, k, v)
        assert len(dc._LAUNCHES) == (3 if seq_k > 128 else 2) and dc._LAUNCHES.misses == (2 if seq_k > 128 else 1)
        misses = dc._LAUNCHES.misses
        q2, k2, v2 = inputs(1, 4, 1, 2, seq_k, 64, seed=8)
        assert dc.kept(q2, k2, v2, True, 64**-0.5) is not None
        hit = attention.attention_triton(q2, k2, v2)
        assert dc._LAUNCHES.misses == misses  # no kernel[grid]: the kept launches
        assert max_err(first, reference(q, k, v, True)) < FP32_TOL and max_err(hit, reference(q2, k2, v2,
                                                                                              True)) < FP32_TOL
        for other, causal, scale in ((inputs(1, 4, 1, 3, seq_k, 64, seed=9), True, None), ((q2, k2, v2), False, None),
                                     ((q2, k2, v2), True, 0.5)):
            out = dc.decode_attention(*other, causal=causal, scale=scale)
            assert max_err(out, reference(*other, causal, scale)) < FP32_TOL
        assert dc._LAUNCHES.misses > misses
    assert len(dc._LAUNCHES) == 0


def test_fp32_dots_follow_torchs_tf32_switch(spy_launches):
    seen = spy_launches(dc, "_decode_split_kernel")
    q, k, v = inputs(1, 2, 1, 1, 64, 64)
    before = torch.backends.cuda.matmul.allow_tf32
    try:
        for allow, precision in ((False, "ieee"), (True, "tf32")):
            torch.backends.cuda.matmul.allow_tf32 = allow
            dc.decode_attention(q, k, v, splits=1)
            assert seen[-1][1]["PRECISION"] == precision
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def test_a_kept_fp32_launch_follows_the_tf32_switch(spy_launches):
    """The switch decides the dots' precision (a constexpr): it is in the launch key, so flipping it between two
    calls on the same tensors never replays the other precision's launch."""
    from kernels._shared import fastlaunch as fl

    seen = spy_launches(dc, "_decode_split_kernel")
    q, k, v = inputs(1, 2, 1, 1, 64, 64)
    before = torch.backends.cuda.matmul.allow_tf32
    try:
        with fl.replaying():
            for allow, precision in ((False, "ieee"), (True, "tf32"), (False, "ieee"), (True, "tf32")):
                torch.backends.cuda.matmul.allow_tf32 = allow
                dc.decode_attention(q, k, v)
                assert seen[-1][1]["PRECISION"] == precision
            assert dc._LAUNCHES.misses == 2  # the last two calls: kept launches, each of its own precision
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def test_attention_triton_routes_by_strides_whatever_was_kept(spy_launches):
    """A decode call on a query with a non-unit last stride (decode_attention takes it) keeps a launch; the same
    specs through attention_triton still go where takes() sends them (FlashAttention-2, which refuses the strides,
    as it does without the earlier call), never to the kept decode launch."""
    from kernels import attention
    from kernels._shared import fastlaunch as fl

    q, k, v = inputs(1, 2, 1, 2, 40, 64, seed=3)
    q = torch.randn(1, 2, 2, 128)[..., ::2]  # last stride 2
    assert not dc.takes(q, k, v, True)
    seen = spy_launches(dc, "_decode_split_kernel")  # first: a swap after the call would be a new key
    with fl.replaying():
        dc.decode_attention(q, k, v)
        assert dc.kept(q, k, v, True, 64**-0.5) is not None and len(seen) == 1
        seen.clear()
        with pytest.raises(ValueError, match="unit stride over head_dim"):
            attention.attention_triton(q, k, v)
        assert not seen


@pytest.mark.parametrize("shapes, kw, words", [(((1, 4, 1, 64), (1, 3, 64, 64)), {}, "kv_heads dividing"),
                                               (((1, 2, 1, 300), (1, 2, 64, 300)), {}, "head dims"),
                                               (((1, 2, 17, 64), (1, 2, 64, 64)), {}, "1-16 query rows"),
                                               (((1, 2, 8, 64), (1, 2, 4, 64)), {
                                                   "causal": True
                                               }, "seq_k >= seq_q"),
                                               (((1, 2, 1, 64), (1, 2, 64, 64)), {
                                                   "scale": -1.0
                                               }, "scale > 0"),
                                               (((1, 2, 1, 64), (1, 2, 64, 64)), {
                                                   "splits": 0
                                               }, "splits must be"),
                                               (((65536, 1, 1, 64), (65536, 1, 1, 64)), {}, "grid's y axis"), ])
def test_unsupported_inputs_are_refused_with_what_is_supported(shapes, kw, words):
    q, kv = torch.zeros(shapes[0]), torch.zeros(shapes[1])
    with pytest.raises(ValueError, match=words):
        dc.decode_attention(q, kv, kv, **kw)


def test_other_dtypes_are_refused():
    q, kv = torch.zeros(1, 2, 1, 64, dtype=torch.float64), torch.zeros(1, 2, 64, 64, dtype=torch.float64)
    with pytest.raises(ValueError, match="float32, bfloat16 and float16"):
        dc.decode_attention(q, kv, kv)
    with pytest.raises(ValueError, match="float32, bfloat16 and float16"):
        dc.decode_attention(q.float(), kv.half(), kv.half())


@pytest.mark.parametrize("batch", [1, 4, 64])
@pytest.mark.parametrize("kv_heads", [1, 8, 32])
@pytest.mark.parametrize("seq_k", [1, 100, 1024, 8191, 32768, 131072])
@pytest.mark.parametrize("sm", [78, 132])
def test_plan_every_split_holds_keys_and_a_long_cache_fills_the_gpu(batch, kv_heads, seq_k, sm):
    for rows, head_dim, dtype in ((1, 128, torch.bfloat16), (64, 256, torch.float32), (128, 80, torch.float16)):
        p = dc.decode_plan(batch, kv_heads, seq_k, sm, rows, head_dim, dtype)
        assert 1 <= p["splits"] <= dc.MAX_SPLITS and p["chunk"] % p["BLOCK_N"] == 0
        assert (p["splits"] - 1) * p["chunk"] < seq_k <= p["splits"] * p["chunk"]  # the last split has a key too
        assert p["BLOCK_M"] * p["row_tiles"] >= rows and p["BLOCK_D"] >= head_dim
        programs = batch * kv_heads * p["row_tiles"] * p["splits"]
        if seq_k * kv_heads >= sm * dc.MIN_SPLIT_KEYS * 2:  # enough keys for every SM: every SM gets a program
            assert programs >= sm
        per_sm = dc.key_tile(p["BLOCK_D"], dtype)[3]
        if batch * kv_heads * p["row_tiles"] >= per_sm * sm:
            assert p["splits"] == 1  # the batch fills the GPU alone: no combine


def test_a_launch_out_of_resources_is_retried_small_then_refused_clearly(monkeypatch):
    """Shared memory is the GPU's to say: a tile it refuses is retried at FALLBACK_BLOCK_N keys unpipelined; refused
    again, a ValueError names the head dim and dtype instead of Triton's raw error."""
    from triton.runtime.errors import OutOfResources

    real, tried = dc._decode_split_kernel, []

    class Refusing:

        def __init__(self, refuse_all):
            self.refuse_all = refuse_all

        def __getitem__(self, grid):

            def launch(*args, **kw):
                tried.append((kw["BLOCK_N"], kw["num_stages"]))
                if self.refuse_all or kw["BLOCK_N"] != dc.FALLBACK_BLOCK_N:
                    raise OutOfResources(300000, 232448, "shared memory")
                return real[grid](*args, **kw)

            return launch

    q, k, v = inputs(1, 2, 1, 2, 100, 64, seed=4)
    monkeypatch.setattr(dc, "_decode_split_kernel", Refusing(False))
    out = dc.decode_attention(q, k, v, splits=2)
    block_n, _, stages, _ = dc.FP32_KEY_TILES[64]
    assert tried == [(block_n, stages), (dc.FALLBACK_BLOCK_N, 1)] and block_n != dc.FALLBACK_BLOCK_N
    assert max_err(out, reference(q, k, v, True)) < FP32_TOL
    monkeypatch.setattr(dc, "_decode_split_kernel", Refusing(True))
    with pytest.raises(ValueError, match="no tile of head dim 64 in torch.float32"):
        dc.decode_attention(q, k, v)


COMPILE = r"""
import json, os, subprocess, sys, tempfile
sys.path.insert(0, sys.argv[1])
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernels.attention import decode as dc

def spills(kernel):
    # register spills are local stores in the SASS (ptxas's), not in the PTX
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(kernel.asm["cubin"])
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    sass = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True, check=True).stdout
    os.unlink(f.name)
    return sass.count("STL") if "FFMA" in sass or "HMMA" in sass or "MUFU" in sass else -1


ints = ["stride_qz", "stride_qh", "stride_qm", "stride_kz", "stride_kh", "stride_kn", "stride_vz", "stride_vh",
        "stride_vn", "kv_heads", "group", "seq_q", "seq_k", "chunk", "splits"]
ptrs = ["q_ptr", "k_ptr", "v_ptr", "o_ptr", "part_o_ptr", "part_lse_ptr"]
names = list(dc._decode_split_kernel.arg_names)
out = {}
for dtype, t, head_dim, rows in ((torch.bfloat16, "bf16", 128, 4), (torch.bfloat16, "bf16", 256, 128),
                                 (torch.float16, "fp16", 96, 16), (torch.float32, "fp32", 256, 128),
                                 (torch.float32, "fp32", 128, 128), (torch.float32, "fp32", 80, 4),
                                 (torch.float16, "fp16", 72, 4), (torch.bfloat16, "bf16", 40, 1)):
    p = dc.decode_plan(1, 8, 8192, 132, rows, head_dim, dtype)
    consts = {"stride_qd": 1, "stride_kd": 1, "stride_vd": 1, "HEAD_DIM": head_dim, "CAUSAL": True,
              "BLOCK_M": p["BLOCK_M"], "BLOCK_N": p["BLOCK_N"], "BLOCK_D": p["BLOCK_D"], "SINGLE": False,
              "PRECISION": "ieee" if dtype == torch.float32 else "tf32"}
    sig = {n: "constexpr" if n in consts else "i32" if n in ints else "fp32" for n in names}
    sig |= {n: "*" + t for n in ptrs[:4]} | {n: "*fp32" for n in ptrs[4:]}
    # as a launch specialises them: aligned pointers, strides multiples of 16 (of 8 at 40 and 72: here, too, 16)
    div = {(names.index(n),): [["tt.divisibility", 16]] for n in ptrs + ints[:9]}
    k = triton.compile(ASTSource(fn=dc._decode_split_kernel, signature=sig, constexprs=consts, attrs=div),
                       target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": p["num_warps"], "num_stages": p["num_stages"]})
    ptx = k.asm["ptx"]
    out[f"{t} {head_dim} {rows}"] = {"shared": k.metadata.shared, "spills": spills(k),
                                     "cp_async": ptx.count("cp.async.cg") + ptx.count("cp.async.ca")}
sig = {"o_ptr": "*bf16", "part_o_ptr": "*fp32", "part_lse_ptr": "*fp32", "splits": "i32", "head_dim": "i32",
       "BLOCK_S": "constexpr", "CHUNK_S": "constexpr", "BLOCK_D": "constexpr"}
k = triton.compile(ASTSource(fn=dc._decode_combine_kernel, signature=sig,
                             constexprs={"BLOCK_S": dc.MAX_SPLITS, "CHUNK_S": dc.COMBINE_SPLITS, "BLOCK_D": 256}),
                   target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
out["combine 256 splits of 256"] = {"shared": k.metadata.shared, "spills": spills(k), "cp_async": -1}
print(json.dumps(out))
"""
H100_SHARED = 232448  # bytes of shared memory one block may take on sm_90


def test_the_plans_tiles_compile_for_sm90_within_shared_memory_pipelined_and_without_spills():
    """Compiled ahead of time for an H100 (tests/test_sm90_compile.py's way): each plan's tile fits shared memory
    twice over (two programs per SM), its K/V loads are asynchronous copies (software-pipelined), no register
    spills; the combine spills nothing at 256 splits of head dim 256."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.test_sm90_compile import missing_toolchain

    if why := missing_toolchain():
        pytest.skip(f"no sm_90 toolchain: {why}")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    repo = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, "-c", COMPILE, str(repo)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    compiled = json.loads(r.stdout.strip().splitlines()[-1])
    assert compiled.pop("combine 256 splits of 256")["spills"] == 0  # the combine at its most splits and widest head
    for case, got in compiled.items():
        assert 0 < 2 * got["shared"] <= H100_SHARED and got["cp_async"] > 0 and got["spills"] == 0, (case, got)


def test_more_splits_than_the_combine_sums_at_a_time():
    q, k, v = inputs(1, 2, 1, 2, 1250, 64, seed=9)
    splits = dc.COMBINE_SPLITS + 4
    assert dc.decode_plan(1, 1, 1250, 1, 4, 64, torch.float32, splits=splits)["splits"] == splits
    assert max_err(dc.decode_attention(q, k, v, splits=splits), reference(q, k, v, True)) < FP32_TOL


def test_key_tiles_by_dtype_whatever_the_head_count():
    """Head size 128 in 16 bits: the 64-key tile at two programs an SM from one K/V head to 256; fp32 its own."""
    for batch, kv_heads in ((1, 8), (8, 32), (4, 8), (1, 31)):
        assert dc.decode_plan(batch, kv_heads, 8192, 132)["BLOCK_N"] == dc.KEY_TILES[128][0] == 64
    assert dc.decode_plan(8, 32, 8192, 132, dtype=torch.float32)["BLOCK_N"] == dc.FP32_KEY_TILES[128][0] == 16


@pytest.mark.parametrize("batch, kv_heads, up, down", [(1, 32, 9, 8), (8, 8, 5, 4), (8, 32, 2, 1), (1, 8, 33, 33)])
def test_whole_waves_rounds_the_split_count_down_to_the_slots(monkeypatch, batch, kv_heads, up, down):
    """132 SMs, bf16, head size 128, one query row, 128k keys: WHOLE_WAVES (the default) keeps every program in the
    first wave of two programs a SM; rounded up, a partial second wave follows."""
    p = dc.decode_plan(batch, kv_heads, 131072, 132)
    monkeypatch.setattr(dc, "WHOLE_WAVES", False)
    assert dc.decode_plan(batch, kv_heads, 131072, 132)["splits"] == up
    per_sm = dc.key_tile(128, torch.bfloat16)[3]
    assert p["splits"] == down and batch * kv_heads * p["splits"] <= per_sm * 132
    assert dc.decode_plan(64, 32, 131072, 132)["splits"] == 1  # more programs than slots: one split either way
