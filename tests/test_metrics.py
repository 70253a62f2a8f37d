"""analysis/metrics.py against hand-computed cases: the roofline, model times, wave quantisation and speedups."""
import math

import numpy as np
import pandas as pd
import pytest

from analysis.metrics import attainable, compute_metrics, model_time_s, wave_efficiency
from rooflab.gpus import SPECS

TB = 1e12


def raw_row(**kw):
    row = {
        "gpu": "h200",
        "kernel": "gelu",
        "impl": "triton",
        "dtype": "float32",
        "size": 4096,
        "pass": "fwd",
        "status": "ok",
        "error": "",
        "median_ms": 0.1,
        "graph_median_ms": np.nan,
        "flops": 8.0 * 4096**2,
        "bytes": 8.0 * 4096**2,
        "compute_unit": "fp32"
    }
    row.update(kw)
    return row


def ceilings(gpu="h200", copy=4e12, gemm_fp32=50e12, gemm_bf16=600e12):
    return pd.DataFrame([{
        "gpu": gpu,
        "ceiling": "copy",
        "value": copy
    }, {
        "gpu": gpu,
        "ceiling": "gemm_fp32",
        "value": gemm_fp32
    }, {
        "gpu": gpu,
        "ceiling": "gemm_bf16",
        "value": gemm_bf16
    }])


# --- the formulas -------------------------------------------------------------------------------------------------


def test_attainable_is_the_lower_of_the_two_roofs():
    # H200 fp32: 67 TFLOP/s, 4.8 TB/s -> ridge at 67/4.8 = 13.96 FLOP/byte
    assert attainable(1.0, 67 * TB, 4.8 * TB) == pytest.approx(4.8 * TB)  # memory roof: 1 x 4.8e12
    assert attainable(100.0, 67 * TB, 4.8 * TB) == pytest.approx(67 * TB)  # compute roof
    assert attainable(0.25, 989.5 * TB, 4.8 * TB) == pytest.approx(1.2 * TB)


def test_model_time_is_the_slower_of_compute_and_memory():
    # 1 GB over 4 TB/s = 0.25 ms; 1 GFLOP at 100 TFLOP/s = 0.01 ms -> 0.25 ms
    assert model_time_s(1e9, 1e9, 100 * TB, 4 * TB) == pytest.approx(2.5e-4)
    # matmul n=8192 bf16 on H200: 2 n^3 = 1.0995e12 FLOP / 989.5e12 = 1.1112 ms; bytes 3 n^2 2 = 402.7 MB -> 0.0839 ms
    n = 8192
    t = model_time_s(2.0 * n**3, 3 * n * n * 2, 989.5 * TB, 4.8 * TB)
    assert t == pytest.approx(2.0 * n**3 / 989.5e12)


@pytest.mark.parametrize("n, sms, expected", [(1793, 132, 225 / 264),  # 15 x 15 = 225 tiles, 2 waves of 132 slots
                                              (1793, 108, 225 / 324),  # 3 waves of 108
                                              (1793, 148, 225 / 296),  # 2 waves of 148
                                              (4096, 132, 1024 / 1056),  # 32 x 32 = 1024 tiles, 8 waves
                                              (1024, 132, 64 / 132),  # 64 tiles: one wave, half empty
                                              (128, 132, 1 / 132),  # one tile
                                              (1536, 144, 1.0),  # 12 x 12 = 144 tiles, exactly one wave
                                              ])
def test_wave_efficiency(n, sms, expected):
    assert wave_efficiency(n, n, sms) == pytest.approx(expected)


# --- compute_metrics on a small frame -----------------------------------------------------------------------------


