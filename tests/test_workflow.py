"""Exact reruns of the DAG, checked on a copy of the repository with a tiny CPU sweep (about two minutes).

One real run of `all`, then dry runs after each kind of change: a kernel edit reruns that kernel's jobs and the
cross-kernel ones only, a figure script edit redraws the jobs drawing that figure and rebuilds the paper only, a bare
`touch` does nothing, a fresh clone needs `snakemake --touch` once, a config change reruns the measurement jobs,
which then measure only the new cells, and a run of some kernels keeps every other kernel in the results.
"""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TINY = {
    "gpus": ["cpu"],
    "kernels": ["gelu", "vecadd"],
    "impls": ["naive", "builtin", "triton"],
    "dtypes": ["float32"],
    "sizes": [64],
    "extra_sizes": [],
    "interpret_max_size": 64,
    "timing": {
        "warmup_ms": 1,
        "min_samples": 3,
        "max_samples": 5,
        "max_time_s": 0.01
    },
    "ceilings": {
        "copy_bytes": 1048576,
        "gemm_sizes": [64]
    },
    "profile": {
        "size": 64
    },
}


def copy_repo(dest: Path) -> Path:
    """What a clone would hold plus the untracked files not ignored (work in progress), with fresh mtimes."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest / rel)
            shutil.copymode(src, dest / rel)
    return dest


def snakemake(workdir: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {
        **os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "TRITON_INTERPRET": "1"
    }
    env.pop("ROOFLAB_RUN_ID", None)  # each invocation is a run of its own (a test may have set one in this process)
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=timeout)


def planned_jobs(workdir: Path, *args: str) -> list[dict]:
    """The jobs of a dry run: rule, outputs and reason of each."""
    res = snakemake(workdir, "-n", "--configfile", "tiny.yaml", *args)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout + res.stderr
    jobs = []
    for m in re.finditer(r"^(?:local)?rule (\w+):\n((?:    .*\n?)+)", out, flags=re.M):
        fields = dict(re.findall(r"^    (\w+): (.*)$", m.group(2), flags=re.M))
        # outputs are update() (kept while their job runs): the dry run marks them so; the paths are what we compare
        jobs.append({
            "rule": m.group(1),
            "output": [o.removesuffix(" (update)") for o in fields.get("output", "").split(", ")],
            "reason": fields.get("reason", "")
        })
    if not jobs:
        assert "Nothing to be done" in out, out
    return jobs


def outputs(jobs, rule):
    return sorted(o for j in jobs if j["rule"] == rule for o in j["output"])


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    work = copy_repo(tmp_path_factory.mktemp("rooflab"))
    (work / "tiny.yaml").write_text(json.dumps(TINY))  # JSON is YAML
    res = snakemake(work, "--cores", "2", "all", "--configfile", "tiny.yaml", timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    assert "rooflab: finished" in res.stdout + res.stderr  # the one-screen summary of `all`
    return work


def test_all_builds_every_artefact(repo):
    """`all` from scratch: raw and metrics parquet, every figure as PDF and PNG, executed notebooks, the paper."""
    results = repo / "results"
    for name in ("raw/cpu/gelu.parquet", "raw/cpu/vecadd.parquet", "raw/cpu/ceilings.parquet", "metrics.parquet",
                 "notebooks/cpu/gelu.ipynb", "notebooks/cpu/gelu.html", "paper/generated/macros.tex"):
        assert (results / name).stat().st_size > 0, name
    pdfs = sorted((results / "figures").rglob("*.pdf"))
    assert pdfs and all(p.with_suffix(".png").stat().st_size > 0 for p in pdfs)
    if shutil.which("latexmk") and shutil.which("pdflatex"):
        pdf = results / "paper" / "rooflab.pdf"
        assert pdf.read_bytes()[:5] == b"%PDF-"
        log = (repo / "logs" / "paper" / "latexmk.log").read_text(errors="replace")
        assert "LaTeX Warning: File" not in log, "a figure the paper includes is missing"
    else:  # no TeX engine: the sources are packed and the user is told how to build the PDF elsewhere
        assert "latexmk" in (results / "paper" / "BUILD_THE_PDF_ELSEWHERE.txt").read_text()


def test_rerun_plans_nothing(repo):
    assert planned_jobs(repo) == []


def test_a_dry_run_names_one_measure_slot_per_gpu(repo):
    """What run.sh gives a simulated 4-GPU node (rooflab/slots.py), a dry run says; one slot says nothing."""
    args = subprocess.run(["bash", "run.sh", "dag-args"], cwd=repo, capture_output=True, text=True, check=True, env={
        **os.environ, "ROOFLAB_SIMULATE_GPUS": "4",
        "PYTHON": sys.executable
    }).stdout.split()
    assert args[:2] == ["--resources", "measure_slot=4"], args
    res = snakemake(repo, "all", "-n", "--configfile", "tiny.yaml", *args)
    assert res.returncode == 0 and "rooflab: measure_slot=4:" in res.stderr, res.stdout + res.stderr
    one = snakemake(repo, "all", "-n", "--configfile", "tiny.yaml", "--resources", "measure_slot=1", "--cores", "2")
    assert one.returncode == 0 and "rooflab: measure_slot" not in one.stderr, one.stderr


def test_traffic_is_profiled_on_a_gpu_and_only_when_enabled(repo):
    """Rule traffic (Nsight Compute, experiments/traffic.py) is off by default, never on the CPU, and when on, the
    paper reads its table instead of the committed reference's."""
    enabled = ("--config", 'traffic={"enabled": true}')
    assert "traffic" not in {j["rule"] for j in planned_jobs(repo, *enabled)}  # the CPU: nothing to profile
    gpu = planned_jobs(repo, *enabled, 'gpus=["h200"]')
    assert outputs(gpu, "traffic") == [
        "results/raw/h200/traffic.csv", "results/raw/h200/traffic_calls.json", "results/raw/h200/traffic_ncu.csv"
    ]
    assert "traffic" not in {j["rule"] for j in planned_jobs(repo, "--config", 'gpus=["h200"]')}


