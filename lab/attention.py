"""FlashAttention-2's forward at square-sweep, llm and odd shapes, bf16 and fp16 (--dtypes), causal and full, head
dims 64 and 128; every variant checked against float64 on four heads first. Sections: attention (the default, each
kernel autotuned, and each of their tiles, the TMA ones also in program order, beside SDPA's cuDNN and flash
backends), attntiles (the TMA kernel at every tile of the tutorial's Hopper space) and attnws (those tiles with warp
specialisation; run it on its own: a compiler crash there ends its process)."""
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
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from kernels import attention as at

    q, k, v, grad_o = at.make_inputs(shape, dtype, device)
    scale = shape[-1] ** -0.5

    def sdpa(backend):
        def call():
            with sdpa_kernel(backend):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return call

    def ours(method, config=None):
        return lambda: at.attention_forward(q, k, v, causal, scale, method=method, config=config)[0]

    variants = {}
    if section == "attention":
        variants = {"builtin cuDNN": sdpa(SDPBackend.CUDNN_ATTENTION),
                    "builtin flash": sdpa(SDPBackend.FLASH_ATTENTION), "triton (default)": ours("auto"),
                    "triton pointer (autotuned)": ours("pointer"),
                    "triton tma (autotuned)": ours("tma")}
        variants |= {f"pointer {m}x{n} w{w} s{s}": ours("pointer", _tile(m, n, w, s))
                     for m, n, w, s in at.POINTER_TILES}
        for m, n, w, s in at.TMA_TILES:  # the default order (heavy tiles first) and program order
            for label, extra in (("", {}), (" in order", {"HEAVY_FIRST": False})):
                variants[f"tma {m}x{n} w{w} s{s}{label}"] = ours("tma", _tile(m, n, w, s, **extra))
    else:
        extra = {"WARP_SPECIALIZE": True} if section == "attnws" else {}
        for m, n, w, s in SPACE:
            if n <= shape[-1]:
                variants[f"tma {m}x{n} w{w} s{s}{' ws' if extra else ''}"] = ours("tma", _tile(m, n, w, s, **extra))
    ref = at.reference([t[:1, :4] for t in (q, k, v, grad_o)], "fwd", causal)  # float64: the first four heads
    kept = {}
    for name, fn in variants.items():  # checked on the first four heads of the output, timed whole
        first = lambda f=fn: f()[:1, :4]  # noqa: E731
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
                best = getattr(tuner, "best_config", None)
                run.rows.append({"kernel": "attention", "n": label, "dtype": dname,
                                 "variant": f"chosen {kind}: {best}"})
            torch.cuda.empty_cache()
            print(f"done attention {label} {dname}", flush=True)


def run_attntiles(run):
    run_attention(run, "attntiles")


def run_attnws(run):
    run_attention(run, "attnws")
