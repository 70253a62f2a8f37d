"""The norms on long rows (section longrows), where they trail torch.compile most (the twentieth session's S20-D4:
llm RMSNorm fwd+bwd 1024 x 50257 bf16 0.53, 4096 x 32000 0.63; LayerNorm fwd 4096 x 32000 0.75-0.78).
- fwd+bwd: rows over kernels/_shared/norm_bwd.HELD_MAX_COLS take two launches over column tiles, each reading x and dy (5
  units of traffic against the pass's 3). Variants: other tiles; rows held whole (up to the widest block) at more warps.
- fwd: rows over _rows.MAX_BLOCK_SIZE are walked twice in tiles. Variants: held whole in one block of up to 32768 at
  16 and 32 warps; other (tile, warps); RMSNorm's rows no multiple of 16 bytes on other aligned tiles.
Beside the builtin and torch.compile of the naive expression (fwd+bwd: as the sweep's cell runs it, a training step
since ba0d144, one joint graph of gradients and output before, and as before the twenty-first session the gradients
alone, whose forward store Inductor drops), every variant checked against the builtin first. Section longfwd: the
forward's variants alone; normbwd: the held rows' backward (programs a SM, warps, the next rows prefetched or not,
two rows at once) at square and llm shapes; longbwd: the long rows' backward alone in column tiles
(kernels/_shared/norm_bwd_long.py): the next row loaded ahead, tiles, rows no multiple of 16 bytes on aligned tiles;
alignedfwd: the forward on rows no multiple of 16 bytes on aligned tiles (LayerNorm's walk, the split's chunks)."""
import torch
import triton

from kernels._shared import norm_bwd as _norm_bwd
from kernels._shared import norm_split as _norm_split
from kernels._shared.rows import MAX_BLOCK_SIZE, row_launch_params
from lab.common import DTYPES, checked, swapped, timed
from rooflab.cell import _kw, compiled_factory
from rooflab.kernel import load_kernel

LONG_SHAPES = ((4096, 8192), (2048, 16384), (1024, 28672), (4096, 32000), (1024, 50257))
TILES = (2048, 8192)  # beside the default LONG_TILE
HELD_WARPS = (16, 32)  # rows held whole (fwd+bwd: up to _rows.MAX_BLOCK_SIZE), at least this many warps
HELD_MAX_BLOCK = 32768  # the forward's held variants: rows up to this block
FWD_TILES = ((2048, 4), (4096, 8), (4096, 16), (8192, 8), (8192, 16), (16384, 16))  # (tile, warps) of the tiled walk
ALIGNED_TILES = ((1024, 4), (2048, 4), (2048, 8), (4096, 8))  # (tile, warps) of RMSNorm's forward on aligned tiles
BWD_SHAPES = ((1024, 1024), (8192, 2048), (4096, 4096), (4096, 4097), (4096, 5120), (8192, 8192), (4096, 8192),
              (16384, 4096), (128, 4096), (8192, 14336), (16, 333333))
BWD_PROGRAMS_PER_SM = (1, 2, 4)  # the most programs a SM (PROGRAMS_PER_SM), beside the default's
BWD_WARPS = (4, 8, 16, 32)  # num_warps of the held backward (the default: the fp32 tile's row_launch_params)
LONG_BWD_SHAPES = ((2048, 16384), (8192, 14336), (4096, 11008), (1024, 28672), (4096, 32000), (1024, 50257),
                   (32, 128256), (16, 333333))
LONG_BWD_TILES = (4096, 8192)  # beside LONG_TILE, with and without the next row loaded ahead
ALIGNED_FWD_SHAPES = ((4096, 4097), (8192, 4097), (6000, 1793), (2048, 5001), (1024, 50257), (16, 333333))
ALIGNED_FWD_TILES = ((1024, 4), (1024, 8), (2048, 4), (2048, 8), (4096, 8))  # LayerNorm's forward on aligned tiles


def held_at_least(warps):
    """kernels/_norm_bwd's row_launch_params with its warps raised to ``warps`` (swapped in for one variant)."""

    def params(n_cols, element_size):
        block, w = row_launch_params(n_cols, element_size)
        return block, max(w, warps)

    return params


def _compiled(kernel, pass_):
    """torch.compile of the kernel's naive expression as the sweep's cell makes it (a dynamo reset first, so the
    recompile limit is never reached across shapes): fwd+bwd as a training step runs it (the CSVs before ba0d144:
    one joint graph), handing on the gradients."""
    make, _ = compiled_factory(kernel)
    return lambda inputs: make(inputs, **_kw(kernel, pass_))


