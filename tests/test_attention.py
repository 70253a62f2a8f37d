"""FlashAttention-2 (kernels/attention/__init__.py) under the interpreter: O and dQ, dK, dV against autograd through the
float64 naive expression, fp32 and fp16, causal and not, sequence lengths a multiple of no tile, head dims 16-64,
strided inputs; the sweep's implementations and passes, the FLOP/byte model and the bhsd square shape."""
import pytest
import torch

from kernels import attention as at
from rooflab.cell import relative_error
from rooflab.kernel import DEFAULT_TOLERANCE
from rooflab.shapes import square_size

DTYPES = [(torch.float32, DEFAULT_TOLERANCE["float32"]), (torch.float16, DEFAULT_TOLERANCE["float16"])]


def inputs(shape, dtype, seed=1):
    return at.make_inputs(shape, dtype, "cpu", seed)


def ours_with_grads(q, k, v, grad_o, causal):
    leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
    o = at.attention_triton(*leaves, causal=causal)
    o.backward(grad_o)
    return o.detach(), tuple(t.grad for t in leaves)


@pytest.mark.parametrize("dtype,tol", DTYPES, ids=["fp32", "fp16"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("shape", [(1, 2, 64, 16), (2, 1, 100, 32), (1, 1, 128, 64), (1, 2, 77, 64)])
def test_output_and_gradients_against_float64(shape, causal, dtype, tol):
    q, k, v, grad_o = inputs(shape, dtype)
    o, grads = ours_with_grads(q, k, v, grad_o, causal)
    assert o.dtype == dtype and all(g.dtype == dtype and g.shape == q.shape for g in grads)
    assert relative_error(o, at.reference((q, k, v, grad_o), "fwd", causal))[0] <= tol
    for name, g, r in zip("QKV", grads, at.reference((q, k, v, grad_o), "fwd+bwd", causal)):
        assert relative_error(g, r)[0] <= tol, f"d{name}"


def test_strided_inputs_from_a_batch_seq_heads_layout():
    qkv = torch.randn(2, 100, 3, 2, 32)  # (batch, seq, q/k/v, heads, head_dim): a fused projection's output
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))  # (batch, heads, seq, head_dim), not contiguous
    assert not q.is_contiguous()
    grad_o = torch.randn(q.shape)
    o, grads = ours_with_grads(q, k, v, grad_o, True)
    assert relative_error(o, at.reference((q, k, v, grad_o)))[0] <= 1e-5
    assert relative_error(grads, at.reference((q, k, v, grad_o), "fwd+bwd"))[0] <= 1e-5


def test_causal_rows_see_only_the_past():
    q, k, v, _ = inputs((1, 1, 64, 16), torch.float32)
    v2 = v.clone()
    v2[:, :, 40:] += 1.0  # a change after row 39 leaves rows 0-39 alone
    a, b = at.attention_triton(q, k, v), at.attention_triton(q, k, v2)
    torch.testing.assert_close(a[:, :, :40], b[:, :, :40], rtol=0, atol=0)
    assert not torch.allclose(a[:, :, 40:], b[:, :, 40:])


@pytest.mark.parametrize("pass_", ["fwd", "fwd+bwd"])
@pytest.mark.parametrize("impl", ["naive", "builtin", "triton"])
def test_every_impl_within_kernel_tolerance(impl, pass_):
    k = at.KERNEL
    ins = k.make_inputs((1, 2, 96, 32), torch.float16, "cpu", seed=3)
    out = k.impls[impl](ins, pass_=pass_)()
    assert relative_error(out, k.reference(ins, pass_))[0] <= k.tolerance["float16"]


def test_compiled_naive_fwd_bwd_within_tolerance():
    from rooflab.cell import compiled_factory

    k = at.KERNEL
    ins = k.make_inputs((1, 2, 48, 16), torch.float32, "cpu", seed=2)
    make, fell_back = compiled_factory(k)
    assert relative_error(make(ins, pass_="fwd+bwd")(), k.reference(ins, "fwd+bwd"))[0] <= 1e-5
    assert not fell_back()


def test_reference_by_chunks_of_heads_is_the_whole(monkeypatch):
    ins = inputs((2, 3, 40, 16), torch.float32)
    whole = at.reference(ins, "fwd+bwd")
    from kernels.attention import exact
    monkeypatch.setattr(exact, "REFERENCE_SCORES", 40 * 40)  # one head at a time
    torch.testing.assert_close(at.reference(ins, "fwd+bwd"), whole)


