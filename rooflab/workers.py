"""Run a module's main(argv) in a warm worker process: the metrics, figure and paper-input jobs (rules/analysis.smk,
rules/figures.smk, rules/paper.smk, their run: directives), so that pandas, pyarrow and matplotlib are imported
once per worker instead of once per job (about 1.5-2.5 s each; issue 25), and two figures draw at once on two
cores. Each job still is a job of its own (its inputs, outputs and log), so an edit reruns what it changed only.

Snakemake runs run: jobs in threads of its own process (profiles/default: force-use-threads). A job takes an idle
worker (``python -m rooflab.workers``, started when no idle one is left, so there are as many as jobs ever ran at
once), hands it the call and waits; the worker runs it with its file descriptors 1 and 2 on the job's log, so
the log holds what ``python -m <module> ARGS... > log 2>&1`` would print, C libraries' output included. An exception
(or argparse's exit) fails the job, the traceback in its log. Between jobs, what one sets is undone: every pyplot
figure is closed, the figures' read cache emptied (each figure sets its own rcParams: figures/_common.setup),
torch.compile's frames reset and Inductor's and dynamo's settings restored; what stays warm is imports and caches
(Inductor's compiled graphs, so on the CPU a kernel's first compile no longer pays the process's own start). A
worker that dies fails its job (the exit status in the error) and is not reused, nor is an idle one found dead.
Workers read their jobs from a pipe and stop when it closes, at snakemake's exit; they leave Ctrl-C to snakemake
(but for an interruptible pool's job in flight, which it ends), and stop at once, mid-job too, if snakemake is killed
outright. A job's change of folder is undone after it.
"""
from __future__ import annotations

import atexit
import importlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings

# Pools of workers, each its environment and what its workers import once when they start, before their first job
# (a job's module still imports whatever else it needs, once per worker). "analysis": the metrics, figure and paper
# jobs. "host": the CPU's measurement jobs (rules/measure.smk measure_host), one at a time; triton there is the
# interpreter (set before it is imported), Inductor compiles in the worker itself, and torch, triton and Inductor's
# first compile (about 5 s a process on 2 cores, even from a warm cache) are paid once a run, not once a kernel.
# A pool's settings: env (set), env_default (set where the caller's environment has none), preload, and interruptible
# (Ctrl-C stops a job, its cell store keeping every finished cell, where the analysis pool's jobs run on to their end).
POOLS = {
    "analysis":
    dict(env={}, env_default={}, interruptible=False,
         preload=("pandas", "pyarrow.parquet", "matplotlib", "figures._common", "analysis.metrics")),
    "host":
    dict(env={"TRITON_INTERPRET": "1"}, env_default={"TORCHINDUCTOR_COMPILE_THREADS": "1"}, interruptible=True,
         preload=("pandas", "torch", "triton", "torch._inductor.compile_fx", "rooflab.cell", "experiments.measure")),
}
CONFIGS = ("torch._inductor.config", "torch._dynamo.config")  # restored after each job to their state before it

_IDLE: dict[str, list["_Worker"]] = {name: [] for name in POOLS}
_ALL: list["_Worker"] = []
_POOL_LOCK = threading.Lock()


def flat(*parts) -> list[str]:
    """The words of a command line from strings and (nested) lists of them: snakemake's input and output lists."""
    words: list[str] = []
    for p in parts:
        if isinstance(p, (list, tuple)):
            words += flat(*p)
        else:
            words.append(str(p))
    return words


