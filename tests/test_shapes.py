"""Shapes in the sweep (issue 23): the families, the presets' contents, config `shapes` and its errors, every kernel
at shapes that are not N x N, and one sweep of explicit shapes end to end under the interpreter."""
from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from rooflab import config as rcfg
from rooflab import shapes
from rooflab.cell import Cell, relative_error, run_cell
from rooflab.kernel import kernel_names, load_kernel
from rooflab.timing import TimingConfig

SCHEMA = rcfg.load_schema()
MIB = 1 << 20
FAST_TIMING = {
    "warmup_ms": 1,
    "min_samples": 3,
    "max_samples": 5,
    "target_rse": 0.5,
    "max_time_s": 0.02,
    "flush_l2": False,
    "cudagraph": False,
    "placements": 1,
    "instances": 1
}
KERNELS = {name: load_kernel(name) for name in kernel_names()}
# Shapes of every family that no preset lists: odd, skinny, one row, one column
ODD_SHAPES = {
    "rows": [(3, 37), (1, 300), (37, 1), (5, 129)],
    "mkn": [(3, 37, 5), (1, 64, 7), (17, 1, 33)],
    "bhsd": [(1, 2, 37, 16), (2, 1, 5, 32)]
}

# ------------------------------------------------------------------------------------------------- the presets


@pytest.mark.parametrize("preset", ["llm", "odd"])
def test_every_preset_shape_is_of_its_family_and_named(preset):
    for family, table in shapes.PRESETS[preset].items():
        assert table, f"{preset} lists no {family} shape"
        for s in table:
            assert shapes.as_shape(s.dims, family) == s.dims and s.source
        assert len({s.dims for s in table}) == len(table), f"{preset} {family}: a shape listed twice"


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("preset", ["llm", "odd"])
def test_preset_shapes_are_worth_timing_and_fit(name, preset):
    """Every preset shape moves at least 1 MiB in bfloat16 (a smaller call times the launch) and at most 4 GiB in
    float32 (a device's memory holds its placements and the float64 check)."""
    k = KERNELS[name]
    for dims in shapes.preset_shapes(preset, k.family):
        for p in k.passes:
            kw = {"pass_": p} if len(k.passes) > 1 else {}
            assert k.bytes(dims, "bfloat16", **kw) >= MIB, (name, dims, p)
            assert k.bytes(dims, "float32", **kw) <= 4 << 30, (name, dims, p)


def test_llm_preset_spans_the_models():
    rows = [s for s in shapes.LLM["rows"]]
    cols = {s.dims[1] for s in rows}
    assert {4096, 8192, 16384} <= cols, "hidden sizes of Llama-3 8B, 70B, 405B"
    assert {14336, 28672, 53248} <= cols, "MLP widths"
    assert {128256, 32000, 151936, 256000, 50257} <= cols, "vocabularies"
    tokens = {s.dims[0] for s in rows} | {s.dims[0] for s in shapes.LLM["mkn"]}
    assert min(tokens) == 1 and max(tokens) == 16384
    mkn = shapes.LLM["mkn"]
    assert any(s.dims[0] >= 2048 for s in mkn) and any(s.dims[0] <= 128 for s in mkn), "prefill and decode"
    for s in rows + list(mkn):
        assert any(model in s.source for model in ("Llama", "Mistral", "Qwen", "Gemma", "GPT-2")), s


def test_odd_preset_has_what_a_power_of_two_sweep_misses():
    rows = [s.dims for s in shapes.ODD["rows"]]
    assert sum(1 for _, c in rows if c & (c - 1)) >= len(rows) - 1, "row lengths that are no power of two"
    assert any(r <= 16 and c >= 100_000 for r, c in rows), "few long rows"
    assert any(r >= 100_000 and c <= 128 for r, c in rows), "many short rows"


def test_schema_names_the_presets_and_families_of_rooflab_shapes():
    items = SCHEMA["properties"]["shapes"]["items"]["anyOf"]
    assert tuple(items[0]["enum"]) == shapes.PRESET_NAMES
    assert set(items[1]["properties"]) == set(shapes.FAMILIES)
    for family, node in items[1]["properties"].items():
        arrays = node["items"]["anyOf"][0]
        assert arrays["minItems"] == arrays["maxItems"] == len(shapes.FAMILIES[family])
    assert SCHEMA["properties"]["shapes"]["default"] == [shapes.SQUARE]


