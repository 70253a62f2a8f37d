"""The number macros of the paper (macros.tex): the headline GPU's numbers, fixed costs, findings, calibration,
provenance and repeatability. Every macro paper/main.tex uses is always defined (n/a where the data cannot give it),
so the paper always builds."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from analysis import calibration, origin
from analysis.claims import FRAME_LABEL, FRAME_TAG, findings, impl_names, speedup_column, tied_best
from analysis.columns import flags
from analysis.latex import (DTYPE_TAG, IMPL_TAG, UNIT_TAG, Macros, camel, count_phrase, fmt, gpu_tag, pass_tag,
                            tex_escape)
from analysis.metrics import CLOCK_FRACTION, FIT_MIN_SIZE, ROOF_SIGMA, measured_peaks
from analysis.selection import compile_dropped_output, compile_joint_graph, largest, most_common, timed, verdict
from rooflab.gpus import SPECS
from rooflab.timing import TOUCH_STRIDE_BYTES

# Macros paper/main.tex uses: always defined (as n/a when the data cannot give them), so the paper always builds.
ALWAYS = [
    "HeadlineGpu", "HeadlineGpuKey", "CopyGbps", "CopyFractionDatasheet", "GemmFpTflops", "GemmTfTflops",
    "GemmBfTflops", "GemmHalfTflops", "DatasheetBandwidthTBs", "DatasheetBfTflops", "CellsTotal", "CellsOk",
    "CellsNotTimed", "CellsMismatch", "CellsFailed", "CellsSkipped", "NumKernels", "NumGpus", "GpuList", "LargestSize",
    "CopySameSizeBfGbps", "CopySameSizeBfFraction", "CopySameSizeN", "TimingPlacements", "TimingInstances",
    "TimingWarmedCells", "TimingCells", "TimingTouchKib"
]
# (HeadlineSource, DataOrigin and the Provenance* macros: origin_macros; Findings*: findings_macros; Calibration*:
# calibration_macros; all always defined)
# (the Repeat* macros are always defined by repeatability_macros, the Fixed* and Marginal* ones by fixed_cost_macros)
FIXED_COST_MACROS = [
    "FixedUsMin", "FixedUsMax", "MarginalTBsMin", "MarginalTBsMax", "FixedShareMax", "FixedShareMaxKernel",
    "FixedShareMaxDtype", "FixedShareMaxSize", "FixedShareMaxMarginalTBs"
]


def cards_sentence(gpus: list[str], gpu: str) -> str:
    """The threats' word on the cards timed: one, or the headline ``gpu`` whose numbers the text quotes and the
    others the tables and appendices show."""
    others = [g.upper() for g in gpus if g != gpu]
    if not others:
        return "One card was timed: the timings depend on its clocks, power limit and driver"
    return (f"The text's numbers are one card's, the {tex_escape(gpu.upper())} (the {tex_escape(', '.join(others))} "
            "appears in the tables and appendices): they depend on its clocks, power limit and driver")


def make_macros(metrics: pd.DataFrame, ceilings: pd.DataFrame, gpu: str) -> Macros:
    """The headline GPU's macros from GPU rows and ceilings only (the caller leaves the CPU's out)."""
    m = Macros()
    ok = timed(metrics, gpu)
    spec = SPECS.get(gpu)
    m.add("HeadlineGpu", tex_escape(spec.name if spec else (gpu or "no GPU")),
          "the device whose numbers the text quotes")
    m.add("HeadlineGpuKey", tex_escape(gpu or "none"))
    gpus = list(dict.fromkeys(metrics["gpu"]))
    m.add("NumGpus", str(len(gpus)))
    m.add("GpuList", tex_escape(", ".join(gpus) or "none"))
    m.add("CardsTimed", cards_sentence(gpus, gpu), "threats to validity: the cards timed")
    m.add("NumKernels", str(metrics["kernel"].nunique()))
    c = pd.Series(measured_peaks(ceilings).get(gpu, {}), dtype=float)  # the newest run of the headline GPU
    if "copy" in c:
        m.add("CopyGbps", fmt(c["copy"] / 1e9), "measured device-to-device copy, read + write")
        if spec:
            m.add("CopyFractionDatasheet", fmt(100 * c["copy"] / spec.mem_bandwidth, 3), "percent of datasheet")
    same = sorted(k for k in c.index if re.fullmatch(r"copy_[a-z0-9]+_\d+", k))  # the copy timed like a cell
    for key in same:
        _, dname, n = key.rsplit("_", 2)
        if dname in DTYPE_TAG and "copy" in c:
            m.add(f"CopySameSize{DTYPE_TAG[dname]}Gbps", fmt(c[key] / 1e9), f"{n}^2 {dname} copy, timed like a cell")
            m.add(f"CopySameSize{DTYPE_TAG[dname]}Fraction", fmt(c[key] / c["copy"], 3), "of the large copy")
            m.add("CopySameSizeN", n)
    for unit, tag in UNIT_TAG.items():
        if f"gemm_{unit}" in c:
            m.add(f"Gemm{tag}Tflops", fmt(c[f"gemm_{unit}"] / 1e12), f"best measured GEMM, {unit}")
    m.add("CeilingClocksSentence", ceiling_clocks_sentence(ceilings, gpu), "the SM clock each GEMM ceiling ran at")
    if spec:
        m.add("DatasheetBandwidthTBs", fmt(spec.mem_bandwidth / 1e12))
        m.add("DatasheetBfTflops", fmt(spec.bf16_flops / 1e12))
    for key, s in SPECS.items():
        t = gpu_tag(key)
        m.add(f"Sms{t}", str(s.sms), s.name)
        m.add(f"DatasheetBandwidth{t}TBs", fmt(s.mem_bandwidth / 1e12))
        m.add(f"DatasheetBf{t}Tflops", fmt(s.bf16_flops / 1e12))
    all_rows = metrics[metrics["gpu"] == gpu]
    m.add("CellsTotal", str(len(all_rows)))
    for status in ("ok", "not_timed", "mismatch", "failed", "skipped"):
        m.add(f"Cells{camel(status)}", str(int((all_rows["status"] == status).sum())))
    m.add("CellsProblemAllGpus", str(int(metrics["status"].isin(["mismatch", "failed"]).sum())))
    fb = all_rows[(all_rows["impl"] == "compile") & (all_rows["pass"] == "fwd+bwd") & (all_rows["status"] == "ok")]
    m.add("CompileFwdBwdCells", str(len(fb)), "timed torch.compile fwd+bwd cells on the headline device")
    old = int(compile_dropped_output(fb).sum()) if "timestamp" in fb else None
    joint = int(compile_joint_graph(fb).sum()) if "timestamp" in fb else None
    m.add("CompileFwdBwdGradientsOnly", "n/a" if old is None else str(old),
          "... of them timed when the compiled function returned the gradients alone (its output's store skipped)")
    m.add("CompileFwdBwdJointGraph", "n/a" if joint is None else str(joint),
          "... of them timed with forward and backward compiled as one graph (before the training-step frame)")
    rule = "" if old is None or not len(fb) else (
        f"All {len(fb)} \\texttt{{torch.compile}} forward-and-backward cells of the main sweep store the output."
        if not old else f"{old} of the {len(fb)} \\texttt{{torch.compile}} forward-and-backward cells of the main "
        "sweep return the gradients alone, the output's store skipped, which flatters \\texttt{torch.compile}.")
    if joint is not None and len(fb):
        rule += (f" All {len(fb)} ran as a training step runs them." if not joint else
                 f" {joint} of the {len(fb)} were timed with forward and backward as one graph, which may flatter "
                 "\\texttt{torch.compile}.")
    m.add("CompileFwdBwdRule", rule.strip(),
          "the sentences saying how many compile fwd+bwd cells predate the output-storing rule and the split frame")
    if not ok.empty:
        m.add("LargestSize", str(int(ok["size"].max())), "largest N timed on the headline device")
    if "placements" in ok and ok["placements"].notna().any():
        m.add("TimingPlacements", most_common(ok, "placements", "n/a"),
              "input sets at distinct addresses a cell's samples rotate through (most cells)")
    if not ok.empty:
        m.add("TimingInstances", most_common(ok, "instances", "1"),
              "fresh starts a cell's samples are pooled from (most cells; rows from before the option: 1)")
    ran = all_rows[all_rows["status"] == "ok"]  # every timed cell, claimable or not: the count CellsOk gives
    m.add("TimingWarmedCells", str(int(flags(ran, "warm_translations").sum())),
          "timed cells whose buffers' translations were warmed")
    m.add("TimingCells", str(len(ran)), "timed cells on the headline device (= CellsOk)")
    m.add("TimingTouchKib", str(TOUCH_STRIDE_BYTES >> 10), "warm_translations reads one element per this many KiB")
    for kernel, g in ok.groupby("kernel"):
        m.add(f"{camel(kernel)}LargestSize", str(int(g["size"].max())))
    for (kernel, impl, dtype, pass_), g in largest(ok).groupby(["kernel", "impl", "dtype", "pass"]):
        row = g.iloc[0]
        base, tag = f"{camel(kernel)}{IMPL_TAG[impl]}", DTYPE_TAG[dtype] + pass_tag(pass_)
        n = f"N={int(row['size'])}"
        m.add(f"{base}Gbps{tag}", fmt(row["achieved_gbps"]), f"GB/s in GPU time, {n}")
        m.add(f"{base}Tflops{tag}", fmt(row["achieved_tflops"]), "TFLOP/s in GPU time")
        m.add(f"{base}TimeUs{tag}", fmt(row["median_ms"] * 1e3), "GPU time (median), microseconds")
        m.add(f"{base}GraphTimeUs{tag}", fmt(row.get("graph_median_ms", np.nan) * 1e3), "CUDA graph, microseconds")
        m.add(f"{base}LoopTimeUs{tag}", fmt(row.get("loop_ms", np.nan) * 1e3),
              "per call in a Python loop (launch included), microseconds")
        m.add(f"{base}RooflineFraction{tag}", fmt(row["roofline_fraction_measured"]), "of the measured roofline")
        m.add(f"{base}RooflineFractionDatasheet{tag}", fmt(row["roofline_fraction_datasheet"]))
        m.add(f"{base}BandwidthFraction{tag}", fmt(row["bandwidth_fraction_measured"]), "of measured copy")
        for against, suffix in (("builtin", ""), ("naive", "Naive")):  # each speedup in its three frames
            for frame, ftag in FRAME_TAG.items():
                m.add(f"{base}{ftag}Speedup{suffix}{tag}", fmt(row.get(speedup_column(frame, against), np.nan)),
                      f"over the {against} PyTorch, {FRAME_LABEL[frame]}")
            m.add(f"{base}Verdict{suffix}{tag}", verdict(row, against),
                  f"against the {against} PyTorch in GPU time: faster/slower beyond noise, else tie")
        m.add(f"{base}ModelError{tag}", fmt(row["model_error_measured"]), "measured / model (measured ceilings) - 1")
        m.add(f"{base}ModelRatio{tag}", fmt(row["model_error_measured"] + 1), "measured / roofline-model time")
    r = calibration.ratios(metrics, gpu)
    for (kernel, dtype, pass_), g in largest(ok).groupby(["kernel", "dtype", "pass"]):
        base, tag = camel(kernel), DTYPE_TAG[dtype] + pass_tag(pass_)
        best = tied_best(g)
        top = best.iloc[[0]]
        m.add(f"{base}BestImpl{tag}", tex_escape(impl_names(best["impl"])),
              "fastest correct implementation in GPU time, or every one tied with it within noise")
        m.add(f"{base}BestTied{tag}", str(len(best)), "implementations tied for the fastest (1: no tie)")
        m.add(f"{base}BestTimeUs{tag}", fmt(top["median_ms"].iloc[0] * 1e3), "GPU time of the fastest")
        m.add(f"{base}Intensity{tag}", fmt(top["arithmetic_intensity"].iloc[0]), "FLOP/byte")
        m.add(f"{base}Bound{tag}", tex_escape(str(top["bound"].iloc[0])), "memory- or compute-bound on this device")
        for key in SPECS:
            m.add(f"{base}ModelTimeUs{tag}{gpu_tag(key)}", fmt(calibration.model_ms(top, key, r)[0] * 1e3),
                  f"roofline model on the {key} datasheet, calibrated by the {gpu} (model, not measured)")
    clock_macros(m, metrics, gpu)
    for name in ALWAYS:
        m.add(name, "n/a", "not available from this data")
    return m


def clock_macros(m: Macros, metrics: pd.DataFrame, gpu: str) -> None:
    """The SM clock each side of the matmul comparison ran at (at the largest size, every correct row, throttled or
    not), and how many cells ran under CLOCK_FRACTION of their run's ceiling clock and so make no claim."""
    rows = metrics[(metrics["gpu"] == gpu) & (metrics["status"] == "ok")]
    m.add("ClockFractionPct", fmt(100 * CLOCK_FRACTION),
          "a cell under this percent of its run's ceiling clock: no claim")
    low = flags(rows, "clock_low")
    m.add("ClockLowCells", str(int(low.sum())), "timed cells flagged for a low SM clock")
    m.add("ClockLowCellsText", count_phrase(int(low.sum()), "cell"), "the same, with its noun")
    mm, n = int((low & (rows["kernel"] == "matmul")).sum()), int(low.sum())
    m.add("ClockLowMatmulCells", str(mm), "of them matmul cells")
    if n == 0:
        which = ""
    elif n == 1:
        which = ", a matmul one" if mm else ", not a matmul one"
    else:
        which = ", all matmul" if mm == n else (", none of them matmul" if mm == 0 else f", {mm} of them matmul")
    m.add("ClockLowCellsKernels", (count_phrase(n, "cell") if n else "no cell") + " here" + which,
          "the flagged cells and how many are matmul, in words")
    mm = rows[rows["kernel"] == "matmul"]
    if "sm_clock_after_mhz" in mm and len(mm):
        mm = mm[mm["size"] == mm["size"].max()]
        m.add("MatmulClockSize", str(int(mm["size"].iloc[0])), "the size the matmul clocks are quoted at")
        for (impl, dtype), g in mm.groupby(["impl", "dtype"]):
            tag = f"Matmul{IMPL_TAG[impl]}SmClockMhz{DTYPE_TAG[dtype]}"
            m.add(tag, fmt(g["sm_clock_after_mhz"].iloc[0]), "SM clock after the cell, MHz")
        if "ceiling_clock_mhz" in mm:
            m.add("MatmulCeilingClockMhz", fmt(mm["ceiling_clock_mhz"].median()),
                  "the clock the cells' run's ceilings ran at (or the card's maximum where not recorded), MHz")
    for name in ("MatmulClockSize", "MatmulCeilingClockMhz", "MatmulBuiltinSmClockMhzBf", "MatmulTritonSmClockMhzBf"):
        m.add(name, "n/a", "not available from this data")


