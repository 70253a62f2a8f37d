# The input functions of the *.smk files: what exists, what `all` builds, cluster resources. What the run does
# around its jobs (code stamps, compile lanes, the closing summary) is rooflab/run_control.py.
# Every output is marked update(): snakemake leaves the last good file in place while its job runs and restores it
# if the job fails, so a failed rerun never costs the last good results (each job also writes atomically).
import json
import os
import shutil
import sys
from pathlib import Path

ENV = "../envs/rooflab.yaml"

# The interpreter of every shell rule: the one running snakemake, or under --use-conda the rule's env's python.
from rooflab import run_control

PYTHON = run_control.shell_python(workflow)

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

# Kernels: the run measures config kernels (KERNELS) only, but analyses every kernel with results. A kernel measured
# by an earlier run (results/raw/<gpu>/<k>.parquet present) has no producing rule in a run that leaves it out
# (the measure wildcard is held to KERNELS), so its file is read as it is: a subset run never shrinks the
# figures, notebooks, report or paper, and the paper says which cells this run measured (analysis/origin.py).
from rooflab.kernel import kernel_code, kernel_file, kernel_names
from experiments.traffic import METRICS as TRAFFIC_METRICS  # what rule traffic asks Nsight Compute for

KNOWN_KERNELS = kernel_names()
MEASURED = "|".join(KERNELS)  # measured here (measure: cells, profiles, compiled facts)


# Shape sets (config shapes, rooflab/shapes.py): square is the sweep of sizes, results/raw/<gpu>/<kernel>.parquet;
# every other set (llm, odd, custom) has a folder of its own, results/raw/<gpu>/shapes/<set>/<kernel>.parquet, so
# a run of one set keeps the others' results, as a run of some kernels keeps the other kernels'. A run without
# square reads the square results an earlier run left on a device measured here, else that GPU's committed reference.
from rooflab.shapes import SQUARE

MEASURE_SQUARE = SQUARE in config["shape_sets"]
PRESETS = rcfg.measured_presets(config)  # the run's other sets: rules/shapes.smk
MEASURED_SQUARE = MEASURED if MEASURE_SQUARE else "(?!)"  # (?!): matches nothing, so no square job runs
MEASURED_PRESETS = "|".join(PRESETS) or "(?!)"


def raw_path(gpu, kernel):
    """Measured in this run (or kept from an earlier one), or taken from the committed reference dataset."""
    if gpu in REFERENCE_GPUS:
        return f"{config['reference_dir']}/{gpu}/{kernel}.parquet"
    own = f"results/raw/{gpu}/{kernel}.parquet"
    reference = f"{config['reference_dir']}/{gpu}/{kernel}.parquet"
    if MEASURE_SQUARE or kernel == "ceilings" or Path(workflow.basedir, own).exists():
        return own
    return reference if Path(workflow.basedir, reference).exists() else own


def from_reference(gpu, kernel):
    """Whether a device measured here reads this kernel's square results from the committed reference."""
    return gpu in GPUS and raw_path(gpu, kernel).startswith(f"{config['reference_dir']}/")


def kernels_of(gpu):
    """The kernels analysed on a device: on one measured here, the run's kernels then those an earlier run measured
    (results present); on a reference device, those of the reference dataset."""
    if gpu in GPUS:
        measured = KERNELS if MEASURE_SQUARE else []
        kept = [k for k in KNOWN_KERNELS if k not in measured and Path(workflow.basedir, raw_path(gpu, k)).exists()]
        return measured + kept
    return [k for k in dict.fromkeys(KERNELS + KNOWN_KERNELS) if Path(workflow.basedir, raw_path(gpu, k)).exists()]


ANALYSED = {gpu: kernels_of(gpu) for gpu in ANALYSIS_GPUS}

# Figures: one script each under figures/; 'gpu' figures are drawn once per GPU, 'kernel' ones per GPU and kernel.
from figures import GPU_ONLY, SCOPES

GPU_FIGURES = sorted(f for f, scope in SCOPES.items() if scope == "gpu")
KERNEL_FIGURES = sorted(f for f, scope in SCOPES.items() if scope == "kernel")
CPU_FIGURES = [f for f in GPU_FIGURES if f not in GPU_ONLY]

HAVE_TEX = bool(shutil.which("latexmk") and shutil.which("pdflatex"))
PAPER = "results/paper/rooflab.pdf" if HAVE_TEX else "results/paper/BUILD_THE_PDF_ELSEWHERE.txt"


