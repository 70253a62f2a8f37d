# Analysis: raw timings of every GPU (measured here or from the reference dataset) -> results/metrics.parquet.


rule metrics:
    input:
        raw=get_raw,
        ceilings=get_ceilings,
        script="analysis/metrics.py",
        specs="rooflab/gpus.py",
    output:
        "results/metrics.parquet",
    log:
        "logs/analysis/metrics.log",
    conda:
        ENV
    script:
        "../analysis/metrics.py"
