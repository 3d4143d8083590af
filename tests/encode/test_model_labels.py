"""A local model folder's label covers every file its configuration loads (issue 50).

The label (``<name>@<sha256 of the folder's files>``) is in every result key: a folder whose weights
change gets a new key, never the old score. A sentence-transformers ``modules.json`` whose Transformer
module lay outside the folder (``../weights``, an absolute path) or in a hidden folder (``.weights``,
skipped by the hash) kept its label when those weights changed: 36.90 served, 38.66 true. Such module
paths are now refused, naming ``modules.json`` and what to do; a symlinked subfolder is hashed through.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchbench.core.errors import ConfigError
from benchbench.encode.models import TransformerEncoder, model_label_of, tiny_bert


def _st_folder(tmp_path: Path, module_path: str, seed: int = 0) -> Path:
    """A sentence-transformers folder whose Transformer module is loaded from ``module_path``."""
    folder = tmp_path / "my-model"
    tiny_bert(16, 1, 2, 32, seed=seed).save(folder)
    if module_path:
        target = (folder / module_path) if not Path(module_path).is_absolute() else Path(module_path)
        target.mkdir(parents=True, exist_ok=True)
        for f in folder.iterdir():
            if f.is_file() and f.name not in ("modules.json", "sentence_bert_config.json"):
                shutil.move(str(f), target / f.name)
        mods = json.loads((folder / "modules.json").read_text())
        mods[0]["path"] = module_path
        (folder / "modules.json").write_text(json.dumps(mods))
    return folder


@pytest.mark.parametrize("where", ["../weights", ".weights", "ABSOLUTE", "sub/../../weights"])
def test_a_module_path_the_label_cannot_cover_is_refused(where, tmp_path):
    path = str(tmp_path / "abs-weights") if where == "ABSOLUTE" else where
    folder = _st_folder(tmp_path, path)
    for load in (model_label_of, TransformerEncoder.load):
        with pytest.raises(ConfigError, match=r"my-model.*modules\.json names module path .*copy that module's files"):
            load(str(folder))


def test_weights_in_a_subfolder_change_the_label_and_load(tmp_path):
    folder = _st_folder(tmp_path, "0_Transformer")
    label = model_label_of(str(folder))
    enc = TransformerEncoder.load(str(folder))
    assert enc.fingerprint == tiny_bert(16, 1, 2, 32, seed=0).fingerprint
    tiny_bert(16, 1, 2, 32, seed=1).model.save_pretrained(folder / "0_Transformer")
    assert model_label_of(str(folder)) != label


def test_a_symlinked_module_folder_is_hashed_through(tmp_path):
    """The weights may live elsewhere behind a link inside the folder: the loader reads through it, so
    the label must too (``rglob`` did not descend into linked folders)."""
    folder = _st_folder(tmp_path, "0_Transformer")
    shutil.move(str(folder / "0_Transformer"), tmp_path / "shared-weights")
    (folder / "0_Transformer").symlink_to(tmp_path / "shared-weights", target_is_directory=True)
    (folder / "loop").symlink_to(folder, target_is_directory=True)  # a link loop is walked once
    label = model_label_of(str(folder))
    tiny_bert(16, 1, 2, 32, seed=1).model.save_pretrained(tmp_path / "shared-weights")
    assert model_label_of(str(folder)) != label


def test_the_label_of_a_plain_folder_is_unchanged(tmp_path):
    """Labels are in stored result keys: a folder without links keeps the label it had."""
    import hashlib

    folder = _st_folder(tmp_path, "")
    (folder / ".complete").write_text("x")
    (folder / "README.md").write_text("card")
    h = hashlib.sha256()  # the label as it was computed before issue 50
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = f.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or f.suffix.lower() == ".md":
            continue
        h.update(f"{rel.as_posix()}\0{f.stat().st_size}\0".encode())
        h.update(f.read_bytes())
    assert model_label_of(str(folder)) == f"my-model@{h.hexdigest()[:12]}"


def test_the_run_command_refuses_weights_outside_the_folder(tmp_path, monkeypatch, capsys, tmp_cache):
    """Through the CLI: an error naming modules.json, before anything is evaluated or stored."""
    from benchbench.cli.main import main

    folder = _st_folder(tmp_path, "../weights")
    monkeypatch.chdir(tmp_path)
    code = main(["run", "--method", "plm-cls", "--model", str(folder), "--tasks", "stsb", "--output", "out"])
    assert code != 0
    assert "modules.json names module path '../weights'" in capsys.readouterr().err
    assert not list((tmp_path / "out").rglob("*.json"))