wildcard_constraints:
    gpu="[a-z0-9-]+",
    kernel="[a-z0-9_]+",


def get_raw(wildcards=None):
    return [raw_path(gpu, k) for gpu in ANALYSIS_GPUS for k in ANALYSED[gpu]]


def get_raw_of(wildcards):
    return raw_path(wildcards.gpu, wildcards.kernel)


def get_ceilings(wildcards=None):
    return [raw_path(gpu, "ceilings") for gpu in ANALYSIS_GPUS]


def get_ceilings_of(wildcards):
    """The device's ceilings; where its square results come from the reference, the reference's too (each cell is
    rated against its own run's)."""
    own = raw_path(wildcards.gpu, "ceilings")
    if from_reference(wildcards.gpu, wildcards.get("kernel", "")):
        return [own, f"{config['reference_dir']}/{wildcards.gpu}/ceilings.parquet"]
    return own


def get_metrics(wildcards=None):
    """Per (gpu, kernel) metrics, in the order results/metrics.parquet concatenates them."""
    return [f"results/metrics/{gpu}/{k}.parquet" for gpu in ANALYSIS_GPUS for k in ANALYSED[gpu]]


def get_metrics_of(wildcards):
    """One device's per-kernel metrics: its figures of every kernel."""
    return [f"results/metrics/{wildcards.gpu}/{k}.parquet" for k in ANALYSED[wildcards.gpu]]


def _per_kernel(name):
    """results/raw/<gpu>/<name>/<kernel>.parquet of every kernel analysed on a device measured here (the run's
    kernels: written by their rule; the others: where an earlier run left one), and the reference's single
    <name>.parquet where committed."""
    out = []
    for gpu in ANALYSIS_GPUS:
        if gpu in GPUS:
            for k in ANALYSED[gpu]:
                p = f"results/raw/{gpu}/{name}/{k}.parquet"
                reference = f"{config['reference_dir']}/{gpu}/{name}.parquet"
                if (MEASURE_SQUARE and k in KERNELS) or Path(workflow.basedir, p).exists():
                    out.append(p)
                elif from_reference(gpu, k) and Path(workflow.basedir, reference).exists() and reference not in out:
                    out.append(reference)
        elif Path(workflow.basedir, config["reference_dir"], gpu, f"{name}.parquet").exists():
            out.append(f"{config['reference_dir']}/{gpu}/{name}.parquet")
    return out


def get_profiles(wildcards=None):
    return _per_kernel("profiles")


def get_profiles_of(wildcards):
    """This device's profiles (the fusion figure); none: the figure says 'no data' instead of the DAG failing."""
    return [p for p in get_profiles() if f"/{wildcards.gpu}/" in p]


# For rules/measure.smk (the lint wants rule files free of functions).
def get_compiled(wildcards=None):
    """Facts of the compiled Triton kernels, on the GPUs of this run: the CPU runs Triton in the interpreter, and
    compiles none."""
    return [p for p in _per_kernel("compiled") if p.startswith("results/") and not p.startswith("results/raw/cpu/")]


def get_compiled_facts(wildcards=None):
    """Compiled-kernel facts for the paper's 'why': this run's GPUs' and the committed references' (not the CPU's)."""
    return [p for p in _per_kernel("compiled") if not p.startswith("results/raw/cpu/")]


def get_figures(wildcards=None):
    out = []
    for gpu in ANALYSIS_GPUS:
        if not ANALYSED[gpu]:  # a shape set alone on a new GPU: no square metrics for a device figure to draw
            continue
        for fig in CPU_FIGURES if gpu == "cpu" else GPU_FIGURES:
            out += [f"results/figures/{gpu}/{fig}.pdf", f"results/figures/{gpu}/{fig}.png"]
        for fig in KERNEL_FIGURES:
            for kernel in ANALYSED[gpu]:
                out += [f"results/figures/{gpu}/{fig}/{kernel}.pdf", f"results/figures/{gpu}/{fig}/{kernel}.png"]
    return out


def get_notebooks(wildcards=None):
    return [f"results/notebooks/{gpu}/{k}.html" for gpu in GPUS for k in ANALYSED[gpu]]


def get_kernel_docs(wildcards=None):
    """The kernel files the paper reads, as text: their descriptions and the naive expressions' traffic comments
    (analysis/why.py), so a comment edit rebuilds the paper (and re-measures nothing: the measurement jobs take
    code stamps)."""
    return [str(kernel_file(k, Path("kernels"))) for k in dict.fromkeys(k for g in ANALYSIS_GPUS for k in ANALYSED[g])]


