"""Tune launch shapes and probe the timer on the GPU present, with the sweep's own timer (L2 flushed, stream held,
median). Prints, per kernel, dtype and N, the best variants with their fraction of the copy bandwidth measured in the
same run (or of cuBLAS); the CSV keeps every variant. The tables behind the defaults in kernels/*.py come from these
sections (docs/decisions.md; the CSVs of earlier calls are in data/tuning/). GPU only.

    python -m lab rows matmul --n 1024 4096 8192 --out tune.csv
    python -m lab --list
"""
import argparse
import textwrap

import pandas as pd

from lab import attention, elementwise, floor, inductor, launcher, longrows, matmul, rows, timeline, timer
from lab.common import DTYPES, Run, by_dtype, timed

DEFAULT_SECTIONS = ["gelu", "rows", "matmul", "launch"]

# Sections timed at every --n and --dtypes, in this order: (n, dtype name) -> [(kernel, bytes moved, {variant: fn})]
PER_SIZE_SECTIONS = {
    "gelu": lambda n, d: [("gelu", *elementwise.gelu_variants(n, DTYPES[d]))],
    "elementwise": by_dtype(elementwise.elementwise_variants),
    "compile": inductor.compile_variants,
    "rows": by_dtype(rows.row_variants),
    "lnconfirm": by_dtype(rows.lnconfirm_variants),
    "wbprefetch": by_dtype(rows.wbprefetch_variants),
    "onerow": elementwise.onerow_variants,
    "lnfull": by_dtype(rows.lnfull_variants),
    "rmsfull": by_dtype(rows.rmsfull_variants),
    "unmasked": by_dtype(rows.unmasked_variants),
    "readfloor": by_dtype(floor.readfloor_variants),
    "smallrows": by_dtype(rows.smallrows_variants),
}
# Probes that add their own rows to the Run: these two before the per-size sections, the rest after, in this order.
PROBES_FIRST = {"floor": floor.run_floor, "flush": timer.run_flush}
PROBES_LAST = {
    "matmul": matmul.run_matmul,
    "tf32": matmul.run_tf32,
    "intercept": floor.run_intercept,
    "placement": timer.run_placement,
    "drift": timer.run_drift,
    "instances": timer.run_instances,
    "launch": floor.run_launch,
    "launcher": launcher.run_launcher,
    "unaligned": rows.run_unaligned,
    "hostprof": floor.run_hostprof,
    "longrows": longrows.run_longrows,
    "longfwd": longrows.run_longfwd,
    "normbwd": longrows.run_normbwd,
    "longbwd": longrows.run_longbwd,
    "pdl": longrows.run_pdl,
    "splitrows": rows.run_splitrows,
    "alignedrows": rows.run_alignedrows,
    "alignedfwd": longrows.run_alignedfwd,
    "compileframes": inductor.run_compileframes,
    "attention": attention.run_attention,
    "attntiles": attention.run_attntiles,
    "attnws": attention.run_attnws,
    "attnbwd": attention.run_attnbwd,
    "timeline": timeline.run_timeline
}