def job_names(jobs) -> set[str]:
    """rule[output] of every job but `all`: enough to tell whose job it is."""
    return {f"{j['rule']}[{' '.join(j['output'])}]" for j in jobs if j["rule"] != "all"}


CODE_EDIT = "\n\ndef _an_edit():\n    return 1\n"  # code: the kernel's stamp (rules/common.smk code_stamp) changes


def test_kernel_edit_reruns_that_kernels_jobs_and_the_cross_kernel_ones_only(repo):
    kernel = repo / "kernels/gelu/__init__.py"
    original = kernel.read_text()
    kernel.write_text(original + CODE_EDIT)
    try:
        jobs = planned_jobs(repo)
    finally:
        kernel.write_text(original)
    assert sorted(outputs(jobs, "measure_host")) == [  # one job, its profile, compiled facts and paired rounds too
        f"results/raw/cpu/{sub}gelu.parquet" for sub in ("compiled/", "", "paired/", "profiles/")
    ]
    assert outputs(jobs, "metrics_kernel") == ["results/metrics/cpu/gelu.parquet"]
    assert outputs(
        jobs, "figures_kernel") == ["results/figures/cpu/bandwidth/gelu.pdf", "results/figures/cpu/bandwidth/gelu.png"]
    assert outputs(jobs, "notebook") == ["results/notebooks/cpu/gelu.html", "results/notebooks/cpu/gelu.ipynb"]
    assert not outputs(jobs, "ceilings")
    # the rest is cross-kernel: the metrics table, the CPU's device figures and the paper, nothing of vecadd or h200
    assert outputs(jobs, "figure_gpu") and all(
        o.startswith("results/figures/cpu/") for o in outputs(jobs, "figure_gpu"))
    rules = {j["rule"] for j in jobs} - {"measure_host", "metrics_kernel", "figures_kernel", "notebook"}
    assert rules <= {
        "all", "metrics", "figure_gpu", "paired_verdicts", "paper_inputs", "paper_verdicts", "paper_pdf",
        "paper_sources", "projection_check", "aa_floors", "shapes_table", "paper_shapes", "figure_shapes"
    }, rules  # every one across kernels (aa_floors: the run's A/A floors, which the run-level tables apply)
    assert {"metrics", "paper_inputs"} <= rules
    assert not [j for j in job_names(jobs) if "vecadd" in j or "h200" in j], job_names(jobs)
    # the same content again (a newer mtime): checksums say nothing changed
    assert planned_jobs(repo) == []


