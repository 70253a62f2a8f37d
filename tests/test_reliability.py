"""Reliability: bad input and faults give clear errors and lose nothing (docs/reliability.md lists the cases).

Faults are injected with a fake kernel (``fake_kernel``) whose implementations compute the right answer, the wrong
one, raise, or hang; ``rooflab.kernel.load_kernel`` is monkeypatched so experiments/measure.py's ``run`` sweeps it
like any registered kernel. Everything runs on the CPU (TRITON_INTERPRET=1 from conftest.py).
"""
from __future__ import annotations

import copy
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from triton.compiler.errors import CompilationError

from rooflab import config as rcfg
from rooflab import io as rio
from rooflab.kernel import ELEMENT_BYTES, Kernel, kernel_names, load_kernel
from rooflab.cell import Cell, _kw, relative_error, run_cell
from rooflab.timing import TimingConfig

REPO = Path(__file__).resolve().parent.parent
FAST_TIMING = {
    "warmup_ms": 1,
    "min_samples": 3,
    "max_samples": 5,
    "target_rse": 0.5,
    "max_time_s": 0.02,
    "flush_l2": False,
    "cudagraph": False,
    "placements": 1,
    "instances": 1
}
# Paired rounds off: these tests count the cells' own calls (tests/test_paired.py covers the rounds' reliability)
PARAMS = {
    "sizes": [8, 16, 24],
    "dtypes": ["float32", "bfloat16"],
    "impls": ["naive", "builtin"],
    "timing": FAST_TIMING,
    "interpret_max_size": 64,
    "seed": 0,
    "allow_failures": False,
    "reuse_cells": True,
    "paired": {
        "enabled": False
    }
}

# ---------------------------------------------------------------------------------------------------- fake kernel


def double(x):
    return x * 2  # the right answer: the reference is 2x in float64


def off_by_one(x):
    return x * 2 + 1  # runs, wrong answer


def hang_on_bfloat16(x):
    if x.dtype == torch.bfloat16:  # the killed-sweep test SIGKILLs the job here
        time.sleep(600)
    return x * 2


def raiser(exc: BaseException):

    def fn(x):
        raise exc

    return fn


def fake_kernel(calls: list | None = None, naive_fn=double, **impls) -> Kernel:
    """A 2x-elementwise kernel; ``impls`` maps impl name -> function of x (default: all three right).
    ``calls`` collects (impl, dtype, size) of every cell whose inputs were built, i.e. every cell measured."""
    behaviour = {"naive": double, "builtin": double, "triton": double, **impls}

    def factory(impl, fn):

        def make(inputs):
            if calls is not None:
                x = inputs[0]
                calls.append((impl, str(x.dtype).removeprefix("torch."), x.shape[0]))
            return lambda: fn(*inputs)

        return make

    def make_inputs(n, dtype, device, seed=0):
        g = torch.Generator(device=device).manual_seed(seed)
        return (torch.randn((n, n), generator=g, device=device).to(dtype), )

    return Kernel(name="fake", description="fault injection", make_inputs=make_inputs,
                  reference=lambda inputs: inputs[0].to(torch.float64) * 2, flops=lambda n: n * n,
                  bytes=lambda n, dtype: 2 * n * n * ELEMENT_BYTES[dtype], impls={
                      k: factory(k, f)
                      for k, f in behaviour.items()
                  }, naive_fn=naive_fn, source=__file__,
                  )


@pytest.fixture
def use_kernel(monkeypatch):
    """use_kernel(k): experiments/measure.run sweeps k whatever kernel name it is given."""
    import rooflab.kernel

    def use(kernel):
        monkeypatch.setattr(rooflab.kernel, "load_kernel", lambda name: kernel)

    return use


def measure_run(out, **overrides):
    from experiments.measure import run

    return run("fake", "cpu", str(out), {**PARAMS, **overrides}, progress=False)


def store_rows(out) -> list[dict]:
    from experiments.measure import cell_store

    return [json.loads(line) for line in cell_store(out).read_text().splitlines()]


# ----------------------------------------------------------------------------------------- invalid configuration


def cpu_config() -> dict:
    return yaml.safe_load((REPO / "config/cpu.yaml").read_text())


@pytest.mark.parametrize("key, value, named", [("sizes", [256, 0], "0 is less than the minimum of 1"),
                                               ("sizes", [256, -5], "-5 is less than the minimum of 1"),
                                               ("sizes", [256, "big"], "'big' is not of type 'integer'"),
                                               ("sizes", [2.5], "2.5 is not of type 'integer'"),
                                               ("sizes", [], "[] should be non-empty"),
                                               ("kernels", [], "[] should be non-empty"),
                                               ("impls", ["naive", "cublas"], "'cublas' is not one of"),
                                               ("dtypes", ["float32", "int8"], "'int8' is not one of"),
                                               ("gpus", ["h900"], "'h900' is not one of"),
                                               ("kernels", ["GeLU"], "'GeLU' does not match"),
                                               ("timing", {
                                                   "target_rse": 0
                                               }, "0 is less than or equal to the minimum of 0"),
                                               ("sweep_size", [256], "'sweep_size' was unexpected"), ])
def test_schema_rejects_bad_value_naming_key_and_value(key, value, named):
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    config = {**cpu_config(), key: value}
    with pytest.raises(WorkflowError) as err:
        validate(copy.deepcopy(config), str(REPO / "config/schema.yaml"))
    msg = str(err.value)
    assert named in msg
    assert f"'{key}'" in msg  # "On instance['sizes'][1]" / "in schema['properties']['sizes']"


