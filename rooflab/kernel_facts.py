"""Facts about a compiled Triton kernel: theoretical occupancy from its registers and shared memory, and the width
of its global loads and stores read off the PTX.

Pure functions, no torch or triton import: the arithmetic is tested on the CPU, the extraction (which needs a
compiled kernel, so a GPU) lives in experiments/compiled.py.

Occupancy follows the CUDA occupancy calculator (CUDA C++ Programming Guide, "Compute capabilities", table of
technical specifications; CUDA_Occupancy_Calculator.xls):
- registers are allocated per warp, in units of ``reg_alloc_unit`` (256 on sm_80/sm_90/sm_100), so a warp of
  threads using r registers takes ceil(32 r / 256) * 256 of them;
- shared memory is allocated per block in units of 128 B, plus 1 KB the runtime reserves per block (sm_80 on);
- blocks per SM = min(by registers, by shared memory, by warps (max warps / warps per block), max blocks per SM).
Worked example (tested): 128 threads x 160 registers -> 5120 registers per warp, 65536 / 5120 = 12 warps,
12 // 4 warps per block = 3 blocks per SM.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

KB = 1024


@dataclass(frozen=True)
class SmLimits:
    """Per-SM resource limits of one compute capability."""

    arch: str
    regs_per_sm: int = 65536
    reg_alloc_unit: int = 256  # registers, per warp
    max_regs_per_thread: int = 255
    smem_per_sm: int = 228 * KB
    smem_per_block: int = 227 * KB  # the most one block may ask for (opt-in above 48 KB)
    smem_alloc_unit: int = 128
    smem_reserved_per_block: int = 1 * KB  # kept by the CUDA runtime for each resident block
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    warp_size: int = 32


# One entry per compute capability we run on (CUDA C++ Programming Guide, table "Technical Specifications per
# Compute Capability"). sm_90 covers H100 and H200.
LIMITS: dict[int, SmLimits] = {
    80: SmLimits("sm_80", smem_per_sm=164 * KB, smem_per_block=163 * KB),
    90: SmLimits("sm_90"),
    100: SmLimits("sm_100"),
}
GPU_ARCH = {"a100": 80, "h100": 90, "h200": 90, "b200": 100}


def limits_for(arch: int | str | None) -> SmLimits:
    """Limits for a compute capability (90, 'sm_90', '9.0') or gpu key ('h200'); sm_90 when unknown."""
    if isinstance(arch, str):
        if arch in GPU_ARCH:
            arch = GPU_ARCH[arch]
        else:
            digits = re.sub(r"\D", "", arch)
            arch = int(digits) if digits else None
    if isinstance(arch, int) and arch < 20:  # a major version only (9 -> 90)
        arch *= 10
    return LIMITS.get(arch, LIMITS[90])


def _round_up(x: int, unit: int) -> int:
    return int(math.ceil(x / unit) * unit) if unit > 0 else int(x)


def occupancy(threads_per_block: int, regs_per_thread: int, smem_per_block: int = 0,
              limits: SmLimits = LIMITS[90]) -> dict:
    """Theoretical resident blocks and warps per SM, and which resource limits them.

    Returns blocks_per_sm, warps_per_sm, occupancy (warps_per_sm / max warps), the per-resource block limits and
    'occupancy_limiter' (registers, shared_memory, warps or blocks; the first of them in that order on a tie).
    A block that cannot launch at all (too much shared memory or too many registers) gets 0 blocks.
    """
    if threads_per_block <= 0:
        raise ValueError(f"threads_per_block must be positive, got {threads_per_block}")
    warps_per_block = math.ceil(threads_per_block / limits.warp_size)

    if regs_per_thread > limits.max_regs_per_thread:
        by_regs = 0
    elif regs_per_thread <= 0:
        by_regs = limits.max_blocks_per_sm
    else:
        regs_per_warp = _round_up(regs_per_thread * limits.warp_size, limits.reg_alloc_unit)
        by_regs = (limits.regs_per_sm // regs_per_warp) // warps_per_block

    if smem_per_block > limits.smem_per_block:
        by_smem = 0
    else:
        smem = _round_up(smem_per_block, limits.smem_alloc_unit) + limits.smem_reserved_per_block
        by_smem = limits.smem_per_sm // smem

    by_warps = limits.max_warps_per_sm // warps_per_block
    by_blocks = limits.max_blocks_per_sm
    bounds = {"registers": by_regs, "shared_memory": by_smem, "warps": by_warps, "blocks": by_blocks}
    blocks = min(bounds.values())
    limiter = min(bounds, key=bounds.get)
    warps = blocks * warps_per_block
    return {
        "threads_per_block": int(threads_per_block),
        "warps_per_block": int(warps_per_block),
        "blocks_per_sm": int(blocks),
        "warps_per_sm": int(warps),
        "occupancy": warps / limits.max_warps_per_sm,
        "blocks_by_regs": int(by_regs),
        "blocks_by_smem": int(by_smem),
        "blocks_by_warps": int(by_warps),
        "occupancy_limiter": limiter,
    }


# A PTX global access: ld.global / st.global with any qualifiers (.nc, .L1::evict_last, .v4, .b32 ...).
_ACCESS = re.compile(r"\b(ld|st)\.global((?:\.[A-Za-z0-9_:]+)*)")
_BITS = re.compile(r"^[bfsu](\d+)$")


def global_access_widths(ptx: str) -> dict:
    """Count global loads and stores in PTX by vector width, and the widest access in bits.

    ``ld.global.v4.b32`` is one 128-bit load (the widest a thread can issue); a kernel whose loads are all scalar
    ``ld.global.b16`` moves 16 bits per instruction and needs 8x the instructions for the same bytes.
    Returns ld_global_v4 / v2 / scalar, st_global_v4 / v2 / scalar (v8, rare, counts as v4 and is in the bits),
    ld_global_max_bits, st_global_max_bits.
    """
    out = {f"{op}_global_{w}": 0 for op in ("ld", "st") for w in ("v4", "v2", "scalar")}
    out.update(ld_global_max_bits=0, st_global_max_bits=0)
    for op, quals in _ACCESS.findall(ptx or ""):
        parts = [q for q in quals.split(".") if q]
        vec = 1
        elem_bits = 0
        for q in parts:
            if q in ("v2", "v4", "v8"):
                vec = int(q[1:])
            m = _BITS.match(q)
            if m:
                elem_bits = int(m.group(1))
        width = "v4" if vec >= 4 else "v2" if vec == 2 else "scalar"
        out[f"{op}_global_{width}"] += 1
        out[f"{op}_global_max_bits"] = max(out[f"{op}_global_max_bits"], vec * elem_bits)
    return out


# ---- cold start: autotuning of one call, and the compile caches a job starts from ----------------------------------


def autotuners(module) -> list:
    """The triton Autotuner objects among a module's attributes (the matmul's tile search, say)."""
    if module is None:
        return []
    try:
        from triton.runtime.autotuner import Autotuner
    except Exception:  # no triton: nothing autotunes
        return []
    found = {id(v): v for v in vars(module).values() if isinstance(v, Autotuner)}
    return list(found.values())


def autotune_snapshot(tuners) -> list[tuple]:
    """State before a cold call: each tuner with its tuning keys and its bench_time so far."""
    return [(t, set(getattr(t, "cache", {}) or {}), getattr(t, "bench_time", None)) for t in tuners]


def autotune_facts(snapshot) -> dict:
    """What the cold call tuned: autotune_config (str of the chosen triton.Config) and autotune_ms (time spent
    benchmarking configs, Autotuner.bench_time in triton 3.x; NaN when the choice came from Triton's on-disk
    autotune cache or no tuning ran in this call). A single-config 'autotuner' (the CPU interpreter's) reports its
    config with NaN time. Attributes missing in another triton version degrade to ''/NaN, never an error."""
    out = {"autotune_config": "", "autotune_ms": math.nan}
    for tuner, keys_before, bench_before in snapshot:
        cache = getattr(tuner, "cache", {}) or {}
        new = [k for k in cache if k not in keys_before]
        if new:
            out["autotune_config"] = str(cache[new[-1]])
            bench = getattr(tuner, "bench_time", None)
            if isinstance(bench, (int, float)) and bench != bench_before:
                out["autotune_ms"] = float(bench) * 1e3
        elif len(getattr(tuner, "configs", []) or []) == 1 and getattr(tuner, "best_config", None) is not None:
            out["autotune_config"] = str(tuner.best_config)
    return out


def _files_in(path) -> int:
    import os

    n = 0
    for _, _, files in os.walk(path):
        n += len(files)
    return n


def triton_cache_dir(env) -> str:
    """The folder Triton caches its binaries in under the environment ``env`` (TRITON_CACHE_DIR, else its default
    under TRITON_HOME or the home folder)."""
    import os
    from pathlib import Path

    return env.get("TRITON_CACHE_DIR") or os.path.join(env.get("TRITON_HOME") or str(Path.home()), ".triton", "cache")


def compile_caches(environ=None) -> dict:
    """The Triton and Inductor cache folders this process will use, and how many files each held at the start.

    cache_state: 'cold' when both were missing or empty (every kernel compiles from scratch: cold_ms includes
    compilation), 'warm' when both held files (compiled binaries may be reused: cold_ms may be a cache hit), else
    'partial'. Read before any compilation, from the same variables Triton and Inductor read (TRITON_CACHE_DIR,
    TRITON_HOME; TORCHINDUCTOR_CACHE_DIR) with their documented defaults.
    """
    import getpass
    import os
    import tempfile

    env = os.environ if environ is None else environ
    triton_dir = triton_cache_dir(env)
    try:
        user = getpass.getuser()
    except Exception:
        user = "unknown"
    inductor_dir = env.get("TORCHINDUCTOR_CACHE_DIR") or os.path.join(
        tempfile.gettempdir(), "torchinductor_" + re.sub(r"[\\/:*?\"<>|]", "_", user))
    n_triton = _files_in(triton_dir) if os.path.isdir(triton_dir) else 0
    n_inductor = _files_in(inductor_dir) if os.path.isdir(inductor_dir) else 0
    state = "cold" if not (n_triton or n_inductor) else "warm" if (n_triton and n_inductor) else "partial"
    return {
        "triton_cache_dir": str(triton_dir),
        "triton_cache_files": int(n_triton),
        "inductor_cache_dir": str(inductor_dir),
        "inductor_cache_files": int(n_inductor),
        "cache_state": state
    }
