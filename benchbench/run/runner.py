"""Orchestration: method x task x seed x setup. Resumable: a record that exists is not recomputed.

Reading order: ``run`` -> ``_run``, which resolves once what the whole run shares (``_plan``: options,
method, config and result-key hashes, base model, tasks, stores) and then, for each seed and each
task, handles one result key (``_run_task``): which splits to evaluate (``_available_splits``, then
``_splits_to_evaluate`` against the stored record, under the key's lock), the data
(``_ensure_data``), the encoder (``_encoder``: a --setup pipeline, ``train_or_reuse`` for a
training method, or a training-free method's shared encoder), the scores (``_evaluate``) and the
record (``_record``, merged into the stored one, then written and handed to the observers).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

from benchbench.core.errors import BenchbenchError, ConfigError, DataError, PluginError, call_plugin
from benchbench.core.methods import build_config, config_hash, provenance_of
from benchbench.core.registry import Registry, call_observers, get_registry, make_adapter
from benchbench.encode.backends import LOSSY_BACKENDS, check_runtime, evaluation_encoder
from benchbench.encode.cache import EmbeddingCache, default_cache_dir
from benchbench.encode.cards import zero_shot
from benchbench.encode.encoding import Embedder
from benchbench.encode.models import canonical_model_name, model_label_of
from benchbench.encode.sizes import check_sizes, resolve_for_model
from benchbench.evaluate.adapters.base import TaskAdapter
from benchbench.run.energy import Meter, total
from benchbench.store.data import DataStore, FileEntry, ensure_writable_dir
from benchbench.store.files import safe_mkdirs, sha256_file
from benchbench.store.records import new_record, refuse_non_finite
from benchbench.store.results import (
    DamagedRecord,
    ResultKey,
    ResultStore,
    key_of,
    merge,
    read_record,
)
from benchbench.train.context import TrainContext
from benchbench.train.precision import check_train_precision, training_precision
from benchbench.train.reuse import check_provenance, train_or_reuse, training_folder
from benchbench.train.setups import (  # --setup pipelines and their supervised stages' options
    PIPELINES,
    parse_setup,
    run_stages,
    split_stage_options,
    stage_configs,
    stage_configs_hash,
)

log = logging.getLogger(__name__)


@dataclass
class RunOptions:
    method: str
    tasks: str | list[str]
    model: str | None = None
    seeds: list[int] = field(default_factory=lambda: [1])
    setup: str = "unsupervised"
    overrides: dict[str, Any] = field(default_factory=dict)
    data_dir: str | None = None
    output: str = "results"
    force: bool = (
        False  # re-evaluate the requested splits (never drops other stored splits; reuses the trained encoder)
    )
    retrain: bool = (
        False  # discard the trained encoder and its checkpoints, train again, re-evaluate every stored split
    )
    splits: list[str] | None = None  # None: each task's default splits
    device: str | None = None
    cache_dir: str | None = None  # embedding cache; None: ~/.cache/benchbench/embeddings
    no_cache: bool = False
    encode_batch_size: int | None = None
    progress: bool | None = None
    eval_every: int = 0  # learning curve: score the encoder on ``eval_split`` every N training steps
    eval_split: str = "dev"
    # the task whose ``eval_split`` scores the curve (None: the task trained on); a study's held-out split,
    # e.g. "stsb" dev for tasks that have no dev split of their own (the STS tasks, TwitterPara)
    eval_task: str | None = None
    corpus: str | None = None  # --corpus: text file/folder for methods that train on ordered or general text
    # --train-task: every task is scored with the encoder trained on THIS task's unlabelled text (trained once
    # per seed and reused): a domain-adaptation study's "does adapting to X cost general similarity" columns
    train_task: str | None = None
    store_items: bool = False  # --store-items: per-item scores beside the record (benchbench.store.items)
    score: str = (
        "bi"  # pairwise tasks: "bi" (cosine of the bi-encoder's vectors) or "cross" (the method's cross-encoder)
    )
    encode_backend: str = "torch"  # evaluation runtime: torch, onnx, openvino, onnx-int8 (benchbench.encode.backends)
    encode_dtype: str = "auto"  # torch's number format for evaluation: auto (bf16 on CUDA, else fp32), fp32, bf16
    # a random-init base model (``tiny-bert:H:L:A:I``) drawn from each cell's own seed, not from seed 0: a
    # study's random-init row then varies its init over its seeds, as a trained row varies its training
    seeded_init: bool = False
    # --train-precision: auto (bf16 autocast on a bf16-capable GPU, fp32 on the CPU: every stored result's),
    # fp32 (no autocast, the GPU too), bf16 (bf16 autocast on the CPU too); not auto: part of the result key
    train_precision: str = "auto"


def process_rank() -> tuple[int, int]:
    """(rank, world size) of this process under ``accelerate launch``/``torchrun`` (their RANK and
    WORLD_SIZE variables), (0, 1) for a plain run. Every rank trains (the loop spreads each batch
    over them); only rank 0 saves the encoder, evaluates and writes results."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


