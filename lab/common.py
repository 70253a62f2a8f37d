"""What every lab section shares: timing one variant, checking it against the default, interleaving readings,
swapping a kernel's tables for a call, torch.compile of a kernel, the sweep's timing, and one call's rows."""
import dataclasses
import sys
from pathlib import Path

import torch

from rooflab.timers import CudaEventTimer
from rooflab.timing import TimingConfig, measure

REPO = Path(__file__).resolve().parent.parent
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def dtype_key(dtype) -> str:
    """A torch dtype's name as the kernels' byte models and the sweep's tolerances key it ("bfloat16")."""
    return str(dtype).removeprefix("torch.")


def by_dtype(variants):
    """A section that takes a torch dtype, called with the dtype's name as --dtypes gives it."""
    return lambda n, d: variants(n, DTYPES[d])


def timed(fn, timer, cfg):
    """fn's median (ms) under timer and cfg; NaN for a variant that fails (too many registers is a result)."""
    try:
        fn()
        torch.cuda.synchronize()
        return measure(fn, timer, cfg)["median_ms"]
    except Exception as exc:  # a variant that does not compile (too many registers) is a result, not a crash
        print(f"  variant failed: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr)
        return float("nan")


def compiled(name, n, dtype, device="cuda"):
    """torch.compile of a kernel's naive expression on its own inputs (compiled here, outside the timing)."""
    from rooflab.kernel import load_kernel
    from rooflab.cell import _kw

    kernel = load_kernel(name)
    fn = torch.compile(kernel.naive_fn, fullgraph=True, dynamic=False)  # no dynamo reset: others stay compiled
    inputs, kw = kernel.make_inputs(n, dtype, device), _kw(kernel, "fwd")
    fn(*inputs, **kw)
    return lambda: fn(*inputs, **kw)


def checked(fn, ref, dtype, what):
    """fn, once checked against ref (relative error norm within the dtype's sweep tolerance). A variant that fails or
    is wrong is no result: it raises when timed, so its time is NaN."""
    from rooflab.kernel import DEFAULT_TOLERANCE
    from rooflab.cell import relative_error

    tol = DEFAULT_TOLERANCE[dtype_key(dtype)]
    try:
        err, _ = relative_error(fn(), ref)
    except Exception as exc:
        print(f"  {what} variant failed: {type(exc).__name__}: {str(exc)[:160]}", file=sys.stderr)
        return lambda: (_ for _ in ()).throw(RuntimeError("failed"))
    if not err <= tol:
        print(f"  {what} variant wrong: relative error {err:.3g} > {tol}", file=sys.stderr)
        return lambda: (_ for _ in ()).throw(RuntimeError("wrong"))
    return fn


def swapped(module, fn, **tables):
    """fn with the module's attributes set to tables for the call (and restored after): the same kernel source
    launched as an earlier default, or with one of its choices turned off."""
    unknown = [k for k in tables if not hasattr(module, k)]
    if unknown:
        name = getattr(module, "__name__", module)
        raise AttributeError(f"{name} has no {unknown}: a renamed table would be swapped for nothing")

    def call():
        saved = {k: getattr(module, k) for k in tables}
        for k, v in tables.items():
            setattr(module, k, v)
        try:
            return fn()
        finally:
            for k, v in saved.items():
                setattr(module, k, v)

    return call


def readings(kinds, times=3):
    """{variant: fn} with every kind timed `times` times, interleaved, each checked once against the first kind
    (checked: a wrong or failing kind is timed as NaN)."""
    from rooflab.cell import relative_error

    ref = next(iter(kinds.values()))()
    dtype = (ref[0] if isinstance(ref, (tuple, list)) else ref).dtype
    kinds = {name: checked(fn, ref, dtype, name) for name, fn in kinds.items()}
    for name, fn in kinds.items():
        try:
            err, _ = relative_error(fn(), ref)
            print(f"  {name}: relative error against the default {err:.2g}", file=sys.stderr)
        except RuntimeError:
            pass  # checked() said why
    return interleaved(kinds, times)


def interleaved(kinds, times=3):
    """{variant: fn} with every kind `times` times, in turn (the second reading of "x" named "x (2)")."""
    return {name if rep == 0 else f"{name} ({rep + 1})": fn for rep in range(times) for name, fn in kinds.items()}


def sweep_timing(**changes) -> TimingConfig:
    """The sweep's timing (the DAG's default config here), with one start, no loop, and `changes`: a probe times one
    start at a time unless it asks otherwise (docs/decisions.md: timing)."""
    import yaml

    from rooflab.config import default_configfile

    sweep = yaml.safe_load(Path(default_configfile(REPO)).read_text()).get("timing", {})
    return dataclasses.replace(TimingConfig.from_config(sweep), **({"loop_ms": 0, "instances": 1} | changes))


def placement_fns(kernel, impl: str, n: int, dtype_name: str, pass_: str, count: int):
    """`count` input sets of one cell (same seed, so same values, at distinct addresses) and a closure over each, as
    rooflab/cell.run_cell builds them."""
    from rooflab.kernel import torch_dtype
    from rooflab.cell import _kw

    sets = [kernel.make_inputs(n, torch_dtype(dtype_name), "cuda", seed=0) for _ in range(count)]
    return sets, [kernel.impls[impl](one, **_kw(kernel, pass_)) for one in sets]


@dataclasses.dataclass
class Run:
    """One `python -m lab` call: its options, the timer and timing every variant is measured with, the copy rate
    measured first (what `of_copy` divides by) and the rows the CSV keeps."""
    args: object
    timer: CudaEventTimer
    cfg: TimingConfig
    copy_gbps: float
    rows: list = dataclasses.field(default_factory=list)

    def record(self, kernel, n, dtype, name, ms, moved=None, flops=None):
        r = {"kernel": kernel, "n": n, "dtype": dtype, "variant": name, "median_us": ms * 1e3}
        if moved:
            r.update(gbps=moved / ms / 1e6, of_copy=moved / ms / 1e6 / self.copy_gbps)
        if flops:
            r["tflops"] = flops / ms / 1e9
        self.rows.append(r)
