"""What one call of our Triton wrappers costs the host, beside torch's and an empty Triton launch (issue 23).

Per kernel, pass, dtype and shape, five frames, each per call, in microseconds:
- GPU: the device time of back-to-back calls, their launches queued behind a spin kernel (torch.cuda._sleep) so no
  host gap enters; L2 warm (the sweep's GPU time flushes it: at medium sizes read the ratio, not the value);
- loop: a Python loop of calls, synchronised at its end: what the sweep's loop_ms measures, max(host, GPU);
- host: the time to issue one call while the GPU is still spinning (nothing waits on the device);
- over empty: our host time less an empty @triton.jit kernel's launched through the same cache;
- graph: a Python loop of CUDA-graph replays of one captured call (ours and the builtin's): the frame of a user who
  captures the call. (The pieces a call's host time is made of: python -m lab launcher hostprof.)
Loop and host times interleave ours, the builtin and the naive expression in ROUNDS rounds and take each one's median:
one host's load drifts by tens of percent within a minute.
Ours runs twice: through the launch cache (kernels/_shared/fastlaunch.py, "fast") and through Triton's dispatch as before it
("plain", under _fastlaunch.disabled()). "best" is the faster of the builtin and the naive PyTorch expression. The
goal (issue 23), against the builtin: ours / builtin loop time <= 1.1 where the builtin's GPU time is >= 10 us, else
ours' loop time no higher than the builtin's.
"fast" says every timed call hit a kept raw launch (no first call, no fallback); "same" that the fast and plain
outputs are bitwise equal and "ok" that ours matches the builtin within the dtype's tolerance.

    python scripts/bench_host.py [--out host.csv] [--kernels gelu,softmax] [--dtypes bfloat16,float32]
                                 [--sizes 256,2048] [--preset llm]

The square family by default (every kernel at --sizes; matmul at 256, 1024 and 4096, the last on its TMA path);
--preset names a shape preset of rooflab/shapes.py instead. A CUDA GPU with torch and triton; about a minute on the
H200 (matmul's autotuning is most of it when Triton's cache is cold).
"""
from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
import triton  # noqa: E402

from kernels._shared import fastlaunch as fl  # noqa: E402
from rooflab.kernel import load_kernel, math_mode, torch_dtype  # noqa: E402

KERNELS = ("vecadd", "saxpy", "gelu", "softmax", "layernorm", "rmsnorm", "rowsum", "matmul")
SIZES = (256, 2048)
MATMUL_SIZES = (256, 1024, 4096)  # 4096^3 >= TMA_MIN_MNK: the TMA path
TOLERANCE = {"float32": 1e-3, "tf32": 5e-3, "bfloat16": 3e-2, "float16": 5e-3}  # ours vs the builtin, relative norm
GOAL_RATIO, GOAL_MIN_GPU_US = 1.1, 10.0
ROUNDS = 5  # interleaved rounds of ours, the builtin and the naive expression
CYCLES_PER_US = 2000  # torch.cuda._sleep spins for clock cycles: ~2 GHz (H200 boost 1.98 GHz)


@triton.jit
def _empty_kernel(x_ptr):
    pass


_EMPTY = fl.LaunchCache("empty")


def empty_launch(x: torch.Tensor) -> None:
    """The least a wrapper can cost: an empty kernel through the launch cache (a key, a lookup, the launch)."""
    key = fl.spec(x)
    launch = _EMPTY.get(key)
    if launch is not None:
        launch(x)
    else:
        _EMPTY.launch(key, _empty_kernel, (1, ), (x, ), n_head=1)


