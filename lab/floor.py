"""What a call costs besides its bytes: the timer's floor (an empty event pair, one-block kernels, fixed holds), the
fixed cost and marginal rate of each row kernel (intercept), the host's enqueue cost (launch), and how fast anything
reads the row-sum's bytes (readfloor), where a fwd+bwd call's host time goes (hostprof). Sections: floor, intercept,
launch, readfloor, hostprof."""
import time

import torch
import triton
import triton.language as tl

from kernels.rowsum import bytes_moved as rowsum_bytes
from lab.common import DTYPES, dtype_key, interleaved, readings, timed
from rooflab.timers import CudaEventTimer


class FixedHoldTimer(CudaEventTimer):
    """The sweep's timer with the hold fixed instead of sized from the enqueue cost."""

    def __init__(self, hold_us):
        super().__init__(flush_l2=True)
        self.fixed_hold_us = hold_us

    def warmup(self, fn, warmup_ms):
        super().warmup(fn, warmup_ms)
        self.hold_us = self.fixed_hold_us
        self.hold_cycles = int(self.hold_us * self.cycles_per_us)


def floor_variants():
    """What the timer reports with next to nothing timed: its fixed cost, present in every cell."""

    @triton.jit
    def _empty(x_ptr):
        pass

    x, y = torch.zeros(1, device="cuda"), torch.zeros(1, device="cuda")
    return {
        "nothing between the events": lambda: None,
        "empty Triton kernel, 1 program": lambda: _empty[(1, )](x),
        "x.zero_() on 1 element": lambda: x.zero_(),
        "y.copy_(x) on 1 element": lambda: y.copy_(x),
        "empty Triton kernel, 1056 programs": lambda: _empty[(1056, )](x)
    }


def run_floor(run):
    """The floor rows, then: does the length of the hold move a small cell? (SMs idle behind a long spin might clock
    down.)"""
    for name, fn in floor_variants().items():
        run.record("floor", 0, "-", name, timed(fn, run.timer, run.cfg))
    a = torch.randn(1024, 1024, device="cuda")
    b = torch.randn(1024, 1024, device="cuda")
    for rep in range(3):
        for hold in (20.0, 100.0, 400.0, None):
            t = FixedHoldTimer(hold) if hold else run.timer
            run.record("floor", 1024, "float32", f"torch.add 1024^2 fp32, hold {hold or 'adaptive'} us, rep {rep}",
                       timed(lambda: torch.add(a, b), t, run.cfg))


def floor_summary(df) -> str:
    return "\ntimer floor (us)\n" + df[df.kernel == "floor"][["variant", "median_us"]].to_string(index=False)


