"""GPU-only paths compiled for an H100/H200 (sm_90) here, without a GPU: the interpreter that runs the
other tests never executes the inline PTX of the weight prefetch, the WB_EARLY loads, the register cap, the norm
backward's programmatic dependent launch, or TF32 on a K-major B through TMA.

Triton compiles ahead of time for a named target (ASTSource + GPUTarget) with the ptxas its wheel ships; this runs
in a separate process, since the test session imports Triton with TRITON_INTERPRET=1.
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

COMPILE = r"""
import json, re, sys
sys.path.insert(0, sys.argv[1])
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernels.layernorm import _layernorm_fwd_kernel

out = {}
for name, dtype, block, early, prefetch, cap, full, align in [
        ("prefetch bf16", "bf16", 8192, False, True, 64, False, 1),
        ("early fp32", "fp32", 8192, True, False, None, False, 1),
        ("unmasked fp32 4096", "fp32", 4096, True, False, None, True, 1),
        ("masked fp32 4096", "fp32", 4096, True, False, None, False, 1)]:
    sig = {"x_ptr": "*" + dtype, "w_ptr": "*" + dtype, "b_ptr": "*" + dtype, "y_ptr": "*" + dtype, "n_cols": "i32",
           "stride_xm": "i32", "stride_xn": "i32", "stride_w": "i32", "stride_b": "i32", "stride_ym": "i32",
           "stride_yn": "i32", "eps": "fp32", "BLOCK_SIZE": "constexpr", "ONE_TILE": "constexpr",
           "WB_EARLY": "constexpr", "WB_PREFETCH": "constexpr", "W_LINE": "constexpr", "prefetch_programs": "i32",
           "FULL": "constexpr", "ALIGN": "constexpr"}
    consts = {"BLOCK_SIZE": block, "ONE_TILE": True, "WB_EARLY": early, "WB_PREFETCH": prefetch,
              "W_LINE": 64 if dtype == "bf16" else 32, "FULL": full, "ALIGN": align}
    options = {"num_warps": 8} | ({"maxnreg": cap} if cap else {})
    k = triton.compile(ASTSource(fn=_layernorm_fwd_kernel, signature=sig, constexprs=consts),
                       target=GPUTarget("cuda", 90, 32), options=options)
    ptx = k.asm["ptx"]
    out[name] = {"prefetch": ptx.count("prefetch.global.L2"), "maxnreg": ".maxnreg 64" in ptx,
                 "cubin": len(k.asm["cubin"]), "loads": ptx.count("ld.global"),
                 "predicated_loads": len(re.findall(r"@%p\d+ ld\.global", ptx))}
# As a launch specialises them: unit column strides, 16-byte aligned pointers; the row length and stride i32 (no
# multiple of 16, so Triton proves nothing of them) under ALIGN 1 and ALIGN 8 (bf16 rows of, say, 5000)
for align in (1, 8):
    sig = {"x_ptr": "*bf16", "w_ptr": "*bf16", "b_ptr": "*bf16", "y_ptr": "*bf16", "n_cols": "i32", "stride_xm": "i32",
           "stride_xn": "constexpr", "stride_w": "constexpr", "stride_b": "constexpr", "stride_ym": "i32",
           "stride_yn": "constexpr", "eps": "fp32", "BLOCK_SIZE": "constexpr", "ONE_TILE": "constexpr",
           "WB_EARLY": "constexpr", "WB_PREFETCH": "constexpr", "W_LINE": "constexpr", "prefetch_programs": "i32",
           "FULL": "constexpr", "ALIGN": "constexpr"}
    consts = {"stride_xn": 1, "stride_w": 1, "stride_b": 1, "stride_yn": 1, "BLOCK_SIZE": 8192, "ONE_TILE": True,
              "WB_EARLY": True, "WB_PREFETCH": False, "W_LINE": 64, "FULL": False, "ALIGN": align}
    k = triton.compile(ASTSource(fn=_layernorm_fwd_kernel, signature=sig, constexprs=consts,
                                 attrs={(i,): [["tt.divisibility", 16]] for i in range(4)}),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})
    ptx = k.asm["ptx"]
    out[f"align {align}"] = {"v4": ptx.count("ld.global.v4"), "scalar": ptx.count("ld.global.b16")}