@pytest.fixture
def metrics():
    rows = [
        raw_row(impl="builtin", median_ms=0.2),
        raw_row(impl="naive", median_ms=0.8),
        raw_row(impl="triton", median_ms=0.1),
        raw_row(impl="compile", status="mismatch", error="rel_err 1e-1 > 1e-5", median_ms=0.05),
        raw_row(impl="cuda", status="skipped", error="no nvcc", median_ms=np.nan),
        raw_row(dtype="bfloat16", impl="triton", median_ms=0.1, bytes=4.0 * 4096**2),  # no builtin at bf16
        raw_row(kernel="matmul", impl="builtin", size=1793, dtype="bfloat16", compute_unit="bf16", flops=2.0 * 1793**3,
                bytes=6.0 * 1793**2, median_ms=0.02),
        raw_row(kernel="matmul", impl="triton", size=1793, dtype="bfloat16", compute_unit="bf16", flops=2.0 * 1793**3,
                bytes=6.0 * 1793**2, median_ms=0.025),
        raw_row(gpu="cpu", impl="triton", median_ms=1.0),
    ]
    return compute_metrics(pd.DataFrame(rows), pd.concat([ceilings(), ceilings("cpu", 20e9, 1e12, 1e11)]))


def pick(df, **kw):
    sel = df
    for k, v in kw.items():
        sel = sel[sel[k] == v]
    assert len(sel) == 1, kw
    return sel.iloc[0]


def test_achieved_rates_and_intensity(metrics):
    r = pick(metrics, gpu="h200", kernel="gelu", impl="triton", dtype="float32")
    nbytes = 8.0 * 4096**2  # 134.2 MB in 0.1 ms
    assert r["achieved_gbps"] == pytest.approx(nbytes / 1e-4 / 1e9)
    assert r["achieved_tflops"] == pytest.approx(nbytes / 1e-4 / 1e12)
    assert r["arithmetic_intensity"] == pytest.approx(1.0)
    assert r["bound"] == "memory"
    # vs H200 datasheet: attainable at AI 1 = 4.8 TFLOP/s; achieved 1.342 TFLOP/s
    assert r["attainable_tflops_h200"] == pytest.approx(4.8)
    assert r["roofline_fraction_h200"] == pytest.approx(1.34217728 / 4.8)
    assert r["roofline_fraction_datasheet"] == pytest.approx(r["roofline_fraction_h200"])
    assert r["bandwidth_fraction_datasheet"] == pytest.approx(nbytes / 1e-4 / 4.8e12)
    # vs B200 datasheet: 8 TB/s
    assert r["attainable_tflops_b200"] == pytest.approx(8.0)
    assert r["model_time_ms_b200"] == pytest.approx(nbytes / 8e12 * 1e3)
    # vs the measured ceilings: copy 4 TB/s, fp32 gemm 50 TFLOP/s
    assert r["attainable_tflops_measured"] == pytest.approx(4.0)
    assert r["bandwidth_fraction_measured"] == pytest.approx(nbytes / 1e-4 / 4e12)
    assert r["model_time_ms_measured"] == pytest.approx(nbytes / 4e12 * 1e3)
    assert r["model_error_measured"] == pytest.approx(0.1 / (nbytes / 4e12 * 1e3) - 1)
    assert r["model_error_datasheet"] == pytest.approx(0.1 / (nbytes / 4.8e12 * 1e3) - 1)


def test_graph_replay_rate_comes_from_the_graph_time_of_correct_rows():
    rows = [
        raw_row(median_ms=0.1, graph_median_ms=0.08),
        raw_row(impl="builtin", median_ms=0.2),
        raw_row(impl="naive", status="mismatch", error="wrong", graph_median_ms=0.05)
    ]
    m = compute_metrics(pd.DataFrame(rows), ceilings())
    nbytes = 8.0 * 4096**2
    assert pick(m, impl="triton")["graph_achieved_gbps"] == pytest.approx(nbytes / 0.08e-3 / 1e9)
    assert math.isnan(pick(m, impl="builtin")["graph_achieved_gbps"])  # not timed under replay
    assert math.isnan(pick(m, impl="naive")["graph_achieved_gbps"])  # a wrong answer has no rate


