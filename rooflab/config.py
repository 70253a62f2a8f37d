"""Configuration helpers for the Snakefile: which config is the default here, and the checks a schema cannot make.

Kept free of torch imports: the Snakefile is parsed for every job (and on cluster nodes).
"""
from __future__ import annotations

from pathlib import Path

from rooflab.gpus import CPU_KEY, SPECS, detect_key, nvidia_smi_names
from rooflab.kernel import kernel_names


class ConfigError(ValueError):
    """A configuration value the schema accepts but the project cannot use; the message names the key."""


def default_configfile(basedir: str | Path) -> Path:
    """config/config.yaml on a machine with an NVIDIA GPU, else the embedded CPU configuration."""
    basedir = Path(basedir)
    return basedir / ("config/config.yaml" if nvidia_smi_names() else "config/cpu.yaml")


def load_schema(basedir: str | Path) -> dict:
    import yaml

    return yaml.safe_load((Path(basedir) / "config/schema.yaml").read_text())


def coerce(config: dict, schema: dict) -> dict:
    """Turn the strings of `snakemake --config` into the types the schema asks for, where they parse.

    `--config sizes=[64]` reaches the Snakefile as ['64'] (snakemake parses lists and mappings with YAML's
    BaseLoader). A string that does not parse is left as it is, so validation names the key and the bad value.
    """

    def walk(value, node):
        kinds = node.get("type")
        if isinstance(value, dict):
            props = node.get("properties", {})
            patterns = node.get("patternProperties", {})
            extra = next(iter(patterns.values()), {})
            return {k: walk(v, props.get(k, extra)) for k, v in value.items()}
        if kinds == "array" and isinstance(value, (str, int, float)):  # sizes=64 means [64]
            value = [value]
        if isinstance(value, list):
            return [walk(v, node.get("items", {})) for v in value]
        if not isinstance(value, str):
            return value
        if kinds == "integer" and value.strip().lstrip("+-").isdigit():
            return int(value)
        if kinds == "number":
            try:
                return float(value)
            except ValueError:
                return value
        if kinds == "boolean" and value.lower() in ("true", "false"):
            return value.lower() == "true"
        return value

    return walk(config, schema)


def check_schema(config: dict, schema: dict) -> None:
    """Every schema violation at once, one line each naming the key and the value (snakemake's own validate
    reports only the first, after a dump of the schema)."""
    from jsonschema import Draft202012Validator

    problems = []
    for err in sorted(Draft202012Validator(schema).iter_errors(config), key=lambda e: list(map(str, e.path))):
        key = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.path).lstrip(".")
        if key:
            problems.append(f"config key '{key}' = {err.instance!r}: {err.message}")
        else:
            problems.append(f"config: {err.message}")
    if problems:
        raise ConfigError("invalid configuration (config/schema.yaml documents every key):\n  " +
                          "\n  ".join(problems))


def resolve(config: dict, kernels_dir: Path | None = None) -> dict:
    """Expand 'all' and 'auto' and check kernel names; raise ConfigError naming the key and value."""
    known = kernel_names(kernels_dir) if kernels_dir else kernel_names()
    kernels = list(config.get("kernels") or [])
    if not kernels:
        raise ConfigError("config key 'kernels' is empty: name at least one kernel, or [all]")
    if kernels == ["all"]:
        kernels = known
    unknown = [k for k in kernels if k not in known]
    if unknown:
        raise ConfigError(f"config key 'kernels' has unknown value(s) {unknown}: known kernels are {known} "
                          f"(files kernels/<name>.py), or [all]")
    gpus = [detect_key() if g == "auto" else g for g in config.get("gpus") or [CPU_KEY]]
    known_gpus = [CPU_KEY, *SPECS]
    stray = [g for g in (config.get("cluster") or {}) if g not in known_gpus]
    if stray:
        raise ConfigError(f"config key 'cluster' has unknown gpu key(s) {stray}: use {known_gpus}")
    if not config.get("sizes"):
        raise ConfigError("config key 'sizes' is empty: the sweep would measure nothing")
    return {**config, "kernels": kernels, "gpus": list(dict.fromkeys(gpus))}


def sweep_params(config: dict) -> dict:
    """The part of the config a measurement job depends on (its params: a change reruns the job)."""
    keys = ("sizes", "extra_sizes", "dtypes", "impls", "timing", "interpret_max_size", "seed", "allow_failures",
            "reuse_cells", "cache_dirs")
    return {k: config.get(k) for k in keys}


def cluster_resource(config: dict, gpu: str, key: str):
    """config['cluster'][gpu][key] for profiles/slurm, or None: an unset resource is left out of the sbatch call
    (an empty string would still reach it, e.g. as `-C ''`)."""
    return (config.get("cluster") or {}).get(gpu, {}).get(key) or None
