"""Paired, interleaved verdicts (rooflab/paired.py, rooflab/verdicts.py, analysis/paired.py): a clock that drifts
while cells are timed one after the other makes the unpaired rule declare a winner between identical kernels; the
paired rounds call them a tie and still see a real difference."""
import math

import numpy as np
import pandas as pd
import pytest

from rooflab.paired import PairedConfig, Side, order, run_rounds
from rooflab.timing import TimingConfig, measure
from rooflab.verdicts import (FASTER, NOT_COMPARABLE, SLOWER, TIE, VerdictRules, paired_speedup, paired_verdict,
                              t_quantile, unpaired_verdict)


class DriftingClockTimer:
    """A simulated GPU whose SM clock falls linearly from 1980 to 1500 MHz over ``span_ms`` of its own time (as the
    H200's fell under load), then stays there. A call's time is its work (ms at 1980 MHz) scaled by the clock, with
    a little seeded noise; every sample, warm-up and loop advances the simulated time."""

    name = "drifting"

    def __init__(self, span_ms=1000.0, noise=0.002, seed=0):
        self.t_ms, self.span_ms, self.rng = 0.0, span_ms, np.random.default_rng(seed)
        self.noise, self.loops = noise, []

    def sm_clock_mhz(self):
        return 1980.0 - 480.0 * min(self.t_ms / self.span_ms, 1.0)

    def _call(self, fn):
        ms = fn() * 1980.0 / self.sm_clock_mhz() * (1 + self.noise * self.rng.standard_normal())
        self.t_ms += ms + 0.05  # the flush and hold between samples
        return ms

    def sample(self, fn, n):
        return [self._call(fn) for _ in range(n)]

    def warmup(self, fn, warmup_ms):
        self.t_ms += warmup_ms

    def loop(self, fn, min_ms, repeats=3):
        self.loops.append(repeats)
        per_call = [self._call(fn) for _ in range(max(3, int(min_ms / max(fn(), 1e-6))))]
        return float(np.median(per_call))

    def seconds(self):
        return self.t_ms / 1e3


def work(ms):
    """An implementation whose call takes ``ms`` at 1980 MHz (the simulated timer reads it from the call)."""
    return lambda: ms


UNPAIRED = TimingConfig(warmup_ms=5, min_samples=10, max_samples=2000, target_rse=0.005, max_time_s=0.2, instances=1,
                        loop_ms=0, placements=1)
PAIRED = PairedConfig(rounds=12, min_rounds=12, event_samples=4, loop_ms=1.0, warmup_ms=5, max_group_s=60)


def unpaired(a_ms, b_ms, timer, gap_ms=200.0):
    """A timed in full, then B, each its own cell as the sweep times them, with ``gap_ms`` of the rest of a cell
    between their samples (compile, float64 check, graph and loop frames: 0.5-2 s a cell on the H200): the speedup
    of A over B and the unpaired rule's verdict."""
    a = measure(work(a_ms), timer, UNPAIRED, clock=timer.seconds)
    timer.t_ms += gap_ms
    b = measure(work(b_ms), timer, UNPAIRED, clock=timer.seconds)
    speedup = b["median_ms"] / a["median_ms"]
    return speedup, unpaired_verdict(speedup, a["rse_median"], b["rse_median"], floor=0.02), a, b


def paired(a_ms, b_ms, timer, frame="gpu"):
    rows = pd.DataFrame(
        run_rounds([Side("a", [work(a_ms)]), Side("b", [work(b_ms)])], timer, PAIRED, clock_probe=timer.sm_clock_mhz,
                   clock=timer.seconds))
    rows = rows[rows["frame"] == frame]
    s = paired_speedup(rows[rows["impl"] == "a"].set_index("round")["ms"],
                       rows[rows["impl"] == "b"].set_index("round")["ms"])
    return s, paired_verdict(s["speedup"], s["lo"], s["hi"], s["half_width"], "long"), rows


