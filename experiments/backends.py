"""Our FlashAttention-2 beside each backend of PyTorch's scaled_dot_product_attention, one row per backend.

    python -m experiments.backends --gpu h200 --out results/raw/h200/backends.parquet   # prints the table at the end
    python -m analysis.attention results/raw/h200/backends.parquet       # the same table from a run's rows

The sweep's `builtin` is SDPA as a user calls it (it picks a backend per call: cuDNN on the H200 with torch 2.11);
here each backend is forced (`torch.nn.attention.sdpa_kernel`): flash (FlashAttention-2's CUDA kernels), cuDNN and
memory-efficient (xFormers' CUTLASS kernels), beside ours, at config backends.shapes: cells (batch, heads, kv_heads,
seq_q, seq_k, head_dim) or (batch, heads, seq, head_dim), and config backends.presets' model cells (rooflab/shapes.py
ATTENTION_CELLS: grouped-query prefill and decode), causal (bottom-right where seq_q != seq_k) and full, fwd and
fwd+bwd (decode, seq_q <= 16: fwd only). Ours is the FlashAttention-2 kernel (kernels/attention/__init__.py), or the
split-KV decode kernel (kernels/attention/decode.py) for seq_q <= 16; SDPA gets grouped cells with enable_gqa=True.
Each cell is checked against the float64 expression on its first (batch, K/V head group) and timed with the sweep's
timer: GPU time (L2 flushed, launch hidden) and the Python loop an eager user pays per call (`loop_ms`; the forced
backend's `sdpa_kernel` context is inside that loop, as it is in a user's). A backend that refuses a cell (no kernel
for that head dim, dtype or mask) is a row with status `unsupported` and its reason. GPU only.
"""
from __future__ import annotations

import argparse
import itertools
import logging
import sys
from pathlib import Path

log = logging.getLogger("rooflab.backends")

# variant -> (label, SDPBackend name; None: ours)
VARIANTS = {
    "ours": ("ours (Triton)", None),
    "flash": ("SDPA flash", "FLASH_ATTENTION"),
    "cudnn": ("SDPA cuDNN", "CUDNN_ATTENTION"),
    "efficient": ("SDPA memory-efficient", "EFFICIENT_ATTENTION")
}
PASSES = ("fwd", "fwd+bwd")
DECODE_MAX_SEQ_Q = 16  # seq_q up to this: the split-KV decode kernel (forward only), longer: FlashAttention-2


def as_cell(shape) -> tuple[int, ...]:
    """(batch, heads, kv_heads, seq_q, seq_k, head_dim) from itself or from (batch, heads, seq, head_dim)."""
    dims = tuple(int(d) for d in shape)
    if len(dims) == 4:
        b, h, s, d = dims
        return b, h, h, s, s, d
    if len(dims) != 6 or min(dims) < 1 or dims[1] % dims[2]:
        raise ValueError(f"an attention cell is batch x heads x seq x head_dim or batch x heads x kv_heads x seq_q x "
                         f"seq_k x head_dim (kv_heads dividing heads), got {shape!r}")
    return dims


def cell_kind(cell) -> str:
    """decode (seq_q <= 16 against more keys), cross (seq_q != seq_k), grouped (kv_heads < heads), or mha."""
    _, h, hkv, sq, sk, *_ = cell
    return ("decode"
            if sq <= DECODE_MAX_SEQ_Q and sk > sq else "cross" if sq != sk else "grouped" if hkv < h else "mha")


def cell_passes(cell) -> tuple[str, ...]:
    return ("fwd", ) if cell_kind(cell) == "decode" else PASSES  # decode computes no gradients


def ours(q, k, v, causal: bool):
    """Our kernel for the cell: split-KV decode for seq_q <= DECODE_MAX_SEQ_Q without gradients, else FA2."""
    import torch

    from kernels.attention import attention_triton
    from kernels.attention.decode import decode_attention

    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    if q.shape[2] <= DECODE_MAX_SEQ_Q and not grad:
        return decode_attention(q, k, v, causal=causal)
    return attention_triton(q, k, v, causal=causal)


