"""The A/A floors of one GPU's run: per verdict rule, frame and size class, the least relative difference a verdict
must name, measured on pairs known to be identical (rooflab/verdicts.py).

A verdict is only as good as its false-positive rate. The rounds' interval (paired rule) and the medians' standard
errors (unpaired rule) see the noise within a cell, not what differs between two set-ups of one call: its buffers'
placement, its captured graph, the clock it ran at, the process it ran in. Pairs known to be identical measure that
difference, and a frame and size class's floor is a high quantile (config verdicts ``aa_floor_quantile``) of
|ln speedup| over them, where it has at least ``aa_floor_min_pairs`` pairs; apart for memory- and compute-bound
cells where each bound has that many (a compute-bound call runs at the SM clock of the moment, which a GEMM at full
load moves by 20 %), else over both ("all"):

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
from rooflab.verdicts import CLASSES, VerdictRules, unpaired_verdict

COLUMNS = ["rule", "frame", "size_class", "bound", "pairs", "floor"]
BOUNDS = ("memory", "compute")
CELL_KEY = ["kernel", "impl", "dtype", "size", "pass"]
UNPAIRED_METHOD = "unpaired, A/A floor"
FRAME_OF = {"median_ms": "gpu", "graph_median_ms": "graph", "loop_ms": "loop"}  # analysis/metrics.FRAMES, inverted


def bound_of(rows: pd.DataFrame) -> np.ndarray:
    """'compute' or 'memory' for each row (gpu, compute_unit, flops, bytes) by its arithmetic intensity against its
    card's datasheet ridge point, as analysis/metrics classes cells of a card with a datasheet entry; '' where the
    card or the row's model is unknown."""
    from rooflab.gpus import SPECS

    out = []
    for r in rows.itertuples():
        spec, unit = SPECS.get(getattr(r, "gpu", "")), getattr(r, "compute_unit", None)
        flops, nbytes = float(getattr(r, "flops", np.nan)), float(getattr(r, "bytes", np.nan))
        if spec is None or not isinstance(unit, str) or not (np.isfinite(flops) and np.isfinite(nbytes) and nbytes):
            out.append("")
            continue
        out.append("compute" if flops / nbytes >= spec.peak_flops(unit) / spec.mem_bandwidth else "memory")
    return np.asarray(out, dtype=object)


def with_bound(pairs: pd.DataFrame, raw: pd.DataFrame, gpu: str | None = None) -> pd.DataFrame:
    """The pairs with a ``bound`` column: their own where they carry one, else their cell's in ``raw`` (matched on
    CELL_KEY; '' where not found)."""
    if pairs.empty:
        return pairs
    p = pairs.copy()
    have = p["bound"].fillna("").astype(str) if "bound" in p else pd.Series("", index=p.index)
    cols = ["gpu", "compute_unit", "flops", "bytes"]
    if len(raw) and set(CELL_KEY + cols) <= set(raw.columns) and set(CELL_KEY) <= set(p.columns):
        r = raw.drop_duplicates(CELL_KEY).assign(bound=lambda d: bound_of(d))
        r[CELL_KEY] = _keys(r[CELL_KEY])
        looked = pd.MultiIndex.from_frame(_keys(p[CELL_KEY]))
        found = r.set_index(CELL_KEY)["bound"].reindex(looked).fillna("").to_numpy(dtype=object)
        have = have.where(have != "", pd.Series(found, index=p.index))
    return p.assign(bound=have.fillna("").astype(str))


def _keys(d: pd.DataFrame) -> pd.DataFrame:
    """Cell keys as text, a size 256 and 256.0 (a column with gaps is float) alike."""
    size = pd.to_numeric(d["size"], errors="coerce")
    return d.astype(str).assign(size=size.map(lambda v: str(int(v)) if np.isfinite(v) else ""))


def floor_columns(floors: dict) -> dict:
    """The unpaired A/A floors ({(frame, size class, bound): floor}) as the metrics' columns
    ``aa_floor_<frame>_<class>_<bound>``, one value a run: every table made from the metrics (results, losses,
    claims) judges with them."""
    return {f"aa_floor_{frame}_{cls}_{bound}": value for (frame, cls, bound), value in sorted(floors.items())}


