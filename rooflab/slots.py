"""One GPU a measurement job: the slot allocator of a node with several GPUs.

run.sh gives snakemake one measure_slot per GPU (``python -m rooflab.slots count``), so up to that many timing jobs
run at once; each takes one device here, before torch initialises CUDA: an exclusive lock (fcntl.flock) on
``<slot dir>/gpu<i>.lock``, then CUDA_VISIBLE_DEVICES set to that device alone. The lock is held until the process
exits, however it exits (the kernel drops a dead process's flock), so no two timed jobs are ever on one GPU and a
crashed job leaves nothing to clean up.

With one GPU or none nothing is locked or set: the single-GPU and CPU paths are as they were before slots (the H200
reference was measured so). ROOFLAB_SIMULATE_GPUS=N makes the allocator and the DAG's resources behave as on an
N-GPU node without NVML or CUDA: slots are taken and CUDA_VISIBLE_DEVICES set, but no device is asked about (the
tests run several processes against it; see tests/test_slots.py).
"""
from __future__ import annotations

import fcntl
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SIMULATE = "ROOFLAB_SIMULATE_GPUS"
SLOT_DIR = "ROOFLAB_SLOT_DIR"  # default .snakemake/rooflab-slots, in the directory the DAG runs in
INDEX = "ROOFLAB_DEVICE_INDEX"  # the device index a job was given, for its rows (rooflab/provenance.py)


def visible_devices() -> list[str]:
    """The devices this node offers the run, as CUDA_VISIBLE_DEVICES names them: the simulated ones, those a
    scheduler already narrowed CUDA_VISIBLE_DEVICES to, else every GPU NVML (or nvidia-smi) lists."""
    if os.environ.get(SIMULATE):
        return [str(i) for i in range(int(os.environ[SIMULATE]))]
    if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
        return [d.strip() for d in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]
    from rooflab.gpus import gpu_names

    return [str(i) for i in range(len(gpu_names()))]


def slot_count() -> int:
    """measure_slots for the DAG (run.sh): one per GPU, and one on a machine without any (timing there runs alone)."""
    return max(1, len(visible_devices()))


@dataclass
class Slot:
    index: int  # the slot: 0 .. number of devices - 1
    device: str  # what CUDA_VISIBLE_DEVICES is set to
    fd: int  # the open lock file; closing it (or exiting) frees the slot

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def slot_dir() -> Path:
    return Path(os.environ.get(SLOT_DIR) or ".snakemake/rooflab-slots")


def try_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())  # who holds it, for a person looking; the lock is the flock
    return fd


def acquire(gpu: str, poll_s: float = 0.05) -> Slot | None:
    """Take a free device for a job measuring ``gpu`` and make it the only one this process sees; None (nothing
    done) on the CPU or where the node has one GPU or none. Waits while every device is taken: under snakemake's
    measure_slot count that lasts only until a job ending at the same moment exits; a job started by hand beside a
    run waits for a device to come free."""
    if gpu == "cpu":
        return None
    devices = visible_devices()
    if len(devices) <= 1:
        return None
    folder = slot_dir()
    folder.mkdir(parents=True, exist_ok=True)
    while True:
        for i, device in enumerate(devices):
            fd = try_lock(folder / f"gpu{device}.lock")
            if fd is not None:
                # PCI order: the index is the one nvidia-smi and NVML show (CUDA's own order is fastest first)
                os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
                os.environ["CUDA_VISIBLE_DEVICES"] = device
                os.environ[INDEX] = device
                return Slot(i, device, fd)
        time.sleep(poll_s)


def device_index() -> int | None:
    """The index of the device this job measures (nvidia-smi's): the slot's, else the one CUDA_VISIBLE_DEVICES
    names, else 0; None where it names a UUID or several."""
    name = os.environ.get(INDEX) or os.environ.get("CUDA_VISIBLE_DEVICES") or "0"
    return int(name) if name.isdigit() else None


if __name__ == "__main__":
    if sys.argv[1:] == ["count"]:
        print(slot_count())
    else:
        sys.exit("usage: python -m rooflab.slots count")
