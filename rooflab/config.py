"""Configuration helpers for the Snakefile: which config is the default here, and the checks a schema cannot make.

Kept free of torch imports: the Snakefile is parsed for every job (and on cluster nodes).

`python -m rooflab.config SNAKEMAKE_ARGS...` (run.sh, before snakemake): checks that every --configfile exists and
parses (snakemake says only "not valid JSON or YAML"), and says which configuration runs when none is given.
"""
from __future__ import annotations

import copy
import functools
import sys
from pathlib import Path

from rooflab.gpus import CPU_KEY, SPECS, detect_gpus, detect_key, gpu_names
from rooflab.kernel import kernel_names
from rooflab.shapes import SQUARE, ShapeError, shape_sets


class ConfigError(ValueError):
    """A configuration value the schema accepts but the project cannot use; the message names the key."""


def default_configfile(basedir: str | Path) -> Path:
    """config/config.yaml on a machine with an NVIDIA GPU, else the embedded CPU configuration."""
    basedir = Path(basedir)
    return basedir / ("config/config.yaml" if gpu_names() else "config/cpu.yaml")


def configfile_args(args: list[str]) -> list[str]:
    """The files snakemake takes from --configfile/--configfiles in `args` (each option takes every word up to the
    next option) and from --configfile=FILE."""
    files, taking = [], False
    for a in args:
        if a in ("--configfile", "--configfiles"):
            taking = True
        elif a.startswith(("--configfile=", "--configfiles=")):
            files.append(a.partition("=")[2])
            taking = False
        elif a.startswith("-"):
            taking = False
        elif taking:
            files.append(a)
    return files


def dotted_config_problems(args: list[str]) -> list[str]:
    """Why snakemake would refuse the --config entries of `args` whose key has a dot (it takes top-level keys only,
    with an error that names none of them): each with the form it takes."""
    problems, taking = [], False
    for a in args:
        if a == "--config":
            taking = True
            continue
        if a.startswith("--config="):
            a, taking = a.partition("=")[2], False
        elif a.startswith("-"):
            taking = False
            continue
        elif not taking:
            continue
        key, eq, value = a.partition("=")
        if eq and "." in key:
            head, _, rest = key.partition(".")
            nested = value
            for part in reversed(rest.split(".")):
                nested = f"{{{part}: {nested}}}"
            problems.append(f"--config {a}: snakemake takes no dotted keys; write {head}='{nested}'")
    return problems


def configfile_problem(path: str | Path) -> str | None:
    """Why snakemake could not read the configfile `path` (missing, unreadable, neither JSON nor YAML, not a
    mapping), or None."""
    import json

    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            try:
                data = json.load(f)  # snakemake's order: JSON, then YAML
            except ValueError:
                f.seek(0)
                data = yaml.safe_load(f)
    except FileNotFoundError:
        return (f"configfile {path} not found (in {Path.cwd()}); note that --configfile takes every word up to the "
                f"next option, so put targets before it")
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        return f"configfile {path}{where}: not valid YAML:\n{e}"
    except (OSError, UnicodeDecodeError) as e:
        return f"configfile {path} cannot be read: {e}"
    if not isinstance(data, dict):
        return f"configfile {path}: needs keys at the top level (key: value), found {type(data).__name__}"
    return None


REPO = Path(__file__).resolve().parent.parent


def load_schema(basedir: str | Path = REPO) -> dict:
    import yaml

    return yaml.safe_load((Path(basedir) / "config/schema.yaml").read_text())


def fill_defaults(config: dict, schema: dict) -> dict:
    """`config` with the schema's defaults filled in where a key is missing, nested objects too: what
    snakemake.utils.validate fills (the DAG's validated config), without snakemake."""
    out = dict(config)
    for key, node in schema.get("properties", {}).items():
        if key not in out and "default" in node:
            out[key] = copy.deepcopy(node["default"])
        if isinstance(out.get(key), dict) and node.get("type") == "object":
            out[key] = fill_defaults(out[key], node)
    return out


@functools.lru_cache(maxsize=1)
def _defaults() -> dict:
    return fill_defaults({}, load_schema())


def schema_defaults() -> dict:
    """Every default of config/schema.yaml (read once), as the validated config holds them: the one place a setting's
    default is written. rooflab.timing.TimingConfig takes its defaults from ``schema_defaults()["timing"]``."""
    return copy.deepcopy(_defaults())


def validated_config(path: str | Path) -> dict:
    """A configfile as the DAG sees it after validation: its keys over the schema's defaults (for scripts that read a
    config outside snakemake; the schema's checks are the DAG's: check_schema)."""
    import yaml

    return fill_defaults(yaml.safe_load(Path(path).read_text()) or {}, load_schema())


def coerce(config: dict, schema: dict) -> dict:
    """Turn the strings of `snakemake --config` into the types the schema asks for, where they parse.

    `--config sizes=[64]` reaches the Snakefile as ['64'] (snakemake parses lists and mappings with YAML's
    BaseLoader). A string that does not parse is left as it is, so validation names the key and the bad value.
    """

    def walk(value, node):
        if "anyOf" in node:  # the branch meant for this kind of value (shapes: a preset name, or a mapping)
            node = _branch(value, node["anyOf"])
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


_JSON_KIND = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}


