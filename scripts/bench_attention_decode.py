"""Decode attention on a GPU: our split-KV kernel (kernels/attention/decode.py) beside every SDPA backend that runs
the cell, bf16, GPU time by triton.testing.do_bench (the median of its repeats, the L2 cleared before each).

    python scripts/bench_attention_decode.py --out results/decode_bench.csv     # about 1-2 minutes on an H100

Cells: batch 1 and 8, 32 query heads on 8 and 32 K/V heads of 128, 1 and 4 query rows (causal, bottom-right) against
1k-128k keys; a cell whose K/V (or the math backend's repeated heads and scores) would not fit the free memory is
skipped. SDPA gets grouped heads with enable_gqa=True (experiments/backends.sdpa); a backend that refuses is a row
with its reason. Ours is first checked against float64 on two cells (the max error is printed). Prints a table:
each time in microseconds and the best SDPA time over ours (above 1: ours faster). --tiles adds ours with other
launch choices (head size 128's key tile and the programs per SM decode_plan aims at), to retune them;
--flip-rounding adds ours with the split count rounded the other way (WHOLE_WAVES); --fa2 adds our
FlashAttention-2 forward on the same cells (what attention_triton ran there before it sent them to decode).
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import sys
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.bench_attention_families import write_csv  # noqa: E402

BATCHES, HEADS, KV_HEADS, HEAD_DIM = (1, 8), 32, (8, 32), 128
SEQ_Q, SEQ_K = (1, 4), (1024, 8192, 32768, 131072)
SDPA = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION", "math": "MATH"}
MATH_MAX_KEYS = 8192  # the math backend materialises repeated K/V and the scores: small cells only
CHECKED = ((1, 32, 8, 4, 8192, 128), (8, 32, 32, 1, 1024, 128))


def forced(backend: str):
    import torch.nn.functional  # noqa: F401  (sdpa_kernel needs it loaded)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from experiments.backends import sdpa

    chosen = getattr(SDPBackend, backend)

    def call(q, k, v):
        with sdpa_kernel(chosen):
            return sdpa(q, k, v, True)

    return call


def retuned(spec: str):
    """A context in which KEY_TILES[128] is (BLOCK_N, warps, stages, programs a SM) for every call, swapped in once
    (a new launch key, then kept launches as the default's), restored on the way out."""
    from kernels.attention import decode as dc

    tile = tuple(int(x) for x in spec.split(","))
    return lambda: mock.patch.object(dc, "KEY_TILES", {**dc.KEY_TILES, 128: tile})


FLIPPED = "ours[rounding flipped]"


def flipped_rounding():
    """decode.WHOLE_WAVES flipped (a swap: a new launch key), restored on the way out."""
    from kernels.attention import decode as dc

    return mock.patch.object(dc, "WHOLE_WAVES", not dc.WHOLE_WAVES)


def check(torch, eb, decode_attention) -> None:
    """Ours against float64 on the first K/V head's group of each CHECKED cell."""
    for cell in CHECKED:
        inputs = eb.make_inputs(cell, torch.bfloat16, "cuda", seed=0)
        out = decode_attention(*inputs[:3], causal=True)
        ref = eb.reference(eb.first_head(inputs), "fwd", True)
        err = (out[:1, :ref.shape[1]].double() - ref).abs().max().item()
        print(f"check {'x'.join(map(str, cell))}: max |ours - float64| = {err:.3e} (bf16 output: ~4e-3 is rounding)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="CSV of every (cell, variant)")
    ap.add_argument("--rep-ms", type=int, default=40, help="do_bench's repeat time per measurement")
    ap.add_argument("--tiles", nargs="*", default=[], metavar="BLOCK_N,WARPS,STAGES,PER_SM",
                    help="ours again with these launch choices at head size 128 (e.g. 128,8,2,2 64,4,4,4)")
    ap.add_argument("--flip-rounding", action="store_true",
                    help="ours again with the split count rounded the other way (decode.WHOLE_WAVES flipped)")
    ap.add_argument("--fa2", action="store_true", help="our FlashAttention-2 forward on the same cells too")
    args = ap.parse_args(argv)
    import torch
    import triton.testing

    if not torch.cuda.is_available():
        print("bench_attention_decode: needs an NVIDIA GPU", file=sys.stderr)
        return 2
    from experiments import backends as eb
    from kernels.attention.decode import decode_attention, decode_plan
    from rooflab.triton_utils import multiprocessor_count

    start = time.time()
    check(torch, eb, decode_attention)
    sm = multiprocessor_count(torch.device("cuda"))
    from kernels._shared import fastlaunch

    ours = lambda q, k, v: decode_attention(q, k, v, causal=True)  # noqa: E731
    variants = {"ours": ours, "ours dispatched": ours}  # the latter timed inside fastlaunch.disabled(): no kept launch
    variants |= {f"ours[{t}]": variants["ours"] for t in args.tiles}
    contexts = {f"ours[{t}]": retuned(t) for t in args.tiles}  # a variant timed inside its swapped tables
    if args.flip_rounding:
        variants[FLIPPED], contexts[FLIPPED] = ours, flipped_rounding
    contexts["ours dispatched"] = fastlaunch.disabled  # every call through checks, plan and Triton's dispatch
    if args.fa2:
        from kernels.attention import attention_forward
        variants["ours FA2"] = lambda q, k, v: attention_forward(q, k, v, True, q.shape[-1]**-0.5)[0]
    variants |= {name: forced(backend) for name, backend in SDPA.items()}
    rows = []
    for batch, kv_heads, seq_q, seq_k in itertools.product(BATCHES, KV_HEADS, SEQ_Q, SEQ_K):
        cell = (batch, HEADS, kv_heads, seq_q, seq_k, HEAD_DIM)
        kv_bytes = 2 * batch * kv_heads * seq_k * HEAD_DIM * 2
        free = torch.cuda.mem_get_info()[0]
        base = dict(zip(("batch", "heads", "kv_heads", "seq_q", "seq_k", "head_dim"), cell), dtype="bfloat16",
                    causal=True, device=torch.cuda.get_device_name(), bytes=kv_bytes)
        if 1.2 * kv_bytes > free:
            rows.append({**base, "variant": "all", "status": "skipped", "error": f"K/V {kv_bytes / 1e9:.1f} GB"})
            continue
        qkv = eb.make_inputs(cell, torch.bfloat16, "cuda", seed=0)[:3]
        ref = None
        for name, fn in variants.items():
            row = {**base, "variant": name}
            if name == "math" and (seq_k > MATH_MAX_KEYS or 4 * kv_bytes * HEADS // kv_heads > free):
                rows.append({**row, "status": "skipped", "error": f"math at {seq_k} keys: too large"})
                continue
            if name in ("ours", FLIPPED):
                with contexts.get(name, contextlib.nullcontext)():
                    row["splits"] = decode_plan(batch, kv_heads, seq_k, sm, HEADS // kv_heads * seq_q, HEAD_DIM,
                                                torch.bfloat16)["splits"]
            try:
                with contexts.get(name, contextlib.nullcontext)():
                    out = fn(*qkv)
                    ref = out.float() if ref is None else ref  # ours first: every backend is compared with it
                    diff = (out.float() - ref).abs().max().item()
                    ms = triton.testing.do_bench(lambda fn=fn, qkv=qkv: fn(*qkv), warmup=10, rep=args.rep_ms,
                                                 return_mode="median")
            except Exception as exc:  # a backend that refuses the cell: its reason, not the end of the run
                torch.cuda.empty_cache()
                rows.append({**row, "status": "refused", "error": f"{type(exc).__name__}: {str(exc)[:160]}"})
                continue
            rows.append({
                **row, "status": "ok",
                "us": ms * 1e3,
                "gbps": kv_bytes / (ms * 1e-3) / 1e9,
                "max_diff_vs_ours": diff
            })
        del qkv, ref
        torch.cuda.empty_cache()
        write_csv(rows, args.out)  # after every cell: a run cut short keeps what it timed
    print(table(rows, list(variants)))
    print(f"{len(rows)} rows in {time.time() - start:.0f} s -> {args.out}")
    return 0


def table(rows, names=("ours", *SDPA)) -> str:
    """One line per cell: each variant's time in us (-: refused or skipped), ours' splits and GB/s of K/V, the best
    SDPA backend over ours."""
    lines = [
        f"{'B':>2} {'Hkv':>3} {'Sq':>2} {'Sk':>6} {'splits':>6} " + " ".join(f"{n:>9.9}" for n in names) +
        f" {'ours GB/s':>9} {'best/ours':>9}"
    ]
    cells = dict.fromkeys((r["batch"], r["kv_heads"], r["seq_q"], r["seq_k"]) for r in rows)
    for b, hkv, sq, sk in cells:
        mine = {
            r["variant"]: r
            for r in rows
            if (r["batch"], r["kv_heads"], r["seq_q"], r["seq_k"]) == (b, hkv, sq, sk)
        }
        us = {n: mine[n]["us"] for n in names if n in mine and mine[n]["status"] == "ok"}
        sdpa = [us[n] for n in SDPA if n in us]
        ours = us.get("ours")
        ratio = f"{min(sdpa) / ours:9.3f}" if ours and sdpa else f"{'-':>9}"
        splits = mine.get("ours", {}).get("splits", "-")
        gbps = f"{mine['ours']['gbps']:9.0f}" if ours else f"{'-':>9}"
        lines.append(f"{b:>2} {hkv:>3} {sq:>2} {sk:>6} {splits:>6} " +
                     " ".join(f"{us[n]:9.1f}" if n in us else f"{'-':>9}" for n in names) + f" {gbps} {ratio}")
    refused = sorted({(r["variant"], r["error"][:90]) for r in rows if r["status"] == "refused"})
    return "\n".join(lines + [f"refused: {v}: {e}" for v, e in refused])


if __name__ == "__main__":
    sys.exit(main())
