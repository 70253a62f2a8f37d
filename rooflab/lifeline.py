"""A job dies with the snakemake that started it.

``kill -9`` of snakemake leaves its job scripts running (they are children of a shell, not of snakemake itself), so
a measurement would go on timing and writing the cell store with nobody waiting for it, and compete with the next
run for the GPU. ``follow_snakemake`` starts a daemon thread that watches the snakemake ancestors and ends this
process when one of them is gone. Linux only (/proc); elsewhere it does nothing.

``stall_watch`` is the other half: a cell that runs far longer than any cell should (a lock never released, a
compile that never returns) writes every thread's stack into the job's log, so the log of a stuck or killed job says
where it stood; past a second limit it is stopped (StallTimeout), and past a third, when it never came back to Python
to be stopped (a wait on a GPU that never finishes), the process exits with STALL_EXIT after recording the cell as
hung, and the workflow's retry resumes from the cell store without it; the log, with the stacks, is copied to
``<name>.stalled.log`` first.
"""
from __future__ import annotations

import contextlib
import faulthandler
import logging
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

log = logging.getLogger("rooflab.lifeline")


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # the field after the (command), which may hold spaces


def _argv(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def is_snakemake(pid: int) -> bool:
    """A `snakemake ...` or `python -m snakemake ...` process (not one that merely mentions it in a path)."""
    return any(os.path.basename(arg) == "snakemake" for arg in _argv(pid))


def snakemake_ancestors(pid: int | None = None) -> list[int]:
    """The pids of the ancestor processes running snakemake, nearest first (a job may run under a snakemake that
    runs under the one the user started)."""
    found = []
    pid = _parent(pid or os.getpid())
    while pid and pid > 1:
        if is_snakemake(pid):
            found.append(pid)
        pid = _parent(pid)
    return found


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, killed but not yet reaped, counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def follow(pids: list[int], interval_s: float = 1.0, on_gone=None) -> threading.Thread:
    """Watch ``pids``; when any is gone, call ``on_gone(pid)`` (default: log and end this process at once)."""

    def gone(pid: int) -> None:
        log.error("snakemake (pid %d) is gone: stopping this job so that it does not measure or write unattended", pid)
        os._exit(3)

    def watch() -> None:
        stop = threading.Event()
        while True:
            dead = [pid for pid in pids if not alive(pid)]
            if dead:
                return (on_gone or gone)(dead[0])
            stop.wait(interval_s)

    thread = threading.Thread(target=watch, name="follow-snakemake", daemon=True)
    thread.start()
    return thread


def follow_snakemake(interval_s: float = 1.0) -> list[int]:
    """Follow the snakemake processes this job runs under, if any; returns their pids."""
    pids = snakemake_ancestors()
    if pids:
        follow(pids, interval_s)
    return pids


def _stall_s(default: float = 240.0) -> float:
    """ROOFLAB_STALL_S where it is a positive number of seconds, else the default (a bad value is named)."""
    text = os.environ.get("ROOFLAB_STALL_S", "")
    try:
        value = float(text) if text else default
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        log.warning("ROOFLAB_STALL_S=%r is no positive number of seconds: %.0f s instead", text, default)
        return default
    return value


# the H200 reference's longest cell took 48 s, compile included (cell_s in data/reference/h200): five times that stalls
STALL_S = _stall_s()


def stalled_log_path(path) -> Path:
    """Where the log of a process stall_watch stopped is copied as it exits: ``<name>.stalled.log`` beside it, a file
    the workflow does not own (Snakemake deletes a failed job's log before its retry)."""
    path = Path(path)
    return path.with_name(path.stem + ".stalled.log")


def _log_handler() -> logging.FileHandler | None:
    """The root logger's last file handler with a stream (the job's log; not one writing to os.devnull), if any."""
    for handler in reversed(logging.getLogger().handlers):
        if (isinstance(handler, logging.FileHandler) and getattr(handler, "stream", None) is not None
                and handler.baseFilename != os.devnull):
            return handler
    return None


def _log_stream():
    """The job's log stream (_log_handler), else stderr (a CPU worker's fd 2 is the job's log)."""
    handler = _log_handler()
    return handler.stream if handler else sys.stderr


STALL_EXIT = 75  # EX_TEMPFAIL: the exit status of a process stopped by stall_watch's exit_s


class StallTimeout(Exception):  # not TimeoutError: an OSError, which file-handling code may swallow
    """A cell or a paired session stopped by ``stall_watch`` after ``abort_s``: recorded as its failure."""


@contextlib.contextmanager
def stall_watch(what: str, after_s: float = STALL_S, abort_s: float | None = None, exit_s: float | None = None,
                on_exit=None):
    """Within the block, each time it has run another ``after_s``, log that ``what`` still runs and write every
    thread's stack to the job's log; nothing is written if it finishes in time. A timer thread does it (a wait on a
    lock, a subprocess or a file releases the interpreter to it); faulthandler's own watchdog writes the stacks too,
    5 s later, in case a C call holds the interpreter and the timer thread cannot run. ``abort_s`` (main thread
    only): past it, StallTimeout is raised in the block (at its next Python instruction), so the caller records a
    failure and the sweep goes on instead of hanging; the cell store lets a rerun try it again. ``exit_s``: past it
    the block never came back to Python to be stopped (a C call waiting on a GPU kernel that does not end releases
    the interpreter to the watch but never returns): the stacks are written, ``on_exit()`` records the block as hung
    (the cell store, so that the retry does not run it again) and the process exits with STALL_EXIT, which frees the
    GPU context no thread of it could."""
    done = threading.Event()
    t0 = time.monotonic()
    stream = _log_stream()

    def stacks() -> None:
        try:
            faulthandler.dump_traceback(file=stream, all_threads=True)
            stream.flush()
        except (AttributeError, OSError, ValueError):  # a stream without a file descriptor: the warning only
            pass

    def hard_stop(elapsed: float) -> None:
        if done.is_set():  # the block ended as the limit passed: nothing to stop
            return
        try:
            stop_process(elapsed)
        finally:
            os._exit(STALL_EXIT)  # whatever the record or the log did: the exit is what frees the GPU

    def stop_process(elapsed: float) -> None:
        log.error(
            "%s is still running after %.0f s, past its stop: it never came back to Python (a wait on the GPU that "
            "does not end?), so this process exits with status %d and a rerun resumes from the cell store without "
            "it; every thread's stack follows", what, elapsed, STALL_EXIT)
        stacks()
        if on_exit is not None:
            try:
                on_exit()
            except Exception:  # the exit matters more than the record
                log.exception("recording %s as hung failed", what)
        for handler in logging.getLogger().handlers:
            handler.flush()
        handler = _log_handler()
        if handler:
            try:
                shutil.copyfile(handler.baseFilename, stalled_log_path(handler.baseFilename))
            except OSError:
                pass

    def watch() -> None:
        dumps = 1
        while True:
            due = after_s * dumps if exit_s is None else min(after_s * dumps, exit_s)
            if done.wait(max(0.0, t0 + due - time.monotonic())):
                return
            elapsed = time.monotonic() - t0
            if exit_s is not None and elapsed >= exit_s:
                return hard_stop(elapsed)
            log.warning("%s has run %.1f s; every thread's stack follows", what, elapsed)
            stacks()
            dumps += 1

    def stop(signum, frame):
        raise StallTimeout(f"{what} ran past {abort_s:.0f} s (twice its watch period): stopped, so the sweep goes on; "
                           f"the job's log holds its stacks")

    thread = threading.Thread(target=watch, name="stall-watch", daemon=True)
    thread.start()
    try:
        stream.fileno()
        faulthandler.dump_traceback_later(after_s + 5, repeat=True, file=stream)
        armed = True
    except (AttributeError, OSError, ValueError):
        armed = False
    alarm = bool(abort_s) and threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    if alarm:
        previous = signal.signal(signal.SIGALRM, stop)
        signal.setitimer(signal.ITIMER_REAL, abort_s)
    try:
        yield
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        done.set()
        if armed:
            faulthandler.cancel_dump_traceback_later()
