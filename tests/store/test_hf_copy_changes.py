"""An HF task copy's data is verified on reuse (issue 50): a stored result is reused only while the
copy's fingerprint is the one it was computed from, whether or not the spec names a fingerprint (3.44
served for a true -3.44 after a copy's rows changed); the ``datasets`` Arrow cache built from a copy is
verified before it is read, and rebuilt when it was edited (-3.44 -> -3.52) or truncated ("Found array
with 0 sample(s)"); the copy's fingerprint does not depend on the order the file system lists files.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

pytest.importorskip("datasets")

from helpers import FIXTURES

from benchbench.core import registry
from benchbench.store.data import DataStore
from benchbench.store.hf import HFData, folder_fingerprint

STSB = ("mteb/stsbenchmark-sts", "b0fddb56ed78048fa8b90373c8a3cfc37b684831")
SPEC = f"""
[[task]]
name = "my-sts"
kind = "hf-sts"
splits = ["test"]
main_metric = "cosine_spearman"
[task.params]
dataset = "{STSB[0]}"
revision = "{STSB[1]}"
"""  # no fingerprint: optional, per docs/writing-a-task.md


@pytest.fixture
def copy(tmp_path, monkeypatch, tmp_cache) -> Path:
    """A private copy of the STS-B fixture under a data dir, offline, with its own datasets cache."""
    import datasets

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf")
    folder = tmp_path / "data" / "hf" / STSB[0] / STSB[1]
    shutil.copytree(FIXTURES / "mteb_copies" / "hf" / STSB[0] / STSB[1], folder)
    return folder


def _flip_scores(folder: Path) -> None:
    f = folder / "default" / "test.jsonl"
    rows = [json.loads(line) for line in f.read_text().splitlines()]
    f.write_text("".join(json.dumps({**r, "score": 5.0 - r["score"]}) + "\n" for r in rows))


def test_a_copy_without_a_spec_fingerprint_is_rescored_after_its_rows_change(copy, tmp_path, monkeypatch, caplog):
    from benchbench.cli.main import main
    from benchbench.store.results import ResultStore

    (tmp_path / "my-sts.toml").write_text(SPEC)
    monkeypatch.setenv("BENCHBENCH_TASK_PATH", str(tmp_path / "my-sts.toml"))
    monkeypatch.setenv("BENCHBENCH_DATA", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(registry, "_REGISTRY", None)
    args = ["run", "--method", "plm-mean", "--model", "tiny-bert:16:1:2:32", "--tasks", "my-sts", "--output", "out"]

    def stored() -> dict:
        (rec,) = list(ResultStore(tmp_path / "out").records())
        return rec

    assert main(args) == 0
    first = stored()
    key = f"hf:{STSB[0]}@{STSB[1]}"
    assert first["data"][key] == folder_fingerprint(copy)  # computed and recorded without a spec fingerprint
    assert main(args) == 0 and stored()["created_at"] == first["created_at"]  # unchanged data: reused
    _flip_scores(copy)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert main(args) == 0
    again = stored()
    assert "computed from other data" in caplog.text and key in caplog.text
    assert again["data"][key] == folder_fingerprint(copy) != first["data"][key]
    s1, s2 = first["splits"]["test"]["main_score"], again["splits"]["test"]["main_score"]
    assert s2 == pytest.approx(-s1) and s1 != 0  # reversed gold scores: the Spearman flips sign


def _arrow_files() -> list[Path]:
    import datasets

    return sorted(Path(datasets.config.HF_DATASETS_CACHE).rglob("*.arrow"))


def _rewrite_arrow(path: Path, edit) -> None:
    import pyarrow as pa

    with pa.memory_map(str(path)) as src:
        table = pa.ipc.open_stream(src).read_all()
    table = edit(table)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)


def _negate_scores(table):
    import pyarrow.compute as pc

    i = table.schema.get_field_index("score")
    return table.set_column(i, "score", pc.negate(table.column("score")))


@pytest.mark.parametrize("damage", ["edited", "truncated"])
def test_an_edited_datasets_cache_of_a_copy_is_rebuilt_not_read(damage, copy, tmp_path, caplog):
    data = DataStore(tmp_path / "data", cache_dir=tmp_path / "cache", allow_download=False)
    want = list(HFData(data, "my-sts", *STSB).split(None, "test")["score"])
    (arrow,) = _arrow_files()
    _rewrite_arrow(arrow, _negate_scores if damage == "edited" else (lambda t: t.slice(0, 0)))
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        got = list(HFData(data, "my-sts", *STSB).split(None, "test")["score"])
    assert got == want
    assert "was modified since it was built" in caplog.text
    # the rebuilt cache is the verified one: read again with no warning
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert list(HFData(data, "my-sts", *STSB).split(None, "test")["score"]) == want
    assert "modified" not in caplog.text


def test_the_copy_fingerprint_does_not_depend_on_the_listing_order(copy, monkeypatch):
    (copy / "default" / "dev.jsonl").write_text('{"sentence1": "a", "sentence2": "b", "score": 1.0}\n')
    (copy / "extra").mkdir()
    (copy / "extra" / "notes.txt").write_text("x")
    want = folder_fingerprint(copy)
    real = Path.rglob
    for order in (reversed, lambda xs: sorted(xs, key=lambda p: p.name)):
        monkeypatch.setattr(Path, "rglob", lambda self, pat, _o=order: iter(list(_o(list(real(self, pat))))))
        assert folder_fingerprint(copy) == want
    monkeypatch.setattr(Path, "rglob", real)
    (copy / "extra" / "notes.txt").write_text("y")  # and it does depend on every file's content
    assert folder_fingerprint(copy) != want


def _run_reverse_gold_and_rerun(tmp_path: Path, monkeypatch, spec: str) -> tuple[dict, dict]:
    """sts-mini's files under ``tmp_path/data`` and ``spec`` as the task file: a plm-mean run, the gold of
    subset A reversed, the same run again; the two stored records."""
    from benchbench.cli.main import main
    from benchbench.store.results import ResultStore

    shutil.copytree(FIXTURES / "sts_mini", tmp_path / "data" / "sts_mini")
    (tmp_path / "mini.toml").write_text(spec)
    monkeypatch.setenv("BENCHBENCH_TASK_PATH", str(tmp_path / "mini.toml"))
    monkeypatch.setenv("BENCHBENCH_DATA", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(registry, "_REGISTRY", None)
    args = ["run", "--method", "plm-mean", "--model", "tiny-bert:16:1:2:32", "--tasks", "sts-mini", "--output", "o"]
    assert main(args) == 0
    (first,) = list(ResultStore(tmp_path / "o").records())
    gs = tmp_path / "data" / "sts_mini" / "STS.gs.A.txt"
    gs.write_text("".join(f"{6 - float(x)}\n" for x in gs.read_text().split()))  # reversed gold
    assert main(args) == 0
    (again,) = list(ResultStore(tmp_path / "o").records())
    return first, again


def test_a_file_task_without_declared_sha256s_is_rescored_after_a_file_changes(tmp_path, monkeypatch, tmp_cache):
    """The same rule for a file task whose spec declares no checksum: the record's sha256 of each file
    is compared with the file's now (a declared sha256 is verified whenever the file is read)."""
    spec = (FIXTURES / "sts_mini.toml").read_text()
    spec = (
        spec[: spec.index("[task.files]")]
        + "[task.files]\n"
        + "".join(f'"sts_mini/STS.{k}.{s}.txt" = {{}}\n' for s in "AB" for k in ("input", "gs"))
    )
    first, again = _run_reverse_gold_and_rerun(
        tmp_path, monkeypatch, spec.replace('name = "mini"', 'name = "mini-suite"')
    )
    assert again["data"]["sts_mini/STS.gs.A.txt"] != first["data"]["sts_mini/STS.gs.A.txt"]  # re-evaluated