def test_drifting_clock_unpaired_declares_a_winner_paired_says_tie():
    speedup, verdict, a, b = unpaired(1.0, 1.0, DriftingClockTimer())
    assert verdict == FASTER and speedup > 1.03  # identical kernels, A "faster": it ran at the higher clock
    assert a["sm_clock_samples_mhz"] > b["sm_clock_samples_mhz"] + 50  # and the rows say so
    for frame in ("gpu", "loop"):
        s, verdict, rows = paired(1.0, 1.0, DriftingClockTimer(), frame)
        assert verdict == TIE, (frame, s)
        assert abs(s["speedup"] - 1) < 0.005
        assert s["lo"] <= 1.0 <= s["hi"]  # no difference shown at all: the alternation cancelled the drift
        assert rows["sm_clock_mhz"].between(1500, 1980).all()


def test_paired_rounds_still_see_a_real_difference_under_the_drift():
    for b_ms, expected in ((1.05, FASTER), (0.95, SLOWER)):
        s, verdict, _ = paired(1.0, b_ms, DriftingClockTimer())
        assert verdict == expected, s
        assert abs(s["speedup"] - b_ms) < 0.01


def test_rounds_alternate_their_order():
    assert order(["a", "b", "c"], 0) == ["a", "b", "c"]
    assert order(["a", "b", "c"], 1) == ["c", "b", "a"]
    seen = []

    class Recording(DriftingClockTimer):

        def sample(self, fn, n):
            seen.append(fn.fns[0]())
            return super().sample(fn, n)

    run_rounds([Side("a", [work(1.0)]), Side("b", [work(2.0)])], Recording(), PAIRED)
    assert seen[:4] == [1.0, 2.0, 2.0, 1.0]


def test_one_side_is_no_session():
    assert run_rounds([Side("a", [work(1.0)])], DriftingClockTimer(), PAIRED) == []


def test_rounds_stop_at_the_group_budget_after_min_rounds():
    cfg = PairedConfig(rounds=50, min_rounds=3, event_samples=2, loop_ms=0, warmup_ms=1, max_group_s=0.05)
    timer = DriftingClockTimer()
    rows = run_rounds([Side("a", [work(5.0)]), Side("b", [work(5.0)])], timer, cfg, clock=timer.seconds)
    rounds = {r["round"] for r in rows}
    assert 3 <= len(rounds) < 50


def test_t_quantile():
    assert t_quantile(0.95, 4) == pytest.approx(2.776, abs=1e-3)
    assert t_quantile(0.99, 11) == pytest.approx(3.106, abs=1e-3)


def test_paired_speedup_interval():
    a = [1.0, 1.01, 0.99, 1.0]
    b = [2.0, 2.02, 1.98, 2.0]
    s = paired_speedup(a, b, 0.99)
    assert s["speedup"] == pytest.approx(2.0) and s["rounds"] == 4
    assert s["half_width"] == pytest.approx(0.0, abs=1e-9)
    s = paired_speedup([1.0, 1.1, 0.9], [1.0, 1.0, 1.0], 0.95)
    d = np.log([1.0, 1.1, 0.9])
    q = t_quantile(0.95, 2) * d.std(ddof=1) / math.sqrt(3)
    assert s["lo"] == pytest.approx(math.exp(-d.mean() - q)) and s["hi"] == pytest.approx(math.exp(-d.mean() + q))
    assert math.isnan(paired_speedup([1.0], [1.0])["speedup"])
    assert paired_speedup([1.0, np.nan, 1.0], [1.0, 1.0, 1.0])["rounds"] == 2


@pytest.mark.parametrize("speedup, lo, hi, cls, expected",
                         [(1.10, 1.08, 1.12, "long", FASTER), (0.90, 0.88, 0.92, "long", SLOWER),
                          (1.03, 0.99, 1.07, "long", TIE),  # the interval holds 1
                          (1.005, 1.002, 1.008, "long", TIE),  # beyond noise but under the least effect named (1 %)
                          (1.025, 1.021, 1.029, "short", TIE),  # short cells: 3 %
                          (1.035, 1.031, 1.039, "short", FASTER), ])
def test_paired_verdict(speedup, lo, hi, cls, expected):
    half = (hi / lo)**0.5 - 1
    assert paired_verdict(speedup, lo, hi, half, cls) == expected


