"""Run a module's main(argv) inside the snakemake process: the metrics and figure jobs (rules/analysis.smk,
rules/figures.smk, their run: directives), so that pandas, pyarrow and matplotlib are imported once per DAG run
instead of once per job (about 1.5-2.5 s each; issue 25). Each job still is a job of its own (its inputs, outputs
and log), so an edit reruns what it changed only.

The job is the same call its command line makes (python -m <module> ARGS... > log 2>&1): its stdout, stderr,
warnings and logging records go to its log file, and an exception (or argparse's exit) fails the job, the log
kept with the traceback. Snakemake runs run: jobs in threads of its own process (profiles/default:
force-use-threads; without it each would be a snakemake subprocess, slower than python -m), and pyplot,
sys.stdout and the figures' shared state are process-wide: one lock lets one job run at a time (the GIL would
serialise them anyway); shell jobs still run beside it. Between jobs nothing is carried over: the figures' read
cache is emptied and every pyplot figure closed (each figure sets its own rcParams: figures/_common.setup).
"""
from __future__ import annotations

import contextlib
import importlib
import logging
import sys
import threading
import traceback
import warnings

_LOCK = threading.Lock()


def flat(*parts) -> list[str]:
    """The words of a command line from strings and (nested) lists of them: snakemake's input and output lists."""
    words: list[str] = []
    for p in parts:
        if isinstance(p, (list, tuple)):
            words += flat(*p)
        else:
            words.append(str(p))
    return words


def _reset() -> None:
    """What one job could leave behind for the next: open pyplot figures, the figures' metrics read cache."""
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
    common = sys.modules.get("figures._common")
    if common is not None:
        common._READ.clear()


def run_main(module: str, argv, log) -> None:
    """importlib.import_module(module).main(argv) with its output in `log` (a path, or snakemake's log list: its
    first file); raises RuntimeError, the traceback written to the log, where it fails."""
    path = log if isinstance(log, str) else str(log[0])
    argv = flat(argv)
    with _LOCK, open(path, "w") as out:
        handler = logging.StreamHandler(out)
        job = threading.get_ident()
        handler.addFilter(lambda record: record.thread == job)  # this job's records, not snakemake's own
        root = logging.getLogger()
        root.addHandler(handler)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), warnings.catch_warnings():
                try:
                    importlib.import_module(module).main(argv)
                except SystemExit as e:  # argparse's error, or a sys.exit in the main
                    if e.code not in (None, 0):
                        traceback.print_exc()
                        raise RuntimeError(f"python -m {module} exited with {e.code}; see {path}") from None
                except Exception as e:
                    traceback.print_exc()
                    raise RuntimeError(f"python -m {module} failed ({type(e).__name__}: {e}); see {path}") from e
                finally:
                    _reset()
                    out.flush()
        finally:
            root.removeHandler(handler)
