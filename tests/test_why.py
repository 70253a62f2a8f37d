"""analysis/why.py: the paper's 'why' (launches, modelled traffic, compiled facts, plateau, waves, cost to get a
kernel, alignment) on synthetic frames and on the committed H200 reference. No timing thresholds: only what the rows
say, and that every output degrades to 'not measured' without its data."""
from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import why

REF = Path(__file__).resolve().parents[1] / "data" / "reference" / "h200"


def cell(kernel="vecadd", impl="triton", dtype="bfloat16", size=256, median_ms=0.005, **kw):
    row = {
        "gpu": "h200",
        "kernel": kernel,
        "impl": impl,
        "dtype": dtype,
        "size": size,
        "pass": "fwd",
        "status": "ok",
        "claimable": True,
        "median_ms": median_ms,
        "loop_ms": 0.02,
        "graph_median_ms": median_ms,
        "bytes": 6.0 * size * size,
        "flops": float(size * size),
        "cold_ms": 1.0,
        "check_s": 0.001,
        "autotune_ms": np.nan,
        "autotune_config": None,
        "cache_state": "warm",
        "achieved_tflops": np.nan,
        "roofline_fraction_measured": 0.5,
        "verdict_vs_builtin": "tie",
        "bound": "memory"
    }
    row.update(kw)
    return row


def test_short_names_drop_templates_signatures_and_namespaces():
    assert why.short_name("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float> >(int, float)") \
        == "reduce_kernel"
    assert why.short_name("_gelu_kernel") == "_gelu_kernel"
    names = "void a::k<1>(int); void a::k<1>(int); triton_poi_fused_0"
    assert why.launched(names) == [("k", 2), ("triton_poi_fused_0", 1)]
    assert why.launched(None) == []


def test_naive_traffic_parses_the_annotated_source(tmp_path):
    (tmp_path / "toy").mkdir()  # a kernel's folder: kernels/<name>/__init__.py
    (tmp_path / "toy" / "__init__.py").write_text("def toy_naive(x):\n"
                                                  "    y = x * 2  # 1 kernel: read N^2, write N^2\n"
                                                  "    z = y.sum(1)  # 2 kernels: read N^2 + N, write N each\n"
                                                  "    return z + 1  # 2 kernels: read N write N; read 2N write N\n")
    t = why.naive_traffic("toy", 10, 4, tmp_path)
    assert t["kernels"] == 5
    assert t["bytes"] == 4 * ((100 + 100) + 2 * (110 + 10) + (10 + 10) + (20 + 10))
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "__init__.py").write_text("def bare_naive(x):\n    return x + 1\n")
    assert why.naive_traffic("bare", 10, 4, tmp_path) is None
    assert why.naive_traffic("absent", 10, 4, tmp_path) is None


@pytest.mark.parametrize("kernel", ["gelu", "layernorm", "rmsnorm", "softmax", "rowsum", "saxpy", "vecadd", "matmul"])
def test_naive_traffic_counts_the_kernels_the_reference_profiles_launched(kernel):
    p = pd.read_parquet(REF / "profiles.parquet")
    row = p[(p["kernel"] == kernel) & (p["impl"] == "naive") & (p["pass"] == "fwd") & (p["dtype"] == "bfloat16")]
    t = why.naive_traffic(kernel, int(row["size"].iloc[0]), 2)
    assert t["kernels"] == int(row["n_kernels"].iloc[0])
    assert t["bytes"] > 0


def test_plateau_crossover_is_the_first_size_whose_work_outlasts_the_fixed_cost():
    sizes = [256, 512, 1024, 2048]
    times = [0.005, 0.005, 0.012, 0.040]  # ms; 6 N^2 bytes at the largest: 25.2 MB in 40 us
    m = pd.DataFrame([cell(size=s, median_ms=t) for s, t in zip(sizes, times)])
    t = why.plateau(m, "h200").iloc[0]
    # at the largest size's rate 512 is 2.5 us of work, under the 5 us fixed cost; 1024 is 10 us, over it
    assert t["crossover"] == 1024 and t["fixed_us"] == pytest.approx(5.0) and t["unit"] == "GB/s"
    assert why.plateau(m.iloc[:0], "h200").empty
    assert "not measured" in why.plateau_table(m.iloc[:0], "h200")
    looped = m.assign(loop_ms=[0.223, 0.030, 0.031, 0.090])  # one size's outlier, then the host path, then work
    assert why.plateau(looped, "h200").iloc[0]["loop_us"] == pytest.approx(31.0)  # the median of the 3 smallest