def fixed_cost_macros(m: Macros, ours: pd.DataFrame) -> None:
    """The range of our kernels' fixed costs and marginal rates (forward pass; ``ours``: ours_fixed_costs), and the
    kernel whose fixed cost is the largest part of its call at the largest size: the text quotes these, the table
    lists every kernel."""
    m.add("FitMinSize", str(FIT_MIN_SIZE), "the fixed-cost fit uses the sizes from here on")
    f = ours[ours["pass"] == "fwd"].dropna(subset=["fixed_share", "marginal_tbs"])
    if f.empty:
        for name in FIXED_COST_MACROS:
            m.add(name, "n/a", "no fixed-cost fit on this device")
        return
    m.add("FixedUsMin", fmt(f["fixed_us"].min()), "smallest fixed cost of our kernels, microseconds")
    m.add("FixedUsMax", fmt(f["fixed_us"].max()), "largest fixed cost of our kernels, microseconds")
    m.add("MarginalTBsMin", fmt(f["marginal_tbs"].min()), "lowest marginal rate of our kernels, TB/s")
    m.add("MarginalTBsMax", fmt(f["marginal_tbs"].max()), "highest marginal rate of our kernels, TB/s")
    top = f.loc[f["fixed_share"].idxmax()]
    m.add("FixedShareMax", fmt(100 * top["fixed_share"]), "percent of the call at the largest size")
    m.add("FixedShareMaxKernel", tex_escape(top["kernel"]))
    m.add("FixedShareMaxDtype", tex_escape(top["dtype"]))
    m.add("FixedShareMaxSize", str(int(top["size"])))
    m.add("FixedShareMaxMarginalTBs", fmt(top["marginal_tbs"]), "that kernel's marginal rate, TB/s")


