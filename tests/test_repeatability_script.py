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
    cells = pd.DataFrame({"kernel": ["gelu", "gelu"], "impl": ["triton", "builtin"], "dtype": ["bfloat16"] * 2,
                          "size": [8192, 256], "pass": ["fwd", "fwd"], "status": status or ["ok", "ok"],
                          "median_ms": medians, "graph_median_ms": [m / 2 for m in medians]})
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

    runs = [_run(tmp_path, 1, [0.100, 0.005], status=["ok", "error"]),
            _run(tmp_path, 2, [0.101, 0.005], status=["error", "ok"])]
    t = rep.compare_all(runs)
    assert t.empty and process_count(t) == 2 and (summarize(t)["n"] == 0).all()
