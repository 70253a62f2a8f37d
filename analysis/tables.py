"""The generated tables of the paper: summary, problems, projection, calibration, specs, findings, fixed cost,
repeatability, one kernel's three frames, and the CPU's own. Every column head names its frame."""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis import calibration
from analysis.claims import CPU_FRAME_LABEL, FRAME_LABEL, findings, impl_names, tied_best
from analysis.columns import texts
from analysis.latex import DTYPE_SHORT, IMPL_SHORT, fmt, table_latex, tex_escape
from analysis.metrics import FIT_MIN_POINTS, FIT_MIN_SIZE, measured_peaks
from analysis.why_tables import HOST_COST_SIZES
from analysis.selection import largest, timed
from rooflab.gpus import CPU_KEY, SPECS
from rooflab.kernel import IMPL_LABEL as IMPL_NAME, IMPLS


def fixed_cost_table(f: pd.DataFrame) -> str:
    """Per Triton kernel, dtype and pass (``f``: ours_fixed_costs): fixed cost, marginal rate, and the fixed share
    of the call at the largest size, all from GPU time."""
    if f.empty:
        return (f"\\begin{{center}}No memory-bound kernel of ours was timed at {FIT_MIN_POINTS} sizes of at least "
                f"{FIT_MIN_SIZE} on this device.\\end{{center}}\n")
    t = f.assign(share=100 *
                 f["fixed_share"])[["kernel", "dtype", "pass", "fixed_us", "marginal_tbs", "size", "time_us", "share"]]
    g = FRAME_LABEL["gpu"]
    t.columns = pd.MultiIndex.from_tuples([("", "kernel"), ("", "dtype"), ("", "pass"), (g, "fixed"), (g, "margin"),
                                           (g, "N"), (g, "time"), (g, "fixed share")])
    return table_latex(t, {c: fmt for c in t.columns if c[1] in ("fixed", "margin", "time", "fixed share")}, "lllrrrrr")


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
    table.columns = pd.MultiIndex.from_tuples([("", "kernel"), ("", "dtype"), ("", "N")] + [(head, IMPL_SHORT[i])
                                                                                            for i in impls])
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
        out.append("\\begin{center}\\small\n" + table_latex(t.head(limit), align="llllrllp{4.6cm}") + "\\end{center}\n")
        if len(t) > limit:
            out.append(f"\\noindent and {len(t) - limit} more (results/metrics.parquet, status column).\n")
    skipped = metrics[metrics["status"].isin(["skipped", "not_timed"])]
    if not skipped.empty:
        g = (skipped.assign(error=skipped["error"].astype(str).str.slice(0, 70)).groupby(
            ["gpu", "status", "error"]).size().rename("cells").reset_index())
        out.append("\n\\noindent Cells not timed, and why:\n\\begin{center}\\small\n" + table_latex(g, align="lllr") +
                   "\\end{center}\n")
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
    out = pd.DataFrame({
        ("", "kernel"):
        t["kernel"],
        ("", "dtype"):
        t["dtype"],
        ("", "N"):
        t["size"].astype(int),
        ("", "fastest"): [impl_names(f, IMPL_SHORT) + (" (tie)" if len(f) > 1 else "") for f in t["fastest"]],
        (here, "µs"):
        t["median_ms"].astype(float) * 1e3,
        (here, "/ model"):
        t["measured_over_model"].astype(float)
    })
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
    rows = [{
        "resource": "memory bandwidth [TB/s]",
        "datasheet": spec.mem_bandwidth / 1e12,
        measured: r["bandwidth"] * spec.mem_bandwidth / 1e12,
        "ratio": r["bandwidth"]
    }]
    rows += [{
        "resource": f"{unit.upper()} [TFLOP/s]",
        "datasheet": spec.peak_flops(unit) / 1e12,
        measured: r[unit] * spec.peak_flops(unit) / 1e12,
        "ratio": r[unit]
    } for unit in calibration.UNITS]
    ratios_t = pd.DataFrame(rows)
    err = calibration.error(t)
    err.columns = pd.MultiIndex.from_tuples([("", "bound"), ("", "cells")] + [("GPU time / model", c)
                                                                              for c in ("median", "min", "max")])
    return (table_latex(ratios_t, {c: fmt
                                   for c in ("datasheet", measured, "ratio")}, "lrrr") + "\\quad\n" +
            table_latex(err, {c: fmt
                              for c in err.columns[2:]}, "lrrrr"))