@dataclass
class RunReport:
    records: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[ResultKey] = field(default_factory=list)  # already stored (resume)
    missing: dict[str, list[str]] = field(default_factory=dict)  # task -> missing data files
    unavailable: dict[str, list[str]] = field(default_factory=dict)  # task -> requested splits it does not have
    tasks: list[str] = field(default_factory=list)
    requested: list[str] = field(default_factory=list)
    rank: int = 0  # a non-zero rank of a multi-process run trains only; rank 0 reports
    quarantined: list[tuple[str, str, str]] = field(default_factory=list)  # (damaged file, moved to, why)


def run(opts: RunOptions, registry: Registry | None = None) -> RunReport:
    """Train and evaluate; each result key is handled under its lock (``benchbench.store.locks``: a run
    waits for another that holds the same key or run folder, then reuses what it stored)."""
    import contextlib

    with contextlib.ExitStack() as held:
        return _run(opts, registry, held)


@dataclass
class _RunPlan:
    """What one run resolves once, before any training: the method, its config and result-key
    hashes, the base model's label, the tasks, and where data, embeddings and records live. Every
    (seed, task) step reads it; only ``shared_encoder`` changes (a training-free method's encoder,
    built at its first use and then shared by every seed and task)."""

    opts: RunOptions
    reg: Registry
    method_cls: type
    plugin: str  # the plugin that registered the method: named in every error it causes
    setup: Any  # parsed --setup (benchbench/train/setups.py)
    seeds: list[int]
    config: Any
    stages: dict[str, Any]  # supervised stage kind -> its SupervisedConfig (--set supervised.X=...)
    chash: str  # config hash in the result key (with --corpus and --score cross folded in)
    train_chash: str  # config hash of the training folder (how pairs are scored later is not in it)
    model: str
    model_label: str
    requested: list[str]
    task_names: list[str]
    explicit: set[str]  # tasks named directly (not through a suite): their problems are errors, not skips
    data: DataStore
    cache: EmbeddingCache | None
    store: ResultStore
    rank: int
    method: Any
    provenance: dict[str, Any]  # the method's labels of weights its options name (Method.provenance)
    shared_encoder: Any = None
    shared_seed: int | None = None  # the seed ``shared_encoder`` was drawn for (``seeded_init``)

    def key(self, seed: int, task: str, version: Any) -> ResultKey:
        """The result record's key."""
        o = self.opts
        return ResultKey(o.method, self.chash, self.model_label, o.setup, seed, task, version)

    def seed_dir(self, seed: int, task: str) -> Path:
        """The folder trained encoders of this seed live under (``runs/<key without task version>``);
        ``train_or_reuse`` adds a ``train-<data hash>`` folder per training corpus (``training_folder``)."""
        o = self.opts
        return training_folder(
            self.store.root, ResultKey(o.method, self.train_chash, self.model_label, o.setup, seed, task)
        )


def _run(opts: RunOptions, registry: Registry | None, held) -> RunReport:
    """The run, top to bottom: resolve everything that does not depend on the seed or task
    (``_plan``), then for each seed and each task one ``_run_task`` under that result key's lock.
    ``held`` holds the current key's lock; it is released only when the next key starts."""
    plan = _plan(opts, registry)
    report = RunReport(tasks=plan.task_names, requested=plan.requested, rank=plan.rank)
    for seed in plan.seeds:
        # an encoder trained under one seed is never reused for another (its data hash is the same)
        trained: dict[str, tuple[Any, dict]] = {}  # training-data hash -> (encoder, accounting)
        for task in plan.task_names:
            held.close()  # the previous key's lock
            _run_task(plan, seed, task, trained, report, held)
    _refuse_empty_run(plan, report)
    return report


