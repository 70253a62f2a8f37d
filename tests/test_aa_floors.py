"""The A/A floors (analysis/aa_floors.py): measured on pairs known identical, applied to every verdict of cells timed
apart, and their own A/A rate measured out of sample."""
import numpy as np
import pandas as pd
import pytest

from analysis.aa_floors import (UNPAIRED_METHOD, floor_columns, floors_table, lookup, noise_floor, quantile_floor,
                                unpaired_out_of_sample)
from rooflab.verdicts import FASTER, SLOWER, TIE, VerdictRules

RULES = VerdictRules(aa_floor_quantile=0.95, aa_floor_min_pairs=10)
# one cell's columns as the metrics hold them (the key judge_unpaired pairs implementations by)
CELL_ROW = {
    "gpu": "h200",
    "kernel": "gelu",
    "dtype": "bfloat16",
    "math_mode": "",
    "shape": "4096",
    "size": 4096,
    "pass": "fwd",
    "claimable": True,
    "rse_median": 0.001
}


def pairs(speedups, frame="gpu", cls="middle", source="repeatability"):
    return pd.DataFrame({
        "frame": frame,
        "size_class": cls,
        "speedup": speedups,
        "cell": [f"{source}{i}" for i in range(len(speedups))],
        "source": source
    })


def test_a_floor_is_the_quantile_of_what_identical_pairs_differ_by_and_needs_enough_pairs():
    s = np.exp(np.linspace(-0.1, 0.1, 21))  # |ln|: 0, then 0.01 to 0.1 twice each; the 95th percentile is 0.1
    assert quantile_floor(s, RULES) == pytest.approx(np.expm1(0.1), rel=1e-6)
    assert np.isnan(quantile_floor(s[:9], RULES))  # under aa_floor_min_pairs: no floor
    t = floors_table(pd.DataFrame(), pd.concat([pairs(s), pairs(s[:9], frame="loop")]), RULES)
    assert set(zip(t["frame"], t["bound"], t["pairs"])) == {("gpu", "all", 21), ("loop", "all", 9)}
    assert lookup(t, "unpaired") == {("gpu", "middle", "all"): pytest.approx(np.expm1(0.1), rel=1e-6)}
    assert lookup(t, "paired") == {}


def test_the_paired_floors_come_from_the_twins_only():
    table = pd.concat([
        pairs(np.full(12, 1.2)).assign(aa=""),  # an ordinary comparison: a real 1.2x, never a floor
        pairs(np.exp(np.linspace(-0.02, 0.02, 12))).assign(aa="twin")
    ])
    floors = lookup(floors_table(table, pd.DataFrame(), RULES), "paired")
    assert floors[("gpu", "middle", "all")] == pytest.approx(np.expm1(0.02 * 0.95 * 11 / 11), rel=0.1)


def test_the_unpaired_a_a_rate_is_measured_out_of_sample():
    """Twenty pairs within 1 % and one 6 % apart: judged with the floor of the other cells' pairs, the outlier is
    a false positive (in sample, its own difference would have raised the floor past it)."""
    s = np.r_[np.exp(np.linspace(-0.01, 0.01, 20)), 1.06]
    judged = unpaired_out_of_sample(pairs(s), RULES)
    assert (judged["method"] == UNPAIRED_METHOD).all()
    assert judged["verdict"].iloc[-1] == FASTER
    assert (judged["verdict"].iloc[:-1] == TIE).all()
    assert judged["aa_floor"].iloc[-1] < 0.02 < quantile_floor(s, VerdictRules(aa_floor_quantile=0.999))


def test_noise_floor_takes_the_run_floor_of_the_class_of_the_faster_side():
    rows = pd.DataFrame({"median_ms": [0.030, 0.030, 0.200], "rse_median": 0.0})
    base_ms = np.array([0.031, 0.005, 0.210])  # middle, short (the base is the faster side), long
    floors = {("gpu", "middle", "all"): 0.07, ("gpu", "short", "all"): 0.16, ("gpu", "long", "all"): 0.01}
    plain = noise_floor(rows, np.zeros(3), "median_ms", RULES, base_ms)  # the configured floor: the row's own length
    assert plain.tolist() == pytest.approx([RULES.min_rel_change] * 3)
    with_floors = noise_floor(rows.assign(**floor_columns(floors)), np.zeros(3), "median_ms", RULES, base_ms)
    assert with_floors.tolist() == pytest.approx([0.07, 0.16, max(0.01, RULES.min_rel_change)])


