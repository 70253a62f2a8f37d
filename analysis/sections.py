"""The generated prose of the paper: figure lists (only figures that show data), one section per kernel, and the
CPU's own section."""
from __future__ import annotations

import os
import re
from collections.abc import Collection
from pathlib import Path

import pandas as pd

from analysis import origin
from analysis.claims import CPU_FRAME_LABEL, FRAME_MEANING, NO_FRAME, compute_bound, findings, impl_names, tied_best
from analysis.latex import (DTYPE_TAG, FIGURE_HEIGHT, IMPL_TAG, KERNEL_FIGURE_WIDTH, TALL_FIGURES, Macros, camel,
                            figure, count_phrase, pass_tag, tex_escape)
from analysis.selection import largest, timed
from analysis.tables import cpu_ceilings_table, cpu_summary_table, findings_table, kernel_table
from rooflab.gpus import CPU_KEY, SPECS
from rooflab.kernel import IMPL_LABEL as IMPL_NAME

GPU_TIME = f"GPU time ({FRAME_MEANING['gpu']})"
# The figures of one GPU, in the order the paper shows them, with what each says (and in which frame).
GPU_FIGURE_CAPTIONS = {
    "roofline":
    f"Roofline in {GPU_TIME}: per kernel, forward, at its largest size in its lowest precision, ours "
    "(filled) and the fastest PyTorch implementation (hollow, in its colour), joined and labelled, "
    "left the memory-bound kernels under the bandwidth roof, right the compute-bound ones under the roof of their "
    "precision; measured ceilings black, the datasheet's grey (roofs that coincide drawn once); starred points lie "
    "above their roof scaled to their own cell's SM clock (Table~\\ref{tab:findings}).",
    "speedup":
    f"Speedup over the PyTorch builtin in {GPU_TIME}, one panel per kernel (and pass), rows dtype | "
    "implementation, columns size (blue: faster, red: slower, beyond noise; white: a tie within noise); blank cells have no "
    "correct, timed pair.",
    "scaling":
    "Time against size per kernel (log-log), in one dtype (float32 where measured), for the PyTorch builtin and our "
    "Triton kernel. Solid: GPU time of one call (L2 flushed), with its p20--p80 band; dashed: CUDA graph replay; "
    "thin with crosses: Python loop, back-to-back calls with launch included, which sit on the launch floor at small "
    "sizes; dotted guides show the N$^2$ or N$^3$ work; dash-dotted: the launch floor, its value in each panel's "
    "title.",
    "fusion":
    f"GPU kernels launched per call (torch.profiler; a count, {NO_FRAME}), per kernel and "
    "implementation, one panel per dtype: what fusing an expression into one kernel saves.",
}
PROJECTION_FIGURE_CAPTIONS = {
    "projection":
    "Speed-up over the GPU time measured here (fastest implementation) that the roofline model "
    "(calibrated: each datasheet peak scaled by this device's measured / datasheet ratio) gives each "
    "kernel at its largest size on four datasheet GPUs, one colour and marker per GPU, one panel per "
    "dtype; this device's own point sits at measured / model, its distance from 1 the model's error.",
    "wave":
    f"Matrix product in {GPU_TIME}: achieved TFLOP/s of Triton and the builtin against N, each over its "
    "own best (the best rates in each panel's title), beside the wave-quantisation model over its own best "
    "(dashed): both are 1 at full waves. At a size that is no multiple of the 128 tile, the shaded gap is "
    "the loss the wave model does not explain.",
}
KERNEL_FIGURE_CAPTIONS = {
    "bandwidth":
    f"Achieved bandwidth in {GPU_TIME} against size, one panel per dtype, per implementation (colour and marker), "
    "bars from the p80 to the p20 time; horizontal lines, their values written above them: the measured copy "
    "bandwidth (black) and the datasheet's (grey).",
}
# A compute-bound kernel's figure (analysis/claims.compute_bound) rates it in TFLOP/s against the compute roofs.
KERNEL_FIGURE_CAPTIONS_COMPUTE = {
    "bandwidth":
    f"Achieved TFLOP/s in {GPU_TIME} against size (compute-bound at its larger sizes), one panel per dtype, per "
    "implementation (colour and marker), bars from the p80 to the p20 time; horizontal lines, their values "
    "written above them: the measured GEMM peak of the panel's compute unit (black) and the datasheet's (grey).",
}
# The CPU's figures: only those whose concepts apply (no datasheet roof, no CUDA graph, no wave model, no projection).
CPU_FIGURE_CAPTIONS = {
    "roofline":
    "Roofline of the CPU in host time: per kernel, forward, at its largest size in its lowest "
    "precision, the fastest PyTorch implementation (hollow, in its colour; Triton is not timed on a "
    "CPU), labelled, against the copy and GEMM ceilings measured on this CPU (black; the memory-bound kernels left, "
    "the compute-bound right); the CPU has no datasheet roof.",
    "speedup":
    "Speedup over the PyTorch builtin on the CPU in host time (one call), one panel per kernel (and pass), "
    "rows dtype | implementation, columns size (blue: faster, red: slower, beyond noise; white: a tie within "
    "noise).",
    "scaling":
    "Time against size on the CPU (log-log), for the PyTorch builtin and torch.compile. Solid: host time of one "
    "call, with its p20--p80 band; thin "
    "with crosses: Python loop, back-to-back calls; dotted guides show the N$^2$ or N$^3$ work.",
    "fusion":
    f"aten operators dispatched per call on the CPU (torch.profiler; a count, {NO_FRAME}), per kernel and "
    "implementation, one panel per dtype: nothing is launched on a CPU, so the operators stand in for "
    "launches.",
}


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


