# Figures: one script per figure (figures/<name>.py), PDF for the paper and PNG for the report, drawn in one process
# per job (python -m figures): all the device figures of one GPU (figures_gpu; the CPU's, without the GPU-only
# concepts: figures_cpu), and the kernel figures of one (GPU, kernel) (figures_kernel), from its own metrics file,
# so an edit of one kernel redraws that kernel's figures and the device figures only.
# The scripts are inputs, so editing one redraws the jobs that draw it (and rebuilds the paper) only; so are the
# claim rules the figures share with the paper (analysis/claims.py: ties, findings; analysis/calibration.py).
# Every PNG enters the report tagged with its figure, GPU and kernel ('all' for a figure of the whole GPU).

FIGURE_CODE = ["figures/__init__.py", "figures/__main__.py", "figures/_common.py", "analysis/claims.py",
               "analysis/calibration.py"]


rule figures_gpu:
    input:
        metrics=get_metrics_of,
        profiles=get_profiles_of,
        scripts=expand("figures/{fig}.py", fig=GPU_FIGURES),
        code=FIGURE_CODE,
    output:
        pdf=[update(f"results/figures/{{gpu}}/{fig}.pdf") for fig in GPU_FIGURES],
        png=[update(report(f"results/figures/{{gpu}}/{fig}.png", category="Figures", subcategory=fig,
                           labels={"figure": fig, "gpu": "{gpu}", "kernel": "all"})) for fig in GPU_FIGURES],
    log:
        "logs/figures/{gpu}.log",
    wildcard_constraints:
        gpu=DEVICES,
    resources:
        host=1,
    conda:
        ENV
    shell:
        "python -m figures --gpu {wildcards.gpu} --metrics {input.metrics} --profiles {input.profiles} "
        "--outdir results/figures " + " ".join(GPU_FIGURES) + " > {log} 2>&1"


rule figures_cpu:
    input:
        metrics=get_cpu_metrics,
        profiles=get_cpu_profiles,
        scripts=expand("figures/{fig}.py", fig=CPU_FIGURES),
        code=FIGURE_CODE,
    output:
        pdf=[update(f"results/figures/cpu/{fig}.pdf") for fig in CPU_FIGURES],
        png=[update(report(f"results/figures/cpu/{fig}.png", category="Figures", subcategory=fig,
                           labels={"figure": fig, "gpu": "cpu", "kernel": "all"})) for fig in CPU_FIGURES],
    log:
        "logs/figures/cpu.log",
    resources:
        host=1,
    conda:
        ENV
    shell:
        "python -m figures --gpu cpu --metrics {input.metrics} --profiles {input.profiles} "
        "--outdir results/figures " + " ".join(CPU_FIGURES) + " > {log} 2>&1"


rule figures_kernel:
    input:
        metrics="results/metrics/{gpu}/{kernel}.parquet",
        scripts=expand("figures/{fig}.py", fig=KERNEL_FIGURES),
        code=FIGURE_CODE,
    output:
        pdf=[update(f"results/figures/{{gpu}}/{fig}/{{kernel}}.pdf") for fig in KERNEL_FIGURES],
        png=[update(report(f"results/figures/{{gpu}}/{fig}/{{kernel}}.png", category="Figures", subcategory=fig,
                           labels={"figure": fig, "gpu": "{gpu}", "kernel": "{kernel}"})) for fig in KERNEL_FIGURES],
    log:
        "logs/figures/{gpu}/{kernel}.log",
    resources:
        host=1,
    conda:
        ENV
    shell:
        "python -m figures --gpu {wildcards.gpu} --kernel {wildcards.kernel} --metrics {input.metrics} "
        "--outdir results/figures " + " ".join(KERNEL_FIGURES) + " > {log} 2>&1"
