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


@pytest.mark.parametrize("entry, key, value", [('kernels=["gelu","nope"]', "kernels", "nope"),
                                               ('impls=["naive","fast"]', "impls[1]", "fast"),
                                               ('dtypes=["float8"]', "dtypes[0]", "float8"),
                                               ('gpus=["v100"]', "gpus[0]", "v100"), ("sizes=[0]", "sizes[0]", "0"),
                                               ("sizes=[-4]", "sizes[0]", "-4"), ("sizes=[1.5]", "sizes[0]", "1.5"),
                                               ("sizes=abc", "sizes[0]", "abc"), ("sizes=[]", "sizes", "[]"),
                                               ("kernels=[]", "kernels", "[]"), ("impls=[]", "impls", "[]"),
                                               ("frobnicate=1", "", "frobnicate"),
                                               ('timing={"warmup_ms":"soon"}', "timing.warmup_ms", "soon"),
                                               ('cluster={"h10":{"gres":"gpu:1"}}', "cluster", "h10"), ])
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
    raw = {
        "sizes": ["64", "128"],
        "extra_sizes": "300",
        "timing": {
            "max_time_s": "0.5",
            "flush_l2": "false"
        },
        "allow_failures": "true",
        "kernels": ["gelu"],
        "cluster": {
            "h100": {
                "runtime": "30",
                "gres": "gpu:1"
            }
        }
    }
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


# ---- one source of truth: every default is written once, in config/schema.yaml -----------------------------------

DEFAULTS = rcfg.schema_defaults()
# the settings whose defaults the schema holds and code must not restate: timing and ceilings (and ceilings.timing)
SETTING_KEYS = set(SCHEMA["properties"]["timing"]["properties"]) | set(SCHEMA["properties"]["ceilings"]["properties"])
# the code of a run (scripts/ and lab/ are benchmarks that probe timer variants on purpose, not a run's settings)
PRODUCT_DIRS = ("rooflab", "experiments", "analysis", "figures", "kernels")


def test_timing_config_defaults_are_the_schemas():
    import dataclasses

    from rooflab.timing import TimingConfig

    props = SCHEMA["properties"]["timing"]["properties"]
    assert {f.name for f in dataclasses.fields(TimingConfig)} == set(props)  # one field per schema key, no more
    assert all("default" in p for p in props.values()), "every timing key needs a default in the schema"
    assert TimingConfig() == TimingConfig(**DEFAULTS["timing"])
    assert dataclasses.asdict(TimingConfig()) == DEFAULTS["timing"]
    assert TimingConfig.from_config({}) == TimingConfig()


def test_schema_defaults_are_what_the_dag_validates_to():
    """rooflab.config.fill_defaults fills what snakemake's validate fills (scripts and TimingConfig rely on it)."""
    import copy

    from snakemake.utils import validate

    for name in ("config.yaml", "cpu.yaml"):
        raw = yaml.safe_load((REPO / "config" / name).read_text())
        validated = copy.deepcopy(raw)
        validate(validated, str(REPO / "config/schema.yaml"))
        assert rcfg.validated_config(REPO / "config" / name) == validated, name
    assert rcfg.validated_config(REPO / "config/config.yaml")["timing"] == {
        **DEFAULTS["timing"], "instances": 8,
        "min_instances": 4
    }


def _calls(tree, name):
    import ast

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if (f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None) == name:
                yield node


def test_no_literal_timing_defaults_in_code():
    """No timing or ceilings default restated in product code: no TimingConfig(...) built from literals, no
    params.get("<setting>", <literal>) fallback, no literal default on a TimingConfig field. Settings come from the
    validated config (a rule's params) or rooflab.config.schema_defaults()."""
    import ast

    problems = []
    for d in PRODUCT_DIRS:
        for path in sorted((REPO / d).glob("**/*.py")):
            tree = ast.parse(path.read_text(), str(path))
            where = path.relative_to(REPO)
            for call in _calls(tree, "TimingConfig"):
                if call.keywords or call.args:
                    problems.append(f"{where}:{call.lineno}: TimingConfig(...) with settings of its own")
            for call in _calls(tree, "get"):
                if (len(call.args) == 2 and isinstance(call.args[0], ast.Constant)
                        and call.args[0].value in SETTING_KEYS
                        and isinstance(call.args[1], (ast.Constant, ast.List, ast.Tuple, ast.BinOp))):
                    problems.append(f"{where}:{call.lineno}: .get({call.args[0].value!r}, <literal default>)")
            for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "TimingConfig"):
                for field in cls.body:
                    if isinstance(field, ast.AnnAssign) and isinstance(field.value, ast.Constant):
                        problems.append(f"{where}:{field.lineno}: TimingConfig field with a literal default")
    assert not problems, "\n".join(problems)


def test_shipped_configs_restate_no_timing_or_ceilings_default():
    """config.yaml and cpu.yaml hold only the timing and ceilings settings they change (the rest is the schema's)."""

    def restated(cfg, defaults, prefix=""):
        for key, value in cfg.items():
            if isinstance(value, dict) and isinstance(defaults.get(key), dict):
                yield from restated(value, defaults[key], f"{prefix}{key}.")
            elif key in defaults and value == defaults[key]:
                yield f"{prefix}{key}"

    for name in ("config.yaml", "cpu.yaml"):
        cfg = yaml.safe_load((REPO / "config" / name).read_text())
        found = [
            k for section in ("timing", "ceilings")
            for k in restated(cfg.get(section, {}), DEFAULTS[section], f"{section}.")
        ]
        assert not found, f"config/{name} restates schema defaults {found}: leave them to config/schema.yaml"


def test_ceilings_settings_are_named_in_the_schema():
    """The ceilings job's own timer (a longer warm-up, no loop time) is ceilings.timing, over timing's defaults; a
    caller that leaves keys out gets the validated config's values."""
    from experiments.ceilings import settings
    from rooflab.timing import TimingConfig

    p = settings({"gemm_sizes": [64]})
    assert p["gemm_sizes"] == [64] and p["copy_bytes"] == DEFAULTS["ceilings"]["copy_bytes"]
    assert {k: p[k] for k in ("placements", "warm_translations", "instances")} == \
        {k: DEFAULTS["timing"][k] for k in ("placements", "warm_translations", "instances")}
    cfg, own = TimingConfig.from_config(p["timing"]), DEFAULTS["ceilings"]["timing"]
    assert cfg.warmup_ms == own["warmup_ms"] > TimingConfig().warmup_ms
    assert cfg.loop_ms == 0 and cfg.target_rse == TimingConfig().target_rse
    assert settings({"timing": {"warmup_ms": 5}})["timing"]["max_time_s"] == own["max_time_s"]
