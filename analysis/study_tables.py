"""The optional studies' tables, from their own files beside the metrics: the bytes each implementation moves
(experiments/traffic.py under Nsight Compute), the ablations and the alignment study (experiments/ablations.py),
and torch.compile's two frames (compile_frames.csv). Each says "not measured on this run" without its rows; the
tables read from the metrics rows are analysis/why_tables.py's.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.claims import FRAME_LABEL
from analysis.columns import flags, texts
from analysis.latex import IMPL_SHORT, fmt, table_latex
from analysis.metrics import wave_efficiency
from analysis.selection import compile_joint_graph
from analysis.why_tables import NOT_MEASURED
from rooflab.gpus import SPECS
from rooflab.kernel import IMPLS as IMPL_ORDER

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
