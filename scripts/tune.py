"""Tune launch shapes on the GPU present, with the sweep's own timer (L2 flushed, stream held, median).

Sections (--sections): "gelu" (BLOCK_SIZE x num_warps), "elementwise" (elements per program x num_warps of vecadd and
GeLU, the fast and the IEEE-division GeLU, SAXPY's default), "rows" (num_warps of softmax forward and backward,
LayerNorm and RMSNorm; rows per program x num_warps of row-sum. tune_v2.csv also has looped two-pass tiles, and
tune_v3.csv persistent software-pipelined grids (commit 359f7b8: slower in every cell, removed), tune_v4.csv
LayerNorm's moments in one shifted reduction (commit 8f4e202: no faster, removed)), "floor" (what the timer reports
for an empty event pair and for one-block kernels: the fixed cost inside every cell; and a small cell under fixed
hold lengths), "tma" (row-sum, LayerNorm and RMSNorm with each row brought into shared memory by one TMA copy),
tune_v11_prefetch_intercept.csv has "prefetch" (LayerNorm and row-sum asking the L2 for the row some programs ahead
with cp.async.bulk.prefetch; commit 803e9e0: slower in all but one cell, removed), "intercept" (fixed cost and
marginal rate of each row kernel and the copy over (R, 8192) inputs), "persist" (row-sum and LayerNorm on a
persistent grid with the next row loaded into registers ahead: slower, round 29), "lnchain" (LayerNorm's weights
loaded with the row, and register caps), "lnconfirm" (LayerNorm's default against its launch before round 31),
"wbprefetch" (LayerNorm with and without its weights asked of the L2 ahead, round 32), "onerow" (vecadd and SAXPY
tiled from the program id against the 2-D split, round 33), "lnfull" (LayerNorm's held rows as long as their tile
without the column mask, by default and everywhere, against the masked kernel, round 33), "l2hint" (row-sum's row
through explicit 16-byte loads with L2 prefetch-size, read-only and no-L1 qualifiers: slower or a tie, round 34),
"rmsfull" (RMSNorm held and read-again rows with and without the column mask, and Inductor's tiles of 2048, beside
torch.compile, round 34), "unmasked" (row-sum, softmax and LayerNorm rows with and without their column mask beside
the default, RMSNorm's default against its launch before round 34), "readfloor" (how fast anything reads the row-sum's
bytes: the builtin, cuBLAS, a one-launch split row, whole-tensor torch.sum, the copy of the same bytes by the driver
and by Triton, Triton chunk sums of 4-32 KiB; round 35), "smallrows" (row-sum's rows per program x warps on short inputs
beside the builtin and torch.compile, round 36);
tune_v16_rmscap.csv has "rmscap" (RMSNorm's fp32 rows under a register cap that fits one more row per SM, twice the
warps, and Inductor's looped reduction over tiles x warps: commit a05f5cf, none faster, removed), "timeline"
(per-program global-timer stamps inside one call, round 30), "matmul" (the pointer kernel and the TMA persistent
kernel, each autotuned, against torch.relu(a @ b)), "hints" (vecadd with evict_first / .cs cache hints),
"compile" (our Triton against torch.compile, interleaved; with TORCHINDUCTOR_CACHE_DIR set, Inductor's kernels stay
there to read), "placement" (one cell's median on several input allocations, with and without
timing.warm_translations: how much of an offset is address translation?), "drift" (one cell's batch medians over
seconds, back to back and after idle gaps: over what time must a cell be sampled?), "instances" (one cell timed again
in one process, with the same or fresh inputs and timer), "launch" (host microseconds per call). Prints, per kernel,
dtype and N, the best variants with their fraction of the copy bandwidth measured in the same run (or of cuBLAS); the
CSV keeps every variant. The tables behind the defaults in kernels/*.py come from this script. GPU only.

    python scripts/tune.py --sections rows matmul --n 1024 4096 8192 --out tune.csv
"""
import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import pandas as pd  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kernels.layernorm import bytes_moved as layernorm_bytes  # noqa: E402  (the kernels' own byte models)
from kernels.layernorm import make_inputs as ln_inputs  # noqa: E402  (x, weight, bias as the sweep makes them)
from kernels.rmsnorm import bytes_moved as rmsnorm_bytes  # noqa: E402
from kernels.rowsum import bytes_moved as rowsum_bytes  # noqa: E402
from rooflab.timing import CudaEventTimer, TimingConfig, measure, timer_for  # noqa: E402

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def dtype_key(dtype) -> str:
    """A torch dtype's name as the kernels' byte models and the sweep's tolerances key it ("bfloat16")."""
    return str(dtype).removeprefix("torch.")


class FixedHoldTimer(CudaEventTimer):
    """The sweep's timer with the hold fixed instead of sized from the enqueue cost."""

    def __init__(self, hold_us):
        super().__init__(flush_l2=True)
        self.fixed_hold_us = hold_us

    def warmup(self, fn, warmup_ms):
        super().warmup(fn, warmup_ms)
        self.hold_us = self.fixed_hold_us
        self.hold_cycles = int(self.hold_us * self.cycles_per_us)