def test_a_launch_table_edit_remeasures_that_kernel_only(repo):
    """A kernel's job takes its folder and the shared modules it imports (rooflab/kernel.kernel_code): retuning
    gelu's table re-measures gelu alone; the elementwise helpers only vecadd imports re-measure vecadd alone."""
    for rel, kernel in (("kernels/gelu/table.py", "gelu"), ("kernels/_shared/elementwise.py", "vecadd")):
        path = repo / rel
        original = path.read_text()
        path.write_text(original + CODE_EDIT)
        try:
            jobs = planned_jobs(repo)
        finally:
            path.write_text(original)
        measured = outputs(jobs, "measure_host")
        assert "results/raw/cpu/gelu.parquet" in measured or kernel != "gelu", (rel, jobs)
        assert {Path(o).stem for o in measured} == {kernel}, (rel, measured)
    assert planned_jobs(repo) == []


def test_a_comment_or_docstring_edit_measures_nothing(repo):
    # the measurement code every job takes: nothing at all reruns
    path = repo / "rooflab/timing.py"
    original = path.read_text()
    path.write_text(original.replace('"""', '"""An edited docstring. ', 1) + "\n# an edited comment\n")
    try:
        assert planned_jobs(repo) == []
    finally:
        path.write_text(original)
    # a kernel: no measurement, no analysis, no figure; the paper, which quotes its file (description, the naive
    # expression's traffic comments), is rebuilt
    path = repo / "kernels/gelu/__init__.py"
    original = path.read_text()
    path.write_text(original.replace('"""', '"""An edited docstring. ', 1) + "\n# an edited comment\n")
    try:
        jobs = planned_jobs(repo)
    finally:
        path.write_text(original)
    assert jobs and {j["rule"] for j in jobs} <= {"paper_inputs", "paper_pdf", "paper_sources", "all"}, jobs
    assert planned_jobs(repo) == []


def test_a_code_edit_in_any_module_the_paper_imports_rebuilds_it(repo):
    """The paper's inputs are the modules analysis/paper_inputs.py imports, found from the source (a module a hand
    list once missed: analysis/baselines.py): a code edit there rebuilds the paper and nothing else."""
    path = repo / "analysis/baselines.py"
    original = path.read_text()
    path.write_text(original + "\nEDITED = 1\n")
    try:
        jobs = planned_jobs(repo)
    finally:
        path.write_text(original)
    assert "paper_inputs" in {j["rule"] for j in jobs}, jobs
    assert {j["rule"] for j in jobs} <= {"paper_inputs", "paper_pdf", "paper_sources", "all"}, jobs


def test_figure_edit_redraws_that_figure_and_the_paper_only(repo):
    script = repo / "figures/roofline.py"
    original = script.read_text()
    script.write_text(original + "\n# an edit\n")
    try:
        jobs = planned_jobs(repo)
    finally:
        script.write_text(original)
    figure_jobs = [j for j in jobs if j["rule"].startswith("figure")]
    others = {j["rule"] for j in jobs} - {j["rule"] for j in figure_jobs} - {"all"}
    assert figure_jobs and others and all(r.startswith("paper") for r in others), jobs
    # that figure of each GPU (the CPU's and the reference's), no other figure
    assert sorted(o for j in figure_jobs for o in j["output"]
                  if o.endswith(".pdf")) == ["results/figures/cpu/roofline.pdf",
                                             "results/figures/h200/roofline.pdf"], figure_jobs
    assert planned_jobs(repo) == []


def test_bare_touch_reruns_nothing(repo):
    # input: files are compared by checksum; a rule's script: file (analysis/metrics.py) would rerun on mtime
    for rel in ("kernels/vecadd/__init__.py", "figures/_common.py", "paper/main.tex", "notebooks/kernel.ipynb"):
        os.utime(repo / rel)
    assert planned_jobs(repo) == []


def test_fresh_clone_needs_touch_once(repo, tmp_path):
    """A clone gives every source a new mtime: restored results look stale until `snakemake --touch`."""
    clone = copy_repo(tmp_path)
    shutil.copy(repo / "tiny.yaml", clone)
    shutil.copytree(repo / "results", clone / "results", copy_function=shutil.copy2)  # old mtimes, as restored
    assert outputs(planned_jobs(clone), "measure_host"), "a fresh clone should look out of date"
    res = snakemake(clone, "--touch", "--cores", "1", "--configfile", "tiny.yaml")
    assert res.returncode == 0, res.stderr[-3000:]
    assert planned_jobs(clone) == []
    # and real edits are still seen afterwards
    (clone / "kernels/vecadd/__init__.py").write_text((clone / "kernels/vecadd/__init__.py").read_text() + CODE_EDIT)
    assert "results/raw/cpu/vecadd.parquet" in outputs(planned_jobs(clone), "measure_host")


