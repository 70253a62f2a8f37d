"""FlashAttention-2's kept launches (kernels/_shared/fastlaunch.py): a forward or backward call whose inputs' specs,
mask, scale and math mode were seen before skips the checks, the plan and Triton's dispatch (an autotuner over a
heuristic, twice per forward and backward) and replays the first call's launches on fresh outputs, so a call from
a Python loop costs its launches. The decode kernel keeps its own (decode.py)."""
from __future__ import annotations

import torch

from kernels._shared import tables
from kernels._shared.fastlaunch import LaunchCache, spec
from kernels.attention.plan import input_precision

LAUNCHES = LaunchCache("attention")


def forward_key(q, k, v, causal: bool, sm_scale: float, method: str):
    """The forward's key: what decides its checks, its kernel (TMA or pointer: contiguity and alignment are in the
    specs), its plan, its math mode (fp32: torch's TF32 switch) and Triton's specialisation. None for inputs that
    are not tensors or a scale that is no number (the checks say why)."""
    if not all(isinstance(t, torch.Tensor) for t in (q, k, v)) or not isinstance(sm_scale, (int, float)):
        return None
    return ("fwd", spec(q), spec(k), spec(v), bool(causal), float(sm_scale), method, input_precision(q.dtype),
            tables.VERSION)


def backward_key(q, k, v, o, lse, do, causal: bool, sm_scale: float, precision: str):
    """The backward's key: the forward's inputs and outputs and dO (after the wrapper made its rows contiguous)."""
    return ("bwd", spec(q), spec(k), spec(v), spec(o), spec(lse), spec(do), bool(causal), float(sm_scale), precision,
            tables.VERSION)


class KeptForward:
    """A kept forward: O and the logsumexp allocated as the first call did, then its one launch; through TMA, on the
    key's four descriptors (kept from the first call, their block shapes the chosen config's) pointed at this call's
    tensors for the launch only, so no buffer is held after it."""
    __slots__ = ("entry", "descriptors", "lse_rows")

    def __init__(self, entry, descriptors, lse_rows: int):
        self.entry, self.descriptors, self.lse_rows = entry, descriptors, lse_rows
        for desc in descriptors or ():
            desc.base = None

    def __call__(self, q, k, v):
        o = torch.empty((*q.shape[:3], v.shape[-1]), dtype=q.dtype, device=q.device)
        lse = torch.empty((self.lse_rows, q.shape[2]), dtype=torch.float32, device=q.device)
        if self.descriptors is None:
            self.entry(q, k, v, o, lse)
            return o, lse
        for desc, t in zip(self.descriptors, (q, k, v, o)):
            desc.base = t.view(-1, t.shape[-1])
        try:
            self.entry(*self.descriptors, o, lse)
        finally:
            for desc in self.descriptors:
                desc.base = None
        return o, lse


class KeptBackward:
    """A kept backward: dQ, dK, dV (and the chunks' fp32 partials) allocated as the first call did, then delta's,
    dK dV's and dQ's launches, the partials summed in a fixed order between the last two."""
    __slots__ = ("delta", "dkdv", "dq", "chunks")

    def __init__(self, delta, dkdv, dq, chunks: int):
        self.delta, self.dkdv, self.dq, self.chunks = delta, dkdv, dq, chunks

    def __call__(self, q, k, v, o, lse, do):
        dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        dk, dv = (torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (k, v))
        delta = torch.empty_like(lse)
        part_k, part_v = (dk, dv) if self.chunks == 1 else (torch.empty(
            (self.chunks, *t.shape), dtype=torch.float32, device=t.device) for t in (k, v))
        self.delta(o, do, delta)
        self.dkdv(q, k, v, do, part_k, part_v, lse, delta)
        if self.chunks > 1:
            dk.copy_(part_k.sum(0))
            dv.copy_(part_v.sum(0))
        self.dq(q, k, v, do, dq, lse, delta)
        return dq, dk, dv
