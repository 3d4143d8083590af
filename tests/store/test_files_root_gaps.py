"""Gaps a mutation run over ``benchbench.store.files`` found no test closing: ``check_inside``'s walk over
the folders between a root and a path, checked directly (writers reach it only through
``open_folder``); ``move_into``'s rename relative to the folder descriptor under a race; the mode of the
folders the descriptor walk makes; and what ``atomic_writer`` does with missing folders with and
without a root."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

import pytest

from benchbench.core.errors import UnsafePathError
from benchbench.store import files
from benchbench.store.files import atomic_write_text, atomic_writer, check_inside, move_into, safe_mkdirs


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# ---- check_inside: no symlinked folder between the root and the path ------------------------------------
@pytest.mark.parametrize("depth", [0, 1, 2])
def test_check_inside_refuses_a_linked_folder_at_any_depth_naming_it(tmp_path: Path, depth: int) -> None:
    """``root/a/b/c/r.json`` with one of ``a`` (great-grand-parent), ``a/b`` (grand-parent) or
    ``a/b/c`` (parent) a link to a folder outside the root: refused, naming that link as a folder on
    the way. A walk that skipped the first name, stopped a folder early, or checked only the root would
    accept one of these."""
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    (elsewhere / "b" / "c").mkdir(parents=True)
    names = ["a", "b", "c"]
    real = root.joinpath(*names[:depth]) if depth else root
    real.mkdir(parents=True)
    link = real / names[depth]
    link.symlink_to(elsewhere.joinpath(*names[1 : depth + 1]), target_is_directory=True)  # mirrors what it replaces
    target = root / "a" / "b" / "c" / "r.json"
    assert target.parent.is_dir()  # the path resolves: only the link check stands in the way
    with pytest.raises(UnsafePathError, match=re.escape(f"{link} (a folder on the way to {target})")) as e:
        check_inside(target, root)
    assert "symbolic link" in str(e.value) and str(os.readlink(link)) in str(e.value)
    assert _tree(elsewhere) == ["b", "b/c"]  # a check: nothing made or written
    # without a root only the path itself is checked: the folders above it are the caller's
    assert check_inside(target, None) == target


def test_check_inside_accepts_the_same_path_without_links_and_refuses_a_linked_target(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a" / "b" / "c").mkdir(parents=True)
    target = root / "a" / "b" / "c" / "r.json"
    assert check_inside(target, root) == target
    assert check_inside(str(target), str(root)) == target  # str in, Path out
    assert check_inside(root / "a" / "new" / "deeper" / "r.json", root) == root / "a" / "new" / "deeper" / "r.json"
    # the path itself a link: refused as itself, not as "a folder on the way"
    (tmp_path / "outside.json").write_text("SECRET")
    target.symlink_to(tmp_path / "outside.json")
    for r in (root, None):
        with pytest.raises(UnsafePathError, match=re.escape(f"{target} is a symbolic link")):
            check_inside(target, r)
    assert (tmp_path / "outside.json").read_text() == "SECRET"


def test_check_inside_allows_links_at_and_above_the_root(tmp_path: Path) -> None:
    """The root is the user's choice: it may be a link, and so may any folder above it; only what lies
    between the root and the path is walked."""
    real = tmp_path / "disk" / "store"
    (real / "a").mkdir(parents=True)
    alias = tmp_path / "alias"  # the root itself a link
    alias.symlink_to(real, target_is_directory=True)
    assert check_inside(alias / "a" / "r.json", alias) == alias / "a" / "r.json"
    mount = tmp_path / "mount"  # a folder above the root a link
    mount.symlink_to(tmp_path / "disk", target_is_directory=True)
    assert check_inside(mount / "store" / "a" / "r.json", mount / "store") == mount / "store" / "a" / "r.json"
    # ... but the same link below the root it is checked against is refused
    with pytest.raises(UnsafePathError, match=re.escape(f"{mount} (a folder on the way")):
        check_inside(mount / "store" / "a" / "r.json", tmp_path)
    with pytest.raises(UnsafePathError, match="outside"):
        check_inside(alias / ".." / "elsewhere" / "r.json", alias)


# ---- move_into: the rename is made relative to the folder the walk holds ---------------------------------
def _swap(folder: Path, elsewhere: Path) -> None:
    """Move ``folder`` aside inside the root and put a link to ``elsewhere`` in its place, after giving
    ``elsewhere`` the same (empty) sub-folders, so a rename that follows the link succeeds there."""
    for d in [folder, *folder.rglob("*")]:
        if d.is_dir():
            (elsewhere / d.relative_to(folder)).mkdir(parents=True, exist_ok=True)
    folder.rename(folder.with_name(folder.name + ".moved"))
    folder.symlink_to(elsewhere, target_is_directory=True)


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_move_into_a_folder_swapped_after_the_walk_keeps_src_in_the_root(tmp_path: Path, monkeypatch, kind) -> None:
    """``dst``'s grand-parent is swapped for a link after ``open_folder`` opened ``dst``'s folder: the
    rename, relative to that descriptor, puts ``src`` in the folder the walk held (now ``a.moved``), never
    through the link; a rename by path would land in ``elsewhere``."""
    root, elsewhere, tmp = tmp_path / "root", tmp_path / "elsewhere", tmp_path / "tmp"
    (root / "a" / "b").mkdir(parents=True)
    elsewhere.mkdir()
    tmp.mkdir()
    src = tmp / "r.json"
    if kind == "file":
        src.write_text("new")
    else:
        src.mkdir()
        (src / "inner.txt").write_text("new")
    real = files.open_folder
    swapped = []

    @contextlib.contextmanager
    def walk_then_swap(*a, **k):
        with real(*a, **k) as fd:
            _swap(root / "a", elsewhere)
            swapped.append(True)
            yield fd

    monkeypatch.setattr(files, "open_folder", walk_then_swap)
    dst = move_into(src, root / "a" / "b" / "r.json", root)
    monkeypatch.undo()
    assert swapped and dst == root / "a" / "b" / "r.json"
    assert [p for p in elsewhere.rglob("*") if not p.is_dir()] == [] and _tree(elsewhere) == ["b"]
    landed = root / "a.moved" / "b" / "r.json"
    assert (landed.read_text() if kind == "file" else (landed / "inner.txt").read_text()) == "new"
    assert not src.exists()


def test_move_into_refuses_a_folder_swapped_before_the_walk_and_keeps_src(tmp_path: Path, monkeypatch) -> None:
    """The swap after ``move_into``'s own ``check_inside`` passed, before ``open_folder`` runs: the link is
    refused naming it, nothing is renamed, ``src`` stays where it was, and the ``dst`` already in the
    moved folder keeps its content."""
    root, elsewhere, tmp = tmp_path / "root", tmp_path / "elsewhere", tmp_path / "tmp"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "r.json").write_text("old")
    elsewhere.mkdir()
    tmp.mkdir()
    (tmp / "r.json").write_text("new")
    real = files.open_folder

    @contextlib.contextmanager
    def swap_then_walk(*a, **k):
        _swap(root / "a", elsewhere)
        with real(*a, **k) as fd:
            yield fd

    monkeypatch.setattr(files, "open_folder", swap_then_walk)
    with pytest.raises(UnsafePathError, match=re.escape(str(root / "a")) + ".*symbolic link"):
        move_into(tmp / "r.json", root / "a" / "b" / "r.json", root)
    monkeypatch.undo()
    assert _tree(elsewhere) == ["b"] and (tmp / "r.json").read_text() == "new"
    assert (root / "a.moved" / "b" / "r.json").read_text() == "old"


def test_move_into_replaces_an_existing_file_and_refuses_a_linked_folder(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    (root / "a").mkdir(parents=True)
    elsewhere.mkdir()
    (root / "a" / "r.json").write_text("old")
    (tmp_path / "src.json").write_text("new")
    assert move_into(tmp_path / "src.json", root / "a" / "r.json", root) == root / "a" / "r.json"
    assert (root / "a" / "r.json").read_text() == "new" and not (tmp_path / "src.json").exists()
    (tmp_path / "src2.json").write_text("made")
    assert move_into(tmp_path / "src2.json", root / "n" / "m" / "r.json", root).read_text() == "made"  # folders made
    (root / "l").symlink_to(elsewhere, target_is_directory=True)
    (tmp_path / "src3.json").write_text("x")
    with pytest.raises(UnsafePathError, match=re.escape(f"{root / 'l'} (a folder on the way")):
        move_into(tmp_path / "src3.json", root / "l" / "r.json", root)
    assert list(elsewhere.iterdir()) == [] and (tmp_path / "src3.json").exists()


# ---- folder modes: 0o777 less the umask, like any folder the user makes ----------------------------------
@contextlib.contextmanager
def _umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077, 0o000])
def test_folders_made_get_0o777_less_the_umask(tmp_path: Path, mask: int) -> None:
    """Every folder the walk makes (the root by ``makedirs``, each one under it by ``mkdir(dir_fd=)``)
    has mode ``0o777 & ~umask``. Root bypasses permissions, so only the bits show a narrower mode (an
    umask of 0 shows every bit; 0o022 alone would not tell 0o777 from 0o755)."""
    want = 0o777 & ~mask
    root = tmp_path / "root"
    with _umask(mask):
        safe_mkdirs(root / "a" / "b", root)
        with files.open_folder(root / "o" / "p", root):
            pass
        with files.pinned_folder(root / "q", root):
            pass
        atomic_write_text(root / "w" / "x" / "r.json", "{}", root=root)
    made = [root, root / "a", root / "a" / "b", root / "o", root / "o" / "p", root / "q", root / "w", root / "w" / "x"]
    assert {str(p.relative_to(tmp_path)): oct(p.stat().st_mode & 0o777) for p in made} == {
        str(p.relative_to(tmp_path)): oct(want) for p in made
    }
    assert (root / "w" / "x" / "r.json").stat().st_mode & 0o777 == 0o666 & ~mask


# ---- atomic_writer's missing folders: made under a root, never without one ---------------------------------
def test_atomic_writer_without_a_root_makes_no_missing_folder(tmp_path: Path) -> None:
    """Without ``root`` the path's folder must exist (``create=root is not None``): the write fails with
    FileNotFoundError and makes nothing, neither folder nor temp file. With ``root`` the same path's
    missing folders are made under it and the write completes."""
    target = tmp_path / "missing" / "sub" / "r.json"
    with pytest.raises(FileNotFoundError), atomic_writer(target, "w") as f:
        f.write("never")
    with pytest.raises(FileNotFoundError):
        atomic_write_text(target, "x")
    assert _tree(tmp_path) == []
    # the folder present: the write without a root works, in that folder only
    (tmp_path / "here").mkdir()
    atomic_write_text(tmp_path / "here" / "r.json", "ok")
    assert _tree(tmp_path) == ["here", "here/r.json"]
    # given the root, the same missing folders are made under it
    with atomic_writer(target, "w", root=tmp_path) as f:
        f.write("made")
    assert target.read_text() == "made"
    assert _tree(tmp_path / "missing") == ["sub", "sub/r.json"]
    # and a root that does not exist yet is made too (the user named it)
    atomic_write_text(tmp_path / "new-root" / "a" / "r.json", "y", root=tmp_path / "new-root")
    assert (tmp_path / "new-root" / "a" / "r.json").read_text() == "y"
