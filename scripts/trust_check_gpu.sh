#!/bin/bash
# One-call GPU check of the "measurement you can trust" jobs, without snakemake (the device image has none):
# kernel-launch profiles, compiled-kernel facts, autotune/cache columns of a sweep, one ncu cell, repeatability, and
# the property tests (tests/test_properties.py) of every Triton wrapper on the GPU.
#   OUT=/tmp/trust bash scripts/trust_check_gpu.sh      (about 9 minutes on an H200; every step has a timeout)
# Each step's result lands in $OUT; the last step prints the columns worth reading.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
OUT=${OUT:-/tmp/rooflab-trust}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$PY -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
GPU=$($PY -c "from rooflab.gpus import detect_key; print(detect_key())"); echo "gpu key: $GPU"
step() { echo "=== $1 ($(date +%T))"; }

step "profiles (expect naive GeLU > 1 kernel, builtin/compile/triton 1)"
timeout 240 $PY -c "
import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout, format='%(message)s')
from experiments.profiles import run
run('$GPU', ['gelu', 'matmul', 'softmax'], '$OUT/profiles.parquet',
    {'size': 4096, 'dtypes': ['bfloat16'], 'impls': ['naive', 'builtin', 'compile', 'triton']})
" 2>&1 | grep -v '^USDT' | tail -20

step "compiled-kernel facts (registers, spills, smem, load widths, occupancy; every matmul config autotuned)"
timeout 240 $PY -c "
import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout, format='%(message)s')
from experiments.compiled import run
run('$GPU', ['gelu', 'matmul', 'rowsum', 'layernorm'], '$OUT/compiled.parquet',
    {'size': 4096, 'extra_sizes': [1793], 'dtypes': ['bfloat16']})
" 2>&1 | tail -5

step "measure matmul (autotune_config, autotune_ms, cache_state columns)"
timeout 180 $PY -c "
import logging, sys; logging.basicConfig(level=logging.WARNING, stream=sys.stdout)
from experiments.measure import run
run('matmul', '$GPU', '$OUT/matmul.parquet', {'sizes': [1024, 2048], 'dtypes': ['bfloat16'], 'impls': ['builtin', 'triton'],
    'timing': {'max_time_s': 0.5}, 'reuse_cells': False, 'allow_failures': True}, progress=False)
" 2>&1 | tail -5

step "ncu on one cell (gelu triton bfloat16 4096)"
if command -v ncu >/dev/null; then
  timeout 120 ncu --clock-control none --nvtx --nvtx-include rooflab_cell/ --target-processes all --force-overwrite \
    --export "$OUT/ncu.ncu-rep" $PY experiments/ncu_cell.py --gpu "$GPU" --kernel gelu --impl triton \
    --dtype bfloat16 --size 4096 > "$OUT/ncu_run.log" 2>&1; echo "ncu rc $?"; tail -4 "$OUT/ncu_run.log"
  ncu --import "$OUT/ncu.ncu-rep" --csv --page details > "$OUT/ncu.csv" 2> "$OUT/ncu_import.err"
  echo "import rc $? ($(wc -l < "$OUT/ncu.csv") lines)"; head -c 400 "$OUT/ncu.csv"; echo; rm -f "$OUT/ncu.ncu-rep"
else
  echo "ncu not on the PATH"
fi

step "repeatability (two processes)"
timeout 180 $PY scripts/repeatability.py --gpu "$GPU" --kernels gelu --sizes 256 4096 --dtypes bfloat16 \
  --impls builtin triton --out "$OUT/repeatability.csv" 2>&1 | grep -v 'cell/s' | tail -9

step "property tests (hypothesis profile gpu: every Triton wrapper against torch, bf16 included; about 4 minutes)"
if ! $PY -c "import hypothesis" 2>/dev/null; then  # an offline node: from the wheelhouse (./run.sh wheelhouse)
  WH=wheelhouse/py$($PY -c 'import sys; print("%d%d" % sys.version_info[:2])')
  $PY -m pip install -q --no-index --find-links "$WH" 'hypothesis>=6.100,<7' 2>&1 | tail -2
fi
# --noconftest: tests/conftest.py sets TRITON_INTERPRET=1 (CPU tensors through the interpreter); without it the
# wrappers run compiled, on the GPU
env -u TRITON_INTERPRET ROOFLAB_HYPOTHESIS_PROFILE=gpu timeout 480 $PY -m pytest -q -p no:cacheprovider --noconftest \
  tests/test_properties.py > "$OUT/properties.log" 2>&1
echo "pytest rc $?"
grep -E "^E +(Assertion|at \(|[A-Za-z]*Error)|^FAILED|passed|failed" "$OUT/properties.log" | tail -25

step summary
$PY - "$OUT" <<'PYEOF'
import sys
import pandas as pd
out = sys.argv[1]
pd.set_option("display.width", 250); pd.set_option("display.max_colwidth", 60); pd.set_option("display.max_rows", 80)
for name, cols in [
    ("profiles", ["kernel", "impl", "pass", "n_kernels", "n_memops", "compile_fallback", "status", "kernel_names", "error"]),
    ("compiled", ["kernel", "size", "function", "num_warps", "num_stages", "n_regs", "n_spills", "shared_bytes",
                  "blocks_per_sm", "occupancy", "occupancy_limiter", "autotune_best", "config_ms", "ld_global_v4",
                  "ld_global_scalar", "st_global_v4", "st_global_scalar", "ld_global_max_bits", "status", "error"]),
    ("matmul", ["impl", "size", "status", "median_ms", "graph_median_ms", "cold_ms", "autotune_ms", "autotune_config",
                "cache_state", "triton_cache_files", "stop_reason", "sm_clock_after_mhz", "error"])]:
    try:
        df = pd.read_parquet(f"{out}/{name}.parquet")
        print(f"--- {name}: {len(df)} rows"); print(df.reindex(columns=cols).to_string(index=False))
    except Exception as exc:
        print(f"--- {name}: {type(exc).__name__}: {exc}")
PYEOF
