"""FlashAttention-2's families on a GPU (bf16): ours (kernels/attention) beside SDPA's flash, memory-efficient and
cuDNN backends, forward and forward+backward, in GPU time (triton.testing.do_bench, the median: the L2 flushed, but
the host's work counted where it outlasts the GPU's), in CUDA-graph replay (launch and host work hidden) and in the
Python loop (wall time per call of back-to-back calls, launches included).

    python scripts/bench_attention_families.py --out results/attention_families.csv    # about 2 minutes, H100

Cells (batch, Hq, Hkv, Sq, Sk, D): causal prefill with 32 query heads on 32 and 8 K/V heads, D 64 and 128, 4096 and
8192 tokens (batch 4 and 1); head sizes 96 and 256; cross-attention (1024 queries on 8192 keys, full) and a chunk
of prefill on a cache (the same, causal bottom-right); few K/V heads (8 on 1 at head dim 256, 14 on 2 at 64), where
forward+backward also runs ours with each group in one dK dV program ("ours unsplit": before the group split). SDPA
gets grouped heads with enable_gqa=True and the bottom-right mask as experiments/backends.sdpa passes them; a
backend that refuses is a row with its reason. First, ours against float64 on small cells of each family (forward
and gradients; the max error is printed). A --budget in seconds skips what is left once spent. Prints a table:
each time in ms, and the best SDPA time over ours (above 1: ours faster) in each frame.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import sys
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BACKENDS = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION"}
PASSES = ("fwd", "fwd+bwd")
# in the order a --budget cut keeps them: the goals' cells (head size 128, 4096 tokens; few K/V heads) first
CELLS = [(4, 32, hkv, 4096, 4096, 128, True) for hkv in (32, 8)]
CELLS += [(1, 8, 1, 4096, 4096, 256, True), (1, 14, 2, 4096, 4096, 64, True)]  # few K/V heads: the group split
CELLS += [(1, 32, hkv, 8192, 8192, 128, True) for hkv in (32, 8)]
CELLS += [(1, 32, 8, 1024, 8192, 128, False), (1, 32, 8, 1024, 8192, 128, True)]
CELLS += [(1, 32, 8, 4096, 4096, d, True) for d in (96, 256)]
CELLS += [(b, 32, hkv, s, s, 64, True) for hkv in (32, 8) for b, s in ((4, 4096), (1, 8192))]
# (batch, Hq, Hkv, Sq, Sk, D, causal): grouped, multi-query, odd lengths, shorter and longer queries, head sizes
CHECKED = [(2, 8, 2, 77, 77, 64, True), (1, 8, 1, 100, 100, 128, False), (1, 4, 2, 37, 300, 128, True),
           (1, 4, 2, 300, 37, 64, True), (1, 4, 4, 65, 129, 80, False)]
CHECKED += [(1, 4, 2, 129, 129, d, True) for d in (16, 32, 96, 192, 256, 40, 72, 112, 160)]  # then sizes no list names
CHECKED_DV = [(1, 8, 2, 129, 129, 192, 128, True), (1, 8, 1, 100, 300, 192, 128, False)]  # V's head size apart
LOOP_CALLS = 10


def variants(causal: bool) -> dict:
    """name -> f(q, k, v) -> O: ours, then each SDPA backend forced."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from experiments.backends import sdpa
    from kernels.attention import attention_triton

    def forced(backend):

        def call(q, k, v):
            with sdpa_kernel(getattr(SDPBackend, backend)):
                return sdpa(q, k, v, causal)

        return call
    return {"ours": lambda q, k, v: attention_triton(q, k, v, causal=causal)} | \
        {name: forced(b) for name, b in BACKENDS.items()}


def unsplit():
    """Within: each group's query heads in one dK dV program (backward.DKDV_GROUP_FILL 0): ours before the split.
    Swapped once around a variant's timing (a new launch key, then kept launches as "ours" has); where the plan does
    not split (a grid of a wave or more), any difference from "ours" is the timing's spread."""
    from kernels.attention import backward

    return mock.patch.object(backward, "DKDV_GROUP_FILL", 0)


