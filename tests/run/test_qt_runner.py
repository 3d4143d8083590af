"""QT through the runner: ordered --corpus named in the record, training cost recorded, the saved
encoder reloaded from disk (registered encoder loader) on a later run."""

from __future__ import annotations

import pytest
from helpers import FIXTURES, local_plugin_workdir

from benchbench.cli.main import main
from benchbench.store.results import ResultStore

PLUGIN = f"""
from pathlib import Path
from benchbench import hookimpl

@hookimpl
def benchbench_register_tasks(register):
    register("mini", Path({str(FIXTURES / "sts_mini.toml")!r}))
"""


@pytest.fixture
def workdir(tmp_path, monkeypatch, tmp_cache):
    yield from local_plugin_workdir(tmp_path, monkeypatch, PLUGIN)


def test_qt_run_records_its_ordered_corpus_and_cost_and_reloads(workdir, capsys):
    books = workdir / "books.txt"
    # the fixture task's words (a0..b4) are in the corpus, so the vectors differ (no constant scores)
    books.write_text("\n".join(f"Sentence {i} of the book {'ab'[i % 2]}{i % 5} ." for i in range(60)) + "\n")
    args = [
        "run",
        "--method",
        "qt",
        "--tasks",
        "mini",
        "--corpus",
        str(books),
        "--set",
        "encoder=bow",
        "--set",
        "emb_dim=8",
        "--set",
        "batch_size=10",
        "--set",
        "steps=2",
        "--set",
        "vocab_size=50",
    ]
    assert main(args) == 0
    (rec,) = ResultStore("results").records()
    c = rec["train"]["corpus"]
    assert c["kind"] == "ordered" and c["name"] == f"file:{books.resolve()}" and c["sentences"] == 60 and c["sha256"]
    t = rec["train"]
    assert t["steps"] == 2 and t["sentences"] == 20 and t["tokens"] == 20 * 7 and t["flops"] > 0 and t["seconds"] >= 0
    fp = rec["encoder_fingerprint"]
    enc_dir = next(workdir.glob("results/**/encoder/benchbench_encoder.json")).parent
    assert (enc_dir / ".complete").is_file() and (enc_dir / "weights.safetensors").is_file()
    capsys.readouterr()
    assert main(args + ["--force"]) == 0  # re-evaluates with the encoder loaded from disk
    (rec2,) = ResultStore("results").records()
    assert rec2["encoder_fingerprint"] == fp and rec2["train"].get("reused_from_disk") is True
