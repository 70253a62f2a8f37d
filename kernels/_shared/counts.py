"""Zeroed int32 counts for one-launch splits (kernels/matmul/splitk.py, kernels/rowsum): each program of a launch
counts itself done with an acq_rel atomic, the last one combines the partials and sets its count back to zero, so
the buffer is zero between launches (CUDA's threadFenceReduction sample counts so). One buffer per (device, stream):
launches on one stream take turns with it, two streams never share one (one Python thread launches, as
kernels/_shared/fastlaunch.py assumes: threads on the per-thread default stream would share its handle)."""
from __future__ import annotations

import torch

COUNTS_MIN = 1024  # counts a stream's buffer holds at least (a planned split has fewer tiles than SMs; more grows it)
_COUNTS: dict = {}  # (device type, index, stream) -> int32 counts, zero between launches


def counts_for(device: torch.device, n: int) -> torch.Tensor:
    """The current stream's zeroed counts, at least ``n`` of them. A CUDA graph being captured gets its own (a
    zeroing node of the graph: what is allocated during a capture holds nothing until the graph replays)."""
    if device.type == "cuda":
        if torch.cuda.is_current_stream_capturing():
            return torch.zeros(n, dtype=torch.int32, device=device)
        index = torch.cuda.current_device() if device.index is None else device.index
        key = ("cuda", index, torch._C._cuda_getCurrentRawStream(index))
    else:
        key = (device.type, device.index, 0)
    counts = _COUNTS.get(key)
    if counts is None or counts.numel() < n:  # a smaller one is freed in stream order, as any tensor
        counts = _COUNTS[key] = torch.zeros(max(n, COUNTS_MIN), dtype=torch.int32, device=device)
    return counts