def sdpa(q, k, v, causal: bool):
    """SDPA with what a model passes: enable_gqa=True for grouped heads (torch >= 2.5), the causal mask bottom-right
    (torch's CausalBias) where seq_q != seq_k (is_causal is top-left there); one query row sees every key."""
    import torch.nn.functional as F

    kw = {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}
    sq, sk = q.shape[2], k.shape[2]
    if causal and sq != sk and sq > 1:
        from torch.nn.attention.bias import causal_lower_right

        return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(sq, sk), **kw)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal and sq == sk, **kw)


def attention_fn(variant: str, causal: bool):
    """(q, k, v) -> O for one variant; SDPA's with its backend forced for the call."""
    backend = VARIANTS[variant][1]
    if backend is None:
        return lambda q, k, v: ours(q, k, v, causal)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    chosen = getattr(SDPBackend, backend)

    def forced(q, k, v):
        with sdpa_kernel(chosen):
            return sdpa(q, k, v, causal)

    return forced


def first_head(inputs):
    """The inputs of the first batch's first K/V head and its group of query heads alone: its outputs and
    gradients are the whole call's there (dK, dV sum over that group only)."""
    q, k, v, *rest = inputs
    group = q.shape[1] // k.shape[1]
    return (q[:1, :group].contiguous(), k[:1, :1].contiguous(), v[:1, :1].contiguous(), *(t[:1, :group].contiguous()
                                                                                          for t in rest))


def rel_err(out, ref) -> float:
    """The sweep's relative error (rooflab.cell.relative_error) of the first group of every output (O, dQ: the
    group's query heads; dK, dV: its K/V head)."""
    import torch

    from rooflab.cell import relative_error

    outs = (out, ) if torch.is_tensor(out) else tuple(out)
    refs = (ref, ) if torch.is_tensor(ref) else tuple(ref)
    return relative_error(tuple(o[:1, :r.shape[1]] for o, r in zip(outs, refs)), ref)[0]


def make_inputs(cell, dtype, device: str, seed: int = 0):
    """q (batch, heads, seq_q, head_dim), k and v (batch, kv_heads, seq_k, head_dim), grad_o like q; a cell of seven
    gives V (and O, grad_o) a head size of its own, the last."""
    import torch

    b, h, hkv, sq, sk, d, *rest = cell
    dv = rest[0] if rest else d
    g = torch.Generator(device=device).manual_seed(seed)
    shapes = ((b, h, sq, d), (b, hkv, sk, d), (b, hkv, sk, dv), (b, h, sq, dv))
    return tuple(torch.randn(s, generator=g, device=device, dtype=torch.float32).to(dtype) for s in shapes)


def reference(inputs, pass_: str, causal: bool):
    """float64 O, or (dQ, dK, dV) by autograd (kernels/attention/decode.reference: grouped, bottom-right)."""
    from kernels.attention.decode import reference as expression

    if pass_ == "fwd":
        return expression(*inputs[:3], causal)
    q, k, v = (t.detach().double().requires_grad_(True) for t in inputs[:3])
    expression(q, k, v, causal).backward(inputs[3].double())
    return q.grad, k.grad, v.grad


def flops(cell, pass_: str, causal: bool) -> float:
    """QK^T and PV, 2 * (head_dim + V's) per visible (query, key) pair of each query head; seq_q == seq_k causal: half
    of them (FA2's count), else the bottom-right mask's exact count. fwd+bwd: 3.5x."""
    from kernels.attention import BWD_OVER_FWD_FLOPS

    b, h, _, sq, sk, d, *rest = cell
    d = (d + (rest[0] if rest else d)) / 2  # the mean of Q's and V's head sizes
    pairs = sq * sk / 2 if causal and sq == sk else \
        sum(min(sk, i + sk - sq + 1) for i in range(max(0, sq - sk), sq)) if causal else sq * sk
    return 4 * b * h * pairs * d * (1 + (BWD_OVER_FWD_FLOPS if pass_ == "fwd+bwd" else 0))


