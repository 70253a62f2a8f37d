"""Paired verdicts and the A/A test, from the sweep's paired rounds (results/raw/<gpu>/paired/<kernel>.parquet).

For every session (a cell group's implementations timed in alternating rounds, rooflab/paired.py) and frame:

* each implementation against the builtin and the naive expression: speedup, its interval and the verdict
  (rooflab/verdicts.paired_verdict), with both sides' SM clocks over the rounds;
* the A/A pairs, known to be identical: the twin (the same implementation timed as a second side, ``copy`` 1)
  against itself, and matmul's naive expression against the builtin (``torch.relu(a @ b)`` and
  ``torch.nn.functional.relu(torch.matmul(a, b))`` launch the same cuBLAS GEMM and the same ReLU kernel).

The twins also set each frame and size class's A/A floor (rooflab/verdicts: what differs between two set-ups of one
call, which the rounds' interval cannot see); every verdict must exceed it. A twin's own verdict is judged against
floors taken from the other kernels' twins only (leave one kernel out), so its A/A rate is measured out of sample.

The A/A table gives, per frame and size class, how many A/A pairs the paired rule calls a tie, faster or slower, or
not comparable (with the A/A floors, and with the interval alone), and the unpaired rule's rate on pairs timed apart: the repeatability table's cells (the same cell in
two processes) and matmul's naive and builtin cells of the sweep (timed one after the other), each judged as the
compare table judged them before pairing (rooflab/verdicts.unpaired_verdict with its floors).

Writes results/paired/<gpu>.parquet (every comparison), results/paired/aa_<gpu>.csv (the A/A rates) and
results/paired/<gpu>.md (the summary).
"""
from __future__ import annotations

import argparse
import logging

import numpy as np
import pandas as pd

from analysis.aa_floors import bound_of, quantile_floor, unpaired_out_of_sample, with_bound
from rooflab.io import write_parquet, write_text
from rooflab.verdicts import (FASTER, NOT_COMPARABLE, SLOWER, TIE, VerdictRules, paired_speedup, paired_verdict,
                              unpaired_verdict)

log = logging.getLogger("rooflab.paired")
GROUP = ["gpu", "run_id", "kernel", "dtype", "shape", "size", "pass", "preset", "session"]
BASES = ("builtin", "naive")
SAME_KERNELS = {("matmul", "naive", "builtin")}  # (kernel, impl, base) pairs that launch the same kernels


def read_rounds(paths) -> pd.DataFrame:
    frames = [pd.read_parquet(p) for p in paths]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _side(g: pd.DataFrame, impl: str, copy: int, frame: str) -> pd.DataFrame:
    s = g[(g["impl"] == impl) & (g["copy"] == copy) & (g["frame"] == frame)]
    return s.set_index("round")[["ms", "sm_clock_mhz"]]


def pairs_of(impls: set[str], kernel: str, twin_present: list[str]) -> list[tuple[str, int, str, int, str]]:
    """(impl, copy, base, base copy, A/A kind) of one session: every implementation against each base present, and
    the A/A pairs ('twin', 'same kernels'; '' for an ordinary comparison)."""
    out = []
    for base in BASES:
        if base not in impls:
            continue
        for impl in sorted(impls - {base}):
            if base == "naive" and impl == "builtin":
                continue  # the builtin against naive is the naive against the builtin, inverted
            kind = "same kernels" if (kernel, impl, base) in SAME_KERNELS else ""
            out.append((impl, 0, base, 0, kind))
    out += [(impl, 1, impl, 0, "twin") for impl in twin_present]
    return out