@pytest.mark.parametrize("kernels, named", [(["gelu", "no_such_kernel"], "'no_such_kernel'"),
                                            ([], "'kernels' is empty"), ])
def test_resolve_rejects_unknown_or_empty_kernels(kernels, named):
    from snakemake.utils import validate

    config = cpu_config()
    validate(config, str(REPO / "config/schema.yaml"))  # the schema allows the name; resolve checks it exists
    with pytest.raises(rcfg.ConfigError) as err:
        rcfg.resolve({**config, "kernels": kernels})
    assert "'kernels'" in str(err.value) and named in str(err.value)


def test_valid_cpu_config_resolves():
    from snakemake.utils import validate

    config = cpu_config()
    validate(config, str(REPO / "config/schema.yaml"))
    resolved = rcfg.resolve(config)
    assert resolved["kernels"] == kernel_names() and resolved["gpus"] == ["cpu"]


# -------------------------------------------------------------------------------------------- one cell raises


@pytest.mark.parametrize("exc", [
    torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB"),
    AssertionError("x.shape[1] must be a multiple of BLOCK_K"),
    CompilationError("def _k(x_ptr):\n    tl.dot(a, b)\n", None, "dot operands must be 2-D"),
    ValueError("incompatible dimensions"),
], ids=["oom", "assertion", "triton-compile", "value"])
def test_raising_cell_becomes_failed_row(exc):
    row = run_cell(fake_kernel(builtin=raiser(exc)), Cell("fake", "builtin", "float32", 8), "cpu",
                   TimingConfig.from_config(FAST_TIMING))
    assert row["status"] == "failed"
    assert row["error"].startswith(type(exc).__name__) and str(exc).splitlines()[-1] in row["error"]
    assert "Traceback" in row["traceback"]


def test_errors_outside_the_impl_fail_the_cell_only():
    """Input allocation running out of memory, or a kernel declaration that raises: still one failed row."""
    oom = fake_kernel()
    oom.make_inputs = lambda n, dtype, device, seed=0: raiser(torch.cuda.OutOfMemoryError("CUDA out of memory"))(n)
    row = run_cell(oom, Cell("fake", "naive", "float32", 8), "cpu", TimingConfig.from_config(FAST_TIMING))
    assert row["status"] == "failed" and row["error"] == "OutOfMemoryError: CUDA out of memory"

    bad_decl = fake_kernel()
    bad_decl.compute_unit = lambda dtype: {"float32": "fp32"}[dtype]
    row = run_cell(bad_decl, Cell("fake", "naive", "bfloat16", 8), "cpu", TimingConfig.from_config(FAST_TIMING))
    assert row["status"] == "failed" and row["error"] == "KeyError: 'bfloat16'"


def test_failed_cells_fail_the_job_but_keep_the_good_ones(tmp_path, use_kernel, caplog):
    """Default: the sweep finishes, the job exits 1 with a summary, no parquet, good cells kept in the store;
    allow_failures: true then writes the parquet with the failures recorded, re-measuring only the failed cells."""

    failing = {
        8: torch.cuda.OutOfMemoryError("CUDA out of memory"),
        16: AssertionError("bad shape"),
        24: CompilationError("def _k(): pass\n", None, "unsupported")
    }

    def triton_impl(x):
        raise failing[x.shape[0]]

    out = tmp_path / "raw/cpu/fake.parquet"
    calls = []
    use_kernel(fake_kernel(calls, triton=triton_impl))
    impls = ["naive", "builtin", "triton", "cuda"]
    assert measure_run(out, impls=impls) == 1
    assert not out.exists()
    assert "6 cell(s) failed" in caplog.text
    assert "triton float32 16 fwd: AssertionError: bad shape" in caplog.text  # the summary names each cell
    rows = store_rows(out)
    by_status = pd.Series([r["status"] for r in rows]).value_counts().to_dict()
    assert by_status == {"ok": 12, "failed": 6, "skipped": 6}  # every cell written, the failed ones included
    first = {(r["impl"], r["dtype"], r["size"]): r["timestamp"] for r in rows if r["status"] == "ok"}

    calls.clear()
    assert measure_run(out, impls=impls, allow_failures=True) == 0
    assert {c[0] for c in calls} == {"triton"} and len(calls) == 6  # only the failed cells ran again
    df = rio.read_results(out)
    assert len(df) == 24
    failed = df[df.status == "failed"]
    assert len(failed) == 6 and failed["error"].str.match(r"(OutOfMemoryError|AssertionError|CompilationError)").all()
    ok = df[df.status == "ok"]
    assert {(r.impl, r.dtype, r.size): r.timestamp for r in ok.itertuples()} == first


# -------------------------------------------------------------------------------------------------- wrong answer


