"""``leaderboard --out L`` in a folder people share, and names that must stay inert: the build owns only
what its manifest lists (a foreign README, page or .tex is refused or left alone, never overwritten or
deleted), never writes through a symlink (README, latex/, the screenshot: a named error, the target
untouched, no traceback), swaps the site in whole (a build stopped at any write leaves the old site and its
screenshot), waits for a concurrent build (the lock), and ``--check`` covers the manifest and the
screenshot. Names with ``$\\oops$`` (matplotlib mathtext), a right-to-left override or a Markdown link
are shown as text in every output. Records are small synthetic files (see test_leaderboard_build)."""

from __future__ import annotations

import importlib
import re
import threading
from pathlib import Path

import pytest
from test_leaderboard_build import rec, write

from benchbench.cli.main import main
from benchbench.core.errors import UnsafePathError
from benchbench.report import leaderboard, site
from benchbench.report.site.html import page_name
from benchbench.store.files import atomic_write_text
from benchbench.store.locks import LockedError, hold

folder = importlib.import_module("benchbench.report.site.folder")
PNG = b"\x89PNG\r\n\x1a\n" + b"fake screenshot"
RLO = "\u202e"


def _shoot(index: Path, png: Path) -> None:
    assert index.is_file()  # taken of the new site, before it is swapped in
    png.write_bytes(PNG)


@pytest.fixture(autouse=True)
def _no_studies(monkeypatch) -> None:
    """The built-in studies are not what these tests are about (and cost seconds): the front page lists none."""
    monkeypatch.setattr(folder, "study_sections", lambda records, results, names=None: [])


def _records(tmp_path: Path, extra: list[dict] | None = None) -> Path:
    write(tmp_path, [rec("tsdae", "stsb", 70.0), rec("ct", "stsb", 60.0), *(extra or [])])
    return tmp_path / "results"