def _time(fn, timer, cfg):
    try:
        fn()
        torch.cuda.synchronize()
        return measure(fn, timer, cfg)["median_ms"]
    except Exception as exc:  # a variant that does not compile (too many registers) is a result, not a crash
        print(f"  variant failed: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr)
        return float("nan")


def gelu_variants(n, dtype):
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
    ge = {"builtin": lambda: gelu_builtin(x), "triton (default)": lambda: gelu_triton(x),
          "triton precise (IEEE division)": lambda: gelu_triton(x, precise=True)}
    ge.update({f"triton B={b} w={w}": (lambda b=b, w=w: gelu_triton(x, b, w)) for b, w in grid if w >= 4})
    ge["builtin (again)"] = ge["builtin"]
    sa = {"builtin": lambda: saxpy_builtin(2.0, x, y), "triton (default)": lambda: saxpy_triton(2.0, x, y),
          "builtin (again)": lambda: saxpy_builtin(2.0, x, y)}
    return [("vecadd", 3 * n * n * e, va), ("gelu", 2 * n * n * e, ge), ("saxpy", 3 * n * n * e, sa)]


def floor_variants():
    """What the timer reports with next to nothing timed: its fixed cost, present in every cell."""

    @triton.jit
    def _empty(x_ptr):
        pass

    x, y = torch.zeros(1, device="cuda"), torch.zeros(1, device="cuda")
    return {"nothing between the events": lambda: None,
            "empty Triton kernel, 1 program": lambda: _empty[(1,)](x),
            "x.zero_() on 1 element": lambda: x.zero_(),
            "y.copy_(x) on 1 element": lambda: y.copy_(x),
            "empty Triton kernel, 1056 programs": lambda: _empty[(1056,)](x)}


def _compiled(name, n, dtype, device="cuda"):
    """torch.compile of a kernel's naive expression on its own inputs (compiled here, outside the timing)."""
    from rooflab.kernel import load_kernel
    from rooflab.sweep import _kw

    kernel = load_kernel(name)
    compiled = torch.compile(kernel.naive_fn, fullgraph=True, dynamic=False)  # no dynamo reset: others stay compiled
    inputs, kw = kernel.make_inputs(n, dtype, device), _kw(kernel, "fwd")
    compiled(*inputs, **kw)
    return lambda: compiled(*inputs, **kw)


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
    bwd = {"builtin": lambda: torch._softmax_backward_data(dy, y, 1, dtype),
           "triton (default)": lambda: softmax_backward(y, dy)}
    bwd.update({f"triton w={k}": (lambda k=k: softmax_backward(y, dy, num_warps=k)) for k in warps})
    ln = {"builtin": lambda: F.layer_norm(x, (n,), w, b), "triton (default)": lambda: layernorm_triton(x, w, b)}
    ln.update({f"triton w={k}": (lambda k=k: layernorm_triton(x, w, b, num_warps=k)) for k in warps})
    for bs in (1024, 2048, 4096):  # the tiled two-read (Welford) path on a row that would fit whole
        for k in (8, 16):
            if bs < n:
                ln[f"triton tiled BS={bs} w={k}"] = (lambda bs=bs, k=k: layernorm_triton(x, w, b, block_size=bs,
                                                                                          num_warps=k))
    rms = {"builtin": lambda: rmsnorm_builtin(x, w), "triton (default)": lambda: rmsnorm_triton(x, w)}
    rms.update({f"triton w={k}": (lambda k=k: rmsnorm_triton(x, w, num_warps=k, reload=False)) for k in warps})
    for k in (8, 16):  # the row read again from the L2 in each pass (Inductor's shape for these rows)
        fwd[f"triton reload w={k}"] = (lambda k=k: softmax_forward(x, num_warps=k, reload=True))
        rms[f"triton reload w={k}"] = (lambda k=k: rmsnorm_triton(x, w, num_warps=k, reload=True))
    for variants, name in ((fwd, "softmax"), (ln, "layernorm"), (rms, "rmsnorm")):
        variants["compile"] = _compiled(name, n, dtype)
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


def matmul_variants(n, dtype):
    from kernels import matmul as mm

    a = torch.randn(n, n, device="cuda").to(dtype)
    b = torch.randn(n, n, device="cuda").to(dtype)
    return {"builtin relu(mm)": lambda: torch.relu(torch.mm(a, b)),
            "cuBLAS mm alone": lambda: torch.mm(a, b),
            "triton pointer (autotuned)": lambda: mm.matmul_triton(a, b, method="pointer"),
            "triton tma persistent (autotuned)": lambda: mm.matmul_triton(a, b, method="tma")}


def flush_variants(n, dtype):
    """The same calls under each timer variant: what the flush's dirty lines and the host's launch cost add."""
    from kernels.gelu import gelu_triton
    from kernels.rowsum import rowsum_triton
    from kernels.softmax import softmax_forward

    x = torch.randn(n, n, device="cuda").to(dtype)
    y = torch.empty_like(x)
    e = x.element_size()
    return [("copy_ (same size)", 2 * n * n * e, lambda: y.copy_(x)),
            ("gelu triton", 2 * n * n * e, lambda: gelu_triton(x)),
            ("softmax fwd triton", 2 * n * n * e, lambda: softmax_forward(x)),
            ("rowsum triton", (n * n + n) * e, lambda: rowsum_triton(x)),
            ("rowsum builtin", (n * n + n) * e, lambda: x.sum(dim=1))]


def compile_variants(n, dtype_name):
    """[(kernel, bytes moved, {variant: fn})]: our Triton against torch.compile of the naive expression, each timed
    twice, interleaved. Set TORCHINDUCTOR_CACHE_DIR to keep Inductor's generated kernels (and chosen configs)."""
    from rooflab.kernel import load_kernel, torch_dtype
    from rooflab.sweep import _kw

    out = []
    for name in ("rmsnorm", "layernorm", "softmax", "rowsum", "vecadd", "saxpy", "gelu"):
        kernel = load_kernel(name)
        inputs = kernel.make_inputs(n, torch_dtype(dtype_name), "cuda")
        kw = _kw(kernel, "fwd")
        tri = kernel.impls["triton"](inputs, **kw)
        comp = _compiled(name, n, torch_dtype(dtype_name))
        variants = {"compile": comp, "triton (default)": tri, "compile (again)": comp, "triton (again)": tri}
        if "builtin" in kernel.impls:
            variants["builtin"] = kernel.impls["builtin"](inputs, **kw)
        out.append((name, kernel.bytes(n, dtype_name), variants))
    return out


def hint_variants(n, dtype):
    """(kernel, bytes moved, {variant: fn}): vecadd with cache hints on its loads and stores (streaming data that no
    one reads again: evict_first / .cs), against the default kernel and the builtin (timed first and last)."""

    from kernels._elementwise import LAUNCH
    from kernels.vecadd import vecadd_builtin, vecadd_triton

    @triton.jit
    def _add_hinted(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr, LOAD_EVICT: tl.constexpr, STORE_CM: tl.constexpr,
                    STORE_EVICT: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        if (tl.program_id(0) + 1) * BLOCK <= n:
            x = tl.load(x_ptr + offs, eviction_policy=LOAD_EVICT).to(tl.float32)
            y = tl.load(y_ptr + offs, eviction_policy=LOAD_EVICT).to(tl.float32)
            tl.store(z_ptr + offs, (x + y).to(z_ptr.dtype.element_ty), cache_modifier=STORE_CM,
                     eviction_policy=STORE_EVICT)
        else:
            m = offs < n
            x = tl.load(x_ptr + offs, mask=m).to(tl.float32)
            y = tl.load(y_ptr + offs, mask=m).to(tl.float32)
            tl.store(z_ptr + offs, (x + y).to(z_ptr.dtype.element_ty), mask=m)

    x = torch.randn(n, n, device="cuda").to(dtype)
    y = torch.randn(n, n, device="cuda").to(dtype)
    block, warps = LAUNCH[dtype]

    def hinted(load_evict, store_cm, store_evict, block=block, warps=warps):
        def fn():
            z = torch.empty_like(x)
            _add_hinted[(triton.cdiv(x.numel(), block),)](x, y, z, x.numel(), BLOCK=block, LOAD_EVICT=load_evict,
                                                          STORE_CM=store_cm, STORE_EVICT=store_evict,
                                                          num_warps=warps)
            return z
        return fn

    va = {"builtin": lambda: vecadd_builtin(x, y), "triton (default)": lambda: vecadd_triton(x, y),
          "1-D, no hints": hinted("", "", ""),
          "1-D, loads evict_first": hinted("evict_first", "", ""),
          "1-D, stores .cs": hinted("", ".cs", ""),
          "1-D, loads evict_first, stores .cs": hinted("evict_first", ".cs", ""),
          "1-D, stores evict_first": hinted("", "", "evict_first"),
          "1-D, 1024/4, no hints": hinted("", "", "", 1024, 4),
          "1-D, 1024/4, loads evict_first, stores .cs": hinted("evict_first", ".cs", "", 1024, 4),
          "builtin (again)": lambda: vecadd_builtin(x, y)}
    return [("vecadd", 3 * n * n * x.element_size(), va)]


def checked(fn, ref, dtype, what):
    """fn, once checked against ref (relative error norm within the dtype's sweep tolerance). A variant that fails or
    is wrong is no result: it raises when timed, so its time is NaN."""
    from rooflab.kernel import DEFAULT_TOLERANCE
    from rooflab.sweep import relative_error

    tol = DEFAULT_TOLERANCE[dtype_key(dtype)]
    try:
        err, _ = relative_error(fn(), ref)
    except Exception as exc:
        print(f"  {what} variant failed: {type(exc).__name__}: {str(exc)[:160]}", file=sys.stderr)
        return lambda: (_ for _ in ()).throw(RuntimeError("failed"))
    if not err <= tol:
        print(f"  {what} variant wrong: relative error {err:.3g} > {tol}", file=sys.stderr)
        return lambda: (_ for _ in ()).throw(RuntimeError("wrong"))
    return fn


def tma_variants(n, dtype, device="cuda"):
    """[(kernel, bytes moved, {variant: fn})]: row-sum, LayerNorm and RMSNorm with each row brought into shared
    memory by one TMA (bulk tensor) copy instead of per-thread loads, against the default kernels and torch, each
    timed twice, interleaved. A contiguous row of n elements is viewed as a (n / C, C) tile with C x element size =
    128 B (the widest swizzle) or 256 B, so one box (at most 256 x 256 elements) holds the whole row. Hopper only."""
    import torch.nn.functional as F
    from triton.tools.tensor_descriptor import TensorDescriptor

    from kernels.layernorm import layernorm_triton
    from kernels.rmsnorm import rmsnorm_builtin, rmsnorm_triton
    from kernels.rowsum import rowsum_triton

    @triton.jit
    def _rowsum_tma(x_desc, s_ptr, TILE_R: tl.constexpr):
        row = tl.program_id(0)
        x = x_desc.load([row * TILE_R, 0]).to(tl.float32)
        tl.store(s_ptr + row, tl.sum(tl.sum(x, axis=1), axis=0).to(s_ptr.dtype.element_ty))

    @triton.jit
    def _norm_tma(x_desc, w_ptr, b_ptr, y_ptr, y_desc, n_cols, eps, TILE_R: tl.constexpr, TILE_C: tl.constexpr,
                  CENTRE: tl.constexpr, TMA_STORE: tl.constexpr):
        row = tl.program_id(0)
        x = x_desc.load([row * TILE_R, 0]).to(tl.float32)
        if CENTRE:  # LayerNorm
            mean = tl.sum(tl.sum(x, axis=1), axis=0) / n_cols
            x = x - mean
        rstd = tl.math.rsqrt(tl.sum(tl.sum(x * x, axis=1), axis=0) / n_cols + eps)
        offs = tl.arange(0, TILE_R)[:, None] * TILE_C + tl.arange(0, TILE_C)[None, :]
        y = x * rstd * tl.load(w_ptr + offs).to(tl.float32)
        if CENTRE:
            y += tl.load(b_ptr + offs).to(tl.float32)
        if TMA_STORE:
            y_desc.store([row * TILE_R, 0], y.to(y_desc.dtype))
        else:
            tl.store(y_ptr + row.to(tl.int64) * n_cols + offs, y.to(y_ptr.dtype.element_ty))

    x, w, b = ln_inputs(n, dtype, device)
    e = x.element_size()

    def view(t, c):
        return t.view(-1, c)

    def rowsum(c, warps):
        r = n // c
        desc = TensorDescriptor.from_tensor(view(x, c), [r, c])

        def fn():
            s = torch.empty(n, device=device, dtype=dtype)
            _rowsum_tma[(n,)](desc, s, TILE_R=r, num_warps=warps)
            return s
        return fn

    def norm(c, warps, centre, tma_store):
        r = n // c
        desc = TensorDescriptor.from_tensor(view(x, c), [r, c])

        def fn():
            y = torch.empty_like(x)
            y_desc = TensorDescriptor.from_tensor(view(y, c), [r, c])
            _norm_tma[(n,)](desc, w, b, y, y_desc, n, 1e-5 if centre else 1e-6, TILE_R=r, TILE_C=c, CENTRE=centre,
                            TMA_STORE=tma_store, num_warps=warps)
            return y
        return fn

    widths = [c for c in (128 // e, 256 // e) if n % c == 0 and n // c <= 256]
    rs = {"builtin": lambda: x.sum(dim=1), "triton (default)": lambda: rowsum_triton(x)}
    ln = {"builtin": lambda: F.layer_norm(x, (n,), w, b), "triton (default)": lambda: layernorm_triton(x, w, b)}
    rms = {"builtin": lambda: rmsnorm_builtin(x, w), "triton (default)": lambda: rmsnorm_triton(x, w)}
    rs_ref, ln_ref, rms_ref = rs["triton (default)"](), ln["triton (default)"](), rms["triton (default)"]()
    for c in widths:
        for warps in (4, 8, 16):
            rs[f"tma C={c} w={warps}"] = checked(rowsum(c, warps), rs_ref, dtype, "TMA")
            for tma_store in (False, True):
                tag = f"tma C={c} w={warps}{' tma store' if tma_store else ''}"
                ln[tag] = checked(norm(c, warps, True, tma_store), ln_ref, dtype, "TMA")
                rms[tag] = checked(norm(c, warps, False, tma_store), rms_ref, dtype, "TMA")
    for v in (rs, ln, rms):
        v["triton (default, again)"] = v["triton (default)"]
        for k in [k for k in v if k.startswith("tma")]:
            v[k + " (again)"] = v[k]
    dname = dtype_key(dtype)
    return [("rowsum", rowsum_bytes(n, dname), rs), ("layernorm", layernorm_bytes(n, dname), ln),
            ("rmsnorm", rmsnorm_bytes(n, dname), rms)]


def resident_programs(compiled, num_warps, sms):
    """How many programs of one compiled kernel the GPU holds at once: the register file (64K 32-bit registers, in
    warp units of 256), 64 warps and 227 KiB of shared memory per SM, times the SMs."""
    compiled._init_handles()  # loads the binary: n_regs is known from then on
    regs = max(compiled.n_regs or 0, 1)
    per_warp = -(-regs * 32 // 256) * 256
    by_regs = 65536 // (per_warp * num_warps)
    shared = getattr(compiled.metadata, "shared", 0) or 0
    by_smem = (232448 // shared) if shared else 32
    return max(1, min(by_regs, 64 // num_warps, by_smem, 32)) * sms


def persist_variants(n, dtype, device="cuda"):
    """[(kernel, bytes moved, {variant: fn})]: row-sum and LayerNorm on a persistent grid (G programs, each walking
    rows pid, pid + G, ...) that loads its next row into registers before it reduces this one, so every program
    always has a row in flight and no program waits for a launch slot; LayerNorm also loads the weights once per
    program. G = the resident programs (registers, warps, shared memory) times 1/4-1, rounded so every program walks
    the same number of rows. num_stages=1 keeps Triton's pipeliner from staging the row through shared memory (round
    12's slower form). Against the default kernels, timed twice, interleaved."""
    import torch.nn.functional as F

    from kernels.layernorm import layernorm_triton
    from kernels.rowsum import rowsum_triton

    @triton.jit
    def _rowsum_persist(x_ptr, s_ptr, n_rows, n_cols, stride_xm, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        step = tl.num_programs(0)
        cols = tl.arange(0, BLOCK)
        cmask = cols < n_cols
        x = tl.load(x_ptr + pid.to(tl.int64) * stride_xm + cols, mask=cmask & (pid < n_rows), other=0.0)
        for r in range(pid, n_rows, step):
            nxt = r + step
            x_next = tl.load(x_ptr + nxt.to(tl.int64) * stride_xm + cols, mask=cmask & (nxt < n_rows), other=0.0)
            tl.store(s_ptr + r, tl.sum(x.to(tl.float32), axis=0).to(s_ptr.dtype.element_ty))
            x = x_next

    @triton.jit
    def _layernorm_persist(x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, stride_xm, stride_ym, eps,
                           BLOCK: tl.constexpr, HOLD_WB: tl.constexpr):
        pid = tl.program_id(0)
        step = tl.num_programs(0)
        cols = tl.arange(0, BLOCK)
        cmask = cols < n_cols
        if HOLD_WB:
            w_held = tl.load(w_ptr + cols, mask=cmask, other=0.0)
            b_held = tl.load(b_ptr + cols, mask=cmask, other=0.0)
        x = tl.load(x_ptr + pid.to(tl.int64) * stride_xm + cols, mask=cmask & (pid < n_rows), other=0.0)
        for r in range(pid, n_rows, step):
            nxt = r + step
            x_next = tl.load(x_ptr + nxt.to(tl.int64) * stride_xm + cols, mask=cmask & (nxt < n_rows), other=0.0)
            xf = x.to(tl.float32)
            mean = tl.sum(xf, axis=0) / n_cols
            diff = tl.where(cmask, xf - mean, 0.0)
            rstd = tl.math.rsqrt(tl.sum(diff * diff, axis=0) / n_cols + eps)
            if HOLD_WB:
                w, b = w_held, b_held
            else:
                w = tl.load(w_ptr + cols, mask=cmask, other=0.0)
                b = tl.load(b_ptr + cols, mask=cmask, other=0.0)
            y = diff * rstd * w.to(tl.float32) + b.to(tl.float32)
            tl.store(y_ptr + tl.cast(r, tl.int64) * stride_ym + cols, y.to(y_ptr.dtype.element_ty), mask=cmask)
            x = x_next

    sms = torch.cuda.get_device_properties(device).multi_processor_count
    x, w, b = ln_inputs(n, dtype, device)
    block = triton.next_power_of_2(n)
    if block > 16384:
        return []

    def grids(kernel, args, warps, **meta):
        """{share label: G} for G = resident programs x share, rounded so every program walks the same rows."""
        compiled = kernel.warmup(*args, grid=(1,), num_warps=warps, num_stages=1, **meta)
        full = resident_programs(compiled, warps, sms)
        print(f"  {kernel.fn.__name__} w={warps} {meta}: {compiled.n_regs} registers, {full // sms} programs/SM",
              file=sys.stderr)
        out = {}
        for share in (1.0, 0.5, 0.25):
            per = -(-n // max(1, int(full * share)))  # rows per program
            out[f"{full // sms * share:g}/SM"] = -(-n // per)
        return out

    rs = {"builtin": lambda: x.sum(dim=1), "triton (default)": lambda: rowsum_triton(x)}
    ln = {"builtin": lambda: F.layer_norm(x, (n,), w, b), "triton (default)": lambda: layernorm_triton(x, w, b)}
    rs_ref, ln_ref = rs["triton (default)"](), ln["triton (default)"]()
    s_out, y_out = torch.empty(n, device=device, dtype=dtype), torch.empty_like(x)
    for warps in (4, 8, 16):
        if 32 * warps * 8 > block * 4:
            continue
        args = (x, s_out, n, n, x.stride(0))
        for label, g in grids(_rowsum_persist, args, warps, BLOCK=block).items():
            def fn(g=g, warps=warps):
                s = torch.empty(n, device=device, dtype=dtype)
                _rowsum_persist[(g,)](x, s, n, n, x.stride(0), BLOCK=block, num_warps=warps, num_stages=1)
                return s
            rs[f"persist w={warps} G={g} ({label})"] = checked(fn, rs_ref, dtype, "persistent")
        for hold in (False, True):
            args = (x, w, b, y_out, n, n, x.stride(0), y_out.stride(0), 1e-5)
            for label, g in grids(_layernorm_persist, args, warps, BLOCK=block, HOLD_WB=hold).items():
                def fn(g=g, warps=warps, hold=hold):
                    y = torch.empty_like(x)
                    _layernorm_persist[(g,)](x, w, b, y, n, n, x.stride(0), y.stride(0), 1e-5, BLOCK=block,
                                             HOLD_WB=hold, num_warps=warps, num_stages=1)
                    return y
                tag = f"persist w={warps}{' wb held' if hold else ''} G={g} ({label})"
                ln[tag] = checked(fn, ln_ref, dtype, "persistent")
    for v in (rs, ln):
        v["triton (default, again)"] = v["triton (default)"]
        v["builtin (again)"] = v["builtin"]
    dname = dtype_key(dtype)
    return [("rowsum", rowsum_bytes(n, dname), rs), ("layernorm", layernorm_bytes(n, dname), ln)]


def lnchain_variants(n, dtype, device="cuda"):
    """[(kernel, bytes moved, {variant: fn})]: LayerNorm's held row (one tile) with a shorter chain per row: the
    weight and bias loaded with x, before the two reductions, instead of after them (round 11 did this with fp32
    copies, 80 registers, 3 rows per SM: slower), kept in the storage dtype until used; and ptxas capped at fewer
    registers (the launch option maxnreg) so more rows stay resident: 8 warps at 64 registers hold 4 rows per SM,
    at 48 five, at 40 six. Against the default kernel, timed twice, interleaved."""

    from kernels.layernorm import layernorm_triton

    @triton.jit
    def _ln_probe(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride_xm, stride_ym, eps, BLOCK: tl.constexpr,
                  WB_EARLY: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride_xm + cols, mask=mask, other=0.0)
        if WB_EARLY:
            w = tl.load(w_ptr + cols, mask=mask, other=0.0)
            b = tl.load(b_ptr + cols, mask=mask, other=0.0)
        xf = x.to(tl.float32)
        mean = tl.sum(xf, axis=0) / n_cols
        diff = tl.where(mask, xf - mean, 0.0)
        rstd = tl.math.rsqrt(tl.sum(diff * diff, axis=0) / n_cols + eps)
        if not WB_EARLY:
            w = tl.load(w_ptr + cols, mask=mask, other=0.0)
            b = tl.load(b_ptr + cols, mask=mask, other=0.0)
        y = diff * rstd * w.to(tl.float32) + b.to(tl.float32)
        tl.store(y_ptr + row * stride_ym + cols, y.to(y_ptr.dtype.element_ty), mask=mask)

    x, w, b = ln_inputs(n, dtype, device)
    block = triton.next_power_of_2(n)
    ref = layernorm_triton(x, w, b)
    ln = {"triton (default)": lambda: layernorm_triton(x, w, b)}
    from rooflab.kernel import DEFAULT_TOLERANCE
    from rooflab.sweep import relative_error

    tol = DEFAULT_TOLERANCE[dtype_key(dtype)]
    for warps in (8, 16):
        for early in (False, True):
            for cap in (None, 64, 56, 48, 40, 32):
                meta = {"maxnreg": cap} if cap else {}

                def fn(warps=warps, early=early, meta=meta):
                    y = torch.empty_like(x)
                    _ln_probe[(n,)](x, w, b, y, n, x.stride(0), y.stride(0), 1e-5, BLOCK=block, WB_EARLY=early,
                                    num_warps=warps, **meta)
                    return y
                try:
                    err, _ = relative_error(fn(), ref)
                    compiled = _ln_probe.warmup(x, w, b, x, n, x.stride(0), x.stride(0), 1e-5, BLOCK=block,
                                                WB_EARLY=early, num_warps=warps, grid=(1,), **meta)
                    compiled._init_handles()
                except Exception as exc:
                    print(f"  lnchain w={warps} early={early} cap={cap}: {type(exc).__name__} {str(exc)[:120]}",
                          file=sys.stderr)
                    continue
                if not err <= tol:
                    print(f"  lnchain w={warps} early={early} cap={cap}: wrong ({err:.3g})", file=sys.stderr)
                    continue
                label = (f"probe w={warps}{' wb early' if early else ''} regs={compiled.n_regs}"
                         f" spills={compiled.n_spills}{f' cap={cap}' if cap else ''}")
                ln[label] = fn
    ln["triton (default, again)"] = ln["triton (default)"]
    return [("layernorm", layernorm_bytes(n, dtype_key(dtype)), ln)]


def swapped(module, fn, **tables):
    """fn with the module's attributes set to tables for the call (and restored after): the same kernel source
    launched as an earlier default, or with one of its choices turned off."""
    unknown = [k for k in tables if not hasattr(module, k)]
    if unknown:
        name = getattr(module, "__name__", module)
        raise AttributeError(f"{name} has no {unknown}: a renamed table would be swapped for nothing")

    def call():
        saved = {k: getattr(module, k) for k in tables}
        for k, v in tables.items():
            setattr(module, k, v)
        try:
            return fn()
        finally:
            for k, v in saved.items():
                setattr(module, k, v)
    return call


def readings(kinds, times=3):
    """{variant: fn} with every kind timed `times` times, interleaved, each checked once against the first kind
    (checked: a wrong or failing kind is timed as NaN)."""
    from rooflab.sweep import relative_error

    ref = next(iter(kinds.values()))()
    dtype = (ref[0] if isinstance(ref, (tuple, list)) else ref).dtype
    kinds = {name: checked(fn, ref, dtype, name) for name, fn in kinds.items()}
    for name, fn in kinds.items():
        try:
            err, _ = relative_error(fn(), ref)
            print(f"  {name}: relative error against the default {err:.2g}", file=sys.stderr)
        except RuntimeError:
            pass  # checked() said why
    return interleaved(kinds, times)


def interleaved(kinds, times=3):
    """{variant: fn} with every kind `times` times, in turn (the second reading of "x" named "x (2)")."""
    return {name if rep == 0 else f"{name} ({rep + 1})": fn for rep in range(times) for name, fn in kinds.items()}


def layernorm_against_default(n, dtype, device, variants):
    """[(kernel, bytes moved, {variant: fn})]: LayerNorm's default launch against the same kernel with each of
    ``variants`` ({kind: {module table: value}}, set for the call by swapped), three readings each, interleaved."""
    from kernels import layernorm as ln

    x, w, b = ln_inputs(n, dtype, device)
    fn = lambda: ln.layernorm_triton(x, w, b)  # noqa: E731
    kinds = {"triton (default)": fn} | {kind: swapped(ln, fn, **tables) for kind, tables in variants.items()}
    return [("layernorm", layernorm_bytes(n, dtype_key(dtype)), readings(kinds))]


def lnconfirm_variants(n, dtype, device="cuda"):
    """LayerNorm's default against its launch before round 31 (no weights loaded with the row, no register cap,
    16-bit rows of 4096 at 4 warps) and against the default without its register cap."""
    return layernorm_against_default(n, dtype, device, {
        "before round 31": dict(HELD_MIN_WARPS={4: (2048, 8)}, WB_EARLY_COLS={}, REGISTER_CAP={}, PREFETCH_PROGRAMS=0),
        "default without the register cap": dict(REGISTER_CAP={})})


def wbprefetch_variants(n, dtype, device="cuda"):
    """LayerNorm with its weights asked of the L2 by the first program (the default, PREFETCH_PROGRAMS = 1), by
    none, by the first wave's programs and by every program."""
    wave = 4 * torch.cuda.get_device_properties(device).multi_processor_count
    return layernorm_against_default(n, dtype, device, {
        "no weight prefetch": dict(PREFETCH_PROGRAMS=0),
        f"prefetch by the first {wave} programs": dict(PREFETCH_PROGRAMS=wave),
        "prefetch by every program": dict(PREFETCH_PROGRAMS=n)})


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
        kinds = {"triton (default)": lambda f=triton_fn, a=inputs: f(*a),
                 "triton 2-D split (before)": lambda f=triton_fn, a=inputs: f(*a, one_row=False),
                 "builtin": kernel.impls["builtin"](inputs),
                 "compile": _compiled(name, n, torch_dtype(dtype_name), device)}
        out.append((name, kernel.bytes(n, dtype_name), readings(kinds)))
    return out


def lnfull_variants(n, dtype, device="cuda"):
    """LayerNorm with every held row as long as its tile unmasked, with the default (UNMASKED_COLS: fp32 rows of
    2048-4096 since round 33) and with none unmasked."""
    return layernorm_against_default(n, dtype, device, {
        "every full row unmasked": dict(UNMASKED_COLS={2: (1, 1 << 14), 4: (1, 1 << 14)}),
        "masked (before round 33)": dict(UNMASKED_COLS={})})


# PTX for one 16-byte load (four 32-bit registers) with the qualifiers Triton's tl.load does not offer: the L2's
# prefetch size on a miss (L2::128B / L2::256B), the non-coherent read-only path (nc) and no L1 allocation.
ROW_LOADS = {
    "ld.global": "ld.global.v4.u32",
    "ld.global.L2::256B": "ld.global.L2::256B.v4.u32",
    "ld.global.L1::no_allocate.L2::256B": "ld.global.L1::no_allocate.L2::256B.v4.u32",
    "ld.global.nc.L1::no_allocate.L2::256B": "ld.global.nc.L1::no_allocate.L2::256B.v4.u32",
    "ld.global.nc.L2::128B": "ld.global.nc.L2::128B.v4.u32",
}


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
        acc = (a.to(tl.float32, bitcast=True) + b.to(tl.float32, bitcast=True)) + (
            c.to(tl.float32, bitcast=True) + d.to(tl.float32, bitcast=True))
    tl.store(s_ptr + row, tl.sum(acc, axis=0).to(s_ptr.dtype.element_ty))


def l2hint_variants(n, dtype, device="cuda"):
    """[(kernel, bytes moved, {variant: fn})]: row-sum with its row read through explicit 16-byte loads in inline PTX
    (ROW_LOADS: the L2 fetching 128 or 256 bytes on a miss, the read-only path, no L1 allocation) against the default
    kernel, whose plain ld.global.v4 the first variant repeats through the same asm (a control for the asm path
    itself). Rows whose length is a multiple of 16 bytes and a power of two, contiguous; three readings each,
    interleaved."""
    from kernels.rowsum import make_inputs, rowsum_triton

    (x,) = make_inputs(n, dtype, device)
    kinds = {"triton (default)": lambda: rowsum_triton(x)}
    kinds |= {f"asm {k}": lambda v=v: rowsum_asm(x, v) for k, v in ROW_LOADS.items()}
    return [("rowsum", rowsum_bytes(n, dtype_key(dtype)), readings(kinds))]


def rowsum_asm(x, load):
    """Row sums of a contiguous x (rows a power of two of 16-byte chunks long) through _rowsum_asm's loads."""
    from kernels.rowsum import launch_params

    n_rows, n_cols = x.shape
    s = torch.empty((n_rows,), dtype=x.dtype, device=x.device)
    _rowsum_asm[(n_rows,)](x, s, x.stride(0), CHUNKS=n_cols * x.element_size() // 16, BF16=x.dtype == torch.bfloat16,
                           LOAD=load, num_warps=launch_params(n_cols, x.element_size())[2])
    return s


def rmsfull_variants(n, dtype, device="cuda"):
    """RMSNorm's held and read-again rows, each with and without the column mask (FULL), and (rows of more than
    2048) Inductor's tiles of 2048 with 16 warps, beside torch.compile, three readings each, interleaved."""
    from kernels.rmsnorm import make_inputs, rmsnorm_triton

    x, w = make_inputs(n, dtype, device)
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
    kinds["compile"] = _compiled("rmsnorm", n, dtype, device)
    return [("rmsnorm", rmsnorm_bytes(n, dtype_key(dtype)), readings(kinds))]


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
    (x,) = rs.make_inputs(n, dtype, device)
    out = [("rowsum", rowsum_bytes(n, name), readings({
        "triton (default)": lambda: rs.rowsum_triton(x), "masked": lambda: rs.rowsum_triton(x, full=False),
        "unmasked": lambda: rs.rowsum_triton(x, full=True),
        "asm ld.global": lambda: rowsum_asm(x, ROW_LOADS["ld.global"])}))]
    out.append(("softmax", sm.bytes_moved(n, name), readings({
        "triton (default)": lambda: sm.softmax_forward(x), "masked": lambda: sm.softmax_forward(x, full=False),
        "unmasked": lambda: sm.softmax_forward(x, full=True),
        "compile": _compiled("softmax", n, dtype, device)})))
    out += layernorm_against_default(n, dtype, device, {
        "every full row unmasked": dict(UNMASKED_COLS={2: (1, 1 << 14), 4: (1, 1 << 14)})})
    xr, w = rms.make_inputs(n, dtype, device)
    fn = lambda: rms.rmsnorm_triton(xr, w)  # noqa: E731
    out.append(("rmsnorm", rmsnorm_bytes(n, name), readings({
        "triton (default)": fn, "before round 34": swapped(rms, fn, RELOAD_MIN_COLS={2: 8192}, UNMASKED_COLS={}),
        "compile": _compiled("rmsnorm", n, dtype, device)})))
    return out


@triton.jit
def _chunk_sums(x_ptr, p_ptr, CHUNK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    tl.store(p_ptr + pid, tl.sum(tl.load(x_ptr + pid * CHUNK + tl.arange(0, CHUNK)).to(tl.float32), axis=0))


@triton.jit
def _copy_chunks(x_ptr, y_ptr, CHUNK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * CHUNK + tl.arange(0, CHUNK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def _rowsum_split(x_ptr, part_ptr, count_ptr, s_ptr, stride_xm, SPLIT: tl.constexpr, CHUNK: tl.constexpr):
    """Row sums in one launch, SPLIT programs a row: each stores its chunk's sum, then counts itself in; the row's
    last program adds the parts and sets the count back to zero for the next call."""
    pid = tl.program_id(0)
    row = (pid // SPLIT).to(tl.int64)
    x = tl.load(x_ptr + row * stride_xm + (pid % SPLIT) * CHUNK + tl.arange(0, CHUNK)).to(tl.float32)
    tl.store(part_ptr + pid, tl.sum(x, axis=0))
    tl.debug_barrier()  # every thread's part stored before the release below
    arrived = tl.atomic_add(count_ptr + row, 1, sem="acq_rel", scope="gpu")
    if arrived == SPLIT - 1:
        parts = tl.load(part_ptr + row * SPLIT + tl.arange(0, SPLIT), cache_modifier=".cg")
        tl.store(s_ptr + row, tl.sum(parts, axis=0).to(s_ptr.dtype.element_ty))
        tl.store(count_ptr + row, 0)


def _chunks(x, chunk_bytes):
    """(elements a chunk, chunks) of a contiguous x that is a whole number of chunks of chunk_bytes."""
    chunk = chunk_bytes // x.element_size()
    if not x.is_contiguous() or x.numel() % chunk:
        raise ValueError(f"{x.numel()} elements{'' if x.is_contiguous() else ', not contiguous,'} are not a whole "
                         f"number of chunks of {chunk}")
    return chunk, x.numel() // chunk


def chunk_sums(x, chunk_bytes, warps):
    """One fp32 sum per contiguous chunk of chunk_bytes of x: the least a read of x's bytes can do."""
    chunk, count = _chunks(x, chunk_bytes)
    p = torch.empty(count, dtype=torch.float32, device=x.device)
    _chunk_sums[(count,)](x, p, CHUNK=chunk, num_warps=warps)
    return p


def copy_chunks(x, y, chunk_bytes, warps):
    """y = x, chunk_bytes a program: a Triton copy beside the driver's."""
    chunk, count = _chunks(x, chunk_bytes)
    _copy_chunks[(count,)](x, y, CHUNK=chunk, num_warps=warps)
    return y


def split_rowsum(split, warps):
    """A row-sum of contiguous rows (a power of two long) by _rowsum_split, its parts and counts kept between calls
    (the counts are zero again after each call)."""
    state = {}

    def fn(x):
        n_rows, n_cols = x.shape
        key = (x.shape, x.device)
        if key not in state:
            state.clear()
            state[key] = (torch.empty(n_rows * split, dtype=torch.float32, device=x.device),
                          torch.zeros(n_rows, dtype=torch.int32, device=x.device))
        parts, counts = state[key]
        s = torch.empty(n_rows, dtype=x.dtype, device=x.device)
        _rowsum_split[(n_rows * split,)](x, parts, counts, s, x.stride(0), SPLIT=split, CHUNK=n_cols // split,
                                         num_warps=warps)
        return s
    fn.counts = lambda: next(iter(state.values()))[1]
    return fn


def readfloor_variants(n, dtype, device="cuda"):
    """[(kernel, bytes moved, {variant: fn})]: how fast can anything read the row-sum's bytes? Beside the default
    (three readings each, interleaved): the row sums by the builtin, by cuBLAS (x @ ones), and in one launch of
    2 or 4 programs a row (split_rowsum); then, no row sums but the same bytes: a whole-tensor torch.sum, the copy of
    half the rows (read + write = x's bytes) by the driver and by Triton (copy_chunks), and Triton chunk sums of
    4-32 KiB a program (chunk_sums, the least a read can do)."""
    from kernels.rowsum import make_inputs, rowsum_triton

    (x,) = make_inputs(n, dtype, device)
    ones = torch.ones(n, dtype=dtype, device=device)
    kinds = {"triton (default)": lambda: rowsum_triton(x), "builtin": lambda: x.sum(dim=1),
             "cuBLAS x @ ones": lambda: torch.mv(x, ones)}
    for split in (2, 4):
        for warps in (4, 8):
            kinds[f"one launch, {split} programs a row, {warps} warps"] = (
                lambda f=split_rowsum(split, warps): f(x))
    rows = readings(kinds)
    half, dst = x[: n // 2], torch.empty_like(x[: n // 2])
    floors = {"torch.sum, whole tensor": lambda: x.sum(),
              "copy_ of half the rows (same bytes)": lambda: dst.copy_(half),
              "Triton copy of half the rows, 4 KiB a program, 4 warps": lambda: copy_chunks(half, dst, 4096, 4),
              "Triton copy of half the rows, 8 KiB a program, 8 warps": lambda: copy_chunks(half, dst, 8192, 8)}
    for chunk in (4096, 8192, 16384, 32768):
        for warps in (4, 8):
            floors[f"chunk sums, {chunk // 1024} KiB a program, {warps} warps"] = (
                lambda c=chunk, w=warps: chunk_sums(x, c, w))
    rows |= interleaved(floors)
    return [("rowsum", rowsum_bytes(n, dtype_key(dtype)), rows)]


def smallrows_variants(n, dtype, device="cuda"):
    """[(kernel, bytes moved, {variant: fn})]: row-sum's launch shapes for short, launch-bound inputs: rows per
    program (BM 1, 2, 4) x warps (2, 4, 8) beside the default, the builtin and torch.compile (torch.compile led at
    fp32 1024^2 in three sweeps, S10, S20 and S23), three readings each, interleaved."""
    from kernels.rowsum import make_inputs, rowsum_triton

    (x,) = make_inputs(n, dtype, device)
    kinds = {"triton (default)": lambda: rowsum_triton(x), "builtin": lambda: x.sum(dim=1),
             "compile": _compiled("rowsum", n, dtype, device)}
    for bm in (1, 2, 4):
        for warps in (2, 4, 8):
            kinds[f"triton BM={bm} w={warps}"] = lambda bm=bm, w=warps: rowsum_triton(x, bm, None, w)
    return [("rowsum", rowsum_bytes(n, dtype_key(dtype)), readings(kinds))]


def timeline_rows(timer, n=8192, runs=5, dtype=torch.bfloat16):
    """Where a kernel's time goes inside it: instrumented copies of the row-sum and LayerNorm kernels (held rows, the
    defaults' launches; LayerNorm also with its weights asked of the L2 by the first program, bf16) and of a plain
    Triton copy (2048 elements a program), each program writing the global timer (%globaltimer, ns) when it starts
    and when its last store is issued, and its SM (%smid). Each run after the timer's L2 flush.
    Returns (summary rows, per-program rows of the first two runs)."""

    from kernels import layernorm as ln
    from kernels import rowsum as rs
    from kernels._rows import l2_prefetch

    @triton.jit
    def _now():
        return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False,
                                         pack=1)

    @triton.jit
    def _stamp(t_ptr, pid, t0):
        t1 = _now()
        sm = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
        tl.store(t_ptr + pid * 3, t0)
        tl.store(t_ptr + pid * 3 + 1, t1)
        tl.store(t_ptr + pid * 3 + 2, sm.to(tl.int64))

    @triton.jit
    def _rowsum_timed(x_ptr, s_ptr, t_ptr, n_cols, stride_xm, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        t0 = _now()
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + pid.to(tl.int64) * stride_xm + cols, mask=cols < n_cols, other=0.0)
        tl.store(s_ptr + pid, tl.sum(x.to(tl.float32), axis=0).to(s_ptr.dtype.element_ty))
        _stamp(t_ptr, pid, t0)

    @triton.jit
    def _layernorm_timed(x_ptr, w_ptr, b_ptr, y_ptr, t_ptr, n_cols, stride_xm, eps, BLOCK: tl.constexpr,
                         PREFETCH: tl.constexpr):
        pid = tl.program_id(0)
        t0 = _now()
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        if PREFETCH:
            lines = tl.arange(0, BLOCK // 64) * 64
            l2_prefetch(w_ptr + lines, (lines < n_cols) & (pid == 0))
            l2_prefetch(b_ptr + lines, (lines < n_cols) & (pid == 0))
        x = tl.load(x_ptr + pid.to(tl.int64) * stride_xm + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / n_cols
        diff = tl.where(mask, x - mean, 0.0)
        rstd = tl.math.rsqrt(tl.sum(diff * diff, axis=0) / n_cols + eps)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + pid.to(tl.int64) * stride_xm + cols, (diff * rstd * w + b).to(y_ptr.dtype.element_ty),
                 mask=mask)
        _stamp(t_ptr, pid, t0)

    @triton.jit
    def _copy_timed(x_ptr, y_ptr, t_ptr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        t0 = _now()
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs))
        _stamp(t_ptr, pid, t0)

    x, w, b = ln_inputs(n, dtype, "cuda")
    y = torch.empty_like(x)
    s = torch.empty(n, device="cuda", dtype=dtype)
    e = x.element_size()
    _, rs_block, rs_warps = rs.launch_params(n, e)
    ln_block, ln_warps = ln.launch_params(n, e)
    ln_meta = {k: v for k, v in ln.launch_options(n, e, ln_block, ln_warps).items() if k == "maxnreg"}
    if dtype != torch.bfloat16:
        raise ValueError("the timeline's prefetching LayerNorm assumes 2-byte weights")
    copy_block = 2048
    programs = {"rowsum": n, "layernorm": n, "layernorm+prefetch": n, "copy": n * n // copy_block}
    stamps = {k: torch.zeros(v * 3, device="cuda", dtype=torch.int64) for k, v in programs.items()}
    launches = {
        "rowsum": (lambda: _rowsum_timed[(n,)](x, s, stamps["rowsum"], n, x.stride(0), BLOCK=rs_block,
                                               num_warps=rs_warps), n * n * e),
        "layernorm": (lambda: _layernorm_timed[(n,)](x, w, b, y, stamps["layernorm"], n, x.stride(0), 1e-5,
                                                     BLOCK=ln_block, PREFETCH=False, num_warps=ln_warps, **ln_meta),
                      2 * n * n * e),
        "layernorm+prefetch": (lambda: _layernorm_timed[(n,)](x, w, b, y, stamps["layernorm+prefetch"], n,
                                                              x.stride(0), 1e-5, BLOCK=ln_block, PREFETCH=True,
                                                              num_warps=ln_warps, **ln_meta), 2 * n * n * e),
        "copy": (lambda: _copy_timed[(programs["copy"],)](x, y, stamps["copy"], BLOCK=copy_block, num_warps=4),
                 2 * n * n * e),
    }
    summary, per_program = [], []
    for run in range(runs):
        for name, (launch, moved) in launches.items():
            launch()  # compiled and warm
            timer.flush()
            torch.cuda.synchronize()
            launch()
            torch.cuda.synchronize()
            t = stamps[name].view(-1, 3).cpu()
            t0, t1, sm = t[:, 0].double(), t[:, 1].double(), t[:, 2]
            origin = t0.min()
            start, end = (t0 - origin) / 1e3, (t1 - origin) / 1e3  # us from the first program's start
            span = float(end.max())
            q = lambda v, f: float(torch.quantile(v, f))  # noqa: E731
            last_by_sm = torch.zeros(int(sm.max()) + 1, dtype=torch.float64).scatter_reduce(
                0, sm, end, reduce="amax", include_self=False)
            used = torch.unique(sm)
            last_by_sm = last_by_sm[used]
            ticks = torch.diff(torch.unique(torch.cat([t0, t1])))
            summary.append({
                "kernel": "timeline", "n": n, "dtype": dtype_key(dtype), "variant": name,
                "run": run, "programs": len(t0), "sms": len(used), "span_us": span,
                "rate_tbs": moved / span / 1e6,
                "first_end_us": float(end.min()), "last_start_us": float(start.max()),
                "end_p05_us": q(end, 0.05), "end_p50_us": q(end, 0.5), "end_p95_us": q(end, 0.95),
                "sm_last_end_min_us": float(last_by_sm.min()), "sm_last_end_max_us": span,
                "program_us_p50": q(end - start, 0.5), "program_us_p95": q(end - start, 0.95),
                "min_tick_ns": float(ticks[ticks > 0].min()) if (ticks > 0).any() else float("nan")})
            if run < 2:
                per_program += [{"variant": name, "run": run, "program": i, "start_us": a, "end_us": bb, "sm": c}
                                for i, (a, bb, c) in enumerate(zip(start.tolist(), end.tolist(), sm.tolist()))]
    return summary, per_program


INTERCEPT_ROWS = (1024, 2048, 4096, 8192, 16384, 32768)
# Fewer rows than one wave holds (132 SMs: one row per SM up to eight): what one row's whole chain costs (launch,
# load, reductions, store) when nothing else is queued. Timed beside the fit, not fitted.
WAVE_ROWS = (132, 264, 528)


def row_calls(x, w, b):
    """{call: (bytes moved, fn)}, one kernel launch each: a copy of x and each row kernel on x (rows of x.shape[1]
    columns; w and b the norms' weight and bias), ours and the builtins the probes compare them with (the intercept
    fit here, scripts/ncu_durations.py)."""
    import torch.nn.functional as F

    from kernels.gelu import gelu_triton
    from kernels.layernorm import layernorm_triton
    from kernels.rmsnorm import rmsnorm_triton
    from kernels.rowsum import rowsum_triton
    from kernels.softmax import softmax_forward

    y = torch.empty_like(x)
    rw = x.numel() * x.element_size()
    return {"copy_": (2 * rw, lambda: y.copy_(x)),
            "rowsum triton": (rw, lambda: rowsum_triton(x)),
            "rowsum builtin": (rw, lambda: x.sum(dim=1)),
            "layernorm triton": (2 * rw, lambda: layernorm_triton(x, w, b)),
            "layernorm builtin": (2 * rw, lambda: F.layer_norm(x, (x.shape[1],), w, b)),
            "rmsnorm triton": (2 * rw, lambda: rmsnorm_triton(x, w)),
            "softmax fwd triton": (2 * rw, lambda: softmax_forward(x)),
            "gelu triton": (2 * rw, lambda: gelu_triton(x))}


def intercept_rows(timer, cfg, dtypes, cols=8192):
    """Fixed cost and marginal rate: each kernel on (R, cols) inputs for every R in INTERCEPT_ROWS (same launch
    shape, more rows), fitted as time = fixed + bytes / rate. A kernel whose rate matches the copy's but whose fixed
    cost is larger loses at 8192^2 to the per-call cost, not to bandwidth. The WAVE_ROWS inputs (at most one wave)
    show how much of that fixed cost is one row's latency."""
    out = []
    for dname in dtypes:
        dtype = DTYPES[dname]
        w = (1 + 0.1 * torch.randn(cols, device="cuda")).to(dtype)
        b = (0.1 * torch.randn(cols, device="cuda")).to(dtype)
        for r in WAVE_ROWS + INTERCEPT_ROWS:
            x = torch.randn(r, cols, device="cuda").to(dtype)
            for name, (moved, fn) in row_calls(x, w, b).items():
                out.append({"kernel": "intercept", "n": r, "dtype": dname, "variant": name, "bytes": moved,
                            "median_us": _time(fn, timer, cfg) * 1e3})
            del x
            torch.cuda.empty_cache()
    return out


def intercept_summary(df) -> str:
    """Least-squares fit of median_us against bytes per (call, dtype) over INTERCEPT_ROWS: fixed cost (us) and
    marginal rate (TB/s); then the time per call at WAVE_ROWS (at most one wave of rows)."""
    from analysis.metrics import fit_line

    lines = ["fixed cost and marginal rate, time = fixed + bytes / rate over rows "
             f"{INTERCEPT_ROWS[0]}-{INTERCEPT_ROWS[-1]} of 8192 columns",
             f"{'call':<22}{'dtype':<10}{'fixed us':>9}{'rate TB/s':>10}{'at 8192 rows':>14}"]
    timed = df.dropna(subset=["median_us"])
    for (name, dname), g in timed[timed["n"] >= INTERCEPT_ROWS[0]].groupby(["variant", "dtype"], sort=False):
        at = g[g["n"] == 8192]["median_us"]
        at = at.iloc[0] if len(at) else float("nan")
        if len(g) < 2:
            lines.append(f"{name:<22}{dname:<10}{'fewer than two timed sizes: no fit':>33}")
            continue
        fixed, rate = fit_line(g["bytes"], g["median_us"])
        lines.append(f"{name:<22}{dname:<10}{fixed:>9.2f}{rate:>10.3f}{at:>12.2f}us")
    wave = timed[timed["n"] < INTERCEPT_ROWS[0]]
    if len(wave):
        lines.append("\ntime per call (us) with at most one wave of rows of 8192 columns")
        lines.append(wave.pivot_table(index=["variant", "dtype"], columns="n", values="median_us", sort=False)
                     .to_string(float_format="%.2f"))
    return "\n".join(lines)


def sweep_timing(**changes) -> TimingConfig:
    """The sweep's timing (the DAG's default config here), with one start, no loop, and `changes`: a probe times one
    start at a time unless it asks otherwise (docs/performance.md, round 24)."""
    import dataclasses

    import yaml

    from rooflab.config import default_configfile

    sweep = yaml.safe_load(Path(default_configfile(REPO)).read_text()).get("timing", {})
    return dataclasses.replace(TimingConfig.from_config(sweep), **({"loop_ms": 0, "instances": 1} | changes))


def placement_fns(kernel, impl: str, n: int, dtype_name: str, pass_: str, count: int):
    """`count` input sets of one cell (same seed, so same values, at distinct addresses) and a closure over each, as
    rooflab/sweep.run_cell builds them."""
    from rooflab.kernel import torch_dtype
    from rooflab.sweep import _kw

    sets = [kernel.make_inputs(n, torch_dtype(dtype_name), "cuda", seed=0) for _ in range(count)]
    return sets, [kernel.impls[impl](one, **_kw(kernel, pass_)) for one in sets]


PLACEMENT_CELLS = [("gelu", "triton", "bfloat16", 8192), ("layernorm", "triton", "bfloat16", 8192),
                   ("softmax", "builtin", "bfloat16", 4096), ("vecadd", "builtin", "bfloat16", 1024),
                   ("vecadd", "triton", "bfloat16", 1024)]


def placement_rows(timer, placements=6):
    """Does where the inputs sit in memory move a cell's median? One cell measured with the sweep's own settings
    (config defaults) on `placements` fresh allocations (earlier ones kept alive, a spacer of p x 1.5 MB between,
    so the addresses differ), then on the first allocation again; with the sweep's timing and with
    `warm_translations` on (the next call's input and output pages touched after each flush: is the offset TLB
    misses?). tune_v8_placement_*.csv (commits 65951e5, e7e08e5) had a probe-only toucher at a 2 MiB stride, inputs
    alone as a third variant, and 4 rotating flush buffers (timing.flush_buffers) as a fourth: docs/performance.md,
    round 22."""
    from rooflab.kernel import load_kernel, torch_dtype
    from rooflab.sweep import _kw

    modes = {"sweep timing": sweep_timing(warm_translations=False),
             "translations warmed": sweep_timing(warm_translations=True)}
    rows = []
    for name, impl, dtype_name, n in PLACEMENT_CELLS:
        kernel = load_kernel(name)
        keep, fns = [], []
        for p in range(placements):
            keep.append(torch.empty(p * 3 * (1 << 19), dtype=torch.uint8, device="cuda"))  # spacer
            inputs = kernel.make_inputs(n, torch_dtype(dtype_name), "cuda", seed=0)
            keep.append(inputs)
            fns.append((p, inputs, kernel.impls[impl](inputs, **_kw(kernel, "fwd"))))
        fns.append(("0 again",) + fns[0][1:])
        for p, inputs, fn in fns:  # the two modes interleaved per allocation, so drift does not tell them apart
            for mode, mode_cfg in modes.items():
                fn()
                torch.cuda.synchronize()
                r = measure(fn, timer, mode_cfg, inputs=[inputs])
                ptr = inputs[0].data_ptr()
                rows.append({"kernel": "placement", "n": n, "dtype": dtype_name,
                             "variant": f"{name} {impl} | {mode} | placement {p} | x at {ptr % (2 << 20) >> 10} KiB "
                                        f"of 2 MiB", "median_us": r["median_ms"] * 1e3, "n_samples": r["n_samples"]})
        del keep, fns, inputs, fn
        torch.cuda.empty_cache()
    return rows


DRIFT_CELLS = [("gelu", "triton", "bfloat16", 8192), ("softmax", "builtin", "bfloat16", 4096),
               ("gelu", "builtin", "float32", 8192)]


def drift_rows(timer, seconds=8.0, batch=16, idle_batches=150, idle_s=0.02):
    """How does one cell's time wander while nothing about it changes? Each cell with the sweep's settings (4
    placements), sampled in batches of `batch` samples (about 3 ms) back to back for `seconds`, then in
    `idle_batches` batches with `idle_s` of idle time before each (as between the sweep's cells). One row per batch:
    its host time and median. The spread of batch medians against the averaging window (printed) says over what
    time a cell must be sampled for two runs to agree, which the standard error of back-to-back samples cannot."""
    import numpy as np

    from rooflab.kernel import load_kernel
    from rooflab.timing import Rotation

    cfg = sweep_timing()
    rows = []
    for name, impl, dtype_name, n in DRIFT_CELLS:
        sets, fns = placement_fns(load_kernel(name), impl, n, dtype_name, "fwd", cfg.placements)
        rot = Rotation(fns)
        for one in rot.fns:
            one()
        timer.warmup(rot, cfg.warmup_ms)
        t0 = time.perf_counter()
        for mode in ("back to back", f"{idle_s * 1e3:.0f} ms idle before each batch"):
            i = 0
            while (time.perf_counter() - t0 < seconds) if mode == "back to back" else i < idle_batches:
                if mode != "back to back":
                    torch.cuda.synchronize()
                    time.sleep(idle_s)
                rot.calls = 0
                x = timer.sample(rot, batch)
                rows.append({"kernel": "drift", "n": n, "dtype": dtype_name, "variant": f"{name} {impl} | {mode}",
                             "batch": i, "t_s": time.perf_counter() - t0, "median_us": float(np.median(x)) * 1e3,
                             "n_samples": batch})
                i += 1
        del rot, sets, fns
        torch.cuda.empty_cache()
    return rows


def drift_summary(df) -> str:
    """Per cell and mode: the relative standard deviation of the means of k consecutive batch medians, for k = 1,
    4, 16, 64 (how fast averaging over a longer time takes the wander out)."""
    lines = ["relative SD (%) of the mean of k consecutive batch medians (k = 1, 4, 16, 64), batches, span (s)"]
    for variant, g in df.groupby("variant", sort=False):
        x = g["median_us"].to_numpy()
        sds = []
        for k in (1, 4, 16, 64):
            m = x[: len(x) // k * k].reshape(-1, k).mean(axis=1)
            sds.append(f"{100 * m.std(ddof=1) / m.mean():.2f}" if m.size > 2 else "-")
        lines.append(f"  {variant}: {' / '.join(sds)}, {len(x)}, {g.t_s.max() - g.t_s.min():.1f}")
    return "\n".join(lines)


INSTANCE_CELLS = [("gelu", "triton", "bfloat16", 8192, "fwd"), ("gelu", "builtin", "float32", 8192, "fwd"),
                  ("softmax", "builtin", "float32", 8192, "fwd+bwd")]


def instance_rows(timer, instances=8):
    """Which part of a cell's setup carries its offset? Between processes a cell's median moves by about 0.4 us
    whatever its length (45-650 us) and however long it is sampled. One cell timed `instances` times in this
    process, each time as the sweep does (placements, warm-up, hold sized in the warm-up, samples), changing one
    thing: "again" (same inputs, same timer), "new timer" (same inputs, a fresh timer: new flush buffer, new spin
    calibration), "new inputs" (fresh input sets, the earlier ones freed: the allocator may hand back the same
    blocks), "new inputs kept" (fresh input sets, the earlier ones kept alive: other memory each time)."""
    from rooflab.kernel import load_kernel

    cfg = sweep_timing()
    rows = []
    for name, impl, dtype_name, n, pass_ in INSTANCE_CELLS:
        kernel = load_kernel(name)

        def placements():
            return placement_fns(kernel, impl, n, dtype_name, pass_, cfg.placements)

        for mode in ("again", "new timer", "new inputs", "new inputs kept"):
            sets, fns = placements()
            kept = []
            for i in range(instances):
                t = timer
                if mode == "new timer":
                    t = timer_for("cuda", cfg)
                elif mode.startswith("new inputs") and i:
                    if mode == "new inputs kept":
                        kept.append((sets, fns))
                    del sets, fns
                    sets, fns = placements()
                r = measure(fns, t, cfg)
                rows.append({"kernel": "instance", "n": n, "dtype": dtype_name,
                             "variant": f"{name} {impl} {pass_} | {mode}", "batch": i,
                             "median_us": r["median_ms"] * 1e3, "placement_sd_rel": r["placement_sd_rel"],
                             "hold_us": r["hold_us"], "n_samples": r["n_samples"],
                             "x_mib": sets[0][0].data_ptr() >> 20})
            del sets, fns, kept
            torch.cuda.empty_cache()
    return rows


def launch_costs():
    from kernels.gelu import gelu_builtin, gelu_triton

    x = torch.randn(256, 256, device="cuda")
    rows = []
    for name, fn in {"builtin F.gelu": lambda: gelu_builtin(x), "gelu_triton wrapper": lambda: gelu_triton(x),
                     "torch.empty_like only": lambda: torch.empty_like(x)}.items():
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(2000):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        rows.append({"kernel": "launch", "n": 256, "dtype": "float32", "variant": f"host us/call: {name}",
                     "median_us": (t1 - t0) / 2000 * 1e6})
    return rows


def _by_dtype(variants):
    """A section that takes a torch dtype, called with the dtype's name as --dtypes gives it."""
    return lambda n, d: variants(n, DTYPES[d])


# Sections timed at every --n and --dtypes, in this order: (n, dtype name) -> [(kernel, bytes moved, {variant: fn})]
PER_SIZE_SECTIONS = {
    "gelu": lambda n, d: [("gelu", *gelu_variants(n, DTYPES[d]))],
    "elementwise": _by_dtype(elementwise_variants),
    "hints": _by_dtype(hint_variants),
    "compile": compile_variants,
    "rows": _by_dtype(row_variants),
    "tma": _by_dtype(tma_variants),
    "persist": _by_dtype(persist_variants),
    "lnchain": _by_dtype(lnchain_variants),
    "lnconfirm": _by_dtype(lnconfirm_variants),
    "wbprefetch": _by_dtype(wbprefetch_variants),
    "onerow": onerow_variants,
    "lnfull": _by_dtype(lnfull_variants),
    "l2hint": _by_dtype(l2hint_variants),
    "rmsfull": _by_dtype(rmsfull_variants),
    "unmasked": _by_dtype(unmasked_variants),
    "readfloor": _by_dtype(readfloor_variants),
    "smallrows": _by_dtype(smallrows_variants),
}

KNOWN_SECTIONS = {*PER_SIZE_SECTIONS, "floor", "flush", "matmul", "intercept", "placement", "drift", "instances",
                  "launch", "timeline"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sections", nargs="+", default=["gelu", "rows", "matmul", "launch"])
    ap.add_argument("--n", type=int, nargs="+", default=[8192])
    ap.add_argument("--matmul-n", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--out", default="tune.csv")
    ap.add_argument("--instances", type=int, default=1,
                    help="fresh starts (a new warm-up and hold each) a variant's samples are pooled from: small cells "
                         "draw an offset per start (docs/performance.md round 24). The sweep uses 8 on a GPU, with 4 "
                         "input placements each; a variant here keeps its one set of inputs. The placement, drift "
                         "and instances probes choose their own starts")
    args = ap.parse_args()
    unknown = set(args.sections) - KNOWN_SECTIONS
    if unknown:
        ap.error(f"unknown section(s) {sorted(unknown)}; known: {sorted(KNOWN_SECTIONS)}")
    timer = CudaEventTimer(flush_l2=True)
    cfg = TimingConfig(warmup_ms=10, max_time_s=0.25 * args.instances ** 0.5, loop_ms=0, instances=args.instances)
    src = torch.randn(1 << 30, device="cuda")
    dst = torch.empty_like(src)
    copy_gbps = 2 * src.numel() * 4 / measure(lambda: dst.copy_(src), timer, cfg)["median_ms"] / 1e6
    del src, dst
    print(f"copy: {copy_gbps:.0f} GB/s", flush=True)
    rows = []

    def record(kernel, n, dtype, name, ms, moved=None, flops=None):
        r = {"kernel": kernel, "n": n, "dtype": dtype, "variant": name, "median_us": ms * 1e3}
        if moved:
            r.update(gbps=moved / ms / 1e6, of_copy=moved / ms / 1e6 / copy_gbps)
        if flops:
            r["tflops"] = flops / ms / 1e9
        rows.append(r)

    if "floor" in args.sections:
        for name, fn in floor_variants().items():
            record("floor", 0, "-", name, _time(fn, timer, cfg))
        # Does the length of the hold move a small cell? (SMs idle behind a long spin might clock down.)
        a = torch.randn(1024, 1024, device="cuda")
        b = torch.randn(1024, 1024, device="cuda")
        for rep in range(3):
            for hold in (20.0, 100.0, 400.0, None):
                t = FixedHoldTimer(hold) if hold else timer
                record("floor", 1024, "float32", f"torch.add 1024^2 fp32, hold {hold or 'adaptive'} us, rep {rep}",
                       _time(lambda: torch.add(a, b), t, cfg))
    if "flush" in args.sections:
        timers = {"write flush + hold": CudaEventTimer(flush_l2=True, flush_mode="write"),
                  "read flush + hold": timer,
                  "write flush, no hold": CudaEventTimer(flush_l2=True, hold_stream=False),
                  "no flush + hold (L2 warm)": CudaEventTimer(flush_l2=False)}
        big = torch.randn(1 << 30, device="cuda")
        big_dst = torch.empty_like(big)
        for tname, t in timers.items():
            ms = _time(lambda: big_dst.copy_(big), t, cfg)
            record("flush", 32768, "float32", f"4 GiB copy | {tname}", ms, 2 * big.numel() * 4)
        del big, big_dst
        for n in args.n:
            for dname in args.dtypes:
                for name, moved, fn in flush_variants(n, DTYPES[dname]):
                    for tname, t in timers.items():
                        record("flush", n, dname, f"{name} | {tname}", _time(fn, t, cfg), moved)
                torch.cuda.empty_cache()
    for n in args.n:
        for dname in args.dtypes:
            for section, make in PER_SIZE_SECTIONS.items():
                if section in args.sections:
                    for kernel, moved, variants in make(n, dname):
                        for name, fn in variants.items():
                            record(kernel, n, dname, name, _time(fn, timer, cfg), moved)
            print(f"done n={n} {dname}", flush=True)
            torch.cuda.empty_cache()
    if "matmul" in args.sections:
        from kernels import matmul as mm

        for n in args.matmul_n:
            for dname in ("bfloat16", "float16"):
                for name, fn in matmul_variants(n, DTYPES[dname]).items():
                    record("matmul", n, dname, name, _time(fn, timer, cfg), flops=2.0 * n ** 3 + n * n)
                for tuner, label in ((mm._matmul_kernel_autotuned, "pointer"), (mm._matmul_tma_autotuned, "tma")):
                    best = getattr(tuner, "best_config", None)
                    rows.append({"kernel": "matmul", "n": n, "dtype": dname, "variant": f"chosen {label}: {best}"})
                print(f"done matmul n={n}", flush=True)
    if "intercept" in args.sections:
        rows += intercept_rows(timer, cfg, args.dtypes)
    if "placement" in args.sections:
        rows += placement_rows(timer)
    if "drift" in args.sections:
        rows += drift_rows(timer)
    if "instances" in args.sections:
        rows += instance_rows(timer)
    if "launch" in args.sections:
        rows += launch_costs()
    if "timeline" in args.sections:
        print("timeline: bf16 8192^2 (it does not take --n or --dtypes)", flush=True)
        summary, per_program = timeline_rows(timer)
        rows += summary
        timeline_csv = Path(args.out).with_name(Path(args.out).stem + "_timeline.csv")
        pd.DataFrame(per_program).to_csv(timeline_csv, index=False)
        print(f"per-program times: {timeline_csv}")
    df = pd.DataFrame(rows)
    df.to_csv(args.out, index=False)
    pd.set_option("display.width", 200)
    fl = df[df.kernel == "flush"]
    if len(fl):
        fl = fl.assign(call=fl.variant.str.split(" \\| ").str[0], timer=fl.variant.str.split(" \\| ").str[1])
        print("\nGB/s by timer variant")
        print(fl.pivot_table(index=["n", "dtype", "call"], columns="timer", values="gbps", sort=False)
              .to_string(float_format="%.0f"))
    probes = ["launch", "flush", "floor", "placement", "drift", "instance", "intercept", "timeline"]
    for (kernel, n, dtype), g in df[~df.kernel.isin(probes)].groupby(["kernel", "n", "dtype"], sort=False):
        base = g[g.variant.str.startswith("builtin")]["median_us"].min()
        g = g.assign(vs_builtin=base / g["median_us"])
        cols = [c for c in ("variant", "median_us", "gbps", "of_copy", "tflops", "vs_builtin") if c in g]
        print(f"\n{kernel} N={n} {dtype}")
        g = g.dropna(subset=["median_us"]).sort_values("median_us")
        named = g.variant.str.match(r"builtin|triton \((default)\)|triton precise")
        keep = g.head(3).index.union(g[named].index)
        print(g.loc[g.index.isin(keep), cols].to_string(index=False, float_format="%.3f"))
        chosen = g[g.variant.str.startswith("chosen")]["variant"].tolist()
        if chosen:
            print("  " + "\n  ".join(chosen))
    pl = df[df.kernel == "placement"]
    if len(pl):
        print("\nmedian by input placement (us)\n" + pl[["variant", "median_us", "n_samples"]].to_string(index=False))
        parts = pl.variant.str.split(" \\| ")
        spread = pl.assign(cell=parts.str[0], timer=parts.str[1]).groupby(["cell", "timer"], sort=False)["median_us"]
        print("\nspread over the allocations, (max - min) / min, %\n"
              + (spread.max() / spread.min() - 1).mul(100).round(2).to_string())
    if "drift" in args.sections:
        print("\n" + drift_summary(df[df.kernel == "drift"]))
    if "instances" in args.sections:
        inst = df[df.kernel == "instance"].groupby("variant", sort=False)["median_us"]
        print("\none cell timed again in this process: median (us) of each instance\n"
              + inst.agg(lambda x: " ".join(f"{v:.2f}" for v in x)).to_string()
              + "\n\nspread (max - min, us) / SD (us)\n" + pd.concat([inst.max() - inst.min(), inst.std()], axis=1)
              .round(3).to_string())
    if "intercept" in args.sections:
        print("\n" + intercept_summary(df[df.kernel == "intercept"]))
    if "timeline" in args.sections:
        tl_cols = ["variant", "run", "programs", "sms", "span_us", "rate_tbs", "first_end_us", "end_p05_us",
                   "end_p50_us", "end_p95_us", "last_start_us", "sm_last_end_min_us", "program_us_p50",
                   "program_us_p95", "min_tick_ns"]
        print("\ninside one call (us from the first program's start; programs' global-timer stamps)\n"
              + df[df.kernel == "timeline"][tl_cols].to_string(index=False, float_format="%.2f"))
    if "floor" in args.sections:
        print("\ntimer floor (us)\n" + df[df.kernel == "floor"][["variant", "median_us"]].to_string(index=False))
    if "launch" in args.sections:
        print(df[df.kernel == "launch"][["variant", "median_us"]].to_string(index=False))


if __name__ == "__main__":
    main()