class _Worker:

    def __init__(self, pool: str) -> None:
        self.pool = pool
        # the import path snakemake's process has beyond this interpreter's own (the workflow's folder: figures/,
        # analysis/), so that a job starting another Python does not hand it this one's standard library
        own = tuple(p for p in {sys.prefix, sys.base_prefix, sys.exec_prefix} if p)
        project = [p for p in sys.path if p and not p.startswith(own)]
        env = {
            **POOLS[pool]["env_default"],
            **os.environ,
            **POOLS[pool]["env"], "MPLBACKEND": "Agg",
            "PYTHONPATH": os.pathsep.join(project + [os.getcwd()])
        }
        self.proc = subprocess.Popen([sys.executable, "-m", "rooflab.workers", pool], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1, env=env)

    def call(self, module: str, argv: list[str], log: str) -> dict:
        try:
            self.proc.stdin.write(json.dumps({"module": module, "argv": argv, "log": log}) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            return {"ok": False, "dead": True, "error": f"its worker process died (exit status {self.proc.wait()})"}
        try:
            return json.loads(line)
        except ValueError:  # not a reply: the worker is not to be trusted with another job
            self.proc.kill()
            return {"ok": False, "dead": True, "error": f"its worker answered {line[:200]!r}"}

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass


def _take(pool: str) -> _Worker:
    with _POOL_LOCK:
        while _IDLE[pool]:  # an idle worker may have died since (killed, out of memory): dropped, not handed a job
            w = _IDLE[pool].pop()
            if w.proc.poll() is None:
                return w
            _ALL.remove(w)
        w = _Worker(pool)
        _ALL.append(w)
        return w


@atexit.register
def _close_all() -> None:
    for w in _ALL:
        w.close()
    for w in _ALL:
        try:
            w.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            w.proc.kill()


def run_main(module: str, argv, log, pool: str = "analysis") -> None:
    """importlib.import_module(module).main(argv) in a worker of ``pool`` (POOLS), its output in `log` (a path, or
    snakemake's log list: its first file); raises RuntimeError, the traceback written to the log, where it fails."""
    path = log if isinstance(log, str) else str(log[0])
    worker = _take(pool)
    reply = worker.call(module, flat(argv), os.path.abspath(path))
    if reply.get("dead"):
        with _POOL_LOCK:
            _ALL.remove(worker)
    else:
        with _POOL_LOCK:
            _IDLE[pool].append(worker)
    if not reply["ok"]:
        raise RuntimeError(f"python -m {module} failed ({reply['error']}); see {path}")


# ---- the worker's side -------------------------------------------------------------------------------------------


def _reset() -> None:
    """What one job could leave behind for the next: open pyplot figures, the figures' metrics read cache,
    torch.compile's traced frames (the compiled graphs stay in Inductor's caches), logging's handlers."""
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
    common = sys.modules.get("figures._common")
    if common is not None:
        common._READ.clear()
    if "torch._dynamo" in sys.modules:
        sys.modules["torch._dynamo"].reset()
    with warnings.catch_warnings():  # loading a saved config sets its deprecated keys too
        warnings.simplefilter("ignore")
        for name, saved in _SAVED.items():
            sys.modules[name].load_config(saved)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format=LOG_FORMAT, force=True)


_SAVED: dict[str, bytes] = {}  # CONFIGS as they were before the first job that found them imported


def _save_configs() -> None:
    for name in CONFIGS:
        if name not in _SAVED and hasattr(sys.modules.get(name), "save_config"):
            _SAVED[name] = sys.modules[name].save_config()


def _run_job(module: str, argv: list[str], log: str) -> dict:
    """One job with fds 1 and 2 on its log; the reply for the pool."""
    _save_configs()
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    error = None
    cwd = os.getcwd()  # a job that changes folder does not move the next one
    with open(log, "w") as out:
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        try:
            with warnings.catch_warnings():
                try:
                    importlib.import_module(module).main(argv)
                except SystemExit as e:  # argparse's error, or a sys.exit in the main
                    if e.code not in (None, 0):
                        traceback.print_exc()
                        error = f"exited with {e.code}"
                except BaseException as e:  # noqa: BLE001 -- every failure goes to the log and fails the job
                    traceback.print_exc()
                    error = f"{type(e).__name__}: {e}"
                finally:
                    _reset()
                    os.chdir(cwd)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
    return {"ok": error is None, "error": error}


LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"
_CONSOLE = None  # in a worker: the stderr it started with (snakemake's), while fd 2 is a job's log


def console():
    """Where a job's progress bar goes: snakemake's stderr, in a worker too (its own fd 2 is then the job's log)."""
    return _CONSOLE or sys.__stderr__


def serve(pool: str) -> None:
    """The worker: jobs as JSON lines on stdin, one reply line each on the stdout it started with (fd 1 is the
    job's log while a job runs, /dev/null between jobs)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is snakemake's to handle; its exit closes our stdin
    parent = os.getppid()

    def orphaned() -> None:  # snakemake killed outright: stop, mid-job too, rather than write its outputs unseen
        while True:
            time.sleep(1)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=orphaned, daemon=True).start()
    global _CONSOLE
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    _CONSOLE = os.fdopen(os.dup(2), "w", buffering=1)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format=LOG_FORMAT)
    for name in POOLS[pool]["preload"]:
        try:
            importlib.import_module(name)
        except ImportError:  # a job that needs it fails with the traceback in its own log, not the worker
            pass
    for line in sys.stdin:
        job = json.loads(line)
        if POOLS[pool]["interruptible"]:  # Ctrl-C (the terminal's, to the whole process group) ends this job
            signal.signal(signal.SIGINT, signal.default_int_handler)
        reply = _run_job(job["module"], job["argv"], job["log"])
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        replies.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    from rooflab import workers  # serve from the module jobs import (console()), not from this __main__ copy

    workers.serve(sys.argv[1] if len(sys.argv) > 1 else "analysis")
