"""metrics + ceilings -> the generated LaTeX the paper inputs: number macros, tables, per-kernel sections, figures.

Every measured number in paper/main.tex arrives through here (tests/test_paper.py fails if the hand-written .tex
holds one). Macro names are letters only: \\GeluTritonGbpsBf = GeLU, Triton, achieved GB/s, bfloat16, at the
largest size measured on the headline GPU (the first GPU with timed data, preferring a real GPU to the CPU).

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

from analysis.metrics import FIT_MIN_POINTS, FIT_MIN_SIZE, fixed_costs  # noqa: E402
from rooflab.gpus import SPECS  # noqa: E402
from rooflab.kernel import IMPL_LABEL as IMPL_NAME  # noqa: E402
from rooflab.timing import TOUCH_STRIDE_BYTES  # noqa: E402

DTYPE_TAG = {"float32": "Fp", "tf32": "Tf", "bfloat16": "Bf", "float16": "Half"}
IMPL_TAG = {"naive": "Naive", "builtin": "Builtin", "compile": "Compile", "triton": "Triton", "cuda": "Cuda"}
# column heads of the summary table, short enough for the page (the caption says which are ours)
IMPL_SHORT = {"naive": "naive", "builtin": "builtin", "compile": "compile", "triton": "Triton", "cuda": "CUDA"}
# GPU keys hold digits, macro names may not: a100 -> AOneHundred, h200 -> HTwoHundred.
DIGIT_WORDS = ["Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine"]
# The figures of one GPU, in the order the paper shows them, with what each says.
GPU_FIGURE_CAPTIONS = {
    "roofline": "Roofline: measured points against the datasheet (solid) and measured (dashed) ceilings.",
    "speedup": "Speedup over the PyTorch builtin per kernel, implementation and size (blue: faster, red: slower); "
               "blank cells have no correct, timed pair.",
    "scaling": "Time against size per kernel (log-log). Solid: device time of one call (L2 flushed); dashed: "
               "CUDA-graph replay; thin with crosses: back-to-back calls from Python, launch included, which sit "
               "on the launch floor at small sizes; dotted guides show the N$^2$ or N$^3$ work.",
    "fusion": "GPU kernels launched per call (torch.profiler): what fusing an expression into one kernel saves.",
}
PROJECTION_FIGURE_CAPTIONS = {
    "projection": "Roofline-model time of each kernel at its largest size on four datasheet GPUs, beside the time "
                  "measured on this device (builtin and fastest implementation).",
    "wave": "Matrix product: achieved TFLOP/s of Triton and the builtin against N, beside the wave-quantisation "
            "model scaled to the measured cuBLAS peak; sizes that are no multiple of the 128 tile are marked.",
}
KERNEL_FIGURE_CAPTIONS = {
    "bandwidth": "Achieved bandwidth against size, per implementation and dtype; dashed: measured copy bandwidth.",
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
    gpus = list(dict.fromkeys(metrics.loc[metrics["status"] == "ok", "gpu"]))
    real = [g for g in gpus if g != "cpu"]
    return (real or gpus or ["cpu"])[0]


def fmt(x: float, digits: int = 3) -> str:
    if x is None or not np.isfinite(x):
        return "n/a"
    return f"{x:.{digits}g}" if abs(x) < 1000 else f"{x:,.0f}".replace(",", "{,}")


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


def make_macros(metrics: pd.DataFrame, ceilings: pd.DataFrame, gpu: str) -> Macros:
    m = Macros()
    ok = timed(metrics, gpu)
    spec = SPECS.get(gpu)
    m.add("HeadlineGpu", tex_escape(spec.name if spec else ("CPU" if gpu == "cpu" else gpu)),
          "the device whose numbers the text quotes")
    m.add("HeadlineGpuKey", tex_escape(gpu))
    gpus = list(dict.fromkeys(metrics["gpu"]))
    m.add("NumGpus", str(len(gpus)))
    m.add("GpuList", tex_escape(", ".join(gpus)))
    m.add("NumKernels", str(metrics["kernel"].nunique()))
    c = ceilings[ceilings["gpu"] == gpu].set_index("ceiling")["value"]
    c = c[~c.index.duplicated()]
    if "copy" in c:
        m.add("CopyGbps", fmt(c["copy"] / 1e9), "measured device-to-device copy, read + write")
        if spec:
            m.add("CopyFractionDatasheet", fmt(100 * c["copy"] / spec.mem_bandwidth, 3), "percent of datasheet")
    same = sorted(k for k in c.index if k.startswith("copy_"))  # copy_<dtype>_<N>: the copy timed like a cell
    for key in same:
        _, dname, n = key.rsplit("_", 2)
        if dname in DTYPE_TAG and "copy" in c:
            m.add(f"CopySameSize{DTYPE_TAG[dname]}Gbps", fmt(c[key] / 1e9), f"{n}^2 {dname} copy, timed like a cell")
            m.add(f"CopySameSize{DTYPE_TAG[dname]}Fraction", fmt(c[key] / c["copy"], 3), "of the large copy")
            m.add("CopySameSizeN", n)
    for unit, tag in UNIT_TAG.items():
        if f"gemm_{unit}" in c:
            m.add(f"Gemm{tag}Tflops", fmt(c[f"gemm_{unit}"] / 1e12), f"cuBLAS {unit}, measured")
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
        m.add(f"{base}Gbps{tag}", fmt(row["achieved_gbps"]), f"GB/s, {n}")
        m.add(f"{base}Tflops{tag}", fmt(row["achieved_tflops"]), "TFLOP/s")
        m.add(f"{base}TimeUs{tag}", fmt(row["median_ms"] * 1e3), "median, microseconds")
        m.add(f"{base}GraphTimeUs{tag}", fmt(row.get("graph_median_ms", np.nan) * 1e3), "CUDA graph, microseconds")
        m.add(f"{base}LoopTimeUs{tag}", fmt(row.get("loop_ms", np.nan) * 1e3),
              "per call in a Python loop (launch included), microseconds")
        m.add(f"{base}RooflineFraction{tag}", fmt(row["roofline_fraction_measured"]), "of the measured roofline")
        m.add(f"{base}RooflineFractionDatasheet{tag}", fmt(row["roofline_fraction_datasheet"]))
        m.add(f"{base}BandwidthFraction{tag}", fmt(row["bandwidth_fraction_measured"]), "of measured copy")
        m.add(f"{base}Speedup{tag}", fmt(row["speedup_vs_builtin"]), "over the PyTorch builtin")
        m.add(f"{base}SpeedupNaive{tag}", fmt(row["speedup_vs_naive"]), "over naive PyTorch")
        m.add(f"{base}ModelError{tag}", fmt(row["model_error_measured"]), "measured / model (measured ceilings) - 1")
        m.add(f"{base}ModelRatio{tag}", fmt(row["model_error_measured"] + 1), "measured / roofline-model time")
    for (kernel, dtype, pass_), g in largest(ok).groupby(["kernel", "dtype", "pass"]):
        base, tag = camel(kernel), DTYPE_TAG[dtype] + pass_tag(pass_)
        best = g.loc[g["median_ms"].idxmin()]
        m.add(f"{base}BestImpl{tag}", tex_escape(IMPL_NAME[best["impl"]]), "fastest correct implementation")
        m.add(f"{base}BestTimeUs{tag}", fmt(best["median_ms"] * 1e3))
        m.add(f"{base}Intensity{tag}", fmt(best["arithmetic_intensity"]), "FLOP/byte")
        m.add(f"{base}Bound{tag}", tex_escape(str(best["bound"])), "memory- or compute-bound on this device")
        for key in SPECS:
            m.add(f"{base}ModelTimeUs{tag}{gpu_tag(key)}", fmt(best[f"model_time_ms_{key}"] * 1e3),
                  f"roofline model on the {key} datasheet")
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
    of the call at the largest size."""
    if f.empty:
        return (f"\\begin{{center}}No memory-bound kernel of ours was timed at {FIT_MIN_POINTS} sizes of at least "
                f"{FIT_MIN_SIZE} on this device.\\end{{center}}\n")
    t = f.assign(share=100 * f["fixed_share"])[["kernel", "dtype", "pass", "fixed_us", "marginal_tbs", "size",
                                                  "time_us", "share"]]
    t.columns = ["kernel", "dtype", "pass", "fixed", "margin", "N", "time", "fixed share"]
    return table_latex(t, {c: fmt for c in ("fixed", "margin", "time", "fixed share")}, "lllrrrrr")


