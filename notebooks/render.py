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
                               parameters={
                                   "kernel": a.kernel,
                                   "gpu": a.gpu,
                                   "metrics_path": a.metrics
                               })
    body, _ = HTMLExporter(template_name="basic").from_notebook_node(nbformat.read(a.ipynb, as_version=4))
    Path(a.html).parent.mkdir(parents=True, exist_ok=True)
    Path(a.html).write_text(page(f"{a.kernel} on {a.gpu}", body), encoding="utf-8")


# The report embeds every notebook: the basic template (cells and outputs, no JupyterLab stylesheet) with a few lines
# of style is 80 KB where the lab template's page was 360 KB, nearly all of it its CSS.
STYLE = """body { font-family: sans-serif; max-width: 60em; margin: 1em auto; padding: 0 1em; line-height: 1.4; }
pre { background: #f6f6f6; padding: 0.5em; overflow-x: auto; font-size: 0.85em; }
img { max-width: 100%; } table { border-collapse: collapse; font-size: 0.85em; }
td, th { border: 1px solid #ddd; padding: 0.2em 0.5em; text-align: right; }
.jp-InputPrompt, .jp-OutputPrompt, .prompt { display: none; }"""


def page(title: str, body: str) -> str:
    """A standalone HTML page around nbconvert's basic body."""
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title>\n<style>\n{STYLE}\n</style>"
            f"</head>\n<body>\n{body}\n</body></html>\n")


if __name__ == "__main__":
    main()
