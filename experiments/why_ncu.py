"""What differs inside the kernels, measured: Nsight Compute on one call of each implementation of a list of cells
(the equal-bytes gaps and our losses), one row per GPU kernel each call launched, with its duration, achieved and
theoretical occupancy and what limits it, registers, shared memory, grid, block, waves, DRAM bytes and throughput
against peak, SM throughput, the top warp stall reasons and the instruction mix (FFMA, tensor-core HMMA/HGMMA, LDG,
STG, LDGSTS, TMA loads). Facts read by rooflab/ncu.py; the paper's sentences are analysis/why_ncu.py's.

    python -m experiments.why_ncu profile --gpu h200 --out results/raw/h200/why_ncu.parquet --raw-dir DIR

``profile`` runs ncu (--clock-control none: the GPU's own clocks, as in the sweep; caches flushed before each kernel,
ncu's default) on ``run``, which warms each call up (Triton's JIT, the autotuners) with the profiler off, then
profiles one call between cudaProfilerStart and Stop behind a marker kernel, as experiments/traffic.py does;
``table`` splits ncu's raw page at the markers and matches the kernels, in order, to the calls of the manifest. The
report (.ncu-rep), its raw CSV and the manifest stay in --raw-dir. GPU only; scripts/why_ncu.py is the same without
snakemake.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from experiments.traffic import MARKER

REPO = Path(__file__).resolve().parent.parent

WARMUP_CALLS = 3
SDPA_CUDNN = "sdpa_cudnn"  # attention's builtin with SDPA's cuDNN backend forced (experiments/backends.py's variant)
# The cells (config why_ncu.cells replaces the list): the equal-bytes gaps at the sizes where the builtin is slowest
# against ours, and our losses, at the sweep's largest size (attention: sequence 8192, the sweep's largest shape).
CELLS = ({
    "kernel": "softmax",
    "dtype": "bfloat16",
    "size": 8192,
    "pass": "fwd",
    "impls": ["builtin", "triton"]
}, {
    "kernel": "rowsum",
    "dtype": "bfloat16",
    "size": 8192,
    "pass": "fwd",
    "impls": ["builtin", "triton"]
}, {
    "kernel": "layernorm",
    "dtype": "bfloat16",
    "size": 1793,
    "pass": "fwd",
    "impls": ["builtin", "triton"]
}, {
    "kernel": "rmsnorm",
    "dtype": "bfloat16",
    "size": 1793,
    "pass": "fwd",
    "impls": ["builtin", "triton"]
}, {
    "kernel": "matmul",
    "dtype": "float32",
    "size": 8192,
    "pass": "fwd",
    "impls": ["builtin", "triton"]
}, {
    "kernel": "matmul",
    "dtype": "tf32",
    "size": 8192,
    "pass": "fwd",
    "impls": ["builtin", "triton"]
}, {
    "kernel": "attention",
    "dtype": "bfloat16",
    "size": 8192,
    "pass": "fwd",
    "impls": ["builtin", SDPA_CUDNN, "triton"]
}, {
    "kernel": "attention",
    "dtype": "bfloat16",
    "size": 8192,
    "pass": "fwd+bwd",
    "impls": ["builtin", SDPA_CUDNN, "triton"]
},
         )
CELL_KEYS = ("kernel", "dtype", "size", "pass", "impls")


def check_cells(cells) -> list[dict]:
    """The cells as dicts of CELL_KEYS, or a ValueError naming what is wrong."""
    out = []
    for c in cells:
        missing = [k for k in CELL_KEYS if k not in c]
        if missing or set(c) - set(CELL_KEYS):
            raise ValueError(f"why_ncu cell {c}: needs exactly {', '.join(CELL_KEYS)} (missing {missing})")
        if SDPA_CUDNN in c["impls"] and c["kernel"] != "attention":
            raise ValueError(f"why_ncu cell {c}: {SDPA_CUDNN} is attention's only")
        out.append({k: c[k] for k in CELL_KEYS})
    return out


def call_of(kernel, impl: str, dtype: str, size: int, pass_: str, device: str):
    """The zero-argument call of one cell (experiments/profiles.cell_callable), in the cell's math mode;
    ``sdpa_cudnn``: the builtin's call with SDPA's cuDNN backend forced around it."""
    from experiments.profiles import cell_callable
    from rooflab.kernel import math_mode

    fn = cell_callable(kernel, "builtin" if impl == SDPA_CUDNN else impl, dtype, size, pass_, device, 0)
    forced = contextlib.nullcontext
    if impl == SDPA_CUDNN:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        forced = functools.partial(sdpa_kernel, SDPBackend.CUDNN_ATTENTION)

    def call():
        with math_mode(dtype), forced():
            return fn()

    return call


def run(gpu: str, cells: list[dict], manifest: Path) -> int:
    """Each cell's implementations: warmed up, then one call profiled behind its marker; the manifest lists them."""
    from datetime import datetime, timezone

    from rooflab.device import check_device, prepare_environment

    prepare_environment(gpu, {})
    device, _ = check_device(gpu)
    if device != "cuda":
        print("why_ncu: Nsight Compute needs an NVIDIA GPU", file=sys.stderr)
        return 2
    import torch

    from rooflab.cell import Cell, skip_reason
    from rooflab.kernel import load_kernel

    calls = []
    manifest.write_text("[]")  # never an earlier run's calls beside this run's table
    for c in cells:
        kernel = load_kernel(c["kernel"])
        for impl in c["impls"]:
            base = "builtin" if impl == SDPA_CUDNN else impl
            reason = skip_reason(kernel, Cell(kernel.name, base, c["dtype"], int(c["size"]), c["pass"]), device, 0)
            if reason:
                print(f"why_ncu: {c['kernel']} {impl} {c['dtype']}: {reason}", file=sys.stderr)
                continue
            try:
                fn = call_of(kernel, impl, c["dtype"], int(c["size"]), c["pass"], device)
                for _ in range(WARMUP_CALLS):
                    fn()
                torch.cuda.synchronize()
            except Exception as exc:  # a call that does not run is left out, and said
                print(f"why_ncu: {c['kernel']} {impl} {c['pass']}: {type(exc).__name__}: {str(exc)[:200]}",
                      file=sys.stderr)
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
            calls.append({
                "kernel": c["kernel"],
                "impl": impl,
                "dtype": c["dtype"],
                "size": int(c["size"]),
                "pass": c["pass"],
                "error": error,
                "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds")
            })
            manifest.write_text(json.dumps(calls))  # after every call: a run cut short keeps what it profiled
            print(f"why_ncu: profiled {c['kernel']} {impl} {c['dtype']} {c['size']} {c['pass']}", file=sys.stderr,
                  flush=True)
            del fn
            torch.cuda.empty_cache()
    return 0


