"""The kernels of the study: one file each, ``KERNEL = Kernel(...)`` at the bottom (see rooflab/kernel.py)."""
