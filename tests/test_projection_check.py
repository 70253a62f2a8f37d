"""analysis/projection_check.py on a synthetic pair of GPUs: a planted model error shows up in its class only, a class
without cells reports n = 0, and one measured GPU gives a sentence, not a crash."""
import re

import numpy as np
import pandas as pd
import pytest

from analysis import projection_check as pc
from analysis.metrics import compute_metrics
from rooflab.gpus import SPECS

BANDWIDTH_RATIO, BF16_RATIO = 0.9, 0.8  # each card's measured / datasheet: what the calibrated model scales by
LAUNCH_MS = 0.005  # a launch-bound call's GPU time on either card


def two_gpus(memory_error: float = 0.0, kernels=("vecadd", "matmul", "gelu"), gpus=("h200", "h100")):
    """Metrics of cells measured on `gpus` (the first is the source the error is planted against): every cell takes
    its calibrated model time, except the memory-bound cells of the last GPU, which take model / (1 + memory_error)
    (so a projection onto it is off by memory_error). Memory-bound: vecadd at 2048-8192 (50-800 MB); compute-bound:
    a bf16 matmul at 4096 and 8192; launch-bound: gelu at 256 (0.5 MB, 5 us)."""
    rows = []
    for gpu in gpus:
        spec = SPECS[gpu]
        bandwidth = spec.mem_bandwidth * BANDWIDTH_RATIO
        for impl in ("builtin", "triton"):
            if "vecadd" in kernels:
                for n in (2048, 4096, 8192):
                    nbytes = 12.0 * n * n
                    ms = nbytes / bandwidth * 1e3 / (1 + (memory_error if gpu == gpus[-1] else 0.0))
                    rows.append(_row(gpu, "vecadd", impl, "float32", "fp32-ieee", "fp32", n, 1.0 * n * n, nbytes, ms))
            if "matmul" in kernels:
                for n in (4096, 8192):
                    flops = 2.0 * n**3
                    ms = flops / (spec.bf16_flops * BF16_RATIO) * 1e3
                    rows.append(_row(gpu, "matmul", impl, "bfloat16", "bf16", "bf16", n, flops, 6.0 * n * n, ms))
            if "gelu" in kernels:
                rows.append(
                    _row(gpu, "gelu", impl, "float32", "fp32-ieee", "fp32", 256, 8.0 * 256**2, 8.0 * 256**2, LAUNCH_MS))
    ceilings = pd.DataFrame([{
        "gpu": g,
        "ceiling": c,
        "value": v
    } for g in gpus for c, v in (("copy", SPECS[g].mem_bandwidth * BANDWIDTH_RATIO),
                                 ("gemm_fp32", SPECS[g].fp32_flops * 0.7), ("gemm_bf16",
                                                                            SPECS[g].bf16_flops * BF16_RATIO))])
    return compute_metrics(pd.DataFrame(rows), ceilings)


def _row(gpu, kernel, impl, dtype, math_mode, unit, n, flops, nbytes, ms):
    return {
        "gpu": gpu,
        "kernel": kernel,
        "impl": impl,
        "dtype": dtype,
        "math_mode": math_mode,
        "size": n,
        "shape": f"{n}x{n}",
        "pass": "fwd",
        "status": "ok",
        "error": "",
        "median_ms": ms,
        "flops": flops,
        "bytes": nbytes,
        "compute_unit": unit
    }


def calibrated(summary, source, target, cls):
    s = summary[(summary["source"] == source) & (summary["target"] == target) & (summary["model"] == "calibrated")]
    return s.set_index("class").loc[cls]


def test_the_classes_come_from_time_bytes_and_bound():
    cells, _, _ = pc.check(two_gpus())
    one = cells[(cells["source"] == "h200") & (cells["target"] == "h100") & (cells["model"] == "calibrated")]
    assert set(one.loc[one["kernel"] == "vecadd", "class"]) == {"memory"}
    assert set(one.loc[one["kernel"] == "matmul", "class"]) == {"compute"}
    assert set(one.loc[one["kernel"] == "gelu", "class"]) == {"launch"}


def test_a_calibrated_model_that_holds_has_no_error_in_either_direction():
    _, summary, gpus = pc.check(two_gpus())
    assert gpus == ["h200", "h100"]
    for source, target in (("h200", "h100"), ("h100", "h200"), ("h200", "h200")):
        for cls in ("memory", "compute"):
            r = calibrated(summary, source, target, cls)
            assert r["cells"] > 0 and r["median_abs_error"] == pytest.approx(0, abs=1e-9)
            assert bool(r["meets_goal"])


