"""Property-based tests (hypothesis) of every Triton kernel wrapper against torch (issue #27).

Each test draws a case -- shape (tile edges: powers of two and one off, one row, one column, odd sizes), dtype,
memory layout (transposed, sliced, offset or broadcast views; the gaps of a view's storage hold NaN, so a kernel that
reads outside its view shows it), values (randn at a drawn scale, with +-inf, NaN, huge, near-max, subnormal and
signed zeros written in) and the wrapper's launch knobs (tile sizes small enough to reach the tiled / online kernels
with short rows) -- runs the wrapper and compares with torch's own op in float64 on the same inputs.

The comparison (``assert_matches``): the float64 answer is rounded to the output dtype (a value past the dtype's range
must come out as inf, as it does from torch; within tolerance of the dtype's largest value either is right), NaN and
+-inf must sit exactly where the oracle has them, and finite values must lie within ``tol * scale`` plus the dtype's
smallest normal (a flushed subnormal is not a wrong answer), where ``scale`` is the magnitude a correct fp32
computation's error is proportional to (|a x| + |y| for SAXPY, the sum of |x| for a row sum, |A| @ |B| for a
product, ...).

What a correct kernel does with special values follows torch: softmax of a row with +inf or NaN, or of only -inf, is
NaN; rows whose leading tiles are all -inf are finite; GeLU(-inf) is NaN (0.5 x (1 + tanh(u)) is -inf * 0, torch's
too); relu(NaN) is NaN. Two consequences of computing in fp32 (every kernel accumulates in fp32) are encoded, not
treated as bugs:
- where an fp32 sum may overflow in one summation order and not in another (sums of magnitudes near the fp32
  maximum), any non-finite result is accepted in place of the float64 one (``either``);
- LayerNorm/RMSNorm rows whose fp32 sum of squares overflows (|x| >~ 1e19 in float32) come out with rstd =
  rsqrt(inf) = 0: LayerNorm returns the bias, RMSNorm zeros (torch's float32 F.rms_norm gives the same zeros,
  its F.layer_norm NaN); rows within a factor of 4 of that overflow are not checked (``layernorm_oracle``).

Device: the GPU when Triton compiles (CUDA present and TRITON_INTERPRET unset: ``pytest --noconftest``, as
scripts/trust_check_gpu.sh runs it), bfloat16 included; else the CPU interpreter (tests/conftest.py sets
TRITON_INTERPRET=1), float32 and float16 only (the interpreter's bf16 arithmetic is wrong), small shapes.
Hypothesis profiles: "cpu" (250 examples a test, small shapes: the file in under a minute on two cores) and "gpu"
(250 examples a test, rows up to 20000 columns, bf16: about 4 minutes on an H200, mostly compiling); the default
follows the device, ROOFLAB_HYPOTHESIS_PROFILE picks one, ROOFLAB_HYPOTHESIS_EXAMPLES overrides the count. Both are
derandomized and keep no example database, so runs are repeatable; "explore" (600 random examples a test, new each
run) is for looking for trouble, not for CI.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported (conftest.py does it too)

import pytest  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kernels import gelu as gelu_k  # noqa: E402
from kernels import layernorm as ln_k  # noqa: E402
from kernels import matmul as mm_k  # noqa: E402
from kernels import rmsnorm as rms_k  # noqa: E402
from kernels import rowsum as rowsum_k  # noqa: E402
from kernels import saxpy as saxpy_k  # noqa: E402
from kernels import softmax as sm_k  # noqa: E402
from kernels import vecadd as vecadd_k  # noqa: E402
from rooflab.kernel import math_mode  # noqa: E402
from rooflab.triton_utils import interpreting  # noqa: E402

# the special values make numpy (the interpreter) warn about overflow and invalid values: expected here
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DEVICE = "cpu" if interpreting() or not torch.cuda.is_available() else "cuda"
ON_GPU = DEVICE == "cuda"

# ---------------------------------------------------------------------------------------------------------------------
# Hypothesis profiles
_COMMON = dict(deadline=None, derandomize=True, database=None, print_blob=False,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
settings.register_profile("cpu", max_examples=250, **_COMMON)
settings.register_profile("gpu", max_examples=250, **_COMMON)
# a longer, randomised search (new cases every run) for looking, not for CI
settings.register_profile("explore", max_examples=600, **(_COMMON | {"derandomize": False}))
PROFILE = os.environ.get("ROOFLAB_HYPOTHESIS_PROFILE") or ("gpu" if ON_GPU else "cpu")
BASE = settings.get_profile(PROFILE)
if os.environ.get("ROOFLAB_HYPOTHESIS_EXAMPLES"):  # an explicit count, e.g. to fit a time budget
    BASE = settings(BASE, max_examples=int(os.environ["ROOFLAB_HYPOTHESIS_EXAMPLES"]))

# ---------------------------------------------------------------------------------------------------------------------
# Values
DTYPES = ["float32", "float16"] + (["bfloat16"] if ON_GPU else [])
TORCH_DTYPE = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
ACC_MAX = torch.finfo(torch.float32).max  # every kernel accumulates in fp32
# Absolute slack: the smallest normal where a GPU may flush fp32 subnormals (and bf16 shares fp32's exponent); fp16
# results are computed in fp32, where fp16's subnormals are normal numbers, and only rounded: two of their steps.
FLOOR = {"float32": 2.0**-126, "bfloat16": 2.0**-126, "float16": 2.0**-23}


def _finfo(dtype: str):
    return torch.finfo(TORCH_DTYPE[dtype])


# Special values by name (short reprs in a falsifying example; resolved for the dtype at build time)
SPECIALS = {
    "inf": lambda d: math.inf,
    "-inf": lambda d: -math.inf,
    "nan": lambda d: math.nan,
    "0": lambda d: 0.0,
    "-0": lambda d: -0.0,
    "1e30": lambda d: 1e30,
    "-1e30": lambda d: -1e30,  # inf once rounded to float16
    "max": lambda d: _finfo(d).max,
    "-max": lambda d: -_finfo(d).max,
    "max/3": lambda d: _finfo(d).max / 3,
    "subnormal": lambda d: _finfo(d).smallest_normal / 2**3,
    "-subnormal": lambda d: -_finfo(d).smallest_normal / 8,
    "tiniest": lambda d: 2.0**(-149 if d == "float32" else -24 if d == "float16" else -133),
    "smallest_normal": lambda d: _finfo(d).smallest_normal,
}
SCALES = {
    "1": lambda d: 1.0,
    "1e-3": lambda d: 1e-3,
    "1e3": lambda d: 1e3,
    "subnormal": lambda d: _finfo(d).smallest_normal / 4,  # mostly subnormal values
    "huge": lambda d: _finfo(d).max / 64
}  # near the top of the range (1e30-ish and more in fp32/bf16)


def specials(names=tuple(SPECIALS), max_size=6):
    """(position, name) pairs; a position is taken modulo the tensor's size. As often none or one or two as many,
    so that rows of ordinary values are checked too, not only rows a NaN has taken over."""
    pair = st.tuples(st.integers(0, 10**6), st.sampled_from(list(names)))
    return st.one_of(st.just(()), st.lists(pair, min_size=1, max_size=min(2, max_size)),
                     st.lists(pair, min_size=1, max_size=max_size)).map(tuple)


LAYOUTS = ("contiguous", "transposed", "col_slice", "row_slice", "offset", "broadcast")


@dataclass(frozen=True)
class Mat:
    """How to build one input matrix: shape, randn values at a scale with special values written in, and the memory
    layout of the view handed to the kernel."""
    rows: int
    cols: int
    seed: int = 0
    scale: str = "1"
    specials: tuple = ()
    layout: str = "contiguous"
    minus_inf_prefix: int = 0  # softmax: the first columns of every row set to -inf (a masked prefix)

    def build(self, dtype: str) -> torch.Tensor:
        g = torch.Generator().manual_seed(self.seed)
        v = torch.randn((self.rows, self.cols), generator=g, dtype=torch.float64) * SCALES[self.scale](dtype)
        flat = v.view(-1)
        for pos, name in self.specials:
            if flat.numel():
                flat[pos % flat.numel()] = SPECIALS[name](dtype)
        v[:, :self.minus_inf_prefix] = -math.inf
        return relayout(v.to(TORCH_DTYPE[dtype]).to(DEVICE), self.layout)


def relayout(m: torch.Tensor, layout: str) -> torch.Tensor:
    """A view of m's values in the layout named; the storage's gaps hold NaN."""
    r, c = m.shape
    if layout == "contiguous":
        return m.contiguous()
    if layout == "transposed":  # column-major: strides (1, rows)
        s = m.new_full((c, r), math.nan)
        s.t().copy_(m)
        return s.t()
    if layout == "col_slice":  # every other column: strides (2 cols, 2)
        s = m.new_full((r, 2 * c), math.nan)
        s[:, ::2] = m
        return s[:, ::2]
    if layout == "row_slice":  # every other row: strides (2 cols, 1)
        s = m.new_full((2 * r, c), math.nan)
        s[::2] = m
        return s[::2]
    if layout == "offset":  # a block inside a wider matrix: an unaligned base and row stride cols + 3
        s = m.new_full((r + 1, c + 3), math.nan)
        s[1:, 3:] = m
        return s[1:, 3:]
    if layout == "broadcast":  # row 0 repeated: row stride 0
        return m[:1].expand(r, c)
    raise ValueError(layout)


@dataclass(frozen=True)
class Vec:
    """How to build a weight or bias vector (n,): around 1 (weight) or 0 (bias), specials written in, contiguous,
    strided (every other element) or broadcast (stride 0)."""
    n: int
    seed: int = 0
    centre: float = 1.0
    specials: tuple = ()
    layout: str = "contiguous"

    def build(self, dtype: str) -> torch.Tensor:
        g = torch.Generator().manual_seed(self.seed)
        v = self.centre + 0.5 * torch.randn((self.n, ), generator=g, dtype=torch.float64)
        for pos, name in self.specials:
            v[pos % self.n] = SPECIALS[name](dtype)
        v = v.to(TORCH_DTYPE[dtype]).to(DEVICE)
        if self.layout == "strided":
            s = v.new_full((2 * self.n, ), math.nan)
            s[::2] = v
            return s[::2]
        if self.layout == "broadcast":
            return v[:1].expand(self.n)
        return v


@dataclass
class Case:
    """One drawn case: the dtype, how to build the inputs, and the wrapper's keyword arguments."""
    dtype: str
    inputs: tuple
    kw: dict = field(default_factory=dict)

    def build(self):
        return [i.build(self.dtype) if isinstance(i, (Mat, Vec)) else i for i in self.inputs]


