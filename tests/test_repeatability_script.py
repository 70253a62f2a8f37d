"""scripts/repeatability.py's comparison on synthetic runs (the GPU runs themselves are a benchmark, not a test)."""
import importlib.util
from pathlib import Path

import pandas as pd
import pytest

spec = importlib.util.spec_from_file_location("repeatability",
                                              Path(__file__).parent.parent / "scripts" / "repeatability.py")
rep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rep)

from analysis.repeatability import summarize  # noqa: E402


def _run(tmp_path, i, medians, status=None):
    cells = pd.DataFrame({
        "kernel": ["gelu", "gelu"],
        "impl": ["triton", "builtin"],
        "dtype": ["bfloat16"] * 2,
        "size": [8192, 256],
        "pass": ["fwd", "fwd"],
        "status": status or ["ok", "ok"],
        "median_ms": medians,
        "graph_median_ms": [m / 2 for m in medians]
    })
    path = tmp_path / f"run{i}.parquet"
    cells.to_parquet(path)
    return [path]


def test_every_pair_of_runs_is_compared(tmp_path):
    runs = [_run(tmp_path, 1, [0.100, 0.005]), _run(tmp_path, 2, [0.101, 0.005]), _run(tmp_path, 3, [0.098, 0.006])]
    t = rep.compare_all(runs)
    assert sorted(t["pair"].unique()) == ["1-2", "1-3", "2-3"] and len(t) == 6
    big = t[t["size"] == 8192].set_index("pair")["event_rel_diff"]
    assert big["1-2"] == pytest.approx(0.01) and big["1-3"] == pytest.approx(-0.02)
    assert big["2-3"] == pytest.approx(0.098 / 0.101 - 1)
    s = summarize(t).set_index("group")
    assert s.loc["event_long", "n"] == 3
    assert s.loc["event_long", "max_abs_rel_diff"] == pytest.approx(0.003 / 0.101)  # the 2-3 pair
    assert s.loc["graph_short", "max_abs_rel_diff"] == pytest.approx(0.2)  # 0.0025 -> 0.003


def test_failed_cells_are_left_out_of_the_pair(tmp_path):
    runs = [_run(tmp_path, 1, [0.100, 0.005]), _run(tmp_path, 2, [0.101, 0.005], status=["ok", "error"])]
    t = rep.compare_all(runs)
    assert list(t["size"]) == [8192] and list(t["pair"]) == ["1-2"]


def test_a_comparison_with_no_common_cell_still_summarises(tmp_path):
    from analysis.repeatability import process_count

    runs = [
        _run(tmp_path, 1, [0.100, 0.005], status=["ok", "error"]),
        _run(tmp_path, 2, [0.101, 0.005], status=["error", "ok"])
    ]
    t = rep.compare_all(runs)
    assert t.empty and process_count(t) == 2 and (summarize(t)["n"] == 0).all()


def test_the_dag_job_compares_the_sweep_with_its_repeat_in_every_frame(tmp_path):
    """analysis.repeatability's main (rule repeatability): the sweep's rows against the repeat's, event, graph and
    loop frames; the summary has every frame's length classes."""
    from analysis.repeatability import main

    first, second = tmp_path / "sweep.parquet", tmp_path / "repeat.parquet"
    base = {
        "kernel": ["gelu"] * 3,
        "impl": ["triton"] * 3,
        "dtype": ["bfloat16"] * 3,
        "size": [256, 1024, 8192],
        "pass": ["fwd"] * 3,
        "status": ["ok"] * 3
    }
    pd.DataFrame({
        **base, "median_ms": [0.005, 0.02, 0.1],
        "graph_median_ms": [0.002, 0.015, 0.1],
        "loop_ms": [0.005, 0.02, 0.1]
    }).to_parquet(first)
    pd.DataFrame({
        **base, "median_ms": [0.006, 0.021, 0.1],
        "graph_median_ms": [0.002, 0.015, 0.099],
        "loop_ms": [0.01, 0.02, 0.1]
    }).to_parquet(second)
    out = tmp_path / "repeatability.csv"
    assert main(["--first", str(first), "--second", str(second), "--out", str(out)]) == 0
    t = pd.read_csv(out).set_index("size")
    assert t.loc[256, "loop_rel_diff"] == pytest.approx(1.0) and t.loc[1024, "event_rel_diff"] == pytest.approx(0.05)
    s = summarize(t.reset_index()).set_index("group")
    assert s.loc["loop_short", "max_abs_rel_diff"] == pytest.approx(1.0)
    assert s.loc["event_middle", "n"] == 1 and s.loc["graph_long", "max_abs_rel_diff"] == pytest.approx(0.01)


def test_repeat_params_take_the_sweeps_sizes_and_implementations():
    from rooflab.config import repeat_params

    config = {
        "sizes": [256, 1024, 8192],
        "extra_sizes": [1793],
        "impls": ["naive", "builtin", "triton"],
        "dtypes": ["bfloat16"],
        "repeatability": {
            "sizes": [1024, 4096],
            "impls": ["builtin", "cuda"]
        },
        "paired": {
            "rounds": 4
        }
    }
    p = repeat_params(config)
    assert p["sizes"] == [1024] and p["extra_sizes"] == [] and p["impls"] == ["builtin"]
    assert p["paired"] == {"rounds": 4, "enabled": False} and p["dtypes"] == ["bfloat16"]
