"""Elementwise kernels (GeLU, vecadd, SAXPY): launch shapes and tilings against the default, the builtin and
torch.compile. Sections: gelu, elementwise, onerow."""
import torch

from lab.common import compiled, readings


def gelu_variants(n, dtype):
    """(bytes moved, {variant: fn}): GeLU's BLOCK_SIZE (1024-8192) x num_warps (4, 8, 16) beside the builtin."""
    from kernels.gelu import gelu_builtin, gelu_triton

    x = torch.randn(n, n, device="cuda").to(dtype)
    moved = 2 * x.numel() * x.element_size()
    out = {"builtin": lambda: gelu_builtin(x), "triton (default)": lambda: gelu_triton(x)}
    for block in (1024, 2048, 4096, 8192):
        for warps in (4, 8, 16):
            out[f"triton B={block} w={warps}"] = (lambda b=block, w=warps: gelu_triton(x, b, w))
    return moved, out


def elementwise_variants(n, dtype):
    """[(kernel, bytes moved, {variant: fn})]: tiles of 1024-8192 elements x 2-8 warps, builtin timed first and last
    (its spread is the noise floor of the comparison)."""
    from kernels.gelu import gelu_builtin, gelu_triton
    from kernels.saxpy import saxpy_builtin, saxpy_triton
    from kernels.vecadd import vecadd_builtin, vecadd_triton

    x = torch.randn(n, n, device="cuda").to(dtype)
    y = torch.randn(n, n, device="cuda").to(dtype)
    e = x.element_size()
    grid = [(b, w) for b in (1024, 2048, 4096, 8192) for w in (2, 4, 8) if b // (32 * w) >= 4]
    va = {"builtin": lambda: vecadd_builtin(x, y), "triton (default)": lambda: vecadd_triton(x, y)}
    va.update({f"triton B={b} w={w}": (lambda b=b, w=w: vecadd_triton(x, y, w, b)) for b, w in grid})
    va["builtin (again)"] = va["builtin"]
    ge = {
        "builtin": lambda: gelu_builtin(x),
        "triton (default)": lambda: gelu_triton(x),
        "triton precise (IEEE division)": lambda: gelu_triton(x, precise=True)
    }
    ge.update({f"triton B={b} w={w}": (lambda b=b, w=w: gelu_triton(x, b, w)) for b, w in grid if w >= 4})
    ge["builtin (again)"] = ge["builtin"]
    sa = {
        "builtin": lambda: saxpy_builtin(2.0, x, y),
        "triton (default)": lambda: saxpy_triton(2.0, x, y),
        "builtin (again)": lambda: saxpy_builtin(2.0, x, y)
    }
    return [("vecadd", 3 * n * n * e, va), ("gelu", 2 * n * n * e, ge), ("saxpy", 3 * n * n * e, sa)]


def onerow_variants(n, dtype_name, device="cuda"):
    """[(kernel, bytes moved, {variant: fn})]: vecadd and SAXPY tiling their (1, n^2) view from the program id alone
    (the default since round 33) against the 2-D split with its integer division (before), beside the builtin and
    torch.compile, each timed three times, interleaved."""
    from kernels.saxpy import saxpy_triton
    from kernels.vecadd import vecadd_triton
    from rooflab.kernel import load_kernel, torch_dtype

    out = []
    for name, triton_fn in (("vecadd", vecadd_triton), ("saxpy", saxpy_triton)):
        kernel = load_kernel(name)
        inputs = kernel.make_inputs(n, torch_dtype(dtype_name), device)  # saxpy's are (a, x, y), its wrapper's order
        kinds = {
            "triton (default)": lambda f=triton_fn, a=inputs: f(*a),
            "triton 2-D split (before)": lambda f=triton_fn, a=inputs: f(*a, one_row=False),
            "builtin": kernel.impls["builtin"](inputs),
            "compile": compiled(name, n, torch_dtype(dtype_name), device)
        }
        out.append((name, kernel.bytes(n, dtype_name), readings(kinds)))
    return out
