"""The file primitives (``benchbench.store.files``): one sha256, one atomic write that never follows a
symlink or leaves its root, one ``.complete`` marker, one bounded slug that keeps the store's names."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

import pytest
from conftest import REPO

from benchbench.core.errors import BenchbenchError, UnsafePathError
from benchbench.store import files
from benchbench.store.files import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    atomic_writer,
    check_inside,
    is_complete,
    mark_complete,
    sha256_file,
    slug,
)
from benchbench.store.results import ResultStore, key_of


# ---- sha256 ---------------------------------------------------------------------------------------------
def test_sha256_file_equals_hashlib_on_a_file_of_many_chunks(tmp_path: Path) -> None:
    # 3 MiB + 7 bytes: several read chunks and a short last one; a digest of the first chunk only, or
    # one that drops the tail, differs
    data = os.urandom(3 * (1 << 20) + 7)
    p = tmp_path / "big.bin"
    p.write_bytes(data)
    assert sha256_file(p) == hashlib.sha256(data).hexdigest()
    assert sha256_file(str(p)) == sha256_file(p)
    p.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # the last byte alone changes it
    assert sha256_file(p) != hashlib.sha256(data).hexdigest()


# ---- atomic writes --------------------------------------------------------------------------------------
def test_atomic_write_replaces_whole_and_leaves_no_temp(tmp_path: Path) -> None:
    p = tmp_path / "a.json"
    atomic_write_json(p, {"x": 1}, sort_keys=True)
    atomic_write_json(p, {"x": 2, "y": [1]}, indent=1)
    assert json.loads(p.read_text()) == {"x": 2, "y": [1]} and p.read_text().startswith("{\n")
    atomic_write_text(p, "ünï\n")
    assert p.read_bytes() == "ünï\n".encode()
    atomic_write_bytes(p, b"\x00\x01")
    assert p.read_bytes() == b"\x00\x01"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a.json"]
    umask = os.umask(0o022)
    os.umask(umask)
    assert p.stat().st_mode & 0o777 == 0o666 & ~umask  # as readable as any file the user writes


def test_a_crash_before_the_rename_keeps_the_old_content(tmp_path: Path, monkeypatch) -> None:
    p = tmp_path / "a.txt"
    p.write_text("old")

    def crash(src, dst, **kw):  # the write renames relative to its folder descriptor (src_dir_fd=)
        raise OSError(28, "No space left on device (simulated)")

    monkeypatch.setattr(files.os, "replace", crash)
    with pytest.raises(OSError, match="simulated"):
        atomic_write_text(p, "new")
    with pytest.raises(RuntimeError), atomic_writer(p, "w") as f:  # an exception in the writer's block
        f.write("half")
        raise RuntimeError("killed")
    assert p.read_text() == "old"
    assert [x.name for x in tmp_path.iterdir()] == ["a.txt"]  # both temp files removed


def test_a_record_write_that_crashes_keeps_the_stored_record(tmp_path: Path, monkeypatch) -> None:
    """Through ``ResultStore.write``: the stored record stays whole and readable."""
    store = ResultStore(tmp_path / "results")
    rec = _record(50.0)
    path = store.write(dict(rec))
    before = path.read_bytes()

    def crash(src, dst, **kw):  # the write renames relative to its folder descriptor (src_dir_fd=)
        raise OSError(5, "Input/output error (simulated)")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated"):
        store.write(_record(99.0))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert store.load(key_of(rec))["splits"]["test"]["main_score"] == 50.0
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_write_through_a_symlink_is_refused_and_the_target_untouched(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("SECRET")
    (tmp_path / "out").mkdir()
    link = tmp_path / "out" / "a.json"
    link.symlink_to(outside)
    for write in (
        lambda: atomic_write_text(link, "x"),
        lambda: atomic_write_json(link, {}),
        lambda: atomic_write_bytes(link, b"x"),
    ):
        with pytest.raises(UnsafePathError, match=str(link)) as e:
            write()
        assert isinstance(e.value, BenchbenchError) and "symbolic link" in str(e.value)
    assert outside.read_text() == "SECRET" and link.is_symlink()
    assert sorted(x.name for x in (tmp_path / "out").iterdir()) == ["a.json"]


def test_root_refuses_a_symlinked_folder_and_a_path_outside(tmp_path: Path) -> None:
    root = tmp_path / "store"
    (root / "a").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "linked").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UnsafePathError, match="linked"):
        atomic_write_text(root / "linked" / "r.json", "x", root=root)
    assert list(elsewhere.iterdir()) == []
    with pytest.raises(UnsafePathError, match="outside"):
        atomic_write_text(root / "a" / ".." / ".." / "escaped.json", "x", root=root)
    assert not (tmp_path / "escaped.json").exists()
    assert check_inside(root / "a" / "r.json", root) == root / "a" / "r.json"
    # the root itself may be a link (the user chose it); what is under it may not
    alias = tmp_path / "alias"
    alias.symlink_to(root, target_is_directory=True)
    atomic_write_text(alias / "a" / "r.json", "ok", root=alias)
    assert (root / "a" / "r.json").read_text() == "ok"


# ---- markers --------------------------------------------------------------------------------------------
def test_is_complete_only_for_a_regular_marker(tmp_path: Path) -> None:
    folder = tmp_path / "enc"
    folder.mkdir()
    assert not is_complete(folder)
    outside = tmp_path / "outside"
    outside.write_text("{}")
    (folder / ".complete").symlink_to(outside)
    assert not is_complete(folder)  # anyone could point a link at any file
    with pytest.raises(UnsafePathError, match=r"\.complete"):
        mark_complete(folder, "info")
    assert outside.read_text() == "{}"
    (folder / ".complete").unlink()
    (folder / ".complete").mkdir()
    assert not is_complete(folder)
    (folder / ".complete").rmdir()
    mark_complete(folder, '{"steps": 3}')
    assert is_complete(folder) and (folder / ".complete").read_text() == '{"steps": 3}'


# ---- slugs ----------------------------------------------------------------------------------------------
def test_slug_is_bounded_and_distinct_for_long_names_sharing_a_prefix() -> None:
    a, b = "t" * 200 + "-alpha" + "x" * 34, "t" * 200 + "-beta" + "x" * 35
    assert len(a) == len(b) == 240
    sa, sb = slug(a), slug(b)
    assert sa != sb and len(sa) <= 80 and len(sb) <= 80
    assert sa.startswith("t" * 60) and "~" in sa
    assert len(slug(a, max_len=40)) <= 40 and slug(a, max_len=40) != slug(b, max_len=40)
    assert slug("x" * 80) == "x" * 80 and slug("x" * 81) != "x" * 81 and len(slug("x" * 81)) <= 80


def test_slug_escapes_and_keeps_plain_names() -> None:
    for plain in ("tsdae", "sts12", "cqadupstack-lite", "seed=1", "v1.2_a"):
        assert slug(plain) == plain
    # names that would collide or climb out get the readable part + a hash of the whole name
    assert slug("coll a") != slug("coll_a") == "coll_a"
    assert slug("coll a").startswith("coll_a~")
    for bad in ("..", ".", ".locks", "a/../../b", "/etc/passwd", "", "a\x00b"):
        s = slug(bad)
        assert "/" not in s and "\x00" not in s and s not in ("", ".", "..") and s != bad
    with pytest.raises(ValueError):
        slug("x", max_len=5)


def test_slug_names_the_committed_records_where_they_are() -> None:
    """The record folders committed under leaderboards/results were named by the store's old rule:
    ``slug`` must give every one of them the same path (else stored records would be "missing")."""
    assert slug("sentence-transformers/all-MiniLM-L6-v2") == "sentence-transformers__all-MiniLM-L6-v2~e9e2c8815f"
    store = ResultStore(REPO / "leaderboards" / "results")
    records = list(store.records())
    assert len(records) > 50 and not store.damaged
    for r in records:
        assert store.path(key_of(r)).is_file(), key_of(r)


def test_a_symlinked_items_file_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    """``ResultStore.write`` with per-item scores writes the items file through the primitive too."""
    store = ResultStore(tmp_path / "results")
    items = {"test": {"scores": [1.0, 0.0], "ids": ["a", "b"]}}
    path = store.write(_record(50.0), items=items)
    (item_file,) = path.parent.glob("*.items.test.json.gz")
    outside = tmp_path / "outside.gz"
    outside.write_bytes(b"SECRET")
    item_file.unlink()
    item_file.symlink_to(outside)
    with pytest.raises(UnsafePathError, match=str(item_file)):
        store.write(_record(50.0), items=items)
    assert outside.read_bytes() == b"SECRET" and item_file.is_symlink()


@pytest.mark.parametrize("n", [240, 300, 1000])
def test_a_record_of_a_very_long_task_and_method_name_is_stored_and_found(tmp_path: Path, n: int) -> None:
    """Every path the store derives from a key (its own, the legacy one it looks for, the lock) stays
    under the file system's 255 per name: no "File name too long" on write, lookup or lock."""
    store = ResultStore(tmp_path / "results")
    rec = {**_record(50.0, task="t" * n), "method": "m" * n}
    key = key_of(rec)
    assert not store.exists(key)
    with store.lock(key):
        path = store.write(dict(rec))
    assert all(len(part) <= 90 for part in path.relative_to(tmp_path).parts)
    assert store.load(key)["task"] == "t" * n and store.exists(key)
    assert [r["method"] for r in store.records()] == ["m" * n]