def table(raw_text: str, calls: list[dict], gpu: str):
    """One row per GPU kernel of each profiled call (rooflab/ncu.facts), with the call's fields; a call that
    launched nothing profiled keeps one row of NaN facts."""
    from rooflab import ncu

    from analysis.why import short_name

    facts = ncu.facts(ncu.read_raw(raw_text))
    out = ncu.split_calls(facts, MARKER, calls)
    out.insert(0, "gpu", gpu)
    out["short_name"] = out["name"].map(lambda n: short_name(n) if isinstance(n, str) else "")
    return out


def available_metrics(ncu_bin: str, wanted) -> tuple[list[str], list[str]]:
    """(kept, dropped): the metrics of ``wanted`` this ncu lists for the device present (ncu --query-metrics; a
    metric whose base name it does not list is dropped, so one unknown name cannot fail the whole run). launch__
    metrics are always kept (ncu's own, not counters); if the query itself fails, every metric is kept."""
    try:
        q = subprocess.run([ncu_bin, "--query-metrics", "--csv"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return list(wanted), []
    listed = set(re.findall(r"\b[a-z0-9]+__[a-z0-9_]+", q.stdout))  # whatever the layout: the names it lists
    if q.returncode != 0 or not listed:
        return list(wanted), []
    kept = [m for m in wanted if m.startswith("launch__") or m.split(".")[0] in listed]
    return kept, [m for m in wanted if m not in kept]


def profile(gpu: str, cells: list[dict], parquet: Path, raw_dir: Path, python: str = sys.executable) -> int:
    """ncu on ``run`` for the cells, the report imported as a raw CSV, the table written to ``parquet``."""
    from rooflab import ncu
    from rooflab.io import write_parquet

    ncu_bin = shutil.which("ncu")
    if ncu_bin is None:
        print("why_ncu: ncu (Nsight Compute) is not on the PATH", file=sys.stderr)
        return 3
    raw_dir = raw_dir.resolve()  # ncu's process runs from the repository root
    raw_dir.mkdir(parents=True, exist_ok=True)
    report, raw_csv, manifest = raw_dir / "why_ncu.ncu-rep", raw_dir / "why_ncu_raw.csv", raw_dir / "why_ncu_calls.json"
    metrics, dropped = available_metrics(ncu_bin, ncu.EXPLICIT_METRICS)
    if dropped:
        print(f"why_ncu: this ncu lists no {', '.join(dropped)}: not collected", file=sys.stderr)
    env = {**os.environ, "TORCHINDUCTOR_COMPILE_THREADS": "1"}
    target = [
        python, "-m", "experiments.why_ncu", "run", "--gpu", gpu, "--manifest",
        str(manifest), "--cells",
        json.dumps(cells)
    ]
    base = [
        ncu_bin, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "application-only",
        "--force-overwrite", "--export",
        str(report)
    ]
    sections = [a for s in ncu.SECTIONS for a in ("--section", s)]
    rc = subprocess.run(base + sections + ["--metrics", ",".join(metrics)] + target, env=env, cwd=REPO).returncode
    if rc != 0:  # a metric this device cannot collect after all: the sections alone
        print(f"why_ncu: ncu exited {rc} with the explicit metrics; again with the sections alone", file=sys.stderr)
        rc = subprocess.run(base + sections + target, env=env, cwd=REPO).returncode
    if rc != 0:
        return rc
    imported = subprocess.run(
        [ncu_bin, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"], capture_output=True,
        text=True)
    if imported.returncode != 0:
        print(imported.stderr, file=sys.stderr)
        return imported.returncode
    raw_csv.write_text(imported.stdout)
    out = table(imported.stdout, json.loads(manifest.read_text()), gpu)
    write_parquet(out, str(parquet))
    cols = [
        "kernel", "impl", "dtype", "pass", "short_name", "duration_us", "achieved_occupancy_pct", "dram_pct",
        "occupancy_limiter", "stall_top"
    ]
    print(out[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["profile", "run", "table"])
    ap.add_argument("--gpu", help="config key of the device (default: the GPU present)")
    ap.add_argument("--cells", default="[]", help="JSON list of cells (kernel, dtype, size, pass, impls); [] for "
                    "the default list (CELLS)")
    ap.add_argument("--out", help="profile: the parquet to write")
    ap.add_argument(
        "--raw-dir", help="profile: where the report, its raw CSV and the manifest go (default: beside "
        "--out, in why_ncu/)")
    ap.add_argument("--manifest", help="run, table: the calls profiled, in order (JSON)")
    ap.add_argument("--ncu", help="table: ncu's --csv --page raw output")
    args = ap.parse_args(argv)
    cells = check_cells(json.loads(args.cells) or CELLS)
    if args.gpu is None:
        from rooflab.gpus import detect_key

        args.gpu = detect_key()
    if args.mode == "run":
        return run(args.gpu, cells, Path(args.manifest))
    if args.mode == "table":
        from rooflab.io import write_parquet

        out = table(Path(args.ncu).read_text(), json.loads(Path(args.manifest).read_text()), args.gpu)
        write_parquet(out, args.out)
        return 0
    if not args.out:
        ap.error("profile needs --out")
    raw_dir = Path(args.raw_dir) if args.raw_dir else Path(args.out).parent / "why_ncu"
    return profile(args.gpu, cells, Path(args.out), raw_dir)


if __name__ == "__main__":
    sys.exit(main())
