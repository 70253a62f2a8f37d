# rooflab: measure Triton kernels against PyTorch, place them on the roofline, and build a paper from the data.
#   snakemake --cores 1 all            (config/config.yaml on a GPU node, config/cpu.yaml elsewhere)
# Data flows one way: kernels -> experiments (measure) -> results/raw -> analysis -> figures -> paper.
import os
import sys

from snakemake.utils import min_version, validate

min_version("9.0")

report: "report/workflow.rst"  # the report's front page: what the workflow does and where to read more

sys.path.insert(0, workflow.basedir)
# Set, not required, so no envvars: directive (the lint only looks for os.environ[...]).
os.environ.update(PYTHONPATH=os.pathsep.join(p for p in (workflow.basedir, os.environ.get("PYTHONPATH")) if p))

from rooflab import config as rcfg  # noqa: E402
from rooflab.gpus import unusable_gpus_message  # noqa: E402
from snakemake.exceptions import WorkflowError  # noqa: E402


# The default only where no --configfile is given: snakemake would lay the user's file over it, completing a file
# that lacks a key from the default silently. A user's file gets the schema's defaults instead.
if not workflow.overwrite_configfiles:

    configfile: str(rcfg.default_configfile(workflow.basedir))


# Stops before any job with a message naming the key and value: the schema first, then what it cannot check.
config.update(rcfg.coerce(config, rcfg.load_schema(workflow.basedir)))
rcfg.check_schema(config, rcfg.load_schema(workflow.basedir), sources=workflow.configfiles)
validate(config, "config/schema.yaml")  # fills the defaults
config.update(rcfg.resolve(config))

GPUS = config["gpus"]
KERNELS = config["kernels"]


include: "rules/common.smk"
include: "rules/measure.smk"
include: "rules/analysis.smk"
include: "rules/shapes.smk"
include: "rules/figures.smk"
include: "rules/notebooks.smk"
include: "rules/paper.smk"


rule all:
    input:
        get_final_outputs,
    default_target: True


# On a cluster (profiles/slurm) only the rules that need the device are submitted (those declaring a `gpu`
# resource: measure, ceilings); analysis, figures, notebooks and the paper run here.
workflow.localrules(*(r.name for r in workflow.rules if "gpu" not in r.resources))


# Once, before the first job: a GPU that torch cannot use would otherwise fail each of its measurement jobs in turn.
# Here and not at parse time: torch stays out of the parse, and a dry run, or a cluster's login node, needs no GPU.
onstart:
    if workflow.is_main_process and workflow.local_exec and not workflow.touch:
        problem = unusable_gpus_message(
            job.wildcards_dict.get("gpu", "cpu") for job in workflow.dag.needrun_jobs() if "gpu" in job.rule.resources
        )
        if problem:
            raise WorkflowError(problem)
        run_control.start_compile_lanes(workflow, config)


SUMMARY = dict(gpus=GPUS, kernels=KERNELS, analysed=ANALYSED, reference_gpus=REFERENCE_GPUS,
               reference_dir=config["reference_dir"], paper=PAPER, have_tex=HAVE_TEX)


onsuccess:
    run_control.stop_compile_lanes()
    run_control.print_summary(True, **SUMMARY)


onerror:
    run_control.stop_compile_lanes()
    run_control.outdate_restored(workflow, log)
    run_control.print_summary(False, **SUMMARY)