def test_waves_use_the_autotuned_tile_and_name_the_persistent_kernel():
    m = pd.DataFrame([
        cell("matmul", size=1793, autotune_config="BLOCK_M: 64, BLOCK_N: 256, BLOCK_K: 32"),
        cell("matmul", size=4096, autotune_config="BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64")
    ])
    compiled = pd.DataFrame({
        "gpu": "h200",
        "kernel": "matmul",
        "dtype": "bfloat16",
        "size": [4096],
        "function": ["_matmul_tma_kernel"],
        "autotune_best": [True]
    })
    t = why.waves(m, compiled, "h200").set_index("size")
    assert t.loc[1793, "tiles"] == 29 * 8 and t.loc[1793, "function"] == "not recorded"
    assert t.loc[1793, "efficiency"] == pytest.approx(232 / 264)
    assert t.loc[4096, "function"] == "persistent TMA" and t.loc[4096, "programs"] == 132
    assert "not measured" in why.waves_table(m, compiled, "cpu")
    held = pd.concat([compiled, compiled.assign(size=1793, function="_matmul_kernel", blocks_per_sm=4)])
    t = why.waves(m, held, "h200").set_index("size")  # four programs a SM: one wave of 528 slots for 232 tiles
    assert t.loc[1793, "per_sm"] == 4 and t.loc[1793, "waves"] == 1
    assert t.loc[1793, "efficiency"] == pytest.approx(232 / 528) and t.loc[4096, "per_sm"] == 1


def test_cost_and_alignment_degrade_without_rows():
    m = pd.DataFrame([cell(impl="compile", cold_ms=400.0, loop_ms=0.08), cell(impl="triton", cold_ms=np.nan)])
    c = why.cost(m, "h200").set_index("impl")
    assert c.loc["compile", "calls"] == pytest.approx(400.0 / 0.08)
    assert c.loc["triton", "first_median_ms"] == pytest.approx(1.0)  # from check_s where cold_ms is missing
    assert "not measured" in why.cost_table(m.iloc[:0], "h200")
    assert "not measured" in why.alignment_table(m, "h200")


def test_measured_traffic_is_tabled_and_said_where_the_builtin_moves_more():

    def row(kernel, impl, moved, read, launches, pass_="fwd"):
        return {
            "kernel": kernel,
            "impl": impl,
            "dtype": "bfloat16",
            "size": 8192,
            "pass": pass_,
            "launches": launches,
            "dram_read_bytes": read,
            "dram_write_bytes": moved - read,
            "moved_bytes": moved,
            "model_bytes": 268e6,
            "moved_over_model": moved / 268e6
        }

    t = pd.DataFrame([
        row("layernorm", "naive", 1500e6, 940e6, 9),
        row("layernorm", "builtin", 340e6, 227e6, 1),
        row("layernorm", "triton", 242e6, 134e6, 1),
        row("gelu", "triton", 242e6, 134e6, 1),
        row("gelu", "builtin", 246e6, 134e6, 1),
        row("layernorm", "compile", 900e6, 628e6, 4, "fwd+bwd"),
        row("layernorm", "triton", 640e6, 411e6, 3, "fwd+bwd"),
        row("gelu", "compile", 262e6, 134e6, 1)
    ])
    table = why.traffic_table(t)
    assert "5.6 (9)" in table and "1.27 (1)" in table and "--" in table  # gelu has no naive row
    said = " ".join(why.traffic_sentences("layernorm", t))
    assert "1{,}500~MB in 9 kernels" in said and "1.4$\\times$ our bytes" in said and "1.69$\\times$" in said
    assert "torch.compile moves 1.41$\\times$ our bytes in the forward and backward together" in said
    assert "in 4 kernels to our 3" in said
    assert "our bytes" not in " ".join(why.traffic_sentences("gelu", t))  # builtin and compile within 10 %: none
    assert why.traffic_sentences("softmax", t) == [] and "not measured" in why.traffic_table(None)
    # its compile fwd+bwd row: no timestamp (the calls before ba0d144) is the one joint graph; a later one a training
    # step's (rooflab.kernel.COMPILE_SPLIT_SINCE)
    assert why.traffic_compile_frame(t).endswith("with the one graph.") and why.traffic_compile_frame(None) == ""
    later = t.assign(timestamp="2026-12-04T00:00:00+00:00")
    assert why.traffic_compile_frame(later).endswith("as a training step runs them.")
    assert "with the one graph" in why.traffic_compile_frame(later.assign(timestamp="2026-12-03T19:00:00+00:00"))
    m = pd.DataFrame([cell(size=s) for s in (256, 512)])
    assert "Nsight Compute" in why.why_paragraph("gelu", m.assign(kernel="gelu"), None, None, "h200", t)


