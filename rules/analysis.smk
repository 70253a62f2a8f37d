# Analysis: raw timings of every GPU (measured here or from the reference dataset) -> results/metrics.parquet.


rule metrics:
    input:
        raw=get_raw,
        ceilings=get_ceilings,
        script="analysis/metrics.py",
        specs="rooflab/gpus.py",
    output:
        update("results/metrics.parquet"),
    log:
        "logs/analysis/metrics.log",
    conda:
        ENV
    script:
        "../analysis/metrics.py"


rule compare_reference:
    """This run against data/reference/<gpu>: cells that got slower or faster beyond noise (analysis/compare.py)."""
    input:
        raw=get_compare_now,
        reference=get_compare_reference,
        repeatability=get_compare_repeatability,
        script="analysis/compare.py",
    output:
        csv=update("results/compare/{gpu}.csv"),
        md=update("results/compare/{gpu}.md"),
    params:
        settings=config.get("compare", {}),
    log:
        "logs/analysis/compare_{gpu}.log",
    conda:
        ENV
    script:
        "../analysis/compare.py"
