"""The entry point: ./run.sh repairs a broken environment, names a bad configfile, writes the report only after a run
that builds; a user's configfile is not completed from the default; a GPU torch cannot use stops the run once.

run.sh runs in a copy of its few files with a fake environment: .venv/bin/python is the test's interpreter with pip
faked (an "install" only unblocks the modules a test blocked), and snakemake, papermill, jupyter and nvidia-smi are
scripts that record their arguments. Fast, and no GPU or network is needed.
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from rooflab import config as rcfg
from rooflab import gpus

REPO = Path(__file__).resolve().parent.parent
FAKE_PYTHON = """#!/bin/bash
# The test's interpreter; pip only "installs" what the test blocked (and the snakemake script).
env=$(cd "$(dirname "$0")/.." && pwd)
if [ "$1 $2" = "-m pip" ]; then
  echo "$*" >> "$env/pip.log"
  rm -f "$env"/blocked/*.py
  cp "$env/fake-snakemake" "$env/bin/snakemake"
  exit 0
fi
PYTHONPATH="$env/blocked" exec {python} "$@"
"""
RECORDER = '#!/bin/sh\necho "$*" >> "$(dirname "$0")/../$(basename "$0").log"\n'
NVIDIA_SMI = '#!/bin/sh\necho "NVIDIA H200"\n'


def script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def checkout(tmp_path):
    """run.sh and what it reads, with an installed fake .venv (stamp current, scripts present)."""
    for rel in ("run.sh", "requirements.txt", "requirements-dev.txt", "pyproject.toml"):
        shutil.copy2(REPO / rel, tmp_path / rel)
    for rel in ("rooflab", "config"):
        shutil.copytree(REPO / rel, tmp_path / rel, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "results").mkdir()
    venv = tmp_path / ".venv"
    script(venv / "bin/python", FAKE_PYTHON.format(python=sys.executable))
    (venv / "blocked").mkdir()
    script(venv / "fake-snakemake", RECORDER)
    for name in ("snakemake", "papermill", "jupyter", "ninja"):
        script(venv / "bin" / name, RECORDER)
    stamp = hashlib.sha256((tmp_path / "requirements.txt").read_bytes()).hexdigest()[:16]
    (venv / "bin/.rooflab-requirements.sha").write_text(stamp + "\n")
    (venv / "bin/.rooflab-project.sha").write_text(project_stamp(tmp_path) + "\n")
    return tmp_path


def project_stamp(root: Path) -> str:
    """run.sh's stamp of the editable install: pyproject.toml, the checkout's place and its packages."""
    packages = "".join(f"./{p.parent.name}/__init__.py\n" for p in sorted(root.glob("*/__init__.py")))
    text = (root / "pyproject.toml").read_bytes() + f"{root}\n".encode() + packages.encode()
    return hashlib.sha256(text).hexdigest()[:16]


def run_sh(checkout: Path, *args: str, extra_path: Path | None = None) -> subprocess.CompletedProcess:
    path = os.pathsep.join(str(p) for p in (extra_path, "/usr/local/bin", "/usr/bin", "/bin") if p)
    env = {"PATH": path, "HOME": os.environ.get("HOME", "/tmp"), "ROOFLAB_NO_TEX": "1"}
    return subprocess.run(["./run.sh", *args], cwd=checkout, env=env, capture_output=True, text=True, timeout=120)


def snakemake_calls(checkout: Path) -> list[str]:
    log = checkout / ".venv/snakemake.log"
    return log.read_text().splitlines() if log.exists() else []


def dag_args(checkout: Path) -> str:
    """run.sh's snakemake arguments: every core, measurements one at a time (measure_slot), timing on the host alone."""
    out = run_sh(checkout, "dag-args").stdout.strip()
    assert re.fullmatch(r"--resources measure_slot=1 host=\d+ --cores all", out), out
    return out


def no_real_gpu() -> bool:
    return gpus.nvml_names() is None and not gpus.nvidia_smi_names()


# 1. An environment that lost a package behind a matching requirements stamp.


def test_run_sh_reinstalls_a_package_missing_behind_a_current_stamp(checkout):
    (checkout / ".venv/blocked/snakemake.py").write_text("raise ModuleNotFoundError(\"No module named 'snakemake'\")\n")
    (checkout / ".venv/bin/snakemake").unlink()  # `pip uninstall snakemake` takes both
    res = run_sh(checkout, "all")
    assert res.returncode == 0, res.stderr
    # the check before installing only looks modules up (a shadowing file that fails on import is "there"); the
    # missing console script is what it sees here, and the check after the install imports each module
    assert "lacks" in res.stderr and "snakemake (console script not on PATH)" in res.stderr, res.stderr
    pip_log = (checkout / ".venv/pip.log").read_text()
    assert "-m pip install -q --no-compile --disable-pip-version-check -r requirements.txt" in pip_log
    assert snakemake_calls(checkout)[0] == f"{dag_args(checkout)} all"


