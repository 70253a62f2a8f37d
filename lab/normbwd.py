"""The norms' fwd+bwd on long rows (section normbwd): where our backward trails torch.compile most (llm RMSNorm
1024 x 50257 bf16 0.53, 4096 x 32000 0.63; the twentieth session's S20-D4). Rows over kernels/_norm_bwd.HELD_MAX_COLS
take two launches over column tiles, each reading x and dy: 5 units of traffic against the pass's 3. The variants
ask what else the rows could take: other tiles, rows held whole (up to the widest block) at more warps, against the
builtin's autograd and torch.compile of the naive expression's vector-Jacobian product, each checked against the
builtin's gradients first. The rows of 8192 columns (held by default) are the comparison's other side."""
import torch

from kernels import _norm_bwd
from lab.common import DTYPES, checked, swapped, timed
from rooflab.cell import _kw
from rooflab.kernel import load_kernel

LONG_SHAPES = ((4096, 8192), (2048, 16384), (1024, 28672), (4096, 32000), (1024, 50257))
TILES = (2048, 8192)  # beside the default LONG_TILE
HELD_WARPS = (16, 32)  # rows held whole up to _rows.MAX_BLOCK_SIZE, at least this many warps


def held_at_least(warps):
    """kernels/_norm_bwd's row_launch_params with its warps raised to ``warps`` (swapped in for one variant)."""
    from kernels._rows import row_launch_params

    def params(n_cols, element_size):
        block, w = row_launch_params(n_cols, element_size)
        return block, max(w, warps)
    return params


def variants(name, rows, cols, dtype, device="cuda"):
    """{variant: fn} of one norm's fwd+bwd at rows x cols: every fn returns the gradients (dx, dweight[, dbias])."""
    from kernels._rows import MAX_BLOCK_SIZE

    kernel = load_kernel(name)
    inputs = kernel.make_inputs((rows, cols), dtype, device, 0)
    builtin = kernel.impls["builtin"](inputs, pass_="fwd+bwd")
    ours = kernel.impls["triton"](inputs, pass_="fwd+bwd")
    compiled = torch.compile(kernel.naive_fn, fullgraph=True, dynamic=False)
    kw = _kw(kernel, "fwd+bwd")
    out = {"builtin": builtin, "compile": lambda: compiled(*inputs, **kw), "ours (default)": ours}
    for tile in TILES:
        out[f"ours tiles of {tile}"] = swapped(_norm_bwd, ours, LONG_TILE=tile)
    if cols <= MAX_BLOCK_SIZE:
        for warps in HELD_WARPS:  # HELD_MAX_COLS past the widest block, a value a variant (keyed: its own plan)
            out[f"ours held, >= {warps} warps"] = swapped(_norm_bwd, ours, HELD_MAX_COLS=MAX_BLOCK_SIZE + warps,
                                                          row_launch_params=held_at_least(warps))
    ref = builtin()
    return {k: checked(fn, ref, dtype, f"{name} {k}") if k != "builtin" else fn for k, fn in out.items()}


def run_normbwd(run):
    for name in ("rmsnorm", "layernorm"):
        bytes_moved = load_kernel(name).bytes
        for rows, cols in LONG_SHAPES:
            for dname in run.args.dtypes:
                label = f"{rows}x{cols}"
                moved = bytes_moved((rows, cols), dname, "fwd+bwd")
                for variant, fn in variants(name, rows, cols, DTYPES[dname]).items():
                    run.record(f"{name}_fwdbwd", label, dname, variant, timed(fn, run.timer, run.cfg), moved)
                print(f"done normbwd {name} {label} {dname}", flush=True)
