"""Nsight Compute's raw page read as facts per GPU kernel: what `ncu --import report --csv --page raw --print-units
base` prints, one row per profiled kernel, turned into named columns (duration, occupancy achieved and theoretical
and what limits it, registers, shared memory, grid, block, waves, DRAM bytes and throughput, SM throughput, the warp
stall reasons, the instruction mix). Pure pandas: tested on the CPU on a synthetic CSV of ncu's layout
(tests/data/ncu_raw_synthetic.csv).

The layout: lines before the table are the program's own; the table's header starts with "ID" and names the
columns ("ID", "Process ID", ..., "Kernel Name", ..., then one column per metric, e.g. "dram__bytes.sum"); its
second line gives each metric's unit ("byte", "nsecond", "%", ...); then one line per kernel. A value may carry
thousands separators ("1,234"); a metric ncu could not collect is "n/a" or empty.
"""
from __future__ import annotations

import io
import re

import pandas as pd

# The sections whose metrics the facts read (ncu --section ...), and the metrics named explicitly besides (the
# instruction mix no default section reports as plain counts).
SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "WarpStateStats")
FACT_METRICS = {
    "duration_us": ("gpu__time_duration.sum", ),
    "achieved_occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active", ),
    "theoretical_occupancy_pct": ("sm__maximum_warps_per_active_cycle_pct", ),
    "registers_per_thread": ("launch__registers_per_thread", ),
    "grid_size": ("launch__grid_size", ),
    "block_size": ("launch__block_size", ),
    "waves_per_sm": ("launch__waves_per_multiprocessor", ),
    "dram_bytes": ("dram__bytes.sum", ),
    "dram_pct":
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
    "sm_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed", ),
    "memory_pct": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", ),
    "inst_executed": ("smsp__inst_executed.sum", ),
    # the instruction mix: FFMA in thread instructions (predicated on), the rest in warp instructions
    "ffma_thread_inst": ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", ),
    "hmma_inst": ("sm__inst_executed_pipe_tensor_op_hmma.sum", ),
    "gmma_inst": ("sm__inst_executed_pipe_tensor_op_gmma.sum", ),
    "ldg_inst": ("smsp__sass_inst_executed_op_global_ld.sum", ),
    "stg_inst": ("smsp__sass_inst_executed_op_global_st.sum", ),
    "ldgsts_inst": ("smsp__sass_inst_executed_op_ldgsts.sum", ),
    "tma_inst": ("smsp__sass_inst_executed_op_tma_ld.sum", ),
}
SHARED_MEMORY = ("launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic")
DRAM_PARTS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
# Blocks an SM can hold by each resource (LaunchStats/Occupancy): the smallest is what limits the occupancy.
LIMITS = {
    "launch__occupancy_limit_registers": "registers",
    "launch__occupancy_limit_shared_mem": "shared memory",
    "launch__occupancy_limit_warps": "block size",
    "launch__occupancy_limit_blocks": "blocks per SM"
}
STALL = re.compile(r"^smsp__average_warps_issue_stalled_(?P<reason>\w+?)_per_issue_active\.ratio$")
NOT_A_STALL = {"selected"}  # a warp that issued: in the section's list, but no stall
TOP_STALLS = 3
EXPLICIT_METRICS = tuple(
    dict.fromkeys([m for names in FACT_METRICS.values()
                   for m in names] + list(SHARED_MEMORY) + list(DRAM_PARTS) + list(LIMITS)))
FACT_COLUMNS = (list(FACT_METRICS) + ["shared_mem_bytes", "occupancy_limiter", "tensor_inst", "stall_top"])

_SCALE = {
    "byte": 1.0,
    "Kbyte": 1e3,
    "Mbyte": 1e6,
    "Gbyte": 1e9,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "nsecond": 1e-3,
    "usecond": 1.0,
    "msecond": 1e3,
    "second": 1e6,
    "ns": 1e-3,
    "us": 1.0,
    "ms": 1e3
}


