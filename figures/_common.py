"""What every figure script shares: its command line, the data it may claim from, and saving PDF + PNG.

Each figure script draws one figure with one message:
    python -m figures.<name> --metrics M.parquet [M2.parquet ...] --gpu h200 [--kernel gelu] --pdf X.pdf --png X.png
The DAG draws all the figures of one device, or of one (device, kernel), in one process: python -m figures
(figures/__main__.py), from the per-kernel metrics results/metrics/<gpu>/<kernel>.parquet.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from analysis.claims import CPU_FRAME_LABEL, FRAME_LABEL, over_roof  # noqa: E402
from analysis.latex import print_box  # noqa: E402
from figures import SCOPES  # noqa: E402
from rooflab.gpus import CPU_KEY  # noqa: E402
from rooflab.io import read_table  # noqa: E402
from rooflab.kernel import IMPL_LABEL, IMPLS  # noqa: E402

IMPL_ORDER = list(IMPLS)
# One colour per implementation, from the Okabe-Ito palette (distinct under the common colour-vision deficiencies),
# and a marker each as well, so that a grey print still tells them apart.
PALETTE = dict(zip(IMPL_ORDER, ["#E69F00", "#0072B2", "#009E73", "#56B4E9", "#D55E00", "#CC79A7"]))
MARKER = dict(zip(IMPL_ORDER, ["o", "s", "D", "P", "^", "v"]))
IMPL_SHORT = {
    "naive": "naive",
    "builtin": "builtin",
    "compile": "compile",
    "compile-max": "compile-max",
    "triton": "Triton",
    "cuda": "CUDA"
}
# Printed sizes: nothing under 7 pt at the width the paper prints a figure (tests/test_figure_print.py).
MIN_PT = 7.0
STYLE = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 7.5,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.title_fontsize": 7,
    "figure.titlesize": 8.5,
    "axes.grid": True,
    "grid.color": "0.88",
    "grid.linewidth": 0.5,
    "axes.edgecolor": "0.3",
    "axes.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "xtick.major.size": 2.5,
    "ytick.major.size": 2.5,
    "xtick.minor.size": 1.5,
    "ytick.minor.size": 1.5,
    "legend.frameon": False,
    "lines.linewidth": 1.2,
    "lines.markersize": 3.5,
    "figure.constrained_layout.h_pad": 0.03,
    "figure.constrained_layout.w_pad": 0.03,
    "pdf.compression": 6
}
PNG_DPI = 100  # the report's copy: a screen's resolution at the printed size (the paper takes the PDF)
# A point above its own run's roof: drawn, but never silently (it is listed in the paper's findings table)
FINDING_LABEL = "above its roof at its cell's clock"
FINDING_STYLE = {"marker": "*", "s": 60, "facecolors": "none", "edgecolors": "black", "linewidths": 0.7, "zorder": 5}


def parse_args(scope: str, argv=None, profiles: bool = False) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--metrics", required=True, nargs="+", help="metrics parquet files, read as one table")
    ap.add_argument("--gpu", required=True)
    if scope == "kernel":
        ap.add_argument("--kernel", required=True)
    if profiles:
        ap.add_argument("--profiles", nargs="*", default=[], help="profiles.parquet files (kernel launch counts)")
    ap.add_argument("--pdf", required=True)
    ap.add_argument("--png", required=True)
    return ap.parse_args(argv)


_READ: dict[tuple[str, ...], pd.DataFrame] = {}


def read_metrics(paths) -> pd.DataFrame:
    """The metrics files as one table (a path or a list), read once per process: the figures drawn together share
    it (each gets a copy)."""
    key = tuple([paths] if isinstance(paths, (str, Path)) else paths)
    if key not in _READ:
        frames = [read_table(p) for p in key]
        _READ[key] = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    return _READ[key].copy()


def gpu_name(gpu: str) -> str:
    """The datasheet name of a GPU key ('NVIDIA H200 SXM'), or the key itself (cpu, an unknown GPU)."""
    from rooflab.gpus import spec_for

    spec = spec_for(gpu)
    return spec.name if spec else ("CPU" if gpu == "cpu" else gpu)


def claimable(metrics: pd.DataFrame, gpu: str, kernel: str | None = None) -> pd.DataFrame:
    """Rows a figure may draw: measured on this gpu, correct, timed and not a silent compile fallback."""
    ok = metrics["claimable"] if "claimable" in metrics else metrics["status"] == "ok"
    df = metrics[(metrics["gpu"] == gpu) & ok]
    if kernel is not None:
        df = df[df["kernel"] == kernel]
    return df.copy()


def is_cpu(gpu: str) -> bool:
    """The CPU gets only the concepts that apply to it: host time, no CUDA graph, no launch floor, no datasheet."""
    return gpu == CPU_KEY


FAMILY_OF = {"matmul": "mkn", "attention": "bhsd"}  # a kernel's shape family where the rows do not record it
# The kernels of the rows family that map each element of their N x N input (kernels/<k>: "elementwise over N x N");
# the rest reduce or normalise each of its rows (tests/test_figures.py checks this against the kernels' descriptions).
ELEMENTWISE = {"gelu", "saxpy", "vecadd"}
KINDS = ("elementwise", "rows", "mkn", "bhsd")  # what N means: the order a label lists them


def size_kinds(df: pd.DataFrame) -> list[str]:
    """What N is for the rows, in KINDS order: the rows family split into elementwise kernels and row kernels."""
    family = df["kernel"].map(lambda k: FAMILY_OF.get(k, "rows"))
    if "family" in df:
        family = df["family"].where(df["family"].notna(), family)
    kind = family.where((family != "rows") | ~df["kernel"].isin(ELEMENTWISE), "elementwise")
    return [k for k in KINDS if k in set(kind)]


def size_label(df: pd.DataFrame, width_in: float | None = None) -> str:
    """The x axis of a size sweep, named per kind of N of its rows (size_kinds; rooflab/shapes.py for attention's
    batch and heads); rows of several kinds list each. Wrapped to `width_in` inches (a panel's) at the label's size."""
    import textwrap

    from rooflab.shapes import ATTENTION_HEAD_DIM as D, ATTENTION_TOKENS as T, ATTENTION_WIDTH as W

    alone = [
        "N (N x N elements)", "N (rows = cols = N)", "N (M = N = K)",
        f"sequence length N (batch {T} / N, {W // D} heads of {D})"
    ]
    part = ["elementwise N x N", "row kernels rows = cols = N", "matmul M = N = K", "attention sequence length N"]
    found = [KINDS.index(k) for k in size_kinds(df)]
    nbsp = "\u00a0"  # a kind's words stay on one line
    label = alone[found[0]] if len(found) == 1 else "N: " + ", ".join(part[k].replace(" ", nbsp) for k in found) \
        if found else "N"
    chars = int(width_in * 72 / (0.55 * STYLE["axes.labelsize"])) if width_in else len(label)  # per line
    return "\n".join(textwrap.wrap(label, chars, break_on_hyphens=False)).replace(nbsp, " ")


def time_frame(gpu: str) -> str:
    """The frame of a row's median: GPU time on a GPU, host time on the CPU (analysis/claims.py)."""
    return CPU_FRAME_LABEL["gpu"] if is_cpu(gpu) else FRAME_LABEL["gpu"]


def mark_findings(ax, df: pd.DataFrame, x: str, y: str) -> None:
    """Ring every point of `df` above its roof (analysis/claims.over_roof), labelled for the legend."""
    over = df[over_roof(df)] if "roofline_fraction_measured" in df else df.iloc[:0]
    if len(over):
        ax.scatter(over[x], over[y], label=FINDING_LABEL, **FINDING_STYLE)


def spread(df: pd.DataFrame, nbytes: bool = False) -> tuple[pd.Series, pd.Series] | None:
    """Each cell's p20-p80 spread as (low, high): times in ms, or as achieved GB/s (the p80 time gives the low
    rate); None where the rows carry no quantiles."""
    if not {"p20_ms", "p80_ms"} <= set(df.columns) or df[["p20_ms", "p80_ms"]].isna().all().all():
        return None
    if not nbytes:
        return df["p20_ms"], df["p80_ms"]
    return df["bytes"] / (df["p80_ms"] * 1e-3) / 1e9, df["bytes"] / (df["p20_ms"] * 1e-3) / 1e9


def impls_present(df: pd.DataFrame) -> list[str]:
    return [i for i in IMPL_ORDER if i in set(df["impl"])]


def no_data(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, fontsize=8, color="0.4", wrap=True)
    ax.set_axis_off()


def new_figure(name: str, height: float | None = None, **subplots):
    """plt.subplots at the size the paper prints figure `name` (analysis/latex.py: print_box): its full width and
    `height` inches (capped at the paper's height for it), laid out by constrained layout, which keeps every label
    inside the figure, so that the saved page is the printed one."""
    width, most = print_size(name)
    return plt.subplots(figsize=(width, min(height or most, most)), layout="constrained", **subplots)


def print_size(name: str) -> tuple[float, float]:
    """(width, largest height) in inches at which the paper prints figure `name`."""
    return print_box(name, kernel_scope=SCOPES[name] == "kernel")


def no_data_figure(args, title: str, message: str, name: str | None = None) -> None:
    """A whole figure that says, in words, why there is nothing to draw (the DAG still gets its PDF and PNG)."""
    fig, ax = plt.subplots(figsize=(print_size(name)[0] if name else 6.0, 1.6), layout="constrained")
    no_data(ax, message)
    fig.suptitle(title)
    save(fig, args)


def save(fig, args) -> None:
    """The PDF (the paper's, vector, its page the printed size) and the PNG (the report's, PNG_DPI): the whole
    figure as laid out, no cropping, so that what the paper scales is the page drawn here."""
    for path in (args.pdf, args.png):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.pdf)
    plt.close(fig)
    png_from_pdf(args.pdf, args.png)


