"""rooflab/workers.py: the analysis jobs' warm worker processes. A job's output (Python's and a C library's, through
file descriptor 1) lands in its log; a failing job raises with its traceback in the log; a worker that dies fails its
job and the next job gets a fresh one; nothing a job sets is seen by the next."""
import os
import textwrap
import threading

import pytest

from rooflab import workers

JOB = textwrap.dedent('''
    import os
    import sys

    STATE = []

    def main(argv):
        what = argv[0]
        if what == "print":
            print("from print")
            os.write(1, b"from fd 1\\n")
            print("to stderr", file=sys.stderr)
            STATE.append(1)
            print(f"state {len(STATE)}")
        elif what == "raise":
            raise ValueError("a bad cell")
        elif what == "exit":
            sys.exit(3)
        elif what == "die":
            os._exit(7)
        elif what == "pid":
            print(os.getpid())
        elif what == "cd":
            os.chdir("/")
        elif what == "cwd":
            print(os.getcwd())
        elif what == "set-config":
            import torch._inductor.config as c
            print(c.cpp.enable_kernel_profile)
            c.cpp.enable_kernel_profile = True
        elif what == "get-config":
            import torch._inductor.config as c
            print(c.cpp.enable_kernel_profile)
        elif what == "wait":
            open(argv[1], "w").close()
            import time
            time.sleep(60)
        elif what == "env":
            print(os.environ.get("TORCHINDUCTOR_COMPILE_THREADS"), os.environ.get("TRITON_INTERPRET"))
''')


@pytest.fixture
def job_module(tmp_path, monkeypatch):
    (tmp_path / "rooflab_test_job.py").write_text(JOB)
    monkeypatch.syspath_prepend(str(tmp_path))  # the workers take snakemake's import path (sys.path) with them
    yield "rooflab_test_job"
    workers._close_all()
    for idle in workers._IDLE.values():
        idle.clear()
    workers._ALL.clear()


def test_a_jobs_output_goes_to_its_log_and_nothing_carries_over(job_module, tmp_path):
    log = tmp_path / "job.log"
    workers.run_main(job_module, ["print"], str(log))
    text = log.read_text()
    assert "from print" in text and "from fd 1" in text and "to stderr" in text
    workers.run_main(job_module, ["print"], [str(log)])  # snakemake's log list: its first file
    assert log.read_text().count("from print") == 1  # rewritten, not appended
    assert "state 2" in log.read_text()  # the same warm worker: imported once (a module's state is its own)


@pytest.mark.parametrize("what, said", [("raise", "ValueError: a bad cell"), ("exit", "exited with 3")])
def test_a_failing_job_raises_and_keeps_its_traceback(job_module, tmp_path, what, said):
    log = tmp_path / "job.log"
    with pytest.raises(RuntimeError, match=said):
        workers.run_main(job_module, [what], str(log))
    assert "Traceback" in log.read_text()
    workers.run_main(job_module, ["print"], str(log))  # the worker serves the next job
    assert "from print" in log.read_text()


def test_a_dead_worker_fails_its_job_and_is_replaced(job_module, tmp_path):
    log = tmp_path / "job.log"
    workers.run_main(job_module, ["pid"], str(log))
    first = log.read_text().split()[-1]
    with pytest.raises(RuntimeError, match="died"):
        workers.run_main(job_module, ["die"], str(log))
    workers.run_main(job_module, ["pid"], str(log))
    assert log.read_text().split()[-1] != first and len(workers._ALL) == 1


def test_jobs_at_once_run_in_workers_of_their_own(job_module, tmp_path):
    logs = [tmp_path / f"job{i}.log" for i in range(3)]
    threads = [threading.Thread(target=workers.run_main, args=(job_module, ["pid"], str(p))) for p in logs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    pids = {p.read_text().split()[-1] for p in logs}
    assert str(os.getpid()) not in pids and 1 <= len(pids) <= 3 and len(workers._ALL) == len(pids)


def test_an_idle_worker_found_dead_is_replaced_and_a_jobs_folder_change_undone(job_module, tmp_path):
    import signal

    log = tmp_path / "job.log"
    workers.run_main(job_module, ["cwd"], str(log))
    here = log.read_text().split()[-1]
    workers.run_main(job_module, ["cd"], str(log))
    workers.run_main(job_module, ["cwd"], str(log))
    assert log.read_text().split()[-1] == here
    (idle, ) = workers._IDLE["analysis"]
    idle.proc.send_signal(signal.SIGKILL)
    idle.proc.wait()
    workers.run_main(job_module, ["pid"], str(log))  # not failed by the dead one: a fresh worker ran it
    assert log.read_text().split()[-1] != str(idle.proc.pid) and idle not in workers._ALL


def test_pools_keep_their_own_workers_and_environment(job_module, tmp_path, monkeypatch):
    # the host pool (the CPU's measurement jobs) sets TRITON_INTERPRET before anything imports triton, and compiles
    # in the worker; its workers never serve the analysis pool's jobs, nor the other way round
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    log = tmp_path / "job.log"
    workers.run_main(job_module, ["env"], str(log), pool="host")
    assert log.read_text().split()[-2:] == ["1", "1"]
    workers.run_main(job_module, ["env"], str(log))
    assert log.read_text().split()[-2] == "None"
    workers.run_main(job_module, ["pid"], str(log), pool="host")
    host = log.read_text().split()[-1]
    workers.run_main(job_module, ["pid"], str(log))
    assert log.read_text().split()[-1] != host and len(workers._ALL) == 2
    assert [w.pool for w in workers._IDLE["host"]] == ["host"] and [w.pool
                                                                    for w in workers._IDLE["analysis"]] == ["analysis"]


def test_a_jobs_inductor_settings_are_undone_and_a_host_job_stops_at_ctrl_c(job_module, tmp_path):
    # the CPU's square measure job turns Inductor's kernel profiling on (experiments/profiles.py): the next job in
    # that worker must not compile with it. Ctrl-C (SIGINT to the process group) ends a host job, not its worker
    import signal
    import time

    log = tmp_path / "job.log"
    workers.run_main(job_module, ["set-config"], str(log), pool="host")
    assert log.read_text().split()[-1] == "False"
    workers.run_main(job_module, ["get-config"], str(log), pool="host")
    assert log.read_text().split()[-1] == "False"
    started = tmp_path / "started"
    (worker, ) = workers._IDLE["host"]
    threading.Timer(0, lambda: (_wait_for(started), worker.proc.send_signal(signal.SIGINT))).start()
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="KeyboardInterrupt"):
        workers.run_main(job_module, ["wait", str(started)], str(log), pool="host")
    assert time.monotonic() - t0 < 30
    workers.run_main(job_module, ["pid"], str(log), pool="host")
    assert log.read_text().split()[-1] == str(worker.proc.pid)  # the same worker serves on


def _wait_for(path, timeout=60.0):
    import time

    end = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < end:
        time.sleep(0.05)
