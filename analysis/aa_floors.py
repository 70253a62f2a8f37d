"""The A/A floors of one GPU's run: per verdict rule, frame and size class, the least relative difference a verdict
must name, measured on pairs known to be identical (rooflab/verdicts.py).

A verdict is only as good as its false-positive rate. The rounds' interval (paired rule) and the medians' standard
errors (unpaired rule) see the noise within a cell, not what differs between two set-ups of one call: its buffers'
placement, its captured graph, the clock it ran at, the process it ran in. Pairs known to be identical measure that
difference, and a frame and size class's floor is a high quantile (config verdicts ``aa_floor_quantile``) of
|ln speedup| over them, where it has at least ``aa_floor_min_pairs`` pairs:

    paired     the twins of the paired rounds (the same implementation set up twice and timed as two sides)
    unpaired   medians timed apart: the repeatability table's cells (the same cell in two processes) and matmul's
               naive and builtin cells of the sweep (one after the other, the same cuBLAS GEMM and ReLU)

Every verdict of the metrics (analysis/metrics.py) must exceed its rule's floor beside the configured least change.
The A/A test judges each unpaired pair with the floor of the other cells' pairs (``unpaired_out_of_sample``), so
its rate is measured out of sample, as the paired rule's twins are judged with the other kernels' floors
(analysis/paired.with_aa_floors).

    python -m analysis.aa_floors --paired P.parquet... --raw R.parquet... --repeatability T.csv... --settings JSON
        --out results/paired/floors_<gpu>.csv
"""
from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from rooflab.io import write_text
from rooflab.verdicts import VerdictRules, unpaired_verdict

COLUMNS = ["rule", "frame", "size_class", "pairs", "floor"]
UNPAIRED_METHOD = "unpaired, A/A floor"
FRAME_OF = {"median_ms": "gpu", "graph_median_ms": "graph", "loop_ms": "loop"}  # analysis/metrics.FRAMES, inverted


def floor_columns(floors: dict) -> dict:
    """The unpaired A/A floors ({(frame, size class): floor}) as the metrics' columns ``aa_floor_<frame>_<class>``,
    one value a run: every table made from the metrics (results, losses, claims) judges with them."""
    return {f"aa_floor_{frame}_{cls}": value for (frame, cls), value in sorted(floors.items())}


def noise_floor(df: pd.DataFrame, base_rse: np.ndarray, col: str = "median_ms", rules=None, base_ms=None) -> np.ndarray:
    """The relative change a verdict of two medians timed apart must exceed (rooflab/verdicts.py, config verdicts):
    k_sigma combined standard errors of the two medians; at least the floor for the cell's length in its frame
    (VerdictRules.unpaired_floor; CUDA-graph medians carry no launch jitter); and at least the run's A/A floor of
    that frame and size class where the rows carry one (``aa_floor_<frame>_<class>``, floor_columns), the class by
    the faster side (``base_ms``: the other side's times; the row's own where not given). The standard errors are
    the GPU-time samples': the graph and loop medians have none of their own, so the floors carry those frames."""
    rules = rules or VerdictRules()
    rse = df["rse_median"].to_numpy(dtype=float)
    sigma = rules.k_sigma * np.sqrt(np.nan_to_num(rse)**2 + np.nan_to_num(base_rse)**2)
    own = df[col].to_numpy(dtype=float)
    noise = np.maximum(sigma, rules.unpaired_floor(own * 1e3 < rules.short_cell_us, col == "graph_median_ms"))
    frame = FRAME_OF[col]
    faster = own if base_ms is None else np.fmin(own, np.asarray(base_ms, dtype=float))
    classes = np.atleast_1d(rules.size_class(faster * 1e3))
    for cls in set(classes.tolist()):
        name = f"aa_floor_{frame}_{cls}"
        if name in df:
            aa = np.nan_to_num(df[name].to_numpy(dtype=float))
            noise = np.where(classes == cls, np.maximum(noise, aa), noise)
    return noise


def quantile_floor(speedups, rules: VerdictRules) -> float:
    """The relative difference at the ``aa_floor_quantile`` of |ln speedup|: NaN with fewer than
    ``aa_floor_min_pairs`` finite speedups."""
    s = np.asarray(speedups, dtype=float)
    s = s[np.isfinite(s) & (s > 0)]
    if s.size < rules.aa_floor_min_pairs:
        return float("nan")
    return float(np.expm1(np.quantile(np.abs(np.log(s)), rules.aa_floor_quantile)))


