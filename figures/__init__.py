"""One script per figure, drawn by the DAG (rules/figures.smk) from results/metrics.parquet.

SCOPES says how often each is drawn: "gpu" once per device, "kernel" once per device and kernel, "shapes" once per
device with shape-set results (rules/shapes.smk, not rules/figures.smk). GPU_ONLY are
figures of concepts a CPU does not have (waves of SM-sized tiles, projections onto GPU datasheets).
"""
SCOPES = {
    "bandwidth": "kernel",
    "fusion": "gpu",
    "projection": "gpu",
    "roofline": "gpu",
    "scaling": "gpu",
    "speedup": "gpu",
    "wave": "gpu",
    "shapes": "shapes"
}
GPU_ONLY = {"wave", "projection"}
