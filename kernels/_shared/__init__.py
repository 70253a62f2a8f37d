"""What several kernels share: the launch cache (fastlaunch), the launch tables' Choice and swap tracking (tables),
the row kernels' heuristic and helpers (rows), the elementwise tiling and plan (elementwise), the norms' forward,
backward, packed and split paths (norm_*), what shape and strides say of a layout (layout) and the CUDA build (cuda).
A kernel's measurement depends on the ones it imports."""