def test_speedups(metrics):
    r = pick(metrics, gpu="h200", kernel="gelu", impl="triton", dtype="float32")
    assert r["speedup_vs_builtin"] == pytest.approx(2.0)  # 0.2 / 0.1
    assert r["speedup_vs_naive"] == pytest.approx(8.0)  # 0.8 / 0.1
    assert pick(metrics, gpu="h200", kernel="gelu", impl="builtin")["speedup_vs_builtin"] == pytest.approx(1.0)
    m = pick(metrics, gpu="h200", kernel="matmul", impl="triton")
    assert m["speedup_vs_builtin"] == pytest.approx(0.8)  # 0.02 / 0.025


def test_no_speedup_without_a_baseline_in_the_same_cell(metrics):
    # bf16 gelu has no builtin row; the cpu row's builtin is on another gpu
    assert np.isnan(pick(metrics, kernel="gelu", dtype="bfloat16")["speedup_vs_builtin"])
    assert np.isnan(pick(metrics, gpu="cpu")["speedup_vs_builtin"])


def test_a_mismatch_row_gets_no_speedup_and_no_rates(metrics):
    r = pick(metrics, gpu="h200", kernel="gelu", impl="compile")
    assert r["status"] == "mismatch"
    for col in ("speedup_vs_builtin", "speedup_vs_naive", "achieved_gbps", "achieved_tflops",
                "roofline_fraction_measured", "model_error_measured", "model_error_datasheet"):
        assert np.isnan(r[col]), col
    assert np.isnan(pick(metrics, gpu="h200", impl="cuda")["speedup_vs_builtin"])  # skipped


def test_wave_columns_on_matmul_only(metrics):
    r = pick(metrics, kernel="matmul", impl="triton")
    assert r["wave_efficiency_h200"] == pytest.approx(225 / 264)
    assert r["wave_efficiency_a100"] == pytest.approx(225 / 324)
    assert r["wave_efficiency_b200"] == pytest.approx(225 / 296)
    assert r["wave_efficiency"] == pytest.approx(225 / 264)  # measured on the h200
    assert r["wave_model_tflops"] == pytest.approx(600 * 225 / 264)  # measured bf16 gemm x efficiency
    assert r["bound"] == "compute"  # AI = 2 n / 6 = 597.7 > 989.5 / 4.8 = 206
    assert np.isnan(pick(metrics, gpu="h200", kernel="gelu", impl="triton", dtype="float32")["wave_efficiency_h200"])


def test_cpu_rows_use_measured_ceilings_only(metrics):
    r = pick(metrics, gpu="cpu")
    assert np.isnan(r["roofline_fraction_datasheet"]) and np.isnan(r["wave_efficiency"])
    assert r["attainable_tflops_measured"] == pytest.approx(0.02)  # AI 1 x 20 GB/s
    assert r["ridge_point"] == pytest.approx(1e12 / 20e9)
    assert r["bound"] == "memory"
    assert not math.isnan(r["model_time_ms_h100"])  # the projection is still made


def test_bound_unknown_without_peaks():
    df = compute_metrics(pd.DataFrame([raw_row(gpu="mystery-gpu")]), ceilings("other"))
    assert df["bound"].iloc[0] == "unknown"


def test_every_spec_gpu_gets_its_columns(metrics):
    for key in SPECS:
        for prefix in ("attainable_tflops", "roofline_fraction", "model_time_ms", "wave_efficiency"):
            assert f"{prefix}_{key}" in metrics.columns


