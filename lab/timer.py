"""The timer itself: what the flush's dirty lines and the host's launch cost add (flush), whether where the inputs
sit moves a cell (placement), how a cell's time wanders over seconds (drift), and which part of a cell's setup
carries its offset (instances). Sections: flush, placement, drift, instances."""
import time

import pandas as pd
import torch

from lab.common import DTYPES, placement_fns, sweep_timing, timed
from rooflab.timers import CudaEventTimer, timer_for
from rooflab.timing import measure


def flush_variants(n, dtype):
    """The same calls under each timer variant: what the flush's dirty lines and the host's launch cost add."""
    from kernels.gelu import gelu_triton
    from kernels.rowsum import rowsum_triton
    from kernels.softmax import softmax_forward

    x = torch.randn(n, n, device="cuda").to(dtype)
    y = torch.empty_like(x)
    e = x.element_size()
    return [("copy_ (same size)", 2 * n * n * e, lambda: y.copy_(x)),
            ("gelu triton", 2 * n * n * e, lambda: gelu_triton(x)),
            ("softmax fwd triton", 2 * n * n * e, lambda: softmax_forward(x)),
            ("rowsum triton", (n * n + n) * e, lambda: rowsum_triton(x)),
            ("rowsum builtin", (n * n + n) * e, lambda: x.sum(dim=1))]


def run_flush(run):
    """The flush_variants calls, and a 4 GiB copy, under each timer variant, at every --n and --dtypes."""
    timers = {
        "write flush + hold": CudaEventTimer(flush_l2=True, flush_mode="write"),
        "read flush + hold": run.timer,
        "write flush, no hold": CudaEventTimer(flush_l2=True, hold_stream=False),
        "no flush + hold (L2 warm)": CudaEventTimer(flush_l2=False)
    }
    big = torch.randn(1 << 30, device="cuda")
    big_dst = torch.empty_like(big)
    for tname, t in timers.items():
        ms = timed(lambda: big_dst.copy_(big), t, run.cfg)  # noqa: F821
        run.record("flush", 32768, "float32", f"4 GiB copy | {tname}", ms, 2 * big.numel() * 4)
    del big, big_dst
    for n in run.args.n:
        for dname in run.args.dtypes:
            for name, moved, fn in flush_variants(n, DTYPES[dname]):
                for tname, t in timers.items():
                    run.record("flush", n, dname, f"{name} | {tname}", timed(fn, t, run.cfg), moved)
            torch.cuda.empty_cache()


def flush_summary(df) -> str:
    fl = df[df.kernel == "flush"]
    fl = fl.assign(call=fl.variant.str.split(" \\| ").str[0], timer=fl.variant.str.split(" \\| ").str[1])
    return ("\nGB/s by timer variant\n" + fl.pivot_table(index=["n", "dtype", "call"], columns="timer", values="gbps",
                                                         sort=False).to_string(float_format="%.0f"))


PLACEMENT_CELLS = [("gelu", "triton", "bfloat16", 8192), ("layernorm", "triton", "bfloat16", 8192),
                   ("softmax", "builtin", "bfloat16", 4096), ("vecadd", "builtin", "bfloat16", 1024),
                   ("vecadd", "triton", "bfloat16", 1024)]


