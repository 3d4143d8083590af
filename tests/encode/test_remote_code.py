"""Nothing in a model folder executes. A folder whose config names custom code
(``auto_map`` to a ``configuration_*.py``) made transformers ask "run the custom code? [y/N]", and a
``y`` on stdin ran the file (it wrote a marker) and a record was stored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES

from benchbench.core.errors import ConfigError

EVIL = """
import os, pathlib
pathlib.Path(os.environ["EVIL_MARKER"]).write_text("ran")
from transformers import PretrainedConfig
class EvilConfig(PretrainedConfig):
    model_type = "evilbert"
"""
AUTO_MAP = {"AutoConfig": "configuration_evil.EvilConfig", "AutoModel": "configuration_evil.EvilModel"}


def _evil_folder(root: Path, *, model_type: str = "evilbert", where: str = "config.json", sub: str = "") -> Path:
    """A model folder whose ``where`` (under ``sub``, a sentence-transformers Transformer module's
    folder when set) maps AutoConfig to a module that writes the marker file when imported."""
    folder = root / "evil-model"
    inner = folder / sub
    inner.mkdir(parents=True)
    if sub:
        mods = [{"idx": 0, "name": "0", "path": sub, "type": "sentence_transformers.models.Transformer"}]
        (folder / "modules.json").write_text(json.dumps(mods))
    cfg = {"model_type": model_type, "architectures": ["EvilModel"], "hidden_size": 8}
    if where == "config.json":
        cfg["auto_map"] = AUTO_MAP
    else:
        (inner / where).write_text(json.dumps({"auto_map": {"AutoTokenizer": ["tokenization_evil.T", None]}}))
    (inner / "config.json").write_text(json.dumps(cfg))
    (inner / "configuration_evil.py").write_text(EVIL)
    (inner / "tokenization_evil.py").write_text(EVIL)
    return folder


def _env(tmp_path: Path, marker: Path) -> dict[str, str]:
    return {
        **os.environ,
        "EVIL_MARKER": str(marker),
        "BENCHBENCH_DATA": str(FIXTURES),
        "BENCHBENCH_TASK_PATH": str(FIXTURES / "sts_mini.toml"),
        "BENCHBENCH_CACHE": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
    }


@pytest.mark.slow
def test_run_refuses_a_folder_with_auto_map_even_when_stdin_says_yes(tmp_path):
    """Through the CLI, stdin a pipe holding "y" (today's main answered transformers' prompt with it
    and ran configuration_evil.py): the run fails naming the folder and ``auto_map``, the marker is
    absent and no record is stored."""
    folder = _evil_folder(tmp_path)
    marker = tmp_path / "marker"
    out = tmp_path / "results"
    cmd = [sys.executable, "-m", "benchbench.cli", "run", "--method", "sbert", "--tasks", "mini"]
    cmd += ["--model", str(folder), "--output", str(out)]
    r = subprocess.run(cmd, input="y\ny\ny\n", capture_output=True, text=True, env=_env(tmp_path, marker), timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    assert not marker.exists()
    assert str(folder) in r.stderr and "'auto_map'" in r.stderr, r.stderr[-2000:]
    assert "Do you wish to run the custom code" not in r.stdout + r.stderr  # refused before any prompt
    assert not [p for p in out.rglob("*.json")] if out.exists() else True


@pytest.mark.slow
def test_loaders_pass_trust_remote_code_false(tmp_path, tiny_encoder):
    """With the up-front check switched off, transformers itself must refuse: every load passes
    ``trust_remote_code=False``, so a "y" on stdin is never read and the marker never written
    (the encoder loader, a pretrained head, and the config probe ``_is_bert``)."""
    folder = _evil_folder(tmp_path)
    tiny_encoder.tokenizer.save_pretrained(folder)  # a tokenizer that loads: the model load itself is reached
    marker = tmp_path / "marker"
    script = f"""
