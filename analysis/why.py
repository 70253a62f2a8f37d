"""Why each implementation is as fast as it is (issue 22): what each launches (profiles.parquet), the bytes its
kernels would move by the traffic each naive expression annotates in its source (a model) and what each call did move
through DRAM (experiments/traffic.py under Nsight Compute, a measurement), what our compiled Triton kernels look like (compiled.parquet: registers, occupancy, load width), the fixed cost per call
and the size where the work outgrows it, the tile the autotuner chose and the waves it makes, and what a kernel costs
to get (first call, autotune) against what it costs warm.

Every sentence is chosen by the data and every number comes from the rows; where a device has no such rows (the CPU
default: Triton under the interpreter, no profiles of GPU kernels, no autotune) the paragraph and tables say "not
measured on this run". Pure functions of frames, so tests run them on synthetic rows.
"""
from __future__ import annotations

import math
import re
from collections.abc import Collection
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.columns import flags, texts
from analysis.latex import fmt, tex_escape
from analysis.selection import timed
from analysis.study_tables import (ablations_table, alignment_study, alignment_study_table,  # noqa: F401
                                   compile_frames, compile_frames_sentence, compile_frames_table, traffic_compile_frame,
                                   traffic_rows, traffic_table)
from analysis.why_tables import (LOW_PRECISION_FIRST, NOT_MEASURED, alignment,  # noqa: F401
                                 alignment_sentence, alignment_table, cost, cost_table, plateau, plateau_sentence,
                                 plateau_table, tile_of, waves, waves_sentence, waves_table)
from rooflab.kernel import ELEMENT_BYTES, IMPL_LABEL
from rooflab.kernel import IMPLS as IMPL_ORDER

# ---------------------------------------------------------------------------------------------------- launches


def short_name(name: str) -> str:
    """A GPU kernel's name without its template arguments, signature and namespaces:
    'void at::native::reduce_kernel<512, 1, ...>(...)' -> 'reduce_kernel'."""
    name = re.sub(r"^void\s+", "", name.strip())
    depth, out = 0, []
    for ch in name:  # drop everything inside <...> and (...), nested
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
    return "".join(out).split("::")[-1].strip() or name


def launched(names: str | None) -> list[tuple[str, int]]:
    """The ';'-separated kernel names of a profile row as [(short name, times launched)], in first-launch order."""
    if not isinstance(names, str) or not names.strip():
        return []
    counts: dict[str, int] = {}
    for n in re.split(r";\s+(?=void |[A-Za-z_])", names):
        if n.strip():
            s = short_name(n)
            counts[s] = counts.get(s, 0) + 1
    return list(counts.items())


def launches(profiles: pd.DataFrame) -> pd.DataFrame:
    """Per (gpu, kernel, impl, dtype, pass): the size profiled, the kernels launched per call and their short names."""
    cols = ["gpu", "kernel", "impl", "dtype", "pass", "size", "n_kernels", "names"]
    if profiles is None or profiles.empty or "n_kernels" not in profiles:
        return pd.DataFrame(columns=cols)
    p = profiles[profiles["n_kernels"].notna()]
    if "status" in p:
        p = p[texts(p, "status", "ok") == "ok"]
    out = p.assign(n_kernels=p["n_kernels"].astype(int), names=p["kernel_names"].map(launched))
    return out[cols].reset_index(drop=True)


def breakable(name: str) -> str:
    """A kernel name, escaped, that may break after each underscore (long library names overflow a line)."""
    return tex_escape(name).replace("\\_", "\\_\\allowbreak{}")


def launch_phrase(n: int, names: list[tuple[str, int]]) -> str:
    """'9 kernels (vectorized_elementwise_kernel x7, elementwise_kernel x2)', names in \\texttt."""
    listed = ", ".join(f"\\texttt{{{breakable(s)}}}" + (f"~$\\times${c}" if c > 1 else "") for s, c in names[:4])
    more = ", \\dots" if len(names) > 4 else ""
    return f"{n} kernel{'s' if n != 1 else ''}" + (f" ({listed}{more})" if listed else "")


# ---------------------------------------------------------------------------------------------------- traffic model

