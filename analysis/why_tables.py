"""The paper's 'why' tables (issue 22), from the metrics rows: the fixed cost per call and the size where the work
outgrows it (the fixed-cost plateau), the tile the autotuner chose and the waves it makes, what a kernel costs to get
(first call, autotune) against a warm call, and 1793 against 2048 for the matrix product. Each says "not measured on
this run" without its rows. The per-kernel paragraphs are analysis/why.py's; the optional studies' tables (traffic,
ablations, torch.compile's frames) analysis/study_tables.py's.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from analysis.claims import FRAME_LABEL
from analysis.columns import flags
from analysis.latex import IMPL_SHORT, fmt, part_phrase, span, table_latex, tex_escape
from analysis.metrics import wave_efficiency
from analysis.selection import timed
from rooflab.gpus import SPECS
from rooflab.kernel import IMPLS as IMPL_ORDER

NOT_MEASURED = "not measured on this run"
LOW_PRECISION_FIRST = ("bfloat16", "float16", "float32", "tf32")  # the dtype a table speaks of, first present

# ---------------------------------------------------------------------------------------------------- fixed cost


def _work(rows: pd.DataFrame) -> pd.Series:
    """What grows with size: FLOPs for a compute-bound kernel, bytes otherwise."""
    compute = rows.get("bound", pd.Series("memory", index=rows.index)).eq("compute")
    return rows["flops"].where(compute, rows["bytes"]).astype(float)


HOST_COST_SIZES = 3  # the smallest sizes timed: most kernels' device work a few microseconds, the loop time the host's


def plateau(metrics: pd.DataFrame, gpu: str) -> pd.DataFrame:
    """Per kernel (forward, its lowest precision) and implementation: the fixed cost per call (the median GPU time
    at the smallest size, and the Python-loop time, the median over the HOST_COST_SIZES smallest sizes: one size's
    outlier is not the host path), the rate at the largest size (work / GPU time: GB/s, or
    TFLOP/s for a compute-bound kernel), and the crossover: the smallest measured size whose work at that rate takes
    longer than the fixed cost (NaN: none up to the largest size)."""
    ok = timed(metrics, gpu)
    ok = ok[(ok["pass"] == "fwd") & np.isfinite(ok["median_ms"].astype(float))]
    if "family" in ok:
        ok = ok[ok["family"].isin(["rows", "mkn"]) | ok["family"].isna()] if ok["family"].notna().any() else ok
    rows = []
    for kernel, k in ok.groupby("kernel"):
        dtype = next((d for d in LOW_PRECISION_FIRST if d in set(k["dtype"])), None)
        k = k[k["dtype"] == dtype]
        for impl, g in k.groupby("impl"):
            g = g.groupby("size").median(numeric_only=True).sort_index()
            if len(g) < 2:
                continue
            g = g.assign(bound=np.where(kernel == "matmul", "compute", "memory")) if "bound" not in g else g
            compute = kernel == "matmul"
            work = (g["flops"] if compute else g["bytes"]).astype(float)
            big = g.index[-1]
            rate = work.loc[big] / (g["median_ms"].loc[big] * 1e-3)  # per second
            fixed_ms = g["median_ms"].iloc[0]
            over = g.index[(work / rate * 1e3) > fixed_ms]
            rows.append({
                "kernel": kernel,
                "dtype": dtype,
                "impl": impl,
                "small": int(g.index[0]),
                "fixed_us": fixed_ms * 1e3,
                "loop_us": g["loop_ms"].iloc[:HOST_COST_SIZES].median() * 1e3 if "loop_ms" in g else np.nan,
                "large": int(big),
                "rate": rate / (1e12 if compute else 1e9),
                "unit": "TFLOP/s" if compute else "GB/s",
                "crossover": float(over[0]) if len(over) else np.nan
            })
    return pd.DataFrame(
        rows, columns=["kernel", "dtype", "impl", "small", "fixed_us", "loop_us", "large", "rate", "unit", "crossover"])


def plateau_table(metrics: pd.DataFrame, gpu: str) -> str:
    t = plateau(metrics, gpu)
    if t.empty:
        return f"\\begin{{center}}The fixed-cost plateau: GPU time {NOT_MEASURED}.\\end{{center}}\n"
    order = {i: n for n, i in enumerate(IMPL_ORDER)}
    t = t.sort_values(["kernel", "impl"], key=lambda s: s.map(order) if s.name == "impl" else s)
    g, lo = FRAME_LABEL["gpu"], FRAME_LABEL["loop"]
    out = pd.DataFrame({
        ("", "kernel"):
        t["kernel"],
        ("", "dtype"):
        t["dtype"],
        ("", "impl"):
        t["impl"].map(IMPL_SHORT),
        ("", "small N"):
        t["small"],
        (g, "µs at small N"):
        t["fixed_us"],
        (g, "rate, large N"):
        t["rate"],
        (g, "unit"):
        t["unit"],
        (g, "crossover N"):
        t["crossover"].map(lambda v: "beyond largest" if not np.isfinite(v) else str(int(v))),
        (lo, "µs, 3 smallest N"):
        t["loop_us"],
    })
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    body = table_latex(out, {c: fmt for c in out.columns if c[1].startswith(("µs", "rate"))}, "lllrrrlrr")
    return body.replace("µs", "\\si{\\micro\\second}")


# ---------------------------------------------------------------------------------------------------- waves


def tile_of(config: str | None) -> tuple[int, int] | None:
    """(BLOCK_M, BLOCK_N) of an autotune config string ('BLOCK_M: 64, BLOCK_N: 32, ...'), or None."""
    if not isinstance(config, str):
        return None
    m, n = re.search(r"BLOCK_M\D+(\d+)", config), re.search(r"BLOCK_N\D+(\d+)", config)
    return (int(m.group(1)), int(n.group(1))) if m and n else None


def waves(metrics: pd.DataFrame, compiled: pd.DataFrame | None, gpu: str) -> pd.DataFrame:
    """Per Triton matmul cell on this GPU (forward, square): the tile the autotuner chose, its output tiles, the
    programs an SM holds at once (compiled.parquet's blocks_per_sm where recorded, else 1), the waves they make,
    their wave efficiency (metrics.wave_efficiency over SMs x programs an SM) beside a 128 x 128 tile's at one per SM,
    and which kernel ran (the persistent TMA kernel runs one program per SM, each walking tiles)."""
    cols = [
        "dtype", "size", "tile", "tiles", "sms", "per_sm", "waves", "efficiency", "efficiency_128", "function",
        "programs"
    ]
    spec = SPECS.get(gpu)
    ok = timed(metrics, gpu)
    ok = ok[(ok["kernel"] == "matmul") & (ok["impl"] == "triton") & (ok["pass"] == "fwd")]
    if spec is None or ok.empty or "autotune_config" not in ok:
        return pd.DataFrame(columns=cols)
    funcs, held = {}, {}
    if compiled is not None and not compiled.empty:
        c = compiled[(compiled["gpu"] == gpu) & (compiled["kernel"] == "matmul")]
        if "autotune_best" in c:
            c = c[flags(c, "autotune_best")]
        funcs = {(r.dtype, int(r.size)): r.function for r in c.itertuples()}
        held = {
            (r.dtype, int(r.size)): int(r.blocks_per_sm)
            for r in c.itertuples()
            if pd.notna(getattr(r, "blocks_per_sm", np.nan)) and r.blocks_per_sm >= 1
        }
    rows = []
    for r in ok.sort_values(["dtype", "size"]).itertuples():
        tile = tile_of(r.autotune_config)
        if tile is None:
            continue
        m = int(getattr(r, "dim_m", r.size) if pd.notna(getattr(r, "dim_m", np.nan)) else r.size)
        n = int(getattr(r, "dim_n", r.size) if pd.notna(getattr(r, "dim_n", np.nan)) else r.size)
        tiles = math.ceil(m / tile[0]) * math.ceil(n / tile[1])
        func = funcs.get((r.dtype, int(r.size)), "")
        persistent = "tma" in func
        per_sm = 1 if persistent else held.get((r.dtype, int(r.size)), np.nan)  # NaN: not recorded, one assumed
        rows.append({
            "dtype": r.dtype,
            "size": int(r.size),
            "tile": f"{tile[0]}x{tile[1]}",
            "tiles": tiles,
            "sms": spec.sms,
            "per_sm": per_sm,
            "waves": math.ceil(tiles / (spec.sms * np.nan_to_num(per_sm, nan=1))),
            "efficiency": wave_efficiency(m, n, int(spec.sms * np.nan_to_num(per_sm, nan=1)), tile),
            "efficiency_128": wave_efficiency(m, n, spec.sms),
            "function": "persistent TMA" if persistent else ("pointer" if func else "not recorded"),
            "programs": min(tiles, spec.sms) if persistent else (tiles if func else np.nan)
        })
    return pd.DataFrame(rows, columns=cols)


def waves_sentence(metrics: pd.DataFrame, compiled: pd.DataFrame | None, gpu: str) -> str:
    """The finding of waves(): where a 128 x 128 tile would fill under half of one wave, how often the autotuner's
    tile fills more (medians of both); elsewhere, the chosen tiles' lowest wave efficiency and its cell."""
    t = waves(metrics, compiled, gpu)
    if t.empty:
        return ""
    small, rest = t[t["efficiency_128"] < 0.5], t[t["efficiency_128"] >= 0.5]
    said = []
    if len(small):
        more = int((small["efficiency"] > small["efficiency_128"]).sum())
        said.append(
            f"Where a 128x128 tile would fill under half of one wave (N up to {int(small['size'].max())}), the "
            f"autotuner's tile fills more in {part_phrase(more, len(small), 'cell')} (a median "
            f"{fmt(small['efficiency'].median(), 2)} of the wave against {fmt(small['efficiency_128'].median(), 2)})")
    if len(rest):
        w = rest.loc[rest["efficiency"].idxmin()]
        said.append(
            f"from there on the chosen tiles' wave efficiency is at least {fmt(w['efficiency'], 2)}, lowest in "
            f"{tex_escape(w['dtype'])} at $N={int(w['size'])}$ ({w['tile']} tiles, {int(w['tiles'])} of them on "
            f"{int(w['sms'])} SMs)")
    text = "; ".join(said)
    return text[0].upper() + text[1:] + "."


def waves_table(metrics: pd.DataFrame, compiled: pd.DataFrame | None, gpu: str) -> str:
    t = waves(metrics, compiled, gpu)
    if t.empty:
        return (f"\\begin{{center}}Tiles and waves: the autotuner's choice is {NOT_MEASURED} (no timed Triton "
                "matrix product on a GPU with a known SM count).\\end{center}\n")
    out = pd.DataFrame({
        "dtype": t["dtype"],
        "N": t["size"],
        "tile (autotuned)": t["tile"],
        "tiles": t["tiles"],
        "an SM": t["per_sm"],
        "waves": t["waves"],
        "wave eff.": t["efficiency"],
        "eff. at 128x128": t["efficiency_128"],
        "kernel": t["function"],
        "programs": t["programs"]
    })
    return table_latex(
        out, {
            "wave eff.": lambda v: fmt(v, 3),
            "eff. at 128x128": lambda v: fmt(v, 3),
            "programs": lambda v: "--" if not np.isfinite(v) else str(int(v)),
            "an SM": lambda v: "--" if not np.isfinite(v) else str(int(v))
        }, "lrlrrrrrlr")


# ---------------------------------------------------------------------------------------------------- cost to get


def cost(metrics: pd.DataFrame, gpu: str) -> pd.DataFrame:
    """Per kernel and implementation (forward, every checked cell on this device): the first call (cold_ms: the
    call that compiles, autotunes and loads; its median and largest over cells), the autotune time (median over
    autotuned cells), the warm call (median Python-loop time over the same cells) and how many warm calls the first
    one costs (medians' ratio)."""
    d = metrics[(metrics["gpu"] == gpu) & (metrics["pass"] == "fwd")]
    d = d[d["status"].isin(["ok", "not_timed"])] if "status" in d else d
    cold = d["cold_ms"] if "cold_ms" in d else pd.Series(np.nan, index=d.index)
    if "check_s" in d:  # rows from before cold_ms: the check's time holds the first call
        cold = cold.fillna(d["check_s"] * 1e3)
    d = d.assign(first_ms=cold.astype(float))
    rows = []
    for (kernel, impl), g in d.groupby(["kernel", "impl"]):
        first = g["first_ms"].dropna()
        tune = g["autotune_ms"].dropna() if "autotune_ms" in g else pd.Series(dtype=float)
        warm = g["loop_ms"].dropna() if "loop_ms" in g else pd.Series(dtype=float)
        rows.append({
            "kernel": kernel,
            "impl": impl,
            "cells": len(g),
            "first_median_ms": first.median() if len(first) else np.nan,
            "first_max_ms": first.max() if len(first) else np.nan,
            "autotune_ms": tune.median() if len(tune) else np.nan,
            "warm_us": warm.median() * 1e3 if len(warm) else np.nan,
            "calls": first.median() / warm.median() if len(first) and len(warm) else np.nan,
            "cache": ", ".join(sorted(set(g["cache_state"].dropna().astype(str)))) if "cache_state" in g else ""
        })
    return pd.DataFrame(
        rows, columns=[
            "kernel", "impl", "cells", "first_median_ms", "first_max_ms", "autotune_ms", "warm_us", "calls", "cache"
        ])


def cost_table(metrics: pd.DataFrame, gpu: str) -> str:
    t = cost(metrics, gpu)
    if t.empty or t["first_median_ms"].isna().all():
        return f"\\begin{{center}}The first call's time is {NOT_MEASURED}.\\end{{center}}\n"
    order = {i: n for n, i in enumerate(IMPL_ORDER)}
    t = t.sort_values(["kernel", "impl"], key=lambda s: s.map(order) if s.name == "impl" else s)
    out = pd.DataFrame({
        ("", "kernel"): t["kernel"],
        ("", "impl"): t["impl"].map(IMPL_SHORT),
        ("", "cells"): t["cells"],
        ("first call [ms]", "median"): t["first_median_ms"],
        ("first call [ms]", "max"): t["first_max_ms"],
        ("", "autotune [ms]"): t["autotune_ms"],
        (FRAME_LABEL["loop"], "warm [µs]"): t["warm_us"],
        (FRAME_LABEL["loop"], "first / warm"): t["calls"],
        ("", "caches"): t["cache"].replace("", "--")
    })
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    body = table_latex(
        out, {c: fmt
              for c in out.columns
              if c[1] in ("median", "max", "autotune [ms]", "warm [µs]", "first / warm")}, "llrrrrrrl")
    return body.replace("µs", "\\si{\\micro\\second}")


# ---------------------------------------------------------------------------------------------------- alignment


def alignment(metrics: pd.DataFrame, gpu: str, odd: int = 1793, even: int = 2048) -> pd.DataFrame:
    """Matrix product at a size that is no multiple of 16 (odd) and the power of two above it (even), per dtype and
    implementation: GPU time, TFLOP/s at each, and the rate at the odd size over the even one (1: no loss)."""
    ok = timed(metrics, gpu)
    ok = ok[(ok["kernel"] == "matmul") & (ok["pass"] == "fwd") & ok["size"].isin([odd, even])
            & ok["impl"].isin(["builtin", "compile", "triton"])]
    rows = []
    for (dtype, impl), g in ok.groupby(["dtype", "impl"]):
        g = g.groupby("size")["achieved_tflops"].median()
        if odd in g and even in g:
            rows.append({"dtype": dtype, "impl": impl, "odd": g[odd], "even": g[even], "ratio": g[odd] / g[even]})
    return pd.DataFrame(rows, columns=["dtype", "impl", "odd", "even", "ratio"])


def alignment_table(metrics: pd.DataFrame, gpu: str, odd: int = 1793, even: int = 2048) -> str:
    t = alignment(metrics, gpu, odd, even)
    if t.empty:
        return (f"\\begin{{center}}Alignment: the matrix product at $N={odd}$ and $N={even}$ is {NOT_MEASURED}."
                "\\end{center}\n")
    head = f"{FRAME_LABEL['gpu']}, TFLOP/s"
    out = pd.DataFrame({
        ("", "dtype"): t["dtype"],
        ("", "impl"): t["impl"].map(IMPL_SHORT),
        (head, f"N={odd}"): t["odd"],
        (head, f"N={even}"): t["even"],
        (head, f"{odd} / {even}"): t["ratio"]
    })
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    return table_latex(out, {c: fmt for c in out.columns[2:]}, "llrrr")


def alignment_sentence(metrics: pd.DataFrame, gpu: str, odd: int = 1793, even: int = 2048) -> str:
    """The finding of alignment(): per data type, each side's rate at the odd size and its share of the rate at the
    power of two above, and in how many data types ours is the faster at the odd size."""
    t = alignment(metrics, gpu, odd, even)
    if t.empty:
        return ""  # the table says what is not measured
    parts, wins = [], {}
    for dtype, g in t.groupby("dtype", sort=False):
        g = g.set_index("impl")
        if "triton" not in g.index or not {"builtin", "compile"} & set(g.index):
            continue
        o = g.loc["triton"]
        sides = [
            f"{IMPL_SHORT.get(i, i)} {fmt(g.loc[i, 'odd'])} ({fmt(g.loc[i, 'ratio'], 2)})" for i in ("builtin",
                                                                                                     "compile",
                                                                                                     "triton")
            if i in g.index
        ]
        parts.append(f"{tex_escape(dtype)}: " + ", ".join(sides))
        for i in ("builtin", "compile"):
            if i in g.index:
                won, n = wins.get(i, (0, 0))
                wins[i] = (won + int(o["odd"] > g.loc[i, "odd"]), n + 1)
    if not parts:
        return ""
    against = ", and ".join(f"than {'cuBLAS (the builtin)' if i == 'builtin' else 'torch.compile'} in "
                            f"{part_phrase(won, n, 'data type')}" for i, (won, n) in wins.items())
    return (f"At $N={odd}$, a multiple of no tile, each implementation keeps a share of its rate at $N={even}$ "
            f"(TFLOP/s in {FRAME_LABEL['gpu']}, the share in brackets; ours on operands it zero-pads to a multiple of "
            f"16, the copies included: " + "; ".join(parts) + f"). At $N={odd}$ ours is faster {against}.")


def plateau_sentence(metrics: pd.DataFrame, gpu: str) -> str:
    """The finding of plateau(): the GPU-time fixed cost of every implementation but the naive expression (several
    kernels), the sizes from which the work outlasts it, and the Python-loop fixed cost per implementation."""
    t = plateau(metrics, gpu)
    t = t[t["impl"] != "naive"]
    if t.empty:
        return ""
    cross = t["crossover"].dropna()
    loops = [
        f"{span(g['loop_us'], 2)}~\\textmu s ({IMPL_SHORT.get(impl, impl)})"
        for impl, g in t.groupby("impl", sort=False)
        if g["loop_us"].notna().any()
    ]
    text = (f"At $N={int(t['small'].min())}$ a call of any implementation but the naive expression costs "
            f"{span(t['fixed_us'], 2)}~\\textmu s of GPU time")
    if len(cross):
        sizes = span(cross, 4).replace("--", "$--$")  # an en dash between two math numbers
        text += f", and only from $N={sizes}$ on does its work, at its large-size rate, outlast that fixed cost"
    if loops:
        text += "; from a Python loop the same calls cost " + ", ".join(loops)
    return text + "."
