"""Reading and writing results: atomic writes, and reads that name the file when it is not ours.

Every file the DAG writes goes through ``atomic_write``: a temporary file in the same folder, then ``os.replace``,
so no reader (or a rerun after a kill) ever sees half a file.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import pandas as pd

# The tidy raw schema: one row per (gpu, kernel, impl, dtype, size, pass). Columns a reader relies on, in groups.
# yapf: disable
RAW_COLUMNS = [
    "gpu", "device_name", "kernel", "impl", "dtype", "size", "problem", "shape", "family", "preset", "pass", "status",
    "error",
    "rel_err", "max_abs_err", "tolerance", "timer", "median_ms", "p20_ms", "p80_ms", "min_ms", "max_ms",
    "mean_ms", "std_ms", "n_samples", "rse_median", "stop_reason", "graph_median_ms", "loop_ms", "enqueue_us",
    "hold_us", "placements", "placement_sd_rel", "instances", "instance_sd_rel", "warm_translations", "flush_buffers",
    "cold_ms", "cell_s",
    "flops", "bytes", "working_set_bytes", "l2_bytes", "l2_ratio", "l2_resident",
    "sm_clock_before_mhz", "sm_clock_after_mhz", "sm_clock_samples_mhz", "sm_clock_samples_min_mhz",
    "sm_clock_samples_max_mhz", "mem_clock_before_mhz", "mem_clock_after_mhz",
    "gpu_temp_before_c", "gpu_temp_after_c", "mem_temp_before_c", "mem_temp_after_c", "power_before_w",
    "power_after_w", "clock_throttled", "compile_fallback", "compile_graphs", "compute_unit", "math_mode",
    "git_sha", "git_dirty", "config_hash", "host", "driver", "cuda", "torch", "triton", "python", "timestamp",
    "run_id", "device_index", "device_uuid",
]
# yapf: enable
# Columns added after results were first published: files written before them read with NaN there, not an error.
LATER_COLUMNS = {
    "loop_ms": float("nan"),
    "enqueue_us": float("nan"),
    "hold_us": float("nan"),
    "placements": 1.0,
    "warm_translations": False,
    "flush_buffers": float("nan"),
    "placement_sd_rel": float("nan"),
    "instances": 1.0,
    "instance_sd_rel": float("nan"),
    "cell_s": float("nan"),  # before cells were timed as a whole
    "compile_graphs": float("nan"),  # before torch.compile's graphs a cell were counted
    "run_id": "",  # before runs were named: a dataset's cells and ceilings read as one run
    "device_index": float("nan"),
    "device_uuid": "",  # before several GPUs a node (rooflab/slots.py)
    # before the SM clock was read between sample batches (rooflab/clocks.during)
    "sm_clock_samples_mhz": float("nan"),
    "sm_clock_samples_min_mhz": float("nan"),
    "sm_clock_samples_max_mhz": float("nan"),
    **{
        f"{what}_{when}_{unit}": float("nan")
        for what, unit in (("gpu_temp", "c"), ("mem_temp", "c"), ("power", "w"))
        for when in ("before", "after")
    }
}
CEILING_COLUMNS = [
    "gpu", "device_name", "ceiling", "unit", "value", "median_ms", "bytes", "flops", "git_sha", "timestamp", "run_id",
    "device_index", "device_uuid"
]
STATUSES = ("ok", "not_timed", "mismatch", "failed", "skipped")


class ResultsError(RuntimeError):
    """A results file that is missing columns, corrupt, or not ours."""


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path beside ``path``; on success it replaces ``path`` in one rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Hidden (leading dot) and ending in .tmp, so no glob for *.parquet ever picks up a half-written file.
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the mode a plain open() would
        with open(tmp, "rb") as fh:  # on disk before the rename, so a crash cannot leave an empty file behind it
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_parquet(df: pd.DataFrame, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def write_text(text: str, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text)


def numpy_strings(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with its text columns as numpy objects. pandas 3 reads parquet text as pyarrow-backed 'str' columns, and
    selecting rows from those costs about 3x numpy's; the analysis selects rows thousands of times a job."""
    text = {c: object for c, t in df.dtypes.items() if isinstance(t, pd.StringDtype)}
    return df.astype(text).copy() if text else df  # the copy joins the columns into one block each dtype


