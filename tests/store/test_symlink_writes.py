"""No write leaves its folder and no name is too long for a file, through
``benchbench run``: a symlinked lock, lock owner note, record or ``.complete`` marker is an
error naming it (or, for a marker, simply not trusted), and the link's target is never written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO
from helpers import FIXED_METHOD_PLUGIN, FIXTURES, local_plugin_workdir

from benchbench.cli.main import main
from benchbench.core import registry as plugins
from benchbench.store.results import ResultStore, key_of

STS_MINI = (FIXTURES / "sts_mini.toml").read_text()
TASK = STS_MINI[: STS_MINI.index("[[suite]]")]
LONG = "long-" + "t" * 230 + "-task"  # 240 characters: its record's temp file name was over NAME_MAX (255)


@pytest.fixture
def workdir(tmp_path, monkeypatch, tmp_cache):
    """sts-mini, and the same task under a 240-character name."""
    (tmp_path / "mini.toml").write_text(STS_MINI + TASK.replace('"sts-mini"', f'"{LONG}"'))
    monkeypatch.setenv("BENCHBENCH_TASK_PATH", str(tmp_path / "mini.toml"))
    yield from local_plugin_workdir(tmp_path, monkeypatch, FIXED_METHOD_PLUGIN)


def _run(*args: str, task: str = "sts-mini") -> int:
    return main(["run", "--method", "fixed", "--tasks", task, *args])


def _outside(workdir: Path, text: str = "SECRET: not benchbench's to write\n") -> Path:
    p = workdir.parent / f"{workdir.name}-outside.txt"
    p.write_text(text)
    return p


def _refused(capsys, link: Path) -> str:
    """The run's error output: names ``link``, says it is a link, shows no traceback."""
    err = capsys.readouterr().err
    named = (
        str(link) if link.is_absolute() and not link.is_relative_to(Path.cwd()) else str(link.relative_to(Path.cwd()))
    )
    assert named in err and "symbolic link" in err, err
    assert "Traceback" not in err, err
    return err


@pytest.mark.parametrize("which", [".lock.owner", ".lock"])
def test_a_symlinked_result_lock_or_owner_note_is_refused_by_run_force(workdir, capsys, which):
    """The bug: ``run --force`` wrote the owner note through the link (the target became
    {"pid": ...}); a linked ``.lock`` gave filelock's raw ``OSError: Too many levels of symbolic links``."""
    assert _run() == 0
    (owner,) = (workdir / "results" / ".locks").rglob("sts-mini.lock.owner")
    link = owner.parent / f"sts-mini{which}"
    outside = _outside(workdir)
    link.unlink()
    link.symlink_to(outside)
    capsys.readouterr()
    assert _run("--force") == 2
    _refused(capsys, link)
    assert outside.read_text() == "SECRET: not benchbench's to write\n"
    assert link.is_symlink()


def test_a_symlinked_record_is_refused_and_its_target_untouched(workdir, capsys):
    """The bug: the record's temp file was renamed over the link without a word."""
    assert _run() == 0
    store = ResultStore(workdir / "results")
    (record,) = store.records()
    path = store.path(key_of(record))
    outside = _outside(workdir, path.read_text())  # a valid record, so run reads it and re-evaluates
    path.unlink()
    path.symlink_to(outside)
    before = outside.read_bytes()
    capsys.readouterr()
    assert _run("--force") == 2
    _refused(capsys, path)
    assert outside.read_bytes() == before and path.is_symlink()


def test_a_240_character_task_name_gets_a_bounded_file_name(workdir, capsys):
    """The bug: the task evaluated, then died with a raw ``OSError: [Errno 36] File name too long``."""
    assert _run(task=LONG) == 0
    store = ResultStore(workdir / "results")
    (record,) = store.records()
    assert record["task"] == LONG  # the full name stays in the record
    path = store.path(key_of(record))
    assert path.is_file() and all(len(part) <= 90 for part in path.relative_to(workdir).parts)
    assert path.name.startswith("long-ttt") and "~" in path.name
    capsys.readouterr()
    assert _run(task=LONG) == 0  # found again under its bounded name: resumed, not recomputed
    assert "0 evaluated, 1 already stored" in capsys.readouterr().err


