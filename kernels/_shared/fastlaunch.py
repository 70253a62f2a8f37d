"""One launch cache for the Triton wrappers: from a Python loop a call costs its launch, not Triton's dispatch.

kernel[grid](...) binds, specialises and hashes every argument at each call: 12.5-15 us a call on the H200 (triton
3.6), against 5.6 us for the compiled kernel's launcher and 6.9 us for torch.add. A wrapper keys each call; the
key's first call launches through kernel[grid] and the cache keeps its CompiledKernel, grid, integers and constexprs;
later calls skip the wrapper's checks and call the launcher (_Entry). A key must decide Triton's specialisation:
each pointer's dtype and data_ptr() % 16 == 0 (a kernel compiled for an aligned pointer moves 16-byte vectors: on a
tensor sliced one element in, a silent wrong answer), each integer's width, == 1 and % 16 == 0, every constexpr. So
it holds spec() of each input and the wrapper's options; the integers follow from it and are replayed from the first
call, the per-call head is tensors (their alignment keyed) and floats (never specialised), and fresh outputs are
aligned (torch's allocators: >= 256 bytes). Where the raw launch cannot be trusted, Triton's dispatch runs instead.
"""
from __future__ import annotations

import inspect
from contextlib import contextmanager

import torch
import triton
from triton.runtime.autotuner import Heuristics
from triton.runtime.jit import JITFunction

from rooflab.triton_utils import interpreting

TESTED_TRITON = ((3, 6), (3, 7))  # the launcher call below is read from the source of both
MAX_ENTRIES = 1024  # per cache; a full cache starts again empty (a sweep's keys: a few dozen)
# Not followed on a kept launch: a later change of knobs.runtime.debug (Triton would compile a debug variant) and
# Triton's check that a global a kernel reads is unchanged (ours read constants). One Python thread launches.

_caches: list["LaunchCache"] = []
_override: str | None = None  # "off" (disabled()), "replay" (replaying()), "stand-in"; None: raw where it can be
_raw_state: dict = {}  # "reason": None where the raw launch can be used, else why not (decided once per process)
# Triton's pieces an entry reads at each raw launch, set where the raw launch can be used (module globals: cheap)
_runtime = _HookChain = _current_device = _current_stream = None
_stand_in = None  # the stand-in CompiledKernel of standing_in()


def spec(t: torch.Tensor) -> tuple:
    """What a key needs of one input tensor: its shape, strides, dtype, device (its index, -1 for the CPU: cheaper
    than t.device) and whether its address is 16-byte aligned (Triton specialises a pointer on it; the module
    docstring says why it must be in the key)."""
    return t.shape, t.stride(), t.dtype, t.get_device(), t.data_ptr() % 16 == 0


def raw_launch_reason() -> str | None:
    """None where an entry may call the compiled kernel's launcher itself, else why not (once per process): under
    TRITON_INTERPRET=1 nothing is compiled; another Triton may call its launcher otherwise; or its driver or knobs
    differ. Where it is not None, no entry is kept and every call takes kernel[grid] as before the cache."""
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
    if device is torch.cuda.current_device:  # the same less its lazy-init check: an entry's first call set CUDA up
        device = getattr(torch._C, "_cuda_getDevice", device)
    _runtime, _HookChain, _current_device, _current_stream = knobs.runtime, HookChain, device, stream
    return None


def hooks_idle() -> bool:
    """No launch hook is set (in triton 3.6 and 3.7 each is a HookChain, idle when it holds no call)."""
    enter, leave = _runtime.launch_enter_hook, _runtime.launch_exit_hook
    return ((enter is None or (enter.__class__ is _HookChain and not enter.calls))
            and (leave is None or (leave.__class__ is _HookChain and not leave.calls)))


def _mode() -> str:
    if _override is not None:
        return "raw" if _override == "stand-in" else _override
    return "raw" if raw_launch_reason() is None else "off"


class _Entry:
    """One key's launch. Raw: ``run(grid_x, grid_y, grid_z, stream, function, packed_metadata, launch_metadata,
    enter_hook, exit_hook, *every_argument)`` (constexprs included: the launcher skips them), as JITFunction.run and
    CompiledKernel.__getitem__ call it in triton 3.6 and 3.7, on the current stream (graph capture and stream
    contexts see it), with no launch metadata and no hooks. Else, when a launch hook is set (a profiler listens),
    the JITFunction's run is wrapped (experiments/compiled.py records launches so) or the current device is not the
    one the kernel was loaded on (or no raw launch: ``replaying()``), Triton's own dispatch with the first call's
    grid, integers and constexprs and this call's head."""

    __slots__ = ("kernel", "grid", "args", "kwargs", "run", "raw_grid", "function", "packed", "tail", "device",
                 "jit_dict", "extra")  # extra: what the wrapper keeps beside the launch (matmul: its TMA descriptors)

    def __call__(self, *head):
        if self.run is not None and "run" not in self.jit_dict and _current_device() == self.device and hooks_idle():
            self.run(*self.raw_grid, _current_stream(self.device), self.function, self.packed, None, None, None, *head,
                     *self.tail)
        else:  # Triton's own dispatch, as the first call launched (its grid a function of the config an autotuner
            self.kernel[self.grid](*head, *self.args, **self.kwargs)  # picks, which may differ), with this head


