"""The paper's account of its verdicts: the A/A test's rates and the matrix product's verdicts with both sides' clocks.

Inputs: results/paired/aa_<gpu>.csv and results/paired/<gpu>.parquet (analysis/paired.py) and results/metrics.parquet.
Outputs (results/paper/generated/): table_aa.tex (A/A pairs per method, frame and size class: how many each rule
calls a tie, a win or not comparable), table_matmul_verdicts.tex (ours and the naive expression against cuBLAS at
4096 and 8192, timed apart and timed in pairs, each side's SM clock) and macros_verdicts.tex (the rates the text
quotes).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.aa_floors import UNPAIRED_METHOD
from analysis.latex import Macros, camel, fmt, gpu_tag, table_latex
from rooflab.io import write_text
from rooflab.verdicts import VerdictRules

FRAME = {"gpu": "GPU time", "graph": "CUDA graph", "loop": "Python loop"}
RULE = {
    "paired": "paired",
    "paired, interval only": "paired, no floor",
    "unpaired": "unpaired, no A/A floor",
    UNPAIRED_METHOD: "unpaired"
}
SOURCE = {
    "twin": "same implementation twice",
    "same kernels": "naive and builtin GEMM",
    "repeatability": "same cell, two processes",
    "sweep cells": "naive and builtin GEMM"
}
GOAL = 0.95  # the A/A test's goal: a tie in at least 95 % of A/A pairs in every frame and size class


def aa_table(rates: pd.DataFrame) -> str:
    if rates.empty:
        return "\\emph{No A/A pairs were timed on this device.}\\par\n"
    order = {"short": 0, "middle": 1, "long": 2}
    r = rates.assign(o=rates["size_class"].map(order)).sort_values(["method", "source", "frame", "o"])
    rows = pd.DataFrame({
        "rule": r["method"].map(RULE).fillna(r["method"]),
        "pairs from": r["source"].map(SOURCE).fillna(r["source"]),
        "frame": r["frame"].map(FRAME),
        "length": r["size_class"],
        "pairs": r["pairs"].astype(int),
        "tie [%]": 100 * r["tie_rate"],
        "faster/slower [%]": 100 * r["false_positive_rate"],
        "n/c [%]": 100 * r["not_comparable"] / r["pairs"]
    })
    return table_latex(rows, formats={c: (lambda v: fmt(v, 3))
                                      for c in ("tie [%]", "faster/slower [%]", "n/c [%]")}, align="llllrrrr")


def floors_table_tex(floors: pd.DataFrame) -> str:
    """The unpaired rule's A/A floors of one GPU (analysis/aa_floors's table): per frame and length class, the pairs,
    the pooled floor and each bound's, in percent ('--': too few pairs)."""
    f = floors[floors["rule"] == "unpaired"] if len(floors) else floors
    if f.empty:
        return "\\emph{No pairs known identical were timed apart on this device.}\\par\n"
    order = {"gpu": 0, "graph": 1, "loop": 2, "short": 0, "middle": 1, "long": 2}
    rows = []
    for (frame, cls), g in sorted(f.groupby(["frame", "size_class"]), key=lambda kv:
                                  (order[kv[0][0]], order[kv[0][1]])):
        v = g.set_index("bound")
        pct = lambda b: 100 * float(v.loc[b, "floor"]) if b in v.index else np.nan  # noqa: E731
        rows.append({
            "frame": FRAME.get(frame, frame),
            "length": cls,
            "pairs": int(v.loc["all", "pairs"]) if "all" in v.index else int(g["pairs"].sum()),
            "floor [%]": pct("all"),
            "memory-bound [%]": pct("memory"),
            "compute-bound [%]": pct("compute")
        })
    fmt2 = lambda x: "--" if not np.isfinite(x) else fmt(x, 2)  # noqa: E731
    return table_latex(pd.DataFrame(rows),
                       formats={c: fmt2
                                for c in ("floor [%]", "memory-bound [%]", "compute-bound [%]")}, align="llrrrr")


