"""The shape sets other than the square sweep (config shapes: llm, odd, explicit shapes) in the paper: per GPU, per
kernel and shape, our Triton kernel over the best of the PyTorch builtin and torch.compile in GPU time, each shape
named by the model tensor it comes from (rooflab/shapes.py).

    python -m analysis.shapes --shapes results/shapes.parquet --figdir results/figures --out shapes.tex

Reads results/shapes.parquet (the metrics of every shape-set cell, analysis/metrics.py); writes the body of the
paper's section "Real shapes". Nothing measured: the section says so and how to measure them.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.aa_floors import noise_floor
from analysis.columns import flags
from analysis.latex import count_phrase, figure, fmt, long_table, part_phrase, table_latex, tex_escape
from analysis.selection import compile_dropped_output, compile_joint_graph
from rooflab.gpus import CPU_KEY, spec_for
from rooflab.io import read_table
from rooflab.shapes import parse_label, source_of
from rooflab.verdicts import VerdictRules

BASELINES = ("builtin", "compile")  # "the best of PyTorch": its own op and the compiled naive expression
DTYPE = "bfloat16"  # the models' own precision; the table takes another only where no cell has it
KEY = ["gpu", "kernel", "preset", "shape", "dtype", "pass"]


def ours_over_best(metrics: pd.DataFrame, rules: VerdictRules = VerdictRules()) -> pd.DataFrame:
    """Per (gpu, kernel, set, shape, dtype, pass) with a timed, correct Triton cell and baseline: ratio = the best
    baseline's median / ours (above 1: ours faster), the baseline that was best, our achieved rates, the verdict
    (faster / slower beyond the noise of analysis/aa_floors.noise_floor: the rules' k_sigma combined standard errors,
    their floor for the cell's length and the run's A/A floor, else tie; config verdicts) and the tensor the shape
    comes from."""
    cols = KEY + [
        "ratio", "best", "verdict", "loop_ratio", "family", "bytes", "flops", "achieved_gbps", "achieved_tflops",
        "source", "compile_dropped_output", "compile_joint_graph"
    ]
    if metrics.empty or "shape" not in metrics:
        return pd.DataFrame(columns=cols)
    ok = metrics[flags(metrics, "claimable")] if "claimable" in metrics else \
        metrics[metrics["status"] == "ok"]
    ours = ok[ok["impl"] == "triton"].set_index(KEY)
    base = ok[ok["impl"].isin(BASELINES)].sort_values("median_ms").groupby(KEY).first()
    best = base[["impl", "median_ms", "rse_median"]].add_suffix("_best")
    j = ours.join(best, how="inner").reset_index()
    if j.empty:
        return pd.DataFrame(columns=cols)
    j["ratio"] = j["median_ms_best"] / j["median_ms"]
    noise = noise_floor(j, j["rse_median_best"].to_numpy(dtype=float), "median_ms", rules,
                        j["median_ms_best"].to_numpy(dtype=float))
    j["verdict"] = np.select([j["ratio"] - 1 > noise, 1 - j["ratio"] > noise], ["faster", "slower"], default="tie")
    j["best"] = j["impl_best"]
    # the Python loop an eager caller pays per call: the best baseline's loop time over ours (NaN where not timed)
    if "loop_ms" in ok:
        loops = ok[ok["impl"].isin(BASELINES)].groupby(KEY)["loop_ms"].min().rename("loop_ms_best")
        j = j.join(loops, on=KEY)
        j["loop_ratio"] = j["loop_ms_best"] / j["loop_ms"]
    else:
        j["loop_ratio"] = np.nan
    j["source"] = [source_of(p, f, parse_label(s)) for p, f, s in zip(j["preset"], j["family"], j["shape"])]
    # the ratio rests on a compile row that skipped the output's store only where that row was the best baseline
    marks = (("compile_dropped_output", compile_dropped_output), ("compile_joint_graph", compile_joint_graph))
    for column, flag in marks:
        flagged = ok[flag(ok)]
        j[column] = pd.MultiIndex.from_frame(j[KEY]).isin(pd.MultiIndex.from_frame(flagged[KEY])) & \
            (j["best"] == "compile")
    return j[cols]


def one_dtype(d: pd.DataFrame, pass_: str = "fwd") -> pd.DataFrame:
    """One pass in DTYPE, or in the dtype most cells have where none is in DTYPE."""
    d = d[d["pass"] == pass_]
    dtype = DTYPE if (d["dtype"] == DTYPE).any() else (d["dtype"].mode().iloc[0] if len(d) else DTYPE)
    return d[d["dtype"] == dtype]


def _frames(gpu_ratio: float, loop_ratio: float) -> str:
    """One cell of rows_table: "GPU / loop", or the GPU ratio alone where the loop was not timed."""
    if np.isnan(gpu_ratio):
        return "--"
    return f"{gpu_ratio:.2f}" + ("" if np.isnan(loop_ratio) else f" / {loop_ratio:.2f}")


def rows_table(d: pd.DataFrame) -> str:
    """Rows x cols shapes: one line per shape (its set and source), one column per kernel, in each the ratio in GPU
    time and, where timed, in the Python loop ("GPU / loop")."""
    d = d.assign(cell=[_frames(g, lo) for g, lo in zip(d["ratio"], d["loop_ratio"].astype(float))])
    t = d.pivot_table(index=["preset", "shape", "source"], columns="kernel", values="cell", aggfunc="first")
    t = t.reset_index().rename(columns={"preset": "set", "shape": "rows x cols", "source": "from"}).fillna("--")
    width = "2.8cm" if len(t.columns) > 7 else "4.6cm"  # 5+ kernels: a narrower source fits the page
    return table_latex(t, align=f"ll>{{\\raggedright\\arraybackslash}}p{{{width}}}" + "r" * (len(t.columns) - 3))


def frames_sentence(d: pd.DataFrame) -> str:
    """The Python-loop frame beside GPU time: its median and lowest ratio, and the cells that win in one frame and
    lose in the other."""
    lo = d["loop_ratio"].astype(float)
    if lo.notna().sum() == 0:
        return ""
    split = d[(d["ratio"] >= 1) & (lo < 1)]
    return (f" In the Python loop an eager caller pays per call (each side's loop time, the best baseline's over "
            f"ours) the median is {fmt(lo.median())} (lowest {fmt(lo.min())}); in "
            f"{part_phrase(len(split), len(d), 'cell')} ours wins in GPU time and loses in the loop.")


def mkn_table(d: pd.DataFrame) -> str:
    t = d.assign(ours=d["achieved_tflops"])[["preset", "shape", "source", "ours", "best", "ratio"]]
    t = t.rename(columns={
        "preset": "set",
        "shape": "M x K x N",
        "source": "from",
        "ours": "ours TFLOP/s",
        "best": "best PyTorch"
    })
    return table_latex(t, formats={
        "ours TFLOP/s": "{:.0f}",
        "ratio": "{:.2f}"
    }, align="ll>{\\raggedright\\arraybackslash}p{6cm}rlr")


def section(metrics: pd.DataFrame, figdir: str = "results/figures", rules: VerdictRules = VerdictRules()) -> str:
    table = ours_over_best(metrics, rules)
    table = table[table["gpu"] != CPU_KEY]  # the CPU times no Triton cell (the interpreter checks it only)
    if table.empty:
        return ("No run has timed our Triton kernels at a shape set other than the square sweep. On a GPU, "
                "\\texttt{./run.sh all --config 'shapes=[llm]'} measures the \\texttt{llm} preset (and "
                "\\texttt{odd}, or explicit shapes, likewise); its cells land here.\n")
    out = []
    for gpu, g in table.groupby("gpu", sort=True):
        d = one_dtype(g)
        spec = spec_for(gpu)
        name = tex_escape(spec.name if spec else gpu)
        dtype = d["dtype"].iloc[0] if len(d) else DTYPE
        counts = d["verdict"].value_counts()
        sets = ", ".join(f"\\texttt{{{tex_escape(p)}}}" for p in dict.fromkeys(d["preset"]))
        out.append(
            f"On the {name}, in {tex_escape(dtype)}, forward pass, over the sets {sets}: our Triton kernel's GPU time "
            f"against the best of the PyTorch builtin and \\texttt{{torch.compile}} at each shape, as best over ours "
            f"(above 1: ours is faster). Over {count_phrase(len(d), 'cell')} the median is {fmt(d['ratio'].median())} (lowest "
            f"{fmt(d['ratio'].min())}, highest {fmt(d['ratio'].max())}); ours is faster beyond noise in "
            f"{int(counts.get('faster', 0))}, slower in {int(counts.get('slower', 0))} and tied in "
            f"{int(counts.get('tie', 0))}.{frames_sentence(d)}\n")
        for family, fd in d.groupby("family", sort=True):
            body = rows_table(fd) if family == "rows" else mkn_table(fd)
            caption = (f"{name}, {tex_escape(dtype)}: the best of the PyTorch builtin and torch.compile over our "
                       f"Triton kernel at each {'rows x cols' if family == 'rows' else 'M x K x N'} shape (above 1: "
                       f"ours faster), {'in GPU time / in the Python loop' if family == 'rows' else 'in GPU time'}, "
                       f"with the model tensor each shape comes from.")
            size = "\\scriptsize\\setlength{\\tabcolsep}{2pt}" if family == "rows" else "\\footnotesize"  # 7 kernels
            out.append(_table(body, caption, f"tab:shapes-{gpu}-{family}", size))
        back = one_dtype(g, "fwd+bwd")
        if len(back):
            out.append(backward_paragraph(back, gpu, name))
        pdf = Path(figdir, gpu, "shapes.pdf")
        if pdf.exists():
            out.append(
                figure(
                    str(pdf), f"{name}: ours over the best of PyTorch at every shape of the shape sets, "
                    f"against the FLOPs of a call for matmul and attention and the bytes it moves for the others (no "
                    f"one N fits these shapes); one panel per kernel, a colour per "
                    f"set, hollow markers ties within noise.", f"fig:shapes-{gpu}"))
    return "\n".join(out)


def _table(body: str, caption: str, label: str, size: str = "\\footnotesize") -> str:
    return (f"\\begin{{table}}[!htbp]\n\\centering{size}\n{body}\\caption{{{caption}}}\n"
            f"\\label{{{label}}}\n\\end{{table}}\n")


def backward_paragraph(d: pd.DataFrame, gpu: str, name: str) -> str:
    """The fwd+bwd pass (kernels with a backward) at the set shapes: both frames, as the forward's table."""
    dtype = tex_escape(d["dtype"].iloc[0])
    counts = d["verdict"].value_counts()
    caption = (f"{name}, {dtype}, forward and backward (an autograd Function's fwd+bwd against the builtin's "
               f"autograd and torch.compile of the naive expression): best over "
               f"ours in GPU time / in the Python loop.")
    return (
        f"Forward and backward together, in {dtype}, over {count_phrase(len(d), 'cell')}: median {fmt(d['ratio'].median())} "
        f"in GPU time (lowest {fmt(d['ratio'].min())}); faster beyond noise in {int(counts.get('faster', 0))}, "
        f"slower in {int(counts.get('slower', 0))}, tied in {int(counts.get('tie', 0))}.{frames_sentence(d)} "
        f"In the loop each call of ours also pays for a Python autograd Function and the autograd engine's "
        f"hand-off to its device thread, where the builtin's nodes are C++."
        f"{dropped_sentence(d)}{joint_sentence(d)}\n" + long_table(rows_table(d), caption, f"tab:shapes-{gpu}-fwdbwd"))


