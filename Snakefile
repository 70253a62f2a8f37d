# rooflab: measure Triton kernels against PyTorch, place them on the roofline, and build a paper from the data.
#   snakemake --cores 1 all            (config/config.yaml on a GPU node, config/cpu.yaml elsewhere)
# Data flows one way: kernels -> experiments (measure) -> results/raw -> analysis -> figures -> paper.
import os
import sys

from snakemake.utils import min_version, validate

min_version("9.0")

sys.path.insert(0, workflow.basedir)
# Set, not required, so no envvars: directive (the lint only looks for os.environ[...]).
os.environ.update(PYTHONPATH=os.pathsep.join(p for p in (workflow.basedir, os.environ.get("PYTHONPATH")) if p))

from rooflab import config as rcfg  # noqa: E402


configfile: str(rcfg.default_configfile(workflow.basedir))


# Stops before any job with a message naming the key and value: the schema first, then what it cannot check.
config.update(rcfg.coerce(config, rcfg.load_schema(workflow.basedir)))
rcfg.check_schema(config, rcfg.load_schema(workflow.basedir))
validate(config, "config/schema.yaml")  # fills the defaults
config.update(rcfg.resolve(config))

GPUS = config["gpus"]
KERNELS = config["kernels"]


include: "rules/common.smk"
include: "rules/measure.smk"
include: "rules/analysis.smk"
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


onsuccess:
    print_summary(ok=True)


onerror:
    print_summary(ok=False)