def test_silent_compile_fallback_is_not_claimable():
    """A torch.compile cell that ran eager keeps its row but gives no speedup and no figure point."""
    from analysis.metrics import compute_metrics
    from figures._common import claimable

    base = dict(gpu="h200", kernel="gelu", dtype="bfloat16", size=4096, status="ok", flops=9.0 * 4096**2,
                bytes=4.0 * 4096**2, compute_unit="fp32", graph_median_ms=float("nan"))
    raw = pd.DataFrame([{
        **base, "impl": "builtin",
        "median_ms": 0.02,
        "compile_fallback": False
    }, {
        **base, "impl": "compile",
        "median_ms": 0.01,
        "compile_fallback": True
    }, {
        **base, "impl": "triton",
        "median_ms": 0.01,
        "compile_fallback": False
    }, ])
    raw["pass"] = "fwd"
    m = compute_metrics(raw, pd.DataFrame(columns=["gpu", "ceiling", "value"]))
    by = m.set_index("impl")
    assert not by.loc["compile", "claimable"] and by.loc["triton", "claimable"]
    assert np.isnan(by.loc["compile", "speedup_vs_builtin"])
    assert by.loc["triton", "speedup_vs_builtin"] == pytest.approx(2.0)
    assert list(claimable(m, "h200")["impl"]) == ["builtin", "triton"]


# --- fixed cost and marginal rate ---------------------------------------------------------------------------------


def line_rows(kernel="rowsum", impl="triton", dtype="bfloat16", fixed_us=5.0, rate=4.5e12,
              sizes=(1024, 2048, 4096, 8192), **kw):
    """Cells whose time is exactly fixed + bytes / rate (bytes: 2 N^2, a read-only bf16 kernel)."""
    return [
        raw_row(kernel=kernel, impl=impl, dtype=dtype, size=n, flops=2.0 * n * n, bytes=2.0 * n * n,
                median_ms=(fixed_us * 1e-6 + 2.0 * n * n / rate) * 1e3, **kw) for n in sizes
    ]


def test_fixed_costs_recover_the_line_from_the_large_sizes():
    from analysis.metrics import fixed_costs

    rows = line_rows() + line_rows(impl="builtin", fixed_us=2.0, rate=3e12)
    rows[0]["median_ms"] *= 3  # 1024: on the launch floor, off the line; the fit starts at FIT_MIN_SIZE (2048)
    f = fixed_costs(compute_metrics(pd.DataFrame(rows), ceilings())).set_index("impl")
    t = f.loc["triton"]
    assert t["fixed_us"] == pytest.approx(5.0) and t["marginal_tbs"] == pytest.approx(4.5)
    assert t["points"] == 3 and t["size"] == 8192
    assert t["time_us"] == pytest.approx(5.0 + 2.0 * 8192**2 / 4.5e12 * 1e6)
    assert t["fixed_share"] == pytest.approx(5.0 / t["time_us"])
    assert f.loc["builtin", "fixed_us"] == pytest.approx(2.0) and f.loc["builtin", "marginal_tbs"] == pytest.approx(3)


def test_fixed_costs_need_three_correct_memory_bound_sizes():
    from analysis.metrics import fixed_costs

    two = line_rows(sizes=(4096, 8192))  # two sizes: a line through two points is no fit
    wrong = line_rows(impl="compile")
    wrong[1].update(status="mismatch", error="rel_err")  # one of three sizes gave a wrong answer: two remain
    mm = [
        raw_row(kernel="matmul", impl="triton", size=n, dtype="bfloat16", compute_unit="bf16", flops=2.0 * n**3,
                bytes=6.0 * n * n, median_ms=2.0 * n**3 / 6e14 * 1e3) for n in (2048, 4096, 8192)
    ]  # compute-bound: its time is not bytes over a rate
    f = fixed_costs(compute_metrics(pd.DataFrame(two + wrong + mm), ceilings()))
    assert f.empty


