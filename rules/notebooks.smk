# Notebooks: one papermill run of notebooks/kernel.ipynb per (gpu, kernel), on that kernel's own metrics (another
# kernel's edit leaves it alone); the executed copy is kept and rendered, both in one process (notebooks/render.py).
# Off the paper's path, so they yield to the jobs on it (priority) when cores are short.


rule notebook:
    input:
        notebook="notebooks/kernel.ipynb",
        script="notebooks/render.py",
        metrics="results/metrics/{gpu}/{kernel}.parquet",
    output:
        ipynb=update("results/notebooks/{gpu}/{kernel}.ipynb"),
        html=update(report(
            "results/notebooks/{gpu}/{kernel}.html",
            category="Notebooks",
            caption="../report/notebook.rst",
            labels={"notebook": "kernel", "gpu": "{gpu}", "kernel": "{kernel}"},
        )),
    log:
        "logs/notebooks/{gpu}/{kernel}.log",
    priority: -1
    resources:
        host=1,
    conda:
        ENV
    shell:
        "python {input.script} --notebook {input.notebook} --kernel {wildcards.kernel} --gpu {wildcards.gpu} "
        "--metrics {input.metrics} --ipynb {output.ipynb} --html {output.html} > {log} 2>&1"
