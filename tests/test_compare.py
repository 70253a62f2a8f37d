"""analysis/compare.py: this run against the reference, verdicts beyond noise, status changes, the summary."""
import numpy as np
import pandas as pd
import pytest

from analysis.compare import compare, floors, summary_markdown
from rooflab.verdicts import VerdictRules


def rules(**settings) -> VerdictRules:
    """The verdict rules with a user's settings (config verdicts) over the schema's defaults."""
    return VerdictRules.from_config(settings)


def _rows(cells):
    base = {"kernel": "gelu", "dtype": "float32", "pass": "fwd", "status": "ok", "rse_median": 0.001, "hold_us": 30.0}
    return pd.DataFrame([{**base, **c} for c in cells])


def test_verdicts_beyond_noise_only():
    ref = _rows([{
        "impl": "triton",
        "size": 4096,
        "median_ms": 0.100
    }, {
        "impl": "builtin",
        "size": 4096,
        "median_ms": 0.100
    }, {
        "impl": "naive",
        "size": 4096,
        "median_ms": 0.100
    }, {
        "impl": "triton",
        "size": 256,
        "median_ms": 0.005
    }])
    now = _rows([{
        "impl": "triton",
        "size": 4096,
        "median_ms": 0.090
    },  # 10 % faster: beyond the 2 % floor
                 {
                     "impl": "builtin",
                     "size": 4096,
                     "median_ms": 0.101
                 },  # 1 %: noise
                 {
                     "impl": "naive",
                     "size": 4096,
                     "median_ms": 0.105
                 },  # 5 % slower
                 {
                     "impl": "triton",
                     "size": 256,
                     "median_ms": 0.0054
                 }])  # 8 % on a 5 us cell: under the 10 % floor
    t = compare(now, ref).set_index(["impl", "size"])["verdict"]
    assert t[("triton", 4096)] == "faster" and t[("builtin", 4096)] == "same"
    assert t[("naive", 4096)] == "slower" and t[("triton", 256)] == "same"
    md = summary_markdown(compare(now, ref), "h200")
    assert "| gelu | triton | float32 | 4096 | fwd | event |" in md  # a row's own dtype and size, not the Series'


def test_noisy_cells_need_a_bigger_move():
    ref = _rows([{"impl": "triton", "size": 4096, "median_ms": 0.100, "rse_median": 0.01}])
    now = _rows([{"impl": "triton", "size": 4096, "median_ms": 0.104, "rse_median": 0.01}])
    t = compare(now, ref)
    assert t.loc[0, "noise"] == np.sqrt(2) * 0.01 * 3 and t.loc[0, "verdict"] == "same"
    assert compare(now, ref, rules=rules(k_sigma=1)).loc[0, "verdict"] == "slower"


def test_a_floor_that_cannot_see_a_regression_is_not_comparable():
    """3 standard errors of 2 % each side: 8.5 %, wider than the 5 % a long cell's floor may be (config verdicts
    max_floor_long): a 5 % regression could hide in it, so the cell is not comparable, not the same. A short cell may
    have 10 %."""
    ref = _rows([{"impl": "triton", "size": 4096, "median_ms": 0.100, "rse_median": 0.02}])
    now = _rows([{"impl": "triton", "size": 4096, "median_ms": 0.105, "rse_median": 0.02}])
    assert compare(now, ref).loc[0, "verdict"] == "not comparable"
    assert compare(now, ref, rules=rules(max_floor_long=0.1)).loc[0, "verdict"] == "same"
    moved = _rows([{"impl": "triton", "size": 4096, "median_ms": 0.130, "rse_median": 0.02}])
    assert compare(moved, ref).loc[0, "verdict"] == "slower"  # 30 % is beyond even that floor: a regression
    short = [{"impl": "triton", "size": 256, "median_ms": 0.005, "rse_median": 0.01}]
    assert compare(_rows(short), _rows(short)).loc[0, "verdict"] == "same"  # the 10 % floor of a short cell
    assert compare(_rows(short), _rows(short), rules=rules(short_min_rel_change=0.2)).loc[0,
                                                                                          "verdict"] == "not comparable"


