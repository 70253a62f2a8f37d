"""Provenance columns stamped on every row: what code, on what machine, with what software, when."""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import socket
import subprocess
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()
    except (subprocess.SubprocessError, OSError):
        return ""


def config_hash(config: dict) -> str:
    """Short hash of the configuration that shaped a measurement (sorted JSON)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:12]


def git_state() -> tuple[str, bool]:
    """(commit, dirty) of the code that runs.

    ROOFLAB_GIT_SHA (and ROOFLAB_GIT_DIRTY=1) win when set: a snapshot of the tree shipped to an offline node has no
    .git of its own, and may sit inside another checkout whose HEAD says nothing about it (this happened: H200 rows
    were stamped with the enclosing copy's stale HEAD). Otherwise git, but only if this repository is the top level
    of the work tree git finds; else "unknown".
    """
    if os.environ.get("ROOFLAB_GIT_SHA"):
        return os.environ["ROOFLAB_GIT_SHA"], os.environ.get("ROOFLAB_GIT_DIRTY", "") == "1"
    top = _git("rev-parse", "--show-toplevel")
    if not top or Path(top).resolve() != REPO:
        return "unknown", False
    sha = _git("rev-parse", "HEAD")
    return (sha or "unknown"), bool(_git("status", "--porcelain", "--untracked-files=no")) if sha else False


@lru_cache(maxsize=1)
def _static() -> dict:
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except Exception:  # triton is optional on some CPU installs
        triton_version = ""
    cuda = torch.version.cuda or ""
    driver = ""
    device_name = platform.processor() or platform.machine()
    device_index, device_uuid = float("nan"), "cpu"
    if torch.cuda.is_available():
        from rooflab.clocks import device_uuid as uuid_of
        from rooflab.slots import device_index as index_of

        device_name = torch.cuda.get_device_name()
        # which board of the node: nvidia-smi's index (a several-GPU node's slot, rooflab/slots.py) and its UUID
        index = index_of()
        device_index = float("nan") if index is None else index
        try:
            device_uuid = uuid_of(torch.cuda.get_device_properties(torch.cuda.current_device()))
        except Exception:
            device_uuid = ""
        try:
            import pynvml

            pynvml.nvmlInit()
            driver = pynvml.nvmlSystemGetDriverVersion()
            driver = driver.decode() if isinstance(driver, bytes) else driver
        except Exception:
            driver = ""
    sha, dirty = git_state()
    return {
        "git_sha": sha,
        "git_dirty": dirty,
        "host": socket.gethostname(),
        "device_name": device_name,
        "device_index": device_index,
        "device_uuid": device_uuid,
        "driver": driver,
        "cuda": cuda,
        "torch": torch.__version__,
        "triton": triton_version,
        "python": platform.python_version(),
    }


def run_id() -> str:
    """The run a measurement belongs to: its cells are rated against the ceilings of the same run (metrics).

    One DAG invocation is one run: the Snakefile sets ROOFLAB_RUN_ID once, and every job it starts inherits it. A
    job started by hand gets an id of its own (the UTC time and the process)."""
    if not os.environ.get("ROOFLAB_RUN_ID"):
        os.environ["ROOFLAB_RUN_ID"] = new_run_id()
    return os.environ["ROOFLAB_RUN_ID"]


def new_run_id() -> str:
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{now}-{socket.gethostname()[:24]}-{os.getpid()}"


def provenance(config: dict | None = None) -> dict:
    row = dict(_static())
    row["run_id"] = run_id()
    row["config_hash"] = config_hash(config or {})
    row["timestamp"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return row
