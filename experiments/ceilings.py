"""Measured ceilings of the device: copy bandwidth and GEMM peaks, written to results/raw/{gpu}/ceilings.parquet.

The analysis draws these beside the datasheet figures (rooflab/gpus.py): a roofline against the datasheet alone
hides the 10-15 % that no kernel reaches (see shared reference: copy ~4.28 TB/s on our H200 vs 4.8 datasheet).

- copy_large: ``dst.copy_(src)`` over a large buffer (4 GiB on a GPU); bandwidth counts bytes read + written.
- copy_<dtype>_<N> (``same_size_copies``): the same copy over an N x N tensor, timed like a sweep cell of that
  size, rotating through as many input placements as a cell (``placements``), its address translations warmed
  when a cell's are (``warm_translations``), its samples pooled from as many fresh starts (``instances``). A cell
  pays a fixed cost per call (launch, the cold first accesses after the flush: 3-4 us on the H200, see
  python -m lab floor) that a 1 ms copy amortises and a 33-65 us bf16 cell at 8192^2 does not; this
  row is the wall at the cell's own size.
- gemm_<unit>_<source>_<n>: cuBLAS (``torch.mm``) and, on a GPU, our Triton GEMM without its epilogue, at each n^3 of
  ``gemm_sizes`` on random data (never zeros: they run faster), 2 n^3 FLOP per call; fp32 with IEEE products, tf32
  with TF32 ones (rooflab.kernel.math_mode), bf16, fp16. SM clocks are read before and after each.
- copy and gemm_<unit>: the roofs cells are rated against, the best of the measurements above (``best_of`` names
  which). Every row carries the run's id; the file keeps earlier runs' rows, since their cells are rated against them.
Timed with the same adaptive timer as the sweep (median), under the settings of ``ceilings.timing`` in
config/schema.yaml (a longer warm-up, no loop time): every setting, and its default, comes from the validated config.
On the CPU, with as many threads as the sweep's cells (``threads``, ``sweep_threads``): Snakemake runs this script with
OMP_NUM_THREADS and MKL_NUM_THREADS set to the rule's threads (1), while the CPU's cells are timed in a warm worker
(rules/measure.smk measure_host) that has all the host's; one thread made the 512^3 fp32 roof 154 GFLOP/s, under the
266 GFLOP/s of the sweep's own torch.mm cell on 2 cores.
"""

import dataclasses
import logging
import os
import sys
from pathlib import Path

log = logging.getLogger("rooflab.ceilings")


