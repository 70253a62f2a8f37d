"""Our Triton kernels against torch.compile (Inductor) of each kernel's naive expression, interleaved.
Section: compile."""
from lab.common import compiled


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
