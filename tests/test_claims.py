"""Claims that hold (issue 21), on a small synthetic dataset, no GPU: every speedup in its three frames and every
caption and table header naming its frame; a tie named as a tie; every cell above its roof listed; the origin of
every dataset and run; the GPU paper free of CPU rows, the CPU in its own section; projections calibrated by the
measured GPU, with their error, and numbers formatted."""
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import calibration
from analysis.claims import FRAME_WORDS, NO_FRAME, compute_bound, findings, tied_best
from analysis.metrics import compute_metrics
from analysis.paper_inputs import fmt, generate
from rooflab.gpus import SPECS

ROOT = Path(__file__).resolve().parent.parent
H200 = SPECS["h200"]
BW_RATIO, BF_RATIO, FP_RATIO = 0.9, 0.7, 0.8
SOURCES = {"h200": "data/reference/h200", "cpu": "results/raw/cpu"}
RUNS = {
    "legacy": ("", "1111111aaaa", "2026-11-30T10:00:00+00:00"),
    "r2": ("r2", "2222222bbbb", "2026-12-01T09:00:00+00:00"),
    "rc": ("rc", "3333333cccc", "2026-12-02T08:00:00+00:00")
}


def cell(kernel, impl, dtype, n, us, run="legacy", gpu="h200", rse=0.001, **kw):
    run_id, sha, ts = RUNS[run]
    elem = 4 if dtype == "float32" else 2
    if kernel == "matmul":
        flops, nbytes, unit = 2.0 * n**3, 3.0 * n * n * elem, "bf16" if dtype == "bfloat16" else "fp32"
    else:
        per = {"gelu": 2, "vecadd": 3}[kernel]
        flops, nbytes, unit = 8.0 * n * n, per * n * n * elem, "fp32"
    ms = us * 1e-3
    row = {
        "gpu": gpu,
        "kernel": kernel,
        "impl": impl,
        "dtype": dtype,
        "math_mode": {
            "float32": "fp32-ieee",
            "bfloat16": "bf16"
        }[dtype],
        "size": n,
        "pass": "fwd",
        "status": "ok",
        "error": "",
        "median_ms": ms,
        "p20_ms": ms * 0.98,
        "p80_ms": ms * 1.03,
        "rse_median": rse,
        "graph_median_ms": ms * 0.9,
        "loop_ms": ms + 0.01,
        "flops": flops,
        "bytes": nbytes,
        "compute_unit": unit,
        "run_id": run_id,
        "git_sha": sha,
        "git_dirty": False,
        "timestamp": ts,
        "host": "node1",
        "driver": "580.1",
        "cuda": "13.0",
        "torch": "2.11.0",
        "triton": "3.6.0",
        "python": "3.12.3",
        "timer": "host" if gpu == "cpu" else "cuda_event",
        "placements": 4.0,
        "instances": 8.0,
        "sm_clock_after_mhz": 1980.0,
        "sm_clock_max_mhz": 1980.0
    }
    row.update(kw)
    return row


