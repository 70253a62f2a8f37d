"""The paper's attention section (results/paper/generated/attention.tex), every number from the rows: where
attention turns compute-bound (the sweep's byte and FLOP model against the measured ridge point), what the online
softmax saves in traffic (Nsight Compute's bytes, experiments/traffic.py), and our FlashAttention-2 beside each
SDPA backend forced in turn (experiments/backends.py) in GPU time and in the Python loop, each backend's distance
from the tensor-core roof, and the range of ours over each backend, losses included."""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.claims import FRAME_LABEL
from analysis.latex import count_phrase, fmt, long_table, span, table_latex, tex_escape
from analysis.selection import timed
from rooflab.shapes import dims_of, label

BACKENDS = {"flash": "flash", "cudnn": "cuDNN", "efficient": "memory-efficient"}  # experiments/backends.VARIANTS
DIMS = list(dims_of("bhsd"))  # the rows' shape columns: batch, heads, seq, head_dim
CELL = ["batch", "heads", "kv_heads", "seq_q", "seq_k", "head_dim"]  # a cell's (experiments/backends.as_cell)
NOT_RUN = ("Our FlashAttention-2 beside each SDPA backend was not measured for this GPU (experiments/backends.py: "
           "config backends.enabled, on an NVIDIA GPU).")


def compute_bound_sentence(metrics: pd.DataFrame, ceilings: pd.DataFrame, gpu: str) -> str:
    """From the sweep's attention rows (our kernel, bf16, fwd): the model's arithmetic intensity per sequence
    length, the ridge point of the measured ceilings (bf16 GEMM roof over the copy bandwidth), the first length past
    it."""
    ok = timed(metrics, gpu)
    a = ok[(ok["kernel"] == "attention") & (ok["impl"] == "triton") & (ok["pass"] == "fwd")
           & (ok["dtype"] == "bfloat16") & ok["size"].notna()].sort_values("size")
    c = ceilings[ceilings["gpu"] == gpu].set_index("ceiling")["value"] if len(ceilings) else pd.Series(dtype=float)
    if a.empty or "arithmetic_intensity" not in a or not {"gemm_bf16", "copy"} <= set(c.index):
        return ""
    ridge = float(c["gemm_bf16"] / c["copy"])
    past = a[a["arithmetic_intensity"] >= ridge]
    per = ", ".join(f"{fmt(r.arithmetic_intensity)} at {int(r.size)}" for r in a.itertuples())
    where = (f"so it is compute-bound from a sequence of {int(past['size'].iloc[0])} on"
             if len(past) else "so it stays memory-bound over the sizes swept")
    return (
        f"Causal attention at the sweep's shapes (bfloat16) does about $S/4$ FLOPs per byte of its minimum traffic: "
        f"{per} FLOP/B, against a ridge point of {fmt(ridge)} FLOP/B (the measured bf16 roof over the measured "
        f"copy bandwidth), {where}. ")


def traffic_sentence(traffic: pd.DataFrame | None) -> str:
    """What the online softmax saves: the DRAM bytes the naive expression moved over ours', per pass."""
    if traffic is None or traffic.empty:
        return ""
    t = traffic[(traffic["kernel"] == "attention") & traffic["impl"].isin(["naive", "triton"])]
    parts = []
    for pass_, g in t.groupby("pass", sort=True):
        by = g.set_index("impl")["moved_bytes"]
        if {"naive", "triton"} <= set(by.index):
            minimum = float(g["model_bytes"].iloc[0])
            over = by["triton"] / minimum  # under 1: the kernel's last writes may still sit in the L2
            parts.append(f"{pass_} {fmt(by['naive'] / 1e9)} GB against our {fmt(by['triton'] / 1e9)} GB "
                         f"({fmt(by['naive'] / by['triton'])}x; ours {fmt(over)}x the byte model's count" +
                         (", its last writes perhaps still in the L2)" if over < 1 else ")"))
    if not parts:
        return ""
    size, dtype = int(t["size"].iloc[0]), t["dtype"].iloc[0]
    return (f"Writing the $S \\times S$ scores is what the online softmax saves: at $S={size}$ in {dtype}, the "
            f"naive expression moved {'; '.join(parts)} through DRAM (Nsight Compute, Table~\\ref{{tab:traffic}}). ")


