#!/usr/bin/env bash
# One device call: prebuild the CUDA extensions, optionally tune, run the DAG for the given kernels, and pack
# everything under $OUT (the device tool brings back at most 8 files). Usage:
#   scripts/gpu_session.sh '["gelu","vecadd"]' [tune]
set -uo pipefail
export PYTHONUNBUFFERED=1 ROOFLAB_NO_TEX=1
kernels=$1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
# The CUDA extensions take about a minute each to build: build both at once, before anything is timed.
if [ -z "${SKIP_BUILD:-}" ]; then
  python3 -c "import kernels.gelu as g; g._cuda()" > "$OUT/build_gelu.log" 2>&1 &
  python3 -c "import kernels.softmax as s; s._cuda()" > "$OUT/build_softmax.log" 2>&1 &
  wait
fi
if [ "${2:-}" = tune ]; then
  python3 scripts/tune_elementwise.py --n 8192 2048 --out "$OUT/tune.csv" 2>&1 | tail -40
fi
timeout -s INT ${BUDGET_S:-520} ./run.sh all --config "kernels=$kernels" ${EXTRA:-} > "$OUT/run.log" 2>&1
echo "run.sh exit: $?"
grep -vE "cell/s|s/cell" "$OUT/run.log" | tail -25
tar czf "$OUT/results.tgz" results/raw results/metrics.parquet logs 2>/dev/null
python3 scripts/ratio_table.py results/metrics.parquet 2>&1 | tail -40 || true
