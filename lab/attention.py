"""FlashAttention-2's forward at square-sweep, llm and odd shapes, bf16 and fp16 (--dtypes), causal and full, head
dims 64 and 128; every variant checked against float64 on the first and last four heads first. Sections: attention
(the default, each kernel autotuned, and each of their tiles, the TMA ones also in program order, beside SDPA's
cuDNN and flash backends), attntiles (the TMA kernel at every tile of the tutorial's Hopper space), attnws (those
tiles with warp specialisation; run it on its own: a compiler crash there ends its process) and attnbwd (the
backward's tiles)."""
import itertools

import torch

from lab.common import DTYPES, checked, timed

SHAPES = [((4, 32, 4096, 128), True), ((4, 32, 4096, 128), False), ((1, 16, 16384, 128), True),
          ((2, 32, 8192, 128), True), ((4, 32, 4096, 64), True), ((16, 16, 1024, 128), True),
          ((16, 16, 1000, 128), True), ((3, 16, 4097, 128), False)]  # the last two: the odd preset's lengths
# (BLOCK_M, BLOCK_N, num_warps, num_stages): the tutorial's Hopper space with BLOCK_N <= BLOCK_M and <= head_dim
SPACE = [(m, n, w, s) for m, n, w, s in itertools.product((64, 128), (32, 64, 128), (4, 8), (2, 3, 4)) if n <= m]


def _tile(m, n, w, s, **extra):
    return {"BLOCK_M": m, "BLOCK_N": n, "num_warps": w, "num_stages": s, **extra}


def attention_variants(shape, causal, dtype, section="attention", device="cuda"):
    from experiments.backends import attention_fn
    from kernels import attention as at

    q, k, v, grad_o = at.make_inputs(shape, dtype, device)
    scale = shape[-1]**-0.5

    def sdpa(variant):  # experiments/backends.py's SDPA call with its backend forced
        fn = attention_fn(variant, causal)
        return lambda: fn(q, k, v)

    def ours(method, config=None):
        return lambda: at.attention_forward(q, k, v, causal, scale, method=method, config=config)[0]

    variants = {}
    if section == "attention":
        variants = {
            "builtin cuDNN": sdpa("cudnn"),
            "builtin flash": sdpa("flash"),
            "triton (default)": ours("auto"),
            "triton pointer (autotuned)": ours("pointer"),
            "triton tma (autotuned)": ours("tma")
        }
        variants |= {
            f"pointer {m}x{n} w{w} s{s}": ours("pointer", _tile(m, n, w, s))
            for m, n, w, s in at.POINTER_TILES
        }
        for m, n, w, s in at.TMA_TILES:  # the default order (heavy tiles first) and program order
            for label, extra in (("", {}), (" in order", {"HEAVY_FIRST": False})):
                variants[f"tma {m}x{n} w{w} s{s}{label}"] = ours("tma", _tile(m, n, w, s, **extra))
    else:
        extra = {"WARP_SPECIALIZE": True} if section == "attnws" else {}
        for m, n, w, s in SPACE:
            if n <= shape[-1]:
                variants[f"tma {m}x{n} w{w} s{s}{' ws' if extra else ''}"] = ours("tma", _tile(m, n, w, s, **extra))

    def ends(t):  # the first four heads and the last four (whose tiles read past the table's end)
        return torch.cat([t[:1, :4], t[-1:, -4:]])

    ref = at.reference([ends(t) for t in (q, k, v, grad_o)], "fwd", causal)  # float64
    kept = {}
    for name, fn in variants.items():  # checked on those heads of the output, timed whole
        first = lambda f=fn: ends(f())  # noqa: E731
        good = checked(first, ref, dtype, name)
        kept[name] = fn if good is first else good
    return kept


def run_attention(run, section="attention"):
    from kernels import attention as at

    for dname in run.args.dtypes:
        if dname == "float32":
            continue
        for shape, causal in SHAPES:
            label = f"{'x'.join(map(str, shape))} {'causal' if causal else 'full'}"
            for name, fn in attention_variants(shape, causal, DTYPES[dname], section).items():
                run.record("attention", label, dname, name, timed(fn, run.timer, run.cfg),
                           flops=at.flops(shape, "fwd", causal))
            for tuner, kind in ((at._attn_fwd_kernel, "pointer"), (at._attn_fwd_tma_autotuned, "tma")):
                if section == "attention":  # the only section that calls the autotuners
                    run.rows.append({
                        "kernel": "attention",
                        "n": label,
                        "dtype": dname,
                        "variant": f"chosen {kind}: {getattr(tuner, 'best_config', None)}"
                    })
            torch.cuda.empty_cache()
            print(f"done attention {label} {dname}", flush=True)


# The backward's tiles (BLOCK_M, BLOCK_N, num_warps, num_stages): BLOCK_N a multiple of BLOCK_M for dK dV, the
# reverse for dQ (the causal stages split at a tile edge); the tutorial's Hopper backward runs 4 warps, 5 stages.
BWD_SPACE = {
    "dkdv": [(m, n, w, s) for m, n in ((32, 128), (64, 128), (32, 64), (64, 64)) for w in (4, 8) for s in (3, 4, 5)],
    "dq": [(m, n, w, s) for m, n in ((128, 32), (128, 64), (64, 32), (64, 64)) for w in (4, 8) for s in (3, 4, 5)]
}
BWD_SHAPES = [((4, 32, 4096, 128), True), ((1, 16, 16384, 128), True)]


def backward_variants(shape, causal, dtype, device="cuda"):
    """The backward alone (the forward's O and logsumexp made once): the default, then each kernel's tiles in turn
    with the other autotuned; each checked against the default's gradients."""
    from kernels import attention as at
    from kernels.attention.backward import attention_backward

    q, k, v, do = at.make_inputs(shape, dtype, device)
    scale = shape[-1]**-0.5
    o, lse = at.attention_forward(q, k, v, causal, scale)

    def bwd(configs=None):
        return lambda: attention_backward(q, k, v, o, lse, do, causal, scale, configs)

    variants = {"triton backward (default)": bwd()}
    for kind, space in BWD_SPACE.items():
        variants |= {f"{kind} {m}x{n} w{w} s{s}": bwd({kind: _tile(m, n, w, s)}) for m, n, w, s in space}
    ref = variants["triton backward (default)"]()
    return {name: checked(fn, ref, dtype, name) for name, fn in variants.items()}


def run_attnbwd(run):
    from kernels import attention as at

    for dname in run.args.dtypes:
        if dname == "float32":
            continue
        for shape, causal in BWD_SHAPES:
            label = f"{'x'.join(map(str, shape))} {'causal' if causal else 'full'}"
            for name, fn in backward_variants(shape, causal, DTYPES[dname]).items():
                run.record("attention bwd", label, dname, name, timed(fn, run.timer, run.cfg),
                           flops=at.flops(shape, "fwd+bwd", causal) - at.flops(shape, "fwd", causal))
            torch.cuda.empty_cache()
            print(f"done attention bwd {label} {dname}", flush=True)


def run_attntiles(run):
    run_attention(run, "attntiles")


def run_attnws(run):
    run_attention(run, "attnws")
