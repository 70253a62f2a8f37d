"""Our Triton kernels against torch.compile (Inductor) of each kernel's naive expression, interleaved (section
compile), and torch.compile's fwd+bwd in its two frames (section compileframes)."""
from lab.common import DTYPES, compiled, timed
from lab.longrows import checked_against_builtin


def compile_variants(n, dtype_name):
    """[(kernel, bytes moved, {variant: fn})]: our Triton against torch.compile of the naive expression, each timed
    twice, interleaved. Set TORCHINDUCTOR_CACHE_DIR to keep Inductor's generated kernels (and chosen configs)."""
    from rooflab.kernel import load_kernel, torch_dtype
    from rooflab.cell import _kw

    out = []
    for name in ("rmsnorm", "layernorm", "softmax", "rowsum", "vecadd", "saxpy", "gelu"):
        kernel = load_kernel(name)
        inputs = kernel.make_inputs(n, torch_dtype(dtype_name), "cuda")
        kw = _kw(kernel, "fwd")
        tri = kernel.impls["triton"](inputs, **kw)
        comp = compiled(name, n, torch_dtype(dtype_name))
        variants = {"compile": comp, "triton (default)": tri, "compile (again)": comp, "triton (again)": tri}
        if "builtin" in kernel.impls:
            variants["builtin"] = kernel.impls["builtin"](inputs, **kw)
        out.append((name, kernel.bytes(n, dtype_name), variants))
    return out


# Section compileframes: torch.compile's fwd+bwd in the two frames a user can meet. Given forward and backward as one
# graph (naive_fn's fwd+bwd, rooflab.kernel.vjp_keeping_output) Inductor may fuse them, reading x once for y and dx;
# a training step (the sweep's cell since S26-D4, ba0d144) compiles the forward and runs AOTAutograd's backward, later.
FRAME_SHAPES = {
    "rmsnorm": ((128, 4096), (4096, 8192), (2048, 16384), (8192, 14336), (16, 333333), (4096, 11008)),
    "layernorm": ((128, 4096), (4096, 8192), (2048, 16384), (8192, 14336), (4096, 4097)),
    "softmax": ((4096, 4096), (8192, 8192), (4096, 32000)),
    "attention": ((4, 16, 4096, 128), )
}


def frame_variants(name, shape, dtype, device="cuda"):
    """{variant: fn} of one kernel's fwd+bwd: the builtin, ours, torch.compile of the joint graph and as a training
    step runs it (the sweep's cell: the forward compiled, its backward AOTAutograd's), each returning the gradients."""
    import torch

    from rooflab.cell import compiled_factory
    from rooflab.kernel import load_kernel

    kernel = load_kernel(name)
    inputs = kernel.make_inputs(shape, dtype, device, 0)
    split = compiled_factory(kernel)[0](inputs, pass_="fwd+bwd")  # resets dynamo, as each sweep cell does
    joint_fn = torch.compile(kernel.naive_fn, fullgraph=True, dynamic=False)
    variants = {
        "builtin": kernel.impls["builtin"](inputs, pass_="fwd+bwd"),
        "ours": kernel.impls["triton"](inputs, pass_="fwd+bwd"),
        "compile, joint graph": lambda: joint_fn(*inputs, pass_="fwd+bwd")[0],
        "compile, as a training step (AOTAutograd; the sweep's)": split
    }
    return checked_against_builtin(variants, dtype, f"{name} fwd+bwd")


def run_compileframes(run):
    from rooflab.kernel import load_kernel

    for name, shapes in FRAME_SHAPES.items():
        kernel = load_kernel(name)
        for shape in shapes:
            label = "x".join(map(str, shape))
            for dname in run.args.dtypes:
                moved = kernel.bytes(shape, dname, "fwd+bwd")
                for variant, fn in frame_variants(name, shape, DTYPES[dname]).items():
                    run.record(f"{name} fwd+bwd", label, dname, variant, timed(fn, run.timer, run.cfg), moved)
                print(f"done {name} {label} {dname}", flush=True)
