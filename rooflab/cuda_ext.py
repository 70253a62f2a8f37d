"""Hand-written CUDA implementations: whether torch.utils.cpp_extension.load_inline can build them here."""
from __future__ import annotations

import os
import shutil


def cuda_skip_reason(device: str) -> str | None:
    """Why the CUDA extension cannot be built or run here, or None."""
    if device != "cuda":
        return f"hand-written CUDA needs an NVIDIA GPU (device is {device})"
    from torch.utils.cpp_extension import CUDA_HOME, is_ninja_available

    nvcc = shutil.which("nvcc") or (CUDA_HOME and os.path.join(CUDA_HOME, "bin", "nvcc"))
    if not nvcc or not os.path.exists(nvcc):
        return "no nvcc found (not on PATH, CUDA_HOME unset): cannot compile the CUDA extension"
    if not is_ninja_available():
        return "ninja not installed: torch.utils.cpp_extension.load_inline needs it to compile the CUDA extension"
    return None
