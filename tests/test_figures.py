"""Every figure script draws from a small synthetic metrics frame (and says 'no data' without one), writing a
non-empty PDF and PNG. Scripts are found the way rules/common.smk finds them: in figures.SCOPES. And what the
figures claim: each cell's spread drawn, no point above its roof unless the findings table lists it, ties white, the
CPU drawn with its own concepts only."""
import importlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.container import ErrorbarContainer
from matplotlib.lines import Line2D
from matplotlib.text import Text

from analysis.claims import findings
from analysis.metrics import compute_metrics
from figures import GPU_ONLY, SCOPES

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = {f: scope for f, scope in SCOPES.items() if scope in ("gpu", "kernel")}  # shapes: tests/test_shapes.py


def test_every_figure_script_is_registered_and_every_registered_one_exists():
    """figures.SCOPES is how the DAG finds the figures: a script missing from it would never be drawn."""
    on_disk = {p.stem for p in (ROOT / "figures").glob("*.py") if not p.stem.startswith("_")}
    assert on_disk == set(SCOPES) and GPU_ONLY <= set(SCOPES)
    for name, scope in SCOPES.items():
        assert importlib.import_module(f"figures.{name}").SCOPE == scope


def synthetic_raw() -> pd.DataFrame:
    rows = []
    for kernel in ("gelu", "softmax", "matmul"):
        passes = ["fwd", "fwd+bwd"] if kernel == "softmax" else ["fwd"]
        for pass_ in passes:
            for dtype in ("float32", "bfloat16"):
                for n in (256, 1024, 1793, 4096):
                    for impl, speed in (("naive", 0.3), ("builtin", 1.0), ("compile", 0.9), ("triton", 1.1)):
                        if kernel == "matmul":
                            flops, nbytes, unit = 2.0 * n**3, 3.0 * n * n * 2, "bf16" if dtype == "bfloat16" else "tf32"
                            t = flops / (speed * 3e14 * min(1, n / 2048)) * 1e3
                        else:
                            flops, nbytes, unit = 8.0 * n * n, 8.0 * n * n, "fp32"
                            t = 0.005 + nbytes / (speed * 3e12) * 1e3
                        rows.append({
                            "gpu": "h200",
                            "kernel": kernel,
                            "impl": impl,
                            "dtype": dtype,
                            "size": n,
                            "pass": pass_,
                            "status": "ok",
                            "error": "",
                            "median_ms": t,
                            "p20_ms": t * 0.97,
                            "p80_ms": t * 1.05,
                            "rse_median": 0.001,
                            "graph_median_ms": t * 0.7,
                            "loop_ms": t + 0.01,
                            "flops": flops,
                            "bytes": nbytes,
                            "compute_unit": unit,
                            "sm_clock_after_mhz": 1980.0,
                            "sm_clock_max_mhz": 1980.0
                        })
    rows.append({**rows[0], "impl": "cuda", "status": "mismatch", "median_ms": np.nan})
    raw = pd.DataFrame(rows)
    # Above the roof: gelu Triton fp32 at 4096 beyond noise (4.4 TB/s over a 4.2 TB/s copy), torch.compile within
    # noise, naive above it at a low clock (not claimable: never drawn); the bf16 Triton matmul over the bf16 GEMM.
    at = (raw["kernel"] == "gelu") & (raw["dtype"] == "float32") & (raw["size"] == 4096)
    for impl, rate, extra in (("triton", 4.4e12, {}), ("compile", 4.2042e12, {
            "rse_median": 0.002
    }), ("naive", 5e12, {
            "sm_clock_after_mhz": 1000.0
    })):
        i = raw.index[at & (raw["impl"] == impl)][0]
        t = raw.at[i, "bytes"] / rate * 1e3
        raw.loc[i, ["median_ms", "p20_ms", "p80_ms"]] = [t, t * 0.99, t * 1.01]
        for k, v in extra.items():
            raw.at[i, k] = v
    i = raw.index[(raw["kernel"] == "matmul") & (raw["dtype"] == "bfloat16") & (raw["size"] == 4096)
                  & (raw["impl"] == "triton")][0]
    raw.at[i, "median_ms"] = raw.at[i, "flops"] / 7e14 * 1e3
    cpu = raw[(raw["kernel"] == "gelu") & (raw["impl"] != "triton") & (raw["size"] <= 1024)]
    return pd.concat([raw, cpu.assign(gpu="cpu", graph_median_ms=np.nan)], ignore_index=True)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("figdata")
    ceilings = pd.DataFrame([{
        "gpu": g,
        "ceiling": c,
        "value": v * (1e-2 if g == "cpu" else 1)
    } for g in ("h200", "cpu") for c, v in (("copy", 4.2e12), ("gemm_fp32", 5e13), ("gemm_tf32", 3.4e14), ("gemm_bf16",
                                                                                                           6.7e14))])
    compute_metrics(synthetic_raw(), ceilings).to_parquet(d / "metrics.parquet")
    pd.DataFrame([{
        "gpu": "h200",
        "kernel": k,
        "impl": i,
        "dtype": "bfloat16",
        "size": 4096,
        "n_kernels": n,
        "kernel_names": "k"
    } for k in ("gelu", "softmax") for i, n in (("naive", 7), ("triton", 1))]).to_parquet(d / "profiles.parquet")
    return d