def requirement_lines(name: str) -> list[str]:
    return [
        line.strip() for line in (REPO / name).read_text().splitlines() if line.strip() and not line.startswith("#")
    ]


def requirement_name(spec: str) -> str:
    import re

    return re.split(r"[\[<>=!~ ]", spec)[0].lower().replace("_", "-")


def test_run_sh_checks_only_what_requirements_txt_installs():
    """Else a module that requirements.txt does not bring would be missing after every install; the test tools are
    requirements-dev.txt's and checked for ./run.sh test only."""
    import re

    text = (REPO / "run.sh").read_text()

    def names(var):
        specs = re.search(rf'^{var}="([^"]*)"', text, flags=re.M).group(1).split()
        return {(spec.partition(":")[2] or spec.partition(":")[0]).replace("_", "-") for spec in specs}

    runtime = {requirement_name(s) for s in requirement_lines("requirements.txt")}
    assert names("REQUIRED_MODULES") - {"torch"} <= runtime, names("REQUIRED_MODULES") - runtime
    assert "torch" in names("REQUIRED_MODULES")  # installed first, by run.sh itself (TORCH_SPEC)
    dev = {requirement_name(s) for s in requirement_lines("requirements-dev.txt") if not s.startswith("-r")}
    assert names("DEV_MODULES") == dev == {"pytest", "hypothesis", "ruff", "yapf"}
    assert not names("REQUIRED_MODULES") & dev


# 1b. Requirements: runtime and development apart, one list in every place that needs one, a lock, the package.


