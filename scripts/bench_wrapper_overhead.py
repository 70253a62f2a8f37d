"""What our Triton wrappers' Python costs on a hit of the launch cache, without a GPU (issue 23).

Each wrapper's call (the sweep's closure, as scripts/bench_host.py times it) runs on CPU tensors with every launch
kept raw on a no-op stand-in compiled kernel (kernels/_shared/fastlaunch.standing_in): the first call computes under the
interpreter, then TRITON_INTERPRET is unset and a Python loop times the hit path (key, lookup, output, the entry's
checks and the launcher call, which does nothing). "over empty" takes off an empty kernel's launch through the same
cache: what a wrapper adds to the least a cached launch costs. Every timed call must take the raw path (the stand-in
counts its calls and no cache may miss), else the row says why not. The least thread CPU time of --reps loops.

    python scripts/bench_wrapper_overhead.py [--kernels gelu,softmax] [--size 64] [--dtype bfloat16]
                                             [--calls 20000] [--reps 7] [--out overhead.csv] [--profile gelu]
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ["TRITON_INTERPRET"] = "1"  # the first call of each key computes on the CPU

import warnings  # noqa: E402

import torch  # noqa: E402
import triton  # noqa: E402

from kernels._shared import fastlaunch as fl  # noqa: E402
from scripts.bench_host import empty_launch  # noqa: E402  (the same empty kernel as the GPU benchmark)
from rooflab.kernel import load_kernel, torch_dtype  # noqa: E402

KERNELS = ("vecadd", "saxpy", "gelu", "softmax", "layernorm", "rmsnorm", "rowsum", "matmul", "attention")
SLOW_CALL_S = 20e-3  # a call slower than this launched something outside the caches (the interpreter ran)


class StandIn:
    """A compiled kernel whose launcher does nothing but count its calls."""

    function, packed_metadata = 0, None

    def __init__(self):
        self.calls = 0

    def run(self, *args):
        self.calls += 1


def per_call_us(fn, calls: int, reps: int) -> float:
    """The least, over ``reps`` loops, of the thread's CPU time per call (a shared machine's other load counts less
    than in wall time)."""
    best = float("inf")
    for _ in range(reps):
        t0 = time.thread_time()
        for _ in range(calls):
            fn()
        best = min(best, time.thread_time() - t0)
    return best / calls * 1e6


def hot_path_ready(fn, stand_in: StandIn) -> str | None:
    """None where a call of ``fn`` now takes only kept raw launches (at least one), else why not."""
    fn()  # the first call of each key: computed, kept
    misses, launched = fl.total_misses(), stand_in.calls
    saved = os.environ.pop("TRITON_INTERPRET")
    try:
        t0 = time.perf_counter()
        fn()
        slow = time.perf_counter() - t0 > SLOW_CALL_S
    except Exception as exc:  # noqa: BLE001  a miss outside the interpreter: the wrapper's checks refuse CPU tensors
        return f"a call missed: {type(exc).__name__}: {exc}"
    finally:
        os.environ["TRITON_INTERPRET"] = saved
    if fl.total_misses() != misses or stand_in.calls == launched:
        return "a call missed the cache"
    return "a launch outside the caches" if slow else None


def profile(fn, calls: int) -> int:
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.runcall(lambda: [fn() for _ in range(calls)])
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--size", type=int, default=64, help="square size (small: CPU allocation stays cheap)")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", default="", help="a CSV of the rows")
    ap.add_argument("--profile", default="",
                    help="cProfile one kernel's loop (its last pass: fwd+bwd where it has one) "
                    "instead")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    warnings.filterwarnings("ignore", category=RuntimeWarning)  # the stand-in leaves outputs unwritten: NaNs
    stand_in, rows, timed = StandIn(), [], {}
    with fl.standing_in(stand_in):
        x = torch.zeros(1)
        timed["empty"] = lambda: empty_launch(x)
        hot_path_ready(timed["empty"], stand_in)
        for name in (args.profile or args.kernels).split(","):
            kernel = load_kernel(name)
            for pass_ in kernel.passes[-1:] if args.profile else kernel.passes:
                kw = {"pass_": pass_} if len(kernel.passes) > 1 else {}
                inputs = kernel.make_inputs(args.size, torch_dtype(args.dtype), "cpu", 0)
                fn = kernel.impls["triton"](inputs, **kw)
                why_not = hot_path_ready(fn, stand_in)
                rows.append({"kernel": name, "pass": pass_, "us": float("nan"), "note": why_not or ""})
                if why_not is None:
                    timed[len(rows) - 1] = fn
        saved = os.environ.pop("TRITON_INTERPRET")
        try:
            if args.profile:
                return profile(timed[0], args.calls)
            best = {k: float("inf") for k in timed}
            for _ in range(args.reps):  # round-robin: the machine's other load falls on every row alike
                for k, fn in timed.items():
                    best[k] = min(best[k], per_call_us(fn, args.calls, 1))
        finally:
            os.environ["TRITON_INTERPRET"] = saved
    empty = best.pop("empty")
    for i, us in best.items():
        rows[i]["us"] = us
    for r in rows:
        r["over_empty"] = r["us"] - empty
    print(f"torch {torch.__version__}  triton {triton.__version__}  {args.size}x{args.size} {args.dtype}, "
          f"min of {args.reps} x {args.calls} calls, us per call\n")
    print(f"{'empty launch (cache)':<26}{empty:>8.2f}")
    for r in rows:
        print(f"{r['kernel'] + ' ' + r['pass']:<26}{r['us']:>8.2f}  over empty {r['over_empty']:>6.2f}  {r['note']}")
    if args.out:
        with open(args.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["kernel", "pass", "us", "over_empty", "note"])
            w.writeheader()
            w.writerows([{"kernel": "empty", "pass": "", "us": empty, "over_empty": 0.0, "note": ""}] + rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