def _record(score: float, task: str = "sts-mini") -> dict:
    return {
        "schema_version": 2,
        "task_version": 1,
        "method": "fixed",
        "config_hash": "abc",
        "config": {},
        "model": "m",
        "setup": "unsupervised",
        "seed": 1,
        "task": task,
        "splits": {"test": {"main_score": score}},
        "created_at": "2026-11-27T12:00:00+0000",
        "evaluated": {"test": {"created_at": "2026-11-27T12:00:00+0000"}},
    }


# ---- a folder swapped for a link between the check and the write (drill, issue 50) -----------------------
def _swap(folder: Path, elsewhere: Path, mirror: bool = True) -> None:
    """Move ``folder`` aside (inside its root) and put a link to ``elsewhere`` in its place, as a hostile
    local process racing the writer would. ``mirror``: ``elsewhere`` first gets ``folder``'s sub-folders
    (empty), so a write that follows the link succeeds there; without it, any folder made through the
    link shows."""
    if mirror:
        for d in [folder, *folder.rglob("*")]:
            if d.is_dir():
                (elsewhere / d.relative_to(folder)).mkdir(parents=True, exist_ok=True)
    folder.rename(folder.with_name(folder.name + ".moved"))
    folder.symlink_to(elsewhere, target_is_directory=True)


