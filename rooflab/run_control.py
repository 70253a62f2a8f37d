"""What a snakemake run does around its jobs: the interpreter its shell rules call, the code stamps its measurement
jobs take as inputs, the background compile lanes it starts and stops, the record of a failed job's restored output,
and the one-screen summary at the end of ``all``.

The rule files (``rules/*.smk``) keep input functions only; they call this module with what it needs (the
``workflow`` object, the config), so each piece here is a plain function a test can call.
"""
from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path


def shell_python(workflow) -> str:
    """The interpreter every shell rule runs under: the one running snakemake (``sys.executable``), whether or not
    its environment is activated, so a rule never picks up another ``python`` from PATH. Under ``--use-conda`` (or
    ``--sdm conda``) a rule's own environment has its ``python`` first on PATH, and that one runs it, as snakemake's
    own ``script:`` directive chooses."""
    methods = {str(getattr(m, "name", m)).lower() for m in workflow.deployment_settings.deployment_method}
    return "python" if "conda" in methods else shlex.quote(sys.executable)


CODE_STAMPS = "results/code"  # what the measurement jobs take as their code inputs (code_stamp)
LANES_PID = Path("logs/warm/lanes.pid")  # the compile lanes' process group: onsuccess and onerror end it


def code_stamp(workflow, name: str, files) -> str:
    """results/code/<name>.digest: the digest of the files' code (rooflab/codehash.py: a Python file's syntax tree
    without docstrings; comments and layout are not in it), rewritten as the main snakemake process reads the DAG,
    only when it changes. A measurement job takes the stamps as its inputs instead of the files, so an edit of
    comments, docstrings or layout in a kernel or in the measurement code re-measures nothing and reruns no
    measurement job (the cell store would reuse every cell anyway, but the job, the analysis after it and every
    figure of the kernel would run again). Deleting results/code reruns the measurement jobs once (cells reused)."""
    from rooflab.codehash import code_digest

    path = Path(CODE_STAMPS, f"{name}.digest")
    digest = code_digest([Path(workflow.basedir, f) for f in files]) + "\n"
    if workflow.is_main_process and (not path.exists() or path.read_text() != digest):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(digest)
        os.replace(tmp, path)  # whole or not at all
    return str(path)


def measure_order(kernels, basedir) -> list[str]:
    """The kernels in the order their measurement jobs run (rules/common.smk gives each a priority from it). Kernels
    with a CUDA implementation last: their extensions build in the background from the first timing job on
    (rooflab/cuda_ext.py), and measured first they waited for the build (GeLU 44 s of its 76 on the H200). Among the
    rest, the ones the compile lanes (experiments/warm.py) need longest for later, so the lanes are done with them
    by their turn: first single-pass kernels that do not autotune (seconds of lane work each), then those with a
    fwd+bwd pass (twice the graphs), then those whose Triton autotunes (every config compiled; matmul, measured
    first, still compiled 31 s of configs itself beside its lane). Then by name. Read from the kernel folders' files:
    no kernel is imported at parse time."""

    def key(kernel):
        folder = Path(basedir, "kernels", kernel)
        text = "".join(p.read_text() for p in sorted(folder.glob("*.py")))
        return any(folder.glob("*.cu")), "triton.autotune" in text, '"fwd+bwd"' in text, kernel

    return sorted(kernels, key=key)


def start_compile_lanes(workflow, config) -> None:
    """From onstart: the torch.compile graphs of the measurement jobs about to run, compiled ahead in background
    processes (experiments/warm.py), the jobs in the order their priorities run them. Logs in logs/warm/."""
    from experiments import warm

    if "compile" not in config["impls"] or config.get("compile_lanes") == 0:
        return
    lanes = config.get("compile_lanes")  # None: the host's share, for GPU jobs only (on the CPU they would share
    # the cores the host timing runs on); a number: that many, for every job
    measures = ("measure", "measure_shapes", "measure_host", "measure_shapes_host")
    jobs = sorted((j for j in workflow.dag.needrun_jobs()
                   if j.rule.name in measures and (lanes is not None or j.wildcards_dict["gpu"] != "cpu")),
                  key=lambda j: (-j.priority, j.wildcards_dict["kernel"]))
    spec = [{
        "kernel": j.wildcards_dict["kernel"],
        "out": str(j.output.raw),
        "params": dict(j.params.sweep),
        "device": "cpu" if j.wildcards_dict["gpu"] == "cpu" else "cuda"
    } for j in jobs]
    lanes = warm.start(spec, Path("logs/warm/jobs.json"), Path("logs/warm/warm.log"), lanes, LANES_PID)
    if lanes:
        # the measurement jobs (children of this process) load what the lanes compiled: no compile-worker pool of
        # their own (rooflab/device.prepare_environment)
        os.environ.update(ROOFLAB_COMPILE_LANES=str(lanes))  # set, not required: no envvars directive
        print(
            f"rooflab: compiling the torch.compile cells of {len(spec)} measurement job(s) ahead in {lanes} "
            f"background process(es) (experiments/warm.py; log: logs/warm/warm.log)", file=sys.stderr)


