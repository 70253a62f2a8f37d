"""scripts/ratio_table.py: the fast-kernels scorecard from a synthetic metrics table (no GPU, no timing)."""
import importlib.util
from pathlib import Path

import pandas as pd
import pytest

spec = importlib.util.spec_from_file_location("ratio_table",
                                              Path(__file__).parent.parent / "scripts" / "ratio_table.py")
ratio_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ratio_table)


def _metrics():
    rows = []
    # gelu bf16: triton 10 % faster than builtin at 1024, 5 % slower than compile at 2048; 3800 GB/s at 2048
    for size, t in {
            1024: {
                "builtin": 1.1,
                "compile": 1.2,
                "triton": 1.0
            },
            2048: {
                "builtin": 2.2,
                "compile": 1.9,
                "triton": 2.0
            }
    }.items():
        for impl, ms in t.items():
            rows.append({
                "gpu": "h200",
                "kernel": "gelu",
                "dtype": "bfloat16",
                "size": size,
                "impl": impl,
                "pass": "fwd",
                "status": "ok",
                "median_ms": ms,
                "achieved_gbps": 3800.0 * 2.0 / ms,
                "achieved_tflops": float("nan"),
                "peak_bandwidth_measured_gbps": 4000.0
            })
    for impl, ms in {"builtin": 1.0, "triton": 0.8}.items():
        rows.append({
            "gpu": "h200",
            "kernel": "matmul",
            "dtype": "bfloat16",
            "size": 4096,
            "impl": impl,
            "pass": "fwd",
            "status": "ok",
            "median_ms": ms,
            "achieved_gbps": float("nan"),
            "achieved_tflops": 100.0 / ms,
            "peak_bandwidth_measured_gbps": 4000.0
        })
    return pd.DataFrame(rows)


def test_scorecard_ratios():
    ceilings = pd.DataFrame([{
        "gpu": "h200",
        "ceiling": "copy",
        "value": 4000e9
    }, {
        "gpu": "h200",
        "ceiling": "copy_bfloat16_2048",
        "value": 3900e9
    }])
    mem, mm = ratio_table.scorecard(_metrics(), "h200", "fwd", ceilings)
    r = mem.iloc[0]
    assert (r["kernel"], r["N"]) == ("gelu", 2048)
    assert r["triton/copy"] == pytest.approx(3800 / 4000)
    assert r["triton/same-size copy"] == pytest.approx(3800 / 3900)
    assert r["min triton/best_torch (N>=1024)"] == pytest.approx(1.9 / 2.0) and r["at N"] == 2048
    m = mm.iloc[0]
    assert m["N"] == 4096 and m["triton/cublas"] == pytest.approx(1.25) and m["goal"] == 1.0


def test_scorecard_without_same_size_copies():
    mem, _ = ratio_table.scorecard(_metrics(), "h200")
    assert mem["triton/same-size copy"].isna().all()


def _cells(ratios_and_rse):
    rows = []
    for i, (ratio, rse) in enumerate(ratios_and_rse):
        for impl, ms in (("builtin", 1.0), ("compile", 1.1), ("triton", 1.0 / ratio)):
            rows.append({
                "gpu": "h200",
                "kernel": "vecadd",
                "dtype": "float32",
                "size": 1024 * (i + 1),
                "impl": impl,
                "pass": "fwd",
                "status": "ok",
                "median_ms": ms,
                "rse_median": rse
            })
    return pd.DataFrame(rows)


def test_behind_torch_counts_the_cells_and_flags_those_beyond_three_standard_errors():
    m = _cells([(1.02, 0.001), (0.99, 0.01), (0.97, 0.002), (0.95, 0.05)])
    behind, compared = ratio_table.behind_torch(m, "h200")
    assert compared == 4 and behind["triton/best_torch"].round(3).tolist() == [0.95, 0.97, 0.99]
    z = behind.set_index("N")["z"]
    assert z[3072] == pytest.approx(0.03 / (0.002 * 2**0.5)) and z[3072] > 3  # 3 % behind, tight medians
    assert z[2048] < 3 and z[4096] < 3  # 1 % within noise; 5 % with wide medians
    assert (behind["best torch"] == "builtin").all()


def test_behind_torch_leaves_out_small_sizes_other_dtypes_and_matmul():
    m = _cells([(0.9, 0.001)])
    small = m.assign(size=512)
    fp16 = m.assign(dtype="float16")
    mm = m.assign(kernel="matmul")
    for frame in (small, fp16, mm):
        behind, compared = ratio_table.behind_torch(frame, "h200")
        assert compared == 0 and behind.empty
