"""Our matrix product in the shapes and modes a model uses, against cuBLAS, on one Hopper GPU (issue 54).

    python scripts/bench_matmul_modes.py --out matmul_modes.csv [--parts decode,tf32,ieee,tf32x3,decode32] [--quick]
                                         [--explore]

Parts (each row: GPU time by triton.testing.do_bench, and the Python loop's time a call, back-to-back calls then one
sync; C = relu(A @ B) unless the row says product alone):
  decode  bf16 M in {1, 8, 16, 32, 64, 128} x DECODE_WEIGHTS (K x N): ours before (split_k=1: the one-program-a-tile
          kernels, autotuned), ours after (the split-K plan), cuBLAS relu(mm) and mm alone; then ours after and cuBLAS
          on the same B stored K-major (mode "bf16, B = W.t()": nn.Linear's x @ W.t())
  decode32 fp32 decode rows, IEEE and TF32: ours before (unsplit, the old K-major copy rule) and after, cuBLAS
  tf32    squares 2048, 4096, 8192: ours auto (K-major copy of B, then the pointer kernel), the pointer and the TMA kernel
          on a K-major B (product alone: autotuned, then TMA at fixed tiles), cuBLAS TF32
  ieee    IEEE fp32 squares 4096, 8192: ours autotuned, ours at each FFMA_TILES tile (wider than the autotuner's), cuBLAS
  tf32x3  squares 4096, 8192: ours with precision="tf32x3" (fp32 via three TF32 products), and the error against a
          float64 product (no ReLU: ||C - ref|| / ||ref|| and max |C - ref| / max |ref|) of ours IEEE, tf32x3 and TF32,
          cuBLAS IEEE and TF32
Prints one compact table and writes every row to --out (CSV). Not a test: numbers only. --quick: fewer shapes.
"""
from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.testing  # noqa: E402

from kernels import matmul as mm  # noqa: E402
from kernels.matmul import plan as mplan  # noqa: E402
from rooflab.cell import relative_error  # noqa: E402
from rooflab.kernel import math_mode  # noqa: E402
from rooflab.timers import _loop_ms  # noqa: E402

DEVICE = "cuda"
DECODE_ROWS = (1, 8, 16, 32, 64, 128)
DECODE_WEIGHTS = ((4096, 4096), (4096, 14336), (8192, 8192), (4096, 1024), (8192, 1024))  # K x N
DECODE32_ROWS, DECODE32_WEIGHTS = (1, 8, 32, 128), ((4096, 4096), (4096, 14336), (4096, 1024))
TF32_SIZES, IEEE_SIZES, TF32X3_SIZES = (2048, 4096, 8192), (4096, 8192), (4096, 8192)  # --quick: all but the last
# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps); GROUP_M 8
TMA_TF32_TILES = ((128, 128, 32, 3, 4), (128, 256, 32, 3, 8), (128, 64, 32, 4, 4))
# a row-major B in TF32: one stage loads B with 16-byte loads and transposes it into shared memory through registers;
# two or more stages copy it asynchronously 4 bytes at a time (scripts/matmul_tf32_layout.py)
ROWMAJOR_TF32_TILES = ((128, 128, 32, 1, 8), (128, 128, 32, 1, 4), (128, 256, 32, 1, 8), (64, 128, 32, 1, 4),
                       (128, 128, 32, 3, 8))
FFMA_TILES = ((64, 64, 32, 3, 4), (128, 64, 32, 3, 8), (64, 128, 32, 3, 8), (128, 128, 16, 3, 8), (128, 128, 32, 3, 8),
              (128, 64, 16, 4, 8))
EXPLORE = False  # --explore: decode rows at other split counts and tiles (data for kernels/matmul/table.py)
EXPLORE_SPLITS = (2, 4, 8, 16)
EXPLORE_TILES = ((16, 64, 256, 3, 4), (16, 128, 128, 4, 4), (32, 128, 64, 4, 4), (64, 64, 64, 4, 4),
                 (64, 128, 128, 3, 8), (128, 64, 64, 4, 8))
FIELDS = ("device", "part", "shape", "mode", "variant", "gpu_us", "loop_us", "tflops", "x_cublas_gpu", "x_cublas_loop",
          "rel_err", "max_err", "note")


def tile(bm, bn, bk, stages, warps) -> dict:
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "num_stages": stages, "num_warps": warps}