# ---------------------------------------------------------------------------------------------------------------------
# Shapes: tile edges (powers of two and one off), one row / column, anything in between
EDGES = [1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257]
GPU_EDGES = [511, 512, 513, 1023, 1024, 1025, 2047, 2048, 2049, 4095, 4096, 4097, 8191, 8192, 16383, 16384, 16385]
MAX_ROWS, MAX_COLS = (64, 5000) if ON_GPU else (8, 300)
MAX_PROGRAMS = 10**9 if ON_GPU else 48  # the interpreter runs programs one after another, ~1 ms each


def dim(hi: int, edges=EDGES + (GPU_EDGES if ON_GPU else [])):
    return st.one_of(st.sampled_from([e for e in edges if e <= hi]), st.integers(1, hi))


ROWS = st.one_of(st.sampled_from([1, 2, 3]), st.integers(1, MAX_ROWS))
COLS = dim(MAX_COLS * 4 if ON_GPU else MAX_COLS)
SEEDS = st.integers(0, 2**31 - 1)


@st.composite
def mats(draw, rows, cols, layouts=LAYOUTS, names=tuple(SPECIALS), scales=tuple(SCALES)):
    return Mat(rows, cols, seed=draw(SEEDS), scale=draw(st.sampled_from(list(scales))), specials=draw(specials(names)),
               layout=draw(st.sampled_from(list(layouts))))