def test_a_planted_error_shows_in_its_class_only():
    _, summary, _ = pc.check(two_gpus(memory_error=0.2))
    memory = calibrated(summary, "h200", "h100", "memory")
    assert memory["cells"] == 6  # 3 sizes x 2 implementations
    assert memory["median_abs_error"] == pytest.approx(0.2) and memory["median_error"] == pytest.approx(0.2)
    assert memory["p90_abs_error"] == pytest.approx(0.2)
    assert not bool(memory["meets_goal"])
    assert calibrated(summary, "h200", "h100", "compute")["median_abs_error"] == pytest.approx(0, abs=1e-9)
    # the scaled projection carries the H200's own distance from the roof, and finds the same 20 %
    s = summary.set_index(["source", "target", "model", "class"])
    assert s.loc[("h200", "h100", "scaled", "memory"), "median_abs_error"] == pytest.approx(0.2)
    # the H100's cells sit off its own model: the model there shows it, and the H100's cells scaled onto the H200
    # carry it; the calibrated model onto the H200 takes the H100's ceilings only, and holds
    assert calibrated(summary, "h100", "h100", "memory")["median_error"] == pytest.approx(0.2)
    assert s.loc[("h100", "h200", "scaled", "memory"), "median_error"] == pytest.approx(1 / 1.2 - 1)
    assert calibrated(summary, "h100", "h200", "memory")["median_abs_error"] == pytest.approx(0, abs=1e-9)


def test_launch_bound_cells_do_not_scale_with_bandwidth():
    cells, summary, _ = pc.check(two_gpus())
    scaled = summary.set_index(["source", "target", "model", "class"]).loc[("h200", "h100", "scaled", "launch")]
    # the same 5 us on both cards, projected by the bandwidth ratio of the two datasheets
    assert scaled["median_error"] == pytest.approx(SPECS["h200"].mem_bandwidth / SPECS["h100"].mem_bandwidth - 1)


def test_a_class_without_cells_reports_n_zero():
    _, summary, _ = pc.check(two_gpus(kernels=("vecadd", "gelu")))
    r = calibrated(summary, "h200", "h100", "compute")
    assert r["cells"] == 0 and np.isnan(r["median_abs_error"]) and pd.isna(r["meets_goal"])
    assert "no compute-bound cells" in pc.sentence(summary, ["h200", "h100"])
    table = pc.table_tex(summary, ["h200", "h100"])
    assert "\\toprule" in table and "compute & 0" in table
    assert "n/a" in pc.macros_tex(summary, ["h200", "h100"], 10.0)


def test_one_measured_gpu_gives_a_sentence_and_its_own_error():
    metrics = two_gpus(gpus=("h200", ))
    cells, summary, gpus = pc.check(metrics)
    assert gpus == ["h200"] and set(zip(summary["source"], summary["target"])) == {("h200", "h200")}
    assert "scaled" not in set(summary["model"])  # onto the card itself the scaled projection is the measurement
    text = pc.sentence(summary, gpus)
    assert text.startswith("Only the H200 has been measured") and "H200 itself" in text
    table = pc.table_tex(summary, gpus)
    assert "Only the H200" in table and "scaled" not in table


def test_no_gpu_and_the_cpu_only_are_a_sentence():
    cpu = two_gpus(gpus=("h200", )).assign(gpu="cpu")
    cells, summary, gpus = pc.check(cpu)
    assert gpus == [] and summary.empty and cells.empty
    assert pc.table_tex(summary, gpus).startswith("\\begin{center}No GPU")
    assert "No GPU" in pc.macros_tex(summary, gpus, 10.0)


def test_main_writes_every_output(tmp_path):
    path = tmp_path / "metrics.parquet"
    two_gpus(memory_error=0.2).to_parquet(path)
    out = {
        k: tmp_path / name
        for k, name in (("cells", "cells.parquet"), ("summary", "summary.csv"), ("table", "table.tex"), ("macros",
                                                                                                         "macros.tex"))
    }
    pc.main(["--metrics", str(path), "--verdicts", '{"short_cell_us": 10}'] +
            [a for k, p in out.items() for a in (f"--{k}", str(p))])
    summary = pd.read_csv(out["summary"])
    assert list(summary.columns) == pc.SUMMARY_COLUMNS
    assert set(pd.read_parquet(out["cells"])["model"]) == set(pc.MODELS)
    macros = out["macros"].read_text()
    assert "\\newcommand{\\ProjCheckCalibratedMemoryMedianPctHTwoHundredToHOneHundred}{20}" in macros
    for line in macros.splitlines()[1:]:
        assert re.fullmatch(r"\\newcommand\{\\[A-Za-z]+\}\{.*\}(?:  % .*)?", line), line


def test_the_paper_uses_only_macros_the_check_defines():
    """The projection section's ProjectionCheck macros are all defined, whatever the data."""
    from pathlib import Path

    tex = (Path(__file__).resolve().parent.parent / "paper" / "main.tex").read_text()
    used = set(re.findall(r"\\(ProjectionCheck[A-Za-z]*|ProjCheck[A-Za-z]*)", tex))
    assert used
    _, summary, gpus = pc.check(two_gpus(gpus=("h200", )))
    defined = set(re.findall(r"\\newcommand\{\\([A-Za-z]+)\}", pc.macros_tex(summary, gpus, 10.0)))
    assert used <= defined, sorted(used - defined)
    assert "\\input{results/paper/generated/table_projection_check}" in tex
