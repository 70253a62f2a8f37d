"""scripts/merge_reference.py: one call's results replace its kernels' rows in a reference folder, all or nothing."""
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "merge_reference.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path, index=False)


@pytest.fixture
def folders(tmp_path):
    call, ref = tmp_path / "results" / "raw" / "h200", tmp_path / "reference" / "h200"
    write(call / "rowsum.parquet", [{"gpu": "h200", "kernel": "rowsum", "impl": "triton", "git_sha": "new"}])
    write(call / "profiles.parquet", [{"gpu": "h200", "kernel": "rowsum", "impl": "triton", "n_kernels": 1}])
    write(call / "compiled.parquet", [{"gpu": "h200", "kernel": "rowsum", "num_warps": 8}])
    write(call / "ceilings.parquet", [{"gpu": "h200", "ceiling": "copy", "value": 4.3e12}])
    write(ref / "rowsum.parquet", [{"gpu": "h200", "kernel": "rowsum", "impl": "triton", "git_sha": "old"}])
    write(ref / "profiles.parquet", [{
        "gpu": "h200",
        "kernel": k,
        "impl": "triton",
        "n_kernels": 9
    } for k in ("rowsum", "gelu")])
    write(ref / "compiled.parquet", [{"gpu": "h200", "kernel": k, "num_warps": 4} for k in ("rowsum", "gelu")])
    return tmp_path / "results", tmp_path / "reference"


def test_the_calls_rows_replace_its_kernels_rows_and_keep_the_others(folders):
    results, ref = folders
    r = run(results, "--label", "s9", "--kernels", "rowsum", "--reference-dir", ref)
    assert r.returncode == 0, r.stderr
    assert pd.read_parquet(ref / "h200" / "rowsum.parquet")["git_sha"].tolist() == ["new"]
    prof = pd.read_parquet(ref / "h200" / "profiles.parquet").set_index("kernel")["n_kernels"]
    assert prof.to_dict() == {"gelu": 9, "rowsum": 1}
    comp = pd.read_parquet(ref / "h200" / "compiled.parquet").set_index("kernel")["num_warps"]
    assert comp.to_dict() == {"gelu": 4, "rowsum": 8}
    assert not (ref / "h200" / "ceilings_s9.parquet").exists()  # the call's ceilings go to tuning/, not the DAG's
    assert pd.read_parquet(ref.parent / "tuning" / "ceilings_s9.parquet")["value"].tolist() == [4.3e12]


def test_a_missing_input_writes_nothing(folders):
    results, ref = folders
    (results / "raw" / "h200" / "compiled.parquet").unlink()
    r = run(results, "--label", "s9", "--kernels", "rowsum", "--reference-dir", ref)
    assert r.returncode != 0 and "compiled.parquet is missing" in r.stderr and "Nothing was written" in r.stderr
    assert pd.read_parquet(ref / "h200" / "rowsum.parquet")["git_sha"].tolist() == ["old"]
    assert not (ref / "h200" / "ceilings_s9.parquet").exists() and not (ref.parent / "tuning").exists()


def test_rows_of_another_kernel_or_gpu_are_refused(folders):
    results, ref = folders
    r = run(results, "--label", "s9", "--kernels", "rowsum", "--gpu", "h200", "--reference-dir", ref)
    assert r.returncode == 0
    write(results / "raw" / "h200" / "rowsum.parquet", [{"gpu": "h100", "kernel": "rowsum", "git_sha": "x"}])
    r = run(results, "--label", "s10", "--kernels", "rowsum", "--reference-dir", ref)
    assert r.returncode != 0 and "not only h200" in r.stderr
    write(results / "raw" / "h200" / "rowsum.parquet", [{"gpu": "h200", "kernel": "gelu", "git_sha": "x"}])
    r = run(results, "--label", "s10", "--kernels", "rowsum", "--reference-dir", ref)
    assert r.returncode != 0 and "not rowsum" in r.stderr
    assert pd.read_parquet(ref / "h200" / "rowsum.parquet")["git_sha"].tolist() == ["new"]