def png_from_pdf(pdf: str, png: str, dpi: int = PNG_DPI) -> None:
    """The PDF's page rasterised by PDFium: the same page, 10-30x faster than drawing the figure again with Agg (about
    a third of each figure's time)."""
    import pypdfium2

    doc = pypdfium2.PdfDocument(pdf)
    try:
        doc[0].render(scale=dpi / 72).to_pil().save(png)
    finally:
        doc.close()


def setup() -> None:
    plt.rcParams.update(STYLE)


def size_axis(ax, sizes, width_in: float | None = None, gap_pt: float = 1.44) -> list[int]:
    """Log2 x axis with a tick at every measured size, each labelled as a plain number where its label has room:
    powers of two first, then the other sizes (1793, 300) where theirs would not come within `gap_pt` of a label
    already placed (estimated from the axes' width in inches, width_in or its share of the figure, its x limits, and
    the labels' width at their font size). A size left without its label keeps a short tick; returns those sizes,
    for the figure to name."""
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullFormatter

    ax.set_xscale("log", base=2)
    ticks = sorted({int(n) for n in sizes})
    if width_in is None:
        width_in = ax.get_position().width * ax.figure.get_size_inches()[0] * 0.85
    lo, hi = ax.get_xlim()
    span = np.log2(hi / lo) if 0 < lo < hi else (np.log2(ticks[-1] / ticks[0]) * 1.1 if len(ticks) > 1 else 1.0)
    per_octave = width_in / span  # inches per octave
    char_in = 0.62 * plt.rcParams["xtick.labelsize"] / 72  # a digit's width
    placed: list[tuple[float, float]] = []  # the labelled ticks' extents, inches from the first tick
    labelled = []
    for t in sorted(ticks, key=lambda t: (t & (t - 1) != 0, t)):  # powers of two first
        x, half = np.log2(t / ticks[0]) * per_octave, (len(str(t)) * char_in + gap_pt / 72) / 2
        if all(x + half <= a or b <= x - half for a, b in placed):
            placed.append((x - half, x + half))
            labelled.append(t)
    labelled.sort()
    ax.xaxis.set_major_locator(FixedLocator(labelled))
    ax.xaxis.set_major_formatter(FixedFormatter([str(t) for t in labelled]))
    ax.xaxis.set_minor_locator(FixedLocator([t for t in ticks if t not in labelled]))
    ax.xaxis.set_minor_formatter(NullFormatter())
    return [t for t in ticks if t not in labelled]


