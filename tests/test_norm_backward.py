"""LayerNorm and RMSNorm backward (kernels/_shared/norm_bwd.py, issue 24): every gradient (dx, dweight, dbias) against
autograd through the float64 expression, under the interpreter in fp32 and fp16; odd row lengths, several rows
per program, leading dimensions; the forward without autograd stays the plain kernel."""
import pytest
import torch

from kernels._shared.norm_bwd import norm_backward
from kernels.layernorm import EPS as LN_EPS, layernorm_triton
from kernels.rmsnorm import EPS as RMS_EPS, rmsnorm_triton

TOL = {torch.float32: 1e-4, torch.float16: 2e-2}


def rand(shape, dtype, seed, scale=1.0, shift=0.0):
    g = torch.Generator().manual_seed(seed)
    return (shift + scale * torch.randn(shape, generator=g, dtype=torch.float32)).to(dtype)


def ln64(x, w, b):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean)**2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + LN_EPS) * w + b


def rms64(x, w):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + RMS_EPS) * w


def grads(fn, inputs, dy):
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    fn(*leaves).backward(dy)
    return [t.grad for t in leaves]


def rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape", [(5, 17), (37, 64), (2, 3, 33)])
def test_layernorm_gradients_against_float64(dtype, shape):
    n = shape[-1]
    x, w, b = rand(shape, dtype, 0), rand((n, ), dtype, 1, 0.1, 1.0), rand((n, ), dtype, 2, 0.1)
    dy = rand(shape, dtype, 3)
    ours = grads(layernorm_triton, (x, w, b), dy)
    ref = grads(ln64, (x.double(), w.double(), b.double()), dy.double())
    for name, o, r in zip(("dx", "dweight", "dbias"), ours, ref):
        assert o.dtype == dtype and o.shape == r.shape, name
        assert rel(o, r) < TOL[dtype], (name, rel(o, r))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape", [(5, 17), (37, 64), (2, 3, 33)])
def test_rmsnorm_gradients_against_float64(dtype, shape):
    n = shape[-1]
    x, w = rand(shape, dtype, 0), rand((n, ), dtype, 1, 0.1, 1.0)
    dy = rand(shape, dtype, 3)
    ours = grads(rmsnorm_triton, (x, w), dy)
    ref = grads(rms64, (x.double(), w.double()), dy.double())
    for name, o, r in zip(("dx", "dweight"), ours, ref):
        assert o.dtype == dtype and o.shape == r.shape, name
        assert rel(o, r) < TOL[dtype], (name, rel(o, r))


def test_the_forward_without_autograd_records_nothing():
    x, w, b = rand((4, 8), torch.float32, 0), rand((8, ), torch.float32, 1), rand((8, ), torch.float32, 2)
    assert layernorm_triton(x, w, b).grad_fn is None
    assert layernorm_triton(x, w.requires_grad_(), b).grad_fn is not None
    with torch.no_grad():
        assert rmsnorm_triton(x, w).grad_fn is None


def _norm_grads64(centre, x, w, b, dy):
    if centre:
        return grads(ln64, (x.double(), w.double(), b.double()), dy.double())
    return grads(rms64, (x.double(), w.double()), dy.double())


