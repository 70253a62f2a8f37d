# Shared helpers of the *.smk files: what exists, what `all` builds, cluster resources, the closing summary.
# Every output is marked update(): snakemake leaves the last good file in place while its job runs and restores it
# if the job fails, so a failed rerun never costs the last good results (each job also writes atomically).
import glob
import os
import re
import shutil
from pathlib import Path

ENV = "../envs/rooflab.yaml"

# One invocation is one run: every job inherits this id, and each cell is rated against its own run's ceilings.
from rooflab.provenance import new_run_id

os.environ.setdefault("ROOFLAB_RUN_ID", new_run_id())

# Committed reference datasets (data/reference/<gpu>/*.parquet) for GPUs not measured in this run: the paper's
# headline numbers come from there when no GPU is present.
REFERENCE_GPUS = sorted(
    p.name
    for p in Path(workflow.basedir, config["reference_dir"]).glob("*")
    if p.is_dir() and (p / "ceilings.parquet").exists() and p.name not in GPUS
)
ANALYSIS_GPUS = GPUS + REFERENCE_GPUS
# GPUs measured in this run that also have a committed reference: rule compare_reference reports what moved.
COMPARE_GPUS = sorted(
    g for g in GPUS if Path(workflow.basedir, config["reference_dir"], g, "ceilings.parquet").exists()
)

# Figures: one script each under figures/; 'gpu' figures are drawn once per GPU, 'kernel' ones per GPU and kernel.
from figures import GPU_ONLY, SCOPES

GPU_FIGURES = sorted(f for f, scope in SCOPES.items() if scope == "gpu")
KERNEL_FIGURES = sorted(f for f, scope in SCOPES.items() if scope == "kernel")

HAVE_TEX = bool(shutil.which("latexmk") and shutil.which("pdflatex"))
PAPER = "results/paper/rooflab.pdf" if HAVE_TEX else "results/paper/BUILD_THE_PDF_ELSEWHERE.txt"


wildcard_constraints:
    gpu="[a-z0-9-]+",
    kernel="[a-z0-9_]+",


def raw_path(gpu, kernel):
    """Measured in this run, or taken from the committed reference dataset."""
    if gpu in REFERENCE_GPUS:
        return f"{config['reference_dir']}/{gpu}/{kernel}.parquet"
    return f"results/raw/{gpu}/{kernel}.parquet"


def get_raw(wildcards=None):
    out = []
    for gpu in ANALYSIS_GPUS:
        for kernel in KERNELS:
            p = raw_path(gpu, kernel)
            if gpu in GPUS or Path(workflow.basedir, p).exists():
                out.append(p)
    return out


def get_ceilings(wildcards=None):
    return [raw_path(gpu, "ceilings") for gpu in ANALYSIS_GPUS]


def get_profiles(wildcards=None):
    return [p for p in (raw_path(gpu, "profiles") for gpu in ANALYSIS_GPUS)
            if p.startswith("results/") or Path(workflow.basedir, p).exists()]


def get_figures(wildcards=None):
    out = []
    for gpu in ANALYSIS_GPUS:
        for fig in GPU_FIGURES:
            if gpu == "cpu" and fig in GPU_ONLY:
                continue
            out += [f"results/figures/{gpu}/{fig}.pdf", f"results/figures/{gpu}/{fig}.png"]
        for fig in KERNEL_FIGURES:
            for kernel in KERNELS:
                out += [f"results/figures/{gpu}/{fig}/{kernel}.pdf", f"results/figures/{gpu}/{fig}/{kernel}.png"]
    return out


def get_final_outputs(wildcards=None):
    return (
        get_raw()
        + get_ceilings()
        + get_profiles()
        + get_compiled()  # rules/measure.smk, as get_ncu
        + get_ncu()
        + ["results/metrics.parquet"]
        + get_figures()
        + get_comparisons()
        + expand("results/notebooks/{gpu}/{kernel}.html", gpu=GPUS, kernel=KERNELS)
        + [PAPER]
    )


# For rules/measure.smk and rules/figures.smk (the lint wants rule files free of functions).
def get_compiled(wildcards=None):
    return [f"results/raw/{gpu}/compiled.parquet" for gpu in GPUS]


def get_repeatability(wildcards=None):
    """scripts/repeatability.py tables for the paper, where present: <dir>/<gpu>/repeatability.csv, from this run's
    results/raw/<gpu>/ (written by hand with --out) or the committed reference."""
    out = []
    for gpu in ANALYSIS_GPUS:
        for p in (f"results/raw/{gpu}/repeatability.csv", f"{config['reference_dir']}/{gpu}/repeatability.csv"):
            if Path(workflow.basedir, p).exists():
                out.append(p)
                break
    return out


def get_comparisons(wildcards=None):
    return [f"results/compare/{gpu}.md" for gpu in COMPARE_GPUS]


def get_compare_now(wildcards):
    """This run's raw files of the kernels the reference also has."""
    return [f"results/raw/{wildcards.gpu}/{k}.parquet" for k in KERNELS
            if Path(workflow.basedir, config["reference_dir"], wildcards.gpu, f"{k}.parquet").exists()]