def _swap_after_check(monkeypatch, folder: Path, elsewhere: Path, n: int, mirror: bool = True) -> list[int]:
    """Right after the ``n``-th link check ``store.files`` makes, ``_swap`` ``folder`` for a link to
    ``elsewhere``. Returns the running count of checks (to learn how many a write makes)."""
    real = files._refuse_link
    count = [0]

    def check_then_swap(path, what=""):
        real(path, what)
        count[0] += 1
        if count[0] == n and not folder.is_symlink():
            _swap(folder, elsewhere, mirror)

    monkeypatch.setattr(files, "_refuse_link", check_then_swap)
    return count


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir())


@pytest.mark.parametrize("mirror", [True, False])
def test_a_folder_swapped_for_a_link_after_any_check_never_takes_a_record_outside(
    tmp_path: Path, monkeypatch, mirror: bool
):
    """Through ``ResultStore.write`` with per-item scores: whichever check the swap follows, no record,
    items file, temp file or folder lands outside the store (the bug: after the last check, the record
    and its temp files were written through the link; a swap before a ``mkdir`` made folders there). The
    write is refused naming the link, or (a swap after its last write) lands in the store."""
    items = {"test": {"scores": [1.0, 0.0], "ids": ["a", "b"]}}
    probe = ResultStore(tmp_path / "probe")
    probe.write(_record(50.0), items=items)  # the folders exist, as after a first run
    counter = _swap_after_check(monkeypatch, tmp_path / "unused", tmp_path / "unused-elsewhere", 0)
    probe.write(_record(51.0), items=items)
    checks = counter[0]
    monkeypatch.undo()
    assert checks >= 2
    for n in range(1, checks + 1):
        root, elsewhere = tmp_path / f"store{n}", tmp_path / f"elsewhere{n}"
        elsewhere.mkdir()
        store = ResultStore(root)
        path = store.write(_record(50.0), items=items)
        folder = root / path.relative_to(root).parts[0] / path.relative_to(root).parts[1]  # <method>/<model>
        _swap_after_check(monkeypatch, folder, elsewhere, n, mirror)
        try:
            store.write(_record(52.0), items=items)
        except UnsafePathError as e:
            assert str(folder) in str(e) and "symbolic link" in str(e), e
        monkeypatch.undo()
        got = _tree(elsewhere)
        assert not [g for g in got if (elsewhere / g).is_file()], f"swap after check {n} of {checks}: written outside"
        if not mirror:
            assert got == [], f"swap after check {n} of {checks}: folders made outside: {got}"


