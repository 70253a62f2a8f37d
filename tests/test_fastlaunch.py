"""The launch cache (kernels/_shared/fastlaunch.py) without a GPU.

Under the interpreter nothing is compiled, so the raw launch cannot run here: ``replaying()`` keeps each key's launch
and replays it through ``kernel[grid]`` with the first call's plan (grid, integers, constexprs), so a key that left
out something the launch depends on (a shape, a dtype, an alignment) gives a wrong answer these tests see. The raw
launch's own decisions (the launcher call it builds, when it steps aside) are checked on a stand-in compiled kernel.
scripts/bench_host.py checks the raw launch on a GPU.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction

from kernels._shared import fastlaunch as fl
from kernels import gelu, layernorm, matmul, rmsnorm, rowsum, saxpy, softmax, vecadd

DTYPES = [(torch.float32, 1e-5), (torch.float16, 2e-3)]


def _unaligned(shape, dtype):
    """A tensor of ``shape`` whose data starts one element past an aligned allocation (data_ptr % 16 != 0)."""
    n = 1
    for d in shape:
        n *= d
    t = torch.randn(n + 1, dtype=torch.float32).to(dtype)[1:].view(shape)
    assert t.data_ptr() % 16 != 0
    return t


# (name, wrapper, reference, make(rows, cols, dtype, unaligned) -> args)
def _x(r, c, dt, un):
    return (_unaligned((r, c), dt) if un else torch.randn(r, c).to(dt), )


def _xy(r, c, dt, un):
    return (_x(r, c, dt, un)[0], torch.randn(r, c).to(dt))


def _xw(r, c, dt, un):
    return (_x(r, c, dt, un)[0], (1 + 0.1 * torch.randn(c)).to(dt))


def _xwb(r, c, dt, un):
    return (*_xw(r, c, dt, un), (0.1 * torch.randn(c)).to(dt))


def _ab(r, c, dt, un):
    return (_x(r, 24, dt, un)[0], torch.randn(24, c).to(dt))


CASES = [("gelu", gelu.gelu_triton, gelu.gelu_builtin, _x, gelu._LAUNCHES),
         ("vecadd", vecadd.vecadd_triton, vecadd.vecadd_builtin, _xy, vecadd._LAUNCHES),
         ("saxpy", lambda x, y: saxpy.saxpy_triton(1.5, x, y), lambda x, y: saxpy.saxpy_builtin(1.5, x, y), _xy,
          saxpy._LAUNCHES), ("softmax", softmax.softmax_triton, softmax.softmax_builtin, _x, softmax._FWD_LAUNCHES),
         ("softmax_backward", softmax.softmax_backward, lambda y, dy: y *
          (dy - (y * dy).sum(dim=1, keepdim=True)), _xy, softmax._BWD_LAUNCHES),
         ("layernorm", layernorm.layernorm_triton, layernorm.layernorm_builtin, _xwb, layernorm._LAUNCHES),
         ("rmsnorm", rmsnorm.rmsnorm_triton, rmsnorm.rmsnorm_builtin, _xw, rmsnorm._LAUNCHES),
         ("rowsum", rowsum.rowsum_triton, rowsum.rowsum_builtin, _x, rowsum._LAUNCHES),
         ("matmul", matmul.matmul_triton, matmul.matmul_builtin, _ab, matmul._LAUNCHES), ]


def _close(out, ref, tol):
    ref = ref.float()
    return torch.allclose(out.float(), ref, atol=tol * 8 * (1 + ref.abs().max().item()), rtol=tol * 8)


@pytest.mark.parametrize("name,fn,ref,make,cache", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtype,tol", DTYPES, ids=["fp32", "fp16"])
def test_kept_launch_matches_plain(name, fn, ref, make, cache, dtype, tol):
    """A hit replays the first call's plan with this call's tensors; a new shape, dtype or alignment is a new key."""
    torch.manual_seed(0)
    first = make(5, 40, dtype, False)
    plain = fn(*first)  # outside replaying(): the plain path, nothing kept
    with fl.replaying():
        assert len(cache) == 0
        kept = fn(*first)
        assert len(cache) == 1 and cache.misses == 1, cache.skipped
        again = make(5, 40, dtype, False)  # new tensors, same key: a hit
        hit = fn(*again)
        assert cache.misses == 1
        torch.testing.assert_close(kept, plain, atol=0, rtol=0)
        assert _close(hit, ref(*again), tol)
        for other in (make(3, 70, dtype, False),  # another shape
                      make(5, 40, torch.bfloat16 if dtype == torch.float32 else torch.float32, False),  # dtype
                      make(5, 40, dtype, True)):  # x one element past an aligned address
            out = fn(*other)
            assert _close(out, ref(*other), tol if other[0].dtype == dtype else 2e-2), name
        assert cache.misses == 4 and len(cache) == 4
    assert len(cache) == 0  # emptied on the way out


def test_nothing_kept_under_the_interpreter_by_default():
    x = torch.randn(4, 8)
    gelu.gelu_triton(x)
    gelu.gelu_triton(x)
    assert len(gelu._LAUNCHES) == 0 and gelu._LAUNCHES.misses == 2
    assert "TRITON_INTERPRET" in gelu._LAUNCHES.skipped


def test_copied_operands_keep_no_entry():
    """vecadd copies a strided 3-D operand contiguous: a hit would launch on the original, so nothing is kept."""
    x = torch.randn(2, 3, 8)[:, :, ::2]
    y = torch.randn(2, 3, 4)
    with fl.replaying():
        out = vecadd.vecadd_triton(x, y)
        assert len(vecadd._LAUNCHES) == 0 and vecadd._LAUNCHES.skipped == "no key"
    torch.testing.assert_close(out, x + y)


def test_spec_holds_alignment():
    t = torch.randn(64)  # float32: 4 bytes an element
    assert fl.spec(t)[-1] and not fl.spec(t[1:])[-1] and fl.spec(t[4:])[-1]  # 16 bytes in: aligned again


def test_the_table_swap_is_a_new_key(monkeypatch):
    """The lab swaps launch tables between calls: the key holds them by id, so a swap never reuses a stale plan."""
    x = torch.randn(3, 4096)  # rows RELOAD_MIN_COLS names for fp32
    with fl.replaying():
        rmsnorm.rmsnorm_triton(x, torch.ones(4096))
        monkeypatch.setattr(rmsnorm, "RELOAD_MIN_COLS", {})
        rmsnorm.rmsnorm_triton(x, torch.ones(4096))
        assert rmsnorm._LAUNCHES.misses == 2


def test_fallback_decision(monkeypatch):
    assert "TRITON_INTERPRET" in fl._why_not_raw()
    monkeypatch.setattr(fl, "interpreting", lambda: False)
    monkeypatch.setattr(triton, "__version__", "3.5.1")
    assert "3.5.1" in fl._why_not_raw()
    monkeypatch.setattr(triton, "__version__", "4.0.0")
    assert "untested" in fl._why_not_raw()


@pytest.mark.parametrize("version", ["3.6.0", "3.7.1"])
def test_the_tested_tritons_take_the_raw_launch(monkeypatch, version):
    """On a GPU (stood in for: no driver here) each tested Triton takes the raw launch, with its own runtime knobs and
    its driver's device and stream."""
    from triton import knobs
    from triton.runtime.driver import driver

    for name in ("_runtime", "_HookChain", "_current_device", "_current_stream"):
        monkeypatch.setattr(fl, name, getattr(fl, name))  # restored afterwards
    device, stream = (lambda: 0), (lambda idx: 1234)
    monkeypatch.setattr(driver, "_active", SimpleNamespace(get_current_device=device, get_current_stream=stream))
    monkeypatch.setattr(fl, "interpreting", lambda: False)
    monkeypatch.setattr(triton, "__version__", version)
    assert fl._why_not_raw() is None
    assert fl._runtime is knobs.runtime and fl._current_device is device and fl._current_stream is stream
    assert fl.hooks_idle()