def aa_macros(m: Macros, rates: pd.DataFrame, gpu: str) -> None:
    """\\AAPairedTieMin<Gpu> (the lowest tie rate of the paired rule over frames and classes), its frame and class,
    the pairs counted, the unpaired rule's lowest rate, and how many groups meet the goal."""
    tag = gpu_tag(gpu)
    for method in ("paired", "unpaired", UNPAIRED_METHOD):
        g = rates[(rates["method"] == method) & (rates["pairs"] > 0)]
        name = camel(method)
        if g.empty:
            m.add(f"AA{name}Pairs{tag}", "0", f"A/A pairs judged by the {method} rule")
            continue
        worst = g.loc[g["tie_rate"].idxmin()]
        m.add(f"AA{name}Pairs{tag}", str(int(g["pairs"].sum())), f"A/A pairs judged by the {method} rule")
        m.add(f"AA{name}TieMin{tag}", fmt(100 * worst["tie_rate"], 3), "lowest tie rate, percent")
        m.add(f"AA{name}TieMinWhere{tag}", f"{FRAME[worst['frame']]}, {worst['size_class']} cells")
        m.add(f"AA{name}FalsePositives{tag}", str(int(g["false_positive"].sum())), "A/A pairs called faster/slower")
        m.add(f"AA{name}GroupsMeetingGoal{tag}", f"{int((g['tie_rate'] >= GOAL).sum())} of {len(g)}",
              f"frame and class groups with ties in at least {GOAL:.0%} of their A/A pairs")


def apart_method(rates: pd.DataFrame) -> str:
    """The method the verdicts of cells timed apart are judged by: the unpaired rule with the run's A/A floors where
    the A/A table has it (analysis/aa_floors), else the rule alone."""
    return UNPAIRED_METHOD if ((rates["method"] == UNPAIRED_METHOD) & (rates["pairs"] > 0)).any() else "unpaired"


def _rate(g: pd.DataFrame) -> str:
    return fmt(100 * g["false_positive"].sum() / g["pairs"].sum(), 2)


def aa_sentence(rates: pd.DataFrame, gpu: str, floors: pd.DataFrame | None = None) -> str:
    """What the paper says of the A/A test on one GPU, counts in agreement: how many pairs known identical each rule
    judged, how many it called faster or slower, its lowest tie rate and where; the unpaired rule's A/A floors
    (``floors``: analysis/aa_floors's table) and its error without them; or that no pairs were timed."""
    from analysis.latex import count_phrase

    parts = []
    apart = apart_method(rates)
    for method, what in (("paired", "timed in paired rounds"), (apart, "timed apart")):
        g = rates[(rates["method"] == method) & (rates["pairs"] > 0)]
        if g.empty:
            continue
        worst = g.loc[g["tie_rate"].idxmin()]
        wins = int(g["false_positive"].sum())
        nc = int(g["not_comparable"].sum())
        rule = "paired" if method == "paired" else "unpaired"
        parts.append(f"of {count_phrase(int(g['pairs'].sum()), 'pair')} {what}, the {rule} rule called "
                     f"{count_phrase(wins, 'pair')} faster or slower" + (f" and {nc} not comparable" if nc else "") +
                     f" (a tie in at least {fmt(100 * worst['tie_rate'], 3)}\\,\\% of the pairs of every group of "
                     f"source, frame and length class; {int((g['tie_rate'] >= GOAL).sum())} of {len(g)} groups reach "
                     f"{fmt(100 * GOAL)}\\,\\%)")
    if not parts:
        return f"No pairs known identical were timed on the {gpu.upper()}."
    text = f"On the {gpu.upper()}, " + "; ".join(parts) + "."
    text += floors_sentence(rates, gpu, floors)
    g = rates[(rates["method"] == apart) & (rates["pairs"] > 0)]
    if not ((rates["method"] == "paired") & (rates["pairs"] > 0)).any() and len(g):
        worst = g.loc[g["false_positive_rate"].idxmax()]
        frame = FRAME.get(worst["frame"], worst["frame"])
        text += (f" No implementation was timed in paired rounds on the {gpu.upper()} (its rows were timed apart), so "
                 f"every verdict on it is the unpaired rule's, which erred on {_rate(g)}\\,\\% of these identical "
                 f"pairs, {fmt(100 * worst['false_positive_rate'], 2)}\\,\\% in the worst group ({frame}, "
                 f"{worst['size_class']} cells): read a single verdict there as an indication.")
    return text