def test_wide_intervals_are_not_comparable():
    rules = VerdictRules()
    assert paired_verdict(1.0, 0.85, 1.18, 0.09, "short", rules) == TIE  # within the 10 % a short cell may have
    assert paired_verdict(1.0, 0.8, 1.25, 0.12, "short", rules) == NOT_COMPARABLE
    assert paired_verdict(1.0, 0.93, 1.07, 0.06, "middle", rules) == NOT_COMPARABLE  # 10-50 us: at most 5 %
    assert paired_verdict(float("nan"), 1, 1, 0, "long") == ""


def test_a_difference_shown_is_a_verdict_however_wide_its_interval():
    """A 2x loss with an interval of 1.5-2.7 is a loss, not 'not comparable': width only matters where no
    difference was shown."""
    assert paired_verdict(0.5, 0.37, 0.67, 0.35, "long") == SLOWER
    assert paired_verdict(2.0, 1.5, 2.7, 0.35, "short") == FASTER
    assert paired_verdict(1.06, 0.99, 1.13, 0.07, "long") == NOT_COMPARABLE


def test_size_classes_follow_the_settings():
    rules = VerdictRules.from_config({"short_cell_us": 10, "long_cell_us": 50, "level": None})
    assert list(rules.size_class([5, 10, 49.9, 50])) == ["short", "middle", "middle", "long"]
    assert rules.size_class(5) == "short"
    assert rules.level == VerdictRules().level


def rounds_frame(pairs):
    """Paired rounds as the sweep writes them: pairs {(impl, copy): [ms per round]} of one matmul session."""
    rows = [{
        "gpu": "h200",
        "run_id": "r",
        "kernel": "matmul",
        "dtype": "bfloat16",
        "shape": "4096x4096x4096",
        "size": 4096,
        "pass": "fwd",
        "preset": "square",
        "session": "all",
        "impl": impl,
        "copy": copy,
        "round": r,
        "frame": "gpu",
        "ms": ms,
        "sm_clock_mhz": 1700.0 + r
    } for (impl, copy), times in pairs.items() for r, ms in enumerate(times)]
    return pd.DataFrame(rows)


def test_verdict_table_pairs_and_aa_kinds():
    from analysis.paired import aa_rates, verdict_table

    flat = [0.2, 0.2, 0.2, 0.2, 0.2, 0.2]
    t = verdict_table(
        rounds_frame({
            ("naive", 0): flat,
            ("builtin", 0): flat,
            ("builtin", 1): flat,
            ("triton", 0): [0.18] * 6
        }))
    by = {(r.impl, r.copy, r.base): r for r in t.itertuples()}
    assert by[("naive", 0, "builtin")].aa == "same kernels"
    assert by[("builtin", 1, "builtin")].aa == "twin"
    assert by[("triton", 0, "builtin")].aa == "" and by[("triton", 0, "builtin")].verdict == FASTER
    assert by[("triton", 0, "naive")].speedup == pytest.approx(0.2 / 0.18)
    assert ("builtin", 0, "naive") not in by  # the inverse of naive against builtin
    assert by[("triton", 0, "builtin")].sm_clock_impl_mhz == pytest.approx(1702.5)
    rates = aa_rates(t, pd.DataFrame())
    assert set(rates["source"]) == {"same kernels", "twin"}
    assert (rates["tie_rate"] == 1.0).all() and (rates["false_positive"] == 0).all()


def test_aa_rates_count_false_positives():
    from analysis.paired import aa_rates, verdict_table

    t = verdict_table(rounds_frame({("builtin", 0): [0.2] * 6, ("builtin", 1): [0.21] * 6}))
    rates = aa_rates(t, pd.DataFrame())
    (row, ) = rates.itertuples()
    assert row.false_positive == 1 and row.tie_rate == 0.0


