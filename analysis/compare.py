"""This run against the committed reference dataset: which cells got slower or faster beyond noise.

For every GPU measured in this run that has a reference under data/reference/<gpu>/, cells are matched on
(kernel, impl, dtype, size, pass) and compared on their medians:

    rel_change = median_now / median_reference - 1
    noise      = max(k_sigma * sqrt(rse_now^2 + rse_reference^2), floor)
    verdict    = slower (rel_change > noise) | faster (rel_change < -noise) | same

rse is each row's own relative standard error of the median (rooflab/timing.py). It does not see what moves a cell
between processes (docs/archive/performance-rounds.md, rounds 21-22: an unchanged cell of 57 us moved 2.7 %, one of 5 us 30 %), so
the floor is that between-process move, by the cell's length:

- cells under short_cell_us (either run) are compared on their CUDA-graph medians when both runs have them (launch
  overhead removed, and steadier: what the paper claims for short cells); floor short_graph_min_rel_change;
  without graph medians, on the event medians with floor short_min_rel_change;
- cells under long_cell_us, and longer ones: floor min_rel_change.

k_sigma, the floors and the classes are the verdict rules' (rooflab/verdicts.py, config ``verdicts``): the metrics'
verdicts of cells timed apart and the A/A test's unpaired rate read the same settings.

A floor wider than its class may be (rooflab/verdicts.py: max_floor_short 10 %, max_floor_middle and _long 5 %)
cannot see a regression of that size: a cell that did not move beyond it reads "not comparable", not "same" (one
that moved beyond it is still slower or faster).

Each floor is raised to the largest |difference| the repeatability benchmark (scripts/repeatability.py) measured
between processes for cells of that class on this GPU, when its table is given (the reference's
repeatability.csv): beyond noise then means beyond what the same code moved between processes here. Cells whose
status changed (ok -> failed, mismatch -> ok, ...) and cells only one side has are listed too. A reference timed by
another method (before the held stream, or with another flush) is flagged: its differences mix the method and the
kernel.

Writes results/compare/<gpu>.csv (every matched cell) and results/compare/<gpu>.md (counts, the floors and where
they come from, and the largest moves).
"""

import logging

import numpy as np
import pandas as pd

from analysis.columns import flags
from rooflab.verdicts import VerdictRules
from analysis.selection import compile_joint_graph
from rooflab.io import read_raw_many, write_text

KEY = ["kernel", "impl", "dtype", "size", "pass"]
CLASSES = ("short_graph", "short", "mid", "long")  # the floors: by cell length, and graph or event time
log = logging.getLogger("rooflab.compare")


def floors(repeat: pd.DataFrame | None = None, rules: VerdictRules = VerdictRules()) -> dict[str, tuple[float, str]]:
    """{class: (floor, where it comes from)}: the rules' floor of medians timed apart, raised to the largest
    |difference| between processes that the repeatability table has for cells of that class."""
    out = {
        "short_graph": (rules.unpaired_floor(True, True), "setting"),
        "short": (rules.unpaired_floor(True, False), "setting"),
        "mid": (rules.unpaired_floor(False, False), "setting"),
        "long": (rules.unpaired_floor(False, False), "setting")
    }
    if repeat is None or repeat.empty:
        return out
    event_us = repeat["median_ms_1"] * 1e3
    graph_us = repeat["graph_median_ms_1"] * 1e3
    short_us, long_us = rules.short_cell_us, rules.long_cell_us
    measured = {
        "short_graph": repeat.loc[graph_us < short_us, "graph_rel_diff"],
        "short": repeat.loc[event_us < short_us, "event_rel_diff"],
        "mid": repeat.loc[(event_us >= short_us) & (event_us < long_us), "event_rel_diff"],
        "long": repeat.loc[event_us >= long_us, "event_rel_diff"]
    }
    for name, diffs in measured.items():
        d = diffs.abs().dropna()
        if len(d) and d.max() > out[name][0]:
            out[name] = (float(d.max()), f"repeatability, max of {len(d)}")
    return out