def test_a_folder_swapped_after_the_walk_opened_it_keeps_the_write_in_the_root(tmp_path: Path, monkeypatch) -> None:
    """The swap after every check AND the descriptor walk: the temp file is opened and renamed relative to
    the folder the walk holds, so the record lands there (in the store, the moved folder), never through
    the link, and the write completes."""
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    (root / "a" / "b").mkdir(parents=True)
    elsewhere.mkdir()
    real = files.open_folder

    @contextlib.contextmanager
    def walk_then_swap(*a, **k):
        with real(*a, **k) as fd:
            _swap(root / "a", elsewhere)
            yield fd

    monkeypatch.setattr(files, "open_folder", walk_then_swap)
    atomic_write_text(root / "a" / "b" / "r.json", "x", root=root)
    monkeypatch.undo()
    assert _files_under(elsewhere) == []
    assert (root / "a.moved" / "b" / "r.json").read_text() == "x"
    assert [p.name for p in (root / "a.moved" / "b").iterdir()] == ["r.json"]  # no temp file left


@pytest.mark.parametrize("what", ["atomic write", "safe_mkdirs"])
def test_the_fd_walk_refuses_a_swap_after_the_last_check(tmp_path: Path, monkeypatch, what: str) -> None:
    """The folder is swapped after the LAST link check, so only the descriptor walk (``O_NOFOLLOW``
    opens relative to the parent folder) stands between the write and the link's target."""

    def make(root: Path) -> None:
        (root / "a" / "b").mkdir(parents=True)

    def act(root: Path) -> None:
        if what == "atomic write":
            atomic_write_text(root / "a" / "b" / "r.json", "x", root=root)
        else:
            files.safe_mkdirs(root / "a" / "b" / "c" / "d", root)

    make(tmp_path / "probe")
    counter = _swap_after_check(monkeypatch, tmp_path / "unused", tmp_path / "unused", 0)
    act(tmp_path / "probe")
    last = counter[0]
    monkeypatch.undo()
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    make(root)
    elsewhere.mkdir()
    _swap_after_check(monkeypatch, root / "a", elsewhere, last)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        act(root)
    monkeypatch.undo()
    assert _files_under(elsewhere) == [] and not (elsewhere / "b" / "c").exists()


def test_a_pinned_folder_keeps_its_writes_when_swapped_after_it_is_opened(tmp_path: Path) -> None:
    """What ``encoder.save`` and the run-folder lock write through (``pinned_folder``): a swap of the
    folder for a link after it was opened cannot redirect a path-based writer (``save_pretrained``)."""
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    elsewhere.mkdir()
    with files.pinned_folder(root / "runs" / "m" / "encoder", root) as folder:
        (root / "runs" / "m").rename(root / "runs" / "m.moved")
        (root / "runs" / "m").symlink_to(elsewhere, target_is_directory=True)
        (elsewhere / "encoder").mkdir()
        (Path(folder) / "model.safetensors").write_bytes(b"weights")
        (Path(folder) / "sub").mkdir()
    assert _files_under(elsewhere) == [] and not (elsewhere / "encoder" / "sub").exists()
    assert (root / "runs" / "m.moved" / "encoder" / "model.safetensors").read_bytes() == b"weights"


def test_safe_mkdirs_refuses_before_making_anything(tmp_path: Path) -> None:
    """A link deep in the path: refused naming it, and not one folder made, inside the root or out."""
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    (root / "a").mkdir(parents=True)
    elsewhere.mkdir()
    (root / "a" / "l").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UnsafePathError, match=r"a/l \(a folder on the way"):
        files.safe_mkdirs(root / "a" / "l" / "x" / "y", root)
    assert list(elsewhere.iterdir()) == [] and sorted(p.name for p in (root / "a").iterdir()) == ["l"]
    with pytest.raises(UnsafePathError, match="outside"):
        files.safe_mkdirs(root / ".." / "escaped", root)
    assert not (tmp_path / "escaped").exists()
    (root / "f").write_text("a file")
    with pytest.raises(UnsafePathError, match="not a folder"):
        files.safe_mkdirs(root / "f" / "x", root)
    assert files.safe_mkdirs(root / "n" / "m", root).is_dir()