@triton.jit
def _chunk_sums(x_ptr, p_ptr, CHUNK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    tl.store(p_ptr + pid, tl.sum(tl.load(x_ptr + pid * CHUNK + tl.arange(0, CHUNK)).to(tl.float32), axis=0))


@triton.jit
def _copy_chunks(x_ptr, y_ptr, CHUNK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * CHUNK + tl.arange(0, CHUNK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def _rowsum_split(x_ptr, part_ptr, count_ptr, s_ptr, stride_xm, SPLIT: tl.constexpr, CHUNK: tl.constexpr):
    """Row sums in one launch, SPLIT programs a row: each stores its chunk's sum, then counts itself in; the row's
    last program adds the parts and sets the count back to zero for the next call."""
    pid = tl.program_id(0)
    row = (pid // SPLIT).to(tl.int64)
    x = tl.load(x_ptr + row * stride_xm + (pid % SPLIT) * CHUNK + tl.arange(0, CHUNK)).to(tl.float32)
    tl.store(part_ptr + pid, tl.sum(x, axis=0))
    tl.debug_barrier()  # every thread's part stored before the release below
    arrived = tl.atomic_add(count_ptr + row, 1, sem="acq_rel", scope="gpu")
    if arrived == SPLIT - 1:
        parts = tl.load(part_ptr + row * SPLIT + tl.arange(0, SPLIT), cache_modifier=".cg")
        tl.store(s_ptr + row, tl.sum(parts, axis=0).to(s_ptr.dtype.element_ty))
        tl.store(count_ptr + row, 0)


def _chunks(x, chunk_bytes):
    """(elements a chunk, chunks) of a contiguous x that is a whole number of chunks of chunk_bytes."""
    chunk = chunk_bytes // x.element_size()
    if not x.is_contiguous() or x.numel() % chunk:
        raise ValueError(f"{x.numel()} elements{'' if x.is_contiguous() else ', not contiguous,'} are not a whole "
                         f"number of chunks of {chunk}")
    return chunk, x.numel() // chunk


def chunk_sums(x, chunk_bytes, warps):
    """One fp32 sum per contiguous chunk of chunk_bytes of x: the least a read of x's bytes can do."""
    chunk, count = _chunks(x, chunk_bytes)
    p = torch.empty(count, dtype=torch.float32, device=x.device)
    _chunk_sums[(count, )](x, p, CHUNK=chunk, num_warps=warps)
    return p


def copy_chunks(x, y, chunk_bytes, warps):
    """y = x, chunk_bytes a program: a Triton copy beside the driver's."""
    chunk, count = _chunks(x, chunk_bytes)
    _copy_chunks[(count, )](x, y, CHUNK=chunk, num_warps=warps)
    return y


def split_rowsum(split, warps):
    """A row-sum of contiguous rows (a power of two long) by _rowsum_split, its parts and counts kept between calls
    (the counts are zero again after each call)."""
    state = {}

    def fn(x):
        n_rows, n_cols = x.shape
        key = (x.shape, x.device)
        if key not in state:
            state.clear()
            state[key] = (torch.empty(n_rows * split, dtype=torch.float32,
                                      device=x.device), torch.zeros(n_rows, dtype=torch.int32, device=x.device))
        parts, counts = state[key]
        s = torch.empty(n_rows, dtype=x.dtype, device=x.device)
        _rowsum_split[(n_rows * split, )](x, parts, counts, s, x.stride(0), SPLIT=split, CHUNK=n_cols // split,
                                          num_warps=warps)
        return s

    fn.counts = lambda: next(iter(state.values()))[1]
    return fn


def readfloor_variants(n, dtype, device="cuda"):
    """[(kernel, bytes moved, {variant: fn})]: how fast can anything read the row-sum's bytes? Beside the default
    (three readings each, interleaved): the row sums by the builtin, by cuBLAS (x @ ones), and in one launch of
    2 or 4 programs a row (split_rowsum); then, no row sums but the same bytes: a whole-tensor torch.sum, the copy of
    half the rows (read + write = x's bytes) by the driver and by Triton (copy_chunks), and Triton chunk sums of
    4-32 KiB a program (chunk_sums, the least a read can do)."""
    from kernels.rowsum import make_inputs, rowsum_triton

    (x, ) = make_inputs(n, dtype, device)
    ones = torch.ones(n, dtype=dtype, device=device)
    kinds = {
        "triton (default)": lambda: rowsum_triton(x),
        "builtin": lambda: x.sum(dim=1),
        "cuBLAS x @ ones": lambda: torch.mv(x, ones)
    }
    for split in (2, 4):
        for warps in (4, 8):
            kinds[f"one launch, {split} programs a row, {warps} warps"] = (lambda f=split_rowsum(split, warps): f(x))
    rows = readings(kinds)
    half, dst = x[:n // 2], torch.empty_like(x[:n // 2])
    floors = {
        "torch.sum, whole tensor": lambda: x.sum(),
        "copy_ of half the rows (same bytes)": lambda: dst.copy_(half),
        "Triton copy of half the rows, 4 KiB a program, 4 warps": lambda: copy_chunks(half, dst, 4096, 4),
        "Triton copy of half the rows, 8 KiB a program, 8 warps": lambda: copy_chunks(half, dst, 8192, 8)
    }
    for chunk in (4096, 8192, 16384, 32768):
        for warps in (4, 8):
            floors[f"chunk sums, {chunk // 1024} KiB a program, {warps} warps"] = (
                lambda c=chunk, w=warps: chunk_sums(x, c, w))
    rows |= interleaved(floors)
    return [("rowsum", rowsum_bytes(n, dtype_key(dtype)), rows)]


INTERCEPT_ROWS = (1024, 2048, 4096, 8192, 16384, 32768)
# Fewer rows than one wave holds (132 SMs: one row per SM up to eight): what one row's whole chain costs (launch,
# load, reductions, store) when nothing else is queued. Timed beside the fit, not fitted.
WAVE_ROWS = (132, 264, 528)


def row_calls(x, w, b):
    """{call: (bytes moved, fn)}, one kernel launch each: a copy of x and each row kernel on x (rows of x.shape[1]
    columns; w and b the norms' weight and bias), ours and the builtins the probes compare them with (the intercept
    fit here, scripts/ncu_durations.py)."""
    import torch.nn.functional as F

    from kernels.gelu import gelu_triton
    from kernels.layernorm import layernorm_triton
    from kernels.rmsnorm import rmsnorm_triton
    from kernels.rowsum import rowsum_triton
    from kernels.softmax import softmax_forward

    y = torch.empty_like(x)
    rw = x.numel() * x.element_size()
    return {
        "copy_": (2 * rw, lambda: y.copy_(x)),
        "rowsum triton": (rw, lambda: rowsum_triton(x)),
        "rowsum builtin": (rw, lambda: x.sum(dim=1)),
        "layernorm triton": (2 * rw, lambda: layernorm_triton(x, w, b)),
        "layernorm builtin": (2 * rw, lambda: F.layer_norm(x, (x.shape[1], ), w, b)),
        "rmsnorm triton": (2 * rw, lambda: rmsnorm_triton(x, w)),
        "softmax fwd triton": (2 * rw, lambda: softmax_forward(x)),
        "gelu triton": (2 * rw, lambda: gelu_triton(x))
    }


def intercept_rows(timer, cfg, dtypes, cols=8192):
    """Fixed cost and marginal rate: each kernel on (R, cols) inputs for every R in INTERCEPT_ROWS (same launch
    shape, more rows), fitted as time = fixed + bytes / rate. A kernel whose rate matches the copy's but whose fixed
    cost is larger loses at 8192^2 to the per-call cost, not to bandwidth. The WAVE_ROWS inputs (at most one wave)
    show how much of that fixed cost is one row's latency."""
    out = []
    for dname in dtypes:
        dtype = DTYPES[dname]
        w = (1 + 0.1 * torch.randn(cols, device="cuda")).to(dtype)
        b = (0.1 * torch.randn(cols, device="cuda")).to(dtype)
        for r in WAVE_ROWS + INTERCEPT_ROWS:
            x = torch.randn(r, cols, device="cuda").to(dtype)
            for name, (moved, fn) in row_calls(x, w, b).items():
                out.append({
                    "kernel": "intercept",
                    "n": r,
                    "dtype": dname,
                    "variant": name,
                    "bytes": moved,
                    "median_us": timed(fn, timer, cfg) * 1e3
                })
            del x
            torch.cuda.empty_cache()
    return out


def intercept_summary(df) -> str:
    """Least-squares fit of median_us against bytes per (call, dtype) over INTERCEPT_ROWS: fixed cost (us) and
    marginal rate (TB/s); then the time per call at WAVE_ROWS (at most one wave of rows)."""
    from analysis.metrics import fit_line

    lines = [
        "fixed cost and marginal rate, time = fixed + bytes / rate over rows "
        f"{INTERCEPT_ROWS[0]}-{INTERCEPT_ROWS[-1]} of 8192 columns",
        f"{'call':<22}{'dtype':<10}{'fixed us':>9}{'rate TB/s':>10}{'at 8192 rows':>14}"
    ]
    timed = df.dropna(subset=["median_us"])
    for (name, dname), g in timed[timed["n"] >= INTERCEPT_ROWS[0]].groupby(["variant", "dtype"], sort=False):
        at = g[g["n"] == 8192]["median_us"]
        at = at.iloc[0] if len(at) else float("nan")
        if len(g) < 2:
            lines.append(f"{name:<22}{dname:<10}{'fewer than two timed sizes: no fit':>33}")
            continue
        fixed, rate = fit_line(g["bytes"], g["median_us"])
        lines.append(f"{name:<22}{dname:<10}{fixed:>9.2f}{rate:>10.3f}{at:>12.2f}us")
    wave = timed[timed["n"] < INTERCEPT_ROWS[0]]
    if len(wave):
        lines.append("\ntime per call (us) with at most one wave of rows of 8192 columns")
        lines.append(
            wave.pivot_table(index=["variant", "dtype"], columns="n", values="median_us",
                             sort=False).to_string(float_format="%.2f"))
    return "\n".join(lines)


def run_intercept(run):
    run.rows += intercept_rows(run.timer, run.cfg, run.args.dtypes)


def launch_costs():
    from kernels.gelu import gelu_builtin, gelu_triton

    x = torch.randn(256, 256, device="cuda")
    rows = []
    for name, fn in {
            "builtin F.gelu": lambda: gelu_builtin(x),
            "gelu_triton wrapper": lambda: gelu_triton(x),
            "torch.empty_like only": lambda: torch.empty_like(x)
    }.items():
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(2000):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        rows.append({
            "kernel": "launch",
            "n": 256,
            "dtype": "float32",
            "variant": f"host us/call: {name}",
            "median_us": (t1 - t0) / 2000 * 1e6
        })
    return rows


def run_launch(run):
    run.rows += launch_costs()


def hostprof_rows(timer, shape=(128, 4096), dtype=torch.bfloat16, top=15, loop_ms=20):
    """Python-loop microseconds a call of ours and of the builtin, forward and fwd+bwd, for each row kernel with a
    backward, on an input whose GPU time is a few microseconds (so the loop is the host's); then cProfile's
    heaviest functions over ours' fwd+bwd loop, printed (the sweep measured ours at 2-4x the builtin there)."""
    import cProfile
    import io
    import pstats

    from rooflab.kernel import load_kernel

    rows = []
    for name in ("layernorm", "rmsnorm", "softmax"):
        kernel = load_kernel(name)
        inputs = kernel.make_inputs(shape, dtype, "cuda", 0)
        for pass_ in kernel.passes:
            for impl in ("builtin", "triton"):
                fn = kernel.impls[impl](inputs, pass_=pass_)
                rows.append({
                    "kernel": "hostprof",
                    "n": shape[1],
                    "dtype": dtype_key(dtype),
                    "variant": f"{name} {pass_} {impl}: loop us/call",
                    "median_us": timer.loop(fn, loop_ms) * 1e3
                })
        ours = kernel.impls["triton"](inputs, pass_="fwd+bwd")
        profile = cProfile.Profile()
        profile.enable()
        timer.loop(ours, loop_ms)
        profile.disable()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(top)
        print(f"\n{name} fwd+bwd, ours, a {loop_ms} ms loop: cProfile by own time\n{text.getvalue()}")
    return rows


def hostparts_rows(timer, shape=(128, 4096), dtype=torch.bfloat16, loop_ms=20):
    """LayerNorm fwd+bwd's Python-loop time taken apart: each piece of ours alone (the forward with and without
    autograd recording, the backward called directly, its partial sums' reduction), a custom autograd Function that
    does nothing, and ours and the builtin with the autograd engine's device threads off."""
    from kernels._shared import norm_bwd as _norm_bwd
    from kernels._shared.norm_bwd import TritonNorm
    from rooflab.kernel import load_kernel
    from rooflab.triton_utils import multiprocessor_count

    kernel = load_kernel("layernorm")
    x, w, b, dy = kernel.make_inputs(shape, dtype, "cuda", 0)
    leaves = [t.detach().clone().requires_grad_(True) for t in (x, w, b)]
    ours, builtin = (kernel.impls[i]((x, w, b, dy), pass_="fwd+bwd") for i in ("triton", "builtin"))
    fwd = kernel.module.layernorm_triton
    parts = torch.zeros((multiprocessor_count(x.device) * _norm_bwd.PROGRAMS_PER_SM, shape[1]), device="cuda",
                        dtype=torch.float32)  # as many partial rows as the backward writes

    class Nothing(torch.autograd.Function):

        @staticmethod
        def forward(ctx, x, w, b):
            return torch.empty_like(x)

        @staticmethod
        def backward(ctx, g):
            return g, None, None

    def nothing():
        for t in leaves:
            t.grad = None
        Nothing.apply(*leaves).backward(dy)

    def unthreaded(fn):

        def run():
            with torch.autograd.set_multithreading_enabled(False):
                return fn()

        return run

    variants = {
        "ours fwd, no grad":
        lambda: fwd(x, w, b),
        "ours fwd, recorded":
        lambda: fwd(*leaves),
        "ours fwd, recorded, C apply (no functorch unwrap)":
        lambda: super(torch.autograd.Function, TritonNorm).apply(*leaves, 1e-5, kernel.module._layernorm_forward, True),
        "ours backward alone (norm_backward)":
        lambda: _norm_bwd.norm_backward(x, w, dy, 1e-5, True, True),
        "partials: 2 x sum(0).to(dtype)":
        lambda: (parts.sum(dim=0).to(dtype), parts.sum(dim=0).to(dtype)),
        "empty Function fwd+bwd":
        nothing,
        "ours fwd+bwd":
        ours,
        "builtin fwd+bwd":
        builtin,
        "ours fwd+bwd, engine threads off":
        unthreaded(ours),
        "builtin fwd+bwd, engine threads off":
        unthreaded(builtin),
    }
    return [{
        "kernel": "hostprof",
        "n": shape[1],
        "dtype": dtype_key(dtype),
        "variant": f"parts: {name}",
        "median_us": timer.loop(fn, loop_ms) * 1e3
    } for name, fn in variants.items()]


def run_hostprof(run):
    run.rows += hostprof_rows(run.timer) + hostparts_rows(run.timer)


def launch_summary(df) -> str:
    return df[df.kernel == "launch"][["variant", "median_us"]].to_string(index=False)


def hostprof_summary(df) -> str:
    return df[df.kernel == "hostprof"][["variant", "median_us"]].to_string(index=False)