import benchbench.encode.models as m
m._refuse_custom_code = lambda *a: None
for call in (lambda: m.load_encoder({str(folder)!r}),
             lambda: m.load_pretrained_head({str(folder)!r}, "AutoModelForMaskedLM"),
             lambda: m._is_bert({str(folder)!r})):
    try:
        call()
    except Exception as e:
        print("refused:", type(e).__name__)
"""
    r = subprocess.run(
        [sys.executable, "-c", script], input="y\n" * 10, capture_output=True, text=True, env=_env(tmp_path, marker)
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert not marker.exists(), r.stdout + r.stderr[-2000:]
    assert "Do you wish to run the custom code" not in r.stdout + r.stderr


@pytest.mark.parametrize(
    "model_type, where, sub",
    [
        ("evilbert", "config.json", ""),  # unknown architecture, custom config
        ("bert", "config.json", ""),  # a known type still carrying auto_map is refused too
        ("bert", "tokenizer_config.json", ""),  # custom tokenizer code
        ("evilbert", "config.json", "0_Transformer"),  # a sentence-transformers folder's Transformer module
    ],
)
def test_every_loader_names_the_folder_and_auto_map(model_type, where, sub, tmp_path, monkeypatch):
    from benchbench.encode import model_names, models

    folder = _evil_folder(tmp_path, model_type=model_type, where=where, sub=sub)
    monkeypatch.setenv("EVIL_MARKER", str(tmp_path / "marker"))
    calls = {
        "--model check": lambda: model_names.check_model_name(str(folder)),
        "load_encoder": lambda: models.load_encoder(str(folder)),
        "load_pretrained_head": lambda: models.load_pretrained_head(str(folder), "AutoModelForMaskedLM"),
        "checkpoint_source (plugins' tokenizers)": lambda: models.checkpoint_source(str(folder)),
    }
    for what, call in calls.items():
        with pytest.raises(ConfigError) as e:
            call()
        msg = str(e.value)
        assert str(folder) in msg and "'auto_map'" in msg and where in msg, (what, msg)
    assert not (tmp_path / "marker").exists()


def test_unknown_model_type_without_auto_map_is_named(tmp_path):
    from benchbench.encode import models

    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "no-such-arch", "hidden_size": 8}))
    with pytest.raises(ConfigError, match=r"config\.json names model_type 'no-such-arch'.*never runs code"):
        models.load_encoder(str(folder))


def test_a_plain_saved_folder_still_loads(tmp_path, tiny_encoder):
    """The check reads only auto_map and model_type: a folder benchbench saved loads as before."""
    from benchbench.encode import model_names, models

    folder = tiny_encoder.save(tmp_path / "saved")
    assert model_names.check_model_name(str(folder)) is False
    loaded = models.load_encoder(str(folder))
    assert loaded.encode(["a cat"]).shape == (1, tiny_encoder.dim)


def test_a_cached_hub_model_with_auto_map_is_refused_by_name(tmp_path, monkeypatch):
    """A hub id whose snapshot in the Hugging Face cache names custom code: refused before
    transformers reads it, naming the snapshot folder and ``auto_map``."""
    from huggingface_hub import constants

    from benchbench.encode import models

    cache = tmp_path / "hub"
    snap = cache / "models--someone--evil" / "snapshots" / ("a" * 40)
    snap.parent.mkdir(parents=True)
    snap.parent.parent.joinpath("refs").mkdir()
    (snap.parent.parent / "refs" / "main").write_text("a" * 40)
    _evil_folder(tmp_path).rename(snap)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))  # benchbench's own offline check reads the variable
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("EVIL_MARKER", str(tmp_path / "marker"))
    for call in (
        lambda: models.load_encoder("someone/evil"),
        lambda: models.load_pretrained_head("someone/evil", "AutoModelForMaskedLM"),
    ):
        with pytest.raises(ConfigError, match=rf"{snap}.*'auto_map'"):
            call()
    assert not (tmp_path / "marker").exists()
