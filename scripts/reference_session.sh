#!/usr/bin/env bash
# One device call of a reference measurement: measure what is missing of the given targets within a time budget,
# and pack the results under $OUT. Calls that follow one another on the same (still warm) machine continue the
# same run: results/ stays there between them, and with it the run's id, its ceilings and its cell store.
#   ROOFLAB_GIT_SHA=<commit> OUT=/tmp/out scripts/reference_session.sh TARGET...
# Environment: BUDGET_S (seconds for the DAG, default 480), RESTORE (a previous call's results.tgz, carried to a
# fresh machine), PROPS=1 (first run the property tests on the GPU;
# PROPS_EXAMPLES examples each, default 60, within PROPS_S seconds, default 240),
# EXTRA (more snakemake arguments).
set -uo pipefail
export PYTHONUNBUFFERED=1 ROOFLAB_NO_TEX=1
mkdir -p "$OUT" results
if [ -n "${RESTORE:-}" ] && [ ! -e results/.run_id ]; then  # a previous call's results.tgz, on a fresh machine
  tar xzf "$RESTORE" && echo "restored $(cat results/raw/*/.cells/*.jsonl 2>/dev/null | wc -l) stored cells"
fi
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
gpu_id=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1 | cut -c5-16)
if ! grep -qs -- "-$gpu_id\$" results/.run_id; then  # another GPU (or none yet): a new run, its ceilings measured again
  echo "$(date -u +%Y%m%dT%H%M%SZ)-$gpu_id" > results/.run_id
  EXTRA="${EXTRA:-} --forcerun ceilings"
fi
export ROOFLAB_RUN_ID
ROOFLAB_RUN_ID=$(cat results/.run_id)
echo "run $ROOFLAB_RUN_ID at commit ${ROOFLAB_GIT_SHA:-unknown}"
./run.sh all -n > "$OUT/setup.log" 2>&1 || { tail -20 "$OUT/setup.log"; exit 1; }  # installs what is missing
if [ -n "${PROPS:-}" ]; then  # compiled on the GPU: no conftest (it sets TRITON_INTERPRET=1 for the CPU)
  env -u TRITON_INTERPRET ROOFLAB_HYPOTHESIS_PROFILE=gpu ROOFLAB_HYPOTHESIS_EXAMPLES="${PROPS_EXAMPLES:-60}" \
    timeout "${PROPS_S:-240}" python3 -m pytest -q -p no:cacheprovider --noconftest tests/test_properties.py \
    > "$OUT/properties.log" 2>&1
  echo "property tests exit: $?"; grep -E "^FAILED|passed|failed" "$OUT/properties.log" | tail -12
fi
timeout -s INT "${BUDGET_S:-480}" python3 -m snakemake --cores 1 "$@" ${EXTRA:-} > "$OUT/run.log" 2>&1
echo "snakemake exit: $?"
grep -vE "cell/s|s/cell" "$OUT/run.log" | tail -15
for f in results/raw/*/.cells/*.jsonl; do echo "$f: $(wc -l < "$f") cells"; done
tar czf "$OUT/results.tgz" results/raw results/.run_id 2>/dev/null
tar czf "$OUT/logs.tgz" logs results/paired results/compare 2>/dev/null
ls -la "$OUT"
