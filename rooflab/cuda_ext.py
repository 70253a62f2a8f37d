"""Hand-written CUDA implementations: whether torch.utils.cpp_extension.load_inline can build them here, and their
builds started in the background at the start of a run."""
from __future__ import annotations

import logging
import os
import shutil
import time

log = logging.getLogger("rooflab.cuda_ext")


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


STALE_LOCK_S = 900  # a build lock this old was left by a killed build (one takes about a minute)


def start_cuda_builds(gpu: str, log_dir: str | os.PathLike = "logs/cuda") -> list[str]:
    """Build every kernel's CUDA extension in the background, at once, from the first job of a run (the ceilings; or
    the first measurement job): an nvcc build takes about a minute, and the other cells are timed meanwhile instead
    of waiting for it in the job of its own kernel. The builder only compiles (the module's ``_cuda()``: no tensor,
    no kernel launch on the device being timed) and runs at the lowest CPU priority. A build already done for the
    current source, or under way (torch's lock file), is not started again; a lock older than STALE_LOCK_S, left by
    a killed build, is removed (torch would wait on it forever). Returns the kernels whose build was started."""
    if gpu == "cpu":
        return []
    import subprocess
    import sys
    from pathlib import Path

    from rooflab.kernel import kernel_names

    if cuda_skip_reason("cuda"):
        return []
    from torch.utils.cpp_extension import _get_build_directory

    started = []
    for name in kernel_names():
        source = Path(__file__).resolve().parent.parent / "kernels" / name / f"{name}.cu"
        if not source.exists():
            continue
        build = Path(_get_build_directory(f"rooflab_{name}_cuda", verbose=False))
        lock = build / "lock"
        if lock.exists() and time.time() - lock.stat().st_mtime > STALE_LOCK_S:
            lock.unlink(missing_ok=True)
            log.warning("removed a stale build lock %s (a killed build's)", lock)
        built = list(build.glob("*.so")) and (build / "cuda.cu").exists() and \
            source.read_text() in (build / "cuda.cu").read_text()  # load_inline puts its includes first
        if built or lock.exists():
            continue
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        code = f"import kernels.{name} as k; k._cuda()"
        with open(Path(log_dir) / f"{name}.log", "w") as fh:
            subprocess.Popen([sys.executable, "-c", code], stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
                             preexec_fn=lambda: os.nice(19), env={
                                 **os.environ, "MAX_JOBS": "4"
                             })
        started.append(name)
    if started:
        log.info("building the CUDA extensions of %s in the background (logs in %s)", ", ".join(started), log_dir)
    return started