def placement_rows(timer, placements=6):
    """Does where the inputs sit in memory move a cell's median? One cell measured with the sweep's own settings
    (config defaults) on `placements` fresh allocations (earlier ones kept alive, a spacer of p x 1.5 MB between,
    so the addresses differ), then on the first allocation again; with the sweep's timing and with
    `warm_translations` on (the next call's input and output pages touched after each flush: is the offset TLB
    misses?). data/tuning/tune_v8_placement_*.csv (commits 65951e5, e7e08e5) had a probe-only toucher at a 2 MiB
    stride, inputs alone as a third variant, and 4 rotating flush buffers (timing.flush_buffers) as a fourth:
    docs/archive/performance-rounds.md, round 22."""
    from rooflab.kernel import load_kernel, torch_dtype
    from rooflab.cell import _kw

    modes = {
        "sweep timing": sweep_timing(warm_translations=False),
        "translations warmed": sweep_timing(warm_translations=True)
    }
    rows = []
    for name, impl, dtype_name, n in PLACEMENT_CELLS:
        kernel = load_kernel(name)
        keep, fns = [], []
        for p in range(placements):
            keep.append(torch.empty(p * 3 * (1 << 19), dtype=torch.uint8, device="cuda"))  # spacer
            inputs = kernel.make_inputs(n, torch_dtype(dtype_name), "cuda", seed=0)
            keep.append(inputs)
            fns.append((p, inputs, kernel.impls[impl](inputs, **_kw(kernel, "fwd"))))
        fns.append(("0 again", ) + fns[0][1:])
        for p, inputs, fn in fns:  # the two modes interleaved per allocation, so drift does not tell them apart
            for mode, mode_cfg in modes.items():
                fn()
                torch.cuda.synchronize()
                r = measure(fn, timer, mode_cfg, inputs=[inputs])
                ptr = inputs[0].data_ptr()
                rows.append({
                    "kernel": "placement",
                    "n": n,
                    "dtype": dtype_name,
                    "variant": f"{name} {impl} | {mode} | placement {p} | x at {ptr % (2 << 20) >> 10} KiB "
                    f"of 2 MiB",
                    "median_us": r["median_ms"] * 1e3,
                    "n_samples": r["n_samples"]
                })
        del keep, fns, inputs, fn
        torch.cuda.empty_cache()
    return rows


def run_placement(run):
    run.rows += placement_rows(run.timer)


def placement_summary(df) -> str:
    pl = df[df.kernel == "placement"]
    parts = pl.variant.str.split(" \\| ")
    spread = pl.assign(cell=parts.str[0], timer=parts.str[1]).groupby(["cell", "timer"], sort=False)["median_us"]
    return ("\nmedian by input placement (us)\n" + pl[["variant", "median_us", "n_samples"]].to_string(index=False) +
            "\n\nspread over the allocations, (max - min) / min, %\n" +
            (spread.max() / spread.min() - 1).mul(100).round(2).to_string())


DRIFT_CELLS = [("gelu", "triton", "bfloat16", 8192), ("softmax", "builtin", "bfloat16", 4096),
               ("gelu", "builtin", "float32", 8192)]


def drift_rows(timer, seconds=8.0, batch=16, idle_batches=150, idle_s=0.02):
    """How does one cell's time wander while nothing about it changes? Each cell with the sweep's settings (4
    placements), sampled in batches of `batch` samples (about 3 ms) back to back for `seconds`, then in
    `idle_batches` batches with `idle_s` of idle time before each (as between the sweep's cells). One row per batch:
    its host time and median. The spread of batch medians against the averaging window (printed) says over what
    time a cell must be sampled for two runs to agree, which the standard error of back-to-back samples cannot."""
    import numpy as np

    from rooflab.kernel import load_kernel
    from rooflab.timers import Rotation

    cfg = sweep_timing()
    rows = []
    for name, impl, dtype_name, n in DRIFT_CELLS:
        sets, fns = placement_fns(load_kernel(name), impl, n, dtype_name, "fwd", cfg.placements)
        rot = Rotation(fns)
        for one in rot.fns:
            one()
        timer.warmup(rot, cfg.warmup_ms)
        t0 = time.perf_counter()
        for mode in ("back to back", f"{idle_s * 1e3:.0f} ms idle before each batch"):
            i = 0
            while (time.perf_counter() - t0 < seconds) if mode == "back to back" else i < idle_batches:
                if mode != "back to back":
                    torch.cuda.synchronize()
                    time.sleep(idle_s)
                rot.calls = 0
                x = timer.sample(rot, batch)
                rows.append({
                    "kernel": "drift",
                    "n": n,
                    "dtype": dtype_name,
                    "variant": f"{name} {impl} | {mode}",
                    "batch": i,
                    "t_s": time.perf_counter() - t0,
                    "median_us": float(np.median(x)) * 1e3,
                    "n_samples": batch
                })
                i += 1
        del rot, sets, fns
        torch.cuda.empty_cache()
    return rows