def verdict_table(rounds: pd.DataFrame, rules: VerdictRules = VerdictRules()) -> pd.DataFrame:
    """One row per (session, frame, pair): speedup of impl over base, interval, half-width, rounds, size class (by
    the faster side's median), verdict, each side's median time and median SM clock over the rounds."""
    rows = []
    if rounds.empty:
        return pd.DataFrame()
    r = rounds.copy()
    for c in GROUP:
        if c not in r:
            r[c] = ""
    r[GROUP] = r[GROUP].astype(str)
    for key, g in r.groupby(GROUP, sort=False):
        impls = set(g.loc[g["copy"] == 0, "impl"])
        twins = sorted(set(g.loc[g["copy"] == 1, "impl"]))
        for impl, copy, base, base_copy, kind in pairs_of(impls, key[2], twins):
            for frame in sorted(set(g["frame"])):
                a, b = _side(g, impl, copy, frame), _side(g, base, base_copy, frame)
                both = a.add_suffix("_a").join(b.add_suffix("_b"), how="inner")
                if both.empty:
                    continue
                s = paired_speedup(both["ms_a"], both["ms_b"], rules.level)
                us = 1e3 * min(both["ms_a"].median(), both["ms_b"].median())
                cls = rules.size_class(us)
                rows.append({
                    **dict(zip(GROUP, key)), "impl": impl,
                    "copy": copy,
                    "base": base,
                    "aa": kind,
                    "frame": frame,
                    **s, "size_class": cls,
                    "verdict": paired_verdict(s["speedup"], s["lo"], s["hi"], s["half_width"], cls, rules),
                    "median_ms_impl": both["ms_a"].median(),
                    "median_ms_base": both["ms_b"].median(),
                    "sm_clock_impl_mhz": both["sm_clock_mhz_a"].median(),
                    "sm_clock_base_mhz": both["sm_clock_mhz_b"].median()
                })
    return pd.DataFrame(rows)


def aa_floors(table: pd.DataFrame, rules: VerdictRules = VerdictRules(), leave_out: str | None = None) -> dict:
    """{(frame, size class): A/A floor}: the ``aa_floor_quantile`` of |ln speedup| over the twin pairs (of every
    kernel but ``leave_out``), as a relative difference, where a frame and class has at least ``aa_floor_min_pairs``
    of them."""
    if table.empty:
        return {}
    twins = table[(table["aa"] == "twin") & np.isfinite(table["speedup"])]
    if leave_out is not None:
        twins = twins[twins["kernel"] != leave_out]
    floors = {key: quantile_floor(g["speedup"], rules) for key, g in twins.groupby(["frame", "size_class"])}
    return {key: f for key, f in floors.items() if np.isfinite(f)}


def with_aa_floors(table: pd.DataFrame, rules: VerdictRules = VerdictRules()) -> pd.DataFrame:
    """The table judged again with the A/A floors: ``verdict_interval`` keeps the verdict of the interval alone,
    ``aa_floor`` the floor applied and ``verdict`` the verdict with it (twins: floors from the other kernels)."""
    if table.empty:
        return table
    t = table.copy()
    t["verdict_interval"] = t["verdict"]
    everyone = aa_floors(t, rules)
    others = {k: aa_floors(t, rules, leave_out=k) for k in t.loc[t["aa"] == "twin", "kernel"].unique()}
    floors = [(others.get(r.kernel, {}) if r.aa == "twin" else everyone).get((r.frame, r.size_class), np.nan)
              for r in t.itertuples()]
    t["aa_floor"] = floors
    t["verdict"] = [
        paired_verdict(r.speedup, r.lo, r.hi, r.half_width, r.size_class, rules, r.aa_floor) for r in t.itertuples()
    ]
    return t