def findings_macros(m: Macros, metrics: pd.DataFrame) -> None:
    f = findings(metrics)
    m.add("FindingsAboveRoof", str(int(f["beyond_noise"].sum())), "cells above their roof beyond noise")
    m.add("FindingsAtRoof", str(int((~f["beyond_noise"].astype(bool)).sum())), "cells above their roof within noise")
    m.add("RoofSigma", fmt(ROOF_SIGMA), "above the roof beyond this many standard errors: a finding")


def calibration_macros(m: Macros, metrics: pd.DataFrame, gpu: str) -> None:
    """The ratios the projections are scaled by and the model's error on the headline GPU, by bound (n/a without a
    datasheet entry)."""
    t, r = calibration.projections(metrics, gpu)
    m.add("CalibrationGpu", tex_escape(gpu or "none"), "the GPU whose measured / datasheet ratios scale the models")
    m.add("CalibrationBandwidthRatio", fmt(r["bandwidth"]), "measured copy / datasheet bandwidth")
    for unit, tag in UNIT_TAG.items():
        m.add(f"Calibration{tag}Ratio", fmt(r[unit]), f"best measured GEMM / datasheet peak, {unit}")
    err = calibration.error(t).set_index("bound")
    for bound, btag in (("memory", "Memory"), ("compute", "Compute")):
        m.add(f"Calibration{btag}Cells", str(int(err.loc[bound, "cells"])), f"{bound}-bound fastest cells")
        for stat, stag in (("median", "Median"), ("min", "Min"), ("max", "Max")):
            m.add(f"Calibration{btag}{stag}", fmt(err.loc[bound, stat]), f"measured / model, {bound}-bound, {stat}")