# The norm backward as a programmatic dependent (kernels/_shared/norm_bwd.PDL) and TF32 on a K-major B through TMA
from kernels._shared.norm_bwd import _norm_bwd_kernel, _norm_bwd_reduce_kernel
from kernels.matmul import _matmul_tma_kernel
sig = {"x_ptr": "*bf16", "w_ptr": "*bf16", "dy_ptr": "*bf16", "dx_ptr": "*bf16", "part_ptr": "*fp32", "n_rows": "i32",
       "n_cols": "i32", "eps": "fp32", "ROWS_PER_PROGRAM": "constexpr", "BLOCK_M": "constexpr",
       "BLOCK_SIZE": "constexpr", "CENTRE": "constexpr", "HAS_BIAS": "constexpr", "ALIGN": "constexpr",
       "PREFETCH": "constexpr", "PDL": "constexpr"}
consts = {"ROWS_PER_PROGRAM": 8, "BLOCK_M": 1, "BLOCK_SIZE": 4096, "CENTRE": True, "HAS_BIAS": True, "ALIGN": 8,
          "PREFETCH": False, "PDL": True}
k = triton.compile(ASTSource(fn=_norm_bwd_kernel, signature=sig, constexprs=consts), target=GPUTarget("cuda", 90, 32),
                   options={"num_warps": 8, "launch_pdl": True})
sig = {"part_ptr": "*fp32", "out_ptr": "*bf16", "n_parts": "i32", "n_cols": "i32", "out_stride": "i32",
       "BLOCK_P": "constexpr", "BLOCK_N": "constexpr", "PDL": "constexpr"}
r = triton.compile(ASTSource(fn=_norm_bwd_reduce_kernel, signature=sig,
                             constexprs={"BLOCK_P": 64, "BLOCK_N": 128, "PDL": True}),
                   target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "launch_pdl": True})
out["pdl"] = {"bwd": re.findall(r"griddepcontrol\.\w+", k.asm["ptx"]), "launch_pdl": bool(k.metadata.launch_pdl),
              "reduce": re.findall(r"griddepcontrol\.\w+", r.asm["ptx"])}
sig = {"a_desc": "tensordesc<fp32[128, 32]>", "b_desc": "tensordesc<fp32[128, 32]>",
       "c_desc": "tensordesc<fp32[128, 128]>", "M": "i32", "N": "i32", "K": "i32", "ACTIVATION": "constexpr",
       "DOT_IN_FP32": "constexpr",
       "NUM_PROGRAMS": "constexpr", "IN_DTYPE": "constexpr", "INPUT_PRECISION": "constexpr", "BLOCK_M": "constexpr",
       "BLOCK_N": "constexpr", "BLOCK_K": "constexpr", "GROUP_M": "constexpr", "B_KMAJOR": "constexpr"}
consts = {"ACTIVATION": "relu", "DOT_IN_FP32": False, "NUM_PROGRAMS": 132, "IN_DTYPE": "float32",
          "INPUT_PRECISION": "tf32", "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8, "B_KMAJOR": True}
k = triton.compile(ASTSource(fn=_matmul_tma_kernel, signature=sig, constexprs=consts),
                   target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 3})
