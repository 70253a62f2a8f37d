"""This run against the committed reference dataset: which cells got slower or faster beyond noise.

For every GPU measured in this run that has a reference under data/reference/<gpu>/, cells are matched on
(kernel, impl, dtype, size, pass) and compared on their medians:

    rel_change = median_now / median_reference - 1
    noise      = max(k_sigma * sqrt(rse_now^2 + rse_reference^2), floor)
    floor      = short_min_rel_change for cells under short_cell_us (either run), else min_rel_change
    verdict    = slower (rel_change > noise) | faster (rel_change < -noise) | same

rse is each row's own relative standard error of the median (rooflab/timing.py). The floors default to what the
repeatability benchmark measured between two processes on the H200 (scripts/repeatability.py: <= 0.5 % for cells of
50 us and more, up to 10 % for event-timed cells under 10 us), with margin. Cells whose status changed (ok -> failed,
mismatch -> ok, ...) and cells only one side has are listed too. A reference timed by another method (before the
held stream, or with another flush) is flagged: its differences mix the method and the kernel.

Writes results/compare/<gpu>.csv (every matched cell) and results/compare/<gpu>.md (counts and the largest moves).
"""

import logging
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rooflab.io import read_raw_many, write_text  # noqa: E402

KEY = ["kernel", "impl", "dtype", "size", "pass"]
DEFAULTS = {"k_sigma": 3.0, "min_rel_change": 0.02, "short_cell_us": 10.0, "short_min_rel_change": 0.10}
log = logging.getLogger("rooflab.compare")


def compare(now: pd.DataFrame, ref: pd.DataFrame, **settings) -> pd.DataFrame:
    """One row per cell present on either side, with the verdict (slower/faster/same/status/new/gone)."""
    s = {**DEFAULTS, **{k: v for k, v in settings.items() if v is not None}}
    cols = KEY + ["status", "median_ms", "rse_median", "hold_us"]
    a = now.reindex(columns=cols).rename(columns={c: f"{c}_now" for c in cols if c not in KEY})
    b = ref.reindex(columns=cols).rename(columns={c: f"{c}_ref" for c in cols if c not in KEY})
    t = a.merge(b, on=KEY, how="outer", indicator=True)
    t["rel_change"] = t["median_ms_now"] / t["median_ms_ref"] - 1
    rse = np.sqrt(t["rse_median_now"].astype(float).fillna(0) ** 2 + t["rse_median_ref"].astype(float).fillna(0) ** 2)
    short = np.fmin(t["median_ms_now"], t["median_ms_ref"]) * 1e3 < s["short_cell_us"]
    floor = np.where(short, s["short_min_rel_change"], s["min_rel_change"])
    t["noise"] = np.maximum(s["k_sigma"] * rse, floor)
    # the reference was timed without the held stream (its rows have no hold_us) while this run held it
    t["method_changed"] = t["hold_us_ref"].isna() & t["hold_us_now"].notna()
    both_ok = (t["status_now"] == "ok") & (t["status_ref"] == "ok")
    verdict = np.select(
        [t["_merge"] == "left_only", t["_merge"] == "right_only", ~both_ok & (t["status_now"] != t["status_ref"]),
         ~both_ok, t["rel_change"] > t["noise"], t["rel_change"] < -t["noise"]],
        ["new", "gone", "status", "not timed", "slower", "faster"], default="same")
    t["verdict"] = verdict
    return t.drop(columns="_merge").sort_values(KEY).reset_index(drop=True)


def summary_markdown(t: pd.DataFrame, gpu: str, top: int = 10) -> str:
    counts = t["verdict"].value_counts()
    lines = [f"# {gpu}: this run against data/reference/{gpu}", "",
             "| verdict | cells |", "| --- | --- |"]
    lines += [f"| {v} | {int(n)} |" for v, n in counts.items()]
    if t["method_changed"].any():
        lines += ["", f"Note: {int(t['method_changed'].sum())} reference cells were timed without the held stream "
                      "(an older timer): their differences mix the timing method and the kernel."]
    for verdict, asc in (("slower", False), ("faster", True)):
        g = t[t["verdict"] == verdict].sort_values("rel_change", ascending=asc).head(top)
        if len(g):
            lines += ["", f"## {verdict} (largest {len(g)})", "",
                      "| kernel | impl | dtype | size | pass | reference us | now us | change | noise |",
                      "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
            lines += [f"| {r.kernel} | {r.impl} | {r.dtype} | {r.size} | {r['pass']} | {r.median_ms_ref * 1e3:.2f} "
                      f"| {r.median_ms_now * 1e3:.2f} | {r.rel_change:+.1%} | {r.noise:.1%} |"
                      for _, r in g.iterrows()]
    changed = t[t["verdict"].isin(["status", "new", "gone"])]
    if len(changed):
        lines += ["", "## status changes and unmatched cells", ""]
        lines += [f"- {r.kernel} {r.impl} {r.dtype} {r.size} {r['pass']}: {r.verdict} "
                  f"({r.status_ref if isinstance(r.status_ref, str) else '-'} -> "
                  f"{r.status_now if isinstance(r.status_now, str) else '-'})" for _, r in changed.iterrows()]
    return "\n".join(lines) + "\n"


def main(now_paths, ref_paths, out_csv, out_md, gpu, settings) -> pd.DataFrame:
    now = read_raw_many(now_paths)
    ref = read_raw_many(ref_paths)
    t = compare(now, ref, **(settings or {}))
    write_text(t.to_csv(index=False), out_csv)
    write_text(summary_markdown(t, gpu), out_md)
    counts = ", ".join(f"{v} {n}" for v, n in t["verdict"].value_counts().items())
    log.info("%s against its reference: %s (details: %s)", gpu, counts, out_md)
    return t


if "snakemake" in globals():
    sm = globals()["snakemake"]
    logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(message)s")
    logging.getLogger().addHandler(logging.StreamHandler())
    main(list(sm.input.raw), list(sm.input.reference), sm.output.csv, sm.output.md, sm.wildcards.gpu,
         sm.params.settings)