def floors_sentence(rates: pd.DataFrame, gpu: str, floors: pd.DataFrame | None) -> str:
    """The range of the unpaired rule's A/A floors on one GPU (their table: floors_table_tex), and the rule's A/A
    error without them."""
    if floors is None or floors.empty:
        return ""
    f = floors[(floors["rule"] == "unpaired") & np.isfinite(floors["floor"].astype(float))]
    if f.empty:
        return ""
    text = (f" The unpaired rule's A/A floors on the {gpu.upper()} (Table~\\ref{{tab:aa-floors}}) run from "
            f"{fmt(100 * f['floor'].min(), 2)}\\,\\% to {fmt(100 * f['floor'].max(), 2)}\\,\\%.")
    bare = rates[(rates["method"] == "unpaired") & (rates["pairs"] > 0)]
    if len(bare) and apart_method(rates) == UNPAIRED_METHOD:
        text += f" Without them the rule called {_rate(bare)}\\,\\% of the same pairs different."
    return text


def unpaired_caveat(rates: pd.DataFrame, gpu: str) -> str:
    """One sentence for the abstract where a GPU's verdicts all come from cells timed apart: the A/A error of that
    rule (with the run's A/A floors where measured); empty where paired rounds were timed (or nothing was)."""
    apart = rates[(rates["method"] == apart_method(rates)) & (rates["pairs"] > 0)]
    if ((rates["method"] == "paired") & (rates["pairs"] > 0)).any() or apart.empty:
        return ""
    floored = apart_method(rates) == UNPAIRED_METHOD
    return (f"The {gpu.upper()}'s verdicts compare cells timed apart" +
            (" beyond floors measured on identical pairs," if floored else ",") +
            f" a rule that called {_rate(apart)}\\,\\% of identical pairs different" +
            (" (each pair judged against floors from the other cells' pairs)." if floored else "."))


def matmul_verdicts(table: pd.DataFrame, metrics: pd.DataFrame, gpu: str, sizes=(4096, 8192)) -> pd.DataFrame:
    """Ours and the naive expression against cuBLAS (the builtin), GPU time, at ``sizes``: the speedup of the cells
    timed apart with each cell's SM clock and the old verdict, beside the paired speedup, its interval, the rounds'
    clocks and the paired verdict."""
    rows = []
    mm = metrics[(metrics["gpu"] == gpu) & (metrics["kernel"] == "matmul") & (metrics["status"] == "ok")]
    paired = table[(table["kernel"] == "matmul") & (table["frame"] == "gpu") & (table["base"] == "builtin")
                   & (table["copy"] == 0) & (table["pass"] == "fwd") & (table["session"] == "all")] \
        if not table.empty else table
    for (dtype, size), g in mm[mm["size"].isin(sizes)].groupby(["dtype", "size"]):
        base = g[g["impl"] == "builtin"]
        if base.empty:
            continue
        b = base.iloc[0]
        for impl in ("triton", "naive", "compile"):
            one = g[g["impl"] == impl]
            if one.empty:
                continue
            a = one.iloc[0]
            p = paired[(paired["dtype"] == dtype) & (pd.to_numeric(paired["size"], errors="coerce") == size)
                       & (paired["impl"] == impl)] if not paired.empty else paired
            p = p.iloc[0] if len(p) else None
            rows.append({
                "dtype":
                dtype,
                "N":
                int(size),
                "impl":
                impl,
                "apart":
                b["median_ms"] / a["median_ms"],
                "MHz apart":
                f"{_mhz(a)}/{_mhz(b)}",
                "paired":
                p["speedup"] if p is not None else np.nan,
                "interval":
                f"{fmt(p['lo'])}-{fmt(p['hi'])}" if p is not None else "",
                "MHz paired":
                (f"{fmt(p['sm_clock_impl_mhz'], 4)}/{fmt(p['sm_clock_base_mhz'], 4)}" if p is not None else ""),
                "verdict":
                p["verdict"] if p is not None else ""
            })
    return pd.DataFrame(rows)


