"""The device a measurement job runs on: the environment to set before torch and triton load, and the check that the
device present is the one asked for (every measuring job in experiments/ uses both)."""
from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger("rooflab.device")


class DeviceMismatch(RuntimeError):
    """Asked to measure one GPU on a machine that has another, or none: nothing is written."""


def prepare_environment(gpu: str, params: dict) -> None:
    """Environment that must be set before triton/torch are imported: on a node with several GPUs, the one this job
    takes (rooflab/slots.py; held until the process exits)."""
    from rooflab.slots import acquire

    acquire(gpu)
    if gpu == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    if os.environ.get("ROOFLAB_COMPILE_LANES"):
        # Lanes compile this run's torch.compile cells ahead (experiments/warm.py): this process loads their graphs
        # from the cache and needs no pool of compile workers (with one, each job's first torch.compile cell spent
        # 9-13 s before its call on the H200, the pool's start the suspect); a cell the lanes have not reached compiles here serially.
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    set_cache_dirs(params.get("cache_dirs") or {})


def set_cache_dirs(caches: dict) -> None:
    """Triton's and Inductor's cache folders: config cache_dirs where set. Triton's is always set, to its default
    if nothing else: Inductor points an unset TRITON_CACHE_DIR at a folder of its own when it loads a compiled graph,
    so a process whose graphs it compiled and one whose graphs it loaded from the cache looked for our Triton
    kernels in different places (the matmul job recompiled ~50 kernels the compile lanes had built, 31 s)."""
    from rooflab.kernel_facts import triton_cache_dir

    if caches.get("triton"):
        os.environ["TRITON_CACHE_DIR"] = str(Path(caches["triton"]).resolve())
    os.environ["TRITON_CACHE_DIR"] = triton_cache_dir(os.environ)
    if caches.get("inductor"):
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(caches["inductor"]).resolve())


def check_device(gpu: str) -> tuple[str, float]:
    """Return (torch device, L2 bytes) for the gpu asked for, or raise if it is not the device present."""
    import torch

    from rooflab.gpus import SPECS, key_for_name, unknown_gpu_message

    if gpu == "cpu":
        return "cpu", 0.0
    if not torch.cuda.is_available():
        raise DeviceMismatch(f"asked to measure gpu '{gpu}', but this machine has no CUDA device. Run this job on a "
                             f"node with that GPU (profiles/slurm maps gpus to partitions), or use gpus: [cpu].")
    name = torch.cuda.get_device_name()
    present = key_for_name(name)
    if present != gpu:
        raise DeviceMismatch(f"asked to measure gpu '{gpu}', but the device present is '{name}' (key '{present}'). "
                             f"Refusing to write {gpu} data measured on another device.")
    if present not in SPECS:
        log.warning(unknown_gpu_message(present, name))
    return "cuda", float(torch.cuda.get_device_properties(0).L2_cache_size)
