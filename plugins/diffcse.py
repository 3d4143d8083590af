"""DiffCSE: Difference-based Contrastive Learning for Sentence Embeddings (Chuang et al., NAACL 2022).

Unsupervised SimCSE (dropout positives, in-batch negatives, temperature 0.05) plus a second loss
that makes the sentence vector SENSITIVE to edits of its sentence: conditional replaced-token
detection (RTD), ELECTRA's task conditioned on the vector.

1. Each sentence x is encoded twice (the two dropout views); h = the projection MLP on [CLS]
   (Linear d->2d, BatchNorm, ReLU, Linear 2d->d, BatchNorm without affine; training only).
2. For each view, x is masked (30% of its non-special tokens; of those 80% [MASK], 10% a random id,
   10% kept) and a FROZEN masked LM (the generator) predicts every position; its top token is taken
   at every position (not only the masked ones), position 0 is set back to [CLS]: x'' (the edit).
3. A discriminator (a second transformer, starting as a copy of the start encoder) reads x'' with its
   position-0 input vector (after the embedding layer) REPLACED by h, and a linear head predicts per
   position whether x''_t differs from x_t. The gradient of this loss reaches the sentence encoder
   only through h.
4. loss = InfoNCE(h views) + lambda * CE(replaced), lambda = 0.005; the encoder kept is the bare [CLS]
   (``--mlp_only_train``: the projection MLP is dropped at test time).

| item | paper | reference code (voidism/DiffCSE, commit f724b2c) | benchbench |
|---|---|---|---|
| generator | a pretrained MLM, DistilBERT for BERT; "sample" from it | ``--generator_name distilbert-base-uncased``; ``argmax`` of its logits (greedy, not sampled) at EVERY position, under ``no_grad``, in the model's train mode (its dropout on) | the same rule; the model is the option ``generator`` (default ``distilbert-base-uncased``, not available offline: the studies here use ``tiny-mlm-nli``, a 2-layer 64-wide BERT that benchbench pre-trained by MLM on the offline NLI sentences, ``bench/pretrain_tiny_mlm.py``; a far weaker generator). It must have the encoder's vocabulary (checked). Option ``replace``: ``"all"`` (default) is the reference code's rule; ``"masked"`` keeps every token the generator's input did not mask or randomise, as the paper (and ELECTRA) describe the edit: with a strong generator the two nearly coincide (it copies unmasked tokens), with tiny-mlm-nli they do not: measured on 1,000 STS-B sentences (bench/diffcse_generator.py), it restores 40% of the tokens it was asked about and copies only 37% of the others, so ``"all"`` edits 62% of the tokens and ``"masked"`` 14% (those sentences are mostly image captions; on the studies' corpora, tweets and news, it restores fewer: the study records show 22-24% of real tokens edited with ``"masked"``); the studies use ``"masked"`` |
| masking | 30% masking ratio | ``mask_tokens``: Bernoulli(0.30) over non-special ids (``get_special_tokens_mask``: [CLS], [SEP], [PAD], [UNK], [MASK]), 80% [MASK], then Bernoulli(0.5) of the rest a random id from ``len(tokenizer)``, else kept; each of the two views masked independently | same rule, from the loop's seeded rng (``mask_for_generator``) |
| condition | h replaces the [CLS] input of the discriminator | ``cls_input`` replaces the embedding layer's output at position 0 (its patched ``modeling_bert``); ``--before_mlp`` False: h is the MLP's output | same, without patching transformers: a forward hook on the discriminator's embedding layer (``condition_before_mlp`` = ``--before_mlp``) |
| discriminator | a transformer initialised from the encoder's checkpoint | a separate ``BertModel`` loaded from the same checkpoint; head ``Linear(768, 2)`` (PyTorch's default init) | a copy of the start encoder's transformer; head ``Linear(d, 2)``, PyTorch's default init |
| RTD loss | binary cross-entropy over positions | 2-way cross-entropy averaged over ALL positions of the padded batch, padding included (label 0 there) | same (padding included: the reference's normalisation) |
| projection MLP | BatchNorm MLP (``--batchnorm``) on [CLS], training only | ``ProjectionMLP``: Linear(d,2d,no bias)-BN-ReLU-Linear(2d,d,no bias)-BN(affine=False); BERT init (normal 0.02) for the linears; ``--mlp_only_train`` | same (``batchnorm=False``: SimCSE's dense+tanh instead) |
| lambda / temperature / mask ratio | 0.005 / 0.05 / 0.30 (BERT-base) | ``run_diffcse.sh``: 0.005 / 0.05 / 0.30 | same |
| batch / lr / epochs / max length | 64 / 7e-6 / 2 / 32 on 1M Wikipedia sentences | same; HF Trainer AdamW, no weight decay, linear decay, no warm-up, clip 1.0, fp16 | same on the task's own sentences (corpus "task"); max length 32 for training only (the saved encoder keeps the start's); bf16 autocast on CUDA |
| checkpoint selection | STS-B dev every 125 steps | ``--metric_for_best_model stsb_spearman --load_best_model_at_end`` | NOT implemented: the last step (fixed budget, as every method here) |
| base model | bert-base-uncased | bert-base-uncased | offline: all-MiniLM-L6-v2 (already sentence-tuned) or a plain start; no plain BERT is available offline, so the published numbers are not expected |

The generator's edit statistics: leaderboards/new_methods/diffcse_generator.md (bench/diffcse_generator.py).

Equality with the reference's own ``cl_forward`` (loss and weights over SGD steps): bench/fidelity_diffcse.py.
"""

