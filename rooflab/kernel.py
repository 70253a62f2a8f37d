"""What a kernel declares, and the registry that finds them.

Each kernel is a folder, ``kernels/<name>/``: its ``__init__.py`` holds the Triton kernels, the launch wrapper, the
PyTorch references and the FLOP and byte model, and ends with ``KERNEL = Kernel(...)``; beside it its launch table
(``table.py``), its plan or its other kernels, and its CUDA source (``<name>.cu``). The registry discovers the folders
by name, so adding a kernel needs no edit elsewhere: the Snakefile lists the same folders (``kernel_names``) and the
code each kernel's measurement depends on (``kernel_code``: its folder and the modules it imports) without importing
torch.

Implementations follow TritonBench: each is a factory ``make(inputs) -> closure``; the closure takes no argument,
so allocation and input set-up stay outside the timed region.
"""
from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rooflab.shapes import as_shape, dims_of, label

KERNELS_DIR = Path(__file__).resolve().parent.parent / "kernels"
IMPLS = ("naive", "builtin", "compile", "compile-max", "triton", "cuda")
# how figures and the paper name them
IMPL_LABEL = {
    "naive": "naive PyTorch",
    "builtin": "PyTorch builtin",
    "compile": "torch.compile",
    "compile-max": "torch.compile (max-autotune)",
    "triton": "Triton (ours)",
    "cuda": "CUDA (ours)"
}
# torch.compile of the naive expression, by implementation: its mode. "compile" is a user's default; "compile-max"
# searches Inductor's GEMM and attention templates (max-autotune) without its CUDA graphs, which the sweep's own
# CUDA-graph frame gives every implementation. Opt-in: config impls lists it, config compile_max names its kernels.
COMPILE_MODES = {"compile": "default", "compile-max": "max-autotune-no-cudagraphs"}
OPT_IN_IMPLS = ("compile-max", )  # measured only where the config asks (not in a default run)


def impls_for(kernel: str, params: dict) -> list[str]:
    """The implementations a run measures for one kernel: config impls, an opt-in one (compile-max) only for the
    kernels config compile_max.kernels names (without that key, a command line's: every one listed)."""
    impls = list(params.get("impls") or [i for i in IMPLS if i not in OPT_IN_IMPLS])
    if "compile_max" not in params:
        return impls
    chosen = (params.get("compile_max") or {}).get("kernels") or []
    return [i for i in impls if i not in OPT_IN_IMPLS or kernel in chosen]


# The precisions a cell can run in: a storage dtype and the math mode of its products. "tf32" stores float32 and
# multiplies in TF32 (10-bit mantissa inputs, fp32 accumulate); "float32" multiplies in IEEE fp32. Only kernels
# with products (matmul) define tf32, so a speedup or ranking within one precision never mixes the two modes.
DTYPES = ("float32", "tf32", "bfloat16", "float16")
ELEMENT_BYTES = {"float32": 4, "tf32": 4, "bfloat16": 2, "float16": 2, "float64": 8}
MATH_MODE = {"float32": "fp32-ieee", "tf32": "tf32", "bfloat16": "bf16", "float16": "fp16"}

# Relative-norm tolerance ||out - ref|| / ||ref|| against a float64 reference, by dtype: travels with the dtype.
DEFAULT_TOLERANCE = {"float32": 1e-5, "tf32": 2e-3, "bfloat16": 1.6e-2, "float16": 2e-3}

Inputs = Any  # a tuple of tensors (and scalars) made by Kernel.make_inputs
Factory = Callable[[Inputs], Callable[[], Any]]


