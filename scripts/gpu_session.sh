#!/usr/bin/env bash
# One device call: optionally tune and check ncu, run the DAG for the given kernels, optionally the repeatability
# benchmark, and pack everything under $OUT (the device tool brings back only a few files). Usage:
#   scripts/gpu_session.sh '["gelu","vecadd"]'        (or none: no DAG run)
# Environment: TUNE="rows --n 8192" (arguments of python -m lab), NCU_TEST=1 (one ncu call outside the
# DAG), EXTRA (more --config items for the DAG run), REPEAT="--kernels gelu --impls builtin triton" (arguments of
# scripts/repeatability.py), BUDGET_S (time limit of the DAG run), SKIP_BUILD=1 (no CUDA extension prebuild),
# RESTORE=results.tgz (a previous call's results, cell checkpoints included: the sweep resumes where it stopped).
set -uo pipefail
export PYTHONUNBUFFERED=1 ROOFLAB_NO_TEX=1
kernels=$1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
if [ -n "${TUNE:-}" ]; then
  python3 -m lab $TUNE --out "$OUT/tune.csv" > "$OUT/tune.txt" 2>&1
  echo "tune exit: $?"
fi
if [ -n "${NCU_TEST:-}" ]; then
  timeout 120 ncu --clock-control none --nvtx --nvtx-include rooflab_cell/ --target-processes all --force-overwrite \
    --export "$OUT/ncu_test" python3 experiments/ncu_cell.py --gpu h200 --kernel gelu --impl triton \
    --dtype bfloat16 --size 4096 > "$OUT/ncu_test.log" 2>&1
  echo "ncu exit: $?"; tail -5 "$OUT/ncu_test.log"
fi
if [ -n "${RESTORE:-}" ]; then
  tar xzf "$RESTORE" && echo "restored $(find results/raw -name '*.jsonl' | xargs cat 2>/dev/null | wc -l) checkpointed cells"
fi
if [ "$kernels" != none ]; then
  # The CUDA extensions take about a minute each to build: build both at once, before anything is timed.
  if [ -z "${SKIP_BUILD:-}" ]; then
    python3 -c "import kernels.gelu as g; g._cuda()" > "$OUT/build_gelu.log" 2>&1 &
    python3 -c "import kernels.softmax as s; s._cuda()" > "$OUT/build_softmax.log" 2>&1 &
    wait
  fi
  timeout -s INT ${BUDGET_S:-520} ./run.sh all --config "kernels=$kernels" ${EXTRA:-} > "$OUT/run.log" 2>&1
  echo "run.sh exit: $?"
  grep -vE "cell/s|s/cell" "$OUT/run.log" | tail -25
  tar czf "$OUT/results.tgz" results/raw results/metrics.parquet logs 2>/dev/null
  python3 scripts/ratio_table.py results/metrics.parquet 2>&1 | tail -40 || true
fi
if [ -n "${REPEAT:-}" ]; then
  python3 scripts/repeatability.py $REPEAT --out "$OUT/repeatability.csv" > "$OUT/repeatability.txt" 2>&1
  echo "repeatability exit: $?"; tail -12 "$OUT/repeatability.txt"
fi
[ -n "${TUNE:-}" ] && tail -150 "$OUT/tune.txt"
true
