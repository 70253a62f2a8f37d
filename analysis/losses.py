"""Every loss, so none can be left out of the paper's limitations (analysis/results.versus gives the comparisons):

- ``losses`` / ``losses_table``: every (kernel, dtype, pass, frame) where ours is slower than some PyTorch
  implementation beyond noise, at any size, with the sizes as runs and the worst ratio;
- ``backend_losses`` / ``backend_losses_table``: attention against each SDPA backend forced in turn.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.claims import FRAME_LABEL
from analysis.latex import IMPL_SHORT, count_phrase, fmt, long_table, table_latex, tex_escape
from analysis.metrics import FRAMES, noise_floor


def size_ranges(sizes, among) -> str:
    """The sizes of `sizes` as runs over the sorted sizes `among`: '256-1024, 4096' (en dash in LaTeX)."""
    among = sorted(set(int(s) for s in among))
    lost = set(int(s) for s in sizes)
    runs, run = [], []
    for s in among:
        if s in lost:
            run.append(s)
        elif run:
            runs.append(run)
            run = []
    if run:
        runs.append(run)
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}--{r[-1]}" for r in runs)


LOSS_COLUMNS = ["kernel", "dtype", "pass", "frame", "sizes", "lost", "compared", "worst_size", "worst", "lost_to"]


def losses(v: pd.DataFrame) -> pd.DataFrame:
    """Every (kernel, dtype, pass, frame) where ours is slower than some PyTorch implementation beyond noise, at any
    size: the sizes (as runs), how many of those compared, and the worst: ours over the implementation it lost to."""
    if v.empty:
        return pd.DataFrame(columns=LOSS_COLUMNS)
    rows = []
    order = {f: i for i, f in enumerate(FRAMES)}
    for (kernel, dtype, pass_, frame), g in v.groupby(["kernel", "dtype", "pass", "frame"], sort=False):
        lost = g[g["verdict"] == "slower"]
        if lost.empty:
            continue
        w = lost.loc[lost["lost_to_speedup"].idxmin()]
        rows.append({
            "kernel": kernel,
            "dtype": dtype,
            "pass": pass_,
            "frame": frame,
            "sizes": size_ranges(lost["size"], g["size"]),
            "lost": len(lost),
            "compared": len(g),
            "worst_size": int(w["size"]),
            "worst": float(w["lost_to_speedup"]),
            "lost_to": w["lost_to"]
        })
    out = pd.DataFrame(rows, columns=LOSS_COLUMNS)
    return out.sort_values(["kernel", "dtype", "pass", "frame"], key=lambda s: s.map(order)
                           if s.name == "frame" else s).reset_index(drop=True)


def losses_table(lost: pd.DataFrame) -> str:
    if lost.empty:
        return ("\\begin{center}Ours loses to no PyTorch implementation beyond noise, in any frame, at any size."
                "\\end{center}\n")
    t = pd.DataFrame({
        ("", "kernel"): lost["kernel"],
        ("", "dtype"): lost["dtype"],
        ("", "pass"): lost["pass"],
        ("", "frame"): lost["frame"].map(FRAME_LABEL),
        ("where ours loses", "N"): lost["sizes"],
        ("where ours loses", "of sizes"): [f"{a} of {b}" for a, b in zip(lost["lost"], lost["compared"])],
        ("worst", "N"): lost["worst_size"],
        ("worst", "ours / it"): lost["worst"],
        ("worst", "against"): lost["lost_to"].map(IMPL_SHORT)
    })
    t.columns = pd.MultiIndex.from_tuples(t.columns)
    return table_latex(t, {("worst", "ours / it"): fmt}, "llll>{\\raggedright\\arraybackslash}p{3.4cm}rrrl")


def backend_losses(backends: pd.DataFrame | None) -> pd.DataFrame:
    """Attention against each SDPA backend forced in turn (experiments/backends.py): every (mask, head dim, pass,
    backend, frame) where ours is slower beyond noise (the metrics' noise floor), with the shapes and the worst
    ratio (ours' speed over the backend's)."""
    from analysis.attention import BACKENDS, CELL, cell_label, with_cells

    cols = ["mask", "head_dim", "pass", "backend", "frame", "shapes", "lost", "compared", "worst"]
    if backends is None or backends.empty:
        return pd.DataFrame(columns=cols)
    b = with_cells(backends[backends["status"] == "ok"])
    key = [*CELL, "causal", "dtype", "pass"]
    ours = b[b["variant"] == "ours"].set_index(key)
    ours = ours[~ours.index.duplicated()]
    rows = []
    for v in BACKENDS:
        other = b[b["variant"] == v].set_index(key)
        other = other[~other.index.duplicated()]
        both = ours.index.intersection(other.index)
        if not len(both):
            continue
        o, x = ours.loc[both], other.loc[both]
        for frame in ("gpu", "loop"):
            col = FRAMES[frame]
            if col not in o or col not in x:
                continue
            speed = x[col].to_numpy(dtype=float) / o[col].to_numpy(dtype=float)
            o_rse = o.reset_index()
            o_rse = o_rse if "rse_median" in o_rse else o_rse.assign(rse_median=np.nan)
            noise = noise_floor(o_rse,
                                x["rse_median"].to_numpy(dtype=float) if "rse_median" in x else np.full(len(x), np.nan),
                                col)
            slower = 1 - speed > noise
            d = o.reset_index().assign(speed=speed, slower=slower)
            for (causal, hd, pass_), g in d.groupby(["causal", "head_dim", "pass"], sort=True):
                lost = g[g["slower"]]
                if lost.empty:
                    continue
                rows.append({
                    "mask": "causal" if causal else "full",
                    "head_dim": int(hd),
                    "pass": pass_,
                    "backend": BACKENDS[v],
                    "frame": frame,
                    "shapes": ", ".join(cell_label(r) for _, r in lost.iterrows()),
                    "lost": len(lost),
                    "compared": len(g),
                    "worst": float(lost["speed"].min())
                })
    return pd.DataFrame(rows, columns=cols)


def backend_losses_table(lost: pd.DataFrame, measured: bool = True) -> str:
    if lost.empty:  # the caption alone (the text refers to the table)
        return ("\\begin{table}[htbp]\\centering\\scriptsize\\caption{" + BACKEND_LOSSES_CAPTION +
                "}\\label{tab:backend-losses}\n" + ("(none)" if measured else "(not measured)") + "\n\\end{table}\n")
    t = pd.DataFrame({
        ("", "mask"): lost["mask"],
        ("", "head dim"): lost["head_dim"],
        ("", "pass"): lost["pass"],
        ("", "against SDPA"): lost["backend"],
        ("", "frame"): lost["frame"].map(FRAME_LABEL),
        ("where ours loses", "batch x heads x seq"): lost["shapes"],
        ("where ours loses", "of shapes"): [f"{a} of {b}" for a, b in zip(lost["lost"], lost["compared"])],
        ("worst", "ours / it"): lost["worst"]
    })
    t.columns = pd.MultiIndex.from_tuples(t.columns)
    return long_table(table_latex(t, {("worst", "ours / it"): fmt}, "lrlll>{\\raggedright\\arraybackslash}p{4cm}rr"),
                      BACKEND_LOSSES_CAPTION, "tab:backend-losses")  # dozens of rows: over a page


BACKEND_LOSSES_CAPTION = (
    "Attention on the \\HeadlineGpu{}, bfloat16: every mask, head dimension, pass, backend of "
    "\\texttt{scaled\\_dot\\_product\\_attention} (forced in turn) and frame (GPU time, Python loop) in which our "
    "FlashAttention-2 is slower beyond noise, the shapes (batch x query heads[:K/V heads] x query[:key] length x head "
    "dim) at which it is, and the worst: the backend's time over ours.")


def _verb(n: int) -> str:
    return "was" if n == 1 else "were"


def verdict_rule_sentence(v: pd.DataFrame) -> str:
    """Which rule judged the comparisons (versus' rows: ours against one implementation, in one frame, at one cell):
    how many from paired rounds and how many from the medians, how many of the losses rest on a paired verdict, and
    how many GPU-time losses are by less than a microsecond a call."""
    if v.empty or "paired_n" not in v:
        return "No comparison was judged."
    judged = v[v["verdict"] != ""]
    total, paired = int(judged["compared_n"].sum()), int(judged["paired_n"].sum())
    lost = (judged["verdict"] == "slower").to_numpy()
    n_lost, lost_paired = int(lost.sum()), int((lost & judged["lost_paired"].astype(bool).to_numpy()).sum())
    what = "(ours against one implementation, in one frame, at one cell)"
    every = "The one comparison" if total == 1 else f"All {total:,} comparisons".replace(",", "{,}")
    if total == 0:
        return "No comparison was judged."
    if paired == 0:
        text = (f"{every} here {what} {_verb(total)} judged from the medians: the data hold no paired rounds of "
                "these cells.")
    elif paired == total:
        text = f"{every} here {what} {_verb(total)} judged from paired rounds."
    else:
        text = (f"Of the {count_phrase(total, 'comparison')} here {what}, {paired} {_verb(paired)} judged from paired "
                f"rounds (torch.compile is never in the rounds) and {total - paired} from the medians; ")
        text += (f"the one cell and frame where ours loses {'rests' if lost_paired else 'does not rest'} on a paired "
                 "verdict." if n_lost == 1 else f"of the {n_lost} cells and frames where ours loses, {lost_paired} "
                 f"{'rests' if lost_paired == 1 else 'rest'} on a paired verdict.")
    gpu = judged[lost & (judged["frame"] == "gpu").to_numpy()]
    if gpu.empty:
        return text
    small = int((((gpu["ours_ms"] - gpu["ours_ms"] * gpu["lost_to_speedup"]) * 1e3) < 1).sum())
    if small == 0:
        tiny = "no GPU-time loss is by less than 1~\\textmu s a call"
    elif small == len(gpu):
        tiny = ("the one GPU-time loss is" if small == 1 else f"all {small} GPU-time losses are") + \
            " by less than 1~\\textmu s a call"
    else:
        tiny = (f"{small} of the {count_phrase(len(gpu), 'GPU-time loss', 'GPU-time losses')} "
                f"{'is' if small == 1 else 'are'} by less than 1~\\textmu s a call")
    return f"{text} {tiny[0].upper()}{tiny[1:]}."


LOOP_FLAT_US = 20.0  # GPU time under this: the call's cost is the host's, the same at every such size


def loop_spread_sentence(metrics: pd.DataFrame, gpu: str) -> str:
    """How much one implementation's Python-loop time moves between sizes where its GPU time is flat (under
    LOOP_FLAT_US): the host's cost of a call is the same there, so the spread is the loop frame's own noise."""
    from analysis.selection import timed

    ok = timed(metrics, gpu)
    if "loop_ms" not in ok:
        return ""
    flat = ok[(ok["median_ms"] * 1e3 < LOOP_FLAT_US) & ok["loop_ms"].notna()]
    groups = flat.groupby(["kernel", "impl", "dtype", "pass"])
    spread = (groups["loop_ms"].max() / groups["loop_ms"].min())[groups["size"].nunique() >= 3]
    if spread.empty:
        return ""
    worst = spread.idxmax()
    kernel, impl, dtype, pass_ = worst
    g = flat.set_index(["kernel", "impl", "dtype", "pass"]).loc[worst]
    return (
        f"The Python loop is the noisiest frame: where a call's GPU time stays under {fmt(LOOP_FLAT_US)}~\\textmu s "
        f"the host's work per call does not change with the size, yet one implementation's loop time moves between those sizes "
        f"by a median {fmt(spread.median(), 2)}$\\times$ (max over min, over {count_phrase(len(spread), 'series', 'series')} "
        f"of at least three sizes) and by up to {fmt(spread.max(), 2)}$\\times$ ({tex_escape(kernel)} "
        f"{IMPL_SHORT.get(impl, impl)}, {tex_escape(dtype)}, {pass_}: {fmt(g['loop_ms'].min() * 1e3)} to "
        f"{fmt(g['loop_ms'].max() * 1e3)}~\\textmu s); a loop ratio far from its neighbours' is that noise, not "
        f"the kernel.")
