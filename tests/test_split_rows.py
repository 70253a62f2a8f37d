"""The split path of the row kernels (issue 23: few long rows, and rowsum's long unaligned rows) and softmax's aligned
tiles for unaligned rows: forced under the interpreter (it never splits by itself there: no SM count) against
float64, odd lengths included; the choice itself
(kernels/_shared/rows.split_cols) for the H200's 132 SMs; the launch cache keeps a split's two launches as one."""
import pytest
import torch

from kernels._shared import fastlaunch as _fastlaunch
from kernels._shared.counts import counts_for
from kernels._shared.rows import split_cols
from kernels.layernorm import layernorm64, layernorm_triton
from kernels.rmsnorm import rmsnorm64, rmsnorm_triton
from kernels import rowsum, softmax
from kernels.rmsnorm import SPLIT_BELOW, SPLIT_CHUNK
from kernels.rowsum import reference as rowsum_reference, rowsum_triton
from kernels.softmax import softmax_forward

# (shape, columns a program): several chunks a row; 20001 and 70000 rows are not 16-byte aligned in fp16, so
# rowsum's flat tiles straddle rows; 8192 = 8 tiles exactly (tile and row boundaries meet)
CASES = [((3, 70000), 4096), ((8, 20001), 2048), ((1, 300000), 16384), ((4, 8192), 1024)]
TOLERANCES = [(torch.float32, 1e-4, 1e-5), (torch.float16, 1e-1, 1e-2)]  # the row sum's (fp16: a sum of 1e5)
NORM_TOLERANCES = [(torch.float32, 1e-5, 1e-5), (torch.float16, 2e-3, 2e-3)]  # y rounded to fp16
H200_SMS = 132


