"""The launch cache: from a Python loop, one of our Triton wrappers costs about its launch, not Triton's dispatch.

Why. From a Python loop on the H200 (triton 3.6), one small copy kernel cost 12.5-15 us a call through
``kernel[grid](...)`` (bind the arguments, specialise each one, hash the specialisation, find the compiled kernel,
build launch metadata), 8.2 us through the compiled kernel's own runner and 5.6 us through its launcher with the
launch metadata packed once; torch.add costs 6.9 us. Our wrappers added their checks and launch heuristics on top:
22-77 us a call against the builtins' 7-27 us (issue 23).

How. A wrapper builds a key from everything its launch depends on (``spec`` of each input tensor, its options, the
ids of the launch tables it reads) and asks ``cache.get(key)``: one dict lookup. On a miss it checks its inputs,
picks its launch as before and calls ``cache.launch(key, kernel, grid, args, kwargs, n_head)``, which launches
through ``kernel[grid](*args, **kwargs)`` (compiling, and for an autotuned kernel autotuning) and keeps what that
launch was: the CompiledKernel it returned (an autotuner's: the best config's), the grid, and every argument after
the first ``n_head``. On a hit the wrapper allocates its output and calls ``entry(*head)`` with this call's leading
arguments (pointers and floats), which calls the compiled kernel's launcher as JITFunction.run does at its end, in
triton 3.6 and 3.7 alike (python/triton/runtime/jit.py; CompiledKernel.__getitem__ in compiler/compiler.py)::

    compiled.run(grid_x, grid_y, grid_z, stream, compiled.function, compiled.packed_metadata,
                 launch_metadata, launch_enter_hook, launch_exit_hook, *every_argument_in_signature_order)

constexprs included (the launcher skips them), on the current device's current stream, read as Triton's driver reads
it (torch._C._cuda_getCurrentRawStream), so CUDA-graph capture and ``torch.cuda.stream`` contexts see the launch.

What a key must decide. A compiled kernel holds only for the specialisation Triton compiled it for: every constexpr;
each pointer's dtype and whether its address is 16-byte aligned (``data_ptr() % 16 == 0``: the kernel then moves
16-byte vectors); each integer's width (i32 or i64), whether it equals 1 (then a constant) and whether it is a
multiple of 16. A hit must imply the same specialisation, or a kernel compiled for an aligned pointer is launched on
an unaligned one (a tensor sliced at offset 1): a silent wrong answer, or a misaligned-address fault. So a key holds
each input's shape, strides, dtype, device and ``data_ptr() % 16`` (``spec``) and every option that shapes the launch;
every integer argument and constexpr is then a function of the key and is replayed from the first call, and the
per-call head holds only tensors (whose alignment the key holds) and Python floats (never specialised: always fp32).
Outputs are not in the key: each is a fresh allocation, which torch's allocators align to at least 256 bytes.
A wrapper that copied an input (a strided operand made contiguous) launches without keeping an entry (``key=None``).

When it steps aside. The raw launch is kept only where it is known to be right: a compiled kernel (not
TRITON_INTERPRET=1), a tested Triton (TESTED_TRITON), no pre-run or pipeline-inspection hook, and no exception while
setting it up; elsewhere nothing is kept and every call takes ``kernel[grid](...)`` as before. A kept entry replays its
first call through ``kernel[grid](...)`` (Triton's own dispatch, with this call's head) whenever a launch hook is set
(knobs.runtime.launch_enter_hook / launch_exit_hook: a profiler is listening), the JITFunction's ``run`` is wrapped
(experiments/compiled.py records the kernels a call launches that way) or the current device is not the one the
kernel was loaded on. ``disabled()`` turns the cache off (scripts/bench_host.py times the plain dispatch with it);
``replaying()`` keeps entries under the interpreter, replayed through ``kernel[grid]``, so the tests check the keys.

CUDA graphs. A kept launch runs on the current stream, so it is captured like any torch op; make the key's first
call (which may compile and autotune) outside the capture, on a side stream as torch.cuda.graphs asks::

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = gelu_triton(x)  # first call: compiles and keeps the launch
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = gelu_triton(x)  # the kept launch, recorded
    graph.replay()  # recomputes y from x's memory, no host cost but the replay's

Not followed: a change of knobs.runtime.debug after an entry was kept (Triton would compile a debug variant), and
Triton's check that a global a kernel reads has not changed since it compiled (ours read constants only). One
Python thread launches (the entries hold no lock, as the autotuner does not).
"""
from __future__ import annotations

