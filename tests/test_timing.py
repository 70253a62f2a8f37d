"""The timer's statistics and stopping rule on synthetic timers, and the schema of what the measurement jobs write
(raw sweep, ceilings) from a tiny CPU run. No GPU: the rule is a pure function of the samples and the clock."""
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rooflab.timing import TimingConfig, measure, rse_of_median, stop_reason, summarize


class FakeClock:
    """Simulated seconds, advanced by the fake timer by the time its samples 'took'."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeTimer:
    """A Timer whose samples come from a generator of pre-set values (ms); each sample advances the fake clock."""

    name = "fake"

    def __init__(self, draw, clock: FakeClock | None = None):
        self.draw = draw  # n -> array of n samples
        self.clock = clock
        self.warmed = False
        self.calls = 0

    def warmup(self, fn, warmup_ms):
        self.warmed = True

    def sample(self, fn, n):
        self.calls += 1
        x = [float(v) for v in self.draw(n)]
        if self.clock is not None:
            self.clock.now += sum(x) * 1e-3
        return x


def constant(value=1.0):
    return lambda n: np.full(n, value)


def noisy(seed=0):
    rng = np.random.default_rng(seed)
    return lambda n: rng.lognormal(mean=0.0, sigma=1.0, size=n)  # spread of ~100 %: rse never reaches 0.5 %


def test_constant_samples_stop_by_rse_at_min_samples():
    cfg = TimingConfig(min_samples=10, max_samples=1000, target_rse=0.005, max_time_s=10.0)
    timer = FakeTimer(constant(2.5))
    out = measure(lambda: None, timer, cfg, clock=FakeClock())
    assert timer.warmed
    assert out["stop_reason"] == "rse"
    assert out["n_samples"] == cfg.min_samples and timer.calls == 2  # a first round of 3, then the rest
    assert out["median_ms"] == 2.5 and out["rse_median"] == 0.0
    assert out["timer"] == "fake"


def test_noisy_samples_stop_at_the_time_cap():
    clock = FakeClock()
    cfg = TimingConfig(min_samples=10, max_samples=100_000, target_rse=0.005, max_time_s=0.2)
    out = measure(lambda: None, FakeTimer(noisy(), clock), cfg, clock=clock)
    assert out["stop_reason"] == "time_cap"
    assert clock.now >= cfg.max_time_s
    assert cfg.min_samples <= out["n_samples"] < cfg.max_samples
    assert out["rse_median"] >= cfg.target_rse


def test_noisy_samples_stop_at_max_samples_without_overshooting():
    cfg = TimingConfig(min_samples=10, max_samples=40, target_rse=0.005, max_time_s=1e9)
    out = measure(lambda: None, FakeTimer(noisy(1)), cfg, clock=FakeClock())
    assert out["stop_reason"] == "max_samples"
    assert out["n_samples"] == 40


def test_batches_grow_so_noisy_cells_cost_few_sample_calls():
    cfg = TimingConfig(min_samples=10, max_samples=2000, target_rse=1e-9, max_time_s=1e9)
    timer = FakeTimer(noisy(2))
    out = measure(lambda: None, timer, cfg, clock=FakeClock())
    assert out["n_samples"] == 2000 and timer.calls < 16  # geometric growth, not 200 batches of 10


def test_one_outlier_does_not_stop_a_quantised_timer_from_converging():
    # CUDA events tick in ~0.5 us: most samples equal, one interrupt. The median is known; stop by 'rse'.
    cfg = TimingConfig(min_samples=10, max_samples=1000, target_rse=0.005, max_time_s=10.0)
    values = [3.0] * 9 + [50.0]

    def draw(n):
        out, values[:] = values[:n], values[n:]
        return out

    out = measure(lambda: None, FakeTimer(draw), cfg, clock=FakeClock())
    assert out["stop_reason"] == "rse" and out["median_ms"] == 3.0 and out["max_ms"] == 50.0


def test_a_call_that_spends_the_time_cap_is_sampled_three_times_not_min_samples():
    # naive attention at 8192: 42 ms a call against a start's 0.125 s; min_samples (12 with 4 placements) took 0.5 s
    clock = FakeClock()
    cfg = TimingConfig(min_samples=10, max_samples=1000, target_rse=1e-9, max_time_s=0.12)
    out = measure(lambda: None, FakeTimer(constant(42.0), clock), cfg, clock=clock)
    assert out["stop_reason"] == "time_cap" and out["n_samples"] == 3
    # a call that leaves room after the first round: as many more as the cap has left, not min_samples
    clock = FakeClock()
    out = measure(lambda: None, FakeTimer(constant(20.0), clock), cfg, clock=clock)
    assert out["stop_reason"] == "time_cap" and out["n_samples"] == 6 and clock.now == pytest.approx(0.12)


def test_two_placements_keep_whole_rounds_when_the_time_cap_stops_early():

    class Clocked(PlacementTimer):  # 42 ms a sample on the fake clock

        def __init__(self, clock):
            self.clock = clock

        def sample(self, fn, n):
            self.clock.now += 0.042 * n
            return super().sample(fn, n)

    fns = [lambda k=k: k for k in range(2)]
    clock = FakeClock()
    out = measure(fns, Clocked(clock),
                  TimingConfig(min_samples=10, max_samples=1000, target_rse=1e-9, max_time_s=0.1, loop_ms=0),
                  clock=clock)
    assert out["stop_reason"] == "time_cap" and out["n_samples"] == 4  # two rounds, each placement twice


def test_stop_reason_rules():
    cfg = TimingConfig(min_samples=10, max_samples=50, target_rse=0.01, max_time_s=1.0)
    assert stop_reason([1.0] * 9, 0.0, cfg) is None  # too few samples, even if constant
    assert stop_reason([1.0] * 10, 0.0, cfg) == "rse"
    spread = list(np.linspace(1, 3, 20))
    assert stop_reason(spread, 0.5, cfg) is None
    assert stop_reason(spread, 1.0, cfg) == "time_cap"
    assert stop_reason([1.0, 3.0], 5.0, cfg) is None  # the cap still waits for 3 samples
    assert stop_reason(list(np.linspace(1, 3, 50)), 0.0, cfg) == "max_samples"
    slow = TimingConfig(min_samples=10, max_samples=50, target_rse=0.01, max_time_s=1.0, min_time_s=0.5)
    assert stop_reason([1.0] * 10, 0.4, slow) is None  # steady, but not yet min_time_s of samples
    assert stop_reason([1.0] * 10, 0.5, slow) == "rse"


def test_rse_of_median():
    assert math.isinf(rse_of_median([1.0]))
    assert rse_of_median([2.0] * 5) == 0.0
    x = np.random.default_rng(0).normal(100.0, 1.0, 10_000)
    # sqrt(pi/2) * sigma / sqrt(n) / median = 1.2533 * 1 / 100 / 100
    assert rse_of_median(x) == pytest.approx(1.2533e-4, rel=0.05)


def test_summary_columns_on_a_hand_made_list():
    s = summarize([5.0, 1.0, 4.0, 2.0, 3.0])
    assert s["median_ms"] == 3.0
    assert s["p20_ms"] == pytest.approx(1.8) and s["p80_ms"] == pytest.approx(4.2)  # linear interpolation
    assert (s["min_ms"], s["max_ms"], s["mean_ms"]) == (1.0, 5.0, 3.0)
    assert s["std_ms"] == pytest.approx(math.sqrt(2.5))  # sample standard deviation (ddof=1)
    assert s["n_samples"] == 5 and isinstance(s["n_samples"], int)
    assert summarize([7.0])["std_ms"] == 0.0


def test_timing_config_from_config_ignores_unknown_keys():
    cfg = TimingConfig.from_config({"min_samples": 5, "max_time_s": 0.1, "not_a_key": 1})
    assert cfg.min_samples == 5 and cfg.max_time_s == 0.1 and cfg.target_rse == TimingConfig().target_rse


# ---- schema of the files the measurement jobs write, from a tiny CPU run -------------------------------------------

TINY = {
    "sizes": [32],
    "extra_sizes": [],
    "dtypes": ["float32", "bfloat16"],
    "impls": ["naive", "builtin", "triton"],
    "timing": {
        "warmup_ms": 1,
        "min_samples": 3,
        "max_samples": 20,
        "target_rse": 0.5,
        "max_time_s": 0.02
    },
    "interpret_max_size": 64,
    "seed": 0,
    "allow_failures": False,
    "reuse_cells": False
}


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    from experiments.measure import run

    out = tmp_path_factory.mktemp("raw") / "cpu" / "gelu.parquet"
    assert run("gelu", "cpu", str(out), dict(TINY), progress=False) == 0
    return pd.read_parquet(out)


def test_raw_schema_on_the_cpu(raw):
    from rooflab.io import RAW_COLUMNS

    assert list(raw.columns[:len(RAW_COLUMNS)]) == RAW_COLUMNS
    assert len(raw) == 6 and set(raw["status"]) == {"ok", "not_timed"}
    timed = raw[raw["status"] == "ok"]
    assert set(timed["timer"]) == {"host"}  # the CPU keeps the schema with the host timer
    assert set(timed["stop_reason"]) <= {"rse", "time_cap", "max_samples"}
    for col in ("median_ms", "p20_ms", "p80_ms", "min_ms", "max_ms", "mean_ms", "std_ms", "rse_median", "cold_ms",
                "flops", "bytes", "rel_err", "graph_median_ms", "sm_clock_before_mhz", "sm_clock_after_mhz",
                "mem_clock_before_mhz", "mem_clock_after_mhz", "autotune_ms", "gpu_temp_after_c", "mem_temp_after_c",
                "power_after_w"):
        assert raw[col].dtype == np.float64, col
    assert (timed["p20_ms"] <= timed["median_ms"]).all() and (timed["median_ms"] <= timed["p80_ms"]).all()
    # no NVML, no CUDA graphs on the CPU: NaN, never a made-up number
    for col in ("sm_clock_before_mhz", "sm_clock_after_mhz", "mem_clock_after_mhz", "graph_median_ms",
                "gpu_temp_before_c", "mem_temp_after_c", "power_after_w"):
        assert raw[col].isna().all(), col
    assert not raw["clock_throttled"].fillna(False).astype(bool).any()
    assert raw["size"].dtype == np.int64 and raw["n_samples"].dropna().gt(0).all()


def test_raw_records_cold_start_and_caches(raw):
    assert raw.loc[raw["status"] == "ok", "cold_ms"].gt(0).all()
    assert set(raw["cache_state"]) <= {"cold", "warm", "partial"}
    for col in ("triton_cache_dir", "inductor_cache_dir"):
        assert raw[col].str.len().gt(0).all()
    assert (raw["autotune_config"] == "").all()  # GeLU does not autotune


def test_autotune_config_recorded_for_an_autotuned_kernel(tmp_path):
    from experiments.measure import run

    out = tmp_path / "cpu" / "matmul.parquet"
    params = {**TINY, "dtypes": ["float32"], "impls": ["triton"], "sizes": [16]}
    assert run("matmul", "cpu", str(out), params, progress=False) == 0
    row = pd.read_parquet(out).iloc[0]
    # the interpreter keeps one config: it is reported, with no search time
    assert "BLOCK_M" in row["autotune_config"] and math.isnan(row["autotune_ms"])


def test_ceilings_schema_on_the_cpu(tmp_path):
    from experiments.ceilings import run
    from rooflab.io import CEILING_COLUMNS

    out = tmp_path / "ceilings.parquet"
    run("cpu", str(out), {"copy_bytes": 1 << 20, "gemm_sizes": [64]})
    df = pd.read_parquet(out)
    assert list(df.columns[:len(CEILING_COLUMNS)]) == CEILING_COLUMNS
    # each measurement, then the roofs: the best copy and the best GEMM per math mode (no tf32 on the CPU)
    assert list(df["ceiling"]) == [
        "copy_large", "gemm_fp32_cublas_64", "gemm_bf16_cublas_64", "gemm_fp16_cublas_64", "copy", "gemm_fp32",
        "gemm_bf16", "gemm_fp16"
    ]
    roofs = df.set_index("ceiling")
    assert roofs.loc["copy", "best_of"] == "copy_large" and roofs.loc["gemm_bf16", "best_of"] == "gemm_bf16_cublas_64"
    assert df["run_id"].nunique() == 1 and df["run_id"].iloc[0]
    for col in ("value", "median_ms", "bytes", "flops"):
        assert df[col].dtype == np.float64 and df[col].notna().all(), col
    assert (df["value"] > 0).all() and set(df["timer"]) == {"host"}


def test_same_size_copies_are_their_own_ceilings(tmp_path):
    from experiments.ceilings import run

    out = tmp_path / "ceilings.parquet"
    run(
        "cpu", str(out), {
            "copy_bytes": 1 << 20,
            "gemm_sizes": [64],
            "same_size_copies": [64, 128],
            "same_size_dtypes": ["float32", "bfloat16"]
        })
    df = pd.read_parquet(out).set_index("ceiling")
    names = ["copy_float32_64", "copy_bfloat16_64", "copy_float32_128", "copy_bfloat16_128"]
    assert list(df.index[1:5]) == names
    assert df.loc["copy_bfloat16_128", "bytes"] == 2 * 128 * 128 * 2  # read + write, at the dtype's width
    assert (df.loc[names, "value"] > 0).all()
    assert not df["warm_translations"].any()  # off unless the sweep's timing turns it on
    run(
        "cpu", str(out), {
            "copy_bytes": 1 << 20,
            "gemm_sizes": [64],
            "same_size_copies": [64],
            "same_size_dtypes": ["float32"],
            "warm_translations": True,
            "placements": 2
        })
    df = pd.read_parquet(out).set_index("ceiling")
    assert df.loc["copy_float32_64", "warm_translations"] and df.loc["copy_float32_64", "placements"] == 2
    assert not df.loc["copy_large", "warm_translations"]  # the large copy is timed plainly
    assert df.loc["copy", "value"] == df.loc[[n for n in df.index if n.startswith("copy_")], "value"].max()


def test_ceilings_are_the_best_of_what_was_measured_and_earlier_runs_are_kept(tmp_path, monkeypatch):
    """A roof is the fastest measurement of its kind (so no cell sits above it by the choice of one copy or one
    GEMM shape); a new run's ceilings join the file beside the earlier runs' (their cells are rated against them)."""
    from experiments.ceilings import best_of, run

    rows = [{
        "ceiling": "copy_large",
        "value": 4.0
    }, {
        "ceiling": "copy_bfloat16_8192",
        "value": 4.1
    }, {
        "ceiling": "gemm_bf16_cublas_4096",
        "value": 600.0
    }, {
        "ceiling": "gemm_bf16_triton_8192",
        "value": 690.0
    }, {
        "ceiling": "gemm_bf16_cublas_8192",
        "value": 650.0
    }, {
        "ceiling": "gemm_fp32_cublas_8192",
        "value": 50.0
    }]
    roofs = {r["ceiling"]: (r["value"], r["best_of"]) for r in best_of(rows)}
    assert roofs == {
        "copy": (4.1, "copy_bfloat16_8192"),
        "gemm_bf16": (690.0, "gemm_bf16_triton_8192"),
        "gemm_fp32": (50.0, "gemm_fp32_cublas_8192")
    }
    out = tmp_path / "ceilings.parquet"
    monkeypatch.setenv("ROOFLAB_RUN_ID", "run-a")
    run("cpu", str(out), {"copy_bytes": 1 << 20, "gemm_sizes": [64]})
    monkeypatch.setenv("ROOFLAB_RUN_ID", "run-b")
    run("cpu", str(out), {"copy_bytes": 1 << 20, "gemm_sizes": [64]})
    run("cpu", str(out), {"copy_bytes": 1 << 20, "gemm_sizes": [64]})  # the same run again replaces its own rows
    df = pd.read_parquet(out)
    assert df.groupby("run_id").size().to_dict() == {"run-a": 8, "run-b": 8}


# the ceilings script run as Snakemake's script: directive runs it: a ``snakemake`` object in its globals
_AS_SNAKEMAKE = """
import runpy, sys, types
sm = types.SimpleNamespace(wildcards=types.SimpleNamespace(gpu="cpu"), threads=1, log=[sys.argv[1]], output=[sys.argv[2]],
                           params=types.SimpleNamespace(ceilings={"copy_bytes": 1 << 20, "gemm_sizes": [64]}))