def specs_table(ceilings: pd.DataFrame) -> str:
    """The datasheet peaks every projection uses (rooflab/gpus.py), and the ceilings measured on each device (the
    newest run's; GPU time)."""
    rows = [{
        "device": s.name,
        "source": "datasheet",
        "SMs": str(s.sms),
        "TB/s": s.mem_bandwidth / 1e12,
        "FP32": s.fp32_flops / 1e12,
        "TF32": s.tf32_flops / 1e12,
        "BF16": s.bf16_flops / 1e12
    } for s in SPECS.values()]
    for gpu, v in measured_peaks(ceilings).items():
        rows.append({
            "device": gpu,
            "source": "measured",
            "SMs": "--",
            "TB/s": v.get("copy", np.nan) / 1e12,
            "FP32": v.get("gemm_fp32", np.nan) / 1e12,
            "TF32": v.get("gemm_tf32", np.nan) / 1e12,
            "BF16": v.get("gemm_bf16", np.nan) / 1e12
        })
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
    t = pd.DataFrame({
        "GPU": f["gpu"],
        "kernel": f["kernel"],
        "impl": f["impl"].map(IMPL_NAME),
        "dtype": f["dtype"],
        "N": f["size"].astype(int),
        "pass": f["pass"],
        "achieved": f["achieved"].astype(float),
        "roof": f["roof"].astype(float),
        "unit": f["unit"],
        "excess [%]": f["excess_pct"].astype(float),
        "SE [%]": f["se_pct"].astype(float),
        "reason": f["reason"].map(key)
    })
    if t["pass"].nunique() == 1:
        t = t.drop(columns="pass")
    t.columns = pd.MultiIndex.from_tuples([("", c) if c not in ("achieved", "roof", "unit") else ("GPU time", c)
                                           for c in t.columns])
    body = table_latex(
        t, {
            c: (lambda v: fmt(v, 4)) if c[1] in ("achieved", "roof") else (lambda v: fmt(v, 2))
            for c in t.columns
            if c[1] in ("achieved", "roof", "excess [%]", "SE [%]")
        })
    legend = "; ".join(f"({key[r]}) {tex_escape(r)}" for r in reasons)
    return body + f"\\par\\smallskip\\parbox{{0.95\\linewidth}}{{Reasons: {legend}.}}\n"


def repeatability_table(runs: dict[str, pd.DataFrame]) -> str:
    """One block of rows per GPU with a repeatability run (scripts/repeatability.py's per-cell table)."""
    from analysis.repeatability import EVENT_MIN_MS, GRAPH_MAX_MS, summarize

    label = {
        "event_long": f"{fmt(EVENT_MIN_MS * 1e3)} us and longer",
        "graph_short": f"under {fmt(GRAPH_MAX_MS * 1e3)} us",
        "event_short": f"under {fmt(GRAPH_MAX_MS * 1e3)} us (contrast)"
    }
    if not runs:
        return ("\\emph{No repeatability run is recorded for the devices of this run: "
                "\\texttt{scripts/repeatability.py} measures one.}\\par\n")
    rows = []
    for gpu, t in runs.items():
        for r in summarize(t).itertuples():
            if not r.n:
                continue
            rows.append({
                "GPU": gpu,
                "cells": label.get(r.group, r.cells),
                "frame": {
                    "event": "GPU time",
                    "graph": "CUDA graph",
                    "loop": "Python loop"
                }[r.mode],
                "n": str(r.n),
                "max diff [%]": fmt(r.max_abs_rel_diff * 100, 2),
                "median diff [%]": fmt(r.median_abs_rel_diff * 100, 2)
            })
    return table_latex(pd.DataFrame(rows), align="lllrrr")


def kernel_table(rows: pd.DataFrame) -> str:
    """One kernel at the largest size: per implementation its time, rate, roofline fraction and speedups, every
    column under the frame it is in (GPU time, CUDA graph, Python loop)."""
    t = rows.sort_values(["dtype", "pass", "impl"], key=lambda s: s.map({
        k: i
        for i, k in enumerate(IMPL_NAME)
    }) if s.name == "impl" else s)
    rate, unit = rate_column(str(t["kernel"].iloc[0]))
    g, gr, lo = FRAME_LABEL["gpu"], FRAME_LABEL["graph"], FRAME_LABEL["loop"]
    short = t["dtype"].map(lambda d: DTYPE_SHORT.get(d, d))  # 13 columns: the short dtype keeps them on the page
    dtype = short + np.where(t["pass"] == "fwd", "", ", " + t["pass"]) if t["pass"].nunique() > 1 else short
    cols = {
        ("", "dtype"): dtype,
        ("", "impl"): t["impl"].map(IMPL_SHORT),
        ("", "N"): t["size"].astype(int),
        (g, "µs"): t["median_ms"] * 1e3,
        (g, unit): t[rate],
        (g, "roof"): t["roofline_fraction_measured"],
        (g, "vs builtin"): t["speedup_vs_builtin"],
        (g, "verdict"): texts(t, "verdict_vs_builtin").where(t["impl"] != "builtin", "").replace("", "--"),
        (g, "vs naive"): t["speedup_vs_naive"],
        (gr, "µs"): t["graph_median_ms"] * 1e3,
        (gr, "vs builtin"): t["graph_speedup_vs_builtin"],
        (lo, "µs"): t["loop_ms"] * 1e3,
        (lo, "vs builtin"): t["loop_speedup_vs_builtin"]
    }
    out = pd.DataFrame(cols)
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    numbers = [c for c in out.columns if c[0] and c[1] != "verdict"]
    body = table_latex(out, {c: fmt for c in numbers})
    return body.replace("µs", "\\si{\\micro\\second}")


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


