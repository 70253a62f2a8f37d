"""The norms on long rows (section longrows), where they trail torch.compile most (the twentieth session's S20-D4:
llm RMSNorm fwd+bwd 1024 x 50257 bf16 0.53, 4096 x 32000 0.63; LayerNorm fwd 4096 x 32000 0.75-0.78).
- fwd+bwd: rows over kernels/_norm_bwd.HELD_MAX_COLS take two launches over column tiles, each reading x and dy (5
  units of traffic against the pass's 3). Variants: other tiles; rows held whole (up to the widest block) at more warps.
- fwd: rows over _rows.MAX_BLOCK_SIZE are walked twice in tiles. Variants: held whole in one block of up to 32768 at
  16 and 32 warps; tiles of 8192 and 16384.
Beside the builtin and torch.compile of the naive expression (its vector-Jacobian product for fwd+bwd), every variant
checked against the builtin first."""
import torch

from kernels import _norm_bwd
from lab.common import DTYPES, checked, swapped, timed
from rooflab.cell import _kw
from rooflab.kernel import load_kernel

LONG_SHAPES = ((4096, 8192), (2048, 16384), (1024, 28672), (4096, 32000), (1024, 50257))
TILES = (2048, 8192)  # beside the default LONG_TILE
HELD_WARPS = (16, 32)  # rows held whole (fwd+bwd: up to _rows.MAX_BLOCK_SIZE), at least this many warps
HELD_MAX_BLOCK = 32768  # the forward's held variants: rows up to this block
FWD_TILES = (8192, 16384)  # the forward's tiled walk at these tiles (the default's: TILED_LAUNCH, MAX_BLOCK_SIZE)


def held_at_least(warps):
    """kernels/_norm_bwd's row_launch_params with its warps raised to ``warps`` (swapped in for one variant)."""
    from kernels._rows import row_launch_params

    def params(n_cols, element_size):
        block, w = row_launch_params(n_cols, element_size)
        return block, max(w, warps)
    return params


def fwd_bwd_variants(name, rows, cols, dtype, device="cuda"):
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


def fwd_variants(name, rows, cols, dtype, device="cuda"):
    """{variant: fn} of one norm's forward at rows x cols."""
    import triton

    kernel = load_kernel(name)
    x, *params, _ = kernel.make_inputs((rows, cols), dtype, device, 0)
    ours = getattr(kernel.module, f"{name}_triton")
    compiled = torch.compile(kernel.naive_fn, fullgraph=True, dynamic=False)
    kw = _kw(kernel, "fwd")
    out = {"builtin": lambda: getattr(kernel.module, f"{name}_builtin")(x, *params),
           "compile": lambda: compiled(x, *params, None, **kw), "ours (default)": lambda: ours(x, *params)}
    block = triton.next_power_of_2(cols)
    if block <= HELD_MAX_BLOCK:
        for warps in HELD_WARPS:
            out[f"ours held in {block}, {warps} warps"] = lambda w=warps: ours(x, *params, block_size=block,
                                                                                num_warps=w)
    for tile in FWD_TILES:
        if tile < cols:
            out[f"ours tiles of {tile}, 16 warps"] = lambda t=tile: ours(x, *params, block_size=t, num_warps=16)
    ref = out["builtin"]()
    return {k: checked(fn, ref, dtype, f"{name} fwd {k}") if k != "builtin" else fn for k, fn in out.items()}


def run_longrows(run):
    for name in ("rmsnorm", "layernorm"):
        bytes_moved = load_kernel(name).bytes
        for rows, cols in LONG_SHAPES:
            for dname in run.args.dtypes:
                label = f"{rows}x{cols}"
                for pass_, make in (("fwd", fwd_variants), ("fwd+bwd", fwd_bwd_variants)):
                    moved = bytes_moved((rows, cols), dname, pass_)
                    for variant, fn in make(name, rows, cols, DTYPES[dname]).items():
                        run.record(f"{name} {pass_}", label, dname, variant, timed(fn, run.timer, run.cfg), moved)
                print(f"done longrows {name} {label} {dname}", flush=True)
