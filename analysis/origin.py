"""Where every number comes from: per dataset (a device measured in this run, or a committed reference under
data/reference/<gpu>), the runs that made its rows, with their commits, dates, software versions, timing settings
and how many rows each contributed. The paper's "Environment and provenance" table and its title line.

A run is one DAG invocation (run_id). Rows written before run ids existed have none: they are grouped by commit and
date instead, which is what told such runs apart.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.columns import flags, texts

THIS_RUN = "this run"
REFERENCE = "committed reference"
VERSIONS = [("driver", "driver"), ("cuda", "CUDA"), ("torch", "torch"), ("triton", "Triton"), ("python", "Python")]
TIMING = [("timer", "timer"), ("placements", "placements"), ("instances", "instances")]


def source_of(directory: str) -> str:
    """'this run' for results/raw/<gpu> (measured by this workflow), else 'committed reference'."""
    parts = Path(directory).parts
    return THIS_RUN if parts[:2] == ("results", "raw") else REFERENCE


def sources_from_paths(paths) -> dict[str, str]:
    """{gpu: dataset directory} from the ceilings files the analysis read (<dir>/<gpu>/ceilings.parquet)."""
    return {Path(p).parent.name: str(Path(p).parent) for p in paths}


def _text(df: pd.DataFrame, column: str) -> pd.Series:
    """The column as stripped text, '' where it or a value is missing."""
    return texts(df, column).str.strip()


def run_key(df: pd.DataFrame) -> pd.Series:
    """run_id, or for a legacy row without one 'legacy <commit> <date>' (one commit measured on one day)."""
    rid, sha, day = _text(df, "run_id"), _text(df, "git_sha").str.slice(0, 7), _text(df, "timestamp").str.slice(0, 10)
    return rid.where(rid != "", "legacy " + sha + " " + day)


def _distinct(g: pd.DataFrame, col: str, integer: bool = False) -> str:
    if col not in g:
        return ""
    v = g[col].dropna()
    if integer:
        v = pd.to_numeric(v, errors="coerce").dropna().astype(int)
    v = [str(x) for x in dict.fromkeys(v.tolist()) if str(x).strip()]
    return "/".join(sorted(v, key=lambda s: (len(s), s)))


def runs(metrics: pd.DataFrame, ceilings: pd.DataFrame, sources: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per (device, run): source ('this run' | 'committed reference'), directory, run, commits (short,
    '+dirty' where the tree had changes), dates, host, versions, timing settings, and the cell and ceiling rows the
    run contributed. Devices without a source given count as measured in this run (results/raw/<gpu>)."""
    sources = sources or {}
    frames = []
    for kind, df in (("cells", metrics), ("ceilings", ceilings)):
        if len(df):
            frames.append(df.assign(_kind=kind, _run=run_key(df)))
    cols = ["gpu", "source", "directory", "run", "legacy", "commits", "dates", "host"] + [c for c, _ in VERSIONS] + \
        [c for c, _ in TIMING] + ["cells", "ceilings"]
    if not frames:
        return pd.DataFrame(columns=cols)
    rows = pd.concat(frames, ignore_index=True)
    out = []
    for (gpu, run), g in rows.groupby(["gpu", "_run"], sort=True):
        directory = sources.get(gpu, f"results/raw/{gpu}")
        sha = _text(g, "git_sha").str.slice(0, 7)
        dirty = flags(g, "git_dirty")
        commits = sorted({s + ("+dirty" if d else "") for s, d in zip(sha, dirty) if s})
        days = sorted({d for d in _text(g, "timestamp").str.slice(0, 10) if d})
        cells = g[g["_kind"] == "cells"]
        out.append({
            "gpu": gpu,
            "source": source_of(directory),
            "directory": directory,
            "run": run,
            "legacy": run.startswith("legacy "),
            "commits": ", ".join(commits),
            "dates": days[0] + (f" to {days[-1]}" if len(days) > 1 else "") if days else "",
            "host": _distinct(g, "host"),
            **{
                c: _distinct(g, c)
                for c, _ in VERSIONS
            },
            **{
                c: _distinct(cells, c, integer=c != "timer")
                for c, _ in TIMING
            }, "cells": int(len(cells)),
            "ceilings": int((g["_kind"] == "ceilings").sum())
        })
    return pd.DataFrame(out, columns=cols)


def measured_words(directory: str) -> str:
    """A reader's words for where a dataset comes from, without its path: "the suite's reference measurements" or
    "this build's own measurements" (its cells measured now or kept from its earlier runs)."""
    return "this build's own measurements" if source_of(directory) == THIS_RUN else "the suite's reference measurements"


def measured_where(directory: str) -> str:
    """measured_words and the folder, for the appendix's provenance: 'the suite's reference measurements,
    data/reference/h200' or "this build's own measurements, results/raw/cpu"."""
    return f"{measured_words(directory)}, {directory}"