def measure_ceilings(gpu: str, copy_bytes: int, gemm_sizes, same_size_copies, same_size_dtypes, cfg, placements: int,
                     warm_translations: bool, instances: int) -> list[dict]:
    """``cfg``: the ceilings' TimingConfig (``ceilings.timing``); ``placements``, ``warm_translations`` and
    ``instances``: the sweep's, for the copies timed like a cell."""
    import torch

    from rooflab.device import check_device
    from rooflab import clocks
    from rooflab.kernel import math_mode, torch_dtype
    from rooflab.cell import placements_for
    from rooflab.timing import measure, timer_for

    device, _ = check_device(gpu)
    from rooflab.cuda_ext import start_cuda_builds

    start_cuda_builds(gpu)  # the first job of a run (priority): the CUDA builds (~70 s of nvcc) overlap everything
    timer = timer_for(device, cfg)
    rows = []
    threads = torch.get_num_threads()  # every row's: a host roof holds for cells timed with as many (sweep_threads)
    log.info("torch's threads: %d", threads)

    n_copy = copy_bytes // 4
    src = torch.randn(n_copy, device=device, dtype=torch.float32)
    dst = torch.empty_like(src)
    stats = measure(lambda: dst.copy_(src), timer, cfg)  # noqa: F821
    moved = 2.0 * n_copy * 4
    rows.append({
        "ceiling": "copy_large",
        "unit": "B/s",
        "value": moved / (stats["median_ms"] * 1e-3),
        "bytes": moved,
        "flops": 0.0,
        "threads": threads,
        **stats,
        **clocks.prefixed("after")
    })
    log.info("copy %.3f GB buffer: %.1f GB/s (read + write)", n_copy * 4 / 1e9, rows[-1]["value"] / 1e9)
    del src, dst
    for n in same_size_copies:
        for dname in same_size_dtypes:
            # as many (source, destination) pairs as a sweep cell of this size gets (rooflab/timing.py Rotation)
            dtype = torch_dtype(dname)
            moved = 2.0 * n * n * dtype.itemsize
            count = placements_for(placements, moved, device)
            pairs = [(x, torch.empty_like(x))
                     for x in (torch.randn((n, n), device=device).to(dtype) for _ in range(count))]
            fns = [lambda x=x, y=y: y.copy_(x) for x, y in pairs]
            # timed as a cell of this size is: the same placements, translation warming and fresh starts
            same = dataclasses.replace(cfg, warm_translations=warm_translations, instances=instances)
            stats = {**measure(fns, timer, same, inputs=pairs), **clocks.prefixed("after")}
            rows.append({
                "ceiling": f"copy_{dname}_{n}",
                "unit": "B/s",
                "value": moved / (stats["median_ms"] * 1e-3),
                "bytes": moved,
                "flops": 0.0,
                "threads": threads,
                **stats
            })
            log.info("copy %s %d^2: %.1f GB/s", dname, n, rows[-1]["value"] / 1e9)
            del pairs, fns

    for unit, dtype in [("fp32", "float32"), ("tf32", "tf32"), ("bf16", "bfloat16"), ("fp16", "float16")]:
        if device == "cpu" and unit == "tf32":
            continue  # no tensor cores on the CPU
        for n in gemm_sizes:
            g = torch.Generator(device=device).manual_seed(0)
            a = torch.randn((n, n), generator=g, device=device).to(torch_dtype(dtype))
            b = torch.randn((n, n), generator=g, device=device).to(torch_dtype(dtype))
            for source, fn in gemm_sources(device):
                if source == "triton" and unit == "fp32":
                    # IEEE fp32 products: our Triton GEMM runs at half cuBLAS's rate (5.50 vs 2.73 ms at
                    # 4096^3), so it is never this roof, and autotuning it at 8192^3 costs a minute
                    continue
                with math_mode(dtype):  # fp32 products IEEE, tf32 TF32: cuBLAS and Triton alike
                    try:
                        row = clocks.prefixed("before")
                        stats = measure(lambda: fn(a, b), timer, cfg)  # noqa: F821
                        row.update(clocks.prefixed("after"))
                    except Exception as exc:  # a GEMM that cannot run here is no ceiling; the others still are
                        log.warning("gemm %s %s n=%d failed: %s: %s", unit, source, n, type(exc).__name__, exc)
                        continue
                flops = 2.0 * n**3
                rows.append({
                    "ceiling": f"gemm_{unit}_{source}_{n}",
                    "unit": "FLOP/s",
                    "value": flops / (stats["median_ms"] * 1e-3),
                    "bytes": 3.0 * n * n * a.element_size(),
                    "flops": flops,
                    "source": source,
                    "threads": threads,
                    **row,
                    **stats
                })
                log.info("gemm %s %s n=%d: %.1f TFLOP/s", unit, source, n, rows[-1]["value"] / 1e12)
            del a, b
    return rows + best_of(rows)


# What Snakemake's script: directive sets to the rule's threads in the job's environment (snakemake/shell.py)
THREAD_VARS = ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def sweep_threads(gpu: str, rule_threads: int, environ=os.environ) -> list[str]:
    """On the CPU, take back the thread limits Snakemake put in this job's environment (each THREAD_VARS at the
    rule's ``threads``, 1 here), before torch is imported: the CPU's cells are timed in a worker started from
    Snakemake's own environment (rooflab/workers.py, pool "host"), on every thread torch takes by default, and a
    roof timed on one of them is no roof for those cells (fp32 512^3: 154 GFLOP/s on one thread of 2 cores, 266 on
    both). A variable the user set for the whole run reaches the worker, but Snakemake overwrote it here with the
    rule's threads; where the two are equal it goes too, and the roof is then timed on more threads than the cells:
    above them, still a roof. On a GPU the measure jobs run as scripts too, under the same limits: nothing to do.
    Returns the variables removed."""
    if gpu != "cpu":
        return []
    if "torch" in sys.modules:  # its thread pool already sized from them
        log.warning("torch imported before sweep_threads: the ceilings keep %d thread(s)",
                    sys.modules["torch"].get_num_threads())
    dropped = [v for v in THREAD_VARS if environ.get(v) == str(rule_threads)]
    for v in dropped:
        del environ[v]
    return dropped