def test_aa_floors_from_twins_judge_the_other_comparisons_and_the_twins_out_of_sample():
    from analysis.paired import aa_floors, aa_rates, with_aa_floors

    rng = np.random.default_rng(0)
    rows = []
    for k, off in enumerate((1.03, 1 / 1.03, 1.03, 1.08)):  # each twin off in every round (a set-up difference)
        for impl, copy, ms in (("builtin", 0, 0.2), ("builtin", 1, 0.2 * off), ("triton", 0, 0.2 / 1.04), ("compile", 0,
                                                                                                           0.2 / 1.5)):
            for r in range(12):
                rows.append({
                    "gpu": "h100",
                    "run_id": "r",
                    "kernel": f"k{k}",
                    "dtype": "float32",
                    "shape": "4096",
                    "size": 4096,
                    "pass": "fwd",
                    "preset": "square",
                    "session": "all",
                    "impl": impl,
                    "copy": copy,
                    "round": r,
                    "frame": "graph",
                    "ms": ms * (1 + 0.001 * rng.standard_normal()),
                    "sm_clock_mhz": 1980.0
                })
    from analysis.paired import verdict_table

    t = verdict_table(pd.DataFrame(rows))
    rules = VerdictRules(aa_floor_min_pairs=3)
    assert (t.loc[t["aa"] == "twin", "verdict"] != TIE).all()  # the interval alone calls every twin a win
    floors = aa_floors(t, rules)
    assert 0.07 < floors[("graph", "long")] < 0.08  # near the largest twin's 8 %
    assert aa_floors(t, VerdictRules(aa_floor_min_pairs=5)) == {}  # four twins: too few for a floor
    assert 0.03 < aa_floors(t, rules, leave_out="k3")[("graph", "long")] < 0.031
    j = with_aa_floors(t, rules)
    real = j[j["aa"] == ""].set_index("impl")
    assert (real.loc["triton", "verdict"] == TIE).all()  # 4 %: inside the floor
    assert (real.loc["triton", "verdict_interval"] == FASTER).all()
    assert (real.loc["compile", "verdict"] == FASTER).all()
    twins = j[j["aa"] == "twin"].set_index("kernel")["verdict"]
    assert (twins[["k0", "k1", "k2"]] == TIE).all()  # judged with the others' floor, near 8 %
    assert twins[
        "k3"] == SLOWER  # the twin 8 % slower, against the others' 3 %: out of sample, a false positive the rate counts
    rates = aa_rates(j, pd.DataFrame()).set_index("method")
    assert rates.loc["paired", "false_positive"] == 1 and rates.loc["paired, interval only", "false_positive"] == 4


def test_unpaired_rule_on_the_repeatability_table():
    from analysis.paired import unpaired_repeat

    repeat = pd.DataFrame([{
        "kernel": "gelu",
        "impl": "builtin",
        "dtype": "bfloat16",
        "size": 4096,
        "pass": "fwd",
        "median_ms_1": 0.03,
        "median_ms_2": 0.0315,
        "graph_median_ms_1": 0.03,
        "graph_median_ms_2": 0.0301,
        "event_rel_diff": 0.05,
        "graph_rel_diff": 0.0033
    }])
    t = unpaired_repeat(repeat).set_index("frame")
    assert t.loc["gpu", "verdict"] == SLOWER and t.loc["graph", "verdict"] == TIE
    assert t.loc["gpu", "size_class"] == "middle"


def test_measure_records_the_clock_its_samples_ran_at():
    timer = DriftingClockTimer(span_ms=200.0)
    out = measure(work(1.0), timer, UNPAIRED, clock=timer.seconds)
    assert 1500 <= out["sm_clock_samples_min_mhz"] < out["sm_clock_samples_mhz"] < out["sm_clock_samples_max_mhz"]
    assert out["sm_clock_samples_max_mhz"] <= 1980