def test_requirements_are_split_and_in_sync_everywhere():
    import tomllib

    runtime = requirement_lines("requirements.txt")
    names = [requirement_name(s) for s in runtime]
    assert len(names) == len(set(names)), "a package listed twice"
    assert "snakemake[reports]" in [s.split(">")[0].split("<")[0] for s in runtime]
    assert "ninja" in names  # torch.utils.cpp_extension builds the CUDA implementations with it
    assert not {"torch", "pytest", "hypothesis"} & set(names)
    assert requirement_lines("requirements-dev.txt") == [
        "-r requirements.txt", "pytest>=8,<10", "hypothesis>=6.100,<7", "ruff>=0.17,<0.18", "yapf>=0.43,<0.44"
    ]

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    torch = [s for s in project["dependencies"] if requirement_name(s) == "torch"]
    assert len(torch) == 1 and [s for s in project["dependencies"] if s not in torch] == runtime
    assert project["optional-dependencies"]["dev"] == requirement_lines("requirements-dev.txt")[1:]
    assert project["name"] == "rooflab" and project["requires-python"] == ">=3.11"
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert project["version"] == str(citation["version"])

    # snakemake --use-conda copies the env file elsewhere and hashes its text: it lists every package itself
    env = yaml.safe_load((REPO / "envs/rooflab.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert pip == project["dependencies"], "envs/rooflab.yaml's pip list is pyproject.toml's dependencies"
    assert not any(s.startswith("-") for s in pip)

    # the torch run.sh installs by default is one the project accepts
    import re

    from packaging.specifiers import SpecifierSet

    default = re.search(r"TORCH_SPEC:-torch==([0-9.]+)", (REPO / "run.sh").read_text()).group(1)
    assert default in SpecifierSet(torch[0].removeprefix("torch"))


def test_the_lock_pins_every_requirement_within_its_range():
    from packaging.requirements import Requirement

    lock = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, _, version = line.partition("==")
            lock[requirement_name(name)] = version.strip()
    assert "rooflab" not in lock
    project = __import__("tomllib").loads((REPO / "pyproject.toml").read_text())["project"]
    for spec in project["dependencies"] + project["optional-dependencies"]["dev"]:
        req = Requirement(spec)
        name = requirement_name(req.name)
        assert name in lock, f"{name} is not in requirements.lock: ./run.sh lock"
        assert req.specifier.contains(lock[name], prereleases=True), (name, lock[name], str(req.specifier))


def test_rooflab_imports_from_anywhere():
    """The editable install (run.sh's setup): the package, not the working directory, makes the imports work."""
    res = subprocess.run([
        sys.executable, "-c", "import rooflab, kernels, experiments, analysis.paper_inputs, figures;"
        "print(rooflab.__file__)"
    ], cwd="/", capture_output=True, text=True, env={
        k: v
        for k, v in os.environ.items()
        if k != "PYTHONPATH"
    })
    assert res.returncode == 0, res.stderr
    assert Path(res.stdout.strip()).parent == REPO / "rooflab"


def test_run_sh_installs_the_project_editable_once(checkout):
    (checkout / ".venv/bin/.rooflab-project.sha").unlink()
    res = run_sh(checkout, "all")
    assert res.returncode == 0, res.stderr
    pip = (checkout / ".venv/pip.log").read_text().splitlines()
    assert len(pip) == 1 and "--no-deps" in pip[0] and pip[0].endswith("-e ."), pip
    res = run_sh(checkout, "all")
    assert res.returncode == 0 and len((checkout / ".venv/pip.log").read_text().splitlines()) == 1, res.stderr


def test_run_sh_all_needs_no_test_tools_and_test_installs_them(checkout):
    blocked = "raise ModuleNotFoundError(\"No module named 'hypothesis'\")\n"
    (checkout / ".venv/blocked/hypothesis.py").write_text(blocked)
    res = run_sh(checkout, "all")
    assert res.returncode == 0 and not (checkout / ".venv/pip.log").exists(), res.stderr
    script(checkout / "tests/test_nothing.py", "def test_nothing():\n    pass\n")
    res = run_sh(checkout, "test", "-p", "no:cacheprovider")
    assert "installing requirements-dev.txt" in res.stderr, res.stderr
    assert "-m pip install -q --no-compile --disable-pip-version-check -r requirements-dev.txt" in (
        checkout / ".venv/pip.log").read_text()
    assert res.returncode == 0, res.stdout + res.stderr


def test_run_sh_installs_nothing_when_the_environment_is_complete(checkout):
    res = run_sh(checkout, "all")
    assert res.returncode == 0, res.stderr
    assert not (checkout / ".venv/pip.log").exists() and "installing" not in res.stderr, res.stderr


# 2. A configfile that does not parse, or does not exist, is named before snakemake runs.

BAD_YAML = "gpus: [cpu]\nsizes: [256, 512\nkernels: [gelu]\n"


@pytest.mark.parametrize(
    "args", [["--configfile", "bad.yaml"], ["--configfile=bad.yaml"], ["--configfiles", "good.yaml", "bad.yaml", "-n"],
             ["--config", "seed=1", "--configfile", "good.yaml", "--configfile", "bad.yaml"], ])
def test_run_sh_names_the_yaml_error_of_a_configfile(checkout, args):
    (checkout / "good.yaml").write_text("sizes: [64]\n")
    (checkout / "bad.yaml").write_text(BAD_YAML)
    res = run_sh(checkout, "all", *args)
    assert res.returncode != 0
    assert "configfile bad.yaml, line 3, column 8: not valid YAML" in res.stderr, res.stderr
    assert "expected ',' or ']'" in res.stderr, res.stderr
    assert "good.yaml" not in res.stderr and snakemake_calls(checkout) == [], res.stderr


def test_run_sh_names_a_missing_configfile(checkout):
    res = run_sh(checkout, "all", "--configfile", "nope.yaml")
    assert res.returncode != 0 and snakemake_calls(checkout) == []
    assert "configfile nope.yaml not found" in res.stderr, res.stderr


def test_configfile_args_follow_snakemake():
    args = [
        "all", "--configfile", "a.yaml", "b.yaml", "-n", "--configfile=c.yaml", "--configfiles", "d.yaml", "--config",
        "sizes=[1]"
    ]
    assert rcfg.configfile_args(args) == ["a.yaml", "b.yaml", "c.yaml", "d.yaml"]


def test_run_sh_names_a_dotted_config_key_and_the_form_snakemake_takes(checkout):
    # snakemake's own error ("Config entry must start with a valid identifier") names neither entry nor fix
    res = run_sh(checkout, "all", "--until", "traffic", "--config", "traffic.enabled=true", "seed=1")
    assert res.returncode != 0 and snakemake_calls(checkout) == []
    assert "--config traffic.enabled=true: snakemake takes no dotted keys; write traffic='{enabled: true}'" \
        in res.stderr, res.stderr
    assert rcfg.dotted_config_problems(
        ["--config=a.b.c=1", "-n", "x.y=2", "--config", "ok=1.5",
         "v={a.b: 1}"]) == ["--config a.b.c=1: snakemake takes no dotted keys; write a='{b: {c: 1}}'"]


# 4. The report follows only a run that builds.


@pytest.mark.parametrize(
    "args",
    [["-n"], ["--dry-run"], ["-np"], ["-pn"], ["--unlock"], ["--lint"], ["--list-rules"], ["--list-changes", "code"],
     ["--summary"], ["-D"], ["-h"], ["--version"], ["--touch"], ["--dag"], ["--cleanup-metadata", "x"], ])
def test_run_sh_writes_no_report_after_a_run_that_builds_nothing(checkout, args):
    res = run_sh(checkout, "all", *args)
    assert res.returncode == 0, res.stderr
    assert snakemake_calls(checkout) == [" ".join([dag_args(checkout), "all", *args])]
    assert "report" not in res.stderr, res.stderr


@pytest.mark.parametrize("args", [[], ["--config", 'kernels=["gelu"]'], ["-p", "-k"], ["-F"]])
def test_run_sh_writes_the_report_after_a_real_run(checkout, args):
    res = run_sh(checkout, "all", *args)
    assert res.returncode == 0, res.stderr
    assert snakemake_calls(checkout)[1] == " ".join(["--report results/report.html", *args])
    assert "report: results/report.html" in res.stderr, res.stderr


# 3. A user's configfile is not completed from the default configuration.


def dry_run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)


def test_own_configfile_without_sizes_is_an_error_naming_key_and_file(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump({"gpus": ["cpu"], "kernels": ["gelu"]}))
    res = dry_run("--quiet", "rules", "--configfile", str(mine))
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert f"config key 'sizes' is required and has no default: set it in {mine}" in out, out
    assert "Building DAG" not in out, out


def test_own_configfile_is_read_alone_with_the_schema_defaults(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump({"gpus": ["cpu"], "kernels": ["gelu"], "sizes": [64]}))
    res = dry_run("--configfile", str(mine))
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    (line, ) = [ln for ln in out.splitlines() if "Config file(s):" in ln]
    assert str(mine) in line and "cpu.yaml" not in line and "config.yaml" not in line, line


# 5. A GPU: found through NVML (nvidia-smi as a fallback), and checked once against torch before any job.


class FakeNvml(types.SimpleNamespace):

    def __init__(self, names=(), broken=False):

        def init():
            if broken:
                raise RuntimeError("NVML Shared Library Not Found")

        super().__init__(nvmlInit=init, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: len(names),
                         nvmlDeviceGetHandleByIndex=lambda i: i, nvmlDeviceGetName=lambda h: names[h])


def test_gpus_come_from_nvml_then_nvidia_smi(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([b"NVIDIA H200"]))  # bytes: older nvidia-ml-py
    monkeypatch.setattr(gpus, "nvidia_smi_names", lambda: pytest.fail("NVML answered: nvidia-smi is not asked"))
    assert gpus.detect_gpus() == ("NVML", ["NVIDIA H200"]) and gpus.detect_key() == "h200"
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(broken=True))
    monkeypatch.setattr(gpus, "nvidia_smi_names", lambda: ["NVIDIA A100-SXM4-80GB"])
    assert gpus.detect_gpus() == ("nvidia-smi", ["NVIDIA A100-SXM4-80GB"]) and gpus.detect_key() == "a100"
    assert rcfg.default_configfile(REPO) == REPO / "config/config.yaml"
    monkeypatch.setattr(gpus, "nvidia_smi_names", lambda: [])
    assert gpus.detect_key() == "cpu" and rcfg.default_configfile(REPO) == REPO / "config/cpu.yaml"