# ----------------------------------------------------------------------------------------------- config shapes


def test_shape_sets_from_presets_and_explicit_shapes():
    sets = shapes.shape_sets([
        "square", "llm", {
            "rows": [[4096, 4097], "1000000x32"],
            "mkn": ["16x4096x14336"]
        }, {
            "rows": [[4096, 4097], [8, 8]]
        }
    ])
    assert list(sets) == ["square", "llm", "custom"] and sets["square"] == {}
    assert sets["custom"] == {"rows": [[4096, 4097], [1000000, 32], [8, 8]], "mkn": [[16, 4096, 14336]]}
    assert sets["llm"]["mkn"][0] == list(shapes.LLM["mkn"][0].dims)
    assert shapes.shape_sets("odd") == {"odd": {f: [list(s.dims) for s in t] for f, t in shapes.ODD.items()}}
    assert shapes.set_shapes(sets, "square", "mkn", [512, 256, 512]) == [(256, 256, 256), (512, 512, 512)]


@pytest.mark.parametrize("spec, named", [(["llmx"], "shapes[0]"),
                                         (["square", {
                                             "mnk": [[16, 4096, 14336]]
                                         }], "unknown family 'mnk'"), ([{
                                             "rows": [[4096]]
                                         }], "shapes[0].rows[0]"), ([{
                                             "rows": [4096]
                                         }], "shapes[0].rows[0]"), ([{
                                             "mkn": ["16x4096"]
                                         }], "shapes[0].mkn[0]"), ([{
                                             "rows": [[0, 5]]
                                         }], "shapes[0].rows[0]"), ([{
                                             "rows": []
                                         }], "shapes[0].rows"), ([], "'shapes'"), ])
def test_bad_shapes_name_the_entry(spec, named):
    with pytest.raises(shapes.ShapeError, match=None) as err:
        shapes.shape_sets(spec)
    assert named in str(err.value)


@pytest.mark.parametrize("spec, key, says", [(["llmx"], "shapes[0]", "is not one of"),
                                             ([{
                                                 "rows": [[4096]]
                                             }], "shapes[0].rows[0]", "too short"),
                                             ([{
                                                 "rows": [[1, 2, 3]]
                                             }], "shapes[0].rows[0]", "too long"),
                                             ([{
                                                 "mkn": ["16x4096"]
                                             }], "shapes[0].mkn[0]", "does not match"),
                                             ([{
                                                 "rows": [[0, 5]]
                                             }], "shapes[0].rows[0][0]", "less than the minimum"),
                                             ([{
                                                 "mnk": [[1, 2, 3]]
                                             }], "shapes[0]", "'mnk' was unexpected"), ])
def test_schema_errors_name_the_entry_and_what_is_wrong(spec, key, says):
    config = rcfg.fill_defaults({"sizes": [64], "shapes": spec}, SCHEMA)
    with pytest.raises(rcfg.ConfigError) as err:
        rcfg.check_schema(config, SCHEMA)
    line = next(line for line in str(err.value).splitlines() if f"'{key}'" in line)
    assert says in line, str(err.value)


def test_command_line_shapes_are_typed():
    """--config gives every scalar as a string (snakemake's BaseLoader): a shape's numbers become ints."""
    raw = {"sizes": ["64"], "shapes": ["llm", {"rows": [["4096", "4097"], "5x7"], "mkn": [["1", "2", "3"]]}]}
    out = rcfg.coerce(raw, SCHEMA)
    assert out["shapes"] == ["llm", {"rows": [[4096, 4097], "5x7"], "mkn": [[1, 2, 3]]}]
    rcfg.check_schema(rcfg.fill_defaults(out, SCHEMA), SCHEMA)
    assert rcfg.coerce({"shapes": "odd"}, SCHEMA) == {"shapes": ["odd"]}


def test_resolve_and_sweep_params_per_set():
    config = rcfg.resolve(
        rcfg.fill_defaults({
            "sizes": [64],
            "gpus": ["cpu"],
            "shapes": ["llm", {
                "rows": ["3x5"]
            }]
        }, SCHEMA))
    assert rcfg.measured_presets(config) == ["llm", "custom"]
    assert rcfg.sweep_params(config, "custom")["shapes"] == {"rows": [[3, 5]]}
    square = rcfg.sweep_params(config)
    assert square["preset"] == "square" and square["sizes"] == [64] and "shapes" not in square