def with_grads(fn, inputs):
    """f() running the forward and the gradients of (q, k, v) for the fixed upstream gradient."""
    import torch

    leaves = [t.detach().requires_grad_(True) for t in inputs[:3]]

    def call():
        return torch.autograd.grad(fn(*leaves), leaves, inputs[3])

    return call


def check(torch, eb) -> float:
    """Ours against float64 on CHECKED (O, dQ, dK, dV; rows that see no key must be 0); the largest error."""
    worst = 0.0
    for *cell, causal in CHECKED + CHECKED_DV:
        inputs = eb.make_inputs(tuple(cell), torch.bfloat16, "cuda", seed=1)
        outs = (variants(causal)["ours"](*inputs[:3]), *with_grads(variants(causal)["ours"], inputs)())
        q, k, v = (t.detach().double().requires_grad_(True) for t in inputs[:3])
        first = max(0, cell[3] - cell[4]) if causal else 0  # rows before it see no key: O and dQ 0 there
        ref = eb.reference((q[:, :, first:], k, v), "fwd", causal)  # the same bottom-right mask on the rest
        ref.backward(inputs[3][:, :, first:].double())
        refs = (torch.nn.functional.pad(ref, (0, 0, first, 0)), q.grad, k.grad, v.grad)
        errs = [(o.double() - r).abs().max().item() for o, r in zip(outs, refs)]
        rel = [e / max(r.abs().max().item(), 1e-30) for e, r in zip(errs, refs)]
        worst = max(worst, *rel)
        print(f"check {'x'.join(map(str, cell))} {'causal' if causal else 'full'}: max |ours - float64| O "
              f"{errs[0]:.2e} dQ {errs[1]:.2e} dK {errs[2]:.2e} dV {errs[3]:.2e} (of max |ref|: {max(rel):.1e})")
    return worst


def loop_ms(torch, fn) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(LOOP_CALLS):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / LOOP_CALLS * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="CSV of every (cell, pass, variant)")
    ap.add_argument("--rep-ms", type=int, default=25, help="do_bench's repeat time per measurement")
    ap.add_argument("--budget", type=float, default=140.0, help="seconds; the cells left once spent are skipped")
    ap.add_argument("--no-check", action="store_true", help="skip the float64 checks (minutes of compiles, cold)")
    args = ap.parse_args(argv)
    import torch
    import triton.testing

    if not torch.cuda.is_available():
        print("bench_attention_families: needs an NVIDIA GPU", file=sys.stderr)
        return 2
    from experiments import backends as eb
    from kernels.attention.plan import math_mode

    start = time.time()
    if not args.no_check:
        worst = check(torch, eb)
        print(f"checked {len(CHECKED + CHECKED_DV)} cells in bf16 ({math_mode(torch.bfloat16)}): worst max error / "
              f"max |ref| {worst:.1e}")
    rows = []
    for *cell, causal in CELLS:
        cell = tuple(cell)
        base = dict(zip(("batch", "heads", "kv_heads", "seq_q", "seq_k", "head_dim"), cell), causal=causal,
                    dtype="bfloat16", device=torch.cuda.get_device_name())
        if time.time() - start > args.budget:
            rows += [{
                **base, "pass": p,
                "variant": "all",
                "status": "skipped",
                "error": "over --budget"
            } for p in PASSES]
            continue
        inputs = eb.make_inputs(cell, torch.bfloat16, "cuda", seed=0)
        for pass_ in PASSES:
            flops = eb.flops(cell, pass_, causal)
            more = {"ours unsplit": variants(causal)["ours"]} if pass_ == "fwd+bwd" else {}
            for name, fn in (variants(causal) | more).items():
                row = {**base, "pass": pass_, "variant": name}
                call = (lambda fn=fn, qkv=inputs[:3]: fn(*qkv)) if pass_ == "fwd" else with_grads(fn, inputs)
                try:
                    with unsplit() if name == "ours unsplit" else contextlib.nullcontext():
                        call()
                        ms = triton.testing.do_bench(call, warmup=5, rep=args.rep_ms, return_mode="median")
                        wall = loop_ms(torch, call)
                        graph = graph_ms(call)
                except Exception as exc:  # a backend that refuses the cell: its reason, not the end of the run
                    torch.cuda.empty_cache()
                    rows.append({**row, "status": "refused", "error": f"{type(exc).__name__}: {str(exc)[:160]}"})
                    continue
                rows.append({**row, "status": "ok", "gpu_ms": ms, "loop_ms": wall, "tflops": flops / ms / 1e9, **graph})
        del inputs
        torch.cuda.empty_cache()
        write_csv(rows, args.out)  # after every cell: a run cut short keeps what it timed
    write_csv(rows, args.out)
    print(table(rows))
    print(f"{len(rows)} rows in {time.time() - start:.0f} s -> {args.out}")
    return 0