def test_flop_and_byte_model_and_the_square_shape():
    assert at.KERNEL.shape(512) == (32, 16, 512, 128) and at.KERNEL.shape(1793) == (9, 16, 1793, 128)
    assert square_size((32, 16, 512, 128)) == 512 and square_size((1, 32, 16384, 128)) is None
    b, h, s, d = 2, 16, 1024, 128
    assert at.flops((b, h, s, d), "fwd", causal=False) == 4 * b * h * s * s * d
    assert at.flops((b, h, s, d)) == 2 * b * h * s * s * d  # the sweep is causal: half
    assert at.flops((b, h, s, d), "fwd+bwd") == 3.5 * at.flops((b, h, s, d))
    e = b * h * s * d
    assert at.bytes_moved((b, h, s, d), "bfloat16") == 4 * e * 2 + b * h * s * 4
    assert at.bytes_moved((b, h, s, d), "bfloat16", "fwd+bwd") == 12 * e * 2 + 2 * b * h * s * 4
    assert at.KERNEL.compute_unit("bfloat16") == "bf16" and at.KERNEL.family == "bhsd"


def test_refusals_name_the_problem():
    q = torch.zeros(1, 1, 8, 320)
    with pytest.raises(ValueError, match="head dims"):
        at.attention_triton(q, q, q)
    with pytest.raises(ValueError, match=r"v \(batch, Hkv, Sk, Dv\)"):
        at.attention_triton(torch.zeros(1, 1, 8, 16), torch.zeros(1, 1, 9, 16), torch.zeros(1, 1, 8, 16))
    with pytest.raises(ValueError, match="unit stride"):
        x = torch.zeros(1, 1, 16, 8).transpose(2, 3)
        at.attention_triton(x, x, x)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("config", [
    None, {
        "BLOCK_M": 64,
        "BLOCK_N": 32,
        "num_warps": 4,
        "num_stages": 2,
        "HEAVY_FIRST": False
    }, {
        "BLOCK_M": 128,
        "BLOCK_N": 128,
        "num_warps": 8,
        "num_stages": 2,
        "WARP_SPECIALIZE": True
    }
], ids=["autotuned", "64x32-in-order", "128x128-ws"])
# in-order: the interpreter runs grid axis 0 outermost, so only program order lets a head's O store that spilt into
# the next head's rows stand (heavy first, the next head's own tile writes them again after it)
@pytest.mark.parametrize("shape", [(1, 2, 256, 32), (2, 2, 77, 32), (1, 3, 200, 16)], ids=["whole", "77", "200"])
def test_tma_and_pointer_kernels_agree_with_float64(shape, config, causal):
    """Odd lengths too: a tile past a head's end reads the next head's rows (the last head's: zeros)."""
    q, k, v, grad_o = inputs(shape, torch.float16, seed=4)
    assert at.tma_ok(q, k, v)
    ref = at.reference((q, k, v, grad_o), "fwd", causal)
    outs = {}
    for method in ("tma", "pointer"):
        cfg = None if config is None or method == "pointer" else config
        outs[method] = at.attention_forward(q, k, v, causal, shape[-1]**-0.5, method=method, config=cfg)
        assert relative_error(outs[method][0], ref)[0] <= DEFAULT_TOLERANCE["float16"], method
    torch.testing.assert_close(outs["tma"][1], outs["pointer"][1], rtol=1e-4, atol=1e-4)  # the logsumexp the bwd reads


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_a_head_never_reads_its_neighbours_values(causal):
    """The TMA tiles past a head's end hold the next head's K and V: masked, inf or NaN there changes nothing."""
    q, k, v, grad_o = inputs((1, 2, 77, 32), torch.float16, seed=6)
    clean = at.attention_forward(q, k, v, causal, 32**-0.5, method="tma")[0]
    k[:, 1], v[:, 1] = float("inf"), float("nan")
    dirty = at.attention_forward(q, k, v, causal, 32**-0.5, method="tma")[0]
    torch.testing.assert_close(dirty[:, 0], clean[:, 0], rtol=0, atol=0)


def test_large_logits_stay_causal():
    """Masks select, not add: base-2 logits past a million still keep the future out."""
    q = torch.full((1, 1, 128, 128), 300.0)
    k = torch.zeros_like(q)
    k[:, :, 64:] = 300.0
    v = torch.randn(q.shape)
    o = at.attention_forward(q, k, v, True, 128**-0.5)[0]  # fp32: the pointer kernel, the same step as TMA's
    assert relative_error(o, at.reference((q, k, v, v)))[0] <= 1e-5


def test_forced_tiles_must_split_at_a_tile_edge():
    q, k, v, grad_o = inputs((1, 1, 128, 32), torch.float16)
    with pytest.raises(ValueError, match="BLOCK_M must be a multiple of BLOCK_N"):
        at.attention_forward(q, k, v, True, 1.0, config={"BLOCK_M": 32, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2})
    o, lse = at.attention_forward(q, k, v, True, 1.0)
    from kernels.attention.backward import attention_backward
    with pytest.raises(ValueError, match="dkdv: BLOCK_N must be a multiple of BLOCK_M"):
        attention_backward(q, k, v, o, lse, grad_o, True, 1.0, {"dkdv": {"BLOCK_M": 64, "BLOCK_N": 32}})


