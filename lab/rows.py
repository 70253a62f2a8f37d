"""Row kernels (softmax, LayerNorm, RMSNorm, row-sum): warps, rows held or read again, tables of the defaults
swapped for earlier ones, rows with and without their column mask, short rows. Sections: rows, lnconfirm,
wbprefetch, lnfull, rmsfull, unmasked, smallrows."""
import torch
import triton
import triton.language as tl

from kernels.layernorm import bytes_moved as layernorm_bytes  # the kernels' own byte models
from kernels.layernorm import make_inputs as ln_inputs  # x, weight, bias as the sweep makes them
from kernels.rmsnorm import bytes_moved as rmsnorm_bytes
from kernels.rowsum import bytes_moved as rowsum_bytes
from lab.common import compiled, dtype_key, readings, swapped, timed


def row_variants(n, dtype):
    """(kernel, bytes moved, {variant: fn}) for each row kernel at n x n."""
    import torch.nn.functional as F

    from kernels.layernorm import layernorm_triton
    from kernels.rmsnorm import rmsnorm_builtin, rmsnorm_triton
    from kernels.rowsum import rowsum_triton
    from kernels.softmax import softmax_backward, softmax_forward

    x = torch.randn(n, n, device="cuda").to(dtype)
    y = torch.softmax(x.float(), dim=1).to(dtype)
    dy = torch.randn_like(x)
    w = torch.randn(n, device="cuda").to(dtype)
    b = torch.randn(n, device="cuda").to(dtype)
    e = x.element_size()
    warps = [w_ for w_ in (4, 8, 16) if 32 * w_ <= n]
    fwd = {"builtin": lambda: torch.softmax(x, dim=1), "triton (default)": lambda: softmax_forward(x)}
    fwd.update({f"triton w={k}": (lambda k=k: softmax_forward(x, num_warps=k, reload=False)) for k in warps})
    bwd = {
        "builtin": lambda: torch._softmax_backward_data(dy, y, 1, dtype),
        "triton (default)": lambda: softmax_backward(y, dy)
    }
    bwd.update({f"triton w={k}": (lambda k=k: softmax_backward(y, dy, num_warps=k)) for k in warps})
    ln = {"builtin": lambda: F.layer_norm(x, (n, ), w, b), "triton (default)": lambda: layernorm_triton(x, w, b)}
    ln.update({f"triton w={k}": (lambda k=k: layernorm_triton(x, w, b, num_warps=k)) for k in warps})
    for bs in (1024, 2048, 4096):  # the tiled two-read (Welford) path on a row that would fit whole
        for k in (8, 16):
            if bs < n:
                ln[f"triton tiled BS={bs} w={k}"] = (
                    lambda bs=bs, k=k: layernorm_triton(x, w, b, block_size=bs, num_warps=k))
    rms = {"builtin": lambda: rmsnorm_builtin(x, w), "triton (default)": lambda: rmsnorm_triton(x, w)}
    rms.update({f"triton w={k}": (lambda k=k: rmsnorm_triton(x, w, num_warps=k, reload=False)) for k in warps})
    for k in (8, 16):  # the row read again from the L2 in each pass (Inductor's shape for these rows)
        fwd[f"triton reload w={k}"] = (lambda k=k: softmax_forward(x, num_warps=k, reload=True))
        rms[f"triton reload w={k}"] = (lambda k=k: rmsnorm_triton(x, w, num_warps=k, reload=True))
    for variants, name in ((fwd, "softmax"), (ln, "layernorm"), (rms, "rmsnorm")):
        variants["compile"] = compiled(name, n, dtype)
        variants["triton (default, again)"] = variants["triton (default)"]
    rs = {"builtin": lambda: x.sum(dim=1), "triton (default)": lambda: rowsum_triton(x)}
    for bm in (1, 2):
        if bm * n > 32768:
            continue
        for k in warps:
            rs[f"triton BM={bm} w={k}"] = (lambda bm=bm, k=k: rowsum_triton(x, bm, None, k))
    return [("softmax fwd", 2 * n * n * e, fwd), ("softmax bwd", 3 * n * n * e, bwd),
            ("layernorm", (2 * n * n + 2 * n) * e, ln), ("rmsnorm", (2 * n * n + n) * e, rms),
            ("rowsum", (n * n + n) * e, rs)]


def layernorm_against_default(n, dtype, device, variants):
    """[(kernel, bytes moved, {variant: fn})]: LayerNorm's default launch against the same kernel with each of
    ``variants`` ({kind: {module table: value}}, set for the call by swapped), three readings each, interleaved."""
    from kernels import layernorm as ln

    x, w, b, _ = ln_inputs(n, dtype, device)
    fn = lambda: ln.layernorm_triton(x, w, b)  # noqa: E731
    kinds = {"triton (default)": fn} | {kind: swapped(ln, fn, **tables) for kind, tables in variants.items()}
    return [("layernorm", layernorm_bytes(n, dtype_key(dtype)), readings(kinds))]


