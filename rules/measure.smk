# Measurement: one job per (gpu, kernel), plus the GPU's measured ceilings and kernel-launch profiles.
# A kernel's source file is an input, so editing kernels/<k>.py re-measures <k> only (snakemake does not see
# modules a script imports).


MEASUREMENT_CODE = ["rooflab/sweep.py", "rooflab/timing.py", "rooflab/kernel.py", "rooflab/clocks.py"]


def get_cluster(key):
    """Resource for a measurement job on a gpu, from config['cluster'] (used by profiles/slurm)."""

    def get(wildcards):
        return config["cluster"].get(wildcards.gpu, {}).get(key, "")

    return get


rule measure:
    input:
        kernel="kernels/{kernel}.py",
        code=MEASUREMENT_CODE,
    output:
        "results/raw/{gpu}/{kernel}.parquet",
    params:
        sweep=lambda wildcards: rcfg.sweep_params(config),
    log:
        "logs/measure/{gpu}/{kernel}.log",
    resources:
        gpu=lambda wildcards: 0 if wildcards.gpu == "cpu" else 1,
        slurm_partition=get_cluster("slurm_partition"),
        constraint=get_cluster("constraint"),
        gres=get_cluster("gres"),
        runtime=lambda wildcards: config["cluster"].get(wildcards.gpu, {}).get("runtime", 60),
    conda:
        ENV
    script:
        "../experiments/measure.py"


rule ceilings:
    input:
        script="experiments/ceilings.py",
    output:
        "results/raw/{gpu}/ceilings.parquet",
    params:
        ceilings=lambda wildcards: config["ceilings"],
    log:
        "logs/ceilings/{gpu}.log",
    resources:
        gpu=lambda wildcards: 0 if wildcards.gpu == "cpu" else 1,
        slurm_partition=get_cluster("slurm_partition"),
        constraint=get_cluster("constraint"),
        gres=get_cluster("gres"),
    conda:
        ENV
    script:
        "../experiments/ceilings.py"