@pytest.mark.parametrize("centre", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("path", ["tiles", "tiles, prefetch", "aligned tiles"])
@pytest.mark.parametrize("shape,tile", [((3, 100), 16), ((37, 64), 32), ((1, 33), 16), ((9, 257), 64)])
def test_long_row_path_against_float64(monkeypatch, centre, dtype, path, shape, tile):
    # the column-tiled path of rows longer than a block, forced on short rows: a last partial tile, one row,
    # several rows a program (37 rows over 2 tiles), a large mean (LayerNorm combines tiles about their own means);
    # on plain tiles with and without the next row's x and dy loaded ahead (TILE_PREFETCH, keyed), and on 16-byte
    # aligned tiles (ALIGNED_LONG), which rows of no multiple of 16 bytes take
    from kernels._shared import norm_bwd as _norm_bwd

    monkeypatch.setattr(_norm_bwd, "TILE_PREFETCH", (2, 4) if path == "tiles, prefetch" else ())
    monkeypatch.setattr(_norm_bwd, "ALIGNED_LONG", path == "aligned tiles")
    seen = []
    launch = _norm_bwd._LAUNCHES.launch

    def spy(key, kernel, grid, args, kwargs=None, n_head=0):
        seen.append((kernel.__name__, (kwargs or {}).get("PREFETCH")))
        return launch(key, kernel, grid, args, kwargs, n_head)

    monkeypatch.setattr(_norm_bwd._LAUNCHES, "launch", spy)
    n = shape[-1]
    x, w, b = rand(shape, dtype, 0, 1.0, 8.0), rand((n, ), dtype, 1, 0.1, 1.0), rand((n, ), dtype, 2, 0.1)
    dy = rand(shape, dtype, 3)
    ours = norm_backward(x, w, dy, LN_EPS if centre else RMS_EPS, centre, centre, tile=tile)
    aligned = path == "aligned tiles" and n * x.element_size() % 16
    assert [name for name, _ in seen[:2]
            ] == (["_norm_bwd_aligned_stats_kernel", "_norm_bwd_aligned_apply_kernel"]
                  if aligned else ["_norm_bwd_tile_stats_kernel", "_norm_bwd_tile_apply_kernel"])
    if not aligned:
        assert seen[1][1] == (path == "tiles, prefetch")
    ref = _norm_grads64(centre, x, w, b, dy)
    for name, o, r in zip(("dx", "dweight", "dbias"), ours, ref):
        assert o.dtype == dtype and o.shape == r.shape, name
        assert rel(o, r) < TOL[dtype], (name, rel(o, r))
    if not centre:
        assert ours[2] is None


@pytest.mark.parametrize("centre", [True, False])
def test_rows_longer_than_one_block_take_the_tiled_path(centre):
    from kernels._shared.rows import MAX_BLOCK_SIZE

    n = MAX_BLOCK_SIZE + 1000  # a row no block holds (nor HELD_MAX_COLS): the default goes to the long-row path
    x, w, b = rand((2, n), torch.float32, 0), rand((n, ), torch.float32, 1, 0.1, 1.0), rand((n, ), torch.float32, 2)
    dy = rand((2, n), torch.float32, 3)
    fn = (lambda *t: layernorm_triton(*t)) if centre else (lambda x, w: rmsnorm_triton(x, w))
    ours = grads(fn, (x, w, b) if centre else (x, w), dy)
    for name, o, r in zip(("dx", "dweight", "dbias"), ours, _norm_grads64(centre, x, w, b, dy)):
        assert rel(o, r) < TOL[torch.float32], (name, rel(o, r))


def test_a_tile_that_is_no_power_of_two_is_refused():
    with pytest.raises(ValueError, match="power of two"):
        norm_backward(torch.zeros(1, 40), torch.ones(40), torch.zeros(1, 40), 1e-5, True, True, tile=24)


def test_rows_over_held_max_cols_take_the_tiled_path(monkeypatch):
    # rows of 8193-16384 columns fit a block but spill when held: the tiled path takes them
    from kernels._shared import norm_bwd as _norm_bwd

    calls = []

    def first_call(key, x2, *rest):  # records the tile it was given
        calls.append(rest[5])
        return x2, torch.zeros(2, x2.shape[1])  # dx, (dweight, dbias)

    monkeypatch.setattr(_norm_bwd, "_first_call", first_call)
    n = _norm_bwd.HELD_MAX_COLS + 1
    norm_backward(torch.zeros(1, n), torch.ones(n), torch.zeros(1, n), 1e-5, True, True)
    norm_backward(torch.zeros(1, n - 1), torch.ones(n - 1), torch.zeros(1, n - 1), 1e-5, True, True)
    assert calls == [_norm_bwd.LONG_TILE, None]


@pytest.mark.parametrize("tile", [None, 16])
@pytest.mark.parametrize("centre", [True, False])
def test_a_kept_backward_replays_its_first_call(tile, centre):
    # kernels/_shared/fastlaunch.py: a key's first call plans and keeps its launches (held rows: one; column tiles: two;
    # then the partials' reduction); a hit on new tensors launches them with no planning and gives the plain path's
    # answer; alignment is keyed
    from kernels._shared import fastlaunch as fl
    from kernels._shared.norm_bwd import _LAUNCHES

    def call(seed, unaligned=False):
        x = rand((7 * 40 + 1,), torch.float32, seed)[1:].view(7, 40) if unaligned else \
            rand((7, 40), torch.float32, seed)
        return x, rand((40, ), torch.float32, seed + 1, 0.1, 1.0), rand((7, 40), torch.float32, seed + 2)

    plain = [norm_backward(*call(s), 1e-5, centre, centre, tile=tile) for s in (0, 10)]
    with fl.replaying():
        kept = norm_backward(*call(0), 1e-5, centre, centre, tile=tile)
        misses = _LAUNCHES.misses
        assert misses == (2 if tile is None else 3) and len(_LAUNCHES) == misses + 1, _LAUNCHES.skipped
        hit = norm_backward(*call(10), 1e-5, centre, centre, tile=tile)
        assert _LAUNCHES.misses == misses
        for ours, ref in zip((*kept, *hit), (*plain[0], *plain[1])):
            if ref is None:
                assert ours is None
            else:
                torch.testing.assert_close(ours, ref, atol=0, rtol=0)
        x, w, dy = call(20, unaligned=True)
        assert x.data_ptr() % 16 != 0
        norm_backward(x, w, dy, 1e-5, centre, centre, tile=tile)  # x one element in: a key of its own
        assert _LAUNCHES.misses == 2 * misses


@pytest.mark.parametrize("centre", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape,tile", [((7, 37), 16), ((9, 101), 32), ((3, 1001), 128), ((17, 250), 16), ((2, 61), 64),
                                        ((100, 33), 16)])