def test_a_subset_run_keeps_every_other_kernel(repo):
    """`--config kernels=[gelu]` measures gelu only: vecadd's results, figures and notebook stay as they are (no rule
    makes them in that run), and the metrics, the figures and the paper still cover both kernels, the paper saying
    which cells this run measured and which it kept."""
    import pandas as pd

    subset = ("--config", 'kernels=["gelu"]')
    assert planned_jobs(repo, *subset) == []  # after a full run a subset has nothing to redo
    kept = [
        repo / p for p in ("results/raw/cpu/vecadd.parquet", "results/raw/cpu/profiles/vecadd.parquet",
                           "results/metrics/cpu/vecadd.parquet", "results/figures/cpu/bandwidth/vecadd.png",
                           "results/notebooks/cpu/vecadd.html")
    ]
    before = {p: p.stat().st_mtime_ns for p in kept}
    (repo / "results/raw/cpu/.cells/gelu.jsonl").unlink()  # so this run measures gelu's cells anew
    res = snakemake(repo, "--cores", "2", "all", "--configfile", "tiny.yaml", *subset, "--forcerun", "measure_host")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    ran = re.findall(r"^(?:local)?rule (\w+):\n(?:    .*\n)*?    wildcards: (.*)$", res.stdout + res.stderr, re.M)
    assert ("measure_host", "gpu=cpu, kernel=gelu") in ran and not [r for r in ran if "vecadd" in r[1]], ran
    assert {p: p.stat().st_mtime_ns for p in kept} == before
    metrics = pd.read_parquet(repo / "results/metrics.parquet")
    assert set(metrics.loc[metrics["gpu"] == "cpu", "kernel"]) == {"gelu", "vecadd"}
    assert metrics.loc[metrics["gpu"] == "h200", "kernel"].nunique() > 2  # the reference: every kernel it holds
    macros = (repo / "results/paper/generated/macros.tex").read_text()
    fresh = re.search(r"\\newcommand\{\\MeasuredThisRun\}\{(.*)\}  %", macros).group(1)
    n_gelu, n_vecadd = ((metrics["gpu"] == "cpu") & (metrics["kernel"] == k) for k in ("gelu", "vecadd"))
    assert fresh == (f"On cpu, this run measured {n_gelu.sum()} cells of gelu; {n_vecadd.sum()} cells of vecadd are "
                     "kept from 1 earlier run."), fresh
    assert "vecadd" in (repo / "results/paper/generated/cpu.tex").read_text()
    assert planned_jobs(repo) == []  # and the full configuration finds everything up to date


def test_config_change_measures_only_new_cells(repo):
    import pandas as pd

    sizes = ["--config", "sizes=[32,64]"]
    jobs = planned_jobs(repo, *sizes)
    assert [o for o in outputs(jobs, "measure_host")
            if o.count("/") == 3] == ["results/raw/cpu/gelu.parquet", "results/raw/cpu/vecadd.parquet"]
    assert all("params" in j["reason"].lower() for j in jobs if j["rule"] == "measure_host"), jobs
    assert not outputs(jobs, "ceilings")  # its params did not change

    store = repo / "results/raw/cpu/.cells/gelu.jsonl"
    before = len(store.read_text().splitlines())
    res = snakemake(repo, "--cores", "2", "results/raw/cpu/gelu.parquet", "results/raw/cpu/vecadd.parquet",
                    "--configfile", "tiny.yaml", *sizes)
    assert res.returncode == 0, res.stderr[-3000:]
    df = pd.read_parquet(repo / "results/raw/cpu/gelu.parquet")
    assert sorted(df["size"].unique()) == [32, 64]
    # each cell measured once: the size-64 cells came from the store, only the size-32 ones were appended
    assert len(store.read_text().splitlines()) == len(df) == 2 * before
    assert re.search(rf"{before} of {len(df)} cells", (repo / "logs/measure/cpu/gelu.log").read_text())
    # back to the tiny configuration for the tests after this one (measured again: its profiles are rewritten too)
    res = snakemake(repo, "--cores", "2", "all", "--configfile", "tiny.yaml")
    assert res.returncode == 0, res.stderr[-3000:]
    assert planned_jobs(repo) == []