@dataclass
class Kernel:
    name: str
    description: str
    # A shape is a tuple of ints in the order of the kernel's family (rooflab/shapes.py: rows = (rows, cols),
    # mkn = (M, K, N)); an int n is the square shape (n, n) or (n, n, n), as the sweep of config sizes has it.
    make_inputs: Callable[..., Inputs]  # (shape, dtype, device, seed) -> inputs
    reference: Callable[[Inputs], Any]  # float64 reference output(s), same structure as an impl's output
    flops: Callable[..., float]  # FLOPs of one call at a shape
    bytes: Callable[..., float]  # fewest bytes one call must move through DRAM at a shape and dtype
    impls: dict[str, Factory]  # naive / builtin / triton / cuda factories
    compile_target: str | None = "naive"  # the impl whose function torch.compile compiles
    # the plain function for torch.compile (takes *inputs); fwd+bwd: (gradients, output) as one joint graph, the lab's
    naive_fn: Callable[..., Any] | None = None
    compute_unit: Callable[[str], str] = lambda dtype: "fp32"  # which peak applies: fp32 / tf32 / bf16 / fp16
    dtypes: tuple[str, ...] = ("float32", "bfloat16")
    tolerance: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TOLERANCE))
    family: str = "rows"  # the names of its dimensions: a key of rooflab.shapes.FAMILIES
    problem: Callable[..., str] | None = None  # a shape's name in the rows (default: its label, "4096x4097")
    # The inputs of some of the output's rows (a sample the float64 check can afford at a large shape): by default
    # every input of two or more dimensions, indexed on its first (the row kernels'); matmul's keeps B whole.
    check_rows: Callable[[Inputs, Any], Inputs] | None = None
    passes: tuple[str, ...] = ("fwd", )
    skip_reason: Callable[[str, str], str | None] = lambda impl, device: None  # impl unavailable here -> why
    # (impl, shape) -> why that implementation is not run at that shape (e.g. a compile that takes minutes), or None
    shape_skip_reason: Callable[[str, tuple], str | None] = lambda impl, shape: None
    source: str = ""  # the kernel file (set by load_kernel)
    code: list[str] = field(default_factory=list)  # every file its measurement depends on (set by load_kernel)
    module: Any = None  # the kernel's module, which holds its autotuners (set by load_kernel)

    def __post_init__(self):
        dims_of(self.family)  # an unknown family fails at import, naming the known ones
        if self.problem is None:
            self.problem = lambda shape: label(self.shape(shape))
        if self.check_rows is None:
            self.check_rows = leading_rows_of

    def shape(self, shape) -> tuple[int, ...]:
        """The shape of this kernel's family: an int n is the square shape."""
        return as_shape(shape, self.family)


def leading_rows_of(inputs: Inputs, rows) -> Inputs:
    """The inputs of the output rows ``rows``: each input of two or more dimensions indexed on its first (x of
    (rows, cols)); vectors (a norm's weight) and scalars as they are."""
    return tuple(x[rows] if getattr(x, "dim", lambda: 0)() >= 2 else x for x in inputs)


def eager(**fns: Callable[..., Any]) -> dict[str, Factory]:
    """Factories for implementations that are plain functions of the inputs: name -> (inputs -> (() -> fn(*inputs)))."""
    return {name: (lambda inputs, fn=fn: (lambda: fn(*inputs))) for name, fn in fns.items()}


# torch.compile fwd+bwd rows timed before this (the commit that brought vjp_keeping_output, c363a01) compiled the
# gradients alone, so Inductor skipped the forward's store: analysis/selection.compile_dropped_output flags them.
VJP_KEEPS_OUTPUT_SINCE = "2026-12-02T09:33:14+00:00"
# Rows timed before this (ba0d144) compiled forward and backward as one graph (naive_fn's fwd+bwd), which Inductor
# may fuse as no training step can; since, the forward is compiled and AOTAutograd's backward runs after it
# (rooflab/cell.compiled_factory): analysis/selection.compile_joint_graph flags the older rows.
COMPILE_SPLIT_SINCE = "2026-12-03T19:37:01+00:00"


def vjp_keeping_output(fn: Callable[..., Any], primals: tuple, cotangent) -> tuple:
    """(fn's vector-Jacobian product with cotangent, fn's output): forward and backward as one function, the joint
    graph the compile cell compiled until COMPILE_SPLIT_SINCE and the lab's compileframes times (a fullgraph compiled
    function cannot call .backward()). The output comes back so Inductor stores it, as every eager fwd+bwd writes it;
    asked for the gradients alone, Inductor dropped the forward's store, a fifth of a norm's bytes."""
    import torch

    out, vjp = torch.func.vjp(fn, *primals)
    return vjp(cotangent), out