def test_sweep_writes_paired_rounds_with_a_twin_and_resumes(tmp_path):
    """experiments/measure.py on the CPU: one session per cell group, every ok implementation and the builtin's
    twin as sides; a second run reuses the stored sessions instead of timing them again."""
    from experiments import measure as job

    out = tmp_path / "raw" / "cpu" / "gelu.parquet"
    params = {
        "sizes": [64],
        "dtypes": ["float32"],
        "impls": ["naive", "builtin", "triton"],
        "timing": {
            "warmup_ms": 1,
            "min_samples": 3,
            "max_time_s": 0.02,
            "loop_ms": 0.2,
            "placements": 2
        },
        "interpret_max_size": 64,
        "allow_failures": True,
        "paired": {
            "rounds": 3,
            "min_rounds": 2,
            "event_samples": 2,
            "loop_ms": 0.2,
            "warmup_ms": 1
        }
    }
    assert job.run("gelu", "cpu", str(out), params, progress=False) == 0
    rounds = pd.read_parquet(tmp_path / "raw" / "cpu" / "paired" / "gelu.parquet")
    sides = set(zip(rounds["impl"], rounds["copy"]))
    assert sides == {("naive", 0), ("builtin", 0), ("builtin", 1)}  # triton is not timed under the interpreter
    assert set(rounds["frame"]) == {"gpu", "loop"} and rounds["round"].max() >= 1
    assert (rounds["session"] == "all").all() and (rounds["paired_rounds"] == 3).all()
    store = tmp_path / "raw" / "cpu" / ".cells" / "gelu.paired.jsonl"
    assert len(store.read_text().splitlines()) == 2  # the session's start, then its rounds
    assert job.run("gelu", "cpu", str(out), params, progress=False) == 0
    assert len(store.read_text().splitlines()) == 2  # reused, not timed again
    again = pd.read_parquet(tmp_path / "raw" / "cpu" / "paired" / "gelu.parquet")
    assert len(again) == len(rounds)


def test_paired_off_writes_an_empty_table(tmp_path):
    from experiments import measure as job
    from rooflab.paired import ROUND_COLUMNS

    out = tmp_path / "gelu.parquet"
    params = {
        "sizes": [64],
        "dtypes": ["float32"],
        "impls": ["naive", "builtin"],
        "timing": {
            "warmup_ms": 1,
            "min_samples": 3,
            "max_time_s": 0.02,
            "loop_ms": 0
        },
        "allow_failures": True,
        "paired": {
            "enabled": False
        }
    }
    assert job.run("gelu", "cpu", str(out), params, progress=False) == 0
    rounds = pd.read_parquet(tmp_path / "paired" / "gelu.parquet")
    assert rounds.empty and set(ROUND_COLUMNS) <= set(rounds.columns)


def test_the_papers_verdict_tables(tmp_path):
    """table_aa, table_matmul_verdicts and their macros from an A/A table, a paired table and metrics."""
    from analysis.paired import aa_rates, verdict_table
    from analysis.verdict_tables import main

    rounds = rounds_frame({
        ("naive", 0): [0.2] * 6,
        ("builtin", 0): [0.2] * 6,
        ("builtin", 1): [0.2] * 6,
        ("triton", 0): [0.18] * 6
    }).assign(size=8192, shape="8192x8192x8192")
    table = verdict_table(rounds)
    table.to_parquet(tmp_path / "h200.parquet")
    aa_rates(table, pd.DataFrame()).to_csv(tmp_path / "aa_h200.csv", index=False)
    metrics = pd.DataFrame([{
        "gpu": "h200",
        "kernel": "matmul",
        "status": "ok",
        "dtype": "bfloat16",
        "size": 8192,
        "impl": impl,
        "median_ms": ms,
        "sm_clock_mhz": mhz
    } for impl, ms, mhz in (("builtin", 0.2, 1600.0), ("naive", 0.187, 1850.0), ("triton", 0.18, 1800.0))])
    metrics.to_parquet(tmp_path / "metrics.parquet")
    out = tmp_path / "gen"
    assert main([
        "--aa",
        str(tmp_path / "aa_h200.csv"), "--paired",
        str(tmp_path / "h200.parquet"), "--metrics",
        str(tmp_path / "metrics.parquet"), "--outdir",
        str(out)
    ]) == 0
    mm = (out / "table_matmul_verdicts.tex").read_text()
    assert "1850/1600" in mm and "1.07" in mm  # the naive GEMM 7 % "faster" timed apart, at 250 MHz more
    assert "tie" in mm and "faster" in mm
    macros = (out / "macros_verdicts.tex").read_text()
    assert "\\newcommand{\\AAPairedTieMinHTwoHundred}{100}" in macros
    assert "\\newcommand{\\AAPairedGroupsMeetingGoalHTwoHundred}{2 of 2}" in macros
    assert "twice" in (out / "table_aa.tex").read_text()
    sentence = next(line for line in macros.splitlines() if "AASentence" in line)
    assert "On the H200, of 2 pairs timed in paired rounds, the paired rule called 0 pairs faster or slower" \
        in sentence and "reach 95\\,\\%)" in sentence and "\\,\\,\\%" not in sentence