def matmul_folders(tmp_path, call_impls, ref_impls):
    """A call that measured matmul's call_impls and a reference with ref_impls (rows, profiles, compiled)."""
    for where, impls, sha, n, warps in (("results/raw", call_impls, "new", 1, 8), ("reference", ref_impls, "old", 9,
                                                                                   4)):
        d = tmp_path / where / "h200"
        write(d / "matmul.parquet", [{"gpu": "h200", "kernel": "matmul", "impl": i, "git_sha": sha} for i in impls])
        write(d / "profiles.parquet", [{"gpu": "h200", "kernel": "matmul", "impl": i, "n_kernels": n} for i in impls])
        write(d / "compiled.parquet", [{"gpu": "h200", "kernel": "matmul", "num_warps": warps}])
    write(tmp_path / "results/raw/h200/ceilings.parquet", [{"gpu": "h200", "ceiling": "copy", "value": 4.3e12}])
    return tmp_path / "results", tmp_path / "reference"


def test_impls_replace_only_those_implementations_rows(tmp_path):
    results, reference = matmul_folders(tmp_path, ("builtin", "triton"), ("naive", "builtin", "compile", "triton"))
    r = run(results, "--label", "s14", "--kernels", "matmul", "--impls", "builtin", "triton", "--reference-dir",
            reference)
    ref = reference / "h200"
    assert r.returncode == 0, r.stderr
    rows = pd.read_parquet(ref / "matmul.parquet").set_index("impl")["git_sha"].to_dict()
    assert rows == {"naive": "old", "compile": "old", "builtin": "new", "triton": "new"}
    prof = pd.read_parquet(ref / "profiles.parquet").set_index("impl")["n_kernels"].to_dict()
    assert prof == {"naive": 9, "compile": 9, "builtin": 1, "triton": 1}
    assert pd.read_parquet(ref / "compiled.parquet")["num_warps"].tolist() == [8]  # triton among them


def test_impls_the_call_did_not_measure_are_refused(folders):
    results, ref = folders
    before = pd.read_parquet(ref / "h200" / "rowsum.parquet")
    r = run(results, "--label", "s9", "--kernels", "rowsum", "--impls", "builtin", "--reference-dir", ref)
    assert r.returncode != 0 and "rowsum.parquet has no rowsum rows of ['builtin']" in r.stderr
    pd.testing.assert_frame_equal(pd.read_parquet(ref / "h200" / "rowsum.parquet"), before)


def test_impls_without_triton_keep_the_compiled_rows(tmp_path):
    results, reference = matmul_folders(tmp_path, ("builtin", ), ("builtin", "triton"))
    r = run(results, "--label", "s15", "--kernels", "matmul", "--impls", "builtin", "--reference-dir", reference)
    ref = reference / "h200"
    assert r.returncode == 0, r.stderr
    assert pd.read_parquet(ref / "compiled.parquet")["num_warps"].tolist() == [4]  # the reference's Triton rows
    rows = pd.read_parquet(ref / "matmul.parquet").set_index("impl")["git_sha"].to_dict()
    assert rows == {"builtin": "new", "triton": "old"}


def test_impls_the_calls_profiles_lack_are_refused(folders):
    results, ref = folders
    write(results / "raw" / "h200" / "rowsum.parquet", [{
        "gpu": "h200",
        "kernel": "rowsum",
        "impl": i,
        "git_sha": "new"
    } for i in ("builtin", "triton")])
    before = pd.read_parquet(ref / "h200" / "profiles.parquet")
    r = run(results, "--label", "s9", "--kernels", "rowsum", "--impls", "builtin", "--reference-dir", ref)
    assert r.returncode != 0 and "profiles.parquet has no rowsum rows of ['builtin']" in r.stderr
    pd.testing.assert_frame_equal(pd.read_parquet(ref / "h200" / "profiles.parquet"), before)


