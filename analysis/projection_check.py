"""The projections checked against measurement: every measured GPU's cells projected onto every other measured GPU,
beside what that GPU measured.

For each ordered pair (source, target) of GPUs with a datasheet entry and claimable cells, the cells both measured
(matched on KEY) are projected from the source onto the target three ways, using only what the source knows:

    datasheet   model_ms = max(FLOPs / peak_<unit>(target), bytes / bandwidth(target))     (analysis/metrics.py)
    calibrated  the same with the target's peaks scaled by the source's measured / datasheet ratios, per resource:
                the model the paper prints for every datasheet GPU (analysis/calibration.py)
    scaled      source GPU time x calibrated model(target) / calibrated model(source): each cell keeps its own
                distance from the roof, and the model carries only the change of card

    error = projected / measured on the target - 1      (positive: the projection is slower than the card)

Cells are classed by what the source measured, so a projection's class is known before the target is measured:

    launch   GPU time under short_cell_us (config verdicts, rooflab/verdicts.py) or under LAUNCH_BYTES moved:
             the call's fixed cost, not its traffic or arithmetic, sets its time
    compute  otherwise, arithmetic intensity at or above the source's ridge point (metrics' bound)
    memory   otherwise, below it (so memory-bound cells of LAUNCH_BYTES or more)

The summary gives per direction, model and class the cells, the median and 90th percentile of |error| and the
median signed error, and whether the goal holds (GOALS: the calibrated model's median |error| at most 5 % on
memory-bound cells and 10 % on compute-bound ones). With one measured GPU there is nothing to check, and the
outputs say so.

    python -m analysis.projection_check --metrics results/metrics.parquet --cells C.parquet --summary S.csv
        --table table_projection_check.tex --macros macros_projection_check.tex [--verdicts JSON]
"""
from __future__ import annotations

import argparse
import json
from itertools import permutations

import numpy as np
import pandas as pd

from analysis import calibration
from analysis.latex import Macros, camel, fmt, gpu_tag, table_latex
from rooflab.gpus import MB, SPECS
from rooflab.verdicts import VerdictRules

KEY = ["kernel", "impl", "dtype", "math_mode", "shape", "pass"]  # one cell; math_mode: a TF32 GEMM is not an IEEE one
MODELS = ("datasheet", "calibrated", "scaled")
CLASSES = ("memory", "compute", "launch")
LAUNCH_BYTES = 1 * MB
CLASS_LABEL = {
    "memory": f"memory-bound, {LAUNCH_BYTES / MB:g} MB or more",
    "compute": "compute-bound",
    "launch": "launch-bound"
}
TABLE_LABEL = {"memory": f"memory, {LAUNCH_BYTES / MB:g} MB+", "compute": "compute", "launch": "launch"}  # narrow
GOALS = {("calibrated", "memory"): 0.05, ("calibrated", "compute"): 0.10}  # median |error| at most this
CELL_COLUMNS = [
    "source", "target", *KEY, "size", "class", "bytes", "flops", "source_ms", "target_ms", "model", "projected_ms",
    "error"
]
SUMMARY_COLUMNS = [
    "source", "target", "model", "class", "cells", "median_abs_error", "p90_abs_error", "median_error", "goal",
    "meets_goal"
]


def measured_gpus(metrics: pd.DataFrame) -> list[str]:
    """The GPUs with a datasheet entry and claimable cells, in the metrics' order (the headline GPU first)."""
    ok = metrics["claimable"].astype(bool) if "claimable" in metrics else metrics["status"] == "ok"
    return [g for g in dict.fromkeys(metrics.loc[ok, "gpu"]) if g in SPECS]


def _cells(metrics: pd.DataFrame, gpu: str) -> pd.DataFrame:
    """One GPU's claimable cells, one row per KEY (the newest where a cell was measured twice)."""
    ok = metrics["claimable"].astype(bool) if "claimable" in metrics else metrics["status"] == "ok"
    d = metrics[ok & (metrics["gpu"] == gpu)].copy()
    if "math_mode" not in d:
        d["math_mode"] = ""
    d[KEY] = d[KEY].astype(str)
    if "timestamp" in d:
        d = d.sort_values("timestamp", kind="stable")
    return d.drop_duplicates(KEY, keep="last")