def bytes_moved(cell, dtype: str, pass_: str) -> float:
    """The fewest: fwd reads Q, K, V (K, V once per group) and writes O and the fp32 logsumexp; bwd reads Q, K, V,
    O, dO and the logsumexp and writes dQ, dK, dV."""
    from rooflab.kernel import ELEMENT_BYTES

    b, h, hkv, sq, sk, d, *rest = cell
    d = (d + (rest[0] if rest else d)) / 2  # Q and K of head_dim, V and O of V's: their mean, as a pair reads both
    e = ELEMENT_BYTES[dtype]
    qo, kv, lse = b * h * sq * d * e, b * hkv * sk * d * e, b * h * sq * 4
    fwd = 2 * qo + 2 * kv + lse
    return fwd + ((3 * qo + 2 * kv + lse + qo + 2 * kv) if pass_ == "fwd+bwd" else 0)


UNSUPPORTED = ("No available kernel", "No viable backend")  # SDPA's words on CUDA and on the CPU


def unsupported(exc: Exception, variant: str = "") -> bool:
    """SDPA's answer when the forced backend has no kernel for the cell (a warning names why, the error not); ours
    refuses what it does not support with a ValueError, TypeError or NotImplementedError naming what it does."""
    if variant == "ours" and isinstance(exc, (ValueError, TypeError, NotImplementedError)):
        return True
    return isinstance(exc, RuntimeError) and any(s in str(exc) for s in UNSUPPORTED)