def test_the_figures_are_found():
    assert {"roofline", "bandwidth", "speedup", "scaling", "wave", "fusion", "projection"} <= set(SCRIPTS)


def draw(name, tmp_path, inputs, gpu, extra=()):
    argv = [
        "--metrics",
        str(inputs / "metrics.parquet"), "--gpu", gpu, "--pdf",
        str(tmp_path / f"{name}.pdf"), "--png",
        str(tmp_path / f"{name}.png"), *extra
    ]
    if SCRIPTS[name] == "kernel":
        argv += ["--kernel", "gelu"]
    importlib.import_module(f"figures.{name}").main(argv)
    for ext in ("pdf", "png"):
        path = tmp_path / f"{name}.{ext}"
        assert path.exists() and path.stat().st_size > 1000, path


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_figure_draws_from_data(name, tmp_path, inputs):
    extra = ["--profiles", str(inputs / "profiles.parquet")] if name == "fusion" else []
    draw(name, tmp_path, inputs, "h200", extra)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_figure_says_no_data(name, tmp_path, inputs):
    draw(name, tmp_path, inputs, "b200")  # nothing measured there, no profiles given


def drawn(monkeypatch, name, inputs, tmp_path, gpu="h200", kernel="gelu"):
    """Run a figure script and keep its figure (the script's save() is swapped for one that holds it)."""
    module = importlib.import_module(f"figures.{name}")
    held = {}
    monkeypatch.setattr(module, "save", lambda fig, args: held.setdefault("fig", fig), raising=False)
    monkeypatch.setattr(module, "no_data_figure",
                        lambda args, title, message, *name: held.setdefault("no_data", message), raising=False)
    argv = [
        "--metrics",
        str(inputs / "metrics.parquet"), "--gpu", gpu, "--pdf",
        str(tmp_path / "x.pdf"), "--png",
        str(tmp_path / "x.png")
    ]
    module.main(argv + (["--kernel", kernel] if SCRIPTS[name] == "kernel" else []))
    return held


def points(fig) -> np.ndarray:
    """Every (x, y) a figure plots: line vertices and scatter offsets, on every axes."""
    out = []
    for ax in fig.axes:
        for line in ax.get_lines():
            out += list(zip(*line.get_data()))
        for c in ax.collections:
            if isinstance(c, PathCollection):
                out += [tuple(p) for p in c.get_offsets()]
    return np.array([(float(x), float(y)) for x, y in out if np.isscalar(x) and np.isscalar(y)])


# (x, y as plotted, the rate, the roof the figure draws for that point) per figure
ROOFS = {
    "roofline": ("arithmetic_intensity", "achieved_tflops", "achieved_tflops", "attainable_tflops_measured"),
    "bandwidth": ("size", "achieved_gbps", "achieved_gbps", "peak_bandwidth_measured_gbps"),
    "wave": ("size", "relative_tflops", "achieved_tflops", "peak_tflops_measured")
}