def test_long_calls_take_shorter_turns():
    from rooflab.paired import turn_plan

    cfg = PairedConfig(event_samples=4)
    assert turn_plan(cfg, 0.05, 4) == (4, 3)  # short calls: every placement, three loop repeats
    assert turn_plan(cfg, float("nan"), 2) == (4, 3)
    assert turn_plan(cfg, 4.0, 4) == (2, 1)  # 4 x 2 ms of samples
    assert turn_plan(cfg, 40.0, 4) == (1, 1)
    seen = []

    class Counting(DriftingClockTimer):

        def sample(self, fn, n):
            seen.append(n)
            return super().sample(fn, n)

    timer = Counting()
    run_rounds([Side("a", [work(40.0)]), Side("b", [work(40.0)])], timer, PAIRED, call_ms=40.0)
    assert set(seen) == {1} and set(timer.loops) == {1}


def test_stored_sessions_that_crashed_failed_or_paired_other_sides_run_again(tmp_path):
    import json

    from rooflab.paired import load_sessions, session_key

    path = tmp_path / "k.paired.jsonl"
    g = ["bfloat16", "64", "fwd"]

    def rec(sides, **kw):
        return json.dumps({
            "group": g,
            "session": "all",
            "sides": sides,
            "rows": [{
                "ms": 1.0
            }],
            "error": "",
            "_identity": "x",
            **kw
        })

    path.write_text("\n".join([
        rec(["builtin", "naive"], started=True),
        rec(["builtin", "naive"]),  # ended: kept
        rec(["builtin", "triton"], started=True),  # crashed inside its rounds: left out
        rec(["builtin", "compile"], started=True),
        rec(["builtin", "compile"], error="OutOfMemoryError"),  # failed
        rec(["builtin", "cuda"]).replace('"_identity": "x"', '"_identity": "other code"'), "not json"
    ]) + "\n")
    got = load_sessions(path, "x")
    assert list(got) == [session_key(g, "all", ["naive", "builtin"])]


def test_a_session_that_fails_loses_nothing_and_runs_again(tmp_path, monkeypatch):
    """A paired session that raises (a CUDA error, out of memory) is recorded with its error; the sweep's parquet is
    written all the same, and the next run tries the session again."""
    from experiments import measure as job
    from rooflab import paired as paired_mod

    def broken(*a, **kw):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(paired_mod, "run_rounds", broken)
    out = tmp_path / "raw" / "cpu" / "gelu.parquet"
    params = {
        "sizes": [64],
        "dtypes": ["float32"],
        "impls": ["naive", "builtin"],
        "timing": {
            "warmup_ms": 1,
            "min_samples": 3,
            "max_time_s": 0.02,
            "loop_ms": 0.2
        },
        "allow_failures": True,
        "paired": {
            "rounds": 2,
            "min_rounds": 2,
            "event_samples": 1,
            "loop_ms": 0.1,
            "warmup_ms": 1
        }
    }
    assert job.run("gelu", "cpu", str(out), params, progress=False) == 0
    assert len(pd.read_parquet(out)) == 2 and pd.read_parquet(tmp_path / "raw/cpu/paired/gelu.parquet").empty
    store = tmp_path / "raw" / "cpu" / ".cells" / "gelu.paired.jsonl"
    assert "illegal memory access" in store.read_text()
    monkeypatch.undo()
    assert job.run("gelu", "cpu", str(out), params, progress=False) == 0  # the cells reused, the session again
    assert not pd.read_parquet(tmp_path / "raw/cpu/paired/gelu.parquet").empty


