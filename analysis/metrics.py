"""Raw timings -> results/metrics.parquet: achieved rates, arithmetic intensity, roofline position, speedups,
roofline-model times on every datasheet GPU, and the model's error against the GPU actually measured.

Formulas (per row, t = median time in seconds; FLOPs and bytes from the kernel's own model in kernels/<k>.py):
    achieved_gbps        = bytes / t / 1e9
    achieved_tflops      = flops / t / 1e12
    arithmetic_intensity = flops / bytes                                   [FLOP/byte]
    attainable           = min(peak_flops[unit], arithmetic_intensity * peak_bandwidth)     (the roofline)
    roofline_fraction    = (flops / t) / attainable
    model_time_ms_<gpu>  = max(flops / peak_flops[unit], bytes / peak_bandwidth) * 1e3
    model_error_<src>    = measured / model_time - 1   (on the GPU measured; src = datasheet | measured)
    wave_efficiency_<g>  = tiles / (ceil(tiles / SMs) * SMs), tiles = ceil(M/128) ceil(N/128)   (matmul)
    wave_model_tflops    = peak_tflops_measured * wave_efficiency    (on the GPU measured, if its SM count is known)
    bound                = memory if arithmetic_intensity < ridge point, compute above, unknown without peaks
Peaks come from rooflab/gpus.py (datasheet) and results/raw/<gpu>/ceilings.parquet (measured). Rows that are not
"ok" (mismatch, failed, skipped, not_timed) keep their status and get no rates, speedups or claims.
"""

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rooflab.gpus import SPECS  # noqa: E402

MATMUL_TILE = 128  # the output tile the wave model assumes (BLOCK_M = BLOCK_N = 128)
CEILING_FOR_UNIT = {"fp32": "gemm_fp32", "tf32": "gemm_tf32", "bf16": "gemm_bf16", "fp16": "gemm_fp16"}
# One cell of the sweep: speedups compare implementations within one cell only, so within one precision and math mode
CELL = ["gpu", "kernel", "dtype", "math_mode", "size", "pass"]


def attainable(ai, peak_flops, peak_bw):
    """The roofline: min(peak FLOP/s, AI x peak bandwidth), in FLOP/s."""
    return np.minimum(peak_flops, np.asarray(ai, dtype=float) * peak_bw)


def model_time_s(flops, nbytes, peak_flops, peak_bw):
    """Roofline-model time: the larger of the compute time and the memory time."""
    return np.maximum(np.asarray(flops, dtype=float) / peak_flops, np.asarray(nbytes, dtype=float) / peak_bw)


def wave_efficiency(m: int, n: int, sms: int, tile: int = MATMUL_TILE) -> float:
    """Fraction of the last wave's SM slots doing work, averaged over waves (1.0 = no quantisation loss)."""
    tiles = math.ceil(m / tile) * math.ceil(n / tile)
    return tiles / (math.ceil(tiles / sms) * sms)


def measured_peaks(ceilings: pd.DataFrame) -> dict[str, dict[str, float]]:
    """{gpu: {'copy': B/s, 'gemm_bf16': FLOP/s, ...}} from the ceilings table."""
    out: dict[str, dict[str, float]] = {}
    for _, r in ceilings.iterrows():
        out.setdefault(r["gpu"], {})[r["ceiling"]] = float(r["value"])
    return out


def _peak_flops_measured(peaks: dict, unit: str) -> float:
    return peaks.get(CEILING_FOR_UNIT[unit], peaks.get("gemm_fp32", np.nan))


def _own_spec_column(df: pd.DataFrame, prefix: str) -> np.ndarray:
    """Per row, column <prefix>_<gpu> of the row's own GPU (NaN where that GPU has no datasheet entry)."""
    out = np.full(len(df), np.nan)
    for key in SPECS:
        mask = (df["gpu"] == key).to_numpy()
        out[mask] = df.loc[mask, f"{prefix}_{key}"].to_numpy(dtype=float)
    return out