def origin_macros(m: Macros, gpu_runs: pd.DataFrame, gpu: str, cpu_runs: pd.DataFrame) -> None:
    """HeadlineSource (this run | committed reference), DataOrigin (the title line: where the GPU and the CPU data
    come from) and the provenance counts."""
    datasets = gpu_runs.drop_duplicates("gpu")
    head = datasets[datasets["gpu"] == gpu]
    m.add(
        "HeadlineSource",
        tex_escape(origin.measured_words(head["directory"].iloc[0])) +
        ", Appendix~\\ref{sec:origin}" if len(head) else "no GPU data", "where the headline device's rows come from")
    parts = [
        "GPU data: " +
        (", ".join(tex_escape(origin.origin_phrase(g, d))
                   for g, d in zip(datasets["gpu"], datasets["directory"])) or "none")
    ]
    if len(cpu_runs):
        cpu = cpu_runs.iloc[0]
        parts.append("CPU data: " + tex_escape(origin.measured_words(cpu["directory"])) + ", Appendix~\\ref{sec:cpu}")
    m.add("DataOrigin", "; ".join(parts), "the title line: where every dataset comes from")
    m.add("ProvenanceRuns", str(len(gpu_runs)), "runs (or legacy commit and date groups) in the GPU data")
    m.add("ProvenanceDatasets", str(len(datasets)), "GPU datasets")


