"""Which rows the paper may quote from: the headline GPU, its correct and timed cells, the largest size, verdicts,
our kernels' fixed-cost fit."""
from __future__ import annotations

import pandas as pd

from analysis.metrics import fixed_costs
from rooflab.gpus import CPU_KEY
from rooflab.kernel import COMPILE_SPLIT_SINCE, VJP_KEEPS_OUTPUT_SINCE


def headline_gpu(metrics: pd.DataFrame) -> str:
    """The GPU with timed data of the most kernels, the first such in the table's order on a tie ('' where no GPU has
    any: the CPU is never the GPU paper's headline)."""
    ok = metrics[(metrics["status"] == "ok") & (metrics["gpu"] != CPU_KEY)]
    if ok.empty:
        return ""
    kernels = ok.groupby("gpu", sort=False)["kernel"].nunique()
    return str(kernels.idxmax())


def most_common(df: pd.DataFrame, column: str, absent: str) -> str:
    """The most common value of an integer column, as text; `absent` where the column or its values are missing."""
    values = df[column].dropna() if column in df else pd.Series(dtype=float)
    return str(int(values.mode().iloc[0])) if not values.empty else absent


def timed(metrics: pd.DataFrame, gpu: str) -> pd.DataFrame:
    """Rows the text may claim from: this GPU, correct and timed."""
    ok = metrics["claimable"] if "claimable" in metrics else metrics["status"] == "ok"
    return metrics[ok & (metrics["gpu"] == gpu)]


def largest(ok: pd.DataFrame) -> pd.DataFrame:
    """Per (kernel, dtype, pass), the rows at the largest size measured."""
    return ok[ok["size"] == ok.groupby(["kernel", "dtype", "pass"])["size"].transform("max")]


def verdict(row: pd.Series, base: str) -> str:
    """faster / slower (beyond noise) / tie, in GPU time, of a row against `base`; n/a without a verdict."""
    v = row.get(f"verdict_vs_{base}", "")
    return v if isinstance(v, str) and v else "n/a"


def ours_fixed_costs(metrics: pd.DataFrame, gpu: str) -> pd.DataFrame:
    """The fixed-cost fit (analysis/metrics.fixed_costs) of our Triton kernels on this GPU, every pass."""
    f = fixed_costs(metrics)
    return f[(f["gpu"] == gpu) & (f["impl"] == "triton")]


def _compile_fwd_bwd_before(rows: pd.DataFrame, since: str) -> pd.Series:
    if "timestamp" not in rows:  # rows that say nothing of when they were timed are flagged by nothing
        return pd.Series(False, index=rows.index)
    when = pd.to_datetime(rows["timestamp"], utc=True, errors="coerce", format="ISO8601")
    return (rows["impl"] == "compile") & (rows["pass"] == "fwd+bwd") & (when < pd.Timestamp(since)).fillna(False)


def compile_dropped_output(rows: pd.DataFrame) -> pd.Series:
    """Per row (impl, pass, timestamp): a torch.compile fwd+bwd row timed before VJP_KEEPS_OUTPUT_SINCE, whose
    compiled function returned the gradients alone (so Inductor skipped the forward's output store)."""
    return _compile_fwd_bwd_before(rows, VJP_KEEPS_OUTPUT_SINCE)


def compile_joint_graph(rows: pd.DataFrame) -> pd.Series:
    """Per row (impl, pass, timestamp): a torch.compile fwd+bwd row timed before COMPILE_SPLIT_SINCE, whose forward
    and backward Inductor compiled as one graph (and could fuse, as no training step can)."""
    return _compile_fwd_bwd_before(rows, COMPILE_SPLIT_SINCE)