def figure_drawn(path: str, drawn: Collection[str] | None) -> bool:
    """Whether the figure at `path` is one the paper can include: one the DAG draws (`drawn`, the PDFs it names,
    so the paper's inputs are written while the figures draw), or without that list, a PDF present."""
    if drawn is None:
        return Path(path).exists()
    return os.path.abspath(path) in {os.path.abspath(p) for p in drawn}


def figures_tex(metrics: pd.DataFrame, gpus: list[str], figdir: str, captions: dict[str, str], sources: dict[str, str],
                launch_counts: set[str] | None = None, drawn: Collection[str] | None = None,
                in_main_text: Collection[tuple[str, str]] = ()) -> str:
    """The figures of each GPU that are drawn (figure_drawn) and show data, their captions naming the GPU and its
    source; the (figure, GPU) pairs the main text already shows (``in_main_text``) are not drawn twice."""
    out = []
    for fig, caption in captions.items():
        for g in gpus:
            path = f"{figdir}/{g}/{fig}.pdf"
            if (fig, g) in in_main_text:
                continue
            if figure_drawn(path, drawn) and has_data(fig, metrics, g, launch_counts):
                where = tex_escape(origin.dataset_label(g, sources.get(g, f"results/raw/{g}")))
                out.append(
                    figure(path, f"{caption} ({where})", f"fig:{fig}-{g}", height=TALL_FIGURES.get(fig, FIGURE_HEIGHT)))
    return "\n".join(out) or "% no figures found\n"


def kernel_summary(kernel: str, kernels_dir: Path | None = None) -> str:
    """What the kernel computes, as its file declares it (``KERNEL.description``), as a sentence; "" for a name no
    kernel file has (a dataset of a kernel since removed). Read from the declaration's text where it is a string
    literal, as every kernel's is: importing the kernels would import torch and Triton (2 s of the paper's inputs)."""
    from rooflab.kernel import KERNELS_DIR, kernel_file, kernel_names, load_kernel

    kernels_dir = kernels_dir or KERNELS_DIR
    if kernel not in kernel_names(kernels_dir):
        return ""
    text = declared_description(kernel_file(kernel, kernels_dir))
    if text is None:  # not a literal: what the module computes
        text = load_kernel(kernel).description
    text = text.strip().rstrip(".")
    return text[:1].upper() + text[1:] + "." if text else ""


def declared_description(path: Path) -> str | None:
    """The string literal given as description= to the Kernel(...) assigned to KERNEL in a kernel file, or None."""
    import ast

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "KERNEL" for t in node.targets) \
                and isinstance(node.value, ast.Call):
            for kw in node.value.keywords:
                if kw.arg == "description" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    return kw.value.value
    return None


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