def test_training_folder_lock_and_marker_never_followed(tmp_path, monkeypatch, tmp_cache, capsys):
    """The real training path (tiny-bert, the example task, simcse for 1 step): a symlinked owner note
    of the run-folder lock is refused by name; a symlinked ``.complete`` marker does not make a
    trained encoder reusable (it used to be reused) and its target is never written."""
    monkeypatch.setenv("BENCHBENCH_TASK_PATH", str(REPO / "examples" / "example_task" / "example-sts.toml"))
    monkeypatch.setattr(plugins, "_REGISTRY", None)
    out = tmp_path / "out"
    argv = ["run", "--method", "simcse", "--model", "tiny-bert:16:1:2:32", "--tasks", "example-sts"]
    argv += ["--steps", "1", "--batch-size", "8", "--data-dir", str(REPO / "examples" / "example_task" / "data")]
    argv += ["--output", str(out)]
    try:
        assert main(argv) == 0
        (owner,) = (out / "runs").rglob(".train-*.lock.owner")
        (marker,) = (out / "runs").rglob("encoder/.complete")
        outside = tmp_path / "outside.txt"
        outside.write_text("{}")

        owner.unlink()
        owner.symlink_to(outside)
        capsys.readouterr()
        assert main([*argv, "--force"]) == 2
        _refused(capsys, owner)
        assert outside.read_text() == "{}"
        owner.unlink()

        marker.unlink()
        marker.symlink_to(outside)
        assert main([*argv, "--force"]) == 0
        assert outside.read_text() == "{}"
        assert marker.is_file() and not marker.is_symlink()  # trained again and marked by a regular file
        assert json.loads(marker.read_text())["steps"] == 1
        (record,) = ResultStore(out).records()
        assert record["train"]["steps"] == 1 and not record["train"].get("reused_from_disk")  # trained, not reused
    finally:
        plugins.reset_registry()