# ---- once per run ---------------------------------------------------------------------------------
def _plan(opts: RunOptions, registry: Registry | None) -> _RunPlan:
    """Check the options and resolve what the whole run shares. The order is the order of the
    errors a user sees: unknown method, bad --setup, bad numeric options, bad --set, unknown task,
    unwritable --output; all before any data is read or anything is trained."""
    reg = registry or get_registry()
    method_cls = reg.method(opts.method)
    plugin = reg.owner.get(("methods", opts.method), "?")
    setup = parse_setup(opts.setup)  # ConfigError for an unknown setup / bad @corpus=N, @labelled=N
    seeds = _checked_seeds(opts)
    check_runtime(opts.encode_backend, opts.encode_dtype)  # before any training: a missing runtime fails now
    check_train_precision(opts.train_precision)
    fields = {f.name for f in dataclasses.fields(method_cls.Config)}
    method_overrides, stage_options = split_stage_options(opts.overrides, fields, setup)
    model, model_label = _model_and_label(method_cls, opts)
    # model-relative defaults (InfoCSE's frozen layers, WhitenedCSE's groups) resolved before hashing: the key
    # and the record name the value that trains
    config = resolve_for_model(method_cls, build_config(method_cls, method_overrides), model)
    stages = stage_configs(setup, stage_options)
    trains = bool(method_cls.trains) or str(setup) != "unsupervised"  # whether a precision can change anything
    chash, train_chash = _config_hashes(config, opts, stage_configs_hash(stages), trains)
    # max length against the model's positions, memory estimate against the machine: before anything loads
    check_sizes(model, config, trains=method_cls.trains, device=opts.device, encode_batch=opts.encode_batch_size)
    requested = [n.strip() for n in opts.tasks.split(",")] if isinstance(opts.tasks, str) else list(opts.tasks)
    task_names = reg.expand(requested)
    if opts.train_task:
        try:
            reg.task(opts.train_task)
        except BenchbenchError as e:  # the registry's error names the closest known tasks
            raise ConfigError(f"--train-task: {e}") from None
        if opts.corpus or str(setup) != "unsupervised":
            raise ConfigError(
                f"--train-task {opts.train_task} names the text every task's encoder trains on; it does not "
                "combine with --corpus or a --setup other than unsupervised."
            )
    data = DataStore(opts.data_dir)
    cache, store = _open_stores(opts)
    rank, _ = process_rank()
    method = method_cls(config)
    provenance = call_plugin(plugin, opts.method, "labelling the weights its options name", provenance_of, method)
    return _RunPlan(
        opts=opts,
        reg=reg,
        method_cls=method_cls,
        plugin=plugin,
        setup=setup,
        seeds=seeds,
        config=config,
        stages=stages,
        chash=chash,
        train_chash=train_chash,
        model=model,
        model_label=model_label,
        requested=requested,
        task_names=task_names,
        explicit={n for n in requested if n in reg.tasks},
        data=data,
        cache=cache,
        store=store,
        rank=rank,
        method=method,
        provenance=provenance,
    )


def _checked_seeds(opts: RunOptions) -> list[int]:
    """Validate the numeric options; return the seeds in order, each once (--seeds 1,1 is one seed)."""
    if opts.eval_every < 0:
        raise ConfigError(f"--eval-every must be >= 0 (0: no learning curve; got {opts.eval_every}).")
    seeds = list(dict.fromkeys(int(s) for s in opts.seeds))
    if not seeds:
        raise ConfigError("--seeds is empty: give at least one seed, e.g. --seeds 1 or --seeds 1,2,3.")
    if opts.encode_batch_size is not None and opts.encode_batch_size < 1:
        raise ConfigError(
            f"--encode-batch-size must be >= 1 (got {opts.encode_batch_size}); omit it for the encoder's default."
        )
    return seeds


def with_train_task(chash: str, train_task: str | None) -> str:
    """The config hash of a run trained on ``train_task``'s text (``--train-task``): another training, so
    another key; unchanged without one. The study view computes its rows' keys with this too."""
    import hashlib

    return hashlib.sha256(f"{chash}|train_task={train_task}".encode()).hexdigest()[:12] if train_task else chash


def with_train_precision(chash: str, precision: str) -> str:
    """The config hash of a run trained in ``precision`` (``--train-precision``): another training, so
    another key; unchanged at "auto", the precision every record stored before the option was trained
    in. The study view computes its rows' keys with this too."""
    import hashlib

    if precision == "auto":
        return chash
    return hashlib.sha256(f"{chash}|train_precision={precision}".encode()).hexdigest()[:12]


def _config_hashes(config: Any, opts: RunOptions, stages_hash: str = "", trains: bool = True) -> tuple[str, str]:
    """(result-key hash, training-folder hash). A non-default --corpus, --train-precision (``trains``: a
    run that trains) or non-default supervised stage options change both (other training); --score
    cross changes only the result key (other scores from the same trained encoder)."""
    import hashlib

    chash = config_hash(config)
    if stages_hash:
        chash = hashlib.sha256(f"{chash}|stages={stages_hash}".encode()).hexdigest()[:12]
    if opts.corpus:
        chash = hashlib.sha256(f"{chash}|corpus={Path(opts.corpus).resolve()}".encode()).hexdigest()[:12]
    chash = with_train_task(chash, opts.train_task)
    chash = with_train_precision(chash, opts.train_precision if trains else "auto")
    train_chash = chash
    if opts.score == "cross":
        chash = hashlib.sha256(f"{chash}|score=cross".encode()).hexdigest()[:12]
    if opts.encode_backend in LOSSY_BACKENDS:  # lossy vectors (int8) never stand in for the exact result
        chash = hashlib.sha256(f"{chash}|encode={opts.encode_backend}".encode()).hexdigest()[:12]
    return chash, train_chash


