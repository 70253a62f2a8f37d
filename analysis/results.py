"""The paper's findings in one place: ours against the best of PyTorch in each frame, the one-page results table, and
every loss.

- ``versus(metrics, gpu)``: per (kernel, dtype, pass, size) and frame (GPU time, CUDA graph, Python loop), our
  Triton time beside each PyTorch implementation (naive, builtin, torch.compile), the fastest of them and the
  verdict: ours ``slower`` when any PyTorch implementation beats it beyond noise, ``faster`` when ours beats every
  one beyond noise, else ``tie``. A verdict is read from the metrics' ``<frame>verdict_vs_<impl>`` column where the
  metrics have one, else decided with the metrics' own noise floor (analysis/aa_floors.noise_floor).
- ``results_table``: kernel x dtype (x pass) at the largest size: ours over the best of PyTorch in each frame, the
  fraction of the measured roofline, the cause in a phrase, and where ours loses (frames and sizes).
- every loss, so none can be left out of the limitations: analysis/losses.py (its names re-exported here).
- ``results_macros``: the counts and extremes the abstract and the text quote.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from analysis.baselines import (attention_mask, attention_shapes_sentence, baseline_macros,  # noqa: F401 (re-exported)
                                compile_modes_sentence, join_words, versions_sentence)
from analysis.causes import OURS, cause_phrase, section_refs
from analysis.claims import FRAME_LABEL, FRAME_TAG
from analysis.latex import DTYPE_SHORT, IMPL_SHORT, Macros, count_phrase, fmt, table_latex, tex_escape
from analysis.losses import (  # noqa: F401 (re-exported)
    LOSS_COLUMNS, backend_losses, backend_losses_table, loop_spread_sentence, losses, losses_table, size_ranges,
    verdict_rule_sentence)
from analysis.metrics import CELL, FRAMES, noise_floor
from analysis.selection import timed
from analysis.why import launches
from analysis.study_tables import traffic_rows

TORCH = ("naive", "builtin", "compile", "compile-max")
FRAME_SHORT = {"gpu": "GPU", "graph": "graph", "loop": "loop"}
VERSUS_COLUMNS = [
    "kernel", "dtype", "math_mode", "pass", "size", "frame", "ours_ms", "best", "best_ms", "speedup", "verdict",
    "compared_n", "paired_n", "lost_paired", "lost_to", "lost_to_speedup", "roof", "bound"
]


def verdict_column(frame: str, base: str) -> str:
    """The metrics column of the verdict of a row against `base` in `frame` (analysis/metrics.compute_metrics)."""
    return f"verdict_vs_{base}" if frame == "gpu" else f"{frame}_verdict_vs_{base}"


def _verdicts(ours: pd.DataFrame, base_rse: np.ndarray, speedup: np.ndarray, frame: str,
              base: str) -> tuple[np.ndarray, np.ndarray]:
    """faster / slower / tie of each of our rows against `base` in `frame`: the metrics' verdict where it has one,
    else ours against the base beyond the metrics' noise floor; and whether each came from paired rounds (the
    metrics' paired speedup there: analysis/metrics.apply_paired; only the builtin and naive are paired)."""
    col = FRAMES[frame]
    noise = noise_floor(ours.assign(rse_median=ours["rse_median"] if "rse_median" in ours else np.nan), base_rse, col,
                        base_ms=ours[col].to_numpy(dtype=float) * speedup)
    computed = np.select([~np.isfinite(speedup), speedup - 1 > noise, 1 - speedup > noise], ["", "faster", "slower"],
                         default="tie")
    prefix = "" if frame == "gpu" else f"{frame}_"
    paired_col = f"{prefix}paired_speedup_vs_{base}"
    paired = ours[paired_col].notna().to_numpy() if paired_col in ours else np.zeros(len(computed), dtype=bool)
    name = verdict_column(frame, base)
    if name not in ours:
        return computed, paired
    given = ours[name].astype(object).where(ours[name].notna(), "").astype(str).to_numpy()
    return np.where(given != "", given, computed), paired