def compute_metrics(raw: pd.DataFrame, ceilings: pd.DataFrame) -> pd.DataFrame:
    from rooflab.io import legacy_math_modes

    df = raw.copy() if "math_mode" in raw else legacy_math_modes(raw)
    # Claimable: correct and timed, and (for torch.compile) really compiled; a silent eager fallback is flagged in
    # the raw row and must not pass for a compiled number.
    fallback = df["compile_fallback"].fillna(False).astype(bool) if "compile_fallback" in df else False
    ok = (df["status"] == "ok") & ~fallback
    df["claimable"] = ok
    t = df["median_ms"].where(ok) * 1e-3
    df["achieved_gbps"] = df["bytes"] / t / 1e9
    df["achieved_tflops"] = df["flops"] / t / 1e12
    df["arithmetic_intensity"] = df["flops"] / df["bytes"]
    graph_ms = df["graph_median_ms"] if "graph_median_ms" in df else pd.Series(np.nan, index=df.index)
    df["graph_achieved_gbps"] = df["bytes"] / (graph_ms.where(ok) * 1e-3) / 1e9

    # Against the datasheet of every spec GPU: attainable rate, fraction reached, model time.
    for key, spec in SPECS.items():
        pf = df["compute_unit"].map(lambda u, s=spec: s.peak_flops(u) if isinstance(u, str) else np.nan)
        att = attainable(df["arithmetic_intensity"], pf, spec.mem_bandwidth)
        df[f"attainable_tflops_{key}"] = att / 1e12
        df[f"roofline_fraction_{key}"] = df["achieved_tflops"] * 1e12 / att
        df[f"model_time_ms_{key}"] = model_time_s(df["flops"], df["bytes"], pf, spec.mem_bandwidth) * 1e3
        # Always present (NaN off matmul), so readers can rely on the schema whatever kernels were run.
        df[f"wave_efficiency_{key}"] = [
            wave_efficiency(int(n), int(n), spec.sms) if k == "matmul" else np.nan
            for k, n in zip(df["kernel"], df["size"])
        ]

    # Against the GPU measured on: its datasheet (if known) and its measured ceilings.
    peaks = measured_peaks(ceilings)
    own_bw = df["gpu"].map(lambda g: peaks.get(g, {}).get("copy", np.nan))
    own_pf = [_peak_flops_measured(peaks.get(g, {}), u) for g, u in zip(df["gpu"], df["compute_unit"])]
    own_pf = np.asarray(own_pf, dtype=float)
    df["peak_bandwidth_measured_gbps"] = own_bw / 1e9
    df["peak_tflops_measured"] = own_pf / 1e12
    att = attainable(df["arithmetic_intensity"], own_pf, own_bw)
    df["attainable_tflops_measured"] = att / 1e12
    df["roofline_fraction_measured"] = df["achieved_tflops"] * 1e12 / att
    df["bandwidth_fraction_measured"] = df["achieved_gbps"] * 1e9 / own_bw
    df["model_time_ms_measured"] = model_time_s(df["flops"], df["bytes"], own_pf, own_bw) * 1e3
    df["model_error_measured"] = df["median_ms"].where(ok) / df["model_time_ms_measured"] - 1

    # The datasheet columns of the GPU each row was measured on (NaN for the CPU or a GPU not in the table).
    ds = [SPECS.get(g) for g in df["gpu"]]
    df["model_time_ms_datasheet"] = _own_spec_column(df, "model_time_ms")
    df["roofline_fraction_datasheet"] = _own_spec_column(df, "roofline_fraction")
    df["bandwidth_fraction_datasheet"] = df["achieved_gbps"] * 1e9 / [s.mem_bandwidth if s else np.nan for s in ds]
    df["model_error_datasheet"] = df["median_ms"].where(ok) / df["model_time_ms_datasheet"] - 1
    df["wave_efficiency"] = _own_spec_column(df, "wave_efficiency")
    df["wave_model_tflops"] = df["peak_tflops_measured"] * df["wave_efficiency"]
    ridge = [(s.peak_flops(u) / s.mem_bandwidth) if s and isinstance(u, str) else pf_ / bw_
             for s, u, pf_, bw_ in zip(ds, df["compute_unit"], own_pf, own_bw)]
    df["ridge_point"] = ridge
    df["bound"] = np.select(
        [df["arithmetic_intensity"] < df["ridge_point"], df["arithmetic_intensity"] >= df["ridge_point"]],
        ["memory", "compute"], default="unknown")

    # Speedups within one run: baseline time / this time, among correct ("ok") cells only.
    for base in ("builtin", "naive"):
        b = df[ok & (df["impl"] == base)].set_index(CELL)["median_ms"]
        b = b[~b.index.duplicated()]
        key = pd.MultiIndex.from_frame(df[CELL])
        df[f"speedup_vs_{base}"] = b.reindex(key).to_numpy() / df["median_ms"].where(ok).to_numpy()
    return df