def test_the_calls_ceilings_go_to_the_tuning_dir_given(folders, tmp_path):
    results, ref = folders
    r = run(results, "--label", "s9", "--kernels", "rowsum", "--reference-dir", ref, "--tuning-dir", tmp_path / "t")
    assert r.returncode == 0, r.stderr
    assert pd.read_parquet(tmp_path / "t" / "ceilings_s9.parquet")["value"].tolist() == [4.3e12]
    assert not (ref.parent / "tuning").exists()


def test_a_calls_per_kernel_profiles_and_compiled_files_are_merged(folders):
    """The DAG writes results/raw/<gpu>/profiles/<kernel>.parquet and compiled/<kernel>.parquet, one per kernel:
    the merge reads the merged kernels' files there, into the reference's single profiles.parquet and
    compiled.parquet."""
    results, ref = folders
    raw = results / "raw" / "h200"
    (raw / "profiles.parquet").unlink()
    (raw / "compiled.parquet").unlink()
    write(raw / "profiles" / "rowsum.parquet", [{"gpu": "h200", "kernel": "rowsum", "impl": "triton", "n_kernels": 2}])
    write(raw / "compiled" / "rowsum.parquet", [{"gpu": "h200", "kernel": "rowsum", "num_warps": 16}])
    r = run(results, "--label", "s9", "--kernels", "rowsum", "--reference-dir", ref)
    assert r.returncode == 0, r.stderr
    prof = pd.read_parquet(ref / "h200" / "profiles.parquet").set_index("kernel")["n_kernels"]
    assert prof.to_dict() == {"gelu": 9, "rowsum": 2}
    comp = pd.read_parquet(ref / "h200" / "compiled.parquet").set_index("kernel")["num_warps"]
    assert comp.to_dict() == {"gelu": 4, "rowsum": 16}
    (raw / "compiled" / "rowsum.parquet").unlink()  # a kernel's file missing: nothing written
    r = run(results, "--label", "s10", "--kernels", "rowsum", "--reference-dir", ref)
    assert r.returncode != 0 and "compiled/rowsum.parquet is missing" in r.stderr


def test_the_calls_paired_rounds_replace_the_kernels_and_a_call_without_keeps_them(folders):
    results, ref = folders
    write(results / "raw" / "h200" / "paired" / "rowsum.parquet", [{"gpu": "h200", "kernel": "rowsum", "round": 0}])
    write(ref / "h200" / "paired" / "gelu.parquet", [{"gpu": "h200", "kernel": "gelu", "round": 7}])
    assert run(results, "--label", "s9", "--kernels", "rowsum", "--reference-dir", ref).returncode == 0
    assert pd.read_parquet(ref / "h200" / "paired" / "rowsum.parquet")["round"].tolist() == [0]
    assert pd.read_parquet(ref / "h200" / "paired" / "gelu.parquet")["round"].tolist() == [7]
    (results / "raw" / "h200" / "paired" / "rowsum.parquet").unlink()
    assert run(results, "--label", "s10", "--kernels", "rowsum", "--reference-dir", ref).returncode == 0
    assert pd.read_parquet(ref / "h200" / "paired" / "rowsum.parquet")["round"].tolist() == [0]


def test_paired_rounds_of_another_gpu_write_nothing(folders):
    results, ref = folders
    write(results / "raw" / "h200" / "paired" / "rowsum.parquet", [{"gpu": "h100", "kernel": "rowsum", "round": 0}])
    r = run(results, "--label", "s9", "--kernels", "rowsum", "--reference-dir", ref)
    assert r.returncode != 0 and "Nothing was written" in r.stderr
    assert pd.read_parquet(ref / "h200" / "rowsum.parquet")["git_sha"].tolist() == ["old"]
