"""experiments/traffic.py's reading of Nsight Compute's table, on a synthetic one (ncu itself needs the GPU)."""
import pytest

from experiments.traffic import model_bytes, read_ncu, table

HEADER = '"ID","Kernel Name","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum"'
UNITS = '"","","Mbyte","Mbyte","usecond"'


def ncu_text(*rows):
    lines = ["==PROF== Connected to process 1", "program output", HEADER, UNITS]
    lines += [f'"{i}","{name}","{r}","{w}","{t}"' for i, (name, r, w, t) in enumerate(rows)]
    return "\n".join(lines)


def test_calls_are_split_at_the_markers_and_summed():
    text = ncu_text(("at::cuda::spin_kernel(long)", 0, 0, 1.0), ("_gelu_kernel", "134.2", "100.0", "63.5"),
                    ("void at::cuda::(anonymous)::spin_kernel(long)", 0, 0, 1.0),
                    ("exp_kernel", "1,000.0", "900.0", "300"), ("sum_kernel", "500", "0.5", "100"))
    rows = read_ncu(text)
    assert rows["dram__bytes_read.sum"].tolist()[3] == pytest.approx(1e9)  # "1,000.0" Mbyte
    calls = [{
        "kernel": "gelu",
        "impl": "triton",
        "dtype": "float32",
        "size": 4096,
        "pass": "fwd"
    }, {
        "kernel": "softmax",
        "impl": "naive",
        "dtype": "float32",
        "size": 4096,
        "pass": "fwd"
    }]
    out = table(rows, calls, lambda call: 1e8)
    assert out["launches"].tolist() == [1, 2]
    assert out.loc[0,
                   "dram_write_bytes"] == pytest.approx(100e6) and out.loc[0,
                                                                           "dram_read_bytes"] == pytest.approx(134.2e6)
    assert out.loc[1, "moved_bytes"] == pytest.approx(1.5e9 + 900.5e6)
    assert out.loc[1, "ncu_us"] == 400 and out.loc[1, "kernels"] == "exp_kernel; sum_kernel"
    assert out.loc[1, "moved_over_model"] == pytest.approx(out.loc[1, "moved_bytes"] / 1e8)


def test_a_table_that_does_not_match_the_manifest_is_refused():
    rows = read_ncu(ncu_text(("spin_kernel", 0, 0, 1.0), ("k", 1, 1, 1.0)))
    with pytest.raises(SystemExit, match="1 markers"):
        table(rows, [], None)
    with pytest.raises(SystemExit, match="header"):
        read_ncu("no table at all")


def test_model_bytes_are_the_sweeps_byte_model():
    # gelu reads and writes N^2 elements: 2 * 4 bytes each in float32
    assert model_bytes({"kernel": "gelu", "impl": "triton", "dtype": "float32", "size": 64, "pass": "fwd"}) == \
        2 * 64 * 64 * 4


def test_the_reference_table_is_what_the_committed_ncu_tables_make():
    """data/reference/h200/traffic.csv from data/tuning/traffic_s29_d5 (ncu's own units: byte, ns), as its README
    says; every implementation, torch.compile too, of every kernel and pass."""
    import json
    from pathlib import Path

    import pandas as pd

    root = Path(__file__).resolve().parent.parent
    run = root / "data/tuning/traffic_s29_d5"
    made = table(read_ncu((run / "ncu.csv").read_text()), json.loads((run / "calls.json").read_text()), model_bytes)
    ref = pd.read_csv(root / "data/reference/h200/traffic.csv", keep_default_na=False)
    pd.testing.assert_frame_equal(made.reset_index(drop=True), ref, check_dtype=False)
    by = made.set_index(["kernel", "impl", "pass"])
    assert by.loc[("gelu", "triton", "fwd"), "dram_read_bytes"] == pytest.approx(2 * 8192 * 8192, rel=0.01)  # once
    assert {"naive", "builtin", "compile", "triton"} <= set(made["impl"]) and not made["fell_back"].any()


def test_the_paper_speaks_for_clean_calls_only():
    import pandas as pd

    from analysis.study_tables import traffic_rows, traffic_table

    base = {
        "kernel": "gelu",
        "pass": "fwd",
        "dtype": "bfloat16",
        "size": 8192,
        "launches": 1,
        "model_bytes": 2.7e8,
        "moved_bytes": 2.4e8,
        "dram_read_bytes": 1.3e8,
        "moved_over_model": 0.9,
        "error": "",
        "fell_back": False
    }
    t = pd.DataFrame([{
        **base, "impl": "triton"
    }, {
        **base, "impl": "triton",
        "moved_over_model": 0.8
    }, {
        **base, "impl": "compile",
        "fell_back": True
    }, {
        **base, "impl": "naive",
        "error": "OOM"
    }, {
        **base, "impl": "builtin",
        "size": 4096
    }, {
        **base, "impl": "naive",
        "kernel": "softmax",
        "moved_over_model": 2500.0,
        "model_bytes": 2.5e9
    }])
    rows = traffic_rows(t)
    assert sorted(rows["impl"]) == ["naive", "triton"] and rows["size"].eq(8192).all()
    assert rows.set_index(["kernel", "impl"]).at[("gelu", "triton"), "moved_over_model"] == 0.8  # the last kept
    text = traffic_table(t)
    assert "2500 (1)" in text and "2{,}500" in text and "\\{,\\}" not in text  # numbers >= 1000 print as numbers
