"""Speedup over the PyTorch builtin on one GPU, in GPU time (host time on the CPU): one heatmap panel per kernel
(and pass, where a kernel has several), rows dtype | implementation (dtypes as their compute units: fp32, tf32,
bf16, fp16), columns size, every cell annotated. Message: where each implementation beats the builtin (blue) and
where it loses (red), beyond noise.

speedup = builtin median time / this median time, within the same (kernel, dtype, size, pass), correct cells only
(analysis/metrics.py: speedup_vs_builtin). Colour is log2(speedup), so 2x and 0.5x are equally far from white; a
cell whose verdict (verdict_vs_builtin) is a tie is white and reads "tie", whatever its ratio: within noise it is
neither faster nor slower; one whose verdict is "not comparable" (its interval wider than the floor its length
allows, rooflab/verdicts.py) is white too and reads "n/c". Each cell's text is black or white, whichever contrasts
more with the cell's colour (figures/_common.annotated_grid: 4.5:1 at least).

Legible in print (tests/test_figure_print.py): a panel per dtype, two side by side sharing their rows, stacked more
rows than the page holds at 7 pt (71 of seven sizes on the H200); a panel per kernel has no blank row, so the panels
flow into two columns (contiguous runs, balanced by height) and every row is ROW_PT high (MIN_ROW_PT where the page
is short of room), a line of 7 pt text. The page is laid out by hand, in points: each panel's title, from its row
labels' left edge, says what N is for its kernel (figures/_common.size_kinds); the sizes, shared by the panels of a
column, are written under its last panel; the colour bar is under both columns. The figure takes a float page of
its own (analysis/latex.py: TALL_FIGURES).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import Normalize

from analysis.columns import texts
from figures import SCOPES
from figures._common import (IMPL_ORDER, IMPL_SHORT, MIN_PT, annotated_grid, claimable, gpu_name, no_data_figure,
                             parse_args, print_size, read_metrics, save, setup, size_kinds, time_frame)
from rooflab.kernel import DTYPES

SCOPE = SCOPES["speedup"]
LIMIT = 3.0  # colour saturates at 2^-3 = 0.125x and 2^3 = 8x
ROW_PT = 8.5  # one row of cells: a line of 7 pt text (its box 8 pt high), as a 7 pt table sets its lines
MIN_ROW_PT = 8.2  # rows are squeezed to this much where the page is short of room, never lower (tests)
# The page, in points, top to bottom: margin, the figure's title, the columns of panels (each panel its title, a
# line of 8 pt, and its rows), the sizes under the columns, the colour bar (bar, its ticks, its label), margin.
MARGIN_PT, SUPTITLE_PT, TITLE_PAD_PT, PANEL_GAP_PT = 3.0, 13.0, 2.0, 3.0
SIZES_PT, CBAR_GAP_PT, CBAR_PT, CBAR_TEXT_PT = 12.0, 12.0, 7.0, 32.0
COLUMN_GAP_PT = 14.0  # between a column's cells and the next column's row labels
N_IS = {"elementwise": "N x N elements", "rows": "rows = cols = N", "mkn": "M = N = K", "bhsd": "sequence length N"}
DTYPE_SHORT = {"float32": "fp32", "tf32": "tf32", "bfloat16": "bf16", "float16": "fp16"}  # as the compute units


def heat_table(df: pd.DataFrame, values: str = "speedup_vs_builtin") -> pd.DataFrame:
    """Rows 'kernel | impl' (pass added where a kernel has several), columns size; values speedup_vs_builtin (or
    another column, e.g. verdict_vs_builtin)."""
    df = df[df["impl"] != "builtin"].copy()
    multi_pass = df.groupby("kernel")["pass"].transform("nunique") > 1
    df["row"] = df["kernel"] + np.where(multi_pass, " " + df["pass"], "") + " | " + df["impl"].map(IMPL_SHORT)
    df["impl_rank"] = df["impl"].map({k: i for i, k in enumerate(IMPL_ORDER)})
    order = df.sort_values(["kernel", "pass", "impl_rank"])["row"].drop_duplicates()
    table = df.pivot_table(index="row", columns="size", values=values, aggfunc="first")
    return table.reindex(order)


def colours_and_labels(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(log2 colour values, annotations) of one panel: a tie is white (0) and reads 'tie'."""
    speed = heat_table(df)
    verdicts = heat_table(df.assign(verdict_vs_builtin=texts(df, "verdict_vs_builtin")),
                          "verdict_vs_builtin").reindex(index=speed.index, columns=speed.columns) \
        if "verdict_vs_builtin" in df else pd.DataFrame("", index=speed.index, columns=speed.columns)
    tie = verdicts == "tie"
    unknown = verdicts == "not comparable"  # its interval could hide a change of the size it would show
    colour = np.log2(speed).mask(tie | unknown, 0.0)
    labels = speed.map(cell_label).mask(tie, "tie").mask(unknown, "n/c")
    return colour, labels


