# Notebooks: one papermill run of notebooks/kernel.ipynb per (gpu, kernel); the executed copy is kept and rendered.


rule notebook:
    input:
        notebook="notebooks/kernel.ipynb",
        metrics="results/metrics.parquet",
    output:
        ipynb=update("results/notebooks/{gpu}/{kernel}.ipynb"),
        html=update(report(
            "results/notebooks/{gpu}/{kernel}.html",
            category="Notebooks",
            labels={"notebook": "kernel", "gpu": "{gpu}", "kernel": "{kernel}"},
        )),
    log:
        "logs/notebooks/{gpu}/{kernel}.log",
    conda:
        ENV
    shell:
        "(papermill --kernel python3 --language python --no-progress-bar {input.notebook} {output.ipynb} "
        "-p kernel {wildcards.kernel} -p gpu {wildcards.gpu} -p metrics_path {input.metrics} "
        "&& jupyter nbconvert --to html --output-dir $(dirname {output.html}) {output.ipynb}) > {log} 2>&1"
