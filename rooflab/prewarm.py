"""Compile ahead of timing, in parallel: the cold call of every cell that compiles, in worker processes.

A cell's first call compiles (torch.compile's Inductor graph, our Triton kernels and their autotuner's configs, a
CUDA extension). One after another, in the timing process, that is the largest part of a cold sweep. Before a
measurement job times anything, ``prewarm`` makes each such cell's first call in a pool of worker processes, which
fills the on-disk caches (Triton's, Inductor's FX graphs, torch's extensions); the timing process then finds them
warm. Nothing the workers choose is kept: their autotuning ran on a shared GPU, so Inductor's autotune cache is off
in them and Triton's autotuner keeps its choice in memory only; the timing process autotunes again, alone on the
device, on kernels already compiled. Each row records the worker's first call as ``prewarm_ms`` (the compile cost
of a cold cache on a fresh machine) beside its own ``cold_ms`` (warm caches).

Off by default (config ``prewarm``): on the H200 the pool took 38 s for matmul's 28 Triton cells and the timing
process still spent about 90 s autotuning them (call S26): their compiles were not found in the cache, for a reason
not yet known. No timing overlaps the workers: the pool finishes before the first sample, inside the job that holds
the device.
A worker that fails leaves its cell to the timing process, which records the failure as it would have.
"""
from __future__ import annotations

import logging
import math
import multiprocessing
import os
import time

log = logging.getLogger("rooflab.prewarm")

MIN_CELLS = 4  # fewer than this: the pool's start-up (importing torch in each worker) costs more than it saves
MAX_WORKERS = 8


def _needs_prewarm(cell, device: str, autotuned: bool = True) -> bool:
    """Only our autotuned Triton kernels (matmul: each config compiles, IEEE fp32 ones for seconds) on a GPU. The
    rest compiles in about half a second a cell, which the pool's start-up and contention cost more than they
    save: on the H200 RMSNorm's 42 compiling cells took 15 s in 8 workers against 14 s one by one in the timing
    process (S24); on a 2-core host a softmax sweep took 116 s with workers, 92 s without."""
    return device == "cuda" and autotuned and cell.impl == "triton"


def workers_for(n_cells: int, cpus: int | None = None) -> int:
    """How many workers: one per cell, at most MAX_WORKERS, leaving a core to the host where there are several."""
    cpus = cpus or os.cpu_count() or 1
    return max(0, min(n_cells, MAX_WORKERS, cpus - 1 if cpus > 2 else cpus))


def prewarm(kernel, cells, gpu: str, params: dict) -> dict:
    """First calls of the compiling cells among ``cells`` in a worker pool; {cell key: first-call ms} (NaN where
    the worker failed or skipped). Nothing when too few cells compile or ``params['prewarm']`` is false."""
    from rooflab.kernel_facts import autotuners

    device = "cpu" if gpu == "cpu" else "cuda"
    tuned = bool(autotuners(kernel.module))
    todo = [c for c in cells if _needs_prewarm(c, device, tuned)]
    workers = workers_for(len(todo))
    if not params.get("prewarm", False) or len(todo) < MIN_CELLS or workers < 2:
        return {}
    todo.sort(key=lambda c: (c.impl != "cuda", c.impl != "triton", -int(c.size)))  # builds and long ones first
    t0 = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: no CUDA context inherited
    with ctx.Pool(workers, initializer=_init, initargs=(gpu, params)) as pool:
        out = dict(pool.imap_unordered(_first_call, [(kernel.name, c, device, params) for c in todo]))
    ok = sum(1 for v in out.values() if not math.isnan(v))
    log.info("prewarm %s: %d cells compiled in %d workers in %.1f s (%d failed or skipped: the timing process "
             "records why)", kernel.name, ok, workers, time.perf_counter() - t0, len(out) - ok)
    return out


def _init(gpu: str, params: dict) -> None:
    from rooflab.device import prepare_environment

    prepare_environment(gpu, params)
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"  # the pool is the parallelism
    import torch._inductor.config as inductor_config

    inductor_config.autotune_local_cache = False  # a choice made on a shared GPU is not kept for the timing process


def _first_call(args):
    kernel_name, cell, device, params = args
    try:
        from rooflab.cell import _kw, compiled_factory, memory_skip_reason, skip_reason, sync
        from rooflab.kernel import load_kernel, math_mode, torch_dtype

        kernel = load_kernel(kernel_name)
        kw = _kw(kernel, cell.pass_)
        if skip_reason(kernel, cell, device, int(params.get("interpret_max_size", 0))) or \
                memory_skip_reason(2 * float(kernel.bytes(cell.size, cell.dtype, **kw)), device):
            return cell.key, float("nan")
        with math_mode(cell.dtype):
            inputs = kernel.make_inputs(cell.size, torch_dtype(cell.dtype), device, int(params.get("seed", 0)))
            factory = compiled_factory(kernel)[0] if cell.impl == "compile" else kernel.impls[cell.impl]
            fn = factory(inputs, **kw)
            sync(device)
            t0 = time.perf_counter()
            fn()
            sync(device)
            return cell.key, (time.perf_counter() - t0) * 1e3
    except Exception as exc:  # the timing process meets it again and records it
        log.debug("prewarm of %s failed: %s", cell, exc)
        return cell.key, float("nan")


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

    from rooflab.cuda_ext import cuda_skip_reason
    from rooflab.kernel import kernel_names

    if cuda_skip_reason("cuda"):
        return []
    from torch.utils.cpp_extension import _get_build_directory

    started = []
    for name in kernel_names():
        source = Path(__file__).resolve().parent.parent / "kernels" / "cuda" / f"{name}.cu"
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
            subprocess.Popen([sys.executable, "-c", code], stdout=fh, stderr=subprocess.STDOUT,
                             start_new_session=True, preexec_fn=lambda: os.nice(19),
                             env={**os.environ, "MAX_JOBS": "4"})
        started.append(name)
    if started:
        log.info("building the CUDA extensions of %s in the background (logs in %s)", ", ".join(started), log_dir)
    return started
