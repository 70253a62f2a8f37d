"""One measurement cell: build inputs, run one implementation, check it against float64, time it, make a row.

A cell never raises: whatever goes wrong (compile error, shape assertion, out of memory) becomes a row with status
"failed" and the message, so one bad cell cannot cost the rest of a sweep.

Statuses: ok (checked and timed), not_timed (checked only: Triton under the CPU interpreter), mismatch (ran, wrong
answer: kept out of speedups and claims), failed (raised), skipped (not available here, with the reason).
"""
from __future__ import annotations

import functools
import time
from pathlib import Path
import traceback
from dataclasses import dataclass
from typing import Any

from rooflab import clocks
from rooflab.kernel_facts import autotune_facts, autotune_snapshot, autotuners
from rooflab.kernel import COMPILE_MODES, MATH_MODE, Kernel, differentiable, math_mode, math_mode_ran, torch_dtype
from rooflab.shapes import FAMILIES, SQUARE, elements, label, square_size
from rooflab.timing import TimingConfig, cudagraph_median_ms, measure, timer_for


@dataclass(frozen=True)
class Cell:
    """One cell: a kernel's implementation at a dtype, shape and pass. ``shape`` is in the kernel's family (empty:
    the square shape of ``size``); ``size`` is n for a square shape, None for any other; ``preset`` names the shape
    set it was swept in (rooflab/shapes.py)."""
    kernel: str
    impl: str
    dtype: str
    size: int | None
    pass_: str = "fwd"
    shape: tuple[int, ...] = ()
    preset: str = SQUARE

    @property
    def key(self) -> tuple:
        """What the cell store finds it by (rooflab/store.cell_key of its row)."""
        return (self.impl, self.dtype, label(self.shape) if self.shape else str(self.size), self.pass_)


def _kw(kernel: Kernel, pass_: str) -> dict:
    """Multi-pass kernels (e.g. softmax fwd and fwd+bwd) take pass_=...; single-pass kernels take nothing."""
    return {"pass_": pass_} if len(kernel.passes) > 1 else {}


def relative_error(out, ref) -> tuple[float, float]:
    """(||out - ref|| / ||ref||, max |out - ref|) over all output tensors, computed in float64."""
    import torch

    outs = out if isinstance(out, (tuple, list)) else (out, )
    refs = ref if isinstance(ref, (tuple, list)) else (ref, )
    if len(outs) != len(refs):
        raise ValueError(f"implementation returned {len(outs)} outputs, the reference {len(refs)}")
    num = den = 0.0
    max_abs = 0.0
    for o, r in zip(outs, refs):
        if tuple(o.shape) != tuple(r.shape):
            raise ValueError(f"output shape {tuple(o.shape)} differs from the reference's {tuple(r.shape)}")
        d = o.detach().to(device=r.device, dtype=torch.float64) - r
        num += float((d * d).sum())
        den += float((r * r).sum())
        max_abs = max(max_abs, float(d.abs().max()) if d.numel() else 0.0)
    rel = (num**0.5) / (den**0.5) if den > 0 else num**0.5
    return rel, max_abs


def compiled_factory(kernel: Kernel, backend="inductor", mode: str = "default"):
    """torch.compile of the naive expression, one fresh compiled callable per cell (shared by its input sets).

    The dynamo cache is reset for each cell so the recompile limit (8 by default) can never be reached across the
    sweep's shapes and dtypes; ``fullgraph=True`` turns a graph break into an error instead of a silent eager run.
    ``backend``: Inductor, as a user's torch.compile; the compile lanes (experiments/warm.py) pass one that
    compiles through Inductor and stops, so their graphs are the cells' own. fwd+bwd is the frame a training step
    runs: the forward compiled, called on inputs that require grad, then the backward AOTAutograd split from it, as
    every other implementation's (given forward and backward as one graph, Inductor may fuse them: RMSNorm bf16 8192 x
    14336 380 us against 456, data/reference/h200/compile_frames.csv). Returns (factory, fallback_probe): the probe
    says whether dynamo produced no graph (ran eager). ``mode``: torch.compile's (rooflab.kernel.COMPILE_MODES).
    """
    import torch
    import torch._dynamo
    from torch._dynamo.utils import counters

    state: dict[bool, Any] = {}  # the compiled callable, by whether the cell is fwd+bwd

    def make(inputs, **kw):
        fwd_bwd = kw.get("pass_") == "fwd+bwd"  # its forward alone: autograd records, AOTAutograd splits
        if fwd_bwd not in state:  # compiled once per cell; more input sets (placements) reuse it
            torch._dynamo.reset()
            counters.clear()
            target = functools.partial(_naive_forward, kernel.naive_fn) if fwd_bwd else kernel.naive_fn
            state[fwd_bwd] = torch.compile(target, fullgraph=True, dynamic=False, backend=backend,
                                           **({} if mode == "default" else {
                                               "mode": mode
                                           }))
        fn = state[fwd_bwd]
        if fwd_bwd:  # as a training step runs it: the forward, later its backward
            return differentiable(fn)(inputs, **kw)
        if kw:
            return lambda: fn(*inputs, **kw)
        return lambda: fn(*inputs)

    def fell_back() -> bool:
        return compiled_graphs() == 0

    return make, fell_back