def fwd_bwd_variants(name, rows, cols, dtype, device="cuda"):
    """{variant: fn} of one norm's fwd+bwd at rows x cols: every fn returns the gradients (dx, dweight[, dbias])."""
    kernel = load_kernel(name)
    inputs = kernel.make_inputs((rows, cols), dtype, device, 0)
    builtin = kernel.impls["builtin"](inputs, pass_="fwd+bwd")
    ours = kernel.impls["triton"](inputs, pass_="fwd+bwd")
    compiled = _compiled(kernel, "fwd+bwd")(inputs)
    grads_only = torch.compile(lambda *a: kernel.naive_fn(*a, pass_="fwd+bwd")[0], fullgraph=True, dynamic=False)
    out = {
        "builtin": builtin,
        "compile": compiled,
        "compile, gradients only (before S21)": lambda: grads_only(*inputs),
        "ours (default)": ours
    }
    for tile in TILES:
        out[f"ours tiles of {tile}"] = swapped(_norm_bwd, ours, LONG_TILE=tile)
    if cols <= MAX_BLOCK_SIZE:
        for warps in HELD_WARPS:  # HELD_MAX_COLS past the widest block, a value a variant (keyed: its own plan)
            out[f"ours held, >= {warps} warps"] = swapped(_norm_bwd, ours, HELD_MAX_COLS=MAX_BLOCK_SIZE + warps,
                                                          row_launch_params=held_at_least(warps))
    return checked_against_builtin(out, dtype, f"{name} fwd+bwd")


def _bwd_alone(name, rows, cols, dtype, device):
    """({builtin, compile, ours: fwd+bwd; bwd alone (default)}, the backward alone) of one norm at rows x cols."""
    kernel = load_kernel(name)
    inputs = kernel.make_inputs((rows, cols), dtype, device, 0)
    x, w, *rest = inputs
    dy, centre = rest[-1], name == "layernorm"
    bwd = lambda: _norm_bwd.norm_backward(x, w, dy, kernel.module.EPS, centre, centre)[:2 + centre]  # noqa: E731
    out = {
        "builtin": kernel.impls["builtin"](inputs, pass_="fwd+bwd"),
        "compile": _compiled(kernel, "fwd+bwd")(inputs),
        "ours (default)": kernel.impls["triton"](inputs, pass_="fwd+bwd"),
        "bwd alone (default)": bwd
    }
    return out, bwd


def bwd_variants(name, rows, cols, dtype, device="cuda"):
    """{variant: fn} of one norm's held-row backward alone (norm_backward, every fn returning its gradients), rows no
    multiple of 16 bytes also on aligned tiles (ALIGNED_LONG), with the fwd+bwd of ours, the builtin and torch.compile
    beside it."""
    out, bwd = _bwd_alone(name, rows, cols, dtype, device)
    for per_sm in BWD_PROGRAMS_PER_SM:  # ELEMENTS_PER_SM past any tile: PROGRAMS_PER_SM alone decides
        out[f"bwd alone, {per_sm} programs a SM"] = swapped(_norm_bwd, bwd, PROGRAMS_PER_SM=per_sm,
                                                            ELEMENTS_PER_SM=1 << 30)
    for warps in BWD_WARPS:
        out[f"bwd alone, {warps} warps"] = swapped(_norm_bwd, bwd, HELD_WARPS=warps, PREFETCH_WARPS=warps)
    # without the prefetch, wide rows no multiple of 16 bytes take 32 warps (UNALIGNED_WIDE_COLS); the second
    # variant moves that rule past any row, so they keep their block's warps
    out["bwd alone, no prefetch"] = swapped(_norm_bwd, bwd, PREFETCH_ROW_BYTES=((0, 0), (0, 0)))
    out["bwd alone, no prefetch, block's warps"] = swapped(_norm_bwd, bwd, PREFETCH_ROW_BYTES=((0, 0), (0, 0)),
                                                           UNALIGNED_WIDE_COLS=1 << 30)
    out["ours, no prefetch"] = swapped(_norm_bwd, out["ours (default)"], PREFETCH_ROW_BYTES=((0, 0), (0, 0)))
    every = dict(PREFETCH_ROW_BYTES=((0, 1 << 30), ) * 2, PREFETCH_UNALIGNED=(True, True))  # at default warps and 8
    out["bwd alone, every row prefetched"] = swapped(_norm_bwd, bwd, **every, PREFETCH_WARPS=32)
    out["bwd alone, every row prefetched, 8 warps"] = swapped(_norm_bwd, bwd, **every)
    if cols * dtype.itemsize % 16:  # rows no multiple of 16 bytes: read twice on aligned tiles, not held
        for tile in (1024, 2048):
            out[f"bwd alone, aligned tiles {tile}"] = swapped(_norm_bwd, bwd, ALIGNED_LONG=True, LONG_TILE=tile,
                                                              HELD_MAX_COLS=0)
    if cols >= _norm_bwd.PACK_BELOW:  # two rows at once: the packed path's (BLOCK_M, BLOCK_SIZE) tile
        block = triton.next_power_of_2(cols)
        out["bwd alone, two rows at once"] = swapped(_norm_bwd, bwd, PACK_BELOW=cols + 1, PACK_ELEMENTS=2 * block)
    return checked_against_builtin(out, dtype, f"{name} bwd")