HELP = {
    "gelu":
    "GeLU's BLOCK_SIZE x num_warps",
    "elementwise":
    "elements per program x num_warps of vecadd and GeLU, the fast and the IEEE-division GeLU, SAXPY's "
    "default",
    "compile":
    "our Triton against torch.compile, interleaved (with TORCHINDUCTOR_CACHE_DIR set, Inductor's kernels "
    "stay there to read)",
    "rows":
    "num_warps of softmax forward and backward, LayerNorm (and its tiled path) and RMSNorm, rows held or read "
    "again; rows per program x num_warps of row-sum; torch.compile beside",
    "lnconfirm":
    "LayerNorm's default against its launch before round 31 and without its register cap",
    "wbprefetch":
    "LayerNorm with its weights asked of the L2 by no, the first, the first wave's or every program",
    "onerow":
    "vecadd and SAXPY tiled from the program id against the 2-D split, beside the builtin and torch.compile",
    "lnfull":
    "LayerNorm's held rows without the column mask, by default and everywhere, against the masked kernel",
    "rmsfull":
    "RMSNorm's held and read-again rows with and without the column mask, Inductor's tiles of 2048, "
    "torch.compile",
    "unmasked":
    "row-sum, softmax and LayerNorm rows with and without their column mask beside the default; RMSNorm's "
    "default against its launch before round 34",
    "readfloor":
    "how fast anything reads the row-sum's bytes: the builtin, cuBLAS, a one-launch split row, torch.sum, "
    "the driver's and a Triton copy of the same bytes, Triton chunk sums of 4-32 KiB",
    "smallrows":
    "row-sum's rows per program x warps on short inputs beside the builtin and torch.compile",
    "floor":
    "what the timer reports for an empty event pair and one-block kernels (the fixed cost inside every cell), "
    "and a small cell under fixed hold lengths",
    "flush":
    "the same calls under each timer variant: writing or reading flush, stream held or not, warm L2",
    "matmul":
    "the pointer kernel and the TMA persistent kernel, each autotuned, against torch.relu(a @ b)",
    "tf32":
    "TF32 products: cuBLAS, ours autotuned, ours at fixed BLOCK_K 32 tiles on the pointer and TMA kernels",
    "intercept":
    "fixed cost and marginal rate of each row kernel and the copy over (R, 8192) inputs; one-wave times",
    "placement":
    "one cell's median on several input allocations, with and without timing.warm_translations",
    "drift":
    "one cell's batch medians over seconds, back to back and after idle gaps",
    "instances":
    "one cell timed again in one process, with the same or fresh inputs and timer",
    "launch":
    "host microseconds per call",
    "launcher":
    "host microseconds of one launch taken apart, in interleaved rounds: Triton's launcher given tensors "
    "or addresses, our cache's entry, a C++ launcher (with and without the output allocated in C++), "
    "torch's allocation and smallest ops",
    "hostprof":
    "Python-loop microseconds of ours and the builtin, fwd and fwd+bwd, for LayerNorm, RMSNorm and "
    "softmax at 128 x 4096 bf16, and cProfile's heaviest functions over ours' fwd+bwd",
    "timeline":
    "per-program global-timer stamps inside one call (bf16 8192^2; writes <out>_timeline.csv too)",
    "unaligned":
    "softmax over long rows no multiple of 16 bytes: one program a row, split, and 16-byte aligned tiles",
    "longrows":
    "LayerNorm and RMSNorm on rows of 8192-50257 columns, fwd (held in one block at 16 and 32 warps, other "
    "tiles) and fwd+bwd (the column-tiled backward at other tiles, rows held whole at 16 and 32 warps), "
    "beside the builtin and torch.compile",
    "longfwd":
    "longrows' forward variants alone",
    "normbwd":
    "the norms' held-row backward alone at square and llm shapes: programs a SM, warps, two rows at once, "
    "beside the fwd+bwd of ours, the builtin and torch.compile",
    "splitrows":
    "row-sum of few long rows: the split's two phases in one launch against two, one program a row and "
    "the builtin",
    "alignedrows":
    "row-sum of many long rows no multiple of 16 bytes: aligned tiles (tile, warps) against the split "
    "and the builtin",
    "alignedfwd":
    "the norms' forward on rows no multiple of 16 bytes: LayerNorm's 16-byte aligned tiles (tile, "
    "warps) and the split's aligned chunks against the default, the builtin and torch.compile",
    "compileframes":
    "torch.compile's fwd+bwd as one joint graph (forward and backward, which Inductor may fuse) and "
    "as a training step runs it (the sweep's cell: the forward compiled, the backward AOTAutograd's), "
    "beside ours and the builtin: the norms, softmax and attention at square and llm shapes",
    "attention":
    "FlashAttention-2's forward, causal and full, head dims 64 and 128 (--dtypes: the 16-bit ones): ours "
    "autotuned and at each of its tiles (TMA: also in program order) beside SDPA's cuDNN and flash "
    "backends",
    "attntiles":
    "attention's TMA kernel at every tile of the tutorial's Hopper space (64-128 x 32-128, 4 and 8 warps, "
    "2-4 stages)",
    "attnbwd":
    "attention's backward alone (bf16/fp16, causal, head dim 128, seq 4096 and 16384): the default, then "
    "each tile of the dK dV kernel and of the dQ kernel in turn (4 and 8 warps, 3-5 stages)",
    "attnws":
    "attention's TMA tiles with warp specialisation (tl.range(warp_specialize=True)); run on its own",
    "pdl":
    "the norms' fwd+bwd and backward alone with the held rows' backward and its reduction launched as "
    "programmatic dependents (launch_pdl) and without, interleaved, beside the builtin and torch.compile",
    "longbwd":
    "the norms' long-row backward alone (rows of 11008-333333 columns) in column tiles: the next row "
    "loaded ahead, tiles, beside the fwd+bwd of ours, the builtin and torch.compile",
}
KNOWN_SECTIONS = {*PER_SIZE_SECTIONS, *PROBES_FIRST, *PROBES_LAST}

# Printed before the per-kernel tables, and after them, in this order: section -> df -> text.
SUMMARIES_FIRST = {"flush": timer.flush_summary}
SUMMARIES_LAST = {
    "placement": timer.placement_summary,
    "drift": lambda df: "\n" + timer.drift_summary(df[df.kernel == "drift"]),
    "instances": timer.instances_summary,
    "intercept": lambda df: "\n" + floor.intercept_summary(df[df.kernel == "intercept"]),
    "timeline": timeline.timeline_summary,
    "floor": floor.floor_summary,
    "launch": floor.launch_summary,
    "hostprof": floor.hostprof_summary,
    "launcher": launcher.launcher_summary,
}
# Kernel names of the probes' rows: not variants of a kernel, so not in the per-kernel tables.
PROBE_KERNELS = [
    "launch", "launcher", "hostprof", "flush", "floor", "placement", "drift", "instance", "intercept", "timeline"
]