def _naive_forward(naive_fn, *args):
    """The naive expression's forward on the inputs but the upstream gradient (naive_fn's signature)."""
    return naive_fn(*args, None, pass_="fwd")


def compiled_graphs() -> int:
    """Graphs dynamo traced since the last compiled_factory call built its callable: 1 for a cell compiled once,
    more where an input set after the first missed the guards (a recompile), 0 where it ran eager."""
    from torch._dynamo.utils import counters

    return int(counters["stats"].get("unique_graphs", 0))


def shape_columns(family: str, shape) -> dict[str, int]:
    """The shape's dimensions as numeric columns named by its family: dim_rows, dim_cols; dim_m, dim_k, dim_n."""
    return {f"dim_{name.lower()}": int(d) for name, d in zip(FAMILIES[family], shape)}


# The float64 check holds about this many elements per input at most: a shape whose rows exceed it is checked on
# evenly spaced rows (first and last included) instead, and the row says how many (checked_rows). 2^27 checks every
# row of the square sweep to 8192 and of every llm shape but the widest vocabularies.
CHECK_MAX_ELEMENTS = 1 << 27


def check_sample(shape, device: str, max_elements: int | None = None):
    """The rows (of the output, the first dimension) the check compares, as an index tensor; None for all. One
    output row depends on about sum(shape[1:]) input elements (a row of x; a row of A and a column of B)."""
    rows, per_row = int(shape[0]), max(1, sum(int(d) for d in shape[1:]))
    fit = max(2, (max_elements or CHECK_MAX_ELEMENTS) // per_row)
    if rows <= fit:
        return None
    import torch

    return torch.linspace(0, rows - 1, fit, device=device).round().long().unique()


def _rows_of(out, rows):
    return tuple(o[rows] for o in out) if isinstance(out, (tuple, list)) else out[rows]


def sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def run_cell(kernel: Kernel, cell: Cell, device: str, timing: TimingConfig, *, interpret_max_size: int = 0,
             seed: int = 0, timer=None, l2_bytes: float = 0.0, keep: dict | None = None) -> dict[str, Any]:
    """Measure one cell and return its row (without provenance), every implementation in the cell's math mode.
    ``keep`` (a dict): a timed cell leaves its closures there (``fns``, one per input placement), for the group's
    paired rounds (rooflab/paired.py)."""
    with math_mode(cell.dtype):
        return _run_cell(kernel, cell, device, timing, interpret_max_size=interpret_max_size, seed=seed, timer=timer,
                         l2_bytes=l2_bytes, keep=keep)


def cell_shape(kernel: Kernel, cell: Cell):
    """(shape, n, at): the cell's shape, its N if square (else None), and what the kernel's functions take: a
    square cell its n, as before shapes."""
    shape = kernel.shape(cell.shape or cell.size)
    n = square_size(shape)
    return shape, n, shape if n is None else n


def _run_cell(kernel: Kernel, cell: Cell, device: str, timing: TimingConfig, *, interpret_max_size: int, seed: int,
              timer, l2_bytes: float, keep: dict | None) -> dict[str, Any]:
    import torch

    kw = _kw(kernel, cell.pass_)
    shape, n, at = cell_shape(kernel, cell)
    row: dict[str, Any] = {
        "kernel": kernel.name,
        "impl": cell.impl,
        "dtype": cell.dtype,
        "size": n if n is not None else float("nan"),  # N of a square shape; no one N for any other
        "problem": None,
        "pass": cell.pass_,
        "status": "failed",
        "error": "",
        "shape": label(shape),
        "family": kernel.family,
        "preset": cell.preset,
        **shape_columns(kernel.family, shape), "tolerance": kernel.tolerance.get(cell.dtype, float("nan")),
        "compute_unit": None,
        "compile_fallback": False,
        "compile_graphs": float("nan"),
        "math_mode": math_mode_ran(cell.dtype) if cell.dtype in MATH_MODE else None,  # as torch is set for the cell
        "autotune_config": "",
        "autotune_ms": float("nan"),
        "warm_translations": False,  # measure() says whether the samples were taken with translations warmed
    }
    t_setup = time.perf_counter()
    try:
        # the kernel's own declarations run inside the try too: a bad one fails this cell, not the sweep
        row["problem"] = kernel.problem(at)
        row["compute_unit"] = kernel.compute_unit(cell.dtype)
        row["flops"] = float(kernel.flops(at, **kw))
        row["bytes"] = float(kernel.bytes(at, cell.dtype, **kw))
        row["working_set_bytes"] = row["bytes"]
        row["l2_bytes"] = float(l2_bytes)
        row["l2_ratio"] = row["working_set_bytes"] / l2_bytes if l2_bytes else float("nan")
        # A working set under the L2 size may be served from cache even with our flush: say so.
        row["l2_resident"] = bool(l2_bytes) and row["working_set_bytes"] < l2_bytes

        reason = skip_reason(kernel, cell, device, interpret_max_size) or \
            memory_skip_reason(row["working_set_bytes"], device)
        if reason:
            row.update(status="skipped", error=reason)
            return row

        inputs = kernel.make_inputs(at, torch_dtype(cell.dtype), device, seed)
        fell_back = None
        if cell.impl in COMPILE_MODES:
            factory, fell_back = compiled_factory(kernel, mode=COMPILE_MODES[cell.impl])
        else:
            factory = kernel.impls[cell.impl]
        fn = factory(inputs, **kw)

        # The kernel's own module (kernels/<name>.py) holds its autotuners; the factory may be built elsewhere.
        tuned = autotune_snapshot(autotuners(kernel.module)) if cell.impl == "triton" else []
        sync(device)
        t0 = time.perf_counter()
        row["setup_s"] = t0 - t_setup  # inputs, the callable (torch.compile: a dynamo reset)
        out = fn()  # the cold call: JIT compile / autotune / dynamo trace happen here
        sync(device)
        row["cold_ms"] = (time.perf_counter() - t0) * 1e3
        row.update(autotune_facts(tuned))  # which config the autotuner chose in that call, and its search time
        if fell_back is not None:
            row["compile_fallback"] = bool(fell_back())

        rows = check_sample(shape, device)  # every row, or as many as a float64 check affords
        row["checked_rows"] = int(shape[0]) if rows is None else len(rows)
        if rows is not None:
            inputs_checked, out = kernel.check_rows(inputs, rows), _rows_of(out, rows)
        ref = kernel.reference(inputs if rows is None else inputs_checked, **kw)
        rel, max_abs = relative_error(out, ref)
        row["rel_err"], row["max_abs_err"] = rel, max_abs
        del out, ref
        if not (rel <= row["tolerance"]):  # NaN fails too
            row.update(status="mismatch",
                       error=f"relative error {rel:.3g} exceeds tolerance {row['tolerance']:.3g} for {cell.dtype}")
            return row

        if device == "cpu" and cell.impl == "triton":
            row.update(status="not_timed", error="Triton ran under TRITON_INTERPRET=1 (correctness only)")
            return row

        timer = timer or timer_for(device, timing)
        # More input sets at other addresses (same seed, same values): the samples rotate through them.
        sets = [inputs] + [
            kernel.make_inputs(at, torch_dtype(cell.dtype), device, seed)
            for _ in range(placements_for(timing.placements, row["working_set_bytes"], device) - 1)
        ]
        fns = [fn] + [factory(one, **kw) for one in sets[1:]]
        row.update(clocks.prefixed("before"))
        t_sample = time.perf_counter()
        row["check_s"] = t_sample - t0  # where a cell's time goes: compile, reference check, input sets
        row.update(measure(fns, timer, timing, inputs=sets))
        row["sample_s"] = time.perf_counter() - t_sample  # warm-ups, samples and the Python loop
        row.update(clocks.prefixed("after"))
        if keep is not None:
            keep["fns"] = fns
        del fns, sets
        if device == "cuda" and timing.cudagraph:
            try:
                t_graph = time.perf_counter()
                row["graph_median_ms"] = cudagraph_median_ms(fn)
                row["graph_s"] = time.perf_counter() - t_graph
            except Exception as exc:  # graph capture is not possible for every implementation
                row["graph_median_ms"] = float("nan")
                row["error"] = f"cudagraph: {type(exc).__name__}: {exc}"[:500]
        row["clock_throttled"] = clocks.throttled(row)
        if cell.impl in COMPILE_MODES:  # after every input set and the graph replay: a recompile among them counts
            row["compile_graphs"] = compiled_graphs()
        row["status"] = "ok"
    except Exception as exc:  # one bad cell must not lose the sweep
        if device == "cuda" and isinstance(exc, torch.cuda.OutOfMemoryError):
            torch.cuda.empty_cache()
        row.update(status="failed", error=f"{type(exc).__name__}: {exc}"[:2000])
        row["traceback"] = traceback.format_exc()[-4000:]
    return row


def cell_callables(kernel: Kernel, cell: Cell, device: str, timing: TimingConfig, seed: int = 0) -> list:
    """Closures of one implementation over fresh input sets (as many placements as the cell's run_cell rotates
    through), built in the cell's math mode without a check or a timing: the paired rounds' sides for cells whose
    own closures are gone (reused from the cell store) and the A/A twin. Raises what building them raises."""
    import torch  # noqa: F401 (make_inputs needs it loaded)

    with math_mode(cell.dtype):
        kw = _kw(kernel, cell.pass_)
        _, _, at = cell_shape(kernel, cell)
        factory = (compiled_factory(kernel, mode=COMPILE_MODES[cell.impl])[0]
                   if cell.impl in COMPILE_MODES else kernel.impls[cell.impl])
        count = placements_for(timing.placements, float(kernel.bytes(at, cell.dtype, **kw)), device)
        return [factory(kernel.make_inputs(at, torch_dtype(cell.dtype), device, seed), **kw) for _ in range(count)]


# Extra input sets may take at most this share of the free device memory (each is about a working set, and the
# rotation keeps as many outputs alive).
PLACEMENT_MEMORY_SHARE = 0.25


def placements_for(wanted: int, working_set_bytes: float, device: str, free_bytes: float | None = None) -> int:
    """How many input placements a cell rotates through: ``wanted``, fewer when they would not fit in
    PLACEMENT_MEMORY_SHARE of the free device memory (each costs about two working sets: inputs and a kept output).
    ``free_bytes`` defaults to what CUDA reports; the host's memory is not rationed."""
    wanted = max(1, int(wanted))
    if wanted == 1 or (device != "cuda" and free_bytes is None):
        return wanted
    if free_bytes is None:
        import torch

        free_bytes, _ = torch.cuda.mem_get_info()
    fit = int(PLACEMENT_MEMORY_SHARE * free_bytes // max(2.0 * working_set_bytes, 1.0))
    return max(1, min(wanted, fit))


def free_memory_bytes(device: str) -> tuple[float, float]:
    """(free, total) bytes of the device's memory: CUDA's own count, or the host's available memory on the CPU."""
    if device == "cuda":
        import torch

        free, total = torch.cuda.mem_get_info()
        # what torch's caching allocator holds but no tensor uses is free to this cell too
        cached = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
        return float(free + cached), float(total)
    info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)
    kib = lambda key: float(info[key].split()[0]) * 1024  # noqa: E731
    return kib("MemAvailable"), kib("MemTotal")


def memory_skip_reason(working_set_bytes: float, device: str,
                       free_total: tuple[float, float] | None = None) -> str | None:
    """Why a cell cannot fit, or None: its inputs and outputs (the working set, a lower bound of what it allocates)
    exceed the device's free memory. Such a cell is skipped up front with the numbers in its row; one that fits this
    bound but runs out later still fails alone (an OutOfMemoryError row)."""
    try:
        free, total = free_total or free_memory_bytes(device)
    except (OSError, KeyError, ValueError, RuntimeError):  # no way to tell here: let the cell try
        return None
    if working_set_bytes <= free:
        return None
    return (f"needs at least {working_set_bytes / 1e9:.3g} GB for its inputs and outputs, but the {device} has "
            f"{free / 1e9:.3g} GB free of {total / 1e9:.3g} GB")


def skip_reason(kernel: Kernel, cell: Cell, device: str, interpret_max_size: int) -> str | None:
    if cell.dtype not in kernel.dtypes:
        return f"{kernel.name} is not defined for {cell.dtype}"
    if cell.impl in COMPILE_MODES:
        if kernel.naive_fn is None:
            return f"{kernel.name} has no naive expression to compile"
    elif cell.impl not in kernel.impls:
        return f"{kernel.name} has no '{cell.impl}' implementation"
    reason = kernel.skip_reason(cell.impl, device) or kernel.shape_skip_reason(cell.impl,
                                                                               kernel.shape(cell.shape or cell.size))
    if reason:
        return reason
    if device == "cpu" and cell.impl == "triton" and \
            elements(kernel.shape(cell.shape or cell.size)) > elements(kernel.shape(interpret_max_size)):
        return (f"Triton interpreter limited to sizes <= {interpret_max_size} on the CPU (interpret_max_size; another "
                f"shape: at most the elements of {label(kernel.shape(interpret_max_size))})")
    if device == "cpu" and cell.impl == "cuda":
        return "CUDA implementation needs an NVIDIA GPU and nvcc"
    return None