def noise_floor(df: pd.DataFrame, base_rse: np.ndarray, col: str = "median_ms", rules=None, base_ms=None) -> np.ndarray:
    """The relative change a verdict of two medians timed apart must exceed (rooflab/verdicts.py, config verdicts):
    k_sigma combined standard errors of the two medians; at least the floor for the cell's length in its frame
    (VerdictRules.unpaired_floor; CUDA-graph medians carry no launch jitter); and at least the run's A/A floor of
    that frame, size class and the row's ``bound`` where the rows carry one (``aa_floor_<frame>_<class>_<bound>``,
    floor_columns; the pooled ``_all`` where its bound has none), the class by the faster side (``base_ms``: the other side's times; the row's own where not given). The standard errors are
    the GPU-time samples': the graph and loop medians have none of their own, so the floors carry those frames."""
    rules = rules or VerdictRules()
    rse = df["rse_median"].to_numpy(dtype=float)
    sigma = rules.k_sigma * np.sqrt(np.nan_to_num(rse)**2 + np.nan_to_num(base_rse)**2)
    own = df[col].to_numpy(dtype=float)
    noise = np.maximum(sigma, rules.unpaired_floor(own * 1e3 < rules.short_cell_us, col == "graph_median_ms"))
    frame = FRAME_OF[col]
    faster = own if base_ms is None else np.fmin(own, np.asarray(base_ms, dtype=float))
    classes = np.atleast_1d(rules.size_class(faster * 1e3))
    bounds = df["bound"].astype(str).to_numpy() if "bound" in df else np.full(len(df), "", dtype=object)
    for cls in set(classes.tolist()):
        pooled = df.get(f"aa_floor_{frame}_{cls}_all")
        aa = np.nan_to_num(pooled.to_numpy(dtype=float)) if pooled is not None else np.zeros(len(df))
        for bound in BOUNDS:  # a bound's own floor where measured, else the pooled one
            own_floor = df.get(f"aa_floor_{frame}_{cls}_{bound}")
            if own_floor is not None:
                v = own_floor.to_numpy(dtype=float)
                aa = np.where((bounds == bound) & np.isfinite(v), v, aa)
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
    """One row per (rule, frame, size class, bound) with A/A pairs (bound "all": both bounds' pairs, and pairs of
    no known bound): how many, and the floor (NaN: too few pairs).
    ``paired``: analysis/paired.verdict_table's rows (its twins are used); ``unpaired``: the unpaired A/A pairs
    (analysis/paired.unpaired_cells and unpaired_repeat)."""
    parts = []
    if len(paired) and "aa" in paired:
        parts.append(paired[paired["aa"] == "twin"].assign(rule="paired"))
    if len(unpaired):
        parts.append(unpaired.assign(rule="unpaired"))
    rows = []
    for part in parts:
        part = part.assign(bound=part["bound"].astype(str) if "bound" in part else "")
        for (rule, frame, cls), g in part.groupby(["rule", "frame", "size_class"], sort=True):
            for bound, b in (("all", g), *((x, g[g["bound"] == x]) for x in BOUNDS)):
                if len(b):
                    rows.append({
                        "rule": rule,
                        "frame": frame,
                        "size_class": cls,
                        "bound": bound,
                        "pairs": int(np.isfinite(b["speedup"].astype(float)).sum()),
                        "floor": quantile_floor(b["speedup"], rules)
                    })
    return pd.DataFrame(rows, columns=COLUMNS)


def lookup(floors: pd.DataFrame | None, rule: str) -> dict:
    """{(frame, size class, bound): floor} of one rule, those with a floor only."""
    if floors is None or floors.empty:
        return {}
    f = floors[(floors["rule"] == rule) & np.isfinite(floors["floor"].astype(float))]
    return {(r.frame, r.size_class, r.bound): float(r.floor) for r in f.itertuples()}


def floor_of(floors: dict, frame: str, cls: str, bound: str) -> float:
    """The floor of a comparison: its bound's where measured, else the pooled one (NaN: none)."""
    return floors.get((frame, cls, bound), floors.get((frame, cls, "all"), np.nan))


def read_floors(paths) -> dict[str, pd.DataFrame]:
    """{gpu: its floors table} of results/paired/floors_<gpu>.csv files."""
    from pathlib import Path

    return {Path(p).stem.removeprefix("floors_"): pd.read_csv(p) for p in paths}