@pytest.mark.parametrize("name", sorted(ROOFS))
def test_no_plotted_point_above_its_roof_unless_listed(name, monkeypatch, tmp_path, inputs):
    metrics = pd.read_parquet(inputs / "metrics.parquet")
    kernel = "matmul" if name == "wave" else "gelu"
    fig = drawn(monkeypatch, name, inputs, tmp_path, kernel=kernel)["fig"]
    xy = points(fig)
    x, y, rate, roof = ROOFS[name]
    rows = metrics[(metrics["gpu"] == "h200") & metrics[rate].notna()]
    if name == "roofline":  # a labelled handful: two cells could share a point, only the drawn one counts
        from figures.roofline import handful

        rows = handful(rows[rows["claimable"]])
    elif name == "wave":  # each rate over its implementation's best, per dtype, as the figure draws it
        from figures.wave import IMPLS, relative

        rows = rows[(rows["kernel"] == kernel) & rows["claimable"] & rows["impl"].isin(IMPLS)]
        rows = pd.concat([relative(g) for _, g in rows.groupby("dtype")])
    else:
        rows = rows[rows["kernel"] == kernel]
    listed = set(map(tuple, findings(metrics)[["kernel", "impl", "dtype", "size"]].to_numpy()))
    plotted_above = set()
    for r in rows.itertuples():
        at = np.isclose(xy[:, 0], getattr(r, x), rtol=1e-9) & np.isclose(xy[:, 1], getattr(r, y), rtol=1e-9)
        if at.any() and getattr(r, rate) > getattr(r, roof):
            key = (r.kernel, r.impl, r.dtype, r.size)
            assert key in listed, f"{name} plots {key} above its roof, and the findings table does not list it"
            plotted_above.add(key)
    assert plotted_above, "the synthetic cells above their roof should be drawn (and marked)"
    assert ("gelu", "naive", "float32", 4096) not in plotted_above  # above its roof at a low clock: not drawn
    marked = [c for ax in fig.axes for c in ax.collections if c.get_label().startswith("above its roof")]
    assert marked and sum(len(c.get_offsets()) for c in marked) == len(plotted_above)


def test_bandwidth_draws_each_cells_p20_p80_spread(monkeypatch, tmp_path, inputs):
    metrics = pd.read_parquet(inputs / "metrics.parquet")
    ax = drawn(monkeypatch, "bandwidth", inputs, tmp_path)["fig"].axes[0]
    bars = [
        seg for c in ax.containers
        if isinstance(c, ErrorbarContainer) for coll in c.lines[2] for seg in coll.get_segments()
    ]
    r = metrics[(metrics["gpu"] == "h200") & (metrics["kernel"] == "gelu") & (metrics["impl"] == "builtin")
                & (metrics["dtype"] == "bfloat16") & (metrics["size"] == 1024)].iloc[0]
    lo, hi = r["bytes"] / (r["p80_ms"] * 1e-3) / 1e9, r["bytes"] / (r["p20_ms"] * 1e-3) / 1e9
    assert any(np.allclose(seg[:, 0], 1024) and np.allclose(sorted(seg[:, 1]), [lo, hi]) for seg in bars)


def test_scaling_draws_each_cells_p20_p80_band(monkeypatch, tmp_path, inputs):
    metrics = pd.read_parquet(inputs / "metrics.parquet")
    fig = drawn(monkeypatch, "scaling", inputs, tmp_path)["fig"]
    ax = next(a for a in fig.axes if a.get_title().split(",")[0] == "gelu")  # "gelu, floor 15 µs"
    r = metrics[(metrics["gpu"] == "h200") & (metrics["kernel"] == "gelu") & (metrics["impl"] == "builtin")
                & (metrics["dtype"] == "float32") & (metrics["size"] == 1024)].iloc[0]
    bands = [p.vertices for c in ax.collections if isinstance(c, PolyCollection) for p in c.get_paths()]
    assert any(np.isclose(v[:, 1], r["p20_ms"]).any() and np.isclose(v[:, 1], r["p80_ms"]).any() for v in bands)