def get_modules_of(name, script):
    """An input function: the code stamp (code_stamp) of the repository's Python files ``script`` imports, directly
    or through each other (rooflab.codehash.imported_files, read from the source, not a hand list): a code edit to
    any of them reruns the rule, a comment or docstring edit does not."""
    from rooflab.codehash import imported_files

    root = Path(workflow.basedir)

    def modules(wildcards=None):
        return code_stamp(name, [str(p.relative_to(root)) for p in imported_files([root / script], root)])

    return modules


def get_final_outputs(wildcards=None):
    return (
        get_raw()
        + get_ceilings()
        + get_profiles()
        + get_compiled()
        + get_ncu()
        + (own_tables("repeatability", "repeatability.csv") if MEASURE_SQUARE else [])
        + own_tables("traffic", "traffic.csv")
        + own_tables("ablations", "ablations.parquet")
        + own_tables("backends", "backends.parquet")
        + own_tables("why_ncu", "why_ncu.parquet")
        + ["results/metrics.parquet"]
        + get_figures()
        + get_comparisons()
        + get_paired_verdicts()
        + get_shapes_metrics()
        + ["results/shapes.parquet"]
        + get_shapes_figures()
        + get_notebooks()
        + [PAPER]
    )


ON_A_GPU = "(?!cpu(?:/|$))[a-z0-9-]+"  # a gpu other than cpu (rules/measure.smk: the CPU's jobs run in a worker)


def measure_argv(wildcards, params, output):
    """experiments/measure.py's arguments for a measure job run as main(argv) (measure_host): the job's
    kernel, device, outputs and sweep parameters (as JSON)."""
    argv = ["--kernel", wildcards.kernel, "--gpu", wildcards.gpu, "--out", output.raw,
            "--params", json.dumps(dict(params.sweep))]
    for name in ("profiles", "compiled", "paired"):
        if output.get(name):
            argv += [f"--{name}-out", output.get(name)]
    return argv


def host_slots(wildcards):
    """Host slots a timing job (measure, ceilings) holds (run.sh: --resources host=<cores>; every other job holds
    one): on the CPU it times on the host, so it holds them all and runs alone; on a GPU one, beside the analysis."""
    return 1_000_000 if wildcards.gpu == "cpu" else 1


def measure_slots():
    """The measure_slots this run was given (run.sh: one per GPU of the node, rooflab/slots.py); 1 when unset."""
    value = workflow.global_resources.get("measure_slot")
    return int(getattr(value, "value", value) or 1)


def device_slot(wildcards):
    """The measure_slot a job that runs kernels without timing them (ncu) holds: on a GPU a slot, as a timing job
    (never beside a measurement on its device: it takes a GPU of its own, rooflab/slots.py); on the CPU none (a
    timing job there holds every host slot, so none runs beside it anyway)."""
    return 0 if wildcards.gpu == "cpu" else 1


def per_gpu_table(name):
    """<dir>/<gpu>/<name> per analysed GPU, where present: this run's results/raw/<gpu>/ (written by hand) or the
    committed reference's."""
    out = []
    for gpu in ANALYSIS_GPUS:
        for p in (f"results/raw/{gpu}/{name}", f"{config['reference_dir']}/{gpu}/{name}"):
            if Path(workflow.basedir, p).exists():
                out.append(p)
                break
    return out


def get_repeatability(wildcards=None):
    """Repeatability tables for the paper: this run's own (rule repeatability) where config repeatability.enabled,
    else per_gpu_table's (one scripts/repeatability.py or an earlier run wrote, or the reference's)."""
    return own_or_reference("repeatability", "repeatability.csv")


def get_repeatability_of(wildcards):
    """One GPU's table of get_repeatability (the same cells timed in two processes), where it has one: A/A pairs
    timed apart (rules aa_floors and paired_verdicts)."""
    return [p for p in get_repeatability() if Path(p).parent.name == wildcards.gpu]


def get_repeat_sweep(wildcards):
    """The sweep's raw files of the kernels measured again (rule repeat_measure)."""
    return [f"results/raw/{wildcards.gpu}/{k}.parquet" for k in KERNELS] if MEASURE_SQUARE else []


def get_repeat_again(wildcards):
    return [f"results/raw/{wildcards.gpu}/repeat/{k}.parquet" for k in KERNELS] if MEASURE_SQUARE else []


