"""The baselines the paper states, from the rows: the mode of every torch.compile row, the software versions, and
the sweep's attention shapes and mask (analysis/results.py re-exports them)."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from analysis.latex import Macros, tex_escape
from analysis.selection import timed


def join_words(words) -> str:
    """'a', 'a and b', 'a, b and c'."""
    words = list(words)
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1] if words else ""


def versions_sentence(metrics: pd.DataFrame, gpu: str) -> str:
    """The software the headline device's rows ran on (every version present, the most common first)."""
    rows = timed(metrics, gpu)
    parts = []
    for col, name in (("torch", "PyTorch"), ("triton", "Triton"), ("cuda", "CUDA"), ("driver", "driver")):
        if col in rows and rows[col].notna().any():
            vals = rows[col].dropna().astype(str).value_counts().index.tolist()
            parts.append(f"{name} {tex_escape(vals[0])}" + (f" (and {tex_escape(', '.join(vals[1:]))} in some "
                                                            "rows)" if len(vals) > 1 else ""))
    return ", ".join(parts)


def attention_shapes_sentence(metrics: pd.DataFrame, gpu: str) -> str:
    """The sweep's attention shapes (batch x heads x seq x head dim) and mask, as the rows and the kernel say."""
    rows = timed(metrics, gpu)
    a = rows[rows["kernel"] == "attention"]
    dims = ["dim_batch", "dim_heads", "dim_seq", "dim_head_dim"]
    if a.empty or not set(dims) <= set(a):
        return ""
    d = a.dropna(subset=dims).drop_duplicates(dims).sort_values("dim_seq")
    if d.empty:
        return ""
    heads, hd = sorted(set(d["dim_heads"].astype(int))), sorted(set(d["dim_head_dim"].astype(int)))
    shapes = ", ".join(f"{int(r.dim_batch)}$\\times${int(r.dim_seq)}" for r in d.itertuples())
    mask = attention_mask()
    return (f"batch $\\times$ sequence {shapes}, with {' or '.join(map(str, heads))} heads of dimension "
            f"{' or '.join(map(str, hd))}" + (f", {mask} mask" if mask else ""))


def attention_mask() -> str:
    """'causal' or 'no' as the attention kernel's file declares its sweep (CAUSAL = ...); '' where none says."""
    from rooflab.kernel import KERNELS_DIR

    for path in sorted(Path(KERNELS_DIR).rglob("*.py")):
        if "attention" not in str(path.relative_to(KERNELS_DIR)):
            continue
        found = re.search(r"^CAUSAL\s*=\s*(True|False)", path.read_text(), re.M)
        if found:
            return "causal" if found.group(1) == "True" else "no"
    return ""


def compile_modes_sentence(metrics: pd.DataFrame, gpu: str) -> str:
    """The mode of every torch.compile row on the headline device (rooflab.kernel.COMPILE_MODES), with the kernels
    each mode was measured for; max-autotune said to be unmeasured where no row has it."""
    from rooflab.kernel import COMPILE_MODES

    rows = timed(metrics, gpu)
    said = []
    for impl, mode in COMPILE_MODES.items():
        kernels = sorted(set(rows.loc[rows["impl"] == impl, "kernel"]))
        if kernels:
            said.append(f"the {tex_escape(impl)} rows ({tex_escape(join_words(kernels))}) in mode "
                        f"\\texttt{{{tex_escape(mode)}}}")
    if not said:
        return "No \\texttt{torch.compile} row was timed on this device."
    out = ("Every \\texttt{torch.compile} row compiles the naive expression whole, with static shapes: " +
           "; ".join(said) + ".")
    if not (rows["impl"] == "compile-max").any():
        out += (" Its \\texttt{max-autotune} mode, which searches Inductor's matrix-product and attention templates "
                "and may be faster on the compute-bound kernels, was not measured on this run.")
    else:
        out += (" \\texttt{max-autotune-no-cudagraphs} is \\texttt{max-autotune}'s template search without the CUDA "
                "graphs it adds: the sweep's CUDA-graph frame replays every implementation from a graph already.")
        from rooflab.config import schema_defaults

        wanted = schema_defaults()["compile_max"]["kernels"]  # the compute-bound kernels it is meant for
        missing = sorted(set(wanted) & set(rows["kernel"]) - set(rows.loc[rows["impl"] == "compile-max", "kernel"]))
        if missing:
            out += f" No max-autotune row was measured for {tex_escape(join_words(missing))}."
    return out


def baseline_macros(m: Macros, metrics: pd.DataFrame, gpu: str) -> None:
    m.add("CompileModesSentence", compile_modes_sentence(metrics, gpu), "the mode of every torch.compile row")
    m.add("SoftwareVersions", versions_sentence(metrics, gpu) or "n/a", "versions of the headline device's rows")
    m.add("AttentionSweepShapes",
          attention_shapes_sentence(metrics, gpu) or "n/a", "the sweep's attention shapes and mask")
