"""The slot allocator of a node with several GPUs (rooflab/slots.py), on simulated devices: jobs started at once
spread over every slot, never two on one, a killed job's slot comes free, and one GPU or the CPU is left as it was."""
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rooflab import slots

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A simulated 4-GPU node with its own slot folder; CUDA_VISIBLE_DEVICES as on a node nobody narrowed."""
    monkeypatch.setenv(slots.SIMULATE, "4")
    monkeypatch.setenv(slots.SLOT_DIR, str(tmp_path / "slots"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv(slots.INDEX, raising=False)
    return tmp_path


def job(barrier, queue, hold_s):
    """A measurement job's start: take a slot, hold it while 'timing', exit (which frees it)."""
    slot = slots.acquire("h200")
    start = time.monotonic()
    barrier.wait(timeout=60)  # four jobs hold slots at once: every slot is taken
    time.sleep(hold_s)
    queue.put((slot.index, os.environ["CUDA_VISIBLE_DEVICES"], start, time.monotonic()))


def test_jobs_spread_over_every_slot_and_never_share_one(node):
    ctx = mp.get_context("spawn")  # a fresh process each, as snakemake starts its jobs
    barrier, queue = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=job, args=(barrier, queue, 0.3)) for _ in range(8)]
    for p in procs:
        p.start()
    intervals = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sorted({i for i, *_ in intervals}) == [0, 1, 2, 3]
    assert all(device == str(i) for i, device, *_ in intervals)
    for index in range(4):
        held = sorted((start, end) for i, _, start, end in intervals if i == index)
        assert all(end <= next_start for (_, end), (next_start, _) in zip(held, held[1:])), (index, held)


def test_a_killed_jobs_slot_comes_free(node):
    code = "from rooflab import slots; import os, signal; s = slots.acquire('h200'); print(s.index, flush=True); " \
           "os.kill(os.getpid(), signal.SIGKILL)"
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert res.returncode == -signal.SIGKILL and res.stdout.strip() == "0", res
    taken = [slots.acquire("h200") for _ in range(4)]  # this process: all four free, slot 0 too
    assert [s.index for s in taken] == [0, 1, 2, 3]
    for s in taken:
        s.release()


def test_one_gpu_or_the_cpu_is_left_as_it_was(node, monkeypatch):
    assert slots.acquire("cpu") is None and "CUDA_VISIBLE_DEVICES" not in os.environ
    monkeypatch.setenv(slots.SIMULATE, "1")
    assert slots.acquire("h200") is None and "CUDA_VISIBLE_DEVICES" not in os.environ
    assert not (node / "slots").exists()
    assert slots.slot_count() == 1
    monkeypatch.setenv(slots.SIMULATE, "0")
    assert slots.slot_count() == 1  # no GPU: one slot, timing on the host one job at a time


def test_a_scheduler_narrowed_set_is_what_is_shared(node, monkeypatch):
    """A scheduler that gave the job GPUs 2 and 5: the slots are those two, and the rows name their indices."""
    monkeypatch.delenv(slots.SIMULATE)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    assert slots.slot_count() == 2
    first, second = slots.acquire("h200"), None
    assert (first.index, os.environ["CUDA_VISIBLE_DEVICES"], slots.device_index()) == (0, "2", 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")  # as the next job sees the node
    second = slots.acquire("h200")
    assert (second.index, slots.device_index()) == (1, 5)
    first.release()
    second.release()


def test_run_sh_gives_one_measure_slot_per_gpu(node):
    out = subprocess.run(["bash", "run.sh", "dag-args"], cwd=REPO, capture_output=True, text=True, timeout=60, env={
        **os.environ, "PYTHON": sys.executable
    }).stdout
    assert out.startswith("--resources measure_slot=4 host="), out