def dataset() -> tuple[pd.DataFrame, pd.DataFrame]:
    """h200: gelu (legacy rows, no run id) with a tie in both precisions, vecadd and matmul (run r2) with cells
    above their roof, beyond noise and within it, and one above it at a low clock; cpu: a few gelu rows (run rc)."""
    rows = []
    for n, scale in ((1024, 1 / 16), (4096, 1.0)):
        for impl, us in (("naive", 300.0), ("builtin", 100.0), ("triton", 65.2), ("compile", 65.2)):
            rows.append(cell("gelu", impl, "float32", n, us * scale))
        for impl, us in (("naive", 150.0), ("builtin", 50.0), ("triton", 50.4), ("compile", 70.0)):
            rows.append(cell("gelu", impl, "bfloat16", n, us * scale))
    roof_us = 3.0 * 4096**2 * 4 / (BW_RATIO * H200.mem_bandwidth) * 1e6  # vecadd fp32 at 4096 on the copy
    rows += [
        cell("vecadd", "builtin", "float32", 4096, roof_us * 1.10, run="r2"),
        cell("vecadd", "triton", "float32", 4096, roof_us / 1.035, run="r2"),  # 3.5 % above: beyond 3 SE
        cell("vecadd", "compile", "float32", 4096, roof_us / 1.002, run="r2", rse=0.002),  # within noise
        cell("vecadd", "naive", "float32", 4096, roof_us / 1.2, run="r2", sm_clock_after_mhz=1000.0)
    ]
    mm_us = 2.0 * 4096**3 / (BF_RATIO * H200.bf16_flops) * 1e6
    rows += [
        cell("matmul", "builtin", "bfloat16", 4096, mm_us * 1.10, run="r2"),
        cell("matmul", "triton", "bfloat16", 4096, mm_us * 1.25, run="r2")
    ]
    for impl, us in (("naive", 900.0), ("builtin", 300.0), ("compile", 310.0)):
        rows.append(cell("gelu", impl, "float32", 256, us, run="rc", gpu="cpu"))
    rows.append(cell("gelu", "triton", "float32", 256, np.nan, run="rc", gpu="cpu", status="not_timed"))
    ceilings = []
    for run in ("legacy", "r2"):
        run_id, _, ts = RUNS[run]
        sha = "7777777dddd" if run == "legacy" else RUNS[run][1]  # the legacy ceilings: their own commit
        for c, v in (("copy", BW_RATIO * H200.mem_bandwidth), ("gemm_fp32", FP_RATIO * H200.fp32_flops),
                     ("gemm_bf16", BF_RATIO * H200.bf16_flops), ("copy_large", BW_RATIO * H200.mem_bandwidth)):
            ceilings.append({
                "gpu": "h200",
                "ceiling": c,
                "value": v,
                "run_id": run_id,
                "git_sha": sha,
                "timestamp": ts,
                "sm_clock_after_mhz": 1980.0,
                "driver": "580.1",
                "cuda": "13.0",
                "torch": "2.11.0",
                "triton": "3.6.0",
                "python": "3.12.3"
            })
    for c, v in (("copy", 5e10), ("gemm_fp32", 1e11)):
        ceilings.append({
            "gpu": "cpu",
            "ceiling": c,
            "value": v,
            "run_id": "rc",
            "git_sha": RUNS["rc"][1],
            "timestamp": RUNS["rc"][2],
            "torch": "2.13.0+cpu",
            "python": "3.11.7"
        })
    ceilings = pd.DataFrame(ceilings)
    return compute_metrics(pd.DataFrame(rows), ceilings), ceilings


FIGURES = ("roofline", "speedup", "scaling", "fusion", "wave", "projection")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    metrics, ceilings = dataset()
    figdir = tmp_path_factory.mktemp("figures")
    for gpu in ("h200", "cpu"):
        for fig in FIGURES + ("bandwidth/gelu", "bandwidth/vecadd"):
            (figdir / gpu / f"{fig}.pdf").parent.mkdir(parents=True, exist_ok=True)
            (figdir / gpu / f"{fig}.pdf").write_bytes(b"%PDF-1.4\n")
    out = generate(metrics, ceilings, str(figdir), sources=SOURCES, launch_counts={"h200", "cpu"})
    return metrics, ceilings, figdir, out


def macros(out) -> dict[str, str]:
    return dict(re.findall(r"^\\newcommand\{\\([A-Za-z]+)\}\{(.*?)\}(?:  % .*)?$", out["macros"], re.M))


def captions(tex: str) -> list[str]:
    """The text of every \\caption{...}, braces balanced."""
    out = []
    for m in re.finditer(r"\\caption\{", tex):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(tex[i], 0)
            i += 1
        out.append(tex[m.end():i - 1])
    return out


