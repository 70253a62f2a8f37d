"""Kernel-launch profiles: which kernels one call of each (kernel, impl, dtype[, pass]) launches, at one size,
written to results/raw/{gpu}/profiles/{kernel}.parquet (one job per kernel; the committed reference keeps one
profiles.parquet).

The evidence behind "fusion": naive GeLU launches several CUDA kernels (one per PyTorch operation), F.gelu, the
fused Triton kernel and a working torch.compile launch one. torch.compile silently running eager (dynamo's
recompile limit) shows up here as the naive count.

Method: build the inputs, call the implementation a few times first (Triton JIT, autotuning and Inductor
compilation happen there, so their kernels are not counted), then profile exactly one call with torch.profiler.
- GPU (activity 'cuda'): n_kernels counts the CUDA kernels the call launched (memcpy/memset excluded, listed in
  n_memops); kernel_names lists them in launch order, '; '-joined.
- CPU (activity 'cpu_aten'): there are no kernels. n_kernels counts the top-level aten operator calls (allocation
  and view ops excluded) and the C++ kernels Inductor generated, each one pass over memory, the CPU's nearest
  analogue of a launch. The
  Triton impl (the interpreter's numpy work) is skipped. Labelled, so no one reads it as CUDA.
A cell that fails is a row with status 'failed' and the error: this job never fails the DAG for one cell.
"""

import logging
import traceback

log = logging.getLogger("rooflab.profiles")

PROFILE_COLUMNS = [
    "gpu", "kernel", "impl", "dtype", "size", "pass", "activity", "n_kernels", "kernel_names", "n_memops",
    "compile_fallback", "status", "error", "git_sha", "device_name", "torch", "triton", "timestamp"
]
WARMUP_CALLS = 3
INDUCTOR_CPP_KERNEL = "cpp_fused"  # how Inductor names the C++ kernels it generates for the CPU
# aten ops that allocate or re-view memory without a pass over it: not counted as "kernels" on the CPU.
NO_PASS_OPS = {
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::view", "aten::reshape", "aten::_reshape_alias",
    "aten::as_strided", "aten::t", "aten::transpose", "aten::expand", "aten::detach", "aten::alias", "aten::resize_",
    "aten::lift_fresh", "aten::unsqueeze", "aten::squeeze", "aten::permute", "aten::slice", "aten::select",
    "aten::_unsafe_view", "aten::set_", "aten::result_type", "aten::is_nonzero", "aten::item",
    "aten::_local_scalar_dense", "aten::contiguous", "aten::numpy_T"
}


def profile_inductor_cpp() -> None:
    """On the CPU, Inductor's C++ kernels appear in the profiler's events only with this switch. An Inductor config
    change misses its graph cache, so the measure job sets it before its cells too: the profile then reuses their
    compiled graphs instead of compiling each one's C++ again (about 2 s a graph on the 2-core machine)."""
    import torch._inductor.config

    torch._inductor.config.cpp.enable_kernel_profile = True