def cell_class(rows: pd.DataFrame, short_cell_us: float) -> np.ndarray:
    """launch, compute or memory per row (module docstring), from the row's own GPU time, bytes and bound; '' where
    the bound is unknown (no compute unit or peaks)."""
    us = rows["median_ms"].to_numpy(dtype=float) * 1e3
    nbytes = rows["bytes"].to_numpy(dtype=float)
    bound = rows["bound"].astype(str).to_numpy()
    return np.select([(us < short_cell_us) | (nbytes < LAUNCH_BYTES), bound == "compute", bound == "memory"],
                     ["launch", "compute", "memory"], default="")


def project(metrics: pd.DataFrame, source: str, target: str, short_cell_us: float) -> pd.DataFrame:
    """The cells both GPUs measured, projected from `source` onto `target` by every model (long: one row per cell
    and model, CELL_COLUMNS)."""
    src, tgt = _cells(metrics, source), _cells(metrics, target)
    both = src.merge(tgt[KEY + ["median_ms"]].rename(columns={"median_ms": "target_ms"}), on=KEY, how="inner")
    if both.empty:
        return pd.DataFrame(columns=CELL_COLUMNS)
    r = calibration.ratios(metrics, source)
    calibrated_target = calibration.model_ms(both, target, r)
    calibrated_source = calibration.model_ms(both, source, r)
    source_ms = both["median_ms"].to_numpy(dtype=float)
    projected = {
        "datasheet": both[f"model_time_ms_{target}"].to_numpy(dtype=float),
        "calibrated": np.asarray(calibrated_target, dtype=float),
        "scaled": source_ms * np.asarray(calibrated_target, dtype=float) / np.asarray(calibrated_source, dtype=float)
    }
    projected = {name: ms for name, ms in projected.items() if name in models_for(source, target)}
    base = pd.DataFrame({
        "source": source,
        "target": target,
        **{
            k: both[k]
            for k in KEY
        }, "size": both["size"] if "size" in both else np.nan,
        "class": cell_class(both, short_cell_us),
        "bytes": both["bytes"].astype(float),
        "flops": both["flops"].astype(float),
        "source_ms": source_ms,
        "target_ms": both["target_ms"].astype(float)
    })
    frames = [
        base.assign(model=name, projected_ms=ms, error=ms / base["target_ms"].to_numpy() - 1)
        for name, ms in projected.items()
    ]
    return pd.concat(frames, ignore_index=True)[CELL_COLUMNS]


def models_for(source: str, target: str) -> tuple[str, ...]:
    """The models a direction is checked with: onto the card itself the scaled projection is the measurement."""
    return MODELS if source != target else tuple(m for m in MODELS if m != "scaled")


def directions_of(gpus: list[str]) -> list[tuple[str, str]]:
    """Each GPU onto itself (the model on the card it was calibrated on: what it misses before any change of card),
    then every ordered pair of different GPUs."""
    return [(g, g) for g in gpus] + list(permutations(gpus, 2))


def summarize(cells: pd.DataFrame, directions: list[tuple[str, str]]) -> pd.DataFrame:
    """Per direction, model and class (every one, n = 0 where a class has no cells): the error distribution and the
    goal (SUMMARY_COLUMNS). Cells without a finite error (no peak for their unit) are not counted."""
    rows = []
    for source, target in directions:
        d = cells[(cells["source"] == source) & (cells["target"] == target)]
        for model in models_for(source, target):
            for cls in CLASSES:
                e = d.loc[(d["model"] == model) & (d["class"] == cls), "error"].to_numpy(dtype=float)
                e = e[np.isfinite(e)]
                goal = GOALS.get((model, cls), np.nan)
                median_abs = float(np.median(np.abs(e))) if len(e) else np.nan
                rows.append({
                    "source": source,
                    "target": target,
                    "model": model,
                    "class": cls,
                    "cells": len(e),
                    "median_abs_error": median_abs,
                    "p90_abs_error": float(np.quantile(np.abs(e), 0.9)) if len(e) else np.nan,
                    "median_error": float(np.median(e)) if len(e) else np.nan,
                    "goal": goal,
                    "meets_goal": (bool(median_abs <= goal) if len(e) and np.isfinite(goal) else pd.NA)
                })
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS).astype({"meets_goal": "boolean"})


