"""What LayerNorm and RMSNorm declare alike, checked for both: every implementation within the kernel's tolerance
of the float64 reference, the declaration (passes, dtypes) and seeded inputs with the fwd+bwd upstream gradient
last; and the dtypes and shapes both norms' own kernel tests (tests/test_layernorm.py, tests/test_rmsnorm.py) use."""
import pytest
import torch

from kernels import layernorm as ln
from kernels import rmsnorm as rms
from rooflab.cell import relative_error

# The grid of both norms' kernel tests (tests/test_layernorm.py, tests/test_rmsnorm.py import it).
DTYPES = [  # (dtype, atol, rtol): the tolerance travels with the dtype
    (torch.float32, 1e-5, 1e-5), (torch.bfloat16, 2e-2, 1.6e-2),  # y rounded to bf16 (8-bit mantissa)
    (torch.float16, 2e-3, 2e-3),
]
SHAPES = [(1, 1), (1, 37), (3, 5), (17, 300), (64, 64), (4, 8192)]  # (rows, cols): one row, tiny, odd, 8192 cols
DTYPE_IDS = lambda v: str(v).replace("torch.", "")  # noqa: E731


def _layernorm(x, w, b):
    return torch.nn.functional.layer_norm(x.double(), (x.shape[-1], ), w.double(), b.double(), ln.EPS)


def _rmsnorm(x, w):
    x, w = x.double(), w.double()
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + rms.EPS) * w


NORMS = {"layernorm": (ln, _layernorm, 2), "rmsnorm": (rms, _rmsnorm, 1)}  # module, float64 formula, parameters


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("impl", ["naive", "builtin", "triton"])
@pytest.mark.parametrize("norm", NORMS)
def test_every_impl_within_kernel_tolerance(norm, impl, dtype):
    k = NORMS[norm][0].KERNEL
    inputs = k.make_inputs(96, getattr(torch, dtype), "cpu", seed=3)
    rel, _ = relative_error(k.impls[impl](inputs)(), k.reference(inputs))
    assert rel <= k.tolerance[dtype]


@pytest.mark.parametrize("norm", NORMS)
def test_kernel_declaration_and_seeded_inputs(norm):
    module, formula, n_params = NORMS[norm]
    k = module.KERNEL
    assert k.name == norm and k.passes == ("fwd", "fwd+bwd")
    assert k.dtypes == ("float32", "bfloat16", "float16")
    first = module.make_inputs(8, torch.float32, "cpu", seed=5)
    again = module.make_inputs(8, torch.float32, "cpu", seed=5)
    assert all(torch.equal(p, q) for p, q in zip(first, again))
    # x, the weight (and bias), the fwd+bwd upstream gradient last
    assert [tuple(t.shape) for t in first] == [(8, 8)] + [(8, )] * n_params + [(8, 8)]
    torch.testing.assert_close(k.reference(first), formula(*first[:-1]))


def test_row_align_is_the_largest_vector_dividing_every_length():
    from kernels._shared.rows import row_align

    assert row_align(2, 5000, 5000) == 8  # bf16 rows of 5000: 16-byte vectors
    assert row_align(2, 100, 100) == 4 and row_align(4, 100, 100) == 4
    assert row_align(4, 4096, 4096) == 4 and row_align(1, 4096) == 16
    assert row_align(2, 4097, 4097) == 1 and row_align(2, 5000, 5002) == 2 and row_align(4, 100, 0) == 4


@pytest.mark.parametrize("name", NORMS)
@pytest.mark.parametrize("cols,pitch", [(100, 108), (50, 54), (52, 60)])
def test_rows_whose_length_and_stride_share_a_vector(name, cols, pitch):
    # ALIGN > 1 (the kernels rewrite n_cols and the row strides as multiples of it): rows of x sliced from a wider
    # buffer, so the row stride differs from the length; forward and every gradient against float64
    module, formula, n_params = NORMS[name]
    g = torch.Generator().manual_seed(7)
    x = torch.randn(9, pitch, generator=g)[:, :cols]
    params = [1.0 + 0.1 * torch.randn(cols, generator=g) for _ in range(n_params)]
    leaves = [t.clone().requires_grad_() for t in (x, *params)]
    y = getattr(module, f"{name}_triton")(*leaves)
    assert relative_error(y.detach(), formula(x, *params))[0] < 1e-5
    dy = torch.randn(9, cols, generator=g)
    y.backward(dy)
    ref = [t.double().clone().requires_grad_() for t in (x, *params)]
    formula(*ref).backward(dy.double())
    for ours, r in zip(leaves, ref):
        assert relative_error(ours.grad, r.grad)[0] < 1e-4