def table_latex(df: pd.DataFrame, formats: dict | None = None, align: str | None = None) -> str:
    """A booktabs table from a frame (pandas Styler), numbers through fmt(), text escaped."""
    df = df.copy()
    for col in df.columns:
        if not pd.api.types.is_numeric_dtype(df[col]):
            df[col] = df[col].map(lambda v: tex_escape(v) if isinstance(v, str) else v)
    df.columns = [tex_escape(str(c)) for c in df.columns]
    fmts = {tex_escape(k): v for k, v in (formats or {}).items()}
    styler = df.style.hide(axis="index").format(fmts, na_rep="--")
    align = align or "".join("r" if pd.api.types.is_numeric_dtype(df[c]) else "l" for c in df.columns)
    return styler.to_latex(hrules=True, column_format=align)


def summary_table(metrics: pd.DataFrame, gpu: str) -> str:
    """Per kernel and dtype at the largest size: achieved GB/s (TFLOP/s for matmul) of each implementation."""
    ok = timed(metrics, gpu)
    ok = ok[ok["pass"] == "fwd"]
    if ok.empty:
        return "\\begin{center}No timed measurements on this device.\\end{center}\n"
    big = largest(ok).copy()
    big["value"] = np.where(big["kernel"] == "matmul", big["achieved_tflops"], big["achieved_gbps"])
    table = big.pivot_table(index=["kernel", "dtype", "size"], columns="impl", values="value", aggfunc="first")
    table = table[[i for i in IMPL_NAME if i in table.columns]]
    table.columns = [IMPL_SHORT[c] for c in table.columns]
    table = table.reset_index().rename(columns={"size": "N"})
    table["kernel"] = table["kernel"].map(lambda k: f"{k} (TFLOP/s)" if k == "matmul" else k)
    return table_latex(table, {c: fmt for c in table.columns[3:]}, "llr" + "r" * (len(table.columns) - 3))


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
    """Per kernel and dtype at the largest size: measured time of the fastest implementation on this device, the
    roofline-model time from its measured ceilings, and the model time on every datasheet GPU."""
    ok = timed(metrics, gpu)
    ok = ok[ok["pass"] == "fwd"]
    if ok.empty:
        return "\\begin{center}No timed measurements on this device.\\end{center}\n"
    rows = []
    for (kernel, dtype), g in largest(ok).groupby(["kernel", "dtype"]):
        best = g.loc[g["median_ms"].idxmin()]
        row = {"kernel": kernel, "dtype": dtype, "N": int(best["size"]), "fastest": IMPL_NAME[best["impl"]],
               "measured": best["median_ms"] * 1e3, "model here": best["model_time_ms_measured"] * 1e3}
        row.update({f"{key.upper()}": best[f"model_time_ms_{key}"] * 1e3 for key in SPECS})
        rows.append(row)
    t = pd.DataFrame(rows)
    return table_latex(t, {c: fmt for c in t.columns[4:]}, "llrl" + "r" * (len(t.columns) - 4))


