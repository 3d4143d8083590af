"""Train once, reuse after: the run folder a trained encoder lives in, keyed by the training data's
hash, held under a lock while one process trains, and marked complete only once the encoder is
saved. ``benchbench run`` (``run/runner.py``) and ``train_method`` (``run/chain.py``) both train
through here, so a method trained as another's start and the same method run on its own share one
folder and train once."""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchbench.core.errors import ConfigError, call_plugin
from benchbench.store.results import ResultKey
from benchbench.store.space import naming_full_disk, tensor_bytes
from benchbench.train.context import TrainContext
from benchbench.train.setups import subsample_corpus

if TYPE_CHECKING:
    from benchbench.evaluate.adapters.base import TaskAdapter


def training_folder(root: Path, key: ResultKey) -> Path:
    """``<root>/runs/<key's folder>``: where the encoders trained for ``key``'s seed live. A folder
    made under the old (pre-injective) names is used while none of the new name exists, so encoders
    trained before are found, not trained again."""
    own = Path(root) / "runs" / key.relpath().parent
    legacy = Path(root) / "runs" / key.legacy_relpath().parent
    return legacy if not own.exists() and legacy.is_dir() else own


def train_or_reuse(
    method,
    adapter: TaskAdapter,
    ctx: TrainContext,
    plugin: str,
    seed_dir: Path,
    force: bool,
    trained: dict[str, tuple[Any, dict]],
    main: bool = True,
    corpus_path: str | None = None,
    provenance: dict[str, Any] | None = None,
    *,
    from_task: bool = False,
    meter: Callable[[], Any],
    root: Path | None = None,
) -> tuple[Any, dict]:
    """Train on the method's corpus for this task (see ``corpora.py``: the task's own sentences,
    ordered text, a general corpus, or the task's pairs), or reuse an encoder already trained on the
    SAME data with the same method, config, base model and seed (STS tasks share one corpus; a
    method with a task-independent corpus trains once for all tasks; an interrupted run resumes at
    evaluation). The folder is keyed by a hash of the training data, not the task. A stored encoder
    whose accounting names other weights than ``provenance`` (``Method.provenance``) is refused.
    ``meter`` is the energy meter (``benchbench.run.energy.Meter``, passed in by the run layer): a
    context manager whose ``result`` the training's accounting keeps as ``energy``. ``root`` is the
    output folder ``seed_dir`` lies in (``--output``; default ``seed_dir`` itself): the run folder, its
    lock, checkpoints, encoder and ``.complete`` are made through ``store.files`` against it, so a
    linked folder anywhere below it (``OUT/runs/simcse -> elsewhere``) is refused before anything is
    written."""
    from benchbench.train.corpora import training_corpus

    corpus = subsample_corpus(
        training_corpus(type(method), adapter, ctx.data, corpus_path, from_task), getattr(ctx, "setup", None), ctx.seed
    )
    data_id = (corpus.sha256 or "")[:16]
    if data_id in trained:  # trained (or loaded) by this very run: fresh even under --retrain
        enc, info = trained[data_id]
        return enc, {**info, "reused_from_task": info.get("task")}
    run_dir = seed_dir / f"train-{data_id}"
    ctx.output_dir = run_dir
    ctx.pairs = corpus.pairs
    ctx.corpus = corpus
    from benchbench.store.locks import hold

    # one training per run folder at a time (two identical runs, or two tasks sharing a corpus): the
    # second waits, then reuses the encoder the first marked complete
    root = Path(seed_dir if root is None else root)
    ctx.write_root = root  # the loop's checkpoints are checked against --output too
    lock = run_dir.parent / f".{run_dir.name}.lock"
    with hold(lock, f"run folder {run_dir}", root=root) if main else contextlib.nullcontext():
        run = _Training(method, adapter, ctx, plugin, run_dir, data_id, corpus, meter, root)
        return _train_in(run, force, trained, main, provenance)