# ---- the raw launch on a stand-in compiled kernel ----------------------------------------------------------------


@triton.jit
def _probe_kernel(x_ptr, y_ptr, a, n, stride, BLOCK: tl.constexpr, FLAG: tl.constexpr = False, extra=7,
                  LAST: tl.constexpr = 3):
    pass


class _Compiled:
    """Stands in for a CompiledKernel: ``run`` records the launcher call."""

    function, packed_metadata = 1234, ("packed", )

    def __init__(self):
        self.calls = []

    def run(self, *args):
        self.calls.append(args)


class _Chain:  # a HookChain

    def __init__(self):
        self.calls = []


class _Runtime:

    def __init__(self):
        self.launch_enter_hook, self.launch_exit_hook = _Chain(), _Chain()


@pytest.fixture
def raw_state(monkeypatch):
    """_fastlaunch's view of Triton as on a GPU: device 0, stream 77, idle hook chains."""
    runtime = _Runtime()
    for name, value in (("_raw_state", {
            "reason": None
    }), ("_runtime", runtime), ("_HookChain", _Chain), ("_current_device", lambda: 0), ("_current_stream",
                                                                                        lambda device: 77)):
        monkeypatch.setattr(fl, name, value)
    return runtime


def _jit():
    """A JITFunction of _probe_kernel (under the interpreter triton.jit gives an InterpretedFunction)."""
    return JITFunction(_probe_kernel.fn)