CPU_TORCH = {"torch": "2.13.0+cpu", "cuda": None, "devices": [], "why": ""}


@pytest.mark.parametrize(
    "found, torch, keys, expected",
    [(("nvidia-smi", ["NVIDIA H200"]), CPU_TORCH, ["h200"],
      'nvidia-smi lists "NVIDIA H200" but torch 2.13.0+cpu has no CUDA: install a CUDA build of torch, or run the '
      "CPU default with --configfile config/cpu.yaml"),
     (("NVML", ["NVIDIA H200"]), {
         "torch": "2.11.0+cu128",
         "cuda": "12.8",
         "devices": [],
         "why": "The NVIDIA driver on your system is too old"
     }, ["h200"],
      'NVML lists "NVIDIA H200" but torch 2.11.0+cu128 (CUDA 12.8) cannot use it (The NVIDIA driver on your system '
      "is too old)"),
     (("nvidia-smi", []), CPU_TORCH, ["h200"], "config gpus asks for h200, but this machine has no NVIDIA GPU"),
     (("NVML", ["NVIDIA A100-SXM4-80GB"]), {
         **CPU_TORCH, "cuda": "12.8",
         "devices": ["NVIDIA A100-SXM4-80GB"]
     }, ["h200"], "config gpus asks for h200, but torch 2.13.0+cpu sees only NVIDIA A100-SXM4-80GB"),
     (("NVML", ["NVIDIA H200"]), {
         **CPU_TORCH, "torch": None,
         "why": "ModuleNotFoundError: No module named 'torch'"
     }, ["h200"], "config gpus asks for h200, but torch does not import here (ModuleNotFoundError"),
     (("NVML", ["NVIDIA H200"]), {
         **CPU_TORCH, "cuda": "12.8",
         "devices": ["NVIDIA H200"]
     }, ["cpu", "h200"], None), ])