def test_status_changes_and_unmatched_cells():
    ref = _rows([{
        "impl": "triton",
        "size": 1,
        "median_ms": 0.1
    }, {
        "impl": "cuda",
        "size": 1,
        "median_ms": 0.1
    }, {
        "impl": "naive",
        "size": 1,
        "median_ms": np.nan,
        "status": "skipped"
    }])
    now = _rows([{
        "impl": "triton",
        "size": 1,
        "median_ms": np.nan,
        "status": "failed"
    }, {
        "impl": "builtin",
        "size": 1,
        "median_ms": 0.1
    }, {
        "impl": "naive",
        "size": 1,
        "median_ms": np.nan,
        "status": "skipped"
    }])
    t = compare(now, ref).set_index("impl")["verdict"]
    assert t["triton"] == "status" and t["builtin"] == "new" and t["cuda"] == "gone" and t["naive"] == "not timed"
    md = summary_markdown(compare(now, ref), "h200")
    assert "- gelu triton float32 1 fwd: status (ok -> failed)" in md


def test_older_timing_method_is_flagged():
    ref = _rows([{"impl": "triton", "size": 4096, "median_ms": 0.2, "hold_us": np.nan}])
    now = _rows([{"impl": "triton", "size": 4096, "median_ms": 0.1}])
    t = compare(now, ref)
    assert bool(t.loc[0, "method_changed"]) and t.loc[0, "verdict"] == "faster"
    md = summary_markdown(t, "h200")
    assert "without the held stream" in md and "| faster | 1 |" in md and "-50.0%" in md


def test_a_joint_graph_compile_reference_row_is_a_method_change():
    # torch.compile's fwd+bwd compiled as one graph before rooflab.kernel.COMPILE_SPLIT_SINCE, as a training step after
    from rooflab.kernel import COMPILE_SPLIT_SINCE

    cell = {"kernel": "softmax", "impl": "compile", "size": 4096, "pass": "fwd+bwd"}
    ref = _rows([{
        **cell, "median_ms": 0.10,
        "timestamp": "2026-12-03T19:13:00+00:00"
    }, {
        **cell, "impl": "builtin",
        "median_ms": 0.10,
        "timestamp": "2026-12-03T19:13:00+00:00"
    }])
    now = _rows([{
        **cell, "median_ms": 0.12,
        "timestamp": COMPILE_SPLIT_SINCE
    }, {
        **cell, "impl": "builtin",
        "median_ms": 0.10,
        "timestamp": COMPILE_SPLIT_SINCE
    }])
    t = compare(now, ref).set_index("impl")
    assert bool(t.loc["compile", "method_changed"]) and t.loc["compile", "verdict"] == "slower"
    assert not bool(t.loc["builtin", "method_changed"])  # only torch.compile's fwd+bwd changed frame
    assert "as one joint graph" in summary_markdown(t.reset_index(), "h200")
    assert not compare(now, now)["method_changed"].any()
    untimed = compare(now.drop(columns="timestamp"), ref.drop(columns="timestamp"))  # no timestamps: no flag
    assert not untimed["method_changed"].any()


def _repeat():
    """A repeatability table: |differences| 4 % (short, graph), 20 % (short, event), 6 % (middle), 1 % (long)."""
    return pd.DataFrame({
        "median_ms_1": [0.005, 0.005, 0.020, 0.100, 0.200],
        "graph_median_ms_1": [0.002, 0.002, 0.018, 0.090, 0.190],
        "event_rel_diff": [0.20, -0.05, -0.06, 0.01, 0.004],
        "graph_rel_diff": [0.04, -0.01, 0.30, 0.0, 0.0]
    })


def test_floors_rise_to_what_the_same_code_moved_between_processes():
    f = floors(_repeat())
    assert f["short_graph"][0] == 0.05 and f["short_graph"][1] == "setting"  # measured 4 % < the 5 % setting
    assert f["short"] == (0.20, "repeatability, max of 2")
    assert f["mid"][0] == 0.06 and f["long"] == (0.02, "setting")  # 1 % measured: the 2 % setting stays
    assert floors(None) == floors(pd.DataFrame())