def test_long_unaligned_rows_on_aligned_tiles_against_float64(monkeypatch, centre, dtype, shape, tile):
    # ALIGNED_LONG: rows no multiple of 16 bytes on tiles from the 16-byte boundary before each row: rows of one
    # tile and two (no inner tile), of 2-8 start classes (250 fp16 columns: 4), classes of one row (2 rows, 8
    # classes), several rows a program and rows past the end (100 rows), a large mean
    from kernels._shared import norm_bwd as _norm_bwd
    from kernels._shared import norm_bwd_aligned as _norm_bwd_aligned

    monkeypatch.setattr(_norm_bwd, "ALIGNED_LONG", True)
    launched = []
    for name in ("_norm_bwd_aligned_stats_kernel", "_norm_bwd_aligned_apply_kernel"):
        real = getattr(_norm_bwd_aligned, name)
        monkeypatch.setattr(
            _norm_bwd_aligned, name,
            type("Spy", (), {
                "__getitem__": lambda self, grid, r=real, n=name: (launched.append(n), r[grid])[1]
            })())
    n = shape[-1]
    x, w, b = rand(shape, dtype, 0, 1.0, 8.0), rand((n, ), dtype, 1, 0.1, 1.0), rand((n, ), dtype, 2, 0.1)
    dy = rand(shape, dtype, 3)
    ours = norm_backward(x, w, dy, LN_EPS if centre else RMS_EPS, centre, centre, tile=tile)
    for name, o, r in zip(("dx", "dweight", "dbias"), ours, _norm_grads64(centre, x, w, b, dy)):
        assert o.dtype == dtype and o.shape == r.shape, name
        assert rel(o, r) < TOL[dtype], (name, rel(o, r))
    again = norm_backward(x, w, dy, LN_EPS if centre else RMS_EPS, centre, centre, tile=tile)  # the kept plan
    assert all(torch.equal(a, o) for a, o in zip(again, ours) if o is not None)
    assert len(launched) == 4
    # aligned rows keep _norm_bwd_long's tiles
    x = rand((3, 64), dtype, 0)
    norm_backward(x, rand((64, ), dtype, 1), rand((3, 64), dtype, 3), 1e-5, centre, centre, tile=16)
    assert len(launched) == 4


