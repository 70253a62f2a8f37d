"""Compile ahead: the torch.compile graphs of the cells a GPU run is about to time, built in background processes
while the GPU times other cells (issue 25: the H200 sweep spent ~270 s of its ~800 in torch.compile's cold calls).

The DAG's onstart (Snakefile) writes the measurement jobs that will run, in the order their priorities give, and
starts this module detached: ``lanes`` worker processes take the jobs in turn and, for every compile cell the job's
cell store does not already hold, trace and compile the cell's expression exactly as the cell will (rooflab/cell.compiled_factory:
the same function, shapes, dtypes, math mode, fullgraph, static shapes), with a backend that runs Inductor and then stops
before the compiled code is called. Where a kernel autotunes (matmul, attention: seconds of compiling per set of
configs), its Triton cells too: in a lane every Triton launch compiles into Triton's cache and returns without
launching, and the autotuners time nothing, so every config compiles. A lane times nothing; on the GPU it runs
only the inputs' random fill and the wrappers' small torch ops, beside the measurement. The measurement's own cold call then loads the
graph from Inductor's FX graph cache (on this repository's CPU machine a LayerNorm fwd+bwd graph 2.5 s cold, 0.2 s
so; on the H200 0.1-0.2 s a cell against 0.74 s uncached) and the binaries from Triton's, and autotunes
by timing as before. Its cold_ms is then the warm-cache cost. A cell the lanes have not reached compiles in the
measurement as before; a failure here is logged and changes nothing.

    python -m experiments.warm logs/warm/jobs.json [--lanes 4]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

log = logging.getLogger("rooflab.warm")

# Lanes beside the measurement: each one Python process compiling one graph at a time (Inductor's own compile
# workers off), so the measurement keeps its cores; at most 4, and none on a host of fewer than 8 cores.
MAX_LANES = 4
MIN_CORES = 8


def lanes_for(cores: int | None = None) -> int:
    cores = (os.cpu_count() or 1) if cores is None else cores
    return 0 if cores < MIN_CORES else min(MAX_LANES, (cores - 2) // 3)


class _Compiled(Exception):
    """Raised in place of running the compiled graph: Inductor has compiled it (and written its caches)."""


def _compile_only(gm, example_inputs):
    import contextlib

    import torch._functorch.config as functorch_config
    from torch._inductor.compile_fx import compile_fx

    # a fwd+bwd cell's forward runs on inputs that require grad: AOTAutograd compiles its backward only at the first
    # .backward(), which never comes here, unless told to lower it now (torch's flag, where this torch has it)
    eager_backward = functorch_config.patch(force_non_lazy_backward_lowering=True) \
        if hasattr(functorch_config, "force_non_lazy_backward_lowering") else contextlib.nullcontext()
    with eager_backward:
        compile_fx(gm, example_inputs)  # what backend="inductor" calls: the same graphs, the same FX graph cache keys

    def stop(*args):
        raise _Compiled

    return stop


def warm_job(job: dict) -> tuple[str, int, int, float]:
    """(kernel, compiled, skipped, seconds) for one measurement job's compile cells (and Triton cells, where the
    kernel autotunes)."""
    import torch

    from experiments.measure import cell_store, cells_for, checkpoint_identity
    from rooflab import store
    from rooflab.cell import _kw, cell_shape, compiled_factory, memory_skip_reason, skip_reason
    from rooflab.kernel import load_kernel, math_mode, torch_dtype
    from rooflab.kernel_facts import autotuners

    t0 = time.perf_counter()
    kernel, params, device = load_kernel(job["kernel"]), job["params"], job.get("device", "cuda")
    if kernel.naive_fn is None:
        return kernel.name, 0, 0, 0.0
    done = store.load(cell_store(job["out"]), checkpoint_identity(kernel, params), kernel.name)
    # our Triton cells too where the kernel autotunes (matmul, attention: seconds of compiling per config set)
    impls = {"compile"} | ({"triton"} if device == "cuda" and autotuners(kernel.module) else set())
    compiled = skipped = 0
    for cell in cells_for(kernel, params):
        if cell.impl not in impls or cell.key in done or skip_reason(kernel, cell, device, 0):
            continue
        _, _, at = cell_shape(kernel, cell)
        try:
            if memory_skip_reason(float(kernel.bytes(at, cell.dtype, **_kw(kernel, cell.pass_))), device):
                skipped += 1
                continue
            with math_mode(cell.dtype):
                inputs = kernel.make_inputs(at, torch_dtype(cell.dtype), device, int(params.get("seed", 0)))
                if cell.impl == "triton":  # launches compile and stop here (_triton_compile_only)
                    kernel.impls["triton"](inputs, **_kw(kernel, cell.pass_))()
                    compiled += 1
                    del inputs
                    if device == "cuda":
                        torch.cuda.empty_cache()
                    continue
                factory, _ = compiled_factory(kernel, backend=_compile_only)  # the cell's own torch.compile call
                try:
                    factory(inputs, **_kw(kernel, cell.pass_))()
                except _Compiled:
                    compiled += 1
            del inputs
            if device == "cuda":
                torch.cuda.empty_cache()  # the lane holds no blocks while the measurement sizes its placements
        except Exception as exc:  # the measurement compiles it itself, and says so if it fails
            log.warning("%s: not warmed: %s: %s", cell, type(exc).__name__, str(exc)[:300])
            skipped += 1
    return kernel.name, compiled, skipped, time.perf_counter() - t0


def _triton_compile_only() -> None:
    """In a lane, every Triton launch compiles (into Triton's cache) and returns without launching, and the
    autotuners time nothing (rooflab.triton_utils.COMPILE_ONLY): each config of each key compiles, none runs. The
    measurement then loads the binaries and times the configs itself."""
    from triton.runtime.jit import JITFunction

    from rooflab import triton_utils

    launch = JITFunction.run

    def run(self, *args, grid, warmup, **kwargs):
        return launch(self, *args, grid=grid, warmup=True, **kwargs)

    JITFunction.run = run
    triton_utils.COMPILE_ONLY = True


def _lane_setup(cache_dirs: dict) -> None:
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"  # before torch: one lane, one core
    # the autotuners' fake timings of a lane must never reach Triton's disk cache of autotuning results
    os.environ["TRITON_CACHE_AUTOTUNING"] = "0"
    from rooflab.device import set_cache_dirs

    set_cache_dirs(cache_dirs)  # the measurement's folders, Triton's set even where it is the default
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", force=True)
    try:
        os.nice(10)
    except OSError:
        pass
    _triton_compile_only()
    from kernels._shared import fastlaunch as _fastlaunch

    _fastlaunch._override = "off"  # every launch through Triton's dispatch (patched): never a kept raw launcher


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spec", help="JSON: {'jobs': [{'kernel', 'out', 'params'}, ...]} in measurement order")
    ap.add_argument("--lanes", type=int, default=None)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    jobs = json.loads(Path(args.spec).read_text())["jobs"]
    lanes = args.lanes if args.lanes is not None else lanes_for()
    if not jobs or lanes < 1:
        log.info("nothing to warm (%d jobs, %d lanes)", len(jobs), lanes)
        return 0
    cache_dirs = jobs[0]["params"].get("cache_dirs") or {}
    t0 = time.perf_counter()
    import multiprocessing

    with ProcessPoolExecutor(lanes, mp_context=multiprocessing.get_context("spawn"), initializer=_lane_setup,
                             initargs=(cache_dirs, )) as pool:
        for kernel, compiled, skipped, seconds in pool.map(warm_job, jobs):
            log.info("%s: %d cells warmed, %d not, in %.1f s (%.1f s since the start)", kernel, compiled, skipped,
                     seconds,
                     time.perf_counter() - t0)
    return 0


def start(jobs: list[dict], spec: Path, log_file: Path, lanes: int | None = None, pid_file: Path | None = None) -> int:
    """Write the spec and start the lanes detached, in a process group of their own whose id goes to ``pid_file``
    (stop() ends it); returns the number of lanes (0: none started). ``lanes`` None: lanes_for() of this host."""
    import subprocess

    lanes = lanes_for() if lanes is None else lanes
    if not jobs or lanes < 1:
        return 0
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(json.dumps({"jobs": jobs}, default=str))
    with open(log_file, "w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "experiments.warm",
             str(spec), "--lanes", str(lanes)], stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    if pid_file is not None:
        pid_file.write_text(f"{proc.pid}\n")
    return lanes


def stop(pid_file: Path) -> bool:
    """End the lanes' process group named in ``pid_file`` if it still runs (its id is the driver's pid: the lanes
    were started in a session of their own); True if there was one."""
    import signal

    try:
        pgid = int(Path(pid_file).read_text())
        Path(pid_file).unlink()
        os.killpg(pgid, signal.SIGTERM)
        return True
    except (OSError, ValueError):  # no file, or the group is gone
        return False


if __name__ == "__main__":
    sys.exit(main())
