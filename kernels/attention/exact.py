"""The float64 reference the sweep checks attention against: the naive expression (attention_naive), a chunk of
heads at a time so that a check's memory stays bounded at long sequences."""
from __future__ import annotations

import torch

REFERENCE_SCORES = 1 << 26  # float64 scores per chunk of heads: a check's memory stays bounded at 16k tokens


def reference(inputs, pass_: str = "fwd", causal: bool = True):
    """The naive expression in float64, a chunk of heads at a time: O, or (dQ, dK, dV) by autograd."""
    from kernels.attention import attention_naive  # (the package imports this module)

    q, k, v, grad_o = (t.flatten(0, 1) for t in inputs)  # (batch * heads, seq, head_dim)
    step = max(1, REFERENCE_SCORES // max(1, q.shape[1]**2))
    outs = []
    for i in range(0, q.shape[0], step):
        part = [t[i:i + step].to(torch.float64) for t in (q, k, v)]
        if pass_ == "fwd":
            outs.append((attention_naive(*part, causal), ))
            continue
        part = [t.requires_grad_(True) for t in part]
        attention_naive(*part, causal).backward(grad_o[i:i + step].to(torch.float64))
        outs.append(tuple(t.grad for t in part))
    joined = [torch.cat(parts).unflatten(0, inputs[0].shape[:2]) for parts in zip(*outs)]
    return joined[0] if pass_ == "fwd" else tuple(joined)
