"""GPU datasheet table and detection of the device present.

One source of truth for every hardware number the analysis uses. Figures are *dense* (sparse figures are 2x) and
come from the vendor datasheets named in ``source``; see shared/reference/gpu_specs.md for the pitfalls (A100 PCIe
vs SXM bandwidth, H100 PCIe vs SXM). Measured ceilings (experiments/ceilings.py) are kept beside these, never
instead of them.

Detection deliberately avoids importing torch so the Snakefile can call it cheaply: it asks NVML (nvidia-ml-py),
and nvidia-smi where NVML cannot be loaded. Whether torch can use the GPU is asked once per run, in a subprocess
(``torch_cuda``).
"""
from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

TB = 1e12
MB = 1e6


@dataclass(frozen=True)
class GpuSpec:
    key: str  # config key: a100, h100, h200, b200
    name: str
    sms: int
    l2_bytes: float
    memory_bytes: float
    mem_bandwidth: float  # bytes/s
    fp32_flops: float  # non-tensor FP32, FLOP/s
    tf32_flops: float  # dense tensor-core
    bf16_flops: float
    fp16_flops: float
    source: str
    match: tuple[str, ...]  # substrings of the device name (lower case) that map to this entry

    def peak_flops(self, unit: str) -> float:
        """Peak FLOP/s of a compute unit: 'fp32' (CUDA cores), 'tf32', 'bf16', 'fp16' (tensor cores)."""
        return {
            "fp32": self.fp32_flops,
            "tf32": self.tf32_flops,
            "bf16": self.bf16_flops,
            "fp16": self.fp16_flops
        }[unit]

    @property
    def ridge_point(self) -> float:
        """FLOP/byte at which a bf16 tensor-core kernel turns compute-bound."""
        return self.bf16_flops / self.mem_bandwidth


SPECS: dict[str, GpuSpec] = {
    s.key: s
    for s in [
        GpuSpec("a100", "NVIDIA A100 SXM 80GB", 108, 40 * MB, 80e9, 2.039 * TB, 19.5 * TB, 156 * TB, 312 * TB, 312 *
                TB, "NVIDIA A100 datasheet, SXM 80GB column (1.935 TB/s is the PCIe part)", ("a100", )),
        GpuSpec("h100", "NVIDIA H100 SXM", 132, 50 * MB, 80e9, 3.35 * TB, 67 * TB, 494.5 * TB, 989.5 * TB, 989.5 *
                TB, "NVIDIA H100 datasheet, SXM column (2.0 TB/s is the PCIe part)", ("h100", )),
        GpuSpec("h200", "NVIDIA H200 SXM", 132, 50 * MB, 141e9, 4.8 * TB, 67 * TB, 494.5 * TB, 989.5 * TB, 989.5 *
                TB, "NVIDIA H200 datasheet, SXM column (PyTorch reports 60 MiB L2 on the card we measure)", ("h200", )),
        GpuSpec("b200", "NVIDIA B200 (HGX)", 148, 126 * MB, 192e9, 8.0 * TB, 80 * TB, 1100 * TB, 2250 * TB, 2250 *
                TB, "NVIDIA DGX/HGX B200 datasheet; Blackwell tuning guide for L2", ("b200", )),
    ]
}

CPU_KEY = "cpu"


def key_for_name(device_name: str) -> str:
    """Map a device name ('NVIDIA H200', 'NVIDIA A100-SXM4-80GB') to its config key.

    Unknown devices get a slug of their name so they are still measured (against measured ceilings only).
    """
    low = device_name.lower()
    for spec in SPECS.values():
        if any(m in low for m in spec.match):
            return spec.key
    return re.sub(r"[^a-z0-9]+", "-", low).strip("-") or "unknown-gpu"


def spec_for(key: str) -> GpuSpec | None:
    return SPECS.get(key)


def nvml_names() -> list[str] | None:
    """Names of the NVIDIA GPUs NVML reports; None where NVML cannot be used (no driver library, driver broken)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        names = [
            pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(pynvml.nvmlDeviceGetCount())
        ]
        return [n.decode() if isinstance(n, bytes) else n for n in names]  # bytes from older nvidia-ml-py
    except Exception:
        return None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def nvidia_smi_names() -> list[str]:
    """Names of the NVIDIA GPUs present, from nvidia-smi; [] where there is none."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run([exe, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def detect_gpus() -> tuple[str, list[str]]:
    """(what found them, names of the NVIDIA GPUs present): NVML, else nvidia-smi; names [] where there is none."""
    names = nvml_names()
    if names is not None:
        return "NVML", names
    return "nvidia-smi", nvidia_smi_names()


def gpu_names() -> list[str]:
    return detect_gpus()[1]


def detect_key() -> str:
    """Config key of the device this process would measure on: the first GPU, else 'cpu'."""
    names = gpu_names()
    return key_for_name(names[0]) if names else CPU_KEY


TORCH_PROBE = """
import json, warnings
import torch
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ok = torch.cuda.is_available()
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,
                  "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if ok else [],
                  "why": " ".join(str(w.message).strip() for w in caught)}))
"""


def torch_cuda(python: str = sys.executable) -> dict:
    """What torch sees: {'torch': version or None, 'cuda': its CUDA build or None, 'devices': names, 'why': torch's
    warning or the import error}. In a subprocess, so the caller's process never imports torch."""
    failed = {"torch": None, "cuda": None, "devices": []}
    try:
        res = subprocess.run([python, "-c", TORCH_PROBE], capture_output=True, text=True, timeout=300)
        return json.loads(res.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, OSError) as e:
        return {**failed, "why": str(e)}
    except (ValueError, IndexError):
        return {**failed, "why": (res.stderr.strip().splitlines() or [f"exit status {res.returncode}"])[-1]}


def unusable_gpus_message(keys) -> str | None:
    """Why the GPUs `keys` (config keys; 'cpu' is ignored) cannot be measured here, in one message; None when torch
    sees each of them."""
    keys = [k for k in dict.fromkeys(keys) if k != CPU_KEY]
    if not keys:
        return None
    seen = torch_cuda()
    present = [key_for_name(n) for n in seen["devices"]]
    if all(k in present for k in keys):
        return None
    asked = f"config gpus asks for {', '.join(keys)}"
    cpu = "run the CPU default with --configfile config/cpu.yaml"
    elsewhere = f"run where that GPU is (profiles/slurm maps gpus to partitions), or {cpu}"
    if seen["torch"] is None:
        return f"{asked}, but torch does not import here ({seen['why']})"
    if seen["devices"]:
        return f"{asked}, but torch {seen['torch']} sees only {', '.join(seen['devices'])}: {elsewhere}"
    source, names = detect_gpus()
    if not names:
        return f"{asked}, but this machine has no NVIDIA GPU (NVML and nvidia-smi find none): {elsewhere}"
    listed = f"{source} lists " + ", ".join(f'"{n}"' for n in names)
    if not seen["cuda"]:
        return f"{listed} but torch {seen['torch']} has no CUDA: install a CUDA build of torch, or {cpu}"
    why = f" ({seen['why']})" if seen["why"] else ""
    return (f"{listed} but torch {seen['torch']} (CUDA {seen['cuda']}) cannot use it{why}: check the driver "
            f"(nvidia-smi; torch's CUDA against the driver's), or {cpu}")


def unknown_gpu_message(key: str, name: str) -> str:
    return (f"GPU '{name}' (key '{key}') is not in the datasheet table ({', '.join(SPECS)}): it is measured, and "
            f"its roofline uses the measured ceilings only. Add it to rooflab/gpus.py with its datasheet source.")