def headers(tex: str) -> list[str]:
    """The header of every booktabs tabular: between \\toprule and \\midrule."""
    return re.findall(r"\\toprule\n(.*?)\\midrule", tex, re.S)


PAPER = (ROOT / "paper" / "main.tex").read_text()

# --- 1. three frames -------------------------------------------------------------------------------------------


def test_every_headline_speedup_macro_has_its_three_frames(data):
    defined = macros(data[3])
    speedups = [
        n for n in defined if re.fullmatch(r"[A-Z][a-z]+[A-Z][a-z]+Speedup(Naive)?[A-Z][A-Za-z]*", n)
        and "GraphSpeedup" not in n and "LoopSpeedup" not in n
    ]
    assert "GeluTritonSpeedupFp" in speedups and "GeluTritonSpeedupNaiveBf" in speedups
    for name in speedups:
        for frame in ("Graph", "Loop"):
            assert name.replace("Speedup", f"{frame}Speedup") in defined, (name, frame)
    assert defined["GeluTritonGraphSpeedupFp"] == fmt(100 / 65.2) and \
        defined["GeluTritonLoopSpeedupFp"] == fmt(110 / 75.2)


def test_every_speedup_the_paper_quotes_is_quoted_in_its_three_frames(data):
    texts = [PAPER] + list(data[3].values())
    for text in texts:
        used = set(re.findall(r"\\([A-Z][A-Za-z]*?)Speedup((?:Naive)?[A-Z][A-Za-z]*)", text))
        for base, rest in used:
            if base.endswith(("Graph", "Loop")):
                continue
            for frame in ("Graph", "Loop"):
                assert f"\\{base}{frame}Speedup{rest}" in text, (base, rest, frame)
    citing = (ROOT / "docs" / "citing.md").read_text()
    assert "GraphSpeedup" in citing and "LoopSpeedup" in citing and "Verdict" in citing


TIMED = re.compile(r"\btimes?\b|speedup|bandwidth|GB/s|TFLOP|\\micro|µs|\brates?\b", re.I)


def header_columns(head: str) -> list[tuple[str, str]]:
    """(group, name) of every column of a booktabs header: one row, or a row of \\multicolumn groups over it."""
    rows = [r.strip() for r in head.split("\\\\") if r.strip()]
    names = rows[-1].split(" & ")
    if len(rows) == 1:
        return [("", n) for n in names]
    groups = []
    for part in rows[0].split(" & "):
        m = re.fullmatch(r"\\multicolumn\{(\d+)\}\{\w\}\{(.*)\}", part.strip())
        groups += [m.group(2)] * int(m.group(1)) if m else [part.strip()]
    return list(zip(groups, names))


TIMED_COLUMN = re.compile(r"\\micro|GB/s|TFLOP|TB/s|^vs |/ model|achieved|^roof$|diff|^measured|^fixed|^margin|time")


def test_every_caption_and_table_header_names_its_frame(data):
    texts = {"main.tex": PAPER, **data[3]}
    for name, text in texts.items():
        for cap in captions(text):
            if TIMED.search(cap):
                assert any(w in cap for w in FRAME_WORDS + (NO_FRAME, )), (name, cap[:90])
        for head in headers(text):
            columns = header_columns(head)
            if any(n == "frame" for _, n in columns):  # the frame is a column of its own
                continue
            for group, column in columns:
                if group or TIMED_COLUMN.search(column):
                    # a model time is in no measured frame: it says it is a model
                    assert any(w in group + " " + column for w in FRAME_WORDS + ("model", )), (name, group, column)


# --- 2. ties are ties ------------------------------------------------------------------------------------------