def check(metrics: pd.DataFrame, short_cell_us: float | None = None) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(cells, summary, gpus): every measured GPU onto itself and onto every other, projected and summarized."""
    short_cell_us = VerdictRules().short_cell_us if short_cell_us is None else short_cell_us
    gpus = measured_gpus(metrics)
    directions = directions_of(gpus)
    frames = [project(metrics, s, t, short_cell_us) for s, t in directions]
    cells = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=CELL_COLUMNS)
    return cells, summarize(cells, directions), gpus


def _pct(x: float) -> str:
    """A fraction as percent to 0.1 (a rounding residue of 1e-14 reads 0, not 1.1 x 10^-14)."""
    return fmt(round(100 * x, 1), 2)


def one_gpu_sentence(gpus: list[str]) -> str:
    measured = f"Only the {gpus[0].upper()} has" if gpus else "No GPU with a datasheet entry has"
    return (f"{measured} been measured, so no projection has been checked against a measurement yet: that needs "
            "a second GPU's reference under \\texttt{data/reference}.")


def class_phrase(cls: str, n: int) -> str:
    """'12 memory-bound cells of 1 MB or more', '1 compute-bound cell'."""
    noun = "cell" if n == 1 else "cells"
    return f"{n} {CLASS_LABEL[cls].split(',')[0]} {noun}" + (f" of {fmt(LAUNCH_BYTES / MB)} MB or more"
                                                             if cls == "memory" else "")


def direction_label(source: str, target: str) -> str:
    return f"{source.upper()} on itself" if source == target else f"{source.upper()} to {target.upper()}"


def _direction_phrase(s: pd.DataFrame, source: str, target: str) -> str:
    """The calibrated model's median |error| per class in one direction, against the goal where there is one."""
    said = []
    for cls in CLASSES:
        r = s.loc[(source, target, cls)]
        if r["cells"] == 0:
            said.append(f"no {CLASS_LABEL[cls].split(',')[0]} cells")
            continue
        text = f"{_pct(r['median_abs_error'])}\\,\\% over the {class_phrase(cls, int(r['cells']))}"
        if np.isfinite(r["goal"]):
            text += f" (goal {_pct(r['goal'])}\\,\\%: {'met' if r['meets_goal'] else 'missed'})"
        said.append(text)
    where = (f"on the {source.upper()} itself"
             if source == target else f"projected from the {source.upper()} onto the {target.upper()}")
    return f"{where}, the calibrated model's median absolute error is " + ", ".join(said[:-1]) + f" and {said[-1]}"


def sentence(summary: pd.DataFrame, gpus: list[str]) -> str:
    """What the text says: per direction, the calibrated model's median |error| per class against the goal; with one
    GPU, that no projection is checked yet, and the model's error on that GPU itself."""
    s = summary[summary["model"] == "calibrated"].set_index(["source", "target", "class"])
    directions = list(dict.fromkeys(zip(summary["source"], summary["target"])))
    cross = [d for d in directions if d[0] != d[1]]
    parts = [_direction_phrase(s, *d) for d in (cross or directions)]
    text = "; ".join(parts) + "." if parts else ""
    text = text[:1].upper() + text[1:]
    return text if cross else " ".join(t for t in (one_gpu_sentence(gpus), text) if t)