from __future__ import annotations

import copy
import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from benchbench import (
    ConfigError,
    LoopConfig,
    Method,
    Objective,
    TrainContext,
    TransformerEncoder,
    checkpoint_source,
    fit,
    hookimpl,
    is_decoder_name,
    load_pretrained_head,
    model_label_of,
    resolve_steps,
    seed_everything,
    trainer_defaults,
)

MASK_SHARE = 0.8  # of the chosen tokens: [MASK] (the reference's mask_tokens, as BERT's MLM)
RANDOM_SHARE_OF_REST = 0.5  # of the chosen tokens not masked: a random id (10% of all chosen)


@dataclass
class DiffCSEConfig:
    steps: int | None = None  # None: ``epochs`` over the corpus
    epochs: float = 2.0
    batch_size: int = 64
    lr: float = 7e-6
    temperature: float = 0.05
    lambda_weight: float = 0.005  # weight of the replaced-token-detection loss
    masking_ratio: float = 0.30  # share of non-special tokens the generator sees masked
    generator: str = "distilbert-base-uncased"  # a masked LM with the encoder's vocabulary
    replace: str = "all"  # "all": the generator's token at every position (the reference code); "masked": only
    # where the generator's input was masked or randomised (the paper's and ELECTRA's edit; see the table)
    batchnorm: bool = True  # the BatchNorm projection MLP (--batchnorm); False: SimCSE's dense+tanh
    condition_before_mlp: bool = False  # --before_mlp: condition the discriminator on [CLS] before the MLP
    max_seq_length: int | None = 32  # training truncation only (the saved encoder keeps the start's)
    pooling: str = "cls"
    grad_accum: int = 1
    max_grad_norm: float = 1.0  # HF Trainer (the reference's trainer) clips the global norm at 1.0; 0 = off
    checkpoint_every: int = field(default=1000, metadata={"hash": False})  # speed knob: not in the result key


def mask_for_generator(
    ids: torch.Tensor, special: torch.Tensor, ratio: float, vocab_size: int, mask_id: int, rng: np.random.Generator
) -> torch.Tensor:
    """The generator's input: each non-special token chosen with probability ``ratio``; a chosen token
    becomes [MASK] with probability 0.8, else a uniformly random id with probability 0.5, else stays."""
    shape = tuple(ids.shape)
    chosen = torch.from_numpy(rng.random(shape) < ratio) & ~special
    masked = torch.from_numpy(rng.random(shape) < MASK_SHARE) & chosen
    randomised = torch.from_numpy(rng.random(shape) < RANDOM_SHARE_OF_REST) & chosen & ~masked
    out = ids.clone()
    out[masked] = mask_id
    out[randomised] = torch.from_numpy(rng.integers(vocab_size, size=shape)).to(ids.dtype)[randomised]
    return out


def make_projection(encoder: TransformerEncoder, batchnorm: bool = True) -> torch.nn.Sequential:
    """The training-only MLP on [CLS]: DiffCSE's ``ProjectionMLP`` (BatchNorm) or SimCSE's dense+tanh,
    linears initialised as BERT initialises them (normal(0, initializer_range), zero bias)."""
    d = encoder.dim
    std = float(getattr(encoder.model.config, "initializer_range", 0.02))
    if batchnorm:
        first, second = torch.nn.Linear(d, 2 * d, bias=False), torch.nn.Linear(2 * d, d, bias=False)
        layers = [first, torch.nn.BatchNorm1d(2 * d), torch.nn.ReLU(), second, torch.nn.BatchNorm1d(d, affine=False)]
        linears = [first, second]
    else:
        first = torch.nn.Linear(d, d)
        torch.nn.init.zeros_(first.bias)
        layers, linears = [first, torch.nn.Tanh()], [first]
    for lin in linears:
        torch.nn.init.normal_(lin.weight, std=std)
    return torch.nn.Sequential(*layers).to(encoder.device)


