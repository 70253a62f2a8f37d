"""The cause of a result in a phrase (the results table's column and the abstract's largest gain and loss), from
what the data measured: the roof that binds, the bytes under Nsight Compute, the kernels launched."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from analysis.latex import IMPL_SHORT, fmt

OURS = "triton"
UNIT_NAME = {"fp32": "FP32", "tf32": "TF32", "bf16": "BF16", "fp16": "FP16"}


def cause_phrase(row: pd.Series, best: str, traffic: pd.DataFrame, launched: pd.DataFrame,
                 compute_unit: str | None) -> tuple[str, str]:
    """The cause of a result in a phrase, from what the data measured: the roof that binds ours, the DRAM bytes
    the fastest PyTorch implementation moves against ours (Nsight Compute, where that call was measured), the
    kernels it launches against ours (torch.profiler), its fraction of the roofline against ours. (kind, phrase):
    kind is compute, traffic, launches, below (the fastest PyTorch implementation under nine tenths of ours'
    fraction of the wall), wall (memory-bound, ours within 0.85 of the wall) or memory."""
    frac = row["roof"]
    if row["bound"] == "compute":  # the fractions, each at its own cell's clock, and where the mechanism is measured
        unit = UNIT_NAME.get(str(compute_unit), str(compute_unit or "").upper())
        theirs = row.get("best_roof", np.nan)
        why = "sec:attn" if row["kernel"] == "attention" else \
            "sec:precision" if str(compute_unit) in ("fp32", "tf32") else None  # where what differs is measured
        return "compute", (f"{unit} roof at each one's clock: ours {fmt(frac, 2)}" +
                           (f", {IMPL_SHORT[best]} {fmt(theirs, 2)}" if np.isfinite(theirs) else "") +
                           (f"; why: SECREF({why})" if why else ""))
    t = traffic[(traffic["kernel"] == row["kernel"]) & (traffic["pass"] == row["pass"])
                & (traffic["dtype"] == row["dtype"]) & (traffic["size"] == row["size"])].set_index("impl") \
        if {"dtype", "size", "moved_bytes"} <= set(traffic) else traffic.iloc[:0]
    if {best, OURS} <= set(t.index):
        more = t.at[best, "moved_bytes"] / t.at[OURS, "moved_bytes"]
        if more > 1.1:
            return "traffic", f"{IMPL_SHORT[best]} moves {fmt(more, 2)}x our bytes"
    n = launched[(launched["kernel"] == row["kernel"]) & (launched["pass"] == row["pass"])
                 & (launched["dtype"] == row["dtype"])].drop_duplicates("impl").set_index("impl")["n_kernels"]
    if {best, OURS} <= set(n.index) and n[best] > n[OURS]:
        return "launches", f"{IMPL_SHORT[best]}: {int(n[best])} kernels, ours {int(n[OURS])}"
    theirs = row.get("best_roof", np.nan)
    if np.isfinite(frac) and np.isfinite(theirs) and theirs < 0.9 * frac:
        return "below", f"{IMPL_SHORT[best]} at {fmt(theirs, 2)} of the wall"
    if np.isfinite(frac) and frac >= 0.85:
        return "wall", "at the wall" + (f": ours {fmt(frac, 2)}, {IMPL_SHORT[best]} {fmt(theirs, 2)}"
                                        if np.isfinite(theirs) else "")
    return "memory", "memory-bound, below the wall"


def section_refs(text: str) -> str:
    """A cause's SECREF(sec:x), put in as plain text (the table and the macros escape their text), as \\S\\ref."""
    text = re.sub(r"Section SECREF\((sec:[a-z-]+)\)", r"Section~\\ref{\1}", text)
    return re.sub(r"SECREF\((sec:[a-z-]+)\)", r"\\S\\ref{\1}", text)