def get_compare_repeatability(wildcards):
    """The reference's repeatability table of this GPU, where committed: the compare rule's noise floors. Which
    table is config compare.repeatability_file: one measured with the timing the reference's rows were."""
    p = f"{config['reference_dir']}/{wildcards.gpu}/{config['compare']['repeatability_file']}"
    return [p] if Path(workflow.basedir, p).exists() else []


def get_compare_reference(wildcards):
    return [p for p in (f"{config['reference_dir']}/{wildcards.gpu}/{k}.parquet" for k in KERNELS)
            if Path(workflow.basedir, p).exists()]


def get_ncu(wildcards=None):
    """The one Nsight Compute cell of config ncu, on every GPU of the run; nothing unless ncu.enabled."""
    ncu = config.get("ncu", {})
    if not ncu.get("enabled"):
        return []
    return [f"results/raw/{gpu}/ncu_{ncu['kernel']}_{ncu['impl']}_{ncu['dtype']}_{ncu['size']}.csv"
            for gpu in GPUS if gpu != "cpu"]


def get_profiles_of(wildcards):
    """This GPU's profiles.parquet where it exists or a rule of this workflow writes it; else none (the fusion
    figure then says 'no data' instead of the DAG failing on a missing input)."""
    written = any("profiles.parquet" in str(o) for r in workflow.rules for o in r.output)
    return [p for p in get_profiles()
            if Path(p).parent.name == wildcards.gpu and (written or Path(workflow.basedir, p).exists())]


def get_cluster(key, default=None):
    """A measurement job's resource from config['cluster'][gpu] (profiles/slurm); None (left out) when unset."""

    def get(wildcards):
        value = rcfg.cluster_resource(config, wildcards.gpu, key)
        return default if value is None else value

    return get


def get_gpu_count(wildcards):
    """GPUs a measurement job holds: none on the CPU; on a cluster, a gpu gres replaces the count (slurm takes
    one or the other), so the gres can name the model (gpu:h100:1)."""
    if wildcards.gpu == "cpu" or "gpu" in (rcfg.cluster_resource(config, wildcards.gpu, "gres") or ""):
        return 0
    return 1


def outdate_restored(logs):
    """A failed job's update() output comes back from its backup, and snakemake records the failed run's code,
    params and inputs for it: it would pass for up to date, and the next run would keep the stale file. For each
    file restored in this run, drop that record and give the file an old mtime (1970-01-02: snakemake reads 0 as
    unknown), so the next run redoes its job; the last good file stays readable until then. Tested in
    tests/test_workflow.py (snakemake is pinned below 10: the record is dropped through its persistence object)."""
    for logfile in logs if isinstance(logs, (list, tuple)) else [logs]:
        try:
            text = Path(logfile).read_text(errors="replace")
        except (OSError, TypeError):
            continue
        for rel in re.findall(r"Restored previous version of (\S+) \(updating job failed\)", text):
            try:
                workflow.persistence._delete_record(rel)
            except Exception as exc:  # a snakemake without it: say how to redo the job by hand
                print(f"rooflab: {rel} was restored after its job failed; rerun that job with --forcerun ({exc})")
            path = Path(workflow.basedir, rel)
            if path.exists():
                os.utime(path, (86400, 86400))


def print_summary(ok):
    """One screen at the end of `all`: what ran, what was skipped and why, where the artefacts are."""
    import pandas as pd

    print("\n" + "=" * 78)
    print(f"rooflab: {'finished' if ok else 'stopped with errors'} (gpus: {', '.join(GPUS)}; kernels: {len(KERNELS)})")
    rows = []
    for gpu in GPUS:
        for kernel in KERNELS:
            p = Path(f"results/raw/{gpu}/{kernel}.parquet")
            if p.exists():
                try:
                    rows.append(pd.read_parquet(p, columns=["gpu", "kernel", "status", "error"]))
                except Exception as exc:
                    print(f"  cannot read {p}: {exc}")
    if rows:
        df = pd.concat(rows)
        counts = df.groupby(["gpu", "kernel", "status"]).size().unstack(fill_value=0)
        print(counts.to_string())
        skipped = df[df.status.isin(["skipped", "failed", "mismatch"])].groupby(["status", "error"]).size()
        if len(skipped):
            print("\nnot measured, and why:")
            for (status, err), n in skipped.items():
                print(f"  {status:8s} x{n:<4d} {err[:110]}")
    for gpu in REFERENCE_GPUS:
        print(f"reference data merged: {config['reference_dir']}/{gpu}")
    print(f"\nmetrics:   results/metrics.parquet")
    print(f"figures:   results/figures/")
    print(f"notebooks: results/notebooks/")
    if HAVE_TEX:
        print(f"paper:     {PAPER}")
    else:
        print(f"paper:     no TeX engine here; sources packed in results/paper/rooflab-paper-src.tar.gz.")
        print(f"           Build elsewhere: see {PAPER}")
    print("report:    snakemake --report results/report.html")
    print("=" * 78)