runpy.run_path("experiments/ceilings.py", init_globals={"snakemake": sm})
"""


def test_cpu_ceilings_are_timed_on_the_sweeps_threads_not_snakemakes(tmp_path):
    """Snakemake runs the ceilings script with OMP_NUM_THREADS, MKL_NUM_THREADS, ... at the rule's threads (1); the
    CPU's cells are timed in a worker started from Snakemake's own environment, on all of torch's default threads.
    Timed on one thread, the fp32 roof was 154 GFLOP/s at 512^3, and the sweep's torch.mm cell 266 on 2 cores: a
    roof below the cells. The job's roofs are timed on the threads a cell gets."""
    import os
    import subprocess
    import sys

    from experiments.ceilings import THREAD_VARS

    root = Path(__file__).resolve().parent.parent
    clean = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    default = int(
        subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"], env=clean,
                       capture_output=True, text=True, check=True).stdout)
    if default < 2:
        pytest.skip("one thread by default: the sweep's and Snakemake's thread counts are the same")
    out, log = tmp_path / "ceilings.parquet", tmp_path / "ceilings.log"
    as_snakemake = {**clean, **{v: "1" for v in THREAD_VARS}, "PYTHONPATH": str(root)}
    subprocess.run([sys.executable, "-c", _AS_SNAKEMAKE, str(log), str(out)], env=as_snakemake, cwd=root, check=True)
    df = pd.read_parquet(out)
    assert set(df["threads"]) == {default}, log.read_text()