def unpaired_cells(raw: pd.DataFrame, rules: VerdictRules = VerdictRules()) -> pd.DataFrame:
    """The unpaired rule on pairs known identical that were timed apart: matmul's naive and builtin cells of a sweep
    (one after the other, each its own samples and clock), in each frame."""
    from analysis.metrics import FRAMES

    rows = []
    ok = raw[(raw["status"] == "ok") & (raw["kernel"] == "matmul")]
    key = ["gpu", "dtype", "shape", "pass"]
    for k, g in ok.groupby(key, sort=False):
        sides = {impl: g[g["impl"] == impl].iloc[0] for impl in ("naive", "builtin") if (g["impl"] == impl).any()}
        if len(sides) < 2:
            continue
        a, b = sides["naive"], sides["builtin"]
        for frame, col in FRAMES.items():
            if col not in g or not (np.isfinite(a.get(col, np.nan)) and np.isfinite(b.get(col, np.nan))):
                continue
            speedup = float(b[col] / a[col])
            cls = rules.size_class(1e3 * min(a[col], b[col]))
            rse = (float(a["rse_median"]), float(b["rse_median"])) if frame == "gpu" else (0.0, 0.0)
            floor = rules.unpaired_floor(cls == "short", frame == "graph")
            rows.append({
                **dict(zip(key, k)), "frame": frame,
                "size_class": cls,
                "speedup": speedup,
                "verdict": unpaired_verdict(speedup, *rse, floor, rules.k_sigma),
                "sm_clock_impl_mhz": a.get("sm_clock_after_mhz", np.nan),
                "sm_clock_base_mhz": b.get("sm_clock_after_mhz", np.nan),
                "bound": bound_of(pd.DataFrame([a]))[0],
                "rse_a": rse[0],
                "rse_b": rse[1],
                "cell": "|".join(map(str, ("matmul", *k))),
                "source": "sweep cells"
            })
    return pd.DataFrame(rows)


def unpaired_repeat(repeat: pd.DataFrame | None, rules: VerdictRules = VerdictRules()) -> pd.DataFrame:
    """The unpaired rule on the repeatability table (the same cell measured in two processes): event and graph."""
    if repeat is None or repeat.empty:
        return pd.DataFrame()
    rows = []
    for frame, col, diff in (("gpu", "median_ms", "event_rel_diff"), ("graph", "graph_median_ms", "graph_rel_diff")):
        for _, r in repeat.iterrows():
            if not np.isfinite(r.get(diff, np.nan)):
                continue
            cls = rules.size_class(1e3 * min(r[f"{col}_1"], r[f"{col}_2"]))
            speedup = 1.0 / (1.0 + float(r[diff]))
            rows.append({
                "kernel":
                r["kernel"],
                "impl":
                r["impl"],
                "dtype":
                r["dtype"],
                "size":
                r["size"],
                "pass":
                r["pass"],
                "frame":
                frame,
                "size_class":
                cls,
                "speedup":
                speedup,
                "verdict":
                unpaired_verdict(speedup, 0.0, 0.0, rules.unpaired_floor(cls == "short", frame == "graph"),
                                 rules.k_sigma),
                "cell":
                "|".join(str(r[c]) for c in ("kernel", "impl", "dtype", "size", "pass")),
                "source":
                "repeatability"
            })
    return pd.DataFrame(rows)


def unpaired_pairs(raw: pd.DataFrame, repeat: pd.DataFrame | None,
                   rules: VerdictRules = VerdictRules()) -> pd.DataFrame:
    """Every unpaired A/A pair of a run: matmul's naive and builtin cells of the sweep and the repeatability table's
    cells, each judged by the unpaired rule with its configured floors."""
    parts = [unpaired_cells(raw, rules) if len(raw) else pd.DataFrame(), unpaired_repeat(repeat, rules)]
    return pd.concat([p for p in parts if len(p)], ignore_index=True) if any(len(p) for p in parts) else pd.DataFrame()