def test_fixed_costs_take_a_repeated_size_at_its_median_and_report_no_line_that_does_not_rise():
    from analysis.metrics import fixed_costs

    rows = line_rows(sizes=(2048, 4096, 8192))
    rows.append({**rows[1], "median_ms": rows[1]["median_ms"] * 1.2})  # 4096 twice (another pass of the sweep)
    rows.append({**rows[1], "median_ms": rows[1]["median_ms"] * 0.8})
    flat = line_rows(impl="builtin", sizes=(2048, 4096, 8192))
    for r in flat:
        r["median_ms"] = 0.05  # the same time at every size: no rate, no fixed cost
    f = fixed_costs(compute_metrics(pd.DataFrame(rows + flat), ceilings())).set_index("impl")
    assert f.loc["triton", "points"] == 3 and f.loc["triton", "fixed_us"] == pytest.approx(5.0)
    assert f.loc["builtin", ["fixed_us", "marginal_tbs", "fixed_share"]].isna().all()


# --- like for like -------------------------------------------------------------------------------------------------


def test_no_speedup_across_math_modes():
    """fp32 IEEE and TF32 products are two precisions: a TF32 Triton row gets no speedup against IEEE torch rows,
    and each is rated against its own mode's ceiling."""
    mm = dict(kernel="matmul", size=4096, flops=2.0 * 4096**3, bytes=12.0 * 4096**2)
    raw = pd.DataFrame([
        raw_row(impl="builtin", dtype="float32", math_mode="fp32-ieee", compute_unit="fp32", median_ms=2.0, **mm),
        raw_row(impl="triton", dtype="tf32", math_mode="tf32", compute_unit="tf32", median_ms=0.5, **mm),
        raw_row(impl="triton", dtype="float32", math_mode="fp32-ieee", compute_unit="fp32", median_ms=2.5, **mm),
        raw_row(impl="builtin", dtype="tf32", math_mode="tf32", compute_unit="tf32", median_ms=0.6, **mm)
    ])
    ceil = pd.concat([ceilings(), pd.DataFrame([{"gpu": "h200", "ceiling": "gemm_tf32", "value": 400e12}])])
    m = compute_metrics(raw, ceil).set_index(["impl", "dtype"])
    assert m.loc[("triton", "tf32"), "speedup_vs_builtin"] == pytest.approx(0.6 / 0.5)
    assert m.loc[("triton", "float32"), "speedup_vs_builtin"] == pytest.approx(2.0 / 2.5)
    assert m.loc[("triton", "tf32"), "peak_tflops_measured"] == pytest.approx(400)
    assert m.loc[("builtin", "float32"), "peak_tflops_measured"] == pytest.approx(50)


def test_rows_from_before_the_math_mode_compare_nothing_across_modes():
    """The committed reference's float32 matmul: our tl.dot ran TF32 (its default then), torch's IEEE fp32. Read as
    what ran, the Triton row is a tf32 row with no IEEE baseline: no '2.15x the builtin' across modes."""
    mm = dict(kernel="matmul", size=4096, flops=2.0 * 4096**3, bytes=12.0 * 4096**2, compute_unit="tf32")
    raw = pd.DataFrame([raw_row(impl="builtin", median_ms=2.0, **mm), raw_row(impl="triton", median_ms=0.93, **mm)])
    m = compute_metrics(raw, ceilings()).set_index("impl")
    assert m.loc["triton", ["dtype", "math_mode", "compute_unit"]].tolist() == ["tf32", "tf32", "tf32"]
    assert m.loc["builtin", ["dtype", "math_mode", "compute_unit"]].tolist() == ["float32", "fp32-ieee", "fp32"]
    assert np.isnan(m.loc["triton", "speedup_vs_builtin"])