def timed(fn, flop: float) -> dict:
    """GPU time (do_bench median) and the Python loop's time a call; NaN with the error where fn fails."""
    try:
        fn()
        torch.cuda.synchronize()
        gpu_ms = triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median")
        loop_ms = _loop_ms(fn, 20.0, torch.cuda.synchronize)
    except Exception as exc:  # noqa: BLE001  a tile that does not fit or compile is a NaN row
        return {
            "gpu_us": math.nan,
            "loop_us": math.nan,
            "tflops": math.nan,
            "note": f"{type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:80] if str(exc) else ''}"
        }
    return {"gpu_us": gpu_ms * 1e3, "loop_us": loop_ms * 1e3, "tflops": flop / (gpu_ms * 1e-3) / 1e12, "note": ""}


def errors(out, ref) -> dict:
    rel, max_abs = relative_error(out, ref)
    return {"rel_err": rel, "max_err": max_abs / float(ref.abs().max())}


def against(rows: list[dict], cublas: str, key: tuple = ("part", "shape")) -> list[dict]:
    """Each row's cuBLAS ratios (cuBLAS time over ours: above 1 is faster than cuBLAS) within its `key` (part and
    shape; decode32 adds the mode: its two modes share shapes)."""
    base = {tuple(r[k] for k in key): r for r in rows if r["variant"] == cublas}
    for r in rows:
        b = base.get(tuple(r[k] for k in key))
        if b is not None:
            r["x_cublas_gpu"] = b["gpu_us"] / r["gpu_us"]
            r["x_cublas_loop"] = b["loop_us"] / r["loop_us"]
    return rows


def decode(quick: bool) -> list[dict]:
    rows = []
    weights = DECODE_WEIGHTS[:1] if quick else DECODE_WEIGHTS
    sms = mm.multiprocessor_count(torch.device(DEVICE))
    for k, n in weights:
        b = torch.randn(k, n, device=DEVICE).to(torch.bfloat16)
        for m in DECODE_ROWS:
            a = torch.randn(m, k, device=DEVICE).to(torch.bfloat16)
            ref = torch.relu(a.double() @ b.double())
            p = mplan.plan(m, n, k, 2, sms, mm.SPLITK)
            plan = f"split {p.split} x {p.k_per_split} of K, {p.tiles} tiles {p.meta}" if p else "no split"
            variants = {
                "ours before (split_k=1)": (lambda: mm.matmul_triton(a, b, split_k=1), ""),
                "ours after (plan)": (lambda: mm.matmul_triton(a, b), plan),
                "cuBLAS relu(mm)": (lambda: torch.relu(torch.mm(a, b)), ""),
                "cuBLAS mm alone": (lambda: torch.mm(a, b), "product alone")
            }
            if EXPLORE:
                variants |= explore_variants(a, b, sms)
            wt = b.t().contiguous().t()  # the same B stored K-major: x @ W.t() of nn.Linear's (N, K) weight
            linear = {
                "ours after (plan)": (lambda: mm.matmul_triton(a, wt), plan),
                "cuBLAS relu(mm)": (lambda: torch.relu(torch.mm(a, wt)), "")
            }
            for mode, group in (("bf16", variants), ("bf16, B = W.t()", linear)):
                for name, (fn, note) in group.items():
                    r = {
                        "part": "decode",
                        "shape": f"{m}x{k}x{n}",
                        "mode": mode,
                        "variant": name,
                        **timed(fn, 2.0 * m * n * k)
                    }
                    if not r["note"]:
                        r["note"] = note
                        if name != "cuBLAS mm alone":
                            r.update(errors(fn(), ref))
                    rows.append(r)
        print(f"done decode K x N = {k} x {n}", flush=True)
    return against(rows, "cuBLAS relu(mm)", ("part", "shape", "mode"))


def explore_variants(a, b, sms: int) -> dict:
    """--explore: the table's tile at other split counts, and other tiles at the count the plan gives them."""
    (m, k), n = a.shape, b.shape[1]
    out = {f"ours split {s}, table tile": (lambda s=s: mm.matmul_triton(a, b, split_k=s), "") for s in EXPLORE_SPLITS}
    for t in EXPLORE_TILES:
        p = mplan.plan(m, n, k, 2, sms, mm.SPLITK, tile=t)
        split = p.split if p else 4
        out[f"ours split {split}, {t[0]}x{t[1]}x{t[2]} s{t[3]} w{t[4]}"] = \
            (lambda c=tile(*t), s=split: mm.matmul_triton(a, b, config=c, split_k=s), "")
    return out