def _x(shape, dtype, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("shape, chunk", CASES)
@pytest.mark.parametrize("dtype, atol, rtol", TOLERANCES)
@pytest.mark.parametrize("once_max_rows", [0, 2, rowsum.SPLIT_ONCE_MAX_ROWS])
def test_rowsum_split_matches_float64(monkeypatch, shape, chunk, dtype, atol, rtol, once_max_rows):
    # in two launches (0; 2 for more than 2 rows) or one (its last program adding up every row), which leaves the
    # stream's count of finished programs at 0 for the next call
    monkeypatch.setattr(rowsum, "SPLIT_ONCE_MAX_ROWS", once_max_rows)
    x = _x(shape, dtype)
    out = rowsum_triton(x, split=chunk)
    assert out.dtype == dtype and out.shape == (shape[0], )
    torch.testing.assert_close(out.double(), rowsum_reference((x, )), atol=atol, rtol=rtol)
    assert not counts_for(x.device, 1).any()


def test_rowsum_kept_one_launch_split_takes_each_calls_count(monkeypatch):
    """The one-launch split's count is an argument of each call, never replayed from the first: a count given to the
    first call and poisoned after it is left alone by the second."""
    given = []
    monkeypatch.setattr(rowsum, "counts_for",
                        lambda device, n: given.append(torch.zeros(n, dtype=torch.int32)) or given[-1])
    x = _x((3, 2048), torch.float32)
    with _fastlaunch.replaying():
        rowsum._LAUNCHES.clear()
        rowsum_triton(x, split=1024)
        given[0].fill_(100)
        out = rowsum_triton(x, split=1024)
        assert rowsum._LAUNCHES.misses == 1  # the second call was the kept launch
    assert len(given) == 2 and bool((given[0] == 100).all()) and not given[1].any()
    torch.testing.assert_close(out.double(), rowsum_reference((x, )), atol=1e-4, rtol=1e-4)


def _norm_inputs(shape, dtype):
    g = torch.Generator().manual_seed(3)
    x = 3.0 + 2.0 * torch.randn(shape, generator=g)  # |mean| > std: E[x^2] - E[x]^2 would lose digits
    w, b = 1.0 + 0.1 * torch.randn(shape[1], generator=g), 0.1 * torch.randn(shape[1], generator=g)
    return x.to(dtype), w.to(dtype), b.to(dtype)


@pytest.mark.parametrize("shape, chunk", CASES + [((5, 1001), 128), ((3, 333), 64)])
@pytest.mark.parametrize("dtype, atol, rtol", NORM_TOLERANCES)
@pytest.mark.parametrize("aligned", [(), (2, ), (2, 4)])
def test_norms_split_match_float64(monkeypatch, shape, chunk, dtype, atol, rtol, aligned):
    # ALIGNED_SPLIT: rows no multiple of 16 bytes (20001, 1001 and 333 columns) in chunks on 16-byte aligned tiles
    # of the flat x and y, the first and last chunk of a row masked; aligned rows keep the plain chunks
    from kernels._shared import norm_split as _norm_split

    monkeypatch.setattr(_norm_split, "ALIGNED_SPLIT", aligned)
    aligns, real = [], _norm_split.launch_split
    monkeypatch.setattr(_norm_split, "launch_split", lambda *a: (aligns.append(a[4][3].get("ALIGN", 1)), real(*a))[1])
    x, w, b = _norm_inputs(shape, dtype)
    y = rmsnorm_triton(x, w, split=chunk)
    assert y.dtype == dtype and y.shape == shape
    torch.testing.assert_close(y.double(), rmsnorm64(x.double(), w.double()), atol=atol, rtol=rtol)
    y = layernorm_triton(x, w, b, split=chunk)
    torch.testing.assert_close(y.double(), layernorm64(x.double(), w.double(), b.double()), atol=atol, rtol=rtol)
    unaligned = x.element_size() in aligned and shape[1] * x.element_size() % 16
    assert aligns == [16 // x.element_size() if unaligned else 1] * 2


def _softmax64(x):
    return torch.softmax(x.double(), dim=1)


@pytest.mark.parametrize("shape, chunk", CASES + [((4, 63), 16)])  # 63: a row touches 5 tiles of 16, not 4
@pytest.mark.parametrize("dtype, atol, rtol", NORM_TOLERANCES)
def test_softmax_split_matches_float64(shape, chunk, dtype, atol, rtol):
    x = 4.0 * _x(shape, dtype)  # a spread of maxima across tiles: the partials' rescaling matters
    y = softmax_forward(x, split=chunk)
    assert y.dtype == dtype and y.shape == shape
    torch.testing.assert_close(y.double(), _softmax64(x), atol=atol / 100, rtol=rtol)


@pytest.mark.parametrize("shape", [(3, 37), (5, 1001), (2, 4099), (3, 9)])
@pytest.mark.parametrize("dtype, atol, rtol", NORM_TOLERANCES)
def test_softmax_aligned_tiles_match_float64(shape, dtype, atol, rtol):
    """Rows no multiple of 16 bytes on tiles that start on 16-byte boundaries (the first before the row); short
    tiles (max_block) so that a row spans one, two or several of them: the peeled first and last, inner ones."""
    x = 4.0 * _x(shape, dtype, seed=2)
    for block in (16, 32, 256):
        y = softmax_forward(x, max_block=block, aligned=True)
        torch.testing.assert_close(y.double(), _softmax64(x), atol=atol / 100, rtol=rtol)


def test_softmax_aligned_tiles_by_default_for_16_bit_tiled_unaligned_rows():
    """The launch chosen (recorded, not run): 16-bit rows longer than a block and no multiple of 16 bytes take the
    aligned tiles at ALIGNED_TILES' tile; fp32 rows and aligned ones keep the online kernel."""
    from tests.test_launch_pins import SOFTMAX_FWD_KERNELS, _recorded

    def launched(shape, dtype):
        x = torch.empty(shape, dtype=dtype)
        return _recorded(softmax, SOFTMAX_FWD_KERNELS, lambda: softmax_forward(x))[0]

    got = launched((4, 50257), torch.bfloat16)
    assert got["kernel"] == "softmax_fwd_aligned_kernel"
    assert (got["kw"]["BLOCK_N"], got["kw"]["num_warps"], got["kw"]["ALIGN"]) == (*softmax.ALIGNED_TILES[2], 8)
    assert launched((4, 50256), torch.bfloat16)["kernel"] == "_softmax_fwd_online_kernel"
    assert launched((4, 50257), torch.float32)["kernel"] == "_softmax_fwd_online_kernel"


@pytest.mark.parametrize("shape", [(1000, 32), (37, 100), (5, 3), (300, 255), (129, 1)])
@pytest.mark.parametrize("dtype, atol, rtol", NORM_TOLERANCES)
def test_softmax_packed_short_rows_match_float64(shape, dtype, atol, rtol):
    """Rows shorter than PACK_ROWS' columns, several a program (a last program part-filled), forward and backward,
    strided too."""
    x = 4.0 * _x(shape, dtype, seed=6)
    dy = _x(shape, dtype, seed=7)
    y = softmax_forward(x)
    torch.testing.assert_close(y.double(), _softmax64(x), atol=atol / 100, rtol=rtol)
    y64 = _softmax64(x)
    dx64 = y64 * (dy.double() - (y64 * dy.double()).sum(dim=1, keepdim=True))
    dx = softmax.softmax_backward(y64.to(dtype), dy)
    torch.testing.assert_close(dx.double(), dx64, atol=atol, rtol=rtol)
    xt = x.t().contiguous().t()  # column-major storage: the packed kernels' strides
    torch.testing.assert_close(softmax_forward(xt).double(), _softmax64(x), atol=atol / 100, rtol=rtol)
    y_t, dy_t = y64.to(dtype).t().contiguous().t(), dy.t().contiguous().t()
    torch.testing.assert_close(softmax.softmax_backward(y_t, dy_t).double(), dx64, atol=atol, rtol=rtol)


def test_softmax_packs_short_rows_only():
    from tests.test_launch_pins import SOFTMAX_FWD_KERNELS, _recorded

    def launched(shape, fn=softmax_forward, names=SOFTMAX_FWD_KERNELS):
        x = torch.empty(shape, dtype=torch.bfloat16)
        return _recorded(softmax, names, lambda: fn(x) if fn is softmax_forward else fn(x, x))[0]

    got = launched((1000, 32))
    assert got["kernel"] == "softmax_fwd_rows_kernel" and got["kw"]["BLOCK_M"] == 128 and got["grid"] == [8]
    bwd = launched((1000, 32), softmax.softmax_backward, ("_softmax_bwd_row_kernel", "softmax_bwd_rows_kernel"))
    assert bwd["kernel"] == "softmax_bwd_rows_kernel" and bwd["grid"] == [8]
    assert launched((1000, 256))["kernel"] == "_softmax_fwd_row_kernel"  # the square sweep's 256 unchanged


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_softmax_split_and_aligned_tiles_keep_minus_infinity(dtype):
    """Rows of 37 (no multiple of 16 bytes: the aligned kernel runs, recorded below): a -inf prefix longer than a
    tile, one -inf, a row of only -inf (NaN, as torch's); the split as well, the -inf row once a tile's head and once
    its tail."""
    from tests.test_launch_pins import SOFTMAX_FWD_KERNELS, _recorded

    x = _x((5, 37), torch.float32, seed=4)
    x[1, :25] = -float("inf")
    x[2, 5] = -float("inf")
    x[3, :] = -float("inf")
    x = x.to(dtype)
    want = torch.softmax(x.double(), dim=1)
    kinds = _recorded(softmax, SOFTMAX_FWD_KERNELS, lambda: softmax_forward(x, max_block=16, aligned=True))
    assert kinds[0]["kernel"] == "softmax_fwd_aligned_kernel"
    for kw in (dict(split=8), dict(split=16), dict(max_block=16, aligned=True)):
        torch.testing.assert_close(softmax_forward(x, **kw).double(), want, atol=1e-3, rtol=1e-3, equal_nan=True)


def test_softmax_split_needs_a_contiguous_x_and_a_tile_within_a_row():
    x = _x((4, 2048), torch.float32)
    for bad in (3000, 4096):
        with pytest.raises(ValueError, match="split"):
            softmax_forward(x, split=bad)
    with pytest.raises(ValueError, match="contiguous"):
        softmax_forward(x[:, ::2], split=256)
    y = softmax_forward(x[:, ::2], max_block=256)  # by default: one program a row, strided
    torch.testing.assert_close(y.double(), _softmax64(x[:, ::2]), atol=1e-6, rtol=1e-5)


def test_norms_split_honour_strides():
    """A transposed x (column stride > 1) through the split path; the output is contiguous."""
    x, w, b = _norm_inputs((5000, 3), torch.float32)
    xt = x.t()  # (3, 5000), strides (1, 3)
    torch.testing.assert_close(
        layernorm_triton(xt, w[:1].expand(5000).contiguous(), b[:1].expand(5000).contiguous(), split=1024).double(),
        layernorm64(xt.double(), w[:1].expand(5000).double(), b[:1].expand(5000).double()), atol=1e-5, rtol=1e-5)


def test_rowsum_split_needs_a_contiguous_x_and_a_tile_within_a_row():
    x = _x((4, 2048), torch.float32)
    for bad in (3000, 4096):  # no power of two; longer than a row (a tile would span three rows)
        with pytest.raises(ValueError, match="split"):
            rowsum_triton(x, split=bad)
    with pytest.raises(ValueError, match="contiguous"):
        rowsum_triton(x[:, ::2], split=256)
    torch.testing.assert_close(
        rowsum_triton(x[:, ::2]).double(), rowsum_reference((x[:, ::2], )), atol=1e-4,
        rtol=1e-5)  # by default: the one-row path


def test_split_only_for_few_long_rows():
    """On 132 SMs: fewer than 264 rows of at least 32768 columns, about 4 programs a SM in 4096-16384 columns;
    never a square shape of the sweep (n x n, n <= 8192, and 1793), nor a row count of 264 or more unless unaligned
    (where a kernel's SPLIT_UNALIGNED says so: none does now); never off a GPU (no SM count)."""

    def cols(rows, n, unaligned=False):
        return split_cols(rows, n, H200_SMS, SPLIT_BELOW, SPLIT_CHUNK, unaligned)

    assert cols(8, 256000) == 4096 and cols(32, 128256) == 8192 and cols(64, 53248) == 8192
    assert cols(1, 40000) == 4096 and cols(263, 1_000_000) == 16384
    assert all(cols(n, n) == 0 for n in (256, 1024, 1793, 2048, 4096, 8192))
    assert all(cols(n, n, unaligned=True) == 0 for n in (1793, 4097, 8191))  # unaligned but short
    assert cols(264, 256000) == 0 and cols(8, 32767) == 0 and cols(1024, 50257) == 0
    assert cols(1024, 50257, unaligned=True) == 16384
    assert split_cols(8, 256000, 0, SPLIT_BELOW, SPLIT_CHUNK) == 0
    # rowsum splits few long rows as softmax does (one program a row: fp32 4 x 1000000 118 us, the builtin 13)
    assert split_cols(8, 256000, H200_SMS, rowsum.SPLIT_BELOW, rowsum.SPLIT_CHUNK) == 4096
    assert split_cols(4096, 4097, H200_SMS, rowsum.SPLIT_BELOW, rowsum.SPLIT_CHUNK) == 0
    # its long unaligned rows are not split for that (SPLIT_UNALIGNED off): aligned tiles, one program a row
    assert split_cols(1024, 50257, H200_SMS, rowsum.SPLIT_BELOW, rowsum.SPLIT_CHUNK, rowsum.SPLIT_UNALIGNED) == 0
    # softmax splits few long rows; its long unaligned ones keep one program a row (split, they measured slower)
    assert split_cols(8, 256000, H200_SMS, softmax.SPLIT_BELOW, softmax.SPLIT_CHUNK) == 4096
    assert split_cols(1024, 50257, H200_SMS, softmax.SPLIT_BELOW, softmax.SPLIT_CHUNK, softmax.SPLIT_UNALIGNED) == 0


@pytest.mark.parametrize("once_max_rows,launches", [(0, 2), (8, 1)])
def test_a_kept_split_replays_as_its_first_call(monkeypatch, once_max_rows, launches):
    """replaying(): the first call keeps its launches (two, or one where SPLIT_ONCE_MAX_ROWS takes the rows) as one
    entry, later calls replay it (a fresh workspace each)."""
    from kernels.rowsum import _LAUNCHES

    monkeypatch.setattr(rowsum, "SPLIT_ONCE_MAX_ROWS", once_max_rows)
    x = _x((8, 20001), torch.float32, seed=1)
    with _fastlaunch.replaying():
        first = rowsum_triton(x, split=1024)
        misses = _LAUNCHES.misses
        again = rowsum_triton(x, split=1024)
        assert _LAUNCHES.misses == misses == launches  # the first call's launches, none after
    torch.testing.assert_close(again, first, atol=0, rtol=0)
    torch.testing.assert_close(first.double(), rowsum_reference((x, )), atol=1e-4, rtol=1e-5)


def test_a_kept_softmax_split_replays_as_its_first_call():
    x = 4.0 * _x((8, 20001), torch.float32, seed=5)
    with _fastlaunch.replaying():
        first = softmax_forward(x, split=1024)
        misses = softmax._FWD_LAUNCHES.misses
        again = softmax_forward(x, split=1024)
        assert softmax._FWD_LAUNCHES.misses == misses  # the second call replays both launches
    torch.testing.assert_close(again, first, atol=0, rtol=0)


@pytest.mark.parametrize("cols,pitch", [(100, 108), (50, 54), (52, 60)])
def test_packed_softmax_on_rows_whose_length_and_stride_share_a_vector(cols, pitch):
    # ALIGN > 1 in the packed kernels (kernels/_shared/rows.row_align): rows sliced from a wider buffer, forward and backward
    from kernels.softmax import softmax_triton

    g = torch.Generator().manual_seed(5)
    x = torch.randn(40, pitch, generator=g)[:, :cols]
    dy = torch.randn(40, pitch, generator=g)[:, :cols]
    leaf = x.clone().requires_grad_()
    y = softmax_triton(leaf)
    y.backward(dy)
    ref = x.double().requires_grad_()
    torch.softmax(ref, dim=1).backward(dy.double())
    torch.testing.assert_close(y.double(), torch.softmax(x.double(), dim=1), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(leaf.grad.double(), ref.grad, atol=1e-6, rtol=1e-5)
