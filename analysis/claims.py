"""What the paper and the figures may claim about a cell: which time frame a number is in, which implementations
are the fastest (a tie named as a tie), and which cells sit above their roof. One module, so that the text, the
tables and the figures make the same claim.

Frames: every time or speedup is in one of three (analysis/metrics.FRAMES), and says which:
    gpu    median_ms        GPU time: one call, the stream held while the host enqueues it, L2 flushed, launch hidden
    graph  graph_median_ms  CUDA graph: the call replayed from a graph
    loop   loop_ms          Python loop: back-to-back eager calls, launch overhead included
On the CPU the median is host time (one call, the host's clock) and there is no CUDA graph.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.metrics import ROOF_SIGMA, noise_floor
from rooflab.gpus import CPU_KEY
from rooflab.kernel import IMPL_LABEL

FRAME_LABEL = {"gpu": "GPU time", "graph": "CUDA graph", "loop": "Python loop"}
CPU_FRAME_LABEL = {"gpu": "host time", "loop": "Python loop"}
# What the frame means, for captions and the method section
FRAME_MEANING = {
    "gpu": "one call, stream held, L2 flushed, launch hidden",
    "graph": "the call replayed from a CUDA graph",
    "loop": "back-to-back calls from Python, launch included"
}
# A quantity's macro prefix per frame: \GeluTritonSpeedupBf, \GeluTritonGraphSpeedupBf, \GeluTritonLoopSpeedupBf
FRAME_TAG = {"gpu": "", "graph": "Graph", "loop": "Loop"}
FRAME_WORDS = tuple(FRAME_LABEL.values()) + tuple(CPU_FRAME_LABEL.values())
NO_FRAME = "in no time frame"  # what a caption of counts (launches, operators) says instead


def speedup_column(frame: str, base: str) -> str:
    """The metrics column of a speedup over `base` (builtin | naive) in `frame`."""
    return f"speedup_vs_{base}" if frame == "gpu" else f"{frame}_speedup_vs_{base}"


def split_devices(metrics: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(GPU rows, CPU rows): the GPU paper holds GPU data only; the CPU's go to a section of their own."""
    cpu = metrics["gpu"] == CPU_KEY
    return metrics[~cpu], metrics[cpu]


def tied_best(cell: pd.DataFrame, col: str = "median_ms") -> pd.DataFrame:
    """The fastest row of one cell (one kernel, precision, size and pass) and every row tied with it, fastest first.

    Tied: slower than the fastest by no more than the verdict's noise (analysis/aa_floors.noise_floor: three combined
    standard errors of the two medians, at least 2 %, 10 % under the short-cell threshold, and at least the run's
    A/A floor of the frame and class). 65.2 us against
    65.2 us is a tie, never 'the fastest'."""
    # positions, not labels (a frame may repeat index labels), and the two columns it needs, then one take of rows
    vals = cell[col].to_numpy(dtype=float, na_value=np.nan)
    present = np.flatnonzero(~np.isnan(vals))
    order = present[np.argsort(vals[present], kind="stable")]
    if not len(order):
        return cell.iloc[order]
    column = lambda name: cell[name].to_numpy(dtype=float, na_value=np.nan)[order]  # noqa: E731
    rse = column("rse_median") if "rse_median" in cell else np.full(len(order), np.nan)
    floors = {c: column(c) for c in cell if str(c).startswith("aa_floor_")}  # the run's A/A floors
    bound = {"bound": cell["bound"].astype(str).to_numpy()[order]} if "bound" in cell else {}
    narrow = pd.DataFrame({"median_ms": column("median_ms"), "rse_median": rse, **floors, **bound})
    noise = noise_floor(narrow, np.full(len(order), rse[0]), base_ms=np.full(len(order), vals[order[0]]))
    g = cell.iloc[order[vals[order] / vals[order[0]] - 1 <= noise]]
    return g if "rse_median" in g else g.assign(rse_median=np.nan)


def impl_names(impls, labels: dict | None = None) -> str:
    """'Triton (ours)', 'Triton (ours) and torch.compile', 'a, b and c'."""
    names = [(labels or IMPL_LABEL).get(i, i) for i in impls]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def best_label(cell: pd.DataFrame, labels: dict | None = None) -> str:
    """The fastest implementation of a cell, or every one tied with it: 'Triton (ours) and torch.compile (tie)'."""
    best = tied_best(cell)
    if best.empty:
        return ""
    names = impl_names(list(best["impl"]), labels)
    return names if len(best) == 1 else f"{names} (tie)"


