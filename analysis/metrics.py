"""Raw timings -> results/metrics.parquet: achieved rates, arithmetic intensity, roofline position, speedups,
roofline-model times on every datasheet GPU, and the model's error against the GPU actually measured.

Formulas (per row, t = median time in seconds; FLOPs and bytes from the kernel's own model in kernels/<k>.py):
    achieved_gbps        = bytes / t / 1e9
    achieved_tflops      = flops / t / 1e12
    arithmetic_intensity = flops / bytes                                   [FLOP/byte]
    attainable           = min(peak_flops[unit], arithmetic_intensity * peak_bandwidth)     (the roofline)
    peak_tflops_at_clock = peak_flops_measured[unit] * sm_clock / ceiling's sm_clock (compute-bound cells: the
                           measured roof at the clock the cell's samples ran at; roofline_fraction_measured uses it)
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

import numpy as np
import pandas as pd

from analysis.aa_floors import noise_floor

from analysis.columns import flags, texts
from rooflab.gpus import SPECS

MATMUL_TILE = 128  # the output tile the wave model assumes (BLOCK_M = BLOCK_N = 128)
CEILING_FOR_UNIT = {"fp32": "gemm_fp32", "tf32": "gemm_tf32", "bf16": "gemm_bf16", "fp16": "gemm_fp16"}
# One cell of the sweep: speedups compare implementations within one cell only, so within one precision and math mode.
# By shape, not size: a shape other than N x N (rooflab/shapes.py) has no size.
CELL = ["gpu", "kernel", "dtype", "math_mode", "shape", "pass"]


def attainable(ai, peak_flops, peak_bw):
    """The roofline: min(peak FLOP/s, AI x peak bandwidth), in FLOP/s."""
    return np.minimum(peak_flops, np.asarray(ai, dtype=float) * peak_bw)


def model_time_s(flops, nbytes, peak_flops, peak_bw):
    """Roofline-model time: the larger of the compute time and the memory time."""
    return np.maximum(np.asarray(flops, dtype=float) / peak_flops, np.asarray(nbytes, dtype=float) / peak_bw)


def wave_efficiency(m: int, n: int, sms: int, tile: int | tuple[int, int] = MATMUL_TILE) -> float:
    """Fraction of the last wave's SM slots doing work, averaged over waves (1.0 = no quantisation loss); ``tile``
    a side (square) or (BLOCK_M, BLOCK_N)."""
    bm, bn = tile if isinstance(tile, tuple) else (tile, tile)
    tiles = math.ceil(m / bm) * math.ceil(n / bn)
    return tiles / (math.ceil(tiles / sms) * sms)


def output_mn(df: pd.DataFrame) -> list[tuple[float, float]]:
    """(M, N) of each row's output, for the wave model: dim_m and dim_n where the shape recorded them, else the
    square size (0 where neither is known)."""
    size = pd.to_numeric(df["size"], errors="coerce").fillna(0).to_numpy(dtype=float)
    m = df["dim_m"].fillna(pd.Series(size, index=df.index)).to_numpy(dtype=float) if "dim_m" in df else size
    n = df["dim_n"].fillna(pd.Series(size, index=df.index)).to_numpy(dtype=float) if "dim_n" in df else size
    return list(zip(np.nan_to_num(m), np.nan_to_num(n)))


def measured_peaks(ceilings: pd.DataFrame) -> dict[str, dict[str, float]]:
    """{gpu: {'copy': B/s, 'gemm_bf16': FLOP/s, ...}} from the ceilings table (the newest run of each GPU)."""
    if "run_id" in ceilings and len(ceilings):
        newest = ceilings.sort_values("timestamp").groupby("gpu")["run_id"].last() if "timestamp" in ceilings \
            else ceilings.groupby("gpu")["run_id"].last()
        ceilings = ceilings[ceilings["run_id"] == ceilings["gpu"].map(newest)]
    out: dict[str, dict[str, float]] = {}
    for _, r in ceilings.iterrows():
        out.setdefault(r["gpu"], {})[r["ceiling"]] = float(r["value"])
    return out


def run_peaks(ceilings: pd.DataFrame) -> dict[tuple[str, str], dict[str, float]]:
    """{(gpu, run_id): {ceiling: value, '<ceiling>@clock': the SM clock it ran at (where recorded), 'timestamp'}}."""
    c = ceilings.copy()
    c["run_id"] = texts(c, "run_id")
    out: dict[tuple[str, str], dict[str, float]] = {}
    for (gpu, run), g in c.groupby(["gpu", "run_id"], sort=False):
        peaks = {r["ceiling"]: float(r["value"]) for _, r in g.iterrows()}
        if "sm_clock_after_mhz" in g:  # the clock each roof ran at ("copy@clock", "gemm_bf16@clock", ...)
            peaks.update({f"{r['ceiling']}@clock": float(_samples_clock(r)) for _, r in g.iterrows()})
        peaks["timestamp"] = str(g["timestamp"].max()) if "timestamp" in g else ""
        out[(gpu, run)] = peaks
    return out


def _samples_clock(r) -> float:
    """The SM clock a row's samples ran at: the median reading between its sample batches where recorded
    (rooflab/clocks.during), else the reading after them."""
    during = r.get("sm_clock_samples_mhz", np.nan)
    return float(during) if pd.notna(during) else float(r.get("sm_clock_after_mhz", np.nan))


def _peak_flops_measured(peaks: dict, unit: str) -> float:
    """The measured compute ceiling of the unit's own math mode; NaN where that mode was not measured (never
    another mode's: TF32 cells rated against an fp32 roof would sit far above it)."""
    return peaks.get(CEILING_FOR_UNIT.get(unit, ""), np.nan)


