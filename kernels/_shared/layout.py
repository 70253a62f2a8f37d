"""What a tensor's shape and strides say of its memory layout, from plain values: the plans decide on it without a
tensor (kernels/<name>/plan.py, kernels/_shared/elementwise.plan)."""
from __future__ import annotations


def contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether a tensor of this shape and these strides is contiguous, as torch.Tensor.is_contiguous says."""
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True
