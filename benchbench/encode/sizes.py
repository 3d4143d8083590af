"""Sizes checked before anything is allocated: a max length against the model's positions, and a
batch or model shape whose memory estimate exceeds the memory available.

Without these a ``--batch-size 100000`` or ``--model tiny-bert:120000:1:1:1`` grew past 6-8 GB until
something outside killed it, and a max length above the model's 512 positions failed late with a
tensor-size error. The shape comes from the name (``tiny-bert:H:L:A:I``) or the folder's
``config.json`` (no torch, nothing loaded); a hub model not on disk is checked when it loads
(``models.check_max_length``). The memory estimate is a stated rough formula, meant to catch
requests off by orders of magnitude, not to predict a run's peak.
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchbench.core.errors import ConfigError
from benchbench.encode.model_names import (
    OFFLINE_MODELS,
    PACKAGED_GGUF,
    SPLIT_ZIP_MODELS,
    TINY,
    TINY_DECODER,
    model_key,
    model_subfolders,
    split_zip_folder,
)
from benchbench.store.files import is_complete

MEMORY_ENV = "BENCHBENCH_MEMORY_LIMIT"  # bytes (or 500M, 8G): what the check compares with, instead of the machine's
BERT_VOCAB = 30522  # the bundled vocabulary of tiny-bert
BERT_POSITIONS = 512
_ALIASES = {  # config.json keys: BERT-style first, then DistilBERT's names
    "hidden": ("hidden_size", "dim", "d_model"),
    "layers": ("num_hidden_layers", "n_layers", "num_layers"),
    "heads": ("num_attention_heads", "n_heads"),
    "intermediate": ("intermediate_size", "hidden_dim", "d_ff"),
    "vocab": ("vocab_size",),
}


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int
    positions: int | None

    @property
    def parameters(self) -> int:
        """Embeddings (vocabulary and positions) plus per layer attention (4 H x H) and the
        feed-forward block (2 H x I), biases and norms (about 9 H + I)."""
        h, i = self.hidden, self.intermediate
        per_layer = 4 * h * h + 2 * h * i + 9 * h + i
        return (self.vocab + (self.positions or BERT_POSITIONS) + 2) * h + self.layers * per_layer


OFFSET_POSITION_MODELS = ("roberta", "xlm-roberta", "camembert", "mpnet", "longformer", "data2vec-text")


def model_positions(config: Any) -> int | None:
    """How many tokens the model's position embeddings cover (RoBERTa-style models reserve
    ``pad_token_id + 1`` of their ``max_position_embeddings``); None when the config does not say."""
    get = config.get if isinstance(config, dict) else lambda k: getattr(config, k, None)
    n, kind, pad = get("max_position_embeddings"), get("model_type"), get("pad_token_id")
    if not isinstance(n, int) or isinstance(n, bool):
        return None
    if kind in OFFSET_POSITION_MODELS and isinstance(pad, int):
        n -= pad + 1
    return n


def _folder_of(model: str) -> Path | None:
    """A model's folder on disk, without loading anything (None: a hub id, or not assembled yet)."""
    if os.path.isdir(model):
        return Path(model)
    key = model_key(model)
    if key in OFFLINE_MODELS:
        pkg, fn, _ = OFFLINE_MODELS[key]
        try:
            return Path(str(getattr(importlib.import_module(pkg), fn)()))
        except ImportError:
            return None
    if key in SPLIT_ZIP_MODELS:
        root = split_zip_folder(key)
        return root / key if is_complete(root) else None
    return None


def model_shape(model: str) -> Shape | None:
    """The transformer's shape from the name or its folder's config.json; None when unknown."""
    m = TINY.match(model or "")
    if m:
        h, layers, a, i = (int(x) for x in m.groups()) if m.group(1) else (32, 2, 2, 64)
        return Shape(h, layers, a, i, BERT_VOCAB, BERT_POSITIONS)
    d = TINY_DECODER.match(model or "")
    if d:  # decoder.tiny_decoder: the bundled BERT vocabulary, 512 positions
        h, layers, a, i = (int(x) for x in d.groups()[1:]) if d.group(2) else (32, 2, 2, 64)
        return Shape(h, layers, a, i, BERT_VOCAB, BERT_POSITIONS)
    if model_key(model or "") in PACKAGED_GGUF:  # known before the first de-quantisation
        return Shape(*PACKAGED_GGUF[model_key(model)].shape)
    folder = _folder_of(model) if model else None
    if folder is None:
        return None
    cfg_file = next((f for f in (s / "config.json" for s in model_subfolders(folder)[::-1]) if f.is_file()), None)
    if cfg_file is None:
        return None
    try:
        cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise ConfigError(f"Model {model!r}: {cfg_file} is not valid JSON ({e}).") from e
    dims = {k: next((cfg[n] for n in names if isinstance(cfg.get(n), int)), None) for k, names in _ALIASES.items()}
    if any(v is None for v in dims.values()):
        return Shape(0, 0, 0, 0, 0, model_positions(cfg)) if model_positions(cfg) else None
    return Shape(**dims, positions=model_positions(cfg))