# The fit of fixed_costs uses the sizes from here on: smaller cells sit on the launch floor, not on the line.
FIT_MIN_SIZE = 2048
FIT_MIN_POINTS = 3


def fit_line(nbytes, time_us) -> tuple[float, float]:
    """(fixed_us, marginal_tbs) of the least-squares line time_us = fixed + bytes / rate; both NaN where the time
    does not rise with the bytes (no rate, and no fixed cost to speak of)."""
    slope, fixed = np.polyfit(np.asarray(nbytes, dtype=float), np.asarray(time_us, dtype=float), 1)
    return (float(fixed), 1e-6 / slope) if slope > 0 else (np.nan, np.nan)


def fixed_costs(metrics: pd.DataFrame, min_size: int = FIT_MIN_SIZE) -> pd.DataFrame:
    """What a memory-bound call pays once and what it pays per byte: per (gpu, kernel, impl, dtype, pass), the
    least-squares line time = fixed + bytes / rate through its correct, timed, memory-bound cells of at least
    min_size (at least FIT_MIN_POINTS sizes; the square sizes give a byte ratio of 16 from 2048 to 8192).

    Columns: fixed_us (the intercept: launch, ramp-up and tail, everything that does not grow with the bytes),
    marginal_tbs (1 / slope: the rate at which one more byte is moved), points, and at the largest size its
    time_us and fixed_share = fixed_us / time_us: the part of the call a faster memory system would not shorten.
    A kernel at the copy's marginal rate can still read below the copy's bandwidth at one size through its fixed
    cost (docs/performance.md, round 27)."""
    ok = metrics["claimable"] if "claimable" in metrics else metrics["status"] == "ok"
    d = metrics[ok & (metrics["bound"] == "memory") & (metrics["size"] >= min_size)
                & np.isfinite(metrics["median_ms"]) & np.isfinite(metrics["bytes"])]
    rows = []
    for key, g in d.groupby(["gpu", "kernel", "impl", "dtype", "pass"], sort=True):
        g = g.groupby("size")[["bytes", "median_ms"]].median()  # a size measured twice counts once, at its median
        if len(g) < FIT_MIN_POINTS:
            continue
        fixed, rate = fit_line(g["bytes"], g["median_ms"] * 1e3)
        t = g["median_ms"].iloc[-1] * 1e3
        rows.append(dict(zip(["gpu", "kernel", "impl", "dtype", "pass"], key), points=len(g), fixed_us=fixed,
                         marginal_tbs=rate, size=int(g.index[-1]), time_us=t, fixed_share=fixed / t))
    cols = ["gpu", "kernel", "impl", "dtype", "pass", "points", "fixed_us", "marginal_tbs", "size", "time_us",
            "fixed_share"]
    return pd.DataFrame(rows, columns=cols)


def build(raw_paths, ceiling_paths, out: str) -> pd.DataFrame:
    from rooflab.io import CEILING_COLUMNS, read_raw_many, read_results, write_parquet

    raw = read_raw_many(raw_paths)
    ceilings = pd.concat([read_results(p, CEILING_COLUMNS) for p in ceiling_paths], ignore_index=True)
    metrics = compute_metrics(raw, ceilings)
    write_parquet(metrics, out)
    return metrics


if "snakemake" in globals():
    sm = globals()["snakemake"]
    with open(sm.log[0], "w") as fh:
        m = build(sm.input.raw, sm.input.ceilings, sm.output[0])
        print(f"{len(m)} rows, {int((m.status == 'ok').sum())} ok", file=fh)