def _own_spec_column(df: pd.DataFrame, prefix: str) -> np.ndarray:
    """Per row, column <prefix>_<gpu> of the row's own GPU (NaN where that GPU has no datasheet entry)."""
    out = np.full(len(df), np.nan)
    for key in SPECS:
        mask = (df["gpu"] == key).to_numpy()
        out[mask] = df.loc[mask, f"{prefix}_{key}"].to_numpy(dtype=float)
    return out


def compute_metrics(raw: pd.DataFrame, ceilings: pd.DataFrame, rules=None) -> pd.DataFrame:
    """The metrics of every raw row; ``rules`` (rooflab/verdicts.VerdictRules, config verdicts; default: the
    schema's) judge the unpaired verdicts (without the run's A/A floors: analysis/aa_floors.apply_floors adds them
    to the run's tables)."""
    from rooflab.io import legacy_math_modes

    df = raw.copy() if "math_mode" in raw else legacy_math_modes(raw)
    if "shape" not in df:  # a frame without shapes (made by hand): each size its own cell
        df["shape"] = df["size"].astype(str)
    # Claimable: correct and timed, and (for torch.compile) really compiled; a silent eager fallback is flagged in
    # the raw row and must not pass for a compiled number.
    fallback = flags(df, "compile_fallback")
    ok = (df["status"] == "ok") & ~fallback
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
            wave_efficiency(int(m), int(n), spec.sms) if k == "matmul" and m > 0 and n > 0 else np.nan
            for k, (m, n) in zip(df["kernel"], output_mn(df))
        ]

    # Against the GPU measured on: its datasheet (if known) and the ceilings measured in the cell's own run. A cell
    # whose run measured none (a rerun of one kernel after an edit) is rated against the newest ceilings of that
    # GPU instead, and says so: ceilings_same_run False, ceilings_run_id names the run.
    peaks = run_peaks(ceilings)
    df["run_id"] = texts(df, "run_id")
    newest = {}
    for (g, r), p in sorted(peaks.items(), key=lambda kv: kv[1].get("timestamp", "")):
        newest[g] = r
    df["ceilings_same_run"] = [(g, r) in peaks for g, r in zip(df["gpu"], df["run_id"])]
    df["ceilings_run_id"] = [r if (g, r) in peaks else newest.get(g, "") for g, r in zip(df["gpu"], df["run_id"])]
    own = [peaks.get((g, r), {}) for g, r in zip(df["gpu"], df["ceilings_run_id"])]
    own_bw = pd.Series([p.get("copy", np.nan) for p in own], index=df.index, dtype=float)
    own_pf = np.asarray([_peak_flops_measured(p, u) for p, u in zip(own, df["compute_unit"])], dtype=float)
    # Clocks: a cell whose SM clock sat under CLOCK_FRACTION of the clock of the roof it is rated against (the GEMM
    # of its mode above the ridge, the copy below; the card's maximum where the ceilings recorded no clock) is
    # flagged and kept out of claims.
    compute = np.nan_to_num(df["arithmetic_intensity"].to_numpy(dtype=float) * own_bw.to_numpy()) >= own_pf
    roof = [CEILING_FOR_UNIT.get(u, "") if c else "copy" for u, c in zip(df["compute_unit"], compute)]
    ceiling_clock = np.asarray([p.get(f"{name}@clock", np.nan) for p, name in zip(own, roof)], dtype=float)
    max_clock = df["sm_clock_max_mhz"].to_numpy(dtype=float) if "sm_clock_max_mhz" in df else np.full(len(df), np.nan)
    df["ceiling_clock_mhz"] = np.where(np.isfinite(ceiling_clock), ceiling_clock, max_clock)
    after = df["sm_clock_after_mhz"] if "sm_clock_after_mhz" in df else pd.Series(np.nan, index=df.index)
    during = df["sm_clock_samples_mhz"] if "sm_clock_samples_mhz" in df else pd.Series(np.nan, index=df.index)
    cell_clock = during.astype(float).fillna(after.astype(float)).to_numpy(dtype=float)
    df["sm_clock_mhz"] = cell_clock  # the clock the cell's samples ran at (between batches where read there)
    df["clock_low"] = np.asarray(cell_clock < CLOCK_FRACTION * df["ceiling_clock_mhz"].to_numpy(), dtype=bool)
    ok = ok & ~df["clock_low"]
    df["claimable"] = ok
    df["peak_bandwidth_measured_gbps"] = own_bw / 1e9
    df["peak_tflops_measured"] = own_pf / 1e12
    # The compute roof at the cell's own clock: a tensor core's rate scales with the SM clock, so a GEMM ceiling
    # timed at 1515 MHz is a lower roof than a cell at 1875 MHz can reach. Memory-bound cells keep the copy's.
    scale = np.where(compute, cell_clock / df["ceiling_clock_mhz"].to_numpy(dtype=float), 1.0)
    own_pf_clock = own_pf * np.where(np.isfinite(scale), scale, 1.0)
    df["peak_tflops_at_clock"] = own_pf_clock / 1e12
    att = attainable(df["arithmetic_intensity"], own_pf_clock, own_bw)
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

    # A cell above its own run's roof beyond noise is a finding to explain, never a point silently above the line.
    excess = df["roofline_fraction_measured"] - 1
    rse = df["rse_median"].astype(float) if "rse_median" in df else pd.Series(np.nan, index=df.index)
    df["above_roof"] = (excess > ROOF_SIGMA * rse.fillna(0)) & ok
    df["above_roof_reason"] = [above_roof_reason(r) if a else "" for a, (_, r) in zip(df["above_roof"], df.iterrows())]

    return judge_unpaired(df, rules)


