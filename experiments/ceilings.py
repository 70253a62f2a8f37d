"""Measured ceilings of the device: copy bandwidth and GEMM peaks, written to results/raw/{gpu}/ceilings.parquet.

The analysis draws these beside the datasheet figures (rooflab/gpus.py): a roofline against the datasheet alone
hides the 10-15 % that no kernel reaches (see shared reference: copy ~4.28 TB/s on our H200 vs 4.8 datasheet).

- copy: ``dst.copy_(src)`` over a large buffer (4 GiB on a GPU); bandwidth counts bytes read + bytes written.
- copy_<dtype>_<N> (``same_size_copies``): the same copy over an N x N tensor, timed like a sweep cell of that
  size, rotating through as many input placements as a cell (``placements``), its address translations warmed
  when a cell's are (``warm_translations``), its samples pooled from as many fresh starts (``instances``). A cell
  pays a fixed cost per call (launch, the cold first accesses after the flush: 3-4 us on the H200, see
  scripts/tune.py --sections floor) that a 1 ms copy amortises and a 33-65 us bf16 cell at 8192^2 does not; this
  row is the wall at the cell's own size.
- gemm_<unit>: cuBLAS (``torch.mm``) at n^3 on random data (never zeros: they run faster), 2 n^3 FLOP per call;
  fp32 with TF32 off, tf32 with it on, bf16, fp16.
Timed with the same adaptive timer as the sweep (median).
"""

import dataclasses
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

log = logging.getLogger("rooflab.ceilings")


def measure_ceilings(gpu: str, copy_bytes: int, gemm_size: int, same_size_copies=(),
                     same_size_dtypes=("float32", "bfloat16"), placements: int = 1,
                     warm_translations: bool = False, instances: int = 1) -> list[dict]:
    import torch

    from experiments.measure import check_device
    from rooflab.kernel import torch_dtype
    from rooflab.sweep import placements_for
    from rooflab.timing import TimingConfig, measure, timer_for

    device, _ = check_device(gpu)
    cfg = TimingConfig(warmup_ms=50 if device == "cuda" else 5, min_samples=10, max_time_s=2.0,
                       max_samples=500, loop_ms=0)
    timer = timer_for(device, cfg)
    rows = []

    n_copy = copy_bytes // 4
    src = torch.randn(n_copy, device=device, dtype=torch.float32)
    dst = torch.empty_like(src)
    stats = measure(lambda: dst.copy_(src), timer, cfg)
    moved = 2.0 * n_copy * 4
    rows.append({"ceiling": "copy", "unit": "B/s", "value": moved / (stats["median_ms"] * 1e-3),
                 "bytes": moved, "flops": 0.0, **stats})
    log.info("copy %.3f GB buffer: %.1f GB/s (read + write)", n_copy * 4 / 1e9, rows[-1]["value"] / 1e9)
    del src, dst
    for n in same_size_copies:
        for dname in same_size_dtypes:
            # as many (source, destination) pairs as a sweep cell of this size gets (rooflab/timing.py Rotation)
            dtype = torch_dtype(dname)
            moved = 2.0 * n * n * dtype.itemsize
            count = placements_for(placements, moved, device)
            pairs = [(x, torch.empty_like(x)) for x in (torch.randn((n, n), device=device).to(dtype)
                                                        for _ in range(count))]
            fns = [lambda x=x, y=y: y.copy_(x) for x, y in pairs]
            # timed as a cell of this size is: the same placements, translation warming and fresh starts
            same = dataclasses.replace(cfg, warm_translations=warm_translations, instances=instances)
            stats = measure(fns, timer, same, inputs=pairs)
            rows.append({"ceiling": f"copy_{dname}_{n}", "unit": "B/s", "value": moved / (stats["median_ms"] * 1e-3),
                         "bytes": moved, "flops": 0.0, **stats})
            log.info("copy %s %d^2: %.1f GB/s", dname, n, rows[-1]["value"] / 1e9)
            del pairs, fns

    n = gemm_size
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    for unit, dtype, tf32 in [("fp32", torch.float32, False), ("tf32", torch.float32, True),
                              ("bf16", torch.bfloat16, None), ("fp16", torch.float16, None)]:
        if device == "cpu" and unit == "tf32":
            continue  # no tensor cores on the CPU
        g = torch.Generator(device=device).manual_seed(0)
        a = torch.randn((n, n), generator=g, device=device).to(dtype)
        b = torch.randn((n, n), generator=g, device=device).to(dtype)
        if tf32 is not None:
            torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            stats = measure(lambda: torch.mm(a, b), timer, cfg)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = tf32_before
        flops = 2.0 * n ** 3
        rows.append({"ceiling": f"gemm_{unit}", "unit": "FLOP/s", "value": flops / (stats["median_ms"] * 1e-3),
                     "bytes": 3.0 * n * n * a.element_size(), "flops": flops, **stats})
        log.info("gemm %s n=%d: %.1f TFLOP/s", unit, n, rows[-1]["value"] / 1e12)
    return rows


def run(gpu: str, out: str, params: dict) -> None:
    import pandas as pd

    from rooflab.io import CEILING_COLUMNS, write_parquet
    from rooflab.provenance import provenance

    rows = measure_ceilings(gpu, int(params.get("copy_bytes", 4 << 30)), int(params.get("gemm_size", 8192)),
                            [int(n) for n in params.get("same_size_copies", [])],
                            params.get("same_size_dtypes", ["float32", "bfloat16"]),
                            int(params.get("placements", 1)), bool(params.get("warm_translations", False)),
                            int(params.get("instances", 1)))
    prov = provenance(params)
    df = pd.DataFrame([{**r, "gpu": gpu, **prov} for r in rows])
    df = df.reindex(columns=CEILING_COLUMNS + [c for c in df.columns if c not in CEILING_COLUMNS])
    write_parquet(df, out)


if "snakemake" in globals():
    sm = globals()["snakemake"]
    logging.basicConfig(level=logging.INFO, filename=sm.log[0], filemode="w",
                        format="%(asctime)s %(levelname)s %(message)s")
    from rooflab.lifeline import follow_snakemake

    follow_snakemake()  # a kill -9 of snakemake ends this job too
    from experiments.measure import DeviceMismatch

    try:
        run(sm.wildcards.gpu, sm.output[0], dict(sm.params.ceilings))
    except DeviceMismatch as exc:
        log.error("%s", exc)
        print(f"ERROR: {exc}", file=sys.stderr)
        sys.exit(2)
