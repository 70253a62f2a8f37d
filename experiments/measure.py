"""Measurement job: sweep one kernel on one device and write results/raw/{gpu}/{kernel}.parquet.

Run by the DAG (rule ``measure``: this script in a process of its own; on the CPU rule ``measure_host``: main() in
a warm worker, rooflab/workers.py), or by hand:
    python experiments/measure.py --kernel gelu --gpu cpu --out /tmp/gelu.parquet --sizes 256 512

Guarantees: the device present must be the gpu asked for (else an error and no file); every cell is checked against
float64 before it is timed; each finished cell is appended to a checkpoint, so a killed sweep resumes where it
stopped and a failed cell costs only itself; the parquet appears in one atomic rename once the sweep is complete.
"""

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

from rooflab.codehash import code_digest, text_digest
from rooflab.cuda_ext import start_cuda_builds
from rooflab.device import DeviceMismatch, check_device, prepare_environment
from rooflab.workers import console

REPO = Path(__file__).resolve().parent.parent

log = logging.getLogger("rooflab.measure")


def shapes_for(kernel, params: dict) -> list[tuple[int, ...]]:
    """The shapes of the job's set in the kernel's family: square, those of config sizes and extra_sizes; any
    other set (params shapes: {family: [shape, ...]}), those listed for the family (none: the kernel has no cell)."""
    from rooflab.shapes import SQUARE, set_shapes

    preset = params.get("preset", SQUARE)
    sizes = [*params.get("sizes", []), *params.get("extra_sizes", [])]
    return set_shapes({preset: params.get("shapes") or {}}, preset, kernel.family, sizes)


def cells_for(kernel, params: dict):
    from rooflab.cell import Cell
    from rooflab.kernel import impls_for
    from rooflab.shapes import SQUARE, square_size

    preset = params.get("preset", SQUARE)
    shapes = shapes_for(kernel, params)
    dtypes = [d for d in params["dtypes"] if d in kernel.dtypes] + \
             [d for d in params["dtypes"] if d not in kernel.dtypes]
    impls = impls_for(kernel.name, params)
    cells = [
        Cell(kernel.name, impl, dtype, square_size(shape), p, shape, preset)
        for p in kernel.passes
        for dtype in dtypes
        for shape in shapes
        for impl in impls
    ]
    # The CUDA extensions build in the background (rooflab/cuda_ext.start_cuda_builds, ~45 s of nvcc on the H200's
    # host): their cells go last, so a kernel's other cells are timed meanwhile instead of waiting on the build
    return sorted(cells, key=lambda c: c.impl == "cuda")


def checkpoint_identity(kernel, params: dict, paired: bool = False) -> str:
    """Stored cells are reused only if the kernel's code, the measurement code and the timing config are unchanged.
    Code, not text: comments, docstrings and layout are not part of it (rooflab/codehash.py). ``paired``: the
    identity of the stored paired sessions, which the paired settings are part of too."""
    from rooflab.kernel import measurement_code

    keys = ("timing", "seed", "interpret_max_size") + (("paired", "impls") if paired else ())
    settings = json.dumps({k: params.get(k) for k in keys}, sort_keys=True)
    code = getattr(kernel, "code", None) or [kernel.source]  # its folder and imports (rooflab/kernel.kernel_code)
    own = [REPO / "rooflab/paired.py"] if paired else []  # the rounds' code is the paired sessions' alone
    return code_digest([*code, *(REPO / rel for rel in measurement_code()), *own], settings.encode())


def resume_marker(ckpt: Path) -> Path:
    """results/raw/{gpu}/.cells/{kernel}.jsonl -> .../.cells/{kernel}.resume: written by a process its stall watch
    stopped, so that the retry resumes from the stores even under reuse_cells: false."""
    return ckpt.with_suffix(".resume")


def paired_store(ckpt: Path) -> Path:
    """results/raw/{gpu}/.cells/{kernel}.jsonl -> .../.cells/{kernel}.paired.jsonl (rooflab/paired.PairedSweep)"""
    return ckpt.with_name(ckpt.stem + ".paired.jsonl")


def paired_path(out: str | Path) -> Path:
    """results/raw/{gpu}/{kernel}.parquet -> results/raw/{gpu}/paired/{kernel}.parquet"""
    out = Path(out)
    return out.parent / "paired" / out.name


def write_paired(rows: list[dict], path: str | Path, gpu: str, prov: dict, cfg) -> None:
    """The paired rounds (one row per side, round and frame; rooflab/paired.py) as tidy parquet, with the run's
    provenance and the paired settings; an empty table with the columns where none ran (paired off, CPU-only cells)."""
    import pandas as pd

    from rooflab.io import write_parquet
    from rooflab.paired import ROUND_COLUMNS, describe

    df = pd.DataFrame(rows).reindex(columns=ROUND_COLUMNS)
    for k, v in {
            "gpu": gpu,
            **{
                k: prov.get(k)
                for k in ("run_id", "git_sha", "timestamp", "device_uuid")
            },
            **describe(cfg)
    }.items():
        df[k] = v
    write_parquet(df, path)


