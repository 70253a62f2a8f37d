"""Bytes each implementation moves, measured: one call of every (kernel, impl, pass) at one size and dtype under
Nsight Compute, beside the minimum the kernel's byte model charges it (what the sweep's GB/s divide by).

    ncu --clock-control none --cache-control all --profile-from-start off --target-processes application-only \
        --csv --page raw --log-file ncu.csv \
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
        python -m experiments.traffic run --gpu h200 --size 8192 --dtype bfloat16 --manifest calls.json
    python -m experiments.traffic table --ncu ncu.csv --manifest calls.json --out traffic.csv

``run`` warms each call up (Triton's JIT, the autotuners, Inductor) with the profiler off, then profiles one call
between cudaProfilerStart and Stop, behind a marker kernel (torch.cuda._sleep's spin_kernel): ``table`` splits
ncu's rows at the markers and matches them, in order, to the calls of the manifest. Nsight Compute flushes the
caches before each kernel it profiles, so every kernel of a call reads its inputs from DRAM, as the lecture's
accounting of an unfused expression has it. What a kernel writes last can still sit in the L2 when it ends (on the
H200 about 27 MB of a 134 MB output: data/tuning/traffic_g2/), so the DRAM writes are a lower bound; the L2's own count of write requests
is no better (1.5x the output bytes there). GPU only (a machine where ncu can read the counters).
"""
import argparse
import io
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

MARKER = "spin_kernel"  # the kernel torch.cuda._sleep launches (ATen's Sleep.cu)
METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum")
IMPLS = ("naive", "builtin", "compile", "triton")  # the CUDA extensions (nvcc, ~45 s) are the sweep's, not this table's
WARMUP_CALLS = 3


def run(gpu: str, kernels: list[str], impls: list[str] | None, dtype: str, size: int, manifest: Path,
        cache_dirs: dict | None = None) -> int:
    from rooflab.device import check_device, prepare_environment

    # No pool of compile workers under ncu: with one, a run hung at torch.compile's first profiled call
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    prepare_environment(gpu, {"cache_dirs": cache_dirs or {}})  # the sweep's compile caches
    device, _ = check_device(gpu)
    if device != "cuda":
        print("traffic: Nsight Compute needs an NVIDIA GPU", file=sys.stderr)
        return 2
    import torch

    from experiments.profiles import cell_callable
    from rooflab.cell import Cell, skip_reason
    from rooflab.kernel import load_kernel

    calls = []
    manifest.write_text("[]")  # never an earlier run's calls beside this run's table
    for name in kernels:
        kernel = load_kernel(name)
        for pass_ in kernel.passes:
            for impl in impls or IMPLS:
                if skip_reason(kernel, Cell(name, impl, dtype, size, pass_), device, 0):
                    continue
                try:
                    fn = cell_callable(kernel, impl, dtype, size, pass_, device, 0)
                    for _ in range(WARMUP_CALLS):
                        fn()
                    torch.cuda.synchronize()
                except Exception as exc:  # a call that does not run is left out, and said
                    print(f"traffic: {name} {impl} {pass_}: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
                    continue
                error = ""
                torch.cuda.profiler.start()
                torch.cuda._sleep(1000)
                try:  # its marker is out: the call gets its manifest entry whatever happens
                    fn()
                    torch.cuda.synchronize()
                except Exception as exc:
                    error = f"{type(exc).__name__}: {str(exc)[:200]}"
                torch.cuda.profiler.stop()
                fell_back = getattr(fn, "fell_back", None)  # torch.compile that ran eager is not Inductor's traffic
                calls.append({
                    "kernel": name,
                    "impl": impl,
                    "dtype": dtype,
                    "size": size,
                    "pass": pass_,
                    "fell_back": bool(fell_back()) if callable(fell_back) else False,
                    "error": error,
                    "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds")
                })
                manifest.write_text(json.dumps(calls))  # after every call: a run cut short keeps what it profiled
                print(f"traffic: profiled {name} {impl} {dtype} {size} {pass_}", file=sys.stderr, flush=True)
                del fn
                torch.cuda.empty_cache()
    return 0


_UNITS = {
    "byte": 1,
    "Kbyte": 1e3,
    "Mbyte": 1e6,
    "Gbyte": 1e9,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "nsecond": 1e-3,
    "usecond": 1.0,
    "msecond": 1e3,
    "ns": 1e-3,
    "us": 1.0,
    "ms": 1e3
}


