"""profiles/slurm end to end on a real one-node Slurm cluster (scripts/slurm_cluster.sh), about a minute and a half.

The tiny CPU sweep goes through snakemake-executor-plugin-slurm: measure_host and ceilings are submitted with sbatch
(partition and gres from config['cluster']), everything else runs locally, and the results are complete.
Skipped only where slurm is not installed and cannot be (not root, or no apt-get).
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_workflow import TINY, copy_repo

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts/slurm_cluster.sh"


@pytest.fixture(scope="module")
def slurm_available():
    res = subprocess.run(["bash", str(SCRIPT), "install"], capture_output=True, text=True, timeout=900)
    if res.returncode == 3:
        pytest.skip(f"slurm is not installed and cannot be installed here: {res.stderr.strip()}")
    assert res.returncode == 0, res.stderr


def test_profile_slurm_end_to_end(slurm_available, tmp_path):
    work = copy_repo(tmp_path)
    cfg = {**TINY, "cluster": {"cpu": {"slurm_partition": "debug", "gres": "gpu:1", "runtime": 10}}}
    (work / "tiny.yaml").write_text(json.dumps(cfg))
    env = {
        **os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "TRITON_INTERPRET": "1",
        "ROOFLAB_SLURM_TIMEOUT": "360",
        "ROOFLAB_SLURM_DIR": str(tmp_path / "slurm")
    }
    # the target first: --default-resources takes every word after it
    res = subprocess.run([
        "bash", "scripts/slurm_cluster.sh", "run", "all", "--configfile", "tiny.yaml", "--verbose",
        "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "2", "--default-resources",
        "mem_mb=1000", "cpus_per_task=1"
    ], cwd=work, env=env, capture_output=True, text=True, timeout=480)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-8000:]

    # the device jobs went through sbatch, with the partition and gres of config['cluster']['cpu']
    submitted = re.findall(r"Job \d+ has been submitted with SLURM jobid \d+ \(log: .*?slurm_logs/rule_(\w+)/", out)
    assert submitted.count("measure_host") == 2 and submitted.count("ceilings") == 1, submitted
    calls = [line for line in out.splitlines() if "sbatch call:" in line]
    assert len(calls) == len(submitted) and all("--gres=gpu:1" in c and "debug" in c for c in calls), calls
    # the rest ran here
    for rule in ("metrics", "notebook", "all"):
        assert re.search(rf"^localrule {rule}:", out, flags=re.M), rule
    assert set(re.findall(r"^rule (\w+):", out, flags=re.M)) == set(submitted)

    for rel in ("results/raw/cpu/gelu.parquet", "results/raw/cpu/vecadd.parquet", "results/raw/cpu/ceilings.parquet",
                "results/metrics.parquet", "results/notebooks/cpu/gelu.html"):
        assert (work / rel).stat().st_size > 0, rel
    assert "rooflab: finished" in out
    assert "[slurm_cluster] stopped" in out  # every daemon stopped by its pid