def over_roof(df: pd.DataFrame) -> pd.Series:
    """Rows whose rate exceeds their own run's measured roof: drawn above the roof line by a figure, so listed by
    findings() (the figures mark them and draw no other point above a roof)."""
    return df["roofline_fraction_measured"].astype(float) > 1


# Why a CPU cell can sit above its measured roof (by whether it is compute-bound): nothing of a GPU's applies.
CPU_ABOVE_ROOF = {
    False: ("working set served partly from the CPU's caches, which the host timer does not flush: the copy ceiling "
            "is a large copy through main memory"),
    True: ("faster than every GEMM the ceilings job timed on this CPU in this mode: the compute ceiling is a measured "
           "GEMM, not the hardware's peak"),
}
FINDING_COLUMNS = [
    "gpu", "kernel", "impl", "dtype", "size", "pass", "bound", "achieved", "roof", "unit", "excess_pct", "se_pct",
    "beyond_noise", "reason"
]


def findings(metrics: pd.DataFrame) -> pd.DataFrame:
    """Every claimable cell whose rate exceeds its own run's measured roof (roofline_fraction_measured > 1): those
    beyond ROOF_SIGMA standard errors (metrics' above_roof, with its reason) and those within noise of the roof.
    A figure draws no point above its roof that is not listed here.

    achieved and roof are in the unit of the roof that binds: GB/s for a memory-bound cell (the roof is the
    bandwidth the run's copy reached, as the intensity sets it), TFLOP/s for a compute-bound one."""
    ok = metrics["claimable"] if "claimable" in metrics else metrics["status"] == "ok"
    d = metrics[ok & over_roof(metrics)]
    if d.empty:
        return pd.DataFrame(columns=FINDING_COLUMNS)
    memory = (d["bound"] == "memory").to_numpy()
    roof_tflops = d["attainable_tflops_measured"].to_numpy(dtype=float)
    ai = d["arithmetic_intensity"].to_numpy(dtype=float)
    beyond = d["above_roof"].astype(bool) if "above_roof" in d else pd.Series(True, index=d.index)
    reason = d["above_roof_reason"] if "above_roof_reason" in d else pd.Series("", index=d.index)
    cpu = (d["gpu"] == CPU_KEY).to_numpy()
    if cpu.any():  # the metrics' reasons speak of a GPU (its L2 flush, HBM, cuBLAS): a CPU's are its own
        reason = pd.Series(np.where(cpu, [CPU_ABOVE_ROOF[b == "compute"] for b in d["bound"]], reason), index=d.index)
    rse = d["rse_median"] if "rse_median" in d else pd.Series(np.nan, index=d.index)
    out = pd.DataFrame({
        "gpu":
        d["gpu"],
        "kernel":
        d["kernel"],
        "impl":
        d["impl"],
        "dtype":
        d["dtype"],
        "size":
        d["size"],
        "pass":
        d["pass"],
        "bound":
        d["bound"],
        "achieved":
        np.where(memory, d["achieved_gbps"], d["achieved_tflops"]),
        "roof":
        np.where(memory, roof_tflops * 1e3 / ai, roof_tflops),
        "unit":
        np.where(memory, "GB/s", "TFLOP/s"),
        "excess_pct":
        100 * (d["roofline_fraction_measured"] - 1),
        "se_pct":
        100 * rse.astype(float),
        "beyond_noise":
        beyond.to_numpy(),
        "reason":
        np.where(beyond,
                 reason.fillna("").astype(str),
                 f"within {ROOF_SIGMA:g} standard errors of the roof: at it, within noise")
    })
    return out.sort_values(["gpu", "beyond_noise", "kernel", "impl", "dtype", "size"],
                           ascending=[True, False, True, True, True, True]).reset_index(drop=True)


def compute_bound(rows: pd.DataFrame) -> bool:
    """Whether a kernel's rows are mostly compute-bound at their largest size (metrics' `bound`, the roofline's
    verdict): its figure then rates it in TFLOP/s against the compute roofs, not in GB/s against the memory wall,
    and the caption says so."""
    if rows.empty or "bound" not in rows:
        return False
    big = rows[rows["size"] == rows.groupby(["dtype", "pass"])["size"].transform("max")]
    return bool((big["bound"] == "compute").mean() > 0.5)