out["kmajor tf32"] = {"wgmma_tf32": len(re.findall(r"wgmma\.mma_async\S*tf32", k.asm["ptx"]))}
print(json.dumps(out))
"""


def missing_toolchain() -> str | None:
    """Why sm_90 cannot be compiled here (no NVIDIA backend or no ptxas in this Triton), else None. Decided before
    compiling: a ptxas error in our PTX names ptxas too, and must fail, not skip."""
    nvidia = Path(importlib.util.find_spec("triton").origin).parent / "backends" / "nvidia"
    if not nvidia.is_dir():
        return f"this Triton has no NVIDIA backend ({nvidia})"
    if not ((nvidia / "bin" / "ptxas").is_file() or os.environ.get("TRITON_PTXAS_PATH") or shutil.which("ptxas")):
        return f"no ptxas in {nvidia / 'bin'}, TRITON_PTXAS_PATH or PATH"
    return None


@pytest.fixture(scope="module")
def compiled():
    if why := missing_toolchain():
        pytest.skip(f"no sm_90 toolchain: {why}")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", COMPILE, str(REPO)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_weight_prefetch_compiles_to_l2_prefetches_under_the_register_cap(compiled):
    got = compiled["prefetch bf16"]
    assert got["prefetch"] >= 1 and got["maxnreg"] and got["cubin"] > 0


def test_a_full_row_loads_without_a_mask(compiled):
    """FULL (kernels/layernorm.UNMASKED_COLS) takes the predicates off the row's, weight's and bias's loads."""
    full, masked = compiled["unmasked fp32 4096"], compiled["masked fp32 4096"]
    assert full["loads"] > 0 and full["predicated_loads"] == 0
    assert masked["predicated_loads"] > 0


def test_weights_loaded_early_compile_without_a_prefetch(compiled):
    got = compiled["early fp32"]
    assert got["prefetch"] == 0 and not got["maxnreg"] and got["cubin"] > 0


def test_align_lets_rows_of_any_multiple_of_a_vector_load_vectors(compiled):
    """ALIGN (kernels/_shared/rows.row_align) rewrites n_cols and the row strides as its multiples: without it, an i32 row
    length and stride no multiple of 16 leave every load a single element; with ALIGN 8, bf16 rows load 16 bytes."""
    assert compiled["align 8"]["v4"] > 0 and compiled["align 8"]["scalar"] == 0
    assert compiled["align 1"]["v4"] == 0 and compiled["align 1"]["scalar"] > 0  # the same row, one element a load


def test_the_norm_backward_compiles_as_a_programmatic_dependent(compiled):
    """_norm_bwd.PDL: the held rows' backward waits on the kernel before and lets its reduction start; the reduction
    waits on it (the interpreter runs no griddepcontrol)."""
    got = compiled["pdl"]
    assert got["bwd"][:2] == ["griddepcontrol.wait", "griddepcontrol.launch_dependents"] and got["launch_pdl"]
    assert got["reduce"] == ["griddepcontrol.wait"]


def test_tf32_on_a_k_major_b_takes_hoppers_tensor_core_mma(compiled):
    assert compiled["kmajor tf32"]["wgmma_tf32"] > 0


def test_a_row_major_b_in_tf32_reaches_shared_memory_4_bytes_at_a_time():
    """Why TF32 reads a K-major copy of B (kernels/matmul KMAJOR_MIN_MNK): its MMA takes K-major operands only, so a
    pipelined load of a row-major B copies 4 bytes at a time where a K-major B and bf16 copy 16; one stage loads 16
    bytes and transposes through registers with scalar stores (scripts/matmul_tf32_layout.py)."""
    if why := missing_toolchain():
        pytest.skip(f"no sm_90 toolchain: {why}")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = f"import sys; sys.argv = ['x']; sys.path.insert(0, {str(REPO)!r}); sys.path.insert(0, {str(REPO / 'scripts')!r})\n" \
        "import json, matmul_tf32_layout as m; print(json.dumps(m.rows()))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {
        (x["precision"], x["b_layout"], x["block_m"], x["num_stages"]): x
        for x in json.loads(r.stdout.strip().splitlines()[-1])
    }
    row_major, k_major, bf16 = (rows[(p, lay, 128, 3)]
                                for p, lay in (("tf32", "row-major"), ("tf32", "K-major"), ("bf16", "row-major")))
    assert row_major["cp_async_4B"] > 0 and k_major["cp_async_4B"] == 0 and bf16["cp_async_4B"] == 0
    assert row_major["cp_async_4B"] == 4 * (k_major["cp_async_16B"] - row_major["cp_async_16B"])  # B: 4x the copies
    one_stage = rows[("tf32", "row-major", 128, 1)]
    assert one_stage["ld_global_v4"] > 0 and one_stage["st_shared_scalar"] > 0 and one_stage["cp_async_4B"] == 0
    assert all(x["wgmma"] > 0 and x["mma_sync"] == 0 for x in rows.values())  # tensor-core MMA either way