def cell_store(out: str | Path) -> Path:
    """results/raw/{gpu}/{kernel}.parquet -> results/raw/{gpu}/.cells/{kernel}.jsonl (see rooflab/store.py)"""
    from rooflab.store import store_path

    return store_path(out)


def run(kernel_name: str, gpu: str, out: str, params: dict, progress: bool = True,
        describe_outputs: dict | None = None) -> int:
    """Measure every cell of one kernel into ``out``; then, where ``describe_outputs`` names their files
    (profiles=..., compiled=...), describe its kernels (``describe``)."""
    prepare_environment(gpu, params)
    # Inductor's pool of compile workers: a graph here holds one or two kernels, so the pool's start-up (16
    # processes on the H200 host) costs the cell it starts in more than it saves
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    from rooflab.kernel_facts import compile_caches

    caches = compile_caches()  # before anything compiles: is this a cold or a warm start?
    import pandas as pd
    from tqdm import tqdm

    from rooflab.io import RAW_COLUMNS, write_parquet
    from rooflab.kernel import load_kernel
    from rooflab import store
    from rooflab.provenance import provenance
    from rooflab.cell import run_cell
    from rooflab.lifeline import STALL_S, stall_watch
    from rooflab.timing import TimingConfig, timer_for
    from rooflab.shapes import label
    from rooflab.paired import PairedConfig, PairedSweep

    device, l2_bytes = check_device(gpu)
    if device == "cpu" and (describe_outputs or {}).get("profiles"):
        from experiments.profiles import profile_inductor_cpp

        profile_inductor_cpp()  # the cells' graphs are then the profile's own (no second C++ compile)
    start_cuda_builds(gpu)  # every kernel's, in the background: the first job to run starts them
    kernel = load_kernel(kernel_name)
    timing = TimingConfig.from_config(params.get("timing"))
    timer = timer_for(device, timing)  # one flush buffer and one spin calibration for the whole sweep
    cells = cells_for(kernel, params)
    identity = checkpoint_identity(kernel, params)
    # The cell store: every finished cell is appended here at once, so a kill loses at most the cell in flight,
    # and a rerun (after a kill, a failure, or a config change) measures only the cells it does not hold.
    ckpt = cell_store(out)
    resume = resume_marker(ckpt)  # left by a process its stall watch stopped: its retry keeps the stores
    if not params.get("reuse_cells", True) and not resume.exists():
        ckpt.unlink(missing_ok=True)
        paired_store(ckpt).unlink(missing_ok=True)
    resume.unlink(missing_ok=True)
    done = store.load(ckpt, identity, kernel.name)  # checked line by line; bad lines quarantined
    if done:
        log.info("reusing %d of %d cells of %s from %s: measured with the same code (identity %s)", len(done),
                 len(cells), kernel_name, ckpt, identity)
        text = text_digest(kernel.source)
        edited = sum(1 for r in done.values() if r.get("_source_text", text) != text)
        if edited:
            log.info(
                "%s changed since %d of them were measured, in comments, docstrings or layout only (its code "
                "is the same): they are reused, not measured again", kernel.source, edited)
    paired_cfg = PairedConfig.from_config(params.get("paired"))
    paired = PairedSweep(kernel, cells, device, timing, paired_cfg, timer, paired_store(ckpt),
                         checkpoint_identity(kernel, params, paired=True), seed=int(params.get("seed", 0)), log=log)
    prov = {**provenance(params), **caches}
    rows = []
    interpret_max = int(params.get("interpret_max_size", 0))

    # A GPU job whose cell never comes back to Python exits (its context goes with it) and is retried (rules/
    # measure.smk); a CPU job runs in a shared worker (rooflab/workers.py), which only StallTimeout stops.
    exit_s = 3 * STALL_S if device == "cuda" else None
    # A group's paired rounds stop after max_group_s (2 s) and mostly reuse their cells' compiled closures (a resumed
    # group builds them again): half a cell's limits (an H100 sweep's 27 other sessions took seconds each; the one
    # that hung: data/tuning/h100_logs/7_*stall.log)
    rounds_s = STALL_S / 2

    def hung_error(what: str, limit_s: float) -> str:
        return f"hung: {what} ran past {limit_s:.0f} s and stopped the process"

    def rounds_after(cell, row, fns=None):
        """The group's paired rounds, once it is complete (never raises: a session's failure is its own record),
        watched like a cell, at half its limits."""
        what = f"the paired rounds after cell {cell.impl} {cell.dtype} {label(cell.shape)}"

        def hung():  # from the stall watch's thread, as the process exits
            paired.hung(hung_error(what, 3 * rounds_s))
            resume.touch()

        with stall_watch(what, after_s=rounds_s, abort_s=2 * rounds_s, exit_s=exit_s and 3 * rounds_s, on_exit=hung):
            paired.after_cell(cell, row, fns)

    def record_hung(cell, what: str) -> None:  # from the stall watch's thread, as the process exits
        row = store.hung_row(cell, kernel.name, hung_error(what, 3 * STALL_S), family=kernel.family, cell_s=3 * STALL_S,
                             gpu=gpu, **prov, _identity=identity)
        with open(ckpt, "a") as out_fh:
            out_fh.write(json.dumps(row, default=str) + "\n")
        resume.touch()

    ckpt.parent.mkdir(parents=True, exist_ok=True)
    # On a terminal the bar redraws in place; into a log file (a cluster job, a device call) it writes a line
    # every 30 s instead of one per cell.
    tty = console() is not None and console().isatty()
    bar = tqdm(cells, desc=f"{gpu}/{kernel_name}", unit="cell", disable=not progress, file=console(),
               dynamic_ncols=True, mininterval=0.1 if tty else 30.0)
    with open(ckpt, "a") as fh:
        for cell in bar:
            bar.set_postfix_str(f"{cell.impl} {cell.dtype} {label(cell.shape)} {cell.pass_}", refresh=tty)
            if cell.key in done:
                rows.append(done[cell.key])
                rounds_after(cell, done[cell.key])
                continue
            t_cell = time.perf_counter()
            kept: dict = {}
            what = f"cell {cell.impl} {cell.dtype} {label(cell.shape)} {cell.pass_}"
            with stall_watch(what, abort_s=2 * STALL_S, exit_s=exit_s,
                             on_exit=lambda cell=cell, what=what: record_hung(cell, what)):
                row = run_cell(kernel, cell, device, timing, interpret_max_size=interpret_max,
                               seed=int(params.get("seed", 0)), l2_bytes=l2_bytes, timer=timer,
                               keep=kept if paired_cfg.enabled else None)  # closures kept only for the rounds
            row["cell_s"] = time.perf_counter() - t_cell  # what the cell cost the sweep, compile included
            row.update(gpu=gpu, **prov)
            tb = row.pop("traceback", None)
            if tb:
                log.error("cell %s failed:\n%s", cell, tb)
            log.info("%-8s %-9s %9s %-7s %-9s %s", cell.impl, cell.dtype, label(cell.shape), cell.pass_, row["status"],
                     f"{row.get('median_ms', float('nan')):.4f} ms" if row["status"] == "ok" else row["error"])
            rows.append(row)
            fh.write(
                json.dumps({
                    **row, "_identity": identity,
                    "_source_text": text_digest(kernel.source)
                }, default=str) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
            rounds_after(cell, row, kept.pop("fns", None))

    store.compact(ckpt, kernel.name)  # one line per cell: re-checked skipped and failed cells replace their old lines
    df = pd.DataFrame(rows).drop(columns=["_identity", "_source_text", store.HUNG], errors="ignore")
    df = df.reindex(columns=RAW_COLUMNS + [c for c in df.columns if c not in RAW_COLUMNS])
    counts = df["status"].value_counts().to_dict()
    failed = df[df["status"] == "failed"]
    summary = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
    log.info("%s on %s: %d cells (%s)", kernel_name, gpu, len(df), summary)
    if len(failed) and not params.get("allow_failures", False):
        # r["dtype"], not r.dtype: a row Series' .dtype and .size are its own attributes, not our columns
        lines = "\n".join(f"  {r['impl']} {r['dtype']} {r['shape'] if pd.isna(r['size']) else int(r['size'])} "
                          f"{r['pass']}: {r['error']}" for _, r in failed.iterrows())
        log.error(
            "%d cell(s) failed; the %d good cells are kept in %s and a rerun measures only what is missing. "
            "Set allow_failures: true to write the parquet with the failures recorded.\n%s", len(failed),
            len(df) - len(failed), ckpt, lines)
        return 1
    write_parquet(df, out)
    outputs = dict(describe_outputs or {})
    write_paired(paired.rows, outputs.pop("paired", None) or paired_path(out), gpu, prov, paired_cfg)
    describe(kernel_name, gpu, params, **outputs)
    return 0


def describe(kernel_name: str, gpu: str, params: dict, profiles: str | None = None,
             compiled: str | None = None) -> None:
    """The kernel's launch profile (experiments/profiles.py) and compiled-kernel facts (experiments/compiled.py),
    in this process once its cells are timed: its caches, Inductor graphs and autotuner choices are warm here, so
    they cost seconds, not the minutes of a fresh process compiling and autotuning everything again (on the H200
    the eight kernels' profiles took 170 s as a job of their own). After the timing, so the profiler never runs
    before a timed cell."""
    from experiments import compiled as compiled_job
    from experiments import profiles as profiles_job

    size = int((params.get("profile") or {}).get("size", 4096))
    for job, path, settings in ((profiles_job, profiles, {
            **params, "size": size
    }), (compiled_job, compiled, {
            "size": size,
            "extra_sizes": params.get("extra_sizes", []),
            "dtypes": params.get("dtypes"),
            "seed": params.get("seed", 0),
            "cache_dirs": params.get("cache_dirs", {})
    })):
        if path:
            t0 = time.perf_counter()
            job.run(gpu, [kernel_name], path, settings)
            log.info("%s of %s: %s in %.1f s", job.__name__.split(".")[-1], kernel_name, path, time.perf_counter() - t0)


def _setup_logging(logfile: str | None) -> None:
    handlers = [logging.StreamHandler(sys.stderr)]
    if logfile:
        Path(logfile).parent.mkdir(parents=True, exist_ok=True)
        handlers = [logging.FileHandler(logfile, mode="w")]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", handlers=handlers,
                        force=True)


