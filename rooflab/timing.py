"""Timing: adaptive sampling with an L2 flush, device-side events, and a CUDA-graph mode.

Why our own loop and not only ``triton.testing.do_bench``: do_bench flushes a fixed 256 MB buffer and samples for a
fixed time. We flush a buffer sized from the device's own L2 (2x, so nothing of the working set survives) and stop
when the relative standard error of the median falls under a target (0.5 % by default) or a time cap is reached,
recording which. The CUDA-graph mode uses ``triton.testing.do_bench_cudagraph`` as is (launch overhead removed; no
flush, so it is reported beside, never instead of, the flushed time).

The statistics and the stopping rule are pure functions over a list of samples, so they are tested with synthetic
timers on the CPU.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np


@dataclass(frozen=True)
class TimingConfig:
    warmup_ms: float = 25.0  # warm-up by time, not count
    min_samples: int = 10
    max_samples: int = 2000
    target_rse: float = 0.005  # relative standard error of the median
    max_time_s: float = 2.0  # cap on measured + flush time per cell
    flush_l2: bool = True
    cudagraph: bool = True

    @classmethod
    def from_config(cls, d: dict | None) -> "TimingConfig":
        d = dict(d or {})
        fields = cls.__dataclass_fields__
        return cls(**{k: d[k] for k in fields if k in d})


def rse_of_median(samples) -> float:
    """Relative standard error of the median.

    Uses the asymptotic standard error of the median of a sample, sqrt(pi/2) * sigma / sqrt(n), with sigma estimated
    robustly from the inter-quartile range (IQR / 1.349) so one outlier (an interrupt, a clock step) does not dominate.
    A zero IQR (timer ticks coarser than the spread: half the samples equal) falls back to the median absolute
    deviation, not to the standard deviation, which one outlier would blow up; when that is zero too, more than
    half the samples sit on the median and it is known to the timer's resolution (0).
    """
    x = np.asarray(samples, dtype=float)
    n = x.size
    if n < 2:
        return math.inf
    med = float(np.median(x))
    if med <= 0:
        return math.inf
    q75, q25 = np.percentile(x, [75, 25])
    sigma = (q75 - q25) / 1.349
    if sigma == 0:
        sigma = 1.4826 * float(np.median(np.abs(x - med)))
    return math.sqrt(math.pi / 2) * sigma / math.sqrt(n) / med


def stop_reason(samples, elapsed_s: float, cfg: TimingConfig) -> str | None:
    """Why sampling should stop now ('rse', 'time_cap', 'max_samples'), or None to go on."""
    n = len(samples)
    if n >= cfg.min_samples and rse_of_median(samples) < cfg.target_rse:
        return "rse"
    if n >= cfg.max_samples:
        return "max_samples"
    if elapsed_s >= cfg.max_time_s and n >= min(cfg.min_samples, 3):
        return "time_cap"
    return None


def summarize(samples_ms) -> dict:
    """Per-cell summary columns (milliseconds)."""
    x = np.asarray(samples_ms, dtype=float)
    p20, p50, p80 = np.percentile(x, [20, 50, 80])
    return {
        "median_ms": float(p50), "p20_ms": float(p20), "p80_ms": float(p80),
        "min_ms": float(x.min()), "max_ms": float(x.max()), "mean_ms": float(x.mean()),
        "std_ms": float(x.std(ddof=1)) if x.size > 1 else 0.0, "n_samples": int(x.size),
        "rse_median": rse_of_median(x),
    }


class Timer(Protocol):
    name: str

    def sample(self, fn: Callable[[], object], n: int) -> list[float]:
        """Run fn n times (each preceded by the L2 flush where applicable) and return n times in ms."""

    def warmup(self, fn: Callable[[], object], warmup_ms: float) -> None: ...


class HostTimer:
    """Wall-clock timer for the CPU (no L2 flush: the CPU path keeps the schema, not GPU semantics)."""

    name = "host"

    def warmup(self, fn, warmup_ms):
        t0 = time.perf_counter()
        fn()
        while (time.perf_counter() - t0) * 1e3 < warmup_ms:
            fn()

    def sample(self, fn, n):
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
        return out


class CudaEventTimer:
    """Device-side timing with one pair of CUDA events per sample, the L2 flushed before each."""

    name = "cuda_event"

    def __init__(self, flush_l2: bool = True):
        import torch

        self.torch = torch
        l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
        self.l2_bytes = int(l2)
        # Twice the L2, so an LRU-ish cache keeps none of the previous sample's working set.
        self.flush_buffer = torch.empty(max(2 * self.l2_bytes, 1 << 20) // 4, dtype=torch.int32,
                                        device="cuda") if flush_l2 else None

    def _flush(self):
        if self.flush_buffer is not None:
            self.flush_buffer.zero_()

    def warmup(self, fn, warmup_ms):
        torch = self.torch
        fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        while (time.perf_counter() - t0) * 1e3 < warmup_ms:
            fn()
        torch.cuda.synchronize()

    def sample(self, fn, n):
        torch = self.torch
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for s, e in zip(starts, ends):
            self._flush()
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def measure(fn: Callable[[], object], timer: Timer, cfg: TimingConfig,
            clock: Callable[[], float] = time.perf_counter) -> dict:
    """Warm up, then sample in growing batches until the stopping rule fires. Returns the summary + stop_reason."""
    timer.warmup(fn, cfg.warmup_ms)
    samples: list[float] = []
    t0 = clock()
    batch = cfg.min_samples
    while True:
        samples += timer.sample(fn, batch)
        reason = stop_reason(samples, clock() - t0, cfg)
        if reason:
            break
        batch = min(max(batch, len(samples) // 2), cfg.max_samples - len(samples))
    out = summarize(samples)
    out["stop_reason"] = reason
    out["timer"] = timer.name
    return out


def cudagraph_median_ms(fn: Callable[[], object]) -> float:
    """Median time per call with launch overhead removed (triton's do_bench_cudagraph; no L2 flush)."""
    import triton.testing

    return float(triton.testing.do_bench_cudagraph(fn, rep=25, return_mode="median"))