def test_wrong_answer_is_mismatch_and_kept_out_of_claims(tmp_path, use_kernel):
    from analysis.metrics import compute_metrics
    from analysis.paper_inputs import problems_table
    from figures._common import claimable

    out = tmp_path / "raw/cpu/fake.parquet"
    use_kernel(fake_kernel(builtin=off_by_one))
    assert measure_run(out, dtypes=["float32"]) == 0  # a mismatch is a result, not a failure
    raw = rio.read_results(out)
    bad = raw[raw.impl == "builtin"]
    assert (bad.status == "mismatch").all() and bad["error"].str.contains("exceeds tolerance").all()
    assert bad["median_ms"].isna().all()  # never timed

    m = compute_metrics(raw, pd.DataFrame(columns=rio.CEILING_COLUMNS))
    assert m.loc[m.status == "mismatch", ["speedup_vs_builtin", "speedup_vs_naive", "achieved_gbps"]].isna().all().all()
    # a wrong baseline gives no speedup to anyone
    assert m["speedup_vs_builtin"].isna().all()
    assert (m.loc[m.impl == "naive", "speedup_vs_naive"] == 1.0).all()
    assert set(claimable(m, "cpu")["status"]) == {"ok"} and "builtin" not in set(claimable(m, "cpu")["impl"])
    table = problems_table(m)
    assert table.count("mismatch") == 3 and "exceeds tolerance" in table


def test_nan_output_is_mismatch():
    row = run_cell(fake_kernel(builtin=lambda x: x * float("nan")), Cell("fake", "builtin", "float32", 8), "cpu",
                   TimingConfig.from_config(FAST_TIMING))
    assert row["status"] == "mismatch"


# ------------------------------------------------------------------------------------- torch.compile silent eager


def test_compile_that_never_traced_is_flagged(monkeypatch):
    """torch.compile handing back the eager function (dynamo never ran, no graph): the row says compile_fallback."""
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)
    row = run_cell(fake_kernel(), Cell("fake", "compile", "float32", 8), "cpu", TimingConfig.from_config(FAST_TIMING))
    assert row["status"] == "ok" and row["compile_fallback"] is True


def test_compile_with_dynamo_disabled_is_never_a_silent_ok():
    """TORCHDYNAMO_DISABLE=1 (or config.disable) makes torch.compile run eager without a warning. Newer torch with
    fullgraph=True raises ("found no compiled frames": a failed row); older torch runs eager: flagged."""
    import torch._dynamo

    with torch._dynamo.config.patch(disable=True):
        row = run_cell(fake_kernel(), Cell("fake", "compile", "float32", 8), "cpu",
                       TimingConfig.from_config(FAST_TIMING))
    if row["status"] == "failed":
        assert "no compiled frames" in row["error"] and "disabled" in row["error"]
    else:
        assert row["status"] == "ok" and row["compile_fallback"] is True


def test_compile_with_a_graph_is_not_flagged(monkeypatch):
    import functools

    # the eager backend: dynamo traces a graph (what the probe checks) without Inductor's slow C++ compile
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="eager"))
    row = run_cell(fake_kernel(), Cell("fake", "compile", "float32", 8), "cpu", TimingConfig.from_config(FAST_TIMING))
    assert row["status"] == "ok" and row["compile_fallback"] is False
    assert row["compile_graphs"] == 1  # every input set (placement) after the first hit the guards: no recompile


def test_compile_graph_break_is_a_failed_row_not_silent_eager():

    def untraceable(x):
        print("a graph break under fullgraph=True")
        return x * 2

    row = run_cell(fake_kernel(naive_fn=untraceable), Cell("fake", "compile", "float32", 8), "cpu",
                   TimingConfig.from_config(FAST_TIMING))
    assert row["status"] == "failed" and "Unsupported" in row["error"] and "print" in row["error"]


# -------------------------------------------------------------------------------------------------- wrong device


def test_gpu_not_present_errors_and_writes_nothing(tmp_path, use_kernel):
    from experiments.measure import cell_store, main, run
    from rooflab.device import DeviceMismatch

    if torch.cuda.is_available():
        pytest.skip("checks the CPU box: asking for a GPU that is not there")
    out = tmp_path / "raw/h200/fake.parquet"
    use_kernel(fake_kernel())
    with pytest.raises(DeviceMismatch, match="asked to measure gpu 'h200', but this machine has no CUDA device"):
        run("fake", "h200", str(out), PARAMS, progress=False)
    with pytest.raises(SystemExit) as exited:  # the exit status a shell and a warm worker (rooflab/workers) both see
        main(["--kernel", "fake", "--gpu", "h200", "--out", str(out), "--sizes", "8"])
    assert exited.value.code == 2
    assert not out.exists() and not cell_store(out).exists() and not any(tmp_path.rglob("*"))


# ------------------------------------------------------------------------------------------ killed mid-sweep

DRIVER = """
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
sys.path[:0] = [{repo!r}, {tests!r}]
import rooflab.kernel
import test_reliability as t
rooflab.kernel.load_kernel = lambda name: t.fake_kernel(naive=t.hang_on_bfloat16, builtin=t.hang_on_bfloat16)
from experiments.measure import run
sys.exit(run("fake", "cpu", {out!r}, t.PARAMS, progress=False))
"""