def test_sweep_threads_takes_back_only_snakemakes_limits_and_only_on_the_cpu():
    from experiments.ceilings import THREAD_VARS, sweep_threads

    env = {**{v: "1" for v in THREAD_VARS}, "OMP_NUM_THREADS": "3", "PATH": "/bin"}
    assert sweep_threads("h200", 1, env) == [] and len(env) == len(THREAD_VARS) + 1  # a GPU's cells run as scripts too
    assert sweep_threads("cpu", 1, env) == [v for v in THREAD_VARS if v != "OMP_NUM_THREADS"]
    assert env == {"OMP_NUM_THREADS": "3", "PATH": "/bin"}  # not the rule's: the user's, which the worker has too


def test_hold_covers_the_slowest_enqueue_with_margin_and_is_capped():
    from rooflab.timing import HOLD_MARGIN_US, HOLD_MAX_US, hold_us_for

    assert hold_us_for([30.0, 10.0, 12.0]) == pytest.approx(1.5 * 30.0 + HOLD_MARGIN_US)
    assert hold_us_for([5.0]) > 5.0 + HOLD_MARGIN_US - 1e-9
    assert hold_us_for([1e9]) == HOLD_MAX_US


def test_loop_time_is_per_call_and_includes_the_sync(monkeypatch):
    from types import SimpleNamespace

    from rooflab import timers
    from rooflab.timing import _loop_ms

    now = [0.0]  # a fake clock: a call takes 2 ms, a sync 5 ms

    def advance(ms):
        now[0] += ms * 1e-3

    cpu = [0.0]

    def call():  # on the CPU for 1.5 of its 2 ms: the process's share of the loop is 3 x 1.5 / (3 x 2 + 5)
        advance(2.0)
        cpu[0] += 1.5e-3

    monkeypatch.setattr(timers, "time", SimpleNamespace(perf_counter=lambda: now[0], thread_time=lambda: cpu[0]))
    facts = {}
    per_call = _loop_ms(call, min_ms=20, sync=lambda: advance(5.0), facts=facts)
    # the first call and its sync (7 ms) size the loop at 3 calls (20 ms / 7, at least 3): 3 x 2 ms + one sync
    assert per_call == pytest.approx((3 * 2.0 + 5.0) / 3)
    assert facts["cpu_share"] == pytest.approx(3 * 3 * 1.5 / (3 * (3 * 2.0 + 5.0)))


