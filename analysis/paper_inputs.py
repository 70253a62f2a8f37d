"""metrics + ceilings -> the generated LaTeX the paper inputs: number macros, tables, per-kernel sections, figures.

Every measured number in paper/main.tex arrives through here (tests/test_paper.py fails if the hand-written .tex
holds one). Macro names are letters only: \\GeluTritonGbpsBf = GeLU, Triton, achieved GB/s, bfloat16, at the
largest size measured on the headline GPU (the first GPU with timed data).

What the paper claims follows analysis/claims.py: every time and speedup names its frame (GPU time, CUDA graph,
Python loop), a tie within noise is named as a tie, and every cell above its roof is listed. The GPU paper holds GPU
rows only; CPU rows get a section of their own (cpu.tex) with only the concepts that apply to a CPU. Every dataset's
origin (this run, or a committed reference) is in the provenance table (analysis/origin.py), and projections onto
other GPUs are calibrated by the measured GPU (analysis/calibration.py).

The pieces: analysis/latex.py (escaping, numbers, the macro collector, tables), analysis/selection.py (which rows may
be quoted), analysis/macros.py, analysis/tables.py and analysis/sections.py; this module puts them together.

    python -m analysis.paper_inputs --metrics results/metrics.parquet --ceilings a.parquet ... --outdir DIR
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from analysis import origin, results
from analysis.attention import attention_section, backends_long_table
from analysis.claims import split_devices
# The pieces, importable from here as before (tests and scripts use analysis.paper_inputs.<name>).
from analysis.latex import (DIGIT_WORDS, DTYPE_TAG, IMPL_SHORT, IMPL_TAG, UNIT_TAG, Macros, camel,  # noqa: F401
                            count_phrase, figure, fmt, gpu_tag, pass_tag, table_latex, tex_escape)
from analysis.macros import (ALWAYS, FIXED_COST_MACROS, calibration_macros, findings_macros,  # noqa: F401
                             fixed_cost_macros, make_macros, origin_macros, repeatability_macros)
from analysis.sections import (CPU_FIGURE_CAPTIONS, GPU_FIGURE_CAPTIONS, GPU_TIME,  # noqa: F401
                               KERNEL_FIGURE_CAPTIONS, PROJECTION_FIGURE_CAPTIONS, best_sentence, cpu_section,
                               figures_tex, has_data, kernel_sections, kernel_summary, speedup_sentence)
from analysis.selection import headline_gpu, largest, most_common, ours_fixed_costs, timed, verdict  # noqa: F401
from analysis import why as why_
from analysis import why_ncu
from analysis.tables import (calibration_table, cpu_ceilings_table, cpu_summary_table, findings_table,  # noqa: F401
                             fixed_cost_table, host_cost_rows, host_cost_table, kernel_table, problems_table,
                             projection_table, rate_column, repeatability_table, specs_table, summary_table)
from rooflab.gpus import CPU_KEY
from rooflab.io import read_table

OUTPUTS = [
    "macros", "table_summary", "table_problems", "table_projection", "table_calibration", "table_specs",
    "table_repeatability", "table_fixed_cost", "table_host_cost", "table_findings", "table_provenance", "figures",
    "figures_projection", "kernels", "cpu", "table_plateau", "table_waves", "table_cost", "table_alignment",
    "table_traffic", "table_ablations", "table_alignstudy", "table_compile_frames", "attention", "table_results",
    "table_losses", "table_backend_losses", "why_ncu", "table_backends"
]


def generate(metrics: pd.DataFrame, ceilings: pd.DataFrame, figdir: str,
             repeatability: dict[str, pd.DataFrame] | None = None, sources: dict[str, str] | None = None,
             launch_counts: set[str] | None = None, current_run: str | None = None,
             profiles: pd.DataFrame | None = None, compiled: pd.DataFrame | None = None,
             traffic: dict[str, pd.DataFrame] | None = None, ablations: dict[str, pd.DataFrame] | None = None,
             drawn: list[str] | None = None, compile_frames: dict[str, pd.DataFrame] | None = None,
             backends: dict[str, pd.DataFrame] | None = None,
             why: dict[str, pd.DataFrame] | None = None) -> dict[str, str]:
    """Every generated input, by name (without .tex): pure, so tests can run it on a synthetic frame.
    ``repeatability``: per GPU key, the per-cell table of scripts/repeatability.py (optional). ``sources``: per
    device, the directory its rows were read from (results/raw/<gpu>: this run; else a committed reference).
    ``launch_counts``: the devices with profile rows (None: unknown). ``current_run``: the run building the paper
    (ROOFLAB_RUN_ID), whose cells the paper calls measured in this run, the others kept (None: each device's newest).
    ``profiles``, ``compiled``: the launch profiles and compiled-kernel facts, for the 'why' of each kernel
    (analysis/why.py; None: not measured). ``traffic``, ``ablations``: per GPU key, the tables of
    experiments/traffic.py and experiments/ablations.py (optional). ``drawn``: the figure PDFs the DAG draws (None:
    those present under ``figdir``). ``compile_frames``: per GPU key, `python -m lab compileframes` rows (optional).
    ``backends``: per GPU key, experiments/backends.py's rows, ours beside each SDPA backend (optional).
    ``why``: per GPU key, experiments/why_ncu.py's rows, Nsight Compute's facts per GPU kernel (optional).

    The GPU outputs are made from GPU rows and ceilings only; the CPU's rows go to `cpu` and its Cpu* macros."""
    sources = sources or {}
    metrics_gpu, metrics_cpu = split_devices(metrics)
    ceilings_gpu = ceilings[ceilings["gpu"] != CPU_KEY] if len(ceilings) else ceilings
    gpu = headline_gpu(metrics_gpu)
    gpus = sorted(dict.fromkeys(metrics_gpu["gpu"]), key=lambda g: g != gpu)  # the headline's first: its figures lead
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
    fresh = origin.freshness(metrics, sources, current_run)
    macros.add(
        "MeasuredThisRun",
        tex_escape(
            origin.freshness_sentence(fresh, this_run=bool(current_run))
            or "No device was measured by this workflow: every dataset is a "
            "committed reference."),
        "per device measured here: the cells this run measured, and those kept from earlier runs")
    host_cost_macros(macros, host_cost_rows(metrics_gpu, gpu))
    frames = (compile_frames or {}).get(gpu)
    macros.add("WavesSentence", why_.waves_sentence(metrics_gpu, compiled, gpu), "tiles and waves: the finding")
    macros.add("AlignmentSentence", why_.alignment_sentence(metrics_gpu, gpu), "the matrix product at the odd size")
    macros.add("PlateauSentence", why_.plateau_sentence(metrics_gpu, gpu), "the fixed cost of a call (table_plateau)")
    macros.add("CompileFramesSentence", why_.compile_frames_sentence(frames),
               "torch.compile's fwd+bwd as a training step over one joint graph (python -m lab compileframes)")
    macros.add("TrafficCompileFrame", why_.traffic_compile_frame((traffic or {}).get(gpu)),
               "the frame the traffic table's torch.compile fwd+bwd rows were measured in")
    cpu = cpu_section(macros, metrics_cpu, ceilings, figdir, sources, launch_counts, drawn)
    gpu_traffic, gpu_backends = (traffic or {}).get(gpu), (backends or {}).get(gpu)
    versus = results.versus(metrics_gpu, gpu)
    rows = results.results_rows(metrics_gpu, gpu, gpu_traffic, profiles)
    lost, backend_lost = results.losses(versus), results.backend_losses(gpu_backends)
    results.results_macros(macros, rows, lost, versus, backend_lost, gpu_backends)
    macros.add("LoopSpreadSentence", results.loop_spread_sentence(metrics_gpu, gpu),
               "the Python loop's own noise: one implementation's loop time across sizes of flat GPU time")
    results.baseline_macros(macros, metrics_gpu, gpu)
    why_gpu = why_ncu.card_of(why, gpu)
    why_ncu.why_ncu_macros(macros, (why or {}).get(why_gpu), why_gpu, gpu, metrics)
    return {
        "macros":
        macros.text(),
        "table_repeatability":
        repeatability_table(runs),
        "table_summary":
        summary_table(metrics_gpu, gpu),
        "table_problems":
        problems_table(metrics_gpu),
        "table_projection":
        projection_table(metrics_gpu, gpu),
        "table_calibration":
        calibration_table(metrics_gpu, gpu),
        "table_fixed_cost":
        fixed_cost_table(ours),
        "table_host_cost":
        host_cost_table(metrics_gpu, gpu),
        "table_specs":
        specs_table(ceilings_gpu),
        "table_findings":
        findings_table(metrics_gpu),
        "table_provenance":
        origin.provenance_table(gpu_runs, tex_escape),
        "figures":
        figures_tex(metrics_gpu, gpus, figdir, GPU_FIGURE_CAPTIONS, sources, launch_counts, drawn,
                    {("roofline", gpu)}),  # Figure 1 (paper/main.tex)
        "figures_projection":
        figures_tex(metrics_gpu, gpus, figdir, PROJECTION_FIGURE_CAPTIONS, sources, launch_counts, drawn),
        "kernels":
        kernel_sections(
            metrics_gpu, gpu, kernels, figdir,
            why_.why_sections(metrics_gpu, profiles, compiled, gpu, kernels, (traffic or {}).get(gpu),
                              why_ncu.measured_kernels((why or {}).get(why_gpu))), drawn),
        "cpu":
        cpu,
        "table_plateau":
        why_.plateau_table(metrics_gpu, gpu),
        "table_waves":
        why_.waves_table(metrics_gpu, compiled, gpu),
        "table_cost":
        why_.cost_table(metrics_gpu, gpu),
        "table_alignment":
        why_.alignment_table(metrics_gpu, gpu),
        "table_traffic":
        why_.traffic_table((traffic or {}).get(gpu)),
        "table_ablations":
        why_.ablations_table((ablations or {}).get(gpu)),
        "table_alignstudy":
        why_.alignment_study_table((ablations or {}).get(gpu), gpu),
        "table_compile_frames":
        why_.compile_frames_table(frames),
        "attention":
        attention_section(metrics_gpu, ceilings_gpu, gpu, gpu_traffic, gpu_backends),
        "table_results":
        results.results_table(rows),
        "table_losses":
        results.losses_table(lost),
        "table_backend_losses":
        results.backend_losses_table(backend_lost, gpu_backends is not None),
        "why_ncu":
        why_ncu.why_ncu_tables((why or {}).get(why_gpu)),
        "table_backends":
        backends_long_table(gpu_backends),
    }


def host_cost_macros(macros, rows: pd.DataFrame) -> None:
    """The Python-loop time per call over the smallest sizes (host_cost_rows), the median over kernels, for the builtin and our Triton
    (microseconds), and how many kernels' Triton calls cost more than the builtin's from a Python loop."""
    both = rows.dropna(subset=["loop_builtin", "loop_triton"]) if {"loop_builtin", "loop_triton"} <= set(rows) \
        else rows.iloc[:0]
    if both.empty:
        values = {
            "HostSize": "n/a",
            "HostLoopBuiltinUs": "n/a",
            "HostLoopTritonUs": "n/a",
            "HostLoopSlowerKernels": "0",
            "HostLoopKernels": "0"
        }
    else:
        values = {
            "HostSize": str(int(both["size"].min())),
            "HostLoopBuiltinUs": f"{both['loop_builtin'].median():.3g}",
            "HostLoopTritonUs": f"{both['loop_triton'].median():.3g}",
            "HostLoopSlowerKernels": str(int((both["loop_triton"] > both["loop_builtin"]).sum())),
            "HostLoopKernels": str(len(both))
        }
    for name, value in values.items():
        macros.add(name, value, "Python loop, per call, smallest size: the host path (table_host_cost)")
    macros.add("HostGraphSentence", host_graph_sentence(rows), "the CUDA-graph replay at the smallest size")


def host_graph_sentence(rows: pd.DataFrame) -> str:
    """What a CUDA-graph replay leaves of the Python loop's difference at the smallest size: the kernels where ours
    replays more than 10 % slower than the builtin, named, or that none does."""
    if not {"graph_builtin", "graph_triton"} <= set(rows):
        return ""
    g = rows.dropna(subset=["graph_builtin", "graph_triton"])
    if g.empty:
        return ""
    both = g.dropna(subset=["loop_builtin", "loop_triton"]) if {"loop_builtin", "loop_triton"} <= set(g) else g.iloc[:0]
    adds = ""
    if len(both):  # what the host adds to a call: the loop's time over the replay's, per kernel, then the median
        ours = (both["loop_triton"] - both["graph_triton"]).median()
        theirs = (both["loop_builtin"] - both["graph_builtin"]).median()
        adds = (f"A call from Python takes a median {ours:.3g}~\\textmu s longer than its graph replay for ours and "
                f"{theirs:.3g}~\\textmu s for the builtin (per kernel, the loop's time per call less the replay's, "
                f"over {count_phrase(len(both), 'kernel')}): the host's launch path, which a replay skips. ")
    slow = g[g["graph_triton"] > 1.1 * g["graph_builtin"]]
    named = ", ".join(f"{tex_escape(r.kernel)} ({r.graph_triton:.3g} against {r.graph_builtin:.3g}~\\textmu s)"
                      for r in slow.itertuples())
    if len(slow) == len(g):
        return adds + f"Replayed from a CUDA graph, ours stays more than 10\\,\\% slower than the builtin: {named}."
    if slow.empty:
        every = "the one kernel" if len(g) == 1 else f"all {len(g)} kernels"
        return adds + f"Replayed from a CUDA graph, ours is within 10\\,\\% of the builtin or faster for {every}."
    return (adds +
            f"Replayed from a CUDA graph, ours is within 10\\,\\% of the builtin or faster for {len(g) - len(slow)} of "
            f"{len(g)} kernels; slower: {named}.")


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


def read_facts(paths) -> pd.DataFrame | None:
    """Profiles or compiled-kernel facts, concatenated (None where no file is given or none can be read)."""
    frames = []
    for p in paths or []:
        try:
            frames.append(read_table(p))
        except Exception:  # a missing or foreign file: the paper says 'not measured'
            continue
    return pd.concat(frames, ignore_index=True) if frames else None


def build(
    metrics_path: str, ceiling_paths: list[str], outdir: str, figdir: str, repeatability_paths: list[str] = (),
    profile_paths: list[str] | None = None, compiled_paths: list[str] | None = None, traffic_paths: list[str] = (),
    ablation_paths: list[str] = (), drawn: list[str] | None = None, compile_frame_paths: list[str] = (),
    backend_paths: list[str] = (), why_paths: list[str] = ()
) -> None:
    import os

    from rooflab.io import CEILING_COLUMNS, read_results, write_text

    metrics = read_table(metrics_path)
    ceilings = pd.concat([read_results(p, CEILING_COLUMNS) for p in ceiling_paths], ignore_index=True)
    # <dir>/<gpu>/repeatability.csv: the GPU is the folder's name
    runs = {Path(p).parent.name: pd.read_csv(p) for p in repeatability_paths}
    counts = None if profile_paths is None else read_launch_counts(profile_paths)
    for name, text in generate(metrics, ceilings, figdir, runs, origin.sources_from_paths(ceiling_paths), counts,
                               os.environ.get("ROOFLAB_RUN_ID") or None, read_facts(profile_paths),
                               read_facts(compiled_paths), {
                                   Path(p).parent.name: pd.read_csv(p)
                                   for p in traffic_paths
                               }, {
                                   Path(p).parent.name: read_table(p)
                                   for p in ablation_paths
                               }, drawn, {
                                   Path(p).parent.name: pd.read_csv(p)
                                   for p in compile_frame_paths
                               }, {
                                   Path(p).parent.name: read_table(p)
                                   for p in backend_paths
                               }, {
                                   Path(p).parent.name: read_table(p)
                                   for p in why_paths
                               }).items():
        write_text(text, Path(outdir) / f"{name}.tex")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--ceilings", nargs="+", required=True,
                    help="<dir>/<gpu>/ceilings.parquet: results/raw/<gpu> is this run, any other dir a reference")
    ap.add_argument("--figdir", default="results/figures")
    ap.add_argument(
        "--figures", nargs="*", default=None,
        help="the figure PDFs the workflow draws, included whether or not drawn yet (default: the PDFs "
        "present under --figdir)")
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--repeatability", nargs="*", default=[],
                    help="scripts/repeatability.py tables, as <dir>/<gpu>/repeatability.csv")
    ap.add_argument("--profiles", nargs="*", default=None,
                    help="profiles.parquet files: a fusion figure enters the paper only for a device they cover")
    ap.add_argument("--compiled", nargs="*", default=None,
                    help="compiled.parquet files: registers, occupancy, load widths and tiles of our Triton kernels")
    ap.add_argument("--traffic", nargs="*", default=[],
                    help="experiments/traffic.py tables, as <dir>/<gpu>/traffic.csv: DRAM bytes per call, measured")
    ap.add_argument("--ablations", nargs="*", default=[],
                    help="experiments/ablations.py tables, as <dir>/<gpu>/ablations.parquet")
    ap.add_argument("--compile-frames", nargs="*", default=[],
                    help="python -m lab compileframes tables, as <dir>/<gpu>/compile_frames.csv")
    ap.add_argument("--backends", nargs="*", default=[],
                    help="experiments/backends.py tables, as <dir>/<gpu>/backends.parquet")
    ap.add_argument("--why-ncu", nargs="*", default=[],
                    help="experiments/why_ncu.py tables, as <dir>/<gpu>/why_ncu.parquet")
    a = ap.parse_args(argv)
    build(a.metrics, a.ceilings, a.outdir, a.figdir, a.repeatability, a.profiles, a.compiled, a.traffic, a.ablations,
          a.figures, a.compile_frames, a.backends, a.why_ncu)


if __name__ == "__main__":
    main()