def dropped_sentence(d: pd.DataFrame) -> str:
    """How many fwd+bwd cells have as their best baseline a torch.compile row whose compiled function returned the
    gradients alone (rooflab.kernel.VJP_KEEPS_OUTPUT_SINCE): Inductor skipped the output's store, so it is
    flattered."""
    n = int(flags(d, "compile_dropped_output").sum())
    if not n:
        return (" No cell here has as its best baseline a torch.compile row that skipped the forward's output store "
                "(its compiled function returning the gradients alone).")
    kernels = ", ".join(sorted(d.loc[d["compile_dropped_output"].astype(bool), "kernel"].unique()))
    return (
        f" In {part_phrase(n, len(d), 'cell')} ({tex_escape(kernels)}) the best baseline is a torch.compile row timed "
        f"when its compiled function returned the gradients alone, so Inductor skipped the output's store that "
        f"every eager fwd+bwd makes: those ratios flatter torch.compile.")


def joint_sentence(d: pd.DataFrame) -> str:
    """How many fwd+bwd cells have as their best baseline a torch.compile row timed with forward and backward as one
    compiled graph (before rooflab.kernel.COMPILE_SPLIT_SINCE), which Inductor may fuse as no training step can."""
    joint = flags(d, "compile_joint_graph")
    if not joint.any():
        return (" No cell here has as its best baseline a torch.compile row timed with forward and backward compiled "
                "as one graph.")
    kernels = ", ".join(sorted(d.loc[joint, "kernel"].unique()))
    return (f" In {part_phrase(int(joint.sum()), len(d), 'cell')} ({tex_escape(kernels)}) the best baseline is a "
            f"torch.compile row timed with forward and backward compiled as one graph, which Inductor may fuse "
            f"(reading the input once for the output and the gradient), as no training step can: those ratios "
            f"may flatter torch.compile (Table~\\ref{{tab:compile-frames}} times both frames).")


