#!/usr/bin/env bash
# rooflab's one entry point. Sets up what is missing, then:
#   ./run.sh            run the whole DAG (snakemake --cores all, one measurement a GPU at a time) and the HTML report
#   ./run.sh test       run the linters (snakemake --lint, ruff) and the test suite, what .ci/run calls (installs
#                       requirements-dev.txt)
#   ./run.sh wheelhouse [PYVER]   build wheelhouse/py<PYVER> for an offline GPU node (default 3.12)
#   ./run.sh lock       write requirements.lock: the exact versions of this environment (pip freeze, less rooflab)
# Setup installs torch, then requirements.txt, then rooflab itself (pip install --no-deps -e .: `import rooflab`
# works from anywhere).
# Extra arguments after `all` go to snakemake, e.g. ./run.sh all --config 'kernels=["gelu"]'; the report follows only
# a run that builds (not -n, --lint, --unlock, --list-*, --summary, -h, ...).
#
# Environment: PYTHON (interpreter to set up from, default python3), TORCH_SPEC (torch to install when none is
# importable, default the CPU build torch==2.13.0), WHEELHOUSE (folder of wheels for offline installs, default
# wheelhouse/py<ver> when present), ROOFLAB_NO_TEX=1 (do not try to install TeX), WHEELHOUSE_DROP (wheels to
# leave out of a wheelhouse because the target already has them, e.g. "numpy pandas").
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
cmd=${1:-all}
[ $# -gt 0 ] && shift

log() { printf '\033[1m[rooflab]\033[0m %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

PYTHON=${PYTHON:-python3}

wheelhouse_for() {  # the wheelhouse matching an interpreter, if any
  local ver
  ver=$("$1" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
  local wh=${WHEELHOUSE:-$ROOT/wheelhouse/py$ver}
  [ -d "$wh" ] && echo "$wh"
  return 0
}

pip_install() {  # pip install, offline from the wheelhouse when there is one. --no-compile: byte-compiling every
  # module of every package took half the install (61 -> 34 s for the GPU node's wheelhouse on 2 cores); Python
  # compiles what a run imports, once
  local py=$1; shift
  local wh
  wh=$(wheelhouse_for "$py")
  if [ -n "$wh" ]; then
    log "installing offline from $wh"
    "$py" -m pip install -q --no-compile --disable-pip-version-check --no-index --find-links "$wh" "$@"
  else
    "$py" -m pip install -q --no-compile --disable-pip-version-check "$@"
  fi
}

# What requirements.txt provides that the run imports (module[:pip name]) or calls (console scripts): checked on
# every run, because a package uninstalled after the install leaves the requirements stamp matching. DEV_MODULES:
# requirements-dev.txt's, checked for ./run.sh test only.
REQUIRED_MODULES="torch triton snakemake snakemake_executor_plugin_slurm papermill ipykernel nbconvert pandas pyarrow
  numpy matplotlib pypdfium2 seaborn scipy tqdm pynvml:nvidia-ml-py jsonschema yaml:pyyaml ninja"
REQUIRED_SCRIPTS="snakemake papermill jupyter ninja"
DEV_MODULES="pytest hypothesis ruff yapf"

missing_requirements() {  # what $PY's environment lacks of the above (and of $1's extra modules), one a line.
  # $2 = import: import each (after an install: a broken one is found too); else only look each up (every run
  # starts with this check: importing torch, snakemake, papermill and matplotlib took seconds of each ./run.sh)
  # shellcheck disable=SC2086
  "$PY" - "${2:-find}" $REQUIRED_MODULES ${1:-} <<'EOF' || true
import importlib, importlib.util, sys
how = sys.argv[1]
for spec in sys.argv[2:]:
    module, _, pip_name = spec.partition(":")
    try:
        if how == "import":
            importlib.import_module(module)
        elif importlib.util.find_spec(module) is None:
            raise ModuleNotFoundError(f"No module named '{module}'")
    except Exception as e:
        print(f"{pip_name or module} ({type(e).__name__}: {e})")
EOF
  local s
  for s in $REQUIRED_SCRIPTS; do command -v "$s" >/dev/null || echo "$s (console script not on PATH)"; done
}

setup_python() {  # setup_python [dev]: dev installs requirements-dev.txt (the runtime's and the test tools)
  # 1. an existing project venv; 2. an interpreter that already has torch (a GPU node's image, a user's env);
  # 3. a new .venv with the CPU build of torch.
  local reqs=requirements.txt extra=""
  if [ "${1:-}" = dev ]; then reqs=requirements-dev.txt; extra=$DEV_MODULES; fi
  if [ -x .venv/bin/python ]; then
    PY=$ROOT/.venv/bin/python
  elif "$PYTHON" -c 'import torch' 2>/dev/null; then
    PY=$(command -v "$PYTHON")
    log "using the existing environment of $PY (torch $("$PY" -c 'import torch; print(torch.__version__)'))"
  else
    log "creating .venv (torch: ${TORCH_SPEC:-torch==2.13.0})"
    "$PYTHON" -m venv .venv
    PY=$ROOT/.venv/bin/python
    "$PY" -m pip install -q --upgrade pip || true
    pip_install "$PY" "${TORCH_SPEC:-torch==2.13.0}"
  fi
  local stamp
  stamp="$(dirname "$PY")/.rooflab-${reqs%.txt}.sha"
  local want missing
  # shellcheck disable=SC2046
  want=$(cat requirements.txt $([ "$reqs" = requirements.txt ] || echo "$reqs") | sha256sum | cut -c1-16)
  export PATH="$(dirname "$PY"):$PATH"
  missing=$(missing_requirements "$extra")
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || [ -n "$missing" ]; then
    if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
      log "$reqs was installed, but the environment of $PY lacks:"
      sed 's/^/  /' <<<"$missing" >&2
    fi
    log "installing $reqs"
    # torch first, never from the requirements: a plain `torch` requirement pulls a CUDA build
    if grep -q '^torch ' <<<"$missing"; then
      pip_install "$PY" "${TORCH_SPEC:-torch==2.13.0}"
    fi
    pip_install "$PY" -r "$reqs"
    missing=$(missing_requirements "$extra" import)
    if [ -n "$missing" ]; then  # files deleted under an intact install: pip sees nothing to do
      log "ERROR: still missing after installing $reqs (pip install --force-reinstall them):"
      sed 's/^/  /' <<<"$missing" >&2
      exit 1
    fi
    echo "$want" > "$stamp" 2>/dev/null || true
  fi
  setup_project
  bytecode_cache
}

bytecode_cache() {  # where the interpreter cannot keep the .pyc of its packages (a read-only image, or
  # PYTHONDONTWRITEBYTECODE set), every process compiled the source of every module it imported: on the H200 node's
  # image 2,300 modules, 9.3 s of a measurement job's 20.8 (cProfile). Then the bytecode goes to a cache of our own.
  local why=""
  if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then
    why="PYTHONDONTWRITEBYTECODE was set: unset for this run, the .pyc going there instead of beside the sources"
  elif ! "$PY" -c 'import importlib.util as u, os, sys
sys.exit(not os.access(os.path.dirname(u.find_spec("torch").origin), os.W_OK))' 2>/dev/null; then
    why="the packages of $PY cannot hold their own"
  fi
  if [ -n "$why" ]; then
    export PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/rooflab/pycache}
    unset PYTHONDONTWRITEBYTECODE
    log "bytecode cache: $PYTHONPYCACHEPREFIX ($why)"
  fi
}

setup_project() {  # rooflab itself, editable (pip install --no-deps -e .): again when pyproject.toml, the checkout's
  # place or its set of packages changes, or when `import rooflab` fails outside the checkout
  local stamp want
  stamp="$(dirname "$PY")/.rooflab-project.sha"
  want=$( (cat pyproject.toml; echo "$ROOT"; ls -d ./*/__init__.py 2>/dev/null || true) | sha256sum | cut -c1-16)
  if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && (cd / && "$PY" -c 'import rooflab' 2>/dev/null); then
    return 0
  fi
  log "installing rooflab itself (pip install --no-deps -e .): import rooflab works from anywhere"
  if "$PY" -c 'import setuptools, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 64)' 2>/dev/null; then
    pip_install "$PY" --no-deps --no-build-isolation -e .
  else  # an isolated build fetches setuptools (offline: from the wheelhouse, which carries it)
    pip_install "$PY" --no-deps -e .
  fi
  echo "$want" > "$stamp" 2>/dev/null || true
}

dag_args() {  # the snakemake arguments of ./run.sh's DAG (scripts/bench_loop.py uses them too); --cores last:
  # --resources takes every word up to the next option, the target too. One measure_slot per GPU of the node (one
  # without any; ROOFLAB_SIMULATE_GPUS=N counts N): each timing job takes a GPU of its own (rooflab/slots.py)
  local py=${PY:-$PYTHON} slots
  [ -z "${PY:-}" ] && [ -x .venv/bin/python ] && py=.venv/bin/python
  slots=$("$py" -m rooflab.slots count 2>/dev/null) || slots=1
  echo "--resources measure_slot=$slots host=$(nproc 2>/dev/null || echo 1) --cores all"
}

builds() {  # whether snakemake with these arguments runs jobs, after which the report is worth writing
  local a
  for a in "$@"; do
    case "$a" in
      -n|--dry-run|--dryrun|-t|--touch|--unlock|--lint|--lint=*|-l|--list*|--l[ciptu]|-S|--summary|-D|\
      --detailed-summary|--dag|--dag=*|--d3dag|--rulegraph*|--filegraph*|--cm|--cleanup-metadata|--cleanup-shadow|\
      --archive|--delete-all-output|--delete-temp-output|--containerize*|--export-cwl|--generate-unit-tests|\
      --print-compilation|--conda-create-envs-only|--conda-cleanup-envs|--report|--report=*|-h|--help|-v|--version)
        return 1 ;;
      -[!-]*)  # a cluster of short flags, e.g. -np
        [[ $a =~ ^-[Ffkp]*[ntlSDhv] ]] && return 1 ;;
    esac
  done
  return 0
}

setup_tex() {  # best effort: the DAG builds everything but the PDF without TeX, and says so
  command -v latexmk >/dev/null && command -v pdflatex >/dev/null && return 0
  [ "${ROOFLAB_NO_TEX:-0}" = 1 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing TeX (latexmk, texlive-latex-recommended, texlive-science, lmodern; ~145 MB)"
    if ! (timeout 300 apt-get update -q && DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -q \
          --no-install-recommends latexmk texlive-latex-recommended texlive-science lmodern) >/tmp/rooflab-tex.log 2>&1
    then
      log "could not install TeX (offline?): the PDF will not be built here; see /tmp/rooflab-tex.log"
    fi
  else
    log "no TeX engine found and cannot apt-get install one: the PDF will not be built here"
  fi
}

case "$cmd" in
  all)
    setup_python
    # Configfiles that do not parse are named with line and column here (snakemake says only "not valid JSON or
    # YAML"); without one, this says which configuration runs and why.
    note=$("$PY" -m rooflab.config "$@")
    [ -z "$note" ] || log "$note"
    setup_tex
    # Every core: figures, notebooks and the paper run in parallel. Measurement jobs hold a measure_slot (one per GPU:
    # never two on one device), and on the CPU every host slot too (timing on the host runs alone): rules/measure.smk.
    snakemake $(dag_args) all "$@"
    if builds "$@"; then
      snakemake --report results/report.html "$@" >results/report.log 2>&1 \
        && log "report: results/report.html" || log "report failed: see results/report.log"
    fi
    ;;
  test)
    setup_python dev
    setup_tex
    export TRITON_INTERPRET=1
    snakemake --lint
    python -m ruff check .  # the linter (settings: pyproject.toml [tool.ruff])
    yapf_diff() {  # the tracked Python files in a git checkout (no conda env or scratch copy), else the tree
      if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git ls-files -z -- '*.py' | xargs -0 python -m yapf --diff --parallel
      else
        python -m yapf --diff --recursive --parallel .
      fi
    }
    out=$(yapf_diff) || die "the formatter would change these files (yapf -ir -p . formats them), or failed:" \
      "$(printf '%s\n' "$out" | grep '^+++' | cut -c5- | sed 's/ *(reformatted)//')"
    python -m pytest -q -p no:cacheprovider tests "$@"
    ;;
  wheelhouse)
    ver=${1:-3.12}
    out=$ROOT/wheelhouse/py${ver/./}
    mkdir -p "$out"
    # The node already has torch, triton, numpy, pandas, pyarrow, matplotlib, seaborn and scipy; bring the rest.
    grep -vE '^(#|torch|triton|numpy|pandas|pyarrow|matplotlib|seaborn|scipy)' requirements.txt | grep -v '^$' \
      > "$out/requirements-offline.txt"
    echo 'setuptools>=64' >> "$out/requirements-offline.txt"  # to build the editable rooflab where the node has none
    # A real interpreter of that version (pyenv shims of other versions only pretend to be one).
    py=$(ls -d "$HOME"/.pyenv/versions/$ver*/bin/python 2>/dev/null | tail -1 || true)
    [ -z "$py" ] && "python$ver" -c pass 2>/dev/null && py=$(command -v "python$ver")
    [ -n "$py" ] || die "no python$ver here to resolve wheels with; install it (e.g. with pyenv) first"
    # connection_pool (a snakemake dependency) ships no wheel: build it first.
    "$py" -m pip wheel -q --no-deps -w "$out" connection_pool
    "$py" -m pip download -q --only-binary=:all: --find-links "$out" -d "$out" -r "$out/requirements-offline.txt"
    # numpy and pandas wheels stay: snakemake-executor-plugin-slurm needs numpy>=2.4.5 and pandas>=2.3.3, newer
    # than some images have; pip takes them only when the installed ones are too old. Where the node is known to
    # have recent ones and the transfer is tight, WHEELHOUSE_DROP="numpy pandas" leaves them out (27 MB).
    for name in ${WHEELHOUSE_DROP:-}; do rm -f "$out/$name"-*.whl; done
    log "wheelhouse: $out ($(du -sh "$out" | cut -f1)). Copy the repository with it to the node and run ./run.sh there."
    ;;
  dag-args)  # print them (for the benchmarks)
    dag_args
    ;;
  lock)
    setup_python
    frozen=$("$PY" -m pip freeze --exclude-editable --exclude rooflab)
    {
      echo "# The exact versions of a working environment: $("$PY" --version), $(uname -sm), written by ./run.sh lock"
      echo "# ($(date -u +%Y-%m-%d): pip freeze, less rooflab itself). Reproduce it (same Python, same platform):"
      echo "#   python3 -m venv .venv && .venv/bin/pip install -r requirements.lock"
      echo "#   .venv/bin/pip install --no-deps -e .   # rooflab itself; ./run.sh then uses that .venv"
      if grep -q '^torch==.*+cpu' <<<"$frozen"; then
        echo "--extra-index-url https://download.pytorch.org/whl/cpu"  # where the +cpu build of torch comes from
      fi
      echo "$frozen"
    } > requirements.lock.tmp
    mv requirements.lock.tmp requirements.lock
    log "requirements.lock: $(grep -c '==' requirements.lock) packages pinned"
    ;;
  *)
    die "unknown command '$cmd': use ./run.sh [all|test|wheelhouse|lock|dag-args]"
    ;;
esac
