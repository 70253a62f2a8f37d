"""Compiled-kernel facts of every Triton kernel (and autotune config) the sweep launches, written to
results/raw/{gpu}/compiled/{kernel}.parquet (one job per kernel; the committed reference keeps one compiled.parquet).

For each kernel file, each pass and dtype, and each size (config profile.size, plus extra_sizes, whose odd shapes
change Triton's specialisation), the Triton implementation runs once while every JITFunction of the kernels.*
modules records the CompiledKernel its ``run`` returns (autotuning benchmarks every pruned config through ``run``,
so each config appears, the chosen one flagged ``autotune_best``). From each compiled kernel, with no profiler:
registers per thread and spills (from the driver's cuModuleLoad, CompiledKernel.n_regs / n_spills), shared memory,
num_warps, num_stages, the PTX's global loads and stores by vector width, and the theoretical occupancy those
imply (rooflab/kernel_facts.py).

On the CPU, Triton's interpreter compiles nothing: the file keeps the schema with one 'skipped' row per kernel
saying so. A kernel that fails is a 'failed' row with the error; this job never fails the DAG for one kernel.
"""

import logging
import sys
import traceback

log = logging.getLogger("rooflab.kernel_facts")

COMPILED_COLUMNS = [
    "gpu", "kernel", "pass", "dtype", "size", "status", "error", "function", "kernel_name", "signature", "constexprs",
    "num_warps", "num_stages", "threads_per_block", "n_regs", "n_spills", "shared_bytes", "autotuned", "autotune_best",
    "autotune_config", "autotune_ms", "config_ms", "blocks_per_sm", "warps_per_sm", "occupancy", "occupancy_limiter",
    "blocks_by_regs", "blocks_by_smem", "blocks_by_warps", "ld_global_v4", "ld_global_v2", "ld_global_scalar",
    "ld_global_max_bits", "st_global_v4", "st_global_v2", "st_global_scalar", "st_global_max_bits", "arch", "git_sha",
    "device_name", "triton", "torch", "timestamp",
]
CPU_NOTE = "Triton runs under TRITON_INTERPRET=1 on the CPU: nothing is compiled, so there are no compiled facts"


def triton_objects(modules):
    """(JITFunctions, Autotuners) found as attributes of the given modules, each once.

    An Autotuner (or Heuristics) wraps a JITFunction in ``.fn``, possibly through several layers.
    """
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction, KernelInterface

    jits, tuners = {}, {}
    for module in modules:
        for obj in list(vars(module).values()):
            for _ in range(8):  # unwrap Autotuner / Heuristics layers down to the JITFunction
                if isinstance(obj, JITFunction):
                    jits[id(obj)] = obj
                    break
                if isinstance(obj, Autotuner):
                    tuners[id(obj)] = obj
                if not isinstance(obj, KernelInterface):
                    break
                obj = getattr(obj, "fn", None)
    return list(jits.values()), list(tuners.values())


def _inner_jit(tuner):
    from triton.runtime.jit import JITFunction

    fn = tuner
    for _ in range(8):
        fn = getattr(fn, "fn", None)
        if fn is None or isinstance(fn, JITFunction):
            return fn
    return None


class LaunchRecorder:
    """Wrap ``run`` of each JITFunction (an instance attribute, so ``jit[grid](...)`` and the autotuner's
    ``self.fn.run(...)`` both go through it) and keep every CompiledKernel it returns, in launch order."""

    def __init__(self, jits):
        self.jits = jits
        self.launched = []  # (jit, compiled kernel)

    def __enter__(self):
        for jit in self.jits:
            original = jit.run

            def run(*args, _jit=jit, _original=original, **kwargs):
                kernel = _original(*args, **kwargs)
                if kernel is not None:
                    self.launched.append((_jit, kernel))
                return kernel

            jit.run = run
        return self

    def __exit__(self, *exc):
        for jit in self.jits:
            jit.__dict__.pop("run", None)  # back to the class's method
        return False


def _is_config(cfg, consts: dict, num_warps: int, num_stages: int) -> bool:
    """Whether a triton.Config is the one a compiled kernel was built with."""
    kwargs = getattr(cfg, "kwargs", None) or {}
    return (all(str(consts.get(k)) == str(v) for k, v in kwargs.items())
            and getattr(cfg, "num_warps", num_warps) == num_warps
            and getattr(cfg, "num_stages", num_stages) == num_stages)


