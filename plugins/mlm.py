"""MLM baseline (TSDAE paper section 5.2): continue BERT's masked-language-model pre-training on the
target corpus, then mean-pool the token states. Devlin et al.'s recipe (15% of tokens chosen; of
those 80% [MASK], 10% random, 10% kept; linear warm-up then linear decay) except steps, batch and
lr, which are the TSDAE paper's (100K, 8, 5e-5). Masking is transformers' own
``DataCollatorForLanguageModeling`` (token or whole-word), fed a generator seeded from the loop's
per-batch RNG so that a resumed run masks the same tokens.

| item | paper (Devlin et al. / TSDAE 5.2) | reference code (BERT, HF Trainer) | benchbench |
|---|---|---|---|
| MLM head | pretrained | ``BertForMaskedLM`` head from the checkpoint | the checkpoint's head for every model source; none -> random, said in ``train.pretrained_lm_head`` |
| weight decay | 0.01 | AdamWeightDecay / Trainer: not on bias and LayerNorm | 0.01, not on bias and LayerNorm |
| gradient clipping | - | global norm 1.0 | ``max_grad_norm`` 1.0 (0 = off) |
| warm-up | 10K of 1M steps | linear warm-up, linear decay | ``warmup_ratio`` 0.01, linear decay |
| whole-word masking | (later BERT release) | wwm with 80/10/10 | ``whole_word=True``: transformers 5 disables the random-token 10% under wwm (all chosen words -> [MASK]) |
| loss | CE on masked tokens | ``BertForMaskedLM`` loss | equal to it (tests/plugins/test_method_fidelity.py) |
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from benchbench import (
    ConfigError,
    Method,
    Objective,
    TrainContext,
    TransformerEncoder,
    fit,
    hookimpl,
    load_pretrained_head,
    seed_everything,
)


@dataclass
class MLMConfig:
    steps: int = 100_000  # paper; on a CPU pass e.g. --steps 2000
    batch_size: int = 8
    lr: float = 5e-5
    weight_decay: float = 0.01
    warmup_ratio: float = 0.01  # Devlin et al.: 10K warm-up steps of 1M
    max_seq_length: int | None = None
    mask_ratio: float = 0.15
    whole_word: bool = False
    pooling: str = "mean"
    grad_accum: int = 1
    max_grad_norm: float = 1.0  # BERT's optimiser / HF Trainer clip the global norm at 1.0; 0 = off
    checkpoint_every: int = field(default=1000, metadata={"hash": False})  # speed knob: not in the result key


def linear_warmup_decay(steps: int, warmup_ratio: float):
    warm = max(1, int(round(warmup_ratio * steps)))
    return lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(1, steps - warm)))


def build_mlm_head(encoder: TransformerEncoder, pretrained: torch.nn.Module | None) -> torch.nn.Module:
    """The family's masked-LM model sharing ``encoder``'s transformer; its output projection is the
    word-embedding matrix. ``pretrained`` is the checkpoint's masked-LM model when it has a head
    (``load_pretrained_head``: bert-base does; all-MiniLM-L6-v2 does not, so its head starts random)."""
    from transformers import AutoModelForMaskedLM

    model = pretrained or AutoModelForMaskedLM.from_config(encoder.model.config)
    setattr(model, model.base_model_prefix, encoder.model)
    out = model.get_output_embeddings()
    if out is not None:
        out.weight = encoder.model.get_input_embeddings().weight
    return model


def grouped_adamw(model: torch.nn.Module, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    """AdamW over ``decay_groups`` (benchbench.adamw takes one flat parameter list); fused where available."""
    groups = decay_groups(model, weight_decay)
    try:
        return torch.optim.AdamW(groups, lr=lr, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.AdamW(groups, lr=lr)


class MLMObjective(Objective):
    def __init__(self, encoder: TransformerEncoder, mlm_model: torch.nn.Module, mask_ratio: float, whole_word: bool):
        super().__init__()
        from transformers import DataCollatorForLanguageModeling

        self.encoder = encoder
        self.head = [m for n, m in mlm_model.named_children() if n != mlm_model.base_model_prefix][0]
        self.whole_word = whole_word
        self.collator = DataCollatorForLanguageModeling(
            encoder.tokenizer, mlm_probability=mask_ratio, whole_word_mask=whole_word
        )

    def collate(self, items: list[str], rng: np.random.Generator) -> dict:
        tok = self.encoder.tokenizer(
            [t.strip() for t in items],
            truncation=True,
            max_length=self.encoder.max_seq_length,
            return_special_tokens_mask=True,
            return_offsets_mapping=self.whole_word,
        )
        examples = [{k: tok[k][i] for k in tok} for i in range(len(items))]
        self.collator.generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
        batch = dict(self.collator(examples))
        batch["n_tokens"] = int(batch["attention_mask"].sum())
        return batch

    def forward(self, input_ids, attention_mask, labels, token_type_ids=None) -> torch.Tensor:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)[
            "token_embeddings"
        ]
        where = labels != -100
        if not where.any():  # a batch of one-word sentences can draw no mask
            return hidden.sum() * 0.0
        logits = self.head(hidden[where])  # vocabulary projection only on masked positions
        return F.cross_entropy(logits.float(), labels[where])


def decay_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """BERT's optimiser (and HF Trainer) apply weight decay to every weight but biases and
    LayerNorm parameters."""
    decay, no_decay, seen = [], [], set()
    for name, p in model.named_parameters():
        if not p.requires_grad or id(p) in seen:  # tied weights: one entry
            continue
        seen.add(id(p))
        (no_decay if name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


class MLM(Method):
    name = "mlm"
    Config = MLMConfig
    description = "masked-language-model domain pre-training, mean pooling (TSDAE baseline)"

    def loss_chance(self, objective) -> float:
        """Masked-token cross-entropy over the vocabulary V: ln V, an upper reference (unigram
        frequencies alone score well below it)."""
        return math.log(len(objective.encoder.tokenizer))

    def train(self, corpus: list[str], ctx: TrainContext):
        c = self.config
        if not 0 < c.mask_ratio < 1:
            raise ConfigError(f"mlm: option 'mask_ratio' must be in (0, 1) (got {c.mask_ratio}).")
        seed_everything(ctx.seed)
        encoder = ctx.load_encoder(pooling=c.pooling, max_seq_length=c.max_seq_length)
        pretrained, note = load_pretrained_head(ctx.model, "AutoModelForMaskedLM")
        ctx.accounting["pretrained_lm_head"] = note
        obj = MLMObjective(encoder, build_mlm_head(encoder, pretrained), c.mask_ratio, c.whole_word)
        obj = fit(
            self,
            obj,
            corpus,
            ctx,
            make_optimizer=lambda m: grouped_adamw(m, c.lr, c.weight_decay),
            make_scheduler=lambda o: torch.optim.lr_scheduler.LambdaLR(o, linear_warmup_decay(c.steps, c.warmup_ratio)),
        )
        return obj.encoder


@hookimpl
def benchbench_register_methods(register):
    register(MLM.name, MLM)