def gemm_sources(device: str) -> list[tuple[str, object]]:
    """The GEMMs a compute ceiling is the best of: cuBLAS, and on a GPU our Triton GEMM (no epilogue)."""
    import torch

    sources = [("cublas", torch.mm)]
    if device == "cuda":
        from kernels.matmul import matmul_triton

        sources.append(("triton", lambda a, b: matmul_triton(a, b, activation="none")))
    return sources


def best_of(rows: list[dict]) -> list[dict]:
    """The ceilings the analysis rates cells against: ``copy``, the fastest copy measured (the large one or one at a
    cell's size), and ``gemm_<unit>``, the fastest GEMM of that math mode over every shape and source. Each names
    the measurement it is (``best_of``): a cell above such a roof is a finding, not a plotting accident."""
    out = []
    groups = {"copy": [r for r in rows if r["ceiling"].startswith("copy")]}
    for r in rows:
        if r["ceiling"].startswith("gemm_"):
            groups.setdefault("gemm_" + r["ceiling"].split("_")[1], []).append(r)
    for name, members in groups.items():
        if members:
            top = max(members, key=lambda r: r["value"])
            out.append({**top, "ceiling": name, "best_of": top["ceiling"]})
    return out


def settings(params: dict) -> dict:
    """The rule's params (config ceilings.*, and the sweep's timing.placements, warm_translations and instances) over
    the schema's defaults: a caller that leaves a key out gets what the DAG's validated config would hold."""
    from rooflab.config import schema_defaults

    defaults = schema_defaults()
    cell = {k: defaults["timing"][k] for k in ("placements", "warm_translations", "instances")}
    given = dict(params)
    timing = {**defaults["ceilings"]["timing"], **given.pop("timing", {})}
    return {**defaults["ceilings"], **cell, **given, "timing": timing}


def run(gpu: str, out: str, params: dict) -> None:
    from rooflab.slots import acquire

    acquire(gpu)  # on a node with several GPUs, one of them (rooflab/slots.py): before torch initialises CUDA
    import pandas as pd

    from rooflab.io import CEILING_COLUMNS, read_results, write_parquet
    from rooflab.provenance import provenance
    from rooflab.timing import TimingConfig

    p = settings(params)
    rows = measure_ceilings(gpu, int(p["copy_bytes"]), [int(n) for n in p["gemm_sizes"]],
                            [int(n) for n in p["same_size_copies"]], list(p["same_size_dtypes"]),
                            TimingConfig.from_config(p["timing"]), int(p["placements"]), bool(p["warm_translations"]),
                            int(p["instances"]))
    prov = provenance(params)
    df = pd.DataFrame([{**r, "gpu": gpu, **prov} for r in rows])
    if Path(out).exists():  # the ceilings of earlier runs stay: their cells are rated against them
        earlier = read_results(out, CEILING_COLUMNS)
        df = pd.concat([earlier[earlier["run_id"] != prov["run_id"]], df], ignore_index=True)
    df = df.reindex(columns=CEILING_COLUMNS + [c for c in df.columns if c not in CEILING_COLUMNS])
    write_parquet(df, out)


if "snakemake" in globals():
    sm = globals()["snakemake"]
    logging.basicConfig(level=logging.INFO, filename=sm.log[0], filemode="w",
                        format="%(asctime)s %(levelname)s %(message)s")
    dropped = sweep_threads(sm.wildcards.gpu, sm.threads)  # before anything imports torch
    if dropped:
        log.info("the sweep's threads: %s unset (Snakemake's, at the rule's %s)", ", ".join(dropped), sm.threads)
    from rooflab.lifeline import follow_snakemake

    follow_snakemake()  # a kill -9 of snakemake ends this job too
    from rooflab.device import DeviceMismatch

    try:
        run(sm.wildcards.gpu, sm.output[0], dict(sm.params.ceilings))
    except DeviceMismatch as exc:
        log.error("%s", exc)
        print(f"ERROR: {exc}", file=sys.stderr)
        sys.exit(2)
