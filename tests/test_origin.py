"""Which cells a run measured and which it kept (analysis/origin.py): the paper's \\MeasuredThisRun, so a run of some
kernels says what is new instead of shrinking the paper to them."""
import pandas as pd

from analysis import origin


def rows(gpu, kernel, run, n, day="2026-12-01"):
    return [{"gpu": gpu, "kernel": kernel, "run_id": run, "timestamp": f"{day}T0{i % 9}:00:00"} for i in range(n)]


SOURCES = {"cpu": "results/raw/cpu", "h200": "data/reference/h200"}


def test_a_subset_run_names_its_cells_and_the_kept_ones():
    metrics = pd.DataFrame(
        rows("cpu", "gelu", "b", 4, "2026-12-02") + rows("cpu", "vecadd", "a", 6) + rows("cpu", "softmax", "a", 2) +
        rows("h200", "gelu", "r", 9))
    fresh = origin.freshness(metrics, SOURCES, current_run="b")
    assert fresh == [{
        "gpu": "cpu",
        "run": "b",
        "new": {
            "gelu": 4
        },
        "kept": {
            "softmax": 2,
            "vecadd": 6
        },
        "earlier_runs": 1
    }]  # the reference is no run of this workflow
    assert origin.freshness_sentence(fresh) == ("On cpu, this run measured 4 cells of gelu; 8 cells of 2 kernels "
                                                "(softmax 2, vecadd 6) are kept from 1 earlier run.")
    # without the invocation's run id: the newest run of the device
    assert origin.freshness(metrics, SOURCES)[0]["run"] == "b"
    assert origin.freshness_sentence(origin.freshness(metrics, SOURCES),
                                     this_run=False).startswith("On cpu, the latest run measured 4 cells of gelu;")


def test_a_run_that_reused_every_cell_measured_none_and_a_full_run_every_one():
    metrics = pd.DataFrame(rows("cpu", "gelu", "a", 3) + rows("cpu", "vecadd", "z", 1))
    assert origin.freshness_sentence(origin.freshness(metrics, SOURCES, current_run="c")) == (
        "On cpu, this run measured no cell; 4 cells of 2 kernels (gelu 3, vecadd 1) are kept from 2 earlier runs.")
    full = pd.DataFrame(rows("cpu", "gelu", "c", 3))
    assert origin.freshness_sentence(origin.freshness(
        full, SOURCES, current_run="c")) == ("On cpu, this run measured every cell: 3 cells of gelu.")
    assert origin.freshness(pd.DataFrame(rows("h200", "gelu", "r", 2)), SOURCES, "c") == []
