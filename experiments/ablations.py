"""The matrix product taken apart, timed as the sweep times (GPU time: L2 flushed, launch hidden; the sweep's timing
config), bf16 by default: what the tile, the grouped tile order and the persistent TMA kernel each buy, and what an
odd size costs (alignment, tile quantisation, waves) and padding wins back.

    python -m experiments.ablations --gpu h200 --out results/raw/h200/ablations.parquet

Study ``tiles`` at --sizes (default 4096 8192): cuBLAS (torch.relu(a @ b), the builtin), our pointer kernel at the
tile the reference's autotuner chose for bf16 (128x256x64) with tiles in row order (GROUP_M 1) and grouped (GROUP_M
8), the same at two smaller tiles, our persistent TMA kernel at that tile, and ours as the sweep runs it
(autotuned). Study ``alignment`` at --align-sizes (default 1792 1793 1800 1920 2048): cuBLAS and ours (autotuned)
at each size, and at each size that is no multiple of 64 ours on operands zero-padded to the next one: the product
alone, and the padding fix whole (the copies into the padded buffers, the product, the slice back).

Each row: study, variant, method, tile, GROUP_M, size and padded size, the timer's statistics and TFLOP/s at the
unpadded size's 2 N^3 (a padded product does more work for the same answer). GPU only: the interpreter has no
timer and no TMA.
"""
import argparse
import logging
import sys
from pathlib import Path

log = logging.getLogger("rooflab.ablations")

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): the bf16 tile the H200 reference's autotuner chose at 8192
# (data/reference/h200/matmul.parquet), and two smaller ones from the pointer kernel's config list
WIDE = (128, 256, 64, 8, 3)
TILES = {"128x256": WIDE, "128x128": (128, 128, 64, 8, 4), "64x64": (64, 64, 64, 4, 4)}
PAD_TO = 64


def config(tile: tuple, group_m: int) -> dict:
    bm, bn, bk, warps, stages = tile
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m, "num_warps": warps, "num_stages": stages}


