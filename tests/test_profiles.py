"""The profiles job on the CPU: the schema of profiles.parquet, and the fusion evidence in its CPU form (naive GeLU
calls several aten ops, F.gelu one)."""
import pandas as pd
import pytest


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    from experiments.profiles import run

    out = tmp_path_factory.mktemp("profiles") / "profiles.parquet"
    run("cpu", ["gelu"], str(out), {
        "size": 32,
        "dtypes": ["float32"],
        "impls": ["naive", "builtin", "triton", "cuda"],
        "interpret_max_size": 64
    })
    return pd.read_parquet(out)


def test_profiles_schema(profiles):
    from experiments.profiles import PROFILE_COLUMNS

    assert list(profiles.columns[:len(PROFILE_COLUMNS)]) == PROFILE_COLUMNS
    assert str(profiles["n_kernels"].dtype) == "Int64" and str(profiles["size"].dtype) == "Int64"
    assert str(profiles["kernel_names"].dtype).startswith("string")
    assert set(profiles["activity"]) == {"cpu_aten"}  # labelled: these are not CUDA kernels
    assert set(profiles["gpu"]) == {"cpu"} and (profiles["size"] == 32).all()


def test_naive_gelu_calls_several_ops_builtin_one(profiles):
    by_impl = profiles.set_index("impl")
    naive, builtin = by_impl.loc["naive"], by_impl.loc["builtin"]
    assert naive["status"] == "ok" and naive["n_kernels"] > 1
    assert naive["n_kernels"] == len(naive["kernel_names"].split("; "))
    assert builtin["status"] == "ok" and builtin["n_kernels"] == 1 and builtin["kernel_names"] == "aten::gelu"


def test_unprofilable_cells_are_rows_with_the_reason(profiles):
    by_impl = profiles.set_index("impl")
    for impl in ("triton", "cuda"):
        assert by_impl.loc[impl, "status"] == "skipped" and by_impl.loc[impl, "error"]
        assert pd.isna(by_impl.loc[impl, "n_kernels"])


def test_a_failing_cell_is_recorded_not_raised():
    from experiments.profiles import profile_cell
    from rooflab.kernel import load_kernel

    kernel = load_kernel("gelu")
    broken = dict(kernel.impls)
    broken["naive"] = lambda inputs: (lambda: 1 / 0)
    kernel_copy = type(kernel)(**{**kernel.__dict__, "impls": broken})
    row = profile_cell(kernel_copy, "naive", "float32", 8, "fwd", "cpu")
    assert row["status"] == "failed" and "ZeroDivisionError" in row["error"]
