"""How large each figure's text prints in the paper (issue 22, figures fit to print): draws every figure of one
device from metrics files, and prints the scale at which the paper includes it (analysis/latex.py: print_box), its
smallest printed font size and how many texts fall under 7 pt (tests/test_figure_print.py fails on any).

    python scripts/figure_sizes.py --metrics results/metrics/h200/*.parquet --profiles data/reference/h200/profiles.parquet
"""
import argparse
import importlib

from figures import SCOPES
from figures._common import MIN_PT, printed_text


def draw(name: str, metrics: list[str], gpu: str, kernel: str, profiles: list[str]):
    """Figure `name` as its script draws it (its save() held back), or None where it says 'no data'."""
    module = importlib.import_module(f"figures.{name}")
    held = {}
    save = module.save
    module.save = lambda fig, args: held.setdefault("fig", fig)
    try:
        args = ["--metrics", *metrics, "--gpu", gpu, "--pdf", "/dev/null", "--png", "/dev/null"]
        args += ["--kernel", kernel] if SCOPES[name] == "kernel" else []
        args += ["--profiles", *profiles] if name == "fusion" else []
        module.main(args)
    finally:
        module.save = save
    return held.get("fig")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metrics", required=True, nargs="+")
    ap.add_argument("--profiles", nargs="*", default=[])
    ap.add_argument("--gpu", default="h200")
    ap.add_argument("--kernel", default="softmax", help="for the figures drawn per kernel")
    a = ap.parse_args(argv)
    for name in sorted(SCOPES):
        fig = draw(name, a.metrics, a.gpu, a.kernel, a.profiles)
        if fig is None:
            print(f"{name:11s} no figure (no data)")
            continue
        scale, texts, outside = printed_text(fig, name)
        small = sum(pt < MIN_PT for pt, _ in texts)
        w, h = fig.get_size_inches()
        print(f"{name:11s} {w:.2f} x {h:.2f} in, printed at {scale:.2f}x: smallest text {texts[0][0]:.1f} pt; "
              f"{small} of {len(texts)} under {MIN_PT:g} pt; text outside the page {outside:.2f} in")


if __name__ == "__main__":
    main()