def test_the_metrics_verdicts_stay_within_the_run_floor():
    """Ours 5 % slower than the builtin in a 30 us cell: slower by the configured 2 % floor; a tie once the run's
    A/A pairs put the middle class's floor at 7 % (analysis/aa_floors.apply_floors, what results/metrics.parquet
    holds); a memory-bound cell takes its bound's own floor where measured."""
    from analysis.aa_floors import apply_floors
    from analysis.metrics import compute_metrics
    from tests.test_metrics import ceilings, raw_row

    raw = pd.DataFrame([
        raw_row(impl="builtin", median_ms=0.030, rse_median=0.001),
        raw_row(impl="triton", median_ms=0.0315, rse_median=0.001)
    ])
    ours = lambda m: m[m["impl"] == "triton"].iloc[0]  # noqa: E731
    m = compute_metrics(raw, ceilings(), RULES)
    assert ours(m)["verdict_vs_builtin"] == SLOWER and ours(m)["bound"] == "memory"
    floors = pd.DataFrame([("unpaired", "gpu", "middle", "all", 20, 0.07)],
                          columns=["rule", "frame", "size_class", "bound", "pairs", "floor"])
    floored = apply_floors(m, {"h200": floors}, RULES)
    assert ours(floored)["verdict_vs_builtin"] == TIE and ours(floored)["aa_floor_gpu_middle_all"] == 0.07
    assert ours(apply_floors(m, {"h100": floors}, RULES))["verdict_vs_builtin"] == SLOWER  # another GPU's: none
    own = pd.concat([floors, floors.assign(bound="memory", floor=0.01)])
    assert ours(apply_floors(m, {"h200": own}, RULES))["verdict_vs_builtin"] == SLOWER


def test_a_paired_verdict_is_judged_again_beyond_the_paired_floor():
    """A paired 4 % win, its interval clear of 1: faster; a tie beyond a paired A/A floor of 5 % (the unpaired
    rule's floor does not touch it)."""
    from analysis.aa_floors import apply_floors

    cell = CELL_ROW
    paired = {
        "paired_speedup_vs_builtin": 1.04,
        "paired_lo_vs_builtin": 1.03,
        "paired_hi_vs_builtin": 1.05,
        "paired_class_vs_builtin": "long"  # the rounds' class (analysis/metrics.apply_paired), whatever the sweep's
    }
    m = pd.DataFrame(
        [cell | {
            "impl": "builtin",
            "median_ms": 0.104
        }, cell | {
            "impl": "triton",
            "median_ms": 0.100
        } | paired])
    floors = pd.DataFrame([("paired", "gpu", "long", "all", 20, 0.05), ("unpaired", "gpu", "long", "all", 20, 0.001)],
                          columns=["rule", "frame", "size_class", "bound", "pairs", "floor"])
    assert apply_floors(m, {"h200": floors.iloc[1:]}, RULES)["verdict_vs_builtin"].iloc[1] == FASTER
    assert apply_floors(m, {"h200": floors}, RULES)["verdict_vs_builtin"].iloc[1] == TIE
    middle = m.assign(paired_class_vs_builtin=["", "middle"])  # judged in the rounds' class: no paired floor there
    assert apply_floors(middle, {"h200": floors}, RULES)["verdict_vs_builtin"].iloc[1] == FASTER


def test_rows_of_two_shape_sets_with_one_cell_key_are_judged_within_their_own_set():
    """The same shape in two sets: each set's Triton row against its own set's builtin (the llm set: ours 1.1x
    faster; the custom set: ours 0.9x), whatever the rows' order; rows come back in order."""
    from analysis.aa_floors import apply_floors

    cell = CELL_ROW
    m = pd.DataFrame([
        cell | {
            "preset": "llm",
            "impl": "builtin",
            "median_ms": 0.110
        }, cell | {
            "preset": "custom",
            "impl": "builtin",
            "median_ms": 0.090
        }, cell | {
            "preset": "llm",
            "impl": "triton",
            "median_ms": 0.100
        }, cell | {
            "preset": "custom",
            "impl": "triton",
            "median_ms": 0.100
        }
    ])
    floors = pd.DataFrame([("unpaired", "gpu", "long", "all", 20, 0.01)],
                          columns=["rule", "frame", "size_class", "bound", "pairs", "floor"])
    out = apply_floors(m, {"h200": floors}, RULES)
    assert out["preset"].tolist() == m["preset"].tolist()
    assert out["verdict_vs_builtin"].tolist()[2:] == [FASTER, SLOWER]


