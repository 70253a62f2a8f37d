"""Configuration helpers for the Snakefile: which config is the default here, and the checks a schema cannot make.

Kept free of torch imports: the Snakefile is parsed for every job (and on cluster nodes).
"""
from __future__ import annotations

from pathlib import Path

from rooflab.gpus import CPU_KEY, detect_key, nvidia_smi_names
from rooflab.kernel import kernel_names


class ConfigError(ValueError):
    """A configuration value the schema accepts but the project cannot use; the message names the key."""


def default_configfile(basedir: str | Path) -> Path:
    """config/config.yaml on a machine with an NVIDIA GPU, else the embedded CPU configuration."""
    basedir = Path(basedir)
    return basedir / ("config/config.yaml" if nvidia_smi_names() else "config/cpu.yaml")


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
    if not config.get("sizes"):
        raise ConfigError("config key 'sizes' is empty: the sweep would measure nothing")
    return {**config, "kernels": kernels, "gpus": list(dict.fromkeys(gpus))}


def sweep_params(config: dict) -> dict:
    """The part of the config a measurement job depends on (its params: a change reruns the job)."""
    keys = ("sizes", "extra_sizes", "dtypes", "impls", "timing", "interpret_max_size", "seed", "allow_failures",
            "reuse_cells", "cache_dirs")
    return {k: config.get(k) for k in keys}
