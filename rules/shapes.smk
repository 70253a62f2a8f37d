# Shape sets (config shapes, rooflab/shapes.py): the metrics of each set's results per (gpu, set, kernel), as
# rules/analysis.smk computes the square sweep's, their concatenation results/shapes.parquet, one figure per device
# (figures/shapes.py: every shape by FLOPs or bytes moved, not by N) and the paper's section on real shapes
# (analysis/shapes.py). Measured by rule measure_shapes (rules/measure.smk).


rule metrics_shapes:
    input:
        raw=get_shapes_raw_of,
        ceilings=get_shapes_ceilings_of,
        script="analysis/metrics.py",
        code=["analysis/aa_floors.py", "rooflab/verdicts.py"],
        specs="rooflab/gpus.py",
    output:
        update("results/metrics/{gpu}/shapes/{preset}/{kernel}.parquet"),
    log:
        "logs/analysis/metrics/{gpu}/shapes/{preset}/{kernel}.log",
    resources:
        host=1,
    conda:
        ENV
    params:
        python=PYTHON,
        verdicts=json.dumps(config.get("verdicts", {})),
    shell:
        "{params.python} -m analysis.metrics --raw {input.raw} --ceilings {input.ceilings} "
        "--verdicts {params.verdicts:q} --out {output} > {log} 2>&1"


rule shapes_table:
    """Every shape set's metrics, each verdict judged again beyond its GPU's run-level A/A floors."""
    input:
        metrics=get_shapes_metrics,
        floors=get_aa_floors,
        code="analysis/aa_floors.py",
    output:
        update("results/shapes.parquet"),
    log:
        "logs/analysis/shapes.log",
    resources:
        host=1,
    conda:
        ENV
    params:
        python=PYTHON,
        verdicts=json.dumps(config.get("verdicts", {})),
    shell:
        "{params.python} -m analysis.metrics --concat {input.metrics} --floors {input.floors} "
        "--verdicts {params.verdicts:q} --out {output} > {log} 2>&1"


rule figure_shapes:
    input:
        metrics=get_shapes_metrics,
        floors="results/paired/floors_{gpu}.csv",  # its verdicts beyond the run's A/A floors, as the paper's table
        script="figures/shapes.py",
        code=["figures/_common.py", "analysis/aa_floors.py", "analysis/shapes.py"],
    output:
        pdf=update("results/figures/{gpu}/shapes.pdf"),
        png=update(report("results/figures/{gpu}/shapes.png", category="Figures", subcategory="shapes",
                          labels={"figure": "shapes", "gpu": "{gpu}", "kernel": "all"})),
    log:
        "logs/figures/{gpu}/shapes.log",
    resources:
        host=1,
    conda:
        ENV
    params:
        python=PYTHON,
        verdicts=json.dumps(config.get("verdicts", {})),
    shell:
        "{params.python} -m figures.shapes --gpu {wildcards.gpu} --metrics {input.metrics} --floors {input.floors} "
        "--verdicts {params.verdicts:q} --pdf {output.pdf} --png {output.png} > {log} 2>&1"


rule paper_shapes:
    input:
        shapes="results/shapes.parquet",
        figures=get_shapes_figures,
        script="analysis/shapes.py",
        # compile_dropped_output: which fwd+bwd ratios rest on an old compile row; the verdict rules
        code=["analysis/aa_floors.py", "analysis/selection.py", "rooflab/verdicts.py"],
    output:
        section=update("results/paper/generated/shapes.tex"),
        losses=update("results/paper/generated/shape_losses.tex"),
        losses_table=update("results/paper/generated/shape_losses_table.tex"),
    log:
        "logs/paper/shapes.log",
    resources:
        host=1,
    conda:
        ENV
    params:
        python=PYTHON,
        verdicts=json.dumps(config.get("verdicts", {})),
    shell:
        "{params.python} -m analysis.shapes --shapes {input.shapes} --figdir results/figures "
        "--verdicts {params.verdicts:q} --out {output.section} --losses-out {output.losses} "
        "--losses-table-out {output.losses_table} > {log} 2>&1"
