# Analysis: raw timings of every GPU (measured here or from the reference dataset) -> per (gpu, kernel)
# results/metrics/<gpu>/<kernel>.parquet (each kernel's figures and notebook read its own, so an edit of one kernel
# recomputes that kernel only) -> results/metrics.parquet, their concatenation (the cross-kernel outputs).
# The metrics jobs run python -m analysis.metrics's main in a warm worker process (rooflab/workers.py: imports once).

from rooflab.workers import run_main

# Over the figures (0), under the measurements (get_measure_priority): the metrics and the paper's inputs first, so
# the paper's inputs are written while the figures draw.
ANALYSIS_PRIORITY = 5


rule aa_floors:
    """The run's A/A floors of one GPU: per verdict rule, frame and size class, the least difference a verdict names,
    a high quantile of what pairs known identical differ by (analysis/aa_floors.py)."""
    input:
        paired=get_paired_of,
        raw=get_raw_of_gpu,
        repeatability=get_repeatability_of,
        script="analysis/aa_floors.py",
        code=["analysis/paired.py", "rooflab/gpus.py", "rooflab/verdicts.py"],
    output:
        update("results/paired/floors_{gpu}.csv"),
    params:
        settings=json.dumps(config.get("verdicts", {})),
    log:
        "logs/analysis/aa_floors_{gpu}.log",
    priority: ANALYSIS_PRIORITY
    resources:
        host=1,
    run:
        run_main("analysis.aa_floors", ["--paired", input.paired, "--raw", input.raw, "--repeatability",
                                        input.repeatability, "--settings", params.settings, "--out", output[0]], log)


rule metrics_kernel:
    input:
        raw=get_raw_of,
        ceilings=get_ceilings_of,
        paired=get_paired_of_kernel,
        script="analysis/metrics.py",
        code=["analysis/aa_floors.py", "analysis/columns.py", "analysis/paired.py", "rooflab/verdicts.py"],
        specs="rooflab/gpus.py",
    output:
        update("results/metrics/{gpu}/{kernel}.parquet"),
    params:
        verdicts=json.dumps(config.get("verdicts", {})),
    log:
        "logs/analysis/metrics/{gpu}/{kernel}.log",
    priority: ANALYSIS_PRIORITY
    resources:
        host=1,
    run:
        run_main("analysis.metrics", ["--raw", input.raw, "--ceilings", input.ceilings, "--paired", input.paired,
                                      "--verdicts", params.verdicts, "--out", output], log)


rule metrics:
    """Every (gpu, kernel) metrics file, each verdict judged again beyond its GPU's run-level A/A floors."""
    input:
        metrics=get_metrics,
        floors=get_aa_floors,
        code="analysis/aa_floors.py",
    output:
        update("results/metrics.parquet"),
    params:
        verdicts=json.dumps(config.get("verdicts", {})),
    log:
        "logs/analysis/metrics.log",
    priority: ANALYSIS_PRIORITY
    resources:
        host=1,
    run:
        run_main("analysis.metrics", ["--concat", input.metrics, "--floors", input.floors, "--verdicts",
                                      params.verdicts, "--out", output], log)


rule paired_verdicts:
    """Every comparison of the paired rounds with its interval and verdict, and the A/A test's rates: the paired
    rule on pairs known identical, the unpaired rule on such pairs timed apart (analysis/paired.py)."""
    input:
        paired=get_paired_of,
        raw=get_raw_of_gpu,
        repeatability=get_repeatability_of,
        script="analysis/paired.py",
        code=["analysis/aa_floors.py", "rooflab/gpus.py"],
        rules="rooflab/verdicts.py",
    output:
        table=update("results/paired/{gpu}.parquet"),
        aa=update("results/paired/aa_{gpu}.csv"),
        md=update("results/paired/{gpu}.md"),
    params:
        settings=json.dumps(config.get("verdicts", {})),
    log:
        "logs/analysis/paired_{gpu}.log",
    priority: ANALYSIS_PRIORITY
    resources:
        host=1,
    run:
        run_main("analysis.paired", ["--gpu", wildcards.gpu, "--paired", input.paired, "--raw", input.raw,
                                     "--repeatability", input.repeatability, "--settings", params.settings,
                                     "--out", output.table, "--aa", output.aa, "--md", output.md], log)


rule repeatability:
    """The sweep's rows against the same cells measured again in another process (rule repeat_measure), in every
    frame: results/raw/<gpu>/repeatability.csv, the paper's repeatability table (analysis/repeatability.py)."""
    input:
        sweep=get_repeat_sweep,
        again=get_repeat_again,
        script="analysis/repeatability.py",
    output:
        update("results/raw/{gpu}/repeatability.csv"),
    log:
        "logs/analysis/repeatability_{gpu}.log",
    wildcard_constraints:
        gpu=ON_A_GPU,
    resources:
        host=1,
    run:
        run_main("analysis.repeatability", ["--first", input.sweep, "--second", input.again, "--out", output[0]], log)


rule compare_reference:
    """This run against data/reference/<gpu>: cells that got slower or faster beyond noise (analysis/compare.py)."""
    input:
        raw=get_compare_now,
        reference=get_compare_reference,
        repeatability=get_compare_repeatability,
        script="analysis/compare.py",
        code=["analysis/columns.py", "rooflab/verdicts.py"],
    output:
        csv=update("results/compare/{gpu}.csv"),
        md=update("results/compare/{gpu}.md"),
    params:
        verdicts=config.get("verdicts", {}),
    log:
        "logs/analysis/compare_{gpu}.log",
    resources:
        host=1,
    conda:
        ENV
    script:
        "../analysis/compare.py"


rule projection_check:
    """Every measured GPU's cells projected onto itself and onto every other measured GPU (the datasheet, calibrated
    and scaled roofline models) against what that GPU measured: the error per class of cell (memory-bound of 1 MB or
    more, compute-bound, launch-bound), the paper's projection check (analysis/projection_check.py). With one GPU the
    outputs say that no projection has been checked yet."""
    input:
        metrics="results/metrics.parquet",
        script="analysis/projection_check.py",
        code=["analysis/calibration.py", "analysis/latex.py", "rooflab/gpus.py", "rooflab/verdicts.py"],
    output:
        cells=update("results/projection_check/cells.parquet"),
        summary=update("results/projection_check/summary.csv"),
        table=update("results/paper/generated/table_projection_check.tex"),
        macros=update("results/paper/generated/macros_projection_check.tex"),
    params:
        verdicts=json.dumps(config.get("verdicts", {})),
    log:
        "logs/analysis/projection_check.log",
    priority: ANALYSIS_PRIORITY
    resources:
        host=1,
    run:
        run_main("analysis.projection_check", ["--metrics", input.metrics, "--verdicts", params.verdicts,
                                               "--cells", output.cells, "--summary", output.summary,
                                               "--table", output.table, "--macros", output.macros], log)
