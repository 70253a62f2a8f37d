"""Where the sweep's GPU time of a profiled matrix product and the profile's disagree: which of the two is the
earlier build, said in a sentence beside the profile (analysis/why_ncu.matmul_sentence)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.latex import fmt


def timed_note(timed: pd.DataFrame | None, dtype: str, b, t) -> str:
    """Where the sweep's GPU time of the profiled matrix product (ours over cuBLAS) differs by more than 10 % from the
    profile's: the sweep's ratio and both dates (the profile rows record no commit: a later date is a later run)."""
    if timed is None or timed.empty:
        return ""
    g = timed[(timed["kernel"] == "matmul") & (timed["dtype"] == dtype) & (timed["size"] == t["size"])
              & (timed["pass"] == "fwd")].set_index("impl")
    if not {"builtin", "triton"} <= set(g.index):
        return ""
    ratio, profiled = g.at["triton", "median_ms"] / g.at["builtin", "median_ms"], t["duration_us"] / b["duration_us"]
    if not np.isfinite(ratio) or abs(np.log(ratio / profiled)) <= np.log(1.1):
        return ""
    when, then = str(g.at["triton", "timestamp"])[:10], t.get("main_timestamp")
    then = str(then)[:10] if isinstance(then, str) and then else ""
    if then > when:  # the profile is of a later build than the timing
        return (f" The timed ratio is of an earlier build of ours: the sweep's GPU time, taken {when}, has ours at "
                f"{fmt(ratio)}$\\times$ cuBLAS's time, the profile of {then} at {fmt(profiled)}$\\times$; the "
                f"results table's row for this cell is the earlier build's.")
    return (f" The sweep's GPU time (taken {when}) has ours at {fmt(ratio)}$\\times$ cuBLAS's time, the profile "
            f"{fmt(profiled)}$\\times$: they differ by more than 10\\,\\%, and these data do not say why.")
