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
    (torch.float32, 1e-5, 1e-5),
    (torch.bfloat16, 2e-2, 1.6e-2),  # y rounded to bf16 (8-bit mantissa)
    (torch.float16, 2e-3, 2e-3),
]
SHAPES = [(1, 1), (1, 37), (3, 5), (17, 300), (64, 64), (4, 8192)]  # (rows, cols): one row, tiny, odd, 8192 cols
DTYPE_IDS = lambda v: str(v).replace("torch.", "")  # noqa: E731


def _layernorm(x, w, b):
    return torch.nn.functional.layer_norm(x.double(), (x.shape[-1],), w.double(), b.double(), ln.EPS)


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
    assert [tuple(t.shape) for t in first] == [(8, 8)] + [(8,)] * n_params + [(8, 8)]
    torch.testing.assert_close(k.reference(first), formula(*first[:-1]))
