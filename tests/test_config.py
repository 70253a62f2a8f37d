"""Configuration errors stop snakemake before any job, with a message naming the key and the value."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rooflab import config as rcfg

REPO = Path(__file__).resolve().parent.parent
SCHEMA = rcfg.load_schema(REPO)


def dry_run(*config: str, configfile: Path | None = None) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "snakemake", "-n", "--quiet", "rules"]
    if configfile:
        args += ["--configfile", str(configfile)]
    if config:
        args += ["--config", *config]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("entry, key, value", [
    ('kernels=["gelu","nope"]', "kernels", "nope"),
    ('impls=["naive","fast"]', "impls[1]", "fast"),
    ('dtypes=["float8"]', "dtypes[0]", "float8"),
    ('gpus=["v100"]', "gpus[0]", "v100"),
    ("sizes=[0]", "sizes[0]", "0"),
    ("sizes=[-4]", "sizes[0]", "-4"),
    ("sizes=[1.5]", "sizes[0]", "1.5"),
    ("sizes=abc", "sizes[0]", "abc"),
    ("sizes=[]", "sizes", "[]"),
    ("kernels=[]", "kernels", "[]"),
    ("impls=[]", "impls", "[]"),
    ("frobnicate=1", "", "frobnicate"),
    ('timing={"warmup_ms":"soon"}', "timing.warmup_ms", "soon"),
    ('cluster={"h10":{"gres":"gpu:1"}}', "cluster", "h10"),
])
def test_bad_config_stops_before_any_job(entry, key, value):
    res = dry_run(entry)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert f"'{key}'" in out or not key, out
    assert value in out, out
    assert "Job stats" not in out and "Building DAG" not in out, out


def test_bad_configfile_names_key_and_value(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(yaml.safe_dump({"sizes": [256, "big"], "dtypes": ["float32"], "colour": "blue"}))
    res = dry_run(configfile=cfg)
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert "config key 'sizes[1]' = 'big'" in out, out
    assert "'colour' was unexpected" in out, out


def test_good_config_from_the_command_line_is_typed():
    res = dry_run('kernels=["gelu"]', "sizes=[64,128]", "interpret_max_size=64", 'timing={"max_time_s":"0.01"}')
    assert res.returncode == 0, res.stdout + res.stderr


def test_coerce_follows_the_schema():
    raw = {"sizes": ["64", "128"], "extra_sizes": "300", "timing": {"max_time_s": "0.5", "flush_l2": "false"},
           "allow_failures": "true", "kernels": ["gelu"], "cluster": {"h100": {"runtime": "30", "gres": "gpu:1"}}}
    out = rcfg.coerce(raw, SCHEMA)
    assert out["sizes"] == [64, 128] and out["extra_sizes"] == [300]
    assert out["timing"] == {"max_time_s": 0.5, "flush_l2": False} and out["allow_failures"] is True
    assert out["cluster"]["h100"] == {"runtime": 30, "gres": "gpu:1"}
    assert rcfg.coerce({"sizes": ["abc"]}, SCHEMA) == {"sizes": ["abc"]}  # left for the schema to report


def test_shipped_configs_are_valid():
    for name in ("config.yaml", "cpu.yaml", "cluster.yaml"):
        cfg = yaml.safe_load((REPO / "config" / name).read_text())
        if name == "cluster.yaml":
            cfg = {**yaml.safe_load((REPO / "config/config.yaml").read_text()), **cfg}
        rcfg.check_schema(cfg, SCHEMA)