# ---------------------------------------------------------------------------------------------------------------------
# The comparison
def assert_matches(out: torch.Tensor, expected: torch.Tensor, tol: float, scale=None, either=None, skip=None,
                   what: str = ""):
    """out (the kernel's, in its dtype) against expected (the float64 oracle, unrounded); see the module docstring.

    scale: per-element magnitude the error of a correct fp32 computation is proportional to (default |expected|);
    either: where any non-finite output is accepted in place of expected (an fp32 sum that overflows in some orders);
    skip: where nothing is checked. Within tolerance of the dtype's largest value, inf and finite both pass."""
    dtype = str(out.dtype).removeprefix("torch.")
    assert out.shape == expected.shape, f"{what}: shape {tuple(out.shape)}, want {tuple(expected.shape)}"
    want = expected.to(out.dtype).double()  # rounded to the output dtype: past its range is inf
    got = out.double()
    s = expected.abs() if scale is None else torch.broadcast_to(scale.double(), want.shape)
    s = torch.where(torch.isfinite(s), s, torch.ones_like(s)) + FLOOR[dtype] / tol  # tol * s + FLOOR allowed
    if either is not None:
        got = torch.where(torch.broadcast_to(either, got.shape) & ~torch.isfinite(got), want, got)
    # within tolerance of the dtype's largest value, rounding may go to it or past it to inf: both are right
    top = torch.finfo(out.dtype).max
    edge = torch.isfinite(expected) & ((expected.abs() - top).abs() <= tol * s)
    edge_ok = edge & ((torch.isinf(got) & (torch.sign(got) == torch.sign(expected)))
                      | ((got - expected).abs() <= tol * s))
    skip = edge_ok if skip is None else torch.broadcast_to(skip, got.shape) | edge_ok
    got, want = got.masked_fill(skip, 0.0), want.masked_fill(skip, 0.0)

    def msg(default: str) -> str:
        bad = ~(torch.isclose(got / s, want / s, rtol=0, atol=tol, equal_nan=True))
        idx = bad.nonzero()[:6].tolist()
        rows = [
            f"  at {tuple(i)}: got {got[tuple(i)].item()!r}, want {want[tuple(i)].item()!r} "
            f"(float64 {expected[tuple(i)].item()!r}, scale {s[tuple(i)].item():.3g})" for i in idx
        ]
        return f"{what} ({dtype}, tol {tol:g} x scale)\n{default}\n" + "\n".join(rows)

    torch.testing.assert_close(got / s, want / s, rtol=0, atol=tol, equal_nan=True, msg=msg)


def _finite_or_one(t: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isfinite(t), t, torch.ones_like(t))


# ---------------------------------------------------------------------------------------------------------------------
# Elementwise: vecadd, saxpy, gelu
ELEM_TOL = {"float32": 1e-6, "float16": 2e-3, "bfloat16": 1.6e-2}  # one or two fp32 roundings, then the output's


@st.composite
def elementwise_layout_cases(draw, n_inputs: int):
    dtype = draw(st.sampled_from(DTYPES))
    r, c = draw(ROWS), draw(COLS)
    inputs = tuple(draw(mats(r, c)) for _ in range(n_inputs))
    sizes = [e for e in (1, 16, 64, 256) if ON_GPU or r * c / e <= MAX_PROGRAMS]
    kw = {"block_size": draw(st.sampled_from([None] + sizes)), "one_row": draw(st.sampled_from([None, False]))}
    return Case(dtype, inputs, kw)


