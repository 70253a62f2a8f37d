"""Occupancy arithmetic and PTX access counting (rooflab/kernel_facts.py), and the CPU schema of compiled.parquet."""
import pandas as pd
import pytest

from rooflab.kernel_facts import LIMITS, global_access_widths, limits_for, occupancy

H200 = limits_for("h200")


def test_worked_example_register_limited():
    occ = occupancy(128, 160, 0, H200)  # 160 * 32 = 5120 regs/warp; 65536 // 5120 = 12 warps; // 4 = 3 blocks
    assert occ["blocks_per_sm"] == 3
    assert occ["warps_per_sm"] == 12
    assert occ["occupancy"] == pytest.approx(12 / 64)
    assert occ["occupancy_limiter"] == "registers"


def test_register_allocation_granularity():
    # 33 registers: 33 * 32 = 1056 -> 1280 per warp (unit 256); 65536 // 1280 = 51 warps; // 8 = 6 blocks
    assert occupancy(256, 33, 0, H200)["blocks_per_sm"] == 6
    # 32 registers: 1024 per warp, 64 warps fit, the warp limit (64 // 8 = 8) binds
    occ = occupancy(256, 32, 0, H200)
    assert occ["blocks_per_sm"] == 8 and occ["occupancy"] == 1.0 and occ["occupancy_limiter"] == "registers"


def test_shared_memory_limited():
    # 100 KB + 1 KB reserved per block: two fit in 228 KB, three do not
    occ = occupancy(128, 32, 100 * 1024, H200)
    assert occ["blocks_per_sm"] == 2 and occ["occupancy_limiter"] == "shared_memory"
    assert occupancy(128, 32, 228 * 1024, H200)["blocks_per_sm"] == 0  # over 227 KB per block: cannot launch
    assert occupancy(128, 32, 227 * 1024, H200)["blocks_per_sm"] == 1


def test_block_and_warp_limits():
    assert occupancy(32, 16, 0, H200)["blocks_per_sm"] == 32  # max 32 blocks per SM
    assert occupancy(1024, 16, 0, H200)["blocks_per_sm"] == 2  # 32 warps per block, 64 per SM
    assert occupancy(128, 256, 0, H200)["blocks_per_sm"] == 0  # over 255 registers per thread


def test_limits_lookup():
    assert limits_for(90) is LIMITS[90] and limits_for("sm_90") is LIMITS[90] and limits_for("9.0") is LIMITS[90]
    assert limits_for("a100").smem_per_sm == 164 * 1024
    assert limits_for(None) is LIMITS[90]


PTX = """
    @%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];
    @%p2 ld.global.L1::evict_last.v2.b32 { %r5, %r6 }, [ %rd2 + 0 ];
    ld.global.nc.b16 %rs1, [%rd3];
    @%p1 st.global.v4.b32 [ %rd4 + 0 ], { %r7, %r8, %r9, %r10 };
    st.global.b16 [%rd5], %rs2;
    ld.shared.v4.b32 {%r1, %r2, %r3, %r4}, [%r11];
"""


def test_global_access_widths():
    w = global_access_widths(PTX)
    assert (w["ld_global_v4"], w["ld_global_v2"], w["ld_global_scalar"]) == (1, 1, 1)
    assert (w["st_global_v4"], w["st_global_v2"], w["st_global_scalar"]) == (1, 0, 1)
    assert w["ld_global_max_bits"] == 128 and w["st_global_max_bits"] == 128
    assert global_access_widths("")["ld_global_v4"] == 0


def test_cpu_compiled_frame_has_schema(tmp_path):
    """The interpreter compiles nothing: one 'skipped' row per kernel, saying so, in the GPU file's schema."""
    from experiments.compiled import COMPILED_COLUMNS, CPU_NOTE, run

    out = tmp_path / "compiled.parquet"
    run("cpu", ["gelu", "matmul"], str(out), {"size": 64})
    df = pd.read_parquet(out)
    assert list(df.columns[:len(COMPILED_COLUMNS)]) == COMPILED_COLUMNS
    assert list(df["status"]) == ["skipped", "skipped"] and set(df["error"]) == {CPU_NOTE}
    assert str(df["n_regs"].dtype) == "Int64" and str(df["occupancy"].dtype) == "float64"
    assert str(df["autotune_best"].dtype) == "boolean"
