"""No history in the product: no session, round or call codes ("S22-D4", "nineteenth session", "round 24", "(S12,
S13)", "G2") in the code, comments, docs and reference datasets' READMEs a user runs and reads. A comment states a
conclusion and points to its evidence file; the history of decisions is docs/decisions.md and docs/archive/, the
lab's own record data/tuning/. Each reference dataset's README carries a provenance table generated from its rows."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ROOTS = ("kernels/", "rooflab/", "experiments/", "analysis/", "figures/", "rules/", "config/", "notebooks/", "report/",
         "envs/", "profiles/", "docs/")
TOP = ("Snakefile", "run.sh", "README.md", "pyproject.toml", "requirements.txt", "requirements-dev.txt")
HISTORY = ("docs/decisions.md", "docs/archive/")
SUFFIXES = (".py", ".smk", ".md", ".yaml", ".yml", ".sh", ".rst", ".toml", ".txt", ".ipynb", ".cu")

_ORDINAL = (r"(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|\w+teenth|\w+tieth"
            r"|(?:twenty|thirty|forty)-\w+)")
CODES = re.compile(rf"\bS\d{{1,2}}(?:-D\d+)?\b|\b[DG]\d{{1,2}}\b|\b{_ORDINAL} (?:session|round)\b|\bround \d+\b")


def product_files() -> list[str]:
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO, check=True,
                           capture_output=True, text=True).stdout.split()
    out = []
    for f in files:
        readme = f.startswith("data/reference/") and f.endswith("README.md")
        if not (readme or f in TOP or f.startswith(ROOTS) and f.endswith(SUFFIXES)) or f.startswith(HISTORY):
            continue
        if (REPO / f).is_file():
            out.append(f)
    return sorted(out)


def history_codes(text: str) -> list[str]:
    return [m.group(0) for m in CODES.finditer(text)]


@pytest.mark.parametrize("text, codes",
                         [("measured in S22-D4 on the H200", ["S22-D4"]),
                          ("kept because the reference (S12, S13) ran with it", ["S12", "S13"]),
                          ("the nineteenth session found", ["nineteenth session"]),
                          ("docs/decisions.md, round 24", ["round 24"]), ("G2 took a minute; see D3", ["G2", "D3"]),
                          ("twenty-fifth session", ["twenty-fifth session"]),
                          # not codes: evidence file names, Triton's num_stages, a first call, paired sessions, 2D
                          ("longfwd_s21.csv, aligned_s25_d1.csv", []),
                          ("128x128 w8 s3", []), ("a key's first call", []), ("the paired session of a cell", []),
                          ("a 2D grid, BLOCK_D", []), ])
def test_the_pattern(text, codes):
    assert history_codes(text) == codes


def test_no_session_round_or_call_codes_in_the_product():
    found = []
    for f in product_files():
        for n, line in enumerate((REPO / f).read_text(errors="replace").splitlines(), 1):
            found += [f"{f}:{n}: {code}" for code in history_codes(line)]
    assert not found, "history in the product (state the conclusion, point to its evidence file):\n" + "\n".join(found)


@pytest.mark.parametrize("folder", sorted(p.parent for p in (REPO / "data/reference").glob("*/README.md")),
                         ids=lambda p: p.name)
def test_a_reference_readme_carries_its_generated_provenance(folder):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import reference_provenance as rp
    finally:
        sys.path.pop(0)
    readme = (folder / "README.md").read_text()
    assert rp.with_table(readme, rp.table(folder)) == readme, \
        f"stale: python scripts/reference_provenance.py {folder.relative_to(REPO)} --write"
    assert "./run.sh" in readme  # the command that made it
