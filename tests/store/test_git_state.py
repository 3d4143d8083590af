"""A record says whether the code that produced it was committed: ``git_dirty`` (and, when dirty, a
``git_diff_sha256`` of the uncommitted changes), so a study can tell a commit from a working tree.

Before: records stored ``git_sha`` (HEAD) alone, so a run from a tree with uncommitted edits to a plugin
was indistinguishable from a run of that commit."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from benchbench.store import records
from benchbench.store.records import new_record
from benchbench.store.results import ResultStore, code_version, git_state, read_record

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env={**os.environ, **env})
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture
def repo(tmp_path) -> Path:
    """A checkout like benchbench's: code under benchbench/ and plugins/, docs beside it, one commit."""
    r = tmp_path / "repo"
    for rel, text in {"benchbench/a.py": "A = 1\n", "plugins/p.py": "P = 1\n", "docs/d.md": "doc\n"}.items():
        (r / rel).parent.mkdir(parents=True, exist_ok=True)
        (r / rel).write_text(text)
    (r / ".gitignore").write_text("results/\n")
    _git(r, "init", "-q")
    _git(r, "add", ".")
    _git(r, "commit", "-q", "-m", "one")
    return r


def _tree(repo: Path) -> str:
    import hashlib

    listing = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "HEAD", "--", "benchbench", "plugins", "tasks", "pyproject.toml"],
        capture_output=True,
        check=True,
    ).stdout
    return hashlib.sha256(listing).hexdigest()


def test_a_clean_checkout_is_not_dirty_and_names_its_commit(repo):
    state = git_state(repo)
    assert state == {"git_sha": _git(repo, "rev-parse", "HEAD"), "git_dirty": False, "git_code_tree": _tree(repo)}
    (repo / "docs/d.md").write_text("edited\n")  # docs do not change a score
    (repo / "results").mkdir()
    (repo / "results/r.json").write_text("{}")  # ignored output
    assert git_state(repo)["git_dirty"] is False


def test_uncommitted_code_is_dirty_and_each_edit_has_its_own_diff_hash(repo):
    sha = _git(repo, "rev-parse", "HEAD")
    (repo / "benchbench/a.py").write_text("A = 2\n")
    one = git_state(repo)
    assert one["git_sha"] == sha and one["git_dirty"] is True and len(one["git_diff_sha256"]) == 64
    assert git_state(repo) == one  # the same tree, the same hash
    (repo / "benchbench/a.py").write_text("A = 3\n")
    two = git_state(repo)
    assert two["git_dirty"] is True and two["git_diff_sha256"] != one["git_diff_sha256"]
    # a new, untracked plugin file is code too; its bytes enter the hash
    (repo / "benchbench/a.py").write_text("A = 1\n")
    assert git_state(repo)["git_dirty"] is False
    (repo / "plugins/new.py").write_text("N = 1\n")
    three = git_state(repo)
    assert three["git_dirty"] is True
    (repo / "plugins/new.py").write_text("N = 2\n")
    assert git_state(repo)["git_diff_sha256"] != three["git_diff_sha256"]
    # committed: clean again, at the new commit
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "two")
    assert git_state(repo) == {
        "git_sha": _git(repo, "rev-parse", "HEAD"),
        "git_dirty": False,
        "git_code_tree": _tree(repo),
    }


def test_a_results_only_commit_keeps_the_code_version_and_a_code_commit_changes_it(repo):
    """The code version is the committed code paths' tree, not the commit: a study resumed after a commit
    of results or docs is one version (before: two, and every resumed row read as mixing code)."""
    one = git_state(repo)
    (repo / "docs/d.md").write_text("new results described\n")
    (repo / "leaderboards").mkdir()
    (repo / "leaderboards/r.json").write_text("{}")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "results")
    two = git_state(repo)
    assert two["git_sha"] != one["git_sha"] and two["git_code_tree"] == one["git_code_tree"]
    assert code_version(two) == code_version(one) == f"code.{one['git_code_tree'][:12]}"
    for rel in ("plugins/p.py", "tasks/t.toml", "pyproject.toml", "benchbench/a.py"):  # each code path counts
        (repo / rel).parent.mkdir(exist_ok=True)
        (repo / rel).write_text(f"# {rel} edited\n")
        _git(repo, "add", ".")
        _git(repo, "commit", "-q", "-m", rel)
        three = git_state(repo)
        assert three["git_code_tree"] != two["git_code_tree"], rel
        assert code_version(three) != code_version(two)
        two = three


def test_not_a_checkout_says_unknown(tmp_path):
    assert git_state(tmp_path) == {"git_sha": None, "git_dirty": None}


def test_a_dirty_run_is_stored_checksummed_and_labelled(tmp_path, monkeypatch, repo):
    """Through the path a run takes: ``new_record`` asks git (once a process; the boundary, pointed at a
    dirty checkout here), the store checksums the new fields, a read gives them back, and ``code_version``
    tells the dirty run apart from a run of its commit."""
    (repo / "benchbench/a.py").write_text("A = 2\n")
    monkeypatch.setattr(records, "loaded_code", lambda: git_state(repo))
    fields = {"method": "m", "config": {}, "config_hash": "h", "model": "x", "setup": "unsupervised", "seed": 1}
    rec = new_record(
        {**fields, "task": "t", "task_version": 1}, {"test": {"main_score": 50.0}}, time.perf_counter(), "cpu"
    )
    assert rec["git_dirty"] is True and rec["evaluated"]["test"]["git_dirty"] is True
    path = ResultStore(tmp_path / "results").write(rec)
    back = read_record(path)
    assert back["git_dirty"] is True and back["git_diff_sha256"] == rec["git_diff_sha256"]
    sha, tree = _git(repo, "rev-parse", "HEAD"), _tree(repo)
    assert back["git_code_tree"] == tree
    assert code_version(back) == f"code.{tree[:12]}+dirty.{rec['git_diff_sha256'][:8]}"
    clean = {k: v for k, v in back.items() if k not in ("git_dirty", "git_diff_sha256")}
    assert code_version(clean) == f"code.{tree[:12]}" != code_version(back)
    older = {k: v for k, v in clean.items() if k != "git_code_tree"}  # a record from before the tree: its sha
    assert code_version(older) == sha[:12]
    assert code_version({}) == "unknown"
    # an edit of the flag after writing is damage: the checksum covers it
    text = path.read_text().replace('"git_dirty": true', '"git_dirty": false')
    path.write_text(text)
    from benchbench.store.results import DamagedRecord

    with pytest.raises(DamagedRecord, match="checksum"):
        read_record(path)