def read_ncu(text: str):
    """ncu's --csv --page raw table (lines before its header are not ncu's) as one row per profiled kernel: name
    and each metric in base units (bytes, microseconds)."""
    import pandas as pd

    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise SystemExit("no ncu table here (a header line starting with \"ID\"): written with --csv --page raw?")
    df = pd.read_csv(io.StringIO("\n".join(lines[start:])), dtype=str)
    units, df = df.iloc[0], df.iloc[1:]
    out = pd.DataFrame({"name": df["Kernel Name"].values})
    for metric in METRICS:
        if metric not in df:
            raise SystemExit(f"the ncu table has no {metric} column: pass --metrics {','.join(METRICS)}")
        unit = str(units[metric])
        if unit not in _UNITS:
            raise SystemExit(f"{metric} is in {unit!r}, not one of {sorted(_UNITS)}")
        out[metric] = df[metric].str.replace(",", "").astype(float).values * _UNITS[unit]
    return out


def table(ncu_rows, calls: list[dict], kernel_bytes=None):
    """One row per call: the kernels it launched (between its marker and the next), their DRAM reads and writes
    summed, the bytes moved (both) and the byte model's minimum."""
    import pandas as pd

    is_marker = ncu_rows["name"].str.contains(MARKER).values
    if int(is_marker.sum()) != len(calls):
        raise SystemExit(f"{int(is_marker.sum())} markers in the ncu table, {len(calls)} calls in the manifest")
    segment = is_marker.cumsum() - 1
    rows = []
    for i, call in enumerate(calls):
        k = ncu_rows[(segment == i) & ~is_marker]
        read, written = k["dram__bytes_read.sum"].sum(), k["dram__bytes_write.sum"].sum()
        model = kernel_bytes(call) if kernel_bytes else float("nan")
        rows.append({
            **call, "launches": len(k),
            "kernels": "; ".join(k["name"]),
            "dram_read_bytes": read,
            "dram_write_bytes": written,
            "moved_bytes": read + written,
            "model_bytes": model,
            "moved_over_model": (read + written) / model if model else float("nan"),
            "ncu_us": k["gpu__time_duration.sum"].sum()
        })
    return pd.DataFrame(rows)


def model_bytes(call: dict) -> float:
    """The minimum bytes the sweep charges the call (the kernel's byte model at the call's shape)."""
    from rooflab.cell import Cell, _kw, cell_shape
    from rooflab.kernel import load_kernel

    kernel = load_kernel(call["kernel"])
    cell = Cell(kernel.name, call["impl"], call["dtype"], call["size"], call["pass"])
    _, _, at = cell_shape(kernel, cell)
    return float(kernel.bytes(at, call["dtype"], **_kw(kernel, call["pass"])))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["run", "table"])
    ap.add_argument("--gpu", help="run: config key of the device (checked against the device present)")
    ap.add_argument("--kernels", nargs="+", default=None, help="run: default every kernel of the sweep")
    ap.add_argument("--impls", nargs="+", default=None, help=f"run: default {' '.join(IMPLS)}")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--size", type=int, default=8192, help="run: far past the L2, as the lecture's accounting is")
    ap.add_argument("--manifest", nargs="+", default=["calls.json"], help="the calls profiled, in order (table: one "
                    "per --ncu file)")
    ap.add_argument("--ncu", nargs="+", default=["ncu.csv"], help="table: ncu's --csv --page raw output(s)")
    ap.add_argument("--out", help="table: CSV to write")
    ap.add_argument("--cache-dirs", default="{}", help="run: config cache_dirs as JSON (the sweep's compile caches)")
    args = ap.parse_args(argv)
    if args.mode == "run":
        if not args.gpu:
            ap.error("run needs --gpu")
        from rooflab.kernel import kernel_names

        return run(args.gpu, args.kernels or kernel_names(), args.impls, args.dtype, args.size, Path(args.manifest[0]),
                   json.loads(args.cache_dirs))
    import pandas as pd

    if len(args.ncu) != len(args.manifest):
        ap.error("one --manifest per --ncu file")
    out = pd.concat([
        table(read_ncu(Path(n).read_text()), json.loads(Path(m).read_text()), model_bytes)
        for n, m in zip(args.ncu, args.manifest)
    ], ignore_index=True)
    if args.out:
        out.to_csv(args.out, index=False)
    print(out.drop(columns="kernels").to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