_TERM = r"\d*\s*[Nn](?:\^2)?"
_EXPR = rf"{_TERM}(?:\s*\+\s*{_TERM})*"
_SEGMENT = re.compile(rf"(?:read\s+(?P<read>{_EXPR}))?[,\s]*(?:write\s+(?P<write>{_EXPR}))?\s*(?P<each>each)?\s*$")
_HEAD = re.compile(r"^(?:(?P<k>\d+)\s+kernels?(?P<chunk>\s+per chunk)?:\s*)?(?P<rest>(?:read|write)\b.*)$")


def _terms(expr: str | None, n: float) -> float:
    """'2N^2 + N' at N = n, in elements."""
    total = 0.0
    for t in re.findall(_TERM, expr or ""):
        t = t.replace(" ", "")
        coef = float(re.match(r"\d*", t).group() or 1)
        total += coef * (n * n if t.endswith("^2") else n)
    return total


def naive_source(kernel: str, kernels_dir: Path | None = None) -> str | None:
    """The source of the kernel's naive PyTorch expression, forward (`<kernel>_naive_fwd`, `<kernel>_naive`, else the function given as naive_fn=),
    read as text: importing the kernels would import torch and Triton."""
    import ast

    from rooflab.kernel import KERNELS_DIR, kernel_file

    path = kernel_file(kernel, kernels_dir or KERNELS_DIR)
    if not path.exists():
        return None
    text = path.read_text()
    tree = ast.parse(text)
    name = next(
        (f for f in (f"{kernel}_naive_fwd", f"{kernel}_naive") if re.search(rf"^def {f}\(", text, re.M)), None) or next(
            (kw.value.id for node in ast.walk(tree) if isinstance(node, ast.Call)
             for kw in node.keywords if kw.arg == "naive_fn" and isinstance(kw.value, ast.Name)), None)
    fn = next((node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == name), None)
    # whole lines: the last statement's trailing comment lies past the node's end
    return "\n".join(text.splitlines()[fn.lineno - 1:fn.end_lineno]) if fn is not None else None


def naive_traffic(kernel: str, n: int, element_bytes: int, kernels_dir: Path | None = None) -> dict | None:
    """The naive expression's traffic at N x N, modelled from the comments of its source (one line per statement:
    '# 2 kernels: read 2N^2, write N^2 each', '# 1 kernel: read N^2 + N, write N^2; read N^2, write N^2'; a loop
    over chunks of C columns: '2 kernels per chunk: ...' counts N / C times). {'kernels', 'bytes'}, or None where
    the source annotates no traffic. A model of what each launched kernel reads and writes, not a measurement."""
    src = naive_source(kernel, kernels_dir)
    if src is None:
        return None
    chunk = re.search(r"chunk of (\d+)", src)
    kernels, elements, seen = 0, 0.0, False
    for line in src.splitlines():
        if "#" not in line:
            continue
        head = _HEAD.match(re.sub(r"\s*\([^)]*\)", "", line.split("#", 1)[1]).strip())  # '(A and B)': a gloss
        if not head:
            continue
        times = math.ceil(n / int(chunk.group(1))) if head["chunk"] and chunk else 1
        segments = [s.strip() for s in head["rest"].split(";") if s.strip()]
        parsed = [_SEGMENT.match(s) for s in segments]
        if not all(parsed):
            continue
        k = int(head["k"] or 1)
        per = sum(_terms(p["read"], n) + _terms(p["write"], n) for p in parsed)
        if len(parsed) == 1 and parsed[0]["each"]:
            per *= k
        kernels += k * times
        elements += per * times
        seen = True
    return {"kernels": kernels, "bytes": elements * element_bytes} if seen else None


# ---------------------------------------------------------------------------------------------------- compiled


def compiled_best(compiled: pd.DataFrame, gpu: str, kernel: str, dtype: str) -> pd.DataFrame:
    """The compiled facts of our Triton kernel(s) as run (the autotuner's choice where it tuned), one row per
    (function, size), for one kernel and dtype on one GPU."""
    if compiled is None or compiled.empty:
        return pd.DataFrame()
    c = compiled[(compiled["gpu"] == gpu) & (compiled["kernel"] == kernel) & (compiled["dtype"] == dtype)]
    if "status" in c:
        c = c[texts(c, "status", "ok") == "ok"]
    if "pass" in c:
        c = c[c["pass"] == "fwd"]
    if "autotuned" in c:
        c = c[~flags(c, "autotuned") | flags(c, "autotune_best")]
    return c.drop_duplicates(["function", "size"]).sort_values("size")