def test_measure_records_loop_and_hold_columns_on_the_host_timer():
    from rooflab.timing import HostTimer

    out = measure(lambda: sum(range(1000)), HostTimer(), TimingConfig(warmup_ms=1, max_time_s=0.05, loop_ms=2))
    assert out["loop_ms"] > 0 and np.isfinite(out["loop_ms"])
    assert np.isnan(out["hold_us"]) and np.isnan(out["enqueue_us"])  # no stream to hold on the CPU
    off = measure(lambda: None, HostTimer(), TimingConfig(warmup_ms=1, max_time_s=0.05, loop_ms=0))
    assert np.isnan(off["loop_ms"])


# ---- input placements: samples rotate through input sets at distinct addresses -------------------------------------


def test_rotation_calls_each_placement_in_turn_and_keeps_its_last_output():
    import gc
    import weakref

    from rooflab.timing import Rotation

    class Out:  # a stand-in for an output tensor: alive while someone holds it
        pass

    calls, refs = [], []

    def make(k):

        def fn():
            calls.append(k)
            out = Out()
            refs.append(weakref.ref(out))
            return out

        return fn

    rot = Rotation([make(0), make(1), make(2)])
    for _ in range(7):
        rot()
    gc.collect()
    assert calls == [0, 1, 2, 0, 1, 2, 0] and len(rot) == 3
    alive = [i for i, r in enumerate(refs) if r() is not None]
    assert alive == [4, 5, 6]  # the last output of each placement is held, older ones are freed
    with pytest.raises(ValueError):
        Rotation([])