def test_rows_behind_a_symlinked_subfolder_of_a_copy_are_fingerprinted(copy, tmp_path, monkeypatch):
    """Drill (session 22): the copy's ``default/`` is a link to a folder outside it (a user sharing rows
    between copies), and its rows change after a run. The bug: the fingerprint (``Path.rglob``) never
    entered the linked folder, so it covered README.md alone: the stored 20.0 was reused, and even a fresh
    ``--output`` got 20.0 (the ``datasets`` cache, named by that fingerprint, served the old rows) for a
    true -20.0. Now files under a linked subfolder count by their path through the link."""
    from benchbench.cli.main import main
    from benchbench.store.results import ResultStore

    shutil.move(copy / "default", tmp_path / "shared-rows")
    (copy / "default").symlink_to(tmp_path / "shared-rows", target_is_directory=True)
    (tmp_path / "my-sts.toml").write_text(SPEC)
    monkeypatch.setenv("BENCHBENCH_TASK_PATH", str(tmp_path / "my-sts.toml"))
    monkeypatch.setenv("BENCHBENCH_DATA", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(registry, "_REGISTRY", None)
    args = ["run", "--method", "plm-mean", "--model", "tiny-bert:16:1:2:32", "--tasks", "my-sts", "--output"]

    def score(out: str) -> float:
        assert main([*args, out]) == 0
        (rec,) = list(ResultStore(tmp_path / out).records())
        return rec["splits"]["test"]["main_score"]

    first = score("out")
    assert "default/test.jsonl" in _fingerprinted(copy)
    _flip_scores(copy)
    assert score("out") == pytest.approx(-first) and first != 0  # the stored record is not reused
    assert score("fresh") == pytest.approx(-first)  # nor the datasets cache built from the old rows


def _fingerprinted(folder: Path) -> set[str]:
    """The relative paths ``folder_fingerprint`` hashes (each file's path goes into the digest)."""
    from benchbench.store import hf

    seen: set[str] = set()
    real = hf.sha256_file
    try:
        hf.sha256_file = lambda p: seen.add(Path(p).relative_to(folder).as_posix()) or real(p)
        folder_fingerprint(folder)
    finally:
        hf.sha256_file = real
    return seen


def test_a_file_task_with_no_files_table_is_rescored_after_a_file_changes(tmp_path, monkeypatch, tmp_cache):
    """Drill (session 22): a hand-made spec with no ``[task.files]`` at all (its adapter finds the files by
    its params). The bug: the record stored no sha256 of them (only declared files, or files under
    ``params.root``, were recorded), so after the gold file was reversed the stored score was served."""
    spec = (FIXTURES / "sts_mini.toml").read_text()
    first, again = _run_reverse_gold_and_rerun(tmp_path, monkeypatch, spec[: spec.index("[task.files]")])
    assert sorted(first["data"]) == sorted(f"sts_mini/STS.{k}.{s}.txt" for s in "AB" for k in ("gs", "input"))
    assert again["data"]["sts_mini/STS.gs.A.txt"] != first["data"]["sts_mini/STS.gs.A.txt"]  # re-evaluated
    s1, s2 = first["splits"]["test"]["main_score"], again["splits"]["test"]["main_score"]
    assert s2 != s1  # the reversed gold's score, not the stored one (40.0 -> 79.06 on tiny-bert)
