"""Nsight Compute's raw page read into facts per GPU kernel and matched to the calls profiled (rooflab/ncu.py,
experiments/why_ncu.py), on a synthetic fixture in ncu's layout (tests/data/ncu_raw_synthetic.csv: not a
measurement); and the paper's sentences and table from such rows (analysis/why_ncu.py)."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rooflab import ncu

FIXTURE = Path(__file__).parent / "data" / "ncu_raw_synthetic.csv"
CALLS = [{
    "kernel": "softmax",
    "impl": "builtin",
    "dtype": "bfloat16",
    "size": 8192,
    "pass": "fwd",
    "error": ""
}, {
    "kernel": "softmax",
    "impl": "triton",
    "dtype": "bfloat16",
    "size": 8192,
    "pass": "fwd",
    "error": ""
}, {
    "kernel": "matmul",
    "impl": "builtin",
    "dtype": "tf32",
    "size": 8192,
    "pass": "fwd",
    "error": ""
}]


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


# ---------------------------------------------------------------------------------------------------- the paper


def why_rows():
    """Synthetic rows as experiments/why_ncu.table writes them: the fixture's softmax and cuBLAS calls, and ours
    for the matrix product made of cuBLAS's rows with the instruction mix of an FFMA kernel."""
    from experiments.why_ncu import table

    w = table(FIXTURE.read_text(), CALLS, "h200")
    ours = w[w["kernel"] == "matmul"].iloc[:1].assign(impl="triton", duration_us=20000.0, tensor_inst=0.0,
                                                      hmma_inst=0.0, gmma_inst=0.0, ffma_thread_inst=2.2e12,
                                                      short_name="matmul_kernel")
    return pd.concat([w, ours], ignore_index=True)


def test_calls_sum_and_weight_over_a_calls_kernels():
    from analysis.why_ncu import calls

    c = calls(why_rows()).set_index(["kernel", "impl"])
    gemm = c.loc[("matmul", "builtin")]
    assert gemm["kernels"] == 2 and gemm["duration_us"] == pytest.approx(9800 + 350)
    assert gemm["dram_pct"] == pytest.approx((15 * 9800 + 88 * 350) / 10150)  # weighted by duration
    assert gemm["main_short_name"].startswith("sm90_xmma_gemm")  # the longest kernel's facts
    assert c.loc[("softmax", "triton"), "kernels"] == 1


def test_gap_sentence_states_both_sides_with_their_numbers():
    from analysis.why_ncu import calls, gap_sentence

    s = gap_sentence(calls(why_rows()), ["softmax"])
    assert "the builtin (\\texttt{cunn\\_\\allowbreak{}SoftMaxForward}, 1{,}460~\\textmu s) reaches 41\\,\\% of DRAM" in s
    assert "at 38\\,\\% achieved occupancy (50\\,\\% theoretical, limited by registers" in s
    assert "ours (\\texttt{\\_\\allowbreak{}softmax\\_\\allowbreak{}kernel}, 377~\\textmu s) reaches 89\\,\\%" in s
    assert "limited by shared memory" in s and "top stall: long scoreboard" in s
    assert f"{1460.0005 / 377:.3g}$\\times$ ours under the profiler" in s
    assert f"for {248.512 / 242:.3g}$\\times$ our DRAM bytes" in s


def test_counts_agree_with_their_nouns():
    from analysis.why_ncu import calls, matmul_sentence

    s = matmul_sentence(calls(why_rows()))
    assert "cuBLAS (2 kernels, 10{,}150~\\textmu s; the longest" in s  # two kernels: plural
    assert "ours (\\texttt{matmul\\_\\allowbreak{}kernel}, 20{,}000~\\textmu s) runs its math on the FMA units" in s
    assert "FFMA thread instructions; no tensor-core instruction)" in s
    assert "2.2 trillion" not in s and "2{,}200 billion FFMA thread instructions" in s
    assert "issues 4.19 million tensor-core (HMMA/HGMMA) warp instructions and 0 FFMA" in s
    assert "1 kernels" not in s and "a 1 kernel" not in s
    assert f"ours takes {20000 / 10150:.3g}$\\times$ cuBLAS's time" in s