def _model_and_label(method_cls: type, opts: RunOptions) -> tuple[str, str]:
    """(base model to load, its label in the result key). A method with a ``fixed_model`` (e.g.
    BM25, GloVe averages) has no base model: --model is ignored with a warning. A local folder is
    labelled by what it holds (``local_model_label``), not where it is."""
    if getattr(method_cls, "fixed_model", None):
        if opts.model:
            log.warning("method %s uses no base model; --model %s ignored", opts.method, opts.model)
        return "", method_cls.fixed_model
    model = opts.model or method_cls.default_model or ""
    return model, model_label_of(model) if model else "-"


def _open_stores(opts: RunOptions) -> tuple[EmbeddingCache | None, ResultStore]:
    """(embedding cache or None, result store). A read-only or full output disk is an error now,
    not after the work; an unwritable cache only costs time, so the run goes on without it."""
    # --force re-encodes: the cache is rewritten, never read, for this run's texts
    cache = None if opts.no_cache else EmbeddingCache(opts.cache_dir or default_cache_dir(), refresh=opts.force)
    ensure_writable_dir(opts.output, "--output (result records and trained encoders)")
    if cache is not None:
        try:
            ensure_writable_dir(cache.root, "embedding cache (--cache-dir / BENCHBENCH_CACHE)")
        except DataError as e:
            log.warning("%s; running without the embedding cache", e)
            cache = None
    return cache, ResultStore(opts.output)


def _refuse_empty_run(plan: _RunPlan, report: RunReport) -> None:
    """A run in which every task was skipped for lack of data is an error (exit code != 0), not an
    empty table: it names each task's missing files and the data folder looked in."""
    if plan.rank == 0 and report.missing and not report.records:
        raise DataError(
            f"Nothing was evaluated: every task lacks data files under "
            f"{plan.data.data_dir or '(no data dir set: --data-dir / BENCHBENCH_DATA)'}: "
            + "; ".join(f"{t}: {', '.join(m[:3])}{' ...' if len(m) > 3 else ''}" for t, m in report.missing.items())
            + ". Put the files there (see `benchbench list tasks` and the task specs) or choose other tasks."
        )


# ---- once per (seed, task) ------------------------------------------------------------------------
def _run_task(
    plan: _RunPlan, seed: int, task: str, trained: dict[str, tuple[Any, dict]], report: RunReport, held
) -> None:
    """One result key: plan the splits (what the stored record lacks), take the key's lock (kept in
    ``held`` until the record is written), ensure the data, train or reuse the encoder, evaluate,
    store. Returns early, adding to ``report``, when there is nothing to do or the task is skipped."""
    opts = plan.opts
    adapter = make_adapter(plan.reg, task, plan.data)
    key = plan.key(seed, task, adapter.spec.version)
    splits = _available_splits(adapter, task, opts, task in plan.explicit, report)
    if splits is None:
        return
    if plan.rank == 0:
        held.enter_context(plan.store.lock(key))  # until this key's record is written
        plan.store.clean_stale(key)
    existing = _stored_record(plan, key, report)
    if existing is not None and _data_changed(plan, adapter, existing):
        existing = None  # computed from other data: every split is evaluated again and the record replaced
    if existing is None:
        _note_other_weights(plan, key)
    else:
        check_provenance(
            plan.provenance, existing.get("train"), opts.method, f"the stored result {plan.store.path(key)}"
        )
        _check_items(plan, existing, report)
        splits = _splits_to_evaluate(existing, splits, adapter, opts)
        if not splits:
            report.records.append(existing)
            report.skipped.append(key)
            return
    if not _ensure_data(plan, adapter, task, splits, report):
        return
    if plan.rank == 0:  # the record's own folder (linked, read-only): refused now, not after training
        folder = safe_mkdirs(plan.store.path(key).parent, plan.store.root)  # nothing made outside --output
        ensure_writable_dir(folder, f"--output: the folder of this run's {task!r} record")
    ctx = _train_context(plan, seed, task, adapter)
    with training_precision(opts.train_precision):  # every train_loop of this training (make_accelerator)
        got = _encoder(plan, adapter, ctx, seed, task, trained)
    if got is None:
        return  # a non-zero rank only trains: rank 0 evaluates and stores
    encoder, train_info = got
    if train_info is not None:  # the precision asked; the loop's own ``mixed_precision`` says what it ran in
        train_info["train_precision"] = opts.train_precision
    scoring, encode_info = evaluation_encoder(
        _scoring_encoder(encoder, opts.score, opts.method), opts.encode_backend, opts.encode_dtype, opts.device
    )
    embedder = Embedder(
        scoring,
        cache=plan.cache,
        batch_size=opts.encode_batch_size,
        progress=opts.progress,
        owner=f"method {opts.method!r} (plugin {plan.plugin!r})",
    )
    t1 = time.perf_counter()
    with Meter() as meter:  # codecarbon, offline (benchbench.run.energy); None and why without it
        split_results, items = _evaluate(plan, adapter, embedder, task, splits)
    record = _record(plan, seed, task, adapter, encoder, embedder, split_results, train_info, t1, report)
    train_energy = (train_info or {}).get("energy")
    record["energy"] = {"eval": meter.result, "train": train_energy, "total": total(meter.result, train_energy)}
    record["kg_co2_emissions"] = record["energy"]["total"]["kg_co2_emissions"]
    record["encode"] = encode_info  # the evaluation backend and number format (benchbench.encode.backends)
    for s in split_results:
        record["evaluated"][s]["encode"] = encode_info
    record = merge(existing, record)  # keeps every stored split this run did not evaluate
    refuse_non_finite(split_results, task, opts.method, plan.plugin)
    plan.store.write(record, items=items)
    call_observers(record, plan.reg)  # the run's own registry: a registry passed to run() has its own observers
    report.records.append(record)