def floors_table(paired: pd.DataFrame, unpaired: pd.DataFrame, rules: VerdictRules = VerdictRules()) -> pd.DataFrame:
    """One row per (rule, frame, size class) with A/A pairs: how many, and the floor (NaN: too few pairs).
    ``paired``: analysis/paired.verdict_table's rows (its twins are used); ``unpaired``: the unpaired A/A pairs
    (analysis/paired.unpaired_cells and unpaired_repeat)."""
    parts = []
    if len(paired) and "aa" in paired:
        parts.append(paired[paired["aa"] == "twin"].assign(rule="paired"))
    if len(unpaired):
        parts.append(unpaired.assign(rule="unpaired"))
    rows = []
    for part in parts:
        for (rule, frame, cls), g in part.groupby(["rule", "frame", "size_class"], sort=True):
            rows.append({
                "rule": rule,
                "frame": frame,
                "size_class": cls,
                "pairs": int(np.isfinite(g["speedup"].astype(float)).sum()),
                "floor": quantile_floor(g["speedup"], rules)
            })
    return pd.DataFrame(rows, columns=COLUMNS)


def lookup(floors: pd.DataFrame | None, rule: str) -> dict:
    """{(frame, size class): floor} of one rule, the frames and classes with a floor only."""
    if floors is None or floors.empty:
        return {}
    f = floors[(floors["rule"] == rule) & np.isfinite(floors["floor"].astype(float))]
    return {(r.frame, r.size_class): float(r.floor) for r in f.itertuples()}


def read(path) -> pd.DataFrame:
    """A floors file, or an empty table where none is given."""
    return pd.read_csv(path) if path else pd.DataFrame(columns=COLUMNS)


def unpaired_out_of_sample(unpaired: pd.DataFrame, rules: VerdictRules = VerdictRules()) -> pd.DataFrame:
    """Each unpaired A/A pair judged by the unpaired rule with the A/A floor of its frame and class taken from the
    pairs of every other cell (leave one cell out): method ``UNPAIRED_METHOD``, columns ``aa_floor`` and ``verdict``.
    The pairs' standard errors are those the pair was first judged with (``rse_a``/``rse_b``; 0 where absent)."""
    if unpaired.empty:
        return unpaired
    u = unpaired.reset_index(drop=True).copy()
    cell = u["cell"].astype(str) if "cell" in u else pd.Series(u.index.astype(str), index=u.index)
    floors, verdicts = [], []
    for i, r in u.iterrows():
        same = (u["frame"] == r["frame"]) & (u["size_class"] == r["size_class"]) & (cell != cell[i])
        aa = quantile_floor(u.loc[same, "speedup"], rules)
        base = rules.unpaired_floor(r["size_class"] == "short", r["frame"] == "graph")
        floor = max(base, aa) if np.isfinite(aa) else base
        floors.append(aa)
        verdicts.append(
            unpaired_verdict(float(r["speedup"]), float(r.get("rse_a", 0.0) or 0.0), float(r.get("rse_b", 0.0) or 0.0),
                             floor, rules.k_sigma))
    return u.assign(method=UNPAIRED_METHOD, aa_floor=floors, verdict=verdicts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paired", nargs="*", default=[], help="paired rounds' parquet files")
    ap.add_argument("--raw", nargs="*", default=[], help="the sweep's raw files (matmul's cells timed apart)")
    ap.add_argument("--repeatability", nargs="*", default=[])
    ap.add_argument("--settings", default="{}", help="config verdicts, as JSON")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    import json

    from analysis.paired import read_rounds, unpaired_pairs, verdict_table
    from rooflab.io import read_raw_many

    rules = VerdictRules.from_config(json.loads(args.settings))
    table = verdict_table(read_rounds(args.paired), rules)
    raw = read_raw_many(args.raw) if args.raw else pd.DataFrame()
    repeat = pd.concat([pd.read_csv(p) for p in args.repeatability]) if args.repeatability else None
    floors = floors_table(table, unpaired_pairs(raw, repeat, rules), rules)
    write_text(floors.to_csv(index=False), args.out)
    print(floors.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