def test_raw_launcher_call(raw_state):
    """Every argument in signature order, constexprs and defaults included, after the grid, stream, function,
    packed metadata and no launch metadata or hooks: CompiledKernel.__getitem__'s call in triton 3.6 and 3.7."""
    compiled, jit = _Compiled(), _jit()
    x, y = torch.zeros(4), torch.zeros(4)
    grid = lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]), )  # noqa: E731
    entry = fl._entry(jit, grid, (x, y, 2.0, 100, 1), {"BLOCK": 32, "num_warps": 4}, 3, compiled)
    assert entry.raw_grid == (4, 1, 1) and entry.tail == (100, 1, 32, False, 7, 3)
    x2, y2 = torch.ones(4), torch.ones(4)
    entry(x2, y2, 3.0)
    assert compiled.calls == [(4, 1, 1, 77, 1234, ("packed", ), None, None, None, x2, y2, 3.0, 100, 1, 32, False, 7, 3)]


def test_autotuned_config_joins_the_tail(raw_state):
    compiled, jit = _Compiled(), _jit()

    class Tuner:  # an Autotuner after its run: the chosen config and the kernel under it
        best_config = triton.Config({"BLOCK": 64, "FLAG": True}, num_warps=8)
        fn = jit

    entry = fl._entry(Tuner(), (5, ), (torch.zeros(1), torch.zeros(1), 1.0, 8, 1), {}, 3, compiled)
    assert entry.raw_grid == (5, 1, 1) and entry.tail == (8, 1, 64, True, 7, 3)


def test_a_heuristic_joins_the_tail_computed_from_the_launch(raw_state):
    """An Autotuner over a Heuristics (FlashAttention-2's EVEN): the heuristic's value is computed, as its run()
    computes it, from the arguments by name and the chosen config, and replayed with the constexprs."""
    from triton.runtime.autotuner import Heuristics

    compiled, jit = _Compiled(), _jit()
    heur = Heuristics(jit, [p.name for p in jit.params], {"FLAG": lambda a: a["n"] % a["BLOCK"] == 0})

    class Tuner:
        best_config = triton.Config({"BLOCK": 64})
        fn = heur

    args = (torch.zeros(1), torch.zeros(1), 1.0, 128, 1)
    assert fl._entry(Tuner(), (5, ), args, {}, 3, compiled).tail == (128, 1, 64, True, 7, 3)
    assert fl._entry(Tuner(), (5, ), (*args[:3], 100, 1), {}, 3, compiled).tail == (100, 1, 64, False, 7, 3)


class _Replayed(JITFunction):
    """A JITFunction whose ``kernel[grid](...)`` is recorded instead of run."""

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.replays.append((grid, args, kwargs))


def test_steps_aside_for_hooks_instrumentation_and_devices(raw_state, monkeypatch):
    """A launch hook, a wrapped JITFunction.run or another current device: the entry replays through kernel[grid]."""
    compiled = _Compiled()
    jit = _Replayed(_probe_kernel.fn)
    jit.replays = []
    args, kwargs = (torch.zeros(4), torch.zeros(4), 2.0, 100, 1), {"BLOCK": 32}
    entry = fl._entry(jit, (4, ), args, kwargs, 3, compiled)
    head = (torch.ones(4), torch.ones(4), 5.0)
    entry(*head)
    assert len(compiled.calls) == 1 and not jit.replays

    raw_state.launch_enter_hook.calls.append(print)  # a profiler listening
    assert not fl.hooks_idle()
    entry(*head)
    raw_state.launch_enter_hook.calls.clear()
    raw_state.launch_exit_hook = print  # a hook that is no chain
    entry(*head)
    raw_state.launch_exit_hook = None
    assert fl.hooks_idle()
    jit.run = lambda *a, **k: None  # experiments/compiled.py's LaunchRecorder wraps run per instance
    entry(*head)
    del jit.run
    monkeypatch.setattr(fl, "_current_device", lambda: 1)
    entry(*head)
    assert len(compiled.calls) == 1
    assert jit.replays == [((4, ), (*head, 100, 1), kwargs)] * 4  # the grid as given: an autotuner may re-choose