@pytest.mark.parametrize("centre", [True, False])
@pytest.mark.parametrize("cols,tile", [(32, None), (300, None), (300, 64)])
def test_eps_zero_leaves_no_nan_from_rows_past_the_end(monkeypatch, centre, cols, tile):
    # a program's rows run past the last row (held: 100 rows over 16 programs, 8 rows a tile; column tiles of 64:
    # 5 tiles, 34 rows a program, the next rows loaded ahead): those rows' sum of squares is 0, so with eps 0 their
    # rstd must not reach dweight as 0 * inf
    from kernels._shared import norm_bwd as _norm_bwd

    monkeypatch.setattr(_norm_bwd, "TILE_PREFETCH", (4, ))
    x, w, b, dy = rand((100, cols), torch.float32, 0), rand((cols,), torch.float32, 1, 0.1, 1.0), \
        rand((cols,), torch.float32, 2), rand((100, cols), torch.float32, 3)
    ours = norm_backward(x, w, dy, 0.0, centre, centre, tile=tile)
    f = (lambda x, w, b: torch.nn.functional.layer_norm(x, (cols,), w, b, 0.0)) if centre else \
        (lambda x, w: x / torch.sqrt((x * x).mean(-1, keepdim=True)) * w)
    ref = grads(f, (x.double(), w.double(), b.double()) if centre else (x.double(), w.double()), dy.double())
    for name, o, r in zip(("dx", "dweight", "dbias"), ours, ref):
        assert torch.isfinite(o).all() and rel(o, r) < TOL[torch.float32], (name, rel(o, r))


@pytest.mark.parametrize("centre", [True, False])
@pytest.mark.parametrize("shape,tile", [((37, 40), None), ((37, 40), 16), ((9, 257), None)])
def test_partials_reduced_over_several_steps(monkeypatch, centre, shape, tile):
    # the reduction walks the programs' partial sums REDUCE_MAX_PARTS rows at a time: at 2 (keyed, so the swap takes
    # effect) 37 rows' partials take several steps, a ragged last one among them; odd fp16 rows put dbias's row of
    # the output on its own 16-byte boundary
    from kernels._shared import norm_bwd as _norm_bwd

    monkeypatch.setattr(_norm_bwd, "REDUCE_MAX_PARTS", 2)
    n = shape[-1]
    for dtype in (torch.float32, torch.float16):
        x, w, b = rand(shape, dtype, 0), rand((n, ), dtype, 1, 0.1, 1.0), rand((n, ), dtype, 2, 0.1)
        dy = rand(shape, dtype, 3)
        ours = norm_backward(x, w, dy, LN_EPS if centre else RMS_EPS, centre, centre, tile=tile)
        ref = _norm_grads64(centre, x, w, b, dy)
        for name, o, r in zip(("dx", "dweight", "dbias"), ours, ref):
            assert o.dtype == dtype and o.shape == r.shape and o.is_contiguous(), name
            assert rel(o, r) < TOL[dtype], (name, dtype, rel(o, r))
        if centre:
            assert ours[2].data_ptr() % 16 == 0


@pytest.mark.parametrize("name", ["layernorm", "rmsnorm", "softmax", "attention"])
def test_compiled_fwd_bwd_returns_the_output_and_the_cell_gets_the_gradients(name):
    # asked for the gradients alone, Inductor drops the forward's store, which every eager fwd+bwd makes: the
    # naive function's joint graph (the lab's) returns the output too; the compile cell runs the forward, then the
    # backward, and hands on the gradients
    from rooflab.cell import compiled_factory, relative_error
    from rooflab.kernel import load_kernel

    k = load_kernel(name)
    ins = k.make_inputs((1, 2, 24, 16) if name == "attention" else (6, 40), torch.float32, "cpu", 0)
    grads_, out = k.naive_fn(*ins, pass_="fwd+bwd")
    torch.testing.assert_close(out, k.naive_fn(*ins, pass_="fwd"))
    seen = []

    def backend(gm, example_inputs):  # what dynamo hands the compiler: the graph's inputs
        seen.append([t.requires_grad for t in example_inputs if isinstance(t, torch.Tensor)])
        return gm.forward

    make, _ = compiled_factory(k, backend=backend)
    cell_out = make(ins, pass_="fwd+bwd")()
    assert relative_error(cell_out, k.reference(ins, "fwd+bwd"))[0] <= 1e-5
    # as a training step runs it: the forward alone is compiled, on inputs that require grad (the upstream gradient
    # no input of it), and the backward runs after it through autograd (a joint graph would take all of them, none
    # requiring grad)
    assert len(seen) == 1 and seen[0] == [True] * (len(ins) - 1)
    split, _ = compiled_factory(k, backend="aot_eager")  # AOTAutograd's own forward and backward split
    assert relative_error(split(ins, pass_="fwd+bwd")(), k.reference(ins, "fwd+bwd"))[0] <= 1e-5