def test_reference_comparison_joins_all_when_a_reference_exists(repo):
    """With data/reference/cpu present (here: this run's own results, copied), `all` plans compare_reference; its
    report finds no cell moved beyond noise except the noisy ones, and names what it compared."""
    ref = repo / "data/reference/cpu"
    try:
        ref.mkdir(parents=True)
        for name in ("gelu", "vecadd", "ceilings"):
            shutil.copy(repo / f"results/raw/cpu/{name}.parquet", ref)
        jobs = planned_jobs(repo)
        assert outputs(jobs, "compare_reference") == ["results/compare/cpu.csv", "results/compare/cpu.md"]
        res = snakemake(repo, "--cores", "1", "results/compare/cpu.md", "--configfile", "tiny.yaml")
        assert res.returncode == 0, res.stderr[-3000:]
        md = (repo / "results/compare/cpu.md").read_text()
        assert md.startswith("# cpu: this run against data/reference/cpu")
        import pandas as pd

        table = pd.read_csv(repo / "results/compare/cpu.csv")
        timed = table[table["status_now"] == "ok"]
        # nothing moved; a cell whose floor is too wide to see a regression (the host's noisy short cells) is not
        # comparable rather than the same, never slower or faster. Which cells the host's noise leaves comparable
        # varies from run to run: each verdict must follow its own floor (max_floor_*: 5-10 %, rooflab/verdicts.py)
        from rooflab.verdicts import VerdictRules

        rules = VerdictRules()
        widest, narrowest = max(rules.max_floor(c)
                                for c in ("short", "middle",
                                          "long")), min(rules.max_floor(c) for c in ("short", "middle", "long"))
        assert len(timed) and (timed["rel_change"] == 0).all()
        assert set(timed["verdict"]) <= {"same", "not comparable"}
        assert (timed.loc[timed["verdict"] == "same", "noise"] <= widest).all()
        assert (timed.loc[timed["verdict"] == "not comparable", "noise"] > narrowest).all()
    finally:
        shutil.rmtree(repo / "data/reference/cpu", ignore_errors=True)
        shutil.rmtree(repo / "results/compare", ignore_errors=True)
    assert planned_jobs(repo) == []