def _file_sha256(plan: _RunPlan, name: str) -> str | None:
    """The sha256 of data file ``name`` as it is now; None when it is not here (or the name, read from a
    stored record, is not a data path): then it cannot be compared."""
    try:
        path = plan.data.locate(name)
    except DataError:
        return None
    return sha256_file(path) if path is not None else None


def _stored_record(plan: _RunPlan, key: ResultKey, report: RunReport) -> dict | None:
    """The stored record of ``key``, or None. A damaged one (truncated, conflict markers, edited, or
    another key's) is moved to the store's quarantine folder with its per-item files, named in a
    warning and in ``report.quarantined``, and recomputed; a record of a newer schema is an error
    (it is not ours to replace). Only rank 0 moves files."""
    try:
        return plan.store.load(key) if plan.store.exists(key) else None
    except DamagedRecord as e:
        if not e.recoverable:
            raise
        if plan.rank != 0:
            return None
        moved = plan.store.quarantine(e.path, e.why)
        report.quarantined.append((str(e.path), str(moved), e.why))
        log.warning("%s. Moved it (and its per-item files) to %s; recomputing it.", e, moved)
        return None


def _data_changed(plan: _RunPlan, adapter: TaskAdapter, existing: dict) -> bool:
    """Whether ``existing`` was computed from other data than the task has now. The result key names
    the model (a local folder by its files' hash) but not the data, so a record is reused only while
    each data fingerprint it stored is the current one: an HF copy's (computed from its files when the
    spec gives none: its rows changed and the stored 3.44 was served for a true -3.44), a spec file's
    declared sha256, or an undeclared file's sha256. Files the spec pins are verified when read."""
    stored = existing.get("data") or {}
    hf = getattr(adapter, "hf", None)
    changed = []
    for name, was in stored.items():
        if hf is not None and name == hf.key:
            now = hf.fingerprint()
        elif not name.startswith("hf:"):  # a data file, declared in the spec or found through its params
            entry = adapter.spec.files.get(name)
            now = entry.sha256 if entry is not None and entry.sha256 else _file_sha256(plan, name)
        else:
            continue
        if now is not None and now != was:
            changed.append(f"{name} (was {str(was)[:16]}, now {str(now)[:16]})")
    if changed:
        log.warning(
            "task %s: the stored result %s was computed from other data than the task has now: %s. "
            "Evaluating it again; the new record replaces it.",
            adapter.name,
            plan.store.path(key_of(existing)),
            "; ".join(changed),
        )
    return bool(changed)


def _check_items(plan: _RunPlan, existing: dict, report: RunReport) -> None:
    """The per-item files ``existing`` names must be the ones written with it (a paired bootstrap on a
    truncated or swapped file would be wrong). A damaged one is named; under --store-items it is
    moved to quarantine and its split is redone (dropped from ``existing["items"]``, which
    ``_splits_to_evaluate`` reads), otherwise the warning says how to recompute it."""
    for split, problem in plan.store.items_problems(existing).items():
        if not (plan.opts.store_items and plan.rank == 0):
            log.warning(
                "per-item scores, split %s: %s; recompute with --store-items --split %s.", split, problem, split
            )
            continue
        path = plan.store.path(key_of(existing)).parent / existing["items"][split]
        moved = plan.store.quarantine(path, problem) if path.is_file() else None
        if moved:
            report.quarantined.append((str(path), str(moved), problem))
        log.warning(
            "per-item scores, split %s: %s; %srecomputing them.", split, problem, f"moved to {moved}; " if moved else ""
        )
        for name in ("items", "items_sha256"):
            (existing.get(name) or {}).pop(split, None)