def kernel_sections(metrics: pd.DataFrame, gpu: str, kernels: list[str], figdir: str, why: dict[str, str] | None = None,
                    drawn: Collection[str] | None = None) -> str:
    """One subsection per kernel; `why`: per kernel, its generated 'why' paragraph (analysis/why.py)."""
    out = []
    for kernel in kernels:
        k, label = camel(kernel), re.sub(r"[^a-z0-9]+", "-", kernel)
        out.append(f"\\subsection{{{tex_escape(kernel)}}}\n\\label{{sec:{label}}}\n")
        summary = kernel_summary(kernel)
        if summary:
            out.append(tex_escape(summary) + "\n")
        if why and why.get(kernel):
            out.append(why[kernel])
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
            out.append(
                best_sentence(k, tag, what, best) + speedup_sentence(base, tag, against) +
                f" At \\{k}Intensity{tag}~FLOP/byte the kernel is \\{k}Bound{tag}-bound here, and its "
                f"measured time is \\{base}ModelRatio{tag}$\\times$ the roofline-model time from the measured "
                "ceilings.\n")
        out.append("\\begin{table}[!htbp]\n\\centering\\footnotesize\\setlength{\\tabcolsep}{2pt}\n"
                   f"\\caption{{{tex_escape(kernel)} at the largest size on the headline device, in three frames: "
                   "GPU time (median time, achieved rate, fraction of the measured roofline, speedups over the "
                   "builtin and naive PyTorch, the verdict against the builtin), CUDA graph and Python loop (time "
                   f"and speedup over the builtin).}}\n\\label{{tab:{label}}}\n" + kernel_table(big) + "\\end{table}\n")
        captions = KERNEL_FIGURE_CAPTIONS_COMPUTE if compute_bound(ok[ok["pass"] == "fwd"]) else \
            KERNEL_FIGURE_CAPTIONS
        for fig, caption in captions.items():
            path = f"{figdir}/{gpu}/{fig}/{kernel}.pdf"
            if figure_drawn(path, drawn) and has_data(fig, metrics, gpu, None, kernel):
                out.append(figure(path, f"{tex_escape(kernel)}: {caption}", f"fig:{fig}-{label}", KERNEL_FIGURE_WIDTH))
        out.append("\\clearpage\n")
    return "\n".join(out)


def cpu_section(m: Macros, metrics: pd.DataFrame, ceilings: pd.DataFrame, figdir: str, sources: dict[str, str],
                launch_counts: set[str] | None, drawn: Collection[str] | None = None) -> str:
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
    m.add("CpuFindingsAboveRoof", count_phrase(int(found["beyond_noise"].sum()), "timed cell"),
          "CPU cells above their roof beyond noise")
    out = [
        "\\section{CPU results}\n"
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
        "wrong answer and \\CpuCellsFailed{} failed (Appendix~\\ref{sec:problems} lists the GPU's; the CPU's "
        "are in \\texttt{results/metrics.parquet}); above their roof beyond noise: \\CpuFindingsAboveRoof{}.\n",
        "\\begin{table}[!htbp]\n\\centering\\footnotesize\\setlength{\\tabcolsep}{3pt}\n"
        f"\\caption{{CPU ({where}): time per call at the largest size in host time and in a Python loop, per "
        "implementation, and the fastest in host time (a tie within noise named as one).}\n"
        "\\label{tab:cpu-summary}\n" + cpu_summary_table(rows) + "\\end{table}\n",
        "\\begin{table}[!htbp]\n\\centering\\small\n"
        f"\\caption{{Ceilings measured on the CPU ({where}), in host time: each copy by the bytes it moves (a copy "
        "the size of a sweep's cell runs from the CPU's caches, the large one from DRAM; the roof is the fastest, "
        "what a cell of that size can reach) and the best GEMM per math mode.}\n\\label{tab:cpu-ceilings}\n" +
        cpu_ceilings_table(ceilings) + "\\end{table}\n",
        "\\begin{table}[!htbp]\n\\centering\\scriptsize\\setlength{\\tabcolsep}{3pt}\n"
        f"\\caption{{Environment and provenance of the CPU data ({where}): its runs, commits, dates, versions, "
        "timing settings and the rows each contributed.}\n\\label{tab:cpu-provenance}\n" +
        origin.provenance_table(origin.runs(rows, ceilings[ceilings["gpu"] == CPU_KEY], sources), tex_escape) +
        "\\end{table}\n"
    ]
    if len(found):
        out.append("\\begin{table}[!htbp]\n\\centering\\scriptsize\\setlength{\\tabcolsep}{3pt}\n"
                   f"\\caption{{CPU cells above their roof, in host time ({where}).}}\n\\label{{tab:cpu-findings}}\n" +
                   findings_table(rows).replace("GPU time", CPU_FRAME_LABEL["gpu"]) + "\\end{table}\n")
    for fig, caption in CPU_FIGURE_CAPTIONS.items():
        path = f"{figdir}/{CPU_KEY}/{fig}.pdf"
        if figure_drawn(path, drawn) and has_data(fig, rows, CPU_KEY, launch_counts):
            out.append(
                figure(path, f"{caption} ({where})", f"fig:{fig}-{CPU_KEY}",
                       height=TALL_FIGURES.get(fig, FIGURE_HEIGHT)))
    return "\n".join(out) + "\\clearpage\n"
