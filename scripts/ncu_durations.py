"""How much of a cell's time is its kernel? The row kernels and the copy at 8192^2, timed the sweep's way (events, L2
flushed, stream held) and, in a second process, under Nsight Compute (the kernel's own duration,
gpu__time_duration). The difference is what a call costs outside its kernel: the launch as the GPU sees it and the
wait for the kernel's completion. GPU only.

    python scripts/ncu_durations.py time --out events.csv
    ncu --clock-control none --nvtx --nvtx-include rooflab_cell/ --csv --page raw \
        --metrics gpu__time_duration.sum python scripts/ncu_durations.py profile > ncu.csv
    python scripts/ncu_durations.py summary --events events.csv --ncu ncu.csv --out durations.csv

docs/decisions.md (round 30) has what it found on the H200; its CSV is data/tuning/ncu_durations_s12.csv.
"""
import argparse
import io
from pathlib import Path

import pandas as pd
import torch

N = 8192
DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}
PROFILED_CALLS = 3  # kernel launches per call under ncu (its median is kept)
# Timed but not profiled: y.copy_(x) between contiguous tensors of one dtype is a device-to-device cudaMemcpy, which
# ncu does not profile (it lists kernels only).
NOT_KERNELS = {"copy_"}

# The calls compared, in order (lab/floor.py row_calls has them all).
CALLS = ("copy_", "rowsum triton", "layernorm triton", "layernorm builtin", "rmsnorm triton", "softmax fwd triton",
         "gelu triton")


def calls(dtype):
    """{name: fn} with one kernel launch each, on (N, N) inputs of dtype as the sweep makes them."""
    from kernels.layernorm import make_inputs
    from lab.floor import row_calls

    every = row_calls(*make_inputs(N, dtype, "cuda")[:3])  # x, weight, bias
    return {name: every[name][1] for name in CALLS}


def time_calls(out):
    """Each call timed with the sweep's timer and 4 starts: the event-side medians."""
    from rooflab.timing import CudaEventTimer, measure
    from lab.common import sweep_timing

    timer = CudaEventTimer(flush_l2=True)
    cfg = sweep_timing(instances=4)
    rows = []
    for dname, dtype in DTYPES.items():
        for name, fn in calls(dtype).items():
            fn()
            torch.cuda.synchronize()
            rows.append({"call": name, "dtype": dname, "event_us": measure(fn, timer, cfg)["median_ms"] * 1e3})
            print(f"{name} {dname}: {rows[-1]['event_us']:.2f} us", flush=True)
        torch.cuda.empty_cache()
    pd.DataFrame(rows).to_csv(out, index=False)


def profile_calls():
    """Each call PROFILED_CALLS times inside an NVTX range named rooflab_cell, in a fixed order (what summary
    matches the ncu rows to); warmed up outside the ranges."""
    for dtype in DTYPES.values():
        for name, fn in calls(dtype).items():
            if name in NOT_KERNELS:
                continue
            fn()
            torch.cuda.synchronize()
            for _ in range(PROFILED_CALLS):
                torch.cuda.nvtx.range_push("rooflab_cell")
                fn()
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_pop()
        torch.cuda.empty_cache()


def read_ncu(text: str) -> pd.DataFrame:
    """ncu's --csv --page raw output (lines before the header are the program's own) as one row per kernel."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise SystemExit("no ncu table in this output (a header line starting with \"ID\"): was it written with "
                         "--csv --page raw --metrics gpu__time_duration.sum, and did ncu profile any kernel?")
    df = pd.read_csv(io.StringIO("\n".join(lines[start:])))
    if "gpu__time_duration.sum" not in df:
        raise SystemExit("the ncu table has no gpu__time_duration.sum column: pass --metrics gpu__time_duration.sum")
    df = df[pd.to_numeric(df["ID"], errors="coerce").notna()]  # the units row
    unit = pd.read_csv(io.StringIO("\n".join(lines[start:start + 2])))["gpu__time_duration.sum"].iloc[0]
    units = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
    if unit not in units:
        raise SystemExit(f"gpu__time_duration.sum is in {unit!r}, not one of {sorted(units)}")
    scale = units[unit]
    return pd.DataFrame({
        "kernel":
        df["Kernel Name"].values,
        "ncu_us":
        df["gpu__time_duration.sum"].astype(str).str.replace(",", "").astype(float).values * scale
    })


def summary(events: pd.DataFrame, ncu: pd.DataFrame) -> pd.DataFrame:
    """The ncu rows matched, in order, to the calls profile_calls made; per call: the event median, the kernel's
    median duration, and what lies outside the kernel."""
    order = [(name, dname)
             for dname in DTYPES
             for name in events[events.dtype == dname]["call"]
             if name not in NOT_KERNELS]
    if len(ncu) != PROFILED_CALLS * len(order):
        raise SystemExit(f"ncu reported {len(ncu)} kernels, expected {PROFILED_CALLS} x {len(order)} calls")
    ncu = ncu.assign(call=[c for c, _ in order for _ in range(PROFILED_CALLS)],
                     dtype=[d for _, d in order for _ in range(PROFILED_CALLS)])
    kern = ncu.groupby(["call", "dtype"], sort=False).agg(kernel=("kernel", "first"), ncu_us=("ncu_us", "median"))
    out = events.set_index(["call", "dtype"]).join(kern)
    out["outside_us"] = out["event_us"] - out["ncu_us"]
    return out.reset_index()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["time", "profile", "summary"])
    ap.add_argument(
        "--out", default=None, help="time: the events CSV (default events.csv); summary: also write the "
        "table here (CSV, with the kernel names)")
    ap.add_argument("--events", default="events.csv")
    ap.add_argument("--ncu", default="ncu.csv")
    args = ap.parse_args()
    if args.mode == "time":
        time_calls(args.out or "events.csv")
    elif args.mode == "profile":
        profile_calls()
    else:
        table = summary(pd.read_csv(args.events), read_ncu(Path(args.ncu).read_text()))
        if args.out:
            table.to_csv(args.out, index=False)
        print(table.drop(columns="kernel").to_string(index=False, float_format="%.2f"))


if __name__ == "__main__":
    main()
