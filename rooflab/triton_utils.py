"""Small Triton helpers shared by the kernel files."""
from __future__ import annotations

import os

import triton


def interpreting() -> bool:
    """True when Triton runs under its CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def autotune_configs(configs: list[triton.Config]) -> list[triton.Config]:
    """All configs on a GPU; only the first under the interpreter, where autotuning over several fails."""
    return configs[:1] if interpreting() else configs


def check_device(*tensors) -> None:
    """Triton needs CUDA tensors on a GPU, CPU tensors under the interpreter: say so instead of crashing."""
    want_cpu = interpreting()
    for t in tensors:
        if (t.device.type == "cpu") != want_cpu:
            where = "CPU tensors (TRITON_INTERPRET=1 is set)" if want_cpu else "CUDA tensors"
            raise ValueError(f"Triton kernel needs {where}; got a tensor on {t.device}")
