"""Shared pieces of the training-throughput benches (``tsdae_throughput.py``, ``study_train_throughput.py``):
the training text, a model folder both libraries load, benchbench's objective beside sentence-transformers'
loss with the same weights, one timed optimizer step, interleaved timing, and FLOPs by FlopCounterMode.

A "step" everywhere here is what a training loop does per batch: tokenise, forward, backward, global-norm
clipping at 1.0 (benchbench's loop and the HF Trainer under ``SentenceTransformerTrainer`` both clip there),
and a fused AdamW update (both loops' optimizer). Data loading and noise are outside the clock on both
sides: the batches are made before timing.
"""

from __future__ import annotations

import copy
import os
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch


def load_sentences(path: str | None, n: int) -> list[str]:
    """The first ``n`` non-empty lines of ``path`` (default: ``$BENCHBENCH_DATA``'s Wikipedia sentences)."""
    if path is None:
        root = os.environ.get("BENCHBENCH_DATA")
        if not root:
            sys.exit("set BENCHBENCH_DATA or pass --corpus FILE (one sentence per line)")
        path = os.path.join(root, "corpora", "wiki", "wiki_sentences.txt")
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(line.strip())
            if len(out) >= n:
                break
    return out


def study_text(name: str) -> list[str]:
    """All sentences of one core study's training text: ``wiki`` (generic-text-minilm: the STS tasks'
    Wikipedia sample) or ``twitterpara`` (domain-adaptation-minilm: the task's own tweets, through its
    adapter as a run reads them); any other name is a file with one sentence a line."""
    if name == "wiki":
        return load_sentences(None, 10**9)
    if name == "twitterpara":
        from benchbench.core.registry import get_registry, make_adapter
        from benchbench.store.data import DataStore

        return make_adapter(get_registry(), "twitterpara", DataStore(None)).train_sentences()
    return load_sentences(name, 10**9)


def model_dir(name: str, tmp: str) -> str:
    """A plain HF/sentence-transformers folder both libraries can load (tiny-bert is written out)."""
    from benchbench.encode.models import load_encoder, resolve_model_path

    if name.startswith("tiny-bert"):
        load_encoder(name).save(tmp)
        return tmp
    return resolve_model_path(name)


def to_device(features: dict, device: torch.device) -> dict:
    return {k: v.to(device) if hasattr(v, "to") else v for k, v in features.items()}


@dataclass
class Pair:
    """One method's two implementations on the same weights: ``ref`` (sentence-transformers' loss module,
    whose ``ref_loss(batch)`` tokenises with the ST model) and ``ours`` (benchbench's Objective, with
    ``our_loss(objective, batch)``, so a copy of the objective can be trained beside it)."""

    ref: torch.nn.Module
    ref_loss: Callable[[Any], torch.Tensor]
    ours: torch.nn.Module
    our_loss: Callable[[torch.nn.Module, Any], torch.Tensor]
    make_batches: Callable[[list[str], int, int], list[Any]]  # (sentences, batch size, seed) -> batches
    n_sentences: Callable[[Any], int] = len


def tsdae_pair(
    path: str,
    max_seq_length: int | None,
    noise_ratio: float = 0.6,
    device: torch.device | str = "cpu",
    *,
    group_by_length: bool = False,
    sparse_embedding_grad: bool | None = None,
) -> Pair:
    """TSDAE: sentence-transformers' ``DenoisingAutoEncoderLoss`` (CLS pooling, tied decoder) and benchbench's
    ``TSDAEObjective`` with the reference's decoder weights. A batch is ``(noisy, clean)``: the deletion
    noise is drawn once, before timing, so both sides read the same corrupted sentences."""
    from benchbench_plugins.tsdae import TSDAEObjective, build_decoder
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import DenoisingAutoEncoderLoss
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    from benchbench.encode.models import load_encoder
    from benchbench.train.noise import WordNoise

    device = torch.device(device)
    enc = load_encoder(path, pooling="cls", max_seq_length=max_seq_length, normalize=False).to(device)
    tr = Transformer(path, max_seq_length=enc.max_seq_length)
    st_model = SentenceTransformer(modules=[tr, Pooling(tr.get_embedding_dimension(), "cls")], device=str(device))
    ref = DenoisingAutoEncoderLoss(st_model, tie_encoder_decoder=True).to(device)
    missing, _ = enc.model.load_state_dict(tr.auto_model.state_dict(), strict=False)  # ST keeps an unused pooler
    assert not missing, missing
    ours = TSDAEObjective(
        enc,
        build_decoder(enc, tie=True),
        WordNoise("delete", noise_ratio),
        group_by_length=group_by_length,
        sparse_embedding_grad=sparse_embedding_grad,
    ).to(device)
    missing, unexpected = ours.decoder.load_state_dict(ref.decoder.state_dict(), strict=False)
    assert not missing and not unexpected, (missing, unexpected)

    def ref_loss(b):
        noisy, clean = b
        return ref([to_device(st_model.tokenize(noisy), device), to_device(st_model.tokenize(clean), device)], None)

    def our_loss(obj, b):
        noisy, clean = b
        src, tgt = obj.encoder.tokenize(noisy), obj.encoder.tokenize(clean)
        return obj(target_ids=tgt["input_ids"].to(device), **{f"src_{k}": v.to(device) for k, v in src.items()})

    def make_batches(sents: list[str], batch_size: int, seed: int) -> list[tuple[list[str], list[str]]]:
        rng, noise = np.random.default_rng(seed), WordNoise("delete", noise_ratio)
        chunks = [sents[i : i + batch_size] for i in range(0, len(sents) - batch_size + 1, batch_size)]
        return [(noise(c, rng), c) for c in chunks]

    return Pair(ref, ref_loss, ours, our_loss, make_batches, n_sentences=lambda b: len(b[1]))


