"""How large each figure's text prints in the paper (issue 22, figures fit to print): draws every figure of one
device from a metrics file, lays it out as the paper does (analysis/latex.figure: 0.95 of the A4 text width, at most
0.42 of the text height, aspect kept) and prints the smallest printed font size and how many texts fall under 7 pt.

    python scripts/figure_sizes.py --metrics results/metrics.parquet --profiles data/reference/h200/profiles.parquet
"""
import argparse
import importlib

from matplotlib.text import Text

from figures import SCOPES

TEXT_WIDTH_IN = (21.0 - 2 * 2.3) / 2.54  # paper/main.tex: a4paper, margin 2.3 cm
TEXT_HEIGHT_IN = (29.7 - 2 * 2.3) / 2.54
MIN_PT = 7.0


def printed_sizes(fig, width_in=0.95 * TEXT_WIDTH_IN, height_in=0.42 * TEXT_HEIGHT_IN):
    """(scale, [(printed pt, text)] smallest first) of a figure included at most width_in x height_in."""
    fig.canvas.draw()
    box = fig.get_tightbbox(fig.canvas.get_renderer())  # inches, as savefig(bbox_inches="tight") crops
    scale = min(width_in / box.width, height_in / box.height)
    texts = [(t.get_fontsize() * scale, t.get_text()) for t in fig.findobj(Text)
             if t.get_visible() and t.get_text().strip()]
    return scale, sorted(texts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--profiles", nargs="*", default=[])
    ap.add_argument("--gpu", default="h200")
    ap.add_argument("--kernel", default="softmax", help="for the figures drawn per kernel")
    a = ap.parse_args(argv)
    for name in sorted(SCOPES):
        module = importlib.import_module(f"figures.{name}")
        held = {}
        module.save = lambda fig, args: held.setdefault("fig", fig)
        args = ["--metrics", a.metrics, "--gpu", a.gpu, "--pdf", "/dev/null", "--png", "/dev/null"]
        args += ["--kernel", a.kernel] if SCOPES[name] == "kernel" else []
        args += ["--profiles", *a.profiles] if name == "fusion" else []
        module.main(args)
        if "fig" not in held:
            print(f"{name:11s} no figure (no data)")
            continue
        scale, texts = printed_sizes(held["fig"])
        small = sum(pt < MIN_PT for pt, _ in texts)
        print(f"{name:11s} printed at {scale:.2f}x: smallest text {texts[0][0]:.1f} pt; {small} of {len(texts)} "
              f"under {MIN_PT:g} pt")


if __name__ == "__main__":
    main()
