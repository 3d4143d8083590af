"""The studies' re-run is pinned to one commit across lent GPU sessions (bench/device_studies_pack.py --at,
bench/studies_at) while this checkout's code moves on. What a lent machine gets: a blob-less clone of the pinned
commit and its code paths, restored over whatever tree the call carried (bench/device_studies.sh); the records
it writes must then name the pinned commit, clean, and its code tree. Back here, --unpack keeps that version's
records and sets the rest aside."""

from __future__ import annotations

import importlib.util
import io
import shutil
import subprocess
import sys
import tarfile
import time

import pytest
from conftest import REPO

from benchbench.core.errors import UnsafePathError
from benchbench.run.study import load_study
from benchbench.store import records
from benchbench.store.records import new_record
from benchbench.store.results import CODE_PATHS, SUPERSEDED, ResultStore, code_tree, code_version, git_state

spec = importlib.util.spec_from_file_location("bb_device_pack", REPO / "bench" / "device_studies_pack.py")
pack = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pack)

if subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
    pytest.skip("not a git checkout", allow_module_level=True)
HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def test_the_pin_file_names_a_commit_of_this_repository():
    shallow = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--is-shallow-repository"], capture_output=True, text=True
    )
    if shallow.stdout.strip() == "true":
        pytest.skip("a shallow clone may not hold the pinned commit")
    assert len(pack.pinned(None)) == 40  # bench/studies_at: what the next lent session runs
    with pytest.raises(SystemExit, match="--at: 'no-such-rev' is not a commit"):
        pack.pinned("no-such-rev")


def test_a_carried_tree_with_other_code_runs_as_the_pinned_commit(tmp_path):
    dev1 = tmp_path / ".dev1"
    dev1.mkdir()
    pack.git_clone(dev1, HEAD)
    tree = tmp_path / "tree"  # the checkout a later call carries: its code has moved on
    for p in CODE_PATHS:
        src = REPO / p
        (shutil.copytree(src, tree / p, ignore=shutil.ignore_patterns("__pycache__")) if src.is_dir() else None)
    shutil.copy(REPO / "pyproject.toml", tree / "pyproject.toml")
    (tree / "benchbench" / "__init__.py").write_text("# newer code\n")
    (tree / "plugins" / "a_new_method.py").write_text("# not in the pinned commit\n")
    # what bench/device_studies.sh does on every call
    for p in CODE_PATHS:
        shutil.rmtree(tree / p) if (tree / p).is_dir() else (tree / p).unlink()
    for t in ("code.tar", "git.tar"):
        with tarfile.open(dev1 / t) as tar:
            tar.extractall(tree, filter="data")
    subprocess.run(["git", "-C", str(tree), "read-tree", "HEAD"], check=True)
    state = git_state(tree)
    assert state["git_sha"] == HEAD and state["git_dirty"] is False
    assert state["git_code_tree"] == code_tree(REPO, HEAD)["git_code_tree"]
    assert code_version(state) == pack.version_of(HEAD)
    assert not (tree / "plugins" / "a_new_method.py").exists()
    (tree / "tasks" / "sts.toml").write_text("edited there\n")  # a change on the machine is still seen
    assert git_state(tree)["git_dirty"] is True


def _record(store: ResultStore, monkeypatch, seed: int, code: dict) -> None:
    monkeypatch.setattr(records, "loaded_code", lambda: code)
    fields = {"method": "simcse", "config": {}, "config_hash": "h" * 12, "model": "m", "setup": "unsupervised"}
    rec = new_record(
        {**fields, "seed": seed, "task": "stsb", "task_version": 1, "train": {}},
        {"test": {"main_score": 50.0, "main_metric": "spearman", "scores": {"spearman": 50.0}}},
        time.perf_counter(),
        "cpu",
    )
    store.write(rec, items={"test": {"pred": [0.1, 0.2], "gold": [1.0, 2.0], "metric": "spearman"}})