def lnconfirm_variants(n, dtype, device="cuda"):
    """LayerNorm's default against its launch before round 31 (no weights loaded with the row, no register cap,
    16-bit rows of 4096 at 4 warps) and against the default without its register cap."""
    return layernorm_against_default(
        n, dtype, device, {
            "before round 31": dict(HELD_MIN_WARPS={4:
                                                    (2048, 8)}, WB_EARLY_COLS={}, REGISTER_CAP={}, PREFETCH_PROGRAMS=0),
            "default without the register cap": dict(REGISTER_CAP={})
        })


def wbprefetch_variants(n, dtype, device="cuda"):
    """LayerNorm with its weights asked of the L2 by the first program (the default, PREFETCH_PROGRAMS = 1), by
    none, by the first wave's programs and by every program."""
    wave = 4 * torch.cuda.get_device_properties(device).multi_processor_count
    return layernorm_against_default(
        n, dtype, device, {
            "no weight prefetch": dict(PREFETCH_PROGRAMS=0),
            f"prefetch by the first {wave} programs": dict(PREFETCH_PROGRAMS=wave),
            "prefetch by every program": dict(PREFETCH_PROGRAMS=n)
        })


def lnfull_variants(n, dtype, device="cuda"):
    """LayerNorm with every held row as long as its tile unmasked, with the default (UNMASKED_COLS: fp32 rows of
    2048-4096 since round 33) and with none unmasked."""
    return layernorm_against_default(
        n, dtype, device, {
            "every full row unmasked": dict(UNMASKED_COLS={
                2: (1, 1 << 14),
                4: (1, 1 << 14)
            }),
            "masked (before round 33)": dict(UNMASKED_COLS={})
        })


def rmsfull_variants(n, dtype, device="cuda"):
    """RMSNorm's held and read-again rows, each with and without the column mask (FULL), and (rows of more than
    2048) Inductor's tiles of 2048 with 16 warps, beside torch.compile, three readings each, interleaved."""
    from kernels.rmsnorm import make_inputs, rmsnorm_triton

    x, w, _ = make_inputs(n, dtype, device)
    kinds = {"triton (default)": lambda: rmsnorm_triton(x, w)}
    for reload in (False, True):
        form = "read again, 16 warps" if reload else "held"
        warps = 16 if reload else None
        for full in (False, True):
            kinds[f"{form}, {'unmasked' if full else 'masked'}"] = (
                lambda r=reload, f=full, nw=warps: rmsnorm_triton(x, w, reload=r, full=f, num_warps=nw))
    if n % 2048 == 0 and n > 2048:  # Inductor's choice for fp32 rows of 4096: two tiles of 2048, 16 warps, read twice
        for full in (False, True):
            kinds[f"tiles of 2048, 16 warps, {'unmasked' if full else 'masked'}"] = (
                lambda f=full: rmsnorm_triton(x, w, block_size=2048, num_warps=16, full=f))
    kinds["compile"] = compiled("rmsnorm", n, dtype, device)
    return [("rmsnorm", rmsnorm_bytes(n, dtype_key(dtype)), readings(kinds))]


# One 16-byte load (four 32-bit registers) in inline PTX, the row-sum's plain ld.global.v4 written out: the control
# of round 34's qualifier probe, kept beside the unmasked rows (the qualified loads were slower or a tie: dropped).
PLAIN_LOAD = "ld.global.v4.u32"


@triton.jit
def _bf16_pair(v):
    return (v << 16).to(tl.float32, bitcast=True) + ((v >> 16) << 16).to(tl.float32, bitcast=True)