def test_measure_rotates_a_list_of_closures_and_records_how_many():
    from rooflab.timing import HostTimer

    seen = []
    fns = [lambda k=k: seen.append(k) for k in range(4)]
    out = measure(fns, HostTimer(), TimingConfig(warmup_ms=1, min_samples=8, max_time_s=0.05, loop_ms=0))
    assert out["placements"] == 4 and out["n_samples"] % 4 == 0
    assert set(seen) == {0, 1, 2, 3}  # every placement was timed
    assert measure(lambda: None, HostTimer(), TimingConfig(warmup_ms=1, max_time_s=0.01, loop_ms=0))["placements"] == 1


def test_placements_shrink_to_what_fits_in_a_share_of_free_memory():
    from rooflab.cell import PLACEMENT_MEMORY_SHARE, placements_for

    gib = float(1 << 30)
    assert placements_for(4, 0.5 * gib, "cuda", free_bytes=100 * gib) == 4
    # each placement costs two working sets; 4 of 1 GiB need 8 GiB, a quarter of 16 GiB holds 2
    assert placements_for(4, gib, "cuda", free_bytes=16 * gib) == int(PLACEMENT_MEMORY_SHARE * 16 / 2)
    assert placements_for(4, 100 * gib, "cuda", free_bytes=10 * gib) == 1  # never fewer than one
    assert placements_for(1, gib, "cuda", free_bytes=0.0) == 1
    assert placements_for(3, 100 * gib, "cpu") == 3  # the host's memory is not rationed