def specs_table(ceilings: pd.DataFrame) -> str:
    """The datasheet peaks every projection uses (rooflab/gpus.py), and the ceilings measured on each device."""
    rows = [{"device": s.name, "source": "datasheet", "SMs": str(s.sms), "TB/s": s.mem_bandwidth / 1e12,
             "FP32": s.fp32_flops / 1e12, "TF32": s.tf32_flops / 1e12, "BF16": s.bf16_flops / 1e12}
            for s in SPECS.values()]
    for gpu, c in ceilings.groupby("gpu"):
        v = c.drop_duplicates("ceiling").set_index("ceiling")["value"]
        rows.append({"device": gpu, "source": "measured", "SMs": "--", "TB/s": v.get("copy", np.nan) / 1e12,
                     "FP32": v.get("gemm_fp32", np.nan) / 1e12, "TF32": v.get("gemm_tf32", np.nan) / 1e12,
                     "BF16": v.get("gemm_bf16", np.nan) / 1e12})
    t = pd.DataFrame(rows)
    return table_latex(t, {c: fmt for c in ("TB/s", "FP32", "TF32", "BF16")}, "llrrrrr")


def figure(path: str, caption: str, label: str, width: str = "0.95\\linewidth") -> str:
    return ("\\begin{figure}[!htbp]\n\\centering\n"
            f"\\includegraphics[width={width},height=0.42\\textheight,keepaspectratio]{{{path}}}\n"
            f"\\caption{{{caption}}}\n\\label{{{label}}}\n\\end{{figure}}\n")


