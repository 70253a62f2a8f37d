"""The lab: tuning probes for the kernels, apart from the measured product (experiments/, the DAG). One command,

    python -m lab SECTION... [--n N...] [--dtypes D...] [--matmul-n N...] [--instances K] [--out tune.csv]

times the variants of each section with the sweep's timer on the GPU present and writes one CSV (`python -m lab
--list` names the sections). One module per family, all sharing lab/common.py:

- elementwise.py: GeLU, vecadd and SAXPY launch shapes and tilings (gelu, elementwise, onerow)
- rows.py: softmax, LayerNorm, RMSNorm and row-sum: warps, held or read-again rows, the kernels' tables swapped
  for earlier ones, column masks, short rows (rows, lnconfirm, wbprefetch, lnfull, rmsfull, unmasked, smallrows)
- inductor.py: our Triton against torch.compile (compile)
- matmul.py: the pointer and TMA kernels against cuBLAS (matmul)
- floor.py: what a call costs besides its bytes: timer floor, fixed cost and marginal rate, host launch cost, the
  fastest read of the row-sum's bytes (floor, intercept, launch, readfloor)
- timer.py: the harness itself: flush modes, input placement, drift, per-start offsets (flush, placement, drift,
  instances)
- timeline.py: per-program global-timer stamps inside one call (timeline)
- cli.py: the command

What the probes decided is docs/decisions.md; the CSVs they wrote on the H200 are in data/tuning/ (its README says
which call wrote which).
"""