import inspect
from contextlib import contextmanager

import torch
import triton

from triton.runtime.jit import JITFunction

from rooflab.triton_utils import interpreting

TESTED_TRITON = ((3, 6), (3, 7))  # launcher call read from the source of these, and run on the H200 (3.6)
MAX_ENTRIES = 1024  # per cache; a full cache starts again empty (a sweep's keys: a few dozen)

_caches: list["LaunchCache"] = []
_override: str | None = None  # "off" (disabled()) or "replay" (replaying()); None: raw where it can be used
_raw_state: dict = {}  # "reason": None where the raw launch can be used, else why not (decided once per process)
# Triton's pieces an entry reads at each raw launch, set where the raw launch can be used (module globals: cheap)
_runtime = _HookChain = _current_device = _current_stream = None


def spec(t: torch.Tensor) -> tuple:
    """What a key needs of one input tensor: its shape, strides, dtype, device and whether its address is 16-byte
    aligned (Triton specialises a pointer on it; the module docstring says why it must be in the key)."""
    return t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % 16 == 0


def raw_launch_reason() -> str | None:
    """None where an entry may call the compiled kernel's launcher itself, else why it may not (the fallback
    decision, once per process)."""
    if "reason" not in _raw_state:
        _raw_state["reason"] = _why_not_raw()
    return _raw_state["reason"]


def _why_not_raw() -> str | None:
    if interpreting():
        return "TRITON_INTERPRET=1: nothing is compiled"
    version = tuple(int(part) for part in triton.__version__.split(".")[:2] if part.isdigit())
    if version not in TESTED_TRITON:
        return f"triton {triton.__version__}: its launcher call is untested here (tested: {TESTED_TRITON})"
    global _runtime, _HookChain, _current_device, _current_stream
    try:
        from triton import knobs
        from triton.knobs import HookChain
        from triton.runtime.driver import driver

        # the device and stream JITFunction.run launches on (torch.cuda.current_device and
        # torch._C._cuda_getCurrentRawStream for CUDA)
        device, stream = driver.active.get_current_device, driver.active.get_current_stream
    except Exception as exc:  # noqa: BLE001  anything missing is an API that differs
        return f"triton's driver or knobs differ: {type(exc).__name__}: {exc}"
    _runtime, _HookChain, _current_device, _current_stream = knobs.runtime, HookChain, device, stream
    return None


def hooks_idle() -> bool:
    """No launch hook is set (in triton 3.6 and 3.7 each is a HookChain, idle when it holds no call)."""
    enter, leave = _runtime.launch_enter_hook, _runtime.launch_exit_hook
    return ((enter is None or (enter.__class__ is _HookChain and not enter.calls))
            and (leave is None or (leave.__class__ is _HookChain and not leave.calls)))


def _mode() -> str:
    if _override is not None:
        return _override
    return "raw" if raw_launch_reason() is None else "off"


class _Entry:
    """One key's launch: the raw launcher where it can be used, else ``kernel[grid]`` with the first call's plan."""

    __slots__ = ("kernel", "grid", "args", "kwargs", "run", "raw_grid", "function", "packed", "tail", "device",
                 "jit_dict", "extra")  # extra: what the wrapper keeps beside the launch (matmul: its TMA descriptors)

    def __call__(self, *head):
        if self.run is not None and "run" not in self.jit_dict and _current_device() == self.device and hooks_idle():
            self.run(*self.raw_grid, _current_stream(self.device), self.function, self.packed, None, None, None,
                     *head, *self.tail)
        else:  # Triton's own dispatch, as the first call launched (its grid a function of the config an autotuner
            self.kernel[self.grid](*head, *self.args, **self.kwargs)  # picks, which may differ), with this head