def loop_us(fn, min_s: float = 0.01, reps: int = 3) -> float:
    """Median time per call of a Python loop of calls, synchronised at its end."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    n = max(5, min(5000, int(min_s / max((time.perf_counter() - t0) / 5, 1e-7))))
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / n)
    return statistics.median(times) * 1e6


def host_and_gpu_us(fn, per_call_us: float, reps: int = 3) -> tuple[float, float]:
    """(host us to issue one call, GPU us of one call): calls issued while a spin kernel holds the stream, so the
    host never waits on the device and the device never waits on the host; the spin is lengthened until the
    start event is still pending when the last call has been issued (GPU NaN where it never was). At most 40 calls:
    a naive expression launches several kernels a call, and a full launch queue would make the host wait."""
    calls = max(5, min(40, int(10_000 / max(per_call_us, 1.0))))
    hosts, gpus = [], []
    spin_us = 2 * calls * per_call_us + 200
    for _ in range(reps + 6):
        if len(gpus) == reps:
            break
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        torch.cuda._sleep(int(spin_us * CYCLES_PER_US))
        start.record()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        host = time.perf_counter() - t0
        covered = not start.query()  # the device had not reached the first call when the host was done
        end.record()
        torch.cuda.synchronize()
        hosts.append(host / calls * 1e6)
        if not covered:
            spin_us *= 2
            continue
        gpus.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(hosts), statistics.median(gpus) if gpus else float("nan")


def graph_loop_us(fn) -> float:
    """A Python loop of CUDA-graph replays of one call (captured after warm-up on a side stream, as
    torch.cuda.graphs asks): what a user who captures the call pays per replay. NaN where the call cannot be
    captured."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
    except Exception as exc:  # noqa: BLE001  a call that cannot be captured has no graph frame
        print(f"  graph capture failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return float("nan")
    loop = loop_us(graph.replay)
    del graph
    return loop


def _median(values: list) -> float:
    """The median of the values that are numbers (NaN where none is)."""
    numbers = [v for v in values if v == v]
    return statistics.median(numbers) if numbers else float("nan")


def _least(*values: float) -> float:
    """The least of the values that are numbers (a GPU time is NaN where its spin never covered the host)."""
    return min((v for v in values if v == v), default=float("nan"))


def relative_error(out, ref) -> float:
    out, ref = out.double(), ref.double()
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


def _parts(out) -> tuple:
    """An implementation's output as a tuple of tensors (a fwd+bwd pass returns its gradients as a tuple)."""
    return tuple(out) if isinstance(out, (tuple, list)) else (out, )


def measure(kernel, pass_: str, shape, dtype: str) -> dict:
    kw = {"pass_": pass_} if len(kernel.passes) > 1 else {}
    inputs = kernel.make_inputs(shape, torch_dtype(dtype), "cuda", 0)
    row = {"kernel": kernel.name, "pass": pass_, "dtype": dtype, "shape": "x".join(map(str, kernel.shape(shape)))}
    with math_mode(dtype):
        ours, builtin, naive = (kernel.impls[impl](inputs, **kw) for impl in ("triton", "builtin", "naive"))
        with fl.disabled():  # Triton's own dispatch, as before the cache
            plain_out = ours()  # compiles (and autotunes) once, for both
            row["loop_plain"] = loop_us(ours)
            row["host_plain"], _ = host_and_gpu_us(ours, row["loop_plain"])
        fast_out = ours()  # the first call of the key: kept
        misses = fl.total_misses()
        timed = {"ours": ours, "builtin": builtin, "naive": naive}
        for name, fn in timed.items():
            fn()
        samples = {f"{frame}_{name}": [] for name in timed for frame in ("loop", "host", "gpu")}
        for _ in range(ROUNDS):
            for name, fn in timed.items():
                loop = loop_us(fn, reps=1)
                host, gpu = host_and_gpu_us(fn, loop, reps=1)
                for frame, value in (("loop", loop), ("host", host), ("gpu", gpu)):
                    samples[f"{frame}_{name}"].append(value)
        row.update({k: _median(v) for k, v in samples.items()})
        row["fast"] = fl.total_misses() == misses and fl.raw_launch_reason() is None and fl.hooks_idle()
        row["graph_ours"], row["graph_builtin"] = graph_loop_us(ours), graph_loop_us(builtin)
        builtin_out = builtin()
    row["same"] = all(torch.equal(f, p) for f, p in zip(_parts(fast_out), _parts(plain_out), strict=True))
    row["ok"] = max(relative_error(f, b) for f, b in zip(_parts(fast_out), _parts(builtin_out), strict=True)) \
        <= TOLERANCE[dtype]
    best = "builtin" if row["loop_builtin"] <= row["loop_naive"] else "naive"
    row["best"] = best
    row["gpu_ratio"] = row["gpu_ours"] / _least(row["gpu_builtin"], row["gpu_naive"])
    row["loop_ratio"] = row["loop_ours"] / row[f"loop_{best}"]
    long_enough = row["gpu_builtin"] >= GOAL_MIN_GPU_US
    row["goal"] = row["loop_ours"] / row["loop_builtin"] <= (GOAL_RATIO if long_enough else 1.0)
    return row


def empty_rows() -> list[dict]:
    """The floor: an empty kernel through Triton's dispatch and through the cache, and torch's smallest op."""
    x, y = torch.zeros(1, device="cuda"), torch.zeros(1, device="cuda")
    rows = []
    for name, fn in (("empty triton (plain)", lambda: _empty_kernel[(1, )]
                      (x)), ("empty triton (fast)", lambda: empty_launch(x)), ("torch.add, 1 element",
                                                                               lambda: torch.add(x, y))):
        fn()
        loop = loop_us(fn)
        host, gpu = host_and_gpu_us(fn, loop)
        rows.append({"kernel": name, "loop": loop, "host": host, "gpu": gpu})
    return rows


def shapes_of(kernel, args) -> list:
    if args.preset and args.preset != "square":
        from rooflab.shapes import preset_shapes

        return preset_shapes(args.preset, kernel.family)
    if args.sizes:
        return [int(s) for s in args.sizes.split(",")]
    return list(MATMUL_SIZES if kernel.name == "matmul" else SIZES)


COLUMNS = [
    "kernel", "pass", "dtype", "shape", "gpu_ours", "gpu_builtin", "gpu_naive", "loop_ours", "loop_plain",
    "loop_builtin", "loop_naive", "host_ours", "host_plain", "host_builtin", "host_naive", "graph_ours",
    "graph_builtin", "over_empty", "best", "gpu_ratio", "loop_ratio", "goal", "fast", "same", "ok"
]


def print_table(rows: list[dict], floor: list[dict]) -> None:
    head = (f"{'kernel':<10}{'pass':<8}{'dtype':<9}{'shape':>15} | {'GPU us: ours  best':>18} | "
            f"{'loop us: fast  plain   best':>27} | {'host us: fast  plain  best  -empty':>34} | "
            f"{'graph us: ours builtin':>22} | {'ours/best: GPU loop':>19}  goal fast same ok")
    print(head)
    print("-" * len(head))
    yes = {True: "yes ", False: "NO  "}
    for r in rows:
        best = r["best"]
        print(f"{r['kernel']:<10}{r['pass']:<8}{r['dtype']:<9}{r['shape']:>15} | "
              f"{r['gpu_ours']:>10.1f}{_least(r['gpu_builtin'], r['gpu_naive']):>8.1f} | "
              f"{r['loop_ours']:>14.1f}{r['loop_plain']:>7.1f}{r['loop_' + best]:>7.1f} | "
              f"{r['host_ours']:>13.1f}{r['host_plain']:>7.1f}{r['host_' + best]:>6.1f}{r['over_empty']:>8.1f} | "
              f"{r['graph_ours']:>14.1f}{r['graph_builtin']:>8.1f} | "
              f"{r['gpu_ratio']:>14.2f}{r['loop_ratio']:>5.2f}  {'met ' if r['goal'] else 'MISS'} "
              f"{yes[r['fast']]} {yes[r['same']]}{yes[r['ok']].strip()}")
    print()
    for f in floor:
        print(f"{f['kernel']:<40} loop {f['loop']:6.1f} us   host {f['host']:6.1f} us   GPU {f['gpu']:6.1f} us")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench_host.csv", help="CSV of every number (default: %(default)s)")
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--dtypes", default="bfloat16")
    ap.add_argument("--sizes", default="", help=f"square sizes for every kernel (default {SIZES}, matmul "
                    f"{MATMUL_SIZES})")
    ap.add_argument("--preset", default="square", help="a shape preset of rooflab/shapes.py in place of --sizes")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_host.py needs a CUDA GPU (torch sees none)", file=sys.stderr)
        return 2
    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}  "
          f"raw launch: {fl.raw_launch_reason() or 'yes'}\n")
    t0 = time.perf_counter()
    floor = empty_rows()
    empty_host = next(f["host"] for f in floor if f["kernel"] == "empty triton (fast)")
    rows = []
    for name in args.kernels.split(","):
        kernel = load_kernel(name)
        for pass_ in kernel.passes:
            for dtype in (d for d in args.dtypes.split(",") if d in kernel.dtypes):
                for shape in shapes_of(kernel, args):
                    try:
                        row = measure(kernel, pass_, shape, dtype)
                    except Exception as exc:  # noqa: BLE001  one cell must not cost the table
                        print(f"{name} {pass_} {dtype} {shape}: {type(exc).__name__}: {exc}", file=sys.stderr)
                        continue
                    row["over_empty"] = row["host_ours"] - empty_host
                    rows.append(row)
                    torch.cuda.empty_cache()
    print_table(rows, floor)
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS + ["loop", "host", "gpu"], extrasaction="ignore")
        w.writeheader()
        w.writerows(rows + floor)
    met = sum(r["goal"] for r in rows)
    print(f"\ngoal met in {met} of {len(rows)} cells; {sum(r['fast'] for r in rows)} on the fast path; "
          f"{time.perf_counter() - t0:.0f} s; CSV: {args.out}")
    return 0 if all(r["same"] and r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