def test_tied_best_names_every_implementation_within_noise():
    cell_ = pd.DataFrame({
        "impl": ["builtin", "triton", "compile"],
        "median_ms": [0.100, 0.0652, 0.0652],
        "rse_median": [0.001] * 3
    })
    assert list(tied_best(cell_)["impl"]) == ["triton", "compile"]
    apart = cell_.assign(median_ms=[0.100, 0.0652, 0.0700])  # 7 % apart, a long cell: not a tie
    assert list(tied_best(apart)["impl"]) == ["triton"]
    short = cell_.assign(median_ms=[0.0050, 0.0040, 0.0043])  # under the short-cell threshold: a 10 % floor
    assert list(tied_best(short)["impl"]) == ["triton", "compile"]
    # rows by position: a frame that repeats index labels (a concatenation) gives each row once; NaN is no time
    repeated = pd.concat([cell_.iloc[:1], cell_.iloc[1:].assign(median_ms=[0.0652, np.nan])]).set_axis([0, 0, 0])
    assert list(tied_best(repeated)["impl"]) == ["triton"] and tied_best(repeated.iloc[:0]).empty


def test_a_tie_is_never_called_the_fastest(data):
    metrics, _, _, out = data
    m = macros(out)
    assert m["GeluBestImplFp"] == "Triton (ours) and torch.compile" and m["GeluBestTiedFp"] == "2"
    assert m["GeluBestImplBf"] == "PyTorch builtin and Triton (ours)"  # 50.0 vs 50.4 us: within noise
    assert m["GeluTritonVerdictBf"] == "tie" and m["GeluTritonVerdictFp"] == "faster"
    kernels = out["kernels"]
    assert "\\GeluBestImplFp{} tie in GPU time" in kernels
    assert "\\GeluTritonTimeUsFp{} and \\GeluCompileTimeUsFp{}" in kernels
    assert "fastest correct implementation in GPU time is \\GeluBestImplFp" not in kernels
    assert "fastest correct implementation in GPU time is \\GeluBestImplBf" not in kernels
    row = next(line for line in out["table_projection"].splitlines() if line.startswith("gelu & float32"))
    assert "Triton and compile (tie)" in row


def test_a_kernel_is_rated_against_the_roof_that_binds_it(data):
    """compute_bound decides a figure's unit and caption: matmul 4096^3 bf16 is compute-bound, the elementwise
    kernels memory-bound, and rows without a roofline verdict are not called compute-bound."""
    metrics = data[0]
    assert compute_bound(metrics[metrics["kernel"] == "matmul"])
    assert not compute_bound(metrics[metrics["kernel"] == "vecadd"])
    assert not compute_bound(metrics[metrics["kernel"] == "gelu"])
    assert not compute_bound(metrics[metrics["kernel"] == "matmul"].drop(columns="bound"))


def test_the_kernel_table_shows_the_verdict_not_a_bare_ratio(data):
    table = data[3]["kernels"]
    assert "verdict" in table and "& tie &" in table and "& faster &" in table


# --- 3. findings -----------------------------------------------------------------------------------------------


def test_findings_table_lists_every_cell_above_its_roof(data):
    metrics, _, _, out = data
    f = findings(metrics)
    listed = set(zip(f["kernel"], f["impl"]))
    assert listed == {("vecadd", "triton"), ("vecadd", "compile")}  # naive is above too, but at a low clock
    assert dict(zip(f["impl"], f["beyond_noise"])) == {"triton": True, "compile": False}
    assert set(metrics.loc[metrics["above_roof"], "impl"]) <= {"triton"}
    tri = f[f["impl"] == "triton"].iloc[0]  # the numbers the table prints: the copy's roof in GB/s, 3.5 % over it
    assert tri["unit"] == "GB/s" and tri["roof"] == pytest.approx(BW_RATIO * H200.mem_bandwidth / 1e9)
    assert tri["achieved"] == pytest.approx(tri["roof"] * 1.035) and tri["excess_pct"] == pytest.approx(3.5)
    assert tri["se_pct"] == pytest.approx(0.1)
    t = out["table_findings"]
    assert "Triton (ours)" in t and "torch.compile" in t and "naive" not in t
    assert "within 3 standard errors" in t and "reads more than it writes" in t and "Reasons: (a)" in t
    assert "3.5" in t  # the excess, percent
    m = macros(out)
    assert m["FindingsAboveRoof"] == "1" and m["FindingsAtRoof"] == "1"
    assert "\\input{results/paper/generated/table_findings}" in PAPER


