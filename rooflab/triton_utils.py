"""Small Triton helpers shared by the kernel files."""
from __future__ import annotations

import functools
import os

import torch
import triton
import triton.testing


def tf32_matmul() -> bool:
    """Whether torch runs float32 products in TF32 now, read as torch.mm reads it through either of torch's APIs:
    ``torch.backends.cuda.matmul.fp32_precision`` (torch >= 2.9; "none" inherits ``torch.backends.fp32_precision``,
    which the attribute resolves) or the legacy ``allow_tf32``, whose read raises once the new API was used."""
    flags = torch.backends.cuda.matmul
    if hasattr(flags, "fp32_precision"):
        return flags.fp32_precision == "tf32"
    return bool(flags.allow_tf32)


def _precision_flags() -> tuple:
    """torch's new-API precision flags, parents before children (torch >= 2.9; empty before it)."""
    b = torch.backends
    flags = (b, b.cuda.matmul, b.cudnn, b.cudnn.conv, b.cudnn.rnn)
    return flags if hasattr(b.cuda.matmul, "fp32_precision") else ()


def set_tf32(on: bool) -> tuple:
    """Set TF32 on or off for float32 products and cuDNN's convolutions and RNNs. Set through the legacy flags,
    which leave every flag of both APIs agreeing (a legacy read raises on a mix the new API can leave); what it read
    first is returned for restore_tf32, through the new API where there is one (its reads never raise)."""
    new = _precision_flags()
    before = ("new", [f.fp32_precision for f in new]) if new else \
        ("legacy", [f.allow_tf32 for f in (torch.backends.cuda.matmul, torch.backends.cudnn)])
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    return before


def restore_tf32(before: tuple) -> None:
    """Undo set_tf32: each flag back to what it read (a flag that read "none" inherits its parent again)."""
    api, values = before
    if api == "new":
        for f, v in zip(_precision_flags(), values):
            f.fp32_precision = v
    else:
        for f, v in zip((torch.backends.cuda.matmul, torch.backends.cudnn), values):
            f.allow_tf32 = v


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
    """Triton needs CUDA tensors on a GPU, CPU tensors under the interpreter, all on one device: say so instead of
    crashing (a launch goes to the current device, not the tensors')."""
    want_cpu = interpreting()
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"Triton kernel needs torch tensors; got {type(t).__name__}")
        if (t.device.type == "cpu") != want_cpu:
            where = "CPU tensors (TRITON_INTERPRET=1 is set)" if want_cpu else "CUDA tensors"
            raise ValueError(f"Triton kernel needs {where}; got a tensor on {t.device}")
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise ValueError(f"Triton kernel needs its tensors on one device; got {sorted(map(str, devices))}")
    if not want_cpu and tensors and tensors[0].device.index not in (None, torch.cuda.current_device()):
        raise ValueError(f"the tensors are on {tensors[0].device}, the current device is cuda:"
                         f"{torch.cuda.current_device()}: call inside torch.cuda.device({tensors[0].device})")


def check_config(config: dict, blocks: tuple[str, ...], optional: tuple[str, ...], who: str,
                 required: tuple[str, ...] = ()) -> None:
    """A forced launch config: ``blocks`` each given, a power of two of at least 16 (tl.dot and tl.arange need
    one); ``required`` given and ``optional`` may be: num_warps a power of two, a flag a bool, any other a positive
    int. A ValueError naming what is wrong, before Triton's own error from inside the kernel."""
    optional = (*required, *optional)
    missing = [k for k in (*blocks, *required) if k not in config]
    unknown = [k for k in config if k not in blocks and k not in optional]
    if missing or unknown:
        raise ValueError(f"{who} config needs {', '.join((*blocks, *required))} (and may give "
                         f"{', '.join(k for k in optional if k not in required)}); "
                         f"missing {missing}, unknown {unknown}, in {config}")
    for k, v in config.items():
        if isinstance(v, bool) and k not in blocks and k not in ("num_warps", "num_stages", "GROUP_M"):
            continue  # a flag (HEAVY_FIRST, WARP_SPECIALIZE)
        pow2, least = k in blocks or k == "num_warps", 16 if k in blocks else 1
        if not isinstance(v, int) or isinstance(v, bool) or v < least or (pow2 and v & (v - 1)):
            what = f"a power of two of at least {least}" if pow2 else "a positive int"
            raise ValueError(f"{who} config: {k} must be {what}, got {v!r}")


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