def versus(metrics: pd.DataFrame, gpu: str) -> pd.DataFrame:
    """Ours against every PyTorch implementation, per cell and frame, on `gpu` (claimable rows only)."""
    ok = timed(metrics, gpu)
    if "math_mode" not in ok:
        ok = ok.assign(math_mode=ok["dtype"])
    if "shape" not in ok:
        ok = ok.assign(shape=ok["size"].astype(str))
    ours = ok[ok["impl"] == OURS].reset_index(drop=True)
    if ours.empty:
        return pd.DataFrame(columns=VERSUS_COLUMNS)
    key = pd.MultiIndex.from_frame(ours[CELL])
    out = []
    for frame, col in FRAMES.items():
        if col not in ours:
            continue
        t = ours[col].to_numpy(dtype=float)
        times, verdicts, paired = {}, {}, {}
        for base in TORCH:
            b = ok[ok["impl"] == base].set_index(CELL)
            b = b[~b.index.duplicated()]
            if col not in b or b.empty:
                continue
            bt = b[col].reindex(key).to_numpy(dtype=float)
            rse = (b["rse_median"].reindex(key).to_numpy(
                dtype=float) if "rse_median" in b else np.full(len(ours), np.nan))
            times[base] = bt
            verdicts[base], paired[base] = _verdicts(ours, rse, bt / t, frame, base)
        if not times:
            continue
        bases = list(times)
        stack = np.vstack([times[b] for b in bases])
        filled = np.where(np.isfinite(stack), stack, np.inf)
        best_i = np.argmin(filled, axis=0)
        best_ms = filled[best_i, np.arange(len(ours))]
        vs = np.vstack([verdicts[b] for b in bases])
        present = np.isfinite(stack) & np.isfinite(t)
        slower = (vs == "slower") & present
        faster_all = ((vs == "faster") | ~present).all(axis=0) & present.any(axis=0)
        verdict = np.where(slower.any(axis=0), "slower", np.where(faster_all, "faster", "tie"))
        verdict = np.where(present.any(axis=0), verdict, "")
        # the fastest of those that beat ours beyond noise
        beat = np.where(slower, stack, np.inf)
        lost_i = np.argmin(beat, axis=0)
        lost_ms = beat[lost_i, np.arange(len(ours))]
        out.append(
            pd.DataFrame({
                "kernel":
                ours["kernel"],
                "dtype":
                ours["dtype"],
                "math_mode":
                ours["math_mode"],
                "pass":
                ours["pass"],
                "size":
                ours["size"],
                "frame":
                frame,
                "ours_ms":
                t,
                "best": [bases[i] if np.isfinite(m) else "" for i, m in zip(best_i, best_ms)],
                "best_ms":
                np.where(np.isfinite(best_ms), best_ms, np.nan),
                "speedup":
                np.where(np.isfinite(best_ms), best_ms, np.nan) / t,
                "verdict":
                verdict,
                # comparisons (one per implementation timed beside ours) and those judged from paired rounds
                "compared_n":
                present.sum(axis=0),
                "paired_n": (np.vstack([paired[b] for b in bases]) & present).sum(axis=0),
                # the loss rests on paired rounds: the verdict against the one it lost to came from them
                "lost_paired":
                np.vstack([paired[b] for b in bases])[lost_i, np.arange(len(ours))] & np.isfinite(lost_ms),
                "lost_to": [bases[i] if np.isfinite(m) else "" for i, m in zip(lost_i, lost_ms)],
                "lost_to_speedup":
                np.where(np.isfinite(lost_ms), lost_ms, np.nan) / t,
                "roof":
                ours["roofline_fraction_measured"].astype(float) if "roofline_fraction_measured" in ours else np.nan,
                "bound":
                ours["bound"] if "bound" in ours else "unknown"
            }))
    v = pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=VERSUS_COLUMNS)
    return v[v["verdict"] != ""].reset_index(drop=True)


# ---------------------------------------------------------------------------------------------------- table


def _mark(speedup: float, verdict: str) -> str:
    """A ratio for the results table: bold where ours is slower beyond noise (post-processed into \\textbf)."""
    if not np.isfinite(speedup):
        return "--"
    return f"!!{fmt(speedup)}" if verdict == "slower" else fmt(speedup)


