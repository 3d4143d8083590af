"""Sizes nobody checked, and errors that named no file.

8. ``--batch-size 100000`` (simcse, tiny-bert), ``--max-seq-length 100000`` and ``--model
   tiny-bert:120000:1:1:1`` each grew past 6-8 GB until a watchdog killed them; a max length above
   the model's 512 positions failed late with a tensor-size error. Now each is refused before any
   model is built, the message holding the numbers (``benchbench.encode.sizes``).
10. A malformed tokenizer.json and an empty training corpus were errors naming no file; a read-only
    seed folder gave a raw PermissionError after evaluation."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import FIXTURES

from benchbench.cli.main import main
from benchbench.core.errors import ConfigError, DataError

MEMORY_ENV = "BENCHBENCH_MEMORY_LIMIT"  # spelt out: the documented name


@pytest.fixture
def sts_env(env, monkeypatch):
    """The sts-mini fixture task, a private cache and registry; no model may be built (a size check
    that comes after building would fail here, not pass)."""
    from benchbench.encode import models

    def refuse(*a, **kw):
        raise AssertionError("a model was built before the size check")

    monkeypatch.setattr(models, "tiny_bert", refuse)
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    return env


def _run_simcse(out: Path, *args: str) -> int:
    return main(["run", "--method", "simcse", "--tasks", "mini", "--steps", "2", "--output", str(out), *args])


def _fast(t0: float) -> None:
    assert time.perf_counter() - t0 < 60  # seconds, not the minutes of a run that swaps


def test_huge_batch_is_refused_with_the_estimate_and_the_limit(sts_env, monkeypatch, capsys):
    """1,010,240 parameters, B = 100,000, T = 32 (SimCSE's), L = 2, H = 32, I = 64, A = 2:
    16 x P + 4 x (B T L (10 H + 2 I + 3 A T) + 3 B^2) = 136,410,163,840 bytes = 127.0 GiB."""
    monkeypatch.setenv(MEMORY_ENV, "16G")
    t0 = time.perf_counter()
    assert _run_simcse(sts_env / "out", "--model", "tiny-bert", "--batch-size", "100000") == 2
    _fast(t0)
    err = capsys.readouterr().err
    assert "batch 100,000 x 32 tokens needs about 127.0 GiB to train" in err, err
    assert "over the 16.0 GiB of BENCHBENCH_MEMORY_LIMIT=16G" in err and "--batch-size" in err, err
    assert not (sts_env / "out").exists() or not list((sts_env / "out").rglob("*.json"))


def test_a_batch_that_fits_is_not_refused(env, monkeypatch):
    """The same run at a batch the limit holds trains and stores its record."""
    monkeypatch.setenv(MEMORY_ENV, "16G")
    assert _run_simcse(env / "out", "--model", "tiny-bert:16:1:2:32", "--batch-size", "8") == 0


def test_max_length_above_the_positions_is_refused_naming_both(sts_env, capsys):
    t0 = time.perf_counter()
    assert _run_simcse(sts_env / "out", "--model", "tiny-bert", "--max-seq-length", "100000") == 2
    _fast(t0)
    err = capsys.readouterr().err
    assert "--max-seq-length 100000 is above model 'tiny-bert''s 512 positions" in err, err


def test_a_huge_model_shape_is_refused_against_the_machine(sts_env, capsys):
    """Compared with the machine's own available memory (no override): ~987 GiB fits nowhere."""
    t0 = time.perf_counter()
    assert _run_simcse(sts_env / "out", "--model", "tiny-bert:120000:1:1:1") == 2
    _fast(t0)
    err = capsys.readouterr().err
    assert "61,325,640,001 parameters" in err and "987.1 GiB" in err and "available memory" in err, err


@pytest.mark.slow
def test_a_huge_model_shape_never_allocates(tmp_path):
    """The same through a fresh process under a 6 GiB address-space limit: refused (rc 2) with the
    numbers, never a MemoryError or a kill (it used to try to allocate ~228 GiB of weights)."""
    env = {
        **os.environ,
        "BENCHBENCH_DATA": str(FIXTURES),
        "BENCHBENCH_TASK_PATH": str(FIXTURES / "sts_mini.toml"),
        "BENCHBENCH_CACHE": str(tmp_path / "cache"),
    }
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30)); "
        "from benchbench.cli.main import main; sys.exit(main(sys.argv[1:]))"
    )
    args = ["run", "--method", "sbert", "--tasks", "mini", "--model", "tiny-bert:120000:1:1:1"]
    r = subprocess.run([sys.executable, "-c", code, *args, "--output", str(tmp_path / "o")], **_cap(env))
    assert r.returncode == 2, r.stderr[-2000:]
    assert "61,325,640,001 parameters" in r.stderr, r.stderr[-2000:]