def compiled_phrase(c: pd.Series, dtype: str) -> str:
    """Registers, spills, warps, occupancy and load width of one compiled kernel, as a clause."""
    parts = [f"{int(c['n_regs'])} registers a thread" if pd.notna(c.get("n_regs")) else None]
    if pd.notna(c.get("n_spills")):
        parts.append("no spills" if int(c["n_spills"]) == 0 else f"{int(c['n_spills'])} bytes spilled")
    if pd.notna(c.get("num_warps")):
        parts.append(f"{int(c['num_warps'])} warps a program")
    if pd.notna(c.get("occupancy")):
        lim = c.get("occupancy_limiter")
        parts.append(f"occupancy {fmt(float(c['occupancy']), 2)}" +
                     (f" (limited by {tex_escape(str(lim))})" if isinstance(lim, str) and lim else ""))
    bits = c.get("ld_global_max_bits")
    if pd.notna(bits) and int(bits) > 0:
        elems = int(bits) // (8 * ELEMENT_BYTES.get(dtype, 4))
        parts.append(f"global loads up to {int(bits)} bits wide ({elems} elements)")
    elif pd.notna(bits):
        parts.append("no vector \\texttt{ld.global} (its tiles arrive by TMA or scalar loads)")
    return ", ".join(p for p in parts if p)


# ---------------------------------------------------------------------------------------------------- paragraphs


def _rate_at(rows: pd.DataFrame, impl: str) -> pd.Series | None:
    r = rows[rows["impl"] == impl]
    return r.iloc[0] if len(r) else None


def traffic_sentences(kernel: str, traffic: pd.DataFrame | None, ok: pd.DataFrame | None = None) -> list[str]:
    """What one call of each implementation moved through DRAM (experiments/traffic.py, Nsight Compute), forward
    pass, against the minimum; and, forward and forward+backward, how much more than ours the builtin and
    torch.compile moved, where they moved over 10 % more."""
    traffic = traffic_rows(traffic)
    t = traffic[(traffic["kernel"] == kernel) & (traffic["pass"] == "fwd")].set_index("impl")
    if t.empty:
        return []
    r = t.iloc[0]
    said = [
        f"{tex_escape(IMPL_LABEL[i])} {fmt(t.at[i, 'moved_bytes'] / 1e6)}~MB in {_kernels(t.at[i, 'launches'])}"
        for i in IMPL_ORDER
        if i in t.index
    ]
    out = [
        f"Measured under Nsight Compute (one call at $N={int(r['size'])}$ in {tex_escape(str(r['dtype']))}, "
        f"caches flushed before each kernel; Table~\\ref{{tab:traffic}}), the DRAM bytes read and written per "
        f"call: " + "; ".join(said) + f"; the minimum is {fmt(r['model_bytes'] / 1e6)}~MB."
    ]
    for pass_, where in (("fwd", ""), ("fwd+bwd", " in the forward and backward together")):
        t = traffic[(traffic["kernel"] == kernel) & (traffic["pass"] == pass_)].set_index("impl")
        for impl in ("builtin", "compile"):
            if {impl, "triton"} <= set(t.index) and t.at[impl, "moved_bytes"] > 1.1 * t.at["triton", "moved_bytes"]:
                more = t.at[impl, "dram_read_bytes"] / t.at["triton", "dram_read_bytes"]
                out.append(f"{'The builtin' if impl == 'builtin' else 'torch.compile'} moves "
                           f"{fmt(t.at[impl, 'moved_bytes'] / t.at['triton', 'moved_bytes'])}$\\times$ our bytes"
                           f"{where} (it reads {fmt(more)}$\\times$ what ours reads, in "
                           f"{_kernels(t.at[impl, 'launches'])} to our {int(t.at['triton', 'launches'])})" +
                           _traffic_verdict(ok, kernel, impl, pass_, t.iloc[0]))
    return out