def get_compile_frames(wildcards=None):
    """python -m lab compileframes tables for the paper (per_gpu_table): torch.compile's fwd+bwd in its two frames."""
    return per_gpu_table("compile_frames.csv")


def get_traffic(wildcards=None):
    """experiments/traffic.py tables for the paper: the DRAM bytes one call of each implementation moves, under
    Nsight Compute. This run's own where config traffic.enabled, else per_gpu_table."""
    return own_or_reference("traffic", "traffic.csv")


def get_ablations(wildcards=None):
    """experiments/ablations.py tables for the paper: this run's own where config ablations.enabled, else
    per_gpu_table."""
    return own_or_reference("ablations", "ablations.parquet")


def get_why_ncu(wildcards=None):
    """experiments/why_ncu.py tables for the paper (Nsight Compute's facts per GPU kernel of the why cells): this
    run's own where config why_ncu.enabled, else per_gpu_table's, and any reference GPU's (the paper names the card
    it reads: analysis/why_ncu.card_of)"""
    found = own_or_reference("why_ncu", "why_ncu.parquet")
    seen = {Path(p).parent.name for p in found}
    refs = sorted(p.parent.name for p in Path(workflow.basedir, config["reference_dir"]).glob("*/why_ncu.parquet"))
    return found + [f"{config['reference_dir']}/{gpu}/why_ncu.parquet" for gpu in refs if gpu not in seen]


def get_backends(wildcards=None):
    """experiments/backends.py tables for the paper (ours beside each SDPA backend): this run's own where config
    backends.enabled, else per_gpu_table."""
    return own_or_reference("backends", "backends.parquet")


def own_tables(key, name):
    """results/raw/<gpu>/<name> for each GPU measured here, where config <key>.enabled."""
    if not config[key]["enabled"]:
        return []
    return [f"results/raw/{gpu}/{name}" for gpu in GPUS if gpu != "cpu"]


def own_or_reference(key, name):
    """This run's tables (own_tables), and per_gpu_table's for every other GPU."""
    own = own_tables(key, name)
    mine = {Path(o).parent.name for o in own}
    return own + [p for p in per_gpu_table(name) if Path(p).parent.name not in mine]


def get_comparisons(wildcards=None):
    return [f"results/compare/{gpu}.md" for gpu in COMPARE_GPUS if get_compare_now(dict(gpu=gpu))]


def paired_of(gpu, kernel):
    """The paired rounds beside a kernel's square results (rooflab/paired.py): those this run measures, and those
    an earlier run or the reference left; None where there are none (results measured before pairing)."""
    raw = raw_path(gpu, kernel)
    path = str(Path(raw).parent / "paired" / f"{kernel}.parquet")
    measured_here = gpu in GPUS and MEASURE_SQUARE and kernel in KERNELS and raw.startswith("results/")
    return path if measured_here or Path(workflow.basedir, path).exists() else None


def get_paired_of_kernel(wildcards):
    return [p for p in (paired_of(wildcards.gpu, wildcards.kernel),) if p]


def get_paired_of(wildcards):
    return [p for p in (paired_of(wildcards.gpu, k) for k in ANALYSED[wildcards.gpu]) if p]


def get_raw_of_gpu(wildcards):
    return [raw_path(wildcards.gpu, k) for k in ANALYSED[wildcards.gpu]]


def get_paired_aa(wildcards=None):
    return [f"results/paired/aa_{gpu}.csv" for gpu in ANALYSIS_GPUS]


def get_aa_floors(wildcards=None):
    return [f"results/paired/floors_{gpu}.csv" for gpu in ANALYSIS_GPUS]


def get_paired_tables(wildcards=None):
    return [f"results/paired/{gpu}.parquet" for gpu in ANALYSIS_GPUS]


def get_paired_verdicts(wildcards=None):
    """Every analysed GPU's paired verdicts and A/A rates (rules/analysis.smk, paired_verdicts)."""
    return [f"results/paired/{gpu}.md" for gpu in ANALYSIS_GPUS]


def get_compare_now(wildcards):
    """This run's raw files of the kernels the reference also has."""
    gpu = wildcards["gpu"] if isinstance(wildcards, dict) else wildcards.gpu
    return [f"results/raw/{gpu}/{k}.parquet" for k in ANALYSED[gpu] if not from_reference(gpu, k)
            and Path(workflow.basedir, config["reference_dir"], gpu, f"{k}.parquet").exists()]