def judge_unpaired(df: pd.DataFrame, rules=None) -> pd.DataFrame:
    """Speedups within one cell (one precision and math mode), among claimable rows (correct, unthrottled), in the
    three frames: GPU time (median_ms), CUDA-graph replay (graph_median_ms), the Python loop (loop_ms); and the
    verdict in each: faster / slower only beyond noise (analysis/aa_floors.noise_floor: the verdict rules' k_sigma
    standard errors, their floor, and the run's A/A floors where the rows carry them), else a tie."""
    ok = flags(df, "claimable")
    key = pd.MultiIndex.from_frame(df[CELL])
    for base in ("builtin", "naive"):
        for frame, col in FRAMES.items():
            if col not in df:
                df[col] = np.nan
            b = df[ok & (df["impl"] == base)].set_index(CELL)[col]
            b = b[~b.index.duplicated()]
            name = f"speedup_vs_{base}" if frame == "gpu" else f"{frame}_speedup_vs_{base}"
            df[name] = b.reindex(key).to_numpy() / df[col].where(ok).to_numpy()
        if "rse_median" not in df:
            continue
        b_rse = df[ok & (df["impl"] == base)].set_index(CELL)["rse_median"]
        b_rse = b_rse[~b_rse.index.duplicated()].reindex(key).to_numpy(dtype=float)
        for frame, col in FRAMES.items():
            prefix = "" if frame == "gpu" else f"{frame}_"
            b_ms = df[ok & (df["impl"] == base)].set_index(CELL)[col]
            b_ms = b_ms[~b_ms.index.duplicated()].reindex(key).to_numpy(dtype=float)
            noise = noise_floor(df, b_rse, col, rules, b_ms)
            s_ = df[f"{prefix}speedup_vs_{base}"].to_numpy(dtype=float)
            df[f"{prefix}verdict_vs_{base}"] = np.select([~np.isfinite(s_), s_ - 1 > noise, 1 - s_ > noise],
                                                         ["", "faster", "slower"], default="tie")
    return df