def test_killed_sweep_leaves_no_parquet_and_rerun_measures_only_the_rest(tmp_path, use_kernel):
    from experiments.measure import cell_store

    out = tmp_path / "raw/cpu/fake.parquet"
    store = cell_store(out)
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.format(repo=str(REPO), tests=str(REPO / "tests"), out=str(out)))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 60
        # the 6 float32 cells finish; the first bfloat16 cell hangs: kill the job there
        while not (store.exists() and len(store.read_text().splitlines()) >= 6):
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.time() < deadline, "the sweep did not reach its 6th cell in 60 s"
            time.sleep(0.1)
        time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists() and not list(out.parent.glob("*.parquet"))  # nothing that looks like a result
    killed_rows = store_rows(out)
    assert len(killed_rows) == 6 and {r["dtype"] for r in killed_rows} == {"float32"}
    with open(store, "a") as fh:  # and a line cut by the kill, as when it lands inside a write
        fh.write('{"kernel": "fake", "impl": "naive", "dtype": "bfl')

    calls = []
    use_kernel(fake_kernel(calls))
    assert measure_run(out) == 0
    assert sorted(calls) == sorted((i, "bfloat16", n) for i in ("naive", "builtin") for n in (8, 16, 24))
    df = rio.read_results(out)
    assert len(df) == 12 and (df.status == "ok").all()
    assert df["median_ms"].notna().all()
    kept = {(r["impl"], r["size"]): r["timestamp"] for r in killed_rows}
    assert {(r.impl, r.size): r.timestamp for r in df[df.dtype == "float32"].itertuples()} == kept

    calls.clear()  # the store is still readable after the cut line: a third run measures nothing
    assert measure_run(out) == 0 and calls == []


def test_truncated_store_line_is_measured_again(tmp_path, use_kernel):
    from experiments.measure import cell_store

    out = tmp_path / "raw/cpu/fake.parquet"
    use_kernel(fake_kernel())
    assert measure_run(out, dtypes=["float32"], impls=["naive"]) == 0
    store = cell_store(out)
    text = store.read_text()
    store.write_text(text[:len(text) - 40])  # the last cell's line cut short, no newline
    calls = []
    use_kernel(fake_kernel(calls))
    out.unlink()
    assert measure_run(out, dtypes=["float32"], impls=["naive"]) == 0
    assert calls == [("naive", "float32", 24)]
    assert len(rio.read_results(out)) == 3


# ---------------------------------------------------------------------------------- corrupt or foreign parquet


def test_corrupt_or_foreign_results_name_the_file(tmp_path):
    from analysis.metrics import build

    good = pd.DataFrame([{c: None for c in rio.RAW_COLUMNS} | {"status": "ok"}])
    cases = {
        "garbage.parquet": lambda p: p.write_bytes(b"PAR1 this is not parquet"),
        "empty.parquet": lambda p: p.write_bytes(b""),
        "truncated.parquet": lambda p: (good.to_parquet(p), p.write_bytes(p.read_bytes()[:-20])),
        "foreign.parquet": lambda p: pd.DataFrame({
            "a": [1],
            "b": [2]
        }).to_parquet(p),
        "statuses.parquet": lambda p: good.assign(status="passed").to_parquet(p),
    }
    for name, make in cases.items():
        p = tmp_path / "raw/cpu" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        make(p)
        with pytest.raises(rio.ResultsError, match=str(p)):
            rio.read_results(p)
        with pytest.raises(rio.ResultsError, match=str(p)):  # the analysis reads through it
            build([p], [], str(tmp_path / "metrics.parquet"))
    assert not (tmp_path / "metrics.parquet").exists()


# ------------------------------------------------------------------------- Triton wrappers on awkward inputs


def _transform(inputs, how: str, dtype: str = "float32"):
    """Apply an awkward layout/dtype to every tensor input (1-D ones follow so the shapes stay consistent)."""
    out, first = [], True
    for t in inputs:
        if isinstance(t, torch.Tensor):
            if how == "transposed":
                t = t.t() if t.dim() == 2 else t
            elif how == "strided":
                t = t[:, ::2] if t.dim() == 2 else t[::2]
            elif how == "int32":
                t = (t * 4).to(torch.int32)
            elif how == "mixed_dtype":  # only the first tensor in the other of bfloat16 and float32
                t = t.to(torch.float32 if dtype == "bfloat16" else torch.bfloat16) if first else t
            elif how == "zero_rows":  # only the first tensor loses its rows
                t = t[:0] if first and t.dim() == 2 else t
            first = False
        out.append(t)
    return tuple(out)


TRANSFORMS = ["transposed", "strided", "int32", "mixed_dtype", "zero_rows", "empty"]
# what a refusal of each must say (a regex); None: torch takes empty inputs, so a wrapper must too
REFUSAL = {
    "transposed": "contiguous",
    "strided": "contiguous|inner dimensions",
    "int32": "int32|floating point",
    "mixed_dtype": "dtype",
    "zero_rows": "shape",
    "empty": None
}
KERNEL_PASSES = [(k, p) for k in kernel_names() for p in load_kernel(k).passes if "triton" in load_kernel(k).impls]


