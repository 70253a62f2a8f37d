"""Every figure script draws from a small synthetic metrics frame (and says 'no data' without one), writing a
non-empty PDF and PNG. Scripts are found the way rules/common.smk finds them: by their SCOPE line."""
import importlib
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.metrics import compute_metrics

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = {p.stem: re.search(r'^SCOPE = "(\w+)"', p.read_text(), re.M)
           for p in sorted((ROOT / "figures").glob("*.py")) if not p.stem.startswith("_")}
SCRIPTS = {name: m.group(1) for name, m in SCRIPTS.items() if m}


def synthetic_raw() -> pd.DataFrame:
    rows = []
    for kernel in ("gelu", "softmax", "matmul"):
        passes = ["fwd", "fwd+bwd"] if kernel == "softmax" else ["fwd"]
        for pass_ in passes:
            for dtype in ("float32", "bfloat16"):
                for n in (256, 1024, 1793, 4096):
                    for impl, speed in (("naive", 0.3), ("builtin", 1.0), ("compile", 0.9), ("triton", 1.1)):
                        if kernel == "matmul":
                            flops, nbytes, unit = 2.0 * n ** 3, 3.0 * n * n * 2, "bf16" if dtype == "bfloat16" else "tf32"
                            t = flops / (speed * 3e14 * min(1, n / 2048)) * 1e3
                        else:
                            flops, nbytes, unit = 8.0 * n * n, 8.0 * n * n, "fp32"
                            t = 0.005 + nbytes / (speed * 3e12) * 1e3
                        rows.append({"gpu": "h200", "kernel": kernel, "impl": impl, "dtype": dtype, "size": n,
                                     "pass": pass_, "status": "ok", "error": "", "median_ms": t,
                                     "graph_median_ms": t * 0.7, "flops": flops, "bytes": nbytes,
                                     "compute_unit": unit})
    rows.append({**rows[0], "impl": "cuda", "status": "mismatch", "median_ms": np.nan})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("figdata")
    ceilings = pd.DataFrame([{"gpu": "h200", "ceiling": c, "value": v} for c, v in
                             (("copy", 4.2e12), ("gemm_fp32", 5e13), ("gemm_tf32", 3.4e14), ("gemm_bf16", 6.7e14))])
    compute_metrics(synthetic_raw(), ceilings).to_parquet(d / "metrics.parquet")
    pd.DataFrame([{"gpu": "h200", "kernel": k, "impl": i, "dtype": "bfloat16", "size": 4096, "n_kernels": n,
                   "kernel_names": "k"} for k in ("gelu", "softmax") for i, n in (("naive", 7), ("triton", 1))]
                 ).to_parquet(d / "profiles.parquet")
    return d


def test_the_figures_are_found():
    assert {"roofline", "bandwidth", "speedup", "scaling", "wave", "fusion", "projection"} <= set(SCRIPTS)


def draw(name, tmp_path, inputs, gpu, extra=()):
    argv = ["--metrics", str(inputs / "metrics.parquet"), "--gpu", gpu, "--pdf", str(tmp_path / f"{name}.pdf"),
            "--png", str(tmp_path / f"{name}.png"), *extra]
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