def _traffic_verdict(ok: pd.DataFrame | None, kernel: str, impl: str, pass_: str, at: pd.Series) -> str:
    """What the extra bytes mean for the time, from the GPU time of both calls at the traffic's size and dtype: a
    cost where the other call is the slower, and no explanation where it is the faster."""
    if ok is None or ok.empty:
        return "."
    c = ok[(ok["kernel"] == kernel) & (ok["pass"] == pass_) & (ok["size"] == at["size"])
           & (ok["dtype"] == at["dtype"])].set_index("impl")["median_ms"]
    if not {impl, "triton"} <= set(c.index):
        return "."
    ratio = c[impl] / c["triton"]
    if ratio > 1:
        return f": part of its time ({fmt(ratio)}$\\times$ ours in GPU time) is traffic ours does not make."
    return (f", and is still the faster call ({fmt(1 / ratio)}$\\times$ our speed in GPU time): what its kernels do "
            "better outweighs the extra bytes.")


def _kernels(n) -> str:
    return f"{int(n)} kernel{'s' if int(n) != 1 else ''}"


def why_paragraph(kernel: str, metrics: pd.DataFrame, profiles: pd.DataFrame | None, compiled: pd.DataFrame | None,
                  gpu: str, traffic: pd.DataFrame | None = None, inside: Collection[str] = ()) -> str:
    """The 'why' of one kernel on one GPU, every sentence present only where its data is (``traffic``: that GPU's
    table of experiments/traffic.py, or None; ``inside``: the kernels whose builtin and ours Nsight Compute measured,
    analysis/why_ncu.py)."""
    ok = timed(metrics, gpu)
    ok = ok[(ok["kernel"] == kernel) & (ok["pass"] == "fwd")]
    rows = metrics[(metrics["gpu"] == gpu) & (metrics["kernel"] == kernel) & (metrics["pass"] == "fwd")]
    launch = launches(profiles)
    launch = launch[(launch["gpu"] == gpu) & (launch["kernel"] == kernel) & (launch["pass"] == "fwd")]
    dtypes = set(launch["dtype"]) | set(ok["dtype"])
    dtype = next((d for d in LOW_PRECISION_FIRST if d in dtypes), None)
    out = []
    if launch.empty:
        out.append(f"The kernels each implementation launches are {NOT_MEASURED} (no GPU profile of this device).")
    else:
        launch = launch[launch["dtype"] == dtype] if dtype in set(launch["dtype"]) else launch
        size = int(launch["size"].iloc[0])
        by = {r.impl: r for r in launch.itertuples()}
        said = [
            f"{tex_escape(IMPL_LABEL[i])} {launch_phrase(by[i].n_kernels, by[i].names)}" for i in IMPL_ORDER if i in by
        ]
        out.append(f"Per call at $N={size}$ in {tex_escape(dtype)} (torch.profiler): " + "; ".join(said) + ".")
        tri, bi = by.get("triton"), by.get("builtin")
        if tri is not None and bi is not None:
            if bi.n_kernels > tri.n_kernels:
                out.append(f"The builtin launches {bi.n_kernels} kernels where ours launches {tri.n_kernels}: "
                           "each extra one is another launch and another pass over memory.")
            elif bi.n_kernels == tri.n_kernels:
                out.append("The builtin launches as many kernels as ours: any difference is inside the kernels" +
                           (" (measured under Nsight Compute: Section~\\ref{sec:fusion} and "
                            "Table~\\ref{tab:why-ncu})." if kernel in inside else "."))
        comp = by.get("compile")
        if comp is not None:
            generated = sum(c for name, c in comp.names if name.startswith("triton_"))
            out.append("Inductor generated every kernel torch.compile launches." if generated == comp.n_kernels else
                       f"Of torch.compile's {_kernels(comp.n_kernels)}, Inductor generated {generated} (its "
                       "\\texttt{triton\\_} ones); the others are library calls.")
        modelled = naive_traffic(kernel, size, ELEMENT_BYTES.get(dtype, 4))
        least = ok[(ok["size"] == size) & (ok["dtype"] == dtype)]["bytes"]
        if modelled and len(least):
            minimum = float(least.iloc[0])
            count = "" if "naive" not in by else (" (as many as it launched)" if by["naive"].n_kernels
                                                  == modelled["kernels"] else f" (it launched {by['naive'].n_kernels})")
            out.append(f"By the traffic its source annotates (modelled, not measured), the naive expression's "
                       f"{_kernels(modelled['kernels'])}{count} move {fmt(modelled['bytes'] / 1e6)}~MB, "
                       f"{fmt(modelled['bytes'] / minimum)}$\\times$ the {fmt(minimum / 1e6)}~MB the minimum-bytes "
                       "model counts.")
            at = ok[(ok["size"] == size) & (ok["dtype"] == dtype)].set_index("impl")["median_ms"]
            if {"naive", "triton"} <= set(at.index):
                out.append(f"Measured, its GPU time there is {fmt(at['naive'] / at['triton'])}$\\times$ ours.")
    out += traffic_sentences(kernel, traffic, ok)
    c = compiled_best(compiled, gpu, kernel, dtype) if dtype else pd.DataFrame()
    if c.empty:
        out.append(f"Our Triton kernel's registers, occupancy and load width are {NOT_MEASURED}.")
    else:
        r = c.iloc[-1]  # the largest size compiled
        auto = " (the autotuner's choice)" if bool(r.get("autotuned")) else ""
        out.append(f"Our Triton kernel \\texttt{{{breakable(str(r['function']))}}} at $N={int(r['size'])}$"
                   f"{auto}: {compiled_phrase(r, dtype)}.")
    cold = rows[(rows["impl"] == "compile")]
    first = (cold["cold_ms"] if "cold_ms" in cold else pd.Series(dtype=float)).dropna()
    if len(first):
        out.append(f"torch.compile's first call took {fmt(first.median())}~ms (median over {len(first)} cells, "
                   f"at most {fmt(first.max())}~ms): compilation is paid once per shape and dtype.")
    else:
        out.append(f"torch.compile's first call is {NOT_MEASURED}.")
    graphs = (cold["compile_graphs"] if "compile_graphs" in cold else pd.Series(dtype=float)).dropna()
    if len(graphs):  # rows from before graphs were counted say nothing
        again = int((graphs > 1).sum())
        out.append(f"Dynamo traced one graph in each of its {len(graphs)} cells: no input set after the first "
                   "recompiled it." if not again else f"Dynamo recompiled in {again} of {len(graphs)} cells (up to "
                   f"{int(graphs.max())} graphs a cell).")
    big = ok[ok["dtype"] == dtype]
    if not big.empty:
        big = big[big["size"] == big["size"].max()]
        b, t = _rate_at(big, "builtin"), _rate_at(big, "triton")
        if b is not None and t is not None and np.isfinite(t["median_ms"]):
            frac = "roofline_fraction_measured"
            ratio = b["median_ms"] / t["median_ms"]
            verdict = str(t.get("verdict_vs_builtin") or "")
            where = (f"At $N={int(b['size'])}$ the builtin reaches {fmt(b[frac], 2)} of the measured roofline and "
                     f"ours {fmt(t[frac], 2)}")
            if verdict == "faster":
                out.append(f"{where}: the builtin loses here, taking {fmt(ratio)}$\\times$ our GPU time.")
            elif verdict == "slower":
                out.append(f"{where}: ours loses here, the builtin taking {fmt(ratio)}$\\times$ our GPU time.")
            else:
                out.append(f"{where}: a tie within noise in GPU time.")
    return " ".join(out)


def why_sections(metrics: pd.DataFrame, profiles: pd.DataFrame | None, compiled: pd.DataFrame | None, gpu: str,
                 kernels: list[str], traffic: pd.DataFrame | None = None,
                 inside: Collection[str] = ()) -> dict[str, str]:
    """Per kernel, its 'why' paragraph (LaTeX), for the kernel sections."""
    return {
        k: "\\paragraph{Why.} " + why_paragraph(k, metrics, profiles, compiled, gpu, traffic, inside) + "\n"
        for k in kernels
    }