# -------------------------------------------------------------------------------------- kernels at any shape

SQUARE_48 = {
    "rows": (48, 48),
    "mkn": (48, 48, 48),
    "bhsd": (16384 // 48, 2048 // 128, 48, 128)
}  # 16k tokens a batch, width 2048, head dim 128


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_int_is_the_square_shape(name):
    k = KERNELS[name]
    n, square = 48, SQUARE_48[k.family]
    assert shapes.square(k.family, n) == square
    assert k.shape(n) == square and k.problem(n) == shapes.label(square)
    for p in k.passes:
        kw = {"pass_": p} if len(k.passes) > 1 else {}
        assert k.flops(n, **kw) == k.flops(square, **kw)
        assert k.bytes(n, "float32", **kw) == k.bytes(square, "float32", **kw)
    a, b = k.make_inputs(n, torch.float32, "cpu", 0), k.make_inputs(square, torch.float32, "cpu", 0)
    assert all(torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y for x, y in zip(a, b))


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_inputs_and_models_follow_the_shape(name):
    """At shapes no preset lists: the inputs have the shape's dimensions, the builtin's answer passes the float64
    check, and the FLOP and byte models count what the shape holds."""
    k = KERNELS[name]
    for dims in ODD_SHAPES[k.family]:
        inputs = k.make_inputs(dims, torch.float32, "cpu", 1)
        tensors = [x for x in inputs if isinstance(x, torch.Tensor) and x.dim() == 2]
        if k.family == "rows":
            assert all(tuple(x.shape) == dims for x in tensors)
        elif k.family == "bhsd":
            assert all(tuple(x.shape) == dims for x in inputs)
        else:
            m, kk, n = dims
            assert [tuple(x.shape) for x in tensors] == [(m, kk), (kk, n)]
        for p in k.passes:
            kw = {"pass_": p} if len(k.passes) > 1 else {}
            if name == "layernorm" and dims[1] == 1 and p == "fwd+bwd":
                continue  # one column: x - mean is 0 and rstd = 1/sqrt(eps) scales rounding in dx 316-fold
            out = k.impls["builtin"](inputs, **kw)()
            rel, _ = relative_error(out, k.reference(inputs, **kw))
            assert rel <= k.tolerance["float32"], (name, dims, p, rel)
    if k.family == "rows":  # rows are independent: twice the rows, twice the work; the columns' vectors once
        for p in k.passes:
            kw = {"pass_": p} if len(k.passes) > 1 else {}
            assert k.flops((10, 37), **kw) == 2 * k.flops((5, 37), **kw)
            assert k.bytes((10, 37), "float32", **kw) <= 2 * k.bytes((5, 37), "float32", **kw)
            assert k.bytes((5, 37), "float32", **kw) >= 2 * 5 * 37 * 4 or name == "rowsum"
    elif k.family == "bhsd":  # batch and heads are independent; seq is squared
        assert k.flops((2, 3, 5, 16)) == 2 * k.flops((1, 3, 5, 16)) == 2 * k.flops((2, 3, 5, 16)) / 2
        assert k.flops((1, 1, 10, 16)) == 4 * k.flops((1, 1, 5, 16))
        assert k.bytes((2, 3, 5, 16), "bfloat16") == 2 * k.bytes((1, 3, 5, 16), "bfloat16")
    else:
        assert k.flops((3, 5, 7)) == 2 * 3 * 5 * 7 + 3 * 7
        assert k.bytes((3, 5, 7), "bfloat16") == (3 * 5 + 5 * 7 + 3 * 7) * 2


def test_bad_shape_for_a_kernel_says_its_family():
    with pytest.raises(shapes.ShapeError, match=r"M x K x N"):
        KERNELS["matmul"].make_inputs((4, 5), torch.float32, "cpu")
    with pytest.raises(shapes.ShapeError, match=r"rows x cols"):
        KERNELS["softmax"].flops((4, 5, 6))


@pytest.mark.parametrize("name, dims", [("softmax", (9, 40)), ("layernorm", (9, 40)), ("rowsum", (9, 40)),
                                        ("matmul", (9, 20, 11))])
def test_large_shapes_are_checked_on_a_sample_of_rows(monkeypatch, name, dims):
    """Past rooflab.cell.CHECK_MAX_ELEMENTS the float64 check compares evenly spaced rows (the first and the last
    among them); the row says how many. A wrong row among them still fails the check."""
    import rooflab.cell

    monkeypatch.setattr(rooflab.cell, "CHECK_MAX_ELEMENTS", 4 * sum(dims[1:]))
    k = KERNELS[name]
    row = run_cell(k, Cell(name, "builtin", "float32", None, "fwd", dims, "custom"), "cpu",
                   TimingConfig.from_config(FAST_TIMING))
    assert row["status"] == "ok" and row["checked_rows"] == 4 and row["shape"] == shapes.label(dims)
    assert math.isnan(row["size"]) and row["preset"] == "custom" and row["family"] == k.family

    builtin = k.impls["builtin"]
    monkeypatch.setitem(k.impls, "builtin", lambda inputs, **kw: _spoil_last_row(builtin(inputs, **kw)))
    row = run_cell(k, Cell(name, "builtin", "float32", None, "fwd", dims, "custom"), "cpu",
                   TimingConfig.from_config(FAST_TIMING))
    assert row["status"] == "mismatch"


def _spoil_last_row(fn):

    def call():
        out = fn().clone()
        out[-1] += 1.0
        return out

    return call


# ------------------------------------------------------------------------------------------------- end to end


def test_sweep_of_explicit_shapes_under_the_interpreter(tmp_path, monkeypatch):
    """One kernel at explicit shapes that are not N x N, Triton under TRITON_INTERPRET=1: rows named by shape, size
    NaN, set custom; a second run reuses every cell from the store (keyed by shape); the metrics take them."""
    from analysis.metrics import compute_metrics
    from experiments.measure import run

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    params = {
        "dtypes": ["float32"],
        "impls": ["builtin", "triton"],
        "timing": FAST_TIMING,
        "interpret_max_size": 64,
        "seed": 0,
        "allow_failures": False,
        "reuse_cells": True,
        "preset": "custom",
        "shapes": shapes.shape_sets([{
            "rows": [[37, 100], "3x129"],
            "mkn": [[2, 3, 4]]
        }])["custom"]
    }
    out = tmp_path / "shapes" / "custom" / "rowsum.parquet"
    assert run("rowsum", "cpu", str(out), params, progress=False) == 0
    df = pd.read_parquet(out)
    assert sorted(df["shape"].unique()) == ["37x100", "3x129"] and df["size"].isna().all()
    assert set(df["preset"]) == {"custom"} and set(df["family"]) == {"rows"}
    assert set(df.loc[df.impl == "triton", "status"]) == {"not_timed"}  # 3700 elements <= 64^2: checked, not timed
    assert set(df.loc[df.impl == "builtin", "status"]) == {"ok"}
    assert (df["dim_rows"] * df["dim_cols"] * 4 + df["dim_rows"] * 4 == df["bytes"]).all()
    first = dict(zip(df["shape"] + df["impl"], df["timestamp"]))
    assert run("rowsum", "cpu", str(out), params, progress=False) == 0
    again = pd.read_parquet(out)
    assert dict(zip(again["shape"] + again["impl"], again["timestamp"])) == first, "every cell reused"
    metrics = compute_metrics(again, pd.DataFrame(columns=["gpu", "ceiling", "value", "run_id"]))
    assert metrics.loc[metrics.impl == "builtin", "achieved_gbps"].notna().all()


def test_reference_reads_as_the_square_set():
    from rooflab.io import read_results

    df = read_results("data/reference/h200/matmul.parquet")
    assert (df["shape"] == df["problem"]).all() and set(df["preset"]) == {"square"} and set(df["family"]) == {"mkn"}
    assert (df["dim_m"] == df["size"]).all() and (df["dim_n"] == df["size"]).all()


# ------------------------------------------------------------------------------------ the paper and the figure


def _shape_metrics() -> pd.DataFrame:
    """A synthetic H200 metrics frame of the llm set: ours twice as fast as the builtin at the first rows shape in
    GPU time but slower in the Python loop (ours 3 ms, the builtin 2.5), half as fast at the first matmul shape,
    compile absent (not measured); softmax's fwd+bwd too, ours 1.5x faster in GPU time and 0.5x in the loop."""
    rows = []
    for kernel, family, pass_, t_ours, loop_ours in (("softmax", "rows", "fwd", 1.0, 3.0), ("gelu", "rows", "fwd", 2.0,
                                                                                            2.5),
                                                     ("matmul", "mkn", "fwd", 4.0, 4.0), ("softmax", "rows", "fwd+bwd",
                                                                                          2.0, 10.0)):
        dims = shapes.LLM[family][0].dims
        fwd = pass_ == "fwd"
        for impl, t, loop in (("triton", t_ours, loop_ours), ("builtin", 2.0 if fwd else 3.0, 2.5 if fwd else 7.5)):
            rows.append(
                dict(gpu="h200", kernel=kernel, impl=impl, dtype="bfloat16", pass_=pass_, preset="llm", family=family,
                     shape=shapes.label(dims), size=float("nan"), median_ms=t, loop_ms=loop, rse_median=0.001,
                     status="ok", claimable=True, bytes=1e9, flops=1e12, achieved_gbps=1e9 / t / 1e6,
                     achieved_tflops=1e12 / t / 1e9))
    return pd.DataFrame(rows).rename(columns={"pass_": "pass"})


def test_ours_over_best_and_the_section():
    from analysis.shapes import ours_over_best, section

    t = ours_over_best(_shape_metrics()).set_index(["kernel", "pass"])
    assert t.loc[("softmax", "fwd"), "ratio"] == 2.0 and t.loc[("softmax", "fwd"), "verdict"] == "faster"
    assert t.loc[("softmax", "fwd"), "loop_ratio"] == 2.5 / 3.0 and t.loc[("gelu", "fwd"), "loop_ratio"] == 1.0
    assert t.loc[("gelu", "fwd"), "verdict"] == "tie" and t.loc[("matmul", "fwd"), "verdict"] == "slower"
    assert "Llama-3" in t.loc[("softmax", "fwd"), "source"] and t.loc[("matmul", "fwd"), "best"] == "builtin"
    assert t.loc[("softmax", "fwd+bwd"), "ratio"] == 1.5 and t.loc[("softmax", "fwd+bwd"), "loop_ratio"] == 0.75
    text = section(_shape_metrics(), figdir="/nonexistent")
    assert "Over 3 cells the median is 1" in text and "faster beyond noise in 1, slower in 1 and tied in 1" in text
    assert "in 1 of the 3 cells ours wins in GPU time and loses in the loop" in text  # softmax fwd: 2.0 in GPU, 0.83 in the loop
    assert "2.00 / 0.83" in text  # both frames in the rows table's cell
    assert "tab:shapes-h200-rows" in text and "tab:shapes-h200-mkn" in text and "Llama-3" in text
    assert "tab:shapes-h200-fwdbwd" in text and "1.50 / 0.75" in text and "over 1 cell: median 1.5" in text
    assert "1 cells" not in text
    assert "No run has timed" in section(pd.DataFrame())


def test_every_loss_at_the_shape_sets_is_listed_for_the_limitations():
    """A planted loss (matmul, ours at half the builtin's speed) is listed with its shape, ratio, baseline and loop
    ratio; a tie (gelu) and wins (softmax) are not; with no loss, the sentence says so and no table follows."""
    from analysis.shapes import ours_over_best, shape_losses, shape_losses_section

    m = _shape_metrics()
    lost = shape_losses(ours_over_best(m))
    assert list(lost["kernel"]) == ["matmul"]
    row = lost.iloc[0]
    assert (row["gpu"], row["preset"], row["dtype"], row["pass"], row["lost"], row["compared"]) == \
        ("h200", "llm", "bfloat16", "fwd", 1, 1)
    assert row["worst"] == 0.5 and row["lost_to"] == "builtin" and row["loop_ratio"] == 2.5 / 4.0
    text, table = shape_losses_section(m)
    assert "in 1 of the 4 cells compared (matmul 1; Table~\\ref{tab:shape-losses})" in text  # per kernel
    assert "tab:shape-losses" in table
    assert "the worst is matmul fwd in bfloat16" in text and "ours runs at 0.5$\\times$ the builtin's speed" in text
    assert "H200 & matmul & llm & bfloat16 & fwd & 1 of 1 &" in table and "& 0.50 & builtin & 0.62" in table
    won = m[~((m["kernel"] == "matmul") & (m["impl"] == "triton"))]
    won = pd.concat([won, m[(m["kernel"] == "matmul") & (m["impl"] == "triton")].assign(median_ms=1.0)])
    text, table = shape_losses_section(won)
    assert "in none of the 4 cells compared." in text and "tab:shape-losses" not in text and table == ""
    assert "no loss there to list" in shape_losses_section(pd.DataFrame())[0]


def test_shapes_figure_is_drawn(tmp_path):
    from figures import shapes as fig

    path = tmp_path / "m.parquet"
    _shape_metrics().to_parquet(path)
    for gpu in ("h200", "b200"):  # b200: nothing measured there, a figure that says so
        fig.main([
            "--metrics",
            str(path), "--gpu", gpu, "--pdf",
            str(tmp_path / f"{gpu}.pdf"), "--png",
            str(tmp_path / f"{gpu}.png")
        ])
        assert (tmp_path / f"{gpu}.pdf").stat().st_size > 0


def test_fwd_bwd_cells_against_a_compile_row_that_skipped_the_output_store_are_counted():
    # compile rows of fwd+bwd timed before rooflab.kernel.VJP_KEEPS_OUTPUT_SINCE returned the gradients alone; a
    # cell's ratio rests on one only where it is the best baseline
    from analysis.shapes import dropped_sentence, one_dtype, ours_over_best
    from analysis.selection import compile_dropped_output
    from rooflab.kernel import VJP_KEEPS_OUTPUT_SINCE

    m = _shape_metrics()
    extra = m[m["impl"] == "builtin"].assign(impl="compile", median_ms=1.0)  # faster than the builtin: the best
    m = pd.concat([m, extra], ignore_index=True).assign(timestamp="2026-12-01T22:40:00+00:00")
    m.loc[m.index[-1], "timestamp"] = "2026-12-01 22:40:00.5+00:00"  # another ISO 8601 spelling, read alike
    flags = compile_dropped_output(m)
    assert flags.sum() == 1 and m.loc[flags, "kernel"].tolist() == ["softmax"]  # compile, fwd+bwd, before
    back = one_dtype(ours_over_best(m), "fwd+bwd")
    assert back["compile_dropped_output"].tolist() == [True]
    assert "In the one cell (softmax) the best baseline is a torch.compile row timed" in dropped_sentence(back)
    slow = m.assign(median_ms=m["median_ms"].where(m["impl"] != "compile", 100.0))  # the builtin best: no flag
    assert not one_dtype(ours_over_best(slow), "fwd+bwd")["compile_dropped_output"].any()
    later = m.assign(timestamp=VJP_KEEPS_OUTPUT_SINCE)  # at the change: stored
    assert not compile_dropped_output(later).any()
    assert "No cell here has" in dropped_sentence(one_dtype(ours_over_best(later), "fwd+bwd"))


def test_fwd_bwd_ratios_resting_on_a_joint_graph_compile_row_are_flagged_and_said():
    # compile rows of fwd+bwd timed before rooflab.kernel.COMPILE_SPLIT_SINCE compiled forward and backward as one
    # graph (which Inductor may fuse); since, the forward alone with AOTAutograd's backward after it
    from analysis.shapes import joint_sentence, one_dtype, ours_over_best
    from analysis.selection import compile_joint_graph
    from rooflab.kernel import COMPILE_SPLIT_SINCE

    m = _shape_metrics()
    extra = m[m["impl"] == "builtin"].assign(impl="compile", median_ms=1.0)  # faster than the builtin: the best
    m = pd.concat([m, extra], ignore_index=True).assign(timestamp="2026-12-03T19:20:00+00:00")
    assert compile_joint_graph(m).sum() == 1  # the one compile fwd+bwd row
    back = one_dtype(ours_over_best(m), "fwd+bwd")
    assert back["compile_joint_graph"].tolist() == [True]
    assert "In the one cell (softmax) the best baseline is a torch.compile row timed with forward" in \
        joint_sentence(back)
    later = m.assign(timestamp=COMPILE_SPLIT_SINCE)
    assert not compile_joint_graph(later).any()
    assert "No cell here has as its best baseline a torch.compile row timed with forward" in joint_sentence(
        one_dtype(ours_over_best(later), "fwd+bwd"))
