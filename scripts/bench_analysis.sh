#!/usr/bin/env bash
# Time the analysis half of the DAG on existing measurements: metrics -> figures -> notebooks -> paper PDF.
#   scripts/bench_analysis.sh [--cores N] [extra snakemake args]      (default: 2 cores; target <= 60 s)
# First brings `all` up to date (untimed: measures only what is missing or stale), then forces the metrics job,
# so that everything downstream of it reruns, and prints the wall-clock seconds of that second run.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d .venv/bin ] && export PATH="$PWD/.venv/bin:$PATH"
cores=2
if [ "${1:-}" = "--cores" ]; then cores="$2"; shift 2; fi

snakemake --cores "$cores" all "$@" > logs/bench_analysis.prepare.log 2>&1 \
  || { echo "bench: bringing 'all' up to date failed; see logs/bench_analysis.prepare.log" >&2; exit 1; }
start=$(date +%s.%N)
snakemake --cores "$cores" all --forcerun metrics "$@" > logs/bench_analysis.log 2>&1 \
  || { echo "bench: the analysis run failed; see logs/bench_analysis.log" >&2; exit 1; }
end=$(date +%s.%N)
jobs=$(grep -c '^localrule\|^rule ' logs/bench_analysis.log || true)
secs=$(python -c "print(f'{$end - $start:.1f}')")
echo "analysis + figures + notebooks + paper from existing parquet: ${secs} s (${jobs} jobs, ${cores} cores)"