def newest_run(ceilings: pd.DataFrame, gpu: str) -> pd.DataFrame:
    """The rows of ``gpu``'s newest ceilings run (as measured_peaks reads them)."""
    c = ceilings[ceilings["gpu"] == gpu] if "gpu" in ceilings else ceilings.iloc[:0]
    if "run_id" in c and len(c):
        c = c[c["run_id"] == (c.sort_values("timestamp") if "timestamp" in c else c)["run_id"].iloc[-1]]
    return c


def cpu_ceilings_table(ceilings: pd.DataFrame) -> str:
    """What the ceilings job measured on the CPU (its newest run): the copy and the best GEMM per math mode."""
    v = measured_peaks(ceilings).get(CPU_KEY, {})
    measured = f"measured, {CPU_FRAME_LABEL['gpu']}"
    rows = [{"ceiling": "copy (read + write)", measured: v["copy"] / 1e9, "unit": "GB/s"}] if "copy" in v else []
    copies = newest_run(ceilings, CPU_KEY)
    copies = copies[copies["ceiling"].str.startswith("copy_")] if len(copies) and "bytes" in copies else copies.iloc[:0]
    if len(copies) > 1:  # each copy by its working set: a small one runs from the CPU's caches, the large from DRAM
        rows = [{
            "ceiling":
            f"copy (read + write), {r['bytes'] / 2**20:.3g} MiB moved" +
            (" (the roof)" if r["value"] == v.get("copy") else ""),
            measured:
            r["value"] / 1e9,
            "unit":
            "GB/s"
        } for _, r in copies.sort_values("bytes").iterrows()]
    rows += [{
        "ceiling": f"GEMM {u.upper()}",
        measured: v[f"gemm_{u}"] / 1e9,
        "unit": "GFLOP/s"
    } for u in calibration.UNITS if f"gemm_{u}" in v]
    if not rows:
        return "\\begin{center}No ceilings were measured on the CPU.\\end{center}\n"
    t = pd.DataFrame(rows)
    return table_latex(t, {measured: fmt}, "lrl")


def host_cost_rows(metrics: pd.DataFrame, gpu: str) -> pd.DataFrame:
    """Per kernel (forward pass, its most common low-precision dtype), over the HOST_COST_SIZES smallest sizes timed
    on ``gpu``: each implementation's median time per call from a Python loop and from a CUDA-graph replay
    (microseconds). There the device's work is a few microseconds, so the loop time is the host path a PyTorch user
    pays per call and the graph time what is left without it; the median over sizes keeps one size's outlier (a
    loop time several times its neighbours') from standing for the host path."""
    ok = timed(metrics, gpu)
    ok = ok[(ok["pass"] == "fwd") & ok["loop_ms"].notna()]
    rows = []
    for kernel, k in ok.groupby("kernel"):
        dtype = next((d for d in ("bfloat16", "float16", "float32") if d in set(k["dtype"])), None)
        if dtype is None:
            continue
        k = k[k["dtype"] == dtype]
        sizes = sorted(k["size"].unique())[:HOST_COST_SIZES]
        k = k[k["size"].isin(sizes)]
        row = {"kernel": kernel, "dtype": dtype, "size": int(sizes[0]), "size_to": int(sizes[-1])}
        for impl, r in k.groupby("impl"):
            row[f"loop_{impl}"] = 1e3 * r["loop_ms"].median()
            row[f"graph_{impl}"] = 1e3 * r["graph_median_ms"].median()
        rows.append(row)
    return pd.DataFrame(rows)


def host_cost_table(metrics: pd.DataFrame, gpu: str) -> str:
    """host_cost_rows as LaTeX: the Python-loop time per call of each implementation, our Triton's over the
    builtin's, and the CUDA-graph times of the two."""
    t = host_cost_rows(metrics, gpu)
    if t.empty:
        return "\\begin{center}No implementation was timed from a Python loop on this device.\\end{center}\n"
    impls = [i for i in IMPLS if f"loop_{i}" in t]
    lo, gr = FRAME_LABEL["loop"], FRAME_LABEL["graph"]
    out = t[["kernel", "dtype"]].copy()
    out["size"] = [f"{a}--{b}" if a != b else str(a) for a, b in zip(t["size"], t["size_to"])]
    cols = [("", "kernel"), ("", "dtype"), ("", "N")]
    for i in impls:
        out[f"loop_{i}"] = t[f"loop_{i}"]
        cols.append((f"{lo} [µs]", IMPL_SHORT.get(i, i)))
    if {"loop_triton", "loop_builtin"} <= set(t):
        out["ratio"] = t["loop_triton"] / t["loop_builtin"]
        cols.append(("loop", "ours / builtin"))  # short, the head on two lines (below): the table fits the page
    for i in ("builtin", "triton"):
        if f"graph_{i}" in t:
            out[f"graph_{i}"] = t[f"graph_{i}"]
            cols.append((f"{gr} [µs]", IMPL_SHORT.get(i, i)))
    out.columns = pd.MultiIndex.from_tuples(cols)
    body = table_latex(out, {c: fmt for c in out.columns if c[0]}, "llr" + "r" * (len(cols) - 3))
    return body.replace("ours / builtin", "\\shortstack{ours /\\\\builtin}")
