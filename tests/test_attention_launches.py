"""FlashAttention-2's kept launches (kernels/attention/launches.py) under the interpreter: ``replaying()`` keeps each
key's launches and replays them through kernel[grid] with the first call's plan, so a key that leaves out what a
launch depends on gives a wrong answer here; ``standing_in()`` checks the raw launcher calls of a hit."""
import pytest
import torch

from kernels import attention as at
from kernels._shared import fastlaunch as fl
from kernels.attention import backward as bw
from kernels.attention.launches import LAUNCHES
from rooflab.cell import relative_error
from rooflab.kernel import DEFAULT_TOLERANCE
from tests.test_fastlaunch import _Compiled

TOL = DEFAULT_TOLERANCE["float32"]


def grouped(batch=1, heads=4, kv_heads=2, seq_q=40, seq_k=56, d=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, seq_q, d, generator=g)
    k, v = (torch.randn(batch, kv_heads, seq_k, d, generator=g) for _ in range(2))
    return q, k, v, torch.randn(batch, heads, seq_q, d, generator=g)


def reference(q, k, v, do, causal):
    """float64, K and V repeated to every query head, the causal mask aligned bottom-right."""
    from kernels.attention.decode import reference as decode_reference

    leaves = [t.double().requires_grad_(True) for t in (q, k, v)]
    o = decode_reference(*leaves, causal=causal)
    o.backward(do.double())
    return o.detach(), *(t.grad for t in leaves)


def with_grads(q, k, v, do, causal):
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    o = at.attention_triton(*leaves, causal=causal)
    o.backward(do)
    return o.detach(), *(t.grad for t in leaves)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_a_hit_replays_the_first_calls_plan_and_a_new_spec_is_a_new_key(causal):
    """Forward and backward through autograd: the first call keeps the forward's launch and the backward's three; a
    hit on new tensors of the same specs launches them with no miss and is right; another length, dtype, K/V head
    count or a forced chunk count misses (or keeps nothing) and is right too."""
    with fl.replaying():
        assert len(LAUNCHES) == 0
        first = grouped()
        for got, ref in zip(with_grads(*first, causal), reference(*first, causal)):
            assert relative_error(got, ref)[0] <= TOL
        assert LAUNCHES.misses == 4 and len(LAUNCHES) == 6, LAUNCHES.skipped  # 4 launches, 2 kept calls
        again = grouped(seed=1)
        for got, ref in zip(with_grads(*again, causal), reference(*again, causal)):
            assert relative_error(got, ref)[0] <= TOL
        assert LAUNCHES.misses == 4
        for other in (grouped(seq_q=33), grouped(kv_heads=4), [t.half() for t in grouped()]):
            tol = DEFAULT_TOLERANCE["float16" if other[0].dtype == torch.half else "float32"]
            for got, ref in zip(with_grads(*other, causal), reference(*other, causal)):
                assert relative_error(got, ref)[0] <= tol
        assert LAUNCHES.misses == 16  # three new keys of four launches each
        q, k, v, do = grouped()
        o, lse = at.attention_forward(q, k, v, causal, 32**-0.5)  # the first key's forward: a hit
        forced = bw.attention_backward(q, k, v, o, lse, do, causal, 32**-0.5, chunks=2)  # never kept
        assert LAUNCHES.misses == 19
        for got, ref in zip(forced, reference(q, k, v, do, causal)[1:]):
            assert relative_error(got, ref)[0] <= TOL
    assert len(LAUNCHES) == 0  # emptied on the way out


def test_a_new_scale_or_mask_is_a_new_key():
    """Forward and backward alike: the same tensors under another scale or mask miss, and the first again hits."""
    q, k, v, do = grouped()
    with fl.replaying():
        outs, grads = [], []
        for causal, scale in ((True, 0.2), (True, 0.3), (False, 0.2), (True, 0.2)):
            o, lse = at.attention_forward(q, k, v, causal, scale)
            outs.append(o)
            grads.append(bw.attention_backward(q, k, v, o, lse, do, causal, scale)[2])  # dK
        assert LAUNCHES.misses == 3 * 4
        for got in (outs, grads):
            assert torch.equal(got[0], got[3]) and not torch.equal(got[0], got[1])
            assert not torch.equal(got[0], got[2])


def test_standing_in_a_hit_calls_each_launcher_with_this_calls_tensors():
    """The raw path of a hit: one forward launch with (q, k, v, O, lse) at its head, then delta's (O, dO, delta),
    dK dV's (q, k, v, dO, dK, dV, lse, delta: one chunk on the CPU) and dQ's (q, k, v, dO, dQ, lse, delta)."""
    compiled = _Compiled()
    q, k, v, do = grouped()
    with fl.standing_in(compiled):
        o, lse = at.attention_forward(q, k, v, True, 0.25)
        bw.attention_backward(q, k, v, o, lse, do, True, 0.25)
        assert not compiled.calls and LAUNCHES.misses == 4, LAUNCHES.skipped
        q2, k2, v2, do2 = grouped(seed=3)
        o2, lse2 = at.attention_forward(q2, k2, v2, True, 0.25)
        dq, dk, dv = bw.attention_backward(q2, k2, v2, o2, lse2, do2, True, 0.25)
        assert LAUNCHES.misses == 4 and len(compiled.calls) == 4
        heads = [call[9:9 + n] for call, n in zip(compiled.calls, (5, 3, 8, 7))]
        assert [t is x for t, x in zip(heads[0], (q2, k2, v2, o2, lse2))] == [True] * 5
        assert heads[1][0] is o2 and heads[1][1] is do2 and heads[1][2].shape == lse2.shape
        assert [t is x for t, x in zip(heads[2], (q2, k2, v2, do2, dk, dv, lse2))] == [True] * 7
        assert heads[3][4] is dq and heads[2][7] is heads[1][2] is heads[3][6]  # one delta
        assert o2.shape == o.shape and lse2.shape == lse.shape and dq.shape == q.shape and dk.shape == k.shape
    assert len(LAUNCHES) == 0


def test_a_hit_of_a_split_group_sums_its_chunks_and_a_tma_hit_rebases_its_descriptors(monkeypatch):
    """The plan's chunk count (two here: the CPU has no SMs to fill) is kept with the backward, and a hit sums the
    chunks' partials as the first call did; fp16 contiguous heads take the TMA forward, whose hit points the kept
    descriptors at the new tensors."""
    real = bw.group_chunks
    monkeypatch.setattr(bw, "group_chunks", lambda *args: real(*args[:-1], chunks=2))
    tol = DEFAULT_TOLERANCE["float16"]
    with fl.replaying():
        for seed in (0, 1):  # a miss, then a hit
            inputs = [t.half() for t in grouped(seed=seed)]
            for got, ref in zip(with_grads(*inputs, True), reference(*inputs, True)):
                assert relative_error(got, ref)[0] <= tol, seed
        assert LAUNCHES.misses == 4
        kept = [launch for launch in LAUNCHES._entries.values() if hasattr(launch, "chunks")]
        assert [launch.chunks for launch in kept] == [2]
        assert [launch.descriptors is not None
                for launch in LAUNCHES._entries.values()
                if hasattr(launch, "lse_rows")] == [True]