@settings(BASE)
@given(case=elementwise_layout_cases(2))
def test_vecadd_matches_torch(case):
    x, y = case.build()
    z = vecadd_k.vecadd_triton(x, y, **case.kw)
    assert z.dtype == x.dtype and z.is_contiguous()
    # torch.add in float64, rounded once to the dtype: what one fp32 add of the operands gives
    assert_matches(z, x.double() + y.double(), ELEM_TOL[case.dtype], what="vecadd")


A_VALUES = st.one_of(st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e20, -1e-20, 0.1]),
                     st.floats(-8, 8, width=32, allow_nan=False))


@settings(BASE)
@given(case=elementwise_layout_cases(2), a=A_VALUES)
def test_saxpy_matches_torch(case, a):
    x, y = case.build()
    z = saxpy_k.saxpy_triton(a, x, y, **case.kw)
    ax, y64 = a * x.double(), y.double()
    # torch.add(y, x, alpha=a) in float64; a * x rounded, then the sum (or one fused rounding on the GPU): the error
    # scales with |a x| + |y|. Where that nears fp32's top, a * x may overflow in fp32 and not fused: inf accepted.
    scale = ax.abs() + y64.abs()
    assert_matches(z, torch.add(y64, x.double(), alpha=a), ELEM_TOL[case.dtype], scale=scale, either=scale
                   > ACC_MAX / 2, what=f"saxpy a={a!r}")


@st.composite
def gelu_cases(draw):
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.sampled_from(["matrix", "vector", "3d"]))
    r, c = draw(ROWS), draw(COLS)
    m = draw(mats(r, c))
    sizes = [e for e in (16, 64, 256) if ON_GPU or r * c / e <= MAX_PROGRAMS]
    kw = {"block_size": draw(st.sampled_from([None] + sizes)), "precise": draw(st.booleans())}
    return Case(dtype, (m, shape), kw)


def _gelu_scale(x64: torch.Tensor, y64: torch.Tensor) -> torch.Tensor:
    """x / (1 + exp(-2u)): exp's argument carries an fp32 rounding of |u|, so the relative error grows with |u| while
    exp is in range; once it is not (x < -9), the answer underflows and only |x|'s scale is meaningful (torch's
    0.5 x (1 + tanh u) is off by ~eps |x| there)."""
    u = math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64**3)
    return y64.abs() * (1 + 3 * u.abs().clamp_max(64)) + 2.0**-24 * x64.abs()


@settings(BASE)
@given(case=gelu_cases())
def test_gelu_matches_torch_or_refuses_strides(case):
    m, shape = case.build()
    x = {"matrix": m, "vector": m.reshape(-1) if m.is_contiguous() else m[0], "3d": m.unsqueeze(0)}[shape]
    if not x.is_contiguous():  # the wrapper works on the flat buffer: a strided view must be refused, not misread
        with pytest.raises(ValueError, match="contiguous"):
            gelu_k.gelu_triton(x, **case.kw)
        return
    y = gelu_k.gelu_triton(x, **case.kw)
    assert y.shape == x.shape and y.dtype == x.dtype
    x64 = x.double()
    want = F.gelu(x64, approximate="tanh")  # torch's op: gelu(-inf) = -inf * 0 = NaN, gelu(+inf) = inf
    assert_matches(y, want, ELEM_TOL[case.dtype] * 2, scale=_gelu_scale(x64, want), what="gelu")


def test_gelu_special_values_follow_torch():
    """The tanh form at +-inf and NaN: torch's GeLU gives inf, NaN (-inf * (1 + tanh(-inf)) = -inf * 0) and NaN; ours
    too, in both divisions; huge negative inputs give -0, huge positive ones themselves."""
    for dtype in DTYPES:
        x = torch.tensor([math.inf, -math.inf, math.nan, -1e30, 1e30, -65504.0, 65504.0, 0.0],
                         dtype=torch.float64).to(TORCH_DTYPE[dtype]).to(DEVICE)
        want = F.gelu(x.double(), approximate="tanh")
        assert torch.isnan(want[1]) and want[0] == math.inf
        for precise in (False, True):
            assert_matches(gelu_k.gelu_triton(x, precise=precise), want, ELEM_TOL[dtype] * 2,
                           scale=_gelu_scale(x.double(), want), what=f"gelu specials precise={precise}")


# ---------------------------------------------------------------------------------------------------------------------
# Softmax: forward (whole-row and online kernels), backward, fwd+bwd through autograd
SOFTMAX_TOL = {"float32": 4e-6, "float16": 2e-3, "bfloat16": 1.6e-2}
SOFTMAX_BWD_TOL = {"float32": 1e-5, "float16": 3e-3, "bfloat16": 2.5e-2}
MAX_BLOCKS = [16, 32, 64, 256, sm_k.MAX_FUSED_BLOCK]


