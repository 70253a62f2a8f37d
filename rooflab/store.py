"""The cell store: results/raw/{gpu}/.cells/{kernel}.jsonl, one JSON row per measured cell, appended as it finishes.

A killed or failed sweep resumes from it, and a config change measures only the cells it adds. Nothing in it is
trusted on reuse: every line is checked against one schema (``row_problem``) when the store is read. A bad line
(cut by a kill, not a row, a missing key, a wrong type, an impossible time, an unknown status) moves to
``{kernel}.quarantine.jsonl`` beside it with its reason, is named in a one-line warning (file and line), and its
cell is measured again. Reading also compacts the store: one line per cell (the newest), so reruns that re-check
skipped or failed cells do not make it grow.
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
from pathlib import Path

from rooflab.io import STATUSES, atomic_path

log = logging.getLogger("rooflab.store")

KEY_FIELDS = {"impl": str, "dtype": str, "pass": str}
TIME_FIELDS = ("median_ms", "p20_ms", "p80_ms", "min_ms", "max_ms")
# Statuses that are measured again on every run rather than reused: failed cells (the fault may be gone) and skipped
# ones (cheap to re-check, and the reason may be gone: nvcc installed, more device memory free). A failed row marked
# HUNG is the exception: its cell stopped the process once (rooflab/lifeline.stall_watch), and would again.
REMEASURED = ("failed", "skipped")
HUNG = "_hung"


def hung_row(cell, kernel: str, error: str, **extra) -> dict:
    """The stored row of a cell that never ended (a rooflab.cell.Cell): failed, with ``error``, marked HUNG so that
    reruns reuse it instead of hanging on it again (remove its line, or reuse_cells: false, to try it again)."""
    from rooflab.kernel import MATH_MODE, math_mode_ran
    from rooflab.shapes import label

    return {
        "kernel": kernel,
        "impl": cell.impl,
        "dtype": cell.dtype,
        "size": cell.size,
        "shape": label(cell.shape) if cell.shape else None,
        "pass": cell.pass_,
        "preset": cell.preset,
        "math_mode": math_mode_ran(cell.dtype) if cell.dtype in MATH_MODE else None,
        "status": "failed",
        "error": error,
        HUNG: True,
        **extra
    }


def store_path(out: str | os.PathLike) -> Path:
    """results/raw/{gpu}/{kernel}.parquet -> results/raw/{gpu}/.cells/{kernel}.jsonl"""
    out = Path(out)
    return out.parent / ".cells" / f"{out.stem}.jsonl"


def quarantine_path(store: Path) -> Path:
    return store.with_name(f"{store.stem}.quarantine.jsonl")


def _number(value) -> float | None:
    """A JSON number as a float (bools are not numbers), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def row_problem(row, kernel: str | None = None) -> str | None:
    """Why a stored line cannot be reused as a measured row, or None if it can."""
    if not isinstance(row, dict):
        return f"not a row (a JSON {type(row).__name__})"
    missing = [k for k in ("kernel", "impl", "dtype", "size", "pass", "status") if k not in row]
    if missing:
        return f"missing key(s) {missing}"
    for key, kind in KEY_FIELDS.items():
        if not isinstance(row[key], kind) or not row[key]:
            return f"{key} = {row[key]!r} is not a non-empty string"
    size = _number(row["size"])
    if row.get("shape") is not None:  # a shape's row: its size is N of a square shape, NaN (null) for another
        if not isinstance(row["shape"], str) or not re.fullmatch(r"[1-9][0-9]*(x[1-9][0-9]*)+", row["shape"]):
            return f"shape = {row['shape']!r} is not a shape label like 4096x4097"
        if row["size"] is not None and (size is None or (math.isfinite(size) and (size != int(size) or size < 0))):
            return f"size = {row['size']!r} is neither a non-negative integer nor null"
    elif size is None or size != int(size) or size < 0:
        return f"size = {row['size']!r} is not a non-negative integer"
    if kernel is not None and row["kernel"] != kernel:
        return f"kernel = {row['kernel']!r} in the store of {kernel!r}"
    if row["status"] not in STATUSES:
        return f"unknown status {row['status']!r} (known: {', '.join(STATUSES)})"
    if row["status"] != "ok":
        return None
    times = {k: _number(row.get(k)) for k in TIME_FIELDS}
    bad = [k for k, v in times.items() if v is None or not math.isfinite(v) or v <= 0]
    if bad:
        return f"an ok row needs finite times > 0: {', '.join(f'{k} = {row.get(k)!r}' for k in bad)}"
    if not times["min_ms"] <= times["p20_ms"] <= times["median_ms"] <= times["p80_ms"] <= times["max_ms"]:
        return "an ok row needs min <= p20 <= median <= p80 <= max: " + \
            ", ".join(f"{k} = {times[k]:g}" for k in TIME_FIELDS)
    n = _number(row.get("n_samples"))
    if n is None or n < 1:
        return f"an ok row needs n_samples >= 1, got {row.get('n_samples')!r}"
    return None


def compact(path: Path, kernel: str | None = None) -> list[dict]:
    """Check every line of the store; quarantine the bad ones (with a one-line warning naming file and line) and
    rewrite the store, in one rename, with the newest good line of each cell. Returns those rows."""
    if not path.exists():
        return []
    keep: dict[tuple, str] = {}  # newest line per cell, any identity (an edit reverted later can reuse them)
    quarantined = []
    text = path.read_text(errors="replace")
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            problem = f"not JSON ({exc.msg}; a line cut by a kill?)"
        else:
            problem = row_problem(row, kernel)
        if problem:
            log.warning("%s:%d: %s; quarantined to %s, that cell is measured again", path, number, problem,
                        quarantine_path(path).name)
            quarantined.append(json.dumps({"file": str(path), "line": number, "problem": problem, "text": line}))
            continue
        key = cell_key(row)
        keep.pop(key, None)  # re-inserted last: the newest line wins and keeps its order
        keep[key] = line
    if quarantined:
        with open(quarantine_path(path), "a") as fh:
            fh.write("".join(q + "\n" for q in quarantined))
    compacted = "".join(line + "\n" for line in keep.values())
    if compacted != text:
        with atomic_path(path) as tmp:
            Path(tmp).write_text(compacted)
    return [json.loads(line) for line in keep.values()]


def load(path: Path, identity: str, kernel: str | None = None) -> dict:
    """The reusable rows of the store, by cell key (impl, dtype, shape, pass): after ``compact``, the rows written
    under this ``identity`` (same kernel code, measurement code and timing settings) that did not fail or skip, and
    those of cells that hung (``hung_row``), each named in a warning."""
    rows = {
        cell_key(r): r
        for r in compact(path, kernel)
        if r.get("_identity") == identity and (r["status"] not in REMEASURED or r.get(HUNG))
    }
    for key, r in rows.items():
        if r.get(HUNG):
            log.warning(
                "cell %s hung in an earlier run and is not run again (it stays failed: %s); remove its line from %s "
                "or set reuse_cells: false to try it", " ".join(map(str, key)), r.get("error"), path)
    return rows


def cell_key(row: dict) -> tuple:
    """(impl, dtype, shape label, pass): rooflab.cell.Cell.key of a stored row (a line from before shapes: its
    size, as a string)."""
    return (row["impl"], row["dtype"], row.get("shape") or str(int(row["size"])), row["pass"])