def with_cells(rows: pd.DataFrame) -> pd.DataFrame:
    """Every row's cell columns; rows written before grouped and decode cells: kv_heads = heads, seq_q = seq_k =
    seq."""
    rows = rows.copy()
    for col, src in (("kv_heads", "heads"), ("seq_q", "seq"), ("seq_k", "seq")):
        rows[col] = rows[src] if col not in rows else rows[col].fillna(rows[src])
    return rows


def cell_label(x) -> str:
    """batch x heads x seq x head_dim; grouped or seq_q != seq_k: batch x heads:kv_heads x seq_q:seq_k x head_dim."""
    b, h, hkv, sq, sk, d = (int(x[c]) for c in CELL)
    return label((b, h, sk, d)) if hkv == h and sq == sk else f"{b}x{h}:{hkv}x{sq}:{sk}x{d}"


def ratios(rows):
    """Per (shape, causal, dtype, pass): ours' TFLOP/s and ours over each SDPA backend (its time over ours) in GPU
    time and in the Python loop; NaN where a backend has no timed row."""
    key = [*CELL, "causal", "dtype", "pass"]
    ok = with_cells(rows[rows["status"] == "ok"])
    out = []
    for k, g in ok.groupby(key, sort=True):
        by = g.set_index("variant")
        if "ours" not in by.index:
            continue
        row = dict(zip(key, k), ours_tflops=by.at["ours", "tflops"], ours_tflops_loop=by.at["ours", "tflops_loop"])
        for v in BACKENDS:
            row[f"{v}_tflops"] = by.at[v, "tflops"] if v in by.index else float("nan")
            row[f"vs_{v}"] = by.at[v, "median_ms"] / by.at["ours", "median_ms"] if v in by.index else float("nan")
            row[f"vs_{v}_loop"] = by.at[v, "loop_ms"] / by.at["ours", "loop_ms"] if v in by.index else float("nan")
        out.append(row)
    return pd.DataFrame(out)


def printed_table(rows) -> str:
    """The printed table: ours over each backend, GPU time / Python loop (above 1: ours faster)."""
    r = ratios(rows)
    if r.empty:
        return "no timed cell of ours"
    head = (f"{'shape':>18} {'causal':>6} {'dtype':>8} {'pass':>7} {'ours TF/s':>9}  " +
            "  ".join(f"{'vs ' + name:>22}" for name in BACKENDS.values()))
    lines = ["ours over each SDPA backend: its time / ours, GPU time | Python loop (above 1: ours faster)", head]
    for _, x in r.iterrows():
        shape = cell_label(x)
        cols = "  ".join(f"{x[f'vs_{v}']:>10.3f} | {x[f'vs_{v}_loop']:<9.3f}" for v in BACKENDS)
        lines.append(f"{shape:>18} {str(x['causal']):>6} {x['dtype']:>8} {x['pass']:>7} {x['ours_tflops']:>9.1f}  " +
                     cols)
    return "\n".join(lines)


def backends_table(backends: pd.DataFrame) -> str:
    r = ratios(backends)
    rows = []
    for _, x in r.iterrows():
        row = {
            ("", "shape"): cell_label(x),
            ("", "mask"): "causal" if x["causal"] else "full",
            ("", "pass"): x["pass"],
            ("ours", "TFLOP/s"): x["ours_tflops"]
        }
        for v, name in BACKENDS.items():
            row[(f"SDPA {name}", "TFLOP/s")] = x[f"{v}_tflops"]
            row[(f"SDPA {name}", "ours/it")] = (f"{fmt(x[f'vs_{v}'])} | {fmt(x[f'vs_{v}_loop'])}"
                                                if np.isfinite(x[f"vs_{v}"]) else "--")
        rows.append(row)
    out = pd.DataFrame(rows)
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    fmts = {c: fmt for c in out.columns if c[1] == "TFLOP/s"}
    return table_latex(out, fmts, "lll" + "r" * (len(out.columns) - 3))


