"""Nsight Compute's raw page read into facts per GPU kernel and matched to the calls profiled (rooflab/ncu.py,
experiments/why_ncu.py), on a synthetic fixture in ncu's layout (tests/data/ncu_raw_synthetic.csv: not a
measurement); and the paper's sentences and table from such rows (analysis/why_ncu.py)."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rooflab import ncu

FIXTURE = Path(__file__).parent / "data" / "ncu_raw_synthetic.csv"
CALLS = [{"kernel": "softmax", "impl": "builtin", "dtype": "bfloat16", "size": 8192, "pass": "fwd", "error": ""},
         {"kernel": "softmax", "impl": "triton", "dtype": "bfloat16", "size": 8192, "pass": "fwd", "error": ""},
         {"kernel": "matmul", "impl": "builtin", "dtype": "tf32", "size": 8192, "pass": "fwd", "error": ""}]


def fixture_facts():
    return ncu.facts(ncu.read_raw(FIXTURE.read_text()))


def test_read_raw_skips_the_program_output_and_reads_base_units():
    raw = ncu.read_raw(FIXTURE.read_text())
    assert len(raw) == 7 and raw["name"].iloc[3] == "_softmax_kernel"
    assert raw["gpu__time_duration.sum"].iloc[1] == pytest.approx(1460.0005)  # nanoseconds -> microseconds
    assert raw["dram__bytes.sum"].iloc[1] == 248_512_000  # thousands separators
    assert np.isnan(raw["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"].iloc[1])  # "n/a"


def test_other_units_are_scaled_and_a_missing_table_is_named():
    text = ('"ID","Kernel Name","gpu__time_duration.sum","dram__bytes.sum"\n"","","msecond","Mbyte"\n'
            '"0","k","1.5","2"\n')
    raw = ncu.read_raw(text)
    assert raw["gpu__time_duration.sum"].iloc[0] == 1500 and raw["dram__bytes.sum"].iloc[0] == 2e6
    with pytest.raises(ValueError, match="no ncu table"):
        ncu.read_raw("==PROF== No kernels were profiled.\n")


def test_facts_name_occupancy_limiter_stalls_and_instruction_mix():
    f = fixture_facts().set_index("name")
    soft = f.loc["_softmax_kernel"]
    assert soft["achieved_occupancy_pct"] == 23.8 and soft["theoretical_occupancy_pct"] == 25
    assert soft["occupancy_limiter"] == "shared memory"
    assert soft["shared_mem_bytes"] == 16384 and soft["registers_per_thread"] == 32
    assert soft["grid_size"] == 8192 and soft["block_size"] == 256 and soft["waves_per_sm"] == pytest.approx(31.03)
    assert soft["dram_pct"] == pytest.approx(89.3) and soft["ffma_thread_inst"] == 3e6
    assert soft["stall_top"] == "long_scoreboard 20.1; wait 2.2; barrier 0.4"  # 'selected' is no stall
    gemm = f.loc[[n for n in f.index if n.startswith("sm90_xmma")][0]]
    assert gemm["occupancy_limiter"] == "registers and shared memory"  # a tie names both
    assert gemm["tensor_inst"] == 4194304 and gemm["tma_inst"] == 1e6 and gemm["shared_mem_bytes"] == 200704


def test_split_calls_matches_kernels_to_the_manifest_in_order():
    out = ncu.split_calls(fixture_facts(), "spin_kernel", CALLS)
    assert out.groupby("impl")["name"].count().to_dict() == {"builtin": 3, "triton": 1}
    mm = out[out["kernel"] == "matmul"]
    assert mm["launch"].tolist() == [0, 1] and mm["dtype"].unique().tolist() == ["tf32"]
    with pytest.raises(ValueError, match="3 markers in the ncu table, 2 calls"):
        ncu.split_calls(fixture_facts(), "spin_kernel", CALLS[:2])


def test_table_adds_the_gpu_and_short_names():
    from experiments.why_ncu import table

    out = table(FIXTURE.read_text(), CALLS, "h200")
    assert set(out["gpu"]) == {"h200"}
    assert out["short_name"].iloc[0] == "cunn_SoftMaxForward"


def test_cells_are_checked():
    from experiments.why_ncu import CELLS, check_cells

    assert len(check_cells(CELLS)) == len(CELLS)
    with pytest.raises(ValueError, match="needs exactly"):
        check_cells([{"kernel": "softmax", "dtype": "bfloat16", "size": 8192, "impls": ["triton"]}])
    with pytest.raises(ValueError, match="attention's only"):
        check_cells([{"kernel": "softmax", "dtype": "bfloat16", "size": 8192, "pass": "fwd", "impls": ["sdpa_cudnn"]}])
