"""The kernels of the study: one folder each (``kernels/<name>/``, ``KERNEL = Kernel(...)`` at the bottom of its
``__init__.py``; see rooflab/kernel.py), and what several share in ``kernels/_shared/``."""
