"""The paper's 'why' tables (issue 22), from the metrics rows: the fixed cost per call and the size where the work
outgrows it (launch-bound plateau), the tile the autotuner chose and the waves it makes, what a kernel costs to get
(first call, autotune) against a warm call, and 1793 against 2048 for the matrix product. Each says "not measured on
this run" without its rows. The per-kernel paragraphs are analysis/why.py's.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from analysis.claims import FRAME_LABEL
from analysis.columns import flags, texts
from analysis.latex import IMPL_SHORT, fmt, table_latex
from analysis.metrics import wave_efficiency
from analysis.selection import compile_joint_graph, timed
from rooflab.gpus import SPECS
from rooflab.kernel import IMPLS as IMPL_ORDER

NOT_MEASURED = "not measured on this run"
LOW_PRECISION_FIRST = ("bfloat16", "float16", "float32", "tf32")  # the dtype a table speaks of, first present

# ---------------------------------------------------------------------------------------------------- fixed cost


def _work(rows: pd.DataFrame) -> pd.Series:
    """What grows with size: FLOPs for a compute-bound kernel, bytes otherwise."""
    compute = rows.get("bound", pd.Series("memory", index=rows.index)).eq("compute")
    return rows["flops"].where(compute, rows["bytes"]).astype(float)


def plateau(metrics: pd.DataFrame, gpu: str) -> pd.DataFrame:
    """Per kernel (forward, its lowest precision) and implementation: the fixed cost per call (the median GPU time
    at the smallest size, and the Python-loop time there), the rate at the largest size (work / GPU time: GB/s, or
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
                "loop_us": g["loop_ms"].iloc[0] * 1e3 if "loop_ms" in g else np.nan,
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
        return f"\\begin{{center}}The launch-bound plateau: GPU time {NOT_MEASURED}.\\end{{center}}\n"
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
        ("", "smallest N"):
        t["small"],
        (g, "at smallest N [µs]"):
        t["fixed_us"],
        (g, "rate at largest N"):
        t["rate"],
        ("", "unit"):
        t["unit"],
        (lo, "at smallest N [µs]"):
        t["loop_us"],
        ("", "crossover N"):
        t["crossover"].map(lambda v: "beyond largest" if not np.isfinite(v) else str(int(v)))
    })
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    body = table_latex(out, {c: fmt
                             for c in out.columns
                             if c[1].endswith("[µs]") or c[1].startswith("rate")}, "lllrrrlrr")
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
    waves they make on the SMs, their wave efficiency (analysis/metrics.wave_efficiency with that tile) beside the
    128 x 128 tile's, and which kernel ran where compiled.parquet recorded it (the persistent TMA kernel runs one
    program per SM, each walking tiles; its quantisation is the same count of tiles over SMs)."""
    cols = ["dtype", "size", "tile", "tiles", "sms", "waves", "efficiency", "efficiency_128", "function", "programs"]
    spec = SPECS.get(gpu)
    ok = timed(metrics, gpu)
    ok = ok[(ok["kernel"] == "matmul") & (ok["impl"] == "triton") & (ok["pass"] == "fwd")]
    if spec is None or ok.empty or "autotune_config" not in ok:
        return pd.DataFrame(columns=cols)
    funcs = {}
    if compiled is not None and not compiled.empty:
        c = compiled[(compiled["gpu"] == gpu) & (compiled["kernel"] == "matmul")]
        if "autotune_best" in c:
            c = c[flags(c, "autotune_best")]
        funcs = {(r.dtype, int(r.size)): r.function for r in c.itertuples()}
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
        rows.append({
            "dtype": r.dtype,
            "size": int(r.size),
            "tile": f"{tile[0]}x{tile[1]}",
            "tiles": tiles,
            "sms": spec.sms,
            "waves": math.ceil(tiles / spec.sms),
            "efficiency": wave_efficiency(m, n, spec.sms, tile),
            "efficiency_128": wave_efficiency(m, n, spec.sms),
            "function": "persistent TMA" if persistent else ("pointer" if func else "not recorded"),
            "programs": min(tiles, spec.sms) if persistent else (tiles if func else np.nan)
        })
    return pd.DataFrame(rows, columns=cols)


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
            "programs": lambda v: "--" if not np.isfinite(v) else str(int(v))
        }, "lrlrrrrlr")


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
            & ok["impl"].isin(["builtin", "triton"])]
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


# ---------------------------------------------------------------------------------------------------- traffic


def traffic_table(traffic: pd.DataFrame | None) -> str:
    """experiments/traffic.py's table (one device): per kernel and pass, the minimum bytes the byte model charges,
    then per implementation the DRAM bytes one call moved (reads + writes, Nsight Compute) over that minimum and
    the kernels it launched."""
    traffic = traffic_rows(traffic)
    if traffic.empty:
        return (f"\\begin{{center}}The bytes each implementation moves through DRAM are {NOT_MEASURED} "
                "(experiments/traffic.py under Nsight Compute).\\end{center}\n")
    impls = [i for i in IMPL_ORDER if i in set(traffic["impl"])]
    rows = []
    for (kernel, pass_), g in traffic.groupby(["kernel", "pass"], sort=False):
        by = g.set_index("impl")
        row = {("", "kernel"): kernel, ("", "pass"): pass_, ("", "minimum [MB]"): g["model_bytes"].iloc[0] / 1e6}
        for impl in impls:
            row[("moved / minimum (kernels)",
                 IMPL_SHORT.get(impl,
                                impl))] = (f"{_short(by.at[impl, 'moved_over_model'])} ({int(by.at[impl, 'launches'])})"
                                           if impl in by.index else "--")
        rows.append(row)
    out = pd.DataFrame(rows)
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    return table_latex(out, {("", "minimum [MB]"): fmt}, "llr" + "r" * len(impls))


def traffic_compile_frame(traffic: pd.DataFrame | None) -> str:
    """Which frame the traffic table's torch.compile fwd+bwd rows were measured in: one joint graph where they carry
    no timestamp or one before rooflab.kernel.COMPILE_SPLIT_SINCE, else a training step's ('' without such rows)."""
    t = traffic_rows(traffic)
    t = t[(t["impl"] == "compile") & (t["pass"] == "fwd+bwd")]
    if t.empty:
        return ""
    unstamped = "1970-01-01T00:00:00+00:00"  # traffic.py stamps its calls since the split: an older one was joint
    stamps = t.get("timestamp", pd.Series(index=t.index, dtype=object))
    stamps = stamps.where(stamps.notna() & (stamps.astype(str) != ""), unstamped)
    joint = compile_joint_graph(t.assign(timestamp=stamps)).any()
    return ("The traffic table's \\texttt{torch.compile} forward-and-backward rows were measured " +
            ("with the one graph." if joint else "as a training step runs them."))