def _constexprs(kernel) -> dict:
    """The compile-time constants of a CompiledKernel by argument name (best effort across triton versions)."""
    src = getattr(kernel, "src", None)
    consts = getattr(src, "constants", None) or {}
    names = list(getattr(getattr(src, "fn", None), "arg_names", []) or [])
    out = {}
    for key, value in consts.items():
        idx = key[0] if isinstance(key, tuple) and len(key) == 1 else key
        name = names[idx] if isinstance(idx, int) and idx < len(names) else str(key)
        if isinstance(value, (bool, int, float, str)):
            out[name] = value
    return out


def _signature(kernel) -> str:
    sig = getattr(getattr(kernel, "src", None), "signature", None) or {}
    try:
        return ", ".join(f"{k}: {v}" for k, v in sig.items() if v != "constexpr")
    except Exception:
        return str(sig)


def kernel_facts(jit, kernel, tuner, limits) -> dict:
    """One row of facts from a CompiledKernel (after at least one launch, so n_regs is known)."""
    from rooflab.kernel_facts import global_access_widths, occupancy

    if getattr(kernel, "n_regs", None) is None and hasattr(kernel, "_init_handles"):
        kernel._init_handles()  # loads the binary: n_regs and n_spills come from the driver
    md = kernel.metadata
    warp_size = getattr(getattr(md, "target", None), "warp_size", 32) or 32
    num_warps = int(getattr(md, "num_warps", 0))
    shared = int(getattr(md, "shared", 0) or 0)
    n_regs = int(getattr(kernel, "n_regs", -1))
    consts = _constexprs(kernel)
    row = {
        "function": getattr(jit, "__name__", None) or jit.fn.__name__,
        "kernel_name": getattr(kernel, "name", "") or getattr(md, "name", ""),
        "signature": _signature(kernel),
        "constexprs": str(consts),
        "num_warps": num_warps,
        "num_stages": int(getattr(md, "num_stages", 0)),
        "threads_per_block": num_warps * warp_size,
        "n_regs": n_regs,
        "n_spills": int(getattr(kernel, "n_spills", -1)),
        "shared_bytes": shared,
        "autotuned": tuner is not None,
        "autotune_best": False,
        "autotune_config": "",
        "autotune_ms": float("nan"),
        "config_ms": float("nan"),
        "arch": limits.arch,
    }
    row.update(occupancy(row["threads_per_block"], n_regs, shared, limits))
    asm = getattr(kernel, "asm", {}) or {}
    row.update(global_access_widths(asm.get("ptx", "") if hasattr(asm, "get") else ""))
    if tuner is not None:
        best = getattr(tuner, "best_config", None)
        row["autotune_config"] = str(best) if best is not None else ""
        row["autotune_best"] = best is not None and _is_config(best, consts, num_warps, row["num_stages"])
        bench = getattr(tuner, "bench_time", None)  # seconds spent benchmarking all configs (triton 3.x)
        row["autotune_ms"] = float(bench) * 1e3 if isinstance(bench, (int, float)) else float("nan")
        for cfg, timing in (getattr(tuner, "configs_timings", None) or {}).items():
            if _is_config(cfg, consts, num_warps, row["num_stages"]):
                t = timing[0] if isinstance(timing, (list, tuple)) else timing  # do_bench quantiles: median first
                row["config_ms"] = float(t)
    return row