def repeatability_macros(m: "Macros", runs: dict[str, pd.DataFrame], gpu: str) -> None:
    """RepeatEventLongMaxPct, ... for the headline GPU (n/a without a run), and the goals they are judged by."""
    from analysis.repeatability import EVENT_MIN_MS, GOALS, GRAPH_MAX_MS, process_count, summarize

    summary = summarize(runs[gpu]).set_index("group") if gpu in runs else None
    for group, tag in (("event_long", "EventLong"), ("graph_short", "GraphShort"), ("event_short", "EventShort")):
        for stat, stag in (("max_abs_rel_diff", "Max"), ("median_abs_rel_diff", "Median")):
            value = summary.loc[group, stat] * 100 if summary is not None else np.nan
            m.add(f"Repeat{tag}{stag}Pct", fmt(value, 2), f"over pairs of processes, {group}, percent")
        m.add(f"Repeat{tag}Cells", str(int(summary.loc[group, "n"])) if summary is not None else "n/a")
    m.add("RepeatRuns", str(process_count(runs[gpu])) if gpu in runs else "n/a", "processes compared, every pair")
    m.add("RepeatInstances",
          most_common(runs[gpu], "instances_1", "1") if gpu in runs else "n/a",
          "fresh starts per cell in the repeatability runs (tables from before the option: 1)")
    m.add("RepeatLongUs", fmt(EVENT_MIN_MS * 1e3), "long cells start here, microseconds")
    m.add("RepeatShortUs", fmt(GRAPH_MAX_MS * 1e3), "short cells end here, microseconds")
    m.add("RepeatGoalEventLongPct", fmt(GOALS["event_long"] * 100), "goal, percent")
    m.add("RepeatGoalGraphShortPct", fmt(GOALS["graph_short"] * 100), "goal, percent")


def ceiling_clocks_sentence(ceilings: pd.DataFrame, gpu: str) -> str:
    """Each GEMM ceiling of the headline GPU's newest run with the SM clock its samples ran at (metrics.run_peaks): a
    ceiling timed at a lower clock is lower for that reason too (BF16 and FP16 share one datasheet peak)."""
    from analysis.metrics import run_peaks

    runs = [p for (g, _), p in run_peaks(ceilings).items() if g == gpu] if len(ceilings) else []
    if not runs:
        return ""
    newest = max(runs, key=lambda p: p["timestamp"])
    said = [
        f"{label} {fmt(newest[f'gemm_{unit}'] / 1e12)}~TFLOP/s at {fmt(newest[f'gemm_{unit}@clock'])}~MHz"
        for unit, label in (("bf16", "BF16"), ("fp16", "FP16"), ("tf32", "TF32"), ("fp32", "FP32"))
        if f"gemm_{unit}" in newest and pd.notna(newest.get(f"gemm_{unit}@clock", np.nan))
    ]
    if not said:
        return ""
    return ("Each GEMM ceiling is the best cuBLAS or Triton product of its math mode, at the SM clock its samples ran "
            "at (" + ", ".join(said) + "): a ceiling timed at a lower clock is lower for that reason too.")