def cell_label(v: float) -> str:
    """A speedup in at most four characters, so that it fits its cell at 7 pt: 0.09, 0.85, 1.2, 12."""
    if not np.isfinite(v):
        return ""
    return f"{v:.2f}" if v < 1 else f"{v:.2g}" if v < 10 else f"{v:.0f}"


def kernel_panels(df: pd.DataFrame) -> list[tuple[str, pd.DataFrame, pd.DataFrame]]:
    """(title, colours, labels) per kernel (and pass, where it has several), in kernel order: rows 'dtype | impl'
    (DTYPE_SHORT), in DTYPES order, each dtype's implementations in IMPL_ORDER; the title names the kernel (and
    pass) and what N is for it (N_IS)."""
    df = df[df["impl"] != "builtin"]
    multi_pass = df.groupby("kernel")["pass"].nunique() > 1
    out = []
    for (kernel, pass_), k in df.groupby(["kernel", "pass"], sort=True):
        parts = []
        for dtype in [d for d in DTYPES if d in set(k["dtype"])] + sorted(set(k["dtype"]) - set(DTYPES)):
            colour, labels = colours_and_labels(k[k["dtype"] == dtype])
            rows = [f"{DTYPE_SHORT.get(dtype, dtype)} | {r.split(' | ')[-1]}" for r in colour.index]
            parts.append((colour.set_axis(rows), labels.set_axis(rows)))
        name = f"{kernel} {pass_}" if multi_pass[kernel] else kernel
        out.append((f"{name} ({', '.join(N_IS[kind] for kind in size_kinds(k))})", pd.concat([c for c, _ in parts]),
                    pd.concat([lab for _, lab in parts])))
    return out


def columns_of(heights: list[float], ncols: int) -> list[list[int]]:
    """The panels (their indices, in order) of each of `ncols` (1 or 2) columns: contiguous runs, the taller as short
    as it can be."""
    if ncols == 1 or len(heights) < 2:
        return [list(range(len(heights)))]
    cut = min(range(1, len(heights)), key=lambda i: max(sum(heights[:i]), sum(heights[i:])))
    return [list(range(cut)), list(range(cut, len(heights)))]


def text_pt(fig, text: str, size: float) -> tuple[float, float]:
    """(width, height) in points of `text` at `size` as the figure's renderer draws it."""
    t = fig.text(0, 0, text, fontsize=size)
    box = t.get_window_extent(fig.canvas.get_renderer())
    t.remove()
    return box.width * 72 / fig.dpi, box.height * 72 / fig.dpi


def wrap_title(fig, title: str, width_pt: float) -> str:
    """A panel's title on as few lines as fit `width_pt` (broken between words)."""
    lines: list[str] = []
    for word in title.split(" "):
        if lines and text_pt(fig, f"{lines[-1]} {word}", plt.rcParams["axes.titlesize"])[0] <= width_pt:
            lines[-1] += f" {word}"
        else:
            lines.append(word)
    return "\n".join(lines)


def floored_metrics(argv=None):
    """(metrics, rules, the other arguments) of a figure that draws verdicts: the --metrics files with each verdict
    judged again beyond the run's A/A floors (--floors results/paired/floors_<gpu>.csv; analysis/aa_floors), by the
    rules of --verdicts (config verdicts, as JSON): the verdicts the paper's tables give."""
    import argparse
    import json

    from analysis.aa_floors import apply_floors, read_floors
    from rooflab.verdicts import VerdictRules

    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--floors", nargs="*", default=[])
    extra.add_argument("--verdicts", default="{}")
    extra.add_argument("--metrics", nargs="+", required=True)
    known, rest = extra.parse_known_args(argv)
    rules = VerdictRules.from_config(json.loads(known.verdicts))
    return apply_floors(read_metrics(known.metrics), read_floors(known.floors), rules), rules, \
        ["--metrics", *known.metrics, *rest]