def stop_compile_lanes() -> None:
    """The lanes outlive no run: a failed or interrupted one too (they would compile on beside the next)."""
    from experiments import warm

    warm.stop(LANES_PID)


def outdate_restored(workflow, logs) -> None:
    """A failed job's update() output comes back from its backup, and snakemake records the failed run's code,
    params and inputs for it: it would pass for up to date, and the next run would keep the stale file. For each
    file restored in this run, drop that record and give the file an old mtime (1970-01-02: snakemake reads 0 as
    unknown), so the next run redoes its job; the last good file stays readable until then. Tested in
    tests/test_workflow.py (snakemake is pinned below 10: the record is dropped through its persistence object)."""
    for logfile in logs if isinstance(logs, (list, tuple)) else [logs]:
        try:
            text = Path(logfile).read_text(errors="replace")
        except (OSError, TypeError):
            continue
        for rel in re.findall(r"Restored previous version of (\S+) \(updating job failed\)", text):
            try:
                workflow.persistence._delete_record(rel)
            except Exception as exc:  # a snakemake without it: say how to redo the job by hand
                print(f"rooflab: {rel} was restored after its job failed; rerun that job with --forcerun ({exc})")
            path = Path(workflow.basedir, rel)
            if path.exists():
                os.utime(path, (86400, 86400))


def print_summary(ok: bool, gpus, kernels, analysed: dict, reference_gpus, reference_dir: str, paper: str,
                  have_tex: bool) -> None:
    """One screen at the end of `all`: what ran, what was skipped and why, where the artefacts are."""
    import pandas as pd

    print("\n" + "=" * 78)
    print(f"rooflab: {'finished' if ok else 'stopped with errors'} (gpus: {', '.join(gpus)}; kernels measured: "
          f"{len(kernels)})")
    for gpu in gpus:
        kept = [k for k in analysed[gpu] if k not in kernels]
        if kept:
            print(f"  {gpu}: also analysed, as an earlier run left them: {', '.join(kept)}")
    rows = []
    for gpu in gpus:
        for kernel in analysed[gpu]:
            p = Path(f"results/raw/{gpu}/{kernel}.parquet")
            if p.exists():
                try:
                    rows.append(pd.read_parquet(p, columns=["gpu", "kernel", "status", "error"]))
                except Exception as exc:
                    print(f"  cannot read {p}: {exc}")
    if rows:
        df = pd.concat(rows)
        counts = df.groupby(["gpu", "kernel", "status"]).size().unstack(fill_value=0)
        print(counts.to_string())
        skipped = df[df.status.isin(["skipped", "failed", "mismatch"])].groupby(["status", "error"]).size()
        if len(skipped):
            print("\nnot measured, and why:")
            for (status, err), n in skipped.items():
                print(f"  {status:8s} x{n:<4d} {err[:110]}")
    for gpu in reference_gpus:
        print(f"reference data merged: {reference_dir}/{gpu}")
    print("\nmetrics:   results/metrics.parquet")
    print("figures:   results/figures/")
    print("notebooks: results/notebooks/")
    if have_tex:
        print(f"paper:     {paper}")
    else:
        print("paper:     no TeX engine here; sources packed in results/paper/rooflab-paper-src.tar.gz.")
        print(f"           Build elsewhere: see {paper}")
    print("report:    snakemake --report results/report.html")
    print("=" * 78)