def get_compare_repeatability(wildcards):
    """The reference's repeatability table of this GPU, where committed: the compare rule's noise floors. Which
    table is config compare.repeatability_file: one measured with the timing the reference's rows were."""
    p = f"{config['reference_dir']}/{wildcards.gpu}/{config['compare']['repeatability_file']}"
    return [p] if Path(workflow.basedir, p).exists() else []


def get_compare_reference(wildcards):
    return [p for p in (f"{config['reference_dir']}/{wildcards.gpu}/{k}.parquet" for k in ANALYSED[wildcards.gpu])
            if Path(workflow.basedir, p).exists()]


def shape_sets_of(gpu):
    """(set, kernel) of every shape-set result analysed on a device: on one measured here, the run's sets of the
    run's kernels, then those an earlier run left (results/raw/<gpu>/shapes/<set>/<kernel>.parquet); on a reference
    device, those committed under <reference_dir>/<gpu>/shapes/."""
    out = [(p, k) for p in PRESETS for k in KERNELS] if gpu in GPUS else []
    root = Path(workflow.basedir, *(("results/raw",) if gpu in GPUS else (config["reference_dir"],)), gpu, "shapes")
    for f in sorted(root.glob("*/*.parquet")):
        if f.stem in KNOWN_KERNELS and (f.parent.name, f.stem) not in out:
            out.append((f.parent.name, f.stem))
    return out


SHAPE_SETS = {gpu: shape_sets_of(gpu) for gpu in ANALYSIS_GPUS}


def get_shapes_raw_of(wildcards):
    base = config["reference_dir"] if wildcards.gpu in REFERENCE_GPUS else "results/raw"
    return f"{base}/{wildcards.gpu}/shapes/{wildcards.preset}/{wildcards.kernel}.parquet"


def get_shapes_ceilings_of(wildcards):
    return raw_path(wildcards.gpu, "ceilings")


def get_shapes_metrics(wildcards=None):
    """Per (gpu, set, kernel) metrics of the shape sets: results/shapes.parquet concatenates them."""
    gpus = [wildcards.gpu] if wildcards is not None and "gpu" in wildcards.keys() else ANALYSIS_GPUS
    return [f"results/metrics/{gpu}/shapes/{p}/{k}.parquet" for gpu in gpus for p, k in SHAPE_SETS[gpu]]


def get_shapes_figures(wildcards=None):
    """The shapes figure of every device with shape-set results (figures/shapes.py)."""
    return [f"results/figures/{gpu}/shapes.{ext}" for gpu in ANALYSIS_GPUS if SHAPE_SETS[gpu] for ext in ("pdf", "png")]


def get_shapes_paper(wildcards=None):
    """The paper's real-shapes section and the figures it includes."""
    section = [f"results/paper/generated/{f}.tex" for f in ("shapes", "shape_losses", "shape_losses_table")]
    return section + [f for f in get_shapes_figures() if f.endswith(".pdf")]


def get_ncu(wildcards=None):
    """The one Nsight Compute cell of config ncu, on every GPU of the run; nothing unless ncu.enabled."""
    ncu = config.get("ncu", {})
    if not ncu.get("enabled"):
        return []
    return [f"results/raw/{gpu}/ncu_{ncu['kernel']}_{ncu['impl']}_{ncu['dtype']}_{ncu['size']}.csv"
            for gpu in GPUS if gpu != "cpu"]


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


MEASURE_ORDER = run_control.measure_order(config["kernels"], workflow.basedir)


def get_measure_priority(wildcards):
    """One priority per kernel, in MEASURE_ORDER (equal priorities run in no set order; the lanes take the jobs in
    this order too); all under the ceilings' (rules/measure.smk)."""
    return 10 + len(MEASURE_ORDER) - MEASURE_ORDER.index(wildcards.kernel)  # kernel: one of MEASURED


def code_stamp(name, files):
    """results/code/<name>.digest, the code stamp a measurement job takes for ``files`` (rooflab/run_control.py)."""
    return run_control.code_stamp(workflow, name, files)


def get_kernel_stamp(wildcards):
    """The code stamp of the kernel's folder and of the modules it imports (rooflab/kernel.kernel_code)."""
    return kernel_code_stamp(wildcards.kernel)


def kernel_code_stamp(kernel):
    return code_stamp(f"kernel_{kernel}", kernel_code(kernel))


def get_kernel_stamps(wildcards=None):
    """The code stamps of the run's kernels (rule traffic runs them all)."""
    return [kernel_code_stamp(k) for k in KERNELS]
