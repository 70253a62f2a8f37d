"""Real shapes on one GPU: at every shape of the shape sets (config shapes: llm, odd, explicit), our Triton kernel
over the best of the PyTorch builtin and torch.compile in GPU time. Message: where ours wins or loses once the
problem is no longer N x N.

x = bytes one call moves (the kernel's own model; no one N fits rows x cols or M x K x N), log; y = best PyTorch
time / ours (above 1: ours faster), log; one marker per kernel, one colour per set; the forward pass in bfloat16
(else the dtype most cells have), as the paper's table (analysis/shapes.py).

    python -m figures.shapes --metrics results/metrics/h200/shapes/*/*.parquet --gpu h200 --pdf X.pdf --png X.png
"""
from __future__ import annotations

from analysis.latex import print_box
from analysis.shapes import one_dtype, ours_over_best
from figures import SCOPES
from figures._common import gpu_name, no_data_figure, parse_args, read_metrics, save, setup

SCOPE = SCOPES["shapes"]

MARKERS = ["o", "s", "D", "^", "v", "P", "X", "<", ">", "h"]
SET_COLOUR = {"llm": "#0072B2", "odd": "#D55E00", "custom": "#009E73"}


def main(argv=None) -> None:
    import matplotlib.pyplot as plt

    args = parse_args("gpu", argv)
    setup()
    table = ours_over_best(read_metrics(args.metrics))
    d = one_dtype(table[table["gpu"] == args.gpu])
    title = f"{gpu_name(args.gpu)}: ours over the best of PyTorch at real shapes"
    if d.empty:
        no_data_figure(args, title, "no shape set with a timed Triton cell and a timed PyTorch baseline here")
        return
    width, height = print_box("shapes")
    fig, ax = plt.subplots(figsize=(width, min(height, 3.2)), layout="constrained")
    for i, (kernel, k) in enumerate(d.groupby("kernel", sort=True)):
        for preset, p in k.groupby("preset", sort=True):
            ax.scatter(p["bytes"], p["ratio"], marker=MARKERS[i % len(MARKERS)], s=22, alpha=0.85,
                       facecolors=SET_COLOUR.get(preset, "0.4"), edgecolors="none")
        ax.scatter([], [], marker=MARKERS[i % len(MARKERS)], color="0.3", label=kernel)
    for preset in dict.fromkeys(d["preset"]):
        ax.scatter([], [], marker="s", color=SET_COLOUR.get(preset, "0.4"), label=f"set {preset}")
    ax.axhline(1.0, color="0.3", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("bytes one call moves")
    ax.set_ylabel("best PyTorch time / ours")
    ax.set_title(f"{title} ({d['dtype'].iloc[0]}, forward)")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    save(fig, args)


if __name__ == "__main__":
    main()
