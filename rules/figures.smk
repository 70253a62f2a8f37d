# Figures: one script per figure (figures/<name>.py), PDF for the paper and PNG for the report, drawn by
# python -m figures: each device figure of one GPU in a job of its own (figure_gpu: every kernel's metrics of that
# GPU; the CPU gets no GPU-only concept), and the kernel figures of one (GPU, kernel) in one job (figures_kernel),
# from that kernel's own metrics file, so an edit of one kernel redraws that kernel's figures and the device
# figures of its GPU only. The scripts are inputs, so editing one redraws the jobs that draw it (and rebuilds the
# paper) only; so are the claim rules the figures share with the paper (analysis/claims.py: ties, findings;
# analysis/calibration.py).
# Every PNG enters the report tagged with its figure, GPU and kernel ('all' for a figure of the whole GPU), with its
# caption (report/figure.rst, report/kernel_figure.rst: what the figure shows, per figure, no measured number).
# The jobs run python -m figures's main in warm worker processes (rooflab/workers.py: matplotlib imported once per
# worker, as many figures at once as the cores allow).

from rooflab.workers import run_main

FIGURE_CODE = ["figures/__init__.py", "figures/__main__.py", "figures/_common.py", "analysis/claims.py",
               "analysis/calibration.py", "analysis/columns.py",
               "analysis/why_tables.py"]  # why_tables: the scaling figure's crossovers


rule figure_gpu:
    input:
        metrics=get_metrics_of,
        profiles=get_profiles_of,
        floors="results/paired/floors_{gpu}.csv",
        script="figures/{fig}.py",
        code=FIGURE_CODE + ["analysis/aa_floors.py"],
    output:
        pdf=update("results/figures/{gpu}/{fig}.pdf"),
        png=update(report("results/figures/{gpu}/{fig}.png", category="Figures", subcategory="{fig}",
                          caption="../report/figure.rst",
                          labels={"figure": "{fig}", "gpu": "{gpu}", "kernel": "all"})),
    params:
        verdicts=json.dumps(config.get("verdicts", {})),
    log:
        "logs/figures/{gpu}/{fig}.log",
    wildcard_constraints:
        fig="|".join(GPU_FIGURES) or "NONE",
    priority: 1  # the longest figures (1-4 s each, against 0.4-1 s for a kernel's) first: no long one left at the end
    resources:
        host=1,
    run:
        run_main("figures.__main__", ["--gpu", wildcards.gpu, "--metrics", input.metrics, "--profiles",
                                      input.profiles, "--floors", input.floors, "--verdicts", params.verdicts,
                                      "--outdir", "results/figures", wildcards.fig], log)


rule figures_kernel:
    input:
        metrics="results/metrics/{gpu}/{kernel}.parquet",
        scripts=expand("figures/{fig}.py", fig=KERNEL_FIGURES),
        code=FIGURE_CODE,
    output:
        pdf=[update(f"results/figures/{{gpu}}/{fig}/{{kernel}}.pdf") for fig in KERNEL_FIGURES],
        png=[update(report(f"results/figures/{{gpu}}/{fig}/{{kernel}}.png", category="Figures", subcategory=fig,
                           caption="../report/kernel_figure.rst",
                           labels={"figure": fig, "gpu": "{gpu}", "kernel": "{kernel}"})) for fig in KERNEL_FIGURES],
    log:
        "logs/figures/{gpu}/kernels/{kernel}.log",
    resources:
        host=1,
    run:
        run_main("figures.__main__", ["--gpu", wildcards.gpu, "--kernel", wildcards.kernel, "--metrics",
                                      input.metrics, "--outdir", "results/figures", KERNEL_FIGURES], log)
