# rooflab: measure Triton kernels against PyTorch, place them on the roofline, and build a paper from the data.
#   snakemake --cores 1 all            (config/config.yaml on a GPU node, config/cpu.yaml elsewhere)
# Data flows one way: kernels -> experiments (measure) -> results/raw -> analysis -> figures -> paper.
import os
import sys

from snakemake.utils import min_version, validate

min_version("9.0")

sys.path.insert(0, workflow.basedir)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (workflow.basedir, os.environ.get("PYTHONPATH")) if p)

from rooflab import config as rcfg  # noqa: E402


configfile: str(rcfg.default_configfile(workflow.basedir))


validate(config, "config/schema.yaml")
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


onsuccess:
    print_summary(ok=True)


onerror:
    print_summary(ok=False)