def traffic_rows(traffic: pd.DataFrame | None) -> pd.DataFrame:
    """The calls a traffic table can speak for: run without error and, for torch.compile, not fallen back to eager;
    one size and dtype (the most frequent), each (kernel, impl, pass) once (the last)."""
    if traffic is None or traffic.empty:
        return pd.DataFrame(columns=["kernel", "impl", "pass"])
    t = traffic
    if "error" in t:
        t = t[texts(t, "error") == ""]
    if "fell_back" in t:
        t = t[~flags(t, "fell_back")]
    if t.empty:
        return t
    size, dtype = t.groupby(["size", "dtype"]).size().idxmax()
    t = t[(t["size"] == size) & (t["dtype"] == dtype)]
    return t.drop_duplicates(["kernel", "impl", "pass"], keep="last")


def _short(x: float) -> str:
    """A ratio in plain digits (no LaTeX: the table escapes its text): 3 significant, none in exponent form."""
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


# ---------------------------------------------------------------------------------------------------- ablations


def ablations_table(ablations: pd.DataFrame | None) -> str:
    """experiments/ablations.py's tiles study (one device): per variant, TFLOP/s at each size (GPU time) and its
    share of cuBLAS's at that size."""
    t = None if ablations is None else ablations[(ablations["study"] == "tiles") & (ablations["status"] == "ok")]
    if t is None or t.empty:
        return (f"\\begin{{center}}The matrix product's ablations are {NOT_MEASURED} "
                "(experiments/ablations.py).\\end{center}\n")
    cublas = t[t["method"] == "cublas"].groupby("size")["tflops"].first()
    head = f"{FRAME_LABEL['gpu']}: TFLOP/s (of cuBLAS)"
    out = pd.DataFrame({("", "variant"): list(dict.fromkeys(t["variant"]))})
    for n, g in t.groupby("size"):
        rate = g.set_index("variant")["tflops"]
        out[(head, f"N={n}")] = [
            f"{fmt(rate[v])} ({fmt(rate[v] / cublas[n])})" if v in rate.index else "--" for v in out[("", "variant")]
        ]
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    return table_latex(out, {}, "l" + "r" * (len(out.columns) - 1))