def figures_tex(gpus: list[str], figdir: str, captions: dict[str, str]) -> str:
    out = []
    for fig, caption in captions.items():
        for g in gpus:
            path = f"{figdir}/{g}/{fig}.pdf"
            if Path(path).exists():
                out.append(figure(path, f"{caption} ({tex_escape(g)})", f"fig:{fig}-{g}"))
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
    t = rows.sort_values(["dtype", "pass", "impl"], key=lambda s: s.map(
        {k: i for i, k in enumerate(IMPL_NAME)}) if s.name == "impl" else s)
    t = pd.DataFrame({
        "dtype": t["dtype"], "pass": t["pass"], "impl": t["impl"].map(IMPL_NAME), "N": t["size"].astype(int),
        "time [us]": t["median_ms"] * 1e3, "GB/s": t["achieved_gbps"], "TFLOP/s": t["achieved_tflops"],
        "roofline frac.": t["roofline_fraction_measured"], "vs builtin": t["speedup_vs_builtin"],
        "vs naive": t["speedup_vs_naive"]})
    if t["pass"].nunique() == 1:
        t = t.drop(columns="pass")
    t = t.rename(columns={"time [us]": "time [µs]"})
    body = table_latex(t, {c: fmt for c in t.columns if c not in ("dtype", "pass", "impl", "N")})
    return body.replace("µs", "\\si{\\micro\\second}")


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
            best = g.loc[g["median_ms"].idxmin()]
            base = f"{k}{IMPL_TAG[best['impl']]}"
            what = f"{tex_escape(dtype)}" + ("" if pass_ == "fwd" else f" ({tex_escape(pass_)})")
            out.append(
                f"In {what} at $N=\\{k}LargestSize$ the fastest correct implementation is \\{k}BestImpl{tag}{{}}: "
                f"\\{k}BestTimeUs{tag}~\\si{{\\micro\\second}}, \\{base}Gbps{tag}~GB/s "
                f"(\\{base}Tflops{tag}~TFLOP/s), \\{base}RooflineFraction{tag}{{}} of the measured roofline and "
                f"\\{base}Speedup{tag}$\\times$ the builtin. At \\{k}Intensity{tag}~FLOP/byte the kernel is "
                f"\\{k}Bound{tag}-bound here, and its measured time is \\{base}ModelRatio{tag}$\\times$ the "
                f"roofline-model time from the measured ceilings.\n")
        out.append("\\begin{table}[!htbp]\n\\centering\\footnotesize\\setlength{\\tabcolsep}{4pt}\n"
                   f"\\caption{{{tex_escape(kernel)} at the largest size on the headline device: median time, "
                   "achieved rates, fraction of the measured roofline, speedup over the builtin and naive "
                   f"PyTorch.}}\n\\label{{tab:{label}}}\n" + kernel_table(big) + "\\end{table}\n")
        for fig, caption in KERNEL_FIGURE_CAPTIONS.items():
            path = f"{figdir}/{gpu}/{fig}/{kernel}.pdf"
            if Path(path).exists():
                out.append(figure(path, f"{tex_escape(kernel)}: {caption}", f"fig:{fig}-{label}", "0.8\\linewidth"))
        out.append("\\clearpage\n")
    return "\n".join(out)


OUTPUTS = ["macros", "table_summary", "table_problems", "table_projection", "table_specs", "table_repeatability",
           "table_fixed_cost", "figures", "figures_projection", "kernels"]


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
            rows.append({"GPU": gpu, "cells": label[r.group], "timing": {"event": "events, L2 flushed",
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
             repeatability: dict[str, pd.DataFrame] | None = None) -> dict[str, str]:
    """Every generated input, by name (without .tex): pure, so tests can run it on a synthetic frame.
    ``repeatability``: per GPU key, the per-cell table of scripts/repeatability.py (optional)."""
    gpu = headline_gpu(metrics)
    gpus = list(dict.fromkeys(metrics["gpu"]))
    kernels = sorted(set(metrics["kernel"]))
    runs = {g: t for g, t in (repeatability or {}).items() if g in gpus}
    macros = make_macros(metrics, ceilings, gpu)
    repeatability_macros(macros, runs, gpu)
    ours = ours_fixed_costs(metrics, gpu)
    fixed_cost_macros(macros, ours)
    return {
        "macros": macros.text(),
        "table_repeatability": repeatability_table(runs),
        "table_summary": summary_table(metrics, gpu),
        "table_problems": problems_table(metrics),
        "table_projection": projection_table(metrics, gpu),
        "table_fixed_cost": fixed_cost_table(ours),
        "table_specs": specs_table(ceilings),
        "figures": figures_tex(gpus, figdir, GPU_FIGURE_CAPTIONS),
        "figures_projection": figures_tex(gpus, figdir, PROJECTION_FIGURE_CAPTIONS),
        "kernels": kernel_sections(metrics, gpu, kernels, figdir),
    }


def build(metrics_path: str, ceiling_paths: list[str], outdir: str, figdir: str,
          repeatability_paths: list[str] = ()) -> None:
    from rooflab.io import CEILING_COLUMNS, read_results, write_text

    metrics = pd.read_parquet(metrics_path)
    ceilings = pd.concat([read_results(p, CEILING_COLUMNS) for p in ceiling_paths], ignore_index=True)
    # <dir>/<gpu>/repeatability.csv: the GPU is the folder's name
    runs = {Path(p).parent.name: pd.read_csv(p) for p in repeatability_paths}
    for name, text in generate(metrics, ceilings, figdir, runs).items():
        write_text(text, Path(outdir) / f"{name}.tex")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--ceilings", nargs="+", required=True)
    ap.add_argument("--figdir", default="results/figures")
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--repeatability", nargs="*", default=[],
                    help="scripts/repeatability.py tables, as <dir>/<gpu>/repeatability.csv")
    a = ap.parse_args(argv)
    build(a.metrics, a.ceilings, a.outdir, a.figdir, a.repeatability)


if __name__ == "__main__":
    main()