def _cap(env):
    return {"capture_output": True, "text": True, "env": env, "timeout": 300}


def test_tiny_bert_itself_refuses_before_building():
    """Any caller (a plugin, a study), not only ``run``: the weights alone would need ~228 GiB."""
    from benchbench.encode.models import tiny_bert

    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"61,325,640,001 parameters: its fp32 weights alone take about 228\.5 GiB"):
        tiny_bert(120000, 1, 1, 1)
    _fast(t0)
    with pytest.raises(ConfigError, match=r"--max-seq-length 513 is above model 'tiny-bert:16:1:2:32''s 512"):
        tiny_bert(16, 1, 2, 32, max_seq_length=513)
    assert tiny_bert(16, 1, 2, 32, max_seq_length=512).model.config.max_position_embeddings == 512


def test_folder_config_positions_are_read_without_loading(tmp_path, tiny_encoder, env, monkeypatch, capsys):
    """A local folder's config.json says 128 positions: --max-seq-length 200 is refused naming both,
    before transformers loads the folder."""
    from benchbench.encode import sizes

    folder = tiny_encoder.save(tmp_path / "short")
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "max_position_embeddings": 128}))
    from benchbench.encode import models

    monkeypatch.setattr(models.TransformerEncoder, "load", classmethod(lambda *a, **k: pytest.fail("loaded")))
    assert main(["run", "--method", "sbert", "--tasks", "mini", "--model", str(folder), "--max-seq-length", "200"]) == 2
    assert "--max-seq-length 200 is above model" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"--max-seq-length 200 .* 128 positions"):
        sizes.check_sizes(str(folder), type("C", (), {"max_seq_length": 200})(), trains=False, device="cpu")


def test_load_refuses_a_length_beyond_the_positions(tmp_path, tiny_encoder):
    """A hub model is checked when it loads (its config is not on disk before): the same rule."""
    from benchbench.encode.models import load_encoder

    folder = tiny_encoder.save(tmp_path / "m")
    with pytest.raises(ConfigError, match=r"--max-seq-length 513 is above model .*'s 512 positions"):
        load_encoder(str(folder), max_seq_length=513)
    assert load_encoder(str(folder), max_seq_length=512).max_seq_length == 512


def test_memory_estimate_by_hand():
    """P = (V + 512 + 2) H + L (4 H^2 + 2 H I + 9 H + I) for H=32, L=2, A=2, I=64, V=30522."""
    from benchbench.encode import sizes

    shape = sizes.model_shape("tiny-bert")
    assert shape == sizes.Shape(32, 2, 2, 64, 30522, 512)
    assert shape.parameters == (30522 + 514) * 32 + 2 * (4 * 32 * 32 + 2 * 32 * 64 + 9 * 32 + 64) == 1_010_240
    train, _ = sizes.memory_estimate(shape, 8, 16, training=True)
    assert train == 4 * (4 * 1_010_240 + 8 * 16 * 2 * (320 + 128 + 3 * 2 * 16) + 3 * 64)
    enc, _ = sizes.memory_estimate(shape, 8, 16, training=False)
    assert enc == 4 * (1_010_240 + 8 * 16 * (128 + 64 + 2 * 2 * 16))