def alignment_study(ablations: pd.DataFrame | None, sms: int, tile=(128, 256)) -> pd.DataFrame:
    """The alignment study per size: cuBLAS, ours, ours on operands padded (the product alone, the fix whole) in
    TFLOP/s of the unpadded 2 N^3; whether rows are 16-byte aligned in bf16/fp16 (what TMA and cuBLAS's wide loads
    need) and whether N is a multiple of 16 (what Triton's divisibility hint on strides and sizes needs, so that the
    pointer kernel's loads are vectorised); the fraction of the tiles' area
    that is the matrix (tile quantisation); the wave efficiency of those tiles on ``sms`` SMs."""
    t = None if ablations is None else ablations[(ablations["study"] == "alignment") & (ablations["status"] == "ok")]
    if t is None or t.empty:
        return pd.DataFrame()
    rows = []
    for n, g in t.groupby("size"):
        by = g.set_index("variant")["tflops"]
        pad = {("alone" if "alone" in v else "whole"): r for v, r in by.items() if "padded" in v}
        bm, bn = tile
        tiles = -(-n // bm) * -(-n // bn)
        rows.append({
            "size": int(n),
            "aligned": (n * 2) % 16 == 0,
            "hint": n % 16 == 0,
            "cublas": by.get("cuBLAS (builtin)", np.nan),
            "ours": by.get("ours, autotuned", np.nan),
            "padded_alone": pad.get("alone", np.nan),
            "padded_whole": pad.get("whole", np.nan),
            "tile_fill": n * n / (tiles * bm * bn),
            "waves": wave_efficiency(n, n, sms, tile)
        })
    return pd.DataFrame(rows)


def alignment_study_table(ablations: pd.DataFrame | None, gpu: str) -> str:
    spec = SPECS.get(gpu)
    t = alignment_study(ablations, spec.sms) if spec is not None else pd.DataFrame()
    if t.empty:
        return (f"\\begin{{center}}The alignment study is {NOT_MEASURED} (experiments/ablations.py)."
                "\\end{center}\n")
    head = f"{FRAME_LABEL['gpu']}, TFLOP/s"
    yes = {True: "yes", False: "no"}
    out = pd.DataFrame({
        ("", "N"): t["size"],
        ("", "16 B rows"): t["aligned"].map(yes),
        ("", "16 | N"): t["hint"].map(yes),
        ("128x256 tiles", "matrix / tiles"): t["tile_fill"],
        ("128x256 tiles", "wave eff."): t["waves"],
        (head, "cuBLAS"): t["cublas"],
        (head, "ours"): t["ours"],
        (head, "ours, padded"): t["padded_alone"],
        (head, "padding fix"): t["padded_whole"]
    })
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    return table_latex(out, {c: fmt for c in out.columns[3:]}, "rllrrrrrr")


# ----------------------------------------------------------------------------------------- torch.compile's frames

JOINT, SPLIT = "compile, joint graph", "compile, as a training step"  # the lab's variant names begin so


def compile_frames(frames: pd.DataFrame | None) -> pd.DataFrame:
    """`python -m lab compileframes` rows (one device) as one row per kernel, shape and dtype: GPU time (us) of ours,
    the builtin and torch.compile in both frames, and the training step's time over the joint graph's."""
    cols = ["kernel", "shape", "dtype", "ours", "builtin", "joint", "split", "split_over_joint"]
    if frames is None or frames.empty:
        return pd.DataFrame(columns=cols)
    f = frames.assign(
        kernel=frames["kernel"].str.replace(" fwd+bwd", "", regex=False), variant=frames["variant"].map(
            lambda v: "joint" if v.startswith(JOINT) else "split" if v.startswith(SPLIT) else v))
    t = f.pivot_table(index=["kernel", "n", "dtype"], columns="variant", values="median_us", sort=False)
    t = t.reset_index().rename(columns={"n": "shape"}).reindex(columns=cols[:-1])
    t["split_over_joint"] = t["split"] / t["joint"]
    return t


def compile_frames_table(frames: pd.DataFrame | None) -> str:
    """The compileframes table: per kernel, shape and dtype, GPU time in microseconds of ours, the builtin and
    torch.compile as one joint graph and as a training step runs it (the sweep's frame), and the ratio of the two."""
    t = compile_frames(frames)
    if t.empty:
        return f"\\begin{{center}}torch.compile's fwd+bwd in its two frames is {NOT_MEASURED}.\\end{{center}}\n"
    out = t.rename(
        columns={
            "ours": "ours [us]",
            "builtin": "builtin [us]",
            "joint": "compile, joint [us]",
            "split": "compile, training step [us]",
            "split_over_joint": "training / joint"
        })
    return table_latex(out, {c: fmt for c in out.columns[3:]}, "lll" + "r" * 5)


def compile_frames_sentence(frames: pd.DataFrame | None) -> str:
    """The training step's time over the joint graph's: median and range over the cells timed in both frames."""
    r = compile_frames(frames)["split_over_joint"].dropna()
    if r.empty:
        return f"torch.compile's two frames are {NOT_MEASURED}."
    return (f"As a training step runs it, \\texttt{{torch.compile}}'s forward and backward took a median "
            f"{fmt(r.median())}$\\times$ the joint graph's GPU time over {len(r)} cells ({fmt(r.min())} to "
            f"{fmt(r.max())}).")