def test_cells_are_rated_against_their_own_runs_ceilings():
    """Two runs on one GPU with different ceilings: each cell's roof is its own run's; a cell whose run measured no
    ceilings is rated against the newest run's, and flagged."""
    raw = pd.DataFrame(
        [raw_row(run_id="a", median_ms=0.1),
         raw_row(run_id="b", median_ms=0.1),
         raw_row(run_id="c", median_ms=0.1)])
    ceil = pd.concat([
        ceilings(copy=4e12).assign(run_id="a", timestamp="2026-12-01T07:00"),
        ceilings(copy=2e12).assign(run_id="b", timestamp="2026-12-01T08:00")
    ])
    m = compute_metrics(raw, ceil).set_index("run_id")
    assert m.loc["a", "peak_bandwidth_measured_gbps"] == pytest.approx(4000)
    assert m.loc["b", "peak_bandwidth_measured_gbps"] == pytest.approx(2000)
    assert m.loc[["a", "b"], "ceilings_same_run"].all() and not m.loc["c", "ceilings_same_run"]
    # run c measured no ceilings (one kernel rerun after an edit): the newest run's, flagged as another run's
    assert m.loc["c", "ceilings_run_id"] == "b" and m.loc["c", "peak_bandwidth_measured_gbps"] == pytest.approx(2000)


def test_a_cell_under_90_percent_of_its_runs_ceiling_clock_is_no_claim():
    ceil = ceilings().assign(sm_clock_after_mhz=1980.0)  # the copy the memory-bound cells are rated against
    raw = pd.DataFrame([
        raw_row(impl="builtin", median_ms=0.2, sm_clock_after_mhz=1500.0),
        raw_row(impl="triton", median_ms=0.1, sm_clock_after_mhz=1900.0)
    ])
    m = compute_metrics(raw, ceil).set_index("impl")
    assert m.loc["builtin", "ceiling_clock_mhz"] == 1980.0
    assert m.loc["builtin", "clock_low"] and not m.loc["builtin", "claimable"]
    assert not m.loc["triton", "clock_low"] and m.loc["triton", "claimable"]
    assert np.isnan(m.loc["triton", "speedup_vs_builtin"])  # no claim against a throttled baseline
    # ceilings that recorded no clock: the card's maximum is the reference
    m = compute_metrics(raw.assign(sm_clock_max_mhz=1980.0), ceilings()).set_index("impl")
    assert m.loc["builtin", "clock_low"] and not m.loc["triton", "clock_low"]


def test_a_cell_above_its_roof_beyond_noise_is_a_finding_with_a_reason():
    raw = pd.DataFrame([
        raw_row(median_ms=8.0 * 4096**2 / 4.2e12 * 1e3, rse_median=0.002),  # 5 % above
        raw_row(impl="builtin", median_ms=8.0 * 4096**2 / 4.04e12 * 1e3, rse_median=0.005)
    ])
    m = compute_metrics(raw, ceilings(copy=4e12)).set_index("impl")
    assert m.loc["triton", "above_roof"] and "reads more than it writes" in m.loc["triton", "above_roof_reason"]
    assert not m.loc["builtin", "above_roof"]  # 1 % above with 0.5 % standard error: inside noise


@pytest.mark.parametrize("ours_ms, rse, verdict", [(0.0652, 0.003, "tie"), (0.0600, 0.003, "faster"),
                                                   (0.0700, 0.003, "slower"), (0.0630, 0.02, "tie")])
def test_faster_only_beyond_noise(ours_ms, rse, verdict):
    """65.2 vs 65.2 us is a tie, not a win; so is 3 % inside 3 combined standard errors of 2 % each."""
    raw = pd.DataFrame([
        raw_row(impl="builtin", median_ms=0.0652, rse_median=rse),
        raw_row(impl="triton", median_ms=ours_ms, rse_median=rse)
    ])
    m = compute_metrics(raw, ceilings()).set_index("impl")
    assert m.loc["triton", "verdict_vs_builtin"] == verdict


def test_speedups_in_all_three_frames():
    raw = pd.DataFrame([
        raw_row(impl="builtin", median_ms=0.0074, graph_median_ms=0.00735, loop_ms=0.030),
        raw_row(impl="triton", median_ms=0.0063, graph_median_ms=0.00737, loop_ms=0.050)
    ])
    m = compute_metrics(raw, ceilings()).set_index("impl").loc["triton"]
    assert m["speedup_vs_builtin"] == pytest.approx(0.0074 / 0.0063)
    assert m["graph_speedup_vs_builtin"] == pytest.approx(0.00735 / 0.00737)
    assert m["loop_speedup_vs_builtin"] == pytest.approx(0.6)


