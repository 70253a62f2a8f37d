"""SM and memory clocks, temperatures and power from NVML, read before and after each cell, and the SM clock
between its sample batches (empty on the CPU).

A cell measured while the SM clock sat well below the card's maximum (power or thermal throttling, or an idle
clock that never ramped) is flagged, so its number is not taken as the card's capability.
"""
from __future__ import annotations

import math
import statistics
from functools import lru_cache

THROTTLE_FRACTION = 0.75  # NVBench discards samples under 75 % of the default SM clock


def device_uuid(props) -> str:
    """nvidia-smi's name of a torch device (its properties): GPU-<uuid>."""
    return f"GPU-{props.uuid}"


@lru_cache(maxsize=1)
def _handle():
    try:
        import pynvml

        pynvml.nvmlInit()
        import torch

        index = torch.cuda.current_device() if torch.cuda.is_available() else 0
        try:  # by UUID: NVML's indices ignore CUDA_VISIBLE_DEVICES, which a job on a several-GPU node narrows
            return pynvml.nvmlDeviceGetHandleByUUID(device_uuid(torch.cuda.get_device_properties(index)))
        except Exception:
            return pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:
        return None


def read() -> dict[str, float]:
    """Current SM and memory clocks in MHz, the SM clock's maximum, the GPU's and its memory's temperature (C) and
    the board's power draw (W); NaN where NVML (or the sensor) is absent."""
    h = _handle()
    nan = float("nan")
    if h is None:
        return {"sm": nan, "mem": nan, "sm_max": nan, "gpu_temp": nan, "mem_temp": nan, "power": nan}
    import pynvml

    def get(fn, *a):
        try:
            return float(fn(h, *a))
        except Exception:
            return nan

    return {
        "sm": get(pynvml.nvmlDeviceGetClockInfo, pynvml.NVML_CLOCK_SM),
        "mem": get(pynvml.nvmlDeviceGetClockInfo, pynvml.NVML_CLOCK_MEM),
        "sm_max": get(pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_SM),
        "gpu_temp": get(pynvml.nvmlDeviceGetTemperature, pynvml.NVML_TEMPERATURE_GPU),
        "mem_temp": _memory_temperature(h),
        "power": get(pynvml.nvmlDeviceGetPowerUsage) / 1e3
    }


def sm_mhz() -> float:
    """The SM clock now (MHz), one NVML call (a few microseconds): read between sample batches and paired rounds, so
    a row says what clock its samples ran at; NaN without NVML."""
    h = _handle()
    if h is None:
        return float("nan")
    import pynvml

    try:
        return float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
    except Exception:
        return float("nan")


def during(readings) -> dict[str, float]:
    """The row's columns for SM clock readings taken while its samples ran: median, least and most (MHz)."""
    x = [v for v in readings if v == v]  # NaN dropped
    if not x:
        nan = float("nan")
        return {"sm_clock_samples_mhz": nan, "sm_clock_samples_min_mhz": nan, "sm_clock_samples_max_mhz": nan}
    return {
        "sm_clock_samples_mhz": float(statistics.median(x)),
        "sm_clock_samples_min_mhz": float(min(x)),
        "sm_clock_samples_max_mhz": float(max(x))
    }


def _memory_temperature(h) -> float:
    """The HBM's temperature (C) through NVML's field values; NaN where the board does not report it."""
    try:
        import pynvml

        (field, ) = pynvml.nvmlDeviceGetFieldValues(h, [pynvml.NVML_FI_DEV_MEMORY_TEMP])
        if field.nvmlReturn != pynvml.NVML_SUCCESS:
            return float("nan")
        return float(field.value.uiVal)
    except Exception:
        return float("nan")


def prefixed(when: str) -> dict[str, float]:
    c = read()
    out = {
        f"sm_clock_{when}_mhz": c["sm"],
        f"mem_clock_{when}_mhz": c["mem"],
        f"gpu_temp_{when}_c": c["gpu_temp"],
        f"mem_temp_{when}_c": c["mem_temp"],
        f"power_{when}_w": c["power"]
    }
    if when == "after":
        out["sm_clock_max_mhz"] = c["sm_max"]
    return out


def throttled(row: dict, fraction: float = THROTTLE_FRACTION) -> bool:
    """True when the SM clock after the cell sat under ``fraction`` of its maximum (False when unknown)."""
    sm, sm_max = row.get("sm_clock_after_mhz", math.nan), row.get("sm_clock_max_mhz", math.nan)
    if any(map(math.isnan, (sm, sm_max))) or sm_max <= 0:
        return False
    return sm < fraction * sm_max
