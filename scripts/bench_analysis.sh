#!/usr/bin/env bash
# Time the analysis half of the DAG on existing measurements: metrics -> figures -> paper PDF, then the same with the
# notebooks (all of `all` downstream of the metrics).
#   scripts/bench_analysis.sh [--cores N] [extra snakemake args]      (default: 2 cores; target <= 20 s to the PDF)
# First brings `all` up to date (untimed: measures only what is missing or stale), then forces every per-kernel
# metrics job, so that everything downstream of it reruns, and prints the wall-clock seconds: once for the paper
# (analysis + figures + PDF), once for `all` (the notebooks too). run.sh's resources: measurements one at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d .venv/bin ] && export PATH="$PWD/.venv/bin:$PATH"
cores=2
if [ "${1:-}" = "--cores" ]; then cores="$2"; shift 2; fi
mkdir -p logs  # a fresh clone has none
if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then  # as run.sh does (bytecode_cache): .pyc kept, in a cache of ours
  unset PYTHONDONTWRITEBYTECODE
  export PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/rooflab/pycache}
  echo "bench: PYTHONDONTWRITEBYTECODE was set: unset, .pyc in $PYTHONPYCACHEPREFIX (as run.sh)" >&2
fi
args=(--resources measure_slot=1 "host=$cores" --cores "$cores")
paper=results/paper/rooflab.pdf
command -v latexmk >/dev/null && command -v pdflatex >/dev/null || paper=results/paper/BUILD_THE_PDF_ELSEWHERE.txt

snakemake "${args[@]}" all "$@" > logs/bench_analysis.prepare.log 2>&1 \
  || { echo "bench: bringing 'all' up to date failed; see logs/bench_analysis.prepare.log" >&2; exit 1; }
for target in "$paper" all; do
  start=$(date +%s.%N)
  snakemake "${args[@]}" "$target" --forcerun metrics_kernel "$@" > logs/bench_analysis.log 2>&1 \
    || { echo "bench: the analysis run failed; see logs/bench_analysis.log" >&2; exit 1; }
  end=$(date +%s.%N)
  jobs=$(grep -c '^localrule\|^rule ' logs/bench_analysis.log || true)
  secs=$(python -c "print(f'{$end - $start:.1f}')")
  what=$([ "$target" = all ] && echo "analysis + figures + notebooks + paper" || echo "analysis + figures + paper")
  echo "$what from existing parquet: ${secs} s (${jobs} jobs, ${cores} cores)"
done
