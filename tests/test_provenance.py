"""rooflab/provenance.py: which commit a row is stamped with."""
import subprocess

from rooflab import provenance


def test_this_checkout_reports_its_own_head(monkeypatch):
    monkeypatch.delenv("ROOFLAB_GIT_SHA", raising=False)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=provenance.REPO, capture_output=True, text=True)
    sha, _ = provenance.git_state()
    assert sha == (head.stdout.strip() if head.returncode == 0 else "unknown")


def test_a_snapshot_inside_another_checkout_does_not_borrow_its_head(monkeypatch, tmp_path):
    monkeypatch.delenv("ROOFLAB_GIT_SHA", raising=False)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    snapshot = tmp_path / ".gpu"
    snapshot.mkdir()
    monkeypatch.setattr(provenance, "REPO", snapshot.resolve())
    assert provenance.git_state() == ("unknown", False)


def test_the_senders_word_wins(monkeypatch):
    monkeypatch.setenv("ROOFLAB_GIT_SHA", "0123abc")
    monkeypatch.setenv("ROOFLAB_GIT_DIRTY", "1")
    assert provenance.git_state() == ("0123abc", True)