def listing() -> str:
    """Every section with what it times, in the order a call runs them."""
    width = max(map(len, HELP)) + 2
    return "\n".join(
        textwrap.fill(HELP[name], 110, initial_indent=f"{name:<{width}}", subsequent_indent=" " * width)
        for name in [*PROBES_FIRST, *PER_SIZE_SECTIONS, *PROBES_LAST])


def parse(argv=None):
    ap = argparse.ArgumentParser(prog="python -m lab", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sections", nargs="*", metavar="SECTION",
                    help=f"what to time (default: {' '.join(DEFAULT_SECTIONS)}); --list says what each is")
    ap.add_argument("--sections", dest="more_sections", nargs="+", default=[], metavar="SECTION",
                    help="the same, as scripts/tune.py took them (the commands recorded in data/tuning/README.md)")
    ap.add_argument("--list", action="store_true", help="list the sections and what each times, then exit")
    ap.add_argument("--n", type=int, nargs="+", default=[8192])
    ap.add_argument("--matmul-n", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--out", default="tune.csv")
    ap.add_argument(
        "--instances", type=int, default=1,
        help="fresh starts (a new warm-up and hold each) a variant's samples are pooled from: small cells "
        "draw an offset per start (docs/decisions.md, timing). The sweep uses 8 on a GPU, with 4 "
        "input placements each; a variant here keeps its one set of inputs. The placement, drift "
        "and instances probes choose their own starts")
    args = ap.parse_args(argv)
    args.sections = (args.sections + args.more_sections) or DEFAULT_SECTIONS
    unknown = set(args.sections) - KNOWN_SECTIONS
    if unknown and not args.list:
        ap.error(f"unknown section(s) {sorted(unknown)}; known: {sorted(KNOWN_SECTIONS)}")
    return args


def main(argv=None):
    args = parse(argv)
    if args.list:
        print(listing())
        return
    import torch

    from rooflab.timers import CudaEventTimer
    from rooflab.timing import TimingConfig, measure

    clock = CudaEventTimer(flush_l2=True)
    cfg = TimingConfig(warmup_ms=10, max_time_s=0.25 * args.instances**0.5, loop_ms=0, instances=args.instances)
    src = torch.randn(1 << 30, device="cuda")
    dst = torch.empty_like(src)
    copy_gbps = 2 * src.numel() * 4 / measure(lambda: dst.copy_(src), clock, cfg)["median_ms"] / 1e6  # noqa: F821
    del src, dst
    print(f"copy: {copy_gbps:.0f} GB/s", flush=True)
    run = Run(args, clock, cfg, copy_gbps)
    try:
        for section, probe in PROBES_FIRST.items():
            if section in args.sections:
                probe(run)
        for n in args.n:
            for dname in args.dtypes:
                for section, make in PER_SIZE_SECTIONS.items():
                    if section in args.sections:
                        for kernel, moved, variants in make(n, dname):
                            for name, fn in variants.items():
                                run.record(kernel, n, dname, name, timed(fn, clock, cfg), moved)
                print(f"done n={n} {dname}", flush=True)
                torch.cuda.empty_cache()
        for section, probe in PROBES_LAST.items():
            if section in args.sections:
                probe(run)
    except KeyboardInterrupt:  # a call's time limit (timeout -s INT): keep the rows timed so far
        print(f"interrupted: writing the {len(run.rows)} rows timed so far", flush=True)
    df = pd.DataFrame(run.rows)
    df.to_csv(args.out, index=False)
    print_summary(df, args.sections)


def print_summary(df, sections):
    """The probes' summaries around the per-kernel tables: the three fastest variants and the named ones (builtin,
    default, precise) with their GB/s, fraction of the copy, TFLOP/s and speed against the builtin."""
    pd.set_option("display.width", 200)
    for section, summary in SUMMARIES_FIRST.items():
        if section in sections:
            print(summary(df))
    for (kernel, n, dtype), g in df[~df.kernel.isin(PROBE_KERNELS)].groupby(["kernel", "n", "dtype"], sort=False):
        base = g[g.variant.str.startswith("builtin")]["median_us"].min()
        g = g.assign(vs_builtin=base / g["median_us"])
        cols = [c for c in ("variant", "median_us", "gbps", "of_copy", "tflops", "vs_builtin") if c in g]
        print(f"\n{kernel} N={n} {dtype}")
        g = g.dropna(subset=["median_us"]).sort_values("median_us")
        named = g.variant.str.match(r"builtin|triton \((default)\)|triton precise")
        keep = g.head(3).index.union(g[named].index)
        print(g.loc[g.index.isin(keep), cols].to_string(index=False, float_format="%.3f"))
        chosen = g[g.variant.str.startswith("chosen")]["variant"].tolist()
        if chosen:
            print("  " + "\n  ".join(chosen))
    for section, summary in SUMMARIES_LAST.items():
        if section in sections:
            print(summary(df))