@st.composite
def softmax_cases(draw, kind: str):
    dtype = draw(st.sampled_from(DTYPES))
    r, c = draw(ROWS), draw(COLS)
    # every power of two from 16 reaches the online (tiled) kernels on rows longer than it; under the interpreter
    # the tile count is kept small
    blocks = [b for b in MAX_BLOCKS if ON_GPU or r * max(1, math.ceil(c / b)) <= MAX_PROGRAMS]
    max_block = draw(st.sampled_from(blocks))
    if kind == "bwd":  # arbitrary y and dy: the wrapper computes y (dy - sum(y dy)) for any y
        x, dy = draw(mats(r, c)), draw(mats(r, c))
        return Case(dtype, (x, dy), {"max_block": max_block})
    tile = min(triton.next_power_of_2(c), max_block)
    prefix = draw(st.one_of(st.just(0), st.sampled_from([tile - 1, tile, tile + 1, 2 * tile, c - 1, c])))
    x = draw(mats(r, c))
    x = Mat(x.rows, x.cols, x.seed, x.scale, x.specials, x.layout, minus_inf_prefix=max(0, min(prefix, c)))
    if kind == "fwd":
        kw = {
            "max_block": max_block,
            "reload": draw(st.sampled_from([None, False, True])),
            "full": draw(st.sampled_from([None, False, True]))
        }
        return Case(dtype, (x, ), kw)
    dy = draw(mats(r, c, scales=("1", "1e-3", "1e3")))
    return Case(dtype, (x, dy), {"max_block": max_block})


def _softmax_scale(x64: torch.Tensor, y64: torch.Tensor) -> torch.Tensor:
    """exp(x - max) carries the fp32 rounding of x - max: relative error ~ eps |x - max| where y is not negligible."""
    m = x64.amax(dim=1, keepdim=True)
    return y64.abs() * (1 + _finite_or_one(x64 - m).abs().clamp_max(200))


@settings(BASE)
@given(case=softmax_cases("fwd"))
@example(case=Case("float32", (Mat(3, 40, seed=1, minus_inf_prefix=32), ), {"max_block": 16}))
@example(case=Case("float32", (Mat(2, 33, seed=2, minus_inf_prefix=33), ), {"max_block": 16}))  # only -inf: NaN
def test_softmax_forward_matches_torch(case):
    (x, ) = case.build()
    y = sm_k.softmax_forward(x, **case.kw)
    assert y.dtype == x.dtype and y.shape == x.shape
    x64 = x.double()
    want = torch.softmax(x64, dim=1)  # NaN rows: a +inf or NaN in the row, or only -inf
    assert_matches(y, want, SOFTMAX_TOL[case.dtype], scale=_softmax_scale(x64, want), what="softmax fwd")


def _bwd_scale_and_either(y64: torch.Tensor, dy64: torch.Tensor, y_slack: float = 0.0):
    """dx = y (dy - sum(y dy)): the error scales with |y| (|dy| + sum|y dy|) (y_slack: y's absolute error, relative to
    the tolerance); where that sum nears fp32's top, the fp32 dot may overflow in some orders (inf accepted)."""
    s = (y64 * dy64).abs().sum(dim=1, keepdim=True)
    bound = dy64.abs() + s
    return (y64.abs() + y_slack) * bound, (bound > ACC_MAX / 4) | (s > ACC_MAX / 4)


@settings(BASE)
@given(case=softmax_cases("bwd"))
def test_softmax_backward_matches_torch(case):
    y, dy = case.build()
    dx = sm_k.softmax_backward(y, dy, **case.kw)
    assert dx.dtype == y.dtype and dx.shape == y.shape
    y64, dy64 = y.double(), dy.double()
    want = torch.ops.aten._softmax_backward_data(dy64, y64, 1, torch.float64)  # torch's own backward
    scale, either = _bwd_scale_and_either(y64, dy64)
    assert_matches(dx, want, SOFTMAX_BWD_TOL[case.dtype], scale=scale, either=either, what="softmax bwd")


@settings(BASE)
@given(case=softmax_cases("fwd+bwd"))
@example(case=Case("float32", (Mat(2, 50, seed=3, minus_inf_prefix=48), Mat(2, 50, seed=4)), {"max_block": 16}))
# y in float16's subnormals (rows of 2990: y ~ 1e-5), scaled by dy ~ 1e3: found on the H200
@example(case=Case("float16", (Mat(1, 2990), Mat(1, 2990, scale="1e3")), {"max_block": 256}))
def test_softmax_forward_backward_matches_torch_autograd(case):
    check_softmax_forward_backward(case)


def check_softmax_forward_backward(case):
    x, dy = case.build()
    leaf = x.detach().clone().requires_grad_(True)
    y = sm_k.softmax_triton(leaf, case.kw["max_block"])
    y.backward(dy)
    x64 = x.double().requires_grad_(True)
    y64 = torch.softmax(x64, dim=1)
    y64.backward(dy.double())
    assert_matches(y.detach(), y64.detach(), SOFTMAX_TOL[case.dtype], scale=_softmax_scale(x64.detach(), y64.detach()),
                   what="softmax fwd (autograd)")
    # the backward reads y as the forward stored it: rounded to the dtype, by a subnormal's step where it is that small
    tol = SOFTMAX_BWD_TOL[case.dtype]
    scale, either = _bwd_scale_and_either(y64.detach(), dy.double(), FLOOR[case.dtype] / tol)
    assert_matches(leaf.grad, x64.grad, tol, scale=scale, either=either, what="softmax fwd+bwd")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("prefix, cols", [(16, 40), (32, 40), (39, 40), (16, 16), (17, 48), (40, 40)])