def simcse_pair(
    path: str, max_seq_length: int | None = 32, temperature: float = 0.05, device: torch.device | str = "cpu"
) -> Pair:
    """Unsupervised SimCSE with ``mlp="train_only"`` (the core studies' recipe): benchbench's ``SimCSEObjective``
    (one forward pass of the doubled batch, its linear+tanh layer on the CLS vector) beside
    sentence-transformers' unsupervised-SimCSE recipe: ``MultipleNegativesRankingLoss(scale=1/temperature)``
    on the sentence paired with itself, over Transformer + CLS Pooling + ``Dense`` (tanh) holding the same
    layer's weights. ST encodes the two views in two passes, so the losses agree with dropout off only."""
    from benchbench_plugins.simcse import SimCSEObjective
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.sentence_transformer.modules import Dense, Pooling, Transformer

    from benchbench.encode.models import load_encoder

    device = torch.device(device)
    enc = load_encoder(path, pooling="cls", max_seq_length=max_seq_length, normalize=False).to(device)
    ours = SimCSEObjective(enc, temperature, mlp=True).to(device)
    tr = Transformer(path, max_seq_length=enc.max_seq_length)
    lin = ours.mlp[0]
    dense = Dense(
        enc.dim, enc.dim, activation_function=torch.nn.Tanh(), init_weight=lin.weight.detach().clone(),
        init_bias=lin.bias.detach().clone(),
    )  # fmt: skip
    st_model = SentenceTransformer(modules=[tr, Pooling(enc.dim, "cls"), dense], device=str(device))
    missing, _ = enc.model.load_state_dict(tr.auto_model.state_dict(), strict=False)
    assert not missing, missing
    ref = MultipleNegativesRankingLoss(st_model, scale=1.0 / temperature).to(device)

    def ref_loss(b):
        f = to_device(st_model.tokenize(b), device)
        return ref([f, f], None)

    def our_loss(obj, b):
        batch = obj.collate(b, np.random.default_rng(0))
        batch.pop("n_tokens", None)
        return obj(**to_device(batch, device))

    def make_batches(sents: list[str], batch_size: int, seed: int) -> list[list[str]]:
        return [sents[i : i + batch_size] for i in range(0, len(sents) - batch_size + 1, batch_size)]

    return Pair(ref, ref_loss, ours, our_loss, make_batches)


@dataclass
class Side:
    """One trained copy in an interleaved timing: its loss function (a batch -> the loss), its optimizer,
    and the autocast it runs under; ``times`` and ``losses`` are filled per timed step."""

    name: str
    loss: Callable[[Any], torch.Tensor]
    module: torch.nn.Module
    lr: float
    amp: Callable[[], AbstractContextManager] = nullcontext
    seed_offset: int = 0  # dropout masks: torch is seeded with (step seed + offset) before each step
    opt: torch.optim.Optimizer | None = None
    times: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)


def copy_side(name: str, module: torch.nn.Module, loss_of: Callable, lr: float, **kw) -> Side:
    """A Side training its own deep copy of ``module`` (``loss_of(copy, batch)`` is its loss)."""
    m = copy.deepcopy(module)
    return Side(name, lambda b: loss_of(m, b), m, lr, **kw)


def train_step(side: Side, batch: Any, max_grad_norm: float = 1.0) -> tuple[float, float]:
    """One optimizer step of ``side`` on ``batch``: (seconds, loss). The clock covers tokenisation,
    forward (under the side's autocast), backward, clipping and the AdamW update."""
    from benchbench.train.loop import adamw

    if side.opt is None:
        side.opt = adamw(side.module.parameters(), lr=side.lr)
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    sync()
    t = time.perf_counter()
    with side.amp():
        loss = side.loss(batch)
    loss.backward()
    if max_grad_norm:
        torch.nn.utils.clip_grad_norm_(side.module.parameters(), max_grad_norm)
    side.opt.step()
    side.opt.zero_grad(set_to_none=True)
    sync()
    return time.perf_counter() - t, float(loss.detach())


def interleave(sides: Sequence[Side], batches: Sequence[Any], warmup: int, seed: int = 0) -> None:
    """Every batch through every side in turn, the order rotating each batch, so that a shared, noisy CPU
    slows all sides alike; the first ``warmup`` batches are not recorded. Before each side's step torch is
    seeded from the batch index (plus the side's offset): sides with the same offset draw the same dropout
    masks where they run the same ops, so their losses differ by their arithmetic only."""
    for s in sides:
        s.module.train()
    for i, b in enumerate(batches):
        k = i % len(sides)
        for s in list(sides[k:]) + list(sides[:k]):
            torch.manual_seed(seed + 7919 * i + s.seed_offset)
            dt, loss = train_step(s, b)
            if i >= warmup:
                s.times.append(dt)
                s.losses.append(loss)


def flops_per_step(
    loss: Callable[[Any], torch.Tensor], module: torch.nn.Module, batches: Sequence[Any], amp=nullcontext
) -> float:
    """Mean FLOPs of forward + backward per batch, by torch's FlopCounterMode (the matmuls and attention,
    padding included; the optimizer and elementwise ops not counted), over the very ``batches`` timed."""
    from torch.utils.flop_counter import FlopCounterMode

    module.train()
    with FlopCounterMode(display=False) as fc:
        for b in batches:
            with amp():
                out = loss(b)
            out.backward()
    module.zero_grad(set_to_none=True)
    return fc.get_total_flops() / max(1, len(batches))


def bf16_autocast() -> AbstractContextManager:
    return torch.autocast("cpu", dtype=torch.bfloat16)
