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
    if torch.cuda.is_available():
        device_name = torch.cuda.get_device_name()
        try:
            import pynvml

            pynvml.nvmlInit()
            driver = pynvml.nvmlSystemGetDriverVersion()
            driver = driver.decode() if isinstance(driver, bytes) else driver
        except Exception:
            driver = ""
    sha = _git("rev-parse", "HEAD")
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no")) if sha else False
    if not sha:  # a copy of the tree without .git (e.g. shipped to an offline node): trust what the sender said
        sha = os.environ.get("ROOFLAB_GIT_SHA", "unknown")
        dirty = os.environ.get("ROOFLAB_GIT_DIRTY", "") == "1"
    return {
        "git_sha": sha,
        "git_dirty": dirty,
        "host": socket.gethostname(),
        "device_name": device_name,
        "driver": driver,
        "cuda": cuda,
        "torch": torch.__version__,
        "triton": triton_version,
        "python": platform.python_version(),
    }


def provenance(config: dict | None = None) -> dict:
    row = dict(_static())
    row["config_hash"] = config_hash(config or {})
    row["timestamp"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return row