@triton.jit
def _rowsum_asm(x_ptr, s_ptr, stride_xm, CHUNKS: tl.constexpr, BF16: tl.constexpr, LOAD: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    per = 8 if BF16 else 4  # elements in one 16-byte chunk
    ptrs = x_ptr + row * stride_xm + tl.arange(0, CHUNKS).to(tl.int64) * per
    regs = tl.inline_asm_elementwise(LOAD + " {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,l", [ptrs],
                                     dtype=(tl.int32, tl.int32, tl.int32, tl.int32), is_pure=True, pack=1)
    a, b, c, d = regs
    if BF16:  # two bf16 in each register: the low one shifted up, the high one with its low half cleared
        acc = (_bf16_pair(a) + _bf16_pair(b)) + (_bf16_pair(c) + _bf16_pair(d))
    else:
        acc = (a.to(tl.float32, bitcast=True) + b.to(tl.float32, bitcast=True)) + (c.to(tl.float32, bitcast=True) +
                                                                                   d.to(tl.float32, bitcast=True))
    tl.store(s_ptr + row, tl.sum(acc, axis=0).to(s_ptr.dtype.element_ty))


def rowsum_asm(x, load):
    """Row sums of a contiguous x (rows a power of two of 16-byte chunks long) through _rowsum_asm's loads."""
    from kernels.rowsum import launch_params

    n_rows, n_cols = x.shape
    s = torch.empty((n_rows, ), dtype=x.dtype, device=x.device)
    _rowsum_asm[(n_rows, )](x, s, x.stride(0), CHUNKS=n_cols * x.element_size() // 16, BF16=x.dtype == torch.bfloat16,
                            LOAD=load, num_warps=launch_params(n_cols, x.element_size())[2])
    return s


def unmasked_variants(n, dtype, device="cuda"):
    """[(kernel, bytes moved, {variant: fn})]: the default beside rows exactly one tile long with and without their
    column mask (FULL) for row-sum (and round 34's unmasked asm loads) and softmax forward, LayerNorm's default against
    every full row unmasked, and RMSNorm's default (since round 34: fp32 rows of 4096 and more read again, of
    2048-8192 unmasked) against its launch before; torch.compile beside softmax and RMSNorm. Three readings each,
    interleaved."""
    from kernels import rmsnorm as rms
    from kernels import rowsum as rs
    from kernels import softmax as sm

    name = dtype_key(dtype)
    (x, ) = rs.make_inputs(n, dtype, device)
    out = [("rowsum", rowsum_bytes(n, name),
            readings({
                "triton (default)": lambda: rs.rowsum_triton(x),
                "masked": lambda: rs.rowsum_triton(x, full=False),
                "unmasked": lambda: rs.rowsum_triton(x, full=True),
                "asm ld.global": lambda: rowsum_asm(x, PLAIN_LOAD)
            }))]
    out.append(("softmax", sm.bytes_moved(n, name),
                readings({
                    "triton (default)": lambda: sm.softmax_forward(x),
                    "masked": lambda: sm.softmax_forward(x, full=False),
                    "unmasked": lambda: sm.softmax_forward(x, full=True),
                    "compile": compiled("softmax", n, dtype, device)
                })))
    out += layernorm_against_default(
        n, dtype, device, {"every full row unmasked": dict(UNMASKED_COLS={
            2: (1, 1 << 14),
            4: (1, 1 << 14)
        })})
    xr, w, _ = rms.make_inputs(n, dtype, device)
    fn = lambda: rms.rmsnorm_triton(xr, w)  # noqa: E731
    out.append(("rmsnorm", rmsnorm_bytes(n, name),
                readings({
                    "triton (default)": fn,
                    "before round 34": swapped(rms, fn, RELOAD_MIN_COLS={2: 8192}, UNMASKED_COLS={}),
                    "compile": compiled("rmsnorm", n, dtype, device)
                })))
    return out


def smallrows_variants(n, dtype, device="cuda"):
    """[(kernel, bytes moved, {variant: fn})]: row-sum's launch shapes for short, launch-bound inputs: rows per
    program (BM 1, 2, 4) x warps (2, 4, 8) beside the default, the builtin and torch.compile (torch.compile led at
    fp32 1024^2 in three sweeps, S10, S20 and S23), three readings each, interleaved."""
    from kernels.rowsum import make_inputs, rowsum_triton

    (x, ) = make_inputs(n, dtype, device)
    kinds = {
        "triton (default)": lambda: rowsum_triton(x),
        "builtin": lambda: x.sum(dim=1),
        "compile": compiled("rowsum", n, dtype, device)
    }
    for bm in (1, 2, 4):
        for warps in (2, 4, 8):
            kinds[f"triton BM={bm} w={warps}"] = lambda bm=bm, w=warps: rowsum_triton(x, bm, None, w)
    return [("rowsum", rowsum_bytes(n, dtype_key(dtype)), readings(kinds))]


UNALIGNED_SHAPES = ((1024, 50257), (4096, 50257), (64, 53249))


def run_unaligned(run):
    """Softmax forward over long rows that are no multiple of 16 bytes: the builtin, ours on one program a row and
    split, and one program a row on 16-byte aligned tiles (first and last tile peeled) at several tiles and warps,
    each checked against the builtin in fp32, at UNALIGNED_SHAPES and every --dtypes."""
    from kernels import softmax as sm
    from lab.common import DTYPES, checked

    for rows, cols in UNALIGNED_SHAPES:
        for dname in run.args.dtypes:
            x = torch.randn(rows, cols, device="cuda").to(DTYPES[dname])
            ref = torch.softmax(x.float(), dim=1)
            variants = {
                "builtin": lambda: torch.softmax(x, dim=1),
                "ours (default)": lambda: sm.softmax_forward(x),
                "ours one program a row": lambda: sm.softmax_forward(x, split=0, aligned=False),
                "ours split 16384": lambda: sm.softmax_forward(x, split=16384)
            }
            # the product's aligned tiles at other (tile, warps): its table swapped for the call
            for block, warps in ((2048, 4), (4096, 4), (4096, 8), (8192, 16)):
                tiles = {x.element_size(): (block, warps)}
                variants[f"aligned peeled {block}x{warps}"] = checked(
                    swapped(sm, lambda: sm.softmax_forward(x, split=0, aligned=True), ALIGNED_TILES=tiles), ref,
                    DTYPES[dname], "aligned")
            for name, fn in variants.items():
                run.record("softmax_unaligned", f"{rows}x{cols}", dname, name, timed(fn, run.timer, run.cfg),
                           2 * x.numel() * x.element_size())
            print(f"done unaligned {rows}x{cols} {dname}", flush=True)


SPLIT_SHAPES = ((4, 1000000), (8, 256000), (16, 333333), (32, 128256), (64, 53248), (1024, 50257))


def run_splitrows(run):
    """Row-sum of few long rows (and long unaligned ones) split into flat tiles: the two phases in one launch (the
    default where the rows are at most SPLIT_ONCE_MAX_ROWS) against two, one program a row, and the builtin, each
    checked against the builtin in fp32, at SPLIT_SHAPES and every --dtypes."""
    from kernels import rowsum as rs
    from kernels._shared.rows import split_cols
    from lab.common import DTYPES, checked

    for rows, cols in SPLIT_SHAPES:
        for dname in run.args.dtypes:
            x = torch.randn(rows, cols, device="cuda").to(DTYPES[dname])
            ref = x.float().sum(dim=1).to(x.dtype)
            chunk = split_cols(rows, cols, rs.device_sms(x), rs.SPLIT_BELOW, rs.SPLIT_CHUNK, True) or 4096
            variants = {
                "builtin": lambda: x.sum(dim=1),
                "ours (default)": lambda: rs.rowsum_triton(x),
                "ours split, one launch": lambda: rs.rowsum_triton(x, split=chunk),
                "ours split, two launches": swapped(rs, lambda: rs.rowsum_triton(x, split=chunk),
                                                    SPLIT_ONCE_MAX_ROWS=0),
                "ours one program a row": lambda: rs.rowsum_triton(x, split=0)
            }
            for name, fn in variants.items():
                fn = fn if name == "builtin" else checked(fn, ref, DTYPES[dname], name)
                run.record("rowsum_split", f"{rows}x{cols}", dname, name, timed(fn, run.timer, run.cfg),
                           rowsum_bytes((rows, cols), dname))
            print(f"done splitrows {rows}x{cols} {dname}", flush=True)


ALIGNED_SHAPES = ((256, 50257), (1024, 50257), (4096, 50257), (2048, 16385), (1024, 151937))
ALIGNED_CHOICES = ((2048, 4), (2048, 8), (4096, 8), (4096, 16), (8192, 16))


def run_alignedrows(run):
    """Row-sum of many long rows no multiple of 16 bytes: one program a row on 16-byte aligned tiles of the flat x
    (ALIGNED_TILES, at each of ALIGNED_CHOICES) against the flat split (SPLIT_UNALIGNED), the tiled loop and the
    builtin, each checked against the builtin in fp32, at ALIGNED_SHAPES and every --dtypes."""
    from kernels import rowsum as rs
    from lab.common import DTYPES, checked

    for rows, cols in ALIGNED_SHAPES:
        for dname in run.args.dtypes:
            x = torch.randn(rows, cols, device="cuda").to(DTYPES[dname])
            ref, es = x.float().sum(dim=1).to(x.dtype), x.element_size()
            variants = {
                "builtin": lambda: x.sum(dim=1),
                "ours (default)": lambda: rs.rowsum_triton(x),
                "ours split": swapped(rs, lambda: rs.rowsum_triton(x), SPLIT_UNALIGNED=True),
                "ours tiled loop": swapped(rs, lambda: rs.rowsum_triton(x, split=0), ALIGNED_TILES={})
            }
            for tile, warps in ALIGNED_CHOICES:  # split=0: one program a row, even where SPLIT_BELOW would split
                variants[f"ours aligned {tile}x{warps}"] = swapped(rs, lambda: rs.rowsum_triton(x, split=0),
                                                                   ALIGNED_TILES={es: (tile, warps)})
            for name, fn in variants.items():
                fn = fn if name == "builtin" else checked(fn, ref, DTYPES[dname], name)
                run.record("rowsum_aligned", f"{rows}x{cols}", dname, name, timed(fn, run.timer, run.cfg),
                           rowsum_bytes((rows, cols), dname))
            print(f"done alignedrows {rows}x{cols} {dname}", flush=True)