def test_speedup_heatmap_draws_a_tie_white_and_says_so():
    from figures.speedup import colours_and_labels

    df = pd.DataFrame({
        "kernel": ["gelu"] * 3,
        "pass": ["fwd"] * 3,
        "impl": ["triton", "compile", "naive"],
        "size": [1024] * 3,
        "speedup_vs_builtin": [1.01, 1.5, 0.5],
        "verdict_vs_builtin": ["tie", "faster", "slower"]
    })
    colour, labels = colours_and_labels(df)
    assert colour.loc["gelu | Triton", 1024] == 0 and labels.loc["gelu | Triton", 1024] == "tie"
    assert colour.loc["gelu | compile", 1024] == pytest.approx(np.log2(1.5))
    assert labels.loc["gelu | naive", 1024] == "0.50"


def test_the_roofline_draws_a_labelled_handful(monkeypatch, tmp_path, inputs):
    """Ours and the fastest of PyTorch per kernel, each kernel labelled once; the memory-bound kernels in one panel,
    the compute-bound one (matmul) in the other."""
    fig = drawn(monkeypatch, "roofline", inputs, tmp_path)["fig"]
    points = [c for ax in fig.axes for c in ax.collections if not c.get_label().startswith("above")]
    metrics = pd.read_parquet(inputs / "metrics.parquet")
    kernels = set(metrics.loc[(metrics["gpu"] == "h200") & metrics["claimable"], "kernel"])
    assert len(points) == 2 * len(kernels)  # ours and the fastest PyTorch implementation, per kernel
    labels = [t.get_text().split(" (")[0] for ax in fig.axes for t in ax.texts]
    assert sorted(labels) == sorted(kernels)  # each kernel labelled once
    assert [sorted(t.get_text() for t in ax.texts) for ax in fig.axes] == [["gelu", "softmax"], ["matmul"]]


def roof_entries(fig) -> list[str]:
    """The legend's roof entries (its lines; the markers' entries draw no line)."""
    return [
        t.get_text()
        for lg in fig.legends
        for h, t in zip(lg.legend_handles, lg.get_texts())
        if isinstance(h, Line2D) and h.get_linestyle() not in ("None", "", " ")
    ]


def test_coinciding_roofs_are_one_roof_named_by_each_unit():
    """The datasheet gives bf16 and fp16 one peak: one roof, one legend entry, not two lines that coincide; measured
    roofs that differ stay two."""
    from figures.roofline import compute_roofs
    from rooflab.gpus import SPECS

    bw = 4.3e12
    roofs = compute_roofs(SPECS["h200"], {"bf16": (7.75e14, bw), "fp16": (6.83e14, bw)}, ["bf16", "fp16"])
    datasheet = [r for r in roofs if r.kind == "datasheet"]
    assert len(datasheet) == 1 and datasheet[0].units == ("bf16", "fp16")
    assert datasheet[0].label.startswith("datasheet bf16 = fp16: 990 TFLOP/s")
    assert sorted(r.units for r in roofs if r.kind == "measured") == [("bf16", ), ("fp16", )]
    same = compute_roofs(None, {"bf16": (7e14, bw), "fp16": (7e14, bw), "fp32": (5e13, bw)}, ["fp16", "fp32", "bf16"])
    assert [r.units for r in same] == [("bf16", "fp16"), ("fp32", )]
    assert len({r.label for r in same}) == len(same)


def test_the_roofline_draws_each_roof_once(monkeypatch, tmp_path, inputs):
    """No two roofs of a panel are one line drawn twice, and no two legend entries name one roof (a kind at one
    peak): the datasheet's bf16 and fp16 roof is one entry; only the roofs of the plotted points' units are drawn."""
    fig = drawn(monkeypatch, "roofline", inputs, tmp_path)["fig"]
    for ax in fig.axes:  # the roofs: the lines named (a kernel's joining line is not)
        roofs = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
        assert roofs and len({line.get_label() for line in roofs}) == len(roofs), ax.get_title()
        assert len({tuple(np.round(np.concatenate(line.get_data()), 6)) for line in roofs}) == len(roofs)
    entries = roof_entries(fig)
    assert len(entries) == len(set(entries))
    peaks = [(e.split()[0], e.split(": ")[1].split(",")[0]) for e in entries]
    assert len(peaks) == len(set(peaks)), entries
    assert "datasheet bf16 = fp16: 990 TFLOP/s, ridge 206" in entries
    units = {e.split(":")[0].split(" ", 1)[1] for e in entries}  # matmul in bf16: no tf32 roof, no fp16 of its own
    assert units == {"bandwidth", "bf16", "bf16 = fp16"}, entries


