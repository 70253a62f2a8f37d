"""Small Triton helpers shared by the kernel files."""
from __future__ import annotations

import functools
import os

import torch
import triton
import triton.testing


def interpreting() -> bool:
    """True when Triton runs under its CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def autotune_configs(configs: list[triton.Config]) -> list[triton.Config]:
    """All configs on a GPU; only the first under the interpreter, where autotuning over several fails."""
    return configs[:1] if interpreting() else configs


# The autotuners' timing: 25 ms of repeats per config instead of triton's 100 (warm-up 5 ms, not 25) ranks
# configs 5-30 % apart as well; on the H200 it saved no measurable time: compiling the configs dominates.
AUTOTUNE_WARMUP_MS, AUTOTUNE_REP_MS = 5, 25

COMPILE_ONLY = False  # set in a compile lane (experiments/warm.py): the autotuners compile every config, time none


def autotune_bench(kernel_call, quantiles):
    """``do_bench`` for ``triton.autotune(do_bench=...)``: shorter than triton's default, the same statistic. In a
    compile lane one call (which there compiles and launches nothing) and no timing: every config gets compiled."""
    if COMPILE_ONLY:
        kernel_call()
        return [1.0] * len(quantiles) if quantiles else 1.0
    return triton.testing.do_bench(kernel_call, warmup=AUTOTUNE_WARMUP_MS, rep=AUTOTUNE_REP_MS, quantiles=quantiles)


@functools.lru_cache(maxsize=None)
def device_capability(device: torch.device) -> tuple[int, int]:
    """torch.cuda.get_device_capability, once per device (a wrapper asks at every call)."""
    return torch.cuda.get_device_capability(device)


@functools.lru_cache(maxsize=None)
def multiprocessor_count(device: torch.device) -> int:
    """The device's SM count, once per device (get_device_properties costs microseconds a call)."""
    return torch.cuda.get_device_properties(device).multi_processor_count


def check_device(*tensors) -> None:
    """Triton needs CUDA tensors on a GPU, CPU tensors under the interpreter: say so instead of crashing."""
    want_cpu = interpreting()
    for t in tensors:
        if (t.device.type == "cpu") != want_cpu:
            where = "CPU tensors (TRITON_INTERPRET=1 is set)" if want_cpu else "CUDA tensors"
            raise ValueError(f"Triton kernel needs {where}; got a tensor on {t.device}")


# Programmatic dependent launch (Hopper and newer): a kernel launched with launch_pdl=True may start while the one
# before it on the stream finishes; gdc_wait() in it blocks until that one's writes are visible, and
# gdc_launch_dependents() in the one before lets it start. Triton's own inline PTX; no-ops where this Triton has none.
try:
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait  # noqa: F401
    HAS_GDC = True
except ImportError:  # pragma: no cover  an older Triton: PDL is never used (pdl_ok)
    HAS_GDC = False

    @triton.jit
    def gdc_wait():
        pass

    @triton.jit
    def gdc_launch_dependents():
        pass


def pdl_ok(device: torch.device) -> bool:
    """Whether kernels on ``device`` may be launched with launch_pdl=True: this Triton has gdc_wait, a Hopper or newer
    GPU, not the interpreter (which runs no inline PTX)."""
    return HAS_GDC and device.type == "cuda" and not interpreting() and device_capability(device)[0] >= 9