def _returned(folder, src, extra: dict[str, bytes] | None = None) -> None:
    """What a `device_studies.sh run` call returns: the stores tarred from their parent, split in parts."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(src / "post-training-minilm", arcname="./post-training-minilm")
        for name, data in (extra or {}).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    data = buf.getvalue()
    folder.mkdir()
    (folder / "results.tar.gz.part0").write_bytes(data[:100])
    (folder / "results.tar.gz.part1").write_bytes(data[100:])
    (folder / "jobs.tsv").write_text("# wall 500s\n")


def test_unpack_keeps_the_pinned_version_and_sets_the_rest_aside(tmp_path, monkeypatch):
    assert "simcse" in load_study("post-training-minilm").methods
    pinned = {"git_sha": HEAD, "git_dirty": False, **code_tree(REPO, HEAD)}
    other = {"git_sha": "b" * 40, "git_dirty": False, "git_code_tree": "2" * 64}
    dest = tmp_path / "leaderboards"
    here = ResultStore(dest / "studies" / "post-training-minilm")
    _record(here, monkeypatch, 1, other)  # an earlier code version's cell, committed here
    _record(here, monkeypatch, 2, pinned)  # the pinned version's, from an earlier lent session
    _record(here, monkeypatch, 4, other)  # another of that earlier version, not run again yet
    src = tmp_path / "src"
    _record(ResultStore(src / "post-training-minilm"), monkeypatch, 1, pinned)
    _record(ResultStore(src / "post-training-minilm"), monkeypatch, 3, pinned)
    _returned(tmp_path / "back", src)
    pack.unpack(tmp_path / "back", HEAD, dest)
    got = {r["seed"]: code_version(r) for r in here.records()}
    assert got == {1: pack.version_of(HEAD), 2: pack.version_of(HEAD), 3: pack.version_of(HEAD)}
    assert len(list((here.root / SUPERSEDED).rglob("*.why"))) == 2  # the other version's: set aside, not deleted
    assert list((dest / "study_rerun").glob("jobs-*.tsv"))


def test_unpack_refuses_an_archive_with_files_outside_the_studies(tmp_path, monkeypatch):
    src = tmp_path / "src"
    _record(ResultStore(src / "post-training-minilm"), monkeypatch, 1, {"git_sha": HEAD, "git_dirty": False})
    _returned(tmp_path / "back", src, {"../../bench/evil.py": b"import os"})
    with pytest.raises(SystemExit, match="outside the studies' folders.*nothing set aside or unpacked"):
        pack.unpack(tmp_path / "back", HEAD, tmp_path / "leaderboards")
    assert not (tmp_path / "leaderboards").exists()


@pytest.mark.skipif(sys.platform != "linux", reason="the device script is bash on Linux")
def test_the_device_script_restores_the_pinned_code_on_every_call():
    sh = (REPO / "bench" / "device_studies.sh").read_text()
    restore = sh.index("tar -xf /tmp/models/code.tar")
    assert restore < sh.index("bb-env-done")  # before the first call's `pip install -e .`, outside its once-only block
    assert "rm -rf benchbench plugins tasks pyproject.toml" in sh[:restore]
    assert " ".join(CODE_PATHS) == "benchbench plugins tasks pyproject.toml"


def test_the_records_to_resume_are_the_pinned_versions_split_one_part_a_call(tmp_path, monkeypatch):
    pinned = {"git_sha": HEAD, "git_dirty": False, **code_tree(REPO, HEAD)}
    other = {"git_sha": "b" * 40, "git_dirty": False, "git_code_tree": "2" * 64}
    store = ResultStore(tmp_path / "leaderboards" / "studies" / "post-training-minilm")
    for seed in (1, 2, 3):
        _record(store, monkeypatch, seed, pinned)
    _record(store, monkeypatch, 4, other)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".dev7").mkdir()  # a stale folder of an earlier pack: gone
    monkeypatch.setattr(pack, "CALL_BYTES", 400)
    folders = pack.study_records(pack.version_of(HEAD))
    assert [f.name for f in folders] == [f".dev{4 + i}" for i in range(len(folders))] and len(folders) >= 2
    assert not (tmp_path / ".dev7").exists() or ".dev7" in [f.name for f in folders]
    assert all((f / f"studies.part{i}").stat().st_size <= 400 for i, f in enumerate(folders))
    data = b"".join((f / f"studies.part{i}").read_bytes() for i, f in enumerate(folders))
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        names = tar.getnames()
    assert sum(n.endswith(".json") and ".items." not in n for n in names) == 3  # seed 4 is another version
    assert sum(".items." in n for n in names) == 3 and all(n.startswith("post-training-minilm/") for n in names)
    for f in folders:
        shutil.rmtree(f)
    assert pack.study_records("code.000000000000") == []  # nothing of that version: no folder to carry


# ---- --unpack drills (issue 50): every member checked, path, type and size, before anything moves ---------
def _returned_members(folder, src, extra: list[tuple[tarfile.TarInfo, object]]) -> None:
    """``_returned`` with hand-made members (``extra``: (header, a file object or None)) after the real ones."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        tar.add(src / "post-training-minilm", arcname="./post-training-minilm")
        for info, data in extra:
            tar.addfile(info, data)
    folder.mkdir()
    (folder / "results.tar.gz.part0").write_bytes(buf.getvalue())


def _study_here(tmp_path, monkeypatch):
    """A destination holding one record of another code version (what --unpack would set aside) and a source
    store with one record of the pinned version; returns (dest, that record's store, src)."""
    other = {"git_sha": "b" * 40, "git_dirty": False, "git_code_tree": "2" * 64}
    dest = tmp_path / "leaderboards"
    here = ResultStore(dest / "studies" / "post-training-minilm")
    _record(here, monkeypatch, 1, other)
    src = tmp_path / "src"
    _record(ResultStore(src / "post-training-minilm"), monkeypatch, 3, {"git_sha": HEAD, "git_dirty": False})
    return dest, here, src