def test_verdicts_in_every_frame():
    """1.17x in GPU time, a tie under CUDA graphs, slower from the Python loop: all three said, none hidden."""
    raw = pd.DataFrame([
        raw_row(impl="builtin", median_ms=0.0074, graph_median_ms=0.00735, loop_ms=0.030, rse_median=0.004),
        raw_row(impl="triton", median_ms=0.0063, graph_median_ms=0.00737, loop_ms=0.050, rse_median=0.004)
    ])
    m = compute_metrics(raw, ceilings()).set_index("impl").loc["triton"]
    assert (m["verdict_vs_builtin"], m["graph_verdict_vs_builtin"], m["loop_verdict_vs_builtin"]) == \
        ("faster", "tie", "slower")


def test_a_mode_without_its_ceiling_gets_no_roof():
    mm = dict(kernel="matmul", size=4096, flops=2.0 * 4096**3, bytes=12.0 * 4096**2)
    raw = pd.DataFrame([raw_row(impl="triton", dtype="tf32", math_mode="tf32", compute_unit="tf32", **mm)])
    m = compute_metrics(raw, ceilings()).iloc[0]  # ceilings measured fp32 and bf16 only
    assert np.isnan(m["peak_tflops_measured"]) and np.isnan(m["roofline_fraction_measured"])


def test_a_cell_is_clock_checked_against_the_roof_it_is_rated_against():
    """A power-capped GEMM runs slower clocks than a copy: a matmul cell is held to the GEMM ceiling's clock."""
    mm = dict(kernel="matmul", size=8192, flops=2.0 * 8192**3, bytes=6.0 * 8192**2, dtype="bfloat16",
              compute_unit="bf16", median_ms=1.5)
    ceil = ceilings().assign(sm_clock_after_mhz=[1980.0, 1980.0, 1500.0])  # copy, gemm_fp32, gemm_bf16
    raw = pd.DataFrame([
        raw_row(impl="builtin", sm_clock_after_mhz=1450.0, **mm),
        raw_row(impl="triton", sm_clock_after_mhz=1300.0, **mm)
    ])
    m = compute_metrics(raw, ceil).set_index("impl")
    assert (m["ceiling_clock_mhz"] == 1500.0).all()
    assert not m.loc["builtin", "clock_low"] and m.loc["triton", "clock_low"]


def test_per_kernel_metrics_concatenated_are_the_metrics_of_all_kernels(tmp_path):
    """The DAG computes results/metrics/<gpu>/<kernel>.parquet per kernel (an edit of one kernel recomputes that one)
    and concatenates them: nothing may be computed across kernels, or the two would differ."""
    from analysis.metrics import concat

    rows = [
        raw_row(kernel=k, impl=i, dtype=d, median_ms=t, rse_median=0.01)
        for k in ("gelu", "vecadd")
        for d in ("float32", "bfloat16")
        for i, t in (("naive", 0.8), ("builtin", 0.2), ("triton", 0.1))
    ]
    rows += [
        raw_row(kernel="matmul", impl=i, size=1793, dtype="bfloat16", compute_unit="bf16", median_ms=t,
                flops=2.0 * 1793**3, bytes=6.0 * 1793**2) for i, t in (("builtin", 0.02), ("triton", 0.03))
    ]
    raw, ceil = pd.DataFrame(rows), ceilings()
    paths = []
    for kernel, g in raw.groupby("kernel", sort=False):
        paths.append(tmp_path / f"{kernel}.parquet")
        compute_metrics(g.reset_index(drop=True), ceil).to_parquet(paths[-1])
    together = concat(paths, str(tmp_path / "metrics.parquet"))
    pd.testing.assert_frame_equal(together, compute_metrics(raw, ceil), check_dtype=False)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "metrics.parquet"), together)