def test_failed_rerun_keeps_the_last_good_outputs(repo):
    """A rerun whose job fails (here gelu's metrics job, on a raw file it cannot read) leaves the last good
    results/metrics/cpu/gelu.parquet in place, byte for byte (outputs are update(): snakemake restores them on
    failure), and the restored file does not pass for up to date: the next run redoes that job."""
    raw = repo / "results/raw/cpu/gelu.parquet"
    metrics = repo / "results/metrics/cpu/gelu.parquet"
    good_raw, good_metrics = raw.read_bytes(), metrics.read_bytes()
    stat = raw.stat()
    try:
        raw.write_bytes(b"PAR1 not a parquet file")
        res = snakemake(repo, "--cores", "1", "results/metrics.parquet", "--configfile", "tiny.yaml")
        assert res.returncode != 0
        assert "Restored previous version of results/metrics/cpu/gelu.parquet" in res.stdout + res.stderr
        assert metrics.read_bytes() == good_metrics
    finally:  # the raw file as it was, its mtime too: only the failed job's own output can make it rerun
        raw.write_bytes(good_raw)
        os.utime(raw, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert "metrics_kernel" in {j["rule"] for j in planned_jobs(repo)}  # the failed job is redone, not taken as done
    res = snakemake(repo, "--cores", "1", "all", "--configfile", "tiny.yaml")
    assert res.returncode == 0, res.stderr[-3000:]
    assert planned_jobs(repo) == []


def test_sdpa_backends_are_measured_on_a_gpu_and_only_when_enabled(repo):
    """Rule backends (experiments/backends.py: ours beside each SDPA backend) is off by default and never on the
    CPU; on a GPU with backends.enabled it runs with the config's shapes, and the paper reads its table."""
    enabled = ("--config", 'backends={"enabled": true, "shapes": [[2, 4, 512, 64]]}')
    assert "backends" not in {j["rule"] for j in planned_jobs(repo, *enabled)}
    gpu = planned_jobs(repo, *enabled, 'gpus=["h200"]')
    assert outputs(gpu, "backends") == ["results/raw/h200/backends.parquet"]
    assert any(j["rule"] == "paper_inputs" for j in gpu)
    assert "backends" not in {j["rule"] for j in planned_jobs(repo, "--config", 'gpus=["h200"]')}
    res = snakemake(repo, "results/raw/h200/backends.parquet", "-n", "-p", "--configfile", "tiny.yaml", *enabled,
                    'gpus=["h200"]')
    command = "experiments.backends --gpu h200 --shapes 2x4x512x64 --causal true false"
    assert res.returncode == 0 and command in res.stdout, res.stdout + res.stderr


def test_a_shape_set_alone_on_a_new_gpu_draws_no_device_figure(repo):
    """A GPU with no square results (no reference either) measured for a shape set only: its shape rows are
    analysed, and no device figure is asked for (it would be drawn from no metrics and fail)."""
    jobs = planned_jobs(repo, "--config", 'gpus=["h100"]', "shapes=[llm]", 'kernels=["matmul"]')
    assert any(o.startswith("results/raw/h100/shapes/llm/") for o in outputs(jobs, "measure_shapes"))
    assert not [o for o in outputs(jobs, "figure_gpu") if "/h100/" in o]


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A copy of the repository that nothing has run in: enough for dry runs."""
    work = copy_repo(tmp_path_factory.mktemp("clone"))
    (work / "tiny.yaml").write_text(json.dumps(TINY))
    return work


def test_every_shell_rule_runs_under_snakemakes_interpreter(clone):
    """With nothing of the environment on PATH (it is not activated), every shell rule's command calls the
    interpreter that runs snakemake, never a `python` or `python3` from PATH: the notebooks, the shape sets'
    metrics and figure, traffic, the ablations, the SDPA backends and Nsight Compute."""
    env = {**os.environ, "PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1"}
    env.pop("ROOFLAB_RUN_ID", None)
    on = '{"enabled": true}'
    res = subprocess.run([
        sys.executable, "-m", "snakemake", "all", "-n", "-p", "--configfile", "tiny.yaml", "--config",
        'gpus=["cpu", "h200"]', "shapes=[square, odd]", f"traffic={on}", f"ablations={on}", f"backends={on}",
        f"ncu={on}"
    ], cwd=clone, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    calls = re.findall(r"(\S*python3?) (?:-m )?(\S+)", res.stdout)
    scripts = {script for _, script in calls}
    for script in ("notebooks/render.py", "analysis.metrics", "figures.shapes", "analysis.shapes",
                   "experiments.traffic", "experiments.ablations", "experiments.backends", "experiments/ncu_cell.py"):
        assert script in scripts, f"no shell command runs {script}"
    assert {python for python, _ in calls} == {sys.executable}, sorted(set(calls))


def test_under_conda_a_rule_runs_its_envs_python():
    from types import SimpleNamespace

    from snakemake_interface_executor_plugins.settings import DeploymentMethod

    from rooflab.run_control import shell_python

    def workflow(*methods):
        return SimpleNamespace(deployment_settings=SimpleNamespace(deployment_method=frozenset(methods)))

    assert shell_python(workflow()) == sys.executable
    assert shell_python(workflow(DeploymentMethod.CONDA)) == "python"


def test_common_smk_holds_input_functions_only():
    """What the run does around its jobs (code stamps written, compile lanes started and stopped, restored outputs
    outdated, the summary printed) is rooflab/run_control.py's; rules/common.smk only answers the DAG's questions."""
    text = (REPO / "rules/common.smk").read_text()
    for call in ("print(", "subprocess", "os.utime", "write_text", "os.replace", "warm.start", "warm.stop", "unlink("):
        assert call not in text, call


def test_the_report_has_a_front_page():
    """snakemake --report opens on report/workflow.rst (the workflow-level page): it says what the workflow does and
    names the documents it points to, which exist."""
    snakefile = (REPO / "Snakefile").read_text()
    assert re.search(r'^report: "report/workflow\.rst"', snakefile, re.M)
    page = (REPO / "report/workflow.rst").read_text()
    for doc in re.findall(r"``(docs/[\w./-]+|config/[\w./-]+)``", page):
        assert (REPO / doc).is_file(), doc
    assert "paired rounds" in page and "results/raw/" in page
