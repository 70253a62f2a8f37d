"""Compile ahead (experiments/warm.py): the lanes compile a cell's graph without running it, and the cell's own
torch.compile then loads it from Inductor's FX graph cache instead of compiling it again."""
import os

import pytest

from experiments import warm


def test_lanes_leave_the_measurement_its_cores():
    assert warm.lanes_for(2) == 0 and warm.lanes_for(7) == 0  # this machine and CI: none
    assert warm.lanes_for(8) == 2 and warm.lanes_for(16) == 4 and warm.lanes_for(128) == warm.MAX_LANES


def test_a_warmed_cell_compiles_from_the_cache_and_nothing_runs(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    import torch._dynamo  # noqa: F811
    from torch._dynamo.utils import counters

    from rooflab.kernel import load_kernel

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    kernel = load_kernel("gelu")
    params = {
        "dtypes": ["float32"],
        "impls": ["naive", "compile"],
        "sizes": [48],
        "extra_sizes": [],
        "seed": 0,
        "timing": {},
        "preset": "square"
    }
    job = {"kernel": "gelu", "out": str(tmp_path / "gelu.parquet"), "params": params, "device": "cpu"}
    counters.clear()
    name, compiled, skipped, _ = warm.warm_job(job)
    # compiled counts graphs stopped before they ran (_Compiled): the compile cell only, not the naive one
    assert (name, compiled, skipped) == ("gelu", 1, 0)
    assert counters["inductor"]["fxgraph_cache_miss"] == 1
    # the measurement's own cold call: same function, shape, dtype and flags
    torch._dynamo.reset()
    counters.clear()
    x = kernel.make_inputs(48, torch.float32, "cpu", 0)
    out = torch.compile(kernel.naive_fn, fullgraph=True, dynamic=False)(*x)
    assert counters["inductor"]["fxgraph_cache_hit"] == 1 and counters["inductor"]["fxgraph_cache_miss"] == 0
    assert torch.allclose(out, kernel.naive_fn(*x))


def test_a_warmed_fwd_bwd_cell_finds_its_forward_and_backward_in_the_cache(tmp_path, monkeypatch):
    # the cell compiles the forward on inputs that require grad and AOTAutograd's backward at the first .backward():
    # the lane, which never calls backward, must have compiled both
    torch = pytest.importorskip("torch")
    import torch._dynamo  # noqa: F811
    from torch._dynamo.utils import counters

    from rooflab.cell import compiled_factory
    from rooflab.kernel import load_kernel

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    kernel = load_kernel("rmsnorm")
    params = {
        "dtypes": ["float32"],
        "impls": ["compile"],
        "sizes": [8],
        "extra_sizes": [],
        "seed": 0,
        "timing": {},
        "preset": "square"
    }
    job = {"kernel": "rmsnorm", "out": str(tmp_path / "rmsnorm.parquet"), "params": params, "device": "cpu"}
    counters.clear()
    name, compiled, skipped, _ = warm.warm_job(job)
    assert (name, compiled, skipped) == ("rmsnorm", 2, 0)  # the fwd cell and the fwd+bwd cell
    torch._dynamo.reset()
    counters.clear()
    inputs = kernel.make_inputs(8, torch.float32, "cpu", 0)
    make, _ = compiled_factory(kernel)  # the measurement's own cold call
    grads = make(inputs, pass_="fwd+bwd")()
    assert counters["inductor"]["fxgraph_cache_miss"] == 0 and counters["inductor"]["fxgraph_cache_hit"] == 2
    assert len(grads) == 2 and all(torch.isfinite(g).all() for g in grads)


def test_in_a_lane_the_autotuners_compile_every_config_and_time_none(monkeypatch):
    from rooflab import triton_utils

    monkeypatch.setattr(triton_utils, "COMPILE_ONLY", True)
    calls = []
    assert triton_utils.autotune_bench(lambda: calls.append(1), (0.5, 0.2, 0.8)) == [1.0, 1.0, 1.0]
    assert calls == [1]  # one call: in a lane it compiles the config and launches nothing


def test_stop_ends_the_lanes_process_group(tmp_path):
    import subprocess

    pid_file = tmp_path / "lanes.pid"
    assert not warm.stop(pid_file)  # none started: nothing to end
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)  # a group of its own, as start() makes
    pid_file.write_text(f"{proc.pid}\n")
    assert warm.stop(pid_file) and proc.wait(timeout=10) != 0 and not pid_file.exists()


def test_triton_cache_dir_is_always_set_so_inductor_cannot_move_it(monkeypatch, tmp_path):
    # Inductor points an unset TRITON_CACHE_DIR at its own folder when it loads a compiled graph: a lane and a
    # measurement job must both name Triton's folder, or the job recompiles what the lane built
    from rooflab.device import set_cache_dirs

    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)  # (monkeypatch restores both afterwards)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("TRITON_HOME", str(tmp_path))
    set_cache_dirs({})
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / ".triton" / "cache")
    from torch._inductor.runtime.cache_dir_utils import triton_cache_dir  # where Inductor would point Triton

    assert triton_cache_dir(0) == os.environ["TRITON_CACHE_DIR"]
    monkeypatch.chdir(tmp_path)
    set_cache_dirs({"triton": "mine", "inductor": "ind"})
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "mine")
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "ind")