def test_compute_bound_pairs_get_a_floor_of_their_own():
    """Identical GEMMs timed apart at different clocks differ by up to 9 %, identical copies by 1 %: pooled, the
    copies' many pairs set the floor and the GEMMs' clock is a false positive; apart, each bound has its own, and a
    bound with too few pairs takes the pooled floor. Out of sample, the two GEMM pairs at the ends of their spread
    stay false positives either way (no other pair is as far apart); pooled, two more join them."""
    mem = pairs(np.exp(np.linspace(-0.01, 0.01, 40))).assign(bound="memory")
    gemm = pairs(np.exp(np.linspace(-0.09, 0.09, 12)), source="gemm").assign(bound="compute")
    floors = lookup(floors_table(pd.DataFrame(), pd.concat([mem, gemm]), RULES), "unpaired")
    assert floors[("gpu", "middle", "memory")] < 0.011 < floors[("gpu", "middle", "all")] < 0.09
    assert floors[("gpu", "middle", "compute")] > 0.08
    judged = unpaired_out_of_sample(pd.concat([mem, gemm], ignore_index=True), RULES)
    pooled = unpaired_out_of_sample(pd.concat([mem, gemm.assign(bound="")], ignore_index=True), RULES)
    assert (judged["verdict"] != TIE).sum() == 2 < (pooled["verdict"] != TIE).sum() == 4  # out of sample: the ends
    few = floors_table(pd.DataFrame(), pd.concat([mem, gemm.iloc[:5]]), RULES)
    assert np.isnan(few.set_index(["bound"]).loc["compute", "floor"])


def test_the_papers_a_a_sentence_gives_the_floors_and_the_error_without_them():
    from analysis.verdict_tables import aa_sentence, unpaired_caveat

    rows = [("unpaired", "gpu", "middle", 10, 6, 4), (UNPAIRED_METHOD, "gpu", "middle", 10, 9, 1)]
    rates = pd.DataFrame(rows, columns=["method", "frame", "size_class", "pairs", "tie", "false_positive"])
    rates = rates.assign(not_comparable=0, tie_rate=rates["tie"] / rates["pairs"],
                         false_positive_rate=rates["false_positive"] / rates["pairs"])
    floors = pd.DataFrame([("unpaired", "gpu", "middle", "all", 10, 0.074),
                           ("unpaired", "gpu", "long", "all", 25, 0.01),
                           ("unpaired", "gpu", "long", "compute", 15, 0.041),
                           ("unpaired", "loop", "middle", "all", 3, np.nan)],
                          columns=["rule", "frame", "size_class", "bound", "pairs", "floor"])
    text = aa_sentence(rates, "h200", floors)
    assert "of 10 pairs timed apart, the unpaired rule called 1 pair faster or slower" in text
    assert "A/A floors on the H200 (Table~\\ref{tab:aa-floors}) run from 1\\,\\% to 7.4\\,\\%." in text
    from analysis.verdict_tables import floors_table_tex
    table = floors_table_tex(floors)
    assert "GPU time & long & 25 & 1 & -- & 4.1" in table and "GPU time & middle & 10 & 7.4 & -- & --" in table
    assert "Python loop & middle & 3 & -- & -- & --" in table
    assert "Without them the rule called 40\\,\\% of the same pairs different." in text
    assert "erred on 10\\,\\% of these identical pairs" in text
    assert unpaired_caveat(rates, "h200") == ("The H200's verdicts compare cells timed apart beyond floors measured "
                                              "on identical pairs, a rule that called 10\\,\\% of identical pairs "
                                              "different (each pair judged against floors from the other cells' "
                                              "pairs).")


def test_pairs_of_two_sources_take_their_bound_from_their_cells():
    """The sweep's GEMM pairs carry their bound; the repeatability table's pairs (no bound column: NaN once the two
    are concatenated) take their cell's from the raw rows."""
    from analysis.aa_floors import with_bound

    raw = pd.DataFrame({
        "gpu": "h200",
        "kernel": "gelu",
        "impl": "builtin",
        "dtype": "bfloat16",
        "size": [256, 8192],
        "pass": "fwd",
        "compute_unit": "bf16",
        "flops": [1e5, 1e8],
        "bytes": [1e5, 1e8]
    })
    repeat = pd.DataFrame({
        "kernel": "gelu",
        "impl": "builtin",
        "dtype": "bfloat16",
        "size": [256, 8192],
        "pass": "fwd",
        "speedup": 1.0
    })
    gemm = pd.DataFrame({"speedup": [1.0], "bound": ["compute"]})
    got = with_bound(pd.concat([gemm, repeat], ignore_index=True), raw)
    assert got["bound"].tolist() == ["compute", "memory", "memory"]


def test_the_tied_fastest_use_the_same_floor_as_the_verdicts():
    """A compute-bound cell 2.2 % behind the fastest: beyond the pooled long floor (1 %) and the set one (2 %), but
    within the compute-bound cells' own (4.1 %), as its verdict is: both are named fastest."""
    from analysis.claims import tied_best

    cell = pd.DataFrame({
        "impl": ["compile", "builtin"],
        "median_ms": [2.86, 2.86 * 1.022],
        "rse_median": 0.001,
        "bound": "compute",
        "aa_floor_gpu_long_all": 0.0099,
        "aa_floor_gpu_long_compute": 0.041
    })
    assert tied_best(cell)["impl"].tolist() == ["compile", "builtin"]
    assert tied_best(cell.drop(columns="bound"))["impl"].tolist() == ["compile"]