# --- 4. origin of every number ---------------------------------------------------------------------------------


def test_provenance_table_lists_every_run_in_the_data(data):
    metrics, ceilings, _, out = data
    t = out["table_provenance"]
    assert "H200: the suite's reference measurements, data/reference/h200" in t
    assert "\\texttt{r2}" in t and "\n-- & 1111111" in t  # a legacy group: no run id
    for sha in ("1111111", "2222222", "7777777"):  # cells' commits, and the legacy ceilings' own
        assert sha in t
    lines = {line.split(" & ")[1]: line for line in t.splitlines() if line.count(" & ") > 5}
    assert lines["1111111"].split(" & ")[3:5] == ["16", "0"]  # 16 gelu cells, no ceilings
    assert lines["2222222"].split(" & ")[3:5] == ["6", "4"]  # 6 cells, 4 ceilings of run r2
    assert lines["7777777"].split(" & ")[3:5] == ["0", "4"]  # the legacy ceilings
    assert "2026-11-30" in lines["1111111"] and "as above" in lines["1111111"]
    assert "every run: driver 580.1, CUDA 13.0, torch 2.11.0, Triton 3.6.0, Python 3.12.3" in t
    assert "cuda\\_event; 4 placements; 8 instances" in lines["2222222"]
    assert "\\texttt{rc}" not in t and "3333333" not in t  # the CPU's run is in the CPU section
    assert "\\texttt{rc}" in out["cpu"] and "CPU: this build's own measurements, results/raw/cpu" in out["cpu"]
    m = macros(out)
    assert m["HeadlineSource"] == "the suite's reference measurements, Appendix~\\ref{sec:origin}"
    assert m["DataOrigin"] == ("GPU data: H200, the suite's reference measurements; CPU data: this build's own "
                               "measurements, Appendix~\\ref{sec:cpu}")  # no folder names in a reader's title
    assert "\\date{" in PAPER and "\\DataOrigin" in PAPER and "measurements of this run (devices" not in PAPER


def test_a_gpu_measured_here_reads_as_this_run(data):
    metrics, ceilings, figdir, _ = data
    out = generate(metrics, ceilings, str(figdir), sources={"h200": "results/raw/h200"})
    assert macros(out)["HeadlineSource"] == "this build's own measurements, Appendix~\\ref{sec:origin}"
    assert "(H200: this build's own measurements, results/raw/h200)" in out["figures"]


# --- 5. CPU apart ----------------------------------------------------------------------------------------------


def test_no_cpu_row_in_the_gpu_paper(data):
    metrics, ceilings, figdir, out = data
    gpu_only = generate(metrics[metrics["gpu"] != "cpu"], ceilings[ceilings["gpu"] != "cpu"], str(figdir),
                        sources=SOURCES, launch_counts={"h200", "cpu"})

    def gpu_macros(text):
        # the CPU's own macros, and the provenance sentences that name every device of the run (the CPU too)
        return [
            line for line in text.splitlines()
            if not re.match(r"\\newcommand\{\\(Cpu|DataOrigin|MeasuredThisRun)", line)
        ]

    for name, text in out.items():
        if name == "macros":
            assert gpu_macros(text) == gpu_macros(gpu_only[name])
        elif name != "cpu":
            assert text == gpu_only[name], name
            assert "/cpu/" not in text, name
    assert macros(out)["GpuList"] == "h200" and macros(out)["CellsTotal"] == "22"