def dataset_label(gpu: str, directory: str) -> str:
    """'H200: the suite's reference measurements, data/reference/h200' or "CPU: this build's own measurements,
    results/raw/cpu"."""
    return f"{gpu.upper()}: {measured_where(directory)}"


def origin_phrase(gpu: str, directory: str) -> str:
    """For the title line: 'H200, the suite's reference measurements'."""
    return f"{gpu.upper()}, {measured_words(directory)}"


def _versions(row) -> str:
    return ", ".join(f"{label} {getattr(row, c)}" for c, label in VERSIONS if getattr(row, c))


def provenance_table(r: pd.DataFrame, tex_escape) -> str:
    """The runs of ``runs()`` as a booktabs tabular: one block per dataset (its label on a line of its own, with the
    versions when all its runs share them), one line per run; '--' for rows without a run id (grouped by commit and
    date)."""
    if r.empty:
        return "\\begin{center}No measured rows.\\end{center}\n"
    lines = [
        "\\begin{tabular}{lllrrp{4.6cm}p{2.7cm}}", "\\toprule",
        "run & commit & date & cells & ceil. & versions & timing \\\\"
    ]
    for (gpu, directory), g in r.groupby(["gpu", "directory"], sort=False):
        shared = {_versions(row) for row in g.itertuples()}  # one set of versions: said once, under the dataset
        shared = shared.pop() if len(shared) == 1 and len(g) > 1 else ""
        lines += ["\\midrule", f"\\multicolumn{{7}}{{l}}{{\\emph{{{tex_escape(dataset_label(gpu, directory))}}}}} \\\\"]
        if shared:
            lines.append(f"\\multicolumn{{7}}{{l}}{{every run: {tex_escape(shared)}}} \\\\")
        for row in g.itertuples():
            run = "--" if row.legacy else f"\\texttt{{{tex_escape(row.run)}}}"
            versions = "as above" if shared else _versions(row)
            timing = "; ".join(
                getattr(row, c) if c ==
                "timer" else f"{getattr(row, c)} {label if getattr(row, c) != '1' else label[:-1]}"
                for c, label in TIMING
                if getattr(row, c))
            lines.append(" & ".join([
                run,
                tex_escape(row.commits),
                tex_escape(row.dates),
                str(row.cells),
                str(row.ceilings),
                tex_escape(versions),
                tex_escape(timing)
            ]) + " \\\\")
    return "\n".join(lines + ["\\bottomrule", "\\end{tabular}", ""])


def freshness(metrics: pd.DataFrame, sources: dict[str, str] | None = None, current_run: str | None = None) -> list:
    """Per device measured by this workflow (results/raw/<gpu>): which cells the run measured and which it kept from
    earlier runs (a subset run, `--config kernels=[gelu]`, or a rerun that reused its cells). The run is
    `current_run` (the invocation's ROOFLAB_RUN_ID) or, without one, the device's newest run. A list of dicts: gpu,
    run, new ({kernel: cells}), kept ({kernel: cells}), earlier_runs (how many runs the kept cells come from)."""
    sources = sources or {}
    out = []
    if metrics.empty:
        return out
    for gpu, g in metrics.groupby("gpu", sort=False):
        if source_of(sources.get(gpu, f"results/raw/{gpu}")) != THIS_RUN:
            continue
        key = run_key(g)
        run = current_run
        if not run:
            stamps = _text(g, "timestamp")
            run = stamps.groupby(key).max().sort_values().index[-1]
        new = g[key == run]
        kept = g[key != run]
        out.append({
            "gpu": gpu,
            "run": run,
            "new": new.groupby("kernel").size().to_dict(),
            "kept": kept.groupby("kernel").size().to_dict(),
            "earlier_runs": int(key[key != run].nunique())
        })
    return out


def _cells(counts: dict) -> str:
    """'64 cells (gelu 40, vecadd 24)' or '40 cells of gelu'."""
    n = sum(counts.values())
    cells = f"{n} cell{'s' if n != 1 else ''}"
    if len(counts) == 1:
        return f"{cells} of {next(iter(counts))}"
    return f"{cells} of {len(counts)} kernels ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})"


def freshness_sentence(rows: list, this_run: bool = True) -> str:
    """One sentence per device: 'On cpu, this run measured 40 cells of gelu; 448 cells of 7 kernels (...) are kept
    from 2 earlier runs.' Empty without a device measured by this workflow."""
    who = "this run" if this_run else "the latest run"
    parts = []
    for r in rows:
        new, kept = r["new"], r["kept"]
        if new and not kept:
            parts.append(f"On {r['gpu']}, {who} measured every cell: {_cells(new)}.")
            continue
        earlier = f"{r['earlier_runs']} earlier run{'s' if r['earlier_runs'] != 1 else ''}"
        head = f"On {r['gpu']}, {who} measured {_cells(new)}" if new else f"On {r['gpu']}, {who} measured no cell"
        parts.append(f"{head}; {_cells(kept)} {'are' if sum(kept.values()) != 1 else 'is'} kept from {earlier}.")
    return " ".join(parts)