def test_a_cpu_cell_rotates_through_its_placements(tmp_path):
    from experiments.measure import run

    out = tmp_path / "cpu" / "vecadd.parquet"
    params = {
        **TINY, "impls": ["builtin", "compile"],
        "dtypes": ["float32"],
        "timing": {
            **TINY["timing"], "placements": 3
        }
    }
    assert run("vecadd", "cpu", str(out), params, progress=False) == 0
    df = pd.read_parquet(out)
    assert (df["status"] == "ok").all() and (df["placements"] == 3).all()


def test_compiled_factory_compiles_once_for_all_placements():
    import torch

    from rooflab.kernel import load_kernel
    from rooflab.cell import compiled_factory

    kernel = load_kernel("vecadd")
    make, fell_back = compiled_factory(kernel)
    a = make(kernel.make_inputs(8, torch.float32, "cpu", 0))
    b = make(kernel.make_inputs(8, torch.float32, "cpu", 0))
    torch.testing.assert_close(a(), b())
    assert a.__closure__ is not None
    fns = {c.cell_contents for f in (a, b) for c in f.__closure__ if callable(c.cell_contents)}
    assert len(fns) == 1  # one compiled callable behind both closures
    assert not fell_back()


class PlacementTimer:
    """Calls fn once per sample; the 'time' of a sample is which placement it called (the closures return it)."""

    name = "placement"

    def warmup(self, fn, warmup_ms):
        for _ in range(3):  # an arbitrary number of warm-up calls: the rotation is left mid-round
            fn()

    def sample(self, fn, n):
        return [1.0 + fn() for _ in range(n)]


def test_samples_are_whole_rounds_starting_at_the_first_placement():
    drawn = []

    class Recording(PlacementTimer):

        def sample(self, fn, n):
            out = super().sample(fn, n)
            drawn.extend(int(v - 1.0) for v in out)
            return out

    fns = [lambda k=k: k for k in range(4)]
    out = measure(fns, Recording(),
                  TimingConfig(min_samples=10, max_samples=1000, target_rse=0.5, max_time_s=1e9, loop_ms=0))
    assert out["n_samples"] == 12 and len(drawn) == 12  # 10 rounded up to whole rounds of 4
    assert drawn == [0, 1, 2, 3] * 3  # from the first placement, each the same number of times
    drawn.clear()  # a time cap spent at once: one round
    out = measure(fns, Recording(),
                  TimingConfig(min_samples=10, max_samples=1000, target_rse=1e-9, max_time_s=0.0, loop_ms=0))
    assert out["n_samples"] == 4 and drawn == [0, 1, 2, 3] and out["stop_reason"] == "time_cap"
    capped = measure(fns, PlacementTimer(),
                     TimingConfig(min_samples=3, max_samples=10, target_rse=1e-9, max_time_s=1e9, loop_ms=0))
    assert capped["n_samples"] == 8 and capped["stop_reason"] == "max_samples"  # 10 rounded down to whole rounds


def test_placement_sd_is_over_each_placements_median():
    from rooflab.timing import placement_sd_rel

    # placements 0 and 2 at 1.0, 1 and 3 at 1.1 (rotation order), with one outlier in placement 0
    x = [1.0, 1.1, 1.0, 1.1] * 3 + [9.0, 1.1, 1.0, 1.1]
    assert placement_sd_rel(x, 4) == pytest.approx(np.std([1.0, 1.1, 1.0, 1.1], ddof=1) / 1.05)
    assert math.isnan(placement_sd_rel([2.0, 3.0, 4.0], 1)) and math.isnan(placement_sd_rel([1.0], 2))


def test_measure_records_the_placements_sd_in_rotation_order():
    fns = [lambda k=k: 0.1 * k for k in range(4)]  # placement k's samples all read 1 + 0.1 k
    out = measure(fns, PlacementTimer(),
                  TimingConfig(min_samples=10, max_samples=1000, target_rse=1e-9, max_time_s=0.0, loop_ms=0))
    assert out["placement_sd_rel"] == pytest.approx(np.std([1.0, 1.1, 1.2, 1.3], ddof=1) / 1.15)
    assert out["instances"] == 1 and math.isnan(out["instance_sd_rel"])


class InstanceTimer:
    """Each warm-up starts an instance whose samples all read 1 + 0.1 * (its number): an offset per fresh start."""

    name = "instance"

    def __init__(self):
        self.warmups, self.fns = 0, []

    def warmup(self, fn, warmup_ms):
        self.warmups += 1
        self.fns.append(fn)

    def sample(self, fn, n):
        return [1.0 + 0.1 * (self.warmups - 1)] * n