def compiled_rows(kernel_name: str, gpu: str, sizes, seed: int = 0, dtypes=None) -> list[dict]:
    """Rows for one kernel file: every compiled Triton kernel launched by its triton impl, per pass/dtype/size."""
    import torch

    from experiments.profiles import cell_callable
    from rooflab.kernel_facts import limits_for
    from rooflab.kernel import load_kernel, math_mode

    kernel = load_kernel(kernel_name)
    if "triton" not in kernel.impls:
        return [{"kernel": kernel_name, "status": "skipped", "error": f"{kernel_name} has no triton impl"}]
    modules = [m for name, m in list(sys.modules.items()) if name == "kernels" or name.startswith("kernels.")]
    jits, tuners = triton_objects(modules)
    tuner_of = {id(_inner_jit(t)): t for t in tuners}
    major, minor = torch.cuda.get_device_capability()
    limits = limits_for(10 * major + minor)
    rows = []
    for pass_ in kernel.passes:
        for dtype in [d for d in (dtypes or kernel.dtypes) if d in kernel.dtypes]:
            for size in sizes:
                base = {"kernel": kernel_name, "pass": pass_, "dtype": dtype, "size": int(size)}
                try:
                    with math_mode(dtype):  # a tf32 cell compiles its TF32 kernels, as the sweep does
                        fn = cell_callable(kernel, "triton", dtype, size, pass_, "cuda", seed)
                        # In the measuring process the autotuners already hold a choice for this size: emptied for
                        # the recorded call, so every pruned config runs (and is listed) and the timings are this
                        # size's, not those of the last size benchmarked; restored after
                        held = [(t, dict(t.cache)) for t in tuners if hasattr(t, "cache")]
                        for t, _ in held:
                            t.cache.clear()
                        try:
                            with LaunchRecorder(jits) as rec:
                                fn()
                                torch.cuda.synchronize()
                        finally:
                            for t, cache in held:
                                t.cache.update(cache)
                    seen = set()
                    for jit, ck in rec.launched:
                        if id(ck) in seen:
                            continue
                        seen.add(id(ck))
                        tuner = tuner_of.get(id(jit))
                        rows.append({**base, "status": "ok", "error": "", **kernel_facts(jit, ck, tuner, limits)})
                    if not seen:
                        rows.append({**base, "status": "skipped", "error": "no Triton kernel was launched"})
                    del fn
                except Exception as exc:  # one kernel must not cost the others
                    log.error("%s %s %s %s failed:\n%s", kernel_name, pass_, dtype, size, traceback.format_exc())
                    rows.append({**base, "status": "failed", "error": f"{type(exc).__name__}: {exc}"[:2000]})
                    if isinstance(exc, torch.cuda.OutOfMemoryError):
                        torch.cuda.empty_cache()
    return rows


def run(gpu: str, kernels, out: str, params: dict) -> None:
    import pandas as pd

    from rooflab.device import check_device, prepare_environment
    from rooflab.io import write_parquet
    from rooflab.provenance import provenance

    prepare_environment(gpu, params)
    device, _ = check_device(gpu)
    sizes = sorted({int(params.get("size", 4096))} | {int(s) for s in params.get("extra_sizes", []) or []})
    rows = []
    for name in kernels:
        if device == "cpu":
            rows.append({"kernel": name, "status": "skipped", "error": CPU_NOTE})
            continue
        try:
            rows += compiled_rows(name, gpu, sizes, int(params.get("seed", 0)), params.get("dtypes"))
        except Exception as exc:
            log.error("%s failed:\n%s", name, traceback.format_exc())
            rows.append({"kernel": name, "status": "failed", "error": f"{type(exc).__name__}: {exc}"[:2000]})
    prov = provenance(params)
    df = pd.DataFrame([{**r, "gpu": gpu, **prov} for r in rows])
    df = df.reindex(columns=COMPILED_COLUMNS + [c for c in df.columns if c not in COMPILED_COLUMNS])
    df = df.astype(_DTYPES)
    log.info("%d compiled-kernel rows for %s (%s)", len(df), gpu,
             ", ".join(f"{k}: {v}" for k, v in df["status"].value_counts().items()))
    write_parquet(df, out)


# Fixed dtypes, so an all-skipped CPU file has the same schema as a GPU one.
_INT = [
    "size", "num_warps", "num_stages", "threads_per_block", "n_regs", "n_spills", "shared_bytes", "blocks_per_sm",
    "warps_per_sm", "blocks_by_regs", "blocks_by_smem", "blocks_by_warps", "ld_global_v4", "ld_global_v2",
    "ld_global_scalar", "ld_global_max_bits", "st_global_v4", "st_global_v2", "st_global_scalar", "st_global_max_bits"
]
_DTYPES = {
    **{
        c: "Int64"
        for c in _INT
    },
    **{
        c: "float64"
        for c in ("autotune_ms", "config_ms", "occupancy")
    },
    **{
        c: "boolean"
        for c in ("autotuned", "autotune_best")
    },
    **{
        c: "string"
        for c in COMPILED_COLUMNS if c not in _INT and c not in ("autotune_ms", "config_ms", "occupancy", "autotuned", "autotune_best")
    }
}