def _untouched(dest, here) -> None:
    """Nothing set aside, nothing unpacked: the one stored record is where it was, alone."""
    assert [r["seed"] for r in here.records()] == [1]
    assert not (here.root / SUPERSEDED).exists()
    assert sorted(p.name for p in (dest / "studies").iterdir()) == ["post-training-minilm"]  # no temp left
    assert not list((dest / "studies").rglob("*forged*")) and not list((dest / "studies").rglob("*big*"))


def _file(name: str, size: int, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.type = size, kind
    return info


def test_unpack_refuses_a_member_that_climbs_into_the_other_study(tmp_path, monkeypatch):
    """The bug: ``post-training-minilm/../plain-start/forged.json`` passed the folder check (its first
    part is a study) and landed in the other study, after the set-aside had run."""
    dest, here, src = _study_here(tmp_path, monkeypatch)
    forged = b'{"forged": true}'
    _returned_members(
        tmp_path / "back",
        src,
        [(_file("post-training-minilm/../plain-start/forged.json", len(forged)), io.BytesIO(forged))],
    )
    with pytest.raises(SystemExit, match=r"post-training-minilm/\.\./plain-start/forged\.json.*nothing set aside"):
        pack.unpack(tmp_path / "back", HEAD, dest)
    _untouched(dest, here)
    assert not (dest / "studies" / "plain-start").exists()


def test_unpack_refuses_a_climbing_member_after_good_ones_before_setting_anything_aside(tmp_path, monkeypatch):
    """The bug: a ``..`` member after the good ones gave a raw traceback only after ``supersede`` had set
    records aside and the earlier members were extracted."""
    dest, here, src = _study_here(tmp_path, monkeypatch)
    _returned_members(
        tmp_path / "back", src, [(_file("post-training-minilm/../../../forged.json", 2), io.BytesIO(b"{}"))]
    )
    with pytest.raises(SystemExit, match="outside the studies' folders.*nothing set aside or unpacked"):
        pack.unpack(tmp_path / "back", HEAD, dest)
    _untouched(dest, here)
    assert not list(tmp_path.rglob("forged.json"))


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.FIFOTYPE])
def test_unpack_refuses_a_link_or_device_member(tmp_path, monkeypatch, kind):
    """Only regular files and folders: a link, hard link, device or fifo is refused by name (it was
    dropped without a word, and the rest unpacked)."""
    dest, here, src = _study_here(tmp_path, monkeypatch)
    info = _file("post-training-minilm/forged.json", 0, kind)
    info.linkname = "/etc/passwd"
    _returned_members(tmp_path / "back", src, [(info, None)])
    with pytest.raises(SystemExit, match=r"forged\.json' is not a regular file.*nothing set aside"):
        pack.unpack(tmp_path / "back", HEAD, dest)
    _untouched(dest, here)


def test_unpack_refuses_a_small_archive_that_inflates_to_a_huge_record(tmp_path, monkeypatch):
    """The bug: a ~300 KB archive wrote a 300 MB "record". Here 64 MiB of zeros (~65 KB packed): refused
    from its header, before a byte is written."""

    class Zeros(io.RawIOBase):
        def __init__(self, n):
            self.left = n

        def readinto(self, b):
            k = min(len(b), self.left)
            b[:k] = bytes(k)
            self.left -= k
            return k

        def readable(self):
            return True

    dest, here, src = _study_here(tmp_path, monkeypatch)
    size = 64 << 20
    _returned_members(
        tmp_path / "back", src, [(_file("post-training-minilm/big.json", size), io.BufferedReader(Zeros(size)))]
    )
    assert (tmp_path / "back" / "results.tar.gz.part0").stat().st_size < 1 << 20
    with pytest.raises(SystemExit, match=rf"big\.json' holds {size:,} bytes, over the .* a record or per-item file"):
        pack.unpack(tmp_path / "back", HEAD, dest)
    _untouched(dest, here)
    assert size > pack.MEMBER_BYTES


def test_unpack_moves_files_into_place_never_through_a_linked_folder(tmp_path, monkeypatch):
    """A study's record folder that is a link (to anywhere) is refused by name; nothing lands there."""
    dest, here, src = _study_here(tmp_path, monkeypatch)
    _returned(tmp_path / "back", src)
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(here.root / "simcse", elsewhere)  # the other version's record, reached through the link
    before = sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*"))
    shutil.rmtree(here.root / "simcse")
    (here.root / "simcse").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UnsafePathError, match=r"post-training-minilm/simcse .*symbolic link"):
        pack.unpack(tmp_path / "back", HEAD, dest)
    assert sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*")) == before  # nothing added or set aside
    assert not (here.root / SUPERSEDED).exists()