def roof_sentence(backends: pd.DataFrame, ceilings: pd.DataFrame, gpu: str) -> str:
    """Each variant's forward TFLOP/s at the longest causal bf16 sequence of head dim 128, over the bf16 roof."""
    roof = ceilings[(ceilings["gpu"] == gpu) & (ceilings["ceiling"] == "gemm_bf16")]["value"]
    b = with_cells(backends)
    ok = b[(b["status"] == "ok") & (b["pass"] == "fwd") & (b["dtype"] == "bfloat16") & b["causal"]
           & (b["head_dim"] == 128) & (b["seq_q"] == b["seq_k"]) & (b["kv_heads"] == b["heads"])]
    if roof.empty or ok.empty:
        return ""
    at = ok[ok["seq"] == ok["seq"].max()]
    peak = float(roof.iloc[0]) / 1e12
    parts = [f"{tex_escape(r.label)} {fmt(r.tflops)} ({fmt(r.tflops / peak)})" for r in at.itertuples()]
    return (f"At the longest causal sequence ({int(at['seq'].iloc[0])}, head dim 128, bf16), the forward pass "
            f"reaches, in TFLOP/s and as a share of the measured bf16 roof ({fmt(peak)} TFLOP/s, a GEMM's, at the "
            f"clock it ran at, not scaled to each cell's as Table~\\ref{{tab:results}} scales it): "
            f"{', '.join(parts)}. ")


def decode_sentence(backends: pd.DataFrame) -> str:
    """Decode (seq_q < seq_k, ours the split-KV kernel) and chunked prefill: ours over each backend that ran them,
    in GPU time, and the backends that refused a grouped cell."""
    r = ratios(backends)
    r = r[r["seq_q"] < r["seq_k"]] if len(r) else r
    if r.empty:
        return ""
    parts = []
    for name, g in (("decode", r[r["seq_q"] <= 16]), ("a prefill onto a cache", r[r["seq_q"] > 16])):
        ran = [
            f"{span(g[f'vs_{v}'])}$\\times$ the {lbl} backend's" for v, lbl in BACKENDS.items()
            if len(g) and g[f"vs_{v}"].notna().any()
        ]
        if ran:
            keys = sorted({int(k) for k in g["seq_k"]})
            parts.append(f"in {name} ({', '.join(map(str, keys))} keys) ours runs at " + ", ".join(ran) + " speed")
    b = with_cells(backends)
    grouped = b[(b["kv_heads"] < b["heads"]) & b["variant"].isin(list(BACKENDS))]
    key, refusals = [*CELL, "causal", "dtype", "pass"], []
    for v, g in grouped.groupby("variant", sort=True):  # grouped runs (a cell in one pass) each backend refused
        n, runs = len(g[g["status"] == "unsupported"].drop_duplicates(key)), len(g.drop_duplicates(key))
        if n:
            every = "every one" if n == runs else f"{n} of the {count_phrase(runs, 'run')}"
            refusals.append(f"the {BACKENDS[v]} backend refused {every} given it")
    text = ("Against a cache (seq\\_q below seq\\_k, the mask bottom-right; ours over each backend, above 1: ours "
            "faster), " + "; ".join(parts) + ". ") if parts else ""
    return text + (f"Of the grouped K/V runs (enable\\_gqa; a run: a cell in one pass), {'; '.join(refusals)}. "
                   if refusals else "")