def long_bwd_variants(name, rows, cols, dtype, device="cuda"):
    """{variant: fn} of one norm's long-row backward alone (column tiles): the default; the next row's x and dy
    loaded ahead (TILE_PREFETCH); other tiles; rows no multiple of 16 bytes on aligned tiles (ALIGNED_LONG); the
    fwd+bwd of ours, the builtin and torch.compile beside them."""
    out, bwd = _bwd_alone(name, rows, cols, dtype, device)
    for prefetch in (False, True):
        label = ", prefetch" if prefetch else ""
        sizes = (2, 4) if prefetch else ()  # every element size prefetches, or none
        out[f"bwd alone, tile {_norm_bwd.LONG_TILE}{label}"] = swapped(_norm_bwd, bwd, TILE_PREFETCH=sizes)
        for tile in LONG_BWD_TILES:
            out[f"bwd alone, tile {tile}{label}"] = swapped(_norm_bwd, bwd, LONG_TILE=tile, TILE_PREFETCH=sizes)
    out["ours, prefetch"] = swapped(_norm_bwd, out["ours (default)"], TILE_PREFETCH=(2, 4))
    if cols * dtype.itemsize % 16:  # rows no multiple of 16 bytes: on aligned tiles (ALIGNED_LONG)
        for tile in sorted({1024, _norm_bwd.LONG_TILE, 4096}):
            out[f"bwd alone, aligned tiles {tile}"] = swapped(_norm_bwd, bwd, ALIGNED_LONG=True, LONG_TILE=tile)
        out["ours, row tiles"] = swapped(_norm_bwd, out["ours (default)"], ALIGNED_LONG=False)  # before S25
        out["ours, split on row tiles"] = swapped(_norm_split, out["ours (default)"], ALIGNED_SPLIT=())
    return checked_against_builtin(out, dtype, f"{name} bwd")


def _fwd_default(name, rows, cols, dtype, device):
    """(the kernel, x, its parameters, ours, {builtin, compile, ours (default): the forward}) at rows x cols."""
    kernel = load_kernel(name)
    inputs = kernel.make_inputs((rows, cols), dtype, device, 0)
    x, *params, _ = inputs
    ours = getattr(kernel.module, f"{name}_triton")
    out = {
        "builtin": lambda: getattr(kernel.module, f"{name}_builtin")(x, *params),
        "compile": _compiled(kernel, "fwd")(inputs),
        "ours (default)": lambda: ours(x, *params)
    }
    return kernel, x, params, ours, out


def fwd_variants(name, rows, cols, dtype, device="cuda"):
    """{variant: fn} of one norm's forward at rows x cols."""
    kernel, x, params, ours, out = _fwd_default(name, rows, cols, dtype, device)
    block = triton.next_power_of_2(cols)
    if block <= HELD_MAX_BLOCK:
        for warps in HELD_WARPS:
            out[f"ours held in {block}, {warps} warps"] = lambda w=warps: ours(x, *params, block_size=block, num_warps=w
                                                                               )
    for tile, warps in FWD_TILES:
        if tile < cols:
            out[f"ours tiles of {tile}, {warps} warps"] = lambda t=tile, w=warps: ours(
                x, *params, block_size=t, num_warps=w)
    if name == "rmsnorm" and cols * x.element_size() % 16 and cols > MAX_BLOCK_SIZE:
        for tile, warps in ALIGNED_TILES:
            out[f"aligned tiles {tile} x {warps}"] = swapped(kernel.module, out["ours (default)"],
                                                             ALIGNED_TILES={x.element_size(): (tile, warps)})
    return checked_against_builtin(out, dtype, f"{name} fwd")


