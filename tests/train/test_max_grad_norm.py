"""QT, skip-thought and BSL clip gradients at a value their Config states (so the record names it)
and their training loop receives that value (not the loop's own default). Defaults: QT and
skip-thought 5.0 (their TensorFlow reference code), BSL 1.0 (no reference value)."""

from __future__ import annotations

import dataclasses

import benchbench_plugins.bsl as bsl_mod
import benchbench_plugins.qt as qt_mod
import pytest
from helpers import FIXTURES, local_plugin_workdir

from benchbench import LoopConfig, TrainContext
from benchbench.cli.main import main
from benchbench.core.methods import build_config
from benchbench.store.results import ResultStore

PLUGIN = f"""
from pathlib import Path
from benchbench import hookimpl

@hookimpl
def benchbench_register_tasks(register):
    register("mini", Path({str(FIXTURES / "sts_mini.toml")!r}))
"""


class _Stop(Exception):
    """Raised by the spy after it has seen the loop config: the training itself is not under test."""


def _spy(monkeypatch, module, seen: list, then_train: bool):
    real = module.train_loop

    def spy(obj, items, ctx, loop, **kw):
        seen.append(loop)
        if not then_train:
            raise _Stop
        return real(obj, items, ctx, loop, **kw)

    monkeypatch.setattr(module, "train_loop", spy)


@pytest.mark.parametrize(("method_cls", "default"), [(qt_mod.QT, 5.0), (qt_mod.SkipThought, 5.0), (bsl_mod.BSL, 1.0)])
def test_the_config_states_the_clipping_default(method_cls, default):
    assert dataclasses.asdict(build_config(method_cls, {}))["max_grad_norm"] == default
    # a non-default value changes the result key: it changes the numbers
    from benchbench.core.methods import config_hash

    assert config_hash(build_config(method_cls, {"max_grad_norm": "2.5"})) != config_hash(build_config(method_cls, {}))


@pytest.fixture
def workdir(tmp_path, monkeypatch, tmp_cache):
    yield from local_plugin_workdir(tmp_path, monkeypatch, PLUGIN)


def test_qt_run_records_max_grad_norm_and_the_loop_gets_it(workdir, monkeypatch):
    seen: list[LoopConfig] = []
    _spy(monkeypatch, qt_mod, seen, then_train=True)
    books = workdir / "books.txt"
    books.write_text("\n".join(f"Sentence {i} of the book {'ab'[i % 2]}{i % 5} ." for i in range(40)) + "\n")
    sets = ["encoder=bow", "emb_dim=8", "batch_size=10", "steps=1", "vocab_size=50", "max_grad_norm=2.5"]
    args = ["run", "--method", "qt", "--tasks", "mini", "--corpus", str(books)]
    assert main(args + [a for s in sets for a in ("--set", s)]) == 0
    (rec,) = ResultStore("results").records()
    assert rec["config"]["max_grad_norm"] == 2.5
    assert [lc.max_grad_norm for lc in seen] == [2.5]
    assert seen[0].batch_size == 1  # QT's loop item is one window of batch_size sentences


def test_skip_thought_loop_gets_max_grad_norm(tmp_path, monkeypatch):
    seen: list[LoopConfig] = []
    _spy(monkeypatch, qt_mod, seen, then_train=False)
    method = qt_mod.SkipThought(build_config(qt_mod.SkipThought, {"encoder": "bow", "emb_dim": "8", "steps": "1"}))
    ctx = TrainContext(model=None, seed=0, output_dir=tmp_path, progress=False)
    with pytest.raises(_Stop):
        method.train([f"sentence {i} ." for i in range(12)], ctx)
    assert seen[0].max_grad_norm == 5.0 and seen[0].batch_size == method.config.batch_size


def test_bsl_loop_gets_max_grad_norm(tmp_path, monkeypatch):
    from benchbench.core.registry import load_registry

    seen: list[LoopConfig] = []
    _spy(monkeypatch, bsl_mod, seen, then_train=False)
    cfg = build_config(
        bsl_mod.BSL,
        {"steps": "1", "batch_size": "4", "augmenter": "word-delete", "two_view": "false", "max_grad_norm": "0.25"},
    )
    ctx = TrainContext(
        model="tiny-bert:16:1:2:32", seed=0, output_dir=tmp_path, progress=False, device="cpu", registry=load_registry()
    )
    with pytest.raises(_Stop):
        bsl_mod.BSL(cfg).train([f"sentence {i} about topic {i % 3}" for i in range(8)], ctx)
    assert seen[0].max_grad_norm == 0.25