def _branch(value, branches: list[dict]) -> dict:
    """The anyOf branch whose type is the value's kind (a string that parses as a number: a number's branch first,
    as --config gives every scalar as a string), else {} (the value is left for validation to report)."""
    kind = _JSON_KIND.get(type(value))
    if kind == "string":
        for b in branches:
            if b.get("type") in ("integer", "number") and value.strip().lstrip("+-").replace(".", "", 1).isdigit():
                return b
    return next((b for b in branches if b.get("type") == kind), {})


def _explain(err) -> list:
    """An anyOf error as the errors of the branch meant for the value's kind ('[4096] is too short'), not 'is not
    valid under any of the given schemas'."""
    if err.validator == "anyOf" and err.context:
        kind = _JSON_KIND.get(type(err.instance))
        fitting = [e for e in err.context if err.validator_value[e.relative_schema_path[0]].get("type") == kind]
        if fitting:
            return [sub for e in fitting for sub in _explain(e)]
    return [err]


def check_schema(config: dict, schema: dict, sources: list | None = None) -> None:
    """Every schema violation at once, one line each naming the key and the value (snakemake's own validate
    reports only the first, after a dump of the schema). `sources`: the configfiles read, named for a key that is
    required and missing."""
    from jsonschema import Draft202012Validator

    problems = []
    errors = [e for err in Draft202012Validator(schema).iter_errors(config) for e in _explain(err)]
    for err in sorted(errors, key=lambda e: list(map(str, e.absolute_path))):
        key = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path).lstrip(".")
        if err.validator == "required":
            where = ", ".join(map(str, sources or [])) or "the configuration"
            for k in err.validator_value:  # jsonschema reports each missing key with the whole list
                line = f"config key '{f'{key}.' if key else ''}{k}' is required and has no default: set it in {where}"
                if k not in err.instance and line not in problems:
                    problems.append(line)
        elif key:
            problems.append(f"config key '{key}' = {err.instance!r}: {err.message}")
        else:
            problems.append(f"config: {err.message}")
    if problems:
        raise ConfigError("invalid configuration (config/schema.yaml documents every key):\n  " + "\n  ".join(problems))


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
                          f"(folders kernels/<name>/), or [all]")
    gpus = [detect_key() if g == "auto" else g for g in config.get("gpus") or [CPU_KEY]]
    known_gpus = [CPU_KEY, *SPECS]
    stray = [g for g in (config.get("cluster") or {}) if g not in known_gpus]
    if stray:
        raise ConfigError(f"config key 'cluster' has unknown gpu key(s) {stray}: use {known_gpus}")
    if not config.get("sizes"):
        raise ConfigError("config key 'sizes' is empty: the sweep would measure nothing")
    try:
        sets = shape_sets(config.get("shapes", [SQUARE]))
    except ShapeError as exc:
        raise ConfigError(str(exc)) from None
    return {**config, "kernels": kernels, "gpus": list(dict.fromkeys(gpus)), "shape_sets": sets}


def sweep_params(config: dict, preset: str = SQUARE) -> dict:
    """The part of the config a measurement job of one shape set depends on (its params: a change reruns the
    job): the square set's sizes, another set's shapes per family (rooflab/shapes.py)."""
    keys = ("dtypes", "impls", "timing", "interpret_max_size", "seed", "allow_failures", "reuse_cells", "cache_dirs",
            "paired", "compile_max")
    if preset == SQUARE:
        return {**{k: config.get(k) for k in keys + ("sizes", "extra_sizes", "profile")}, "preset": SQUARE}
    sets = config.get("shape_sets") or shape_sets(config.get("shapes", [SQUARE]))
    return {**{k: config.get(k) for k in keys}, "preset": preset, "shapes": sets.get(preset, {})}


def repeat_params(config: dict) -> dict:
    """A repeat_measure job's parameters: the square sweep's at config repeatability's sizes and implementations
    (those of the sweep's), measured afresh, without paired rounds."""
    rep = config.get("repeatability") or {}
    sizes = [n for n in rep.get("sizes", []) if n in [*config.get("sizes", []), *config.get("extra_sizes", [])]]
    impls = [i for i in rep.get("impls", []) if i in config.get("impls", [])]
    return {
        **sweep_params(config), "sizes": sizes,
        "extra_sizes": [],
        "impls": impls,
        "paired": {
            **(config.get("paired") or {}), "enabled": False
        }
    }


def measured_presets(config: dict) -> list[str]:
    """The shape sets a run measures other than square: each its own measure jobs and result folder."""
    return [s for s in (config.get("shape_sets") or {}) if s != SQUARE]


def cluster_resource(config: dict, gpu: str, key: str):
    """config['cluster'][gpu][key] for profiles/slurm, or None: an unset resource is left out of the sbatch call
    (an empty string would still reach it, e.g. as `-C ''`)."""
    return (config.get("cluster") or {}).get(gpu, {}).get(key) or None


def main(args: list[str]) -> int:
    files = configfile_args(args)
    problems = list(filter(None, map(configfile_problem, files))) + dotted_config_problems(args)
    for problem in problems:
        print(f"ERROR: {problem}", file=sys.stderr)
    if problems:
        return 2
    if not files and not any(a.startswith("--profile") for a in args):  # a profile may name its own configfiles
        source, names = detect_gpus()
        if names:
            print(f"{source} lists {', '.join(names)}: running the GPU sweep, config/config.yaml")
        else:
            print("no NVIDIA GPU here (NVML and nvidia-smi find none): running the CPU default, config/cpu.yaml")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