@pytest.mark.parametrize("centre", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape", [(37, 64), (1000, 64), (41, 300), (7, 257), (1, 33)])
def test_held_rows_with_the_next_rows_prefetched_against_float64(monkeypatch, centre, dtype, shape):
    # every held row prefetched: each step loads the next rows while it works (on this CPU at most 16 programs):
    # 41 x 300 gives each several one-row steps, 1000 x 64 several steps of packed rows with a last one past the
    # end, 37 x 64 one packed step of 3 rows in 4, then a row a program and one row alone
    from kernels._shared import norm_bwd as _norm_bwd

    monkeypatch.setattr(_norm_bwd, "PREFETCH_ROW_BYTES", ((0, 1 << 30), (0, 1 << 30)))
    monkeypatch.setattr(_norm_bwd, "PREFETCH_UNALIGNED", (True, True))
    n = shape[-1]
    x, w, b = rand(shape, dtype, 0, 1.0, 8.0), rand((n, ), dtype, 1, 0.1, 1.0), rand((n, ), dtype, 2, 0.1)
    dy = rand(shape, dtype, 3)
    ours = norm_backward(x, w, dy, LN_EPS if centre else RMS_EPS, centre, centre)
    for name, o, r in zip(("dx", "dweight", "dbias"), ours, _norm_grads64(centre, x, w, b, dy)):
        assert rel(o, r) < TOL[dtype], (name, rel(o, r))


@pytest.mark.parametrize("centre, dtype, cols, prefetch, warps", [  # warps: the launch table's, pinned here
    (False, torch.float16, 128, False, 4), (False, torch.float16, 4096, True, 8), (False, torch.float32, 8192, True, 8),
    (False, torch.float16, 4097, True, 8), (True, torch.float16, 4096, False, 8),
    (True, torch.float16, 4097, False, 32), (True, torch.float16, 5000, True, 8), (True, torch.float16, 8192, True, 8),
    (True, torch.float32, 2048, False, 4), (True, torch.float32, 4096, True, 8), (True, torch.float32, 8192, False, 16)
])
def test_held_rows_prefetch_where_the_rule_says_at_most_its_warps(monkeypatch, centre, dtype, cols, prefetch, warps):
    # PREFETCH_ROW_BYTES: RMSNorm's rows over 1 KB, LayerNorm's of 8-16 KB and a multiple of 16 bytes
    # (PREFETCH_UNALIGNED); prefetching rows take <= 8 warps, unprefetched unaligned rows over UNALIGNED_WIDE_COLS 32
    from kernels._shared import norm_bwd as _norm_bwd

    seen = []
    launch = _norm_bwd._LAUNCHES.launch
    monkeypatch.setattr(
        _norm_bwd._LAUNCHES, "launch", lambda key, kernel, grid, args, kwargs=None, n_head=0:
        (seen.append(kwargs)
         if kernel is _norm_bwd._norm_bwd_kernel else None, launch(key, kernel, grid, args, kwargs, n_head))[1])
    x, dy = rand((2, cols), dtype, 0), rand((2, cols), dtype, 1)
    norm_backward(x, rand((cols, ), dtype, 2, 0.1, 1.0), dy, 1e-5, centre, centre)
    (kw, ) = seen
    assert kw["PREFETCH"] == prefetch
    assert kw["num_warps"] == warps  # prefetching: at most 8 (PREFETCH_WARPS); wide unaligned rows unprefetched: 32
