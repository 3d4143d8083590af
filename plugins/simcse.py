"""Unsupervised SimCSE (Gao et al. 2021; TSDAE paper section 5.4 and Appendix B).

Each sentence is encoded twice in one forward pass; the two vectors differ only by dropout and form
the positive pair, the other sentences of the batch are the negatives: cross-entropy over cosine
similarities divided by a temperature of 0.05 (the in-batch-negatives loss, MNRL). Pooling is the
[CLS] vector through a linear+tanh layer, trained AND kept in the saved encoder: the TSDAE paper ran
SimCSE's official code with its defaults ("a linear layer on the CLS token embedding as the pooling
method"); SimCSE's later ``mlp_only_train`` recipe is ``mlp="train_only"``. The TSDAE paper kept the
official code's STS-B-dev checkpoint selection (its footnote 8); benchbench offers it as
``select_on_stsb_dev=true`` (off by default: it selects on labelled STS data, which the other
unsupervised methods do not see) and otherwise keeps the last step. Appendix B's settings: one epoch, batch 512, AdamW lr 5e-5 (linear decay, the
official HF-Trainer default), max length 32 (training only: the saved encoder keeps the start's).

| item | paper (TSDAE App. B) | reference code (princeton-nlp/SimCSE) | benchbench |
|---|---|---|---|
| pooling / MLP | "a linear layer on the CLS token embedding as the pooling method" | ``--pooler_type cls``: MLP (dense+tanh) at train and test; later ``--mlp_only_train`` (test: bare CLS) | ``mlp="train_and_test"`` (default, the TSDAE paper's); ``mlp="train_only"`` = ``mlp_only_train``; the saved encoder keeps the MLP (``simcse_mlp/`` + registered loader ``simcse-mlp``) |
| max length | 32 | 32 (training) | 32 for training only; the saved encoder keeps the start's max length |
| checkpoint selection | STS-B dev early stopping (footnote 8: "We do not change this setting") | evaluate every 125 steps on STS-B dev, keep the best | ``select_on_stsb_dev=true``: STS-B dev Spearman every ``eval_every`` (125) steps and at the last, the best weights kept (``_stsb_dev_selection``); off by default (labelled STS data), then the last step is kept (fixed budget, as for the other methods) |
| epochs / batch / lr | 1 / 512 / 5e-5 | same; linear decay, no warm-up | same |
| gradient clipping | not stated | HF Trainer: global norm 1.0 | ``max_grad_norm`` 1.0 (0 = off) |
| MLP init | - | BERT init (normal 0.02, zero bias) | same |
| two views | - | one forward pass on the doubled batch | same |
| decoder-only start | - | - | a decoder (``--model smollm2-135m-instruct``, ``DecoderEncoder``: causal attention) with ``pooling`` mean, last or weighted-mean and ``mlp`` train_only or none; ``cls`` (no [CLS]) and the MLP kept at test time are refused by name |
| SimCSE++ ingredients | - | - | ``off_dropout_negatives`` and ``dcl_weight``/``dcl_temperature`` (plugins/_contrastive.py; off by default and then out of the result key); ``simcse-plus-plus`` is this method with both on |
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from benchbench_plugins._contrastive import (
    check_ingredients,
    dimension_contrastive_loss,
    dropout_off,
    off_dropout_infonce,
)

from benchbench import (
    ConfigError,
    DecoderEncoder,
    LoopConfig,
    Method,
    Objective,
    TrainContext,
    TransformerEncoder,
    fit,
    hash_weights,
    hookimpl,
    is_decoder_name,
    resolve_steps,
    seed_everything,
    trainer_defaults,
)


@dataclass
class SimCSEConfig:
    steps: int | None = None  # None: one epoch over the corpus
    epochs: float = 1.0
    batch_size: int = 512
    lr: float = 5e-5
    temperature: float = 0.05
    max_seq_length: int | None = 32
    pooling: str = "cls"
    # "train_and_test": the linear+tanh layer on the pooled vector is trained AND kept in the saved
    # encoder (SimCSE's first code release, which the TSDAE paper ran: "a linear layer on the CLS token
    # embedding as the pooling method"); "train_only": SimCSE's later ``--mlp_only_train`` recipe (the
    # layer is dropped at test time); "none": no layer
    mlp: str = "train_and_test"
    # SimCSE's official checkpoint selection: every ``eval_every`` steps score STS-B dev (Spearman) and
    # keep the best weights. The TSDAE paper kept it (its footnote 8); off by default here because it
    # selects on labelled STS data, which benchbench's unsupervised setting does not use for the others
    select_on_stsb_dev: bool = False
    eval_every: int = 125
    grad_accum: int = 1
    max_grad_norm: float = 1.0  # HF Trainer (SimCSE's official trainer) clips the global norm at 1.0; 0 = off
    checkpoint_every: int = field(default=1000, metadata={"hash": False})  # speed knob: not in the result key
    # SimCSE++'s two ingredients (plugins/_contrastive.py), off by default; while they hold their
    # defaults they stay out of the result key, so simcse results stored before they existed keep theirs
    off_dropout_negatives: bool = field(default=False, metadata={"hash": "unless_default"})
    dcl_weight: float = field(default=0.0, metadata={"hash": "unless_default"})  # 0 = no dimension-wise term
    dcl_temperature: float = field(default=5.0, metadata={"hash": "unless_default"})


MLP_KINDS = ("train_and_test", "train_only", "none")


def make_mlp(encoder: TransformerEncoder) -> torch.nn.Sequential:
    """SimCSE's ``MLPLayer``: dense + tanh, initialised as BERT initialises a linear layer
    (normal(0, initializer_range), zero bias: SimCSE calls ``init_weights`` after adding it)."""
    lin = torch.nn.Linear(encoder.dim, encoder.dim)
    torch.nn.init.normal_(lin.weight, std=float(getattr(encoder.model.config, "initializer_range", 0.02)))
    torch.nn.init.zeros_(lin.bias)
    return torch.nn.Sequential(lin, torch.nn.Tanh()).to(encoder.device)


class MLPEncoder(TransformerEncoder):
    """An encoder whose pooled vector goes through SimCSE's trained linear+tanh layer (the TSDAE
    paper's setting). Saved as a sentence-transformers folder plus ``simcse_mlp/`` (safetensors) and a
    ``benchbench_wrapper.json`` naming the registered loader ``simcse-mlp``, so ``--model PATH``
    reloads it WITH the layer (plain sentence-transformers would load the bare CLS vector)."""

    def __init__(self, base: TransformerEncoder, mlp: torch.nn.Module):
        super().__init__(
            base.model,
            base.tokenizer,
            pooling=base.pooling,
            max_seq_length=base.max_seq_length,
            normalize=base.normalize,
            name=base.name,
            batch_size=base.batch_size,
        )
        self.mlp = mlp

    def forward(self, input_ids, attention_mask, token_type_ids=None, **kw):
        out = super().forward(input_ids, attention_mask, token_type_ids)
        out["sentence_embedding"] = self.mlp(out["sentence_embedding"])
        return out

    @property
    def fingerprint(self) -> str:
        import hashlib

        h = hash_weights(hashlib.blake2b(digest_size=8), self.mlp.state_dict())
        return f"{super().fingerprint}-mlp-{h.hexdigest()}"

    def save(self, path) -> Path:
        from safetensors.torch import save_file

        path = super().save(path)
        (path / "simcse_mlp").mkdir(exist_ok=True)
        save_file(
            {k: v.detach().cpu().contiguous() for k, v in self.mlp.state_dict().items()},
            str(path / "simcse_mlp" / "model.safetensors"),
        )
        (path / "benchbench_wrapper.json").write_text(json.dumps({"loader": "simcse-mlp"}))
        return path


def load_mlp_encoder(base: TransformerEncoder, path: str | Path) -> MLPEncoder:
    from safetensors.torch import load_file

    mlp = make_mlp(base)
    mlp.load_state_dict(load_file(str(Path(path) / "simcse_mlp" / "model.safetensors")))
    return MLPEncoder(base, mlp)


class SimCSEObjective(Objective):
    def __init__(
        self,
        encoder: TransformerEncoder,
        temperature: float,
        mlp: bool,
        off_dropout_negatives: bool = False,
        dcl_weight: float = 0.0,
        dcl_temperature: float = 5.0,
    ):
        super().__init__()
        self.encoder = encoder
        self.temperature = temperature
        self.off_dropout_negatives = off_dropout_negatives
        self.dcl_weight, self.dcl_temperature = float(dcl_weight), float(dcl_temperature)
        self.mlp = make_mlp(encoder) if mlp else torch.nn.Identity()
        self.keep_mlp = False  # set by SimCSE.train: the MLP is part of the returned encoder ("train_and_test")

    def result(self) -> TransformerEncoder:
        """The encoder ``SimCSE.train`` would return now (what a learning-curve monitor scores): a
        copy (it encodes at the start's max length, the training cut being training-only), with the MLP
        when it is kept at test time."""
        enc = self.encoder.clone()
        return MLPEncoder(enc, copy.deepcopy(self.mlp)) if self.keep_mlp else enc

    def collate(self, items: list[str], rng: np.random.Generator) -> dict:
        tok = self.encoder.tokenize(items)
        batch = dict(tok)
        batch["n_tokens"] = int(tok["attention_mask"].sum()) * 2
        return batch

    def views(self, **tok) -> tuple[torch.Tensor, torch.Tensor]:
        """The two views: the same token ids stacked twice, one forward pass, so only the dropout
        masks differ between them."""
        n = tok["input_ids"].shape[0]
        doubled = {k: torch.cat([v, v]) for k, v in tok.items()}
        z = self.mlp(self.encoder(**doubled)["sentence_embedding"])
        return z[:n], z[n:]

    def negatives(self, **tok) -> torch.Tensor:
        """SimCSE++'s negatives: the sentences encoded once more with dropout off, with gradient; after
        the two views, so the views' dropout masks are drawn as without it."""
        with dropout_off(self):
            return self.mlp(self.encoder(**tok)["sentence_embedding"])

    def forward(self, **tok) -> torch.Tensor:
        z1, z2 = self.views(**tok)
        if self.off_dropout_negatives:
            loss = off_dropout_infonce(z1, z2, self.negatives(**tok), self.temperature)
        else:
            sim = F.cosine_similarity(z1.float()[:, None], z2.float()[None], dim=-1) / self.temperature
            loss = F.cross_entropy(sim, torch.arange(len(z1), device=sim.device))
        if self.dcl_weight:
            loss = loss + self.dcl_weight * dimension_contrastive_loss(z1, z2, self.dcl_temperature)
        return loss


class SimCSE(Method):
    name = "simcse"
    Config = SimCSEConfig
    description = "unsupervised SimCSE: dropout positives, in-batch negatives, temperature 0.05"

    def loss_chance(self, objective) -> float:
        """InfoNCE over the batch's b candidates (SimCSE++'s dropout-off negatives keep b per row): ln b;
        plus ``dcl_weight`` x ln(dim) for the dimension-wise term (each dimension among dim)."""
        c = self.config
        return math.log(c.batch_size) + (c.dcl_weight * math.log(objective.encoder.dim) if c.dcl_weight else 0.0)

    def train(self, corpus: list[str], ctx: TrainContext):
        c = self.config
        if c.temperature <= 0:
            raise ConfigError(f"simcse: option 'temperature' must be > 0 (got {c.temperature}).")
        if c.mlp not in MLP_KINDS:
            raise ConfigError(f"simcse: option 'mlp' must be one of {MLP_KINDS} (got {c.mlp!r}).")
        check_ingredients(self.name, c.off_dropout_negatives, c.dcl_weight, c.dcl_temperature)
        if is_decoder_name(str(ctx.model)):
            _check_decoder_start(c, str(ctx.model))
        seed_everything(ctx.seed)
        # max_seq_length: SimCSE's training truncation only (the saved encoder keeps the start's)
        encoder = ctx.load_encoder(pooling=c.pooling, train_max_seq_length=c.max_seq_length)
        obj = SimCSEObjective(
            encoder, c.temperature, c.mlp != "none", c.off_dropout_negatives, c.dcl_weight, c.dcl_temperature
        )
        obj.keep_mlp = c.mlp == "train_and_test"
        steps = resolve_steps(c.steps, len(corpus), c.batch_size * c.grad_accum, c.epochs)
        best = self._stsb_dev_selection(obj, ctx, steps) if c.select_on_stsb_dev else None
        obj = fit(
            self,
            obj,
            corpus,
            ctx,
            loop=LoopConfig.from_config(c, steps=steps),
            **trainer_defaults(c.lr, steps),
        )
        if best is not None:
            obj.load_state_dict(best["state"])
            ctx.accounting["stsb_dev_selected_step"], ctx.accounting["stsb_dev_best"] = best["step"], best["score"]
        if c.mlp == "train_and_test":
            return MLPEncoder(obj.encoder, obj.mlp)
        return obj.encoder

    def _stsb_dev_selection(self, obj: SimCSEObjective, ctx: TrainContext, steps: int) -> dict:
        """Install a training monitor that scores STS-B dev every ``eval_every`` steps (the encoder as
        it would be saved: start's max length, MLP per ``mlp``) and keeps a copy of the best weights.
        The loop's monitor restores the RNG, so selection does not change the trajectory. A monitor
        the caller installed keeps running at its own steps."""
        import copy

        from benchbench import DataStore, Embedder, get_registry, make_adapter

        c = self.config
        if c.eval_every < 1:
            raise ConfigError(f"simcse: option 'eval_every' must be >= 1 (got {c.eval_every}).")
        adapter = make_adapter(get_registry(), "stsb", ctx.data if ctx.data is not None else DataStore())
        best = {"score": float("-inf"), "step": 0, "state": None}
        outer, outer_every = ctx.monitor, int(ctx.monitor_every or 0)

        def monitor(step: int, _encoder) -> dict[str, float]:
            out: dict[str, float] = {}
            enc = MLPEncoder(obj.encoder, obj.mlp) if c.mlp == "train_and_test" else obj.encoder
            if step % c.eval_every == 0 or step == steps:
                score = float(adapter.evaluate(Embedder(enc, progress=False), "dev").main_score)
                out["stsb_dev_select"] = score
                if score > best["score"]:
                    best.update(score=score, step=step, state=copy.deepcopy(obj.state_dict()))
            if outer is not None and outer_every and (step % outer_every == 0 or step == steps):
                out.update(outer(step, enc))
            return out

        ctx.monitor = monitor
        ctx.monitor_every = math.gcd(c.eval_every, outer_every) if outer is not None and outer_every else c.eval_every
        return best


def _check_decoder_start(c: SimCSEConfig, model: str) -> None:
    """A decoder-only start (``DecoderEncoder``: causal attention, its own poolings) trains as any other
    (dropout views of one pooled vector); what it cannot take is named: a [CLS] pooling (a decoder has no
    [CLS]) and the MLP kept at test time (``MLPEncoder`` saves a sentence-transformers folder, not a decoder's)."""
    if c.pooling not in DecoderEncoder.poolings:
        raise ConfigError(
            f"simcse: option 'pooling' = {c.pooling!r} cannot read decoder-only model {model!r} (it has no [CLS] "
            f"token); a decoder pools with one of {DecoderEncoder.poolings}: pass --set pooling=mean."
        )
    if c.mlp == "train_and_test":
        raise ConfigError(
            f"simcse: option 'mlp' = 'train_and_test' keeps the MLP in the saved encoder, which a decoder-only start "
            f"({model!r}) cannot carry; pass --set mlp=train_only (SimCSE's mlp_only_train) or mlp=none."
        )


@hookimpl
def benchbench_register_methods(register):
    register(SimCSE.name, SimCSE)


@hookimpl
def benchbench_register_loaders(register):
    register("simcse-mlp", load_mlp_encoder)
