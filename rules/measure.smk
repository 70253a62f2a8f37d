# Measurement: one job per (gpu, kernel), plus the GPU's measured ceilings and kernel-launch profiles.
# A kernel's source file is an input, so editing kernels/<k>.py re-measures <k> only (snakemake does not see
# modules a script imports).


from rooflab.kernel import measurement_code

MEASUREMENT_CODE = measurement_code()


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
        gpu=get_gpu_count,
        slurm_partition=get_cluster("slurm_partition"),
        constraint=get_cluster("constraint"),
        gres=get_cluster("gres"),
        runtime=get_cluster("runtime", default=60),
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
        gpu=get_gpu_count,
        slurm_partition=get_cluster("slurm_partition"),
        constraint=get_cluster("constraint"),
        gres=get_cluster("gres"),
        runtime=get_cluster("runtime", default=60),
    conda:
        ENV
    script:
        "../experiments/ceilings.py"