def test_softmax_leading_minus_inf_tiles_with_a_small_max_block(dtype, prefix, cols):
    """Regression (the online kernel's running max stayed -inf over the leading all -inf tiles, and exp(-inf - -inf)
    made the whole row NaN): with max_block=16 every row of more than 16 columns is online; rows are finite like
    torch's unless they hold only -inf (NaN, like torch's); forward, backward and fwd+bwd."""
    case = Case(dtype, (Mat(3, cols, seed=5, minus_inf_prefix=prefix), Mat(3, cols, seed=6)), {"max_block": 16})
    check_softmax_forward_backward(case)
    y = sm_k.softmax_forward(case.build()[0], max_block=16)
    assert torch.isfinite(y).all() == (prefix < cols)


# ---------------------------------------------------------------------------------------------------------------------
# Row sum
ROWSUM_TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}


@st.composite
def rowsum_cases(draw):
    dtype = draw(st.sampled_from(DTYPES))
    r, c = draw(ROWS), draw(COLS)
    x = draw(mats(r, c))
    blocks = [None, (1, 16), (4, 16), (2, 64), (8, 32), (1, 256)]
    blocks = [b for b in blocks if ON_GPU or b is None or math.ceil(r / b[0]) * math.ceil(c / b[1]) <= 4 * MAX_PROGRAMS]
    bm_bn = draw(st.sampled_from(blocks))
    kw = {"full": draw(st.sampled_from([None, False, True]))}
    if bm_bn:
        kw.update(block_m=bm_bn[0], block_n=bm_bn[1])
    return Case(dtype, (x, ), kw)


@settings(BASE)
@given(case=rowsum_cases())
def test_rowsum_matches_torch(case):
    (x, ) = case.build()
    s = rowsum_k.rowsum_triton(x, **case.kw)
    assert s.shape == (x.shape[0], ) and s.dtype == x.dtype
    x64 = x.double()
    mag = x64.abs().sum(dim=1)
    # an fp32 sum whose terms' magnitudes near fp32's top may overflow in one order and not another
    assert_matches(s, x64.sum(dim=1), ROWSUM_TOL[case.dtype], scale=mag, either=mag > ACC_MAX / 4, what="rowsum")


# ---------------------------------------------------------------------------------------------------------------------
# Matmul + ReLU
MM_TOL = {"float32": 1e-5, "tf32": 2e-3, "float16": 2e-3, "bfloat16": 1.6e-2}
MM_EDGES = [1, 2, 3, 15, 16, 17, 31, 32, 33, 63, 64, 65] + ([127, 128, 129, 255, 256, 257] if ON_GPU else [])
MM_DIM = st.one_of(st.sampled_from(MM_EDGES), st.integers(1, 300 if ON_GPU else 72))
TILES = [{
    "BLOCK_M": 16,
    "BLOCK_N": 16,
    "BLOCK_K": 16,
    "GROUP_M": 1
}, {
    "BLOCK_M": 16,
    "BLOCK_N": 32,
    "BLOCK_K": 32,
    "GROUP_M": 2
}, {
    "BLOCK_M": 32,
    "BLOCK_N": 16,
    "BLOCK_K": 16,
    "GROUP_M": 4
}, {
    "BLOCK_M": 64,
    "BLOCK_N": 64,
    "BLOCK_K": 32,
    "GROUP_M": 8,
    "num_warps": 4,
    "num_stages": 3
}]


@st.composite
def matmul_cases(draw):
    dtype = draw(st.sampled_from(DTYPES))
    m, n, k = draw(MM_DIM), draw(MM_DIM), draw(MM_DIM)
    a = draw(mats(m, k))
    b = draw(mats(k, n))
    # None: the autotuner (on the GPU every new shape would autotune all configs: tiles only there)
    config = draw(st.sampled_from(([] if ON_GPU else [None]) + TILES))
    kw = {
        "config": config,
        "activation": draw(st.sampled_from(["relu", "relu", "none"])),
        "method": draw(st.sampled_from(["auto", "pointer", "tma"]))
    }
    tf32 = dtype == "float32" and ON_GPU and draw(st.booleans())
    return Case(dtype, (a, b), kw | {"tf32": tf32})


def _matmul_f64(a64: torch.Tensor, b64: torch.Tensor) -> torch.Tensor:
    """A @ B in float64 by explicit products and sums (inf * 0 = NaN everywhere; a BLAS may skip zero terms)."""
    return torch.cat([(a64[i:i + 32, :, None] * b64[None]).sum(dim=1) for i in range(0, a64.shape[0], 32)])


