"""Where a kernel's time goes inside one call: per-program global-timer stamps of instrumented row-sum, LayerNorm and
copy kernels (bf16 8192^2, whatever --n and --dtypes say). Section: timeline."""
from pathlib import Path

import pandas as pd
import torch
import triton
import triton.language as tl

from kernels.layernorm import make_inputs as ln_inputs
from lab.common import dtype_key


def timeline_rows(timer, n=8192, runs=5, dtype=torch.bfloat16):
    """Where a kernel's time goes inside it: instrumented copies of the row-sum and LayerNorm kernels (held rows, the
    defaults' launches; LayerNorm also with its weights asked of the L2 by the first program, bf16) and of a plain
    Triton copy (2048 elements a program), each program writing the global timer (%globaltimer, ns) when it starts
    and when its last store is issued, and its SM (%smid). Each run after the timer's L2 flush.
    Returns (summary rows, per-program rows of the first two runs)."""

    from kernels import layernorm as ln
    from kernels import rowsum as rs
    from kernels._shared.rows import l2_prefetch

    @triton.jit
    def _now():
        return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)

    @triton.jit
    def _stamp(t_ptr, pid, t0):
        t1 = _now()
        sm = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
        tl.store(t_ptr + pid * 3, t0)
        tl.store(t_ptr + pid * 3 + 1, t1)
        tl.store(t_ptr + pid * 3 + 2, sm.to(tl.int64))

    @triton.jit
    def _rowsum_timed(x_ptr, s_ptr, t_ptr, n_cols, stride_xm, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        t0 = _now()
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + pid.to(tl.int64) * stride_xm + cols, mask=cols < n_cols, other=0.0)
        tl.store(s_ptr + pid, tl.sum(x.to(tl.float32), axis=0).to(s_ptr.dtype.element_ty))
        _stamp(t_ptr, pid, t0)

    @triton.jit
    def _layernorm_timed(x_ptr, w_ptr, b_ptr, y_ptr, t_ptr, n_cols, stride_xm, eps, BLOCK: tl.constexpr,
                         PREFETCH: tl.constexpr):
        pid = tl.program_id(0)
        t0 = _now()
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        if PREFETCH:
            lines = tl.arange(0, BLOCK // 64) * 64
            l2_prefetch(w_ptr + lines, (lines < n_cols) & (pid == 0))
            l2_prefetch(b_ptr + lines, (lines < n_cols) & (pid == 0))
        x = tl.load(x_ptr + pid.to(tl.int64) * stride_xm + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / n_cols
        diff = tl.where(mask, x - mean, 0.0)
        rstd = tl.math.rsqrt(tl.sum(diff * diff, axis=0) / n_cols + eps)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + pid.to(tl.int64) * stride_xm + cols, (diff * rstd * w + b).to(y_ptr.dtype.element_ty),
                 mask=mask)
        _stamp(t_ptr, pid, t0)

    @triton.jit
    def _copy_timed(x_ptr, y_ptr, t_ptr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        t0 = _now()
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs))
        _stamp(t_ptr, pid, t0)

    x, w, b, _ = ln_inputs(n, dtype, "cuda")
    y = torch.empty_like(x)
    s = torch.empty(n, device="cuda", dtype=dtype)
    e = x.element_size()
    _, rs_block, rs_warps = rs.launch_params(n, e)
    ln_block, ln_warps = ln.launch_params(n, e)
    ln_meta = {k: v for k, v in ln.launch_options(n, e, ln_block, ln_warps).items() if k == "maxnreg"}
    if dtype != torch.bfloat16:
        raise ValueError("the timeline's prefetching LayerNorm assumes 2-byte weights")
    copy_block = 2048
    programs = {"rowsum": n, "layernorm": n, "layernorm+prefetch": n, "copy": n * n // copy_block}
    stamps = {k: torch.zeros(v * 3, device="cuda", dtype=torch.int64) for k, v in programs.items()}
    launches = {
        "rowsum": (lambda: _rowsum_timed[(n, )]
                   (x, s, stamps["rowsum"], n, x.stride(0), BLOCK=rs_block, num_warps=rs_warps), n * n * e),
        "layernorm": (lambda: _layernorm_timed[(n, )](x, w, b, y, stamps["layernorm"], n, x.stride(
            0), 1e-5, BLOCK=ln_block, PREFETCH=False, num_warps=ln_warps, **ln_meta), 2 * n * n * e),
        "layernorm+prefetch": (lambda: _layernorm_timed[(n, )](x, w, b, y, stamps["layernorm+prefetch"], n, x.stride(
            0), 1e-5, BLOCK=ln_block, PREFETCH=True, num_warps=ln_warps, **ln_meta), 2 * n * n * e),
        "copy": (lambda: _copy_timed[(programs["copy"], )]
                 (x, y, stamps["copy"], BLOCK=copy_block, num_warps=4), 2 * n * n * e),
    }
    summary, per_program = [], []
    for run in range(runs):
        for name, (launch, moved) in launches.items():
            launch()  # compiled and warm
            timer.flush()
            torch.cuda.synchronize()
            launch()
            torch.cuda.synchronize()
            t = stamps[name].view(-1, 3).cpu()
            t0, t1, sm = t[:, 0].double(), t[:, 1].double(), t[:, 2]
            origin = t0.min()
            start, end = (t0 - origin) / 1e3, (t1 - origin) / 1e3  # us from the first program's start
            span = float(end.max())
            q = lambda v, f: float(torch.quantile(v, f))  # noqa: E731
            last_by_sm = torch.zeros(int(sm.max()) + 1,
                                     dtype=torch.float64).scatter_reduce(0, sm, end, reduce="amax", include_self=False)
            used = torch.unique(sm)
            last_by_sm = last_by_sm[used]
            ticks = torch.diff(torch.unique(torch.cat([t0, t1])))
            summary.append({
                "kernel": "timeline",
                "n": n,
                "dtype": dtype_key(dtype),
                "variant": name,
                "run": run,
                "programs": len(t0),
                "sms": len(used),
                "span_us": span,
                "rate_tbs": moved / span / 1e6,
                "first_end_us": float(end.min()),
                "last_start_us": float(start.max()),
                "end_p05_us": q(end, 0.05),
                "end_p50_us": q(end, 0.5),
                "end_p95_us": q(end, 0.95),
                "sm_last_end_min_us": float(last_by_sm.min()),
                "sm_last_end_max_us": span,
                "program_us_p50": q(end - start, 0.5),
                "program_us_p95": q(end - start, 0.95),
                "min_tick_ns": float(ticks[ticks > 0].min()) if (ticks > 0).any() else float("nan")
            })
            if run < 2:
                per_program += [{
                    "variant": name,
                    "run": run,
                    "program": i,
                    "start_us": a,
                    "end_us": bb,
                    "sm": c
                } for i, (a, bb, c) in enumerate(zip(start.tolist(), end.tolist(), sm.tolist()))]
    return summary, per_program


def run_timeline(run):
    """The summary rows into the call's CSV; the per-program stamps beside it, as <out>_timeline.csv."""
    print("timeline: bf16 8192^2 (it does not take --n or --dtypes)", flush=True)
    summary, per_program = timeline_rows(run.timer)
    run.rows += summary
    timeline_csv = Path(run.args.out).with_name(Path(run.args.out).stem + "_timeline.csv")
    pd.DataFrame(per_program).to_csv(timeline_csv, index=False)
    print(f"per-program times: {timeline_csv}")


def timeline_summary(df) -> str:
    tl_cols = [
        "variant", "run", "programs", "sms", "span_us", "rate_tbs", "first_end_us", "end_p05_us", "end_p50_us",
        "end_p95_us", "last_start_us", "sm_last_end_min_us", "program_us_p50", "program_us_p95", "min_tick_ns"
    ]
    return ("\ninside one call (us from the first program's start; programs' global-timer stamps)\n" +
            df[df.kernel == "timeline"][tl_cols].to_string(index=False, float_format="%.2f"))