def main(argv=None):
    metrics, _, rest = floored_metrics(argv)
    args = parse_args(SCOPE, rest)
    setup()
    df = claimable(metrics, args.gpu).dropna(subset=["speedup_vs_builtin"])
    title = f"Speedup over the PyTorch builtin on {gpu_name(args.gpu)} ({time_frame(args.gpu)})"
    if df[df["impl"] != "builtin"].empty:
        no_data_figure(args, title, f"no correct, timed cell with a builtin baseline on {args.gpu}", "speedup")
        return
    panels = kernel_panels(df)
    sizes = sorted(set(df.loc[df["impl"] != "builtin", "size"]))
    width, most = (v * 72 for v in print_size("speedup"))
    fig = plt.figure(figsize=(width / 72, most / 72))  # laid out by hand below, in points; cut to size at the end
    pad = plt.rcParams["ytick.major.pad"]
    label_pt = [max(text_pt(fig, r, MIN_PT)[0] for r in c.index) + pad for _, c, _ in panels]
    ncols = min(2, len(panels))
    # the columns' cells: the width left by the widest labels of each column (two columns: the two widest overall)
    cells_pt = (width - 2 * MARGIN_PT - sum(sorted(label_pt)[-ncols:]) - (ncols - 1) * COLUMN_GAP_PT) / ncols
    titles = [wrap_title(fig, t, cells_pt + min(label_pt)) for t, _, _ in panels]
    title_pt = [text_pt(fig, t, plt.rcParams["axes.titlesize"])[1] + TITLE_PAD_PT for t in titles]
    foot = SIZES_PT + CBAR_GAP_PT + CBAR_PT + CBAR_TEXT_PT + MARGIN_PT
    fixed = [t + PANEL_GAP_PT for t in title_pt]
    columns = columns_of([f + len(c) * ROW_PT for f, (_, c, _) in zip(fixed, panels)], ncols)
    # rows ROW_PT high where the page has room, else as high as it allows (never under MIN_ROW_PT: see the tests)
    rows = [sum(len(panels[i][1]) for i in col) for col in columns]
    room = [(most - MARGIN_PT - SUPTITLE_PT - foot - sum(fixed[i] for i in col)) / n for col, n in zip(columns, rows)]
    row = max(MIN_ROW_PT, min([ROW_PT] + room))
    tallest = max(sum(fixed[i] + len(panels[i][1]) * row for i in col) for col in columns)
    height = MARGIN_PT + SUPTITLE_PT + tallest + foot
    fig.set_size_inches(width / 72, height / 72)
    norm = Normalize(-LIMIT, LIMIT)
    mesh, left = None, MARGIN_PT
    for col in columns:
        labels_w = max(label_pt[i] for i in col)
        x0, top = left + labels_w, height - MARGIN_PT - SUPTITLE_PT
        for j, i in enumerate(col):
            _, colour, labels = panels[i]
            top -= fixed[i]
            h = len(colour) * row
            ax = fig.add_axes((x0 / width, (top - h) / height, cells_pt / width, h / height))
            mesh = annotated_grid(ax, colour.reindex(columns=sizes), labels.reindex(columns=sizes), "RdBu", norm)
            dtypes = [r.split(" | ")[0] for r in colour.index]
            for r in range(1, len(dtypes)):  # a gap between dtypes
                if dtypes[r] != dtypes[r - 1]:
                    ax.axhline(r, color="white", lw=2.5)
            # over the panel's row labels and cells, from the labels' left edge
            ax.set_title(titles[i], pad=TITLE_PAD_PT, loc="left", x=-(labels_w - 0.5 * pad) / cells_pt)
            ax.tick_params(labelbottom=j == len(col) - 1)  # the sizes: under the column's last panel
            top -= h
        left = x0 + cells_pt + COLUMN_GAP_PT
    bar_w = min(width / 2, width - 2 * MARGIN_PT)
    cax = fig.add_axes(
        ((width - bar_w) / 2 / width, (MARGIN_PT + CBAR_TEXT_PT) / height, bar_w / width, CBAR_PT / height))
    cbar = fig.colorbar(mesh, cax=cax, orientation="horizontal")
    ticks = np.arange(-LIMIT, LIMIT + 1)
    cbar.set_ticks(ticks, labels=[f"{2.0 ** k:g}x" for k in ticks])
    cbar.set_label("speedup over the builtin: blue faster, red slower, beyond noise;\n"
                   "white 'tie': within noise; blank: no correct, timed pair")
    fig.suptitle(title, y=1 - MARGIN_PT / height, va="top")
    save(fig, args)


if __name__ == "__main__":
    main()
