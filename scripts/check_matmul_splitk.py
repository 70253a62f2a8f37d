"""Check the matrix product's split-K path on a GPU (kernels/matmul/splitk.py: one launch, the tile's last slice adds
the others): against float64 at decode, odd and tall-narrow shapes, bf16 and fp16, ReLU and none, B row-major and
K-major (nn.Linear's x @ W.t()); calls repeated through the kept launch; bitwise the same result every call (a fixed
order of slices) over a long back-to-back loop; inside a captured CUDA graph and on two streams at once; more tiles
than a stream's first counts buffer holds.

Prints one line per check and exits 1 if any fails. No timing. Usage: python scripts/check_matmul_splitk.py
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's kernels, whatever is installed

import torch  # noqa: E402

from kernels import matmul as mm  # noqa: E402
from kernels._shared import counts  # noqa: E402
from kernels.matmul import plan as mplan  # noqa: E402
from rooflab.cell import relative_error  # noqa: E402

# (M, K, N, split_k): None lets the plan split (the table's tiles), a number forces that many slices
SHAPES = ((1, 4096, 4096, None), (8, 4096, 4096, None), (16, 4096, 1024, None), (32, 4096, 4096, None),
          (64, 4096, 4096, None), (100, 4096, 4096, None), (128, 4096, 4096, None), (1, 8192, 8192, None),
          (128, 8192, 8192, None), (32, 8192, 1024, None), (3, 4097, 4096, None), (17, 3001, 1000, None),
          (5, 5000, 333, None), (4096, 8192, 64, None), (4096, 4096, 4096, 2))  # the last: 2048 tiles
TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3}  # relative (norm-wise): a few of the dtype's roundings
failures: list[str] = []


def check(name: str, ok: bool, detail: str = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}", flush=True)
    if not ok:
        failures.append(name)


def main() -> int:
    if not torch.cuda.is_available():
        print("no GPU: this checks the split-K path on one", file=sys.stderr)
        return 2
    dev, sms = torch.device("cuda"), mm.multiprocessor_count(torch.device("cuda"))
    g = torch.Generator(device=dev).manual_seed(0)
    for m, k, n, split in SHAPES:
        for dtype in (torch.bfloat16, torch.float16):
            a = torch.randn(m, k, device=dev, generator=g).to(dtype)
            b = torch.randn(k, n, device=dev, generator=g).to(dtype)
            p = mplan.plan(m, n, k, a.element_size(), sms, mm.SPLITK, split)
            wt = b.t().contiguous().t()  # the same B stored K-major: nn.Linear's x @ W.t()
            for act, bb, layout in (("relu", b, ""), ("none", b, ""), ("relu", wt, " B = W.t()")):
                exact = a.double() @ b.double()
                exact = torch.relu(exact) if act == "relu" else exact
                calls = [mm.matmul_triton(a, bb, activation=act, split_k=split) for _ in range(3)]  # kept from 2nd
                err = max(relative_error(c, exact)[0] for c in calls)
                same = all(torch.equal(c, calls[0]) for c in calls)
                check(f"{m}x{k}x{n} {dtype} {act}{layout}", p is not None and err < TOL[dtype] and same,
                      f"split {p.split if p else None}, rel err {err:.2e}, calls bitwise equal {same}")
    a = torch.randn(64, 4096, device=dev, dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    first = mm.matmul_triton(a, b)
    outs = [mm.matmul_triton(a, b) for _ in range(2000)]  # back to back: the launches overlap nothing but in order
    torch.cuda.synchronize()
    check("2000 back-to-back calls bitwise equal", all(torch.equal(c, first) for c in outs))
    streams = (torch.cuda.Stream(), torch.cuda.Stream())  # two streams at once, each with its own counts
    for s in streams:
        s.wait_stream(torch.cuda.current_stream())
    on_streams = [[], []]
    for _ in range(200):
        for s, outs in zip(streams, on_streams):
            with torch.cuda.stream(s):
                outs.append(mm.matmul_triton(a, b))
    for s in streams:
        torch.cuda.current_stream().wait_stream(s)
    check("two streams at once, 200 calls each", all(torch.equal(c, first) for outs in on_streams for c in outs))
    static_a = a.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = mm.matmul_triton(static_a, b)
    for seed in range(3):
        static_a.copy_(torch.randn(a.shape, device=dev, generator=g.manual_seed(seed)).to(a.dtype))
        graph.replay()
        check(f"CUDA graph replay {seed}", torch.equal(captured, mm.matmul_triton(static_a, b)))
    torch.cuda.synchronize()
    left = sum(int(c.count_nonzero()) for c in counts._COUNTS.values())
    check("every count back to zero", left == 0, f"({len(counts._COUNTS)} buffers, {left} nonzero)")
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