class _Training:
    """What one training in one run folder needs (kept together so ``_train_in`` reads short)."""

    def __init__(self, method, adapter, ctx, plugin, run_dir, data_id, corpus, meter, root) -> None:
        self.method, self.adapter, self.ctx, self.plugin = method, adapter, ctx, plugin
        self.run_dir, self.data_id, self.corpus, self.meter, self.root = run_dir, data_id, corpus, meter, root


def _train_in(
    run: _Training,
    force: bool,
    trained: dict[str, tuple[Any, dict]],
    main: bool,
    provenance: dict[str, Any] | None = None,
) -> tuple[Any, dict]:
    """The body of ``train_or_reuse`` under the run folder's lock. Checkpoints are kept until the
    encoder is saved and marked complete, so a kill at any instant loses at most one interval."""
    from benchbench.encode.models import load_encoder
    from benchbench.store.files import MARKER, check_inside, is_complete, mark_complete, pinned_folder, safe_mkdirs
    from benchbench.train.checkpoint import remove_checkpoints

    method, adapter, ctx, run_dir, corpus = run.method, run.adapter, run.ctx, run.run_dir, run.corpus
    if is_complete(run_dir / "encoder") and not force:
        info = json.loads((run_dir / "encoder" / MARKER).read_text() or "{}")
        check_provenance(provenance, info, method.name, f"the stored encoder {run_dir / 'encoder'}")
        enc = load_encoder(str(run_dir / "encoder"))
        trained[run.data_id] = (enc, info)
        return enc, {**info, "reused_from_disk": True}
    if main and force:  # --retrain: the stored encoder and any checkpoint of this run are discarded
        remove_checkpoints(ctx.checkpoint_dir, run.root)  # a linked checkpoints folder is refused, not emptied
    if main and (run_dir / "encoder").exists():
        shutil.rmtree(check_inside(run_dir / "encoder", run.root))  # never through a link
    safe_mkdirs(run_dir, run.root)  # checked against --output, made through folder descriptors
    ctx.defer_checkpoint_cleanup = True  # train_loop keeps its checkpoints (and writes a last one): removed below
    t0 = time.perf_counter()
    with run.meter() as meter:
        encoder = call_plugin(
            run.plugin, method.name, f"training on task {adapter.name!r}", method.train, corpus.sentences, ctx
        )
    info = {
        "seconds": round(time.perf_counter() - t0, 3),
        "energy": meter.result,
        **ctx.accounting,
        "corpus_sentences": len(corpus.sentences),
        "train_data_sha256": corpus.sha256,
        "corpus": corpus.describe(),
        "task": adapter.name,
    }
    if corpus.pairs is not None:
        info["train_pairs"] = len(corpus.pairs)
    if main and hasattr(encoder, "save"):
        with (
            naming_full_disk(run_dir / "encoder", f"saving the {method.name} encoder", lambda: tensor_bytes(encoder)),
            pinned_folder(run_dir / "encoder", run.root) as folder,  # made and held by us: save writes in it
        ):
            encoder.save(folder)
        mark_complete(run_dir / "encoder", json.dumps(info, default=str), root=run.root)  # then checkpoints go
        remove_checkpoints(ctx.checkpoint_dir, run.root)
    trained[run.data_id] = (encoder, info)
    return encoder, info


def check_provenance(provenance: dict[str, Any] | None, stored: Any, method: str, what: str) -> None:
    """Refuse to reuse ``what`` (a stored result or encoder) when its training accounting ``stored``
    names other weights than the options name now (``Method.provenance``). A label the store does
    not hold (a record from before it was recorded) is not compared."""
    if not provenance or not isinstance(stored, dict):
        return
    for name, current in provenance.items():
        if name in stored and stored[name] != current:
            raise ConfigError(
                f"Method {method!r}: {what} was trained with {name} = {stored[name]!r}, but the options now name "
                f"{current!r}: other weights under the same option. Results are keyed by the option's text, so "
                "reusing it would report the old weights' score for the new ones. Use another --output "
                "folder for the new weights, or move the stored folder away to recompute it; nothing was "
                "changed."
            )