def cell_callable(kernel, impl: str, dtype: str, size: int, pass_: str, device: str, seed: int = 0):
    """The zero-argument closure the sweep times for one cell (inputs built here, outside any timed region).

    The returned function carries ``fell_back`` (a probe: did torch.compile run eager?) for a torch.compile impl.
    """
    from rooflab.kernel import COMPILE_MODES, torch_dtype
    from rooflab.cell import _kw, compiled_factory

    kw = _kw(kernel, pass_)
    inputs = kernel.make_inputs(int(size), torch_dtype(dtype), device, seed)
    fell_back = None
    if impl in COMPILE_MODES:
        factory, fell_back = compiled_factory(kernel, mode=COMPILE_MODES[impl])
    else:
        factory = kernel.impls[impl]
    fn = factory(inputs, **kw)
    fn.fell_back = fell_back  # type: ignore[attr-defined]
    return fn


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def launched_kernels(fn, device: str) -> tuple[str, list[str], int]:
    """Profile one call of fn: (activity, names of the kernels (or top-level aten ops) in order, memops)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    if device == "cuda":
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn()
            _sync(device)
        names, memops = [], 0
        events = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA),
                        key=lambda e: e.time_range.start)
        for e in events:
            if e.name.startswith(("Memcpy", "Memset")):
                memops += 1
            else:
                names.append(e.name)
        return "cuda", names, memops

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    names = []
    for e in sorted(prof.events(), key=lambda e: e.time_range.start):
        if e.device_type != DeviceType.CPU:
            continue
        if INDUCTOR_CPP_KERNEL in e.name:  # graph_0_cpp_fused_add_mul_tanh_0 (needs enable_kernel_profile)
            names.append(e.name)
            continue
        if not e.name.startswith("aten::"):
            continue
        parent = e.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent  # a top-level op may sit under a record_function (torch.compile's region)
        if parent is None and e.name not in NO_PASS_OPS:
            names.append(e.name)
    return "cpu_aten", names, 0


def profile_cell(kernel, impl: str, dtype: str, size: int, pass_: str, device: str, interpret_max_size: int = 0,
                 seed: int = 0) -> dict:
    """One row: skipped (with the reason), failed (with the error), or the launched kernels."""
    from rooflab.cell import Cell, skip_reason

    row = {
        "kernel": kernel.name,
        "impl": impl,
        "dtype": dtype,
        "size": int(size),
        "pass": pass_,
        "activity": "cuda" if device == "cuda" else "cpu_aten",
        "status": "failed",
        "error": "",
        "compile_fallback": False
    }
    try:
        reason = skip_reason(kernel, Cell(kernel.name, impl, dtype, int(size), pass_), device, interpret_max_size)
        if not reason and device == "cpu" and impl == "triton":
            reason = "Triton runs under TRITON_INTERPRET=1 on the CPU: numpy work, no kernels or aten ops to count"
        if reason:
            return {**row, "status": "skipped", "error": reason}
        fn = cell_callable(kernel, impl, dtype, size, pass_, device, seed)
        for _ in range(WARMUP_CALLS):  # compile, autotune, trace: none of that is the call's own kernels
            fn()
        _sync(device)
        if fn.fell_back is not None:
            row["compile_fallback"] = bool(fn.fell_back())
        activity, names, memops = launched_kernels(fn, device)
        row.update(activity=activity, n_kernels=len(names), kernel_names="; ".join(names), n_memops=memops, status="ok")
    except Exception as exc:  # one bad cell must not cost the rest
        log.error("%s %s %s %s failed:\n%s", kernel.name, impl, dtype, pass_, traceback.format_exc())
        row.update(status="failed", error=f"{type(exc).__name__}: {exc}"[:2000])
        if device == "cuda":
            import torch

            torch.cuda.empty_cache()
    return row


def run(gpu: str, kernels, out: str, params: dict) -> None:
    import pandas as pd

    from rooflab.device import check_device, prepare_environment
    from rooflab.io import write_parquet
    from rooflab.kernel import impls_for, load_kernel
    from rooflab.provenance import provenance

    prepare_environment(gpu, params)
    device, _ = check_device(gpu)
    if device == "cpu":
        profile_inductor_cpp()
    size = int(params.get("size", 4096))
    rows = []
    for name in kernels:
        try:
            kernel = load_kernel(name)
        except Exception as exc:
            rows.append({"kernel": name, "status": "failed", "error": f"{type(exc).__name__}: {exc}"[:2000]})
            continue
        dtypes = [d for d in (params.get("dtypes") or kernel.dtypes) if d in kernel.dtypes]
        for pass_ in kernel.passes:
            for dtype in dtypes:
                for impl in impls_for(name, params):
                    row = profile_cell(kernel, impl, dtype, size, pass_, device,
                                       int(params.get("interpret_max_size", 0)), int(params.get("seed", 0)))
                    log.info("%-10s %-8s %-9s %-7s %-8s %s", name, impl, dtype, pass_, row["status"],
                             row.get("kernel_names", "") if row["status"] == "ok" else row["error"])
                    rows.append(row)
    prov = provenance(params)
    df = pd.DataFrame([{**r, "gpu": gpu, **prov} for r in rows])
    df = df.reindex(columns=PROFILE_COLUMNS + [c for c in df.columns if c not in PROFILE_COLUMNS])
    df = df.astype({
        "size": "Int64",
        "n_kernels": "Int64",
        "n_memops": "Int64",
        "compile_fallback": "boolean",
        **{
            c: "string"
            for c in ("gpu", "kernel", "impl", "dtype", "pass", "activity", "kernel_names", "status", "error")
        }
    })
    write_parquet(df, out)