def test_a_compute_bound_cell_is_rated_against_the_roof_at_its_own_clock():
    """The GEMM ceiling timed at 1515 MHz, a cell at 1875: its roof is 1875/1515 of the ceiling, so a cell 10 %
    above the ceiling's rate sits under its own roof, and is no finding."""
    n = 8192
    flops = 2.0 * n**3
    ceil = ceilings(gemm_bf16=600e12).assign(sm_clock_after_mhz=1515.0)
    raw = pd.DataFrame([
        raw_row(kernel="matmul", dtype="bfloat16", compute_unit="bf16", flops=flops, bytes=3 * 2.0 * n * n,
                median_ms=flops / 660e12 * 1e3, rse_median=0.001, sm_clock_after_mhz=1700.0,
                sm_clock_samples_mhz=1875.0)
    ])
    m = compute_metrics(raw, ceil).iloc[0]
    assert m["sm_clock_mhz"] == 1875.0  # the samples' clock, not the reading after them
    assert m["peak_tflops_at_clock"] == pytest.approx(600 * 1875 / 1515)
    assert m["roofline_fraction_measured"] == pytest.approx(660 / (600 * 1875 / 1515))
    assert not m["above_roof"]
    # a memory-bound cell keeps the copy's roof whatever its clock
    mem = compute_metrics(pd.DataFrame([raw_row(sm_clock_samples_mhz=1875.0)]), ceil).iloc[0]
    assert mem["roofline_fraction_measured"] == pytest.approx(mem["bandwidth_fraction_measured"])


def test_paired_verdicts_replace_the_unpaired_rule_where_a_cell_has_rounds():
    from analysis.metrics import apply_paired
    from analysis.paired import verdict_table

    raw = pd.DataFrame([
        raw_row(kernel=k, impl=impl, shape="64", median_ms=ms, rse_median=0.001, math_mode="fp32-ieee")
        for k, impl, ms in (("matmul", "builtin", 0.100), ("matmul", "naive", 0.093), ("matmul", "triton", 0.080),
                            ("gelu", "builtin", 0.100), ("gelu", "triton", 0.080))
    ])
    m = compute_metrics(raw, ceilings())
    assert m.set_index(["kernel", "impl"]).loc[("matmul", "naive"), "verdict_vs_builtin"] == "faster"  # unpaired
    rounds = pd.DataFrame([{
        "gpu": "h200",
        "run_id": "",
        "kernel": "matmul",
        "dtype": "float32",
        "shape": "64",
        "size": 64,
        "pass": "fwd",
        "preset": "square",
        "session": "all",
        "impl": impl,
        "copy": 0,
        "round": r,
        "frame": "gpu",
        "ms": ms * (1 + 0.01 * (r % 2)),
        "sm_clock_mhz": 1700.0
    } for impl, ms in (("builtin", 0.1), ("naive", 0.1), ("triton", 0.08)) for r in range(8)])
    p = apply_paired(m, verdict_table(rounds)).set_index(["kernel", "impl"])
    assert p.loc[("matmul", "naive"), "verdict_vs_builtin"] == "tie"  # the same kernels, timed in pairs
    assert p.loc[("matmul", "naive"), "verdict_method_vs_builtin"] == "paired"
    assert p.loc[("matmul", "triton"), "verdict_vs_builtin"] == "faster"
    assert p.loc[("matmul", "triton"), "paired_speedup_vs_builtin"] == pytest.approx(1.25)
    assert p.loc[("gelu", "triton"), "verdict_method_vs_builtin"] == "unpaired"  # no rounds: the unpaired rule
    assert np.isnan(p.loc[("gelu", "triton"), "paired_speedup_vs_builtin"])
