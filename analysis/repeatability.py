"""Repeatability of medians between two processes: the summary that scripts/repeatability.py prints and the paper's
repeatability table shows.

Input: the per-cell table scripts/repeatability.py writes (one row per cell and pair of runs, medians of the two
runs in event mode and CUDA-graph mode, their relative differences; with more than two runs every pair is a row, so
n counts cell-pairs and the maximum is over all pairs). Summary, over cells split by length: cells of 50 us and more
in event mode (where two processes should agree within a fraction of a percent), cells under 10 us in CUDA-graph
mode (launch overhead removed: what short cells can claim) and, for contrast, cells under 10 us in event mode.
"""
from __future__ import annotations

import pandas as pd

from rooflab.verdicts import VerdictRules

EVENT_MIN_MS = VerdictRules().long_cell_us / 1e3  # cells this long should repeat within a fraction of a percent
GRAPH_MAX_MS = VerdictRules().short_cell_us / 1e3  # short cells: judged on the CUDA-graph median
GOALS = {"event_long": 0.01, "graph_short": 0.05}  # the goals of the measurement issue: 1 % and 5 %


def process_count(t: pd.DataFrame) -> int:
    """How many processes the table compares: the highest run number in its `pair` column ("1-2", "2-3", ...);
    tables from before --runs have no such column and compare two."""
    if "pair" not in t:
        return 2
    return max((int(run) for pair in t["pair"].dropna().unique() for run in str(pair).split("-")), default=2)


def summarize(t: pd.DataFrame) -> pd.DataFrame:
    """One row per group: cells, mode, n, max and median |relative difference|, and the group's key."""
    def row(key, name, sel, col):
        d = t.loc[sel, col].abs().dropna()
        return {"group": key, "cells": name, "mode": col.split("_")[0], "n": int(d.size),
                "max_abs_rel_diff": float(d.max()) if d.size else float("nan"),
                "median_abs_rel_diff": float(d.median()) if d.size else float("nan")}

    long_ = t["median_ms_1"] >= EVENT_MIN_MS
    short_graph = t["graph_median_ms_1"] < GRAPH_MAX_MS
    short_event = t["median_ms_1"] < GRAPH_MAX_MS
    return pd.DataFrame([row("event_long", f">= {EVENT_MIN_MS * 1e3:.0f} us", long_, "event_rel_diff"),
                         row("graph_short", f"< {GRAPH_MAX_MS * 1e3:.0f} us", short_graph, "graph_rel_diff"),
                         row("event_short", f"< {GRAPH_MAX_MS * 1e3:.0f} us (contrast)", short_event,
                             "event_rel_diff")])