def test_the_tma_kernel_takes_contiguous_16_bit_heads_only():
    q = torch.zeros(1, 2, 200, 32, dtype=torch.float16)
    assert at.tma_ok(q, q, q)
    shifted = torch.zeros(q.numel() + 1, dtype=torch.float16)[1:].view(q.shape)  # contiguous, 2 bytes off 16
    assert shifted.is_contiguous() and not at.tma_ok(shifted, shifted, shifted)
    assert not at.tma_ok(q.float(), q.float(), q.float())
    strided = torch.zeros(1, 256, 2, 32, dtype=torch.float16).transpose(1, 2)
    assert not at.tma_ok(strided, strided, strided)
    with pytest.raises(ValueError, match="tma needs"):
        at.attention_forward(q.float(), q.float(), q.float(), True, 1.0, method="tma")
    with pytest.raises(ValueError, match="finite scale > 0"):
        at.attention_triton(q, q, q, sm_scale=-1.0)


@pytest.mark.parametrize("scale", [torch.tensor(0.25), torch.tensor([0.25]), 0.25, 1 / 4])
@pytest.mark.parametrize("seq_q", [3, 20], ids=["decode", "fa2"])
def test_a_scale_given_as_any_number_is_that_float(scale, seq_q):
    """A tensor or NumPy scale (what a model's config may hold) runs as its float on both paths, with gradients."""
    np = pytest.importorskip("numpy")
    q, k, v, grad_o = inputs((1, 2, 20, 16), torch.float32)
    q = q[:, :, :seq_q].contiguous()
    want = at.attention_triton(q, k, v, True, 0.25)
    for s in (scale, np.float32(0.25)):
        torch.testing.assert_close(at.attention_triton(q, k, v, True, s), want)
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        at.attention_triton(*leaves, True, s).sum().backward()
        assert all(torch.isfinite(t.grad).all() for t in leaves)


@pytest.mark.parametrize("scale, err, match", [(True, TypeError, "a number"), ("0.1", TypeError, "a number"),
                                               (torch.ones(2), TypeError, "a number"),
                                               (float("inf"), ValueError, "finite scale > 0"),
                                               (float("nan"), ValueError, "finite scale > 0"),
                                               (0.0, ValueError, "finite scale > 0")])
@pytest.mark.parametrize("seq_q", [3, 20], ids=["decode", "fa2"])
def test_a_scale_that_is_no_positive_number_is_refused_by_name(scale, err, match, seq_q):
    q, k, v, _ = inputs((1, 2, 20, 16), torch.float32)
    with pytest.raises(err, match=match):
        at.attention_triton(q[:, :, :seq_q], k, v, True, scale)
    with pytest.raises(err, match=match):  # and through autograd
        at.attention_triton(*(t.clone().requires_grad_() for t in (q, k, v)), True, scale)


def test_a_double_backward_raises_instead_of_a_wrong_gradient():
    """The kernels' gradients are not differentiable again: a second-order gradient must not come out silently wrong
    (it did: dQ's graph was cut, so d(dQ)/dQ read as 0)."""
    q, k, v, _ = inputs((1, 1, 32, 16), torch.float32)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    o = at.attention_triton(*leaves, causal=True)
    dq, = torch.autograd.grad(o.sum(), leaves[0], create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|does not require grad"):
        (dq**2).sum().backward()


@pytest.mark.parametrize("config, match", [({
    "BLOCK_M": 48,
    "BLOCK_N": 16
}, "BLOCK_M must be a power of two"), ({
    "BLOCK_M": 0,
    "BLOCK_N": 16
}, "BLOCK_M must be a power of two"), ({
    "BLOCK_M": 64
}, r"missing \['BLOCK_N'\]"), ({
    "BLOCK_M": 64,
    "BLOCK_N": 16,
    "num_warps": 3
}, "num_warps must be"), ({
    "BLOCK_M": 64,
    "BLOCK_N": 16,
    "BLOCK_K": 16
}, r"unknown \['BLOCK_K'\]")])
def test_a_forced_tile_that_triton_cannot_take_is_refused_by_name(config, match):
    q, k, v, _ = inputs((1, 1, 64, 16), torch.float32)
    with pytest.raises(ValueError, match=match):
        at.attention_forward(q, k, v, True, 1.0, method="pointer", config=config)


def test_inputs_that_are_no_tensors_are_refused_by_name():
    q = torch.zeros(1, 1, 8, 16)
    with pytest.raises(TypeError, match="needs torch tensors; got list"):
        at.attention_triton(q, q.tolist(), q)