def test_verdicts_timed_apart_carry_their_a_a_error():
    """Where a GPU has no pairs timed in paired rounds, the A/A sentence and the abstract say every verdict on it is
    the unpaired rule's and give that rule's error on the identical pairs (3 of 10, the worst group 2 of 4); with
    paired pairs, the abstract says nothing."""
    from analysis.verdict_tables import aa_sentence, unpaired_caveat

    rows = [("unpaired", "gpu", "short", 6, 5, 1), ("unpaired", "loop", "middle", 4, 2, 2)]
    rates = pd.DataFrame(rows, columns=["method", "frame", "size_class", "pairs", "tie", "false_positive"])
    rates = rates.assign(not_comparable=0, tie_rate=rates["tie"] / rates["pairs"],
                         false_positive_rate=rates["false_positive"] / rates["pairs"])
    text = aa_sentence(rates, "h200")
    assert "No implementation was timed in paired rounds on the H200" in text
    assert "erred on 30\\,\\% of these identical pairs, 50\\,\\% in the worst group (Python loop, middle" in text
    assert unpaired_caveat(rates, "h200") == ("The H200's verdicts compare cells timed apart, a rule that called "
                                              "30\\,\\% of identical pairs different.")
    paired = pd.concat([rates, rates.assign(method="paired")], ignore_index=True)
    assert unpaired_caveat(paired, "h200") == "" and "No implementation" not in aa_sentence(paired, "h200")


def test_a_session_recorded_as_hung_is_kept_and_not_paired_again(tmp_path):
    """PairedSweep.hung (the stall watch's on_exit) records the session in its rounds as hung; load_sessions keeps
    it, error and all, so the rerun does not hang on it again; with no session running it writes nothing."""
    import json

    import types

    from rooflab.paired import PairedConfig, PairedSweep, load_sessions, session_key

    path = tmp_path / "k.paired.jsonl"
    sweep = PairedSweep(types.SimpleNamespace(name="k"), [], "cuda", None, PairedConfig(), None, path, "x")
    sweep.hung("hung: never")
    assert not path.exists()
    g = ("float32", "1793x1793x1793", "fwd")
    sweep.running = {"group": list(g), "session": "all", "sides": ["builtin", "triton"], "rows": [], "error": ""}
    sweep._append({**sweep.running, "started": True})
    sweep.hung("hung: the paired rounds ran past 720 s")
    assert [json.loads(line).get("hung") for line in path.read_text().splitlines()] == [None, True]
    got = load_sessions(path, "x")
    assert list(got) == [session_key(g, "all", ["triton", "builtin"])]
    assert got[session_key(g, "all", ["triton", "builtin"])]["error"].startswith("hung:")


def test_a_session_the_watch_stops_is_recorded_hung_from_inside_its_rounds(tmp_path, monkeypatch):
    """PairedSweep._session marks the session it runs (``running``), so the stall watch's on_exit, called while the
    rounds wait, writes that session as hung; the next run loads it as ended and does not pair the group again."""
    import types

    from rooflab import paired as paired_mod
    from rooflab.cell import Cell
    from rooflab.paired import PairedConfig, PairedSweep, load_sessions, session_key

    path = tmp_path / "k.paired.jsonl"
    cells = [Cell("k", impl, "float32", 64, shape=(64, 64)) for impl in ("builtin", "triton")]
    sweep = PairedSweep(types.SimpleNamespace(name="k"), cells, "cuda", types.SimpleNamespace(cudagraph=False),
                        PairedConfig(twin="naive"), None, path, "x")

    def waits_forever(sides, timer, cfg, **kw):  # what the watch's thread does meanwhile, then the process would end
        sweep.hung("hung: the paired rounds ran past 360 s and stopped the process")
        raise SystemExit(75)

    monkeypatch.setattr(paired_mod, "run_rounds", waits_forever)
    ok = {"status": "ok", "median_ms": 1.0, "shape": "64x64", "size": 64}
    sweep.after_cell(cells[0], ok, [lambda: None])
    with pytest.raises(SystemExit):
        sweep.after_cell(cells[1], ok, [lambda: None])
    key = session_key(("float32", "64x64", "fwd"), "all", ["builtin", "triton"])
    got = load_sessions(path, "x")
    assert list(got) == [key] and got[key]["hung"] and got[key]["error"].startswith("hung:")