def run(gpu: str, shapes, causals, dtypes, timing: dict, out: str, cache_dirs: dict | None = None) -> int:
    from rooflab.device import check_device, prepare_environment

    prepare_environment(gpu, {"cache_dirs": cache_dirs or {}})
    device, _ = check_device(gpu)
    if device != "cuda":
        print("backends: SDPA's flash, cuDNN and memory-efficient backends and the timer need an NVIDIA GPU",
              file=sys.stderr)
        return 2
    import pandas as pd
    import torch

    from rooflab import clocks
    from rooflab.io import write_parquet
    from rooflab.kernel import DEFAULT_TOLERANCE, differentiable, torch_dtype
    from rooflab.provenance import provenance
    from rooflab.shapes import label as shape_label
    from rooflab.timers import timer_for
    from rooflab.timing import TimingConfig, measure

    cfg = TimingConfig.from_config(timing)
    timer = timer_for(device, cfg)
    todo = [(as_cell(s), c, d) for s, c, d in itertools.product(shapes, causals, dtypes)]
    todo = [(s, c, d) for s, c, d in todo if c or s[3] > 1 or True not in causals]  # one query row: full = causal
    rows = []
    for i, (shape, causal, dtype) in enumerate(todo, 1):
        cell = shape
        inputs = make_inputs(cell, torch_dtype(dtype), "cuda", seed=0)
        small = first_head(inputs)
        for pass_ in cell_passes(cell):
            ref = reference(small, pass_, causal)
            flops_ = flops(cell, pass_, causal)
            for variant, (label, _) in VARIANTS.items():
                base = {
                    "variant": variant,
                    "label": label,
                    "batch": cell[0],
                    "heads": cell[1],
                    "kv_heads": cell[2],
                    "seq_q": cell[3],
                    "seq_k": cell[4],
                    "seq": cell[4],
                    "head_dim": cell[5],
                    "kind": cell_kind(cell),
                    "causal": causal,
                    "dtype": dtype,
                    "pass": pass_,
                    "flops": flops_,
                    "bytes": bytes_moved(cell, dtype, pass_),
                    "tolerance": DEFAULT_TOLERANCE[dtype]
                }
                if variant == "ours":
                    base["ran"] = "decode" if pass_ == "fwd" and cell[3] <= DECODE_MAX_SEQ_Q else "fa2"
                fn = differentiable(attention_fn(variant, causal))(inputs, pass_)
                try:
                    err = rel_err(fn(), ref)  # our first call autotunes here, outside the timing
                    if not err <= DEFAULT_TOLERANCE[dtype]:
                        rows.append({**base, "status": "mismatch", "rel_err": err})
                        log.warning("%s %s causal=%s %s: rel_err %.2e", label, shape_label(cell), causal, pass_, err)
                        continue
                    stats = measure(fn, timer, cfg)
                except Exception as exc:  # a refused cell is a row with its reason, never the end of the job
                    torch.cuda.empty_cache()  # an out-of-memory cell leaves the next its memory
                    status = "unsupported" if unsupported(exc, variant) else "failed"
                    log.warning("%s %s causal=%s %s: %s: %s", label, shape_label(cell), causal, pass_, status,
                                str(exc)[:200])
                    rows.append({**base, "status": status, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
                    continue
                finally:
                    del fn
                rows.append({
                    **base, "status": "ok",
                    "rel_err": err,
                    **stats, "tflops": flops_ / (stats["median_ms"] * 1e-3) / 1e12,
                    "tflops_loop": flops_ / (stats["loop_ms"] * 1e-3) / 1e12,
                    **clocks.prefixed("after")
                })
                log.info("[%d/%d] %-22s %-22s causal=%-5s %-7s %9.4f ms %7.1f TFLOP/s (loop %9.4f ms)", i, len(todo),
                         label, shape_label(cell), causal, pass_, stats["median_ms"], rows[-1]["tflops"],
                         stats["loop_ms"])
            del ref
        del inputs, small
        torch.cuda.empty_cache()
        # after every shape: a run cut short keeps the shapes it finished
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        write_parquet(
            pd.DataFrame(rows).assign(**{
                **provenance(), "gpu": gpu,
                "device_name": torch.cuda.get_device_name()
            }), out)
    from analysis.attention import printed_table  # the table the paper prints, from the rows just written

    print(printed_table(pd.read_parquet(out)))
    return 0


def cells_of(shapes, presets) -> list[tuple[int, ...]]:
    """--shapes (labels of 4 or 6 dimensions) and the presets' model cells (rooflab/shapes.ATTENTION_CELLS), each
    once, in order; ValueError names a bad one."""
    from rooflab.shapes import ATTENTION_CELLS

    cells = []
    for shape in shapes or ():
        parts = str(shape).split("x")
        if not all(p.isdigit() for p in parts):
            raise ValueError(f"{shape!r} is not a label like 4x32x4096x128 or 1x32x8x1x8192x128")
        cells.append(as_cell(tuple(int(p) for p in parts)))
    for name in presets or ():
        if name not in ATTENTION_CELLS:
            raise ValueError(f"unknown preset {name!r}: one of {sorted(ATTENTION_CELLS)}")
        cells += [as_cell(c.dims) for c in ATTENTION_CELLS[name]]
    return list(dict.fromkeys(cells))


def main(argv=None) -> int:
    from rooflab.config import schema_defaults
    from rooflab.shapes import label

    defaults = schema_defaults()["backends"]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", required=True, help="config key of the device (checked against the device present)")
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--shapes", nargs="*", help="batch x heads x seq x head_dim or batch x heads x kv_heads x seq_q "
        "x seq_k x head_dim (default: config/schema.yaml's backends.shapes)",
        default=[label(s) for s in defaults["shapes"]])
    ap.add_argument("--presets", nargs="*", default=defaults["presets"],
                    help="model cells of rooflab/shapes.ATTENTION_CELLS (default: the schema's backends.presets)")
    ap.add_argument("--causal", nargs="+", default=["true", "false"], choices=["true", "false"])
    ap.add_argument("--dtypes", nargs="+", default=["bfloat16"], choices=["bfloat16", "float16"])
    ap.add_argument("--timing", default="{}", help="the timing section as JSON (the DAG's; default the schema's)")
    ap.add_argument("--cache-dirs", default="{}", help="config cache_dirs as JSON (the sweep's compile caches)")
    args = ap.parse_args(argv)
    import json

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        cells = cells_of(args.shapes, args.presets)
    except ValueError as exc:
        ap.error(f"--shapes/--presets: {exc}")
    return run(args.gpu, cells, [c == "true" for c in args.causal], args.dtypes, json.loads(args.timing), args.out,
               json.loads(args.cache_dirs))


if __name__ == "__main__":
    sys.exit(main())