def compare(now: pd.DataFrame, ref: pd.DataFrame, repeat: pd.DataFrame | None = None, noise_floors: dict | None = None,
            rules: VerdictRules = VerdictRules()) -> pd.DataFrame:
    """One row per cell present on either side, with the verdict (slower/faster/same/status/new/gone); `repeat` is
    the GPU's repeatability table, from which floors() are taken unless `noise_floors` (its result) is given."""
    floor = {name: value for name, (value, _) in (noise_floors or floors(repeat, rules)).items()}
    cols = KEY + ["status", "median_ms", "graph_median_ms", "rse_median", "hold_us", "joint"]
    now, ref = (d.assign(joint=compile_joint_graph(d)) for d in (now, ref))
    a = now.reindex(columns=cols).rename(columns={c: f"{c}_now" for c in cols if c not in KEY})
    b = ref.reindex(columns=cols).rename(columns={c: f"{c}_ref" for c in cols if c not in KEY})
    t = a.merge(b, on=KEY, how="outer", indicator=True)
    us = np.fmin(t["median_ms_now"], t["median_ms_ref"]) * 1e3
    short = us < rules.short_cell_us
    graph = short & t["graph_median_ms_now"].notna() & t["graph_median_ms_ref"].notna()
    t["timing"] = np.where(graph, "graph", "event")
    t["rel_change"] = np.where(graph, t["graph_median_ms_now"] / t["graph_median_ms_ref"] - 1,
                               t["median_ms_now"] / t["median_ms_ref"] - 1)
    rse = np.sqrt(t["rse_median_now"].astype(float).fillna(0)**2 + t["rse_median_ref"].astype(float).fillna(0)**2)
    rse = np.where(graph, 0.0, rse)  # a graph median comes without its own standard error: the floor is the noise
    cls = np.select([graph, short, us < rules.long_cell_us], ["short_graph", "short", "mid"], default="long")
    t["noise"] = np.maximum(rules.k_sigma * rse, pd.Series(cls).map(floor).to_numpy())
    # the reference was timed without the held stream (its rows have no hold_us) while this run held it
    # or one side's torch.compile fwd+bwd compiled forward and backward as one graph, the other's as a training step
    joint = flags(t, "joint_ref") != flags(t, "joint_now")
    t["method_changed"] = (t["hold_us_ref"].isna() & t["hold_us_now"].notna()) | joint
    both_ok = (t["status_now"] == "ok") & (t["status_ref"] == "ok")
    verdict = np.select([
        t["_merge"] == "left_only", t["_merge"] == "right_only", ~both_ok &
        (t["status_now"] != t["status_ref"]), ~both_ok, t["rel_change"] > t["noise"], t["rel_change"] < -t["noise"]
    ], ["new", "gone", "status", "not timed", "slower", "faster"], default="same")
    # Floors that cannot see a regression of the size the cell's class allows (rooflab/verdicts.py max_floor_*): its
    # cells are not comparable, not "same"
    length = np.select([graph | short, us < rules.long_cell_us], ["short", "middle"], default="long")
    too_wide = t["noise"].to_numpy() > np.array([rules.max_floor(c) for c in length])
    t["verdict"] = np.where(too_wide & (verdict == "same"), "not comparable", verdict)  # a move beyond it stays one
    return t.drop(columns="_merge").sort_values(KEY).reset_index(drop=True)


def summary_markdown(t: pd.DataFrame, gpu: str, top: int = 10, noise_floors: dict | None = None,
                     k_sigma: float = VerdictRules.k_sigma) -> str:
    counts = t["verdict"].value_counts()
    lines = [f"# {gpu}: this run against data/reference/{gpu}", "", "| verdict | cells |", "| --- | --- |"]
    lines += [f"| {v} | {int(n)} |" for v, n in counts.items()]
    if noise_floors:
        label = {
            "short_graph": "short cells, CUDA-graph median",
            "short": "short cells, event median",
            "mid": "middle cells",
            "long": "long cells"
        }
        lines += [
            "", f"Noise floors (a move must exceed the larger of this and {k_sigma:g} standard errors):", "",
            "| cells | floor | from |", "| --- | --- | --- |"
        ]
        lines += [f"| {label[k]} | {v:.1%} | {src} |" for k, (v, src) in noise_floors.items()]
    if t["method_changed"].any():
        lines += [
            "", f"Note: {int(t['method_changed'].sum())} reference cells were timed without the held stream "
            "(an older timer) or, torch.compile's fwd+bwd, as one joint graph (rooflab.kernel."
            "COMPILE_SPLIT_SINCE): their differences mix the method and the kernel."
        ]
    for verdict, asc in (("slower", False), ("faster", True)):
        g = t[t["verdict"] == verdict].sort_values("rel_change", ascending=asc).head(top)
        if len(g):
            lines += [
                "", f"## {verdict} (largest {len(g)})", "",
                "| kernel | impl | dtype | size | pass | timing | reference us | now us | change | noise |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
            ]
            lines += [
                f"| {r.kernel} | {r.impl} | {r['dtype']} | {r['size']} | {r['pass']} | {r.timing} "
                f"| {_us(r, 'ref'):.2f} | {_us(r, 'now'):.2f} | {r.rel_change:+.1%} | {r.noise:.1%} |"
                for _, r in g.iterrows()
            ]
    changed = t[t["verdict"].isin(["status", "new", "gone"])]
    if len(changed):
        lines += ["", "## status changes and unmatched cells", ""]
        lines += [
            f"- {r.kernel} {r.impl} {r['dtype']} {r['size']} {r['pass']}: {r.verdict} "
            f"({r.status_ref if isinstance(r.status_ref, str) else '-'} -> "
            f"{r.status_now if isinstance(r.status_now, str) else '-'})" for _, r in changed.iterrows()
        ]
    return "\n".join(lines) + "\n"


def _us(row, side: str) -> float:
    """The compared median of one side, microseconds (graph or event, as the row was judged)."""
    return row[f"graph_median_ms_{side}" if row.timing == "graph" else f"median_ms_{side}"] * 1e3


def main(now_paths, ref_paths, out_csv, out_md, gpu, repeat_paths=(), verdict_settings=None) -> pd.DataFrame:
    now = read_raw_many(now_paths)
    ref = read_raw_many(ref_paths)
    repeat = pd.read_csv(repeat_paths[0]) if repeat_paths else None
    rules = VerdictRules.from_config(verdict_settings)
    noise_floors = floors(repeat, rules)
    t = compare(now, ref, repeat, noise_floors, rules)
    write_text(t.to_csv(index=False), out_csv)
    write_text(summary_markdown(t, gpu, noise_floors=noise_floors, k_sigma=rules.k_sigma), out_md)
    counts = ", ".join(f"{v} {n}" for v, n in t["verdict"].value_counts().items())
    log.info("%s against its reference: %s (details: %s)", gpu, counts, out_md)
    return t


if "snakemake" in globals():
    sm = globals()["snakemake"]
    logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(message)s")
    logging.getLogger().addHandler(logging.StreamHandler())
    main(list(sm.input.raw), list(sm.input.reference), sm.output.csv, sm.output.md, sm.wildcards.gpu,
         list(sm.input.repeatability), sm.params.verdicts)