def test_roberta_positions_leave_out_the_padding_offset():
    from benchbench.encode import sizes

    assert sizes.model_positions({"model_type": "roberta", "max_position_embeddings": 514, "pad_token_id": 1}) == 512
    assert sizes.model_positions({"model_type": "bert", "max_position_embeddings": 512, "pad_token_id": 0}) == 512


def test_available_memory_sources(monkeypatch):
    from benchbench.encode import sizes

    monkeypatch.setenv(MEMORY_ENV, "1.5G")
    assert sizes.available_memory("cpu") == (3 << 29, "BENCHBENCH_MEMORY_LIMIT=1.5G")
    monkeypatch.setenv(MEMORY_ENV, "nope")
    with pytest.raises(ConfigError, match="BENCHBENCH_MEMORY_LIMIT='nope'"):
        sizes.available_memory("cpu")
    monkeypatch.delenv(MEMORY_ENV)
    have, source = sizes.available_memory("cpu")
    assert have > 0 and "memory" in source


# ---- 10. errors that named no file ------------------------------------------------------------------
def test_malformed_tokenizer_json_is_named(tmp_path, tiny_encoder):
    from benchbench.encode.models import load_encoder

    folder = tiny_encoder.save(tmp_path / "m")
    tok = folder / "tokenizer.json"
    for damage in ('{"version": "1.0", "model": {"type": "WordPiece"', '{"version": "1.0", "model": 5}'):
        tok.write_text(damage)
        with pytest.raises(ConfigError) as e:
            load_encoder(str(folder))
        assert str(tok) in str(e.value), str(e.value)


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_empty_ordered_corpus_names_the_file(content, tmp_path):
    from benchbench.train.ordered import open_ordered

    f = tmp_path / "book.txt"
    f.write_text(content)
    with pytest.raises(DataError, match=rf"{f}: no non-empty lines"):
        open_ordered([f], "file", tmp_path / "cache")


def test_empty_task_training_file_names_the_file(tmp_path, registry):
    import dataclasses

    from benchbench.store.data import DataStore

    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "train.txt").write_text("\n \n")
    spec = dataclasses.replace(registry.task("sts-mini") if "sts-mini" in registry.tasks else registry.task("stsb"))
    spec = dataclasses.replace(spec, files={}, train={"source": "file", "path": "t/train.txt"})
    adapter = registry.adapter(spec.kind)(spec, DataStore(tmp_path, allow_download=False))
    with pytest.raises(DataError, match=r"t/train\.txt: the training corpus of task .* no non-empty lines"):
        adapter.train_sentences()


def test_read_only_record_folder_fails_before_evaluating(env, monkeypatch, capsys):
    """The seed folder of a stored run made read-only: the run used to evaluate, then die with a raw
    PermissionError writing the record. Now the run stops before encoding, naming the folder.
    (Writes are denied by refusing O_CREAT under the folder: chmod does not stop root.)"""
    from benchbench.encode import encoding

    encoded = []
    real_embed = encoding.Embedder.embed
    monkeypatch.setattr(
        encoding.Embedder, "embed", lambda self, *a, **k: encoded.append(1) or real_embed(self, *a, **k)
    )
    out = env / "out"
    assert _run_simcse(out, "--model", "tiny-bert:16:1:2:32", "--batch-size", "8") == 0
    assert encoded  # an evaluation goes through Embedder.embed
    encoded.clear()
    record = next(p for p in out.rglob("sts-mini*.json") if ".locks" not in p.parts and "runs" not in p.parts)
    folder = record.parent
    real_open = os.open

    def deny(path, flags, *a, **kw):
        if flags & os.O_CREAT and Path(os.fsdecode(path)).parent.resolve() == folder.resolve():
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fsdecode(path))
        return real_open(path, flags, *a, **kw)

    monkeypatch.setattr(os, "open", deny)
    assert _run_simcse(out, "--model", "tiny-bert:16:1:2:32", "--batch-size", "8", "--force") == 2
    err = capsys.readouterr().err
    assert str(folder) in err and "not a writable folder" in err and "Traceback" not in err, err
    assert not encoded  # refused before evaluating