def test_compile_frames_are_tabled_with_the_training_step_over_the_joint_graph():

    def row(variant, us, kernel="rmsnorm fwd+bwd", n="128x4096"):
        return {"kernel": kernel, "n": n, "dtype": "bfloat16", "variant": variant, "median_us": us}

    t = pd.DataFrame([
        row("builtin", 21.0),
        row("ours", 13.6),
        row("compile, joint graph (the sweep's)", 10.0),
        row("compile, as a training step (AOTAutograd)", 12.5),
        row("compile, joint graph", 100.0, n="4096x8192"),
        row("compile, as a training step (AOTAutograd; the sweep's)", 120.0, n="4096x8192")
    ])
    f = why.compile_frames(t).set_index("shape")
    assert f.loc["128x4096", "split_over_joint"] == pytest.approx(1.25) and f.loc["4096x8192", "split"] == 120.0
    assert f.loc["128x4096", "kernel"] == "rmsnorm" and np.isnan(f.loc["4096x8192", "ours"])
    table = why.compile_frames_table(t)
    assert "12.5" in table and "1.25" in table and "-- & --" in table  # no ours, no builtin at 4096x8192
    said = why.compile_frames_sentence(t)
    assert "median 1.23$\\times$ the joint graph's GPU time over 2 cells (1.2 to 1.25)" in said
    assert "not measured" in why.compile_frames_table(None) and "not measured" in why.compile_frames_sentence(None)
    ref = pd.read_csv(REF / "compile_frames.csv")  # the committed H200 call: the training step slower in most cells
    assert (why.compile_frames(ref)["split_over_joint"].dropna() > 1).mean() > 0.5


def test_ablation_tables_rate_each_variant_against_cublas_and_split_the_alignment_causes():

    def row(study, variant, method, size, tflops, status="ok"):
        return {"study": study, "variant": variant, "method": method, "size": size, "tflops": tflops, "status": status}

    t = pd.DataFrame([
        row("tiles", "cuBLAS (builtin)", "cublas", 8192, 700.0),
        row("tiles", "pointer 128x256, row order", "pointer", 8192, 560.0),
        row("tiles", "pointer 64x64, grouped", "pointer", 8192, np.nan, "failed"),
        row("alignment", "cuBLAS (builtin)", "cublas", 1793, 500.0),
        row("alignment", "ours, autotuned", "auto", 1793, 300.0),
        row("alignment", "ours, padded to 1856: product alone", "auto", 1793, 450.0),
        row("alignment", "ours, padded to 1856: copies + product + slice", "auto", 1793, 400.0),
        row("alignment", "ours, autotuned", "auto", 2048, 600.0)
    ])
    table = why.ablations_table(t)
    assert "560 (0.8)" in table and "64x64" not in table  # a failed variant is no rate
    a = why.alignment_study(t, 132).set_index("size")
    assert not a.loc[1793, "aligned"] and a.loc[2048, "aligned"] and not a.loc[1793, "hint"]
    assert a.loc[1793, "padded_alone"] == 450.0 and a.loc[1793, "padded_whole"] == 400.0
    assert a.loc[2048, "tile_fill"] == 1.0 and a.loc[1793, "tile_fill"] == pytest.approx(1793**2 / (15 * 8 * 128 * 256))
    assert a.loc[2048, "waves"] == pytest.approx(128 / 132)  # 16 x 8 tiles of 128 x 256 on 132 SMs
    assert "not measured" in why.ablations_table(None) and "not measured" in why.alignment_study_table(t, "nope")


def test_the_paragraph_says_not_measured_without_profiles_or_compiled_facts():
    m = pd.DataFrame([cell(size=s) for s in (256, 512)])
    text = why.why_paragraph("vecadd", m, None, None, "h200")
    assert "launches are not measured on this run" in text and "load width are not measured" in text
    assert "recompile" not in text  # rows without the count say nothing of it


@pytest.mark.parametrize("graphs, said", [((1, 1, 1), "one graph in each of its 3 cells"),
                                          ((1, 3, 2), "recompiled in 2 of 3 cells (up to 3 graphs a cell)")])
def test_the_paragraph_counts_torch_compile_recompiles(graphs, said):
    m = pd.DataFrame([cell(impl="compile", size=s, compile_graphs=g)
                      for s, g in zip((256, 512, 1024), graphs)] + [cell(size=1024)])
    assert said in why.why_paragraph("vecadd", m, None, None, "h200")


@pytest.fixture(scope="module")
def reference():
    from analysis.metrics import compute_metrics
    from rooflab.io import CEILING_COLUMNS, read_raw_many, read_results

    from rooflab.kernel import kernel_names

    raw = [p for p in glob.glob(str(REF / "*.parquet")) if Path(p).stem in kernel_names()]
    metrics = compute_metrics(read_raw_many(raw), read_results(str(REF / "ceilings.parquet"), CEILING_COLUMNS))
    return metrics, pd.read_parquet(REF / "profiles.parquet"), pd.read_parquet(REF / "compiled.parquet")


def test_on_the_reference_every_kernel_gets_a_paragraph_from_its_rows(reference):
    metrics, profiles, compiled = reference
    kernels = sorted(set(metrics["kernel"]))
    traffic = pd.read_csv(REF / "traffic.csv")
    paragraphs = why.why_sections(metrics, profiles, compiled, "h200", kernels, traffic)
    for k in kernels:
        assert why.NOT_MEASURED not in paragraphs[k], k
        assert "torch.profiler" in paragraphs[k] and "Nsight Compute" in paragraphs[k], k
    assert "persistent TMA" in why.waves_table(metrics, compiled, "h200")
    assert "1793" in why.alignment_table(metrics, "h200")
    assert not why.plateau(metrics, "h200").empty and not why.cost(metrics, "h200").empty