def test_without_rows_every_sentence_and_table_says_not_measured():
    from analysis.latex import Macros
    from analysis.why_ncu import why_ncu_macros, why_ncu_tables
    from analysis.why_tables import NOT_MEASURED

    m = Macros()
    why_ncu_macros(m, None)
    lines = [line for line in m.lines if "WhyNcuOn" not in line and "WhyNcuOtherCard" not in line]
    assert len(lines) == 5 and all(NOT_MEASURED in line for line in lines)
    assert "\\newcommand{\\WhyNcuOn}{}" in m.text()  # no card named where nothing was measured
    assert "layernorm's and rmsnorm's kernels" in m.text()  # both missing: one sentence
    assert NOT_MEASURED in why_ncu_tables(pd.DataFrame())


def test_tables_hold_every_call():
    from analysis.why_ncu import why_ncu_tables

    t = why_ncu_tables(why_rows())
    assert t.count("\\begin{table}") == 1 and t.count("\\begin{longtable}") == 1  # the second outgrows a page
    assert "tab:why-ncu}" in t and "tab:why-ncu-inside}" in t
    body = t.split("\\midrule")[1].split("\\bottomrule")[0]
    assert body.count("\\\\") == 4  # softmax builtin and ours, cuBLAS and ours
    assert "& 8{,}192 & 1{,}024 & 62.1" in body and "regs, smem &" in body  # the limiter abbreviated


def test_profile_runs_ncu_imports_its_report_and_writes_the_table(tmp_path, monkeypatch):
    """The orchestration with a stand-in ncu on the PATH: it answers the metric query, 'profiles' by writing the
    manifest the run would write (the fixture's calls) and imports the fixture as the report's raw page."""
    import json
    import sys

    from experiments import why_ncu

    fake = tmp_path / "bin" / "ncu"
    fake.parent.mkdir()
    log = tmp_path / "argv.jsonl"
    fake.write_text(f"""#!{sys.executable}
import json, sys
args = sys.argv[1:]
open({str(log)!r}, "a").write(json.dumps(args) + "\\n")
if "--query-metrics" in args:
    print("gpu__time_duration  Duration\\nsm__warps_active  Achieved\\ndram__bytes  DRAM")
elif "--import" in args:
    print(open({str(FIXTURE)!r}).read())
else:
    open(args[args.index("--manifest") + 1], "w").write({json.dumps(CALLS)!r})
    open(args[args.index("--export") + 1], "w").write("report")
""")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    out = tmp_path / "why" / "why_ncu.parquet"
    assert why_ncu.profile("h200", why_ncu.check_cells(why_ncu.CELLS), out, tmp_path / "why") == 0
    table = pd.read_parquet(out)
    assert len(table) == 4 and set(table["impl"]) == {"builtin", "triton"}
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    profiled = next(a for a in calls if "--export" in a)
    assert profiled[profiled.index("--clock-control") + 1] == "none"
    kept = profiled[profiled.index("--metrics") + 1].split(",")
    assert "gpu__time_duration.sum" in kept and "launch__registers_per_thread" in kept  # launch__: always kept
    assert "smsp__sass_inst_executed_op_ldgsts.sum" not in kept  # not listed by this ncu: dropped, not fatal
    assert (tmp_path / "why" / "why_ncu_raw.csv").read_text().startswith("# SYNTHETIC")


def test_the_kernels_measured_on_both_sides_are_named():
    from analysis.why_ncu import measured_kernels

    assert measured_kernels(why_rows()) == {"softmax", "matmul"}
    assert measured_kernels(why_rows().query("impl != 'triton'")) == set() and measured_kernels(None) == set()


def test_the_paper_reads_the_headline_cards_rows_else_another_cards_and_names_it():
    from analysis.latex import Macros
    from analysis.why_ncu import card_of, why_ncu_macros

    rows, empty = why_rows(), why_rows().iloc[0:0]
    assert card_of({"h200": rows, "h100": rows}, "h200") == "h200"
    assert card_of({"h100": rows}, "h200") == "h100"
    assert card_of({"a100": empty, "h100": rows}, "h200") == "h100"  # a card with no profiled call is skipped
    assert card_of({"h200": empty}, "h200") is None and card_of(None, "h200") is None
    m = Macros()
    why_ncu_macros(m, rows, "h100")
    assert "\\newcommand{\\WhyNcuOn}{ on the NVIDIA H100 SXM}" in m.text()
    assert "\\newcommand{\\WhyNcuOtherCard}{}" in m.text()  # no headline given: no threat stated
    m = Macros()
    why_ncu_macros(m, rows, "h100", "h200")
    assert "come from the NVIDIA H100 SXM, not from the NVIDIA H200 SXM that gave the timings" in m.text()
    m = Macros()
    why_ncu_macros(m, rows, "h200", "h200")
    assert "\\newcommand{\\WhyNcuOtherCard}{}" in m.text()
    m = Macros()
    why_ncu_macros(m, None, "h100", "h200")  # no rows: no card named, no threat
    assert "\\newcommand{\\WhyNcuOn}{}" in m.text() and "\\newcommand{\\WhyNcuOtherCard}{}" in m.text()


