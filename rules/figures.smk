# Figures: one script per figure (figures/<name>.py), PDF for the paper and PNG for the report.
# The script is an input, so editing it redraws that figure (and rebuilds the paper) only; so are the claim rules the
# figures share with the paper (analysis/claims.py: ties, findings; analysis/calibration.py: projections).
# Every PNG enters the report tagged with its figure, GPU and kernel ('all' for a figure of the whole GPU).

# Figures that read more than the metrics get their own rule (below); the generic rules leave them alone.
OWN_RULE_FIGURES = ["fusion"]


rule figure_gpu:
    input:
        metrics="results/metrics.parquet",
        script="figures/{fig}.py",
        common="figures/_common.py",
        claims=["analysis/claims.py", "analysis/calibration.py"],
    output:
        pdf=update("results/figures/{gpu}/{fig}.pdf"),
        png=update(report(
            "results/figures/{gpu}/{fig}.png",
            category="Figures",
            subcategory="{fig}",
            labels={"figure": "{fig}", "gpu": "{gpu}", "kernel": "all"},
        )),
    log:
        "logs/figures/{gpu}/{fig}.log",
    wildcard_constraints:
        fig="|".join(f for f in GPU_FIGURES if f not in OWN_RULE_FIGURES) or "NONE",
    conda:
        ENV
    shell:
        "python -m figures.{wildcards.fig} --metrics {input.metrics} --gpu {wildcards.gpu} "
        "--pdf {output.pdf} --png {output.png} > {log} 2>&1"


rule figure_kernel:
    input:
        metrics="results/metrics.parquet",
        script="figures/{fig}.py",
        common="figures/_common.py",
        claims=["analysis/claims.py", "analysis/calibration.py"],
    output:
        pdf=update("results/figures/{gpu}/{fig}/{kernel}.pdf"),
        png=update(report(
            "results/figures/{gpu}/{fig}/{kernel}.png",
            category="Figures",
            subcategory="{fig}",
            labels={"figure": "{fig}", "gpu": "{gpu}", "kernel": "{kernel}"},
        )),
    log:
        "logs/figures/{gpu}/{fig}/{kernel}.log",
    wildcard_constraints:
        fig="|".join(KERNEL_FIGURES) or "NONE",
    conda:
        ENV
    shell:
        "python -m figures.{wildcards.fig} --metrics {input.metrics} --gpu {wildcards.gpu} --kernel {wildcards.kernel} "
        "--pdf {output.pdf} --png {output.png} > {log} 2>&1"


rule figure_fusion:
    input:
        metrics="results/metrics.parquet",
        profiles=get_profiles_of,
        script="figures/fusion.py",
        common="figures/_common.py",
        claims=["analysis/claims.py", "analysis/calibration.py"],
    output:
        pdf=update("results/figures/{gpu}/fusion.pdf"),
        png=update(report(
            "results/figures/{gpu}/fusion.png",
            category="Figures",
            subcategory="fusion",
            labels={"figure": "fusion", "gpu": "{gpu}", "kernel": "all"},
        )),
    log:
        "logs/figures/{gpu}/fusion.log",
    conda:
        ENV
    shell:
        "python -m figures.fusion --metrics {input.metrics} --gpu {wildcards.gpu} --profiles {input.profiles} "
        "--pdf {output.pdf} --png {output.png} > {log} 2>&1"