def unlabelled_note(sizes) -> str:
    """A figure's words for the sizes size_axis left without a label ('' where none): its short x ticks."""
    sizes = sorted({int(s) for s in sizes})
    return f"short x tick{'s' if len(sizes) > 1 else ''}: N = {', '.join(map(str, sizes))}" if sizes else ""


def plain_log_ticks(axis, values) -> None:
    """Log ticks labelled as plain numbers (0.05, 2, 500): 1-2-5 per decade over narrow ranges, 1 per decade else."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

    v = np.asarray([x for x in values if np.isfinite(x) and x > 0], dtype=float)
    decades = np.log10(v.max() / v.min()) if len(v) else 3
    axis.set_major_locator(LogLocator(subs=(1.0, ) if decades > 2.5 else (1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    axis.set_minor_locator(NullLocator())  # unlabelled minor ticks: each costs a tick's artists at every draw
    axis.set_minor_formatter(NullFormatter())


def contrast(a, b) -> float:
    """WCAG 2 contrast ratio of two sRGB colours: 1 (none) to 21 (black on white); small text needs 4.5 at least."""
    rgb = (np.asarray(to_rgb(a)), np.asarray(to_rgb(b)))
    lum = [np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055)**2.4) @ [0.2126, 0.7152, 0.0722] for c in rgb]
    return (max(lum) + 0.05) / (min(lum) + 0.05)


def annotated_grid(ax, values: pd.DataFrame, labels: pd.DataFrame, cmap, norm, fontsize: float = MIN_PT):
    """A heatmap of `values` (rows top to bottom, columns left to right; NaN blank) with each cell's label written
    in it, black or white, whichever contrasts more with the cell's colour (contrast); tick labels from the index
    and columns. Returns the mesh (for a colour bar)."""
    data = values.to_numpy(dtype=float)
    mesh = ax.pcolormesh(np.ma.masked_invalid(data), cmap=cmap, norm=norm, edgecolors="white", linewidth=0.6)
    rgba = mesh.cmap(mesh.norm(np.nan_to_num(data)))
    for (i, j), text in np.ndenumerate(labels.to_numpy(dtype=object)):
        if isinstance(text, str) and text:
            colour = max(("black", "white"), key=lambda c: contrast(c, rgba[i, j]))  # 4.6:1 on any colour
            ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=fontsize, in_layout=False, color=colour)
    ax.set_xlim(0, data.shape[1])
    ax.set_ylim(data.shape[0], 0)
    ax.set_xticks(np.arange(data.shape[1]) + 0.5, [str(c) for c in values.columns])
    ax.set_yticks(np.arange(data.shape[0]) + 0.5, [str(r) for r in values.index])
    ax.tick_params(length=0)
    ax.grid(False)
    for side in ax.spines.values():
        side.set_visible(False)
    return mesh


def printed_text(fig, name: str) -> tuple[float, list[tuple[float, str]], float]:
    """How figure `name` prints in the paper: (scale, [(printed pt, text)] smallest first, inches of text outside the
    page). save() writes the whole figure, so the paper scales its page, fig's size, into print_size(name)."""
    fig.canvas.draw()
    width, height = print_size(name)
    w, h = fig.get_size_inches()
    scale = min(width / w, height / h)
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    drawn = fig.get_tightbbox(fig.canvas.get_renderer())  # inches: everything drawn, text included
    out = max(0.0, -drawn.x0, -drawn.y0, drawn.x1 - w, drawn.y1 - h)
    return scale, sorted((t.get_fontsize() * scale, t.get_text()) for t in texts), out