def aa_rates(paired: pd.DataFrame, unpaired: pd.DataFrame) -> pd.DataFrame:
    """Per method, source, frame and size class: A/A pairs, ties, wins (faster or slower: false positives), not
    comparable, and the tie rate (ties over all pairs). ``unpaired``'s rows are method "unpaired" unless they carry
    a ``method`` of their own (analysis/aa_floors.unpaired_out_of_sample)."""
    parts = []
    if not paired.empty:
        aa = paired[paired["aa"] != ""].assign(method="paired", source=lambda d: d["aa"])
        parts.append(aa)
        if "verdict_interval" in aa:
            parts.append(aa.assign(method="paired, interval only", verdict=aa["verdict_interval"]))
    if not unpaired.empty:
        method = unpaired["method"].fillna("unpaired") if "method" in unpaired else "unpaired"
        parts.append(unpaired.assign(method=method))
    if not parts:
        return pd.DataFrame(columns=[
            "method", "source", "frame", "size_class", "pairs", "tie", "false_positive", "not_comparable", "tie_rate",
            "false_positive_rate"
        ])
    t = pd.concat(parts, ignore_index=True)
    rows = []
    for (method, source, frame, cls), g in t.groupby(["method", "source", "frame", "size_class"], sort=True):
        v = g["verdict"]
        n = int(len(v))
        ties, wins, nc = int((v == TIE).sum()), int(v.isin([FASTER, SLOWER]).sum()), int((v == NOT_COMPARABLE).sum())
        rows.append({
            "method": method,
            "source": source,
            "frame": frame,
            "size_class": cls,
            "pairs": n,
            "tie": ties,
            "false_positive": wins,
            "not_comparable": nc,
            "tie_rate": ties / n if n else np.nan,
            "false_positive_rate": wins / n if n else np.nan
        })
    return pd.DataFrame(rows)


def summary_markdown(gpu: str, table: pd.DataFrame, rates: pd.DataFrame, goal: float = 0.95) -> str:
    lines = [
        f"# {gpu}: paired verdicts and the A/A test", "",
        "A/A pairs are known identical; a verdict other than tie is a false positive. Goal: tie in at least "
        f"{goal:.0%} of A/A pairs in every frame and size class. 'paired': the interval and the A/A floor (a "
        "twin judged with floors from the other kernels' twins); 'paired, interval only': without the floor.", "",
        "| method | pairs from | frame | size class | pairs | tie | false positive | not comparable | tie rate |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    ]
    lines += [
        f"| {r.method} | {r.source} | {r.frame} | {r.size_class} | {r.pairs} | {r.tie} | {r.false_positive} "
        f"| {r.not_comparable} | {r.tie_rate:.1%} |" for r in rates.itertuples()
    ]
    real = table[table["aa"] == ""] if not table.empty else table
    if "aa_floor" in table:
        floors = table[table["aa"] == ""].groupby(["frame", "size_class"])["aa_floor"].first().dropna()
        lines += [
            "", "## A/A floors (the least effect a verdict names beyond the interval)", "",
            "| frame | size class | floor |", "| --- | --- | --- |"
        ]
        lines += [f"| {f} | {c} | {v:.1%} |" for (f, c), v in floors.items()]
    if len(real):
        counts = real.groupby(["frame", "verdict"]).size()
        lines += [
            "", "## Verdicts of every other comparison", "", "| frame | verdict | comparisons |", "| --- | --- | --- |"
        ]
        lines += [f"| {frame} | {verdict} | {n} |" for (frame, verdict), n in counts.items()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--paired", nargs="*", default=[], help="paired rounds' parquet files")
    ap.add_argument("--raw", nargs="*", default=[], help="the sweep's raw files (matmul's cells timed apart)")
    ap.add_argument("--repeatability", nargs="*", default=[])
    ap.add_argument("--settings", default="{}", help="config verdicts, as JSON")
    ap.add_argument("--out", required=True)
    ap.add_argument("--aa", required=True)
    ap.add_argument("--md", required=True)
    args = ap.parse_args(argv)
    import json

    from rooflab.io import read_raw_many

    rules = VerdictRules.from_config(json.loads(args.settings))
    table = with_aa_floors(verdict_table(read_rounds(args.paired), rules), rules)
    raw = read_raw_many(args.raw) if args.raw else pd.DataFrame()
    repeat = pd.concat([pd.read_csv(p) for p in args.repeatability]) if args.repeatability else None
    unpaired = with_bound(unpaired_pairs(raw, repeat, rules), raw)
    rates = aa_rates(table, pd.concat([unpaired, unpaired_out_of_sample(unpaired, rules)], ignore_index=True))
    write_parquet(table, args.out)
    write_text(rates.to_csv(index=False), args.aa)
    write_text(summary_markdown(args.gpu, table, rates), args.md)
    log.info("%s: %d paired comparisons; A/A: %s", args.gpu, len(table), args.aa)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