def table_tex(summary: pd.DataFrame, gpus: list[str]) -> str:
    """Per direction and class, the cells and each model's median and 90th-percentile |error| in percent (-- where a
    model does not apply: the scaled projection onto the card itself); with one GPU, the sentence first."""
    if summary.empty:
        return f"\\begin{{center}}{one_gpu_sentence(gpus)}\\end{{center}}\n"
    keys = ["source", "target", "class"]
    rows = summary.drop_duplicates(keys)[keys].reset_index(drop=True)
    count = summary.groupby(keys)["cells"].max()
    out = pd.DataFrame({
        ("", "projected"): [direction_label(a, b) for a, b in zip(rows["source"], rows["target"])],
        ("", "bound"): rows["class"].map(TABLE_LABEL),
        ("", "n"): [int(count[tuple(k)]) for k in rows.to_numpy()]
    })
    index = pd.MultiIndex.from_frame(rows)
    for model in MODELS:
        m = summary[summary["model"] == model].set_index(keys).reindex(index)
        if m["cells"].notna().any():  # a model that applies to no direction (scaled, with one GPU) gets no columns
            out[(model, "median")] = 100 * m["median_abs_error"].to_numpy(dtype=float)
            out[(model, "p90")] = 100 * m["p90_abs_error"].to_numpy(dtype=float)
    out[("", "goal [%]")] = [100 * GOALS.get(("calibrated", c), np.nan) for c in rows["class"]]
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    numbers = {c: (lambda v: _pct(v / 100)) for c in out.columns[3:]}
    table = table_latex(out, numbers, "llr" + "r" * (len(out.columns) - 3))
    if not any(a != b for a, b in zip(rows["source"], rows["target"])):
        table = f"{one_gpu_sentence(gpus)}\\par\\smallskip\n" + table
    return table


def macros_tex(summary: pd.DataFrame, gpus: list[str], short_cell_us: float) -> str:
    m = Macros()
    m.add("ProjectionCheckSentence", sentence(summary, gpus), "the projections against measurement, every direction")
    m.add("ProjectionCheckGpus", " and ".join(g.upper() for g in gpus) or "none", "GPUs measured with a datasheet")
    m.add("ProjectionCheckDirections", str(summary[["source", "target"]].drop_duplicates().shape[0]),
          "directions checked: each GPU on itself, and each ordered pair of GPUs")
    m.add("ProjectionCheckLaunchUs", fmt(short_cell_us), "launch-bound: GPU time under this, microseconds")
    m.add("ProjectionCheckLaunchMB", fmt(LAUNCH_BYTES / MB), "launch-bound: or under this many MB moved")
    for (model, cls), goal in GOALS.items():
        m.add(f"ProjectionCheckGoal{camel(model)}{camel(cls)}Pct", fmt(100 * goal), "median |error| at most, percent")
    for _, r in summary.iterrows():
        name = f"ProjCheck{camel(r['model'])}{camel(r['class'])}"
        where = f"{gpu_tag(r['source'])}To{gpu_tag(r['target'])}"
        m.add(f"{name}Cells{where}", str(int(r["cells"])), f"{r['class']} cells, {r['source']} to {r['target']}")
        m.add(f"{name}MedianPct{where}", _pct(r["median_abs_error"]), f"{r['model']} model, median |error|, percent")
        m.add(f"{name}PNinetyPct{where}", _pct(r["p90_abs_error"]), f"{r['model']} model, p90 |error|, percent")
    return m.text().replace("analysis/paper_inputs.py", "analysis/projection_check.py")


def main(argv=None) -> None:
    from rooflab.io import write_parquet, write_text

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--verdicts", default="{}", help="config verdicts, as JSON: short_cell_us bounds launch-bound")
    ap.add_argument("--cells", required=True, help="per cell, direction and model (parquet)")
    ap.add_argument("--summary", required=True, help="per direction, model and class (csv)")
    ap.add_argument("--table", required=True)
    ap.add_argument("--macros", required=True)
    a = ap.parse_args(argv)
    short_cell_us = VerdictRules.from_config(json.loads(a.verdicts)).short_cell_us
    metrics = pd.read_parquet(a.metrics)
    cells, summary, gpus = check(metrics, short_cell_us)
    write_parquet(cells, a.cells)
    write_text(summary.to_csv(index=False), a.summary)
    write_text(table_tex(summary, gpus), a.table)
    write_text(macros_tex(summary, gpus, short_cell_us), a.macros)
    print(sentence(summary, gpus).replace("\\,\\%", " %"))


if __name__ == "__main__":
    main()
