"""scripts/ncu_durations.py: ncu's raw CSV read and matched, in order, to the calls (synthetic output, no GPU)."""
import importlib.util
from pathlib import Path

import pandas as pd
import pytest

spec = importlib.util.spec_from_file_location("ncu_durations",
                                              Path(__file__).resolve().parent.parent / "scripts/ncu_durations.py")
nd = importlib.util.module_from_spec(spec)
spec.loader.exec_module(nd)

HEADER = '"ID","Process ID","Kernel Name","gpu__time_duration.sum"\n"","","","usecond"\n'


def ncu_text(durations, unit="usecond"):
    rows = "".join(f'"{i}","7","k{i}","{d:,}"\n' for i, d in enumerate(durations))
    return "==PROF== Connected to process 7\n" + HEADER.replace("usecond", unit) + rows


def test_read_ncu_scales_units_and_skips_the_program_output():
    df = nd.read_ncu(ncu_text([1500.0, 2500.0], unit="nsecond"))
    assert df["ncu_us"].tolist() == [1.5, 2.5]
    assert df["kernel"].tolist() == ["k0", "k1"]


def test_summary_takes_the_median_per_call_and_the_outside_part(monkeypatch):
    monkeypatch.setattr(nd, "PROFILED_CALLS", 3)
    events = pd.DataFrame({
        "call": ["copy_", "rowsum triton", "gelu triton"] * 2,
        "dtype": ["bfloat16"] * 3 + ["float32"] * 3,
        "event_us": [5.0, 10.0, 20.0, 6.0, 30.0, 40.0]
    })
    ncu = nd.read_ncu(ncu_text([8, 9, 7, 18, 17, 30, 25, 26, 27, 35, 36, 37]))  # no rows for the memcpy
    out = nd.summary(events, ncu).set_index(["call", "dtype"])
    assert out.loc[("rowsum triton", "bfloat16"), "ncu_us"] == 8
    assert out.loc[("gelu triton", "bfloat16"), "ncu_us"] == 18
    assert out.loc[("rowsum triton", "float32"), "outside_us"] == 4
    assert out.loc[("gelu triton", "float32"), "outside_us"] == 4
    assert pd.isna(out.loc[("copy_", "float32"), "ncu_us"])  # timed, not profiled


def test_summary_refuses_a_count_that_does_not_match(monkeypatch):
    monkeypatch.setattr(nd, "PROFILED_CALLS", 3)
    events = pd.DataFrame({"call": ["copy_", "gelu triton"], "dtype": ["bfloat16"] * 2, "event_us": [10.0, 9.0]})
    with pytest.raises(SystemExit, match="expected 3 x 1"):
        nd.summary(events, nd.read_ncu(ncu_text([1, 2])))


def test_output_without_a_table_or_with_an_unknown_unit_says_so():
    with pytest.raises(SystemExit, match="no ncu table"):
        nd.read_ncu("==PROF== No kernels were profiled.\n")
    with pytest.raises(SystemExit, match="'s'"):
        nd.read_ncu(ncu_text([1.0], unit="s"))