def aligned_fwd_variants(name, rows, cols, dtype, device="cuda"):
    """{variant: fn} of one norm's forward on rows no multiple of 16 bytes: the default; LayerNorm's on 16-byte
    aligned tiles (its ALIGNED_TILES) at each of ALIGNED_FWD_TILES; few long rows' split in chunks on aligned tiles
    (kernels/_shared/norm_split.ALIGNED_SPLIT; the default where no split is taken); beside the builtin and torch.compile."""
    kernel, x, _, _, out = _fwd_default(name, rows, cols, dtype, device)
    if name == "layernorm":
        for tile, warps in ALIGNED_FWD_TILES:
            out[f"aligned tiles {tile} x {warps}"] = swapped(kernel.module, out["ours (default)"],
                                                             ALIGNED_TILES={x.element_size(): (1, tile, warps)})
    out["ours, split on aligned tiles"] = swapped(_norm_split, out["ours (default)"], ALIGNED_SPLIT=(2, 4))
    out["ours, split on row tiles"] = swapped(_norm_split, out["ours (default)"], ALIGNED_SPLIT=())
    return checked_against_builtin(out, dtype, f"{name} fwd")


def checked_against_builtin(variants, dtype, what):
    """Every variant but the builtin, checked once against the builtin's output (lab.common.checked)."""
    ref = variants["builtin"]()
    return {k: fn if k == "builtin" else checked(fn, ref, dtype, f"{what} {k}") for k, fn in variants.items()}


def _run(run, shapes, passes, names=("rmsnorm", "layernorm")):
    for name in names:
        bytes_moved = load_kernel(name).bytes
        for rows, cols in shapes:
            for dname in run.args.dtypes:
                label = f"{rows}x{cols}"
                fwd, both = (bytes_moved((rows, cols), dname, p) for p in ("fwd", "fwd+bwd"))
                for pass_, make in passes:
                    for variant, fn in make(name, rows, cols, DTYPES[dname]).items():
                        # the backward alone moves the pass's bytes less the forward's
                        moved = fwd if pass_ == "fwd" else both - fwd if variant.startswith("bwd alone") else both
                        run.record(f"{name} {pass_}", label, dname, variant, timed(fn, run.timer, run.cfg), moved)
                print(f"done {name} {label} {dname}", flush=True)


def run_longrows(run):
    _run(run, LONG_SHAPES, (("fwd", fwd_variants), ("fwd+bwd", fwd_bwd_variants)))


def run_longfwd(run):
    _run(run, LONG_SHAPES, (("fwd", fwd_variants), ))


PDL_SHAPES = ((128, 4096), (8192, 8192), (500000, 100))


def pdl_variants(name, rows, cols, dtype, device="cuda"):
    """{variant: fn}: the norm's fwd+bwd and its backward alone with the held rows' backward and its reduction
    launched as programmatic dependents (_norm_bwd.PDL) and without, interleaved three times, beside the builtin and
    torch.compile."""
    from lab.common import interleaved

    out, bwd = _bwd_alone(name, rows, cols, dtype, device)
    kinds = {
        f"{label}, PDL {'on' if flag else 'off'}": swapped(_norm_bwd, fn, PDL=flag)
        for label, fn in (("ours", out["ours (default)"]), ("bwd alone", bwd))
        for flag in (False, True)
    }
    return checked_against_builtin({
        "builtin": out["builtin"],
        "compile": out["compile"],
        **interleaved(kinds)
    }, dtype, f"{name} pdl")


def run_pdl(run):
    _run(run, PDL_SHAPES, (("fwd+bwd", pdl_variants), ))


def run_normbwd(run):
    _run(run, BWD_SHAPES, (("bwd", bwd_variants), ))


def run_longbwd(run):
    _run(run, LONG_BWD_SHAPES, (("bwd", long_bwd_variants), ))


def run_alignedfwd(run):
    _run(run, ALIGNED_FWD_SHAPES, (("fwd", aligned_fwd_variants), ))
