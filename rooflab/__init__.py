"""rooflab: a reproducible experiment suite for GPU kernels written in Triton (shared library code)."""
