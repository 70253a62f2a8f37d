"""metrics + ceilings -> the generated LaTeX the paper inputs: number macros, tables, per-kernel sections, figures.

Every measured number in paper/main.tex arrives through here (tests/test_paper.py fails if the hand-written .tex
holds one). Macro names are letters only: \\GeluTritonGbpsBf = GeLU, Triton, achieved GB/s, bfloat16, at the
largest size measured on the headline GPU (the first GPU with timed data).

What the paper claims follows analysis/claims.py: every time and speedup names its frame (GPU time, CUDA graph,
Python loop), a tie within noise is named as a tie, and every cell above its roof is listed. The GPU paper holds GPU
rows only; CPU rows get a section of their own (cpu.tex) with only the concepts that apply to a CPU. Every dataset's
origin (this run, or a committed reference) is in the provenance table (analysis/origin.py), and projections onto
other GPUs are calibrated by the measured GPU (analysis/calibration.py).

    python -m analysis.paper_inputs --metrics results/metrics.parquet --ceilings a.parquet ... --outdir DIR
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis import calibration, origin  # noqa: E402
from analysis.claims import (CPU_FRAME_LABEL, FRAME_LABEL, FRAME_MEANING, FRAME_TAG, NO_FRAME, findings,  # noqa: E402
                             impl_names, speedup_column, split_devices, tied_best)
from analysis.metrics import FIT_MIN_POINTS, FIT_MIN_SIZE, ROOF_SIGMA, fixed_costs, measured_peaks  # noqa: E402
from rooflab.gpus import CPU_KEY, SPECS  # noqa: E402
from rooflab.kernel import IMPL_LABEL as IMPL_NAME  # noqa: E402
from rooflab.timing import TOUCH_STRIDE_BYTES  # noqa: E402

DTYPE_TAG = {"float32": "Fp", "tf32": "Tf", "bfloat16": "Bf", "float16": "Half"}
IMPL_TAG = {"naive": "Naive", "builtin": "Builtin", "compile": "Compile", "triton": "Triton", "cuda": "Cuda"}
# column heads of the summary table, short enough for the page (the caption says which are ours)
IMPL_SHORT = {"naive": "naive", "builtin": "builtin", "compile": "compile", "triton": "Triton", "cuda": "CUDA"}
# GPU keys hold digits, macro names may not: a100 -> AOneHundred, h200 -> HTwoHundred.
DIGIT_WORDS = ["Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine"]
GPU_TIME = f"GPU time ({FRAME_MEANING['gpu']})"
# The figures of one GPU, in the order the paper shows them, with what each says (and in which frame).
GPU_FIGURE_CAPTIONS = {
    "roofline": f"Roofline in {GPU_TIME}: measured points against the datasheet (solid) and measured (dashed) "
                "ceilings; starred points lie above their roof (Table~\\ref{tab:findings}).",
    "speedup": f"Speedup over the PyTorch builtin in {GPU_TIME}, per kernel, implementation and size (blue: faster, "
               "red: slower, beyond noise; white: a tie within noise); blank cells have no correct, timed pair.",
    "scaling": "Time against size per kernel (log-log). Solid: GPU time of one call (L2 flushed), with its p20--p80 "
               "band; dashed: CUDA graph replay; thin with crosses: Python loop, back-to-back calls with launch "
               "included, which sit on the launch floor at small sizes; dotted guides show the N$^2$ or N$^3$ work.",
    "fusion": f"GPU kernels launched per call (torch.profiler; a count, {NO_FRAME}): what fusing an expression "
              "into one kernel saves.",
}
PROJECTION_FIGURE_CAPTIONS = {
    "projection": "Roofline model (calibrated: each datasheet peak scaled by this device's measured / datasheet "
                  "ratio) of each kernel at its largest size on four datasheet GPUs, its whiskers the range of "
                  "measured / model on this device; beside them the GPU time measured here (builtin and fastest).",
    "wave": f"Matrix product in {GPU_TIME}: achieved TFLOP/s of Triton and the builtin against N, beside the "
            "wave-quantisation model scaled to the measured cuBLAS peak; sizes that are no multiple of the 128 tile "
            "are marked.",
}
KERNEL_FIGURE_CAPTIONS = {
    "bandwidth": f"Achieved bandwidth in {GPU_TIME} against size, per implementation and dtype, bars from the "
                 "p80 to the p20 time; dashed: measured copy bandwidth.",
}
# The CPU's figures: only those whose concepts apply (no datasheet roof, no CUDA graph, no wave model, no projection).
CPU_FIGURE_CAPTIONS = {
    "roofline": "Roofline of the CPU in host time: points against the copy and GEMM ceilings measured on this CPU "
                "(dashed); the CPU has no datasheet roof.",
    "speedup": "Speedup over the PyTorch builtin on the CPU in host time (one call), per kernel, implementation and "
               "size (blue: faster, red: slower, beyond noise; white: a tie within noise).",
    "scaling": "Time against size on the CPU (log-log). Solid: host time of one call, with its p20--p80 band; thin "
               "with crosses: Python loop, back-to-back calls; dotted guides show the N$^2$ or N$^3$ work.",
    "fusion": f"aten operators dispatched per call on the CPU (torch.profiler; a count, {NO_FRAME}): nothing "
              "is launched on a CPU, so the operators stand in for launches.",
}


def gpu_tag(key: str) -> str:
    """a100 -> AOneHundred; h200 -> HTwoHundred; cpu -> Cpu: a GPU key as letters only, for macro names."""
    def spell(digits: str) -> str:
        n = int(digits)
        if n % 100 == 0 and 0 < n < 1000:
            return DIGIT_WORDS[n // 100] + "Hundred"
        return "".join(DIGIT_WORDS[int(d)] for d in digits)
    return "".join(spell(part) if part.isdigit() else part.capitalize()
                   for part in re.findall(r"[a-zA-Z]+|\d+", key))


def pass_tag(pass_: str) -> str:
    """'' for the forward pass (the default), else the pass in letters: fwd+bwd -> FwdBwd."""
    return "" if pass_ == "fwd" else camel(pass_)


def camel(name: str) -> str:
    return "".join(p.capitalize() for p in re.split(r"[^a-zA-Z]+", name) if p)


def tex_escape(s: str) -> str:
    for a, b in [("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("$", r"\$"), ("#", r"\#"),
                 ("_", r"\_"), ("{", r"\{"), ("}", r"\}"), ("~", r"\textasciitilde{}"), ("^", r"\^{}")]:
        s = s.replace(a, b)
    return s


def headline_gpu(metrics: pd.DataFrame) -> str:
    """The first GPU with timed data ('' where no GPU has any: the CPU is never the GPU paper's headline)."""
    gpus = [g for g in dict.fromkeys(metrics.loc[metrics["status"] == "ok", "gpu"]) if g != CPU_KEY]
    return gpus[0] if gpus else ""


def fmt(x: float, digits: int = 3) -> str:
    """A number for the page: `digits` significant digits, thousands grouped (1{,}000, never 1e+03), small ones as
    $1.2\\times10^{-5}$; n/a where there is none."""
    if x is None or not np.isfinite(x):
        return "n/a"
    s = f"{x:.{digits}g}"
    if "e" not in s:
        return s
    if abs(x) >= 1:
        return f"{x:,.0f}".replace(",", "{,}")
    mantissa, exponent = s.split("e")
    return f"${mantissa}\\times10^{{{int(exponent)}}}$"


class Macros:
    def __init__(self):
        self.lines: list[str] = []
        self.names: set[str] = set()

    def add(self, name: str, value: str, comment: str = "") -> None:
        if not re.fullmatch(r"[A-Za-z]+", name):
            raise ValueError(f"bad macro name {name!r}")
        if name in self.names:
            return
        self.names.add(name)
        self.lines.append(f"\\newcommand{{\\{name}}}{{{value}}}" + (f"  % {comment}" if comment else ""))

    def text(self) -> str:
        return "% Generated by analysis/paper_inputs.py from results/metrics.parquet. Do not edit.\n" + \
            "\n".join(self.lines) + "\n"


UNIT_TAG = {"fp32": "Fp", "tf32": "Tf", "bf16": "Bf", "fp16": "Half"}
# Macros paper/main.tex uses: always defined (as n/a when the data cannot give them), so the paper always builds.
ALWAYS = ["HeadlineGpu", "HeadlineGpuKey", "CopyGbps", "CopyFractionDatasheet", "GemmFpTflops", "GemmTfTflops",
          "GemmBfTflops", "GemmHalfTflops", "DatasheetBandwidthTBs", "DatasheetBfTflops", "CellsTotal", "CellsOk",
          "CellsNotTimed", "CellsMismatch", "CellsFailed", "CellsSkipped", "NumKernels", "NumGpus", "GpuList",
          "LargestSize", "CopySameSizeBfGbps", "CopySameSizeBfFraction", "CopySameSizeN", "TimingPlacements",
          "TimingInstances", "TimingWarmedCells", "TimingCells", "TimingTouchKib"]
# (HeadlineSource, DataOrigin and the Provenance* macros: origin_macros; Findings*: findings_macros; Calibration*:
# calibration_macros; all always defined)
# (the Repeat* macros are always defined by repeatability_macros, the Fixed* and Marginal* ones by fixed_cost_macros)
FIXED_COST_MACROS = ["FixedUsMin", "FixedUsMax", "MarginalTBsMin", "MarginalTBsMax", "FixedShareMax",
                     "FixedShareMaxKernel", "FixedShareMaxDtype", "FixedShareMaxSize", "FixedShareMaxMarginalTBs"]


def most_common(df: pd.DataFrame, column: str, absent: str) -> str:
    """The most common value of an integer column, as text; `absent` where the column or its values are missing."""
    values = df[column].dropna() if column in df else pd.Series(dtype=float)
    return str(int(values.mode().iloc[0])) if not values.empty else absent


def timed(metrics: pd.DataFrame, gpu: str) -> pd.DataFrame:
    """Rows the text may claim from: this GPU, correct and timed."""
    ok = metrics["claimable"] if "claimable" in metrics else metrics["status"] == "ok"
    return metrics[ok & (metrics["gpu"] == gpu)]


def largest(ok: pd.DataFrame) -> pd.DataFrame:
    """Per (kernel, dtype, pass), the rows at the largest size measured."""
    return ok[ok["size"] == ok.groupby(["kernel", "dtype", "pass"])["size"].transform("max")]


def verdict(row: pd.Series, base: str) -> str:
    """faster / slower (beyond noise) / tie, in GPU time, of a row against `base`; n/a without a verdict."""
    v = row.get(f"verdict_vs_{base}", "")
    return v if isinstance(v, str) and v else "n/a"


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
    if not ok.empty:
        m.add("LargestSize", str(int(ok["size"].max())), "largest N timed on the headline device")
    if "placements" in ok and ok["placements"].notna().any():
        m.add("TimingPlacements", most_common(ok, "placements", "n/a"),
              "input sets at distinct addresses a cell's samples rotate through (most cells)")
    if not ok.empty:
        m.add("TimingInstances", most_common(ok, "instances", "1"),
              "fresh starts a cell's samples are pooled from (most cells; rows from before the option: 1)")
    warmed = int(ok["warm_translations"].fillna(False).astype(bool).sum()) if "warm_translations" in ok else 0
    m.add("TimingWarmedCells", str(warmed), "timed cells whose buffers' translations were warmed")
    m.add("TimingCells", str(len(ok)), "timed cells on the headline device")
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
    for name in ALWAYS:
        m.add(name, "n/a", "not available from this data")
    return m


def ours_fixed_costs(metrics: pd.DataFrame, gpu: str) -> pd.DataFrame:
    """The fixed-cost fit (analysis/metrics.fixed_costs) of our Triton kernels on this GPU, every pass."""
    f = fixed_costs(metrics)
    return f[(f["gpu"] == gpu) & (f["impl"] == "triton")]


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


def fixed_cost_table(f: pd.DataFrame) -> str:
    """Per Triton kernel, dtype and pass (``f``: ours_fixed_costs): fixed cost, marginal rate, and the fixed share
    of the call at the largest size, all from GPU time."""
    if f.empty:
        return (f"\\begin{{center}}No memory-bound kernel of ours was timed at {FIT_MIN_POINTS} sizes of at least "
                f"{FIT_MIN_SIZE} on this device.\\end{{center}}\n")
    t = f.assign(share=100 * f["fixed_share"])[["kernel", "dtype", "pass", "fixed_us", "marginal_tbs", "size",
                                                  "time_us", "share"]]
    g = FRAME_LABEL["gpu"]
    t.columns = pd.MultiIndex.from_tuples([("", "kernel"), ("", "dtype"), ("", "pass"), (g, "fixed"), (g, "margin"),
                                           (g, "N"), (g, "time"), (g, "fixed share")])
    return table_latex(t, {c: fmt for c in t.columns if c[1] in ("fixed", "margin", "time", "fixed share")},
                       "lllrrrrr")


def table_latex(df: pd.DataFrame, formats: dict | None = None, align: str | None = None) -> str:
    """A booktabs table from a frame (pandas Styler), numbers through fmt(), text escaped. Two-level column heads
    (a MultiIndex: the frame over its columns) become a spanning row."""
    df = df.copy()
    for col in df.columns:
        if not pd.api.types.is_numeric_dtype(df[col]):
            df[col] = df[col].map(lambda v: tex_escape(v) if isinstance(v, str) else v)
    escape = (lambda c: tuple(tex_escape(str(x)) for x in c)) if isinstance(df.columns, pd.MultiIndex) \
        else (lambda c: tex_escape(str(c)))
    fmts = {escape(k): v for k, v in (formats or {}).items()}
    numeric = [pd.api.types.is_numeric_dtype(df[c]) for c in df.columns]
    df.columns = pd.MultiIndex.from_tuples([escape(c) for c in df.columns]) \
        if isinstance(df.columns, pd.MultiIndex) else [escape(c) for c in df.columns]
    styler = df.style.hide(axis="index").format(fmts, na_rep="--")
    align = align or "".join("r" if n else "l" for n in numeric)
    return styler.to_latex(hrules=True, column_format=align, multicol_align="c")


def rate_column(kernel: str) -> tuple[str, str]:
    """(column, unit) a kernel's rate is quoted in: TFLOP/s for the matrix product, GB/s for the rest."""
    return ("achieved_tflops", "TFLOP/s") if kernel == "matmul" else ("achieved_gbps", "GB/s")


def summary_table(metrics: pd.DataFrame, gpu: str, frame: str = "GPU time") -> str:
    """Per kernel and dtype at the largest size: achieved GB/s (TFLOP/s for matmul) of each implementation, in
    `frame` (the median's: GPU time on a GPU, host time on the CPU)."""
    ok = timed(metrics, gpu)
    ok = ok[ok["pass"] == "fwd"]
    if ok.empty:
        return "\\begin{center}No timed measurements on this device.\\end{center}\n"
    big = largest(ok).copy()
    big["value"] = np.where(big["kernel"] == "matmul", big["achieved_tflops"], big["achieved_gbps"])
    table = big.pivot_table(index=["kernel", "dtype", "size"], columns="impl", values="value", aggfunc="first")
    impls = [i for i in IMPL_NAME if i in table.columns]
    table = table[impls].reset_index()
    table["kernel"] = table["kernel"].map(lambda k: f"{k} (TFLOP/s)" if k == "matmul" else k)
    head = f"{frame}: GB/s (matmul: TFLOP/s)"
    table.columns = pd.MultiIndex.from_tuples([("", "kernel"), ("", "dtype"), ("", "N")]
                                              + [(head, IMPL_SHORT[i]) for i in impls])
    return table_latex(table, {c: fmt for c in table.columns[3:]}, "llr" + "r" * len(impls))


def problems_table(metrics: pd.DataFrame, limit: int = 40) -> str:
    """Cells that ran but gave the wrong answer, or failed: listed, never used in a claim. Then, grouped, the cells
    not measured and why."""
    out = []
    bad = metrics[metrics["status"].isin(["mismatch", "failed"])]
    if bad.empty:
        out.append("No cell gave a wrong answer or failed.\n")
    else:
        t = bad[["gpu", "kernel", "impl", "dtype", "size", "pass", "status", "error"]].copy()
        t["error"] = t["error"].astype(str).str.slice(0, 60)
        out.append("\\begin{center}\\small\n" + table_latex(t.head(limit), align="llllrllp{4.6cm}")
                   + "\\end{center}\n")
        if len(t) > limit:
            out.append(f"\\noindent and {len(t) - limit} more (results/metrics.parquet, status column).\n")
    skipped = metrics[metrics["status"].isin(["skipped", "not_timed"])]
    if not skipped.empty:
        g = (skipped.assign(error=skipped["error"].astype(str).str.slice(0, 70))
             .groupby(["gpu", "status", "error"]).size().rename("cells").reset_index())
        out.append("\n\\noindent Cells not timed, and why:\n\\begin{center}\\small\n"
                   + table_latex(g, align="lllr") + "\\end{center}\n")
    return "\n".join(out)


def projection_table(metrics: pd.DataFrame, gpu: str) -> str:
    """Per kernel and dtype at the largest size: the GPU time of the fastest implementation here (ties named), its
    ratio to the calibrated roofline model here (the calibration error), and the calibrated model on every datasheet
    GPU (analysis/calibration.py). Model columns are labelled as model."""
    t, _ = calibration.projections(metrics, gpu)
    if t.empty:
        return "\\begin{center}No timed measurements on this device.\\end{center}\n"
    here = f"GPU time, {gpu}"
    model = f"model calibrated to {gpu}, µs"
    out = pd.DataFrame({("", "kernel"): t["kernel"], ("", "dtype"): t["dtype"],
                        ("", "N"): t["size"].astype(int),
                        ("", "fastest"): [impl_names(f, IMPL_SHORT) + (" (tie)" if len(f) > 1 else "")
                                          for f in t["fastest"]],
                        (here, "µs"): t["median_ms"].astype(float) * 1e3,
                        (here, "/ model"): t["measured_over_model"].astype(float)})
    for key in SPECS:
        out[(model, key.upper())] = t[f"model_ms_{key}"].astype(float) * 1e3
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    align = "llr>{\\raggedright\\arraybackslash}p{2.6cm}" + "r" * (len(out.columns) - 4)
    body = table_latex(out, {c: fmt for c in out.columns[4:]}, align)
    return body.replace("µs", "\\si{\\micro\\second}")


def calibration_table(metrics: pd.DataFrame, gpu: str) -> str:
    """The ratios the projection scales each datasheet by (measured / datasheet on `gpu`, per resource) and the
    model's error on `gpu` (measured / model of the fastest cells, by bound)."""
    t, r = calibration.projections(metrics, gpu)
    spec = SPECS.get(gpu)
    if spec is None or t.empty:
        return ("\\begin{center}No calibration: the headline device has no datasheet entry or no timed cells; the "
                "projections are not drawn from it.\\end{center}\n")
    measured = "measured, GPU time"
    rows = [{"resource": "memory bandwidth [TB/s]", "datasheet": spec.mem_bandwidth / 1e12,
             measured: r["bandwidth"] * spec.mem_bandwidth / 1e12, "ratio": r["bandwidth"]}]
    rows += [{"resource": f"{unit.upper()} [TFLOP/s]", "datasheet": spec.peak_flops(unit) / 1e12,
              measured: r[unit] * spec.peak_flops(unit) / 1e12, "ratio": r[unit]} for unit in calibration.UNITS]
    ratios_t = pd.DataFrame(rows)
    err = calibration.error(t)
    err.columns = pd.MultiIndex.from_tuples([("", "bound"), ("", "cells")] +
                                            [("GPU time / model", c) for c in ("median", "min", "max")])
    return (table_latex(ratios_t, {c: fmt for c in ("datasheet", measured, "ratio")}, "lrrr") + "\\quad\n"
            + table_latex(err, {c: fmt for c in err.columns[2:]}, "lrrrr"))


def specs_table(ceilings: pd.DataFrame) -> str:
    """The datasheet peaks every projection uses (rooflab/gpus.py), and the ceilings measured on each device (the
    newest run's; GPU time)."""
    rows = [{"device": s.name, "source": "datasheet", "SMs": str(s.sms), "TB/s": s.mem_bandwidth / 1e12,
             "FP32": s.fp32_flops / 1e12, "TF32": s.tf32_flops / 1e12, "BF16": s.bf16_flops / 1e12}
            for s in SPECS.values()]
    for gpu, v in measured_peaks(ceilings).items():
        rows.append({"device": gpu, "source": "measured", "SMs": "--", "TB/s": v.get("copy", np.nan) / 1e12,
                     "FP32": v.get("gemm_fp32", np.nan) / 1e12, "TF32": v.get("gemm_tf32", np.nan) / 1e12,
                     "BF16": v.get("gemm_bf16", np.nan) / 1e12})
    t = pd.DataFrame(rows)
    head = "datasheet, or measured in GPU time"
    t.columns = pd.MultiIndex.from_tuples([("", c) if c in ("device", "source", "SMs") else (head, c)
                                           for c in t.columns])
    return table_latex(t, {c: fmt for c in t.columns[3:]}, "llrrrrr")


def findings_table(metrics: pd.DataFrame) -> str:
    """Every cell above its own run's roof (analysis/claims.findings): the cell, achieved and roof in the binding
    unit, the excess and the standard error of its median (percent), and why."""
    f = findings(metrics)
    if f.empty:
        return "\\begin{center}No cell exceeds its roof.\\end{center}\n"
    reasons = list(dict.fromkeys(f["reason"]))  # each reason once, under the table; the rows name it by letter
    key = {r: "abcdefghijklmnopqrstuvwxyz"[i] for i, r in enumerate(reasons)}
    t = pd.DataFrame({"GPU": f["gpu"], "kernel": f["kernel"], "impl": f["impl"].map(IMPL_NAME), "dtype": f["dtype"],
                      "N": f["size"].astype(int), "pass": f["pass"], "achieved": f["achieved"].astype(float),
                      "roof": f["roof"].astype(float), "unit": f["unit"], "excess [%]": f["excess_pct"].astype(float),
                      "SE [%]": f["se_pct"].astype(float), "reason": f["reason"].map(key)})
    if t["pass"].nunique() == 1:
        t = t.drop(columns="pass")
    t.columns = pd.MultiIndex.from_tuples([("", c) if c not in ("achieved", "roof", "unit") else ("GPU time", c)
                                           for c in t.columns])
    body = table_latex(t, {c: (lambda v: fmt(v, 4)) if c[1] in ("achieved", "roof") else (lambda v: fmt(v, 2))
                           for c in t.columns if c[1] in ("achieved", "roof", "excess [%]", "SE [%]")})
    legend = "; ".join(f"({key[r]}) {tex_escape(r)}" for r in reasons)
    return body + f"\\par\\smallskip\\parbox{{0.95\\linewidth}}{{Reasons: {legend}.}}\n"


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
    m.add("HeadlineSource", tex_escape(origin.dataset_label(gpu, head["directory"].iloc[0]) if len(head)
                                       else "no GPU data"), "where the headline device's rows come from")
    parts = ["GPU data: " + (", ".join(tex_escape(origin.origin_phrase(g, d))
                                       for g, d in zip(datasets["gpu"], datasets["directory"])) or "none")]
    if len(cpu_runs):
        cpu = cpu_runs.iloc[0]
        parts.append("CPU data: " + tex_escape(origin.origin_phrase(cpu["gpu"], cpu["directory"]))
                     + ", in Section~\\ref{sec:cpu}")
    m.add("DataOrigin", "; ".join(parts), "the title line: where every dataset comes from")
    m.add("ProvenanceRuns", str(len(gpu_runs)), "runs (or legacy commit and date groups) in the GPU data")
    m.add("ProvenanceDatasets", str(len(datasets)), "GPU datasets")


def figure(path: str, caption: str, label: str, width: str = "0.95\\linewidth") -> str:
    return ("\\begin{figure}[!htbp]\n\\centering\n"
            f"\\includegraphics[width={width},height=0.42\\textheight,keepaspectratio]{{{path}}}\n"
            f"\\caption{{{caption}}}\n\\label{{{label}}}\n\\end{{figure}}\n")


def has_data(fig: str, metrics: pd.DataFrame, gpu: str, launch_counts: set[str] | None,
             kernel: str | None = None) -> bool:
    """Whether a figure of this GPU (and kernel) shows data: the paper never includes a figure that only says
    'no data'. launch_counts: the GPUs with profile rows (None: not known, the fusion figure is taken as drawn)."""
    ok = timed(metrics, gpu)
    if kernel is not None:
        ok = ok[(ok["kernel"] == kernel) & (ok["pass"] == "fwd")]
    if fig == "fusion":
        return launch_counts is None or gpu in launch_counts
    if fig == "speedup":
        return bool(ok.loc[ok["impl"] != "builtin", "speedup_vs_builtin"].notna().any())
    if fig == "wave":
        return gpu in SPECS and bool((ok["kernel"] == "matmul").any())
    if fig == "projection":
        return gpu != CPU_KEY and bool((ok["pass"] == "fwd").any())
    return not ok.empty


def figures_tex(metrics: pd.DataFrame, gpus: list[str], figdir: str, captions: dict[str, str],
                sources: dict[str, str], launch_counts: set[str] | None = None) -> str:
    """The figures of each GPU that exist and show data, their captions naming the GPU and its source."""
    out = []
    for fig, caption in captions.items():
        for g in gpus:
            path = f"{figdir}/{g}/{fig}.pdf"
            if Path(path).exists() and has_data(fig, metrics, g, launch_counts):
                where = tex_escape(origin.dataset_label(g, sources.get(g, f"results/raw/{g}")))
                out.append(figure(path, f"{caption} ({where})", f"fig:{fig}-{g}"))
    return "\n".join(out) or "% no figures found\n"


def kernel_summary(kernel: str) -> str:
    """The first sentence of kernels/<kernel>.py's docstring, read without importing it (no torch needed)."""
    path = Path(__file__).resolve().parent.parent / "kernels" / f"{kernel}.py"
    try:
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    except (OSError, SyntaxError):
        return ""
    first = doc.strip().split("\n\n")[0].replace("\n", " ")
    return first.split(". ")[0].rstrip(".") + "."


def kernel_table(rows: pd.DataFrame) -> str:
    """One kernel at the largest size: per implementation its time, rate, roofline fraction and speedups, every
    column under the frame it is in (GPU time, CUDA graph, Python loop)."""
    t = rows.sort_values(["dtype", "pass", "impl"], key=lambda s: s.map(
        {k: i for i, k in enumerate(IMPL_NAME)}) if s.name == "impl" else s)
    rate, unit = rate_column(str(t["kernel"].iloc[0]))
    g, gr, lo = FRAME_LABEL["gpu"], FRAME_LABEL["graph"], FRAME_LABEL["loop"]
    dtype = t["dtype"] + np.where(t["pass"] == "fwd", "", ", " + t["pass"]) if t["pass"].nunique() > 1 else t["dtype"]
    cols = {("", "dtype"): dtype, ("", "impl"): t["impl"].map(IMPL_SHORT),
            ("", "N"): t["size"].astype(int),
            (g, "µs"): t["median_ms"] * 1e3, (g, unit): t[rate], (g, "roof"): t["roofline_fraction_measured"],
            (g, "vs builtin"): t["speedup_vs_builtin"],
            (g, "verdict"): t.get("verdict_vs_builtin", pd.Series("", index=t.index)).fillna("")
            .where(t["impl"] != "builtin", "").replace("", "--"),
            (g, "vs naive"): t["speedup_vs_naive"],
            (gr, "µs"): t["graph_median_ms"] * 1e3, (gr, "vs builtin"): t["graph_speedup_vs_builtin"],
            (lo, "µs"): t["loop_ms"] * 1e3, (lo, "vs builtin"): t["loop_speedup_vs_builtin"]}
    out = pd.DataFrame(cols)
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    numbers = [c for c in out.columns if c[0] and c[1] != "verdict"]
    body = table_latex(out, {c: fmt for c in numbers})
    return body.replace("µs", "\\si{\\micro\\second}")


def best_sentence(k: str, tag: str, what: str, best: pd.DataFrame) -> str:
    """Who is fastest in one (dtype, pass) at the largest size, a tie named as one with every tied time."""
    first = f"{k}{IMPL_TAG[best['impl'].iloc[0]]}"
    if len(best) == 1:
        return (f"In {what} at $N=\\{k}LargestSize$ the fastest correct implementation in GPU time is "
                f"\\{k}BestImpl{tag}{{}}: \\{k}BestTimeUs{tag}~\\si{{\\micro\\second}}, \\{first}Gbps{tag}~GB/s "
                f"(\\{first}Tflops{tag}~TFLOP/s), \\{first}RooflineFraction{tag}{{}} of the measured roofline.")
    times = impl_names(best["impl"], {i: f"\\{k}{IMPL_TAG[i]}TimeUs{tag}{{}}" for i in best["impl"]})
    return (f"In {what} at $N=\\{k}LargestSize$ \\{k}BestImpl{tag}{{}} tie in GPU time, within noise "
            f"({times}~\\si{{\\micro\\second}}); {tex_escape(IMPL_NAME[best['impl'].iloc[0]])}, the lowest "
            f"median, reaches \\{first}Gbps{tag}~GB/s "
            f"(\\{first}Tflops{tag}~TFLOP/s), \\{first}RooflineFraction{tag}{{}} of the measured roofline.")


def speedup_sentence(base: str, tag: str, against: str) -> str:
    """A speedup in its three frames, with the GPU-time verdict."""
    suffix, name = ("", "the PyTorch builtin") if against == "builtin" else ("Naive", "naive PyTorch")
    return (f" Against {name} it runs at \\{base}Speedup{suffix}{tag}$\\times$ in GPU time "
            f"(verdict: \\{base}Verdict{suffix}{tag}), \\{base}GraphSpeedup{suffix}{tag}$\\times$ from a CUDA graph "
            f"and \\{base}LoopSpeedup{suffix}{tag}$\\times$ in a Python loop.")


def kernel_sections(metrics: pd.DataFrame, gpu: str, kernels: list[str], figdir: str) -> str:
    out = []
    for kernel in kernels:
        k, label = camel(kernel), re.sub(r"[^a-z0-9]+", "-", kernel)
        out.append(f"\\subsection{{{tex_escape(kernel)}}}\n\\label{{sec:{label}}}\n")
        summary = kernel_summary(kernel)
        if summary:
            out.append(tex_escape(summary) + "\n")
        rows = metrics[(metrics["kernel"] == kernel) & (metrics["gpu"] == gpu)]
        ok = timed(rows, gpu)
        if ok.empty:
            counts = ", ".join(f"{n} {tex_escape(st)}" for st, n in rows["status"].value_counts().items())
            out.append(f"No timed measurement of this kernel on the headline device ({counts or 'no cells'}).\n")
            continue
        big = largest(ok)
        for (dtype, pass_), g in big.groupby(["dtype", "pass"]):
            tag = DTYPE_TAG[dtype] + pass_tag(pass_)
            best = tied_best(g)
            impl = best["impl"].iloc[0]
            base = f"{k}{IMPL_TAG[impl]}"
            what = f"{tex_escape(dtype)}" + ("" if pass_ == "fwd" else f" ({tex_escape(pass_)})")
            against = "naive" if impl == "builtin" else "builtin"
            out.append(best_sentence(k, tag, what, best) + speedup_sentence(base, tag, against)
                       + f" At \\{k}Intensity{tag}~FLOP/byte the kernel is \\{k}Bound{tag}-bound here, and its "
                       f"measured time is \\{base}ModelRatio{tag}$\\times$ the roofline-model time from the measured "
                       "ceilings.\n")
        out.append("\\begin{table}[!htbp]\n\\centering\\footnotesize\\setlength{\\tabcolsep}{2pt}\n"
                   f"\\caption{{{tex_escape(kernel)} at the largest size on the headline device, in three frames: "
                   "GPU time (median time, achieved rate, fraction of the measured roofline, speedups over the "
                   "builtin and naive PyTorch, the verdict against the builtin), CUDA graph and Python loop (time "
                   f"and speedup over the builtin).}}\n\\label{{tab:{label}}}\n" + kernel_table(big)
                   + "\\end{table}\n")
        for fig, caption in KERNEL_FIGURE_CAPTIONS.items():
            path = f"{figdir}/{gpu}/{fig}/{kernel}.pdf"
            if Path(path).exists() and has_data(fig, metrics, gpu, None, kernel):
                out.append(figure(path, f"{tex_escape(kernel)}: {caption}", f"fig:{fig}-{label}", "0.8\\linewidth"))
        out.append("\\clearpage\n")
    return "\n".join(out)


def cpu_summary_table(metrics: pd.DataFrame) -> str:
    """The CPU's cells at the largest size: host time and Python-loop time per implementation, and the fastest in
    host time (ties named)."""
    ok = timed(metrics, CPU_KEY)
    ok = largest(ok[ok["pass"] == "fwd"])
    host, loop = CPU_FRAME_LABEL["gpu"], CPU_FRAME_LABEL["loop"]
    impls = [i for i in IMPL_NAME if i in set(ok["impl"])]
    rows = []
    for (kernel, dtype), g in ok.groupby(["kernel", "dtype"]):
        t = g.set_index("impl")
        row = {("", "kernel"): kernel, ("", "dtype"): dtype, ("", "N"): int(g["size"].iloc[0])}
        row.update({(f"{host} [µs]", IMPL_SHORT[i]): t["median_ms"].get(i, np.nan) * 1e3 for i in impls})
        row.update({(f"{loop} [µs]", IMPL_SHORT[i]): t["loop_ms"].get(i, np.nan) * 1e3 for i in impls})
        best = tied_best(g)
        row[(host, "fastest")] = impl_names(best["impl"], IMPL_SHORT) + (" (tie)" if len(best) > 1 else "")
        rows.append(row)
    t = pd.DataFrame(rows)
    t.columns = pd.MultiIndex.from_tuples(t.columns)
    body = table_latex(t, {c: fmt for c in t.columns if c[1] in IMPL_SHORT.values() and c[0]})
    return body.replace("µs", "\\si{\\micro\\second}")


def cpu_ceilings_table(ceilings: pd.DataFrame) -> str:
    """What the ceilings job measured on the CPU (its newest run): the copy and the best GEMM per math mode."""
    v = measured_peaks(ceilings).get(CPU_KEY, {})
    measured = f"measured, {CPU_FRAME_LABEL['gpu']}"
    rows = [{"ceiling": "copy (read + write)", measured: v["copy"] / 1e9, "unit": "GB/s"}] if "copy" in v else []
    rows += [{"ceiling": f"GEMM {u.upper()}", measured: v[f"gemm_{u}"] / 1e9, "unit": "GFLOP/s"}
             for u in calibration.UNITS if f"gemm_{u}" in v]
    if not rows:
        return "\\begin{center}No ceilings were measured on the CPU.\\end{center}\n"
    t = pd.DataFrame(rows)
    return table_latex(t, {measured: fmt}, "lrl")


def cpu_section(m: Macros, metrics: pd.DataFrame, ceilings: pd.DataFrame, figdir: str, sources: dict[str, str],
                launch_counts: set[str] | None) -> str:
    """The CPU's own section (its Cpu* macros into `m`): only the concepts that apply to a CPU. Empty without CPU
    rows."""
    if metrics.empty:
        return "% no CPU data: no CPU section\n"
    rows = metrics[metrics["gpu"] == CPU_KEY]
    where = tex_escape(origin.dataset_label(CPU_KEY, sources.get(CPU_KEY, f"results/raw/{CPU_KEY}")))
    m.add("CpuCellsTotal", str(len(rows)))
    for status in ("ok", "not_timed", "mismatch", "failed", "skipped"):
        m.add(f"CpuCells{camel(status)}", str(int((rows["status"] == status).sum())))
    m.add("CpuSource", where, "where the CPU rows come from")
    found = findings(rows)
    m.add("CpuFindingsAboveRoof", str(int(found["beyond_noise"].sum())), "CPU cells above their roof beyond noise")
    out = [f"\\section{{CPU results ({tex_escape(origin.source_of(sources.get(CPU_KEY, 'results/raw/cpu')))})}}\n"
           "\\label{sec:cpu}\n",
           "These cells ran on the host CPU (\\CpuSource{}). They are kept apart from the GPU results: no CPU row "
           "enters a GPU figure, table or number. Only what applies to a CPU is reported here. The PyTorch "
           "implementations are timed with the host clock in two frames: \\emph{host time} (one call) and the "
           "\\emph{Python loop} (back-to-back calls); there is no CUDA graph, no cache flush and no launch to hide. "
           "Triton runs under its interpreter for correctness and is not timed; the hand-written CUDA is skipped. "
           "The CPU has no datasheet entry, so its only roofs are the copy and the GEMMs measured on it (no TF32 "
           "unit, no wave model, no projection), and the profiler counts the aten operators a call dispatches "
           "instead of GPU kernels launched. Of the \\CpuCellsTotal{} CPU cells, \\CpuCellsOk{} were checked and "
           "timed, \\CpuCellsNotTimed{} checked only, \\CpuCellsSkipped{} skipped, \\CpuCellsMismatch{} gave a "
           "wrong answer and \\CpuCellsFailed{} failed (Section~\\ref{sec:problems} lists the GPU's; the CPU's "
           "are in \\texttt{results/metrics.parquet}); \\CpuFindingsAboveRoof{} timed cells exceed their roof "
           "beyond noise.\n",
           "\\begin{table}[!htbp]\n\\centering\\footnotesize\\setlength{\\tabcolsep}{3pt}\n"
           f"\\caption{{CPU ({where}): time per call at the largest size in host time and in a Python loop, per "
           "implementation, and the fastest in host time (a tie within noise named as one).}\n"
           "\\label{tab:cpu-summary}\n" + cpu_summary_table(rows) + "\\end{table}\n",
           "\\begin{table}[!htbp]\n\\centering\\small\n"
           f"\\caption{{Ceilings measured on the CPU ({where}), in host time: the copy and the best GEMM per math "
           "mode.}\n\\label{tab:cpu-ceilings}\n" + cpu_ceilings_table(ceilings) + "\\end{table}\n",
           "\\begin{table}[!htbp]\n\\centering\\scriptsize\\setlength{\\tabcolsep}{3pt}\n"
           f"\\caption{{Environment and provenance of the CPU data ({where}): its runs, commits, dates, versions, "
           "timing settings and the rows each contributed.}\n\\label{tab:cpu-provenance}\n"
           + origin.provenance_table(origin.runs(rows, ceilings[ceilings["gpu"] == CPU_KEY], sources), tex_escape)
           + "\\end{table}\n"]
    if len(found):
        out.append("\\begin{table}[!htbp]\n\\centering\\scriptsize\\setlength{\\tabcolsep}{3pt}\n"
                   f"\\caption{{CPU cells above their roof, in host time ({where}).}}\n\\label{{tab:cpu-findings}}\n"
                   + findings_table(rows).replace("GPU time", CPU_FRAME_LABEL["gpu"]) + "\\end{table}\n")
    for fig, caption in CPU_FIGURE_CAPTIONS.items():
        path = f"{figdir}/{CPU_KEY}/{fig}.pdf"
        if Path(path).exists() and has_data(fig, rows, CPU_KEY, launch_counts):
            out.append(figure(path, f"{caption} ({where})", f"fig:{fig}-{CPU_KEY}"))
    return "\n".join(out) + "\\clearpage\n"


OUTPUTS = ["macros", "table_summary", "table_problems", "table_projection", "table_calibration", "table_specs",
           "table_repeatability", "table_fixed_cost", "table_findings", "table_provenance", "figures",
           "figures_projection", "kernels", "cpu"]


def repeatability_table(runs: dict[str, pd.DataFrame]) -> str:
    """One block of rows per GPU with a repeatability run (scripts/repeatability.py's per-cell table)."""
    from analysis.repeatability import EVENT_MIN_MS, GRAPH_MAX_MS, summarize

    label = {"event_long": f"{fmt(EVENT_MIN_MS * 1e3)} us and longer",
             "graph_short": f"under {fmt(GRAPH_MAX_MS * 1e3)} us",
             "event_short": f"under {fmt(GRAPH_MAX_MS * 1e3)} us (contrast)"}
    if not runs:
        return ("\\emph{No repeatability run is recorded for the devices of this run: "
                "\\texttt{scripts/repeatability.py} measures one.}\\par\n")
    rows = []
    for gpu, t in runs.items():
        for r in summarize(t).itertuples():
            rows.append({"GPU": gpu, "cells": label[r.group], "frame": {"event": "GPU time",
                                                                  "graph": "CUDA graph"}[r.mode],
                         "n": str(r.n), "max diff [%]": fmt(r.max_abs_rel_diff * 100, 2),
                         "median diff [%]": fmt(r.median_abs_rel_diff * 100, 2)})
    return table_latex(pd.DataFrame(rows), align="lllrrr")


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
    m.add("RepeatInstances", most_common(runs[gpu], "instances_1", "1") if gpu in runs else "n/a",
          "fresh starts per cell in the repeatability runs (tables from before the option: 1)")
    m.add("RepeatLongUs", fmt(EVENT_MIN_MS * 1e3), "long cells start here, microseconds")
    m.add("RepeatShortUs", fmt(GRAPH_MAX_MS * 1e3), "short cells end here, microseconds")
    m.add("RepeatGoalEventLongPct", fmt(GOALS["event_long"] * 100), "goal, percent")
    m.add("RepeatGoalGraphShortPct", fmt(GOALS["graph_short"] * 100), "goal, percent")


def generate(metrics: pd.DataFrame, ceilings: pd.DataFrame, figdir: str,
             repeatability: dict[str, pd.DataFrame] | None = None, sources: dict[str, str] | None = None,
             launch_counts: set[str] | None = None) -> dict[str, str]:
    """Every generated input, by name (without .tex): pure, so tests can run it on a synthetic frame.
    ``repeatability``: per GPU key, the per-cell table of scripts/repeatability.py (optional). ``sources``: per
    device, the directory its rows were read from (results/raw/<gpu>: this run; else a committed reference).
    ``launch_counts``: the devices with profile rows (None: unknown).

    The GPU outputs are made from GPU rows and ceilings only; the CPU's rows go to `cpu` and its Cpu* macros."""
    sources = sources or {}
    metrics_gpu, metrics_cpu = split_devices(metrics)
    ceilings_gpu = ceilings[ceilings["gpu"] != CPU_KEY] if len(ceilings) else ceilings
    gpu = headline_gpu(metrics_gpu)
    gpus = list(dict.fromkeys(metrics_gpu["gpu"]))
    kernels = sorted(set(metrics_gpu["kernel"]))
    runs = {g: t for g, t in (repeatability or {}).items() if g in gpus}
    macros = make_macros(metrics_gpu, ceilings_gpu, gpu)
    repeatability_macros(macros, runs, gpu)
    ours = ours_fixed_costs(metrics_gpu, gpu)
    fixed_cost_macros(macros, ours)
    findings_macros(macros, metrics_gpu)
    calibration_macros(macros, metrics_gpu, gpu)
    gpu_runs = origin.runs(metrics_gpu, ceilings_gpu, sources)
    cpu_runs = origin.runs(metrics_cpu, ceilings.iloc[:0], sources)
    origin_macros(macros, gpu_runs, gpu, cpu_runs)
    cpu = cpu_section(macros, metrics_cpu, ceilings, figdir, sources, launch_counts)
    return {
        "macros": macros.text(),
        "table_repeatability": repeatability_table(runs),
        "table_summary": summary_table(metrics_gpu, gpu),
        "table_problems": problems_table(metrics_gpu),
        "table_projection": projection_table(metrics_gpu, gpu),
        "table_calibration": calibration_table(metrics_gpu, gpu),
        "table_fixed_cost": fixed_cost_table(ours),
        "table_specs": specs_table(ceilings_gpu),
        "table_findings": findings_table(metrics_gpu),
        "table_provenance": origin.provenance_table(gpu_runs, tex_escape),
        "figures": figures_tex(metrics_gpu, gpus, figdir, GPU_FIGURE_CAPTIONS, sources, launch_counts),
        "figures_projection": figures_tex(metrics_gpu, gpus, figdir, PROJECTION_FIGURE_CAPTIONS, sources,
                                          launch_counts),
        "kernels": kernel_sections(metrics_gpu, gpu, kernels, figdir),
        "cpu": cpu,
    }


def read_launch_counts(paths) -> set[str]:
    """The devices whose profiles.parquet holds launch counts (the fusion figure draws those only)."""
    out = set()
    for p in paths:
        try:
            df = pd.read_parquet(p, columns=["gpu", "n_kernels"])
        except Exception:  # a missing or foreign file: its figure says so, the paper leaves it out
            continue
        out |= set(df.loc[df["n_kernels"].notna(), "gpu"])
    return out


def build(metrics_path: str, ceiling_paths: list[str], outdir: str, figdir: str,
          repeatability_paths: list[str] = (), profile_paths: list[str] | None = None) -> None:
    from rooflab.io import CEILING_COLUMNS, read_results, write_text

    metrics = pd.read_parquet(metrics_path)
    ceilings = pd.concat([read_results(p, CEILING_COLUMNS) for p in ceiling_paths], ignore_index=True)
    # <dir>/<gpu>/repeatability.csv: the GPU is the folder's name
    runs = {Path(p).parent.name: pd.read_csv(p) for p in repeatability_paths}
    counts = None if profile_paths is None else read_launch_counts(profile_paths)
    for name, text in generate(metrics, ceilings, figdir, runs, origin.sources_from_paths(ceiling_paths),
                               counts).items():
        write_text(text, Path(outdir) / f"{name}.tex")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--ceilings", nargs="+", required=True,
                    help="<dir>/<gpu>/ceilings.parquet: results/raw/<gpu> is this run, any other dir a reference")
    ap.add_argument("--figdir", default="results/figures")
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--repeatability", nargs="*", default=[],
                    help="scripts/repeatability.py tables, as <dir>/<gpu>/repeatability.csv")
    ap.add_argument("--profiles", nargs="*", default=None,
                    help="profiles.parquet files: a fusion figure enters the paper only for a device they cover")
    a = ap.parse_args(argv)
    build(a.metrics, a.ceilings, a.outdir, a.figdir, a.repeatability, a.profiles)


if __name__ == "__main__":
    main()