def test_a_size_axis_is_named_by_its_shape_family():
    """Issue 50: what N is, per kind of kernel: an elementwise kernel's N x N elements, a row kernel's rows = cols =
    N, matmul's M = N = K, attention's sequence length; a panel of several kinds names each, none left out."""
    from figures._common import size_label

    rows = pd.DataFrame({"kernel": ["gelu", "softmax", "matmul", "attention"], "family": ["rows", "rows", "mkn", None]})
    assert size_label(rows[rows["kernel"] == "attention"]).startswith("sequence length N (batch 16384 / N")
    assert size_label(rows[rows["kernel"] == "matmul"]) == "N (M = N = K)"
    assert size_label(rows[rows["kernel"] == "gelu"]) == "N (N x N elements)"
    assert size_label(rows[rows["kernel"] == "softmax"]) == "N (rows = cols = N)"
    assert size_label(rows) == ("N: elementwise N x N, row kernels rows = cols = N, matmul M = N = K, attention "
                                "sequence length N")
    assert size_label(rows[rows["kernel"] != "attention"]) == \
        "N: elementwise N x N, row kernels rows = cols = N, matmul M = N = K"  # the CPU's speedup panel
    wrapped = size_label(rows, 2.0)  # a panel's width: one kind's words never split over two lines
    assert wrapped.replace("\n", " ") == size_label(rows) and "\n" in wrapped
    for kind in ("elementwise N x N", "row kernels rows = cols = N", "matmul M = N = K", "attention sequence length N"):
        assert any(kind in line for line in wrapped.split("\n")), (kind, wrapped)


def test_the_elementwise_kernels_are_those_that_say_so():
    """figures._common.ELEMENTWISE (the kernels whose N is 'N x N elements') is the set of rows-family kernels whose
    description says elementwise: a new elementwise kernel is not labelled a row kernel."""
    import re

    from figures._common import ELEMENTWISE

    found = set()
    for init in (ROOT / "kernels").glob("*/__init__.py"):
        text = init.read_text()
        description = re.search(r'description="([^"]*)"', text)
        if description and "family=" not in text.split("KERNEL = Kernel(")[-1]:  # the rows family (the default)
            found |= {init.parent.name} if "elementwise" in description.group(1) else set()
    assert found == ELEMENTWISE


def test_the_cpu_figures_draw_only_what_applies(monkeypatch, tmp_path, inputs):
    fig = drawn(monkeypatch, "scaling", inputs, tmp_path, gpu="cpu")["fig"]
    legend = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert any("host time" in t for t in legend) and any("Python loop" in t for t in legend)
    assert not any("CUDA graph" in t or "launch floor" in t or "GPU time" in t for t in legend)
    assert not any(line.get_linestyle() == "-." for ax in fig.axes for line in ax.get_lines())  # no floor line
    roofline = drawn(monkeypatch, "roofline", inputs, tmp_path, gpu="cpu")["fig"]
    labels = [t.get_text() for lg in roofline.legends for t in lg.get_texts()]
    assert any(t.startswith("measured bandwidth") for t in labels)
    assert not any("tf32" in t or "datasheet" in t for t in labels)  # measured roofs of the units it used only
    for name in ("wave", "projection"):  # meaningless on a CPU: a figure that says so, left out of the paper
        assert "not drawn for the CPU" in drawn(monkeypatch, name, inputs, tmp_path, gpu="cpu")["no_data"]


def text_box(t, renderer):
    """A text's own box as drawn (an annotation's without its leader line)."""
    return Text.get_window_extent(t, renderer)


