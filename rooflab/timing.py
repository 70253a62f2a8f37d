"""Timing: adaptive sampling with an L2 flush, device-side events, a held stream, a CUDA-graph mode and a loop mode.

The three times per cell (``median_ms``, ``graph_median_ms``, ``loop_ms``) and how each is taken: rooflab/timers.py.

Input placements: where a cell's buffers sit in device memory moves its time, by a fixed offset per allocation (up
to 20 % at 1024^2 and 2 % at 8192^2 on the H200). ``measure`` therefore takes a list of closures over input sets at
distinct addresses and rotates the samples (and the warm-up and loop calls) through them (``Rotation``); the sweep
builds ``timing.placements`` of them per cell. The CUDA-graph time replays the first set only (a graph holds fixed
addresses). Most of a small cell's offset is address translation: whether the translations of its buffers survived
the flush. ``timing.warm_translations`` (off by default) has ``Rotation.warm`` read one element of every 64 KiB of
the next call's buffers after each flush; on the H200 that took six allocations of a 1024^2 add from 18 % apart to
1.7 %, and the small cells' spread between processes from a median of 11 % to 5 %, leaving cells of 8192^2 as they
were. ``timing.flush_buffers`` rotates several flush buffers (it did not help; kept for such probes).

Instances: one start of a measurement (its warm-up, hold and outputs) draws an offset of a fraction of a
microsecond that its samples share, so ``timing.instances`` pools the samples of several fresh starts (8 on a GPU:
three processes then agree within 0.91 % on every cell of 50 us and more; docs/archive/performance-rounds.md).

Why our own loop and not only ``triton.testing.do_bench``: do_bench flushes a fixed 256 MB buffer, does not hold the
stream, and samples for a fixed time. We stop when the relative standard error of the median falls under a target
(0.5 % by default) or a time cap is reached, recording which.

The statistics and the stopping rule are pure functions over a list of samples, so they are tested with synthetic
timers on the CPU.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from rooflab.config import schema_defaults
from rooflab.timers import (FLUSH_MODES, HOLD_MARGIN_US, HOLD_MAX_US, TOUCH_STRIDE_BYTES,  # noqa: F401 (re-exported)
                            CudaEventTimer, HostTimer, Rotation, Timer, _loop_ms, hold_us_for, tensors_in, timer_for,
                            touch_pages)

# The defaults are config/schema.yaml's (timing.*), read once: the one place a timing default is written, so a bare
# TimingConfig() times as the validated config of a run that sets no timing key does (tests/test_config.py).
_DEFAULT = schema_defaults()["timing"]


@dataclass(frozen=True)
class TimingConfig:
    warmup_ms: float = float(_DEFAULT["warmup_ms"])  # warm-up by time, not count
    min_samples: int = int(_DEFAULT["min_samples"])
    max_samples: int = int(_DEFAULT["max_samples"])
    target_rse: float = float(_DEFAULT["target_rse"])  # relative standard error of the median
    max_time_s: float = float(_DEFAULT["max_time_s"])  # cap on measured + flush time per cell
    min_time_s: float = float(_DEFAULT["min_time_s"])  # sample this long, however small the error (stop_reason)
    instances: int = int(_DEFAULT["instances"])  # fresh starts (outputs, warm-up, hold) a cell's samples pool (measure)
    flush_l2: bool = bool(_DEFAULT["flush_l2"])
    cudagraph: bool = bool(_DEFAULT["cudagraph"])
    flush_mode: str = str(_DEFAULT["flush_mode"])  # evict the L2 by reading a buffer (no dirty lines) or "write"
    hold_stream: bool = bool(_DEFAULT["hold_stream"])  # spin before each sample: host launch cost not timed (NVBench)
    loop_ms: float = float(_DEFAULT["loop_ms"])  # length of the back-to-back loop that gives loop_ms (0: not measured)
    placements: int = int(_DEFAULT["placements"])  # input sets at distinct addresses a cell rotates through (Rotation)
    flush_buffers: int = int(_DEFAULT["flush_buffers"])  # flush buffers at distinct addresses samples rotate through
    warm_translations: bool = bool(_DEFAULT["warm_translations"])  # after each flush, touch every 64 KiB (Rotation)
    rewarm_ms: float = float(_DEFAULT["rewarm_ms"])  # warm-up of each start after the first (measure)
    small_cell_us: float = float(_DEFAULT["small_cell_us"])  # cells faster than this stop at small_target_rse
    small_target_rse: float = float(_DEFAULT["small_target_rse"])
    min_instances: int = int(_DEFAULT["min_instances"])  # starts always run; 0: all ``instances`` (measure)
    instances_target_rse: float = float(_DEFAULT["instances_target_rse"])  # more starts stop under this (measure)

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
    """Why sampling should stop now ('rse', 'time_cap', 'max_samples'), or None to go on.

    The standard error treats the samples as independent draws. Samples taken back to back are not: a cell of
    60 us reaches the target in about 3 ms, and whatever moves the card's memory system over longer times moves
    all of them together, so two such cells disagree by more than their standard errors say. ``min_time_s`` keeps
    sampling until the samples span at least that long (do_bench samples for 100 ms)."""
    n = len(samples)
    if n >= cfg.min_samples and rse_of_median(samples) < cfg.target_rse and elapsed_s >= cfg.min_time_s:
        return "rse"
    if n >= cfg.max_samples:
        return "max_samples"
    if elapsed_s >= cfg.max_time_s and n >= min(cfg.min_samples, 3):
        return "time_cap"
    return None


def placement_sd_rel(samples_ms, placements: int) -> float:
    """The relative standard deviation between the placements' medians (sample i came from placement i % placements,
    as ``measure`` rotates them, in whole rounds); NaN for one placement or fewer samples than placements."""
    x = np.asarray(samples_ms, dtype=float)
    placements = max(1, int(placements))
    if placements == 1 or x.size < placements:
        return float("nan")
    medians = np.array([np.median(x[i::placements]) for i in range(placements)])
    return float(medians.std(ddof=1) / medians.mean())


def summarize(samples_ms) -> dict:
    """Per-cell summary columns (milliseconds)."""
    x = np.asarray(samples_ms, dtype=float)
    p20, p50, p80 = np.percentile(x, [20, 50, 80])
    return {
        "median_ms": float(p50),
        "p20_ms": float(p20),
        "p80_ms": float(p80),
        "min_ms": float(x.min()),
        "max_ms": float(x.max()),
        "mean_ms": float(x.mean()),
        "std_ms": float(x.std(ddof=1)) if x.size > 1 else 0.0,
        "n_samples": int(x.size),
        "rse_median": rse_of_median(x),
    }


def measure(fn, timer: Timer, cfg: TimingConfig, clock: Callable[[], float] = time.perf_counter, inputs=None) -> dict:
    """Warm up, then sample in growing batches until the stopping rule fires; ``cfg.instances`` times over, the
    samples pooled. Returns the summary + stop_reason.

    ``fn`` is one closure or a sequence of closures over input sets at distinct addresses (``placements``): each
    sample then calls the next one in turn (Rotation), and the row records how many there were. Each closure is
    called once before the warm-up (none meets the timer cold), sampling starts at the first, and every batch is a
    whole number of rounds, so each placement holds the same share of the samples: where placements fall in two
    clusters (docs/archive/performance-rounds.md), a median over unequal shares would jump with one sample.
    ``inputs`` (one input set per closure) with ``cfg.warm_translations``: every sample's buffers have their
    address translations warmed after the flush (Rotation.warm).

    Instances: on the H200 one cell measured again in the same process, even on the same inputs with the same
    timer, lands up to 1 us away (standard deviation 0.3-0.9 us for cells of 65-650 us), while the samples of one
    measurement stay put for seconds (docs/archive/performance-rounds.md). So a measurement is one draw of an offset its
    own standard error does not see. Each instance is a fresh start (a new warm-up, so a new hold, and a new
    Rotation whose outputs the allocator places afresh, in the same blocks or others) that samples until the
    stopping rule fires for it, with the time limits and ``max_samples`` shared out; the row's statistics are over
    the pooled samples, ``instance_sd_rel`` is the relative standard deviation of the instances' medians, and
    ``rse_median`` is the larger of the pooled samples' and the instances' own (instance_sd_rel / sqrt(instances)),
    so a comparison that trusts it does not trust one start's samples more than the starts agree. ``min_instances``
    (0: off) stops the starts early once that standard error is under ``instances_target_rse`` (_starts_agree), and
    ``instances`` in the row is how many ran (each start's limits stay 1/instances of the cell's, so a cell that
    stops early also spends less; the stop reads the standard error the row reports, so a row that stopped early
    carries the error that stopped it). ``hold_us`` and ``enqueue_us`` are the last start's. A timer with an
    ``sm_clock_mhz`` method (the GPU's) is asked for the SM clock after every batch: ``sm_clock_samples_mhz`` (the
    median reading), ``_min_mhz`` and ``_max_mhz``, the clock the samples ran at."""
    instances = max(1, int(cfg.instances))
    rounds = 1
    warming = cfg.warm_translations and inputs is not None
    if warming and not isinstance(fn, (list, tuple)):
        fn = [fn]
    if isinstance(fn, (list, tuple)) and len(fn) == 1 and not warming:
        fn = fn[0]  # one input set and nothing to warm: a plain closure, no output kept alive
    fns = list(fn) if isinstance(fn, (list, tuple)) else None
    if fns is not None:
        rounds = len(fns)
        max_samples = max(rounds, cfg.max_samples // rounds * rounds)
        min_samples = min(-(-cfg.min_samples // rounds) * rounds, max_samples)
        cfg = dataclasses.replace(cfg, min_samples=min_samples, max_samples=max_samples)
        for one in fns:
            one()
    per_instance = dataclasses.replace(
        cfg, max_time_s=cfg.max_time_s / instances, min_time_s=cfg.min_time_s / instances,
        max_samples=max(cfg.min_samples, cfg.max_samples // instances // rounds * rounds))
    # A cell of a few microseconds: between processes such cells differ by a median 2-3 % (up to 12 %) however
    # long they are sampled (data/reference/h200/repeatability.csv, cells under 20 us), so sampling one to 0.5 %
    # buys nothing but time; they stop at small_target_rse.
    small = dataclasses.replace(per_instance, target_rse=max(per_instance.target_rse, cfg.small_target_rse))
    samples: list[float] = []
    medians, reasons = [], []
    probe = getattr(timer, "sm_clock_mhz", None)  # the SM clock after each batch (GPU timers)
    readings: list[float] = []
    call = fn
    least = instances if cfg.min_instances <= 0 else min(instances, max(2, int(cfg.min_instances)))
    for _ in range(instances):
        if len(medians) >= least and _starts_agree(samples, medians, cfg):
            break
        if fns is not None:  # rebinding frees the last instance's outputs before this one allocates its own
            call = Rotation(fns, inputs if warming else None)
        # The first start warms the clocks and caches; a later one only needs its own calls in flight again.
        timer.warmup(call, cfg.warmup_ms if not medians else min(cfg.warmup_ms, cfg.rewarm_ms))
        if isinstance(call, Rotation):
            call.calls = 0
        mine: list[float] = []
        t0 = clock()
        # The fewest whole rounds of at least 3 samples first: a call long enough to spend the start's time cap in
        # them stops there (the cap takes 3 samples), instead of sampling min_samples of them (naive attention at
        # 8192: 12 x 42 ms a start)
        batch = min(per_instance.min_samples, -(-3 // rounds) * rounds)  # whole rounds, at least 3 samples
        while True:
            mine += timer.sample(call, batch)
            if probe is not None:
                readings.append(probe())
            elapsed = clock() - t0
            reason = stop_reason(mine, elapsed, small if np.median(mine) * 1e3 < cfg.small_cell_us else per_instance)
            if reason:
                break
            if len(mine) < per_instance.min_samples:  # up to min_samples, or as many as the time cap has left
                left = (per_instance.max_time_s - elapsed) / max(elapsed / len(mine), 1e-9)
                batch = min(per_instance.min_samples - len(mine), max(rounds, -(-math.ceil(left) // rounds) * rounds))
                continue
            grow = -(-max(batch, len(mine) // 2, per_instance.min_samples) // rounds) * rounds  # whole rounds
            batch = min(grow, per_instance.max_samples - len(mine))
        samples += mine
        medians.append(float(np.median(mine)))
        reasons.append(reason)
    out = summarize(samples)
    # the instances' reasons, the weakest first: one instance stopped by a limit makes the cell's row say so
    out["stop_reason"] = next(r for r in ("time_cap", "max_samples", "rse") if r in reasons)
    out["timer"] = timer.name
    out["placements"] = rounds
    out["placement_sd_rel"] = placement_sd_rel(samples, rounds)
    out["instances"] = len(medians)
    out["instance_sd_rel"] = _instance_sd_rel(medians)
    if len(medians) > 1:
        out["rse_median"] = max(out["rse_median"], out["instance_sd_rel"] / math.sqrt(len(medians)))
    out["warm_translations"] = bool(warming)
    if probe is not None:
        from rooflab.clocks import during

        out.update(during(readings))
    # optional parts of the protocol (a synthetic test timer has neither)
    out.update(timer.facts() if hasattr(timer, "facts") else {})
    out["loop_ms"] = timer.loop(call, cfg.loop_ms) if cfg.loop_ms > 0 and hasattr(timer, "loop") else float("nan")
    out["loop_cpu_share"] = float(getattr(timer, "loop_cpu_share", float("nan"))) if cfg.loop_ms > 0 else float("nan")
    return out


def _instance_sd_rel(medians) -> float:
    return float(np.std(medians, ddof=1) / np.mean(medians)) if len(medians) > 1 else float("nan")


def _starts_agree(samples, medians, cfg: TimingConfig) -> bool:
    """Whether the starts so far pin the cell down: the standard error over them (the larger of the pooled samples'
    and the starts' own, instance_sd_rel / sqrt(starts), as the row reports it) is under instances_target_rse
    (small_target_rse for a cell under small_cell_us, whose between-process spread is percents however it is
    sampled). A cell whose starts agree stops at min_instances; one whose starts scatter takes all of them."""
    small = np.median(samples) * 1e3 < cfg.small_cell_us
    target = max(cfg.instances_target_rse, cfg.small_target_rse) if small else cfg.instances_target_rse
    rse = max(rse_of_median(samples), _instance_sd_rel(medians) / math.sqrt(len(medians)))
    return rse < target


class GraphReplay:
    """A CUDA graph of n calls of ``fn`` (about ``target_ms`` of GPU time; n a multiple of ``multiple``), captured
    once on a side stream: ``replay_ms()`` replays it and returns the time per call (launch overhead removed, no L2
    flush). triton.testing.do_bench_cudagraph's method, with a graph of about 2 ms instead of its 25 ms."""

    def __init__(self, fn: Callable[[], object], target_ms: float = 2.0, multiple: int = 1):
        import torch

        self.torch = torch
        self.stream = torch.cuda.Stream()
        self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        multiple = max(1, int(multiple))
        self.stream.wait_stream(torch.cuda.current_stream())  # whatever was queued for fn's inputs comes first
        with torch.cuda.stream(self.stream):
            fn()  # warm (and whatever the first call allocates, outside the graph)
            self.start.record()
            for _ in range(3):
                fn()
            self.end.record()
            self.end.synchronize()
            estimate_ms = self.start.elapsed_time(self.end) / 3
            n = int(min(1000, max(1, target_ms / max(estimate_ms, 1e-4))))
            self.calls = -(-n // multiple) * multiple
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                for _ in range(self.calls):
                    fn()
            torch.cuda.synchronize()
            self.graph.replay()  # the first replay uploads the graph
            # ... and ends here: nothing made next (another side's calls on another stream, in the paired rounds)
            # runs beside it, to share its clock or its library's workspace
            self.stream.synchronize()

    def replay_ms(self) -> float:
        with self.torch.cuda.stream(self.stream):
            self.start.record()
            self.graph.replay()
            self.end.record()
            self.end.synchronize()
        return self.start.elapsed_time(self.end) / self.calls


def cudagraph_median_ms(fn: Callable[[], object], target_ms: float = 2.0, replays: int = 10) -> float:
    """Median time per call of ``replays`` replays of a GraphReplay of ``fn``: the cell's CUDA-graph time, which
    costs a cell tens of milliseconds, not do_bench_cudagraph's 0.3 s."""
    replay = GraphReplay(fn, target_ms)
    times = [replay.replay_ms() for _ in range(replays)]
    del replay
    return float(np.median(times))