def tf32(quick: bool) -> list[dict]:
    rows = []
    with math_mode("tf32"):
        for n in TF32_SIZES[:-1] if quick else TF32_SIZES:
            a = torch.randn(n, n, device=DEVICE)
            b = torch.randn(n, n, device=DEVICE)
            bk = b.t().contiguous().t()  # the same B stored K-major: what Hopper's TF32 MMA reads
            variants = {
                "ours auto (K-major copy + pointer)": lambda: mm.matmul_triton(a, b),
                "ours pointer, B row-major": lambda: mm.matmul_triton(a, b, method="pointer", pad=False),
                "ours pointer, B K-major": lambda: mm.matmul_triton(a, bk, method="pointer"),
                "ours TMA, B K-major": lambda: mm.matmul_triton(a, bk, method="tma")
            }
            for t in TMA_TF32_TILES:
                variants[f"ours TMA, B K-major, {t[0]}x{t[1]}x{t[2]} s{t[3]} w{t[4]}"] = \
                    lambda c=tile(*t): mm.matmul_triton(a, bk, config=c, method="tma")
            for t in ROWMAJOR_TF32_TILES:
                variants[f"ours pointer, B row-major, {t[0]}x{t[1]}x{t[2]} s{t[3]} w{t[4]}"] = \
                    lambda c=tile(*t): mm.matmul_triton(a, b, config=c, method="pointer", pad=False)
            variants["cuBLAS relu(mm)"] = lambda: torch.relu(torch.mm(a, b))
            variants["cuBLAS mm alone"] = lambda: torch.mm(a, b)
            for name, fn in variants.items():
                rows.append({
                    "part": "tf32",
                    "shape": f"{n}x{n}x{n}",
                    "mode": "tf32",
                    "variant": name,
                    **timed(fn, 2.0 * n**3)
                })
            print(f"done tf32 n={n}", flush=True)
    return against(rows, "cuBLAS relu(mm)")


def ieee(quick: bool) -> list[dict]:
    rows = []
    with math_mode("float32"):
        for n in IEEE_SIZES[:-1] if quick else IEEE_SIZES:
            a = torch.randn(n, n, device=DEVICE)
            b = torch.randn(n, n, device=DEVICE)
            variants = {"ours autotuned": lambda: mm.matmul_triton(a, b, precision="ieee")}
            for t in FFMA_TILES:
                variants[f"ours pointer {t[0]}x{t[1]}x{t[2]} s{t[3]} w{t[4]}"] = \
                    lambda c=tile(*t): mm.matmul_triton(a, b, config=c, method="pointer", precision="ieee")
            variants["cuBLAS relu(mm)"] = lambda: torch.relu(torch.mm(a, b))
            for name, fn in variants.items():
                rows.append({
                    "part": "ieee",
                    "shape": f"{n}x{n}x{n}",
                    "mode": "fp32-ieee",
                    "variant": name,
                    **timed(fn, 2.0 * n**3)
                })
            print(f"done ieee n={n}", flush=True)
    return against(rows, "cuBLAS relu(mm)")


def tf32x3(quick: bool) -> list[dict]:
    rows = []
    for n in TF32X3_SIZES[:-1] if quick else TF32X3_SIZES:
        a = torch.randn(n, n, device=DEVICE)
        b = torch.randn(n, n, device=DEVICE)
        ref = a.double() @ b.double()
        variants = {  # (mode, torch's math mode, fn): the error rows run the product alone (no ReLU zeros)
            "ours IEEE": ("fp32-ieee", "float32", lambda act: mm.matmul_triton(a, b, act, precision="ieee")),
            "ours tf32x3": ("fp32 via 3xTF32", "float32", lambda act: mm.matmul_triton(a, b, act, precision="tf32x3")),
            "ours TF32": ("tf32", "tf32", lambda act: mm.matmul_triton(a, b, act, precision="tf32")),
            "cuBLAS IEEE": ("fp32-ieee", "float32",
                            lambda act: torch.relu(torch.mm(a, b)) if act == "relu" else torch.mm(a, b)),
            "cuBLAS TF32": ("tf32", "tf32", lambda act: torch.relu(torch.mm(a, b)) if act == "relu" else torch.mm(a, b)),
        }
        for name, (mode, torch_mode, fn) in variants.items():
            with math_mode(torch_mode):
                r = {
                    "part": "tf32x3",
                    "shape": f"{n}x{n}x{n}",
                    "mode": mode,
                    "variant": name,
                    **timed(lambda f=fn: f("relu"), 2.0 * n**3)
                }
                try:
                    r.update(errors(fn("none"), ref))
                except Exception as exc:  # noqa: BLE001
                    r["note"] = r["note"] or f"{type(exc).__name__}"
            rows.append(r)
        del ref
        print(f"done tf32x3 n={n}", flush=True)
    return against(rows, "cuBLAS IEEE")