def overlaps(fig, texts) -> list[tuple[str, str]]:
    """The pairs of `texts` whose boxes, as the renderer draws them, overlap."""
    renderer = fig.canvas.get_renderer()
    boxes = [(t.get_text(), text_box(t, renderer)) for t in texts if t.get_visible() and t.get_text()]
    return [(a, b) for i, (a, p) in enumerate(boxes) for b, q in boxes[i + 1:] if p.overlaps(q)]


def test_projection_draws_each_gpu_in_its_own_colour_and_marker(monkeypatch, tmp_path, inputs):
    """One series per datasheet GPU, told apart by colour and by marker, named in the legend; x is the speed-up over
    the time measured here, so this GPU's own model sits at measured / model (its distance from 1: the model's
    error); the x tick labels do not collide."""
    from matplotlib.colors import to_hex

    from figures.projection import projection_table
    from rooflab.gpus import SPECS

    fig = drawn(monkeypatch, "projection", inputs, tmp_path)["fig"]
    ax = fig.axes[0]
    series = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(series) == len(SPECS)
    assert all(c.get_label().startswith(s.name) for c, s in zip(series, SPECS.values()))
    colours = {to_hex(c.get_facecolor()[0]) for c in series}
    markers = {tuple(map(tuple, c.get_paths()[0].vertices.round(6))) for c in series}
    assert len(colours) == len(markers) == len(SPECS), "every GPU its own colour and its own marker"
    legend = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert all(any(t.startswith(s.name) for t in legend) for s in SPECS.values())
    assert "calibrated on h200" in fig.axes[-1].get_xlabel()
    metrics = pd.read_parquet(inputs / "metrics.parquet")
    ok = metrics[(metrics["gpu"] == "h200") & metrics["claimable"] & (metrics["pass"] == "fwd")]
    table, calibrated = projection_table(ok, "h200")
    assert calibrated
    own = next(c for c in series if c.get_label().startswith(SPECS["h200"].name))
    first = table[table["dtype"] == fig.axes[0].get_title(loc="left").split(",")[0]].sort_values("kernel")
    assert np.allclose(own.get_offsets()[:, 0], first["measured_best_ms"] / first["model_h200_ms"])
    fig.canvas.draw()
    for a in fig.axes:
        assert not overlaps(fig, a.get_xticklabels()), a.get_title()


def test_the_wave_model_is_drawn_on_the_datas_scale_with_its_gap_named(monkeypatch, tmp_path, inputs):
    """Data and model share one scale (each over its own best: 1 at full waves), so the model sits beside the data;
    the odd size's gap between them is labelled; the size axis has one line of ticks, none colliding."""
    fig = drawn(monkeypatch, "wave", inputs, tmp_path, kernel="matmul")["fig"]
    panels = [a for a in fig.axes if a.axison]
    assert panels
    fig.canvas.draw()
    for ax in panels:
        lines = {line.get_label(): line for line in ax.get_lines()}
        model = next(line for label, line in lines.items() if label.startswith("wave model"))
        assert np.nanmax(model.get_ydata()) == pytest.approx(1.0)
        drawn_impls = [lines[i] for i in ("PyTorch builtin", "Triton (ours)") if i in lines]
        assert drawn_impls and all(np.nanmax(line.get_ydata()) == pytest.approx(1.0) for line in drawn_impls)
        assert any(
            "gap at N = 1793" in t.get_text() and "wave model does not explain" in t.get_text().replace("\n", " ")
            for t in ax.texts)
        ticks = ax.get_xticklabels()
        assert ticks and all("\n" not in t.get_text() for t in ticks)
        assert not overlaps(fig, ticks)


