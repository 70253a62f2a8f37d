"""Execute notebooks/kernel.ipynb for one (gpu, kernel) with papermill and render the executed copy to HTML, in one
process (the papermill and nbconvert command lines started Python twice per notebook).

    python notebooks/render.py --kernel gelu --gpu cpu --metrics results/metrics/cpu/gelu.parquet \\
        --ipynb results/notebooks/cpu/gelu.ipynb --html results/notebooks/cpu/gelu.html
"""
from __future__ import annotations

import argparse
from pathlib import Path

NOTEBOOK = Path(__file__).resolve().parent / "kernel.ipynb"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--notebook", default=str(NOTEBOOK))
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--metrics", required=True, help="the metrics parquet the notebook reads")
    ap.add_argument("--ipynb", required=True, help="the executed notebook")
    ap.add_argument("--html", required=True, help="its HTML rendering")
    a = ap.parse_args(argv)

    import nbformat
    import papermill
    from nbconvert import HTMLExporter

    Path(a.ipynb).parent.mkdir(parents=True, exist_ok=True)
    papermill.execute_notebook(a.notebook, a.ipynb, kernel_name="python3", language="python", progress_bar=False,
                               parameters={"kernel": a.kernel, "gpu": a.gpu, "metrics_path": a.metrics})
    html, _ = HTMLExporter().from_notebook_node(nbformat.read(a.ipynb, as_version=4))
    Path(a.html).parent.mkdir(parents=True, exist_ok=True)
    Path(a.html).write_text(html, encoding="utf-8")


if __name__ == "__main__":
    main()
