"""What several kernels share: the launch cache (fastlaunch), the launch tables' Choice and swap tracking (tables),
the row kernels' heuristic and helpers (rows), the elementwise tiling (elementwise), the norms' backward, packed and
split paths (norm_*) and the CUDA build (cuda). A kernel's measurement depends on the ones it imports."""