def decode32(quick: bool) -> list[dict]:
    """fp32 decode rows, IEEE and TF32: before (one program a tile; TF32 with the K-major copy wherever M N K reached
    KMAJOR_MIN_MNK) and after (the plan: fp32 split tiles, no copy for few rows), against cuBLAS."""
    from kernels.matmul import operands

    rows = []
    for mode, dtype in (("ieee", "float32"), ("tf32", "tf32")):
        with math_mode(dtype):
            for k, n in DECODE32_WEIGHTS[:1] if quick else DECODE32_WEIGHTS:
                b = torch.randn(k, n, device=DEVICE)
                for m in DECODE32_ROWS:
                    a = torch.randn(m, k, device=DEVICE)
                    ref = torch.relu(a.double() @ b.double())

                    copy = mode == "tf32" and m * n * k >= operands.KMAJOR_MIN_MNK  # the old rule: any M

                    def before(a=a, b=b, copy=copy):  # the copy each call, as "auto" made it
                        return mm.matmul_triton(a, b.t().contiguous().t() if copy else b, split_k=1)

                    variants = {
                        "ours before (no split, old copy rule)": before,
                        "ours after (plan)": lambda a=a, b=b: mm.matmul_triton(a, b),
                        "cuBLAS relu(mm)": lambda a=a, b=b: torch.relu(torch.mm(a, b))
                    }
                    for name, fn in variants.items():
                        r = {
                            "part": "decode32",
                            "shape": f"{m}x{k}x{n}",
                            "mode": mode,
                            "variant": name,
                            **timed(fn, 2.0 * m * n * k)
                        }
                        if not r["note"]:
                            r.update(errors(fn(), ref))
                        rows.append(r)
                print(f"done decode32 {mode} K x N = {k} x {n}", flush=True)
    return against(rows, "cuBLAS relu(mm)", ("part", "mode", "shape"))


PARTS = {"decode": decode, "tf32": tf32, "ieee": ieee, "tf32x3": tf32x3, "decode32": decode32}


def fmt(v, spec: str) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="CSV of every row")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    ap.add_argument("--quick", action="store_true", help="one weight and the smaller squares only")
    ap.add_argument("--explore", action="store_true", help="decode: other split counts and tiles too (slower)")
    args = ap.parse_args()
    global EXPLORE
    EXPLORE = args.explore
    if not torch.cuda.is_available():
        sys.exit("bench_matmul_modes.py needs a CUDA GPU (Hopper: the TMA rows)")
    t0 = time.perf_counter()
    rows = []
    for part in args.parts.split(","):
        rows += PARTS[part](args.quick)
    device = torch.cuda.get_device_name(0)
    print(f"\n{device}, triton {triton.__version__}, torch {torch.__version__}, "
          f"{time.perf_counter() - t0:.0f} s")
    print(f"{'shape':<16} {'mode':<16} {'variant':<44} {'GPU us':>9} {'loop us':>9} {'TFLOP/s':>8} "
          f"{'x cuBLAS':>8} {'loop x':>7} {'rel err':>9} {'max err':>9}  note")
    for r in rows:
        print(f"{r['shape']:<16} {r['mode']:<16} {r['variant'][:44]:<44} {fmt(r['gpu_us'], '9.1f')} "
              f"{fmt(r['loop_us'], '9.1f')} {fmt(r['tflops'], '8.1f')} {fmt(r.get('x_cublas_gpu'), '8.3f')} "
              f"{fmt(r.get('x_cublas_loop'), '7.3f')} {fmt(r.get('rel_err'), '9.2e')} {fmt(r.get('max_err'), '9.2e')}"
              f"  {r['note'][:70]}")
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in FIELDS} | {"device": device})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