class LaunchCache:
    """key -> the launch of one wrapper's kernel for that key (see the module docstring); ``get`` is the hot path."""

    def __init__(self, name: str):
        self.name = name
        self._entries: dict = {}
        self.get = self._entries.get  # key -> entry or None: the one dict lookup of a hit
        self.misses = 0  # calls that launched through kernel[grid] (first calls and unkept launches)
        self.skipped: str | None = None  # why the last launch kept no entry
        _caches.append(self)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()  # the same dict: ``get`` stays bound to it
        self.misses, self.skipped = 0, None

    def launch(self, key, kernel, grid, args: tuple, kwargs: dict | None = None, n_head: int = 0):
        """Launch ``kernel[grid](*args, **kwargs)``; keep the launch under ``key`` (None: keep nothing) and return
        its entry (None where none was kept). The first ``n_head`` args (tensors, floats, tensor descriptors) are
        given again at each hit; the rest must follow from the key."""
        kwargs = kwargs or {}
        compiled = kernel[grid](*args, **kwargs)
        self.misses += 1
        mode = _mode()
        if key is None or mode == "off":
            self.skipped = "no key" if key is None else f"off: {_override or raw_launch_reason()}"
            return None
        try:
            entry = _entry(kernel, grid, args, kwargs, n_head, compiled if mode == "raw" else None)
        except Exception as exc:  # noqa: BLE001  a launch we cannot take apart keeps the plain path
            self.skipped = f"{type(exc).__name__}: {exc}"
            return None
        if len(self._entries) >= MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = entry
        return entry


def _entry(kernel, grid, args: tuple, kwargs: dict, n_head: int, compiled) -> _Entry:
    """The entry of one launch; raw (``compiled`` given) only where every piece the launcher needs is found."""
    for value in args[:n_head]:
        if not (isinstance(value, (torch.Tensor, float)) or hasattr(value, "block_shape")):
            raise TypeError(f"a head argument must be a tensor, a float or a tensor descriptor, not {type(value)}")
    entry = _Entry()
    entry.kernel, entry.args, entry.kwargs = kernel, args[n_head:], kwargs
    entry.grid, entry.run, entry.jit_dict, entry.extra = grid, None, {}, None
    if compiled is None:
        return entry
    constexprs = dict(kwargs)
    jit = kernel
    while hasattr(jit, "best_config"):  # an Autotuner: the config it launched, then the kernel under it
        constexprs.update(jit.best_config.kwargs)
        jit = jit.fn
    if not isinstance(jit, JITFunction):
        raise TypeError(f"{type(jit).__name__} is no JITFunction (a wrapper this cache does not take apart)")
    if getattr(jit, "pre_run_hooks", None) or getattr(_runtime, "add_stages_inspection_hook", None):
        raise RuntimeError("a pre-run or pipeline-inspection hook: every launch must go through JITFunction.run")
    params = list(inspect.signature(jit.fn).parameters.values())
    if len(args) > len(params):
        raise TypeError(f"{len(args)} arguments for {len(params)} parameters")
    rest = [constexprs[p.name] if p.name in constexprs else p.default for p in params[len(args):]]
    if any(value is inspect.Parameter.empty for value in rest):
        raise TypeError("a parameter with no value and no default")
    bound = [*args, *rest]
    launched = grid(dict(zip((p.name for p in params), bound))) if callable(grid) else grid  # as JITFunction.run
    entry.raw_grid = (*launched, *(1,) * (3 - len(launched)))
    entry.tail = tuple(bound[n_head:])
    entry.function, entry.packed = compiled.function, compiled.packed_metadata
    entry.device, entry.jit_dict = _current_device(), jit.__dict__
    entry.run = compiled.run  # last: a half-built entry never launches raw
    return entry


def total_misses() -> int:
    """Calls, over every cache, that launched through kernel[grid] (none while a loop runs on kept launches)."""
    return sum(cache.misses for cache in _caches)


def clear_all() -> None:
    for cache in _caches:
        cache.clear()


@contextmanager
def _mode_set(mode: str):
    global _override
    saved, _override = _override, mode
    clear_all()
    try:
        yield
    finally:
        _override = saved
        clear_all()


def disabled():
    """Within: every call takes ``kernel[grid](...)``, as before the cache (the caches are emptied on entry and
    exit)."""
    return _mode_set("off")


def replaying():
    """Within: entries are kept wherever the raw launch cannot be used (the interpreter) and replayed through
    ``kernel[grid]`` with the first call's plan, so a key that misses something gives a wrong answer a test sees."""
    return _mode_set("replay")