@settings(BASE)
@given(case=matmul_cases())
@example(case=Case("float32", (Mat(17, 20, seed=1, specials=((5, "nan"), )), Mat(20, 33, seed=2)), {
    "config": TILES[0],
    "activation": "relu",
    "method": "pointer",
    "tf32": False
}))
# a TF32 product just past fp32's largest value: 3.4012e38 (finite) where float64 says 3.4036e38 (inf in fp32)
@example(case=Case("float32", (Mat(127, 60, seed=721180), Mat(60, 2, specials=((14142, "-max"), ))), {
    "config": TILES[0],
    "activation": "relu",
    "method": "auto",
    "tf32": ON_GPU
}))
# TF32 products of fp32 subnormals (found on the H200: a 1.1 % error there, within TF32's steps, not 2^-11 of them)
@example(case=Case("float32", (Mat(16, 1, scale="subnormal"), Mat(1, 1, scale="1e3")), {
    "config": TILES[0],
    "activation": "relu",
    "method": "auto",
    "tf32": ON_GPU
}))
def test_matmul_relu_matches_torch(case):
    a, b = case.build()
    kw = dict(case.kw)
    precision = "tf32" if kw.pop("tf32") else case.dtype
    if kw["method"] == "tma" and not mm_k.tma_ok(a, b):
        with pytest.raises(ValueError, match="16-byte"):
            mm_k.matmul_triton(a, b, **kw)
        return
    with math_mode(precision):
        c = mm_k.matmul_triton(a, b, **kw)
    assert c.shape == (a.shape[0], b.shape[1]) and c.dtype == a.dtype
    a64, b64 = a.double(), b.double()
    want = _matmul_f64(a64, b64)
    if kw["activation"] == "relu":
        want = torch.relu(want)  # relu(NaN) = NaN
    mag = _matmul_f64(a64.abs(), b64.abs())
    if precision == "tf32":  # TF32 rounds inputs below fp32's smallest normal by steps of up to that normal
        slack = FLOOR["float32"] / MM_TOL["tf32"]
        mag = _matmul_f64(a64.abs() + slack, b64.abs() + slack)
    # where the fp32 sum of products may overflow, an overflowed sum is accepted: non-finite, or 0 after a ReLU
    # (an fp32 sum that overflowed to -inf where the float64 one is positive)
    either = mag > ACC_MAX / 4
    skip = either & (c == 0) if kw["activation"] == "relu" else None
    assert_matches(c, want, MM_TOL[precision], scale=mag, either=either, skip=skip,
                   what=f"matmul {kw['activation']} {kw['method']} {precision}")


def test_matmul_relu_keeps_nan():
    """Regression: relu(NaN) is NaN (torch.relu, F.relu); tl.maximum(acc, 0.0) without propagate_nan compiles to a
    max that returns 0 for NaN on the GPU (the interpreter's np.maximum propagates it), so a NaN product came out 0."""
    for dtype in DTYPES:
        a = torch.ones((16, 16), dtype=TORCH_DTYPE[dtype], device=DEVICE)
        b = torch.ones((16, 16), dtype=TORCH_DTYPE[dtype], device=DEVICE)
        a[3, 5], b[7, 9] = math.nan, -math.inf  # row 3 NaN; column 9 -inf (relu: 0), and NaN at (3, 9)
        for method in ("pointer", "tma"):
            c = mm_k.matmul_triton(a, b, config=TILES[0], method=method)
            want = torch.relu(a.double() @ b.double())
            assert torch.equal(torch.isnan(c), torch.isnan(want)), (dtype, method)
            assert_matches(c, want, MM_TOL[dtype], what=f"matmul relu NaN {method}")


def test_matmul_relu_asks_for_nan_propagation():
    """The interpreter's max propagates NaN whatever the flag says, so on the CPU only the source shows the GPU's
    ReLU keeps NaN: every ReLU in the matmul kernels passes propagate_nan=ALL."""
    import inspect
    import re

    calls = re.findall(r"tl\.maximum\(acc, 0\.0[^)]*\)", inspect.getsource(mm_k))
    assert len(calls) >= 2 and all("propagate_nan=tl.PropagateNan.ALL" in c for c in calls), calls


# ---------------------------------------------------------------------------------------------------------------------
# LayerNorm and RMSNorm
NORM_TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}
VEC_SPECIALS = ("inf", "-inf", "nan", "0", "1e30", "max", "subnormal", "tiniest")


@st.composite
def norm_cases(draw, with_bias: bool):
    dtype = draw(st.sampled_from(DTYPES))
    r, c = draw(ROWS), draw(COLS)
    x = draw(mats(r, c))
    vecs = tuple(
        Vec(c, seed=draw(SEEDS), centre=centre, layout=draw(st.sampled_from(["contiguous", "strided", "broadcast"])),
            specials=draw(specials(VEC_SPECIALS, max_size=2))) for centre in ((1.0, 0.0) if with_bias else (1.0, )))
    blocks = [b for b in (16, 32, 64, 128) if ON_GPU or r * max(1, math.ceil(c / b)) <= MAX_PROGRAMS]
    kw = {"block_size": draw(st.sampled_from([None] + blocks))}
    if not with_bias:
        kw.update(reload=draw(st.sampled_from([None, False, True])), full=draw(st.sampled_from([None, False, True])))
    return Case(dtype, (x, ) + vecs, kw)


def layernorm_oracle(x, w, b, eps):
    """(expected, scale, either, skip) for LayerNorm in fp32 statistics, per row:
    - rows with a non-finite x: torch's float64 LayerNorm (NaN rows);
    - finite rows whose fp32 sum of squared deviations overflows (> 4x fp32's max, its mean safely in range):
      rstd = rsqrt(inf) = 0, so y = (x - mean) * 0 * w + b (the bias; NaN where w is +-inf);
    - finite rows within a factor of 4 of overflowing an fp32 sum: not checked (rounding and order decide);
    - the rest: float64 LayerNorm, error ~ eps |w| rstd (|x - mean| + mean |x|) + eps |b|."""
    x64, w64, b64 = x.double(), w.double(), b.double()
    n = x.shape[1]
    mean = x64.mean(dim=1, keepdim=True)
    d = x64 - mean
    m2 = (d * d).sum(dim=1, keepdim=True)
    rstd = 1 / torch.sqrt(m2 / n + eps)
    want = d * rstd * w64 + b64
    finite = torch.isfinite(x64).all(dim=1, keepdim=True)
    mag = x64.abs().sum(dim=1, keepdim=True)
    overflow = finite & (mag <= ACC_MAX / 4) & (m2 > 4 * ACC_MAX)
    skip = finite & ~overflow & ((mag > ACC_MAX / 4) | (m2 > ACC_MAX / 4))
    want = torch.where(overflow, d * 0.0 * w64 + b64, want)
    scale = w64.abs() * _finite_or_one(rstd) * (d.abs() + mag / n) + b64.abs()
    either = ~torch.isfinite(w64)  # inf * (x - mean): inf or, where x == mean in one precision only, NaN
    return want, scale, either, skip


