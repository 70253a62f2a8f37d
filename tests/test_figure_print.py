"""Figures fit to print (issue 22): every figure, drawn from the committed H200 reference (and the same rows as a
CPU's), prints no text under 7 pt at the size the paper includes it, and none of its text falls off its page.

The paper includes a figure at a fraction of the text width, its height capped (analysis/latex.py: print_box, the
\\includegraphics of analysis/latex.figure); the figures are saved uncropped, so the printed scale is that box over
the figure's size (figures/_common.printed_text).
"""
import importlib
import re
from pathlib import Path

import pandas as pd
import pytest

from analysis import latex
from analysis.metrics import compute_metrics
from figures import SCOPES
from figures import _common as common
from figures._common import MIN_PT, printed_text

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "data" / "reference" / "h200"


def test_the_print_geometry_is_the_papers():
    """analysis/latex.py's page and margin are those of paper/main.tex, and its figures are included at the box the
    figures are drawn for."""
    tex = (ROOT / "paper" / "main.tex").read_text()
    geometry = re.search(r"\\usepackage\[([^\]]*)\]\{geometry\}", tex).group(1)
    assert "a4paper" in geometry and f"margin={latex.MARGIN_IN * 2.54:g}cm" in geometry
    include = latex.figure("x.pdf", "c", "l", latex.KERNEL_FIGURE_WIDTH, latex.TALL_FIGURES["speedup"])
    assert f"width={latex.KERNEL_FIGURE_WIDTH:g}\\linewidth" in include
    assert f"height={latex.TALL_FIGURES['speedup']:g}\\textheight" in include


@pytest.fixture(scope="module")
def metrics(tmp_path_factory):
    """The H200 reference's metrics, and the same rows labelled as the CPU's (its figures draw other concepts)."""
    from rooflab.kernel import kernel_names

    raw = pd.concat([pd.read_parquet(p) for p in sorted(REFERENCE.glob("*.parquet")) if p.stem in kernel_names()],
                    ignore_index=True)  # the kernels' rows (not the ceilings, facts or ablations beside them)
    ceilings = pd.read_parquet(REFERENCE / "ceilings.parquet")
    both = pd.concat([raw, raw.assign(gpu="cpu")], ignore_index=True)
    path = tmp_path_factory.mktemp("print") / "metrics.parquet"
    compute_metrics(both, pd.concat([ceilings, ceilings.assign(gpu="cpu")], ignore_index=True)).to_parquet(path)
    return path


def draw(name, metrics, gpu, kernel=None, monkeypatch=None):
    """The figure as its script draws it (a 'no data' one too), held instead of saved."""
    module = importlib.import_module(f"figures.{name}")
    held = {}
    for owner in (module, common):
        monkeypatch.setattr(owner, "save", lambda fig, args: held.setdefault("fig", fig))
    argv = ["--metrics", str(metrics), "--gpu", gpu, "--pdf", "/dev/null", "--png", "/dev/null"]
    argv += ["--kernel", kernel] if kernel else []
    argv += ["--profiles", str(REFERENCE / "profiles.parquet")] if name == "fusion" else []
    module.main(argv)
    return held["fig"]


CASES = [(name, gpu, None) for name, scope in sorted(SCOPES.items()) if scope == "gpu" for gpu in ("h200", "cpu")]
CASES += [(name, gpu, kernel) for name, scope in sorted(SCOPES.items())
          if scope == "kernel" for gpu in ("h200", "cpu") for kernel in ("gelu", "softmax", "matmul")]


@pytest.mark.parametrize("name,gpu,kernel", CASES)
def test_no_text_under_7_pt_at_its_printed_width(name, gpu, kernel, metrics, monkeypatch):
    fig = draw(name, metrics, gpu, kernel, monkeypatch)
    scale, texts, outside = printed_text(fig, name)
    small = [(round(pt, 2), text) for pt, text in texts if pt < MIN_PT - 1e-6]
    assert not small, f"{name} ({gpu}) prints at {scale:.2f}x: {len(small)} texts under {MIN_PT:g} pt: {small[:5]}"
    assert outside < 0.02, f"{name} ({gpu}): text {outside:.2f} in outside its page (cut off in print)"


@pytest.mark.parametrize("gpu", ["h200", "cpu"])
def test_the_roofline_of_the_reference_labels_each_kernel_clear_and_names_each_roof_once(gpu, metrics, monkeypatch):
    """On the committed H200 rows (nine kernels; seven memory-bound ones within a decade of intensity, matmul and
    attention 1.3x apart): no kernel label over another, over a marker or off its panel, and no roof twice in the
    legend (the datasheet's bf16 and fp16 roof, 990 TFLOP/s both, is one entry)."""
    from tests.test_figures import roof_entries, roofline_label_clashes

    fig = draw("roofline", metrics, gpu, None, monkeypatch)
    assert len(fig.axes) == 2 and sum(len(ax.texts) for ax in fig.axes) == 9
    assert not roofline_label_clashes(fig)
    entries = roof_entries(fig)
    assert len({(e.split()[0], e.split(": ")[1].split(",")[0]) for e in entries}) == len(entries), entries
    if gpu == "h200":
        assert sum(e.startswith("datasheet") and "990 TFLOP/s" in e for e in entries) == 1, entries
    else:
        assert not any(e.startswith("datasheet") for e in entries), entries