def padded(n: int, to: int = PAD_TO) -> int:
    return -(-n // to) * to


def variants(study: str, n: int, a, b) -> list[dict]:
    """The calls of one study at one size: dicts of variant, method, tile, group_m, padded (size run), fn."""
    import torch
    import torch.nn.functional as F

    from kernels.matmul import matmul_triton

    out = [{
        "variant": "cuBLAS (builtin)",
        "method": "cublas",
        "tile": "",
        "group_m": 0,
        "padded": n,
        "fn": lambda: torch.relu(a @ b)
    }, {
        "variant": "ours, autotuned",
        "method": "auto",
        "tile": "",
        "group_m": 0,
        "padded": n,
        "fn": lambda: matmul_triton(a, b, pad=False)
    }]  # unpadded: the study shows the cause, then the fix
    if study == "tiles":
        for name, tile in TILES.items():
            for group_m in ((1, 8) if tile == WIDE else (8, )):
                order = "grouped" if group_m > 1 else "row order"
                out.append({
                    "variant": f"pointer {name}, {order}",
                    "method": "pointer",
                    "tile": name,
                    "group_m": group_m,
                    "padded": n,
                    "fn": lambda c=config(tile, group_m): matmul_triton(a, b, config=c, method="pointer")
                })
        out.append({
            "variant": "TMA persistent 128x256, grouped",
            "method": "tma",
            "tile": "128x256",
            "group_m": 8,
            "padded": n,
            "fn": lambda c=config(WIDE, 8): matmul_triton(a, b, config=c, method="tma")
        })
    elif study == "alignment" and n % PAD_TO:
        p = padded(n)
        ap, bp = F.pad(a, (0, p - n, 0, p - n)), F.pad(b, (0, p - n, 0, p - n))
        out.append({
            "variant": f"ours, padded to {p}: product alone",
            "method": "auto",
            "tile": "",
            "group_m": 0,
            "padded": p,
            "fn": lambda: matmul_triton(ap, bp)
        })

        def fix():
            a2 = a.new_zeros(p, p)
            b2 = b.new_zeros(p, p)
            a2[:n, :n] = a
            b2[:n, :n] = b
            return matmul_triton(a2, b2)[:n, :n]

        out.append({
            "variant": f"ours, padded to {p}: copies + product + slice",
            "method": "auto",
            "tile": "",
            "group_m": 0,
            "padded": p,
            "fn": fix
        })
    return out


def run(gpu: str, sizes, align_sizes, dtype: str, timing: dict, out: str, cache_dirs: dict | None = None) -> int:
    from rooflab.device import check_device, prepare_environment

    prepare_environment(gpu, {"cache_dirs": cache_dirs or {}})  # the sweep's compile caches
    device, _ = check_device(gpu)
    if device != "cuda":
        print("ablations: the timer and the TMA kernel need an NVIDIA GPU", file=sys.stderr)
        return 2
    import pandas as pd
    import torch

    from rooflab import clocks
    from rooflab.io import write_parquet
    from rooflab.kernel import torch_dtype
    from rooflab.provenance import provenance
    from rooflab.timers import timer_for
    from rooflab.timing import TimingConfig, measure

    cfg = TimingConfig.from_config({**timing, "loop_ms": 0})  # the sweep's starts: one start's offset is ~5 % here
    timer = timer_for(device, cfg)
    rows = []
    for study, ns in (("tiles", sizes), ("alignment", align_sizes)):
        for n in ns:
            g = torch.Generator(device="cuda").manual_seed(0)
            a = torch.randn(n, n, device="cuda", generator=g).to(torch_dtype(dtype))
            b = torch.randn(n, n, device="cuda", generator=g).to(torch_dtype(dtype))
            want = torch.relu(a.float() @ b.float())
            for v in variants(study, n, a, b):
                fn = v.pop("fn")
                try:
                    got = fn()[:n, :n]  # compiles and autotunes here, outside the timing; a padded product's
                    # answer is its top-left N x N
                    err = float((got.float() - want).abs().max() / want.abs().max().clamp_min(1e-30))
                    stats = measure(fn, timer, cfg)
                except Exception as exc:  # a variant that does not run (shared memory) is a row that says so
                    log.warning("%s %s n=%d: %s: %s", study, v["variant"], n, type(exc).__name__, str(exc)[:200])
                    rows.append({
                        "study": study,
                        **v, "size": n,
                        "dtype": dtype,
                        "status": "failed",
                        "error": f"{type(exc).__name__}: {str(exc)[:300]}"
                    })
                    continue
                tflops = 2.0 * n**3 / (stats["median_ms"] * 1e-3) / 1e12
                rows.append({
                    "study": study,
                    **v, "size": n,
                    "dtype": dtype,
                    "status": "ok",
                    "rel_err": err,
                    "tflops": tflops,
                    **stats,
                    **clocks.prefixed("after")
                })
                log.info("%-9s n=%-5d %-45s %8.4f ms %7.1f TFLOP/s", study, n, v["variant"], stats["median_ms"], tflops)
            del a, b, want
            torch.cuda.empty_cache()
            # after every size: a run cut short keeps the sizes it finished
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            write_parquet(
                pd.DataFrame(rows).assign(**{
                    **provenance(), "gpu": gpu,
                    "device_name": torch.cuda.get_device_name()
                }), out)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", required=True, help="config key of the device (checked against the device present)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--align-sizes", type=int, nargs="+", default=[1792, 1793, 1800, 1920, 2048])
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    ap.add_argument("--config", default="config/config.yaml", help="the timing comes from its timing section")
    ap.add_argument("--timing", help="the timing section as JSON (the DAG's), instead of --config's")
    ap.add_argument("--cache-dirs", default="{}", help="config cache_dirs as JSON (the sweep's compile caches)")
    args = ap.parse_args(argv)
    import json

    import yaml

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    timing = json.loads(args.timing) if args.timing else \
        (yaml.safe_load(Path(args.config).read_text()) or {}).get("timing", {})
    return run(args.gpu, args.sizes, args.align_sizes, args.dtype, timing, args.out, json.loads(args.cache_dirs))


if __name__ == "__main__":
    sys.exit(main())