class LaunchCache:
    """key -> the launch of one wrapper's kernel for that key; ``get(key)`` (one dict lookup) is a hit's only cost
    before the launch. A wrapper: ``launch = cache.get(key)``; on a hit allocate the output and ``launch(*head)``;
    on a miss check, choose and ``cache.launch(key, kernel, grid, args, kwargs, n_head)``. An input the wrapper
    copied (a strided operand made contiguous) launches with ``key=None``: a hit would launch on the original."""

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

    def keep(self, key, launch) -> None:
        """Keep a callable under ``key`` that launches as an entry does (``launch(*head)``), e.g. two kept entries
        run one after the other (kernels/_shared/rows.SplitLaunch: a split row's two phases)."""
        if len(self._entries) >= MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = launch

    def launch(self, key, kernel, grid, args: tuple, kwargs: dict | None = None, n_head: int = 0):
        """Launch ``kernel[grid](*args, **kwargs)``; keep the launch under ``key`` (None: keep nothing) and return
        its entry (None where none was kept). The first ``n_head`` args (tensors, floats, tensor descriptors) are
        given again at each hit; the rest must follow from the key."""
        kwargs = kwargs or {}
        compiled = kernel[grid](*args, **kwargs)
        self.misses += 1
        mode = _mode()
        if _override == "stand-in":
            compiled = _stand_in
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
    constexprs, heuristics = dict(kwargs), []
    jit = kernel
    while hasattr(jit, "best_config") or isinstance(jit, Heuristics):  # the wrappers, outermost first
        if isinstance(jit, Heuristics):  # its values, computed below from the launch's arguments as its run() does
            heuristics.append(jit.values)
        else:  # an Autotuner: the config it launched
            constexprs.update(jit.best_config.kwargs)
        jit = jit.fn
    if not isinstance(jit, JITFunction) and not (_override == "stand-in" and hasattr(jit, "rewrite")):
        raise TypeError(f"{type(jit).__name__} is no JITFunction (a wrapper this cache does not take apart)")
    if getattr(jit, "pre_run_hooks", None) or getattr(_runtime, "add_stages_inspection_hook", None):
        raise RuntimeError("a pre-run or pipeline-inspection hook: every launch must go through JITFunction.run")
    params = list(inspect.signature(jit.fn).parameters.values())
    if len(args) > len(params):
        raise TypeError(f"{len(args)} arguments for {len(params)} parameters")
    for values in heuristics:  # a heuristic reads the arguments by name (the key decides them, as it decides shapes)
        for name, heur in values.items():  # in order, each seeing the ones before it, as Heuristics.run
            constexprs[name] = heur({**dict(zip((p.name for p in params), args)), **constexprs})
    rest = [constexprs[p.name] if p.name in constexprs else p.default for p in params[len(args):]]
    if any(value is inspect.Parameter.empty for value in rest):
        raise TypeError("a parameter with no value and no default")
    bound = [*args, *rest]
    launched = grid(dict(zip((p.name for p in params), bound))) if callable(grid) else grid  # as JITFunction.run
    entry.raw_grid = (*launched, *(1, ) * (3 - len(launched)))
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
    """Within: every call takes ``kernel[grid](...)``, as before the cache (scripts/bench_host.py times it so; the
    caches are emptied on entry and exit)."""
    return _mode_set("off")


def replaying():
    """Within: entries are kept wherever the raw launch cannot be used (the interpreter) and replayed through
    ``kernel[grid]`` with the first call's plan, so a key that misses something gives a wrong answer a test sees."""
    return _mode_set("replay")


@contextmanager
def standing_in(compiled):
    """Within (CPU tensors under the interpreter: tests, scripts/bench_wrapper_overhead.py): a launch computes
    through ``kernel[grid]`` and keeps a raw entry on ``compiled`` (a stand-in CompiledKernel: function,
    packed_metadata, run), with Triton's device, stream and hooks stood in for, so a hit takes the raw path as on a
    GPU and calls ``compiled.run``. The caches are emptied on entry and exit."""
    global _runtime, _HookChain, _current_device, _current_stream, _stand_in
    saved = _runtime, _HookChain, _current_device, _current_stream, _stand_in
    _runtime, _HookChain = type("Runtime", (), {"launch_enter_hook": None, "launch_exit_hook": None})(), type(None)
    _current_device, _current_stream, _stand_in = (lambda: 0), (lambda device: 0), compiled
    try:
        with _mode_set("stand-in"):
            yield
    finally:
        _runtime, _HookChain, _current_device, _current_stream, _stand_in = saved