def results_rows(metrics: pd.DataFrame, gpu: str, traffic: pd.DataFrame | None = None,
                 profiles: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (kernel, dtype, pass) at its largest size: per frame ours over the best of PyTorch and the
    verdict, the roofline fraction, the cause, and where ours loses at any size and frame."""
    v = versus(metrics, gpu)
    if v.empty:
        return pd.DataFrame()
    big = v[v["size"] == v.groupby(["kernel", "dtype", "pass"])["size"].transform("max")]
    traffic = traffic_rows(traffic)
    launched = launches(profiles)
    launched = launched[launched["gpu"] == gpu] if len(launched) else launched
    units = timed(metrics, gpu)
    units = units[units["impl"] == OURS].drop_duplicates(["kernel", "dtype", "pass"]).set_index(
        ["kernel", "dtype", "pass"])["compute_unit"] if "compute_unit" in units else pd.Series(dtype=str)
    lost = losses(v)
    ok = timed(metrics, gpu)
    roofs = ok.set_index(["kernel", "dtype", "pass", "size", "impl"])["roofline_fraction_measured"].to_dict() \
        if "roofline_fraction_measured" in ok else {}
    rows = []
    for (kernel, dtype, pass_), g in big.groupby(["kernel", "dtype", "pass"], sort=True):
        g = g.set_index("frame")
        gpu_row = g.loc["gpu"] if "gpu" in g.index else g.iloc[0]
        row = {
            "kernel": kernel,
            "dtype": dtype,
            "pass": pass_,
            "size": int(gpu_row["size"]),
            "best": gpu_row["best"],
            "roof": gpu_row["roof"],
            "bound": gpu_row["bound"],
            "best_roof": roofs.get((kernel, dtype, pass_, gpu_row["size"], gpu_row["best"]), np.nan)
        }
        for frame in FRAMES:
            row[f"{frame}_speedup"] = g.at[frame, "speedup"] if frame in g.index else np.nan
            row[f"{frame}_verdict"] = g.at[frame, "verdict"] if frame in g.index else ""
        row["cause_kind"], row["cause"] = cause_phrase(pd.Series(row, dtype=object), gpu_row["best"], traffic, launched,
                                                       units.get((kernel, dtype, pass_)))
        mine = lost[(lost["kernel"] == kernel) & (lost["dtype"] == dtype) & (lost["pass"] == pass_)]
        row["loses"] = where_lost(mine)
        rows.append(row)
    return pd.DataFrame(rows)


def where_lost(lost: pd.DataFrame) -> str:
    """Where ours loses, frames with the same sizes together: 'GPU, graph, loop: all'; 'loop 256--1024'; 'none'."""
    if lost.empty:
        return "none"
    said: dict[str, list[str]] = {}
    for r in lost.itertuples():
        said.setdefault("all" if r.lost == r.compared else r.sizes, []).append(FRAME_SHORT[r.frame])
    return "; ".join(f"{', '.join(frames)}: {sizes}" for sizes, frames in said.items())


def results_table(rows: pd.DataFrame) -> str:
    if rows.empty:
        return "\\begin{center}No timed cell of ours on this device.\\end{center}\n"
    # the frames' short names over one-column groups, the ratio's head on two lines: the table fits the page
    g, gr, lo, ratio = FRAME_LABEL["gpu"], FRAME_SHORT["graph"], FRAME_SHORT["loop"], "ours / best"
    t = pd.DataFrame({
        ("", "kernel"): rows["kernel"],
        ("", "dtype"): rows["dtype"].map(lambda d: DTYPE_SHORT.get(d, d)),
        ("", "pass"): rows["pass"],
        ("", "N"): rows["size"],
        (g, ratio): [_mark(s, v) for s, v in zip(rows["gpu_speedup"], rows["gpu_verdict"])],
        (g, "best"): rows["best"].map(IMPL_SHORT),
        (g, "roof"): rows["roof"].astype(float),
        (gr, ratio): [_mark(s, v) for s, v in zip(rows["graph_speedup"], rows["graph_verdict"])],
        (lo, ratio): [_mark(s, v) for s, v in zip(rows["loop_speedup"], rows["loop_verdict"])],
        ("", "cause (largest N)"): rows["cause"],
        ("", "ours loses beyond noise at N"): rows["loses"]
    })
    if rows["size"].nunique() == 1:  # one largest size: the caption says it
        t = t.drop(columns=("", "N"))
    t.columns = pd.MultiIndex.from_tuples(t.columns)
    wrap = ">{\\raggedright\\arraybackslash}p{%s}"
    align = "lll" + ("r" if ("", "N") in t.columns else "") + "rlrrr" + wrap % "3.9cm" + wrap % "3.3cm"
    body = table_latex(t, {(g, "roof"): lambda x: f"{x:.2f}" if np.isfinite(x) else "--"}, align)
    body = re.sub(r"!!([0-9.]+)", r"\\textbf{\1}", body).replace(ratio, "\\shortstack{ours /\\\\best}")
    return section_refs(body)


# ---------------------------------------------------------------------------------------------------- macros


def results_macros(m: Macros, rows: pd.DataFrame, lost: pd.DataFrame, v: pd.DataFrame, backend_lost: pd.DataFrame,
                   backends: pd.DataFrame | None) -> None:
    """What the abstract and the text say of the results table and the losses (every value from the rows)."""
    m.add("ResultRows", count_phrase(len(rows), "combination"),
          "kernel, dtype and pass combinations in the results table")
    for frame, ftag in FRAME_TAG.items():
        ftag = ftag or "Gpu"
        verdicts = rows[f"{frame}_verdict"] if len(rows) else pd.Series(dtype=str)
        for verdict, vtag in (("faster", "Faster"), ("tie", "Tie"), ("slower", "Slower")):
            m.add(f"Results{ftag}{vtag}", str(int((verdicts == verdict).sum())),
                  f"results-table rows where ours is {verdict} than the best of PyTorch, {FRAME_LABEL[frame]}")
    s = rows.dropna(subset=["gpu_speedup"]) if len(rows) else rows
    if len(s):
        m.add("ResultsMedianSpeedup", fmt(s["gpu_speedup"].median()),
              "median over the results table of ours over the best of PyTorch, GPU time, largest size")
        for which, idx in (("Max", s["gpu_speedup"].idxmax()), ("Min", s["gpu_speedup"].idxmin())):
            r = s.loc[idx]
            m.add(f"Results{which}Speedup", fmt(r["gpu_speedup"]), f"{which.lower()} of the same")
            m.add(
                f"Results{which}Cell",
                tex_escape(f"{r['kernel']} in {r['dtype']}" + ("" if r["pass"] == "fwd" else f", {r['pass']},") +
                           f" at N={r['size']}"), "where")
        for which, idx in (("Max", s["gpu_speedup"].idxmax()), ("Min", s["gpu_speedup"].idxmin())):
            cause = s.loc[idx, "cause"].replace("; why: SECREF(", "; Section SECREF(")  # a sentence's, not a cell's
            m.add(f"Results{which}Cause", section_refs(tex_escape(cause)), "its cause, in a phrase")
    m.add("LossListGpu", loss_list(rows, "gpu"), "results-table rows where ours is slower in GPU time")
    m.add("LossListLoop", loss_list(rows, "loop"), "results-table rows where ours is slower in the Python loop")
    m.add("PrecisionSentence", precision_sentence(rows), "compute-bound kernels per precision: ours over the best")
    m.add("GlanceSentence", glance_sentence(rows), "what the wins and ties of the results table have in common")
    mem = rows[rows["bound"] == "memory"] if len(rows) else rows
    m.add("ResultsMemoryRoofMedian",
          fmt(mem["roof"].median(), 2) if len(mem) else "n/a",
          "median fraction of the measured roofline, ours, memory-bound rows, GPU time, largest size")
    m.add("ResultsMemoryRows", count_phrase(len(mem), "memory-bound row"))
    m.add("LossGroups", count_phrase(len(lost), "combination"),
          "kernel, dtype, pass and frame combinations where ours loses beyond noise at some size")
    m.add("LossCells", count_phrase(int(lost["lost"].sum()) if len(lost) else 0, "cell"),
          "cells (kernel, dtype, pass, size, frame) where ours loses beyond noise")
    m.add("ComparedCells", count_phrase(len(v), "cell"), "cells (kernel, dtype, pass, size, frame) compared")
    for frame, ftag in FRAME_TAG.items():
        n = int(lost.loc[lost["frame"] == frame, "lost"].sum()) if len(lost) else 0
        m.add(f"LossCells{ftag or 'Gpu'}", count_phrase(n, "cell"), f"cells lost beyond noise, {FRAME_LABEL[frame]}")
    m.add("VerdictRuleSentence", verdict_rule_sentence(v), "how many comparisons and losses rest on paired rounds")
    m.add("BackendLossGroups", count_phrase(len(backend_lost), "combination"),
          "attention: (mask, head dim, pass, backend, frame) where ours loses to a forced SDPA backend")
    attention_range_macros(m, backends)


def loss_list(rows: pd.DataFrame, frame: str) -> str:
    """The results-table rows where ours is slower beyond noise in `frame`, per kernel: 'attention in bfloat16 and
    float16 (fwd and fwd+bwd), matmul in float32 and tf32 (fwd)'; 'none' where there is none."""
    lost = rows[rows[f"{frame}_verdict"] == "slower"] if len(rows) else rows
    if lost.empty:
        return "none"
    parts = [
        f"{kernel} in {join_words(dict.fromkeys(g['dtype']))} ({join_words(dict.fromkeys(g['pass']))})"
        for kernel, g in lost.groupby("kernel", sort=True)
    ]
    return tex_escape(join_words(parts))


def glance_sentence(rows: pd.DataFrame) -> str:
    """Of the rows where ours is faster in GPU time, how many face a fastest PyTorch implementation measured to move
    more DRAM bytes or to launch more kernels, and how many neither was measured for; of the ties, how many are
    memory-bound near the wall."""
    if rows.empty:
        return ""
    won = rows[rows["gpu_verdict"] == "faster"]["cause_kind"]
    tied = rows[rows["gpu_verdict"] == "tie"]["cause_kind"]
    out = []
    if len(won):
        traffic, launches = int((won == "traffic").sum()), int((won == "launches").sum())
        other = len(won) - traffic - launches
        out.append(f"Of the {count_phrase(len(won), 'row')} where ours is faster in GPU time, the fastest PyTorch "
                   f"implementation moves more DRAM bytes than ours in {traffic} and launches more kernels in "
                   f"{launches}" + (f"; in the other {other} neither was measured larger (Table~\\ref{{tab:traffic}} "
                                    "measures bytes at one size and data type)" if other else "") + ".")
    if len(tied):
        wall = int((tied == "wall").sum())
        out.append(f"Of the {count_phrase(len(tied), 'tie')}, {wall} {'is' if wall == 1 else 'are'} memory-bound with "
                   "ours near the wall, where the fastest PyTorch implementation moves about the minimum too.")
    return " ".join(out)


def precision_sentence(rows: pd.DataFrame) -> str:
    """Per compute-bound kernel (forward, largest size, GPU time): ours over the best of PyTorch in each dtype, with
    our fraction of that dtype's measured roof (at the cell's clock)."""
    c = rows[(rows["bound"] == "compute") & (rows["pass"] == "fwd")] if len(rows) else rows
    if c.empty:
        return "No compute-bound kernel was timed on this device."
    out = []
    for kernel, g in c.groupby("kernel", sort=True):
        said = [
            f"{tex_escape(r.dtype)} {fmt(r.gpu_speedup)}$\\times$" +
            (f" ({r.roof:.2f} of its roof)" if np.isfinite(r.roof) else "") for r in g.itertuples()
        ]
        out.append(f"{tex_escape(kernel)} at $N={int(g['size'].iloc[0])}$: {join_words(said)}")
    return ("In GPU time, forward, ours over the best of PyTorch (and our fraction of the measured roof of its "
            "precision, scaled to the cell's clock): " + "; ".join(out) + ".")


def attention_range_macros(m: Macros, backends: pd.DataFrame | None) -> None:
    """Ours over each forced SDPA backend (its time over ours), GPU time, every timed prefill shape (queries as long
    as keys: our FlashAttention-2) and mask: the range per pass and backend (AttnFwdVsCudnn, AttnFwdBwdVsFlash, ...)."""
    from analysis.attention import BACKENDS, ratios

    r = ratios(backends[backends["dtype"] == "bfloat16"]) if backends is not None and len(backends) else None
    r = r[r["seq_q"] == r["seq_k"]] if r is not None and len(r) else r  # decode and a prefill onto a cache: Section 4.5
    for pass_, ptag in (("fwd", "Fwd"), ("fwd+bwd", "FwdBwd")):
        for v in BACKENDS:
            name = f"Attn{ptag}Vs{v.capitalize()}"
            s = r.loc[r["pass"] == pass_, f"vs_{v}"].dropna() if r is not None and len(r) else pd.Series(dtype=float)
            m.add(name, f"{fmt(s.min())}--{fmt(s.max())}" if len(s) else "n/a",
                  f"ours over SDPA {v}, {pass_}, GPU time, range over shapes and masks (bf16)")