def load_generator(name: str, encoder: TransformerEncoder) -> torch.nn.Module:
    """The masked LM ``name`` (its pretrained MLM head required), frozen, checked to share the encoder's
    vocabulary (the discriminator reads the generator's token ids as the encoder's)."""
    from transformers import AutoTokenizer

    name = os.path.expanduser(name)  # a study file may name a folder under ~
    model, note = load_pretrained_head(name, "AutoModelForMaskedLM")
    if model is None:
        raise ConfigError(
            f"diffcse: option 'generator' = {name!r} gives no pretrained masked LM ({note}). DiffCSE needs a "
            f"masked LM with the encoder's vocabulary (the paper: distilbert-base-uncased for BERT). Offline, "
            f"build one with `python bench/pretrain_tiny_mlm.py --out DIR` and pass `--set generator=DIR`."
        )
    gen_vocab = AutoTokenizer.from_pretrained(checkpoint_source(name), trust_remote_code=False).get_vocab()
    if gen_vocab != encoder.tokenizer.get_vocab():
        raise ConfigError(
            f"diffcse: generator {model_label_of(name)!r} has a different vocabulary ({len(gen_vocab)} tokens) "
            f"from the encoder's ({len(encoder.tokenizer.get_vocab())}): its predicted ids would be read as "
            f"other tokens. Use a generator trained with the encoder's tokenizer."
        )
    for p in model.parameters():
        p.requires_grad_(False)
    return model.to(encoder.device)


class DiffCSEObjective(Objective):
    def __init__(
        self,
        encoder: TransformerEncoder,
        generator: torch.nn.Module,
        temperature: float = 0.05,
        lambda_weight: float = 0.005,
        masking_ratio: float = 0.30,
        batchnorm: bool = True,
        condition_before_mlp: bool = False,
        replace: str = "all",
    ):
        super().__init__()
        if replace not in ("all", "masked"):
            raise ConfigError(f"diffcse: option 'replace' must be 'all' or 'masked' (got {replace!r}).")
        self.replace = replace
        self.encoder, self.generator = encoder, generator
        self.temperature, self.lambda_weight = float(temperature), float(lambda_weight)
        self.masking_ratio, self.condition_before_mlp = float(masking_ratio), bool(condition_before_mlp)
        self.mlp = make_projection(encoder, batchnorm)
        self.discriminator = copy.deepcopy(encoder.model)  # the reference: the start checkpoint's weights
        self.electra_head = torch.nn.Linear(encoder.dim, 2).to(encoder.device)
        tok = encoder.tokenizer
        self.cls_id, self.mask_id, self.vocab_size = int(tok.cls_token_id), int(tok.mask_token_id), len(tok)
        self.special_ids = torch.tensor(sorted(set(tok.all_special_ids)))
        self.stats = {"tokens": 0, "replaced": 0, "correct": 0}  # real (non-padding) tokens, training only

    def result(self) -> TransformerEncoder:
        """The encoder ``DiffCSE.train`` would return now: a copy, bare [CLS] (it encodes at the start's
        max length, the training cut being training-only)."""
        return self.encoder.clone()

    def collate(self, items: list[str], rng: np.random.Generator) -> dict:
        tok = self.encoder.tokenize([s.strip() for s in items])
        ids = torch.cat([tok["input_ids"], tok["input_ids"]])  # the two dropout views' rows
        special = torch.isin(ids, self.special_ids)
        mlm = mask_for_generator(ids, special, self.masking_ratio, self.vocab_size, self.mask_id, rng)
        return {
            "input_ids": tok["input_ids"],
            "attention_mask": tok["attention_mask"],
            "mlm_input_ids": mlm,
            "n_tokens": 2 * int(tok["attention_mask"].sum()),
        }

    @torch.no_grad()
    def edit(
        self, mlm_input_ids: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The edited sentences (the generator's top token at every position, or with ``replace="masked"``
        only where its input was masked or randomised; [CLS] at position 0, padding id 0 on padding) and
        the RTD labels: 1 where the edit differs from the ORIGINAL token."""
        edited = self.generator(input_ids=mlm_input_ids, attention_mask=mask).logits.argmax(-1)
        if self.replace == "masked":
            edited = torch.where(mlm_input_ids != ids, edited, ids)
        edited[:, 0] = self.cls_id
        return edited * mask, (edited != ids).long() * mask

    def discriminate(self, ids: torch.Tensor, mask: torch.Tensor, condition: torch.Tensor) -> torch.Tensor:
        """The discriminator's last hidden states on ``ids``, its position-0 input (the embedding
        layer's output) replaced by ``condition``."""

        def inject(_module, _inputs, out):
            return torch.cat([condition[:, None].to(out.dtype), out[:, 1:]], 1)

        handle = self.discriminator.embeddings.register_forward_hook(inject)
        try:
            return self.discriminator(input_ids=ids, attention_mask=mask).last_hidden_state
        finally:
            handle.remove()

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, mlm_input_ids: torch.Tensor
    ) -> torch.Tensor:
        n = input_ids.shape[0]
        ids, mask = torch.cat([input_ids, input_ids]), torch.cat([attention_mask, attention_mask])
        cls = self.encoder(input_ids=ids, attention_mask=mask)["sentence_embedding"]
        h = self.mlp(cls)
        sim = F.cosine_similarity(h[:n].float()[:, None], h[n:].float()[None], dim=-1) / self.temperature
        loss = F.cross_entropy(sim, torch.arange(n, device=sim.device))
        edited, replaced = self.edit(mlm_input_ids, ids, mask)
        hidden = self.discriminate(edited, mask, cls if self.condition_before_mlp else h)
        logits = self.electra_head(hidden).float()
        rtd = F.cross_entropy(logits.reshape(-1, 2), replaced.reshape(-1))  # every position, padding too
        if self.training:
            with torch.no_grad():
                real = mask.bool()
                self.stats["tokens"] += int(real.sum())
                self.stats["replaced"] += int(replaced[real].sum())
                self.stats["correct"] += int((logits.argmax(-1) == replaced)[real].sum())
        return loss + self.lambda_weight * rtd