def _note_other_weights(plan: _RunPlan, key: ResultKey) -> None:
    """A local model whose files changed gets a new label, hence a new result: say so when the store
    holds this key for other weights of the same folder name (or, from before labels, for the
    folder's path), so a user who expected the old score to resume knows why it did not, and that
    the old record is kept."""
    import dataclasses

    if not plan.model or not os.path.isdir(plan.model):
        return
    name = plan.model_label.rpartition("@")[0]
    by_path = dataclasses.replace(key, model=canonical_model_name(plan.model))  # how keys named it before
    earlier = [plan.store.path(by_path)] if plan.store.exists(by_path) else []
    method_dir, tail = plan.store.root / key.relpath().parts[0], key.relpath().parts[2:]
    for other in sorted(method_dir.glob("*/" + "/".join(glob_escape(t) for t in tail))):
        try:
            label = (read_record(other) or {}).get("model", "")
        except DamagedRecord:
            continue
        if label.rpartition("@")[0] == name and label != plan.model_label:
            earlier.append(other)
    for path in earlier:
        log.warning(
            "model folder %s: its files are not those %s was computed from (now %s): evaluating them as "
            "a new result; the earlier record is kept.",
            plan.model,
            path,
            plan.model_label,
        )


def _available_splits(
    adapter: TaskAdapter, task: str, opts: RunOptions, explicit: bool, report: RunReport
) -> list[str] | None:
    """The splits asked for (--split, else the task's defaults) that the task has. A split the task
    lacks is an error for a task named directly, and noted in ``report.unavailable`` for a task that
    came through a suite. None: none of them exists, so the task is skipped."""
    splits = list(opts.splits or adapter.spec.default_splits)
    if explicit:
        for s in splits:
            adapter.check_split(s)
    lacking = [s for s in splits if s not in adapter.spec.splits]
    if lacking:
        report.unavailable[task] = lacking
        splits = [s for s in splits if s in adapter.spec.splits]
        if not splits:
            return None
    return splits


def _splits_to_evaluate(existing: dict, splits: list[str], adapter: TaskAdapter, opts: RunOptions) -> list[str]:
    """Resume: of ``splits``, those the stored record lacks. --force re-evaluates all of them;
    --retrain (a new encoder) re-scores every stored split as well, never dropping one; with
    --store-items a stored split without its per-item file is redone. Empty: nothing to do."""
    stored = list(existing.get("splits", {}))
    if opts.retrain:
        return splits + [s for s in stored if s not in splits and s in adapter.spec.splits]
    if not opts.force:
        with_items = existing.get("items") or {}
        return [s for s in splits if s not in stored or (opts.store_items and s not in with_items)]
    return splits


def _ensure_data(plan: _RunPlan, adapter: TaskAdapter, task: str, splits: list[str], report: RunReport) -> bool:
    """Make the splits' data files present (downloading those with a URL when allowed). False: the
    task is skipped and named in ``report.missing`` (offline, a suite's task without data must not
    stop the run); for a task named directly the missing files are an error saying where to put them."""
    data = plan.data
    missing = sorted({f for s in splits for f in adapter.missing_files(s)})
    failed: list[str] = []
    if missing and _downloadable(adapter, missing, data):
        missing, failed = _download(adapter, missing, data)
    if not missing:
        return True
    if task in plan.explicit:
        raise DataError(
            f"Task {task!r} cannot run: missing data files {missing} under "
            f"{data.data_dir or '(no data dir set: --data-dir / BENCHBENCH_DATA)'}.\n"
            + data.missing_help([adapter.spec.files.get(m, FileEntry(m)) for m in missing])
            + "".join(f" {e}" for e in failed)
        )
    report.missing[task] = missing
    log.warning("task %s skipped: missing %s", task, missing)
    return False


def _train_context(plan: _RunPlan, seed: int, task: str, adapter: TaskAdapter) -> TrainContext:
    """The context the method trains with (``train_or_reuse`` later points ``output_dir`` at the
    training folder and sets the corpus); with --eval-every, the learning-curve monitor."""
    opts = plan.opts
    ctx = TrainContext(
        model=plan.model,
        seed=seed,
        output_dir=plan.store.root,
        task=task,
        device=opts.device,
        data=plan.data,
        registry=plan.reg,
        progress=opts.progress if opts.progress is not None else True,
        init_seed=seed if opts.seeded_init else None,
    )
    if opts.eval_every and plan.method_cls.trains:
        _attach_curve(ctx, _curve_adapter(plan, adapter), opts, plan.data)
    return ctx