def memory_estimate(shape: Shape, batch: int, length: int, training: bool) -> tuple[int, str]:
    """(bytes, the formula) in fp32 for one step at ``batch`` sequences of ``length`` tokens.
    Training: weights, gradients and two Adam moments (16 bytes a parameter); activations kept for
    the backward pass, per token and layer about 10 H + 2 I values plus 3 attention maps of A x T;
    and the B x B similarity matrix of in-batch objectives (logits, softmax, gradient). Encoding:
    the weights and one layer's activations."""
    p, h, i, a, n_layers = shape.parameters, shape.hidden, shape.intermediate, shape.heads, shape.layers
    if training:
        acts = batch * length * n_layers * (10 * h + 2 * i + 3 * a * length) + 3 * batch * batch
        return 4 * (4 * p + acts), "16 x parameters + 4 x (B x T x L x (10 H + 2 I + 3 A T) + 3 B^2) bytes"
    acts = batch * length * (4 * h + i + 2 * a * length)
    return 4 * (p + acts), "4 x (parameters + B x T x (4 H + I + 2 A T)) bytes"


def available_memory(device: str | None) -> tuple[int, str]:
    """(bytes, where the number comes from): ``BENCHBENCH_MEMORY_LIMIT``, else the GPU's free memory
    when the run uses CUDA, else the machine's available memory (/proc/meminfo's MemAvailable, which
    counts reclaimable cache; free pages elsewhere)."""
    from benchbench.core.env import env_bytes

    env = env_bytes(MEMORY_ENV, None)  # a bad value: ConfigError naming the variable
    if env is not None:
        return env, f"{MEMORY_ENV}={os.environ[MEMORY_ENV].strip()}"
    if device is None or device.startswith("cuda"):
        import torch

        if torch.cuda.is_available():
            free, _ = torch.cuda.mem_get_info(torch.device(device or "cuda"))
            return int(free), "free GPU memory"
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "available memory (/proc/meminfo)"
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "free memory (sysconf)"


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


def check_sizes(model: str, config: Any, *, trains: bool, device: str | None, encode_batch: int | None = None) -> None:
    """Refuse, before anything loads, a ``max_seq_length`` beyond the model's positions and a batch
    (training, or encoding) whose memory estimate exceeds what is available; the error names the
    numbers and the option to change."""
    shape = model_shape(model)
    if shape is None:
        return
    length = getattr(config, "max_seq_length", None)
    if isinstance(length, int) and shape.positions is not None and length > shape.positions:
        raise ConfigError(
            f"--max-seq-length {length} is above model {model!r}'s {shape.positions} positions "
            f"(max_position_embeddings); pass --max-seq-length {shape.positions} or less."
        )
    if not shape.hidden:
        return
    # no max length asked: the loaders cut at 512 at most (TransformerEncoder: the tokenizer's limit capped at
    # 512; DecoderEncoder: 512), whatever the positions (a decoder's 8,192 would ask for terabytes)
    length = length if isinstance(length, int) else min(shape.positions or BERT_POSITIONS, BERT_POSITIONS)
    batch = getattr(config, "batch_size", None) if trains else encode_batch
    batch = batch if isinstance(batch, int) and batch > 0 else 64
    need, formula = memory_estimate(shape, batch, length, training=trains)
    have, source = available_memory(device)
    if need > have:
        what = "--batch-size" if trains else "--encode-batch-size"
        raise ConfigError(
            f"Model {model!r} at batch {batch:,} x {length:,} tokens needs about {_gib(need)} to "
            f"{'train' if trains else 'encode'} ({shape.parameters:,} parameters; rough estimate: {formula}), "
            f"over the {_gib(have)} of {source}. Lower {what}, --max-seq-length or the model's size "
            f"(set {MEMORY_ENV} to compare with another limit)."
        )


def check_model_fits(name: str, shape: Shape) -> None:
    """A model whose weights alone exceed the memory available is refused before it is built."""
    need, _ = memory_estimate(shape, 0, 0, training=False)
    have, source = available_memory("cpu")
    if need > have:
        raise ConfigError(
            f"Model {name!r} has {shape.parameters:,} parameters: its fp32 weights alone take about {_gib(need)}, "
            f"over the {_gib(have)} of {source}. Choose smaller dimensions."
        )


# the papers' base model: tables label a row by the options that differ from the method's defaults as the
# paper states them, i.e. with the model-relative ones resolved for BERT-base (``report.aggregate.method_defaults``)
BERT_BASE = Shape(768, 12, 12, 3072, BERT_VOCAB, BERT_POSITIONS)


def resolve_for_model(method_cls: type, config: Any, model: str) -> Any:
    """``config`` with its model-relative defaults (``Method.model_defaults``) resolved against
    ``model``'s shape, read from its name or its folder's config.json; unchanged when that shape is
    not known here (a hub model not on disk: the plugin resolves it when the model loads). The runner,
    a study's row keys and a teacher's training folder call this one function, so all three hash the
    same values."""
    from benchbench.core.methods import resolve_model_defaults

    shape = model_shape(os.path.expanduser(model)) if model else None
    return resolve_model_defaults(method_cls, config, shape)