def rmsnorm_oracle(x, w, eps):
    """As layernorm_oracle, for y = x rsqrt(mean(x^2) + eps) w: overflowing rows give x * 0 * w (zeros, as torch's
    float32 F.rms_norm gives); error ~ eps |x| rstd |w|."""
    x64, w64 = x.double(), w.double()
    n = x.shape[1]
    ss = (x64 * x64).sum(dim=1, keepdim=True)
    rstd = 1 / torch.sqrt(ss / n + eps)
    want = x64 * rstd * w64
    finite = torch.isfinite(x64).all(dim=1, keepdim=True)
    overflow = finite & (ss > 4 * ACC_MAX)
    skip = finite & ~overflow & (ss > ACC_MAX / 4)
    want = torch.where(overflow, x64 * 0.0 * w64, want)
    return want, x64.abs() * _finite_or_one(rstd) * w64.abs(), None, skip


@settings(BASE)
@given(case=norm_cases(with_bias=True))
def test_layernorm_matches_torch(case):
    x, w, b = case.build()
    y = ln_k.layernorm_triton(x, w, b, **case.kw)
    assert y.shape == x.shape and y.dtype == x.dtype
    want, scale, either, skip = layernorm_oracle(x, w, b, ln_k.EPS)
    assert_matches(y, want, NORM_TOL[case.dtype], scale=scale, either=either, skip=skip, what="layernorm")


@settings(BASE)
@given(case=norm_cases(with_bias=False))
def test_rmsnorm_matches_torch(case):
    x, w = case.build()
    y = rms_k.rmsnorm_triton(x, w, **case.kw)
    assert y.shape == x.shape and y.dtype == x.dtype
    want, scale, either, skip = rmsnorm_oracle(x, w, rms_k.EPS)
    assert_matches(y, want, NORM_TOL[case.dtype], scale=scale, either=either, skip=skip, what="rmsnorm")


@pytest.mark.parametrize("block_size", [None, 16], ids=["held", "tiled"])
def test_norms_of_rows_past_fp32_statistics(block_size):
    """Encoded, not a bug: the statistics are fp32 (as torch's are for float32 input). A float32 row holding 1e30
    overflows its sum of squares; rstd = rsqrt(inf) = 0, so LayerNorm returns the bias and RMSNorm zeros (torch's
    float32 F.rms_norm: zeros too; F.layer_norm: NaN). float16 rows are far from it (65504^2 fits fp32)."""
    x = torch.tensor([[1e30] + [1.0, -2.0, 3.0] * 7, [1.0, 2.0] * 11], device=DEVICE)
    w = torch.full((22, ), 2.0, device=DEVICE)
    b = torch.linspace(-1, 1, 22, device=DEVICE)
    y = ln_k.layernorm_triton(x, w, b, block_size=block_size)
    assert torch.equal(y[0], b)
    assert_matches(y[1:], F.layer_norm(x[1:].double(), (22, ), w.double(), b.double(), ln_k.EPS), NORM_TOL["float32"])
    r = rms_k.rmsnorm_triton(x, w, block_size=block_size)
    assert torch.equal(r[0], torch.zeros(22, device=DEVICE))
    assert torch.equal(F.rms_norm(x[:1], (22, ), w, rms_k.EPS), r[:1])


# ---------------------------------------------------------------------------------------------------------------------
# What the wrappers cannot compute, they refuse with a clear error (never a wrong answer)
@pytest.mark.parametrize("dtype", [torch.float64, torch.int32])
def test_wrappers_refuse_unsupported_dtypes(dtype):
    x = torch.ones((4, 8), device=DEVICE).to(dtype)
    w = torch.ones((8, ), device=DEVICE).to(dtype)
    calls = {
        "vecadd": lambda: vecadd_k.vecadd_triton(x, x),
        "saxpy": lambda: saxpy_k.saxpy_triton(2.0, x, x),
        "gelu": lambda: gelu_k.gelu_triton(x),
        "softmax": lambda: sm_k.softmax_forward(x),
        "softmax bwd": lambda: sm_k.softmax_backward(x, x),
        "rowsum": lambda: rowsum_k.rowsum_triton(x),
        "matmul": lambda: mm_k.matmul_triton(x, x.t()),
        "layernorm": lambda: ln_k.layernorm_triton(x, w, w),
        "rmsnorm": lambda: rms_k.rmsnorm_triton(x, w)
    }
    for name, call in calls.items():
        with pytest.raises(TypeError):
            call()