def apply_floors(metrics: pd.DataFrame, floors: dict[str, pd.DataFrame],
                 rules: VerdictRules = VerdictRules()) -> pd.DataFrame:
    """The metrics with every verdict judged again beyond its GPU's run-level A/A floors (``floors``: read_floors):
    the floors as the rows' ``aa_floor_<frame>_<class>_<bound>`` columns, the unpaired verdicts again
    (analysis/metrics.judge_unpaired), then where a row has paired rounds its paired verdict again, beyond the
    paired rule's pooled floor of its frame and class (as analysis/paired.with_aa_floors judges the twins: paired
    sides share the clock). A GPU without floors keeps its verdicts."""
    from analysis.metrics import FRAMES, judge_unpaired
    from rooflab.verdicts import paired_verdict

    if metrics.empty or "gpu" not in metrics:
        return metrics
    # one GPU's rows at a time, and one shape set's (rows of two sets may share a cell's key)
    keys = ["gpu", "preset"] if "preset" in metrics else ["gpu"]
    m_all = metrics.reset_index(drop=True)
    parts = []
    for key, m in m_all.groupby(keys, sort=False, dropna=False):
        f = floors.get(str(key[0] if isinstance(key, tuple) else key))
        if f is None or f.empty:
            parts.append(m)
            continue
        m = judge_unpaired(m.assign(**floor_columns(lookup(f, "unpaired"))), rules)
        paired = lookup(f, "paired")
        for base in ("builtin", "naive"):
            for frame in FRAMES:
                prefix = "" if frame == "gpu" else f"{frame}_"
                s_col, lo_col, hi_col, c_col = (f"{prefix}paired_{x}_vs_{base}" for x in ("speedup", "lo", "hi",
                                                                                          "class"))
                if s_col not in m or not m[s_col].notna().any():
                    continue
                classes = m[c_col].astype(str).to_numpy() if c_col in m else np.full(len(m), "")
                verdicts = m[f"{prefix}verdict_vs_{base}"].astype(object).to_numpy().copy()
                for i, (s, lo, hi, cls) in enumerate(zip(m[s_col], m[lo_col], m[hi_col], classes)):
                    if cls in CLASSES and np.isfinite(s) and np.isfinite(lo) and np.isfinite(hi) and lo > 0 and hi > 0:
                        half = float(np.expm1((np.log(hi) - np.log(lo)) / 2))
                        verdicts[i] = paired_verdict(s, lo, hi, half, cls, rules, paired.get((frame, cls, "all"),
                                                                                             np.nan))
                m[f"{prefix}verdict_vs_{base}"] = verdicts
        parts.append(m)
    return pd.concat(parts).sort_index().reset_index(drop=True)


def unpaired_out_of_sample(unpaired: pd.DataFrame, rules: VerdictRules = VerdictRules()) -> pd.DataFrame:
    """Each unpaired A/A pair judged by the unpaired rule with the A/A floor of its frame, class and bound taken from
    the pairs of every other cell (leave one cell out; the pooled bounds' where its bound has too few): method
    ``UNPAIRED_METHOD``, columns ``aa_floor`` and ``verdict``.
    The pairs' standard errors are those the pair was first judged with (``rse_a``/``rse_b``; 0 where absent)."""
    if unpaired.empty:
        return unpaired
    u = unpaired.reset_index(drop=True).copy()
    cell = u["cell"].astype(str) if "cell" in u else pd.Series(u.index.astype(str), index=u.index)
    floors, verdicts = [], []
    bound = u["bound"].astype(str) if "bound" in u else pd.Series("", index=u.index)
    for i, r in u.iterrows():
        others = (u["frame"] == r["frame"]) & (u["size_class"] == r["size_class"]) & (cell != cell[i])
        aa = quantile_floor(u.loc[others & (bound == bound[i]), "speedup"], rules) if bound[i] in BOUNDS else np.nan
        aa = aa if np.isfinite(aa) else quantile_floor(u.loc[others, "speedup"], rules)
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
    raw = read_raw_many(args.raw) if args.raw else pd.DataFrame()
    table = with_bound(verdict_table(read_rounds(args.paired), rules), raw)
    repeat = pd.concat([pd.read_csv(p) for p in args.repeatability]) if args.repeatability else None
    floors = floors_table(table, with_bound(unpaired_pairs(raw, repeat, rules), raw), rules)
    write_text(floors.to_csv(index=False), args.out)
    print(floors.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
