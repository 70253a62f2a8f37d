"""Our FlashAttention-2 beside each backend of PyTorch's scaled_dot_product_attention, one row per backend.

    python -m experiments.backends --gpu h200 --out results/raw/h200/backends.parquet   # prints the table at the end
    python -m analysis.attention results/raw/h200/backends.parquet       # the same table from a run's rows

The sweep's `builtin` is SDPA as a user calls it (it picks a backend per call: cuDNN on the H200 with torch 2.11);
here each backend is forced (`torch.nn.attention.sdpa_kernel`): flash (FlashAttention-2's CUDA kernels), cuDNN and
memory-efficient (xFormers' CUTLASS kernels), beside ours (kernels/attention/__init__.py), at config backends.shapes (batch,
heads, seq, head_dim), causal and full, fwd and fwd+bwd. Each cell is checked against the float64 expression on its
first (batch, head) (heads are independent, so its gradients are the whole call's there) and timed with the sweep's
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
VARIANTS = {"ours": ("ours (Triton FA2)", None), "flash": ("SDPA flash", "FLASH_ATTENTION"),
            "cudnn": ("SDPA cuDNN", "CUDNN_ATTENTION"), "efficient": ("SDPA memory-efficient", "EFFICIENT_ATTENTION")}
PASSES = ("fwd", "fwd+bwd")


def attention_fn(variant: str, causal: bool):
    """(q, k, v) -> O for one variant; SDPA's with its backend forced for the call."""
    import torch.nn.functional as F

    from kernels.attention import attention_triton

    backend = VARIANTS[variant][1]
    if backend is None:
        return lambda q, k, v: attention_triton(q, k, v, causal=causal)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    chosen = getattr(SDPBackend, backend)

    def sdpa(q, k, v):
        with sdpa_kernel(chosen):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return sdpa


def first_head(inputs):
    """The inputs of the first (batch, head) alone: its outputs and gradients are the whole call's there."""
    return tuple(t[:1, :1].contiguous() for t in inputs)


def rel_err(out, ref) -> float:
    """The sweep's relative error (rooflab.cell.relative_error) of the first (batch, head) of every output."""
    import torch

    from rooflab.cell import relative_error

    outs = (out,) if torch.is_tensor(out) else tuple(out)
    return relative_error(tuple(o[:1, :1] for o in outs), ref)[0]


UNSUPPORTED = ("No available kernel", "No viable backend")  # SDPA's words on CUDA and on the CPU


def unsupported(exc: Exception) -> bool:
    """SDPA's answer when the forced backend has no kernel for the cell (a warning names why, the error not)."""
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

    from kernels import attention as at
    from rooflab import clocks
    from rooflab.io import write_parquet
    from rooflab.kernel import DEFAULT_TOLERANCE, differentiable, torch_dtype
    from rooflab.provenance import provenance
    from rooflab.shapes import label as shape_label
    from rooflab.timers import timer_for
    from rooflab.timing import TimingConfig, measure

    cfg = TimingConfig.from_config(timing)
    timer = timer_for(device, cfg)
    rows, todo = [], list(itertools.product(shapes, causals, dtypes))
    for i, (shape, causal, dtype) in enumerate(todo, 1):
        inputs = at.make_inputs(shape, torch_dtype(dtype), "cuda", seed=0)
        small = first_head(inputs)
        for pass_ in PASSES:
            ref = at.reference(small, pass_, causal)
            flops = at.flops(shape, pass_, causal)
            for variant, (label, _) in VARIANTS.items():
                base = {"variant": variant, "label": label, "batch": shape[0], "heads": shape[1], "seq": shape[2],
                        "head_dim": shape[3], "causal": causal, "dtype": dtype, "pass": pass_, "flops": flops,
                        "bytes": at.bytes_moved(shape, dtype, pass_), "tolerance": DEFAULT_TOLERANCE[dtype]}
                fn = differentiable(attention_fn(variant, causal))(inputs, pass_)
                try:
                    err = rel_err(fn(), ref)  # our first call autotunes here, outside the timing
                    if not err <= DEFAULT_TOLERANCE[dtype]:
                        rows.append({**base, "status": "mismatch", "rel_err": err})
                        log.warning("%s %s causal=%s %s: rel_err %.2e", label, shape, causal, pass_, err)
                        continue
                    stats = measure(fn, timer, cfg)
                except Exception as exc:
                    torch.cuda.empty_cache()  # an out-of-memory cell leaves the next its memory
                    status = "unsupported" if unsupported(exc) else "failed"
                    log.warning("%s %s causal=%s %s: %s: %s", label, shape, causal, pass_, status, str(exc)[:200])
                    rows.append({**base, "status": status, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
                    continue
                finally:
                    del fn
                rows.append({**base, "status": "ok", "rel_err": err, **stats,
                             "tflops": flops / (stats["median_ms"] * 1e-3) / 1e12,
                             "tflops_loop": flops / (stats["loop_ms"] * 1e-3) / 1e12, **clocks.prefixed("after")})
                log.info("[%d/%d] %-22s %-18s causal=%-5s %-7s %9.4f ms %7.1f TFLOP/s (loop %9.4f ms)", i, len(todo),
                         label, shape_label(shape), causal, pass_, stats["median_ms"], rows[-1]["tflops"],
                         stats["loop_ms"])
            del ref
        del inputs, small
        torch.cuda.empty_cache()
        # after every shape: a run cut short keeps the shapes it finished
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        write_parquet(pd.DataFrame(rows).assign(**{**provenance(), "gpu": gpu,
                                                   "device_name": torch.cuda.get_device_name()}), out)
    from analysis.attention import printed_table  # the table the paper prints, from the rows just written

    print(printed_table(pd.read_parquet(out)))
    return 0


def main(argv=None) -> int:
    from rooflab.config import schema_defaults
    from rooflab.shapes import ShapeError, as_shape, label

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", required=True, help="config key of the device (checked against the device present)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", nargs="+", help="batch x heads x seq x head_dim (default: config/schema.yaml's "
                   "backends.shapes)", default=[label(s) for s in schema_defaults()["backends"]["shapes"]])
    ap.add_argument("--causal", nargs="+", default=["true", "false"], choices=["true", "false"])
    ap.add_argument("--dtypes", nargs="+", default=["bfloat16"], choices=["bfloat16", "float16"])
    ap.add_argument("--timing", default="{}", help="the timing section as JSON (the DAG's; default the schema's)")
    ap.add_argument("--cache-dirs", default="{}", help="config cache_dirs as JSON (the sweep's compile caches)")
    args = ap.parse_args(argv)
    import json

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        shapes = [as_shape(s, "bhsd") for s in args.shapes]
    except ShapeError as exc:
        ap.error(f"--shapes: {exc}")
    return run(args.gpu, shapes, [c == "true" for c in args.causal], args.dtypes, json.loads(args.timing), args.out,
               json.loads(args.cache_dirs))


if __name__ == "__main__":
    sys.exit(main())