def graph_ms(call) -> dict:
    """The call's CUDA-graph replay time (rooflab.timing: launch and host work hidden, the L2 not flushed), or why
    it could not be captured. do_bench's GPU time counts the host's work where it outlasts the GPU's (small cells)."""
    from rooflab.timing import cudagraph_median_ms

    try:
        return {"graph_ms": cudagraph_median_ms(call)}
    except Exception as exc:  # noqa: BLE001 (a capture a backend does not support: its reason)
        return {"graph_error": f"{type(exc).__name__}: {str(exc)[:120]}"}


def write_csv(rows, out) -> None:
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    fields = list(dict.fromkeys(f for r in rows for f in r))
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def table(rows) -> str:
    """One line per (cell, pass): each variant's GPU ms (-: refused or skipped), ours' loop ms and TFLOP/s, the
    best SDPA GPU time over ours, the same in CUDA-graph replay and the best SDPA loop time over ours'."""
    names = ("ours", "ours unsplit", *BACKENDS)
    lines = [
        f"{'B':>1} {'Hq':>2} {'Hkv':>3} {'Sq':>5} {'Sk':>5} {'D':>3} {'mask':>6} {'pass':>7} " +
        " ".join(f"{n:>9.9}" for n in names) + f" {'ours loop':>9} {'TFLOP/s':>7} {'best/ours':>9} "
        f"{'graph b/o':>9} {'loop b/o':>8}"
    ]
    keys = dict.fromkeys(
        (r["batch"], r["heads"], r["kv_heads"], r["seq_q"], r["seq_k"], r["head_dim"], r["causal"], r["pass"])
        for r in rows)
    for key in keys:
        mine = {
            r["variant"]: r
            for r in rows
            if (r["batch"], r["heads"], r["kv_heads"], r["seq_q"], r["seq_k"], r["head_dim"], r["causal"],
                r["pass"]) == key
        }
        ok = {n: r for n, r in mine.items() if r["status"] == "ok"}
        sdpa = [ok[n] for n in BACKENDS if n in ok]
        ours = ok.get("ours")
        ratio = f"{min(r['gpu_ms'] for r in sdpa) / ours['gpu_ms']:9.3f}" if ours and sdpa else f"{'-':>9}"
        loop = f"{min(r['loop_ms'] for r in sdpa) / ours['loop_ms']:8.3f}" if ours and sdpa else f"{'-':>8}"
        graphs = [r["graph_ms"] for r in sdpa if r.get("graph_ms")]
        graph = f"{min(graphs) / ours['graph_ms']:9.3f}" if ours and ours.get("graph_ms") and graphs else f"{'-':>9}"
        b, h, hkv, sq, sk, d, causal, pass_ = key
        lines.append(f"{b:>1} {h:>2} {hkv:>3} {sq:>5} {sk:>5} {d:>3} {'causal' if causal else 'full':>6} {pass_:>7} " +
                     " ".join(f"{ok[n]['gpu_ms']:9.3f}" if n in ok else f"{'-':>9}" for n in names) +
                     (f" {ours['loop_ms']:9.3f} {ours['tflops']:7.0f}" if ours else f" {'-':>9} {'-':>7}") +
                     f" {ratio} {graph} {loop}")
    refused = sorted({(r["variant"], r["error"][:100]) for r in rows if r["status"] != "ok"})
    return "\n".join(lines + [f"not run: {v}: {e}" for v, e in refused])


if __name__ == "__main__":
    sys.exit(main())