def range_sentence(backends: pd.DataFrame) -> str:
    """Ours over each SDPA backend (its time over ours), forward and forward+backward, the range over every timed
    shape, mask and head dim, in GPU time: every pass against every backend, losses included."""
    r = ratios(backends)
    r = r[r["seq_q"] == r["seq_k"]] if len(r) else r  # prefill; decode: decode_sentence
    if r.empty:
        return ""

    masks = sorted({"causal" if c else "full" for c in r["causal"]})
    dims = [str(d) for d in sorted(set(r["head_dim"]))]
    seqs = [str(int(s)) for s in sorted(set(r["seq_k"]))]
    plural = lambda words: "s" if len(words) > 1 else ""  # noqa: E731
    parts = []
    for pass_, name in (("fwd", "forward"), ("fwd+bwd", "forward and backward")):
        p = r[r["pass"] == pass_]
        if len(p):
            parts.append(f"our {name} runs at " + ", ".join(f"{span(p[f'vs_{v}'])}$\\times$ the {label} backend's speed"
                                                            for v, label in BACKENDS.items()
                                                            if p[f"vs_{v}"].notna().any()))
    return (f"Over every timed shape ({FRAME_LABEL['gpu']}; sequence{plural(seqs)} {', '.join(seqs)}; "
            f"{' and '.join(masks)} mask{plural(masks)}; head dim{plural(dims)} {' and '.join(dims)}), " +
            "; ".join(parts) + " (above 1: ours faster). ")


# Why ours trails the fastest backend: a fact of the kernel (kernels/attention/__init__.py) and of the tuning probes (lab/).
SCHEDULE = ("Our forward is FlashAttention-2's schedule: Q, K and V tiles arrive through TMA descriptors (heavy causal "
            "tiles first), and each warp runs its tile's softmax between the tile's two matrix products. "
            "FlashAttention-3's schedule hides that softmax behind another warpgroup's products (warp "
            "specialisation), which our kernel lacks. ")


def attention_section(metrics: pd.DataFrame, ceilings: pd.DataFrame, gpu: str, traffic: pd.DataFrame | None,
                      backends: pd.DataFrame | None) -> str:
    head = compute_bound_sentence(metrics, ceilings, gpu) + traffic_sentence(traffic)
    if backends is not None and (backends["dtype"] == "bfloat16").any():
        backends = backends[backends["dtype"] == "bfloat16"]  # the goals are bf16's; one dtype per table
    if backends is None or backends.empty or ratios(backends).empty:
        return head + "\n\n" + NOT_RUN + "\n"
    sdpa = ("The sweep's builtin row is SDPA as a user calls it, which picks its backend per call; Table~"
            "\\ref{tab:backends} (Appendix~\\ref{sec:every-loss}) forces each in turn. ")
    return (head + "\n\n" + sdpa + roof_sentence(backends, ceilings, gpu) + range_sentence(backends) +
            decode_sentence(backends) + SCHEDULE + "\n")


def backends_long_table(backends: pd.DataFrame | None) -> str:
    """The appendix's table of ours beside each SDPA backend forced in turn (bf16 where there is bf16), one row per
    shape, mask and pass; empty where none was measured (attention_section says so)."""
    if backends is not None and (backends["dtype"] == "bfloat16").any():
        backends = backends[backends["dtype"] == "bfloat16"]
    if backends is None or backends.empty or ratios(backends).empty:
        return ""
    cap = (f"Our FlashAttention-2 beside each backend of \\texttt{{scaled\\_dot\\_product\\_attention}}, forced in "
           f"turn, {tex_escape(str(backends['dtype'].iloc[0]))}: TFLOP/s in "
           f"{FRAME_LABEL['gpu']} (FA2's count: causal half, backward 2.5x forward) and ours over each backend, "
           f"its time over ours, in {FRAME_LABEL['gpu']} | {FRAME_LABEL['loop']} (above 1: ours faster). Shape: "
           "batch x query heads x sequence x head dim; with grouped K/V heads or a query shorter than the keys, "
           "batch x query heads:K/V heads x query rows:keys x head dim. --: the backend does not take the cell.")
    return long_table(backends_table(backends), cap, "tab:backends", "1.5pt")  # dozens of cells: over a page


def main(argv=None) -> int:
    import argparse

    from rooflab.io import read_table

    ap = argparse.ArgumentParser(description="Print ours over each SDPA backend from experiments/backends.py rows.")
    ap.add_argument("rows", help="a backends.parquet (results/raw/<gpu>/ or data/reference/<gpu>/)")
    print(printed_table(read_table(ap.parse_args(argv).rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