def drift_summary(df) -> str:
    """Per cell and mode: the relative standard deviation of the means of k consecutive batch medians, for k = 1,
    4, 16, 64 (how fast averaging over a longer time takes the wander out)."""
    lines = ["relative SD (%) of the mean of k consecutive batch medians (k = 1, 4, 16, 64), batches, span (s)"]
    for variant, g in df.groupby("variant", sort=False):
        x = g["median_us"].to_numpy()
        sds = []
        for k in (1, 4, 16, 64):
            m = x[:len(x) // k * k].reshape(-1, k).mean(axis=1)
            sds.append(f"{100 * m.std(ddof=1) / m.mean():.2f}" if m.size > 2 else "-")
        lines.append(f"  {variant}: {' / '.join(sds)}, {len(x)}, {g.t_s.max() - g.t_s.min():.1f}")
    return "\n".join(lines)


def run_drift(run):
    run.rows += drift_rows(run.timer)


INSTANCE_CELLS = [("gelu", "triton", "bfloat16", 8192, "fwd"), ("gelu", "builtin", "float32", 8192, "fwd"),
                  ("softmax", "builtin", "float32", 8192, "fwd+bwd")]


def instance_rows(timer, instances=8):
    """Which part of a cell's setup carries its offset? Between processes a cell's median moves by about 0.4 us
    whatever its length (45-650 us) and however long it is sampled. One cell timed `instances` times in this
    process, each time as the sweep does (placements, warm-up, hold sized in the warm-up, samples), changing one
    thing: "again" (same inputs, same timer), "new timer" (same inputs, a fresh timer: new flush buffer, new spin
    calibration), "new inputs" (fresh input sets, the earlier ones freed: the allocator may hand back the same
    blocks), "new inputs kept" (fresh input sets, the earlier ones kept alive: other memory each time)."""
    from rooflab.kernel import load_kernel

    cfg = sweep_timing()
    rows = []
    for name, impl, dtype_name, n, pass_ in INSTANCE_CELLS:
        kernel = load_kernel(name)

        def placements():
            return placement_fns(kernel, impl, n, dtype_name, pass_, cfg.placements)

        for mode in ("again", "new timer", "new inputs", "new inputs kept"):
            sets, fns = placements()
            kept = []
            for i in range(instances):
                t = timer
                if mode == "new timer":
                    t = timer_for("cuda", cfg)
                elif mode.startswith("new inputs") and i:
                    if mode == "new inputs kept":
                        kept.append((sets, fns))
                    del sets, fns
                    sets, fns = placements()
                r = measure(fns, t, cfg)
                rows.append({
                    "kernel": "instance",
                    "n": n,
                    "dtype": dtype_name,
                    "variant": f"{name} {impl} {pass_} | {mode}",
                    "batch": i,
                    "median_us": r["median_ms"] * 1e3,
                    "placement_sd_rel": r["placement_sd_rel"],
                    "hold_us": r["hold_us"],
                    "n_samples": r["n_samples"],
                    "x_mib": sets[0][0].data_ptr() >> 20
                })
            del sets, fns, kept
            torch.cuda.empty_cache()
    return rows


def run_instances(run):
    run.rows += instance_rows(run.timer)


def instances_summary(df) -> str:
    inst = df[df.kernel == "instance"].groupby("variant", sort=False)["median_us"]
    return ("\none cell timed again in this process: median (us) of each instance\n" +
            inst.agg(lambda x: " ".join(f"{v:.2f}" for v in x)).to_string() + "\n\nspread (max - min, us) / SD (us)\n" +
            pd.concat([inst.max() - inst.min(), inst.std()], axis=1).round(3).to_string())
