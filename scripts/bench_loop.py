"""The edit-rerun loop, timed (issue 25): the sweep from nothing, then what each kind of edit reruns and how long.

    .venv/bin/python scripts/bench_loop.py             # the working tree, config/cpu.yaml, as its run.sh runs it
    .venv/bin/python scripts/bench_loop.py --rev 66a041a  # a commit (before issue 25: run.sh ran --cores 1)

Everything happens on a scratch copy (the working tree's tracked and untracked, not ignored files, or `git archive`
of --rev), never in this checkout. The sweep runs `snakemake all` there with fresh Triton and Inductor caches (cold);
its results and .snakemake records are then snapshotted, and each scenario starts from that snapshot: one edit, one
timed `snakemake all`, the edited file restored (content and mtime) and the snapshot put back. Scenarios:

    no-op              nothing changed
    kernel edit        kernels/<kernel>/__init__.py gains a function (code: its cells are measured again)
    comment-only edit  kernels/<kernel>/__init__.py gains a comment (no code change: nothing is measured; the paper, which quotes
                       the kernel files, is rebuilt)
    analysis edit      analysis/metrics.py gains a statement (every rate recomputed: all analysis downstream)
    figure edit        figures/<figure>.py gains a statement (that figure redrawn, the paper rebuilt)

For each: the jobs that ran (count, then per rule the wildcards of each job) and the seconds of the snakemake run.
The report (`snakemake --report`, which run.sh writes after a build) is not timed. Not a test: numbers only.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STATE = ("results", ".snakemake", "logs")  # what a run leaves behind: snapshotted after the sweep
JOB = re.compile(r"^(?:local)?rule (\w+):\n((?:    .*\n?)+)", re.M)


def scenarios(kernel: str, figure: str) -> list[tuple[str, str, str]]:
    """(name, file, text appended); an empty file: no edit."""
    return [("no-op", "", ""),
            ("kernel edit", f"kernels/{kernel}/__init__.py", "\n\ndef _bench_loop_edit():\n    return 1\n"),
            ("comment-only edit", f"kernels/{kernel}/__init__.py", "\n# bench_loop: a comment-only edit\n"),
            ("analysis edit", "analysis/metrics.py", "\n_BENCH_LOOP_EDIT = 1\n"),
            ("figure edit", f"figures/{figure}.py", "\n_BENCH_LOOP_EDIT = 1\n"), ]


def copy_tree(dest: Path, rev: str | None) -> str:
    """A scratch copy: `git archive REV`, or the working tree's tracked and untracked (not ignored) files. Returns a
    label for the report."""
    git = ["git", "-C", str(REPO)]
    if rev:
        sha = subprocess.run([*git, "rev-parse", "--short", rev], check=True, capture_output=True, text=True)
        archive = dest.parent / "tree.tar"
        subprocess.run([*git, "archive", "-o", str(archive), rev], check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(dest, filter="data")
        archive.unlink()
        return f"commit {sha.stdout.strip()}"
    if subprocess.run([*git, "rev-parse", "--show-toplevel"], capture_output=True, text=True).stdout.strip() != \
            str(REPO):  # no checkout of its own (a copy of the tree, as the GPU node gets): every file but the state
        shutil.copytree(
            REPO, dest, symlinks=True, dirs_exist_ok=True,
            ignore=shutil.ignore_patterns(*STATE, ".venv", "wheelhouse", "__pycache__", ".bench*", ".clean"))
        return f"copy of {REPO} (no git checkout; commit {os.environ.get('ROOFLAB_GIT_SHA', 'unknown')})"
    listing = subprocess.run([*git, "ls-files", "-z", "--cached", "--others", "--exclude-standard"], check=True,
                             capture_output=True).stdout
    packed = subprocess.run(
        ["tar", "-C", str(REPO), "--null", "--ignore-failed-read", "-T", "-", "-cf", "-"], input=listing, check=True,
        capture_output=True).stdout  # a deleted tracked file: skipped
    subprocess.run(["tar", "-x", "-C", str(dest)], input=packed, check=True)
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.strip()
    return f"working tree at {head}{' (with uncommitted changes)' if dirty else ''}"


def run_snakemake(work: Path, args: list[str], env: dict) -> tuple[float, list[tuple[str, str]], str]:
    """(seconds, [(rule, wildcards)] of the jobs that ran, output); exits on a failed run."""
    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=work, env=env, capture_output=True, text=True)
    secs = time.perf_counter() - start
    out = res.stdout + res.stderr
    if res.returncode:
        sys.exit(f"bench_loop: snakemake {' '.join(args)} failed in {work}:\n{out[-4000:]}")
    jobs = []
    for m in JOB.finditer(out):
        if m.group(1) == "all":
            continue
        fields = dict(re.findall(r"^    (\w+): (.*)$", m.group(2), flags=re.M))
        wildcards = "/".join(v.split("=", 1)[1] for v in fields.get("wildcards", "").split(", ") if "=" in v)
        jobs.append((m.group(1), wildcards))
    return secs, jobs, out


def describe(jobs: list[tuple[str, str]]) -> str:
    """'measure[cpu/gelu] metrics_kernel[cpu/gelu] figure_gpu[cpu, h200] ...': per rule, in order of first run."""
    by_rule: dict[str, list[str]] = {}
    for rule, wc in jobs:
        by_rule.setdefault(rule, []).append(wc)
    parts = []
    for rule, wcs in by_rule.items():
        named = [w for w in wcs if w]
        parts.append(f"{rule}[{', '.join(named)}]" if named else (rule if len(wcs) == 1 else f"{rule} x{len(wcs)}"))
    return " ".join(parts) or "-"


def snapshot(work: Path, store: Path, back: bool = False) -> None:
    """Copy the run's state (results, .snakemake, logs) to `store`, or (back) put it back as it was, mtimes kept."""
    for name in STATE:
        src, dst = (store / name, work / name) if back else (work / name, store / name)
        shutil.rmtree(dst, ignore_errors=True)
        if src.exists():
            shutil.copytree(src, dst, symlinks=True, copy_function=shutil.copy2)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", help="benchmark this commit (git archive) instead of the working tree")
    ap.add_argument("--configfile", default="config/cpu.yaml")
    ap.add_argument(
        "--dag-args", help="snakemake's arguments besides the target and the configfile (default: what "
        "the copy's `./run.sh dag-args` prints, or --cores 1 where it has none: run.sh before issue 25)")
    ap.add_argument("--kernel", default="gelu", help="the kernel the kernel edits touch")
    ap.add_argument("--figure", default="roofline", help="the figure script the figure edit touches")
    ap.add_argument("--warm", action="store_true", help="keep the Triton and Inductor caches of this machine")
    ap.add_argument("--scratch", type=Path, help="work here (kept) instead of a temporary folder (removed)")
    ap.add_argument("--only", nargs="*", help="run only these scenarios (by name)")
    ap.add_argument(
        "--resume", action="store_true", help="with --scratch: keep its results, copy the tree over "
        "them and bring them up to date (untimed) instead of the sweep from nothing")
    a = ap.parse_args(argv)

    tmp = None
    if a.scratch:
        root = a.scratch.resolve()
        if not a.resume:
            shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(root / "state", ignore_errors=True)
        root.mkdir(parents=True, exist_ok=True)
    else:
        root = Path(tmp := tempfile.mkdtemp(prefix="bench_loop-"))
    work = root / "tree"
    work.mkdir(exist_ok=a.resume)
    try:
        label = copy_tree(work, a.rev)
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        env.pop("ROOFLAB_RUN_ID", None)  # each snakemake invocation is a run of its own
        if env.pop("PYTHONDONTWRITEBYTECODE", None):  # as run.sh does (bytecode_cache): .pyc kept, in a cache
            cache = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
            env.setdefault("PYTHONPYCACHEPREFIX", str(cache / "rooflab" / "pycache"))
        if not a.warm:
            env["TRITON_CACHE_DIR"] = str(root / "cache" / "triton")
            env["TORCHINDUCTOR_CACHE_DIR"] = str(root / "cache" / "inductor")
        dag = a.dag_args
        if dag is None:
            res = subprocess.run(["bash", "run.sh", "dag-args"], cwd=work, capture_output=True, text=True)
            dag = res.stdout.strip() if res.returncode == 0 else "--cores 1"
        args = [*dag.split(), "all", "--configfile", a.configfile]
        print(
            f"rooflab loop benchmark: {label}; {a.configfile}; snakemake {' '.join(args)}; "
            f"{os.cpu_count()} cores here; {'warm' if a.warm or a.resume else 'cold'} compile caches; "
            f"TeX {'yes' if shutil.which('latexmk') else 'no'}", flush=True)
        secs, jobs, _ = run_snakemake(work, args, env)
        what = "brought up to date" if a.resume else "sweep (from nothing)"
        print(f"{what:20s} {len(jobs):4d} jobs {secs:7.1f} s", flush=True)
        snapshot(work, root / "state")
        print(f"{'scenario':20s} {'jobs':>9s} {'seconds':>9s}  jobs rerun", flush=True)
        for name, rel, text in scenarios(a.kernel, a.figure):
            if a.only and name not in a.only:
                continue
            path = work / rel if rel else None
            original = path.read_bytes() if path else b""
            stat = path.stat() if path else None
            try:
                if path:
                    path.write_bytes(original + text.encode())
                secs, jobs, _ = run_snakemake(work, args, env)
            finally:
                if path:
                    path.write_bytes(original)
                    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
                snapshot(work, root / "state", back=True)
            print(f"{name:20s} {len(jobs):4d} jobs {secs:7.1f} s  {describe(jobs)}", flush=True)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
