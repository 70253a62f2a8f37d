"""The norms on long rows (section longrows), where they trail torch.compile most (the twentieth session's S20-D4:
llm RMSNorm fwd+bwd 1024 x 50257 bf16 0.53, 4096 x 32000 0.63; LayerNorm fwd 4096 x 32000 0.75-0.78).
- fwd+bwd: rows over kernels/_norm_bwd.HELD_MAX_COLS take two launches over column tiles, each reading x and dy (5
  units of traffic against the pass's 3). Variants: other tiles; rows held whole (up to the widest block) at more warps.
- fwd: rows over _rows.MAX_BLOCK_SIZE are walked twice in tiles. Variants: held whole in one block of up to 32768 at
  16 and 32 warps; tiles of 8192 and 16384; RMSNorm's rows no multiple of 16 bytes on aligned tiles (as softmax's).
Beside the builtin and torch.compile of the naive expression (its vector-Jacobian product for fwd+bwd), every variant
checked against the builtin first."""
import torch
import triton
import triton.language as tl

from kernels import _norm_bwd
from kernels._rows import MAX_BLOCK_SIZE, row_launch_params
from lab.common import DTYPES, checked, swapped, timed
from rooflab.cell import _kw
from rooflab.kernel import load_kernel

LONG_SHAPES = ((4096, 8192), (2048, 16384), (1024, 28672), (4096, 32000), (1024, 50257))
TILES = (2048, 8192)  # beside the default LONG_TILE
HELD_WARPS = (16, 32)  # rows held whole (fwd+bwd: up to _rows.MAX_BLOCK_SIZE), at least this many warps
HELD_MAX_BLOCK = 32768  # the forward's held variants: rows up to this block
FWD_TILES = (8192, 16384)  # the forward's tiled walk at these tiles (the default's: TILED_LAUNCH, MAX_BLOCK_SIZE)
ALIGNED_TILES = ((2048, 4), (4096, 8))  # (tile, warps) of RMSNorm's forward on aligned tiles (_rms_aligned_kernel)


@triton.jit
def _rms_aligned_kernel(x_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK_N: tl.constexpr, ALIGN: tl.constexpr):
    # RMSNorm of one row of a contiguous x whose rows are no multiple of 16 bytes, on 16-byte aligned tiles of the
    # flat buffer (kernels/_softmax_shapes.softmax_fwd_aligned_kernel's walk): the first and last tiles masked and
    # peeled, the inner ones unmasked at offsets the compiler can prove aligned. The weight is indexed by column,
    # so its loads stay unaligned (from L1/L2); x and y move 16-byte vectors. Both passes read x (the second from L2).
    row_start = tl.program_id(axis=0).to(tl.int64) * n_cols
    row_end = row_start + n_cols
    first = row_start // ALIGN * ALIGN
    n_tiles = ((row_end - first + BLOCK_N - 1) // BLOCK_N).to(tl.int32)
    lanes = tl.arange(0, BLOCK_N)
    offs = first + lanes
    x = tl.load(x_ptr + offs, mask=(offs >= row_start) & (offs < row_end), other=0.0).to(tl.float32)
    acc = x * x
    for k in range(1, n_tiles - 1):
        x = tl.load(x_ptr + first + k * BLOCK_N + lanes, eviction_policy="evict_last").to(tl.float32)
        acc += x * x
    if n_tiles > 1:
        offs = first + (n_tiles - 1) * BLOCK_N + lanes
        x = tl.load(x_ptr + offs, mask=offs < row_end, other=0.0).to(tl.float32)
        acc += x * x
    rstd = tl.math.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
    offs = first + lanes
    mask = (offs >= row_start) & (offs < row_end)
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + (offs - row_start), mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    for k in range(1, n_tiles - 1):
        offs = first + k * BLOCK_N + lanes
        x = tl.load(x_ptr + offs, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(w_ptr + (offs - row_start)).to(tl.float32)
        tl.store(y_ptr + offs, (x * rstd * w).to(y_ptr.dtype.element_ty))
    if n_tiles > 1:
        offs = first + (n_tiles - 1) * BLOCK_N + lanes
        mask = offs < row_end
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + (offs - row_start), mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rms_aligned(x, w, eps, tile, warps):
    """RMSNorm forward on aligned tiles: one program a row (x contiguous, its rows no multiple of 16 bytes)."""
    y = torch.empty_like(x)
    _rms_aligned_kernel[(x.shape[0],)](x, w, y, x.shape[1], eps, BLOCK_N=tile, ALIGN=16 // x.element_size(),
                                       num_warps=warps)
    return y


def held_at_least(warps):
    """kernels/_norm_bwd's row_launch_params with its warps raised to ``warps`` (swapped in for one variant)."""
    def params(n_cols, element_size):
        block, w = row_launch_params(n_cols, element_size)
        return block, max(w, warps)
    return params


def fwd_bwd_variants(name, rows, cols, dtype, device="cuda"):
    """{variant: fn} of one norm's fwd+bwd at rows x cols: every fn returns the gradients (dx, dweight[, dbias])."""
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
    return checked_against_builtin(out, dtype, f"{name} fwd+bwd")


def fwd_variants(name, rows, cols, dtype, device="cuda"):
    """{variant: fn} of one norm's forward at rows x cols."""
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
    if name == "rmsnorm" and cols * x.element_size() % 16:
        for tile, warps in ALIGNED_TILES:
            out[f"lab: aligned tiles {tile} x {warps}"] = lambda t=tile, w=warps: rms_aligned(
                x, params[0], kernel.module.EPS, t, w)
    return checked_against_builtin(out, dtype, f"{name} fwd")


def checked_against_builtin(variants, dtype, what):
    """Every variant but the builtin, checked once against the builtin's output (lab.common.checked)."""
    ref = variants["builtin"]()
    return {k: fn if k == "builtin" else checked(fn, ref, dtype, f"{what} {k}") for k, fn in variants.items()}


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