CLOCK_FRACTION = 0.9  # a cell's SM clock under 90 % of its run's ceiling clock: flagged, no claim
ROOF_SIGMA = 3.0  # above the roof by more than 3 standard errors of its median: a finding
FRAMES = {"gpu": "median_ms", "graph": "graph_median_ms", "loop": "loop_ms"}


def above_roof_reason(r: pd.Series) -> str:
    """Why a cell can sit above its measured roof: the explanation the paper lists beside it."""
    if r.get("l2_resident"):
        return "working set under the L2: served partly from cache despite the flush"
    if r.get("bound") == "compute":
        return ("faster than every GEMM the ceilings job timed in this mode (cuBLAS and our Triton, "
                "at its shapes): the compute ceiling is a measured GEMM, not the hardware's peak")
    return ("reads more than it writes: the copy ceiling moves equal read and write traffic, and HBM turns "
            "read-heavy traffic around faster than an even mix")


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
    cost (docs/archive/performance-rounds.md)."""
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
        rows.append(
            dict(zip(["gpu", "kernel", "impl", "dtype", "pass"], key), points=len(g), fixed_us=fixed, marginal_tbs=rate,
                 size=int(g.index[-1]), time_us=t, fixed_share=fixed / t))
    cols = [
        "gpu", "kernel", "impl", "dtype", "pass", "points", "fixed_us", "marginal_tbs", "size", "time_us", "fixed_share"
    ]
    return pd.DataFrame(rows, columns=cols)


PAIRED_KEY = ["gpu", "kernel", "dtype", "shape", "pass", "impl"]


def apply_paired(df: pd.DataFrame, table: pd.DataFrame, rules=None) -> pd.DataFrame:
    """The verdicts from the paired rounds (analysis/paired.verdict_table) in place of the unpaired rule's, where a
    cell has them: per base and frame, ``{frame_}verdict_vs_<base>`` becomes the paired verdict and
    ``{frame_}paired_speedup_vs_<base>`` (with ``_lo``/``_hi``, its interval) the per-round speedup, whose clock
    both sides shared; ``verdict_method_vs_<base>`` says which rule gave the GPU-time verdict (paired or
    unpaired). Cells without rounds keep the unpaired verdict."""
    if table is None or table.empty:
        for base in ("builtin", "naive"):
            df[f"verdict_method_vs_{base}"] = np.where(
                df.get(f"verdict_vs_{base}", pd.Series("", index=df.index)).astype(str) != "", "unpaired", "")
        return df
    t = table[(table["copy"] == 0) & (table["aa"] != "twin")].copy()
    t[PAIRED_KEY] = t[PAIRED_KEY].astype(str)
    key = pd.MultiIndex.from_frame(df[PAIRED_KEY].astype(str))
    claimable = flags(df, "claimable").to_numpy() if "claimable" in df else np.ones(len(df), dtype=bool)
    for base in ("builtin", "naive"):
        method = np.where(df.get(f"verdict_vs_{base}", pd.Series("", index=df.index)).astype(str) != "", "unpaired", "")
        for frame in FRAMES:
            prefix = "" if frame == "gpu" else f"{frame}_"
            p = t[(t["base"] == base) & (t["frame"] == frame)].drop_duplicates(PAIRED_KEY).set_index(PAIRED_KEY)
            got = p.reindex(key)
            has = got["verdict"].notna().to_numpy() & (got["verdict"].astype(str) != "").to_numpy() & claimable
            col = f"{prefix}verdict_vs_{base}"
            current = df[col].to_numpy(dtype=object) if col in df else np.full(len(df), "", dtype=object)
            df[col] = np.where(has, got["verdict"].to_numpy(dtype=object), current)
            for name, src in (("paired_speedup", "speedup"), ("paired_lo", "lo"), ("paired_hi", "hi")):
                df[f"{prefix}{name}_vs_{base}"] = np.where(has, got[src].to_numpy(dtype=float), np.nan)
            # the rounds' length class (their faster side's median): what the paired verdict was judged by
            df[f"{prefix}paired_class_vs_{base}"] = np.where(has, got["size_class"].astype(str).to_numpy(), "")
            if frame == "gpu":
                method = np.where(has, "paired", method)
        df[f"verdict_method_vs_{base}"] = method
    return df


def build(raw_paths, ceiling_paths, out: str, paired_paths=(), verdict_settings: dict | None = None) -> pd.DataFrame:
    """The metrics of one (gpu, kernel): its unpaired verdicts, then its paired ones where it has rounds (the run's
    A/A floors come later, over every kernel: concat)."""
    from analysis.paired import read_rounds, verdict_table
    from rooflab.io import CEILING_COLUMNS, read_raw_many, read_results, write_parquet
    from rooflab.verdicts import VerdictRules

    raw = read_raw_many(raw_paths)
    ceilings = pd.concat([read_results(p, CEILING_COLUMNS) for p in ceiling_paths], ignore_index=True)
    rules = VerdictRules.from_config(verdict_settings)
    metrics = apply_paired(compute_metrics(raw, ceilings, rules), verdict_table(read_rounds(paired_paths), rules))
    write_parquet(metrics, out)
    return metrics


def concat(paths, out: str, floor_paths=(), verdict_settings: dict | None = None) -> pd.DataFrame:
    """results/metrics.parquet: the per-(gpu, kernel) metrics files one after the other, every verdict judged again
    beyond its GPU's run-level A/A floors (``floor_paths``: results/paired/floors_<gpu>.csv; analysis/aa_floors:
    measured over every kernel of the run, so applied here and not per kernel, where a kernel's edit would make every
    other kernel's metrics stale)."""
    from analysis.aa_floors import apply_floors, read_floors
    from rooflab.io import write_parquet
    from rooflab.verdicts import VerdictRules

    frames = [pd.read_parquet(p) for p in paths]
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    df = apply_floors(df, read_floors(floor_paths), VerdictRules.from_config(verdict_settings))
    write_parquet(df, out)
    return df


def main(argv=None) -> None:
    """python -m analysis.metrics --raw R.parquet... --ceilings C.parquet... --out M.parquet   (compute)
       python -m analysis.metrics --concat M1.parquet... --out results/metrics.parquet       (concatenate)"""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--raw", nargs="*", default=[])
    ap.add_argument("--ceilings", nargs="*", default=[])
    ap.add_argument("--paired", nargs="*", default=[], help="the kernel's paired rounds (rooflab/paired.py)")
    ap.add_argument("--verdicts", default="{}", help="config verdicts, as JSON (rooflab/verdicts.py)")
    ap.add_argument("--floors", nargs="*", default=[], help="with --concat: results/paired/floors_<gpu>.csv files")
    ap.add_argument("--concat", nargs="*", default=None, help="per-kernel metrics files to concatenate")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    import json

    m = concat(a.concat, a.out, a.floors, json.loads(a.verdicts)) if a.concat is not None else \
        build(a.raw, a.ceilings, a.out, a.paired, json.loads(a.verdicts))
    status = m["status"] if "status" in m else pd.Series(dtype=str)
    print(f"{len(m)} rows, {int((status == 'ok').sum())} ok")


if __name__ == "__main__":
    main()