def read_table(path: str | os.PathLike, **kwargs) -> pd.DataFrame:
    """pd.read_parquet for the analysis: text columns as numpy objects (numpy_strings)."""
    return numpy_strings(pd.read_parquet(path, **kwargs))


def read_results(path: str | os.PathLike, columns=RAW_COLUMNS) -> pd.DataFrame:
    """Read a raw/ceilings parquet, failing with the file's name if it is corrupt or lacks our columns."""
    try:
        df = read_table(path)
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise ResultsError(f"{path}: not a readable parquet file ({type(exc).__name__}: {exc}). "
                           f"Delete it and rerun the job that writes it.") from exc
    for col, fill in LATER_COLUMNS.items():
        if col in columns and col not in df.columns:
            df[col] = fill
    if "math_mode" in columns and "math_mode" not in df.columns and {"kernel", "impl", "dtype"} <= set(df.columns):
        df = legacy_math_modes(df)
    if "shape" in columns and "shape" not in df.columns and "problem" in df.columns:
        df = legacy_shapes(df)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ResultsError(f"{path}: not a rooflab results file (missing columns: {', '.join(missing[:8])}"
                           f"{' ...' if len(missing) > 8 else ''}). Delete it and rerun the job that writes it.")
    if "status" in columns:
        unknown = sorted(set(df["status"].astype(str)) - set(STATUSES))
        if unknown:
            raise ResultsError(f"{path}: unknown status value(s) {unknown} (known: {', '.join(STATUSES)}); "
                               f"not a rooflab results file. Delete it and rerun the job that writes it.")
        if "median_ms" in columns:
            ok = df[df["status"] == "ok"]
            t = pd.to_numeric(ok["median_ms"], errors="coerce")
            bad = ok[~((t > 0) & (t < float("inf")))]
            if len(bad):
                r = bad.iloc[0]
                raise ResultsError(f"{path}: {len(bad)} ok row(s) without a finite time > 0 (first: {r['kernel']} "
                                   f"{r['impl']} {r['dtype']} {r['size']} {r['pass']}: median_ms = "
                                   f"{r['median_ms']!r}). Delete it and rerun the job that writes it (the cell "
                                   f"store is checked on every read, so the bad cells are measured again).")
    return df


def legacy_math_modes(df: pd.DataFrame) -> pd.DataFrame:
    """Rows written before the math mode was recorded, read as what ran: every product in its storage dtype's mode,
    except the float32 matmul of our Triton kernel, whose tl.dot ran TF32 (its default then) while torch's ran IEEE
    fp32. That row becomes precision tf32 (compute unit tf32), so no speedup or ranking compares it with IEEE rows."""
    from rooflab.kernel import MATH_MODE

    df = df.copy()
    tf32 = (df["kernel"] == "matmul") & (df["impl"] == "triton") & (df["dtype"] == "float32")
    df.loc[tf32, "dtype"] = "tf32"
    df["math_mode"] = df["dtype"].map(MATH_MODE)
    if "compute_unit" in df:
        product = df["kernel"] == "matmul"
        df.loc[product & (df["dtype"] == "float32"), "compute_unit"] = "fp32"
        df.loc[product & (df["dtype"] == "tf32"), "compute_unit"] = "tf32"
    return df


def legacy_shapes(df: pd.DataFrame) -> pd.DataFrame:
    """Rows written before shapes were recorded: every one a square shape of the sweep of sizes, its problem
    ("8192x8192", "8192x8192x8192") its shape label; the family follows from its number of dimensions."""
    from rooflab.shapes import FAMILIES, SQUARE

    by_rank = {len(dims): family for family, dims in FAMILIES.items()}
    df = df.copy()
    df["shape"] = df["problem"].astype(str)
    df["family"] = df["shape"].map(lambda s: by_rank.get(len(s.split("x")), ""))
    df["preset"] = SQUARE
    for family, names in FAMILIES.items():
        mine = df["family"] == family
        for i, name in enumerate(names):
            col = f"dim_{name.lower()}"
            values = df.loc[mine, "shape"].map(lambda s, i=i: int(s.split("x")[i]))
            df[col] = values.reindex(df.index) if col not in df else df[col].where(~mine, values)
    return df


def read_raw_many(paths) -> pd.DataFrame:
    frames = [read_results(p) for p in paths]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=RAW_COLUMNS)