def place_labels(ax, anchors, texts, offset_pt: float = 5.0, pad_pt: float = 1.0, reach_pt: float = 60.0,
                 **text_kw) -> list:
    """Label each point of `anchors` ([(x, y)] in data coordinates) with its text, no label over another, over a
    marker or across a line of the axes, all inside the axes. Each label takes, in turn, the free place nearest its
    point: right of it (first choice), left, below or above, moved along by up to `reach_pt`; a label moved off its
    point's side is joined to it by a thin leader line. Worked out on the laid-out figure (the axes as printed),
    kept as offsets in points. Returns the annotations."""
    fig = ax.figure
    fig.canvas.draw()  # constrained layout settles the axes: the positions below are the printed ones
    renderer = fig.canvas.get_renderer()
    px = fig.dpi / 72  # display pixels per point
    xy = ax.transData.transform(np.asarray(anchors, dtype=float).reshape(-1, 2))
    frame = ax.get_window_extent(renderer)
    r, pad = 3.5 * px, pad_pt * px  # a marker's half-width with its edge; the room kept around a label
    obstacles = [
        ax.transData.transform(np.asarray(c.get_offsets(), dtype=float))
        for c in ax.collections
        if isinstance(c, PathCollection) and len(c.get_offsets())
    ]
    for line in ax.get_lines():  # every line as points a pixel apart (a marker's centre is one of its vertices)
        v = line.get_transform().transform(np.column_stack(line.get_data()).astype(float))
        v = v[np.isfinite(v).all(axis=1)]
        for a, b in zip(v[:-1], v[1:]):
            n = int(min(np.hypot(*(b - a)), 4 * frame.width)) + 2
            obstacles.append(a + np.linspace(0, 1, n)[:, None] * (b - a))
        if line.get_marker() not in ("", "None", None):
            obstacles.append(v)
    points = np.concatenate(obstacles) if obstacles else np.zeros((0, 2))
    placed: list[tuple[float, float, float, float]] = []
    out = []
    for (x, y), text in zip(xy, texts):
        probe = ax.text(0, 0, text, **text_kw)  # the label's size, measured with a throwaway text
        box = probe.get_window_extent(renderer)
        w, h = box.width, box.height
        probe.remove()
        off = offset_pt * px
        shifts = np.arange(0, reach_pt * px, px)
        candidates = []  # (cost in pixels, left edge, vertical centre, leader)
        for penalty, side in ((0, "right"), (3, "left"), (4, "below"), (5, "above")):
            for d in shifts:
                for sign in ((1, -1) if d else (1, )):
                    if side in ("right", "left"):
                        lx, cy = (x + off if side == "right" else x - off - w), y + sign * d
                    else:
                        lx, cy = x - w / 2 + sign * d, y + (-1 if side == "below" else 1) * (off + h / 2)
                    candidates.append((d + penalty * px, lx, cy, d > 2 * px or side in ("below", "above")))
        candidates.sort(key=lambda c: c[0])
        choice = None
        for _, lx, cy, leader in candidates:
            x0, y0, x1, y1 = lx - pad, cy - h / 2 - pad, lx + w + pad, cy + h / 2 + pad
            if x0 < frame.x0 or x1 > frame.x1 or y0 < frame.y0 or y1 > frame.y1:
                continue
            if any(x0 < b[2] and b[0] < x1 and y0 < b[3] and b[1] < y1 for b in placed):
                continue
            hit = (points[:, 0] > x0 - r) & (points[:, 0] < x1 + r) & (points[:, 1] > y0 - r) & (points[:, 1] < y1 + r)
            if not hit.any():
                choice = (lx, cy, leader)
                break
        if choice is None:  # nowhere free within reach: beside its point, as a plain label would be
            choice = (x + off, y, False)
        lx, cy, leader = choice
        placed.append((lx, cy - h / 2, lx + w, cy + h / 2))
        line = {"arrowprops": {"arrowstyle": "-", "color": "0.5", "lw": 0.5, "shrinkA": 0, "shrinkB": 3}} \
            if leader else {}
        out.append(
            ax.annotate(text,
                        ax.transData.inverted().transform((x, y)), xytext=((lx - x) / px, (cy - y) / px),
                        textcoords="offset points", ha="left", va="center", in_layout=False, **line, **text_kw))
    return out