def differentiable(fn: Callable[..., Any]) -> Factory:
    """make(inputs, pass_) for a differentiable fn, inputs being (*args, grad_out). fwd: fn(*args). fwd+bwd: fn
    through autograd, then backward with grad_out, returning every arg's gradient (one arg: its gradient, not a
    tuple); the leaves are made here, outside the timed closure."""

    def make(inputs, pass_: str = "fwd"):
        *args, grad_out = inputs
        if pass_ == "fwd":
            return lambda: fn(*args)
        if pass_ != "fwd+bwd":
            raise ValueError(f"unknown pass '{pass_}': passes are fwd and fwd+bwd")
        leaves = [t.detach().clone().requires_grad_(True) for t in args]

        def fwd_bwd():
            for t in leaves:
                t.grad = None
            fn(*leaves).backward(grad_out)
            grads = tuple(t.grad for t in leaves)
            return grads if len(grads) > 1 else grads[0]

        return fwd_bwd

    return make


def measurement_code() -> list[str]:
    """Files (relative to the repo) whose change invalidates every measured cell: the measurement machinery. Inputs
    of every measurement job; a kernel's own code is ``kernel_code``."""
    repo = KERNELS_DIR.parent
    core = [
        "rooflab/cell.py", "rooflab/timing.py", "rooflab/timers.py", "rooflab/kernel.py", "rooflab/clocks.py",
        "rooflab/triton_utils.py", "rooflab/cuda_ext.py"
    ]
    return [f for f in core if (repo / f).exists()]


def kernel_names(kernels_dir: Path = KERNELS_DIR) -> list[str]:
    """Names of the kernel folders (a package not starting with _), without importing them (the Snakefile's)."""
    return sorted(p.parent.name for p in kernels_dir.glob("*/__init__.py") if not p.parent.name.startswith("_"))


def kernel_file(name: str, kernels_dir: Path = KERNELS_DIR) -> Path:
    """The file that declares a kernel (``KERNEL = Kernel(...)``): kernels/<name>/__init__.py."""
    return kernels_dir / name / "__init__.py"


def kernel_code(name: str, kernels_dir: Path = KERNELS_DIR) -> list[str]:
    """The files (relative to the repo) a kernel's measurement depends on: every file of its folder (Python, its
    table, its CUDA source) and every module of the repository those import, followed through their imports
    (rooflab/codehash.imported_files), read from the source without importing it."""
    from rooflab.codehash import imported_files

    repo = kernels_dir.parent
    folder = sorted(p for p in (kernels_dir / name).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    files = dict.fromkeys([*folder, *imported_files([p for p in folder if p.suffix == ".py"], repo)])
    return [str(p.relative_to(repo)) for p in files]


def load_kernel(name: str) -> Kernel:
    if name not in kernel_names():
        raise KeyError(f"unknown kernel '{name}': known kernels are {', '.join(kernel_names())} "
                       f"(one folder per kernel under kernels/)")
    module = importlib.import_module(f"kernels.{name}")
    kernel = getattr(module, "KERNEL", None)
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernels/{name}/__init__.py must define KERNEL = Kernel(...)")
    kernel.source = str(Path(module.__file__).resolve())
    kernel.code = [str(KERNELS_DIR.parent / f) for f in kernel_code(name)]
    kernel.module = module
    return kernel


def torch_dtype(name: str):
    import torch

    try:
        return {
            "float32": torch.float32,
            "tf32": torch.float32,
            "bfloat16": torch.bfloat16,
            "float16": torch.float16,
            "float64": torch.float64
        }[name]
    except KeyError:
        raise ValueError(f"unsupported dtype '{name}': use one of {', '.join(DTYPES)}") from None


@contextlib.contextmanager
def math_mode(dtype: str):
    """Run a cell in its precision's math mode: TF32 products for "tf32", IEEE fp32 for "float32" (torch's
    matmul and cuDNN flags, which torch.mm, F.conv*, Inductor and our Triton matmul all follow); restored after."""
    from rooflab.triton_utils import restore_tf32, set_tf32

    before = set_tf32(dtype == "tf32")
    try:
        yield
    finally:
        restore_tf32(before)


def math_mode_ran(dtype: str) -> str:
    """The math mode of float products as torch is set now (what a cell ran in): fp32-ieee, tf32, bf16 or fp16."""
    from rooflab.triton_utils import tf32_matmul

    if dtype in ("float32", "tf32"):
        return "tf32" if tf32_matmul() else "fp32-ieee"
    return MATH_MODE[dtype]