def _mhz(row) -> str:
    v = row.get("sm_clock_mhz", np.nan)
    if not np.isfinite(v):
        v = row.get("sm_clock_after_mhz", np.nan)
    return fmt(float(v), 4)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--aa", nargs="*", default=[], help="results/paired/aa_<gpu>.csv files")
    ap.add_argument("--paired", nargs="*", default=[], help="results/paired/<gpu>.parquet files")
    ap.add_argument("--floors", nargs="*", default=[], help="results/paired/floors_<gpu>.csv files")
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--verdicts", default="{}", help="config verdicts, as JSON: the rules the paper states")
    ap.add_argument("--outdir", required=True)
    args = ap.parse_args(argv)
    out = Path(args.outdir)
    metrics = pd.read_parquet(args.metrics)
    m = Macros()
    aa_parts, mm_parts, sentences, floor_parts = [], [], [], []
    several = sum(Path(p).stem.removeprefix("aa_") != "cpu" for p in args.aa) > 1  # then each table is headed
    for path in args.aa:
        gpu = Path(path).stem.removeprefix("aa_")
        if gpu == "cpu":
            continue  # the CPU's A/A pairs time host code: the CPU section's own matter
        rates = pd.read_csv(path)
        aa_macros(m, rates, gpu)
        floors = [pd.read_csv(f) for f in args.floors if Path(f).stem.removeprefix("floors_") == gpu]
        sentences.append(aa_sentence(rates, gpu, floors[0] if floors else None))
        floor_parts.append(f"\\par\\smallskip\\textbf{{{gpu.upper()}}}\\par\n" if several else "")
        floor_parts.append(floors_table_tex(floors[0] if floors else pd.DataFrame()))
        aa_parts.append(f"\\par\\smallskip\\textbf{{{gpu.upper()}}}\\par\n" if several else "")
        aa_parts.append(aa_table(rates))
    for path in args.paired:
        gpu = Path(path).stem
        if gpu == "cpu":
            continue
        table = pd.read_parquet(path)
        t = matmul_verdicts(table, metrics, gpu)
        if len(t):
            mm_parts.append(
                table_latex(t.assign(**{"dtype": t["dtype"] + (f" ({gpu.upper()})" if gpu else "")}), formats={
                    "apart": lambda v: fmt(v, 3),
                    "paired": lambda v: fmt(v, 3)
                }, align="lrlrlrllr"))
    m.add("AASentence", " ".join(sentences) or "No pairs known identical were timed on a GPU.",
          "the A/A test's outcome, every GPU")
    from analysis.selection import headline_gpu

    head = headline_gpu(metrics)
    caveats = {
        Path(p).stem.removeprefix("aa_"): unpaired_caveat(pd.read_csv(p),
                                                          Path(p).stem.removeprefix("aa_"))
        for p in args.aa
        if Path(p).stem != "aa_cpu"
    }
    caveat = " ".join(c for c in caveats.values() if c)
    m.add("AAAbstractCaveat", caveats.get(head, ""),
          "the abstract's word on the headline GPU's verdicts where no paired rounds were timed")
    m.add(
        "AAThreat", caveat and (caveat + " Counts of cells beyond noise carry that error: a cell near the rule's "
                                "line may be noise, and every table gives its ratio so a reader can weigh it."),
        "threats to validity: the unpaired rule's A/A error, where no paired rounds were timed")
    import json

    rules = VerdictRules.from_config(json.loads(args.verdicts))
    m.add("VerdictLevel", fmt(100 * rules.level, 3), "confidence of the paired interval, percent")
    for cls in ("short", "middle", "long"):
        m.add(f"VerdictMinEffect{camel(cls)}", fmt(100 * rules.min_effect(cls), 3), "percent")
        m.add(f"VerdictMaxFloor{camel(cls)}", fmt(100 * rules.max_floor(cls), 3), "percent")
    m.add("VerdictKSigma", fmt(rules.k_sigma, 3), "combined standard errors two medians timed apart must differ by")
    m.add("VerdictMedianFloor", fmt(100 * rules.min_rel_change, 3), "medians' least relative change, percent")
    m.add("VerdictMedianFloorShort", fmt(100 * rules.short_min_rel_change, 3), "the same, short cells, percent")
    m.add("VerdictMedianFloorShortGraph", fmt(100 * rules.short_graph_min_rel_change, 3),
          "the same, short cells replayed from a CUDA graph, percent")
    m.add("VerdictAAQuantile", fmt(100 * rules.aa_floor_quantile, 3), "the A/A floor's quantile, percent")
    m.add("VerdictShortUs", fmt(rules.short_cell_us), "short cells end here, microseconds")
    m.add("VerdictLongUs", fmt(rules.long_cell_us), "long cells start here, microseconds")
    write_text("".join(p for p in aa_parts if p) or "\\emph{No A/A pairs were timed on a GPU.}\\par\n",
               out / "table_aa.tex")
    write_text("".join(p for p in floor_parts if p) or "\\emph{No A/A pairs were timed on a GPU.}\\par\n",
               out / "table_aa_floors.tex")
    write_text("".join(mm_parts) or "\\emph{No matrix-product cells at 4096 or 8192 were timed in pairs.}\\par\n",
               out / "table_matmul_verdicts.tex")
    write_text(m.text().replace("analysis/paper_inputs.py", "analysis/verdict_tables.py"), out / "macros_verdicts.tex")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