def test_instances_pool_fresh_starts_and_record_their_spread():
    timer = InstanceTimer()
    fns = [lambda: None, lambda: None]
    cfg = TimingConfig(min_samples=4, max_samples=1000, target_rse=0.5, max_time_s=10.0, loop_ms=0, instances=3)
    out = measure(fns, timer, cfg)
    assert timer.warmups == 3 and out["instances"] == 3
    assert len({id(f) for f in timer.fns}) == 3  # a new Rotation (new output blocks) per instance
    assert out["n_samples"] == 12 and out["median_ms"] == pytest.approx(1.1)  # 4 samples from each of 3 starts
    assert out["instance_sd_rel"] == pytest.approx(np.std([1.0, 1.1, 1.2], ddof=1) / 1.1)
    assert out["stop_reason"] == "rse"


def test_instances_standard_error_covers_the_spread_between_starts():
    timer = InstanceTimer()  # every start's samples are identical: their own standard error is 0
    out = measure(lambda: None, timer,
                  TimingConfig(min_samples=4, max_samples=1000, target_rse=0.5, loop_ms=0, instances=4))
    assert out["rse_median"] == pytest.approx(out["instance_sd_rel"] / 2) and out["rse_median"] > 0.03


def test_instances_share_max_samples_and_a_limit_wins_the_stop_reason():

    class Noisy(InstanceTimer):

        def sample(self, fn, n):
            rng = np.random.default_rng(self.warmups)
            return list(rng.lognormal(0.0, 1.0, n)) if self.warmups == 2 else [1.0] * n

    fns = [lambda: None, lambda: None]
    out = measure(fns, Noisy(),
                  TimingConfig(min_samples=4, max_samples=40, target_rse=0.01, max_time_s=1e9, loop_ms=0, instances=3))
    # starts 1 and 3 stop at 4 samples; start 2 never converges and stops at its share of max_samples (40 // 3 -> 12)
    assert out["n_samples"] == 4 + 12 + 4
    assert out["stop_reason"] == "max_samples"  # one start stopped by a limit: the row says so


def test_starts_stop_early_once_they_agree_and_not_while_they_scatter():
    agree = measure(
        lambda: None, FakeTimer(constant()),
        TimingConfig(min_samples=4, max_samples=1000, target_rse=0.5, loop_ms=0, instances=8, min_instances=3))
    assert agree["instances"] == 3 and agree["n_samples"] == 12  # identical starts: the error over them is 0
    scatter = measure(
        lambda: None, InstanceTimer(),
        TimingConfig(min_samples=4, max_samples=1000, target_rse=0.5, loop_ms=0, instances=8, min_instances=3))
    assert scatter["instances"] == 8  # starts 10 % apart never get under 0.2 %
    off = measure(lambda: None, FakeTimer(constant()),
                  TimingConfig(min_samples=4, max_samples=1000, target_rse=0.5, loop_ms=0, instances=5))
    assert off["instances"] == 5  # min_instances 0 (the default): every start runs


def test_instances_share_the_time_cap():
    clock = FakeClock()
    timer = FakeTimer(noisy(), clock)
    out = measure(lambda: None, timer,
                  TimingConfig(min_samples=5, max_samples=10**6, max_time_s=2.0, loop_ms=0, instances=4), clock=clock)
    assert out["stop_reason"] == "time_cap"
    assert 2.0 <= clock.now < 4.0  # each instance stops once past its quarter of the cap (within one batch)


def test_every_placement_is_sampled_even_when_min_samples_is_lower():
    from rooflab.timing import HostTimer

    seen = []
    fns = [lambda k=k: seen.append(k) for k in range(6)]
    out = measure(fns, HostTimer(),
                  TimingConfig(warmup_ms=0, min_samples=2, max_samples=3, target_rse=1.0, max_time_s=10.0, loop_ms=0))
    assert out["n_samples"] >= 6 and out["placements"] == 6


def test_warming_touches_the_next_inputs_and_the_released_output_block():
    import torch

    from rooflab.timing import Rotation

    touched = []
    a, b = torch.zeros(4), torch.ones(4)
    outs = iter(torch.full((2, ), float(k)) for k in range(10))
    rot = Rotation([lambda: next(outs), lambda: next(outs)], inputs=[(a, ), {
        "x": b,
        "eps": 1e-5
    }], touch=lambda t: touched.append(t))
    first = rot()  # slot 0; nothing released yet
    rot.warm()
    assert len(touched) == 1 and touched[0] is b  # the next call's inputs (slot 1)
    rot()  # slot 1
    rot()  # slot 0 again: its previous output is released, held until warmed
    assert rot.released is first
    touched.clear()
    rot.warm()
    assert touched[0] is b and touched[1] is first and rot.released is None
    with pytest.raises(ValueError):
        Rotation([lambda: None], inputs=[(a, ), (b, )])


