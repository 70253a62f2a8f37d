"""The timers a cell is sampled with, and the input rotation they sample through.

Three times per cell, each answering its own question:

* ``median_ms`` (event mode, the headline): the device time of one call with a cold L2. Before each sample the L2 is
  flushed by *reading* a buffer sized from the device's own L2 (2x), then the stream is *held* by a spin kernel
  (``torch.cuda._sleep``) long enough for the host to enqueue the whole call before the start event fires -- the
  blocking-kernel method of NVBench. Without the hold, a call whose host-side launch cost (25-45 us for a Triton
  launcher, more for an unfused chain of kernels) exceeds the flush's own GPU time is timed from an idle GPU, and the
  "device" time becomes the host's launch cost, which differs from process to process (59 % between two processes
  on the H200 before this was added). The hold length adapts to the enqueue cost measured in the warm-up.
  Why a read flush: a flush that *writes* (do_bench's ``cache.zero_()``) leaves the L2 full of dirty lines, which the
  timed call then has to write back to HBM as it evicts them -- the harness's traffic charged to the kernel. On the
  H200 that cost a same-size ``copy_`` 6 % at 8192^2 bf16 (3964 vs 4222 GB/s) and 9 % at 2048^2 fp32; reading the
  buffer evicts just as well (a 2048^2 copy: 2937 GB/s read-flushed, 4153 with a warm L2) and leaves clean lines.
  ``flush_mode: write`` keeps the old behaviour for comparison (python -m lab flush).
* ``graph_median_ms``: ``triton.testing.do_bench_cudagraph``'s method with a graph of about 2 ms (launch overhead
  removed, no flush): what a CUDA-graph replay of the call costs.
* ``loop_ms``: back-to-back calls from Python with one synchronisation at the end (no flush, no hold): the time per
  call a training loop sees, launch overhead included. For small problems this is the launch-bound plateau; its
  host part is also recorded alone as ``enqueue_us`` (host time to enqueue one call, measured right after a
  synchronisation, so on a cold host path: it errs high -- e.g. 30-60 us for ``F.gelu`` whose loop time is 10 us --
  which only lengthens the hold; ``loop_ms`` is the steady-state figure).

``Rotation`` cycles the samples through closures over input sets at distinct addresses (``timing.placements``) and
can warm their address translations after each flush (``timing.warm_translations``); rooflab/timing.py has why.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Protocol

import numpy as np

if TYPE_CHECKING:
    from rooflab.timing import TimingConfig


class Timer(Protocol):
    name: str

    def sample(self, fn: Callable[[], object], n: int) -> list[float]:
        """Run fn n times (each preceded by the L2 flush where applicable) and return n times in ms."""

    def warmup(self, fn: Callable[[], object], warmup_ms: float) -> None:
        ...

    def loop(self, fn: Callable[[], object], min_ms: float, repeats: int = 3) -> float:
        """Per-call time (ms) of back-to-back calls, launch overhead included, over at least min_ms (the median of
        ``repeats`` loops; one loop may be a single call)."""

    def facts(self) -> dict:
        """Timer-specific columns for the row (the stream hold and enqueue cost on the GPU)."""


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
            if isinstance(fn, Rotation):
                fn.warm()  # the CUDA timer's steps before a sample, less the flush
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
        return out

    loop_cpu_share = float("nan")

    def loop(self, fn, min_ms, repeats: int = 3):
        facts: dict = {}
        out = _loop_ms(fn, min_ms, lambda: None, repeats=repeats, min_calls=3 if repeats > 1 else 1, facts=facts)
        self.loop_cpu_share = facts["cpu_share"]
        return out

    def facts(self):
        return {"hold_us": float("nan"), "enqueue_us": float("nan"), "flush_buffers": 0}  # no flush on the CPU


def _loop_ms(fn, min_ms: float, sync: Callable[[], None], repeats: int = 3, min_calls: int = 3,
             facts: dict | None = None) -> float:
    """Median over `repeats` of (wall time of k back-to-back calls + one sync) / k, with k sized to take min_ms
    (at least min_calls). ``facts`` gets ``cpu_share``: the calling thread's CPU time over the wall time of the
    repeats. The loop is host-bound work (and a spinning sync), so a share well under 1 says the thread was off the
    CPU for part of it (another process on its core): a loop time to distrust, not the call's cost. (The thread's,
    not the process's: autograd's worker thread would add its own.)"""
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    one = max(time.perf_counter() - t0, 1e-7)
    k = int(min(max(min_ms * 1e-3 / one, min_calls), 100_000))
    per_call = []
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(k):
            fn()
        sync()
        per_call.append((time.perf_counter() - t0) * 1e3 / k)
    if facts is not None:
        facts["cpu_share"] = (time.thread_time() - cpu0) / max(time.perf_counter() - wall0, 1e-9)
    return float(np.median(per_call))


FLUSH_MODES = ("write", "read")
HOLD_MARGIN_US = 20.0  # on top of the slowest enqueue seen
HOLD_MAX_US = 20_000.0


def hold_us_for(enqueue_us) -> float:
    """How long to hold the stream before a sample: 1.5x the slowest measured enqueue + a margin, capped.

    The flush ahead of the hold adds its own GPU time, so this errs long; a host that blocks inside the call (a
    synchronising implementation) would ask for the cap, and the time cap on sampling still bounds the cell.
    """
    worst = max(float(v) for v in enqueue_us)
    return min(HOLD_MAX_US, 1.5 * worst + HOLD_MARGIN_US)


class CudaEventTimer:
    """Device-side timing with one pair of CUDA events per sample, the L2 flushed and the stream held before each."""

    name = "cuda_event"

    def __init__(self, flush_l2: bool = True, hold_stream: bool = True, flush_mode: str = "read",
                 flush_buffers: int = 1):
        import torch

        if flush_mode not in FLUSH_MODES:
            raise ValueError(f"flush_mode must be one of {FLUSH_MODES}, got {flush_mode!r}")
        if flush_buffers < 1:
            raise ValueError(f"flush_buffers must be at least 1, got {flush_buffers}")
        self.torch = torch
        l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
        self.l2_bytes = int(l2)
        # Twice the L2, so an LRU-ish cache keeps none of the previous sample's working set; flush_buffers of them
        # at distinct addresses, used in turn.
        self.flush_buffers = [
            torch.zeros(max(2 * self.l2_bytes, 1 << 20) // 4, dtype=torch.int32, device="cuda")
            for _ in range(flush_buffers)
        ] if flush_l2 else []
        self._next_flush = 0
        self.flush_mode = flush_mode
        self._flush_sink = torch.empty((), dtype=torch.int64, device="cuda")
        self.hold_stream = hold_stream
        self.cycles_per_us = self._calibrate_spin() if hold_stream else 0.0
        self.hold_cycles = 0
        self.hold_us = 0.0
        self.enqueue_us = float("nan")

    def _calibrate_spin(self) -> float:
        """GPU cycles per microsecond of torch.cuda._sleep, measured (the SM clock is whatever the card runs at)."""
        torch = self.torch
        cycles = 2_000_000
        torch.cuda._sleep(cycles)  # wake the clocks
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.cuda._sleep(cycles)
        e.record()
        e.synchronize()
        return cycles / max(s.elapsed_time(e) * 1e3, 1e-3)

    def flush(self):
        """Evict the L2 as before every sample (flush_l2, flush_mode): also for probes that time by other means."""
        if not self.flush_buffers:
            return
        buffer = self.flush_buffers[self._next_flush]
        self._next_flush = (self._next_flush + 1) % len(self.flush_buffers)
        if self.flush_mode == "write":
            buffer.zero_()
        else:  # "read": evict by reading, so no dirty lines of the flush are left for the timed call to write back
            self.torch.sum(buffer, dim=0, out=self._flush_sink)

    def _hold(self):
        if self.hold_cycles:
            self.torch.cuda._sleep(self.hold_cycles)

    def warmup(self, fn, warmup_ms):
        torch = self.torch
        fn()
        torch.cuda.synchronize()
        # warmup_ms of the device's timeline, in doubling batches timed by events: calls are queued asynchronously,
        # so a loop bounded by the host's clock would queue ~1000 of them whatever their length (an 8192^3 IEEE fp32
        # GEMM: 21 s of warm-up, not 25 ms)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        spent, batch, calls = 0.0, 1, 0
        while spent < warmup_ms and calls < 10_000:
            start.record()
            for _ in range(batch):
                fn()
            end.record()
            end.synchronize()
            spent += start.elapsed_time(end)
            calls += batch
            batch = min(2 * batch, 1024)
        # Host cost of enqueuing one call, behind a long spin so the GPU never waits on the host meanwhile.
        enqueue = []
        for _ in range(5):
            if self.cycles_per_us:  # a spin well past the slowest enqueue seen (2 ms before any)
                spin_us = min(2000.0, max(200.0, 4 * max(enqueue))) if enqueue else 2000.0
                torch.cuda._sleep(int(self.cycles_per_us * spin_us))
            t0 = time.perf_counter()
            fn()
            enqueue.append((time.perf_counter() - t0) * 1e6)
            torch.cuda.synchronize()
        self.enqueue_us = float(np.median(enqueue))
        if self.hold_stream:
            self.hold_us = hold_us_for(enqueue)
            self.hold_cycles = int(self.hold_us * self.cycles_per_us)

    def sample(self, fn, n):
        torch = self.torch
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for s, e in zip(starts, ends):
            self.flush()
            if isinstance(fn, Rotation):
                fn.warm()  # the next call's address translations, if asked for (timing.warm_translations)
            self._hold()
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]

    loop_cpu_share = float("nan")

    def loop(self, fn, min_ms, repeats: int = 3):
        facts: dict = {}
        out = _loop_ms(fn, min_ms, self.torch.cuda.synchronize, repeats=repeats, min_calls=3 if repeats > 1 else 1,
                       facts=facts)
        self.loop_cpu_share = facts["cpu_share"]  # the host's share of the loop (_loop_ms)
        return out

    def sm_clock_mhz(self) -> float:
        """The SM clock now (rooflab/clocks.sm_mhz): read after each batch of samples."""
        from rooflab import clocks

        return clocks.sm_mhz()

    def facts(self):
        return {
            "hold_us": float(self.hold_us) if self.hold_stream else 0.0,
            "enqueue_us": self.enqueue_us,
            "flush_buffers": len(self.flush_buffers)
        }


def timer_for(device: str, cfg: TimingConfig) -> Timer:
    """The timer a sweep uses: CUDA events with the configured flush and hold on a GPU, the host clock on the CPU.
    Make one per sweep and pass it to every cell: it holds the flush buffer and the spin calibration."""
    if device == "cuda":
        return CudaEventTimer(cfg.flush_l2, cfg.hold_stream, cfg.flush_mode, cfg.flush_buffers)
    return HostTimer()


class Rotation:
    """One call per invocation, rotating through closures over input sets at distinct addresses, with the outputs of
    the last len(fns) calls kept alive so the allocator hands each call a different output block too.

    Why: on the H200 where a cell's buffers sit in memory moves its time, and the offset is fixed for an allocation:
    six allocations of one 1024^2 bf16 add measured 5.6-6.8 us (the same allocation again: 6.70 and 6.75 us), six of
    an 8192^2 bf16 GeLU 63.6-64.8 us (python -m lab placement). A cell timed on one allocation carries
    that offset, and a second process, with other addresses, another one: the between-process spread the
    repeatability benchmark measures. Rotating through several placements puts their mix, not one draw, in every
    sample set. Timers need not know: they call this like any closure.
    """

    def __init__(self, fns, inputs=None, touch=None):
        self.fns = list(fns)
        if not self.fns:
            raise ValueError("Rotation needs at least one closure")
        if inputs is not None and len(inputs) != len(self.fns):
            raise ValueError(f"{len(self.fns)} closures but {len(inputs)} input sets")
        self.outputs: list[object] = [None] * len(self.fns)
        self.calls = 0
        # Translation warming (timing.warm_translations): the input sets, and the output block the next call will
        # likely be handed (kept until warm() has touched it).
        self.inputs = [list(tensors_in(one)) for one in inputs] if inputs is not None else None
        self.touch = touch or touch_pages
        self.released = None

    def __call__(self):
        i = self.calls % len(self.fns)
        self.calls += 1
        self.released = None  # not warmed (warm-up, loop): freed now, so the allocator sees what it would without
        out = self.fns[i]()
        if self.inputs is not None and len(self.fns) == 1:
            self.released = out  # one placement: no output kept alive, as without a Rotation; reused next call
            return out
        if self.inputs is not None:
            self.released = self.outputs[i]  # freed in warm(), after its pages were touched
        self.outputs[i] = out  # the previous output of this slot is freed only now, after the new one was allocated
        return out

    def warm(self):
        """Before a sample (after the flush): read one element of every 64 KiB of the next call's inputs and of the
        output block it will likely be handed (the one the last call released), then free that block.

        Why: after the flush a small cell's time depended on whether the address translations of its buffers had
        survived: six allocations of a 1024^2 bf16 add measured 5.41-6.51 us, and 5.66-5.76 us (1.7 % apart) with
        the input and output pages touched first (docs/archive/performance-rounds.md). The data stay cold: one line in
        512 is read. With warming off (the default) this does nothing."""
        if self.inputs is None:
            return
        for t in self.inputs[self.calls % len(self.fns)] + list(tensors_in(self.released)):
            self.touch(t)
        self.released = None

    def __len__(self):
        return len(self.fns)


TOUCH_STRIDE_BYTES = 64 << 10  # the smallest GPU page size; 2 MiB pages are touched 32 times


def tensors_in(obj):
    """The tensors in a call's inputs or output: a tensor, or a tuple/list/dict of them (anything else: none)."""
    if obj is None:
        return
    if hasattr(obj, "data_ptr") and hasattr(obj, "element_size"):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for one in obj:
            yield from tensors_in(one)
    elif isinstance(obj, dict):
        for one in obj.values():
            yield from tensors_in(one)


def touch_pages(t) -> None:
    """Read one element of every TOUCH_STRIDE_BYTES of a contiguous tensor (a strided view, no copy); others are
    left alone."""
    import torch

    if t.numel() == 0 or not t.is_contiguous():
        return
    t.reshape(-1).view(torch.uint8)[::TOUCH_STRIDE_BYTES].sum()  # as bytes: any dtype, even one without a sum