def test_unusable_gpu_gets_one_message_saying_what_was_found(monkeypatch, found, torch, keys, expected):
    monkeypatch.setattr(gpus, "detect_gpus", lambda: found)
    monkeypatch.setattr(gpus, "torch_cuda", lambda: torch)
    message = gpus.unusable_gpus_message(keys)
    assert message == expected if expected is None else expected in message, message


def test_cpu_only_asks_torch_nothing(monkeypatch):
    monkeypatch.setattr(gpus, "torch_cuda", lambda: pytest.fail("torch asked for a CPU-only run"))
    assert gpus.unusable_gpus_message(["cpu"]) is None


def test_torch_probe_reports_what_torch_sees():
    from importlib.metadata import version

    seen = gpus.torch_cuda()
    assert seen["torch"].split("+")[0] == version("torch").split("+")[0] and isinstance(seen["devices"], list)
    broken = gpus.torch_cuda(python="/bin/false")
    assert broken["torch"] is None and broken["why"] == "exit status 1"


def copy_repo(dest: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        if (REPO / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)
    return dest


@pytest.mark.skipif(not no_real_gpu(), reason="a real GPU answers NVML or nvidia-smi here")
def test_snakemake_stops_once_before_any_job_when_torch_cannot_use_the_gpu(tmp_path):
    """nvidia-smi lists an H200 (NVML has no driver here), torch is the CPU build: the GPU default config is chosen,
    the plan is made (a dry run needs no GPU), and the real run stops with one message before any job."""
    if gpus.torch_cuda()["devices"]:
        pytest.skip("torch sees a GPU here")
    work = copy_repo(tmp_path / "repo")
    shim = script(tmp_path / "bin/nvidia-smi", NVIDIA_SMI).parent
    env = {**os.environ, "PATH": os.pathsep.join([str(shim), str(Path(sys.executable).parent), os.environ["PATH"]])}
    target = "results/raw/h200/gelu.parquet"

    def snakemake(*args):
        return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", target, *args], cwd=work, env=env,
                              capture_output=True, text=True, timeout=300)

    planned = snakemake("-n")
    assert planned.returncode == 0 and "rule measure" in planned.stdout + planned.stderr, planned.stderr
    res = snakemake()
    out = res.stdout + res.stderr
    assert res.returncode != 0
    torch_version = gpus.torch_cuda()["torch"]
    assert out.count(f'nvidia-smi lists "NVIDIA H200" but torch {torch_version} has no CUDA') == 1, out
    assert not (work / "logs/measure").exists() and not (work / "results/raw").exists(), out


@pytest.mark.skipif(not no_real_gpu(), reason="a real GPU answers NVML or nvidia-smi here")
def test_run_sh_says_which_configuration_runs_and_why(checkout, tmp_path):
    res = run_sh(checkout, "all")
    assert "no NVIDIA GPU here (NVML and nvidia-smi find none): running the CPU default, config/cpu.yaml" in res.stderr
    shim = script(tmp_path / "shim/nvidia-smi", NVIDIA_SMI).parent
    res = run_sh(checkout, "all", extra_path=shim)
    assert "nvidia-smi lists NVIDIA H200: running the GPU sweep, config/config.yaml" in res.stderr, res.stderr
    res = run_sh(checkout, "all", "--configfile", "config/cpu.yaml")
    assert "running the" not in res.stderr, res.stderr
