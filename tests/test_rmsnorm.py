"""kernels/rmsnorm/__init__.py under the Triton interpreter: against float64, strides, tiled rows, errors, FLOP/byte model."""
import pytest
import torch

from kernels import rmsnorm as rms

from test_norms import DTYPE_IDS, DTYPES, SHAPES  # the norms' shared grid (tests/test_norms.py)


def _inputs(rows, cols, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((rows, cols), generator=g)
    w = 1.0 + 0.5 * torch.randn((cols, ), generator=g)
    return x.to(dtype), w.to(dtype)


def _ref(x, w, eps=rms.EPS):
    x, w = x.double(), w.double()
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * w


@pytest.mark.parametrize("block_size", [None, 64], ids=["one-tile", "tiled-64"])
@pytest.mark.parametrize("dtype,atol,rtol", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("rows,cols", SHAPES)
def test_matches_float64(rows, cols, dtype, atol, rtol, block_size):
    x, w = _inputs(rows, cols, dtype)
    y = rms.rmsnorm_triton(x, w, block_size=block_size)
    assert y.shape == (rows, cols) and y.dtype == dtype
    torch.testing.assert_close(y.to(torch.float64), _ref(x, w), atol=atol, rtol=rtol)


@pytest.mark.parametrize("dtype,atol,rtol", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("rows,cols", [(1, 37), (17, 300), (4, 8192)])
def test_reload_reads_the_row_twice_and_matches_float64(rows, cols, dtype, atol, rtol):
    x, w = _inputs(rows, cols, dtype)
    y = rms.rmsnorm_triton(x, w, reload=True)  # x read again after the reduction, not held
    torch.testing.assert_close(y.to(torch.float64), _ref(x, w), atol=atol, rtol=rtol)


@pytest.mark.parametrize("reload", [False, True], ids=["held", "read-again"])
@pytest.mark.parametrize("cols", [64, 256])
def test_an_unmasked_full_row_gives_the_masked_result(cols, reload):
    """full drops the column mask of a row exactly as long as its tile: bit for bit the masked kernel's output; on a
    row shorter than its tile, or when UNMASKED_COLS names a row that is not full, the mask stays (no load past the
    row)."""
    x, w = _inputs(5, cols, torch.float32)
    masked = rms.rmsnorm_triton(x, w, reload=reload, full=False)
    torch.testing.assert_close(rms.rmsnorm_triton(x, w, reload=reload, full=True), masked, atol=0, rtol=0)
    short_x, short_w = x[:, :cols - 3], w[:cols - 3]
    torch.testing.assert_close(
        rms.rmsnorm_triton(short_x, short_w, reload=reload, full=True).double(), _ref(short_x, short_w), atol=1e-5,
        rtol=1e-5)


def test_an_unmasked_tiled_row_gives_the_masked_result():
    x, w = _inputs(3, 256, torch.float32)
    masked = rms.rmsnorm_triton(x, w, block_size=64, full=False)
    torch.testing.assert_close(rms.rmsnorm_triton(x, w, block_size=64, full=True), masked, atol=0, rtol=0)
    x, w = x[:, :250], w[:250]  # not a whole number of tiles: the mask stays
    torch.testing.assert_close(
        rms.rmsnorm_triton(x, w, block_size=64, full=True).double(), _ref(x, w), atol=1e-5, rtol=1e-5)


def test_unmasked_cols_names_the_rows_that_drop_the_mask(monkeypatch):
    x, w = _inputs(3, 512, torch.float32)  # rows of 256 columns or more: shorter ones are packed (_norm_packed)
    calls = []
    real = rms._rmsnorm_fwd_kernel

    class Spy:

        def __getitem__(self, grid):

            def launch(*args, **kw):
                calls.append(kw["FULL"])
                return real[grid](*args, **kw)

            return launch

    monkeypatch.setattr(rms, "_rmsnorm_fwd_kernel", Spy())
    rms.rmsnorm_triton(x, w)
    monkeypatch.setattr(rms, "UNMASKED_COLS", {4: (512, 512)})
    rms.rmsnorm_triton(x, w)
    rms.rmsnorm_triton(x[:, :500], w[:500])  # named length range (512, 512) does not hold 500
    monkeypatch.setattr(rms, "UNMASKED_COLS", {4: (1, 1 << 14)})
    rms.rmsnorm_triton(x[:, :500], w[:500])  # named, but shorter than its tile of 512
    assert calls == [False, True, False, False]


def test_default_reload_and_unmasked_rows_follow_the_tables(monkeypatch):
    """RELOAD_MIN_COLS and UNMASKED_COLS decide the launch: fp32 rows of 4096 and 8192 read again with 16 warps and
    unmasked, of 2048 held and unmasked, of 1024 held and masked; bf16 rows of 8192 read again, masked."""
    seen = []

    class Spy:

        def __getitem__(self, grid):
            return lambda *args, **kw: seen.append((kw["RELOAD"], kw["FULL"], kw["num_warps"]))

    monkeypatch.setattr(rms, "_rmsnorm_fwd_kernel", Spy())
    for cols, dtype in [(8192, torch.float32), (4096, torch.float32), (2048, torch.float32), (1024, torch.float32),
                        (8192, torch.bfloat16)]:
        rms.rmsnorm_triton(torch.zeros((2, cols), dtype=dtype), torch.ones(cols, dtype=dtype))
    assert [(r, f) for r, f, _ in seen] == [(True, True), (True, True), (False, True), (False, False), (True, False)]
    assert [w for r, _, w in seen if r] == [rms.RELOAD_WARPS] * 3


@pytest.mark.parametrize("block_size", [None, 128], ids=["one-tile", "tiled-128"])
def test_long_rows_through_tiled_loop(block_size):
    x, w = _inputs(3, 8192 + 37, torch.float32)
    torch.testing.assert_close(
        rms.rmsnorm_triton(x, w, block_size=block_size).double(), _ref(x, w), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype,atol,rtol", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("view", ["x.t()", "x[:, ::2]", "x[::3]", "w[::2]"])
def test_non_contiguous_inputs_through_strides(view, dtype, atol, rtol):
    x, w = _inputs(40, 66, dtype, seed=2)
    if view == "x.t()":
        x, w = x.t(), w[:40]
    elif view == "x[:, ::2]":
        x, w = x[:, ::2], w[:33]
    elif view == "x[::3]":
        x = x[::3]
    else:
        x, w = x[:, :33], w[::2]
    assert not (x.is_contiguous() and w.is_contiguous())
    for block_size in (None, 16):
        y = rms.rmsnorm_triton(x, w, block_size=block_size)
        torch.testing.assert_close(y.to(torch.float64), _ref(x, w), atol=atol, rtol=rtol)


@pytest.mark.parametrize("cols, block_size, kernel", [(10, None, "rmsnorm_fwd_packed_kernel"),
                                                      (300, None, "_rmsnorm_fwd_kernel"),
                                                      (300, 16, "_rmsnorm_fwd_kernel"),
                                                      (32771, None, "_rmsnorm_fwd_aligned_kernel")],
                         ids=["packed", "held", "tiled", "aligned"])
def test_eps_is_honoured(spy_launches, cols, block_size, kernel):
    from kernels._shared import norm_packed as _norm_packed

    seen = spy_launches(rms, "_rmsnorm_fwd_kernel", "_rmsnorm_fwd_aligned_kernel")
    seen_packed = spy_launches(_norm_packed, "rmsnorm_fwd_packed_kernel")
    x, w = _inputs(4, cols, torch.float32)
    x = x * 1e-3  # mean square ~1e-6, comparable to eps
    torch.testing.assert_close(
        rms.rmsnorm_triton(x, w, eps=1e-2, block_size=block_size).double(), _ref(x, w, eps=1e-2), atol=1e-6, rtol=1e-5)
    assert [name for name, _ in seen + seen_packed] == [kernel]


def test_zero_row_gives_zero_not_nan():
    x, w = torch.zeros(2, 7), torch.ones(7)
    assert torch.equal(rms.rmsnorm_triton(x, w), torch.zeros(2, 7))


def test_rejects_bad_inputs():
    x, w = _inputs(4, 6, torch.float32)
    one_row = rms.rmsnorm_triton(x[0], w)  # a 1-D input is one row, as in torch (tests/test_any_rank.py)
    torch.testing.assert_close(one_row, rms.rmsnorm_triton(x[:1], w)[0])
    with pytest.raises(ValueError, match=r"weight must have shape \(6,\)"):
        rms.rmsnorm_triton(x, w[:5])
    with pytest.raises(TypeError, match="float64"):
        rms.rmsnorm_triton(x.double(), w.double())
    with pytest.raises(TypeError, match="x's dtype"):
        rms.rmsnorm_triton(x, w.to(torch.bfloat16))
    with pytest.raises(ValueError, match="power of two"):
        rms.rmsnorm_triton(x, w, block_size=100)


def test_empty_input():
    assert rms.rmsnorm_triton(torch.empty(0, 5), torch.ones(5)).shape == (0, 5)


def test_flop_and_byte_model():
    assert rms.flops(10) == 4 * 100 == 400
    assert rms.bytes_moved(10, "float32") == (2 * 100 + 10) * 4 == 840  # x, y, weight
    assert rms.bytes_moved(4096, "float16") == (2 * 4096**2 + 4096) * 2
    assert rms.KERNEL.flops is rms.flops and rms.KERNEL.bytes is rms.bytes_moved


@pytest.mark.parametrize("cols,tile", [(257, 512), (257, 256), (300, 64), (1001, 128)])
def test_long_unaligned_rows_on_aligned_tiles_match_float64(monkeypatch, cols, tile):
    # rows too long to hold (the widest block cut to 8 columns; rows under 256 columns are packed) and no multiple
    # of 16 bytes walk the flat buffer in aligned tiles: rows starting mid-tile, of one tile (257 columns in 512) and
    # two (in 256: no inner tile), first, inner and last tiles
    from kernels._shared import rows as _rows

    monkeypatch.setattr(_rows, "MAX_BLOCK_SIZE", 8)
    monkeypatch.setattr(rms, "ALIGNED_TILES", {2: (tile, 1)})
    launched = []
    real = rms._rmsnorm_fwd_aligned_kernel
    monkeypatch.setattr(rms, "_rmsnorm_fwd_aligned_kernel",
                        type("Spy", (), {
                            "__getitem__": lambda self, grid: (launched.append(grid), real[grid])[1]
                        })())
    x, w = _inputs(7, cols, torch.float16)
    torch.testing.assert_close(rms.rmsnorm_triton(x, w).double(), _ref(x, w), atol=2e-3, rtol=2e-3)
    assert launched == [(7, )]
    # not the aligned tiles: fp32 rows (no ALIGNED_TILES entry here), an aligned row length, a strided x or weight
    wide = _inputs(1, 2 * cols, torch.float16)[1]
    for x, w in [_inputs(3, cols, torch.float32), _inputs(3, 304, torch.float16), (x[::2], w), (x, wide[::2])]:
        torch.testing.assert_close(rms.rmsnorm_triton(x, w).double(), _ref(x, w), atol=2e-3, rtol=2e-3)
    assert launched == [(7, )]


def test_tiled_launch_names_the_long_rows_tile(monkeypatch):
    seen = []

    class Spy:

        def __getitem__(self, grid):
            return lambda *args, **kw: seen.append((kw["BLOCK_SIZE"], kw["num_warps"]))

    monkeypatch.setattr(rms, "_rmsnorm_fwd_kernel", Spy())
    monkeypatch.setattr(rms, "TILED_LAUNCH", {2: (2048, 8)})
    monkeypatch.setattr(rms, "WIDE_HELD", {4: (32768, 32)})
    for dtype, cols in [(torch.bfloat16, 16392), (torch.float32, 16392), (torch.float32, 32772)]:
        rms.rmsnorm_triton(torch.zeros((2, cols), dtype=dtype), torch.ones(cols, dtype=dtype))
    # bf16: TILED_LAUNCH's tiles; fp32 up to 32768 columns: one tile at WIDE_HELD's warps; past it the heuristic's
    assert seen == [(2048, 8), (32768, 32), (16384, 16)]


def test_a_wide_row_held_in_one_tile_matches_float64(monkeypatch):
    from kernels._shared import rows as _rows

    monkeypatch.setattr(_rows, "MAX_BLOCK_SIZE", 256)
    monkeypatch.setattr(rms, "WIDE_HELD", {4: (1024, 4)})
    x, w = _inputs(3, 1000, torch.float32)
    torch.testing.assert_close(rms.rmsnorm_triton(x, w).double(), _ref(x, w), atol=1e-5, rtol=1e-5)