def main(argv=None) -> int:
    from rooflab.kernel import IMPLS, OPT_IN_IMPLS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--gpu", required=True, help="config key of the device: cpu, h200, ...")
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--impls", nargs="+", default=[i for i in IMPLS if i not in OPT_IN_IMPLS])
    ap.add_argument("--interpret-max-size", type=int, default=512)
    ap.add_argument("--allow-failures", action="store_true")
    ap.add_argument("--profiles-out", help="also write the kernel's launch profile here (experiments/profiles.py)")
    ap.add_argument("--compiled-out", help="also write its compiled-kernel facts here (experiments/compiled.py)")
    ap.add_argument("--paired-out", help="the paired rounds' parquet (default: paired/<kernel>.parquet beside --out)")
    ap.add_argument("--profile-size", type=int, default=256)
    ap.add_argument("--preset", help="measure a shape preset (rooflab/shapes.py: llm, odd) instead of --sizes")
    ap.add_argument("--shapes", nargs="+", metavar="SHAPE",
                    help="measure these shapes of the kernel's family (4096x4097; 16x4096x14336) instead of --sizes")
    ap.add_argument(
        "--params", help="the sweep's parameters as JSON (the DAG's, rcfg.sweep_params), in place of "
        "those of the options above")
    args = ap.parse_args(argv)
    _setup_logging(None)
    params = {
        "sizes": args.sizes,
        "dtypes": args.dtypes,
        "impls": args.impls,
        "timing": {},
        "interpret_max_size": args.interpret_max_size,
        "allow_failures": args.allow_failures,
        "profile": {
            "size": args.profile_size
        }
    }
    if args.params:
        params = json.loads(args.params)
    elif args.preset or args.shapes:
        from rooflab.kernel import load_kernel
        from rooflab.shapes import CUSTOM, shape_sets

        spec = args.preset or {load_kernel(args.kernel).family: args.shapes}
        preset = args.preset or CUSTOM
        params.update(preset=preset, shapes=shape_sets([spec])[preset])
    try:
        rc = run(
            args.kernel, args.gpu, args.out, params, describe_outputs={
                "profiles": args.profiles_out,
                "compiled": args.compiled_out,
                "paired": args.paired_out
            })
    except DeviceMismatch as exc:
        log.error("%s", exc)
        rc = 2
    if rc:  # an exit status the CLI and a warm worker (which fails the job on it) both see
        raise SystemExit(rc)
    return 0


if __name__ == "__main__" and "snakemake" not in globals():
    sys.exit(main())

if "snakemake" in globals():
    sm = globals()["snakemake"]
    _setup_logging(sm.log[0])
    from rooflab.lifeline import follow_snakemake

    follow_snakemake()  # a kill -9 of snakemake ends this job too, before it measures or writes unattended
    try:
        rc = run(sm.wildcards.kernel, sm.wildcards.gpu, sm.output[0], dict(sm.params.sweep),
                 describe_outputs={k: sm.output.get(k)
                                   for k in ("profiles", "compiled", "paired")
                                   if sm.output.get(k)})
    except DeviceMismatch as exc:
        log.error("%s", exc)
        print(f"ERROR: {exc}", file=sys.stderr)
        rc = 2
    if rc:
        print(f"measurement of {sm.wildcards.kernel} on {sm.wildcards.gpu} failed: see {sm.log[0]}", file=sys.stderr)
    sys.exit(rc)