class DiffCSE(Method):
    name = "diffcse"
    Config = DiffCSEConfig
    description = "DiffCSE: SimCSE + replaced-token detection conditioned on the sentence vector (frozen MLM generator)"

    def provenance(self) -> dict[str, Any]:
        """The generator's label: its folder's weights hash (``model_label_of``), not the option's text."""
        return {"diffcse_generator": model_label_of(os.path.expanduser(self.config.generator))}

    def loss_chance(self, objective) -> float:
        """InfoNCE over the batch's b candidates (ln b) plus ``lambda_weight`` x the replaced-token
        detection's two-class cross-entropy at p = 1/2 (ln 2)."""
        return math.log(self.config.batch_size) + self.config.lambda_weight * math.log(2)

    def train(self, corpus: list[str], ctx: TrainContext):
        c = self.config
        if c.temperature <= 0:
            raise ConfigError(f"diffcse: option 'temperature' must be > 0 (got {c.temperature}).")
        if not 0.0 <= c.masking_ratio <= 1.0:
            raise ConfigError(f"diffcse: option 'masking_ratio' must be in [0, 1] (got {c.masking_ratio}).")
        if c.lambda_weight < 0:
            raise ConfigError(f"diffcse: option 'lambda_weight' must be >= 0 (got {c.lambda_weight}).")
        if is_decoder_name(str(ctx.model)):
            raise ConfigError(
                f"diffcse: base model {ctx.model!r} is a decoder-only LLM, and DiffCSE cannot start from one: its "
                f"generator is a masked LM over the ENCODER's vocabulary that fills [MASK] tokens (a decoder has no "
                f"mask token and no masked-LM generator), and its discriminator reads the [CLS] position the "
                f"sentence vector replaces. Start DiffCSE from an encoder (e.g. all-MiniLM-L6-v2); for a decoder "
                f"start use llm2vec or simcse."
            )
        seed_everything(ctx.seed)
        # max_seq_length: the reference's training truncation only (the saved encoder keeps the start's)
        encoder = ctx.load_encoder(pooling=c.pooling, train_max_seq_length=c.max_seq_length)
        generator = load_generator(c.generator, encoder)
        obj = DiffCSEObjective(
            encoder,
            generator,
            c.temperature,
            c.lambda_weight,
            c.masking_ratio,
            c.batchnorm,
            c.condition_before_mlp,
            c.replace,
        )
        steps = resolve_steps(c.steps, len(corpus), c.batch_size * c.grad_accum, c.epochs)
        obj = fit(
            self,
            obj,
            corpus,
            ctx,
            loop=LoopConfig.from_config(c, steps=steps),
            **trainer_defaults(c.lr, steps),
        )
        s = obj.stats
        ctx.accounting.update(self.provenance())
        if s["tokens"]:  # over every training token seen in this process (a resumed run: since the resume)
            ctx.accounting["diffcse_replaced_share"] = round(s["replaced"] / s["tokens"], 4)
            ctx.accounting["diffcse_discriminator_accuracy"] = round(s["correct"] / s["tokens"], 4)
        encoder = obj.encoder
        return encoder


@hookimpl
def benchbench_register_methods(register):
    register(DiffCSE.name, DiffCSE)


__all__ = ["DiffCSE", "DiffCSEConfig", "DiffCSEObjective", "load_generator", "make_projection", "mask_for_generator"]