def test_a_launch_it_cannot_take_apart_keeps_no_entry(raw_state):
    compiled, jit = _Compiled(), _jit()
    with pytest.raises(TypeError, match="head"):  # an int in the head: Triton specialises ints, a head is not keyed
        fl._entry(jit, (1, ), (torch.zeros(1), torch.zeros(1), 1.0, 8, 1), {"BLOCK": 8}, 4, compiled)
    with pytest.raises(TypeError, match="no value"):  # BLOCK missing
        fl._entry(jit, (1, ), (torch.zeros(1), torch.zeros(1), 1.0, 8, 1), {}, 3, compiled)
    with pytest.raises(TypeError, match="JITFunction"):
        fl._entry(object(), (1, ), (torch.zeros(1), ), {}, 1, compiled)


def test_standing_in_takes_the_raw_path_on_cpu():
    """standing_in() (scripts/bench_wrapper_overhead.py): a first call computes and keeps a raw entry on the stand-in;
    a hit calls its launcher with this call's tensors and allocates the output as the first call did."""
    compiled = _Compiled()
    x, w = torch.randn(5, 300), 1 + 0.1 * torch.randn(300)  # 300 columns: one program a row (shorter are packed)
    with fl.standing_in(compiled):
        first = rmsnorm.rmsnorm_triton(x, w)
        assert len(rmsnorm._LAUNCHES) == 1 and not compiled.calls, rmsnorm._LAUNCHES.skipped
        x2 = torch.randn(5, 300)
        out = rmsnorm.rmsnorm_triton(x2, w)
        (call, ) = compiled.calls
        assert call[:9] == (5, 1, 1, 0, 1234, ("packed", ), None, None, None)
        assert call[9] is x2 and call[10] is w and call[11] is out and rmsnorm._LAUNCHES.misses == 1
        assert out.shape == first.shape and out.stride() == first.stride() and out.dtype == first.dtype
    assert len(rmsnorm._LAUNCHES) == 0 and fl._current_device is None  # Triton's pieces as they were
    torch.testing.assert_close(first, rmsnorm.rmsnorm_builtin(x, w))


@pytest.mark.parametrize("name,fn,ref,make,cache", [c for c in CASES if c[0] in ("softmax", "layernorm", "rmsnorm")],
                         ids=["softmax", "layernorm", "rmsnorm"])
def test_a_hit_on_a_transposed_input_allocates_as_the_first_call(name, fn, ref, make, cache):
    """A hit allocates its output contiguous (empty_like with contiguous_format), as the miss path did, whatever x's
    strides: the kept launch replays the first output's strides."""
    torch.manual_seed(0)
    with fl.replaying():
        for _ in range(2):
            args = make(40, 24, torch.float32, False)
            args = (args[0].t(), *args[1:]) if name == "softmax" else (torch.randn(24, 40).t(), *args[1:])
            out = fn(*args)
            assert out.is_contiguous() and _close(out, ref(*args), 1e-5)
        assert cache.misses == 1 and len(cache) == 1


@pytest.mark.parametrize("tile", [None, 16])
def test_standing_in_the_norm_backward_hit_launches_raw(tile):
    """kernels/_shared/norm_bwd.py keeps a plan of raw entries: a hit calls the launcher once a launch (held rows one,
    column tiles two, then the partials' reduction) with this call's tensors at the head and allocates the gradients
    as the first call did."""
    from kernels._shared.norm_bwd import _LAUNCHES, norm_backward

    compiled = _Compiled()
    x, w, dy = torch.randn(7, 40), 1 + 0.1 * torch.randn(40), torch.randn(7, 40)
    with fl.standing_in(compiled):
        first = norm_backward(x, w, dy, 1e-5, True, True, tile=tile)
        assert not compiled.calls and _LAUNCHES.misses == (2 if tile is None else 3), _LAUNCHES.skipped
        x2, dy2 = torch.randn(7, 40), torch.randn(7, 40)
        dx, dw, db = norm_backward(x2, w, dy2, 1e-5, True, True, tile=tile)
        assert len(compiled.calls) == (2 if tile is None else 3)
        for call in compiled.calls[:-1]:  # (grid x, y, z, stream, function, packed, None, None, None, *head, *tail)
            assert [t.data_ptr() for t in call[9:12]] == [x2.data_ptr(), w.data_ptr(), dy2.data_ptr()]  # views
        parts, out = compiled.calls[-1][9:11]  # the reduction's head: this call's partials and gradients
        assert parts.data_ptr() == compiled.calls[-2][9 + (4 if tile is None else 5)].data_ptr()
        assert out.data_ptr() == dw.data_ptr() and db.data_ptr() == dw.data_ptr() + out.stride(0) * w.element_size()
        assert dx.shape == first[0].shape and dw.shape == db.shape == (40, ) and dw.dtype == w.dtype
    torch.testing.assert_close(first[0], norm_backward(x, w, dy, 1e-5, True, True, tile=tile)[0])
