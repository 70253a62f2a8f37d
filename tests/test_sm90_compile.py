"""LayerNorm's GPU-only paths compiled for an H100/H200 (sm_90) here, without a GPU: the interpreter that runs the
other tests never executes the inline PTX of the weight prefetch, the WB_EARLY loads or the register cap.

Triton compiles ahead of time for a named target (ASTSource + GPUTarget) with the ptxas its wheel ships; this runs
in a separate process, since the test session imports Triton with TRITON_INTERPRET=1.
"""
import json
import os
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
for name, dtype, block, early, prefetch, cap, full in [("prefetch bf16", "bf16", 8192, False, True, 64, False),
                                                       ("early fp32", "fp32", 8192, True, False, None, False),
                                                       ("unmasked fp32 4096", "fp32", 4096, True, False, None, True),
                                                       ("masked fp32 4096", "fp32", 4096, True, False, None, False)]:
    sig = {"x_ptr": "*" + dtype, "w_ptr": "*" + dtype, "b_ptr": "*" + dtype, "y_ptr": "*" + dtype, "n_cols": "i32",
           "stride_xm": "i32", "stride_xn": "i32", "stride_w": "i32", "stride_b": "i32", "stride_ym": "i32",
           "stride_yn": "i32", "eps": "fp32", "BLOCK_SIZE": "constexpr", "ONE_TILE": "constexpr",
           "WB_EARLY": "constexpr", "WB_PREFETCH": "constexpr", "W_LINE": "constexpr", "prefetch_programs": "i32",
           "FULL": "constexpr"}
    consts = {"BLOCK_SIZE": block, "ONE_TILE": True, "WB_EARLY": early, "WB_PREFETCH": prefetch,
              "W_LINE": 64 if dtype == "bf16" else 32, "FULL": full}
    options = {"num_warps": 8} | ({"maxnreg": cap} if cap else {})
    k = triton.compile(ASTSource(fn=_layernorm_fwd_kernel, signature=sig, constexprs=consts),
                       target=GPUTarget("cuda", 90, 32), options=options)
    ptx = k.asm["ptx"]
    out[name] = {"prefetch": ptx.count("prefetch.global.L2"), "maxnreg": ".maxnreg 64" in ptx,
                 "cubin": len(k.asm["cubin"]), "loads": ptx.count("ld.global"),
                 "predicated_loads": len(re.findall(r"@%p\d+ ld\.global", ptx))}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def compiled():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", COMPILE, str(REPO)], capture_output=True, text=True, env=env,
                       timeout=300)
    if r.returncode != 0 and ("ptxas" in r.stderr or "No module named 'triton.backends.nvidia'" in r.stderr):
        pytest.skip(f"no sm_90 toolchain in this Triton: {r.stderr.strip().splitlines()[-1]}")
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