def _cli(*argv: str) -> int:
    return main(["leaderboard", *argv])


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` but the build's lock (which a refused build takes too)."""
    files = [p for p in sorted(root.rglob("*")) if p.is_file() and not p.name.startswith(folder.LOCK)]
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in files}


# ----------------------------------------------------------------------------------------------- ownership
def test_foreign_files_are_refused_or_left_alone(tmp_path: Path, capsys) -> None:
    """A folder holding a hand-written README, a page and a .tex lost the last two and had
    the README overwritten, without a word."""
    res = _records(tmp_path)
    out = tmp_path / "lb"
    (out / "site").mkdir(parents=True)
    (out / "latex").mkdir()
    (out / "README.md").write_text("my own notes")
    (out / "site" / "page.html").write_text("my page")
    (out / "latex" / "mine.tex").write_text("my table")
    before = _snapshot(out)
    assert _cli("--results", str(res), "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert f"{out / 'README.md'}: not written by `benchbench leaderboard`" in err and "Traceback" not in err
    assert _snapshot(out) == before  # nothing written, nothing deleted
    (out / "README.md").unlink()  # the README in the way goes; the page in site/ (replaced whole) still refused
    assert _cli("--results", str(res), "--out", str(out)) == 2
    assert f"{out / 'site' / 'page.html'}: not written" in capsys.readouterr().err
    (out / "site" / "page.html").rename(tmp_path / "page.html")
    assert _cli("--results", str(res), "--out", str(out)) == 0
    assert (out / "latex" / "mine.tex").read_text() == "my table"  # not in the way: untouched, and stays
    assert (out / site.MANIFEST).is_file() and "latex/mine.tex" not in (out / site.MANIFEST).read_text()
    assert _cli("--results", str(res), "--out", str(out)) == 0  # a rebuild replaces its own files only
    assert (out / "latex" / "mine.tex").read_text() == "my table"


def test_a_generated_file_no_longer_made_goes_and_a_hand_written_one_in_latex_stays(tmp_path: Path) -> None:
    res = _records(tmp_path, [rec("tsdae", "askubuntu", 50.0)])
    out = tmp_path / "lb"
    site.build(res, out)
    assert (out / "latex" / "useb.tex").is_file()
    (out / "latex" / "hand.tex").write_text("hand")
    next((res / "tsdae").glob("*askubuntu*")).unlink()
    site.build(res, out)
    assert not (out / "latex" / "useb.tex").exists() and (out / "latex" / "hand.tex").read_text() == "hand"


def test_a_folder_built_before_the_manifest_is_adopted_by_its_marks(tmp_path: Path) -> None:
    """The committed leaderboards have no manifest yet: their generated files carry the generator's
    mark and are replaced; a hand-written README (no mark) is not."""
    res = _records(tmp_path)
    out = tmp_path / "lb"
    site.build(res, out, shoot=_shoot)
    (out / site.MANIFEST).unlink()
    (out / "site" / "index.html").write_text((out / "site" / "index.html").read_text() + "<!-- old -->")
    site.build(res, out)
    assert "<!-- old -->" not in (out / "site" / "index.html").read_text()
    assert (out / "site" / "screenshot.png").read_bytes() == PNG
    (out / site.MANIFEST).unlink()
    (out / "README.md").write_text("# Leaderboards\n\nmine, by hand\n")
    with pytest.raises(site.ForeignFileError, match="README.md"):
        site.build(res, out)


# ----------------------------------------------------------------------------------------------- symlinks
@pytest.mark.parametrize("where", ["README.md", "latex", "site/screenshot.png", site.MANIFEST])
def test_no_write_follows_a_symlink(tmp_path: Path, capsys, where: str) -> None:
    """A symlinked README.md had its target overwritten, a symlinked screenshot copied its
    target's bytes into the site, a symlinked latex/ gave a raw traceback."""
    res = _records(tmp_path)
    out = tmp_path / "lb"
    site.build(res, out, shoot=_shoot)
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "secret"
    if where == "latex":
        target.mkdir()
        (target / "keep.txt").write_text("outside file")
        import shutil

        shutil.rmtree(out / "latex")
    else:
        target.write_bytes(b"outside file")
        (out / where).unlink()
    (out / where).symlink_to(target)
    before = _snapshot(outside)
    assert _cli("--results", str(res), "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert str(out / where) in err and "symbolic link" in err and "Traceback" not in err
    assert _snapshot(outside) == before
    assert not list(out.glob(".site.*"))  # no temp folder left behind
    if where != site.MANIFEST:
        assert _cli("--results", str(res), "--out", str(out), "--check") == 1
        assert f"{out / where}" in capsys.readouterr().err


def test_a_symlinked_lock_is_refused(tmp_path: Path) -> None:
    res = _records(tmp_path)
    out = tmp_path / "lb"
    out.mkdir()
    (tmp_path / "victim").write_text("keep")
    (out / folder.LOCK).symlink_to(tmp_path / "victim")
    with pytest.raises(UnsafePathError, match=folder.LOCK):
        site.build(res, out)
    assert (tmp_path / "victim").read_text() == "keep"


# ----------------------------------------------------------------------------------------------- atomicity
@pytest.mark.parametrize("stop_at", [1, 7, "exchange"])
def test_a_build_stopped_anywhere_leaves_the_old_site_whole(tmp_path: Path, monkeypatch, stop_at) -> None:
    """The old site/ was deleted before the new one was written; a kill in between left
    all.html without index.html, and the screenshot was gone. Here the build is stopped at its first and
    seventh site file, and just before the swap: the old site and screenshot are there, byte for byte."""
    res = _records(tmp_path)
    out = tmp_path / "lb"
    site.build(res, out, shoot=_shoot)
    old = _snapshot(out / "site")
    write(tmp_path, [rec("bsl", "stsb", 65.0)])  # the next build would change the pages
    calls = {"n": 0}

    def dying_write(path, text, *, root=None):
        if ".site.new-" in str(path):
            calls["n"] += 1
            if calls["n"] == stop_at:
                raise KeyboardInterrupt("killed")
        return atomic_write_text(path, text, root=root)

    monkeypatch.setattr(folder, "atomic_write_text", dying_write)
    if stop_at == "exchange":
        monkeypatch.setattr(folder, "_exchange", lambda new, target: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        site.build(res, out)
    assert _snapshot(out / "site") == old
    monkeypatch.undo()
    monkeypatch.setattr(folder, "study_sections", lambda records, results, names=None: [])
    site.build(res, out)
    assert (out / "site" / "screenshot.png").read_bytes() == PNG  # carried over, not lost
    assert "bsl" in (out / "site" / "all.html").read_text()
    assert site.check(res, out) == []


def test_a_kill_between_the_fallback_renames_is_repaired(tmp_path: Path) -> None:
    """Where the kernel has no RENAME_EXCHANGE, the swap is two renames: a kill between them leaves no
    site/ but the old one beside it, which the next build puts back before anything else."""
    res = _records(tmp_path)
    out = tmp_path / "lb"
    site.build(res, out, shoot=_shoot)
    old = _snapshot(out / "site")
    (out / "site").rename(out / ".site.old-x1")
    (out / ".site.new-x1").mkdir()
    (out / ".site.new-x1" / "all.html").write_text("half a site")
    folder._recover(out)
    assert _snapshot(out / "site") == old and not list(out.glob(".site.*"))


def test_the_two_rename_fallback_swaps_the_site(tmp_path: Path, monkeypatch) -> None:
    """Where libc has no renameat2 (or the file system no RENAME_EXCHANGE), the swap still replaces the
    site whole and leaves no temp folder."""
    res = _records(tmp_path)
    out = tmp_path / "lb"
    site.build(res, out, shoot=_shoot)
    monkeypatch.setattr(folder.ctypes, "CDLL", lambda *a, **k: object())  # no renameat2
    write(tmp_path, [rec("bsl", "stsb", 65.0)])
    site.build(res, out)
    assert "bsl" in (out / "site" / "all.html").read_text() and not list(out.glob(".site.*"))
    assert site.check(res, out) == []


def test_concurrent_builds_wait_for_the_lock(tmp_path: Path, monkeypatch) -> None:
    """Two builds into one --out raced to a FileNotFoundError. A build holds the folder's
    lock: one started while another holds it waits (here: gives up after 0.3 s, naming the lock)."""
    res = _records(tmp_path)
    out = tmp_path / "lb"
    site.build(res, out)
    monkeypatch.setenv("BENCHBENCH_LOCK_TIMEOUT", "0.3")
    with hold(out / folder.LOCK, "test"):
        with pytest.raises(LockedError, match="leaderboard folder"):
            site.build(res, out)
    monkeypatch.delenv("BENCHBENCH_LOCK_TIMEOUT")
    errors: list[BaseException] = []

    def one() -> None:
        try:
            site.build(res, out, shoot=_shoot)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and site.check(res, out) == []


# ----------------------------------------------------------------------------------------------- --check
def test_check_covers_the_screenshot_and_the_manifest(tmp_path: Path) -> None:
    res = _records(tmp_path)
    out = tmp_path / "lb"
    site.build(res, out)
    assert site.check(res, out) == [f"{out / 'site' / 'screenshot.png'}: missing (rebuild with --screenshot)"]
    site.build(res, out, shoot=_shoot)
    assert site.check(res, out) == []
    (out / "site" / "screenshot.png").write_bytes(b"GIF89a")
    assert any("not a PNG" in p for p in site.check(res, out))
    (out / "site" / "screenshot.png").write_bytes(PNG)
    (out / site.MANIFEST).write_text("{}")
    assert any(site.MANIFEST in p and "differs" in p for p in site.check(res, out))
    (out / site.MANIFEST).unlink()
    assert any(site.MANIFEST in p and "missing" in p for p in site.check(res, out))


# ----------------------------------------------------------------------------------------------- names
def test_a_mathtext_name_builds(tmp_path: Path) -> None:
    """A task or method named ``$\\oops$`` reached matplotlib's mathtext (ParseFatalException,
    rc 1, nothing written)."""
    bad = r"$\oops$"
    curve = {"seconds": 5, "loss_curve": [[1, 2.0], [2, 1.0]], "monitor": [[1, {bad: 1.0}], [2, {bad: 2.0}]]}
    complete = rec("tsdae", "afs", 55.0, train={"seconds": 100})  # a quality-vs-cost plot: log axis
    bad_recs = [rec(bad, bad, s, seed, train=curve) for seed, s in ((1, 50.0), (2, 52.0))]
    res = _records(tmp_path, [*bad_recs, complete])
    out = tmp_path / "lb"
    assert _cli("--results", str(res), "--out", str(out)) == 0
    svgs = "".join(p.read_text() for p in (out / "site" / "plots").glob("*.svg"))
    shown = re.sub(r"<!--.*?-->", "", svgs, flags=re.S)  # what is drawn, not matplotlib's comments
    assert bad in shown  # the name as text in the legend and labels, not a formula
    assert "compute-seconds-afs.svg" in {p.name for p in (out / "site" / "plots").iterdir()}
    assert "mathdefault" not in shown  # the log axis' ticks are still mathtext (10^2), not literal source
    assert bad in (out / "site" / "tasks" / f"{page_name(bad)}.html").read_text()


def test_bidi_and_markdown_links_are_inert_everywhere(tmp_path: Path) -> None:
    """A name with U+202E passed raw into README, site, LaTeX and the terminal table; a
    Markdown link in a name stayed a link in the README."""
    evil = f"ab{RLO}cd"
    link = "[md](javascript:alert(3))"
    res = _records(tmp_path, [rec(evil, "stsb", 40.0), rec(link, "stsb", 41.0)])
    out = tmp_path / "lb"
    site.build(res, out)
    texts = {
        p.relative_to(out).as_posix(): p.read_text()
        for p in out.rglob("*")
        if p.suffix in (".md", ".html", ".tex", ".svg")
    }
    assert not [rel for rel, t in texts.items() if RLO in t]
    assert r"ab\u202ecd" in texts["README.md"] and r"ab\u202ecd" in texts["site/all.html"]
    assert r"ab\textbackslash{}u202ecd" in texts["latex/sts.tex"]
    readme = re.sub(r"`[^`]*`", "", texts["README.md"])  # code spans (the topic folders) render no link
    assert "[md](" not in readme and r"\[md\](javascript:alert(3))" in readme
    assert '<a href="javascript' not in texts["site/all.html"]
    headers, rows, notes = leaderboard.summarise(site.load_records(res), ["stsb"])
    for fmt in ("simple", "plain", "github", "html"):
        table = leaderboard.render(headers, rows, notes, fmt, title=f"title {RLO}")
        assert RLO not in table and r"\u202e" in table, fmt


_LOOP = """
import importlib, sys
from benchbench.report import site
folder = importlib.import_module("benchbench.report.site.folder")
folder.study_sections = lambda records, results, names=None: []
print("ready", flush=True)
while True:
    site.build(sys.argv[1], sys.argv[2])
"""


@pytest.mark.slow
def test_kill_9_during_builds_leaves_a_whole_site(tmp_path: Path) -> None:
    """With real kills: a process rebuilding the site in a loop is killed with SIGKILL at
    several moments; each time ``site/`` is exactly the old site or exactly the new one (screenshot
    included), and the next build and ``--check`` find nothing wrong."""
    import os
    import signal
    import subprocess
    import sys
    import time

    old_res = _records(tmp_path / "old")
    new_res = _records(tmp_path / "new", [rec("bsl", "stsb", 65.0)])
    refs = []
    for res in (old_res, new_res):
        ref = res.parent / "ref"
        site.build(res, ref, shoot=_shoot)
        refs.append(_snapshot(ref / "site"))
    out = tmp_path / "lb"
    for delay in (0.3, 0.9, 1.7, 2.6):
        if out.exists():
            import shutil

            shutil.rmtree(out)
        site.build(old_res, out, shoot=_shoot)
        proc = subprocess.Popen(
            [sys.executable, "-c", _LOOP, str(new_res), str(out)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if not (out / "site").exists():  # the two-rename fallback's window: the next build repairs it
            folder._recover(out)
        assert _snapshot(out / "site") in refs, delay
    site.build(new_res, out)
    assert _snapshot(out / "site") == refs[1] and site.check(new_res, out) == []
