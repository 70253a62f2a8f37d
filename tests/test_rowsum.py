"""rowsum: Triton kernel against float64 on the CPU interpreter; long rows, strides, edge shapes, FLOP/byte model."""
import pytest
import torch

from kernels import rowsum

from kernels.rowsum import KERNEL, MAX_BLOCK_N, launch_params, reference, rowsum_triton

# Whole-row tiles (packed several rows to a program when short) and, past MAX_BLOCK_N, the tiled loop; 1793 is a
# multiple of no block.
SHAPES = [(1, 1), (3, 17), (1, 4097), (37, 1793), (64, 1024), (5, 1025), (2, MAX_BLOCK_N + 3)]
TOLERANCES = [(torch.float32, 1e-4, 1e-5), (torch.bfloat16, 1e-1, 1e-2)]


def _x(shape, dtype, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype, atol, rtol", TOLERANCES)
def test_matches_float64(shape, dtype, atol, rtol):
    x = _x(shape, dtype)
    out = rowsum_triton(x)
    assert out.dtype == dtype and out.shape == (shape[0], )
    torch.testing.assert_close(out.double(), reference((x, )), atol=atol, rtol=rtol)


@pytest.mark.parametrize("block_m, block_n", [(1, 256), (4, 128), (8, 2048)])
@pytest.mark.parametrize("dtype, atol, rtol", TOLERANCES)
def test_tiled_loop_and_packed_rows(block_m, block_n, dtype, atol, rtol):
    x = _x((13, 1100), dtype, seed=1)  # 13 rows: a partial last group of rows; 1100: a partial last column tile
    out = rowsum_triton(x, block_m=block_m, block_n=block_n, num_warps=4)
    torch.testing.assert_close(out.double(), reference((x, )), atol=atol, rtol=rtol)


def test_launch_params_whole_row_and_packing():
    assert launch_params(8192, 4)[:2] == (1, 8192)  # one row, whole, per program
    assert launch_params(256, 2)[:2] == (16, 256)  # short rows packed to a 4096-element tile
    assert launch_params(100_000, 4)[:2] == (1, MAX_BLOCK_N)  # longer than a block: the loop
    for n in (1, 17, 1793, 8192, 100_000):
        block_m, block_n, warps = launch_params(n, 2)
        assert block_m & (block_m - 1) == 0 and block_n & (block_n - 1) == 0 and 1 <= warps <= 32
    with pytest.raises(ValueError, match="power of two"):
        rowsum_triton(_x((4, 8), torch.float32), block_n=24)


@pytest.mark.parametrize("shape, block_m", [((6, 64), 1), ((8, 256), 4)])
def test_unmasked_tiles_give_the_masked_result(shape, block_m):
    """full drops the masks where rows are one tile long and fill whole programs: bit for bit the masked result."""
    x = _x(shape, torch.float32, seed=2)
    masked = rowsum_triton(x, block_m=block_m, full=False)
    torch.testing.assert_close(rowsum_triton(x, block_m=block_m, full=True), masked, atol=0, rtol=0)


@pytest.mark.parametrize("shape, block_m", [((6, 61), 1), ((7, 256), 4)])
def test_full_is_ignored_where_a_tile_is_not_full(shape, block_m):
    """A row shorter than its tile, or a last program with fewer rows than BLOCK_M, keeps its masks when full is
    asked for: the sums stay right (a row read past its end would add its neighbour's values)."""
    x = _x(shape, torch.float32, seed=3)
    torch.testing.assert_close(
        rowsum_triton(x, block_m=block_m, full=True).double(), reference((x, )), atol=1e-4, rtol=1e-5)


def _launches(monkeypatch):
    """The (FULL, BLOCK_M) of every row-sum launch, recorded instead of run."""
    import kernels.rowsum as rs

    seen = []

    class Spy:

        def __getitem__(self, grid):
            return lambda *args, **kw: seen.append((kw["FULL"], kw["BLOCK_M"]))

    monkeypatch.setattr(rs, "_rowsum_kernel", Spy())
    return seen


def test_full_only_where_every_row_of_every_program_is_in_range(monkeypatch):
    """A last program with fewer rows than BLOCK_M (7 rows of 4) or a row shorter than its tile (61 of 64) keeps its
    masks even when full is asked for; whole tiles drop them (an unmasked store past s is what the interpreter would
    not catch, hence the launch's arguments are checked)."""
    seen = _launches(monkeypatch)
    for shape, block_m in [((7, 256), 4), ((6, 61), 1), ((8, 256), 4), ((6, 64), 1)]:
        rowsum_triton(_x(shape, torch.float32), block_m=block_m, full=True)
    assert seen == [(False, 4), (False, 1), (True, 4), (True, 1)]


def test_unmasked_cols_sets_the_default(monkeypatch):
    """By default FULL where UNMASKED_COLS names the rows (bf16 rows of 8192, fp32 rows of 4096), not elsewhere."""
    seen = _launches(monkeypatch)
    for cols, dtype in [(8192, torch.bfloat16), (4096, torch.float32), (8192, torch.float32), (4096, torch.bfloat16)]:
        rowsum_triton(torch.zeros((2, cols), dtype=dtype))
    assert [full for full, _ in seen] == [True, True, False, False]


def test_accumulates_in_fp32_for_bfloat16():
    # A bf16 running sum of ones stalls at 256 (256 + 1 rounds back to 256); an fp32 one reaches 2000, exact in bf16.
    x = torch.ones(2, 2000, dtype=torch.bfloat16)
    assert rowsum_triton(x).float().tolist() == [2000.0, 2000.0]


@pytest.mark.parametrize("dtype, atol, rtol", TOLERANCES)
@pytest.mark.parametrize("view", ["transpose", "column_slice"])
def test_non_contiguous_inputs_through_strides(view, dtype, atol, rtol):
    x = _x((40, 1100), dtype)
    x = x[:, :40].t() if view == "transpose" else x[:, ::2]
    torch.testing.assert_close(rowsum_triton(x).double(), reference((x, )), atol=atol, rtol=rtol)


def test_empty():
    assert rowsum_triton(_x((0, 5), torch.float32)).shape == (0, )
    assert rowsum_triton(_x((3, 0), torch.float32)).tolist() == [0.0, 0.0, 0.0]


def test_bad_inputs_raise_clearly():
    with pytest.raises(TypeError, match="supports float32"):
        rowsum_triton(torch.ones(4, 4, dtype=torch.int32))
    assert rowsum_triton(torch.ones(4)).item() == 4.0  # a 1-D input is one row: its sum, 0-d, as torch.sum(x, -1)


@pytest.mark.parametrize("impl", ["naive", "builtin", "triton"])
def test_impls_through_registry(impl):
    (x, ) = KERNEL.make_inputs(1100, torch.float32, "cpu", seed=3)
    inputs = (x[:8], )  # 8 rows of 1100: past the naive loop's 1024-column chunk and the interpreter's block
    torch.testing.assert_close(KERNEL.impls[impl](inputs)().double(), KERNEL.reference(inputs), atol=1e-4, rtol=1e-5)


def test_flop_and_byte_model():
    assert KERNEL.flops(1024) == 1024 * 1024  # one add per element
    assert KERNEL.bytes(1024, "float32") == 4_198_400  # (read x + write 1024 sums) (1024^2 + 1024) * 4 B
    assert KERNEL.bytes(1024, "bfloat16") == 2_099_200


def test_compile_of_the_naive_loop_is_skipped_on_long_rows():
    # torch.compile unrolls rowsum_naive's loop, one pass a chunk of columns: minutes of compile on long rows
    from rooflab.cell import Cell, skip_reason

    def reason(impl, shape):
        return skip_reason(KERNEL, Cell("rowsum", impl, "float32", None, "fwd", shape=shape), "cpu", 64)

    assert "unroll" in reason("compile", (4, 1_000_000))
    assert reason("compile", (4096, 4097)) is None
    assert reason("naive", (4, 1_000_000)) is None  # the naive itself runs: its loop is what it shows
    assert skip_reason(KERNEL, Cell("rowsum", "compile", "float32", 1024), "cpu", 64) is None  # the square sweep


@pytest.mark.parametrize("cols,pitch", [(100, 108), (50, 54), (52, 60)])
def test_rows_whose_length_and_stride_share_a_vector(cols, pitch):
    # ALIGN > 1: the kernel rewrites n_cols and the row stride as multiples of it (kernels/_shared/rows.row_align)
    x = torch.randn(33, pitch, generator=torch.Generator().manual_seed(3))[:, :cols]
    torch.testing.assert_close(rowsum_triton(x).double(), x.double().sum(dim=1), atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("cols,tile", [(257, 512), (257, 256), (300, 64), (1001, 128)])
def test_long_unaligned_rows_on_aligned_tiles_match_float64(monkeypatch, cols, tile):
    # rows too long to hold (the widest block cut to 8 columns) and no multiple of 16 bytes walk the flat buffer in
    # aligned tiles: rows starting mid-tile, of one tile (257 columns in 512) and two (in 256: no inner tile), first,
    # inner and last tiles
    monkeypatch.setattr(rowsum, "MAX_BLOCK_N", 8)
    monkeypatch.setattr(rowsum, "ALIGNED_TILES", {2: (tile, 1)})
    launched = []
    real = rowsum._rowsum_aligned_kernel
    monkeypatch.setattr(rowsum, "_rowsum_aligned_kernel",
                        type("Spy", (), {
                            "__getitem__": lambda self, grid: (launched.append(grid), real[grid])[1]
                        })())
    x = torch.randn(7, cols).to(torch.float16)
    torch.testing.assert_close(rowsum.rowsum_triton(x).double(), x.double().sum(dim=1), atol=0.1, rtol=2e-3)
    assert launched == [(7, )]
    # not the aligned tiles: fp32 rows (no ALIGNED_TILES entry here), an aligned row length, a strided x, a tile asked
    for y, kw in [(torch.randn(3, cols), {}), (torch.randn(3, 304).half(), {}), (x[::2], {}), (x, {"block_n": 64})]:
        torch.testing.assert_close(rowsum.rowsum_triton(y, **kw).double(), y.double().sum(dim=1), atol=0.1, rtol=2e-3)
    assert launched == [(7, )]