def read_raw(text: str) -> pd.DataFrame:
    """ncu's --csv --page raw table as one row per kernel: "Kernel Name" as ``name``, every metric as a float in
    base units (bytes; durations in microseconds), NaN where ncu gave none. Lines before the header are skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise ValueError('no ncu table here (a header line starting with "ID"): written with --csv --page raw?')
    df = pd.read_csv(io.StringIO("\n".join(lines[start:])), dtype=str, keep_default_na=False)
    if "Kernel Name" not in df:
        raise ValueError("the ncu table has no 'Kernel Name' column: not a --page raw table")
    units, df = df.iloc[0], df.iloc[1:].reset_index(drop=True)
    out = {"name": df["Kernel Name"].tolist()}
    for col in df.columns:
        if "__" not in col:  # ID, Process ID, Kernel Name, Block Size ...: not metrics
            continue
        values = pd.to_numeric(df[col].str.replace(",", "", regex=False).str.strip(), errors="coerce")
        out[col] = (values * _SCALE.get(str(units[col]).strip(), 1.0)).tolist()
    return pd.DataFrame(out)


def _first(row: pd.Series, names) -> float:
    for n in names:
        v = row.get(n)
        if v is not None and pd.notna(v):
            return float(v)
    return float("nan")


def limiter(row: pd.Series) -> str:
    """What limits the theoretical occupancy: the resource whose limit on blocks per SM is smallest ('registers',
    'shared memory', 'block size', 'blocks per SM'; ties joined with ' and '), '' where none was collected."""
    limits = {word: row.get(metric) for metric, word in LIMITS.items()}
    limits = {w: float(v) for w, v in limits.items() if v is not None and pd.notna(v)}
    if not limits:
        return ""
    least = min(limits.values())
    return " and ".join(w for w, v in limits.items() if v == least)


def stalls(row: pd.Series) -> dict[str, float]:
    """The warp stall reasons (WarpStateStats: cycles a warp spent stalled for each reason per instruction issued),
    largest first; 'selected' and reasons that never stalled left out."""
    found = {}
    for col, v in row.items():
        m = STALL.match(str(col))
        if m and m["reason"] not in NOT_A_STALL and pd.notna(v) and float(v) > 0:
            found[m["reason"]] = float(v)
    return dict(sorted(found.items(), key=lambda kv: -kv[1]))


def facts(raw: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel of read_raw's table: FACT_COLUMNS, ``name``, and a ``stall_<reason>`` column per stall."""
    rows = []
    for _, r in raw.iterrows():
        row = {"name": r["name"], **{k: _first(r, names) for k, names in FACT_METRICS.items()}}
        shared = [r.get(m) for m in SHARED_MEMORY]
        row["shared_mem_bytes"] = (float(sum(v for v in shared if v is not None and pd.notna(v))) if any(
            v is not None and pd.notna(v) for v in shared) else float("nan"))
        if pd.isna(row["dram_bytes"]):
            parts = [r.get(m) for m in DRAM_PARTS]
            if all(v is not None and pd.notna(v) for v in parts):
                row["dram_bytes"] = float(sum(parts))
        row["occupancy_limiter"] = limiter(r)
        tensor = [row["hmma_inst"], row["gmma_inst"]]
        row["tensor_inst"] = (float(sum(v for v in tensor if pd.notna(v))) if any(pd.notna(v)
                                                                                  for v in tensor) else float("nan"))
        stall = stalls(r)
        row["stall_top"] = "; ".join(f"{k} {v:.3g}" for k, v in list(stall.items())[:TOP_STALLS])
        row.update({f"stall_{k}": v for k, v in stall.items()})
        rows.append(row)
    cols = ["name"] + FACT_COLUMNS
    out = pd.DataFrame(rows)
    return out.reindex(columns=cols + [c for c in out.columns if c not in cols])


def split_calls(raw: pd.DataFrame, marker: str, calls: list[dict]) -> pd.DataFrame:
    """The kernels of each call: a marker kernel (``marker`` in its name) opens each call's kernels, and the calls
    are those of the manifest, in order. One row per kernel with the call's fields, ``call`` (its index) and
    ``launch`` (the kernel's place in it); the markers left out."""
    is_marker = raw["name"].str.contains(marker, regex=False).to_numpy()
    if int(is_marker.sum()) != len(calls):
        raise ValueError(f"{int(is_marker.sum())} markers in the ncu table, {len(calls)} calls in the manifest")
    if len(raw) and not is_marker[0]:
        raise ValueError("the ncu table starts with a kernel before any marker: not the manifest's calls")
    segment = is_marker.cumsum() - 1
    kernels = raw[~is_marker].assign(call=segment[~is_marker])
    kernels["launch"] = kernels.groupby("call").cumcount()
    fields = pd.DataFrame(calls).assign(call=range(len(calls)))
    return fields.merge(kernels, on="call", how="left").reset_index(drop=True)