def _encoder(
    plan: _RunPlan, adapter: TaskAdapter, ctx: TrainContext, seed: int, task: str, trained: dict[str, tuple[Any, dict]]
) -> tuple[Any, dict | None] | None:
    """(encoder, training accounting or None) to evaluate, or None on a non-zero rank, which only
    trains. Three cases: a --setup stage pipeline around the method's training; a method that
    trains (``train_or_reuse``: train, or reuse the encoder already trained on the same data);
    a training-free method, whose one encoder serves every seed and task of the run."""
    opts, method_cls, rank = plan.opts, plan.method_cls, plan.rank
    t0 = time.perf_counter()
    if str(plan.setup) != "unsupervised":
        return _encoder_by_stages(plan, adapter, ctx, seed, task, trained, t0)
    if method_cls.trains:
        encoder, train_info = train_or_reuse(
            plan.method,
            make_adapter(plan.reg, opts.train_task, plan.data) if opts.train_task else adapter,
            ctx,
            plan.plugin,
            plan.seed_dir(seed, task),
            opts.retrain,
            trained,
            main=rank == 0,
            corpus_path=opts.corpus,
            provenance=plan.provenance,
            meter=Meter,
            root=plan.store.root,
            from_task=bool(opts.train_task),
        )
        train_info.setdefault("seconds", time.perf_counter() - t0)
        return (encoder, train_info) if rank == 0 else None
    if rank != 0:
        return None
    if plan.shared_encoder is None or (opts.seeded_init and plan.shared_seed != seed):  # one init per seed
        plan.shared_encoder = call_plugin(plan.plugin, opts.method, "building its encoder", plan.method.train, [], ctx)
        plan.shared_seed = seed
    return plan.shared_encoder, None


def _encoder_by_stages(
    plan: _RunPlan,
    adapter: TaskAdapter,
    ctx: TrainContext,
    seed: int,
    task: str,
    trained: dict[str, tuple[Any, dict]],
    t0: float,
) -> tuple[Any, dict]:
    """--setup other than unsupervised: ``run_stages`` (benchbench/train/setups.py) applies the setup's
    stages in order; its ``target`` stage is the method's usual training (or, for a training-free
    method, its encoder, built afresh)."""
    from benchbench.encode.models import load_encoder

    opts, method_cls = plan.opts, plan.method_cls
    seed_dir = plan.seed_dir(seed, task)
    ctx.setup = plan.setup

    def target() -> tuple[Any, dict | None]:
        if method_cls.trains:
            return train_or_reuse(
                plan.method,
                adapter,
                ctx,
                plan.plugin,
                seed_dir,
                opts.retrain,
                trained,
                main=plan.rank == 0,
                corpus_path=opts.corpus,
                meter=Meter,
                root=plan.store.root,
            )
        return call_plugin(plan.plugin, opts.method, "building its encoder", plan.method.train, [], ctx), None

    encoder, train_info = run_stages(
        plan.setup, ctx, adapter, target, load_encoder, seed_dir, cfg=plan.stages, root=plan.store.root
    )
    train_info.setdefault("seconds", time.perf_counter() - t0)
    return encoder, train_info


def _evaluate(
    plan: _RunPlan, adapter: TaskAdapter, embedder: Embedder, task: str, splits: list[str]
) -> tuple[dict[str, dict], dict[str, Any]]:
    """({split: result dict}, {split: per-item scores} when --store-items). An adapter's own
    exception becomes a PluginError naming the task, its evaluation protocol, plugin and split."""
    split_results: dict[str, dict] = {}
    items: dict[str, Any] = {}
    for s in splits:
        try:
            evaluated = adapter.evaluate(embedder, s)
            split_results[s] = evaluated.to_dict()
            if plan.opts.store_items and evaluated.items is not None:
                items[s] = evaluated.items
        except BenchbenchError:
            raise
        except Exception as e:
            raise PluginError(
                f"Task {task!r} (adapter {adapter.spec.kind!r}, plugin "
                f"{plan.reg.owner.get(('tasks', task), '?')!r}) failed on split {s!r}: {type(e).__name__}: {e}"
            ) from e
    return split_results, items


def _record(
    plan: _RunPlan,
    seed: int,
    task: str,
    adapter: TaskAdapter,
    encoder: Any,
    embedder: Embedder,
    split_results: dict[str, dict],
    train_info: dict | None,
    t1: float,
    report: RunReport,
) -> dict[str, Any]:
    """The new record (schema in docs/results.md): the scores with what this run knows of them
    (config, data files used, training, zero-shot status); ``store.records.new_record`` adds the
    provenance every record carries."""
    opts, data = plan.opts, plan.data
    fields = {
        "method": opts.method,
        "plugin": plan.plugin,
        "config": dataclasses.asdict(plan.config),
        "config_hash": plan.chash,
        "model": plan.model_label,
        "setup": opts.setup,
        "seed": seed,
        "task": task,
        "task_version": adapter.spec.version,
        "task_kind": adapter.spec.kind,
        "train": train_info,
        "encoder_fingerprint": getattr(encoder, "fingerprint", None),
        "transductive": bool(getattr(plan.method_cls, "transductive", False)),
        "scored_by": "cross" if embedder.has_cross_encoder else "bi",
        "data": {k: v for k, v in data.used.items() if k in adapter.spec.files or k.startswith(_prefix(adapter))}
        | {k: data.used[k] for k in sorted(getattr(adapter, "files_read", ())) if k in data.used},
        "unavailable_splits": report.unavailable.get(task, []),
        **({"init_seed": seed} if opts.seeded_init else {}),  # the random init's draw (absent: seed 0)
        **_zero_shot(plan, task, adapter, train_info),
    }
    return new_record(fields, split_results, t1, opts.device)


