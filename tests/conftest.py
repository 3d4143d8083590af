"""Shared fixtures. Real data comes from BENCHBENCH_DATA or ../shared/data next to the repo."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# codecarbon's tracker takes seconds to start: runs in tests measure no energy unless a test asks
# (tests/run/test_energy.py sets it back); benchbench.run.energy reads it at each measurement
os.environ.setdefault("BENCHBENCH_ENERGY", "0")


@pytest.fixture(autouse=True)
def _study_stats_in_the_test_tree(tmp_path_factory, monkeypatch):
    """Study views built without ``cache=`` use the user cache (``study_view.default_cache``): in tests
    that is a folder of this session's temporary tree, never ~/.cache (entries from test studies had
    reached it and were nearly committed with the real ones)."""
    from benchbench.report import study_view

    where = tmp_path_factory.getbasetemp() / "study-stats"
    monkeypatch.setattr(study_view, "default_cache", lambda: where)
    from benchbench.report import leaderboard  # `benchbench table`'s columns: the same rule

    monkeypatch.setattr(leaderboard, "tie_cache", lambda: tmp_path_factory.getbasetemp() / "table-stats")


def _real_data_dir() -> Path | None:
    d = os.environ.get("BENCHBENCH_DATA") or str(REPO.parent / "shared" / "data")
    return Path(d) if Path(d).is_dir() else None


@pytest.fixture(scope="session")
def real_data() -> Path:
    d = _real_data_dir()
    if d is None:
        pytest.skip("real data not available (set BENCHBENCH_DATA)")
    return d


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    """An isolated cache so tests never touch ~/.cache/benchbench."""
    monkeypatch.setenv("BENCHBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="session")
def tiny_encoder():
    from benchbench.encode.models import tiny_bert

    return tiny_bert(seed=0)


@pytest.fixture
def registry():
    from benchbench.core.registry import load_registry

    return load_registry()


@pytest.fixture
def env(tmp_path, monkeypatch):
    """The sts-mini fixture task as the only extra task, fixture data, a private embedding cache and a
    fresh registry (sweep and reproduce tests)."""
    fixtures = Path(__file__).parent / "fixtures"
    monkeypatch.setenv("BENCHBENCH_DATA", str(fixtures))
    monkeypatch.setenv("BENCHBENCH_TASK_PATH", str(fixtures / "sts_mini.toml"))
    monkeypatch.setenv("BENCHBENCH_CACHE", str(tmp_path / "cache"))
    from benchbench.core import registry

    monkeypatch.setattr(registry, "_REGISTRY", None)
    yield tmp_path
    registry.reset_registry()


@pytest.fixture(scope="session")
def generator_dir(tmp_path_factory):
    """A tiny masked LM with the bundled bert-base-uncased vocabulary (tiny-bert's): DiffCSE's generator."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from benchbench import tiny_bert

    d = tmp_path_factory.mktemp("generator")
    tok = tiny_bert(16, 1, 2, 32).tokenizer
    cfg = BertConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=1, num_attention_heads=2)
    cfg.intermediate_size = 32
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        BertForMaskedLM(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    return d
