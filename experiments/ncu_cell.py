"""Driver for Nsight Compute: run one cell's call inside an NVTX range, so ncu profiles that call and nothing else.

    ncu --clock-control none --nvtx --nvtx-include "rooflab_cell/" --export report \
        python experiments/ncu_cell.py --gpu h200 --kernel gelu --impl triton --dtype bfloat16 --size 4096
    ncu --import report.ncu-rep --csv --page details > ncu.csv

The DAG's rule ``ncu`` (off unless config ncu.enabled) runs exactly that. The call is warmed up first, outside the
range, so Triton's JIT, the autotuner's search and Inductor's compilation are not what ncu sees. ``--clock-control
none`` keeps the GPU's own clocks (ncu otherwise locks them to base, unlike the sweep's timings).
"""

import argparse
import sys

NVTX_RANGE = "rooflab_cell"  # the rule's --nvtx-include names it: "rooflab_cell/" (a push/pop range)
WARMUP_CALLS = 3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", required=True, help="config key of the device (checked against the device present)")
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--impl", required=True)
    ap.add_argument("--dtype", required=True)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--pass", dest="pass_", default=None, help="for multi-pass kernels (default: the first)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from rooflab.device import check_device, prepare_environment

    prepare_environment(args.gpu, {})
    device, _ = check_device(args.gpu)
    if device != "cuda":
        print("ncu_cell: Nsight Compute needs an NVIDIA GPU; nothing to profile on the CPU", file=sys.stderr)
        return 2

    import torch

    from experiments.profiles import cell_callable
    from rooflab.kernel import load_kernel
    from rooflab.cell import Cell, skip_reason

    kernel = load_kernel(args.kernel)
    pass_ = args.pass_ or kernel.passes[0]
    reason = skip_reason(kernel, Cell(kernel.name, args.impl, args.dtype, args.size, pass_), device, 0)
    if reason:
        print(f"ncu_cell: {args.kernel} {args.impl} {args.dtype} {args.size}: {reason}", file=sys.stderr)
        return 2
    fn = cell_callable(kernel, args.impl, args.dtype, args.size, pass_, device, args.seed)
    for _ in range(WARMUP_CALLS):
        fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(NVTX_RANGE)
    fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    print(f"ncu_cell: profiled one call of {args.kernel} {args.impl} {args.dtype} {args.size} {pass_}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