def test_the_cpu_section_holds_only_what_applies_to_a_cpu(data):
    cpu = data[3]["cpu"]
    assert "\\section{CPU results}" in cpu and "\\label{sec:cpu}" in cpu
    for fig in ("roofline", "speedup", "scaling", "fusion"):
        assert f"cpu/{fig}.pdf" in cpu
    for fig in ("wave", "projection", "bandwidth"):  # meaningless on a CPU, or left to the report
        assert f"cpu/{fig}" not in cpu
    body = "".join(captions(cpu)) + "".join(headers(cpu))
    for word in ("CUDA graph", "TF32", "launch floor", "GPU kernels launched", "GPU time"):
        assert word not in body, word
    assert "aten operators" in body and "host time" in body
    assert macros(data[3])["CpuCellsOk"] == "3" and macros(data[3])["CpuCellsNotTimed"] == "1"
    assert "\\input{results/paper/generated/cpu}" in PAPER


def test_no_figure_without_data_enters_the_paper(data):
    metrics, ceilings, figdir, _ = data
    out = generate(metrics[metrics["kernel"] != "matmul"], ceilings, str(figdir), sources=SOURCES,
                   launch_counts={"h200"})
    assert "h200/wave.pdf" not in out["figures_projection"]  # no matrix product: an empty wave figure
    assert "cpu/fusion.pdf" not in out["cpu"]  # no launch counts for the CPU
    assert "h200/fusion.pdf" in out["figures"]


# --- 6. projections calibrated ---------------------------------------------------------------------------------


def test_projections_are_scaled_by_the_measured_over_datasheet_ratio(data):
    metrics = data[0]
    t, r = calibration.projections(metrics, "h200")
    assert r["bandwidth"] == pytest.approx(BW_RATIO) and r["bf16"] == pytest.approx(BF_RATIO)
    assert r["fp32"] == pytest.approx(FP_RATIO) and np.isnan(r["tf32"])
    vec = t[(t["kernel"] == "vecadd")].iloc[0]
    a100 = SPECS["a100"]
    assert vec["model_ms_a100"] == pytest.approx(vec["bytes"] / (BW_RATIO * a100.mem_bandwidth) * 1e3)
    mm = t[(t["kernel"] == "matmul")].iloc[0]
    b200 = SPECS["b200"]
    assert mm["model_ms_b200"] == pytest.approx(2.0 * 4096**3 / (BF_RATIO * b200.bf16_flops) * 1e3)
    assert mm["measured_over_model"] == pytest.approx(1.10)  # the builtin, 10 % over the model on the H200
    err = calibration.error(t).set_index("bound")
    assert err.loc["compute", "median"] == pytest.approx(1.10) and err.loc["memory", "cells"] == 3
    m = macros(data[3])
    assert m["CalibrationBandwidthRatio"] == "0.9" and m["CalibrationBfRatio"] == "0.7"
    assert m["CalibrationComputeMedian"] == "1.1"
    assert m["MatmulModelTimeUsBfBTwoHundred"] == fmt(2.0 * 4096**3 / (BF_RATIO * b200.bf16_flops) * 1e6)


def test_projection_table_is_labelled_model_and_formatted(data):
    out = data[3]
    table = out["table_projection"]
    assert "model calibrated to h200" in table and "/ model" in table
    assert not re.search(r"\de[+-]\d", table + out["table_calibration"]), "a number printed as 1e+03"
    b200_us = 2.0 * 4096**3 / (BF_RATIO * SPECS["b200"].bf16_flops) * 1e6
    row = next(line for line in table.splitlines() if line.startswith("matmul"))
    assert row.rstrip(" \\").endswith(fmt(b200_us))
    assert "0.9" in out["table_calibration"] and "GPU time / model" in out["table_calibration"]


@pytest.mark.parametrize("x, text", [(999.6, "1{,}000"), (1234.5, "1{,}234"), (64.44, "64.4"), (0.5, "0.5"),
                                     (12345678.0, "12{,}345{,}678"), (1.234e-5, "$1.23\\times10^{-5}$"),
                                     (float("nan"), "n/a")])
def test_fmt_never_prints_an_exponent(x, text):
    assert fmt(x) == text