def _zero_shot(plan: _RunPlan, task: str, adapter: TaskAdapter, train_info: dict | None) -> dict[str, Any]:
    """The record's ``zero_shot``, ``contamination`` and ``model_card`` fields
    (``benchbench.encode.cards``): the base model's card, what this run trained it on (its corpus,
    the setup's supervised stages) and the other base models it trained from, against the sources
    the task's spec names."""
    info = train_info or {}
    start = info.get("start")
    models = start.get("models") if isinstance(start, dict) else None
    return zero_shot(
        plan.model_label,
        task,
        adapter.spec.sources,
        corpus=info.get("corpus") if isinstance(info.get("corpus"), dict) else None,
        task_train=adapter.spec.train,
        stages=[s for s in PIPELINES.get(getattr(plan.setup, "name", ""), ()) if s != "target"],
        also_models=[m for m in models or [] if isinstance(m, str)],
    )


def _scoring_encoder(encoder: Any, score: str, method: str) -> Any:
    """``--score``: a two-encoder result (it has ``bi_encoder``, e.g. Trans-Encoder) is scored by its
    bi-encoder unless ``cross`` is asked; a single pair scorer (BM25) is scored as it is."""
    if score not in ("bi", "cross"):
        raise ConfigError(f"--score {score!r}: expected 'bi' or 'cross'.")
    if score == "cross" and not callable(getattr(encoder, "score_pairs", None)):
        raise ConfigError(
            f"--score cross: method {method!r} returned no cross-encoder (no score_pairs); use --score bi."
        )
    if score == "bi" and getattr(encoder, "bi_encoder", None) is not None:
        return encoder.bi_encoder
    return encoder


def _curve_adapter(plan: _RunPlan, adapter: TaskAdapter) -> TaskAdapter:
    """The task ``--eval-task`` names (its own adapter), or the task trained on."""
    name = plan.opts.eval_task
    if not name or name == adapter.name:
        return adapter
    try:
        return make_adapter(plan.reg, name, plan.data)
    except BenchbenchError as e:
        raise ConfigError(f"--eval-task {name!r}: {e}") from None


def _attach_curve(ctx: TrainContext, adapter: TaskAdapter, opts: RunOptions, data: DataStore) -> None:
    """``--eval-every N``: every N optimizer steps the encoder as it stands is scored on the task's
    ``--eval-split`` (default dev; never silently another split) with no embedding cache (the
    weights change between points). The curve is stored in the record's ``train.monitor``; it
    selects nothing: the stored result is always the encoder at the end of the budget."""
    split = opts.eval_split
    if split not in adapter.spec.splits:
        raise ConfigError(
            f"--eval-every: task {adapter.name!r} has no {split!r} split to score the learning curve on "
            f"(its splits: {', '.join(adapter.spec.splits)}); pass --eval-split."
        )
    missing = adapter.missing_files(split)
    if missing:
        raise DataError(
            f"--eval-every: task {adapter.name!r} lacks the files of its {split!r} split: {missing} under "
            f"{data.data_dir or '(no data dir set)'}."
        )

    def score(step: int, encoder) -> dict[str, float]:
        result = adapter.evaluate(
            Embedder(encoder, cache=None, batch_size=opts.encode_batch_size, progress=False), split
        )
        where = f"{adapter.name}:{split}" if opts.eval_task else split
        return {f"{where}/{result.main_metric}": result.main_score}

    # monitor_start: the curve's step-0 point, the start as the method built it, before any update
    ctx.monitor, ctx.monitor_every, ctx.monitor_start = score, opts.eval_every, score


def _prefix(adapter: TaskAdapter) -> str:
    return adapter.param("root", "\0")


def _downloadable(adapter: TaskAdapter, missing: list[str], data: DataStore) -> bool:
    return data.allow_download and all(adapter.spec.files.get(m) and adapter.spec.files[m].url for m in missing)


def _download(adapter: TaskAdapter, missing: list[str], data: DataStore) -> tuple[list[str], list[str]]:
    """Fetch missing files before evaluating; returns (files still missing, download errors)."""
    still, errors = [], []
    for rel in missing:
        try:
            data.fetch(adapter.spec.files[rel])
        except DataError as e:
            still.append(rel)
            errors.append(str(e))
    return still, errors