@pytest.mark.parametrize("how", TRANSFORMS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name, pass_", KERNEL_PASSES)
def test_triton_wrapper_right_answer_or_clear_error(name, pass_, dtype, how):
    kernel = load_kernel(name)
    if dtype not in kernel.dtypes:
        pytest.skip(f"{name} is not defined for {dtype}")
    if kernel.family == "bhsd":  # its square shape of 16 is 1024 x 16 x 16 x 128: hours under the interpreter
        pytest.skip("attention: tests/test_attention.py checks its refusals and strided inputs at small shapes")
    kw = _kw(kernel, pass_)
    n = 0 if how == "empty" else 16
    inputs = _transform(kernel.make_inputs(n, getattr(torch, dtype), "cpu", 0), how, dtype)
    # fwd+bwd passes go through autograd first, which refuses integer leaves and mismatched shapes itself
    clear = (ValueError, TypeError) if pass_ == "fwd" else (ValueError, TypeError, RuntimeError)
    try:
        out = kernel.impls["triton"](inputs, **kw)()
    except clear as exc:  # says what is wrong, and only where the input is wrong
        assert REFUSAL[how] and re.search(REFUSAL[how], str(exc)), f"{name} {pass_} refused {how} {dtype}: {exc}"
        return
    ref = kernel.reference(inputs, **kw)  # raises if the Triton wrapper accepted inputs torch itself refuses
    tol = kernel.tolerance["bfloat16" if how == "mixed_dtype" else dtype]
    rel, _ = relative_error(out, ref)
    assert rel <= tol, f"{name} {pass_} on {how} {dtype} inputs: relative error {rel:.3g} > {tol:.3g}"


# -------------------------------------------------------------------------------------------- atomic writes


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "raw/cpu/fake.parquet"
    old = pd.DataFrame({"x": [1, 2, 3]})
    rio.write_parquet(old, path)

    def dies_halfway(self, target, **kw):
        Path(target).write_bytes(b"PAR1 half a file")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", dies_halfway)
    with pytest.raises(OSError, match="No space left"):
        rio.write_parquet(pd.DataFrame({"x": [9]}), path)
    monkeypatch.undo()
    pd.testing.assert_frame_equal(pd.read_parquet(path), old)

    with pytest.raises(KeyboardInterrupt):  # interrupted mid-write: same guarantee
        with rio.atomic_path(tmp_path / "notes.txt") as tmp:
            tmp.write_text("half")
            raise KeyboardInterrupt
    rio.write_text("old", tmp_path / "notes.txt")
    monkeypatch.setattr(os, "replace", lambda a, b: (_ for _ in ()).throw(OSError("rename failed")))
    with pytest.raises(OSError, match="rename failed"):
        rio.write_text("new", tmp_path / "notes.txt")
    monkeypatch.undo()
    assert (tmp_path / "notes.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["fake.parquet", "notes.txt"]


def test_atomic_write_gives_the_file_normal_permissions(tmp_path):
    mask = os.umask(0o022)
    try:
        rio.write_text("x", tmp_path / "a.txt")
    finally:
        os.umask(mask)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644  # not mkstemp's 0600


def test_results_from_before_later_columns_still_read(tmp_path):
    """A raw file written before loop_ms/enqueue_us/hold_us/placements existed reads with their defaults there (NaN;
    one placement: the cell was timed on one input set); other gaps still fail."""
    old = pd.DataFrame([{
        c: None
        for c in rio.RAW_COLUMNS
        if c not in rio.LATER_COLUMNS
    } | {
        "status": "ok",
        "median_ms": 0.5
    }])
    p = tmp_path / "old.parquet"
    old.to_parquet(p)
    df = rio.read_results(p)
    for col, default in rio.LATER_COLUMNS.items():
        assert col in df, col
        missing = isinstance(default, float) and np.isnan(default)
        assert df[col].isna().all() if missing else (df[col] == default).all(), col
    assert (df["placements"] == 1).all()
    old.drop(columns=["median_ms"]).to_parquet(p)
    with pytest.raises(rio.ResultsError, match="median_ms"):
        rio.read_results(p)


# ------------------------------------------------------------------------------- the cell store heals itself


def good_store(tmp_path, use_kernel):
    """A finished sweep of the fake kernel (float32, naive, sizes 8/16/24): (parquet, store, its lines)."""
    from experiments.measure import cell_store

    out = tmp_path / "raw/cpu/fake.parquet"
    use_kernel(fake_kernel())
    assert measure_run(out, dtypes=["float32"], impls=["naive"]) == 0
    store = cell_store(out)
    return out, store, store.read_text().splitlines()


def edit_line(line: str, **changes) -> str:
    row = json.loads(line)
    for k, v in changes.items():
        if v is KeyError:
            row.pop(k)
        else:
            row[k] = v
    return json.dumps(row)


BAD_STORE_LINES = {
    "null": lambda line: "null",
    "a list": lambda line: "[1, 2, 3]",
    "a number": lambda line: "42",
    "not JSON": lambda line: "{this is not json",
    "cut by a kill": lambda line: line[:len(line) // 2],
    "no impl": lambda line: edit_line(line, impl=KeyError),
    "no size": lambda line: edit_line(line, size=KeyError),
    "size 'abc'": lambda line: edit_line(line, size="abc"),
    "size 2.5": lambda line: edit_line(line, size=2.5),
    "size -8": lambda line: edit_line(line, size=-8),
    "size true": lambda line: edit_line(line, size=True),
    "impl 7": lambda line: edit_line(line, impl=7),
    "unknown status": lambda line: edit_line(line, status="passed"),
    "another kernel": lambda line: edit_line(line, kernel="gelu"),
    "negative median": lambda line: edit_line(line, median_ms=-123, p20_ms=-124, min_ms=-125),
    "zero median": lambda line: edit_line(line, median_ms=0.0, p20_ms=0.0, min_ms=0.0),
    "NaN median": lambda line: edit_line(line, median_ms=float("nan")),
    "infinite max": lambda line: edit_line(line, max_ms=float("inf")),
    "median as a string": lambda line: edit_line(line, median_ms="0.5"),
    "no median": lambda line: edit_line(line, median_ms=KeyError),
    "p20 above the median": lambda line: edit_line(line, p20_ms=json.loads(line)["median_ms"] * 2),
    "p80 below the median": lambda line: edit_line(line, p80_ms=json.loads(line)["median_ms"] / 2),
    "no samples": lambda line: edit_line(line, n_samples=0),
}


@pytest.mark.parametrize("case", sorted(BAD_STORE_LINES))
def test_bad_store_line_is_quarantined_named_and_measured_again(tmp_path, use_kernel, caplog, case):
    """Nothing in the store is trusted on reuse: a bad line goes to the quarantine file with a one-line warning
    naming the file and line, its cell is measured again, and the parquet holds only good rows."""
    from rooflab.store import quarantine_path

    out, store, lines = good_store(tmp_path, use_kernel)
    lines[1] = BAD_STORE_LINES[case](lines[1])  # the size-16 cell
    store.write_text("\n".join(lines) + "\n")
    out.unlink()
    calls = []
    use_kernel(fake_kernel(calls))
    assert measure_run(out, dtypes=["float32"], impls=["naive"]) == 0
    assert calls == [("naive", "float32", 16)]  # only the bad line's cell, measured again
    warnings = [r.getMessage() for r in caplog.records if r.name == "rooflab.store"]
    assert len(warnings) == 1 and f"{store}:2: " in warnings[0] and "quarantined" in warnings[0]
    q = [json.loads(x) for x in quarantine_path(store).read_text().splitlines()]
    assert len(q) == 1 and q[0]["line"] == 2 and q[0]["text"] == lines[1] and q[0]["problem"]
    df = rio.read_results(out)
    assert len(df) == 3 and (df.status == "ok").all() and (df.median_ms > 0).all()
    calls.clear()  # healed: the next run reuses every cell and warns about nothing
    caplog.clear()
    assert measure_run(out, dtypes=["float32"], impls=["naive"]) == 0 and calls == []
    assert not [r for r in caplog.records if r.name == "rooflab.store"]


def test_reruns_do_not_grow_the_store(tmp_path, use_kernel):
    """Skipped and failed cells are checked again on every run; the store keeps one line per cell."""
    from experiments.measure import cell_store

    out = tmp_path / "raw/cpu/fake.parquet"
    use_kernel(fake_kernel(builtin=raiser(ValueError("bad"))))
    params = dict(dtypes=["float32", "int8"], impls=["naive", "builtin"], allow_failures=True)
    sizes = []
    for _ in range(4):
        assert measure_run(out, **params) == 0
        sizes.append(len(cell_store(out).read_text().splitlines()))
    assert sizes == [12, 12, 12, 12]  # 2 impls x 2 dtypes x 3 sizes, however often it runs
    keys = [(r["impl"], r["dtype"], r["size"]) for r in store_rows(out)]
    assert len(set(keys)) == len(keys)


def test_ok_row_with_an_impossible_time_is_refused_by_the_reader(tmp_path):
    """A raw parquet edited or written by someone else: an ok row without a time > 0 never reaches the metrics."""
    from analysis.metrics import build

    row = {
        c: None
        for c in rio.RAW_COLUMNS
    } | {
        "gpu": "cpu",
        "kernel": "gelu",
        "impl": "naive",
        "dtype": "float32",
        "size": 64,
        "pass": "fwd",
        "status": "ok",
        "median_ms": -123.0
    }
    p = tmp_path / "raw/cpu/gelu.parquet"
    p.parent.mkdir(parents=True)
    pd.DataFrame([row]).to_parquet(p)
    with pytest.raises(rio.ResultsError, match=r"gelu\.parquet: 1 ok row\(s\) without a finite time > 0 .*-123"):
        rio.read_results(p)
    with pytest.raises(rio.ResultsError):
        build([p], [], tmp_path / "metrics.parquet")
    assert not (tmp_path / "metrics.parquet").exists()


# ---------------------------------------------------------------------------------- cells too large for memory


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_cell_too_large_for_memory_is_skipped_up_front(device):
    from rooflab.cell import memory_skip_reason

    reason = memory_skip_reason(48e9, device, free_total=(20e9, 24e9))
    assert reason == f"needs at least 48 GB for its inputs and outputs, but the {device} has 20 GB free of 24 GB"
    assert memory_skip_reason(1e9, device, free_total=(20e9, 24e9)) is None


def test_cell_too_large_for_memory_never_allocates(monkeypatch, use_kernel, tmp_path):
    """A sweep whose largest cell cannot fit: that cell is a skipped row naming the memory; the rest are measured."""
    import rooflab.cell

    calls = []
    use_kernel(fake_kernel(calls))
    # the fake kernel moves 2 n^2 4 bytes in float32: 2048 B at n = 16, 4608 B at n = 24
    monkeypatch.setattr(rooflab.cell, "free_memory_bytes", lambda device: (4000.0, 8000.0))
    out = tmp_path / "raw/cpu/fake.parquet"
    assert measure_run(out, dtypes=["float32"], impls=["naive"], allow_failures=True) == 0
    assert sorted(calls) == [("naive", "float32", 8), ("naive", "float32", 16)]
    df = rio.read_results(out).set_index("size")
    assert df.loc[24, "status"] == "skipped"
    assert "needs at least 4.61e-06 GB" in df.loc[24, "error"] and "4e-06 GB free" in df.loc[24, "error"]


def test_host_memory_is_read():
    from rooflab.cell import free_memory_bytes

    free, total = free_memory_bytes("cpu")
    assert 0 < free <= total


# ------------------------------------------------------------------------------ a job dies with its snakemake

FOLLOWER = """
import sys, time
sys.path.insert(0, {repo!r})
from rooflab.lifeline import follow_snakemake
assert follow_snakemake(interval_s=0.1), "no snakemake ancestor found"
while True:  # a job that would measure and write for ever
    with open({beat!r}, "a") as fh:
        fh.write("x")
    time.sleep(0.05)
"""


def test_kill_9_of_snakemake_ends_its_job(tmp_path):
    """snakemake runs a job's script through a shell; killing snakemake with SIGKILL must not leave the job
    measuring and writing. A stand-in 'snakemake' process starts the job the same way and is killed."""
    beat = tmp_path / "beat"
    job = tmp_path / "job.py"
    job.write_text(FOLLOWER.format(repo=str(REPO), beat=str(beat)))
    # the stand-in: a python whose command line names snakemake, running the job under /bin/sh -c, as snakemake does
    parent = subprocess.Popen([
        sys.executable, "-c", "import subprocess, sys; subprocess.run(sys.argv[1], shell=True)",
        f"{sys.executable} {job}", "snakemake"
    ])
    try:
        deadline = time.time() + 30
        while not (beat.exists() and beat.stat().st_size > 3):
            assert time.time() < deadline, "the job never started"
            time.sleep(0.05)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        time.sleep(1.0)  # the job notices within its interval (0.1 s) and ends
        size = beat.stat().st_size
        time.sleep(0.5)
        assert beat.stat().st_size == size, "the job is still writing after its snakemake was killed"
    finally:
        subprocess.run(["pkill", "-9", "-f", str(job)], check=False)


def test_no_snakemake_ancestor_follows_nothing():
    from rooflab.lifeline import alive, is_snakemake, snakemake_ancestors

    assert alive(os.getpid()) and not alive(2**22 + 1)
    assert not is_snakemake(os.getpid())  # pytest, even from a folder whose name mentions snakemake
    assert all(is_snakemake(pid) for pid in snakemake_ancestors())
    named = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "snakemake"])  # one that is
    try:  # until the child has exec'd, /proc shows the parent's argv: wait for it, up to 10 s
        deadline = time.monotonic() + 10
        while not is_snakemake(named.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert is_snakemake(named.pid)
    finally:
        named.kill()
        named.wait()


def test_a_stalled_cell_writes_every_threads_stack_into_the_log(tmp_path):
    """A cell that outlives the watch leaves in the job's log which cell it was and where each thread stood (a lock
    never released, a build that never ends); one that finishes in time writes nothing."""
    import logging

    from rooflab.lifeline import stall_watch

    logfile = tmp_path / "job.log"
    handler = logging.FileHandler(logfile)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with stall_watch("cell quick", after_s=5.0):
            time.sleep(0.05)
        with stall_watch("cell stuck", after_s=0.2):

            def stuck_here():
                time.sleep(0.7)

            stuck_here()
    finally:
        root.removeHandler(handler)
        handler.close()
    text = logfile.read_text()
    assert "cell quick" not in text
    assert text.count("cell stuck has run") >= 2  # again each after_s while it lasts
    assert "stuck_here" in text and "Thread 0x" in text  # every thread's stack, the stuck one's frame in it


@pytest.mark.parametrize("value, expected", [("90", 90.0), ("", 240.0), ("0", 240.0), ("-5", 240.0), ("soon", 240.0),
                                             ("inf", 240.0)])
def test_the_stall_watchs_period_is_a_positive_number_of_seconds(monkeypatch, value, expected):
    from rooflab.lifeline import _stall_s

    monkeypatch.setenv("ROOFLAB_STALL_S", value)
    assert _stall_s() == expected


def test_a_block_past_its_abort_time_raises_so_the_caller_records_a_failure(tmp_path):
    """abort_s: the stuck block gets StallTimeout (an Exception, not an OSError that file code might swallow) and
    the sweep's own handler records it; the alarm is cleared and the old SIGALRM handler back after the block."""
    import signal

    from rooflab.lifeline import StallTimeout, stall_watch

    before = signal.getsignal(signal.SIGALRM)
    t0 = time.monotonic()
    with pytest.raises(StallTimeout, match="cell stuck ran past 0 s"):
        with stall_watch("cell stuck", after_s=5.0, abort_s=0.3):
            while time.monotonic() - t0 < 5:
                time.sleep(0.01)
    assert time.monotonic() - t0 < 2 and not issubclass(StallTimeout, OSError)
    assert signal.getsignal(signal.SIGALRM) is before and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    with stall_watch("cell quick", after_s=5.0, abort_s=0.3):  # finishes in time: nothing raised later
        pass
    time.sleep(0.5)


def test_a_block_that_never_comes_back_to_python_is_recorded_and_ends_the_process(tmp_path):
    """exit_s: a block still running past it (here a sleep, which releases the interpreter as a wait on the GPU
    does, and which StallTimeout cannot interrupt) has its stacks logged, on_exit records it, and the process ends
    with STALL_EXIT at once, not after the block."""
    import subprocess
    import sys

    from rooflab.lifeline import STALL_EXIT

    marker = tmp_path / "hung.txt"
    script = f"""
import logging, time
from rooflab.lifeline import stall_watch
logging.basicConfig(filename={str(tmp_path / 'job.log')!r})
with stall_watch("cell stuck", after_s=0.2, exit_s=0.5, on_exit=lambda: open({str(marker)!r}, "w").write("hung")):
    time.sleep(30)
print("not reached")
"""
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=25)
    assert done.returncode == STALL_EXIT and time.monotonic() - t0 < 20
    assert "not reached" not in done.stdout and marker.read_text() == "hung"
    text = (tmp_path / "job.log").read_text()
    assert "cell stuck has run" in text and "exits with status 75" in text and "Thread 0x" in text
    assert (tmp_path / "job.stalled.log").read_text() == text  # a copy the retry's Snakemake does not delete


def test_a_cell_that_hung_is_not_run_again_and_stays_failed(tmp_path, use_kernel, caplog):
    """A cell the stall watch recorded as hung (store.hung_row, written as its process exited) is reused as failed,
    with its error and a warning, not measured again (it would hang again); the sweep's other cells are reused."""
    from experiments.measure import cell_store
    from rooflab import store
    from rooflab.cell import Cell

    out = tmp_path / "raw/cpu/fake.parquet"
    use_kernel(fake_kernel())
    assert measure_run(out, dtypes=["float32"], impls=["naive"]) == 0
    path = cell_store(out)
    identity = store_rows(out)[0]["_identity"]
    cell = Cell("fake", "naive", "float32", 16, shape=(16, 16))
    row = store.hung_row(cell, "fake", "hung: cell naive float32 16x16 fwd ran past 720 s", _identity=identity)
    assert store.row_problem(row, "fake") is None and store.cell_key(row) == cell.key
    with open(path, "a") as fh:
        fh.write(json.dumps(row) + "\n")
    calls = []
    use_kernel(fake_kernel(calls))
    out.unlink()
    assert measure_run(out, dtypes=["float32"], impls=["naive"]) == 1  # a failed cell: no parquet unless allowed
    assert calls == [] and "hung in an earlier run and is not run again" in caplog.text
    assert measure_run(out, dtypes=["float32"], impls=["naive"], allow_failures=True) == 0 and calls == []
    df = rio.read_results(out)
    hung = df[df["size"] == 16]
    assert list(hung.status) == ["failed"] and hung.error.iloc[0].startswith("hung:")
    assert (df[df["size"] != 16].status == "ok").all() and store.HUNG not in df.columns


def test_a_gpu_sweep_arms_the_hard_stop_and_its_record_is_what_the_retry_reuses(tmp_path, use_kernel, monkeypatch):
    """The wiring in experiments/measure.run: on the CPU no watch may end the process (exit_s None: a shared
    worker); on a GPU every cell's watch has exit_s and an on_exit that writes the cell's hung row (with the run's
    provenance) and the resume marker, and the retry, even under reuse_cells: false, reuses that row unmeasured."""
    import contextlib

    import rooflab.lifeline
    import rooflab.timing
    from experiments import measure as job

    watched = []

    @contextlib.contextmanager
    def recorder(what, **kw):
        watched.append((what, kw))
        yield

    monkeypatch.setattr(rooflab.lifeline, "stall_watch", recorder)
    out = tmp_path / "raw/cpu/fake.parquet"
    use_kernel(fake_kernel())
    assert measure_run(out, dtypes=["float32"], impls=["naive"]) == 0
    assert watched and all(kw.get("exit_s") is None for _, kw in watched)

    watched.clear()  # the same sweep as a GPU job would run it (its cells fail here: no CUDA; none hangs)
    cpu_timer = rooflab.timing.timer_for("cpu", rooflab.timing.TimingConfig.from_config(PARAMS["timing"]))
    monkeypatch.setattr(job, "check_device", lambda gpu: ("cuda", 0.0))
    monkeypatch.setattr(rooflab.timing, "timer_for", lambda device, timing: cpu_timer)
    monkeypatch.setattr(job, "start_cuda_builds", lambda gpu: None)
    job.run("fake", "cpu", str(out), {
        **PARAMS, "dtypes": ["float32"],
        "impls": ["naive"],
        "reuse_cells": False
    }, progress=False)
    cells = [(what, kw) for what, kw in watched if what.startswith("cell ")]
    assert cells and all(kw["exit_s"] == 3 * rooflab.lifeline.STALL_S for _, kw in cells)
    what, kw = next((w, k) for w, k in cells if "8x8" in w)
    kw["on_exit"]()  # what the watch's thread does as it stops the process
    assert job.resume_marker(job.cell_store(out)).exists()
    hung = store_rows(out)[-1]
    assert hung["_hung"] and hung["error"].startswith(f"hung: {what}") and hung["run_id"] and hung["git_sha"]

    monkeypatch.undo()  # the retry, on the CPU again, with the stores it must not delete
    calls = []
    use_kernel(fake_kernel(calls))
    assert measure_run(out, dtypes=["float32"], impls=["naive"], reuse_cells=False, allow_failures=True) == 0
    assert calls == [("naive", "float32", 16), ("naive", "float32", 24)]  # failed on the "GPU": measured again
    assert not job.resume_marker(job.cell_store(out)).exists()
    df = rio.read_results(out)
    assert df.set_index("size").status.to_dict() == {8: "failed", 16: "ok", 24: "ok"}
