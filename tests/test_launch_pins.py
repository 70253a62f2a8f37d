"""Every launch parameter the Triton wrappers choose, pinned for a grid of shapes and dtypes (issue #26).

Each wrapper runs with its kernels replaced by a recorder (nothing is computed, so large rows cost nothing) and the
recorded launches -- grid, constexprs, num_warps, maxnreg, scalar arguments, strides -- must equal
tests/launch_pins.json, recorded from the code before the launch tables moved to the kernel's table.py. The GPU-only
choices the CPU wrappers cannot reach (LayerNorm's weight prefetch, the matmul configs and the CUDA sources) are
pinned through the functions that make them. A deliberate launch change re-records the file:
``python tests/test_launch_pins.py --record``, and the diff shows what moved.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")  # run as a script too (conftest.py sets it under pytest)

import torch

PINS = Path(__file__).with_name("launch_pins.json")
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
ROW_COLS = (1, 17, 100, 256, 1000, 1024, 1025, 1793, 2048, 2049, 3000, 4096, 4097, 5000, 8192, 8193, 12000, 16384,
            16385, 20000, 32768, 65536)
ROW_COUNTS = (1, 5, 64)
ELEMENTWISE_SHAPES = ((1, 1), (1, 5000), (3, 17), (7, 33), (64, 1793), (128, 1024), (1024, 1024), (300, 2049),
                      (1793, 1793), (2048, 2048))


def _value(v):
    if isinstance(v, torch.Tensor):
        return f"tensor{tuple(v.shape)}/{v.stride()}/{str(v.dtype).removeprefix('torch.')}"
    if isinstance(v, torch.dtype):
        return str(v)
    if hasattr(v, "block_shape"):  # a TMA tensor descriptor
        return {"base": _value(v.base), "shape": list(v.shape), "block_shape": list(v.block_shape)}
    return v


class Recorder:
    """Stands in for a JITFunction (or an autotuner): ``kernel[grid](*args, **kw)`` records the launch."""

    def __init__(self, name: str, log: list):
        self.name, self.log = name, log

    def __getitem__(self, grid):

        def launch(*args, **kw):
            try:
                shape = grid(kw) if callable(grid) else grid
            except KeyError:  # an autotuned launch: the grid needs the config the autotuner picks
                shape = None
            self.log.append({
                "kernel": self.name,
                "grid": list(shape) if shape is not None else None,
                "args": [_value(a) for a in args],
                "kw": {
                    k: _value(v)
                    for k, v in sorted(kw.items())
                }
            })

        return launch


def _recorded(module, names: tuple[str, ...], call) -> list:
    """The launches of call() with each kernel in ``names`` recorded instead, on ``module`` or, for a name it lacks,
    on the split modules (kernels/_shared/norm_split.py, kernels/softmax/shapes.py) that has it."""
    from kernels._shared import norm_split as _norm_split
    from kernels.softmax import shapes as _softmax_shapes

    log: list = []
    owner = {n: next(m for m in (module, _norm_split, _softmax_shapes) if hasattr(m, n)) for n in names}
    saved = {n: getattr(owner[n], n) for n in names}
    for n in names:
        setattr(owner[n], n, Recorder(n, log))
    try:
        call()
    except (ValueError, TypeError) as e:  # a refusal is pinned too
        log.append({"error": f"{type(e).__name__}: {e}"})
    finally:
        for n, v in saved.items():
            setattr(owner[n], n, v)
    return log


def _dt(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


SOFTMAX_FWD_KERNELS = ("_softmax_fwd_row_kernel", "_softmax_fwd_online_kernel", "softmax_fwd_aligned_kernel",
                       "softmax_fwd_rows_kernel", "_softmax_split_stats_kernel", "_softmax_split_apply_kernel")
SOFTMAX_BWD_KERNELS = ("_softmax_bwd_row_kernel", "_softmax_bwd_tiled_kernel", "softmax_bwd_rows_kernel")


def _row_cases():
    for dtype in DTYPES:
        for cols in ROW_COLS:
            for rows in ROW_COUNTS:
                yield f"{_dt(dtype)}/{rows}x{cols}", torch.empty((rows, cols), dtype=dtype)
        for n in (256, 1024, 1793, 2048):  # square, as the sweep runs them
            yield f"{_dt(dtype)}/{n}x{n}", torch.empty((n, n), dtype=dtype)
        x = torch.empty((40, 66), dtype=dtype)
        yield f"{_dt(dtype)}/t40x66", x.t()
        yield f"{_dt(dtype)}/s40x66", x[:, ::2]


def record_rows() -> dict:
    from kernels import layernorm as ln
    from kernels import rmsnorm as rms
    from kernels import rowsum as rs
    from kernels import softmax as sm

    out = {}
    for case, x in _row_cases():
        n = x.shape[1]
        w = torch.empty((n, ), dtype=x.dtype)
        e = x.element_size()
        out[f"layernorm/{case}"] = _recorded(ln, ("_layernorm_fwd_kernel", ), lambda: ln.layernorm_triton(x, w, w))
        block, warps = ln.launch_params(n, e)
        out[f"layernorm.launch_options/{case}"] = [ln.launch_options(n, e, block, warps, p) for p in (False, True)]
        out[f"rmsnorm/{case}"] = _recorded(rms, ("_rmsnorm_fwd_kernel", "_rmsnorm_fwd_aligned_kernel"),
                                           lambda: rms.rmsnorm_triton(x, w))
        out[f"rowsum/{case}"] = _recorded(rs, ("_rowsum_kernel", ), lambda: rs.rowsum_triton(x))
        out[f"softmax.fwd/{case}"] = _recorded(sm, SOFTMAX_FWD_KERNELS, lambda: sm.softmax_forward(x))
        out[f"softmax.bwd/{case}"] = _recorded(sm, SOFTMAX_BWD_KERNELS, lambda: sm.softmax_backward(x, x))
    for dtype in DTYPES:  # the knobs tests and the lab turn
        x = torch.empty((3, 2048), dtype=dtype)
        w = torch.empty((2048, ), dtype=dtype)
        split = ("_norm_split_stats_kernel", "_norm_split_apply_kernel")  # kernels/_shared/norm_split.py's
        for kw in ({
                "block_size": 512
        }, {
                "block_size": 4096
        }, {
                "num_warps": 2
        }, {
                "block_size": 256,
                "num_warps": 8
        }, {
                "split": 512
        }, {
                "split": 0
        }):
            out[f"layernorm/{_dt(dtype)}/3x2048/{kw}"] = _recorded(ln, ("_layernorm_fwd_kernel", *split),
                                                                   lambda: ln.layernorm_triton(x, w, w, **kw))
        for kw in ({
                "block_size": 128
        }, {
                "reload": True
        }, {
                "reload": False
        }, {
                "full": True
        }, {
                "full": False
        }, {
                "block_size": 1024,
                "full": True
        }, {
                "num_warps": 32
        }, {
                "split": 512
        }, {
                "split": 0
        }):
            out[f"rmsnorm/{_dt(dtype)}/3x2048/{kw}"] = _recorded(rms, ("_rmsnorm_fwd_kernel", *split),
                                                                 lambda: rms.rmsnorm_triton(x, w, **kw))
        for kw in ({
                "block_m": 2
        }, {
                "block_n": 256
        }, {
                "num_warps": 1
        }, {
                "full": True
        }, {
                "full": False
        }, {
                "split": 1024
        }, {
                "split": 0
        }):
            out[f"rowsum/{_dt(dtype)}/3x2048/{kw}"] = _recorded(
                rs, ("_rowsum_kernel", "_rowsum_split_kernel", "_rowsum_combine_kernel", "_rowsum_split_once_kernel"),
                lambda: rs.rowsum_triton(x, **kw))
        for kw in ({"max_block": 256}, {"reload": True}, {"reload": False}, {"full": True}, {"num_warps": 2}):
            out[f"softmax.fwd/{_dt(dtype)}/3x2048/{kw}"] = _recorded(sm, SOFTMAX_FWD_KERNELS,
                                                                     lambda: sm.softmax_forward(x, **kw))
        out[f"softmax.bwd/{_dt(dtype)}/3x2048/max_block=256"] = _recorded(sm, SOFTMAX_BWD_KERNELS,
                                                                          lambda: sm.softmax_backward(x, x, 256))
    return out


def record_elementwise() -> dict:
    from kernels import gelu, saxpy, vecadd

    out = {}
    for dtype in DTYPES:
        for m, n in ELEMENTWISE_SHAPES:
            x = torch.empty((m, n), dtype=dtype)
            for view, v in (("", x), ("t", x.t()), ("s", x[:, ::2])):
                if v.numel() == 0:
                    continue
                case = f"{_dt(dtype)}/{view}{m}x{n}"
                out[f"vecadd/{case}"] = _recorded(vecadd, ("_vecadd_kernel", ), lambda: vecadd.vecadd_triton(v, v))
                out[f"saxpy/{case}"] = _recorded(saxpy, ("_saxpy_kernel", ), lambda: saxpy.saxpy_triton(0.5, v, v))
            case = f"{_dt(dtype)}/{m}x{n}"
            out[f"gelu/{case}"] = _recorded(gelu, ("_gelu_kernel", ), lambda: gelu.gelu_triton(x))
        x = torch.empty((1, 5000), dtype=dtype)
        for kw in ({"block_size": 256}, {"num_warps": 2}, {"one_row": False}):
            out[f"vecadd/{_dt(dtype)}/1x5000/{kw}"] = _recorded(vecadd, ("_vecadd_kernel", ),
                                                                lambda: vecadd.vecadd_triton(x, x, **kw))
        for kw in ({"block_size": 512}, {"num_warps": 2}, {"precise": True}):
            out[f"gelu/{_dt(dtype)}/1x5000/{kw}"] = _recorded(gelu, ("_gelu_kernel", ),
                                                              lambda: gelu.gelu_triton(x, **kw))
    return out


def _config(c) -> dict:
    return {
        "kwargs": dict(c.kwargs),
        "num_stages": c.num_stages,
        "num_warps": c.num_warps,
        "pre_hook": getattr(c.pre_hook, "__name__", None)
    }


def record_matmul() -> dict:
    from kernels import matmul as mm

    names = ("_matmul_kernel", "_matmul_kernel_autotuned", "_matmul_tma_kernel", "_matmul_tma_autotuned")
    out = {
        "matmul/configs": [_config(c) for c in mm.get_matmul_configs()],
        "matmul/tma_configs": [_config(c) for c in mm.get_tma_configs()],
        "matmul/constants": {
            "TMA_MIN_MNK": mm.TMA_MIN_MNK,
            "SMEM_LIMIT_BYTES": mm.SMEM_LIMIT_BYTES
        }
    }
    for e in (2, 4):
        a = torch.empty((8, 8), dtype=torch.float32 if e == 4 else torch.bfloat16)
        out[f"matmul/pruned/{e}"] = [_config(c) for c in mm._prune_configs(mm.get_matmul_configs(), {"a_ptr": a})]
    for dtype in DTYPES:
        for m, n, k in ((16, 16, 16), (64, 48, 100), (128, 128, 128)):
            a, b = torch.empty((m, k), dtype=dtype), torch.empty((k, n), dtype=dtype)
            for kw in ({}, {
                    "method": "pointer"
            }, {
                    "method": "tma"
            }, {
                    "activation": "none"
            }, {
                    "config": {
                        "BLOCK_M": 16,
                        "BLOCK_N": 16,
                        "BLOCK_K": 16,
                        "GROUP_M": 3,
                        "num_warps": 2
                    }
            }):
                out[f"matmul/{_dt(dtype)}/{m}x{n}x{k}/{kw}"] = _recorded(mm, names,
                                                                         lambda: mm.matmul_triton(a, b, **kw))
    return out


def record_sources() -> dict:
    from kernels import gelu, softmax

    digest = lambda s: hashlib.sha256(s.strip().encode()).hexdigest()  # noqa: E731
    return {
        "cuda/gelu": [digest(gelu.CUDA_SOURCE), digest(gelu.CPP_SOURCE)],
        "cuda/softmax": [digest(softmax.CUDA_SOURCE), digest(softmax.CPP_SOURCE)]
    }


def record() -> dict:
    pins = record_rows() | record_elementwise() | record_matmul() | record_sources()
    return json.loads(json.dumps(pins))  # tuples as lists, as the file has them


def _compare(group):
    want = json.loads(PINS.read_text())
    got = json.loads(json.dumps(group()))
    missing = [k for k in got if k not in want]
    assert not missing, f"cases with no pin: {missing[:5]} (re-record on purpose: tests/test_launch_pins.py --record)"
    moved = [k for k in got if got[k] != want[k]]
    assert not moved, "launch moved for " + "; ".join(f"{k}: {want[k]} -> {got[k]}" for k in moved[:3])


def test_row_kernels_launch_as_pinned():
    _compare(record_rows)


def test_elementwise_kernels_launch_as_pinned():
    _compare(record_elementwise)


def test_matmul_launches_as_pinned():
    _compare(record_matmul)


def test_cuda_sources_as_pinned():
    _compare(record_sources)


def test_every_pin_is_checked():
    assert set(json.loads(PINS.read_text())) == set(record())


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python tests/test_launch_pins.py --record   (rewrites tests/launch_pins.json)")
    pins = record()
    PINS.write_text("{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}"
                                       for k, v in sorted(pins.items())) + "\n}\n")  # one case a line: diffs by case
    print(f"wrote {PINS} ({len(pins)} cases)")