def roofline_label_clashes(fig) -> list[str]:
    """What is wrong with the roofline's kernel labels, as drawn: two overlapping, one over a marker or off its
    panel (none, when all is well)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = [t for ax in fig.axes for t in ax.texts]
    wrong = [f"{a} over {b}" for a, b in overlaps(fig, texts)]
    for ax in fig.axes:
        centres = [ax.transData.transform(c.get_offsets()) for c in ax.collections]
        centres = np.concatenate(centres) if centres else np.zeros((0, 2))
        frame = ax.get_window_extent(renderer)
        for t in ax.texts:
            box = text_box(t, renderer)
            if not (frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1):
                wrong.append(f"{t.get_text()} off its panel")
            if any(box.contains(x, y) for x, y in centres):
                wrong.append(f"{t.get_text()} over a marker")
    return wrong


def test_the_roofline_labels_overlap_nothing(monkeypatch, tmp_path, inputs):
    """The kernels' labels overlap no other label and no marker, though gelu and softmax share their arithmetic
    intensity and rate (as the memory-bound kernels sit close together on the bandwidth roof)."""
    fig = drawn(monkeypatch, "roofline", inputs, tmp_path)["fig"]
    assert sum(len(ax.texts) for ax in fig.axes) == 3
    assert not roofline_label_clashes(fig)


def test_one_process_draws_the_figures_of_a_device_or_a_kernel(tmp_path, inputs):
    """python -m figures (the DAG's figure jobs): several figures from one read of the metrics, written where the
    rules expect them, <outdir>/<gpu>/<fig>.pdf and <outdir>/<gpu>/<fig>/<kernel>.pdf, with their PNGs."""
    from figures.__main__ import main

    metrics = str(inputs / "metrics.parquet")
    main([
        "--gpu", "h200", "--metrics", metrics, "--profiles",
        str(inputs / "profiles.parquet"), "--outdir",
        str(tmp_path), "fusion", "roofline"
    ])
    main(["--gpu", "h200", "--kernel", "gelu", "--metrics", metrics, "--outdir", str(tmp_path), "bandwidth"])
    for stem in ("h200/fusion", "h200/roofline", "h200/bandwidth/gelu"):
        for ext in ("pdf", "png"):
            assert (tmp_path / f"{stem}.{ext}").stat().st_size > 1000, stem
    assert {p.name
            for p in (tmp_path / "h200").iterdir()
            } == {"fusion.pdf", "fusion.png", "roofline.pdf", "roofline.png", "bandwidth"}
    with pytest.raises(SystemExit):  # a kernel figure needs its kernel
        main(["--gpu", "h200", "--metrics", metrics, "--outdir", str(tmp_path), "bandwidth"])


def test_a_size_axis_labels_the_powers_of_two_and_leaves_a_crowded_size_a_short_tick():
    """Issue 50 ('1793 and 2048 overlap'): where 1793's label has no room beside 2048's, 1793 keeps a short tick
    without a label (returned, for the figure to name); every power of two keeps its label, on one line; with room
    enough, every size is labelled."""
    import matplotlib.pyplot as plt

    from figures._common import setup, size_axis, unlabelled_note

    setup()
    sizes = [256, 512, 1024, 1793, 2048, 4096, 8192]
    fig, ax = plt.subplots(figsize=(2.0, 1.5))
    assert size_axis(ax, sizes, 1.5) == [1793]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["256", "512", "1024", "2048", "4096", "8192"]
    assert list(ax.get_xticks(minor=True)) == [1793]
    assert unlabelled_note([1793]) == "short x tick: N = 1793" and unlabelled_note([]) == ""
    fig.canvas.draw()
    assert not overlaps(fig, ax.get_xticklabels())
    wide, ax = plt.subplots(figsize=(12.0, 1.5))
    assert size_axis(ax, sizes, 11.0) == []
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(n) for n in sizes]
    plt.close(fig)
    plt.close(wide)


def test_the_wave_figure_keeps_a_tick_at_its_odd_size(monkeypatch, tmp_path, inputs):
    """The gap the wave model does not explain is at N = 1793: its tick is on the axis (labelled where it has room,
    else a short tick that the gap's label names)."""
    fig = drawn(monkeypatch, "wave", inputs, tmp_path, kernel="matmul")["fig"]
    for ax in [a for a in fig.axes if a.axison]:
        ticks = set(ax.get_xticks()) | set(ax.get_xticks(minor=True))
        assert 1793 in ticks
        assert 1793 in ax.get_xticks() or any("N = 1793" in t.get_text() for t in ax.texts)