def test_one_placement_warms_the_block_its_output_is_freed_to():
    import torch

    from rooflab.timing import Rotation

    touched = []
    x = torch.zeros(4)
    rot = Rotation([lambda: x + 1], inputs=[(x, )], touch=lambda t: touched.append(t))
    out = rot()
    assert rot.released is out and rot.outputs == [None]  # no output kept alive, as without a Rotation
    rot.warm()
    assert touched[0] is x and touched[1] is out and rot.released is None
    rot()
    rot()  # not warmed in between (a warm-up call): the last output is freed before the next call, not kept
    assert rot.outputs == [None]


def test_warming_is_off_by_default_and_a_no_op_then():
    import torch

    from rooflab.timing import Rotation

    touched = []
    rot = Rotation([lambda: torch.zeros(2)], touch=lambda t: touched.append(t))
    rot()
    rot()
    rot.warm()
    assert touched == [] and rot.released is None


class WarmingTimer(PlacementTimer):
    """Calls fn.warm() before every sample, as the CUDA timer does after its flush."""

    warms = 0

    def sample(self, fn, n):
        out = []
        for _ in range(n):
            fn.warm()
            self.warms += 1
            fn()
            out.append(1.0)
        return out


def test_measure_warms_translations_when_asked_even_for_one_placement():
    import torch

    x = torch.arange(100_000, dtype=torch.float32)  # several 64 KiB strides; touch_pages reads them on the CPU
    cfg = TimingConfig(min_samples=5, max_samples=5, target_rse=1e-9, max_time_s=1e9, loop_ms=0, warm_translations=True)
    timer = WarmingTimer()
    out = measure(lambda: x * 2, timer, cfg, inputs=[(x, )])
    assert out["placements"] == 1 and timer.warms == 5
    with pytest.raises(AttributeError):  # without warm_translations a single closure is not wrapped at all
        measure(lambda: x * 2, WarmingTimer(),
                TimingConfig(min_samples=2, max_samples=2, target_rse=1e-9, max_time_s=0.0, loop_ms=0), inputs=[(x, )])


def test_touch_pages_reads_one_element_per_stride_without_copying():
    import torch

    from rooflab.timing import TOUCH_STRIDE_BYTES, tensors_in, touch_pages

    x = torch.zeros(3 * TOUCH_STRIDE_BYTES // 4 + 1)
    touch_pages(x)
    touch_pages(x[::2])  # not contiguous: left alone, no copy
    touch_pages(torch.empty(0))
    assert [t.shape for t in tensors_in(((x, ), {"w": x}, 3.0, None))] == [x.shape, x.shape]
    assert list(tensors_in(None)) == []


def test_a_cpu_cell_records_whether_translations_were_warmed(tmp_path):
    from experiments.measure import run

    out = tmp_path / "cpu" / "vecadd.parquet"
    params = {
        **TINY, "impls": ["builtin"],
        "dtypes": ["float32"],
        "timing": {
            **TINY["timing"], "warm_translations": True,
            "placements": 2
        }
    }
    assert run("vecadd", "cpu", str(out), params, progress=False) == 0
    df = pd.read_parquet(out)
    assert (df["status"] == "ok").all() and df["warm_translations"].all() and (df["placements"] == 2).all()
    assert (df["flush_buffers"] == 0).all()  # the host timer flushes nothing, and says so
    skipped = tmp_path / "cpu" / "saxpy.parquet"  # a cell that is not timed records no warming
    assert run("saxpy", "cpu", str(skipped), {**params, "impls": ["cuda"]}, progress=False) == 0
    assert not pd.read_parquet(skipped)["warm_translations"].any()


def test_cells_of_a_few_microseconds_stop_at_the_looser_target():
    # 3 % jitter: a 5 us cell stops by 'rse' at the 2 % target; the same jitter on 500 us goes on to the 0.5 % one
    def jitter(scale, seed):
        rng = np.random.default_rng(seed)
        return lambda n: scale * (1 + 0.03 * rng.standard_normal(n))

    cfg = TimingConfig(min_samples=10, max_samples=100_000, target_rse=0.005, max_time_s=1e9, instances=1,
                       small_cell_us=20, small_target_rse=0.02)
    small = measure(lambda: None, FakeTimer(jitter(0.005, 0)), cfg, clock=FakeClock())
    large = measure(lambda: None, FakeTimer(jitter(0.5, 0)), cfg, clock=FakeClock())
    assert small["stop_reason"] == large["stop_reason"] == "rse"
    assert small["rse_median"] < 0.02 and large["rse_median"] < 0.005
    assert small["n_samples"] < large["n_samples"] / 4