# ---- parents: a linked folder anywhere between --output and a write ---------------------------------------
def _tree(folder: Path) -> list[str]:
    """Everything under ``folder``: files, folders and links (an empty folder counts too)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_symlinked_parent_of_the_run_folder_is_refused_and_nothing_lands_outside(workdir, capsys):
    """Drill (issue 50): ``OUT/runs/simcse -> elsewhere``, the real training path (tiny-bert, 1 step). The
    bug: the whole trained encoder, its ``.complete``, the checkpoints and the run-folder lock were written
    in ``elsewhere`` (the lock and ``encoder.save`` had no root to check against) and the run said rc 0."""
    out, elsewhere = workdir / "out", workdir / "elsewhere"
    (out / "runs").mkdir(parents=True)
    elsewhere.mkdir()
    link = out / "runs" / "simcse"
    link.symlink_to(elsewhere, target_is_directory=True)
    capsys.readouterr()
    argv = ["run", "--method", "simcse", "--model", "tiny-bert:16:1:2:32", "--tasks", "sts-mini", "--steps", "1"]
    assert main([*argv, "--batch-size", "4", "--output", "out"]) == 2
    _refused(capsys, link)
    assert _tree(elsewhere) == []  # no encoder, no .complete, no lock, no checkpoint, no empty folder
    assert not list(ResultStore(out).records())


def test_a_symlinked_records_parent_is_refused_before_any_folder_is_made_outside(workdir, capsys):
    """Drill (issue 50): ``OUT/fixed -> elsewhere`` (the method's record folder). The bug: refused, but
    only after the record's empty folders (model/setup/config/seed) were made in ``elsewhere``."""
    elsewhere = workdir / "elsewhere"
    elsewhere.mkdir()
    (workdir / "out").mkdir()
    link = workdir / "out" / "fixed"
    link.symlink_to(elsewhere, target_is_directory=True)
    capsys.readouterr()
    assert _run("--output", "out") == 2
    _refused(capsys, link)
    assert _tree(elsewhere) == []


def test_a_symlinked_lock_folder_of_the_store_is_refused_and_nothing_lands_outside(workdir, capsys):
    """``OUT/.locks/fixed -> elsewhere``: the result lock and its owner note stay in the store."""
    assert _run("--output", "out") == 0
    elsewhere = workdir / "elsewhere"
    locks = workdir / "out" / ".locks" / "fixed"
    locks.rename(elsewhere)
    locks.symlink_to(elsewhere, target_is_directory=True)
    before = {p: p.read_bytes() for p in elsewhere.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert _run("--output", "out", "--force") == 2
    _refused(capsys, locks)
    assert {p: p.read_bytes() for p in elsewhere.rglob("*") if p.is_file()} == before


# a local plugin whose "trained" encoder, while it is being saved, has its seed folder swapped for a link
# (a hostile local process racing the run): the files it writes must stay in --output
SWAPPING_PLUGIN = (
    FIXED_METHOD_PLUGIN.replace("    trains = False\n", "    trains = True\n")
    .replace(
        "        return CosineFixtureEncoder()",
        "        return Swapping()",
    )
    .replace(
        "class Fixed(Method):",
        """import os, shutil
from pathlib import Path

class Swapping(CosineFixtureEncoder):
    def save(self, path):
        out, elsewhere = Path(os.environ["DRILL_OUT"]), Path(os.environ["DRILL_ELSEWHERE"])
        (seed,) = out.glob("runs/*/*/*/*/seed1")
        shutil.copytree(seed, elsewhere / "seed1")  # the same folders there: a write through the link succeeds
        copied = sorted(str(p.relative_to(elsewhere)) for p in elsewhere.rglob("*"))
        (elsewhere.parent / "copied.txt").write_text("\\n".join(copied))
        seed.rename(seed.with_name("seed1.moved"))
        seed.symlink_to(elsewhere / "seed1", target_is_directory=True)
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / "weights.bin").write_bytes(b"trained weights")
        return Path(path)

class Fixed(Method):""",
    )
)


def test_a_run_folder_swapped_for_a_link_while_the_encoder_is_saved_keeps_it_inside(
    tmp_path, monkeypatch, tmp_cache, capsys
):
    """Drill (issue 50): the seed folder is swapped for a link to ``elsewhere`` after every check, while
    ``encoder.save`` runs. The encoder writes into the folder the run made and holds (``pinned_folder``),
    so its files stay in --output (in the moved folder); the ``.complete`` marker after it is refused
    through the link, naming it. The bug: ``encoder.save(run_dir / "encoder")`` wrote through the link."""
    (tmp_path / "mini.toml").write_text(STS_MINI)
    monkeypatch.setenv("BENCHBENCH_TASK_PATH", str(tmp_path / "mini.toml"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("DRILL_OUT", str(tmp_path / "out"))
    monkeypatch.setenv("DRILL_ELSEWHERE", str(elsewhere))
    for _ in local_plugin_workdir(tmp_path, monkeypatch, SWAPPING_PLUGIN):
        capsys.readouterr()
        assert _run("--output", "out") == 2
        err = capsys.readouterr().err
        assert "symbolic link" in err and "seed1" in err and "Traceback" not in err, err
        # nothing added there: no weights, no .complete (only what the racer copied)
        assert sorted(str(p.relative_to(elsewhere)) for p in elsewhere.rglob("*")) == (
            (tmp_path / "copied.txt").read_text().splitlines()
        )
        (moved,) = (tmp_path / "out").glob("runs/*/*/*/*/seed1.moved")
        assert [p.read_bytes() for p in moved.rglob("weights.bin")] == [b"trained weights"]


@pytest.mark.parametrize("how", ["--retrain", "unfinished encoder"])
def test_a_checkpoints_folder_swapped_for_a_link_is_refused_and_its_target_untouched(workdir, capsys, how):
    """Drill (session 22): a trained run's ``checkpoints`` folder replaced by a link to ``elsewhere``, then
    trained again (``--retrain``, or ``--force`` when the encoder was never marked complete). The bug: rc 0; the
    loop wrote its checkpoints through the link (checked only against the checkpoints folder itself), and
    ``remove_checkpoints`` walked the link and deleted ``elsewhere``'s own ``step-*`` folder."""
    argv = ["run", "--method", "simcse", "--model", "tiny-bert:16:1:2:32", "--tasks", "sts-mini", "--steps", "2"]
    argv += ["--batch-size", "4", "--output", "out"]
    assert main(argv) == 0
    (encoder,) = (workdir / "out" / "runs").rglob("encoder")
    checkpoints = encoder.parent / "checkpoints"
    if checkpoints.exists():
        checkpoints.rmdir()  # emptied once the encoder was marked complete
    if how != "--retrain":
        (encoder / ".complete").unlink()
    elsewhere = workdir / "elsewhere"
    (elsewhere / "step-000000001").mkdir(parents=True)
    (elsewhere / "step-000000001" / "theirs.txt").write_text("not benchbench's")
    checkpoints.symlink_to(elsewhere, target_is_directory=True)
    capsys.readouterr()
    assert main([*argv, "--retrain" if how == "--retrain" else "--force"]) == 2  # --force: re-evaluated, so trained
    _refused(capsys, checkpoints)
    assert _tree(elsewhere) == ["step-000000001", "step-000000001/theirs.txt"]
    assert checkpoints.is_symlink()
