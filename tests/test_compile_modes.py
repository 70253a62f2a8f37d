"""torch.compile in two modes: the default 'compile' and the opt-in 'compile-max' (max-autotune's template search,
rooflab.kernel.COMPILE_MODES), which a run measures only for the kernels config compile_max names; the paper states
the mode of every compile row."""
import pandas as pd
import pytest

from rooflab.kernel import COMPILE_MODES, IMPLS, impls_for


def test_compile_max_is_opt_in_and_held_to_its_kernels():
    params = {"impls": ["builtin", "compile", "compile-max", "triton"], "compile_max": {"kernels": ["matmul"]}}
    assert impls_for("matmul", params) == ["builtin", "compile", "compile-max", "triton"]
    assert impls_for("softmax", params) == ["builtin", "compile", "triton"]
    assert "compile-max" not in impls_for("matmul", {"compile_max": {"kernels": ["matmul"]}})  # not listed: off
    assert impls_for("softmax", {"impls": ["compile-max"]}) == ["compile-max"]  # a command line's own list
    assert set(COMPILE_MODES) <= set(IMPLS) and COMPILE_MODES["compile"] == "default"


def test_cells_follow_the_kernels_compile_max_names():
    from experiments.measure import cells_for
    from rooflab.kernel import load_kernel

    params = {
        "impls": ["compile", "compile-max"],
        "dtypes": ["float32"],
        "sizes": [64],
        "compile_max": {
            "kernels": ["matmul"]
        }
    }
    assert {c.impl for c in cells_for(load_kernel("matmul"), params)} == {"compile", "compile-max"}
    assert {c.impl for c in cells_for(load_kernel("softmax"), params)} == {"compile"}


@pytest.mark.parametrize("impl", sorted(COMPILE_MODES))
def test_the_compiled_callable_is_made_in_its_mode(monkeypatch, impl):
    import torch

    from rooflab.cell import compiled_factory
    from rooflab.kernel import load_kernel

    seen = []
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: seen.append(kw) or fn)
    kernel = load_kernel("vecadd")
    make, _ = compiled_factory(kernel, mode=COMPILE_MODES[impl])
    make(kernel.make_inputs(8, torch.float32, "cpu", 0))()
    assert seen[0].get("mode") == (None if impl == "compile" else "max-autotune-no-cudagraphs")
    assert seen[0]["fullgraph"] and seen[0]["dynamic"] is False


def rows(impls):
    return pd.DataFrame([{
        "gpu": "h200",
        "kernel": k,
        "impl": i,
        "status": "ok",
        "claimable": True,
        "median_ms": 1.0,
        "pass": "fwd",
        "dtype": "bfloat16",
        "size": 8192
    } for k, i in impls])


def test_the_paper_states_every_compile_mode():
    from analysis.baselines import compile_modes_sentence

    default = compile_modes_sentence(rows([("softmax", "compile"), ("matmul", "compile")]), "h200")
    assert "the compile rows (matmul and softmax) in mode \\texttt{default}" in default
    assert "was not measured on this run" in default and "compile-max" not in default
    both = compile_modes_sentence(rows([("softmax", "compile"), ("matmul", "compile-max")]), "h200")
    assert "the compile-max rows (matmul) in mode \\texttt{max-autotune-no-cudagraphs}" in both
    assert "not measured" not in both
    part = compile_modes_sentence(rows([("attention", "compile"), ("matmul", "compile-max")]), "h200")
    assert part.endswith(
        "No max-autotune row was measured for attention.")  # a compute-bound kernel without its row: said