def test_short_cells_are_judged_on_their_graph_medians():
    ref = _rows([{
        "impl": "triton",
        "size": 256,
        "median_ms": 0.005,
        "graph_median_ms": 0.0020
    }, {
        "impl": "builtin",
        "size": 256,
        "median_ms": 0.005,
        "graph_median_ms": 0.0020
    }, {
        "impl": "naive",
        "size": 1024,
        "median_ms": 0.020,
        "graph_median_ms": 0.018
    }])
    now = _rows([{
        "impl": "triton",
        "size": 256,
        "median_ms": 0.008,
        "graph_median_ms": 0.0020
    },  # event +60 %
                 {
                     "impl": "builtin",
                     "size": 256,
                     "median_ms": 0.005,
                     "graph_median_ms": 0.0024
                 },  # graph +20 %
                 {
                     "impl": "naive",
                     "size": 1024,
                     "median_ms": 0.0215,
                     "graph_median_ms": 0.018
                 }])  # event +7.5 %
    t = compare(now, ref, _repeat()).set_index("impl")
    assert t.loc["triton", "timing"] == "graph" and t.loc["triton", "verdict"] == "same"
    assert t.loc["builtin", "verdict"] == "slower" and t.loc["builtin", "rel_change"] == pytest.approx(0.2)
    # 7.5 % > the 6 % floor: slower, though that floor is wider than the 5 % a 10-50 us cell's may be
    assert t.loc["naive", "timing"] == "event" and t.loc["naive", "verdict"] == "slower"
    # a move within a floor too wide to see a 5 % regression: not comparable, not "same"
    assert compare(now, ref, _repeat(), rules=rules(min_rel_change=0.1)).set_index("impl").loc["naive", "verdict"] == \
        "not comparable"
    wider = compare(now, ref, _repeat(), rules=rules(max_floor_middle=0.2, min_rel_change=0.1))
    assert wider.set_index("impl").loc["naive", "verdict"] == "same"
    md = summary_markdown(compare(now, ref, _repeat()), "h200", noise_floors=floors(_repeat()))
    assert "repeatability, max of 2" in md and "| graph |" in md


def test_one_setting_moves_the_compare_table_the_metrics_and_the_paper_alike():
    """The floor of medians timed apart has one home, config verdicts (rooflab/verdicts.py): a user's min_rel_change
    of 10 % turns a 5 % move of a long cell from a verdict into none in the compare table, in the metrics' verdicts
    (the paper's) and in the A/A test's unpaired rate, and every rule hands those jobs config verdicts."""
    from pathlib import Path

    from analysis.metrics import compute_metrics
    from analysis.paired import unpaired_repeat
    from rooflab.config import load_schema
    from tests.test_metrics import ceilings, raw_row

    user = rules(min_rel_change=0.10, max_floor_long=0.2)
    ref = _rows([{"impl": "triton", "size": 4096, "median_ms": 0.100}])
    now = _rows([{"impl": "triton", "size": 4096, "median_ms": 0.105}])
    assert [compare(now, ref, rules=r).loc[0, "verdict"] for r in (rules(), user)] == ["slower", "same"]
    raw = pd.DataFrame([
        raw_row(impl="builtin", median_ms=0.105, rse_median=0.001),
        raw_row(impl="triton", median_ms=0.100, rse_median=0.001)
    ])
    assert [
        compute_metrics(raw, ceilings(), r).set_index("impl").loc["triton", "verdict_vs_builtin"]
        for r in (rules(), user)
    ] == ["faster", "tie"]
    repeat = pd.DataFrame({
        "kernel": ["gelu"],
        "impl": ["triton"],
        "dtype": ["float32"],
        "size": [4096],
        "pass": ["fwd"],
        "median_ms_1": [0.1],
        "median_ms_2": [0.105],
        "event_rel_diff": [0.05],
        "graph_median_ms_1": [np.nan],
        "graph_median_ms_2": [np.nan],
        "graph_rel_diff": [np.nan]
    })
    assert [unpaired_repeat(repeat, r).loc[0, "verdict"] for r in (rules(), user)] == ["slower", "tie"]
    # no second home: the compare rule's own settings hold no threshold, and every job judging takes config verdicts
    assert set(load_schema()["properties"]["compare"]["properties"]) == {"repeatability_file"}
    smk = "".join(p.read_text() for p in sorted((Path(__file__).parents[1] / "rules").glob("*.smk")))
    for rule in ("metrics_kernel", "paired_verdicts", "compare_reference", "paper_verdicts", "metrics_shapes",
                 "paper_shapes"):
        body = smk.split(f"rule {rule}:")[1].split("\nrule ")[0]
        assert 'config.get("verdicts"' in body, rule