def test_a_profile_whose_ratio_the_sweep_does_not_share_says_so_with_both_dates():
    """ours over cuBLAS: 1.15x under the profiler (2026-12-06), 2.03x in the sweep's GPU time (2026-12-04): the
    sentence gives the sweep's ratio and both dates (no profile date: the timing's only); within 10 % nothing."""
    from analysis.why_ncu import timed_note

    b, t = pd.Series({"duration_us": 100.0}), pd.Series({
        "duration_us": 115.0,
        "size": 8192,
        "main_timestamp": "2026-12-06T22:40:31+00:00"
    })
    timed = pd.DataFrame({
        "kernel": "matmul",
        "dtype": "float32",
        "size": 8192,
        "pass": "fwd",
        "impl": ["builtin", "triton"],
        "median_ms": [2.0, 4.06],
        "timestamp": "2026-12-04T09:06:03+00:00"
    })
    note = timed_note(timed, "float32", b, t)
    assert "taken 2026-12-04, has ours at 2.03$\\times$ cuBLAS's time, the profile of 2026-12-06 at 1.15" in note
    assert "is the earlier build's" in note
    older = timed_note(timed.assign(timestamp="2026-12-08T00:00:00+00:00"), "float32", b, t)
    assert "(taken 2026-12-08) has ours at 2.03$\\times$" in older and "do not say why" in older
    assert "earlier build" not in older
    undated = timed_note(timed, "float32", b, t.drop("main_timestamp").set_axis(["duration_us", "size"]))
    assert "(taken 2026-12-04)" in undated and "nan" not in undated and "earlier build" not in undated
    assert timed_note(timed.assign(median_ms=[2.0, 2.2]), "float32", b, t) == ""
    assert timed_note(None, "float32", b, t) == "" and timed_note(timed, "tf32", b, t) == ""


def test_attention_names_how_many_times_the_other_sides_instructions_ours_issues():
    ours, cudnn = {"ffma_thread_inst": 1.1e9, "tensor_inst": 3.4e7}, {"ffma_thread_inst": 3.41e7, "tensor_inst": 1.7e7}
    from analysis import why_ncu as why

    said = why.instruction_ratios(ours, cudnn, "cuDNN")
    assert said == ", issuing 32.3$\\times$ cuDNN's FFMA and 2$\\times$ its tensor-core instructions"
    assert why.instruction_ratios(ours, {"ffma_thread_inst": 0.0}, "cuDNN") == ""  # nothing to divide by: nothing said


@pytest.mark.parametrize(
    "builtin_stall, ours_stall, occupancy, want",
    [("not_selected 3.0", "long_scoreboard 9.5", 49.0,
      "what differs is that the builtin's kernel is held by issuing instructions"),
     ("long_scoreboard 7.0", "long_scoreboard 35.2", 92.0, "both kernels wait on memory most, and ours reaches"),
     ("long_scoreboard 5.9", "long_scoreboard 4.2", 45.0, "at 2$\\times$ its achieved occupancy"),
     ("barrier 2.0", "long_scoreboard 4.2", 90.0, "ours reaches 78"), ])
def test_an_equal_bytes_gap_states_what_differs_first(builtin_stall, ours_stall, occupancy, want):
    """The finding before the numbers: an issue-bound builtin against ours at the memory wall, or both waiting on
    memory with ours keeping more in flight (and the occupancy where it differs by 30 % or more)."""
    from analysis.why_ncu import gap_finding

    b = pd.Series({"dram_pct": 21.0, "main_stall_top": builtin_stall, "main_achieved_occupancy_pct": occupancy})
    t = pd.Series({"dram_pct": 78.0, "main_stall_top": ours_stall, "main_achieved_occupancy_pct": 90.0})
    said = gap_finding(b, t)
    assert want in said and "78\\,\\% of DRAM peak against the builtin's 21\\,\\%" in said