SHAPE_LOSS_COLUMNS = [
    "gpu", "kernel", "preset", "dtype", "pass", "lost", "compared", "worst", "worst_shape", "lost_to", "loop_ratio"
]


def shape_losses(table: pd.DataFrame) -> pd.DataFrame:
    """Every (GPU, kernel, set, dtype, pass) of the shape sets where ours is slower in GPU time than the best of the
    builtin and torch.compile beyond noise (``ours_over_best``'s verdict) at some shape: how many of the compared
    shapes, the worst ratio (best over ours), its shape, the baseline it lost to and the Python loop's ratio there."""
    group = ["gpu", "kernel", "preset", "dtype", "pass"]
    compared = table.groupby(group).size()
    rows = []
    for key, g in table[table["verdict"] == "slower"].groupby(group, sort=True):
        w = g.loc[g["ratio"].idxmin()]
        rows.append({
            **dict(zip(group, key)), "lost": len(g),
            "compared": int(compared[key]),
            "worst": float(w["ratio"]),
            "worst_shape": w["shape"],
            "lost_to": w["best"],
            "loop_ratio": float(w["loop_ratio"])
        })
    return pd.DataFrame(rows, columns=SHAPE_LOSS_COLUMNS)


def shape_losses_section(metrics: pd.DataFrame, rules: VerdictRules = VerdictRules()) -> tuple[str, str]:
    """For the limitations, a sentence with the counts and the worst loss; for the appendix, a table of every
    ``shape_losses`` row ("" without a loss). The CPU's rows apart."""
    table = ours_over_best(metrics, rules)
    table = table[table["gpu"] != CPU_KEY]
    if table.empty:
        return "No run has timed our kernels at a shape set other than the square sweep: no loss there to list.\n", ""
    lost = shape_losses(table)
    n = int(lost["lost"].sum())
    sets = " and ".join(f"\\texttt{{{tex_escape(p)}}}" for p in dict.fromkeys(table["preset"]))
    head = (f"At the shapes of the sets {sets} (Appendix~\\ref{{sec:shapes}}), ours is slower than the best of the "
            f"builtin and torch.compile in GPU time beyond noise in {part_phrase(n, len(table), 'cell')} "
            f"compared")
    if lost.empty:
        return head + ".\n", ""
    w = lost.loc[lost["worst"].idxmin()]
    per = lost.groupby("kernel")["lost"].sum().sort_values(ascending=False)
    head += (" (" + ", ".join(f"{tex_escape(k)} {int(v)}" for k, v in per.items()) + ";")
    head += (f" Table~\\ref{{tab:shape-losses}}); the worst is {tex_escape(w['kernel'])} {tex_escape(w['pass'])} in "
             f"{tex_escape(w['dtype'])} at {tex_escape(w['worst_shape'])} of the \\texttt{{{tex_escape(w['preset'])}}} "
             f"set, where ours runs at {fmt(w['worst'], 2)}$\\times$ the {tex_escape(w['lost_to'])}'s speed.\n")
    t = pd.DataFrame({
        "GPU": lost["gpu"].str.upper(),
        "kernel": lost["kernel"],
        "set": lost["preset"],
        "dtype": lost["dtype"],
        "pass": lost["pass"],
        "shapes lost": [f"{a} of {b}" for a, b in zip(lost["lost"], lost["compared"])],
        "worst shape": lost["worst_shape"],
        "best / ours": lost["worst"],
        "against": lost["lost_to"],
        "loop": lost["loop_ratio"]
    })
    caption = ("Every loss beyond noise at the shape sets, GPU time: each GPU, kernel, shape set, data type "
               "and pass where ours is slower than the best of the builtin and torch.compile at some shape, the worst "
               "shape, its ratio (the baseline's time over ours), the baseline, and the Python loop's ratio at that "
               "shape (--: not timed).")
    body = table_latex(t, {"best / ours": "{:.2f}", "loop": "{:.2f}"}, "llllllrrlr")
    return head, _table(body, caption, "tab:shape-losses", "\\scriptsize\\setlength{\\tabcolsep}{3pt}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", required=True, help="results/shapes.parquet")
    ap.add_argument("--figdir", default="results/figures")
    ap.add_argument("--verdicts", default="{}", help="config verdicts, as JSON (rooflab/verdicts.py)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--losses-out",
                    help="the limitations' sentence on the losses at these shapes (shape_losses_section)")
    ap.add_argument("--losses-table-out", help="the appendix's table of every such loss")
    a = ap.parse_args(argv)
    import json

    from rooflab.io import write_text

    metrics = read_table(a.shapes)
    rules = VerdictRules.from_config(json.loads(a.verdicts))
    write_text(
        "% Generated by analysis/shapes.py from results/shapes.parquet. Do not edit.\n" +
        section(metrics, a.figdir, rules), a.out)
    said, table = shape_losses_section(metrics, rules)
    table = table or "At the shape sets ours loses to no PyTorch implementation beyond noise, or none was timed.\n"
    for text, path in ((said, a.losses_out), (table, a.losses_table_out)):
        if path:
            write_text("% Generated by analysis/shapes.py from results/shapes.parquet. Do not edit.\n" + text, path)


if __name__ == "__main__":
    main()
