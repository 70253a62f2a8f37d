"""rooflab/provenance.py: which commit a row is stamped with."""
import subprocess

from rooflab import provenance


def test_this_checkout_reports_its_own_head(monkeypatch):
    monkeypatch.delenv("ROOFLAB_GIT_SHA", raising=False)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=provenance.REPO, capture_output=True, text=True)
    sha, _ = provenance.git_state()
    assert sha == (head.stdout.strip() if head.returncode == 0 else "unknown")


def test_a_checkout_with_an_edit_is_dirty(monkeypatch, tmp_path):
    monkeypatch.delenv("ROOFLAB_GIT_SHA", raising=False)

    def git(*args):
        return subprocess.run(
            ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
            capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "kernel.py").write_text("a")
    git("add", "kernel.py")
    git("commit", "-qm", "one")
    monkeypatch.setattr(provenance, "REPO", tmp_path.resolve())
    head = git("rev-parse", "HEAD")
    assert provenance.git_state() == (head, False)
    (tmp_path / "kernel.py").write_text("b")  # a tracked file edited: the rows say so
    assert provenance.git_state() == (head, True)


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
