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
    # papermill's kernel can die at its start when a notebook started beside it took the port it picked (ZMQ
    # "Address already in use", seen on the H200's 16 cores): that is no answer about the notebook, so it runs again
    retries: 2
    resources:
        host=1,
    conda:
        ENV
    params:
        python=PYTHON,
    shell:
        "{params.python} {input.script} --notebook {input.notebook} --kernel {wildcards.kernel} --gpu {wildcards.gpu} "
        "--metrics {input.metrics} --ipynb {output.ipynb} --html {output.html} > {log} 2>&1"
